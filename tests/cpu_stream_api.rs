//! The library's host streams on the CPU backend (lavapipe's Vulkan for the copies and
//! the colour conversion, ONNX Runtime's CPU provider for the model): every frame
//! against the independent reference (tests/common/src/stream.rs).

use common::host_stream::{check_rgb24_stream, check_yuv_stream};
use common::pipeline::plain;
use neural_frame::Backend;

const MODEL: &str = "models/test/tiny-x2-f32.onnx";

// Tolerances: the GPU and the reference round at two RGBA steps (the converted input frame,
// the model's output frame), so a sample may land one code apart at each, and a 4:2:0
// chroma sample averages four such pixels; 3 codes on 8 bits, 12 on 10 bits (RGBA16F in
// between), with PSNR ≥ 45 dB over every sample.

#[test]
fn yuv420_frames_match_the_reference() {
    let (psnr, max, stats) = check_yuv_stream(MODEL, Backend::Cpu, plain, "420jpeg", (38, 22), 12, 3, 45.0, 3);
    println!("420jpeg: worst PSNR {psnr:.1} dB, max diff {max}; {} frames", stats.len());
    assert_eq!(stats.len(), 12);
}

#[test]
fn odd_sizes_cosited_chroma_and_alpha() {
    let (psnr, max, _) = check_yuv_stream(MODEL, Backend::Cpu, plain, "420mpeg2", (37, 21), 5, 2, 45.0, 3);
    println!("420mpeg2 37×21: worst PSNR {psnr:.1} dB, max diff {max}");
    let (psnr, max, _) = check_yuv_stream(MODEL, Backend::Cpu, plain, "444alpha", (20, 14), 4, 2, 45.0, 3);
    println!("444alpha: worst PSNR {psnr:.1} dB, max diff {max}");
    let (psnr, max, _) = check_yuv_stream(MODEL, Backend::Cpu, plain, "422", (21, 9), 3, 1, 45.0, 3);
    println!("422: worst PSNR {psnr:.1} dB, max diff {max}");
}

#[test]
fn ten_bit_frames_match_the_reference() {
    let (psnr, max, _) = check_yuv_stream(MODEL, Backend::Cpu, plain, "420p10", (30, 18), 6, 3, 45.0, 12);
    println!("420p10: worst PSNR {psnr:.1} dB, max diff {max} (10-bit codes)");
    // 16 bits: RGBA16F (11 significant bits) in between, so codes land up to ~2⁵ apart at
    // each rounding; PSNR on the 16-bit scale still ≥ 45 dB.
    let (psnr, max, _) = check_yuv_stream(MODEL, Backend::Cpu, plain, "444p16", (16, 10), 3, 2, 45.0, 200);
    println!("444p16: worst PSNR {psnr:.1} dB, max diff {max} (16-bit codes)");
}

#[test]
fn rgb24_frames_match_onnx_runtime() {
    let max = check_rgb24_stream(MODEL, Backend::Cpu, (26, 18), 4, 1);
    println!("rgb24: max diff {max}");
}
