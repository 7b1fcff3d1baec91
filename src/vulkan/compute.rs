//! Compute pipelines, descriptor sets and image views for the pre and post passes.

use std::ffi::CStr;
use std::sync::Arc;

use ash::vk;

use crate::error::{Error, Result, VkResultExt};
use crate::vulkan::device::Device;

/// A view of a whole 2D colour image.
pub(crate) struct ImageView {
    raw: vk::ImageView,
    device: Arc<Device>,
}

impl ImageView {
    /// A view of `image` (of `device`) in `format`.
    ///
    /// # Safety
    /// `image` must be a live 2D colour image of `device`, created with `format`
    /// and a usage that allows views, and must outlive the view.
    pub(crate) unsafe fn new(device: &Arc<Device>, image: vk::Image, format: vk::Format) -> Result<Self> {
        let info = vk::ImageViewCreateInfo::default()
            .image(image)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(format)
            .subresource_range(vk::ImageSubresourceRange {
                aspect_mask: vk::ImageAspectFlags::COLOR,
                base_mip_level: 0,
                level_count: 1,
                base_array_layer: 0,
                layer_count: 1,
            });
        // SAFETY: the image is live and was created with a usage that allows views (caller's contract).
        let raw = unsafe { device.raw().create_image_view(&info, None) }.call("vkCreateImageView")?;
        Ok(Self { raw, device: Arc::clone(device) })
    }

    /// The raw view.
    pub(crate) fn raw(&self) -> vk::ImageView {
        self.raw
    }
}

impl Drop for ImageView {
    fn drop(&mut self) {
        // SAFETY: owners retire work using the view before dropping it.
        unsafe { self.device.raw().destroy_image_view(self.raw, None) };
    }
}

/// What a descriptor set binds, in binding order.
#[derive(Clone, Copy)]
pub(crate) enum Resource {
    /// A sampled image read with `textureLoad`, in the given layout.
    SampledImage(vk::ImageView, vk::ImageLayout),
    /// A storage image, in `GENERAL` layout.
    StorageImage(vk::ImageView),
    /// A storage buffer: the first `range` bytes.
    StorageBuffer(vk::Buffer, u64),
}

impl Resource {
    fn ty(self) -> vk::DescriptorType {
        match self {
            Resource::SampledImage(..) => vk::DescriptorType::SAMPLED_IMAGE,
            Resource::StorageImage(_) => vk::DescriptorType::STORAGE_IMAGE,
            Resource::StorageBuffer(..) => vk::DescriptorType::STORAGE_BUFFER,
        }
    }
}

/// One compute entry point with its layouts.
pub(crate) struct ComputePass {
    pipeline: vk::Pipeline,
    layout: vk::PipelineLayout,
    set_layout: vk::DescriptorSetLayout,
    types: Vec<vk::DescriptorType>,
    push_size: u32,
    device: Arc<Device>,
}

impl ComputePass {
    /// Builds the pipeline for `entry` in `spirv`, whose set 0 has `types` at bindings 0.., with
    /// `push_size` bytes of push constants.
    pub(crate) fn new(
        device: &Arc<Device>,
        spirv: &[u8],
        entry: &CStr,
        types: &[vk::DescriptorType],
        push_size: u32,
    ) -> Result<Self> {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(spirv))
            .map_err(|e| Error::InvalidArgument(format!("embedded SPIR-V is malformed: {e}")))?;
        let raw = device.raw();
        // SAFETY: words is SPIR-V produced by naga at build time.
        let module = unsafe { raw.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None) }
            .call("vkCreateShaderModule")?;
        let bindings: Vec<_> = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(*t)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let result = (|| {
            // SAFETY: bindings are valid for the call.
            let set_layout = unsafe {
                raw.create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
            }
            .call("vkCreateDescriptorSetLayout")?;
            let ranges =
                [vk::PushConstantRange { stage_flags: vk::ShaderStageFlags::COMPUTE, offset: 0, size: push_size }];
            let set_layouts = [set_layout];
            let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts).push_constant_ranges(&ranges);
            // SAFETY: the set layout is live.
            let layout = match unsafe { raw.create_pipeline_layout(&info, None) } {
                Ok(l) => l,
                Err(result) => {
                    // SAFETY: unused.
                    unsafe { raw.destroy_descriptor_set_layout(set_layout, None) };
                    return Err(Error::Vulkan { call: "vkCreatePipelineLayout", result });
                }
            };
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(entry);
            let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout);
            // SAFETY: module, entry and layout are valid.
            match unsafe { raw.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) } {
                Ok(p) => Ok((p[0], layout, set_layout)),
                Err((_, result)) => {
                    // SAFETY: unused.
                    unsafe { raw.destroy_pipeline_layout(layout, None) };
                    // SAFETY: unused.
                    unsafe { raw.destroy_descriptor_set_layout(set_layout, None) };
                    Err(Error::Vulkan { call: "vkCreateComputePipelines", result })
                }
            }
        })();
        // SAFETY: a shader module may be destroyed once pipelines are created from it.
        unsafe { raw.destroy_shader_module(module, None) };
        let (pipeline, layout, set_layout) = result?;
        Ok(Self { pipeline, layout, set_layout, types: types.to_vec(), push_size, device: Arc::clone(device) })
    }

    /// A descriptor set for this pass, bound to `resources`.
    ///
    /// # Safety
    /// Every handle must be a live object of this pass's device, and stay alive
    /// while command buffers that use the set may run.
    pub(crate) unsafe fn bind(&self, resources: &[Resource]) -> Result<DescriptorSet> {
        if resources.len() != self.types.len() || resources.iter().zip(&self.types).any(|(r, t)| r.ty() != *t) {
            return Err(Error::internal("descriptors do not match the pass's layout"));
        }
        let raw = self.device.raw();
        let sizes: Vec<_> = self.types.iter().map(|t| vk::DescriptorPoolSize { ty: *t, descriptor_count: 1 }).collect();
        // SAFETY: sizes are valid for the call.
        let pool = unsafe {
            raw.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None)
        }
        .call("vkCreateDescriptorPool")?;
        let mut set = DescriptorSet { pool, set: vk::DescriptorSet::null(), device: Arc::clone(&self.device) };
        let layouts = [self.set_layout];
        // SAFETY: the pool has room for one set of this layout.
        let sets = unsafe {
            raw.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts),
            )
        }
        .call("vkAllocateDescriptorSets")?;
        set.set = sets[0];
        let images: Vec<[vk::DescriptorImageInfo; 1]> = resources
            .iter()
            .map(|r| match *r {
                Resource::SampledImage(v, layout) => {
                    [vk::DescriptorImageInfo::default().image_view(v).image_layout(layout)]
                }
                Resource::StorageImage(v) => {
                    [vk::DescriptorImageInfo::default().image_view(v).image_layout(vk::ImageLayout::GENERAL)]
                }
                Resource::StorageBuffer(..) => [vk::DescriptorImageInfo::default()],
            })
            .collect();
        let buffers: Vec<[vk::DescriptorBufferInfo; 1]> = resources
            .iter()
            .map(|r| match *r {
                Resource::StorageBuffer(b, range) => [vk::DescriptorBufferInfo::default().buffer(b).range(range)],
                _ => [vk::DescriptorBufferInfo::default()],
            })
            .collect();
        let writes: Vec<_> = resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let w = vk::WriteDescriptorSet::default()
                    .dst_set(set.set)
                    .dst_binding(i as u32)
                    .descriptor_type(self.types[i]);
                match r {
                    Resource::StorageBuffer(..) => w.buffer_info(&buffers[i]),
                    _ => w.image_info(&images[i]),
                }
            })
            .collect();
        // SAFETY: every write names a live view or buffer of the declared type.
        unsafe { raw.update_descriptor_sets(&writes, &[]) };
        Ok(set)
    }

    /// Records: bind pipeline and set, push constants, dispatch.
    ///
    /// # Safety
    /// `cmd` must be in the recording state on this pass's device, `set` must
    /// come from [`ComputePass::bind`] of this pass, and both must outlive the
    /// command buffer's execution.
    pub(crate) unsafe fn record(&self, cmd: vk::CommandBuffer, set: &DescriptorSet, push: &[u8], groups: [u32; 3]) {
        debug_assert_eq!(push.len() as u32, self.push_size);
        let raw = self.device.raw();
        // SAFETY: cmd is recording on this device (caller's contract); the pipeline and layout are live.
        unsafe { raw.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline) };
        // SAFETY: the set was made for this pass's layout and is live (caller's contract).
        unsafe { raw.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, self.layout, 0, &[set.set], &[]) };
        // SAFETY: the range lies within the layout's push-constant range (size checked above).
        unsafe { raw.cmd_push_constants(cmd, self.layout, vk::ShaderStageFlags::COMPUTE, 0, push) };
        // SAFETY: pipeline and set are bound.
        unsafe { raw.cmd_dispatch(cmd, groups[0], groups[1], groups[2]) };
    }
}

impl Drop for ComputePass {
    fn drop(&mut self) {
        let raw = self.device.raw();
        // SAFETY: owners retire work using the pipeline before dropping it.
        unsafe { raw.destroy_pipeline(self.pipeline, None) };
        // SAFETY: as above.
        unsafe { raw.destroy_pipeline_layout(self.layout, None) };
        // SAFETY: as above.
        unsafe { raw.destroy_descriptor_set_layout(self.set_layout, None) };
    }
}

/// A descriptor set with its own pool.
pub(crate) struct DescriptorSet {
    pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    device: Arc<Device>,
}

impl Drop for DescriptorSet {
    fn drop(&mut self) {
        // SAFETY: destroying the pool frees its set; owners retire work using it first.
        unsafe { self.device.raw().destroy_descriptor_pool(self.pool, None) };
    }
}

/// A 2D grid of `width`-wide workgroups covering `items` work items, and the row
/// width (work items per grid row) the shader needs to number them linearly;
/// None when the grid would exceed `max` (`maxComputeWorkGroupCount`).
pub(crate) fn linear_grid(items: u64, width: u32, max: [u32; 3]) -> Option<([u32; 3], u32)> {
    let groups = items.div_ceil(width as u64).max(1);
    let x = groups.min(max[0] as u64);
    let y = groups.div_ceil(x);
    let row = u32::try_from(x * width as u64).ok()?;
    (y <= max[1] as u64).then_some(([x as u32, y as u32, 1], row))
}

#[cfg(test)]
mod tests {
    use super::linear_grid;

    #[test]
    fn grid_covers_every_item() {
        let max = [65535, 65535, 65535];
        for items in [1u64, 63, 64, 65, 37 * 53, 3 * 3840 * 2160, 1 << 30] {
            let (g, row) = linear_grid(items, 64, max).expect("fits");
            assert!(g[0] <= 65535 && g[1] <= 65535);
            assert!(g[0] as u64 * g[1] as u64 * 64 >= items, "{items}");
            assert_eq!(row, g[0] * 64);
        }
        assert!(linear_grid(1 << 40, 64, max).is_none(), "more groups than the device allows");
        assert!(linear_grid(1 << 20, 64, [16, 16, 1]).is_none());
    }
}
