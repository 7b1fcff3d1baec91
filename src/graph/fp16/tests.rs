//! Tests of the ONNX messages (a round trip of every bundled model) and of the float16
//! conversion, each converted model run against its float32 original on ONNX Runtime's
//! CPU provider (which casts around the float16 operators it has no kernel for). The
//! helpers that run a model are shared with the layout rewrites' tests.

use half::f16;
use ort::session::Session;
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};
use prost::Message;

use super::*;
use crate::graph::proto::{Dim, Dimension, TensorShapeProto, TensorType, Type, TypeProto, ValueInfoProto, data_type};
use crate::graph::share::compute_share;

/// One output of a run: its name, shape and values as f32.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    pub(crate) name: String,
    pub(crate) shape: Vec<i64>,
    pub(crate) data: Vec<f32>,
}

/// A CPU session for a model's bytes.
pub(crate) fn session(bytes: &[u8]) -> std::result::Result<Session, String> {
    let env = crate::onnx::runtime::environment().map_err(|e| e.to_string())?;
    let domain = crate::ops::domain().map_err(|e| e.to_string())?;
    let builder = Session::builder(env).map_err(|e| e.to_string())?;
    let mut builder = builder.with_operators(domain).map_err(|e| e.to_string())?;
    let _one_at_a_time = creating();
    builder.commit_from_memory(bytes).map_err(|e| e.to_string())
}

/// Held while a test's session with the custom operators is created: ONNX Runtime adds their
/// domain to ONNX's process-wide version map unless it is there, and two creations at once
/// can both try ("the domain is already exist"). The library creates its sessions one at a
/// time (`session::create`); the tests, in parallel threads, take this.
pub(crate) fn creating() -> std::sync::MutexGuard<'static, ()> {
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CREATING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A model's inputs as (name, element type, dims with −1 where dynamic).
pub(crate) fn inputs_of(s: &Session) -> Vec<(String, TensorElementType, Vec<i64>)> {
    s.inputs()
        .iter()
        .filter_map(|i| match i.dtype() {
            ValueType::Tensor { ty, shape, .. } => Some((i.name().to_string(), *ty, shape.to_vec())),
            _ => None,
        })
        .collect()
}

/// `dims` with each dynamic dimension made concrete: 1 for the batch, `sizes[i]` at index i.
pub(crate) fn concrete(dims: &[i64], sizes: &[i64]) -> Vec<i64> {
    dims.iter()
        .enumerate()
        .map(|(i, &d)| {
            if d >= 0 {
                d
            } else if i == 0 {
                1
            } else {
                sizes[i.min(sizes.len() - 1)]
            }
        })
        .collect()
}

/// A non-trivial image in [0, 1]: a smooth gradient (different per channel) plus a
/// deterministic pseudo-random pattern. The channel axis is 1 when dims[1] ≤ 4, else the last.
pub(crate) fn pattern(dims: &[i64], seed: u64) -> Vec<f32> {
    let n: i64 = dims.iter().product();
    let (c_axis, rank) = (if dims.len() == 4 && dims[1] > 4 { 3 } else { 1 }, dims.len());
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            let (mut rest, mut idx) = (i, vec![0i64; rank]);
            for a in (0..rank).rev() {
                idx[a] = rest % dims[a];
                rest /= dims[a];
            }
            let c = idx.get(c_axis).copied().unwrap_or(0) as f32;
            let spatial: Vec<f32> =
                (1..rank).filter(|&a| a != c_axis).map(|a| idx[a] as f32 / dims[a] as f32).collect();
            let (y, x) = (spatial.first().copied().unwrap_or(0.0), spatial.get(1).copied().unwrap_or(0.0));
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            (0.5 + 0.3 * (6.0 * x + 3.0 * y + c).sin() + 0.2 * noise).clamp(0.0, 1.0)
        })
        .collect()
}

/// Runs a model on `inputs` (values given as f32, converted to each input's element type).
pub(crate) fn run(bytes: &[u8], inputs: &[(String, Vec<i64>, Vec<f32>)]) -> std::result::Result<Vec<Output>, String> {
    run_in(&mut session(bytes)?, inputs)
}

/// [`run`] in a session of the caller's (another provider's).
pub(crate) fn run_in(
    s: &mut Session,
    inputs: &[(String, Vec<i64>, Vec<f32>)],
) -> std::result::Result<Vec<Output>, String> {
    let types: Vec<_> = inputs_of(s);
    let err = |e: ort::Error| e.to_string();
    let mut values: Vec<(String, DynValue)> = Vec::new();
    for (name, dims, data) in inputs {
        let ty = types.iter().find(|t| &t.0 == name).map(|t| t.1).ok_or(format!("no input `{name}`"))?;
        let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let v = match ty {
            TensorElementType::Float16 => {
                Tensor::from_array((shape, data.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>()))
                    .map_err(err)?
                    .into_dyn()
            }
            TensorElementType::Uint8 => {
                Tensor::from_array((shape, data.iter().map(|&v| (v * 255.0).round() as u8).collect::<Vec<_>>()))
                    .map_err(err)?
                    .into_dyn()
            }
            TensorElementType::Int64 => {
                Tensor::from_array((shape, data.iter().map(|&v| (v * 100.0) as i64).collect::<Vec<_>>()))
                    .map_err(err)?
                    .into_dyn()
            }
            TensorElementType::Bool => {
                Tensor::from_array((shape, data.iter().map(|&v| v > 0.5).collect::<Vec<_>>())).map_err(err)?.into_dyn()
            }
            _ => Tensor::from_array((shape, data.clone())).map_err(err)?.into_dyn(),
        };
        values.push((name.clone(), v));
    }
    let outputs = s.run(values).map_err(err)?;
    let mut result = Vec::new();
    for (name, value) in outputs.iter() {
        let (shape, data) = if let Ok((shape, d)) = value.try_extract_tensor::<f32>() {
            (shape.to_vec(), d.to_vec())
        } else if let Ok((shape, d)) = value.try_extract_tensor::<f16>() {
            (shape.to_vec(), d.iter().map(|v| v.to_f32()).collect())
        } else if let Ok((shape, d)) = value.try_extract_tensor::<u8>() {
            (shape.to_vec(), d.iter().map(|&v| v as f32 / 255.0).collect())
        } else {
            return Err(format!("output `{name}` is not f32, f16 or u8"));
        };
        result.push(Output { name: name.to_string(), shape, data });
    }
    Ok(result)
}

/// Pattern inputs for every input of a model, dynamic dims from `sizes`.
pub(crate) fn pattern_inputs(bytes: &[u8], sizes: &[i64]) -> Vec<(String, Vec<i64>, Vec<f32>)> {
    let s = session(bytes).expect("the model loads");
    inputs_of(&s)
        .into_iter()
        .enumerate()
        .map(|(k, (name, _, dims))| {
            let dims = concrete(&dims, sizes);
            let data = pattern(&dims, 7 + k as u64);
            (name, dims, data)
        })
        .collect()
}

/// PSNR (peak 1) and the largest |difference| between two runs' outputs, per output.
pub(crate) fn differences(a: &[Output], b: &[Output]) -> Vec<(String, f64, f32)> {
    assert_eq!(a.len(), b.len(), "output counts differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            assert_eq!((&x.name, &x.shape), (&y.name, &y.shape), "outputs differ in name or shape");
            let (mut se, mut max) = (0f64, 0f32);
            for (p, q) in x.data.iter().zip(&y.data) {
                let d = (p - q).abs();
                max = max.max(if d.is_nan() { f32::INFINITY } else { d });
                se += (d as f64) * (d as f64);
            }
            let mse = se / x.data.len().max(1) as f64;
            let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (1.0 / mse).log10() };
            (x.name.clone(), psnr, max)
        })
        .collect()
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Converts `path`, runs the original and the conversion on the same pattern, returns
/// the report and the differences.
fn convert_and_compare(path: &str, options: &Fp16Options, sizes: &[i64]) -> (Fp16Model, Vec<(String, f64, f32)>) {
    let original = read(path);
    let converted = to_fp16(&original, options).unwrap_or_else(|e| panic!("{path}: {e}"));
    let inputs = pattern_inputs(&original, sizes);
    let expected = run(&original, &inputs).expect("the float32 model runs");
    let got = run(&converted.bytes, &inputs).unwrap_or_else(|e| panic!("{path} converted does not run: {e}"));
    let diffs = differences(&expected, &got);
    eprintln!("{path}: {diffs:?}");
    (converted, diffs)
}

/// Every `.onnx` file under `dir`, sorted.
fn models_in(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("models directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn every_model_round_trips_through_the_messages_byte_for_byte() {
    let mut ran = 0;
    for path in models_in("models").into_iter().chain(models_in("models/test")) {
        let bytes = read(&path);
        let model = proto::ModelProto::decode(bytes.as_slice()).unwrap_or_else(|e| panic!("{path}: {e}"));
        let again = model.encode_to_vec();
        assert!(again == bytes, "{path}: re-encoded to {} bytes, not the same {} bytes", again.len(), bytes.len());
        assert_eq!(proto::ModelProto::decode(again.as_slice()).expect("decodes again"), model, "{path}");
        // And ONNX Runtime runs the re-encoded model to the same outputs, where it runs at all.
        let Ok(s) = session(&again) else { continue };
        let runnable = inputs_of(&s).iter().all(|(_, t, _)| *t != TensorElementType::String);
        if runnable && inputs_of(&s).len() == s.inputs().len() {
            let inputs = pattern_inputs(&bytes, &[1, 16, 20, 12, 24]);
            let (a, b) = (run(&bytes, &inputs), run(&again, &inputs));
            if let (Ok(a), Ok(b)) = (a, b) {
                assert!(differences(&a, &b).iter().all(|d| d.2 == 0.0), "{path}");
                ran += 1;
            }
        }
    }
    eprintln!("{ran} of the models ran to the same outputs");
    assert!(ran >= 15, "only {ran} models ran");
}

/// A tensor value's declaration; dims are numbers or symbols.
pub(crate) fn tensor_vi(name: &str, elem: i32, dims: &[&str]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(d.parse().map(Dim::Value).unwrap_or_else(|_| Dim::Param(d.to_string()))),
            denotation: None,
        })
        .collect();
    let tensor = TensorType { elem_type: Some(elem), shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(Type::Tensor(tensor)), denotation: None }),
        ..Default::default()
    }
}

/// A node of the default domain.
pub(crate) fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = NodeProto::new(
        op,
        format!("{op}_{}", outs[0]),
        ins.iter().map(|s| s.to_string()).collect(),
        outs.iter().map(|s| s.to_string()).collect(),
    );
    n.attribute = attrs;
    n
}

/// A model of one graph at `opset` of the default domain, as bytes.
pub(crate) fn model(mut graph: GraphProto, opset: i64) -> Vec<u8> {
    graph.name.get_or_insert_with(|| "graph".into());
    proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto { domain: Some(String::new()), version: Some(opset) }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}

fn conversion_passes(diffs: &[(String, f64, f32)], min_psnr: f64, max_err: f32) -> bool {
    diffs.iter().all(|(_, psnr, max)| *psnr >= min_psnr && *max <= max_err)
}

/// The stated tolerance of a float16 conversion against its float32 original: PSNR
/// (peak 1) ≥ 50 dB over each output (§4 of issue 23 asks 50 dB on 8-bit output; the
/// brief of this module 40 dB) and no value off by more than 4/255 (a few 8-bit steps).
const MIN_PSNR: f64 = 50.0;
const MAX_ERR: f32 = 4.0 / 255.0;

#[test]
fn upscale_in_fp16_matches_fp32_and_the_projects_own_fp16() {
    let (converted, diffs) = convert_and_compare("models/upscale.onnx", &Fp16Options::default(), &[1, 3, 48, 64]);
    assert!(conversion_passes(&diffs, MIN_PSNR, MAX_ERR), "{diffs:?}");
    let r = &converted.report;
    assert_eq!((r.tensors_converted, r.tensors_kept_fp32.as_slice()), (53, ["scales".to_string()].as_slice()), "{r:?}");
    assert_eq!((r.casts_inserted, r.values_retyped, r.clamped.len()), (2, 2, 0), "{r:?}");
    assert!(r.kept_fp32.iter().any(|k| k.op == "Resize"), "{r:?}");
    // models/upscale-fp16.onnx, the project's own conversion (Python, numpy's rounding), has
    // the same weights bit for bit, and gives the same image within float16 noise.
    let ours = proto::ModelProto::decode(converted.bytes.as_slice()).expect("decodes");
    let theirs = proto::ModelProto::decode(read("models/upscale-fp16.onnx").as_slice()).expect("decodes");
    let (ours, theirs) = (ours.graph.expect("graph"), theirs.graph.expect("graph"));
    for t in &theirs.initializer {
        let mine = ours.initializer.iter().find(|m| m.name == t.name).expect("the same initializers");
        assert_eq!((mine.data_type, &mine.raw_data), (t.data_type, &t.raw_data), "{:?}", t.name);
    }
    let inputs = pattern_inputs(&read("models/upscale.onnx"), &[1, 3, 48, 64]);
    let a = run(&converted.bytes, &inputs).expect("runs");
    let b = run(&read("models/upscale-fp16.onnx"), &inputs).expect("runs");
    let d = differences(&a, &b);
    eprintln!("against models/upscale-fp16.onnx: {d:?}");
    assert!(conversion_passes(&d, 80.0, 1.0 / 1024.0), "{d:?}");
}

#[test]
fn the_tiny_test_models_convert_within_tolerance() {
    let models = [
        "models/test/tiny-x2-f32.onnx",
        "models/test/tiny-x2-f32-nhwc.onnx",
        "models/test/tiny-x2-f32-two-outputs.onnx",
        "models/test/tiny-x2-f32-score-first.onnx",
        "models/test/tiny-x2-f32-bgr-signed.onnx",
        "models/test/tiny-x2-f32-meanstd.onnx",
        "models/test/tiny-x1-f32-color-albedo.onnx",
        "models/test/tiny-x1-f32-color-depth.onnx",
        "models/test/tiny-x2x1-f32-no-meta.onnx",
        "models/test/tiny-x1-f32-same-dims.onnx",
    ];
    for path in models {
        let (converted, diffs) = convert_and_compare(path, &Fp16Options::default(), &[1, 40, 36, 44]);
        assert!(conversion_passes(&diffs, MIN_PSNR, MAX_ERR), "{path}: {diffs:?}");
        let m = proto::ModelProto::decode(converted.bytes.as_slice()).expect("decodes");
        let g = m.graph.expect("graph");
        assert!(
            g.input.iter().chain(&g.output).all(|v| v.elem_type() == Some(data_type::FLOAT16)),
            "{path}: I/O float16"
        );
        assert!(converted.report.clamped.is_empty(), "{path}: {:?}", converted.report);
    }
}

#[test]
fn the_report_says_what_stays_fp32_and_the_graph_shows_it() {
    let converted = to_fp16(&read("models/test/tiny-x2-f32.onnx"), &Fp16Options::default()).expect("converts");
    let r = &converted.report;
    assert_eq!((r.tensors_converted, r.elements_converted), (5, 8 * 27 + 8 + 8 + 12 * 72 + 12), "{r:?}");
    assert_eq!((r.casts_inserted, r.values_retyped, r.casts_retargeted), (2, 2, 0), "{r:?}");
    assert_eq!(r.tensors_kept_fp32, ["scales"]);
    assert_eq!(r.kept_fp32.len(), 1, "{r:?}");
    assert_eq!(r.kept_fp32[0].op, "Resize");
    assert!(r.kept_fp32[0].reason.contains("block list"), "{r:?}");
    let g = proto::ModelProto::decode(converted.bytes.as_slice()).expect("decodes").graph.expect("graph");
    let resize = g.node.iter().find(|n| n.op() == "Resize").expect("Resize");
    let cast_in = g.node.iter().find(|n| n.output == [resize.input[0].clone()]).expect("a Cast feeds the Resize");
    assert_eq!((cast_in.op(), cast_in.int("to"), cast_in.input[0].as_str()), ("Cast", Some(1), "input"));
    let cast_out = g.node.iter().find(|n| n.input == [resize.output[0].clone()]).expect("a Cast follows it");
    assert_eq!((cast_out.op(), cast_out.int("to")), ("Cast", Some(10)));
    let scales = g.initializer.iter().find(|t| t.name() == "scales").expect("scales");
    assert_eq!(scales.dtype(), data_type::FLOAT);
    // Every node's inputs are made before it: the order stays topological.
    let mut made: std::collections::HashSet<&str> = g.input.iter().map(|v| v.name()).collect();
    made.extend(g.initializer.iter().map(|t| t.name()));
    for n in &g.node {
        assert!(n.input.iter().all(|i| i.is_empty() || made.contains(i.as_str())), "{n:?}");
        made.extend(n.output.iter().map(String::as_str));
    }
}

#[test]
fn keep_io_types_keeps_a_float32_boundary() {
    let options = Fp16Options { keep_io_types: true, ..Default::default() };
    let (converted, diffs) = convert_and_compare("models/test/tiny-x2-f32-two-outputs.onnx", &options, &[1, 3, 30, 34]);
    assert!(conversion_passes(&diffs, MIN_PSNR, MAX_ERR), "{diffs:?}");
    let g = proto::ModelProto::decode(converted.bytes.as_slice()).expect("decodes").graph.expect("graph");
    assert!(g.input.iter().chain(&g.output).all(|v| v.elem_type() == Some(data_type::FLOAT)));
    assert_eq!(g.output.iter().map(|v| v.name()).collect::<Vec<_>>(), ["image", "edges"], "names unchanged");
    // The input feeds the (float32) Resize as it is: no Cast to float16 and back.
    let resize = g.node.iter().find(|n| n.op() == "Resize").expect("Resize");
    assert_eq!(resize.input[0], "input");
}

#[test]
fn resize_in_fp16_keeps_its_roi_and_scales_fp32() {
    // Without Resize in the block list (as models/upscale-fp16.onnx has it): no Cast at all,
    // and the scales stay float32 (the schema's type), reported as such.
    let mut options = Fp16Options::default();
    options.op_block_list.retain(|o| o != "Resize");
    let (converted, diffs) = convert_and_compare("models/test/tiny-x2-f32.onnx", &options, &[1, 3, 26, 30]);
    assert!(conversion_passes(&diffs, MIN_PSNR, MAX_ERR), "{diffs:?}");
    let r = &converted.report;
    assert_eq!((r.casts_inserted, r.tensors_kept_fp32.as_slice()), (0, ["scales".to_string()].as_slice()));
    assert!(r.kept_fp32.iter().all(|k| k.op == "Resize" && k.reason.contains("input 2")), "{r:?}");
}

fn float_attr(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(f),
        r#type: Some(proto::attribute_type::FLOAT),
        ..Default::default()
    }
}

fn floats_attr(name: &str, floats: Vec<f32>) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        floats,
        r#type: Some(proto::attribute_type::FLOATS),
        ..Default::default()
    }
}

fn scalar(name: &str, v: f32) -> TensorProto {
    TensorProto::from_floats(name, vec![], &[v])
}

/// `y = x · big · small`: the identity in float32; `big` beyond the clip.
fn clipped_model(big: f32, small: f32) -> Vec<u8> {
    let graph = GraphProto {
        node: vec![node("Mul", &["x", "big"], &["a"], vec![]), node("Mul", &["a", "small"], &["y"], vec![])],
        initializer: vec![scalar("big", big), scalar("small", small)],
        input: vec![tensor_vi("x", data_type::FLOAT, &["1", "3", "h", "w"])],
        output: vec![tensor_vi("y", data_type::FLOAT, &["1", "3", "h", "w"])],
        ..Default::default()
    };
    model(graph, 17)
}

fn compare_bytes(original: &[u8], converted: &[u8]) -> Vec<(String, f64, f32)> {
    let inputs = pattern_inputs(original, &[1, 3, 20, 24]);
    differences(&run(original, &inputs).expect("runs"), &run(converted, &inputs).expect("converted runs"))
}

#[test]
fn values_beyond_the_clip_are_reported_and_the_check_catches_them() {
    // 1e5 is clipped to 1e4 like the reference's (the output is then a tenth of the input's):
    // the report names the tensor, and the comparison fails.
    let original = clipped_model(1e5, 1e-5);
    let converted = to_fp16(&original, &Fp16Options::default()).expect("converts");
    let clipped = &converted.report.clamped;
    assert_eq!(clipped, &[Clamped { tensor: "big".into(), large: 1, small: 0, largest: 1e5 }]);
    assert_eq!(converted.report.values_clipped_large(), 1);
    let d = compare_bytes(&original, &converted.bytes);
    assert!(!conversion_passes(&d, 40.0, MAX_ERR), "a clipped model passed: {d:?}");
    // Within range, the same model converts within tolerance and nothing is clipped.
    let fine = clipped_model(1e3, 1e-3);
    let converted = to_fp16(&fine, &Fp16Options::default()).expect("converts");
    assert!(converted.report.clamped.is_empty());
    let d = compare_bytes(&fine, &converted.bytes);
    assert!(conversion_passes(&d, MIN_PSNR, MAX_ERR), "{d:?}");
    // Values nearer 0 than 1e-7 are raised to it, and counted.
    let tiny = to_fp16(&clipped_model(1e-9, 1.0), &Fp16Options::default()).expect("converts");
    assert_eq!((tiny.report.clamped[0].small, tiny.report.clamped[0].large), (1, 0));
}

#[test]
fn a_broken_conversion_is_caught_by_the_comparison() {
    // The float16 weights written big-endian (a plausible bug): the model still loads and
    // runs, and only the comparison against the float32 run tells.
    let original = read("models/test/tiny-x2-f32.onnx");
    let converted = to_fp16(&original, &Fp16Options::default()).expect("converts");
    let mut m = proto::ModelProto::decode(converted.bytes.as_slice()).expect("decodes");
    for t in &mut m.graph.as_mut().expect("graph").initializer {
        if let (Some(10), Some(raw)) = (t.data_type, t.raw_data.as_mut()) {
            raw.chunks_exact_mut(2).for_each(|b| b.swap(0, 1));
        }
    }
    let d = compare_bytes(&original, &m.encode_to_vec());
    assert!(!conversion_passes(&d, 40.0, 0.5), "a broken conversion passed: {d:?}");
    let d = compare_bytes(&original, &converted.bytes);
    assert!(conversion_passes(&d, MIN_PSNR, MAX_ERR), "{d:?}");
}

#[test]
fn float16_models_and_unsupported_ones_are_refused() {
    let e = to_fp16(&read("models/test/tiny-x2-f16.onnx"), &Fp16Options::default()).expect_err("already fp16");
    assert!(e.to_string().contains("already float16"), "{e}");
    let e = to_fp16(b"not a model", &Fp16Options::default()).expect_err("not ONNX");
    assert!(e.to_string().contains("not an ONNX model"), "{e}");
}

#[test]
fn constants_casts_and_generators_are_retargeted() {
    let tenth = TensorProto::from_floats("tenth", vec![], &[0.1]);
    let c1 = TensorProto::from_floats("", vec![1, 3, 1, 1], &[0.1, -0.2, 0.3]);
    let graph = GraphProto {
        node: vec![
            node("Constant", &[], &["half"], vec![float_attr("value_float", 0.5)]),
            node("Mul", &["x", "half"], &["a"], vec![]),
            node("Constant", &[], &["c1"], vec![AttributeProto::tensor("value", c1)]),
            node("Add", &["a", "c1"], &["b"], vec![]),
            node("Shape", &["x"], &["shape"], vec![]),
            node("ConstantOfShape", &["shape"], &["zeros"], vec![]),
            node("Add", &["b", "zeros"], &["b2"], vec![]),
            node("Cast", &["x"], &["xi"], vec![AttributeProto::int("to", data_type::DOUBLE as i64)]),
            node("Cast", &["xi"], &["xf"], vec![AttributeProto::int("to", data_type::FLOAT as i64)]),
            node("Mul", &["xf", "tenth"], &["xq"], vec![]),
            node("Add", &["b2", "xq"], &["d"], vec![]),
            node("Constant", &[], &["floor"], vec![floats_attr("value_floats", vec![0.3])]),
            node("Max", &["d", "floor"], &["m"], vec![]),
            node("Mul", &["m", "x"], &["y"], vec![]),
        ],
        initializer: vec![tenth],
        input: vec![tensor_vi("x", data_type::FLOAT, &["1", "3", "h", "w"])],
        output: vec![
            tensor_vi("y", data_type::FLOAT, &["1", "3", "h", "w"]),
            tensor_vi("d", data_type::FLOAT, &[]),
            tensor_vi("m", data_type::FLOAT, &[]),
        ],
        value_info: vec![
            tensor_vi("xf", data_type::FLOAT, &["1", "3", "h", "w"]),
            tensor_vi("m", data_type::FLOAT, &["1", "3", "h", "w"]),
        ],
        ..Default::default()
    };
    let original = model(graph, 17);
    let converted = to_fp16(&original, &Fp16Options::default()).expect("converts");
    let d = compare_bytes(&original, &converted.bytes);
    assert!(conversion_passes(&d, MIN_PSNR, MAX_ERR), "{d:?}");
    let r = &converted.report;
    // Cast(to = float) and ConstantOfShape's default float zero; half, c1 and tenth.
    assert_eq!((r.casts_retargeted, r.tensors_converted), (2, 3), "{r:?}");
    assert_eq!(r.tensors_kept_fp32, ["floor"], "the Max alone reads it");
    assert_eq!((r.kept_fp32.len(), r.kept_fp32[0].op.as_str()), (1, "Max"), "{r:?}");
    // `d` is a graph output (float16) and an input of the float32 Max: one Cast, after its Add;
    // `m`, the Max's output, is a graph output too: the Max writes `m_fp32`, a Cast makes `m`,
    // which the last Mul reads as it is.
    assert_eq!((r.casts_inserted, r.values_retyped), (2, 6), "{r:?}");
    let g = proto::ModelProto::decode(converted.bytes.as_slice()).expect("decodes").graph.expect("graph");
    let xf = g.node.iter().find(|n| n.output == ["xf"]).expect("the Cast to float");
    assert_eq!(xf.int("to"), Some(data_type::FLOAT16 as i64));
    let declared = |name: &str| g.value_info.iter().find(|v| v.name() == name).and_then(|v| v.elem_type());
    assert_eq!((declared("xf"), declared("m"), declared("m_fp32")), (Some(10), Some(10), Some(1)));
    let max = g.node.iter().find(|n| n.op() == "Max").expect("Max");
    assert_eq!((max.input[0].as_str(), max.output[0].as_str()), ("d_fp32", "m_fp32"));
    assert_eq!(g.node.iter().find(|n| n.op() == "Mul" && n.output == ["y"]).map(|n| n.input[0].as_str()), Some("m"));
}

/// `If(cond)`: then `x · 2` (a Constant inside), else `Max(x, 0.25)` (float32 inside the
/// branch, on the outer `x`).
fn if_model() -> Vec<u8> {
    let branch = |name: &str, nodes: Vec<NodeProto>, out: &str| GraphProto {
        name: Some(name.into()),
        node: nodes,
        output: vec![tensor_vi(out, data_type::FLOAT, &["1", "3", "h", "w"])],
        ..Default::default()
    };
    let then = branch(
        "then",
        vec![
            node("Constant", &[], &["two"], vec![AttributeProto::tensor("value", scalar("", 2.0))]),
            node("Mul", &["x", "two"], &["t"], vec![]),
        ],
        "t",
    );
    let otherwise = branch(
        "else",
        vec![
            node("Constant", &[], &["quarter"], vec![AttributeProto::tensor("value", scalar("", 0.25))]),
            node("Max", &["x", "quarter"], &["e"], vec![]),
        ],
        "e",
    );
    let graph_attr = |name: &str, g: GraphProto| AttributeProto {
        name: Some(name.into()),
        g: Some(g),
        r#type: Some(proto::attribute_type::GRAPH),
        ..Default::default()
    };
    let graph = GraphProto {
        node: vec![node(
            "If",
            &["cond"],
            &["y"],
            vec![graph_attr("then_branch", then), graph_attr("else_branch", otherwise)],
        )],
        input: vec![tensor_vi("x", data_type::FLOAT, &["1", "3", "h", "w"]), tensor_vi("cond", data_type::BOOL, &[])],
        output: vec![tensor_vi("y", data_type::FLOAT, &["1", "3", "h", "w"])],
        ..Default::default()
    };
    model(graph, 17)
}

#[test]
fn subgraphs_are_converted_with_their_float32_nodes() {
    let original = if_model();
    let converted = to_fp16(&original, &Fp16Options::default()).expect("converts");
    let r = &converted.report;
    assert_eq!((r.tensors_converted, r.tensors_kept_fp32.as_slice()), (1, ["quarter".to_string()].as_slice()), "{r:?}");
    assert_eq!((r.kept_fp32.len(), r.casts_inserted), (1, 2), "{r:?}");
    for cond in [1.0, 0.0] {
        let x = pattern(&[1, 3, 10, 12], 3);
        let inputs = vec![("x".to_string(), vec![1, 3, 10, 12], x), ("cond".to_string(), vec![], vec![cond])];
        let a = run(&original, &inputs).expect("runs");
        let b = run(&converted.bytes, &inputs).expect("converted runs");
        let d = differences(&a, &b);
        assert!(conversion_passes(&d, MIN_PSNR, MAX_ERR), "cond {cond}: {d:?}");
    }
}

#[test]
fn compute_share_tells_matrix_bound_models() {
    let upscale = compute_share(&read("models/upscale.onnx")).expect("measures");
    eprintln!("upscale: {upscale:?} work {:.5} params {:.5}", upscale.work_share(), upscale.param_share());
    // 3·64·9 + 16·64·64·9 + 64·48·9 multiply-adds per input pixel; 17 PReLU of 64 channels,
    // then DepthToSpace, Resize and Add of 48 elements each.
    assert_eq!((upscale.matrix_macs, upscale.other_ops), (619_200.0, 1_232.0));
    assert_eq!((upscale.matrix_params, upscale.params), (621_424 - 17 * 64, 621_424 + 4));
    assert!(upscale.matrix_bound() && upscale.unfollowed.is_empty());
    let tiny = compute_share(&read("models/test/tiny-x2-f32.onnx")).expect("measures");
    assert_eq!((tiny.matrix_macs, tiny.other_ops), (216.0 + 864.0, 8.0 + 12.0 * 3.0));
    assert!(tiny.matrix_bound(), "{tiny:?}");
    let elementwise = compute_share(&clipped_model(2.0, 0.5)).expect("measures");
    assert_eq!((elementwise.matrix_macs, elementwise.other_ops, elementwise.params), (0.0, 6.0, 2));
    assert!(!elementwise.matrix_bound());
    // A matrix product with a constant operand: [1, 16] · [32, 16]ᵀ, then Relu.
    let graph = GraphProto {
        node: vec![
            node("Gemm", &["x", "w"], &["g"], vec![AttributeProto::int("transB", 1)]),
            node("Relu", &["g"], &["y"], vec![]),
        ],
        initializer: vec![TensorProto::from_floats("w", vec![32, 16], &[0.01; 512])],
        input: vec![tensor_vi("x", data_type::FLOAT, &["n", "16"])],
        output: vec![tensor_vi("y", data_type::FLOAT, &["n", "32"])],
        ..Default::default()
    };
    let gemm = compute_share(&model(graph, 17)).expect("measures");
    assert_eq!((gemm.matrix_macs, gemm.other_ops, gemm.matrix_params), (512.0, 32.0, 512));
}
