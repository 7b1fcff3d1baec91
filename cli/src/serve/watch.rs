//! What the worker's thread knows of each session: its step and since when,
//! whether it holds a client place, and a handle on its socket, so that a
//! session whose thread is stuck (a driver call that never returns) can be
//! abandoned from outside: its client told, its socket shut, its place freed.

use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use neural_frame_client::protocol::{ErrorCode, Message};
use neural_frame_client::wire;

/// What a session is doing; the worker reports one that stays in a step too
/// long, abandons one past its deadline, and lists those it waits for when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Handshake,
    Building,
    Importing,
    Streaming,
    Draining,
    Releasing,
    Closing,
}

impl Step {
    /// The steps of the hand-over, bounded together from the connection on.
    pub(crate) fn hand_over(self) -> bool {
        matches!(self, Step::Handshake | Step::Building | Step::Importing)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Handshake => "in its handshake",
            Step::Building => "building its context",
            Step::Importing => "importing its slots",
            Step::Streaming => "streaming",
            Step::Draining => "draining its frames",
            Step::Releasing => "releasing its context",
            Step::Closing => "closing the connection",
        })
    }
}

/// A session as both threads see it: written by the session's thread, read
/// (and, past a deadline, acted on) by the worker's.
pub(crate) struct Watch {
    /// The step, since when it made progress, and which instance of it (every `set` starts a new one).
    phase: Mutex<(Step, Instant, u64)>,
    /// When the client connected: the hand-over's deadline counts from here.
    pub(crate) connected: Instant,
    /// The session holds a client place (`Shared::active`); freed once, by whichever thread comes first.
    place: AtomicBool,
    /// The worker gave up on the session: nothing more is sent on its socket.
    abandoned: AtomicBool,
    /// Held for every write to the socket, so that two messages never interleave.
    send: Mutex<()>,
    /// The worker's own handle on the session's socket, until the session closes it.
    stream: Mutex<Option<UnixStream>>,
    /// The client's number in the worker's log.
    pub(crate) client: u64,
}

impl Watch {
    /// A session that holds a client place from now on.
    pub(crate) fn new(stream: UnixStream, client: u64) -> Self {
        let now = Instant::now();
        Self {
            phase: Mutex::new((Step::Handshake, now, 1)),
            connected: now,
            place: AtomicBool::new(true),
            abandoned: AtomicBool::new(false),
            send: Mutex::new(()),
            stream: Mutex::new(Some(stream)),
            client,
        }
    }

    pub(crate) fn set(&self, step: Step) {
        let mut p = self.lock();
        *p = (step, Instant::now(), p.2 + 1);
    }

    /// The session made progress in its step (its streaming loop comes round).
    pub(crate) fn beat(&self) {
        self.lock().1 = Instant::now();
    }

    pub(crate) fn get(&self) -> (Step, Instant, u64) {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, (Step, Instant, u64)> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the session's current step is due: the hand-over `hand_over` after the
    /// connection, any other step `step` after its last progress. Streaming makes
    /// progress every turn of its loop (at least every 50 ms), so only a call that
    /// does not return (a frame's driver call, a send) lets it pass.
    pub(crate) fn deadline(&self, hand_over: Duration, step: Duration) -> Instant {
        let (now, since, _) = self.get();
        if now.hand_over() { self.connected + hand_over } else { since + step }
    }

    /// Frees the session's client place, once.
    pub(crate) fn free_place(&self, active: &AtomicUsize) {
        if self.place.swap(false, Ordering::SeqCst) {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// Sends `m` unless the session was abandoned; the sends of both threads take turns.
    pub(crate) fn send(&self, stream: &UnixStream, m: &Message, fds: &[std::os::fd::RawFd]) -> std::io::Result<()> {
        let _turn = self.send.lock().unwrap_or_else(PoisonError::into_inner);
        if self.abandoned() {
            return Err(std::io::Error::other("the worker abandoned the session (--session-timeout)"));
        }
        wire::send(stream, m, fds)
    }

    /// Gives up on a session whose thread is stuck: frees its place, tells its
    /// client (an `Error(Timeout)`, unless its thread is stuck in a send on the
    /// socket, which the shutdown then ends) and shuts its socket. The thread
    /// keeps its context until its call returns, then releases it and ends.
    pub(crate) fn abandon(&self, active: &AtomicUsize, message: String) {
        if self.abandoned.swap(true, Ordering::SeqCst) {
            return;
        }
        self.free_place(active);
        let held = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(stream) = held.as_ref() else { return };
        // Never block here: the socket goes non-blocking (for the session's handles too, which
        // share it: their calls now fail at once), and the send's turn is taken only if free.
        let _ = stream.set_nonblocking(true);
        let tell = || wire::send(stream, &Message::Error { code: ErrorCode::Timeout, message: message.clone() }, &[]);
        match self.send.try_lock() {
            Ok(_turn) => {
                let _ = tell();
            }
            Err(TryLockError::Poisoned(p)) => {
                let _turn = p.into_inner();
                let _ = tell();
            }
            Err(TryLockError::WouldBlock) => {}
        }
        let _ = stream.shutdown(Shutdown::Both);
    }

    /// The session is over: the worker's handle on its socket is closed.
    pub(crate) fn close(&self) {
        self.stream.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

/// `NEURAL_FRAME_TEST_HOOK_STALL=STEP:SECONDS[:CLIENTS]`, a test hook (never set
/// it in production): the sessions of the clients numbered in CLIENTS (`2` or
/// `2,5`: the worker's connection numbers, as its log names them; every client
/// when left out) sleep SECONDS at STEP (`building`, `importing`, or `frame`: in
/// their first Submit's call), as a driver call that does not return would hold
/// them. The tests make stuck sessions with it; a malformed value is an error at start.
pub(crate) struct StallHook {
    step: String,
    pause: Duration,
    clients: Option<Vec<u64>>,
    /// The clients whose stall is spent (a session stalls once).
    spent: Mutex<Vec<u64>>,
}

pub(crate) const STALL_HOOK: &str = "NEURAL_FRAME_TEST_HOOK_STALL";

impl StallHook {
    /// The hook from the environment, or an error naming what is wrong with it.
    pub(crate) fn from_env() -> anyhow::Result<Option<Self>> {
        let Some(v) = std::env::var_os(STALL_HOOK) else { return Ok(None) };
        let v = v.to_string_lossy().into_owned();
        let bad = || {
            anyhow::anyhow!(
                "{STALL_HOOK}={v}: this test hook takes STEP:SECONDS[:CLIENTS], STEP one of building, importing and \
                 frame, CLIENTS client numbers such as 2,5 (unset it outside tests)"
            )
        };
        let mut parts = v.split(':');
        let (Some(step), Some(secs)) = (parts.next(), parts.next()) else { return Err(bad()) };
        let clients = parts
            .next()
            .map(|list| {
                list.split(',').map(|n| n.trim().parse::<u64>().map_err(|_| bad())).collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        if parts.next().is_some() || !["building", "importing", "frame"].contains(&step) {
            return Err(bad());
        }
        let secs: u64 = secs.parse().map_err(|_| bad())?;
        let whom = clients.as_ref().map_or("every client".to_string(), |c| format!("clients {c:?}"));
        super::say(format_args!("{STALL_HOOK} is set (a test hook): {whom} stall {secs} s {step}"));
        Ok(Some(Self { step: step.into(), pause: Duration::from_secs(secs), clients, spent: Mutex::new(Vec::new()) }))
    }

    /// Sleeps here if this is the hook's step, for one of its clients, the first time.
    pub(crate) fn at(&self, step: &str, client: u64) {
        if self.step != step || self.clients.as_ref().is_some_and(|c| !c.contains(&client)) {
            return;
        }
        {
            let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
            if spent.contains(&client) {
                return;
            }
            spent.push(client);
        }
        std::thread::sleep(self.pause);
    }
}
