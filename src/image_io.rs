//! Reading and writing image files (PNG, JPEG) as tightly packed RGBA8.

use std::path::Path;

use crate::error::{Error, Result};

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
    /// Reads a PNG or JPEG file.
    pub fn load(path: &Path) -> Result<Self> {
        let err = |message: String| Error::ImageFile { path: path.display().to_string(), message };
        let reader = image::ImageReader::open(path).map_err(|e| err(e.to_string()))?;
        let reader = reader.with_guessed_format().map_err(|e| err(e.to_string()))?;
        let img = reader.decode().map_err(|e| err(format!("cannot decode it: {e}")))?.to_rgba8();
        Ok(Self { width: img.width(), height: img.height(), pixels: img.into_raw() })
    }

    /// Resizes to `width × height` (Catmull-Rom).
    pub fn resized(&self, width: u32, height: u32) -> Result<Self> {
        if (width, height) == (self.width, self.height) {
            return Ok(self.clone());
        }
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
