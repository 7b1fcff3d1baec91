//! The CUDA backend's flags: one group ([`CudaArgs`]), flattened into every command that
//! builds a context and made into the library's one options tree
//! ([`neural_frame::CudaOptions`]) in one place ([`CudaArgs::options`]). A new CUDA option is
//! a field and a setter of `CudaOptions`, and its flag here.

use clap::{Args, ValueEnum};
use neural_frame::{ConvSearch, CudaOptions, PostWait, Precision};
use serde::{Deserialize, Serialize};

/// `--conv-search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ConvSearchArg {
    Heuristic,
    Exhaustive,
    Default,
}

/// `--post-wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PostWaitArg {
    Gpu,
    Host,
}

/// `--precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PrecisionArg {
    #[default]
    Auto,
    Fp32,
    Fp16,
}

/// `--passes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PassesArg {
    Vulkan,
    Cuda,
}

/// The CUDA backend's options (none is in effect on the CPU backend). A flag left out keeps
/// the library's default, or the tune cache's choice where `neural-frame tune` made one.
#[derive(Args, Clone, Debug, Default, Serialize, Deserialize)]
#[command(next_help_heading = "CUDA backend")]
#[serde(default)]
pub(crate) struct CudaArgs {
    /// The precision the model runs in: `auto` (an fp32 model runs in fp16 where its work is mostly
    /// convolutions and a probe frame agrees with fp32 within PSNR 45 dB; else as it is), `fp32`
    /// (never converted) or `fp16` (converted, unchecked).
    #[arg(long, value_enum, default_value_t = PrecisionArg::Auto)]
    pub(crate) precision: PrecisionArg,
    /// Exact rewrites of the model's graph at load (a nearest-upsample skip folded into a 1x1
    /// convolution, in fp32 and fp16 models), `true` or `false` (default: true).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) rewrite_graph: Option<bool>,
    /// Run each convolution followed by a PReLU, LeakyReLU or ReLU, with its bias and activation, as
    /// one fused cuDNN kernel (a graph rewrite at load), `true` or `false` (default: on where the model
    /// runs in fp16; a model cuDNN refuses runs without, announced; see docs/fused-convolutions.md).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) fuse_conv_act: Option<bool>,
    /// Take the first frames before cuDNN's fused kernels are built: they run with the bias apart
    /// while the fused session is built beside them, which then takes over, `true` or `false`
    /// (default: true; `false` builds the fused session before the first frame).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) fast_start: Option<bool>,
    /// cuDNN's convolution algorithm search (default: heuristic).
    #[arg(long, value_enum)]
    pub(crate) conv_search: Option<ConvSearchArg>,
    /// The CUDA provider's NHWC kernels, `true` or `false` (default: on, and off, announced, where
    /// cuDNN refuses them for the model; `--prefer-nhwc` alone is `true`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) prefer_nhwc: Option<bool>,
    /// Fuse each convolution's bias into it (cuDNN's fused kernels; needs NHWC), `true` or `false`
    /// (default: with the NHWC kernels).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) fuse_conv_bias: Option<bool>,
    /// Replay each slot's model run as a captured CUDA graph, `true` or `false` (default: true; a
    /// model that cannot be captured runs without one, announced).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) cuda_graph: Option<bool>,
    /// Where a Vulkan post pass (`--passes vulkan`, or a frame the CUDA passes cannot take) waits for
    /// the model: on the GPU (a semaphore; the default) or on the host, once it saw the model finish.
    #[arg(long, value_enum)]
    pub(crate) post_wait: Option<PostWaitArg>,
    /// Put the CUDA wait for each frame's input on a side stream, joined by an event.
    #[arg(long)]
    pub(crate) side_stream_wait: bool,
    /// Where the pre and post passes run: CUDA kernels on the model's streams (the default, for
    /// every frame whose memory CUDA can import), or Vulkan compute passes.
    #[arg(long, value_enum)]
    pub(crate) passes: Option<PassesArg>,
}

impl CudaArgs {
    /// The library's options: each flag given changes its default.
    pub(crate) fn options(&self) -> CudaOptions {
        let mut o = CudaOptions::default().with_precision(match self.precision {
            PrecisionArg::Auto => Precision::Auto,
            PrecisionArg::Fp32 => Precision::Fp32,
            PrecisionArg::Fp16 => Precision::Fp16,
        });
        if let Some(on) = self.rewrite_graph {
            o = o.with_rewrite_graph(on);
        }
        if let Some(on) = self.fuse_conv_act {
            o = o.with_fuse_conv_act(on);
        }
        if let Some(on) = self.fast_start {
            o = o.with_fast_start(on);
        }
        if let Some(search) = self.conv_search {
            o = o.with_conv_search(match search {
                ConvSearchArg::Heuristic => ConvSearch::Heuristic,
                ConvSearchArg::Exhaustive => ConvSearch::Exhaustive,
                ConvSearchArg::Default => ConvSearch::Default,
            });
        }
        if let Some(on) = self.prefer_nhwc {
            o = o.with_prefer_nhwc(on);
        }
        if let Some(on) = self.fuse_conv_bias {
            o = o.with_fuse_conv_bias(on);
        }
        if let Some(on) = self.cuda_graph {
            o = o.with_cuda_graph(on);
        }
        if let Some(wait) = self.post_wait {
            o = o.with_post_wait(match wait {
                PostWaitArg::Gpu => PostWait::Gpu,
                PostWaitArg::Host => PostWait::Host,
            });
        }
        if self.side_stream_wait {
            o = o.with_side_stream_wait(true);
        }
        if let Some(passes) = self.passes {
            o = o.with_cuda_passes(passes == PassesArg::Cuda);
        }
        o
    }
}
