//! The ring on the CUDA backend: frames handed Vulkan → CUDA → Vulkan through
//! timeline semaphores, several in flight, with each tuning option. Needs an NVIDIA GPU.

use common::pipeline::{Tune, plain};
use common::{gpu, open_fds};
use neural_frame::{BackPressure, Backend, ContextBuilder, NeuralFrameContext, PostWait};

fn graphs(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_graph(true))
}

fn host_post(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_post_wait(PostWait::Host))
}

fn side_wait(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_side_stream_wait(true))
}

fn every_option(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_cuda_graph(true))
        .map_cuda_options(|c| c.with_post_wait(PostWait::Host))
        .spin_wait(true)
        .gpu_timestamps(false)
        .map_cuda_options(|c| c.with_side_stream_wait(true))
}

const TUNINGS: [(&str, Tune); 5] = [
    ("default", plain),
    ("CUDA graphs", graphs),
    ("post waits on host", host_post),
    ("side-stream wait", side_wait),
    ("all options", every_option),
];

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn ring_equals_sync_for_100_varied_frames() {
    gpu();
    for (name, tune) in TUNINGS {
        println!("{name}:");
        common::pipeline::ring_matches_sync("models/upscale.onnx", Backend::Cuda, tune, 96, 54, 100);
        common::pipeline::ring_matches_sync("models/upscale-fp16.onnx", Backend::Cuda, tune, 61, 37, 30);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn slow_consumer_blocks_or_skips() {
    gpu();
    for (name, tune) in [TUNINGS[0], TUNINGS[2]] {
        let skipped = common::pipeline::slow_consumer(
            "models/upscale.onnx",
            Backend::Cuda,
            tune,
            BackPressure::Block,
            (960, 540),
            12,
        );
        assert_eq!(skipped, 0);
        // A 960×540 frame keeps the GPU busy for milliseconds while a submission
        // takes far less on the host: a consumer that never waits must see skips.
        let skipped = common::pipeline::slow_consumer(
            "models/upscale.onnx",
            Backend::Cuda,
            tune,
            BackPressure::Skip,
            (960, 540),
            30,
        );
        println!("{name}: skip policy: {skipped} of 30 frames skipped");
        assert!(skipped > 0, "no frame was skipped although the consumer never waited");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored"]
fn dropping_with_frames_in_flight_neither_hangs_nor_leaks() {
    gpu();
    // A context kept alive to read the device's free memory.
    let probe = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cuda)
        .frame_size(8, 8)
        .build()
        .expect("context");
    let free_memory = || probe.cuda_memory().expect("memory info").expect("CUDA backend").0;
    for (name, tune) in TUNINGS {
        common::pipeline::drop_in_flight("models/upscale.onnx", Backend::Cuda, tune, 1); // first use loads kernels
        let fds = open_fds();
        let mut before = free_memory();
        let mut used_mib = Vec::new();
        for _ in 0..2 {
            let (_, _) = common::pipeline::drop_in_flight("models/upscale.onnx", Backend::Cuda, tune, 20);
            let after = free_memory();
            used_mib.push(before.saturating_sub(after) >> 20);
            before = after;
        }
        let fds_after = open_fds();
        println!("{name}: fds {fds} → {fds_after}; device memory kept by each round of 20 contexts: {used_mib:?} MiB");
        assert_eq!(fds_after, fds, "{name}: file descriptors leaked");
        // A leak grows with every round. What the process keeps once does not: cuDNN's kernels
        // for a plan searched again when a cached one timed slow on a busy GPU (560 MiB in one
        // round of a run on an H100, the same on an H200).
        let least = used_mib.iter().copied().min().unwrap_or(0);
        assert!(least <= 64, "{name}: device memory leaked: {used_mib:?} MiB kept by each round of 20 contexts");
    }
}
