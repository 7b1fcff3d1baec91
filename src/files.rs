//! Small file helpers shared by the caches (the precision check's, the graph rewrites',
//! cuDNN's plan choices).

use std::path::Path;

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
