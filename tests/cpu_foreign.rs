//! The renderer's own frames on the CPU backend, on whatever Vulkan driver is
//! present (lavapipe in CI): the scenarios of tests/common/src/foreign.rs.

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
fn waits_and_signals_as_lists() {
    foreign::waits_and_signals_as_lists(Backend::Cpu);
}

#[test]
fn input_overwritten_after_input_consumed() {
    foreign::input_overwritten_after_input_consumed(Backend::Cpu);
}

#[test]
fn a_thousand_frames_stay_flat() {
    foreign::a_thousand_frames_stay_flat(Backend::Cpu);
}

#[test]
fn caller_device_from_ash_reads_the_extensions() {
    let _serial = foreign::serial();
    let r = foreign::renderer();
    let caller = r.caller_device(); // CallerDevice::from_ash, then the renderer's queue lock
    // The renderer enables VK_KHR_external_memory_fd always, the semaphore one where the driver has
    // it (not lavapipe): from_ash must tell both ways from the device alone.
    assert!(caller.external_memory_fd, "VK_KHR_external_memory_fd is enabled on the renderer's device");
    assert_eq!(caller.external_semaphore_fd, r.has_semaphore_fd(), "VK_KHR_external_semaphore_fd");
    println!("from_ash: memory fd {}, semaphore fd {}", caller.external_memory_fd, caller.external_semaphore_fd);
}
