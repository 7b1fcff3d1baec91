//! The custom operators that the prepared models use (`crate::graph` writes them), with their
//! CPU kernels (how the rewrites are proven against the original models on ONNX Runtime's CPU
//! provider) and their CUDA kernels (cuDNN's runtime fusion and neural-frame's own kernels in
//! `crate::cuda`). One domain, registered with every session ([`domain`]).
//!
//! A new operator is a file here with its [`kernel::Kind`] (name, inputs, shape inference,
//! kernels), built on [`kernel`]'s shared pieces, and a line in [`domain`].

pub(crate) mod conv_act;
pub(crate) mod depth_to_space;
pub(crate) mod kernel;

use ort::operator::OperatorDomain;
use ort::value::TensorElementType;

use crate::graph::edit::DOMAIN;
use crate::ops::kernel::Op;

/// The domain with `ConvAct`'s and `DepthToSpace`'s CPU kernels (and, built with `cuda`, their
/// CUDA ones).
pub(crate) fn domain() -> ort::Result<OperatorDomain> {
    let mut d = OperatorDomain::new(DOMAIN)?;
    let providers: &[bool] = if cfg!(feature = "cuda") { &[false, true] } else { &[false] };
    for element in [TensorElementType::Float32, TensorElementType::Float16] {
        for &cuda in providers {
            d = d.add(Op::<conv_act::ConvAct>::new(element, cuda))?;
            d = d.add(Op::<depth_to_space::DepthToSpace>::new(element, cuda))?;
        }
    }
    Ok(d)
}
