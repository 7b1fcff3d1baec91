//! Blocking transfers through a staging buffer, and image layout conventions.
//!
//! Convention: between operations every neural-frame image is in `GENERAL`
//! layout. An image shared with another device or API is released to
//! `VK_QUEUE_FAMILY_EXTERNAL` after writing and acquired from it before use.

use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result};
use crate::vulkan::device::{Batch, Device};
use crate::vulkan::memory::{Buffer, BufferMemory, Image};

/// The whole of a colour image of one mip level and one layer.
fn color() -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange::default().aspect_mask(vk::ImageAspectFlags::COLOR).level_count(1).layer_count(1)
}

/// An image barrier over the whole colour image.
pub(crate) fn image_barrier(
    image: vk::Image,
    old: vk::ImageLayout,
    new: vk::ImageLayout,
    src_access: vk::AccessFlags,
    dst_access: vk::AccessFlags,
) -> vk::ImageMemoryBarrier<'static> {
    vk::ImageMemoryBarrier::default()
        .image(image)
        .old_layout(old)
        .new_layout(new)
        .src_access_mask(src_access)
        .dst_access_mask(dst_access)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .subresource_range(color())
}

/// A barrier over the whole buffer, on no queue family transfer.
pub(crate) fn buffer_barrier(
    buffer: vk::Buffer,
    src: vk::AccessFlags,
    dst: vk::AccessFlags,
) -> vk::BufferMemoryBarrier<'static> {
    vk::BufferMemoryBarrier::default()
        .buffer(buffer)
        .size(vk::WHOLE_SIZE)
        .src_access_mask(src)
        .dst_access_mask(dst)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
}

/// # Safety
/// `cmd` must be recording on `device`; the barrier must name a live image of it.
unsafe fn barrier(device: &Device, cmd: vk::CommandBuffer, b: vk::ImageMemoryBarrier<'_>) {
    let all = vk::PipelineStageFlags::ALL_COMMANDS;
    // SAFETY: cmd is recording on this device; the barrier names a live image (caller's contract).
    unsafe { super::command::barrier(device, cmd, all, all, &[], &[b]) };
}

pub(crate) fn region(image: &Image) -> vk::BufferImageCopy {
    desc_region(image.desc())
}

/// The copy region of a whole single-level colour image described by `d`.
fn desc_region(d: &super::caps::ImageDesc) -> vk::BufferImageCopy {
    vk::BufferImageCopy::default()
        .image_subresource(
            vk::ImageSubresourceLayers::default().aspect_mask(vk::ImageAspectFlags::COLOR).layer_count(1),
        )
        .image_extent(vk::Extent3D { width: d.width, height: d.height, depth: 1 })
}

/// An image's layouts and accesses around a copy: it is in `layout` (last written or read as
/// `access`), the copy runs in `copy_layout`, and it goes to `after` (for `after_access`).
#[derive(Clone, Copy)]
struct Around {
    layout: vk::ImageLayout,
    access: vk::AccessFlags,
    copy_layout: vk::ImageLayout,
    after: vk::ImageLayout,
    after_access: vk::AccessFlags,
}

/// Records a copy of `buffer`'s packed texels into the whole image `raw` (described by `desc`),
/// between a barrier into `around.copy_layout` and one out of it.
///
/// # Safety
/// `cmd` is recording on `device`; `raw` is a live image of `device` in `around.layout`;
/// `buffer` holds at least `desc.packed_len()` bytes.
unsafe fn record_to_image(
    device: &Device,
    cmd: vk::CommandBuffer,
    buffer: vk::Buffer,
    (raw, desc): (vk::Image, &super::caps::ImageDesc),
    around: Around,
) {
    let before = image_barrier(raw, around.layout, around.copy_layout, around.access, vk::AccessFlags::TRANSFER_WRITE);
    let after =
        image_barrier(raw, around.copy_layout, around.after, vk::AccessFlags::TRANSFER_WRITE, around.after_access);
    // SAFETY: the caller's contract: cmd is recording, the barrier names the live image.
    unsafe { barrier(device, cmd, before) };
    // SAFETY: as above; the buffer holds the image's packed size.
    unsafe { device.raw().cmd_copy_buffer_to_image(cmd, buffer, raw, around.copy_layout, &[desc_region(desc)]) };
    // SAFETY: as for the first barrier.
    unsafe { barrier(device, cmd, after) };
}

/// Records a copy of the whole image `raw` (described by `desc`) into `buffer`'s packed texels,
/// after a barrier into `around.copy_layout`, and one out of it where `around.after` differs.
///
/// # Safety
/// As [`record_to_image`], the buffer written.
unsafe fn record_from_image(
    device: &Device,
    cmd: vk::CommandBuffer,
    (raw, desc): (vk::Image, &super::caps::ImageDesc),
    buffer: vk::Buffer,
    around: Around,
) {
    let before = image_barrier(raw, around.layout, around.copy_layout, around.access, vk::AccessFlags::TRANSFER_READ);
    let after =
        image_barrier(raw, around.copy_layout, around.after, vk::AccessFlags::TRANSFER_READ, around.after_access);
    // SAFETY: the caller's contract: cmd is recording, the barrier names the live image.
    unsafe { barrier(device, cmd, before) };
    // SAFETY: as above; the buffer holds the image's packed size.
    unsafe { device.raw().cmd_copy_image_to_buffer(cmd, raw, around.copy_layout, buffer, &[desc_region(desc)]) };
    if around.after != around.copy_layout {
        // SAFETY: as for the first barrier.
        unsafe { barrier(device, cmd, after) };
    }
}

fn staging(device: &Arc<Device>, len: usize) -> Result<Buffer> {
    Buffer::new(
        device,
        len as u64,
        vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
        BufferMemory::HostVisible,
    )
}

fn fill_staging(stage: &mut Buffer, data: &[u8]) -> Result<()> {
    // SAFETY: the staging buffer is new; no GPU work uses it yet.
    let mapped = unsafe { stage.mapped_mut() }.ok_or_else(|| Error::internal("staging buffer not mapped"))?;
    mapped[..data.len()].copy_from_slice(data);
    Ok(())
}

fn read_staging(stage: &Buffer, len: usize) -> Result<Vec<u8>> {
    // SAFETY: the one-shot copy into the staging buffer has completed (its fence was waited for).
    let mapped = unsafe { stage.mapped() }.ok_or_else(|| Error::internal("staging buffer not mapped"))?;
    Ok(mapped[..len].to_vec())
}

/// Uploads tightly packed texels into `image` (previous contents discarded);
/// the image ends in `GENERAL` layout. Work already submitted to queue 0 that
/// uses the image finishes first (the first barrier waits for it).
pub(crate) fn upload_image(image: &Image, data: &[u8]) -> Result<()> {
    let len = image.desc().packed_len();
    if data.len() != len {
        return Err(Error::InvalidArgument(format!(
            "upload of {} bytes into a {}×{} {:?} image, which takes {len}",
            data.len(),
            image.desc().width,
            image.desc().height,
            image.desc().format
        )));
    }
    let device = image.device();
    let mut stage = staging(device, len)?;
    fill_staging(&mut stage, data)?;
    let around = Around {
        layout: vk::ImageLayout::UNDEFINED,
        access: vk::AccessFlags::empty(),
        copy_layout: vk::ImageLayout::TRANSFER_DST_OPTIMAL,
        after: vk::ImageLayout::GENERAL,
        after_access: vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
    };
    // SAFETY: one_shot records into cmd on this device; the image is live and its packed size
    // is the staging buffer's.
    let record = |cmd| unsafe { record_to_image(device, cmd, stage.raw(), (image.raw(), image.desc()), around) };
    // SAFETY: the commands use the image and the staging buffer, both alive until the call returns.
    unsafe { device.one_shot(record) }
}

/// Reads an image in `GENERAL` layout back into tightly packed texels.
pub(crate) fn readback_image(image: &Image) -> Result<Vec<u8>> {
    // SAFETY: the image is live (borrowed) and, as every image of the context's, in GENERAL layout.
    unsafe { readback_raw(image.device(), image.raw(), image.desc(), vk::ImageLayout::GENERAL) }
}

/// Reads a live image of `device` back into tightly packed texels; it is in `layout`
/// and left in it (a layout other than `GENERAL` or `TRANSFER_SRC_OPTIMAL` is changed
/// for the copy and back). Work already submitted to queue 0 that writes it finishes first.
///
/// # Safety
/// `raw` must be a live image of `device` described by `desc` (size, format; a
/// single-level colour image with `TRANSFER_SRC` usage), in `layout`, not used by
/// other work while the call runs.
pub(crate) unsafe fn readback_raw(
    device: &Arc<Device>,
    raw: vk::Image,
    desc: &super::caps::ImageDesc,
    layout: vk::ImageLayout,
) -> Result<Vec<u8>> {
    let len = desc.packed_len();
    let stage = staging(device, len)?;
    let copy_layout = match layout {
        vk::ImageLayout::GENERAL | vk::ImageLayout::TRANSFER_SRC_OPTIMAL => layout,
        _ => vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
    };
    let around = Around {
        layout,
        access: vk::AccessFlags::MEMORY_WRITE,
        copy_layout,
        after: layout,
        after_access: vk::AccessFlags::MEMORY_READ,
    };
    // SAFETY: one_shot records into cmd on this device; the image is live and in `layout`
    // (the caller's contract), the staging buffer holds its packed size.
    let record = |cmd| unsafe { record_from_image(device, cmd, (raw, desc), stage.raw(), around) };
    // SAFETY: the commands use the image (live, caller's contract) and the staging buffer, alive until the call returns.
    unsafe { device.one_shot(record) }?;
    read_staging(&stage, len)
}

/// Writes one texel (`data`: exactly one texel's bytes) at pixel (x, y) of an
/// image in `GENERAL` layout (tests, fault injection).
pub(crate) fn write_pixel(image: &Image, x: u32, y: u32, data: &[u8]) -> Result<()> {
    let d = image.desc();
    if x >= d.width || y >= d.height {
        return Err(Error::InvalidArgument(format!("pixel ({x}, {y}) is outside the {}×{} image", d.width, d.height)));
    }
    let texel = crate::vulkan::caps::texel_bytes(d.format)? as usize;
    if data.len() != texel {
        return Err(Error::InvalidArgument(format!("a {:?} texel is {texel} bytes, not {}", d.format, data.len())));
    }
    let device = image.device();
    let mut stage = staging(device, texel)?;
    fill_staging(&mut stage, data)?;
    let r = region(image).image_offset(vk::Offset3D { x: x as i32, y: y as i32, z: 0 }).image_extent(vk::Extent3D {
        width: 1,
        height: 1,
        depth: 1,
    });
    let record = |cmd: vk::CommandBuffer| {
        // SAFETY: cmd is recording; the region lies inside the image (checked above).
        unsafe { device.raw().cmd_copy_buffer_to_image(cmd, stage.raw(), image.raw(), vk::ImageLayout::GENERAL, &[r]) };
    };
    // SAFETY: the commands use the image and the staging buffer, both alive until the call returns.
    unsafe { device.one_shot(record) }
}

fn ownership(image: &Image, b: vk::ImageMemoryBarrier<'_>) -> Result<()> {
    let device = image.device();
    // SAFETY: one_shot records into cmd on this device; the barrier names the live image.
    let record = |cmd: vk::CommandBuffer| unsafe { barrier(device, cmd, b) };
    // SAFETY: the command uses the image, alive until the call returns.
    unsafe { device.one_shot(record) }
}

/// Moves a new image from `UNDEFINED` to `GENERAL` layout (its contents undefined).
pub(crate) fn to_general(image: &Image) -> Result<()> {
    let b = image_barrier(
        image.raw(),
        vk::ImageLayout::UNDEFINED,
        vk::ImageLayout::GENERAL,
        vk::AccessFlags::empty(),
        vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
    );
    ownership(image, b)
}

/// Releases an image in `GENERAL` layout to `VK_QUEUE_FAMILY_EXTERNAL`, so another
/// device or API may use its memory.
pub(crate) fn release_to_external(image: &Image) -> Result<()> {
    external_handover(image, true)
}

/// Acquires an image from `VK_QUEUE_FAMILY_EXTERNAL`; its contents were left in
/// `GENERAL` layout by the other side, and stay there.
pub(crate) fn acquire_from_external(image: &Image) -> Result<()> {
    external_handover(image, false)
}

/// The image's ownership moved, in `GENERAL` layout, from this device's queue family to
/// `VK_QUEUE_FAMILY_EXTERNAL` (`release`, after its writes) or back (before any access).
fn external_handover(image: &Image, release: bool) -> Result<()> {
    let (own, external) = (image.device().queue_family(), vk::QUEUE_FAMILY_EXTERNAL);
    let any = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
    let ((src, dst), (from, to)) = if release {
        ((vk::AccessFlags::MEMORY_WRITE, vk::AccessFlags::empty()), (own, external))
    } else {
        ((vk::AccessFlags::empty(), any), (external, own))
    };
    let general = vk::ImageLayout::GENERAL;
    let b =
        image_barrier(image.raw(), general, general, src, dst).src_queue_family_index(from).dst_queue_family_index(to);
    ownership(image, b)
}

/// Copies bytes into a buffer at offset 0 through a staging buffer, on queue 0
/// (ordered after work already submitted there that uses the buffer).
pub(crate) fn upload_buffer(buffer: &Buffer, data: &[u8]) -> Result<()> {
    if data.len() as u64 > buffer.len() {
        return Err(Error::InvalidArgument(format!("{} bytes do not fit a buffer of {}", data.len(), buffer.len())));
    }
    need_usage(buffer, vk::BufferUsageFlags::TRANSFER_DST)?;
    let device = Arc::clone(buffer.device());
    let mut stage = staging(&device, data.len())?;
    fill_staging(&mut stage, data)?;
    let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: data.len() as u64 };
    let record = |cmd: vk::CommandBuffer| {
        // SAFETY: one_shot records into cmd on this device.
        unsafe { full_barrier(&device, cmd) };
        // SAFETY: both buffers hold at least `size` bytes (checked above).
        unsafe { device.raw().cmd_copy_buffer(cmd, stage.raw(), buffer.raw(), &[copy]) };
    };
    // SAFETY: the commands use both buffers, alive until the call returns.
    unsafe { device.one_shot(record) }
}

/// Reads the first `len` bytes of a buffer through a staging buffer, on queue 0.
pub(crate) fn readback_buffer(buffer: &Buffer, len: usize) -> Result<Vec<u8>> {
    if len as u64 > buffer.len() {
        return Err(Error::InvalidArgument(format!("read of {len} bytes from a buffer of {}", buffer.len())));
    }
    need_usage(buffer, vk::BufferUsageFlags::TRANSFER_SRC)?;
    let device = buffer.device();
    let stage = staging(device, len)?;
    let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: len as u64 };
    let record = |cmd: vk::CommandBuffer| {
        // SAFETY: one_shot records into cmd on this device.
        unsafe { full_barrier(device, cmd) };
        // SAFETY: both buffers hold at least `size` bytes (checked above).
        unsafe { device.raw().cmd_copy_buffer(cmd, buffer.raw(), stage.raw(), &[copy]) };
    };
    // SAFETY: the commands use both buffers, alive until the call returns.
    unsafe { device.one_shot(record) }?;
    read_staging(&stage, len)
}

/// Fills a buffer with a repeated 32-bit word (poisoning output memory in tests).
#[cfg_attr(not(feature = "diagnostics"), allow(dead_code))]
pub(crate) fn fill_buffer(buffer: &Buffer, word: u32) -> Result<()> {
    need_usage(buffer, vk::BufferUsageFlags::TRANSFER_DST)?;
    let device = buffer.device();
    let record = |cmd: vk::CommandBuffer| {
        // SAFETY: one_shot records into cmd on this device.
        unsafe { full_barrier(device, cmd) };
        // SAFETY: the buffer has TRANSFER_DST usage (checked above).
        unsafe { device.raw().cmd_fill_buffer(cmd, buffer.raw(), 0, vk::WHOLE_SIZE, word) };
    };
    // SAFETY: the command uses the buffer, alive until the call returns.
    unsafe { device.one_shot(record) }
}

fn need_usage(buffer: &Buffer, usage: vk::BufferUsageFlags) -> Result<()> {
    if buffer.usage().contains(usage) {
        return Ok(());
    }
    Err(Error::internal(format!("a transfer on a buffer without {usage:?} usage")))
}

/// A memory barrier between everything before and everything after on the queue.
///
/// # Safety
/// `cmd` must be recording on `device`.
pub(crate) unsafe fn full_barrier(device: &Device, cmd: vk::CommandBuffer) {
    let (all, rw) =
        (vk::PipelineStageFlags::ALL_COMMANDS, vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE);
    // SAFETY: cmd is recording on this device (caller's contract).
    unsafe { super::command::memory_barrier(device, cmd, (all, rw), (all, rw)) };
}

/// Host frames through persistent staging: two host-visible, coherent buffers
/// (pinned system memory the GPU copies by DMA) allocated once, and the two copy
/// command buffers recorded once — staging → input image, output image →
/// staging — submitted each frame with timeline waits and signals, so a frame
/// goes host → GPU → host with one host wait. The benchmark's "host pinned" path.
#[cfg_attr(not(feature = "diagnostics"), allow(dead_code))]
pub(crate) struct StagedImageCopies {
    /// Leaked instead of destroyed when a copy never finishes (see `Drop`).
    res: std::mem::ManuallyDrop<Staging>,
    copy_in: vk::CommandBuffer,
    copy_out: vk::CommandBuffer,
    /// A copy-out was submitted and its fence not yet waited for.
    pending: bool,
    device: Arc<Device>,
}

/// What the copies use. Teardown order: the fence and the pool (its recorded
/// command buffers) before the buffers they copy.
struct Staging {
    fence: super::sync::Fence,
    /// Held for the command buffers allocated from it.
    _pool: super::command::CommandPool,
    upload: Buffer,
    download: Buffer,
}

#[cfg_attr(not(feature = "diagnostics"), allow(dead_code))]
impl StagedImageCopies {
    /// Staging for `input` (written from the host) and `output` (read back).
    ///
    /// # Safety
    /// Both images must be live images of `device` in `GENERAL` layout, owned by
    /// the caller of the copies and alive for as long as this value submits them.
    pub(crate) unsafe fn new(device: &Arc<Device>, input: &Image, output: &Image) -> Result<Self> {
        let upload = staging(device, input.desc().packed_len())?;
        let download = staging(device, output.desc().packed_len())?;
        let pool = super::command::CommandPool::new(device)?;
        let copy_in = pool.allocate()?;
        let copy_out = pool.allocate()?;
        // SAFETY: copy_in is a fresh command buffer of this device's pool.
        unsafe { super::command::begin(device, copy_in) }?;
        let general = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
        let in_place = |access| Around {
            layout: vk::ImageLayout::GENERAL,
            access,
            copy_layout: vk::ImageLayout::GENERAL,
            after: vk::ImageLayout::GENERAL,
            after_access: general,
        };
        // SAFETY: copy_in is recording; the input image is live and in GENERAL layout (the
        // caller's contract), the staging buffer holds its packed size.
        unsafe { record_to_image(device, copy_in, upload.raw(), (input.raw(), input.desc()), in_place(general)) };
        // SAFETY: copy_in is recording.
        unsafe { super::command::end(device, copy_in) }?;

        // SAFETY: copy_out is a fresh command buffer of this device's pool.
        unsafe { super::command::begin(device, copy_out) }?;
        // SAFETY: copy_out is recording; the output image is live and in GENERAL layout (the
        // caller's contract), the staging buffer holds its packed size.
        unsafe {
            record_from_image(
                device,
                copy_out,
                (output.raw(), output.desc()),
                download.raw(),
                in_place(vk::AccessFlags::MEMORY_WRITE),
            )
        };
        let to_host = buffer_barrier(download.raw(), vk::AccessFlags::TRANSFER_WRITE, vk::AccessFlags::HOST_READ);
        // SAFETY: copy_out is recording; the barrier names the live staging buffer.
        unsafe {
            super::command::barrier(
                device,
                copy_out,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST,
                &[to_host],
                &[],
            )
        };
        // SAFETY: copy_out is recording.
        unsafe { super::command::end(device, copy_out) }?;
        let fence = super::sync::Fence::new(device)?;
        let res = std::mem::ManuallyDrop::new(Staging { fence, _pool: pool, upload, download });
        Ok(Self { res, copy_in, copy_out, pending: false, device: Arc::clone(device) })
    }

    /// The host frame that the next [`submit_in`](Self::submit_in) copies into the input image.
    pub(crate) fn upload_mut(&mut self) -> Result<&mut [u8]> {
        if self.pending {
            return Err(Error::internal("the staging buffer is written while a frame is in flight"));
        }
        // SAFETY: no copy is pending (checked above); &mut self is the only host access.
        unsafe { self.res.upload.mapped_mut() }.ok_or_else(|| Error::internal("staging buffer not mapped"))
    }

    /// The host frame that the last copy-out wrote, once [`wait_out`](Self::wait_out) saw it done.
    pub(crate) fn download(&self) -> Result<&[u8]> {
        if self.pending {
            return Err(Error::internal("the staging buffer is read while a frame is in flight"));
        }
        // SAFETY: the copy-out into it has completed (its fence was waited for).
        unsafe { self.res.download.mapped() }.ok_or_else(|| Error::internal("staging buffer not mapped"))
    }

    /// Submits staging → input image on queue 0, signalling `signal = value` when done.
    ///
    /// # Safety
    /// `signal` must be a live timeline semaphore of this device whose value is below
    /// `value`; the previous frame's copies must have completed ([`wait_out`](Self::wait_out)).
    pub(crate) unsafe fn submit_in(&self, signal: vk::Semaphore, value: u64) -> Result<()> {
        let batch = Batch { cmds: &[self.copy_in], signal: &[(signal, value)], ..Batch::default() };
        // SAFETY: copy_in is executable and not pending (caller's contract); the semaphore is live.
        unsafe { self.device.submit_batch(0, batch, vk::Fence::null()) }
    }

    /// Submits output image → staging on queue 0 once `wait = value`, with the fence.
    ///
    /// # Safety
    /// `wait` must be a live timeline semaphore of this device that reaches `value`
    /// once the output image is written.
    pub(crate) unsafe fn submit_out(&mut self, wait: vk::Semaphore, value: u64) -> Result<()> {
        let wait = [(wait, value, vk::PipelineStageFlags::TRANSFER)];
        let batch = Batch { cmds: &[self.copy_out], wait: &wait, ..Batch::default() };
        // SAFETY: copy_out is executable and not pending (the last fence was waited for); the semaphore is live.
        unsafe { self.device.submit_batch(0, batch, self.res.fence.raw()) }?;
        self.pending = true;
        Ok(())
    }

    /// Waits (bounded) for the last copy-out. False on time-out.
    pub(crate) fn wait_out(&mut self, timeout: std::time::Duration) -> Result<bool> {
        if !self.pending {
            return Ok(true);
        }
        let done = self.res.fence.wait_and_reset(timeout)?;
        self.pending = !done;
        Ok(done)
    }
}

impl Drop for StagedImageCopies {
    fn drop(&mut self) {
        // A copy still pending must finish before its command buffer and buffers go;
        // one that never does (a lost device) leaves them leaked, not destroyed in use.
        if self.pending && !matches!(self.wait_out(std::time::Duration::from_secs(10)), Ok(true)) {
            log::error!("a host-pinned copy did not finish in 10 s; its staging buffers are leaked");
            return;
        }
        // SAFETY: nothing pending uses them (waited above), and `res` is not used after this.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.res) };
    }
}
