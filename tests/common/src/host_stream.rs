//! The library's host streams (`NeuralFrameContext::host_stream`) checked frame by
//! frame against the independent references of `stream.rs`: YUV → RGB in f64,
//! ONNX Runtime's CPU run of the model, RGB → YUV. Shared by the CPU and GPU tests.

use neural_frame::{
    Backend, ChromaSiting, FrameStats, HostLayout, NeuralFrameContext, Subsampling, YuvLayout, YuvMatrix, YuvRange,
};

use super::pipeline::{Tune, exact};
use super::stream::{Clip, Conv, Layout, Model, compare, decode, encode, expected};

/// The library's layout of a clip's `C` tag, BT.709 limited.
pub fn host_layout(tag: &str) -> HostLayout {
    let l = Layout::of(tag);
    let subsampling = match (l.planes, l.sub_x, l.sub_y) {
        (1, ..) => Subsampling::Mono,
        (_, 2, 2) => Subsampling::S420,
        (_, 2, 1) => Subsampling::S422,
        _ => Subsampling::S444,
    };
    let siting = match (l.off_x == 0.0, l.off_y == 0.0) {
        (true, true) => ChromaSiting::TopLeft,
        (true, false) => ChromaSiting::Left,
        _ => ChromaSiting::Centre,
    };
    HostLayout::Yuv(YuvLayout {
        subsampling,
        bits: l.depth as u8,
        alpha: l.planes == 4,
        matrix: YuvMatrix::Bt709,
        range: YuvRange::Limited,
        siting,
    })
}

/// Streams `frames` frames of a `tag` clip (`w`×`h`, varied content) through a context of
/// `model` on `backend` with `depth` lanes (the lanes reused: frames > depth), and compares
/// every output frame with the reference. Returns the worst PSNR and max difference, and
/// the frames' stats.
#[allow(clippy::too_many_arguments)]
pub fn check_yuv_stream(
    model: &str,
    backend: Backend,
    tune: Tune,
    tag: &str,
    (w, h): (u32, u32),
    frames: usize,
    depth: usize,
    min_psnr: f64,
    max_diff: u16,
) -> (f64, u16, Vec<FrameStats>) {
    let conv = Conv::new("bt709", false);
    let clip = Clip::generate(tag, w, h, frames, conv, 11);
    let reference = Model::new(model);
    let mut ctx = tune(exact(NeuralFrameContext::builder(model).backend(backend).frame_size(w, h)))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let (ow, oh) = ctx.output_size();
    let layout = host_layout(tag);
    let mut stream = ctx.host_stream(layout, layout, depth).expect("host stream");
    assert_eq!(stream.input_len(), clip.layout.frame_bytes(w, h), "input frame length");
    assert_eq!(stream.output_len(), clip.layout.frame_bytes(ow, oh), "output frame length");
    let mut outputs = Vec::new();
    let mut stats = Vec::new();
    let mut pop = |ctx: &mut NeuralFrameContext, stream: &mut neural_frame::HostStream| {
        let (bytes, s) = ctx.stream_pop(stream, |b| b.to_vec()).expect("pop").expect("a frame in flight");
        // lavapipe's and NVIDIA's queues write timestamps: the read-back's GPU time is there.
        let read_back = stream.last_read_back_ms();
        assert!(read_back.is_finite() && read_back >= 0.0, "the read-back's GPU time: {read_back}");
        outputs.push(bytes);
        stats.push(s);
    };
    for f in &clip.frames {
        if !stream.has_room() {
            pop(&mut ctx, &mut stream);
        }
        let bytes = encode(f, clip.layout);
        ctx.stream_push(&mut stream, |staging| staging.copy_from_slice(&bytes)).expect("push");
    }
    while stream.in_flight() > 0 {
        pop(&mut ctx, &mut stream);
    }
    assert!(ctx.stream_pop(&mut stream, |_| ()).expect("pop on empty").is_none());
    ctx.close_stream(stream).expect("close");
    let (mut worst_psnr, mut worst_max) = (f64::INFINITY, 0u16);
    for (i, out) in outputs.iter().enumerate() {
        let got = decode(out, clip.layout, ow, oh);
        let want = expected(&reference, &clip, i, conv);
        let d = compare(&got, &want, clip.layout);
        assert!(
            d.psnr >= min_psnr && d.max <= max_diff,
            "{tag} frame {i}: PSNR {:.1} dB, max diff {} at plane {} sample {}",
            d.psnr,
            d.max,
            d.at.0,
            d.at.1
        );
        worst_psnr = worst_psnr.min(d.psnr);
        worst_max = worst_max.max(d.max);
    }
    (worst_psnr, worst_max, stats)
}

/// RGB24 frames through a host stream against ONNX Runtime's CPU run, byte for byte
/// within `max_diff`; returns the largest difference.
pub fn check_rgb24_stream(model: &str, backend: Backend, (w, h): (u32, u32), frames: u32, max_diff: u8) -> u8 {
    let reference = Model::new(model);
    let mut ctx = exact(NeuralFrameContext::builder(model).backend(backend).frame_size(w, h))
        .build()
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let mut stream = ctx.host_stream(HostLayout::Rgb8, HostLayout::Rgb8, 2).expect("host stream");
    let mut worst = 0u8;
    for seed in 0..frames {
        let rgba = super::pipeline::picture(w, h, 100 + seed);
        // Alpha 1: RGB24 frames carry none.
        let opaque: Vec<u8> = rgba.chunks(4).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
        let rgb: Vec<u8> = opaque.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        ctx.stream_push(&mut stream, |staging| staging.copy_from_slice(&rgb)).expect("push");
        let (got, _) = ctx.stream_pop(&mut stream, |b| b.to_vec()).expect("pop").expect("a frame");
        let want = reference.run8(&opaque, w, h);
        let want: Vec<u8> = want.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(got.len(), want.len());
        let d = got.iter().zip(&want).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
        assert!(d <= max_diff, "RGB24 frame {seed}: max diff {d}");
        worst = worst.max(d);
    }
    ctx.close_stream(stream).expect("close");
    worst
}
