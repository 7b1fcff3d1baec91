//! Pure mappings between Vulkan enums and what the pipeline needs to know. No unsafe.

use ash::vk;

/// Bytes per texel of the colour formats neural-frame handles, or `None`.
pub(crate) fn bytes_per_pixel(format: vk::Format) -> Option<u32> {
    match format {
        vk::Format::R8G8B8A8_UNORM
        | vk::Format::R8G8B8A8_SRGB
        | vk::Format::B8G8R8A8_UNORM
        | vk::Format::B8G8R8A8_SRGB => Some(4),
        vk::Format::R16G16B16A16_SFLOAT | vk::Format::R32G32_SFLOAT => Some(8),
        vk::Format::R16_SFLOAT => Some(2),
        vk::Format::R32_SFLOAT | vk::Format::R16G16_SFLOAT => Some(4),
        vk::Format::R32G32B32A32_SFLOAT => Some(16),
        _ => None,
    }
}

/// The name of an external memory feature set, for reports.
pub(crate) fn external_features(f: vk::ExternalMemoryFeatureFlags) -> String {
    let mut parts = Vec::new();
    if f.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
        parts.push("exportable");
    }
    if f.contains(vk::ExternalMemoryFeatureFlags::IMPORTABLE) {
        parts.push("importable");
    }
    if f.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY) {
        parts.push("dedicated-only");
    }
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes_per_pixel(vk::Format::B8G8R8A8_UNORM), Some(4));
        assert_eq!(bytes_per_pixel(vk::Format::R16G16B16A16_SFLOAT), Some(8));
        assert_eq!(bytes_per_pixel(vk::Format::D32_SFLOAT), None);
        assert_eq!(external_features(vk::ExternalMemoryFeatureFlags::empty()), "none");
    }
}
