//! How a context runs the model and the hand-off: the options of every
//! backend ([`Tuning`]), the CUDA backend's own ([`CudaOptions`]), what a
//! context runs with ([`TuningInEffect`]), and where the post pass waits ([`PostWait`]).

use serde::Serialize;

use crate::onnx::ConvSearch;

/// How the post pass of a frame learns that the model is done (CUDA backend).
///
/// ```no_run
/// use neural_frame::{Backend, NeuralFrameContext, PostWait};
///
/// // Lower latency one frame at a time: no Vulkan submission waits on CUDA.
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .backend(Backend::Cuda)
///     .post_wait(PostWait::Host)
///     .frame_size(960, 540)
///     .build()?;
/// assert_eq!(ctx.tuning().cuda.map(|c| c.post_wait), Some(PostWait::Host));
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
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

/// The options of ONNX Runtime's CUDA execution provider and of the CUDA
/// hand-off: in effect on the CUDA backend only. Each field has a
/// [`ContextBuilder`](crate::ContextBuilder) setter of the same name, or set them all at once with
/// [`ContextBuilder::cuda_options`](crate::ContextBuilder::cuda_options); the defaults are the builder's.
///
/// ```no_run
/// use neural_frame::{CudaOptions, NeuralFrameContext, PostWait};
///
/// // The post pass waits on the host; CUDA graphs off; the rest the defaults.
/// let cuda = CudaOptions { post_wait: PostWait::Host, cuda_graph: false, ..CudaOptions::default() };
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").cuda_options(cuda).frame_size(960, 540).build()?;
/// match ctx.tuning().cuda {
///     Some(in_effect) => println!("CUDA backend: {in_effect:?}"),
///     None => println!("the CUDA options are not in effect on the {} backend", ctx.backend_name()),
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CudaOptions {
    /// cuDNN's convolution algorithm search.
    pub conv_search: ConvSearch,
    /// The CUDA provider prefers NHWC kernels.
    pub prefer_nhwc: bool,
    /// The CUDA provider fuses each convolution's bias into it (cuDNN's fused NHWC kernels; with `prefer_nhwc`).
    pub fuse_conv_bias: bool,
    /// Each slot's model run is replayed as a captured CUDA graph.
    pub cuda_graph: bool,
    /// Where the post pass waits for the model.
    pub post_wait: PostWait,
    /// The CUDA wait for each frame's input goes on a side stream, joined by an event.
    pub side_stream_wait: bool,
    /// The pre and post passes run as CUDA kernels on the model's stream.
    pub cuda_passes: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        // The fastest correct configuration measured on the H200 (README, "Measured"):
        // NHWC kernels with the bias fused, CUDA graphs and the passes as CUDA kernels.
        Self {
            conv_search: ConvSearch::Heuristic,
            prefer_nhwc: true,
            fuse_conv_bias: true,
            cuda_graph: true,
            post_wait: PostWait::Gpu,
            side_stream_wait: false,
            cuda_passes: true,
        }
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
/// let cuda = CudaOptions { prefer_nhwc: true, cuda_graph: true, ..CudaOptions::default() };
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
///     .cuda_graph(true) // asked for, and not in effect on the CPU backend
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
