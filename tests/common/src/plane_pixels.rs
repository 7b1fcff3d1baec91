//! The pixels of the planar-frame tests: test pictures in a plane's format (f32, f16 or
//! 8-bit unorm), their bytes, and VapourSynth's padded pitch. Shared by tests/common's
//! planes.rs and the C API's tests/planes.rs (included there by path).

use ash::vk;
use half::f16;

pub fn bytes_of(format: vk::Format) -> u64 {
    match format {
        vk::Format::R16_SFLOAT => 2,
        vk::Format::R8_UNORM => 1,
        _ => 4,
    }
}

/// What a plane of `format` holds of `v`: itself, the nearest half, or the nearest of 256
/// codes after a clamp to [0, 1].
pub fn quantize(v: f32, format: vk::Format) -> f32 {
    match format {
        vk::Format::R16_SFLOAT => f16::from_f32(v).to_f32(),
        vk::Format::R8_UNORM => (v.clamp(0.0, 1.0) * 255.0).round() / 255.0,
        _ => v,
    }
}

/// VapourSynth's pitch: rows padded to 64 bytes.
pub fn pitch(width: u32, format: vk::Format) -> u64 {
    (width as u64 * bytes_of(format)).next_multiple_of(64)
}

/// Channel `k` of pixel (x, y) of test picture `seed`: values in about [-0.05, 1.1], as a
/// float frame may hold, quantized to `format`.
pub fn value(seed: u32, k: u32, x: u32, y: u32, w: u32, format: vk::Format) -> f32 {
    let mut s = (seed * 7919 + k * 104729 + y * w + x).wrapping_mul(2654435761);
    s ^= s >> 15;
    let noise = (s % 1000) as f32 / 1000.0;
    let ramp = match k {
        0 => x as f32 / w as f32,
        1 => (y % 17) as f32 / 16.0,
        _ => ((x + y) % 23) as f32 / 22.0,
    };
    quantize(0.8 * ramp + 0.3 * noise - 0.05, format)
}

pub fn encode(v: f32, format: vk::Format) -> Vec<u8> {
    match format {
        vk::Format::R16_SFLOAT => f16::from_f32(v).to_le_bytes().to_vec(),
        vk::Format::R8_UNORM => vec![(v.clamp(0.0, 1.0) * 255.0).round() as u8],
        _ => v.to_le_bytes().to_vec(),
    }
}

pub fn decode(b: &[u8], format: vk::Format) -> f32 {
    match format {
        vk::Format::R16_SFLOAT => f16::from_le_bytes([b[0], b[1]]).to_f32(),
        // 0xff is a code like any other: the poison check of bytes uses the pattern below.
        vk::Format::R8_UNORM => b[0] as f32 / 255.0,
        _ => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
    }
}
