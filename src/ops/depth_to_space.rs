//! The `ai.neural_frame::DepthToSpace` operator that [`fuse_depth_to_space`](crate::graph::shuffle::fuse_depth_to_space)
//! puts in a model: X NHWC `[N, H, W, C·b²]`, plus Z of the same shape, B `[C·b²]` (by input
//! channel) and U NCHW `[N, C, H, W]` (nearest-upsampled: each value to its pixel's b × b
//! block) where given, to Y NCHW `[N, C, H·b, W·b]` in ONNX's DCR or CRD order. Registered with `ConvAct` in every
//! session. Attributes: `blocksize`, `mode`, and `channels` (C) where X has more channels a
//! pixel than C·b² (a last convolution's filters padded with zeros): the first C·b² are read.
//! Two kernels, float16 and float32:
//!
//! - **CUDA**: `nf_depth_to_space` (`src/cuda/tail.cu`), one pass over the memory on the
//!   provider's compute stream (so inside its CUDA graph too).
//! - **CPU**: the same index map in f32; it is how the rewrite is proven against the original
//!   model on ONNX Runtime's CPU provider in CI.

use ort::operator::{ComputeContext, Kernel, KernelContext, ShapeInferenceContext};

use crate::graph::edit::{DEPTH_TO_SPACE as OP, DOMAIN};
use crate::ops::kernel::{Axis, CpuKernel, Dims, Kind, input_dims, write_output};

/// The node's attributes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Attrs {
    pub(crate) block: i64,
    /// ONNX's CRD order; else DCR.
    pub(crate) crd: bool,
    /// The output channels C where X has more than C·b² a pixel; None: X's channels / b².
    pub(crate) channels: Option<i64>,
}

impl Attrs {
    /// The output channels for X's `stride` channels a pixel (None where they do not hold
    /// C·b²: fewer than `channels`·b², or, without it, not a multiple of b²).
    pub(crate) fn out_channels(&self, stride: i64) -> Option<i64> {
        let b2 = self.block * self.block;
        match self.channels {
            Some(c) => (c * b2 <= stride).then_some(c),
            None => (stride % b2 == 0).then_some(stride / b2),
        }
    }

    /// What X's channels a pixel must be, for an error.
    fn wants(&self) -> String {
        match self.channels {
            Some(c) => format!("at least {c}·{}²", self.block),
            None => format!("a multiple of {}²", self.block),
        }
    }
}

fn error(m: impl std::fmt::Display) -> ort::Error {
    ort::Error::new(format!("{DOMAIN}::{OP}: {m}"))
}

fn attrs(k: &KernelContext<'_>) -> ort::Result<Attrs> {
    let block = k.get::<i64>("blocksize").filter(|&b| b >= 1).ok_or_else(|| error("no blocksize ≥ 1"))?;
    let crd = match k.get::<String>("mode").as_deref() {
        Some("CRD") => true,
        Some("DCR") | None => false,
        Some(other) => return Err(error(format!("mode {other}, not DCR or CRD"))),
    };
    let channels = match k.get::<i64>("channels") {
        Some(c) if c < 1 => return Err(error(format!("channels {c}, not ≥ 1"))),
        c => c,
    };
    Ok(Attrs { block, crd, channels })
}

/// Y's index (NCHW) of X's element `k` of pixel (n, h, w) for `c` output channels.
fn source_channel(a: &Attrs, c: usize, ch: usize, i: usize, j: usize) -> usize {
    let b = a.block as usize;
    if a.crd { (ch * b + i) * b + j } else { (i * b + j) * c + ch }
}

/// The operator's optional inputs, as f32.
#[derive(Default)]
pub(crate) struct Addends<'a> {
    /// Z, X's shape.
    pub(crate) z: Option<&'a [f32]>,
    /// B `[c·b²]`, by input channel.
    pub(crate) bias: Option<&'a [f32]>,
    /// U NCHW `[n, c, h, w]`, by block.
    pub(crate) up: Option<&'a [f32]>,
}

/// The reference: `x` (plus z, bias by input channel, and up by block) NHWC `[n, h, w, cin]`
/// (the first c·b² channels a pixel read) → NCHW `[n, c, h·b, w·b]`, in f32, summed in that
/// order. `cin` holds c·b² ([`Attrs::out_channels`]).
pub(crate) fn depth_to_space_reference(
    a: &Attrs,
    x: &[f32],
    add: &Addends<'_>,
    [n, h, w, cin]: [usize; 4],
) -> Vec<f32> {
    let b = a.block as usize;
    let c = a.out_channels(cin as i64).expect("the caller checks the channels") as usize;
    let (oh, ow) = (h * b, w * b);
    let mut y = vec![0f32; n * c * oh * ow];
    for ni in 0..n {
        for hi in 0..h {
            for wi in 0..w {
                let px = ((ni * h + hi) * w + wi) * cin;
                for ch in 0..c {
                    for i in 0..b {
                        for j in 0..b {
                            let k = source_channel(a, c, ch, i, j);
                            let e = px + k;
                            let mut v = x[e];
                            if let Some(z) = add.z {
                                v += z[e];
                            }
                            if let Some(bias) = add.bias {
                                v += bias[k];
                            }
                            if let Some(up) = add.up {
                                v += up[((ni * c + ch) * h + hi) * w + wi];
                            }
                            y[((ni * c + ch) * oh + hi * b + i) * ow + wi * b + j] = v;
                        }
                    }
                }
            }
        }
    }
    y
}

/// The operator: X required, Z, B and U optional.
pub(crate) struct DepthToSpace;

impl Kind for DepthToSpace {
    const NAME: &'static str = OP;
    const REQUIRED: usize = 1;

    /// `[N, C, H·b, W·b]` from X `[N, H, W, C·b²]`.
    fn output_axes<'s>(ctx: &ShapeInferenceContext, inputs: &[Dims<'s>]) -> ort::Result<[Axis<'s>; 4]> {
        let [x] = inputs else { return Err(error("not one required input")) };
        let xs = x.dims;
        let b: i64 = ctx.attr("blocksize")?;
        if b < 1 {
            return Err(error("blocksize below 1"));
        }
        let a = Attrs { block: b, crd: false, channels: ctx.attr::<i64>("channels").ok() };
        let known = |d: i64, f: &dyn Fn(i64) -> i64| if d >= 0 { f(d) } else { -1 };
        let c = match (xs[3], a.channels) {
            (d, _) if d >= 0 => {
                a.out_channels(d).ok_or_else(|| error(format!("{d} input channels, not {}", a.wants())))?
            }
            (_, Some(c)) => c,
            _ => -1,
        };
        // Named after the input's (X is NHWC: N, H, W, C at 0, 1, 2, 3).
        Ok([
            Axis { dim: xs[0], from: x.name(0), how: String::new() },
            Axis { dim: c, from: x.name(3), how: format!("/{}", b * b) },
            Axis { dim: known(xs[1], &|h| h * b), from: x.name(1), how: format!("*{b}") },
            Axis { dim: known(xs[2], &|w| w * b), from: x.name(2), how: format!("*{b}") },
        ])
    }

    type Attrs = Attrs;

    fn attrs(kctx: &KernelContext<'_>) -> ort::Result<Attrs> {
        attrs(kctx)
    }

    #[cfg(feature = "cuda")]
    fn cuda_kernel<'a>(a: Attrs, half: bool) -> ort::Result<ort::operator::BoxedKernel<'a>> {
        Ok(Box::new(CudaKernel { a, half }))
    }
}

/// X's dims, checked against the attributes, Z's (which must match X's), B's (`[c·b²]`) and U's
/// (`[n, c, h, w]`): `[n, h, w, cin]`, and the output channels c.
fn shapes(ctx: &ComputeContext, a: &Attrs) -> ort::Result<([i64; 4], i64)> {
    let what = format!("{DOMAIN}::{OP}");
    let dims = |i: usize| input_dims(ctx, i, &what);
    let x = dims(0)?.ok_or_else(|| error("no input X"))?;
    let z = dims(1)?;
    let [n, h, w, cin] = x[..] else { return Err(error(format!("X has shape {x:?}, not rank 4"))) };
    if let Some(z) = &z
        && *z != x
    {
        return Err(error(format!("Z has shape {z:?}, X {x:?}: they must be the same")));
    }
    let c = a.out_channels(cin).ok_or_else(|| error(format!("{cin} input channels, not {}", a.wants())))?;
    let read = c * a.block * a.block;
    if let Some(b) = dims(2)?
        && b != [read]
    {
        return Err(error(format!("B has shape {b:?}, not [{read}]")));
    }
    if let Some(u) = dims(3)?
        && u != [n, c, h, w]
    {
        return Err(error(format!("U has shape {u:?}, not [{n}, {c}, {h}, {w}]")));
    }
    Ok(([n, h, w, cin], c))
}

/// Y's dims for X's `[n, h, w, _]` and `c` output channels ([`shapes`]).
fn output_dims(a: &Attrs, [n, h, w, _]: [i64; 4], c: i64) -> Vec<i64> {
    vec![n, c, h * a.block, w * a.block]
}

/// A kernel's run with every error and panic naming the operator ([`kernel::guarded`](crate::ops::kernel::guarded)).
pub(crate) fn guarded(run: impl FnOnce() -> ort::Result<()>) -> ort::Result<()> {
    crate::ops::kernel::guarded(|| format!("{DOMAIN}::{OP}:"), run)
}

impl Kernel for CpuKernel<Attrs> {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        guarded(|| self.run(ctx))
    }
}

impl CpuKernel<Attrs> {
    fn run(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        let (dims, c) = shapes(ctx, &self.a)?;
        let x = self.floats(ctx, 0)?.ok_or_else(|| error("no input X"))?;
        let (z, bias, up) = (self.floats(ctx, 1)?, self.floats(ctx, 2)?, self.floats(ctx, 3)?);
        let add = Addends { z: z.as_deref(), bias: bias.as_deref(), up: up.as_deref() };
        let y = depth_to_space_reference(&self.a, &x, &add, dims.map(|v| v as usize));
        write_output(ctx, output_dims(&self.a, dims, c), self.half, &y)
    }
}

/// The CUDA kernel.
#[cfg(feature = "cuda")]
struct CudaKernel {
    a: Attrs,
    half: bool,
}

/// Runs of the CUDA kernel, for the GPU tests (the CPU kernel is registered too).
#[cfg(all(test, feature = "cuda"))]
pub(crate) static CUDA_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "cuda")]
impl Kernel for CudaKernel {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        #[cfg(test)]
        CUDA_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        guarded(|| self.run(ctx))
    }
}

#[cfg(feature = "cuda")]
impl CudaKernel {
    fn run(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        use crate::cuda::kernels::{SHUFFLE_MAX, depth_to_space, shuffle_threads};
        use crate::cuda::params::ShuffleParams;

        let ([n, h, w, cin], c) = shapes(ctx, &self.a)?;
        let dims = output_dims(&self.a, [n, h, w, cin], c);
        let ptr = |i: usize| -> ort::Result<u64> {
            Ok(match ctx.input(i)? {
                Some(v) => v.downcast::<ort::value::DynTensorValueType>()?.data_ptr() as u64,
                None => 0,
            })
        };
        let (x, z, bias, up) = (ptr(0)?, ptr(1)?, ptr(2)?, ptr(3)?);
        let out = ctx.output(0, dims.clone())?.ok_or_else(|| error("no output"))?;
        let out = out.downcast::<ort::value::DynTensorValueType>()?.data_ptr() as u64;
        let fits = |v: i64| u32::try_from(v).map_err(|_| error(format!("a dimension of {v} is out of range")));
        let p = ShuffleParams {
            x,
            y: z,
            out,
            bias,
            up,
            n: fits(n)?,
            h: fits(h)?,
            w: fits(w)?,
            c: fits(c)?,
            block: fits(self.a.block)?,
            crd: u32::from(self.a.crd),
            element: u32::from(self.half),
            stride: fits(cin)?,
        };
        if shuffle_threads(&p) >= SHUFFLE_MAX {
            return Err(error(format!("{n}×{h}×{w}×{cin} is too large for one launch")));
        }
        let stream = ctx.stream()?.ok_or_else(|| error("no CUDA stream"))?.as_ptr().cast::<std::ffi::c_void>();
        let device = ctx.resource(ort::ep::cuda::resource::DeviceId)?;
        let ordinal = i32::try_from(device).map_err(|_| error(format!("CUDA device {device}")))?;
        // SAFETY: the stream is the provider's, of this device's primary context; the pointers
        // are this run's tensors of the shapes checked above, alive until the stream has run it.
        unsafe { depth_to_space(ordinal, stream, &p) }.map_err(error)
    }
}
