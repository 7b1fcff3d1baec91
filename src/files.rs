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

/// The most a cache file may hold: a larger one is refused, not read (`/dev/zero` or a sparse
/// file named as a cache would otherwise be read until memory runs out).
#[cfg(any(feature = "tune", feature = "cuda"))]
pub(crate) const CACHE_LIMIT: u64 = 64 << 20;

/// Reads a cache file of at most `limit` bytes: `None` where there is none. Only a regular
/// file is read (a FIFO would block the reader, a device never end): anything else, or a
/// larger file, is an [`std::io::ErrorKind::InvalidInput`] error that says what it is.
#[cfg(any(feature = "tune", feature = "cuda"))]
pub(crate) fn read_cache_file(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let refuse = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    let kind = |m: &std::fs::Metadata| -> Option<&'static str> {
        let t = m.file_type();
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() {
                return Some("a FIFO");
            }
            if t.is_char_device() {
                return Some("a character device");
            }
            if t.is_block_device() {
                return Some("a block device");
            }
            if t.is_socket() {
                return Some("a socket");
            }
        }
        if t.is_dir() {
            Some("a directory")
        } else if !t.is_file() {
            Some("not a regular file")
        } else {
            None
        }
    };
    let check = |m: &std::fs::Metadata| match kind(m) {
        Some(what) => Err(refuse(format!("it is {what}, not a regular file"))),
        None if m.len() > limit => {
            Err(refuse(format!("it holds {} bytes, more than a cache's {limit} (a cache is far smaller)", m.len())))
        }
        None => Ok(()),
    };
    // Looked at before it is opened: opening a FIFO blocks until a writer comes.
    match std::fs::metadata(path) {
        Ok(m) => check(&m)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // A FIFO put in its place since: opened without blocking, then refused by the check below.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    check(&file.metadata()?)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(refuse(format!("it holds more than a cache's {limit} bytes")));
    }
    Ok(Some(bytes))
}

/// Runs `change` with the cache file at `path` locked against every other writer that locks it
/// (an exclusive lock on `.NAME.lock` beside it: the file itself is replaced by a rename, so it
/// cannot carry the lock). Where another process holds the lock, says so once and waits for it.
#[cfg(any(feature = "tune", feature = "cuda"))]
pub(crate) fn with_cache_lock<T>(path: &Path, change: impl FnOnce() -> Result<T>) -> Result<T> {
    let io = |what: String| move |source| Error::Io { what, source };
    let name = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("the cache {} names no file", path.display())))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(format!("creating the cache's directory {}", dir.display())))?;
    let lock_path = dir.join(format!(".{}.lock", name.to_string_lossy()));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(format!("opening the cache's lock file {}", lock_path.display())))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            log::info!("waiting for another process that is writing {}", path.display());
            lock.lock().map_err(io(format!("locking {}", lock_path.display())))?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(format!("locking {}", lock_path.display()))(e)),
    }
    // The lock goes with the file, when `lock` is dropped after the change.
    change()
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
