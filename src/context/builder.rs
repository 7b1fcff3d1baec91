//! [`ContextBuilder`]: everything a context is made with, and the choices it
//! offers (backend, tuning, back-pressure).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::context::NeuralFrameContext;
use crate::context::foreign::CallerDevice;
use crate::context::tiles::Tiling;
use crate::error::Result;
use crate::onnx::declare::Declarations;
use crate::onnx::{ColorOrder, ConvSearch, Layout, Normalization, Precision, TensorDeclaration};
use crate::vulkan::DeviceSelector;

pub use crate::context::tuning::{CudaOptions, PostWait, Tuning, TuningInEffect};

/// Which implementation carries frames between the Vulkan buffers and ONNX Runtime.
///
/// ```no_run
/// use neural_frame::{Backend, NeuralFrameContext};
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .backend(Backend::Auto)
///     .frame_size(960, 540)
///     .build()?;
/// if let Some(why) = &ctx.report().fallback_reason {
///     eprintln!("on the CPU backend: {why}");
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// CUDA where the Vulkan device has a CUDA twin and ONNX Runtime's CUDA
    /// provider registers; otherwise the CPU backend, announced in
    /// [`BackendReport::fallback_reason`](crate::BackendReport::fallback_reason) and the log.
    #[default]
    Auto,
    /// Vulkan memory imported into CUDA, ONNX Runtime's CUDA provider. Fails if unavailable.
    Cuda,
    /// Host-visible Vulkan buffers mapped into the process, ONNX Runtime's CPU provider.
    Cpu,
}

/// What [`submit`](NeuralFrameContext::submit) does when every slot of the ring is busy.
///
/// ```no_run
/// use neural_frame::{BackPressure, NeuralFrameContext};
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .frame_size(960, 540)
///     .back_pressure(BackPressure::Skip) // submit returns Submitted::Skipped instead of waiting
///     .build()?;
/// # let _ = ctx;
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackPressure {
    /// Wait on the host for the oldest frame to finish, then reuse its slot.
    #[default]
    Block,
    /// Return [`Submitted::Skipped`](crate::Submitted::Skipped) at once and submit
    /// nothing: the new frame is dropped (frames already on the GPU cannot be
    /// recalled). For render loops that must never stall.
    Skip,
}

/// The default bound on every host wait for a frame
/// ([`ContextBuilder::frame_timeout`]).
///
/// ```
/// use std::time::Duration;
/// use neural_frame::{DEFAULT_FRAME_TIMEOUT, NeuralFrameContext};
///
/// assert_eq!(DEFAULT_FRAME_TIMEOUT, Duration::from_secs(30));
/// // A big model on a slow CPU may need longer.
/// let builder = NeuralFrameContext::builder("models/upscale.onnx").frame_timeout(4 * DEFAULT_FRAME_TIMEOUT);
/// # let _ = builder;
/// ```
pub const DEFAULT_FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds a [`NeuralFrameContext`].
///
/// ```no_run
/// use neural_frame::{Backend, NeuralFrameContext};
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .backend(Backend::Auto)
///     .frame_size(960, 540)
///     .slots(3)
///     .build()?;
/// println!("{} {}", ctx.backend_name(), ctx.contract().scale);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    pub(crate) model: PathBuf,
    pub(crate) backend: Backend,
    pub(crate) device: DeviceSelector,
    pub(crate) size: (u32, u32),
    pub(crate) ort_library: Option<PathBuf>,
    pub(crate) tuning: Tuning,
    pub(crate) validation: bool,
    pub(crate) threads: Option<usize>,
    pub(crate) slots: usize,
    pub(crate) back_pressure: BackPressure,
    pub(crate) frame_timeout: Duration,
    pub(crate) declared: Declarations,
    pub(crate) tiling: Option<Tiling>,
    pub(crate) memory_budget: Option<u64>,
    /// NHWC kernels and the fused bias are the defaults, not the caller's choice:
    /// where cuDNN refuses them for the model, the context runs without them, announced.
    pub(crate) default_kernels: bool,
    /// The caller set an option of the tuning: the tune cache is not consulted.
    pub(crate) tuning_forced: bool,
    /// The fused session is built beside the first frames (`fast_start`).
    pub(crate) fast_start: bool,
    /// The precision the model runs in (CUDA backend).
    pub(crate) precision: Precision,
    /// Exact graph rewrites at load (CUDA backend).
    pub(crate) rewrite_graph: bool,
    /// Convolutions with their bias and activation as fused `ConvAct` nodes (CUDA backend):
    /// the caller's choice, or `None` for the default (on where the model runs in fp16).
    pub(crate) fuse_conv_act: Option<bool>,
}

impl ContextBuilder {
    pub(crate) fn new(model: &Path) -> Self {
        Self {
            model: model.to_path_buf(),
            backend: Backend::Auto,
            device: DeviceSelector::Auto,
            size: (0, 0),
            ort_library: None,
            tuning: Tuning::default(),
            validation: false,
            threads: None,
            slots: 3,
            back_pressure: BackPressure::Block,
            frame_timeout: DEFAULT_FRAME_TIMEOUT,
            declared: Declarations::default(),
            tiling: None,
            memory_budget: None,
            default_kernels: true,
            tuning_forced: false,
            fast_start: true,
            precision: Precision::Auto,
            rewrite_graph: true,
            fuse_conv_act: None,
        }
    }

    /// Exact rewrites of the model's graph when it is loaded on the CUDA backend (on by
    /// default), cached beside the tune cache: a nearest-upsample skip
    /// (`Add(DepthToSpace(c), Resize(x, nearest))`, as in Real-ESRGAN's compact networks)
    /// folded into a 1×1 convolution before the DepthToSpace, in fp32 and fp16 models (ONNX
    /// Runtime's NHWC kernels have no Resize: it cost two transposes a frame; 0.39 ms of
    /// 3.24 for the bundled upscaler in fp16 at 540p on the H200). The result equals the
    /// original (tested on ONNX Runtime's CPU provider), and the model's inputs and outputs
    /// stay as they are. [`NeuralFrameContext::precision`]'s `rewrites` lists what applied.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").rewrite_graph(false).frame_size(960, 540).build()?;
    /// assert!(ctx.precision().rewrites.is_empty());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn rewrite_graph(mut self, on: bool) -> Self {
        self.rewrite_graph = on;
        self
    }

    /// Runs each convolution that a PReLU, LeakyReLU or ReLU follows, with its bias and that
    /// activation, as one fused cuDNN kernel on the CUDA backend (ONNX Runtime's CUDA provider
    /// fuses none of these in fp16). **On by default where the model runs in fp16** (an fp16
    /// model, or an fp32 one that [`Precision::Auto`] converts); `true` also applies it to a
    /// model that runs in fp32, `false` never. The graph is rewritten once at load, cached beside
    /// the tune cache, into `ai.neural_frame::ConvAct` nodes that run NHWC; the rewrite equals the
    /// original on ONNX Runtime's CPU provider. Each shape's first run times the plans cuDNN
    /// offers and keeps the fastest (cached too: seconds on a machine's first run, on a thread
    /// beside the first frames with [`fast_start`](Self::fast_start)). A model cuDNN refuses to
    /// fuse runs without the fused convolutions, said in the log and in
    /// [`NeuralFrameContext::precision`]'s `rewrites`, which also says whether it applied (without
    /// fast start, only at `build`: a later resize to a shape cuDNN cannot fuse fails that frame). The
    /// CPU backend ignores it (and says so when it was asked for). docs/fused-convolutions.md
    /// has the details and the measurements.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").fuse_conv_act(false).frame_size(960, 540).build()?;
    /// assert!(!ctx.precision().rewrites.iter().any(|r| r.contains("ConvAct")));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn fuse_conv_act(mut self, on: bool) -> Self {
        self.fuse_conv_act = Some(on);
        self
    }

    /// The precision the model runs in on the CUDA backend ([`Precision`]). With
    /// [`Precision::Auto`], the default, an fp32 model whose work is mostly convolutions
    /// and matrix products runs in fp16 when one probe frame through both on this GPU
    /// agrees within the tolerance (PSNR 45 dB and 16 of 255 on the 8-bit output); the
    /// converted model and the check are cached beside the tune cache, so both happen
    /// once. [`NeuralFrameContext::precision`] says what runs and why, and the context's
    /// [`contract`](NeuralFrameContext::contract) describes the tensors that run (f16 then).
    /// A check that cannot run, or a cache that cannot be written, keeps the model as it is,
    /// said in the log and the report. The CPU backend keeps the model's own precision.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Precision};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").precision(Precision::Fp32).frame_size(960, 540).build()?;
    /// assert_eq!(ctx.precision().running, "fp32");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Whether the first frames may run before cuDNN's fused kernels are built (on
    /// by default). With the bias fused ([`fuse_conv_bias`](Self::fuse_conv_bias),
    /// a default on CUDA), the model's first run makes cuDNN compile a fused plan for
    /// every convolution: about a second for an 18-convolution upscaler on the H200, and
    /// with the fused convolutions ([`fuse_conv_act`](Self::fuse_conv_act)) 6–8 s in the
    /// first process on a machine, which chooses their plans (about 0.4 s once cached).
    /// With fast start, `build` makes a session with the bias apart (cuDNN's
    /// precompiled kernels), which takes frames at once, and builds the fused session
    /// on a thread of its own, on a stream and buffers of its own; the context takes it
    /// over between two frames and logs it. Frames before that run slower, and may
    /// differ from the fused session's in the last bit of a channel:
    /// [`NeuralFrameContext::wait_settled`] waits for the takeover. Off (`false`), `build`
    /// itself runs the fused session once. Not in effect without the fused bias, on the
    /// CPU backend, or for a model with extra inputs or outputs.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// // A tool that compares results across runs byte for byte.
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").fast_start(false).frame_size(960, 540).build()?;
    /// assert!(!ctx.settling());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn fast_start(mut self, on: bool) -> Self {
        self.fast_start = on;
        self
    }

    /// Declares the model's tensor layout, where its shapes are ambiguous or
    /// its metadata says nothing (overrides metadata `neural_frame.layout`).
    ///
    /// ```no_run
    /// use neural_frame::{Layout, NeuralFrameContext};
    ///
    /// let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32-nhwc.onnx")
    ///     .layout(Layout::Nhwc)
    ///     .frame_size(64, 48)
    ///     .build()?;
    /// assert_eq!(ctx.contract().input.layout, Layout::Nhwc);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn layout(mut self, layout: Layout) -> Self {
        self.declared.all.layout = Some(layout);
        self
    }

    /// Declares the model's colour channel order (overrides metadata `neural_frame.color`; default RGB).
    ///
    /// ```no_run
    /// use neural_frame::{ColorOrder, NeuralFrameContext};
    ///
    /// let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
    ///     .color_order(ColorOrder::Bgr) // an OpenCV-trained model
    ///     .frame_size(64, 48)
    ///     .build()?;
    /// assert_eq!(ctx.contract().input.describe(), "NCHW BGR f32 [0, 1]");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn color_order(mut self, order: ColorOrder) -> Self {
        self.declared.all.color = Some(order);
        self
    }

    /// Declares the value range of the model's float tensors (overrides metadata
    /// `neural_frame.range` and `neural_frame.mean`/`std`; default [0, 1]). The pre
    /// pass maps colour values into it and the post pass back, on the GPU.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Normalization};
    ///
    /// let imagenet = Normalization::mean_std("0.485,0.456,0.406", "0.229,0.224,0.225").expect("three values each");
    /// let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
    ///     .normalization(imagenet)
    ///     .frame_size(64, 48)
    ///     .build()?;
    /// assert_eq!(ctx.contract().input.normalization, imagenet);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn normalization(mut self, normalization: Normalization) -> Self {
        self.declared.all.normalization = Some(normalization);
        self
    }

    /// Every declaration for all of the model's image tensors at once
    /// ([`TensorDeclaration`]; `None` fields are left to the model).
    ///
    /// ```no_run
    /// use neural_frame::{ColorOrder, NeuralFrameContext, TensorDeclaration};
    ///
    /// let bgr = TensorDeclaration { color: Some(ColorOrder::Bgr), ..Default::default() };
    /// let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").declare(bgr).frame_size(64, 48).build()?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn declare(mut self, declaration: TensorDeclaration) -> Self {
        self.declared.all = declaration;
        self
    }

    /// Runs frames as tiles of `tiling.tile` pixels, each with `tiling.overlap`
    /// pixels of context, through the ring like frames; the post pass blends the
    /// tiles' shared strips. Memory (the slot buffers and the model's own) is
    /// then bounded by the tile size, not the frame size. With an overlap of at
    /// least the model's receptive radius the result equals the untiled one.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Tiling};
    ///
    /// // An 8K frame through a ×4 model, 512×512 at a time.
    /// let ctx = NeuralFrameContext::builder("models/upscale-fp16.onnx")
    ///     .tiling(Tiling::new(512, 512, 24)?)
    ///     .frame_size(7680, 4320)
    ///     .build()?;
    /// assert_eq!(ctx.output_size(), (30720, 17280));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn tiling(mut self, tiling: Tiling) -> Self {
        self.tiling = Some(tiling);
        self
    }

    /// A memory budget for the slot buffers (the model's input, output and alpha
    /// tensors of every slot): a frame size whose buffers would exceed it runs in
    /// tiles, the largest square ones that fit, with an overlap of
    /// [`DEFAULT_TILE_OVERLAP`](crate::DEFAULT_TILE_OVERLAP). The model's own
    /// working memory (ONNX Runtime's) scales with the tile too, but is not counted.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .memory_budget(512 << 20) // 512 MiB
    ///     .frame_size(3840, 2160)
    ///     .build()?;
    /// if let Some((tiling, n)) = ctx.tiles() {
    ///     println!("{n} tiles of {:?}", tiling.tile);
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// A declaration for one of the model's tensors, by name: it wins over
    /// [`declare`](Self::declare) and its neighbours for that tensor (a depth
    /// input in [0, 1] beside a colour input in [−1, 1], say).
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Normalization, TensorDeclaration};
    ///
    /// let ctx = NeuralFrameContext::builder("models/test/tiny-x1-f32-color-depth.onnx")
    ///     .normalization(Normalization::Signed)
    ///     .declare_tensor("depth", TensorDeclaration { normalization: Some(Normalization::Unit), ..Default::default() })
    ///     .frame_size(64, 48)
    ///     .build()?;
    /// assert_eq!(ctx.contract().extra_inputs[0].kind.normalization, Normalization::Unit);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn declare_tensor(mut self, name: impl Into<String>, declaration: TensorDeclaration) -> Self {
        self.declared.per_tensor.insert(name.into(), declaration);
        self
    }

    /// Every tuning option at once.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Tuning};
    ///
    /// let tuning = Tuning { gpu_timestamps: false, ..Tuning::default() };
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").tuning(tuning).frame_size(960, 540).build()?;
    /// assert!(!ctx.tuning().gpu_timestamps);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn tuning(mut self, tuning: Tuning) -> Self {
        self.tuning_forced = true;
        self.tuning = tuning;
        self.default_kernels = false;
        self
    }
    /// Every CUDA option at once ([`CudaOptions`]; the other tuning options
    /// stay). As with [`tuning`](Self::tuning), they are the caller's choice:
    /// the tune cache is not read, and the context does not fall back from
    /// NHWC kernels or the fused bias that cuDNN refuses. Not in effect on the
    /// CPU backend ([`TuningInEffect::cuda`] is `None` there).
    ///
    /// ```no_run
    /// use neural_frame::{Backend, ConvSearch, CudaOptions, NeuralFrameContext};
    ///
    /// let cuda = CudaOptions { conv_search: ConvSearch::Exhaustive, cuda_graph: false, ..CudaOptions::default() };
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .backend(Backend::Cuda)
    ///     .cuda_options(cuda)
    ///     .fast_start(false) // the fused bias in effect from the first frame
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// assert_eq!(ctx.tuning().cuda, Some(cuda));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn cuda_options(mut self, cuda: CudaOptions) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda = cuda;
        self.default_kernels = false;
        self
    }
    /// Time the pre and post passes with Vulkan timestamp queries (default on;
    /// off: [`FrameStats`](crate::FrameStats)'s `pre_ms` and `post_ms` are NaN).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .gpu_timestamps(false)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let stats = ctx.infer(input, output)?;
    /// assert!(stats.pre_ms.is_nan() && stats.post_ms.is_nan());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn gpu_timestamps(mut self, on: bool) -> Self {
        self.tuning.gpu_timestamps = on;
        self
    }
    /// Wait for frames by polling on the host (a busy core) instead of sleeping
    /// in the driver: lower latency on retirement (default off).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").spin_wait(true).frame_size(960, 540).build()?;
    /// assert!(ctx.tuning().spin_wait);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn spin_wait(mut self, on: bool) -> Self {
        self.tuning_forced = true;
        self.tuning.spin_wait = on;
        self
    }
    /// Put the CUDA wait for each frame's "input ready" on a side stream and join
    /// the model's stream to it with an event (CUDA backend; default off), so the
    /// external-semaphore wait is never enqueued behind a running model. An
    /// experiment of the benchmark's (`--side-stream-wait`): see the README's
    /// "Measured" for what it changes.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").side_stream_wait(true).frame_size(960, 540).build()?;
    /// println!("side-stream wait in effect: {}", ctx.tuning().cuda.is_some_and(|c| c.side_stream_wait)); // no CUDA options off CUDA
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn side_stream_wait(mut self, on: bool) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.side_stream_wait = on;
        self
    }
    /// Run the pre and post passes as CUDA kernels on the model's stream instead
    /// of Vulkan compute passes (CUDA backend; default on). A frame then crosses
    /// between Vulkan and CUDA only where the caller's own semaphores ask for it
    /// ([`Frame::wait_for`](crate::Frame::wait_for),
    /// [`Frame::output_free_after`](crate::Frame::output_free_after)): CUDA
    /// signals "input consumed" and "output ready" itself, and the model's
    /// stream never waits for a Vulkan submission of the context's.
    ///
    /// Every frame whose memory CUDA reaches takes them: the context's own images,
    /// images and buffers imported by fd, the caller's images registered with their
    /// exportable memory, tiles, and extra inputs and outputs. A caller's image whose
    /// memory CUDA cannot reach (registered by handle alone) takes the Vulkan passes,
    /// said once when it is registered. Off CUDA it is not in effect
    /// ([`tuning`](crate::NeuralFrameContext::tuning) says so).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").cuda_passes(true).frame_size(960, 540).build()?;
    /// println!("CUDA passes in effect: {}", ctx.tuning().cuda.is_some_and(|c| c.cuda_passes)); // no CUDA options off CUDA
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn cuda_passes(mut self, on: bool) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.cuda_passes = on;
        self
    }
    /// Replay each slot's model run as a CUDA graph captured from ONNX Runtime's
    /// second run in that slot (CUDA backend; default on). The buffers of a slot
    /// stay at fixed addresses, so one capture per slot and frame size holds.
    /// Frames whose model reads or writes the caller's buffer itself run without a graph.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").cuda_graph(true).frame_size(960, 540).build()?;
    /// // Graphs exist only on the CUDA backend: the tuning says what runs.
    /// assert_eq!(ctx.tuning().cuda.is_some_and(|c| c.cuda_graph), ctx.backend_name() == "cuda");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn cuda_graph(mut self, on: bool) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.cuda_graph = on;
        self
    }
    /// Where the post pass waits for the model (CUDA backend; default [`PostWait::Gpu`]).
    /// [`PostWait::Host`] is refused on a caller's device with a single queue
    /// on the CUDA backend (it would deadlock it).
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, PostWait};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .post_wait(PostWait::Host)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// # let _ = ctx;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn post_wait(mut self, wait: PostWait) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.post_wait = wait;
        self
    }
    /// Frames in flight: slots in the ring (default 3, at least 1).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").slots(1).frame_size(960, 540).build()?;
    /// assert_eq!(ctx.slot_count(), 1); // one frame at a time, the least device memory
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn slots(mut self, n: usize) -> Self {
        self.slots = n.max(1);
        self
    }
    /// What [`NeuralFrameContext::submit`] does when every slot is busy (default: block).
    ///
    /// ```no_run
    /// use neural_frame::{BackPressure, NeuralFrameContext};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .back_pressure(BackPressure::Skip)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// # let _ = ctx;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn back_pressure(mut self, policy: BackPressure) -> Self {
        self.back_pressure = policy;
        self
    }
    /// The bound on every host wait for a frame (default 30 s): a wait that runs
    /// out is an [`ErrorKind::Timeout`](crate::ErrorKind::Timeout), never a hang.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .frame_timeout(Duration::from_secs(2)) // a renderer that must not hang for long
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// # let _ = ctx;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn frame_timeout(mut self, timeout: Duration) -> Self {
        self.frame_timeout = timeout;
        self
    }
    /// Which backend (default [`Backend::Auto`]).
    ///
    /// ```no_run
    /// use neural_frame::{Backend, NeuralFrameContext};
    ///
    /// // Insist on the CPU backend (a reference run, or no GPU).
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .backend(Backend::Cpu)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// assert_eq!(ctx.backend_name(), "cpu");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    /// Which Vulkan device the context creates its own device on (default: the
    /// first suitable one; with import by file descriptor, the renderer's, by
    /// [`DeviceSelector::Uuid`]). The CUDA device is always found by UUID.
    ///
    /// ```no_run
    /// use neural_frame::{DeviceSelector, NeuralFrameContext};
    ///
    /// let gpu: DeviceSelector =
    ///     "GPU-73ca0102-0304-0506-0708-090a0b0c0d77".parse().map_err(neural_frame::Error::InvalidArgument)?;
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").device(gpu).frame_size(960, 540).build()?;
    /// println!("on {}", ctx.report().vulkan_device);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn device(mut self, device: DeviceSelector) -> Self {
        self.device = device;
        self
    }
    /// The frame size (width, height) of the input images (required: a context
    /// of 0×0 is refused). Change it later with [`NeuralFrameContext::resize`].
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// assert_eq!(ctx.frame_size(), (960, 540));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn frame_size(mut self, width: u32, height: u32) -> Self {
        self.size = (width, height);
        self
    }
    /// An explicit ONNX Runtime library (otherwise: `ORT_DYLIB_PATH`, `.runtime/`, Python).
    /// ONNX Runtime is loaded once per process: the first context's choice holds.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .ort_library(".runtime/ort-cpu/onnxruntime/capi/libonnxruntime.so.1.31.1")
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// println!("ONNX Runtime {} from {}", ctx.report().runtime.version, ctx.report().runtime.library.display());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn ort_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.ort_library = Some(path.into());
        self
    }
    /// cuDNN's convolution algorithm search (CUDA backend).
    ///
    /// ```no_run
    /// use neural_frame::{ConvSearch, NeuralFrameContext};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .conv_search(ConvSearch::Default)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// if let Some(cuda) = ctx.tuning().cuda {
    ///     assert_eq!(cuda.conv_search, ConvSearch::Default);
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn conv_search(mut self, search: ConvSearch) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.conv_search = search;
        self
    }
    /// Ask the CUDA provider to prefer NHWC kernels (faster for fp16 models on recent GPUs).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale-fp16.onnx")
    ///     .prefer_nhwc(true)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// assert!(ctx.tuning().cuda.is_none_or(|c| c.prefer_nhwc)); // `cuda` is None off the CUDA backend
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn prefer_nhwc(mut self, on: bool) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.prefer_nhwc = on;
        // Fusing needs NHWC: without NHWC kernels the default fusion goes too.
        self.tuning.cuda.fuse_conv_bias &= on;
        self.default_kernels = false;
        self
    }
    /// Ask the CUDA provider to fuse each convolution's bias add into the
    /// convolution (its `fuse_conv_bias` option: cuDNN's runtime-fused kernels),
    /// instead of a separate broadcast add after each. cuDNN fuses NHWC tensors
    /// only, so it needs [`prefer_nhwc`](Self::prefer_nhwc): `build` refuses it
    /// alone. On the H200 it takes realesr-animevideov3 fp16 at 960×540 from 5.0
    /// to 3.4 ms (README, "Measured"). Off CUDA it is not in effect.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale-fp16.onnx")
    ///     .prefer_nhwc(true)
    ///     .fuse_conv_bias(true)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// println!("bias fused: {}", ctx.tuning().cuda.is_some_and(|c| c.fuse_conv_bias)); // no CUDA options off CUDA
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn fuse_conv_bias(mut self, on: bool) -> Self {
        self.tuning_forced = true;
        self.tuning.cuda.fuse_conv_bias = on;
        self.default_kernels = false;
        self
    }
    /// Run the context's own Vulkan instance under the Khronos validation layer
    /// and count its errors ([`NeuralFrameContext::validation_errors`]). With
    /// [`build_on`](Self::build_on), validation is the caller's instance's.
    /// `build` fails, [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported),
    /// where the layer is not installed.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").validation(true).frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// assert_eq!(ctx.validation_errors(), 0);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn validation(mut self, on: bool) -> Self {
        self.validation = on;
        self
    }
    /// CPU threads for ONNX Runtime's CPU provider (default: ONNX Runtime's choice).
    ///
    /// ```no_run
    /// use neural_frame::{Backend, NeuralFrameContext};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .backend(Backend::Cpu)
    ///     .threads(4) // leave the other cores to the renderer
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// # let _ = ctx;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// Loads ONNX Runtime and the model, creates the context's own Vulkan
    /// device, chooses the backend, and allocates the frame's buffers.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let report = ctx.report();
    /// println!("{} backend on {}, ONNX Runtime {}", report.backend, report.vulkan_device, report.runtime.version);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn build(self) -> Result<NeuralFrameContext> {
        NeuralFrameContext::new(self, None)
    }

    /// Like [`build`](Self::build), on the caller's Vulkan device and queue
    /// ("bring your own device"): the context then takes the caller's images,
    /// buffers and timeline semaphores by handle
    /// ([`register_input_image`](NeuralFrameContext::register_input_image) and friends).
    ///
    /// # Safety
    /// - Every handle in `device` is valid, `device.device` was created from
    ///   `device.instance` on `device.physical_device` with the
    ///   `timelineSemaphore` feature and the extensions its flags claim, and
    ///   `device.queue` belongs to `device.queue_family_index`.
    /// - The instance and device outlive the context, every registration made
    ///   on it and every value it returns.
    /// - The caller submits to `device.queue` only while holding
    ///   `device.queue_lock` (or, without a lock, never while a call on the
    ///   context runs).
    ///
    /// ```no_run
    /// use neural_frame::{CallerDevice, NeuralFrameContext, SyncMode};
    ///
    /// # fn renderer(device: CallerDevice) -> neural_frame::Result<()> {
    /// // SAFETY: `device` describes the renderer's live instance, device and queue, which
    /// // outlive the context; the renderer submits to the queue only under `device.queue_lock`.
    /// let ctx = unsafe { NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build_on(device) }?;
    /// assert_eq!(ctx.sync_mode(), SyncMode::Gpu); // always, on the caller's device
    /// # Ok(()) }
    /// ```
    pub unsafe fn build_on(self, device: CallerDevice) -> Result<NeuralFrameContext> {
        NeuralFrameContext::new(self, Some(device))
    }
}
