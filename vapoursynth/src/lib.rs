//! # neural-frame-vapoursynth
//!
//! `nf.Model`: a VapourSynth R81 plugin that runs an ONNX model on VapourSynth's GPU frames
//! (Vulkan buffers exported by fd, `VSVulkan4.h`) with neural-frame (issue 46).
//!
//! `core.nf.Model(clip, model="upscale.onnx")` takes RGBS or RGBH GPU frames (a CPU clip is
//! uploaded by the core) and gives GPU frames of the model's scale: every pooled allocation of
//! the core is imported into a neural-frame context once, each frame's planes are placed in it
//! at their offsets, and the context's passes gather them into the model's tensor and scatter
//! its output into a new GPU frame's planes, on the CUDA backend as CUDA kernels. What it can
//! never run (a core without GPU frames, a variable or unsupported format, a missing model
//! file) is refused at creation with a message that says what to change. See
//! `docs/vapoursynth.md`.
//!
//! - [`ffi`]: VapourSynth's API 4.3 and `VSVulkan4.h`, declared by hand and checked against
//!   the C headers' layout.
//! - `host` (Unix): a small host for the tests: loads `libvapoursynth.so.4`, makes a core, invokes
//!   filters, reads frames.
//! - `plugin`: `VapourSynthPluginInit2`, exported from the cdylib, and `nf.Model`'s checks.
//! - `filter`: the filter itself: the context, the imports by `memoryId`, `getFrame`.
//!
//! `ci-env.sh DIR` makes a VapourSynth R81 environment (lavapipe, no GPU needed) for
//! `tests/host.rs`.
#![deny(unsafe_op_in_unsafe_fn)]

/// A table entry, or a panic naming it (the tables of the API version checked are full).
macro_rules! vs {
    ($api:expr, $f:ident) => {
        $api.$f.expect(concat!("VapourSynth's function table has no ", stringify!($f)))
    };
}

pub mod ffi;
mod filter;
#[cfg(unix)]
pub mod host;
mod plugin;

pub use plugin::{PLUGIN_ID, PLUGIN_NAMESPACE};
