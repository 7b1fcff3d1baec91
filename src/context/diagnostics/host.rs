//! The naive host round trip the benchmark compares with: what a user without
//! interop writes in the simplest way (read the frame back with a staging
//! buffer made per call, build the tensor on the CPU, run ONNX Runtime with
//! host tensors, convert on the CPU, upload). Not a competent baseline: it is
//! kept, and labelled, as the path users start from.

use std::time::Instant;

use half::f16;
use serde::Serialize;

use crate::context::NeuralFrameContext;
use crate::context::backend::Engine;
use crate::context::registry::{InputId, OutputId};
use crate::error::{Error, Result};
use crate::onnx::{Element, Layout, TensorKind};

/// Medians of the host round trip's parts (ms), or one frame's parts.
///
/// ```no_run
/// use neural_frame::NeuralFrameContext;
///
/// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
/// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
/// let p = ctx.host_round_trip(input, output)?;
/// let total = p.readback_ms + p.to_tensor_ms + p.run_ms + p.from_tensor_ms + p.upload_ms;
/// println!("host round trip: {total:.1} ms, of which ONNX Runtime {:.1} ms", p.run_ms);
/// # Ok::<(), neural_frame::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct HostParts {
    /// Image → host (copy to a staging buffer, wait, copy out).
    pub readback_ms: f64,
    /// RGBA8 → tensor on the CPU.
    pub to_tensor_ms: f64,
    /// ONNX Runtime with host tensors (copies in and out included).
    pub run_ms: f64,
    /// Tensor → RGBA8 on the CPU.
    pub from_tensor_ms: f64,
    /// Host → output image.
    pub upload_ms: f64,
}

enum HostTensor {
    F32(Vec<f32>),
    F16(Vec<f16>),
    U8(Vec<u8>),
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Element index of pixel `px`, tensor channel `ch`, in a `plane`-pixel tensor of `kind`.
fn index(kind: TensorKind, plane: usize, px: usize, ch: usize) -> usize {
    match kind.layout {
        Layout::Nchw => ch * plane + px,
        Layout::Nhwc => px * kind.channels as usize + ch,
    }
}

fn host_tensor(kind: TensorKind, rgba: &[u8], w: u32, h: u32) -> HostTensor {
    let plane = (w * h) as usize;
    let mut v = vec![0f32; kind.elements(w, h) as usize];
    for (px, p) in rgba.chunks_exact(4).enumerate() {
        for ch in 0..kind.channels {
            let x = p[kind.frame_channel(ch) as usize] as f32 / 255.0;
            v[index(kind, plane, px, ch as usize)] = kind.normalize(x, ch);
        }
    }
    match kind.element {
        Element::F32 => HostTensor::F32(v),
        Element::F16 => HostTensor::F16(v.into_iter().map(f16::from_f32).collect()),
        Element::U8 => HostTensor::U8(v.into_iter().map(|x| x.round().clamp(0.0, 255.0) as u8).collect()),
    }
}

fn host_image(kind: TensorKind, v: &[f32], input: &[u8], (w, h): (u32, u32), (ow, oh): (u32, u32)) -> Vec<u8> {
    let (ow, oh) = (ow as usize, oh as usize);
    let plane = ow * oh;
    let mut out = vec![0u8; plane * 4];
    let q = |x: f32| (x.clamp(0.0, 1.0) * 255.0).round() as u8;
    for y in 0..oh {
        for x in 0..ow {
            let i = y * ow + x;
            let src = (y * h as usize / oh) * w as usize + x * w as usize / ow;
            let mut px = [0u8, 0, 0, input[4 * src + 3]];
            for ch in 0..kind.channels {
                let (mul, add) = kind.normalization.affine(ch);
                let value = q((v[index(kind, plane, i, ch as usize)] - add) / mul);
                if kind.channels == 1 {
                    px[..3].fill(value);
                } else {
                    px[kind.frame_channel(ch) as usize] = value;
                }
            }
            out[4 * i..4 * i + 4].copy_from_slice(&px);
        }
    }
    out
}

impl NeuralFrameContext {
    /// One frame through the naive host round trip, from `input` into `output`
    /// (both made by the context), with the times of its parts.
    ///
    /// ```no_run
    /// use neural_frame::NeuralFrameContext;
    ///
    /// # let mut ctx = NeuralFrameContext::builder("models/upscale.onnx").frame_size(960, 540).build()?;
    /// # let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// # let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM)?;
    /// let naive = ctx.host_round_trip(input, output)?;
    /// let zero_copy = ctx.infer(input, output)?;
    /// println!("model on host tensors {:.1} ms, zero-copy frame {:.1} ms", naive.run_ms, zero_copy.latency_ms);
    /// # Ok::<(), neural_frame::Error>(())
    /// ```
    pub fn host_round_trip(&mut self, input: InputId, output: OutputId) -> Result<HostParts> {
        self.retire_all()?;
        let mut parts = HostParts::default();
        let (w, h) = self.frame_size();
        let contract = self.contract.clone();
        let t = Instant::now();
        let pixels = self.readback_input(input)?;
        parts.readback_ms = ms_since(t);
        let t = Instant::now();
        let tensor = host_tensor(contract.input, &pixels, w, h);
        parts.to_tensor_ms = ms_since(t);
        let t = Instant::now();
        let session = match &mut self.res.engine {
            Engine::Cuda(e) => &mut e.session,
            Engine::Host(e) => &mut e.session,
        };
        let shape = contract.input.shape(w, h).map(|d| d as usize);
        let err = |e: ort::Error| Error::onnx("host round trip", e);
        let name = contract.input_name.as_str();
        let outputs = match tensor {
            HostTensor::F32(v) => {
                session.run(ort::inputs![name => ort::value::Tensor::from_array((shape, v)).map_err(err)?])
            }
            HostTensor::F16(v) => {
                session.run(ort::inputs![name => ort::value::Tensor::from_array((shape, v)).map_err(err)?])
            }
            HostTensor::U8(v) => {
                session.run(ort::inputs![name => ort::value::Tensor::from_array((shape, v)).map_err(err)?])
            }
        }
        .map_err(err)?;
        let value = &outputs[0];
        let out: Vec<f32> = if let Ok((_, d)) = value.try_extract_tensor::<f32>() {
            d.to_vec()
        } else if let Ok((_, d)) = value.try_extract_tensor::<f16>() {
            d.iter().map(|x| x.to_f32()).collect()
        } else {
            let (_, d) = value.try_extract_tensor::<u8>().map_err(err)?;
            d.iter().map(|x| *x as f32).collect()
        };
        drop(outputs);
        parts.run_ms = ms_since(t);
        let t = Instant::now();
        let rgba = host_image(contract.output, &out, &pixels, (w, h), self.output_size());
        parts.from_tensor_ms = ms_since(t);
        let t = Instant::now();
        self.upload_output(output, &rgba)?;
        parts.upload_ms = ms_since(t);
        Ok(parts)
    }

    fn readback_input(&mut self, input: InputId) -> Result<Vec<u8>> {
        let reg = self.res.registry.input(input)?;
        match &reg.resource {
            crate::context::registry::Resource::Image { owned: Some(image), .. } => {
                crate::vulkan::transfer::readback_image(image)
            }
            _ => Err(Error::InvalidArgument("the host round trip reads images the context created".into())),
        }
    }
}
