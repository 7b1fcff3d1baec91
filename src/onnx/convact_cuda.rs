//! `ConvAct`'s CUDA kernel: a cuDNN fused plan per shape, chosen by timing every plan cuDNN
//! offers at the shape's first run (outside graph capture), kept for the process.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys;
use ort::ep::cuda::resource::{CuDNNHandle, DeviceId};
use ort::operator::{ComputeContext, Kernel};
use ort::value::DynTensorValueType;

use super::{ActKind, Attrs, OP, dims4, output_hw};
use crate::cuda::cudnn::{self, Activation, ConvActPtrs, ConvActShape, ConvDtype, FusedPlan};

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

/// Whether `stream` is being captured into a CUDA graph.
fn capturing(stream: *mut c_void) -> bool {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: stream is the provider's live stream; status is a valid out pointer.
    let r = unsafe { sys::cuStreamIsCapturing(stream as sys::CUstream, &mut status) };
    r != sys::CUresult::CUDA_SUCCESS || status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
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
        let key = format!("{device}:{}", shape.key());
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
                        // SAFETY: handle is the provider's cuDNN handle, bound to `stream`.
                        let mut plans = unsafe { cudnn::plans(handle, &shape) }.map_err(err)?;
                        if plans.is_empty() {
                            return Err(err(format!(
                                "cuDNN offers no fused engine for {}; run without the fused convolution \
                                 (--fuse-conv-act false, ContextBuilder::fuse_conv_act(false))",
                                shape.key()
                            )));
                        }
                        let most = plans.iter().map(FusedPlan::workspace_bytes).max().unwrap_or(0);
                        let ws = self.workspace(most)?;
                        // SAFETY: the pointers are this run's tensors on the provider's device; ws holds
                        // the largest workspace; the stream is not capturing.
                        let (best, times) =
                            unsafe { cudnn::autotune(handle, stream, &plans, &ptrs, ws, TUNE_RUNS) }.map_err(err)?;
                        log::info!(
                            "{OP} {}: {} plans timed, {} chosen ({:?} ms each)",
                            shape.key(),
                            plans.len(),
                            plans[best].describe(),
                            times
                        );
                        let p = Arc::new(plans.swap_remove(best));
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
