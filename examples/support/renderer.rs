//! A minimal "renderer" on ash, with its own instance, device and queue, as an
//! engine would have them: it makes images, buffers and timeline semaphores
//! (exportable where the driver allows), "renders" by copying a picture into
//! an image on its own queue, reads results back, and hands it all to
//! neural-frame by handle or by file descriptor. Shared by
//! `examples/foreign_renderer.rs` and the tests.
#![allow(dead_code)]

use std::ffi::{CStr, c_void};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result, anyhow, bail};
use ash::vk;
use neural_frame::{CallerDevice, DeviceIdentity, ImageImport, MemoryImport};

/// Memory and its allocation, as an importer must repeat it.
pub struct Allocation {
    pub memory: vk::DeviceMemory,
    pub size: u64,
    pub type_index: u32,
    pub dedicated: bool,
}

/// An image of the renderer's.
pub struct RImage {
    pub image: vk::Image,
    pub alloc: Allocation,
    pub format: vk::Format,
    pub width: u32,
    pub height: u32,
    pub usage: vk::ImageUsageFlags,
}

/// A buffer of the renderer's; `mapped` when host-visible.
pub struct RBuffer {
    pub buffer: vk::Buffer,
    pub alloc: Allocation,
    pub size: u64,
    pub usage: vk::BufferUsageFlags,
    pub mapped: *mut u8,
}

/// Counts validation errors (the messenger's user data).
struct Messages {
    errors: AtomicUsize,
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        // SAFETY: `user` is the renderer's boxed `Messages`, alive while the messenger is.
        unsafe { &*(user as *const Messages) }.errors.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the loader passes valid callback data with a NUL-terminated message.
        let text = unsafe { data.as_ref() }
            .filter(|d| !d.p_message.is_null())
            .map(|d| unsafe { CStr::from_ptr(d.p_message) }.to_string_lossy().into_owned())
            .unwrap_or_default();
        eprintln!("renderer: validation error: {text}");
    }
    vk::FALSE
}

/// The renderer's own Vulkan objects. Destroyed in `Drop` (after the device is idle).
pub struct Renderer {
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    pub physical: vk::PhysicalDevice,
    pub device: ash::Device,
    pub queue_family: u32,
    pub queue: vk::Queue,
    /// A second queue of the family, where it has one, for the context's post passes.
    pub post_queue: Option<vk::Queue>,
    pub queue_lock: Arc<Mutex<()>>,
    /// A queue family of transfers alone (TRANSFER without GRAPHICS and COMPUTE), where the
    /// device has one (NVIDIA: its copy engines, beside compute; lavapipe: none).
    pub transfer_family: Option<u32>,
    /// One queue of `transfer_family`, used under `queue_lock` (as every queue of the device is).
    pub transfer_queue: Option<vk::Queue>,
    pub memory_fd: ash::khr::external_memory_fd::Device,
    pub semaphore_fd: Option<ash::khr::external_semaphore_fd::Device>,
    pub identity: DeviceIdentity,
    pub name: String,
    memory_props: vk::PhysicalDeviceMemoryProperties,
    pool: vk::CommandPool,
    /// The command pool of `transfer_family`.
    transfer_pool: Option<vk::CommandPool>,
    /// What the main family can do, for its name ("graphics" or "compute").
    main_flags: vk::QueueFlags,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    messages: Box<Messages>,
}

impl Renderer {
    /// An instance (with the validation layer when asked) and a device on the
    /// first physical device with a compute-capable queue family, with
    /// external memory fds, external semaphore fds where the driver has them,
    /// and timeline semaphores.
    pub fn new(validation: bool) -> Result<Self> {
        // SAFETY: loads the system's Vulkan loader.
        let entry = unsafe { ash::Entry::load() }.context("loading libvulkan.so.1")?;
        let app = vk::ApplicationInfo::default().application_name(c"renderer").api_version(vk::API_VERSION_1_2);
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        let exts = [ash::ext::debug_utils::NAME.as_ptr()];
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validation {
            info = info.enabled_layer_names(&layers).enabled_extension_names(&exts);
        }
        // SAFETY: info and what it points to live for the call.
        let instance = unsafe { entry.create_instance(&info, None) }.context("vkCreateInstance")?;
        let messages = Box::new(Messages { errors: AtomicUsize::new(0) });
        let messenger = if validation {
            let loader = ash::ext::debug_utils::Instance::new(&entry, &instance);
            let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
                )
                .pfn_user_callback(Some(on_message))
                .user_data(&*messages as *const Messages as *mut c_void);
            // SAFETY: the user data (boxed) outlives the messenger, destroyed first in Drop.
            let m = unsafe { loader.create_debug_utils_messenger(&info, None) }?;
            Some((loader, m))
        } else {
            None
        };
        // SAFETY: the instance is live.
        let physical =
            *unsafe { instance.enumerate_physical_devices() }?.first().ok_or_else(|| anyhow!("no Vulkan device"))?;
        // SAFETY: physical comes from this instance.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let queue_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE | vk::QueueFlags::TRANSFER))
            .ok_or_else(|| anyhow!("no compute queue family"))? as u32;
        // SAFETY: physical comes from this instance.
        let available = unsafe { instance.enumerate_device_extension_properties(physical) }?;
        let has = |n: &CStr| available.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|x| x == n));
        if !has(ash::khr::external_memory_fd::NAME) {
            bail!("the driver has no VK_KHR_external_memory_fd");
        }
        let semaphores = has(ash::khr::external_semaphore_fd::NAME);
        let mut names = vec![ash::khr::external_memory_fd::NAME.as_ptr()];
        if semaphores {
            names.push(ash::khr::external_semaphore_fd::NAME.as_ptr());
        }
        let count = families[queue_family as usize].queue_count.min(2);
        let priorities = vec![1.0f32; count as usize];
        let transfer_family = transfer_only_family(&families).filter(|&f| f != queue_family);
        let mut queues =
            vec![vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];
        if let Some(f) = transfer_family {
            queues.push(vk::DeviceQueueCreateInfo::default().queue_family_index(f).queue_priorities(&[1.0]));
        }
        let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
        let create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&names)
            .push_next(&mut timeline);
        // SAFETY: physical comes from this instance; the extensions were listed above.
        let device = unsafe { instance.create_device(physical, &create, None) }.context("vkCreateDevice")?;
        // SAFETY: family and index were requested.
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        // SAFETY: as above, where the family has a second queue.
        let post_queue = (count > 1).then(|| unsafe { device.get_device_queue(queue_family, 1) });
        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: physical comes from this instance.
        unsafe { instance.get_physical_device_properties2(physical, &mut props) };
        let name =
            props.properties.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let identity = DeviceIdentity { device_uuid: id.device_uuid, driver_uuid: id.driver_uuid };
        // SAFETY: physical comes from this instance.
        let memory_props = unsafe { instance.get_physical_device_memory_properties(physical) };
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(queue_family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: the device is live.
        let pool = unsafe { device.create_command_pool(&pool_info, None) }?;
        // SAFETY: the transfer family's one queue was requested.
        let transfer_queue = transfer_family.map(|f| unsafe { device.get_device_queue(f, 0) });
        let transfer_pool = match transfer_family {
            Some(f) => {
                let info = vk::CommandPoolCreateInfo::default()
                    .queue_family_index(f)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
                // SAFETY: the device is live.
                Some(unsafe { device.create_command_pool(&info, None) }?)
            }
            None => None,
        };
        let memory_fd = ash::khr::external_memory_fd::Device::new(&instance, &device);
        let semaphore_fd = semaphores.then(|| ash::khr::external_semaphore_fd::Device::new(&instance, &device));
        Ok(Self {
            entry,
            instance,
            physical,
            device,
            queue_family,
            queue,
            post_queue,
            queue_lock: Arc::default(),
            transfer_family,
            transfer_queue,
            memory_fd,
            semaphore_fd,
            identity,
            name,
            memory_props,
            pool,
            transfer_pool,
            main_flags: families[queue_family as usize].queue_flags,
            messenger,
            messages,
        })
    }

    /// Validation errors so far (0 without validation).
    pub fn validation_errors(&self) -> usize {
        self.messages.errors.load(Ordering::Relaxed)
    }

    /// The renderer's device, for `neural_frame_client::Client::connect` (a worker in another process).
    pub fn client_device(&self) -> neural_frame_client::ClientDevice {
        neural_frame_client::ClientDevice {
            instance: self.instance.clone(),
            physical_device: self.physical,
            device: self.device.clone(),
            queue_family_index: self.queue_family,
            external_semaphore_fd: self.semaphore_fd.is_some(),
        }
    }

    /// The renderer's device, for `ContextBuilder::build_on` (bring your own device).
    pub fn caller_device(&self) -> CallerDevice {
        // SAFETY: the renderer's live objects; `queue` is a queue of `queue_family` on `device`.
        let mut caller = unsafe {
            CallerDevice::from_ash(
                &self.entry,
                &self.instance,
                self.physical,
                &self.device,
                self.queue,
                self.queue_family,
            )
        };
        // The instance was created for Vulkan 1.2 (from_ash reads the loader's and the device's versions).
        caller.api_version = vk::API_VERSION_1_2;
        // Its second queue for the post passes, and the lock it holds around its own submissions.
        caller.post_queue = self.post_queue;
        caller.queue_lock = Some(Arc::clone(&self.queue_lock));
        caller
    }

    /// Whether the renderer created its device with the semaphore fd extension.
    pub fn has_semaphore_fd(&self) -> bool {
        self.semaphore_fd.is_some()
    }

    fn memory_type(&self, bits: u32, flags: vk::MemoryPropertyFlags) -> Result<u32> {
        (0..self.memory_props.memory_type_count)
            .find(|&i| {
                bits & (1 << i) != 0 && self.memory_props.memory_types[i as usize].property_flags.contains(flags)
            })
            .ok_or_else(|| anyhow!("no memory type with {flags:?}"))
    }

    fn allocate(
        &self,
        req: vk::MemoryRequirements,
        flags: vk::MemoryPropertyFlags,
        exportable: bool,
        dedicated: vk::MemoryDedicatedAllocateInfo<'_>,
    ) -> Result<Allocation> {
        let type_index = self.memory_type(req.memory_type_bits, flags)?;
        let mut export =
            vk::ExportMemoryAllocateInfo::default().handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let mut dedicated = dedicated;
        let mut info = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(type_index);
        if exportable {
            info = info.push_next(&mut export).push_next(&mut dedicated);
        }
        // SAFETY: info is valid for the call.
        let memory = unsafe { self.device.allocate_memory(&info, None) }.context("vkAllocateMemory")?;
        Ok(Allocation { memory, size: req.size, type_index, dedicated: exportable })
    }

    /// A 2D optimal-tiling image; exportable as OPAQUE_FD (a dedicated allocation) when asked.
    pub fn image(
        &self,
        width: u32,
        height: u32,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        exportable: bool,
    ) -> Result<RImage> {
        self.image_shared(width, height, format, usage, exportable, &[])
    }

    /// `image`, shared by the queue families `concurrent` (`VK_SHARING_MODE_CONCURRENT`, with no
    /// ownership transfers between them) where it names two or more; exclusive otherwise.
    pub fn image_shared(
        &self,
        width: u32,
        height: u32,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        exportable: bool,
        concurrent: &[u32],
    ) -> Result<RImage> {
        let mut external =
            vk::ExternalMemoryImageCreateInfo::default().handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let mut info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(format)
            .extent(vk::Extent3D { width, height, depth: 1 })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(usage)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        if concurrent.len() >= 2 {
            info = info.sharing_mode(vk::SharingMode::CONCURRENT).queue_family_indices(concurrent);
        }
        if exportable {
            info = info.push_next(&mut external);
        }
        // SAFETY: info is valid.
        let image = unsafe { self.device.create_image(&info, None) }.context("vkCreateImage")?;
        // SAFETY: image is live.
        let req = unsafe { self.device.get_image_memory_requirements(image) };
        let alloc = self.allocate(
            req,
            vk::MemoryPropertyFlags::DEVICE_LOCAL,
            exportable,
            vk::MemoryDedicatedAllocateInfo::default().image(image),
        )?;
        // SAFETY: the memory fits the image.
        unsafe { self.device.bind_image_memory(image, alloc.memory, 0) }?;
        Ok(RImage { image, alloc, format, width, height, usage })
    }

    /// A buffer; host-visible and mapped when `host`, exportable when asked.
    /// An exportable, device-local buffer over an allocation of its own that is not
    /// dedicated to it: a host's pooled block, into which a context places planes at offsets.
    pub fn pool(&self, size: u64, usage: vk::BufferUsageFlags) -> Result<RBuffer> {
        let mut external =
            vk::ExternalMemoryBufferCreateInfo::default().handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let info = vk::BufferCreateInfo::default().size(size).usage(usage).push_next(&mut external);
        // SAFETY: info is valid.
        let buffer = unsafe { self.device.create_buffer(&info, None) }.context("vkCreateBuffer")?;
        // SAFETY: buffer is live.
        let req = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let type_index = self.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
        let mut export =
            vk::ExportMemoryAllocateInfo::default().handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let alloc_info = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index)
            .push_next(&mut export);
        // SAFETY: info is valid for the call.
        let memory = unsafe { self.device.allocate_memory(&alloc_info, None) }.context("vkAllocateMemory")?;
        // SAFETY: the memory fits the buffer.
        unsafe { self.device.bind_buffer_memory(buffer, memory, 0) }?;
        let alloc = Allocation { memory, size: req.size, type_index, dedicated: false };
        Ok(RBuffer { buffer, alloc, size, usage, mapped: std::ptr::null_mut() })
    }

    pub fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, host: bool, exportable: bool) -> Result<RBuffer> {
        let mut external =
            vk::ExternalMemoryBufferCreateInfo::default().handle_types(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        let mut info = vk::BufferCreateInfo::default().size(size).usage(usage);
        if exportable {
            info = info.push_next(&mut external);
        }
        // SAFETY: info is valid.
        let buffer = unsafe { self.device.create_buffer(&info, None) }.context("vkCreateBuffer")?;
        // SAFETY: buffer is live.
        let req = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let flags = if host {
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT
        } else {
            vk::MemoryPropertyFlags::DEVICE_LOCAL
        };
        let alloc = self.allocate(req, flags, exportable, vk::MemoryDedicatedAllocateInfo::default().buffer(buffer))?;
        // SAFETY: the memory fits the buffer.
        unsafe { self.device.bind_buffer_memory(buffer, alloc.memory, 0) }?;
        let mapped = if host {
            // SAFETY: host-visible memory, mapped once.
            unsafe { self.device.map_memory(alloc.memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }? as *mut u8
        } else {
            std::ptr::null_mut()
        };
        Ok(RBuffer { buffer, alloc, size, usage, mapped })
    }

    /// A new OPAQUE_FD for exportable memory, described for neural-frame.
    pub fn export(&self, alloc: &Allocation) -> Result<MemoryImport> {
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(alloc.memory)
            .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the memory was allocated exportable.
        let fd = unsafe { self.memory_fd.get_memory_fd(&info) }.context("vkGetMemoryFdKHR")?;
        Ok(MemoryImport {
            // SAFETY: a new descriptor, ours.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            allocation_size: alloc.size,
            memory_type_index: alloc.type_index,
            dedicated: alloc.dedicated,
            origin: self.identity,
        })
    }

    /// A new OPAQUE_FD for an exportable optimal-tiling image's memory, with the image described
    /// for neural-frame.
    pub fn export_image(&self, i: &RImage) -> Result<ImageImport> {
        Ok(ImageImport {
            memory: self.export(&i.alloc)?,
            format: i.format,
            width: i.width,
            height: i.height,
            usage: i.usage,
            tiling: vk::ImageTiling::OPTIMAL,
        })
    }

    /// A timeline semaphore at 0 (exportable when asked) or a binary one.
    pub fn semaphore(&self, timeline: bool, exportable: bool) -> Result<vk::Semaphore> {
        let mut ty = vk::SemaphoreTypeCreateInfo::default().semaphore_type(if timeline {
            vk::SemaphoreType::TIMELINE
        } else {
            vk::SemaphoreType::BINARY
        });
        let mut export =
            vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut ty);
        if exportable {
            info = info.push_next(&mut export);
        }
        // SAFETY: info is valid.
        Ok(unsafe { self.device.create_semaphore(&info, None) }?)
    }

    /// A new OPAQUE_FD for an exportable semaphore.
    pub fn export_semaphore(&self, semaphore: vk::Semaphore) -> Result<OwnedFd> {
        let loader = self.semaphore_fd.as_ref().ok_or_else(|| anyhow!("no semaphore fds here"))?;
        let info = vk::SemaphoreGetFdInfoKHR::default()
            .semaphore(semaphore)
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the semaphore was created exportable.
        let fd = unsafe { loader.get_semaphore_fd(&info) }?;
        // SAFETY: a new descriptor, ours.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// A timeline semaphore of the renderer's over the payload exported as `fd` (neural-frame's timelines).
    pub fn import_semaphore(&self, fd: OwnedFd) -> Result<vk::Semaphore> {
        let loader = self.semaphore_fd.as_ref().ok_or_else(|| anyhow!("no semaphore fds here"))?;
        let semaphore = self.semaphore(true, false)?;
        let info = vk::ImportSemaphoreFdInfoKHR::default()
            .semaphore(semaphore)
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD)
            .fd(std::os::fd::IntoRawFd::into_raw_fd(fd));
        // SAFETY: a fresh timeline semaphore; on success the descriptor belongs to the driver.
        unsafe { loader.import_semaphore_fd(&info) }.context("vkImportSemaphoreFdKHR")?;
        Ok(semaphore)
    }

    /// Waits on the host until `semaphore` reaches `value` (bounded).
    pub fn wait(&self, semaphore: vk::Semaphore, value: u64) -> Result<()> {
        let sems = [semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&sems).values(&values);
        // SAFETY: a live timeline semaphore of this device.
        unsafe { self.device.wait_semaphores(&info, 30_000_000_000) }.context("waiting on the renderer's timeline")
    }

    /// Signals `value` from the host.
    pub fn signal(&self, semaphore: vk::Semaphore, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(semaphore).value(value);
        // SAFETY: a live timeline semaphore whose value is below `value`.
        Ok(unsafe { self.device.signal_semaphore(&info) }?)
    }

    /// A command buffer recorded by `record` (not one-time: resubmittable), for the main queue.
    pub fn record(&self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) -> Result<vk::CommandBuffer> {
        self.record_on(Lane::Main, record)
    }

    /// Submits `cmds` on the renderer's queue with timeline waits and signals.
    pub fn submit(
        &self,
        cmds: &[vk::CommandBuffer],
        wait: &[(vk::Semaphore, u64)],
        signal: &[(vk::Semaphore, u64)],
    ) -> Result<()> {
        self.submit_on(Lane::Main, cmds, wait, signal)
    }

    /// Waits for the renderer's device to be idle (its queues, and a context's on it).
    pub fn idle(&self) -> Result<()> {
        let _guard = self.queue_lock.lock().map_err(|_| anyhow!("queue lock poisoned"))?;
        // SAFETY: every queue is used under this lock (the context's included).
        Ok(unsafe { self.device.device_wait_idle() }?)
    }

    /// The bytes of a mapped buffer (its GPU writes must be complete).
    pub fn read(&self, b: &RBuffer, len: usize) -> Vec<u8> {
        // SAFETY: the buffer is mapped for its whole size, and the caller waited for its writes.
        unsafe { std::slice::from_raw_parts(b.mapped, len) }.to_vec()
    }

    /// Writes bytes into a mapped buffer (no GPU work may use it meanwhile).
    pub fn write(&self, b: &RBuffer, data: &[u8]) {
        // SAFETY: the buffer is mapped for its whole size; nothing on the GPU uses it now.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.mapped, data.len().min(b.size as usize)) };
    }

    pub fn destroy_image(&self, i: RImage) {
        // SAFETY: no GPU work uses the image any more (callers wait first).
        unsafe {
            self.device.destroy_image(i.image, None);
            self.device.free_memory(i.alloc.memory, None);
        }
    }

    pub fn destroy_buffer(&self, b: RBuffer) {
        // SAFETY: no GPU work uses the buffer any more (callers wait first).
        unsafe {
            self.device.destroy_buffer(b.buffer, None);
            self.device.free_memory(b.alloc.memory, None);
        }
    }

    pub fn destroy_semaphore(&self, s: vk::Semaphore) {
        // SAFETY: no GPU work uses the semaphore any more.
        unsafe { self.device.destroy_semaphore(s, None) };
    }
}

/// A queue family transfer (source, destination), where there is one.
type Transfer = Option<(u32, u32)>;

impl Renderer {
    /// Puts new images in `GENERAL` (shared by fd: and hands them to the
    /// external queue family, where they live between uses), and waits.
    pub fn prepare(&self, images: &[&RImage], external: bool) -> Result<()> {
        self.prepare_on(Lane::Main, images, external)
    }

    /// The renderer's "draw": copies `staging` into `input` (in `GENERAL`; shared
    /// by fd: taken from and handed back to the external queue family).
    pub fn render_commands(&self, input: &RImage, staging: &RBuffer, external: bool) -> Result<vk::CommandBuffer> {
        self.render_commands_on(Lane::Main, input, staging, external)
    }

    /// The renderer's readback of `output` into the host-visible `readback`
    /// (shared by fd: taken from and handed back to the external queue family).
    pub fn read_commands(&self, output: &RImage, readback: &RBuffer, external: bool) -> Result<vk::CommandBuffer> {
        self.read_commands_on(Lane::Main, output, readback, external)
    }
}

/// Which of the renderer's queues records and runs a piece of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// The compute-capable family's first queue (`queue`, `submit`, `record`).
    Main,
    /// The transfer-only family's queue (`transfer_queue`), where the device has one.
    Transfer,
}

/// The first queue family of transfers alone (TRANSFER without GRAPHICS and COMPUTE), where
/// there is one: preferably one that can do nothing else (sparse binding and protected memory
/// aside), else any (a video family that also transfers, say).
pub fn transfer_only_family(families: &[vk::QueueFamilyProperties]) -> Option<u32> {
    let only = |f: &vk::QueueFamilyProperties| {
        f.queue_count > 0
            && f.queue_flags.contains(vk::QueueFlags::TRANSFER)
            && !f.queue_flags.intersects(vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE)
    };
    let plain = |f: &vk::QueueFamilyProperties| {
        f.queue_flags & !(vk::QueueFlags::SPARSE_BINDING | vk::QueueFlags::PROTECTED) == vk::QueueFlags::TRANSFER
    };
    let found = families.iter().position(|f| only(f) && plain(f)).or_else(|| families.iter().position(only));
    found.map(|i| i as u32)
}

impl Renderer {
    /// `lane`'s queue, family and command pool; an error for `Transfer` where the device has none.
    fn lane(&self, lane: Lane) -> Result<(vk::Queue, u32, vk::CommandPool)> {
        match lane {
            Lane::Main => Ok((self.queue, self.queue_family, self.pool)),
            Lane::Transfer => match (self.transfer_queue, self.transfer_family, self.transfer_pool) {
                (Some(q), Some(f), Some(p)) => Ok((q, f, p)),
                _ => bail!("the renderer's device ({}) has no transfer-only queue family", self.name),
            },
        }
    }

    /// `Lane::Transfer` where the device has a transfer-only family and it is asked for, else `Lane::Main`.
    pub fn lane_for(&self, transfer: bool) -> Lane {
        if transfer && self.transfer_queue.is_some() { Lane::Transfer } else { Lane::Main }
    }

    /// The queue family index of `lane`.
    pub fn family_of(&self, lane: Lane) -> Result<u32> {
        Ok(self.lane(lane)?.1)
    }

    /// A name for `lane`'s queue: "transfer", or the main family's "graphics" (or "compute" where
    /// it cannot draw).
    pub fn lane_name(&self, lane: Lane) -> &'static str {
        match lane {
            Lane::Transfer => "transfer",
            Lane::Main if self.main_flags.contains(vk::QueueFlags::GRAPHICS) => "graphics",
            Lane::Main => "compute",
        }
    }

    /// `record`, into a command buffer of `lane`'s family's pool.
    pub fn record_on(
        &self,
        lane: Lane,
        record: impl FnOnce(&ash::Device, vk::CommandBuffer),
    ) -> Result<vk::CommandBuffer> {
        let (_, _, pool) = self.lane(lane)?;
        let info = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
        // SAFETY: the pool is the renderer's; one thread uses it.
        let cmd = unsafe { self.device.allocate_command_buffers(&info) }?[0];
        // Resubmitted frame after frame: its earlier submission may still be pending (the GPU
        // waits that order its uses run through the context, which the validation layer
        // cannot follow), so it is recorded for simultaneous use.
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
        // SAFETY: a fresh command buffer.
        unsafe { self.device.begin_command_buffer(cmd, &begin) }?;
        record(&self.device, cmd);
        // SAFETY: cmd is recording.
        unsafe { self.device.end_command_buffer(cmd) }?;
        Ok(cmd)
    }

    /// `submit`, on `lane`'s queue (command buffers recorded for its family), under the queue lock.
    pub fn submit_on(
        &self,
        lane: Lane,
        cmds: &[vk::CommandBuffer],
        wait: &[(vk::Semaphore, u64)],
        signal: &[(vk::Semaphore, u64)],
    ) -> Result<()> {
        let (queue, _, _) = self.lane(lane)?;
        let ws: Vec<_> = wait.iter().map(|w| w.0).collect();
        let wv: Vec<_> = wait.iter().map(|w| w.1).collect();
        let stages = vec![vk::PipelineStageFlags::ALL_COMMANDS; ws.len()];
        let ss: Vec<_> = signal.iter().map(|s| s.0).collect();
        let sv: Vec<_> = signal.iter().map(|s| s.1).collect();
        let mut timeline =
            vk::TimelineSemaphoreSubmitInfo::default().wait_semaphore_values(&wv).signal_semaphore_values(&sv);
        let info = vk::SubmitInfo::default()
            .command_buffers(cmds)
            .wait_semaphores(&ws)
            .wait_dst_stage_mask(&stages)
            .signal_semaphores(&ss)
            .push_next(&mut timeline);
        // `idle` waits for the whole device under this lock: every queue is submitted to under it.
        let _guard = self.queue_lock.lock().map_err(|_| anyhow!("queue lock poisoned"))?;
        // SAFETY: the queue is locked; the command buffers (of its family) and semaphores are live.
        Ok(unsafe { self.device.queue_submit(queue, &[info], vk::Fence::null()) }?)
    }

    /// The transfers from and to the external queue family for `lane`'s family, when shared by fd.
    fn families_on(&self, lane: Lane, external: bool) -> Result<(Transfer, Transfer)> {
        let family = self.family_of(lane)?;
        Ok((
            external.then_some((vk::QUEUE_FAMILY_EXTERNAL, family)),
            external.then_some((family, vk::QUEUE_FAMILY_EXTERNAL)),
        ))
    }

    /// `prepare`, recorded and submitted on `lane` (shared by fd: released from `lane`'s family
    /// to the external one, which `lane`'s commands then acquire from), and waits.
    pub fn prepare_on(&self, lane: Lane, images: &[&RImage], external: bool) -> Result<()> {
        let (_, to_ext) = self.families_on(lane, external)?;
        let all = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
        let cmd = self.record_on(lane, |d, cmd| {
            let b: Vec<_> = images
                .iter()
                .map(|i| {
                    barrier::image(
                        i.image,
                        (vk::ImageLayout::UNDEFINED, vk::ImageLayout::GENERAL),
                        (vk::AccessFlags::empty(), all),
                        to_ext,
                    )
                })
                .collect();
            barrier::record(d, cmd, &[], &b);
        })?;
        self.once_on(lane, cmd)
    }

    /// `render_commands`, for `lane`'s queue: the input is acquired from the external family
    /// by `lane`'s family, the copy runs there, and that family releases it to the external one.
    pub fn render_commands_on(
        &self,
        lane: Lane,
        input: &RImage,
        staging: &RBuffer,
        external: bool,
    ) -> Result<vk::CommandBuffer> {
        let (from_ext, to_ext) = self.families_on(lane, external)?;
        let general = (vk::ImageLayout::GENERAL, vk::ImageLayout::GENERAL);
        let write = vk::AccessFlags::TRANSFER_WRITE;
        self.record_on(lane, |d, cmd| {
            let take = barrier::image(input.image, general, (vk::AccessFlags::empty(), write), from_ext);
            barrier::record(d, cmd, &[], &[take]);
            // SAFETY: cmd is recording; the staging buffer holds the whole picture.
            unsafe {
                d.cmd_copy_buffer_to_image(
                    cmd,
                    staging.buffer,
                    input.image,
                    vk::ImageLayout::GENERAL,
                    &[region(input.width, input.height)],
                )
            };
            let all = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
            barrier::record(d, cmd, &[], &[barrier::image(input.image, general, (write, all), to_ext)]);
        })
    }

    /// `read_commands`, for `lane`'s queue: the output is acquired from the external family by
    /// `lane`'s family, copied into `readback` there, and released to the external one. The
    /// copy's writes are made visible to the host and to later commands of `lane`'s family;
    /// a device-local `readback` read on another family needs `hand_over` first.
    pub fn read_commands_on(
        &self,
        lane: Lane,
        output: &RImage,
        readback: &RBuffer,
        external: bool,
    ) -> Result<vk::CommandBuffer> {
        let (from_ext, to_ext) = self.families_on(lane, external)?;
        let general = (vk::ImageLayout::GENERAL, vk::ImageLayout::GENERAL);
        let read = vk::AccessFlags::TRANSFER_READ;
        self.record_on(lane, |d, cmd| {
            let take = barrier::image(output.image, general, (vk::AccessFlags::empty(), read), from_ext);
            barrier::record(d, cmd, &[], &[take]);
            // SAFETY: cmd is recording; the readback buffer holds the whole output.
            unsafe {
                d.cmd_copy_image_to_buffer(
                    cmd,
                    output.image,
                    vk::ImageLayout::GENERAL,
                    readback.buffer,
                    &[region(output.width, output.height)],
                )
            };
            let seen = vk::AccessFlags::HOST_READ | vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
            let host = barrier::buffer(readback.buffer, (vk::AccessFlags::TRANSFER_WRITE, seen), None);
            let give = barrier::image(output.image, general, (read, vk::AccessFlags::empty()), to_ext);
            barrier::record(d, cmd, &[host], &[give]);
        })
    }

    /// Moves `buffers` (exclusive sharing) from `from`'s queue family to `to`'s: a release
    /// submitted on `from`'s queue, the device idle, the matching acquire on `to`'s, the device
    /// idle. Their contents stay defined on `to` (without the transfer they would not be). Once,
    /// outside the timed frames; nothing to do where both are the same family.
    pub fn hand_over(&self, buffers: &[&RBuffer], from: Lane, to: Lane) -> Result<()> {
        let families = (self.family_of(from)?, self.family_of(to)?);
        if families.0 == families.1 || buffers.is_empty() {
            return Ok(());
        }
        let all = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
        let barriers = |access: (vk::AccessFlags, vk::AccessFlags)| -> Vec<_> {
            buffers.iter().map(|b| barrier::buffer(b.buffer, access, Some(families))).collect()
        };
        let release = self.record_on(from, |d, cmd| {
            barrier::record(d, cmd, &barriers((vk::AccessFlags::MEMORY_WRITE, vk::AccessFlags::empty())), &[])
        })?;
        self.once_on(from, release)?;
        let acquire =
            self.record_on(to, |d, cmd| barrier::record(d, cmd, &barriers((vk::AccessFlags::empty(), all)), &[]))?;
        self.once_on(to, acquire)
    }

    /// `once`, on `lane`'s queue.
    fn once_on(&self, lane: Lane, cmd: vk::CommandBuffer) -> Result<()> {
        let (_, _, pool) = self.lane(lane)?;
        self.submit_on(lane, &[cmd], &[], &[])?;
        self.idle()?;
        // SAFETY: the command buffer is the pool's and no longer pending (the device is idle).
        unsafe { self.device.free_command_buffers(pool, &[cmd]) };
        Ok(())
    }
}

impl Renderer {
    /// Puts `data` into `dst` (device-local, `TRANSFER_DST`) through a host-visible
    /// staging buffer of its own, once, before any frame, and waits for it.
    pub fn upload(&self, dst: &RBuffer, data: &[u8]) -> Result<()> {
        let size = data.len() as u64;
        if size > dst.size {
            bail!("{size} bytes do not fit a buffer of {}", dst.size);
        }
        let staging = self.buffer(size, vk::BufferUsageFlags::TRANSFER_SRC, true, false)?;
        self.write(&staging, data);
        let cmd = self.record(|d, cmd| {
            // SAFETY: cmd is recording; both buffers hold `size` bytes.
            unsafe { d.cmd_copy_buffer(cmd, staging.buffer, dst.buffer, &[vk::BufferCopy::default().size(size)]) };
            let done = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
            barrier::record(d, cmd, &[barrier::buffer(dst.buffer, (vk::AccessFlags::TRANSFER_WRITE, done), None)], &[]);
        });
        self.once(cmd?)?;
        self.destroy_buffer(staging);
        Ok(())
    }

    /// The first `len` bytes of `src` (device-local, `TRANSFER_SRC`), read back through
    /// a host-visible buffer of its own: after the frames, untimed. Waits for the
    /// renderer's device to be idle (every earlier write to `src` is then done; a
    /// barrier makes the transfers' writes visible to the copy).
    pub fn download(&self, src: &RBuffer, len: usize) -> Result<Vec<u8>> {
        let size = len as u64;
        if size > src.size {
            bail!("{size} bytes from a buffer of {}", src.size);
        }
        let host = self.buffer(size, vk::BufferUsageFlags::TRANSFER_DST, true, false)?;
        let cmd = self.record(|d, cmd| {
            let written = vk::AccessFlags::MEMORY_WRITE;
            barrier::record(
                d,
                cmd,
                &[barrier::buffer(src.buffer, (written, vk::AccessFlags::TRANSFER_READ), None)],
                &[],
            );
            // SAFETY: cmd is recording; both buffers hold `size` bytes.
            unsafe { d.cmd_copy_buffer(cmd, src.buffer, host.buffer, &[vk::BufferCopy::default().size(size)]) };
            let to_host = (vk::AccessFlags::TRANSFER_WRITE, vk::AccessFlags::HOST_READ);
            barrier::record(d, cmd, &[barrier::buffer(host.buffer, to_host, None)], &[]);
        });
        self.once(cmd?)?;
        let bytes = self.read(&host, len);
        self.destroy_buffer(host);
        Ok(bytes)
    }

    /// Submits a one-off command buffer, waits for the device to be idle and frees it.
    /// (On an error what it used is left to the device's end: the GPU may still use it.)
    fn once(&self, cmd: vk::CommandBuffer) -> Result<()> {
        self.submit(&[cmd], &[], &[])?;
        self.idle()?;
        // SAFETY: the command buffer is the pool's and no longer pending (the device is idle).
        unsafe { self.device.free_command_buffers(self.pool, &[cmd]) };
        Ok(())
    }
}

/// Barrier helpers for the renderer's own command buffers.
pub mod barrier {
    use ash::vk;

    const COLOR: vk::ImageSubresourceRange = vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: 1,
    };

    /// An image barrier, optionally a queue family transfer (`Some((src, dst))`).
    pub fn image(
        image: vk::Image,
        (old, new): (vk::ImageLayout, vk::ImageLayout),
        (src, dst): (vk::AccessFlags, vk::AccessFlags),
        families: Option<(u32, u32)>,
    ) -> vk::ImageMemoryBarrier<'static> {
        let (s, d) = families.unwrap_or((vk::QUEUE_FAMILY_IGNORED, vk::QUEUE_FAMILY_IGNORED));
        vk::ImageMemoryBarrier::default()
            .image(image)
            .old_layout(old)
            .new_layout(new)
            .src_access_mask(src)
            .dst_access_mask(dst)
            .src_queue_family_index(s)
            .dst_queue_family_index(d)
            .subresource_range(COLOR)
    }

    /// A buffer barrier, optionally a queue family transfer.
    pub fn buffer(
        buffer: vk::Buffer,
        (src, dst): (vk::AccessFlags, vk::AccessFlags),
        families: Option<(u32, u32)>,
    ) -> vk::BufferMemoryBarrier<'static> {
        let (s, d) = families.unwrap_or((vk::QUEUE_FAMILY_IGNORED, vk::QUEUE_FAMILY_IGNORED));
        vk::BufferMemoryBarrier::default()
            .buffer(buffer)
            .size(vk::WHOLE_SIZE)
            .src_access_mask(src)
            .dst_access_mask(dst)
            .src_queue_family_index(s)
            .dst_queue_family_index(d)
    }

    /// Records the barriers, all stages to all stages.
    pub fn record(
        device: &ash::Device,
        cmd: vk::CommandBuffer,
        buffers: &[vk::BufferMemoryBarrier<'_>],
        images: &[vk::ImageMemoryBarrier<'_>],
    ) {
        // SAFETY: cmd is recording on this device; the barriers name live resources.
        unsafe {
            device.cmd_pipeline_barrier(
                cmd,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::DependencyFlags::empty(),
                &[],
                buffers,
                images,
            )
        };
    }
}

/// The whole-image copy region.
pub fn region(width: u32, height: u32) -> vk::BufferImageCopy {
    vk::BufferImageCopy::default()
        .image_subresource(vk::ImageSubresourceLayers {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            mip_level: 0,
            base_array_layer: 0,
            layer_count: 1,
        })
        .image_extent(vk::Extent3D { width, height, depth: 1 })
}

impl Drop for Renderer {
    fn drop(&mut self) {
        // SAFETY: everything the renderer made is destroyed by its owners first (or with the
        // device); the device is idled before it goes.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_command_pool(self.pool, None);
            if let Some(pool) = self.transfer_pool {
                self.device.destroy_command_pool(pool, None);
            }
            self.device.destroy_device(None);
            if let Some((loader, m)) = self.messenger.take() {
                loader.destroy_debug_utils_messenger(m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}
