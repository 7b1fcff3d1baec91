//! What a caller hands over: its Vulkan device (bring your own device), its
//! images and buffers by handle, or exported memory and semaphores by file
//! descriptor, each with the description the context checks before use.
//!
//! # Which way in
//!
//! - **Bring your own device** ([`ContextBuilder::build_on`](crate::ContextBuilder::build_on)):
//!   the context records and submits on the caller's device and queue and uses
//!   its `VkImage`/`VkBuffer` handles and timeline semaphores directly. No
//!   memory or semaphore crosses a device boundary, so GPU-side sync works on
//!   any driver with timeline semaphores (lavapipe too). Pick it when the
//!   renderer can share its device and a queue.
//! - **Import by file descriptor** ([`NeuralFrameContext::import_input_image`](crate::NeuralFrameContext::import_input_image)
//!   and friends): the context keeps its own device on the same physical device
//!   and imports the renderer's exported memory (`OPAQUE_FD`) and timeline
//!   semaphores. The renderer's device stays untouched (no shared queue, no
//!   shared lock), and the same descriptors can cross a process boundary. Pick
//!   it when the renderer must not share its device, or lives in another process.
//!
//! # File descriptors
//!
//! A successful import owns the descriptor; a failed one leaves it with the
//! caller: [`ImportError::into_fd`] gives it back (Vulkan's and CUDA's rule on Linux).
//!
//! # Windows handles
//!
//! On Windows the same calls take an NT handle (`OPAQUE_WIN32`, from
//! `vkGetMemoryWin32HandleKHR` or `vkGetSemaphoreWin32HandleKHR`) as
//! [`ExternalHandle`] (`OwnedHandle`), and the device extensions are the `_win32`
//! ones ([`EXTERNAL_MEMORY_EXTENSION`](crate::EXTERNAL_MEMORY_EXTENSION),
//! [`EXTERNAL_SEMAPHORE_EXTENSION`](crate::EXTERNAL_SEMAPHORE_EXTENSION)). Neither
//! Vulkan nor CUDA takes ownership of a Windows handle: the context closes the
//! handle it was given once the import succeeded, and a failed import gives it
//! back as on Linux. A caller that needs to keep its own handle passes a
//! duplicate (`OwnedHandle::try_clone`).

use std::sync::{Arc, Mutex};

use ash::vk;

use crate::error::Error;
use crate::handle::ExternalHandle;

/// The caller's Vulkan device and the queue the context may submit to
/// (for [`ContextBuilder::build_on`](crate::ContextBuilder::build_on)).
///
/// The device must have been created with Vulkan 1.2's `timelineSemaphore`
/// feature enabled. The CUDA backend also needs `VK_KHR_external_memory_fd`
/// and `VK_KHR_external_semaphore_fd` enabled on it (to share the model's
/// buffers and timelines with CUDA; on Windows `VK_KHR_external_memory_win32`
/// and `VK_KHR_external_semaphore_win32`, see [`EXTERNAL_MEMORY_EXTENSION`](crate::EXTERNAL_MEMORY_EXTENSION));
/// without them, [`Backend::Auto`](crate::Backend::Auto) falls back to the CPU
/// backend, announced.
///
/// ```no_run
/// use std::sync::{Arc, Mutex};
/// use ash::vk;
/// use neural_frame::{CallerDevice, NeuralFrameContext};
///
/// # fn renderer(entry: ash::Entry, instance: ash::Instance, physical_device: vk::PhysicalDevice,
/// #     device: ash::Device, family: u32) -> neural_frame::Result<()> {
/// // The renderer's objects: `device` was created on `physical_device` with
/// // `timelineSemaphore`, VK_KHR_external_memory_fd and VK_KHR_external_semaphore_fd,
/// // and two queues of the compute-capable `family`.
/// let lock = Arc::new(Mutex::new(())); // the renderer holds it around its own submissions
/// // SAFETY: `family` has two queues on `device`.
/// let (queue, post_queue) = unsafe { (device.get_device_queue(family, 0), device.get_device_queue(family, 1)) };
/// let caller = CallerDevice {
///     entry,
///     instance,
///     api_version: vk::API_VERSION_1_3,
///     physical_device,
///     device,
///     queue_family_index: family,
///     queue,
///     post_queue: Some(post_queue),
///     queue_lock: Some(Arc::clone(&lock)),
///     external_memory_fd: true,
///     external_semaphore_fd: true,
/// };
/// // SAFETY: the handles are valid and outlive the context; the renderer submits to
/// // both queues only while holding `lock`.
/// let ctx = unsafe { NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build_on(caller) }?;
/// assert!(ctx.report().caller_device);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CallerDevice {
    /// The loader the instance was created from.
    pub entry: ash::Entry,
    /// The caller's instance.
    pub instance: ash::Instance,
    /// The API version the instance was created for (1.2 or newer).
    pub api_version: u32,
    /// The physical device.
    pub physical_device: vk::PhysicalDevice,
    /// The caller's logical device.
    pub device: ash::Device,
    /// A queue family with compute support.
    pub queue_family_index: u32,
    /// A queue of that family the context submits its pre passes (and, without
    /// `post_queue`, its post passes) to.
    ///
    /// On a queue shared with the caller, a semaphore signal waits for every
    /// earlier submission on the queue. So the values a frame waits for
    /// ([`Frame::wait_for`](crate::Frame::wait_for),
    /// [`Frame::output_free_after`](crate::Frame::output_free_after)) must come
    /// from submissions the caller made before `submit`, or from the host: a
    /// wait for a value the caller signals in a later submission to the same
    /// queue never ends.
    pub queue: vk::Queue,
    /// A second queue of the same family for the post passes (optional): on the
    /// CUDA backend, a post pass waits there for the model, instead of holding
    /// back the caller's later submissions to `queue`.
    pub post_queue: Option<vk::Queue>,
    /// A lock the caller holds whenever it submits to `queue` (or `post_queue`)
    /// itself; the context holds it around each of its own submissions. `None`:
    /// the caller never submits to these queues while a context call runs.
    pub queue_lock: Option<Arc<Mutex<()>>>,
    /// Whether the device was created with `VK_KHR_external_memory_fd` (on
    /// Windows: `VK_KHR_external_memory_win32`; [`EXTERNAL_MEMORY_EXTENSION`](crate::EXTERNAL_MEMORY_EXTENSION)).
    pub external_memory_fd: bool,
    /// Whether the device was created with `VK_KHR_external_semaphore_fd` (on
    /// Windows: `VK_KHR_external_semaphore_win32`; [`EXTERNAL_SEMAPHORE_EXTENSION`](crate::EXTERNAL_SEMAPHORE_EXTENSION)).
    pub external_semaphore_fd: bool,
}

impl CallerDevice {
    /// Describes the caller's device from its ash objects, reading what they tell:
    /// the API version (the lower of the loader's instance version and the physical
    /// device's: set `api_version` yourself if your instance asked for less), and
    /// whether the device was created with the external memory and semaphore
    /// extensions ([`EXTERNAL_MEMORY_EXTENSION`](crate::EXTERNAL_MEMORY_EXTENSION),
    /// [`EXTERNAL_SEMAPHORE_EXTENSION`](crate::EXTERNAL_SEMAPHORE_EXTENSION); their
    /// commands resolve through `vkGetDeviceProcAddr` only when enabled). No second
    /// queue and no queue lock: set `post_queue` and `queue_lock` where the renderer
    /// submits to `queue` itself while a context call may run.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::{CallerDevice, NeuralFrameContext};
    ///
    /// # fn renderer(entry: ash::Entry, instance: ash::Instance, physical_device: vk::PhysicalDevice,
    /// #     device: ash::Device, queue: vk::Queue, family: u32) -> neural_frame::Result<()> {
    /// // SAFETY: the renderer's live objects: `queue` is a queue of `family` on `device`.
    /// let caller = unsafe { CallerDevice::from_ash(&entry, &instance, physical_device, &device, queue, family) };
    /// assert!(caller.external_memory_fd, "create the device with VK_KHR_external_memory_fd");
    /// // SAFETY: the handles outlive the context; the renderer does not submit to `queue` during its calls.
    /// let ctx = unsafe { NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build_on(caller) }?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    /// The objects must be live; `physical_device` must come from `instance`, `device`
    /// from `physical_device`, and `queue` must be a queue of `queue_family_index` on `device`.
    pub unsafe fn from_ash(
        entry: &ash::Entry,
        instance: &ash::Instance,
        physical_device: vk::PhysicalDevice,
        device: &ash::Device,
        queue: vk::Queue,
        queue_family_index: u32,
    ) -> Self {
        // SAFETY: a loader query with no object.
        let loader = unsafe { entry.try_enumerate_instance_version() }.ok().flatten().unwrap_or(vk::API_VERSION_1_0);
        // SAFETY: physical_device comes from instance (caller's contract).
        let props = unsafe { instance.get_physical_device_properties(physical_device) };
        let enabled = |command: &std::ffi::CStr| {
            // SAFETY: device is live (caller's contract); the name is a NUL-terminated command name.
            unsafe { (instance.fp_v1_0().get_device_proc_addr)(device.handle(), command.as_ptr()) }.is_some()
        };
        #[cfg(unix)]
        let (memory, semaphore) = (c"vkGetMemoryFdKHR", c"vkGetSemaphoreFdKHR");
        #[cfg(windows)]
        let (memory, semaphore) = (c"vkGetMemoryWin32HandleKHR", c"vkGetSemaphoreWin32HandleKHR");
        Self {
            entry: entry.clone(),
            instance: instance.clone(),
            api_version: loader.min(props.api_version),
            physical_device,
            device: device.clone(),
            queue_family_index,
            queue,
            post_queue: None,
            queue_lock: None,
            external_memory_fd: enabled(memory),
            external_semaphore_fd: enabled(semaphore),
        }
    }
}

/// Which physical device and driver memory or a semaphore comes from:
/// `VkPhysicalDeviceIDProperties::deviceUUID` and `driverUUID` of the exporter.
/// Imports are refused unless both equal the context's.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{DeviceIdentity, DeviceSelector, NeuralFrameContext};
///
/// # fn renderer(instance: &ash::Instance, physical_device: vk::PhysicalDevice) -> neural_frame::Result<()> {
/// // The renderer's identity, as its exported memory and semaphores carry it.
/// let mut id = vk::PhysicalDeviceIDProperties::default();
/// let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
/// // SAFETY: `physical_device` comes from `instance`; `props` outlives the call.
/// unsafe { instance.get_physical_device_properties2(physical_device, &mut props) };
/// let origin = DeviceIdentity { device_uuid: id.device_uuid, driver_uuid: id.driver_uuid };
///
/// // A context of its own on the same physical device can import them.
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .device(DeviceSelector::Uuid(origin.device_uuid))
///     .frame_size(960, 540)
///     .build()?;
/// assert_eq!(ctx.device_identity(), origin);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceIdentity {
    /// `deviceUUID`.
    pub device_uuid: [u8; 16],
    /// `driverUUID`.
    pub driver_uuid: [u8; 16],
}

/// How pixels lie in a linear buffer: `height` rows of `width` pixels,
/// `row_pitch` bytes apart, starting at offset 0.
///
/// ```
/// use ash::vk;
/// use neural_frame::PixelLayout;
///
/// // 1000 RGBA8 pixels a row, rows padded to 256 bytes (as a copy from an image may want).
/// let padded = PixelLayout { width: 1000, height: 540, row_pitch: 4096, format: vk::Format::R8G8B8A8_UNORM };
/// assert_eq!(padded.bytes(), 4096 * 540);
/// assert_eq!(PixelLayout::packed(1000, 540, vk::Format::R8G8B8A8_UNORM).row_pitch, 4000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelLayout {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Bytes from one row to the next (a multiple of 4, at least width × bytes per pixel).
    pub row_pitch: u64,
    /// `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM`/`_SRGB` or `R16G16B16A16_SFLOAT`
    /// (outputs: `R8G8B8A8_UNORM`/`_SRGB`, `B8G8R8A8_UNORM` or `R16G16B16A16_SFLOAT`).
    pub format: vk::Format,
}

impl PixelLayout {
    /// Tightly packed rows of `format`.
    ///
    /// ```
    /// use ash::vk;
    /// use neural_frame::PixelLayout;
    ///
    /// let half = PixelLayout::packed(960, 540, vk::Format::R16G16B16A16_SFLOAT);
    /// assert_eq!(half.row_pitch, 960 * 8);
    /// ```
    pub fn packed(width: u32, height: u32, format: vk::Format) -> Self {
        let bpp = crate::vulkan::conv::bytes_per_pixel(format).unwrap_or(4) as u64;
        Self { width, height, row_pitch: width as u64 * bpp, format }
    }
    /// Bytes the pixels span: `row_pitch × height` (the last row's padding included).
    ///
    /// ```
    /// use ash::vk;
    /// use neural_frame::PixelLayout;
    ///
    /// let layout = PixelLayout::packed(960, 540, vk::Format::B8G8R8A8_UNORM);
    /// assert_eq!(layout.bytes(), 960 * 540 * 4); // the least `CallerBuffer::size` it needs
    /// ```
    pub fn bytes(&self) -> u64 {
        self.row_pitch.saturating_mul(self.height as u64)
    }
}

/// An image of the caller's device, by handle (bring your own device).
///
/// The context reads an input in `layout` (`GENERAL` or
/// `SHADER_READ_ONLY_OPTIMAL`), and leaves it so. It writes an output in
/// `GENERAL`, discarding what it held, and leaves it in `layout`. The image
/// must be used on the context's queue family (or created with concurrent
/// sharing): the context records no queue family transfer for it.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{CallerImage, NeuralFrameContext};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, image: vk::Image) -> neural_frame::Result<()> {
/// // The renderer's 960×540 colour target, sampled after its render pass.
/// let frame = CallerImage {
///     image,
///     format: vk::Format::B8G8R8A8_UNORM,
///     width: 960,
///     height: 540,
///     usage: vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::SAMPLED,
///     tiling: vk::ImageTiling::OPTIMAL,
///     layout: vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL,
/// };
/// // SAFETY: the context is built on the renderer's device; `image` is an image of it as
/// // described, alive until it is unregistered and its frames are done.
/// let input = unsafe { ctx.register_input_image(frame) }?;
/// # let _ = input; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerImage {
    /// The image.
    pub image: vk::Image,
    /// Its format.
    pub format: vk::Format,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The usage it was created with (inputs need `SAMPLED`, outputs `STORAGE`).
    pub usage: vk::ImageUsageFlags,
    /// Its tiling.
    pub tiling: vk::ImageTiling,
    /// The layout it is in when handed over (input) or comes back in (output).
    pub layout: vk::ImageLayout,
}

impl CallerImage {
    /// The description of `image` from the create info it was made with (format,
    /// extent, usage, tiling) and the layout it is handed over in.
    ///
    /// ```
    /// use ash::vk;
    /// use neural_frame::CallerImage;
    ///
    /// let info = vk::ImageCreateInfo::default()
    ///     .image_type(vk::ImageType::TYPE_2D)
    ///     .format(vk::Format::B8G8R8A8_UNORM)
    ///     .extent(vk::Extent3D { width: 960, height: 540, depth: 1 })
    ///     .usage(vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::SAMPLED);
    /// # let image = vk::Image::null();
    /// let frame = CallerImage::from_create_info(image, &info, vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL);
    /// assert_eq!((frame.width, frame.height, frame.tiling), (960, 540, vk::ImageTiling::OPTIMAL));
    /// ```
    pub fn from_create_info(image: vk::Image, info: &vk::ImageCreateInfo<'_>, layout: vk::ImageLayout) -> Self {
        Self {
            image,
            format: info.format,
            width: info.extent.width,
            height: info.extent.height,
            usage: info.usage,
            tiling: info.tiling,
            layout,
        }
    }
}

/// The memory behind one of the caller's images on the context's device (bring
/// your own device), where the caller allocated it exportable
/// (`VkExportMemoryAllocateInfo` with `OPAQUE_FD`, on a device with
/// `VK_KHR_external_memory_fd`): with it the CUDA passes reach the image
/// ([`NeuralFrameContext::register_input_image_with_memory`](crate::NeuralFrameContext::register_input_image_with_memory)),
/// and its frames cross between Vulkan and CUDA only where the caller's
/// semaphores ask for it.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::CallerMemory;
///
/// # fn renderer(memory: vk::DeviceMemory, requirements: vk::MemoryRequirements) {
/// // The image's memory, allocated with VkExportMemoryAllocateInfo (OPAQUE_FD) and
/// // VkMemoryDedicatedAllocateInfo for the image.
/// let shared = CallerMemory { memory, allocation_size: requirements.size, dedicated: true };
/// # let _ = shared;
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerMemory {
    /// The allocation the image is bound to (at offset 0).
    pub memory: vk::DeviceMemory,
    /// `VkMemoryAllocateInfo::allocationSize`.
    pub allocation_size: u64,
    /// Whether it is a dedicated allocation for the image.
    pub dedicated: bool,
}

/// A linear buffer of the caller's device, by handle (bring your own device).
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{CallerBuffer, NeuralFrameContext, PixelLayout};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, buffer: vk::Buffer) -> neural_frame::Result<()> {
/// // A buffer the renderer created for the upscaled frame, tightly packed RGBA8.
/// let (width, height) = ctx.output_size();
/// let layout = PixelLayout::packed(width, height, vk::Format::R8G8B8A8_UNORM);
/// let result = CallerBuffer {
///     buffer,
///     size: layout.bytes(),
///     usage: vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC,
///     layout,
/// };
/// // SAFETY: the context is built on the renderer's device; `buffer` is a buffer of it as
/// // described, alive until it is unregistered and its frames are done.
/// let output = unsafe { ctx.register_output_buffer(result) }?;
/// # let _ = output; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallerBuffer {
    /// The buffer.
    pub buffer: vk::Buffer,
    /// Its size in bytes (at least the layout's bytes).
    pub size: u64,
    /// The usage it was created with (`STORAGE_BUFFER` is needed).
    pub usage: vk::BufferUsageFlags,
    /// How the pixels lie in it.
    pub layout: PixelLayout,
}

impl CallerBuffer {
    /// The description of `buffer` from the create info it was made with (size,
    /// usage) and how its pixels lie.
    ///
    /// ```
    /// use ash::vk;
    /// use neural_frame::{CallerBuffer, PixelLayout};
    ///
    /// let layout = PixelLayout::packed(960, 540, vk::Format::R8G8B8A8_UNORM);
    /// let info = vk::BufferCreateInfo::default().size(layout.bytes()).usage(vk::BufferUsageFlags::STORAGE_BUFFER);
    /// # let buffer = vk::Buffer::null();
    /// let frame = CallerBuffer::from_create_info(buffer, &info, layout);
    /// assert_eq!(frame.size, 960 * 540 * 4);
    /// ```
    pub fn from_create_info(buffer: vk::Buffer, info: &vk::BufferCreateInfo<'_>, layout: PixelLayout) -> Self {
        Self { buffer, size: info.size, usage: info.usage, layout }
    }
}

/// Memory the caller exported with `vkGetMemoryFdKHR` (`OPAQUE_FD`; on Windows
/// `vkGetMemoryWin32HandleKHR`, `OPAQUE_WIN32`), and how it was allocated: an
/// importer must repeat the allocation size, memory type and dedicated-ness exactly.
///
/// ```no_run
/// use std::os::fd::{FromRawFd, OwnedFd};
/// use ash::vk;
/// use neural_frame::{DeviceIdentity, MemoryImport};
///
/// # fn renderer(memory_fd: &ash::khr::external_memory_fd::Device, memory: vk::DeviceMemory,
/// #     allocation: &vk::MemoryAllocateInfo, origin: DeviceIdentity) -> Result<MemoryImport, vk::Result> {
/// // `memory` was allocated with `allocation`, chaining VkExportMemoryAllocateInfo { OPAQUE_FD }
/// // and VkMemoryDedicatedAllocateInfo for its image.
/// let info = vk::MemoryGetFdInfoKHR::default()
///     .memory(memory)
///     .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
/// // SAFETY: `memory` is an exportable allocation of the device `memory_fd` was loaded for.
/// let raw = unsafe { memory_fd.get_memory_fd(&info) }?;
/// // SAFETY: vkGetMemoryFdKHR returned a new descriptor that nothing else owns.
/// let fd = unsafe { OwnedFd::from_raw_fd(raw) };
/// Ok(MemoryImport {
///     fd,
///     allocation_size: allocation.allocation_size,
///     memory_type_index: allocation.memory_type_index,
///     dedicated: true,
///     origin,
/// })
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryImport {
    /// The descriptor (owned by the context once an import succeeds; on Windows
    /// the NT handle, which the context then closes).
    pub fd: ExternalHandle,
    /// `VkMemoryAllocateInfo::allocationSize`.
    pub allocation_size: u64,
    /// `VkMemoryAllocateInfo::memoryTypeIndex` (memory types are those of the
    /// physical device, the same on every device made from it).
    pub memory_type_index: u32,
    /// Whether it was a dedicated allocation for the image or buffer.
    pub dedicated: bool,
    /// The exporter's device and driver.
    pub origin: DeviceIdentity,
}

/// An image whose memory the caller exported. The context creates an image of
/// the same description over it. Ownership moves through
/// `VK_QUEUE_FAMILY_EXTERNAL`, in `GENERAL` layout on both sides: the caller
/// releases an input to it after writing (old and new layout `GENERAL`) and
/// acquires it back after "input consumed"; it releases an output before
/// handing it over and acquires it after "output ready", likewise.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{ImageImport, MemoryImport, NeuralFrameContext};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, memory: MemoryImport) -> neural_frame::Result<()> {
/// // The renderer's 960×540 image whose memory it exported (see `MemoryImport`).
/// let import = ImageImport {
///     memory,
///     format: vk::Format::R8G8B8A8_UNORM,
///     width: 960,
///     height: 540,
///     usage: vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::COLOR_ATTACHMENT,
///     tiling: vk::ImageTiling::OPTIMAL,
/// };
/// let input = ctx.import_input_image(import)?; // `?` closes the descriptor on failure
/// # let _ = input; Ok(()) }
/// ```
#[derive(Debug)]
pub struct ImageImport {
    /// The memory.
    pub memory: MemoryImport,
    /// The image's format.
    pub format: vk::Format,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The usage it was created with (inputs need `SAMPLED`, outputs `STORAGE`).
    pub usage: vk::ImageUsageFlags,
    /// Its tiling.
    pub tiling: vk::ImageTiling,
}

/// A linear buffer whose memory the caller exported (the seed renderer's slots:
/// device-local buffers it fills with `vkCmdCopyImageToBuffer`). Ownership moves
/// through `VK_QUEUE_FAMILY_EXTERNAL` as for [`ImageImport`].
///
/// When the model takes the buffer exactly as it is — an NHWC uint8 RGBA input
/// (or output) and a tightly packed `R8G8B8A8` buffer — the buffer itself is
/// bound to ONNX Runtime and no pass runs: the literal zero-copy case.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{BufferImport, MemoryImport, NeuralFrameContext, PixelLayout};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, memory: MemoryImport) -> neural_frame::Result<()> {
/// // A 960×540 RGBA8 buffer the renderer fills with vkCmdCopyImageToBuffer, exported.
/// let layout = PixelLayout::packed(960, 540, vk::Format::R8G8B8A8_UNORM);
/// let import = BufferImport {
///     memory,
///     size: layout.bytes(),
///     usage: vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
///     layout,
/// };
/// let input = ctx.import_input_buffer(import)?;
/// # let _ = input; Ok(()) }
/// ```
#[derive(Debug)]
pub struct BufferImport {
    /// The memory.
    pub memory: MemoryImport,
    /// The buffer's size (`VkBufferCreateInfo::size`).
    pub size: u64,
    /// The usage it was created with (`STORAGE_BUFFER` is needed for the passes).
    pub usage: vk::BufferUsageFlags,
    /// How the pixels lie in it.
    pub layout: PixelLayout,
}

/// A timeline semaphore the caller exported with `vkGetSemaphoreFdKHR` (`OPAQUE_FD`;
/// on Windows `vkGetSemaphoreWin32HandleKHR`, `OPAQUE_WIN32`).
///
/// Vulkan gives an importer no way to learn a descriptor's semaphore type, and
/// drivers accept a binary semaphore's payload where a timeline is declared
/// (NVIDIA's 580 does, and so does CUDA), so the caller states the type it
/// created the semaphore with, as it states an image's format: a
/// [`vk::SemaphoreType::BINARY`] semaphore is refused, with the descriptor back.
///
/// ```no_run
/// use std::os::fd::{FromRawFd, OwnedFd};
/// use ash::vk;
/// use neural_frame::{DeviceIdentity, NeuralFrameContext, SemaphoreImport};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, semaphore_fd: &ash::khr::external_semaphore_fd::Device,
/// #     rendered: vk::Semaphore, origin: DeviceIdentity) -> Result<(), Box<dyn std::error::Error>> {
/// // `rendered`: a timeline semaphore the renderer created exportable (VkExportSemaphoreCreateInfo).
/// let info = vk::SemaphoreGetFdInfoKHR::default()
///     .semaphore(rendered)
///     .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
/// // SAFETY: `rendered` is an exportable semaphore of the device `semaphore_fd` was loaded for.
/// let raw = unsafe { semaphore_fd.get_semaphore_fd(&info) }?;
/// // SAFETY: vkGetSemaphoreFdKHR returned a new descriptor that nothing else owns.
/// let fd = unsafe { OwnedFd::from_raw_fd(raw) };
/// let import = SemaphoreImport { fd, semaphore_type: vk::SemaphoreType::TIMELINE, origin };
/// let rendered = ctx.import_timeline(import)?; // wait on it with Frame::wait_for
/// # let _ = rendered; Ok(()) }
/// ```
#[derive(Debug)]
pub struct SemaphoreImport {
    /// The descriptor (owned by the context once an import succeeds; on Windows
    /// the NT handle, which the context then closes).
    pub fd: ExternalHandle,
    /// The type it was created with (`VkSemaphoreTypeCreateInfo::semaphoreType`;
    /// `BINARY` when the create info chained none). Only `TIMELINE` imports.
    pub semaphore_type: vk::SemaphoreType,
    /// The exporter's device and driver.
    pub origin: DeviceIdentity,
}

/// A failed import: what went wrong, and the caller's file descriptor back.
/// `?` into [`Error`] closes the descriptor.
///
/// ```no_run
/// use neural_frame::{ImageImport, NeuralFrameContext};
///
/// # fn renderer(ctx: &mut NeuralFrameContext, import: ImageImport) -> neural_frame::Result<()> {
/// match ctx.import_input_image(import) {
///     Ok(input) => println!("imported as {input:?}"),
///     Err(failed) => {
///         eprintln!("the context refused the image: {}", failed.error());
///         let fd = failed.into_fd(); // still the renderer's: keep it, or drop it to close it
///         # drop(fd);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ImportError {
    error: Error,
    fd: ExternalHandle,
}

impl ImportError {
    pub(crate) fn new(error: Error, fd: ExternalHandle) -> Self {
        Self { error, fd }
    }
    /// What went wrong.
    ///
    /// ```no_run
    /// use neural_frame::{BufferImport, ErrorKind, NeuralFrameContext};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, import: BufferImport) -> neural_frame::Result<()> {
    /// if let Err(failed) = ctx.import_output_buffer(import) {
    ///     if failed.error().kind() == ErrorKind::InvalidArgument {
    ///         eprintln!("fix the description: {}", failed.error());
    ///     }
    ///     return Err(failed.into()); // closes the descriptor
    /// }
    /// # Ok(()) }
    /// ```
    pub fn error(&self) -> &Error {
        &self.error
    }
    /// The descriptor (on Windows the handle), still the caller's.
    ///
    /// ```no_run
    /// use std::os::fd::OwnedFd;
    /// use neural_frame::{NeuralFrameContext, SemaphoreImport};
    ///
    /// # fn renderer(ctx: &mut NeuralFrameContext, import: SemaphoreImport) -> neural_frame::Result<Option<OwnedFd>> {
    /// // In host-signalled mode (SyncMode::Host) there is nothing to import: keep the
    /// // descriptor, and submit frames without waits instead.
    /// match ctx.import_timeline(import) {
    ///     Ok(_rendered) => Ok(None),
    ///     Err(failed) => Ok(Some(failed.into_fd())),
    /// }
    /// # }
    /// ```
    pub fn into_fd(self) -> ExternalHandle {
        self.fd
    }
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// `?` in a function returning [`Error`]: the descriptor is closed.
impl From<ImportError> for Error {
    fn from(e: ImportError) -> Self {
        e.error
    }
}
