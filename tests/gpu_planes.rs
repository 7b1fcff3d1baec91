//! Planar float frames in a host's pooled memory on the CUDA backend (an NVIDIA GPU):
//! the scenarios of tests/common/src/planes.rs, the planes gathered and scattered by
//! the CUDA passes through CUDA's one import of the block.

use common::{gpu, planes};
use neural_frame::Backend;

macro_rules! on_cuda {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
        fn $name() {
            gpu();
            planes::$name(Backend::Cuda);
        }
    )*};
}

on_cuda!(planar_frames_match_onnx_runtime, bad_planes_are_refused, tiled_planar_frames_match_onnx_runtime);
