//! Vulkan timeline semaphores imported into CUDA.

use std::sync::Arc;

use cudarc::driver::sys;

use crate::cuda::device::CudaDevice;
use crate::cuda::result::check;
use crate::cuda::stream::Stream;
use crate::error::Result;
use crate::handle::{self, ExternalHandle};

/// The handle type of a Vulkan timeline exported as `OPAQUE_FD` (Linux).
#[cfg(unix)]
const TIMELINE_HANDLE_TYPE: sys::CUexternalSemaphoreHandleType =
    sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
/// The handle type of a Vulkan timeline exported as `OPAQUE_WIN32` (Windows, an NT handle).
#[cfg(windows)]
const TIMELINE_HANDLE_TYPE: sys::CUexternalSemaphoreHandleType =
    sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32;

/// A Vulkan timeline semaphore seen by CUDA.
pub struct ExternalSemaphore {
    raw: sys::CUexternalSemaphore,
    device: Arc<CudaDevice>,
}

// SAFETY: the handle is usable from any thread with the context current.
unsafe impl Send for ExternalSemaphore {}
// SAFETY: as above.
unsafe impl Sync for ExternalSemaphore {}

impl ExternalSemaphore {
    /// Imports a timeline semaphore exported as `OPAQUE_FD` (Windows: `OPAQUE_WIN32`).
    /// Linux: on success the descriptor belongs to CUDA; on failure it is closed
    /// here. Windows: CUDA does not take ownership of the handle, so it is closed
    /// here either way (the import keeps the semaphore alive).
    pub fn import_timeline(device: &Arc<CudaDevice>, handle: ExternalHandle) -> Result<Self> {
        device.bind()?;
        let mut desc = std::mem::MaybeUninit::<sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC>::zeroed();
        let p = desc.as_mut_ptr();
        // SAFETY: zeroed storage of the right type; the handle-type enum (no zero
        // variant) is written before assume_init.
        let desc = unsafe {
            (&raw mut (*p).type_).write(TIMELINE_HANDLE_TYPE);
            #[cfg(unix)]
            {
                (*p).handle.fd = handle::raw(&handle);
            }
            #[cfg(windows)]
            {
                (*p).handle.win32.handle = handle::raw(&handle);
            }
            desc.assume_init()
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: desc is initialised; the context is current.
        check("cuImportExternalSemaphore", unsafe { sys::cuImportExternalSemaphore(&mut raw, &desc) })?;
        handle::imported(handle); // Linux: owned by CUDA now; Windows: closed, CUDA holds its own reference
        Ok(Self { raw, device: Arc::clone(device) })
    }

    /// Enqueues on `stream`: signal the timeline to `value`.
    pub fn signal(&self, stream: &Stream, value: u64) -> Result<()> {
        self.device.bind()?;
        // SAFETY: plain C data; all-zero is valid.
        let mut p: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
        p.params.fence.value = value;
        // SAFETY: one semaphore, one parameter block, both live for the call.
        check("cuSignalExternalSemaphoresAsync", unsafe {
            sys::cuSignalExternalSemaphoresAsync(&self.raw, &p, 1, stream.raw())
        })
    }

    /// Enqueues on `stream`: wait until the timeline reaches `value`.
    pub fn wait(&self, stream: &Stream, value: u64) -> Result<()> {
        self.device.bind()?;
        // SAFETY: plain C data; all-zero is valid.
        let mut p: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
        p.params.fence.value = value;
        // SAFETY: one semaphore, one parameter block, both live for the call.
        check("cuWaitExternalSemaphoresAsync", unsafe {
            sys::cuWaitExternalSemaphoresAsync(&self.raw, &p, 1, stream.raw())
        })
    }
}

impl Drop for ExternalSemaphore {
    fn drop(&mut self) {
        let _ = self.device.bind();
        // SAFETY: destroyed once; callers retire stream work using it first.
        let r = unsafe { sys::cuDestroyExternalSemaphore(self.raw) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuDestroyExternalSemaphore failed: {r:?}");
        }
    }
}
