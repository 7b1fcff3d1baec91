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
use crate::onnx::{ColorOrder, Layout, Normalization, TensorDeclaration};
use crate::vulkan::DeviceSelector;

pub use crate::context::tuning::{
    CudaOptions, HandoverOptions, ModelOptions, PostWait, ProviderOptions, Tuning, TuningInEffect,
};

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
        }
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
