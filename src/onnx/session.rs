//! Creating a session for a model with the chosen execution provider.

use std::ffi::c_void;
use std::path::Path;

#[cfg(feature = "cuda")]
use ort::ep;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::onnx::declare::Declarations;
use crate::onnx::model::{self, ModelContract};
use crate::onnx::tensor::{Element, TensorKind};

/// How cuDNN picks convolution algorithms (CUDA backend only; the CPU backend
/// ignores it).
///
/// ```no_run
/// use neural_frame::{ConvSearch, NeuralFrameContext};
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx")
///     .map_cuda_options(|c| c.with_conv_search(ConvSearch::Exhaustive)) // slower first frame, sometimes faster after
///     .frame_size(960, 540)
///     .build()?;
/// if let Some(cuda) = ctx.tuning().cuda {
///     assert_eq!(cuda.provider.conv_search, ConvSearch::Exhaustive); // on the CUDA backend (`cuda` is None off it)
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvSearch {
    /// Fast start: cuDNN's heuristics.
    #[default]
    Heuristic,
    /// Benchmarks every algorithm on the first run: slow first frame, sometimes faster after.
    Exhaustive,
    /// cuDNN's default algorithm, no search.
    Default,
}

/// Which execution provider runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Provider {
    /// ONNX Runtime's CPU provider.
    Cpu,
    /// The CUDA provider on this CUDA device ordinal.
    Cuda {
        /// CUDA device ordinal (found by UUID, never assumed).
        ordinal: i32,
    },
}

/// Session options.
#[derive(Debug, Clone)]
pub(crate) struct SessionConfig {
    /// The execution provider.
    pub(crate) provider: Provider,
    /// cuDNN algorithm search.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) conv_search: ConvSearch,
    /// Ask the CUDA EP to prefer NHWC kernels.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) prefer_nhwc: bool,
    /// The CUDA provider's `fuse_conv_bias`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fuse_conv_bias: bool,
    /// A CUDA stream (a raw `CUstream`) for the CUDA EP to run on, if any.
    pub(crate) cuda_stream: Option<*mut c_void>,
    /// CPU threads for the CPU provider (ONNX Runtime's default when None).
    pub(crate) threads: Option<usize>,
    /// What the caller declares about the model's tensors.
    pub(crate) declared: Declarations,
}

/// Checks that `path` is a model file this process can read: it exists, is
/// not a directory, and opens for reading. Each case has its own message, of
/// kind [`ErrorKind::ModelContract`](crate::ErrorKind::ModelContract). It
/// does not parse the model: [`ContextBuilder::build`](crate::ContextBuilder::build) does.
///
/// ```
/// use std::path::Path;
/// use neural_frame::{ErrorKind, check_model_file};
///
/// check_model_file(Path::new("models/test/tiny-x2-f32.onnx"))?;
/// let missing = check_model_file(Path::new("models/no-such-model.onnx")).expect_err("no such file");
/// assert_eq!(missing.kind(), ErrorKind::ModelContract);
/// assert!(missing.to_string().contains("no such file"), "{missing}");
/// let dir = check_model_file(Path::new("models")).expect_err("a directory");
/// assert!(dir.to_string().contains("is a directory"), "{dir}");
/// # Ok::<(), neural_frame::Error>(())
/// ```
pub fn check_model_file(path: &Path) -> Result<()> {
    let model_err = |message: String| Error::ModelContract { model: path.display().to_string(), message };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(model_err("no such file".into())),
        Err(e) => return Err(model_err(format!("cannot be looked up: {e}"))),
        Ok(m) if m.is_dir() => {
            return Err(model_err("is a directory, not an ONNX model file; give the path of the .onnx file".into()));
        }
        Ok(m) if !m.is_file() => return Err(model_err("is not a regular file, so not an ONNX model file".into())),
        Ok(_) => {}
    }
    match std::fs::File::open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(model_err(
            "cannot be read: permission denied; make the file readable by this user (e.g. chmod a+r)".into(),
        )),
        Err(e) => Err(model_err(format!("cannot be opened: {e}"))),
    }
}

/// The operators a rewritten model may hold (`convact.rs`): registered with every session.
fn custom_ops() -> Result<ort::operator::OperatorDomain> {
    crate::ops::domain().map_err(|e| Error::onnx("making the custom operators' domain", e))
}

/// Loads `path` with `config` and works out its contract.
///
/// # Safety
/// A `config.cuda_stream` must be a live CUDA stream of the device the
/// provider runs on, and must outlive the session.
pub(crate) unsafe fn create(path: &Path, config: &SessionConfig) -> Result<(Session, ModelContract)> {
    // One session is created at a time in the process: ONNX Runtime's CUDA provider has raced when
    // sessions on one GPU were created concurrently (microsoft/onnxruntime#26610,
    // docling-project/docling.rs#452), and `serve` builds a context per client, each with a fast
    // start's second session on a thread. Creation takes about 0.1 s; frames do not wait for it.
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = CREATING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let shown = path.display().to_string();
    let model_err = |message: String| Error::ModelContract { model: shown.clone(), message };
    check_model_file(path)?;
    let builder_err = |what: &str| {
        let what = what.to_string();
        move |e: ort::Error<ort::session::builder::SessionBuilder>| Error::onnx(what.clone(), e)
    };
    let env = crate::onnx::runtime::environment()?;
    let mut builder = Session::builder(env)
        .map_err(|e| Error::onnx("creating a session builder", e))?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(builder_err("setting the optimisation level"))?
        .with_operators(custom_ops()?)
        .map_err(builder_err("registering the fused convolution (ConvAct)"))?;
    match config.provider {
        Provider::Cpu => {
            if let Some(n) = config.threads {
                builder = builder.with_intra_threads(n).map_err(builder_err("setting threads"))?;
            }
        }
        #[cfg(not(feature = "cuda"))]
        Provider::Cuda { .. } => {
            return Err(Error::ProviderUnavailable {
                reason: "neural-frame was built without its `cuda` feature".into(),
            });
        }
        #[cfg(feature = "cuda")]
        Provider::Cuda { ordinal } => {
            let search = match config.conv_search {
                ConvSearch::Heuristic => ep::cuda::ConvAlgorithmSearch::Heuristic,
                ConvSearch::Exhaustive => ep::cuda::ConvAlgorithmSearch::Exhaustive,
                ConvSearch::Default => ep::cuda::ConvAlgorithmSearch::Default,
            };
            let mut cuda = ep::CUDA::default()
                .with_device_id(ordinal)
                .with_conv_algorithm_search(search)
                .with_prefer_nhwc(config.prefer_nhwc)
                .with_fuse_conv_bias(config.fuse_conv_bias);
            if let Some(stream) = config.cuda_stream {
                // SAFETY: the stream outlives the session (caller's contract).
                cuda = unsafe { cuda.with_compute_stream(stream.cast()) };
            }
            builder = builder
                .with_execution_providers([cuda.build().error_on_failure()])
                .map_err(crate::onnx::runtime::provider_failure)?;
        }
    }
    let t = std::time::Instant::now();
    let session = builder.commit_from_file(path).map_err(|e| {
        let text = e.to_string();
        if text.contains("Protobuf parsing failed") || text.contains("ModelProto") || text.contains("INVALID_PROTOBUF")
        {
            model_err(format!("is not an ONNX model ({text})"))
        } else {
            Error::onnx(format!("loading {shown}"), text)
        }
    })?;
    log::debug!("startup: ONNX Runtime's session committed ({:.0} ms)", t.elapsed().as_secs_f64() * 1e3);
    let mut probe = |inputs: &[(String, TensorKind)], size: (u32, u32)| probe_output_shapes(path, inputs, size);
    let contract = model::contract(&session, &shown, &config.declared, &mut probe)?;
    Ok((session, contract))
}

/// The output shapes of one run of the model at `width × height` on ONNX Runtime's
/// CPU provider (a session of its own, so the context's provider and stream stay
/// untouched), from mid-grey inputs: how a dynamic model without metadata tells
/// its scale, or checks the one its shape symbols claim.
fn probe_output_shapes(
    path: &Path,
    inputs: &[(String, TensorKind)],
    (width, height): (u32, u32),
) -> Result<Vec<Vec<i64>>> {
    let env = crate::onnx::runtime::environment()?;
    let err = |e: ort::Error| Error::onnx("the probe run", e);
    let start = std::time::Instant::now();
    let mut cpu = Session::builder(env)
        .map_err(|e| Error::onnx("creating the probe's session", e))?
        .with_operators(custom_ops()?)
        .map_err(|e| Error::onnx("registering the fused convolution (ConvAct)", e))?
        .commit_from_file(path)
        .map_err(|e| Error::onnx("loading the model for the probe run", e))?;
    let mut values: Vec<(String, ort::value::DynValue)> = Vec::new();
    for (name, kind) in inputs {
        let shape = kind.shape(width, height).map(|d| d as usize);
        let n = kind.elements(width, height) as usize;
        let value = match kind.element {
            Element::F16 => {
                ort::value::Tensor::from_array((shape, vec![half::f16::from_f32(0.5); n])).map_err(err)?.into_dyn()
            }
            Element::U8 => ort::value::Tensor::from_array((shape, vec![128u8; n])).map_err(err)?.into_dyn(),
            _ => ort::value::Tensor::from_array((shape, vec![0.5f32; n])).map_err(err)?.into_dyn(),
        };
        values.push((name.clone(), value));
    }
    let outputs = cpu.run(values).map_err(err)?;
    let mut shapes = Vec::new();
    for (_, value) in outputs.iter() {
        match value.dtype() {
            ort::value::ValueType::Tensor { shape, .. } => shapes.push(shape.to_vec()),
            other => return Err(Error::onnx("the probe run", format!("an output is {other:?}, not a tensor"))),
        }
    }
    log::info!(
        "{}: dynamic height/width; a probe run at {width}×{height} on the CPU gave {shapes:?} ({:.0} ms)",
        path.display(),
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(shapes)
}
