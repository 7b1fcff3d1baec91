//! Frames: submitting one with its waits, the ticket's two signal points, waiting for a
//! frame (bounded, or not at all) and its stats.

use std::ffi::c_char;
use std::time::Duration;

use neural_frame::ash::vk::Handle;
use neural_frame::{Frame, FrameStats, Submitted, TimelineId};

use crate::context::{Ids, context, nf_context, nf_input, nf_output, nf_timeline};
use crate::tickets::Found;
use crate::{Fail, Versioned, guard, nf_status, non_null, out_size, put, read_versioned, str_arg, write_versioned};

/// One of a model's extra inputs, by the model's name for it (`nf_frame`). An element of
/// an array: fixed, it never grows (a later need is a new array field of `nf_frame`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_named_input {
    /// The model's input name (NUL-terminated UTF-8; read during the call only).
    pub name: *const c_char,
    /// A registered input of the frame size.
    pub input: nf_input,
}

/// One of a model's extra outputs to convert into a registered output (`nf_frame`). An
/// element of an array: fixed, it never grows.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_named_output {
    /// The model's output name (NUL-terminated UTF-8; read during the call only).
    pub name: *const c_char,
    /// A registered output of the output size.
    pub output: nf_output,
}

/// A point on one of the caller's registered timelines (`nf_frame`'s lists of waits and
/// signals): `timeline` at `value`. An element of an array: fixed, it never grows.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nf_sync_point {
    /// A timeline registered on this context (`nf_context_register_timeline`,
    /// `_register_exportable_timeline`, `_import_timeline`).
    pub timeline: nf_timeline,
    /// The value: waited for (the timeline reaches it) or signalled (the context sets it).
    pub value: u64,
}

/// One frame to run: which registered input and output, what to wait for and what to
/// signal. A versioned struct: `nf_frame f = NF_FRAME_INIT;` sets `struct_size` and zeroes
/// the rest; fill in what applies. Its first version ended at `extra_output_count` (88 bytes
/// on 64-bit targets); the lists of waits and signals (`waits` … `signal_output_ready_count`)
/// came after, and read as empty from an older program's smaller struct.
///
/// Waits: the frame waits for every point it names, the single `wait_timeline` and every
/// entry of `waits` before reading its input ("the input is written": a host's frame may
/// have a producer per plane), the single `output_free_timeline` and every entry of
/// `output_free` before writing its output. Signals: the context signals each of the
/// caller's timelines in `signal_input_consumed` to its value when the frame's "input
/// consumed" is reached, and each in `signal_output_ready` when its "output ready" is
/// reached, with the same guarantees as the ticket's points of those names (`nf_ticket`):
/// a wait for such a value is a wait for the ticket's point. On the CPU backend they are
/// signalled from the host, inside the context's calls, once the frame got there. In
/// `NF_SYNC_HOST` every wait and every signal is refused (`NF_STATUS_INVALID_ARGUMENT`):
/// submit once the input is written and the output free, and wait on the host.
///
/// Where the context waits: for a Vulkan pass, in the `vkQueueSubmit` of the batch that
/// runs it, with `pWaitDstStageMask` `VK_PIPELINE_STAGE_ALL_COMMANDS_BIT` (the semaphore wait
/// makes the caller's writes before its signal available and visible to the pass; no
/// barrier of the caller's is needed for memory, only for the layout and, for imported
/// resources, the queue family: see `nf_caller_image`, `nf_image_import`); on the CUDA
/// backend, where CUDA kernels or the model touch the memory first, on the model's CUDA
/// stream before them (`nf_context_register_exportable_timeline`, or a timeline imported by
/// fd), else in a Vulkan batch of the context's; on the CPU backend, on the host inside
/// `nf_context_submit`, before anything is submitted (bounded by the frame timeout:
/// `NF_STATUS_TIMEOUT`), except the post pass's waits for the output-free points
/// (`output_free_timeline`, `output_free`), which stay GPU waits where a Vulkan post pass
/// writes the output.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_frame {
    /// `sizeof(nf_frame)` as the caller's header has it (`NF_FRAME_INIT`).
    pub struct_size: u32,
    /// The input (image or buffer).
    pub input: nf_input,
    /// The output (image or buffer).
    pub output: nf_output,
    /// "The input is written": the context waits for this timeline to reach `wait_value`
    /// before its first read of the input and the extra inputs (the pre pass, or CUDA's
    /// kernels or the model; see above for the stage). 0: no wait (the input is written
    /// already; always so in `NF_SYNC_HOST`). On a queue the caller shares with the context
    /// the value must come from a submission made before `nf_context_submit`, or the host.
    pub wait_timeline: nf_timeline,
    /// The value `wait_timeline` must reach.
    pub wait_value: u64,
    /// "The output may be overwritten": the context waits for this timeline to reach
    /// `output_free_value` before its first write of the output and the extra outputs (the
    /// post pass, or CUDA's kernels or the model), so that the caller's reads of an earlier
    /// result are done. 0: no wait. Frames before it and the model run meanwhile.
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
    /// More "the input is written" points (added after the first version), `wait_count` of
    /// them (NULL with 0): the context waits for every one, as for `wait_timeline`. Read
    /// during the call only.
    pub waits: *const nf_sync_point,
    /// The number of `waits`.
    pub wait_count: usize,
    /// More "the output may be overwritten" points, `output_free_count` of them (NULL with
    /// 0): the context waits for every one, as for `output_free_timeline`. Read during the
    /// call only.
    pub output_free: *const nf_sync_point,
    /// The number of `output_free`.
    pub output_free_count: usize,
    /// The caller's timelines the context signals, each to its value, once the frame's
    /// "input consumed" is reached (every read of its inputs done: the caller may write them
    /// again), `signal_input_consumed_count` of them (NULL with 0). Read during the call only.
    pub signal_input_consumed: *const nf_sync_point,
    /// The number of `signal_input_consumed`.
    pub signal_input_consumed_count: usize,
    /// The caller's timelines the context signals, each to its value, once the frame's
    /// "output ready" is reached (every write of its outputs complete and available, as
    /// `nf_ticket.output_ready_semaphore` guarantees), `signal_output_ready_count` of them
    /// (NULL with 0). Read during the call only.
    pub signal_output_ready: *const nf_sync_point,
    /// The number of `signal_output_ready`.
    pub signal_output_ready_count: usize,
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid (NULL arrays with counts of 0).
unsafe impl Versioned for nf_frame {
    const NAME: &'static str = "nf_frame";
    const INIT: &'static str = "NF_FRAME_INIT";
    /// The first version ended at `extra_output_count`, before the lists of waits and signals.
    const FIRST_SIZE: usize = std::mem::offset_of!(nf_frame, waits);
}

/// A frame in flight, as `nf_context_submit` gives it: its number on the context's two
/// timelines (`value`, 1, 2, 3, …; 0: the frame was dropped under `NF_BACK_PRESSURE_SKIP`),
/// and the two points the caller waits for, on its own queue (a wait in its
/// `vkQueueSubmit` with `VkTimelineSemaphoreSubmitInfo`) or on the host
/// (`vkWaitSemaphores`). The semaphores are the context's own, on the caller's device for
/// a context built on it (with import by fd the caller imports
/// `nf_context_export_timelines`' descriptors once and waits on those for the same
/// values); they live as long as the context: never destroy them. In `NF_SYNC_HOST` they
/// are not the caller's to wait on: use `nf_context_wait` and its kin.
///
/// A versioned struct the library writes: `nf_ticket t = NF_TICKET_INIT;` sets its
/// `struct_size` (the library fills in the fields it covers).
///
/// Retirement: a frame's slot, its times and its hold on the registrations it used are
/// released when the frame retires, which happens inside the context's own calls, never on
/// its own: at the latest in the `nf_context_submit` that reuses its slot (the one `slots`
/// frames later, which first retires the frame in that slot, waiting on the host for it
/// where it is not done under `NF_BACK_PRESSURE_BLOCK`), or in `nf_context_wait`,
/// `_wait_timeout`, `_try_wait`, `_wait_all`, `nf_context_readback`, `nf_context_resize` and
/// `nf_context_free`. A renderer that waits for "output ready" on its GPU only and keeps
/// submitting never has to call a host function to retire frames: nothing grows (the
/// library keeps the times of the last 64 frames), and the frames retire on the next
/// submits. It calls one on the host only (1) for the last frames before it stops, or
/// before it destroys an image, buffer or semaphore it unregistered: `nf_context_wait` of
/// the last frame that used it, or `nf_context_wait_all`; (2) with `NF_POST_WAIT_HOST` (CUDA
/// backend), where a post pass is handed to the GPU only by a call on the context: the last
/// frame's "output ready" comes once `nf_context_try_wait` (or any wait, or the next submit)
/// runs after its model finished; (3) in `NF_SYNC_HOST`, where completion comes only from
/// `nf_context_wait` and its kin.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_ticket {
    /// `sizeof(nf_ticket)` as the caller's header has it (`NF_TICKET_INIT`); the library
    /// leaves it as it is.
    pub struct_size: u32,
    /// The frame's number: pass it to `nf_context_wait` and its kin.
    pub value: u64,
    /// "Input consumed" (`VkSemaphore`): reaches `input_consumed_value` once every read of
    /// the frame's input and extra inputs is done (the pre pass's, or CUDA's). After a wait
    /// for it (on the GPU, any stage, or on the host) the caller may write the input again;
    /// an input image by handle is in the layout it was registered with, an imported one was
    /// released to `VK_QUEUE_FAMILY_EXTERNAL` in `GENERAL` (the caller acquires it).
    pub input_consumed_semaphore: u64,
    /// The value "input consumed" reaches for this frame.
    pub input_consumed_value: u64,
    /// "Output ready" (`VkSemaphore`): reaches `output_ready_value` once every write of the
    /// frame's output and extra outputs is complete and made available (the post pass ends
    /// with a barrier to `VK_PIPELINE_STAGE_ALL_COMMANDS_BIT`, `VK_ACCESS_MEMORY_READ_BIT |
    /// WRITE_BIT`, and the batch signals after it; CUDA signals after its kernels or the
    /// model). A wait for it in the caller's `vkQueueSubmit` makes those writes visible to
    /// the stages of its `pWaitDstStageMask` with no barrier of the caller's for memory. A host
    /// wait (`vkWaitSemaphores`, `nf_context_wait`) says the writes are done; host reads of the
    /// memory need the caller's own barrier to `VK_PIPELINE_STAGE_HOST_BIT` and
    /// `VK_ACCESS_HOST_READ_BIT` after that wait (the post pass makes none). An output image by
    /// handle is then in the layout it was registered with (`GENERAL` on
    /// CUDA's route), an imported one released to `VK_QUEUE_FAMILY_EXTERNAL` in `GENERAL`.
    pub output_ready_semaphore: u64,
    /// The value "output ready" reaches for this frame.
    pub output_ready_value: u64,
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid.
unsafe impl Versioned for nf_ticket {
    const NAME: &'static str = "nf_ticket";
    const INIT: &'static str = "NF_TICKET_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_ticket>();
}

impl Default for nf_ticket {
    /// A ticket of value 0 with its `struct_size` set (`NF_TICKET_INIT`).
    fn default() -> Self {
        Self { struct_size: std::mem::size_of::<Self>() as u32, ..Self::base() }
    }
}

impl Default for nf_frame {
    /// A frame of no input or output with its `struct_size` set (`NF_FRAME_INIT`).
    fn default() -> Self {
        Self { struct_size: std::mem::size_of::<Self>() as u32, ..Self::base() }
    }
}

/// Times of one frame, in milliseconds (NaN: not measured, or no longer kept: the times of
/// the last 64 retired frames are). A versioned struct the library writes:
/// `nf_frame_stats s = NF_FRAME_STATS_INIT;` sets its `struct_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_frame_stats {
    /// `sizeof(nf_frame_stats)` as the caller's header has it (`NF_FRAME_STATS_INIT`); the
    /// library leaves it as it is.
    pub struct_size: u32,
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
    /// Padding to the struct's end (0): later fields start at its size.
    pub reserved: [u8; 5],
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid.
unsafe impl Versioned for nf_frame_stats {
    const NAME: &'static str = "nf_frame_stats";
    const INIT: &'static str = "NF_FRAME_STATS_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_frame_stats>();
}

impl Default for nf_frame_stats {
    /// Stats of nothing with their `struct_size` set (`NF_FRAME_STATS_INIT`).
    fn default() -> Self {
        Self { struct_size: std::mem::size_of::<Self>() as u32, ..Self::base() }
    }
}

impl From<FrameStats> for nf_frame_stats {
    fn from(s: FrameStats) -> Self {
        Self {
            struct_size: std::mem::size_of::<Self>() as u32,
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
            reserved: [0; 5],
        }
    }
}

impl nf_frame_stats {
    /// A frame that retired so long ago that neither its ticket nor its times are kept.
    fn forgotten(ticket: u64) -> Self {
        Self {
            struct_size: std::mem::size_of::<Self>() as u32,
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
            reserved: [0; 5],
        }
    }
}

/// Submits one frame and writes its ticket to `*ticket` (`value` 0: every slot was busy
/// and the builder's policy is `NF_BACK_PRESSURE_SKIP`, so nothing was submitted). It first
/// retires the frame in the slot it reuses (the one `slots` frames back; see `nf_ticket`):
/// with `NF_BACK_PRESSURE_BLOCK`, where that frame is not done, it waits on the host for it
/// (bounded by the frame timeout). The frame's waits (`nf_frame`: where and at which stage;
/// every point of `wait_timeline`, `waits`, `output_free_timeline` and `output_free`) are GPU
/// waits on the caller's registered timelines (`NF_SYNC_GPU`), and its signals
/// (`signal_input_consumed`, `signal_output_ready`) set the caller's timelines when the
/// ticket's points of those names are reached; on a queue shared with
/// the caller their values must come from submissions made before this call, or from the
/// host. On the CPU backend the model runs inside this call, after host waits for them.
/// Refused, with the model's tensors listed, where the frame leaves out an extra input,
/// names one the model lacks or twice, or a registration of another size.
///
/// Status: `NF_STATUS_OK` (also for a dropped frame, `value` 0); `NF_STATUS_INVALID_ARGUMENT`
/// where `c`, `frame` or `ticket` is NULL, a number is not a registration of that kind on
/// this context (the message names the field: `nf_frame.waits[1].timeline`), a list is NULL
/// with a count above 0, the frame waits or signals in `NF_SYNC_HOST` (a timeline field or a
/// list set), its extra inputs or outputs do not fit
/// the model, a registration is of another size, or the context cannot take frames after a
/// failed one (free it); `NF_STATUS_STRUCT_SIZE` where `frame->struct_size` or
/// `ticket->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where a newer header's field of
/// `nf_frame` is set; `NF_STATUS_TIMEOUT` where the slot's frame (`NF_BACK_PRESSURE_BLOCK`)
/// or, on the CPU backend, a waited value did not come within the frame timeout (nothing was
/// submitted); `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`,
/// `NF_STATUS_ONNX_RUNTIME`: a call of theirs failed; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `frame` is
/// NULL or points to `frame->struct_size` readable bytes, its arrays holding their counts of
/// readable entries; `ticket` is NULL or points to `ticket->struct_size` writable bytes.
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
        let f = unsafe { read_versioned(frame, "frame") }?;
        // SAFETY: the caller's contract.
        let ticket_size = unsafe { out_size(ticket, "ticket") }?;
        let mut frame = Frame::new(c.ids.input(f.input)?, c.ids.output(f.output)?);
        if f.wait_timeline != 0 {
            frame = frame.wait_for(c.ids.timeline(f.wait_timeline)?, f.wait_value);
        }
        if f.output_free_timeline != 0 {
            frame = frame.output_free_after(c.ids.timeline(f.output_free_timeline)?, f.output_free_value);
        }
        // SAFETY: the caller's contract (the arrays hold their counts).
        for (t, v) in unsafe { points(&c.ids, f.waits, f.wait_count, "waits") }? {
            frame = frame.wait_for(t, v);
        }
        // SAFETY: as above.
        for (t, v) in unsafe { points(&c.ids, f.output_free, f.output_free_count, "output_free") }? {
            frame = frame.output_free_after(t, v);
        }
        // SAFETY: as above.
        let consumed =
            unsafe { points(&c.ids, f.signal_input_consumed, f.signal_input_consumed_count, "signal_input_consumed") }?;
        for (t, v) in consumed {
            frame = frame.signal_input_consumed(t, v);
        }
        // SAFETY: as above.
        let ready =
            unsafe { points(&c.ids, f.signal_output_ready, f.signal_output_ready_count, "signal_output_ready") }?;
        for (t, v) in ready {
            frame = frame.signal_output_ready(t, v);
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
                    struct_size: 0,
                    value: t.value(),
                    input_consumed_semaphore: consumed.semaphore.as_raw(),
                    input_consumed_value: consumed.value,
                    output_ready_semaphore: ready.semaphore.as_raw(),
                    output_ready_value: ready.value,
                }
            }
            Submitted::Skipped => nf_ticket::default(),
        };
        // SAFETY: `ticket_size` writable bytes (the caller's contract, checked by out_size).
        unsafe { write_versioned(ticket, ticket_size, out) };
        Ok(())
    })
}

/// The points of one of `nf_frame`'s lists, each timeline looked up (a message names the
/// field and the entry).
///
/// # Safety
/// `p` is NULL with `n` 0, or points to `n` readable `nf_sync_point`s.
unsafe fn points(ids: &Ids, p: *const nf_sync_point, n: usize, field: &str) -> Result<Vec<(TimelineId, u64)>, Fail> {
    let what = format!("nf_frame.{field}");
    // SAFETY: the caller's contract.
    let list = unsafe { array(p, n, &what) }?;
    list.iter()
        .enumerate()
        .map(|(k, point)| {
            let timeline = ids.timeline(point.timeline).map_err(|e| e.prefixed(&format!("{what}[{k}].timeline: ")))?;
            Ok((timeline, point.value))
        })
        .collect()
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

/// The size of the stats struct the caller asked for (None: NULL, not wanted), checked
/// before the call waits for anything.
///
/// # Safety
/// `out` is NULL or points to a struct whose `struct_size` the caller set.
unsafe fn stats_size(out: *mut nf_frame_stats) -> Result<Option<usize>, Fail> {
    if out.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    unsafe { out_size(out, "stats") }.map(Some)
}

/// Writes `stats` where the caller asked for them (`size` None: not wanted).
///
/// # Safety
/// `out` is NULL with `size` None, or points to `size` writable bytes (from [`stats_size`]).
unsafe fn give_stats(out: *mut nf_frame_stats, size: Option<usize>, stats: nf_frame_stats) {
    if let Some(size) = size {
        // SAFETY: the caller's contract.
        unsafe { write_versioned(out, size, stats) };
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
        // SAFETY: the caller's contract.
        let size = unsafe { stats_size(stats) }?;
        let s = match c.tickets.find(ticket)? {
            Found::Ticket(t) => match timeout {
                Some(timeout) => c.ctx.wait_timeout(&t, timeout)?.into(),
                None => c.ctx.wait(&t)?.into(),
            },
            Found::Retired => nf_frame_stats::forgotten(ticket),
        };
        // SAFETY: the caller's contract.
        unsafe { give_stats(stats, size, s) };
        Ok(())
    })
}

/// Waits on the host until the frame of ticket value `ticket` is done (its output
/// written: "output ready" reached) and retires it, bounded by the builder's frame timeout,
/// and writes its times to `*stats` (NULL: not wanted). A frame that retired already
/// returns at once. Frames retire in order: the ones before it are waited for too.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `ticket` is not
/// a ticket of this context (0, a dropped frame, is none); `NF_STATUS_STRUCT_SIZE` where
/// `stats->struct_size` is not set; `NF_STATUS_TIMEOUT` where the frame is not done within
/// the bound (it stays in flight: wait again later); `NF_STATUS_DEVICE_LOST`;
/// `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`: a call of theirs failed; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `stats` is
/// NULL or points to `stats->struct_size` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_wait(c: *mut nf_context, ticket: u64, stats: *mut nf_frame_stats) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { wait(c, ticket, None, stats) }
}

/// `nf_context_wait` with its own bound, in nanoseconds.
///
/// Status: as `nf_context_wait` (`NF_STATUS_TIMEOUT` after `timeout_ns`).
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
/// where not NULL) once it is, false while it is in flight. It retires the frames up to it
/// that are done, and hands the GPU the post passes whose model finished
/// (`NF_POST_WAIT_HOST`).
///
/// Status: `NF_STATUS_OK` (done or not); `NF_STATUS_INVALID_ARGUMENT` where `c` or `done` is
/// NULL or `ticket` is not a ticket of this context; `NF_STATUS_STRUCT_SIZE` where
/// `stats->struct_size` is not set; `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`,
/// `NF_STATUS_CUDA`: a call of theirs failed; `NF_STATUS_INTERNAL`: a bug.
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
        // SAFETY: the caller's contract.
        let size = unsafe { stats_size(stats) }?;
        let s = match c.tickets.find(ticket)? {
            Found::Ticket(t) => c.ctx.try_wait(&t)?.map(nf_frame_stats::from),
            Found::Retired => Some(nf_frame_stats::forgotten(ticket)),
        };
        if let Some(s) = s {
            // SAFETY: the caller's contract.
            unsafe { give_stats(stats, size, s) };
        }
        // SAFETY: the caller's contract.
        unsafe { put(done, s.is_some(), "done") }
    })
}

/// Waits on the host, up to `timeout_ns` nanoseconds, until the frame has read its input
/// ("input consumed" reached): the caller may write it again. For `NF_SYNC_HOST`, where the
/// ticket's semaphores are not the caller's to wait on, and for tests. It retires nothing.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `ticket` is not a
/// ticket of this context; `NF_STATUS_TIMEOUT` after `timeout_ns`; `NF_STATUS_DEVICE_LOST`;
/// `NF_STATUS_VULKAN`: the wait failed; `NF_STATUS_INTERNAL`: a bug.
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
/// Status: `NF_STATUS_OK` (consumed or not); `NF_STATUS_INVALID_ARGUMENT` where `c` or
/// `consumed` is NULL or `ticket` is not a ticket of this context; `NF_STATUS_DEVICE_LOST`;
/// `NF_STATUS_VULKAN`: reading the semaphore failed; `NF_STATUS_INTERNAL`: a bug.
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

/// Waits for every frame in flight and retires them (each bounded by the frame timeout).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL;
/// `NF_STATUS_TIMEOUT` where a frame is not done within the frame timeout (it and the later
/// ones stay in flight); `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`: a call
/// of theirs failed; `NF_STATUS_INTERNAL`: a bug.
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
