//! `neural-frame serve` on the CUDA backend in GPU mode (an NVIDIA GPU): the
//! worker's GPU waits on the client's timeline and the client's GPU on the
//! worker's, with the scenarios of tests/common/src/serve.rs. The worker binary is
//! `NEURAL_FRAME_BIN` (else cargo's), the example `NEURAL_FRAME_RENDER`.

use common::{gpu, serve};
use neural_frame::Backend;
use neural_frame_client::{SyncMode, SyncPreference};

macro_rules! on_cuda {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
        fn $name() {
            gpu();
            serve::$name("cuda");
        }
    )*};
}

on_cuda!(
    faults_get_an_error_and_the_worker_keeps_serving,
    client_killed_mid_frame_releases_everything,
    worker_killed_mid_frame_leaves_the_device_usable,
    two_clients_with_different_sizes,
    a_thousand_frames_stay_flat,
    sigint_drains_and_tells_the_clients,
    pixel_values_keep_the_contract,
);

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn frames_match_onnx_runtime_in_gpu_mode() {
    gpu();
    serve::frames_match_onnx_runtime("cuda", SyncPreference::Auto, SyncMode::Gpu);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn frames_match_onnx_runtime_in_host_mode_on_cuda() {
    gpu();
    serve::frames_match_onnx_runtime("cuda", SyncPreference::Host, SyncMode::Host);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn three_hundred_frames_equal_the_in_process_run() {
    gpu();
    serve::three_hundred_frames_equal_the_in_process_run(Backend::Cuda, "cuda", SyncMode::Gpu);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn render_example_matches_onnx_runtime() {
    gpu();
    serve::render_example_matches_onnx_runtime("cuda", 300);
}
