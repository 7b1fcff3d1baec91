//! One client of the worker: the hand-over (handover.rs), then its frames, on
//! its own context. Every way a session ends returns the reason, which the
//! worker logs; faults are answered with an `Error` message first. What one
//! client can hold is bounded: messages read ahead of the session
//! (`READ_AHEAD`), Submits queued beyond its ring (`MAX_PENDING`: then the
//! worker stops reading, and the client's further Submits wait in its socket),
//! answers it leaves unread (the socket's buffer, then `--session-timeout`),
//! a frame (`--frame-timeout`) and an idle session (`--idle-timeout`).

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use neural_frame::ash::vk;
use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, Submitted, Ticket, TimelineId};
use neural_frame_client::protocol::{self, ErrorCode, Message, WireError};
use neural_frame_client::wire::{self, RecvError};

use super::Shared;
use super::watch::{StallHook, Step, Watch};

/// How long the worker waits for a client's Hello and for its Slots (each; the
/// hand-over as a whole is bounded by `--session-timeout`).
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a session that ends waits for its frames in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping worker keeps taking a client's frames.
const STOP_GRACE: Duration = Duration::from_millis(100);
/// How often a session with frames in flight looks for finished ones.
const POLL: Duration = Duration::from_micros(200);
/// Releasing a context for longer than this is said in the log.
const SLOW_RELEASE: Duration = Duration::from_secs(1);
/// Messages the reader thread reads ahead of the session.
const READ_AHEAD: usize = 4;
/// Submits a session queues beyond its ring before it stops reading from its client.
const MAX_PENDING: usize = 64;

/// Why a session ended, and the reason to log.
pub(super) struct End {
    why: Why,
    reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// A fault, answered with an Error of this code.
    Fault(ErrorCode),
    /// The client said Bye: its frames are finished and reported.
    Left,
    /// The worker stops: the frames are finished and reported, then Bye.
    Stopping,
    /// The connection broke, or the client reported a fault: the client is gone.
    Lost,
}

impl End {
    pub(super) fn fault(code: ErrorCode, reason: impl Into<String>) -> Self {
        Self { why: Why::Fault(code), reason: reason.into() }
    }
    fn lost(reason: impl Into<String>) -> Self {
        Self { why: Why::Lost, reason: reason.into() }
    }
}

impl From<WireError> for End {
    fn from(e: WireError) -> Self {
        End::fault(e.code, e.message)
    }
}

type Incoming = Result<(Message, Vec<OwnedFd>), RecvError>;

/// A session's connection: its socket, the messages its reader thread read, and
/// its watch (whose send lock every write takes).
pub(super) struct Conn<'a> {
    stream: UnixStream,
    rx: mpsc::Receiver<Incoming>,
    pub(super) watch: &'a Watch,
    /// `--session-timeout`: the hand-over's bound, and a send's.
    timeout: Duration,
}

impl Conn<'_> {
    pub(super) fn send(&self, m: &Message, fds: &[std::os::fd::RawFd]) -> Result<(), End> {
        self.watch.send(&self.stream, m, fds).map_err(|e| {
            let kind = protocol::kind_name(m.kind());
            if e.kind() == std::io::ErrorKind::WouldBlock && !self.watch.abandoned() {
                End::lost(format!(
                    "sending {kind}: the client left the worker's answers unread for {} s (--session-timeout): its \
                     socket is full",
                    self.timeout.as_secs()
                ))
            } else {
                End::lost(format!("sending {kind}: {e}"))
            }
        })
    }

    /// The next message within `timeout`; `Ok(None)` when none came.
    fn next(&self, timeout: Duration) -> Result<Option<(Message, Vec<OwnedFd>)>, End> {
        match self.rx.recv_timeout(timeout) {
            Ok(Ok((Message::Error { code, message }, _))) => {
                Err(End::lost(format!("the client reported a fault ({code:?}): {message}")))
            }
            Ok(Ok(m)) => Ok(Some(m)),
            Ok(Err(RecvError::Protocol(e))) => Err(e.into()),
            Ok(Err(RecvError::Closed)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(End::lost("the client closed the connection"))
            }
            Ok(Err(RecvError::Io(e))) => Err(End::lost(format!("the socket failed: {e}"))),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
        }
    }

    /// The next message of the hand-over: within `HANDOVER_TIMEOUT`, and before
    /// the hand-over's deadline (`--session-timeout` after the connection).
    pub(super) fn expect(&self, what: &str) -> Result<(Message, Vec<OwnedFd>), End> {
        let left = (self.watch.connected + self.timeout).saturating_duration_since(Instant::now());
        let wait = left.min(HANDOVER_TIMEOUT);
        self.next(wait)?.ok_or_else(|| {
            if wait < HANDOVER_TIMEOUT {
                End::fault(
                    ErrorCode::Timeout,
                    format!(
                        "no {what} before the hand-over's deadline: a client has {} s (--session-timeout) from \
                         connecting to its Ready",
                        self.timeout.as_secs()
                    ),
                )
            } else {
                End::fault(ErrorCode::Timeout, format!("no {what} within {HANDOVER_TIMEOUT:?}"))
            }
        })
    }
}

/// Serves one client until it leaves, faults, or the worker stops; the reason.
/// `who` names the client in the log; `watch` shows the worker what the session
/// does, and frees its place (before the client reads its Error or EOF, so that
/// it can connect again at once).
pub(crate) fn run(stream: UnixStream, shared: &Shared, stop: &AtomicBool, who: &str, watch: &Watch) -> String {
    let timeout = shared.options.session_timeout;
    // A client that leaves the answers unread blocks a send no longer than this.
    if let Err(e) = stream.set_write_timeout(Some(timeout)) {
        return format!("setting the socket's send timeout failed: {e}");
    }
    let reader_stream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return format!("duplicating the socket failed: {e}"),
    };
    // Bounded: a client that sends faster than its session takes is held back in its socket.
    let (tx, rx) = mpsc::sync_channel(READ_AHEAD);
    let reader = std::thread::spawn(move || {
        loop {
            let got = wire::recv(&reader_stream);
            let end = got.is_err();
            if tx.send(got).is_err() || end {
                break;
            }
        }
    });
    let conn = Conn { stream, rx, watch, timeout };
    let mut held = None;
    let end = match Session::start(&conn, shared, &mut held) {
        Ok(s) => {
            watch.set(Step::Streaming);
            let end = s.stream(&conn, stop, shared);
            watch.set(Step::Draining);
            s.finish(&conn, &end);
            end
        }
        Err(end) => end,
    };
    if let Some(session) = held {
        watch.set(Step::Releasing);
        let start = Instant::now();
        drop(session);
        let took = start.elapsed();
        if took > SLOW_RELEASE {
            super::say(format_args!("{who}: releasing its context took {:.1} s", took.as_secs_f64()));
        }
    }
    watch.set(Step::Closing);
    watch.free_place(&shared.active);
    if let Why::Fault(code) = end.why {
        let _ = conn.send(&Message::Error { code, message: end.reason.clone() }, &[]);
    }
    let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    drop(conn);
    watch.close();
    let _ = reader.join();
    match end.why {
        Why::Fault(code) => format!("{} ({code:?}, answered with an Error)", end.reason),
        _ => end.reason,
    }
}

/// A Submit's fields, queued until the ring has room.
struct Submit {
    frame: u64,
    input_slot: u16,
    output_slot: u16,
    rendered: u64,
    output_free: u64,
}

struct InFlight {
    frame: u64,
    ticket: Ticket,
    consumed: bool,
    /// When it was submitted: `--frame-timeout` counts from here.
    since: Instant,
}

/// A client's context and imports. Field order is teardown order: the
/// registrations go with the context.
pub(super) struct Session {
    pub(super) ctx: NeuralFrameContext,
    pub(super) inputs: Vec<InputId>,
    pub(super) outputs: Vec<OutputId>,
    pub(super) rendered: Option<TimelineId>,
    pub(super) mode: protocol::SyncMode,
    in_flight: VecDeque<InFlight>,
    /// Submits read but not run yet: the ring was full (at most `MAX_PENDING`).
    pending: VecDeque<Submit>,
    last_frame: u64,
    last_rendered: u64,
    last_output_free: u64,
}

pub(super) fn format_of(raw: u32) -> vk::Format {
    vk::Format::from_raw(raw as i32)
}

impl Session {
    /// A session on its new context, before its slots.
    pub(super) fn new(ctx: NeuralFrameContext) -> Self {
        Session {
            ctx,
            inputs: Vec::new(),
            outputs: Vec::new(),
            rendered: None,
            mode: protocol::SyncMode::Host, // chosen before the Welcome
            in_flight: VecDeque::new(),
            pending: VecDeque::new(),
            last_frame: 0,
            last_rendered: 0,
            last_output_free: 0,
        }
    }

    /// Frames until the client leaves or faults, or the worker stops. Submits run
    /// as the ring has room; beyond it they queue (`MAX_PENDING`), and then the
    /// session stops reading: the client's Submits wait in its socket.
    fn stream(&mut self, conn: &Conn<'_>, stop: &AtomicBool, shared: &Shared) -> End {
        let options = &shared.options;
        let stall = shared.stall.as_ref();
        let slots = self.ctx.slot_count();
        // When the worker stops, the frames the client sent until then (and for STOP_GRACE more) still run.
        let mut stop_at: Option<Instant> = None;
        // How the session ends once its queued Submits have run (a Bye, a fault, the worker stopping).
        let mut closing: Option<End> = None;
        let mut busy_at = Instant::now();
        loop {
            conn.watch.beat();
            if let Err(end) = self.report(conn) {
                return end;
            }
            if let Some(f) = self.in_flight.front()
                && f.since.elapsed() > options.frame_timeout
            {
                return End::fault(
                    ErrorCode::Timeout,
                    format!(
                        "frame {} did not finish within {} s of its Enqueued (--frame-timeout){}",
                        f.frame,
                        options.frame_timeout.as_secs(),
                        if self.rendered.is_some() { ": was its \"rendered\" value signalled?" } else { "" }
                    ),
                );
            }
            while self.in_flight.len() < slots
                && let Some(s) = self.pending.pop_front()
            {
                if let Err(end) = self.submit(conn, s, stall) {
                    return end;
                }
            }
            if stop_at.is_none() && stop.load(Ordering::SeqCst) {
                stop_at = Some(Instant::now() + STOP_GRACE);
            }
            let left = stop_at.map(|t| t.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) && closing.is_none() {
                closing = Some(End { why: Why::Stopping, reason: "the worker is stopping".into() });
            }
            if self.pending.is_empty()
                && let Some(end) = closing.take()
            {
                return end;
            }
            if !self.in_flight.is_empty() || !self.pending.is_empty() {
                busy_at = Instant::now();
            } else if let Some(idle) = options.idle_timeout
                && busy_at.elapsed() >= idle
            {
                return End::fault(
                    ErrorCode::Timeout,
                    format!(
                        "idle for {} s with no frame in flight (--idle-timeout): the place is freed for others; \
                         connect again to go on",
                        idle.as_secs()
                    ),
                );
            }
            // With frames in flight the session polls them (with --spin-wait, without sleeping: the post
            // pass of `--post-wait host` is submitted by these polls).
            let wait = match (self.in_flight.is_empty(), self.ctx.tuning().spin_wait) {
                (true, _) => Duration::from_millis(50),
                (false, true) => Duration::ZERO,
                (false, false) => POLL,
            };
            let wait = left.filter(|l| !l.is_zero()).map_or(wait, |l| wait.min(l));
            if closing.is_some() || self.pending.len() >= MAX_PENDING {
                // Not reading: the ring is full (the queued Submits wait for it).
                std::thread::sleep(wait);
                continue;
            }
            let got = match conn.next(wait) {
                Ok(Some((m, _))) => m,
                Ok(None) => continue,
                // A fault of the client's bytes: its Submits before it still run, then the Error.
                Err(end) if matches!(end.why, Why::Fault(_)) => {
                    closing = Some(end);
                    continue;
                }
                // Gone, or it reported a fault: nothing more is run or reported.
                Err(end) => return end,
            };
            busy_at = Instant::now();
            match got {
                Message::Submit { frame, input_slot, output_slot, rendered, output_free } => {
                    self.pending.push_back(Submit { frame, input_slot, output_slot, rendered, output_free });
                }
                Message::Bye { reason } => {
                    closing = Some(End { why: Why::Left, reason: format!("the client said goodbye ({reason})") });
                }
                other => {
                    closing = Some(End::fault(
                        ErrorCode::State,
                        format!("a {} message while streaming frames", protocol::kind_name(other.kind())),
                    ));
                }
            }
        }
    }

    /// Runs one Submit (the ring has room for it: it does not wait), answered with its Enqueued.
    fn submit(&mut self, conn: &Conn<'_>, s: Submit, stall: Option<&StallHook>) -> Result<(), End> {
        let Submit { frame, input_slot, output_slot, rendered, output_free } = s;
        if frame != self.last_frame + 1 {
            return Err(End::fault(
                ErrorCode::Backwards,
                format!("frame {frame} after frame {}: frames are numbered 1, 2, 3, …", self.last_frame),
            ));
        }
        let (input, output) = match (self.inputs.get(input_slot as usize), self.outputs.get(output_slot as usize)) {
            (Some(&i), Some(&o)) => (i, o),
            _ => {
                return Err(End::fault(
                    ErrorCode::SlotRange,
                    format!(
                        "frame {frame}: slots {input_slot} → {output_slot}, of {} input and {} output slots",
                        self.inputs.len(),
                        self.outputs.len()
                    ),
                ));
            }
        };
        let mut f = Frame::new(input, output);
        match (self.mode, self.rendered) {
            (protocol::SyncMode::Gpu, Some(t)) => {
                if rendered <= self.last_rendered || (output_free != 0 && output_free < self.last_output_free) {
                    return Err(End::fault(
                        ErrorCode::Backwards,
                        format!(
                            "frame {frame}: rendered {rendered} after {}, output free {output_free} after {}: the \
                             values must rise (rendered strictly)",
                            self.last_rendered, self.last_output_free
                        ),
                    ));
                }
                f = f.wait_for(t, rendered);
                if output_free > 0 {
                    f = f.output_free_after(t, output_free);
                }
            }
            _ if rendered != 0 || output_free != 0 => {
                return Err(End::fault(
                    ErrorCode::State,
                    format!("frame {frame}: semaphore values in host mode (they must be 0)"),
                ));
            }
            _ => {}
        }
        (self.last_frame, self.last_rendered) = (frame, rendered);
        self.last_output_free = self.last_output_free.max(output_free);
        if let Some(hook) = stall {
            hook.at("frame", conn.watch.client);
        }
        let ticket = match self.ctx.submit(f) {
            Ok(Submitted::Frame(t)) => t,
            Ok(Submitted::Skipped) => return Err(End::fault(ErrorCode::Inference, "the frame was skipped")),
            Err(e) => return Err(End::fault(ErrorCode::Inference, format!("frame {frame}: {e}"))),
        };
        conn.send(&Message::Enqueued { frame, input_consumed: ticket.value(), output_ready: ticket.value() }, &[])?;
        self.in_flight.push_back(InFlight { frame, ticket, consumed: false, since: Instant::now() });
        Ok(())
    }

    /// Tells the client of every frame that got further, in order, without waiting.
    fn report(&mut self, conn: &Conn<'_>) -> Result<(), End> {
        while let Some(f) = self.in_flight.front_mut() {
            if !f.consumed {
                match self.ctx.try_input_consumed(&f.ticket) {
                    Ok(true) => {
                        f.consumed = true;
                        conn.send(&Message::Consumed { frame: f.frame }, &[])?;
                    }
                    Ok(false) => return Ok(()),
                    Err(e) => return Err(End::fault(ErrorCode::Inference, format!("frame {}: {e}", f.frame))),
                }
            }
            let (frame, ticket) = (f.frame, f.ticket);
            match self.ctx.try_wait(&ticket) {
                Ok(Some(stats)) => {
                    conn.send(&Message::Done { frame, infer_ms: stats.infer_ms }, &[])?;
                    self.in_flight.pop_front();
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(End::fault(ErrorCode::Inference, format!("frame {frame}: {e}"))),
            }
        }
        Ok(())
    }

    /// Finishes the frames in flight: reported to a client still there (then
    /// Bye when the worker stops), or, for one that is gone, released by
    /// signalling its timeline from the host so that nothing waits forever.
    fn finish(&mut self, conn: &Conn<'_>, end: &End) {
        let gone = !matches!(end.why, Why::Left | Why::Stopping) || conn.watch.abandoned();
        if let (true, Some(t)) = (gone, self.rendered) {
            let value = self.last_rendered.max(self.last_output_free);
            if let Err(e) = self.ctx.release_timeline(t, value) {
                eprintln!("neural-frame serve: error: releasing a gone client's timeline failed: {e}");
            }
        }
        let mut deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut released = gone;
        while let Some(f) = self.in_flight.pop_front() {
            conn.watch.beat();
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = match self.ctx.wait_timeout(&f.ticket, left) {
                Err(e) if !released && e.kind() == neural_frame::ErrorKind::Timeout => {
                    // A client that left (or the worker stopping) with a frame waiting on a value it
                    // never signalled: released as for a client gone, then waited for once more.
                    super::say(format_args!("frame {} did not finish ({e}): releasing the client's timeline", f.frame));
                    released = true;
                    if let Some(t) = self.rendered {
                        let _ = self.ctx.release_timeline(t, self.last_rendered.max(self.last_output_free));
                    }
                    deadline = Instant::now() + DRAIN_TIMEOUT;
                    self.ctx.wait_timeout(&f.ticket, DRAIN_TIMEOUT)
                }
                other => other,
            };
            match waited {
                Ok(stats) if !gone => {
                    if !f.consumed {
                        let _ = conn.send(&Message::Consumed { frame: f.frame }, &[]);
                    }
                    let _ = conn.send(&Message::Done { frame: f.frame, infer_ms: stats.infer_ms }, &[]);
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("neural-frame serve: error: frame {} did not finish: {e}", f.frame);
                    break;
                }
            }
        }
        if end.why == Why::Stopping {
            let _ = conn.send(&Message::Bye { reason: "the worker is stopping".into() }, &[]);
        }
    }
}
