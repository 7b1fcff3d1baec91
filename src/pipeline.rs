//! [`NeuralFrameContext`]: a model, a device and a frame size, and everything
//! one frame needs on its way image → pre pass → ONNX Runtime → post pass → image.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use serde::Serialize;

use crate::cuda::{self, CudaDevice, MappedBuffer};
use crate::error::{Error, Result, VkResultExt, format_uuid};
use crate::onnx::session::{ConvSearch, Provider, SessionConfig};
use crate::onnx::{BoundTensors, ModelContract, Placement, RuntimeInfo, TensorKind, runtime, session};
use crate::vulkan::compute::{ComputePass, DescriptorSet, ImageView, POST_SPIRV, PRE_SPIRV, Resource, linear_grid};
use crate::vulkan::{
    AdapterInfo, Buffer, BufferMemory, Device, DeviceSelector, Image, ImageDesc, Instance, InstanceOptions,
};

/// Which implementation carries frames between the buffers and ONNX Runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// CUDA where the Vulkan device has a CUDA twin and ONNX Runtime has the
    /// CUDA provider; otherwise the CPU backend, announced on stderr.
    #[default]
    Auto,
    /// Vulkan memory imported into CUDA, ONNX Runtime's CUDA provider. Fails if unavailable.
    Cuda,
    /// Host-visible Vulkan buffers mapped into the process, ONNX Runtime's CPU provider.
    Cpu,
}

/// Builds a [`NeuralFrameContext`].
///
/// ```no_run
/// use neural_frame::pipeline::{Backend, NeuralFrameContext};
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .backend(Backend::Auto)
///     .frame_size(960, 540)
///     .build()?;
/// println!("{} ×{}", ctx.backend_name(), ctx.contract().scale);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    model: PathBuf,
    backend: Backend,
    device: DeviceSelector,
    size: (u32, u32),
    ort_library: Option<PathBuf>,
    conv_search: ConvSearch,
    prefer_nhwc: bool,
    validation: bool,
    threads: Option<usize>,
}

impl ContextBuilder {
    /// Which backend (default [`Backend::Auto`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// Which Vulkan device (default: the first suitable one). The CUDA device is found by its UUID.
    pub fn device(mut self, device: DeviceSelector) -> Self {
        self.device = device;
        self
    }
    /// The frame size (width, height) of the input images.
    pub fn frame_size(mut self, width: u32, height: u32) -> Self {
        self.size = (width, height);
        self
    }
    /// An explicit ONNX Runtime library (otherwise: `ORT_DYLIB_PATH`, `.runtime/`, Python).
    pub fn ort_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.ort_library = Some(path.into());
        self
    }
    /// cuDNN's convolution algorithm search (CUDA backend).
    pub fn conv_search(mut self, search: ConvSearch) -> Self {
        self.conv_search = search;
        self
    }
    /// Ask the CUDA provider to prefer NHWC kernels.
    pub fn prefer_nhwc(mut self, on: bool) -> Self {
        self.prefer_nhwc = on;
        self
    }
    /// Run Vulkan under the Khronos validation layer.
    pub fn validation(mut self, on: bool) -> Self {
        self.validation = on;
        self
    }
    /// CPU threads for ONNX Runtime's CPU provider.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// Loads ONNX Runtime and the model, chooses devices and backend, and
    /// allocates the frame's buffers.
    pub fn build(self) -> Result<NeuralFrameContext> {
        NeuralFrameContext::new(self)
    }
}

/// How the backend was chosen, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct BackendReport {
    /// What was asked for.
    pub requested: Backend,
    /// What runs.
    pub backend: &'static str,
    /// Why CUDA is not used, when `auto` fell back to the CPU.
    pub fallback_reason: Option<String>,
    /// The Vulkan device.
    pub vulkan_device: AdapterInfo,
    /// The CUDA device paired with it by UUID, when CUDA runs.
    pub cuda_device: Option<String>,
    /// The loaded ONNX Runtime.
    pub runtime: RuntimeInfo,
}

/// Host-clock times of one frame's stages, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StageTimes {
    /// Pre pass: record, submit, complete.
    pub pre_ms: f64,
    /// ONNX Runtime run.
    pub infer_ms: f64,
    /// Post pass: record, submit, complete.
    pub post_ms: f64,
}

/// The buffers of one frame size and their binding. Fields in teardown order:
/// ONNX Runtime values → CUDA mappings → Vulkan buffers.
struct Frame {
    bound: BoundTensors,
    _cuda: Option<(MappedBuffer, MappedBuffer)>,
    input: Buffer,
    output: Buffer,
    width: u32,
    height: u32,
}

/// Views and descriptor sets for one (input image, output image) pair.
struct ImageBindings {
    pre: DescriptorSet,
    post: DescriptorSet,
    _input_view: ImageView,
    _output_view: ImageView,
}

/// Command pool, two command buffers and a fence for the synchronous path.
struct Recorder {
    pool: vk::CommandPool,
    cmds: [vk::CommandBuffer; 2],
    fence: vk::Fence,
    device: Arc<Device>,
}

impl Recorder {
    fn new(device: &Arc<Device>) -> Result<Self> {
        let raw = device.raw();
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: the device is live.
        let pool = unsafe { raw.create_command_pool(&info, None) }.call("vkCreateCommandPool")?;
        let mut rec = Self {
            pool,
            cmds: [vk::CommandBuffer::null(); 2],
            fence: vk::Fence::null(),
            device: Arc::clone(device),
        };
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(2);
        // SAFETY: the pool is live and used by this thread only.
        let cmds = unsafe { raw.allocate_command_buffers(&alloc) }.call("vkAllocateCommandBuffers")?;
        rec.cmds = [cmds[0], cmds[1]];
        // SAFETY: the device is live.
        rec.fence = unsafe { raw.create_fence(&vk::FenceCreateInfo::default(), None) }.call("vkCreateFence")?;
        Ok(rec)
    }

    /// Records `record` into command buffer `i`, submits it and waits.
    fn run(&self, i: usize, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        let raw = self.device.raw();
        let cmd = self.cmds[i];
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the command buffer is not in use (the previous submission was waited for).
        unsafe { raw.begin_command_buffer(cmd, &begin) }.call("vkBeginCommandBuffer")?;
        record(cmd);
        // SAFETY: cmd is recording.
        unsafe { raw.end_command_buffer(cmd) }.call("vkEndCommandBuffer")?;
        let cmds = [cmd];
        self.device
            .submit(&[vk::SubmitInfo::default().command_buffers(&cmds)], self.fence)?;
        // SAFETY: the fence was just submitted.
        unsafe { raw.wait_for_fences(&[self.fence], true, 30_000_000_000) }.call("vkWaitForFences")?;
        // SAFETY: signalled and idle.
        unsafe { raw.reset_fences(&[self.fence]) }.call("vkResetFences")
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let raw = self.device.raw();
        // SAFETY: every submission was waited for; destroying the pool frees its command buffers.
        unsafe { raw.destroy_fence(self.fence, None) };
        // SAFETY: as above.
        unsafe { raw.destroy_command_pool(self.pool, None) };
    }
}

/// A model on a device for one frame size: turns input images into output images.
///
/// Fields are in teardown order: image bindings and frame buffers (ONNX
/// Runtime values, CUDA mappings, Vulkan buffers), the session, passes and
/// command objects, then the CUDA device, the Vulkan device and the instance.
pub struct NeuralFrameContext {
    bindings: HashMap<(u64, u64), ImageBindings>,
    frame: Option<Frame>,
    session: ort::session::Session,
    pre: ComputePass,
    post: ComputePass,
    recorder: Recorder,
    cuda: Option<Arc<CudaDevice>>,
    device: Arc<Device>,
    _instance: Arc<Instance>,
    contract: ModelContract,
    report: BackendReport,
    model: PathBuf,
}

const PRE_TYPES: [vk::DescriptorType; 2] = [vk::DescriptorType::SAMPLED_IMAGE, vk::DescriptorType::STORAGE_BUFFER];
const POST_TYPES: [vk::DescriptorType; 3] = [
    vk::DescriptorType::STORAGE_BUFFER,
    vk::DescriptorType::SAMPLED_IMAGE,
    vk::DescriptorType::STORAGE_IMAGE,
];

/// Usage an input image needs (besides what the renderer gives it).
pub const INPUT_USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::SAMPLED;
/// Usage an output image needs.
pub const OUTPUT_USAGE: vk::ImageUsageFlags = vk::ImageUsageFlags::STORAGE;
/// The output image's format.
pub const OUTPUT_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;
/// Input formats the pre pass reads.
pub const INPUT_FORMATS: [vk::Format; 5] = [
    vk::Format::R8G8B8A8_UNORM,
    vk::Format::R8G8B8A8_SRGB,
    vk::Format::B8G8R8A8_UNORM,
    vk::Format::B8G8R8A8_SRGB,
    vk::Format::R16G16B16A16_SFLOAT,
];

fn entry(kind: TensorKind, pre: bool) -> &'static std::ffi::CStr {
    match (kind, pre) {
        (TensorKind::NchwF32, true) => c"pre_nchw_f32",
        (TensorKind::NchwF16, true) => c"pre_nchw_f16",
        (TensorKind::NhwcU8, true) => c"pre_nhwc_u8",
        (TensorKind::NchwF32, false) => c"post_nchw_f32",
        (TensorKind::NchwF16, false) => c"post_nchw_f16",
        (TensorKind::NhwcU8, false) => c"post_nhwc_u8",
    }
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

impl NeuralFrameContext {
    /// Starts building a context for the ONNX model at `model`.
    pub fn builder(model: impl AsRef<Path>) -> ContextBuilder {
        ContextBuilder {
            model: model.as_ref().to_path_buf(),
            backend: Backend::Auto,
            device: DeviceSelector::Auto,
            size: (0, 0),
            ort_library: None,
            conv_search: ConvSearch::Heuristic,
            prefer_nhwc: false,
            validation: false,
            threads: None,
        }
    }

    fn new(b: ContextBuilder) -> Result<Self> {
        if b.size.0 == 0 || b.size.1 == 0 {
            return Err(Error::InvalidArgument(
                "set a frame size with ContextBuilder::frame_size".into(),
            ));
        }
        if !b.model.is_file() {
            return Err(Error::ModelContract {
                model: b.model.display().to_string(),
                message: "no such file".into(),
            });
        }
        let runtime = runtime::load(b.ort_library.as_deref())?.clone();
        trace!("ONNX Runtime {} from {}", runtime.version, runtime.library.display());
        let instance = Instance::new(&InstanceOptions {
            validation: b.validation,
        })?;
        let device = Device::new(&instance, b.device)?;
        trace!("Vulkan device {}", device.info());

        let has_cuda_ep = runtime.providers.iter().any(|p| p == "CUDAExecutionProvider");
        let try_cuda = || -> Result<Arc<CudaDevice>> {
            cuda::init()?;
            let cuda_device = CudaDevice::by_uuid(&device.info().uuid_bytes)?;
            if !has_cuda_ep {
                return Err(Error::CudaUnavailable {
                    reason: format!(
                        "the ONNX Runtime at {} has no CUDA execution provider (providers: {}); \
                         install onnxruntime-gpu 1.31.1",
                        runtime.library.display(),
                        runtime.providers.join(", ")
                    ),
                });
            }
            Ok(cuda_device)
        };
        let (cuda_device, fallback_reason) = match b.backend {
            Backend::Cpu => (None, None),
            Backend::Cuda => (Some(try_cuda()?), None),
            Backend::Auto => match try_cuda() {
                Ok(c) => (Some(c), None),
                Err(e) => {
                    let reason = e.to_string();
                    eprintln!("neural-frame: CUDA backend unavailable ({reason}); falling back to the CPU backend");
                    (None, Some(reason))
                }
            },
        };
        let provider = match &cuda_device {
            Some(c) => Provider::Cuda {
                ordinal: c.info().ordinal,
            },
            None => Provider::Cpu,
        };
        let config = SessionConfig {
            provider,
            conv_search: b.conv_search,
            prefer_nhwc: b.prefer_nhwc,
            cuda_stream: None,
            threads: b.threads,
        };
        let (session, contract) = session::create(&b.model, &config)?;
        trace!("model {}: {:?}", b.model.display(), contract);
        let pre = ComputePass::new(&device, PRE_SPIRV, entry(contract.input, true), &PRE_TYPES, 16)?;
        let post = ComputePass::new(&device, POST_SPIRV, entry(contract.output, false), &POST_TYPES, 16)?;
        let recorder = Recorder::new(&device)?;
        let report = BackendReport {
            requested: b.backend,
            backend: if cuda_device.is_some() { "cuda" } else { "cpu" },
            fallback_reason,
            vulkan_device: device.info().clone(),
            cuda_device: cuda_device.as_ref().map(|c| {
                format!(
                    "CUDA {} \"{}\" (UUID {})",
                    c.info().ordinal,
                    c.info().name,
                    format_uuid(&c.info().uuid)
                )
            }),
            runtime,
        };
        let mut ctx = Self {
            bindings: HashMap::new(),
            frame: None,
            session,
            pre,
            post,
            recorder,
            cuda: cuda_device,
            device,
            _instance: instance,
            contract,
            report,
            model: b.model,
        };
        ctx.resize(b.size.0, b.size.1)?;
        Ok(ctx)
    }

    /// Re-creates the frame buffers for a new input size; the session stays.
    pub fn resize(&mut self, width: u32, height: u32) -> Result<()> {
        if let Some(f) = &self.frame
            && (f.width, f.height) == (width, height)
        {
            return Ok(());
        }
        if let Some((fw, fh)) = self.contract.fixed_size
            && (fw, fh) != (width, height)
        {
            return Err(Error::ModelContract {
                model: self.model.display().to_string(),
                message: format!("takes only {fw}×{fh} frames (static input shape); got {width}×{height}"),
            });
        }
        let s = self.contract.scale;
        let max = self.device.limits().max_image_dimension2_d;
        if width == 0 || height == 0 || width * s > max || height * s > max {
            return Err(Error::InvalidArgument(format!(
                "a {width}×{height} frame gives a {}×{} output, beyond what \"{}\" allows (maxImageDimension2D = {max})",
                width * s,
                height * s,
                self.device.info().name
            )));
        }
        // Old bindings refer to the old buffers: drop them first (teardown order).
        self.bindings.clear();
        self.frame = None;
        self.frame = Some(self.make_frame(width, height)?);
        Ok(())
    }

    fn make_frame(&self, width: u32, height: u32) -> Result<Frame> {
        let s = self.contract.scale;
        let in_len = self.contract.input.buffer_bytes(width, height);
        let out_len = self.contract.output.buffer_bytes(width * s, height * s);
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        match &self.cuda {
            None => {
                let mut input = Buffer::new(&self.device, in_len, usage, BufferMemory::HostVisible)?;
                let mut output = Buffer::new(&self.device, out_len, usage, BufferMemory::HostVisible)?;
                let (ip, op) = (host_ptr(&mut input)?, host_ptr(&mut output)?);
                // SAFETY: both pointers are the buffers' persistent host mappings, which live as long
                // as the buffers; the Frame drops the binding before the buffers.
                let bound = unsafe {
                    BoundTensors::new(
                        &self.session,
                        &self.contract,
                        width,
                        height,
                        Placement::Host,
                        ip,
                        in_len,
                        op,
                        out_len,
                    )
                }?;
                Ok(Frame {
                    bound,
                    _cuda: None,
                    input,
                    output,
                    width,
                    height,
                })
            }
            Some(cuda_device) => {
                let input = Buffer::exportable(&self.device, in_len, usage, BufferMemory::DeviceLocal)?;
                let output = Buffer::exportable(&self.device, out_len, usage, BufferMemory::DeviceLocal)?;
                let t = Instant::now();
                let in_map = cuda::ExternalMemory::import(cuda_device, input.export()?)?.map_buffer(0, in_len)?;
                let out_map = cuda::ExternalMemory::import(cuda_device, output.export()?)?.map_buffer(0, out_len)?;
                trace!(
                    "buffers imported into CUDA and mapped in {:.3} ms",
                    t.elapsed().as_secs_f64() * 1e3
                );
                let placement = Placement::Cuda(cuda_device.info().ordinal);
                // SAFETY: the mappings cover in_len/out_len bytes of device memory and live in the
                // Frame, which drops the binding before them.
                let bound = unsafe {
                    BoundTensors::new(
                        &self.session,
                        &self.contract,
                        width,
                        height,
                        placement,
                        in_map.ptr() as *mut c_void,
                        in_len,
                        out_map.ptr() as *mut c_void,
                        out_len,
                    )
                }?;
                Ok(Frame {
                    bound,
                    _cuda: Some((in_map, out_map)),
                    input,
                    output,
                    width,
                    height,
                })
            }
        }
    }

    /// Creates an input image of the current frame size that a renderer could
    /// hold (`format` from [`INPUT_FORMATS`]), usable for uploads and sampling.
    pub fn create_input_image(&self, format: vk::Format) -> Result<Image> {
        let (w, h) = self.frame_size();
        Image::new(
            &self.device,
            ImageDesc {
                width: w,
                height: h,
                format,
                usage: INPUT_USAGE | vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::TRANSFER_SRC,
            },
        )
    }

    /// Creates an output image (frame size × scale, RGBA8) that can be read back.
    pub fn create_output_image(&self) -> Result<Image> {
        let (w, h) = self.output_size();
        Image::new(
            &self.device,
            ImageDesc {
                width: w,
                height: h,
                format: OUTPUT_FORMAT,
                usage: OUTPUT_USAGE | vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST,
            },
        )
    }

    /// Current input frame size.
    pub fn frame_size(&self) -> (u32, u32) {
        self.frame.as_ref().map_or((0, 0), |f| (f.width, f.height))
    }
    /// Current output size.
    pub fn output_size(&self) -> (u32, u32) {
        let (w, h) = self.frame_size();
        (w * self.contract.scale, h * self.contract.scale)
    }
    /// The model's contract.
    pub fn contract(&self) -> &ModelContract {
        &self.contract
    }
    /// How the backend was chosen and what runs.
    pub fn report(&self) -> &BackendReport {
        &self.report
    }
    /// `"cuda"` or `"cpu"`.
    pub fn backend_name(&self) -> &'static str {
        self.report.backend
    }
    /// The Vulkan device (to create and fill images on).
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
    /// The CUDA device, on the CUDA backend.
    pub fn cuda_device(&self) -> Option<&Arc<CudaDevice>> {
        self.cuda.as_ref()
    }

    fn check_images(&self, input: &Image, output: &Image) -> Result<()> {
        let (i, o) = (input.desc(), output.desc());
        if !INPUT_FORMATS.contains(&i.format) {
            return Err(Error::InvalidArgument(format!(
                "input image format {:?} is not supported; use one of {INPUT_FORMATS:?}",
                i.format
            )));
        }
        if !i.usage.contains(INPUT_USAGE) {
            return Err(Error::InvalidArgument(
                "the input image needs VK_IMAGE_USAGE_SAMPLED_BIT".into(),
            ));
        }
        if o.format != OUTPUT_FORMAT || !o.usage.contains(OUTPUT_USAGE) {
            return Err(Error::InvalidArgument(format!(
                "the output image must be {OUTPUT_FORMAT:?} with VK_IMAGE_USAGE_STORAGE_BIT (got {:?}, {:?})",
                o.format, o.usage
            )));
        }
        let s = self.contract.scale;
        if (o.width, o.height) != (i.width * s, i.height * s) {
            return Err(Error::InvalidArgument(format!(
                "output image is {}×{}; a {}×{} input at ×{s} needs {}×{}",
                o.width,
                o.height,
                i.width,
                i.height,
                i.width * s,
                i.height * s
            )));
        }
        if !Arc::ptr_eq(input.device(), &self.device) || !Arc::ptr_eq(output.device(), &self.device) {
            return Err(Error::InvalidArgument(
                "images must live on the context's Vulkan device".into(),
            ));
        }
        Ok(())
    }

    /// Runs the model on `input` and writes the result into `output`. Both
    /// images must be in `GENERAL` layout with their previous writes
    /// submitted; `output` ends in `GENERAL` layout. A new input size
    /// re-creates the frame buffers (the session stays).
    ///
    /// Synchronous: returns when the output image is written.
    pub fn infer(&mut self, input: &Image, output: &Image) -> Result<StageTimes> {
        self.check_images(input, output)?;
        self.resize(input.desc().width, input.desc().height)?;
        let key = (input.id(), output.id());
        if !self.bindings.contains_key(&key) {
            if self.bindings.len() >= 8 {
                self.bindings.clear();
            }
            let b = self.bind_images(input, output)?;
            self.bindings.insert(key, b);
        }
        let frame = self
            .frame
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let sets = &self.bindings[&key];
        let raw = self.device.raw();
        let (w, h) = (frame.width, frame.height);
        let s = self.contract.scale;
        let srgb = matches!(
            input.desc().format,
            vk::Format::R8G8B8A8_SRGB | vk::Format::B8G8R8A8_SRGB
        ) as u32;
        let items = match self.contract.input {
            TensorKind::NchwF16 => (3 * w as u64 * h as u64).div_ceil(2),
            _ => w as u64 * h as u64,
        };
        let max_x = self.device.limits().max_compute_work_group_count[0];
        let (grid, row) = linear_grid(items, max_x);
        let host = self.cuda.is_none();
        let mut times = StageTimes::default();

        let t = Instant::now();
        self.recorder.run(0, |cmd| {
            let image_barrier = crate::vulkan::transfer::image_barrier(
                input.raw(),
                vk::ImageLayout::GENERAL,
                vk::ImageLayout::GENERAL,
                vk::AccessFlags::MEMORY_WRITE,
                vk::AccessFlags::SHADER_READ,
            );
            // SAFETY: cmd is recording; the image is live.
            unsafe {
                raw.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[image_barrier],
                )
            };
            self.pre.record(cmd, &sets.pre, &words(&[w, h, srgb, row]), grid);
            let buffer_barrier = vk::BufferMemoryBarrier::default()
                .buffer(frame.input.raw())
                .size(vk::WHOLE_SIZE)
                .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                .dst_access_mask(if host {
                    vk::AccessFlags::HOST_READ
                } else {
                    vk::AccessFlags::MEMORY_READ
                })
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED);
            let dst_stage = if host {
                vk::PipelineStageFlags::HOST
            } else {
                vk::PipelineStageFlags::BOTTOM_OF_PIPE
            };
            // SAFETY: cmd is recording; the buffer is live.
            unsafe {
                raw.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    dst_stage,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[buffer_barrier],
                    &[],
                )
            };
        })?;
        times.pre_ms = t.elapsed().as_secs_f64() * 1e3;

        let t = Instant::now();
        frame.bound.run(&self.session, None)?;
        times.infer_ms = t.elapsed().as_secs_f64() * 1e3;

        let t = Instant::now();
        self.recorder.run(1, |cmd| {
            let buffer_barrier = vk::BufferMemoryBarrier::default()
                .buffer(frame.output.raw())
                .size(vk::WHOLE_SIZE)
                .src_access_mask(if host {
                    vk::AccessFlags::HOST_WRITE
                } else {
                    vk::AccessFlags::MEMORY_WRITE
                })
                .dst_access_mask(vk::AccessFlags::SHADER_READ)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED);
            let discard = crate::vulkan::transfer::image_barrier(
                output.raw(),
                vk::ImageLayout::UNDEFINED,
                vk::ImageLayout::GENERAL,
                vk::AccessFlags::empty(),
                vk::AccessFlags::SHADER_WRITE,
            );
            let src_stage = if host {
                vk::PipelineStageFlags::HOST
            } else {
                vk::PipelineStageFlags::TOP_OF_PIPE
            };
            // SAFETY: cmd is recording; buffer and image are live.
            unsafe {
                raw.cmd_pipeline_barrier(
                    cmd,
                    src_stage | vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[buffer_barrier],
                    &[discard],
                )
            };
            let groups = [(w * s).div_ceil(8), (h * s).div_ceil(8), 1];
            self.post.record(cmd, &sets.post, &words(&[w, h, w * s, h * s]), groups);
            let done = crate::vulkan::transfer::image_barrier(
                output.raw(),
                vk::ImageLayout::GENERAL,
                vk::ImageLayout::GENERAL,
                vk::AccessFlags::SHADER_WRITE,
                vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
            );
            // SAFETY: cmd is recording; the image is live.
            unsafe {
                raw.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::ALL_COMMANDS,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[done],
                )
            };
        })?;
        times.post_ms = t.elapsed().as_secs_f64() * 1e3;
        Ok(times)
    }

    fn bind_images(&self, input: &Image, output: &Image) -> Result<ImageBindings> {
        let frame = self
            .frame
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let input_view = ImageView::new(input)?;
        let output_view = ImageView::new(output)?;
        let pre = self.pre.bind(&[
            Resource::SampledImage(&input_view),
            Resource::StorageBuffer(&frame.input),
        ])?;
        let post = self.post.bind(&[
            Resource::StorageBuffer(&frame.output),
            Resource::SampledImage(&input_view),
            Resource::StorageImage(&output_view),
        ])?;
        Ok(ImageBindings {
            pre,
            post,
            _input_view: input_view,
            _output_view: output_view,
        })
    }

    /// The model's input tensor as the pre pass wrote it (tests, debugging).
    pub fn read_input_tensor(&self) -> Result<Vec<u8>> {
        let f = self
            .frame
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        crate::vulkan::transfer::readback_buffer(&f.input, self.contract.input.bytes(f.width, f.height) as usize)
    }

    /// The model's output tensor as ONNX Runtime wrote it, read through Vulkan (tests, debugging).
    pub fn read_output_tensor(&self) -> Result<Vec<u8>> {
        let f = self
            .frame
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let s = self.contract.scale;
        crate::vulkan::transfer::readback_buffer(
            &f.output,
            self.contract.output.bytes(f.width * s, f.height * s) as usize,
        )
    }

    /// Fills the output tensor's memory with a byte pattern (poisoning, in tests).
    pub fn poison_output_tensor(&self, word: u32) -> Result<()> {
        let f = self
            .frame
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        crate::vulkan::transfer::fill_buffer(&f.output, word)
    }

    /// Runs ONNX Runtime alone on the bound buffers (no pre or post pass): the floor of the pipeline.
    pub fn run_model_only(&mut self) -> Result<f64> {
        let f = self
            .frame
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let t = Instant::now();
        f.bound.run(&self.session, None)?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }
}

impl Drop for NeuralFrameContext {
    fn drop(&mut self) {
        // Nothing may still run on the Vulkan side when buffers and images go.
        let _ = self.device.wait_idle();
        if let Some(c) = &self.cuda {
            let _ = c.synchronize();
        }
    }
}

fn host_ptr(buffer: &mut Buffer) -> Result<*mut c_void> {
    let p = buffer.mapped_ptr();
    if p.is_null() {
        return Err(Error::InvalidArgument("host backend buffer is not mapped".into()));
    }
    Ok(p.cast())
}
