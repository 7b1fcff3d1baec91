//! [`NeuralFrameContext`]: a model on a Vulkan device, and everything a frame
//! needs on its way input → pre pass → ONNX Runtime → post pass → output.
//!
//! The parts, each in a file of its own: [`builder`] (what a context is made
//! with), [`setup`] (instance, device, backend choice), [`ring`] (the slot
//! state machine, pure), [`slots`] (a slot's buffers and device limits),
//! [`registry`], [`register`] and [`import`] (registered inputs, outputs and timelines),
//! [`record`] (one frame's commands), [`frame`] (submit, retire, waits),
//! [`passes`] (the compute pipelines), [`backend`] (CUDA or host), and, behind
//! the `diagnostics` feature, the benchmark's probes.

pub(crate) mod backend;
pub(crate) mod builder;
pub(crate) mod caller;
#[cfg(feature = "diagnostics")]
pub(crate) mod diagnostics;
pub(crate) mod faststart;
pub(crate) mod foreign;
pub(crate) mod frame;
pub(crate) mod import;
pub(crate) mod passes;
pub(crate) mod plan;
pub(crate) mod record;
pub(crate) mod register;
pub(crate) mod registry;
pub(crate) mod resolve;
pub(crate) mod ring;
pub(crate) mod setup;
pub(crate) mod slots;
pub(crate) mod sync;
pub(crate) mod tiles;

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::context::backend::{CudaEngine, Engine, HostEngine, Timelines};
use crate::context::passes::Passes;
use crate::context::registry::Registry;
use crate::context::ring::Ring;
use crate::context::setup::BackendReport;
use crate::context::slots::{FrameSize, Slot, SlotTensors};
use crate::context::sync::SyncMode;
use crate::cuda;
use crate::error::{Error, ErrorKind, Result};
use crate::interop::SharedTimeline;
use crate::onnx::session::{Provider, SessionConfig};
use crate::onnx::{Binding, ModelContract, session};
use crate::vulkan::command::CommandPool;
use crate::vulkan::query::TimestampPool;
use crate::vulkan::sync::Fence;
use crate::vulkan::{Device, Instance};

pub use builder::{BackPressure, Backend, ContextBuilder, CudaOptions, PostWait, Tuning, TuningInEffect};
use foreign::CallerDevice;

/// Everything that holds GPU objects, in teardown order: registrations (views,
/// descriptor sets, the caller's imported memory and its CUDA mappings), the
/// slots (ONNX Runtime bindings and tensor values, then their buffers and CUDA
/// mappings), the engine (the session before the CUDA stream it runs on), the
/// timelines (CUDA imports before the Vulkan semaphores), queries, the command
/// pool, the passes, then the device and the instance.
struct Resources {
    registry: Registry,
    slots: Vec<Slot>,
    engine: Engine,
    timelines: Timelines,
    queries: Option<TimestampPool>,
    pool: CommandPool,
    passes: Passes,
    device: Arc<Device>,
    _instance: Arc<Instance>,
}

/// A model on a Vulkan device for one frame size: turns registered inputs into
/// registered outputs through a ring of slots (frames in flight).
///
/// Build one with [`NeuralFrameContext::builder`]. Register what frames come
/// from and go to once (images the context creates, the caller's images and
/// buffers by handle on its own device, or its exported memory by file
/// descriptor), then [`submit`](Self::submit) frames by handle and hand the
/// returned ticket's semaphores to the renderer, or [`infer`](Self::infer) one
/// frame and wait.
///
/// ```no_run
/// use ash::vk;
/// use neural_frame::{Backend, NeuralFrameContext};
///
/// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .backend(Backend::Auto) // CUDA where possible, else the CPU backend, announced
///     .frame_size(960, 540)
///     .build()?;
/// let input = ctx.create_input_image(vk::Format::B8G8R8A8_UNORM)?;
/// let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
/// ctx.upload(input, &vec![200; 960 * 540 * 4])?;
/// let stats = ctx.infer(input, output)?;
/// println!("model {:.2} ms on the {} backend", stats.infer_ms, ctx.backend_name());
/// # Ok::<(), neural_frame::Error>(())
/// ```
///
/// The context is `Send`: it may move to another thread, and is used from one
/// thread at a time (`&mut self`).
pub struct NeuralFrameContext {
    res: ManuallyDrop<Resources>,
    ring: Ring,
    contract: ModelContract,
    report: BackendReport,
    model: PathBuf,
    tuning: TuningInEffect,
    back_pressure: BackPressure,
    frame_timeout: Duration,
    sync_mode: SyncMode,
    /// The slot tensors' size: a tile's, or the whole frame's.
    size: Option<FrameSize>,
    /// The caller's frame: its size, its output's, and its tiles.
    frame: Option<Geometry>,
    /// The builder's tiling, and the memory budget that turns tiling on by itself.
    tiling: Option<tiles::Tiling>,
    memory_budget: Option<u64>,
    /// Counts re-allocations of the slot buffers: recorded passes of an older one are stale.
    generation: u64,
    /// CPU backend: a barrier that makes device writes visible to host reads, for
    /// frames whose model reads the caller's buffer itself.
    host_visibility: Option<ash::vk::CommandBuffer>,
    /// Why the context takes no more frames (work of a failed frame may still be pending).
    poisoned: Option<String>,
    /// Fast start: the fused session being built beside the first frames.
    fused: Option<faststart::Pending>,
    id: u64,
}

// SAFETY: every GPU object the context holds is owned by it alone and used only
// through `&mut self` (or `&self` for read-only queries that Vulkan and CUDA allow
// from any thread): Vulkan handles may be used from any thread with external
// synchronisation, which `&mut self` gives (queues are additionally locked); CUDA
// calls bind the context's CUDA context to the calling thread first; ONNX Runtime
// sessions, bindings and values may be used from any thread one call at a time.
unsafe impl Send for NeuralFrameContext {}

/// The caller's frame size, its output's, and how it is cut into tiles.
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) out_width: u32,
    pub(crate) out_height: u32,
    pub(crate) layout: tiles::TileLayout,
    /// The tiling in force (the builder's, or one the memory budget chose), if any.
    pub(crate) tiling: Option<tiles::Tiling>,
}

fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The builder with the tune cache's options for this context, and where they came
/// from ([`crate::tune::for_builder`]); `None` without the `tune` feature.
fn tuned_builder(b: &ContextBuilder, report: &BackendReport) -> Option<(ContextBuilder, String)> {
    #[cfg(feature = "tune")]
    return crate::tune::for_builder(b, report);
    #[cfg(not(feature = "tune"))]
    {
        let _ = (b, report);
        None
    }
}

impl NeuralFrameContext {
    /// Starts building a context for the ONNX model at `model` (read when
    /// the context is built).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(1920, 1080).build()?;
    /// let s = ctx.contract().scale;
    /// assert_eq!(ctx.output_size(), (1920 * s.x, 1080 * s.y));
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn builder(model: impl AsRef<Path>) -> ContextBuilder {
        ContextBuilder::new(model.as_ref())
    }

    fn new(b: ContextBuilder, caller: Option<CallerDevice>) -> Result<Self> {
        let ctx = Self::new_on_backend(&b, caller.as_ref())?;
        let kernels = ctx.tuning.cuda.is_some_and(|c| c.prefer_nhwc || c.fuse_conv_bias);
        if !(b.default_kernels && kernels && matches!(ctx.res.engine, Engine::Cuda(_))) {
            return Ok(ctx);
        }
        // NHWC kernels and the fused bias are defaults here: one run of the model on the
        // first slot (cuDNN plans them then) says whether cuDNN takes them for this model.
        // With fast start the run is the session's with the bias apart (the fused one is
        // built beside it, and checked there).
        let mut ctx = ctx;
        let t = std::time::Instant::now();
        let bias = if ctx.tuning.cuda.is_some_and(|c| c.fuse_conv_bias) { "fused" } else { "apart" };
        match ctx.warm_up() {
            Ok(()) => {
                ctx.report.startup.first_run_ms = t.elapsed().as_secs_f64() * 1e3;
                log::debug!("first run of the model (NHWC, bias {bias}): {:.0} ms", ctx.report.startup.first_run_ms);
                Ok(ctx)
            }
            Err(e) => {
                log::warn!(
                    "cuDNN refused the model with NHWC kernels (bias {bias}: {e}); running it without them \
                     (ContextBuilder::prefer_nhwc / fuse_conv_bias, --prefer-nhwc / --fuse-conv-bias, choose)"
                );
                drop(ctx);
                let b = b.prefer_nhwc(false);
                Self::new_on_backend(&b, caller.as_ref())
            }
        }
    }

    /// Runs the model once, synchronously, on the first slot's buffers (whatever they
    /// hold): ONNX Runtime and cuDNN settle their plans. CUDA backend only.
    fn warm_up(&mut self) -> Result<()> {
        let res = &mut *self.res;
        let Engine::Cuda(engine) = &res.engine else {
            return Ok(());
        };
        let slot = &mut res.slots[0];
        let tensors = slot.tensors.as_ref().ok_or_else(|| Error::internal("a slot without buffers"))?;
        tensors.bind(&mut slot.binding, &tensors.input_value, &tensors.output_value)?;
        // SAFETY: the binding holds the slot's own buffers, alive while the context is; no
        // frame is in flight, and the run synchronises with the device before it returns.
        unsafe { slot.binding.run(&engine.session, None) }
    }

    fn new_on_backend(b: &ContextBuilder, caller: Option<&CallerDevice>) -> Result<Self> {
        // SAFETY: a caller device comes from build_on, whose contract the caller accepted.
        match unsafe { Self::create(b, caller, b.backend) } {
            // The CUDA provider can still fail when the session is created (a CUDA
            // library missing): `auto` then falls back too, announced.
            Err(e) if b.backend == Backend::Auto && e.kind() == ErrorKind::ProviderUnavailable => {
                let reason = e.to_string();
                log::warn!("CUDA backend unavailable ({reason}); falling back to the CPU backend");
                // SAFETY: as above.
                let mut ctx = unsafe { Self::create(b, caller, Backend::Cpu) }?;
                ctx.report.requested = Backend::Auto;
                ctx.report.fallback_reason = Some(reason);
                Ok(ctx)
            }
            other => other,
        }
    }

    /// # Safety
    /// A `caller` device must satisfy [`ContextBuilder::build_on`]'s contract.
    unsafe fn create(b: &ContextBuilder, caller: Option<&CallerDevice>, backend: Backend) -> Result<Self> {
        if b.size.0 == 0 || b.size.1 == 0 {
            return Err(Error::InvalidArgument(format!(
                "a frame size of {}×{} is empty: set one with ContextBuilder::frame_size",
                b.size.0, b.size.1
            )));
        }
        session::check_model_file(&b.model)?;
        // SAFETY: passed on from the caller.
        let mut base = unsafe { setup::base(b, caller, backend) }?;
        // Options the caller left alone come from `neural-frame tune`'s cache where it has an
        // entry for this model, device, driver, runtime and size; else the defaults.
        let tuned;
        let b = match tuned_builder(b, &base.report) {
            Some((builder, from)) => {
                base.report.tuning_from = from;
                tuned = builder;
                &tuned
            }
            None => b,
        };
        let device = base.device;
        if !device.is_owned()
            && device.queue_count() == 1
            && base.cuda.is_some()
            && b.tuning.cuda.post_wait == PostWait::Host
        {
            return Err(Error::InvalidArgument(
                "PostWait::Host on the caller's single queue would submit each post pass after the caller's own \
                 submissions that wait for it, and deadlock the queue; keep PostWait::Gpu, or give \
                 CallerDevice::post_queue a second queue"
                    .into(),
            ));
        }
        if b.tuning.cuda.fuse_conv_bias && !b.tuning.cuda.prefer_nhwc {
            return Err(Error::InvalidArgument(
                "fuse_conv_bias (--fuse-conv-bias) needs prefer_nhwc (--prefer-nhwc): cuDNN fuses a convolution's \
                 bias only into NHWC kernels, and ONNX Runtime fails the first run otherwise"
                    .into(),
            ));
        }
        let sync_mode =
            if !device.is_owned() || device.can_share_semaphores() { SyncMode::Gpu } else { SyncMode::Host };
        let cuda = base.cuda.as_ref();
        let share = device.can_share_semaphores();
        let timelines = Timelines {
            to_model: SharedTimeline::new(&device, cuda, false)?,
            model_done: SharedTimeline::new(&device, cuda, false)?,
            input_consumed: SharedTimeline::new(&device, cuda, share)?,
            output_ready: SharedTimeline::new(&device, cuda, share)?,
        };
        let n = b.slots.max(1);
        let mut config = SessionConfig {
            provider: Provider::Cpu,
            conv_search: b.tuning.cuda.conv_search,
            prefer_nhwc: b.tuning.cuda.prefer_nhwc,
            fuse_conv_bias: b.tuning.cuda.fuse_conv_bias,
            cuda_stream: None,
            threads: b.threads,
            declared: b.declared.clone(),
        };
        let session_ms;
        let mut fast = b.fast_start && cuda.is_some() && b.tuning.cuda.fuse_conv_bias;
        let (engine, contract) = match cuda {
            Some(c) => {
                // The model's stream at the greatest priority (the post kernels' at the least).
                let stream = cuda::Stream::with_priority(c, true)?;
                config.provider = Provider::Cuda { ordinal: c.info().ordinal };
                config.cuda_stream = Some(stream.raw() as *mut c_void);
                let t = std::time::Instant::now();
                // Fast start: the first session keeps the bias apart; the fused one is built
                // beside the first frames (faststart.rs).
                config.fuse_conv_bias = b.tuning.cuda.fuse_conv_bias && !fast;
                // SAFETY: the stream goes into the engine with the session, which drops the session first.
                let (mut session, mut contract) = unsafe { session::create(&b.model, &config) }?;
                if fast && !(contract.extra_inputs.is_empty() && contract.extra_outputs.is_empty()) {
                    // Its first run needs the extra tensors: the fused session is built here.
                    fast = false;
                    config.fuse_conv_bias = true;
                    drop(session);
                    // SAFETY: as above.
                    (session, contract) = unsafe { session::create(&b.model, &config) }?;
                }
                session_ms = t.elapsed().as_secs_f64() * 1e3;
                // Outputs that ONNX Runtime allocates each run cannot be replayed by a graph.
                let graphs = b.tuning.cuda.cuda_graph && contract.other_outputs.is_empty();
                if b.tuning.cuda.cuda_graph && !graphs {
                    log::warn!(
                        "CUDA graphs are off: the model has outputs that are not images ({}), which ONNX Runtime \
                         allocates on each run",
                        contract.other_outputs.join(", ")
                    );
                }
                let (side, passes) = (b.tuning.cuda.side_stream_wait, b.tuning.cuda.cuda_passes);
                let engine = CudaEngine::new(session, stream, Arc::clone(c), n, graphs, side, passes)?;
                (Engine::Cuda(engine), contract)
            }
            None => {
                if b.tuning.cuda.cuda_passes {
                    log::warn!("CUDA passes are not in effect: the context runs on the CPU backend");
                }
                let t = std::time::Instant::now();
                // SAFETY: no CUDA stream is involved.
                let (session, contract) = unsafe { session::create(&b.model, &config) }?;
                session_ms = t.elapsed().as_secs_f64() * 1e3;
                (Engine::Host(HostEngine { session }), contract)
            }
        };
        let t_buffers = std::time::Instant::now();
        log::debug!("model {}: {:?}", b.model.display(), contract);
        let elements =
            |first: crate::onnx::TensorKind, extras: &[crate::onnx::NamedTensor]| -> Vec<crate::onnx::Element> {
                std::iter::once(first.element).chain(extras.iter().map(|t| t.kind.element)).collect()
            };
        let passes = Passes::new(
            &device,
            &elements(contract.input, &contract.extra_inputs),
            &elements(contract.output, &contract.extra_outputs),
        )?;
        let pool = CommandPool::new(&device)?;
        if b.tuning.gpu_timestamps && !device.has_timestamps() {
            log::info!("the queue family writes no timestamps: pass times are not measured");
        }
        let queries = if b.tuning.gpu_timestamps && device.has_timestamps() {
            Some(TimestampPool::new(&device, 4 * n as u32)?)
        } else {
            None
        };
        let slots = (0..n)
            .map(|_| {
                let inputs: Vec<&str> = std::iter::once(contract.input_name.as_str())
                    .chain(contract.extra_inputs.iter().map(|t| t.name.as_str()))
                    .collect();
                let outputs: Vec<&str> = std::iter::once(contract.output_name.as_str())
                    .chain(contract.extra_outputs.iter().map(|t| t.name.as_str()))
                    .collect();
                let others: Vec<&str> = contract.other_outputs.iter().map(String::as_str).collect();
                let binding = Binding::new(engine.session(), (&inputs, &outputs), &others, engine.placement())?;
                let fences = [Fence::new(&device)?, Fence::new(&device)?];
                Ok(Slot { binding, tensors: None, fences })
            })
            .collect::<Result<Vec<_>>>()?;
        let id = next_id();
        let on_cuda = cuda.is_some();
        // SAFETY: the command buffer is new; it comes from the context's pool.
        let host_visibility = if on_cuda { None } else { Some(unsafe { record::host_visibility(&device, &pool) }?) };
        let no_other_outputs = contract.other_outputs.is_empty();
        let mut ctx = Self {
            res: ManuallyDrop::new(Resources {
                registry: Registry::new(id),
                slots,
                engine,
                timelines,
                queries,
                pool,
                passes,
                device,
                _instance: base.instance,
            }),
            ring: Ring::new(n),
            contract,
            report: base.report,
            model: b.model.clone(),
            // The tuning reports what runs: the CUDA options only on the CUDA backend.
            tuning: TuningInEffect {
                gpu_timestamps: b.tuning.gpu_timestamps,
                spin_wait: b.tuning.spin_wait,
                cuda: on_cuda.then_some(CudaOptions {
                    cuda_graph: b.tuning.cuda.cuda_graph && no_other_outputs,
                    fuse_conv_bias: b.tuning.cuda.fuse_conv_bias && !fast,
                    ..b.tuning.cuda
                }),
            },
            back_pressure: b.back_pressure,
            frame_timeout: b.frame_timeout,
            sync_mode,
            size: None,
            frame: None,
            tiling: b.tiling,
            memory_budget: b.memory_budget,
            generation: 0,
            host_visibility,
            poisoned: None,
            fused: None,
            id,
        };
        ctx.resize(b.size.0, b.size.1)?;
        if fast && let Some(c) = cuda {
            let size =
                ctx.res.slots[0].tensors.as_ref().map(|t| t.size).ok_or_else(|| Error::internal("no buffers"))?;
            let recipe = faststart::Recipe {
                model: b.model.clone(),
                config: SessionConfig { fuse_conv_bias: true, cuda_stream: None, ..config },
                device: Arc::clone(c),
                contract: ctx.contract.clone(),
                sizes: ((size.width, size.height), (size.out_width, size.out_height)),
            };
            ctx.fused = Some(faststart::Pending::start(recipe)?);
        }
        ctx.report.startup.session_ms = session_ms;
        ctx.report.startup.buffers_ms = t_buffers.elapsed().as_secs_f64() * 1e3;
        Ok(ctx)
    }

    /// Re-creates every slot's buffers for a new input size (after the frames in
    /// flight finish); the session stays. Registrations of the old size are
    /// refused by `submit` from then on: register resources of the new size.
    /// A model with a static input shape takes only its own size.
    ///
    /// ```no_run
    /// use ash::vk;
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let old_input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    /// # let old_output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    /// // The window grew: new slot buffers, new images of the new size.
    /// ctx.resize(1280, 720)?;
    /// ctx.unregister_input(old_input)?;
    /// ctx.unregister_output(old_output)?;
    /// let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    /// let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn resize(&mut self, width: u32, height: u32) -> Result<()> {
        if self.frame.as_ref().is_some_and(|g| (g.width, g.height) == (width, height)) {
            return Ok(());
        }
        let (out_width, out_height) = self.contract.scale.apply(width, height).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a {width}×{height} frame at {} gives an output whose size does not fit in 32 bits",
                self.contract.scale
            ))
        })?;
        let tiling = self.choose_tiling(width, height)?;
        if let Some((fw, fh)) = self.contract.fixed_size {
            let fits = match tiling {
                Some(t) => t.tile == (fw, fh) && width >= fw && height >= fh,
                None => (fw, fh) == (width, height),
            };
            if !fits {
                return Err(Error::ModelContract {
                    model: self.model.display().to_string(),
                    message: format!(
                        "takes only {fw}×{fh} frames (static input shape); got {width}×{height}{}",
                        if tiling.is_some() {
                            format!(" in tiles of {:?}", tiling.map(|t| t.tile))
                        } else {
                            String::new()
                        }
                    ),
                });
            }
        }
        let layout = tiles::layout(width, height, tiling);
        let (tw, th) = layout.size;
        let size = FrameSize::new(&self.contract, tw, th)?;
        if layout.tiles.len() > 1 {
            crate::vulkan::caps::check_image_size(&self.res.device, out_width, out_height)?;
        }
        size.check(&self.res.device, self.ring.len(), self.res.engine.placement())?;
        passes::pre_grid(
            &self.res.device,
            self.res.passes.pre(passes::Source::Image, self.contract.input.element)?,
            self.contract.input,
            tw,
            th,
        )?;
        passes::post_grid(
            &self.res.device,
            self.res.passes.post(passes::Target::Image8, self.contract.output.element)?,
            size.out_width,
            size.out_height,
        )?;
        if layout.tiles.len() > 1 {
            log::info!(
                "{width}×{height} frames run as {} tiles of {tw}×{th} (overlap {})",
                layout.tiles.len(),
                tiling.map_or(0, |t| t.overlap)
            );
        }
        self.retire_all()?;
        let geometry = Geometry { width, height, out_width, out_height, layout, tiling };
        if self.size == Some(size) {
            // Same tile size: the slot buffers stay; only the frame's geometry changes.
            self.generation += 1;
            self.frame = Some(geometry);
            return Ok(());
        }
        self.generation += 1;
        self.size = None;
        self.frame = None;
        let res = &mut *self.res;
        for (i, slot) in res.slots.iter_mut().enumerate() {
            // Old graphs and values refer to the old buffers: drop them first (teardown order).
            res.engine.reset_slot(i);
            slot.tensors = None;
        }
        for slot in res.slots.iter_mut() {
            slot.tensors = Some(SlotTensors::new(&res.device, res.engine.cuda_device(), &self.contract, size)?);
        }
        self.size = Some(size);
        self.frame = Some(geometry);
        Ok(())
    }

    /// The tiling for a `width × height` frame: the builder's, else one the memory
    /// budget needs (the largest square tiles whose slot buffers fit it), else none.
    fn choose_tiling(&self, width: u32, height: u32) -> Result<Option<tiles::Tiling>> {
        if let Some(t) = self.tiling {
            t.check()?; // its fields are public: a tiling made without Tiling::new
            return Ok(Some(t));
        }
        let Some(budget) = self.memory_budget else { return Ok(None) };
        let slots = self.ring.len() as u64;
        let bytes = |s: &FrameSize| (s.input_bytes + s.output_bytes + s.alpha_bytes + s.extra_total) * slots;
        if bytes(&FrameSize::new(&self.contract, width, height)?) <= budget {
            return Ok(None);
        }
        // Square tiles from 4096 down, a quarter smaller each time (multiples of 8), while
        // larger than three times the overlap.
        let overlap = tiles::DEFAULT_TILE_OVERLAP;
        let sides = std::iter::successors(Some(4096u32), |s| Some(s * 3 / 4 / 8 * 8)).take_while(|s| *s > 3 * overlap);
        for side in sides {
            if side >= width.max(height) {
                continue;
            }
            let t = tiles::Tiling::new(side, side, overlap)?;
            let (tw, th) = tiles::layout(width, height, Some(t)).size;
            if bytes(&FrameSize::new(&self.contract, tw, th)?) <= budget {
                log::info!(
                    "{width}×{height} frames need {} MiB of slot buffers, over the budget of {} MiB: tiles of \
                     {side}×{side}",
                    bytes(&FrameSize::new(&self.contract, width, height)?) >> 20,
                    budget >> 20
                );
                return Ok(Some(t));
            }
        }
        Err(Error::InvalidArgument(format!(
            "no tiling of {width}×{height} frames keeps the slot buffers within the memory budget of {budget} bytes \
             (the smallest tiles, just over three times the overlap of {overlap}, need more): raise the budget or use \
             fewer slots"
        )))
    }

    /// Current input frame size.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let (width, height) = ctx.frame_size();
    /// let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.upload(input, &vec![0; (width * height * 4) as usize])?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn frame_size(&self) -> (u32, u32) {
        self.frame.as_ref().map_or((0, 0), |g| (g.width, g.height))
    }
    /// Current output size (frame size × scale): the size of the output
    /// images and buffers to register.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// let (width, height) = ctx.output_size();
    /// assert_eq!(ctx.readback(output)?.len(), (width * height * 4) as usize);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn output_size(&self) -> (u32, u32) {
        self.frame.as_ref().map_or((0, 0), |g| (g.out_width, g.out_height))
    }

    /// How frames are cut into tiles: the tiling in force (the builder's, or the
    /// one a memory budget chose) and the number of tiles a frame runs as; `None`
    /// when frames run whole.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, Tiling};
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .tiling(Tiling::new(512, 512, 24)?)
    ///     .frame_size(1920, 1080)
    ///     .build()?;
    /// assert_eq!(ctx.tiles().map(|(_, n)| n), Some(15)); // 5 × 3 tiles
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn tiles(&self) -> Option<(tiles::Tiling, usize)> {
        let g = self.frame.as_ref()?;
        g.tiling.filter(|_| g.layout.tiles.len() > 1).map(|t| (t, g.layout.tiles.len()))
    }
    /// The model's contract.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let c = ctx.contract();
    /// println!("{} → {}, {}", c.input.describe(), c.output.describe(), c.scale);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn contract(&self) -> &ModelContract {
        &self.contract
    }
    /// How the backend was chosen and what runs.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let r = ctx.report();
    /// println!("{} backend (asked for {:?}) on {}", r.backend, r.requested, r.vulkan_device);
    /// if let Some(cuda) = &r.cuda_device {
    ///     println!("paired with {cuda}");
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn report(&self) -> &BackendReport {
        &self.report
    }
    /// `"cuda"` or `"cpu"`.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// if ctx.backend_name() == "cpu" {
    ///     eprintln!("the CPU backend: frames take far longer than on a GPU");
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn backend_name(&self) -> &'static str {
        self.report.backend
    }
    /// The tuning in effect ([`TuningInEffect`]): the CUDA options only on the
    /// CUDA backend (`cuda` is `None` on the CPU backend), less those the model
    /// does not allow.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let tuning = ctx.tuning();
    /// match tuning.cuda {
    ///     Some(cuda) => println!("conv search {:?}, CUDA graphs {}", cuda.conv_search, cuda.cuda_graph),
    ///     None => println!("no CUDA options in effect on the {} backend", ctx.backend_name()),
    /// }
    /// println!("spin waits {}", tuning.spin_wait);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn tuning(&self) -> TuningInEffect {
        self.tuning
    }
    /// How frames are handed over with the caller: on the GPU, or through the host.
    ///
    /// ```no_run
    /// use neural_frame::{NeuralFrameContext, SyncMode};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// if ctx.sync_mode() == SyncMode::Host {
    ///     eprintln!("the driver cannot share semaphores: frames are handed over through the host");
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn sync_mode(&self) -> SyncMode {
        self.sync_mode
    }
    /// Slots in the ring: at most this many frames in flight.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// // An output per frame in flight, so that the renderer can read one while others are written.
    /// let outputs = (0..ctx.slot_count())
    ///     .map(|_| ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM))
    ///     .collect::<neural_frame::Result<Vec<_>>>()?;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn slot_count(&self) -> usize {
        self.ring.len()
    }
    /// Frames in flight now (submitted and not yet retired).
    ///
    /// ```no_run
    /// use neural_frame::{Frame, NeuralFrameContext};
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.submit(Frame::new(input, output))?;
    /// assert!(ctx.in_flight() <= ctx.slot_count());
    /// ctx.wait_all()?;
    /// assert_eq!(ctx.in_flight(), 0);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.ring.in_flight()
    }
    /// Frames dropped by [`BackPressure::Skip`] so far.
    ///
    /// ```no_run
    /// use neural_frame::{BackPressure, Frame, NeuralFrameContext};
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx")
    ///     .back_pressure(BackPressure::Skip)
    ///     .frame_size(960, 540)
    ///     .build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// for _ in 0..100 {
    ///     ctx.submit(Frame::new(input, output))?; // skipped, not waited for, when every slot is busy
    /// }
    /// println!("{} of 100 frames dropped", ctx.skipped());
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn skipped(&self) -> u64 {
        self.ring.skipped()
    }
    /// Errors the validation layer reported so far (context's own instance,
    /// with [`ContextBuilder::validation`]; 0 otherwise).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").validation(true).frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// ctx.infer(input, output)?;
    /// if ctx.validation_errors() > 0 {
    ///     eprintln!("{} validation errors (see the log, target `vulkan`)", ctx.validation_errors());
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn validation_errors(&self) -> usize {
        self.res._instance.validation_errors()
    }
    /// Free and total memory of the CUDA device, in bytes (CUDA backend; `None` on the CPU backend).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// if let Some((free, total)) = ctx.cuda_memory()? {
    ///     println!("CUDA memory: {} of {} MiB in use", (total - free) >> 20, total >> 20);
    /// }
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn cuda_memory(&self) -> Result<Option<(usize, usize)>> {
        self.res.engine.cuda_device().map(|c| c.memory_info()).transpose()
    }
}

impl Drop for NeuralFrameContext {
    fn drop(&mut self) {
        // A fused session still being built: its first run is cancelled, its thread joined.
        self.fused = None;
        // Frames in flight finish before anything they use goes; bounded, so a
        // signal that never arrives cannot hang the drop.
        let retired = match &self.poisoned {
            Some(why) => Err(Error::InvalidArgument(why.clone())),
            None => self.retire_all(),
        };
        let drained = retired.is_ok() && matches!(self.res.engine.drain(self.frame_timeout), Ok(true));
        if !drained {
            // The GPU may still use these objects (a caller's semaphore that never
            // reached its value holds a pass back): destroying them would be a use after
            // free on the GPU. They are leaked instead, and said so.
            log::error!(
                "dropping a NeuralFrameContext whose frames did not finish ({}): its Vulkan and CUDA objects are \
                 leaked rather than destroyed while in use",
                retired.err().map_or("the CUDA stream did not drain".to_string(), |e| e.to_string())
            );
            return;
        }
        // One context's objects go at a time in the process. On the H200 two `serve` sessions
        // tearing their contexts down at once (two clients leaving together) left one of them
        // hanging, twice in one run, never alone; the session, the CUDA frees (each synchronises
        // the device's primary context, which every context shares) and the module unload run
        // one after the other here.
        static RELEASING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = RELEASING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let t = std::time::Instant::now();
        let entries = self.res.registry.drain();
        for entry in entries {
            self.free_entry(entry);
        }
        // SAFETY: dropped once, here; nothing of it is used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.res) };
        log::debug!("context {} released in {:.0} ms", self.id, t.elapsed().as_secs_f64() * 1e3);
    }
}
