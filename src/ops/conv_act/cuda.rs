//! `ConvAct`'s CUDA kernel: a cuDNN fused plan per shape, chosen at the shape's first run
//! (outside graph capture) and kept for the process: rebuilt from the plan cache file when an
//! earlier process chose one for this cuDNN, GPU and shape, else by timing the first
//! [`cudnn::MAX_CANDIDATES`] plans cuDNN offers (and recorded in the file). A node that
//! reads an NCHW input (`input_layout` "nchw") runs neural-frame's direct kernel instead.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use cudarc::driver::sys;
use ort::ep::cuda::resource::{CuDNNHandle, DeviceId};
use ort::operator::{ComputeContext, Kernel};
use ort::value::DynTensorValueType;

use super::{ActKind, Attrs, OP, dims4, output_hw, x_dims};
use crate::cuda::cudnn::{self, Activation, ConvActPtrs, ConvActShape, ConvDtype, FusedPlan};
use crate::cuda::cudnn_cache;
use crate::cuda::params::{ELEMENT_F16, ELEMENT_F32};

/// Timed runs per plan when choosing.
const TUNE_RUNS: usize = 5;

/// Timed runs of a cached plan before it is taken.
const CHECK_RUNS: usize = 3;

/// Whether a cached plan that runs in `now_ms` is too slow against the `chosen_ms` it ran in
/// when it was chosen: more than 40 % and 10 µs slower (the timings share the GPU with the
/// first frames under fast start, so they move a little).
pub(super) fn slower_than_chosen(now_ms: f64, chosen_ms: f64) -> bool {
    now_ms > chosen_ms * 1.4 + 0.01
}

/// What becomes of a cached plan that was built and timed ([`cached_verdict`]).
#[derive(Debug, PartialEq)]
pub(super) enum Cached {
    /// Taken.
    Take,
    /// Taken though it timed slower than when chosen: the heuristics' own config is the plan
    /// that was timed then, so the GPU was busy beside it (fast start's frames, a serve
    /// worker's clients, another process), which a search would time under too.
    TakeBusy,
    /// Not taken (why): searched again.
    Search(String),
}

/// The verdict on a cached plan: `now_ms` its median now (`None`: it failed to run),
/// `chosen_ms` when it was chosen, `own` whether it is the heuristics' own config of the cached
/// engine and knobs ([`cudnn::plan_for`]).
pub(super) fn cached_verdict(now_ms: Option<f64>, chosen_ms: f64, own: bool) -> Cached {
    match now_ms {
        None => Cached::Search("it failed to run".into()),
        Some(ms) if !slower_than_chosen(ms, chosen_ms) => Cached::Take,
        Some(_) if own => Cached::TakeBusy,
        Some(ms) => Cached::Search(format!(
            "rebuilt from its engine's index (the heuristics no longer offer its config), it runs in {ms:.4} ms, \
             against {chosen_ms:.4} ms when chosen"
        )),
    }
}

/// The plan chosen for each device and shape in this process.
static CHOSEN: Mutex<Option<HashMap<String, Arc<FusedPlan>>>> = Mutex::new(None);

/// Device memory of the kernel's own (a plan's workspace), freed in the context it came from.
struct Workspace {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    context: sys::CUcontext,
}

// SAFETY: a CUDA context handle may be used from any thread (made current there); the memory
// is the device's.
unsafe impl Send for Workspace {}

impl Drop for Workspace {
    fn drop(&mut self) {
        // SAFETY: the context is the (primary) one the memory was allocated in, alive while the
        // provider is; it is made current around the free and popped after; ptr came from
        // cuMemAlloc and is freed once, after the kernel's last run (ONNX Runtime releases
        // kernels with their session, after its runs).
        let r = unsafe {
            let pushed = sys::cuCtxPushCurrent_v2(self.context);
            let freed = sys::cuMemFree_v2(self.ptr);
            if pushed == sys::CUresult::CUDA_SUCCESS {
                let mut popped = std::ptr::null_mut();
                sys::cuCtxPopCurrent_v2(&mut popped);
            }
            freed
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::warn!("{OP}: freeing a {}-byte workspace failed ({r:?})", self.bytes);
        }
    }
}

/// What a kernel's last plan was for: its cuDNN handle (as an address), device and shape.
type Current = (usize, u32, ConvActShape);

/// The kernel of one `ConvAct` node. ONNX Runtime runs a session's kernels one `Run` at a
/// time here (the context runs one frame's model at a time per session).
pub(super) struct CudaKernel {
    a: Attrs,
    half: bool,
    /// The key of the shape last run (handle, device, shape), and its plan.
    current: Option<(Current, Arc<FusedPlan>)>,
    /// Every plan this kernel ran (a captured graph may still launch an older one's kernels).
    used: HashMap<String, Arc<FusedPlan>>,
    /// The workspace in use (the last), and the ones it outgrew: never freed while the kernel
    /// lives, since a captured graph holds their addresses.
    workspaces: Vec<Workspace>,
}

impl Drop for CudaKernel {
    /// Each plan this kernel used leaves the process's map with the last kernel that holds it
    /// (its cuDNN handle goes with the session): a handle made later at the same address never
    /// finds a plan of the old one.
    fn drop(&mut self) {
        self.current = None;
        let mut chosen = CHOSEN.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, plan) in self.used.drain() {
            // Under the lock: the map's reference (the same plan) and this one are all that is left.
            if let Some(map) = chosen.as_mut()
                && map.get(&key).is_some_and(|m| Arc::ptr_eq(m, &plan))
                && Arc::strong_count(&plan) <= 2
            {
                map.remove(&key);
            }
            drop(plan);
        }
    }
}

impl CudaKernel {
    pub(super) fn new(a: Attrs, half: bool) -> Self {
        Self { a, half, current: None, used: HashMap::new(), workspaces: Vec::new() }
    }

    /// A workspace of at least `bytes` (null for 0). Allocated outside graph capture only: a
    /// shape's first run, which the caller checked.
    fn workspace(&mut self, bytes: usize) -> Result<*mut c_void, String> {
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        if self.workspaces.last().is_none_or(|w| w.bytes < bytes) {
            let (mut ptr, mut context) = (0, std::ptr::null_mut());
            // SAFETY: valid out pointers; ONNX Runtime made the device's primary context current
            // on this thread (cudaSetDevice at each run).
            let r = unsafe {
                let got = sys::cuCtxGetCurrent(&mut context);
                if got == sys::CUresult::CUDA_SUCCESS { sys::cuMemAlloc_v2(&mut ptr, bytes) } else { got }
            };
            if r != sys::CUresult::CUDA_SUCCESS || context.is_null() {
                return Err(format!("cuMemAlloc of a {bytes}-byte workspace failed ({r:?})"));
            }
            self.workspaces.push(Workspace { ptr, bytes, context });
        }
        Ok(self.workspaces.last().map_or(std::ptr::null_mut(), |w| w.ptr as *mut c_void))
    }

    /// The workspace for a plan that needs `bytes`, without allocating (a later run, which may be
    /// under capture): the current one is big enough, since the plan's first run made it so.
    fn current_workspace(&self, bytes: usize) -> Result<*mut c_void, String> {
        match self.workspaces.last() {
            _ if bytes == 0 => Ok(std::ptr::null_mut()),
            Some(w) if w.bytes >= bytes => Ok(w.ptr as *mut c_void),
            _ => Err(format!("no {bytes}-byte workspace (the plan's first run makes it)")),
        }
    }
}

/// The plan cache file: the one set for the process, else (for now) `cudnn-plans-v1.tsv` in
/// the precision cache's directory.
fn plan_cache() -> Option<PathBuf> {
    cudnn_cache::plan_cache_or(|| crate::files::model_cache_dir().map(|d| d.join(cudnn_cache::FILE_NAME)))
}

/// The cache file and this shape's key in it (cuDNN version, GPU UUID, shape); `None` when
/// there is no file or the GPU cannot be identified.
fn cache_entry_key(shape: &ConvActShape) -> Option<(PathBuf, String)> {
    let path = plan_cache()?;
    let context = cudnn_cache::context_key(cudnn::version().ok()?)?;
    Some((path, format!("{context}/{}", shape.key())))
}

/// Whether `stream` is being captured into a CUDA graph.
fn capturing(stream: *mut c_void) -> Result<bool, String> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: stream is the provider's live stream; status is a valid out pointer.
    let r = unsafe { sys::cuStreamIsCapturing(stream as sys::CUstream, &mut status) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuStreamIsCapturing failed ({r:?})"));
    }
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

impl CudaKernel {
    /// The plan for a shape's first run in this process (not under capture): the cached choice
    /// when it still builds and runs, else the fastest of the candidates, then recorded.
    fn choose(
        &mut self,
        handle: *mut c_void,
        stream: *mut c_void,
        shape: &ConvActShape,
        ptrs: &ConvActPtrs,
    ) -> Result<FusedPlan, String> {
        let cache = cache_entry_key(shape);
        if let Some((path, key)) = &cache
            && let Some(entry) = cudnn_cache::lookup(path, key)
        {
            let started = Instant::now();
            // SAFETY: handle is the provider's cuDNN handle, in the current context.
            let built = unsafe { cudnn::plan_for(handle, shape, &entry.choice) };
            // Timed runs prove it runs here (a plan that finalizes may still fail to execute),
            // and, for a config rebuilt from the engine's index, as fast as when it was chosen
            // (such a config may lack what the heuristics set beside the knobs: a slower one is
            // not taken). The heuristics' own config is the plan timed then: a slower time is
            // the GPU's other work (cached_verdict).
            let ran = built.and_then(|(plan, own)| {
                let ws = self.workspace(plan.workspace_bytes())?;
                // SAFETY: this run's tensors on the provider's device; ws holds the plan's
                // workspace; the stream is not capturing (the caller checked).
                let (_, times) =
                    unsafe { cudnn::autotune(handle, stream, std::slice::from_ref(&plan), ptrs, ws, CHECK_RUNS) }?;
                let now = times.first().copied().flatten();
                match cached_verdict(now, entry.median_ms, own) {
                    Cached::Search(why) => Err(format!("{why} ({})", plan.describe())),
                    verdict => Ok((plan, now.unwrap_or(f64::NAN), verdict == Cached::TakeBusy)),
                }
            });
            match ran {
                Ok((plan, ms, busy)) => {
                    log::info!(
                        "{OP} {}: {} from the plan cache (timed {:.4} ms when chosen, {ms:.4} ms now{}), built in {:.2} s",
                        shape.key(),
                        plan.describe(),
                        entry.median_ms,
                        if busy { ": the GPU busy beside it; the heuristics' own config, taken" } else { "" },
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(plan);
                }
                Err(e) => {
                    log::warn!(
                        "{OP} {}: the cached plan (engine {}, knobs [{}]) is not taken, searching again: {e}",
                        shape.key(),
                        entry.choice.engine,
                        entry.choice.knobs_text()
                    );
                    cudnn_cache::remove(path, key);
                }
            }
        }
        // SAFETY: handle is the provider's cuDNN handle, bound to `stream`.
        let mut plans = unsafe { cudnn::plans(handle, shape) }?;
        if plans.is_empty() {
            return Err(format!(
                "cuDNN offers no fused engine for {} (why: -vv or NEURAL_FRAME_TRACE=1; a library: its logger at debug level); run without the fused \
                 convolution (--fuse-conv-act false, CudaOptions::with_fuse_conv_act(false))",
                shape.key()
            ));
        }
        let most = plans.iter().map(FusedPlan::workspace_bytes).max().unwrap_or(0);
        let ws = self.workspace(most)?;
        // SAFETY: the pointers are this run's tensors on the provider's device; ws holds the
        // largest workspace; the stream is not capturing (the caller checked).
        let (best, times) = unsafe { cudnn::autotune(handle, stream, &plans, ptrs, ws, TUNE_RUNS) }?;
        log::info!(
            "{OP} {}: {} plans timed, {} chosen ({:?} ms each)",
            shape.key(),
            plans.len(),
            plans[best].describe(),
            times
        );
        if let (Some((path, key)), Some(median_ms)) = (&cache, times[best])
            && plans[best].cacheable()
        {
            cudnn_cache::store(path, key, cudnn_cache::Entry { choice: plans[best].choice().clone(), median_ms });
        }
        Ok(plans.swap_remove(best))
    }

    /// The plan for the shape on this handle and device: this kernel's last (compared without
    /// making the map's text key: the common case, every frame), another kernel's of the same
    /// handle, or chosen now.
    fn plan(
        &mut self,
        (handle, device): (*mut c_void, u32),
        stream: *mut c_void,
        shape: &ConvActShape,
        ptrs: &ConvActPtrs,
    ) -> Result<Arc<FusedPlan>, String> {
        if let Some(((h, d, sh), p)) = &self.current
            && (*h, *d) == (handle as usize, device)
            && sh == shape
        {
            return Ok(Arc::clone(p));
        }
        let key = format!("{handle:p}:{device}:{}", shape.key());
        let known = CHOSEN.lock().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(|m| m.get(&key).cloned());
        let plan = match known.or_else(|| self.used.get(&key).cloned()) {
            Some(p) => {
                // Its workspace, made before any capture: this kernel's may be smaller.
                if !capturing(stream)? {
                    self.workspace(p.workspace_bytes())?;
                }
                p
            }
            None => {
                if capturing(stream)? {
                    return Err(format!(
                        "the first run of {} began inside CUDA graph capture; run the model once before capture",
                        shape.key()
                    ));
                }
                let p = Arc::new(self.choose(handle, stream, shape, ptrs)?);
                let mut chosen = CHOSEN.lock().unwrap_or_else(PoisonError::into_inner);
                // Another kernel of the handle may have chosen meanwhile: the first one stays.
                Arc::clone(chosen.get_or_insert_default().entry(key.clone()).or_insert(p))
            }
        };
        self.used.insert(key, Arc::clone(&plan));
        self.current = Some(((handle as usize, device, shape.clone()), Arc::clone(&plan)));
        Ok(plan)
    }

    fn run(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        if self.a.nchw_in {
            return self.run_direct(ctx);
        }
        let err = |m: String| ort::Error::new(format!("{OP}: {m}"));
        let Dims { x: [n, h, w, c], kernel: [k, r, s], out: (oh, ow), stream } = self.dims(ctx)?;
        let handle = ctx.resource(CuDNNHandle)?.cast_mut().cast::<c_void>();
        let device = ctx.resource(DeviceId)?;
        let shape = ConvActShape {
            n,
            c,
            h,
            w,
            k,
            r,
            s,
            pads: self.a.pads,
            strides: self.a.strides,
            dilations: self.a.dilations,
            dtype: if self.half { ConvDtype::F16 } else { ConvDtype::F32 },
            activation: match self.a.act {
                ActKind::None => Activation::None,
                ActKind::Relu => Activation::Relu,
                ActKind::Leaky(al) => Activation::LeakyRelu(al),
                ActKind::PRelu => Activation::PRelu,
            },
            // The DepthToSpace tails take a last convolution's bias (shuffle.rs): B omitted.
            bias: ctx.input(2)?.is_some(),
        };
        let input = |i: usize| input_ptr(ctx, i);
        let ((x, _), (wt, _), (b, nb), (slope, ns)) = (input(0)?, input(1)?, input(2)?, input(3)?);
        if (!b.is_null() && nb != k) || (!slope.is_null() && ns != k) {
            return Err(err(format!("the bias ({nb} values) and slope ({ns}) must hold {k} values")));
        }
        if shape.activation == Activation::PRelu && slope.is_null() {
            return Err(err("no slope for prelu".into()));
        }
        let out = ctx.output(0, vec![n, oh, ow, k])?.ok_or_else(|| err("no output".into()))?;
        let out = out.downcast::<DynTensorValueType>()?;
        // The output's own memory (ValueRefMut gives no `&mut`; the pointer is ONNX Runtime's
        // GetTensorMutableData either way).
        let y = out.data_ptr().cast_mut().cast::<c_void>();
        let ptrs = ConvActPtrs { x, w: wt, b, slope, y };
        // A plan is finalized with one cuDNN handle (the provider's for this session's stream):
        // plans are shared only among kernels of that handle, which outlives them (a session's
        // kernels go with its provider). Another session's kernels choose again, from the plan
        // cache: one finalize a shape, no timing.
        let plan = self.plan((handle, device), stream, &shape, &ptrs).map_err(err)?;
        let ws = self.current_workspace(plan.workspace_bytes()).map_err(err)?;
        // SAFETY: the pointers are this run's tensors on the provider's device, of the shape's
        // sizes; ws holds the plan's workspace; the plan was made for this shape, device and handle.
        unsafe { plan.execute(handle, &ptrs, ws) }.map_err(err)
    }
}

/// Input `i`'s device pointer and element count (null and 0 where it is omitted).
fn input_ptr(ctx: &ComputeContext, i: usize) -> ort::Result<(*const c_void, i64)> {
    match ctx.input(i)? {
        Some(v) => {
            let v = v.downcast::<DynTensorValueType>()?;
            let count = match v.dtype() {
                ort::value::ValueType::Tensor { shape, .. } => shape.iter().product(),
                _ => 0,
            };
            Ok((v.data_ptr().cast(), count))
        }
        None => Ok((std::ptr::null(), 0)),
    }
}

impl CudaKernel {
    /// `input_layout` "nchw": neural-frame's direct convolution (`nf_conv_nchw`), which reads
    /// the NCHW input as it is; cuDNN's fused engines would need its channels padded to 8 and
    /// the input transposed first (three kernels, 0.20 ms at 540p on the H100, for the
    /// upscaler's first convolution).
    fn run_direct(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        use crate::cuda::kernels::{conv_nchw, conv_nchw_unfit};
        use crate::cuda::params::{CONV_ACT_LEAKY, CONV_ACT_NONE, CONV_ACT_PRELU, CONV_ACT_RELU, ConvParams};
        let err = |m: String| ort::Error::new(format!("{OP}: {m}"));
        let Dims { x: [n, h, w, c], kernel: [k, r, s], out: (oh, ow), stream } = self.dims(ctx)?;
        let device = ctx.resource(DeviceId)?;
        let ordinal = i32::try_from(device).map_err(|_| err(format!("CUDA device {device}")))?;
        let ((x, _), (wt, _), (b, nb), (slope, ns)) =
            (input_ptr(ctx, 0)?, input_ptr(ctx, 1)?, input_ptr(ctx, 2)?, input_ptr(ctx, 3)?);
        if (!b.is_null() && nb != k) || (!slope.is_null() && ns != k) {
            return Err(err(format!("the bias ({nb} values) and slope ({ns}) must hold {k} values")));
        }
        let (act, alpha) = match self.a.act {
            ActKind::None => (CONV_ACT_NONE, 0.0),
            ActKind::Relu => (CONV_ACT_RELU, 0.0),
            ActKind::Leaky(al) => (CONV_ACT_LEAKY, al),
            ActKind::PRelu if slope.is_null() => return Err(err("no slope for prelu".into())),
            ActKind::PRelu => (CONV_ACT_PRELU, 0.0),
        };
        let out = ctx.output(0, vec![n, oh, ow, k])?.ok_or_else(|| err("no output".into()))?;
        let out = out.downcast::<DynTensorValueType>()?;
        let y = out.data_ptr() as u64;
        let u =
            |v: i64| u32::try_from(v).map_err(|_| err(format!("a size of {v} (the direct convolution takes 32 bits)")));
        let i = |v: i64| i32::try_from(v).map_err(|_| err(format!("a padding of {v}")));
        let p = ConvParams {
            x: x as u64,
            w: wt as u64,
            bias: b as u64,
            slope: slope as u64,
            y,
            n: u(n)?,
            c: u(c)?,
            h: u(h)?,
            width: u(w)?,
            k: u(k)?,
            r: u(r)?,
            s: u(s)?,
            oh: u(oh)?,
            ow: u(ow)?,
            pad_top: i(self.a.pads[0])?,
            pad_left: i(self.a.pads[1])?,
            stride_h: u(self.a.strides[0])?,
            stride_w: u(self.a.strides[1])?,
            dil_h: u(self.a.dilations[0])?,
            dil_w: u(self.a.dilations[1])?,
            act,
            alpha,
            element: if self.half { ELEMENT_F16 } else { ELEMENT_F32 },
        };
        if let Some(why) = conv_nchw_unfit(&p) {
            return Err(err(format!("the direct convolution (input_layout nchw) cannot run {k}×{r}×{s}×{c}: {why}")));
        }
        DIRECT_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the pointers are this run's tensors on the provider's device (x NCHW, the weight
        // KRSC, y NHWC of the sizes above); the stream is the provider's, of the device's primary
        // context; conv_nchw_unfit found nothing wrong.
        let mma = unsafe { conv_nchw(ordinal, stream, &p) }.map_err(|e| err(e.to_string()))?;
        if mma {
            DIRECT_MMA_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

const _: () = assert!(crate::graph::convact::DIRECT_MAX_TAPS == crate::cuda::params::CONV_MAX_TAPS as i64);

/// Runs of the direct convolution in this process (the GPU tests check that it ran).
pub(crate) static DIRECT_RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Those of them that ran `nf_conv3x3_mma` (the GPU tests check which kernel ran).
pub(crate) static DIRECT_MMA_RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A node's shapes, checked against each other, and the provider's stream.
struct Dims {
    /// X's `[n, h, w, c]` (from NCHW where the node reads it so).
    x: [i64; 4],
    /// W's `[k, r, s]`.
    kernel: [i64; 3],
    /// The output's height and width.
    out: (i64, i64),
    /// The provider's compute stream.
    stream: *mut c_void,
}

impl CudaKernel {
    /// The node's shapes: W's channels X's, its window fitting X.
    fn dims(&self, ctx: &ComputeContext) -> ort::Result<Dims> {
        let err = |m: String| ort::Error::new(format!("{OP}: {m}"));
        let [n, h, w, c] = x_dims(ctx, &self.a)?;
        let [k, r, s, wc] = dims4(ctx, 1, "weight W")?;
        if wc != c {
            return Err(err(format!("the input has {c} channels, the weight {wc}")));
        }
        let (oh, ow) =
            output_hw(&self.a, h, w, r, s).ok_or_else(|| err(format!("a {r}×{s} window does not fit {h}×{w}")))?;
        let stream = ctx.stream()?.ok_or_else(|| err("no CUDA stream".into()))?.as_ptr().cast::<c_void>();
        Ok(Dims { x: [n, h, w, c], kernel: [k, r, s], out: (oh, ow), stream })
    }
}

impl Kernel for CudaKernel {
    /// No panic crosses into ONNX Runtime (ort's kernel trampoline does not catch one): it
    /// becomes the run's error, which names the operator.
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        if super::FAIL.load(std::sync::atomic::Ordering::Relaxed) == 2 {
            return Err(super::failed_on_purpose());
        }
        crate::ops::kernel::guarded(|| format!("{OP}:"), || self.run(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::{Cached, cached_verdict, slower_than_chosen};

    #[test]
    fn a_cached_plan_is_searched_again_only_when_it_fails_or_was_rebuilt_and_runs_slower() {
        assert_eq!(cached_verdict(Some(0.063), 0.0628, true), Cached::Take);
        assert_eq!(cached_verdict(Some(0.063), 0.0628, false), Cached::Take);
        // A serve worker's cached 64→64 plan at 600×400 while its client's first frames ran
        // (docs/performance.md): the heuristics' own config, so the GPU's other work.
        assert_eq!(cached_verdict(Some(0.1086), 0.0628, true), Cached::TakeBusy);
        let rebuilt = cached_verdict(Some(0.1086), 0.0628, false);
        assert!(
            matches!(&rebuilt, Cached::Search(why) if why.contains("0.1086") && why.contains("0.0628")),
            "{rebuilt:?}"
        );
        for own in [true, false] {
            assert_eq!(cached_verdict(None, 0.0628, own), Cached::Search("it failed to run".into()));
        }
    }

    #[test]
    fn a_cached_plan_slower_than_when_chosen_is_not_taken() {
        // The H200's 64→64 3×3 plan: 0.102 ms when chosen; the slow process ran the model
        // 1.4 ms a frame slower over 16 such convolutions.
        assert!(!slower_than_chosen(0.102, 0.102));
        assert!(!slower_than_chosen(0.13, 0.102), "noise under fast start");
        assert!(slower_than_chosen(0.19, 0.102));
        assert!(!slower_than_chosen(0.012, 0.003), "a few microseconds apart");
        assert!(slower_than_chosen(f64::INFINITY, 0.1));
    }
}
