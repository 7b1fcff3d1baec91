//! The fused-convolution rewrite (issue 23 §3): each `Conv → PRelu | LeakyRelu | Relu` pair
//! of an image model, and each plain Conv that reads such a pair's result, becomes one
//! [`OP`] node of the [`DOMAIN`] domain, which runs NHWC: the convolution, its bias and
//! the activation in one kernel (cuDNN's runtime fusion on the CUDA backend,
//! `src/ops/conv_act.rs`). ONNX Runtime's CUDA provider fuses none of these in fp16.
//!
//! The node reads `X` NHWC `[N, H, W, C]`, `W` as `[K, R, S, C]` (KRSC, the Conv's weight
//! transposed here once), `B` `[K]` (zeros where the Conv has none) and, for PReLU, the slope
//! `[K]`; it writes `Y` NHWC `[N, H', W', K]`. Attributes: `pads` (top, left, bottom, right),
//! `strides`, `dilations`, `activation` (`none`, `relu`, `leaky_relu`, `prelu`) and `alpha`.
//! A fused node that reads an NCHW value of unaligned channels with a small window (a
//! model's RGB input) reads it as it is (`input_layout` "nchw", X `[N, C, H, W]`, the weight
//! unpadded). Otherwise a Transpose to NHWC goes before the first fused node that reads an
//! NCHW value (its channels padded to [`CHANNEL_ALIGN`] first where they are not), and one
//! back to NCHW after each fused node whose result something else reads (or that is an
//! output), under the value's own name: the rest of the graph is untouched.
//!
//! The rewrite leaves a model it does not apply to as it was (the same bytes) and says why
//! for each Conv it passes over. It is exact: the tests run the rewritten model on ONNX
//! Runtime's CPU provider (with the op's CPU kernel) against the original.

use std::collections::{HashMap, HashSet};

use crate::error::Result;
use crate::graph::edit::{CONV_ACT as OP, DOMAIN, Rewritten, fresh, transpose};
use crate::graph::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, attribute_type, data_type,
};

/// Channels of the fused node's tensors come in multiples of this (cuDNN's runtime-fusion
/// engines need 16-byte aligned channels in fp16): an input with fewer is padded with zero
/// channels on the way in (its weight too, so the result is the same); an output with a
/// count that is not a multiple keeps its Conv as it was.
pub(crate) const CHANNEL_ALIGN: i64 = 8;

/// A fused node whose input is an NCHW value with unaligned channels reads it as it is
/// (attribute `input_layout` "nchw"; neural-frame's direct kernel on CUDA) where its window
/// has at most this many taps (r·s·c): `nf_conv_nchw` keeps them in shared memory.
pub(crate) const DIRECT_MAX_TAPS: i64 = 64;

/// The activation after the convolution and its bias.
#[derive(Debug, Clone, PartialEq)]
enum Act {
    None,
    Relu,
    Leaky(f32),
    /// Per-output-channel slope, as the initializer's raw little-endian bytes (K elements).
    PRelu(Vec<u8>),
}

impl Act {
    fn name(&self) -> &'static str {
        match self {
            Act::None => "none",
            Act::Relu => "relu",
            Act::Leaky(_) => "leaky_relu",
            Act::PRelu(_) => "prelu",
        }
    }
}

/// A Conv the rewrite can take: its attributes and constants.
struct Candidate {
    conv: usize,
    /// The activation node folded in, if any.
    act_node: Option<usize>,
    act: Act,
    x: String,
    /// The value the fused node stands for (the activation's output, or the Conv's).
    y: String,
    /// Element size in bytes (4: float32, 2: float16) and the ONNX type.
    elem: usize,
    dtype: i32,
    /// KCRS dims and raw bytes of the weight; the bias's raw bytes (K elements) if any.
    dims: [i64; 4],
    weight: Vec<u8>,
    bias: Option<Vec<u8>>,
    pads: [i64; 4],
    strides: [i64; 2],
    dilations: [i64; 2],
}

/// A constant's raw little-endian bytes: float32 (raw or `float_data`) or float16 (raw or
/// `int32_data`, which holds each half's bits), with the element size.
fn raw_bytes(t: &TensorProto) -> Option<(usize, Vec<u8>)> {
    if t.is_external() {
        return None;
    }
    let (elem, bytes) = match (t.dtype(), &t.raw_data) {
        (data_type::FLOAT, Some(raw)) => (4, raw.clone()),
        (data_type::FLOAT, None) => (4, t.float_data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        (data_type::FLOAT16, Some(raw)) => (2, raw.clone()),
        (data_type::FLOAT16, None) => (2, t.int32_data.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect()),
        _ => return None,
    };
    (bytes.len() == t.elements() * elem).then_some((elem, bytes))
}

/// Whether `dims` broadcast against an NCHW tensor of K channels varies on the channel axis
/// only: `[K,1,1]`, `[1,K,1,1]`, or all ones (one slope for all).
fn per_channel(dims: &[i64], k: i64) -> bool {
    if dims.len() > 4 || dims.iter().any(|&d| d < 1) {
        return false;
    }
    let mut padded = vec![1i64; 4 - dims.len()];
    padded.extend_from_slice(dims);
    padded[0] == 1 && padded[2] == 1 && padded[3] == 1 && (padded[1] == k || padded[1] == 1)
}

/// The Conv at `i` as a candidate (activation not yet looked at), or why not.
fn conv_candidate(g: &GraphProto, i: usize) -> std::result::Result<Candidate, String> {
    let n = &g.node[i];
    let constant = |name: &str| g.initializer.iter().find(|t| t.name() == name);
    let Some(w) = n.input_at(1).and_then(constant) else {
        return Err("its weight is not a constant".into());
    };
    let Some((elem, weight)) = raw_bytes(w) else {
        return Err("its weight is not float32 or float16 data in the file".into());
    };
    if w.dims.len() != 4 {
        return Err(format!("a {}-D convolution (only 2-D ones fuse)", w.dims.len().saturating_sub(2)));
    }
    let dims = [w.dims[0], w.dims[1], w.dims[2], w.dims[3]];
    if n.int("group").unwrap_or(1) != 1 {
        return Err("a grouped convolution".into());
    }
    if dims[0] % CHANNEL_ALIGN != 0 {
        return Err(format!(
            "{} output channels, not a multiple of {CHANNEL_ALIGN} (cuDNN's fused engines need aligned channels)",
            dims[0]
        ));
    }
    let auto_pad = n.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let pads = match (auto_pad.as_str(), n.ints("pads")) {
        ("VALID", _) | ("NOTSET", None) => [0; 4],
        // ONNX: [top, left, bottom, right].
        ("NOTSET", Some(p)) if p.len() == 4 => [p[0], p[1], p[2], p[3]],
        (mode, _) => return Err(format!("auto_pad {mode}")),
    };
    let pair = |name: &str| match n.ints(name) {
        None => Some([1, 1]),
        Some(v) if v.len() == 2 && v.iter().all(|&x| x >= 1) => Some([v[0], v[1]]),
        Some(_) => None,
    };
    let (Some(strides), Some(dilations)) = (pair("strides"), pair("dilations")) else {
        return Err("strides or dilations that are not two positive values".into());
    };
    if n.ints("kernel_shape").is_some_and(|k| k != [dims[2], dims[3]]) {
        return Err("kernel_shape disagrees with its weight".into());
    }
    let bias = match n.input_at(2) {
        None => None,
        Some(b) => match constant(b).and_then(raw_bytes) {
            Some((e, bytes)) if e == elem && bytes.len() == dims[0] as usize * elem => Some(bytes),
            _ => return Err("its bias is not a constant of K values of the weight's type".into()),
        },
    };
    let Some(x) = n.input_at(0) else { return Err("no input".into()) };
    Ok(Candidate {
        conv: i,
        act_node: None,
        act: Act::None,
        x: x.to_string(),
        y: n.output[0].clone(),
        elem,
        dtype: w.dtype(),
        dims,
        weight,
        bias,
        pads,
        strides,
        dilations,
    })
}

/// The activation node that alone reads `c`'s output, if it can be folded in.
fn activation(g: &GraphProto, c: &Candidate) -> Option<(usize, Act)> {
    let out = &g.node[c.conv].output[0];
    if g.output.iter().any(|v| v.name() == out) {
        return None;
    }
    let readers: Vec<usize> = (0..g.node.len()).filter(|&j| g.node[j].input.iter().any(|i| i == out)).collect();
    let [j] = readers[..] else { return None };
    let a = &g.node[j];
    if a.domain.as_deref().is_some_and(|d| !d.is_empty()) || a.input.first() != Some(out) {
        return None;
    }
    let act = match a.op() {
        "Relu" => Act::Relu,
        "LeakyRelu" => Act::Leaky(a.attr("alpha").and_then(|x| x.f).unwrap_or(0.01)),
        "PRelu" => {
            let slope = g.initializer.iter().find(|t| Some(t.name()) == a.input_at(1))?;
            let (elem, bytes) = raw_bytes(slope)?;
            if elem != c.elem || !per_channel(&slope.dims, c.dims[0]) {
                return None;
            }
            let k = c.dims[0] as usize;
            // One slope for all channels is repeated K times.
            let bytes = if bytes.len() == elem { bytes.repeat(k) } else { bytes };
            Act::PRelu(bytes)
        }
        _ => return None,
    };
    Some((j, act))
}

/// KCRS raw bytes as KRSC with `padded` ≥ C channels (the extra ones zero).
fn krsc(weight: &[u8], [k, c, r, s]: [i64; 4], padded: i64, elem: usize) -> Vec<u8> {
    let (k, c, r, s) = (k as usize, c as usize, r as usize, s as usize);
    let cp = padded as usize;
    let mut out = vec![0u8; k * r * s * cp * elem];
    for ki in 0..k {
        for ci in 0..c {
            for ri in 0..r {
                for si in 0..s {
                    let src = ((ki * c + ci) * r + ri) * s + si;
                    let dst = ((ki * r + ri) * s + si) * cp + ci;
                    out[dst * elem..(dst + 1) * elem].copy_from_slice(&weight[src * elem..(src + 1) * elem]);
                }
            }
        }
    }
    out
}

fn raw_tensor(name: &str, dims: Vec<i64>, dtype: i32, raw: Vec<u8>) -> TensorProto {
    TensorProto { name: Some(name.into()), dims, data_type: Some(dtype), raw_data: Some(raw), ..Default::default() }
}

/// Replaces Conv + activation pairs (and the plain Convs that read them) by [`OP`] nodes.
pub(crate) fn fuse_conv_act(model: &[u8]) -> Result<Rewritten> {
    let mut m = ModelProto::decode_model(model, "being rewritten")?;
    let unchanged = |changes: Vec<String>, skipped| Rewritten { bytes: model.to_vec(), changes, skipped };
    let Some(g) = m.graph.as_mut() else { return Ok(unchanged(Vec::new(), Vec::new())) };
    if g.node.iter().any(|n| n.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty())) {
        return Ok(unchanged(Vec::new(), vec!["the model has subgraphs".into()]));
    }
    let mut skipped = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    for i in 0..g.node.len() {
        let n = &g.node[i];
        if n.op() != "Conv" || n.domain.as_deref().is_some_and(|d| !d.is_empty()) {
            continue;
        }
        match conv_candidate(g, i) {
            Ok(c) => candidates.push(c),
            Err(why) => skipped.push(format!("Conv `{}`: {why}", n.name())),
        }
    }
    // Pairs first; then plain Convs that read a pair's result (so a chain stays NHWC).
    for c in candidates.iter_mut() {
        if let Some((j, act)) = activation(g, c) {
            c.act_node = Some(j);
            c.y = g.node[j].output[0].clone();
            c.act = act;
        }
    }
    let paired: HashSet<String> = candidates.iter().filter(|c| c.act_node.is_some()).map(|c| c.y.clone()).collect();
    if paired.is_empty() {
        return Ok(unchanged(Vec::new(), skipped));
    }
    candidates.retain(|c| c.act_node.is_some() || paired.contains(&c.x));
    let by_conv: HashMap<usize, usize> = candidates.iter().enumerate().map(|(k, c)| (c.conv, k)).collect();
    let folded: HashSet<usize> = candidates.iter().filter_map(|c| c.act_node).collect();
    let fused_inputs: HashSet<&str> = candidates.iter().map(|c| c.x.as_str()).collect();
    // Which fused results something other than a fused node reads (or the graph outputs).
    let mut wanted_nchw: HashSet<String> = g.output.iter().map(|v| v.name().to_string()).collect();
    for (i, n) in g.node.iter().enumerate() {
        if !by_conv.contains_key(&i) && !folded.contains(&i) {
            wanted_nchw.extend(n.input.iter().cloned());
        }
    }

    let mut used = HashSet::new();
    g.names(&mut used);
    let mut nhwc: HashMap<String, String> = HashMap::new();
    let mut nodes = Vec::with_capacity(g.node.len() + 4);
    let mut new_inits = Vec::new();
    let (mut transposes, mut counts) = (0usize, HashMap::<&'static str, usize>::new());
    let (mut padded_inputs, mut direct_inputs) = (0usize, 0usize);
    let old = std::mem::take(&mut g.node);
    for (i, n) in old.iter().enumerate() {
        if folded.contains(&i) {
            continue;
        }
        let Some(&k) = by_conv.get(&i) else {
            nodes.push(n.clone());
            continue;
        };
        let c = &candidates[k];
        let base = if n.name().is_empty() { c.y.clone() } else { n.name().to_string() };
        let [kk, cin, r, s] = c.dims;
        let aligned = (cin + CHANNEL_ALIGN - 1) / CHANNEL_ALIGN * CHANNEL_ALIGN;
        // An NCHW value with unaligned channels and a small window (a model's RGB input) is read
        // as it is, by the direct kernel: no padding, no transpose.
        let direct = !nhwc.contains_key(&c.x) && aligned != cin && cin * r * s <= DIRECT_MAX_TAPS;
        // The fused node's weight's channels: the input's as they are, or padded to aligned.
        let weight_c = if direct { cin } else { aligned };
        let x = match nhwc.get(&c.x) {
            Some(x) => x.clone(),
            None if direct => {
                direct_inputs += 1;
                c.x.clone()
            }
            None => {
                let mut source = c.x.clone();
                if weight_c != c.dims[1] {
                    // Zero channels up to the alignment (a fused result's channels are aligned
                    // already), by a 1×1 convolution with an identity-and-zeros weight on the NCHW
                    // value: exact for finite x (x·1 and sums of x·0; fp32 on CUDA may round x to
                    // TF32), and the CUDA provider runs it NHWC, its
                    // transpose back cancelling the one below. (A Pad node did the same in 0.36 ms
                    // at 540p on the H200, ONNX Runtime's generic pad kernel: a seventh of the model.)
                    let wide = fresh(&mut used, &format!("{}_padded", c.x));
                    let name = fresh(&mut used, &format!("{}_pad_channels", c.x));
                    let w = fresh(&mut used, &format!("{name}_weight"));
                    let one: &[u8] = if c.elem == 2 { &[0x00, 0x3c] } else { &[0x00, 0x00, 0x80, 0x3f] };
                    let (cin, cout) = (c.dims[1] as usize, weight_c as usize);
                    let mut weight = vec![0u8; cout * cin * c.elem];
                    for ch in 0..cin {
                        let at = (ch * cin + ch) * c.elem;
                        weight[at..at + c.elem].copy_from_slice(one);
                    }
                    new_inits.push(raw_tensor(&w, vec![weight_c, c.dims[1], 1, 1], c.dtype, weight));
                    let mut conv = NodeProto::new("Conv", name, vec![c.x.clone(), w], vec![wide.clone()]);
                    conv.attribute.push(AttributeProto::ints("kernel_shape", vec![1, 1]));
                    nodes.push(conv);
                    padded_inputs += 1;
                    source = wide;
                }
                let x = fresh(&mut used, &format!("{}_nhwc", c.x));
                nodes.push(transpose(fresh(&mut used, &format!("{}_to_nhwc", c.x)), &source, &x, [0, 2, 3, 1]));
                transposes += 1;
                nhwc.insert(c.x.clone(), x.clone());
                x
            }
        };
        let w = fresh(&mut used, &format!("{base}_weight_krsc"));
        new_inits.push(raw_tensor(&w, vec![kk, r, s, weight_c], c.dtype, krsc(&c.weight, c.dims, weight_c, c.elem)));
        let b = fresh(&mut used, &format!("{base}_bias"));
        let bias = c.bias.clone().unwrap_or_else(|| vec![0u8; kk as usize * c.elem]);
        new_inits.push(raw_tensor(&b, vec![kk], c.dtype, bias));
        let mut inputs = vec![x, w, b];
        if let Act::PRelu(slope) = &c.act {
            let sl = fresh(&mut used, &format!("{base}_slope"));
            new_inits.push(raw_tensor(&sl, vec![kk], c.dtype, slope.clone()));
            inputs.push(sl);
        }
        let y = fresh(&mut used, &format!("{}_nhwc", c.y));
        let mut node = NodeProto::new(OP, fresh(&mut used, &format!("{base}_fused")), inputs, vec![y.clone()]);
        node.domain = Some(DOMAIN.into());
        node.attribute = vec![
            AttributeProto::ints("pads", c.pads.to_vec()),
            AttributeProto::ints("strides", c.strides.to_vec()),
            AttributeProto::ints("dilations", c.dilations.to_vec()),
            AttributeProto::string("activation", c.act.name()),
            AttributeProto {
                name: Some("alpha".into()),
                f: Some(if let Act::Leaky(a) = c.act { a } else { 0.0 }),
                r#type: Some(attribute_type::FLOAT),
                ..Default::default()
            },
        ];
        if direct {
            node.attribute.push(AttributeProto::string("input_layout", "nchw"));
        }
        nodes.push(node);
        *counts.entry(c.act.name()).or_default() += 1;
        nhwc.insert(c.y.clone(), y.clone());
        if wanted_nchw.contains(&c.y) {
            nodes.push(transpose(fresh(&mut used, &format!("{}_to_nchw", c.y)), &y, &c.y, [0, 3, 1, 2]));
            transposes += 1;
        }
    }
    g.node = nodes;
    // The fused Convs' intermediate values and the constants only they read go.
    let gone: HashSet<String> =
        candidates.iter().filter(|c| c.act_node.is_some()).map(|c| old[c.conv].output[0].clone()).collect();
    g.value_info.retain(|v| v.name.as_ref().is_none_or(|n| !gone.contains(n)));
    let read: HashSet<String> = g.node.iter().flat_map(|n| n.input.iter().cloned()).collect();
    let outputs: HashSet<&str> = g.output.iter().map(|v| v.name()).collect();
    g.initializer.retain(|t| read.contains(t.name()) || outputs.contains(t.name()) || fused_inputs.contains(t.name()));
    g.initializer.extend(new_inits);
    g.input.retain(|v| {
        // Initializers listed as inputs (IR < 4) that are gone.
        let name = v.name();
        read.contains(name) || outputs.contains(name) || !old.iter().any(|n| n.input.iter().any(|i| i == name))
    });
    if m.opset(DOMAIN).is_none() {
        m.opset_import.push(OperatorSetIdProto { domain: Some(DOMAIN.into()), version: Some(1) });
    }
    let mut kinds: Vec<String> = counts.iter().map(|(a, n)| format!("{n} with {a}")).collect();
    kinds.sort();
    let mut input_notes = if padded_inputs > 0 {
        format!(", {padded_inputs} input(s) padded to {CHANNEL_ALIGN}-channel multiples")
    } else {
        String::new()
    };
    if direct_inputs > 0 {
        input_notes.push_str(&format!(", {direct_inputs} reading an NCHW input of few channels directly"));
    }
    let changes = vec![format!(
        "{} convolutions with their bias and activation → fused {OP} nodes running NHWC ({}), {transposes} layout transposes{input_notes}",
        candidates.len(),
        kinds.join(", ")
    )];
    Ok(Rewritten { bytes: prost::Message::encode_to_vec(&m), changes, skipped })
}

#[cfg(test)]
pub(crate) mod tests;
