//! The precision check's probe frame: a textured pattern through a model on the context's
//! provider, every output read back ([`probe_pixels`]), and what in the session's options
//! changes the result ([`probe_options`], part of the check's cache key).

#[cfg(feature = "cuda")]
use std::path::Path;

#[cfg(feature = "cuda")]
use crate::error::{Error, Result};
#[cfg(feature = "cuda")]
use crate::graph::precision::{CHECK_SIZE, Probe, ProbeOutputs, ProbeValues};
use crate::onnx::tensor::{Layout, TensorKind};

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// The textured probe pattern's colour value at `(x, y)` on channel `c`, in [0, 1].
pub(crate) fn pattern(x: u32, y: u32, c: u32) -> f32 {
    let (xf, yf, cf) = (x as f32, y as f32, c as f32);
    let wave = (0.37 * xf + 1.3 * cf).sin() * (0.23 * yf + 0.7 * cf).cos();
    let checker = if (x / 5 + y / 3 + c).is_multiple_of(2) { 0.08 } else { -0.08 };
    (0.5 + 0.38 * wave + checker).clamp(0.0, 1.0)
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// Element `i` of a `w × h` tensor of `kind`: its `(x, y, channel)`.
pub(crate) fn coords(kind: TensorKind, w: u32, h: u32, i: usize) -> (u32, u32, u32) {
    let (i, w, h, ch) = (i as u64, u64::from(w), u64::from(h), u64::from(kind.channels));
    let (x, y, c) = match kind.layout {
        Layout::Nchw => (i % w, i / w % h, i / (w * h) % ch),
        Layout::Nhwc => (i / ch % w, i / (ch * w) % h, i % ch),
    };
    (x as u32, y as u32, c as u32)
}

/// The probe frame of the model at `path` on `config`'s provider, ready to run: when run,
/// every output of the model ([`ProbeOutputs`]; image outputs as 8-bit colour values). Its
/// [`options`](Probe::options) name what in `config` changes the result
/// ([`probe_options`]). For the precision check.
#[cfg(feature = "cuda")]
pub(crate) fn probe_pixels(path: &Path, config: &crate::onnx::session::SessionConfig) -> Result<Probe<'static>> {
    debug_assert!(config.cuda_stream.is_none());
    let (path, config) = (path.to_path_buf(), config.clone());
    Ok(Probe::new(probe_options(&config), move || run_probe(&path, &config)))
}

/// What in `config` changes a probe frame's result, in words, for the check's cache key: the
/// caller's declarations about the model's tensors (they set the input values and how the
/// outputs are read) and the CUDA provider's options that choose its kernels. Not the device
/// ordinal (the key's GPU names the device) nor the CPU threads.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn probe_options(config: &crate::onnx::session::SessionConfig) -> String {
    use crate::onnx::session::{Provider, SessionConfig};
    // Every field named: one added to the config is weighed here (in the key, or said why not).
    let SessionConfig { provider, conv_search, prefer_nhwc, fuse_conv_bias, cuda_stream: _, threads: _, declared } =
        config;
    let provider = match provider {
        Provider::Cpu => "CPU",
        Provider::Cuda { .. } => "CUDA",
    };
    // By name, so that the order of a hash map does not change the key.
    let mut per_tensor: Vec<_> = declared.per_tensor.iter().collect();
    per_tensor.sort_by(|a, b| a.0.cmp(b.0));
    format!(
        "{provider}, conv search {conv_search:?}, prefer NHWC {prefer_nhwc}, fuse conv bias {fuse_conv_bias}, declared \
         {:?} {per_tensor:?}",
        declared.all
    )
}

/// One probe frame through the model at `path` on `config`'s provider: every output, in the
/// contract's order (image outputs as 8-bit colour values in the tensor's own order), at the
/// model's fixed input size or [`CHECK_SIZE`].
#[cfg(feature = "cuda")]
fn run_probe(path: &Path, config: &crate::onnx::session::SessionConfig) -> Result<ProbeOutputs> {
    use crate::onnx::tensor::Element;
    use ort::value::{DynValue, Tensor};
    // SAFETY: the config carries no stream of the caller's (the provider's own is used).
    let (mut session, contract) = unsafe { crate::onnx::session::create(path, config) }?;
    let (w, h) = contract.fixed_size.unwrap_or(CHECK_SIZE);
    let err = |e: ort::Error| Error::onnx("the precision check's run", e);
    let inputs = std::iter::once((contract.input_name.clone(), contract.input))
        .chain(contract.extra_inputs.iter().map(|t| (t.name.clone(), t.kind)));
    let mut values: Vec<(String, DynValue)> = Vec::new();
    for (n, (name, kind)) in inputs.enumerate() {
        let count = kind.elements(w, h) as usize;
        let value = |i: usize| {
            let (x, y, c) = coords(kind, w, h, i);
            kind.normalize(pattern(x + n as u32 * 7, y, c), c)
        };
        let shape = kind.shape(w, h).map(|d| d as usize);
        let tensor = match kind.element {
            Element::F32 => {
                Tensor::from_array((shape, (0..count).map(value).collect::<Vec<f32>>())).map_err(err)?.into_dyn()
            }
            Element::F16 => {
                Tensor::from_array((shape, (0..count).map(|i| half::f16::from_f32(value(i))).collect::<Vec<_>>()))
                    .map_err(err)?
                    .into_dyn()
            }
            Element::U8 => Tensor::from_array((
                shape,
                (0..count).map(|i| value(i).round().clamp(0.0, 255.0) as u8).collect::<Vec<_>>(),
            ))
            .map_err(err)?
            .into_dyn(),
        };
        values.push((name, tensor));
    }
    let outputs = session.run(values).map_err(err)?;
    // One output's values as f32, all finite.
    let floats = |name: &str| -> Result<Vec<f32>> {
        let out = outputs
            .get(name)
            .ok_or_else(|| Error::internal(format!("the precision check's run gave no output `{name}`")))?;
        let tensor: Vec<f32> = if let Ok((_, d)) = out.try_extract_tensor::<f32>() {
            d.to_vec()
        } else if let Ok((_, d)) = out.try_extract_tensor::<half::f16>() {
            d.iter().map(|v| v.to_f32()).collect()
        } else if let Ok((_, d)) = out.try_extract_tensor::<u8>() {
            d.iter().map(|v| f32::from(*v)).collect()
        } else if let Ok((_, d)) = out.try_extract_tensor::<f64>() {
            d.iter().map(|v| *v as f32).collect()
        } else if let Ok((_, d)) = out.try_extract_tensor::<i64>() {
            d.iter().map(|v| *v as f32).collect()
        } else if let Ok((_, d)) = out.try_extract_tensor::<i32>() {
            d.iter().map(|v| *v as f32).collect()
        } else if let Ok((_, d)) = out.try_extract_tensor::<bool>() {
            d.iter().map(|v| f32::from(u8::from(*v))).collect()
        } else {
            return Err(Error::internal(format!(
                "the precision check's output `{name}` is not a tensor of f32, f16, f64, u8, i32, i64 or bool"
            )));
        };
        let not_finite = tensor.iter().filter(|t| !t.is_finite()).count();
        if not_finite > 0 {
            return Err(Error::InvalidArgument(format!(
                "{} gave {not_finite} values of its output `{name}` that are not finite on the probe frame",
                path.display()
            )));
        }
        Ok(tensor)
    };
    let (ow, oh) = contract.scale.apply(w, h).ok_or_else(|| Error::internal("the probe's output size"))?;
    let images = std::iter::once((&contract.output_name, contract.output))
        .chain(contract.extra_outputs.iter().map(|t| (&t.name, t.kind)));
    let mut probed = Vec::new();
    for (name, kind) in images {
        probed.push((name.clone(), ProbeValues::Pixels(pixels(kind, ow, oh, &floats(name)?))));
    }
    for name in &contract.other_outputs {
        probed.push((name.clone(), ProbeValues::Values(floats(name)?)));
    }
    Ok(ProbeOutputs { size: (w, h), outputs: probed })
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
/// An image output `tensor` of `kind` at `w × h` as 8-bit colour values: its normalisation
/// undone, clamped, rounded; in the tensor's own order.
fn pixels(kind: TensorKind, w: u32, h: u32, tensor: &[f32]) -> Vec<u8> {
    tensor
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (_, _, c) = coords(kind, w, h, i);
            let (mul, add) = kind.normalization.affine(c);
            (((t - add) / mul).clamp(0.0, 1.0) * 255.0).round() as u8
        })
        .collect()
}
