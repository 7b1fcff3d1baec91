//! The model compiler: what a model file becomes before a session loads it. Pure: it reads
//! and writes ONNX files (its own protobuf messages, [`proto`]) and names neither CUDA nor
//! ONNX Runtime (CI checks); the precision check's probe frame comes in as a closure
//! ([`precision::ProbeRun`]), run by the caller on its provider.
//!
//! [`prepare::prepare`] runs each step in order and says what it did, with one cache:
//!
//! 1. [`fold`]: the nearest-upsample skip folded into a 1×1 convolution (exact);
//! 2. [`precision`]: fp32 → fp16 ([`fp16`]) where the model's work is mostly convolutions
//!    ([`share`]) and the probe frame agrees;
//! 3. [`convact`] and [`shuffle`]: convolutions with their bias and activation as fused
//!    `ConvAct` nodes, and the `DepthToSpace` tails after them, both run by the operators of src/ops/.

pub(crate) mod convact;
pub(crate) mod edit;
pub(crate) mod fold;
pub(crate) mod fp16;
pub(crate) mod precision;
pub(crate) mod prepare;
pub(crate) mod proto;
pub(crate) mod share;
pub(crate) mod shuffle;
