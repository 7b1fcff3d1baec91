//! # neural-frame-client
//!
//! The renderer's half of `neural-frame serve`: exportable GPU slots on the
//! renderer's own Vulkan device, handed to the worker process once over a Unix
//! socket, and then frames exchanged by slot index and semaphore value. No
//! CUDA and no ONNX Runtime enter the renderer's process: this crate depends on
//! `ash`, `libc` and `std` only.
//!
//! ```no_run
//! use neural_frame_client::{Client, ClientDevice, Options, SyncMode};
//! use neural_frame_client::ash::vk;
//!
//! # fn render_loop(device: ClientDevice) -> neural_frame_client::Result<()> {
//! let options = Options::new("/run/user/1000/neural-frame.sock", 960, 540, vk::Format::R8G8B8A8_UNORM);
//! // SAFETY: the device's handles are valid and outlive the client.
//! let mut client = unsafe { Client::connect(&device, options) }?;
//! for n in 1..=100u64 {
//!     let slot = (n as usize) % client.input_slots();
//!     // ... copy the frame into client.input_slot(slot).buffer(), record
//!     // release_to_worker, and (GPU mode) signal client.rendered_timeline() = n ...
//!     let frame = client.submit(slot, slot % client.output_slots(), n, 0)?;
//!     if client.sync_mode() == SyncMode::Gpu {
//!         let points = client.enqueued(frame)?; // returns once the worker has queued its signals
//!         let _ = points.output_ready; // wait for it in the renderer's next vkQueueSubmit
//!         client.try_done(frame)?; // collects the worker's Done when it is there (else kept, bounded)
//!     } else {
//!         client.wait_done(frame)?;
//!     }
//! }
//! client.close()?;
//! # Ok(()) }
//! ```
//!
//! # A worker that dies
//!
//! The client puts a GPU wait for one of the worker's values into its queue
//! only after the worker confirmed that it queued the matching signal
//! ([`Client::enqueued`]). When the connection breaks, or a frame's `Done` does
//! not come within [`Options::frame_timeout`], the client signals its own
//! copies of the worker's timelines from the host, up to the highest value it
//! handed out, so the renderer's queue never waits forever and its device is
//! never lost; the call returns [`Error::WorkerGone`] or [`Error::Timeout`].

#![warn(missing_docs)]

pub mod error;
mod peer;
pub mod protocol;
mod slots;
pub mod wire;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use ash;
use ash::vk;

pub use error::{Error, Result};
pub use protocol::{ErrorCode, Geometry, SyncMode};
pub use slots::{ClientDevice, SlotBuffer, acquire_from_worker, release_to_worker};

use peer::{Release, Shared, check_worker_user, lock};
use protocol::Message;
use slots::Exporter;
use wire::RecvError;

/// The socket a worker listens on by default: `$XDG_RUNTIME_DIR/neural-frame.sock`
/// (`/tmp/neural-frame-UID.sock` where `XDG_RUNTIME_DIR` is not set).
///
/// `neural-frame serve` listens there unless given `--socket`.
///
/// ```
/// use std::path::Path;
///
/// let socket = neural_frame_client::default_socket();
/// match std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
///     Some(dir) => assert_eq!(socket, Path::new(&dir).join("neural-frame.sock")),
///     None => {
///         let name = socket.file_name().and_then(|n| n.to_str()).ok_or("no file name")?;
///         assert!(socket.starts_with("/tmp") && name.starts_with("neural-frame-") && name.ends_with(".sock"));
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn default_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => Path::new(&dir).join("neural-frame.sock"),
        // SAFETY: getuid cannot fail.
        _ => PathBuf::from(format!("/tmp/neural-frame-{}.sock", unsafe { libc::getuid() })),
    }
}

/// Which sync mode the client asks for.
///
/// The worker chooses; [`Client::sync_mode`] says what it chose.
///
/// ```
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::{Options, SyncPreference};
///
/// let mut options = Options::new("/tmp/nf.sock", 960, 540, vk::Format::R8G8B8A8_UNORM);
/// assert_eq!(options.sync, SyncPreference::Auto);
/// // Host mode even on a device that could share timeline semaphores: the renderer
/// // then waits on the host for each frame.
/// options.sync = SyncPreference::Host;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPreference {
    /// GPU mode where the client's device can share timeline semaphores, else host mode.
    Auto,
    /// Host mode even where GPU mode would work.
    Host,
}

/// How to connect: the socket, the input frames, the slots.
///
/// Start from [`Options::new`] and change the fields that differ.
///
/// ```
/// use std::time::Duration;
///
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::{Options, SyncPreference};
///
/// let mut options = Options::new(neural_frame_client::default_socket(), 1920, 1080, vk::Format::R16G16B16A16_SFLOAT);
/// options.row_pitch = Some(1920 * 8 + 256); // the renderer's rows are padded
/// options.input_slots = 2;
/// options.output_slots = 2;
/// options.sync = SyncPreference::Host;
/// options.frame_timeout = Duration::from_secs(60); // a worker on its CPU backend takes seconds a frame
/// assert_eq!(options.model, ""); // whatever model the worker serves
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// The worker's socket.
    pub socket: PathBuf,
    /// Input frame width in pixels.
    pub width: u32,
    /// Input frame height in pixels.
    pub height: u32,
    /// Input pixel format (`R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM`/`_SRGB`, `R16G16B16A16_SFLOAT`).
    pub format: vk::Format,
    /// Bytes between input rows; `None`: tightly packed.
    pub row_pitch: Option<u64>,
    /// Input slots (the renderer's ring): 1 to 16.
    pub input_slots: u16,
    /// Output slots: 1 to 16.
    pub output_slots: u16,
    /// GPU or host mode.
    pub sync: SyncPreference,
    /// The model to ask for; empty for the worker's own.
    pub model: String,
    /// How long a frame may take before the client gives the worker up.
    pub frame_timeout: Duration,
    /// How long the hand-over may take (the worker sets up a model for the
    /// client first: ONNX Runtime, cuDNN's algorithm search).
    pub handover_timeout: Duration,
}

impl Options {
    /// Three input and three output slots, automatic sync, a 10 s frame timeout
    /// and a 60 s hand-over timeout.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use neural_frame_client::ash::vk;
    /// use neural_frame_client::{Options, SyncPreference};
    ///
    /// let options = Options::new("/tmp/nf.sock", 960, 540, vk::Format::B8G8R8A8_SRGB);
    /// assert_eq!((options.input_slots, options.output_slots), (3, 3));
    /// assert_eq!(options.sync, SyncPreference::Auto);
    /// assert_eq!(options.row_pitch, None); // tightly packed: 960 × 4 bytes
    /// assert_eq!(options.frame_timeout, Duration::from_secs(10));
    /// assert_eq!(options.handover_timeout, Duration::from_secs(60));
    /// ```
    pub fn new(socket: impl Into<PathBuf>, width: u32, height: u32, format: vk::Format) -> Self {
        Self {
            socket: socket.into(),
            width,
            height,
            format,
            row_pitch: None,
            input_slots: 3,
            output_slots: 3,
            sync: SyncPreference::Auto,
            model: String::new(),
            frame_timeout: Duration::from_secs(10),
            handover_timeout: Duration::from_secs(60),
        }
    }
}

/// A frame handed to the worker, by its number.
///
/// [`Client::submit`] returns one; the waits take it. Frames are numbered 1,
/// 2, 3, … in submission order, and compare in that order.
///
/// ```no_run
/// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
/// // Host mode, with input slots 0 and 1 written (the renderer waited for its fences).
/// let a = client.submit(0, 0, 0, 0)?;
/// let b = client.submit(1, 1, 0, 0)?;
/// assert!(a < b);
/// client.wait_done(a)?;
/// client.wait_done(b)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FrameId(u64);

impl FrameId {
    /// The frame's number (1, 2, 3, …).
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// let first = client.submit(0, 0, 0, 0)?; // host mode, the first frame of the connection
    /// assert_eq!(first.number(), 1);
    /// let ms = client.wait_done(first)?;
    /// println!("frame {}: the model took {ms:.1} ms", first.number());
    /// # Ok(()) }
    /// ```
    pub fn number(self) -> u64 {
        self.0
    }
}

/// A point on one of the worker's timelines, as the client's device sees it:
/// wait for `semaphore` to reach `value` in the renderer's `vkQueueSubmit`.
///
/// ```no_run
/// use neural_frame_client::ash::{self, vk};
/// use neural_frame_client::WaitPoint;
///
/// /// Submits `cmd` to run once the worker has reached `wait`.
/// fn submit_after(
///     device: &ash::Device,
///     queue: vk::Queue,
///     cmd: vk::CommandBuffer,
///     wait: WaitPoint,
/// ) -> ash::prelude::VkResult<()> {
///     let (semaphores, values) = ([wait.semaphore], [wait.value]);
///     let stages = [vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER];
///     let cmds = [cmd];
///     let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().wait_semaphore_values(&values);
///     let info = vk::SubmitInfo::default()
///         .wait_semaphores(&semaphores)
///         .wait_dst_stage_mask(&stages)
///         .command_buffers(&cmds)
///         .push_next(&mut timeline);
///     // SAFETY: `cmd` is executable and of `queue`'s family; `wait` came from Client::enqueued, so the
///     // worker has already submitted its signal; the arrays live for the call; only this thread uses `queue`.
///     unsafe { device.queue_submit(queue, &[info], vk::Fence::null()) }
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPoint {
    /// The client's import of the worker's timeline.
    pub semaphore: vk::Semaphore,
    /// The value.
    pub value: u64,
}

/// What the worker queued for a frame (GPU mode).
///
/// [`Client::enqueued`] returns it. The renderer's queue may wait for
/// `input_consumed` before it acquires and rewrites the input slot, and for
/// `output_ready` before it acquires and reads the output slot.
///
/// ```no_run
/// # use neural_frame_client::{Client, FrameId, WaitPoint};
/// # fn example(client: &mut Client, frame: FrameId) -> neural_frame_client::Result<()> {
/// let points = client.enqueued(frame)?;
/// // The next use of the input slot waits for the worker's read of it...
/// let before_rewriting: WaitPoint = points.input_consumed;
/// // ... and the renderer's read of the result for the worker's write.
/// let before_reading: WaitPoint = points.output_ready;
/// assert_ne!(before_rewriting.semaphore, before_reading.semaphore); // two timelines of the worker
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// Reached when the worker has read the input slot.
    pub input_consumed: WaitPoint,
    /// Reached when the output slot is written.
    pub output_ready: WaitPoint,
}

#[derive(Debug, Default)]
struct FrameState {
    enqueued: Option<(u64, u64)>,
    consumed: bool,
    done: Option<f64>,
}

type Incoming = std::result::Result<(Message, Vec<OwnedFd>), RecvError>;

/// Finished frames kept for `wait_done`/`try_done` at most (the oldest go first).
const MAX_TRACKED: usize = 256;

/// A connection to a worker, with the slots it was handed.
///
/// Fields in teardown order: the socket and its reader, then the semaphores and
/// slots on the caller's device, then the exporter.
///
/// A frame in host mode, from rendering to reading the result:
///
/// ```no_run
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::{Client, ClientDevice, Options, SyncMode, SyncPreference};
///
/// # fn example(device: &ClientDevice) -> neural_frame_client::Result<()> {
/// let mut options = Options::new(neural_frame_client::default_socket(), 960, 540, vk::Format::R8G8B8A8_UNORM);
/// options.sync = SyncPreference::Host;
/// // SAFETY: the device's handles are valid, it has VK_KHR_external_memory_fd, and it outlives the
/// // client; the renderer's queue is done with the slots before the client is dropped.
/// let mut client = unsafe { Client::connect(device, options) }?;
/// assert_eq!(client.sync_mode(), SyncMode::Host);
/// // ... record a copy of the frame into client.input_slot(0).buffer() and release_to_worker,
/// // submit it, and wait for its fence ...
/// let frame = client.submit(0, 0, 0, 0)?;
/// let ms = client.wait_done(frame)?;
/// // ... record acquire_from_worker and a read of client.output_slot(0).buffer() ...
/// println!("{} took {ms:.1} ms on the worker", client.model());
/// client.close()?;
/// # Ok(()) }
/// ```
pub struct Client {
    stream: UnixStream,
    rx: mpsc::Receiver<Incoming>,
    reader: Option<std::thread::JoinHandle<()>>,
    mode: SyncMode,
    output: Geometry,
    model: String,
    max_in_flight: u32,
    timeout: Duration,
    frames: BTreeMap<u64, FrameState>,
    next_frame: u64,
    last_rendered: u64,
    last_output_free: u64,
    release: Shared,
    gone: Option<String>,
    closed: bool,
    worker_timelines: Option<(vk::Semaphore, vk::Semaphore)>,
    rendered: Option<vk::Semaphore>,
    inputs: Vec<SlotBuffer>,
    outputs: Vec<SlotBuffer>,
    exporter: Exporter,
}

impl Client {
    /// Connects to the worker, creates the slots on the caller's device, hands
    /// them over and waits until the worker has imported them.
    ///
    /// # Safety
    /// The handles in `device` are valid, the device was created with
    /// `VK_KHR_external_memory_fd` (and, for GPU mode,
    /// `VK_KHR_external_semaphore_fd` and the `timelineSemaphore` feature), and
    /// it outlives the client. When the client is closed or dropped, it destroys
    /// its slots and semaphores: the renderer's queue must be done with them by
    /// then (wait for every frame, then for the renderer's own submissions that
    /// use the slots or wait on [`Enqueued`] points).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for options it refuses, [`Error::Unsupported`]
    /// for a device that lacks what serving needs (or a socket served by another
    /// user), [`Error::Io`] where nothing listens on the socket,
    /// [`Error::Protocol`] where the worker refuses the client (another GPU, a
    /// format its model cannot take, busy, …), [`Error::Timeout`] and
    /// [`Error::WorkerGone`] where it does not finish the hand-over, and
    /// [`Error::Vulkan`] where creating or exporting a slot fails.
    ///
    /// ```no_run
    /// use neural_frame_client::ash::vk;
    /// use neural_frame_client::{Client, ClientDevice, Error, ErrorCode, Options};
    ///
    /// # fn example(device: &ClientDevice) -> neural_frame_client::Result<()> {
    /// let options = Options::new(neural_frame_client::default_socket(), 1280, 720, vk::Format::B8G8R8A8_SRGB);
    /// // SAFETY: `device` was created with VK_KHR_external_memory_fd (and, where its
    /// // external_semaphore_fd says so, VK_KHR_external_semaphore_fd and timelineSemaphore), its handles
    /// // are valid and outlive the client, and the renderer's queue is idle before the client is dropped.
    /// let client = match unsafe { Client::connect(device, options) } {
    ///     Ok(client) => client,
    ///     Err(Error::Protocol { code: ErrorCode::WrongDevice, message }) => {
    ///         eprintln!("render on the worker's GPU: {message}");
    ///         return Ok(());
    ///     }
    ///     Err(e) => return Err(e),
    /// };
    /// let out = client.output_geometry();
    /// println!("{:?} mode, model {}, output {}×{}", client.sync_mode(), client.model(), out.width, out.height);
    /// client.close()?;
    /// # Ok(()) }
    /// ```
    pub unsafe fn connect(device: &ClientDevice, options: Options) -> Result<Client> {
        if !(1..=protocol::MAX_SLOTS).contains(&options.input_slots)
            || !(1..=protocol::MAX_SLOTS).contains(&options.output_slots)
        {
            return Err(Error::InvalidArgument(format!(
                "{} input and {} output slots: 1 to {} each",
                options.input_slots,
                options.output_slots,
                protocol::MAX_SLOTS
            )));
        }
        let bpp = bytes_per_pixel(options.format).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the input format {:?}: R8G8B8A8_UNORM/_SRGB, B8G8R8A8_UNORM/_SRGB or R16G16B16A16_SFLOAT",
                options.format
            ))
        })?;
        let packed = (options.width as u64).checked_mul(bpp).ok_or_else(|| too_large(&options))?;
        let input = Geometry {
            width: options.width,
            height: options.height,
            format: options.format.as_raw() as u32,
            row_pitch: options.row_pitch.unwrap_or(packed),
        };
        let input_bytes = input.bytes().filter(|&b| b > 0).ok_or_else(|| too_large(&options))?;
        // SAFETY: the caller's contract.
        let exporter = unsafe { Exporter::new(device) }?;
        let gpu = options.sync == SyncPreference::Auto && exporter.can_share_timelines();
        let (device_uuid, driver_uuid) = exporter.identity();
        let stream = UnixStream::connect(&options.socket).map_err(|e| Error::Io {
            what: format!(
                "connecting to the worker at {} (is `neural-frame serve --socket {}` running?)",
                options.socket.display(),
                options.socket.display()
            ),
            source: e,
        })?;
        check_worker_user(&stream, &options.socket)?;
        let reader_stream =
            stream.try_clone().map_err(|e| Error::Io { what: "duplicating the socket".into(), source: e })?;
        let (tx, rx) = mpsc::channel();
        let release: Shared = std::sync::Arc::new(std::sync::Mutex::new(Release {
            device: device.device.clone(),
            timelines: None,
            highest: (0, 0),
        }));
        let shared = release.clone();
        let reader = std::thread::Builder::new()
            .name("neural-frame-client reader".into())
            .spawn(move || {
                loop {
                    let got = wire::recv(&reader_stream);
                    match &got {
                        Ok((Message::Enqueued { input_consumed, output_ready, .. }, _)) => {
                            lock(&shared).saw(*input_consumed, *output_ready);
                        }
                        Ok((Message::Error { .. } | Message::Bye { .. }, _)) | Err(_) => lock(&shared).release(),
                        Ok(_) => {}
                    }
                    let end = got.is_err();
                    if tx.send(got).is_err() || end {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Io { what: "starting the socket's reader thread".into(), source: e })?;
        let mut client = Client {
            stream,
            rx,
            reader: Some(reader),
            mode: SyncMode::Host,
            output: input,
            model: String::new(),
            max_in_flight: 0,
            timeout: options.frame_timeout,
            frames: BTreeMap::new(),
            next_frame: 1,
            last_rendered: 0,
            last_output_free: 0,
            release,
            gone: None,
            closed: false,
            worker_timelines: None,
            rendered: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            exporter,
        };
        let sent = client.send(
            &Message::Hello {
                version: protocol::VERSION,
                device_uuid,
                driver_uuid,
                input,
                input_slots: options.input_slots,
                output_slots: options.output_slots,
                sync_modes: if gpu { protocol::SYNC_HOST | protocol::SYNC_GPU } else { protocol::SYNC_HOST },
                model: options.model.clone(),
            },
            &[],
        );
        if let Err(e) = sent {
            // A worker that refused the connection (another user, busy) said why before closing.
            if let Ok(Ok((Message::Error { code, message }, _))) = client.rx.recv_timeout(Duration::from_secs(1)) {
                return Err(Error::Protocol { code, message });
            }
            return Err(e);
        }
        let (welcome, _) = client.expect("the worker's Welcome", options.handover_timeout)?;
        let Message::Welcome { version, sync_mode, model, output, max_in_flight } = welcome else {
            return Err(client.violation(format!("a {} message where a Welcome belongs", name(&welcome))));
        };
        if version != protocol::VERSION {
            return Err(client.fault(
                ErrorCode::Version,
                format!("the worker speaks version {version}, this client {}", protocol::VERSION),
            ));
        }
        if sync_mode == SyncMode::Gpu && !gpu {
            return Err(client.violation("the worker chose GPU mode, which the client did not offer".into()));
        }
        let output_bytes = output.bytes().filter(|&b| b > 0).ok_or_else(|| {
            client.violation(format!(
                "an output of {}×{} with row pitch {}",
                output.width, output.height, output.row_pitch
            ))
        })?;
        (client.mode, client.output, client.model, client.max_in_flight) = (sync_mode, output, model, max_in_flight);
        for _ in 0..options.input_slots {
            let slot = client.exporter.create_slot(input_bytes)?;
            client.inputs.push(slot);
        }
        for _ in 0..options.output_slots {
            let slot = client.exporter.create_slot(output_bytes)?;
            client.outputs.push(slot);
        }
        let mut fds = Vec::new();
        for slot in client.inputs.iter().chain(&client.outputs) {
            fds.push(client.exporter.export_slot(slot)?);
        }
        if sync_mode == SyncMode::Gpu {
            let rendered = client.exporter.create_timeline(true)?;
            client.rendered = Some(rendered);
            fds.push(client.exporter.export_timeline(rendered)?);
        }
        let slots = Message::Slots {
            inputs: client.inputs.iter().map(SlotBuffer::memory).collect(),
            outputs: client.outputs.iter().map(SlotBuffer::memory).collect(),
            timeline: sync_mode == SyncMode::Gpu,
        };
        let raw: Vec<_> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        client.send(&slots, &raw)?;
        drop(fds); // the worker holds its own copies now
        let (ready, fds) = client.expect("the worker's Ready", options.handover_timeout)?;
        let Message::Ready { timelines } = ready else {
            return Err(client.violation(format!("a {} message where Ready belongs", name(&ready))));
        };
        if (timelines == 2) != (sync_mode == SyncMode::Gpu) {
            return Err(client.violation(format!("Ready carries {timelines} timelines in {sync_mode:?} mode")));
        }
        let mut fds = fds.into_iter();
        if let (Some(consumed), Some(ready)) = (fds.next(), fds.next()) {
            let consumed = client.exporter.import_timeline(consumed)?;
            let ready = match client.exporter.import_timeline(ready) {
                Ok(r) => r,
                Err(e) => {
                    // SAFETY: just imported, unused.
                    unsafe { client.exporter.destroy_timeline(consumed) };
                    return Err(e);
                }
            };
            client.worker_timelines = Some((consumed, ready));
            lock(&client.release).timelines = Some((consumed, ready));
        }
        Ok(client)
    }

    /// The sync mode the worker chose.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) {
    /// use neural_frame_client::SyncMode;
    ///
    /// match client.sync_mode() {
    ///     // Signal rendered_timeline() after writing an input slot; wait on enqueued()'s points on the GPU.
    ///     SyncMode::Gpu => assert!(client.rendered_timeline().is_some()),
    ///     // Wait for the renderer's fence before submit(); wait_consumed() and wait_done() on the host.
    ///     SyncMode::Host => assert!(client.rendered_timeline().is_none()),
    /// }
    /// # }
    /// ```
    pub fn sync_mode(&self) -> SyncMode {
        self.mode
    }
    /// The output frames' geometry (tightly packed rows).
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use neural_frame_client::ash::vk;
    ///
    /// let out = client.output_geometry();
    /// let format = vk::Format::from_raw(out.format as i32);
    /// let bytes = out.bytes().ok_or("the output frame's size overflows")?;
    /// // Each output slot holds one frame: a read-back buffer of `bytes` takes it whole.
    /// assert_eq!(client.output_slot(0).size(), bytes);
    /// println!("{}×{} {format:?}, {bytes} bytes", out.width, out.height);
    /// # Ok(()) }
    /// ```
    pub fn output_geometry(&self) -> Geometry {
        self.output
    }
    /// The worker's model.
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) {
    /// println!("the worker runs {}", client.model());
    /// # }
    /// ```
    pub fn model(&self) -> &str {
        &self.model
    }
    /// Frames the worker holds in flight at most; further frames wait until one
    /// finishes.
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) {
    /// // Frames ahead of the worker worth keeping: more only wait on its side.
    /// let ahead = client.input_slots().min(client.max_in_flight() as usize);
    /// # let _ = ahead;
    /// # }
    /// ```
    pub fn max_in_flight(&self) -> u32 {
        self.max_in_flight
    }
    /// Input slots.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// // Host mode: a ring over the slots, each frame written, submitted and finished in turn.
    /// for n in 0..100 {
    ///     let (input, output) = (n % client.input_slots(), n % client.output_slots());
    ///     // ... render into client.input_slot(input) and wait for the renderer's fence ...
    ///     let frame = client.submit(input, output, 0, 0)?;
    ///     client.wait_done(frame)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn input_slots(&self) -> usize {
        self.inputs.len()
    }
    /// Output slots.
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) {
    /// let sizes: Vec<u64> = (0..client.output_slots()).map(|j| client.output_slot(j).size()).collect();
    /// assert!(sizes.iter().all(|&s| Some(s) == client.output_geometry().bytes()));
    /// # }
    /// ```
    pub fn output_slots(&self) -> usize {
        self.outputs.len()
    }
    /// Input slot `i`: the renderer writes a frame into its buffer.
    ///
    /// Panics where `i` is not below [`input_slots`](Self::input_slots).
    ///
    /// ```no_run
    /// use neural_frame_client::ash::vk;
    /// use neural_frame_client::{Client, ClientDevice, release_to_worker};
    ///
    /// /// Records the copy of a rendered frame (`staging`, one frame in the input's geometry) into input slot 0.
    /// fn record_input(device: &ClientDevice, cmd: vk::CommandBuffer, staging: vk::Buffer, client: &Client) {
    ///     let slot = client.input_slot(0);
    ///     let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: slot.size() };
    ///     // SAFETY: `cmd` is recording, outside a render pass, from a pool of device.queue_family_index;
    ///     // both buffers are live and at least `copy.size` bytes.
    ///     unsafe { device.device.cmd_copy_buffer(cmd, staging, slot.buffer(), &[copy]) };
    ///     // SAFETY: as above; the slot lives as long as the client, which outlives the command buffer.
    ///     unsafe { release_to_worker(device, cmd, slot) };
    /// }
    /// ```
    pub fn input_slot(&self, i: usize) -> &SlotBuffer {
        &self.inputs[i]
    }
    /// Output slot `j`: the worker writes the result into its buffer.
    ///
    /// Panics where `j` is not below [`output_slots`](Self::output_slots).
    ///
    /// ```no_run
    /// use neural_frame_client::ash::vk;
    /// use neural_frame_client::{Client, ClientDevice, acquire_from_worker, release_to_worker};
    ///
    /// /// Records the read of output slot 0 into `readback` (one frame in the output's geometry).
    /// fn record_output(device: &ClientDevice, cmd: vk::CommandBuffer, readback: vk::Buffer, client: &Client) {
    ///     let slot = client.output_slot(0);
    ///     // SAFETY: `cmd` is recording, outside a render pass, from a pool of device.queue_family_index; the
    ///     // slot lives as long as the client, which outlives the command buffer.
    ///     unsafe { acquire_from_worker(device, cmd, slot) };
    ///     let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: slot.size() };
    ///     // SAFETY: as above; both buffers are live and at least `copy.size` bytes.
    ///     unsafe { device.device.cmd_copy_buffer(cmd, slot.buffer(), readback, &[copy]) };
    ///     // SAFETY: as above. The slot goes back to the worker for the next frame.
    ///     unsafe { release_to_worker(device, cmd, slot) };
    /// }
    /// ```
    pub fn output_slot(&self, j: usize) -> &SlotBuffer {
        &self.outputs[j]
    }
    /// GPU mode: the client's timeline that the renderer signals after writing an
    /// input slot (the `rendered` value of [`submit`](Self::submit)) and, if it
    /// wants, after reading an output slot (`output_free`). `None` in host mode.
    ///
    /// ```no_run
    /// use neural_frame_client::ash::{self, vk};
    /// use neural_frame_client::{Client, FrameId};
    ///
    /// /// GPU mode: submits `cmd` (which writes and releases input slot `slot`), signals "rendered" = `n`,
    /// /// and hands the frame to the worker.
    /// fn hand_over(
    ///     device: &ash::Device,
    ///     queue: vk::Queue,
    ///     cmd: vk::CommandBuffer,
    ///     client: &mut Client,
    ///     slot: usize,
    ///     n: u64,
    /// ) -> Result<FrameId, Box<dyn std::error::Error>> {
    ///     let rendered = client.rendered_timeline().ok_or("host mode has no rendered timeline")?;
    ///     let (semaphores, values, cmds) = ([rendered], [n], [cmd]);
    ///     let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
    ///     let info = vk::SubmitInfo::default()
    ///         .command_buffers(&cmds)
    ///         .signal_semaphores(&semaphores)
    ///         .push_next(&mut timeline);
    ///     // SAFETY: `cmd` is executable and of `queue`'s family; `rendered` is a timeline semaphore of this device,
    ///     // alive while the client is, and `n` is above every value signalled before; the arrays live for the call.
    ///     unsafe { device.queue_submit(queue, &[info], vk::Fence::null()) }?;
    ///     // output_free 0: the renderer no longer reads the output slot.
    ///     Ok(client.submit(slot, slot % client.output_slots(), n, 0)?)
    /// }
    /// ```
    pub fn rendered_timeline(&self) -> Option<vk::Semaphore> {
        self.rendered
    }

    /// Hands frame `input_slot → output_slot` to the worker, without blocking.
    ///
    /// GPU mode: `rendered` is the value the renderer signals on
    /// [`rendered_timeline`](Self::rendered_timeline) once the input slot is
    /// written (strictly increasing); `output_free` is 0 or a value on the same
    /// timeline after which the output slot may be overwritten (non-zero values
    /// do not decrease).
    /// Host mode: both are 0, and the renderer's writes to the slot are complete
    /// (it waited for its fence).
    ///
    /// Slots out of range and values that break these rules are
    /// [`Error::InvalidArgument`], and nothing is sent.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client, n: u64) -> neural_frame_client::Result<()> {
    /// use neural_frame_client::SyncMode;
    ///
    /// // Frame `n` (1, 2, 3, …) of the renderer, in input slot 0, to output slot 0.
    /// let frame = match client.sync_mode() {
    ///     // The renderer's submission that writes the slot signals rendered_timeline() = n.
    ///     SyncMode::Gpu => client.submit(0, 0, n, 0)?,
    ///     // The renderer waited for the fence of its submission that wrote the slot.
    ///     SyncMode::Host => client.submit(0, 0, 0, 0)?,
    /// };
    /// client.wait_done(frame)?;
    /// # Ok(()) }
    /// ```
    pub fn submit(
        &mut self,
        input_slot: usize,
        output_slot: usize,
        rendered: u64,
        output_free: u64,
    ) -> Result<FrameId> {
        self.pump(Duration::ZERO)?;
        if input_slot >= self.inputs.len() || output_slot >= self.outputs.len() {
            return Err(Error::InvalidArgument(format!(
                "slots {input_slot} → {output_slot}: there are {} input and {} output slots",
                self.inputs.len(),
                self.outputs.len()
            )));
        }
        match self.mode {
            SyncMode::Gpu
                if rendered <= self.last_rendered || (output_free != 0 && output_free < self.last_output_free) =>
            {
                return Err(Error::InvalidArgument(format!(
                    "rendered {rendered} after {}, output free {output_free} after {}: values must increase",
                    self.last_rendered, self.last_output_free
                )));
            }
            SyncMode::Host if rendered != 0 || output_free != 0 => {
                return Err(Error::InvalidArgument(
                    "host mode has no semaphores: submit once the slot is written, with values 0".into(),
                ));
            }
            _ => {}
        }
        let frame = self.next_frame;
        self.send(
            &Message::Submit {
                frame,
                input_slot: input_slot as u16,
                output_slot: output_slot as u16,
                rendered,
                output_free,
            },
            &[],
        )?;
        self.next_frame += 1;
        self.last_rendered = rendered;
        self.last_output_free = self.last_output_free.max(output_free);
        self.frames.insert(frame, FrameState::default());
        Ok(FrameId(frame))
    }

    /// GPU mode: waits (at most the frame timeout, normally far less: the worker
    /// answers as soon as it has queued the frame) until the worker has queued
    /// the frame's signals, and returns the points to wait for on the GPU.
    /// In host mode: [`Error::InvalidArgument`].
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client, n: u64) -> neural_frame_client::Result<()> {
    /// // GPU mode: frame n, whose input slot 0 is written by a submission that signals rendered_timeline() = n.
    /// let frame = client.submit(0, 0, n, 0)?;
    /// let points = client.enqueued(frame)?;
    /// // Only now may the renderer's queue wait for the worker: the submission that reads output slot 0
    /// // waits for points.output_ready (see WaitPoint); the next rewrite of input slot 0 for
    /// // points.input_consumed.
    /// # let _ = points;
    /// # Ok(()) }
    /// ```
    pub fn enqueued(&mut self, frame: FrameId) -> Result<Enqueued> {
        let Some((consumed, ready)) = self.worker_timelines else {
            return Err(Error::InvalidArgument(
                "host mode has no GPU wait points: use wait_consumed and wait_done".into(),
            ));
        };
        let (c, r) = self.until(frame, "the worker's Enqueued", |s| s.enqueued)?;
        Ok(Enqueued {
            input_consumed: WaitPoint { semaphore: consumed, value: c },
            output_ready: WaitPoint { semaphore: ready, value: r },
        })
    }

    /// Waits until the frame's input slot may be rewritten.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// // Host mode, one input slot: render the next frame while the worker runs this one.
    /// let frame = client.submit(0, 0, 0, 0)?;
    /// client.wait_consumed(frame)?;
    /// // ... acquire_from_worker and render the next frame into input slot 0 ...
    /// client.wait_done(frame)?;
    /// # Ok(()) }
    /// ```
    pub fn wait_consumed(&mut self, frame: FrameId) -> Result<()> {
        self.until(frame, "the worker's Consumed", |s| s.consumed.then_some(()))
    }

    /// Waits until the frame's output slot is written; the model's time on the worker, in ms.
    /// The frame is then forgotten (as are the oldest finished frames beyond 256
    /// that nobody collected).
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// let frame = client.submit(0, 0, 0, 0)?; // host mode
    /// let ms = client.wait_done(frame)?;
    /// // ... acquire_from_worker and read output slot 0 ...
    /// println!("the model took {ms:.1} ms"); // NaN where the worker did not measure it
    /// assert!(client.wait_done(frame).is_err()); // collected: the frame is no longer in flight
    /// # Ok(()) }
    /// ```
    pub fn wait_done(&mut self, frame: FrameId) -> Result<f64> {
        let ms = self.until(frame, "the worker's Done", |s| s.done)?;
        self.frames.remove(&frame.0);
        Ok(ms)
    }

    /// Whether the frame's output is written, without blocking: the model's time
    /// once it is (the frame is then forgotten, as by
    /// [`wait_done`](Self::wait_done)), `None` before. A `Done` that arrived
    /// before the worker went is still returned; a frame the client does not track
    /// (never submitted, already collected, or forgotten among more than 256
    /// uncollected finished frames) is [`Error::InvalidArgument`], as for `wait_done`.
    ///
    /// ```no_run
    /// # use neural_frame_client::{Client, FrameId, Result};
    /// # fn example(client: &mut Client, pending: &mut std::collections::VecDeque<FrameId>) -> Result<()> {
    /// // Collects the frames that are done, oldest first (frames finish in submission order).
    /// while let Some(&frame) = pending.front() {
    ///     match client.try_done(frame)? {
    ///         Some(ms) => {
    ///             println!("frame {}: {ms:.1} ms", frame.number());
    ///             pending.pop_front();
    ///         }
    ///         None => break,
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_done(&mut self, frame: FrameId) -> Result<Option<f64>> {
        let pumped = self.pump(Duration::ZERO);
        // A frame it does not track never becomes done: an error, as for `wait_done`, not `None`
        // forever. What came before a Bye or a break still counts, as for `wait_done`.
        let state = self.frames.get(&frame.0).ok_or_else(|| not_in_flight(frame))?;
        if let Some(ms) = state.done {
            self.frames.remove(&frame.0);
            return Ok(Some(ms));
        }
        pumped.map(|()| None)
    }

    /// Takes the messages that arrived, without blocking: an error once the
    /// worker is gone (it said Bye, closed, or faulted).
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// // Once a frame of the renderer, whatever it handed to the worker:
    /// if let Err(e) = client.poll() {
    ///     eprintln!("rendering without the worker: {e}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn poll(&mut self) -> Result<()> {
        self.pump(Duration::ZERO)
    }

    /// Changes the frame timeout (the bound on every wait for the worker).
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) {
    /// use std::time::Duration;
    ///
    /// // A worker on its CPU backend can take seconds a frame.
    /// client.set_frame_timeout(Duration::from_secs(60));
    /// # }
    /// ```
    pub fn set_frame_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Frames submitted whose `Done` has not been collected.
    ///
    /// ```no_run
    /// # fn example(client: &mut neural_frame_client::Client) -> neural_frame_client::Result<()> {
    /// assert_eq!(client.in_flight(), 0);
    /// let frame = client.submit(0, 0, 0, 0)?; // host mode
    /// assert_eq!(client.in_flight(), 1);
    /// client.wait_done(frame)?;
    /// assert_eq!(client.in_flight(), 0);
    /// # Ok(()) }
    /// ```
    pub fn in_flight(&self) -> usize {
        self.frames.len()
    }

    /// Leaves cleanly: sends Bye, waits for the frames in flight, and closes.
    /// The slots and semaphores are destroyed with the client (see
    /// [`connect`](Self::connect)'s safety rule), also when this fails.
    ///
    /// ```no_run
    /// use neural_frame_client::{Client, ClientDevice, FrameId};
    ///
    /// type BoxError = Box<dyn std::error::Error>;
    ///
    /// fn finish(device: &ClientDevice, mut client: Client, pending: Vec<FrameId>) -> Result<(), BoxError> {
    ///     for frame in pending {
    ///         client.wait_done(frame)?;
    ///     }
    ///     // SAFETY: the device is live; no other thread submits to its queues now. Its submissions
    ///     // wait only on points the worker has signalled, or that the client released.
    ///     unsafe { device.device.device_wait_idle() }?;
    ///     client.close()?;
    ///     Ok(())
    /// }
    /// ```
    pub fn close(mut self) -> Result<()> {
        self.send(&Message::Bye { reason: "the client is done".into() }, &[])?;
        let pending: Vec<u64> = self.frames.keys().copied().collect();
        for f in pending {
            self.wait_done(FrameId(f))?;
        }
        self.closed = true;
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        Ok(())
    }

    fn until<T>(&mut self, frame: FrameId, what: &str, got: impl Fn(&FrameState) -> Option<T>) -> Result<T> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let state = self.frames.get(&frame.0).ok_or_else(|| not_in_flight(frame))?;
            if let Some(v) = got(state) {
                return Ok(v);
            }
            let now = Instant::now();
            if now >= deadline {
                let message = format!("{what} for frame {} did not come within {:?}", frame.0, self.timeout);
                self.give_up(message.clone());
                return Err(Error::Timeout(message));
            }
            let pumped = self.pump(deadline - now);
            // What came before a Bye or a break still counts.
            if let Some(v) = self.frames.get(&frame.0).and_then(&got) {
                return Ok(v);
            }
            pumped?;
        }
    }

    /// Takes the messages that arrived, waiting up to `wait` for the first.
    fn pump(&mut self, wait: Duration) -> Result<()> {
        if let Some(why) = &self.gone {
            return Err(Error::WorkerGone(why.clone()));
        }
        let mut first = true;
        loop {
            let got = if first && !wait.is_zero() {
                match self.rx.recv_timeout(wait) {
                    Ok(m) => m,
                    Err(mpsc::RecvTimeoutError::Timeout) => return Ok(()),
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(RecvError::Closed),
                }
            } else {
                match self.rx.try_recv() {
                    Ok(m) => m,
                    Err(mpsc::TryRecvError::Empty) => return Ok(()),
                    Err(mpsc::TryRecvError::Disconnected) => Err(RecvError::Closed),
                }
            };
            first = false;
            let message = match got {
                Ok((m, _fds)) => m,
                Err(RecvError::Closed) => return Err(self.lost("the worker closed the connection".into())),
                Err(e) => return Err(self.lost(format!("reading from the worker: {e}"))),
            };
            match message {
                Message::Enqueued { frame, input_consumed, output_ready } => {
                    self.state(frame)?.enqueued = Some((input_consumed, output_ready));
                }
                Message::Consumed { frame } => self.state(frame)?.consumed = true,
                Message::Done { frame, infer_ms } => {
                    let s = self.state(frame)?;
                    s.consumed = true;
                    s.done = Some(infer_ms);
                    self.forget_old();
                }
                Message::Error { code, message } => {
                    self.give_up(format!("the worker refused: {message}"));
                    return Err(Error::Protocol { code, message });
                }
                Message::Bye { reason } => return Err(self.lost(format!("the worker said goodbye: {reason}"))),
                other => return Err(self.violation(format!("an unexpected {} message", name(&other)))),
            }
        }
    }

    /// Keeps the frames known bounded when the renderer does not collect every
    /// `Done` (it waits on the GPU instead): the oldest finished ones are forgotten.
    fn forget_old(&mut self) {
        while self.frames.len() > MAX_TRACKED {
            let Some(oldest) = self.frames.iter().find(|(_, s)| s.done.is_some()).map(|(&f, _)| f) else { break };
            self.frames.remove(&oldest);
        }
    }

    fn state(&mut self, frame: u64) -> Result<&mut FrameState> {
        if !self.frames.contains_key(&frame) {
            return Err(self.violation(format!("a message for frame {frame}, which is not in flight")));
        }
        self.frames.get_mut(&frame).ok_or_else(|| Error::InvalidArgument("unreachable".into()))
    }

    fn expect(&mut self, what: &str, timeout: Duration) -> Result<(Message, Vec<OwnedFd>)> {
        match self.rx.recv_timeout(timeout) {
            Ok(Ok((Message::Error { code, message }, _))) => {
                self.give_up(message.clone());
                Err(Error::Protocol { code, message })
            }
            Ok(Ok(m)) => Ok(m),
            Ok(Err(RecvError::Closed)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(self.lost(format!("the worker closed the connection before {what}")))
            }
            Ok(Err(e)) => Err(self.lost(format!("reading {what}: {e}"))),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let message = format!("{what} did not come within {timeout:?}");
                self.give_up(message.clone());
                Err(Error::Timeout(message))
            }
        }
    }

    fn send(&mut self, message: &Message, fds: &[std::os::fd::RawFd]) -> Result<()> {
        if let Some(why) = &self.gone {
            return Err(Error::WorkerGone(why.clone()));
        }
        wire::send(&self.stream, message, fds)
            .map_err(|e| self.lost(format!("sending a {} message: {e}", name(message))))
    }

    fn violation(&mut self, message: String) -> Error {
        self.fault(ErrorCode::State, message)
    }

    /// Tells the worker what is wrong (an Error message), and gives it up.
    fn fault(&mut self, code: ErrorCode, message: String) -> Error {
        let _ = wire::send(&self.stream, &Message::Error { code, message: message.clone() }, &[]);
        self.give_up(message.clone());
        Error::Protocol { code, message }
    }

    fn lost(&mut self, why: String) -> Error {
        self.give_up(why.clone());
        Error::WorkerGone(why)
    }

    /// Ends the connection and releases every GPU wait the renderer may have
    /// queued on the worker's timelines (the dead-peer rule).
    fn give_up(&mut self, why: String) {
        if self.gone.is_none() {
            self.gone = Some(why);
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        lock(&self.release).release();
    }
}

/// The error for a frame the client does not track: never submitted on this
/// connection, already collected, or forgotten among more than `MAX_TRACKED`
/// uncollected finished frames.
fn not_in_flight(frame: FrameId) -> Error {
    Error::InvalidArgument(format!(
        "frame {} is not in flight: never submitted here, already collected, or forgotten after {MAX_TRACKED} \
         finished frames nobody collected",
        frame.0
    ))
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.closed {
            self.give_up("the client was dropped".into());
        } else {
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        if let Some(r) = self.rendered.take() {
            // SAFETY: the client's contract: the renderer's queue is done with the client's objects when it drops it.
            unsafe { self.exporter.destroy_timeline(r) };
        }
        lock(&self.release).timelines = None;
        if let Some((c, r)) = self.worker_timelines.take() {
            // SAFETY: as above.
            unsafe { self.exporter.destroy_timeline(c) };
            // SAFETY: as above.
            unsafe { self.exporter.destroy_timeline(r) };
        }
        for slot in self.inputs.drain(..).chain(self.outputs.drain(..)) {
            // SAFETY: as above; the worker's imports keep their own reference to the memory.
            unsafe { self.exporter.destroy_slot(slot) };
        }
    }
}

fn name(m: &Message) -> &'static str {
    protocol::kind_name(m.kind())
}

fn too_large(o: &Options) -> Error {
    Error::InvalidArgument(format!("an input frame of {}×{} pixels is empty or too large", o.width, o.height))
}

/// Bytes per pixel of the formats the worker takes.
///
/// ```
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::bytes_per_pixel;
///
/// assert_eq!(bytes_per_pixel(vk::Format::B8G8R8A8_SRGB), Some(4));
/// assert_eq!(bytes_per_pixel(vk::Format::R16G16B16A16_SFLOAT), Some(8));
/// assert_eq!(bytes_per_pixel(vk::Format::R8G8B8_UNORM), None); // not a format the worker takes
/// ```
pub fn bytes_per_pixel(format: vk::Format) -> Option<u64> {
    match format {
        vk::Format::R8G8B8A8_UNORM
        | vk::Format::R8G8B8A8_SRGB
        | vk::Format::B8G8R8A8_UNORM
        | vk::Format::B8G8R8A8_SRGB => Some(4),
        vk::Format::R16G16B16A16_SFLOAT => Some(8),
        _ => None,
    }
}
