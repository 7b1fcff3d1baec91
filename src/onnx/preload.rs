//! The CUDA side of ONNX Runtime, loaded on a thread while the Vulkan device
//! and CUDA's driver start: the runtime itself, its CUDA provider with the
//! libraries it links (cuBLAS, cuDNN, cuFFT, …) and cuDNN's sub-libraries,
//! which cuDNN otherwise opens during the model's first run. Loading them is
//! work for the dynamic loader, about 0.2 s once a process on the H200, that
//! no device call waits for. Nothing is created on the device here. cuDNN's
//! sub-libraries are found through `/proc/self/maps`, on Unix only.

use std::path::Path;
#[cfg(unix)]
use std::path::PathBuf;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::onnx::runtime;

/// What the thread did, for the start-up report.
pub(crate) struct Preloaded {
    /// Loading ONNX Runtime's library, in milliseconds.
    pub(crate) runtime_ms: f64,
    /// Everything, in milliseconds.
    pub(crate) total_ms: f64,
}

/// cuDNN 9's sub-libraries that a convolution model uses (graph API, heuristics, the
/// precompiled and runtime-compiled engines, the operation and convolution kernels).
#[cfg(unix)]
const CUDNN_PARTS: [&str; 6] = ["graph", "heuristic", "engines_precompiled", "engines_runtime_compiled", "ops", "cnn"];

/// Loads ONNX Runtime (`explicit` as [`runtime::load`] takes it) and, where it has the
/// CUDA provider, the provider's libraries. A failure to load ONNX Runtime is returned
/// (the caller reports it as it would have); the rest is best effort, said at debug level.
pub(crate) fn cuda_side(explicit: Option<&Path>) -> Result<Preloaded> {
    let t = Instant::now();
    let info = runtime::load(explicit)?;
    let runtime_ms = t.elapsed().as_secs_f64() * 1e3;
    if info.providers.iter().any(|p| p == "CUDAExecutionProvider") {
        match provider() {
            Ok(()) => {
                log::debug!("startup: ONNX Runtime's CUDA provider loaded ({:.0} ms)", t.elapsed().as_secs_f64() * 1e3)
            }
            Err(e) => log::debug!("startup: ONNX Runtime's CUDA provider not loaded ahead ({e})"),
        }
        #[cfg(unix)]
        {
            let (loaded, missing) = cudnn_parts();
            log::debug!(
                "startup: cuDNN's libraries loaded ahead: {loaded}{} ({:.0} ms)",
                if missing.is_empty() { String::new() } else { format!(", not found: {}", missing.join(", ")) },
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    Ok(Preloaded { runtime_ms, total_ms: t.elapsed().as_secs_f64() * 1e3 })
}

/// A session builder with the CUDA provider appended makes ONNX Runtime load the
/// provider's library (and what it links) and register its kernels; the builder is
/// then dropped, unused. The provider's library stays loaded for the process.
fn provider() -> Result<()> {
    #[cfg(feature = "cuda")]
    {
        let env = runtime::environment()?;
        let builder = ort::session::Session::builder(env).map_err(|e| Error::onnx("a session builder", e))?;
        let cuda = ort::ep::CUDA::default().build().error_on_failure();
        drop(builder.with_execution_providers([cuda]).map_err(runtime::provider_failure)?);
        Ok(())
    }
    #[cfg(not(feature = "cuda"))]
    Err(Error::ProviderUnavailable { reason: "built without the `cuda` feature".into() })
}

/// Opens cuDNN and its sub-libraries by the names cuDNN itself opens: from the directory
/// its main library was mapped from where the provider's loading mapped it, else through
/// the loader's search path (cuDNN may be opened only at the first run), so that cuDNN's
/// own `dlopen` later finds them loaded. Returns how many were loaded and the names not found.
#[cfg(unix)]
fn cudnn_parts() -> (usize, Vec<String>) {
    let mapped_main = mapped("libcudnn.so");
    log::debug!(
        "startup: CUDA libraries mapped after the provider: {}",
        mapped_names(&["libcud", "libcublas", "libcufft", "libcurand", "libnvrtc"]).join(", ")
    );
    // libcudnn.so.9.x.y → the major version, "9".
    let major = mapped_main
        .as_ref()
        .and_then(|p| p.file_name()?.to_str()?.strip_prefix("libcudnn.so.")?.split('.').next().map(str::to_string))
        .unwrap_or_else(|| "9".into());
    let dir = mapped_main.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf);
    let path = |name: String| dir.as_ref().map_or_else(|| PathBuf::from(&name), |d| d.join(&name));
    let mut loaded = 0;
    let mut missing = Vec::new();
    let names = std::iter::once(format!("libcudnn.so.{major}"))
        .filter(|_| mapped_main.is_none())
        .chain(CUDNN_PARTS.iter().map(|part| format!("libcudnn_{part}.so.{major}")));
    for name in names {
        let path = path(name);
        // SAFETY: cuDNN's own libraries, which cuDNN would load into this process anyway;
        // their initialisers are cuDNN's.
        match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => {
                // Kept for the process, as cuDNN keeps them.
                std::mem::forget(lib);
                loaded += 1;
            }
            Err(_) => missing.push(path.display().to_string()),
        }
    }
    (loaded, missing)
}

/// The file names of the libraries mapped into this process that start with one of `prefixes`.
#[cfg(unix)]
fn mapped_names(prefixes: &[&str]) -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut names: Vec<String> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter_map(|p| Path::new(p).file_name()?.to_str().map(str::to_string))
        .filter(|n| prefixes.iter().any(|p| n.starts_with(p)))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The path of the first library mapped into this process whose file name starts with `prefix`.
#[cfg(unix)]
fn mapped(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(PathBuf::from)
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// This process maps its own executable and the C library: `mapped` finds them by prefix.
    #[test]
    fn mapped_finds_a_library_of_this_process() {
        let libc = mapped("libc.so").or_else(|| mapped("libc-")).expect("the C library is mapped");
        assert!(libc.is_absolute() && libc.exists(), "{}", libc.display());
        assert!(mapped("libsurely-not-mapped-here.so").is_none());
    }
}
