//! How much of a model's work its convolutions and matrix products do, estimated from
//! the graph alone ([`compute_share`]): for a precision mode that converts only models
//! where float16 pays (precision.rs).

use std::collections::HashMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::graph::proto::{
    self, ModelProto, NodeProto, TensorProto,
    data_type::{FLOAT, FLOAT16},
};

fn refuse(message: String) -> Error {
    Error::InvalidArgument(format!("the float16 conversion: {message}"))
}

/// The operators counted as matrix work: convolutions and matrix products.
const MATRIX_OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "ConvInteger",
    "QLinearConv",
    "FusedConv",
    "MatMul",
    "MatMulInteger",
    "QLinearMatMul",
    "FusedMatMul",
    "Gemm",
];

/// Above this share of the work in matrix operators, float16 pays (see [`ComputeShare`]).
pub(crate) const MATRIX_BOUND: f64 = 0.9;

/// How much of a model's work its convolutions and matrix products (Conv, ConvTranspose,
/// MatMul, Gemm and their quantized and fused forms) do, estimated from the weights and
/// the graph alone, without running it ([`compute_share`]).
///
/// The estimate follows each value's size as (elements per spatial position, spatial
/// positions per input pixel): an image input is (C, 1); a convolution gives (its weight's
/// output channels, the input's positions / the strides' product); DepthToSpace,
/// SpaceToDepth, Resize with constant scales and strided pools move elements between the
/// two; constants are (their elements, 0), so they cost nothing per pixel. Then:
/// - a convolution does (its weight's elements) multiply-adds per output position, a
///   transposed one per input position, a matrix product with a constant operand
///   `[K, N]` N per element of the other operand;
/// - every other operator does one operation per element it writes (Reshape, Flatten,
///   Squeeze, Unsqueeze, Identity, Shape and Dropout none: they move no data).
///
/// All counted per input pixel, so the numbers do not depend on the frame size. What it
/// leaves out: padding and dilation, a matrix product of two activations (counted by
/// its first operand's elements only, and named in `unfollowed`), reductions (counted at
/// their input's size) and subgraphs. On a GPU an element-wise operation is bound by
/// memory, not arithmetic, so one element operation stands for much more time than one
/// multiply-add: the share is an upper bound of the time share, and a model passes
/// [`MATRIX_BOUND`] only when the matrix work dwarfs the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ComputeShare {
    /// Float parameters read by the matrix operators (their weights and biases).
    pub(crate) matrix_params: u64,
    /// All float parameters (initializers and Constant values).
    pub(crate) params: u64,
    /// Multiply-adds per input pixel in the matrix operators.
    pub(crate) matrix_macs: f64,
    /// Element operations per input pixel in all the other operators.
    pub(crate) other_ops: f64,
    /// Operators whose output size the estimate could not follow (`op` `name`).
    pub(crate) unfollowed: Vec<String>,
}

impl ComputeShare {
    /// The matrix operators' share of the parameters, 0 to 1.
    #[cfg(test)]
    pub(crate) fn param_share(&self) -> f64 {
        if self.params == 0 { 0.0 } else { self.matrix_params as f64 / self.params as f64 }
    }

    /// The matrix operators' share of the work, 0 to 1.
    pub(crate) fn work_share(&self) -> f64 {
        let all = self.matrix_macs + self.other_ops;
        if all == 0.0 { 0.0 } else { self.matrix_macs / all }
    }

    /// Whether the convolutions and matrix products are the bulk of the work.
    pub(crate) fn matrix_bound(&self) -> bool {
        self.work_share() >= MATRIX_BOUND
    }
}

/// A value's size: elements per spatial position, spatial positions per input pixel.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Size {
    c: f64,
    s: f64,
}

impl Size {
    fn elements(self) -> f64 {
        self.c * self.s
    }
}

/// Estimates the share of a model's work in its convolutions and matrix products ([`ComputeShare`]).
pub(crate) fn compute_share(model: &[u8]) -> Result<ComputeShare> {
    let m = ModelProto::decode_model(model, "being measured")?;
    let g = m.graph.as_ref().ok_or_else(|| refuse("the model has no graph".into()))?;
    let mut share = ComputeShare::default();
    let mut consts: HashMap<&str, &TensorProto> = HashMap::new();
    for t in &g.initializer {
        consts.insert(t.name(), t);
    }
    for n in g.node.iter().filter(|n| n.op() == "Constant") {
        if let (Some(out), Some(t)) = (n.output.first(), n.attr("value").and_then(|a| a.t.as_ref())) {
            consts.insert(out, t);
        }
    }
    let float_const = |t: &&&TensorProto| matches!(t.dtype(), FLOAT | FLOAT16 | proto::data_type::DOUBLE);
    share.params = consts.values().filter(float_const).map(|t| t.elements() as u64).sum();
    let mut size: HashMap<&str, Size> =
        consts.iter().map(|(n, t)| (*n, Size { c: t.elements() as f64, s: 0.0 })).collect();
    for v in g.input.iter().filter(|v| !consts.contains_key(v.name())) {
        let dims = v.dims().unwrap_or_default();
        let fixed = |i: usize| dims.get(i).copied().flatten();
        let c = match (dims.len(), fixed(1), fixed(3)) {
            (4, c1, Some(c3)) if (1..=4).contains(&c3) && !c1.is_some_and(|c| (1..=4).contains(&c)) => c3,
            (4, Some(c1), _) => c1,
            (4, None, _) => 3,
            _ => dims.iter().skip(1).map(|d| d.unwrap_or(1)).product(),
        };
        size.insert(v.name(), Size { c: c as f64, s: 1.0 });
    }
    let strides = |n: &NodeProto| n.ints("strides").map_or(1.0, |s| s.iter().product::<i64>().max(1) as f64);
    for n in &g.node {
        let op = n.op();
        let ins: Vec<Option<Size>> = n.input.iter().map(|i| size.get(i.as_str()).copied()).collect();
        let x = ins.first().copied().flatten();
        let biggest = ins.iter().flatten().copied().fold(None, |a: Option<Size>, b| match a {
            Some(a) if (a.s, a.elements()) >= (b.s, b.elements()) => Some(a),
            _ => Some(b),
        });
        let constant = |i: usize| n.input_at(i).and_then(|name| consts.get(name)).copied();
        let weight = match op {
            "QLinearConv" | "QLinearMatMul" => constant(3),
            _ => constant(1),
        };
        let out: Option<Size>;
        if MATRIX_OPS.contains(&op) {
            share.matrix_params +=
                n.input.iter().skip(1).filter_map(|i| consts.get(i.as_str())).map(|t| t.elements() as u64).sum::<u64>();
            match (op, x, weight) {
                ("ConvTranspose", Some(x), Some(w)) if w.dims.len() >= 2 => {
                    share.matrix_macs += w.elements() as f64 * x.s;
                    out = Some(Size { c: (w.dims[1] * n.int("group").unwrap_or(1)) as f64, s: x.s * strides(n) });
                }
                (_, Some(x), Some(w)) if op.contains("Conv") && !w.dims.is_empty() => {
                    let s = x.s / strides(n);
                    share.matrix_macs += w.elements() as f64 * s;
                    out = Some(Size { c: w.dims[0] as f64, s });
                }
                (_, Some(x), Some(w)) if w.dims.len() == 2 => {
                    let trans_b = op == "Gemm" && n.int("transB") == Some(1);
                    let (k, cols) = if trans_b { (w.dims[1], w.dims[0]) } else { (w.dims[0], w.dims[1]) };
                    share.matrix_macs += x.elements() * cols as f64;
                    out = Some(Size { c: x.c / k.max(1) as f64 * cols as f64, s: x.s });
                }
                _ => {
                    share.matrix_macs += x.map_or(0.0, Size::elements);
                    share.unfollowed.push(format!("{op} `{}`", n.name()));
                    out = x;
                }
            }
        } else {
            let scales = match op {
                "Resize" => constant(2).or_else(|| (n.input.len() == 2).then(|| constant(1)).flatten()),
                "Upsample" => constant(1),
                _ => None,
            }
            .and_then(|t| t.floats().ok());
            let block = n.int("blocksize").unwrap_or(1) as f64;
            out = match (op, x) {
                ("DepthToSpace", Some(x)) => Some(Size { c: x.c / (block * block), s: x.s * block * block }),
                ("SpaceToDepth", Some(x)) => Some(Size { c: x.c * block * block, s: x.s / (block * block) }),
                ("Resize" | "Upsample", Some(x)) if scales.is_some() => {
                    Some(Size { c: x.c, s: x.s * scales.unwrap_or_default().iter().product::<f32>() as f64 })
                }
                ("MaxPool" | "AveragePool" | "LpPool", Some(x)) => Some(Size { c: x.c, s: x.s / strides(n) }),
                ("GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool", Some(x)) => Some(Size { c: x.c, s: 0.0 }),
                ("Concat", _) => {
                    let s = ins.iter().flatten().map(|z| z.s).fold(0.0, f64::max);
                    let e: f64 = ins.iter().flatten().map(|z| z.elements()).sum();
                    Some(Size { c: if s > 0.0 { e / s } else { e }, s })
                }
                ("Split", Some(x)) => Some(Size { c: x.c / n.output.len().max(1) as f64, s: x.s }),
                ("Resize" | "Upsample", _) => {
                    share.unfollowed.push(format!("{op} `{}`", n.name()));
                    biggest
                }
                _ => biggest,
            };
            let free =
                ["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Shape", "Size", "Dropout", "Constant"];
            if !free.contains(&op) {
                share.other_ops += out.map_or(0.0, Size::elements) * n.output.len() as f64;
            }
        }
        if let Some(o) = out {
            for name in &n.output {
                size.insert(name, o);
            }
        }
    }
    Ok(share)
}
