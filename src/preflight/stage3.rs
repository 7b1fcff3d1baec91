//! Stage 3: ONNX Runtime's CUDA provider registered and run on a tiny model,
//! compared with the CPU provider.

use serde::Serialize;

use super::Options;
use crate::cuda;
use crate::error::{Error, Result};
use crate::vulkan::AdapterInfo;
#[cfg(feature = "cuda")]
use crate::vulkan::{Device, Instance, InstanceOptions};

/// Stage 3's measurements.
///
/// Read from a [`Report`](super::Report); see [`Details`](super::Details) for an example.
#[derive(Debug, Clone, Serialize)]
pub struct Stage3 {
    /// The ONNX Runtime that was loaded.
    pub runtime: crate::RuntimeInfo,
    /// The Vulkan device.
    pub vulkan_device: AdapterInfo,
    /// The CUDA device it was paired with (by UUID), where the provider ran.
    pub cuda_device: String,
    /// Its ordinal.
    pub cuda_ordinal: i32,
    /// Creating a session with the CUDA provider: loading the provider library,
    /// the CUDA runtime, cuBLAS and cuDNN.
    pub register_ms: f64,
    /// The first run (cuDNN loads its kernels then).
    pub first_run_ms: f64,
    /// Output values compared with the CPU provider's.
    pub values: usize,
    /// The largest |CUDA − CPU| among them.
    pub max_abs_difference: f32,
    /// The largest allowed (TF32 convolutions round to a 10-bit mantissa).
    pub tolerance: f32,
}

/// Stage 3: ONNX Runtime's CUDA provider registered on the CUDA device paired with the
/// Vulkan device and run on a tiny built-in model (NCHW f32, ×2), compared with the
/// CPU provider. Skipped ([`Error::CudaUnavailable`]) where there is no CUDA driver.
///
/// ```no_run
/// let s3 = neural_frame::preflight::stage3(&Default::default())?;
/// println!("ONNX Runtime {} on CUDA {}: registered in {:.0} ms", s3.runtime.version, s3.cuda_device, s3.register_ms);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[cfg(feature = "cuda")]
pub fn stage3(options: &Options) -> Result<Stage3> {
    cuda::init()?;
    let runtime = crate::onnx::runtime::load(options.ort_library.as_deref())?.clone();
    log::debug!("stage 3: ONNX Runtime {} from {}", runtime.version, runtime.library.display());
    if !runtime.providers.iter().any(|p| p == "CUDAExecutionProvider") {
        return Err(Error::ProviderUnavailable {
            reason: format!(
                "{} (ONNX Runtime {}) has no CUDA provider, only {}: it is the CPU build; install onnxruntime-gpu",
                runtime.library.display(),
                runtime.version,
                runtime.providers.join(", ")
            ),
        });
    }
    let instance = Instance::new(&InstanceOptions { validation: options.validation })?;
    let device = Device::new(&instance, options.device)?;
    let cuda_device = cuda::CudaDevice::by_uuid(&device.info().uuid_bytes)?;
    let (ordinal, name) = (cuda_device.info().ordinal, cuda_device.info().name.clone());
    log::debug!("stage 3: registering the CUDA provider on CUDA {ordinal} \"{name}\"");
    let run = crate::onnx::probe::cuda_against_cpu(ordinal)?;
    Ok(Stage3 {
        runtime,
        vulkan_device: device.info().clone(),
        cuda_device: name,
        cuda_ordinal: ordinal,
        register_ms: run.register_ms,
        first_run_ms: run.first_run_ms,
        values: run.values,
        max_abs_difference: run.max_abs_difference,
        tolerance: 1e-2 * run.max_abs_expected.max(1.0),
    })
}

/// Stage 3 in a build without the `cuda` feature: skipped, saying so.
///
/// ```
/// # #[cfg(not(feature = "cuda"))] {
/// let e = neural_frame::preflight::stage3(&Default::default()).err().expect("no CUDA in this build");
/// assert_eq!(e.kind(), neural_frame::ErrorKind::ProviderUnavailable);
/// # }
/// ```
#[cfg(not(feature = "cuda"))]
pub fn stage3(_options: &Options) -> Result<Stage3> {
    // The stub's init always fails, with the reason (built without `cuda`).
    cuda::init().and_then(|()| Err(Error::internal("the CUDA stub initialised")))
}
