//! Finding and loading the ONNX Runtime library at run time.
//!
//! Order: an explicit path (option, then `ORT_DYLIB_PATH`), then a project-local
//! install (`.runtime/ort-gpu` or `.runtime/ort-cpu`, as `scripts/setup.sh`
//! makes) under the working directory or one of the executable's four parent
//! directories. The library spawns nothing to look: the CLI asks `python3` for
//! an installed `onnxruntime` package and passes its path.
//!
//! In a project-local install (the pip wheel's `onnxruntime/capi/`) the library
//! is `libonnxruntime.so*` on Linux and `onnxruntime.dll` on Windows.

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

use crate::error::{Error, Result};

/// The ONNX Runtime minor version the crate is built against (`ort` feature `api-31`).
pub(crate) const REQUIRED_MINOR: u32 = 31;

/// The loaded runtime.
///
/// ```no_run
/// let rt = neural_frame::load_onnx_runtime(None)?;
/// println!("{} ({}), found by {}", rt.version, rt.library.display(), rt.found_by);
/// if !rt.providers.iter().any(|p| p == "CUDAExecutionProvider") {
///     eprintln!("the CPU build of ONNX Runtime: install onnxruntime-gpu for the CUDA backend");
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeInfo {
    /// The library file.
    pub library: PathBuf,
    /// How it was found.
    pub found_by: String,
    /// Its version string.
    pub version: String,
    /// Execution providers compiled into it.
    pub providers: Vec<String>,
}

struct Loaded {
    info: RuntimeInfo,
    _env: ort::environment::Environment,
}

static RUNTIME: OnceLock<std::result::Result<Loaded, String>> = OnceLock::new();

/// Loads ONNX Runtime once per process and returns what was loaded. Later
/// calls return the same runtime; asking for another library then is an error.
pub(crate) fn load(explicit: Option<&Path>) -> Result<&'static RuntimeInfo> {
    // A failure is kept as the reason alone (for a missing runtime) or as text, so
    // that reporting it again does not wrap the message twice.
    let loaded = RUNTIME.get_or_init(|| {
        load_inner(explicit).map_err(|e| match e {
            Error::OnnxRuntimeMissing { reason } => reason,
            other => other.to_string(),
        })
    });
    match loaded {
        Ok(l) => {
            if let Some(p) = explicit
                && p != l.info.library
            {
                return Err(Error::InvalidArgument(format!(
                    "ONNX Runtime is already loaded from {} in this process; cannot switch to {}",
                    l.info.library.display(),
                    p.display()
                )));
            }
            Ok(&l.info)
        }
        Err(reason) => Err(Error::OnnxRuntimeMissing { reason: reason.clone() }),
    }
}

fn load_inner(explicit: Option<&Path>) -> Result<Loaded> {
    let (library, found_by) = find(explicit)?;
    let version = version_of(&library)?;
    let minor: u32 = version.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0);
    if minor < REQUIRED_MINOR {
        return Err(Error::OnnxRuntimeMissing {
            reason: format!(
                "{} is version {version}; neural-frame needs 1.{REQUIRED_MINOR} or newer",
                library.display()
            ),
        });
    }
    let env = ort::init_from(&library)
        .map_err(|e| Error::OnnxRuntimeMissing { reason: e.to_string() })?
        .with_name("neural-frame")
        .with_logger(std::sync::Arc::new(forward_log))
        .build()
        .map_err(|e| Error::onnx("creating the environment", e))?;
    // The logger is created at ONNX Runtime's most verbose level: only what the `log`
    // facade can show is asked for (each message is formatted before the callback).
    env.set_log_level(match log::max_level() {
        log::LevelFilter::Trace => ort::logging::LogLevel::Verbose,
        log::LevelFilter::Debug => ort::logging::LogLevel::Info,
        _ => ort::logging::LogLevel::Warning,
    });
    let providers = available_providers()?;
    Ok(Loaded { info: RuntimeInfo { library, found_by, version, providers }, _env: env })
}

/// ONNX Runtime's own messages, through the `log` facade (target `onnxruntime`)
/// instead of its default sink, which writes them to stderr with ANSI colour codes.
/// Its errors come back to the caller as the failing call's status too (a frame's
/// error names the tensor and the shapes), so they are logged at info level like its
/// warnings (`-v` on the command line); its info at debug, its verbose at trace.
fn forward_log(level: ort::logging::LogLevel, _category: &str, _id: &str, location: &str, message: &str) {
    use ort::logging::LogLevel;
    let (level, what) = match level {
        LogLevel::Fatal => (log::Level::Info, "fatal"),
        LogLevel::Error => (log::Level::Info, "error"),
        LogLevel::Warning => (log::Level::Info, "warning"),
        LogLevel::Info => (log::Level::Debug, "info"),
        LogLevel::Verbose => (log::Level::Trace, "verbose"),
    };
    log::log!(target: "onnxruntime", level, "{what} ({location}): {message}");
}

/// The environment of the loaded runtime ([`load`] first).
pub(crate) fn environment() -> Result<&'static ort::environment::Environment> {
    match RUNTIME.get() {
        Some(Ok(l)) => Ok(&l._env),
        Some(Err(reason)) => Err(Error::OnnxRuntimeMissing { reason: reason.clone() }),
        None => load(None).and_then(|_| environment()),
    }
}

/// Where the library would be loaded from, without loading it.
pub(crate) fn find(explicit: Option<&Path>) -> Result<(PathBuf, String)> {
    let mut tried = Vec::new();
    // What a path that is no library file is: missing, or something else (a directory, a FIFO).
    let not_a_file = |p: &Path| match std::fs::metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "does not exist".to_string(),
        Err(e) => format!("cannot be read ({e})"),
        Ok(m) if m.is_dir() => "is a directory, not the library file (libonnxruntime.so…)".to_string(),
        Ok(_) => "is not a regular file (a FIFO or a device?), not the library file".to_string(),
    };
    if let Some(p) = explicit {
        if p.is_file() {
            return Ok((p.to_path_buf(), "the path given (ContextBuilder::ort_library)".into()));
        }
        return Err(Error::OnnxRuntimeMissing {
            reason: format!("the ONNX Runtime library given, {}, {}", p.display(), not_a_file(p)),
        });
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok((p, "ORT_DYLIB_PATH".into()));
        }
        return Err(Error::OnnxRuntimeMissing { reason: format!("ORT_DYLIB_PATH={} {}", p.display(), not_a_file(&p)) });
    }
    let gpu_first = ["ort-gpu", "ort-cpu"];
    for base in project_roots() {
        for flavour in gpu_first {
            let capi = base.join(".runtime").join(flavour).join("onnxruntime").join("capi");
            if let Some(lib) = library_in(&capi) {
                return Ok((lib, format!("project-local {}", capi.display())));
            }
            tried.push(capi.display().to_string());
        }
    }
    // Where scripts/setup.sh links what it installed, for crates outside the checkout.
    if let Some(data) = user_data_dir() {
        for flavour in gpu_first {
            let capi = data.join("neural-frame").join(flavour).join("onnxruntime").join("capi");
            if let Some(lib) = library_in(&capi) {
                return Ok((lib, format!("scripts/setup.sh's link {}", capi.display())));
            }
            tried.push(capi.display().to_string());
        }
    }
    // Where pip puts the onnxruntime (or onnxruntime-gpu) package.
    for site in site_packages() {
        let capi = site.join("onnxruntime").join("capi");
        if let Some(lib) = library_in(&capi) {
            return Ok((lib, format!("pip's {}", capi.display())));
        }
    }
    tried.push("pip's site-packages (user, virtualenv, system)".into());
    Err(Error::OnnxRuntimeMissing { reason: format!("no {LIBRARY_NAME} in ORT_DYLIB_PATH, {}", tried.join(", ")) })
}

/// `$XDG_DATA_HOME`, else `~/.local/share` (Unix); `%LOCALAPPDATA%` on Windows.
fn user_data_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if cfg!(windows) {
        return var("LOCALAPPDATA");
    }
    var("XDG_DATA_HOME").or_else(|| var("HOME").map(|h| h.join(".local").join("share")))
}

/// Python's package directories where `pip install` puts packages: the active
/// virtualenv's, the user's and the system's (Unix layouts; none on Windows).
fn site_packages() -> Vec<PathBuf> {
    if cfg!(windows) {
        return Vec::new();
    }
    let mut prefixes: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        prefixes.push((PathBuf::from(venv).join("lib"), "site-packages"));
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        prefixes.push((PathBuf::from(home).join(".local").join("lib"), "site-packages"));
    }
    for lib in ["/usr/local/lib", "/usr/lib"] {
        prefixes.push((PathBuf::from(lib), "dist-packages"));
        prefixes.push((PathBuf::from(lib), "site-packages"));
    }
    let mut sites = Vec::new();
    for (lib, leaf) in prefixes {
        let Ok(entries) = std::fs::read_dir(&lib) else { continue };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python3")))
            .map(|e| e.path().join(leaf))
            .filter(|p| p.is_dir())
            .collect();
        // The newest Python first (python3.12 before python3.9).
        let minor = |p: &PathBuf| -> u32 {
            let name = p.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).unwrap_or("");
            name.strip_prefix("python3.").and_then(|m| m.parse().ok()).unwrap_or(0)
        };
        pythons.sort_by_key(|p| std::cmp::Reverse(minor(p)));
        sites.extend(pythons);
    }
    sites
}

fn project_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/release/neural-frame or target/release/deps/test → the project root
        roots.extend(exe.ancestors().skip(1).take(4).map(Path::to_path_buf));
    }
    roots.dedup();
    roots
}

/// ONNX Runtime's library in the pip wheel's `onnxruntime/capi/`, as messages name it.
#[cfg(not(windows))]
const LIBRARY_NAME: &str = "libonnxruntime.so";
/// ONNX Runtime's library in the pip wheel's `onnxruntime/capi/`, as messages name it.
#[cfg(windows)]
const LIBRARY_NAME: &str = "onnxruntime.dll";

/// Whether `name` is ONNX Runtime's main library (not one of its providers):
/// `libonnxruntime.so*` (Linux, with or without the version), `onnxruntime.dll` (Windows).
fn is_library_name(name: &str) -> bool {
    if cfg!(windows) {
        name.eq_ignore_ascii_case(LIBRARY_NAME)
    } else {
        name.starts_with(LIBRARY_NAME) && !name.contains("providers")
    }
}

fn library_in(capi: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(capi)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(is_library_name))
        .collect();
    found.sort();
    found.pop()
}

fn version_of(library: &Path) -> Result<String> {
    let missing = |reason: String| Error::OnnxRuntimeMissing { reason };
    // SAFETY: loading ONNX Runtime runs its initialisers; it is the library the user pointed at.
    let lib =
        unsafe { libloading::Library::new(library) }.map_err(|e| missing(format!("{}: {e}", library.display())))?;
    type GetBase = unsafe extern "C" fn() -> *const ort::sys::OrtApiBase;
    // SAFETY: OrtGetApiBase has this signature in every ONNX Runtime release.
    let get: libloading::Symbol<'_, GetBase> = unsafe { lib.get(b"OrtGetApiBase") }
        .map_err(|_| missing(format!("{} does not export OrtGetApiBase: not ONNX Runtime", library.display())))?;
    // SAFETY: the symbol is OrtGetApiBase; it returns a static table or null.
    let base = unsafe { get() };
    if base.is_null() {
        return Err(missing(format!("{}: OrtGetApiBase returned null", library.display())));
    }
    // SAFETY: base is ONNX Runtime's static API base; GetVersionString returns a static string.
    let v = unsafe { CStr::from_ptr(((*base).GetVersionString)()) };
    Ok(v.to_string_lossy().into_owned())
}

fn available_providers() -> Result<Vec<String>> {
    let api = ort::api();
    let mut list: *mut *mut std::ffi::c_char = std::ptr::null_mut();
    let mut n = 0;
    // SAFETY: out pointers are valid; ONNX Runtime allocates the list.
    crate::onnx::binding::status("listing execution providers", unsafe {
        (api.GetAvailableProviders)(&mut list, &mut n)
    })?;
    let names = (0..n as usize)
        // SAFETY: the list holds n NUL-terminated strings.
        .map(|i| unsafe { CStr::from_ptr(*list.add(i)) }.to_string_lossy().into_owned())
        .collect();
    // SAFETY: releases the list allocated above, once.
    let _ = unsafe { (api.ReleaseAvailableProviders)(list, n) };
    Ok(names)
}

/// The CUDA libraries onnxruntime-gpu 1.31.1's CUDA provider links (CUDA 13, cuDNN 9).
#[cfg(feature = "cuda")]
const CUDA_PROVIDER_LIBRARIES: [&str; 6] =
    ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcufft.so.12", "libcurand.so.10", "libcudnn.so.9"];

/// The CUDA provider's registration error, trimmed, and — when it is a library that
/// failed to load — every other library the provider needs that cannot be loaded
/// either (the dynamic linker stops at the first), so one message names them all.
#[cfg(feature = "cuda")]
pub(crate) fn provider_failure(e: impl std::fmt::Display) -> Error {
    let mut reason = e.to_string().trim_end().to_string();
    if reason.contains("cannot open shared object file") {
        let others: Vec<String> = CUDA_PROVIDER_LIBRARIES
            .iter()
            .filter(|lib| !reason.contains(*lib))
            // SAFETY: probing a system library the provider itself would load; it is closed at once.
            .filter_map(|lib| unsafe { libloading::Library::new(*lib) }.err())
            // libloading's own text is "dlopen failed"; dlerror's, its source, names the library.
            .map(|e| std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string()))
            .collect();
        if !others.is_empty() {
            reason = format!("{reason}; not loadable either: {}", others.join("; "));
        }
    }
    Error::ProviderUnavailable { reason }
}

#[cfg(test)]
mod tests {
    use super::is_library_name;

    #[test]
    fn the_main_library_is_told_from_the_providers() {
        #[cfg(not(windows))]
        for (name, main) in [
            ("libonnxruntime.so.1.31.1", true),
            ("libonnxruntime.so", true),
            ("libonnxruntime_providers_cuda.so", false),
            ("libonnxruntime_providers_shared.so", false),
            ("onnxruntime.dll", false),
        ] {
            assert_eq!(is_library_name(name), main, "{name}");
        }
        #[cfg(windows)]
        for (name, main) in [
            ("onnxruntime.dll", true),
            ("ONNXRUNTIME.DLL", true),
            ("onnxruntime_providers_cuda.dll", false),
            ("onnxruntime_providers_shared.dll", false),
            ("libonnxruntime.so.1.31.1", false),
        ] {
            assert_eq!(is_library_name(name), main, "{name}");
        }
    }
}

#[cfg(all(test, feature = "cuda"))]
mod provider_tests {
    use super::*;

    #[test]
    fn a_missing_library_names_the_others_that_cannot_load() {
        let first = "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot \
                     open shared object file: No such file or directory\n";
        let text = provider_failure(first).to_string();
        assert!(text.contains("Missing: libcublasLt.so.13 (PyPI: nvidia-cublas)"), "{text}");
        assert!(!text.contains("directory\n"), "the provider's message is trimmed: {text}");
        for lib in CUDA_PROVIDER_LIBRARIES {
            // SAFETY: probing whether a system library loads, as provider_failure does.
            let loadable = unsafe { libloading::Library::new(lib) }.is_ok();
            assert_eq!(text.contains(lib), !loadable || lib == "libcublasLt.so.13", "{lib}: {text}");
        }
        // Another failure is left as it is.
        let other = provider_failure("CUDA driver version is insufficient").to_string();
        assert!(!other.contains("not loadable"), "{other}");
    }
}
