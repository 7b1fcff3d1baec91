//! Tuned options: what `neural-frame tune` measured as the fastest options for
//! one model and frame size on one GPU, kept in a JSON cache that contexts read.
//!
//! The options a context offers ([`Tuning`], with its [`CudaOptions`]) that
//! `tune` chooses are the CUDA provider's NHWC kernels and fused bias, CUDA
//! graphs, the CUDA passes, where the post pass waits and spin waits
//! ([`TunedOptions`]). Which of them is
//! fastest depends on the model, the frame size, the GPU, its driver and ONNX
//! Runtime, so an entry is keyed by all of them ([`TuneKey`]): a cache made on
//! one machine, for one model, says nothing about another, and is not used there.
//!
//! Pure logic and file input/output, no FFI: which candidates to measure
//! ([`first_round`], [`second_round`]), which one won ([`choose`]), and the
//! cache file ([`TuneCache`]). The measuring is `neural-frame tune`'s.
//!
//! ```no_run
//! use neural_frame::NeuralFrameContext;
//! use neural_frame::tune::{self, TuneKey};
//!
//! // A context built with the defaults, then rebuilt with what `neural-frame tune` chose, if anything.
//! let model = std::path::Path::new("models/upscale.onnx");
//! let ctx = NeuralFrameContext::builder(model).frame_size(960, 540).build()?;
//! let key = TuneKey::for_context(&ctx, model)?;
//! if let Some(entry) = tune::cached(&key)? {
//!     drop(ctx);
//!     let ctx = entry.chosen.apply_to(NeuralFrameContext::builder(model).frame_size(960, 540)).build()?;
//!     println!("tuned on {}: {}", entry.tuned_at_utc(), entry.chosen);
//!     # let _ = ctx;
//! }
//! # Ok::<(), neural_frame::Error>(())
//! ```
//!
//! The cache file (`{"version": 1, "entries": [...]}`, one entry per key) is
//! written by [`TuneCache::save`] to a temporary file beside it and renamed, so a
//! reader never sees half of it. Its place is [`TuneCache::default_path`]:
//! `$NEURAL_FRAME_TUNE_CACHE`, else `$XDG_CACHE_HOME/neural-frame/tune.json`,
//! else `~/.cache/neural-frame/tune.json`.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::context::setup::BackendReport;
use crate::context::{ContextBuilder, CudaOptions, NeuralFrameContext, PostWait, Tuning, TuningInEffect};
use crate::error::{Error, Result};
use crate::onnx::RuntimeInfo;
use crate::vulkan::AdapterInfo;

mod cache;
pub use cache::{TuneCache, cached};

/// The version of the cache file's format that this library reads and writes.
pub const CACHE_VERSION: u32 = 1;

/// The environment variable that names the cache file, over the XDG default
/// ([`TuneCache::default_path`]).
pub const CACHE_ENV: &str = crate::files::TUNE_CACHE_ENV;

/// Candidates whose pipelined throughput is within this fraction of the best
/// one's are tied; [`choose`] then takes the lowest synchronous median among
/// them (differences that small are run-to-run noise).
pub const TIE_TOLERANCE: f64 = 0.01;

/// What a tuned entry holds for: the model (by content), the backend, the GPU,
/// its driver, ONNX Runtime and the frame size. A cached entry is used only
/// where every field is equal.
///
/// ```
/// use neural_frame::tune::TuneKey;
///
/// let key = TuneKey::from_values(
///     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
///     "cuda",
///     "73ca0102-0304-0506-0708-090a0b0c0d77",
///     "NVIDIA H200",
///     "NVIDIA 580.95.05",
///     "1.31.1",
///     (960, 540),
/// );
/// assert_eq!(key.width, 960);
/// assert_ne!(key, TuneKey { height: 1080, ..key.clone() });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TuneKey {
    /// The model file's SHA-256, as 64 lowercase hex digits ([`model_sha256`]).
    pub model_sha256: String,
    /// The backend that ran: `"cuda"` or `"cpu"` ([`BackendReport::backend`]).
    pub backend: String,
    /// The Vulkan `deviceUUID` as text (on NVIDIA, the CUDA device's UUID).
    pub gpu_uuid: String,
    /// The device's name.
    pub gpu_name: String,
    /// The driver: its `driverName` and `driverInfo` (the version), as one text.
    pub driver: String,
    /// ONNX Runtime's version.
    pub runtime_version: String,
    /// Frame width (input pixels).
    pub width: u32,
    /// Frame height (input pixels).
    pub height: u32,
}

impl TuneKey {
    /// The key of a built context for `model` (the file it was built from: the
    /// context does not keep it): the model file's SHA-256, and the backend,
    /// device, driver, ONNX Runtime and frame size from the context's
    /// [`report`](NeuralFrameContext::report).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    /// use neural_frame::tune::TuneKey;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// let key = TuneKey::for_context(&ctx, "models/upscale.onnx".as_ref())?;
    /// println!("{} on {} ({}), {}×{}", key.model_sha256, key.gpu_name, key.driver, key.width, key.height);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn for_context(ctx: &NeuralFrameContext, model: &Path) -> Result<Self> {
        Self::for_report(ctx.report(), model, ctx.frame_size())
    }

    /// The key for `model` on what `report` describes, at `size` (width, height).
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    /// use neural_frame::tune::TuneKey;
    ///
    /// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// // The same device and runtime at another frame size: another key.
    /// let key = TuneKey::for_report(ctx.report(), "models/upscale.onnx".as_ref(), (1920, 1080))?;
    /// assert_ne!(key, TuneKey::for_context(&ctx, "models/upscale.onnx".as_ref())?);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn for_report(report: &BackendReport, model: &Path, size: (u32, u32)) -> Result<Self> {
        Self::for_device(model, report.backend, &report.vulkan_device, &report.runtime, size)
    }

    /// The key for `model` on `backend` (`"cuda"` or `"cpu"`), `device` and
    /// `runtime`, at `size` (width, height): for code that has these before a
    /// context exists.
    ///
    /// ```no_run
    /// use neural_frame::{Backend, NeuralFrameContext};
    /// use neural_frame::tune::TuneKey;
    ///
    /// let device = &neural_frame::suitable_devices(Backend::Cuda)?[0];
    /// let runtime = neural_frame::load_onnx_runtime(None)?;
    /// let key = TuneKey::for_device("models/upscale.onnx".as_ref(), "cuda", device, &runtime, (960, 540))?;
    /// # let _ = key;
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn for_device(
        model: &Path,
        backend: &str,
        device: &AdapterInfo,
        runtime: &RuntimeInfo,
        size: (u32, u32),
    ) -> Result<Self> {
        let driver = format!("{} {}", device.driver_name, device.driver_info).trim().to_string();
        Ok(Self::from_values(model_sha256(model)?, backend, &device.uuid, &device.name, driver, &runtime.version, size))
    }

    /// A key from plain values (tests, tools that keep their own records).
    ///
    /// ```
    /// use neural_frame::tune::TuneKey;
    ///
    /// let key = TuneKey::from_values("ab12", "cpu", "uuid", "llvmpipe", "llvmpipe Mesa 25.0", "1.31.1", (32, 24));
    /// assert_eq!((key.backend.as_str(), key.width, key.height), ("cpu", 32, 24));
    /// ```
    pub fn from_values(
        model_sha256: impl Into<String>,
        backend: impl Into<String>,
        gpu_uuid: impl Into<String>,
        gpu_name: impl Into<String>,
        driver: impl Into<String>,
        runtime_version: impl Into<String>,
        (width, height): (u32, u32),
    ) -> Self {
        Self {
            model_sha256: model_sha256.into(),
            backend: backend.into(),
            gpu_uuid: gpu_uuid.into(),
            gpu_name: gpu_name.into(),
            driver: driver.into(),
            runtime_version: runtime_version.into(),
            width,
            height,
        }
    }
}

impl fmt::Display for TuneKey {
    /// `model 9f86d081… at 960×540, cuda on "NVIDIA H200" (UUID …, NVIDIA 580.95.05), ONNX Runtime 1.31.1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.model_sha256.get(..12).unwrap_or(&self.model_sha256);
        write!(
            f,
            "model {short}… at {}×{}, {} on \"{}\" (UUID {}, {}), ONNX Runtime {}",
            self.width, self.height, self.backend, self.gpu_name, self.gpu_uuid, self.driver, self.runtime_version
        )
    }
}

/// The SHA-256 of a file, as 64 lowercase hex digits: how a [`TuneKey`] names
/// a model (by content, so a model replaced at the same path is a new one).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("neural-frame-doc-{}-sha", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("model.onnx"), b"test")?;
/// let sha = neural_frame::tune::model_sha256(&dir.join("model.onnx"))?;
/// assert_eq!(sha, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn model_sha256(path: &Path) -> Result<String> {
    let io = |source| Error::Io { what: format!("reading the model {} to hash it", path.display()), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// What `neural-frame tune` chooses, and what the tune cache stores: the CUDA options
/// ([`CudaOptions`], serialised flat as the builder takes them) and the spin wait. Of the CUDA
/// options the tune chooses the NHWC kernels, the fused bias, CUDA graphs, the CUDA passes and
/// the post wait; a context that reads an entry takes those, and keeps the caller's others
/// ([`apply`]).
///
/// ```no_run
/// use neural_frame::{CudaOptions, NeuralFrameContext, PostWait};
/// use neural_frame::tune::TunedOptions;
///
/// let options = TunedOptions { cuda: CudaOptions::default().with_post_wait(PostWait::Host), spin_wait: false };
/// // Forced: the tune cache is not read, and there is no fallback where cuDNN refuses NHWC.
/// let ctx = options.apply_to(NeuralFrameContext::builder("models/upscale.onnx")).frame_size(960, 540).build()?;
/// println!("{options} (in effect: {})", TunedOptions::in_effect(&ctx.tuning()));
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunedOptions {
    /// The CUDA options ([`ContextBuilder::cuda_options`]), serialised flat.
    #[serde(flatten)]
    pub cuda: CudaOptions,
    /// Frames waited for by polling ([`ContextBuilder::spin_wait`]).
    #[serde(default)]
    pub spin_wait: bool,
}

impl TunedOptions {
    /// What `tuning` asks for (what a caller gives [`ContextBuilder::tuning`]).
    ///
    /// ```
    /// use neural_frame::Tuning;
    /// use neural_frame::tune::TunedOptions;
    ///
    /// let d = TunedOptions::from_tuning(&Tuning::default()).cuda;
    /// assert!(d.provider.prefer_nhwc && d.provider.fuse_conv_bias && d.provider.cuda_graph && d.handover.cuda_passes);
    /// ```
    pub fn from_tuning(tuning: &Tuning) -> Self {
        Self { cuda: tuning.cuda, spin_wait: tuning.spin_wait }
    }

    /// What a context runs with ([`NeuralFrameContext::tuning`]): off the CUDA backend, where
    /// no CUDA option is in effect, every chosen CUDA option off and the post pass waiting on
    /// the GPU (as [`first_round`] asks there).
    ///
    /// ```
    /// use neural_frame::tune::TunedOptions;
    /// use neural_frame::{CudaOptions, PostWait, TuningInEffect};
    ///
    /// let cpu = TuningInEffect { gpu_timestamps: true, spin_wait: true, cuda: None };
    /// let o = TunedOptions::in_effect(&cpu);
    /// assert!(!o.cuda.provider.prefer_nhwc && !o.cuda.provider.cuda_graph && !o.cuda.handover.cuda_passes && o.spin_wait);
    /// assert_eq!(o.cuda.handover.post_wait, PostWait::Gpu);
    /// let cuda = TuningInEffect { cuda: Some(CudaOptions::default()), ..cpu };
    /// assert!(TunedOptions::in_effect(&cuda).cuda.provider.cuda_graph);
    /// ```
    pub fn in_effect(tuning: &TuningInEffect) -> Self {
        let cuda = tuning.cuda.unwrap_or_else(|| {
            CudaOptions::default()
                .with_prefer_nhwc(false)
                .with_cuda_graph(false)
                .with_cuda_passes(false)
                .with_post_wait(PostWait::Gpu)
        });
        Self { cuda, spin_wait: tuning.spin_wait }
    }

    /// `builder` with these options forced ([`ContextBuilder::tuning`], the builder's GPU
    /// timestamps kept): as a caller's own choice, so the tune cache is not read and the
    /// context does not fall back from NHWC kernels that cuDNN refuses. The builder's other
    /// settings stay.
    ///
    /// ```no_run
    /// use neural_frame::{CudaOptions, NeuralFrameContext};
    /// use neural_frame::tune::TunedOptions;
    ///
    /// let nchw = TunedOptions { cuda: CudaOptions::default().with_prefer_nhwc(false), spin_wait: false };
    /// let ctx = nchw.apply_to(NeuralFrameContext::builder("models/upscale.onnx").slots(4)).frame_size(960, 540).build()?;
    /// assert!(ctx.tuning().cuda.is_none_or(|c| !c.provider.prefer_nhwc)); // `cuda` is None off the CUDA backend
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    #[must_use]
    pub fn apply_to(&self, builder: ContextBuilder) -> ContextBuilder {
        let tuning = Tuning { cuda: self.cuda, spin_wait: self.spin_wait, ..builder.tuning };
        builder.tuning(tuning)
    }

    /// The names of the chosen options that differ between `self` and `other`
    /// (`"NHWC kernels"`, `"fused bias"`, `"CUDA graphs"`, `"CUDA passes"`,
    /// `"post wait"`, `"spin wait"`): what a context did not put in effect.
    ///
    /// ```
    /// use neural_frame::Tuning;
    /// use neural_frame::tune::TunedOptions;
    ///
    /// let asked = TunedOptions::from_tuning(&Tuning::default());
    /// let ran = TunedOptions { cuda: asked.cuda.with_cuda_graph(false), ..asked };
    /// assert_eq!(asked.differences(&ran), ["CUDA graphs"]);
    /// ```
    pub fn differences(&self, other: &TunedOptions) -> Vec<&'static str> {
        let (a, b) = (&self.cuda, &other.cuda);
        [
            (a.provider.prefer_nhwc != b.provider.prefer_nhwc, "NHWC kernels"),
            (a.provider.fuse_conv_bias != b.provider.fuse_conv_bias, "fused bias"),
            (a.provider.cuda_graph != b.provider.cuda_graph, "CUDA graphs"),
            (a.handover.cuda_passes != b.handover.cuda_passes, "CUDA passes"),
            (a.handover.post_wait != b.handover.post_wait, "post wait"),
            (self.spin_wait != other.spin_wait, "spin wait"),
        ]
        .into_iter()
        .filter_map(|(differs, name)| differs.then_some(name))
        .collect()
    }
}

impl fmt::Display for TunedOptions {
    /// `NHWC, bias fused, graphs on, CUDA passes, post wait gpu, spin off`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |b: bool| if b { "on" } else { "off" };
        let (p, h) = (&self.cuda.provider, &self.cuda.handover);
        write!(
            f,
            "{}, bias {}, graphs {}, {} passes, post wait {}, spin {}",
            if p.prefer_nhwc { "NHWC" } else { "NCHW" },
            if p.fuse_conv_bias { "fused" } else { "apart" },
            on(p.cuda_graph),
            if h.cuda_passes { "CUDA" } else { "Vulkan" },
            post_wait_name(h.post_wait),
            on(self.spin_wait)
        )
    }
}

/// `tuning` with the fields that the tune chooses taken from `options` (the NHWC kernels, the
/// fused bias, CUDA graphs, the CUDA passes, the post wait and the spin wait), the others (the
/// convolution search, the timestamps, the side-stream wait, the model's preparation) kept.
///
/// ```
/// use neural_frame::{ConvSearch, CudaOptions, PostWait, Tuning};
/// use neural_frame::tune::{self, TunedOptions};
///
/// let mine = Tuning { cuda: CudaOptions::default().with_conv_search(ConvSearch::Exhaustive), ..Tuning::default() };
/// let options = TunedOptions { cuda: CudaOptions::default().with_cuda_graph(false).with_post_wait(PostWait::Host), spin_wait: false };
/// let tuned = tune::apply(mine, &options).cuda;
/// assert_eq!((tuned.provider.cuda_graph, tuned.handover.post_wait, tuned.provider.conv_search), (false, PostWait::Host, ConvSearch::Exhaustive));
/// ```
pub fn apply(tuning: Tuning, options: &TunedOptions) -> Tuning {
    let (mut cuda, o) = (tuning.cuda, &options.cuda);
    cuda.provider.prefer_nhwc = o.provider.prefer_nhwc;
    cuda.provider.fuse_conv_bias = o.provider.fuse_conv_bias;
    cuda.provider.cuda_graph = o.provider.cuda_graph;
    cuda.handover.cuda_passes = o.handover.cuda_passes;
    cuda.handover.post_wait = o.handover.post_wait;
    Tuning { spin_wait: options.spin_wait, cuda, ..tuning }
}

/// The first round of candidates on a backend (`cuda`: the CUDA backend).
///
/// CUDA: NHWC kernels with the bias fused, NHWC with it apart, and NCHW, each
/// with CUDA graphs on and off, all with the CUDA passes; then, for the record,
/// the default kernels and graphs with the Vulkan passes (7). The post pass waits
/// on the GPU and spin waits are off throughout: [`second_round`] varies them.
///
/// CPU: every CUDA-only option is off (not in effect there), and spin waits off
/// and on (2): the one option in effect on the CPU backend.
///
/// ```
/// use neural_frame::tune;
///
/// assert_eq!(tune::first_round(true).len(), 7);
/// assert!(tune::first_round(false).iter().all(|o| !o.cuda.provider.cuda_graph && !o.cuda.handover.cuda_passes && !o.cuda.provider.prefer_nhwc));
/// ```
pub fn first_round(cuda: bool) -> Vec<TunedOptions> {
    let off = CudaOptions::default()
        .with_prefer_nhwc(false)
        .with_cuda_graph(false)
        .with_cuda_passes(cuda)
        .with_post_wait(PostWait::Gpu);
    let base = TunedOptions { cuda: off, spin_wait: false };
    if !cuda {
        return vec![base, TunedOptions { spin_wait: true, ..base }];
    }
    let mut round = Vec::new();
    for (prefer_nhwc, fuse_conv_bias) in [(true, true), (true, false), (false, false)] {
        for cuda_graph in [true, false] {
            let cuda =
                off.with_prefer_nhwc(prefer_nhwc).with_fuse_conv_bias(fuse_conv_bias).with_cuda_graph(cuda_graph);
            round.push(TunedOptions { cuda, ..base });
        }
    }
    round.push(TunedOptions { cuda: round[0].cuda.with_cuda_passes(false), ..round[0] });
    round
}

/// The second round: `best` of the first with the post pass waiting on the GPU
/// or on the host, and spin waits off or on (CUDA: the three combinations the
/// first round did not measure; CPU: none, the first round measured spin waits).
///
/// ```
/// use neural_frame::tune;
///
/// let best = tune::first_round(true)[0];
/// let second = tune::second_round(true, &best);
/// assert_eq!(second.len(), 3);
/// assert!(second.iter().all(|o| o.cuda.provider == best.cuda.provider));
/// assert!(tune::second_round(false, &tune::first_round(false)[1]).is_empty());
/// ```
pub fn second_round(cuda: bool, best: &TunedOptions) -> Vec<TunedOptions> {
    if !cuda {
        return Vec::new();
    }
    let mut round = Vec::new();
    for post_wait in [PostWait::Gpu, PostWait::Host] {
        for spin_wait in [false, true] {
            let candidate = TunedOptions { cuda: best.cuda.with_post_wait(post_wait), spin_wait };
            if candidate != *best {
                round.push(candidate);
            }
        }
    }
    round
}

/// One candidate's measurement: the options asked for, what the context put in
/// effect, and its numbers, or why it could not run.
///
/// ```
/// use neural_frame::Tuning;
/// use neural_frame::tune::{Candidate, TunedOptions};
///
/// let options = TunedOptions::from_tuning(&Tuning::default());
/// let ran = Candidate::measured(options, options, 3.36, 297.1);
/// let refused = Candidate::failed(options, None, "cuDNN refused the fused bias");
/// assert!(ran.ok && !refused.ok);
/// assert_eq!(refused.error.as_deref(), Some("cuDNN refused the fused bias"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The options, forced through the builder.
    pub options: TunedOptions,
    /// The options in effect ([`NeuralFrameContext::tuning`]): without CUDA
    /// graphs for a model with outputs that are not images, without the CUDA
    /// options on the CPU backend. Absent when the context did not build.
    pub in_effect: Option<TunedOptions>,
    /// The median time of a frame, one at a time (ms).
    pub sync_median_ms: Option<f64>,
    /// Frames per second with the ring full.
    pub pipelined_fps: Option<f64>,
    /// Whether it built and ran.
    pub ok: bool,
    /// Why it did not.
    pub error: Option<String>,
}

impl Candidate {
    /// A candidate that ran (a non-finite number is kept as absent).
    pub fn measured(options: TunedOptions, in_effect: TunedOptions, sync_median_ms: f64, pipelined_fps: f64) -> Self {
        let finite = |v: f64| v.is_finite().then_some(v);
        Self {
            options,
            in_effect: Some(in_effect),
            sync_median_ms: finite(sync_median_ms),
            pipelined_fps: finite(pipelined_fps),
            ok: true,
            error: None,
        }
    }

    /// A candidate that did not build (`in_effect` absent) or did not run.
    pub fn failed(options: TunedOptions, in_effect: Option<TunedOptions>, error: impl fmt::Display) -> Self {
        Self {
            options,
            in_effect,
            sync_median_ms: None,
            pipelined_fps: None,
            ok: false,
            error: Some(error.to_string()),
        }
    }
}

/// The winner among `candidates`: the highest pipelined throughput, candidates
/// within [`TIE_TOLERANCE`] of it tied, and among those the lowest synchronous
/// median (then the earlier one). Candidates that failed or lack a number are
/// left out; `None` when none is left.
///
/// ```
/// use neural_frame::Tuning;
/// use neural_frame::tune::{self, Candidate, TunedOptions};
///
/// let o = TunedOptions::from_tuning(&Tuning::default());
/// let candidates = [
///     Candidate::measured(o, o, 3.4, 300.0),
///     Candidate::measured(o, o, 3.1, 299.0), // tied on throughput, lower latency: chosen
///     Candidate::measured(o, o, 2.0, 250.0),
///     Candidate::failed(o, None, "did not build"),
/// ];
/// assert_eq!(tune::choose(&candidates), Some(1));
/// assert_eq!(tune::choose(&candidates[3..]), None);
/// ```
pub fn choose(candidates: &[Candidate]) -> Option<usize> {
    let ran: Vec<(usize, f64, f64)> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| c.ok)
        .filter_map(|(i, c)| Some((i, c.pipelined_fps?, c.sync_median_ms?)))
        .collect();
    let best_fps = ran.iter().map(|&(_, fps, _)| fps).max_by(f64::total_cmp)?;
    ran.into_iter()
        .filter(|&(_, fps, _)| fps >= best_fps * (1.0 - TIE_TOLERANCE))
        .min_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)))
        .map(|(i, _, _)| i)
}

/// One tuned key: the options chosen, every candidate's numbers, how and when
/// they were measured.
///
/// ```
/// use neural_frame::Tuning;
/// use neural_frame::tune::{Candidate, TuneEntry, TuneKey, TunedOptions};
///
/// let key = TuneKey::from_values("ab12", "cuda", "uuid", "NVIDIA H200", "NVIDIA 580.95.05", "1.31.1", (960, 540));
/// let fast = TunedOptions::from_tuning(&Tuning::default());
/// let slow = TunedOptions { cuda: fast.cuda.with_cuda_graph(false), ..fast };
/// let candidates = vec![Candidate::measured(slow, slow, 3.6, 270.0), Candidate::measured(fast, fast, 3.3, 298.0)];
/// let entry = TuneEntry::from_candidates(key, candidates, 100, 10).expect("a candidate ran");
/// assert_eq!(entry.chosen, fast);
/// assert_eq!(entry.chosen_candidate().and_then(|c| c.pipelined_fps), Some(298.0));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    /// What it holds for.
    pub key: TuneKey,
    /// The options chosen ([`choose`]).
    pub chosen: TunedOptions,
    /// Every candidate measured, in the order measured.
    pub candidates: Vec<Candidate>,
    /// Timed frames per candidate, in each of the synchronous and the pipelined run.
    pub frames: usize,
    /// Untimed frames per candidate first.
    pub warmup: usize,
    /// When, in seconds since the Unix epoch (UTC).
    pub tuned_at_unix_s: u64,
    /// Which library measured it (`neural-frame 0.1.0`).
    pub tuned_by: String,
}

impl TuneEntry {
    /// An entry for `key` from the measured `candidates`, with the winner
    /// ([`choose`]) as its options and the time now; `None` when no candidate ran.
    pub fn from_candidates(key: TuneKey, candidates: Vec<Candidate>, frames: usize, warmup: usize) -> Option<Self> {
        let chosen = candidates[choose(&candidates)?].options;
        let tuned_at_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let tuned_by = format!("neural-frame {}", env!("CARGO_PKG_VERSION"));
        Some(Self { key, chosen, candidates, frames, warmup, tuned_at_unix_s, tuned_by })
    }

    /// The candidate whose options were chosen.
    pub fn chosen_candidate(&self) -> Option<&Candidate> {
        self.candidates.iter().find(|c| c.ok && c.options == self.chosen)
    }

    /// When it was tuned, as `2026-12-03T14:05:09Z`.
    ///
    /// ```
    /// # use neural_frame::tune::{Candidate, TuneEntry, TuneKey, TunedOptions};
    /// # let o = TunedOptions::from_tuning(&neural_frame::Tuning::default());
    /// # let key = TuneKey::from_values("ab12", "cpu", "u", "llvmpipe", "d", "1.31.1", (8, 8));
    /// let mut entry = TuneEntry::from_candidates(key, vec![Candidate::measured(o, o, 1.0, 1.0)], 1, 0).expect("ran");
    /// entry.tuned_at_unix_s = 1_796_306_709;
    /// assert_eq!(entry.tuned_at_utc(), "2026-12-03T14:05:09Z");
    /// ```
    pub fn tuned_at_utc(&self) -> String {
        utc_text(self.tuned_at_unix_s)
    }
}

/// A context's builder with the tune cache's options for its key, and where they
/// came from; `None` where the caller chose options, the cache has no entry, or it
/// cannot be read (said in the log: the context then takes the defaults).
pub(crate) fn for_builder(b: &ContextBuilder, report: &BackendReport) -> Option<(ContextBuilder, String)> {
    if b.tuning_forced {
        return None;
    }
    let path = TuneCache::default_path().filter(|p| p.exists())?;
    let looked_up =
        TuneKey::for_report(report, &b.model, b.size).and_then(|key| Ok(TuneCache::load(&path)?.lookup(&key).cloned()));
    match looked_up {
        Ok(Some(entry)) => {
            let mut tuned = b.clone();
            tuned.tuning = apply(b.tuning, &entry.chosen);
            let from = format!("the tune cache {} (tuned {}: {})", path.display(), entry.tuned_at_utc(), entry.chosen);
            log::info!("options from {from}");
            Some((tuned, from))
        }
        Ok(None) => None,
        Err(e) => {
            log::warn!("the tune cache is not used: {e}");
            None
        }
    }
}

fn post_wait_name(wait: PostWait) -> &'static str {
    match wait {
        PostWait::Gpu => "gpu",
        PostWait::Host => "host",
    }
}

/// Seconds since the Unix epoch as an RFC 3339 UTC time (the proleptic
/// Gregorian calendar, Howard Hinnant's `civil_from_days`).
fn utc_text(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3_600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
pub(super) mod tests;
