//! PNG and JPEG files as RGBA8 pixels, for tools and examples (the library's `image_io`),
//! so that a C or C++ program needs no image library of its own.

use std::ffi::c_char;

use neural_frame::image_io::Rgba8;

use crate::context::rgba8_len;
use crate::{Fail, guard, guard_free, nf_status, non_null, path_arg, put};

/// Bytes before the pixels of a buffer `nf_image_read` hands out: its length.
const HEADER: usize = 16;

/// Reads a PNG or JPEG file (`path`, NUL-terminated) as RGBA8: `*width` x `*height`
/// texels, 4 bytes each, rows without padding, top row first (a picture without alpha
/// gets an opaque one). On success `*pixels` is a new buffer of width*height*4 bytes that
/// the caller frees with `nf_pixels_free`; on failure (`NF_STATUS_IMAGE`, naming the file)
/// nothing is written.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `path`, `width`, `height` or
/// `pixels` is NULL or `path` is empty; `NF_STATUS_IMAGE` where the file is missing, unreadable or
/// not a PNG or JPEG (the message names it); `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `width`, `height` and `pixels` are NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_image_read(
    path: *const c_char,
    width: *mut u32,
    height: *mut u32,
    pixels: *mut *mut u8,
) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { path_arg(path, "path") }?;
        non_null(width, "width")?;
        non_null(height, "height")?;
        non_null(pixels, "pixels")?;
        let picture = Rgba8::load(&path)?;
        let len = picture.pixels.len();
        let mut block = vec![0u8; HEADER + len].into_boxed_slice();
        block[..8].copy_from_slice(&(len as u64).to_ne_bytes());
        block[HEADER..].copy_from_slice(&picture.pixels);
        let base = Box::into_raw(block).cast::<u8>();
        // SAFETY: each out pointer is writable (the caller's contract); `base + HEADER` is
        // inside the block (or its end, for an empty picture, which the library refuses).
        unsafe {
            put(width, picture.width, "width")?;
            put(height, picture.height, "height")?;
            put(pixels, base.add(HEADER), "pixels")
        }
    })
}

/// Frees pixels of `nf_image_read`. NULL is ignored.
///
/// The last error message stays as it was.
///
/// Status: none (it returns nothing).
///
/// # Safety
/// `pixels` is NULL or a buffer of `nf_image_read` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_pixels_free(pixels: *mut u8) {
    if pixels.is_null() {
        return;
    }
    guard_free(|| {
        // SAFETY: nf_image_read handed out `base + HEADER` of a boxed block whose first 8
        // bytes hold the pixels' length (the caller's contract).
        unsafe {
            let base = pixels.sub(HEADER);
            let mut len = [0u8; 8];
            std::ptr::copy_nonoverlapping(base, len.as_mut_ptr(), 8);
            let len = usize::try_from(u64::from_ne_bytes(len)).map_err(|_| Fail::internal("a corrupt pixel block"))?;
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(base, HEADER + len)));
        }
        Ok(())
    });
}

/// Writes `width` x `height` RGBA8 texels (4 bytes each, rows without padding, top row
/// first) as a PNG file at `path` (NUL-terminated): to a temporary file beside it, then
/// renamed into place, so a failure never leaves half a file. The pixels are borrowed for
/// the call. Missing directories of `path` are created first (as `mkdir -p`, and left in
/// place if the write then fails); one that cannot be created (a file in the way, no
/// permission) gives `NF_STATUS_IMAGE` naming it. An existing file at `path` is replaced.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `path` or `pixels` is NULL, `path`
/// is empty, or a side is 0; `NF_STATUS_IMAGE` where the file cannot be written (the message
/// names the path): a directory of `path` that cannot be created, a directory not writable, a
/// full disk, `path` a directory; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `pixels` is NULL or points to
/// width*height*4 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_png_write(path: *const c_char, pixels: *const u8, width: u32, height: u32) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { path_arg(path, "path") }?;
        non_null(pixels, "pixels")?;
        if width == 0 || height == 0 {
            return Err(Fail::invalid(format!("a picture of {width}×{height} pixels is empty")));
        }
        let len = rgba8_len(width, height)?;
        // SAFETY: width·height·4 readable bytes (the caller's contract).
        let texels = unsafe { std::slice::from_raw_parts(pixels, len) }.to_vec();
        Ok(Rgba8 { width, height, pixels: texels }.save_png(&path)?)
    })
}
