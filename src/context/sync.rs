//! What a frame is handed over with and what comes back: the submission, the
//! ticket with its two signal points, the frame's times.

use ash::vk;
use serde::Serialize;

use crate::context::registry::{InputId, OutputId, TimelineId};

/// How frames are handed between the caller and the context.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The input image or buffer.
    pub input: InputId,
    /// The output image or buffer.
    pub output: OutputId,
    /// "The input is written": the context's GPU waits for it before reading the input.
    pub wait: Option<SyncPoint>,
    /// "The output may be overwritten": the context's GPU waits for it before
    /// writing the output (the renderer may still be reading the last result).
    pub output_free: Option<SyncPoint>,
}

impl Frame {
    /// A frame from `input` to `output` that waits for nothing (the input's
    /// writes are complete, and the output is free, when `submit` is called).
    pub fn new(input: InputId, output: OutputId) -> Self {
        Self { input, output, wait: None, output_free: None }
    }
    /// Waits on the GPU for `timeline` to reach `value` before reading the input.
    pub fn wait_for(mut self, timeline: TimelineId, value: u64) -> Self {
        self.wait = Some(SyncPoint { timeline, value });
        self
    }
    /// Waits on the GPU for `timeline` to reach `value` before writing the output.
    pub fn output_free_after(mut self, timeline: TimelineId, value: u64) -> Self {
        self.output_free = Some(SyncPoint { timeline, value });
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalPoint {
    /// The context's timeline semaphore.
    pub semaphore: vk::Semaphore,
    /// The value it reaches.
    pub value: u64,
}

/// A frame in flight. Made only by [`submit`](crate::NeuralFrameContext::submit);
/// it names its context, so another context refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    pub(crate) context: u64,
    pub(crate) value: u64,
    pub(crate) input_consumed: vk::Semaphore,
    pub(crate) output_ready: vk::Semaphore,
}

impl Ticket {
    /// The frame's number on the context's timelines (1, 2, 3, …).
    pub fn value(&self) -> u64 {
        self.value
    }
    /// Reached when the context has read the input: the caller may overwrite it.
    pub fn input_consumed(&self) -> SignalPoint {
        SignalPoint { semaphore: self.input_consumed, value: self.value }
    }
    /// Reached when the output is written: the caller may read it.
    pub fn output_ready(&self) -> SignalPoint {
        SignalPoint { semaphore: self.output_ready, value: self.value }
    }
}

/// What [`submit`](crate::NeuralFrameContext::submit) did.
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
#[derive(Debug)]
pub struct ExportedTimelines {
    /// Reaches a frame's value when its input has been read.
    pub input_consumed: std::os::fd::OwnedFd,
    /// Reaches a frame's value when its output is written.
    pub output_ready: std::os::fd::OwnedFd,
}

/// Times of one frame, in milliseconds. GPU times come from Vulkan timestamp
/// queries and CUDA events; `NaN` where there are none (no pass ran, the device
/// has no timestamps, or the frame's times were no longer kept).
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
            pre_pass: true,
            post_pass: true,
        }
    }
}

/// A frame's submission, as the submit path passes it on (inputs resolved).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Submission {
    pub(crate) wait: Option<(vk::Semaphore, u64)>,
    pub(crate) output_free: Option<(vk::Semaphore, u64)>,
}
