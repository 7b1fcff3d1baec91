//! The model options' library types as the command line spells them, for the serialised form
//! of the options that `bench --serve` hands its worker (`serve --model-options`): each value
//! is the text its flag takes, read back by the flag's own parser.

use neural_frame::{ColorOrder, DeviceSelector, Layout, Normalization};
use serde::{Deserialize, Deserializer, Serializer};

fn text<'de, T: std::str::FromStr<Err = String>, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<String>::deserialize(d)?.map(|s| s.parse().map_err(serde::de::Error::custom)).transpose()
}

/// `--device`: `auto`, an index or a UUID.
pub(crate) mod device {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &DeviceSelector, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&match v {
            DeviceSelector::Auto => "auto".to_string(),
            DeviceSelector::Index(i) => i.to_string(),
            DeviceSelector::Uuid(u) => neural_frame::format_uuid(u),
        })
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DeviceSelector, D::Error> {
        Ok(text(d)?.unwrap_or_default())
    }
}

/// `--layout`: `nchw` or `nhwc`.
pub(crate) mod layout {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &Option<Layout>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(&v.map(|l| l.to_string().to_ascii_lowercase()))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Layout>, D::Error> {
        text(d)
    }
}

/// `--color`: `rgb` or `bgr`.
pub(crate) mod color {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &Option<ColorOrder>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(&v.map(|c| if c == ColorOrder::Bgr { "bgr" } else { "rgb" }))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ColorOrder>, D::Error> {
        text(d)
    }
}

/// `--range`: `0,1`, `-1,1`, `0,255`, or `mean=R,G,B;std=R,G,B`.
pub(crate) mod range {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &Option<Normalization>, s: S) -> Result<S::Ok, S::Error> {
        let triple = |v: [f32; 3]| format!("{},{},{}", v[0], v[1], v[2]);
        let text = match v {
            None => None,
            Some(Normalization::Unit) => Some("0,1".to_string()),
            Some(Normalization::Signed) => Some("-1,1".to_string()),
            Some(Normalization::Byte) => Some("0,255".to_string()),
            Some(Normalization::MeanStd { mean, std }) => Some(format!("mean={};std={}", triple(*mean), triple(*std))),
            Some(other) => return Err(serde::ser::Error::custom(format!("the range {other} has no --range form"))),
        };
        s.serialize_some(&text)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Normalization>, D::Error> {
        text(d)
    }
}
