//! The operating system's handle to shared memory and semaphores: a file
//! descriptor on Linux (`OPAQUE_FD`), an NT handle on Windows (`OPAQUE_WIN32`).
//! The one place where the two differ; the rest of the library names
//! [`ExternalHandle`] and the helpers here.
//!
//! # Who closes a handle
//!
//! - Linux: a successful Vulkan or CUDA import owns the descriptor (it is not
//!   closed here); a failed one leaves it with its owner.
//! - Windows: neither Vulkan nor CUDA takes ownership of an NT handle. The
//!   library closes every handle it was given or exported itself once the
//!   import is done, whatever the outcome; a caller that wants to keep using
//!   its handle passes a duplicate (`OwnedHandle::try_clone`).

use crate::error::{Error, Result};

/// A handle to memory or a timeline semaphore exported from Vulkan: what the
/// import calls take ([`MemoryImport::fd`](crate::MemoryImport::fd),
/// [`SemaphoreImport::fd`](crate::SemaphoreImport::fd)) and
/// [`export_timelines`](crate::NeuralFrameContext::export_timelines) returns.
///
/// On Unix it is [`std::os::fd::OwnedFd`] (`OPAQUE_FD`, from `vkGetMemoryFdKHR`
/// or `vkGetSemaphoreFdKHR`), so code that passes an `OwnedFd` keeps compiling.
/// On Windows it is `std::os::windows::io::OwnedHandle` (`OPAQUE_WIN32`, an NT
/// handle from `vkGetMemoryWin32HandleKHR` or `vkGetSemaphoreWin32HandleKHR`).
/// Vulkan and CUDA take ownership of a descriptor on Linux but never of a
/// Windows handle: there the library closes the handle it was given once it has
/// imported it (see [`EXTERNAL_MEMORY_HANDLE_TYPE`](crate::EXTERNAL_MEMORY_HANDLE_TYPE)
/// for the Vulkan handle types).
///
/// ```no_run
/// # #[cfg(unix)] {
/// use std::os::fd::OwnedFd;
///
/// fn takes(handle: neural_frame::ExternalHandle) -> OwnedFd {
///     handle // the same type on Unix
/// }
/// # }
/// ```
#[cfg(unix)]
pub type ExternalHandle = std::os::fd::OwnedFd;

/// A handle to memory or a timeline semaphore exported from Vulkan (Windows:
/// an NT handle, `OPAQUE_WIN32`). See the Unix documentation for the rules;
/// on Windows neither Vulkan nor CUDA takes ownership of the handle, and the
/// library closes the one it was given once it has imported it.
#[cfg(windows)]
pub type ExternalHandle = std::os::windows::io::OwnedHandle;

#[cfg(not(any(unix, windows)))]
compile_error!("neural-frame shares memory and semaphores through Unix file descriptors or Windows handles only");

/// The raw value of an [`ExternalHandle`] as the Vulkan and CUDA structs take it.
#[cfg(unix)]
pub(crate) type RawExternalHandle = std::os::fd::RawFd;
/// The raw value of an [`ExternalHandle`] as the Vulkan and CUDA structs take it.
#[cfg(windows)]
pub(crate) type RawExternalHandle = std::os::windows::io::RawHandle;

/// What a handle is called in messages: "file descriptor" or "handle".
#[cfg(unix)]
pub(crate) const HANDLE_WORD: &str = "file descriptor";
/// What a handle is called in messages: "file descriptor" or "handle".
#[cfg(windows)]
pub(crate) const HANDLE_WORD: &str = "handle";

/// The raw value, still owned by `handle`.
#[cfg(unix)]
pub(crate) fn raw(handle: &ExternalHandle) -> RawExternalHandle {
    std::os::fd::AsRawFd::as_raw_fd(handle)
}

/// The raw value, still owned by `handle`.
#[cfg(windows)]
pub(crate) fn raw(handle: &ExternalHandle) -> RawExternalHandle {
    std::os::windows::io::AsRawHandle::as_raw_handle(handle)
}

/// Takes ownership of a raw descriptor an export call returned.
///
/// # Safety
/// `raw` must be an open descriptor that nothing else owns.
#[cfg(unix)]
pub(crate) unsafe fn from_raw(raw: RawExternalHandle) -> Result<ExternalHandle> {
    if raw < 0 {
        return Err(Error::internal("an export returned no file descriptor"));
    }
    // SAFETY: an open descriptor owned by no one else (the caller's contract), not negative.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(raw) })
}

/// Takes ownership of a raw NT handle an export call returned.
///
/// # Safety
/// `raw` must be an open NT handle that nothing else owns.
#[cfg(windows)]
pub(crate) unsafe fn from_raw(raw: RawExternalHandle) -> Result<ExternalHandle> {
    if raw.is_null() {
        return Err(Error::internal("an export returned a null handle"));
    }
    // SAFETY: an open NT handle owned by no one else (the caller's contract), not null.
    Ok(unsafe { std::os::windows::io::FromRawHandle::from_raw_handle(raw) })
}

/// After a successful import into Vulkan or CUDA: the descriptor now belongs to
/// the driver (Linux), so it is let go without being closed.
#[cfg(unix)]
pub(crate) fn imported(handle: ExternalHandle) {
    let _ = std::os::fd::IntoRawFd::into_raw_fd(handle);
}

/// After an import into Vulkan or CUDA: the import took a reference of its own
/// (neither takes ownership of a Windows handle), so the handle is closed.
#[cfg(windows)]
pub(crate) fn imported(handle: ExternalHandle) {
    drop(handle);
}

/// A new handle to the same object (`dup` / `DuplicateHandle`), for an import
/// that must leave the original with its owner. `what` names the object in the error.
pub(crate) fn duplicate(handle: &ExternalHandle, what: &str) -> Result<ExternalHandle> {
    handle.try_clone().map_err(|e| Error::Io { what: format!("duplicating {what}'s {HANDLE_WORD}"), source: e })
}
