//! The preparation pipeline: what file a session loads, from the caller's model and options,
//! each step said in the report ([`PrecisionReport::rewrites`]) and the log, every file it
//! makes kept in one cache ([`model_cache_dir`]).

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::files::{model_cache_dir, sha256_hex, write_atomically};
use crate::graph::edit::{CONV_ACT as OP, DEPTH_TO_SPACE, DOMAIN};
use crate::graph::precision::{self, Precision, PrecisionReport, ProbeRun, Rewrites};

/// The model's preparation on the CUDA backend ([`CudaOptions::model`](crate::CudaOptions::model)):
/// what the model file becomes before a session loads it, and whether the first frames may run before the
/// fused session is built. Set with [`CudaOptions`](crate::CudaOptions)'s setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ModelOptions {
    /// The precision the model runs in.
    pub precision: Precision,
    /// Exact graph rewrites at load (the nearest-upsample skip's fold).
    pub rewrite_graph: bool,
    /// The fused convolutions: asked for, refused, or `None` for the default (where the model
    /// runs in fp16).
    pub fuse_conv_act: Option<bool>,
    /// The first frames run before the fused session is built (fast start).
    pub fast_start: bool,
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self { precision: Precision::Auto, rewrite_graph: true, fuse_conv_act: None, fast_start: true }
    }
}

/// The prepared model.
pub(crate) struct Prepared {
    /// The file that runs without the fused convolutions (absolute).
    pub(crate) model: PathBuf,
    /// The file with them, or `model` where they do not apply.
    pub(crate) fused: PathBuf,
    /// What runs, and every step that applied.
    pub(crate) report: PrecisionReport,
}

/// Prepares `model` for a session: on the CUDA backend (`gpu`: the GPU's key and the probe
/// that runs a model on it) the skip's fold, the precision, then the fused convolutions and
/// their tails; on the CPU backend the model as it is (`fuse_conv_act` asked for says that it
/// is not in effect).
pub(crate) fn prepare(model: &Path, asked: &ModelOptions, gpu: Option<(&str, &mut ProbeRun<'_>)>) -> Result<Prepared> {
    let on_gpu = gpu.is_some();
    let rewrites = if on_gpu { Rewrites { fold_skip: asked.rewrite_graph } } else { Rewrites::NONE };
    let resolved = precision::resolve(model, asked.precision, rewrites, gpu)?;
    let mut report = resolved.report;
    // Absolute: fast start's sessions after a resize load it again, maybe after the caller
    // changed its working directory.
    let model = std::path::absolute(&resolved.path).unwrap_or_else(|_| resolved.path.clone());
    // The fused convolutions: by default where the model runs in fp16 (measured there: 16 % off
    // the bundled upscaler).
    let fuse = asked.fuse_conv_act.unwrap_or(report.running == "fp16");
    let fused = match (on_gpu, fuse) {
        (true, true) => match fused_model(&model)? {
            Some((path, changes)) => {
                report.rewrites.extend(changes);
                path
            }
            None => model.clone(),
        },
        (false, true) if asked.fuse_conv_act == Some(true) => {
            log::warn!("the fused convolutions (fuse_conv_act) are not in effect: the context runs on the CPU backend");
            model.clone()
        }
        _ => model.clone(),
    };
    Ok(Prepared { model, fused, report })
}

/// Whether a precision report's `rewrites` say that the fused convolutions run: the
/// rewrite's line is there (a fallback takes it out and says "not in effect" instead).
pub(crate) fn in_effect(rewrites: &[String]) -> bool {
    let line = format!("→ fused {OP}");
    rewrites.iter().any(|r| r.contains(&line))
}

/// A precision report's `rewrites` after the fused convolutions failed: their rewrite's line
/// goes, and one says that they are not in effect, and `why`.
pub(crate) fn not_in_effect(rewrites: &mut Vec<String>, why: &str) {
    rewrites.retain(|r| !r.contains(OP) && !r.starts_with(crate::graph::shuffle::LINE));
    rewrites.push(format!("fused {OP} convolutions not in effect: {why}"));
}

/// Whether an error of a session's run comes from the fused model's own operators (`ConvAct`
/// or the DepthToSpace tails that go with it): ONNX Runtime's message names the failing node's
/// operator, and theirs start with their names.
pub(crate) fn owns_error(message: &str) -> bool {
    message.contains(OP) || message.contains(&format!("{DOMAIN}::{}", DEPTH_TO_SPACE))
}

/// Version of the rewrite in its cache file's name: a change to what it writes bumps it
/// (3: the DepthToSpace tails; 4: NCHW inputs of few channels read directly; 5: a tail's last
/// convolution padded to 64 filters).
const REWRITE_VERSION: u32 = 5;

/// The model at `model` with [`fuse_conv_act`](crate::graph::convact::fuse_conv_act) applied, from the cache or made and cached
/// now: its path and what changed, or `None` where nothing applied or there is no cache to
/// keep it in (both said in the log; the model then runs as it is).
fn fused_model(model: &std::path::Path) -> Result<Option<(std::path::PathBuf, Vec<String>)>> {
    let bytes = std::fs::read(model)
        .map_err(|e| crate::error::Error::Io { what: format!("reading the model {}", model.display()), source: e })?;
    let Some(dir) = model_cache_dir() else {
        log::warn!("the fused convolutions are not applied: no cache directory (set HOME or NEURAL_FRAME_TUNE_CACHE)");
        return Ok(None);
    };
    let path = dir.join(format!("{}-convact-v{REWRITE_VERSION}.onnx", &sha256_hex(&bytes)[..16]));
    let mut r = crate::graph::convact::fuse_conv_act(&bytes)?;
    if r.applied() {
        // The DepthToSpace tails of the now NHWC convolutions (shuffle.rs), in the same file.
        let tails = crate::graph::shuffle::fuse_depth_to_space(&r.bytes, true)?;
        if tails.applied() {
            r.bytes = tails.bytes;
            r.changes.extend(tails.changes);
        }
        r.skipped.extend(tails.skipped);
    }
    for why in &r.skipped {
        log::info!("fused convolutions of {}: left as it is: {why}", model.display());
    }
    if !r.applied() {
        log::info!("fused convolutions of {}: no convolution with an activation to fuse", model.display());
        return Ok(None);
    }
    if !path.is_file()
        && let Err(e) = write_atomically(&path, &r.bytes)
    {
        log::warn!("the fused convolutions are not applied: the rewritten model could not be cached ({e})");
        return Ok(None);
    }
    log::info!("fused convolutions of {} ({}): {}", model.display(), path.display(), r.changes.join("; "));
    Ok(Some((path, r.changes)))
}
