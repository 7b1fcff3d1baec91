//! The library's error type. Each message names the stage that failed, what
//! was missing and, where there is one, what the user can do about it.

use ash::vk;

/// Every failure the library reports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Vulkan loader library could not be loaded.
    #[error(
        "Vulkan loader not found ({library}): {reason}. Install the Vulkan loader \
         (Debian/Ubuntu: `apt install libvulkan1`) and a driver (the NVIDIA driver, or \
         `mesa-vulkan-drivers` for a CPU-only machine), or point NEURAL_FRAME_VULKAN_LIBRARY at libvulkan.so.1"
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
        /// What is missing (an extension name, a feature, a format capability).
        what: String,
        /// What would satisfy the requirement.
        remedy: String,
    },
    /// No device matches what the user asked for.
    #[error("no Vulkan device matches {wanted} (devices: {seen})")]
    NoSuchDevice {
        /// The selector the user gave.
        wanted: String,
        /// Every device seen, with index and UUID.
        seen: String,
    },
    /// The CUDA driver library is not present.
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
        "no CUDA device has the Vulkan device's UUID {vulkan_uuid} (seen: {seen}); pass --device \
         to choose another Vulkan device, or use --backend cpu"
    )]
    DeviceMismatch {
        /// The Vulkan deviceUUID.
        vulkan_uuid: String,
        /// Every CUDA device seen, with its UUID.
        seen: String,
    },
    /// No ONNX Runtime library could be found or loaded.
    #[error(
        "ONNX Runtime not found or not loadable: {reason}. Get it from PyPI: `pip install onnxruntime-gpu==1.31.1` \
         (NVIDIA GPU) or `pip install onnxruntime==1.31.1` (CPU), then point ORT_DYLIB_PATH (or --ort-library) at \
         its onnxruntime/capi/libonnxruntime.so.1.31.1; `scripts/setup.sh` does this into .runtime/"
    )]
    OnnxRuntimeMissing {
        /// Where it looked and what failed.
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
    /// A size or parameter is outside what the device or the pipeline allows.
    #[error("{0}")]
    InvalidArgument(String),
    /// File input/output.
    #[error("{what}: {source}")]
    Io {
        /// What was being read or written.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    /// An [`Error::Onnx`] from an `ort` error.
    pub(crate) fn onnx(what: impl Into<String>, e: impl std::fmt::Display) -> Self {
        Self::Onnx { what: what.into(), message: e.to_string() }
    }
}

/// The library's result type.
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
pub fn format_uuid(uuid: &[u8; 16]) -> String {
    let h: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// Parses a UUID written as 32 hex digits, with or without dashes (and an optional `GPU-` prefix).
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
}
