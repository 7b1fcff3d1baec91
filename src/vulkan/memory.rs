//! Images and buffers whose memory can be exported as an `OPAQUE_FD` (and
//! imported into another VkDevice or into CUDA), and plain staging buffers.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::vulkan::conv;
use crate::vulkan::device::Device;

const HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// How an allocation was made: what an importer must repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocationInfo {
    /// `allocationSize` of the `VkDeviceMemory`.
    pub size: u64,
    /// The memory type it came from.
    pub memory_type_index: u32,
    /// Whether it is a dedicated allocation (CUDA must then import with the dedicated flag).
    pub dedicated: bool,
}

/// An exported file descriptor and what the importer needs to know about it.
#[derive(Debug)]
pub struct ExportedMemory {
    /// The descriptor. Whoever imports it successfully takes ownership (Linux rules).
    pub fd: OwnedFd,
    /// The allocation behind it.
    pub info: AllocationInfo,
}

/// What an image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageDesc {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Texel format.
    pub format: vk::Format,
    /// Usage flags.
    pub usage: vk::ImageUsageFlags,
}

impl ImageDesc {
    /// A 2D RGBA8 image usable for transfers and as a storage image.
    pub fn rgba8(width: u32, height: u32) -> Self {
        Self {
            width,
            height,
            format: vk::Format::R8G8B8A8_UNORM,
            usage: vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::STORAGE,
        }
    }

    /// Bytes of a tightly packed copy of the image.
    pub fn packed_len(&self) -> usize {
        self.width as usize * self.height as usize * conv::bytes_per_pixel(self.format).unwrap_or(4) as usize
    }

    fn create_info(&self) -> vk::ImageCreateInfo<'static> {
        vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(self.format)
            .extent(vk::Extent3D { width: self.width, height: self.height, depth: 1 })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(self.usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .initial_layout(vk::ImageLayout::UNDEFINED)
    }
}

/// What the driver says about exporting memory for a given image or buffer.
#[derive(Debug, Clone, Copy)]
pub struct ExternalSupport {
    /// The external memory features.
    pub features: vk::ExternalMemoryFeatureFlags,
}

impl ExternalSupport {
    /// Whether the driver only exports dedicated allocations.
    pub fn dedicated_only(&self) -> bool {
        self.features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY)
    }
}

fn check_features(device: &Device, what: &str, features: vk::ExternalMemoryFeatureFlags) -> Result<ExternalSupport> {
    let need = vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE;
    if !features.contains(need) {
        return Err(Error::Unsupported {
            device: device.info().name.clone(),
            what: format!(
                "exporting and importing {what} as OPAQUE_FD (driver reports: {})",
                conv::external_features(features)
            ),
            remedy: "use another format or usage, or a driver with VK_KHR_external_memory_fd for it".into(),
        });
    }
    Ok(ExternalSupport { features })
}

/// Checks that an image with this description can be exported and imported as `OPAQUE_FD`.
pub fn image_export_support(device: &Device, desc: &ImageDesc) -> Result<ExternalSupport> {
    let mut external_info = vk::PhysicalDeviceExternalImageFormatInfo::default().handle_type(HANDLE);
    let info = vk::PhysicalDeviceImageFormatInfo2::default()
        .format(desc.format)
        .ty(vk::ImageType::TYPE_2D)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(desc.usage)
        .push_next(&mut external_info);
    let mut external_props = vk::ExternalImageFormatProperties::default();
    let mut props = vk::ImageFormatProperties2::default().push_next(&mut external_props);
    // SAFETY: the physical device belongs to the instance; the chains live until the call returns.
    let r = unsafe {
        device.instance().raw().get_physical_device_image_format_properties2(device.physical(), &info, &mut props)
    };
    let what = format!("{:?} images with usage {:?}", desc.format, desc.usage);
    match r {
        Ok(()) => {}
        Err(vk::Result::ERROR_FORMAT_NOT_SUPPORTED) => {
            return Err(Error::Unsupported {
                device: device.info().name.clone(),
                what: format!("external {what}"),
                remedy: "use another format or usage".into(),
            });
        }
        Err(result) => {
            return Err(Error::Vulkan { call: "vkGetPhysicalDeviceImageFormatProperties2", result });
        }
    }
    let max = props.image_format_properties.max_extent;
    if desc.width > max.width || desc.height > max.height || desc.width == 0 || desc.height == 0 {
        return Err(Error::InvalidArgument(format!(
            "a {}×{} image is outside what \"{}\" allows for {:?} (1×1 to {}×{})",
            desc.width,
            desc.height,
            device.info().name,
            desc.format,
            max.width,
            max.height
        )));
    }
    check_features(device, &what, external_props.external_memory_properties.external_memory_features)
}

/// Checks that a buffer with this usage can be exported and imported as `OPAQUE_FD`.
pub fn buffer_export_support(device: &Device, usage: vk::BufferUsageFlags) -> Result<ExternalSupport> {
    let info = vk::PhysicalDeviceExternalBufferInfo::default().usage(usage).handle_type(HANDLE);
    let mut props = vk::ExternalBufferProperties::default();
    // SAFETY: the physical device belongs to the instance.
    unsafe {
        device.instance().raw().get_physical_device_external_buffer_properties(device.physical(), &info, &mut props)
    };
    check_features(
        device,
        &format!("buffers with usage {usage:?}"),
        props.external_memory_properties.external_memory_features,
    )
}

enum Dedicated {
    Image(vk::Image),
    Buffer(vk::Buffer),
}

/// How memory for a resource is obtained.
enum Source {
    Plain,
    Export,
    Import(ExportedMemory),
}

fn allocate(
    device: &Device,
    req: vk::MemoryRequirements,
    dedicated_wanted: bool,
    dedicated: Dedicated,
    flags: vk::MemoryPropertyFlags,
    source: Source,
) -> Result<(vk::DeviceMemory, AllocationInfo)> {
    let (size, type_index, dedicated_on) = match &source {
        Source::Import(m) => (m.info.size, m.info.memory_type_index, m.info.dedicated),
        _ => {
            let index = device.memory_type(req.memory_type_bits, flags).ok_or_else(|| Error::Unsupported {
                device: device.info().name.clone(),
                what: format!(
                    "a memory type with {flags:?} for this resource (allowed types {:#b})",
                    req.memory_type_bits
                ),
                remedy: "use another device".into(),
            })?;
            (req.size, index, dedicated_wanted)
        }
    };
    if let Source::Import(m) = &source
        && (req.memory_type_bits & (1 << type_index) == 0 || m.info.size < req.size)
    {
        return Err(Error::InvalidArgument(format!(
            "imported memory (type {type_index}, {} bytes) does not fit the resource (types {:#b}, {} bytes): \
             the importer must describe the same resource on the same physical device",
            m.info.size, req.memory_type_bits, req.size
        )));
    }
    let mut info = vk::MemoryAllocateInfo::default().allocation_size(size).memory_type_index(type_index);
    let mut dedicated_info = match dedicated {
        Dedicated::Image(i) => vk::MemoryDedicatedAllocateInfo::default().image(i),
        Dedicated::Buffer(b) => vk::MemoryDedicatedAllocateInfo::default().buffer(b),
    };
    if dedicated_on {
        info = info.push_next(&mut dedicated_info);
    }
    let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
    let mut import = vk::ImportMemoryFdInfoKHR::default().handle_type(HANDLE);
    match &source {
        Source::Plain => {}
        Source::Export => info = info.push_next(&mut export),
        Source::Import(m) => {
            import = import.fd(m.fd.as_raw_fd());
            info = info.push_next(&mut import);
        }
    }
    // SAFETY: info and its chain are valid for the call; on success an imported fd belongs to Vulkan.
    let memory = unsafe { device.raw().allocate_memory(&info, None) }.call("vkAllocateMemory")?;
    if let Source::Import(m) = source {
        // Success: the driver owns the descriptor now (VK_KHR_external_memory_fd).
        let _ = m.fd.into_raw_fd();
    }
    Ok((memory, AllocationInfo { size, memory_type_index: type_index, dedicated: dedicated_on }))
}

fn export_fd(device: &Device, memory: vk::DeviceMemory, info: AllocationInfo) -> Result<ExportedMemory> {
    let get = vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(HANDLE);
    // SAFETY: memory was allocated with ExportMemoryAllocateInfo for OPAQUE_FD.
    let raw = unsafe { device.memory_fd.get_memory_fd(&get) }.call("vkGetMemoryFdKHR")?;
    // SAFETY: vkGetMemoryFdKHR returns a new descriptor owned by the caller.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    Ok(ExportedMemory { fd, info })
}

fn next_image_id() -> u64 {
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A 2D image with its own memory. Destroys the image, then frees the memory.
pub struct Image {
    id: u64,
    raw: vk::Image,
    memory: vk::DeviceMemory,
    desc: ImageDesc,
    allocation: AllocationInfo,
    exportable: bool,
    device: Arc<Device>,
}

impl Image {
    /// An image that is not shared.
    pub fn new(device: &Arc<Device>, desc: ImageDesc) -> Result<Self> {
        Self::create(device, desc, Source::Plain, false)
    }

    /// An image whose memory can be exported with [`Image::export`].
    pub fn exportable(device: &Arc<Device>, desc: ImageDesc) -> Result<Self> {
        let support = image_export_support(device, &desc)?;
        Self::create(device, desc, Source::Export, support.dedicated_only())
    }

    /// An image over memory exported elsewhere (same description, same physical device).
    pub fn import(device: &Arc<Device>, desc: ImageDesc, memory: ExportedMemory) -> Result<Self> {
        image_export_support(device, &desc)?;
        Self::create(device, desc, Source::Import(memory), false)
    }

    fn create(device: &Arc<Device>, desc: ImageDesc, source: Source, dedicated_only: bool) -> Result<Self> {
        if conv::bytes_per_pixel(desc.format).is_none() {
            return Err(Error::InvalidArgument(format!("image format {:?} is not supported", desc.format)));
        }
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(HANDLE);
        let mut info = desc.create_info();
        let shared = !matches!(source, Source::Plain);
        if shared {
            info = info.push_next(&mut external);
        }
        // SAFETY: info is valid; for shared images the format was checked by image_export_support.
        let raw = unsafe { device.raw().create_image(&info, None) }.call("vkCreateImage")?;
        let mut dedicated_req = vk::MemoryDedicatedRequirements::default();
        let mut req2 = vk::MemoryRequirements2::default().push_next(&mut dedicated_req);
        let req_info = vk::ImageMemoryRequirementsInfo2::default().image(raw);
        // SAFETY: raw is a valid image of this device.
        unsafe { device.raw().get_image_memory_requirements2(&req_info, &mut req2) };
        let req = req2.memory_requirements;
        let wanted = shared
            && (dedicated_only
                || dedicated_req.requires_dedicated_allocation == vk::TRUE
                || dedicated_req.prefers_dedicated_allocation == vk::TRUE);
        let allocated =
            allocate(device, req, wanted, Dedicated::Image(raw), vk::MemoryPropertyFlags::DEVICE_LOCAL, source)
                .and_then(|(memory, allocation)| {
                    // SAFETY: memory fits the image's requirements (checked in allocate).
                    match unsafe { device.raw().bind_image_memory(raw, memory, 0) } {
                        Ok(()) => Ok((memory, allocation)),
                        Err(result) => {
                            // SAFETY: memory is unused.
                            unsafe { device.raw().free_memory(memory, None) };
                            Err(Error::Vulkan { call: "vkBindImageMemory", result })
                        }
                    }
                });
        match allocated {
            Ok((memory, allocation)) => Ok(Self {
                id: next_image_id(),
                raw,
                memory,
                desc,
                allocation,
                exportable: shared,
                device: Arc::clone(device),
            }),
            Err(e) => {
                // SAFETY: the image has no memory bound and is unused.
                unsafe { device.raw().destroy_image(raw, None) };
                Err(e)
            }
        }
    }

    /// Exports the image's memory as a new `OPAQUE_FD`.
    pub fn export(&self) -> Result<ExportedMemory> {
        if !self.exportable {
            return Err(Error::InvalidArgument("this image was not created exportable".into()));
        }
        export_fd(&self.device, self.memory, self.allocation)
    }

    /// The raw image.
    pub fn raw(&self) -> vk::Image {
        self.raw
    }
    /// A process-unique id (Vulkan handles can be reused after destruction; ids are not).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// What the image is.
    pub fn desc(&self) -> &ImageDesc {
        &self.desc
    }
    /// Its allocation.
    pub fn allocation(&self) -> AllocationInfo {
        self.allocation
    }
    /// The device it lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        // SAFETY: callers wait for GPU work using the image before dropping it
        // (one-shot transfers wait on a fence; the pipeline retires its slots).
        unsafe { self.device.raw().destroy_image(self.raw, None) };
        // SAFETY: the image bound to this memory is gone.
        unsafe { self.device.raw().free_memory(self.memory, None) };
    }
}

/// Where a buffer's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferMemory {
    /// Device-local (the CUDA backend's shared buffers).
    DeviceLocal,
    /// Host-visible and coherent, mapped for its lifetime (staging, the host backend).
    HostVisible,
}

/// A buffer with its own memory; host-visible ones stay mapped.
pub struct Buffer {
    raw: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut u8,
    len: u64,
    allocation: AllocationInfo,
    exportable: bool,
    device: Arc<Device>,
}

// SAFETY: the mapped pointer refers to memory owned by this value; access goes
// through &self/&mut self, so the usual borrow rules apply.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A buffer that is not shared.
    pub fn new(device: &Arc<Device>, len: u64, usage: vk::BufferUsageFlags, memory: BufferMemory) -> Result<Self> {
        Self::create(device, len, usage, memory, Source::Plain, false)
    }

    /// A buffer whose memory can be exported with [`Buffer::export`].
    pub fn exportable(
        device: &Arc<Device>,
        len: u64,
        usage: vk::BufferUsageFlags,
        memory: BufferMemory,
    ) -> Result<Self> {
        let support = buffer_export_support(device, usage)?;
        Self::create(device, len, usage, memory, Source::Export, support.dedicated_only())
    }

    /// A buffer over memory exported elsewhere.
    pub fn import(
        device: &Arc<Device>,
        len: u64,
        usage: vk::BufferUsageFlags,
        memory: BufferMemory,
        exported: ExportedMemory,
    ) -> Result<Self> {
        buffer_export_support(device, usage)?;
        Self::create(device, len, usage, memory, Source::Import(exported), false)
    }

    fn create(
        device: &Arc<Device>,
        len: u64,
        usage: vk::BufferUsageFlags,
        kind: BufferMemory,
        source: Source,
        dedicated_only: bool,
    ) -> Result<Self> {
        if len == 0 {
            return Err(Error::InvalidArgument("a buffer of 0 bytes was asked for".into()));
        }
        let shared = !matches!(source, Source::Plain);
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let mut info = vk::BufferCreateInfo::default().size(len).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        if shared {
            info = info.push_next(&mut external);
        }
        // SAFETY: info is valid.
        let raw = unsafe { device.raw().create_buffer(&info, None) }.call("vkCreateBuffer")?;
        let mut dedicated_req = vk::MemoryDedicatedRequirements::default();
        let mut req2 = vk::MemoryRequirements2::default().push_next(&mut dedicated_req);
        let req_info = vk::BufferMemoryRequirementsInfo2::default().buffer(raw);
        // SAFETY: raw is a valid buffer of this device.
        unsafe { device.raw().get_buffer_memory_requirements2(&req_info, &mut req2) };
        let req = req2.memory_requirements;
        let wanted = shared && (dedicated_only || dedicated_req.requires_dedicated_allocation == vk::TRUE);
        let flags = match kind {
            BufferMemory::DeviceLocal => vk::MemoryPropertyFlags::DEVICE_LOCAL,
            BufferMemory::HostVisible => vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        };
        let result =
            allocate(device, req, wanted, Dedicated::Buffer(raw), flags, source).and_then(|(memory, allocation)| {
                let bound = (|| {
                    // SAFETY: memory fits the buffer's requirements.
                    unsafe { device.raw().bind_buffer_memory(raw, memory, 0) }.call("vkBindBufferMemory")?;
                    let mapped = if kind == BufferMemory::HostVisible {
                        // SAFETY: the memory is host-visible and not mapped yet.
                        unsafe { device.raw().map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                            .call("vkMapMemory")? as *mut u8
                    } else {
                        std::ptr::null_mut()
                    };
                    Ok(mapped)
                })();
                match bound {
                    Ok(mapped) => Ok((memory, allocation, mapped)),
                    Err(e) => {
                        // SAFETY: memory is unused (binding failed or mapping failed before use).
                        unsafe { device.raw().free_memory(memory, None) };
                        Err(e)
                    }
                }
            });
        match result {
            Ok((memory, allocation, mapped)) => {
                Ok(Self { raw, memory, mapped, len, allocation, exportable: shared, device: Arc::clone(device) })
            }
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { device.raw().destroy_buffer(raw, None) };
                Err(e)
            }
        }
    }

    /// Exports the buffer's memory as a new `OPAQUE_FD`.
    pub fn export(&self) -> Result<ExportedMemory> {
        if !self.exportable {
            return Err(Error::InvalidArgument("this buffer was not created exportable".into()));
        }
        export_fd(&self.device, self.memory, self.allocation)
    }

    /// The raw buffer.
    pub fn raw(&self) -> vk::Buffer {
        self.raw
    }
    /// Its length in bytes as asked for.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Whether the buffer has zero length (never: creation refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Its allocation.
    pub fn allocation(&self) -> AllocationInfo {
        self.allocation
    }
    /// The device it lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The mapped bytes of a host-visible buffer. Callers make sure the GPU is
    /// not writing it at the same time (fence or semaphore wait).
    pub fn mapped(&self) -> Option<&[u8]> {
        // SAFETY: mapped covers `len` bytes for the buffer's lifetime (HOST_COHERENT).
        (!self.mapped.is_null()).then(|| unsafe { std::slice::from_raw_parts(self.mapped, self.len as usize) })
    }

    /// The mapped bytes, writable.
    pub fn mapped_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: as in `mapped`; &mut self gives exclusive access on the host side.
        (!self.mapped.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(self.mapped, self.len as usize) })
    }

    /// The mapped pointer (null for device-local buffers), for binding as a host tensor.
    pub fn mapped_ptr(&self) -> *mut u8 {
        self.mapped
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: callers wait for GPU work using the buffer before dropping it.
        unsafe { self.device.raw().destroy_buffer(self.raw, None) };
        // SAFETY: the buffer is gone; freeing also unmaps.
        unsafe { self.device.raw().free_memory(self.memory, None) };
    }
}
