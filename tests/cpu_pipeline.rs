//! The whole pipeline on the host backend (Vulkan on lavapipe or any driver,
//! ONNX Runtime's CPU provider), compared with ONNX Runtime run directly on the
//! same input. Output memory is poisoned first, so unwritten bytes show.

use std::path::Path;

use ash::vk;
use common::pipeline::{
    Tolerance, check_backend, check_host_pinned, expected_image, max_diff, picture, reference_output,
};
use neural_frame::{Backend, ErrorKind, NeuralFrameContext};

fn check(model: &str, width: u32, height: u32, seed: u32) {
    check_backend(model, Backend::Cpu, width, height, seed, Tolerance::default());
}

#[test]
fn f32_model_matches_onnx_runtime_at_odd_size() {
    check("models/test/tiny-x2-f32.onnx", 37, 53, 1);
}

#[test]
fn f16_model_matches_onnx_runtime_at_odd_size() {
    check("models/test/tiny-x2-f16.onnx", 37, 53, 2);
}

#[test]
fn rgba_u8_model_matches_onnx_runtime_at_odd_size() {
    check("models/test/tiny-x1-rgba-u8.onnx", 37, 53, 3);
}

#[test]
fn models_match_at_even_and_wide_sizes() {
    check("models/test/tiny-x2-f32.onnx", 64, 16, 4);
    check("models/test/tiny-x2-f16.onnx", 1, 1, 5);
    check("models/test/tiny-x1-rgba-u8.onnx", 130, 3, 6);
}

#[test]
fn realesrgan_x4_matches_onnx_runtime() {
    check("models/upscale.onnx", 24, 17, 7);
}

#[test]
fn realesrgan_x4_fp16_matches_onnx_runtime() {
    check("models/upscale-fp16.onnx", 19, 11, 8);
}

#[test]
fn frame_size_change_recreates_buffers_and_keeps_the_session() {
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(20, 10)
        .build()
        .expect("context");
    let old = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let old_out = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    for (w, h) in [(20, 10), (33, 7), (20, 10)] {
        ctx.resize(w, h).expect("resize");
        let rgba = picture(w, h, w + h);
        let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
        let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
        ctx.upload(input, &rgba).expect("upload");
        ctx.infer(input, output).expect("infer after resize");
        assert_eq!(ctx.frame_size(), (w, h));
        let contract = ctx.contract().clone();
        let reference = reference_output(Path::new("models/test/tiny-x2-f32.onnx"), &contract, &rgba, w, h);
        let want = expected_image(&contract, &reference, &rgba, w, h);
        let got = ctx.readback(output).expect("readback");
        let (d, x, y, c) = max_diff(&got, &want, 2 * w);
        assert!(d <= 1, "{w}×{h}: ({x}, {y}) ch {c} differs by {d}");
        if (w, h) != (20, 10) {
            // A resize is explicit: registrations of the old size are refused, never reallocated.
            let e = ctx.infer(old, old_out).expect_err("old size");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("resize"), "{e}");
        }
    }
    // Back at 20×10, the old registrations fit again (their passes are recorded anew).
    ctx.upload(old, &picture(20, 10, 3)).expect("upload");
    ctx.infer(old, old_out).expect("the first size again");
}

#[test]
fn input_formats_bgra_srgb_and_half_give_the_same_frame() {
    let (w, h) = (29, 13);
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(w, h)
        .build()
        .expect("context");
    let rgba = picture(w, h, 11);
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let mut results = Vec::new();
    for format in [
        vk::Format::R8G8B8A8_UNORM,
        vk::Format::B8G8R8A8_UNORM,
        vk::Format::R8G8B8A8_SRGB,
        vk::Format::B8G8R8A8_SRGB,
        vk::Format::R16G16B16A16_SFLOAT,
    ] {
        let input = ctx.create_input_image(format).expect("input image");
        let texels: Vec<u8> = match format {
            vk::Format::B8G8R8A8_UNORM | vk::Format::B8G8R8A8_SRGB => {
                rgba.chunks(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect()
            }
            vk::Format::R16G16B16A16_SFLOAT => {
                rgba.iter().flat_map(|v| half::f16::from_f32(*v as f32 / 255.0).to_le_bytes()).collect()
            }
            _ => rgba.clone(), // sRGB: the stored bytes are the same; the pass re-encodes what the view decodes
        };
        ctx.upload(input, &texels).expect("upload");
        ctx.infer(input, output).expect("infer");
        results.push((format, ctx.readback(output).expect("readback")));
    }
    for (format, got) in &results[1..] {
        let (d, x, y, c) = max_diff(got, &results[0].1, 2 * w);
        assert!(d <= 1, "{format:?}: ({x}, {y}) ch {c} differs by {d} from RGBA8");
    }
}

#[test]
fn half_float_output_image_holds_the_model_output() {
    let (w, h) = (23, 9);
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(w, h)
        .build()
        .expect("context");
    let rgba = picture(w, h, 12);
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R16G16B16A16_SFLOAT).expect("half output");
    ctx.upload(input, &rgba).expect("upload");
    ctx.upload_output(output, &vec![0xff; (4 * w * h * 8) as usize]).expect("poison: NaN halves");
    ctx.infer(input, output).expect("infer");
    let got = ctx.readback(output).expect("readback");
    let contract = ctx.contract().clone();
    let reference = reference_output(Path::new("models/test/tiny-x2-f32.onnx"), &contract, &rgba, w, h);
    let want = common::pipeline::values(contract.output, &reference);
    let (ow, oh) = (2 * w as usize, 2 * h as usize);
    let plane = ow * oh;
    let mut worst = 0f32;
    for i in 0..plane {
        for c in 0..3 {
            let b = &got[(i * 4 + c) * 2..(i * 4 + c) * 2 + 2];
            let v = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
            worst = worst.max(common::pipeline::abs_diff(v, want[c * plane + i]));
        }
    }
    assert!(worst <= 2e-3, "RGBA16F output differs from ORT's tensor by {worst} (unclamped, half precision)");
}

#[test]
fn wrong_images_are_refused_with_reasons() {
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(8, 8)
        .build()
        .expect("context");
    let e = ctx.create_input_image(vk::Format::R8G8B8_UNORM).expect_err("unsupported input format");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("R8G8B8_UNORM") && e.to_string().contains("B8G8R8A8_UNORM"), "{e}");
    let e = ctx.create_output_image(vk::Format::B8G8R8A8_SRGB).expect_err("unsupported output format");
    assert!(e.to_string().contains("R16G16B16A16_SFLOAT"), "{e}");
    // The context is still usable after refusals.
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    ctx.upload(input, &picture(8, 8, 1)).expect("upload");
    ctx.infer(input, output).expect("infer");
}

#[test]
fn unwritten_poisoned_output_would_be_detected() {
    // The comparison itself must see poison: read the poisoned tensor without running the model.
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(4, 4)
        .build()
        .expect("context");
    ctx.poison_output_tensor(common::pipeline::POISON).expect("poison");
    let got = common::pipeline::values(ctx.contract().output, &ctx.read_output_tensor().expect("read"));
    assert!(got.iter().all(|v| v.is_nan()), "poison is a NaN pattern");
    let worst = got.iter().map(|v| common::pipeline::abs_diff(*v, 0.5)).fold(0f32, f32::max);
    assert_eq!(worst, f32::INFINITY);
}

#[test]
fn ring_results_equal_the_synchronous_path() {
    common::pipeline::ring_matches_sync(
        "models/test/tiny-x2-f32.onnx",
        Backend::Cpu,
        common::pipeline::plain,
        40,
        24,
        24,
    );
    common::pipeline::ring_matches_sync(
        "models/test/tiny-x1-rgba-u8.onnx",
        Backend::Cpu,
        common::pipeline::plain,
        33,
        17,
        12,
    );
}

fn spin_without_timestamps(b: neural_frame::ContextBuilder) -> neural_frame::ContextBuilder {
    b.spin_wait(true).gpu_timestamps(false)
}

#[test]
fn ring_with_spin_waits_and_no_timestamps_equals_the_synchronous_path() {
    common::pipeline::ring_matches_sync(
        "models/test/tiny-x2-f32.onnx",
        Backend::Cpu,
        spin_without_timestamps,
        40,
        24,
        16,
    );
    let (tensor, pixel) = common::pipeline::check_frames(
        "models/test/tiny-x2-f32.onnx",
        Backend::Cpu,
        spin_without_timestamps,
        37,
        21,
        5,
        4,
        common::pipeline::Tolerance::default(),
    );
    assert!(tensor < 1e-4 && pixel <= 1);
}

#[test]
fn slow_consumer_meets_back_pressure() {
    use neural_frame::BackPressure;
    common::pipeline::slow_consumer(
        "models/test/tiny-x2-f32.onnx",
        Backend::Cpu,
        common::pipeline::plain,
        BackPressure::Block,
        (96, 64),
        12,
    );
    // The CPU backend finishes the model inside submit, so skipping is possible but not certain here.
    common::pipeline::slow_consumer(
        "models/test/tiny-x2-f32.onnx",
        Backend::Cpu,
        common::pipeline::plain,
        BackPressure::Skip,
        (96, 64),
        12,
    );
}

#[test]
fn host_pinned_frames_match_onnx_runtime() {
    check_host_pinned(Backend::Cpu, common::pipeline::plain, "models/test/tiny-x2-f32.onnx", 37, 53);
}

fn cuda_passes(b: neural_frame::ContextBuilder) -> neural_frame::ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_passes(true))
}

#[test]
fn cuda_passes_are_not_in_effect_on_the_cpu_backend() {
    let ctx = cuda_passes(NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").backend(Backend::Cpu))
        .frame_size(16, 16)
        .build()
        .expect("context");
    assert_eq!(ctx.tuning().cuda, None, "the tuning reports what runs: no CUDA option here");
    // The same frames as the GPU test of the CUDA passes, through the Vulkan passes here.
    for model in [
        "models/test/tiny-x2-f32.onnx",
        "models/test/tiny-x1-rgba-u8.onnx",
        "models/test/tiny-x2-f32-nhwc.onnx",
        "models/test/tiny-x2-f32-bgr-signed.onnx",
        "models/test/tiny-x2-f32-meanstd.onnx",
    ] {
        let tol = common::pipeline::Tolerance::default();
        let (tensor, pixel) = common::pipeline::check_frames(model, Backend::Cpu, cuda_passes, 37, 53, 60, 2, tol);
        assert!(tensor <= tol.tensor && pixel <= tol.pixel, "{model}");
    }
}
