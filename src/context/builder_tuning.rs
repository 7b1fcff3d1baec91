//! [`ContextBuilder`]'s tuning: every option at once ([`Tuning`]), the CUDA backend's
//! ([`CudaOptions`]: the provider's, the hand-over's and the model's preparation), and the
//! two of every backend (GPU timestamps, spin waits).

use crate::context::ContextBuilder;
use crate::context::tuning::{CudaOptions, Tuning};

impl ContextBuilder {
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
    /// The CUDA backend's options, whole ([`CudaOptions`]: the provider's, the hand-over's
    /// and the model's preparation; the other tuning options stay). An option of the provider
    /// or the hand-over changed from its default is the caller's choice: the tune cache is not
    /// read. NHWC kernels or a fused bias set away from their defaults are not fallen back
    /// from where cuDNN refuses them. Not in effect on the CPU backend
    /// ([`TuningInEffect::cuda`](crate::TuningInEffect::cuda) is `None` there, and options the
    /// caller changed are said in the log).
    ///
    /// ```no_run
    /// use neural_frame::{Backend, ConvSearch, CudaOptions, NeuralFrameContext};
    ///
    /// // The fused bias in effect from the first frame (no fast start), cuDNN's exhaustive search.
    /// let cuda = CudaOptions::default().with_conv_search(ConvSearch::Exhaustive).with_cuda_graph(false).with_fast_start(false);
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .backend(Backend::Cuda)
    ///     .cuda_options(cuda)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// assert_eq!(ctx.tuning().cuda.map(|c| c.provider), Some(cuda.provider));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn cuda_options(mut self, cuda: CudaOptions) -> Self {
        self.tuning_forced |= !cuda.tunable();
        self.default_kernels = cuda.default_kernels();
        self.tuning.cuda = cuda;
        self
    }
    /// The CUDA options changed by `change` from what the builder holds, then given whole as
    /// [`cuda_options`](Self::cuda_options) gives them.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, PostWait, Precision};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .map_cuda_options(|c| c.with_precision(Precision::Fp32).with_post_wait(PostWait::Host))
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// println!("{}", ctx.precision().running);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn map_cuda_options(self, change: impl FnOnce(CudaOptions) -> CudaOptions) -> Self {
        let cuda = change(self.tuning.cuda);
        self.cuda_options(cuda)
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

    /// The builder with its CUDA options changed by `change`, as the context's own fallbacks
    /// make them: forced (the tune cache is not read again, and there is no second fallback).
    pub(crate) fn with_cuda(mut self, change: impl FnOnce(CudaOptions) -> CudaOptions) -> Self {
        self.tuning.cuda = change(self.tuning.cuda);
        self.tuning_forced = true;
        self.default_kernels = false;
        self
    }
}
