//! Independent references for the pipeline tests: test pictures, ONNX Runtime
//! run directly on host tensors, and the expected output image computed on the CPU.

use std::path::Path;

use ash::vk;
use half::f16;
use neural_frame::{
    BackPressure, Backend, ColorOrder, ContextBuilder, Element, Frame, InputId, Layout, ModelContract,
    NeuralFrameContext, Normalization, OutputId, Submitted, TensorKind, Ticket,
};

/// How close the pipeline must come to the reference.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Largest |difference| of f32 and u8 output tensor values.
    pub tensor: f32,
    /// Largest |difference| of f16 output tensor values.
    pub tensor_f16: f32,
    /// Largest per-channel difference of output image bytes.
    pub pixel: u8,
}

impl Default for Tolerance {
    fn default() -> Self {
        Self { tensor: 1e-4, tensor_f16: 2e-3, pixel: 1 }
    }
}

/// A deterministic RGBA8 picture with structure, every channel varying, alpha included.
pub fn picture(width: u32, height: u32, seed: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((width * height * 4) as usize);
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(12345);
    for y in 0..height {
        for x in 0..width {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = (state >> 24) as i32 - 128;
            let r = ((x * 255 / width.max(1)) as i32 + noise / 8).clamp(0, 255) as u8;
            let g = ((y * 255 / height.max(1)) as i32 - noise / 8).clamp(0, 255) as u8;
            let b = (((x ^ y) * 7 + seed) & 0xff) as u8;
            let a = ((x * 5 + y * 11 + seed * 3) % 256) as u8;
            out.extend_from_slice(&[r, g, b, a]);
        }
    }
    out
}

/// Element index of pixel `px`, tensor channel `ch`, for a tensor of `kind` over `plane` pixels.
pub fn element_index(kind: TensorKind, plane: usize, px: usize, ch: usize) -> usize {
    match kind.layout {
        Layout::Nchw => ch * plane + px,
        Layout::Nhwc => px * kind.channels as usize + ch,
    }
}

/// `(mul, add)` of tensor channel `ch`, from the declared range written out by hand.
pub fn affine(n: Normalization, ch: usize) -> (f32, f32) {
    match n {
        Normalization::Unit => (1.0, 0.0),
        Normalization::Signed => (2.0, -1.0),
        Normalization::Byte => (255.0, 0.0),
        Normalization::MeanStd { mean, std } if ch < 3 => (1.0 / std[ch], -mean[ch] / std[ch]),
        Normalization::MeanStd { .. } => (1.0, 0.0),
        other => panic!("no reference for {other:?}"),
    }
}

/// The RGBA channel that tensor channel `ch` holds.
pub fn rgba_channel(kind: TensorKind, ch: usize) -> usize {
    if kind.color == ColorOrder::Bgr && kind.channels >= 3 && ch < 3 { 2 - ch } else { ch }
}

/// The model's input tensor for `rgba`, computed on the host (as raw little-endian bytes).
pub fn input_tensor(kind: TensorKind, rgba: &[u8], width: u32, height: u32) -> Vec<u8> {
    let plane = (width * height) as usize;
    let c = kind.channels as usize;
    let mut v = vec![0f32; c * plane];
    for px in 0..plane {
        for ch in 0..c {
            let (mul, add) = affine(kind.normalization, ch);
            v[element_index(kind, plane, px, ch)] = rgba[px * 4 + rgba_channel(kind, ch)] as f32 / 255.0 * mul + add;
        }
    }
    match kind.element {
        Element::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Element::F16 => v.iter().flat_map(|x| f16::from_f32(*x).to_le_bytes()).collect(),
        Element::U8 => v.iter().map(|x| x.round().clamp(0.0, 255.0) as u8).collect(),
        other => panic!("no reference for {other:?}"),
    }
}

/// Runs the model with ONNX Runtime's CPU provider on host memory, as a user
/// without neural-frame would; returns the output tensor's bytes.
pub fn reference_output(model: &Path, contract: &ModelContract, rgba: &[u8], width: u32, height: u32) -> Vec<u8> {
    let env = neural_frame::ort_environment().expect("ONNX Runtime loads");
    let mut session = ort::session::Session::builder(env)
        .expect("builder")
        .commit_from_file(model)
        .expect("model loads on the CPU provider");
    let shape = contract.input.shape(width, height).map(|d| d as usize);
    let bytes = input_tensor(contract.input, rgba, width, height);
    let name = contract.input_name.as_str();
    let out = match contract.input.element {
        Element::F32 => {
            let data: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            let t = ort::value::Tensor::from_array((shape, data)).expect("tensor");
            session.run(ort::inputs![name => t]).expect("reference run")
        }
        Element::F16 => {
            let data: Vec<f16> = bytes.chunks(2).map(|c| f16::from_le_bytes([c[0], c[1]])).collect();
            let t = ort::value::Tensor::from_array((shape, data)).expect("tensor");
            session.run(ort::inputs![name => t]).expect("reference run")
        }
        _ => {
            let t = ort::value::Tensor::from_array((shape, bytes)).expect("tensor");
            session.run(ort::inputs![name => t]).expect("reference run")
        }
    };
    let value = &out[contract.output_name.as_str()];
    match contract.output.element {
        Element::F32 => {
            value.try_extract_tensor::<f32>().expect("f32").1.iter().flat_map(|x| x.to_le_bytes()).collect()
        }
        Element::F16 => {
            value.try_extract_tensor::<f16>().expect("f16").1.iter().flat_map(|x| x.to_le_bytes()).collect()
        }
        _ => value.try_extract_tensor::<u8>().expect("u8").1.to_vec(),
    }
}

/// |a − b|, with NaN (poison left unwritten) as infinity, so that `max` cannot skip it.
pub fn abs_diff(a: f32, b: f32) -> f32 {
    let d = (a - b).abs();
    if d.is_nan() { f32::INFINITY } else { d }
}

/// Decodes a tensor's bytes to f32 values (u8 as is).
pub fn values(kind: TensorKind, bytes: &[u8]) -> Vec<f32> {
    match kind.element {
        Element::F32 => bytes.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        Element::F16 => bytes.chunks(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        _ => bytes.iter().map(|b| *b as f32).collect(),
    }
}

/// Bilinear alpha at output pixel (x, y), sample centres aligned, edges clamped.
fn alpha(rgba: &[u8], w: u32, h: u32, ow: u32, oh: u32, x: u32, y: u32) -> f32 {
    let sx = ((x as f32 + 0.5) * w as f32 / ow as f32 - 0.5).clamp(0.0, (w - 1) as f32);
    let sy = ((y as f32 + 0.5) * h as f32 / oh as f32 - 0.5).clamp(0.0, (h - 1) as f32);
    let (x0, y0) = (sx.floor() as u32, sy.floor() as u32);
    let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
    let (tx, ty) = (sx - x0 as f32, sy - y0 as f32);
    let a = |x: u32, y: u32| rgba[((y * w + x) * 4 + 3) as usize] as f32 / 255.0;
    let top = a(x0, y0) * (1.0 - tx) + a(x1, y0) * tx;
    let bottom = a(x0, y1) * (1.0 - tx) + a(x1, y1) * tx;
    top * (1.0 - ty) + bottom * ty
}

/// The output image the pipeline should produce from the reference tensor.
pub fn expected_image(contract: &ModelContract, tensor: &[u8], rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
    let (ow, oh) = (w * contract.scale.x, h * contract.scale.y);
    let plane = (ow * oh) as usize;
    let kind = contract.output;
    let v = values(kind, tensor);
    let q = |x: f32| (x.clamp(0.0, 1.0) * 255.0).round() as u8;
    let mut out = vec![0u8; plane * 4];
    for y in 0..oh {
        for x in 0..ow {
            let i = (y * ow + x) as usize;
            let mut px = [0u8, 0, 0, q(alpha(rgba, w, h, ow, oh, x, y))];
            for ch in 0..kind.channels as usize {
                let (mul, add) = affine(kind.normalization, ch);
                let value = q((v[element_index(kind, plane, i, ch)] - add) / mul);
                if kind.channels == 1 {
                    px[..3].fill(value);
                } else {
                    px[rgba_channel(kind, ch)] = value;
                }
            }
            out[i * 4..i * 4 + 4].copy_from_slice(&px);
        }
    }
    out
}

/// Peak signal-to-noise ratio of two RGBA8 images in dB (infinite when equal).
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len(), "sizes differ");
    let mse = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum::<f64>() / a.len() as f64;
    if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() }
}

/// Largest per-channel difference, and where it is.
pub fn max_diff(a: &[u8], b: &[u8], width: u32) -> (u8, u32, u32, usize) {
    assert_eq!(a.len(), b.len(), "sizes differ");
    let mut worst = (0u8, 0, 0, 0);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let d = x.abs_diff(*y);
        if d > worst.0 {
            let p = (i / 4) as u32;
            worst = (d, p % width, p / width, i % 4);
        }
    }
    worst
}

pub const POISON: u32 = 0x7fc0_dead; // a NaN in f32, odd values in f16 and u8

/// Runs `model` through the pipeline on `backend` and compares the input tensor,
/// the output tensor (read through Vulkan after poisoning) and the output image
/// with ONNX Runtime's CPU provider run directly on the same picture.
pub fn check_backend(model: &str, backend: Backend, width: u32, height: u32, seed: u32, tol: Tolerance) -> (f32, u8) {
    check_frames(model, backend, plain, width, height, seed, 1, tol)
}

/// The model file as it is: its own precision (`Precision::Fp32`: an fp32 model is not
/// converted to fp16 on the CUDA backend) and no graph rewrites (the upsample skip's fold
/// is exact on ONNX Runtime's CPU provider, but its 1×1 convolution runs in TF32 on the
/// CUDA provider, ONNX Runtime's default for fp32: 2.4e-4 off on the tiny models, over
/// these checks' 1e-4), for checks held to fp32 tolerances against ONNX Runtime's CPU run
/// of the file. The automatic precision and the fold have tests of their own.
pub fn exact(b: ContextBuilder) -> ContextBuilder {
    b.map_cuda_options(|c| c.with_precision(neural_frame::Precision::Fp32))
        .map_cuda_options(|c| c.with_rewrite_graph(false))
}

/// Options applied to a context's builder by a test.
pub type Tune = fn(ContextBuilder) -> ContextBuilder;

/// The builder as it is.
pub fn plain(b: ContextBuilder) -> ContextBuilder {
    b
}

/// Like [`check_backend`] for `frames` different pictures in a row through one
/// context (every slot of the ring is used more than once), with `tune` applied;
/// returns the worst differences.
#[allow(clippy::too_many_arguments)]
pub fn check_frames(
    model: &str,
    backend: Backend,
    tune: Tune,
    width: u32,
    height: u32,
    seed: u32,
    frames: u32,
    tol: Tolerance,
) -> (f32, u8) {
    let path = Path::new(model);
    let mut ctx = tune(exact(NeuralFrameContext::builder(path)).backend(backend).frame_size(width, height))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input image");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output image");
    let mut worst = (0f32, 0u8);
    for frame in 0..frames {
        let (t, p) = check_frame(&mut ctx, path, input, output, seed + 7 * frame, tol);
        worst = (worst.0.max(t), worst.1.max(p));
    }
    worst
}

/// One frame from `input` into `output` (both made by the context) checked as
/// [`check_backend`] does.
pub fn check_frame(
    ctx: &mut NeuralFrameContext,
    model: &Path,
    input: InputId,
    output: OutputId,
    seed: u32,
    tol: Tolerance,
) -> (f32, u8) {
    let backend = ctx.report().requested;
    let contract = ctx.contract().clone();
    let (width, height) = ctx.frame_size();
    let rgba = picture(width, height, seed);
    ctx.upload(input, &rgba).expect("upload");
    let (ow, oh) = ctx.output_size();
    ctx.upload_output(output, &vec![0xa5; (ow * oh * 4) as usize]).expect("poison output image");
    ctx.poison_output_tensor(POISON).expect("poison output tensor");

    ctx.infer(input, output).expect("infer");

    // The pre pass wrote exactly the tensor the host computes.
    let got_in = values(contract.input, &ctx.read_input_tensor().expect("input tensor"));
    let want_in = values(contract.input, &input_tensor(contract.input, &rgba, width, height));
    let worst_in = got_in.iter().zip(&want_in).map(|(a, b)| abs_diff(*a, *b)).fold(0f32, f32::max);
    assert!(worst_in <= 1e-3, "{}: pre pass input tensor differs by {worst_in}", model.display());

    // ONNX Runtime wrote its output straight into the Vulkan buffer (poisoned before).
    let reference = reference_output(model, &contract, &rgba, width, height);
    let got_out = values(contract.output, &ctx.read_output_tensor().expect("output tensor"));
    let want_out = values(contract.output, &reference);
    assert_eq!(got_out.len(), want_out.len());
    let worst_out = got_out.iter().zip(&want_out).map(|(a, b)| abs_diff(*a, *b)).fold(0f32, f32::max);
    let limit = if contract.output.element == Element::F16 { tol.tensor_f16 } else { tol.tensor };
    assert!(
        worst_out <= limit,
        "{}: output tensor in the Vulkan buffer differs from ORT's by {worst_out} (NaN means unwritten)",
        model.display()
    );

    // The post pass made the image: ≤ 1/255 per channel, every pixel written.
    let image = ctx.readback(output).expect("readback");
    let want = expected_image(&contract, &reference, &rgba, width, height);
    let (d, x, y, c) = max_diff(&image, &want, ow);
    assert!(d <= tol.pixel, "{} {width}×{height}: pixel ({x}, {y}) channel {c} differs by {d}", model.display());
    if backend != Backend::Auto {
        assert_eq!(ctx.backend_name(), if backend == Backend::Cuda { "cuda" } else { "cpu" });
    }
    (worst_out, d)
}

/// Runs `frames` varied frames through the ring (several in flight, outputs
/// read back as each retires) and through the synchronous path, and checks that
/// every frame's output image is identical.
pub fn ring_matches_sync(model: &str, backend: Backend, tune: Tune, width: u32, height: u32, frames: u32) {
    let mut ctx = tune(NeuralFrameContext::builder(model).backend(backend).frame_size(width, height).slots(3))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    // Byte for byte across frames: every frame on the same session (fast start's fused one).
    assert!(ctx.wait_settled(std::time::Duration::from_secs(120)).expect("settled"), "{model}: not settled");
    let (ow, oh) = ctx.output_size();
    let lanes = ctx.slot_count() + 1;
    let inputs: Vec<InputId> =
        (0..lanes).map(|_| ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input")).collect();
    let outputs: Vec<OutputId> =
        (0..lanes).map(|_| ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output")).collect();
    let sync_in = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let sync_out = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    let poison = vec![0x5a; (ow * oh * 4) as usize];
    let mut pending: std::collections::VecDeque<(u32, Ticket, usize)> = Default::default();
    let mut max_in_flight = 0;
    let check = |ctx: &mut NeuralFrameContext, frame: u32, ticket: Ticket, lane: usize| {
        ctx.wait(&ticket).expect("wait");
        let ring = ctx.readback(outputs[lane]).expect("readback ring output");
        ctx.upload(sync_in, &picture(width, height, 1000 + frame)).expect("upload");
        ctx.upload_output(sync_out, &poison).expect("poison");
        ctx.infer(sync_in, sync_out).expect("sync infer");
        let sync = ctx.readback(sync_out).expect("readback sync output");
        let (d, x, y, c) = max_diff(&ring, &sync, ow);
        assert_eq!(d, 0, "{model} frame {frame}: ring and sync differ at ({x}, {y}) ch {c} by {d}");
    };
    for frame in 0..frames {
        let lane = frame as usize % lanes;
        if pending.len() == lanes - 1 {
            let (f, t, l) = pending.pop_front().expect("pending");
            check(&mut ctx, f, t, l);
        }
        ctx.upload(inputs[lane], &picture(width, height, 1000 + frame)).expect("upload");
        ctx.upload_output(outputs[lane], &poison).expect("poison");
        match ctx.submit(Frame::new(inputs[lane], outputs[lane])).expect("submit") {
            Submitted::Frame(t) => pending.push_back((frame, t, lane)),
            Submitted::Skipped => panic!("the blocking policy never skips"),
        }
        max_in_flight = max_in_flight.max(ctx.in_flight());
    }
    while let Some((f, t, l)) = pending.pop_front() {
        check(&mut ctx, f, t, l);
    }
    assert!(max_in_flight <= ctx.slot_count());
    println!("{model}: {frames} frames through the ring equal the synchronous path; up to {max_in_flight} in flight");
}

/// A consumer that never waits: with `Block` the ring never holds more than its
/// slots and every ticket still retires; with `Skip` nothing blocks and skipped
/// frames are counted. Returns the frames skipped.
pub fn slow_consumer(
    model: &str,
    backend: Backend,
    tune: Tune,
    policy: BackPressure,
    (width, height): (u32, u32),
    submissions: u32,
) -> u64 {
    let mut ctx = tune(NeuralFrameContext::builder(model).backend(backend).frame_size(width, height))
        .slots(2)
        .back_pressure(policy)
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    ctx.upload(input, &picture(width, height, 9)).expect("upload");
    let mut tickets = Vec::new();
    for _ in 0..submissions {
        match ctx.submit(Frame::new(input, output)).expect("submit") {
            Submitted::Frame(t) => tickets.push(t),
            Submitted::Skipped => {}
        }
        assert!(ctx.in_flight() <= 2, "more frames in flight than slots");
    }
    let skipped = ctx.skipped();
    assert_eq!(tickets.len() as u64 + skipped, submissions as u64);
    for t in tickets {
        ctx.wait(&t).expect("every submitted frame retires");
    }
    skipped
}

/// Drops contexts with frames in flight, `rounds` times: nothing may hang or leak.
/// Returns the open fds before and after.
pub fn drop_in_flight(model: &str, backend: Backend, tune: Tune, rounds: u32) -> (usize, usize) {
    let round = || {
        let mut ctx = tune(NeuralFrameContext::builder(model).backend(backend).frame_size(64, 48).slots(3))
            .build()
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
        let outputs: Vec<_> =
            (0..3).map(|_| ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output")).collect();
        ctx.upload(input, &picture(64, 48, 3)).expect("upload");
        for o in &outputs {
            ctx.submit(Frame::new(input, *o)).expect("submit");
        }
        assert!(ctx.in_flight() > 0);
        drop(ctx); // with frames in flight
    };
    // First use loads kernels, and the fused convolutions (a default for fp16) choose cuDNN's
    // plans for these shapes, kept for the process: one context settles before anything counts
    // (dropped mid-search, each round would choose a few more of them).
    let mut settled = tune(NeuralFrameContext::builder(model).backend(backend).frame_size(64, 48).slots(3))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    assert!(settled.wait_settled(std::time::Duration::from_secs(300)).expect("settle"), "{model}: settled");
    drop(settled);
    round();
    let before = super::open_fds();
    for _ in 0..rounds {
        round();
    }
    (before, super::open_fds())
}

/// The benchmark's competent host path (`host_pinned_frame`: pinned staging in and out, one
/// host wait) on `backend`, under the validation layer: two different frames in a row, each
/// equal to ONNX Runtime's CPU run on its own pixels (the second's result must be its own,
/// not the first's), and no validation errors.
pub fn check_host_pinned(backend: Backend, tune: Tune, model: &str, w: u32, h: u32) {
    let mut ctx = tune(NeuralFrameContext::builder(model).backend(backend).frame_size(w, h).validation(true))
        .build()
        .expect("context under the validation layer");
    let contract = ctx.contract().clone();
    let mut lane = ctx.host_pinned().expect("a host-pinned lane");
    for seed in [11, 12] {
        let rgba = picture(w, h, seed);
        lane.input_mut().expect("staging").copy_from_slice(&rgba);
        let stats = ctx.host_pinned_frame(&mut lane).expect("host-pinned frame");
        assert!(stats.infer_ms > 0.0, "{stats:?}");
        let reference = reference_output(Path::new(model), &contract, &rgba, w, h);
        let want = expected_image(&contract, &reference, &rgba, w, h);
        let got = lane.output().expect("read back").to_vec();
        let (d, x, y, c) = max_diff(&got, &want, contract.scale.x * w);
        assert!(d <= 1, "seed {seed}: ({x}, {y}) ch {c} differs by {d}");
    }
    ctx.close_host_pinned(lane).expect("closed");
    assert_eq!(ctx.validation_errors(), 0, "the validation layer reported errors");
}
