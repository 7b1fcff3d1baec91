//! The renderer's own frames on the CUDA backend (an NVIDIA GPU): the scenarios
//! of tests/common/src/foreign.rs, with CUDA running the model between the
//! renderer's Vulkan work, handed over through shared timeline semaphores.

use common::{foreign, gpu};
use neural_frame::Backend;

macro_rules! on_cuda {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
        fn $name() {
            gpu();
            foreign::$name(Backend::Cuda);
        }
    )*};
}

on_cuda!(
    bring_your_own_device_ring_with_gpu_sync_matches_onnx_runtime,
    bring_your_own_buffers_with_row_pitch_and_formats,
    import_by_fd_images_and_buffers,
    a_buffer_the_model_takes_as_it_is_runs_no_pass,
    bad_imports_are_refused_and_give_the_fd_back,
    timeouts_leave_the_context_usable,
    unregister_in_flight_keeps_it_alive,
    input_overwritten_after_input_consumed,
    waits_and_signals_as_lists,
    a_thousand_frames_stay_flat,
);
