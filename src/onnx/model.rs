//! The model contract: which image tensors a model takes and gives, and its scale.
//! Pure functions over names, element types and shapes, so every rule is testable.

use ort::value::{TensorElementType, ValueType};
use serde::Serialize;

use crate::error::{Error, Result};

/// The tensor layouts the pipeline converts to and from: a model's
/// [`ModelContract::input`] and [`ModelContract::output`].
///
/// ```
/// use neural_frame::TensorKind;
///
/// // A 960×540 frame as the model's input tensor, and its size in bytes.
/// assert_eq!(TensorKind::NchwF32.shape(960, 540), [1, 3, 540, 960]);
/// assert_eq!(TensorKind::NchwF32.bytes(960, 540), 960 * 540 * 3 * 4);
/// assert_eq!(TensorKind::NhwcU8.describe(), "NHWC RGBA u8");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TensorKind {
    /// `[1, 3, H, W]` f32, RGB in [0, 1].
    NchwF32,
    /// `[1, 3, H, W]` f16, RGB in [0, 1].
    NchwF16,
    /// `[1, H, W, 4]` u8, RGBA.
    NhwcU8,
}

impl TensorKind {
    /// The tensor's shape for a W×H image.
    ///
    /// ```
    /// use neural_frame::TensorKind;
    /// assert_eq!(TensorKind::NchwF16.shape(640, 360), [1, 3, 360, 640]);
    /// assert_eq!(TensorKind::NhwcU8.shape(640, 360), [1, 360, 640, 4]);
    /// ```
    pub fn shape(self, width: u32, height: u32) -> [i64; 4] {
        let (w, h) = (width as i64, height as i64);
        match self {
            Self::NchwF32 | Self::NchwF16 => [1, 3, h, w],
            Self::NhwcU8 => [1, h, w, 4],
        }
    }

    /// The tensor's size in bytes for a W×H image.
    ///
    /// ```
    /// use neural_frame::TensorKind;
    /// assert_eq!(TensorKind::NchwF32.bytes(2, 2), 2 * 2 * 3 * 4);
    /// assert_eq!(TensorKind::NchwF16.bytes(2, 2), 2 * 2 * 3 * 2);
    /// assert_eq!(TensorKind::NhwcU8.bytes(2, 2), 2 * 2 * 4);
    /// ```
    pub fn bytes(self, width: u32, height: u32) -> u64 {
        let px = width as u64 * height as u64;
        match self {
            Self::NchwF32 => px * 12,
            Self::NchwF16 => px * 6,
            Self::NhwcU8 => px * 4,
        }
    }

    /// The buffer size the shaders need: whole 32-bit words.
    ///
    /// ```
    /// use neural_frame::TensorKind;
    /// // 3×3 pixels of f16 RGB are 54 bytes, rounded up to 14 words.
    /// assert_eq!(TensorKind::NchwF16.bytes(3, 3), 54);
    /// assert_eq!(TensorKind::NchwF16.buffer_bytes(3, 3), 56);
    /// ```
    pub fn buffer_bytes(self, width: u32, height: u32) -> u64 {
        self.bytes(width, height).div_ceil(4) * 4
    }

    /// ONNX Runtime's element type.
    pub(crate) fn element(self) -> ort::sys::ONNXTensorElementDataType {
        use ort::sys::ONNXTensorElementDataType as T;
        match self {
            Self::NchwF32 => T::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
            Self::NchwF16 => T::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
            Self::NhwcU8 => T::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8,
        }
    }

    /// A short name for reports.
    ///
    /// ```
    /// assert_eq!(neural_frame::TensorKind::NchwF32.describe(), "NCHW RGB f32");
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            Self::NchwF32 => "NCHW RGB f32",
            Self::NchwF16 => "NCHW RGB f16",
            Self::NhwcU8 => "NHWC RGBA u8",
        }
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
///     println!("the model says it scales ×{}", contract.scale);
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleSource {
    /// The input's and output's static height and width.
    Shapes,
    /// The model's `scale` (or `neural_frame.scale`) metadata entry, for dynamic shapes;
    /// nothing checks it against the model's real output until a frame runs.
    Metadata,
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
/// println!("{} ({}) -> {} ({}), ×{}", c.input_name, c.input.describe(), c.output_name, c.output.describe(), c.scale);
/// assert_eq!(ctx.output_size(), (960 * c.scale, 540 * c.scale));
/// if let Some((w, h)) = c.fixed_size {
///     println!("the model takes only {w}×{h} frames");
/// }
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelContract {
    /// The input's name.
    pub input_name: String,
    /// The output's name.
    pub output_name: String,
    /// The input's layout and type.
    pub input: TensorKind,
    /// The output's layout and type.
    pub output: TensorKind,
    /// Output size = input size × scale.
    pub scale: u32,
    /// Where `scale` came from.
    pub scale_source: ScaleSource,
    /// The only frame size the model takes, when its input shape is static.
    pub fixed_size: Option<(u32, u32)>,
}

const EXPECTED: &str =
    "one image input, either [1, 3, H, W] float32/float16 (RGB in [0, 1]) or [1, H, W, 4] uint8 (RGBA)";

fn kind_of(name: &str, ty: &ValueType, role: &str) -> std::result::Result<(TensorKind, i64, i64), String> {
    let ValueType::Tensor { ty, shape, .. } = ty else {
        return Err(format!("{role} `{name}` is not a tensor ({ty:?}); expected {EXPECTED}"));
    };
    let dims: &[i64] = shape;
    let shown = format!("{dims:?}").replace("-1", "?");
    if dims.len() != 4 {
        return Err(format!("{role} `{name}` has shape {shown}; expected {EXPECTED}"));
    }
    let batch_ok = dims[0] == 1 || dims[0] < 0;
    let kind = match ty {
        TensorElementType::Float32 if dims[1] == 3 && batch_ok => TensorKind::NchwF32,
        TensorElementType::Float16 if dims[1] == 3 && batch_ok => TensorKind::NchwF16,
        TensorElementType::Uint8 if dims[3] == 4 && batch_ok => TensorKind::NhwcU8,
        _ => {
            return Err(format!("{role} `{name}` is {ty:?} with shape {shown}; expected {EXPECTED}"));
        }
    };
    let (h, w) = match kind {
        TensorKind::NhwcU8 => (dims[1], dims[2]),
        _ => (dims[2], dims[3]),
    };
    Ok((kind, h, w))
}

/// Works out the contract from a model's inputs, outputs and `scale` metadata.
pub(crate) fn contract_from(
    model: &str,
    inputs: &[(String, ValueType)],
    outputs: &[(String, ValueType)],
    metadata_scale: Option<String>,
) -> Result<ModelContract> {
    let err = |message: String| Error::ModelContract { model: model.to_string(), message };
    if inputs.len() != 1 {
        let names: Vec<_> = inputs.iter().map(|i| i.0.as_str()).collect();
        return Err(err(format!("has {} inputs ({names:?}); expected {EXPECTED}", inputs.len())));
    }
    if outputs.len() != 1 {
        let names: Vec<_> = outputs.iter().map(|o| o.0.as_str()).collect();
        return Err(err(format!(
            "has {} outputs ({names:?}); expected one image output of the same kind",
            outputs.len()
        )));
    }
    let (input, ih, iw) = kind_of(&inputs[0].0, &inputs[0].1, "input").map_err(err)?;
    let (output, oh, ow) = kind_of(&outputs[0].0, &outputs[0].1, "output").map_err(err)?;
    let rgb = |k: TensorKind| k != TensorKind::NhwcU8;
    if rgb(input) != rgb(output) {
        return Err(err(format!(
            "input `{}` is {} but output `{}` is {}; both must be NCHW RGB or both NHWC RGBA",
            inputs[0].0,
            input.describe(),
            outputs[0].0,
            output.describe()
        )));
    }
    let static_scale = (ih > 0 && iw > 0 && oh > 0 && ow > 0)
        .then(|| if oh % ih == 0 && ow % iw == 0 && oh / ih == ow / iw { Some((oh / ih) as u32) } else { None });
    let (scale, scale_source) = match (static_scale, metadata_scale) {
        (Some(Some(s)), _) => (s, ScaleSource::Shapes),
        (Some(None), _) => {
            return Err(err(format!("output {ow}×{oh} is not an integer multiple of input {iw}×{ih}")));
        }
        (None, Some(text)) => (
            text.trim()
                .parse::<u32>()
                .ok()
                .filter(|s| (1..=16).contains(s))
                .ok_or_else(|| err(format!("metadata scale `{text}` is not an integer from 1 to 16")))?,
            ScaleSource::Metadata,
        ),
        (None, None) => {
            return Err(err(
                "has dynamic height/width and no `scale` in its metadata, so its output size is unknown; \
                 add metadata_props {key: \"scale\", value: \"4\"} (for ×4) to the model"
                    .into(),
            ));
        }
    };
    let fixed_size = (ih > 0 && iw > 0).then_some((iw as u32, ih as u32));
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

/// The contract of a loaded session.
pub(crate) fn contract(session: &ort::session::Session, model: &str) -> Result<ModelContract> {
    let inputs: Vec<_> = session.inputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect();
    let outputs: Vec<_> = session.outputs().iter().map(|o| (o.name().to_string(), o.dtype().clone())).collect();
    let scale = session.metadata().ok().and_then(|m| m.custom("scale").or_else(|| m.custom("neural_frame.scale")));
    contract_from(model, &inputs, &outputs, scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ort::value::{Shape, SymbolicDimensions};

    fn t(ty: TensorElementType, dims: &[i64]) -> ValueType {
        ValueType::Tensor {
            ty,
            shape: Shape::new(dims.iter().copied()),
            dimension_symbols: SymbolicDimensions::new(dims.iter().map(|_| String::new())),
        }
    }
    fn one(name: &str, v: ValueType) -> Vec<(String, ValueType)> {
        vec![(name.to_string(), v)]
    }

    #[test]
    fn dynamic_rgb_with_metadata_scale() {
        let c = contract_from(
            "m",
            &one("input", t(TensorElementType::Float32, &[1, 3, -1, -1])),
            &one("output", t(TensorElementType::Float32, &[1, 3, -1, -1])),
            Some("4".into()),
        )
        .expect("supported");
        assert_eq!((c.input, c.output, c.scale, c.fixed_size), (TensorKind::NchwF32, TensorKind::NchwF32, 4, None));
        assert_eq!(c.scale_source, ScaleSource::Metadata);
        assert_eq!(TensorKind::NchwF16.shape(37, 53), [1, 3, 53, 37]);
        assert_eq!(TensorKind::NchwF16.buffer_bytes(37, 53), (37 * 53 * 6u64).div_ceil(4) * 4);
    }

    #[test]
    fn static_shapes_give_scale_and_size() {
        let c = contract_from(
            "m",
            &one("x", t(TensorElementType::Uint8, &[1, 50, 40, 4])),
            &one("y", t(TensorElementType::Uint8, &[1, 100, 80, 4])),
            None,
        )
        .expect("supported");
        assert_eq!((c.scale, c.fixed_size, c.input), (2, Some((40, 50)), TensorKind::NhwcU8));
        assert_eq!(c.scale_source, ScaleSource::Shapes);
    }

    #[test]
    fn unsupported_signatures_name_the_input() {
        let cases = [
            (t(TensorElementType::Float32, &[1, 1, -1, -1]), "input `img`"),
            (t(TensorElementType::Int64, &[1, 3, -1, -1]), "Int64"),
            (t(TensorElementType::Float32, &[3, -1, -1]), "shape"),
            (t(TensorElementType::Uint8, &[1, -1, -1, 3]), "expected one image input"),
        ];
        for (ty, needle) in cases {
            let e = contract_from(
                "m.onnx",
                &one("img", ty),
                &one("out", t(TensorElementType::Float32, &[1, 3, -1, -1])),
                Some("2".into()),
            )
            .expect_err("unsupported");
            let msg = e.to_string();
            assert!(msg.contains("m.onnx") && msg.contains(needle), "{msg}");
        }
        let two = vec![
            ("a".to_string(), t(TensorElementType::Float32, &[1, 3, -1, -1])),
            ("b".to_string(), t(TensorElementType::Float32, &[1, 3, -1, -1])),
        ];
        let e = contract_from("m", &two, &one("o", t(TensorElementType::Float32, &[1, 3, -1, -1])), None)
            .expect_err("two inputs");
        assert!(e.to_string().contains("2 inputs"), "{e}");
    }

    #[test]
    fn dynamic_without_scale_is_refused_with_a_remedy() {
        let e = contract_from(
            "m",
            &one("i", t(TensorElementType::Float16, &[1, 3, -1, -1])),
            &one("o", t(TensorElementType::Float16, &[1, 3, -1, -1])),
            None,
        )
        .expect_err("no scale");
        assert!(e.to_string().contains("metadata_props"), "{e}");
        let e = contract_from(
            "m",
            &one("i", t(TensorElementType::Float32, &[1, 3, 10, 10])),
            &one("o", t(TensorElementType::Float32, &[1, 3, 25, 25])),
            None,
        )
        .expect_err("fractional");
        assert!(e.to_string().contains("integer multiple"), "{e}");
    }
}
