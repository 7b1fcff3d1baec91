//! The CUDA device whose UUID equals the Vulkan device's, with its primary context.

use std::sync::Arc;

use cudarc::driver::sys;

use crate::cuda::result::{self, CudaDeviceInfo, check};
use crate::error::{Error, Result, format_uuid};

/// A CUDA device and its retained primary context. Released in `Drop`.
pub struct CudaDevice {
    ctx: sys::CUcontext,
    dev: sys::CUdevice,
    info: CudaDeviceInfo,
}

// SAFETY: a CUDA context may be made current on any thread; the handle is a plain pointer.
unsafe impl Send for CudaDevice {}
// SAFETY: as above; driver calls on a context are thread-safe.
unsafe impl Sync for CudaDevice {}

/// Chooses, from `devices`, the one whose UUID is `uuid`. Pure, so it can be tested.
pub fn match_uuid(devices: &[CudaDeviceInfo], uuid: &[u8; 16]) -> Result<usize> {
    devices.iter().position(|d| &d.uuid == uuid).ok_or_else(|| Error::DeviceMismatch {
        vulkan_uuid: format_uuid(uuid),
        seen: if devices.is_empty() {
            "no CUDA device".into()
        } else {
            devices
                .iter()
                .map(|d| format!("CUDA {} \"{}\" {}", d.ordinal, d.name, format_uuid(&d.uuid)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    })
}

impl CudaDevice {
    /// The CUDA device with this UUID (never by ordinal: the orders of Vulkan
    /// and CUDA devices need not agree).
    pub fn by_uuid(uuid: &[u8; 16]) -> Result<Arc<Self>> {
        let list = result::devices()?;
        let index = match_uuid(&list, uuid)?;
        let info = list[index].clone();
        let mut dev: sys::CUdevice = 0;
        // SAFETY: the ordinal came from cuDeviceGetCount.
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, info.ordinal) })?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: dev is valid; ctx is a valid out pointer.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
        let device = Arc::new(Self { ctx, dev, info });
        device.bind()?;
        Ok(device)
    }

    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        // SAFETY: ctx is a retained primary context.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx) })
    }

    /// What the device is.
    pub fn info(&self) -> &CudaDeviceInfo {
        &self.info
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid out pointers; the context is current.
        check("cuMemGetInfo", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        Ok((free, total))
    }

    /// Waits for all work in the context.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the context is current.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // SAFETY: every child holds an Arc<CudaDevice>; the context was retained once.
        let r = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.dev) };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::error!("cuDevicePrimaryCtxRelease failed: {r:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatch_lists_every_uuid() {
        let list = vec![
            CudaDeviceInfo { ordinal: 0, name: "A".into(), uuid: [1; 16] },
            CudaDeviceInfo { ordinal: 1, name: "B".into(), uuid: [2; 16] },
        ];
        assert_eq!(match_uuid(&list, &[2; 16]).ok(), Some(1));
        let err = match_uuid(&list, &[0x73; 16]).expect_err("no match").to_string();
        assert!(err.contains(&format_uuid(&[0x73; 16])), "{err}");
        assert!(err.contains(&format_uuid(&[1; 16])) && err.contains(&format_uuid(&[2; 16])), "{err}");
        assert!(err.contains("Backend::Cpu"), "{err}");
    }
}
