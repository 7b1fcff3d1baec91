//! The ring on the CUDA backend: frames handed Vulkan → CUDA → Vulkan through
//! timeline semaphores, several in flight, with each tuning option. Needs an NVIDIA GPU.

mod common;

use common::pipeline::{Tune, plain};
use common::{gpu, open_fds};
use neural_frame::{BackPressure, Backend, ContextBuilder, NeuralFrameContext, PostWait};

fn graphs(b: ContextBuilder) -> ContextBuilder {
    b.cuda_graph(true)
}

fn host_post(b: ContextBuilder) -> ContextBuilder {
    b.post_wait(PostWait::Host)
}

fn side_wait(b: ContextBuilder) -> ContextBuilder {
    b.side_stream_wait(true)
}

fn every_option(b: ContextBuilder) -> ContextBuilder {
    b.cuda_graph(true).post_wait(PostWait::Host).spin_wait(true).gpu_timestamps(false).side_stream_wait(true)
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
        // round of 2026-12-05-h100-s11 run 2, the same in 2026-12-05-h200-s6 run 1).
        let least = used_mib.iter().copied().min().unwrap_or(0);
        assert!(least <= 64, "{name}: device memory leaked: {used_mib:?} MiB kept by each round of 20 contexts");
    }
}

/// What a context's frames gave, for `fused_tail_equals_the_post_kernels`.
struct TailRun {
    /// The output images in frame order.
    images: Vec<Vec<u8>>,
    /// The output tensor after the last frame.
    tensor: Vec<u8>,
    /// Frames the fused tail wrote.
    fused: u64,
    /// After the frames, the model alone (`run_model_only`) left the output image as it was
    /// (poisoned) and wrote the tensor (poisoned before).
    model_alone_ok: bool,
    /// The context's graph rewrites, for the messages.
    rewrites: Vec<String>,
}

/// Pictures through a context of `b` at `size` made now: `frames` through the ring (3 slots,
/// up to 3 in flight, each output image poisoned before its frame), then 3 through `infer`,
/// then the model alone.
fn tail_run(b: ContextBuilder, (w, h): (u32, u32), frames: u32) -> TailRun {
    use neural_frame::{Frame, Submitted};
    let mut ctx = b.backend(Backend::Cuda).frame_size(w, h).slots(3).build().expect("context");
    // Every frame on fast start's fused session, the one whose last kernel can write the output.
    assert!(ctx.wait_settled(std::time::Duration::from_secs(300)).expect("settled"), "not settled");
    let (ow, oh) = ctx.output_size();
    let poison = vec![0x5a; (ow * oh * 4) as usize];
    let lanes = 4;
    let format = ash::vk::Format::R8G8B8A8_UNORM;
    let inputs: Vec<_> = (0..lanes).map(|_| ctx.create_input_image(format).expect("input")).collect();
    let outputs: Vec<_> = (0..lanes).map(|_| ctx.create_output_image(format).expect("output")).collect();
    let mut images = Vec::new();
    let mut pending = std::collections::VecDeque::new();
    for frame in 0..frames {
        let lane = frame as usize % lanes;
        if pending.len() == lanes - 1 {
            let (t, l) = pending.pop_front().expect("pending");
            ctx.wait(&t).expect("wait");
            images.push(ctx.readback(outputs[l]).expect("readback"));
        }
        ctx.upload(inputs[lane], &common::pipeline::picture(w, h, 500 + frame)).expect("upload");
        ctx.upload_output(outputs[lane], &poison).expect("poison");
        match ctx.submit(Frame::new(inputs[lane], outputs[lane])).expect("submit") {
            Submitted::Frame(t) => pending.push_back((t, lane)),
            Submitted::Skipped => panic!("the blocking policy never skips"),
        }
    }
    while let Some((t, l)) = pending.pop_front() {
        ctx.wait(&t).expect("wait");
        images.push(ctx.readback(outputs[l]).expect("readback"));
    }
    for k in 0..3 {
        ctx.upload(inputs[0], &common::pipeline::picture(w, h, 900 + k)).expect("upload");
        ctx.upload_output(outputs[0], &poison).expect("poison");
        ctx.poison_output_tensor(common::pipeline::POISON).expect("poison tensor");
        ctx.infer(inputs[0], outputs[0]).expect("infer");
        images.push(ctx.readback(outputs[0]).expect("readback"));
    }
    let tensor = ctx.read_output_tensor().expect("output tensor");
    let fused = ctx.fused_tail_frames();
    // The descriptors are inactive after each frame: the model alone (slot 0's graph or run)
    // writes slot 0's tensor and no image.
    for &o in &outputs {
        ctx.upload_output(o, &poison).expect("poison");
    }
    ctx.poison_output_tensor(common::pipeline::POISON).expect("poison tensor");
    ctx.run_model_only().expect("the model alone");
    let images_kept = outputs.iter().all(|&o| ctx.readback(o).expect("readback") == poison);
    let slot0 = ctx.slot_tensors().expect("slot tensors").swap_remove(0).1;
    let poisoned = common::pipeline::POISON.to_le_bytes();
    let tensor_written = slot0.chunks_exact(4).any(|w| w != poisoned);
    TailRun {
        images,
        tensor,
        fused,
        model_alone_ok: images_kept && tensor_written,
        rewrites: ctx.precision().rewrites.clone(),
    }
}

/// The fused tail (`NEURAL_FRAME_FUSED_TAIL`, src/cuda/tail.rs): the model's last kernel, the
/// fused rewrite's DepthToSpace, converts and writes the output image itself, with no post
/// kernel. For the fp16 file and the fp32 file (run in fp16 by default) at an odd size and an
/// even one, and the fp32 file run in fp32 with the fused convolutions asked for (the kernel's
/// float path): forced off, then on, the same pictures through the ring and `infer`, every
/// output image and tensor poisoned first. On, it must take every frame; every output image
/// and the last output tensor must equal the ones with it off byte for byte; and the model
/// alone afterwards must write the tensor and leave the image alone (the descriptor cleared).
/// The hook is process-wide: `--test-threads=1`.
#[test]
#[ignore = "needs an NVIDIA GPU with Vulkan and CUDA: cargo test -- --include-ignored --test-threads=1"]
fn fused_tail_equals_the_post_kernels() {
    use neural_frame::Precision;
    use neural_frame::diagnostics::force_fused_tail;
    gpu();
    let frames = 12;
    fn in_fp32(b: ContextBuilder) -> ContextBuilder {
        b.precision(Precision::Fp32).fuse_conv_act(true)
    }
    let (f16, f32) = ("models/upscale-fp16.onnx", "models/upscale.onnx");
    let cases: [(&str, &str, Tune, (u32, u32)); 5] = [
        ("fp16 file", f16, plain, (61, 37)),
        ("fp16 file", f16, plain, (96, 54)),
        ("fp32 file", f32, plain, (61, 37)),
        ("fp32 file", f32, plain, (96, 54)),
        ("fp32 file in fp32", f32, in_fp32, (61, 37)),
    ];
    for (what, model, tune, size) in cases {
        let mut runs = Vec::new();
        for on in [false, true] {
            force_fused_tail(Some(on));
            let run = std::panic::catch_unwind(|| tail_run(tune(NeuralFrameContext::builder(model)), size, frames));
            force_fused_tail(None);
            runs.push(run.unwrap_or_else(|_| panic!("{what} at {size:?}, fused tail {on}: failed (above)")));
        }
        let (off, on) = (&runs[0], &runs[1]);
        println!(
            "{what} at {size:?}: fused tail took {} of {} frames (off: {}); the model alone afterwards as it \
             should: {} / {}; {:?}",
            on.fused,
            on.images.len(),
            off.fused,
            off.model_alone_ok,
            on.model_alone_ok,
            on.rewrites
        );
        assert_eq!(off.fused, 0, "{what}: the fused tail ran while off");
        assert_eq!(
            on.fused,
            on.images.len() as u64,
            "{what}: the fused tail did not take every frame ({:?})",
            on.rewrites
        );
        assert!(off.model_alone_ok && on.model_alone_ok, "{what}: the model alone wrote the image or not the tensor");
        let ow = size.0 * 4;
        for (k, (a, b)) in off.images.iter().zip(&on.images).enumerate() {
            let (d, x, y, c) = common::pipeline::max_diff(a, b, ow);
            assert_eq!(d, 0, "{what} at {size:?}, frame {k}: the fused tail differs at ({x}, {y}) ch {c} by {d}");
        }
        assert!(off.tensor == on.tensor, "{what} at {size:?}: the output tensor differs with the fused tail");
    }
}
