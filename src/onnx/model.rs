//! The model contract: which image tensors a model takes and gives, how they
//! lay out a frame, and the scale between them. The rules are pure functions
//! over names, element types, shapes and metadata (the probe run is passed in),
//! so every one of them is unit-tested.

use std::collections::HashMap;
use std::fmt;

use ort::value::{TensorElementType, ValueType};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::onnx::tensor::{ColorOrder, Element, Layout, Normalization, TensorKind};

/// Output size over input size, per axis ([`ModelContract::scale`]).
///
/// ```
/// use neural_frame::Scale;
/// assert_eq!(Scale::uniform(4).to_string(), "×4");
/// assert_eq!(Scale { x: 2, y: 1 }.to_string(), "×2 wide ×1 high");
/// assert_eq!(Scale { x: 2, y: 1 }.apply(960, 540), Some((1920, 540)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Scale {
    /// Output width over input width.
    pub x: u32,
    /// Output height over input height.
    pub y: u32,
}

impl Scale {
    /// The same scale on both axes.
    pub const fn uniform(s: u32) -> Self {
        Self { x: s, y: s }
    }

    /// The output size of a `width × height` frame, or `None` where it does not fit in 32 bits.
    pub fn apply(self, width: u32, height: u32) -> Option<(u32, u32)> {
        Some((width.checked_mul(self.x)?, height.checked_mul(self.y)?))
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.x == self.y { write!(f, "×{}", self.x) } else { write!(f, "×{} wide ×{} high", self.x, self.y) }
    }
}

/// Where a contract's scale came from ([`ModelContract::scale_source`]).
///
/// ```no_run
/// use neural_frame::{NeuralFrameContext, ScaleSource};
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let contract = ctx.contract();
/// if contract.scale_source == ScaleSource::Metadata {
///     // Dynamic shapes: the ×N came from the model's `scale` metadata, and the
///     // first frame is what checks it.
///     println!("the model says it scales {}", contract.scale);
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ScaleSource {
    /// The input's and output's static height and width.
    Shapes,
    /// The output's height and width are the same symbolic dimensions as the input's (×1).
    Symbols,
    /// The model's `scale` (or `neural_frame.scale`) metadata entry; nothing checks
    /// it against the model's real output until a frame runs.
    Metadata,
    /// One run of the model on ONNX Runtime's CPU provider at a small size
    /// ([`PROBE_SIZE`]), when loading it: dynamic shapes and no metadata.
    Probe,
}

/// The frame size (width, height) of the probe run that finds a dynamic model's
/// scale when neither its shapes nor its metadata give it: small, and a
/// multiple of 16 on both sides for models that downsample inside.
pub const PROBE_SIZE: (u32, u32) = (64, 48);

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

/// What the pipeline needs to know about a model: its one input and one
/// output, their layouts, and the scale between them
/// ([`NeuralFrameContext::contract`](crate::NeuralFrameContext::contract)).
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
///
/// let ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// let c = ctx.contract();
/// println!("{} ({}) -> {} ({}), {}", c.input_name, c.input.describe(), c.output_name, c.output.describe(), c.scale);
/// assert_eq!(Some(ctx.output_size()), c.scale.apply(960, 540));
/// if let Some((w, h)) = c.fixed_size {
///     println!("the model takes only {w}×{h} frames");
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelContract {
    /// The input's name.
    pub input_name: String,
    /// The output's name.
    pub output_name: String,
    /// The input's layout, type, channels and range.
    pub input: TensorKind,
    /// The output's layout, type, channels and range.
    pub output: TensorKind,
    /// Output size = input size × scale, per axis.
    pub scale: Scale,
    /// Where `scale` came from.
    pub scale_source: ScaleSource,
    /// The only frame size the model takes, when its input shape is static.
    pub fixed_size: Option<(u32, u32)>,
}

/// The model's metadata entries the contract reads (the keys are documented
/// in the README's model-contract section).
#[derive(Debug, Clone, Default)]
pub(crate) struct Metadata(pub(crate) HashMap<String, String>);

impl Metadata {
    /// The keys the contract reads.
    pub(crate) const KEYS: [&'static str; 7] = [
        "scale",
        "neural_frame.scale",
        "neural_frame.layout",
        "neural_frame.color",
        "neural_frame.range",
        "neural_frame.mean",
        "neural_frame.std",
    ];

    /// The entry for `what` (`scale`, `layout`, `color`, `range`, `mean`, `std`): its key and value.
    fn get(&self, what: &str) -> Option<(&'static str, &str)> {
        Self::KEYS
            .into_iter()
            .filter(|k| k.trim_start_matches("neural_frame.") == what)
            .find_map(|k| self.0.get(k).map(|v| (k, v.as_str())))
    }
}

const EXPECTED: &str = "an image tensor [1, C, H, W] or [1, H, W, C] of float32, float16 or uint8 with C = 3 (RGB) \
                        or 4 (RGBA)";

/// The declaration in force: the caller's, else the metadata's.
fn merge(declared: &TensorDeclaration, meta: &Metadata) -> std::result::Result<TensorDeclaration, String> {
    let bad = |key: &str, e: String| format!("metadata `{key}`: {e}");
    let layout = match (declared.layout, meta.get("layout")) {
        (Some(l), _) => Some(l),
        (None, Some((k, v))) => Some(v.parse().map_err(|e| bad(k, e))?),
        (None, None) => None,
    };
    let color = match (declared.color, meta.get("color")) {
        (Some(c), _) => Some(c),
        (None, Some((k, v))) => Some(v.parse().map_err(|e| bad(k, e))?),
        (None, None) => None,
    };
    let normalization = match (declared.normalization, meta.get("range"), meta.get("mean"), meta.get("std")) {
        (Some(n), ..) => Some(n),
        (None, Some(_), Some(_), _) | (None, Some(_), _, Some(_)) => {
            return Err("metadata has both `neural_frame.range` and `neural_frame.mean`/`std`; give one".into());
        }
        (None, Some((k, v)), None, None) => Some(v.parse().map_err(|e| bad(k, e))?),
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

fn shown(dims: &[i64]) -> String {
    format!("{dims:?}").replace("-1", "?")
}

/// One image tensor's kind and its (H, W) dims (−1 where dynamic), or why not.
fn kind_of(
    name: &str,
    ty: &ValueType,
    role: &str,
    declared: &TensorDeclaration,
) -> std::result::Result<(TensorKind, i64, i64), String> {
    let ValueType::Tensor { ty, shape, .. } = ty else {
        return Err(format!("{role} `{name}` is not a tensor ({ty:?}); expected {EXPECTED}"));
    };
    let dims: &[i64] = shape;
    let element = match ty {
        TensorElementType::Float32 => Element::F32,
        TensorElementType::Float16 => Element::F16,
        TensorElementType::Uint8 => Element::U8,
        other => {
            return Err(format!(
                "{role} `{name}` has elements of type {other:?}; image tensors must be float32, float16 or uint8"
            ));
        }
    };
    if dims.len() == 5 {
        return Err(format!(
            "{role} `{name}` has rank 5 ({}): tensors with a sequence or time axis are not supported; expected {EXPECTED}",
            shown(dims)
        ));
    }
    if dims.len() != 4 {
        return Err(format!("{role} `{name}` has shape {}; expected {EXPECTED}", shown(dims)));
    }
    if dims[0] > 1 {
        return Err(format!(
            "{role} `{name}` has a batch of {} ({}): frames run one at a time, so the first axis must be 1 or dynamic",
            dims[0],
            shown(dims)
        ));
    }
    let channels_ok = |c: i64| c == 3 || c == 4 || (role == "output" && c == 1);
    let layout = match declared.layout {
        Some(Layout::Nchw) if channels_ok(dims[1]) => Layout::Nchw,
        Some(Layout::Nhwc) if channels_ok(dims[3]) => Layout::Nhwc,
        Some(l) => {
            return Err(format!(
                "{role} `{name}` has shape {}, which is not an {l} image of 3 or 4 channels (the layout was declared {l})",
                shown(dims)
            ));
        }
        None => match (channels_ok(dims[1]), channels_ok(dims[3])) {
            (true, false) => Layout::Nchw,
            (false, true) => Layout::Nhwc,
            (true, true) => {
                return Err(format!(
                    "{role} `{name}` has shape {}, which could be NCHW or NHWC; declare the layout (metadata \
                     `neural_frame.layout`, or the layout option)",
                    shown(dims)
                ));
            }
            (false, false) => {
                let c = [dims[1], dims[3]].into_iter().find(|c| (1..=2).contains(c));
                let more = if let Some(c) = c {
                    format!(
                        "; a {c}-channel tensor (depth, motion vectors) can only be an extra input beside a frame, \
                         and models with several inputs are not supported yet"
                    )
                } else {
                    String::new()
                };
                return Err(format!("{role} `{name}` has shape {}; expected {EXPECTED}{more}", shown(dims)));
            }
        },
    };
    let (channels, h, w) = match layout {
        Layout::Nchw => (dims[1], dims[2], dims[3]),
        Layout::Nhwc => (dims[3], dims[1], dims[2]),
    };
    let normalization = match (element, declared.normalization) {
        (Element::U8, None | Some(Normalization::Byte)) => Normalization::Byte,
        (Element::U8, Some(n)) => {
            return Err(format!(
                "{role} `{name}` is uint8, which holds the codes 0–255, but the range was declared {n}; a range other \
                 than 0,255 needs a float tensor"
            ));
        }
        (_, n) => n.unwrap_or(Normalization::Unit),
    };
    let color = declared.color.unwrap_or(ColorOrder::Rgb);
    Ok((TensorKind { layout, element, channels: channels as u32, color, normalization }, h, w))
}

/// The symbolic names of a tensor's H and W axes, where the model gives them.
fn symbols(ty: &ValueType, layout: Layout) -> Option<(String, String)> {
    let ValueType::Tensor { dimension_symbols, .. } = ty else { return None };
    let s: Vec<&str> = dimension_symbols.iter().map(|s| s.as_str()).collect();
    if s.len() != 4 {
        return None;
    }
    let (h, w) = match layout {
        Layout::Nchw => (s[2], s[3]),
        Layout::Nhwc => (s[1], s[2]),
    };
    (!h.is_empty() && !w.is_empty()).then(|| (h.to_string(), w.to_string()))
}

/// The per-axis scale between an input and an output size, or why there is none.
fn ratio(input: (i64, i64), output: (i64, i64)) -> std::result::Result<Scale, String> {
    let ((iw, ih), (ow, oh)) = (input, output);
    if ow >= iw && oh >= ih && ow % iw == 0 && oh % ih == 0 {
        return Ok(Scale { x: (ow / iw) as u32, y: (oh / ih) as u32 });
    }
    Err(format!("output {ow}×{oh} is not an integer multiple of input {iw}×{ih}"))
}

/// A probe run: given the input's kind and a frame size, the output tensor's shape.
pub(crate) type ProbeRun<'a> = &'a mut dyn FnMut(TensorKind, (u32, u32)) -> Result<Vec<i64>>;

/// Works out the contract from a model's inputs, outputs, metadata and the caller's
/// declaration, running `probe` only when nothing else gives the scale.
pub(crate) fn contract_from(
    model: &str,
    inputs: &[(String, ValueType)],
    outputs: &[(String, ValueType)],
    meta: &Metadata,
    declared: &TensorDeclaration,
    probe: ProbeRun<'_>,
) -> Result<ModelContract> {
    let err = |message: String| Error::ModelContract { model: model.to_string(), message };
    let list = |v: &[(String, ValueType)]| {
        v.iter()
            .map(|(n, t)| match t {
                ValueType::Tensor { ty, shape, .. } => format!("`{n}` {ty:?} {}", shown(shape)),
                other => format!("`{n}` {other:?}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if inputs.len() != 1 {
        return Err(err(format!(
            "has {} inputs ({}); models with several inputs are not supported yet: expected one input, {EXPECTED}",
            inputs.len(),
            list(inputs)
        )));
    }
    if outputs.len() != 1 {
        return Err(err(format!(
            "has {} outputs ({}); models with several outputs are not supported yet: expected one image output",
            outputs.len(),
            list(outputs)
        )));
    }
    let declared = merge(declared, meta).map_err(err)?;
    let (input, ih, iw) = kind_of(&inputs[0].0, &inputs[0].1, "input", &declared).map_err(err)?;
    let (output, oh, ow) = kind_of(&outputs[0].0, &outputs[0].1, "output", &declared).map_err(err)?;
    let fixed_size = (ih > 0 && iw > 0).then_some((iw as u32, ih as u32));
    let statics = ih > 0 && iw > 0 && oh > 0 && ow > 0;
    let static_scale = if statics { Some(ratio((iw, ih), (ow, oh)).map_err(err)?) } else { None };
    let metadata_scale = match meta.get("scale") {
        Some((_, text)) => Some(
            text.trim()
                .parse::<u32>()
                .ok()
                .filter(|s| (1..=16).contains(s))
                .map(Scale::uniform)
                .ok_or_else(|| err(format!("metadata scale `{text}` is not an integer from 1 to 16")))?,
        ),
        None => None,
    };
    let same_symbols = match (symbols(&inputs[0].1, input.layout), symbols(&outputs[0].1, output.layout)) {
        (Some(i), Some(o)) => i == o,
        _ => false,
    };
    let (scale, scale_source) = match (metadata_scale, static_scale) {
        (Some(m), Some(s)) if m != s => {
            return Err(err(format!(
                "metadata scale {m} contradicts its static shapes ({iw}×{ih} → {ow}×{oh}, {s}); fix or remove the \
                 metadata"
            )));
        }
        (Some(m), Some(_)) => (m, ScaleSource::Shapes),
        (Some(m), None) => (m, ScaleSource::Metadata),
        (None, Some(s)) => (s, ScaleSource::Shapes),
        (None, None) if same_symbols => (Scale::uniform(1), ScaleSource::Symbols),
        (None, None) => {
            let size = fixed_size.unwrap_or(PROBE_SIZE);
            let size = (if iw > 0 { iw as u32 } else { size.0 }, if ih > 0 { ih as u32 } else { size.1 });
            let dims = probe(input, size).map_err(|e| {
                err(format!(
                    "has dynamic height/width and no `scale` metadata, and a probe run at {}×{} to find its output \
                     size failed ({e}); add metadata_props {{key: \"scale\", value: \"N\"}} to the model",
                    size.0, size.1
                ))
            })?;
            let (h, w) = match (output.layout, dims.as_slice()) {
                (Layout::Nchw, [_, _, h, w]) | (Layout::Nhwc, [_, h, w, _]) => (*h, *w),
                _ => return Err(err(format!("a probe run gave an output of shape {dims:?}, not an image"))),
            };
            let s = ratio((size.0 as i64, size.1 as i64), (w, h))
                .map_err(|e| err(format!("a probe run at {}×{}: {e}", size.0, size.1)))?;
            (s, ScaleSource::Probe)
        }
    };
    Ok(ModelContract {
        input_name: inputs[0].0.clone(),
        output_name: outputs[0].0.clone(),
        input,
        output,
        scale,
        scale_source,
        fixed_size,
    })
}

/// The contract of a loaded session; `probe` runs the model once when its scale
/// cannot be found otherwise.
pub(crate) fn contract(
    session: &ort::session::Session,
    model: &str,
    declared: &TensorDeclaration,
    probe: ProbeRun<'_>,
) -> Result<ModelContract> {
    let inputs: Vec<_> = session.inputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect();
    let outputs: Vec<_> = session.outputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect();
    let mut meta = Metadata::default();
    if let Ok(m) = session.metadata() {
        for key in Metadata::KEYS {
            if let Some(v) = m.custom(key) {
                meta.0.insert(key.to_string(), v);
            }
        }
    }
    contract_from(model, &inputs, &outputs, &meta, declared, probe)
}

#[cfg(test)]
mod tests {
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
    fn no_probe() -> impl FnMut(TensorKind, (u32, u32)) -> Result<Vec<i64>> {
        |_, _| panic!("no probe expected")
    }
    const F32: TensorElementType = TensorElementType::Float32;

    fn build(i: ValueType, o: ValueType, m: &Metadata, d: &TensorDeclaration) -> Result<ModelContract> {
        contract_from("m.onnx", &one("img", i), &one("out", o), m, d, &mut no_probe())
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
        let c = build(t(u8t, &[1, 50, 40, 4]), t(u8t, &[1, 100, 80, 4]), &meta(&[]), &Default::default())
            .expect("supported");
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
        let e = build(t(F32, &[1, 3, 8, 3]), t(F32, &[1, 3, 8, 3]), &meta(&[]), &Default::default())
            .expect_err("ambiguous");
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
            let e =
                build(t(F32, &[1, 3, -1, -1]), t(F32, &[1, 3, -1, -1]), &bad, &Default::default()).expect_err("bad");
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
            (t(F32, &[1, 1, -1, -1]), "extra input"),
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
            assert!(msg.contains("m.onnx") && msg.contains("input `img`") && msg.contains(needle), "{msg}");
        }
        let two = vec![("a".to_string(), t(F32, &[1, 3, -1, -1])), ("b".to_string(), t(F32, &[1, 1, -1, -1]))];
        let e = contract_from("m", &two, &one("o", t(F32, &[1, 3, -1, -1])), &m, &Default::default(), &mut no_probe())
            .expect_err("two inputs");
        assert!(e.to_string().contains("2 inputs (`a` Float32 [1, 3, ?, ?], `b` Float32 [1, 1, ?, ?])"), "{e}");
    }

    #[test]
    fn dynamic_scale_from_symbols_or_a_probe() {
        let same = |n| ts(F32, &[1, 3, -1, -1], &["batch", "c", "h", n]);
        let c = contract_from(
            "m",
            &one("i", same("w")),
            &one("o", same("w")),
            &meta(&[]),
            &Default::default(),
            &mut no_probe(),
        )
        .expect("same symbols");
        assert_eq!((c.scale, c.scale_source), (Scale::uniform(1), ScaleSource::Symbols));
        let mut calls = Vec::new();
        let mut probe = |k: TensorKind, (w, h): (u32, u32)| {
            calls.push((k, w, h));
            Ok(vec![1, 3, 2 * h as i64, w as i64])
        };
        let c = contract_from(
            "m",
            &one("i", same("w")),
            &one("o", same("w2")),
            &meta(&[]),
            &Default::default(),
            &mut probe,
        )
        .expect("probed");
        assert_eq!((c.scale, c.scale_source), (Scale { x: 1, y: 2 }, ScaleSource::Probe));
        assert_eq!(calls, vec![(TensorKind::NCHW_F32, PROBE_SIZE.0, PROBE_SIZE.1)]);
        let mut fractional = |_: TensorKind, (w, h): (u32, u32)| Ok(vec![1, 3, (h * 3 / 2) as i64, (w * 3 / 2) as i64]);
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
        let mut failing = |_: TensorKind, _: (u32, u32)| Err(Error::InvalidArgument("boom".into()));
        let e = contract_from(
            "m",
            &one("i", same("w")),
            &one("o", same("w2")),
            &meta(&[]),
            &Default::default(),
            &mut failing,
        )
        .expect_err("probe failed");
        assert!(e.to_string().contains("probe run at 64×48") && e.to_string().contains("metadata_props"), "{e}");
        let e = build(t(F32, &[1, 3, 10, 10]), t(F32, &[1, 3, 25, 25]), &meta(&[]), &Default::default())
            .expect_err("fractional");
        assert!(e.to_string().contains("integer multiple"), "{e}");
    }
}
