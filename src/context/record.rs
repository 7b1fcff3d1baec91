//! One frame's commands: the pre pass for a (slot, input) and the post pass for
//! a (slot, output), each recorded once and resubmitted frame after frame,
//! with the barriers that hand the caller's resources and the slot's tensors
//! between the caller, Vulkan and the engine.

use ash::vk;

use crate::context::passes::{PostParams, PreParams, post_grid, pre_grid};
use crate::context::planes::PlaneFormat;
use crate::context::registry::{Origin, PlacedPlane, Registration, Resource as Res};
use crate::context::slots::SlotTensors;
use crate::context::tiles::Tile;
use crate::error::{Error, Result};
use crate::onnx::TensorKind;
use crate::vulkan::Device;
use crate::vulkan::command::{self, CommandPool};
use crate::vulkan::compute::{DescriptorSet, Resource};
use crate::vulkan::query::TimestampPool;
use crate::vulkan::transfer::{buffer_barrier, image_barrier};

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

/// Which of a slot's two passes: the pre pass (the caller's input into the slot's tensor)
/// or the post pass (the slot's tensor into the caller's output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Pre,
    Post,
}

/// One pipeline barrier of a pass's recording.
struct Barriers {
    src: vk::PipelineStageFlags,
    dst: vk::PipelineStageFlags,
    buffers: Vec<vk::BufferMemoryBarrier<'static>>,
    images: Option<vk::ImageMemoryBarrier<'static>>,
}

impl Barriers {
    /// # Safety
    /// `cmd` is recording on `device`; the barriers name live resources.
    unsafe fn record(&self, device: &Device, cmd: vk::CommandBuffer) {
        // SAFETY: the caller's contract.
        unsafe { command::barrier(device, cmd, self.src, self.dst, &self.buffers, self.images.as_slice()) };
    }
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

/// Takes a resource for a pass (`write`: the pass overwrites it all) or gives
/// it back afterwards, as its origin requires.
fn handover(
    device: &Device,
    reg: &Registration,
    acquire: bool,
    (write, keep): (bool, bool),
) -> (Option<vk::ImageMemoryBarrier<'static>>, Vec<vk::BufferMemoryBarrier<'static>>) {
    // A post pass reads what earlier tiles wrote (blending) as well as writing.
    let shader =
        if write { vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE } else { vk::AccessFlags::SHADER_READ };
    let other = vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE;
    let (src, dst) = if acquire { (other, shader) } else { (shader, other) };
    let imported = |raw: vk::Buffer| {
        let (s, d) = families(device, acquire);
        buffer_barrier(raw, src, dst).src_queue_family_index(s).dst_queue_family_index(d)
    };
    match (&reg.resource, reg.origin) {
        (Res::Image { raw, .. }, Origin::Imported) => {
            let (s, d) = families(device, acquire);
            let b = image_barrier(*raw, vk::ImageLayout::GENERAL, vk::ImageLayout::GENERAL, src, dst)
                .src_queue_family_index(s)
                .dst_queue_family_index(d);
            (Some(b), Vec::new())
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
            (Some(image_barrier(*raw, old, new, src, dst)), Vec::new())
        }
        (Res::Buffer { raw, .. }, Origin::Imported) => (None, vec![imported(*raw)]),
        (Res::Buffer { raw, .. }, _) => (None, vec![buffer_barrier(*raw, src, dst)]),
        (Res::Planes { planes, .. }, _) => (None, planes.iter().map(|p| imported(p.buffer.raw())).collect()),
    }
}

/// The planes a planar pass binds: R, G and B (a single plane three times).
fn plane_bindings(planes: &[PlacedPlane]) -> Result<[Resource; 3]> {
    let at = |k: usize| {
        planes
            .get(k)
            .or(planes.first())
            .map(|p| Resource::StorageBuffer(p.buffer.raw(), p.buffer.len()))
            .ok_or_else(|| Error::internal("a planar frame without planes"))
    };
    Ok([at(0)?, at(1)?, at(2)?])
}

/// What the pre pass reads: its first binding, and a planar frame's planes 1 and 2.
fn source_binding(reg: &Registration) -> Result<(Resource, Vec<Resource>)> {
    match &reg.resource {
        Res::Image { view, layout, .. } => Ok((Resource::SampledImage(view.raw(), *layout), Vec::new())),
        Res::Buffer { raw, bytes, .. } => Ok((Resource::StorageBuffer(*raw, *bytes), Vec::new())),
        Res::Planes { planes, .. } => {
            let [r, g, b] = plane_bindings(planes)?;
            Ok((r, vec![g, b]))
        }
    }
}

/// What the post pass writes: its bindings from the third on.
fn target_binding(reg: &Registration) -> Result<Vec<Resource>> {
    match &reg.resource {
        Res::Image { view, .. } => Ok(vec![Resource::StorageImage(view.raw())]),
        Res::Buffer { raw, bytes, .. } => Ok(vec![Resource::StorageBuffer(*raw, *bytes)]),
        Res::Planes { planes, .. } => Ok(plane_bindings(planes)?.to_vec()),
    }
}

/// The format code the shaders read a buffer's pixels with, and its pitch in words; for a
/// planar frame also each plane's start and planes 1 and 2's pitches, in words.
fn buffer_format(reg: &Registration) -> (u32, u32, [u32; 3], [u32; 2]) {
    match &reg.resource {
        Res::Buffer { format, pitch, .. } => {
            let code = match *format {
                vk::Format::B8G8R8A8_UNORM | vk::Format::B8G8R8A8_SRGB => 1,
                vk::Format::R16G16B16A16_SFLOAT => 2,
                _ => 0,
            };
            (code, (*pitch / 4) as u32, [0; 3], [0; 2])
        }
        Res::Planes { format, planes } => {
            // Registered planes are of a checked format.
            let code = PlaneFormat::of(*format).map_or(3, |f| f.shader_code);
            let plane = |k: usize| planes.get(k).or(planes.first());
            let start = |k: usize| plane(k).map_or(0, |p| p.start);
            let pitch = |k: usize| plane(k).map_or(0, |p| (p.pitch / 4) as u32);
            (code, pitch(0), [start(0), start(1), start(2)], [pitch(1), pitch(2)])
        }
        Res::Image { .. } => (0, 0, [0; 3], [0; 2]),
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

    /// Records (or re-records, after a resize) slot `slot`'s pre pass from `reg` into its
    /// tensor, or its post pass from the tensor into `reg`, unless the recording is current.
    ///
    /// # Safety
    /// No submission of this registration's command buffer for `slot` may be pending.
    pub(crate) unsafe fn record(
        &self,
        (direction, which, kind): (Direction, Tensor, TensorKind),
        slot: usize,
        reg: &mut Registration,
        tensors: &SlotTensors,
        place: Place,
        generation: u64,
    ) -> Result<vk::CommandBuffer> {
        let key = (which.code(), place.index);
        if let Some(cmd) = recorded(reg, slot, generation, key) {
            return Ok(cmd);
        }
        let pre = direction == Direction::Pre;
        let (tensor_raw, tensor_bytes) = tensor_buffer(tensors, pre, which)?;
        let size = tensors.size;
        let tensor = Resource::StorageBuffer(tensor_raw, tensor_bytes);
        let alpha = Resource::StorageBuffer(tensors.alpha.raw(), size.alpha_bytes);
        let (format, pitch, [plane0, plane1, plane2], [pitch1, pitch2]) = buffer_format(reg);
        let (pass, params, grid, resources) = if pre {
            let pass = self.passes.pre(reg.source(), kind.element)?;
            let (grid, row) = pre_grid(self.device, pass.workgroup, kind, size.width, size.height)?;
            let srgb = matches!(
                &reg.resource,
                Res::Image { format: vk::Format::R8G8B8A8_SRGB | vk::Format::B8G8R8A8_SRGB, .. }
            );
            let params = PreParams {
                srgb: srgb as u32,
                format,
                pitch,
                alpha: (which == Tensor::Frame) as u32,
                origin_x: place.tile.x,
                origin_y: place.tile.y,
                plane0,
                plane1,
                plane2,
                pitch1,
                pitch2,
                ..PreParams::new(kind, size.width, size.height, row)
            };
            let (first, planes) = source_binding(reg)?;
            let resources: Vec<Resource> = [first, tensor, alpha].into_iter().chain(planes).collect();
            (pass, params.bytes().to_vec(), grid, resources)
        } else {
            let pass = self.passes.post(reg.target(), kind.element)?;
            let grid = post_grid(self.device, pass.workgroup, size.out_width, size.out_height)?;
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
                plane0,
                plane1,
                plane2,
                pitch1,
                pitch2,
                ..PostParams::new(kind, (size.width, size.height), (size.out_width, size.out_height))
            };
            let resources: Vec<Resource> = [tensor, alpha].into_iter().chain(target_binding(reg)?).collect();
            (pass, params.bytes().to_vec(), grid, resources)
        };
        // SAFETY: the registration's resource and the slot's buffers outlive the set: the
        // registration is freed only after its frames, the slot buffers only after a drain.
        let set = unsafe { pass.compute.bind(&resources) }?;
        let cmd = self.command_buffer(reg, slot)?;
        let d = self.device;
        let base = 4 * slot as u32 + if pre { 0 } else { 2 };
        let alpha = buffer_barrier(tensors.alpha.raw(), vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::SHADER_READ);
        let tensor = self.tensor_handover(tensor_raw, direction);
        let compute = vk::PipelineStageFlags::COMPUTE_SHADER;
        let all = vk::PipelineStageFlags::ALL_COMMANDS;
        // The pre pass overwrites the slot's tensor and alpha whole: only ordering against the
        // last frame's post pass on this queue is needed, which the semaphores give. The post
        // pass reads what earlier tiles of the frame wrote (`keep`).
        let (img, buf) = handover(d, reg, true, (!pre, !pre && place.index > 0));
        let before = if pre {
            Barriers { src: all, dst: compute, buffers: buf, images: img }
        } else {
            Barriers {
                src: tensor.1 | all,
                dst: compute,
                buffers: [tensor.0, alpha].into_iter().chain(buf).collect(),
                images: img,
            }
        };
        let (img, buf) = handover(d, reg, false, (!pre, false));
        let after = if pre {
            let dst = tensor.1 | compute | all;
            Barriers { src: compute, dst, buffers: [tensor.0, alpha].into_iter().chain(buf).collect(), images: img }
        } else {
            Barriers { src: compute, dst: all, buffers: buf, images: img }
        };
        // SAFETY: the command buffer is not pending (caller's contract); everything recorded
        // names live resources of this device.
        unsafe {
            command::begin(d, cmd)?;
            self.timestamp_pair(cmd, base, true, which);
            before.record(d, cmd);
            pass.compute.record(cmd, &set, &params, grid);
            after.record(d, cmd);
            self.timestamp_pair(cmd, base, false, which);
            command::end(d, cmd)?;
        }
        store(reg, slot, cmd, set, (generation, key));
        Ok(cmd)
    }

    /// The barrier that hands a slot's tensor over after the pre pass wrote it, or back before
    /// the post pass reads it: to or from CUDA (a release to or acquire from the external queue
    /// family), or to or from the host (its reads or writes made visible). With it, the stage it
    /// waits on (pre: its destination; post: its source).
    fn tensor_handover(
        &self,
        raw: vk::Buffer,
        direction: Direction,
    ) -> (vk::BufferMemoryBarrier<'static>, vk::PipelineStageFlags) {
        let acquire = direction == Direction::Post;
        let barrier = if acquire {
            buffer_barrier(raw, vk::AccessFlags::empty(), vk::AccessFlags::SHADER_READ)
        } else {
            buffer_barrier(raw, vk::AccessFlags::SHADER_WRITE, vk::AccessFlags::empty())
        };
        match (self.on_cuda, acquire) {
            (true, _) => {
                let (s, t) = families(self.device, acquire);
                let stage =
                    if acquire { vk::PipelineStageFlags::ALL_COMMANDS } else { vk::PipelineStageFlags::BOTTOM_OF_PIPE };
                (barrier.src_queue_family_index(s).dst_queue_family_index(t), stage)
            }
            (false, true) => (barrier.src_access_mask(vk::AccessFlags::HOST_WRITE), vk::PipelineStageFlags::HOST),
            (false, false) => (barrier.dst_access_mask(vk::AccessFlags::HOST_READ), vk::PipelineStageFlags::HOST),
        }
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
    // SAFETY: a fresh command buffer of this device, recorded once here.
    unsafe {
        command::begin(device, cmd)?;
        command::memory_barrier(
            device,
            cmd,
            (vk::PipelineStageFlags::ALL_COMMANDS, vk::AccessFlags::MEMORY_WRITE),
            (vk::PipelineStageFlags::HOST, vk::AccessFlags::HOST_READ),
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
