//! Reading and writing image files (PNG, JPEG) as tightly packed RGBA8.

use std::path::Path;

use crate::error::{Error, Result};

/// The most host memory one RGBA8 picture may take: 1 GiB (16384 × 16384 pixels).
///
/// Pictures are refused above it before anything is allocated, so that a
/// header declaring 100000 × 100000 or a `--size` typo is an error, not an abort.
pub const MAX_PICTURE_BYTES: u64 = 1 << 30;

/// The longest side a picture may have, whatever its area: 65536 pixels.
/// It keeps `side × scale` far from `u32` overflow.
pub const MAX_PICTURE_SIDE: u32 = 1 << 16;

/// Refuses a `width × height` RGBA8 picture that would exceed
/// [`MAX_PICTURE_BYTES`] or [`MAX_PICTURE_SIDE`], naming the limit.
pub fn check_picture_size(width: u32, height: u32) -> Result<()> {
    let bytes = u64::from(width) * u64::from(height) * 4;
    if width > MAX_PICTURE_SIDE || height > MAX_PICTURE_SIDE || bytes > MAX_PICTURE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "a {width}×{height} picture is too large: it needs {:.1} GiB of host memory as RGBA8, beyond the \
             limit of {} GiB ({}×{} pixels) and {MAX_PICTURE_SIDE} pixels a side; use a smaller size",
            bytes as f64 / f64::from(1u32 << 30),
            MAX_PICTURE_BYTES >> 30,
            1u32 << 14,
            1u32 << 14,
        )));
    }
    Ok(())
}

/// An RGBA8 picture in host memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgba8 {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width × height × 4` bytes, row-major, R G B A.
    pub pixels: Vec<u8>,
}

impl Rgba8 {
    /// Reads a PNG or JPEG file. The size its header declares is checked
    /// against [`check_picture_size`] before any pixel is decoded.
    pub fn load(path: &Path) -> Result<Self> {
        let err = |message: String| Error::ImageFile { path: path.display().to_string(), message };
        let open = || -> Result<_> {
            let reader = image::ImageReader::open(path).map_err(|e| err(e.to_string()))?;
            reader.with_guessed_format().map_err(|e| err(e.to_string()))
        };
        let (width, height) = open()?.into_dimensions().map_err(|e| err(format!("cannot decode it: {e}")))?;
        check_picture_size(width, height).map_err(|e| err(format!("its header says {width}×{height}: {e}")))?;
        let mut reader = open()?;
        let mut limits = image::Limits::default();
        // The decoded picture plus its RGBA8 copy; the size is checked above.
        limits.max_alloc = Some(2 * MAX_PICTURE_BYTES);
        reader.limits(limits);
        let img = reader.decode().map_err(|e| err(format!("cannot decode it: {e}")))?.to_rgba8();
        Ok(Self { width: img.width(), height: img.height(), pixels: img.into_raw() })
    }

    /// Resizes to `width × height` (Catmull-Rom). The new size is checked
    /// against [`check_picture_size`] first.
    pub fn resized(&self, width: u32, height: u32) -> Result<Self> {
        if (width, height) == (self.width, self.height) {
            return Ok(self.clone());
        }
        check_picture_size(width, height)?;
        let img = image::RgbaImage::from_raw(self.width, self.height, self.pixels.clone())
            .ok_or_else(|| Error::InvalidArgument("pixel buffer does not match its size".into()))?;
        let out = image::imageops::resize(&img, width, height, image::imageops::FilterType::CatmullRom);
        Ok(Self { width, height, pixels: out.into_raw() })
    }

    /// Writes a PNG: to a temporary file beside `path`, then renamed into place,
    /// so a failure never leaves a half-written file.
    pub fn save_png(&self, path: &Path) -> Result<()> {
        let err = |message: String| Error::ImageFile { path: path.display().to_string(), message };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(format!("creating {}: {e}", dir.display())))?;
        }
        let name = path.file_name().ok_or_else(|| err("not a file name".into()))?.to_string_lossy();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let result = image::save_buffer_with_format(
            &tmp,
            &self.pixels,
            self.width,
            self.height,
            image::ExtendedColorType::Rgba8,
            image::ImageFormat::Png,
        )
        .map_err(|e| err(e.to_string()))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| err(e.to_string())));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picture_size_limits_are_named() {
        assert!(check_picture_size(16384, 16384).is_ok());
        assert!(check_picture_size(65536, 1).is_ok());
        for (w, h) in [(100_000, 100_000), (16385, 16384), (65537, 1), (u32::MAX, u32::MAX)] {
            let e = check_picture_size(w, h).expect_err("too large").to_string();
            assert!(e.contains("too large") && e.contains("1 GiB"), "{e}");
        }
    }
}
