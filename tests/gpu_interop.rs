//! Vulkan ↔ CUDA interop on a real NVIDIA GPU (pre-flight stage 2, pairing).
//! The tests that need the crate's own Vulkan and CUDA types (a wrong UUID,
//! 100 semaphore round trips, 200 imports without a leak) are in
//! `src/interop.rs`, run by the library's test binary.

use common::{GPU, gpu};
use neural_frame::preflight::{self, Details, Status};
use neural_frame::{Backend, NeuralFrameContext, format_uuid};

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn stage2_passes_and_reports() {
    let _ = GPU;
    gpu();
    let report = preflight::run(&[2], &preflight::Options::default());
    println!("{}", preflight::render(&report));
    assert_eq!(report.stages[0].status, Status::Passed, "{}", preflight::render(&report));
    assert_eq!(report.exit_code(), 0);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_device_is_found_by_the_vulkan_uuid() {
    gpu();
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cuda)
        .frame_size(8, 8)
        .build()
        .expect("context");
    let r = ctx.report();
    let shown = r.cuda_device.clone().unwrap_or_default();
    assert!(shown.contains(&format_uuid(&r.vulkan_device.uuid_bytes)), "{shown} vs {}", r.vulkan_device);
    println!("Vulkan {} ↔ {shown}", r.vulkan_device);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn image_and_buffer_mappings_are_byte_exact_at_odd_sizes() {
    gpu();
    for (w, h) in [(1023, 517), (37, 53)] {
        let options = preflight::Options { width: w, height: h, trials: 1, ..Default::default() };
        let s = preflight::stage2(&options).expect("stage 2 runs");
        assert!(s.image.identical, "{w}×{h} image: {:?}", s.image.difference);
        assert!(s.buffer.identical, "{w}×{h} buffer: {:?}", s.buffer.difference);
        assert!(s.buffer_written_by_cuda, "{w}×{h}: CUDA's write through the mapping not seen by Vulkan");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn full_preflight_passes_every_stage() {
    gpu();
    let report = preflight::run(&[], &preflight::Options { trials: 3, ..Default::default() });
    let text = preflight::render(&report);
    println!("{text}");
    assert!(report.stages.iter().all(|s| s.status == Status::Passed), "{text}");
    assert!(matches!(report.stages[1].details, Some(Details::Stage2(_))));
    let Some(Details::Stage3(s3)) = &report.stages[2].details else { panic!("stage 3 has no details: {text}") };
    assert!(s3.runtime.providers.iter().any(|p| p == "CUDAExecutionProvider"), "{text}");
    assert!(s3.values == 3 * 32 * 32 && s3.max_abs_difference <= s3.tolerance, "{text}");
}
