//! Helpers shared by the C API's tests.
#![allow(dead_code)]

use std::path::PathBuf;

use neural_frame::ash::vk;
use neural_frame::{Backend, NeuralFrameContext};

/// The repository's root (the workspace), where `.runtime/` and `models/` are.
pub fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The ×2 test model, fp32.
pub fn tiny_model() -> PathBuf {
    root().join("models/test/tiny-x2-f32.onnx")
}

/// The ONNX Runtime library the tests load: none where `ORT_DYLIB_PATH` names one (the
/// library reads it), else the repository's `.runtime/ort-gpu` or `.runtime/ort-cpu`
/// (scripts/setup.sh). The library's own search looks under the working directory (here
/// capi/) and the test's four parent directories, which miss the root in
/// `CARGO_TARGET_DIR=target/no-cuda`.
pub fn ort_library() -> Option<PathBuf> {
    if std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| !p.is_empty()) {
        return None;
    }
    ["ort-gpu", "ort-cpu"].iter().find_map(|flavour| {
        let dir = root().join(".runtime").join(flavour).join("onnxruntime/capi");
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libonnxruntime.so") && !n.contains("providers"))
            })
            .collect();
        found.sort();
        found.pop()
    })
}

/// A picture with something in every channel: gradients, a checkerboard, a disc and
/// pseudo-random texels, alpha varying too.
pub fn picture(width: u32, height: u32) -> Vec<u8> {
    let mut state = 0x2545_F491_u32;
    let mut out = Vec::with_capacity((width * height * 4) as usize);
    for y in 0..height {
        for x in 0..width {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let (cx, cy) = (x as i64 - width as i64 / 2, y as i64 - height as i64 / 2);
            let disc = cx * cx + cy * cy < (width.min(height) as i64 / 3).pow(2);
            let r = (x * 255 / width.max(2).saturating_sub(1).max(1)) as u8;
            let g = if (x / 4 + y / 4) % 2 == 0 { (y * 255 / height.max(2)) as u8 } else { 40 };
            let b = if disc { 230 } else { (state & 0xFF) as u8 };
            let a = (128 + (x + y) % 128) as u8;
            out.extend_from_slice(&[r, g, b, a]);
        }
    }
    out
}

/// The library's own `infer` of `texels` (RGBA8, `width`×`height`) on the CPU backend.
pub fn reference(model: &std::path::Path, width: u32, height: u32, texels: &[u8]) -> Vec<u8> {
    let mut builder = NeuralFrameContext::builder(model).backend(Backend::Cpu).frame_size(width, height);
    if let Some(library) = ort_library() {
        builder = builder.ort_library(library);
    }
    let mut ctx = builder.build().unwrap_or_else(|e| panic!("the reference context: {e}"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("an input image");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("an output image");
    ctx.upload(input, texels).expect("upload");
    ctx.infer(input, output).unwrap_or_else(|e| panic!("infer: {e}"));
    ctx.readback(output).expect("readback")
}

/// Asserts that two RGBA8 pictures differ by at most 1 of 255 in every channel.
pub fn assert_close(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {} bytes, the reference has {}", got.len(), want.len());
    let (worst, at) = got.iter().zip(want).enumerate().map(|(i, (a, b))| (a.abs_diff(*b), i)).max().unwrap_or((0, 0));
    assert!(worst <= 1, "{what}: byte {at} differs by {worst} (got {}, want {})", got[at], want[at]);
}
