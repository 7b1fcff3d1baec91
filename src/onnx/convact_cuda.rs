//! `ConvAct`'s CUDA kernel: a cuDNN fused plan per shape, chosen at the shape's first run
//! (outside graph capture) and kept for the process: rebuilt from the plan cache file when an
//! earlier process chose one for this cuDNN, GPU and shape, else by timing the first
//! [`cudnn::MAX_CANDIDATES`] plans cuDNN offers (and recorded in the file).

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use cudarc::driver::sys;
use ort::ep::cuda::resource::{CuDNNHandle, DeviceId};
use ort::operator::{ComputeContext, Kernel};
use ort::value::DynTensorValueType;

use super::{ActKind, Attrs, OP, dims4, output_hw};
use crate::cuda::cudnn::{self, Activation, ConvActPtrs, ConvActShape, ConvDtype, FusedPlan};
use crate::cuda::cudnn_cache;

/// Timed runs per plan when choosing.
const TUNE_RUNS: usize = 5;

/// The plan chosen for each device and shape in this process.
static CHOSEN: Mutex<Option<HashMap<String, Arc<FusedPlan>>>> = Mutex::new(None);

/// Device memory of the kernel's own (the plan's workspace).
struct Workspace {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // SAFETY: ptr came from cuMemAlloc and is freed once; the provider's work that used it
        // ended before ONNX Runtime releases its kernels.
        unsafe {
            sys::cuMemFree_v2(self.ptr);
        }
    }
}

pub(super) struct CudaKernel {
    a: Attrs,
    half: bool,
    /// The shape last run and its plan.
    current: Option<(String, Arc<FusedPlan>)>,
    workspace: Option<Workspace>,
}

// SAFETY: the kernel's device memory and plan are used by one ONNX Runtime call at a time.
unsafe impl Send for CudaKernel {}

impl Drop for CudaKernel {
    /// The last kernel of a plan takes it out of the process's map (its handle goes with the
    /// session): a handle made later at the same address never finds a plan of the old one.
    fn drop(&mut self) {
        let Some((key, plan)) = self.current.take() else { return };
        let mut chosen = CHOSEN.lock().unwrap_or_else(PoisonError::into_inner);
        // Under the lock: the map's reference and this one are all that is left.
        if Arc::strong_count(&plan) <= 2
            && let Some(map) = chosen.as_mut()
        {
            map.remove(&key);
        }
        drop(plan);
    }
}

impl CudaKernel {
    pub(super) fn new(a: Attrs, half: bool) -> Self {
        Self { a, half, current: None, workspace: None }
    }

    fn workspace(&mut self, bytes: usize) -> ort::Result<*mut c_void> {
        if bytes == 0 {
            return Ok(std::ptr::null_mut());
        }
        if self.workspace.as_ref().is_none_or(|w| w.bytes < bytes) {
            self.workspace = None;
            let mut ptr = 0;
            // SAFETY: ptr is a valid out pointer; ONNX Runtime made its CUDA context current.
            let r = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(ort::Error::new(format!("{OP}: cuMemAlloc of a {bytes}-byte workspace failed ({r:?})")));
            }
            self.workspace = Some(Workspace { ptr, bytes });
        }
        Ok(self.workspace.as_ref().map_or(std::ptr::null_mut(), |w| w.ptr as *mut c_void))
    }
}

/// The plan cache file: the one set for the process, else (for now) `cudnn-plans-v1.tsv` in
/// the precision cache's directory.
fn plan_cache() -> Option<PathBuf> {
    cudnn_cache::plan_cache_or(|| crate::onnx::precision::cache_dir().map(|d| d.join(cudnn_cache::FILE_NAME)))
}

/// The cache file and this shape's key in it (cuDNN version, GPU UUID, shape); `None` when
/// there is no file or the GPU cannot be identified.
fn cache_entry_key(shape: &ConvActShape) -> Option<(PathBuf, String)> {
    let path = plan_cache()?;
    let context = cudnn_cache::context_key(cudnn::version().ok()?)?;
    Some((path, format!("{context}/{}", shape.key())))
}

/// Whether `stream` is being captured into a CUDA graph.
fn capturing(stream: *mut c_void) -> bool {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: stream is the provider's live stream; status is a valid out pointer.
    let r = unsafe { sys::cuStreamIsCapturing(stream as sys::CUstream, &mut status) };
    r != sys::CUresult::CUDA_SUCCESS || status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
}

impl CudaKernel {
    /// The plan for a shape's first run in this process (not under capture): the cached choice
    /// rebuilt when it still builds, else the fastest of the candidates, then recorded.
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
            match unsafe { cudnn::plan_for(handle, shape, &entry.choice) } {
                Ok(plan) => {
                    log::info!(
                        "{OP} {}: {} from the plan cache (timed {:.4} ms when chosen), built in {:.2} s",
                        shape.key(),
                        plan.describe(),
                        entry.median_ms,
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(plan);
                }
                Err(e) => log::warn!(
                    "{OP} {}: the cached plan (engine {}, knobs [{}]) no longer builds, searching again: {e}",
                    shape.key(),
                    entry.choice.engine,
                    entry.choice.knobs_text()
                ),
            }
        }
        // SAFETY: handle is the provider's cuDNN handle, bound to `stream`.
        let mut plans = unsafe { cudnn::plans(handle, shape) }?;
        if plans.is_empty() {
            return Err(format!(
                "cuDNN offers no fused engine for {}; run without the fused convolution \
                 (--fuse-conv-act false, ContextBuilder::fuse_conv_act(false))",
                shape.key()
            ));
        }
        let most = plans.iter().map(FusedPlan::workspace_bytes).max().unwrap_or(0);
        let ws = self.workspace(most).map_err(|e| e.to_string())?;
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
        if let (Some((path, key)), Some(median_ms)) = (&cache, times[best]) {
            cudnn_cache::store(path, key, cudnn_cache::Entry { choice: plans[best].choice().clone(), median_ms });
        }
        Ok(plans.swap_remove(best))
    }
}

impl Kernel for CudaKernel {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        let err = |m: String| ort::Error::new(format!("{OP}: {m}"));
        let [n, h, w, c] = dims4(ctx, 0, "input X")?;
        let [k, r, s, wc] = dims4(ctx, 1, "weight W")?;
        if wc != c {
            return Err(err(format!("the input has {c} channels, the weight {wc}")));
        }
        let (oh, ow) =
            output_hw(&self.a, h, w, r, s).ok_or_else(|| err(format!("a {r}×{s} window does not fit {h}×{w}")))?;
        let stream = ctx.stream()?.ok_or_else(|| err("no CUDA stream".into()))?.as_ptr().cast::<c_void>();
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
        };
        let ptr = |i: usize| -> ort::Result<*const c_void> {
            match ctx.input(i)? {
                Some(v) => Ok(v.downcast::<DynTensorValueType>()?.data_ptr().cast()),
                None => Ok(std::ptr::null()),
            }
        };
        let (x, wt, b, slope) = (ptr(0)?, ptr(1)?, ptr(2)?, ptr(3)?);
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
        // plans are shared only among kernels of that handle, which outlives them all (a
        // session's kernels go with its provider). Another session's kernels choose again,
        // from the plan cache: one finalize a shape, no timing.
        let key = format!("{handle:p}:{device}:{}", shape.key());
        let plan = match &self.current {
            Some((k, p)) if *k == key => Arc::clone(p),
            _ => {
                let known =
                    CHOSEN.lock().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(|m| m.get(&key).cloned());
                let plan = match known {
                    Some(p) => p,
                    None => {
                        if capturing(stream) {
                            return Err(err(format!(
                                "the first run of {} began inside CUDA graph capture; run the model once before capture",
                                shape.key()
                            )));
                        }
                        let p = Arc::new(self.choose(handle, stream, &shape, &ptrs).map_err(err)?);
                        CHOSEN
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .get_or_insert_default()
                            .insert(key.clone(), Arc::clone(&p));
                        p
                    }
                };
                self.current = Some((key, Arc::clone(&plan)));
                plan
            }
        };
        let ws = self.workspace(plan.workspace_bytes())?;
        // SAFETY: as above; the plan was made for this shape and device.
        unsafe { plan.execute(handle, &ptrs, ws) }.map_err(err)
    }
}
