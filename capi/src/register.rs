//! Registering what frames read and write: the caller's images, buffers and timeline
//! semaphores by handle (on the caller's device), the context's own images for tools;
//! uploads and readbacks of those; unregistering. By file descriptor: `import.rs`.

use neural_frame::ash::vk::{self, Handle};
use neural_frame::{CallerBuffer, CallerImage, CallerMemory, PixelLayout};

use crate::context::{context, nf_context, nf_input, nf_output, nf_timeline};
use crate::{Fail, Versioned, guard, nf_status, non_null, put, read_versioned};

/// The usage an input image needs (`VK_IMAGE_USAGE_SAMPLED_BIT`): the pre pass samples it.
pub const NF_INPUT_IMAGE_USAGE: u32 = 0x4;
/// The usage an output image needs (`VK_IMAGE_USAGE_STORAGE_BIT`): the post pass writes it.
pub const NF_OUTPUT_IMAGE_USAGE: u32 = 0x8;

/// One of the caller's images, by handle (a context on the caller's device). A versioned
/// struct: `nf_caller_image i = NF_CALLER_IMAGE_INIT;` sets `struct_size` and zeroes the rest.
///
/// Inputs: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM`/`_SRGB` or `R16G16B16A16_SFLOAT` (and,
/// for a model's extra inputs, `R16_SFLOAT`, `R32_SFLOAT`, `R16G16_SFLOAT`, `R32G32_SFLOAT`,
/// `R32G32B32A32_SFLOAT`), of the frame size, with `NF_INPUT_IMAGE_USAGE`. Layout: the image
/// is in `layout` (`VK_IMAGE_LAYOUT_GENERAL` or `_SHADER_READ_ONLY_OPTIMAL`) when the frame's
/// `wait_timeline` value is reached (the caller's submission that signals it transitions it
/// there first), or at `nf_context_submit` for a frame without a wait; the pre pass samples
/// it in that layout and leaves it so (after "input consumed" it is still in `layout`).
///
/// Outputs: `R8G8B8A8_UNORM` or `R16G16B16A16_SFLOAT`, of the output size, with
/// `NF_OUTPUT_IMAGE_USAGE`. Layout: at `nf_context_submit` (and until the frame's
/// `output_free_timeline` value) the image may be in any layout: the post pass transitions
/// it from `VK_IMAGE_LAYOUT_UNDEFINED` (what it held is discarded) to `GENERAL`, writes it,
/// and transitions it to `layout` (any layout but `UNDEFINED` and `PREINITIALIZED`), which it
/// is in once "output ready" is reached. Registered with its memory
/// (`nf_context_register_output_image_with_memory`) on the CUDA backend, where CUDA writes it
/// in place, `layout` must be `GENERAL` and the image stays in `GENERAL` throughout (any
/// other layout makes its frames take the Vulkan passes, logged).
///
/// Ownership: the image stays the caller's (never destroyed by the context); it is used on
/// the context's queue family (or created with `VK_SHARING_MODE_CONCURRENT`): the context
/// records no queue family transfer for it, and the caller records none either.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_caller_image {
    /// `sizeof(nf_caller_image)` as the caller's header has it (`NF_CALLER_IMAGE_INIT`).
    pub struct_size: u32,
    /// The `VkImage`.
    pub image: u64,
    /// Its `VkFormat`.
    pub format: i32,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The `VkImageUsageFlags` it was created with.
    pub usage: u32,
    /// Its `VkImageTiling`.
    pub tiling: i32,
    /// The `VkImageLayout` it is in when handed over (inputs: when the frame's wait is
    /// reached) or comes back in (outputs: when "output ready" is reached).
    pub layout: i32,
}

/// The memory one of the caller's images is bound to (at offset 0), allocated exportable
/// (`VkExportMemoryAllocateInfo` with `OPAQUE_FD`, on a device with
/// `VK_KHR_external_memory_fd`): with it the CUDA backend's passes reach the image. The
/// memory stays the caller's. A versioned struct (`NF_CALLER_MEMORY_INIT`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_caller_memory {
    /// `sizeof(nf_caller_memory)` as the caller's header has it (`NF_CALLER_MEMORY_INIT`).
    pub struct_size: u32,
    /// The `VkDeviceMemory`.
    pub memory: u64,
    /// `VkMemoryAllocateInfo::allocationSize`.
    pub allocation_size: u64,
    /// Whether it is a dedicated allocation for the image.
    pub dedicated: bool,
    /// Padding to the struct's end (0): later fields start at its size.
    pub reserved: [u8; 7],
}

/// How pixels lie in a linear buffer: `height` rows of `width` pixels, `row_pitch` bytes
/// apart (a multiple of 4, at least width times the bytes per pixel), from offset 0.
/// Formats: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM`/`_SRGB` or `R16G16B16A16_SFLOAT`
/// (outputs: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM` or `R16G16B16A16_SFLOAT`). Embedded
/// in `nf_caller_buffer` and `nf_buffer_import`: fixed, it never grows (new fields go at the
/// end of the struct that embeds it).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_pixel_layout {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Bytes from one row to the next.
    pub row_pitch: u64,
    /// The pixels' `VkFormat`.
    pub format: i32,
}

/// One of the caller's linear buffers, by handle (a context on the caller's device). No
/// layout; used on the context's queue family (or `VK_SHARING_MODE_CONCURRENT`), no queue
/// family transfer. Stays the caller's. A versioned struct (`NF_CALLER_BUFFER_INIT`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nf_caller_buffer {
    /// `sizeof(nf_caller_buffer)` as the caller's header has it (`NF_CALLER_BUFFER_INIT`).
    pub struct_size: u32,
    /// The `VkBuffer`.
    pub buffer: u64,
    /// Its size in bytes (at least `row_pitch` times `height`).
    pub size: u64,
    /// The `VkBufferUsageFlags` it was created with (`STORAGE_BUFFER` is needed).
    pub usage: u32,
    /// How the pixels lie in it.
    pub layout: nf_pixel_layout,
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid.
unsafe impl Versioned for nf_caller_image {
    const NAME: &'static str = "nf_caller_image";
    const INIT: &'static str = "NF_CALLER_IMAGE_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_caller_image>();
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid.
unsafe impl Versioned for nf_caller_memory {
    const NAME: &'static str = "nf_caller_memory";
    const INIT: &'static str = "NF_CALLER_MEMORY_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_caller_memory>();
}

// SAFETY: #[repr(C)], `struct_size` first; all-zero is valid.
unsafe impl Versioned for nf_caller_buffer {
    const NAME: &'static str = "nf_caller_buffer";
    const INIT: &'static str = "NF_CALLER_BUFFER_INIT";
    const FIRST_SIZE: usize = std::mem::size_of::<nf_caller_buffer>();
}

fn caller_image(i: &nf_caller_image) -> Result<CallerImage, Fail> {
    if i.image == 0 {
        return Err(Fail::invalid("the image is VK_NULL_HANDLE"));
    }
    Ok(CallerImage {
        image: vk::Image::from_raw(i.image),
        format: vk::Format::from_raw(i.format),
        width: i.width,
        height: i.height,
        usage: vk::ImageUsageFlags::from_raw(i.usage),
        tiling: vk::ImageTiling::from_raw(i.tiling),
        layout: vk::ImageLayout::from_raw(i.layout),
    })
}

fn caller_memory(m: &nf_caller_memory) -> Result<CallerMemory, Fail> {
    if m.memory == 0 {
        return Err(Fail::invalid("the memory is VK_NULL_HANDLE"));
    }
    Ok(CallerMemory {
        memory: vk::DeviceMemory::from_raw(m.memory),
        allocation_size: m.allocation_size,
        dedicated: m.dedicated,
    })
}

pub(crate) fn pixel_layout(l: &nf_pixel_layout) -> PixelLayout {
    PixelLayout { width: l.width, height: l.height, row_pitch: l.row_pitch, format: vk::Format::from_raw(l.format) }
}

fn caller_buffer(b: &nf_caller_buffer) -> Result<CallerBuffer, Fail> {
    if b.buffer == 0 {
        return Err(Fail::invalid("the buffer is VK_NULL_HANDLE"));
    }
    Ok(CallerBuffer {
        buffer: vk::Buffer::from_raw(b.buffer),
        size: b.size,
        usage: vk::BufferUsageFlags::from_raw(b.usage),
        layout: pixel_layout(&b.layout),
    })
}

/// Runs one registration: reads the description at `arg` (a versioned struct), `make`
/// registers it and gives the new number, which goes to `*out`.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `arg` is
/// NULL or points to its `struct_size` readable bytes; `out` is NULL or writable.
pub(crate) unsafe fn register<A: Versioned>(
    c: *mut nf_context,
    arg: *const A,
    what: &str,
    out: *mut u64,
    make: impl FnOnce(&mut nf_context, &A) -> Result<u64, Fail>,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        // SAFETY: the caller's contract.
        let a = unsafe { read_versioned(arg, what) }?;
        non_null(out, "out")?;
        let n = make(c, &a)?;
        // SAFETY: the caller's contract.
        unsafe { put(out, n, "out") }
    })
}

/// Registers one of the caller's images as an input (a context on the caller's device),
/// checked once here; `*out` names it in frames until `nf_context_unregister_input`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `image` or `out` is NULL, the
/// image is `VK_NULL_HANDLE`, the context is not built on the caller's device (`nf_context_new`'s:
/// import by fd instead), or the format, size, usage, tiling or layout does not fit (the message
/// says which); `NF_STATUS_STRUCT_SIZE` where `image->struct_size` is not set;
/// `NF_STATUS_UNSUPPORTED` where the device cannot use the format that way, or a newer header's
/// field is set; `NF_STATUS_VULKAN`: making its view failed; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context built by `nf_context_new_on_device`, not used by another
/// thread during the call; `image` is NULL or a description of an image of that device,
/// alive until it is unregistered and its frames are done (or the context is freed);
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_input_image(
    c: *mut nf_context,
    image: *const nf_caller_image,
    out: *mut nf_input,
) -> nf_status {
    let make = |c: &mut nf_context, image: &nf_caller_image| {
        let image = caller_image(image)?;
        // SAFETY: the caller's contract (above).
        Ok(c.ids.add_input(unsafe { c.ctx.register_input_image(image) }?))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, image, "image", out, make) }
}

/// Registers one of the caller's images as an output; see
/// `nf_context_register_input_image`.
///
/// Status: as `nf_context_register_input_image`.
///
/// # Safety
/// As `nf_context_register_input_image`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_output_image(
    c: *mut nf_context,
    image: *const nf_caller_image,
    out: *mut nf_output,
) -> nf_status {
    let make = |c: &mut nf_context, image: &nf_caller_image| {
        let image = caller_image(image)?;
        // SAFETY: the caller's contract (above).
        Ok(c.ids.add_output(unsafe { c.ctx.register_output_image(image) }?))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, image, "image", out, make) }
}

/// Registers one of the caller's buffers as an input; see
/// `nf_context_register_input_image`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c`, `buffer` or `out` is NULL, the
/// buffer is `VK_NULL_HANDLE`, the context is not built on the caller's device, or the layout,
/// size or usage does not fit (the message says which); `NF_STATUS_STRUCT_SIZE` where
/// `buffer->struct_size` is not set; `NF_STATUS_UNSUPPORTED` where the device's limits do not
/// allow it, or a newer header's field is set; `NF_STATUS_VULKAN`: a call failed;
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// As `nf_context_register_input_image`, for a buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_input_buffer(
    c: *mut nf_context,
    buffer: *const nf_caller_buffer,
    out: *mut nf_input,
) -> nf_status {
    let make = |c: &mut nf_context, buffer: &nf_caller_buffer| {
        let buffer = caller_buffer(buffer)?;
        // SAFETY: the caller's contract (above).
        Ok(c.ids.add_input(unsafe { c.ctx.register_input_buffer(buffer) }?))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, buffer, "buffer", out, make) }
}

/// Registers one of the caller's buffers as an output; see
/// `nf_context_register_input_image`.
///
/// Status: as `nf_context_register_input_buffer`.
///
/// # Safety
/// As `nf_context_register_input_image`, for a buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_output_buffer(
    c: *mut nf_context,
    buffer: *const nf_caller_buffer,
    out: *mut nf_output,
) -> nf_status {
    let make = |c: &mut nf_context, buffer: &nf_caller_buffer| {
        let buffer = caller_buffer(buffer)?;
        // SAFETY: the caller's contract (above).
        Ok(c.ids.add_output(unsafe { c.ctx.register_output_buffer(buffer) }?))
    };
    // SAFETY: the caller's contract.
    unsafe { register(c, buffer, "buffer", out, make) }
}

/// Registers one of the caller's images with the exportable memory it is bound to, as an
/// input: as `nf_context_register_input_image`, and on the CUDA backend the context
/// exports that memory once and the frame's passes run as CUDA kernels (the image handed
/// over in `GENERAL` layout, `OPTIMAL` tiling; otherwise its frames take the Vulkan passes,
/// said once in the log). The memory stays the caller's.
///
/// Status: as `nf_context_register_input_image` (also for `memory`: NULL, `VK_NULL_HANDLE`, its
/// `struct_size`); `NF_STATUS_CUDA`: CUDA could not import the memory.
///
/// # Safety
/// As `nf_context_register_input_image`; and `memory` is NULL or describes the live
/// allocation the image is bound to at offset 0, made with `VkExportMemoryAllocateInfo`
/// for `OPAQUE_FD`, alive as long as the image.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_input_image_with_memory(
    c: *mut nf_context,
    image: *const nf_caller_image,
    memory: *const nf_caller_memory,
    out: *mut nf_input,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let (c, image, memory) =
            unsafe { (context(c)?, read_versioned(image, "image")?, read_versioned(memory, "memory")?) };
        non_null(out, "out")?;
        let (image, memory) = (caller_image(&image)?, caller_memory(&memory)?);
        // SAFETY: the caller's contract (above).
        let id = unsafe { c.ctx.register_input_image_with_memory(image, memory) }?;
        let n = c.ids.add_input(id);
        // SAFETY: the caller's contract.
        unsafe { put(out, n, "out") }
    })
}

/// Registers one of the caller's images with the exportable memory it is bound to, as an
/// output; see `nf_context_register_input_image_with_memory`. CUDA writes it in place, in
/// `GENERAL` layout, which it stays in.
///
/// Status: as `nf_context_register_input_image_with_memory`.
///
/// # Safety
/// As `nf_context_register_input_image_with_memory`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_output_image_with_memory(
    c: *mut nf_context,
    image: *const nf_caller_image,
    memory: *const nf_caller_memory,
    out: *mut nf_output,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let (c, image, memory) =
            unsafe { (context(c)?, read_versioned(image, "image")?, read_versioned(memory, "memory")?) };
        non_null(out, "out")?;
        let (image, memory) = (caller_image(&image)?, caller_memory(&memory)?);
        // SAFETY: the caller's contract (above).
        let id = unsafe { c.ctx.register_output_image_with_memory(image, memory) }?;
        let n = c.ids.add_output(id);
        // SAFETY: the caller's contract.
        unsafe { put(out, n, "out") }
    })
}

/// Registers one of the caller's timeline semaphores (a `VkSemaphore` of the caller's
/// device, created with `VK_SEMAPHORE_TYPE_TIMELINE`), for frames to wait on
/// (`nf_frame`'s `wait_timeline`, `output_free_timeline`). It stays the caller's.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `out` is NULL, `semaphore` is
/// `VK_NULL_HANDLE`, or the context is not built on the caller's device; `NF_STATUS_INTERNAL`: a
/// bug.
///
/// # Safety
/// `c` is NULL or a live context built by `nf_context_new_on_device`, not used by another
/// thread during the call; `semaphore` is a timeline semaphore of that device, alive until
/// it is unregistered and the frames that wait on it are done; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_timeline(
    c: *mut nf_context,
    semaphore: u64,
    out: *mut nf_timeline,
) -> nf_status {
    // SAFETY: the caller's contract, passed on.
    unsafe { register_timeline_as(c, semaphore, out, false) }
}

/// As `nf_context_register_timeline`, for a timeline semaphore the caller created exportable
/// (`VkExportSemaphoreCreateInfo` with `VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT`, on a
/// device with `VK_KHR_external_semaphore_fd`): on the CUDA backend the context exports it once
/// and CUDA waits for its values itself, with no batch of the context's on the caller's queue
/// to hand a frame over. On the CPU backend it is registered as `nf_context_register_timeline`
/// does.
///
/// Status: as `nf_context_register_timeline`; `NF_STATUS_UNSUPPORTED` where the device cannot
/// export it (`VK_KHR_external_semaphore_fd` not enabled); `NF_STATUS_VULKAN`, `NF_STATUS_CUDA`:
/// exporting it or importing it into CUDA failed.
///
/// # Safety
/// As `nf_context_register_timeline`, and `semaphore` was created with that export info.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_register_exportable_timeline(
    c: *mut nf_context,
    semaphore: u64,
    out: *mut nf_timeline,
) -> nf_status {
    // SAFETY: the caller's contract, passed on.
    unsafe { register_timeline_as(c, semaphore, out, true) }
}

/// Both timeline registrations: `exportable` takes `register_exportable_timeline`.
///
/// # Safety
/// As `nf_context_register_timeline`, and as `nf_context_register_exportable_timeline` when
/// `exportable`.
unsafe fn register_timeline_as(
    c: *mut nf_context,
    semaphore: u64,
    out: *mut nf_timeline,
    exportable: bool,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(out, "out")?;
        let semaphore = vk::Semaphore::from_raw(semaphore);
        // SAFETY: the caller's contract (above).
        let id = unsafe {
            if exportable { c.ctx.register_exportable_timeline(semaphore) } else { c.ctx.register_timeline(semaphore) }
        }?;
        let n = c.ids.add_timeline(id);
        // SAFETY: the caller's contract.
        unsafe { put(out, n, "out") }
    })
}

/// Creates an image of the context's own as an input of the frame size, in `format` (a
/// `VkFormat` of the input formats), for tools: fill it with `nf_context_upload`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `out` is NULL or `format` is
/// not an input format; `NF_STATUS_UNSUPPORTED` where the device cannot sample it;
/// `NF_STATUS_VULKAN`: making it failed (out of memory); `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `out` is
/// NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_create_input_image(
    c: *mut nf_context,
    format: i32,
    out: *mut nf_input,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(out, "out")?;
        let id = c.ctx.create_input_image(vk::Format::from_raw(format))?;
        let n = c.ids.add_input(id);
        // SAFETY: the caller's contract.
        unsafe { put(out, n, "out") }
    })
}

/// Creates an image of the context's own as an output of the output size, in `format`
/// (`VK_FORMAT_R8G8B8A8_UNORM` or `_R16G16B16A16_SFLOAT`), for tools: read it with
/// `nf_context_readback`.
///
/// Status: as `nf_context_create_input_image` (an output format, storage use).
///
/// # Safety
/// As `nf_context_create_input_image`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_create_output_image(
    c: *mut nf_context,
    format: i32,
    out: *mut nf_output,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(out, "out")?;
        let id = c.ctx.create_output_image(vk::Format::from_raw(format))?;
        let n = c.ids.add_output(id);
        c.ids.set_bytes_per_pixel(n, if format == vk::Format::R16G16B16A16_SFLOAT.as_raw() { 8 } else { 4 });
        // SAFETY: the caller's contract.
        unsafe { put(out, n, "out") }
    })
}

/// Copies `len` bytes of texels (rows of the frame width without padding, top row first,
/// in the image's format) into an input the context created, after the frames that read
/// it have read it.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` or `texels` is NULL, `input` is
/// not a registered input, not an image the context created, or `len` is not the image's size in
/// bytes; `NF_STATUS_TIMEOUT` where a frame reading it does not finish within the frame timeout;
/// `NF_STATUS_DEVICE_LOST`; `NF_STATUS_VULKAN`: the copy failed; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `texels` is
/// NULL or points to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_upload(
    c: *mut nf_context,
    input: nf_input,
    texels: *const u8,
    len: usize,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(texels, "texels")?;
        let id = c.ids.input(input)?;
        // SAFETY: `len` readable bytes (the caller's contract).
        let texels = unsafe { std::slice::from_raw_parts(texels, len) };
        Ok(c.ctx.upload(id, texels)?)
    })
}

/// Copies an output the context created into `buf` (rows of the output width without
/// padding, top row first, in the image's format), once the frames that write it are
/// done. Size-in/size-out: on entry `*len` is the capacity of `buf`; on return the size
/// of the texels. With `buf` NULL the call only sets `*len` (it waits for nothing); with a
/// buffer too small it writes nothing and returns `NF_STATUS_BUFFER_TOO_SMALL`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_BUFFER_TOO_SMALL` (with `*len` the size needed);
/// `NF_STATUS_INVALID_ARGUMENT` where `c` or `len` is NULL, or `output` is not a registered output
/// or (for a size query) not an image the context created; `NF_STATUS_TIMEOUT` where a frame
/// writing it does not finish within the frame timeout; `NF_STATUS_DEVICE_LOST`;
/// `NF_STATUS_VULKAN`: the copy failed; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call; `len` is
/// NULL or points to a `size_t`; `buf` is NULL or points to `*len` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_readback(
    c: *mut nf_context,
    output: nf_output,
    buf: *mut u8,
    len: *mut usize,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        non_null(len, "len")?;
        let id = c.ids.output(output)?;
        // SAFETY: `len` points to a size_t (the caller's contract).
        let capacity = unsafe { *len };
        if buf.is_null() {
            // The size without waiting: the output size times the format's bytes per pixel.
            let bpp = c.ids.bytes_per_pixel(output).ok_or_else(|| {
                Fail::invalid(format!(
                    "output {output} is not an image the context created (nf_context_create_output_image)"
                ))
            })?;
            let (w, h) = c.ctx.output_size();
            // SAFETY: as above.
            unsafe { *len = (w as usize) * (h as usize) * bpp };
            return Ok(());
        }
        let texels = c.ctx.readback(id)?;
        // SAFETY: as above.
        unsafe { *len = texels.len() };
        if capacity < texels.len() {
            return Err(Fail::new(
                nf_status::NF_STATUS_BUFFER_TOO_SMALL,
                format!("the buffer holds {capacity} bytes, the output's texels are {}", texels.len()),
            ));
        }
        // SAFETY: `buf` has `capacity >= texels.len()` writable bytes, apart from `texels`.
        unsafe { std::ptr::copy_nonoverlapping(texels.as_ptr(), buf, texels.len()) };
        Ok(())
    })
}

/// Unregisters an input. Where a frame in flight uses it, the context keeps it until
/// that frame is done: the caller's image or buffer must live until then (after
/// `nf_context_wait` of the last frame that used it, or `nf_context_wait_all`). The
/// number is not valid afterwards.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or the number is not a
/// registration of that kind on this context (0, never given, another kind, unregistered already);
/// `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_unregister_input(c: *mut nf_context, input: nf_input) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        c.ctx.unregister_input(c.ids.input(input)?)?;
        c.ids.remove_input(input);
        Ok(())
    })
}

/// Unregisters an output; see `nf_context_unregister_input`.
///
/// Status: as `nf_context_unregister_input`.
///
/// # Safety
/// As `nf_context_unregister_input`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_unregister_output(c: *mut nf_context, output: nf_output) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        c.ctx.unregister_output(c.ids.output(output)?)?;
        c.ids.remove_output(output);
        Ok(())
    })
}

/// Unregisters a timeline; see `nf_context_unregister_input`. An imported one's
/// descriptor is closed by the context.
///
/// Status: as `nf_context_unregister_input`.
///
/// # Safety
/// As `nf_context_unregister_input`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_unregister_timeline(c: *mut nf_context, timeline: nf_timeline) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        c.ctx.unregister_timeline(c.ids.timeline(timeline)?)?;
        c.ids.remove_timeline(timeline);
        Ok(())
    })
}

/// Signals one of the registered timelines from the host up to `value` (nothing where it
/// is there already), for a peer that is gone before it signalled: the frames that wait
/// on it can then run and retire. What they read is whatever the memory held.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `c` is NULL or `timeline` is not a
/// registered timeline of this context; `NF_STATUS_VULKAN`: the host signal failed (a value below
/// the timeline's); `NF_STATUS_DEVICE_LOST`; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `c` is NULL or a live context, not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_context_release_timeline(
    c: *mut nf_context,
    timeline: nf_timeline,
    value: u64,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = unsafe { context(c) }?;
        let id = c.ids.timeline(timeline)?;
        Ok(c.ctx.release_timeline(id, value)?)
    })
}
