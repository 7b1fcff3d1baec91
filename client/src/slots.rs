//! The Vulkan half of the client: exportable GPU slots on the caller's device,
//! the timeline semaphores of GPU mode, and the queue family barriers that hand
//! a slot to the worker and take it back.
//!
//! Everything here uses the caller's `VkDevice` and never destroys it. Slot
//! memory is a dedicated, exportable (`OPAQUE_FD`) allocation per buffer, so the
//! worker can import exactly one buffer's memory; it is never mapped on the host.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use ash::vk;

use crate::error::{Error, Result};
use crate::protocol::SlotMemory;

/// The usage every slot buffer is created with.
const SLOT_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// The one handle type the client shares memory and semaphores as.
const MEMORY_HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
/// See [`MEMORY_HANDLE`].
const SEMAPHORE_HANDLE: vk::ExternalSemaphoreHandleTypeFlags = vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;

/// The caller's Vulkan device (borrowed; the client never destroys it).
///
/// Create it with Vulkan 1.2 or later (instance `apiVersion` and driver), with
/// the device extension `VK_KHR_external_memory_fd` (required: slot memory is
/// shared as `OPAQUE_FD`), and for GPU mode also `VK_KHR_external_semaphore_fd`
/// and the `timelineSemaphore` feature (`VkPhysicalDeviceVulkan12Features` or
/// `VkPhysicalDeviceTimelineSemaphoreFeatures`). Without those two the client
/// can still serve in host mode.
///
/// A renderer that creates its device for serving:
///
/// ```no_run
/// use neural_frame_client::ClientDevice;
/// use neural_frame_client::ash::{self, vk};
///
/// // SAFETY: the Vulkan loader's initialisation has no requirements here; nothing else loads it now.
/// let entry = unsafe { ash::Entry::load() }?;
/// let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
/// let info = vk::InstanceCreateInfo::default().application_info(&app);
/// // SAFETY: `info` and what it points to live for the call.
/// let instance = unsafe { entry.create_instance(&info, None) }?;
/// // SAFETY: the instance is live.
/// let physical_device = *unsafe { instance.enumerate_physical_devices() }?.first().ok_or("no Vulkan device")?;
/// // SAFETY: the physical device is of this instance.
/// let families = unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
/// let queue_family_index =
///     families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE)).ok_or("no compute queue")? as u32;
///
/// // VK_KHR_external_memory_fd is required; the semaphore extension and the timeline feature give GPU mode.
/// // SAFETY: as above.
/// let available = unsafe { instance.enumerate_device_extension_properties(physical_device) }?;
/// let has = |name: &std::ffi::CStr| available.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name));
/// let external_semaphore_fd = has(ash::khr::external_semaphore_fd::NAME);
/// let mut extensions = vec![ash::khr::external_memory_fd::NAME.as_ptr()];
/// if external_semaphore_fd {
///     extensions.push(ash::khr::external_semaphore_fd::NAME.as_ptr());
/// }
/// let mut supported = vk::PhysicalDeviceVulkan12Features::default();
/// let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut supported);
/// // SAFETY: the physical device is of this instance; the chain is one output structure that lives for the call.
/// unsafe { instance.get_physical_device_features2(physical_device, &mut features) };
/// let timelines = supported.timeline_semaphore == vk::TRUE;
/// let mut enabled = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(timelines);
///
/// let priorities = [1.0];
/// let queues =
///     [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family_index).queue_priorities(&priorities)];
/// let info = vk::DeviceCreateInfo::default()
///     .queue_create_infos(&queues)
///     .enabled_extension_names(&extensions)
///     .push_next(&mut enabled);
/// // SAFETY: the extensions are ones the device lists, the feature one it supports; `info` and its chain live
/// // for the call.
/// let device = unsafe { instance.create_device(physical_device, &info, None) }?;
///
/// let client_device = ClientDevice { instance, physical_device, device, queue_family_index, external_semaphore_fd };
/// # let _ = client_device;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ClientDevice {
    /// The instance `device` was created from.
    pub instance: ash::Instance,
    /// The physical device `device` was created on.
    pub physical_device: vk::PhysicalDevice,
    /// The logical device the slots live on.
    pub device: ash::Device,
    /// The queue family whose queue writes the input slots and reads the output
    /// slots (the family the barriers here transfer ownership from and to).
    pub queue_family_index: u32,
    /// Whether `VK_KHR_external_semaphore_fd` was enabled on `device`.
    pub external_semaphore_fd: bool,
}

/// Something the caller's device lacks, and what would supply it.
#[derive(Debug, Clone)]
struct Gap {
    what: String,
    remedy: String,
}

impl Gap {
    fn new(what: impl Into<String>, remedy: impl Into<String>) -> Self {
        Self { what: what.into(), remedy: remedy.into() }
    }
    fn error(&self) -> Error {
        Error::Unsupported { what: self.what.clone(), remedy: self.remedy.clone() }
    }
}

/// What the client's device can share, and its identity.
pub(crate) struct Exporter {
    /// The caller's device (a clone of the handles and function tables).
    device: ClientDevice,
    /// `VK_KHR_external_memory_fd`, checked loaded.
    memory_fd: ash::khr::external_memory_fd::Device,
    /// `VK_KHR_external_semaphore_fd`, where enabled and loaded.
    semaphore_fd: Option<ash::khr::external_semaphore_fd::Device>,
    /// `deviceUUID`, `driverUUID`.
    identity: ([u8; 16], [u8; 16]),
    /// The device's memory types and heaps.
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    /// `VkPhysicalDeviceMaintenance3Properties::maxMemoryAllocationSize`.
    max_allocation: u64,
    /// Whether timeline semaphores can be made and used here at all.
    timelines: std::result::Result<(), Gap>,
    /// Whether timeline semaphores can be exported and imported as `OPAQUE_FD` here.
    shared_timelines: std::result::Result<(), Gap>,
}

/// Whether `name` resolves on `device`: a command of an extension that was not
/// enabled (or of a core version above the instance's) resolves to null.
///
/// # Safety
///
/// `device` is a live device created from `instance`.
unsafe fn resolves(instance: &ash::Instance, device: vk::Device, name: &CStr) -> bool {
    // SAFETY: `device` is live and of `instance` (this function's contract); `name` is NUL-terminated.
    unsafe { instance.get_device_proc_addr(device, name.as_ptr()) }.is_some()
}

impl Exporter {
    /// Checks what the caller's device can share and learns its identity.
    ///
    /// Fails with [`Error::Unsupported`] where the device is older than Vulkan 1.1
    /// or `VK_KHR_external_memory_fd` is not enabled on it, and with
    /// [`Error::InvalidArgument`] where `queue_family_index` is not one of its
    /// families. `VK_KHR_external_semaphore_fd` claimed enabled but not loaded is
    /// also an error; timeline semaphores that cannot be shared are not (see
    /// [`Exporter::can_share_timelines`]).
    ///
    /// # Safety
    ///
    /// The handles in `device` are valid (`device.device` created from
    /// `device.instance` on `device.physical_device`, with the extensions its
    /// fields claim), and outlive the `Exporter` and everything made from it.
    pub(crate) unsafe fn new(device: &ClientDevice) -> Result<Exporter> {
        let instance = &device.instance;
        let physical = device.physical_device;
        let handle = device.device.handle();

        // SAFETY: `physical` is a live physical device of `instance` (this function's contract).
        let properties = unsafe { instance.get_physical_device_properties(physical) };
        let version = properties.api_version;
        if (vk::api_version_major(version), vk::api_version_minor(version)) < (1, 1) {
            return Err(Error::Unsupported {
                what: format!(
                    "Vulkan 1.1 on the caller's device (its driver reports {}.{})",
                    vk::api_version_major(version),
                    vk::api_version_minor(version)
                ),
                remedy: "use a Vulkan 1.2 (or later) driver and instance".into(),
            });
        }
        // SAFETY: `physical` is a live physical device of `instance`.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        if device.queue_family_index as usize >= families.len() {
            return Err(Error::InvalidArgument(format!(
                "queue family {} of a device with {} queue families",
                device.queue_family_index,
                families.len()
            )));
        }

        // SAFETY: `handle` is live and of `instance`.
        if !unsafe { resolves(instance, handle, c"vkGetMemoryFdKHR") } {
            return Err(Error::Unsupported {
                what: "VK_KHR_external_memory_fd on the caller's device (vkGetMemoryFdKHR does not resolve)".into(),
                remedy: extension_remedy(device, ash::khr::external_memory_fd::NAME),
            });
        }
        let memory_fd = ash::khr::external_memory_fd::Device::new(instance, &device.device);

        let semaphore_fd = if device.external_semaphore_fd {
            // SAFETY: `handle` is live and of `instance`.
            let get = unsafe { resolves(instance, handle, c"vkGetSemaphoreFdKHR") };
            // SAFETY: as above.
            let import = unsafe { resolves(instance, handle, c"vkImportSemaphoreFdKHR") };
            if !(get && import) {
                return Err(Error::Unsupported {
                    what: "VK_KHR_external_semaphore_fd on the caller's device, which ClientDevice::external_semaphore_fd \
                           claims is enabled (vkGetSemaphoreFdKHR or vkImportSemaphoreFdKHR does not resolve)"
                        .into(),
                    remedy: format!(
                        "{}, or set ClientDevice::external_semaphore_fd to false (host mode only)",
                        extension_remedy(device, ash::khr::external_semaphore_fd::NAME)
                    ),
                });
            }
            Some(ash::khr::external_semaphore_fd::Device::new(instance, &device.device))
        } else {
            None
        };

        let mut id = vk::PhysicalDeviceIDProperties::default();
        let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut properties2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id).push_next(&mut maintenance3);
        // SAFETY: `physical` is live; the chain is two output structures that live for the call.
        unsafe { instance.get_physical_device_properties2(physical, &mut properties2) };
        let identity = (id.device_uuid, id.driver_uuid);
        let max_allocation = maintenance3.max_memory_allocation_size;

        // SAFETY: `physical` is a live physical device of `instance`.
        let memory_properties = unsafe { instance.get_physical_device_memory_properties(physical) };

        let timelines = timeline_support(device);
        let shared_timelines = timelines.clone().and_then(|()| timeline_sharing(device, semaphore_fd.is_some()));

        Ok(Exporter {
            device: device.clone(),
            memory_fd,
            semaphore_fd,
            identity,
            memory_properties,
            max_allocation,
            timelines,
            shared_timelines,
        })
    }

    /// `(deviceUUID, driverUUID)` of the caller's physical device, from
    /// `VkPhysicalDeviceIDProperties`: the worker serves only the same GPU and driver.
    pub(crate) fn identity(&self) -> ([u8; 16], [u8; 16]) {
        self.identity
    }

    /// Whether timeline semaphores can be exported *and* imported as `OPAQUE_FD`
    /// here: the timeline semaphore functions resolve and the feature is
    /// supported, `VK_KHR_external_semaphore_fd` is enabled, and
    /// `vkGetPhysicalDeviceExternalSemaphoreProperties` for a timeline semaphore
    /// reports `EXPORTABLE | IMPORTABLE` for `OPAQUE_FD`. GPU mode needs it; false
    /// on lavapipe (Mesa's software driver has no semaphore fds).
    pub(crate) fn can_share_timelines(&self) -> bool {
        self.shared_timelines.is_ok()
    }

    /// A dedicated, exportable (`OPAQUE_FD`) buffer of `size` bytes with usage
    /// `STORAGE_BUFFER | TRANSFER_SRC | TRANSFER_DST`, never host-mapped.
    ///
    /// Its memory is of a `DEVICE_LOCAL` type where one the buffer allows has room
    /// (one that is not also host-visible first: on discrete GPUs the host-visible
    /// device-local heap is the small BAR window), and otherwise of any type the
    /// buffer allows; [`SlotBuffer::device_local`] says which it got.
    pub(crate) fn create_slot(&self, size: u64) -> Result<SlotBuffer> {
        if size == 0 {
            return Err(Error::InvalidArgument("a slot of 0 bytes".into()));
        }
        let instance = &self.device.instance;
        let device = &self.device.device;

        let info = vk::PhysicalDeviceExternalBufferInfo::default().usage(SLOT_USAGE).handle_type(MEMORY_HANDLE);
        let mut external = vk::ExternalBufferProperties::default();
        // SAFETY: the physical device is live (Exporter::new's contract); `info` and `external` live for the call.
        unsafe {
            instance.get_physical_device_external_buffer_properties(self.device.physical_device, &info, &mut external)
        };
        let features = external.external_memory_properties.external_memory_features;
        if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
            return Err(Error::Unsupported {
                what: format!(
                    "exporting OPAQUE_FD memory for a {SLOT_USAGE:?} buffer (the driver reports {features:?})"
                ),
                remedy: "create the device with VK_KHR_external_memory_fd on a driver that can export buffer memory \
                         as OPAQUE_FD"
                    .into(),
            });
        }
        let dedicated_required = features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY);

        let mut external_info = vk::ExternalMemoryBufferCreateInfo::default().handle_types(MEMORY_HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(SLOT_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external_info);
        // SAFETY: the device is live (Exporter::new's contract); `info` and its chain live for the call.
        let buffer = unsafe { device.create_buffer(&info, None) }.map_err(Error::vk("vkCreateBuffer"))?;

        match self.back(buffer, size) {
            Ok((memory, requirements, memory_type_index, device_local)) => Ok(SlotBuffer {
                buffer,
                memory,
                size,
                allocation_size: requirements.size,
                memory_type_index,
                usage: SLOT_USAGE,
                dedicated: true,
                dedicated_required,
                device_local,
            }),
            Err(e) => {
                // SAFETY: the buffer was just created, has no memory bound and no GPU work uses it.
                unsafe { device.destroy_buffer(buffer, None) };
                Err(e)
            }
        }
    }

    /// Allocates and binds `buffer`'s dedicated exportable memory: (memory, the
    /// buffer's requirements, memory type index, device-local).
    fn back(&self, buffer: vk::Buffer, size: u64) -> Result<(vk::DeviceMemory, vk::MemoryRequirements, u32, bool)> {
        let device = &self.device.device;
        // SAFETY: `buffer` is a live buffer of this device.
        let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
        if requirements.size > self.max_allocation {
            return Err(Error::Unsupported {
                what: format!(
                    "one allocation of {} bytes for a slot of {size} bytes (the device's maxMemoryAllocationSize is {})",
                    requirements.size, self.max_allocation
                ),
                remedy: "use smaller frames".into(),
            });
        }
        let candidates = self.memory_types(requirements);
        if candidates.is_empty() {
            return Err(Error::Unsupported {
                what: format!(
                    "a memory type for an exportable slot of {} bytes (the buffer allows types {:#b}, none of whose \
                     heaps holds it)",
                    requirements.size, requirements.memory_type_bits
                ),
                remedy: "use smaller frames, or fewer slots".into(),
            });
        }

        let mut last = vk::Result::ERROR_OUT_OF_DEVICE_MEMORY;
        for (memory_type_index, device_local) in candidates {
            let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
            let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(MEMORY_HANDLE);
            let info = vk::MemoryAllocateInfo::default()
                .allocation_size(requirements.size)
                .memory_type_index(memory_type_index)
                .push_next(&mut export)
                .push_next(&mut dedicated);
            // SAFETY: the device is live; `info` and its chain live for the call; the dedicated buffer is live.
            let memory = match unsafe { device.allocate_memory(&info, None) } {
                Ok(m) => m,
                // Out of this type's heap: the next candidate (a less preferred type) may have room.
                Err(r @ (vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY)) => {
                    last = r;
                    continue;
                }
                Err(r) => return Err(Error::Vulkan { call: "vkAllocateMemory", result: r }),
            };
            // SAFETY: `memory` is a dedicated allocation for `buffer`, of a type its requirements allow and of
            // its required size; the buffer has no memory bound yet.
            if let Err(r) = unsafe { device.bind_buffer_memory(buffer, memory, 0) } {
                // SAFETY: `memory` was just allocated and nothing uses it.
                unsafe { device.free_memory(memory, None) };
                return Err(Error::Vulkan { call: "vkBindBufferMemory", result: r });
            }
            return Ok((memory, requirements, memory_type_index, device_local));
        }
        Err(Error::Vulkan { call: "vkAllocateMemory", result: last })
    }

    /// The memory types a slot may use, most preferred first, each with whether it
    /// is device-local: device-local and not host-visible, then device-local, then
    /// the rest; only types the buffer allows, whose heap can hold the allocation,
    /// and that need no feature the client does not ask for (protected memory,
    /// AMD's device-coherent memory).
    fn memory_types(&self, requirements: vk::MemoryRequirements) -> Vec<(u32, bool)> {
        let props = &self.memory_properties;
        let count = (props.memory_type_count as usize).min(props.memory_types.len());
        let excluded = vk::MemoryPropertyFlags::PROTECTED
            | vk::MemoryPropertyFlags::DEVICE_COHERENT_AMD
            | vk::MemoryPropertyFlags::DEVICE_UNCACHED_AMD
            | vk::MemoryPropertyFlags::LAZILY_ALLOCATED;
        let mut types: Vec<(u32, vk::MemoryPropertyFlags)> = props.memory_types[..count]
            .iter()
            .enumerate()
            .filter(|&(i, t)| {
                requirements.memory_type_bits & (1u32 << i) != 0
                    && !t.property_flags.intersects(excluded)
                    && props.memory_heaps.get(t.heap_index as usize).is_some_and(|h| h.size >= requirements.size)
            })
            .map(|(i, t)| (i as u32, t.property_flags))
            .collect();
        let rank = |flags: vk::MemoryPropertyFlags| match (
            flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL),
            flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE),
        ) {
            (true, false) => 0,
            (true, true) => 1,
            (false, _) => 2,
        };
        // A stable sort: within a rank, the driver's order (which lists faster types first).
        types.sort_by_key(|&(_, flags)| rank(flags));
        types.into_iter().map(|(i, flags)| (i, flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL))).collect()
    }

    /// A new `OPAQUE_FD` for the slot's memory (`vkGetMemoryFdKHR`); each call
    /// makes a new descriptor, owned by the caller. `slot` is one this
    /// `Exporter` made and has not destroyed.
    pub(crate) fn export_slot(&self, slot: &SlotBuffer) -> Result<OwnedFd> {
        let info = vk::MemoryGetFdInfoKHR::default().memory(slot.memory).handle_type(MEMORY_HANDLE);
        // SAFETY: `slot.memory` is live memory of this device (SlotBuffers are made by create_slot and consumed
        // by destroy_slot), allocated with VkExportMemoryAllocateInfo for OPAQUE_FD.
        let fd = unsafe { self.memory_fd.get_memory_fd(&info) }.map_err(Error::vk("vkGetMemoryFdKHR"))?;
        owned(fd, "vkGetMemoryFdKHR")
    }

    /// Destroys the slot's buffer and frees its memory. Descriptors exported from
    /// it stay valid (they keep the memory alive wherever they were imported).
    ///
    /// # Safety
    ///
    /// `slot` was made by this `Exporter`, and no pending GPU work uses it any more.
    pub(crate) unsafe fn destroy_slot(&self, slot: SlotBuffer) {
        let device = &self.device.device;
        // SAFETY: the buffer is live and of this device, and no GPU work uses it (this function's contract).
        unsafe { device.destroy_buffer(slot.buffer, None) };
        // SAFETY: the memory is live and of this device; its only buffer is destroyed above.
        unsafe { device.free_memory(slot.memory, None) };
    }

    /// A timeline semaphore at value 0; exportable as `OPAQUE_FD` when
    /// `exportable` (which needs [`Exporter::can_share_timelines`]).
    pub(crate) fn create_timeline(&self, exportable: bool) -> Result<vk::Semaphore> {
        if exportable {
            self.shared_timelines.as_ref().map_err(Gap::error)?;
        } else {
            self.timelines.as_ref().map_err(Gap::error)?;
        }
        let mut ty =
            vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
        let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(SEMAPHORE_HANDLE);
        let mut info = vk::SemaphoreCreateInfo::default().push_next(&mut ty);
        if exportable {
            info = info.push_next(&mut export);
        }
        // SAFETY: the device is live; `info` and its chain live for the call; timeline semaphores are supported
        // (checked above; the caller enabled the feature, as ClientDevice documents).
        unsafe { self.device.device.create_semaphore(&info, None) }.map_err(Error::vk("vkCreateSemaphore"))
    }

    /// A new `OPAQUE_FD` for a timeline semaphore made by
    /// [`Exporter::create_timeline`] with `exportable` (`vkGetSemaphoreFdKHR`),
    /// owned by the caller. `semaphore` is live and of this device.
    pub(crate) fn export_timeline(&self, semaphore: vk::Semaphore) -> Result<OwnedFd> {
        self.shared_timelines.as_ref().map_err(Gap::error)?;
        let loader = self.semaphore_loader()?;
        let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(semaphore).handle_type(SEMAPHORE_HANDLE);
        // SAFETY: `semaphore` is a live exportable semaphore of this device (this function's documented use; the
        // crate passes only semaphores create_timeline(true) made).
        let fd = unsafe { loader.get_semaphore_fd(&info) }.map_err(Error::vk("vkGetSemaphoreFdKHR"))?;
        owned(fd, "vkGetSemaphoreFdKHR")
    }

    /// A timeline semaphore of the client's device over the payload of `fd` (the
    /// worker's timeline), by a permanent import (`vkImportSemaphoreFdKHR`,
    /// `OPAQUE_FD`, no `TEMPORARY` flag).
    ///
    /// On success the descriptor is consumed: Vulkan owns it and closes it with
    /// the semaphore. On failure it is closed here (the `OwnedFd` is dropped), and
    /// nothing is left behind.
    pub(crate) fn import_timeline(&self, fd: OwnedFd) -> Result<vk::Semaphore> {
        self.shared_timelines.as_ref().map_err(Gap::error)?;
        let loader = self.semaphore_loader()?;
        let semaphore = self.create_timeline(false)?;
        let info = vk::ImportSemaphoreFdInfoKHR::default()
            .semaphore(semaphore)
            .flags(vk::SemaphoreImportFlags::empty())
            .handle_type(SEMAPHORE_HANDLE)
            .fd(fd.as_raw_fd());
        // SAFETY: `semaphore` is a fresh timeline semaphore of this device no work uses; `fd` is an open
        // descriptor that stays open for the call. Ownership passes to Vulkan only on success (below).
        match unsafe { loader.import_semaphore_fd(&info) } {
            Ok(()) => {
                // Vulkan owns the descriptor now: forget it without closing it.
                let _ = fd.into_raw_fd();
                Ok(semaphore)
            }
            Err(r) => {
                // SAFETY: the semaphore was created above and nothing uses it.
                unsafe { self.device.device.destroy_semaphore(semaphore, None) };
                drop(fd);
                Err(Error::Vulkan { call: "vkImportSemaphoreFdKHR", result: r })
            }
        }
    }

    /// Destroys a timeline semaphore this `Exporter` made or imported (an
    /// imported one's payload lives on in its other holders).
    ///
    /// # Safety
    ///
    /// `semaphore` is live and of this device, and no pending GPU work (and no
    /// host wait) uses it.
    pub(crate) unsafe fn destroy_timeline(&self, semaphore: vk::Semaphore) {
        // SAFETY: live, of this device, and unused (this function's contract).
        unsafe { self.device.device.destroy_semaphore(semaphore, None) };
    }

    /// The semaphore fd functions, or why there are none.
    fn semaphore_loader(&self) -> Result<&ash::khr::external_semaphore_fd::Device> {
        self.semaphore_fd.as_ref().ok_or_else(|| Error::Unsupported {
            what: "VK_KHR_external_semaphore_fd on the caller's device (sharing timeline semaphores)".into(),
            remedy: "enable VK_KHR_external_semaphore_fd on the device and set ClientDevice::external_semaphore_fd, \
                     or serve in host mode"
                .into(),
        })
    }
}

/// An owned descriptor from one a Vulkan call returned.
fn owned(fd: i32, call: &'static str) -> Result<OwnedFd> {
    if fd < 0 {
        // A driver fault: success with no descriptor.
        return Err(Error::Vulkan { call, result: vk::Result::ERROR_INVALID_EXTERNAL_HANDLE });
    }
    // SAFETY: `call` succeeded and returned a new open descriptor that the caller owns (Vulkan's contract
    // for vkGetMemoryFdKHR and vkGetSemaphoreFdKHR); nothing else holds it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What would make `extension` available: enable it, or (where the driver does
/// not list it) another driver.
fn extension_remedy(device: &ClientDevice, extension: &CStr) -> String {
    let name = extension.to_string_lossy();
    // SAFETY: the physical device is live and of the instance (Exporter::new's contract, its only caller).
    let listed = unsafe { device.instance.enumerate_device_extension_properties(device.physical_device) }
        .map(|all| all.iter().any(|p| p.extension_name_as_c_str().is_ok_and(|n| n == extension)));
    match listed {
        Ok(true) => format!("enable {name} in VkDeviceCreateInfo::ppEnabledExtensionNames (the driver has it)"),
        Ok(false) => format!("use a driver that has {name} (this one does not list it) and enable it on the device"),
        Err(_) => format!("enable {name} in VkDeviceCreateInfo::ppEnabledExtensionNames"),
    }
}

/// Whether timeline semaphores are usable: the Vulkan 1.2 functions resolve and
/// the feature is supported (that it is enabled is the caller's part).
fn timeline_support(device: &ClientDevice) -> std::result::Result<(), Gap> {
    let handle = device.device.handle();
    for name in [c"vkGetSemaphoreCounterValue", c"vkWaitSemaphores", c"vkSignalSemaphore"] {
        // SAFETY: the device is live and of the instance (Exporter::new's contract, its only caller).
        if !unsafe { resolves(&device.instance, handle, name) } {
            return Err(Gap::new(
                format!(
                    "Vulkan 1.2 timeline semaphores on the caller's device ({} does not resolve)",
                    name.to_string_lossy()
                ),
                "create the instance with apiVersion 1.2 or later on a Vulkan 1.2 driver, and enable the \
                 timelineSemaphore feature, or serve in host mode",
            ));
        }
    }
    let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
    let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut timeline);
    // SAFETY: the physical device is live; the chain is one output structure that lives for the call.
    unsafe { device.instance.get_physical_device_features2(device.physical_device, &mut features) };
    if timeline.timeline_semaphore != vk::TRUE {
        return Err(Gap::new(
            "the timelineSemaphore feature on the caller's device (the driver does not support it)",
            "use a driver with timeline semaphores, or serve in host mode",
        ));
    }
    Ok(())
}

/// Whether timeline semaphores can be exported and imported as `OPAQUE_FD`.
fn timeline_sharing(device: &ClientDevice, semaphore_fd: bool) -> std::result::Result<(), Gap> {
    if !semaphore_fd {
        return Err(Gap::new(
            "VK_KHR_external_semaphore_fd on the caller's device (sharing timeline semaphores for GPU mode)",
            format!(
                "{}, and set ClientDevice::external_semaphore_fd; or serve in host mode",
                extension_remedy(device, ash::khr::external_semaphore_fd::NAME)
            ),
        ));
    }
    let mut ty = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
    let info = vk::PhysicalDeviceExternalSemaphoreInfo::default().handle_type(SEMAPHORE_HANDLE).push_next(&mut ty);
    let mut props = vk::ExternalSemaphoreProperties::default();
    // SAFETY: the physical device is live; `info`, its chain and `props` live for the call.
    unsafe {
        device.instance.get_physical_device_external_semaphore_properties(device.physical_device, &info, &mut props)
    };
    let needed = vk::ExternalSemaphoreFeatureFlags::EXPORTABLE | vk::ExternalSemaphoreFeatureFlags::IMPORTABLE;
    if !props.external_semaphore_features.contains(needed) {
        return Err(Gap::new(
            format!(
                "exporting and importing timeline semaphores as OPAQUE_FD (the driver reports {:?})",
                props.external_semaphore_features
            ),
            "use a driver that shares timeline semaphores as OPAQUE_FD, or serve in host mode",
        ));
    }
    Ok(())
}

/// One slot: a buffer on the caller's device whose memory the worker imports.
///
/// Made and destroyed by the client; dropping one without destroying it leaks
/// the buffer and its memory.
///
/// The renderer borrows them from [`Client::input_slot`](crate::Client::input_slot)
/// and [`Client::output_slot`](crate::Client::output_slot):
///
/// ```no_run
/// # fn example(client: &neural_frame_client::Client) {
/// for i in 0..client.input_slots() {
///     let slot = client.input_slot(i);
///     println!("input slot {i}: {:?}, {} bytes, device-local: {}", slot.buffer(), slot.size(), slot.device_local());
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct SlotBuffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    size: u64,
    allocation_size: u64,
    memory_type_index: u32,
    usage: vk::BufferUsageFlags,
    dedicated: bool,
    dedicated_required: bool,
    device_local: bool,
}

impl SlotBuffer {
    /// The buffer, for the caller's copies and shaders (usage `STORAGE_BUFFER |
    /// TRANSFER_SRC | TRANSFER_DST`; frames start at offset 0).
    ///
    /// ```no_run
    /// use neural_frame_client::ash::vk;
    /// use neural_frame_client::SlotBuffer;
    ///
    /// /// A descriptor for a compute shader that writes the frame into the slot.
    /// fn storage_binding(slot: &SlotBuffer) -> vk::DescriptorBufferInfo {
    ///     vk::DescriptorBufferInfo { buffer: slot.buffer(), offset: 0, range: slot.size() }
    /// }
    /// ```
    pub fn buffer(&self) -> vk::Buffer {
        self.buffer
    }

    /// The buffer's size in bytes (its allocation may be larger): one frame,
    /// `row_pitch × height` of its geometry.
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) {
    /// assert_eq!(Some(client.output_slot(0).size()), client.output_geometry().bytes());
    /// # }
    /// ```
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the memory is of a `DEVICE_LOCAL` type; false where no device-local
    /// type the buffer allows had room, and the slot lives in other memory.
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) {
    /// if !(0..client.input_slots()).all(|i| client.input_slot(i).device_local()) {
    ///     eprintln!("some input slots live outside device-local memory: frames will be slower");
    /// }
    /// # }
    /// ```
    pub fn device_local(&self) -> bool {
        self.device_local
    }

    /// Whether the driver requires a dedicated allocation for exported memory of
    /// this kind (the client always makes one anyway).
    ///
    /// ```no_run
    /// # fn example(client: &neural_frame_client::Client) {
    /// let slot = client.output_slot(0);
    /// println!("the driver {} dedicated allocations", if slot.dedicated_required() { "requires" } else { "allows" });
    /// # }
    /// ```
    pub fn dedicated_required(&self) -> bool {
        self.dedicated_required
    }

    /// The memory as the worker must import it.
    pub(crate) fn memory(&self) -> SlotMemory {
        SlotMemory {
            allocation_size: self.allocation_size,
            buffer_size: self.size,
            memory_type_index: self.memory_type_index,
            usage: self.usage.as_raw(),
            dedicated: self.dedicated,
        }
    }
}

/// The stages and accesses a slot's users on `queue_family_index` may touch it
/// with: transfers, and compute shaders where the family can run them.
fn slot_stages(device: &ClientDevice) -> (vk::PipelineStageFlags, vk::AccessFlags, vk::AccessFlags) {
    // SAFETY: the physical device is live and of the instance (the callers' contract).
    let families = unsafe { device.instance.get_physical_device_queue_family_properties(device.physical_device) };
    let compute = families
        .get(device.queue_family_index as usize)
        .is_some_and(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
    if compute {
        (
            vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::SHADER_WRITE,
            vk::AccessFlags::TRANSFER_READ
                | vk::AccessFlags::TRANSFER_WRITE
                | vk::AccessFlags::SHADER_READ
                | vk::AccessFlags::SHADER_WRITE,
        )
    } else {
        (
            vk::PipelineStageFlags::TRANSFER,
            vk::AccessFlags::TRANSFER_WRITE,
            vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE,
        )
    }
}

/// Records the barrier that hands a slot to the worker: after the caller's
/// writes to an input slot, or before handing over an output slot. It releases
/// the whole buffer from `queue_family_index` to `VK_QUEUE_FAMILY_EXTERNAL`,
/// after transfer and compute-shader writes (`TRANSFER | COMPUTE_SHADER`,
/// `TRANSFER_WRITE | SHADER_WRITE`; transfers only on a family without compute);
/// the destination half is empty (`BOTTOM_OF_PIPE`), as for any release. Submit
/// it before the semaphore signal (GPU mode) or the `Submit` message (host mode)
/// that tells the worker.
///
/// # Safety
///
/// `cmd` is a command buffer of `device.device` in the recording state, from a
/// pool of `device.queue_family_index`, outside a render pass; `slot` was made
/// on `device` and is not destroyed before the command buffer completes.
///
/// # Example
///
/// A frame rendered by a compute shader straight into an input slot:
///
/// ```no_run
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::{ClientDevice, SlotBuffer, release_to_worker};
///
/// fn record_frame(device: &ClientDevice, cmd: vk::CommandBuffer, slot: &SlotBuffer, groups: (u32, u32)) {
///     // ... bind a compute pipeline whose storage buffer is slot.buffer() ...
///     // SAFETY: `cmd` is recording, outside a render pass, from a pool of device.queue_family_index, with
///     // a compute pipeline and its descriptors bound.
///     unsafe { device.device.cmd_dispatch(cmd, groups.0, groups.1, 1) };
///     // SAFETY: as above; the slot was made on `device` by the client, which outlives the command buffer.
///     unsafe { release_to_worker(device, cmd, slot) };
/// }
/// ```
pub unsafe fn release_to_worker(device: &ClientDevice, cmd: vk::CommandBuffer, slot: &SlotBuffer) {
    let (stages, writes, _) = slot_stages(device);
    let barrier = vk::BufferMemoryBarrier::default()
        .src_access_mask(writes)
        .dst_access_mask(vk::AccessFlags::empty())
        .src_queue_family_index(device.queue_family_index)
        .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
        .buffer(slot.buffer)
        .offset(0)
        .size(vk::WHOLE_SIZE);
    // SAFETY: `cmd` is recording on this device's family outside a render pass, and `slot.buffer` is live (this
    // function's contract); the stages and accesses are ones the family supports.
    unsafe {
        device.device.cmd_pipeline_barrier(
            cmd,
            stages,
            vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            vk::DependencyFlags::empty(),
            &[],
            &[barrier],
            &[],
        )
    };
}

/// The matching acquire: takes the whole slot from `VK_QUEUE_FAMILY_EXTERNAL`
/// back to `queue_family_index` before the caller reads an output slot or
/// rewrites an input slot, for transfers and compute shaders (`TRANSFER |
/// COMPUTE_SHADER`; `TRANSFER_READ | TRANSFER_WRITE | SHADER_READ |
/// SHADER_WRITE`; transfers only on a family without compute). Its source stage
/// is the same `TRANSFER | COMPUTE_SHADER`, with no accesses, so that it chains
/// with a semaphore wait at those stages (or `ALL_COMMANDS`) in GPU mode.
///
/// # Safety
///
/// As [`release_to_worker`].
///
/// # Example
///
/// GPU mode: before rewriting input slot `i`, the renderer's submission waits
/// for the previous frame's `input_consumed` (at `TRANSFER | COMPUTE_SHADER`);
/// its command buffer starts with the acquire.
///
/// ```no_run
/// use neural_frame_client::ash::vk;
/// use neural_frame_client::{Client, ClientDevice, acquire_from_worker};
///
/// fn begin_rewrite(device: &ClientDevice, cmd: vk::CommandBuffer, client: &Client, i: usize) {
///     // SAFETY: `cmd` is recording, outside a render pass, from a pool of device.queue_family_index; the slot
///     // is the client's, which outlives the command buffer.
///     unsafe { acquire_from_worker(device, cmd, client.input_slot(i)) };
///     // ... the renderer's writes to client.input_slot(i).buffer(), then release_to_worker ...
/// }
/// ```
pub unsafe fn acquire_from_worker(device: &ClientDevice, cmd: vk::CommandBuffer, slot: &SlotBuffer) {
    let (stages, _, accesses) = slot_stages(device);
    let barrier = vk::BufferMemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::empty())
        .dst_access_mask(accesses)
        .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
        .dst_queue_family_index(device.queue_family_index)
        .buffer(slot.buffer)
        .offset(0)
        .size(vk::WHOLE_SIZE);
    // SAFETY: as in release_to_worker (this function's contract is the same).
    unsafe {
        device.device.cmd_pipeline_barrier(cmd, stages, stages, vk::DependencyFlags::empty(), &[], &[barrier], &[])
    };
}
