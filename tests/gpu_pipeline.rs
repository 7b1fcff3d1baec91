//! The pipeline on the CUDA backend (Vulkan buffers imported into CUDA, ONNX
//! Runtime's CUDA provider bound by pointer), compared with ONNX Runtime's CPU
//! provider run directly on the same input. Needs an NVIDIA GPU.

use ash::vk;
use common::gpu;
use common::pipeline::{Tolerance, check_backend, check_frames, check_host_pinned};
use neural_frame::{
    Backend, ContextBuilder, DeviceSelector, Element, NeuralFrameContext, PostWait, Precision, PrecisionReport,
    format_uuid,
};

fn cuda(model: &str, w: u32, h: u32, seed: u32, tol: Tolerance) {
    gpu();
    let (tensor, pixel) = check_backend(model, Backend::Cuda, w, h, seed, tol);
    println!("{model} {w}×{h} on CUDA: max |tensor diff| {tensor:.3e}, max pixel diff {pixel}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn f32_model_on_cuda_matches_cpu_reference() {
    cuda("models/test/tiny-x2-f32.onnx", 37, 53, 1, Tolerance::default());
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn f16_model_on_cuda_matches_cpu_reference() {
    cuda("models/test/tiny-x2-f16.onnx", 37, 53, 2, Tolerance::default());
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn rgba_u8_model_on_cuda_matches_cpu_reference() {
    cuda("models/test/tiny-x1-rgba-u8.onnx", 37, 53, 3, Tolerance::default());
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn realesrgan_on_cuda_matches_cpu_reference() {
    // cuDNN may use TF32 for fp32 convolutions: the tensor tolerance allows for it.
    cuda("models/upscale.onnx", 64, 36, 4, Tolerance { tensor: 5e-3, ..Tolerance::default() });
    cuda("models/upscale.onnx", 37, 53, 5, Tolerance { tensor: 5e-3, ..Tolerance::default() });
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn realesrgan_fp16_on_cuda_matches_cpu_reference() {
    // fp16 through 18 convolutions: accumulation order differs between cuDNN and the CPU.
    cuda("models/upscale-fp16.onnx", 64, 36, 6, Tolerance { tensor_f16: 3e-2, pixel: 4, ..Tolerance::default() });
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn auto_backend_pairs_the_cuda_device_by_uuid() {
    gpu();
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").frame_size(16, 16).build().expect("context");
    assert_eq!(ctx.backend_name(), "cuda", "{:?}", ctx.report());
    let shown = ctx.report().cuda_device.clone().unwrap_or_default();
    assert!(shown.contains(&format_uuid(&ctx.report().vulkan_device.uuid_bytes)), "{shown}");
    println!("paired {} ↔ {shown}", ctx.report().vulkan_device);
}

/// Runs tiny-x2-f32 through a context at three sizes in turn, each checked against ORT's CPU run.
fn across_resizes(mut ctx: NeuralFrameContext, format: vk::Format, frames: u32) {
    let path = std::path::Path::new("models/test/tiny-x2-f32.onnx");
    for (w, h) in [(20u32, 10u32), (61, 7), (20, 10)] {
        ctx.resize(w, h).expect("resize");
        let input = ctx.create_input_image(format).expect("input");
        let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
        for frame in 0..frames {
            let rgba = common::pipeline::picture(w, h, 60 + frame + w);
            let texels: Vec<u8> = match format {
                vk::Format::B8G8R8A8_UNORM => rgba.chunks(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect(),
                _ => rgba.clone(),
            };
            ctx.upload(input, &texels).expect("upload");
            ctx.poison_output_tensor(common::pipeline::POISON).expect("poison");
            ctx.infer(input, output).expect("infer");
            let contract = ctx.contract().clone();
            let reference = common::pipeline::reference_output(path, &contract, &rgba, w, h);
            let want = common::pipeline::expected_image(&contract, &reference, &rgba, w, h);
            let got = ctx.readback(output).expect("readback");
            let (d, x, y, c) = common::pipeline::max_diff(&got, &want, 2 * w);
            assert!(d <= 1, "{w}×{h} frame {frame}: ({x}, {y}) ch {c} differs by {d}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_frame_size_change_keeps_the_session() {
    gpu();
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cuda)
        .frame_size(20, 10)
        .build()
        .expect("context");
    across_resizes(ctx, vk::Format::B8G8R8A8_UNORM, 1);
}

/// The bundled upscaler's 8-bit output on `backend` with `precision`, from one
/// textured picture (output image poisoned first), with the context's precision report.
fn upscaled(backend: Backend, precision: Precision, size: (u32, u32)) -> (Vec<u8>, PrecisionReport, Element) {
    let b = NeuralFrameContext::builder("models/upscale.onnx")
        .backend(backend)
        .map_cuda_options(|c| c.with_precision(precision));
    let (pixels, report, element, _) = upscaled_with(b, size);
    (pixels, report, element)
}

/// With no options the fp32 upscaler runs in fp16 on the CUDA backend (its check on a
/// probe frame passed, cached), within PSNR 45 dB of the fp32 model on ONNX Runtime's CPU
/// provider (the CPU backend keeps fp32); `Precision::Fp32` keeps it fp32.
#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn fp32_model_runs_in_fp16_by_default_within_tolerance() {
    gpu();
    let size = (96, 64);
    let (cpu, cpu_report, cpu_element) = upscaled(Backend::Cpu, Precision::Auto, size);
    assert_eq!((cpu_report.running, cpu_element), ("fp32", Element::F32), "{cpu_report:?}");
    let (auto, report, element) = upscaled(Backend::Cuda, Precision::Auto, size);
    let check = report.check.clone().expect("checked");
    assert_eq!((report.running, element), ("fp16", Element::F16), "{report:?}");
    assert!(check.passed && report.converted.as_ref().is_some_and(|p| p.is_file()), "{report:?}");
    let db = common::pipeline::psnr(&auto, &cpu);
    let (exact, exact_report, exact_element) = upscaled(Backend::Cuda, Precision::Fp32, size);
    assert_eq!((exact_report.running, exact_element), ("fp32", Element::F32), "{exact_report:?}");
    // The fused convolutions are a default only where the model runs in fp16.
    assert!(report.rewrites.iter().any(|r| r.contains("→ fused ConvAct")), "{report:?}");
    assert!(!exact_report.rewrites.iter().any(|r| r.contains("ConvAct")), "{exact_report:?}");
    let db_exact = common::pipeline::psnr(&exact, &cpu);
    println!(
        "upscale.onnx {}×{}: auto → {} ({}); against the CPU's fp32: fp16 {db:.1} dB, fp32 {db_exact:.1} dB",
        size.0, size.1, report.running, report.reason
    );
    assert!(db >= 45.0, "fp16 against the CPU's fp32: PSNR {db:.1} dB");
    // fp32 ran (the report and the element say so above); with the fused convolutions (fp32
    // accumulation) fp16 lands as near the CPU as fp32 on cuDNN (59.8 against 59.7 dB on the H200).
    assert!(db_exact >= 45.0, "fp32 on CUDA against the CPU's fp32: PSNR {db_exact:.1} dB");
}

/// The bundled upscaler's 8-bit output from `b` at `w × h`, settled, from one textured
/// picture (output image poisoned first): with the precision report, the input's element
/// type and whether a fused session took over.
fn upscaled_with(b: ContextBuilder, (w, h): (u32, u32)) -> (Vec<u8>, PrecisionReport, Element, bool) {
    let mut ctx = b.frame_size(w, h).build().expect("context");
    assert!(ctx.wait_settled(std::time::Duration::from_secs(300)).expect("settle"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    ctx.upload(input, &common::pipeline::picture(w, h, 21)).expect("upload");
    let (ow, oh) = ctx.output_size();
    ctx.upload_output(output, &vec![0xa5; (ow * oh * 4) as usize]).expect("poison");
    ctx.infer(input, output).expect("infer");
    let took_over = !ctx.report().startup.fused_ms.is_nan();
    (ctx.readback(output).expect("readback"), ctx.precision().clone(), ctx.contract().input.element, took_over)
}

/// Issue 23 §3: the fused convolutions (`fuse_conv_act`) on cuDNN, against the fp32 model on
/// ONNX Runtime's CPU provider: fp16 with the defaults (on where the model runs in fp16) and
/// fast start, where the fused session must take over; then fp32, asked for, without fast
/// start (the fused model from the first frame). PSNR ≥ 45 dB on the 8-bit output both
/// times; the report names the rewrite (not "not in effect": a fallback fails the test).
#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn fused_convolutions_match_the_cpu_run() {
    gpu();
    let size = (96, 64);
    let (cpu, _, _) = upscaled(Backend::Cpu, Precision::Auto, size);
    let builder = || NeuralFrameContext::builder("models/upscale.onnx").backend(Backend::Cuda);
    // fp16 first (cuDNN's runtime fusion is surest there), then fp32; both are reported before
    // either is asserted on.
    let (fp16, report16, _, took_over) = upscaled_with(builder(), size);
    let db16 = common::pipeline::psnr(&fp16, &cpu);
    println!("fp16 fused: {db16:.1} dB against the CPU's fp32, fused session took over: {took_over}, {report16:?}");
    let fp32 = std::panic::catch_unwind(|| {
        upscaled_with(
            builder()
                .map_cuda_options(|c| c.with_fuse_conv_act(true))
                .map_cuda_options(|c| c.with_precision(Precision::Fp32))
                .map_cuda_options(|c| c.with_fast_start(false)),
            size,
        )
    });
    let db32 = match &fp32 {
        Ok((pixels, report, _, _)) => {
            let db = common::pipeline::psnr(pixels, &cpu);
            println!("fp32 fused: {db:.1} dB against the CPU's fp32, {report:?}");
            assert!(report.rewrites.iter().any(|r| r.contains("→ fused ConvAct")), "{report:?}");
            db
        }
        Err(_) => f64::NAN,
    };
    assert!(
        report16.rewrites.iter().any(|r| r.contains("→ fused ConvAct")) && report16.running == "fp16",
        "{report16:?}"
    );
    assert!(took_over, "the fused session (ConvAct, bias fused) did not take over");
    assert!(db16 >= 45.0, "fp16 {db16:.1} dB");
    assert!(fp32.is_ok() && db32 >= 45.0, "fp32 fused: {db32:.1} dB (NaN: it failed, above)");
}

/// The fused convolutions' fallbacks, as on a GPU whose cuDNN cannot fuse: their CUDA kernels
/// made to fail (`diagnostics::fail_fused_convolutions`) when the session is created, then when
/// it runs, each with and without fast start. Every context still builds and runs the model as
/// it is (bias fused), equal to ONNX Runtime's CPU run within 45 dB, and its report says that the
/// fused convolutions are not in effect, and why; with fast start the session without them takes
/// over.
/// The hook is process-wide: run it with `--test-threads=1`, as bench/gpu-run.sh does.
#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored --test-threads=1"]
fn fused_convolutions_that_fail_fall_back_announced() {
    use neural_frame::diagnostics::{FusedFailure, fail_fused_convolutions};
    gpu();
    let size = (96, 64);
    let (cpu, _, _) = upscaled(Backend::Cpu, Precision::Auto, size);
    let mut failures = Vec::new();
    for at in [FusedFailure::Create, FusedFailure::Run] {
        for fast in [true, false] {
            fail_fused_convolutions(Some(at));
            let b = NeuralFrameContext::builder("models/upscale.onnx")
                .backend(Backend::Cuda)
                .map_cuda_options(|c| c.with_fast_start(fast));
            let got = std::panic::catch_unwind(|| upscaled_with(b, size));
            fail_fused_convolutions(None);
            let what = format!("{at:?}, fast start {fast}");
            match got {
                Ok((pixels, report, _, took_over)) => {
                    let db = common::pipeline::psnr(&pixels, &cpu);
                    println!("{what}: {db:.1} dB against the CPU's fp32, took over {took_over}, {:?}", report.rewrites);
                    let said = report.rewrites.iter().any(|r| r.contains("ConvAct convolutions not in effect"));
                    let fused = report.rewrites.iter().any(|r| r.contains("→ fused ConvAct"));
                    if !(said && !fused && db >= 45.0 && (took_over || !fast) && report.running == "fp16") {
                        failures.push(format!("{what}: said {said}, fused {fused}, {db:.1} dB, took over {took_over}"));
                    }
                }
                Err(_) => failures.push(format!("{what}: the context failed (above)")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// One frame of tiny-x2-f32 at the context's size, checked against ORT's CPU run (within 1 of 255).
fn one_checked_frame(ctx: &mut NeuralFrameContext, seed: u32, what: &str) {
    let path = std::path::Path::new("models/test/tiny-x2-f32.onnx");
    let (w, h) = ctx.frame_size();
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let rgba = common::pipeline::picture(w, h, seed);
    ctx.upload(input, &rgba).expect("upload");
    ctx.poison_output_tensor(common::pipeline::POISON).expect("poison");
    ctx.infer(input, output).expect("infer");
    let contract = ctx.contract().clone();
    let reference = common::pipeline::reference_output(path, &contract, &rgba, w, h);
    let want = common::pipeline::expected_image(&contract, &reference, &rgba, w, h);
    let got = ctx.readback(output).expect("readback");
    let (d, x, y, c) = common::pipeline::max_diff(&got, &want, 2 * w);
    assert!(d <= 1, "{what}, {w}×{h}: ({x}, {y}) ch {c} differs by {d}");
    ctx.unregister_input(input).expect("unregister input");
    ctx.unregister_output(output).expect("unregister output");
}

/// After a resize, a context that fast-started takes the new size's frames on a session
/// with the bias apart at once and builds the fused one beside them, as at the start
/// (the fused session's first run at a new shape compiles kernels: about a second).
#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn resize_starts_fast_again() {
    gpu();
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cuda)
        .frame_size(20, 10)
        .build()
        .expect("context");
    one_checked_frame(&mut ctx, 3, "first frame");
    assert!(ctx.wait_settled(std::time::Duration::from_secs(120)).expect("settle"), "the fused session took over");
    assert!(
        ctx.tuning().cuda.expect("cuda").provider.fuse_conv_bias,
        "settled on the fused session: {:?}",
        ctx.tuning()
    );
    one_checked_frame(&mut ctx, 4, "fused, 20×10");
    for (w, h, seed) in [(61u32, 7u32, 5u32), (20, 10, 6)] {
        ctx.resize(w, h).expect("resize");
        assert!(ctx.settling(), "{w}×{h}: a fused session for the new size is being built");
        assert!(
            !ctx.tuning().cuda.expect("cuda").provider.fuse_conv_bias,
            "{w}×{h}: frames take the bias apart meanwhile"
        );
        one_checked_frame(&mut ctx, seed, "bias apart after the resize");
        assert!(ctx.wait_settled(std::time::Duration::from_secs(120)).expect("settle"), "{w}×{h}: took over");
        assert!(ctx.tuning().cuda.expect("cuda").provider.fuse_conv_bias, "{w}×{h}: fused again");
        one_checked_frame(&mut ctx, seed + 10, "fused after the resize");
    }
    // A fast-start-free context keeps its one session across a resize.
    let mut plain = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cuda)
        .map_cuda_options(|c| c.with_fast_start(false))
        .frame_size(20, 10)
        .build()
        .expect("context");
    plain.resize(61, 7).expect("resize");
    assert!(!plain.settling() && plain.tuning().cuda.expect("cuda").provider.fuse_conv_bias, "{:?}", plain.tuning());
    one_checked_frame(&mut plain, 7, "no fast start, after the resize");
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn every_gpu_pairs_with_the_cuda_device_of_its_uuid() {
    gpu();
    let devices = neural_frame::suitable_devices(Backend::Cuda).expect("devices");
    assert!(!devices.is_empty());
    for d in devices {
        let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
            .backend(Backend::Cuda)
            .device(DeviceSelector::Uuid(d.uuid_bytes))
            .frame_size(8, 8)
            .build()
            .expect("context");
        let shown = ctx.report().cuda_device.clone().unwrap_or_default();
        assert!(shown.contains(&format_uuid(&d.uuid_bytes)), "Vulkan {d} paired with {shown}");
        println!("Vulkan {} ↔ {shown}", ctx.report().vulkan_device);
    }
}

fn graphs(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_graph(true)).slots(2)
}

fn graphs_host_post(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_graph(true)).map_cuda_options(|c| c.with_post_wait(PostWait::Host)).slots(2)
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_graph_replays_match_cpu_reference() {
    gpu();
    // 2 slots, 6 frames: each slot runs ONNX Runtime once, then captures, then replays,
    // each frame a different picture compared with ORT's CPU provider (output poisoned first).
    let fp32 = Tolerance { tensor: 5e-3, ..Tolerance::default() };
    let fp16 = Tolerance { tensor_f16: 3e-2, pixel: 4, ..Tolerance::default() };
    for (model, tol) in
        [("models/upscale.onnx", fp32), ("models/upscale-fp16.onnx", fp16), ("models/test/tiny-x2-f32.onnx", fp32)]
    {
        for (name, tune) in [("graphs", graphs as common::pipeline::Tune), ("graphs, post on host", graphs_host_post)] {
            let (t, p) = check_frames(model, Backend::Cuda, tune, 64, 36, 40, 6, tol);
            println!("{model} with {name}: 6 frames, max |tensor diff| {t:.3e}, max pixel diff {p}");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_graph_replays_u8_model() {
    gpu();
    let (t, p) =
        check_frames("models/test/tiny-x1-rgba-u8.onnx", Backend::Cuda, graphs, 37, 53, 50, 6, Tolerance::default());
    println!("tiny-x1-rgba-u8 with graphs: 6 frames, max |tensor diff| {t:.3e}, max pixel diff {p}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn cuda_graph_after_a_frame_size_change() {
    gpu();
    // Graphs hold buffer addresses: a resize must capture anew, never replay the old ones.
    let ctx = graphs(NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").backend(Backend::Cuda))
        .frame_size(20, 10)
        .build()
        .expect("context");
    across_resizes(ctx, vk::Format::R8G8B8A8_UNORM, 5);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn host_pinned_frames_on_cuda_match_cpu_reference() {
    gpu();
    check_host_pinned(Backend::Cuda, common::pipeline::plain, "models/test/tiny-x2-f32.onnx", 37, 53);
}
