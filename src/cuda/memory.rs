//! Vulkan memory imported into CUDA, and plain device allocations.
//!
//! Ownership encodes teardown order: mapping an [`ExternalMemory`] moves it
//! into the mapping, so the mapping is released before the import.

use std::sync::Arc;

use cudarc::driver::sys;

use crate::cuda::device::CudaDevice;
use crate::cuda::params::{ArrayElement, SurfaceFormat};
use crate::cuda::result::{check, check_ctx};
use crate::cuda::stream::Stream;
use crate::error::{Error, Result};
use crate::handle::{self, ExternalHandle};

/// The handle type of Vulkan's `OPAQUE_FD` memory (Linux).
#[cfg(unix)]
const MEMORY_HANDLE_TYPE: sys::CUexternalMemoryHandleType =
    sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
/// The handle type of Vulkan's `OPAQUE_WIN32` memory (Windows, an NT handle).
#[cfg(windows)]
const MEMORY_HANDLE_TYPE: sys::CUexternalMemoryHandleType =
    sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32;

/// Vulkan memory imported into CUDA (`cuImportExternalMemory`).
pub struct ExternalMemory {
    raw: sys::CUexternalMemory,
    size: u64,
    device: Arc<CudaDevice>,
}

// SAFETY: the handle is usable from any thread with the context current.
unsafe impl Send for ExternalMemory {}
// SAFETY: as above.
unsafe impl Sync for ExternalMemory {}

impl ExternalMemory {
    /// Imports an `OPAQUE_FD` (Windows: `OPAQUE_WIN32`) exported by Vulkan, with the
    /// `size` of the Vulkan allocation and the `dedicated` flag exactly when the
    /// allocation is dedicated. Linux: on success the descriptor belongs to CUDA; on
    /// failure it is closed here. Windows: CUDA does not take ownership of the handle,
    /// so it is closed here either way (the import keeps the memory alive).
    pub fn import(device: &Arc<CudaDevice>, handle: ExternalHandle, size: u64, dedicated: bool) -> Result<Self> {
        device.bind()?;
        let mut desc = std::mem::MaybeUninit::<sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC>::zeroed();
        let p = desc.as_mut_ptr();
        // SAFETY: p points to zeroed storage of the right type; writing the enum
        // field (which has no zero variant) before assume_init makes every field valid.
        let desc = unsafe {
            (&raw mut (*p).type_).write(MEMORY_HANDLE_TYPE);
            #[cfg(unix)]
            {
                (*p).handle.fd = handle::raw(&handle);
            }
            #[cfg(windows)]
            {
                (*p).handle.win32.handle = handle::raw(&handle);
            }
            (*p).size = size;
            (*p).flags = if dedicated { sys::CUDA_EXTERNAL_MEMORY_DEDICATED } else { 0 };
            desc.assume_init()
        };
        let mut raw: sys::CUexternalMemory = std::ptr::null_mut();
        // SAFETY: desc is fully initialised; the context is current.
        let r = unsafe { sys::cuImportExternalMemory(&mut raw, &desc) };
        check_ctx("cuImportExternalMemory", r, &format!("{} bytes, dedicated={}", size, dedicated))?; // on error `handle` is dropped here and so closed: it is still ours
        // Linux: a successful import owns the descriptor. Windows: the handle is closed.
        handle::imported(handle);
        Ok(Self { raw, size, device: Arc::clone(device) })
    }

    /// Maps `len` bytes at `offset` as a linear device buffer (readable and writable).
    pub fn map_buffer(self, offset: u64, len: u64) -> Result<MappedBuffer> {
        if offset + len > self.size {
            return Err(Error::InvalidArgument(format!(
                "mapping {len} bytes at {offset} of an import of {} bytes",
                self.size
            )));
        }
        self.device.bind()?;
        // SAFETY: plain C data; all-zero is valid.
        let mut desc: sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC = unsafe { std::mem::zeroed() };
        desc.offset = offset;
        desc.size = len;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: raw is a live import; the range lies inside it (checked above).
        check("cuExternalMemoryGetMappedBuffer", unsafe {
            sys::cuExternalMemoryGetMappedBuffer(&mut ptr, self.raw, &desc)
        })?;
        Ok(MappedBuffer { ptr, len, memory: self })
    }

    /// Maps the memory of an RGBA8 optimal-tiling image as a mipmapped array
    /// (uchar4, one level) and takes its level 0.
    pub fn map_rgba8_array(self, width: u32, height: u32) -> Result<MappedArray> {
        self.map_array(width, height, (sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8, 4), 0)
    }

    /// Maps the memory of an optimal-tiling image of `format` as a mipmapped
    /// array of one level that kernels read and write through a surface object,
    /// and takes its level 0.
    pub fn map_surface_array(self, width: u32, height: u32, format: SurfaceFormat) -> Result<MappedArray> {
        let (element, channels) = format.array();
        let element = match element {
            ArrayElement::U8 => sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8,
            ArrayElement::Half => sys::CUarray_format::CU_AD_FORMAT_HALF,
            ArrayElement::Float => sys::CUarray_format::CU_AD_FORMAT_FLOAT,
        };
        self.map_array(width, height, (element, channels), sys::CUDA_ARRAY3D_SURFACE_LDST)
    }

    fn map_array(
        self,
        width: u32,
        height: u32,
        (format, channels): (sys::CUarray_format, u32),
        flags: u32,
    ) -> Result<MappedArray> {
        self.device.bind()?;
        let mut desc = std::mem::MaybeUninit::<sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC>::zeroed();
        let p = desc.as_mut_ptr();
        // SAFETY: zeroed storage of the right type; the format enum (no zero
        // variant) is written before assume_init, the other fields are integers.
        let desc = unsafe {
            (&raw mut (*p).arrayDesc.Format).write(format);
            (*p).offset = 0;
            (*p).arrayDesc.Width = width as usize;
            (*p).arrayDesc.Height = height as usize;
            (*p).arrayDesc.Depth = 0;
            (*p).arrayDesc.NumChannels = channels;
            (*p).arrayDesc.Flags = flags;
            (*p).numLevels = 1;
            desc.assume_init()
        };
        let mut mipmapped: sys::CUmipmappedArray = std::ptr::null_mut();
        // SAFETY: raw is a live import of an image of this size and format.
        check("cuExternalMemoryGetMappedMipmappedArray", unsafe {
            sys::cuExternalMemoryGetMappedMipmappedArray(&mut mipmapped, self.raw, &desc)
        })?;
        let mut level0: sys::CUarray = std::ptr::null_mut();
        // SAFETY: mipmapped is live and has one level.
        let r = unsafe { sys::cuMipmappedArrayGetLevel(&mut level0, mipmapped, 0) };
        if let Err(e) = check("cuMipmappedArrayGetLevel", r) {
            // SAFETY: mipmapped is live and unused.
            unsafe { sys::cuMipmappedArrayDestroy(mipmapped) };
            return Err(e);
        }
        Ok(MappedArray { level0, mipmapped, width, height, memory: self })
    }
}

impl Drop for ExternalMemory {
    fn drop(&mut self) {
        let _ = self.device.bind();
        // SAFETY: every mapping of this import owned it and is gone.
        let r = unsafe { sys::cuDestroyExternalMemory(self.raw) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuDestroyExternalMemory failed: {r:?}");
        }
    }
}

/// A linear device pointer over imported memory. Frees the mapping, then the import.
pub struct MappedBuffer {
    ptr: sys::CUdeviceptr,
    len: u64,
    memory: ExternalMemory,
}

impl MappedBuffer {
    /// The device pointer (readable and writable by kernels and copies).
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }
    /// Mapped length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// The CUDA device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.memory.device
    }

    /// Reads the first `len` bytes to the host (blocking; verification).
    #[cfg(test)]
    pub fn to_host(&self, len: usize) -> Result<Vec<u8>> {
        check_len(len, self.len as usize)?;
        // SAFETY: the mapping covers self.len >= len bytes.
        unsafe { copy_to_host(self.device(), self.ptr, len) }
    }

    /// Writes host bytes at offset 0 (blocking; tests).
    pub fn write_from_host(&self, data: &[u8]) -> Result<()> {
        check_len(data.len(), self.len as usize)?;
        // SAFETY: the mapping covers self.len >= data.len() bytes.
        unsafe { copy_from_host(self.device(), self.ptr, data) }
    }
}

fn check_len(want: usize, have: usize) -> Result<()> {
    if want > have {
        return Err(Error::InvalidArgument(format!("{want} bytes asked of a device range of {have}")));
    }
    Ok(())
}

impl Drop for MappedBuffer {
    fn drop(&mut self) {
        let _ = self.memory.device.bind();
        // SAFETY: a mapped external buffer is released with cuMemFree (CUDA docs).
        let r = unsafe { sys::cuMemFree_v2(self.ptr) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuMemFree of an external mapping failed: {r:?}");
        }
    }
}

/// An image's memory seen as a CUDA mipmapped array, with level 0.
pub struct MappedArray {
    level0: sys::CUarray,
    mipmapped: sys::CUmipmappedArray,
    width: u32,
    height: u32,
    memory: ExternalMemory,
}

impl MappedArray {
    /// Level 0 of the array.
    pub fn level0(&self) -> sys::CUarray {
        self.level0
    }
    /// Width and height in pixels.
    pub fn extent(&self) -> (u32, u32) {
        (self.width, self.height)
    }
    /// The CUDA device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.memory.device
    }
}

impl Drop for MappedArray {
    fn drop(&mut self) {
        let _ = self.memory.device.bind();
        // SAFETY: level 0 belongs to the mipmapped array, which is destroyed once.
        let r = unsafe { sys::cuMipmappedArrayDestroy(self.mipmapped) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuMipmappedArrayDestroy failed: {r:?}");
        }
    }
}

/// A plain device allocation (`cuMemAlloc`).
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    device: Arc<CudaDevice>,
}

// SAFETY: device pointers are usable from any thread with the context current.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocates `len` bytes.
    pub fn new(device: &Arc<CudaDevice>, len: usize) -> Result<Self> {
        device.bind()?;
        let mut ptr = 0;
        check_ctx(
            "cuMemAlloc",
            // SAFETY: ptr is a valid out pointer; the context is current.
            unsafe { sys::cuMemAlloc_v2(&mut ptr, len) },
            &format!("{len} bytes"),
        )?;
        Ok(Self { ptr, len, device: Arc::clone(device) })
    }
    /// The device pointer.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }
    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Enqueues a fill of the whole buffer with `value` (poisoning).
    pub fn fill(&self, value: u8, stream: &Stream) -> Result<()> {
        // SAFETY: the allocation holds self.len bytes.
        unsafe { fill(&self.device, self.ptr, value, self.len, stream) }
    }

    /// Reads the whole buffer to the host (blocking; verification).
    pub fn to_host(&self) -> Result<Vec<u8>> {
        // SAFETY: the allocation holds self.len bytes.
        unsafe { copy_to_host(&self.device, self.ptr, self.len) }
    }

    /// Enqueues a copy of level 0 of an RGBA8 array into the start of this buffer.
    pub fn copy_from_array(&self, array: &MappedArray, stream: &Stream) -> Result<()> {
        let (w, h) = array.extent();
        check_len(w as usize * h as usize * 4, self.len)?;
        // SAFETY: the buffer holds at least w*h*4 bytes (checked above).
        unsafe { copy_array_to_device(array, self.ptr, stream) }
    }

    /// Enqueues a copy of the first `len` bytes of a mapped buffer into this one.
    pub fn copy_from_mapped(&self, src: &MappedBuffer, len: usize, stream: &Stream) -> Result<()> {
        check_len(len, self.len)?;
        check_len(len, src.len() as usize)?;
        // SAFETY: both ranges hold at least len bytes (checked above).
        unsafe { copy_device_to_device(&self.device, self.ptr, src.ptr(), len, stream) }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.device.bind();
        // SAFETY: ptr came from cuMemAlloc and is freed once.
        let r = unsafe { sys::cuMemFree_v2(self.ptr) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuMemFree failed: {r:?}");
        }
    }
}

/// Copies `len` bytes from device memory to the host (blocking; verification only).
///
/// # Safety
/// `src` must point to at least `len` bytes of device memory of `device`.
pub(crate) unsafe fn copy_to_host(device: &CudaDevice, src: sys::CUdeviceptr, len: usize) -> Result<Vec<u8>> {
    device.bind()?;
    let mut out = vec![0u8; len];
    // SAFETY: out holds len bytes; src is a device pointer to at least len bytes (caller's contract).
    check("cuMemcpyDtoH", unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), src, len) })?;
    Ok(out)
}

/// Copies host bytes to device memory (blocking; tests).
///
/// # Safety
/// `dst` must point to at least `data.len()` bytes of device memory of `device`.
pub(crate) unsafe fn copy_from_host(device: &CudaDevice, dst: sys::CUdeviceptr, data: &[u8]) -> Result<()> {
    device.bind()?;
    // SAFETY: dst is a device pointer to at least data.len() bytes (caller's contract).
    check("cuMemcpyHtoD", unsafe { sys::cuMemcpyHtoD_v2(dst, data.as_ptr().cast(), data.len()) })
}

/// Enqueues a 2D copy of level 0 of an RGBA8 array into a packed device buffer.
///
/// # Safety
/// `dst` must point to at least width × height × 4 bytes of device memory.
pub(crate) unsafe fn copy_array_to_device(array: &MappedArray, dst: sys::CUdeviceptr, stream: &Stream) -> Result<()> {
    let (w, h) = array.extent();
    let mut c = std::mem::MaybeUninit::<sys::CUDA_MEMCPY2D>::zeroed();
    let p = c.as_mut_ptr();
    // SAFETY: zeroed storage of the right type; both memory-type enums (no zero
    // variant) are written before assume_init; the rest are integers and pointers.
    let c = unsafe {
        (&raw mut (*p).srcMemoryType).write(sys::CUmemorytype::CU_MEMORYTYPE_ARRAY);
        (&raw mut (*p).dstMemoryType).write(sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
        (*p).srcArray = array.level0();
        (*p).dstDevice = dst;
        (*p).dstPitch = w as usize * 4;
        (*p).WidthInBytes = w as usize * 4;
        (*p).Height = h as usize;
        c.assume_init()
    };
    array.device().bind()?;
    // SAFETY: the array is live; dst holds w*h*4 bytes (caller's contract).
    check("cuMemcpy2DAsync", unsafe { sys::cuMemcpy2DAsync_v2(&c, stream.raw()) })
}

/// Enqueues a device-to-device copy.
///
/// # Safety
/// `dst` and `src` must each point to at least `len` bytes of device memory.
pub(crate) unsafe fn copy_device_to_device(
    device: &CudaDevice,
    dst: sys::CUdeviceptr,
    src: sys::CUdeviceptr,
    len: usize,
    stream: &Stream,
) -> Result<()> {
    device.bind()?;
    // SAFETY: both pointers cover len bytes (caller's contract).
    check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream.raw()) })
}

/// Enqueues a fill of `len` bytes with `value`.
///
/// # Safety
/// `dst` must point to at least `len` bytes of device memory.
pub(crate) unsafe fn fill(
    device: &CudaDevice,
    dst: sys::CUdeviceptr,
    value: u8,
    len: usize,
    stream: &Stream,
) -> Result<()> {
    device.bind()?;
    // SAFETY: dst covers len bytes (caller's contract).
    check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(dst, value, len, stream.raw()) })
}
