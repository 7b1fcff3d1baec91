//! Model contract v2 on the CPU backend, on whatever Vulkan driver is present
//! (lavapipe in CI): the scenarios of tests/common/src/contract.rs, each against
//! ONNX Runtime's CPU provider run directly.

use common::contract;
use neural_frame::Backend;

#[test]
fn nhwc_float() {
    contract::nhwc_float(Backend::Cpu);
}

#[test]
fn bgr_signed_from_metadata() {
    contract::bgr_signed_from_metadata(Backend::Cpu);
}

#[test]
fn mean_std_from_metadata() {
    contract::mean_std_from_metadata(Backend::Cpu);
}

#[test]
fn declared_by_the_builder() {
    contract::declared_by_the_builder(Backend::Cpu);
}

#[test]
fn dynamic_without_metadata() {
    contract::dynamic_without_metadata(Backend::Cpu);
}

#[test]
fn per_axis_scale() {
    contract::per_axis_scale(Backend::Cpu);
}

#[test]
fn same_symbols() {
    contract::same_symbols(Backend::Cpu);
}

#[test]
fn bad_models_are_refused() {
    contract::bad_models_are_refused(Backend::Cpu);
}

#[test]
fn two_named_inputs() {
    contract::two_named_inputs(Backend::Cpu);
}

#[test]
fn depth_from_a_float_image() {
    contract::depth_from_a_float_image(Backend::Cpu);
}

#[test]
fn two_outputs() {
    contract::two_outputs(Backend::Cpu);
}

#[test]
fn bad_frames_are_refused() {
    contract::bad_frames_are_refused(Backend::Cpu);
}

#[test]
fn tiled_equals_untiled() {
    contract::tiled_equals_untiled(Backend::Cpu);
}

#[test]
fn tiles_in_flight_and_by_budget() {
    contract::tiles_in_flight_and_by_budget(Backend::Cpu);
}

#[test]
fn a_non_image_output_first() {
    contract::a_non_image_output_first(Backend::Cpu);
}
