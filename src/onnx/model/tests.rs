//! Unit tests of the parent module.

use super::*;
use ort::value::{Shape, SymbolicDimensions};

fn ts(ty: TensorElementType, dims: &[i64], syms: &[&str]) -> ValueType {
    ValueType::Tensor {
        ty,
        shape: Shape::new(dims.iter().copied()),
        dimension_symbols: SymbolicDimensions::new(syms.iter().map(|s| s.to_string())),
    }
}
fn t(ty: TensorElementType, dims: &[i64]) -> ValueType {
    ts(ty, dims, &vec![""; dims.len()])
}
fn one(name: &str, v: ValueType) -> Vec<(String, ValueType)> {
    vec![(name.to_string(), v)]
}
fn meta(pairs: &[(&str, &str)]) -> Metadata {
    Metadata(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}
type Shapes = Result<Vec<Vec<i64>>>;
fn no_probe() -> impl FnMut(&[(String, TensorKind)], (u32, u32)) -> Shapes {
    |_, _| panic!("no probe expected")
}
fn all(d: &TensorDeclaration) -> Declarations {
    Declarations { all: *d, ..Default::default() }
}
const F32: TensorElementType = TensorElementType::Float32;

fn build(i: ValueType, o: ValueType, m: &Metadata, d: &TensorDeclaration) -> Result<ModelContract> {
    contract_from("m.onnx", &one("img", i), &one("out", o), m, &all(d), &mut no_probe())
}

#[test]
fn dynamic_rgb_with_metadata_scale() {
    let c = build(t(F32, &[1, 3, -1, -1]), t(F32, &[1, 3, -1, -1]), &meta(&[("scale", "4")]), &Default::default())
        .expect("supported");
    assert_eq!(
        (c.input, c.output, c.scale, c.fixed_size),
        (TensorKind::NCHW_F32, TensorKind::NCHW_F32, Scale::uniform(4), None)
    );
    assert_eq!(c.scale_source, ScaleSource::Metadata);
}

#[test]
fn static_shapes_give_scale_per_axis_and_size() {
    let u8t = TensorElementType::Uint8;
    let c =
        build(t(u8t, &[1, 50, 40, 4]), t(u8t, &[1, 100, 80, 4]), &meta(&[]), &Default::default()).expect("supported");
    assert_eq!((c.scale, c.fixed_size, c.input), (Scale::uniform(2), Some((40, 50)), TensorKind::NHWC_U8_RGBA));
    assert_eq!(c.scale_source, ScaleSource::Shapes);
    let c = build(t(F32, &[1, 3, 10, 20]), t(F32, &[1, 3, 10, 60]), &meta(&[]), &Default::default()).expect("×3×1");
    assert_eq!(c.scale, Scale { x: 3, y: 1 });
    let e = build(t(F32, &[1, 3, 10, 10]), t(F32, &[1, 3, 20, 20]), &meta(&[("scale", "4")]), &Default::default())
        .expect_err("contradiction");
    assert!(e.to_string().contains("contradicts"), "{e}");
}

#[test]
fn layouts_are_detected_or_declared() {
    let c = build(t(F32, &[1, -1, -1, 3]), t(F32, &[1, -1, -1, 3]), &meta(&[("scale", "2")]), &Default::default())
        .expect("NHWC float");
    assert_eq!((c.input.layout, c.input.channels), (Layout::Nhwc, 3));
    let e =
        build(t(F32, &[1, 3, 8, 3]), t(F32, &[1, 3, 8, 3]), &meta(&[]), &Default::default()).expect_err("ambiguous");
    assert!(e.to_string().contains("could be NCHW or NHWC"), "{e}");
    let d = TensorDeclaration { layout: Some(Layout::Nhwc), ..Default::default() };
    let c = build(t(F32, &[1, 3, 8, 3]), t(F32, &[1, 3, 8, 3]), &meta(&[]), &d).expect("declared");
    assert_eq!((c.input.layout, c.fixed_size), (Layout::Nhwc, Some((8, 3))));
    let m = meta(&[("scale", "1"), ("neural_frame.layout", "NCHW")]);
    let c = build(t(F32, &[1, 3, 8, 3]), t(F32, &[1, 3, 8, 3]), &m, &Default::default()).expect("metadata");
    assert_eq!(c.input.layout, Layout::Nchw);
}

#[test]
fn colour_order_and_range_from_metadata_and_declaration() {
    let m = meta(&[("scale", "2"), ("neural_frame.color", "BGR"), ("neural_frame.range", "-1,1")]);
    let c = build(t(F32, &[1, 3, -1, -1]), t(F32, &[1, 3, -1, -1]), &m, &Default::default()).expect("bgr");
    assert_eq!((c.input.color, c.input.normalization), (ColorOrder::Bgr, Normalization::Signed));
    assert_eq!(c.output.normalization, Normalization::Signed);
    let d = TensorDeclaration { normalization: Some(Normalization::Unit), ..Default::default() };
    let c = build(t(F32, &[1, 3, -1, -1]), t(F32, &[1, 3, -1, -1]), &m, &d).expect("declared wins");
    assert_eq!(c.input.normalization, Normalization::Unit);
    let m = meta(&[("scale", "2"), ("neural_frame.mean", "0.5,0.5,0.5"), ("neural_frame.std", "0.25,0.25,0.25")]);
    let c = build(t(F32, &[1, 3, -1, -1]), t(F32, &[1, 3, -1, -1]), &m, &Default::default()).expect("mean/std");
    assert_eq!(c.input.normalization.affine(0), (4.0, -2.0));
    for (bad, needle) in [
        (meta(&[("scale", "2"), ("neural_frame.mean", "0.5,0.5,0.5")]), "only one of"),
        (meta(&[("scale", "2"), ("neural_frame.range", "0,2")]), "neural_frame.range"),
        (meta(&[("scale", "2"), ("neural_frame.color", "GRB")]), "neural_frame.color"),
    ] {
        let e = build(t(F32, &[1, 3, -1, -1]), t(F32, &[1, 3, -1, -1]), &bad, &Default::default()).expect_err("bad");
        assert!(e.to_string().contains(needle), "{e}");
    }
    let d = TensorDeclaration { normalization: Some(Normalization::Signed), ..Default::default() };
    let u8t = TensorElementType::Uint8;
    let e = build(t(u8t, &[1, -1, -1, 4]), t(u8t, &[1, -1, -1, 4]), &meta(&[("scale", "1")]), &d).expect_err("u8");
    assert!(e.to_string().contains("uint8"), "{e}");
}

#[test]
fn unsupported_signatures_name_the_tensor_and_the_reason() {
    let m = meta(&[("scale", "2")]);
    let cases = [
        (t(F32, &[1, 1, -1, -1]), "no input for the frame"),
        (t(TensorElementType::Int64, &[1, 3, -1, -1]), "Int64"),
        (t(TensorElementType::String, &[1]), "String"),
        (t(F32, &[3, -1, -1]), "shape"),
        (t(F32, &[1, 1, 3, -1, -1]), "rank 5"),
        (t(F32, &[2, 3, -1, -1]), "batch of 2"),
        (t(TensorElementType::Uint8, &[1, -1, -1, 5]), "expected an image tensor"),
    ];
    for (ty, needle) in cases {
        let e = build(ty, t(F32, &[1, 3, -1, -1]), &m, &Default::default()).expect_err("unsupported");
        let msg = e.to_string();
        assert!(msg.contains("m.onnx") && msg.contains("`img`") && msg.contains(needle), "{msg}");
    }
}

#[test]
fn extra_inputs_and_outputs_are_classified_and_checked() {
    let m = meta(&[("scale", "2"), ("neural_frame.range.depth", "0,255")]);
    let ins = vec![
        ("depth".to_string(), t(F32, &[1, 1, -1, -1])),
        ("color".to_string(), t(F32, &[1, 3, -1, -1])),
        ("motion".to_string(), t(F32, &[1, -1, -1, 2])),
    ];
    let outs = vec![("image".to_string(), t(F32, &[1, 3, -1, -1])), ("mask".to_string(), t(F32, &[1, 1, -1, -1]))];
    let c = contract_from("m", &ins, &outs, &m, &Default::default(), &mut no_probe()).expect("supported");
    assert_eq!((c.input_name.as_str(), c.output_name.as_str()), ("color", "image"));
    let names: Vec<_> = c.extra_inputs.iter().map(|t| (t.name.as_str(), t.kind.channels, t.kind.layout)).collect();
    assert_eq!(names, [("depth", 1, Layout::Nchw), ("motion", 2, Layout::Nhwc)]);
    assert_eq!(c.extra_inputs[0].kind.normalization, Normalization::Byte);
    assert_eq!(c.extra_inputs[1].kind.normalization, Normalization::Unit);
    assert_eq!((c.extra_outputs[0].name.as_str(), c.extra_outputs[0].kind.channels), ("mask", 1));
    assert_eq!(c.extra_input("motion"), Some(1));
    assert!(
        c.describe_inputs().starts_with("`color` (the frame, NCHW RGB f32 [0, 1]), `depth`"),
        "{}",
        c.describe_inputs()
    );
    // Static sizes that disagree.
    let ins = vec![("color".to_string(), t(F32, &[1, 3, 8, 8])), ("albedo".to_string(), t(F32, &[1, 3, 5, 5]))];
    let e =
        contract_from("m", &ins, &one("o", t(F32, &[1, 3, 16, 16])), &meta(&[]), &Default::default(), &mut no_probe())
            .expect_err("sizes disagree");
    assert!(e.to_string().contains("input sizes disagree: `albedo` is 5×5"), "{e}");
    let outs = vec![("a".to_string(), t(F32, &[1, 3, 16, 16])), ("b".to_string(), t(F32, &[1, 1, 8, 8]))];
    let e =
        contract_from("m", &one("i", t(F32, &[1, 3, 8, 8])), &outs, &meta(&[]), &Default::default(), &mut no_probe())
            .expect_err("outputs disagree");
    assert!(e.to_string().contains("output sizes disagree"), "{e}");
    // Only 1- and 2-channel inputs: no frame.
    let ins = vec![("d".to_string(), t(F32, &[1, 1, -1, -1]))];
    let e = contract_from("m", &ins, &one("o", t(F32, &[1, 3, -1, -1])), &m, &Default::default(), &mut no_probe())
        .expect_err("no frame");
    assert!(e.to_string().contains("no input for the frame"), "{e}");
    // A declaration for one tensor by name wins over the one for all.
    let mut d = Declarations {
        all: TensorDeclaration { normalization: Some(Normalization::Signed), ..Default::default() },
        ..Default::default()
    };
    d.per_tensor
        .insert("depth".into(), TensorDeclaration { normalization: Some(Normalization::Unit), ..Default::default() });
    let ins = vec![("color".to_string(), t(F32, &[1, 3, -1, -1])), ("depth".to_string(), t(F32, &[1, 1, -1, -1]))];
    let c = contract_from("m", &ins, &one("o", t(F32, &[1, 3, -1, -1])), &m, &d, &mut no_probe()).expect("declared");
    assert_eq!(
        (c.input.normalization, c.extra_inputs[0].kind.normalization),
        (Normalization::Signed, Normalization::Unit)
    );
}

#[test]
fn symbols_claim_a_factor() {
    for (o, k) in [("h", Some(1)), ("2*h", Some(2)), ("h*4", Some(4)), ("( 2 * h )", Some(2)), ("(h*3)", Some(3))] {
        assert_eq!(symbol_factor("h", o), k, "{o}");
    }
    for o in ["h2", "2*w", "h+h", "0*h", "17*h", "h*h", "2*h*1", ""] {
        assert_eq!(symbol_factor("h", o), None, "{o}");
    }
    let hw = |h: &str, w: &str| (h.to_string(), w.to_string());
    assert_eq!(symbol_scale(&hw("h", "w"), &hw("h", "2*w")), Some(Scale { x: 2, y: 1 }));
    assert_eq!(symbol_scale(&hw("h", "w"), &hw("w", "h")), None);
}

#[test]
fn symbols_are_checked_by_a_probe_that_wins() {
    let dims = |h: &str, w: &str| ts(F32, &[1, 3, -1, -1], &["batch", "c", h, w]);
    let run = |i: ValueType, o: ValueType, probe: ProbeRun<'_>| {
        contract_from("m", &one("i", i), &one("o", o), &meta(&[]), &Default::default(), probe)
    };
    let gives = |k: u32| {
        move |_: &[(String, TensorKind)], (w, h): (u32, u32)| -> Shapes {
            Ok(vec![vec![1, 3, (k * h) as i64, (k * w) as i64]])
        }
    };
    // Symbols and run agree: the symbols' scale and source.
    let c = run(dims("h", "w"), dims("h", "w"), &mut gives(1)).expect("×1 agreed");
    assert_eq!((c.scale, c.scale_source), (Scale::uniform(1), ScaleSource::Symbols));
    let c = run(dims("h", "w"), dims("2*h", "2*w"), &mut gives(2)).expect("×2 agreed");
    assert_eq!((c.scale, c.scale_source), (Scale::uniform(2), ScaleSource::Symbols));
    // They disagree: the run wins, in each direction.
    let c = run(dims("h", "w"), dims("h", "w"), &mut gives(2)).expect("says ×1, is ×2");
    assert_eq!((c.scale, c.scale_source), (Scale::uniform(2), ScaleSource::Probe));
    let c = run(dims("h", "w"), dims("2*h", "2*w"), &mut gives(1)).expect("says ×2, is ×1");
    assert_eq!((c.scale, c.scale_source), (Scale::uniform(1), ScaleSource::Probe));
    // A probe that cannot run leaves the symbols' word; one that gives no integer scale is refused.
    let mut failing = |_: &[(String, TensorKind)], _: (u32, u32)| Err(Error::InvalidArgument("boom".into()));
    let c = run(dims("h", "w"), dims("h", "w"), &mut failing).expect("unchecked");
    assert_eq!((c.scale, c.scale_source), (Scale::uniform(1), ScaleSource::Symbols));
    let mut fractional = |_: &[(String, TensorKind)], (w, h): (u32, u32)| -> Shapes {
        Ok(vec![vec![1, 3, (h * 3 / 2) as i64, (w * 3 / 2) as i64]])
    };
    let e = run(dims("h", "w"), dims("h", "w"), &mut fractional).expect_err("×1.5");
    assert!(e.to_string().contains("(h, w) say ×1") && e.to_string().contains("integer multiple"), "{e}");
    // Metadata is not second-guessed at load (the first frame checks it).
    let c = contract_from(
        "m",
        &one("i", dims("h", "w")),
        &one("o", dims("h", "w")),
        &meta(&[("scale", "2")]),
        &Default::default(),
        &mut no_probe(),
    )
    .expect("metadata");
    assert_eq!((c.scale, c.scale_source), (Scale::uniform(2), ScaleSource::Metadata));
}

#[test]
fn a_shape_mismatch_on_a_run_is_explained() {
    let ort = "Non-zero status code returned while running Add node. Name:'' Status Message: op_kernel.cc:87 \
               [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : The output OrtValue provided for output 'y' of node '' \
               (Add) has shape {1,3,53,37} but the computed output shape for this run is {1,3,106,74}. When \
               calling Run() with pre-allocated output OrtValues...";
    let e = explain_run_error(Error::onnx("running the model", ort));
    let msg = e.to_string();
    assert_eq!(e.kind(), crate::error::ErrorKind::OnnxRuntime);
    for needle in ["running the model", "output `y`", "expected shape [1, 3, 53, 37]", "computed [1, 3, 106, 74]"] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }
    assert!(!msg.contains("OrtValue"), "{msg}");
    let other = explain_run_error(Error::onnx("running the model", "out of memory"));
    assert_eq!(other.to_string(), "ONNX Runtime: running the model: out of memory");
}

#[test]
fn dynamic_scale_from_symbols_or_a_probe() {
    let same = |n| ts(F32, &[1, 3, -1, -1], &["batch", "c", "h", n]);
    let mut calls = Vec::new();
    let mut probe = |k: &[(String, TensorKind)], (w, h): (u32, u32)| {
        calls.push((k[0].1, w, h));
        Ok(vec![vec![1, 3, 2 * h as i64, w as i64]])
    };
    let c =
        contract_from("m", &one("i", same("w")), &one("o", same("w2")), &meta(&[]), &Default::default(), &mut probe)
            .expect("probed");
    assert_eq!((c.scale, c.scale_source), (Scale { x: 1, y: 2 }, ScaleSource::Probe));
    assert_eq!(calls, vec![(TensorKind::NCHW_F32, PROBE_SIZE.0, PROBE_SIZE.1)]);
    let mut fractional =
        |_: &[(String, TensorKind)], (w, h): (u32, u32)| Ok(vec![vec![1, 3, (h * 3 / 2) as i64, (w * 3 / 2) as i64]]);
    let e = contract_from(
        "m",
        &one("i", same("w")),
        &one("o", same("w2")),
        &meta(&[]),
        &Default::default(),
        &mut fractional,
    )
    .expect_err("×1.5");
    assert!(e.to_string().contains("not an integer multiple"), "{e}");
    let mut failing = |_: &[(String, TensorKind)], _: (u32, u32)| Err(Error::InvalidArgument("boom".into()));
    let e =
        contract_from("m", &one("i", same("w")), &one("o", same("w2")), &meta(&[]), &Default::default(), &mut failing)
            .expect_err("probe failed");
    assert!(e.to_string().contains("probe run at 64×48") && e.to_string().contains("metadata_props"), "{e}");
    let e = build(t(F32, &[1, 3, 10, 10]), t(F32, &[1, 3, 25, 25]), &meta(&[]), &Default::default())
        .expect_err("fractional");
    assert!(e.to_string().contains("integer multiple"), "{e}");
}
