//! Images and buffers whose memory can be exported as an `OPAQUE_FD`
//! (`OPAQUE_WIN32` on Windows) and imported into another VkDevice or into
//! CUDA, and plain staging buffers.

use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::handle::{self, ExternalHandle};
use crate::vulkan::caps::{self, ImageDesc, buffer_export_support, image_export_support};
use crate::vulkan::device::Device;
use crate::vulkan::external::{self, EXTERNAL_MEMORY_HANDLE_TYPE as HANDLE, HANDLE_TYPE_NAME};

/// How an allocation was made: what an importer must repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AllocationInfo {
    /// `allocationSize` of the `VkDeviceMemory`.
    pub size: u64,
    /// The memory type it came from.
    pub memory_type_index: u32,
    /// Whether it is a dedicated allocation (CUDA must then import with the dedicated flag).
    pub dedicated: bool,
}

/// An exported file descriptor (or Windows handle) and what the importer needs
/// to know about it. Made only by exporting ([`Image::export`], [`Buffer::export`])
/// or from a caller's description that the context checked.
#[derive(Debug)]
pub(crate) struct ExportedMemory {
    /// The descriptor. Whoever imports it successfully takes ownership (Linux
    /// rules); on Windows the importer closes it after importing ([`handle::imported`]).
    pub(crate) handle: ExternalHandle,
    /// The allocation behind it.
    pub(crate) info: AllocationInfo,
}

pub(super) enum Dedicated {
    Image(vk::Image),
    Buffer(vk::Buffer),
}

/// How memory for a resource is obtained.
pub(super) enum Source {
    Plain,
    Export,
    Import(ExportedMemory),
    /// A memory file, mapped by the library and imported as host memory (host_file.rs).
    #[cfg(target_os = "linux")]
    HostFile(HostFile, AllocationInfo),
}

impl Source {
    /// An import: through the driver, or, for a memory file on a device that imports host
    /// memory, through the library's own mapping of it (host_file.rs; the descriptor is closed).
    pub(super) fn import(device: &Device, memory: ExportedMemory) -> Result<Self> {
        #[cfg(target_os = "linux")]
        if let Some((_, alignment)) = &device.host_memory_ext
            && crate::vulkan::host_file::is_memory_file(std::os::fd::AsFd::as_fd(&memory.handle))
        {
            let file = HostFile::map(std::os::fd::AsFd::as_fd(&memory.handle), memory.info.size, *alignment)?;
            return Ok(Source::HostFile(file, memory.info));
        }
        let _ = device;
        Ok(Source::Import(memory))
    }

    /// The external handle type the resource is created for.
    pub(super) fn handle_type(&self) -> vk::ExternalMemoryHandleTypeFlags {
        match self {
            #[cfg(target_os = "linux")]
            Source::HostFile(..) => vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT,
            _ => HANDLE,
        }
    }
}

#[cfg(target_os = "linux")]
use crate::vulkan::host_file::HostFile;

pub(super) fn allocate(
    device: &Device,
    req: vk::MemoryRequirements,
    dedicated_wanted: bool,
    dedicated: Dedicated,
    flags: vk::MemoryPropertyFlags,
    source: Source,
) -> Result<(Memory, AllocationInfo)> {
    #[cfg(target_os = "linux")]
    let source = match source {
        Source::HostFile(file, info) => return allocate_host_file(device, req, file, info),
        source => source,
    };
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
    if let Source::Import(m) = &source {
        check_import(device, req, &m.info)?;
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
    let mut import = match &source {
        Source::Import(m) => external::import_memory_info(&m.handle),
        _ => external::ImportMemoryInfo::default(),
    };
    match &source {
        Source::Export => info = info.push_next(&mut export),
        Source::Import(_) => info = info.push_next(&mut import),
        _ => {}
    }
    let importing = matches!(source, Source::Import(_));
    // SAFETY: info and its chain are valid for the call; on success an imported fd belongs to Vulkan.
    let memory = unsafe { device.raw().allocate_memory(&info, None) }.map_err(|result| match result {
        // An import allocates nothing new: a refusal means the descriptor or its description is wrong
        // (NVIDIA answers a size that differs from the export's with ERROR_OUT_OF_DEVICE_MEMORY).
        vk::Result::ERROR_INVALID_EXTERNAL_HANDLE | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY if importing => {
            Error::InvalidArgument(format!(
                "the driver refused the imported memory ({result}): the {} is not memory exported as \
                 {HANDLE_TYPE_NAME} by a device of the same driver, or its allocation size, memory type or \
                 dedicated flag differ from the export's",
                handle::HANDLE_WORD
            ))
        }
        result => Error::Vulkan { call: "vkAllocateMemory", result },
    })?;
    if let Source::Import(m) = source {
        // Success: the driver owns the descriptor now (VK_KHR_external_memory_fd); a Windows
        // handle is closed (VK_KHR_external_memory_win32 takes a reference of its own).
        handle::imported(m.handle);
    }
    Ok((Memory::new(memory), AllocationInfo { size, memory_type_index: type_index, dedicated: dedicated_on }))
}

/// Checks an imported allocation's description against the resource it is to back: a
/// memory type the device has and the resource allows, and enough bytes.
pub(super) fn check_import(device: &Device, req: vk::MemoryRequirements, info: &AllocationInfo) -> Result<()> {
    let type_index = info.memory_type_index;
    if type_index >= device.memory_type_count() {
        return Err(Error::InvalidArgument(format!(
            "imported memory names memory type {type_index}, but \"{}\" has {} memory types",
            device.info().name,
            device.memory_type_count()
        )));
    }
    if req.memory_type_bits & (1 << type_index) == 0 {
        return Err(Error::InvalidArgument(format!(
            "imported memory of type {type_index} cannot back this resource (allowed types {:#b}): \
             describe the same resource the exporter allocated, on the same physical device",
            req.memory_type_bits
        )));
    }
    if info.size < req.size {
        return Err(Error::InvalidArgument(format!(
            "imported memory of {} bytes is smaller than the {} bytes the described resource needs",
            info.size, req.size
        )));
    }
    Ok(())
}

/// Imports the library's own mapping of a memory file as host memory
/// (`VK_EXT_external_memory_host`), of the memory type the exporter named; the
/// resource is bound at the data's offset in it.
#[cfg(target_os = "linux")]
fn allocate_host_file(
    device: &Device,
    req: vk::MemoryRequirements,
    file: HostFile,
    info: AllocationInfo,
) -> Result<(Memory, AllocationInfo)> {
    let refuse = |why: String| Err(Error::InvalidArgument(format!("the imported memory file is refused: {why}")));
    let Some((ext, _)) = &device.host_memory_ext else {
        return Err(Error::internal("a memory file imported without VK_EXT_external_memory_host"));
    };
    let handle_type = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    let mut props = vk::MemoryHostPointerPropertiesEXT::default();
    // SAFETY: the extension is enabled on this device; the pointer is the start of a live mapping.
    let r = unsafe {
        (ext.fp().get_memory_host_pointer_properties_ext)(device.raw().handle(), handle_type, file.ptr(), &mut props)
    };
    if r != vk::Result::SUCCESS {
        return Err(Error::Vulkan { call: "vkGetMemoryHostPointerPropertiesEXT", result: r });
    }
    check_import(device, req, &info)?;
    let index = info.memory_type_index;
    if props.memory_type_bits & (1 << index) == 0 {
        return refuse(format!(
            "its description names memory type {index}, but \"{}\" imports host memory as types {:#b}",
            device.info().name,
            props.memory_type_bits
        ));
    }
    if !file.data_offset().is_multiple_of(req.alignment.max(1)) {
        return refuse(format!(
            "its data starts at offset {}, not a multiple of the {} bytes the resource must be aligned to",
            file.data_offset(),
            req.alignment
        ));
    }
    let mut import = vk::ImportMemoryHostPointerInfoEXT::default().handle_type(handle_type).host_pointer(file.ptr());
    let alloc =
        vk::MemoryAllocateInfo::default().allocation_size(file.len()).memory_type_index(index).push_next(&mut import);
    // SAFETY: the chain is valid for the call; the mapping outlives the allocation (Memory frees it first).
    let raw = unsafe { device.raw().allocate_memory(&alloc, None) }.call("vkAllocateMemory")?;
    Ok((Memory { raw, mapping: Some(file) }, AllocationInfo { dedicated: false, ..info }))
}

/// A `VkDeviceMemory`, where a resource's data starts in it, and the library's
/// own mapping of the memory file it was imported from (host_file.rs).
#[derive(Debug)]
pub(super) struct Memory {
    pub(super) raw: vk::DeviceMemory,
    /// Unmapped when this value drops, after [`free`](Self::free).
    #[cfg(target_os = "linux")]
    mapping: Option<HostFile>,
}

impl Memory {
    fn new(raw: vk::DeviceMemory) -> Self {
        Memory {
            raw,
            #[cfg(target_os = "linux")]
            mapping: None,
        }
    }

    /// Where resources are bound: 0, or the data's offset in a memory file.
    pub(super) fn offset(&self) -> u64 {
        #[cfg(target_os = "linux")]
        if let Some(file) = &self.mapping {
            return file.data_offset();
        }
        0
    }

    /// Frees it (a memory file's mapping goes when this value drops).
    ///
    /// # Safety
    /// Nothing may use it (no resource bound to it is used, nor its mapping), and it is freed once.
    pub(super) unsafe fn free(&self, device: &Device) {
        // SAFETY: the caller's promise.
        unsafe { device.raw().free_memory(self.raw, None) };
    }
}

/// Exports `memory` as a new handle, with how it was allocated.
///
/// # Safety
/// `memory` must be a live allocation of `device` made with
/// `VkExportMemoryAllocateInfo` for the platform's handle type.
unsafe fn export_fd(device: &Device, memory: vk::DeviceMemory, info: AllocationInfo) -> Result<ExportedMemory> {
    let loader = device
        .memory_ext
        .as_ref()
        .ok_or_else(|| Error::internal(format!("export without {}", external::MEMORY_EXTENSION_NAME)))?;
    // SAFETY: memory was allocated with ExportMemoryAllocateInfo for this handle type (the caller's contract).
    let handle = unsafe { external::export_memory(loader, memory) }?;
    Ok(ExportedMemory { handle, info })
}

/// Exports memory the caller allocated on the context's device (bring your own
/// device) as a new `OPAQUE_FD` (`OPAQUE_WIN32` on Windows).
///
/// # Safety
/// `memory` must be a live allocation of `device` made with
/// `VkExportMemoryAllocateInfo` for `OPAQUE_FD` (`OPAQUE_WIN32`), of `info.size` bytes.
pub(crate) unsafe fn export_caller_memory(
    device: &Device,
    memory: vk::DeviceMemory,
    info: AllocationInfo,
) -> Result<ExportedMemory> {
    // SAFETY: the caller's contract is export_fd's.
    unsafe { export_fd(device, memory, info) }
}

/// A 2D image with its own memory. Destroys the image, then frees the memory.
pub(crate) struct Image {
    raw: vk::Image,
    memory: Memory,
    desc: ImageDesc,
    allocation: AllocationInfo,
    exportable: bool,
    device: Arc<Device>,
}

impl Image {
    /// An image that is not shared.
    pub(crate) fn new(device: &Arc<Device>, desc: ImageDesc) -> Result<Self> {
        Self::create(device, desc, Source::Plain, false)
    }

    /// An image whose memory can be exported with [`Image::export`].
    pub(crate) fn exportable(device: &Arc<Device>, desc: ImageDesc) -> Result<Self> {
        caps::check_image_size(device, desc.width, desc.height)?;
        let support = image_export_support(device, &desc)?;
        Self::create(device, desc, Source::Export, support.dedicated_only())
    }

    /// An image over memory exported elsewhere (same description, same physical device).
    /// On success the descriptor belongs to the image; on failure it is closed.
    pub(crate) fn import(device: &Arc<Device>, desc: ImageDesc, memory: ExportedMemory) -> Result<Self> {
        caps::check_image_size(device, desc.width, desc.height)?;
        let source = Source::import(device, memory)?;
        match &source {
            Source::Import(memory) => {
                let support = image_export_support(device, &desc)?;
                if support.dedicated_only() && !memory.info.dedicated {
                    return Err(Error::InvalidArgument(format!(
                        "\"{}\" shares {:?} images only as dedicated allocations, but the memory is described as \
                         not dedicated",
                        device.info().name,
                        desc.format
                    )));
                }
            }
            #[cfg(target_os = "linux")]
            Source::HostFile(..) => caps::image_host_import_support(device, &desc)?,
            _ => {}
        }
        Self::create(device, desc, source, false)
    }

    fn create(device: &Arc<Device>, desc: ImageDesc, source: Source, dedicated_only: bool) -> Result<Self> {
        caps::texel_bytes(desc.format)?;
        caps::check_image_size(device, desc.width, desc.height)?;
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(source.handle_type());
        let mut info = desc.create_info();
        let shared = !matches!(source, Source::Plain);
        let exportable = matches!(source, Source::Export | Source::Import(_));
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
                    match unsafe { device.raw().bind_image_memory(raw, memory.raw, memory.offset()) } {
                        Ok(()) => Ok((memory, allocation)),
                        Err(result) => {
                            // SAFETY: memory is unused.
                            unsafe { memory.free(device) };
                            Err(Error::Vulkan { call: "vkBindImageMemory", result })
                        }
                    }
                });
        match allocated {
            Ok((memory, allocation)) => {
                Ok(Self { raw, memory, desc, allocation, exportable, device: Arc::clone(device) })
            }
            Err(e) => {
                // SAFETY: the image has no memory bound and is unused.
                unsafe { device.raw().destroy_image(raw, None) };
                Err(e)
            }
        }
    }

    /// Exports the image's memory as a new `OPAQUE_FD` (`OPAQUE_WIN32` on Windows).
    pub(crate) fn export(&self) -> Result<ExportedMemory> {
        if !self.exportable {
            return Err(Error::internal("export of an image that was not created exportable"));
        }
        // SAFETY: the memory was allocated exportable (Source::Export) for this handle type.
        unsafe { export_fd(&self.device, self.memory.raw, self.allocation) }
    }

    /// The raw image.
    pub(crate) fn raw(&self) -> vk::Image {
        self.raw
    }
    /// What the image is.
    pub(crate) fn desc(&self) -> &ImageDesc {
        &self.desc
    }
    /// The device it lives on.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        // SAFETY: callers wait for GPU work using the image before dropping it
        // (one-shot transfers wait on a fence; the pipeline retires its slots).
        unsafe { self.device.raw().destroy_image(self.raw, None) };
        // SAFETY: the image bound to this memory is gone.
        unsafe { self.memory.free(&self.device) };
    }
}

/// Where a buffer's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufferMemory {
    /// Device-local (the CUDA backend's shared buffers).
    DeviceLocal,
    /// Host-visible and coherent, mapped for its lifetime (staging, the host backend).
    HostVisible,
    /// Host-visible, coherent and cached where the device has such a type (else as
    /// `HostVisible`), mapped: staging the host reads, where uncached memory reads slowly.
    HostCached,
}

/// Where a buffer's memory comes from.
pub(super) enum Backing {
    /// Its own allocation, freed with it.
    Own(Memory),
    /// A range of an allocation imported once ([`Allocation`]), which it keeps alive.
    Placed(#[allow(dead_code, reason = "held, not read: it keeps the memory alive")] Arc<super::placed::Allocation>),
}

/// A buffer with its own memory (host-visible ones stay mapped), or placed in an
/// imported [`Allocation`].
pub(crate) struct Buffer {
    pub(super) raw: vk::Buffer,
    pub(super) memory: Backing,
    pub(super) mapped: *mut u8,
    pub(super) len: u64,
    pub(super) usage: vk::BufferUsageFlags,
    pub(super) allocation: AllocationInfo,
    pub(super) exportable: bool,
    pub(super) device: Arc<Device>,
}

// SAFETY: the mapped pointer refers to memory owned by this value; access goes
// through &self/&mut self, so the usual borrow rules apply.
unsafe impl Send for Buffer {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A buffer that is not shared.
    pub(crate) fn new(
        device: &Arc<Device>,
        len: u64,
        usage: vk::BufferUsageFlags,
        memory: BufferMemory,
    ) -> Result<Self> {
        Self::create(device, len, usage, memory, Source::Plain, false)
    }

    /// A buffer whose memory can be exported with [`Buffer::export`].
    pub(crate) fn exportable(
        device: &Arc<Device>,
        len: u64,
        usage: vk::BufferUsageFlags,
        memory: BufferMemory,
    ) -> Result<Self> {
        let support = buffer_export_support(device, usage)?;
        Self::create(device, len, usage, memory, Source::Export, support.dedicated_only())
    }

    /// A buffer over memory exported elsewhere; mapped when its memory type is
    /// host-visible. On success the descriptor belongs to the buffer; on failure it is closed.
    pub(crate) fn import(
        device: &Arc<Device>,
        len: u64,
        usage: vk::BufferUsageFlags,
        exported: ExportedMemory,
    ) -> Result<Self> {
        let info = exported.info;
        let source = Source::import(device, exported)?;
        match &source {
            Source::Import(exported) => {
                let support = buffer_export_support(device, usage)?;
                if support.dedicated_only() && !exported.info.dedicated {
                    return Err(Error::InvalidArgument(format!(
                        "\"{}\" shares buffers only as dedicated allocations, but the memory is described as not \
                         dedicated",
                        device.info().name
                    )));
                }
            }
            #[cfg(target_os = "linux")]
            Source::HostFile(..) => caps::buffer_host_import_support(device, usage)?,
            _ => {}
        }
        let flags = device.memory_type_flags(info.memory_type_index);
        let memory = if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT) {
            BufferMemory::HostVisible
        } else {
            BufferMemory::DeviceLocal
        };
        Self::create(device, len, usage, memory, source, false)
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
        if len > device.max_allocation() {
            return Err(Error::Unsupported {
                device: device.info().name.clone(),
                what: format!("a buffer of {len} bytes (maxMemoryAllocationSize = {} bytes)", device.max_allocation()),
                remedy: "use a smaller frame".into(),
            });
        }
        let shared = !matches!(source, Source::Plain);
        let exportable = matches!(source, Source::Export | Source::Import(_));
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(source.handle_type());
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
            BufferMemory::HostCached => {
                let visible = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
                let cached = visible | vk::MemoryPropertyFlags::HOST_CACHED;
                if device.memory_type(req.memory_type_bits, cached).is_some() { cached } else { visible }
            }
        };
        let result =
            allocate(device, req, wanted, Dedicated::Buffer(raw), flags, source).and_then(|(memory, allocation)| {
                let bound = (|| {
                    // SAFETY: memory fits the buffer's requirements.
                    unsafe { device.raw().bind_buffer_memory(raw, memory.raw, memory.offset()) }
                        .call("vkBindBufferMemory")?;
                    let mapped = if kind != BufferMemory::DeviceLocal {
                        // SAFETY: the memory is host-visible and not mapped yet.
                        unsafe {
                            device.raw().map_memory(
                                memory.raw,
                                memory.offset(),
                                vk::WHOLE_SIZE,
                                vk::MemoryMapFlags::empty(),
                            )
                        }
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
                        unsafe { memory.free(device) };
                        Err(e)
                    }
                }
            });
        match result {
            Ok((memory, allocation, mapped)) => Ok(Self {
                raw,
                memory: Backing::Own(memory),
                mapped,
                len,
                usage,
                allocation,
                exportable,
                device: Arc::clone(device),
            }),
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { device.raw().destroy_buffer(raw, None) };
                Err(e)
            }
        }
    }

    /// Exports the buffer's memory as a new `OPAQUE_FD` (`OPAQUE_WIN32` on Windows).
    pub(crate) fn export(&self) -> Result<ExportedMemory> {
        let Backing::Own(memory) = &self.memory else {
            return Err(Error::internal("export of a buffer placed in an imported allocation"));
        };
        if !self.exportable {
            return Err(Error::internal("export of a buffer that was not created exportable"));
        }
        // SAFETY: the memory was allocated exportable (Source::Export) for this handle type.
        unsafe { export_fd(&self.device, memory.raw, self.allocation) }
    }

    /// The raw buffer.
    pub(crate) fn raw(&self) -> vk::Buffer {
        self.raw
    }
    /// Its length in bytes as asked for.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
    /// The usage it was created with.
    pub(crate) fn usage(&self) -> vk::BufferUsageFlags {
        self.usage
    }
    /// The device it lives on.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The mapped bytes of a host-visible buffer.
    ///
    /// # Safety
    /// No GPU work may write the buffer while the slice is used (a fence or
    /// semaphore wait has shown the last write complete).
    pub(crate) unsafe fn mapped(&self) -> Option<&[u8]> {
        // SAFETY: mapped covers `len` bytes for the buffer's lifetime (HOST_COHERENT).
        (!self.mapped.is_null()).then(|| unsafe { std::slice::from_raw_parts(self.mapped, self.len as usize) })
    }

    /// The mapped bytes, writable.
    ///
    /// # Safety
    /// No GPU work may read or write the buffer while the slice is used.
    pub(crate) unsafe fn mapped_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: as in `mapped`; &mut self gives exclusive access on the host side.
        (!self.mapped.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(self.mapped, self.len as usize) })
    }

    /// The mapped pointer (null for device-local buffers), for binding as a host tensor.
    pub(crate) fn mapped_ptr(&self) -> *mut u8 {
        self.mapped
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: callers wait for GPU work using the buffer before dropping it.
        unsafe { self.device.raw().destroy_buffer(self.raw, None) };
        if let Backing::Own(memory) = &self.memory {
            // SAFETY: the buffer is gone; freeing also unmaps.
            unsafe { memory.free(&self.device) };
        }
    }
}
