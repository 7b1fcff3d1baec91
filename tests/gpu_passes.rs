//! The pre and post passes as CUDA kernels (`CudaOptions::with_cuda_passes`):
//! each frame compared with ONNX Runtime's CPU provider run on the same
//! picture (the input tensor with the host's conversion, the output tensor
//! and image after poisoning), the same image as the Vulkan passes for every
//! format they take, the ring equal to the synchronous path, a frame waiting
//! for the caller's timeline, and tiles and extra inputs as the Vulkan passes
//! convert them. Needs an NVIDIA GPU.

use ash::vk;
use common::gpu;
use common::pipeline::{Tolerance, Tune, check_frames, check_host_pinned, picture, ring_matches_sync};
use neural_frame::{Backend, ContextBuilder, Frame, NeuralFrameContext, PostWait, Tiling};

fn passes(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_passes(true))
}

/// The fastest configuration of the benchmark, with CUDA passes and the bias fused.
fn passes_tuned(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_passes(true))
        .map_cuda_options(|c| c.with_prefer_nhwc(true))
        .map_cuda_options(|c| c.with_fuse_conv_bias(true))
        .map_cuda_options(|c| c.with_cuda_graph(true))
        .map_cuda_options(|c| c.with_post_wait(PostWait::Host))
        .spin_wait(true)
}

const FP32: Tolerance = Tolerance { tensor: 5e-3, tensor_f16: 2e-3, pixel: 1 };
const FP16: Tolerance = Tolerance { tensor: 1e-4, tensor_f16: 3e-2, pixel: 4 };

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_passes_match_cpu_reference() {
    gpu();
    let cases: [(&str, Tune, Tolerance); 10] = [
        ("models/test/tiny-x2-f32.onnx", passes, Tolerance::default()),
        // One f16 ulp of the model's outputs (values up to 8): ONNX Runtime's CUDA and CPU
        // providers round differently.
        ("models/test/tiny-x2-f16.onnx", passes, Tolerance { tensor_f16: 4e-3, ..Tolerance::default() }),
        // Four channels: the model's own alpha; u8 codes in and out. One code: ONNX Runtime's
        // CUDA and CPU providers round some values of the same input tensor differently.
        ("models/test/tiny-x1-rgba-u8.onnx", passes, Tolerance { tensor: 1.0, ..Tolerance::default() }),
        // NHWC; BGR in [-1, 1]; mean/std (from the models' shapes and metadata).
        ("models/test/tiny-x2-f32-nhwc.onnx", passes, Tolerance::default()),
        ("models/test/tiny-x2-f32-bgr-signed.onnx", passes, Tolerance::default()),
        ("models/test/tiny-x2-f32-meanstd.onnx", passes, Tolerance::default()),
        ("models/upscale.onnx", passes, FP32),
        ("models/upscale.onnx", passes_tuned, FP32),
        ("models/upscale-fp16.onnx", passes, FP16),
        ("models/upscale-fp16.onnx", passes_tuned, FP16),
    ];
    for (model, tune, tol) in cases {
        // 5 frames through 3 slots: every slot's kernels run on new pixels.
        let (t, p) = check_frames(model, Backend::Cuda, tune, 37, 53, 60, 5, tol);
        println!("{model} with CUDA passes: 5 frames 37×53, max |tensor diff| {t:.3e}, max pixel diff {p}");
    }
}

/// Reads an output image back as f32 channels (RGBA8 codes / 255, or RGBA16F halves).
fn channels(format: vk::Format, bytes: &[u8]) -> Vec<f32> {
    match format {
        vk::Format::R16G16B16A16_SFLOAT => {
            bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
        }
        _ => bytes.iter().map(|&b| b as f32 / 255.0).collect(),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_passes_equal_vulkan_passes_for_every_format() {
    gpu();
    // Two widths: the CUDA post pass takes four pixels a thread, a block's width apart, and a
    // row's last block is partly past the row's end (90 and 92 output pixels of 128).
    for (w, h) in [(45, 29), (46, 29)] {
        passes_equal_for_every_format(w, h);
    }
}

fn passes_equal_for_every_format(w: u32, h: u32) {
    let inputs = [
        vk::Format::R8G8B8A8_UNORM,
        vk::Format::R8G8B8A8_SRGB,
        vk::Format::B8G8R8A8_UNORM,
        vk::Format::B8G8R8A8_SRGB,
        vk::Format::R16G16B16A16_SFLOAT,
    ];
    let outputs = [vk::Format::R8G8B8A8_UNORM, vk::Format::R16G16B16A16_SFLOAT];
    for model in ["models/test/tiny-x2-f32.onnx", "models/test/tiny-x2-f16.onnx"] {
        let build = |cuda: bool| {
            let mut ctx = NeuralFrameContext::builder(model)
                .backend(Backend::Cuda)
                .frame_size(w, h)
                .map_cuda_options(|c| c.with_cuda_passes(cuda))
                .build()
                .expect("context");
            // Both on the fused session (fast start's takeover done): the passes are compared.
            assert!(ctx.wait_settled(std::time::Duration::from_secs(120)).expect("settled"));
            ctx
        };
        let (mut vulkan, mut cuda) = (build(false), build(true));
        let passes = |ctx: &NeuralFrameContext| ctx.tuning().cuda.map(|c| c.handover.cuda_passes);
        assert_eq!((passes(&cuda), passes(&vulkan)), (Some(true), Some(false)));
        let (ow, oh) = cuda.output_size();
        for in_format in inputs {
            // RGBA16F input texels: the picture's codes as halves in [0, 1].
            let rgba = picture(w, h, 77);
            let texels: Vec<u8> = if in_format == vk::Format::R16G16B16A16_SFLOAT {
                rgba.iter().flat_map(|&b| half::f16::from_f32(b as f32 / 255.0).to_le_bytes()).collect()
            } else {
                rgba.clone()
            };
            for out_format in outputs {
                let texel = if out_format == vk::Format::R16G16B16A16_SFLOAT { 8 } else { 4 };
                let mut got = Vec::new();
                for ctx in [&mut vulkan, &mut cuda] {
                    let input = ctx.create_input_image(in_format).expect("input");
                    let output = ctx.create_output_image(out_format).expect("output");
                    ctx.upload(input, &texels).expect("upload");
                    ctx.upload_output(output, &vec![0x7b; (ow * oh * texel) as usize]).expect("poison");
                    ctx.infer(input, output).expect("infer");
                    got.push(channels(out_format, &ctx.readback(output).expect("readback")));
                    ctx.unregister_input(input).expect("unregister");
                    ctx.unregister_output(output).expect("unregister");
                }
                // One 8-bit code (rounding of the same value), or two half-precision ulps of
                // the value (values may pass 1: a half-float output is not clamped).
                let limit = |v: f32| {
                    if out_format == vk::Format::R8G8B8A8_UNORM { 1.0 / 255.0 + 1e-6 } else { v.abs().max(1.0) / 512.0 }
                };
                let worst = got[0]
                    .iter()
                    .zip(&got[1])
                    .map(|(a, b)| ((a - b).abs(), limit(*a)))
                    .fold((0f32, 1f32), |w, (d, l)| if d / l > w.0 / w.1 { (d, l) } else { w });
                assert!(
                    worst.0 <= worst.1,
                    "{model} {w}×{h} {in_format:?} → {out_format:?}: CUDA passes differ from Vulkan passes by {} (allowed {})",
                    worst.0,
                    worst.1
                );
                let worst = worst.0;
                println!("{model} {w}×{h} {in_format:?} → {out_format:?}: CUDA and Vulkan passes within {worst:.2e}");
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_passes_ring_equals_sync() {
    gpu();
    for tune in [passes as Tune, passes_tuned] {
        ring_matches_sync("models/upscale.onnx", Backend::Cuda, tune, 96, 54, 60);
        ring_matches_sync("models/upscale-fp16.onnx", Backend::Cuda, tune, 61, 37, 30);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_passes_wait_for_the_callers_timeline() {
    gpu();
    // host_pinned_frame's frames wait for the upload's timeline (a Vulkan submission):
    // the one crossing left. Under the validation layer.
    check_host_pinned(Backend::Cuda, passes, "models/test/tiny-x2-f32.onnx", 37, 53);
    check_host_pinned(Backend::Cuda, passes_tuned, "models/upscale-fp16.onnx", 40, 24);
}

/// One frame of `model` through a context with the CUDA passes on or off (the Vulkan
/// passes): the output image read back, and whether the frame ran as CUDA kernels.
fn one_frame(model: &str, cuda: bool, tiling: Option<Tiling>, albedo: bool) -> (Vec<u8>, bool) {
    let (w, h) = (64, 48);
    let mut b = NeuralFrameContext::builder(model)
        .backend(Backend::Cuda)
        .frame_size(w, h)
        .map_cuda_options(|c| c.with_cuda_passes(cuda));
    if let Some(t) = tiling {
        b = b.tiling(t);
    }
    let mut ctx = b.build().expect("context");
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    ctx.upload(input, &picture(w, h, 7)).expect("upload");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let (ow, oh) = ctx.output_size();
    ctx.upload_output(output, &vec![0x5a; (ow * oh * 4) as usize]).expect("poison");
    let mut frame = Frame::new(input, output);
    if albedo {
        let a = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("albedo");
        ctx.upload(a, &picture(w, h, 11)).expect("upload albedo");
        frame = frame.with_input("albedo", a);
    }
    let neural_frame::Submitted::Frame(t) = ctx.submit(frame).expect("submit") else { panic!("skipped") };
    let stats = ctx.wait(&t).expect("frame");
    (ctx.readback(output).expect("readback"), stats.cuda_passes)
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_passes_run_tiles_and_extra_inputs_as_the_vulkan_passes_do() {
    gpu();
    let cases = [
        ("tiles", "models/test/tiny-x2-f32.onnx", Some(Tiling::new(32, 24, 2).expect("tiling")), false),
        ("an extra input", "models/test/tiny-x1-f32-color-albedo.onnx", None, true),
        (
            "tiles and an extra input",
            "models/test/tiny-x1-f32-color-albedo.onnx",
            Some(Tiling::new(32, 24, 2).expect("tiling")),
            true,
        ),
    ];
    for (what, model, tiling, albedo) in cases {
        let (cuda, on_cuda) = one_frame(model, true, tiling, albedo);
        let (vulkan, on_vulkan) = one_frame(model, false, tiling, albedo);
        assert!(on_cuda && !on_vulkan, "{what}: the CUDA route ran {on_cuda}, the Vulkan one {on_vulkan}");
        assert!(cuda.iter().any(|&b| b != 0x5a), "{what}: nothing written");
        let worst = cuda.iter().zip(&vulkan).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
        println!("{what}: CUDA against Vulkan passes, largest difference {worst}");
        assert!(worst <= 1, "{what}: CUDA and Vulkan passes differ by {worst}");
    }
}

/// An opaque frame's post kernel skips the alpha's interpolation (the pre kernel tags a
/// frame where any alpha is not 1): through one slot, an opaque frame, one with a single
/// transparent pixel, and an opaque one again (the earlier tag must not carry over), each
/// against the Vulkan passes, tiled and not.
#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_passes_tell_opaque_frames_from_translucent_ones() {
    gpu();
    // The fp16 model too (fp16 tensors: another instance of the post kernel).
    for (model, w) in [("models/test/tiny-x2-f32.onnx", 45), ("models/test/tiny-x2-f16.onnx", 46)] {
        opaque_and_translucent(model, w, 29);
    }
}

fn opaque_and_translucent(model: &str, w: u32, h: u32) {
    let opaque: Vec<u8> = picture(w, h, 5).chunks(4).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    let mut one_hole = opaque.clone();
    let hole = ((h / 2) * w + w / 3) as usize;
    one_hole[4 * hole + 3] = 0;
    for tiling in [None, Some(Tiling::new(24, 16, 2).expect("tiling"))] {
        let run = |cuda: bool| {
            let mut b = NeuralFrameContext::builder(model)
                .backend(Backend::Cuda)
                .frame_size(w, h)
                .slots(1)
                .map_cuda_options(|c| c.with_cuda_passes(cuda));
            if let Some(t) = tiling {
                b = b.tiling(t);
            }
            let mut ctx = b.build().expect("context");
            assert!(ctx.wait_settled(std::time::Duration::from_secs(120)).expect("settled"));
            let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
            let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
            let (ow, oh) = ctx.output_size();
            let mut got = Vec::new();
            for pixels in [&opaque, &one_hole, &opaque] {
                ctx.upload(input, pixels).expect("upload");
                ctx.upload_output(output, &vec![0x5a; (ow * oh * 4) as usize]).expect("poison");
                let stats = ctx.infer(input, output).expect("infer");
                assert_eq!(stats.cuda_passes, cuda, "the route");
                got.push(ctx.readback(output).expect("readback"));
            }
            got
        };
        let (cuda, vulkan) = (run(true), run(false));
        for (k, (c, v)) in cuda.iter().zip(&vulkan).enumerate() {
            let worst = c.iter().zip(v).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
            assert!(worst <= 1, "{model} {tiling:?} frame {k}: CUDA and Vulkan passes differ by {worst}");
            let alpha_min = c.chunks(4).map(|p| p[3]).min().unwrap_or(0);
            if k == 1 {
                assert!(
                    alpha_min < 128,
                    "{model} {tiling:?}: the transparent pixel came back opaque (alpha ≥ {alpha_min})"
                );
            } else {
                assert_eq!(alpha_min, 255, "{model} {tiling:?} frame {k}: an opaque frame came back translucent");
            }
        }
        println!("{model} {tiling:?}: opaque, one transparent pixel, opaque: CUDA within 1 of the Vulkan passes");
    }
}
