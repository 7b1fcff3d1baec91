//! The context handle: building one on a device of its own, freeing it, its report and
//! state, and the host path for tools (`nf_context_infer_rgba8`).

use std::collections::HashMap;
use std::ffi::c_char;
use std::fmt::Write as _;
use std::time::Duration;

use neural_frame::ash::vk;
use neural_frame::{InputId, MemoryId, NeuralFrameContext, OutputId, SyncMode, TimelineId};

use crate::builder::nf_builder;
use crate::tickets::Tickets;
use crate::{Fail, guard, guard_free, nf_status, non_null, put, write_pair, write_string};

/// A context: the model's ONNX Runtime session, its buffers and passes, on a Vulkan
/// device of its own (`nf_context_new`) or the caller's (`nf_context_new_on_device`)
/// (opaque). Freed by `nf_context_free`.
pub struct nf_context {
    // Dropped first: the context waits for its frames before the tables go.
    pub(crate) ctx: NeuralFrameContext,
    /// The images of `nf_context_infer_rgba8`, made at its first call and at each new size.
    host: Option<HostImages>,
    pub(crate) ids: Ids,
    pub(crate) tickets: Tickets,
}

struct HostImages {
    size: (u32, u32),
    input: InputId,
    output: OutputId,
}

/// A registered input (image or buffer) of one context: a number above 0, never reused
/// by that context. 0 is no input.
pub type nf_input = u64;
/// A registered output (image or buffer) of one context: a number above 0, never reused
/// by that context. 0 is no output.
pub type nf_output = u64;
/// A registered timeline semaphore of the caller's, of one context: a number above 0,
/// never reused by that context. 0 is no timeline.
pub type nf_timeline = u64;
/// Memory the caller exported and the context imported once (`nf_context_import_memory`),
/// for planar frames to be placed in (`nf_planar_frame`): a number above 0, never reused by
/// that context. 0 is no memory. Released with `nf_context_release_memory`.
pub type nf_memory = u64;

/// The registrations behind the numbers C holds. One counter for the four kinds, so that
/// a number of one kind passed as another is refused, not mistaken.
#[derive(Default)]
pub(crate) struct Ids {
    last: u64,
    inputs: HashMap<u64, InputId>,
    outputs: HashMap<u64, OutputId>,
    timelines: HashMap<u64, TimelineId>,
    memories: HashMap<u64, MemoryId>,
    /// The bytes per pixel of the outputs the context created (for `nf_context_readback`).
    bytes_per_pixel: HashMap<u64, usize>,
}

impl Ids {
    fn next(&mut self) -> u64 {
        self.last += 1;
        self.last
    }
    pub(crate) fn add_input(&mut self, id: InputId) -> nf_input {
        let n = self.next();
        self.inputs.insert(n, id);
        n
    }
    pub(crate) fn add_output(&mut self, id: OutputId) -> nf_output {
        let n = self.next();
        self.outputs.insert(n, id);
        n
    }
    pub(crate) fn add_timeline(&mut self, id: TimelineId) -> nf_timeline {
        let n = self.next();
        self.timelines.insert(n, id);
        n
    }
    pub(crate) fn add_memory(&mut self, id: MemoryId) -> nf_memory {
        let n = self.next();
        self.memories.insert(n, id);
        n
    }
    pub(crate) fn input(&self, n: nf_input) -> Result<InputId, Fail> {
        self.inputs.get(&n).copied().ok_or_else(|| self.unknown(n, "input"))
    }
    pub(crate) fn output(&self, n: nf_output) -> Result<OutputId, Fail> {
        self.outputs.get(&n).copied().ok_or_else(|| self.unknown(n, "output"))
    }
    pub(crate) fn timeline(&self, n: nf_timeline) -> Result<TimelineId, Fail> {
        self.timelines.get(&n).copied().ok_or_else(|| self.unknown(n, "timeline"))
    }
    pub(crate) fn memory(&self, n: nf_memory) -> Result<MemoryId, Fail> {
        self.memories.get(&n).copied().ok_or_else(|| self.unknown(n, "memory"))
    }
    pub(crate) fn remove_memory(&mut self, n: nf_memory) {
        self.memories.remove(&n);
    }
    pub(crate) fn remove_input(&mut self, n: nf_input) {
        self.inputs.remove(&n);
    }
    pub(crate) fn remove_output(&mut self, n: nf_output) {
        self.outputs.remove(&n);
        self.bytes_per_pixel.remove(&n);
    }
    pub(crate) fn set_bytes_per_pixel(&mut self, n: nf_output, bytes: usize) {
        self.bytes_per_pixel.insert(n, bytes);
    }
    pub(crate) fn bytes_per_pixel(&self, n: nf_output) -> Option<usize> {
        self.bytes_per_pixel.get(&n).copied()
    }
    pub(crate) fn remove_timeline(&mut self, n: nf_timeline) {
        self.timelines.remove(&n);
    }
    fn unknown(&self, n: u64, kind: &str) -> Fail {
        let what = if n == 0 {
            "0 is none".to_string()
        } else if n > self.last {
            "this context never gave that number".to_string()
        } else if self.inputs.contains_key(&n)
            || self.outputs.contains_key(&n)
            || self.timelines.contains_key(&n)
            || self.memories.contains_key(&n)
        {
            "that number is a registration of another kind".to_string()
        } else {
            "it was unregistered (or released)".to_string()
        };
        Fail::invalid(format!("{n} is not a registered {kind} of this context: {what}"))
    }
}

impl nf_context {
    pub(crate) fn new(ctx: NeuralFrameContext) -> Self {
        let tickets = Tickets::new(ctx.slot_count());
        Self { ctx, host: None, ids: Ids::default(), tickets }
    }
}

/// The context behind a handle.
///
/// # Safety
/// `c` is null or a live `nf_context` not used by another thread during the call.
pub(crate) unsafe fn context<'a>(c: *mut nf_context) -> Result<&'a mut nf_context, Fail> {
    non_null(c, "the context")?;
    // SAFETY: not null, live and exclusive by the caller's contract.
    Ok(unsafe { &mut *c })
}

/// The context behind a const handle.
///
/// # Safety
/// `c` is null or a live `nf_context` not used mutably by another thread during the call.
pub(crate) unsafe fn context_ref<'a>(c: *const nf_context) -> Result<&'a nf_context, Fail> {
    non_null(c, "the context")?;
    // SAFETY: not null, live and not mutated during the call by the caller's contract.
    Ok(unsafe { &*c })
}

/// Builds a context on a Vulkan device of its own from the builder's options. The
/// builder is borrowed: it is unchanged, may build more contexts, and is still the
/// caller's to free. On success `*out` is a new context the caller frees with
/// `nf_context_free`; on failure `*out` is left as it was and the message says why
/// (for a missing model file: `NF_STATUS_MODEL_CONTRACT`, naming the file).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `out` is NULL, or an option
/// does not fit (no frame size, tiles the model refuses); `NF_STATUS_MODEL_CONTRACT` where the
/// model file is missing or unreadable, or does not fit the pipeline; `NF_STATUS_RUNTIME_MISSING`
/// where ONNX Runtime cannot be loaded; `NF_STATUS_NO_DEVICE` where there is no Vulkan loader,
/// driver or device matching the selector; `NF_STATUS_PROVIDER_UNAVAILABLE` for `NF_BACKEND_CUDA`
/// where CUDA or its provider cannot be used (`NF_BACKEND_AUTO` runs the CPU backend instead,
/// logged); `NF_STATUS_UNSUPPORTED` where the device lacks what is needed (the validation layer
/// asked for and not installed); `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: a
/// call of theirs failed; `NF_STATUS_DEVICE_LOST`; `NF_STATUS_IO`: the tune cache or a converted
/// model could not be read or written; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call; `out` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_new(b: *const nf_builder, out: *mut *mut nf_context) -> nf_status {
    guard(|| {
        non_null(b, "the builder")?;
        non_null(out, "out")?;
        // SAFETY: not null and live (the caller's contract).
        let options = unsafe { &*b }.inner.clone();
        let ctx = options.build()?;
        // SAFETY: `out` is not null and writable.
        unsafe { put(out, Box::into_raw(Box::new(nf_context::new(ctx))), "out") }
    })
}

/// Frees a context, after its frames in flight finish (each wait bounded by the frame
/// timeout; frames that never finish leave the context's GPU objects leaked rather than
/// destroyed in use, with an error logged). NULL is ignored. The caller's own images,
/// buffers, semaphores and device are never destroyed: free the context before them.
///
/// The last error message stays as it was.
///
/// Status: none (it returns nothing). A frame that never finishes is logged (`NF_LOG_ERROR`).
///
/// # Safety
/// `c` is NULL or a context of `nf_context_new`/`nf_context_new_on_device` not freed
/// before and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_free(c: *mut nf_context) {
    if c.is_null() {
        return;
    }
    guard_free(|| {
        // SAFETY: made by Box::into_raw in nf_context_new*, freed once (the caller's contract).
        drop(unsafe { Box::from_raw(c) });
        Ok(())
    });
}

/// The backend that runs, "cuda" or "cpu", into `buf` by the string convention (see the
/// header's preamble).
///
/// Status: `NF_STATUS_OK` (also for a query, `buf` NULL); `NF_STATUS_BUFFER_TOO_SMALL` (with
/// `*len` the size needed); `NF_STATUS_INVALID_ARGUMENT` where `c` or `len` is NULL;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context; `len` is NULL or points to a `size_t`; `buf` is NULL or
/// points to `*len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_backend_name(c: *const nf_context, buf: *mut c_char, len: *mut usize) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        // SAFETY: the caller's contract.
        unsafe { write_string(c.ctx.backend_name(), buf, len) }
    })
}

/// The Vulkan device's name (`deviceName`), into `buf` by the string convention.
///
/// Status: as `nf_context_backend_name`.
///
/// # Safety
/// As `nf_context_backend_name`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_device_name(c: *const nf_context, buf: *mut c_char, len: *mut usize) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        // SAFETY: the caller's contract.
        unsafe { write_string(&c.ctx.report().vulkan_device.name, buf, len) }
    })
}

/// Why `NF_BACKEND_AUTO` fell back to the CPU backend, or "" where it did not, into
/// `buf` by the string convention.
///
/// Status: as `nf_context_backend_name`.
///
/// # Safety
/// As `nf_context_backend_name`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_fallback_reason(
    c: *const nf_context,
    buf: *mut c_char,
    len: *mut usize,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        let reason = c.ctx.report().fallback_reason.as_deref().unwrap_or("");
        // SAFETY: the caller's contract.
        unsafe { write_string(reason, buf, len) }
    })
}

/// The context's whole report as text, one `key: value` line each, into `buf` by the
/// string convention: the backend asked for and running (and why it fell back), the
/// Vulkan device (name, type, driver, UUIDs; whether it is the caller's), the CUDA
/// device, ONNX Runtime (version, library, providers), the precision, the tuning in
/// effect and where it came from, the sync mode, the ring, the sizes, the model's
/// tensors and the start-up times. For logs and people; its lines may change between
/// versions (programs read the dedicated calls).
///
/// Status: as `nf_context_backend_name`.
///
/// # Safety
/// As `nf_context_backend_name`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_report(c: *const nf_context, buf: *mut c_char, len: *mut usize) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        // SAFETY: the caller's contract.
        unsafe { write_string(&report(&c.ctx), buf, len) }
    })
}

fn report(ctx: &NeuralFrameContext) -> String {
    let r = ctx.report();
    let d = &r.vulkan_device;
    let p = ctx.precision();
    let t = &r.startup;
    let (fw, fh) = ctx.frame_size();
    let (ow, oh) = ctx.output_size();
    let mut s = String::new();
    let mut line = |key: &str, value: String| {
        let _ = writeln!(s, "{key}: {value}");
    };
    line("backend", r.backend.to_string());
    line("requested", format!("{:?}", r.requested).to_lowercase());
    line("fallback_reason", r.fallback_reason.clone().unwrap_or_default());
    line("vulkan_device", d.to_string());
    line("vulkan_driver", format!("{} ({}), Vulkan {}", d.driver_name, d.driver_info, d.api_version));
    line("device_uuid", d.uuid.clone());
    line("driver_uuid", d.driver_uuid.clone());
    line("caller_device", if r.caller_device { "yes" } else { "no" }.to_string());
    line("cuda_device", r.cuda_device.clone().unwrap_or_default());
    line("onnxruntime", format!("{} from {} ({})", r.runtime.version, r.runtime.library.display(), r.runtime.found_by));
    line("providers", r.runtime.providers.join(", "));
    line("precision", format!("{} (model {}, asked {}): {}", p.running, p.model, p.asked, p.reason));
    line("tuning", format!("{:?}", ctx.tuning()));
    line("tuning_from", r.tuning_from.clone());
    line("sync_mode", format!("{:?}", ctx.sync_mode()).to_lowercase());
    line("slots", ctx.slot_count().to_string());
    line("frame_size", format!("{fw}x{fh}"));
    line("output_size", format!("{ow}x{oh}"));
    line("scale", ctx.contract().scale.to_string());
    line("tiles", ctx.tiles().map_or("none".into(), |(t, n)| format!("{n} of {}x{}", t.tile.0, t.tile.1)));
    line("inputs", ctx.contract().describe_inputs());
    line("outputs", ctx.contract().describe_outputs());
    line(
        "startup_ms",
        format!(
            "runtime {:.1}, vulkan {:.1}, cuda {:.1}, session {:.1}, buffers {:.1}, first run {:.1}, fused {:.1}",
            t.runtime_ms, t.vulkan_ms, t.cuda_ms, t.session_ms, t.buffers_ms, t.first_run_ms, t.fused_ms
        ),
    );
    s
}

/// The current input frame size in pixels.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `width` or `height` is NULL;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context; `width` and `height` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_frame_size(c: *const nf_context, width: *mut u32, height: *mut u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        // SAFETY: the caller's contract.
        unsafe { write_pair(c.ctx.frame_size(), width, height) }
    })
}

/// The output size in pixels of the current frame size (the frame size times the scale).
///
/// Status: as `nf_context_frame_size`.
///
/// # Safety
/// `c` is NULL or a live context; `width` and `height` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_output_size(c: *const nf_context, width: *mut u32, height: *mut u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        // SAFETY: the caller's contract.
        unsafe { write_pair(c.ctx.output_size(), width, height) }
    })
}

/// The model's scale: output width over input width (`x`), output height over input
/// height (`y`). An input of WxH gives an output of (W*x)x(H*y).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `x` or `y` is NULL;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context; `x` and `y` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_scale(c: *const nf_context, x: *mut u32, y: *mut u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        let s = c.ctx.contract().scale;
        // SAFETY: the caller's contract.
        unsafe { write_pair((s.x, s.y), x, y) }
    })
}

/// Changes the frame size (both above 0; the output size follows the scale). The
/// context's buffers are made anew and its frames in flight are waited for first;
/// registrations of the old size are refused by the frames after it: register the
/// new size's images and buffers.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL, a side is 0, or the
/// model or tiling does not take the size; `NF_STATUS_MODEL_CONTRACT` where the model fails at
/// that size; `NF_STATUS_TIMEOUT` where a frame in flight does not finish within the frame
/// timeout; `NF_STATUS_UNSUPPORTED` where the device's limits do not allow it; `NF_STATUS_VULKAN`,
/// `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: a call of theirs failed; `NF_STATUS_DEVICE_LOST`;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_resize(c: *mut nf_context, width: u32, height: u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        if width == 0 || height == 0 {
            return Err(Fail::invalid(format!("a frame size of {width}×{height} is empty")));
        }
        Ok(c.ctx.resize(width, height)?)
    })
}

/// How frames are handed between the caller and the context: one of the `NF_SYNC_*` values.
pub type nf_sync_mode = u32;
/// Timeline semaphores are shared on the GPU: frames may wait for the caller's timelines
/// and the caller waits on the ticket's semaphores. Always so on the caller's device.
pub const NF_SYNC_GPU: nf_sync_mode = 0;
/// The driver cannot share semaphores across devices (lavapipe, import by fd): the
/// caller submits once its writes are complete, frames carry no waits, and completion
/// comes from `nf_context_wait` and its kin.
pub const NF_SYNC_HOST: nf_sync_mode = 1;

/// The context's sync mode, `NF_SYNC_GPU` or `NF_SYNC_HOST`, into `*mode`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `mode` is NULL;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context; `mode` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_sync_mode(c: *const nf_context, mode: *mut nf_sync_mode) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        let m = match c.ctx.sync_mode() {
            SyncMode::Gpu => NF_SYNC_GPU,
            SyncMode::Host => NF_SYNC_HOST,
        };
        // SAFETY: the caller's contract.
        unsafe { put(mode, m, "mode") }
    })
}

/// The ring's state: its slots (frames that may be in flight), the frames in flight now,
/// and the frames dropped so far under `NF_BACK_PRESSURE_SKIP`. Any of the out pointers
/// may be NULL (not written).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// `c` is NULL or a live context; each out pointer is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_ring(
    c: *const nf_context,
    slots: *mut u32,
    in_flight: *mut u32,
    skipped: *mut u64,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        // SAFETY: each is NULL (skipped) or writable (the caller's contract).
        unsafe {
            if !slots.is_null() {
                *slots = u32::try_from(c.ctx.slot_count()).unwrap_or(u32::MAX);
            }
            if !in_flight.is_null() {
                *in_flight = u32::try_from(c.ctx.in_flight()).unwrap_or(u32::MAX);
            }
            if !skipped.is_null() {
                *skipped = c.ctx.skipped();
            }
        }
        Ok(())
    })
}

/// The context's device identity, which memory and semaphores imported by fd must come
/// from: its `deviceUUID` and `driverUUID`, 16 bytes each, into `device_uuid` and
/// `driver_uuid`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `device_uuid` or `driver_uuid`
/// is NULL; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context; `device_uuid` and `driver_uuid` are NULL or point to 16
/// writable bytes each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_device_identity(
    c: *const nf_context,
    device_uuid: *mut u8,
    driver_uuid: *mut u8,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context_ref(c) }?;
        non_null(device_uuid, "device_uuid")?;
        non_null(driver_uuid, "driver_uuid")?;
        let id = c.ctx.device_identity();
        // SAFETY: 16 writable bytes each (the caller's contract), apart from `id`.
        unsafe {
            std::ptr::copy_nonoverlapping(id.device_uuid.as_ptr(), device_uuid, 16);
            std::ptr::copy_nonoverlapping(id.driver_uuid.as_ptr(), driver_uuid, 16);
        }
        Ok(())
    })
}

/// Waits up to `timeout_ms` for the fused session that fast start builds beside the first
/// frames (CUDA backend), and says in `*settled` whether the context runs it now (true
/// at once where there is none to wait for). Frames before it may differ from later
/// ones in the last bit of a channel: a program that compares results byte for byte
/// waits here first.
///
/// Status: `NF_STATUS_OK` (settled or not: see `*settled`); `NF_STATUS_INVALID_ARGUMENT` where `c`
/// or `settled` is NULL; `NF_STATUS_TIMEOUT` where frames in flight do not finish before the
/// switch; `NF_STATUS_CUDA`, `NF_STATUS_ONNX_RUNTIME`: building the fused session failed;
/// `NF_STATUS_DEVICE_LOST`; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `settled`
/// is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_wait_settled(c: *mut nf_context, timeout_ms: u64, settled: *mut bool) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(settled, "settled")?;
        let done = c.ctx.wait_settled(Duration::from_millis(timeout_ms))?;
        // SAFETY: the caller's contract.
        unsafe { put(settled, done, "settled") }
    })
}

/// One frame from the host, for tools: `input` holds `width`x`height` RGBA8 texels
/// (4 bytes each, rows of `width` texels without padding, top row first), and the
/// output, (`width`*x)x(`height`*y) RGBA8 texels in the same layout (x, y from
/// `nf_context_scale`), is written to `output`, which holds `output_len` bytes, at least
/// that many (else `NF_STATUS_BUFFER_TOO_SMALL`, and nothing runs). Where the size
/// differs from the context's frame size, the context is resized first (its buffers are
/// made anew; the session stays). Blocks until the frame is done. Both buffers are
/// borrowed for the call only.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_BUFFER_TOO_SMALL` where `output_len` is short (nothing
/// runs); `NF_STATUS_INVALID_ARGUMENT` where `c`, `input` or `output` is NULL, or a side is 0 or
/// the output too large; and as `nf_context_resize` (a new size) and `nf_context_submit`
/// (`NF_STATUS_TIMEOUT`, `NF_STATUS_DEVICE_LOST`, `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`,
/// `NF_STATUS_ONNX_RUNTIME`); `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `input` is
/// NULL or points to `width`*`height`*4 readable bytes; `output` is NULL or points to
/// `output_len` writable bytes, not overlapping `input`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_infer_rgba8(
    c: *mut nf_context,
    input: *const u8,
    width: u32,
    height: u32,
    output: *mut u8,
    output_len: usize,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(input, "input")?;
        non_null(output, "output")?;
        if width == 0 || height == 0 {
            return Err(Fail::invalid(format!("an input of {width}×{height} pixels is empty")));
        }
        let in_len = rgba8_len(width, height)?;
        let scale = c.ctx.contract().scale;
        let (ow, oh) = scale.apply(width, height).ok_or_else(|| {
            Fail::invalid(format!("a {width}×{height} input at {scale} gives an output too large for 32 bits"))
        })?;
        let out_len = rgba8_len(ow, oh)?;
        if output_len < out_len {
            return Err(Fail::new(
                nf_status::NF_STATUS_BUFFER_TOO_SMALL,
                format!(
                    "the output of a {width}×{height} input is {ow}×{oh} RGBA8, {out_len} bytes; output_len is {output_len}"
                ),
            ));
        }
        // SAFETY: `input` points to width·height·4 readable bytes (the caller's contract).
        let texels = unsafe { std::slice::from_raw_parts(input, in_len) };
        let (input, output_image) = host_images(c, (width, height))?;
        c.ctx.upload(input, texels)?;
        c.ctx.infer(input, output_image)?;
        let result = c.ctx.readback(output_image)?;
        if result.len() != out_len {
            return Err(Fail::internal(format!(
                "the readback gave {} bytes, {ow}×{oh} RGBA8 is {out_len}",
                result.len()
            )));
        }
        // SAFETY: `output` has at least `output_len >= out_len` writable bytes, apart from `result`.
        unsafe { std::ptr::copy_nonoverlapping(result.as_ptr(), output, out_len) };
        Ok(())
    })
}

pub(crate) fn rgba8_len(width: u32, height: u32) -> Result<usize, Fail> {
    (width as usize)
        .checked_mul(height as usize)
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| Fail::invalid(format!("{width}×{height} RGBA8 texels do not fit in memory")))
}

/// The context's own RGBA8 input and output images of `size`, made (and the context
/// resized) where the last call had another size.
fn host_images(c: &mut nf_context, size: (u32, u32)) -> Result<(InputId, OutputId), Fail> {
    if c.host.as_ref().map(|h| h.size) != Some(size) {
        if let Some(old) = c.host.take() {
            c.ctx.unregister_input(old.input)?;
            c.ctx.unregister_output(old.output)?;
        }
        c.ctx.resize(size.0, size.1)?;
        let input = c.ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
        let output = c.ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
        c.host = Some(HostImages { size, input, output });
    }
    let host = c.host.as_ref().ok_or_else(|| Fail::internal("the host images are missing"))?;
    Ok((host.input, host.output))
}
