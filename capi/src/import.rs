//! Import by file descriptor (POSIX, `OPAQUE_FD`) or NT handle (Windows,
//! `OPAQUE_WIN32`): memory and timeline semaphores the caller exported, for a context
//! of its own on the exporter's physical device; and the context's own timelines
//! exported the same way. On POSIX a successful import owns the descriptor and a
//! failed one leaves it open and the caller's; on Windows the library closes the
//! handle once it is imported (Vulkan and CUDA never own one), and a failed import
//! leaves it open and the caller's.

#[cfg(unix)]
use std::os::fd::{FromRawFd, IntoRawFd};
#[cfg(windows)]
use std::os::windows::io::{FromRawHandle, IntoRawHandle};

use neural_frame::ExternalHandle;

use neural_frame::ash::vk;
use neural_frame::{BufferImport, DeviceIdentity, ImageImport, ImportError, MemoryImport, SemaphoreImport};

use crate::context::{context, nf_context, nf_input, nf_output, nf_timeline};
use crate::register::{nf_pixel_layout, pixel_layout, register};
use crate::{Fail, Versioned, guard, nf_status, non_null};

/// What memory and semaphores are shared by: a file descriptor on POSIX
/// (`OPAQUE_FD`), an NT `HANDLE` on Windows (`OPAQUE_WIN32`).
#[cfg(unix)]
pub type nf_external_handle = std::ffi::c_int;
/// What memory and semaphores are shared by: a file descriptor on POSIX
/// (`OPAQUE_FD`), an NT `HANDLE` on Windows (`OPAQUE_WIN32`).
#[cfg(windows)]
pub type nf_external_handle = *mut std::ffi::c_void;

/// Whether a handle value can name nothing: a negative descriptor, a NULL handle.
#[cfg(unix)]
fn is_none(h: nf_external_handle) -> bool {
    h < 0
}
#[cfg(windows)]
fn is_none(h: nf_external_handle) -> bool {
    h.is_null()
}

/// The owned handle of a raw value the caller hands over.
///
/// # Safety
/// `h` names an open descriptor or handle that nobody else closes.
#[cfg(unix)]
unsafe fn owned(h: nf_external_handle) -> ExternalHandle {
    // SAFETY: the caller's contract.
    unsafe { ExternalHandle::from_raw_fd(h) }
}
#[cfg(windows)]
unsafe fn owned(h: nf_external_handle) -> ExternalHandle {
    // SAFETY: the caller's contract.
    unsafe { ExternalHandle::from_raw_handle(h) }
}

/// The raw value of a handle that becomes the caller's.
#[cfg(unix)]
fn raw(h: ExternalHandle) -> nf_external_handle {
    h.into_raw_fd()
}
#[cfg(windows)]
fn raw(h: ExternalHandle) -> nf_external_handle {
    h.into_raw_handle()
}

/// Memory the caller exported with `vkGetMemoryFdKHR` (`OPAQUE_FD`), and how it was
/// allocated: the importer repeats the allocation exactly. The exporter's device is named
/// by its `deviceUUID` and `driverUUID` (`VkPhysicalDeviceIDProperties`); an import is
/// refused unless both equal the context's (`nf_context_device_identity`). Embedded in
/// `nf_image_import` and `nf_buffer_import`: fixed, it never grows (new fields go at the end
/// of the struct that embeds it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_memory_import {
    /// The descriptor (Windows: the NT handle): the context's once an import succeeds,
    /// still the caller's after a failure.
    pub fd: nf_external_handle,
    /// `VkMemoryAllocateInfo::allocationSize`.
    pub allocation_size: u64,
    /// `VkMemoryAllocateInfo::memoryTypeIndex`.
    pub memory_type_index: u32,
    /// Whether it was a dedicated allocation for the image or buffer.
    pub dedicated: bool,
    /// The exporter's `deviceUUID`.
    pub device_uuid: [u8; 16],
    /// The exporter's `driverUUID`.
    pub driver_uuid: [u8; 16],
}

/// An image whose memory the caller exported (a context of its own on the exporter's
/// physical device). A versioned struct: `nf_image_import i = NF_IMAGE_IMPORT_INIT;`.
///
/// What is transferred: the descriptor (`memory.fd`) becomes the context's once the import
/// succeeds (Vulkan owns it: the caller neither closes nor reuses it; on Windows the library
/// closes the handle); the memory itself is shared, not moved: the caller keeps its own
/// image and memory, and the context makes an image of the same description over its own
/// import of the memory, released when the registration is unregistered and its frames are
/// done (or the context is freed). A failed import leaves the descriptor open and the
/// caller's.
///
/// Layout and queue family, per frame: the image is in `VK_IMAGE_LAYOUT_GENERAL` on both
/// sides, and ownership moves through `VK_QUEUE_FAMILY_EXTERNAL`. An input: after writing
/// it, the caller releases it (a barrier from its queue family to `VK_QUEUE_FAMILY_EXTERNAL`,
/// new layout `GENERAL`) before the frame's wait is reached; the pre pass acquires it, reads
/// it, and releases it back to `VK_QUEUE_FAMILY_EXTERNAL`; after "input consumed" the caller
/// acquires it (`VK_QUEUE_FAMILY_EXTERNAL` to its family, from `GENERAL`). An output: the
/// caller releases it in `GENERAL` before handing it over (before the frame's
/// `output_free_timeline` value, or `nf_context_submit`), the post pass acquires it, writes
/// it (what it held is kept where the pass does not write) and releases it; after "output
/// ready" the caller acquires it from `GENERAL`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_image_import {
    /// `sizeof(nf_image_import)` as the caller's header has it (`NF_IMAGE_IMPORT_INIT`).
    pub struct_size: u32,
    /// The memory.
    pub memory: nf_memory_import,
    /// The image's `VkFormat`.
    pub format: i32,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The `VkImageUsageFlags` it was created with.
    pub usage: u32,
    /// Its `VkImageTiling`.
    pub tiling: i32,
    /// Padding to the struct's end (0): later fields start at its size.
    pub reserved: u32,
}

/// A linear buffer whose memory the caller exported: the descriptor and the memory as for
/// `nf_image_import`, and ownership moves through `VK_QUEUE_FAMILY_EXTERNAL` the same way
/// (buffer barriers, no layout). A versioned struct (`NF_BUFFER_IMPORT_INIT`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_buffer_import {
    /// `sizeof(nf_buffer_import)` as the caller's header has it (`NF_BUFFER_IMPORT_INIT`).
    pub struct_size: u32,
    /// The memory.
    pub memory: nf_memory_import,
    /// The buffer's size (`VkBufferCreateInfo::size`).
    pub size: u64,
    /// The `VkBufferUsageFlags` it was created with (`STORAGE_BUFFER` for the passes).
    pub usage: u32,
    /// How the pixels lie in it.
    pub layout: nf_pixel_layout,
}

/// A timeline semaphore the caller exported with `vkGetSemaphoreFdKHR` (`OPAQUE_FD`). The
/// descriptor becomes the context's once the import succeeds (as for `nf_image_import`); the
/// semaphore is shared: the caller keeps signalling its own. A versioned struct
/// (`NF_SEMAPHORE_IMPORT_INIT`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_semaphore_import {
    /// `sizeof(nf_semaphore_import)` as the caller's header has it (`NF_SEMAPHORE_IMPORT_INIT`).
    pub struct_size: u32,
    /// The descriptor (Windows: the NT handle): the context's once the import succeeds,
    /// still the caller's after a failure.
    pub fd: nf_external_handle,
    /// The `VkSemaphoreType` it was created with: only `VK_SEMAPHORE_TYPE_TIMELINE` (1)
    /// imports (Vulkan cannot tell the importer).
    pub semaphore_type: i32,
    /// The exporter's `deviceUUID`.
    pub device_uuid: [u8; 16],
    /// The exporter's `driverUUID`.
    pub driver_uuid: [u8; 16],
    /// Padding to a multiple of 8 bytes (0): later fields start at the struct's size.
    pub reserved: u32,
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid (descriptor 0 is refused later
// only where it is not open; it is an integer).
unsafe impl Versioned for nf_image_import {
    const NAME: &'static str = "nf_image_import";
    const INIT: &'static str = "NF_IMAGE_IMPORT_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_image_import>();
}

// SAFETY: as above.
unsafe impl Versioned for nf_buffer_import {
    const NAME: &'static str = "nf_buffer_import";
    const INIT: &'static str = "NF_BUFFER_IMPORT_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_buffer_import>();
}

// SAFETY: as above.
unsafe impl Versioned for nf_semaphore_import {
    const NAME: &'static str = "nf_semaphore_import";
    const INIT: &'static str = "NF_SEMAPHORE_IMPORT_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_semaphore_import>();
}

/// Takes the caller's descriptor or handle. Called only once every other check has
/// passed: from here on the library owns it, and gives it back on failure.
fn take_fd(fd: nf_external_handle) -> Result<ExternalHandle, Fail> {
    if is_none(fd) {
        return Err(Fail::invalid(format!("{fd:?} is not a file descriptor or handle")));
    }
    // SAFETY: a descriptor the caller hands over (the import's contract); on failure it goes
    // back with `give_back`.
    Ok(unsafe { owned(fd) })
}

/// A failed import: the descriptor goes back to the caller, open, and the error to C.
pub(crate) fn give_back(failed: ImportError) -> Fail {
    let fail = Fail::of(failed.error());
    let _still_the_callers = raw(failed.into_fd());
    fail
}

pub(crate) fn memory_import(m: &nf_memory_import) -> Result<MemoryImport, Fail> {
    Ok(MemoryImport {
        fd: take_fd(m.fd)?,
        allocation_size: m.allocation_size,
        memory_type_index: m.memory_type_index,
        dedicated: m.dedicated,
        origin: DeviceIdentity { device_uuid: m.device_uuid, driver_uuid: m.driver_uuid },
    })
}

fn image_import(i: &nf_image_import) -> Result<ImageImport, Fail> {
    Ok(ImageImport {
        format: vk::Format::from_raw(i.format),
        width: i.width,
        height: i.height,
        usage: vk::ImageUsageFlags::from_raw(i.usage),
        tiling: vk::ImageTiling::from_raw(i.tiling),
        memory: memory_import(&i.memory)?,
    })
}

fn buffer_import(b: &nf_buffer_import) -> Result<BufferImport, Fail> {
    Ok(BufferImport {
        size: b.size,
        usage: vk::BufferUsageFlags::from_raw(b.usage),
        layout: pixel_layout(&b.layout),
        memory: memory_import(&b.memory)?,
    })
}

/// Imports an image the caller exported as an input (a context of its own, on the
/// exporter's physical device). The descriptor is the context's once this succeeds
/// (it closes it); after a failure it is still open and the caller's.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `import` or `out` is NULL, the
/// descriptor is negative (Windows: NULL), the device or driver UUID is not the context's, or the
/// description does not fit the frame (format, size, usage, tiling; the message says which);
/// `NF_STATUS_STRUCT_SIZE` where `import->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where
/// the device cannot import or use it, or a newer header's field is set; `NF_STATUS_VULKAN`: the
/// import failed (a descriptor that is not exported memory); `NF_STATUS_CUDA`: CUDA could not
/// import it; `NF_STATUS_INTERNAL`: a bug. On every failure the descriptor is still open and the
/// caller's.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `import`
/// is NULL or describes exported memory as it was allocated, its descriptor open and
/// not used elsewhere during the call; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_import_input_image(
    c: *mut nf_context,
    import: *const nf_image_import,
    out: *mut nf_input,
) -> nf_status {
    let make = |c: &mut nf_context, import: &nf_image_import| {
        let id = c.ctx.import_input_image(image_import(import)?).map_err(give_back)?;
        Ok(c.ids.add_input(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, import, "import", out, make) }
}

/// Imports an image the caller exported as an output; see `nf_context_import_input_image`.
///
/// Status: as `nf_context_import_input_image`.
///
/// # Safety
/// As `nf_context_import_input_image`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_import_output_image(
    c: *mut nf_context,
    import: *const nf_image_import,
    out: *mut nf_output,
) -> nf_status {
    let make = |c: &mut nf_context, import: &nf_image_import| {
        let id = c.ctx.import_output_image(image_import(import)?).map_err(give_back)?;
        Ok(c.ids.add_output(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, import, "import", out, make) }
}

/// Imports a linear buffer the caller exported as an input (where the model takes it
/// as it is, the buffer itself is the model's input); see `nf_context_import_input_image`.
///
/// Status: as `nf_context_import_input_image` (the buffer's size, usage and layout instead of the
/// image's).
///
/// # Safety
/// As `nf_context_import_input_image`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_import_input_buffer(
    c: *mut nf_context,
    import: *const nf_buffer_import,
    out: *mut nf_input,
) -> nf_status {
    let make = |c: &mut nf_context, import: &nf_buffer_import| {
        let id = c.ctx.import_input_buffer(buffer_import(import)?).map_err(give_back)?;
        Ok(c.ids.add_input(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, import, "import", out, make) }
}

/// Imports a linear buffer the caller exported as an output; see
/// `nf_context_import_input_image`.
///
/// Status: as `nf_context_import_input_buffer`.
///
/// # Safety
/// As `nf_context_import_input_image`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_import_output_buffer(
    c: *mut nf_context,
    import: *const nf_buffer_import,
    out: *mut nf_output,
) -> nf_status {
    let make = |c: &mut nf_context, import: &nf_buffer_import| {
        let id = c.ctx.import_output_buffer(buffer_import(import)?).map_err(give_back)?;
        Ok(c.ids.add_output(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, import, "import", out, make) }
}

/// Imports a timeline semaphore the caller exported, for frames to wait on
/// (`NF_SYNC_GPU` only). The descriptor is the context's once this succeeds; after a
/// failure it is still open and the caller's.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `import` or `out` is NULL, the
/// descriptor is negative, the semaphore is not a timeline, or its device or driver UUID is not
/// the context's; `NF_STATUS_STRUCT_SIZE` where `import->struct_size` is not set;
/// `NF_STATUS_UNSUPPORTED` in `NF_SYNC_HOST`, where the device cannot import semaphores, or
/// where a newer header's field is set; `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`: the import
/// failed; `NF_STATUS_INTERNAL`: a bug. On every failure the descriptor is still open and the
/// caller's.
///
/// # Safety
/// As `nf_context_import_input_image`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_import_timeline(
    c: *mut nf_context,
    import: *const nf_semaphore_import,
    out: *mut nf_timeline,
) -> nf_status {
    let make = |c: &mut nf_context, import: &nf_semaphore_import| {
        let semaphore_type = vk::SemaphoreType::from_raw(import.semaphore_type);
        let origin = DeviceIdentity { device_uuid: import.device_uuid, driver_uuid: import.driver_uuid };
        let import = SemaphoreImport { fd: take_fd(import.fd)?, semaphore_type, origin };
        let id = c.ctx.import_timeline(import).map_err(give_back)?;
        Ok(c.ids.add_timeline(id))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, import, "import", out, make) }
}

/// The context's "input consumed" and "output ready" timelines as new file descriptors
/// (`OPAQUE_FD`; Windows: NT handles, `OPAQUE_WIN32`), for a caller on another device to
/// import once (`vkImportSemaphoreFdKHR`, which then owns the descriptor; a Windows handle
/// stays the caller's to close after `vkImportSemaphoreWin32HandleKHR`) and wait on for
/// each ticket's value. Both are the caller's to close where it does not import them.
/// Needs `NF_SYNC_GPU` on a context of its own.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `input_consumed` or
/// `output_ready` is NULL; `NF_STATUS_UNSUPPORTED` in `NF_SYNC_HOST`, or where the timelines
/// are not exportable (`VK_KHR_external_semaphore_fd` not enabled; on the caller's device the
/// tickets' semaphores are the caller's already); `NF_STATUS_VULKAN`: the export failed;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context; `input_consumed` and `output_ready` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_export_timelines(
    c: *mut nf_context,
    input_consumed: *mut nf_external_handle,
    output_ready: *mut nf_external_handle,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(input_consumed, "input_consumed")?;
        non_null(output_ready, "output_ready")?;
        let t = c.ctx.export_timelines()?;
        // SAFETY: both writable (the caller's contract); the descriptors become the caller's.
        unsafe {
            *input_consumed = raw(t.input_consumed);
            *output_ready = raw(t.output_ready);
        }
        Ok(())
    })
}
