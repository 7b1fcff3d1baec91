//! The fused ConvAct plans chosen in earlier processes: a small text file, one line per
//! (cuDNN version, GPU, shape), naming the chosen engine and its knob choices, so a later
//! process builds that one plan instead of finalizing and timing every candidate.
//!
//! The format (UTF-8, `\n`-separated; `#` lines are comments):
//!
//! ```text
//! <key>\t<engine global index>\t<knob type>=<value>,…\t<median ms>
//! ```
//!
//! The knob field is empty for an engine without knobs. A line that does not parse is
//! ignored; for a key on several lines the last one counts. A missing, unreadable or garbled
//! file reads as empty, and failing to write it is only logged: the cache never fails a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use cudarc::driver::sys;

/// The file's name in the cache directory (the version is the format's).
pub(crate) const FILE_NAME: &str = "cudnn-plans-v1.tsv";

const HEADER: &str = "# neural-frame cuDNN fused-plan cache v1: key, engine global index, knob=value list, median ms\n";

/// An engine config by what identifies it across processes: the engine's global index and
/// its knob choices (`cudnnBackendKnobType_t` → value), in the order cuDNN listed them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PlanChoice {
    pub(crate) engine: i64,
    pub(crate) knobs: Vec<(i32, i64)>,
}

impl PlanChoice {
    /// "24=1,25=0" (empty without knobs).
    pub(crate) fn knobs_text(&self) -> String {
        let mut s = String::new();
        for (i, (ty, value)) in self.knobs.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}{ty}={value}");
        }
        s
    }
}

/// One line of the file: the choice and how fast it was when chosen.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) choice: PlanChoice,
    pub(crate) median_ms: f64,
}

/// The entries of `text`, garbled lines skipped; a later line for a key replaces an earlier one.
pub(crate) fn parse(text: &str) -> BTreeMap<String, Entry> {
    let mut entries = BTreeMap::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Some((key, entry)) => {
                entries.insert(key, entry);
            }
            None => log::debug!("cuDNN plan cache: ignoring the line {line:?}"),
        }
    }
    entries
}

fn parse_line(line: &str) -> Option<(String, Entry)> {
    let mut fields = line.split('\t');
    let (key, engine, knobs, ms) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() || !valid_key(key) {
        return None;
    }
    let engine = engine.parse::<i64>().ok().filter(|&e| e >= 0)?;
    let knobs = if knobs.is_empty() {
        Vec::new()
    } else {
        knobs
            .split(',')
            .map(|kv| {
                let (ty, value) = kv.split_once('=')?;
                Some((ty.parse::<i32>().ok().filter(|&t| t >= 0)?, value.parse::<i64>().ok()?))
            })
            .collect::<Option<Vec<_>>>()?
    };
    let median_ms = ms.parse::<f64>().ok().filter(|m| m.is_finite() && *m >= 0.0)?;
    Some((key.to_string(), Entry { choice: PlanChoice { engine, knobs }, median_ms }))
}

/// A key fits on a line as one field.
fn valid_key(key: &str) -> bool {
    !key.is_empty() && !key.starts_with('#') && !key.chars().any(|c| c == '\t' || c.is_control())
}

/// The file's text for `entries`, in key order.
pub(crate) fn render(entries: &BTreeMap<String, Entry>) -> String {
    let mut text = String::from(HEADER);
    for (key, e) in entries {
        let _ = writeln!(text, "{key}\t{}\t{}\t{}", e.choice.engine, e.choice.knobs_text(), e.median_ms);
    }
    text
}

/// The file's entries; empty when it is missing, unreadable or garbled.
fn read(path: &Path) -> BTreeMap<String, Entry> {
    match crate::files::read_cache_file(path, crate::files::CACHE_LIMIT) {
        Ok(Some(bytes)) => parse(&String::from_utf8_lossy(&bytes)),
        Ok(None) => BTreeMap::new(),
        Err(e) => {
            log::warn!(
                "cuDNN plan cache {}: not read ({e}); treated as empty (remove it, or name another cache \
                 directory with NEURAL_FRAME_TUNE_CACHE)",
                path.display()
            );
            BTreeMap::new()
        }
    }
}

/// The entry for `key` in the file at `path`, if any.
pub(crate) fn lookup(path: &Path, key: &str) -> Option<Entry> {
    read(path).remove(key)
}

/// Records `entry` for `key` in the file at `path` (read again, updated, written through a
/// temporary file and a rename). Failures are logged, never returned.
pub(crate) fn store(path: &Path, key: &str, entry: Entry) {
    update(path, key, Some(entry));
}

/// Takes `key`'s entry out of the file at `path` (a cached plan that failed to run).
pub(crate) fn remove(path: &Path, key: &str) {
    update(path, key, None);
}

fn update(path: &Path, key: &str, entry: Option<Entry>) {
    // One writer at a time in this process (the file lock does not order a process's own
    // threads) and across processes (the lock file beside the cache).
    static WRITING: Mutex<()> = Mutex::new(());
    if !valid_key(key) {
        log::debug!("cuDNN plan cache: the key {key:?} does not fit a line; not stored");
        return;
    }
    let _guard = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    let written = crate::files::with_cache_lock(path, || {
        let mut entries = read(path);
        match entry {
            Some(entry) => entries.insert(key.to_string(), entry),
            None => entries.remove(key),
        };
        crate::files::write_atomically(path, render(&entries).as_bytes())
    });
    match written {
        Ok(()) => log::debug!("cuDNN plan cache {}: {key} updated", path.display()),
        Err(e) => log::warn!("cuDNN plan cache {}: not written: {e}", path.display()),
    }
}

/// The cache file set for the process: `None` while never set, `Some(None)` when set to none.
static PATH: Mutex<Option<Option<PathBuf>>> = Mutex::new(None);

/// Sets the process's plan cache file (`None`: no cache: every process searches again).
pub(crate) fn set_plan_cache(path: Option<PathBuf>) {
    *PATH.lock().unwrap_or_else(PoisonError::into_inner) = Some(path);
}

/// The process's plan cache file, set to `default()` first if never set.
pub(crate) fn plan_cache_or(default: impl FnOnce() -> Option<PathBuf>) -> Option<PathBuf> {
    if let Some(path) = PATH.lock().unwrap_or_else(PoisonError::into_inner).clone() {
        return path;
    }
    let path = default();
    set_plan_cache(path.clone());
    path
}

/// "cudnn<version>-GPU-<uuid>": what a plan's choice depends on besides the shape, for the
/// current CUDA context's device. `None` when the driver cannot say (then nothing is cached).
pub(crate) fn context_key(cudnn_version: usize) -> Option<String> {
    let mut dev: sys::CUdevice = 0;
    // SAFETY: dev is a valid out pointer; the call only reads the calling thread's context.
    let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
    if r != sys::CUresult::CUDA_SUCCESS {
        log::debug!("cuDNN plan cache: cuCtxGetDevice failed ({r:?}); no cache");
        return None;
    }
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: uuid is a valid out pointer; dev is the current context's device.
    let r = unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) };
    if r != sys::CUresult::CUDA_SUCCESS {
        log::debug!("cuDNN plan cache: cuDeviceGetUuid_v2 failed ({r:?}); no cache");
        return None;
    }
    Some(format!("cudnn{cudnn_version}-{}", uuid_text(&uuid.bytes.map(|b| b as u8))))
}

/// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes a GPU's UUID.
pub(crate) fn uuid_text(b: &[u8; 16]) -> String {
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}

#[cfg(test)]
mod tests;
