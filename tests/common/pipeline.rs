//! Independent references for the pipeline tests: test pictures, ONNX Runtime
//! run directly on host tensors, and the expected output image computed on the CPU.
#![allow(dead_code)]

use std::path::Path;

use half::f16;
use neural_frame::onnx::{ModelContract, TensorKind};

/// A deterministic RGBA8 picture with structure, every channel varying, alpha included.
pub fn picture(width: u32, height: u32, seed: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((width * height * 4) as usize);
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(12345);
    for y in 0..height {
        for x in 0..width {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = (state >> 24) as i32 - 128;
            let r = ((x * 255 / width.max(1)) as i32 + noise / 8).clamp(0, 255) as u8;
            let g = ((y * 255 / height.max(1)) as i32 - noise / 8).clamp(0, 255) as u8;
            let b = (((x ^ y) * 7 + seed) & 0xff) as u8;
            let a = ((x * 5 + y * 11 + seed * 3) % 256) as u8;
            out.extend_from_slice(&[r, g, b, a]);
        }
    }
    out
}

/// The model's input tensor for `rgba`, computed on the host (as raw little-endian bytes).
pub fn input_tensor(kind: TensorKind, rgba: &[u8], width: u32, height: u32) -> Vec<u8> {
    let plane = (width * height) as usize;
    match kind {
        TensorKind::NhwcU8 => rgba.to_vec(),
        TensorKind::NchwF32 | TensorKind::NchwF16 => {
            let mut v = vec![0f32; 3 * plane];
            for i in 0..plane {
                for c in 0..3 {
                    v[c * plane + i] = rgba[i * 4 + c] as f32 / 255.0;
                }
            }
            if kind == TensorKind::NchwF32 {
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            } else {
                v.iter().flat_map(|x| f16::from_f32(*x).to_le_bytes()).collect()
            }
        }
    }
}

/// Runs the model with ONNX Runtime's CPU provider on host memory, as a user
/// without neural-frame would; returns the output tensor's bytes.
pub fn reference_output(model: &Path, contract: &ModelContract, rgba: &[u8], width: u32, height: u32) -> Vec<u8> {
    let env = neural_frame::onnx::runtime::environment().expect("ONNX Runtime loads");
    let mut session = ort::session::Session::builder(env)
        .expect("builder")
        .commit_from_file(model)
        .expect("model loads on the CPU provider");
    let shape = contract.input.shape(width, height).map(|d| d as usize);
    let bytes = input_tensor(contract.input, rgba, width, height);
    let name = contract.input_name.as_str();
    let out = match contract.input {
        TensorKind::NchwF32 => {
            let data: Vec<f32> = bytes
                .chunks(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let t = ort::value::Tensor::from_array((shape, data)).expect("tensor");
            session.run(ort::inputs![name => t]).expect("reference run")
        }
        TensorKind::NchwF16 => {
            let data: Vec<f16> = bytes.chunks(2).map(|c| f16::from_le_bytes([c[0], c[1]])).collect();
            let t = ort::value::Tensor::from_array((shape, data)).expect("tensor");
            session.run(ort::inputs![name => t]).expect("reference run")
        }
        TensorKind::NhwcU8 => {
            let t = ort::value::Tensor::from_array((shape, bytes)).expect("tensor");
            session.run(ort::inputs![name => t]).expect("reference run")
        }
    };
    let value = &out[0];
    match contract.output {
        TensorKind::NchwF32 => value
            .try_extract_tensor::<f32>()
            .expect("f32")
            .1
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        TensorKind::NchwF16 => value
            .try_extract_tensor::<f16>()
            .expect("f16")
            .1
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect(),
        TensorKind::NhwcU8 => value.try_extract_tensor::<u8>().expect("u8").1.to_vec(),
    }
}

/// Decodes a tensor's bytes to f32 values (u8 as is).
pub fn values(kind: TensorKind, bytes: &[u8]) -> Vec<f32> {
    match kind {
        TensorKind::NchwF32 => bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        TensorKind::NchwF16 => bytes
            .chunks(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        TensorKind::NhwcU8 => bytes.iter().map(|b| *b as f32).collect(),
    }
}

/// Bilinear alpha at output pixel (x, y), sample centres aligned, edges clamped.
fn alpha(rgba: &[u8], w: u32, h: u32, ow: u32, oh: u32, x: u32, y: u32) -> f32 {
    let sx = ((x as f32 + 0.5) * w as f32 / ow as f32 - 0.5).clamp(0.0, (w - 1) as f32);
    let sy = ((y as f32 + 0.5) * h as f32 / oh as f32 - 0.5).clamp(0.0, (h - 1) as f32);
    let (x0, y0) = (sx.floor() as u32, sy.floor() as u32);
    let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
    let (tx, ty) = (sx - x0 as f32, sy - y0 as f32);
    let a = |x: u32, y: u32| rgba[((y * w + x) * 4 + 3) as usize] as f32 / 255.0;
    let top = a(x0, y0) * (1.0 - tx) + a(x1, y0) * tx;
    let bottom = a(x0, y1) * (1.0 - tx) + a(x1, y1) * tx;
    top * (1.0 - ty) + bottom * ty
}

/// The output image the pipeline should produce from the reference tensor.
pub fn expected_image(contract: &ModelContract, tensor: &[u8], rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
    let s = contract.scale;
    let (ow, oh) = (w * s, h * s);
    let plane = (ow * oh) as usize;
    let v = values(contract.output, tensor);
    let q = |x: f32| (x.clamp(0.0, 1.0) * 255.0).round() as u8;
    let mut out = vec![0u8; plane * 4];
    for y in 0..oh {
        for x in 0..ow {
            let i = (y * ow + x) as usize;
            let px = match contract.output {
                TensorKind::NhwcU8 => [
                    v[i * 4] as u8,
                    v[i * 4 + 1] as u8,
                    v[i * 4 + 2] as u8,
                    v[i * 4 + 3] as u8,
                ],
                _ => [
                    q(v[i]),
                    q(v[plane + i]),
                    q(v[2 * plane + i]),
                    q(alpha(rgba, w, h, ow, oh, x, y)),
                ],
            };
            out[i * 4..i * 4 + 4].copy_from_slice(&px);
        }
    }
    out
}

/// Largest per-channel difference, and where it is.
pub fn max_diff(a: &[u8], b: &[u8], width: u32) -> (u8, u32, u32, usize) {
    assert_eq!(a.len(), b.len(), "sizes differ");
    let mut worst = (0u8, 0, 0, 0);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let d = x.abs_diff(*y);
        if d > worst.0 {
            let p = (i / 4) as u32;
            worst = (d, p % width, p / width, i % 4);
        }
    }
    worst
}
