//! Precision: an fp32 model runs in fp16 on the CUDA backend where that pays and
//! keeps its results.
//!
//! With [`Precision::Auto`] (the default) a model whose graph inputs or outputs are
//! float32 is converted to float16 ([`fp16`](crate::graph::fp16)) when
//! - its convolutions and matrix products are the bulk of its work
//!   ([`compute_share`](crate::graph::share::compute_share)) and heavy enough for fp16 to pay
//!   ([`MIN_MACS_PER_PIXEL`]), and
//! - one probe frame (a textured pattern, [`CHECK_SIZE`] or the model's own fixed size)
//!   through both models on this GPU's CUDA provider agrees on every output: each 8-bit
//!   output's PSNR at least [`MIN_PSNR_DB`] and no channel off by more than
//!   [`MAX_ERROR_LEVELS`] of 255 (an output that is not an image, on 255 levels of its
//!   largest fp32 magnitude).
//!
//! The converted model and the check's result are cached beside the tune cache
//! (`precision/` in its directory), keyed by the model's SHA-256 (and, for the
//! check, the GPU, its driver and ONNX Runtime, the caller's declarations about the
//! model's tensors and the CUDA provider's kernel options), so the conversion and the
//! check run once. The CPU backend keeps the model's own precision.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::graph::fp16::{self, Fp16Options};
use crate::graph::proto::{ModelProto, data_type};

/// The precision a model runs in (CUDA backend).
///
/// ```no_run
/// use neural_frame::{NeuralFrameContext, Precision};
///
/// // The fp32 file runs in fp16 where the check on a probe frame passes (the default) …
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// println!("{}", ctx.precision().reason);
/// // … or as it is.
/// let exact = NeuralFrameContext::builder("models/upscale.onnx").map_cuda_options(|c| c.with_precision(Precision::Fp32)).frame_size(960, 540).build()?;
/// assert_eq!(exact.precision().running, "fp32");
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// An fp32 model runs in fp16 where its work is mostly convolutions and matrix
    /// products and a probe frame's fp16 result stays within the tolerance of its fp32
    /// result; otherwise, and on the CPU backend, the model's own precision.
    #[default]
    Auto,
    /// Never converted: the model's own precision, fp32 for an fp32 model (an fp16 model
    /// stays fp16, with a warning: fp32 would need its fp32 original).
    Fp32,
    /// An fp32 model converted to fp16 without the check (CUDA backend).
    Fp16,
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Fp32 => "fp32",
            Self::Fp16 => "fp16",
        })
    }
}

/// `Auto` converts only models with at least this many multiply-adds per input pixel in
/// their convolutions and matrix products: below it a model is bound by memory and launch
/// overheads, and fp16 saves little (realesr-animevideov3 has 6.2·10⁵; the tiny test
/// models about 10³).
pub const MIN_MACS_PER_PIXEL: f64 = 1e4;

/// The probe frame of the check: its input size (a model with a fixed size uses its own).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub const CHECK_SIZE: (u32, u32) = (96, 64);
/// The check's least PSNR of the 8-bit output, fp16 against fp32, in dB.
pub const MIN_PSNR_DB: f64 = 45.0;
/// The check's largest difference of one 8-bit output channel, fp16 against fp32.
pub const MAX_ERROR_LEVELS: u32 = 16;

/// The probe frame's comparison, fp16 against fp32, on each of the model's outputs as
/// 8-bit values: its image outputs as 8-bit pixels, an output that is not an image (a
/// score, a vector) on 255 levels of its largest fp32 magnitude (of 1 where it is all 0).
/// The numbers are those of one output, [`output`](Self::output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecisionCheck {
    /// PSNR of [`output`](Self::output) as 8-bit values, in dB (infinite: equal).
    pub psnr_db: f64,
    /// The largest difference of one of [`output`](Self::output)'s values, in levels of 255
    /// (rounded up where the output is not an image).
    pub max_error_levels: u32,
    /// The output the numbers are of: of the outputs out of tolerance where any is, else of
    /// all, the one with the lowest PSNR (on a tie the first of the main output, the extra
    /// image outputs and the other outputs, in that order).
    #[serde(default)]
    pub output: String,
    /// The probe frame's input size that ran: 96×64, or the model's own where its input size
    /// is fixed.
    pub size: (u32, u32),
    /// Whether every output is within the tolerance (PSNR at least 45 dB, no value off by more
    /// than 16 levels).
    pub passed: bool,
}

/// What precision runs, and why ([`NeuralFrameContext::precision`](crate::NeuralFrameContext::precision)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrecisionReport {
    /// What was asked for.
    pub asked: Precision,
    /// The model file's precision: `"fp32"`, `"fp16"` or `"other"` (integer inputs and outputs).
    pub model: &'static str,
    /// What runs: `"fp32"`, `"fp16"` or `"other"`.
    pub running: &'static str,
    /// Why, in a sentence.
    pub reason: String,
    /// The probe frame's check, where one ran (or was read from the cache).
    pub check: Option<PrecisionCheck>,
    /// The converted model that runs, where one does.
    pub converted: Option<PathBuf>,
    /// The graph rewrites applied before (CUDA backend; exact, see
    /// [`CudaOptions::with_rewrite_graph`](crate::CudaOptions::with_rewrite_graph)), one line each.
    pub rewrites: Vec<String>,
}

/// The model a session loads, and the report.
pub(crate) struct Resolved {
    pub(crate) path: PathBuf,
    pub(crate) report: PrecisionReport,
}

/// How the check runs the two models: a closure that takes a model path and returns its
/// probe frame, ready to run (`probe_pixels` on the context's CUDA provider, in practice).
pub(crate) type ProbeRun<'a> = dyn FnMut(&Path) -> Result<Probe<'a>> + 'a;

/// One model's probe frame, ready to run: nothing runs until [`run`](Self::run), so that a
/// check read from the cache runs no model.
pub(crate) struct Probe<'a> {
    /// What besides the model file and the GPU changes the probe's result (the caller's
    /// declarations about the model's tensors, the provider's kernel options), in words:
    /// part of the check's cache key. The same for both models of one check.
    pub(crate) options: String,
    run: Box<dyn FnOnce() -> Result<ProbeOutputs> + 'a>,
}

impl<'a> Probe<'a> {
    /// The probe frame that `run` runs, under `options` ([`options`](Self::options)).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn new(options: String, run: impl FnOnce() -> Result<ProbeOutputs> + 'a) -> Self {
        Self { options, run: Box::new(run) }
    }

    /// Runs the probe frame through the model.
    pub(crate) fn run(self) -> Result<ProbeOutputs> {
        (self.run)()
    }
}

/// What one probe frame through a model gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProbeOutputs {
    /// The input size that ran: [`CHECK_SIZE`], or the model's own where its input size is fixed.
    pub(crate) size: (u32, u32),
    /// Every output by name: the main output, the extra image outputs, then the outputs that
    /// are not images (the contract's order).
    pub(crate) outputs: Vec<(String, ProbeValues)>,
}

/// One output of a probe frame.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) enum ProbeValues {
    /// An image output as 8-bit colour values (the tensor's normalisation undone, clamped,
    /// rounded), in the tensor's own order.
    Pixels(Vec<u8>),
    /// An output that is not an image (a score, a vector), its values as they are.
    Values(Vec<f32>),
}

/// The model file's precision from its graph's inputs and outputs (initializers excluded).
pub(crate) fn model_precision(bytes: &[u8]) -> Result<&'static str> {
    let m = ModelProto::decode_model(bytes, "read for its precision")?;
    let Some(g) = m.graph.as_ref() else {
        return Ok("other");
    };
    let weights: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let types: Vec<i32> = g
        .input
        .iter()
        .filter(|v| !weights.contains(v.name.as_deref().unwrap_or_default()))
        .chain(g.output.iter())
        .filter_map(|v| v.elem_type())
        .collect();
    Ok(if types.contains(&data_type::FLOAT) {
        "fp32"
    } else if types.contains(&data_type::FLOAT16) {
        "fp16"
    } else {
        "other"
    })
}

use crate::files::{model_cache_dir, sha256_hex, write_atomically};

/// The fp16 conversion of `bytes`, from the cache or made (and cached) now.
fn converted(bytes: &[u8], sha: &str, dir: Option<&Path>) -> Result<PathBuf> {
    let dir = dir.ok_or_else(|| {
        Error::InvalidArgument(
            "no cache directory for the converted model: set HOME, XDG_CACHE_HOME or NEURAL_FRAME_TUNE_CACHE, or \
             ask for --precision fp32 (Precision::Fp32)"
                .into(),
        )
    })?;
    // The converter's version is part of the name: a changed conversion makes a new file.
    let path = dir.join(format!("{}-fp16-v{}.onnx", &sha[..16], CONVERTER_VERSION));
    if path.is_file() {
        log::debug!("precision: the fp16 model from the cache {}", path.display());
        return Ok(path);
    }
    let t = std::time::Instant::now();
    // The reference's block list but Resize and Upsample: nearest resampling is exact in
    // fp16 (their scales and roi stay fp32), and two Casts at output resolution would cost
    // more than they keep.
    let mut options = Fp16Options::default();
    options.op_block_list.retain(|op| op != "Resize" && op != "Upsample");
    let model = fp16::to_fp16(bytes, &options)?;
    write_atomically(&path, &model.bytes).map_err(|e| {
        Error::InvalidArgument(format!("the fp16 model could not be cached, and a session loads it from a file ({e})"))
    })?;
    log::info!(
        "precision: converted to fp16 in {:.0} ms ({} tensors, {} nodes kept fp32{}): {}",
        t.elapsed().as_secs_f64() * 1e3,
        model.report.tensors_converted,
        model.report.kept_fp32.len(),
        if model.report.clamped.is_empty() {
            String::new()
        } else {
            format!(", values clipped in {} tensors", model.report.clamped.len())
        },
        path.display()
    );
    Ok(path)
}

/// Bumped when the conversion changes, so that cached conversions are made again.
const CONVERTER_VERSION: u32 = 1;

/// Bumped when the layout rewrites change what they write (2: the fold applies to fp16
/// models too), so that a cached rewrite of the old kind is not read.
const LAYOUT_VERSION: u32 = 2;

/// The check of `converted` against `original`, from the cache (for `gpu` and the probe's
/// options) or run now.
fn checked(
    original: &Path,
    converted: &Path,
    sha: &str,
    gpu: &str,
    probe: &mut ProbeRun<'_>,
) -> Result<PrecisionCheck> {
    // The version in the name: a file of an earlier key or line format is never read.
    let file = converted.with_extension(format!("checks-v{CHECK_VERSION}.tsv"));
    let mut checks = read_checks(&file);
    let fp32 = probe(original)?;
    let key = format!("{gpu} / {} / {}", &sha[..16], fp32.options);
    if let Some(c) = checks.get(&key) {
        return Ok(c.clone());
    }
    let t = std::time::Instant::now();
    let options = fp32.options.clone();
    let want = fp32.run()?;
    let fp16 = probe(converted)?;
    if fp16.options != options {
        return Err(Error::internal(format!(
            "the fp16 model's probe runs under other options ({}) than the fp32 model's ({options})",
            fp16.options
        )));
    }
    let got = fp16.run()?;
    let check = judge(&want, &got)?;
    log::info!(
        "precision: the probe frame ({}×{}) in fp16 against fp32: {}, output `{}` PSNR {:.1} dB, largest difference {} \
         of 255 ({:.0} ms)",
        check.size.0,
        check.size.1,
        if check.passed { "within the tolerance" } else { "out of the tolerance" },
        check.output,
        check.psnr_db,
        check.max_error_levels,
        t.elapsed().as_secs_f64() * 1e3
    );
    checks.insert(key, check.clone());
    // A check that cannot be cached runs again next time: said, not fatal.
    if let Err(e) = write_atomically(&file, write_checks(&checks).as_bytes()) {
        log::warn!("precision: the check's result is not cached ({e})");
    }
    Ok(check)
}

/// Bumped when the check's key, its file's lines or the probe frame change, so that the
/// checks cached before are not read (they run again).
const CHECK_VERSION: u32 = 2;

/// The comparison of the fp16 model's probe outputs (`got`) with the fp32 model's (`want`):
/// every output within the tolerance, or the check fails; the numbers of the worst one.
fn judge(want: &ProbeOutputs, got: &ProbeOutputs) -> Result<PrecisionCheck> {
    if want.size != got.size {
        return Err(Error::internal(format!(
            "the fp16 model's probe frame is {}×{}, the fp32 model's {}×{}",
            got.size.0, got.size.1, want.size.0, want.size.1
        )));
    }
    let names = |o: &ProbeOutputs| o.outputs.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(want) != names(got) || want.outputs.is_empty() {
        return Err(Error::internal(format!(
            "the fp16 model's probe outputs are {:?}, the fp32 model's {:?}",
            names(got),
            names(want)
        )));
    }
    let mut worst: Option<PrecisionCheck> = None;
    for ((name, a), (_, b)) in want.outputs.iter().zip(&got.outputs) {
        let (psnr_db, max) = match (a, b) {
            (ProbeValues::Pixels(a), ProbeValues::Pixels(b)) if a.len() == b.len() => compare(a, b),
            (ProbeValues::Values(a), ProbeValues::Values(b)) if a.len() == b.len() => compare_values(a, b),
            _ => {
                return Err(Error::internal(format!(
                    "the fp16 model's output `{name}` is not of the fp32 model's kind and length"
                )));
            }
        };
        let check = PrecisionCheck {
            psnr_db,
            max_error_levels: max,
            output: name.clone(),
            size: want.size,
            passed: psnr_db >= MIN_PSNR_DB && max <= MAX_ERROR_LEVELS,
        };
        log::debug!("precision: output `{name}` in fp16 against fp32: PSNR {psnr_db:.1} dB, largest difference {max}");
        // Out of tolerance before within it, then the lowest PSNR; the earlier output on a tie.
        // So the worst one passed only where every one did.
        let worse =
            |w: &PrecisionCheck| (!check.passed && w.passed) || (check.passed == w.passed && check.psnr_db < w.psnr_db);
        if worst.as_ref().is_none_or(worse) {
            worst = Some(check);
        }
    }
    worst.ok_or_else(|| Error::internal("the probe gave no output"))
}

/// PSNR (dB) and the largest difference (rounded up) of two outputs that are not images, on
/// 255 levels of `want`'s largest magnitude (of 1 where `want` is all 0).
pub(crate) fn compare_values(want: &[f32], got: &[f32]) -> (f64, u32) {
    let largest = want.iter().fold(0.0f64, |m, v| m.max(f64::from(v.abs())));
    let level = if largest > 0.0 { largest / 255.0 } else { 1.0 / 255.0 };
    let mut sum = 0.0f64;
    let mut max = 0.0f64;
    for (a, b) in want.iter().zip(got) {
        let d = (f64::from(*a) - f64::from(*b)).abs() / level;
        max = max.max(d);
        sum += d * d;
    }
    let mse = sum / want.len().max(1) as f64;
    let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
    (psnr, max.ceil().min(f64::from(u32::MAX)) as u32)
}

/// The cached checks: one line each, `passed psnr_db max_error_levels width height output key`,
/// tab-separated (the key, last, is the GPU's, the model's and the probe's options; a line that
/// does not parse is left out, and its check runs again).
fn read_checks(file: &Path) -> std::collections::BTreeMap<String, PrecisionCheck> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.splitn(7, '\t').collect();
            let [passed, psnr, max, w, h, output, key] = f.as_slice() else { return None };
            let check = PrecisionCheck {
                psnr_db: psnr.parse().ok()?,
                max_error_levels: max.parse().ok()?,
                output: output.to_string(),
                size: (w.parse().ok()?, h.parse().ok()?),
                passed: passed.parse().ok()?,
            };
            Some((key.to_string(), check))
        })
        .collect()
}

fn write_checks(checks: &std::collections::BTreeMap<String, PrecisionCheck>) -> String {
    checks
        .iter()
        .map(|(key, c)| {
            let key = key.replace(['\t', '\n', '\r'], " ");
            let output = c.output.replace(['\t', '\n', '\r'], " ");
            format!(
                "{}\t{}\t{}\t{}\t{}\t{output}\t{key}\n",
                c.passed, c.psnr_db, c.max_error_levels, c.size.0, c.size.1
            )
        })
        .collect()
}

/// PSNR (dB) and the largest difference of two 8-bit images.
pub(crate) fn compare(want: &[u8], got: &[u8]) -> (f64, u32) {
    let mut sum = 0.0f64;
    let mut max = 0u32;
    for (a, b) in want.iter().zip(got) {
        let d = a.abs_diff(*b) as u32;
        max = max.max(d);
        sum += f64::from(d * d);
    }
    let mse = sum / want.len().max(1) as f64;
    let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
    (psnr, max)
}

/// Chooses the model file a session loads for `asked`. `cuda` is the GPU's key (its UUID,
/// driver and ONNX Runtime) and the probe that runs a model on it; `None` on the CPU
/// backend, which keeps the model's own precision.
pub(crate) fn resolve(
    model: &Path,
    asked: Precision,
    rewrite: Rewrites,
    cuda: Option<(&str, &mut ProbeRun<'_>)>,
) -> Result<Resolved> {
    resolve_in(model_cache_dir().as_deref(), model, asked, rewrite, cuda)
}

/// Which graph rewrites may apply on the CUDA backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rewrites {
    /// The nearest-upsample skip folded into a 1×1 convolution.
    pub(crate) fold_skip: bool,
}

impl Rewrites {
    pub(crate) const NONE: Self = Self { fold_skip: false };
}

/// The graph rewrites of `bytes`, from the cache or made now: the path and bytes of the
/// model that runs and what changed (nothing: the original).
fn rewritten(
    model: &Path,
    bytes: Vec<u8>,
    rewrite: Rewrites,
    dir: Option<&Path>,
) -> Result<(PathBuf, Vec<u8>, Vec<String>)> {
    let unchanged = |bytes| Ok((model.to_path_buf(), bytes, Vec::new()));
    if rewrite == Rewrites::NONE {
        return unchanged(bytes);
    }
    // The fold writes its 1×1 weights in the skip's own type (fp32 or fp16).
    let r = crate::graph::fold::fold_upsample_skip(&bytes)?;
    let (current, changes) = (r.bytes, r.changes);
    if changes.is_empty() {
        return unchanged(bytes);
    }
    let Some(dir) = dir else {
        log::warn!("the graph rewrites are not applied: no cache directory (set HOME or NEURAL_FRAME_TUNE_CACHE)");
        return unchanged(bytes);
    };
    let sha = sha256_hex(&bytes);
    let path = dir.join(format!("{}-layout-fold-v{LAYOUT_VERSION}.onnx", &sha[..16]));
    if !path.is_file()
        && let Err(e) = write_atomically(&path, &current)
    {
        log::warn!("the graph rewrites are not applied: the rewritten model could not be cached ({e})");
        return unchanged(bytes);
    }
    log::info!("graph rewrites of {} ({}): {}", model.display(), path.display(), changes.join("; "));
    Ok((path, current, changes))
}

/// [`resolve`] with the converted models cached in `dir`.
fn resolve_in(
    dir: Option<&Path>,
    model: &Path,
    asked: Precision,
    rewrite: Rewrites,
    cuda: Option<(&str, &mut ProbeRun<'_>)>,
) -> Result<Resolved> {
    let keep = |model_kind: &'static str, reason: String| Resolved {
        path: model.to_path_buf(),
        report: PrecisionReport {
            asked,
            model: model_kind,
            running: model_kind,
            reason,
            check: None,
            converted: None,
            rewrites: Vec::new(),
        },
    };
    let bytes = std::fs::read(model)
        .map_err(|e| Error::Io { what: format!("reading the model {}", model.display()), source: e })?;
    let kind = model_precision(&bytes)?;
    if asked == Precision::Fp32 && kind == "fp16" {
        log::warn!(
            "--precision fp32 (Precision::Fp32) is not in effect: {} is an fp16 model, which runs as it is (fp32 \
             needs its fp32 original)",
            model.display()
        );
        return Ok(keep(kind, "fp16: the model is fp16 (fp32 was asked for, which needs its fp32 original)".into()));
    }
    let Some((gpu, probe)) = cuda else {
        if asked == Precision::Fp16 && kind == "fp32" {
            log::warn!("--precision fp16 is not in effect: the CPU backend runs the model in its own precision (fp32)");
        }
        return Ok(keep(kind, "the CPU backend keeps the model's own precision".into()));
    };
    // On the CUDA backend the graph rewrites come first (exact); precision works on their result.
    let (base, bytes, rewrites) = rewritten(model, bytes, rewrite, dir)?;
    let keep = |kind: &'static str, reason: String| {
        let mut r = keep(kind, reason);
        r.path = base.clone();
        r.report.rewrites = rewrites.clone();
        r
    };
    if kind != "fp32" {
        return Ok(keep(kind, format!("the model is {kind} already")));
    }
    if asked == Precision::Fp32 {
        return Ok(keep(kind, "fp32 as asked (--precision fp32)".into()));
    }
    if asked == Precision::Auto {
        let share = crate::graph::share::compute_share(&bytes)?;
        if share.matrix_macs < MIN_MACS_PER_PIXEL {
            return Ok(keep(
                kind,
                format!(
                    "fp32: {:.0} multiply-adds per input pixel, under the {MIN_MACS_PER_PIXEL:.0} where fp16 pays \
                     (--precision fp16 forces it)",
                    share.matrix_macs
                ),
            ));
        }
        if !share.matrix_bound() {
            return Ok(keep(
                kind,
                format!(
                    "fp32: its convolutions and matrix products are {:.0} % of its work, under the {:.0} % where fp16 \
                     pays (--precision fp16 forces it)",
                    share.work_share() * 100.0,
                    crate::graph::share::MATRIX_BOUND * 100.0
                ),
            ));
        }
    }
    let sha = sha256_hex(&bytes);
    let path = match converted(&bytes, &sha, dir) {
        Ok(p) => p,
        Err(e) if asked == Precision::Auto => {
            log::warn!("precision: the model stays fp32: its fp16 conversion failed ({e})");
            return Ok(keep(kind, format!("fp32: the fp16 conversion failed ({e})")));
        }
        Err(e) => return Err(e),
    };
    let mut report = PrecisionReport {
        asked,
        model: kind,
        running: "fp16",
        reason: "fp16 as asked (--precision fp16), without the check".into(),
        check: None,
        converted: Some(path.clone()),
        rewrites: rewrites.clone(),
    };
    if asked == Precision::Auto {
        let check = match checked(&base, &path, &sha, gpu, probe) {
            Ok(c) => c,
            // A provider that is missing is the backend's matter (`auto` falls back on it).
            Err(e) if e.kind() == crate::error::ErrorKind::ProviderUnavailable => return Err(e),
            Err(e) => {
                log::warn!("precision: {} stays fp32: the fp16 check could not run ({e})", model.display());
                return Ok(keep(kind, format!("fp32: the fp16 check could not run ({e})")));
            }
        };
        if !check.passed {
            log::warn!(
                "precision: {} stays fp32: in fp16 a probe frame's output `{}` differs from fp32 by PSNR {:.1} dB and up \
                 to {} of 255 (tolerance {MIN_PSNR_DB} dB, {MAX_ERROR_LEVELS}); --precision fp16 forces fp16",
                model.display(),
                check.output,
                check.psnr_db,
                check.max_error_levels
            );
            let reason = format!(
                "fp32: in fp16 the probe frame's output `{}` was off by PSNR {:.1} dB, up to {} of 255 (tolerance \
                 {MIN_PSNR_DB} dB, {MAX_ERROR_LEVELS})",
                check.output, check.psnr_db, check.max_error_levels
            );
            let kept = keep(kind, reason);
            return Ok(Resolved { path: kept.path, report: PrecisionReport { check: Some(check), ..kept.report } });
        }
        report.reason = format!(
            "fp16, converted from fp32: the probe frame's 8-bit outputs within fp32's (the furthest, `{}`: PSNR {:.1} \
             dB, {} of 255; --precision fp32 keeps fp32)",
            check.output, check.psnr_db, check.max_error_levels
        );
        report.check = Some(check);
    }
    log::info!("precision: {}", report.reason);
    Ok(Resolved { path, report })
}

#[cfg(test)]
mod tests;
