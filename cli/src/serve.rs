//! `neural-frame serve`: the worker. It listens on a Unix socket; each
//! renderer that connects hands over its slots once (docs/protocol.md) and
//! gets its own context, ring and imports, on a thread of its own.

mod session;

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use neural_frame_client::protocol::{ErrorCode, Message};
use neural_frame_client::wire;

use crate::ModelArgs;
use session::{Phase, Step};

/// Set by SIGINT and SIGTERM: stop accepting, drain, tell the clients, exit 0.
static STOP: AtomicBool = AtomicBool::new(false);

/// A session that stays this long in a step other than streaming is said in the log (once a step).
const STUCK: Duration = Duration::from_secs(5);
/// How often a stopping worker lists the sessions it still waits for.
const LIST_EVERY: Duration = Duration::from_secs(5);

/// What `serve` was started with.
pub(crate) struct ServeOptions {
    pub model: ModelArgs,
    pub socket: PathBuf,
    pub max_clients: usize,
    pub allow_uid: Vec<u32>,
    pub slots: usize,
    pub frame_timeout: Duration,
}

/// What every session reads.
pub(crate) struct Shared {
    pub options: ServeOptions,
    pub active: AtomicUsize,
}

/// A session's thread, as the worker watches it.
struct Running {
    who: String,
    phase: Arc<Phase>,
    /// The instance of a step already said to be stuck (0: none).
    warned: u64,
    thread: JoinHandle<()>,
}

impl Running {
    /// Says once when the session has stayed in one step (other than streaming) for `STUCK`.
    fn watch(&mut self) {
        let (step, since, instance) = self.phase.get();
        if step != Step::Streaming && instance != self.warned && since.elapsed() >= STUCK {
            self.warned = instance;
            eprintln!("neural-frame serve: {}: still {step} after {} s", self.who, STUCK.as_secs());
        }
    }

    /// Says what the session does, for a stopping worker that waits for it.
    fn list(&self) {
        let (step, since, _) = self.phase.get();
        eprintln!(
            "neural-frame serve: stopping: {} is still {step} ({:.1} s)",
            self.who,
            since.elapsed().as_secs_f64()
        );
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; zeroed is an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // A second Ctrl-C ends the process at once (a drain that hangs); calls interrupted resume.
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: the handler only stores to an atomic.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            bail!("installing the handler for signal {signal}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Binds the socket with mode 0600, replacing a stale socket file nobody listens on.
fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!("{} exists and is not a socket: pick another --socket, or remove it", path.display());
        }
        if UnixStream::connect(path).is_ok() {
            bail!("another worker is serving on {}: stop it, or pass another --socket", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("removing the stale socket {}", path.display()))?;
        eprintln!("neural-frame serve: removed the stale socket {} (nobody was listening)", path.display());
    }
    // Nobody else may connect between bind and chmod: the socket is made 0600 by the umask.
    // SAFETY: umask cannot fail; no other thread runs yet.
    let old = unsafe { libc::umask(0o177) };
    let listener = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = listener.with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} private (mode 0600)", path.display()))?;
    Ok(listener)
}

/// The peer's pid and uid (`SO_PEERCRED`).
fn peer(stream: &UnixStream) -> std::io::Result<(i32, u32)> {
    // SAFETY: ucred is plain data.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len describe a buffer of the size SO_PEERCRED writes.
    let rc = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&raw mut cred).cast(), &mut len)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cred.pid, cred.uid))
}

fn refuse(stream: &UnixStream, code: ErrorCode, message: String) {
    let _ = wire::send(stream, &Message::Error { code, message }, &[]);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

pub(crate) fn serve(options: ServeOptions) -> anyhow::Result<()> {
    options.model.check_model()?;
    install_signal_handlers()?;
    let listener = bind(&options.socket)?;
    listener.set_nonblocking(true).context("making the socket non-blocking")?;
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    eprintln!(
        "neural-frame serve: serving {} on {} (backend {:?}, at most {} clients; Ctrl-C stops)",
        options.model.model.display(),
        options.socket.display(),
        options.model.backend,
        options.max_clients
    );
    let socket = options.socket.clone();
    let shared = Arc::new(Shared { options, active: AtomicUsize::new(0) });
    let mut sessions: Vec<Running> = Vec::new();
    let mut next_id = 1u64;
    while !STOP.load(Ordering::SeqCst) {
        sessions.retain(|s| !s.thread.is_finished());
        sessions.iter_mut().for_each(Running::watch);
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                eprintln!("neural-frame serve: accepting a connection failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let id = next_id;
        next_id += 1;
        if let Err(e) = stream.set_nonblocking(false) {
            eprintln!("neural-frame serve: client {id}: refused: the socket failed ({e})");
            continue;
        }
        let (pid, uid) = match peer(&stream) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("neural-frame serve: client {id}: refused: SO_PEERCRED failed ({e})");
                refuse(&stream, ErrorCode::Permission, format!("the worker could not learn who you are: {e}"));
                continue;
            }
        };
        let who = format!("client {id} (pid {pid}, uid {uid})");
        if uid != me && !shared.options.allow_uid.contains(&uid) {
            eprintln!("neural-frame serve: {who} refused: another user (start the worker with --allow-uid {uid})");
            refuse(
                &stream,
                ErrorCode::Permission,
                format!("user {uid} may not use this worker (it runs as {me}; it allows others with --allow-uid)"),
            );
            continue;
        }
        if shared.active.load(Ordering::SeqCst) >= shared.options.max_clients {
            eprintln!("neural-frame serve: {who} refused: busy ({} clients)", shared.options.max_clients);
            refuse(
                &stream,
                ErrorCode::Busy,
                format!("the worker serves its maximum of {} clients (--max-clients)", shared.options.max_clients),
            );
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        eprintln!("neural-frame serve: {who} connected");
        let s = shared.clone();
        let phase = Arc::new(Phase::new());
        let (p, w) = (phase.clone(), who.clone());
        let spawned = std::thread::Builder::new().name(format!("client {id}")).spawn(move || {
            let reason = session::run(stream, &s, &STOP, &w, &p);
            s.active.fetch_sub(1, Ordering::SeqCst);
            eprintln!("neural-frame serve: {w} disconnected: {reason}");
        });
        match spawned {
            Ok(thread) => sessions.push(Running { who, phase, warned: 0, thread }),
            Err(e) => {
                shared.active.fetch_sub(1, Ordering::SeqCst);
                eprintln!("neural-frame serve: client {id}: refused: no thread for it ({e})");
            }
        }
    }
    eprintln!("neural-frame serve: stopping: draining {} client(s)", sessions.len());
    drop(listener);
    // The sessions end by themselves (they see STOP); the ones still running are listed
    // now and every LIST_EVERY, so that one that never ends shows where it is.
    let mut list_at = Instant::now();
    loop {
        let (ended, running): (Vec<_>, Vec<_>) = sessions.into_iter().partition(|s| s.thread.is_finished());
        for s in ended {
            let _ = s.thread.join();
        }
        sessions = running;
        if sessions.is_empty() {
            break;
        }
        if Instant::now() >= list_at {
            sessions.iter().for_each(Running::list);
            list_at += LIST_EVERY;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&socket);
    eprintln!("neural-frame serve: stopped");
    Ok(())
}
