//! Command pools and the recording primitives the frame's commands are made of.

use std::sync::Arc;

use ash::vk;

use crate::error::{Result, VkResultExt};
use crate::vulkan::device::Device;

/// A command pool for command buffers that are recorded once and resubmitted
/// (one thread uses it: the context's).
pub(crate) struct CommandPool {
    raw: vk::CommandPool,
    device: Arc<Device>,
}

impl CommandPool {
    /// A pool on the device's queue family.
    pub(crate) fn new(device: &Arc<Device>) -> Result<Self> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: the device is live.
        let raw = unsafe { device.raw().create_command_pool(&info, None) }.call("vkCreateCommandPool")?;
        Ok(Self { raw, device: Arc::clone(device) })
    }

    /// One primary command buffer.
    pub(crate) fn allocate(&self) -> Result<vk::CommandBuffer> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.raw)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: the pool is live and used by one thread.
        Ok(unsafe { self.device.raw().allocate_command_buffers(&info) }.call("vkAllocateCommandBuffers")?[0])
    }

    /// Frees command buffers of this pool.
    ///
    /// # Safety
    /// The buffers must come from this pool and must not be pending execution.
    pub(crate) unsafe fn free(&self, cmds: &[vk::CommandBuffer]) {
        if cmds.is_empty() {
            return; // vkFreeCommandBuffers takes at least one
        }
        // SAFETY: the buffers belong to this pool and are not pending (caller's contract).
        unsafe { self.device.raw().free_command_buffers(self.raw, cmds) };
    }
}

impl Drop for CommandPool {
    fn drop(&mut self) {
        // SAFETY: owners retire every frame before dropping; destroying the pool frees its buffers.
        unsafe { self.device.raw().destroy_command_pool(self.raw, None) };
    }
}

/// Begins recording a command buffer that is resubmitted as it is, frame after frame.
///
/// # Safety
/// `cmd` must be a command buffer of `device` that is not pending execution.
pub(crate) unsafe fn begin(device: &Device, cmd: vk::CommandBuffer) -> Result<()> {
    let begin = vk::CommandBufferBeginInfo::default();
    // SAFETY: cmd belongs to this device and is not pending (caller's contract).
    unsafe { device.raw().begin_command_buffer(cmd, &begin) }.call("vkBeginCommandBuffer")
}

/// Ends recording.
///
/// # Safety
/// `cmd` must be recording on `device`.
pub(crate) unsafe fn end(device: &Device, cmd: vk::CommandBuffer) -> Result<()> {
    // SAFETY: cmd is recording (caller's contract).
    unsafe { device.raw().end_command_buffer(cmd) }.call("vkEndCommandBuffer")
}

/// Records a pipeline barrier.
///
/// # Safety
/// `cmd` must be recording on `device`, and every barrier must name a live
/// resource of `device` that outlives the command buffer's execution.
pub(crate) unsafe fn barrier(
    device: &Device,
    cmd: vk::CommandBuffer,
    src: vk::PipelineStageFlags,
    dst: vk::PipelineStageFlags,
    buffers: &[vk::BufferMemoryBarrier<'_>],
    images: &[vk::ImageMemoryBarrier<'_>],
) {
    // SAFETY: cmd is recording on this device; the barriers name live resources (caller's contract).
    unsafe { device.raw().cmd_pipeline_barrier(cmd, src, dst, vk::DependencyFlags::empty(), &[], buffers, images) };
}

/// Records a global memory barrier: `src_access` in `src` stages made visible to `dst_access`
/// in `dst` stages.
///
/// # Safety
/// `cmd` must be recording on `device`.
pub(crate) unsafe fn memory_barrier(
    device: &Device,
    cmd: vk::CommandBuffer,
    (src, src_access): (vk::PipelineStageFlags, vk::AccessFlags),
    (dst, dst_access): (vk::PipelineStageFlags, vk::AccessFlags),
) {
    let all = vk::MemoryBarrier::default().src_access_mask(src_access).dst_access_mask(dst_access);
    // SAFETY: cmd is recording on this device (caller's contract).
    unsafe { device.raw().cmd_pipeline_barrier(cmd, src, dst, vk::DependencyFlags::empty(), &[all], &[], &[]) };
}
