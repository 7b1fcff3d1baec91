//! Tests of the DepthToSpace tails: each rewritten model (run with the operators' CPU kernels)
//! against its original on ONNX Runtime's CPU provider, whose own DepthToSpace is the
//! reference, on the same non-trivial input.

use prost::Message;

use super::*;
use crate::graph::convact::fuse_conv_act;
use crate::graph::convact::tests::{FP16_MIN_PSNR, FP32_MAX_ERR, assert_exact, compare};
use crate::graph::fp16::tests::{model, node, pattern_inputs, run, tensor_vi};
use crate::graph::proto::{OperatorSetIdProto, TensorProto, data_type};
use crate::ops::depth_to_space::{Addends, Attrs, depth_to_space_reference};

fn nodes(bytes: &[u8]) -> Vec<NodeProto> {
    ModelProto::decode(bytes).expect("decodes").graph.expect("graph").node
}

fn count(bytes: &[u8], op: &str) -> usize {
    nodes(bytes).iter().filter(|n| n.op() == op).count()
}

/// The fused convolutions, then the tails: what `convact::fused_model` writes.
fn both(original: &[u8]) -> (Rewritten, Rewritten) {
    both_padding(original, true)
}

/// [`both`], a tail's last convolution padded to 64 filters where it may be (`pad`) or not.
fn both_padding(original: &[u8], pad: bool) -> (Rewritten, Rewritten) {
    let fused = fuse_conv_act(original).expect("fuses");
    assert!(fused.applied(), "{:?}", fused.skipped);
    let tails = fuse_depth_to_space(&fused.bytes, pad).expect("rewrites");
    (fused, tails)
}

fn weights(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7919 + seed * 104_729) % 211) as f32 / 211.0 - 0.5) * 0.5).collect()
}

/// x [1, 3, h, w] → Conv 3→8 3×3 + PRelu → Conv 8→3·b² 3×3 → (+ Conv1×1 of x, 3→3·b², with
/// `skip`) → DepthToSpace(b, mode) → y: the shape of an SRVGG-like upscaler's tail.
fn upscaler(block: i64, mode: &str, skip: bool) -> Vec<u8> {
    let k = 3 * block * block;
    let conv = |ins: &[&str], out: &str, kernel: i64| {
        let p = kernel / 2;
        node(
            "Conv",
            ins,
            &[out],
            vec![AttributeProto::ints("kernel_shape", vec![kernel, kernel]), AttributeProto::ints("pads", vec![p; 4])],
        )
    };
    let mut n = vec![
        conv(&["x", "w0", "b0"], "c0", 3),
        node("PRelu", &["c0", "s0"], &["a0"], vec![]),
        conv(&["a0", "w1", "b1"], "c1", 3),
    ];
    let mut inits = vec![
        TensorProto::from_floats("w0", vec![8, 3, 3, 3], &weights(8 * 27, 1)),
        TensorProto::from_floats("b0", vec![8], &weights(8, 2)),
        TensorProto::from_floats("s0", vec![1, 8, 1, 1], &weights(8, 3).iter().map(|v| v + 0.3).collect::<Vec<_>>()),
        TensorProto::from_floats("w1", vec![k, 8, 3, 3], &weights((k * 72) as usize, 4)),
        TensorProto::from_floats("b1", vec![k], &weights(k as usize, 5)),
    ];
    let mut tail = "c1";
    if skip {
        n.push(conv(&["x", "ws"], "cs", 1));
        n.push(node("Add", &["c1", "cs"], &["sum"], vec![]));
        inits.push(TensorProto::from_floats("ws", vec![k, 3, 1, 1], &weights((k * 3) as usize, 6)));
        tail = "sum";
    }
    n.push(node(
        "DepthToSpace",
        &[tail],
        &["y"],
        vec![AttributeProto::int("blocksize", block), AttributeProto::string("mode", mode)],
    ));
    let graph = GraphProto {
        node: n,
        initializer: inits,
        input: vec![tensor_vi("x", data_type::FLOAT, &["1", "3", "h", "w"])],
        output: vec![tensor_vi("y", data_type::FLOAT, &["1", "3", "H", "W"])],
        ..Default::default()
    };
    model(graph, 17)
}

/// [`upscaler`] without the skip, its output `Add(DepthToSpace(c1), Resize(nearest, ×b)(x))`:
/// the SRVGG tail that `fold_upsample_skip` folds.
fn upscaler_with_resize(block: i64, mode: &str) -> Vec<u8> {
    let mut m = ModelProto::decode(upscaler(block, mode, false).as_slice()).expect("decodes");
    let g = m.graph.as_mut().expect("graph");
    g.node.last_mut().expect("DepthToSpace").output = vec!["shuffled".into()];
    g.node.push(node(
        "Resize",
        &["x", "", "scales"],
        &["up"],
        vec![
            AttributeProto::string("mode", "nearest"),
            AttributeProto::string("coordinate_transformation_mode", "asymmetric"),
            AttributeProto::string("nearest_mode", "floor"),
        ],
    ));
    g.node.push(node("Add", &["shuffled", "up"], &["y"], vec![]));
    g.initializer.push(TensorProto::from_floats("scales", vec![4], &[1.0, 1.0, block as f32, block as f32]));
    m.encode_to_vec()
}

#[test]
fn a_folded_upsample_skip_is_read_as_it_is() {
    for (block, mode) in [(4, "CRD"), (4, "DCR"), (3, "CRD")] {
        let what = format!("×{block} {mode}");
        let original = upscaler_with_resize(block, mode);
        let folded = crate::graph::fold::fold_upsample_skip(&original).expect("folds");
        assert!(folded.applied(), "{what}: {:?}", folded.skipped);
        let (fused, tails) = both(&folded.bytes);
        assert!(tails.changes[0].contains("1 with the upsampled input"), "{what}: {:?}", tails.changes);
        // The 1×1 Conv that repeated x's channels is gone; the node reads x itself.
        assert_eq!(count(&tails.bytes, "Conv"), count(&fused.bytes, "Conv") - 1, "{what}");
        let op = nodes(&tails.bytes).into_iter().find(|n| n.op() == OP && n.domain.as_deref() == Some(DOMAIN));
        assert_eq!(op.expect("the node").input.last().map(String::as_str), Some("x"), "{what}");
        assert_exact(&what, &original, &tails.bytes, &[[1, 3, 13, 17], [1, 3, 6, 5]]);
    }
}

#[test]
fn the_reference_matches_hand_computed_shuffles() {
    let x: Vec<f32> = (0..8).map(|v| v as f32).collect();
    // One pixel of 8 channels, b = 2: two output channels of 2 × 2.
    let crd = Attrs { block: 2, crd: true, channels: None };
    let dcr = Attrs { block: 2, crd: false, channels: None };
    let none = Addends::default();
    assert_eq!(depth_to_space_reference(&crd, &x, &none, [1, 1, 1, 8]), [0., 1., 2., 3., 4., 5., 6., 7.]);
    assert_eq!(depth_to_space_reference(&dcr, &x, &none, [1, 1, 1, 8]), [0., 2., 4., 6., 1., 3., 5., 7.]);
    // Two pixels of 4 channels side by side, one output channel of 2 × 4; z added.
    let ones = [1f32; 8];
    let z = Addends { z: Some(&ones), ..Addends::default() };
    assert_eq!(depth_to_space_reference(&crd, &x, &z, [1, 1, 2, 4]), [1., 2., 5., 6., 3., 4., 7., 8.]);
    // A bias by input channel: channel k of every pixel gets 10·k.
    let bias = [0., 10., 20., 30.];
    let b = Addends { bias: Some(&bias), ..Addends::default() };
    assert_eq!(depth_to_space_reference(&crd, &x, &b, [1, 1, 2, 4]), [0., 11., 4., 15., 22., 33., 26., 37.]);
    // An upsampled input: each pixel's value to its whole 2 × 2 block.
    let up = [100., 200.];
    let u = Addends { up: Some(&up), ..Addends::default() };
    assert_eq!(depth_to_space_reference(&crd, &x, &u, [1, 1, 2, 4]), [100., 101., 204., 205., 102., 103., 206., 207.]);
    // Pixels of 8 channels of which the first 4 are read (`channels` 1): the last 4 skipped.
    let padded = Attrs { channels: Some(1), ..crd };
    let x: Vec<f32> = (0..16).map(|v| v as f32).collect();
    assert_eq!(depth_to_space_reference(&padded, &x, &none, [1, 1, 2, 8]), [0., 1., 8., 9., 2., 3., 10., 11.]);
    assert_eq!((padded.out_channels(8), padded.out_channels(3), crd.out_channels(6)), (Some(1), None, None));
}

#[test]
fn tails_with_and_without_their_add_go_nhwc_exactly() {
    for (block, mode, skip) in [(2, "DCR", false), (2, "CRD", true), (4, "CRD", true), (3, "DCR", true)] {
        let what = format!("×{block} {mode}, skip {skip}");
        let original = upscaler(block, mode, skip);
        let (fused, tails) = both(&original);
        assert_eq!(tails.changes.len(), 1, "{what}: {:?}", tails.skipped);
        assert!(tails.changes[0].starts_with(LINE), "{what}: {:?}", tails.changes);
        assert!(tails.changes[0].contains(&format!("{} with the Add", usize::from(skip))), "{:?}", tails.changes);
        let after = nodes(&tails.bytes);
        let op: Vec<&NodeProto> =
            after.iter().filter(|n| n.domain.as_deref() == Some(DOMAIN) && n.op() == OP).collect();
        assert_eq!(op.len(), 1, "{what}");
        // The last convolution, fused where its 3·b² channels are aligned, leaves its bias to
        // the node (its third input) and runs alone (X and W).
        let aligned = (3 * block * block) % crate::graph::convact::CHANNEL_ALIGN == 0;
        assert!(tails.changes[0].contains(&format!("{} with the last convolution's bias", usize::from(aligned))));
        assert_eq!(op[0].input.len(), if aligned { 3 } else { 1 + usize::from(skip) }, "{what}: {:?}", op[0].input);
        if aligned {
            let last = after.iter().rfind(|n| n.op() == crate::graph::edit::CONV_ACT).expect("a ConvAct");
            assert_eq!(last.input.len(), 2, "{what}: {:?}", last.input);
        }
        assert_eq!(count(&tails.bytes, "Add"), 0, "{what}");
        // A fused last convolution's transpose back to NCHW goes. A plain Conv's result (the
        // skip's 1×1, an unaligned last one) gets one to NHWC, which ONNX Runtime cancels
        // against its own.
        let expected =
            count(&fused.bytes, "Transpose") - usize::from(aligned) + usize::from(skip) + usize::from(!aligned);
        assert_eq!(count(&tails.bytes, "Transpose"), expected, "{what}");
        assert_exact(&what, &original, &tails.bytes, &[[1, 3, 13, 17], [1, 3, 6, 5]]);
    }
}

#[test]
fn the_bundled_upscalers_chains_stay_within_tolerance() {
    let original = std::fs::read("models/upscale.onnx").expect("models/upscale.onnx");
    let folded = crate::graph::fold::fold_upsample_skip(&original).expect("folds");
    assert!(folded.applied(), "{:?}", folded.skipped);
    // fp32: fold, fuse, tails; exact.
    let (_, tails) = both(&folded.bytes);
    assert!(
        tails.changes[0].contains("1 DepthToSpace")
            && tails.changes[0].contains("1 with the Add")
            && tails.changes[0].contains("1 with the last convolution's bias")
            && tails.changes[0].contains("1 with the upsampled input")
            && tails.changes[0].contains("0 with its filters padded"),
        "{:?}",
        tails.changes
    );
    assert_eq!(count(&tails.bytes, "DepthToSpace"), 1, "ours only");
    let d = compare(&original, &tails.bytes, &[1, 3, 16, 20]);
    eprintln!("fp32 fold → fused → tails: {d:?}");
    assert!(d.iter().all(|(_, _, max)| *max <= FP32_MAX_ERR), "{d:?}");
    // fp16 as `precision.rs` converts it (the CUDA backend's default chain), and the fp16 file.
    let mut options = crate::graph::fp16::Fp16Options::default();
    options.op_block_list.retain(|op| op != "Resize" && op != "Upsample");
    let half = crate::graph::fp16::to_fp16(&folded.bytes, &options).expect("converts");
    let (_, tails) = both(&half.bytes);
    assert!(tails.changes[0].contains("1 with its filters padded to 64"), "{:?}", tails.changes);
    let d = compare(&original, &tails.bytes, &[1, 3, 16, 20]);
    eprintln!("fp16 fold → fused → tails against fp32: {d:?}");
    assert!(d.iter().all(|(_, psnr, _)| *psnr >= FP16_MIN_PSNR), "{d:?}");
    let file = std::fs::read("models/upscale-fp16.onnx").expect("models/upscale-fp16.onnx");
    let (_, tails) = both(&file);
    assert!(tails.applied());
    assert!(tails.changes[0].contains("1 with its filters padded to 64"), "{:?}", tails.changes);
    let d = compare(&file, &tails.bytes, &[1, 3, 16, 20]);
    eprintln!("the fp16 file → fused → tails: {d:?}");
    assert!(d.iter().all(|(_, psnr, _)| *psnr >= FP16_MIN_PSNR), "{d:?}");
}

/// A tail's last convolution padded to 64 filters: the same output as without, to the bit (the
/// operators' CPU kernels), on the fp16 file and an fp16 ×4 test upscaler; not where it would
/// add more than a third (×2: 12 filters), where the tail adds a second convolution's result,
/// or in fp32.
#[test]
fn a_tails_last_convolution_padded_to_64_filters_changes_nothing_else() {
    let half = |bytes: &[u8]| {
        crate::graph::fp16::to_fp16(bytes, &crate::graph::fp16::Fp16Options::default()).expect("converts").bytes
    };
    let file = std::fs::read("models/upscale-fp16.onnx").expect("models/upscale-fp16.onnx");
    for (what, model, padded) in [
        ("the fp16 file", file, true),
        ("×4 CRD fp16", half(&upscaler(4, "CRD", false)), true),
        ("×4 DCR fp16", half(&upscaler(4, "DCR", false)), true),
        ("×2 CRD fp16 (12 filters)", half(&upscaler(2, "CRD", false)), false),
        ("×4 CRD fp16 with its skip added", half(&upscaler(4, "CRD", true)), false),
        ("×4 CRD fp32", upscaler(4, "CRD", false), false),
    ] {
        let (_, on) = both_padding(&model, true);
        let (_, off) = both_padding(&model, false);
        let line = format!("{} with its filters padded to 64", usize::from(padded));
        assert!(on.changes[0].contains(&line), "{what}: {:?}", on.changes);
        assert!(off.changes[0].contains("0 with its filters padded"), "{what}: {:?}", off.changes);
        let after = nodes(&on.bytes);
        let tail = after.iter().find(|n| n.op() == OP && n.domain.as_deref() == Some(DOMAIN)).expect("the tail");
        assert_eq!(tail.int("channels"), padded.then_some(3), "{what}");
        if padded {
            let g = ModelProto::decode(on.bytes.as_slice()).expect("decodes").graph.expect("graph");
            let last = after.iter().rfind(|n| n.op() == crate::graph::edit::CONV_ACT).expect("a ConvAct");
            let w = g.initializer.iter().find(|t| Some(t.name()) == last.input_at(1)).expect("its weight");
            assert_eq!(w.dims[0], 64, "{what}");
            assert_eq!(last.input.len(), 2, "{what}: no bias of its own");
        } else {
            assert_eq!(on.bytes, off.bytes, "{what}");
        }
        let inputs = pattern_inputs(&model, &[1, 3, 11, 14]);
        let (a, b) = (run(&on.bytes, &inputs).expect("runs"), run(&off.bytes, &inputs).expect("runs"));
        assert_eq!(a[0].shape, b[0].shape, "{what}");
        let differ = a[0].data.iter().zip(&b[0].data).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
        assert_eq!(differ, 0, "{what}: {differ} elements differ");
        assert!(a[0].data.iter().any(|v| *v != 0.0), "{what}: a pattern, not zeros");
        let d = compare(&model, &on.bytes, &[1, 3, 11, 14]);
        assert!(d.iter().all(|(_, psnr, _)| *psnr >= FP16_MIN_PSNR), "{what}: {d:?}");
    }
}

#[test]
fn what_the_tails_leave_alone() {
    // No fused convolution: unchanged, byte for byte.
    let mut plain = ModelProto::decode(upscaler(2, "DCR", true).as_slice()).expect("decodes");
    plain.graph.as_mut().expect("graph").node.retain(|n| n.op() != "PRelu");
    for n in plain.graph.as_mut().expect("graph").node.iter_mut() {
        for i in n.input.iter_mut() {
            if i == "a0" {
                *i = "c0".into();
            }
        }
    }
    let plain = plain.encode_to_vec();
    let r = fuse_depth_to_space(&plain, true).expect("rewrites");
    assert!(!r.applied() && r.bytes == plain, "{:?}", r.changes);
    // An Add of a constant (it may broadcast): the DepthToSpace goes NHWC, the Add stays.
    let mut bias = ModelProto::decode(upscaler(2, "CRD", false).as_slice()).expect("decodes");
    {
        let g = bias.graph.as_mut().expect("graph");
        let d2s = g.node.pop().expect("DepthToSpace");
        g.node.push(node("Add", &["c1", "shift"], &["sum"], vec![]));
        g.initializer.push(TensorProto::from_floats("shift", vec![1, 12, 1, 1], &weights(12, 9)));
        let mut d2s = d2s;
        d2s.input = vec!["sum".into()];
        g.node.push(d2s);
    }
    let bias = bias.encode_to_vec();
    let (_, tails) = both(&bias);
    assert!(tails.changes[0].contains("0 with the Add"), "{:?}", tails.changes);
    assert_eq!(count(&tails.bytes, "Add"), 1);
    let d = compare(&bias, &tails.bytes, &[1, 3, 7, 9]);
    assert!(d.iter().all(|(_, _, max)| *max <= FP32_MAX_ERR), "{d:?}");
}

/// Which of the operator's optional inputs a test model gives.
#[derive(Clone, Copy, Debug)]
struct Optional {
    z: bool,
    bias: bool,
    up: bool,
}

const ALL: Optional = Optional { z: true, bias: true, up: true };

/// The operator alone: X (and Z) NHWC `[1, h, w, 3·b²]` (or `[1, h, w, stride]` with
/// `channels` 3), B `[3·b²]`, U NCHW `[1, 3, h, w]`, those `with` names, → Y.
fn op_alone(block: i64, mode: &str, with: Optional, elem: i32, stride: Option<i64>) -> Vec<u8> {
    let read = (3 * block * block).to_string();
    let k = stride.map_or(read.clone(), |s| s.to_string());
    let mut ins =
        vec!["x", if with.z { "z" } else { "" }, if with.bias { "b" } else { "" }, if with.up { "u" } else { "" }];
    while ins.last() == Some(&"") {
        ins.pop();
    }
    let mut n =
        node(OP, &ins, &["y"], vec![AttributeProto::int("blocksize", block), AttributeProto::string("mode", mode)]);
    if stride.is_some() {
        n.attribute.push(AttributeProto::int("channels", 3));
    }
    n.domain = Some(DOMAIN.into());
    let input = ins
        .iter()
        .filter_map(|i| match *i {
            "x" | "z" => Some(tensor_vi(i, elem, &["1", "h", "w", &k])),
            "b" => Some(tensor_vi(i, elem, &[&read])),
            "u" => Some(tensor_vi(i, elem, &["1", "3", "h", "w"])),
            _ => None,
        })
        .collect();
    let graph = GraphProto {
        node: vec![n],
        input,
        output: vec![tensor_vi("y", elem, &["1", "3", "H", "W"])],
        ..Default::default()
    };
    let mut m = ModelProto::decode(model(graph, 17).as_slice()).expect("decodes");
    m.opset_import.push(OperatorSetIdProto { domain: Some(DOMAIN.into()), version: Some(1) });
    m.encode_to_vec()
}

/// The operator's model for the GPU test below, on the CPU provider: the reference's values.
#[test]
fn the_operator_alone_runs_the_reference_on_the_cpu_provider() {
    for (block, mode, with, elem, stride) in [
        (3, "DCR", ALL, data_type::FLOAT, None),
        (4, "CRD", Optional { z: false, ..ALL }, data_type::FLOAT16, None),
        (2, "CRD", Optional { bias: false, up: false, ..ALL }, data_type::FLOAT16, None),
        // Pixels with more channels than read (a padded last convolution's).
        (4, "CRD", Optional { z: false, ..ALL }, data_type::FLOAT16, Some(64)),
        (2, "DCR", ALL, data_type::FLOAT, Some(13)),
    ] {
        let bytes = op_alone(block, mode, with, elem, stride);
        // pattern_inputs sizes dynamic dims by position: h and w are axes 1 and 2 of X and
        // Z but 2 and 3 of U; a square frame keeps them equal.
        let inputs = pattern_inputs(&bytes, &[1, 6, 6, 6]);
        let got = run(&bytes, &inputs).expect("runs");
        let a = Attrs { block, crd: mode == "CRD", channels: stride.map(|_| 3) };
        let round = |v: &Vec<f32>| -> Vec<f32> {
            if elem == data_type::FLOAT16 {
                v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect()
            } else {
                v.clone()
            }
        };
        let named = |name: &str| inputs.iter().find(|i| i.0 == name).map(|i| round(&i.2));
        let (x, z, b, u) = (named("x").expect("x"), named("z"), named("b"), named("u"));
        assert_eq!((z.is_some(), b.is_some(), u.is_some()), (with.z, with.bias, with.up));
        let add = Addends { z: z.as_deref(), bias: b.as_deref(), up: u.as_deref() };
        let dims = [1, 6, 6, stride.unwrap_or(3 * block * block) as usize];
        let expected = round(&depth_to_space_reference(&a, &x, &add, dims));
        assert_eq!(got[0].shape, vec![1, 3, 6 * block, 6 * block]);
        assert_eq!(got[0].data, expected, "×{block} {mode} {with:?} stride {stride:?}");
    }
}

/// On the GPU (`gpu-run.sh`'s `lib-gpu` step runs the lib's `gpu_tests`).
#[cfg(feature = "cuda")]
pub(crate) mod gpu_tests {
    use ort::session::Session;

    use super::*;
    use crate::graph::fp16::tests::{differences, run_in};

    /// Held by each GPU test: they count the CUDA kernel's runs, which are process-wide.
    pub(crate) fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());
        GPU.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A CUDA session; `strict`: every node on CUDA, or no session (the operators' CPU kernels
    /// must not stand in).
    pub(crate) fn on_cuda(bytes: &[u8], strict: bool) -> Session {
        let env = crate::onnx::runtime::environment().expect("ONNX Runtime");
        let cuda = ort::ep::CUDA::default().build().error_on_failure();
        let domain = crate::ops::domain().expect("the operators");
        let builder = Session::builder(env).expect("a session builder");
        let builder = builder.with_execution_providers([cuda]).expect("the CUDA provider");
        let builder = if strict { builder.with_disable_cpu_fallback().expect("no CPU fallback") } else { builder };
        let mut builder = builder.with_operators(domain).expect("the operators");
        let _one_at_a_time = crate::graph::fp16::tests::creating();
        builder.commit_from_memory(bytes).expect("a CUDA session")
    }

    /// The bundled fp16 upscaler as the CUDA backend loads it (fused convolutions, the last one
    /// without its bias, and the tail), on ONNX Runtime's CUDA provider with the operators'
    /// CUDA kernels, against the CPU provider's run of the file as it is: PSNR ≥ 50 dB.
    #[test]
    #[ignore = "needs an NVIDIA GPU with CUDA: cargo test -- --include-ignored"]
    fn the_fp16_upscalers_rewrite_on_cuda_matches_the_cpu_run() {
        let _gpu = one_at_a_time();
        let file = std::fs::read("models/upscale-fp16.onnx").expect("models/upscale-fp16.onnx");
        let (_, tails) = both(&file);
        assert!(tails.changes[0].contains("1 with the last convolution's bias"), "{:?}", tails.changes);
        assert!(tails.changes[0].contains("1 with its filters padded to 64"), "{:?}", tails.changes);
        let inputs = pattern_inputs(&file, &[1, 3, 72, 128]);
        let expected = run(&file, &inputs).expect("the CPU run");
        let mut cuda = on_cuda(&tails.bytes, false);
        let before = crate::ops::depth_to_space::CUDA_RUNS.load(std::sync::atomic::Ordering::Relaxed);
        let got = run_in(&mut cuda, &inputs).expect("the CUDA run");
        let runs = crate::ops::depth_to_space::CUDA_RUNS.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(runs >= 1, "the tail ran on the CPU");
        let d = differences(&expected, &got);
        eprintln!("fp16 upscaler, fused + tails on CUDA against the file on the CPU: {d:?}");
        assert!(d.iter().all(|(_, psnr, _)| *psnr >= FP16_MIN_PSNR), "{d:?}");
    }

    /// The CUDA kernel against the CPU kernel, bit for bit (both sum in f32 and round once),
    /// on odd sizes; the CUDA run before it wrote NaN everywhere (its inputs were NaN), so an
    /// element the kernel skipped would show.
    #[test]
    #[ignore = "needs an NVIDIA GPU with CUDA: cargo test -- --include-ignored"]
    fn the_cuda_kernel_matches_the_cpu_kernel_bit_for_bit() {
        let _gpu = one_at_a_time();
        for (block, mode, with, elem, stride) in [
            (4, "CRD", ALL, data_type::FLOAT16, None),
            (3, "DCR", Optional { bias: false, ..ALL }, data_type::FLOAT, None),
            (2, "DCR", Optional { z: false, up: false, ..ALL }, data_type::FLOAT16, None),
            (4, "CRD", Optional { z: false, bias: false, up: false }, data_type::FLOAT, None),
            // The kernel's vectorised path (fp16, CRD, ×4): the upscaler's tail (bias and the
            // upsampled input), and x alone.
            (4, "CRD", Optional { z: false, ..ALL }, data_type::FLOAT16, None),
            (4, "CRD", Optional { z: false, bias: false, up: false }, data_type::FLOAT16, None),
            // Pixels with more channels than read: the padded upscaler's (vectorised), z too,
            // and a stride the vectorised path refuses (not a multiple of 8).
            (4, "CRD", Optional { z: false, ..ALL }, data_type::FLOAT16, Some(64)),
            (4, "CRD", ALL, data_type::FLOAT16, Some(56)),
            (3, "DCR", ALL, data_type::FLOAT, Some(31)),
        ] {
            let what = format!("×{block} {mode}, {with:?}, element {elem}, stride {stride:?}");
            let bytes = op_alone(block, mode, with, elem, stride);
            // Square, so that U's h and w (axes 2 and 3) match X's (1 and 2).
            let inputs = pattern_inputs(&bytes, &[1, 45, 45, 45]);
            let nans: Vec<_> = inputs.iter().map(|(n, d, v)| (n.clone(), d.clone(), vec![f32::NAN; v.len()])).collect();
            let expected = run(&bytes, &inputs).expect("the CPU kernel runs");
            let mut cuda = on_cuda(&bytes, true);
            let poisoned = run_in(&mut cuda, &nans).expect("the CUDA kernel runs");
            assert!(poisoned[0].data.iter().all(|v| v.is_nan()), "{what}: NaN in, NaN out");
            let got = run_in(&mut cuda, &inputs).expect("the CUDA kernel runs");
            assert_eq!(got[0].shape, expected[0].shape, "{what}");
            let differ = got[0].data.iter().zip(&expected[0].data).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{what}: {differ} of {} elements differ", got[0].data.len());
            assert!(expected[0].data.iter().any(|v| *v != 0.0), "{what}: a pattern, not zeros");
        }
    }
}

/// x [1, 8, h, w] → Conv 8→8 3×3 + Relu, then its tail: `tail(a0)` names the DepthToSpace's
/// input (nodes and constants added to the graph).
fn headed(tail: impl FnOnce(&mut GraphProto) -> String, block: i64, out_channels: i64) -> Vec<u8> {
    let conv = |ins: &[&str], out: &str| {
        node(
            "Conv",
            ins,
            &[out],
            vec![AttributeProto::ints("kernel_shape", vec![3, 3]), AttributeProto::ints("pads", vec![1; 4])],
        )
    };
    let mut g = GraphProto {
        node: vec![conv(&["x", "w0", "b0"], "c0"), node("Relu", &["c0"], &["a0"], vec![])],
        initializer: vec![
            TensorProto::from_floats("w0", vec![8, 8, 3, 3], &weights(8 * 72, 1)),
            TensorProto::from_floats("b0", vec![8], &weights(8, 2)),
        ],
        input: vec![tensor_vi("x", data_type::FLOAT, &["1", "8", "h", "w"])],
        output: vec![tensor_vi("y", data_type::FLOAT, &["1", &out_channels.to_string(), "H", "W"])],
        ..Default::default()
    };
    let last = tail(&mut g);
    g.node.push(node("DepthToSpace", &[&last], &["y"], vec![AttributeProto::int("blocksize", block)]));
    model(g, 17)
}

/// A 3×3 Conv 8→k (+ bias) of `src` into `out`, appended.
fn conv_into(g: &mut GraphProto, src: &str, out: &str, k: i64, seed: usize) {
    let (w, b) = (format!("{out}_w"), format!("{out}_b"));
    g.initializer.push(TensorProto::from_floats(&w, vec![k, 8, 3, 3], &weights((k * 72) as usize, seed)));
    g.initializer.push(TensorProto::from_floats(&b, vec![k], &weights(k as usize, seed + 1)));
    g.node.push(node(
        "Conv",
        &[src, &w, &b],
        &[out],
        vec![AttributeProto::ints("kernel_shape", vec![3, 3]), AttributeProto::ints("pads", vec![1; 4])],
    ));
}

/// Found by a review: each case ran, or ran wrongly, before its fix.
#[test]
fn tails_of_unusual_shapes_stay_exact() {
    // Two stages, ×2 then ×3 (the outputs' unknown sizes once shared a name, and ONNX Runtime
    // reused the first stage's buffer for the second).
    let two_stages = {
        let mut g = ModelProto::decode(
            headed(
                |g| {
                    conv_into(g, "a0", "c1", 32, 3);
                    g.node.push(node("Relu", &["c1"], &["a1"], vec![]));
                    g.node.push(node("DepthToSpace", &["a1"], &["d1"], vec![AttributeProto::int("blocksize", 2)]));
                    conv_into(g, "d1", "c2", 72, 5);
                    g.node.push(node("Relu", &["c2"], &["a2"], vec![]));
                    "a2".into()
                },
                3,
                8,
            )
            .as_slice(),
        )
        .expect("decodes");
        // A convolution after the last stage (its output is not the graph's).
        let graph = g.graph.as_mut().expect("graph");
        graph.node.last_mut().expect("DepthToSpace").output = vec!["d2".into()];
        conv_into(graph, "d2", "c3", 8, 9);
        graph.node.push(node("Relu", &["c3"], &["y"], vec![]));
        g.encode_to_vec()
    };
    // Add(c, c): one value read twice (once taken for a single reader: the bias moved and
    // added once).
    let twice = headed(
        |g| {
            conv_into(g, "a0", "c1", 32, 3);
            g.node.push(node("Add", &["c1", "c1"], &["sum"], vec![]));
            "sum".into()
        },
        2,
        8,
    );
    // An Add that broadcasts: a convolution of the frame's average (1 × 1) to a full one.
    let broadcast = headed(
        |g| {
            conv_into(g, "a0", "c1", 32, 3);
            g.node.push(node("GlobalAveragePool", &["a0"], &["avg"], vec![]));
            conv_into(g, "avg", "c2", 32, 7);
            g.node.push(node("Add", &["c1", "c2"], &["sum"], vec![]));
            "sum".into()
        },
        2,
        8,
    );
    for (what, original, add_folded) in
        [("two stages", two_stages, None), ("Add(c, c)", twice, Some(true)), ("broadcast", broadcast, Some(false))]
    {
        let (_, tails) = both(&original);
        assert!(tails.applied(), "{what}: {:?}", tails.skipped);
        if let Some(folded) = add_folded {
            assert_eq!(count(&tails.bytes, "Add"), usize::from(!folded), "{what}: {:?}", tails.changes);
        }
        assert_exact(what, &original, &tails.bytes, &[[1, 8, 5, 6], [1, 8, 4, 7]]);
    }
}

#[test]
fn the_repeat_convolutions_weight_goes_with_it() {
    let folded = crate::graph::fold::fold_upsample_skip(&upscaler_with_resize(4, "CRD")).expect("folds");
    let (fused, tails) = both(&folded.bytes);
    let weights = |bytes: &[u8]| -> usize {
        let g = ModelProto::decode(bytes).expect("decodes").graph.expect("graph");
        g.initializer.iter().filter(|t| t.name().contains("repeat_weight")).count()
    };
    assert_eq!((weights(&fused.bytes), weights(&tails.bytes)), (1, 0));
}

#[test]
fn the_operators_errors_name_it_and_the_fallback_knows_them() {
    use crate::ops::depth_to_space::guarded;
    let plain = guarded(|| Err(ort::Error::new("Shape mismatch attempting to re-use buffer"))).expect_err("fails");
    assert!(plain.to_string().starts_with(&format!("{DOMAIN}::{OP}: Shape mismatch")), "{plain}");
    assert!(crate::graph::prepare::owns_error(&plain.to_string()));
    // Named once, not twice.
    let named = guarded(|| Err(plain)).expect_err("fails");
    assert_eq!(named.to_string().matches(OP).count(), 1, "{named}");
    let panicked = guarded(|| panic!("index out of bounds")).expect_err("a panic is an error");
    assert!(panicked.to_string().ends_with("index out of bounds"), "{panicked}");
    assert!(guarded(|| Ok(())).is_ok());
    assert!(!crate::graph::prepare::owns_error("Non-zero status code returned while running Conv node"));
}
