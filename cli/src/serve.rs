//! `neural-frame serve`: the worker. It listens on a Unix socket; each
//! renderer that connects hands over its slots once (docs/protocol.md) and
//! gets its own context, ring and imports, on a thread of its own. The worker's
//! thread watches every session: one past its deadline (`--session-timeout`:
//! the hand-over, or any one step such as a driver call on a frame) is
//! abandoned, its client told and its place freed, and a stopping worker waits
//! for its sessions no longer than that either.

mod handover;
mod memory;
mod session;
mod watch;

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use neural_frame_client::protocol::{ErrorCode, Message};
use neural_frame_client::wire;

use crate::ModelArgs;
use watch::{StallHook, Watch};

// Set by SIGINT and SIGTERM: stop accepting, drain, tell the clients, exit 0.
use crate::signals::STOP;

/// A session that stays this long in one step without progress is said in the log (once a step).
const STUCK: Duration = Duration::from_secs(5);
/// How often a stopping worker lists the sessions it still waits for.
const LIST_EVERY: Duration = Duration::from_secs(5);
/// How long past its deadline a session's own thread has to end it (it answers
/// `Error(Timeout)` itself when it is not stuck) before the worker abandons it.
const GRACE: Duration = Duration::from_secs(1);

/// A line of the worker's log, unless `--quiet` (errors only).
pub(crate) fn say(line: std::fmt::Arguments<'_>) {
    if !crate::logger::quiet() {
        eprintln!("neural-frame serve: {line}");
    }
}

/// What `serve` was started with.
pub(crate) struct ServeOptions {
    pub model: ModelArgs,
    pub socket: PathBuf,
    pub max_clients: usize,
    pub allow_uid: Vec<u32>,
    pub slots: usize,
    pub frame_timeout: Duration,
    /// The hand-over's bound, any one step's, and a stopping worker's wait for its sessions.
    pub session_timeout: Duration,
    /// How long a session may stay idle after its Ready; `None`: for ever.
    pub idle_timeout: Option<Duration>,
}

/// How long the worker lets a session be before it abandons it.
struct Bounds {
    /// `--session-timeout`: the hand-over, from the connection; a stopping worker's wait.
    session: Duration,
    /// Any other step without progress: `--session-timeout`, or `--frame-timeout` where
    /// longer (on the CPU backend a frame's Submit runs the model, as long as it takes).
    step: Duration,
}

/// What every session reads.
pub(crate) struct Shared {
    pub options: ServeOptions,
    pub active: AtomicUsize,
    /// The test hook `NEURAL_FRAME_TEST_HOOK_STALL`, when set.
    pub stall: Option<StallHook>,
}

/// A session's thread, as the worker watches it.
struct Running {
    who: String,
    watch: Arc<Watch>,
    /// The instance of a step already said to be stuck (0: none).
    warned: u64,
    thread: JoinHandle<()>,
}

impl Running {
    /// Says once when the session has stayed in one step without progress for `STUCK`.
    fn watch(&mut self) {
        let (step, since, instance) = self.watch.get();
        if instance != self.warned && since.elapsed() >= STUCK && !self.watch.abandoned() {
            self.warned = instance;
            say(format_args!("{}: {step}, no progress for {} s", self.who, STUCK.as_secs()));
        }
    }

    /// Abandons the session when it is past its deadline, or past `by` (a
    /// stopping worker's); whether it was abandoned now.
    fn enforce(&self, bounds: &Bounds, by: Option<Instant>, active: &AtomicUsize) -> bool {
        if self.watch.abandoned() {
            return false;
        }
        let (step, since, _) = self.watch.get();
        let now = Instant::now();
        let why = if now >= self.watch.deadline(bounds.session, bounds.step) + GRACE {
            if step.hand_over() {
                format!(
                    "its hand-over (connecting to Ready) took longer than {} s (--session-timeout); it is stuck {step}",
                    bounds.session.as_secs()
                )
            } else {
                format!(
                    "it made no progress for {:.0} s while {step} (--session-timeout {} s{})",
                    since.elapsed().as_secs_f64(),
                    bounds.session.as_secs(),
                    if bounds.step > bounds.session { ", or --frame-timeout where longer" } else { "" }
                )
            }
        } else if by.is_some_and(|b| now >= b) {
            format!(
                "the worker is stopping and has waited {} s (--session-timeout) for it, {step}",
                bounds.session.as_secs()
            )
        } else {
            return false;
        };
        say(format_args!("{} abandoned: {why}; its place is freed", self.who));
        self.watch.abandon(active, format!("the worker gave up on this session: {why}"));
        true
    }

    /// Says what the session does, for a stopping worker that waits for it.
    fn list(&self) {
        let (step, since, _) = self.watch.get();
        say(format_args!("stopping: {} is still {step} ({:.1} s)", self.who, since.elapsed().as_secs_f64()));
    }
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
        say(format_args!("removed the stale socket {} (nobody was listening)", path.display()));
    }
    // The socket is bound and listening under a name of its own in the same directory, then
    // renamed into place: whoever waits for the path to appear finds it listening (between
    // bind(2) and listen(2) a connection is refused). A name that would not fit a socket
    // address binds the path itself.
    let staged = staging_name(path);
    let at = staged.as_deref().unwrap_or(path);
    if let Some(s) = &staged {
        let _ = std::fs::remove_file(s);
    }
    // Nobody else may connect between bind and chmod: the socket is made 0600 by the umask.
    // SAFETY: umask cannot fail; no other thread runs yet.
    let old = unsafe { libc::umask(0o177) };
    let listener = UnixListener::bind(at);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = listener.with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} private (mode 0600)", path.display()))?;
    if let Some(s) = &staged
        && let Err(e) = std::fs::rename(s, path)
    {
        let _ = std::fs::remove_file(s);
        return Err(e).with_context(|| format!("moving the socket into place at {}", path.display()));
    }
    Ok(listener)
}

/// `dir/.name.<pid>.new` beside `path`, where it fits a socket address (107 bytes).
fn staging_name(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let staged = path.with_file_name(format!(".{name}.{}.new", std::process::id()));
    (staged.as_os_str().len() <= 107).then_some(staged)
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

/// Hands the memory that an ended session freed back to the system: the allocator
/// keeps freed memory in its arenas, and a worker whose sessions come and go (each
/// builds a context) would otherwise keep the peak of every burst of clients.
fn give_back_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory of the allocator's own.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn refuse(stream: &UnixStream, code: ErrorCode, message: String) {
    let _ = wire::send(stream, &Message::Error { code, message }, &[]);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Refuses, before listening, a model that the contract refuses for every frame
/// (its inputs, outputs or element types, a scale that is not whole), rather than
/// answering every client's Hello with it: one context of the worker's options is
/// built at the probe size (one slot) and dropped. A refusal of that frame size
/// alone (a static input shape), or of the device, is each client's, at its Hello.
fn check_contract(model: &ModelArgs) -> anyhow::Result<()> {
    let (w, h) = neural_frame::PROBE_SIZE;
    match model.builder(w, h).slots(1).build() {
        Ok(ctx) => {
            log::info!(
                "the model's contract: {} → {}, {}",
                ctx.contract().input.describe(),
                ctx.contract().output.describe(),
                ctx.contract().scale
            );
            Ok(())
        }
        Err(e)
            if e.kind() == neural_frame::ErrorKind::ModelContract && !e.to_string().contains("static input shape") =>
        {
            Err(anyhow::Error::new(e)
                .context(format!("{} cannot serve any frame, so the worker does not start", model.model.display())))
        }
        Err(e) => {
            log::warn!(
                "a trial context at {w}×{h} failed ({e}); each client is told at its Hello if this holds for it"
            );
            Ok(())
        }
    }
}

/// Ends the process at once with exit code 0, leaving threads stuck in driver
/// calls where they are: exit's handlers (the drivers' and ONNX Runtime's) could
/// wait for those threads' locks.
fn exit_leaving_stuck_threads(socket: &Path, stuck: usize) -> ! {
    let _ = std::fs::remove_file(socket);
    say(format_args!("stopped ({stuck} abandoned session(s) still in a driver call are left behind)"));
    // SAFETY: _exit ends the process; nothing after it runs.
    unsafe { libc::_exit(0) }
}

pub(crate) fn serve(options: ServeOptions) -> anyhow::Result<()> {
    crate::signals::install(0)?;
    options.model.check_model()?;
    let stall = StallHook::from_env()?;
    check_contract(&options.model)?;
    let listener = bind(&options.socket)?;
    crate::signals::drain(130);
    listener.set_nonblocking(true).context("making the socket non-blocking")?;
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    say(format_args!(
        "serving {} on {} (backend {}, at most {} clients, sessions bounded by {} s, idle ones ended after {}; \
         Ctrl-C stops)",
        options.model.model.display(),
        options.socket.display(),
        options.model.backend.name(),
        options.max_clients,
        options.session_timeout.as_secs(),
        options.idle_timeout.map_or("never".to_string(), |t| format!("{} s", t.as_secs()))
    ));
    let socket = options.socket.clone();
    let timeout = options.session_timeout;
    let bounds = Bounds { session: timeout, step: timeout.max(options.frame_timeout) };
    let shared = Arc::new(Shared { options, active: AtomicUsize::new(0), stall });
    let mut sessions: Vec<Running> = Vec::new();
    let mut next_id = 1u64;
    while !STOP.load(Ordering::SeqCst) {
        sessions.retain(|s| !s.thread.is_finished());
        for s in &mut sessions {
            s.watch();
            s.enforce(&bounds, None, &shared.active);
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                eprintln!("neural-frame serve: error: accepting a connection failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let id = next_id;
        next_id += 1;
        let watcher = match stream.set_nonblocking(false).and_then(|()| stream.try_clone()) {
            Ok(w) => w,
            Err(e) => {
                say(format_args!("client {id}: refused: the socket failed ({e})"));
                continue;
            }
        };
        let (pid, uid) = match peer(&stream) {
            Ok(p) => p,
            Err(e) => {
                say(format_args!("client {id}: refused: SO_PEERCRED failed ({e})"));
                refuse(&stream, ErrorCode::Permission, format!("the worker could not learn who you are: {e}"));
                continue;
            }
        };
        let who = format!("client {id} (pid {pid}, uid {uid})");
        if uid != me && !shared.options.allow_uid.contains(&uid) {
            say(format_args!("{who} refused: another user (start the worker with --allow-uid {uid})"));
            refuse(
                &stream,
                ErrorCode::Permission,
                format!("user {uid} may not use this worker (it runs as {me}; it allows others with --allow-uid)"),
            );
            continue;
        }
        if shared.active.load(Ordering::SeqCst) >= shared.options.max_clients {
            say(format_args!("{who} refused: busy ({} clients)", shared.options.max_clients));
            refuse(
                &stream,
                ErrorCode::Busy,
                format!("the worker serves its maximum of {} clients (--max-clients)", shared.options.max_clients),
            );
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        say(format_args!("{who} connected"));
        let s = shared.clone();
        let watch = Arc::new(Watch::new(watcher, id));
        let (wt, w) = (watch.clone(), who.clone());
        let spawned = std::thread::Builder::new().name(format!("client {id}")).spawn(move || {
            let reason = session::run(stream, &s, &STOP, &w, &wt);
            give_back_freed_memory();
            wt.free_place(&s.active);
            let after = if wt.abandoned() { " (its abandoned session's thread ended now)" } else { "" };
            say(format_args!("{w} disconnected: {reason}{after}"));
        });
        match spawned {
            Ok(thread) => sessions.push(Running { who, watch, warned: 0, thread }),
            Err(e) => {
                watch.free_place(&shared.active);
                say(format_args!("client {id}: refused: no thread for it ({e})"));
            }
        }
    }
    // The sessions end by themselves (they see STOP), each within its own bounds; the worker waits
    // for them at most `timeout` from now, abandons those still running then, and lists the ones it
    // waits for now and every LIST_EVERY.
    let by = Instant::now() + timeout;
    let waited = sessions.iter().filter(|s| !s.watch.abandoned()).count();
    say(format_args!("stopping: draining {waited} client(s), for at most {} s (--session-timeout)", timeout.as_secs()));
    drop(listener);
    let mut list_at = Instant::now();
    loop {
        sessions.retain(|s| !s.thread.is_finished());
        for s in &sessions {
            s.enforce(&bounds, Some(by), &shared.active);
        }
        let live: Vec<&Running> = sessions.iter().filter(|s| !s.watch.abandoned()).collect();
        if live.is_empty() {
            break;
        }
        if Instant::now() >= list_at {
            live.iter().for_each(|s| s.list());
            list_at += LIST_EVERY;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let stuck = sessions.iter().filter(|s| !s.thread.is_finished()).count();
    if stuck > 0 {
        exit_leaving_stuck_threads(&socket, stuck);
    }
    for s in sessions {
        let _ = s.thread.join();
    }
    let _ = std::fs::remove_file(&socket);
    say(format_args!("stopped"));
    Ok(())
}
