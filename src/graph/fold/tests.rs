//! Tests of the skip fold: each rewritten model against its original on ONNX
//! Runtime's CPU provider, on the same non-trivial input, on models the rewrite applies to
//! and on models it leaves alone (those must come back byte for byte).

use super::*;
use crate::graph::fp16::tests::{differences, model, node, pattern_inputs, run, tensor_vi};
use crate::graph::fp16::{Fp16Options, to_fp16};
use crate::graph::proto::{AttributeProto, TensorProto, data_type};
use prost::Message;

/// §4 of issue 23: a float32 rewrite is within 1e-4 of the original.
const FP32_MAX_ERR: f32 = 1e-4;

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// x [1, 3, h, w] → Conv 3→3r² (3×3) → DepthToSpace(mode, r), plus Resize(nearest, ×r, ctm,
/// rounding) of x.
fn skip_model(mode: &str, ctm: &str, rounding: &str, r: i64) -> Vec<u8> {
    let rows = 3 * r * r;
    let w: Vec<f32> = (0..rows * 27).map(|i| ((i * 7919 % 113) as f32 / 113.0 - 0.5) * 0.2).collect();
    let conv = node(
        "Conv",
        &["x", "w"],
        &["c"],
        vec![AttributeProto::ints("kernel_shape", vec![3, 3]), AttributeProto::ints("pads", vec![1, 1, 1, 1])],
    );
    let d2s = node(
        "DepthToSpace",
        &["c"],
        &["d"],
        vec![AttributeProto::int("blocksize", r), AttributeProto::string("mode", mode)],
    );
    let resize = node(
        "Resize",
        &["x", "", "scales"],
        &["up"],
        vec![
            AttributeProto::string("mode", "nearest"),
            AttributeProto::string("coordinate_transformation_mode", ctm),
            AttributeProto::string("nearest_mode", rounding),
        ],
    );
    let graph = GraphProto {
        node: vec![conv, d2s, resize, node("Add", &["d", "up"], &["y"], vec![])],
        initializer: vec![
            TensorProto::from_floats("w", vec![rows, 3, 3, 3], &w),
            TensorProto::from_floats("scales", vec![4], &[1.0, 1.0, r as f32, r as f32]),
        ],
        input: vec![tensor_vi("x", data_type::FLOAT, &["1", "3", "h", "w"])],
        output: vec![tensor_vi("y", data_type::FLOAT, &["1", "3", "H", "W"])],
        ..Default::default()
    };
    model(graph, 17)
}

fn compare_same_io(original: &[u8], rewritten: &[u8], sizes: &[i64]) -> Vec<(String, f64, f32)> {
    let inputs = pattern_inputs(original, sizes);
    differences(&run(original, &inputs).expect("runs"), &run(rewritten, &inputs).expect("the rewrite runs"))
}

#[test]
fn the_upsample_skip_fold_is_exact_where_it_applies() {
    let synthetic = [
        ("DCR ×2 asymmetric floor", skip_model("DCR", "asymmetric", "floor", 2)),
        ("DCR ×3 half_pixel round_prefer_floor", skip_model("DCR", "half_pixel", "round_prefer_floor", 3)),
        ("CRD ×3 tf_half_pixel_for_nn floor", skip_model("CRD", "tf_half_pixel_for_nn", "floor", 3)),
        ("CRD ×2 asymmetric round_prefer_floor", skip_model("CRD", "asymmetric", "round_prefer_floor", 2)),
    ];
    let files = ["models/upscale.onnx", "models/test/tiny-x2-f32.onnx", "models/test/tiny-x2-f32-nhwc.onnx"];
    let cases = files.iter().map(|p| (p.to_string(), read(p))).chain(synthetic.into_iter().map(|(n, m)| (n.into(), m)));
    for (what, original) in cases {
        let rewritten = fold_upsample_skip(&original).expect("rewrites");
        assert_eq!(rewritten.changes.len(), 1, "{what}: {rewritten:?}");
        let g = ModelProto::decode(rewritten.bytes.as_slice()).expect("decodes").graph.expect("graph");
        assert!(g.node.iter().all(|n| n.op() != "Resize"), "{what}: a Resize is left");
        assert!(g.initializer.iter().all(|t| t.name() != "scales"), "{what}: the scales are left");
        let d = compare_same_io(&original, &rewritten.bytes, &[1, 3, 20, 26]);
        eprintln!("{what}: {d:?}");
        assert!(d.iter().all(|(_, _, max)| *max <= FP32_MAX_ERR), "{what}: {d:?}");
    }
}

/// fp16 models fold too: the 1×1 weights are ones and zeros in float16 (exact), the sum is
/// the one add of the original, so the output differs by at most a rounding of that add's
/// operands' order (one float16 step of the output, 2⁻¹⁰ near 1.0).
#[test]
fn the_upsample_skip_fold_applies_to_float16_models() {
    for path in ["models/upscale-fp16.onnx", "models/test/tiny-x2-f16.onnx"] {
        let original = read(path);
        let rewritten = fold_upsample_skip(&original).expect("rewrites");
        assert_eq!(rewritten.changes.len(), 1, "{path}: {rewritten:?}");
        let g = ModelProto::decode(rewritten.bytes.as_slice()).expect("decodes").graph.expect("graph");
        assert!(g.node.iter().all(|n| n.op() != "Resize"), "{path}: a Resize is left");
        let added: Vec<_> = g.initializer.iter().filter(|t| t.name().ends_with("_repeat_weight")).collect();
        assert_eq!(added.len(), 1, "{path}");
        assert_eq!(added[0].data_type, Some(data_type::FLOAT16), "{path}: the weights are not float16");
        let d = compare_same_io(&original, &rewritten.bytes, &[1, 3, 20, 26]);
        eprintln!("{path}: {d:?}");
        assert!(d.iter().all(|(_, psnr, max)| *psnr >= 60.0 && *max <= 2.0 / 1024.0), "{path}: {d:?}");
    }
}

#[test]
fn the_upsample_skip_fold_leaves_other_models_alone() {
    // A Resize that is not the r-times repeat DepthToSpace pairs with: asymmetric with
    // round_prefer_ceil sends the second of two pixels to the next input pixel.
    let not_a_repeat = skip_model("CRD", "asymmetric", "round_prefer_ceil", 2);
    let rewritten = fold_upsample_skip(&not_a_repeat).expect("rewrites");
    assert!(!rewritten.applied() && rewritten.bytes == not_a_repeat);
    assert!(rewritten.skipped[0].contains("round_prefer_ceil does not repeat each pixel 2 times"), "{rewritten:?}");
    // A Resize ×[1, 1, 1, 2] and no DepthToSpace; a linear Resize ×1.5; an NHWC u8 model.
    for path in [
        "models/test/tiny-x2x1-f32-no-meta.onnx",
        "models/test/bad-x1.5-no-meta.onnx",
        "models/test/tiny-x1-rgba-u8.onnx",
    ] {
        let original = read(path);
        let rewritten = fold_upsample_skip(&original).expect("rewrites");
        assert!(!rewritten.applied() && rewritten.bytes == original, "{path}: {rewritten:?}");
    }
    // The DepthToSpace's output read by another node too: the rewrite would change it.
    let mut m = ModelProto::decode(read("models/test/tiny-x2-f32.onnx").as_slice()).expect("decodes");
    let g = m.graph.as_mut().expect("graph");
    g.node.push(node("Relu", &["d"], &["d_relu"], vec![]));
    g.output.push(tensor_vi("d_relu", data_type::FLOAT, &["1", "3", "h2", "w2"]));
    let shared = m.encode_to_vec();
    let rewritten = fold_upsample_skip(&shared).expect("rewrites");
    assert!(!rewritten.applied() && rewritten.skipped[0].contains("read elsewhere"), "{rewritten:?}");
}

#[test]
fn the_fold_composes_with_fp16() {
    let original = read("models/upscale.onnx");
    let folded = fold_upsample_skip(&original).expect("folds");
    assert!(folded.applied(), "{:?}", folded.skipped);
    let d = compare_same_io(&original, &folded.bytes, &[1, 3, 24, 32]);
    eprintln!("upscale, folded: {d:?}");
    assert!(d.iter().all(|(_, _, max)| *max <= FP32_MAX_ERR), "{d:?}");
    let half = to_fp16(&folded.bytes, &Fp16Options::default()).expect("converts");
    assert_eq!((half.report.casts_inserted, half.report.kept_fp32.len()), (0, 0), "{:?}", half.report);
    let d = compare_same_io(&original, &half.bytes, &[1, 3, 24, 32]);
    eprintln!("upscale, folded and float16: {d:?}");
    assert!(d.iter().all(|(_, psnr, max)| *psnr >= 50.0 && *max <= 4.0 / 255.0), "{d:?}");
}

#[test]
fn nearest_repeat_conditions_follow_the_onnx_formulas() {
    for r in [2, 3, 4] {
        assert!(nearest_is_repeat("asymmetric", "floor", r));
        assert!(nearest_is_repeat("half_pixel", "round_prefer_floor", r));
        assert!(nearest_is_repeat("half_pixel", "round_prefer_ceil", r));
        assert!(nearest_is_repeat("tf_half_pixel_for_nn", "floor", r));
        assert!(!nearest_is_repeat("asymmetric", "round_prefer_ceil", r));
        assert!(!nearest_is_repeat("half_pixel", "floor", r));
        assert!(!nearest_is_repeat("align_corners", "floor", r));
    }
    assert!(nearest_is_repeat("asymmetric", "round_prefer_floor", 2));
    assert!(!nearest_is_repeat("asymmetric", "round_prefer_floor", 3));
}
