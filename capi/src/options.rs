//! The CUDA backend's options in one struct that can grow (`nf_cuda_options`, with its
//! `struct_size`): ONNX Runtime's CUDA provider, the hand-over between Vulkan and CUDA, and
//! the model's preparation, as `neural_frame::CudaOptions` groups them.

use neural_frame::{ConvSearch, CudaOptions, PostWait, Precision};

use crate::builder::{edit, nf_builder};
use crate::{Fail, Versioned, guard, nf_status, out_size, read_versioned, write_versioned};

/// The precision the model runs in on the CUDA backend: one of the `NF_PRECISION_*` values.
pub type nf_precision = u32;
/// fp16 where the model gains from it and a probe frame agrees with fp32; else the model's own.
pub const NF_PRECISION_AUTO: nf_precision = 0;
/// The model's own precision, never converted.
pub const NF_PRECISION_FP32: nf_precision = 1;
/// An fp32 model converted to fp16 without the check (CUDA backend).
pub const NF_PRECISION_FP16: nf_precision = 2;

/// cuDNN's convolution algorithm search (CUDA backend): one of the `NF_CONV_SEARCH_*` values.
pub type nf_conv_search = u32;
/// cuDNN's heuristics (the default).
pub const NF_CONV_SEARCH_HEURISTIC: nf_conv_search = 0;
/// Every algorithm timed once per shape.
pub const NF_CONV_SEARCH_EXHAUSTIVE: nf_conv_search = 1;
/// cuDNN's default algorithm, no search.
pub const NF_CONV_SEARCH_DEFAULT: nf_conv_search = 2;

/// Where a post pass waits for the model (CUDA backend): one of the `NF_POST_WAIT_*` values.
pub type nf_post_wait = u32;
/// On the GPU (the default).
pub const NF_POST_WAIT_GPU: nf_post_wait = 0;
/// The post pass is submitted once the host has seen the model finish (refused on a
/// caller's device with a single queue, where it would deadlock).
pub const NF_POST_WAIT_HOST: nf_post_wait = 1;

/// A setting that may be left to the library: one of the `NF_TRISTATE_*` values.
pub type nf_tristate = u32;
/// The library's default.
pub const NF_TRISTATE_DEFAULT: nf_tristate = 0;
/// On.
pub const NF_TRISTATE_ON: nf_tristate = 1;
/// Off.
pub const NF_TRISTATE_OFF: nf_tristate = 2;

/// The CUDA backend's options (none is in effect on the CPU backend). A versioned struct:
/// `nf_cuda_options o = NF_CUDA_OPTIONS_INIT;` sets its `struct_size`, then
/// `nf_cuda_options_default(&o)` fills in the library's defaults; change what you need and
/// give it to `nf_builder_set_cuda_options`. Fields may be added at the end in later versions
/// (a library reads the fields the caller's `struct_size` covers, the others at their
/// defaults). Each `uint8_t` field is 0 (off) or 1 (on).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct nf_cuda_options {
    /// `sizeof(nf_cuda_options)` as the caller's header has it (`NF_CUDA_OPTIONS_INIT` sets it).
    pub struct_size: u32,
    /// ONNX Runtime's CUDA provider: cuDNN's convolution search (`NF_CONV_SEARCH_HEURISTIC`,
    /// the default, `_EXHAUSTIVE` or `_DEFAULT`).
    pub conv_search: nf_conv_search,
    /// The provider's NHWC kernels (default 1; where cuDNN refuses them with the defaults, the
    /// context runs without them, logged).
    pub prefer_nhwc: u8,
    /// Each convolution's bias fused into it (default 1; needs `prefer_nhwc`, else
    /// `nf_context_new` refuses it).
    pub fuse_conv_bias: u8,
    /// Each slot's model run replayed as a captured CUDA graph (default 1).
    pub cuda_graph: u8,
    /// The hand-over: the CUDA wait for each frame's input on a side stream (default 0).
    pub side_stream_wait: u8,
    /// The hand-over: where a post pass waits for the model (`NF_POST_WAIT_GPU`, the default,
    /// or `NF_POST_WAIT_HOST`).
    pub post_wait: nf_post_wait,
    /// The hand-over: the pre and post passes as CUDA kernels (default 1); 0: Vulkan passes.
    pub cuda_passes: u8,
    /// The model's preparation: exact graph rewrites at load (default 1).
    pub rewrite_graph: u8,
    /// The model's preparation: the first frames run before cuDNN's fused kernels are built
    /// (default 1; `nf_context_wait_settled` waits for the fused session).
    pub fast_start: u8,
    /// Padding (0).
    pub reserved: u8,
    /// The model's preparation: the precision (`NF_PRECISION_AUTO`, the default, `_FP32` or
    /// `_FP16`).
    pub precision: nf_precision,
    /// The model's preparation: each convolution with its bias and activation as one fused
    /// cuDNN kernel (`NF_TRISTATE_DEFAULT`: where the model runs in fp16).
    pub fuse_conv_act: nf_tristate,
    /// Padding to a multiple of 8 bytes (0): later fields start at the struct's size.
    pub reserved_end: u32,
}

// SAFETY: #[repr(C)], `struct_size` first; `base` is the library's defaults.
unsafe impl Versioned for nf_cuda_options {
    const NAME: &'static str = "nf_cuda_options";
    const INIT: &'static str = "NF_CUDA_OPTIONS_INIT";
    // This is the struct's first version.
    const FIRST_SIZE: usize = std::mem::size_of::<nf_cuda_options>();
    fn base() -> Self {
        Self::from_options(&CudaOptions::default())
    }
}

impl nf_cuda_options {
    /// The C form of `o`.
    fn from_options(o: &CudaOptions) -> Self {
        let (p, h, m) = (&o.provider, &o.handover, &o.model);
        Self {
            struct_size: std::mem::size_of::<Self>() as u32,
            conv_search: match p.conv_search {
                ConvSearch::Heuristic => NF_CONV_SEARCH_HEURISTIC,
                ConvSearch::Exhaustive => NF_CONV_SEARCH_EXHAUSTIVE,
                ConvSearch::Default => NF_CONV_SEARCH_DEFAULT,
            },
            prefer_nhwc: p.prefer_nhwc.into(),
            fuse_conv_bias: p.fuse_conv_bias.into(),
            cuda_graph: p.cuda_graph.into(),
            side_stream_wait: h.side_stream_wait.into(),
            post_wait: match h.post_wait {
                PostWait::Gpu => NF_POST_WAIT_GPU,
                PostWait::Host => NF_POST_WAIT_HOST,
            },
            cuda_passes: h.cuda_passes.into(),
            rewrite_graph: m.rewrite_graph.into(),
            fast_start: m.fast_start.into(),
            reserved: 0,
            precision: match m.precision {
                Precision::Auto => NF_PRECISION_AUTO,
                Precision::Fp32 => NF_PRECISION_FP32,
                Precision::Fp16 => NF_PRECISION_FP16,
            },
            fuse_conv_act: match m.fuse_conv_act {
                None => NF_TRISTATE_DEFAULT,
                Some(true) => NF_TRISTATE_ON,
                Some(false) => NF_TRISTATE_OFF,
            },
            reserved_end: 0,
        }
    }

    /// The library's form, every field checked.
    fn to_options(self) -> Result<CudaOptions, Fail> {
        let flag = |v: u8, name: &str| match v {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Fail::invalid(format!("nf_cuda_options.{name} is {other}, not 0 or 1"))),
        };
        let conv_search = match self.conv_search {
            NF_CONV_SEARCH_HEURISTIC => ConvSearch::Heuristic,
            NF_CONV_SEARCH_EXHAUSTIVE => ConvSearch::Exhaustive,
            NF_CONV_SEARCH_DEFAULT => ConvSearch::Default,
            other => {
                return Err(Fail::invalid(format!(
                    "nf_cuda_options.conv_search {other} is none of NF_CONV_SEARCH_HEURISTIC, _EXHAUSTIVE, _DEFAULT"
                )));
            }
        };
        let post_wait = match self.post_wait {
            NF_POST_WAIT_GPU => PostWait::Gpu,
            NF_POST_WAIT_HOST => PostWait::Host,
            other => {
                return Err(Fail::invalid(format!(
                    "nf_cuda_options.post_wait {other} is none of NF_POST_WAIT_GPU, _HOST"
                )));
            }
        };
        let precision = match self.precision {
            NF_PRECISION_AUTO => Precision::Auto,
            NF_PRECISION_FP32 => Precision::Fp32,
            NF_PRECISION_FP16 => Precision::Fp16,
            other => {
                return Err(Fail::invalid(format!(
                    "nf_cuda_options.precision {other} is none of NF_PRECISION_AUTO, _FP32, _FP16"
                )));
            }
        };
        let mut o = CudaOptions::default()
            .with_conv_search(conv_search)
            .with_prefer_nhwc(flag(self.prefer_nhwc, "prefer_nhwc")?)
            .with_fuse_conv_bias(flag(self.fuse_conv_bias, "fuse_conv_bias")?)
            .with_cuda_graph(flag(self.cuda_graph, "cuda_graph")?)
            .with_side_stream_wait(flag(self.side_stream_wait, "side_stream_wait")?)
            .with_post_wait(post_wait)
            .with_cuda_passes(flag(self.cuda_passes, "cuda_passes")?)
            .with_rewrite_graph(flag(self.rewrite_graph, "rewrite_graph")?)
            .with_fast_start(flag(self.fast_start, "fast_start")?)
            .with_precision(precision);
        o = match self.fuse_conv_act {
            NF_TRISTATE_DEFAULT => o,
            NF_TRISTATE_ON => o.with_fuse_conv_act(true),
            NF_TRISTATE_OFF => o.with_fuse_conv_act(false),
            other => {
                return Err(Fail::invalid(format!(
                    "nf_cuda_options.fuse_conv_act {other} is none of NF_TRISTATE_DEFAULT, _ON, _OFF"
                )));
            }
        };
        Ok(o)
    }
}

/// Fills `*options` with the library's defaults: the fields its `struct_size` covers (set it
/// first: `nf_cuda_options o = NF_CUDA_OPTIONS_INIT;`), which it leaves as it was.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `options` is NULL;
/// `NF_STATUS_STRUCT_SIZE` where `options->struct_size` is not set; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `options` is NULL or points to `options->struct_size` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_cuda_options_default(options: *mut nf_cuda_options) -> nf_status {
    guard(|| {
        // SAFETY: the caller's contract.
        let size = unsafe { out_size(options, "options") }?;
        // SAFETY: `size` writable bytes (the caller's contract).
        unsafe { write_versioned(options, size, nf_cuda_options::base()) };
        Ok(())
    })
}

/// Gives the builder every CUDA option at once (copied). An option of the provider or the
/// hand-over left at its default lets the tune cache choose it (`neural-frame tune`).
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `b` or `options` is NULL, or a
/// field holds a value none of its constants name (the message names the field);
/// `NF_STATUS_STRUCT_SIZE` where `struct_size` is not set; `NF_STATUS_UNSUPPORTED` where a
/// newer header's field this library does not know is set; `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `b` is NULL or a live builder, not used by another thread during the call; `options` is
/// NULL or points to `options->struct_size` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_builder_set_cuda_options(b: *mut nf_builder, options: *const nf_cuda_options) -> nf_status {
    // SAFETY: the caller's contract.
    let read = || unsafe { read_versioned(options, "options") }?.to_options();
    match read() {
        // SAFETY: the caller's contract.
        Ok(cuda) => unsafe { edit(b, |x| Ok(x.cuda_options(cuda))) },
        Err(e) => guard(|| Err(e)),
    }
}
