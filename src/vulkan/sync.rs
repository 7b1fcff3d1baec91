//! Timeline semaphores, optionally exportable as `OPAQUE_FD` for CUDA.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::vulkan::device::Device;

const HANDLE: vk::ExternalSemaphoreHandleTypeFlags = vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;

/// Checks that timeline semaphores can be exported and imported as `OPAQUE_FD`.
pub fn timeline_export_support(device: &Device) -> Result<()> {
    let unsupported = |what: String| Error::Unsupported {
        device: device.info().name.clone(),
        what,
        remedy: "semaphore sharing with CUDA needs VK_KHR_external_semaphore_fd with timeline semaphores \
                 (NVIDIA drivers have it; Mesa's lavapipe does not)"
            .into(),
    };
    if !device.can_export_semaphores() {
        return Err(unsupported("the device extension VK_KHR_external_semaphore_fd".into()));
    }
    let mut ty = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    let info = vk::PhysicalDeviceExternalSemaphoreInfo::default().handle_type(HANDLE).push_next(&mut ty);
    let mut props = vk::ExternalSemaphoreProperties::default();
    // SAFETY: the physical device belongs to the instance; the chain lives until the call returns.
    unsafe {
        device.instance().raw().get_physical_device_external_semaphore_properties(device.physical(), &info, &mut props)
    };
    let need = vk::ExternalSemaphoreFeatureFlags::EXPORTABLE | vk::ExternalSemaphoreFeatureFlags::IMPORTABLE;
    if !props.external_semaphore_features.contains(need) {
        return Err(unsupported(format!(
            "exporting timeline semaphores as OPAQUE_FD (features: {:?})",
            props.external_semaphore_features
        )));
    }
    Ok(())
}

/// A timeline semaphore.
pub struct TimelineSemaphore {
    raw: vk::Semaphore,
    exportable: bool,
    device: Arc<Device>,
}

impl TimelineSemaphore {
    /// A timeline semaphore starting at `initial`; exportable when asked (checked first).
    pub fn new(device: &Arc<Device>, initial: u64, exportable: bool) -> Result<Self> {
        if exportable {
            timeline_export_support(device)?;
        }
        let mut ty =
            vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(initial);
        let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(HANDLE);
        let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut ty);
        if exportable {
            info = info.push_next(&mut export);
        }
        // SAFETY: info is valid; export support was checked.
        let raw = unsafe { device.raw().create_semaphore(&info, None) }.call("vkCreateSemaphore")?;
        Ok(Self { raw, exportable, device: Arc::clone(device) })
    }

    /// Exports the semaphore as a new `OPAQUE_FD`.
    pub fn export(&self) -> Result<OwnedFd> {
        let loader = match (&self.device.semaphore_fd, self.exportable) {
            (Some(l), true) => l,
            _ => {
                return Err(Error::InvalidArgument("this semaphore was not created exportable".into()));
            }
        };
        let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(self.raw).handle_type(HANDLE);
        // SAFETY: the semaphore was created with ExportSemaphoreCreateInfo for OPAQUE_FD.
        let fd = unsafe { loader.get_semaphore_fd(&info) }.call("vkGetSemaphoreFdKHR")?;
        // SAFETY: the call returns a new descriptor owned by the caller.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The raw semaphore.
    pub fn raw(&self) -> vk::Semaphore {
        self.raw
    }

    /// The current counter value.
    pub fn value(&self) -> Result<u64> {
        // SAFETY: the semaphore is a live timeline semaphore of this device.
        unsafe { self.device.raw().get_semaphore_counter_value(self.raw) }.call("vkGetSemaphoreCounterValue")
    }

    /// Waits on the host until the counter reaches `value`, or `timeout_ns` passes.
    /// Returns false on time-out.
    pub fn wait(&self, value: u64, timeout_ns: u64) -> Result<bool> {
        let semaphores = [self.raw];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        // SAFETY: the semaphore is live; the arrays outlive the call.
        match unsafe { self.device.raw().wait_semaphores(&info, timeout_ns) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(result) => Err(Error::Vulkan { call: "vkWaitSemaphores", result }),
        }
    }

    /// Signals `value` from the host. Slow to release a CUDA waiter (~10 ms
    /// measured): the hot path signals from queue submissions instead.
    pub fn signal_from_host(&self, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.raw).value(value);
        // SAFETY: the semaphore is live and value is larger than the current one (caller's contract).
        unsafe { self.device.raw().signal_semaphore(&info) }.call("vkSignalSemaphore")
    }
}

impl Drop for TimelineSemaphore {
    fn drop(&mut self) {
        // SAFETY: owners retire all work that uses the semaphore before dropping it.
        unsafe { self.device.raw().destroy_semaphore(self.raw, None) };
    }
}
