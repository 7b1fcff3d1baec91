//! Blocking transfers through a staging buffer, and image layout conventions.
//!
//! Convention: between operations every neural-frame image is in `GENERAL`
//! layout. An image shared with another device or API is released to
//! `VK_QUEUE_FAMILY_EXTERNAL` after writing and acquired from it before use.

use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result};
use crate::vulkan::device::Device;
use crate::vulkan::memory::{Buffer, BufferMemory, Image};

const COLOR: vk::ImageSubresourceRange = vk::ImageSubresourceRange {
    aspect_mask: vk::ImageAspectFlags::COLOR,
    base_mip_level: 0,
    level_count: 1,
    base_array_layer: 0,
    layer_count: 1,
};

/// An image barrier over the whole colour image.
pub fn image_barrier(
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
        .subresource_range(COLOR)
}

fn barrier(device: &Device, cmd: vk::CommandBuffer, b: vk::ImageMemoryBarrier<'_>) {
    // SAFETY: cmd is recording on this device; the barrier names a live image.
    unsafe {
        device.raw().cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::DependencyFlags::empty(),
            &[],
            &[],
            &[b],
        )
    };
}

fn region(image: &Image) -> vk::BufferImageCopy {
    let d = image.desc();
    vk::BufferImageCopy::default()
        .image_subresource(vk::ImageSubresourceLayers {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            mip_level: 0,
            base_array_layer: 0,
            layer_count: 1,
        })
        .image_extent(vk::Extent3D { width: d.width, height: d.height, depth: 1 })
}

fn staging(device: &Arc<Device>, len: usize) -> Result<Buffer> {
    Buffer::new(
        device,
        len as u64,
        vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST,
        BufferMemory::HostVisible,
    )
}

/// Uploads tightly packed texels into `image` (previous contents discarded);
/// the image ends in `GENERAL` layout.
pub fn upload_image(image: &Image, data: &[u8]) -> Result<()> {
    let len = image.desc().packed_len();
    if data.len() != len {
        return Err(Error::InvalidArgument(format!("upload of {} bytes into an image of {len} bytes", data.len())));
    }
    let device = image.device();
    let mut stage = staging(device, len)?;
    stage.mapped_mut().ok_or_else(|| Error::InvalidArgument("staging buffer not mapped".into()))?.copy_from_slice(data);
    device.one_shot(|cmd| {
        barrier(
            device,
            cmd,
            image_barrier(
                image.raw(),
                vk::ImageLayout::UNDEFINED,
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                vk::AccessFlags::empty(),
                vk::AccessFlags::TRANSFER_WRITE,
            ),
        );
        // SAFETY: cmd is recording; the staging buffer holds `len` bytes.
        unsafe {
            device.raw().cmd_copy_buffer_to_image(
                cmd,
                stage.raw(),
                image.raw(),
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                &[region(image)],
            )
        };
        barrier(
            device,
            cmd,
            image_barrier(
                image.raw(),
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                vk::ImageLayout::GENERAL,
                vk::AccessFlags::TRANSFER_WRITE,
                vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
            ),
        );
    })
}

/// Reads an image in `GENERAL` layout back into tightly packed texels.
pub fn readback_image(image: &Image) -> Result<Vec<u8>> {
    let len = image.desc().packed_len();
    let device = image.device();
    let stage = staging(device, len)?;
    device.one_shot(|cmd| {
        barrier(
            device,
            cmd,
            image_barrier(
                image.raw(),
                vk::ImageLayout::GENERAL,
                vk::ImageLayout::GENERAL,
                vk::AccessFlags::MEMORY_WRITE,
                vk::AccessFlags::TRANSFER_READ,
            ),
        );
        // SAFETY: cmd is recording; the staging buffer holds `len` bytes.
        unsafe {
            device.raw().cmd_copy_image_to_buffer(
                cmd,
                image.raw(),
                vk::ImageLayout::GENERAL,
                stage.raw(),
                &[region(image)],
            )
        };
    })?;
    Ok(stage.mapped().ok_or_else(|| Error::InvalidArgument("staging buffer not mapped".into()))?.to_vec())
}

/// Writes `data` at pixel (x, y) of an image in `GENERAL` layout (tests, fault injection).
pub fn write_pixel(image: &Image, x: u32, y: u32, data: &[u8]) -> Result<()> {
    let device = image.device();
    let mut stage = staging(device, data.len().max(4))?;
    stage.mapped_mut().ok_or_else(|| Error::InvalidArgument("staging buffer not mapped".into()))?[..data.len()]
        .copy_from_slice(data);
    let r = region(image).image_offset(vk::Offset3D { x: x as i32, y: y as i32, z: 0 }).image_extent(vk::Extent3D {
        width: 1,
        height: 1,
        depth: 1,
    });
    device.one_shot(|cmd| {
        // SAFETY: cmd is recording; the region lies inside the image (caller's contract).
        unsafe { device.raw().cmd_copy_buffer_to_image(cmd, stage.raw(), image.raw(), vk::ImageLayout::GENERAL, &[r]) };
    })
}

/// Releases an image in `GENERAL` layout to `VK_QUEUE_FAMILY_EXTERNAL`, so another
/// device or API may use its memory.
pub fn release_to_external(image: &Image) -> Result<()> {
    let device = image.device();
    let b = image_barrier(
        image.raw(),
        vk::ImageLayout::GENERAL,
        vk::ImageLayout::GENERAL,
        vk::AccessFlags::MEMORY_WRITE,
        vk::AccessFlags::empty(),
    )
    .src_queue_family_index(device.queue_family())
    .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL);
    device.one_shot(|cmd| barrier(device, cmd, b))
}

/// Acquires an image from `VK_QUEUE_FAMILY_EXTERNAL`; its contents were left in
/// `GENERAL` layout by the other side, and stay there.
pub fn acquire_from_external(image: &Image) -> Result<()> {
    let device = image.device();
    let b = image_barrier(
        image.raw(),
        vk::ImageLayout::GENERAL,
        vk::ImageLayout::GENERAL,
        vk::AccessFlags::empty(),
        vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
    )
    .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
    .dst_queue_family_index(device.queue_family());
    device.one_shot(|cmd| barrier(device, cmd, b))
}

/// Copies bytes into a buffer at offset 0 (through staging unless it is mapped).
pub fn upload_buffer(buffer: &mut Buffer, data: &[u8]) -> Result<()> {
    if data.len() as u64 > buffer.len() {
        return Err(Error::InvalidArgument(format!("{} bytes do not fit a buffer of {}", data.len(), buffer.len())));
    }
    if let Some(m) = buffer.mapped_mut() {
        m[..data.len()].copy_from_slice(data);
        return Ok(());
    }
    let device = Arc::clone(buffer.device());
    let mut stage = staging(&device, data.len())?;
    stage.mapped_mut().ok_or_else(|| Error::InvalidArgument("staging buffer not mapped".into()))?.copy_from_slice(data);
    let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: data.len() as u64 };
    device.one_shot(|cmd| {
        // SAFETY: both buffers hold at least `size` bytes.
        unsafe { device.raw().cmd_copy_buffer(cmd, stage.raw(), buffer.raw(), &[copy]) };
    })
}

/// Reads the first `len` bytes of a buffer.
pub fn readback_buffer(buffer: &Buffer, len: usize) -> Result<Vec<u8>> {
    if len as u64 > buffer.len() {
        return Err(Error::InvalidArgument(format!("read of {len} bytes from a buffer of {}", buffer.len())));
    }
    if let Some(m) = buffer.mapped() {
        return Ok(m[..len].to_vec());
    }
    let device = buffer.device();
    let stage = staging(device, len)?;
    let copy = vk::BufferCopy { src_offset: 0, dst_offset: 0, size: len as u64 };
    device.one_shot(|cmd| {
        // SAFETY: both buffers hold at least `size` bytes.
        unsafe { device.raw().cmd_copy_buffer(cmd, buffer.raw(), stage.raw(), &[copy]) };
    })?;
    Ok(stage.mapped().ok_or_else(|| Error::InvalidArgument("staging buffer not mapped".into()))?.to_vec())
}

/// Fills a buffer with a repeated 32-bit word (poisoning output memory in tests).
pub fn fill_buffer(buffer: &Buffer, word: u32) -> Result<()> {
    let device = buffer.device();
    device.one_shot(|cmd| {
        // SAFETY: the buffer was created with TRANSFER_DST by callers that fill it.
        unsafe { device.raw().cmd_fill_buffer(cmd, buffer.raw(), 0, vk::WHOLE_SIZE, word) };
    })
}
