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
mod builder_tuning;
pub(crate) mod caller;
pub(crate) mod create;
#[cfg(feature = "diagnostics")]
pub(crate) mod diagnostics;
pub(crate) mod foreign;
pub(crate) mod frame;
pub(crate) mod import;
pub(crate) mod passes;
pub(crate) mod plan;
pub(crate) mod planes;
pub(crate) mod record;
pub(crate) mod register;
pub(crate) mod registry;
pub(crate) mod resolve;
pub(crate) mod ring;
pub(crate) mod setup;
pub(crate) mod slots;
pub(crate) mod stream;
pub(crate) mod sync;
pub(crate) mod tiles;
pub(crate) mod tuning;
pub(crate) mod waits;

use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::context::backend::{Engine, Timelines};
use crate::context::passes::Passes;
use crate::context::registry::Registry;
use crate::context::ring::Ring;
use crate::context::setup::BackendReport;
use crate::context::slots::{FrameSize, Slot, SlotTensors};
use crate::context::sync::SyncMode;
use crate::error::{Error, Result};
use crate::onnx::ModelContract;
use crate::vulkan::command::CommandPool;
use crate::vulkan::query::TimestampPool;
use crate::vulkan::{Device, Instance};

pub use builder::{
    BackPressure, Backend, ContextBuilder, CudaOptions, HandoverOptions, ModelOptions, PostWait, ProviderOptions,
    Tuning, TuningInEffect,
};

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
    fused: Option<backend::faststart::Pending>,
    /// Fast start's session options with the bias apart, to start fast again after a resize.
    restart: Option<backend::faststart::Restart>,
    /// What precision the model runs in, and why.
    precision: crate::graph::precision::PrecisionReport,
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
                        match tiling {
                            Some(t) => format!(
                                " in tiles of {}×{} (tiles of a fixed-size model must be its size: --tile {fw}x{fh}, \
                                 or `Tiling::new({fw}, {fh}, overlap)` in the library)",
                                t.tile.0, t.tile.1
                            ),
                            None => String::new(),
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
            self.res.passes.pre_workgroup(passes::Source::Image, self.contract.input.element)?,
            self.contract.input,
            tw,
            th,
        )?;
        passes::post_grid(
            &self.res.device,
            self.res.passes.post_workgroup(passes::Target::Image8, self.contract.output.element)?,
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
        // The resize has happened: starting fast again is an optimisation, and a failure there
        // leaves the session that runs (its first frame at the new size plans it, slower).
        if let Err(e) = self.restart_fast() {
            log::warn!(
                "{width}×{height}: the context does not start fast at the new size ({e}); the session that runs plans it in the next frame"
            );
            self.restart = None;
        }
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

    /// The precision the model runs in, and why ([`Precision`](crate::Precision)): an fp32
    /// model may run in fp16 on the CUDA backend.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let p = ctx.precision();
    /// println!("{} model, running {}: {}", p.model, p.running, p.reason);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn precision(&self) -> &crate::graph::precision::PrecisionReport {
        &self.precision
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
    ///     Some(cuda) => println!("conv search {:?}, CUDA graphs {}", cuda.provider.conv_search, cuda.provider.cuda_graph),
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
        // The slots' graphs and fused-tail registrations go before the tensors they name
        // (another context may get those addresses next).
        for i in 0..self.res.slots.len() {
            self.res.engine.reset_slot(i);
        }
        // SAFETY: dropped once, here; nothing of it is used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.res) };
        log::debug!("context {} released in {:.0} ms", self.id, t.elapsed().as_secs_f64() * 1e3);
    }
}
