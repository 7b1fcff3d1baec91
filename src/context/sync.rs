//! What a frame is handed over with and what comes back: the submission, the
//! ticket with its two signal points, the frame's times.

use ash::vk;
use serde::Serialize;

use crate::context::registry::{InputId, OutputId, TimelineId};

/// How frames are handed between the caller and the context
/// ([`NeuralFrameContext::sync_mode`](crate::NeuralFrameContext::sync_mode)).
///
/// ```no_run
/// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, Submitted, SyncMode, TimelineId};
///
/// # fn frame(ctx: &mut NeuralFrameContext, input: InputId, output: OutputId, rendered: TimelineId, n: u64)
/// # -> neural_frame::Result<()> {
/// let frame = match ctx.sync_mode() {
///     // The context's GPU waits for the renderer's "rendered = n".
///     SyncMode::Gpu => Frame::new(input, output).wait_for(rendered, n),
///     // The renderer has waited for its own fence: the input is written.
///     SyncMode::Host => Frame::new(input, output),
/// };
/// if let Submitted::Frame(ticket) = ctx.submit(frame)? {
///     if ctx.sync_mode() == SyncMode::Host {
///         ctx.wait(&ticket)?; // completion comes through the host
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Timeline semaphores are shared on the GPU: [`Frame::wait_for`] makes the
    /// context's GPU wait for the caller's "rendered" value, and the caller's
    /// GPU waits for the ticket's [`Ticket::input_consumed`] and
    /// [`Ticket::output_ready`]. Always so on a context built on the caller's
    /// device; with import by file descriptor, where both devices have
    /// `VK_KHR_external_semaphore_fd`.
    Gpu,
    /// The driver cannot share semaphores (Mesa's lavapipe has no
    /// `VK_KHR_external_semaphore_fd`), so completion travels through the host:
    /// the caller calls [`submit`](crate::NeuralFrameContext::submit) once its
    /// writes to the input are complete (it waited for its own fence), and
    /// learns that the input is consumed or the output ready from
    /// [`wait_input_consumed`](crate::NeuralFrameContext::wait_input_consumed),
    /// [`try_wait`](crate::NeuralFrameContext::try_wait) or
    /// [`wait`](crate::NeuralFrameContext::wait). Submissions may not carry
    /// [`Frame::wait_for`].
    Host,
}

/// A point on one of the caller's timelines: reached when `timeline` is at `value` or beyond.
///
/// ```no_run
/// use neural_frame::{Frame, InputId, OutputId, SyncPoint, TimelineId};
///
/// # fn frame(input: InputId, output: OutputId, rendered: TimelineId) {
/// let frame = Frame::new(input, output).wait_for(rendered, 7);
/// assert_eq!(frame.waits, [SyncPoint { timeline: rendered, value: 7 }]);
/// assert!(frame.output_free.is_empty());
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncPoint {
    /// The timeline, as registered with the context.
    pub timeline: TimelineId,
    /// The value.
    pub value: u64,
}

/// One frame to run: which registered input and output, and what to wait for.
///
/// ```no_run
/// # use neural_frame::{Frame, NeuralFrameContext, Submitted};
/// # fn f(ctx: &mut NeuralFrameContext, input: neural_frame::InputId, output: neural_frame::OutputId,
/// #      rendered: neural_frame::TimelineId, n: u64) -> neural_frame::Result<()> {
/// // The renderer signalled `rendered = n` after drawing into `input`:
/// if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output).wait_for(rendered, n))? {
///     // Put ticket.output_ready() into the renderer's own vkQueueSubmit as a wait.
///     let _ = ticket.output_ready();
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The input image or buffer.
    pub input: InputId,
    /// The output image or buffer.
    pub output: OutputId,
    /// "The input is written": the context's GPU waits for every one of them before
    /// reading the input (a host's frame may have a producer per plane).
    pub waits: Vec<SyncPoint>,
    /// "The output may be overwritten": the context's GPU waits for every one of them
    /// before writing the output (the renderer may still be reading the last result).
    pub output_free: Vec<SyncPoint>,
    /// The caller's timelines the context signals, each to its value, once it no longer
    /// reads the frame's input: when the ticket's "input consumed" is reached (a host's
    /// "the reads of this frame are done").
    pub signal_input_consumed: Vec<SyncPoint>,
    /// The caller's timelines the context signals, each to its value, when the frame's
    /// output is written: when the ticket's "output ready" is reached, with the same
    /// guarantees (a host's producer point for the output).
    pub signal_output_ready: Vec<SyncPoint>,
    /// The model's extra inputs ([`ModelContract::extra_inputs`](crate::ModelContract::extra_inputs)),
    /// by name: every one of them, each a registered input of the frame's size
    /// written under the same `wait`.
    pub extra_inputs: Vec<(String, InputId)>,
    /// Extra outputs the caller wants ([`ModelContract::extra_outputs`](crate::ModelContract::extra_outputs)),
    /// by name, each a registered output of the output's size written by "output
    /// ready". Those not named are still computed, into the slot's own memory.
    pub extra_outputs: Vec<(String, OutputId)>,
}

impl Frame {
    /// A frame from `input` to `output` that waits for nothing (the input's
    /// writes are complete, and the output is free, when `submit` is called).
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{Frame, NeuralFrameContext, Submitted};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.upload(input, &vec![90; 960 * 540 * 4])?; // complete when it returns
    /// if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? {
    ///     ctx.wait(&ticket)?;
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn new(input: InputId, output: OutputId) -> Self {
        Self {
            input,
            output,
            waits: Vec::new(),
            output_free: Vec::new(),
            signal_input_consumed: Vec::new(),
            signal_output_ready: Vec::new(),
            extra_inputs: Vec::new(),
            extra_outputs: Vec::new(),
        }
    }
    /// Waits on the GPU for `timeline` to reach `value` before reading the input
    /// ([`SyncMode::Gpu`] only). Called again, the frame waits for each point.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, TimelineId};
    ///
    /// # fn frame(ctx: &mut NeuralFrameContext, input: InputId, output: OutputId, rendered: TimelineId, n: u64)
    /// # -> neural_frame::Result<()> {
    /// // The renderer's submission that draws into `input` signals `rendered = n`;
    /// // it was made before this call (on a shared queue, it must be).
    /// ctx.submit(Frame::new(input, output).wait_for(rendered, n))?;
    /// # Ok(()) }
    /// ```
    pub fn wait_for(mut self, timeline: TimelineId, value: u64) -> Self {
        self.waits.push(SyncPoint { timeline, value });
        self
    }
    /// Waits on the GPU for `timeline` to reach `value` before writing the output
    /// ([`SyncMode::Gpu`] only). Called again, the frame waits for each point.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, TimelineId};
    ///
    /// # fn frame(ctx: &mut NeuralFrameContext, input: InputId, outputs: [OutputId; 2], rendered: TimelineId,
    /// #     presented: TimelineId, n: u64) -> neural_frame::Result<()> {
    /// // Two outputs in turn: frame n writes the output frame n - 2 wrote, once the
    /// // renderer signalled `presented = n - 2` after it read that result.
    /// let frame = Frame::new(input, outputs[n as usize % 2]).wait_for(rendered, n);
    /// let frame = if n > 2 { frame.output_free_after(presented, n - 2) } else { frame };
    /// ctx.submit(frame)?;
    /// # Ok(()) }
    /// ```
    pub fn output_free_after(mut self, timeline: TimelineId, value: u64) -> Self {
        self.output_free.push(SyncPoint { timeline, value });
        self
    }

    /// Signals the caller's `timeline` to `value` once the context no longer reads the
    /// frame's input ("input consumed"; [`SyncMode::Gpu`] only). A timeline registered by
    /// handle or imported by descriptor.
    ///
    /// ```no_run
    /// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, TimelineId};
    ///
    /// # fn frame(ctx: &mut NeuralFrameContext, input: InputId, output: OutputId, reads_done: TimelineId,
    /// #     written: TimelineId, n: u64) -> neural_frame::Result<()> {
    /// // A host's own timelines: "our reads of the input are done" and "the output is written".
    /// let frame = Frame::new(input, output).signal_input_consumed(reads_done, n).signal_output_ready(written, n);
    /// ctx.submit(frame)?;
    /// # Ok(()) }
    /// ```
    pub fn signal_input_consumed(mut self, timeline: TimelineId, value: u64) -> Self {
        self.signal_input_consumed.push(SyncPoint { timeline, value });
        self
    }

    /// Signals the caller's `timeline` to `value` once the frame's output is written
    /// ("output ready"; [`SyncMode::Gpu`] only), with what the ticket's
    /// [`output_ready`](Ticket::output_ready) guarantees. See
    /// [`signal_input_consumed`](Self::signal_input_consumed).
    pub fn signal_output_ready(mut self, timeline: TimelineId, value: u64) -> Self {
        self.signal_output_ready.push(SyncPoint { timeline, value });
        self
    }

    /// Feeds the model's extra input `name` (an albedo, normal, depth or motion
    /// image beside the frame) from `input`, a registered input of the frame's size.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{Frame, NeuralFrameContext};
    ///
    /// // A denoiser that takes `color` and `albedo`.
    /// let mut ctx = NeuralFrameContext::builder("models/test/tiny-x1-f32-color-albedo.onnx").frame_size(64, 48).build()?;
    /// let color = ctx.create_input_image(vk::Format::R16G16B16A16_SFLOAT)?;
    /// let albedo = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(vk::Format::R16G16B16A16_SFLOAT)?;
    /// ctx.submit(Frame::new(color, output).with_input("albedo", albedo))?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn with_input(mut self, name: impl Into<String>, input: InputId) -> Self {
        self.extra_inputs.push((name.into(), input));
        self
    }

    /// Converts the model's extra output `name` into `output`, a registered output
    /// of the output's size, as well.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{Frame, NeuralFrameContext};
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32-two-outputs.onnx").frame_size(64, 48).build()?;
    /// let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    /// let image = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    /// let edges = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?; // one channel, as grey
    /// ctx.submit(Frame::new(input, image).with_output("edges", edges))?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn with_output(mut self, name: impl Into<String>, output: OutputId) -> Self {
        self.extra_outputs.push((name.into(), output));
        self
    }
}

/// A point on one of the context's two timelines: the caller waits for
/// `semaphore` to reach `value`, on its own queue or on the host.
///
/// `semaphore` is the context's own handle. On a context built on the caller's
/// device it is a semaphore of that device, usable in the caller's
/// `vkQueueSubmit` as it is. With import by file descriptor, the caller imports
/// [`NeuralFrameContext::export_timelines`](crate::NeuralFrameContext::export_timelines)
/// once and waits on its own copy for the same `value`.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::Ticket;
///
/// # fn renderer(device: &ash::Device, queue: vk::Queue, present: vk::CommandBuffer, ticket: Ticket)
/// # -> Result<(), vk::Result> {
/// // The renderer's pass that reads the result waits for it on the GPU.
/// let ready = ticket.output_ready();
/// let (semaphores, values) = ([ready.semaphore], [ready.value]);
/// let stages = [vk::PipelineStageFlags::FRAGMENT_SHADER];
/// let cmds = [present];
/// let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().wait_semaphore_values(&values);
/// let submit = vk::SubmitInfo::default()
///     .wait_semaphores(&semaphores)
///     .wait_dst_stage_mask(&stages)
///     .command_buffers(&cmds)
///     .push_next(&mut timeline);
/// // SAFETY: `present` is recorded and not pending; the renderer holds its queue lock.
/// unsafe { device.queue_submit(queue, &[submit], vk::Fence::null()) }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPoint {
    /// The context's timeline semaphore.
    pub semaphore: vk::Semaphore,
    /// The value it reaches.
    pub value: u64,
}

/// A frame in flight. Made only by [`submit`](crate::NeuralFrameContext::submit);
/// it names its context, so another context refuses it.
///
/// ```no_run
/// use neural_frame::{Frame, InputId, NeuralFrameContext, OutputId, Submitted};
///
/// # fn frames(ctx: &mut NeuralFrameContext, input: InputId, output: OutputId) -> neural_frame::Result<()> {
/// let mut tickets = Vec::new();
/// for _ in 0..3 {
///     if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? {
///         tickets.push(ticket);
///     }
/// }
/// for ticket in &tickets {
///     let stats = ctx.wait(ticket)?;
///     println!("frame {}: {:.2} ms", ticket.value(), stats.latency_ms);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    pub(crate) context: u64,
    pub(crate) value: u64,
    pub(crate) input_consumed: vk::Semaphore,
    pub(crate) output_ready: vk::Semaphore,
}

impl Ticket {
    /// The frame's number on the context's timelines (1, 2, 3, …).
    ///
    /// ```no_run
    /// # use neural_frame::{Frame, NeuralFrameContext, Submitted};
    /// # fn f(ctx: &mut NeuralFrameContext, input: neural_frame::InputId, output: neural_frame::OutputId)
    /// # -> neural_frame::Result<()> {
    /// if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? {
    ///     // The value both signal points reach.
    ///     assert_eq!(ticket.output_ready().value, ticket.value());
    ///     assert_eq!(ctx.wait(&ticket)?.ticket, ticket.value());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> u64 {
        self.value
    }
    /// Reached when the context has read the input: the caller may overwrite it.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::Ticket;
    ///
    /// # fn renderer(device: &ash::Device, ticket: Ticket) -> Result<(), vk::Result> {
    /// // On the host (the renderer would rather wait in its next vkQueueSubmit):
    /// let consumed = ticket.input_consumed();
    /// let (semaphores, values) = ([consumed.semaphore], [consumed.value]);
    /// let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
    /// // SAFETY: the semaphore is the context's, on the renderer's device (bring your own device).
    /// unsafe { device.wait_semaphores(&info, 1_000_000_000) }?; // then draw into the input again
    /// # Ok(()) }
    /// ```
    pub fn input_consumed(&self) -> SignalPoint {
        SignalPoint { semaphore: self.input_consumed, value: self.value }
    }
    /// Reached when the output is written: the caller may read it.
    ///
    /// ```no_run
    /// # use neural_frame::{Frame, NeuralFrameContext, Submitted};
    /// # fn f(ctx: &mut NeuralFrameContext, input: neural_frame::InputId, output: neural_frame::OutputId)
    /// # -> neural_frame::Result<()> {
    /// if let Submitted::Frame(ticket) = ctx.submit(Frame::new(input, output))? {
    ///     let ready = ticket.output_ready();
    ///     // Wait for (ready.semaphore, ready.value) in the renderer's vkQueueSubmit
    ///     // (vk::TimelineSemaphoreSubmitInfo), before the pass that reads `output`.
    ///     println!("output ready at {:?} = {}", ready.semaphore, ready.value);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn output_ready(&self) -> SignalPoint {
        SignalPoint { semaphore: self.output_ready, value: self.value }
    }
}

/// What [`submit`](crate::NeuralFrameContext::submit) did.
///
/// ```no_run
/// use neural_frame::{BackPressure, Frame, NeuralFrameContext, Submitted};
/// use ash::vk;
///
/// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .frame_size(960, 540)
///     .back_pressure(BackPressure::Skip) // never stall the render loop
///     .build()?;
/// # let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
/// # let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
/// match ctx.submit(Frame::new(input, output))? {
///     Submitted::Frame(ticket) => println!("frame {} on its way", ticket.value()),
///     Submitted::Skipped => println!("every slot busy: frame dropped ({} so far)", ctx.skipped()),
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// The frame is on its way.
    Frame(Ticket),
    /// Every slot was busy and the policy is [`BackPressure::Skip`](crate::BackPressure::Skip): nothing was submitted.
    Skipped,
}

/// The context's two timelines, exported for a caller on another device
/// ([`NeuralFrameContext::export_timelines`](crate::NeuralFrameContext::export_timelines)):
/// import each once as a timeline semaphore (`vkImportSemaphoreFdKHR`, or
/// `cuImportExternalSemaphore`) and wait on it for a ticket's value.
///
/// ```no_run
/// use std::os::fd::IntoRawFd;
/// use ash::vk;
/// use neural_frame::NeuralFrameContext;
///
/// # fn renderer(ctx: &NeuralFrameContext, semaphore_fd: &ash::khr::external_semaphore_fd::Device,
/// #     output_ready: vk::Semaphore) -> Result<(), Box<dyn std::error::Error>> {
/// let exported = ctx.export_timelines()?;
/// // `output_ready`: a timeline semaphore the renderer created to receive the context's.
/// let info = vk::ImportSemaphoreFdInfoKHR::default()
///     .semaphore(output_ready)
///     .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD)
///     .fd(exported.output_ready.into_raw_fd()); // Vulkan owns it once the import succeeds
/// // SAFETY: `output_ready` is an unused timeline semaphore of the device `semaphore_fd` was loaded for.
/// unsafe { semaphore_fd.import_semaphore_fd(&info) }?;
/// // From now on, each ticket's output_ready().value is waited for on `output_ready`.
/// # Ok(()) }
/// ```
///
/// On Windows both are NT handles (`OPAQUE_WIN32`, for `vkImportSemaphoreWin32HandleKHR`),
/// which an import does not take over: the caller closes them (drops them) once imported.
#[derive(Debug)]
pub struct ExportedTimelines {
    /// Reaches a frame's value when its input has been read.
    pub input_consumed: crate::ExternalHandle,
    /// Reaches a frame's value when its output is written.
    pub output_ready: crate::ExternalHandle,
}

/// Times of one frame, in milliseconds. GPU times come from Vulkan timestamp
/// queries and CUDA events; `NaN` where there are none (no pass ran, the device
/// has no timestamps, or the frame's times were no longer kept).
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::NeuralFrameContext;
///
/// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// # let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
/// # let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
/// let stats = ctx.infer(input, output)?;
/// println!(
///     "frame {} in slot {}: pre {:.2} ms, model {:.2} ms, post {:.2} ms, {:.2} ms in all",
///     stats.ticket, stats.slot, stats.pre_ms, stats.infer_ms, stats.post_ms, stats.latency_ms
/// );
/// if stats.pre_ms.is_nan() {
///     println!("(the device writes no timestamps)");
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FrameStats {
    /// The frame's ticket value.
    pub ticket: u64,
    /// Pre pass on the GPU.
    pub pre_ms: f64,
    /// The model: CUDA event time on the CUDA backend, host time on the CPU backend.
    pub infer_ms: f64,
    /// Post pass on the GPU.
    pub post_ms: f64,
    /// From `submit` to retirement, host clock.
    pub latency_ms: f64,
    /// Host time spent handing the frame to CUDA and ONNX Runtime inside `submit`
    /// (enqueue, or the run itself on the CPU backend).
    pub enqueue_ms: f64,
    /// CUDA backend: idle time of the CUDA stream between the previous frame's model end and this
    /// frame's model start (NaN for the first frame and on the CPU backend).
    pub gpu_gap_ms: f64,
    /// The ring slot the frame went through.
    pub slot: usize,
    /// Whether a pre pass converted the input (false: the model read the caller's buffer itself).
    pub pre_pass: bool,
    /// Whether a post pass converted the output (false: the model wrote the caller's buffer itself).
    pub post_pass: bool,
    /// Whether the frame's passes ran as CUDA kernels on the model's streams (the
    /// CUDA route: no Vulkan batch between the frame and the model), rather than
    /// as Vulkan compute passes.
    pub cuda_passes: bool,
    /// The tiles the frame ran as (1: whole); `pre_ms`, `infer_ms`, `post_ms` and
    /// `enqueue_ms` are then summed over them, `latency_ms` runs from the first
    /// tile's submission, and `slot` and `gpu_gap_ms` are the last tile's.
    pub tiles: u32,
}

impl FrameStats {
    /// The stats of a frame whose times are no longer kept.
    pub(crate) fn forgotten(ticket: u64) -> Self {
        Self {
            ticket,
            pre_ms: f64::NAN,
            infer_ms: f64::NAN,
            post_ms: f64::NAN,
            latency_ms: f64::NAN,
            enqueue_ms: f64::NAN,
            gpu_gap_ms: f64::NAN,
            slot: usize::MAX,
            tiles: 1,
            pre_pass: true,
            post_pass: true,
            cuda_passes: false,
        }
    }
}

/// A point on one of the caller's timelines, by registration.
pub(crate) type CallerPoint = (TimelineId, u64);

/// A caller's timeline to signal: its handle, its Vulkan semaphore, the value.
pub(crate) type CallerSignal = (TimelineId, vk::Semaphore, u64);

/// A frame's submission, as the submit path passes it on (inputs resolved).
#[derive(Debug, Clone)]
pub(crate) struct Submission {
    pub(crate) wait: Vec<(vk::Semaphore, u64)>,
    pub(crate) output_free: Vec<(vk::Semaphore, u64)>,
    /// The timelines of `wait` and `output_free`, where CUDA has them all (else empty).
    pub(crate) cuda_points: (Vec<CallerPoint>, Vec<CallerPoint>),
    /// The caller's timelines to signal with "input consumed" and with "output ready"
    /// (the frame's last tile only).
    pub(crate) signals: (Vec<CallerSignal>, Vec<CallerSignal>),
    /// Every caller semaphore the frame waits for is one CUDA has too.
    pub(crate) cuda_waits: bool,
    /// The model's extra inputs: (index in the contract's extra inputs, registration).
    pub(crate) extra_inputs: Vec<(usize, InputId)>,
    /// The extra outputs asked for: (index in the contract's extra outputs, registration).
    pub(crate) extra_outputs: Vec<(usize, OutputId)>,
}
