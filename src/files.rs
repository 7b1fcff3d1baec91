//! Where the caches live, and the small file helpers they share (the tune cache, the
//! prepared models and the precision check's verdicts, cuDNN's plan choices).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `bytes` to `path` through a temporary file and a rename (a reader never sees half a file).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let io = |what: &str, e| Error::Io { what: format!("{what} {}", path.display()), source: e };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io("creating the directory of", e))?;
    }
    // A name of this writer's own (process and count): two threads or processes writing the
    // same file never share a temporary file; the rename makes the last one's whole file win.
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()
        })
        .map_err(|e| io("writing", e))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| io("renaming into", e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The variable that names the tune cache's file; the other caches go beside it.
pub(crate) const TUNE_CACHE_ENV: &str = "NEURAL_FRAME_TUNE_CACHE";

/// The tune cache's file: `explicit` (`NEURAL_FRAME_TUNE_CACHE`), else
/// `$XDG_CACHE_HOME/neural-frame/tune.json` (an absolute `XDG_CACHE_HOME` only, as the XDG
/// base directory specification says), else `$HOME/.cache/neural-frame/tune.json`.
pub(crate) fn tune_cache_path_from(
    explicit: Option<PathBuf>,
    xdg: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Option<PathBuf> {
    if explicit.is_some() {
        return explicit;
    }
    let cache = xdg.filter(|p| p.is_absolute()).or_else(|| home.map(|h| h.join(".cache")))?;
    Some(cache.join("neural-frame").join("tune.json"))
}

/// [`tune_cache_path_from`] this process's environment (empty values count as unset).
pub(crate) fn tune_cache_path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    tune_cache_path_from(var(TUNE_CACHE_ENV), var("XDG_CACHE_HOME"), var("HOME"))
}

/// The folder of the prepared models, the precision check's verdicts and cuDNN's plan
/// choices: `precision/` beside the tune cache's file, absolute (a process that changes its
/// working directory later still finds the files).
pub(crate) fn model_cache_dir() -> Option<PathBuf> {
    let tune = tune_cache_path()?;
    let base = tune.parent().map(Path::to_path_buf)?;
    Some(std::path::absolute(&base).unwrap_or(base).join("precision"))
}

/// The SHA-256 of `bytes` in hex: the caches' key for a model file.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
