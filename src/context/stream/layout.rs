//! How a stream's host frames are laid out ([`HostLayout`]), and the push
//! constants of the GPU conversion passes that turn them into the RGBA frames
//! the model's passes read and write (docs/stream.md, "Colour conversion").

use crate::context::passes::ConvertParams;
use crate::error::{Error, Result};

/// Chroma subsampling of planar YUV frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subsampling {
    /// Luma only (grey).
    Mono,
    /// 4:2:0: chroma at half width and half height.
    S420,
    /// 4:2:2: chroma at half width.
    S422,
    /// 4:4:4: chroma at full size.
    S444,
}

/// The matrix between R′G′B′ and Y′CbCr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YuvMatrix {
    /// ITU-R BT.601 (Kr 0.299, Kb 0.114).
    Bt601,
    /// ITU-R BT.709 (Kr 0.2126, Kb 0.0722), the default.
    Bt709,
    /// ITU-R BT.2020 non-constant luminance (Kr 0.2627, Kb 0.0593).
    Bt2020,
}

impl YuvMatrix {
    /// (Kr, Kb).
    pub fn kr_kb(self) -> (f32, f32) {
        match self {
            YuvMatrix::Bt601 => (0.299, 0.114),
            YuvMatrix::Bt709 => (0.2126, 0.0722),
            YuvMatrix::Bt2020 => (0.2627, 0.0593),
        }
    }
}

/// The range of YUV codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YuvRange {
    /// Luma 16–235 and chroma 16–240 (scaled by 2^(bits−8)): video's usual range.
    Limited,
    /// Every code: 0 to 2^bits − 1.
    Full,
}

/// Where subsampled chroma samples sit relative to the luma grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChromaSiting {
    /// Between the luma samples they cover (JPEG, y4m's `420jpeg`).
    Centre,
    /// Co-sited with the left luma column, centred vertically (MPEG-2, `420mpeg2`).
    Left,
    /// Co-sited with the top-left luma sample (`420paldv`).
    TopLeft,
}

/// Planar YUV frames: the Y plane, then U and V (not for [`Subsampling::Mono`]), then
/// alpha if `alpha`, each row-major and tightly packed; samples of more than 8 bits
/// take two bytes, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct YuvLayout {
    /// Chroma subsampling.
    pub subsampling: Subsampling,
    /// Bits a sample, 8 to 16.
    pub bits: u8,
    /// An alpha plane after V.
    pub alpha: bool,
    /// The matrix.
    pub matrix: YuvMatrix,
    /// The range.
    pub range: YuvRange,
    /// Where chroma sits (for subsampled chroma).
    pub siting: ChromaSiting,
}

/// How a host frame's bytes are laid out.
///
/// ```
/// use neural_frame::{ChromaSiting, HostLayout, Subsampling, YuvLayout, YuvMatrix, YuvRange};
///
/// let yuv420 = HostLayout::Yuv(YuvLayout {
///     subsampling: Subsampling::S420,
///     bits: 8,
///     alpha: false,
///     matrix: YuvMatrix::Bt709,
///     range: YuvRange::Limited,
///     siting: ChromaSiting::Centre,
/// });
/// assert_eq!(yuv420.frame_len(960, 540), 960 * 540 * 3 / 2);
/// assert_eq!(HostLayout::Rgb8.frame_len(5, 3), 45);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostLayout {
    /// RGBA, 4 bytes a pixel: copied as it is.
    Rgba8,
    /// RGB, 3 bytes a pixel (alpha 1 going in, dropped coming out).
    Rgb8,
    /// Planar YUV, converted with its matrix and range.
    Yuv(YuvLayout),
}

/// Sizes of a YUV frame's planes in samples: (luma, chroma width, chroma height, chroma planes).
fn yuv_planes(y: &YuvLayout, w: usize, h: usize) -> (usize, usize, usize, usize) {
    let (cw, ch) = match y.subsampling {
        Subsampling::Mono => (0, 0),
        Subsampling::S420 => (w.div_ceil(2), h.div_ceil(2)),
        Subsampling::S422 => (w.div_ceil(2), h),
        Subsampling::S444 => (w, h),
    };
    let planes = if y.subsampling == Subsampling::Mono { 0 } else { 2 };
    (w * h, cw, ch, planes)
}

impl HostLayout {
    /// Bytes of one `width × height` frame.
    pub fn frame_len(&self, width: u32, height: u32) -> usize {
        let (w, h) = (width as usize, height as usize);
        match self {
            HostLayout::Rgba8 => w * h * 4,
            HostLayout::Rgb8 => w * h * 3,
            HostLayout::Yuv(y) => {
                let (luma, cw, ch, planes) = yuv_planes(y, w, h);
                let samples = luma + planes * cw * ch + if y.alpha { luma } else { 0 };
                samples * if y.bits > 8 { 2 } else { 1 }
            }
        }
    }

    /// Whether the RGBA frames between this layout and the model are RGBA16F (deeper than 8 bits).
    pub(crate) fn deep(&self) -> bool {
        matches!(self, HostLayout::Yuv(y) if y.bits > 8)
    }

    /// Refuses what the conversion cannot do.
    pub(crate) fn check(&self) -> Result<()> {
        if let HostLayout::Yuv(y) = self
            && !(8..=16).contains(&y.bits)
        {
            return Err(Error::InvalidArgument(format!(
                "a YUV stream of {} bits a sample: streams take 8 to 16 bits",
                y.bits
            )));
        }
        Ok(())
    }

    /// The conversion's push constants for a `width × height` frame (none for RGBA8,
    /// which is copied as it is). `row` is filled in by the caller for the outgoing pass.
    pub(crate) fn params(&self, width: u32, height: u32) -> Option<ConvertParams> {
        let bytes = self.frame_len(width, height) as u32;
        let mut p = ConvertParams { width, height, bytes, maxval: 255, half: 128, ..ConvertParams::default() };
        match self {
            HostLayout::Rgba8 => return None,
            HostLayout::Rgb8 => {}
            HostLayout::Yuv(y) => {
                let (luma, cw, ch, planes) = yuv_planes(y, width as usize, height as usize);
                let size = if y.bits > 8 { 2 } else { 1 };
                let (kr, kb) = y.matrix.kr_kb();
                let (sub_x, sub_y) = match y.subsampling {
                    Subsampling::S420 => (1, 1),
                    Subsampling::S422 => (1, 0),
                    Subsampling::Mono | Subsampling::S444 => (0, 0),
                };
                let (site_x, site_y) = match y.siting {
                    ChromaSiting::Centre => (0.5f32, 0.5f32),
                    ChromaSiting::Left => (0.0, 0.5),
                    ChromaSiting::TopLeft => (0.0, 0.0),
                };
                let chroma_bytes = (cw * ch * size) as u32;
                let u_off = (luma * size) as u32;
                p.yuv = 1;
                p.wide = u32::from(y.bits > 8);
                p.maxval = (1u32 << y.bits) - 1;
                p.half = 1u32 << (y.bits - 1);
                (p.sub_x, p.sub_y) = (sub_x, sub_y);
                p.chroma = u32::from(planes > 0);
                p.alpha = u32::from(y.alpha);
                (p.chroma_w, p.chroma_h) = (cw.max(1) as u32, ch.max(1) as u32);
                p.u_off = u_off;
                p.v_off = u_off + chroma_bytes;
                p.a_off = u_off + planes as u32 * chroma_bytes;
                p.full = u32::from(y.range == YuvRange::Full);
                (p.kr, p.kb) = (kr.to_bits(), kb.to_bits());
                (p.site_x, p.site_y) = (site_x.to_bits(), site_y.to_bits());
                p.f16 = u32::from(y.bits > 8);
            }
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yuv(subsampling: Subsampling, bits: u8, alpha: bool) -> HostLayout {
        HostLayout::Yuv(YuvLayout {
            subsampling,
            bits,
            alpha,
            matrix: YuvMatrix::Bt709,
            range: YuvRange::Limited,
            siting: ChromaSiting::Centre,
        })
    }

    #[test]
    fn frame_lengths() {
        assert_eq!(yuv(Subsampling::S420, 8, false).frame_len(5, 3), 15 + 2 * 3 * 2);
        assert_eq!(yuv(Subsampling::S420, 10, false).frame_len(5, 3), 2 * (15 + 2 * 3 * 2));
        assert_eq!(yuv(Subsampling::S422, 8, false).frame_len(5, 3), 15 + 2 * 3 * 3);
        assert_eq!(yuv(Subsampling::S444, 8, true).frame_len(5, 3), 4 * 15);
        assert_eq!(yuv(Subsampling::Mono, 16, false).frame_len(5, 3), 30);
        assert_eq!(HostLayout::Rgba8.frame_len(5, 3), 60);
    }

    #[test]
    fn plane_offsets() {
        let p = yuv(Subsampling::S420, 8, false).params(5, 3).expect("converted");
        assert_eq!((p.u_off, p.v_off, p.bytes), (15, 21, 27));
        assert_eq!((p.chroma_w, p.chroma_h, p.sub_x, p.sub_y), (3, 2, 1, 1));
        let p = yuv(Subsampling::S444, 10, true).params(4, 2).expect("converted");
        assert_eq!((p.u_off, p.v_off, p.a_off, p.bytes), (16, 32, 48, 64));
        assert_eq!((p.maxval, p.half, p.wide, p.f16), (1023, 512, 1, 1));
        assert!(HostLayout::Rgba8.params(4, 2).is_none());
        assert!(yuv(Subsampling::S420, 17, false).check().is_err());
        assert!(yuv(Subsampling::S420, 7, false).check().is_err());
        assert!(yuv(Subsampling::S420, 12, false).check().is_ok());
    }
}
