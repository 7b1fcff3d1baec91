//! Frames in the host's shape: memory the caller exported, imported once
//! ([`NeuralFrameContext::import_memory`]), and planar float frames placed in it at
//! offsets ([`NeuralFrameContext::place_input_planes`],
//! [`NeuralFrameContext::place_output_planes`]). This is how a frameserver hands
//! its GPU frames over: VapourSynth R81 keeps each plane of a frame as a linear
//! buffer sub-allocated from pooled blocks, which it exports with the block's
//! identity, the plane's offset and its row pitch.
//!
//! Each plane is one colour channel (R, G, B), `R32_SFLOAT` or `R16_SFLOAT`, with its
//! own offset and pitch; the passes gather the planes into the model's tensor and
//! scatter its output back (the CUDA passes on the CUDA backend where CUDA imports
//! the memory, the Vulkan passes otherwise), casting where the model's element type
//! differs. A placement is cheap: a buffer per plane bound into memory imported
//! once, no copy and no import.

use std::sync::Arc;

use ash::vk;

use crate::context::NeuralFrameContext;
use crate::context::foreign::{ImportError, MemoryImport};
use crate::context::register::Role;
use crate::context::registry::{Entry, InputId, Key, MemoryId, Origin, OutputId, PlacedPlane, Registration, Resource};
use crate::error::{Error, Result};
use crate::interop::{self, CudaAccess, CudaView, SharedAllocation, SurfaceFormat};
use crate::vulkan::{Allocation, Buffer};

/// The formats of a planar frame's planes: 32-bit and 16-bit floats and 8-bit unorm, one colour
/// channel a plane (VapourSynth's RGBS, RGBH and RGB24).
///
/// ```
/// use ash::vk;
/// use neural_frame::PLANE_FORMATS;
///
/// assert!(PLANE_FORMATS.contains(&vk::Format::R16_SFLOAT)); // VapourSynth's RGBH
/// ```
pub const PLANE_FORMATS: [vk::Format; 3] = [vk::Format::R32_SFLOAT, vk::Format::R16_SFLOAT, vk::Format::R8_UNORM];

/// The usage of the buffers placed in imported memory.
const PLANE_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::STORAGE_BUFFER;

/// One plane of a planar frame: where it lies in memory imported with
/// [`NeuralFrameContext::import_memory`].
///
/// ```no_run
/// use neural_frame::{MemoryId, Plane};
///
/// # fn host(block: MemoryId) {
/// // A 100-pixel row of floats padded to 448 bytes, at offset 16384 of the block.
/// let green = Plane { memory: block, offset: 16384, row_pitch: 448 };
/// # let _ = green; }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plane {
    /// The imported memory it lies in.
    pub memory: MemoryId,
    /// Where its first row starts, in bytes from the start of the allocation (a multiple of 4).
    pub offset: u64,
    /// Bytes from one row to the next (a multiple of 4, at least width × 4 for
    /// `R32_SFLOAT`, width × 2 for `R16_SFLOAT`, width for `R8_UNORM`).
    pub row_pitch: u64,
}

/// A planar frame: one plane (grey; as an output, for a one-channel model) or three
/// (R, G, B), each of `format`, placed in imported memory.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{MemoryId, PlanarFrame, Plane};
///
/// # fn host(block: MemoryId) -> PlanarFrame {
/// // VapourSynth's RGBS at 100×36: rows padded to 64 bytes, planes at 16 KiB offsets.
/// let plane = |k: u64| Plane { memory: block, offset: 16384 * k, row_pitch: 448 };
/// PlanarFrame { format: vk::Format::R32_SFLOAT, width: 100, height: 36, planes: vec![plane(0), plane(1), plane(2)] }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanarFrame {
    /// `R32_SFLOAT`, `R16_SFLOAT` or `R8_UNORM` ([`PLANE_FORMATS`]).
    pub format: vk::Format,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// R, G and B (or one plane).
    pub planes: Vec<Plane>,
}

/// What each part of the library needs to know of a plane format, in one place.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlaneFormat {
    pub(crate) format: vk::Format,
    /// Bytes a pixel.
    pub(crate) bytes: u64,
    /// The Vulkan passes' buffer format code (`format` in planes_common.wgsl).
    pub(crate) shader_code: u32,
    /// The CUDA passes' element.
    pub(crate) surface: SurfaceFormat,
}

/// [`PLANE_FORMATS`], described, in its order.
const PLANE_FORMAT_TABLE: [PlaneFormat; 3] = [
    PlaneFormat { format: vk::Format::R32_SFLOAT, bytes: 4, shader_code: 3, surface: SurfaceFormat::R32F },
    PlaneFormat { format: vk::Format::R16_SFLOAT, bytes: 2, shader_code: 4, surface: SurfaceFormat::R16F },
    PlaneFormat { format: vk::Format::R8_UNORM, bytes: 1, shader_code: 5, surface: SurfaceFormat::R8 },
];

impl PlaneFormat {
    /// `format`'s description, or what planar frames take instead.
    pub(crate) fn of(format: vk::Format) -> Result<Self> {
        PLANE_FORMAT_TABLE.iter().copied().find(|f| f.format == format).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a plane of format {format:?} cannot be used; planar frames take {PLANE_FORMATS:?} (one colour \
                 channel a plane)"
            ))
        })
    }
}

/// Bytes a pixel of a plane of `format`.
fn element_bytes(format: vk::Format) -> Result<u64> {
    PlaneFormat::of(format).map(|f| f.bytes)
}

impl NeuralFrameContext {
    /// Imports memory the caller exported, once, for planar frames to be placed in
    /// it at offsets ([`place_input_planes`](Self::place_input_planes),
    /// [`place_output_planes`](Self::place_output_planes)). The memory must not be a
    /// dedicated allocation. On the CUDA backend it is imported into CUDA as well,
    /// mapped whole; where CUDA cannot take it, the log says why and the frames
    /// placed in it run through the Vulkan passes.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{MemoryImport, NeuralFrameContext, PlanarFrame, Plane};
    ///
    /// # fn host(ctx: &mut NeuralFrameContext, block: MemoryImport, out_block: MemoryImport) -> neural_frame::Result<()> {
    /// let (w, h) = ctx.frame_size();
    /// let (ow, oh) = ctx.output_size();
    /// let memory = ctx.import_memory(block)?; // a pooled block, once
    /// let out = ctx.import_memory(out_block)?;
    /// let pitch = (w as u64 * 4).next_multiple_of(64);
    /// let opitch = (ow as u64 * 4).next_multiple_of(64);
    /// let plane = |memory, k: u64, pitch: u64, rows: u32| Plane { memory, offset: k * pitch * rows as u64, row_pitch: pitch };
    /// let input = ctx.place_input_planes(&PlanarFrame {
    ///     format: vk::Format::R32_SFLOAT,
    ///     width: w,
    ///     height: h,
    ///     planes: (0..3).map(|k| plane(memory, k, pitch, h)).collect(),
    /// })?;
    /// let output = ctx.place_output_planes(&PlanarFrame {
    ///     format: vk::Format::R32_SFLOAT,
    ///     width: ow,
    ///     height: oh,
    ///     planes: (0..3).map(|k| plane(out, k, opitch, oh)).collect(),
    /// })?;
    /// ctx.infer(input, output)?;
    /// ctx.unregister_input(input)?; // placements are cheap: one a frame is fine
    /// ctx.unregister_output(output)?;
    /// # Ok(()) }
    /// ```
    pub fn import_memory(&mut self, import: MemoryImport) -> Result<MemoryId, ImportError> {
        let type_index = import.memory_type_index;
        let size = import.allocation_size;
        self.with_memory(import, |ctx, dup| {
            let vulkan = Arc::new(Allocation::import(&ctx.res.device, dup()?, PLANE_USAGE)?);
            let cuda = match ctx.res.engine.cuda_device().filter(|_| ctx.res.engine.cuda_passes()) {
                Some(device) => match interop::memory_into_cuda(device, dup()?).and_then(|m| m.map_buffer(0, size)) {
                    Ok(mapped) => Some(mapped),
                    Err(e) => {
                        log::warn!(
                            "CUDA cannot import the memory of type {type_index} ({:?}, {size} bytes): {e}; the \
                             frames placed in it run through the Vulkan passes (a ~0.5 ms cross-API hand-off each)",
                            ctx.res.device.memory_type_flags(type_index)
                        );
                        None
                    }
                },
                None => None,
            };
            let shared = Arc::new(SharedAllocation { cuda, vulkan });
            Ok(MemoryId(ctx.res.registry.insert(Entry::Memory(shared))))
        })
    }

    /// Lets go of memory imported with [`import_memory`](Self::import_memory): the
    /// handle is refused from now on, and the memory is freed once no placed plane
    /// uses it (placements keep it alive until they are unregistered and their frames done).
    ///
    /// ```no_run
    /// use neural_frame::{MemoryId, NeuralFrameContext};
    ///
    /// # fn host(ctx: &mut NeuralFrameContext, memory: MemoryId) -> neural_frame::Result<()> {
    /// ctx.release_memory(memory)?;
    /// assert!(ctx.release_memory(memory).is_err()); // released once
    /// # Ok(()) }
    /// ```
    pub fn release_memory(&mut self, memory: MemoryId) -> Result<()> {
        self.res.registry.memory(memory)?;
        self.res.registry.remove(memory.0)?;
        Ok(())
    }

    /// Registers a planar frame in imported memory as an input of the frame's size:
    /// three planes (R, G, B) or one (grey), read as colour values as an image's
    /// are (the model's normalization applied), alpha 1.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, PlanarFrame};
    ///
    /// # fn host(ctx: &mut NeuralFrameContext, frame: PlanarFrame) -> neural_frame::Result<()> {
    /// let input = ctx.place_input_planes(&frame)?;
    /// # let _ = input; Ok(()) }
    /// ```
    pub fn place_input_planes(&mut self, frame: &PlanarFrame) -> Result<InputId> {
        self.place_planes(Role::Input, frame).map(InputId)
    }

    /// Registers a planar frame in imported memory as an output of the output's size:
    /// three planes (R, G, B; a four-channel model's alpha is dropped), or one for a
    /// one-channel model. Values are written as the model gives them, unclamped.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, PlanarFrame};
    ///
    /// # fn host(ctx: &mut NeuralFrameContext, frame: PlanarFrame) -> neural_frame::Result<()> {
    /// let output = ctx.place_output_planes(&frame)?;
    /// # let _ = output; Ok(()) }
    /// ```
    pub fn place_output_planes(&mut self, frame: &PlanarFrame) -> Result<OutputId> {
        self.place_planes(Role::Output, frame).map(OutputId)
    }

    fn place_planes(&mut self, role: Role, frame: &PlanarFrame) -> Result<Key> {
        let what = format!("planar {}", role.name());
        let elem = element_bytes(frame.format)?;
        let (w, h) = (frame.width, frame.height);
        let want = if role == Role::Input { self.frame_size() } else { self.output_size() };
        if (w, h) != want {
            return Err(crate::context::record::size_mismatch(&what, (w, h), want));
        }
        let channels = if role == Role::Input { self.contract.input.channels } else { self.contract.output.channels };
        match (frame.planes.len(), role) {
            (3, _) | (1, Role::Input) => {}
            (1, Role::Output) if channels == 1 => {}
            (1, Role::Output) => {
                return Err(Error::InvalidArgument(format!(
                    "the model gives {channels} channels, and an output of one plane takes a one-channel model's \
                     grey: give three planes (R, G, B)"
                )));
            }
            (n, _) => {
                return Err(Error::InvalidArgument(format!(
                    "a planar frame has 1 plane (grey) or 3 (R, G, B), not {n}"
                )));
            }
        }
        let row = elem * w as u64;
        let max_range = u64::from(self.res.device.limits().max_storage_buffer_range);
        let mut placed = Vec::with_capacity(frame.planes.len());
        let mut ranges = Vec::with_capacity(frame.planes.len());
        let mut cuda_ptrs = Vec::with_capacity(frame.planes.len());
        let mut memories = Vec::with_capacity(frame.planes.len());
        for (k, plane) in frame.planes.iter().enumerate() {
            let memory = Arc::clone(self.res.registry.memory(plane.memory)?);
            let size = memory.vulkan.size();
            if plane.row_pitch % 4 != 0 || plane.row_pitch < row || plane.offset % 4 != 0 {
                return Err(Error::InvalidArgument(format!(
                    "plane {k} of the {what}: its offset ({}) and row pitch ({}) must be multiples of 4, the pitch \
                     at least a row's {row} bytes",
                    plane.offset, plane.row_pitch
                )));
            }
            // The plane's bytes, its last row's padding left out (rounded up to a whole word).
            let span = (plane.row_pitch * (h as u64 - 1) + row).next_multiple_of(4);
            let end = plane.offset.checked_add(span).filter(|&e| e <= size).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "plane {k} of the {what} ({span} bytes at offset {}) does not fit its memory of {size} bytes",
                    plane.offset
                ))
            })?;
            let base = plane.offset - plane.offset % memory.vulkan.alignment();
            let len = end - base;
            if len > max_range {
                return Err(Error::Unsupported {
                    device: self.res.device.info().name.clone(),
                    what: format!("a plane of {len} bytes (maxStorageBufferRange = {max_range} bytes)"),
                    remedy: "use smaller frames, or tiles".into(),
                });
            }
            if role == Role::Output {
                ranges.push((plane.memory, plane.offset, end));
            }
            let buffer = Buffer::place(&memory.vulkan, base, len, PLANE_USAGE)?;
            let start =
                u32::try_from((plane.offset - base) / 4).map_err(|_| Error::internal("an alignment over 16 GiB"))?;
            cuda_ptrs.push(memory.cuda.as_ref().map(|m| m.ptr() + plane.offset));
            memories.push(memory);
            placed.push(PlacedPlane { buffer, start, pitch: plane.row_pitch });
        }
        for (i, a) in ranges.iter().enumerate() {
            if let Some(b) = ranges[i + 1..].iter().find(|b| a.0 == b.0 && a.1 < b.2 && b.1 < a.2) {
                return Err(Error::InvalidArgument(format!(
                    "the {what}'s planes overlap (bytes {}..{} and {}..{} of one allocation): each channel needs \
                     its own",
                    a.1, a.2, b.1, b.2
                )));
            }
        }
        let cuda = self.plane_view(frame, &cuda_ptrs, memories)?;
        let reg = Registration {
            recorded: Vec::new(),
            direct: None,
            cuda,
            resource: Resource::Planes { format: frame.format, planes: placed },
            origin: Origin::Imported,
            width: w,
            height: h,
        };
        Ok(self.insert(role, reg))
    }

    /// The CUDA passes' view of a planar frame, where every plane's memory is in CUDA.
    fn plane_view(
        &self,
        frame: &PlanarFrame,
        ptrs: &[Option<u64>],
        memories: Vec<Arc<SharedAllocation>>,
    ) -> Result<Option<CudaView>> {
        if !self.res.engine.cuda_passes() {
            return Ok(None);
        }
        let Some(ptrs) = ptrs.iter().copied().collect::<Option<Vec<u64>>>() else {
            return Ok(None); // said once, when the memory was imported
        };
        let pitch = |k: usize| -> Result<u32> {
            let p = frame.planes.get(k).or(frame.planes.first()).map_or(0, |p| p.row_pitch);
            u32::try_from(p).map_err(|_| {
                Error::InvalidArgument(format!("the row pitch {p} is over what the CUDA passes address (4 GiB)"))
            })
        };
        let ptr = |k: usize| ptrs.get(k).or(ptrs.first()).copied().unwrap_or(0);
        let format = PlaneFormat::of(frame.format)?.surface;
        Ok(Some(CudaView {
            access: CudaAccess::Planes {
                ptrs: [ptr(0), ptr(1), ptr(2)],
                pitches: [pitch(0)?, pitch(1)?, pitch(2)?],
                _memory: memories,
            },
            format,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plane_format_is_described_once() {
        let described: Vec<vk::Format> = PLANE_FORMAT_TABLE.iter().map(|f| f.format).collect();
        assert_eq!(described, PLANE_FORMATS);
        let codes: Vec<u32> = PLANE_FORMAT_TABLE.iter().map(|f| f.shader_code).collect();
        assert_eq!(codes, [3, 4, 5], "planes_common.wgsl's format codes");
        assert!(PlaneFormat::of(vk::Format::R8G8B8A8_UNORM).is_err());
        assert_eq!(element_bytes(vk::Format::R16_SFLOAT).ok(), Some(2));
    }
}
