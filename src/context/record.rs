//! One frame's commands: the pre pass for a (slot, input) and the post pass for
//! a (slot, output), each recorded once and resubmitted frame after frame,
//! with the barriers that hand the caller's resources and the slot's tensors
//! between the caller, Vulkan and the engine.

use ash::vk;

use crate::context::passes::{PostParams, PreParams, post_grid, pre_grid};
use crate::context::registry::{Origin, Registration, Resource as Res};
use crate::context::slots::SlotTensors;
use crate::context::tiles::Tile;
use crate::error::{Error, Result};
use crate::onnx::TensorKind;
use crate::vulkan::Device;
use crate::vulkan::command::{self, CommandPool};
use crate::vulkan::compute::{DescriptorSet, Resource};
use crate::vulkan::query::TimestampPool;
use crate::vulkan::transfer::image_barrier;

use super::passes::Passes;

/// What recording needs from the context.
pub(crate) struct Recorder<'a> {
    pub(crate) device: &'a Device,
    pub(crate) passes: &'a Passes,
    pub(crate) queries: Option<&'a TimestampPool>,
    pub(crate) pool: &'a CommandPool,
    /// The tensors are shared with CUDA (released to and acquired from the external queue family).
    pub(crate) on_cuda: bool,
}

/// Ownership transfers of a resource the caller exported: to or from
/// `VK_QUEUE_FAMILY_EXTERNAL`, in `GENERAL` layout, on the context's family.
fn families(device: &Device, acquire: bool) -> (u32, u32) {
    if acquire {
        (vk::QUEUE_FAMILY_EXTERNAL, device.queue_family())
    } else {
        (device.queue_family(), vk::QUEUE_FAMILY_EXTERNAL)
    }
}

fn buffer_barrier(buffer: vk::Buffer, src: vk::AccessFlags, dst: vk::AccessFlags) -> vk::BufferMemoryBarrier<'static> {
    vk::BufferMemoryBarrier::default()
        .buffer(buffer)
        .size(vk::WHOLE_SIZE)
        .src_access_mask(src)
        .dst_access_mask(dst)
        .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
}

/// Takes a resource for a pass (`write`: the pass overwrites it all) or gives
/// it back afterwards, as its origin requires.
fn handover(
    device: &Device,
    reg: &Registration,
    acquire: bool,
    (write, keep): (bool, bool),
) -> (Option<vk::ImageMemoryBarrier<'static>>, Option<vk::BufferMemoryBarrier<'static>>) {
    // A post pass reads what earlier tiles wrote (blending) as well as writing.
    let shader =
        if write { vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE } else { vk::AccessFlags::SHADER_READ };
    let other = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
    let (src, dst) = if acquire { (other, shader) } else { (shader, other) };
    match (&reg.resource, reg.origin) {
        (Res::Image { raw, .. }, Origin::Imported) => {
            let (s, d) = families(device, acquire);
            let b = image_barrier(*raw, vk::ImageLayout::GENERAL, vk::ImageLayout::GENERAL, src, dst)
                .src_queue_family_index(s)
                .dst_queue_family_index(d);
            (Some(b), None)
        }
        (Res::Image { raw, layout, .. }, origin) => {
            // The caller's outputs are discarded (UNDEFINED) before the pass writes them, unless
            // earlier tiles of the frame wrote them (`keep`); the context's own stay GENERAL, so
            // that a pixel the pass misses keeps its poison.
            let (old, new) = match (write, acquire) {
                (false, _) => (*layout, *layout),
                (true, true) if origin == Origin::Owned => (vk::ImageLayout::GENERAL, vk::ImageLayout::GENERAL),
                (true, true) if keep => (*layout, vk::ImageLayout::GENERAL),
                (true, true) => (vk::ImageLayout::UNDEFINED, vk::ImageLayout::GENERAL),
                (true, false) => (vk::ImageLayout::GENERAL, *layout),
            };
            (Some(image_barrier(*raw, old, new, src, dst)), None)
        }
        (Res::Buffer { raw, .. }, Origin::Imported) => {
            let (s, d) = families(device, acquire);
            (None, Some(buffer_barrier(*raw, src, dst).src_queue_family_index(s).dst_queue_family_index(d)))
        }
        (Res::Buffer { raw, .. }, _) => (None, Some(buffer_barrier(*raw, src, dst))),
    }
}

fn source_binding(reg: &Registration) -> Result<Resource> {
    match &reg.resource {
        Res::Image { view, layout, .. } => Ok(Resource::SampledImage(view.raw(), *layout)),
        Res::Buffer { raw, bytes, .. } => Ok(Resource::StorageBuffer(*raw, *bytes)),
    }
}

fn target_binding(reg: &Registration) -> Result<Resource> {
    match &reg.resource {
        Res::Image { view, .. } => Ok(Resource::StorageImage(view.raw())),
        Res::Buffer { raw, bytes, .. } => Ok(Resource::StorageBuffer(*raw, *bytes)),
    }
}

/// The format code the shaders read a buffer's pixels with, and its pitch in words.
fn buffer_format(reg: &Registration) -> (u32, u32) {
    match &reg.resource {
        Res::Buffer { format, pitch, .. } => {
            let code = match *format {
                vk::Format::B8G8R8A8_UNORM | vk::Format::B8G8R8A8_SRGB => 1,
                vk::Format::R16G16B16A16_SFLOAT => 2,
                _ => 0,
            };
            (code, (*pitch / 4) as u32)
        }
        Res::Image { .. } => (0, 0),
    }
}

/// Which tile of the frame a pass is recorded for: its index in the frame's
/// layout (the recorded-pass cache keys on it) and where it lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) index: usize,
    pub(crate) tile: Tile,
    /// Input pixels at each end of a shared strip that blending ignores: the overlap.
    pub(crate) margin: u32,
}

/// Where a tile lands in the output, in output pixels, as both kinds of post pass
/// take it: its origin, the strips it shares with the tiles left, above, right and
/// below, and the margins blending ignores (the scale per axis is the tensor's
/// output size over its input size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputPlace {
    pub(crate) origin: (u32, u32),
    /// Left, top, right, bottom.
    pub(crate) blend: [u32; 4],
    pub(crate) margin: (u32, u32),
}

impl Place {
    /// The tile's place in the output of a slot of `size`.
    pub(crate) fn in_output(&self, size: &crate::context::slots::FrameSize) -> OutputPlace {
        let (sx, sy) = (size.out_width / size.width, size.out_height / size.height);
        let t = self.tile;
        OutputPlace {
            origin: (t.x * sx, t.y * sy),
            blend: [t.blend_left * sx, t.blend_top * sy, t.blend_right * sx, t.blend_bottom * sy],
            margin: (self.margin * sx, self.margin * sy),
        }
    }
}

/// Which of a slot's tensors a pass writes (pre) or reads (post).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tensor {
    /// The frame's: the model's first image input or output. Its passes carry the
    /// frame's alpha and are timed.
    Frame,
    /// The model's extra input or output of this index.
    Extra(usize),
}

impl Tensor {
    /// A number for the recorded-pass cache.
    fn code(self) -> usize {
        match self {
            Self::Frame => 0,
            Self::Extra(k) => k + 1,
        }
    }
}

/// A slot tensor's buffer and size.
fn tensor_buffer(tensors: &SlotTensors, input: bool, which: Tensor) -> Result<(vk::Buffer, u64)> {
    let missing = || Error::internal(format!("a slot without the tensor {which:?}"));
    Ok(match (input, which) {
        (true, Tensor::Frame) => (tensors.input.buffer().raw(), tensors.size.input_bytes),
        (false, Tensor::Frame) => (tensors.output.buffer().raw(), tensors.size.output_bytes),
        (true, Tensor::Extra(k)) => {
            let t = tensors.extra_inputs.get(k).ok_or_else(missing)?;
            (t.buffer.buffer().raw(), t.bytes)
        }
        (false, Tensor::Extra(k)) => {
            let t = tensors.extra_outputs.get(k).ok_or_else(missing)?;
            (t.buffer.buffer().raw(), t.bytes)
        }
    })
}

impl Recorder<'_> {
    fn timestamp_pair(&self, cmd: vk::CommandBuffer, first: u32, start: bool, which: Tensor) {
        if which != Tensor::Frame {
            return; // one pair of queries per pass and slot: the frame's
        }
        if let Some(q) = self.queries {
            // SAFETY: cmd is recording on the pool's device (callers begin it); the pool lives
            // in the context, which outlives every frame's execution.
            unsafe {
                if start {
                    q.record_reset(cmd, first, 2);
                    q.record(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, first);
                } else {
                    q.record(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, first + 1);
                }
            }
        }
    }

    /// Records (or re-records, after a resize) slot `slot`'s pre pass from `reg`
    /// into its command buffer, unless it is current.
    ///
    /// # Safety
    /// No submission of this registration's command buffer for `slot` may be pending.
    pub(crate) unsafe fn pre(
        &self,
        slot: usize,
        reg: &mut Registration,
        tensors: &SlotTensors,
        (which, kind): (Tensor, TensorKind),
        place: Place,
        generation: u64,
    ) -> Result<vk::CommandBuffer> {
        if let Some(cmd) = recorded(reg, slot, generation, (which.code(), place.index)) {
            return Ok(cmd);
        }
        let (tensor_raw, tensor_bytes) = tensor_buffer(tensors, true, which)?;
        let pass = self.passes.pre(reg.source(), kind.element)?;
        let size = tensors.size;
        let (grid, row) = pre_grid(self.device, pass.workgroup, kind, size.width, size.height)?;
        let srgb =
            matches!(&reg.resource, Res::Image { format: vk::Format::R8G8B8A8_SRGB | vk::Format::B8G8R8A8_SRGB, .. });
        let (format, pitch) = buffer_format(reg);
        let params = PreParams {
            srgb: srgb as u32,
            format,
            pitch,
            alpha: (which == Tensor::Frame) as u32,
            origin_x: place.tile.x,
            origin_y: place.tile.y,
            ..PreParams::new(kind, size.width, size.height, row)
        };
        let resources = [
            source_binding(reg)?,
            Resource::StorageBuffer(tensor_raw, tensor_bytes),
            Resource::StorageBuffer(tensors.alpha.raw(), size.alpha_bytes),
        ];
        // SAFETY: the registration's resource and the slot's buffers outlive the set: the
        // registration is freed only after its frames, the slot buffers only after a drain.
        let set = unsafe { pass.compute.bind(&resources) }?;
        let cmd = self.command_buffer(reg, slot)?;
        let d = self.device;
        let base = 4 * slot as u32;
        // SAFETY: the command buffer is not pending (caller's contract); everything recorded
        // names live resources of this device.
        unsafe {
            command::begin(d, cmd)?;
            self.timestamp_pair(cmd, base, true, which);
            let (img, buf) = handover(d, reg, true, (false, false));
            // The slot's tensor and alpha are overwritten whole: only ordering against the
            // last frame's post pass on this queue is needed, which the semaphores give.
            let src = vk::PipelineStageFlags::ALL_COMMANDS;
            command::barrier(d, cmd, src, vk::PipelineStageFlags::COMPUTE_SHADER, buf.as_slice(), img.as_slice());
            pass.compute.record(cmd, &set, &params.bytes(), grid);
            let (img, buf) = handover(d, reg, false, (false, false));
            // Hand the tensor over: to CUDA (release to the external queue family) or to the
            // host (make the writes visible to host reads).
            let tensor = buffer_barrier(tensor_raw, vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::empty());
            let (tensor, dst) = if self.on_cuda {
                let (s, t) = families(d, false);
                (tensor.src_queue_family_index(s).dst_queue_family_index(t), vk::PipelineStageFlags::BOTTOM_OF_PIPE)
            } else {
                (tensor.dst_access_mask(vk::AccessFlags::HOST_READ), vk::PipelineStageFlags::HOST)
            };
            let alpha =
                buffer_barrier(tensors.alpha.raw(), vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ);
            let mut buffers = vec![tensor, alpha];
            buffers.extend(buf);
            command::barrier(
                d,
                cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                dst | vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::ALL_COMMANDS,
                &buffers,
                img.as_slice(),
            );
            self.timestamp_pair(cmd, base, false, which);
            command::end(d, cmd)?;
        }
        store(reg, slot, cmd, set, (generation, (which.code(), place.index)));
        Ok(cmd)
    }

    /// Records slot `slot`'s post pass into `reg`, unless it is current.
    ///
    /// # Safety
    /// No submission of this registration's command buffer for `slot` may be pending.
    pub(crate) unsafe fn post(
        &self,
        slot: usize,
        reg: &mut Registration,
        tensors: &SlotTensors,
        (which, kind): (Tensor, TensorKind),
        place: Place,
        generation: u64,
    ) -> Result<vk::CommandBuffer> {
        if let Some(cmd) = recorded(reg, slot, generation, (which.code(), place.index)) {
            return Ok(cmd);
        }
        let (tensor_raw, tensor_bytes) = tensor_buffer(tensors, false, which)?;
        let pass = self.passes.post(reg.target(), kind.element)?;
        let size = tensors.size;
        let grid = post_grid(self.device, pass.workgroup, size.out_width, size.out_height)?;
        let (format, pitch) = buffer_format(reg);
        let at = place.in_output(&size);
        let params = PostParams {
            format,
            pitch,
            origin_x: at.origin.0,
            origin_y: at.origin.1,
            blend_left: at.blend[0],
            blend_top: at.blend[1],
            blend_right: at.blend[2],
            blend_bottom: at.blend[3],
            margin_x: at.margin.0,
            margin_y: at.margin.1,
            ..PostParams::new(kind, (size.width, size.height), (size.out_width, size.out_height))
        };
        let resources = [
            Resource::StorageBuffer(tensor_raw, tensor_bytes),
            Resource::StorageBuffer(tensors.alpha.raw(), size.alpha_bytes),
            target_binding(reg)?,
        ];
        // SAFETY: as in `pre`.
        let set = unsafe { pass.compute.bind(&resources) }?;
        let cmd = self.command_buffer(reg, slot)?;
        let d = self.device;
        let base = 4 * slot as u32 + 2;
        // SAFETY: as in `pre`.
        unsafe {
            command::begin(d, cmd)?;
            self.timestamp_pair(cmd, base, true, which);
            // Take the output tensor back: from CUDA (acquire from the external queue
            // family) or from the host (its writes are visible to this submission).
            let tensor = buffer_barrier(tensor_raw, vk::AccessFlags::empty(), vk::AccessFlags::SHADER_READ);
            let (tensor, src) = if self.on_cuda {
                let (s, t) = families(d, true);
                (tensor.src_queue_family_index(s).dst_queue_family_index(t), vk::PipelineStageFlags::ALL_COMMANDS)
            } else {
                (tensor.src_access_mask(vk::AccessFlags::HOST_WRITE), vk::PipelineStageFlags::HOST)
            };
            let alpha =
                buffer_barrier(tensors.alpha.raw(), vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ);
            let (img, buf) = handover(d, reg, true, (true, place.index > 0));
            let mut buffers = vec![tensor, alpha];
            buffers.extend(buf);
            command::barrier(
                d,
                cmd,
                src | vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                &buffers,
                img.as_slice(),
            );
            pass.compute.record(cmd, &set, &params.bytes(), grid);
            let (img, buf) = handover(d, reg, false, (true, false));
            command::barrier(
                d,
                cmd,
                vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::PipelineStageFlags::ALL_COMMANDS,
                buf.as_slice(),
                img.as_slice(),
            );
            self.timestamp_pair(cmd, base, false, which);
            command::end(d, cmd)?;
        }
        store(reg, slot, cmd, set, (generation, (which.code(), place.index)));
        Ok(cmd)
    }

    /// The registration's command buffer for `slot` (re-recorded in place), or a new one.
    fn command_buffer(&self, reg: &Registration, slot: usize) -> Result<vk::CommandBuffer> {
        match reg.recorded.get(slot).and_then(Option::as_ref) {
            Some(r) => Ok(r.cmd),
            None => self.pool.allocate(),
        }
    }
}

fn store(
    reg: &mut Registration,
    slot: usize,
    cmd: vk::CommandBuffer,
    set: DescriptorSet,
    (generation, tensor): (u64, (usize, usize)),
) {
    if reg.recorded.len() <= slot {
        reg.recorded.resize_with(slot + 1, || None);
    }
    reg.recorded[slot] = Some(super::registry::Recorded { cmd, _set: set, generation, tensor });
}

/// The error for a registration that does not match the context's frame size.
pub(crate) fn size_mismatch(what: &str, got: (u32, u32), want: (u32, u32)) -> Error {
    Error::InvalidArgument(format!(
        "the {what} is {}×{}, but the context's frames are {}×{} (NeuralFrameContext::resize changes \
         the frame size; register resources of the new size)",
        got.0, got.1, want.0, want.1
    ))
}

/// A command buffer with one global barrier: device writes become visible to
/// host reads (for the CPU backend reading the caller's memory).
///
/// # Safety
/// `pool` must belong to `device`.
pub(crate) unsafe fn host_visibility(device: &Device, pool: &CommandPool) -> Result<vk::CommandBuffer> {
    let cmd = pool.allocate()?;
    let all = vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
        .dst_access_mask(vk::AccessFlags::HOST_READ);
    // SAFETY: a fresh command buffer of this device, recorded once here.
    unsafe {
        command::begin(device, cmd)?;
        device.raw().cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &[all],
            &[],
            &[],
        );
        command::end(device, cmd)?;
    }
    Ok(cmd)
}

/// `reg`'s command buffer for `slot` where it is recorded for the slot buffers' `generation`
/// and this tensor and place (`key`): resubmitted as it is.
fn recorded(reg: &Registration, slot: usize, generation: u64, key: (usize, usize)) -> Option<vk::CommandBuffer> {
    reg.recorded
        .get(slot)
        .and_then(Option::as_ref)
        .filter(|r| r.generation == generation && r.tensor == key)
        .map(|r| r.cmd)
}
