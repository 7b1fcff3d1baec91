//! The C API of neural-frame (issue 24 §1, a first step): opaque handles, a status code
//! from every call and the message of the last failure, for C and C++ programs. The
//! header, `include/neural_frame.h`, is generated from this file by cbindgen
//! (`tests/header.rs` fails when the committed one differs; `NEURAL_FRAME_BLESS=1`
//! rewrites it), and its preamble (`cbindgen.toml`) states the conventions: who frees
//! what, which pointers are borrowed, how strings come back.
//!
//! This step covers a context on a device of its own and the host path for tools
//! (RGBA8 in, RGBA8 out). Not yet: the caller's device, registration by handle or fd,
//! timelines, Windows handles.
//!
//! Every entry point runs inside `catch_unwind`: a panic becomes `NF_STATUS_INTERNAL`
//! with its message, never an unwind into C. No Rust type crosses the boundary.

// The C names (nf_status, NF_STATUS_OK, …) are the API; Rust's casing rules do not apply.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use neural_frame::ash::vk;
use neural_frame::{Backend, ContextBuilder, ErrorKind, InputId, NeuralFrameContext, OutputId, Precision};

/// What a call did: `NF_STATUS_OK` (0), or why it failed. The failures mirror
/// `neural_frame::ErrorKind`, plus `NF_STATUS_BUFFER_TOO_SMALL` for the C side's
/// caller buffers. `nf_last_error_message()` gives the text of the last failure.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nf_status {
    /// The call succeeded.
    NF_STATUS_OK = 0,
    /// A size, pointer, handle, format or parameter the caller passed is not acceptable.
    NF_STATUS_INVALID_ARGUMENT = 1,
    /// The device, driver or build lacks something that is needed; the message says what.
    NF_STATUS_UNSUPPORTED = 2,
    /// A bounded wait ran out.
    NF_STATUS_TIMEOUT = 3,
    /// The GPU was lost or a kernel faulted: free the context and build a new one.
    NF_STATUS_DEVICE_LOST = 4,
    /// No Vulkan loader, driver or device matching what was asked for.
    NF_STATUS_NO_DEVICE = 5,
    /// CUDA or ONNX Runtime's CUDA execution provider cannot be used here.
    NF_STATUS_PROVIDER_UNAVAILABLE = 6,
    /// ONNX Runtime itself could not be found or loaded.
    NF_STATUS_RUNTIME_MISSING = 7,
    /// The model does not fit what the pipeline supports (or its file cannot be read).
    NF_STATUS_MODEL_CONTRACT = 8,
    /// An image file could not be read or written.
    NF_STATUS_IMAGE = 9,
    /// A Vulkan call failed.
    NF_STATUS_VULKAN = 10,
    /// A CUDA driver call failed.
    NF_STATUS_CUDA = 11,
    /// ONNX Runtime failed.
    NF_STATUS_ONNX_RUNTIME = 12,
    /// Reading or writing a file failed.
    NF_STATUS_IO = 13,
    /// A bug inside neural-frame (a broken invariant or a caught panic): please report it
    /// with the message.
    NF_STATUS_INTERNAL = 14,
    /// A caller buffer is smaller than what the call writes; the size it needs is in the
    /// size argument (strings) or the message.
    NF_STATUS_BUFFER_TOO_SMALL = 15,
}

/// Which backend runs the model: one of the `NF_BACKEND_*` values.
pub type nf_backend = u32;
/// CUDA where the device has a CUDA twin and ONNX Runtime's CUDA provider registers;
/// otherwise the CPU backend (see `nf_context_fallback_reason`).
pub const NF_BACKEND_AUTO: nf_backend = 0;
/// The CUDA backend; building the context fails where it is unavailable.
pub const NF_BACKEND_CUDA: nf_backend = 1;
/// The CPU backend: host-visible Vulkan buffers, ONNX Runtime's CPU provider.
pub const NF_BACKEND_CPU: nf_backend = 2;

/// The precision the model runs in on the CUDA backend: one of the `NF_PRECISION_*` values.
pub type nf_precision = u32;
/// fp16 where the model gains from it and a probe frame agrees with fp32; else the model's own.
pub const NF_PRECISION_AUTO: nf_precision = 0;
/// The model's own precision, never converted.
pub const NF_PRECISION_FP32: nf_precision = 1;
/// An fp32 model converted to fp16 without the check (CUDA backend).
pub const NF_PRECISION_FP16: nf_precision = 2;

/// The options of a context to be built (opaque). Made by `nf_builder_new`, freed by
/// `nf_builder_free`.
pub struct nf_builder {
    inner: ContextBuilder,
}

/// A context: a Vulkan device of its own, the model's ONNX Runtime session and its
/// buffers (opaque). Made by `nf_context_new`, freed by `nf_context_free`.
pub struct nf_context {
    ctx: NeuralFrameContext,
    /// The images of `nf_context_infer_rgba8`, made at its first call and at each new size.
    host: Option<HostImages>,
}

struct HostImages {
    size: (u32, u32),
    input: InputId,
    output: OutputId,
}

/// A failure on its way to the caller: a status and its message.
struct Fail {
    status: nf_status,
    message: String,
}

impl Fail {
    fn new(status: nf_status, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(nf_status::NF_STATUS_INVALID_ARGUMENT, message)
    }
}

impl From<neural_frame::Error> for Fail {
    fn from(e: neural_frame::Error) -> Self {
        Self { status: status_of(e.kind()), message: e.to_string() }
    }
}

fn status_of(kind: ErrorKind) -> nf_status {
    use nf_status::*;
    match kind {
        ErrorKind::InvalidArgument => NF_STATUS_INVALID_ARGUMENT,
        ErrorKind::Unsupported => NF_STATUS_UNSUPPORTED,
        ErrorKind::Timeout => NF_STATUS_TIMEOUT,
        ErrorKind::DeviceLost => NF_STATUS_DEVICE_LOST,
        ErrorKind::NoDevice => NF_STATUS_NO_DEVICE,
        ErrorKind::ProviderUnavailable => NF_STATUS_PROVIDER_UNAVAILABLE,
        ErrorKind::RuntimeMissing => NF_STATUS_RUNTIME_MISSING,
        ErrorKind::ModelContract => NF_STATUS_MODEL_CONTRACT,
        ErrorKind::Image => NF_STATUS_IMAGE,
        ErrorKind::Vulkan => NF_STATUS_VULKAN,
        ErrorKind::Cuda => NF_STATUS_CUDA,
        ErrorKind::OnnxRuntime => NF_STATUS_ONNX_RUNTIME,
        ErrorKind::Io => NF_STATUS_IO,
        ErrorKind::Internal => NF_STATUS_INTERNAL,
        // A kind newer than this crate.
        _ => NF_STATUS_INTERNAL,
    }
}

thread_local! {
    /// The message of the last failed call on this thread ("" after a success).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_message(message: &str) {
    // A NUL inside the text would end the C string early.
    let text = CString::new(message.replace('\0', "\u{FFFD}")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|m| *m.borrow_mut() = text);
}

/// Runs one entry point: clears the last message, catches a panic, records a failure.
fn guard(f: impl FnOnce() -> Result<(), Fail>) -> nf_status {
    set_message("");
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => nf_status::NF_STATUS_OK,
        Ok(Err(fail)) => {
            set_message(&fail.message);
            fail.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            set_message(&format!("a panic inside neural-frame (a bug: please report it): {what}"));
            nf_status::NF_STATUS_INTERNAL
        }
    }
}

/// `what` must not be null.
fn non_null<T>(p: *const T, what: &str) -> Result<(), Fail> {
    if p.is_null() { Err(Fail::invalid(format!("{what} is NULL"))) } else { Ok(()) }
}

/// A path from a NUL-terminated C string (bytes on Unix, UTF-8 elsewhere).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn path_arg(p: *const c_char, what: &str) -> Result<PathBuf, Fail> {
    non_null(p, what)?;
    // SAFETY: not null, and NUL-terminated by the caller's contract.
    let bytes = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
    if bytes.is_empty() {
        return Err(Fail::invalid(format!("{what} is an empty string")));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes).map(PathBuf::from).map_err(|_| Fail::invalid(format!("{what} is not UTF-8")))
    }
}

/// Copies `text` and its NUL into the caller's buffer by the size-in/size-out convention.
///
/// # Safety
/// `len` is null or points to a `size_t`; `buf` is null or points to `*len` writable bytes.
unsafe fn write_string(text: &str, buf: *mut c_char, len: *mut usize) -> Result<(), Fail> {
    non_null(len, "len")?;
    let needed = text.len() + 1;
    // SAFETY: `len` is not null and points to a size_t (the caller's contract).
    let capacity = unsafe { *len };
    // SAFETY: as above.
    unsafe { *len = needed };
    if buf.is_null() {
        return Ok(());
    }
    if capacity < needed {
        return Err(Fail::new(
            nf_status::NF_STATUS_BUFFER_TOO_SMALL,
            format!("the buffer holds {capacity} bytes, the text and its NUL need {needed}"),
        ));
    }
    // SAFETY: `buf` has at least `capacity >= needed` writable bytes, and does not overlap `text`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    Ok(())
}

/// The builder behind a handle.
///
/// # Safety
/// `b` is null or a live `nf_builder` not used by another thread during the call.
unsafe fn builder<'a>(b: *mut nf_builder) -> Result<&'a mut nf_builder, Fail> {
    non_null(b, "the builder")?;
    // SAFETY: not null, live and exclusive by the caller's contract.
    Ok(unsafe { &mut *b })
}

/// The context behind a handle.
///
/// # Safety
/// `c` is null or a live `nf_context` not used by another thread during the call.
unsafe fn context<'a>(c: *mut nf_context) -> Result<&'a mut nf_context, Fail> {
    non_null(c, "the context")?;
    // SAFETY: not null, live and exclusive by the caller's contract.
    Ok(unsafe { &mut *c })
}

/// The context behind a const handle.
///
/// # Safety
/// `c` is null or a live `nf_context` not used mutably by another thread during the call.
unsafe fn context_ref<'a>(c: *const nf_context) -> Result<&'a nf_context, Fail> {
    non_null(c, "the context")?;
    // SAFETY: not null, live and not mutated during the call by the caller's contract.
    Ok(unsafe { &*c })
}

/// The library's version, e.g. "0.1.0": a static string, never to be freed. Callable
/// at any time; it does not touch the last error message.
#[unsafe(no_mangle)]
pub extern "C" fn nf_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last call on this thread that failed, or "" when the last call
/// succeeded: NUL-terminated UTF-8, owned by the library, valid until the next `nf_*`
/// call on this thread (copy it to keep it). Never NULL; it does not reset the message.
#[unsafe(no_mangle)]
pub extern "C" fn nf_last_error_message() -> *const c_char {
    LAST_ERROR.try_with(|m| m.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}

/// Makes a builder for the ONNX model at `model_path` (NUL-terminated; copied, so the
/// string may be freed on return) with the library's defaults: backend auto, 3 slots,
/// precision auto, no frame size. The file is read by `nf_context_new`, not here.
/// On success `*out` is a new builder the caller frees with `nf_builder_free`; on failure
/// `*out` is left as it was.
///
/// # Safety
/// `model_path` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_new(model_path: *const c_char, out: *mut *mut nf_builder) -> nf_status {
    guard(|| {
        non_null(out, "out")?;
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let path = unsafe { path_arg(model_path, "model_path") }?;
        let b = Box::new(nf_builder { inner: NeuralFrameContext::builder(path) });
        // SAFETY: `out` is not null and writable.
        unsafe { *out = Box::into_raw(b) };
        Ok(())
    })
}

/// Frees a builder made by `nf_builder_new`. NULL is ignored. Contexts built from it
/// are unaffected.
///
/// # Safety
/// `b` is NULL or a builder of `nf_builder_new` not freed before and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_free(b: *mut nf_builder) {
    if b.is_null() {
        return;
    }
    guard(|| {
        // SAFETY: made by Box::into_raw in nf_builder_new, freed once (the caller's contract).
        drop(unsafe { Box::from_raw(b) });
        Ok(())
    });
}

/// Sets the backend: `NF_BACKEND_AUTO` (the default), `NF_BACKEND_CUDA` or `NF_BACKEND_CPU`.
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_backend(b: *mut nf_builder, backend: nf_backend) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { builder(b) }?;
        let backend = match backend {
            NF_BACKEND_AUTO => Backend::Auto,
            NF_BACKEND_CUDA => Backend::Cuda,
            NF_BACKEND_CPU => Backend::Cpu,
            other => return Err(Fail::invalid(format!("backend {other} is none of NF_BACKEND_AUTO, _CUDA, _CPU"))),
        };
        b.inner = b.inner.clone().backend(backend);
        Ok(())
    })
}

/// Sets the input frame size in pixels (both above 0). A context needs one to be built;
/// `nf_context_infer_rgba8` changes it to each input's size.
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_frame_size(b: *mut nf_builder, width: u32, height: u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { builder(b) }?;
        if width == 0 || height == 0 {
            return Err(Fail::invalid(format!("a frame size of {width}×{height} is empty")));
        }
        b.inner = b.inner.clone().frame_size(width, height);
        Ok(())
    })
}

/// Sets the number of frames that may be in flight at once (the ring's slots, 3 by default).
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_slots(b: *mut nf_builder, slots: u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { builder(b) }?;
        if slots == 0 {
            return Err(Fail::invalid("a ring of 0 slots cannot hold a frame"));
        }
        b.inner = b.inner.clone().slots(slots as usize);
        Ok(())
    })
}

/// Sets the precision: `NF_PRECISION_AUTO` (the default), `NF_PRECISION_FP32` or
/// `NF_PRECISION_FP16`. The CPU backend keeps the model's own precision.
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_precision(b: *mut nf_builder, precision: nf_precision) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { builder(b) }?;
        let precision = match precision {
            NF_PRECISION_AUTO => Precision::Auto,
            NF_PRECISION_FP32 => Precision::Fp32,
            NF_PRECISION_FP16 => Precision::Fp16,
            other => {
                return Err(Fail::invalid(format!("precision {other} is none of NF_PRECISION_AUTO, _FP32, _FP16")));
            }
        };
        b.inner = b.inner.clone().precision(precision);
        Ok(())
    })
}

/// Names the ONNX Runtime library to load (NUL-terminated; copied). Without it the
/// library tries `ORT_DYLIB_PATH`, then `.runtime/ort-gpu` or `.runtime/ort-cpu` under
/// the working directory or the executable's parent directories. ONNX Runtime is loaded
/// once per process: the first context decides.
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call; `path` is
/// NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_ort_library(b: *mut nf_builder, path: *const c_char) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = unsafe { builder(b) }?;
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let path = unsafe { path_arg(path, "path") }?;
        b.inner = b.inner.clone().ort_library(path);
        Ok(())
    })
}

/// Builds a context on a Vulkan device of its own from the builder's options. The
/// builder is borrowed: it is unchanged, may build more contexts, and is still the
/// caller's to free. On success `*out` is a new context the caller frees with
/// `nf_context_free`; on failure `*out` is left as it was and the message says why
/// (for a missing model file: `NF_STATUS_MODEL_CONTRACT`, naming the file).
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
        let c = Box::new(nf_context { ctx, host: None });
        // SAFETY: `out` is not null and writable.
        unsafe { *out = Box::into_raw(c) };
        Ok(())
    })
}

/// Frees a context made by `nf_context_new`, after its frames in flight finish. NULL is
/// ignored.
///
/// # Safety
/// `c` is NULL or a context of `nf_context_new` not freed before and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_free(c: *mut nf_context) {
    if c.is_null() {
        return;
    }
    guard(|| {
        // SAFETY: made by Box::into_raw in nf_context_new, freed once (the caller's contract).
        drop(unsafe { Box::from_raw(c) });
        Ok(())
    });
}

/// The backend that runs, "cuda" or "cpu", into `buf` by the string convention (see the
/// header's preamble).
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

/// The current input frame size in pixels.
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

/// # Safety
/// `a` and `b` are NULL or writable.
unsafe fn write_pair((x, y): (u32, u32), a: *mut u32, b: *mut u32) -> Result<(), Fail> {
    non_null(a, "the first out pointer")?;
    non_null(b, "the second out pointer")?;
    // SAFETY: not null and writable (the caller's contract).
    unsafe {
        *a = x;
        *b = y;
    }
    Ok(())
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
            return Err(Fail::new(
                nf_status::NF_STATUS_INTERNAL,
                format!("the readback gave {} bytes, {ow}×{oh} RGBA8 is {out_len}", result.len()),
            ));
        }
        // SAFETY: `output` has at least `output_len >= out_len` writable bytes, apart from `result`.
        unsafe { std::ptr::copy_nonoverlapping(result.as_ptr(), output, out_len) };
        Ok(())
    })
}

fn rgba8_len(width: u32, height: u32) -> Result<usize, Fail> {
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
    let host =
        c.host.as_ref().ok_or_else(|| Fail::new(nf_status::NF_STATUS_INTERNAL, "the host images are missing"))?;
    Ok((host.input, host.output))
}
