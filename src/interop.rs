//! Where Vulkan and CUDA meet, and nowhere else: timelines that both APIs
//! signal and wait on, buffers that both read and write, and the caller's
//! memory seen by CUDA. Each type declares its fields in teardown order: the
//! CUDA import goes before the Vulkan object it imports.
//!
//! Handles cross as file descriptors on Linux and NT handles on Windows
//! ([`crate::handle`]). A handle the library exported from Vulkan for CUDA is
//! CUDA's after a successful import on Linux; on Windows CUDA takes a reference
//! of its own and the library closes the handle right after the import.

use std::ffi::c_void;
use std::sync::Arc;

use ash::vk;

use crate::cuda;
pub(crate) use crate::cuda::{CudaDevice, MappedBuffer, SurfaceFormat};
use crate::error::{Error, Result};
use crate::handle::{self, ExternalHandle};
use crate::onnx::Placement;
use crate::vulkan::{Allocation, Buffer, BufferMemory, Device, ExportedMemory, TimelineSemaphore};

/// A Vulkan timeline semaphore and, on the CUDA backend, its CUDA import.
pub(crate) struct SharedTimeline {
    cuda: Option<cuda::ExternalSemaphore>,
    vulkan: TimelineSemaphore,
}

impl SharedTimeline {
    /// A timeline starting at 0: imported into CUDA when `cuda` is given, and
    /// exportable to the caller when `exportable` (both need semaphore fds).
    pub(crate) fn new(device: &Arc<Device>, cuda: Option<&Arc<CudaDevice>>, exportable: bool) -> Result<Self> {
        let vulkan = TimelineSemaphore::new(device, 0, exportable || cuda.is_some())?;
        let cuda = match cuda {
            Some(c) => Some(cuda::ExternalSemaphore::import_timeline(c, vulkan.export()?)?),
            None => None,
        };
        Ok(Self { cuda, vulkan })
    }

    /// A timeline of Vulkan's alone (the caller's by handle, the context's own for the host).
    pub(crate) fn vulkan_only(vulkan: TimelineSemaphore) -> Self {
        Self { cuda: None, vulkan }
    }

    /// The caller's timeline exported as `handle`: imported into Vulkan, and into CUDA
    /// as well when `cuda` is given (from a duplicate of the descriptor), so that a CUDA
    /// stream waits for the caller's values itself. The descriptor (or Windows handle)
    /// is the caller's to keep whatever happens (both imports take duplicates).
    pub(crate) fn import(
        device: &Arc<Device>,
        cuda: Option<&Arc<CudaDevice>>,
        handle: &ExternalHandle,
    ) -> Result<Self> {
        let dup = || handle::duplicate(handle, "the semaphore");
        let vulkan = TimelineSemaphore::import(device, dup()?)?;
        let cuda = match cuda {
            Some(c) => Some(cuda::ExternalSemaphore::import_timeline(c, dup()?)?),
            None => None,
        };
        Ok(Self { cuda, vulkan })
    }

    /// One of the caller's timelines on the context's own device, created exportable: imported
    /// into CUDA as well when `cuda` is given (from a descriptor exported now), so that a CUDA
    /// stream waits for the caller's values itself.
    pub(crate) fn caller_exportable(vulkan: TimelineSemaphore, cuda: Option<&Arc<CudaDevice>>) -> Result<Self> {
        let cuda = match cuda {
            Some(c) => Some(cuda::ExternalSemaphore::import_timeline(c, vulkan.export()?)?),
            None => None,
        };
        Ok(Self { cuda, vulkan })
    }

    /// The CUDA side, where there is one.
    pub(crate) fn cuda_if_any(&self) -> Option<&cuda::ExternalSemaphore> {
        self.cuda.as_ref()
    }

    /// The Vulkan side.
    pub(crate) fn vulkan(&self) -> &TimelineSemaphore {
        &self.vulkan
    }

    /// The raw Vulkan semaphore.
    pub(crate) fn raw(&self) -> vk::Semaphore {
        self.vulkan.raw()
    }

    /// The CUDA side (the CUDA backend only).
    pub(crate) fn cuda(&self) -> Result<&cuda::ExternalSemaphore> {
        self.cuda.as_ref().ok_or_else(|| Error::internal("a timeline without its CUDA import"))
    }

    /// A new file descriptor (Windows: handle) for the caller to import.
    pub(crate) fn export(&self) -> Result<ExternalHandle> {
        self.vulkan.export()
    }
}

/// A buffer the model reads or writes: device-local and mapped into CUDA on
/// the CUDA backend, host-visible and mapped into the process on the CPU backend.
pub(crate) struct SharedBuffer {
    cuda: Option<MappedBuffer>,
    buffer: Buffer,
}

impl SharedBuffer {
    /// `len` bytes with `usage`, shared with `cuda` when given.
    pub(crate) fn new(
        device: &Arc<Device>,
        cuda: Option<&Arc<CudaDevice>>,
        len: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<Self> {
        match cuda {
            Some(c) => {
                let buffer = Buffer::exportable(device, len, usage, BufferMemory::DeviceLocal)?;
                let mapped = memory_into_cuda(c, buffer.export()?)?.map_buffer(0, len)?;
                Ok(Self { cuda: Some(mapped), buffer })
            }
            None => Ok(Self { cuda: None, buffer: Buffer::new(device, len, usage, BufferMemory::HostVisible)? }),
        }
    }

    /// The Vulkan buffer.
    pub(crate) fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// Where ONNX Runtime finds the memory, and its address there.
    pub(crate) fn tensor_memory(&self) -> Result<(Placement, *mut c_void)> {
        tensor_memory(self.cuda.as_ref(), Some(&self.buffer))
    }
}

/// The caller's exported memory imported into CUDA and mapped as `len` bytes
/// (the literal zero-copy path on the CUDA backend). On failure the descriptor is closed.
/// Vulkan memory exported as a file descriptor, imported into CUDA (on success
/// the descriptor is CUDA's; on failure it is closed; a Windows handle is closed
/// either way, CUDA keeping a reference of its own).
pub(crate) fn memory_into_cuda(cuda: &Arc<CudaDevice>, memory: ExportedMemory) -> Result<cuda::ExternalMemory> {
    let ExportedMemory { handle, info } = memory;
    cuda::ExternalMemory::import(cuda, handle, info.size, info.dedicated)
}

/// The format the CUDA passes read (`output` false) or write a Vulkan image or
/// buffer of `format` as, where they convert it.
pub(crate) fn surface_format(format: vk::Format, output: bool) -> Option<cuda::SurfaceFormat> {
    use cuda::SurfaceFormat as S;
    Some(match (format, output) {
        (vk::Format::R8G8B8A8_UNORM | vk::Format::R8G8B8A8_SRGB, _) => S::Rgba8,
        (vk::Format::B8G8R8A8_UNORM | vk::Format::B8G8R8A8_SRGB, _) => S::Bgra8,
        (vk::Format::R16G16B16A16_SFLOAT, _) => S::Rgba16F,
        (vk::Format::R16_SFLOAT, false) => S::R16F,
        (vk::Format::R32_SFLOAT, false) => S::R32F,
        (vk::Format::R16G16_SFLOAT, false) => S::Rg16F,
        (vk::Format::R32G32_SFLOAT, false) => S::Rg32F,
        (vk::Format::R32G32B32A32_SFLOAT, false) => S::Rgba32F,
        _ => return None,
    })
}

pub(crate) fn import_into_cuda(cuda: &Arc<CudaDevice>, memory: ExportedMemory, len: u64) -> Result<MappedBuffer> {
    memory_into_cuda(cuda, memory)?.map_buffer(0, len)
}

/// An image's exported memory (optimal tiling, `width × height` of `format`)
/// imported into CUDA and mapped as an array, with a surface object the CUDA
/// passes read or write it through. On failure the descriptor is closed.
pub(crate) fn image_into_cuda(
    cuda: &Arc<CudaDevice>,
    memory: ExportedMemory,
    (width, height): (u32, u32),
    format: cuda::SurfaceFormat,
) -> Result<cuda::Surface> {
    let array = memory_into_cuda(cuda, memory)?.map_surface_array(width, height, format)?;
    cuda::Surface::new(array)
}

/// Where ONNX Runtime finds memory that is mapped into CUDA, or else into the
/// process through a host-visible Vulkan buffer.
pub(crate) fn tensor_memory(cuda: Option<&MappedBuffer>, host: Option<&Buffer>) -> Result<(Placement, *mut c_void)> {
    if let Some(m) = cuda {
        return Ok((Placement::Cuda(m.device().info().ordinal), m.ptr() as *mut c_void));
    }
    match host.map(Buffer::mapped_ptr) {
        Some(p) if !p.is_null() => Ok((Placement::Host, p.cast())),
        _ => Err(Error::internal("tensor memory that is neither in CUDA nor mapped")),
    }
}

/// Memory the caller exported, imported once: into the context's Vulkan device, and,
/// where the CUDA passes can reach it, into CUDA, mapped whole.
pub(crate) struct SharedAllocation {
    pub(crate) cuda: Option<MappedBuffer>,
    pub(crate) vulkan: Arc<Allocation>,
}

/// How the CUDA passes reach a registration's memory.
pub(crate) enum CudaAccess {
    /// An image's memory mapped as a CUDA array, through a surface object.
    Surface(cuda::Surface),
    /// A linear buffer's memory as a device pointer, and its row pitch in bytes.
    Buffer { mapped: MappedBuffer, pitch: u32 },
    /// A planar frame's planes (R, G, B; one plane given three times) as device pointers
    /// into imported memory, which `_memory` keeps mapped, and their row pitches in bytes.
    Planes { ptrs: [u64; 3], pitches: [u32; 3], _memory: Vec<Arc<SharedAllocation>> },
}

/// A registration's memory as the CUDA passes see it (imported into CUDA once).
pub(crate) struct CudaView {
    pub(crate) access: CudaAccess,
    pub(crate) format: cuda::SurfaceFormat,
}

impl CudaView {
    /// What the kernels take: the surface object or device pointer, the format,
    /// the kind of access and the row pitch in bytes.
    pub(crate) fn params(&self) -> (u64, u32, u32, u32) {
        match &self.access {
            CudaAccess::Surface(s) => (s.raw(), self.format as u32, cuda::Access::Surface as u32, 0),
            CudaAccess::Buffer { mapped, pitch } => {
                (mapped.ptr(), self.format as u32, cuda::Access::Buffer as u32, *pitch)
            }
            CudaAccess::Planes { ptrs, pitches, .. } => {
                (ptrs[0], self.format as u32, cuda::Access::Planes as u32, pitches[0])
            }
        }
    }

    /// Planes 1 and 2 of a planar frame, and their row pitches in bytes (zeros otherwise).
    pub(crate) fn planes(&self) -> (u64, u64, u32, u32) {
        match &self.access {
            CudaAccess::Planes { ptrs, pitches, .. } => (ptrs[1], ptrs[2], pitches[1], pitches[2]),
            _ => (0, 0, 0, 0),
        }
    }
}

/// Interop on a real NVIDIA GPU, with the crate's own types. Run with
/// `cargo test --lib -- --include-ignored --test-threads=1` (the fd count is process-wide).
#[cfg(all(test, feature = "cuda"))]
mod tests;
