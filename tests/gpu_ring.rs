//! The ring on the CUDA backend: frames handed Vulkan → CUDA → Vulkan through
//! timeline semaphores, several in flight. Needs an NVIDIA GPU.

mod common;

use common::{gpu, open_fds};
use neural_frame::pipeline::{BackPressure, Backend};

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn ring_equals_sync_for_100_varied_frames() {
    let _ = gpu();
    common::pipeline::ring_matches_sync("models/upscale.onnx", Backend::Cuda, 96, 54, 100);
    common::pipeline::ring_matches_sync("models/upscale-fp16.onnx", Backend::Cuda, 61, 37, 30);
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn slow_consumer_blocks_or_skips() {
    let _ = gpu();
    let skipped =
        common::pipeline::slow_consumer("models/upscale.onnx", Backend::Cuda, BackPressure::Block, (960, 540), 12);
    assert_eq!(skipped, 0);
    // A 960×540 frame keeps the GPU busy for milliseconds while a submission
    // takes far less on the host: a consumer that never waits must see skips.
    let skipped =
        common::pipeline::slow_consumer("models/upscale.onnx", Backend::Cuda, BackPressure::Skip, (960, 540), 30);
    println!("skip policy: {skipped} of 30 frames skipped");
    assert!(skipped > 0, "no frame was skipped although the consumer never waited");
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn dropping_with_frames_in_flight_neither_hangs_nor_leaks() {
    let (_, cuda_device) = gpu();
    common::pipeline::drop_in_flight("models/upscale.onnx", Backend::Cuda, 1); // first use loads kernels
    let (free, _) = cuda_device.memory_info().expect("memory info");
    let fds = open_fds();
    let (_, _) = common::pipeline::drop_in_flight("models/upscale.onnx", Backend::Cuda, 20);
    let fds_after = open_fds();
    let (free_after, _) = cuda_device.memory_info().expect("memory info");
    println!("fds {fds} → {fds_after}; free device memory {free} → {free_after}");
    assert_eq!(fds_after, fds, "file descriptors leaked");
    assert!(free_after + (64 << 20) >= free, "device memory leaked: {} MiB", (free - free_after) >> 20);
}
