//! `neural-frame bench`: the pipeline against its floor and against the host
//! round trip, on one model, size and device.
//!
//! Modes, one run, side by side:
//! - `ort-alone`: ONNX Runtime on input and output already bound in device
//!   memory (slot 0's buffers), waited for each frame — the floor;
//! - `zero-copy sync`: image → pre pass → model → post pass → image, one frame at a time;
//! - `zero-copy pipelined`: the same through the ring, several frames in flight;
//! - `caller frames`: the same ring on a renderer's own images, on a Vulkan
//!   device of its own, imported by file descriptor (see `bench_caller`);
//!   skipped, with the reason, where that cannot run;
//! - `host pinned`: the competent host path — the frame starts and ends in host
//!   memory (persistent pinned staging, allocated once), one GPU copy each way,
//!   the same pre pass, model and post pass, one host wait per frame; checked to
//!   compute the same image as `zero-copy sync`;
//! - `host naive` (`--host-naive`, slow): the path users start from, kept for
//!   what it is — read the frame back with a staging buffer made per call, build
//!   the tensor on the CPU, run ONNX Runtime with host tensors, convert on the
//!   CPU, upload.

use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use neural_frame::diagnostics::{FrameTrace, HostParts, Interference};
use neural_frame::image_io::Rgba8;
use neural_frame::{
    BackPressure, BackendReport, ConvSearch, CudaOptions, DeviceSelector, Frame, FrameStats, InputId,
    NeuralFrameContext, OutputId, PostWait, Submitted, Ticket, Tuning, TuningInEffect,
};
use serde::Serialize;

use crate::ModelArgs;
use crate::bench_caller::{self, CallerFramesReport};
use crate::bench_serve::argv;

type Result<T> = anyhow::Result<T>;

/// What to measure.
#[derive(Clone)]
pub(crate) struct BenchOptions {
    /// The model and how it runs (backend, device, tuning, ONNX Runtime).
    pub(crate) model: ModelArgs,
    /// Input frame size.
    pub(crate) size: (u32, u32),
    /// Timed frames per mode.
    pub(crate) frames: usize,
    /// Untimed frames first; then each mode's own warm-up (see [`WARM_MS`]), unless 0.
    pub(crate) warmup: usize,
    /// Slots in the ring.
    pub(crate) slots: usize,
    /// The picture the frames are made from (varied per frame).
    pub(crate) picture: Rgba8,
    /// Include the naive host round trip (slow: it dominates the benchmark's own run time).
    pub(crate) host_naive: bool,
    /// Also trace synchronous frames and measure the model under Vulkan load (CUDA backend).
    pub(crate) diagnose: bool,
    /// `caller frames`: the renderer's submissions carry only its semaphores (no copies).
    pub(crate) caller_no_copies: bool,
    /// `caller frames`: the renderer's per-frame work on a transfer-only queue family's queue, where there is one.
    pub(crate) caller_transfer_queue: bool,
}

/// One mode's numbers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ModeResult {
    /// Mode name.
    pub(crate) mode: &'static str,
    /// Median time per frame (ms): latency for one-at-a-time modes, interval between retirements when pipelined.
    pub(crate) median_ms: f64,
    /// 99th percentile of the same.
    pub(crate) p99_ms: f64,
    /// Frames per second over the whole timed run.
    pub(crate) fps: f64,
    /// Median minus ort-alone's median (ms).
    pub(crate) overhead_vs_ort_ms: f64,
    /// Throughput relative to ort-alone's.
    pub(crate) throughput_vs_ort: f64,
    /// `host pinned`'s median over this mode's median.
    pub(crate) speedup_vs_host_pinned: f64,
    /// The median per output megapixel (ms/MP): the cost that compares across sizes.
    pub(crate) ms_per_output_megapixel: f64,
    /// Timed frames.
    pub(crate) frames: usize,
}

/// Medians of the per-stage GPU times of the zero-copy sync mode (ms).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StageMedians {
    /// Pre pass (Vulkan timestamps).
    pub(crate) pre_ms: f64,
    /// Model (CUDA events; host clock on the CPU backend).
    pub(crate) infer_ms: f64,
    /// Post pass (Vulkan timestamps).
    pub(crate) post_ms: f64,
}

/// Where the pipelined mode's time goes (ms).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PipelineDiagnostics {
    /// CUDA stream idle between one frame's model end and the next one's start: median.
    pub(crate) gpu_gap_median_ms: f64,
    /// The same, 99th percentile.
    pub(crate) gpu_gap_p99_ms: f64,
    /// The same, mean.
    pub(crate) gpu_gap_mean_ms: f64,
    /// Host time of `submit`'s hand-off to CUDA and ONNX Runtime: median.
    pub(crate) enqueue_median_ms: f64,
    /// The same, 99th percentile.
    pub(crate) enqueue_p99_ms: f64,
    /// Model time on the GPU (CUDA events): median.
    pub(crate) model_median_ms: f64,
    /// The same, per ring slot.
    pub(crate) model_median_by_slot_ms: Vec<f64>,
    /// Every timed frame's times, in order.
    pub(crate) frames: Vec<FrameStats>,
}

/// The whole benchmark.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BenchReport {
    /// This process's arguments, as given.
    pub(crate) argv: Vec<String>,
    /// Model file.
    pub(crate) model: String,
    /// Input size.
    pub(crate) input_size: (u32, u32),
    /// Output size.
    pub(crate) output_size: (u32, u32),
    /// Model input kind.
    pub(crate) tensor: String,
    /// How frames were cut into tiles (absent: whole frames): the tile, the overlap, tiles per frame.
    pub(crate) tiles: Option<TilesReport>,
    /// Backend and devices.
    pub(crate) backend: BackendReport,
    /// The precision the model runs in, why, and the graph rewrites applied.
    pub(crate) precision: neural_frame::PrecisionReport,
    /// The tuning in effect, flat ([`flat_tuning`]).
    #[serde(flatten)]
    pub(crate) tuning: Tuning,
    /// Ring slots.
    pub(crate) slots: usize,
    /// Warm-up frames first.
    pub(crate) warmup: usize,
    /// The least time each mode's own warm-up lasted (ms; 0 with no warm-up).
    pub(crate) warmup_min_ms: f64,
    /// Results per mode.
    pub(crate) modes: Vec<ModeResult>,
    /// GPU stage times (zero-copy sync).
    pub(crate) stages: StageMedians,
    /// The naive host round trip's parts (absent when not run).
    pub(crate) host_naive_parts: Option<HostParts>,
    /// The largest per-channel difference between `host pinned`'s output and
    /// `zero-copy sync`'s on the same frame (the run fails above 1).
    pub(crate) host_pinned_max_difference: u8,
    /// Where the pipelined mode's time goes.
    pub(crate) pipelined: PipelineDiagnostics,
    /// The renderer's own frames imported by fd: how they ran, or why they did not.
    pub(crate) caller_frames: CallerFramesReport,
    /// From starting to build the context to the first frame retired (ms).
    pub(crate) time_to_first_frame_ms: f64,
    /// Context set-up alone (ms).
    pub(crate) setup_ms: f64,
    /// Device memory in use on the whole GPU after warm-up (MiB; CUDA backend).
    pub(crate) device_memory_used_mib: Option<f64>,
    /// `--diagnose`: medians of host-polled timelines of synchronous frames.
    pub(crate) sync_timeline: Option<FrameTrace>,
    /// `--diagnose`: the model's GPU time while Vulkan is idle, waiting or busy.
    pub(crate) interference: Option<Interference>,
}

fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[rank.min(s.len() - 1)]
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

/// After the `--warmup` frames, each of ort-alone, sync and pipelined warms up in its own
/// pattern for at least this long (and `min` frames; none with `--warmup 0`). On an H100 the
/// ring's model took up to 0.4 ms longer than in its last 100 frames for about its first 100
/// frames (0.2 s) after the synchronous mode, with or without the post kernel beside it
/// (docs/performance.md): the ring's figure had timed a start-up transient.
pub(crate) const WARM_MS: f64 = 500.0;

/// Runs `frame(i)` for i = 0, 1, … until `min` frames and [`WARM_MS`] have passed (nothing
/// where `on` is false).
fn warm_up(on: bool, min: usize, mut frame: impl FnMut(usize) -> Result<()>) -> Result<()> {
    let t = Instant::now();
    let mut i = 0;
    while on && (i < min || ms_since(t) < WARM_MS) {
        frame(i)?;
        i += 1;
    }
    Ok(())
}

/// Submits `frame` to the ring, first waiting for the oldest frame in flight where every slot
/// is taken (its statistics returned).
fn ring_submit(
    ctx: &mut NeuralFrameContext,
    pending: &mut std::collections::VecDeque<Ticket>,
    frame: Frame,
) -> Result<Option<FrameStats>> {
    let retired = if pending.len() == ctx.slot_count() {
        let ticket = pending.pop_front().ok_or_else(|| anyhow::anyhow!("ring bookkeeping"))?;
        Some(ctx.wait(&ticket)?)
    } else {
        None
    };
    match ctx.submit(frame)? {
        Submitted::Frame(ticket) => pending.push_back(ticket),
        Submitted::Skipped => anyhow::bail!("a blocking ring skipped a frame"),
    }
    Ok(retired)
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Variants of the picture, so that frames differ: as is, mirrored, brighter, darker.
fn variants(p: &Rgba8) -> Vec<Vec<u8>> {
    let w = p.width as usize;
    let mirrored: Vec<u8> = p
        .pixels
        .chunks(w * 4)
        .flat_map(|row| row.chunks(4).rev().flat_map(|px| px.to_vec()).collect::<Vec<u8>>())
        .collect();
    let scale = |f: f32| -> Vec<u8> {
        p.pixels
            .chunks(4)
            .flat_map(|px| {
                let c = |v: u8| ((v as f32) * f).round().clamp(0.0, 255.0) as u8;
                [c(px[0]), c(px[1]), c(px[2]), px[3]]
            })
            .collect()
    };
    vec![p.pixels.clone(), mirrored, scale(1.15), scale(0.8)]
}

/// A context as the options describe, with blocking back-pressure.
fn context(opts: &BenchOptions, device: Option<DeviceSelector>) -> Result<NeuralFrameContext> {
    let mut b = opts.model.builder(opts.size.0, opts.size.1).slots(opts.slots).back_pressure(BackPressure::Block);
    if let Some(d) = device {
        b = b.device(d);
    }
    Ok(b.build()?)
}

/// Input images holding the picture's variants, and `lanes` output images.
fn images(ctx: &mut NeuralFrameContext, picture: &Rgba8, lanes: usize) -> Result<(Vec<InputId>, Vec<OutputId>)> {
    let mut inputs = Vec::new();
    for pixels in variants(picture) {
        let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
        ctx.upload(input, &pixels)?;
        inputs.push(input);
    }
    let outputs =
        (0..lanes).map(|_| ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)).collect::<neural_frame::Result<_>>()?;
    Ok((inputs, outputs))
}

/// Runs every mode and reports. `progress(mode, done, total)` is called as frames complete.
pub(crate) fn run(opts: &BenchOptions, mut progress: impl FnMut(&str, usize, usize)) -> Result<BenchReport> {
    let (w, h) = opts.size;
    let picture = opts.picture.resized(w, h)?;
    let frames = opts.frames.max(1);
    let t0 = Instant::now();
    let mut ctx = context(opts, None)?;
    let setup_ms = ms_since(t0);
    let lanes = ctx.slot_count() + 1;
    let (inputs, outputs) = images(&mut ctx, &picture, lanes)?;
    let pictures = variants(&picture);
    // Time to first frame counts from the start of set-up; the first frame's
    // upload is not part of it (a renderer's frame is already on the GPU).
    let t_first = Instant::now();
    ctx.infer(inputs[0], outputs[0])?;
    let time_to_first_frame_ms = setup_ms + ms_since(t_first);
    // Fast start: the modes time the session the context was built for (the fused one,
    // built beside the first frame), not the one that took the first frame.
    if !ctx.wait_settled(std::time::Duration::from_secs(300))? {
        anyhow::bail!("the fused session was not ready within 300 s");
    }
    for i in 0..opts.warmup {
        ctx.infer(inputs[i % inputs.len()], outputs[0])?;
        progress("warm-up", i + 1, opts.warmup);
    }
    let warm = opts.warmup > 0;
    let device_memory_used_mib = ctx.cuda_memory()?.map(|(free, total)| (total - free) as f64 / (1024.0 * 1024.0));

    // ort-alone: the floor (tiled: the model once per tile of a frame).
    let tiles_per_frame = ctx.tiles().map_or(1, |(_, n)| n);
    progress("ort-alone warm-up", 0, 1);
    warm_up(warm, 1, |_| {
        for _ in 0..tiles_per_frame {
            ctx.run_model_only()?;
        }
        Ok(())
    })?;
    let mut alone = Vec::with_capacity(frames);
    let t = Instant::now();
    for i in 0..frames {
        let mut frame_ms = 0.0;
        for _ in 0..tiles_per_frame {
            frame_ms += ctx.run_model_only()?;
        }
        alone.push(frame_ms);
        progress("ort-alone", i + 1, frames);
    }
    let alone_total = ms_since(t);

    // zero-copy sync.
    progress("zero-copy sync warm-up", 0, 1);
    warm_up(warm, 1, |i| Ok(ctx.infer(inputs[i % inputs.len()], outputs[0]).map(drop)?))?;
    let mut sync = Vec::with_capacity(frames);
    let mut stages: Vec<FrameStats> = Vec::with_capacity(frames);
    let t = Instant::now();
    for i in 0..frames {
        let ft = Instant::now();
        let s = ctx.infer(inputs[i % inputs.len()], outputs[0])?;
        sync.push(ms_since(ft));
        stages.push(s);
        progress("zero-copy sync", i + 1, frames);
    }
    let sync_total = ms_since(t);

    // zero-copy pipelined: keep the ring full, retire the oldest; warmed up the same way, then
    // drained.
    let mut pending: std::collections::VecDeque<Ticket> = Default::default();
    let frame = |i: usize| Frame::new(inputs[i % inputs.len()], outputs[i % lanes]);
    progress("zero-copy pipelined warm-up", 0, 1);
    warm_up(warm, ctx.slot_count() * 2, |i| ring_submit(&mut ctx, &mut pending, frame(i)).map(drop))?;
    while let Some(ticket) = pending.pop_front() {
        ctx.wait(&ticket)?;
    }
    let mut intervals = Vec::with_capacity(frames);
    let t = Instant::now();
    let mut last = Instant::now();
    let mut pipe_stats: Vec<FrameStats> = Vec::with_capacity(frames);
    let mut retire = |stats: FrameStats, last: &mut Instant| {
        pipe_stats.push(stats);
        intervals.push(ms_since(*last));
        *last = Instant::now();
        progress("zero-copy pipelined", pipe_stats.len(), frames);
    };
    for i in 0..frames {
        if let Some(stats) = ring_submit(&mut ctx, &mut pending, frame(i))? {
            retire(stats, &mut last);
        }
    }
    while let Some(ticket) = pending.pop_front() {
        retire(ctx.wait(&ticket)?, &mut last);
    }
    let pipe_total = ms_since(t);
    // The first interval includes filling the ring; leave it out of the distribution.
    let pipe_dist: Vec<f64> = intervals.iter().skip(1).copied().collect();

    // caller frames: the renderer's own images, imported by fd, through the same ring.
    let (caller, caller_frames) = bench_caller::run(
        &mut ctx,
        &pictures,
        (&inputs, outputs[0]),
        (frames, opts.warmup, !opts.caller_no_copies, opts.caller_transfer_queue),
        &mut progress,
    )?;
    if let CallerFramesReport::Skipped { reason } = &caller_frames {
        log::warn!("caller frames skipped: {reason}");
    }

    // host pinned: the frame in pinned host memory, written once (as a PyTorch user's
    // pinned tensor is), copied in and out by the GPU each frame.
    let mut lane = ctx.host_pinned()?;
    lane.input_mut()?.copy_from_slice(&pictures[0]);
    for _ in 0..opts.warmup.min(10) {
        ctx.host_pinned_frame(&mut lane)?;
    }
    let mut pinned = Vec::with_capacity(frames);
    let t = Instant::now();
    for i in 0..frames {
        let ft = Instant::now();
        ctx.host_pinned_frame(&mut lane)?;
        pinned.push(ms_since(ft));
        progress("host pinned", i + 1, frames);
    }
    let pinned_total = ms_since(t);
    let pinned_image = lane.output()?.to_vec();
    ctx.close_host_pinned(lane)?;
    // The same frame through the zero-copy path (inputs[0] holds the first variant).
    ctx.infer(inputs[0], outputs[0])?;
    let zero_copy_image = ctx.readback(outputs[0])?;
    let host_pinned_max_difference =
        pinned_image.iter().zip(&zero_copy_image).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(u8::MAX);
    if pinned_image.len() != zero_copy_image.len() || host_pinned_max_difference > 1 {
        anyhow::bail!(
            "host pinned computed another image than zero-copy sync (largest difference {host_pinned_max_difference}): \
             the baseline would not be comparable"
        );
    }

    // host naive (see neural_frame::diagnostics::HostParts).
    let contract = ctx.contract().clone();
    let (ow, oh) = ctx.output_size();
    let mut host = Vec::new();
    let mut parts: Vec<HostParts> = Vec::new();
    let t = Instant::now();
    let host_frames = if opts.host_naive { frames } else { 0 };
    for i in 0..host_frames {
        let ft = Instant::now();
        parts.push(ctx.host_round_trip(inputs[i % inputs.len()], outputs[0])?);
        host.push(ms_since(ft));
        progress("host naive", i + 1, frames);
    }
    let host_total = ms_since(t);

    let on_cuda = ctx.backend_name() == "cuda";
    if opts.diagnose && !on_cuda {
        log::warn!("--diagnose measures the Vulkan/CUDA hand-off; skipped on the CPU backend");
    }
    if opts.diagnose && tiles_per_frame > 1 {
        log::warn!("--diagnose probes whole frames; skipped for tiled frames");
    }
    let (sync_timeline, interference) = if opts.diagnose && on_cuda && tiles_per_frame == 1 {
        let mut traces = Vec::new();
        for i in 0..frames {
            traces.push(ctx.trace_frame(inputs[i % inputs.len()], outputs[0])?.1);
            progress("sync timeline", i + 1, frames);
        }
        let m = |f: &dyn Fn(&FrameTrace) -> f64| median(&traces.iter().map(f).collect::<Vec<_>>());
        let timeline = FrameTrace {
            submitted_ms: m(&|t| t.submitted_ms),
            input_ready_ms: m(&|t| t.input_ready_ms),
            model_start_ms: m(&|t| t.model_start_ms),
            model_end_ms: m(&|t| t.model_end_ms),
            output_ready_ms: m(&|t| t.output_ready_ms),
            frame_done_ms: m(&|t| t.frame_done_ms),
        };
        // The probe loads the model's stream with the Vulkan passes: none with CUDA passes.
        let interference = if ctx.tuning().cuda.is_some_and(|c| c.handover.cuda_passes) {
            None
        } else {
            progress("interference", 0, 1);
            let i = ctx.interference(inputs[0], outputs[0], frames.min(100))?;
            progress("interference", 1, 1);
            Some(i)
        };
        (Some(timeline), interference)
    } else {
        (None, None)
    };

    let floor = median(&alone);
    let floor_fps = frames as f64 / (alone_total / 1e3);
    let pinned_median = median(&pinned);
    let output_megapixels = f64::from(ow) * f64::from(oh) / 1e6;
    let mode = |name: &'static str, dist: &[f64], total_ms: f64| {
        let med = median(dist);
        let fps = frames as f64 / (total_ms / 1e3);
        ModeResult {
            mode: name,
            median_ms: med,
            p99_ms: percentile(dist, 99.0),
            fps,
            overhead_vs_ort_ms: med - floor,
            throughput_vs_ort: fps / floor_fps,
            speedup_vs_host_pinned: pinned_median / med,
            ms_per_output_megapixel: med / output_megapixels,
            frames,
        }
    };
    let mut modes = vec![
        mode("ort-alone", &alone, alone_total),
        mode("zero-copy sync", &sync, sync_total),
        mode("zero-copy pipelined", &pipe_dist, pipe_total),
    ];
    if let Some(c) = &caller {
        modes.push(mode("caller frames", &c.intervals, c.total_ms));
    }
    modes.push(mode("host pinned", &pinned, pinned_total));
    if opts.host_naive {
        modes.push(mode("host naive", &host, host_total));
    }
    let pick =
        |f: &dyn Fn(&FrameStats) -> f64| -> Vec<f64> { pipe_stats.iter().map(f).filter(|v| v.is_finite()).collect() };
    let gaps = pick(&|s| s.gpu_gap_ms);
    let enqueue = pick(&|s| s.enqueue_ms);
    let pipelined = PipelineDiagnostics {
        gpu_gap_median_ms: median(&gaps),
        gpu_gap_p99_ms: percentile(&gaps, 99.0),
        gpu_gap_mean_ms: if gaps.is_empty() { f64::NAN } else { gaps.iter().sum::<f64>() / gaps.len() as f64 },
        enqueue_median_ms: median(&enqueue),
        enqueue_p99_ms: percentile(&enqueue, 99.0),
        model_median_ms: median(&pick(&|s| s.infer_ms)),
        model_median_by_slot_ms: (0..ctx.slot_count())
            .map(|i| median(&pipe_stats.iter().filter(|s| s.slot == i).map(|s| s.infer_ms).collect::<Vec<_>>()))
            .collect(),
        frames: pipe_stats.clone(),
    };
    let stage = |f: &dyn Fn(&FrameStats) -> f64| median(&stages.iter().map(f).collect::<Vec<_>>());
    Ok(BenchReport {
        argv: argv(),
        model: opts.model.model.display().to_string(),
        input_size: (w, h),
        output_size: (ow, oh),
        tensor: contract.input.describe().to_string(),
        tiles: ctx.tiles().map(|(t, n)| TilesReport { tile: t.tile, overlap: t.overlap, per_frame: n }),
        backend: ctx.report().clone(),
        precision: ctx.precision().clone(),
        tuning: flat_tuning(ctx.tuning()),
        slots: ctx.slot_count(),
        warmup: opts.warmup,
        warmup_min_ms: if warm { WARM_MS } else { 0.0 },
        modes,
        stages: StageMedians {
            pre_ms: stage(&|s| s.pre_ms),
            infer_ms: stage(&|s| s.infer_ms),
            post_ms: stage(&|s| s.post_ms),
        },
        host_pinned_max_difference,
        host_naive_parts: opts.host_naive.then(|| {
            let m = |f: fn(&HostParts) -> f64| median(&parts.iter().map(f).collect::<Vec<_>>());
            HostParts {
                readback_ms: m(|p| p.readback_ms),
                to_tensor_ms: m(|p| p.to_tensor_ms),
                run_ms: m(|p| p.run_ms),
                from_tensor_ms: m(|p| p.from_tensor_ms),
                upload_ms: m(|p| p.upload_ms),
            }
        }),
        pipelined,
        caller_frames,
        time_to_first_frame_ms,
        setup_ms,
        device_memory_used_mib,
        sync_timeline,
        interference,
    })
}

/// The tuning in effect as the report has always written it, every field flat and
/// present: off the CUDA backend, where no CUDA option is in effect, each reads as
/// off (the convolution search as the default, the post pass waiting on the GPU).
fn flat_tuning(t: TuningInEffect) -> Tuning {
    let off = CudaOptions::default()
        .with_conv_search(ConvSearch::default())
        .with_prefer_nhwc(false)
        .with_cuda_graph(false)
        .with_post_wait(PostWait::Gpu)
        .with_side_stream_wait(false)
        .with_cuda_passes(false);
    Tuning { gpu_timestamps: t.gpu_timestamps, spin_wait: t.spin_wait, cuda: t.cuda.unwrap_or(off) }
}

/// Tiling in a bench run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TilesReport {
    /// Tile width and height in input pixels, the halo included.
    pub(crate) tile: (u32, u32),
    /// Pixels of context on each side.
    pub(crate) overlap: u32,
    /// Tiles per frame.
    pub(crate) per_frame: usize,
}

/// A value's name as the JSON report and the CLI's flags spell it (`heuristic`, `gpu`,
/// `rotate-slots`): its serde name, never its Rust (Debug) name.
fn name(v: &impl Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

/// A time with `decimals` decimals, or `n/a` where it is not a number (not measured).
fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() { format!("{v:.decimals$}") } else { "n/a".into() }
}

/// The same with its sign.
fn signed(v: f64, decimals: usize) -> String {
    if v.is_finite() { format!("{v:+.decimals$}") } else { "n/a".into() }
}

/// The options line: the CUDA options where they are in effect, what applies on every backend.
fn render_tuning(r: &BenchReport) -> String {
    let (c, h) = (&r.tuning.cuda.provider, &r.tuning.cuda.handover);
    let cuda = if r.backend.backend == "cuda" {
        format!(
            "conv search {}, prefer NHWC {}, conv bias fused {}, CUDA graphs {}, post wait {}, side-stream wait {}, \
             passes on {}",
            name(&c.conv_search),
            c.prefer_nhwc,
            c.fuse_conv_bias,
            c.cuda_graph,
            name(&h.post_wait),
            h.side_stream_wait,
            if h.cuda_passes { "CUDA" } else { "Vulkan" },
        )
    } else {
        format!("CUDA options: not in effect on the {} backend (passes on Vulkan)", r.backend.backend.to_uppercase())
    };
    format!(
        "{cuda}; GPU timestamps {}, spin wait {} (options from {}); {} slots, {} warm-up frames then {:.0} ms a mode, \
         {} timed frames per mode",
        r.tuning.gpu_timestamps,
        r.tuning.spin_wait,
        r.backend.tuning_from,
        r.slots,
        r.warmup,
        r.warmup_min_ms,
        r.modes.first().map_or(0, |m| m.frames)
    )
}

/// The report as a table. Times that were not measured (NaN in the report, null in its
/// JSON) read `n/a`, or are left out with the reason.
pub(crate) fn render(r: &BenchReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let on_cuda = r.backend.backend == "cuda";
    let _ = writeln!(
        s,
        "{} ({}) {}×{} → {}×{} on {} backend; {}",
        r.model,
        r.tensor,
        r.input_size.0,
        r.input_size.1,
        r.output_size.0,
        r.output_size.1,
        r.backend.backend,
        r.backend.cuda_device.as_deref().unwrap_or(&r.backend.vulkan_device.name)
    );
    if let Some(t) = &r.tiles {
        let _ = writeln!(
            s,
            "tiles: {} a frame, {}×{} with an overlap of {} (ort-alone runs the model on each tile)",
            t.per_frame, t.tile.0, t.tile.1, t.overlap
        );
    }
    let p = &r.precision;
    let _ = writeln!(
        s,
        "precision: {} model, running {} ({}){}",
        p.model,
        p.running,
        p.reason,
        if p.rewrites.is_empty() { String::new() } else { format!("; graph rewrites: {}", p.rewrites.join("; ")) }
    );
    let _ = writeln!(s, "{}", render_tuning(r));
    let _ = writeln!(
        s,
        "{:<21} {:>10} {:>10} {:>10} {:>14} {:>13} {:>12}",
        "mode", "median ms", "p99 ms", "frames/s", "vs ort-alone", "throughput", "vs pinned"
    );
    for m in &r.modes {
        let _ = writeln!(
            s,
            "{:<21} {:>10} {:>10} {:>10} {:>11} ms {:>13} {:>12}",
            m.mode,
            num(m.median_ms, 3),
            num(m.p99_ms, 3),
            num(m.fps, 1),
            signed(m.overhead_vs_ort_ms, 3),
            if m.throughput_vs_ort.is_finite() { format!("{:.1}%", 100.0 * m.throughput_vs_ort) } else { "n/a".into() },
            if m.speedup_vs_host_pinned.is_finite() {
                format!("{:.2}×", m.speedup_vs_host_pinned)
            } else {
                "—".into()
            }
        );
    }
    let passes = if r.tuning.gpu_timestamps { "" } else { " (pre and post: no GPU timestamps asked for)" };
    let _ = writeln!(
        s,
        "GPU stages (zero-copy sync, medians): pre {} ms, model {} ms, post {} ms{passes}",
        num(r.stages.pre_ms, 3),
        num(r.stages.infer_ms, 3),
        num(r.stages.post_ms, 3)
    );
    let per_mp: Vec<String> =
        r.modes.iter().map(|m| format!("{} {}", m.mode, num(m.ms_per_output_megapixel, 3))).collect();
    let _ = writeln!(s, "per output megapixel (ms/MP, medians): {}", per_mp.join(", "));
    let _ = writeln!(
        s,
        "host pinned: the same image as zero-copy sync (largest difference {} of 255)",
        r.host_pinned_max_difference
    );
    if let Some(p) = &r.host_naive_parts {
        let _ = writeln!(
            s,
            "host naive parts (medians): readback {}, to tensor {}, ORT {}, from tensor {}, upload {} ms",
            num(p.readback_ms, 3),
            num(p.to_tensor_ms, 3),
            num(p.run_ms, 3),
            num(p.from_tensor_ms, 3),
            num(p.upload_ms, 3)
        );
    }
    let d = &r.pipelined;
    let idle = if d.gpu_gap_median_ms.is_finite() {
        format!(
            "CUDA stream idle between frames median {} / mean {} / p99 {} ms",
            num(d.gpu_gap_median_ms, 3),
            num(d.gpu_gap_mean_ms, 3),
            num(d.gpu_gap_p99_ms, 3)
        )
    } else if on_cuda {
        "CUDA stream idle between frames: not measured".to_string()
    } else {
        format!("CUDA stream idle: none on the {} backend", r.backend.backend.to_uppercase())
    };
    let _ = writeln!(
        s,
        "pipelined: {idle}; submit hand-off median {} / p99 {} ms; model {} ms",
        num(d.enqueue_median_ms, 3),
        num(d.enqueue_p99_ms, 3),
        num(d.model_median_ms, 3)
    );
    let by_slot: Vec<String> = d.model_median_by_slot_ms.iter().map(|m| num(*m, 3)).collect();
    let _ = writeln!(s, "pipelined: model by slot (medians) {} ms", by_slot.join(" / "));
    match &r.caller_frames {
        CallerFramesReport::Ran {
            sync_mode,
            renderer_device,
            images,
            cuda_passes,
            model_median_ms,
            gpu_gap_median_ms,
            max_difference,
            renderer_work,
            renderer_queue,
            transfer_queue_asked,
            ..
        } => {
            let idle = if gpu_gap_median_ms.is_finite() {
                format!(", CUDA stream idle between frames {} ms", num(*gpu_gap_median_ms, 3))
            } else {
                String::new()
            };
            let fallback = if *transfer_queue_asked && *renderer_queue != "transfer" {
                " (no transfer-only queue family here)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "caller frames: {images} images of a renderer's own device ({renderer_device}) imported by fd, {} sync, \
                 the renderer's work per frame: {renderer_work} on its {renderer_queue} queue{fallback}, passes on {}; model {} ms{idle} (medians); the same image as zero-copy sync \
                 (largest difference {max_difference} of 255)",
                if *sync_mode == neural_frame::SyncMode::Gpu { "GPU" } else { "host-signalled" },
                if *cuda_passes { "CUDA" } else { "Vulkan" },
                num(*model_median_ms, 3),
            );
        }
        CallerFramesReport::Skipped { reason } => {
            let _ = writeln!(s, "caller frames: skipped: {reason}");
        }
    }
    let t = &r.backend.startup;
    // The set-up's steps that ran (NaN: it did not).
    let steps: Vec<String> = [
        ("ONNX Runtime", t.runtime_ms),
        ("Vulkan", t.vulkan_ms),
        ("CUDA", t.cuda_ms),
        ("session", t.session_ms),
        ("buffers", t.buffers_ms),
        ("the model's first run", t.first_run_ms),
    ]
    .iter()
    .filter(|(_, ms)| ms.is_finite())
    .map(|(step, ms)| format!("{step} {ms:.0}"))
    .collect();
    let _ = writeln!(
        s,
        "time to first frame {} ms (set-up {} ms: {}){}; device memory in use {}",
        num(r.time_to_first_frame_ms, 1),
        num(r.setup_ms, 1),
        steps.join(", "),
        if !t.fused_ms.is_finite() {
            String::new()
        } else {
            format!("; fast start: the fused session took over {:.0} ms after set-up", t.fused_ms)
        },
        r.device_memory_used_mib.map_or("n/a (CPU backend)".to_string(), |m| format!("{m:.0} MiB (whole GPU)"))
    );
    if let Some(t) = &r.sync_timeline {
        let _ = writeln!(
            s,
            "sync frame, host-polled (medians, ms after submit): submit returned {}, input_ready {}, model start {}, model end {}, output_ready {}, frame_done {}",
            num(t.submitted_ms, 3),
            num(t.input_ready_ms, 3),
            num(t.model_start_ms, 3),
            num(t.model_end_ms, 3),
            num(t.output_ready_ms, 3),
            num(t.frame_done_ms, 3)
        );
        let _ = writeln!(
            s,
            "  → pre pass and hand-off to CUDA {}, model {}, hand-off back, post pass and host wake-up {} ms",
            num(t.model_start_ms, 3),
            num(t.model_end_ms - t.model_start_ms, 3),
            num(t.frame_done_ms - t.model_end_ms, 3)
        );
    }
    if let Some(i) = &r.interference {
        let _ = writeln!(s, "model on the GPU beside other work ({} runs back to back, CUDA events, medians):", i.runs);
        let idle = i.cases.first().map_or(f64::NAN, |c| c.model_ms);
        for c in &i.cases {
            let _ =
                writeln!(s, "  {:<18} {:>8} ms ({})", name(&c.load), num(c.model_ms, 3), signed(c.model_ms - idle, 3));
        }
    }
    s
}

/// One GPU's share of a multi-GPU run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GpuShare {
    /// Backend and the devices paired for this context.
    pub(crate) backend: BackendReport,
    /// Frames this context ran.
    pub(crate) frames: usize,
    /// Its throughput over the common timed window.
    pub(crate) fps: f64,
    /// Its median interval between retirements (ms).
    pub(crate) median_ms: f64,
}

/// One context per device, frames distributed round-robin, all at once.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MultiReport {
    /// This process's arguments, as given.
    pub(crate) argv: Vec<String>,
    /// Model file.
    pub(crate) model: String,
    /// Input size.
    pub(crate) input_size: (u32, u32),
    /// Per device.
    pub(crate) devices: Vec<GpuShare>,
    /// All frames over the wall time of the whole run.
    pub(crate) total_fps: f64,
    /// Timed frames in all.
    pub(crate) frames: usize,
}

/// Runs `frames` frames through one ring per device at the same time, frame k
/// on device k mod n, and reports per-device and total throughput.
pub(crate) fn run_multi(opts: &BenchOptions, devices: &[DeviceSelector]) -> Result<MultiReport> {
    let (w, h) = opts.size;
    let picture = opts.picture.resized(w, h)?;
    let n = devices.len().max(1);
    let frames = opts.frames.max(n);
    let ready = Arc::new(std::sync::Barrier::new(n + 1));
    let go = Arc::new(std::sync::Barrier::new(n + 1));
    let handles: Vec<_> = devices
        .iter()
        .enumerate()
        .map(|(k, device)| {
            let opts = opts.clone();
            let device = *device;
            let picture = picture.clone();
            let (ready, go) = (Arc::clone(&ready), Arc::clone(&go));
            let share = (k..frames).step_by(n).count();
            std::thread::spawn(move || -> Result<(BackendReport, usize, f64, Vec<f64>)> {
                // Built on its own thread: each GPU's context lives and dies there.
                let prepared = (|| -> Result<_> {
                    let mut ctx = context(&opts, Some(device))?;
                    let lanes = ctx.slot_count() + 1;
                    let (inputs, outputs) = images(&mut ctx, &picture, lanes)?;
                    for i in 0..opts.warmup.max(1) {
                        ctx.infer(inputs[i % inputs.len()], outputs[0])?;
                    }
                    Ok((ctx, inputs, outputs))
                })();
                ready.wait();
                go.wait();
                let (mut ctx, inputs, outputs) = prepared?;
                let t = Instant::now();
                let mut pending: std::collections::VecDeque<Ticket> = Default::default();
                let mut intervals = Vec::new();
                let mut last = Instant::now();
                for i in 0..share {
                    if pending.len() == ctx.slot_count()
                        && let Some(ticket) = pending.pop_front()
                    {
                        ctx.wait(&ticket)?;
                        intervals.push(ms_since(last));
                        last = Instant::now();
                    }
                    if let Submitted::Frame(ticket) =
                        ctx.submit(Frame::new(inputs[i % inputs.len()], outputs[i % outputs.len()]))?
                    {
                        pending.push_back(ticket);
                    }
                }
                for ticket in pending {
                    ctx.wait(&ticket)?;
                    intervals.push(ms_since(last));
                    last = Instant::now();
                }
                Ok((ctx.report().clone(), share, ms_since(t), intervals))
            })
        })
        .collect();
    ready.wait();
    let t = Instant::now();
    go.wait();
    let mut shares = Vec::new();
    for h in handles {
        let (backend, count, ms, intervals) =
            h.join().map_err(|_| anyhow::anyhow!("a benchmark thread panicked"))??;
        let dist: Vec<f64> = intervals.iter().skip(1).copied().collect();
        shares.push(GpuShare { backend, frames: count, fps: count as f64 / (ms / 1e3), median_ms: median(&dist) });
    }
    let wall = ms_since(t);
    Ok(MultiReport {
        argv: argv(),
        model: opts.model.model.display().to_string(),
        input_size: (w, h),
        total_fps: frames as f64 / (wall / 1e3),
        frames,
        devices: shares,
    })
}

/// The multi-device report as text.
pub(crate) fn render_multi(r: &MultiReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} {}×{}: {} frames over {} device(s), round-robin",
        r.model,
        r.input_size.0,
        r.input_size.1,
        r.frames,
        r.devices.len()
    );
    for d in &r.devices {
        let _ = writeln!(
            s,
            "  Vulkan {} ↔ {}: {} frames, {} frames/s, median {} ms",
            d.backend.vulkan_device,
            d.backend.cuda_device.as_deref().unwrap_or("CPU backend"),
            d.frames,
            num(d.fps, 1),
            num(d.median_ms, 3)
        );
    }
    let _ = writeln!(s, "total: {} frames/s", num(r.total_fps, 1));
    s
}
