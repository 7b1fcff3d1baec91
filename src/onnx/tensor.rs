//! How an image tensor lays out a frame: axis order, element type, channel
//! count and order, and the value range. Pure data and arithmetic, no FFI: the
//! pre and post passes read [`TensorKind::pass_params`] and the tests build
//! their host references from the same description.

use std::fmt;

use serde::Serialize;

/// The order of an image tensor's axes.
///
/// ```
/// use neural_frame::Layout;
/// assert_eq!("nhwc".parse::<Layout>(), Ok(Layout::Nhwc));
/// assert_eq!(Layout::Nchw.to_string(), "NCHW");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Layout {
    /// `[1, C, H, W]`: one plane per channel (PyTorch's default).
    Nchw,
    /// `[1, H, W, C]`: channels interleaved per pixel (TensorFlow's default, "channels last").
    Nhwc,
}

/// The element type of an image tensor.
///
/// ```
/// assert_eq!(neural_frame::Element::F16.bytes(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum Element {
    /// 32-bit float.
    F32,
    /// 16-bit float (IEEE half).
    F16,
    /// 8-bit unsigned integer: the codes 0–255.
    U8,
}

/// The order of the colour channels in a tensor of 3 or 4 channels.
///
/// ```
/// use neural_frame::ColorOrder;
/// assert_eq!("BGR".parse::<ColorOrder>(), Ok(ColorOrder::Bgr));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ColorOrder {
    /// Red, green, blue (and alpha).
    Rgb,
    /// Blue, green, red (and alpha): OpenCV's order, and many Caffe-era models'.
    Bgr,
}

/// How a colour value `x` in [0, 1] becomes a tensor value `t`.
///
/// ```
/// use neural_frame::Normalization;
/// assert_eq!("-1,1".parse::<Normalization>(), Ok(Normalization::Signed));
/// let imagenet: Normalization = "mean=0.485,0.456,0.406;std=0.229,0.224,0.225".parse().unwrap();
/// assert_eq!(imagenet.affine(0), (1.0 / 0.229, -0.485 / 0.229));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[non_exhaustive]
pub enum Normalization {
    /// `t = x`: [0, 1] (the default for float tensors).
    Unit,
    /// `t = 2x − 1`: [−1, 1].
    Signed,
    /// `t = 255x`: [0, 255] (always for uint8 tensors).
    Byte,
    /// `t = (x − mean[c]) / std[c]` per colour channel (torchvision's convention); an alpha channel stays in [0, 1].
    MeanStd {
        /// Per channel, in the tensor's colour order as the model names it (R, G, B for an RGB model).
        mean: [f32; 3],
        /// Per channel, non-zero.
        std: [f32; 3],
    },
}

/// A full description of an image tensor: the model's input or output
/// ([`ModelContract::input`](crate::ModelContract::input)).
///
/// ```
/// use neural_frame::{ColorOrder, Layout, Normalization, TensorKind};
///
/// // A 960×540 frame as realesr-animevideov3's input tensor, and its size in bytes.
/// assert_eq!(TensorKind::NCHW_F32.shape(960, 540), [1, 3, 540, 960]);
/// assert_eq!(TensorKind::NCHW_F32.bytes(960, 540), 960 * 540 * 3 * 4);
/// assert_eq!(TensorKind::NHWC_U8_RGBA.describe(), "NHWC RGBA u8 [0, 255]");
///
/// // A channels-last BGR model that wants [-1, 1].
/// let k = TensorKind { layout: Layout::Nhwc, color: ColorOrder::Bgr, normalization: Normalization::Signed, ..TensorKind::NCHW_F32 };
/// assert_eq!(k.shape(4, 2), [1, 2, 4, 3]);
/// assert_eq!(k.describe(), "NHWC BGR f32 [-1, 1]");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TensorKind {
    /// Axis order.
    pub layout: Layout,
    /// Element type.
    pub element: Element,
    /// Channels: 3 (colour) or 4 (colour and alpha) for a frame.
    pub channels: u32,
    /// Colour channel order.
    pub color: ColorOrder,
    /// Value range.
    pub normalization: Normalization,
}

impl TensorKind {
    /// `[1, 3, H, W]` f32, RGB in [0, 1]: the usual PyTorch export.
    pub const NCHW_F32: Self = Self {
        layout: Layout::Nchw,
        element: Element::F32,
        channels: 3,
        color: ColorOrder::Rgb,
        normalization: Normalization::Unit,
    };
    /// `[1, 3, H, W]` f16, RGB in [0, 1].
    pub const NCHW_F16: Self = Self { element: Element::F16, ..Self::NCHW_F32 };
    /// `[1, H, W, 4]` u8, RGBA codes.
    pub const NHWC_U8_RGBA: Self = Self {
        layout: Layout::Nhwc,
        element: Element::U8,
        channels: 4,
        color: ColorOrder::Rgb,
        normalization: Normalization::Byte,
    };

    /// The tensor's shape for a W×H image.
    ///
    /// ```
    /// use neural_frame::TensorKind;
    /// assert_eq!(TensorKind::NCHW_F16.shape(640, 360), [1, 3, 360, 640]);
    /// assert_eq!(TensorKind::NHWC_U8_RGBA.shape(640, 360), [1, 360, 640, 4]);
    /// ```
    pub fn shape(self, width: u32, height: u32) -> [i64; 4] {
        let (w, h, c) = (width as i64, height as i64, self.channels as i64);
        match self.layout {
            Layout::Nchw => [1, c, h, w],
            Layout::Nhwc => [1, h, w, c],
        }
    }

    /// The tensor's size in bytes for a W×H image.
    ///
    /// ```
    /// use neural_frame::TensorKind;
    /// assert_eq!(TensorKind::NCHW_F32.bytes(2, 2), 2 * 2 * 3 * 4);
    /// assert_eq!(TensorKind::NCHW_F16.bytes(2, 2), 2 * 2 * 3 * 2);
    /// assert_eq!(TensorKind::NHWC_U8_RGBA.bytes(2, 2), 2 * 2 * 4);
    /// ```
    pub fn bytes(self, width: u32, height: u32) -> u64 {
        self.elements(width, height) * self.element.bytes()
    }

    /// The number of elements for a W×H image.
    pub fn elements(self, width: u32, height: u32) -> u64 {
        width as u64 * height as u64 * self.channels as u64
    }

    /// The buffer size the shaders need: whole 32-bit words.
    ///
    /// ```
    /// use neural_frame::TensorKind;
    /// // 3×3 pixels of f16 RGB are 54 bytes, rounded up to 14 words.
    /// assert_eq!(TensorKind::NCHW_F16.bytes(3, 3), 54);
    /// assert_eq!(TensorKind::NCHW_F16.buffer_bytes(3, 3), 56);
    /// ```
    pub fn buffer_bytes(self, width: u32, height: u32) -> u64 {
        self.bytes(width, height).div_ceil(4) * 4
    }

    /// ONNX Runtime's element type.
    pub(crate) fn element_type(self) -> ort::sys::ONNXTensorElementDataType {
        use ort::sys::ONNXTensorElementDataType as T;
        match self.element {
            Element::F32 => T::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
            Element::F16 => T::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
            Element::U8 => T::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8,
        }
    }

    /// The frame channel (0 R, 1 G, 2 B, 3 A) that tensor channel `c` holds (a
    /// tensor of 1 or 2 channels holds R and G whatever the colour order).
    ///
    /// ```
    /// use neural_frame::{ColorOrder, TensorKind};
    /// let bgr = TensorKind { color: ColorOrder::Bgr, ..TensorKind::NCHW_F32 };
    /// assert_eq!([0, 1, 2].map(|c| bgr.frame_channel(c)), [2, 1, 0]);
    /// ```
    pub fn frame_channel(self, c: u32) -> u32 {
        match (self.color, c) {
            (ColorOrder::Bgr, 0) if self.channels >= 3 => 2,
            (ColorOrder::Bgr, 2) => 0,
            _ => c,
        }
    }

    /// The tensor's value for colour value `x` in [0, 1] on tensor channel `c`
    /// (before rounding, for uint8).
    ///
    /// ```
    /// use neural_frame::{Normalization, TensorKind};
    /// let signed = TensorKind { normalization: Normalization::Signed, ..TensorKind::NCHW_F32 };
    /// assert_eq!(signed.normalize(0.25, 0), -0.5);
    /// ```
    pub fn normalize(self, x: f32, c: u32) -> f32 {
        let (mul, add) = self.normalization.affine(c);
        x * mul + add
    }

    /// A short description for reports: layout, channels, element type and range.
    ///
    /// ```
    /// assert_eq!(neural_frame::TensorKind::NCHW_F32.describe(), "NCHW RGB f32 [0, 1]");
    /// ```
    pub fn describe(self) -> String {
        let layout = match self.layout {
            Layout::Nchw => "NCHW",
            Layout::Nhwc => "NHWC",
        };
        let color = match (self.color, self.channels) {
            (ColorOrder::Rgb, 4) => "RGBA",
            (ColorOrder::Bgr, 4) => "BGRA",
            (ColorOrder::Bgr, 3) => "BGR",
            (_, 1) => "1-channel",
            (_, 2) => "2-channel",
            _ => "RGB",
        };
        let element = match self.element {
            Element::F32 => "f32",
            Element::F16 => "f16",
            Element::U8 => "u8",
        };
        format!("{layout} {color} {element} {}", self.normalization)
    }

    /// The push-constant words the passes read: NHWC flag, channel count, BGR
    /// flag, then `mul[4]` and `add[4]` as f32 bits (`t = x·mul + add`).
    pub(crate) fn pass_words(self) -> [u32; 11] {
        let mut w = [0u32; 11];
        w[0] = (self.layout == Layout::Nhwc) as u32;
        w[1] = self.channels;
        w[2] = (self.color == ColorOrder::Bgr) as u32;
        for c in 0..4 {
            let (mul, add) = self.normalization.affine(c as u32);
            w[3 + c] = mul.to_bits();
            w[7 + c] = add.to_bits();
        }
        w
    }
}

impl Element {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
            Self::U8 => 1,
        }
    }
}

impl Normalization {
    /// `(mul, add)` such that `t = x·mul + add` on tensor channel `c` (an alpha
    /// channel, `c` = 3, keeps [0, 1] under mean/std).
    pub fn affine(self, c: u32) -> (f32, f32) {
        match self {
            Self::Unit => (1.0, 0.0),
            Self::Signed => (2.0, -1.0),
            Self::Byte => (255.0, 0.0),
            Self::MeanStd { mean, std } => match c {
                0..=2 => (1.0 / std[c as usize], -mean[c as usize] / std[c as usize]),
                _ => (1.0, 0.0),
            },
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Nchw => "NCHW",
            Self::Nhwc => "NHWC",
        })
    }
}

impl fmt::Display for Normalization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unit => f.write_str("[0, 1]"),
            Self::Signed => f.write_str("[-1, 1]"),
            Self::Byte => f.write_str("[0, 255]"),
            Self::MeanStd { mean, std } => write!(f, "mean {mean:?} std {std:?}"),
        }
    }
}

impl std::str::FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "NCHW" => Ok(Self::Nchw),
            "NHWC" => Ok(Self::Nhwc),
            _ => Err(format!("layout `{s}` is not NCHW or NHWC")),
        }
    }
}

impl std::str::FromStr for ColorOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "RGB" | "RGBA" => Ok(Self::Rgb),
            "BGR" | "BGRA" => Ok(Self::Bgr),
            _ => Err(format!("colour order `{s}` is not RGB or BGR")),
        }
    }
}

impl Normalization {
    /// A mean/std's per-channel values from their text: three finite numbers
    /// separated by commas.
    ///
    /// ```
    /// use neural_frame::Normalization;
    /// assert_eq!(Normalization::parse_mean("0.5, 0.25,0"), Ok([0.5, 0.25, 0.0]));
    /// assert!(Normalization::parse_mean("0.5,0.5").is_err());
    /// ```
    pub fn parse_mean(s: &str) -> Result<[f32; 3], String> {
        let v: Vec<f32> = s
            .split(',')
            .map(|x| x.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("`{s}` is not three comma-separated numbers"))?;
        match v[..] {
            [a, b, c] if v.iter().all(|x| x.is_finite()) => Ok([a, b, c]),
            _ => Err(format!("`{s}` is not three comma-separated finite numbers")),
        }
    }

    /// A std's per-channel values from their text, as [`parse_mean`](Self::parse_mean)
    /// reads them, none of them 0.
    ///
    /// ```
    /// use neural_frame::Normalization;
    /// assert!(Normalization::parse_std("1,0,1").unwrap_err().contains("zero"));
    /// ```
    pub fn parse_std(s: &str) -> Result<[f32; 3], String> {
        let std = Self::parse_mean(s)?;
        if std.contains(&0.0) {
            return Err(format!("std {std:?} has a zero: every channel needs a non-zero std"));
        }
        Ok(std)
    }

    /// Mean/std from their texts, checked: three finite values each, no std of 0.
    ///
    /// ```
    /// use neural_frame::Normalization;
    /// assert!(Normalization::mean_std("0.5,0.5,0.5", "0.5,0.5,0.5").is_ok());
    /// assert!(Normalization::mean_std("0.5,0.5", "1,1,1").is_err());
    /// assert!(Normalization::mean_std("0,0,0", "1,0,1").unwrap_err().contains("zero"));
    /// ```
    pub fn mean_std(mean: &str, std: &str) -> Result<Self, String> {
        let mean = Self::parse_mean(mean).map_err(|e| format!("mean: {e}"))?;
        let std = Self::parse_std(std).map_err(|e| format!("std: {e}"))?;
        Ok(Self::MeanStd { mean, std })
    }
}

impl std::str::FromStr for Normalization {
    type Err = String;
    /// `0,1`, `-1,1`, `0,255`, or `mean=a,b,c;std=d,e,f`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        match t.as_str() {
            "0,1" => return Ok(Self::Unit),
            "-1,1" => return Ok(Self::Signed),
            "0,255" => return Ok(Self::Byte),
            _ => {}
        }
        if let Some((m, d)) = t.strip_prefix("mean=").and_then(|rest| rest.split_once(";std=")) {
            return Self::mean_std(m, d);
        }
        Err(format!("range `{s}` is not 0,1 or -1,1 or 0,255 (or mean=R,G,B;std=R,G,B)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_words_carry_layout_channels_order_and_affine() {
        let k = TensorKind {
            layout: Layout::Nhwc,
            color: ColorOrder::Bgr,
            normalization: Normalization::Signed,
            ..TensorKind::NCHW_F32
        };
        let w = k.pass_words();
        assert_eq!(&w[..3], &[1, 3, 1]);
        assert_eq!(f32::from_bits(w[3]), 2.0);
        assert_eq!(f32::from_bits(w[7]), -1.0);
        let u8k = TensorKind::NHWC_U8_RGBA.pass_words();
        assert_eq!((f32::from_bits(u8k[6]), f32::from_bits(u8k[10])), (255.0, 0.0));
        let ms = Normalization::mean_std("0.5,0.25,0", "0.5,0.5,2").expect("valid");
        assert_eq!(ms.affine(1), (2.0, -0.5));
        assert_eq!(ms.affine(3), (1.0, 0.0));
    }

    #[test]
    fn parsing_refuses_what_it_cannot_read() {
        assert!("CHW".parse::<Layout>().is_err());
        assert!("GBR".parse::<ColorOrder>().is_err());
        assert!("0,2".parse::<Normalization>().is_err());
        assert!("mean=1,2,3".parse::<Normalization>().is_err());
        assert!(Normalization::mean_std("nan,0,0", "1,1,1").is_err());
        assert_eq!(" 0, 255 ".parse::<Normalization>(), Ok(Normalization::Byte));
    }
}
