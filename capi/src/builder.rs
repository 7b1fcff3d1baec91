//! The builder: a model path and the options of the context to be built, one setter per
//! option of `neural_frame::ContextBuilder` (the CLI's flags are the same options); the CUDA
//! backend's options in one struct (`options.rs`).

use std::ffi::c_char;
use std::time::Duration;

use neural_frame::{
    BackPressure, Backend, ColorOrder, ContextBuilder, DeviceSelector, Layout, NeuralFrameContext, Normalization,
    TensorDeclaration, Tiling,
};

use crate::{Fail, guard, guard_free, nf_status, non_null, path_arg, str_arg};

/// The options of a context to be built (opaque). Made by `nf_builder_new`, freed by
/// `nf_builder_free`.
pub struct nf_builder {
    pub(crate) inner: ContextBuilder,
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

/// What `nf_context_submit` does when every slot of the ring is busy: one of the
/// `NF_BACK_PRESSURE_*` values.
pub type nf_back_pressure = u32;
/// Wait on the host for the oldest frame to finish, then reuse its slot (the default).
pub const NF_BACK_PRESSURE_BLOCK: nf_back_pressure = 0;
/// Submit nothing and return at once: the frame is dropped, its ticket's value is 0.
pub const NF_BACK_PRESSURE_SKIP: nf_back_pressure = 1;

/// A declared tensor layout: one of the `NF_LAYOUT_*` values.
pub type nf_layout = u32;
/// Not declared: the model's shapes and metadata decide.
pub const NF_LAYOUT_MODEL: nf_layout = 0;
/// `[1, C, H, W]`.
pub const NF_LAYOUT_NCHW: nf_layout = 1;
/// `[1, H, W, C]`.
pub const NF_LAYOUT_NHWC: nf_layout = 2;

/// A declared colour channel order: one of the `NF_COLOR_ORDER_*` values.
pub type nf_color_order = u32;
/// Not declared: the model's metadata decides (RGB without any).
pub const NF_COLOR_ORDER_MODEL: nf_color_order = 0;
/// Channels R, G, B.
pub const NF_COLOR_ORDER_RGB: nf_color_order = 1;
/// Channels B, G, R (an OpenCV-trained model).
pub const NF_COLOR_ORDER_BGR: nf_color_order = 2;

/// A declared value range of float tensors: one of the `NF_NORMALIZATION_*` values.
pub type nf_normalization = u32;
/// Not declared: the model's metadata decides ([0, 1] without any).
pub const NF_NORMALIZATION_MODEL: nf_normalization = 0;
/// [0, 1].
pub const NF_NORMALIZATION_UNIT: nf_normalization = 1;
/// [-1, 1]: t = 2x - 1.
pub const NF_NORMALIZATION_SIGNED: nf_normalization = 2;
/// [0, 255]: t = 255x.
pub const NF_NORMALIZATION_BYTE: nf_normalization = 3;
/// `t = (x - mean[c]) / std[c]`, with `mean` and `std` of 3 floats each, in the tensor's
/// channel order (no std of 0).
pub const NF_NORMALIZATION_MEAN_STD: nf_normalization = 4;

/// Applies `edit` to the builder behind `b`.
///
/// # Safety
/// `b` is null or a live `nf_builder` not used by another thread during the call.
pub(crate) unsafe fn edit(
    b: *mut nf_builder,
    edit: impl FnOnce(ContextBuilder) -> Result<ContextBuilder, Fail>,
) -> nf_status {
    guard(|| {
        non_null(b, "the builder")?;
        // SAFETY: not null, live and exclusive by the caller's contract.
        let b = unsafe { &mut *b };
        b.inner = edit(b.inner.clone())?;
        Ok(())
    })
}

/// Makes a builder for the ONNX model at `model_path` (NUL-terminated; copied, so the
/// string may be freed on return) with the library's defaults: backend auto, 3 slots,
/// precision auto, no frame size. The file is read by `nf_context_new`, not here.
/// On success `*out` is a new builder the caller frees with `nf_builder_free`; on failure
/// `*out` is left as it was.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `model_path` or `out` is NULL, or
/// `model_path` is empty; `NF_STATUS_INTERNAL`: a bug.
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
/// The last error message stays as it was.
///
/// Status: none (it returns nothing).
///
/// # Safety
/// `b` is NULL or a builder of `nf_builder_new` not freed before and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_free(b: *mut nf_builder) {
    if b.is_null() {
        return;
    }
    guard_free(|| {
        // SAFETY: made by Box::into_raw in nf_builder_new, freed once (the caller's contract).
        drop(unsafe { Box::from_raw(b) });
        Ok(())
    });
}

/// Sets the backend: `NF_BACKEND_AUTO` (the default), `NF_BACKEND_CUDA` or `NF_BACKEND_CPU`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `backend` is none of
/// the `NF_BACKEND_*` values; `NF_STATUS_INTERNAL`: a bug. (So for every `nf_builder_set_*` call:
/// a value it refuses is `NF_STATUS_INVALID_ARGUMENT`, with a message naming it; what the value
/// means for the device is checked by `nf_context_new`.)
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call (so for
/// every `nf_builder_set_*` call).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_backend(b: *mut nf_builder, backend: nf_backend) -> nf_status {
    let backend = match backend {
        NF_BACKEND_AUTO => Backend::Auto,
        NF_BACKEND_CUDA => Backend::Cuda,
        NF_BACKEND_CPU => Backend::Cpu,
        other => return invalid(format!("backend {other} is none of NF_BACKEND_AUTO, _CUDA, _CPU")),
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.backend(backend))) }
}

/// Records an invalid argument found before a builder is touched.
pub(crate) fn invalid(message: String) -> nf_status {
    guard(|| Err(Fail::invalid(message)))
}

/// Sets the input frame size in pixels (both above 0). A context needs one to be built;
/// `nf_context_infer_rgba8` changes it to each input's size.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or a side is 0;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_frame_size(b: *mut nf_builder, width: u32, height: u32) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe {
        edit(b, |x| {
            if width == 0 || height == 0 {
                return Err(Fail::invalid(format!("a frame size of {width}×{height} is empty")));
            }
            Ok(x.frame_size(width, height))
        })
    }
}

/// Sets the number of frames that may be in flight at once (the ring's slots, 3 by default).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `slots` is 0;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_slots(b: *mut nf_builder, slots: u32) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe {
        edit(b, |x| {
            if slots == 0 {
                return Err(Fail::invalid("a ring of 0 slots cannot hold a frame"));
            }
            Ok(x.slots(slots as usize))
        })
    }
}

/// Names the ONNX Runtime library to load (NUL-terminated; copied). Without it the
/// library tries `ORT_DYLIB_PATH`, then `.runtime/ort-gpu` or `.runtime/ort-cpu` under
/// the working directory or the executable's parent directories. ONNX Runtime is loaded
/// once per process: the first context decides.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `path` is NULL or `path` is
/// empty; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`; `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_ort_library(b: *mut nf_builder, path: *const c_char) -> nf_status {
    let set = |x: ContextBuilder| {
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let path = unsafe { path_arg(path, "path") }?;
        Ok(x.ort_library(path))
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, set) }
}

/// Sets the bound on every host wait for a frame, in milliseconds (default 30000, above
/// 0): a wait that runs out returns `NF_STATUS_TIMEOUT` and the frame stays in flight.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `milliseconds` is 0;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_frame_timeout_ms(b: *mut nf_builder, milliseconds: u64) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe {
        edit(b, |x| {
            if milliseconds == 0 {
                return Err(Fail::invalid("a frame timeout of 0 ms lets no frame finish"));
            }
            Ok(x.frame_timeout(Duration::from_millis(milliseconds)))
        })
    }
}

/// Sets what `nf_context_submit` does when every slot is busy: `NF_BACK_PRESSURE_BLOCK`
/// (the default) or `NF_BACK_PRESSURE_SKIP`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `policy` is none of
/// the `NF_BACK_PRESSURE_*` values; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_back_pressure(b: *mut nf_builder, policy: nf_back_pressure) -> nf_status {
    let policy = match policy {
        NF_BACK_PRESSURE_BLOCK => BackPressure::Block,
        NF_BACK_PRESSURE_SKIP => BackPressure::Skip,
        other => return invalid(format!("back pressure {other} is none of NF_BACK_PRESSURE_BLOCK, _SKIP")),
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.back_pressure(policy))) }
}

/// Runs each frame as tiles of `width`x`height` input pixels with `overlap` pixels of
/// context (each side larger than three times the overlap); the post pass blends the
/// tiles' shared strips. With an overlap of at least the model's receptive radius the
/// result equals the untiled one.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL, a side is 0 or not
/// larger than three overlaps; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_tiling(b: *mut nf_builder, width: u32, height: u32, overlap: u32) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.tiling(Tiling::new(width, height, overlap)?))) }
}

/// A memory budget in bytes for the slot buffers: a frame size whose buffers would exceed
/// it runs in tiles, the largest square ones that fit.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_memory_budget(b: *mut nf_builder, bytes: u64) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.memory_budget(bytes))) }
}

/// Builds the context's own device on the physical device whose `deviceUUID` is the 16
/// bytes at `uuid` (for import by file descriptor: the renderer's). `nf_context_new` only.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `uuid` is NULL;
/// `NF_STATUS_INTERNAL`: a bug. (A UUID no device has: `NF_STATUS_NO_DEVICE` from
/// `nf_context_new`.)
///
/// # Safety
/// As `nf_builder_set_backend`; `uuid` is NULL or points to 16 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_device_uuid(b: *mut nf_builder, uuid: *const u8) -> nf_status {
    let set = |x: ContextBuilder| {
        non_null(uuid, "uuid")?;
        let mut bytes = [0u8; 16];
        // SAFETY: 16 readable bytes (the caller's contract), apart from `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(uuid, bytes.as_mut_ptr(), 16) };
        Ok(x.device(DeviceSelector::Uuid(bytes)))
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, set) }
}

/// Builds the context's own device on the physical device at `index` in
/// `vkEnumeratePhysicalDevices`' order. `nf_context_new` only.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
/// bug. (An index no device has: `NF_STATUS_NO_DEVICE` from `nf_context_new`.)
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_device_index(b: *mut nf_builder, index: u32) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.device(DeviceSelector::Index(index as usize)))) }
}

/// CPU threads for ONNX Runtime's CPU provider (default, or 0: ONNX Runtime's choice).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_threads(b: *mut nf_builder, threads: u32) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(if threads == 0 { x } else { x.threads(threads as usize) })) }
}

/// Runs the context's own Vulkan instance under the Khronos validation layer (default
/// off; `nf_context_new` fails where the layer is not installed). On the caller's
/// device, validation is the caller's instance's.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_validation(b: *mut nf_builder, on: bool) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.validation(on))) }
}

/// Times the pre and post passes with Vulkan timestamp queries (default on; off: the
/// stats' `pre_ms` and `post_ms` are NaN).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_gpu_timestamps(b: *mut nf_builder, on: bool) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.gpu_timestamps(on))) }
}

/// Waits for frames by polling on the host instead of sleeping (default off).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_spin_wait(b: *mut nf_builder, on: bool) -> nf_status {
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.spin_wait(on))) }
}

/// A declaration from its C parts.
///
/// # Safety
/// `mean` and `std` are NULL or point to 3 readable floats each.
unsafe fn declaration(
    layout: nf_layout,
    color: nf_color_order,
    normalization: nf_normalization,
    mean: *const f32,
    std: *const f32,
) -> Result<TensorDeclaration, Fail> {
    let layout = match layout {
        NF_LAYOUT_MODEL => None,
        NF_LAYOUT_NCHW => Some(Layout::Nchw),
        NF_LAYOUT_NHWC => Some(Layout::Nhwc),
        other => return Err(Fail::invalid(format!("layout {other} is none of NF_LAYOUT_MODEL, _NCHW, _NHWC"))),
    };
    let color = match color {
        NF_COLOR_ORDER_MODEL => None,
        NF_COLOR_ORDER_RGB => Some(ColorOrder::Rgb),
        NF_COLOR_ORDER_BGR => Some(ColorOrder::Bgr),
        other => {
            return Err(Fail::invalid(format!("colour order {other} is none of NF_COLOR_ORDER_MODEL, _RGB, _BGR")));
        }
    };
    let normalization = match normalization {
        NF_NORMALIZATION_MODEL => None,
        NF_NORMALIZATION_UNIT => Some(Normalization::Unit),
        NF_NORMALIZATION_SIGNED => Some(Normalization::Signed),
        NF_NORMALIZATION_BYTE => Some(Normalization::Byte),
        NF_NORMALIZATION_MEAN_STD => {
            non_null(mean, "mean")?;
            non_null(std, "std")?;
            // SAFETY: 3 readable floats each (the caller's contract).
            let (m, s) = unsafe { (std::slice::from_raw_parts(mean, 3), std::slice::from_raw_parts(std, 3)) };
            let text = |v: &[f32]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
            // The library's own checks (finite values, no std of 0), on the shortest exact text.
            Some(Normalization::mean_std(&text(m), &text(s)).map_err(Fail::invalid)?)
        }
        other => {
            return Err(Fail::invalid(format!(
                "normalization {other} is none of NF_NORMALIZATION_MODEL, _UNIT, _SIGNED, _BYTE, _MEAN_STD"
            )));
        }
    };
    Ok(TensorDeclaration { layout, color, normalization })
}

/// Declares the layout of every image tensor of the model (`NF_LAYOUT_NCHW` or
/// `_NHWC`), where its shapes are ambiguous or its metadata says nothing.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `layout` is
/// `NF_LAYOUT_MODEL` or none of the `NF_LAYOUT_*` values; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_layout(b: *mut nf_builder, layout: nf_layout) -> nf_status {
    // SAFETY: no mean or std is read.
    let declared = unsafe { declaration(layout, 0, 0, std::ptr::null(), std::ptr::null()) };
    let set = |x: ContextBuilder| match declared?.layout {
        Some(l) => Ok(x.layout(l)),
        None => Err(Fail::invalid("NF_LAYOUT_MODEL declares nothing: use nf_builder_declare to reset")),
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, set) }
}

/// Declares the colour order of every image tensor (`NF_COLOR_ORDER_RGB` or `_BGR`).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL or `order` is
/// `NF_COLOR_ORDER_MODEL` or none of the `NF_COLOR_ORDER_*` values; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_color_order(b: *mut nf_builder, order: nf_color_order) -> nf_status {
    // SAFETY: no mean or std is read.
    let declared = unsafe { declaration(0, order, 0, std::ptr::null(), std::ptr::null()) };
    let set = |x: ContextBuilder| match declared?.color {
        Some(c) => Ok(x.color_order(c)),
        None => Err(Fail::invalid("NF_COLOR_ORDER_MODEL declares nothing: use nf_builder_declare to reset")),
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, set) }
}

/// Declares the value range of every float image tensor (`NF_NORMALIZATION_UNIT`,
/// `_SIGNED`, `_BYTE`, or `_MEAN_STD` with `mean` and `std`, 3 floats each, read only
/// then; NULL otherwise is fine).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL, `normalization` is
/// `NF_NORMALIZATION_MODEL` or none of the values, or for `_MEAN_STD` `mean` or `std` is NULL or
/// holds a value that is not finite or a std of 0; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_builder_set_backend`; `mean` and `std` are NULL or point to 3 readable floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_normalization(
    b: *mut nf_builder,
    normalization: nf_normalization,
    mean: *const f32,
    std: *const f32,
) -> nf_status {
    // SAFETY: `mean` and `std` are NULL or 3 readable floats each (the caller's contract).
    let declared = unsafe { declaration(0, 0, normalization, mean, std) };
    let set = |x: ContextBuilder| match declared?.normalization {
        Some(n) => Ok(x.normalization(n)),
        None => Err(Fail::invalid("NF_NORMALIZATION_MODEL declares nothing: use nf_builder_declare to reset")),
    };
    // SAFETY: the caller's contract.
    unsafe { edit(b, set) }
}

/// Declares layout, colour order and range of every image tensor at once, replacing
/// the three setters above; `NF_*_MODEL` leaves that one to the model.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` is NULL, a value is none of its
/// constants, or `_MEAN_STD`'s `mean` or `std` is NULL or not acceptable; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// As `nf_builder_set_normalization`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_declare(
    b: *mut nf_builder,
    layout: nf_layout,
    color: nf_color_order,
    normalization: nf_normalization,
    mean: *const f32,
    std: *const f32,
) -> nf_status {
    // SAFETY: `mean` and `std` are NULL or 3 readable floats each (the caller's contract).
    let declared = unsafe { declaration(layout, color, normalization, mean, std) };
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.declare(declared?))) }
}

/// Declares one tensor by name (NUL-terminated UTF-8; copied): it wins over the
/// declarations for every tensor. `NF_*_MODEL` leaves that one to those and the model.
///
/// Status: as `nf_builder_declare`, and `NF_STATUS_INVALID_ARGUMENT` where `name` is NULL or not
/// UTF-8 (a name the model lacks: `NF_STATUS_MODEL_CONTRACT` from `nf_context_new`).
///
/// # Safety
/// As `nf_builder_set_normalization`; `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_declare_tensor(
    b: *mut nf_builder,
    name: *const c_char,
    layout: nf_layout,
    color: nf_color_order,
    normalization: nf_normalization,
    mean: *const f32,
    std: *const f32,
) -> nf_status {
    // SAFETY: NULL or NUL-terminated (the caller's contract).
    let name = unsafe { str_arg(name, "name") };
    // SAFETY: `mean` and `std` are NULL or 3 readable floats each (the caller's contract).
    let declared = unsafe { declaration(layout, color, normalization, mean, std) };
    // SAFETY: the caller's contract.
    unsafe { edit(b, |x| Ok(x.declare_tensor(name?, declared?))) }
}
