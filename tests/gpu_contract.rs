//! Model contract v2 on the CUDA backend (Vulkan buffers imported into CUDA,
//! ONNX Runtime's CUDA provider bound by pointer): the scenarios of
//! tests/common/src/contract.rs, each against ONNX Runtime's CPU provider. Needs an
//! NVIDIA GPU.

use common::{contract, gpu};
use neural_frame::Backend;

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn nhwc_float_on_cuda() {
    gpu();
    contract::nhwc_float(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn bgr_signed_from_metadata_on_cuda() {
    gpu();
    contract::bgr_signed_from_metadata(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn mean_std_from_metadata_on_cuda() {
    gpu();
    contract::mean_std_from_metadata(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn declared_by_the_builder_on_cuda() {
    gpu();
    contract::declared_by_the_builder(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn dynamic_without_metadata_on_cuda() {
    gpu();
    contract::dynamic_without_metadata(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn per_axis_scale_on_cuda() {
    gpu();
    contract::per_axis_scale(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn same_symbols_on_cuda() {
    gpu();
    contract::same_symbols(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn bad_models_are_refused_on_cuda() {
    gpu();
    contract::bad_models_are_refused(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn two_named_inputs_on_cuda() {
    gpu();
    contract::two_named_inputs(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn depth_from_a_float_image_on_cuda() {
    gpu();
    contract::depth_from_a_float_image(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn two_outputs_on_cuda() {
    gpu();
    contract::two_outputs(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn bad_frames_are_refused_on_cuda() {
    gpu();
    contract::bad_frames_are_refused(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn tiled_equals_untiled_on_cuda() {
    gpu();
    contract::tiled_equals_untiled(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn tiles_in_flight_and_by_budget_on_cuda() {
    gpu();
    contract::tiles_in_flight_and_by_budget(Backend::Cuda);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn a_non_image_output_first_on_cuda() {
    gpu();
    contract::a_non_image_output_first(Backend::Cuda);
}
