//! Host streams on the CUDA backend (issue 26): YUV and RGB24 frames through pinned
//! staging, the colour conversion in Vulkan compute passes, the model on ONNX Runtime's
//! CUDA provider with the CUDA pre and post passes; every frame against the independent
//! reference (tests/common/src/stream.rs: f64 conversions, ONNX Runtime's CPU run). Needs an
//! NVIDIA GPU.

use common::gpu;
use common::host_stream::{check_rgb24_stream, check_yuv_stream};
use common::pipeline::{Tune, plain};
use neural_frame::{Backend, ContextBuilder};

const MODEL: &str = "models/test/tiny-x2-f32.onnx";

fn graphs(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_graph(true))
}

// Tolerances as in cpu_stream_api.rs: one code at each of the two RGBA roundings, averaged
// over a 4:2:0 chroma sample; the model runs in fp32 (`exact`) on the CUDA provider.

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn yuv420_frames_match_the_reference_on_cuda() {
    gpu();
    for (name, tune) in [("default", plain as Tune), ("CUDA graphs", graphs)] {
        let (psnr, max, stats) = check_yuv_stream(MODEL, Backend::Cuda, tune, "420jpeg", (62, 38), 16, 4, 45.0, 3);
        println!("420jpeg, {name}: worst PSNR {psnr:.1} dB, max diff {max}; {} frames", stats.len());
        assert!(stats.iter().all(|s| s.cuda_passes), "{name}: a stream frame left the CUDA passes");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn deep_cosited_and_alpha_frames_on_cuda() {
    gpu();
    let cases =
        [("420p10", (40, 24), 12u16), ("420mpeg2", (37, 21), 3), ("444alpha", (20, 14), 3), ("444p16", (16, 10), 200)];
    for (tag, size, max_diff) in cases {
        let (psnr, max, _) = check_yuv_stream(MODEL, Backend::Cuda, plain, tag, size, 6, 3, 45.0, max_diff);
        println!("{tag}: worst PSNR {psnr:.1} dB, max diff {max}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn rgb24_frames_match_onnx_runtime_on_cuda() {
    gpu();
    let max = check_rgb24_stream(MODEL, Backend::Cuda, (64, 40), 4, 1);
    println!("rgb24: max diff {max}");
}
