//! The `ai.neural_frame::ConvAct` operator that [`fuse_conv_act`](crate::graph::convact::fuse_conv_act)
//! puts in a model: registered with every session (it only runs where a rewritten model
//! has it). Two kernels:
//!
//! - **CUDA** (`CUDAExecutionProvider`, float16 and float32): one cuDNN operation graph,
//!   convolution → bias → activation, run on the provider's compute stream with its cuDNN
//!   handle, so it stays inside the provider's CUDA graph. At the first run of a shape every
//!   engine configuration cuDNN offers is timed and the fastest kept for the process
//!   (`src/cuda/cudnn.rs`). Where cuDNN offers none the run fails with a message that
//!   names the shape and the option that turns the rewrite off. A node with `input_layout`
//!   "nchw" (a model's input of few channels, read as it is) runs neural-frame's direct
//!   kernel (`nf_conv_nchw` in `src/cuda/conv.cu`) instead: cuDNN's fused engines would
//!   need the input's channels padded and transposed first.
//! - **CPU** (float16 and float32): a direct convolution in f32, the same formula; it is how
//!   the rewrite is proven against the original model on ONNX Runtime's CPU provider in CI.

use ort::operator::{ComputeContext, Kernel, KernelContext, ShapeInferenceContext};
use ort::value::DynTensorValueType;

use crate::graph::edit::CONV_ACT as OP;
use crate::ops::kernel::{Axis, CpuKernel, Dims, Kind, write_output};

/// The fallbacks' GPU test hook ([`crate::diagnostics::fail_fused_convolutions`]): 0 none,
/// 1 the CUDA kernels' creation fails, 2 their runs fail.
#[cfg(feature = "cuda")]
pub(crate) static FAIL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The error of a failure the test hook asked for.
#[cfg(feature = "cuda")]
pub(crate) fn failed_on_purpose() -> ort::Error {
    ort::Error::new(format!("{OP}: failed on purpose (diagnostics::fail_fused_convolutions)"))
}

/// The node's attributes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Attrs {
    /// Top, left, bottom, right.
    pub(crate) pads: [i64; 4],
    pub(crate) strides: [i64; 2],
    pub(crate) dilations: [i64; 2],
    pub(crate) act: ActKind,
    /// `input_layout` "nchw": X is NCHW `[N, C, H, W]` (a model's input with few channels, read
    /// as it is; the CUDA kernel is neural-frame's direct convolution, not cuDNN's).
    pub(crate) nchw_in: bool,
}

/// The activation after the bias.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ActKind {
    None,
    Relu,
    Leaky(f32),
    PRelu,
}

fn attrs(k: &KernelContext<'_>) -> ort::Result<Attrs> {
    let bad = |what: &str| ort::Error::new(format!("{OP}: attribute {what} is missing or malformed"));
    let four = k.get::<Vec<i64>>("pads").filter(|v| v.len() == 4).ok_or_else(|| bad("pads"))?;
    let two = |name: &str| -> ort::Result<[i64; 2]> {
        let v =
            k.get::<Vec<i64>>(name).filter(|v| v.len() == 2 && v.iter().all(|&x| x >= 1)).ok_or_else(|| bad(name))?;
        Ok([v[0], v[1]])
    };
    let act = match k.get::<String>("activation").as_deref() {
        Some("none") => ActKind::None,
        Some("relu") => ActKind::Relu,
        Some("leaky_relu") => ActKind::Leaky(k.get::<f32>("alpha").ok_or_else(|| bad("alpha"))?),
        Some("prelu") => ActKind::PRelu,
        _ => return Err(bad("activation")),
    };
    let nchw_in = nchw_input(k.get::<String>("input_layout").as_deref()).ok_or_else(|| bad("input_layout"))?;
    Ok(Attrs {
        pads: [four[0], four[1], four[2], four[3]],
        strides: two("strides")?,
        dilations: two("dilations")?,
        act,
        nchw_in,
    })
}

/// Whether `input_layout` says NCHW: absent or "nhwc" false, "nchw" true, anything else None.
fn nchw_input(layout: Option<&str>) -> Option<bool> {
    match layout {
        None | Some("nhwc") => Some(false),
        Some("nchw") => Some(true),
        Some(_) => None,
    }
}

/// The output's spatial size, or None where the window does not fit.
pub(crate) fn output_hw(a: &Attrs, h: i64, w: i64, r: i64, s: i64) -> Option<(i64, i64)> {
    let span = |size: i64, before: i64, after: i64, k: i64, dil: i64, stride: i64| {
        let reach = dil * (k - 1) + 1;
        let padded = size + before + after;
        (padded >= reach).then(|| (padded - reach) / stride + 1)
    };
    Some((
        span(h, a.pads[0], a.pads[2], r, a.dilations[0], a.strides[0])?,
        span(w, a.pads[1], a.pads[3], s, a.dilations[1], a.strides[1])?,
    ))
}

/// The reference convolution: `x` NHWC `[n, h, w, c]`, `wt` KRSC `[k, r, s, c]`, `b` and
/// `slope` `[k]`; returns NHWC `[n, oh, ow, k]` in f32.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_act_reference(
    a: &Attrs,
    x: &[f32],
    [n, h, w, c]: [usize; 4],
    wt: &[f32],
    [k, r, s]: [usize; 3],
    b: &[f32],
    slope: Option<&[f32]>,
    (oh, ow): (usize, usize),
) -> Vec<f32> {
    let mut y = vec![0f32; n * oh * ow * k];
    let (pt, pl) = (a.pads[0] as isize, a.pads[1] as isize);
    let (sh, sw) = (a.strides[0] as isize, a.strides[1] as isize);
    let (dh, dw) = (a.dilations[0] as isize, a.dilations[1] as isize);
    for ni in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let out = &mut y[((ni * oh + oy) * ow + ox) * k..][..k];
                for (ki, o) in out.iter_mut().enumerate() {
                    let mut acc = b[ki];
                    for ri in 0..r {
                        let iy = oy as isize * sh - pt + ri as isize * dh;
                        if iy < 0 || iy >= h as isize {
                            continue;
                        }
                        for si in 0..s {
                            let ix = ox as isize * sw - pl + si as isize * dw;
                            if ix < 0 || ix >= w as isize {
                                continue;
                            }
                            let px = &x[((ni * h + iy as usize) * w + ix as usize) * c..][..c];
                            let wk = &wt[((ki * r + ri) * s + si) * c..][..c];
                            acc += px.iter().zip(wk).map(|(p, q)| p * q).sum::<f32>();
                        }
                    }
                    *o = match (a.act, slope) {
                        (ActKind::None, _) => acc,
                        (ActKind::Relu, _) => acc.max(0.0),
                        (ActKind::Leaky(al), _) => {
                            if acc < 0.0 {
                                al * acc
                            } else {
                                acc
                            }
                        }
                        (ActKind::PRelu, Some(sl)) => {
                            if acc < 0.0 {
                                sl[ki] * acc
                            } else {
                                acc
                            }
                        }
                        (ActKind::PRelu, None) => acc,
                    };
                }
            }
        }
    }
    y
}

/// The operator: X and W required, B and the slope optional.
pub(crate) struct ConvAct;

impl Kind for ConvAct {
    const NAME: &'static str = OP;
    const REQUIRED: usize = 2;

    /// `[N, H', W', K]` from X `[N, H, W, C]` (`[N, C, H, W]` with `input_layout` "nchw"),
    /// W `[K, R, S, C]` and the attributes.
    fn output_axes<'s>(ctx: &ShapeInferenceContext, inputs: &[Dims<'s>]) -> ort::Result<[Axis<'s>; 4]> {
        let [x, w] = inputs else { return Err(ort::Error::new(format!("{OP}: not two inputs"))) };
        let (xs, ws) = (x.dims, w.dims);
        let (pads, strides, dilations): (Vec<i64>, Vec<i64>, Vec<i64>) =
            (ctx.attr("pads")?, ctx.attr("strides")?, ctx.attr("dilations")?);
        if pads.len() != 4 || strides.len() != 2 || dilations.len() != 2 {
            return Err(ort::Error::new(format!("{OP}: pads, strides or dilations of the wrong length")));
        }
        let layout = ctx.attr::<String>("input_layout").ok();
        let nchw_in = nchw_input(layout.as_deref())
            .ok_or_else(|| ort::Error::new(format!("{OP}: attribute input_layout is {layout:?}")))?;
        let a = Attrs {
            pads: [pads[0], pads[1], pads[2], pads[3]],
            strides: [strides[0], strides[1]],
            dilations: [dilations[0], dilations[1]],
            act: ActKind::None,
            nchw_in,
        };
        // X's height and width axes.
        let (hx, wx) = if nchw_in { (2, 3) } else { (1, 2) };
        let (oh, ow) = match (xs[hx], xs[wx], ws[1], ws[2]) {
            (h, w, r, s) if h >= 0 && w >= 0 && r >= 0 && s >= 0 => output_hw(&a, h, w, r, s).unwrap_or((-1, -1)),
            _ => (-1, -1),
        };
        // An unknown size goes out as a named symbol: a bare -1 would reach ONNX's shape inference
        // of the nodes after as a value (DepthToSpace ×4 made it -4). N, H', W' are named after
        // X's N, H, W and the window; K (W's axis 0) has no name here.
        let window = |axis: usize, k: i64| {
            let (p, st, d) = (&a.pads, a.strides[axis], a.dilations[axis]);
            // A window that keeps the size keeps the name (ONNX Runtime may then reuse buffers
            // between such layers).
            let keeps = k >= 1 && st == 1 && p[axis] + p[axis + 2] == d * (k - 1);
            if keeps { String::new() } else { format!("*conv{k}s{st}d{d}p{}.{}", p[axis], p[axis + 2]) }
        };
        Ok([
            Axis { dim: xs[0], from: x.name(0), how: String::new() },
            Axis { dim: oh, from: x.name(hx), how: window(0, ws[1]) },
            Axis { dim: ow, from: x.name(wx), how: window(1, ws[2]) },
            Axis { dim: ws[0], from: "", how: String::new() },
        ])
    }

    type Attrs = Attrs;

    fn attrs(kctx: &KernelContext<'_>) -> ort::Result<Attrs> {
        attrs(kctx)
    }

    #[cfg(feature = "cuda")]
    fn cuda_kernel<'a>(a: Attrs, half: bool) -> ort::Result<ort::operator::BoxedKernel<'a>> {
        if FAIL.load(std::sync::atomic::Ordering::Relaxed) == 1 {
            return Err(failed_on_purpose());
        }
        Ok(Box::new(cuda::CudaKernel::new(a, half)))
    }
}

/// A tensor input's dims, as four values.
fn dims4(ctx: &ComputeContext, i: usize, what: &str) -> ort::Result<[i64; 4]> {
    let v = ctx.input(i)?.ok_or_else(|| ort::Error::new(format!("{OP}: no {what}")))?;
    let v = v.downcast::<DynTensorValueType>()?;
    match v.dtype() {
        ort::value::ValueType::Tensor { shape, .. } if shape.len() == 4 => Ok([shape[0], shape[1], shape[2], shape[3]]),
        other => Err(ort::Error::new(format!("{OP}: {what} is {other}, not a rank-4 tensor"))),
    }
}

/// X's dims as `[N, H, W, C]`, whatever its layout.
pub(super) fn x_dims(ctx: &ComputeContext, a: &Attrs) -> ort::Result<[i64; 4]> {
    let d = dims4(ctx, 0, "input X")?;
    Ok(if a.nchw_in { [d[0], d[2], d[3], d[1]] } else { d })
}

/// NCHW values as NHWC, `[n, h, w, c]` being the NHWC dims.
fn nchw_to_nhwc(x: &[f32], [n, h, w, c]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for ni in 0..n {
        for ci in 0..c {
            for p in 0..h * w {
                out[(ni * h * w + p) * c + ci] = x[(ni * c + ci) * h * w + p];
            }
        }
    }
    out
}

impl Kernel for CpuKernel<Attrs> {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        let missing = |what: &str| ort::Error::new(format!("{OP}: no {what}"));
        let [n, h, w, c] = x_dims(ctx, &self.a)?;
        let [k, r, s, wc] = dims4(ctx, 1, "weight W")?;
        if wc != c {
            return Err(ort::Error::new(format!("{OP}: the input has {c} channels, the weight {wc}")));
        }
        let (oh, ow) = output_hw(&self.a, h, w, r, s)
            .ok_or_else(|| ort::Error::new(format!("{OP}: a {r}×{s} window does not fit {h}×{w}")))?;
        let x = self.floats(ctx, 0)?.ok_or_else(|| missing("input X"))?;
        let x = if self.a.nchw_in { nchw_to_nhwc(&x, [n, h, w, c].map(|v| v as usize)) } else { x };
        let wt = self.floats(ctx, 1)?.ok_or_else(|| missing("weight W"))?;
        // No B (omitted where the DepthToSpace tails took it): zeros.
        let b = self.floats(ctx, 2)?.unwrap_or_else(|| vec![0.0; k as usize]);
        let slope = self.floats(ctx, 3)?;
        if b.len() != k as usize || slope.as_ref().is_some_and(|sl| sl.len() != k as usize) {
            return Err(ort::Error::new(format!("{OP}: the bias and slope must hold {k} values")));
        }
        if self.a.act == ActKind::PRelu && slope.is_none() {
            return Err(missing("slope for prelu"));
        }
        let u = |v: i64| v as usize;
        let y = conv_act_reference(
            &self.a,
            &x,
            [u(n), u(h), u(w), u(c)],
            &wt,
            [u(k), u(r), u(s)],
            &b,
            slope.as_deref(),
            (u(oh), u(ow)),
        );
        write_output(ctx, vec![n, oh, ow, k], self.half, &y)
    }
}

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(all(test, feature = "cuda"))]
pub(crate) use cuda::{DIRECT_MMA_RUNS, DIRECT_RUNS};
