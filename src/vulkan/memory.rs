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
) -> Result<(Memory, AllocationInfo)> {
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
        if m.info.size < req.size {
            return Err(Error::InvalidArgument(format!(
                "imported memory of {} bytes is smaller than the {} bytes the described resource needs",
                m.info.size, req.size
            )));
        }
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
        Source::Plain => {}
        Source::Export => info = info.push_next(&mut export),
        Source::Import(_) => info = info.push_next(&mut import),
    }
    let importing = matches!(source, Source::Import(_));
    // A memory file, kept to check the driver's host mapping of it once imported.
    #[cfg(target_os = "linux")]
    let file = match &source {
        Source::Import(m) => crate::vulkan::mapped_file::MemoryFile::of(&m.handle),
        _ => None,
    };
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
    #[cfg(target_os = "linux")]
    let file = match file {
        Some(file) => check_host_mapping(device, memory, size, type_index, &file)?,
        None => None,
    };
    #[cfg(not(target_os = "linux"))]
    let file = None;
    Ok((Memory { raw: memory, file }, AllocationInfo { size, memory_type_index: type_index, dedicated: dedicated_on }))
}

/// Where the driver maps imported memory on the host, checks that the mapping lies
/// within the memory file it came from (mapped_file.rs): mapped, looked up, unmapped,
/// and never touched. The mapping, to free it safely; a refused import is undone
/// without the driver reading the file's header again.
#[cfg(target_os = "linux")]
fn check_host_mapping(
    device: &Device,
    memory: vk::DeviceMemory,
    size: u64,
    type_index: u32,
    file: &crate::vulkan::mapped_file::MemoryFile,
) -> Result<Option<FileMapping>> {
    if !device.memory_type_flags(type_index).contains(vk::MemoryPropertyFlags::HOST_VISIBLE) {
        return Ok(None);
    }
    // SAFETY: a live, host-visible allocation, not mapped yet; the pointer is only compared.
    let ptr = match unsafe { device.raw().map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) } {
        Ok(p) => p,
        Err(result) => {
            // SAFETY: unused, and never mapped.
            unsafe { device.raw().free_memory(memory, None) };
            return Err(Error::Vulkan { call: "vkMapMemory", result });
        }
    };
    let checked = file.check_mapping(ptr as *const u8, size);
    // SAFETY: mapped just above.
    unsafe { device.raw().unmap_memory(memory) };
    match checked {
        Ok(mapping) => Ok(Some(mapping)),
        Err(refused) => {
            match refused.mapping {
                // SAFETY: nothing used the memory; its mapping is disarmed, then the driver frees it.
                Some(m) if m.disarmable() => unsafe {
                    m.disarm();
                    device.raw().free_memory(memory, None);
                },
                // The driver's free would read a header that is not there: the mapping goes, and the
                // allocation's small record stays with the device, unfreed.
                // SAFETY: nothing used the memory, and it is never freed.
                Some(m) => unsafe { m.unmap() },
                None => {}
            }
            Err(Error::InvalidArgument(format!("the imported memory is refused: {}", refused.why)))
        }
    }
}

#[cfg(target_os = "linux")]
use crate::vulkan::mapped_file::FileMapping;

/// Elsewhere no imported memory is a file this process maps.
#[cfg(not(target_os = "linux"))]
#[derive(Debug)]
struct FileMapping;

#[cfg(not(target_os = "linux"))]
impl FileMapping {
    unsafe fn disarm(&self) {}
}

/// A `VkDeviceMemory`, and the driver's host mapping of the memory file it was
/// imported from (made safe to free: mapped_file.rs).
#[derive(Debug)]
struct Memory {
    raw: vk::DeviceMemory,
    file: Option<FileMapping>,
}

impl Memory {
    /// Frees it.
    ///
    /// # Safety
    /// Nothing may use it (no resource bound to it is used, nor its mapping), and it is freed once.
    unsafe fn free(&self, device: &Device) {
        // Frees of memory files wait for an import of one to be checked (mapped_file.rs).
        #[cfg(target_os = "linux")]
        let _lock = self.file.as_ref().map(|_| crate::vulkan::mapped_file::lock());
        if let Some(file) = &self.file {
            // SAFETY: the caller's promise; the free follows.
            unsafe { file.disarm() };
        }
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
        let support = image_export_support(device, &desc)?;
        if support.dedicated_only() && !memory.info.dedicated {
            return Err(Error::InvalidArgument(format!(
                "\"{}\" shares {:?} images only as dedicated allocations, but the memory is described as not \
                 dedicated",
                device.info().name,
                desc.format
            )));
        }
        Self::create(device, desc, Source::Import(memory), false)
    }

    fn create(device: &Arc<Device>, desc: ImageDesc, source: Source, dedicated_only: bool) -> Result<Self> {
        caps::texel_bytes(desc.format)?;
        caps::check_image_size(device, desc.width, desc.height)?;
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
                    match unsafe { device.raw().bind_image_memory(raw, memory.raw, 0) } {
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
                Ok(Self { raw, memory, desc, allocation, exportable: shared, device: Arc::clone(device) })
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

/// A buffer with its own memory; host-visible ones stay mapped.
pub(crate) struct Buffer {
    raw: vk::Buffer,
    memory: Memory,
    mapped: *mut u8,
    len: u64,
    usage: vk::BufferUsageFlags,
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
        let support = buffer_export_support(device, usage)?;
        if support.dedicated_only() && !exported.info.dedicated {
            return Err(Error::InvalidArgument(format!(
                "\"{}\" shares buffers only as dedicated allocations, but the memory is described as not dedicated",
                device.info().name
            )));
        }
        let flags = device.memory_type_flags(exported.info.memory_type_index);
        let memory = if flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT) {
            BufferMemory::HostVisible
        } else {
            BufferMemory::DeviceLocal
        };
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
        if len > device.max_allocation() {
            return Err(Error::Unsupported {
                device: device.info().name.clone(),
                what: format!("a buffer of {len} bytes (maxMemoryAllocationSize = {} bytes)", device.max_allocation()),
                remedy: "use a smaller frame".into(),
            });
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
                    unsafe { device.raw().bind_buffer_memory(raw, memory.raw, 0) }.call("vkBindBufferMemory")?;
                    let mapped = if kind != BufferMemory::DeviceLocal {
                        // SAFETY: the memory is host-visible and not mapped yet.
                        unsafe { device.raw().map_memory(memory.raw, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
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
            Ok((memory, allocation, mapped)) => {
                Ok(Self { raw, memory, mapped, len, usage, allocation, exportable: shared, device: Arc::clone(device) })
            }
            Err(e) => {
                // SAFETY: the buffer is unused.
                unsafe { device.raw().destroy_buffer(raw, None) };
                Err(e)
            }
        }
    }

    /// Exports the buffer's memory as a new `OPAQUE_FD` (`OPAQUE_WIN32` on Windows).
    pub(crate) fn export(&self) -> Result<ExportedMemory> {
        if !self.exportable {
            return Err(Error::internal("export of a buffer that was not created exportable"));
        }
        // SAFETY: the memory was allocated exportable (Source::Export) for this handle type.
        unsafe { export_fd(&self.device, self.memory.raw, self.allocation) }
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
        // SAFETY: the buffer is gone; freeing also unmaps.
        unsafe { self.memory.free(&self.device) };
    }
}
