//! Building a context: the Vulkan device and CUDA beside it, the session (fast
//! start's first one, or the fused one), the engine, the ring's slots and
//! buffers; the one run that checks cuDNN takes the default kernels.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::context::backend::{CudaEngine, Engine, HostEngine, Timelines};
use crate::context::foreign::CallerDevice;
use crate::context::passes::Passes;
use crate::context::registry::Registry;
use crate::context::ring::Ring;
use crate::context::setup::{self, BackendReport};
use crate::context::slots::Slot;
use crate::context::sync::SyncMode;
use crate::context::{Backend, ContextBuilder, NeuralFrameContext, PostWait, Resources, TuningInEffect, record};
use crate::cuda;
use crate::error::{Error, ErrorKind, Result};
use crate::graph::prepare::{self, Prepared};
use crate::interop::SharedTimeline;
use crate::onnx::session::{Provider, SessionConfig};
use crate::onnx::{Binding, session};
use crate::vulkan::command::CommandPool;
use crate::vulkan::query::TimestampPool;
use crate::vulkan::sync::Fence;

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
    pub(crate) fn new(b: ContextBuilder, caller: Option<CallerDevice>) -> Result<Self> {
        let ctx = Self::new_on_backend(&b, caller.as_ref())?;
        let kernels = ctx.tuning.cuda.is_some_and(|c| c.provider.prefer_nhwc || c.provider.fuse_conv_bias);
        // The session runs fused convolutions now (not on fast start's thread, which falls
        // back by itself): its first run here says whether cuDNN takes them.
        let convact = ctx.fused.is_none() && prepare::in_effect(&ctx.precision.rewrites);
        if !((b.default_kernels && kernels || convact) && matches!(ctx.res.engine, Engine::Cuda(_))) {
            return Ok(ctx);
        }
        // NHWC kernels and the fused bias are defaults here: one run of the model on the
        // first slot (cuDNN plans them then) says whether cuDNN takes them for this model.
        // With fast start the run is the session's with the bias apart (the fused one is
        // built beside it, and checked there).
        let mut ctx = ctx;
        let t = std::time::Instant::now();
        let bias = if ctx.tuning.cuda.is_some_and(|c| c.provider.fuse_conv_bias) { "fused" } else { "apart" };
        match ctx.warm_up() {
            Ok(()) => {
                ctx.report.startup.first_run_ms = t.elapsed().as_secs_f64() * 1e3;
                log::debug!("first run of the model (NHWC, bias {bias}): {:.0} ms", ctx.report.startup.first_run_ms);
                Ok(ctx)
            }
            // Only an error of the fused convolutions' own kernels (ONNX Runtime names the node's
            // op) drops them; any other is the NHWC kernels' (below).
            Err(e) if convact && prepare::owns_error(&e.to_string()) => {
                log::warn!(
                    "cuDNN refused the model's fused convolutions ({e}); running it without them \
                     (CudaOptions::with_fuse_conv_act(false), --fuse-conv-act false, says so up front)"
                );
                drop(ctx);
                let mut ctx = Self::new(b.with_cuda(|c| c.with_fuse_conv_act(false)), caller)?;
                prepare::not_in_effect(&mut ctx.precision.rewrites, &format!("their first run failed ({e})"));
                Ok(ctx)
            }
            Err(e) => {
                log::warn!(
                    "cuDNN refused the model with NHWC kernels (bias {bias}: {e}); running it without them \
                     (CudaOptions::with_prefer_nhwc / fuse_conv_bias, --prefer-nhwc / --fuse-conv-bias, choose)"
                );
                drop(ctx);
                let b = b.with_cuda(|c| c.with_prefer_nhwc(false));
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
            && b.tuning.cuda.handover.post_wait == PostWait::Host
        {
            return Err(Error::InvalidArgument(
                "PostWait::Host on the caller's single queue would submit each post pass after the caller's own \
                 submissions that wait for it, and deadlock the queue; keep PostWait::Gpu, or give \
                 CallerDevice::post_queue a second queue"
                    .into(),
            ));
        }
        if b.tuning.cuda.provider.fuse_conv_bias && !b.tuning.cuda.provider.prefer_nhwc {
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
            conv_search: b.tuning.cuda.provider.conv_search,
            prefer_nhwc: b.tuning.cuda.provider.prefer_nhwc,
            fuse_conv_bias: b.tuning.cuda.provider.fuse_conv_bias,
            cuda_stream: None,
            threads: b.threads,
            declared: b.declared.clone(),
        };
        let session_ms;
        let mut fast = b.tuning.cuda.model.fast_start && cuda.is_some() && b.tuning.cuda.provider.fuse_conv_bias;
        // The model files that run (graph::prepare): the caller's, its fold and fp16 conversion,
        // and that with the fused convolutions. With fast start the first frames run the model
        // without them (no cuDNN plans chosen before them).
        let asked = b.tuning.cuda.model;
        let prepared = match cuda {
            #[cfg(feature = "cuda")]
            Some(c) => {
                let probe_config = SessionConfig {
                    provider: Provider::Cuda { ordinal: c.info().ordinal },
                    fuse_conv_bias: false,
                    ..config.clone()
                };
                let v = &base.report.vulkan_device;
                let gpu = format!(
                    "{} {} / {} {} / ONNX Runtime {}",
                    v.name, v.uuid, v.driver_name, v.driver_info, base.report.runtime.version
                );
                let mut probe = |path: &std::path::Path| crate::onnx::probe_frame::probe_pixels(path, &probe_config);
                prepare::prepare(&b.model, &asked, Some((&gpu, &mut probe)))?
            }
            _ => prepare::prepare(&b.model, &asked, None)?,
        };
        let Prepared { model, fused: mut fused_model, mut report } = prepared;
        let (engine, contract) = match cuda {
            Some(c) => {
                // The model's stream at the greatest priority (the post kernels' at the least).
                let stream = cuda::Stream::with_priority(c, true)?;
                config.provider = Provider::Cuda { ordinal: c.info().ordinal };
                config.cuda_stream = Some(stream.raw() as *mut c_void);
                let t = std::time::Instant::now();
                // Fast start: the first session keeps the bias apart; the fused one is built
                // beside the first frames (faststart.rs).
                config.fuse_conv_bias = b.tuning.cuda.provider.fuse_conv_bias && !fast;
                // The fused model's session; where ONNX Runtime does not take it (its fused
                // convolutions), the model's as it is, announced and reported.
                let mut create_fused = |config: &SessionConfig| {
                    // SAFETY: the stream goes into the engine with the session, which drops the session first.
                    match unsafe { session::create(&fused_model, config) } {
                        Err(e) if fused_model != model => {
                            log::warn!(
                                "ONNX Runtime did not take the model with fused convolutions ({e}); it runs without \
                                 them (fuse_conv_act(false), --fuse-conv-act false, says so up front)"
                            );
                            prepare::not_in_effect(&mut report.rewrites, &format!("the session failed ({e})"));
                            fused_model = model.clone();
                            // SAFETY: as above.
                            unsafe { session::create(&model, config) }
                        }
                        other => other,
                    }
                };
                let (mut session, mut contract) = if fast {
                    // SAFETY: as above.
                    unsafe { session::create(&model, &config) }?
                } else {
                    create_fused(&config)?
                };
                if fast && !(contract.extra_inputs.is_empty() && contract.extra_outputs.is_empty()) {
                    // Its first run needs the extra tensors: the fused session is built here.
                    fast = false;
                    config.fuse_conv_bias = true;
                    drop(session);
                    (session, contract) = create_fused(&config)?;
                }
                session_ms = t.elapsed().as_secs_f64() * 1e3;
                // Outputs that ONNX Runtime allocates each run cannot be replayed by a graph.
                let graphs = b.tuning.cuda.provider.cuda_graph && contract.other_outputs.is_empty();
                if b.tuning.cuda.provider.cuda_graph && !graphs {
                    log::warn!(
                        "CUDA graphs are off: the model has outputs that are not images ({}), which ONNX Runtime \
                         allocates on each run",
                        contract.other_outputs.join(", ")
                    );
                }
                let (side, passes) = (b.tuning.cuda.handover.side_stream_wait, b.tuning.cuda.handover.cuda_passes);
                let engine = CudaEngine::new(session, stream, Arc::clone(c), n, graphs, side, passes)?;
                (Engine::Cuda(engine), contract)
            }
            None => {
                // On by default, so not worth a warning: nobody need have asked for them.
                if b.tuning.cuda.handover.cuda_passes {
                    log::info!("CUDA passes are not in effect: the context runs on the CPU backend");
                }
                let t = std::time::Instant::now();
                // SAFETY: no CUDA stream is involved.
                let (session, contract) = unsafe { session::create(&model, &config) }?;
                session_ms = t.elapsed().as_secs_f64() * 1e3;
                (Engine::Host(HostEngine { session }), contract)
            }
        };
        let t_buffers = std::time::Instant::now();
        log::debug!("startup: session ({session_ms:.0} ms)");
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
        log::debug!("startup: passes ({:.0} ms)", t_buffers.elapsed().as_secs_f64() * 1e3);
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
                cuda: on_cuda.then(|| {
                    let c = b.tuning.cuda;
                    c.with_cuda_graph(c.provider.cuda_graph && no_other_outputs)
                        .with_fuse_conv_bias(c.provider.fuse_conv_bias && !fast)
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
            restart: None,
            precision: report,
            id,
        };
        ctx.resize(b.size.0, b.size.1)?;
        log::debug!("startup: slots and buffers ({:.0} ms)", t_buffers.elapsed().as_secs_f64() * 1e3);
        if fast && let Some(c) = cuda {
            let size =
                ctx.res.slots[0].tensors.as_ref().map(|t| t.size).ok_or_else(|| Error::internal("no buffers"))?;
            ctx.restart = Some(crate::context::backend::faststart::Restart {
                model: model.clone(),
                fused_model: fused_model.clone(),
                config: SessionConfig { cuda_stream: None, ..config.clone() },
                device: Arc::clone(c),
            });
            let recipe = crate::context::backend::faststart::Recipe {
                fallback: (fused_model != model).then(|| model.clone()),
                model: fused_model,
                config: SessionConfig { fuse_conv_bias: true, cuda_stream: None, ..config },
                device: Arc::clone(c),
                contract: ctx.contract.clone(),
                sizes: ((size.width, size.height), (size.out_width, size.out_height)),
            };
            ctx.fused = Some(crate::context::backend::faststart::Pending::start(recipe)?);
        }
        ctx.report.startup.session_ms = session_ms;
        ctx.report.startup.buffers_ms = t_buffers.elapsed().as_secs_f64() * 1e3;
        Ok(ctx)
    }
}
