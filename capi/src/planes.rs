//! Frames in a host's shape: memory the caller exported, imported once
//! (`nf_context_import_memory`), and planar float frames placed in it at offsets
//! (`nf_context_place_input_planes`, `nf_context_place_output_planes`), as a frameserver
//! hands its pooled GPU frames over (VapourSynth R81's RGBS and RGBH).

use neural_frame::ash::vk;
use neural_frame::{PLANE_FORMATS, PlanarFrame, Plane};

use crate::context::{context, nf_context, nf_input, nf_memory, nf_output};
use crate::import::{give_back, memory_import, nf_memory_import};
use crate::register::register;
use crate::{Fail, Versioned, guard, nf_status, non_null, put, read_arg};

/// One plane of a planar frame (`nf_planar_frame`): where it lies in memory imported with
/// `nf_context_import_memory`. An element of an array: fixed, it never grows.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct nf_plane {
    /// The imported memory it lies in.
    pub memory: nf_memory,
    /// Where its first row starts, in bytes from the start of the allocation (a multiple of 4).
    pub offset: u64,
    /// Bytes from one row to the next: a multiple of 4, at least a row's (width × 4 for
    /// `VK_FORMAT_R32_SFLOAT`, width × 2 for `VK_FORMAT_R16_SFLOAT`, width for `VK_FORMAT_R8_UNORM`).
    pub row_pitch: u64,
}

/// A planar float frame in imported memory: one plane (grey; as an output, for a
/// one-channel model only) or three (R, G, B, in that order in `planes`, wherever each lies),
/// every plane of `format`, `width`×`height` pixels. Each plane needs its own bytes (an
/// output's planes must not overlap); the bytes between rows and around the planes are
/// neither read nor written. A versioned struct: `nf_planar_frame f = NF_PLANAR_FRAME_INIT;`
/// sets `struct_size` and zeroes the rest.
///
/// An input's values are colour values as an image's are (the model's normalization
/// applied, alpha 1); an output's are written as the model gives them, unclamped (a
/// four-channel model's alpha dropped). The memory is used as `nf_buffer_import` memory is:
/// it is the caller's to write before the frame's waits are reached and to read after its
/// "output ready"; no layout, no queue family transfer of its own beyond the import's.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_planar_frame {
    /// `sizeof(nf_planar_frame)` as the caller's header has it (`NF_PLANAR_FRAME_INIT`).
    pub struct_size: u32,
    /// The planes' `VkFormat`: `VK_FORMAT_R32_SFLOAT` (100), `VK_FORMAT_R16_SFLOAT` (76) or
    /// `VK_FORMAT_R8_UNORM` (9).
    pub format: i32,
    /// Width in pixels: the context's frame size (inputs) or output size (outputs).
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The planes, `plane_count` of them: R, G, B (or one, grey). Read during the call only.
    pub planes: *const nf_plane,
    /// The number of `planes`: 1 or 3.
    pub plane_count: usize,
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid (a NULL array with a count of 0).
unsafe impl Versioned for nf_planar_frame {
    const NAME: &'static str = "nf_planar_frame";
    const INIT: &'static str = "NF_PLANAR_FRAME_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_planar_frame>();
}

impl Default for nf_planar_frame {
    /// A frame of no planes with its `struct_size` set (`NF_PLANAR_FRAME_INIT`).
    fn default() -> Self {
        Self { struct_size: std::mem::size_of::<Self>() as u32, ..Self::base() }
    }
}

/// Imports memory the caller exported (`vkGetMemoryFdKHR`, `OPAQUE_FD`; a context of its own
/// on the exporter's physical device, or one on the caller's device), once, for planar frames
/// to be placed in it at offsets (`nf_context_place_input_planes`,
/// `nf_context_place_output_planes`): a frameserver's pooled block, say. The memory must not
/// be a dedicated allocation (`memory->dedicated` false). On the CUDA backend it is imported
/// into CUDA as well; where CUDA cannot take it, the log says why and the frames placed in it
/// run through the Vulkan passes. The descriptor is the context's once this succeeds (it
/// closes it); after a failure it is still open and the caller's, as for
/// `nf_context_import_input_buffer`. On success `*out` is its number, released with
/// `nf_context_release_memory`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `memory` or `out` is NULL,
/// the descriptor is negative (Windows: NULL), the device or driver UUID is not the
/// context's, or the allocation is dedicated; `NF_STATUS_UNSUPPORTED` where the device cannot
/// import it; `NF_STATUS_VULKAN`: the import failed (a descriptor that is not exported
/// memory); `NF_STATUS_IO`: the descriptor could not be duplicated; `NF_STATUS_INTERNAL`: a
/// bug. On every failure the descriptor is still open and the caller's.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `memory` is
/// NULL or describes exported memory as it was allocated, its descriptor open and not used
/// elsewhere during the call; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_import_memory(
    c: *mut nf_context,
    memory: *const nf_memory_import,
    out: *mut nf_memory,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        // SAFETY: the caller's contract.
        let m = unsafe { read_arg(memory, "memory") }?;
        non_null(out, "out")?;
        // The descriptor is taken last, once nothing else can fail before the import.
        let id = c.ctx.import_memory(memory_import(m)?).map_err(give_back)?;
        let n = c.ids.add_memory(id);
        // SAFETY: `out` is not null and writable (the caller's contract).
        unsafe { put(out, n, "out") }
    })
}

/// Lets go of memory imported with `nf_context_import_memory`: its number is refused from
/// now on, and the memory is freed once no placed plane uses it (placements keep it alive
/// until they are unregistered and their frames are done, or the context is freed).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `memory` is not
/// imported memory of this context (0, released already, or a registration of another
/// kind); `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_release_memory(c: *mut nf_context, memory: nf_memory) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        let id = c.ids.memory(memory)?;
        c.ctx.release_memory(id)?;
        c.ids.remove_memory(memory);
        Ok(())
    })
}

/// The library's planar frame of the caller's, its numbers looked up; `call` names the C
/// function in messages.
///
/// # Safety
/// `f.planes` is NULL with a count of 0, or points to `f.plane_count` readable planes.
unsafe fn planar_frame(c: &nf_context, f: &nf_planar_frame, call: &str) -> Result<PlanarFrame, Fail> {
    let format = vk::Format::from_raw(f.format);
    if !PLANE_FORMATS.contains(&format) {
        return Err(Fail::invalid(format!(
            "{call}: nf_planar_frame.format is {} ({format:?}); planar frames take VK_FORMAT_R32_SFLOAT (100), \
             VK_FORMAT_R16_SFLOAT (76) or VK_FORMAT_R8_UNORM (9), one colour channel a plane",
            f.format
        )));
    }
    if f.plane_count != 1 && f.plane_count != 3 {
        return Err(Fail::invalid(format!(
            "{call}: nf_planar_frame.plane_count is {}; a planar frame has 1 plane (grey) or 3 (R, G, B)",
            f.plane_count
        )));
    }
    non_null(f.planes, &format!("{call}: nf_planar_frame.planes"))?;
    // SAFETY: `plane_count` readable planes (the caller's contract), not NULL.
    let planes = unsafe { std::slice::from_raw_parts(f.planes, f.plane_count) };
    let planes = planes
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let memory = c
                .ids
                .memory(p.memory)
                .map_err(|e| e.prefixed(&format!("{call}: nf_planar_frame.planes[{k}].memory: ")))?;
            Ok(Plane { memory, offset: p.offset, row_pitch: p.row_pitch })
        })
        .collect::<Result<Vec<_>, Fail>>()?;
    Ok(PlanarFrame { format, width: f.width, height: f.height, planes })
}

/// Registers a planar frame in imported memory as an input of the frame size: three planes
/// (R, G, B) or one (grey), read as colour values as an image's are (the model's
/// normalization applied), alpha 1. A placement is cheap (a buffer per plane bound into the
/// memory imported once, no copy, no import): one a frame is fine. On success `*out` is an
/// input for `nf_frame.input`, unregistered with `nf_context_unregister_input`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `frame` or `out` is NULL,
/// `frame->format` is not `VK_FORMAT_R32_SFLOAT`, `VK_FORMAT_R16_SFLOAT` or `VK_FORMAT_R8_UNORM`, `plane_count` is not
/// 1 or 3 (or `planes` is NULL), a plane's `memory` is not imported memory of this context,
/// its `offset` or `row_pitch` is not a multiple of 4, the pitch is less than a row, a plane
/// does not fit its memory, or the size is not the frame size (the message names the field
/// or the plane); `NF_STATUS_STRUCT_SIZE` where `frame->struct_size` is not set;
/// `NF_STATUS_UNSUPPORTED` where a plane is larger than the device's `maxStorageBufferRange`,
/// or a newer header's field is set; `NF_STATUS_VULKAN`: making or binding a plane's buffer
/// failed; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `frame` is
/// NULL or points to `frame->struct_size` readable bytes, its `planes` holding `plane_count`
/// readable planes; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_place_input_planes(
    c: *mut nf_context,
    frame: *const nf_planar_frame,
    out: *mut nf_input,
) -> nf_status {
    let call = "nf_context_place_input_planes";
    let make = |c: &mut nf_context, f: &nf_planar_frame| {
        // SAFETY: the caller's contract (the planes hold their count).
        let planes = unsafe { planar_frame(c, f, call) }?;
        let id = c.ctx.place_input_planes(&planes).map_err(|e| Fail::of(&e).prefixed(&format!("{call}: ")))?;
        Ok(c.ids.add_input(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, frame, "frame", out, make) }
}

/// Registers a planar frame in imported memory as an output of the output size: three planes
/// (R, G, B; a four-channel model's alpha is dropped), or one for a one-channel model, their
/// bytes not overlapping. Values are written as the model gives them, unclamped; nothing
/// outside the planes' rows is written. On success `*out` is an output for
/// `nf_frame.output`, unregistered with `nf_context_unregister_output`.
///
/// Status: as `nf_context_place_input_planes` (the output size; also
/// `NF_STATUS_INVALID_ARGUMENT` where the planes overlap, or one plane is given for a model of
/// more channels).
///
/// # Safety
/// As `nf_context_place_input_planes`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_place_output_planes(
    c: *mut nf_context,
    frame: *const nf_planar_frame,
    out: *mut nf_output,
) -> nf_status {
    let call = "nf_context_place_output_planes";
    let make = |c: &mut nf_context, f: &nf_planar_frame| {
        // SAFETY: the caller's contract (the planes hold their count).
        let planes = unsafe { planar_frame(c, f, call) }?;
        let id = c.ctx.place_output_planes(&planes).map_err(|e| Fail::of(&e).prefixed(&format!("{call}: ")))?;
        Ok(c.ids.add_output(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, frame, "frame", out, make) }
}
