//! The renderer's own frames on the CPU backend, on whatever Vulkan driver is
//! present (lavapipe in CI): the scenarios of tests/common/foreign.rs.

mod common;

use common::foreign;
use neural_frame::Backend;

#[test]
fn bring_your_own_device_ring_with_gpu_sync_matches_onnx_runtime() {
    foreign::bring_your_own_device_ring_with_gpu_sync_matches_onnx_runtime(Backend::Cpu);
}

#[test]
fn bring_your_own_buffers_with_row_pitch_and_formats() {
    foreign::bring_your_own_buffers_with_row_pitch_and_formats(Backend::Cpu);
}

#[test]
fn import_by_fd_images_and_buffers() {
    foreign::import_by_fd_images_and_buffers(Backend::Cpu);
}

#[test]
fn a_buffer_the_model_takes_as_it_is_runs_no_pass() {
    foreign::a_buffer_the_model_takes_as_it_is_runs_no_pass(Backend::Cpu);
}

#[test]
fn bad_imports_are_refused_and_give_the_fd_back() {
    foreign::bad_imports_are_refused_and_give_the_fd_back(Backend::Cpu);
}

#[test]
fn timeouts_leave_the_context_usable() {
    foreign::timeouts_leave_the_context_usable(Backend::Cpu);
}

#[test]
fn unregister_in_flight_keeps_it_alive() {
    foreign::unregister_in_flight_keeps_it_alive(Backend::Cpu);
}

#[test]
fn input_overwritten_after_input_consumed() {
    foreign::input_overwritten_after_input_consumed(Backend::Cpu);
}

#[test]
fn a_thousand_frames_stay_flat() {
    foreign::a_thousand_frames_stay_flat(Backend::Cpu);
}
