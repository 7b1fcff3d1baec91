//! Pre-flight stage 3's probe: ONNX Runtime's CUDA provider registered and run
//! on a tiny model, its output compared with the CPU provider's. (Built with
//! the `cuda` feature only.)

use std::time::Instant;

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;

use crate::error::{Error, Result};

/// `models/test/tiny-x2-f32.onnx` (NCHW RGB f32, ×2, 5 KB), so the probe needs no model file.
const TINY: &[u8] = include_bytes!("../../models/test/tiny-x2-f32.onnx");

/// What the probe saw.
pub(crate) struct ProviderRun {
    /// Creating the session with the CUDA provider (loads the provider library,
    /// cuBLAS, cuDNN...).
    pub register_ms: f64,
    /// The first run on the CUDA provider (loads cuDNN's kernels lazily).
    pub first_run_ms: f64,
    /// Output values compared.
    pub values: usize,
    /// Largest |CUDA − CPU| over them.
    pub max_abs_difference: f32,
    /// Largest |CPU| (the scale the difference is judged on).
    pub max_abs_expected: f32,
}

/// The side of the probe's square input.
const SIDE: usize = 16;

fn input() -> Vec<f32> {
    // A pattern that is not flat: every channel and position differs.
    (0..3 * SIDE * SIDE).map(|i| ((i * 37 + 11) % 251) as f32 / 250.0).collect()
}

fn run(session: &mut Session, what: &str) -> Result<Vec<f32>> {
    let name = session.inputs().first().map(|i| i.name().to_string()).unwrap_or_default();
    let t = Tensor::from_array(([1usize, 3, SIDE, SIDE], input())).map_err(|e| Error::onnx("the probe's input", e))?;
    let out = session.run(ort::inputs![name => t]).map_err(|e| Error::onnx(format!("the probe's run on {what}"), e))?;
    let (_, v) = out[0].try_extract_tensor::<f32>().map_err(|e| Error::onnx("the probe's output", e))?;
    Ok(v.to_vec())
}

/// Registers the CUDA provider on CUDA device `ordinal`, runs the tiny model on it
/// and on the CPU provider, and compares. A registration failure is
/// [`Error::ProviderUnavailable`], whose message names each missing CUDA library
/// and its PyPI package.
pub(crate) fn cuda_against_cpu(ordinal: i32) -> Result<ProviderRun> {
    use ort::ep;
    let env = crate::onnx::runtime::environment()?;
    let builder = || -> Result<ort::session::builder::SessionBuilder> {
        Session::builder(env)
            .map_err(|e| Error::onnx("creating a session builder", e))?
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(|e| Error::onnx("setting the optimisation level", e))
    };
    let t = Instant::now();
    let mut cuda = builder()?
        .with_execution_providers([ep::CUDA::default().with_device_id(ordinal).build().error_on_failure()])
        .map_err(crate::onnx::runtime::provider_failure)?
        .commit_from_memory(TINY)
        .map_err(crate::onnx::runtime::provider_failure)?;
    let register_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let got = run(&mut cuda, "the CUDA provider").map_err(|e| match e {
        // cuDNN loads its engine libraries on the first convolution: a missing one shows here.
        Error::Onnx { what, message } => Error::ProviderUnavailable { reason: format!("{what}: {message}") },
        other => other,
    })?;
    let first_run_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut cpu = builder()?.commit_from_memory(TINY).map_err(|e| Error::onnx("loading the probe on the CPU", e))?;
    let expected = run(&mut cpu, "the CPU provider")?;
    if expected.len() != got.len() {
        return Err(Error::onnx("the probe", format!("{} values on CUDA, {} on the CPU", got.len(), expected.len())));
    }
    let max_abs_difference = expected.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    let max_abs_expected = expected.iter().map(|a| a.abs()).fold(0.0, f32::max);
    Ok(ProviderRun { register_ms, first_run_ms, values: got.len(), max_abs_difference, max_abs_expected })
}
