//! The depth-to-space rewrite that goes with the fused convolutions (issue 23 §2): each
//! `DepthToSpace` of a model whose convolutions [`fuse_conv_act`](super::convact::fuse_conv_act)
//! turned NHWC becomes one [`OP`] node of the [`DOMAIN`] domain that reads NHWC and writes
//! the NCHW result the graph declares, and, where an `Add` of two convolutions' results is
//! all that feeds it, adds them on the way.
//!
//! ONNX Runtime's CUDA provider runs a DepthToSpace as a 6-D transpose, and an NCHW output
//! after NHWC convolutions costs one more: on the H200 the fp16 upscaler's tail at 540p was
//! two 90 µs transposes and a 45 µs Add (docs/performance.md). The node
//! does the three in one pass over the memory (`nf_depth_to_space` in `src/cuda/tail.cu`).
//!
//! The node reads `X` NHWC `[N, H, W, C·b²]`, optionally `Z` of the same shape and `B`
//! `[C·b²]`, added to `X` (B by channel); it writes `Y` NCHW `[N, C, H·b, W·b]` in ONNX's
//! order for `mode` (`DCR`: channel `(i·b + j)·C + c` of pixel (h, w) goes to
//! `(c, h·b + i, w·b + j)`; `CRD`: channel `c·b² + i·b + j`). Attributes: `blocksize`, `mode`.
//! Where a fused convolution without an activation wrote `X` or `Z` for this node alone, its
//! bias moves to `B`: cuDNN then runs that convolution alone, with its precompiled engines.
//! Where it wrote `X`, the node's one NHWC input, in fp16, and its filters (C·b²) are not a
//! multiple of 64, they are padded with zero filters to the next multiple of 64 if that adds
//! at most a third, and the node reads the first C·b² channels of each pixel (its `channels`
//! attribute): cuDNN runs 64 filters on Hopper's own kernels, 48 on older ones (the
//! upscaler's 64→48 convolution on an H100: 88.0 µs padded against 133.3, the model 2.1 %
//! faster, docs/performance.md).
//! Where the Add's other input is the folded nearest-upsample skip (the 1×1 Conv that repeats
//! the image's channels, `layout::fold_upsample_skip`), the node reads the image itself as `U`
//! (NCHW `[N, C, H, W]`, each value added to its pixel's b × b block) and that Conv goes. An input that a fused convolution
//! wrote is read as it is (its transpose back to NCHW goes where nothing else reads it);
//! any other gets a Transpose to NHWC, which ONNX Runtime's layout optimizer cancels
//! against its own around an NHWC Conv.
//!
//! Exact: the tests run the rewritten model on ONNX Runtime's CPU provider (with the
//! node's CPU kernel) against the original.

use std::collections::HashSet;

use crate::error::Result;
use crate::graph::edit::{CONV_ACT as CONVACT, DEPTH_TO_SPACE as OP, DOMAIN, Rewritten, fresh, transpose};
use crate::graph::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto};

/// How the rewrite's line in a report starts (and how a fallback finds it).
pub(crate) const LINE: &str = "depth-to-space tails";

/// The node that writes `value`, if one does.
fn producer(g: &GraphProto, value: &str) -> Option<usize> {
    g.node.iter().position(|n| n.output.iter().any(|o| o == value))
}

/// How many node inputs read `value` (an `Add(v, v)` reads it twice), and whether it is a
/// graph output.
fn readers(g: &GraphProto, value: &str) -> (usize, bool) {
    let n = g.node.iter().flat_map(|n| &n.input).filter(|i| *i == value).count();
    (n, g.output.iter().any(|o| o.name() == value))
}

/// Whether a convolution of this window keeps the spatial size: stride 1, and pads that add up
/// to the dilated kernel's reach on each axis.
fn keeps_size(kernel: [i64; 2], pads: &[i64], strides: Option<&[i64]>, dilations: Option<&[i64]>) -> bool {
    let pads = if pads.is_empty() { &[0, 0, 0, 0][..] } else { pads };
    pads.len() == 4
        && strides.is_none_or(|s| s.iter().all(|&v| v == 1))
        && (0..2)
            .all(|a| pads[a] + pads[a + 2] == dilations.map_or(1, |d| d.get(a).copied().unwrap_or(1)) * (kernel[a] - 1))
}

/// Where an NCHW value's height and width come from: the value they are followed back to through
/// nodes that keep them (activations, casts, convolutions of stride 1 that pad to size: `Conv`
/// on NCHW values, the fused `ConvAct` on NHWC ones (or NCHW ones it reads directly), and the
/// transposes between the two layouts), with that value's layout (true: NHWC). Two NCHW values
/// of one root and layout have one spatial size, so an Add of them does not broadcast there.
fn spatial_root(g: &GraphProto, value: &str) -> (String, bool) {
    let mut v = value.to_string();
    let mut nhwc = false;
    for _ in 0..g.node.len() {
        let Some(p) = producer(g, &v) else { break };
        let n = &g.node[p];
        let weight =
            |at: usize| g.initializer.iter().find(|t| Some(t.name()) == n.input_at(at)).map(|t| t.dims.clone());
        let window = |kernel: fn(&[i64]) -> [i64; 2]| {
            weight(1).is_some_and(|w| {
                w.len() == 4
                    && keeps_size(kernel(&w), n.ints("pads").unwrap_or(&[]), n.ints("strides"), n.ints("dilations"))
            })
        };
        let default_domain = n.domain.as_deref().is_none_or(str::is_empty);
        // The layout of the node's first input, where the node keeps the spatial size.
        let from = match (default_domain, n.op()) {
            (true, "Relu" | "LeakyRelu" | "PRelu" | "Sigmoid" | "Tanh" | "Identity" | "Cast") => Some(nhwc),
            // NHWC [0, 2, 3, 1] of an NCHW value; NCHW [0, 3, 1, 2] of an NHWC one.
            (true, "Transpose") => match n.ints("perm") {
                Some([0, 2, 3, 1]) if nhwc => Some(false),
                Some([0, 3, 1, 2]) if !nhwc => Some(true),
                _ => None,
            },
            (true, "Conv") if !nhwc && n.string("auto_pad").is_none_or(|a| a == "NOTSET") => {
                window(|w| [w[2], w[3]]).then_some(false)
            }
            // KRSC; its input NHWC, or NCHW where it reads it directly (`input_layout`).
            (false, CONVACT) if nhwc && n.domain.as_deref() == Some(DOMAIN) => {
                window(|w| [w[1], w[2]]).then_some(n.string("input_layout").as_deref() != Some("nchw"))
            }
            _ => None,
        };
        match from {
            Some(layout) if !n.input.is_empty() => {
                nhwc = layout;
                v = n.input[0].clone();
            }
            _ => break,
        }
    }
    (v, nhwc)
}

/// A constant's first dim (a weight's output channels).
fn out_channels(g: &GraphProto, weight: Option<&str>) -> Option<i64> {
    let w = g.initializer.iter().find(|t| Some(t.name()) == weight)?;
    w.dims.first().copied()
}

/// A fused convolution's result as a tail reads it.
struct Fused {
    /// Its NHWC value.
    nhwc: String,
    /// The transpose back to NCHW that wrote the value the tail read.
    back: usize,
    /// The fused node.
    node: usize,
}

/// Where `value` comes from, for the fused node: a fused convolution that wrote it through
/// its transpose back to NCHW, or `value` itself (None); and the output channels of the
/// convolution that wrote it, if one did.
fn source(g: &GraphProto, value: &str) -> (Option<Fused>, Option<i64>) {
    let Some(p) = producer(g, value) else { return (None, None) };
    let n = &g.node[p];
    let default_domain = n.domain.as_deref().is_none_or(str::is_empty);
    if default_domain && n.op() == "Conv" {
        return (None, out_channels(g, n.input_at(1)));
    }
    if default_domain && n.op() == "Transpose" && n.ints("perm") == Some(&[0, 3, 1, 2][..]) {
        let Some(fused) = n.input_at(0).and_then(|x| producer(g, x)) else { return (None, None) };
        let f = &g.node[fused];
        if f.domain.as_deref() == Some(DOMAIN) && f.op() == CONVACT {
            let fused = Fused { nhwc: f.output[0].clone(), back: p, node: fused };
            return (Some(fused), out_channels(g, f.input_at(1)));
        }
    }
    (None, None)
}

/// A constant's values as f32: float32, or float16 (raw or `int32_data`).
fn values(t: &crate::graph::proto::TensorProto) -> Option<Vec<f32>> {
    use crate::graph::proto::data_type;
    match t.dtype() {
        data_type::FLOAT => t.floats().ok(),
        data_type::FLOAT16 if !t.is_external() => {
            let bits: Vec<u16> = match &t.raw_data {
                Some(raw) => raw.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect(),
                None => t.int32_data.iter().map(|&v| v as u16).collect(),
            };
            (bits.len() == t.elements()).then(|| bits.into_iter().map(|b| half::f16::from_bits(b).to_f32()).collect())
        }
        _ => None,
    }
}

/// Whether `value` is the nearest-upsample skip's channel repeat that
/// [`fold_upsample_skip`](crate::graph::fold::fold_upsample_skip) wrote for a DepthToSpace of
/// `block` in `mode`: a plain 1×1 Conv of `u` `[N, C, H, W]` whose 0/1 weight `[C·b², C, 1, 1]`
/// copies channel c to each of its b² channels in the shuffle's order. Returns `u` and the Conv.
fn channel_repeat(g: &GraphProto, value: &str, block: i64, crd: bool) -> Option<(String, usize)> {
    let p = producer(g, value)?;
    let n = &g.node[p];
    let plain = n.domain.as_deref().is_none_or(str::is_empty)
        && n.op() == "Conv"
        && n.input.len() == 2
        && n.int("group").unwrap_or(1) == 1
        && n.ints("strides").is_none_or(|v| v.iter().all(|&x| x == 1))
        && n.ints("dilations").is_none_or(|v| v.iter().all(|&x| x == 1))
        && n.ints("pads").is_none_or(|v| v.iter().all(|&x| x == 0))
        && n.string("auto_pad").is_none_or(|a| a == "NOTSET" || a == "VALID");
    if !plain {
        return None;
    }
    let w = g.initializer.iter().find(|t| Some(t.name()) == n.input_at(1))?;
    let r2 = block * block;
    let [k, c, 1, 1] = w.dims[..] else { return None };
    if k != c * r2 {
        return None;
    }
    let e = values(w)?;
    let source = |row: i64| if crd { row / r2 } else { row % c };
    let repeat =
        (0..k).all(|row| (0..c).all(|ch| e[(row * c + ch) as usize] == if ch == source(row) { 1.0 } else { 0.0 }));
    repeat.then(|| (n.input[0].clone(), p))
}

/// The filters a tail's last convolution (fused node `node`, feeding a tail of `block`) is padded
/// to, and the tail's output channels C: the next multiple of 64 where its weight (KRSC) is
/// fp16 raw data that only it reads, its filters (C·b²) are not a multiple of 64 already, and
/// padding adds at most a third of them (48 → 64, 96 → 128; not 12 → 64).
fn padded_filters(g: &GraphProto, node: usize, block: i64) -> Option<(i64, i64)> {
    use crate::graph::proto::data_type;
    let name = g.node[node].input_at(1)?;
    let w = g.initializer.iter().find(|t| t.name() == name)?;
    let k = *w.dims.first()?;
    let b2 = block * block;
    let padded = u64::try_from(k).ok()?.next_multiple_of(64);
    let padded = i64::try_from(padded).ok()?;
    let alone = readers(g, name) == (1, false) && !g.input.iter().any(|i| i.name() == name);
    let fits = k > 0 && k % b2 == 0 && padded != k && 3 * padded <= 4 * k;
    (fits && w.dims.len() == 4 && w.dtype() == data_type::FLOAT16 && w.raw_data.is_some() && alone)
        .then_some((padded, k / b2))
}

/// One DepthToSpace to rewrite.
struct Tail {
    node: usize,
    /// The Add folded in, if any.
    add: Option<usize>,
    /// The values the fused node adds (one, or the Add's two), as NCHW names.
    inputs: Vec<String>,
    blocksize: i64,
    mode: String,
}

/// Rewrites each DepthToSpace of a model with fused convolutions (its [`CONVACT`] nodes) as
/// an [`OP`] node; a model without either comes back as it was.
///
/// `pad_filters`: a tail's last convolution may be padded to 64 filters ([`padded_filters`]);
/// the context always pads, the tests compare both.
pub(crate) fn fuse_depth_to_space(model: &[u8], pad_filters: bool) -> Result<Rewritten> {
    let mut m = ModelProto::decode_model(model, "being rewritten")?;
    let unchanged = |skipped: Vec<String>| Rewritten { bytes: model.to_vec(), changes: Vec::new(), skipped };
    let Some(g) = m.graph.as_mut() else { return Ok(unchanged(Vec::new())) };
    if !g.node.iter().any(|n| n.domain.as_deref() == Some(DOMAIN) && n.op() == CONVACT) {
        return Ok(unchanged(Vec::new()));
    }
    let mut skipped = Vec::new();
    let mut tails = Vec::new();
    for (i, n) in g.node.iter().enumerate() {
        if n.op() != "DepthToSpace" || n.domain.as_deref().is_some_and(|d| !d.is_empty()) {
            continue;
        }
        let name = if n.name().is_empty() { n.output[0].as_str() } else { n.name() };
        let blocksize = n.int("blocksize").unwrap_or(0);
        let mode = n.string("mode").unwrap_or_else(|| "DCR".into());
        if blocksize < 1 || !(mode == "DCR" || mode == "CRD") || n.input.len() != 1 || n.output.len() != 1 {
            skipped.push(format!("DepthToSpace `{name}`: blocksize {blocksize}, mode {mode}"));
            continue;
        }
        let x = n.input[0].clone();
        // An Add of two convolutions' results with C·b² channels each, read by nothing else,
        // both of one spatial size (one spatial root: no broadcast), added here.
        let add = producer(g, &x).filter(|&a| {
            let an = &g.node[a];
            an.op() == "Add"
                && an.domain.as_deref().is_none_or(str::is_empty)
                && an.input.len() == 2
                && readers(g, &x) == (1, false)
                && {
                    let (ka, kb) = (source(g, &an.input[0]).1, source(g, &an.input[1]).1);
                    ka.is_some() && ka == kb
                }
                && spatial_root(g, &an.input[0]) == spatial_root(g, &an.input[1])
        });
        let inputs = match add {
            Some(a) => g.node[a].input.clone(),
            None => vec![x],
        };
        tails.push(Tail { node: i, add, inputs, blocksize, mode });
    }
    if tails.is_empty() {
        return Ok(unchanged(skipped));
    }

    let mut used = HashSet::new();
    g.names(&mut used);
    let mut drop_nodes: HashSet<usize> = tails.iter().filter_map(|t| t.add).collect();
    let mut replace: Vec<(usize, Vec<NodeProto>)> = Vec::new();
    // Fused nodes whose bias a tail adds instead (their B input goes).
    let mut unbiased: HashSet<usize> = HashSet::new();
    // Fused nodes whose filters are padded, to how many.
    let mut padded: Vec<(usize, i64)> = Vec::new();
    let (mut adds, mut transposes, mut biases, mut skips) = (0usize, 0usize, 0usize, 0usize);
    for t in &tails {
        let d2s = &g.node[t.node];
        let base = if d2s.name().is_empty() { d2s.output[0].clone() } else { d2s.name().to_string() };
        let mut nodes = Vec::new();
        // X, Z (NHWC), B, U (NCHW): the node's inputs.
        let mut nhwc_inputs = Vec::new();
        let (mut bias, mut upsampled) = (None, None);
        // The fused node without an activation that wrote an input for this node alone.
        let mut lone = None;
        for v in &t.inputs {
            if let Some(f) = source(g, v).0 {
                // The fused convolution's NHWC value itself; its transpose back goes if
                // this node was its only reader.
                // (An Add of one value twice reads it twice: gone with the Add all the same.)
                let uses = t.inputs.iter().filter(|i| *i == v).count();
                if readers(g, v) == (uses, false) {
                    drop_nodes.insert(f.back);
                }
                let only = uses == 1 && readers(g, v) == (1, false);
                // A last convolution with no activation: its bias is added here, so that
                // cuDNN runs it alone (its precompiled engines; with the bias the H200 ran
                // the upscaler's 64→48 convolution in 0.159 ms, torch's alone 0.079).
                let node = &g.node[f.node];
                let lone_none =
                    only && readers(g, &f.nhwc) == (1, false) && node.string("activation").as_deref() == Some("none");
                if lone_none
                    && bias.is_none()
                    && let Some(b) = node.input_at(2).filter(|b| !b.is_empty())
                {
                    bias = Some(b.to_string());
                    unbiased.insert(f.node);
                }
                // Without a bias of its own now (moved here, or none).
                let unbiased_now = unbiased.contains(&f.node) || node.input_at(2).is_none_or(str::is_empty);
                if lone_none && unbiased_now {
                    lone = Some(f.node);
                }
                nhwc_inputs.push(f.nhwc);
                continue;
            }
            // The folded nearest-upsample skip: its input is added by block, read as it is (the
            // Conv that repeated its channels goes; C channels read instead of C·b²).
            if upsampled.is_none()
                && t.add.is_some()
                && readers(g, v) == (1, false)
                && let Some((u, conv)) = channel_repeat(g, v, t.blocksize, t.mode == "CRD")
            {
                upsampled = Some(u);
                drop_nodes.insert(conv);
                continue;
            }
            let nhwc = fresh(&mut used, &format!("{v}_nhwc"));
            nodes.push(transpose(fresh(&mut used, &format!("{v}_to_nhwc")), v, &nhwc, [0, 2, 3, 1]));
            transposes += 1;
            nhwc_inputs.push(nhwc);
        }
        // X alone (no Z): its padded channels are skipped by the `channels` attribute.
        let channels = match lone {
            Some(node) if pad_filters && nhwc_inputs.len() == 1 => {
                padded_filters(g, node, t.blocksize).map(|(filters, c)| {
                    padded.push((node, filters));
                    c
                })
            }
            _ => None,
        };
        adds += usize::from(t.add.is_some());
        biases += usize::from(bias.is_some());
        skips += usize::from(upsampled.is_some());
        let mut inputs = nhwc_inputs;
        inputs.resize(2, String::new());
        inputs.push(bias.unwrap_or_default());
        inputs.push(upsampled.unwrap_or_default());
        while inputs.last().is_some_and(String::is_empty) {
            inputs.pop();
        }
        let mut node = NodeProto::new(OP, fresh(&mut used, &format!("{base}_nhwc")), inputs, d2s.output.clone());
        node.domain = Some(DOMAIN.into());
        node.attribute = vec![AttributeProto::int("blocksize", t.blocksize), AttributeProto::string("mode", &t.mode)];
        if let Some(c) = channels {
            node.attribute.push(AttributeProto::int("channels", c));
        }
        nodes.push(node);
        replace.push((t.node, nodes));
    }
    // The padded weights (KRSC: whole filters appended), and their outputs' shapes undeclared.
    for &(node, p) in &padded {
        let name = g.node[node].input_at(1).unwrap_or_default().to_string();
        let output = g.node[node].output[0].clone();
        g.value_info.retain(|v| v.name() != output);
        if let Some(w) = g.initializer.iter_mut().find(|t| t.name() == name)
            && let Some(raw) = w.raw_data.as_mut()
        {
            let per_filter = raw.len() / w.dims[0] as usize;
            raw.resize(per_filter * p as usize, 0);
            w.dims[0] = p;
        }
    }
    let old = std::mem::take(&mut g.node);
    let mut gone: HashSet<String> = HashSet::new();
    let mut orphans: HashSet<String> = HashSet::new();
    for (i, mut n) in old.into_iter().enumerate() {
        if let Some((_, nodes)) = replace.iter_mut().find(|(at, _)| *at == i) {
            g.node.append(nodes);
        } else if drop_nodes.contains(&i) {
            gone.extend(n.output);
            orphans.extend(n.input);
        } else {
            if unbiased.contains(&i) {
                // X and W only (an activation of none has no slope).
                n.input.truncate(2);
            }
            g.node.push(n);
        }
    }
    g.value_info.retain(|v| v.name.as_ref().is_none_or(|n| !gone.contains(n)));
    // The constants only the dropped nodes read (the repeat Conv's weight) go too.
    let read: HashSet<&str> = g.node.iter().flat_map(|n| &n.input).map(String::as_str).collect();
    // (One listed as a graph input too, as IR < 4 models list them, stays.)
    let kept: HashSet<&str> = g.output.iter().chain(&g.input).map(|v| v.name()).collect();
    g.initializer.retain(|t| !orphans.contains(t.name()) || read.contains(t.name()) || kept.contains(t.name()));
    if m.opset(DOMAIN).is_none() {
        m.opset_import.push(OperatorSetIdProto { domain: Some(DOMAIN.into()), version: Some(1) });
    }
    let changes = vec![format!(
        "{LINE}: {} DepthToSpace → {DOMAIN}::{OP} (NHWC in, NCHW out; {adds} with the Add before it, {biases} with the last convolution's bias, {skips} with the upsampled input, {} with its filters padded to 64), {transposes} layout transposes",
        tails.len(),
        padded.len()
    )];
    Ok(Rewritten { bytes: prost::Message::encode_to_vec(&m), changes, skipped })
}

#[cfg(test)]
pub(crate) mod tests;
