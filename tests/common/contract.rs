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

use super::pipeline::{Tolerance, Tune, check_frame, expected_image, picture, plain, psnr, reference_output};

/// Runs `model` (built with `tune`) on a `w × h` picture through the pipeline on
/// `backend`, checks it against ONNX Runtime's CPU run, and returns the context's
/// contract and the image's PSNR against the reference image.
pub fn check_model(model: &str, backend: Backend, tune: Tune, (w, h): (u32, u32), seed: u32) -> (TensorKind, f64) {
    let path = Path::new(model);
    let mut ctx = tune(NeuralFrameContext::builder(path).backend(backend).frame_size(w, h))
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
    let cases: [(&str, &[&str]); 9] = [
        ("bad-rank5.onnx", &["input `input`", "rank 5"]),
        ("bad-batch2.onnx", &["input `input`", "batch of 2"]),
        ("bad-int64.onnx", &["input `input`", "Int64", "float32, float16 or uint8"]),
        ("bad-string.onnx", &["input `input`", "String"]),
        ("bad-x1.5-no-meta.onnx", &["probe run at 64×48", "96×72", "not an integer multiple of input 64×48"]),
        ("bad-one-channel.onnx", &["input `gray`", "1-channel", "several inputs"]),
        ("tiny-x1-f32-color-albedo.onnx", &["2 inputs", "`color` Float32 [1, 3, ?, ?]", "`albedo`"]),
        ("tiny-x1-f32-color-depth.onnx", &["2 inputs", "`depth` Float32 [1, 1, ?, ?]"]),
        ("tiny-x2-f32-two-outputs.onnx", &["2 outputs", "`image`", "`edges`"]),
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
