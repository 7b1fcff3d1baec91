//! The whole pipeline on the host backend (Vulkan on lavapipe or any driver,
//! ONNX Runtime's CPU provider), compared with ONNX Runtime run directly on the
//! same input. Output memory is poisoned first, so unwritten bytes show.

mod common;

use std::path::Path;

use ash::vk;
use common::pipeline::{expected_image, input_tensor, max_diff, picture, reference_output, values};
use neural_frame::pipeline::{Backend, NeuralFrameContext};
use neural_frame::vulkan::transfer;

const POISON: u32 = 0x7fc0_dead; // a NaN in f32, odd values in f16 and u8

fn check(model: &str, width: u32, height: u32, seed: u32) {
    let model = Path::new(model);
    let mut ctx = NeuralFrameContext::builder(model)
        .backend(Backend::Cpu)
        .frame_size(width, height)
        .build()
        .unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    let contract = ctx.contract().clone();
    let rgba = picture(width, height, seed);
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input image");
    let output = ctx.create_output_image().expect("output image");
    transfer::upload_image(&input, &rgba).expect("upload");
    let (ow, oh) = ctx.output_size();
    transfer::upload_image(&output, &vec![0xa5; (ow * oh * 4) as usize]).expect("poison output image");
    ctx.poison_output_tensor(POISON).expect("poison output tensor");

    ctx.infer(&input, &output).expect("infer");

    // The pre pass wrote exactly the tensor the host computes.
    let got_in = values(contract.input, &ctx.read_input_tensor().expect("input tensor"));
    let want_in = values(contract.input, &input_tensor(contract.input, &rgba, width, height));
    let worst_in = got_in
        .iter()
        .zip(&want_in)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        worst_in <= 1e-3,
        "{}: pre pass input tensor differs by {worst_in}",
        model.display()
    );

    // ONNX Runtime wrote its output straight into the Vulkan buffer (poisoned before).
    let reference = reference_output(model, &contract, &rgba, width, height);
    let got_out = values(contract.output, &ctx.read_output_tensor().expect("output tensor"));
    let want_out = values(contract.output, &reference);
    assert_eq!(got_out.len(), want_out.len());
    let worst_out = got_out
        .iter()
        .zip(&want_out)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let tol = if contract.output == neural_frame::onnx::TensorKind::NchwF16 {
        2e-3
    } else {
        1e-4
    };
    assert!(
        worst_out <= tol,
        "{}: output tensor in the Vulkan buffer differs from ORT's by {worst_out} (NaN means unwritten)",
        model.display()
    );

    // The post pass made the image: ≤ 1/255 per channel, every pixel written.
    let image = transfer::readback_image(&output).expect("readback");
    let want = expected_image(&contract, &reference, &rgba, width, height);
    let (d, x, y, c) = max_diff(&image, &want, ow);
    assert!(
        d <= 1,
        "{} {width}×{height}: pixel ({x}, {y}) channel {c} differs by {d}",
        model.display()
    );
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
    for (w, h) in [(20, 10), (33, 7), (20, 10)] {
        let rgba = picture(w, h, w + h);
        let device = ctx.device().clone();
        let desc = |w, h, usage| neural_frame::vulkan::ImageDesc {
            width: w,
            height: h,
            format: vk::Format::R8G8B8A8_UNORM,
            usage,
        };
        let input = neural_frame::vulkan::Image::new(
            &device,
            desc(w, h, vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST),
        )
        .expect("input");
        let output = neural_frame::vulkan::Image::new(
            &device,
            desc(
                2 * w,
                2 * h,
                vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST,
            ),
        )
        .expect("output");
        transfer::upload_image(&input, &rgba).expect("upload");
        ctx.infer(&input, &output).expect("infer after resize");
        assert_eq!(ctx.frame_size(), (w, h));
        let contract = ctx.contract().clone();
        let reference = reference_output(Path::new("models/test/tiny-x2-f32.onnx"), &contract, &rgba, w, h);
        let want = expected_image(&contract, &reference, &rgba, w, h);
        let got = transfer::readback_image(&output).expect("readback");
        let (d, x, y, c) = max_diff(&got, &want, 2 * w);
        assert!(d <= 1, "{w}×{h}: ({x}, {y}) ch {c} differs by {d}");
    }
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
    let output = ctx.create_output_image().expect("output");
    let mut results = Vec::new();
    for format in [
        vk::Format::R8G8B8A8_UNORM,
        vk::Format::B8G8R8A8_UNORM,
        vk::Format::R8G8B8A8_SRGB,
        vk::Format::R16G16B16A16_SFLOAT,
    ] {
        let input = ctx.create_input_image(format).expect("input image");
        let texels: Vec<u8> = match format {
            vk::Format::B8G8R8A8_UNORM => rgba.chunks(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect(),
            vk::Format::R16G16B16A16_SFLOAT => rgba
                .iter()
                .flat_map(|v| half::f16::from_f32(*v as f32 / 255.0).to_le_bytes())
                .collect(),
            _ => rgba.clone(), // sRGB: the stored bytes are the same; the pass re-encodes what the view decodes
        };
        transfer::upload_image(&input, &texels).expect("upload");
        ctx.infer(&input, &output).expect("infer");
        results.push((format, transfer::readback_image(&output).expect("readback")));
    }
    for (format, got) in &results[1..] {
        let (d, x, y, c) = max_diff(got, &results[0].1, 2 * w);
        assert!(d <= 1, "{format:?}: ({x}, {y}) ch {c} differs by {d} from RGBA8");
    }
}

#[test]
fn wrong_images_are_refused_with_reasons() {
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(8, 8)
        .build()
        .expect("context");
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let small = ctx
        .create_input_image(vk::Format::R8G8B8A8_UNORM)
        .expect("another input");
    let e = ctx
        .infer(&input, &small)
        .expect_err("output of the wrong size and usage");
    assert!(e.to_string().contains("STORAGE"), "{e}");
    let output = ctx.create_output_image().expect("output");
    let e = ctx.infer(&output, &output).expect_err("output as input");
    assert!(
        e.to_string().contains("SAMPLED") || e.to_string().contains("needs"),
        "{e}"
    );
}
