//! Frames: submitting one with its waits, the ticket's two signal points, waiting for a
//! frame (bounded, or not at all) and its stats.

use std::ffi::c_char;
use std::time::Duration;

use neural_frame::ash::vk::Handle;
use neural_frame::{Frame, FrameStats, Submitted};

use crate::context::{context, nf_context, nf_input, nf_output, nf_timeline};
use crate::tickets::Found;
use crate::{Fail, guard, nf_status, non_null, put, read_arg, str_arg};

/// One of a model's extra inputs, by the model's name for it (`nf_frame`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_named_input {
    /// The model's input name (NUL-terminated UTF-8; read during the call only).
    pub name: *const c_char,
    /// A registered input of the frame size.
    pub input: nf_input,
}

/// One of a model's extra outputs to convert into a registered output (`nf_frame`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_named_output {
    /// The model's output name (NUL-terminated UTF-8; read during the call only).
    pub name: *const c_char,
    /// A registered output of the output size.
    pub output: nf_output,
}

/// One frame to run: which registered input and output, and what to wait for. Zero it
/// (`nf_frame f = {0};`) and fill in what applies.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_frame {
    /// The input (image or buffer).
    pub input: nf_input,
    /// The output (image or buffer).
    pub output: nf_output,
    /// "The input is written": the context's GPU waits for this timeline to reach
    /// `wait_value` before reading the input. 0: no wait (the input is written already;
    /// always so in `NF_SYNC_HOST`).
    pub wait_timeline: nf_timeline,
    /// The value `wait_timeline` must reach.
    pub wait_value: u64,
    /// "The output may be overwritten": the context's GPU waits for this timeline to reach
    /// `output_free_value` before writing the output (the caller's reads of an earlier
    /// result are done). 0: no wait.
    pub output_free_timeline: nf_timeline,
    /// The value `output_free_timeline` must reach.
    pub output_free_value: u64,
    /// The model's extra inputs (an albedo, normals, …), `extra_input_count` of them; NULL
    /// with a count of 0 for a model of one input. Read during the call only.
    pub extra_inputs: *const nf_named_input,
    /// The number of `extra_inputs`.
    pub extra_input_count: usize,
    /// The model's extra outputs to convert as well, `extra_output_count` of them (NULL
    /// with 0). Read during the call only.
    pub extra_outputs: *const nf_named_output,
    /// The number of `extra_outputs`.
    pub extra_output_count: usize,
}

/// A frame in flight, as `nf_context_submit` gives it: its number on the context's two
/// timelines (`value`, 1, 2, 3, …; 0: the frame was dropped under `NF_BACK_PRESSURE_SKIP`),
/// and the two points the caller waits for, on its own queue (a wait in its
/// `vkQueueSubmit` with `VkTimelineSemaphoreSubmitInfo`) or on the host
/// (`vkWaitSemaphores`). The semaphores are the context's own, on the caller's device for
/// a context built on it (with import by fd the caller imports
/// `nf_context_export_timelines`' descriptors once and waits on those for the same
/// values); they live as long as the context: never destroy them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct nf_ticket {
    /// The frame's number: pass it to `nf_context_wait` and its kin.
    pub value: u64,
    /// "Input consumed" (`VkSemaphore`): once it reaches `input_consumed_value` the caller
    /// may write the input again.
    pub input_consumed_semaphore: u64,
    /// The value "input consumed" reaches for this frame.
    pub input_consumed_value: u64,
    /// "Output ready" (`VkSemaphore`): once it reaches `output_ready_value` the caller may
    /// read the output.
    pub output_ready_semaphore: u64,
    /// The value "output ready" reaches for this frame.
    pub output_ready_value: u64,
}

/// Times of one frame, in milliseconds (NaN: not measured, or no longer kept: the times of
/// the last 64 retired frames are).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_frame_stats {
    /// The frame's ticket value.
    pub ticket: u64,
    /// The pre pass on the GPU.
    pub pre_ms: f64,
    /// The model: CUDA event time on the CUDA backend, host time on the CPU backend.
    pub infer_ms: f64,
    /// The post pass on the GPU.
    pub post_ms: f64,
    /// From `nf_context_submit` to retirement, host clock.
    pub latency_ms: f64,
    /// Host time inside `nf_context_submit` handing the frame to CUDA and ONNX Runtime (the
    /// model's run itself on the CPU backend).
    pub enqueue_ms: f64,
    /// CUDA backend: idle time of the model's stream before this frame.
    pub gpu_gap_ms: f64,
    /// The ring slot the frame went through (`UINT32_MAX`: not known).
    pub slot: u32,
    /// The tiles the frame ran as (1: whole); the times are summed over them.
    pub tiles: u32,
    /// Whether a pre pass converted the input (false: the model read the caller's buffer).
    pub pre_pass: bool,
    /// Whether a post pass converted the output (false: the model wrote the caller's buffer).
    pub post_pass: bool,
    /// Whether the frame's passes ran as CUDA kernels (rather than Vulkan compute passes).
    pub cuda_passes: bool,
}

impl From<FrameStats> for nf_frame_stats {
    fn from(s: FrameStats) -> Self {
        Self {
            ticket: s.ticket,
            pre_ms: s.pre_ms,
            infer_ms: s.infer_ms,
            post_ms: s.post_ms,
            latency_ms: s.latency_ms,
            enqueue_ms: s.enqueue_ms,
            gpu_gap_ms: s.gpu_gap_ms,
            slot: u32::try_from(s.slot).unwrap_or(u32::MAX),
            tiles: s.tiles,
            pre_pass: s.pre_pass,
            post_pass: s.post_pass,
            cuda_passes: s.cuda_passes,
        }
    }
}

impl nf_frame_stats {
    /// A frame that retired so long ago that neither its ticket nor its times are kept.
    fn forgotten(ticket: u64) -> Self {
        Self {
            ticket,
            pre_ms: f64::NAN,
            infer_ms: f64::NAN,
            post_ms: f64::NAN,
            latency_ms: f64::NAN,
            enqueue_ms: f64::NAN,
            gpu_gap_ms: f64::NAN,
            slot: u32::MAX,
            tiles: 1,
            pre_pass: true,
            post_pass: true,
            cuda_passes: false,
        }
    }
}

/// Submits one frame and writes its ticket to `*ticket` (`value` 0: every slot was busy
/// and the builder's policy is `NF_BACK_PRESSURE_SKIP`, so nothing was submitted). With
/// `NF_BACK_PRESSURE_BLOCK` a full ring waits on the host for its oldest frame first
/// (bounded by the frame timeout). The frame's waits are GPU waits on the caller's
/// registered timelines (`NF_SYNC_GPU`); on a queue shared with the caller their values
/// must come from submissions made before this call, or from the host. On the CPU backend
/// the model runs inside this call. Refused, with the model's tensors listed, where the
/// frame leaves out an extra input, names one the model lacks or twice, or a registration
/// of another size.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `frame` is
/// NULL or a readable frame whose arrays hold their counts of readable entries; `ticket`
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_submit(
    c: *mut nf_context,
    frame: *const nf_frame,
    ticket: *mut nf_ticket,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        // SAFETY: the caller's contract.
        let f = unsafe { read_arg(frame, "frame") }?;
        non_null(ticket, "ticket")?;
        let mut frame = Frame::new(c.ids.input(f.input)?, c.ids.output(f.output)?);
        if f.wait_timeline != 0 {
            frame = frame.wait_for(c.ids.timeline(f.wait_timeline)?, f.wait_value);
        }
        if f.output_free_timeline != 0 {
            frame = frame.output_free_after(c.ids.timeline(f.output_free_timeline)?, f.output_free_value);
        }
        // SAFETY: the caller's contract (the arrays hold their counts).
        let inputs = unsafe { array(f.extra_inputs, f.extra_input_count, "extra_inputs") }?;
        for named in inputs {
            // SAFETY: NUL-terminated (the caller's contract).
            let name = unsafe { str_arg(named.name, "an extra input's name") }?;
            frame = frame.with_input(name, c.ids.input(named.input)?);
        }
        // SAFETY: as above.
        let outputs = unsafe { array(f.extra_outputs, f.extra_output_count, "extra_outputs") }?;
        for named in outputs {
            // SAFETY: NUL-terminated (the caller's contract).
            let name = unsafe { str_arg(named.name, "an extra output's name") }?;
            frame = frame.with_output(name, c.ids.output(named.output)?);
        }
        let out = match c.ctx.submit(frame)? {
            Submitted::Frame(t) => {
                c.tickets.add(t);
                let (consumed, ready) = (t.input_consumed(), t.output_ready());
                nf_ticket {
                    value: t.value(),
                    input_consumed_semaphore: consumed.semaphore.as_raw(),
                    input_consumed_value: consumed.value,
                    output_ready_semaphore: ready.semaphore.as_raw(),
                    output_ready_value: ready.value,
                }
            }
            Submitted::Skipped => nf_ticket::default(),
        };
        // SAFETY: the caller's contract.
        unsafe { put(ticket, out, "ticket") }
    })
}

/// A C array as a slice (empty where the count is 0).
///
/// # Safety
/// `p` is NULL with `n` 0, or points to `n` readable `T`s.
unsafe fn array<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], Fail> {
    if n == 0 {
        return Ok(&[]);
    }
    non_null(p, what)?;
    // SAFETY: `n` readable entries (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Writes `stats` where the caller asked for them (NULL: not wanted).
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn give_stats(out: *mut nf_frame_stats, stats: nf_frame_stats) {
    if !out.is_null() {
        // SAFETY: not null, and writable (the caller's contract).
        unsafe { out.write(stats) };
    }
}

/// Waits for a frame with a bound: `None` for the builder's frame timeout.
///
/// # Safety
/// As `nf_context_wait`.
unsafe fn wait(c: *mut nf_context, ticket: u64, timeout: Option<Duration>, stats: *mut nf_frame_stats) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        let s = match c.tickets.find(ticket)? {
            Found::Ticket(t) => match timeout {
                Some(timeout) => c.ctx.wait_timeout(&t, timeout)?.into(),
                None => c.ctx.wait(&t)?.into(),
            },
            Found::Retired => nf_frame_stats::forgotten(ticket),
        };
        // SAFETY: the caller's contract.
        unsafe { give_stats(stats, s) };
        Ok(())
    })
}

/// Waits on the host until the frame of ticket value `ticket` is done (its output
/// written), bounded by the builder's frame timeout (`NF_STATUS_TIMEOUT`: the frame
/// stays in flight; wait again later), and writes its times to `*stats` (NULL: not
/// wanted). A frame that retired already returns at once. Frames retire in order: the
/// ones before it are waited for too.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `stats` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_wait(c: *mut nf_context, ticket: u64, stats: *mut nf_frame_stats) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { wait(c, ticket, None, stats) }
}

/// `nf_context_wait` with its own bound, in nanoseconds.
///
/// # Safety
/// As `nf_context_wait`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_wait_timeout(
    c: *mut nf_context,
    ticket: u64,
    timeout_ns: u64,
    stats: *mut nf_frame_stats,
) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { wait(c, ticket, Some(Duration::from_nanos(timeout_ns)), stats) }
}

/// Whether the frame is done, without waiting: `*done` true (and its times in `*stats`,
/// where not NULL) once it is, false while it is in flight.
///
/// # Safety
/// As `nf_context_wait`; `done` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_try_wait(
    c: *mut nf_context,
    ticket: u64,
    done: *mut bool,
    stats: *mut nf_frame_stats,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(done, "done")?;
        let s = match c.tickets.find(ticket)? {
            Found::Ticket(t) => c.ctx.try_wait(&t)?.map(nf_frame_stats::from),
            Found::Retired => Some(nf_frame_stats::forgotten(ticket)),
        };
        if let Some(s) = s {
            // SAFETY: the caller's contract.
            unsafe { give_stats(stats, s) };
        }
        // SAFETY: the caller's contract.
        unsafe { put(done, s.is_some(), "done") }
    })
}

/// Waits on the host, up to `timeout_ns` nanoseconds (`NF_STATUS_TIMEOUT` after), until
/// the frame has read its input: the caller may write it again. For `NF_SYNC_HOST`, where
/// the ticket's semaphores are not the caller's to wait on, and for tests.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_wait_input_consumed(c: *mut nf_context, ticket: u64, timeout_ns: u64) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        match c.tickets.find(ticket)? {
            Found::Ticket(t) => Ok(c.ctx.wait_input_consumed(&t, Duration::from_nanos(timeout_ns))?),
            Found::Retired => Ok(()),
        }
    })
}

/// Whether the frame has read its input, without waiting, into `*consumed`.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `consumed`
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_try_input_consumed(
    c: *mut nf_context,
    ticket: u64,
    consumed: *mut bool,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(consumed, "consumed")?;
        let done = match c.tickets.find(ticket)? {
            Found::Ticket(t) => c.ctx.try_input_consumed(&t)?,
            Found::Retired => true,
        };
        // SAFETY: the caller's contract.
        unsafe { put(consumed, done, "consumed") }
    })
}

/// Waits for every frame in flight (each bounded by the frame timeout).
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_wait_all(c: *mut nf_context) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        Ok(c.ctx.wait_all()?)
    })
}
