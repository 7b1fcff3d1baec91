//! One client of the worker: the hand-over, then its frames, on its own
//! context. Every way a session ends returns the reason, which the worker logs;
//! faults are answered with an `Error` message first.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};

use neural_frame::ash::vk;
use neural_frame::{
    BufferImport, DeviceIdentity, DeviceSelector, Frame, InputId, MemoryImport, NeuralFrameContext, OutputId,
    PixelLayout, SemaphoreImport, Submitted, SyncMode, Ticket, TimelineId,
};
use neural_frame_client::protocol::{self, ErrorCode, Geometry, Message, SlotMemory, WireError};
use neural_frame_client::wire::{self, RecvError};

use super::Shared;

/// How long the worker waits for a client's Hello and for its Slots.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a session that ends waits for its frames in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping worker keeps taking a client's frames.
const STOP_GRACE: Duration = Duration::from_millis(100);
/// How often a session with frames in flight looks for finished ones.
const POLL: Duration = Duration::from_micros(200);
/// Releasing a context for longer than this is said in the log.
const SLOW_RELEASE: Duration = Duration::from_secs(1);

/// What a session is doing; the worker reports one that stays in a step
/// (other than streaming) too long, and the steps of those it waits for when it stops.
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

/// A session's step, since when, and which instance of it (every `set` starts a
/// new one): written by the session's thread, read by the worker's.
pub(crate) struct Phase(Mutex<(Step, Instant, u64)>);

impl Phase {
    pub(crate) fn new() -> Self {
        Self(Mutex::new((Step::Handshake, Instant::now(), 1)))
    }

    pub(crate) fn set(&self, step: Step) {
        let mut p = self.lock();
        *p = (step, Instant::now(), p.2 + 1);
    }

    pub(crate) fn get(&self) -> (Step, Instant, u64) {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, (Step, Instant, u64)> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a session ended, and the reason to log.
struct End {
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
    /// The connection broke: the client is gone.
    Lost,
}

impl End {
    fn fault(code: ErrorCode, reason: impl Into<String>) -> Self {
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

struct Conn {
    stream: UnixStream,
    rx: mpsc::Receiver<Incoming>,
}

impl Conn {
    fn send(&self, m: &Message, fds: &[std::os::fd::RawFd]) -> Result<(), End> {
        wire::send(&self.stream, m, fds)
            .map_err(|e| End::lost(format!("sending {}: {e}", protocol::kind_name(m.kind()))))
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

    fn expect(&self, what: &str) -> Result<(Message, Vec<OwnedFd>), End> {
        self.next(HANDOVER_TIMEOUT)?
            .ok_or_else(|| End::fault(ErrorCode::Timeout, format!("no {what} within {HANDOVER_TIMEOUT:?}")))
    }
}

/// Serves one client until it leaves, faults, or the worker stops; the reason.
/// `who` names the client in the log; `phase` shows the worker what the session does.
pub(crate) fn run(stream: UnixStream, shared: &Shared, stop: &AtomicBool, who: &str, phase: &Phase) -> String {
    let reader_stream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return format!("duplicating the socket failed: {e}"),
    };
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        loop {
            let got = wire::recv(&reader_stream);
            let end = got.is_err();
            if tx.send(got).is_err() || end {
                break;
            }
        }
    });
    let conn = Conn { stream, rx };
    let mut held = None;
    let end = match Session::start(&conn, shared, phase, &mut held) {
        Ok(s) => {
            phase.set(Step::Streaming);
            let end = s.stream(&conn, stop);
            phase.set(Step::Draining);
            s.finish(&conn, &end);
            end
        }
        Err(end) => end,
    };
    if let Some(session) = held {
        phase.set(Step::Releasing);
        let start = Instant::now();
        drop(session);
        let took = start.elapsed();
        if took > SLOW_RELEASE {
            eprintln!("neural-frame serve: {who}: releasing its context took {:.1} s", took.as_secs_f64());
        }
    }
    phase.set(Step::Closing);
    if let Why::Fault(code) = end.why {
        let _ = conn.send(&Message::Error { code, message: end.reason.clone() }, &[]);
    }
    let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    drop(conn);
    let _ = reader.join();
    match end.why {
        Why::Fault(code) => format!("{} ({code:?}, answered with an Error)", end.reason),
        _ => end.reason,
    }
}

struct InFlight {
    frame: u64,
    ticket: Ticket,
    consumed: bool,
}

/// A client's context and imports. Field order is teardown order: the
/// registrations go with the context.
struct Session {
    ctx: NeuralFrameContext,
    inputs: Vec<InputId>,
    outputs: Vec<OutputId>,
    rendered: Option<TimelineId>,
    mode: protocol::SyncMode,
    in_flight: VecDeque<InFlight>,
    last_frame: u64,
    last_rendered: u64,
    last_output_free: u64,
}

fn format_of(raw: u32) -> vk::Format {
    vk::Format::from_raw(raw as i32)
}

impl Session {
    /// The hand-over, up to the Ready. The session goes into `held` as soon as
    /// its context is built, so that the caller releases it, whatever the outcome.
    fn start<'a>(
        conn: &Conn,
        shared: &Shared,
        phase: &Phase,
        held: &'a mut Option<Session>,
    ) -> Result<&'a mut Session, End> {
        let options = &shared.options;
        let (hello, _) = conn.expect("Hello")?;
        let Message::Hello { version, device_uuid, driver_uuid, input, input_slots, output_slots, sync_modes, model } =
            hello
        else {
            return Err(End::fault(
                ErrorCode::State,
                format!("a {} message before the Hello", protocol::kind_name(hello.kind())),
            ));
        };
        if version != protocol::VERSION {
            return Err(End::fault(
                ErrorCode::Version,
                format!("protocol version {version}: this worker speaks version {}", protocol::VERSION),
            ));
        }
        for (n, what) in [(input_slots, "input"), (output_slots, "output")] {
            if !(1..=protocol::MAX_SLOTS).contains(&n) {
                return Err(End::fault(
                    ErrorCode::Malformed,
                    format!("{n} {what} slots: 1 to {}", protocol::MAX_SLOTS),
                ));
            }
        }
        let wanted = &options.model.model;
        let names = [
            wanted.to_string_lossy().into_owned(),
            wanted.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            wanted.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        ];
        if !model.is_empty() && !names.contains(&model) {
            return Err(End::fault(
                ErrorCode::Model,
                format!("the client asks for the model `{model}`; this worker serves {} only", wanted.display()),
            ));
        }
        let format = format_of(input.format);
        let bpp = neural_frame_client::bytes_per_pixel(format).ok_or_else(|| {
            End::fault(
                ErrorCode::Format,
                format!(
                    "the input format {format:?} ({}): the worker takes R8G8B8A8_UNORM/_SRGB, B8G8R8A8_UNORM/_SRGB \
                     and R16G16B16A16_SFLOAT",
                    input.format
                ),
            )
        })?;
        let packed = (input.width as u64).checked_mul(bpp);
        if input.width == 0
            || input.height == 0
            || packed.is_none_or(|p| input.row_pitch < p)
            || input.row_pitch % 4 != 0
            || input.bytes().is_none()
        {
            return Err(End::fault(
                ErrorCode::Format,
                format!(
                    "an input of {}×{} with a row pitch of {} bytes: the sides must be positive and the pitch a \
                     multiple of 4 of at least width × {bpp}",
                    input.width, input.height, input.row_pitch
                ),
            ));
        }
        // The worker's context goes on the client's GPU, found by its UUID (unless --device names one).
        let mut builder =
            options.model.builder(input.width, input.height).slots(options.slots).frame_timeout(options.frame_timeout);
        if options.model.device == DeviceSelector::Auto {
            builder = builder.device(DeviceSelector::Uuid(device_uuid));
        }
        phase.set(Step::Building);
        let ctx = builder.build().map_err(|e| match e.kind() {
            neural_frame::ErrorKind::NoDevice => End::fault(
                ErrorCode::WrongDevice,
                format!(
                    "no GPU of the worker's has the client's deviceUUID {}: {e}",
                    neural_frame::format_uuid(&device_uuid)
                ),
            ),
            neural_frame::ErrorKind::InvalidArgument
            | neural_frame::ErrorKind::Unsupported
            | neural_frame::ErrorKind::ModelContract => {
                End::fault(ErrorCode::Format, format!("the model cannot take this frame: {e}"))
            }
            _ => End::fault(ErrorCode::Inference, format!("setting up the model failed: {e}")),
        })?;
        phase.set(Step::Handshake);
        let session = held.insert(Session {
            ctx,
            inputs: Vec::new(),
            outputs: Vec::new(),
            rendered: None,
            mode: protocol::SyncMode::Host, // chosen below, before the Welcome
            in_flight: VecDeque::new(),
            last_frame: 0,
            last_rendered: 0,
            last_output_free: 0,
        });
        let ctx = &session.ctx;
        let origin = DeviceIdentity { device_uuid, driver_uuid };
        if ctx.device_identity() != origin {
            return Err(End::fault(
                ErrorCode::WrongDevice,
                format!(
                    "the client's GPU (deviceUUID {}, driverUUID {}) is not the worker's ({}, {})",
                    neural_frame::format_uuid(&device_uuid),
                    neural_frame::format_uuid(&driver_uuid),
                    neural_frame::format_uuid(&ctx.device_identity().device_uuid),
                    neural_frame::format_uuid(&ctx.device_identity().driver_uuid)
                ),
            ));
        }
        let mode = if sync_modes & protocol::SYNC_GPU != 0 && ctx.sync_mode() == SyncMode::Gpu {
            protocol::SyncMode::Gpu
        } else if sync_modes & protocol::SYNC_HOST != 0 {
            protocol::SyncMode::Host
        } else {
            return Err(End::fault(
                ErrorCode::SyncMode,
                format!(
                    "the client offers sync modes {sync_modes:#x}; this worker can do {}",
                    if ctx.sync_mode() == SyncMode::Gpu { "GPU (2) and host (1)" } else { "host (1) only" }
                ),
            ));
        };
        let out_format =
            if neural_frame::OUTPUT_BUFFER_FORMATS.contains(&format) { format } else { vk::Format::R8G8B8A8_UNORM };
        let (ow, oh) = ctx.output_size();
        let out_bpp = neural_frame_client::bytes_per_pixel(out_format).unwrap_or(4);
        let output =
            Geometry { width: ow, height: oh, format: out_format.as_raw() as u32, row_pitch: ow as u64 * out_bpp };
        conn.send(
            &Message::Welcome {
                version: protocol::VERSION,
                sync_mode: mode,
                model: names[1].clone(),
                output,
                max_in_flight: ctx.slot_count() as u32,
            },
            &[],
        )?;
        session.mode = mode;
        let (slots, fds) = conn.expect("Slots")?;
        phase.set(Step::Importing);
        let Message::Slots { inputs, outputs, timeline } = slots else {
            return Err(End::fault(
                ErrorCode::State,
                format!("a {} message where the Slots belong", protocol::kind_name(slots.kind())),
            ));
        };
        if inputs.len() != input_slots as usize || outputs.len() != output_slots as usize {
            return Err(End::fault(
                ErrorCode::Malformed,
                format!(
                    "the Slots list {} input and {} output slots; the Hello said {input_slots} and {output_slots}",
                    inputs.len(),
                    outputs.len()
                ),
            ));
        }
        if timeline != (mode == protocol::SyncMode::Gpu) {
            return Err(End::fault(
                ErrorCode::State,
                format!("the Slots {} a timeline in {mode:?} mode", if timeline { "carry" } else { "lack" }),
            ));
        }
        let mut fds = fds.into_iter();
        for (i, m) in inputs.iter().enumerate() {
            let fd = fds.next().ok_or_else(|| End::fault(ErrorCode::FdCount, "fewer fds than slots"))?;
            let what = format!("input slot {i}");
            let import = describe(fd, m, input, origin, &what)?;
            let id = session.ctx.import_input_buffer(import).map_err(|e| bad_handle(&what, e))?;
            session.inputs.push(id);
        }
        for (j, m) in outputs.iter().enumerate() {
            let fd = fds.next().ok_or_else(|| End::fault(ErrorCode::FdCount, "fewer fds than slots"))?;
            let what = format!("output slot {j}");
            let import = describe(fd, m, output, origin, &what)?;
            let id = session.ctx.import_output_buffer(import).map_err(|e| bad_handle(&what, e))?;
            session.outputs.push(id);
        }
        let mut ready_fds = Vec::new();
        if let Some(fd) = fds.next() {
            let t = session
                .ctx
                .import_timeline(SemaphoreImport { fd, semaphore_type: vk::SemaphoreType::TIMELINE, origin })
                .map_err(|e| End::fault(ErrorCode::BadHandle, format!("the client's timeline: {e}")))?;
            session.rendered = Some(t);
            let exported = session
                .ctx
                .export_timelines()
                .map_err(|e| End::fault(ErrorCode::Inference, format!("exporting the worker's timelines: {e}")))?;
            ready_fds.push(exported.input_consumed);
            ready_fds.push(exported.output_ready);
        }
        let raw: Vec<_> = ready_fds.iter().map(AsRawFd::as_raw_fd).collect();
        conn.send(&Message::Ready { timelines: raw.len() as u8 }, &raw)?;
        Ok(session)
    }

    /// Frames until the client leaves or faults, or the worker stops.
    fn stream(&mut self, conn: &Conn, stop: &AtomicBool) -> End {
        // When the worker stops, the frames the client sent until then (and for STOP_GRACE more) still run.
        let mut stop_at: Option<Instant> = None;
        loop {
            if let Err(end) = self.report(conn) {
                return end;
            }
            if stop_at.is_none() && stop.load(Ordering::SeqCst) {
                stop_at = Some(Instant::now() + STOP_GRACE);
            }
            let left = stop_at.map(|t| t.saturating_duration_since(Instant::now()));
            if left == Some(Duration::ZERO) {
                return End { why: Why::Stopping, reason: "the worker is stopping".into() };
            }
            // With frames in flight the session polls them (with --spin-wait, without sleeping: the post
            // pass of `--post-wait host` is submitted by these polls).
            let wait = match (self.in_flight.is_empty(), self.ctx.tuning().spin_wait) {
                (true, _) => Duration::from_millis(50),
                (false, true) => Duration::ZERO,
                (false, false) => POLL,
            };
            let wait = left.map_or(wait, |l| wait.min(l));
            let got = match conn.next(wait) {
                Ok(Some((m, _))) => m,
                Ok(None) => continue,
                Err(end) => return end,
            };
            let result = match got {
                Message::Submit { frame, input_slot, output_slot, rendered, output_free } => {
                    self.submit(conn, frame, input_slot, output_slot, rendered, output_free)
                }
                Message::Bye { reason } => {
                    return End { why: Why::Left, reason: format!("the client said goodbye ({reason})") };
                }
                other => Err(End::fault(
                    ErrorCode::State,
                    format!("a {} message while streaming frames", protocol::kind_name(other.kind())),
                )),
            };
            if let Err(end) = result {
                return end;
            }
        }
    }

    fn submit(
        &mut self,
        conn: &Conn,
        frame: u64,
        input_slot: u16,
        output_slot: u16,
        rendered: u64,
        output_free: u64,
    ) -> Result<(), End> {
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
        let ticket = match self.ctx.submit(f) {
            Ok(Submitted::Frame(t)) => t,
            Ok(Submitted::Skipped) => return Err(End::fault(ErrorCode::Inference, "the frame was skipped")),
            Err(e) => return Err(End::fault(ErrorCode::Inference, format!("frame {frame}: {e}"))),
        };
        conn.send(&Message::Enqueued { frame, input_consumed: ticket.value(), output_ready: ticket.value() }, &[])?;
        self.in_flight.push_back(InFlight { frame, ticket, consumed: false });
        Ok(())
    }

    /// Tells the client of every frame that got further, in order, without waiting.
    fn report(&mut self, conn: &Conn) -> Result<(), End> {
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
    fn finish(&mut self, conn: &Conn, end: &End) {
        let gone = !matches!(end.why, Why::Left | Why::Stopping);
        if let (true, Some(t)) = (gone, self.rendered) {
            let value = self.last_rendered.max(self.last_output_free);
            if let Err(e) = self.ctx.release_timeline(t, value) {
                eprintln!("neural-frame serve: releasing a gone client's timeline failed: {e}");
            }
        }
        let mut deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut released = gone;
        while let Some(f) = self.in_flight.pop_front() {
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = match self.ctx.wait_timeout(&f.ticket, left) {
                Err(e) if !released && e.kind() == neural_frame::ErrorKind::Timeout => {
                    // A client that left (or the worker stopping) with a frame waiting on a value it
                    // never signalled: released as for a client gone, then waited for once more.
                    eprintln!(
                        "neural-frame serve: frame {} did not finish ({e}): releasing the client's timeline",
                        f.frame
                    );
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
                    eprintln!("neural-frame serve: frame {} did not finish: {e}", f.frame);
                    break;
                }
            }
        }
        if end.why == Why::Stopping {
            let _ = conn.send(&Message::Bye { reason: "the worker is stopping".into() }, &[]);
        }
    }
}

/// One slot's memory, checked against the frame it holds, then imported.
fn describe(
    fd: OwnedFd,
    m: &SlotMemory,
    geometry: Geometry,
    origin: DeviceIdentity,
    what: &str,
) -> Result<BufferImport, End> {
    let needed = geometry.bytes().unwrap_or(u64::MAX);
    if m.buffer_size < needed || m.allocation_size < m.buffer_size {
        return Err(End::fault(
            ErrorCode::TooSmall,
            format!(
                "{what}: a buffer of {} bytes in an allocation of {} bytes; a {}×{} frame with a row pitch of {} \
                     needs {needed}",
                m.buffer_size, m.allocation_size, geometry.width, geometry.height, geometry.row_pitch
            ),
        ));
    }
    // A memory file shorter than the allocation faults (SIGBUS on lavapipe) when the driver maps it.
    if let Some(len) = file_size(&fd).filter(|&len| len < m.allocation_size) {
        return Err(End::fault(
            ErrorCode::TooSmall,
            format!(
                "{what}: the memory behind the descriptor is {len} bytes, but the allocation is {} bytes",
                m.allocation_size
            ),
        ));
    }
    Ok(BufferImport {
        memory: MemoryImport {
            fd,
            allocation_size: m.allocation_size,
            memory_type_index: m.memory_type_index,
            dedicated: m.dedicated,
            origin,
        },
        size: m.buffer_size,
        usage: vk::BufferUsageFlags::from_raw(m.usage),
        layout: PixelLayout {
            width: geometry.width,
            height: geometry.height,
            row_pitch: geometry.row_pitch,
            format: format_of(geometry.format),
        },
    })
}

/// The size of a regular file or memfd behind `fd`; `None` for anything else
/// (dma-bufs, anon inodes, devices: the import checks those).
fn file_size(fd: &OwnedFd) -> Option<u64> {
    // SAFETY: `stat` is plain data, for which all zeroes is a value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes a `stat` for an open descriptor and nothing else.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    (!link.to_string_lossy().starts_with("anon_inode:")).then_some(st.st_size as u64)
}

fn bad_handle(what: &str, e: neural_frame::ImportError) -> End {
    End::fault(ErrorCode::BadHandle, format!("{what}: {e}"))
}
