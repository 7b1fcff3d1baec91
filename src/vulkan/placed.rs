//! Memory the caller exported, imported once, and buffers placed in it at offsets: a host's
//! pooled allocation holding many frames' planes (the context's `import_memory`).

use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
#[cfg(target_os = "linux")]
use crate::vulkan::caps;
use crate::vulkan::caps::buffer_export_support;
use crate::vulkan::device::Device;
use crate::vulkan::memory::{
    AllocationInfo, Backing, Buffer, Dedicated, ExportedMemory, Memory, Source, allocate, check_import,
};

/// Memory the caller exported, imported once, into which buffers are placed at offsets
/// ([`Buffer::place`]): a host's pooled allocation holding many frames' planes. Freed when
/// the last buffer placed in it and the context's own reference are gone.
pub(crate) struct Allocation {
    memory: Memory,
    info: AllocationInfo,
    handle_type: vk::ExternalMemoryHandleTypeFlags,
    /// What a buffer placed in it must be aligned to (`VkMemoryRequirements::alignment`).
    alignment: u64,
    device: Arc<Device>,
}

impl std::fmt::Debug for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocation").field("info", &self.info).field("alignment", &self.alignment).finish()
    }
}

/// A buffer of `usage` for memory of `handle_type`, with its requirements. Destroyed by the caller.
fn external_buffer(
    device: &Device,
    len: u64,
    usage: vk::BufferUsageFlags,
    handle_type: vk::ExternalMemoryHandleTypeFlags,
) -> Result<(vk::Buffer, vk::MemoryRequirements)> {
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle_type);
    let info = vk::BufferCreateInfo::default()
        .size(len)
        .usage(usage)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .push_next(&mut external);
    // SAFETY: info is valid.
    let raw = unsafe { device.raw().create_buffer(&info, None) }.call("vkCreateBuffer")?;
    // SAFETY: raw is a valid buffer of this device.
    let req = unsafe { device.raw().get_buffer_memory_requirements(raw) };
    Ok((raw, req))
}

impl Allocation {
    /// Imports `exported` once, for buffers of `usage` to be placed in it. On success the
    /// descriptor belongs to the allocation; on failure it is closed.
    pub(crate) fn import(device: &Arc<Device>, exported: ExportedMemory, usage: vk::BufferUsageFlags) -> Result<Self> {
        let info = exported.info;
        if info.dedicated {
            return Err(Error::InvalidArgument(
                "the memory is described as a dedicated allocation, which holds one image or buffer: only memory \
                 allocated without VkMemoryDedicatedAllocateInfo can hold buffers placed at offsets"
                    .into(),
            ));
        }
        let source = Source::import(device, exported)?;
        match &source {
            Source::Import(_) => {
                let support = buffer_export_support(device, usage)?;
                if support.dedicated_only() {
                    return Err(Error::Unsupported {
                        device: device.info().name.clone(),
                        what: "buffers placed in shared memory (the driver shares buffers only as dedicated \
                               allocations)"
                            .into(),
                        remedy: "import each buffer's memory of its own (import_input_buffer)".into(),
                    });
                }
            }
            #[cfg(target_os = "linux")]
            Source::HostFile(..) => caps::buffer_host_import_support(device, usage)?,
            _ => {}
        }
        let handle_type = source.handle_type();
        // A small buffer of the usage tells the memory types and alignment placed buffers need.
        let (probe, req) = external_buffer(device, info.size.min(1 << 16), usage, handle_type)?;
        let made = allocate(device, req, false, Dedicated::Buffer(probe), vk::MemoryPropertyFlags::empty(), source);
        // SAFETY: the probe was never bound or used.
        unsafe { device.raw().destroy_buffer(probe, None) };
        let (memory, info) = made?;
        Ok(Self { memory, info, handle_type, alignment: req.alignment.max(1), device: Arc::clone(device) })
    }

    /// Its size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.info.size
    }

    /// What a placed buffer's offset must be a multiple of.
    pub(crate) fn alignment(&self) -> u64 {
        self.alignment
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: every buffer placed in it holds a reference, so none is left; a memory
        // file's mapping goes after the free, when `memory` drops.
        unsafe { self.memory.free(&self.device) };
    }
}

impl Buffer {
    /// A buffer of `len` bytes at `offset` in `allocation` (a multiple of its alignment).
    pub(crate) fn place(
        allocation: &Arc<Allocation>,
        offset: u64,
        len: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<Self> {
        let a = allocation;
        let device = &a.device;
        let fits = offset.checked_add(len).is_some_and(|end| end <= a.info.size);
        if len == 0 || !fits || !offset.is_multiple_of(a.alignment) {
            return Err(Error::InvalidArgument(format!(
                "a buffer of {len} bytes at offset {offset} does not fit the imported memory of {} bytes at an \
                 offset that is a multiple of {}",
                a.info.size, a.alignment
            )));
        }
        let (raw, req) = external_buffer(device, len, usage, a.handle_type)?;
        let checked = check_import(device, req, &AllocationInfo { size: a.info.size - offset, ..a.info })
            .and_then(|()| {
                if offset.is_multiple_of(req.alignment.max(1)) {
                    Ok(())
                } else {
                    Err(Error::InvalidArgument(format!(
                        "offset {offset} is not a multiple of the {} bytes a buffer must be aligned to here",
                        req.alignment
                    )))
                }
            })
            .and_then(|()| {
                // SAFETY: the memory is live (held by `a`), of a type the buffer allows, and the range fits.
                unsafe { device.raw().bind_buffer_memory(raw, a.memory.raw, a.memory.offset() + offset) }
                    .call("vkBindBufferMemory")
            });
        if let Err(e) = checked {
            // SAFETY: the buffer is unused.
            unsafe { device.raw().destroy_buffer(raw, None) };
            return Err(e);
        }
        Ok(Self {
            raw,
            memory: Backing::Placed(Arc::clone(a)),
            mapped: std::ptr::null_mut(),
            len,
            usage,
            allocation: a.info,
            exportable: false,
            device: Arc::clone(device),
        })
    }
}
