//! The model contract: which image tensors a model takes and gives, how they
//! lay out a frame, and the scale between them. The rules are pure functions
//! over names, element types, shapes and metadata (the probe run is passed in),
//! so every one of them is unit-tested.

use std::fmt;

use ort::value::{TensorElementType, ValueType};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::onnx::declare::merge;
pub(crate) use crate::onnx::declare::{Declarations, Metadata, TensorDeclaration};
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
    /// The output's height and width are the input's symbolic dimensions (×1), or
    /// integer multiples of them (`2*h`, `h*2`: ×2), and a probe run at
    /// [`PROBE_SIZE`] agreed. Where the run disagrees, its scale is used
    /// ([`Probe`](Self::Probe)) with a warning naming the symbols: names are a
    /// claim, the run is a fact.
    Symbols,
    /// The model's `scale` (or `neural_frame.scale`) metadata entry; nothing checks
    /// it against the model's real output until a frame runs.
    Metadata,
    /// One run of the model on ONNX Runtime's CPU provider at a small size
    /// ([`PROBE_SIZE`]), when loading it: dynamic shapes and no metadata, or
    /// symbols that the run contradicted.
    Probe,
}

/// The frame size (width, height) of the probe run that finds a dynamic model's
/// scale when neither its shapes nor its metadata give it: small, and a
/// multiple of 16 on both sides for models that downsample inside.
pub const PROBE_SIZE: (u32, u32) = (64, 48);

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
    /// The model's other inputs, in the model's order: auxiliary images of the
    /// frame's size (albedo, normals, depth, motion vectors), each bound by name
    /// to a registered input ([`Frame::with_input`](crate::Frame::with_input)).
    pub extra_inputs: Vec<NamedTensor>,
    /// The model's other outputs, in the model's order: images of the output's
    /// size, bound on the GPU to the slot's own memory, and converted into a
    /// registered output only when a frame asks ([`Frame::with_output`](crate::Frame::with_output)).
    pub extra_outputs: Vec<NamedTensor>,
    /// The model's outputs that are not images (a score, a vector): bound to the
    /// session's device (ONNX Runtime allocates them there each run), never
    /// converted or copied to the host. CUDA graphs are not used for such a model.
    pub other_outputs: Vec<String>,
}

/// A model input or output besides the frame's: its name and how it lays out an image.
///
/// ```
/// use neural_frame::{NamedTensor, TensorKind};
/// let depth = NamedTensor { name: "depth".into(), kind: TensorKind { channels: 1, ..TensorKind::NCHW_F32 } };
/// assert_eq!(depth.kind.describe(), "NCHW 1-channel f32 [0, 1]");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedTensor {
    /// The tensor's name in the model.
    pub name: String,
    /// Its layout, type, channels and range.
    pub kind: TensorKind,
}

impl ModelContract {
    /// Every input's name, kind and role, for messages: `` `color` (frame, NCHW RGB f32 [0, 1]), `albedo` (NCHW RGB f32 [0, 1]) ``.
    ///
    /// ```no_run
    /// let ctx = neural_frame::NeuralFrameContext::builder("models/upscale.onnx").frame_size(64, 48).build()?;
    /// assert_eq!(ctx.contract().describe_inputs(), "`input` (the frame, NCHW RGB f32 [0, 1])");
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn describe_inputs(&self) -> String {
        describe(&self.input_name, self.input, &self.extra_inputs)
    }

    /// Every output's name, kind and role, for messages.
    pub fn describe_outputs(&self) -> String {
        describe(&self.output_name, self.output, &self.extra_outputs)
    }

    /// The index of the extra input named `name` in [`extra_inputs`](Self::extra_inputs).
    pub fn extra_input(&self, name: &str) -> Option<usize> {
        self.extra_inputs.iter().position(|t| t.name == name)
    }

    /// The index of the extra output named `name` in [`extra_outputs`](Self::extra_outputs).
    pub fn extra_output(&self, name: &str) -> Option<usize> {
        self.extra_outputs.iter().position(|t| t.name == name)
    }
}

fn describe(first: &str, kind: TensorKind, extras: &[NamedTensor]) -> String {
    std::iter::once(format!("`{first}` (the frame, {})", kind.describe()))
        .chain(extras.iter().map(|t| format!("`{}` ({})", t.name, t.kind.describe())))
        .collect::<Vec<_>>()
        .join(", ")
}

const EXPECTED: &str = "an image tensor [1, C, H, W] or [1, H, W, C] of float32, float16 or uint8 with C = 3 (RGB) \
                        or 4 (RGBA) for the frame";

fn shown(dims: &[i64]) -> String {
    format!("{dims:?}").replace("-1", "?")
}

/// One image tensor's kind and its (H, W) dims (−1 where dynamic), or why not.
fn kind_of(
    name: &str,
    ty: &ValueType,
    role: &str,
    declared: &TensorDeclaration,
    allowed: &[i64],
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
    let channels_ok = |c: i64| allowed.contains(&c);
    let layout = match declared.layout {
        Some(Layout::Nchw) if channels_ok(dims[1]) => Layout::Nchw,
        Some(Layout::Nhwc) if channels_ok(dims[3]) => Layout::Nhwc,
        Some(l) => {
            return Err(format!(
                "{role} `{name}` has shape {}, which is not an {l} image of {allowed:?} channels (the layout was declared {l})",
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
                return Err(format!(
                    "{role} `{name}` has shape {}; expected {EXPECTED} ({allowed:?} channels here)",
                    shown(dims)
                ));
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

/// The factor an output dim's symbol claims over the input's symbol `input` on
/// the same axis: 1 for the same symbol, k for `k*input` or `input*k` (spaces
/// and outer parentheses aside, k from 1 to 16); None for anything else.
fn symbol_factor(input: &str, output: &str) -> Option<u32> {
    let compact: String = output.chars().filter(|c| !c.is_whitespace()).collect();
    let mut o = compact.as_str();
    while let Some(inner) = o.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
        o = inner;
    }
    if o == input {
        return Some(1);
    }
    let (a, b) = o.split_once('*')?;
    let k = if a == input {
        b
    } else if b == input {
        a
    } else {
        return None;
    };
    k.parse::<u32>().ok().filter(|k| (1..=16).contains(k))
}

/// The scale an output's H and W symbols claim over the input's, where both axes
/// are the input's symbols or integer multiples of them.
fn symbol_scale(input: &(String, String), output: &(String, String)) -> Option<Scale> {
    Some(Scale { x: symbol_factor(&input.1, &output.1)?, y: symbol_factor(&input.0, &output.0)? })
}

/// The per-axis scale between an input and an output size, or why there is none.
fn ratio(input: (i64, i64), output: (i64, i64)) -> std::result::Result<Scale, String> {
    let ((iw, ih), (ow, oh)) = (input, output);
    if ow >= iw && oh >= ih && ow % iw == 0 && oh % ih == 0 {
        return Ok(Scale { x: (ow / iw) as u32, y: (oh / ih) as u32 });
    }
    Err(format!("output {ow}×{oh} is not an integer multiple of input {iw}×{ih}"))
}

/// A probe run: given every input's name and kind (in the model's order) and a
/// frame size, the shapes of every output (in the model's order).
pub(crate) type ProbeRun<'a> = &'a mut dyn FnMut(&[(String, TensorKind)], (u32, u32)) -> Result<Vec<Vec<i64>>>;

fn list(v: &[(String, ValueType)]) -> String {
    v.iter()
        .map(|(n, t)| match t {
            ValueType::Tensor { ty, shape, .. } => format!("`{n}` {ty:?} {}", shown(shape)),
            other => format!("`{n}` {other:?}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A probe run's frame size and the shapes of every output.
type Probed = ((u32, u32), Vec<Vec<i64>>);

/// An image tensor of the model, as the contract classifies it.
struct Found {
    name: String,
    /// Its place in the model's inputs or outputs.
    index: usize,
    kind: TensorKind,
    h: i64,
    w: i64,
    symbols: Option<(String, String)>,
}

/// Works out the contract from a model's inputs, outputs, metadata and the caller's
/// declarations, running `probe` only when nothing else gives the scale.
pub(crate) fn contract_from(
    model: &str,
    inputs: &[(String, ValueType)],
    outputs: &[(String, ValueType)],
    meta: &Metadata,
    declared: &Declarations,
    probe: ProbeRun<'_>,
) -> Result<ModelContract> {
    let err = |message: String| Error::ModelContract { model: model.to_string(), message };
    // An image tensor, or why it is not one (the outer error: a declaration that cannot be read).
    type Found2 = std::result::Result<Found, String>;
    let find = |index: usize, (name, ty): &(String, ValueType), role: &str, allowed: &[i64]| -> Result<Found2> {
        let d = merge(declared, meta, name).map_err(err)?;
        Ok(kind_of(name, ty, role, &d, allowed).map(|(kind, h, w)| Found {
            name: name.clone(),
            index,
            kind,
            h,
            w,
            symbols: symbols(ty, kind.layout),
        }))
    };
    if inputs.is_empty() || outputs.is_empty() {
        return Err(err(format!(
            "has {} inputs and {} outputs; it needs at least one of each",
            inputs.len(),
            outputs.len()
        )));
    }
    let mut ins = Vec::with_capacity(inputs.len());
    for (k, i) in inputs.iter().enumerate() {
        ins.push(find(k, i, "input", &[1, 2, 3, 4])?.map_err(err)?);
    }
    // Outputs that are not images are left to ONNX Runtime on the device; the first image
    // output is the frame's.
    let (mut outs, mut others) = (Vec::new(), Vec::new());
    for (k, o) in outputs.iter().enumerate() {
        match find(k, o, "output", &[1, 3, 4])? {
            Ok(f) => outs.push(f),
            Err(why) => others.push((o.0.clone(), why)),
        }
    }
    if outs.is_empty() {
        return Err(err(format!(
            "has no image output: its outputs are {}; {}",
            list(outputs),
            others.first().map_or(String::new(), |o| o.1.clone())
        )));
    }
    for (name, why) in &others {
        log::info!("{model}: output `{name}` is not an image ({why}): computed on the device, never converted");
    }
    let Some(first) = ins.iter().position(|f| f.kind.channels >= 3) else {
        return Err(err(format!(
            "has no input for the frame, one of 3 (RGB) or 4 (RGBA) channels: its inputs are {}; 1- and 2-channel \
             tensors (depth, motion vectors) are extra inputs beside a frame",
            list(inputs)
        )));
    };
    let input = &ins[first];
    let output = &outs[0];
    let (ih, iw, oh, ow) = (input.h, input.w, output.h, output.w);
    // Extra inputs are frame-sized: static sizes that disagree are refused here.
    for f in ins.iter().filter(|f| f.name != input.name) {
        if ih > 0 && iw > 0 && f.h > 0 && f.w > 0 && (f.h, f.w) != (ih, iw) {
            return Err(err(format!(
                "input sizes disagree: `{}` is {}×{} but the frame input `{}` is {iw}×{ih}; extra inputs are of the \
                 frame's size",
                f.name, f.w, f.h, input.name
            )));
        }
    }
    let fixed_size = (ih > 0 && iw > 0).then_some((iw as u32, ih as u32));
    let statics = ih > 0 && iw > 0 && oh > 0 && ow > 0;
    let static_scale = if statics { Some(ratio((iw, ih), (ow, oh)).map_err(err)?) } else { None };
    let metadata_scale = match meta.get("scale", "") {
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
    // What the output's H/W symbols claim over the input's (`h` → `h`: ×1, `h` → `2*h`: ×2).
    let claimed = match (&input.symbols, &output.symbols) {
        (Some(i), Some(o)) => symbol_scale(i, o).map(|s| (s, i, o)),
        _ => None,
    };
    // The probe's frame size and output shapes, when it ran.
    let mut probed: Option<Probed> = None;
    let probe_size = (if iw > 0 { iw as u32 } else { PROBE_SIZE.0 }, if ih > 0 { ih as u32 } else { PROBE_SIZE.1 });
    let kinds: Vec<(String, TensorKind)> = ins.iter().map(|f| (f.name.clone(), f.kind)).collect();
    let (scale, scale_source) = match (metadata_scale, static_scale, claimed) {
        (Some(m), Some(s), _) if m != s => {
            return Err(err(format!(
                "metadata scale {m} contradicts its static shapes ({iw}×{ih} → {ow}×{oh}, {s}); fix or remove the \
                 metadata"
            )));
        }
        (Some(m), Some(_), _) => (m, ScaleSource::Shapes),
        (Some(m), None, _) => (m, ScaleSource::Metadata),
        (None, Some(s), _) => (s, ScaleSource::Shapes),
        // Symbols are a claim (an export's dynamic_axes name the output's dims after the input's
        // whatever the network does): a probe run checks it, and wins where they disagree.
        (None, None, Some((claim, (isym_h, isym_w), (osym_h, osym_w)))) => {
            let size = probe_size;
            let symbols = format!(
                "output `{}` dims ({osym_h}, {osym_w}) over input `{}` dims ({isym_h}, {isym_w})",
                output.name, input.name
            );
            match probe(&kinds, size) {
                Err(e) => {
                    log::info!(
                        "{model}: the {symbols} say {claim}; a probe run at {}×{} to check it failed ({e}), so the \
                         symbols' {claim} stands",
                        size.0,
                        size.1
                    );
                    (claim, ScaleSource::Symbols)
                }
                Ok(shapes) => {
                    let found = probed_scale(output.kind, shapes.get(output.index), size).map_err(|e| {
                        err(format!(
                            "the {symbols} say {claim}, but {e}; add metadata_props {{key: \"scale\", value: \"N\"}}"
                        ))
                    })?;
                    probed = Some((size, shapes));
                    if found == claim {
                        (claim, ScaleSource::Symbols)
                    } else {
                        log::warn!(
                            "{model}: the {symbols} say {claim}, but a probe run at {}×{} gave {found}; using {found} \
                             (the symbols are wrong: fix the output's dims in the export, or add a `scale` metadata \
                             entry)",
                            size.0,
                            size.1
                        );
                        (found, ScaleSource::Probe)
                    }
                }
            }
        }
        (None, None, None) => {
            let size = probe_size;
            let shapes = probe(&kinds, size).map_err(|e| {
                err(format!(
                    "has dynamic height/width and no `scale` metadata, and a probe run at {}×{} to find its output \
                     size failed ({e}); add metadata_props {{key: \"scale\", value: \"N\"}} to the model",
                    size.0, size.1
                ))
            })?;
            let s = probed_scale(output.kind, shapes.get(output.index), size).map_err(err)?;
            probed = Some((size, shapes));
            (s, ScaleSource::Probe)
        }
    };
    // Extra outputs are of the output's size: checked where the shapes or a probe tell.
    for f in outs.iter().skip(1) {
        let found = if ih > 0 && iw > 0 && f.h > 0 && f.w > 0 {
            Some(ratio((iw, ih), (f.w, f.h)).map_err(err)?)
        } else if let Some((size, shapes)) = &probed {
            Some(probed_scale(f.kind, shapes.get(f.index), *size).map_err(err)?)
        } else {
            None
        };
        if let Some(fs) = found
            && fs != scale
        {
            return Err(err(format!(
                "output sizes disagree: `{}` scales the frame {fs} but `{}` scales it {scale}; extra outputs are of \
                 the output's size",
                f.name, output.name
            )));
        }
    }
    let named = |f: &Found| NamedTensor { name: f.name.clone(), kind: f.kind };
    Ok(ModelContract {
        input_name: input.name.clone(),
        output_name: output.name.clone(),
        input: input.kind,
        output: output.kind,
        scale,
        scale_source,
        fixed_size,
        extra_inputs: ins.iter().filter(|f| f.name != input.name).map(named).collect(),
        extra_outputs: outs.iter().skip(1).map(named).collect(),
        other_outputs: others.into_iter().map(|o| o.0).collect(),
    })
}

/// The scale a probe run at `size` shows for an output of `kind` and `shape`.
fn probed_scale(kind: TensorKind, shape: Option<&Vec<i64>>, size: (u32, u32)) -> std::result::Result<Scale, String> {
    let (h, w) = match (kind.layout, shape.map(Vec::as_slice)) {
        (Layout::Nchw, Some([_, _, h, w])) | (Layout::Nhwc, Some([_, h, w, _])) => (*h, *w),
        _ => return Err(format!("a probe run gave an output of shape {shape:?}, not an image")),
    };
    ratio((size.0 as i64, size.1 as i64), (w, h)).map_err(|e| format!("a probe run at {}×{}: {e}", size.0, size.1))
}

/// A run's error in the contract's terms, where ONNX Runtime refused the output
/// bound for a tensor because the model computed another shape ("The output
/// OrtValue provided for output 'y' has shape {1,3,53,37} but the computed output
/// shape for this run is {1,3,106,74}"): the tensor, the shape expected and the
/// one the model computed, and what to do. Any other error is returned as it is.
pub(crate) fn explain_run_error(e: Error) -> Error {
    let Error::Onnx { what, message } = e else { return e };
    match shape_mismatch(&message) {
        Some(explained) => Error::Onnx { what, message: explained },
        None => Error::Onnx { what, message },
    }
}

/// [`explain_run_error`]'s message for ONNX Runtime's shape-mismatch text, or None for other text.
fn shape_mismatch(message: &str) -> Option<String> {
    let dims = |s: &str| -> Option<(String, usize)> {
        let open = s.find('{')?;
        let close = open + s[open..].find('}')?;
        let d: Vec<&str> = s[open + 1..close].split(',').map(str::trim).collect();
        Some((format!("[{}]", d.join(", ")), close + 1))
    };
    let rest = message.split_once("provided for output '")?.1;
    let (name, rest) = rest.split_once('\'')?;
    let rest = rest.split_once("has shape")?.1;
    let (bound, end) = dims(rest)?;
    let (computed, _) = dims(rest[end..].split_once("computed output shape")?.1)?;
    Some(format!(
        "output `{name}`: expected shape {bound} (the frame's size times the scale found when the model was loaded), \
         but the model computed {computed}: its real output size is not the one its `scale` metadata or its output \
         dims say; give the model a correct `scale` metadata entry (metadata_props {{key: \"scale\", value: \"N\"}}, \
         N = output size / input size) or fix its output dims"
    ))
}

/// The contract of a loaded session; `probe` runs the model once when its scale
/// cannot be found otherwise.
pub(crate) fn contract(
    session: &ort::session::Session,
    model: &str,
    declared: &Declarations,
    probe: ProbeRun<'_>,
) -> Result<ModelContract> {
    let inputs: Vec<_> = session.inputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect();
    let outputs: Vec<_> = session.outputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect();
    let mut meta = Metadata::default();
    if let Ok(m) = session.metadata() {
        for key in m.custom_keys().unwrap_or_default() {
            if (key == "scale" || key.starts_with("neural_frame."))
                && let Some(v) = m.custom(&key)
            {
                meta.0.insert(key, v);
            }
        }
    }
    contract_from(model, &inputs, &outputs, &meta, declared, probe)
}

#[cfg(test)]
mod tests;
