//! What the caller and the model's metadata declare about the model's image
//! tensors (layout, colour order, range), and which declaration wins.

use std::collections::HashMap;

use serde::Serialize;

use crate::onnx::tensor::{ColorOrder, Layout, Normalization};

/// What the caller declares about a model's image tensors, where the model
/// cannot say ([`ContextBuilder::layout`](crate::ContextBuilder::layout) and
/// its neighbours; the CLI's `--layout`, `--color`, `--range`). A declaration
/// overrides the model's metadata, which overrides what the shapes suggest.
///
/// ```
/// use neural_frame::{ColorOrder, Normalization, TensorDeclaration};
/// let d = TensorDeclaration { color: Some(ColorOrder::Bgr), normalization: Some(Normalization::Signed), ..Default::default() };
/// assert!(d.layout.is_none()); // detected from the shapes
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TensorDeclaration {
    /// NCHW or NHWC; detected from the shape when `None` and the model's metadata does not say.
    pub layout: Option<Layout>,
    /// RGB or BGR; RGB when neither this nor the metadata says.
    pub color: Option<ColorOrder>,
    /// The value range of float tensors; [0, 1] when neither this nor the metadata says.
    /// uint8 tensors are always [0, 255].
    pub normalization: Option<Normalization>,
}

/// The model's metadata entries the contract reads (the keys are documented
/// in the README's model-contract section).
#[derive(Debug, Clone, Default)]
pub(crate) struct Metadata(pub(crate) HashMap<String, String>);

impl Metadata {
    /// The entry for `what` (`scale`, `layout`, `color`, `range`, `mean`, `std`) of
    /// tensor `tensor`: `neural_frame.WHAT.TENSOR`, else `neural_frame.WHAT` (and
    /// plain `scale`); its key and value.
    pub(crate) fn get(&self, what: &str, tensor: &str) -> Option<(String, &str)> {
        let keys = [format!("neural_frame.{what}.{tensor}"), format!("neural_frame.{what}"), what.to_string()];
        let keys = if what == "scale" { &keys[1..] } else { &keys[..2] };
        keys.iter().find_map(|k| self.0.get(k).map(|v| (k.clone(), v.as_str())))
    }
}

/// The declaration in force for tensor `name`: the caller's for that tensor, the
/// caller's for every tensor, the metadata's for that tensor, the metadata's for every tensor.
pub(crate) fn merge(
    declared: &Declarations,
    meta: &Metadata,
    name: &str,
) -> std::result::Result<TensorDeclaration, String> {
    let own = declared.per_tensor.get(name).copied().unwrap_or_default();
    let all = declared.all;
    let bad = |key: &str, e: String| format!("metadata `{key}`: {e}");
    let layout = match (own.layout.or(all.layout), meta.get("layout", name)) {
        (Some(l), _) => Some(l),
        (None, Some((k, v))) => Some(v.parse().map_err(|e| bad(&k, e))?),
        (None, None) => None,
    };
    let color = match (own.color.or(all.color), meta.get("color", name)) {
        (Some(c), _) => Some(c),
        (None, Some((k, v))) => Some(v.parse().map_err(|e| bad(&k, e))?),
        (None, None) => None,
    };
    let given = own.normalization.or(all.normalization);
    let normalization = match (given, meta.get("range", name), meta.get("mean", name), meta.get("std", name)) {
        (Some(n), ..) => Some(n),
        (None, Some(_), Some(_), _) | (None, Some(_), _, Some(_)) => {
            return Err("metadata has both `neural_frame.range` and `neural_frame.mean`/`std`; give one".into());
        }
        (None, Some((k, v)), None, None) => Some(v.parse().map_err(|e| bad(&k, e))?),
        (None, None, Some((_, m)), Some((_, s))) => {
            Some(Normalization::mean_std(m, s).map_err(|e| bad("neural_frame.mean/std", e))?)
        }
        (None, None, Some(_), None) | (None, None, None, Some(_)) => {
            return Err("metadata has only one of `neural_frame.mean` and `neural_frame.std`; give both".into());
        }
        (None, None, None, None) => None,
    };
    Ok(TensorDeclaration { layout, color, normalization })
}

/// What the caller declares: for every image tensor, and for tensors by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Declarations {
    pub(crate) all: TensorDeclaration,
    pub(crate) per_tensor: HashMap<String, TensorDeclaration>,
}
