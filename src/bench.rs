//! `neural-frame bench`: the pipeline against its floor and against the host
//! round trip, on one model, size and device.
//!
//! Modes, one run, side by side:
//! - `ort-alone`: ONNX Runtime on input and output already bound in device
//!   memory (slot 0's buffers), waited for each frame — the floor;
//! - `zero-copy sync`: image → pre pass → model → post pass → image, one frame at a time;
//! - `zero-copy pipelined`: the same through the ring, several frames in flight;
//! - `host round trip`: what a user without interop does — read the frame back
//!   to the host, build the tensor there, run ONNX Runtime with host tensors,
//!   convert the result and upload it into the output image.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use half::f16;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::image_io::Rgba8;
use crate::onnx::TensorKind;
use crate::pipeline::{
    BackPressure, Backend, BackendReport, FrameStats, FrameTrace, Interference, NeuralFrameContext, Submitted, Ticket,
    Tuning,
};
use crate::vulkan::{DeviceSelector, Image, transfer};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The model.
    pub model: PathBuf,
    /// Backend.
    pub backend: Backend,
    /// Vulkan device.
    pub device: DeviceSelector,
    /// Input frame size.
    pub size: (u32, u32),
    /// Timed frames per mode.
    pub frames: usize,
    /// Untimed frames first.
    pub warmup: usize,
    /// Slots in the ring.
    pub slots: usize,
    /// cuDNN search, NHWC, CUDA graphs, where the post pass waits, timestamps, spin waits.
    pub tuning: Tuning,
    /// ONNX Runtime library.
    pub ort_library: Option<PathBuf>,
    /// The picture the frames are made from (varied per frame).
    pub picture: Rgba8,
    /// Include the host round trip (slow: it dominates the benchmark's own run time).
    pub host_round_trip: bool,
    /// Also trace synchronous frames and measure the model under Vulkan load (CUDA backend).
    pub diagnose: bool,
}

/// One mode's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct ModeResult {
    /// Mode name.
    pub mode: &'static str,
    /// Median time per frame (ms): latency for one-at-a-time modes, interval between retirements when pipelined.
    pub median_ms: f64,
    /// 99th percentile of the same.
    pub p99_ms: f64,
    /// Frames per second over the whole timed run.
    pub fps: f64,
    /// Median minus ort-alone's median (ms).
    pub overhead_vs_ort_ms: f64,
    /// Throughput relative to ort-alone's.
    pub throughput_vs_ort: f64,
    /// Host round trip's median over this mode's median.
    pub speedup_vs_host: f64,
    /// Timed frames.
    pub frames: usize,
}

/// Medians of the per-stage GPU times of the zero-copy sync mode (ms).
#[derive(Debug, Clone, Serialize)]
pub struct StageMedians {
    /// Pre pass (Vulkan timestamps).
    pub pre_ms: f64,
    /// Model (CUDA events; host clock on the CPU backend).
    pub infer_ms: f64,
    /// Post pass (Vulkan timestamps).
    pub post_ms: f64,
}

/// Where the pipelined mode's time goes (ms).
#[derive(Debug, Clone, Serialize)]
pub struct PipelineDiagnostics {
    /// CUDA stream idle between one frame's model end and the next one's start: median.
    pub gpu_gap_median_ms: f64,
    /// The same, 99th percentile.
    pub gpu_gap_p99_ms: f64,
    /// The same, mean.
    pub gpu_gap_mean_ms: f64,
    /// Host time of `submit`'s hand-off to CUDA and ONNX Runtime: median.
    pub enqueue_median_ms: f64,
    /// The same, 99th percentile.
    pub enqueue_p99_ms: f64,
    /// Model time on the GPU (CUDA events): median.
    pub model_median_ms: f64,
    /// The same, per ring slot.
    pub model_median_by_slot_ms: Vec<f64>,
    /// Every timed frame's times, in order.
    pub frames: Vec<FrameStats>,
}

/// Medians of the host round trip's parts (ms).
#[derive(Debug, Clone, Serialize)]
pub struct HostParts {
    /// Image → host (copy to a staging buffer, wait, copy out).
    pub readback_ms: f64,
    /// RGBA8 → tensor on the CPU.
    pub to_tensor_ms: f64,
    /// ONNX Runtime with host tensors (copies in and out included).
    pub run_ms: f64,
    /// Tensor → RGBA8 on the CPU.
    pub from_tensor_ms: f64,
    /// Host → output image.
    pub upload_ms: f64,
}

/// The whole benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Model file.
    pub model: String,
    /// Input size.
    pub input_size: (u32, u32),
    /// Output size.
    pub output_size: (u32, u32),
    /// Model input kind.
    pub tensor: String,
    /// Backend and devices.
    pub backend: BackendReport,
    /// The tuning in effect.
    #[serde(flatten)]
    pub tuning: Tuning,
    /// Ring slots.
    pub slots: usize,
    /// Warm-up frames.
    pub warmup: usize,
    /// Results per mode.
    pub modes: Vec<ModeResult>,
    /// GPU stage times (zero-copy sync).
    pub stages: StageMedians,
    /// Host round trip's parts (absent when not run).
    pub host_parts: Option<HostParts>,
    /// Where the pipelined mode's time goes.
    pub pipelined: PipelineDiagnostics,
    /// From starting to build the context to the first frame retired (ms).
    pub time_to_first_frame_ms: f64,
    /// Context set-up alone (ms).
    pub setup_ms: f64,
    /// Device memory in use on the whole GPU after warm-up (MiB; CUDA backend).
    pub device_memory_used_mib: Option<f64>,
    /// `--diagnose`: medians of host-polled timelines of synchronous frames.
    pub sync_timeline: Option<FrameTrace>,
    /// `--diagnose`: the model's GPU time while Vulkan is idle, waiting or busy.
    pub interference: Option<Interference>,
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
fn context(opts: &BenchOptions) -> Result<NeuralFrameContext> {
    let mut b = NeuralFrameContext::builder(&opts.model)
        .backend(opts.backend)
        .device(opts.device)
        .frame_size(opts.size.0, opts.size.1)
        .slots(opts.slots)
        .back_pressure(BackPressure::Block)
        .tuning(opts.tuning);
    if let Some(p) = &opts.ort_library {
        b = b.ort_library(p);
    }
    b.build()
}

/// Runs every mode and reports. `progress(mode, done, total)` is called as frames complete.
pub fn run(opts: &BenchOptions, mut progress: impl FnMut(&str, usize, usize)) -> Result<BenchReport> {
    let (w, h) = opts.size;
    let picture = opts.picture.resized(w, h)?;
    let frames = opts.frames.max(1);
    let t0 = Instant::now();
    let mut ctx = context(opts)?;
    let setup_ms = ms_since(t0);
    let lanes = ctx.slot_count() + 1;
    let inputs: Vec<Arc<Image>> = (0..variants(&picture).len())
        .map(|_| ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).map(Arc::new))
        .collect::<Result<_>>()?;
    for (image, pixels) in inputs.iter().zip(variants(&picture)) {
        transfer::upload_image(image, &pixels)?;
    }
    let outputs: Vec<Arc<Image>> =
        (0..lanes).map(|_| ctx.create_output_image().map(Arc::new)).collect::<Result<_>>()?;
    // Time to first frame counts from the start of set-up; the first frame's
    // upload is not part of it (a renderer's frame is already on the GPU).
    let t_first = Instant::now();
    ctx.infer(&inputs[0], &outputs[0])?;
    let time_to_first_frame_ms = setup_ms + ms_since(t_first);
    for i in 0..opts.warmup {
        ctx.infer(&inputs[i % inputs.len()], &outputs[0])?;
        progress("warm-up", i + 1, opts.warmup);
    }
    let device_memory_used_mib = match ctx.cuda_device() {
        Some(c) => {
            let (free, total) = c.memory_info()?;
            Some((total - free) as f64 / (1024.0 * 1024.0))
        }
        None => None,
    };

    // ort-alone: the floor.
    let mut alone = Vec::with_capacity(frames);
    let t = Instant::now();
    for i in 0..frames {
        alone.push(ctx.run_model_only()?);
        progress("ort-alone", i + 1, frames);
    }
    let alone_total = ms_since(t);

    // zero-copy sync.
    let mut sync = Vec::with_capacity(frames);
    let mut stages: Vec<FrameStats> = Vec::with_capacity(frames);
    let t = Instant::now();
    for i in 0..frames {
        let ft = Instant::now();
        let s = ctx.infer(&inputs[i % inputs.len()], &outputs[0])?;
        sync.push(ms_since(ft));
        stages.push(s);
        progress("zero-copy sync", i + 1, frames);
    }
    let sync_total = ms_since(t);

    // zero-copy pipelined: keep the ring full, retire the oldest.
    let mut intervals = Vec::with_capacity(frames);
    let mut pending: std::collections::VecDeque<Ticket> = Default::default();
    let t = Instant::now();
    let mut last = Instant::now();
    let mut retired = 0;
    let mut pipe_stats: Vec<FrameStats> = Vec::with_capacity(frames);
    for i in 0..frames {
        if pending.len() == ctx.slot_count() {
            let ticket = pending.pop_front().ok_or_else(|| Error::InvalidArgument("ring bookkeeping".into()))?;
            pipe_stats.push(ctx.wait(ticket)?);
            intervals.push(ms_since(last));
            last = Instant::now();
            retired += 1;
            progress("zero-copy pipelined", retired, frames);
        }
        match ctx.submit(&inputs[i % inputs.len()], &outputs[i % lanes])? {
            Submitted::Frame(ticket) => pending.push_back(ticket),
            Submitted::Skipped => return Err(Error::InvalidArgument("a blocking ring skipped a frame".into())),
        }
    }
    while let Some(ticket) = pending.pop_front() {
        pipe_stats.push(ctx.wait(ticket)?);
        intervals.push(ms_since(last));
        last = Instant::now();
        retired += 1;
        progress("zero-copy pipelined", retired, frames);
    }
    let pipe_total = ms_since(t);
    // The first interval includes filling the ring; leave it out of the distribution.
    let pipe_dist: Vec<f64> = intervals.iter().skip(1).copied().collect();

    // host round trip.
    let contract = ctx.contract().clone();
    let (ow, oh) = ctx.output_size();
    let mut host = Vec::with_capacity(frames);
    let mut parts: [Vec<f64>; 5] = Default::default();
    let t = Instant::now();
    let host_frames = if opts.host_round_trip { frames } else { 0 };
    for i in 0..host_frames {
        let ft = Instant::now();
        let input = &inputs[i % inputs.len()];
        let s = Instant::now();
        let pixels = transfer::readback_image(input)?;
        parts[0].push(ms_since(s));
        let s = Instant::now();
        let tensor = host_tensor(contract.input, &pixels, w, h);
        parts[1].push(ms_since(s));
        let s = Instant::now();
        let out = run_host(ctx.session_mut(), &contract.input_name, contract.input, tensor, w, h)?;
        parts[2].push(ms_since(s));
        let s = Instant::now();
        let rgba = host_image(contract.output, &out, &pixels, w, h, contract.scale);
        parts[3].push(ms_since(s));
        let s = Instant::now();
        transfer::upload_image(&outputs[0], &rgba)?;
        parts[4].push(ms_since(s));
        host.push(ms_since(ft));
        progress("host round trip", i + 1, frames);
    }
    let host_total = ms_since(t);

    if opts.diagnose && ctx.cuda_device().is_none() {
        eprintln!("neural-frame: --diagnose measures the Vulkan/CUDA hand-off; skipped on the CPU backend");
    }
    let (sync_timeline, interference) = if opts.diagnose && ctx.cuda_device().is_some() {
        let mut traces = Vec::with_capacity(frames);
        for i in 0..frames {
            traces.push(ctx.trace_frame(&inputs[i % inputs.len()], &outputs[0])?.1);
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
        progress("interference", 0, 1);
        let interference = ctx.interference(&inputs[0], &outputs[0], frames.min(100))?;
        progress("interference", 1, 1);
        (Some(timeline), Some(interference))
    } else {
        (None, None)
    };

    let floor = median(&alone);
    let floor_fps = frames as f64 / (alone_total / 1e3);
    let host_median = median(&host);
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
            speedup_vs_host: host_median / med,
            frames,
        }
    };
    let mut modes = vec![
        mode("ort-alone", &alone, alone_total),
        mode("zero-copy sync", &sync, sync_total),
        mode("zero-copy pipelined", &pipe_dist, pipe_total),
    ];
    if opts.host_round_trip {
        modes.push(mode("host round trip", &host, host_total));
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
        model: opts.model.display().to_string(),
        input_size: (w, h),
        output_size: (ow, oh),
        tensor: contract.input.describe().to_string(),
        backend: ctx.report().clone(),
        tuning: ctx.tuning(),
        slots: ctx.slot_count(),
        warmup: opts.warmup,
        modes,
        stages: StageMedians {
            pre_ms: stage(&|s| s.pre_ms),
            infer_ms: stage(&|s| s.infer_ms),
            post_ms: stage(&|s| s.post_ms),
        },
        host_parts: opts.host_round_trip.then(|| HostParts {
            readback_ms: median(&parts[0]),
            to_tensor_ms: median(&parts[1]),
            run_ms: median(&parts[2]),
            from_tensor_ms: median(&parts[3]),
            upload_ms: median(&parts[4]),
        }),
        pipelined,
        time_to_first_frame_ms,
        setup_ms,
        device_memory_used_mib,
        sync_timeline,
        interference,
    })
}

/// A host tensor, as a user without interop builds it.
enum HostTensor {
    F32(Vec<f32>),
    F16(Vec<f16>),
    U8(Vec<u8>),
}

fn host_tensor(kind: TensorKind, rgba: &[u8], w: u32, h: u32) -> HostTensor {
    let plane = (w * h) as usize;
    match kind {
        TensorKind::NhwcU8 => HostTensor::U8(rgba.to_vec()),
        TensorKind::NchwF32 | TensorKind::NchwF16 => {
            let mut v = vec![0f32; 3 * plane];
            for (i, px) in rgba.chunks_exact(4).enumerate() {
                v[i] = px[0] as f32 / 255.0;
                v[plane + i] = px[1] as f32 / 255.0;
                v[2 * plane + i] = px[2] as f32 / 255.0;
            }
            if kind == TensorKind::NchwF32 {
                HostTensor::F32(v)
            } else {
                HostTensor::F16(v.into_iter().map(f16::from_f32).collect())
            }
        }
    }
}

fn run_host(
    session: &mut ort::session::Session,
    name: &str,
    kind: TensorKind,
    tensor: HostTensor,
    w: u32,
    h: u32,
) -> Result<Vec<f32>> {
    let shape = kind.shape(w, h).map(|d| d as usize);
    let err = |e: ort::Error| Error::onnx("host round trip", e);
    let outputs = match tensor {
        HostTensor::F32(v) => {
            session.run(ort::inputs![name => ort::value::Tensor::from_array((shape, v)).map_err(err)?]).map_err(err)?
        }
        HostTensor::F16(v) => {
            session.run(ort::inputs![name => ort::value::Tensor::from_array((shape, v)).map_err(err)?]).map_err(err)?
        }
        HostTensor::U8(v) => {
            session.run(ort::inputs![name => ort::value::Tensor::from_array((shape, v)).map_err(err)?]).map_err(err)?
        }
    };
    let value = &outputs[0];
    let out = if let Ok((_, d)) = value.try_extract_tensor::<f32>() {
        d.to_vec()
    } else if let Ok((_, d)) = value.try_extract_tensor::<f16>() {
        d.iter().map(|x| x.to_f32()).collect()
    } else {
        let (_, d) = value.try_extract_tensor::<u8>().map_err(err)?;
        d.iter().map(|x| *x as f32).collect()
    };
    Ok(out)
}

fn host_image(kind: TensorKind, v: &[f32], input: &[u8], w: u32, h: u32, s: u32) -> Vec<u8> {
    let (ow, oh) = ((w * s) as usize, (h * s) as usize);
    let plane = ow * oh;
    let mut out = vec![0u8; plane * 4];
    let q = |x: f32| (x.clamp(0.0, 1.0) * 255.0).round() as u8;
    for y in 0..oh {
        for x in 0..ow {
            let i = y * ow + x;
            let px = match kind {
                TensorKind::NhwcU8 => [v[4 * i] as u8, v[4 * i + 1] as u8, v[4 * i + 2] as u8, v[4 * i + 3] as u8],
                _ => {
                    let src = (y / s as usize) * w as usize + x / s as usize;
                    [q(v[i]), q(v[plane + i]), q(v[2 * plane + i]), input[4 * src + 3]]
                }
            };
            out[4 * i..4 * i + 4].copy_from_slice(&px);
        }
    }
    out
}

/// The report as a table.
pub fn render(r: &BenchReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
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
    let _ = writeln!(
        s,
        "conv search {:?}, prefer NHWC {}, CUDA graphs {}, post pass waits on the {:?}, GPU timestamps {}, spin wait {}, {} slots, {} warm-up frames, {} timed frames per mode",
        r.tuning.conv_search,
        r.tuning.prefer_nhwc,
        r.tuning.cuda_graph,
        r.tuning.post_wait,
        r.tuning.gpu_timestamps,
        r.tuning.spin_wait,
        r.slots,
        r.warmup,
        r.modes[0].frames
    );
    let _ = writeln!(
        s,
        "{:<21} {:>10} {:>10} {:>10} {:>14} {:>13} {:>12}",
        "mode", "median ms", "p99 ms", "frames/s", "vs ort-alone", "throughput", "vs host"
    );
    for m in &r.modes {
        let _ = writeln!(
            s,
            "{:<21} {:>10.3} {:>10.3} {:>10.1} {:>+11.3} ms {:>12.1}% {:>12}",
            m.mode,
            m.median_ms,
            m.p99_ms,
            m.fps,
            m.overhead_vs_ort_ms,
            100.0 * m.throughput_vs_ort,
            if m.speedup_vs_host.is_finite() { format!("{:.1}×", m.speedup_vs_host) } else { "—".into() }
        );
    }
    let _ = writeln!(
        s,
        "GPU stages (zero-copy sync, medians): pre {:.3} ms, model {:.3} ms, post {:.3} ms",
        r.stages.pre_ms, r.stages.infer_ms, r.stages.post_ms
    );
    if let Some(p) = &r.host_parts {
        let _ = writeln!(
            s,
            "host round trip parts (medians): readback {:.3}, to tensor {:.3}, ORT {:.3}, from tensor {:.3}, upload {:.3} ms",
            p.readback_ms, p.to_tensor_ms, p.run_ms, p.from_tensor_ms, p.upload_ms
        );
    }
    let d = &r.pipelined;
    let _ = writeln!(
        s,
        "pipelined: CUDA stream idle between frames median {:.3} / mean {:.3} / p99 {:.3} ms; submit hand-off median {:.3} / p99 {:.3} ms; model {:.3} ms",
        d.gpu_gap_median_ms,
        d.gpu_gap_mean_ms,
        d.gpu_gap_p99_ms,
        d.enqueue_median_ms,
        d.enqueue_p99_ms,
        d.model_median_ms
    );
    let by_slot: Vec<String> = d.model_median_by_slot_ms.iter().map(|m| format!("{m:.3}")).collect();
    let _ = writeln!(s, "pipelined: model by slot (medians) {} ms", by_slot.join(" / "));
    let _ = writeln!(
        s,
        "time to first frame {:.1} ms (set-up {:.1} ms); device memory in use {}",
        r.time_to_first_frame_ms,
        r.setup_ms,
        r.device_memory_used_mib.map_or("n/a (CPU backend)".to_string(), |m| format!("{m:.0} MiB (whole GPU)"))
    );
    if let Some(t) = &r.sync_timeline {
        let _ = writeln!(
            s,
            "sync frame, host-polled (medians, ms after submit): submit returned {:.3}, input_ready {:.3}, model start {:.3}, model end {:.3}, output_ready {:.3}, frame_done {:.3}",
            t.submitted_ms, t.input_ready_ms, t.model_start_ms, t.model_end_ms, t.output_ready_ms, t.frame_done_ms
        );
        let _ = writeln!(
            s,
            "  → pre pass and hand-off to CUDA {:.3}, model {:.3}, hand-off back, post pass and host wake-up {:.3} ms",
            t.model_start_ms,
            t.model_end_ms - t.model_start_ms,
            t.frame_done_ms - t.model_end_ms
        );
    }
    if let Some(i) = &r.interference {
        let _ = writeln!(s, "model on the GPU beside other work ({} runs back to back, CUDA events, medians):", i.runs);
        let idle = i.cases.first().map_or(f64::NAN, |c| c.model_ms);
        for c in &i.cases {
            let _ = writeln!(s, "  {:<18} {:>8.3} ms ({:+.3})", format!("{:?}", c.load), c.model_ms, c.model_ms - idle);
        }
    }
    s
}

/// One GPU's share of a multi-GPU run.
#[derive(Debug, Clone, Serialize)]
pub struct GpuShare {
    /// Backend and the devices paired for this context.
    pub backend: BackendReport,
    /// Frames this context ran.
    pub frames: usize,
    /// Its throughput over the common timed window.
    pub fps: f64,
    /// Its median interval between retirements (ms).
    pub median_ms: f64,
}

/// One context per device, frames distributed round-robin, all at once.
#[derive(Debug, Clone, Serialize)]
pub struct MultiReport {
    /// Model file.
    pub model: String,
    /// Input size.
    pub input_size: (u32, u32),
    /// Per device.
    pub devices: Vec<GpuShare>,
    /// All frames over the wall time of the whole run.
    pub total_fps: f64,
    /// Timed frames in all.
    pub frames: usize,
}

/// The Vulkan devices `--devices all` means: every suitable one (on the CUDA
/// backend, every one with a CUDA device of the same UUID).
pub fn all_devices(backend: Backend) -> Result<Vec<DeviceSelector>> {
    let instance = crate::vulkan::Instance::new(&crate::vulkan::InstanceOptions::default())?;
    let list = crate::vulkan::adapter::enumerate(&instance)?;
    let cuda_uuids: Vec<[u8; 16]> = match backend {
        Backend::Cpu => Vec::new(),
        _ => crate::cuda::devices().map(|d| d.into_iter().map(|d| d.uuid).collect()).unwrap_or_default(),
    };
    let chosen: Vec<_> = list
        .iter()
        .filter(|(_, info)| info.unsuitable.is_none())
        .filter(|(_, info)| backend == Backend::Cpu || cuda_uuids.is_empty() || cuda_uuids.contains(&info.uuid_bytes))
        .map(|(_, info)| DeviceSelector::Uuid(info.uuid_bytes))
        .collect();
    if chosen.is_empty() {
        return Err(Error::NoSuchDevice {
            wanted: "a suitable device".into(),
            seen: list.iter().map(|(_, i)| i.to_string()).collect::<Vec<_>>().join(", "),
        });
    }
    Ok(chosen)
}

/// Runs `frames` frames through one ring per device at the same time, frame k
/// on device k mod n, and reports per-device and total throughput.
pub fn run_multi(opts: &BenchOptions, devices: &[DeviceSelector]) -> Result<MultiReport> {
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
            let opts = BenchOptions { device: *device, ..opts.clone() };
            let picture = picture.clone();
            let (ready, go) = (Arc::clone(&ready), Arc::clone(&go));
            let share = (k..frames).step_by(n).count();
            std::thread::spawn(move || -> Result<(BackendReport, usize, f64, Vec<f64>)> {
                // Built on its own thread: each GPU's context lives and dies there.
                let prepared = (|| -> Result<_> {
                    let mut ctx = context(&opts)?;
                    let pixels = variants(&picture);
                    let inputs: Vec<Arc<Image>> = pixels
                        .iter()
                        .map(|p| {
                            let i = Arc::new(ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?);
                            transfer::upload_image(&i, p)?;
                            Ok(i)
                        })
                        .collect::<Result<_>>()?;
                    let outputs: Vec<Arc<Image>> = (0..ctx.slot_count() + 1)
                        .map(|_| ctx.create_output_image().map(Arc::new))
                        .collect::<Result<_>>()?;
                    for i in 0..opts.warmup.max(1) {
                        ctx.infer(&inputs[i % inputs.len()], &outputs[0])?;
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
                        ctx.wait(ticket)?;
                        intervals.push(ms_since(last));
                        last = Instant::now();
                    }
                    if let Submitted::Frame(ticket) =
                        ctx.submit(&inputs[i % inputs.len()], &outputs[i % outputs.len()])?
                    {
                        pending.push_back(ticket);
                    }
                }
                for ticket in pending {
                    ctx.wait(ticket)?;
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
            h.join().map_err(|_| Error::InvalidArgument("a benchmark thread panicked".into()))??;
        let dist: Vec<f64> = intervals.iter().skip(1).copied().collect();
        shares.push(GpuShare { backend, frames: count, fps: count as f64 / (ms / 1e3), median_ms: median(&dist) });
    }
    let wall = ms_since(t);
    Ok(MultiReport {
        model: opts.model.display().to_string(),
        input_size: (w, h),
        total_fps: frames as f64 / (wall / 1e3),
        frames,
        devices: shares,
    })
}

/// The multi-device report as text.
pub fn render_multi(r: &MultiReport) -> String {
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
            "  Vulkan {} ↔ {}: {} frames, {:.1} frames/s, median {:.3} ms",
            d.backend.vulkan_device,
            d.backend.cuda_device.as_deref().unwrap_or("CPU backend"),
            d.frames,
            d.fps,
            d.median_ms
        );
    }
    let _ = writeln!(s, "total: {:.1} frames/s", r.total_fps);
    s
}
