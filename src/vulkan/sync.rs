//! Timeline semaphores: the context's own (optionally exportable as
//! `OPAQUE_FD`, `OPAQUE_WIN32` on Windows), imported from a file descriptor (or
//! Windows handle), or the caller's, borrowed.

use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::handle::{self, ExternalHandle};
use crate::vulkan::caps::timeline_export_support;
use crate::vulkan::device::Device;
use crate::vulkan::external::{self, EXTERNAL_SEMAPHORE_HANDLE_TYPE as HANDLE, HANDLE_TYPE_NAME};

/// A timeline semaphore. Destroyed in `Drop` unless borrowed.
pub(crate) struct TimelineSemaphore {
    raw: vk::Semaphore,
    exportable: bool,
    owned: bool,
    device: Arc<Device>,
}

impl TimelineSemaphore {
    /// A timeline semaphore starting at `initial`; exportable when asked (checked first).
    pub(crate) fn new(device: &Arc<Device>, initial: u64, exportable: bool) -> Result<Self> {
        if exportable {
            timeline_export_support(device)?;
        }
        let raw = create(device, initial, exportable)?;
        Ok(Self { raw, exportable, owned: true, device: Arc::clone(device) })
    }

    /// A semaphore whose payload is the timeline exported as `handle` by another
    /// device (or another process). On success a descriptor belongs to the
    /// semaphore (Linux) and a Windows handle is closed; on failure it is closed.
    pub(crate) fn import(device: &Arc<Device>, handle: ExternalHandle) -> Result<Self> {
        timeline_export_support(device)?;
        let loader = device
            .semaphore_ext
            .as_ref()
            .ok_or_else(|| Error::internal(format!("import without {}", external::SEMAPHORE_EXTENSION_NAME)))?;
        let raw = create(device, 0, false)?;
        // SAFETY: raw is a fresh timeline semaphore of this device.
        match unsafe { external::import_semaphore(loader, raw, &handle) } {
            Ok(()) => {
                handle::imported(handle);
                Ok(Self { raw, exportable: false, owned: true, device: Arc::clone(device) })
            }
            Err(result) => {
                // SAFETY: the semaphore is unused.
                unsafe { device.raw().destroy_semaphore(raw, None) };
                Err(match result {
                    vk::Result::ERROR_INVALID_EXTERNAL_HANDLE => Error::InvalidArgument(format!(
                        "the driver refused the semaphore {} ({result}): it is not a timeline semaphore exported \
                         as {HANDLE_TYPE_NAME} by a device of the same driver (binary semaphores cannot be used)",
                        handle::HANDLE_WORD
                    )),
                    result => Error::Vulkan { call: external::IMPORT_SEMAPHORE_CALL, result },
                })
            }
        }
    }

    /// Wraps the caller's timeline semaphore without taking it over.
    ///
    /// # Safety
    /// `raw` must be a timeline semaphore of `device` that outlives the returned value.
    pub(crate) unsafe fn borrowed(device: &Arc<Device>, raw: vk::Semaphore) -> Self {
        Self { raw, exportable: false, owned: false, device: Arc::clone(device) }
    }

    /// As [`borrowed`](Self::borrowed), for a semaphore its owner created exportable
    /// (`VkExportSemaphoreCreateInfo` with this platform's handle type), which
    /// [`export`](Self::export) then may export.
    ///
    /// # Safety
    /// As `borrowed`; and `raw` was created with that export info.
    pub(crate) unsafe fn borrowed_exportable(device: &Arc<Device>, raw: vk::Semaphore) -> Result<Self> {
        timeline_export_support(device)?;
        Ok(Self { raw, exportable: true, owned: false, device: Arc::clone(device) })
    }

    /// Exports the semaphore as a new `OPAQUE_FD` (`OPAQUE_WIN32` on Windows).
    pub(crate) fn export(&self) -> Result<ExternalHandle> {
        let loader = match (&self.device.semaphore_ext, self.exportable) {
            (Some(l), true) => l,
            _ => return Err(Error::internal("export of a semaphore that was not created exportable")),
        };
        // SAFETY: the semaphore was created with ExportSemaphoreCreateInfo for this handle type.
        unsafe { external::export_semaphore(loader, self.raw) }
    }

    /// The raw semaphore.
    pub(crate) fn raw(&self) -> vk::Semaphore {
        self.raw
    }

    /// Whether it can be exported.
    pub(crate) fn is_exportable(&self) -> bool {
        self.exportable
    }

    /// The current counter value.
    pub(crate) fn value(&self) -> Result<u64> {
        // SAFETY: the semaphore is a live timeline semaphore of this device.
        unsafe { self.device.raw().get_semaphore_counter_value(self.raw) }.call("vkGetSemaphoreCounterValue")
    }

    /// Waits on the host until the counter reaches `value`, or `timeout` passes.
    /// Returns false on time-out.
    pub(crate) fn wait(&self, value: u64, timeout: Duration) -> Result<bool> {
        let semaphores = [self.raw];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the semaphore is live; the arrays outlive the call.
        match unsafe { self.device.raw().wait_semaphores(&info, ns) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(result) => Err(Error::Vulkan { call: "vkWaitSemaphores", result }),
        }
    }

    /// Signals `value` from the host. Slow to release a CUDA waiter (~10 ms
    /// measured on NVIDIA): the hot path signals from queue submissions instead.
    /// Values at or below the current one are ignored (a timeline only rises).
    pub(crate) fn signal_from_host(&self, value: u64) -> Result<()> {
        if self.value()? >= value {
            return Ok(());
        }
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.raw).value(value);
        // SAFETY: the semaphore is live and value is larger than the current one (checked above;
        // only this process signals from the host).
        unsafe { self.device.raw().signal_semaphore(&info) }.call("vkSignalSemaphore")
    }
}

fn create(device: &Device, initial: u64, exportable: bool) -> Result<vk::Semaphore> {
    let mut ty =
        vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(initial);
    let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(HANDLE);
    let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut ty);
    if exportable {
        info = info.push_next(&mut export);
    }
    // SAFETY: info is valid; export support was checked by the caller.
    unsafe { device.raw().create_semaphore(&info, None) }.call("vkCreateSemaphore")
}

impl Drop for TimelineSemaphore {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: owners retire all work that uses the semaphore before dropping it.
            unsafe { self.device.raw().destroy_semaphore(self.raw, None) };
        }
    }
}

/// A fence, destroyed in `Drop`. The context puts one on each batch of a frame:
/// seeing it signalled is how the host (and the validation layer, which cannot
/// follow signals made by CUDA or another device) learns that the batch is done.
pub(crate) struct Fence {
    raw: vk::Fence,
    device: Arc<Device>,
}

impl Fence {
    /// An unsignalled fence.
    pub(crate) fn new(device: &Arc<Device>) -> Result<Self> {
        // SAFETY: the device is live; the info is valid.
        let raw = unsafe { device.raw().create_fence(&vk::FenceCreateInfo::default(), None) }.call("vkCreateFence")?;
        Ok(Self { raw, device: Arc::clone(device) })
    }

    /// The raw fence.
    pub(crate) fn raw(&self) -> vk::Fence {
        self.raw
    }

    /// Waits for the fence (bounded) and resets it for the next batch. False on time-out.
    pub(crate) fn wait_and_reset(&self, timeout: Duration) -> Result<bool> {
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the fence is live and belongs to this device.
        match unsafe { self.device.raw().wait_for_fences(&[self.raw], true, ns) } {
            Ok(()) => {}
            Err(vk::Result::TIMEOUT) => return Ok(false),
            Err(result) => return Err(Error::Vulkan { call: "vkWaitForFences", result }),
        }
        // SAFETY: the fence is signalled, so no pending batch uses it.
        unsafe { self.device.raw().reset_fences(&[self.raw]) }.call("vkResetFences")?;
        Ok(true)
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // SAFETY: owners wait for the batches that signal it before dropping it.
        unsafe { self.device.raw().destroy_fence(self.raw, None) };
    }
}
