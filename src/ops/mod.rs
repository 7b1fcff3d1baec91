//! The custom operators that the prepared models use (`crate::graph` writes them), with their
//! CPU kernels (how the rewrites are proven against the original models on ONNX Runtime's CPU
//! provider) and their CUDA kernels (cuDNN's runtime fusion and neural-frame's own kernels in
//! `crate::cuda`). One domain, registered with every session ([`domain`]).
//!
//! A new operator is a file here with its `Operator` and kernels, built on [`kernel`]'s
//! shared pieces, and a line in [`domain`].

pub(crate) mod conv_act;
pub(crate) mod depth_to_space;
pub(crate) mod kernel;

use ort::operator::OperatorDomain;
use ort::value::TensorElementType;

use crate::graph::edit::DOMAIN;

/// The domain with `ConvAct`'s and `DepthToSpace`'s CPU kernels (and, built with `cuda`, their
/// CUDA ones).
pub(crate) fn domain() -> ort::Result<OperatorDomain> {
    let mut d = OperatorDomain::new(DOMAIN)?;
    for element in [TensorElementType::Float32, TensorElementType::Float16] {
        d = d.add(conv_act::ConvAct { element, cuda: false })?;
        d = d.add(depth_to_space::DepthToSpace { element, cuda: false })?;
        if cfg!(feature = "cuda") {
            d = d.add(conv_act::ConvAct { element, cuda: true })?;
            d = d.add(depth_to_space::DepthToSpace { element, cuda: true })?;
        }
    }
    Ok(d)
}
