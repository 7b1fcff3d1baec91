//! Timestamp queries: GPU times of the pre and post passes.

use std::sync::Arc;

use ash::vk;

use crate::error::{Result, VkResultExt};
use crate::vulkan::device::Device;

/// A pool of timestamp queries.
pub(crate) struct TimestampPool {
    raw: vk::QueryPool,
    count: u32,
    device: Arc<Device>,
}

impl TimestampPool {
    /// A pool of `count` timestamps.
    pub(crate) fn new(device: &Arc<Device>, count: u32) -> Result<Self> {
        let info = vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(count);
        // SAFETY: the device is live; info is valid.
        let raw = unsafe { device.raw().create_query_pool(&info, None) }.call("vkCreateQueryPool")?;
        Ok(Self { raw, count, device: Arc::clone(device) })
    }

    /// Records a reset of queries `first..first + n` (clamped to the pool).
    ///
    /// # Safety
    /// `cmd` must be in the recording state on this pool's device, and the pool
    /// must outlive its execution.
    pub(crate) unsafe fn record_reset(&self, cmd: vk::CommandBuffer, first: u32, n: u32) {
        let first = first.min(self.count);
        // SAFETY: cmd is recording on this device (caller's contract); the range lies in the pool.
        unsafe { self.device.raw().cmd_reset_query_pool(cmd, self.raw, first, n.min(self.count - first)) };
    }

    /// Records a timestamp into query `index` once `stage` is reached.
    ///
    /// # Safety
    /// `cmd` must be in the recording state on this pool's device, query
    /// `index` must have been reset earlier in submission order, and the pool
    /// must outlive the command buffer's execution.
    pub(crate) unsafe fn record(&self, cmd: vk::CommandBuffer, stage: vk::PipelineStageFlags, index: u32) {
        if index >= self.count {
            return;
        }
        // SAFETY: cmd is recording on this device and the query was reset (caller's contract).
        unsafe { self.device.raw().cmd_write_timestamp(cmd, stage, self.raw, index) };
    }

    /// Reads queries `first..first + n` (their work must have completed). Ticks, or None when unavailable.
    pub(crate) fn read(&self, first: u32, n: u32) -> Result<Option<Vec<u64>>> {
        if first.checked_add(n).is_none_or(|end| end > self.count) {
            return Err(crate::error::Error::internal("timestamp queries out of range"));
        }
        let mut out = vec![0u64; n as usize];
        // SAFETY: the range lies in the pool; out holds n 64-bit results.
        let r = unsafe {
            self.device.raw().get_query_pool_results(self.raw, first, &mut out, vk::QueryResultFlags::TYPE_64)
        };
        match r {
            Ok(()) => Ok(Some(out)),
            Err(vk::Result::NOT_READY) => Ok(None),
            Err(e) => Err(e).call("vkGetQueryPoolResults"),
        }
    }
}

impl Drop for TimestampPool {
    fn drop(&mut self) {
        // SAFETY: owners retire all work that writes the queries first.
        unsafe { self.device.raw().destroy_query_pool(self.raw, None) };
    }
}
