//! What the graph rewrites share: a rewrite's result ([`Rewritten`]), fresh names, the
//! Transpose node, and the names of the custom operators they write (run by the operators of src/ops/).

use std::collections::HashSet;

use prost::Message;

use crate::graph::proto::{AttributeProto, ModelProto, NodeProto};

/// The custom operators' domain.
pub(crate) const DOMAIN: &str = "ai.neural_frame";
/// The fused convolution's operator name (the ConvAct rewrite's).
pub(crate) const CONV_ACT: &str = "ConvAct";
/// The fused DepthToSpace's operator name (the tails' rewrite's).
pub(crate) const DEPTH_TO_SPACE: &str = "DepthToSpace";

/// A rewritten model and what changed.
#[derive(Debug, Clone)]
pub(crate) struct Rewritten {
    /// The model (the input's bytes where nothing applied).
    pub(crate) bytes: Vec<u8>,
    /// What was rewritten, one line each.
    pub(crate) changes: Vec<String>,
    /// Candidates left as they were, and why.
    pub(crate) skipped: Vec<String>,
}

impl Rewritten {
    /// Whether anything changed.
    pub(crate) fn applied(&self) -> bool {
        !self.changes.is_empty()
    }
}

/// The result of a rewrite of `original` into `m`: `m`'s bytes where anything changed.
pub(crate) fn finish(original: &[u8], m: &ModelProto, changes: Vec<String>, skipped: Vec<String>) -> Rewritten {
    let bytes = if changes.is_empty() { original.to_vec() } else { m.encode_to_vec() };
    Rewritten { bytes, changes, skipped }
}

/// A Transpose node of `perm` from `input` to `output`.
pub(crate) fn transpose(name: String, input: &str, output: &str, perm: [i64; 4]) -> NodeProto {
    let mut t = NodeProto::new("Transpose", name, vec![input.into()], vec![output.into()]);
    t.attribute.push(AttributeProto::ints("perm", perm.to_vec()));
    t
}

/// `base`, or `base_1`, … where the name is taken.
pub(crate) fn fresh(used: &mut HashSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 0;
    while used.contains(&name) {
        k += 1;
        name = format!("{base}_{k}");
    }
    used.insert(name.clone());
    name
}
