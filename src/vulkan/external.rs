//! The platform's external handle type on the Vulkan side: `OPAQUE_FD` with
//! `VK_KHR_external_memory_fd` / `VK_KHR_external_semaphore_fd` on Unix,
//! `OPAQUE_WIN32` with `VK_KHR_external_memory_win32` /
//! `VK_KHR_external_semaphore_win32` on Windows. Exports and imports of memory
//! and timeline semaphores go through here; [`crate::handle`] says who closes
//! what.

use std::ffi::CStr;

use ash::vk;

use crate::error::{Result, VkResultExt};
use crate::handle::{self, ExternalHandle};

/// The external memory handle type the library exports and imports: `OPAQUE_FD`
/// on Unix, `OPAQUE_WIN32` on Windows. Memory handed to the context must be
/// allocated with `VkExportMemoryAllocateInfo` for this type.
///
/// ```no_run
/// use ash::vk;
///
/// // The renderer's exportable allocation, for this platform's handle type.
/// let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(neural_frame::EXTERNAL_MEMORY_HANDLE_TYPE);
/// let info = vk::MemoryAllocateInfo::default().allocation_size(1 << 20).push_next(&mut export);
/// # let _ = info;
/// ```
#[cfg(unix)]
pub const EXTERNAL_MEMORY_HANDLE_TYPE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
/// The external memory handle type the library exports and imports (Windows: `OPAQUE_WIN32`).
#[cfg(windows)]
pub const EXTERNAL_MEMORY_HANDLE_TYPE: vk::ExternalMemoryHandleTypeFlags =
    vk::ExternalMemoryHandleTypeFlags::OPAQUE_WIN32;

/// The external semaphore handle type of the timelines the library exports and
/// imports: `OPAQUE_FD` on Unix, `OPAQUE_WIN32` on Windows.
#[cfg(unix)]
pub const EXTERNAL_SEMAPHORE_HANDLE_TYPE: vk::ExternalSemaphoreHandleTypeFlags =
    vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;
/// The external semaphore handle type of the timelines the library exports and
/// imports (Windows: `OPAQUE_WIN32`).
#[cfg(windows)]
pub const EXTERNAL_SEMAPHORE_HANDLE_TYPE: vk::ExternalSemaphoreHandleTypeFlags =
    vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_WIN32;

/// The device extension for sharing memory (required):
/// `VK_KHR_external_memory_fd` on Unix, `VK_KHR_external_memory_win32` on
/// Windows. A caller's device ([`CallerDevice`](crate::CallerDevice)) enables it
/// for the CUDA backend and sets `external_memory_fd`.
///
/// ```
/// # #[cfg(unix)]
/// assert_eq!(neural_frame::EXTERNAL_MEMORY_EXTENSION.to_str(), Ok("VK_KHR_external_memory_fd"));
/// ```
#[cfg(unix)]
pub const EXTERNAL_MEMORY_EXTENSION: &CStr = ash::khr::external_memory_fd::NAME;
/// The device extension for sharing memory (Windows: `VK_KHR_external_memory_win32`).
#[cfg(windows)]
pub const EXTERNAL_MEMORY_EXTENSION: &CStr = ash::khr::external_memory_win32::NAME;

/// The device extension for sharing timeline semaphores (optional: without it
/// frames are handed over in host-signalled mode): `VK_KHR_external_semaphore_fd`
/// on Unix, `VK_KHR_external_semaphore_win32` on Windows. A caller's device sets
/// `external_semaphore_fd` when it enabled it.
#[cfg(unix)]
pub const EXTERNAL_SEMAPHORE_EXTENSION: &CStr = ash::khr::external_semaphore_fd::NAME;
/// The device extension for sharing timeline semaphores (Windows: `VK_KHR_external_semaphore_win32`).
#[cfg(windows)]
pub const EXTERNAL_SEMAPHORE_EXTENSION: &CStr = ash::khr::external_semaphore_win32::NAME;

/// The handle type's name in messages.
#[cfg(unix)]
pub(crate) const HANDLE_TYPE_NAME: &str = "OPAQUE_FD";
/// The handle type's name in messages.
#[cfg(windows)]
pub(crate) const HANDLE_TYPE_NAME: &str = "OPAQUE_WIN32";

/// [`EXTERNAL_MEMORY_EXTENSION`] as text, for messages.
#[cfg(unix)]
pub(crate) const MEMORY_EXTENSION_NAME: &str = "VK_KHR_external_memory_fd";
/// [`EXTERNAL_MEMORY_EXTENSION`] as text, for messages.
#[cfg(windows)]
pub(crate) const MEMORY_EXTENSION_NAME: &str = "VK_KHR_external_memory_win32";

/// [`EXTERNAL_SEMAPHORE_EXTENSION`] as text, for messages.
#[cfg(unix)]
pub(crate) const SEMAPHORE_EXTENSION_NAME: &str = "VK_KHR_external_semaphore_fd";
/// [`EXTERNAL_SEMAPHORE_EXTENSION`] as text, for messages.
#[cfg(windows)]
pub(crate) const SEMAPHORE_EXTENSION_NAME: &str = "VK_KHR_external_semaphore_win32";

/// The export calls, for messages.
#[cfg(unix)]
pub(crate) const GET_MEMORY_CALL: &str = "vkGetMemoryFdKHR";
/// The export calls, for messages.
#[cfg(windows)]
pub(crate) const GET_MEMORY_CALL: &str = "vkGetMemoryWin32HandleKHR";
#[cfg(unix)]
const GET_SEMAPHORE_CALL: &str = "vkGetSemaphoreFdKHR";
#[cfg(windows)]
const GET_SEMAPHORE_CALL: &str = "vkGetSemaphoreWin32HandleKHR";
/// The semaphore import call, for messages.
#[cfg(unix)]
pub(crate) const IMPORT_SEMAPHORE_CALL: &str = "vkImportSemaphoreFdKHR";
/// The semaphore import call, for messages.
#[cfg(windows)]
pub(crate) const IMPORT_SEMAPHORE_CALL: &str = "vkImportSemaphoreWin32HandleKHR";

/// The loaded functions of the memory extension.
#[cfg(unix)]
pub(crate) type MemoryLoader = ash::khr::external_memory_fd::Device;
/// The loaded functions of the memory extension.
#[cfg(windows)]
pub(crate) type MemoryLoader = ash::khr::external_memory_win32::Device;

/// The loaded functions of the semaphore extension.
#[cfg(unix)]
pub(crate) type SemaphoreLoader = ash::khr::external_semaphore_fd::Device;
/// The loaded functions of the semaphore extension.
#[cfg(windows)]
pub(crate) type SemaphoreLoader = ash::khr::external_semaphore_win32::Device;

/// What `vkAllocateMemory` chains to import memory from a handle.
#[cfg(unix)]
pub(crate) type ImportMemoryInfo = vk::ImportMemoryFdInfoKHR<'static>;
/// What `vkAllocateMemory` chains to import memory from a handle.
#[cfg(windows)]
pub(crate) type ImportMemoryInfo = vk::ImportMemoryWin32HandleInfoKHR<'static>;

/// The import struct for `handle`, which stays open (see [`handle::imported`]
/// for what happens to it after a successful allocation).
#[cfg(unix)]
pub(crate) fn import_memory_info(handle: &ExternalHandle) -> ImportMemoryInfo {
    ImportMemoryInfo::default().handle_type(EXTERNAL_MEMORY_HANDLE_TYPE).fd(handle::raw(handle))
}

/// The import struct for `handle`, which stays open (see [`handle::imported`]
/// for what happens to it after a successful allocation).
#[cfg(windows)]
pub(crate) fn import_memory_info(handle: &ExternalHandle) -> ImportMemoryInfo {
    ImportMemoryInfo::default().handle_type(EXTERNAL_MEMORY_HANDLE_TYPE).handle(handle::raw(handle) as vk::HANDLE)
}

/// Exports `memory` as a new handle.
///
/// # Safety
/// `memory` must be a live allocation of the device `loader` was loaded for,
/// made with `VkExportMemoryAllocateInfo` for [`EXTERNAL_MEMORY_HANDLE_TYPE`].
pub(crate) unsafe fn export_memory(loader: &MemoryLoader, memory: vk::DeviceMemory) -> Result<ExternalHandle> {
    #[cfg(unix)]
    let raw = {
        let get = vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(EXTERNAL_MEMORY_HANDLE_TYPE);
        // SAFETY: memory is exportable as this type (the caller's contract).
        unsafe { loader.get_memory_fd(&get) }.call(GET_MEMORY_CALL)?
    };
    #[cfg(windows)]
    let raw = {
        let get = vk::MemoryGetWin32HandleInfoKHR::default().memory(memory).handle_type(EXTERNAL_MEMORY_HANDLE_TYPE);
        // SAFETY: memory is exportable as this type (the caller's contract).
        unsafe { loader.get_memory_win32_handle(&get) }.call(GET_MEMORY_CALL)? as handle::RawExternalHandle
    };
    // SAFETY: the export call returns a new descriptor (or NT handle) owned by the caller.
    unsafe { handle::from_raw(raw) }
}

/// Exports `semaphore` as a new handle.
///
/// # Safety
/// `semaphore` must be a live semaphore of the device `loader` was loaded for,
/// created with `VkExportSemaphoreCreateInfo` for [`EXTERNAL_SEMAPHORE_HANDLE_TYPE`].
pub(crate) unsafe fn export_semaphore(loader: &SemaphoreLoader, semaphore: vk::Semaphore) -> Result<ExternalHandle> {
    #[cfg(unix)]
    let raw = {
        let get = vk::SemaphoreGetFdInfoKHR::default().semaphore(semaphore).handle_type(EXTERNAL_SEMAPHORE_HANDLE_TYPE);
        // SAFETY: the semaphore is exportable as this type (the caller's contract).
        unsafe { loader.get_semaphore_fd(&get) }.call(GET_SEMAPHORE_CALL)?
    };
    #[cfg(windows)]
    let raw = {
        let get = vk::SemaphoreGetWin32HandleInfoKHR::default()
            .semaphore(semaphore)
            .handle_type(EXTERNAL_SEMAPHORE_HANDLE_TYPE);
        // SAFETY: the semaphore is exportable as this type (the caller's contract).
        unsafe { loader.get_semaphore_win32_handle(&get) }.call(GET_SEMAPHORE_CALL)? as handle::RawExternalHandle
    };
    // SAFETY: the export call returns a new descriptor (or NT handle) owned by the caller.
    unsafe { handle::from_raw(raw) }
}

/// Imports the timeline exported as `handle` into `semaphore` (permanently).
/// `handle` stays open: on success pass it to [`handle::imported`].
///
/// # Safety
/// `semaphore` must be an unused timeline semaphore of the device `loader` was loaded for.
pub(crate) unsafe fn import_semaphore(
    loader: &SemaphoreLoader,
    semaphore: vk::Semaphore,
    handle: &ExternalHandle,
) -> std::result::Result<(), vk::Result> {
    #[cfg(unix)]
    {
        let info = vk::ImportSemaphoreFdInfoKHR::default()
            .semaphore(semaphore)
            .handle_type(EXTERNAL_SEMAPHORE_HANDLE_TYPE)
            .fd(handle::raw(handle));
        // SAFETY: an unused semaphore of this device (the caller's contract); the struct outlives the call.
        unsafe { loader.import_semaphore_fd(&info) }
    }
    #[cfg(windows)]
    {
        let info = vk::ImportSemaphoreWin32HandleInfoKHR::default()
            .semaphore(semaphore)
            .handle_type(EXTERNAL_SEMAPHORE_HANDLE_TYPE)
            .handle(handle::raw(handle) as vk::HANDLE);
        // SAFETY: an unused semaphore of this device (the caller's contract); the struct outlives the call.
        unsafe { loader.import_semaphore_win32_handle(&info) }
    }
}
