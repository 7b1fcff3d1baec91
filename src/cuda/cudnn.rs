//! Convolution + bias + activation fused into one cuDNN 9 backend (graph API)
//! operation graph, with the first [`MAX_CANDIDATES`] engine configurations cuDNN
//! offers finalized into execution plans and timed, so the fastest can be kept;
//! or, when an earlier process chose one (`super::cudnn_cache`), that one plan
//! rebuilt from its engine's global index and knob choices ([`plan_for`]).
//!
//! Used only on the CUDA backend, by the `ConvAct` ONNX Runtime custom op (the
//! op's CUDA kernel calls [`plans`] or [`plan_for`], [`autotune`] and [`FusedPlan::execute`]).
//! `libcudnn.so.9` (`cudnn64_9.dll`) is opened at run time, once per process;
//! ONNX Runtime's CUDA provider has normally loaded it already. Errors are
//! `String`s naming the cuDNN call that failed, for the op to turn into ORT errors.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::cuda::cudnn_cache::PlanChoice;

/// The variant pack's unique ids of the graph's real tensors.
const UID_X: i64 = 1;
const UID_W: i64 = 2;
const UID_B: i64 = 3;
const UID_SLOPE: i64 = 4;
const UID_Y: i64 = 5;
/// Virtual (intermediate) tensors count up from here.
const UID_VIRTUAL: i64 = 100;
/// Pointer alignment promised for the real tensors (ORT's allocations are 256-byte aligned).
const ALIGNMENT: i64 = 16;
/// At most this many plans are finalized (and timed) per shape: runtime-fusion engines compile
/// kernels with NVRTC when their plan is finalized, often 0.2–1 s each.
pub(crate) const MAX_CANDIDATES: usize = 8;

// The loaded library, its numbers and an owned descriptor: cudnn_sys.rs.
mod sys;
pub(crate) use sys::version;
use sys::*;

/// The element type of X, W, B, the slope and Y; the arithmetic is f32 either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ConvDtype {
    F16,
    F32,
}

/// The activation after the bias.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Activation {
    None,
    Relu,
    LeakyRelu(f32),
    /// Per-output-channel slope tensor [K].
    PRelu,
}

/// One ConvAct problem: NHWC input, KRSC filter, group 1.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConvActShape {
    /// Input X [N,H,W,C] in memory (dense).
    pub(crate) n: i64,
    pub(crate) c: i64,
    pub(crate) h: i64,
    pub(crate) w: i64,
    /// Filter W [K,R,S,C] in memory (dense).
    pub(crate) k: i64,
    pub(crate) r: i64,
    pub(crate) s: i64,
    /// Top, left, bottom, right.
    pub(crate) pads: [i64; 4],
    pub(crate) strides: [i64; 2],
    pub(crate) dilations: [i64; 2],
    pub(crate) dtype: ConvDtype,
    pub(crate) activation: Activation,
    /// Whether a bias B [K] is added (a node without one runs the convolution alone, or with
    /// its activation: cuDNN offers its precompiled convolution engines for a graph of one).
    pub(crate) bias: bool,
}

impl ConvActShape {
    /// The output's (H', W'): `(H + pad_top + pad_bottom - dilation·(R-1) - 1) / stride + 1`, rounded down.
    pub(crate) fn output_hw(&self) -> (i64, i64) {
        let out = |size: i64, pre: i64, post: i64, k: i64, d: i64, st: i64| {
            (size + pre + post - d * (k - 1) - 1).div_euclid(st.max(1)) + 1
        };
        (
            out(self.h, self.pads[0], self.pads[2], self.r, self.dilations[0], self.strides[0]),
            out(self.w, self.pads[1], self.pads[3], self.s, self.dilations[1], self.strides[1]),
        )
    }

    /// A stable text key of every field, for caches (LeakyRelu's alpha by its bits).
    pub(crate) fn key(&self) -> String {
        let dtype = match self.dtype {
            ConvDtype::F16 => "f16",
            ConvDtype::F32 => "f32",
        };
        let act = match self.activation {
            Activation::None => "none".to_string(),
            Activation::Relu => "relu".to_string(),
            Activation::LeakyRelu(a) => format!("leaky{:08x}", a.to_bits()),
            Activation::PRelu => "prelu".to_string(),
        };
        let Self { n, c, h, w, k, r, s, pads: [pt, pl, pb, pr], strides: [sh, sw], dilations: [dh, dw], .. } = self;
        // Without a bias the key says so; with one it is as it was before the bias could go.
        let bias = if self.bias { "" } else { "-nobias" };
        format!("n{n}c{c}h{h}w{w}-k{k}r{r}s{s}-p{pt}.{pl}.{pb}.{pr}-st{sh}.{sw}-d{dh}.{dw}-{dtype}-{act}{bias}")
    }

    fn validate(&self) -> Result<(), String> {
        let (oh, ow) = self.output_hw();
        let positive = [self.n, self.c, self.h, self.w, self.k, self.r, self.s, oh, ow];
        let ok = positive.iter().all(|&v| v > 0)
            && self.pads.iter().all(|&p| p >= 0)
            && self.strides.iter().chain(&self.dilations).all(|&v| v > 0);
        if ok { Ok(()) } else { Err(format!("invalid ConvAct shape {}", self.key())) }
    }
}

/// Device pointers of one execution (all on the device of the current CUDA context).
pub(crate) struct ConvActPtrs {
    pub(crate) x: *const c_void,
    pub(crate) w: *const c_void,
    /// Null where the shape has no bias.
    pub(crate) b: *const c_void,
    /// Null unless the activation is PRelu.
    pub(crate) slope: *const c_void,
    pub(crate) y: *mut c_void,
}

/// The descriptors of one finalized operation graph, kept alive for the plans made from it.
struct Graph {
    /// In creation order; destroyed in reverse.
    descs: Vec<Desc>,
    op_graph: *mut c_void,
}

// SAFETY: op_graph points to one of `descs` (Send + Sync, see Desc); it is only read.
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Sync for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        while self.descs.pop().is_some() {}
    }
}

/// Builds the operation graph's descriptors.
struct Builder {
    api: &'static Api,
    descs: Vec<Desc>,
    next_virtual: i64,
    io: i32,
}

impl Builder {
    fn keep(&mut self, d: Desc) -> *mut c_void {
        let raw = d.raw;
        self.descs.push(d);
        raw
    }

    /// A 4-d tensor [d0,d1,d2,d3] whose element (i0,i1,i2,i3) lies at Σ i·stride.
    fn tensor(&mut self, uid: i64, dims: [i64; 4], strides: [i64; 4], virt: bool) -> Result<*mut c_void, Fail> {
        let d = Desc::new(self.api, TENSOR_DESCRIPTOR)?;
        d.set(ATTR_TENSOR_DATA_TYPE, TYPE_DATA_TYPE, &[if virt { DATA_FLOAT } else { self.io }])?;
        d.set(ATTR_TENSOR_DIMENSIONS, TYPE_INT64, &dims)?;
        d.set(ATTR_TENSOR_STRIDES, TYPE_INT64, &strides)?;
        d.set(ATTR_TENSOR_UNIQUE_ID, TYPE_INT64, &[uid])?;
        d.set(ATTR_TENSOR_BYTE_ALIGNMENT, TYPE_INT64, &[ALIGNMENT])?;
        if virt {
            d.set(ATTR_TENSOR_IS_VIRTUAL, TYPE_BOOLEAN, &[true])?;
        }
        d.finalize("tensor")?;
        Ok(self.keep(d))
    }

    /// A virtual f32 intermediate of the output's shape.
    fn virtual_like(&mut self, dims: [i64; 4]) -> Result<*mut c_void, Fail> {
        let uid = self.next_virtual;
        self.next_virtual += 1;
        self.tensor(uid, dims, nhwc_strides(dims), true)
    }

    /// y = mode(x[, b]); `relu_slope` sets RELU_FWD's clips as the cuDNN frontend does
    /// (lower clip 0, upper clip FLT_MAX, lower-clip slope).
    fn pointwise(
        &mut self,
        mode: i32,
        x: *mut c_void,
        b: Option<*mut c_void>,
        y: *mut c_void,
        relu_slope: Option<f64>,
    ) -> Result<*mut c_void, Fail> {
        let pw = Desc::new(self.api, POINTWISE_DESCRIPTOR)?;
        pw.set(ATTR_POINTWISE_MODE, TYPE_POINTWISE_MODE, &[mode])?;
        pw.set(ATTR_POINTWISE_MATH_PREC, TYPE_DATA_TYPE, &[DATA_FLOAT])?;
        if let Some(slope) = relu_slope {
            pw.set(ATTR_POINTWISE_RELU_LOWER_CLIP, TYPE_DOUBLE, &[0.0f64])?;
            pw.set(ATTR_POINTWISE_RELU_UPPER_CLIP, TYPE_DOUBLE, &[f64::from(f32::MAX)])?;
            pw.set(ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, TYPE_DOUBLE, &[slope])?;
        }
        pw.finalize("pointwise")?;
        let pw = self.keep(pw);
        let op = Desc::new(self.api, OPERATION_POINTWISE_DESCRIPTOR)?;
        op.set_descs(ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &[pw])?;
        op.set_descs(ATTR_OPERATION_POINTWISE_XDESC, &[x])?;
        if let Some(b) = b {
            op.set_descs(ATTR_OPERATION_POINTWISE_BDESC, &[b])?;
        }
        op.set_descs(ATTR_OPERATION_POINTWISE_YDESC, &[y])?;
        op.finalize("pointwise operation")?;
        Ok(self.keep(op))
    }
}

/// Strides of a dense NHWC (or KRSC) tensor with logical dims [N,C,H,W] (or [K,C,R,S]).
fn nhwc_strides([_, c, h, w]: [i64; 4]) -> [i64; 4] {
    [h * w * c, 1, w * c, c]
}

/// The operation graph: conv → T1; T1 + B → T2; activation → Y. PRelu, y = max(t,0) + slope·min(t,0),
/// is P = relu(T2); D = T2 − P (= min(T2,0), exactly); M = D·slope; Y = P + M. Without a bias T2
/// is T1; without a bias or an activation the convolution writes Y.
fn build_graph(api: &'static Api, handle: *mut c_void, sh: &ConvActShape) -> Result<Graph, Fail> {
    let io = match sh.dtype {
        ConvDtype::F16 => DATA_HALF,
        ConvDtype::F32 => DATA_FLOAT,
    };
    let mut b = Builder { api, descs: Vec::with_capacity(32), next_virtual: UID_VIRTUAL, io };
    let (oh, ow) = sh.output_hw();
    let x_dims = [sh.n, sh.c, sh.h, sh.w];
    let w_dims = [sh.k, sh.c, sh.r, sh.s];
    let y_dims = [sh.n, sh.k, oh, ow];
    let chan_dims = [1, sh.k, 1, 1];
    let chan_strides = [sh.k, 1, sh.k, sh.k];
    let x = b.tensor(UID_X, x_dims, nhwc_strides(x_dims), false)?;
    let w = b.tensor(UID_W, w_dims, nhwc_strides(w_dims), false)?;
    let bias = if sh.bias { Some(b.tensor(UID_B, chan_dims, chan_strides, false)?) } else { None };
    let y = b.tensor(UID_Y, y_dims, nhwc_strides(y_dims), false)?;

    let conv = Desc::new(api, CONVOLUTION_DESCRIPTOR)?;
    conv.set(ATTR_CONVOLUTION_COMP_TYPE, TYPE_DATA_TYPE, &[DATA_FLOAT])?;
    conv.set(ATTR_CONVOLUTION_CONV_MODE, TYPE_CONVOLUTION_MODE, &[CROSS_CORRELATION])?;
    conv.set(ATTR_CONVOLUTION_SPATIAL_DIMS, TYPE_INT64, &[2i64])?;
    conv.set(ATTR_CONVOLUTION_PRE_PADDINGS, TYPE_INT64, &[sh.pads[0], sh.pads[1]])?;
    conv.set(ATTR_CONVOLUTION_POST_PADDINGS, TYPE_INT64, &[sh.pads[2], sh.pads[3]])?;
    conv.set(ATTR_CONVOLUTION_FILTER_STRIDES, TYPE_INT64, &sh.strides)?;
    conv.set(ATTR_CONVOLUTION_DILATIONS, TYPE_INT64, &sh.dilations)?;
    conv.finalize("convolution")?;
    let conv = b.keep(conv);

    let mut ops = Vec::with_capacity(6);
    let alone = !sh.bias && sh.activation == Activation::None;
    let t1 = if alone { y } else { b.virtual_like(y_dims)? };
    let op = Desc::new(api, OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)?;
    op.set_descs(ATTR_OPERATION_CONVOLUTION_FORWARD_X, &[x])?;
    op.set_descs(ATTR_OPERATION_CONVOLUTION_FORWARD_W, &[w])?;
    op.set_descs(ATTR_OPERATION_CONVOLUTION_FORWARD_Y, &[t1])?;
    op.set_descs(ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, &[conv])?;
    // FLOAT compute: alpha and beta as CUDNN_TYPE_FLOAT (the frontend uses DOUBLE only for DOUBLE compute).
    op.set(ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, TYPE_FLOAT, &[1.0f32])?;
    op.set(ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, TYPE_FLOAT, &[0.0f32])?;
    op.finalize("convolution forward operation")?;
    ops.push(b.keep(op));

    let biased = match bias {
        Some(bias) => {
            let biased = if sh.activation == Activation::None { y } else { b.virtual_like(y_dims)? };
            ops.push(b.pointwise(POINTWISE_ADD, t1, Some(bias), biased, None)?);
            biased
        }
        None => t1,
    };
    match sh.activation {
        Activation::None => {}
        Activation::Relu => ops.push(b.pointwise(POINTWISE_RELU_FWD, biased, None, y, Some(0.0))?),
        Activation::LeakyRelu(a) => {
            ops.push(b.pointwise(POINTWISE_RELU_FWD, biased, None, y, Some(f64::from(a)))?);
        }
        Activation::PRelu => {
            let slope = b.tensor(UID_SLOPE, chan_dims, chan_strides, false)?;
            let pos = b.virtual_like(y_dims)?;
            let neg = b.virtual_like(y_dims)?;
            let scaled = b.virtual_like(y_dims)?;
            ops.push(b.pointwise(POINTWISE_RELU_FWD, biased, None, pos, Some(0.0))?);
            ops.push(b.pointwise(POINTWISE_SUB, biased, Some(pos), neg, None)?);
            ops.push(b.pointwise(POINTWISE_MUL, neg, Some(slope), scaled, None)?);
            ops.push(b.pointwise(POINTWISE_ADD, pos, Some(scaled), y, None)?);
        }
    }

    let graph = Desc::new(api, OPERATIONGRAPH_DESCRIPTOR)?;
    graph.set(ATTR_OPERATIONGRAPH_HANDLE, TYPE_HANDLE, &[handle])?;
    graph.set_descs(ATTR_OPERATIONGRAPH_OPS, &ops)?;
    graph.finalize("operation graph")?;
    let op_graph = b.keep(graph);
    Ok(Graph { descs: b.descs, op_graph })
}

/// The engine configurations a heuristic mode offers (empty when it supports none).
fn heuristic(api: &'static Api, graph: &Graph, mode: i32) -> Result<Vec<Desc>, Fail> {
    let heur = Desc::new(api, ENGINEHEUR_DESCRIPTOR)?;
    heur.set_descs(ATTR_ENGINEHEUR_OPERATION_GRAPH, &[graph.op_graph])?;
    heur.set(ATTR_ENGINEHEUR_MODE, TYPE_HEUR_MODE, &[mode])?;
    match heur.finalize(&format!("engine heuristics, mode {mode}")) {
        Err(f) if f.not_supported() => {
            log::debug!("ConvAct: {}", f.message);
            return Ok(Vec::new());
        }
        r => r?,
    }
    let count = heur.count_descs(ATTR_ENGINEHEUR_RESULTS)?;
    heur.get_descs(ATTR_ENGINEHEUR_RESULTS, ENGINECFG_DESCRIPTOR, count)
}

/// Whether the engine's behaviour notes say it compiles its kernels at run time.
fn runtime_compiled(engine: &Desc) -> bool {
    let mut notes = [-1i32; 8];
    let n = engine.get(ATTR_ENGINE_BEHAVIOR_NOTE, TYPE_BEHAVIOR_NOTE, &mut notes).unwrap_or(0);
    notes[..n.min(notes.len())].contains(&BEHAVIOR_NOTE_RUNTIME_COMPILATION)
}

/// The most knob choices read back from an engine config where cuDNN does not say how many
/// it holds (CUDNN_KNOB_TYPE_COUNTS is 37 in cuDNN 9.1/9.2).
const MAX_KNOBS: usize = 48;

/// What identifies an engine config: its engine index and knob choices; whether it compiles
/// at run time; and whether every knob choice could be read (else its choice is not cached:
/// another process would rebuild the engine with other knobs than those timed).
struct EngineInfo {
    choice: PlanChoice,
    runtime: bool,
    complete: bool,
}

fn engine_info(cfg: &Desc) -> Result<EngineInfo, Fail> {
    let engine = cfg.get_descs(ATTR_ENGINECFG_ENGINE, ENGINE_DESCRIPTOR, 1)?;
    let engine = engine.first().ok_or_else(|| Fail::from("the engine config has no engine".to_string()))?;
    let index = engine.get_i64(ATTR_ENGINE_GLOBAL_INDEX)?;
    let runtime = runtime_compiled(engine);
    let knobs = (|| -> Result<Vec<(i32, i64)>, Fail> {
        let count = cfg.count_descs(ATTR_ENGINECFG_KNOB_CHOICES).unwrap_or(MAX_KNOBS);
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut knobs = Vec::with_capacity(count);
        for k in cfg.get_descs(ATTR_ENGINECFG_KNOB_CHOICES, KNOB_CHOICE_DESCRIPTOR, count)? {
            let mut ty = [0i32];
            k.get(ATTR_KNOB_CHOICE_KNOB_TYPE, TYPE_KNOB_TYPE, &mut ty)?;
            knobs.push((ty[0], k.get_i64(ATTR_KNOB_CHOICE_KNOB_VALUE)?));
        }
        Ok(knobs)
    })();
    let complete = knobs.is_ok();
    if let Err(f) = &knobs {
        log::debug!("ConvAct: engine {index}'s knob choices could not be read ({}); it is not cached", f.message);
    }
    Ok(EngineInfo { choice: PlanChoice { engine: index, knobs: knobs.unwrap_or_default() }, runtime, complete })
}

/// One finalized execution plan for a shape.
pub(crate) struct FusedPlan {
    /// The variant packs of the pointer sets run lately (one a node: the upscaler's 16 middle
    /// convolutions share a plan), at most [`PACKS`]; the lock also serialises executions.
    packs: Mutex<Vec<Pack>>,
    plan: Desc,
    _config: Desc,
    /// The engine and knob choices the config was built from ([`plan_for`]; empty for a
    /// config from the heuristics). Dropped after the plan and config, before the graph.
    _parts: Vec<Desc>,
    _graph: Arc<Graph>,
    workspace: usize,
    description: String,
    choice: PlanChoice,
    /// Whether the choice names every knob (only then is it written to the plan cache).
    complete: bool,
    prelu: bool,
    bias: bool,
}

/// The most variant packs a plan keeps (the oldest goes first).
const PACKS: usize = 64;

struct Pack {
    key: [usize; 6],
    desc: Desc,
}

// The op shares plans between threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<FusedPlan>();
};

impl FusedPlan {
    /// The workspace the plan needs, in bytes.
    pub(crate) fn workspace_bytes(&self) -> usize {
        self.workspace
    }

    /// E.g. "engine 3 (runtime compiled), knobs [24=1,25=0], workspace 0 B".
    pub(crate) fn describe(&self) -> &str {
        &self.description
    }

    /// The engine and knob choices the plan was built from (what the plan cache records).
    pub(crate) fn choice(&self) -> &PlanChoice {
        &self.choice
    }

    /// Whether [`choice`](Self::choice) names every knob of the config (else it is not cached).
    pub(crate) fn cacheable(&self) -> bool {
        self.complete
    }

    /// Runs the graph on the handle's stream (the caller has set it with cudnnSetStream, or got
    /// the handle bound to the stream from ONNX Runtime). No host synchronisation and no device
    /// allocation, so it may run under CUDA graph capture (a host-side variant pack is built
    /// only when the pointers differ from the previous call's).
    ///
    /// # Safety
    /// `handle` is a live cudnnHandle_t of the current context; the pointers are device memory
    /// of the sizes the shape implies, 16-byte aligned; `workspace` holds at least
    /// [`Self::workspace_bytes`] bytes (may be null when that is 0).
    pub(crate) unsafe fn execute(
        &self,
        handle: *mut c_void,
        ptrs: &ConvActPtrs,
        workspace: *mut c_void,
    ) -> Result<(), String> {
        let api = self.plan.api;
        if handle.is_null()
            || ptrs.x.is_null()
            || ptrs.w.is_null()
            || (self.bias && ptrs.b.is_null())
            || ptrs.y.is_null()
        {
            return Err("ConvAct: a null cuDNN handle or tensor pointer".into());
        }
        if self.prelu && ptrs.slope.is_null() {
            return Err("ConvAct: PRelu without a slope pointer".into());
        }
        if self.workspace > 0 && workspace.is_null() {
            return Err(format!("ConvAct: the plan needs {} B of workspace and got none", self.workspace));
        }
        let key = [ptrs.x, ptrs.w, ptrs.b, ptrs.slope, ptrs.y.cast_const(), workspace.cast_const()].map(|p| p as usize);
        let mut packs = self.packs.lock().unwrap_or_else(PoisonError::into_inner);
        // Least recently used first: a hit moves to the back, a miss evicts the front.
        match packs.iter().position(|p| p.key == key) {
            Some(at) => {
                let hit = packs.remove(at);
                packs.push(hit);
            }
            None => {
                if packs.len() >= PACKS {
                    packs.remove(0);
                }
                packs.push(Pack { key, desc: self.variant_pack(ptrs, workspace)? });
            }
        }
        let Some(pack) = packs.last() else { return Err("ConvAct: no variant pack".into()) };
        // SAFETY: the plan and pack are finalized descriptors; the caller vouches for the handle
        // and the memory behind the pack's pointers.
        let s = unsafe { (api.execute)(handle, self.plan.raw, pack.desc.raw) };
        status(api, "cudnnBackendExecute", s).map_err(String::from)
    }

    fn variant_pack(&self, ptrs: &ConvActPtrs, workspace: *mut c_void) -> Result<Desc, Fail> {
        let mut uids = vec![UID_X, UID_W, UID_Y];
        let mut data = vec![ptrs.x.cast_mut(), ptrs.w.cast_mut(), ptrs.y];
        if self.bias {
            uids.push(UID_B);
            data.push(ptrs.b.cast_mut());
        }
        if self.prelu {
            uids.push(UID_SLOPE);
            data.push(ptrs.slope.cast_mut());
        }
        let d = Desc::new(self.plan.api, VARIANT_PACK_DESCRIPTOR)?;
        d.set(ATTR_VARIANT_PACK_UNIQUE_IDS, TYPE_INT64, &uids)?;
        d.set(ATTR_VARIANT_PACK_DATA_POINTERS, TYPE_VOID_PTR, &data)?;
        d.set(ATTR_VARIANT_PACK_WORKSPACE, TYPE_VOID_PTR, &[workspace])?;
        d.finalize("variant pack")?;
        Ok(d)
    }
}

/// The operation graph for the shape, finalized; `None` when cuDNN cannot fuse it.
fn graph_for(api: &'static Api, handle: *mut c_void, shape: &ConvActShape) -> Result<Option<Arc<Graph>>, String> {
    if handle.is_null() {
        return Err("ConvAct: null cuDNN handle".into());
    }
    shape.validate()?;
    match build_graph(api, handle, shape) {
        Ok(g) => Ok(Some(Arc::new(g))),
        Err(f) if f.not_supported() => {
            log::info!("ConvAct {}: cuDNN cannot fuse this graph: {}", shape.key(), f.message);
            Ok(None)
        }
        Err(f) => Err(format!("ConvAct {}: {}", shape.key(), f.message)),
    }
}

/// The order in which to try the offered configs, by their index in `offered` (mode A's
/// `a_count` first, then the fallback mode's): configs whose engine and knobs could not be
/// read (`None`) are left out, as are fallback configs whose engine mode A listed and repeats
/// of an engine and knobs already in the order.
pub(crate) fn candidate_order(offered: &[Option<PlanChoice>], a_count: usize) -> Vec<usize> {
    let a_count = a_count.min(offered.len());
    let engines_a: Vec<i64> = offered[..a_count].iter().flatten().map(|c| c.engine).collect();
    let mut order: Vec<usize> = Vec::new();
    for (i, choice) in offered.iter().enumerate() {
        let Some(choice) = choice else { continue };
        if i >= a_count && engines_a.contains(&choice.engine) {
            continue;
        }
        if order.iter().any(|&j| offered[j].as_ref() == Some(choice)) {
            continue;
        }
        order.push(i);
    }
    order
}

/// `finalize` applied to the candidates in order until `max` of them gave `Some` (the rest are
/// never tried); returns those results and how many candidates were tried.
pub(crate) fn first_finalized<C, P>(
    candidates: impl IntoIterator<Item = C>,
    max: usize,
    mut finalize: impl FnMut(C) -> Option<P>,
) -> (Vec<P>, usize) {
    let mut done = Vec::new();
    let mut tried = 0;
    for c in candidates {
        if done.len() >= max {
            break;
        }
        tried += 1;
        done.extend(finalize(c));
    }
    (done, tried)
}

/// The execution plan of `cfg` (built from `choice`; `runtime`: its engine compiles at run
/// time), with its workspace size and description.
fn plan_from(
    handle: *mut c_void,
    graph: &Arc<Graph>,
    cfg: Desc,
    parts: Vec<Desc>,
    choice: PlanChoice,
    (runtime, complete): (bool, bool),
    shape: &ConvActShape,
) -> Result<FusedPlan, Fail> {
    let plan = Desc::new(cfg.api, EXECUTION_PLAN_DESCRIPTOR)?;
    plan.set(ATTR_EXECUTION_PLAN_HANDLE, TYPE_HANDLE, &[handle])?;
    plan.set_descs(ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[cfg.raw])?;
    plan.finalize("execution plan")?;
    let bytes = plan.get_i64(ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?;
    let workspace = usize::try_from(bytes).map_err(|_| Fail::from(format!("workspace size {bytes}")))?;
    let runtime = if runtime { " (runtime compiled)" } else { "" };
    let knobs = if choice.knobs.is_empty() { String::new() } else { format!(", knobs [{}]", choice.knobs_text()) };
    Ok(FusedPlan {
        packs: Mutex::new(Vec::new()),
        plan,
        _config: cfg,
        _parts: parts,
        _graph: Arc::clone(graph),
        workspace,
        description: format!("engine {}{runtime}{knobs}, workspace {workspace} B", choice.engine),
        choice,
        complete,
        prelu: shape.activation == Activation::PRelu,
        bias: shape.bias,
    })
}

/// What the heuristics offer for a graph: engine configs of mode A, then of the fallback
/// mode, each with its engine and knob choices where they could be read; and how many came
/// from mode A.
struct Offered {
    configs: Vec<Option<Desc>>,
    infos: Vec<Option<EngineInfo>>,
    a_count: usize,
}

fn offered(api: &'static Api, graph: &Graph, shape: &ConvActShape) -> Result<Offered, String> {
    let (from_a, fallback) = match (heuristic(api, graph, HEUR_MODE_A), heuristic(api, graph, HEUR_MODE_FALLBACK)) {
        (Err(a), Err(f)) => return Err(format!("ConvAct {}: {}; {}", shape.key(), a.message, f.message)),
        (a, f) => (a.unwrap_or_else(|e| skip(e, shape)), f.unwrap_or_else(|e| skip(e, shape))),
    };
    let a_count = from_a.len();
    let configs: Vec<Option<Desc>> = from_a.into_iter().chain(fallback).map(Some).collect();
    let infos = configs
        .iter()
        .map(|cfg| {
            engine_info(cfg.as_ref()?)
                .map_err(|f| log::debug!("ConvAct {}: skipping an engine config: {}", shape.key(), f.message))
                .ok()
        })
        .collect();
    Ok(Offered { configs, infos, a_count })
}

/// Up to [`MAX_CANDIDATES`] plans for the shape: the operation graph finalized, the engine
/// configs of heuristics mode A, then those of the fallback mode whose engine mode A did not
/// list ([`candidate_order`]), each finalized into a plan in that order until that many have
/// finalized (configs whose plan fails to finalize are skipped). `Ok(empty)` when cuDNN supports
/// no engine for the graph: the op's run then fails, naming the shape (with fast start the
/// frames stay on the model as it is). Plans of runtime fusion engines
/// compile kernels (NVRTC) when finalized: this can take a second each.
///
/// # Safety
/// `handle` is a live cudnnHandle_t, created in the current CUDA context.
pub(crate) unsafe fn plans(handle: *mut c_void, shape: &ConvActShape) -> Result<Vec<FusedPlan>, String> {
    let api = api()?;
    let Some(graph) = graph_for(api, handle, shape)? else { return Ok(Vec::new()) };
    let Offered { mut configs, infos, a_count } = offered(api, &graph, shape)?;
    let choices: Vec<Option<PlanChoice>> = infos.iter().map(|i| i.as_ref().map(|e| e.choice.clone())).collect();
    let order = candidate_order(&choices, a_count);
    log::debug!(
        "ConvAct {}: heuristics offered {a_count} config(s) in mode A and {} in fallback mode; \
         {} distinct, finalizing up to {MAX_CANDIDATES}",
        shape.key(),
        configs.len() - a_count,
        order.len()
    );
    let started = Instant::now();
    let (plans, tried) = first_finalized(order, MAX_CANDIDATES, |i| {
        let cfg = configs[i].take()?;
        let info = infos[i].as_ref()?;
        let index = info.choice.engine;
        match plan_from(handle, &graph, cfg, Vec::new(), info.choice.clone(), (info.runtime, info.complete), shape) {
            Ok(p) => Some(p),
            Err(f) => {
                log::debug!("ConvAct {}: engine {index} gives no plan: {}", shape.key(), f.message);
                None
            }
        }
    });
    log::info!(
        "ConvAct {}: {} plan(s) finalized from {tried} of {} offered config(s) in {:.2} s",
        shape.key(),
        plans.len(),
        configs.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(plans)
}

/// The one plan of an engine config chosen earlier (the plan cache), nothing timed: the
/// heuristics' own config with that engine and those knob choices where they still offer it
/// (a config rebuilt from the engine's index and knobs may lack what the heuristics set
/// beside them), else the engine built by its global index for this shape's operation graph
/// and the config from the knob choices. The flag says which: `true` for the heuristics' own
/// config. Fails when this cuDNN (or GPU) no longer offers it; the caller then searches with
/// [`plans`] again.
///
/// # Safety
/// As for [`plans`].
pub(crate) unsafe fn plan_for(
    handle: *mut c_void,
    shape: &ConvActShape,
    choice: &PlanChoice,
) -> Result<(FusedPlan, bool), String> {
    let api = api()?;
    let graph = graph_for(api, handle, shape)?
        .ok_or_else(|| format!("ConvAct {}: cuDNN no longer fuses this graph", shape.key()))?;
    let fail =
        |f: Fail| format!("ConvAct {}: engine {} [{}]: {}", shape.key(), choice.engine, choice.knobs_text(), f.message);
    match offered(api, &graph, shape) {
        Ok(Offered { mut configs, infos, .. }) => {
            if let Some(i) = infos.iter().position(|i| i.as_ref().is_some_and(|i| i.complete && i.choice == *choice))
                && let (Some(cfg), Some(info)) = (configs[i].take(), infos[i].as_ref())
            {
                log::debug!("ConvAct {}: the cached engine config is the heuristics' config {i}", shape.key());
                return plan_from(handle, &graph, cfg, Vec::new(), choice.clone(), (info.runtime, true), shape)
                    .map(|p| (p, true))
                    .map_err(fail);
            }
            log::debug!("ConvAct {}: the heuristics no longer offer the cached config; rebuilding it", shape.key());
        }
        Err(e) => log::debug!("{e}; rebuilding the cached config"),
    }
    let built = (|| {
        let engine = Desc::new(api, ENGINE_DESCRIPTOR)?;
        engine.set_descs(ATTR_ENGINE_OPERATION_GRAPH, &[graph.op_graph])?;
        engine.set(ATTR_ENGINE_GLOBAL_INDEX, TYPE_INT64, &[choice.engine])?;
        engine.finalize(&format!("engine {}", choice.engine))?;
        let runtime = runtime_compiled(&engine);
        let mut parts = Vec::with_capacity(choice.knobs.len() + 1);
        for &(ty, value) in &choice.knobs {
            let k = Desc::new(api, KNOB_CHOICE_DESCRIPTOR)?;
            k.set(ATTR_KNOB_CHOICE_KNOB_TYPE, TYPE_KNOB_TYPE, &[ty])?;
            k.set(ATTR_KNOB_CHOICE_KNOB_VALUE, TYPE_INT64, &[value])?;
            k.finalize(&format!("knob choice {ty}={value}"))?;
            parts.push(k);
        }
        let cfg = Desc::new(api, ENGINECFG_DESCRIPTOR)?;
        cfg.set_descs(ATTR_ENGINECFG_ENGINE, &[engine.raw])?;
        if !parts.is_empty() {
            let raws: Vec<*mut c_void> = parts.iter().map(|k| k.raw).collect();
            cfg.set_descs(ATTR_ENGINECFG_KNOB_CHOICES, &raws)?;
        }
        cfg.finalize("engine config")?;
        parts.push(engine);
        plan_from(handle, &graph, cfg, parts, choice.clone(), (runtime, true), shape)
    })();
    built.map(|p| (p, false)).map_err(fail)
}

/// No configs from a heuristic mode that failed (the other one still counts).
fn skip(f: Fail, shape: &ConvActShape) -> Vec<Desc> {
    log::debug!("ConvAct {}: {}", shape.key(), f.message);
    Vec::new()
}

// Timing the plans: cudnn_tune.rs.
mod tune;
pub(crate) use tune::autotune;

#[cfg(test)]
mod tests;
