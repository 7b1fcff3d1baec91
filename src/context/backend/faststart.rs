//! Fast start: the first frames need not wait for cuDNN's fused kernels.
//!
//! With NHWC kernels and the bias fused (the CUDA backend's defaults), ONNX
//! Runtime's first run of a model makes cuDNN build a fused plan for every
//! convolution, compiling its kernels: about a second for an upscaler of 18
//! convolutions on the H200 with the driver's JIT cache warm, several cold.
//! A context that fast-starts (`CudaOptions::with_fast_start`, on by default)
//! builds its first session with the bias apart (plans without compilation),
//! takes frames with it at once, and builds the fused session on a thread of
//! its own: created on a stream of its own and run once there, on buffers of
//! its own. The context takes it over between two frames (the ring drained
//! once), and says so. Until then frames run about 1.5× slower, and their
//! results may differ from the fused session's in the last bit of a channel
//! (the bias rounded apart): [`NeuralFrameContext::wait_settled`] waits for
//! the fused session where that matters.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ort::session::{RunOptions, Session};

use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::cuda::{self, CudaDevice};
use crate::error::{Error, Result};
use crate::onnx::session::SessionConfig;
use crate::onnx::{Binding, ModelContract, Placement, TensorValue, session};

/// The fused session, ready: its stream, and what it cost beside the first frames.
struct Ready {
    session: Session,
    stream: cuda::Stream,
    /// Creating the session, and its first run (cuDNN's fused plans), in ms.
    times: (f64, f64),
    /// Why the session runs the model without its fused convolutions (`Recipe::fallback`):
    /// the fused model failed.
    convact_dropped: Option<String>,
}

/// What a context that fast-started keeps for a resize: the session options with the
/// bias apart (no stream: each session gets its own), to start fast again at the new size.
pub(crate) struct Restart {
    pub(crate) model: PathBuf,
    /// The model the fused session runs (with `fuse_conv_act`, its fused convolutions).
    pub(crate) fused_model: PathBuf,
    pub(crate) config: SessionConfig,
    pub(crate) device: Arc<CudaDevice>,
}

/// What the fused session is built from (plain data, sent to its thread).
pub(crate) struct Recipe {
    pub(crate) model: PathBuf,
    pub(crate) config: SessionConfig,
    pub(crate) device: Arc<CudaDevice>,
    pub(crate) contract: ModelContract,
    /// The tensors' sizes: the input's and the output's (width, height).
    pub(crate) sizes: ((u32, u32), (u32, u32)),
    /// The model to build instead where `model` (with fused convolutions) fails.
    pub(crate) fallback: Option<PathBuf>,
}

// SAFETY: the config's raw stream pointer is None in a recipe (its thread makes the
// stream); everything else in it is plain data.
unsafe impl Send for Recipe {}

/// A fused session being built on a thread.
pub(crate) struct Pending {
    rx: mpsc::Receiver<Result<Ready>>,
    /// Cancels the first run (the context goes before it is done).
    run_options: Arc<RunOptions>,
    /// Set when the build is cancelled: no fallback is built after a cancelled run.
    cancelled: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// When the build began.
    started: Instant,
}

impl Pending {
    /// Starts building the fused session of `recipe` on a thread of its own.
    pub(crate) fn start(recipe: Recipe) -> Result<Self> {
        let run_options = Arc::new(RunOptions::new().map_err(|e| Error::onnx("creating run options", e))?);
        let (tx, rx) = mpsc::channel();
        let options = Arc::clone(&run_options);
        let cancelled = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&cancelled);
        let thread = std::thread::Builder::new()
            .name("neural-frame fused session".into())
            .spawn(move || {
                let _ = tx.send(build_or_fall_back(recipe, &options, &stop));
            })
            .map_err(|e| Error::Io { what: "starting the fused session's thread".into(), source: e })?;
        Ok(Self { rx, run_options, cancelled, thread: Some(thread), started: Instant::now() })
    }

    /// Stops the build where it can (its first run is cancelled) and waits for its thread.
    fn cancel(&mut self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let _ = self.run_options.terminate();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// [`build`]s the recipe's model; where that fails and the recipe has a fallback (the model
/// without its fused convolutions), builds that, and says why in the result.
fn build_or_fall_back(mut recipe: Recipe, options: &RunOptions, cancelled: &AtomicBool) -> Result<Ready> {
    let fallback = recipe.fallback.take();
    let model = recipe.model.clone();
    match build(&recipe, &model, options) {
        Err(e) if !cancelled.load(Ordering::SeqCst) && fallback.is_some() => {
            let why = e.to_string();
            log::warn!(
                "the fused convolutions (ConvAct) failed ({why}); the fused session runs the model without \
                 them (fuse_conv_act(false), --fuse-conv-act false, says so up front)"
            );
            let mut ready = build(&recipe, fallback.as_deref().unwrap_or(&model), options)?;
            ready.convact_dropped = Some(why);
            Ok(ready)
        }
        other => other,
    }
}

/// Creates the session of `model` on a stream of its own and runs it once on buffers of its own.
fn build(recipe: &Recipe, model: &std::path::Path, options: &RunOptions) -> Result<Ready> {
    let Recipe { config, device, contract, sizes: ((w, h), (ow, oh)), .. } = recipe;
    let (w, h, ow, oh) = (*w, *h, *ow, *oh);
    let mut config = config.clone();
    let stream = cuda::Stream::with_priority(device, true)?;
    config.cuda_stream = Some(stream.raw() as *mut std::ffi::c_void);
    let t = Instant::now();
    // SAFETY: the stream outlives the session: both go to the context together, which drops
    // the session first (CudaEngine's field order); on failure the session goes first here.
    let (session, _) = unsafe { session::create(model, &config) }?;
    let create_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let placement = Placement::Cuda(device.info().ordinal);
    let (in_bytes, out_bytes) = (contract.input.bytes(w, h), contract.output.bytes(ow, oh));
    let input = cuda::DeviceBuffer::new(device, in_bytes as usize)?;
    let output = cuda::DeviceBuffer::new(device, out_bytes as usize)?;
    {
        // SAFETY: both buffers outlive the values and the binding (dropped at the end of
        // this block, after the run, which synchronises its stream before returning).
        let in_value = unsafe { TensorValue::new(placement, contract.input, w, h, input.ptr() as _, in_bytes) }?;
        // SAFETY: as above.
        let out_value = unsafe { TensorValue::new(placement, contract.output, ow, oh, output.ptr() as _, out_bytes) }?;
        let mut binding = Binding::new(&session, (&[&contract.input_name], &[&contract.output_name]), &[], placement)?;
        binding.bind(&[&in_value], &[&out_value])?;
        // SAFETY: the bound buffers are this thread's own; nothing else uses them.
        unsafe { binding.run(&session, Some(options)) }?;
        stream.synchronize()?;
    }
    Ok(Ready { session, stream, times: (create_ms, t.elapsed().as_secs_f64() * 1e3), convact_dropped: None })
}

impl NeuralFrameContext {
    /// Takes the fused session over when it is ready (or, with `block`, waits for it
    /// up to `block`): the ring is drained, the slots are bound to it, their graphs
    /// forgotten. A session that failed leaves the context as it is, said once.
    /// True when nothing is pending any more.
    pub(crate) fn adopt_fused(&mut self, block: Option<Duration>) -> Result<bool> {
        let Some(pending) = &self.fused else {
            return Ok(true);
        };
        let got = match block {
            None => pending.rx.try_recv().ok(),
            Some(d) => pending.rx.recv_timeout(d).ok(),
        };
        let Some(got) = got else {
            // A thread that ended without a word (it panicked) counts as a failure.
            if pending.thread.as_ref().is_some_and(JoinHandle::is_finished) && pending.rx.try_recv().is_err() {
                log::warn!("the fused session's thread ended without a session; frames keep the bias apart");
                self.fused = None;
                return Ok(true);
            }
            return Ok(false);
        };
        let since_build = pending.started.elapsed().as_secs_f64() * 1e3;
        self.fused = None; // joins the finished thread
        self.note_fused_build(&got);
        let ready = match got {
            Ok(r) => r,
            Err(e) => {
                log::warn!(
                    "cuDNN did not take the model with the bias fused ({e}); frames keep NHWC kernels with the bias \
                     apart and the model as it is (CudaOptions::with_fuse_conv_bias(false), --fuse-conv-bias false, and \
                     fuse_conv_act(false), --fuse-conv-act false, say so up front)"
                );
                return Ok(true);
            }
        };
        self.retire_all()?;
        self.install_session(ready.session, ready.stream)?;
        // Fast start runs on the CUDA backend only: its options are in effect.
        if let Some(cuda) = &mut self.tuning.cuda {
            cuda.provider.fuse_conv_bias = true;
        }
        // The report keeps the first take-over's time (later ones follow a resize).
        if self.report.startup.fused_ms.is_nan() {
            self.report.startup.fused_ms = since_build;
        }
        log::info!(
            "the fused session (NHWC, bias fused) takes over: built beside the first frames in {:.0} ms (session \
             {:.0} ms, first run {:.0} ms)",
            since_build,
            ready.times.0,
            ready.times.1
        );
        Ok(true)
    }

    /// What an ended fused build says for the sessions after it: fused convolutions it ran
    /// without are not in effect (and not built again); a build that failed leaves the bias
    /// apart from here on, after a resize too (no fused session is built again), and the
    /// fused convolutions it failed with are not in effect either.
    fn note_fused_build(&mut self, got: &Result<Ready>) {
        match got {
            Ok(ready) => {
                if let Some(why) = &ready.convact_dropped {
                    self.convact_not_in_effect(why);
                }
            }
            Err(e) => {
                self.restart = None;
                self.convact_not_in_effect(&e.to_string());
            }
        }
    }

    /// The report says that the fused convolutions do not run, and why; a resize's fused
    /// session is built without them.
    pub(crate) fn convact_not_in_effect(&mut self, why: &str) {
        if self.precision.rewrites.iter().any(|r| r.contains(crate::graph::edit::CONV_ACT)) {
            let why = format!("they failed ({why})");
            crate::graph::prepare::not_in_effect(&mut self.precision.rewrites, &why);
        }
        if let Some(restart) = &mut self.restart {
            restart.fused_model = restart.model.clone();
        }
    }

    /// Binds every slot to `session` on `stream`, which replace the engine's (the ring is
    /// drained): the old bindings go before the old session, graphs are forgotten.
    fn install_session(&mut self, session: Session, stream: cuda::Stream) -> Result<()> {
        let res = &mut *self.res;
        let Engine::Cuda(engine) = &mut res.engine else {
            return Err(Error::internal("a CUDA session for a context without CUDA"));
        };
        let c = &self.contract;
        let inputs: Vec<&str> =
            std::iter::once(c.input_name.as_str()).chain(c.extra_inputs.iter().map(|t| t.name.as_str())).collect();
        let outputs: Vec<&str> =
            std::iter::once(c.output_name.as_str()).chain(c.extra_outputs.iter().map(|t| t.name.as_str())).collect();
        let others: Vec<&str> = c.other_outputs.iter().map(String::as_str).collect();
        let placement = Placement::Cuda(engine.device.info().ordinal);
        let bindings = (0..res.slots.len())
            .map(|_| Binding::new(&session, (&inputs, &outputs), &others, placement))
            .collect::<Result<Vec<_>>>()?;
        for (i, (slot, binding)) in res.slots.iter_mut().zip(bindings).enumerate() {
            // The old binding (of the old session) goes before the old session does.
            slot.binding = binding;
            engine.reset_slot(i);
        }
        // The ring is drained: nothing is pending on the old stream, and the new one starts fresh.
        engine.replace_session(session, stream)
    }

    /// After a resize gave the slots buffers of a new size (the ring drained): a context
    /// that fast-started starts fast again. The fused session's first run at new shapes
    /// would have cuDNN compile fused kernels for them, about a second on the H200 (1.2 s
    /// measured at 1280×720 after 960×540) in the next frame. Instead a session with the
    /// bias apart takes the frames at once (cuDNN plans it in about 0.1 s), and the fused
    /// one is built for the new size beside them and takes over, as at the start.
    pub(crate) fn restart_fast(&mut self) -> Result<()> {
        if self.restart.is_none() {
            return Ok(());
        }
        if !matches!(self.res.engine, Engine::Cuda(_)) {
            return Ok(());
        }
        let size = self.res.slots[0].tensors.as_ref().map(|t| t.size).ok_or_else(|| Error::internal("no buffers"))?;
        // A fused session built for the old size is of no use any more; one that has ended
        // says first what it learnt: fused convolutions that failed are not built again.
        if let Some(pending) = self.fused.take()
            && let Ok(got) = pending.rx.try_recv()
        {
            self.note_fused_build(&got);
        }
        let Some(restart) = &self.restart else {
            return Ok(());
        };
        let (model, fused_model) = (restart.model.clone(), restart.fused_model.clone());
        let (device, config) = (Arc::clone(&restart.device), restart.config.clone());
        if self.tuning.cuda.is_some_and(|c| c.provider.fuse_conv_bias) {
            let t = Instant::now();
            let stream = cuda::Stream::with_priority(&device, true)?;
            let quick = SessionConfig { cuda_stream: Some(stream.raw() as *mut std::ffi::c_void), ..config.clone() };
            // SAFETY: the stream goes into the engine with the session, which drops the session first.
            let (session, _) = unsafe { session::create(&model, &quick) }?;
            self.install_session(session, stream)?;
            if let Some(cuda) = &mut self.tuning.cuda {
                cuda.provider.fuse_conv_bias = false;
            }
            log::info!(
                "new size {}×{}: frames take a session with the bias apart ({:.0} ms) while the fused session is built \
                 for that size beside them",
                size.width,
                size.height,
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        let recipe = Recipe {
            fallback: (fused_model != model).then_some(model),
            model: fused_model,
            config: SessionConfig { fuse_conv_bias: true, cuda_stream: None, ..config },
            device,
            contract: self.contract.clone(),
            sizes: ((size.width, size.height), (size.out_width, size.out_height)),
        };
        self.fused = Some(Pending::start(recipe)?);
        Ok(())
    }

    /// Waits, up to `timeout`, until the context runs the session it was built for:
    /// with fast start ([`CudaOptions::with_fast_start`](crate::CudaOptions::with_fast_start)),
    /// the fused session built beside the first frames takes over here. True when it
    /// has (or when there was nothing to wait for: no fast start, the CPU backend, a
    /// fused session that failed, which is logged); false on time-out. For benchmarks,
    /// and for comparing results byte for byte across contexts.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use neural_frame::NeuralFrameContext;
    ///
    /// let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// // Frames may run at once; from here on they run on the fused kernels.
    /// assert!(ctx.wait_settled(Duration::from_secs(60))?);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn wait_settled(&mut self, timeout: Duration) -> crate::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.adopt_fused(Some(left.min(Duration::from_millis(50))))? {
                return Ok(true);
            }
            if left.is_zero() {
                return Ok(false);
            }
        }
    }

    /// Whether a fused session is still being built beside the frames (fast start).
    pub fn settling(&self) -> bool {
        self.fused.is_some()
    }
}
