//! float32 → float16 conversion of an ONNX model, the way onnxconverter-common's
//! `float16.convert_float_to_float16` (microsoft/onnxconverter-common,
//! `onnxconverter_common/float16.py`) does it, without Python:
//!
//! - float32 initializers and the tensors of `Constant` nodes (and any other tensor
//!   attribute of a converted node) become float16, their values first clipped like the
//!   reference's `convert_np_to_float16`: positive values below `min_positive_val` (1e-7)
//!   become 1e-7, finite values beyond `max_finite_val` (1e4) become ±1e4 (the same for
//!   negative values); 0, NaN and ±inf stay;
//! - the graph's float inputs, outputs and `value_info` become float16 (or stay float32
//!   with Cast nodes at the boundary, `keep_io_types`); subgraphs (`If`, `Loop`, `Scan`)
//!   are converted too, their inputs and outputs becoming float16;
//! - `Cast(to = float)` becomes `Cast(to = float16)`, and so do the `dtype` attributes of
//!   the generators (`RandomNormal`, `EyeLike`, …), as the reference's earlier versions did;
//! - operators in the block list ([`DEFAULT_OP_BLOCK_LIST`], the reference's, plus the few
//!   whose schema has no float16 at the model's opset) and nodes named in the node block
//!   list stay float32, with `Cast` nodes before their float16 inputs and after their
//!   outputs; the constants only they read stay float32 (the reference's
//!   `initializer_block_list`), and so do inputs that the schema wants as float32 in any
//!   case (`Resize`'s roi and scales: the reference's `KEEP_ORIGINAL_DATA_TYPE_LIST`).
//!
//! Where the reference relies on ONNX shape inference to know which values are float32,
//! this module follows the operator schemas' type rules ([`proto::elem_types`]), with
//! the model's `value_info` for what they cannot tell. Each Cast is made once per value
//! and precision, right after the value's producer, so the node order stays topological
//! and no Cast pair needs removing afterwards (the reference's
//! `remove_unnecessary_cast_node`); the names of the graph's outputs never change.
//!
//! [`compute_share`](crate::graph::share::compute_share) (share.rs) estimates how much of a model's work its convolutions and matrix
//! products do, for a precision mode that converts only models where float16 pays.

use std::collections::{BTreeMap, HashMap, HashSet};

use half::f16;
use prost::Message;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::graph::proto::{
    self, AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto,
    data_type::{FLOAT, FLOAT16},
};

/// The reference's `DEFAULT_OP_BLOCK_LIST`: operators that stay float32 (split at spaces).
pub(crate) const DEFAULT_OP_BLOCK_LIST: &str = "ArrayFeatureExtractor Binarizer CastMap CategoryMapper \
    DictVectorizer FeatureVectorizer Imputer LabelEncoder LinearClassifier LinearRegressor Normalizer OneHotEncoder \
    RandomUniformLike SVMClassifier SVMRegressor Scaler TreeEnsembleClassifier TreeEnsembleRegressor ZipMap \
    NonMaxSuppression TopK RoiAlign Resize Range CumSum Min Max Upsample";

/// How to convert (the reference's keyword arguments, with its defaults).
#[derive(Debug, Clone)]
pub(crate) struct Fp16Options {
    /// Positive values below this become this (negative ones likewise): 1e-7.
    pub(crate) min_positive_val: f32,
    /// Finite values beyond ± this become ± this: 1e4.
    pub(crate) max_finite_val: f32,
    /// Keep the graph's float inputs and outputs float32, with Casts at the boundary.
    pub(crate) keep_io_types: bool,
    /// Operators that stay float32.
    pub(crate) op_block_list: Vec<String>,
    /// Nodes (by name) that stay float32.
    pub(crate) node_block_list: Vec<String>,
}

impl Default for Fp16Options {
    fn default() -> Self {
        Self {
            min_positive_val: 1e-7,
            max_finite_val: 1e4,
            keep_io_types: false,
            op_block_list: DEFAULT_OP_BLOCK_LIST.split_whitespace().map(String::from).collect(),
            node_block_list: Vec::new(),
        }
    }
}

/// A converted model: its bytes and what the conversion did.
#[derive(Debug, Clone)]
pub(crate) struct Fp16Model {
    /// The float16 model, ready for a session.
    pub(crate) bytes: Vec<u8>,
    /// What changed and what stayed float32.
    pub(crate) report: Fp16Report,
}

/// What a conversion did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Fp16Report {
    /// Float32 tensors (initializers, Constant values, tensor attributes) now float16.
    pub(crate) tensors_converted: usize,
    /// Their values, in all.
    pub(crate) elements_converted: usize,
    /// Float32 constants left float32 because only float32 inputs read them.
    pub(crate) tensors_kept_fp32: Vec<String>,
    /// Graph inputs, outputs and `value_info` entries retyped float → float16.
    pub(crate) values_retyped: usize,
    /// `Cast(to = float)` and float `dtype` attributes now float16.
    pub(crate) casts_retargeted: usize,
    /// Cast nodes added (and float32 copies of constants).
    pub(crate) casts_inserted: usize,
    /// Nodes (or inputs of nodes) kept float32, and why.
    pub(crate) kept_fp32: Vec<KeptFp32>,
    /// Tensors with values changed by the clip before rounding.
    pub(crate) clamped: Vec<Clamped>,
}

impl Fp16Report {
    /// Values beyond ±`max_finite_val`, clipped to it, over all tensors.
    #[cfg(test)]
    pub(crate) fn values_clipped_large(&self) -> usize {
        self.clamped.iter().map(|c| c.large).sum()
    }
}

/// A node (or one of its inputs) left float32.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KeptFp32 {
    /// The node's name ("" when it has none).
    pub(crate) node: String,
    /// Its operator.
    pub(crate) op: String,
    /// Why.
    pub(crate) reason: String,
}

/// A tensor whose values the clip changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Clamped {
    /// The tensor's name.
    pub(crate) tensor: String,
    /// Values beyond ±`max_finite_val`, clipped to it.
    pub(crate) large: usize,
    /// Non-zero values nearer 0 than `min_positive_val`, raised to it.
    pub(crate) small: usize,
    /// The largest |value| before the clip.
    pub(crate) largest: f32,
}

/// Converts the float32 model `model` (its bytes) to float16 with `options`.
pub(crate) fn to_fp16(model: &[u8], options: &Fp16Options) -> Result<Fp16Model> {
    let mut m = ModelProto::decode_model(model, "being converted to float16")?;
    let report = convert_model(&mut m, options)?;
    Ok(Fp16Model { bytes: m.encode_to_vec(), report })
}

fn refuse(message: String) -> Error {
    Error::InvalidArgument(format!("the float16 conversion: {message}"))
}

/// Converts a decoded model in place (see the module's documentation).
pub(crate) fn convert_model(m: &mut ModelProto, options: &Fp16Options) -> Result<Fp16Report> {
    if !m.functions.is_empty() {
        return Err(refuse("the model has model-local functions, which are not converted".into()));
    }
    if !m.training_info.is_empty() {
        return Err(refuse("the model has training information, which is not converted".into()));
    }
    let opset = m.opset("").unwrap_or(1);
    let Some(graph) = m.graph.as_mut() else { return Err(refuse("the model has no graph".into())) };
    if let Some(why) = already_fp16(graph) {
        return Err(refuse(format!("the model is already float16 ({why})")));
    }
    let mut used = HashSet::new();
    graph.names(&mut used);
    let mut cx = Cx { opts: options, opset, used, report: Fp16Report::default() };
    convert_graph(graph, &HashMap::new(), &HashMap::new(), true, &mut cx)?;
    Ok(cx.report)
}

/// The reference's `check_if_fp16_ready`: a float16 graph value, initializer or Cast.
fn already_fp16(g: &GraphProto) -> Option<String> {
    if let Some(v) = g.input.iter().chain(&g.output).chain(&g.value_info).find(|v| v.elem_type() == Some(FLOAT16)) {
        return Some(format!("`{}` is float16", v.name.as_deref().unwrap_or("")));
    }
    if let Some(t) = g.initializer.iter().find(|t| t.dtype() == FLOAT16) {
        return Some(format!("initializer `{}` is float16", t.name.as_deref().unwrap_or("")));
    }
    let cast16 = |n: &&NodeProto| n.op() == "Cast" && n.int("to") == Some(FLOAT16 as i64);
    g.node.iter().find(cast16).map(|n| format!("node `{}` casts to float16", n.name()))
}

/// A precision after the conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum P {
    Half,
    Single,
}

impl P {
    fn idx(self) -> usize {
        self as usize
    }
    fn dtype(self) -> i32 {
        [FLOAT16, FLOAT][self.idx()]
    }
    fn suffix(self) -> &'static str {
        ["fp16", "fp32"][self.idx()]
    }
    fn other(self) -> P {
        [P::Single, P::Half][self.idx()]
    }
}

/// The names of a float value's versions, by precision ([`P::idx`]).
type Versions = [Option<String>; 2];

struct Cx<'a> {
    opts: &'a Fp16Options,
    opset: i64,
    used: HashSet<String>,
    report: Fp16Report,
}

impl Cx<'_> {
    /// `base`, or `base_1`, `base_2`, … where it is taken.
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 0;
        while self.used.contains(&name) {
            k += 1;
            name = format!("{base}_{k}");
        }
        self.used.insert(name.clone());
        name
    }

    /// Why `node` stays float32, if it does.
    fn blocked(&self, node: &NodeProto) -> Option<String> {
        let op = node.op();
        if self.opts.node_block_list.iter().any(|n| n == node.name()) {
            return Some("named in the node block list".into());
        }
        if self.opts.op_block_list.iter().any(|o| o == op) {
            return Some(format!("{op} is in the op block list"));
        }
        match op {
            "DynamicQuantizeLinear" => Some(format!("{op} takes float32 only")),
            "QuantizeLinear" | "DequantizeLinear" if self.opset < 19 => {
                Some(format!("{op} has no float16 before opset 19 (the model's is {})", self.opset))
            }
            _ => None,
        }
    }

    /// The precision input `slot` of `node` reads (for a float value).
    fn input_precision(&self, node: &NodeProto, slot: usize, blocked: bool) -> P {
        if blocked || float32_inputs(node.op(), self.opset).contains(&slot) { P::Single } else { P::Half }
    }

    /// Converts a float32 tensor to float16 in place, clipping like the reference.
    fn convert_tensor(&mut self, t: &mut TensorProto) -> Result<()> {
        let values = t.floats()?;
        let (lo, hi) = (self.opts.min_positive_val, self.opts.max_finite_val);
        let (mut small, mut large, mut largest) = (0, 0, 0f32);
        let halves: Vec<u16> = values
            .iter()
            .map(|&v| {
                largest = largest.max(if v.is_finite() { v.abs() } else { 0.0 });
                let c = if v > 0.0 && v < lo {
                    small += 1;
                    lo
                } else if v < 0.0 && v > -lo {
                    small += 1;
                    -lo
                } else if v > hi && v < f32::INFINITY {
                    large += 1;
                    hi
                } else if v < -hi && v > f32::NEG_INFINITY {
                    large += 1;
                    -hi
                } else {
                    v
                };
                f16::from_f32(c).to_bits()
            })
            .collect();
        if small + large > 0 {
            let tensor = t.name.clone().unwrap_or_default();
            self.report.clamped.push(Clamped { tensor, large, small, largest });
        }
        t.data_type = Some(FLOAT16);
        if t.raw_data.is_some() {
            t.raw_data = Some(halves.iter().flat_map(|h| h.to_le_bytes()).collect());
        } else {
            t.float_data.clear();
            t.int32_data = halves.iter().map(|&h| h as i32).collect();
        }
        self.report.tensors_converted += 1;
        self.report.elements_converted += values.len();
        Ok(())
    }

    /// A converted node's attributes: Cast targets, generators' dtypes, tensors.
    fn retarget(&mut self, node: &mut NodeProto) -> Result<()> {
        let op = node.op().to_string();
        let dtype_attr = match op.as_str() {
            "Cast" => Some(("to", false)),
            "RandomNormal" | "RandomUniform" => Some(("dtype", true)),
            "RandomNormalLike" | "RandomUniformLike" | "EyeLike" | "Bernoulli" => Some(("dtype", false)),
            "HannWindow" | "HammingWindow" | "BlackmanWindow" | "MelWeightMatrix" => Some(("output_datatype", true)),
            _ => None,
        };
        if let Some((name, float_by_default)) = dtype_attr {
            match node.attr_mut(name) {
                Some(a) if a.i == Some(FLOAT as i64) => a.i = Some(FLOAT16 as i64),
                None if float_by_default => node.attribute.push(AttributeProto::int(name, FLOAT16 as i64)),
                _ => return Ok(()),
            }
            self.report.casts_retargeted += 1;
            return Ok(());
        }
        if op == "ConstantOfShape" && node.attr("value").is_none() {
            let zero = TensorProto {
                dims: vec![1],
                data_type: Some(FLOAT16),
                raw_data: Some(vec![0, 0]),
                ..Default::default()
            };
            node.attribute.push(AttributeProto::tensor("value", zero));
            self.report.casts_retargeted += 1;
        }
        if op == "Constant" {
            let scalar = node.attr("value_float").and_then(|a| a.f).map(|f| (vec![], vec![f]));
            let list = node.attr("value_floats").map(|a| (vec![a.floats.len() as i64], a.floats.clone()));
            if let Some((dims, values)) = scalar.or(list) {
                let name = node.output.first().cloned().unwrap_or_default();
                node.attribute = vec![AttributeProto::tensor("value", TensorProto::from_floats(&name, dims, &values))];
            }
        }
        for a in &mut node.attribute {
            let sparse =
                a.sparse_tensor.iter_mut().chain(a.sparse_tensors.iter_mut()).filter_map(|s| s.values.as_mut());
            for t in a.t.iter_mut().chain(a.tensors.iter_mut()).chain(sparse) {
                if t.dtype() == FLOAT {
                    self.convert_tensor(t)?;
                }
            }
        }
        Ok(())
    }
}

/// The inputs of `op` that the schema types as float32 whatever the data's type: they stay
/// float32 when the node is converted (the reference's `KEEP_ORIGINAL_DATA_TYPE_LIST`
/// has Resize's scales; its roi, of a type of its own, is kept too, as ONNX Runtime's
/// kernels read it as float).
fn float32_inputs(op: &str, opset: i64) -> &'static [usize] {
    match op {
        "Resize" if opset >= 11 => &[1, 2],
        "Resize" | "Upsample" => &[1],
        _ => &[],
    }
}

/// The precision output `i` of a converted `node` has.
fn output_precision(node: &NodeProto, i: usize) -> P {
    // LayerNormalization's mean and inverse deviation are of the stash type, float32 by default.
    let stash32 = node.int("stash_type").is_none_or(|t| t == FLOAT as i64);
    if node.op() == "LayerNormalization" && i > 0 && stash32 { P::Single } else { P::Half }
}

/// Converts one graph: `outer_types` and `outer` are the enclosing graphs' element types
/// and float versions (empty at the top).
fn convert_graph(
    g: &mut GraphProto,
    outer_types: &HashMap<String, i32>,
    outer: &HashMap<String, Versions>,
    top: bool,
    cx: &mut Cx,
) -> Result<()> {
    let types = proto::elem_types(g, outer_types)?;
    let float = |n: &str| types.get(n) == Some(&FLOAT);
    if let Some(t) = g.sparse_initializer.iter().find_map(|s| s.values.as_ref()).filter(|t| t.dtype() == FLOAT) {
        return Err(refuse(format!("sparse initializer `{}` is not converted", t.name.as_deref().unwrap_or(""))));
    }
    let io = if top && cx.opts.keep_io_types { P::Single } else { P::Half };
    let blocked: Vec<Option<String>> = g.node.iter().map(|n| cx.blocked(n)).collect();
    for (node, why) in g.node.iter().zip(&blocked) {
        if why.is_some() && node.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty()) {
            return Err(refuse(format!("node `{}` ({}) stays float32 but has subgraphs", node.name(), node.op())));
        }
    }

    // Which precisions each float value is read in.
    let mut need: BTreeMap<String, [bool; 2]> = BTreeMap::new();
    for (node, why) in g.node.iter().zip(&blocked) {
        for (slot, name) in node.input.iter().enumerate().filter(|(_, n)| float(n)) {
            need.entry(name.clone()).or_default()[cx.input_precision(node, slot, why.is_some()).idx()] = true;
            if why.is_none() && float32_inputs(node.op(), cx.opset).contains(&slot) {
                let reason = format!("input {slot} (`{name}`) of {} stays float32 (its schema's type)", node.op());
                cx.report.kept_fp32.push(KeptFp32 { node: node.name().into(), op: node.op().into(), reason });
            }
        }
    }
    let outputs: Vec<String> = g.output.iter().filter_map(|v| v.name.clone()).collect();
    for o in outputs.iter().filter(|o| float(o)) {
        need.entry(o.clone()).or_default()[io.idx()] = true;
    }

    // Where each of this graph's float values is made, and in which precision.
    let inputs: HashSet<&str> = g.input.iter().filter_map(|v| v.name.as_deref()).collect();
    let constant_home = |name: &str| {
        if outputs.iter().any(|o| o == name) {
            io
        } else if need.get(name) == Some(&[false, true]) {
            P::Single
        } else {
            P::Half
        }
    };
    let mut home: HashMap<String, P> = HashMap::new();
    for name in inputs.iter().filter(|n| float(n)) {
        home.insert(name.to_string(), io);
    }
    for t in &g.initializer {
        let name = t.name.as_deref().unwrap_or("");
        if float(name) && !inputs.contains(name) {
            home.insert(name.into(), constant_home(name));
        }
    }
    let mut producer: HashMap<String, usize> = HashMap::new();
    for (j, (node, why)) in g.node.iter().zip(&blocked).enumerate() {
        for (i, out) in node.output.iter().enumerate().filter(|(_, o)| float(o)) {
            producer.insert(out.clone(), j);
            let p = match (why, node.op()) {
                (Some(_), _) => P::Single,
                (None, "Constant") => constant_home(out),
                (None, _) => output_precision(node, i),
            };
            home.insert(out.clone(), p);
        }
    }
    for (node, why) in g.node.iter().zip(&blocked) {
        if let Some(reason) = why {
            cx.report.kept_fp32.push(KeptFp32 {
                node: node.name().into(),
                op: node.op().into(),
                reason: reason.clone(),
            });
        }
    }
    let constants = g.node.iter().filter(|n| n.op() == "Constant").filter_map(|n| n.output.first());
    for name in
        g.initializer.iter().map(|t| t.name()).filter(|n| !inputs.contains(n)).chain(constants.map(String::as_str))
    {
        if home.get(name) == Some(&P::Single) {
            cx.report.tensors_kept_fp32.push(name.into());
        }
    }

    // The versions: each value's own, then the graph outputs' and the missing ones.
    let mut ver: HashMap<String, Versions> = outer.clone();
    for (name, &p) in &home {
        let mut v: Versions = Default::default();
        v[p.idx()] = Some(name.clone());
        ver.insert(name.clone(), v);
    }
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut created: Vec<(String, P, String)> = Vec::new();
    if top {
        for o in outputs.iter().filter(|o| float(o)) {
            let h = *home.get(o.as_str()).ok_or_else(|| Error::Internal(format!("`{o}` is made nowhere")))?;
            if h != io {
                // The producer's output gets a new name; a Cast makes the output in the I/O precision.
                let fresh = cx.fresh(&format!("{o}_{}", h.suffix()));
                let v = ver.get_mut(o.as_str()).ok_or_else(|| Error::Internal(format!("no version of `{o}`")))?;
                v[h.idx()] = Some(fresh.clone());
                v[io.idx()] = Some(o.clone());
                renamed.insert(o.clone(), fresh);
                created.push((o.clone(), io, o.clone()));
            }
        }
    }
    for (name, wanted) in &need {
        for p in [P::Half, P::Single].into_iter().filter(|p| wanted[p.idx()]) {
            let v = ver.get_mut(name).ok_or_else(|| Error::Internal(format!("no version of float `{name}`")))?;
            if v[p.idx()].is_none() {
                let fresh = cx.fresh(&format!("{name}_{}", p.suffix()));
                v[p.idx()] = Some(fresh.clone());
                created.push((name.clone(), p, fresh));
            }
        }
    }

    // Where each new version is made.
    let mut after: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    let mut prelude = Vec::new();
    let mut extra_initializers = Vec::new();
    for (name, p, fresh) in &created {
        let source = ver[name][p.other().idx()].clone().ok_or_else(|| Error::Internal(format!("`{name}` unmade")))?;
        let node_name = cx.fresh(&format!("{fresh}_cast"));
        let cast = || {
            let mut c = NodeProto::new("Cast", node_name.clone(), vec![source.clone()], vec![fresh.clone()]);
            c.attribute.push(AttributeProto::int("to", p.dtype() as i64));
            c
        };
        if let Some(&j) = producer.get(name) {
            let made = if g.node[j].op() == "Constant" && blocked[j].is_none() {
                // A constant's other precision is another constant, from the original value.
                let mut c = g.node[j].clone();
                c.output = vec![fresh.clone()];
                c.name = Some(node_name.clone());
                if *p == P::Half {
                    cx.retarget(&mut c)?;
                }
                c
            } else {
                cx.report.casts_inserted += 1;
                cast()
            };
            after.entry(j).or_default().push(made);
        } else if let Some(t) = g.initializer.iter().find(|t| t.name.as_deref() == Some(name)) {
            let mut t = t.clone();
            t.name = Some(fresh.clone());
            if *p == P::Half {
                cx.convert_tensor(&mut t)?;
            }
            extra_initializers.push(t);
        } else {
            cx.report.casts_inserted += 1;
            prelude.push(cast());
        }
    }

    // The nodes, in order, each followed by the versions made from its outputs.
    let old = std::mem::take(&mut g.node);
    let mut nodes = prelude;
    for (j, mut node) in old.into_iter().enumerate() {
        for slot in 0..node.input.len() {
            if float(&node.input[slot]) {
                let p = cx.input_precision(&node, slot, blocked[j].is_some());
                let name = &node.input[slot];
                let v = ver[name][p.idx()].clone();
                node.input[slot] = v.ok_or_else(|| Error::Internal(format!("`{name}` has no version for a node")))?;
            }
        }
        for out in node.output.iter_mut() {
            if let Some(r) = renamed.get(out) {
                *out = r.clone();
            }
        }
        let keep32 = node.op() == "Constant" && node.output.first().is_some_and(|o| home.get(o) == Some(&P::Single));
        if blocked[j].is_none() && !keep32 {
            cx.retarget(&mut node)?;
            for a in &mut node.attribute {
                for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                    convert_graph(sub, &types, &ver, false, cx)?;
                }
            }
        }
        nodes.push(node);
        nodes.extend(after.remove(&j).unwrap_or_default());
    }
    g.node = nodes;

    // Initializers, then the declared types.
    for t in &mut g.initializer {
        let name = t.name.as_deref().unwrap_or("");
        if t.dtype() == FLOAT && home.get(name) == Some(&P::Half) {
            cx.convert_tensor(t)?;
        }
    }
    g.initializer.extend(extra_initializers);
    let mut new_info = Vec::new();
    for vi in &mut g.value_info {
        let Some(name) = vi.name.clone().filter(|n| float(n)) else { continue };
        let p = if renamed.contains_key(&name) { io } else { home.get(&name).copied().unwrap_or(P::Half) };
        // The new versions (a renamed producer's output among them) are declared like the value.
        let versions = created.iter().filter(|c| c.0 == name && c.2 != name).map(|c| (c.2.clone(), c.1));
        for (fresh, q) in versions.chain(renamed.get(&name).map(|r| (r.clone(), home[&name]))) {
            let mut copy = vi.clone();
            copy.name = Some(fresh);
            set_elem(&mut copy, q.dtype());
            new_info.push(copy);
        }
        cx.report.values_retyped += usize::from(p == P::Half);
        set_elem(vi, p.dtype());
    }
    g.value_info.extend(new_info);
    for v in &mut g.input {
        if v.name.as_deref().is_some_and(float) {
            cx.report.values_retyped += usize::from(io == P::Half);
            set_elem(v, io.dtype());
        }
    }
    for v in &mut g.output {
        let Some(name) = v.name.clone().filter(|n| float(n)) else { continue };
        cx.report.values_retyped += usize::from(io == P::Half);
        set_elem(v, io.dtype());
        if !top {
            // A subgraph's outputs are matched by position: the output may take the version's name.
            v.name = ver[&name][io.idx()].clone();
        }
    }
    Ok(())
}

fn set_elem(v: &mut proto::ValueInfoProto, dtype: i32) {
    if let Some(t) = v.tensor_type_mut() {
        t.elem_type = Some(dtype);
    }
}

#[cfg(test)]
pub(crate) mod tests;
