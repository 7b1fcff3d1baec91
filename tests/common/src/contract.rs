//! Model contract v2 scenarios, for any backend: layouts, colour orders and
//! ranges (from the shapes, the model's metadata or the caller's declaration),
//! scales found without metadata, and every model the contract refuses. Each
//! accepted model runs through the whole pipeline and is compared with ONNX
//! Runtime's CPU provider run directly on the same picture (tensors and
//! image, output memory poisoned first, PSNR ≥ 48 dB).

use std::path::Path;

use ash::vk;
use neural_frame::{
    Backend, ColorOrder, ContextBuilder, ErrorKind, Layout, NeuralFrameContext, Normalization, Scale, ScaleSource,
    TensorKind,
};

use super::pipeline::{
    Tolerance, Tune, check_frame, exact, expected_image, input_tensor, picture, plain, psnr, reference_output,
};

/// Runs `model` (built with `tune`) on a `w × h` picture through the pipeline on
/// `backend`, checks it against ONNX Runtime's CPU run, and returns the context's
/// contract and the image's PSNR against the reference image.
pub fn check_model(model: &str, backend: Backend, tune: Tune, (w, h): (u32, u32), seed: u32) -> (TensorKind, f64) {
    let path = Path::new(model);
    let mut ctx = tune(exact(NeuralFrameContext::builder(path)).backend(backend).frame_size(w, h))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input image");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output image");
    let (tensor, pixel) = check_frame(&mut ctx, path, input, output, seed, Tolerance::default());
    let contract = ctx.contract().clone();
    let rgba = picture(w, h, seed);
    let reference = reference_output(path, &contract, &rgba, w, h);
    let want = expected_image(&contract, &reference, &rgba, w, h);
    let got = ctx.readback(output).expect("readback");
    let db = psnr(&got, &want);
    println!(
        "{model} on {}: {} → {}, {} from {:?}; max |tensor diff| {tensor:.2e}, max pixel diff {pixel}, PSNR {db:.1} dB",
        ctx.backend_name(),
        contract.input.describe(),
        contract.output.describe(),
        contract.scale,
        contract.scale_source
    );
    assert!(db >= 48.0, "{model}: PSNR {db:.1} dB against ONNX Runtime's CPU run");
    (contract.input, db)
}

/// A channels-last float model: NHWC detected from its shape.
pub fn nhwc_float(backend: Backend) {
    let (kind, _) = check_model("models/test/tiny-x2-f32-nhwc.onnx", backend, plain, (37, 53), 21);
    assert_eq!((kind.layout, kind.channels), (Layout::Nhwc, 3));
}

/// BGR in [−1, 1], from the model's metadata.
pub fn bgr_signed_from_metadata(backend: Backend) {
    let (kind, _) = check_model("models/test/tiny-x2-f32-bgr-signed.onnx", backend, plain, (37, 53), 22);
    assert_eq!((kind.color, kind.normalization), (ColorOrder::Bgr, Normalization::Signed));
}

/// Mean/std normalisation, from the model's metadata.
pub fn mean_std_from_metadata(backend: Backend) {
    let (kind, _) = check_model("models/test/tiny-x2-f32-meanstd.onnx", backend, plain, (37, 53), 23);
    assert!(matches!(kind.normalization, Normalization::MeanStd { .. }), "{kind:?}");
}

/// The same model as [`bgr_signed_from_metadata`] declared by the caller instead:
/// a model without those metadata entries, told BGR and [−1, 1] by the builder.
/// The declaration must change what the model sees (the frames differ from a
/// run without it) and still match ONNX Runtime given the same declaration.
pub fn declared_by_the_builder(backend: Backend) {
    fn declared(b: ContextBuilder) -> ContextBuilder {
        b.color_order(ColorOrder::Bgr).normalization(Normalization::Signed)
    }
    let (kind, _) = check_model("models/test/tiny-x2-f32.onnx", backend, declared, (37, 53), 24);
    assert_eq!((kind.color, kind.normalization), (ColorOrder::Bgr, Normalization::Signed));
    let image = |tune: Tune| {
        let mut ctx =
            tune(NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").backend(backend).frame_size(16, 8))
                .build()
                .expect("context");
        let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
        let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
        ctx.upload(input, &picture(16, 8, 5)).expect("upload");
        ctx.infer(input, output).expect("infer");
        ctx.readback(output).expect("readback")
    };
    assert_ne!(image(plain), image(declared), "the declaration changed nothing");
}

/// A ×2 model with dynamic H/W and no metadata at all: its scale from one probe run.
pub fn dynamic_without_metadata(backend: Backend) {
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32-no-meta.onnx")
        .backend(backend)
        .frame_size(37, 53)
        .build()
        .expect("context");
    assert_eq!((ctx.contract().scale, ctx.contract().scale_source), (Scale::uniform(2), ScaleSource::Probe));
    drop(ctx);
    check_model("models/test/tiny-x2-f32-no-meta.onnx", backend, plain, (37, 53), 25);
}

/// ×2 wide, ×1 high, no metadata: a per-axis scale from the probe.
pub fn per_axis_scale(backend: Backend) {
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2x1-f32-no-meta.onnx")
        .backend(backend)
        .frame_size(37, 53)
        .build()
        .expect("context");
    assert_eq!(ctx.contract().scale, Scale { x: 2, y: 1 });
    assert_eq!(ctx.output_size(), (74, 53));
    drop(ctx);
    check_model("models/test/tiny-x2x1-f32-no-meta.onnx", backend, plain, (37, 53), 26);
}

/// Output dims named like the input's: ×1 from the symbols, no probe.
pub fn same_symbols(backend: Backend) {
    let ctx = NeuralFrameContext::builder("models/test/tiny-x1-f32-same-dims.onnx")
        .backend(backend)
        .frame_size(37, 53)
        .build()
        .expect("context");
    assert_eq!((ctx.contract().scale, ctx.contract().scale_source), (Scale::uniform(1), ScaleSource::Symbols));
    drop(ctx);
    check_model("models/test/tiny-x1-f32-same-dims.onnx", backend, plain, (37, 53), 27);
}

/// Every model the contract refuses: a `ModelContract` error naming the tensor and the reason.
pub fn bad_models_are_refused(backend: Backend) {
    let cases: [(&str, &[&str]); 6] = [
        ("bad-rank5.onnx", &["input `input`", "rank 5"]),
        ("bad-batch2.onnx", &["input `input`", "batch of 2"]),
        ("bad-int64.onnx", &["input `input`", "Int64", "float32, float16 or uint8"]),
        ("bad-string.onnx", &["input `input`", "String"]),
        ("bad-x1.5-no-meta.onnx", &["probe run at 64×48", "96×72", "not an integer multiple of input 64×48"]),
        ("bad-one-channel.onnx", &["no input for the frame", "`gray` Float32 [1, 1, ?, ?]", "1- and 2-channel"]),
    ];
    for (file, needles) in cases {
        let model = format!("models/test/{file}");
        let e = match NeuralFrameContext::builder(&model).backend(backend).frame_size(64, 48).build() {
            Ok(_) => panic!("{model} was accepted"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::ModelContract, "{model}: {e}");
        let msg = e.to_string();
        for n in needles {
            assert!(msg.contains(n), "{model}: {n:?} missing from: {msg}");
        }
        println!("{file}: {msg}");
    }
    // A declaration the model contradicts.
    let e = match NeuralFrameContext::builder("models/test/tiny-x1-rgba-u8.onnx")
        .backend(backend)
        .normalization(Normalization::Signed)
        .frame_size(8, 8)
        .build()
    {
        Ok(_) => panic!("a [-1, 1] range on a uint8 model was accepted"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("uint8"), "{e}");
    let e = match NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(backend)
        .layout(Layout::Nhwc)
        .frame_size(8, 8)
        .build()
    {
        Ok(_) => panic!("an NHWC declaration on an NCHW model was accepted"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("declared NHWC"), "{e}");
}

/// ONNX Runtime's CPU provider on host tensors (name, kind, raw bytes) of a `w × h`
/// frame, as a user without neural-frame would run it: every output's bytes, in order.
pub fn reference_run(model: &str, inputs: &[(&str, TensorKind, Vec<u8>)], w: u32, h: u32) -> Vec<Vec<u8>> {
    let env = neural_frame::ort_environment().expect("ONNX Runtime loads");
    let mut session =
        ort::session::Session::builder(env).expect("builder").commit_from_file(model).expect("model loads on the CPU");
    let values: Vec<(String, ort::value::DynValue)> = inputs
        .iter()
        .map(|(name, kind, bytes)| {
            let shape = kind.shape(w, h).map(|d| d as usize);
            let data: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            (name.to_string(), ort::value::Tensor::from_array((shape, data)).expect("tensor").into_dyn())
        })
        .collect();
    let out = session.run(values).expect("reference run");
    out.iter()
        .map(|(_, v)| v.try_extract_tensor::<f32>().expect("f32").1.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect()
}

/// A denoiser of two named inputs, `color` and `albedo`, each from an image of its own.
pub fn two_named_inputs(backend: Backend) {
    let model = "models/test/tiny-x1-f32-color-albedo.onnx";
    let (w, h) = (37, 53);
    let mut ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(w, h).build().expect("context");
    let c = ctx.contract().clone();
    assert_eq!((c.input_name.as_str(), c.extra_inputs.len()), ("color", 1));
    let color = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("color");
    let albedo = ctx.create_input_image(vk::Format::B8G8R8A8_UNORM).expect("albedo");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let (pc, pa) = (picture(w, h, 31), picture(w, h, 32));
    ctx.upload(color, &pc).expect("upload color");
    let bgra: Vec<u8> = pa.chunks(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect();
    ctx.upload(albedo, &bgra).expect("upload albedo");
    ctx.upload_output(output, &vec![0xa5; (w * h * 4) as usize]).expect("poison");
    ctx.poison_output_tensor(super::pipeline::POISON).expect("poison tensor");
    let frame = neural_frame::Frame::new(color, output).with_input("albedo", albedo);
    match ctx.submit(frame).expect("submit") {
        neural_frame::Submitted::Frame(t) => ctx.wait(&t).expect("wait"),
        neural_frame::Submitted::Skipped => panic!("skipped"),
    };
    let kind = c.input;
    let refs = reference_run(
        model,
        &[
            ("color", kind, input_tensor(kind, &pc, w, h)),
            ("albedo", c.extra_inputs[0].kind, input_tensor(kind, &pa, w, h)),
        ],
        w,
        h,
    );
    let got = ctx.read_output_tensor().expect("output tensor");
    let worst = super::pipeline::values(c.output, &got)
        .iter()
        .zip(super::pipeline::values(c.output, &refs[0]))
        .map(|(a, b)| super::pipeline::abs_diff(*a, b))
        .fold(0f32, f32::max);
    assert!(worst <= 1e-4, "{model}: output tensor differs from ONNX Runtime's by {worst}");
    let want = expected_image(&c, &refs[0], &pc, w, h);
    let image = ctx.readback(output).expect("readback");
    let db = psnr(&image, &want);
    println!("{model} on {}: color + albedo, max |tensor diff| {worst:.2e}, PSNR {db:.1} dB", ctx.backend_name());
    assert!(db >= 48.0, "PSNR {db:.1} dB");
    // The albedo matters: another albedo, another output.
    ctx.upload(albedo, &picture(w, h, 33)).expect("upload");
    ctx.submit(neural_frame::Frame::new(color, output).with_input("albedo", albedo)).expect("submit");
    ctx.wait_all().expect("wait");
    assert_ne!(ctx.readback(output).expect("readback"), image, "the albedo input changed nothing");
}

/// A colour + depth model, the depth from a one-channel R32F image.
pub fn depth_from_a_float_image(backend: Backend) {
    let model = "models/test/tiny-x1-f32-color-depth.onnx";
    let (w, h) = (40, 24);
    let mut ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(w, h).build().expect("context");
    let c = ctx.contract().clone();
    assert_eq!((c.extra_inputs[0].name.as_str(), c.extra_inputs[0].kind.channels), ("depth", 1));
    let color = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("color");
    let depth = ctx.create_input_image(vk::Format::R32_SFLOAT).expect("an R32F input image");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let pc = picture(w, h, 41);
    let d: Vec<f32> = (0..w * h).map(|i| ((i % w) as f32 * 0.37 + (i / w) as f32 * 1.3).sin() * 0.5 + 0.5).collect();
    ctx.upload(color, &pc).expect("upload color");
    ctx.upload(depth, &d.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).expect("upload depth");
    ctx.submit(neural_frame::Frame::new(color, output).with_input("depth", depth)).expect("submit");
    ctx.wait_all().expect("wait");
    let refs = reference_run(
        model,
        &[
            ("color", c.input, input_tensor(c.input, &pc, w, h)),
            ("depth", c.extra_inputs[0].kind, d.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ],
        w,
        h,
    );
    let want = expected_image(&c, &refs[0], &pc, w, h);
    let image = ctx.readback(output).expect("readback");
    let (diff, x, y, ch) = super::pipeline::max_diff(&image, &want, w);
    let db = psnr(&image, &want);
    println!("{model} on {}: color + R32F depth, max pixel diff {diff}, PSNR {db:.1} dB", ctx.backend_name());
    assert!(diff <= 1 && db >= 48.0, "({x}, {y}) ch {ch} differs by {diff}; PSNR {db:.1} dB");
    // The depth matters: another depth, another output.
    ctx.upload(depth, &d.iter().flat_map(|x| (1.0 - x).to_le_bytes()).collect::<Vec<u8>>()).expect("upload depth");
    ctx.submit(neural_frame::Frame::new(color, output).with_input("depth", depth)).expect("submit");
    ctx.wait_all().expect("wait");
    assert_ne!(ctx.readback(output).expect("readback"), image, "the depth input changed nothing");
}

/// A model of two outputs: the image, and a one-channel `edges` map asked for by name
/// (shown grey); a frame that does not ask for it still runs, the same image.
pub fn two_outputs(backend: Backend) {
    let model = "models/test/tiny-x2-f32-two-outputs.onnx";
    let (w, h) = (37, 53);
    let mut ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(w, h).build().expect("context");
    let c = ctx.contract().clone();
    assert_eq!((c.output_name.as_str(), c.extra_outputs[0].name.as_str()), ("image", "edges"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let image = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("image");
    let edges = ctx.create_output_image(vk::Format::R16G16B16A16_SFLOAT).expect("edges");
    let (ow, oh) = ctx.output_size();
    let rgba = picture(w, h, 51);
    ctx.upload(input, &rgba).expect("upload");
    ctx.upload_output(edges, &vec![0xff; (ow * oh * 8) as usize]).expect("poison (NaN halves)");
    ctx.submit(neural_frame::Frame::new(input, image).with_output("edges", edges)).expect("submit");
    ctx.wait_all().expect("wait");
    let refs = reference_run(model, &[("input", c.input, input_tensor(c.input, &rgba, w, h))], w, h);
    let want = expected_image(&c, &refs[0], &rgba, w, h);
    let got = ctx.readback(image).expect("readback image");
    let db = psnr(&got, &want);
    assert!(db >= 48.0, "image PSNR {db:.1} dB");
    // The edges, as the RGBA16F image holds them: the model's values unclamped, grey, with the frame's alpha.
    let halves = ctx.readback(edges).expect("readback edges");
    let got_edges: Vec<f32> = halves.chunks(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect();
    let want_edges = super::pipeline::values(c.extra_outputs[0].kind, &refs[1]);
    let mut worst = 0f32;
    for (i, e) in want_edges.iter().enumerate() {
        for ch in 0..3 {
            worst = worst.max(super::pipeline::abs_diff(got_edges[4 * i + ch], *e));
        }
    }
    let scale = want_edges.iter().fold(0f32, |m, v| m.max(v.abs()));
    println!(
        "{model} on {}: image PSNR {db:.1} dB; edges max |diff| {worst:.2e} (values up to {scale:.2})",
        ctx.backend_name()
    );
    assert!(worst <= 2e-3 * scale.max(1.0), "edges differ from ONNX Runtime's by {worst}");
    // Not asked for: still bound on the GPU, and the image is the same.
    ctx.upload_output(image, &vec![0; (ow * oh * 4) as usize]).expect("clear");
    ctx.infer(input, image).expect("a frame without the extra output");
    assert_eq!(ctx.readback(image).expect("readback"), got);
}

/// A model whose first output is not an image (a scalar `score`): the first image
/// output is the frame's, the scalar is bound on the device, and the frame equals
/// ONNX Runtime's CPU run.
pub fn a_non_image_output_first(backend: Backend) {
    let model = "models/test/tiny-x2-f32-score-first.onnx";
    let ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(8, 8).build().expect("context");
    let c = ctx.contract();
    assert_eq!((c.output_name.as_str(), c.other_outputs.as_slice()), ("image", &["score".to_string()][..]));
    assert!(c.extra_outputs.is_empty());
    drop(ctx);
    fn graphs(b: ContextBuilder) -> ContextBuilder {
        b.map_cuda_options(|c| c.with_cuda_graph(true)) // refused quietly for such a model: the tuning says so
    }
    let (_, db) = check_model(model, backend, graphs, (37, 53), 91);
    assert!(db >= 48.0);
    let ctx = graphs(NeuralFrameContext::builder(model).backend(backend).frame_size(8, 8)).build().expect("context");
    let graphs = ctx.tuning().cuda.map(|c| c.provider.cuda_graph);
    assert_eq!(
        graphs,
        (backend == Backend::Cuda).then_some(false),
        "CUDA graphs would replay ONNX Runtime's allocations"
    );
}

/// What a frame of a multi-input model may get wrong: each refused with a reason.
pub fn bad_frames_are_refused(backend: Backend) {
    let model = "models/test/tiny-x1-f32-color-albedo.onnx";
    let mut ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(16, 8).build().expect("context");
    let color = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("color");
    let albedo = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("albedo");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let f = || neural_frame::Frame::new(color, output);
    let cases = [
        (f(), "does not give the model's input `albedo`"),
        (
            f().with_input("albedo", albedo).with_input("normal", albedo),
            "no input `normal`; its inputs are `color` (the frame",
        ),
        (f().with_input("color", albedo), "`color` is the model's frame input"),
        (f().with_input("albedo", albedo).with_input("albedo", albedo), "gives the input `albedo` twice"),
        (f().with_input("albedo", albedo).with_output("edges", output), "no output `edges`"),
    ];
    for (frame, needle) in cases {
        let e = ctx.submit(frame).expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(needle), "{needle:?} missing from: {e}");
    }
    ctx.resize(32, 16).expect("resize");
    let color = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("color");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let e = ctx.submit(neural_frame::Frame::new(color, output).with_input("albedo", albedo)).expect_err("old size");
    assert!(e.to_string().contains("input `albedo` is 16×8"), "{e}");
}

/// The output image of `model` on `picture(w, h, seed)`, with `tune` applied, after
/// poisoning the output.
fn output_of(model: &str, backend: Backend, tune: Tune, (w, h): (u32, u32), seed: u32) -> (Vec<u8>, Option<usize>) {
    let mut ctx = tune(exact(NeuralFrameContext::builder(model)).backend(backend).frame_size(w, h))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let (ow, oh) = ctx.output_size();
    ctx.upload(input, &picture(w, h, seed)).expect("upload");
    ctx.upload_output(output, &vec![0x5a; (ow * oh * 4) as usize]).expect("poison");
    let stats = ctx.infer(input, output).expect("infer");
    let tiles = ctx.tiles().map(|(_, n)| n);
    assert_eq!(stats.tiles as usize, tiles.unwrap_or(1));
    (ctx.readback(output).expect("readback"), tiles)
}

/// Tiled equals untiled where the overlap is the model's receptive radius
/// (PSNR ≥ 50 dB), for the tiny ×2 model (radius 2: two convolutions 3×3) and
/// Real-ESRGAN (radius 18: eighteen);
/// the untiled run itself against ONNX Runtime's CPU run; and an overlap of 0 shows
/// that the comparison can fail.
pub fn tiled_equals_untiled(backend: Backend) {
    let cases: [(&str, (u32, u32), Tune, Tune); 2] = [
        (
            "models/test/tiny-x2-f32.onnx",
            (97, 61),
            |b| b.tiling(neural_frame::Tiling::new(32, 24, 2).expect("tiling")),
            |b| b.tiling(neural_frame::Tiling::new(32, 24, 0).expect("tiling")),
        ),
        (
            "models/upscale.onnx",
            (200, 120),
            |b| b.tiling(neural_frame::Tiling::new(128, 112, 18).expect("tiling")),
            |b| b.tiling(neural_frame::Tiling::new(128, 112, 0).expect("tiling")),
        ),
    ];
    for (model, size, tiled, seams) in cases {
        let (whole, none) = output_of(model, backend, plain, size, 61);
        assert_eq!(none, None);
        let (tiles, n) = output_of(model, backend, tiled, size, 61);
        let db = psnr(&tiles, &whole);
        let (bad, _) = output_of(model, backend, seams, size, 61);
        let db_seams = psnr(&bad, &whole);
        println!(
            "{model} {}×{} on {backend:?}: {} tiles, PSNR {db:.1} dB against untiled; {db_seams:.1} dB with no overlap",
            size.0,
            size.1,
            n.unwrap_or(1)
        );
        assert!(n.unwrap_or(1) > 1, "{model}: not tiled");
        assert!(db >= 50.0, "{model}: tiled against untiled: PSNR {db:.1} dB");
        assert!(db_seams < db, "{model}: no overlap gave the same image ({db_seams:.1} dB)");
    }
    // The untiled image is ONNX Runtime's (checked as in check_model).
    check_model("models/test/tiny-x2-f32.onnx", backend, plain, (97, 61), 61);
}

/// Frames of tiles in flight through the ring (three slots, four frames
/// submitted before any is waited for), each equal to its untiled run; a memory
/// budget that turns tiling on by itself; tiles with extra inputs.
pub fn tiles_in_flight_and_by_budget(backend: Backend) {
    let model = "models/test/tiny-x2-f32.onnx";
    let (w, h) = (70, 50);
    let mut ctx = NeuralFrameContext::builder(model)
        .backend(backend)
        .tiling(neural_frame::Tiling::new(32, 32, 4).expect("tiling"))
        .slots(3)
        .frame_size(w, h)
        .build()
        .expect("context");
    let (ow, oh) = ctx.output_size();
    let lanes: Vec<_> = (0..4)
        .map(|_| {
            (
                ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input"),
                ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output"),
            )
        })
        .collect();
    let mut tickets = Vec::new();
    for (k, (input, output)) in lanes.iter().enumerate() {
        ctx.upload(*input, &picture(w, h, 70 + k as u32)).expect("upload");
        ctx.upload_output(*output, &vec![0x5a; (ow * oh * 4) as usize]).expect("poison");
        match ctx.submit(neural_frame::Frame::new(*input, *output)).expect("submit") {
            neural_frame::Submitted::Frame(t) => tickets.push(t),
            neural_frame::Submitted::Skipped => panic!("blocking never skips"),
        }
    }
    assert!(ctx.in_flight() > 1, "tiles should be in flight together");
    for (k, t) in tickets.iter().enumerate() {
        let stats = ctx.wait(t).expect("wait");
        assert_eq!(Some(stats.tiles as usize), ctx.tiles().map(|(_, n)| n));
        let (whole, _) = output_of(model, backend, plain, (w, h), 70 + k as u32);
        let db = psnr(&ctx.readback(lanes[k].1).expect("readback"), &whole);
        assert!(db >= 50.0, "frame {k}: PSNR {db:.1} dB against untiled");
    }
    // A budget smaller than the whole frame's slot buffers: tiles, chosen by the context.
    let (big_w, big_h) = (600, 400);
    fn budget(b: ContextBuilder) -> ContextBuilder {
        b.memory_budget(8 << 20)
    }
    let (tiled, n) = output_of(model, backend, budget, (big_w, big_h), 77);
    assert!(n.is_some_and(|n| n > 1), "the budget did not tile");
    let (whole, _) = output_of(model, backend, plain, (big_w, big_h), 77);
    let db = psnr(&tiled, &whole);
    println!(
        "{model} {big_w}×{big_h} under an 8 MiB budget: {} tiles, PSNR {db:.1} dB against untiled",
        n.unwrap_or(0)
    );
    assert!(db >= 50.0, "budget tiling: PSNR {db:.1} dB");
    // Extra inputs are cut into the same tiles.
    let model = "models/test/tiny-x1-f32-color-albedo.onnx";
    let run = |tiling: Option<neural_frame::Tiling>| {
        let mut b = NeuralFrameContext::builder(model).backend(backend).frame_size(w, h);
        if let Some(t) = tiling {
            b = b.tiling(t);
        }
        let mut ctx = b.build().expect("context");
        let color = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("color");
        let albedo = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("albedo");
        let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
        ctx.upload(color, &picture(w, h, 80)).expect("upload");
        ctx.upload(albedo, &picture(w, h, 81)).expect("upload");
        ctx.submit(neural_frame::Frame::new(color, output).with_input("albedo", albedo)).expect("submit");
        ctx.wait_all().expect("wait");
        ctx.readback(output).expect("readback")
    };
    let db = psnr(&run(Some(neural_frame::Tiling::new(24, 24, 2).expect("tiling"))), &run(None));
    assert!(db >= 50.0, "tiled extra inputs: PSNR {db:.1} dB");
}

/// The log records of this process that name `model`, as "LEVEL message": given by
/// the test binary, which captures the library's log (issue 25's lying models).
pub type Logged = fn(&str) -> Vec<String>;

/// A model whose output dims claim a scale its run contradicts: the probe run's
/// scale wins (`ScaleSource::Probe`), a warning names the symbols and both
/// scales, and the frames match ONNX Runtime's CPU run (PSNR ≥ 48 dB).
fn lying_symbols(
    model: &str,
    backend: Backend,
    logged: Logged,
    (claimed, real): (Scale, Scale),
    symbols: &[&str],
    seed: u32,
) {
    let (w, h) = (37, 53);
    let ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(w, h).build().expect("context");
    let c = ctx.contract();
    assert_eq!((c.scale, c.scale_source), (real, ScaleSource::Probe), "{model}: the probe run must win");
    assert_eq!(Some(ctx.output_size()), real.apply(w, h));
    drop(ctx);
    let warnings: Vec<String> = logged(model).into_iter().filter(|l| l.starts_with("WARN")).collect();
    let named = |l: &&String| {
        symbols.iter().all(|s| l.contains(s))
            && l.contains(&format!("say {claimed}"))
            && l.contains(&format!("gave {real}"))
    };
    assert!(
        warnings.iter().any(|l| named(&l)),
        "{model}: no warning naming the symbols {symbols:?}, {claimed} and {real}; logged: {:?}",
        logged(model)
    );
    println!("{model}: {}", warnings[0]);
    check_model(model, backend, plain, (w, h), seed);
}

/// Output dims named like the input's (`h`, `w`: ×1), as `torch.onnx.export`'s
/// `dynamic_axes` writes them, on a model that upscales ×2.
pub fn symbols_say_x1_model_is_x2(backend: Backend, logged: Logged) {
    let model = "models/test/tiny-x2-f32-dims-say-x1.onnx";
    let symbols = ["output `output` dims (h, w)", "input `input` dims (h, w)"];
    lying_symbols(model, backend, logged, (Scale::uniform(1), Scale::uniform(2)), &symbols, 101);
}

/// Output dims `2*h`, `2*w` (×2) on a model that is ×1.
pub fn symbols_say_x2_model_is_x1(backend: Backend, logged: Logged) {
    let model = "models/test/tiny-x1-f32-dims-say-x2.onnx";
    let symbols = ["output `output` dims (2*h, 2*w)", "input `input` dims (h, w)"];
    lying_symbols(model, backend, logged, (Scale::uniform(2), Scale::uniform(1)), &symbols, 102);
}

/// A correct dynamic model whose output dims are the input's (×1): the probe run
/// checks the symbols and agrees, so the scale and its source stay, with no
/// warning; and a correct model of new output symbols (`h2`, `w2`) keeps its
/// probed ×2, also with no warning.
pub fn correct_symbols_are_checked_quietly(backend: Backend, logged: Logged) {
    let model = "models/test/tiny-x1-f32-same-dims.onnx";
    let ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(37, 53).build().expect("context");
    assert_eq!((ctx.contract().scale, ctx.contract().scale_source), (Scale::uniform(1), ScaleSource::Symbols));
    drop(ctx);
    let lines = logged(model);
    assert!(lines.iter().all(|l| !l.starts_with("WARN")), "{model}: a warning for a correct model: {lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("probe run at 64×48")),
        "{model}: its symbols' ×1 was not checked by a probe run; logged: {lines:?}"
    );
    check_model(model, backend, plain, (37, 53), 103);
    let model = "models/test/tiny-x2-f32-no-meta.onnx";
    let ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(37, 53).build().expect("context");
    assert_eq!((ctx.contract().scale, ctx.contract().scale_source), (Scale::uniform(2), ScaleSource::Probe));
    drop(ctx);
    let lines = logged(model);
    assert!(lines.iter().all(|l| !l.starts_with("WARN")), "{model}: a warning for a correct model: {lines:?}");
}

/// ONNX Runtime's shape error on a frame (a `scale=3` metadata entry on a ×2
/// model: the output bound for ×3 is refused) comes out in the contract's terms:
/// the tensor, the shape expected and the one computed, and what to do.
pub fn a_shape_error_on_a_frame_is_explained(backend: Backend) {
    let model = "models/test/tiny-x2-f32-says-x3.onnx";
    let mut ctx = NeuralFrameContext::builder(model).backend(backend).frame_size(8, 8).build().expect("context");
    assert_eq!((ctx.contract().scale, ctx.contract().scale_source), (Scale::uniform(3), ScaleSource::Metadata));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    ctx.upload(input, &picture(8, 8, 104)).expect("upload");
    let e = ctx.infer(input, output).expect_err("a ×2 model bound for ×3");
    assert_eq!(e.kind(), ErrorKind::OnnxRuntime, "{e}");
    let msg = e.to_string();
    for needle in [
        "output `output`",
        "expected shape [1, 3, 24, 24]",
        "the model computed [1, 3, 16, 16]",
        "`scale` metadata",
        "metadata_props",
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }
    assert!(!msg.contains("OrtValue"), "ONNX Runtime's own text: {msg}");
    println!("{model}: {msg}");
}
