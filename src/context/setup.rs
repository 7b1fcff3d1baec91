//! Choosing what a context runs on: the Vulkan instance and device (its own
//! or the caller's), ONNX Runtime, and the backend, with `auto` falling back
//! to the CPU backend on a typed error kind, announced.

use std::sync::Arc;

use serde::Serialize;

use crate::context::builder::{Backend, ContextBuilder};
use crate::context::foreign::CallerDevice;
use crate::cuda::{self, CudaDevice};
use crate::error::{Error, Result, format_uuid};
use crate::onnx::RuntimeInfo;
use crate::onnx::{preload, runtime};
use crate::vulkan::device::BorrowedDevice;
use crate::vulkan::{AdapterInfo, Device, Instance, InstanceOptions};

/// How the backend was chosen, for reports
/// ([`NeuralFrameContext::report`](crate::NeuralFrameContext::report)). It
/// serialises (serde) for machine-readable output.
///
/// ```no_run
/// use neural_frame::{Backend, NeuralFrameContext};
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").backend(Backend::Auto).frame_size(960, 540).build()?;
/// let report = ctx.report();
/// match (&report.cuda_device, &report.fallback_reason) {
///     (Some(cuda), _) => println!("CUDA backend: {} with {cuda}", report.vulkan_device),
///     (None, Some(why)) => println!("CPU backend on {} because {why}", report.vulkan_device),
///     (None, None) => println!("CPU backend, as asked ({:?})", report.requested),
/// }
/// println!("ONNX Runtime {} ({})", report.runtime.version, report.runtime.providers.join(", "));
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct BackendReport {
    /// What was asked for.
    pub requested: Backend,
    /// What runs: `"cuda"` or `"cpu"`.
    pub backend: &'static str,
    /// Why CUDA is not used, when `auto` fell back to the CPU backend.
    pub fallback_reason: Option<String>,
    /// The Vulkan device.
    pub vulkan_device: AdapterInfo,
    /// Whether the Vulkan device is the caller's (bring your own device).
    pub caller_device: bool,
    /// The CUDA device paired with it by UUID, when CUDA runs.
    pub cuda_device: Option<String>,
    /// The loaded ONNX Runtime.
    pub runtime: RuntimeInfo,
    /// Where building the context spent its time.
    pub startup: StartupTimes,
    /// Where its options came from: the defaults, the caller's, or the tune cache
    /// (`neural-frame tune`; which file, when, and what it chose).
    pub tuning_from: String,
}

/// Where building a context spent its time, in milliseconds (NaN: the step did
/// not run). The first frame after `build` costs a frame: the model's first run,
/// where cuDNN plans its convolutions, happens in `build` (`first_run_ms`) on the
/// CUDA backend with the default kernels, otherwise in the first frame.
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let t = &ctx.report().startup;
/// println!("ONNX Runtime {:.0} ms, Vulkan {:.0}, CUDA {:.0}, session {:.0}, buffers {:.0}, first run {:.0}",
///     t.runtime_ms, t.vulkan_ms, t.cuda_ms, t.session_ms, t.buffers_ms, t.first_run_ms);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StartupTimes {
    /// Loading ONNX Runtime's library (once a process) and listing its providers; on the
    /// CUDA backend on a thread beside the Vulkan device's set-up.
    pub runtime_ms: f64,
    /// The Vulkan instance and device (or wrapping the caller's).
    pub vulkan_ms: f64,
    /// CUDA's driver and the device paired by UUID (its context): most of it on a
    /// thread beside the Vulkan device's set-up, so the two may add up to more than the time they took.
    pub cuda_ms: f64,
    /// ONNX Runtime's session: the model read, optimised and placed on the provider.
    pub session_ms: f64,
    /// The ring's buffers, their CUDA imports and bindings, the timelines and passes.
    pub buffers_ms: f64,
    /// The model's first run, where cuDNN builds its convolution plans (and, with the bias
    /// fused, compiles their kernels: the driver's JIT cache keeps them for later processes).
    pub first_run_ms: f64,
    /// Fast start: from the end of `build` until the fused session, built beside the
    /// first frames, was ready (NaN: no fast start, or not yet).
    pub fused_ms: f64,
}

impl StartupTimes {
    fn none() -> Self {
        Self {
            runtime_ms: f64::NAN,
            vulkan_ms: f64::NAN,
            cuda_ms: f64::NAN,
            session_ms: f64::NAN,
            buffers_ms: f64::NAN,
            first_run_ms: f64::NAN,
            fused_ms: f64::NAN,
        }
    }
}

/// What a context is built on.
pub(crate) struct Base {
    pub(crate) cuda: Option<Arc<CudaDevice>>,
    pub(crate) device: Arc<Device>,
    pub(crate) instance: Arc<Instance>,
    pub(crate) report: BackendReport,
}

/// Loads ONNX Runtime, makes (or wraps) the Vulkan device and picks the backend.
///
/// # Safety
/// A `caller` device must satisfy [`ContextBuilder::build_on`]'s contract.
pub(crate) unsafe fn base(b: &ContextBuilder, caller: Option<&CallerDevice>, backend: Backend) -> Result<Base> {
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut startup = StartupTimes::none();
    // On the CPU backend ONNX Runtime loads first; otherwise on a thread beside the
    // Vulkan device's set-up, with its CUDA provider and the libraries that links
    // (preload.rs), which the session and the model's first run would load later.
    let preload = (backend != Backend::Cpu).then(|| {
        let library = b.ort_library.clone();
        std::thread::spawn(move || preload::cuda_side(library.as_deref()))
    });
    if preload.is_none() {
        let t = std::time::Instant::now();
        runtime::load(b.ort_library.as_deref())?;
        startup.runtime_ms = ms(t);
    }
    let t = std::time::Instant::now();
    // CUDA's driver starts beside the Vulkan device (each takes about 0.2 s): on a thread,
    // cuInit, and where there is one CUDA device only, its primary context, which the
    // pairing by UUID below then finds retained.
    let early_cuda = (backend != Backend::Cpu).then(|| {
        std::thread::spawn(|| -> Option<(Arc<CudaDevice>, f64)> {
            let t = std::time::Instant::now();
            cuda::init().ok()?;
            log::debug!(
                "startup: CUDA's driver initialised ({:.0} ms, beside Vulkan)",
                t.elapsed().as_secs_f64() * 1e3
            );
            let list = cuda::devices().ok()?;
            let [only] = list.as_slice() else {
                return None;
            };
            let device = CudaDevice::by_uuid(&only.uuid).ok()?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            log::debug!("startup: CUDA's primary context on {} retained ({ms:.0} ms, beside Vulkan)", only.name);
            Some((device, ms))
        })
    });
    let (instance, device) = match caller {
        None => {
            let instance = Instance::new(&InstanceOptions { validation: b.validation })?;
            log::debug!("startup: Vulkan instance ({:.0} ms)", ms(t));
            let device = Device::new(&instance, b.device)?;
            (instance, device)
        }
        Some(c) => {
            // SAFETY: the caller's instance outlives the context (build_on's contract).
            let instance = unsafe { Instance::borrowed(c.entry.clone(), c.instance.clone(), c.api_version) }?;
            let borrowed = BorrowedDevice {
                raw: c.device.handle(),
                physical: c.physical_device,
                queue_family: c.queue_family_index,
                queue: c.queue,
                post_queue: c.post_queue,
                external_memory_fd: c.external_memory_fd,
                external_semaphore_fd: c.external_semaphore_fd,
            };
            // SAFETY: build_on's contract covers the device, the queue and the lock.
            let device = unsafe { Device::borrowed(&instance, borrowed, c.queue_lock.clone()) }?;
            (instance, device)
        }
    };
    log::debug!("Vulkan device {} ({} queue(s))", device.info(), device.queue_count());
    startup.vulkan_ms = ms(t);
    if let Some(thread) = preload {
        let t = std::time::Instant::now();
        let done = thread.join().map_err(|_| Error::internal("the thread loading ONNX Runtime panicked"))??;
        startup.runtime_ms = done.runtime_ms;
        log::debug!(
            "startup: ONNX Runtime and its CUDA side loaded beside Vulkan ({:.0} ms; waited {:.0} ms for it)",
            done.total_ms,
            ms(t)
        );
    }
    let runtime = runtime::load(b.ort_library.as_deref())?.clone();
    log::debug!("ONNX Runtime {} from {}", runtime.version, runtime.library.display());
    let t = std::time::Instant::now();
    // Held until the pairing below has retained the context again (then released once).
    let early = early_cuda.and_then(|h| h.join().ok()).flatten();
    let (cuda, fallback_reason) = match backend {
        Backend::Cpu => (None, None),
        Backend::Cuda => (Some(pair_cuda(&device, &runtime)?), None),
        Backend::Auto => match pair_cuda(&device, &runtime) {
            Ok(c) => (Some(c), None),
            // Whatever stops CUDA here (no driver, no twin, no provider, a failing
            // driver call) makes `auto` fall back, announced.
            Err(e) => {
                let reason = e.to_string();
                log::warn!("CUDA backend unavailable ({reason}); falling back to the CPU backend");
                (None, Some(reason))
            }
        },
    };
    // CUDA's own time, most of it beside Vulkan's: the early thread's, and the pairing's.
    startup.cuda_ms = if backend == Backend::Cpu { f64::NAN } else { ms(t) + early.as_ref().map_or(0.0, |e| e.1) };
    drop(early);
    let report = BackendReport {
        requested: backend,
        backend: if cuda.is_some() { "cuda" } else { "cpu" },
        fallback_reason,
        vulkan_device: device.info().clone(),
        caller_device: caller.is_some(),
        cuda_device: cuda
            .as_ref()
            .map(|c| format!("CUDA {} \"{}\" (UUID {})", c.info().ordinal, c.info().name, format_uuid(&c.info().uuid))),
        runtime,
        startup,
        tuning_from: if b.tuning_forced { "the caller's options".into() } else { "the defaults".into() },
    };
    Ok(Base { cuda, device, instance, report })
}

/// The CUDA device paired with `device` by UUID, where everything the CUDA
/// backend needs is there; otherwise an error of kind `ProviderUnavailable`
/// that says what is missing.
fn pair_cuda(device: &Arc<Device>, runtime: &RuntimeInfo) -> Result<Arc<CudaDevice>> {
    cuda::init()?;
    let cuda_device = CudaDevice::by_uuid(&device.info().uuid_bytes)?;
    if !runtime.providers.iter().any(|p| p == "CUDAExecutionProvider") {
        return Err(Error::CudaUnavailable {
            reason: format!(
                "the ONNX Runtime at {} has no CUDA execution provider (providers: {}); install onnxruntime-gpu 1.31.1",
                runtime.library.display(),
                runtime.providers.join(", ")
            ),
        });
    }
    let unavailable = |e: Error| Error::CudaUnavailable {
        reason: format!("the Vulkan device cannot share memory and semaphores with CUDA: {e}"),
    };
    crate::vulkan::caps::timeline_export_support(device).map_err(unavailable)?;
    if !device.can_share_memory() {
        return Err(unavailable(Error::InvalidArgument(format!(
            "{} is not enabled",
            crate::vulkan::external::MEMORY_EXTENSION_NAME
        ))));
    }
    Ok(cuda_device)
}

/// The Vulkan devices a context can run on with `backend`: every suitable one,
/// and on the CUDA backend (and `auto`, where CUDA has devices) only those with a
/// CUDA device of the same UUID. For running one context per GPU. On the CUDA
/// backend without CUDA it fails with the reason ([`ErrorKind::ProviderUnavailable`](crate::ErrorKind)).
///
/// ```no_run
/// use neural_frame::{Backend, DeviceSelector, NeuralFrameContext};
///
/// let contexts = neural_frame::suitable_devices(Backend::Cuda)?
///     .into_iter()
///     .map(|d| {
///         println!("{d}");
///         NeuralFrameContext::builder("models/upscale.onnx")
///             .backend(Backend::Cuda)
///             .device(DeviceSelector::Uuid(d.uuid_bytes))
///             .frame_size(960, 540)
///             .build()
///     })
///     .collect::<neural_frame::Result<Vec<_>>>()?;
/// # let _ = contexts;
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn suitable_devices(backend: Backend) -> Result<Vec<AdapterInfo>> {
    let instance = Instance::new(&InstanceOptions::default())?;
    let list = crate::vulkan::adapter::enumerate(&instance)?;
    // None: any suitable device. The CUDA backend insists on a CUDA twin (no CUDA is an
    // error); `auto` filters by CUDA only where CUDA has devices.
    let cuda_uuids: Option<Vec<[u8; 16]>> = match backend {
        Backend::Cpu => None,
        Backend::Cuda => Some(cuda::devices()?.into_iter().map(|d| d.uuid).collect()),
        Backend::Auto => {
            cuda::devices().ok().map(|d| d.into_iter().map(|d| d.uuid).collect::<Vec<_>>()).filter(|u| !u.is_empty())
        }
    };
    let chosen: Vec<AdapterInfo> = list
        .iter()
        .filter(|(_, info)| info.unsuitable.is_none())
        .filter(|(_, info)| cuda_uuids.as_ref().is_none_or(|u| u.contains(&info.uuid_bytes)))
        .map(|(_, info)| info.clone())
        .collect();
    if chosen.is_empty() {
        return Err(Error::NoSuchDevice {
            wanted: "a suitable device".into(),
            seen: list.iter().map(|(_, i)| i.to_string()).collect::<Vec<_>>().join(", "),
        });
    }
    Ok(chosen)
}
