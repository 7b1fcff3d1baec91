//! The library's error type. Each message names what failed, why and, where
//! there is one, what to do about it, in the library's own terms (builder
//! methods, backends); the command line maps kinds to its flags.
//!
//! Control flow matches [`Error::kind`], never message text:
//!
//! ```
//! use neural_frame::{Error, ErrorKind};
//! fn retry_later(e: &Error) -> bool {
//!     matches!(e.kind(), ErrorKind::Timeout)
//! }
//! let e = Error::Timeout { what: "frame 7".into(), waited: std::time::Duration::from_millis(5) };
//! assert!(retry_later(&e));
//! ```

use std::time::Duration;

use ash::vk;

/// What kind of failure an [`Error`] is: stable across messages, for control flow.
///
/// The enum is `#[non_exhaustive]`: a `match` needs a `_` arm.
///
/// ```
/// use neural_frame::{Error, ErrorKind};
///
/// fn advice(e: &Error) -> &'static str {
///     match e.kind() {
///         ErrorKind::Timeout => "the frame is still in flight: wait for it again",
///         ErrorKind::ProviderUnavailable => "build with Backend::Cpu",
///         ErrorKind::DeviceLost => "drop the context and build a new one",
///         _ => "give up",
///     }
/// }
/// let e = Error::InvalidArgument("a frame size of 0×0 is empty".into());
/// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
/// assert_eq!(advice(&e), "give up");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A size, handle, format or parameter the caller passed is not acceptable.
    InvalidArgument,
    /// The device, driver or build lacks something that is needed; the message
    /// says what is missing and what would satisfy it.
    Unsupported,
    /// A bounded wait ran out (a frame, a semaphore value that never arrived).
    Timeout,
    /// The GPU was lost or a kernel faulted (`VK_ERROR_DEVICE_LOST`,
    /// `CUDA_ERROR_LAUNCH_FAILED`, …): the context cannot be used any more.
    DeviceLost,
    /// No Vulkan loader, driver or device matching what was asked for.
    NoDevice,
    /// CUDA or ONNX Runtime's CUDA execution provider cannot be used here.
    ProviderUnavailable,
    /// ONNX Runtime itself could not be found or loaded.
    RuntimeMissing,
    /// The model does not fit what the pipeline supports.
    ModelContract,
    /// An image file could not be read or written.
    Image,
    /// A Vulkan call failed.
    Vulkan,
    /// A CUDA driver call failed.
    Cuda,
    /// ONNX Runtime failed.
    OnnxRuntime,
    /// Reading or writing a file failed.
    Io,
    /// A broken invariant inside neural-frame: a bug of the library, not of the
    /// caller's arguments (reported instead of a panic). Please report it with the message.
    Internal,
}

/// Every failure the library reports. Match on [`Error::kind`] for control flow;
/// the message (`Display`) says what failed, why and what to do.
///
/// ```no_run
/// use neural_frame::{ErrorKind, NeuralFrameContext};
///
/// match NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build() {
///     Ok(ctx) => println!("running on the {} backend", ctx.backend_name()),
///     Err(e) if e.kind() == ErrorKind::ModelContract => eprintln!("pick another model: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Vulkan loader library could not be loaded.
    #[cfg_attr(
        not(windows),
        error(
            "Vulkan loader not found ({library}): {reason}. Install the Vulkan loader \
             (Debian/Ubuntu: `apt install libvulkan1`) and a driver (the NVIDIA driver, or \
             `mesa-vulkan-drivers` for a CPU-only machine), or point NEURAL_FRAME_VULKAN_LIBRARY at libvulkan.so.1"
        )
    )]
    #[cfg_attr(
        windows,
        error(
            "Vulkan loader not found ({library}): {reason}. Install a GPU driver with Vulkan (it brings \
             vulkan-1.dll), or point NEURAL_FRAME_VULKAN_LIBRARY at vulkan-1.dll"
        )
    )]
    VulkanLoader {
        /// The library that was tried.
        library: String,
        /// Why loading failed.
        reason: String,
    },
    /// The loader works but no driver exposes a physical device.
    #[error(
        "no Vulkan driver found: the Vulkan loader lists no physical device{detail}. Install a \
         driver (the NVIDIA driver, or `mesa-vulkan-drivers` for a CPU-only machine) and check \
         VK_DRIVER_FILES / VK_ICD_FILENAMES; `VK_LOADER_DEBUG=error` shows why a driver was rejected"
    )]
    NoVulkanDriver {
        /// Extra detail (e.g. the loader's own error).
        detail: String,
    },
    /// A Vulkan call returned an error.
    #[error("{call} failed: {result}")]
    Vulkan {
        /// The Vulkan entry point that failed.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
    },
    /// The device lacks an extension, feature or capability that is needed.
    #[error("Vulkan device \"{device}\" does not support {what}; {remedy}")]
    Unsupported {
        /// The device's name.
        device: String,
        /// What is missing (an extension name, a feature, a format capability, a limit).
        what: String,
        /// What would satisfy the requirement.
        remedy: String,
    },
    /// No device matches what the caller asked for.
    #[error("no Vulkan device matches {wanted} (devices: {seen})")]
    NoSuchDevice {
        /// The selector that was given.
        wanted: String,
        /// Every device seen, with index and UUID.
        seen: String,
    },
    /// The CUDA driver library is not present, or the build has no CUDA.
    #[error("CUDA is not available: {reason}")]
    CudaUnavailable {
        /// Why (no libcuda, no device, init failed).
        reason: String,
    },
    /// A CUDA driver call failed.
    #[error("{call} failed: {name} ({code}){context}")]
    Cuda {
        /// The CUDA driver entry point.
        call: &'static str,
        /// The CUresult as a number.
        code: u32,
        /// The CUresult's name.
        name: String,
        /// What was being done, prefixed with ": " when present.
        context: String,
    },
    /// No CUDA device has the Vulkan device's UUID.
    #[error(
        "no CUDA device has the Vulkan device's UUID {vulkan_uuid} (seen: {seen}); choose another \
         Vulkan device (ContextBuilder::device) or the CPU backend (Backend::Cpu)"
    )]
    DeviceMismatch {
        /// The Vulkan deviceUUID.
        vulkan_uuid: String,
        /// Every CUDA device seen, with its UUID.
        seen: String,
    },
    /// No ONNX Runtime library could be found or loaded.
    #[cfg_attr(
        not(windows),
        error(
            "ONNX Runtime not found or not loadable: {reason}. Run `scripts/setup.sh` in a neural-frame \
             checkout: it installs ONNX Runtime 1.31.1 from PyPI into .runtime/ and links it from \
             ~/.local/share/neural-frame/, where the library looks from any crate. Or `pip install \
             onnxruntime-gpu==1.31.1` (NVIDIA GPU) or `pip install onnxruntime==1.31.1` (CPU) into the Python \
             whose site-packages it searches (a virtualenv's, the user's, the system's), or point ORT_DYLIB_PATH \
             (or ContextBuilder::ort_library) at onnxruntime/capi/libonnxruntime.so.1.31.1"
        )
    )]
    #[cfg_attr(
        windows,
        error(
            "ONNX Runtime not found or not loadable: {reason}. Get it from PyPI: `pip install \
             onnxruntime-gpu==1.31.1` (NVIDIA GPU) or `pip install onnxruntime==1.31.1` (CPU), then point \
             ORT_DYLIB_PATH (or ContextBuilder::ort_library) at its onnxruntime\\capi\\onnxruntime.dll, or \
             install it under .runtime\\ort-gpu (or ort-cpu) of the project"
        )
    )]
    OnnxRuntimeMissing {
        /// Where it looked and what failed.
        reason: String,
    },
    /// ONNX Runtime's CUDA execution provider failed to register.
    #[error(
        "ONNX Runtime's CUDA execution provider failed to register: {reason}.{} The onnxruntime-gpu 1.31.1 \
         build needs CUDA 13 with cuBLAS 13, cuRAND 10, cuFFT 12 and cuDNN 9 on the library path (scripts/setup.sh \
         installs them from PyPI into .runtime/cuda13, and scripts/runtime-env.sh puts them on LD_LIBRARY_PATH); \
         or use the CPU backend (Backend::Cpu)",
        missing_cuda_libraries(reason)
    )]
    ProviderUnavailable {
        /// ONNX Runtime's message.
        reason: String,
    },
    /// ONNX Runtime failed.
    #[error("ONNX Runtime: {what}: {message}")]
    Onnx {
        /// What was being done.
        what: String,
        /// ONNX Runtime's message.
        message: String,
    },
    /// The model does not fit what the pipeline supports.
    #[error("model {model}: {message}")]
    ModelContract {
        /// The model file.
        model: String,
        /// What does not fit, and what was expected.
        message: String,
    },
    /// An image file could not be read or written.
    #[error("image {path}: {message}")]
    ImageFile {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A size, handle or parameter is outside what the device or the pipeline allows.
    #[error("{0}")]
    InvalidArgument(String),
    /// A bounded wait ran out.
    #[error("{what} did not happen within {waited:?}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
    },
    /// A broken invariant inside the library (a bug), reported instead of a panic.
    #[error("internal error in neural-frame: {0}; please report it")]
    Internal(String),
    /// File input/output.
    #[error("{what}: {source}")]
    Io {
        /// What was being read or written.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// `CUresult` codes after which the CUDA context is unusable (sticky errors).
const CUDA_DEVICE_LOST: [u32; 8] = [
    700, // CUDA_ERROR_ILLEGAL_ADDRESS
    702, // CUDA_ERROR_LAUNCH_TIMEOUT
    714, // CUDA_ERROR_HARDWARE_STACK_ERROR
    715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
    716, // CUDA_ERROR_MISALIGNED_ADDRESS
    718, // CUDA_ERROR_INVALID_PC
    719, // CUDA_ERROR_LAUNCH_FAILED
    999, // CUDA_ERROR_UNKNOWN
];

impl Error {
    /// What kind of failure this is.
    ///
    /// ```
    /// use ash::vk;
    /// use neural_frame::{Error, ErrorKind};
    ///
    /// let lost = Error::Vulkan { call: "vkQueueSubmit", result: vk::Result::ERROR_DEVICE_LOST };
    /// assert_eq!(lost.kind(), ErrorKind::DeviceLost);
    /// let full = Error::Vulkan { call: "vkAllocateMemory", result: vk::Result::ERROR_OUT_OF_DEVICE_MEMORY };
    /// assert_eq!(full.kind(), ErrorKind::Vulkan);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::VulkanLoader { .. } | Error::NoVulkanDriver { .. } | Error::NoSuchDevice { .. } => {
                ErrorKind::NoDevice
            }
            Error::Vulkan { result: vk::Result::ERROR_DEVICE_LOST, .. } => ErrorKind::DeviceLost,
            Error::Vulkan { .. } => ErrorKind::Vulkan,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::CudaUnavailable { .. } | Error::DeviceMismatch { .. } | Error::ProviderUnavailable { .. } => {
                ErrorKind::ProviderUnavailable
            }
            Error::Cuda { code, .. } if CUDA_DEVICE_LOST.contains(code) => ErrorKind::DeviceLost,
            Error::Cuda { .. } => ErrorKind::Cuda,
            Error::OnnxRuntimeMissing { .. } => ErrorKind::RuntimeMissing,
            Error::Onnx { .. } => ErrorKind::OnnxRuntime,
            Error::ModelContract { .. } => ErrorKind::ModelContract,
            Error::ImageFile { .. } => ErrorKind::Image,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Internal(_) => ErrorKind::Internal,
            Error::Io { .. } => ErrorKind::Io,
        }
    }

    /// An [`Error::Onnx`] from an `ort` error.
    pub(crate) fn onnx(what: impl Into<String>, e: impl std::fmt::Display) -> Self {
        Self::Onnx { what: what.into(), message: e.to_string() }
    }

    /// An [`Error::Internal`] for a broken internal invariant: a bug in the
    /// library, reported instead of a panic.
    ///
    /// ```
    /// use neural_frame::{Error, ErrorKind};
    ///
    /// let bug = Error::Internal("a slot without buffers".into());
    /// assert_eq!(bug.kind(), ErrorKind::Internal);
    /// assert!(bug.to_string().contains("please report it"), "{bug}");
    /// ```
    pub(crate) fn internal(what: impl std::fmt::Display) -> Self {
        Self::Internal(what.to_string())
    }
}

/// The library's result type.
///
/// ```
/// fn parse_device(text: &str) -> neural_frame::Result<[u8; 16]> {
///     neural_frame::parse_uuid(text)
///         .ok_or_else(|| neural_frame::Error::InvalidArgument(format!("`{text}` is not a UUID")))
/// }
/// assert!(parse_device("73ca0102-0304-0506-0708-090a0b0c0d77").is_ok());
/// assert!(parse_device("73ca").is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a `vk::Result` into an [`Error::Vulkan`] naming the call.
pub(crate) trait VkResultExt<T> {
    fn call(self, call: &'static str) -> Result<T>;
}

impl<T> VkResultExt<T> for std::result::Result<T, vk::Result> {
    fn call(self, call: &'static str) -> Result<T> {
        self.map_err(|result| Error::Vulkan { call, result })
    }
}

/// Formats a 16-byte UUID the way `nvidia-smi` and Vulkan tools do.
///
/// ```
/// let u = [0x73, 0xca, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0x77];
/// assert_eq!(neural_frame::format_uuid(&u), "73ca0102-0304-0506-0708-090a0b0c0d77");
/// ```
pub fn format_uuid(uuid: &[u8; 16]) -> String {
    let h: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// Parses a UUID written as 32 hex digits, with or without dashes (and an optional `GPU-` prefix).
///
/// ```
/// use neural_frame::{format_uuid, parse_uuid};
///
/// // As `nvidia-smi -L` prints it, and as Vulkan tools do:
/// let u = parse_uuid("GPU-73ca0102-0304-0506-0708-090a0b0c0d77");
/// assert_eq!(u.map(|u| u[0]), Some(0x73));
/// assert_eq!(parse_uuid("73ca0102030405060708090a0b0c0d77"), u); // dashes are optional
/// assert_eq!(u.map(|u| format_uuid(&u)).as_deref(), Some("73ca0102-0304-0506-0708-090a0b0c0d77"));
/// assert!(parse_uuid("73ca").is_none());
/// ```
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let t = text.trim();
    let t = t.strip_prefix("GPU-").unwrap_or(t);
    let hex: String = t.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The CUDA libraries a provider load error names (`libX.so.N: cannot open shared object file`),
/// each with the PyPI package that ships it: " Missing: libcublasLt.so.13 (PyPI: nvidia-cublas)."
/// Empty when it names none.
fn missing_cuda_libraries(reason: &str) -> String {
    const PACKAGES: [(&str, &str); 8] = [
        ("libcudart", "nvidia-cuda-runtime"),
        ("libcublasLt", "nvidia-cublas"),
        ("libcublas", "nvidia-cublas"),
        ("libcufft", "nvidia-cufft"),
        ("libcurand", "nvidia-curand"),
        ("libcudnn", "nvidia-cudnn-cu13"),
        ("libnvrtc", "nvidia-cuda-nvrtc"),
        ("libnvJitLink", "nvidia-nvjitlink"),
    ];
    let mut named: Vec<String> = Vec::new();
    for (i, _) in reason.match_indices(": cannot open shared object file") {
        let before = &reason[..i];
        let start = before.rfind(|c: char| c.is_whitespace() || c == ':' || c == '\'' || c == '"').map_or(0, |p| p + 1);
        let lib = &before[start..];
        let Some((_, package)) = PACKAGES.iter().find(|(prefix, _)| {
            lib.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('_'))
        }) else {
            continue;
        };
        let entry = format!("{lib} (PyPI: {package})");
        if !named.contains(&entry) {
            named.push(entry);
        }
    }
    if named.is_empty() { String::new() } else { format!(" Missing: {}.", named.join(", ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trip() {
        let u: [u8; 16] =
            [0x73, 0xca, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x77];
        let s = format_uuid(&u);
        assert_eq!(s, "73ca0102-0304-0506-0708-090a0b0c0d77");
        assert_eq!(parse_uuid(&s), Some(u));
        assert_eq!(parse_uuid(&format!("GPU-{s}")), Some(u));
        assert_eq!(parse_uuid(&s.replace('-', "")), Some(u));
        assert_eq!(parse_uuid("73ca"), None);
        assert!(parse_uuid("zz").is_none());
    }

    #[test]
    fn kinds_classify_device_loss() {
        let lost = Error::Vulkan { call: "vkQueueSubmit", result: vk::Result::ERROR_DEVICE_LOST };
        assert_eq!(lost.kind(), ErrorKind::DeviceLost);
        let other = Error::Vulkan { call: "vkQueueSubmit", result: vk::Result::ERROR_OUT_OF_DEVICE_MEMORY };
        assert_eq!(other.kind(), ErrorKind::Vulkan);
        let cuda = |code| Error::Cuda { call: "cuGraphLaunch", code, name: "x".into(), context: String::new() };
        assert_eq!(cuda(719).kind(), ErrorKind::DeviceLost);
        assert_eq!(cuda(2).kind(), ErrorKind::Cuda);
        assert_eq!(Error::ProviderUnavailable { reason: "x".into() }.kind(), ErrorKind::ProviderUnavailable);
    }

    #[test]
    fn a_missing_cuda_library_is_named_with_its_package() {
        let reason = "Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.13: cannot \
                      open shared object file: No such file or directory";
        let text = Error::ProviderUnavailable { reason: reason.into() }.to_string();
        assert!(text.contains("Missing: libcublasLt.so.13 (PyPI: nvidia-cublas)."), "{text}");
        let two = missing_cuda_libraries(
            "libcudnn.so.9: cannot open shared object file: No such file; libcufft.so.12: cannot open shared object \
             file: No such file",
        );
        assert_eq!(two, " Missing: libcudnn.so.9 (PyPI: nvidia-cudnn-cu13), libcufft.so.12 (PyPI: nvidia-cufft).");
        assert_eq!(missing_cuda_libraries("CUDA driver version is insufficient"), "");
    }

    #[test]
    fn library_messages_name_no_command_line_flags() {
        let texts = [
            Error::DeviceMismatch { vulkan_uuid: "a".into(), seen: "b".into() }.to_string(),
            Error::OnnxRuntimeMissing { reason: "r".into() }.to_string(),
            Error::ProviderUnavailable { reason: "r".into() }.to_string(),
        ];
        for t in texts {
            assert!(!t.contains("--"), "{t}");
        }
    }
}
