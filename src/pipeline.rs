//! [`NeuralFrameContext`]: a model, a device and a frame size, and everything
//! one frame needs on its way image → pre pass → ONNX Runtime → post pass → image.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use serde::Serialize;

use crate::cuda::{self, CudaDevice, MappedBuffer};
use crate::error::{Error, Result, VkResultExt, format_uuid};
use crate::onnx::session::{ConvSearch, Provider, SessionConfig};
use crate::onnx::{BoundTensors, ModelContract, Placement, RuntimeInfo, TensorKind, runtime, session};
use crate::vulkan::compute::{ComputePass, DescriptorSet, ImageView, POST_SPIRV, PRE_SPIRV, Resource, linear_grid};
use crate::vulkan::query::TimestampPool;
use crate::vulkan::transfer::image_barrier;
use crate::vulkan::{
    AdapterInfo, Buffer, BufferMemory, Device, DeviceSelector, Image, ImageDesc, Instance, InstanceOptions,
    TimelineSemaphore,
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
    tuning: Tuning,
    validation: bool,
    threads: Option<usize>,
    slots: usize,
    back_pressure: BackPressure,
}

/// How a context runs the model and the hand-off. Each field has a
/// [`ContextBuilder`] setter of the same name; the defaults are the builder's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tuning {
    /// cuDNN's convolution algorithm search (CUDA backend).
    pub conv_search: ConvSearch,
    /// The CUDA provider prefers NHWC kernels.
    pub prefer_nhwc: bool,
    /// Each slot's model run is replayed as a captured CUDA graph (CUDA backend).
    pub cuda_graph: bool,
    /// Where the post pass waits for the model (CUDA backend).
    pub post_wait: PostWait,
    /// The pre and post passes are timed with Vulkan timestamp queries.
    pub gpu_timestamps: bool,
    /// Frames are waited for by polling instead of sleeping in the driver.
    pub spin_wait: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            conv_search: ConvSearch::Heuristic,
            prefer_nhwc: false,
            cuda_graph: false,
            post_wait: PostWait::Gpu,
            gpu_timestamps: true,
            spin_wait: false,
        }
    }
}

impl ContextBuilder {
    /// Every tuning option at once.
    pub fn tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }
    /// Time the pre and post passes with Vulkan timestamp queries (default on;
    /// off: [`FrameStats`]'s `pre_ms` and `post_ms` are NaN).
    pub fn gpu_timestamps(mut self, on: bool) -> Self {
        self.tuning.gpu_timestamps = on;
        self
    }
    /// Wait for frames by polling on the host (a busy core) instead of sleeping
    /// in the driver: lower latency on retirement (default off).
    pub fn spin_wait(mut self, on: bool) -> Self {
        self.tuning.spin_wait = on;
        self
    }
    /// Replay each slot's model run as a CUDA graph captured from ONNX Runtime's
    /// second run in that slot (CUDA backend; default off). The buffers of a slot
    /// stay at fixed addresses, so one capture per slot and frame size holds.
    pub fn cuda_graph(mut self, on: bool) -> Self {
        self.tuning.cuda_graph = on;
        self
    }
    /// Where the post pass waits for the model (CUDA backend; default [`PostWait::Gpu`]).
    pub fn post_wait(mut self, wait: PostWait) -> Self {
        self.tuning.post_wait = wait;
        self
    }
    /// Frames in flight: slots in the ring (default 3, at least 1).
    pub fn slots(mut self, n: usize) -> Self {
        self.slots = n.max(1);
        self
    }
    /// What [`NeuralFrameContext::submit`] does when every slot is busy (default: block).
    pub fn back_pressure(mut self, policy: BackPressure) -> Self {
        self.back_pressure = policy;
        self
    }
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
        self.tuning.conv_search = search;
        self
    }
    /// Ask the CUDA provider to prefer NHWC kernels.
    pub fn prefer_nhwc(mut self, on: bool) -> Self {
        self.tuning.prefer_nhwc = on;
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

/// What `submit` does when every slot of the ring is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackPressure {
    /// Wait on the host for the oldest frame to finish, then reuse its slot.
    #[default]
    Block,
    /// Return [`Submitted::Skipped`] at once and submit nothing: the new frame is
    /// dropped (frames already on the GPU cannot be recalled). For render loops
    /// that must never stall.
    Skip,
}

/// How the post pass of a frame learns that the model is done (CUDA backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PostWait {
    /// The post pass is submitted with the frame and waits on the GPU for the
    /// `output_ready` semaphore: nothing on the host waits before retirement.
    #[default]
    Gpu,
    /// The post pass is submitted only once the host has seen the model finish:
    /// by the next `submit`, or by `wait` for that frame. No Vulkan submission
    /// sits blocked on a semaphore while CUDA runs the model.
    Host,
}

/// A frame in flight; [`NeuralFrameContext::wait`] retires it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Ticket(pub u64);

/// What [`NeuralFrameContext::submit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// The frame is on its way.
    Frame(Ticket),
    /// Every slot was busy and the policy is [`BackPressure::Skip`]: nothing was submitted.
    Skipped,
}

/// Times of one frame, in milliseconds. GPU times come from Vulkan timestamp
/// queries and CUDA events; `NaN` where the device offers none.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FrameStats {
    /// The frame's ticket.
    pub ticket: u64,
    /// Pre pass on the GPU.
    pub pre_ms: f64,
    /// The model: CUDA event time on the CUDA backend, host time on the CPU backend.
    pub infer_ms: f64,
    /// Post pass on the GPU.
    pub post_ms: f64,
    /// From `submit` to retirement, host clock.
    pub latency_ms: f64,
    /// Host time spent handing the frame to CUDA and ONNX Runtime inside `submit` (enqueue, or the run
    /// itself on the CPU backend).
    pub enqueue_ms: f64,
    /// CUDA backend: idle time of the CUDA stream between the previous frame's model end and this
    /// frame's model start (NaN for the first frame and on the CPU backend).
    pub gpu_gap_ms: f64,
    /// The ring slot the frame went through.
    pub slot: usize,
}

/// What runs beside the model in [`NeuralFrameContext::interference`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Load {
    /// Nothing: Vulkan idle.
    Idle,
    /// Nothing beside, but each run on the next slot's buffers (and graph), as the ring does.
    RotateSlots,
    /// One Vulkan submission with commands (a pre pass) that waits on the GPU, for
    /// the whole time, on a semaphore CUDA signals after the last run.
    WaitingCommands,
    /// A semaphore signal and wait by the CUDA stream between runs (as each frame has).
    CudaSemaphoreOps,
    /// Per run: a Vulkan submission with no commands that signals an exported semaphore.
    ExternalSignal,
    /// Per run: the pre pass's dispatch alone.
    PrePass,
    /// Per run: the post pass's dispatch alone.
    PostPass,
    /// Per run: the pre pass as the pipeline records it (timestamps, barriers, release to CUDA).
    PipelinePre,
    /// Per run: the post pass as the pipeline records it (timestamps, acquire from CUDA, barriers).
    PipelinePost,
    /// Nothing beside, but each run is enqueued while the run before it executes
    /// (the other loads enqueue every run before the first starts).
    EnqueueAhead,
    /// As `EnqueueAhead`, and each run waits for a Vulkan-signalled semaphore and
    /// signals another one, as a frame in the ring does.
    EnqueueAheadWithHandoff,
}

impl Load {
    /// Every load, in the order measured.
    pub const ALL: [Load; 11] = [
        Load::Idle,
        Load::RotateSlots,
        Load::WaitingCommands,
        Load::CudaSemaphoreOps,
        Load::ExternalSignal,
        Load::PrePass,
        Load::PostPass,
        Load::PipelinePre,
        Load::PipelinePost,
        Load::EnqueueAhead,
        Load::EnqueueAheadWithHandoff,
    ];
    fn needs_two_slots(self) -> bool {
        !matches!(
            self,
            Load::Idle
                | Load::CudaSemaphoreOps
                | Load::ExternalSignal
                | Load::EnqueueAhead
                | Load::EnqueueAheadWithHandoff
        )
    }
}

/// The model's GPU time under one load (median ms).
#[derive(Debug, Clone, Serialize)]
pub struct InterferenceCase {
    /// What ran beside the model.
    pub load: Load,
    /// The model's GPU time (CUDA events, median over the runs).
    pub model_ms: f64,
}

/// The model's GPU time while Vulkan does different things (CUDA events, medians
/// over back-to-back runs on slot 0's buffers): [`NeuralFrameContext::interference`].
#[derive(Debug, Clone, Serialize)]
pub struct Interference {
    /// Runs per case.
    pub runs: usize,
    /// One entry per load (loads that need a second slot are left out with one slot).
    pub cases: Vec<InterferenceCase>,
}

/// Where one synchronous frame's time goes: when the host saw each step,
/// in ms after `submit` began (spin-polled: microsecond resolution).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FrameTrace {
    /// `submit` returned.
    pub submitted_ms: f64,
    /// The pre pass signalled `input_ready`.
    pub input_ready_ms: f64,
    /// The model started on the CUDA stream (its start event completed).
    pub model_start_ms: f64,
    /// The model ended (its end event completed).
    pub model_end_ms: f64,
    /// CUDA signalled `output_ready`.
    pub output_ready_ms: f64,
    /// The post pass signalled `frame_done`.
    pub frame_done_ms: f64,
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

/// A frame on its way through a slot.
struct InFlight {
    value: u64,
    submitted: Instant,
    host_infer_ms: f64,
    enqueue_ms: f64,
    /// [`PostWait::Host`]: the post pass is recorded but not yet submitted.
    post_pending: bool,
    _keep: Option<(Arc<Image>, Arc<Image>)>,
}

/// One slot of the ring: its own buffers, binding, command buffers, queries and events.
struct Slot {
    /// The model run captured as a CUDA graph, for this slot's current buffers.
    graph: Option<cuda::Graph>,
    bindings: HashMap<(u64, u64), ImageBindings>,
    frame: Option<Frame>,
    events: Option<(cuda::Event, cuda::Event)>,
    cmds: [vk::CommandBuffer; 2],
    in_flight: Option<InFlight>,
    /// Model runs on this slot's current buffers.
    runs: u32,
    /// Run options: end-of-run sync disabled on the CUDA backend.
    run_options: Option<ort::session::RunOptions>,
}

/// The CUDA side of the hand-off. The session runs on `stream`, so the session
/// is dropped before this (field order of the context).
struct CudaSync {
    /// Recorded once at start: a fixed point on the stream's timeline.
    reference: cuda::Event,
    /// The last retired frame's value and model end (ms after `reference`).
    last_end_ms: std::cell::Cell<Option<(u64, f64)>>,
    input_ready: cuda::ExternalSemaphore,
    output_ready: cuda::ExternalSemaphore,
    stream: cuda::Stream,
}

/// The context's timeline semaphores: Vulkan signals `input_ready = n` after
/// the pre pass, CUDA signals `output_ready = n` after the model, Vulkan signals
/// `frame_done = n` after the post pass.
struct Timelines {
    input_ready: TimelineSemaphore,
    output_ready: TimelineSemaphore,
    frame_done: TimelineSemaphore,
}

/// A command pool (one thread uses it: the context's).
struct CommandPool {
    raw: vk::CommandPool,
    device: Arc<Device>,
}

impl CommandPool {
    fn new(device: &Arc<Device>) -> Result<Self> {
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(device.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: the device is live.
        let raw = unsafe { device.raw().create_command_pool(&info, None) }.call("vkCreateCommandPool")?;
        Ok(Self { raw, device: Arc::clone(device) })
    }

    fn allocate(&self, n: u32) -> Result<Vec<vk::CommandBuffer>> {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.raw)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(n);
        // SAFETY: the pool is live and used by one thread.
        unsafe { self.device.raw().allocate_command_buffers(&info) }.call("vkAllocateCommandBuffers")
    }
}

impl Drop for CommandPool {
    fn drop(&mut self) {
        // SAFETY: the context retires every frame before dropping; the pool frees its buffers.
        unsafe { self.device.raw().destroy_command_pool(self.raw, None) };
    }
}

/// How session creation names a CUDA provider that failed to register.
const CUDA_EP_FAILURE: &str = "registering the CUDA execution provider";

/// How long a host wait on a frame may take before it is an error.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// A model on a device for one frame size: turns input images into output
/// images through a ring of slots (frames in flight).
///
/// Fields are in teardown order: the slots (image bindings; ONNX Runtime
/// values, CUDA mappings and Vulkan buffers per slot), the session, the CUDA
/// stream and imported semaphores, Vulkan semaphores, queries, command pool
/// and passes, then the CUDA device, the Vulkan device and the instance.
pub struct NeuralFrameContext {
    slots: Vec<Slot>,
    session: ort::session::Session,
    cuda_sync: Option<CudaSync>,
    timelines: Timelines,
    queries: Option<TimestampPool>,
    _pool: CommandPool,
    pre: ComputePass,
    post: ComputePass,
    cuda: Option<Arc<CudaDevice>>,
    device: Arc<Device>,
    _instance: Arc<Instance>,
    contract: ModelContract,
    report: BackendReport,
    model: PathBuf,
    completed: HashMap<u64, FrameStats>,
    next_value: u64,
    next_slot: usize,
    back_pressure: BackPressure,
    skipped: u64,
    tuning: Tuning,
}

const PRE_TYPES: [vk::DescriptorType; 2] = [vk::DescriptorType::SAMPLED_IMAGE, vk::DescriptorType::STORAGE_BUFFER];
const POST_TYPES: [vk::DescriptorType; 3] =
    [vk::DescriptorType::STORAGE_BUFFER, vk::DescriptorType::SAMPLED_IMAGE, vk::DescriptorType::STORAGE_IMAGE];

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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
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
            tuning: Tuning::default(),
            validation: false,
            threads: None,
            slots: 3,
            back_pressure: BackPressure::Block,
        }
    }

    fn new(b: ContextBuilder) -> Result<Self> {
        match Self::create(b.clone()) {
            // The CUDA provider can still fail when the session is created (a CUDA
            // library missing): `auto` then falls back too, announced.
            Err(e @ Error::Onnx { .. }) if b.backend == Backend::Auto && e.to_string().contains(CUDA_EP_FAILURE) => {
                let reason = e.to_string();
                eprintln!("neural-frame: CUDA backend unavailable ({reason}); falling back to the CPU backend");
                let mut ctx = Self::create(b.backend(Backend::Cpu))?;
                ctx.report.requested = Backend::Auto;
                ctx.report.fallback_reason = Some(reason);
                Ok(ctx)
            }
            other => other,
        }
    }

    fn create(b: ContextBuilder) -> Result<Self> {
        if b.size.0 == 0 || b.size.1 == 0 {
            return Err(Error::InvalidArgument("set a frame size with ContextBuilder::frame_size".into()));
        }
        if !b.model.is_file() {
            return Err(Error::ModelContract { model: b.model.display().to_string(), message: "no such file".into() });
        }
        let runtime = runtime::load(b.ort_library.as_deref())?.clone();
        trace!("ONNX Runtime {} from {}", runtime.version, runtime.library.display());
        let instance = Instance::new(&InstanceOptions { validation: b.validation })?;
        let device = Device::new(&instance, b.device)?;
        trace!("Vulkan device {} ({} queue(s))", device.info(), device.queue_count());

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
            crate::vulkan::sync::timeline_export_support(&device)?;
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
        let exportable = cuda_device.is_some();
        let timelines = Timelines {
            input_ready: TimelineSemaphore::new(&device, 0, exportable)?,
            output_ready: TimelineSemaphore::new(&device, 0, exportable)?,
            frame_done: TimelineSemaphore::new(&device, 0, false)?,
        };
        let cuda_sync = match &cuda_device {
            Some(c) => {
                let stream = cuda::Stream::new(c)?;
                let reference = cuda::Event::new(c)?;
                reference.record(&stream)?;
                Some(CudaSync {
                    reference,
                    last_end_ms: std::cell::Cell::new(None),
                    input_ready: cuda::ExternalSemaphore::import_timeline(c, timelines.input_ready.export()?)?,
                    output_ready: cuda::ExternalSemaphore::import_timeline(c, timelines.output_ready.export()?)?,
                    stream,
                })
            }
            None => None,
        };
        let provider = match &cuda_device {
            Some(c) => Provider::Cuda { ordinal: c.info().ordinal },
            None => Provider::Cpu,
        };
        let config = SessionConfig {
            provider,
            conv_search: b.tuning.conv_search,
            prefer_nhwc: b.tuning.prefer_nhwc,
            cuda_stream: cuda_sync.as_ref().map(|s| s.stream.raw() as usize),
            threads: b.threads,
        };
        let (session, contract) = session::create(&b.model, &config)?;
        trace!("model {}: {:?}", b.model.display(), contract);
        let pre = ComputePass::new(&device, PRE_SPIRV, entry(contract.input, true), &PRE_TYPES, 16)?;
        let post = ComputePass::new(&device, POST_SPIRV, entry(contract.output, false), &POST_TYPES, 16)?;
        let pool = CommandPool::new(&device)?;
        let n = b.slots.max(1);
        let queries = if b.tuning.gpu_timestamps && device.timestamp_period_ns() > 0.0 {
            Some(TimestampPool::new(&device, 4 * n as u32)?)
        } else {
            None
        };
        let cmds = pool.allocate(2 * n as u32)?;
        let mut slots = Vec::with_capacity(n);
        for i in 0..n {
            let (events, run_options) = match &cuda_device {
                Some(c) => {
                    let mut options =
                        ort::session::RunOptions::new().map_err(|e| Error::onnx("creating run options", e))?;
                    options.disable_device_sync().map_err(|e| Error::onnx("disabling the end-of-run sync", e))?;
                    (Some((cuda::Event::new(c)?, cuda::Event::new(c)?)), Some(options))
                }
                None => (None, None),
            };
            slots.push(Slot {
                bindings: HashMap::new(),
                frame: None,
                events,
                cmds: [cmds[2 * i], cmds[2 * i + 1]],
                in_flight: None,
                graph: None,
                runs: 0,
                run_options,
            });
        }
        let cuda_device_present = cuda_device.is_some();
        let report = BackendReport {
            requested: b.backend,
            backend: if cuda_device.is_some() { "cuda" } else { "cpu" },
            fallback_reason,
            vulkan_device: device.info().clone(),
            cuda_device: cuda_device.as_ref().map(|c| {
                format!("CUDA {} \"{}\" (UUID {})", c.info().ordinal, c.info().name, format_uuid(&c.info().uuid))
            }),
            runtime,
        };
        let mut ctx = Self {
            slots,
            session,
            cuda_sync,
            timelines,
            queries,
            _pool: pool,
            pre,
            post,
            cuda: cuda_device,
            device,
            _instance: instance,
            contract,
            report,
            model: b.model,
            completed: HashMap::new(),
            next_value: 1,
            next_slot: 0,
            back_pressure: b.back_pressure,
            skipped: 0,
            // CUDA graphs exist only on the CUDA backend: the tuning reports what runs.
            tuning: Tuning { cuda_graph: b.tuning.cuda_graph && cuda_device_present, ..b.tuning },
        };
        ctx.resize(b.size.0, b.size.1)?;
        Ok(ctx)
    }

    /// Re-creates every slot's buffers for a new input size (after the frames
    /// in flight finish); the session stays.
    pub fn resize(&mut self, width: u32, height: u32) -> Result<()> {
        if self.frame_size() == (width, height) {
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
        self.retire_all()?;
        for i in 0..self.slots.len() {
            // Old bindings and graphs refer to the old buffers: drop them first (teardown order).
            self.slots[i].bindings.clear();
            self.slots[i].graph = None;
            self.slots[i].runs = 0;
            self.slots[i].frame = None;
            let frame = self.make_frame(width, height)?;
            self.slots[i].frame = Some(frame);
        }
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
                Ok(Frame { bound, _cuda: None, input, output, width, height })
            }
            Some(cuda_device) => {
                let input = Buffer::exportable(&self.device, in_len, usage, BufferMemory::DeviceLocal)?;
                let output = Buffer::exportable(&self.device, out_len, usage, BufferMemory::DeviceLocal)?;
                let t = Instant::now();
                let in_map = cuda::ExternalMemory::import(cuda_device, input.export()?)?.map_buffer(0, in_len)?;
                let out_map = cuda::ExternalMemory::import(cuda_device, output.export()?)?.map_buffer(0, out_len)?;
                trace!("buffers imported into CUDA and mapped in {:.3} ms", ms(t.elapsed()));
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
                Ok(Frame { bound, _cuda: Some((in_map, out_map)), input, output, width, height })
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
        self.slots.first().and_then(|s| s.frame.as_ref()).map_or((0, 0), |f| (f.width, f.height))
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
    /// The tuning in effect (CUDA graphs only on the CUDA backend).
    pub fn tuning(&self) -> Tuning {
        self.tuning
    }
    /// Slots in the ring.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }
    /// Frames in flight now.
    pub fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.in_flight.is_some()).count()
    }
    /// Frames dropped by [`BackPressure::Skip`] so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
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
            return Err(Error::InvalidArgument("the input image needs VK_IMAGE_USAGE_SAMPLED_BIT".into()));
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
            return Err(Error::InvalidArgument("images must live on the context's Vulkan device".into()));
        }
        Ok(())
    }

    /// Runs the model on `input` into `output` and waits for it: [`submit`](Self::submit) + [`wait`](Self::wait).
    /// Both images must be in `GENERAL` layout with their previous writes
    /// submitted; `output` ends in `GENERAL` layout.
    pub fn infer(&mut self, input: &Image, output: &Image) -> Result<FrameStats> {
        match self.submit_inner(input, output, None, BackPressure::Block)? {
            Submitted::Frame(t) => self.wait(t),
            Submitted::Skipped => Err(Error::InvalidArgument("a blocking submission was skipped".into())),
        }
    }

    /// Starts a frame without waiting for it. The ring holds the images until
    /// the frame retires; when every slot is busy the back-pressure policy
    /// decides (block on the oldest frame, or skip this one). On the CUDA
    /// backend nothing here waits on the host: Vulkan and CUDA hand the frame
    /// to each other through timeline semaphores.
    pub fn submit(&mut self, input: &Arc<Image>, output: &Arc<Image>) -> Result<Submitted> {
        let keep = Some((Arc::clone(input), Arc::clone(output)));
        self.submit_inner(input, output, keep, self.back_pressure)
    }

    /// Waits until the frame of `ticket` is done (its output image written) and returns its times.
    pub fn wait(&mut self, ticket: Ticket) -> Result<FrameStats> {
        if let Some(s) = self.completed.remove(&ticket.0) {
            return Ok(s);
        }
        let slot =
            self.slots.iter().position(|s| s.in_flight.as_ref().is_some_and(|f| f.value == ticket.0)).ok_or_else(
                || Error::InvalidArgument(format!("ticket {} is unknown or was already waited for", ticket.0)),
            )?;
        self.retire(slot, true)?;
        self.completed
            .remove(&ticket.0)
            .ok_or_else(|| Error::InvalidArgument(format!("ticket {} did not retire", ticket.0)))
    }

    /// Waits for every frame in flight.
    pub fn wait_all(&mut self) -> Result<Vec<FrameStats>> {
        self.retire_all()?;
        let mut all: Vec<_> = self.completed.drain().map(|(_, s)| s).collect();
        all.sort_by_key(|s| s.ticket);
        Ok(all)
    }

    fn retire_all(&mut self) -> Result<()> {
        let mut order: Vec<(u64, usize)> =
            self.slots.iter().enumerate().filter_map(|(i, s)| s.in_flight.as_ref().map(|f| (f.value, i))).collect();
        order.sort();
        for (_, i) in order {
            self.retire(i, true)?;
        }
        Ok(())
    }

    /// Retires slot `i` if its frame is done (or, with `block`, once it is). Returns whether it is free.
    fn retire(&mut self, i: usize, block: bool) -> Result<bool> {
        let Some(value) = self.slots[i].in_flight.as_ref().map(|f| f.value) else {
            return Ok(true);
        };
        self.submit_posts(if block { Some(value) } else { None })?;
        if self.slots[i].in_flight.as_ref().is_some_and(|f| f.post_pending) {
            return Ok(false); // not blocking, and the model is still running
        }
        let done = if block {
            self.wait_value(&self.timelines.frame_done, value)?
        } else {
            self.timelines.frame_done.value()? >= value
        };
        if !done {
            if block {
                return Err(Error::InvalidArgument(format!(
                    "frame {value} did not finish within {FRAME_TIMEOUT:?} (frame_done = {})",
                    self.timelines.frame_done.value()?
                )));
            }
            return Ok(false);
        }
        let Some(f) = self.slots[i].in_flight.take() else {
            return Ok(true);
        };
        let period = self.device.timestamp_period_ns() as f64 * 1e-6;
        let ticks = match &self.queries {
            Some(q) => q.read(4 * i as u32, 4)?,
            None => None,
        };
        let (pre_ms, post_ms) = match ticks {
            Some(t) => ((t[1].wrapping_sub(t[0])) as f64 * period, (t[3].wrapping_sub(t[2])) as f64 * period),
            None => (f64::NAN, f64::NAN),
        };
        let (infer_ms, gpu_gap_ms) = match (&self.slots[i].events, &self.cuda_sync) {
            (Some((start, end)), Some(sync)) => {
                let start_ms = start.elapsed_since(&sync.reference)? as f64;
                let end_ms = end.elapsed_since(&sync.reference)? as f64;
                let gap = match sync.last_end_ms.get() {
                    Some((v, last)) if v + 1 == value => start_ms - last,
                    _ => f64::NAN, // first frame, or not retired in order
                };
                sync.last_end_ms.set(Some((value, end_ms)));
                (end_ms - start_ms, gap)
            }
            _ => (f.host_infer_ms, f64::NAN),
        };
        let stats = FrameStats {
            ticket: value,
            pre_ms,
            infer_ms,
            post_ms,
            latency_ms: ms(f.submitted.elapsed()),
            enqueue_ms: f.enqueue_ms,
            gpu_gap_ms,
            slot: i,
        };
        self.completed.insert(value, stats);
        Ok(true)
    }

    fn submit_inner(
        &mut self,
        input: &Image,
        output: &Image,
        keep: Option<(Arc<Image>, Arc<Image>)>,
        policy: BackPressure,
    ) -> Result<Submitted> {
        self.check_images(input, output)?;
        self.resize(input.desc().width, input.desc().height)?;
        let i = self.next_slot;
        // Hand Vulkan the post passes whose models are done (PostWait::Host).
        self.submit_posts(None)?;
        if !self.retire(i, policy == BackPressure::Block)? {
            self.skipped += 1;
            return Ok(Submitted::Skipped);
        }
        let key = (input.id(), output.id());
        if !self.slots[i].bindings.contains_key(&key) {
            if self.slots[i].bindings.len() >= 8 {
                self.slots[i].bindings.clear();
            }
            let b = self.bind_images(i, input, output)?;
            self.slots[i].bindings.insert(key, b);
        }
        // A timeline value is used once: it is taken now, so that a frame that
        // fails half-way never makes a later one signal the same value again.
        let n = self.next_value;
        self.next_value += 1;
        let submitted = Instant::now();
        self.record_pre(i, key, input)?;
        let pre_cmd = [self.slots[i].cmds[0]];
        let signal = [self.timelines.input_ready.raw()];
        let values = [n];
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
        let submit =
            vk::SubmitInfo::default().command_buffers(&pre_cmd).signal_semaphores(&signal).push_next(&mut timeline);
        self.device.submit_to(0, &[submit], vk::Fence::null())?;

        let mut host_infer_ms = f64::NAN;
        let t_enqueue = Instant::now();
        let slot = &mut self.slots[i];
        let frame = slot.frame.as_mut().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        match (&self.cuda_sync, &slot.events) {
            (Some(sync), Some((start, end))) => {
                // CUDA waits for the pre pass, runs the model on its stream, and signals.
                sync.input_ready.wait(&sync.stream, n)?;
                start.record(&sync.stream)?;
                let options = slot.run_options.as_ref();
                if self.tuning.cuda_graph && slot.graph.is_none() && slot.runs >= 1 {
                    // ONNX Runtime has run once on these buffers (its memory and algorithm
                    // choices are settled): capture its next run, then replay that.
                    let t = Instant::now();
                    let graph = cuda::Graph::capture(&sync.stream, || frame.bound.run(&self.session, options))
                        .map_err(|e| Error::InvalidArgument(format!("capturing the model as a CUDA graph: {e}")))?;
                    trace!(
                        "slot {i}: model captured as a CUDA graph of {} nodes in {:.3} ms",
                        graph.nodes(),
                        ms(t.elapsed())
                    );
                    slot.graph = Some(graph);
                }
                match &slot.graph {
                    Some(graph) => graph.launch(&sync.stream)?,
                    None => frame.bound.run(&self.session, options)?,
                }
                slot.runs = slot.runs.saturating_add(1);
                end.record(&sync.stream)?;
                sync.output_ready.signal(&sync.stream, n)?;
            }
            _ => {
                // CPU provider: the host needs the pre pass's result before it can run.
                if !self.timelines.input_ready.wait(n, FRAME_TIMEOUT.as_nanos() as u64)? {
                    return Err(Error::InvalidArgument(format!("the pre pass of frame {n} did not finish")));
                }
                let t = Instant::now();
                frame.bound.run(&self.session, None)?;
                host_infer_ms = ms(t.elapsed());
            }
        }

        let enqueue_ms = ms(t_enqueue.elapsed());
        self.record_post(i, key, output)?;
        let on_cuda = self.cuda_sync.is_some();
        let post_pending = on_cuda && self.tuning.post_wait == PostWait::Host;
        if !post_pending {
            self.submit_post(i, n)?;
        }

        self.slots[i].in_flight =
            Some(InFlight { value: n, submitted, host_infer_ms, enqueue_ms, post_pending, _keep: keep });
        self.next_slot = (i + 1) % self.slots.len();
        Ok(Submitted::Frame(Ticket(n)))
    }

    /// Waits (bounded by [`FRAME_TIMEOUT`]) until `semaphore` reaches `value`: polling
    /// with spin waits on, else in the driver. False on time-out.
    fn wait_value(&self, semaphore: &TimelineSemaphore, value: u64) -> Result<bool> {
        if self.tuning.spin_wait {
            let deadline = Instant::now() + FRAME_TIMEOUT;
            while Instant::now() < deadline {
                if semaphore.value()? >= value {
                    return Ok(true);
                }
                std::thread::yield_now();
            }
            return Ok(false);
        }
        semaphore.wait(value, FRAME_TIMEOUT.as_nanos() as u64)
    }

    /// Submits slot `i`'s recorded post pass for frame `n`: it waits for `output_ready = n`
    /// on the GPU (CUDA backend) and signals `frame_done = n`.
    fn submit_post(&self, i: usize, n: u64) -> Result<()> {
        let post_cmd = [self.slots[i].cmds[1]];
        let done = [self.timelines.frame_done.raw()];
        let values = [n];
        let on_cuda = self.cuda_sync.is_some();
        let wait = [self.timelines.output_ready.raw()];
        let stages = [vk::PipelineStageFlags::COMPUTE_SHADER];
        let (wait, stages): (&[vk::Semaphore], &[vk::PipelineStageFlags]) =
            if on_cuda { (&wait, &stages) } else { (&[], &[]) };
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(if on_cuda { &values[..] } else { &[] })
            .signal_semaphore_values(&values);
        let submit = vk::SubmitInfo::default()
            .command_buffers(&post_cmd)
            .wait_semaphores(wait)
            .wait_dst_stage_mask(stages)
            .signal_semaphores(&done)
            .push_next(&mut timeline);
        // On its own queue where there is one: a post pass waiting for CUDA then
        // does not hold back the next frame's pre pass (submission order).
        self.device.submit_to(if on_cuda { 1 } else { 0 }, &[submit], vk::Fence::null())
    }

    /// [`PostWait::Host`]: submits, in frame order, the pending post passes whose
    /// model is done. With `until = Some(v)`, waits (bounded) for the models of
    /// frames up to `v` first.
    fn submit_posts(&mut self, until: Option<u64>) -> Result<()> {
        let mut pending: Vec<(u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.in_flight.as_ref().filter(|f| f.post_pending).map(|f| (f.value, i)))
            .collect();
        pending.sort();
        for (value, i) in pending {
            let ready = match until {
                Some(v) if value <= v => self.model_done(i, value, true)?,
                _ => self.model_done(i, value, false)?,
            };
            if !ready {
                return Ok(()); // later frames wait behind this one: timeline values rise in order
            }
            self.submit_post(i, value)?;
            if let Some(f) = self.slots[i].in_flight.as_mut() {
                f.post_pending = false;
            }
        }
        Ok(())
    }

    /// Whether the model of frame `value` (in slot `i`) has finished and signalled
    /// `output_ready`; with `block`, waits for it first (bounded by [`FRAME_TIMEOUT`]).
    fn model_done(&self, i: usize, value: u64, block: bool) -> Result<bool> {
        if self.timelines.output_ready.value()? >= value {
            return Ok(true);
        }
        if !block {
            return Ok(false);
        }
        // The model's end event completes just before the signal: wait for it on
        // the host (CUDA's completion check, a short spin), then for the signal.
        if let Some((_, end)) = &self.slots[i].events
            && !end.wait_timeout(FRAME_TIMEOUT)?
        {
            return Err(Error::InvalidArgument(format!(
                "the model of frame {value} did not finish within {FRAME_TIMEOUT:?}"
            )));
        }
        if !self.wait_value(&self.timelines.output_ready, value)? {
            return Err(Error::InvalidArgument(format!(
                "CUDA did not signal output_ready = {value} within {FRAME_TIMEOUT:?}"
            )));
        }
        Ok(true)
    }

    fn begin(&self, cmd: vk::CommandBuffer) -> Result<()> {
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the slot was retired, so its command buffer is not in use.
        unsafe { self.device.raw().begin_command_buffer(cmd, &begin) }.call("vkBeginCommandBuffer")
    }

    fn end(&self, cmd: vk::CommandBuffer) -> Result<()> {
        // SAFETY: cmd is recording.
        unsafe { self.device.raw().end_command_buffer(cmd) }.call("vkEndCommandBuffer")
    }

    fn barrier(
        &self,
        cmd: vk::CommandBuffer,
        src: vk::PipelineStageFlags,
        dst: vk::PipelineStageFlags,
        buffers: &[vk::BufferMemoryBarrier<'_>],
        images: &[vk::ImageMemoryBarrier<'_>],
    ) {
        // SAFETY: cmd is recording on this device; every barrier names a live resource.
        unsafe {
            self.device.raw().cmd_pipeline_barrier(cmd, src, dst, vk::DependencyFlags::empty(), &[], buffers, images)
        };
    }

    fn record_pre(&self, i: usize, key: (u64, u64), input: &Image) -> Result<()> {
        let slot = &self.slots[i];
        let frame = slot.frame.as_ref().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let sets = &slot.bindings[&key];
        let cmd = slot.cmds[0];
        let (w, h) = (frame.width, frame.height);
        let srgb = matches!(input.desc().format, vk::Format::R8G8B8A8_SRGB | vk::Format::B8G8R8A8_SRGB) as u32;
        let items = match self.contract.input {
            TensorKind::NchwF16 => (3 * w as u64 * h as u64).div_ceil(2),
            _ => w as u64 * h as u64,
        };
        let (grid, row) = linear_grid(items, self.device.limits().max_compute_work_group_count[0]);
        let on_cuda = self.cuda_sync.is_some();
        self.begin(cmd)?;
        if let Some(q) = &self.queries {
            q.record_reset(cmd, 4 * i as u32, 4);
            q.record(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, 4 * i as u32);
        }
        let read_input = image_barrier(
            input.raw(),
            vk::ImageLayout::GENERAL,
            vk::ImageLayout::GENERAL,
            vk::AccessFlags::MEMORY_WRITE,
            vk::AccessFlags::SHADER_READ,
        );
        self.barrier(
            cmd,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            &[],
            &[read_input],
        );
        self.pre.record(cmd, &sets.pre, &words(&[w, h, srgb, row]), grid);
        // Hand the input buffer over: to CUDA (release to the external queue
        // family) or to the host (make the writes visible to host reads).
        let handover = vk::BufferMemoryBarrier::default()
            .buffer(frame.input.raw())
            .size(vk::WHOLE_SIZE)
            .src_access_mask(vk::AccessFlags::SHADER_WRITE);
        let (handover, dst) = if on_cuda {
            (
                handover
                    .src_queue_family_index(self.device.queue_family())
                    .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL),
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
            )
        } else {
            (
                handover
                    .dst_access_mask(vk::AccessFlags::HOST_READ)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED),
                vk::PipelineStageFlags::HOST,
            )
        };
        self.barrier(cmd, vk::PipelineStageFlags::COMPUTE_SHADER, dst, &[handover], &[]);
        if let Some(q) = &self.queries {
            q.record(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, 4 * i as u32 + 1);
        }
        self.end(cmd)
    }

    fn record_post(&self, i: usize, key: (u64, u64), output: &Image) -> Result<()> {
        let slot = &self.slots[i];
        let frame = slot.frame.as_ref().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let sets = &slot.bindings[&key];
        let cmd = slot.cmds[1];
        let (w, h, s) = (frame.width, frame.height, self.contract.scale);
        let on_cuda = self.cuda_sync.is_some();
        self.begin(cmd)?;
        if let Some(q) = &self.queries {
            q.record(cmd, vk::PipelineStageFlags::TOP_OF_PIPE, 4 * i as u32 + 2);
        }
        // Take the output buffer back: from CUDA (acquire from the external
        // queue family) or from the host (its writes are visible to this submission).
        let take = vk::BufferMemoryBarrier::default()
            .buffer(frame.output.raw())
            .size(vk::WHOLE_SIZE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ);
        let take = if on_cuda {
            take.src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL).dst_queue_family_index(self.device.queue_family())
        } else {
            take.src_access_mask(vk::AccessFlags::HOST_WRITE)
                .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
        };
        let discard = image_barrier(
            output.raw(),
            vk::ImageLayout::UNDEFINED,
            vk::ImageLayout::GENERAL,
            vk::AccessFlags::empty(),
            vk::AccessFlags::SHADER_WRITE,
        );
        let src = if on_cuda { vk::PipelineStageFlags::TOP_OF_PIPE } else { vk::PipelineStageFlags::HOST };
        self.barrier(
            cmd,
            src | vk::PipelineStageFlags::ALL_COMMANDS,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            &[take],
            &[discard],
        );
        let groups = [(w * s).div_ceil(8), (h * s).div_ceil(8), 1];
        self.post.record(cmd, &sets.post, &words(&[w, h, w * s, h * s]), groups);
        let written = image_barrier(
            output.raw(),
            vk::ImageLayout::GENERAL,
            vk::ImageLayout::GENERAL,
            vk::AccessFlags::SHADER_WRITE,
            vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
        );
        self.barrier(
            cmd,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::PipelineStageFlags::ALL_COMMANDS,
            &[],
            &[written],
        );
        if let Some(q) = &self.queries {
            q.record(cmd, vk::PipelineStageFlags::BOTTOM_OF_PIPE, 4 * i as u32 + 3);
        }
        self.end(cmd)
    }

    fn bind_images(&self, i: usize, input: &Image, output: &Image) -> Result<ImageBindings> {
        let frame = self.slots[i].frame.as_ref().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let input_view = ImageView::new(input)?;
        let output_view = ImageView::new(output)?;
        let pre = self.pre.bind(&[Resource::SampledImage(&input_view), Resource::StorageBuffer(&frame.input)])?;
        let post = self.post.bind(&[
            Resource::StorageBuffer(&frame.output),
            Resource::SampledImage(&input_view),
            Resource::StorageImage(&output_view),
        ])?;
        Ok(ImageBindings { pre, post, _input_view: input_view, _output_view: output_view })
    }

    fn last_frame(&self) -> Result<&Frame> {
        let i = (self.next_slot + self.slots.len() - 1) % self.slots.len();
        self.slots[i].frame.as_ref().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))
    }

    /// The model's input tensor as the last frame's pre pass wrote it (tests, debugging).
    pub fn read_input_tensor(&self) -> Result<Vec<u8>> {
        let f = self.last_frame()?;
        crate::vulkan::transfer::readback_buffer(&f.input, self.contract.input.bytes(f.width, f.height) as usize)
    }

    /// The model's output tensor of the last frame, read through Vulkan (tests, debugging).
    pub fn read_output_tensor(&self) -> Result<Vec<u8>> {
        let f = self.last_frame()?;
        let s = self.contract.scale;
        crate::vulkan::transfer::readback_buffer(
            &f.output,
            self.contract.output.bytes(f.width * s, f.height * s) as usize,
        )
    }

    /// Fills every slot's output tensor memory with a 32-bit pattern (poisoning, in tests).
    pub fn poison_output_tensor(&mut self, word: u32) -> Result<()> {
        self.retire_all()?;
        for slot in &self.slots {
            if let Some(f) = &slot.frame {
                crate::vulkan::transfer::fill_buffer(&f.output, word)?;
            }
        }
        Ok(())
    }

    /// Runs ONNX Runtime alone on slot 0's bound buffers (no pre or post pass,
    /// no hand-off) and waits for it: the floor of the pipeline. With CUDA graphs
    /// on and slot 0's graph captured, the graph is what runs. Milliseconds, host clock.
    pub fn run_model_only(&mut self) -> Result<f64> {
        self.retire_all()?;
        let slot = &mut self.slots[0];
        let frame = slot.frame.as_mut().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
        let t = Instant::now();
        match &self.cuda_sync {
            Some(sync) => {
                match &slot.graph {
                    Some(graph) => graph.launch(&sync.stream)?,
                    None => frame.bound.run(&self.session, slot.run_options.as_ref())?,
                }
                sync.stream.synchronize()?;
            }
            None => frame.bound.run(&self.session, None)?,
        }
        Ok(ms(t.elapsed()))
    }

    /// Diagnostics (CUDA backend): the model's GPU time (CUDA events), `runs`
    /// times back to back on slot 0's buffers, under each [`Load`] in turn: what
    /// Vulkan (or the CUDA stream's semaphore operations) do to the model while it
    /// runs. Per-run Vulkan work goes on the last slot's buffers and the caller's
    /// images (the pre pass reads `input`, the post pass writes `output`).
    pub fn interference(&mut self, input: &Image, output: &Image, runs: usize) -> Result<Interference> {
        let Some(cuda_device) = self.cuda.clone() else {
            return Err(Error::InvalidArgument("interference is measured on the CUDA backend".into()));
        };
        let runs = runs.max(2);
        // Every slot has run (and captured its graph, if on) with these images.
        for _ in 0..2 * self.slots.len() {
            self.infer(input, output)?;
        }
        self.retire_all()?;
        let events: Vec<cuda::Event> = (0..=runs).map(|_| cuda::Event::new(&cuda_device)).collect::<Result<_>>()?;
        let mut cases = Vec::new();
        for load in Load::ALL {
            if load.needs_two_slots() && self.slots.len() < 2 {
                continue;
            }
            let model_ms = self.model_under(load, input, output, &events, &cuda_device)?;
            cases.push(InterferenceCase { load, model_ms });
        }
        Ok(Interference { runs, cases })
    }

    fn model_under(
        &mut self,
        load: Load,
        input: &Image,
        output: &Image,
        events: &[cuda::Event],
        cuda_device: &Arc<CudaDevice>,
    ) -> Result<f64> {
        let runs = events.len() - 1;
        let key = (input.id(), output.id());
        let last = self.slots.len() - 1;
        // An exportable semaphore shared with CUDA, and a Vulkan-only one that counts probe submissions.
        let shared = TimelineSemaphore::new(&self.device, 0, true)?;
        let cu_shared = cuda::ExternalSemaphore::import_timeline(cuda_device, shared.export()?)?;
        let probe_done = TimelineSemaphore::new(&self.device, 0, false)?;
        let cmd = self._pool.allocate(1)?[0];
        let stages = [vk::PipelineStageFlags::ALL_COMMANDS];
        let submit = |ctx: &Self, cmds: &[vk::CommandBuffer], wait: Option<u64>, signal_shared: Option<u64>, k: u64| {
            let mut signal = vec![probe_done.raw()];
            let mut values = vec![k];
            if let Some(v) = signal_shared {
                signal.push(shared.raw());
                values.push(v);
            }
            let wait_sem = [shared.raw()];
            let wait_val = [wait.unwrap_or(0)];
            let mut timeline = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
            let mut info = vk::SubmitInfo::default().command_buffers(cmds).signal_semaphores(&signal);
            if wait.is_some() {
                timeline = timeline.wait_semaphore_values(&wait_val);
                info = info.wait_semaphores(&wait_sem).wait_dst_stage_mask(&stages);
            }
            let info = info.push_next(&mut timeline);
            ctx.device.submit_to(if wait.is_some() { 1 } else { 0 }, &[info], vk::Fence::null())
        };
        let record_plain = |ctx: &Self, pre: bool| -> Result<()> {
            let frame =
                ctx.slots[last].frame.as_ref().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
            let (w, h, s) = (frame.width, frame.height, ctx.contract.scale);
            ctx.begin(cmd)?;
            let sets = &ctx.slots[last].bindings[&key];
            if pre {
                let items = match ctx.contract.input {
                    TensorKind::NchwF16 => (3 * w as u64 * h as u64).div_ceil(2),
                    _ => w as u64 * h as u64,
                };
                let (grid, row) = linear_grid(items, ctx.device.limits().max_compute_work_group_count[0]);
                ctx.pre.record(cmd, &sets.pre, &words(&[w, h, 0, row]), grid);
            } else {
                let groups = [(w * s).div_ceil(8), (h * s).div_ceil(8), 1];
                ctx.post.record(cmd, &sets.post, &words(&[w, h, w * s, h * s]), groups);
            }
            ctx.end(cmd)
        };

        // Enqueue the runs (with CUDA semaphore operations between them for that load).
        let back = TimelineSemaphore::new(&self.device, 0, true)?;
        let cu_back = cuda::ExternalSemaphore::import_timeline(cuda_device, back.export()?)?;
        let enqueue_one = |ctx: &mut Self, k: usize| -> Result<()> {
            let v = k as u64 + 1;
            let sync = ctx.cuda_sync.as_ref().expect("CUDA backend");
            if load == Load::EnqueueAheadWithHandoff {
                // As a frame: Vulkan signals "input ready", CUDA waits for it, runs, signals "output ready".
                submit(ctx, &[], None, Some(v), v)?;
                cu_shared.wait(&sync.stream, v)?;
            }
            if load == Load::CudaSemaphoreOps {
                cu_shared.signal(&sync.stream, 2 * v - 1)?;
                cu_shared.wait(&sync.stream, 2 * v - 1)?;
            }
            events[k].record(&sync.stream)?;
            let slot = &mut ctx.slots[if load == Load::RotateSlots { k % (last + 1) } else { 0 }];
            let frame = slot.frame.as_mut().ok_or_else(|| Error::InvalidArgument("no frame buffers".into()))?;
            match &slot.graph {
                Some(graph) => graph.launch(&sync.stream)?,
                None => frame.bound.run(&ctx.session, slot.run_options.as_ref())?,
            }
            if load == Load::EnqueueAheadWithHandoff {
                cu_back.signal(&sync.stream, v)?;
            }
            if k + 1 == runs {
                events[runs].record(&sync.stream)?;
            }
            Ok(())
        };
        if load == Load::WaitingCommands {
            record_plain(self, true)?;
            submit(self, &[cmd], Some(1), None, 1)?;
        }
        let ahead = matches!(load, Load::EnqueueAhead | Load::EnqueueAheadWithHandoff);
        let mut enqueued = Ok(());
        for k in 0..if ahead { runs.min(2) } else { runs } {
            enqueued = enqueue_one(self, k);
            if enqueued.is_err() {
                break;
            }
        }
        if load == Load::WaitingCommands {
            let sync = self.cuda_sync.as_ref().expect("CUDA backend");
            cu_shared.signal(&sync.stream, 1)?;
        }
        enqueued?;
        if ahead {
            // Each run is handed to CUDA while the one before it executes, as the ring does.
            for k in 2..runs {
                if !events[k - 1].wait_timeout(FRAME_TIMEOUT)? {
                    return Err(Error::InvalidArgument("a model run did not start".into()));
                }
                enqueue_one(self, k)?;
            }
        }
        // One piece of Vulkan work during each run.
        let per_run = matches!(
            load,
            Load::ExternalSignal | Load::PrePass | Load::PostPass | Load::PipelinePre | Load::PipelinePost
        );
        if per_run {
            for (k, e) in events[..runs].iter().enumerate() {
                if !e.wait_timeout(FRAME_TIMEOUT)? {
                    return Err(Error::InvalidArgument("a model run did not start".into()));
                }
                let k = k as u64 + 1;
                if !probe_done.wait(k - 1, FRAME_TIMEOUT.as_nanos() as u64)? {
                    return Err(Error::InvalidArgument("a probe submission did not finish".into()));
                }
                match load {
                    Load::PrePass => record_plain(self, true)?,
                    Load::PostPass => record_plain(self, false)?,
                    Load::PipelinePre => self.record_pre(last, key, input)?,
                    Load::PipelinePost => self.record_post(last, key, output)?,
                    _ => {}
                }
                let cmds: &[vk::CommandBuffer] = match load {
                    Load::PipelinePre => &self.slots[last].cmds[..1],
                    Load::PipelinePost => &self.slots[last].cmds[1..],
                    Load::ExternalSignal => &[],
                    _ => std::slice::from_ref(&cmd),
                };
                submit(self, cmds, None, (load == Load::ExternalSignal).then_some(k), k)?;
            }
        }
        if !events[runs].wait_timeout(FRAME_TIMEOUT)? {
            return Err(Error::InvalidArgument("the model runs did not finish".into()));
        }
        self.device.wait_idle()?;
        drop((cu_shared, cu_back));
        // SAFETY: the device is idle; the buffer came from this pool.
        unsafe { self.device.raw().free_command_buffers(self._pool.raw, &[cmd]) };
        let mut t = Vec::with_capacity(runs);
        for w in events.windows(2) {
            t.push(w[1].elapsed_since(&w[0])? as f64);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    }

    /// Runs one frame like [`infer`](Self::infer) and spin-polls the host for when
    /// each step of its hand-off happens (diagnostics; CUDA backend).
    pub fn trace_frame(&mut self, input: &Image, output: &Image) -> Result<(FrameStats, FrameTrace)> {
        if self.cuda_sync.is_none() {
            return Err(Error::InvalidArgument("frames are traced on the CUDA backend".into()));
        }
        let t0 = Instant::now();
        let Submitted::Frame(ticket) = self.submit_inner(input, output, None, BackPressure::Block)? else {
            return Err(Error::InvalidArgument("a blocking submission was skipped".into()));
        };
        let mut trace = FrameTrace { submitted_ms: ms(t0.elapsed()), ..FrameTrace::default() };
        let [mut a, mut b, mut c, mut d, mut e] = [f64::NAN; 5];
        let i = (self.next_slot + self.slots.len() - 1) % self.slots.len();
        let n = ticket.0;
        while t0.elapsed() < FRAME_TIMEOUT {
            let now = ms(t0.elapsed());
            let (start, end) = self.slots[i].events.as_ref().expect("CUDA backend");
            if a.is_nan() && self.timelines.input_ready.value()? >= n {
                a = now;
            }
            if b.is_nan() && start.query()? {
                b = now;
            }
            if c.is_nan() && end.query()? {
                c = now;
            }
            if d.is_nan() && self.timelines.output_ready.value()? >= n {
                d = now;
                self.submit_posts(None)?;
            }
            if self.timelines.frame_done.value()? >= n {
                e = now;
                break;
            }
        }
        (trace.input_ready_ms, trace.model_start_ms, trace.model_end_ms) = (a, b, c);
        (trace.output_ready_ms, trace.frame_done_ms) = (d, e);
        Ok((self.wait(ticket)?, trace))
    }

    /// The session, for runs outside the pipeline (the benchmark's host round trip).
    pub fn session_mut(&mut self) -> &mut ort::session::Session {
        &mut self.session
    }
}

impl Drop for NeuralFrameContext {
    fn drop(&mut self) {
        // Frames in flight finish before anything they use goes; bounded, so a
        // lost signal cannot hang the drop. Post passes still held back
        // (PostWait::Host) are submitted once their model is done.
        if let Err(e) = self.retire_all() {
            eprintln!("neural-frame: retiring the frames in flight on drop: {e}");
        }
        for slot in &self.slots {
            let waited = match &slot.in_flight {
                Some(f) if f.post_pending => &self.timelines.output_ready,
                _ => &self.timelines.frame_done,
            };
            if let Some(f) = &slot.in_flight
                && !matches!(waited.wait(f.value, FRAME_TIMEOUT.as_nanos() as u64), Ok(true))
            {
                eprintln!("neural-frame: frame {} did not finish before the context was dropped", f.value);
                let _ = self.timelines.input_ready.signal_from_host(u64::MAX / 2);
                let _ = self.timelines.output_ready.signal_from_host(u64::MAX / 2);
            }
        }
        if let Some(sync) = &self.cuda_sync {
            let _ = sync.stream.synchronize();
        }
        let _ = self.device.wait_idle();
    }
}

fn host_ptr(buffer: &mut Buffer) -> Result<*mut c_void> {
    let p = buffer.mapped_ptr();
    if p.is_null() {
        return Err(Error::InvalidArgument("host backend buffer is not mapped".into()));
    }
    Ok(p.cast())
}
