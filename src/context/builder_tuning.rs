//! [`ContextBuilder`]'s options for how the model runs: its precision, the graph rewrites
//! (the skip's fold, the fused convolutions), fast start, and the tuning (the CUDA
//! provider's kernels, CUDA graphs, the passes and the waits).

use crate::context::ContextBuilder;
use crate::context::tuning::{CudaOptions, PostWait, Tuning};
use crate::graph::precision::Precision;
use crate::onnx::ConvSearch;

impl ContextBuilder {
    /// Exact rewrites of the model's graph when it is loaded on the CUDA backend (on by
    /// default), cached beside the tune cache: a nearest-upsample skip
    /// (`Add(DepthToSpace(c), Resize(x, nearest))`, as in Real-ESRGAN's compact networks)
    /// folded into a 1×1 convolution before the DepthToSpace, in fp32 and fp16 models (ONNX
    /// Runtime's NHWC kernels have no Resize: it cost two transposes a frame; 0.39 ms of
    /// 3.24 for the bundled upscaler in fp16 at 540p on the H200). The result equals the
    /// original (tested on ONNX Runtime's CPU provider), and the model's inputs and outputs
    /// stay as they are. [`NeuralFrameContext::precision`](crate::NeuralFrameContext::precision)'s `rewrites` lists what applied.
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
    /// the tune cache, into `ai.neural_frame::ConvAct` nodes that run NHWC (and each
    /// `DepthToSpace` after them into an `ai.neural_frame::DepthToSpace` node that reads NHWC and
    /// writes NCHW, with the `Add` before it); the rewrite equals the original on ONNX Runtime's
    /// CPU provider. Each shape's first run times the plans cuDNN
    /// offers and keeps the fastest (cached too: seconds on a machine's first run, on a thread
    /// beside the first frames with [`fast_start`](Self::fast_start)). A model cuDNN refuses to
    /// fuse runs without the fused convolutions, said in the log and in
    /// [`NeuralFrameContext::precision`](crate::NeuralFrameContext::precision)'s `rewrites`, which also says whether it applied (without
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
    /// once. [`NeuralFrameContext::precision`](crate::NeuralFrameContext::precision) says what runs and why, and the context's
    /// [`contract`](crate::NeuralFrameContext::contract) describes the tensors that run (f16 then).
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
    /// [`NeuralFrameContext::wait_settled`](crate::NeuralFrameContext::wait_settled) waits for the takeover. Off (`false`), `build`
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
    /// CPU backend ([`TuningInEffect::cuda`](crate::TuningInEffect::cuda) is `None` there).
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
}
