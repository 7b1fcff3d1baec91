//! How a context runs the model and the hand-off: the options of every
//! backend ([`Tuning`]), the CUDA backend's own ([`CudaOptions`]), what a
//! context runs with ([`TuningInEffect`]), and where the post pass waits ([`PostWait`]).

use serde::{Deserialize, Serialize};

use crate::graph::precision::Precision;
pub use crate::graph::prepare::ModelOptions;
use crate::onnx::ConvSearch;

/// How the post pass of a frame learns that the model is done (CUDA backend).
///
/// ```no_run
/// use neural_frame::{Backend, CudaOptions, NeuralFrameContext, PostWait};
///
/// // Lower latency one frame at a time: no Vulkan submission waits on CUDA.
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .backend(Backend::Cuda)
///     .cuda_options(CudaOptions::default().with_post_wait(PostWait::Host))
///     .frame_size(960, 540)
///     .build()?;
/// assert_eq!(ctx.tuning().cuda.map(|c| c.handover.post_wait), Some(PostWait::Host));
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PostWait {
    /// The post pass is submitted with the frame and waits on the GPU for the
    /// model: nothing on the host waits before retirement.
    #[default]
    Gpu,
    /// The post pass is submitted only once the host has seen the model finish:
    /// by the next `submit`, or by a wait for that frame. No Vulkan submission
    /// sits blocked on a semaphore while CUDA runs the model.
    Host,
}

/// Every option of the CUDA backend, in three groups: ONNX Runtime's CUDA provider
/// ([`ProviderOptions`]), the hand-over between Vulkan and CUDA ([`HandoverOptions`]) and the
/// model's preparation ([`ModelOptions`]). None of them is in effect on the CPU backend.
///
/// Made with its `with_*` setters from the defaults, and given whole to
/// [`ContextBuilder::cuda_options`](crate::ContextBuilder::cuda_options); serialised (serde) as
/// the tune cache stores it and as `neural-frame serve` hands it to a worker. Where an option of
/// the provider or the hand-over keeps its default value, the tune cache's choice for the
/// model, GPU and frame size replaces it (`neural-frame tune`); where NHWC kernels and the fused
/// bias keep theirs and cuDNN refuses them for the model, the context runs without them,
/// announced.
///
/// ```no_run
/// use neural_frame::{CudaOptions, NeuralFrameContext, PostWait, Precision};
///
/// // The post pass waits on the host; CUDA graphs off; the model in fp32; the rest the defaults.
/// let cuda = CudaOptions::default().with_post_wait(PostWait::Host).with_cuda_graph(false).with_precision(Precision::Fp32);
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").cuda_options(cuda).frame_size(960, 540).build()?;
/// match ctx.tuning().cuda {
///     Some(in_effect) => println!("CUDA backend: {in_effect:?}"),
///     None => println!("the CUDA options are not in effect on the {} backend", ctx.backend_name()),
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct CudaOptions {
    /// ONNX Runtime's CUDA provider.
    #[serde(flatten)]
    pub provider: ProviderOptions,
    /// The hand-over between Vulkan and CUDA.
    #[serde(flatten)]
    pub handover: HandoverOptions,
    /// The model's preparation.
    #[serde(flatten)]
    pub model: ModelOptions,
}

/// The options of ONNX Runtime's CUDA provider ([`CudaOptions::provider`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// cuDNN's convolution algorithm search.
    pub conv_search: ConvSearch,
    /// The provider prefers NHWC kernels.
    pub prefer_nhwc: bool,
    /// The provider fuses each convolution's bias into it (cuDNN's fused NHWC kernels; needs `prefer_nhwc`).
    pub fuse_conv_bias: bool,
    /// Each slot's model run is replayed as a captured CUDA graph.
    pub cuda_graph: bool,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        // The fastest correct configuration measured (docs/performance.md): NHWC kernels with
        // the bias fused, and CUDA graphs.
        Self { conv_search: ConvSearch::Heuristic, prefer_nhwc: true, fuse_conv_bias: true, cuda_graph: true }
    }
}

/// The options of the hand-over between Vulkan and CUDA ([`CudaOptions::handover`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HandoverOptions {
    /// Where a Vulkan post pass waits for the model.
    pub post_wait: PostWait,
    /// The CUDA wait for each frame's input goes on a side stream, joined by an event.
    pub side_stream_wait: bool,
    /// The pre and post passes run as CUDA kernels on the model's stream.
    pub cuda_passes: bool,
}

impl Default for HandoverOptions {
    fn default() -> Self {
        Self { post_wait: PostWait::Gpu, side_stream_wait: false, cuda_passes: true }
    }
}

impl CudaOptions {
    /// cuDNN's convolution algorithm search ([`ConvSearch`]; default heuristic).
    ///
    /// ```
    /// use neural_frame::{ConvSearch, CudaOptions};
    /// assert_eq!(CudaOptions::default().with_conv_search(ConvSearch::Exhaustive).provider.conv_search, ConvSearch::Exhaustive);
    /// ```
    #[must_use]
    pub fn with_conv_search(mut self, search: ConvSearch) -> Self {
        self.provider.conv_search = search;
        self
    }

    /// The provider's NHWC kernels (default on). Off also turns the fused bias off, which needs them.
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// let o = CudaOptions::default().with_prefer_nhwc(false);
    /// assert!(!o.provider.prefer_nhwc && !o.provider.fuse_conv_bias);
    /// ```
    #[must_use]
    pub fn with_prefer_nhwc(mut self, on: bool) -> Self {
        self.provider.prefer_nhwc = on;
        self.provider.fuse_conv_bias &= on;
        self
    }

    /// Each convolution's bias fused into it by cuDNN (default on; needs `prefer_nhwc`, else `build` refuses it).
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert!(!CudaOptions::default().with_fuse_conv_bias(false).provider.fuse_conv_bias);
    /// ```
    #[must_use]
    pub fn with_fuse_conv_bias(mut self, on: bool) -> Self {
        self.provider.fuse_conv_bias = on;
        self
    }

    /// Each slot's model run replayed as a captured CUDA graph (default on; a model that cannot be
    /// captured runs without one, announced).
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert!(!CudaOptions::default().with_cuda_graph(false).provider.cuda_graph);
    /// ```
    #[must_use]
    pub fn with_cuda_graph(mut self, on: bool) -> Self {
        self.provider.cuda_graph = on;
        self
    }

    /// Where a Vulkan post pass waits for the model ([`PostWait`]; default on the GPU): with
    /// the CUDA passes off, or for a frame they cannot take.
    ///
    /// ```
    /// use neural_frame::{CudaOptions, PostWait};
    /// assert_eq!(CudaOptions::default().with_post_wait(PostWait::Host).handover.post_wait, PostWait::Host);
    /// ```
    #[must_use]
    pub fn with_post_wait(mut self, wait: PostWait) -> Self {
        self.handover.post_wait = wait;
        self
    }

    /// The CUDA wait for each frame's input on a side stream, joined by an event (default off).
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert!(CudaOptions::default().with_side_stream_wait(true).handover.side_stream_wait);
    /// ```
    #[must_use]
    pub fn with_side_stream_wait(mut self, on: bool) -> Self {
        self.handover.side_stream_wait = on;
        self
    }

    /// The pre and post passes as CUDA kernels on the model's stream (default on, for every
    /// frame whose memory CUDA can import); off: Vulkan compute passes.
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert!(!CudaOptions::default().with_cuda_passes(false).handover.cuda_passes);
    /// ```
    #[must_use]
    pub fn with_cuda_passes(mut self, on: bool) -> Self {
        self.handover.cuda_passes = on;
        self
    }

    /// The precision the model runs in ([`Precision`]; default auto: an fp32 model whose work is
    /// mostly convolutions runs in fp16 where one probe frame agrees within PSNR 45 dB and 16 of
    /// 255; the conversion and the check are cached). [`NeuralFrameContext::precision`](crate::NeuralFrameContext::precision) says what runs and why.
    ///
    /// ```
    /// use neural_frame::{CudaOptions, Precision};
    /// assert_eq!(CudaOptions::default().with_precision(Precision::Fp32).model.precision, Precision::Fp32);
    /// ```
    #[must_use]
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.model.precision = precision;
        self
    }

    /// Exact rewrites of the model's graph at load (default on): a nearest-upsample skip, as in
    /// Real-ESRGAN's compact networks, folded into a 1×1 convolution (ONNX Runtime's NHWC kernels
    /// have no Resize). Cached beside the tune cache; the model's inputs and outputs stay.
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert!(!CudaOptions::default().with_rewrite_graph(false).model.rewrite_graph);
    /// ```
    #[must_use]
    pub fn with_rewrite_graph(mut self, on: bool) -> Self {
        self.model.rewrite_graph = on;
        self
    }

    /// Each convolution that a PReLU, LeakyReLU or ReLU follows, with its bias and that activation,
    /// as one fused cuDNN kernel (`true` always, `false` never; by default where the model runs in
    /// fp16). A model cuDNN refuses runs without, announced; docs/fused-convolutions.md.
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert_eq!(CudaOptions::default().model.fuse_conv_act, None);
    /// assert_eq!(CudaOptions::default().with_fuse_conv_act(false).model.fuse_conv_act, Some(false));
    /// ```
    #[must_use]
    pub fn with_fuse_conv_act(mut self, on: bool) -> Self {
        self.model.fuse_conv_act = Some(on);
        self
    }

    /// Whether the first frames may run before cuDNN's fused kernels are built (default on):
    /// `build` makes a session with the bias apart that takes frames at once, and builds the
    /// fused one on a thread of its own, which takes over between two frames
    /// ([`NeuralFrameContext::wait_settled`](crate::NeuralFrameContext::wait_settled)). Off: `build` runs the fused session once itself.
    ///
    /// ```
    /// use neural_frame::CudaOptions;
    /// assert!(!CudaOptions::default().with_fast_start(false).model.fast_start);
    /// ```
    #[must_use]
    pub fn with_fast_start(mut self, on: bool) -> Self {
        self.model.fast_start = on;
        self
    }

    /// Whether the provider's kernels are the defaults (NHWC with the bias fused): then a
    /// model cuDNN refuses them for runs without them, announced.
    pub(crate) fn default_kernels(&self) -> bool {
        let d = ProviderOptions::default();
        (self.provider.prefer_nhwc, self.provider.fuse_conv_bias) == (d.prefer_nhwc, d.fuse_conv_bias)
    }

    /// Whether every option the tune cache chooses keeps its default value.
    pub(crate) fn tunable(&self) -> bool {
        let d = Self::default();
        self.provider == d.provider && self.handover == d.handover
    }
}

/// How a context runs the model and the hand-off, as the caller asks for it
/// ([`ContextBuilder::tuning`](crate::ContextBuilder::tuning)): the options of every backend, and the CUDA
/// backend's own ([`CudaOptions`]). Each field has a [`ContextBuilder`](crate::ContextBuilder) setter
/// of the same name; the defaults are the builder's. What a context runs with
/// is its [`TuningInEffect`] ([`NeuralFrameContext::tuning`](crate::NeuralFrameContext::tuning)). Serialised flat:
/// the fields of [`CudaOptions`] beside the others.
///
/// ```no_run
/// use neural_frame::{CudaOptions, NeuralFrameContext, Tuning};
///
/// // NHWC kernels and CUDA graphs: faster for fp16 on the CUDA backend (README, "Measured").
/// let cuda = CudaOptions::default().with_prefer_nhwc(true).with_cuda_graph(true);
/// let fast = Tuning { spin_wait: true, cuda, ..Tuning::default() };
/// let ctx = NeuralFrameContext::builder("models/upscale-fp16.onnx").tuning(fast).frame_size(960, 540).build()?;
/// // What runs: the CUDA options only on the CUDA backend.
/// println!("{:?}", ctx.tuning());
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Tuning {
    /// The pre and post passes are timed with Vulkan timestamp queries.
    pub gpu_timestamps: bool,
    /// Frames are waited for by polling instead of sleeping in the driver.
    pub spin_wait: bool,
    /// The CUDA backend's options (not in effect on the CPU backend).
    #[serde(flatten)]
    pub cuda: CudaOptions,
}

impl Default for Tuning {
    fn default() -> Self {
        Self { gpu_timestamps: true, spin_wait: false, cuda: CudaOptions::default() }
    }
}

/// The tuning a context runs with ([`NeuralFrameContext::tuning`](crate::NeuralFrameContext::tuning)): what the
/// caller asked for ([`Tuning`]), the tune cache's choice, or the defaults,
/// less what the context could not put in effect. `cuda` is `None` off the
/// CUDA backend, where no CUDA option is in effect; on it, an option the model
/// or the moment does not allow reads as off (CUDA graphs for a model with
/// outputs that are not images; the fused bias while fast start builds the
/// fused session). Serialised flat, as [`Tuning`] is, without the fields of
/// [`CudaOptions`] where `cuda` is `None`.
///
/// ```no_run
/// use neural_frame::{Backend, NeuralFrameContext};
///
/// let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
///     .backend(Backend::Cpu)
///     .map_cuda_options(|c| c.with_cuda_graph(false)) // asked for, and not in effect on the CPU backend
///     .spin_wait(true)
///     .frame_size(64, 48)
///     .build()?;
/// let tuning = ctx.tuning();
/// assert_eq!(tuning.cuda, None, "no CUDA option is in effect on the CPU backend");
/// assert!(tuning.spin_wait && tuning.gpu_timestamps);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TuningInEffect {
    /// The pre and post passes are timed with Vulkan timestamp queries (as
    /// asked: a queue family that writes no timestamps leaves them unmeasured, said in the log).
    pub gpu_timestamps: bool,
    /// Frames are waited for by polling instead of sleeping in the driver.
    pub spin_wait: bool,
    /// The CUDA options in effect: `None` off the CUDA backend.
    #[serde(flatten)]
    pub cuda: Option<CudaOptions>,
}
