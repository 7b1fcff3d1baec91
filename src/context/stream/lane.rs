//! One lane of a host stream: persistent pinned staging for an incoming and an
//! outgoing host frame, the GPU buffers between them and the context's images,
//! and the two command buffers recorded once: in (staging → [conversion] → the
//! input image) and out (the output image → [conversion] → staging).

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

use ash::vk;

use super::layout::HostLayout;
use crate::context::passes::{CONVERT_IN, CONVERT_OUT, ConvertParams};
use crate::error::{Error, Result};
use crate::vulkan::Device;
use crate::vulkan::command::{self, CommandPool};
use crate::vulkan::compute::{ComputePass, DescriptorSet, Resource, linear_grid};
use crate::vulkan::device::Batch;
use crate::vulkan::memory::{Buffer, BufferMemory, Image};
use crate::vulkan::query::TimestampPool;
use crate::vulkan::sync::Fence;
use crate::vulkan::transfer::{full_barrier, region};

const SB: vk::DescriptorType = vk::DescriptorType::STORAGE_BUFFER;

/// The two conversion pipelines, built once a stream (only those its layouts need).
pub(crate) struct ConvertPasses {
    into: Option<ComputePass>,
    out_of: Option<ComputePass>,
}

fn entry(module: &'static crate::context::passes::ShaderModule) -> Result<&'static crate::context::passes::EntryPoint> {
    module.entries.first().ok_or_else(|| Error::internal(format!("no entry point in {}", module.name)))
}

impl ConvertPasses {
    pub(crate) fn new(device: &Arc<Device>, input: HostLayout, output: HostLayout) -> Result<Self> {
        let make = |module: &'static crate::context::passes::ShaderModule| -> Result<ComputePass> {
            ComputePass::new(device, module.spirv, entry(module)?.name, &[SB, SB], ConvertParams::SIZE)
        };
        let into = (input != HostLayout::Rgba8).then(|| make(&CONVERT_IN)).transpose()?;
        let out_of = (output != HostLayout::Rgba8).then(|| make(&CONVERT_OUT)).transpose()?;
        Ok(Self { into, out_of })
    }
}

/// What a lane's command buffers use. Teardown order: the fences and the pool
/// (its recorded command buffers) and sets before the buffers.
struct LaneRes {
    fence_in: Fence,
    fence_out: Fence,
    /// Two timestamps around the copy out, where the queue family writes them.
    stamps: Option<TimestampPool>,
    _pool: CommandPool,
    _sets: Vec<DescriptorSet>,
    upload: Buffer,
    download: Buffer,
    _between: Vec<Buffer>,
}

/// A lane's staging and recorded copies.
pub(crate) struct Lane {
    res: ManuallyDrop<LaneRes>,
    copy_in: vk::CommandBuffer,
    copy_out: vk::CommandBuffer,
    /// A copy in or out was submitted and its fence not yet waited for.
    pending_in: bool,
    pending_out: bool,
    device: Arc<Device>,
}

fn device_buffer(device: &Arc<Device>, len: usize, usage: vk::BufferUsageFlags) -> Result<Buffer> {
    Buffer::new(device, len.next_multiple_of(4).max(4) as u64, usage, BufferMemory::DeviceLocal)
}

/// Bytes of an RGBA frame of `image`'s size: 4 a pixel for RGBA8, 8 for RGBA16F.
fn rgba_len(image: &Image) -> usize {
    image.desc().packed_len()
}

impl Lane {
    /// A lane between host frames of `input_layout` / `output_layout` and the
    /// context's `input` / `output` images (RGBA8, or RGBA16F for deep layouts).
    ///
    /// # Safety
    /// Both images must be live images of `device` in `GENERAL` layout that stay
    /// alive for as long as this lane submits copies; `passes` must outlive the lane.
    pub(crate) unsafe fn new(
        device: &Arc<Device>,
        passes: &ConvertPasses,
        (input_layout, input): (HostLayout, &Image),
        (output_layout, output): (HostLayout, &Image),
    ) -> Result<Self> {
        let (iw, ih) = (input.desc().width, input.desc().height);
        let (ow, oh) = (output.desc().width, output.desc().height);
        let in_len = input_layout.frame_len(iw, ih);
        let out_len = output_layout.frame_len(ow, oh);
        let transfer = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        let upload = Buffer::new(device, in_len.next_multiple_of(4) as u64, transfer, BufferMemory::HostVisible)?;
        let download = Buffer::new(device, out_len.next_multiple_of(4) as u64, transfer, BufferMemory::HostCached)?;
        let storage = vk::BufferUsageFlags::STORAGE_BUFFER | transfer;
        let pool = CommandPool::new(device)?;
        let copy_in = pool.allocate()?;
        let copy_out = pool.allocate()?;
        let mut sets = Vec::new();
        let mut between = Vec::new();
        let max = device.limits().max_compute_work_group_count;
        let raw = device.raw();

        // In: staging → (packed → conversion → RGBA) → the input image.
        // SAFETY: copy_in is a fresh command buffer of this device's pool.
        unsafe { command::begin(device, copy_in) }?;
        match (input_layout.params(iw, ih), &passes.into) {
            (Some(params), Some(pass)) => {
                let packed = device_buffer(device, in_len, storage)?;
                let rgba = device_buffer(device, rgba_len(input), storage)?;
                // SAFETY: both buffers are live and kept in the lane's resources.
                let set = unsafe {
                    pass.bind(&[
                        Resource::StorageBuffer(packed.raw(), packed.len()),
                        Resource::StorageBuffer(rgba.raw(), rgba.len()),
                    ])
                }?;
                let groups = [iw.div_ceil(8), ih.div_ceil(8), 1];
                if groups[0] > max[0] || groups[1] > max[1] {
                    return Err(Error::internal("a stream frame too large for one conversion dispatch"));
                }
                let copy = vk::BufferCopy::default().size(upload.len());
                // SAFETY: copy_in is recording; every buffer and image is live and large enough.
                unsafe {
                    raw.cmd_copy_buffer(copy_in, upload.raw(), packed.raw(), &[copy]);
                    full_barrier(device, copy_in);
                    pass.record(copy_in, &set, &params.bytes(), groups);
                    full_barrier(device, copy_in);
                    raw.cmd_copy_buffer_to_image(
                        copy_in,
                        rgba.raw(),
                        input.raw(),
                        vk::ImageLayout::GENERAL,
                        &[region(input)],
                    );
                    full_barrier(device, copy_in);
                }
                sets.push(set);
                between.extend([packed, rgba]);
            }
            (None, _) => {
                // SAFETY: copy_in is recording; the staging holds the image's packed size.
                unsafe {
                    full_barrier(device, copy_in);
                    raw.cmd_copy_buffer_to_image(
                        copy_in,
                        upload.raw(),
                        input.raw(),
                        vk::ImageLayout::GENERAL,
                        &[region(input)],
                    );
                    full_barrier(device, copy_in);
                }
            }
            (Some(_), None) => return Err(Error::internal("a stream lane without its conversion pass")),
        }
        // SAFETY: copy_in is recording.
        unsafe { command::end(device, copy_in) }?;

        // Out: the output image → (RGBA → conversion → packed) → staging, between two
        // timestamps where the queue family writes them.
        let stamps = device.has_timestamps().then(|| TimestampPool::new(device, 2)).transpose()?;
        // SAFETY: copy_out is a fresh command buffer of this device's pool.
        unsafe { command::begin(device, copy_out) }?;
        if let Some(q) = &stamps {
            // SAFETY: copy_out is recording; the pool lives in the lane's resources, dropped after its fences.
            unsafe {
                q.record_reset(copy_out, 0, 2);
                q.record(copy_out, vk::PipelineStageFlags::TOP_OF_PIPE, 0);
            }
        }
        match (output_layout.params(ow, oh), &passes.out_of) {
            (Some(mut params), Some(pass)) => {
                let rgba = device_buffer(device, rgba_len(output), storage)?;
                let packed = device_buffer(device, out_len, storage)?;
                // SAFETY: both buffers are live and kept in the lane's resources.
                let set = unsafe {
                    pass.bind(&[
                        Resource::StorageBuffer(rgba.raw(), rgba.len()),
                        Resource::StorageBuffer(packed.raw(), packed.len()),
                    ])
                }?;
                let words = out_len.div_ceil(4) as u64;
                let (groups, row) = linear_grid(words, 64, max)
                    .ok_or_else(|| Error::internal("a stream frame too large for one conversion dispatch"))?;
                params.row = row;
                let copy = vk::BufferCopy::default().size(download.len());
                // SAFETY: copy_out is recording; every buffer and image is live and large enough.
                unsafe {
                    full_barrier(device, copy_out);
                    raw.cmd_copy_image_to_buffer(
                        copy_out,
                        output.raw(),
                        vk::ImageLayout::GENERAL,
                        rgba.raw(),
                        &[region(output)],
                    );
                    full_barrier(device, copy_out);
                    pass.record(copy_out, &set, &params.bytes(), groups);
                    full_barrier(device, copy_out);
                    raw.cmd_copy_buffer(copy_out, packed.raw(), download.raw(), &[copy]);
                    full_barrier(device, copy_out);
                }
                sets.push(set);
                between.extend([rgba, packed]);
            }
            (None, _) => {
                // SAFETY: copy_out is recording; the staging holds the image's packed size.
                unsafe {
                    full_barrier(device, copy_out);
                    raw.cmd_copy_image_to_buffer(
                        copy_out,
                        output.raw(),
                        vk::ImageLayout::GENERAL,
                        download.raw(),
                        &[region(output)],
                    );
                    full_barrier(device, copy_out);
                }
            }
            (Some(_), None) => return Err(Error::internal("a stream lane without its conversion pass")),
        }
        if let Some(q) = &stamps {
            // SAFETY: copy_out is recording; query 1 was reset above.
            unsafe { q.record(copy_out, vk::PipelineStageFlags::BOTTOM_OF_PIPE, 1) };
        }
        // SAFETY: copy_out is recording.
        unsafe { command::end(device, copy_out) }?;
        let res = LaneRes {
            fence_in: Fence::new(device)?,
            fence_out: Fence::new(device)?,
            stamps,
            _pool: pool,
            _sets: sets,
            upload,
            download,
            _between: between,
        };
        Ok(Self {
            res: ManuallyDrop::new(res),
            copy_in,
            copy_out,
            pending_in: false,
            pending_out: false,
            device: Arc::clone(device),
        })
    }

    /// The host frame the next [`submit_in`](Self::submit_in) sends (its first `len` bytes).
    pub(crate) fn upload_mut(&mut self, len: usize, timeout: Duration) -> Result<&mut [u8]> {
        self.wait_in(timeout)?;
        // A read-back left behind by a frame that failed or timed out in stream_pop.
        self.wait_out(timeout)?;
        // SAFETY: no copy from it is pending (waited above); &mut self is the only host access.
        let all = unsafe { self.res.upload.mapped_mut() }.ok_or_else(|| Error::internal("staging not mapped"))?;
        all.get_mut(..len).ok_or_else(|| Error::internal("stream staging smaller than a frame"))
    }

    /// The host frame the last copy-out wrote (its first `len` bytes), once waited for.
    pub(crate) fn download(&self, len: usize) -> Result<&[u8]> {
        if self.pending_out {
            return Err(Error::internal("a stream lane is read while its copy-out is in flight"));
        }
        // SAFETY: the copy-out into it has completed (its fence was waited for).
        let all = unsafe { self.res.download.mapped() }.ok_or_else(|| Error::internal("staging not mapped"))?;
        all.get(..len).ok_or_else(|| Error::internal("stream staging smaller than a frame"))
    }

    /// Submits the copy in on queue 0, signalling `signal = value` when done.
    ///
    /// # Safety
    /// `signal` must be a live timeline semaphore of this device below `value`.
    pub(crate) unsafe fn submit_in(&mut self, signal: vk::Semaphore, value: u64) -> Result<()> {
        let batch = Batch { cmds: &[self.copy_in], signal: &[(signal, value)], ..Batch::default() };
        // SAFETY: copy_in is executable and not pending (its fence was waited for in upload_mut).
        unsafe { self.device.submit_batch(0, batch, self.res.fence_in.raw()) }?;
        self.pending_in = true;
        Ok(())
    }

    /// Submits the copy out on queue `queue` once `wait = value` (the frame's output is written).
    ///
    /// # Safety
    /// `wait` must be a live timeline semaphore of this device that reaches `value`
    /// once the output image is written, by work submitted before this call or not
    /// waiting behind it on `queue`.
    pub(crate) unsafe fn submit_out(&mut self, queue: usize, wait: vk::Semaphore, value: u64) -> Result<()> {
        if self.pending_out {
            return Err(Error::internal("a stream lane's copy-out submitted twice"));
        }
        let wait = [(wait, value, vk::PipelineStageFlags::ALL_COMMANDS)];
        let batch = Batch { cmds: &[self.copy_out], wait: &wait, ..Batch::default() };
        // SAFETY: copy_out is executable and not pending (the last fence was waited for).
        unsafe { self.device.submit_batch(queue, batch, self.res.fence_out.raw()) }?;
        self.pending_out = true;
        Ok(())
    }

    /// Whether the copy out was submitted and not yet waited for.
    pub(crate) fn out_submitted(&self) -> bool {
        self.pending_out
    }

    fn wait_in(&mut self, timeout: Duration) -> Result<()> {
        if self.pending_in {
            if !self.res.fence_in.wait_and_reset(timeout)? {
                return Err(Error::Timeout { what: "a stream frame's upload".into(), waited: timeout });
            }
            self.pending_in = false;
        }
        Ok(())
    }

    /// The last copy out's GPU time in ms, once waited for (NaN where the queue
    /// family writes no timestamps, or the results are not there).
    pub(crate) fn read_back_ms(&self) -> f64 {
        let Some(q) = &self.res.stamps else { return f64::NAN };
        if self.pending_out {
            return f64::NAN;
        }
        match q.read(0, 2) {
            Ok(Some(t)) if t[1] >= t[0] => (t[1] - t[0]) as f64 * self.device.timestamp_period_ns() as f64 * 1e-6,
            _ => f64::NAN,
        }
    }

    /// Waits (bounded) for the last copy out.
    pub(crate) fn wait_out(&mut self, timeout: Duration) -> Result<()> {
        if self.pending_out {
            if !self.res.fence_out.wait_and_reset(timeout)? {
                return Err(Error::Timeout { what: "a stream frame's read-back".into(), waited: timeout });
            }
            self.pending_out = false;
        }
        Ok(())
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Copies still pending must finish before their command buffers and buffers go;
        // one that never does (a lost device) leaves them leaked, not destroyed in use.
        let ten = Duration::from_secs(10);
        if self.wait_in(ten).is_err() || self.wait_out(ten).is_err() {
            log::error!("a stream lane's copy did not finish in 10 s; its staging buffers are leaked");
            return;
        }
        // SAFETY: nothing pending uses them (waited above), and `res` is not used after this.
        unsafe { ManuallyDrop::drop(&mut self.res) };
    }
}
