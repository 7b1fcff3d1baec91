//! `neural-frame bench --serve`: the same frames in this process and through a
//! `neural-frame serve` worker, from a renderer's device of this process's own
//! (examples/support's), on the same kind of slots: device-local buffers the
//! renderer exported, imported by file descriptor.
//!
//! - in-process: a context of this process imports the slots and the renderer's
//!   "rendered" timeline, and the renderer waits on the context's exported
//!   "output ready" timeline (GPU mode) or on `wait` (host mode);
//! - served: the client crate hands the same kind of slots to a worker process
//!   and the renderer waits on the worker's timeline after `Enqueued` (GPU
//!   mode) or for `Done` (host mode).
//!
//! Each way, one frame at a time (latency: the renderer signals "rendered",
//! submits, and waits for "output ready") and then pipelined with as many
//! frames in flight as slots (throughput). The report's `modes` name both ways
//! with their per-frame median and their pipelined frames/s, and
//! `served_vs_in_process` is the ratio of the two throughputs.

/// The renderer of examples/support (its own instance and device), shared with
/// `bench`'s `caller frames` mode.
#[path = "../../examples/support/renderer.rs"]
pub(crate) mod renderer;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use ash::vk;
use neural_frame::{BackendReport, BufferImport, Frame, PixelLayout, SemaphoreImport, Submitted, SyncMode};
use neural_frame_client::{Client, ClientDevice, Options, SyncPreference};
use renderer::{RBuffer, Renderer};
use serde::Serialize;

use crate::ModelArgs;
use crate::run::median;

/// This process's arguments as it was given them, for a report to say how it was made
/// (an argument that is not UTF-8 is written lossily rather than refused).
pub(crate) fn argv() -> Vec<String> {
    std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect()
}

/// One way's numbers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Way {
    /// `in-process` or `served`.
    pub(crate) way: &'static str,
    /// Median latency of a frame alone, ms.
    pub(crate) sync_median_ms: f64,
    /// 99th percentile of the same.
    pub(crate) sync_p99_ms: f64,
    /// Frames per second with `slots` frames in flight.
    pub(crate) pipelined_fps: f64,
    /// Median interval between frames completing with `slots` frames in flight, ms.
    pub(crate) pipelined_median_ms: f64,
}

/// One way as an entry of the report's `modes`, named like `bench`'s modes.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServeMode {
    /// `in-process` or `served`.
    pub(crate) mode: &'static str,
    /// Frames per second with `slots` frames in flight (the throughput).
    pub(crate) fps: f64,
    /// Median time of one frame alone, from "rendered" to "output ready" seen by the renderer, ms.
    pub(crate) median_ms: f64,
    /// 99th percentile of the same.
    pub(crate) p99_ms: f64,
    /// Median interval between frames completing with `slots` frames in flight, ms.
    pub(crate) pipelined_median_ms: f64,
}

impl From<&Way> for ServeMode {
    fn from(w: &Way) -> Self {
        ServeMode {
            mode: w.way,
            fps: w.pipelined_fps,
            median_ms: w.sync_median_ms,
            p99_ms: w.sync_p99_ms,
            pipelined_median_ms: w.pipelined_median_ms,
        }
    }
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServeReport {
    /// This process's arguments, as given.
    pub(crate) argv: Vec<String>,
    pub(crate) model: String,
    pub(crate) size: (u32, u32),
    pub(crate) output: (u32, u32),
    pub(crate) backend: String,
    /// The in-process context's backend and devices (the worker runs on the same GPU: the renderer's).
    pub(crate) device: BackendReport,
    /// The renderer's Vulkan device (its own instance and device in this process).
    pub(crate) renderer_device: String,
    pub(crate) sync_mode: String,
    pub(crate) frames: usize,
    pub(crate) warmup: usize,
    pub(crate) slots: usize,
    /// `in-process` then `served`.
    pub(crate) modes: Vec<ServeMode>,
    /// served / in-process frames/s with `slots` frames in flight (target ≥ 0.97).
    pub(crate) served_vs_in_process: f64,
    /// served − in-process, median latency of a frame alone, ms (target ≤ 0.1 ms).
    pub(crate) overhead_ms: f64,
    pub(crate) in_process: Way,
    pub(crate) served: Way,
}

pub(crate) struct ServeBench {
    pub(crate) model: ModelArgs,
    pub(crate) size: (u32, u32),
    pub(crate) frames: usize,
    pub(crate) warmup: usize,
    pub(crate) slots: usize,
    pub(crate) picture: neural_frame::image_io::Rgba8,
}

const FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;

fn usage() -> vk::BufferUsageFlags {
    vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST
}

fn p99(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(((s.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)).copied().unwrap_or(f64::NAN)
}

/// Copies `pixels` into `dst` through a host-visible staging buffer, and waits
/// (once, before any timing: the frames themselves never come from the host).
pub(crate) fn fill(
    r: &Renderer,
    dst: vk::Buffer,
    pixels: &[u8],
    release: Option<&ClientDevice>,
    slot: Option<&neural_frame_client::SlotBuffer>,
) -> anyhow::Result<()> {
    let staging = r.buffer(pixels.len() as u64, vk::BufferUsageFlags::TRANSFER_SRC, true, false)?;
    r.write(&staging, pixels);
    let size = pixels.len() as u64;
    let cmd = r.record(|d, cmd| {
        // SAFETY: recording; both buffers hold `size` bytes.
        unsafe {
            d.cmd_copy_buffer(cmd, staging.buffer, dst, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size }])
        };
        if let (Some(cd), Some(s)) = (release, slot) {
            // SAFETY: recording on the renderer's queue family.
            unsafe { neural_frame_client::release_to_worker(cd, cmd, s) };
        }
    })?;
    r.submit(&[cmd], &[], &[])?;
    r.idle()?;
    r.destroy_buffer(staging);
    Ok(())
}

/// The pictures the frames read: the picture resized, one per slot, slightly varied.
fn frames_for(opts: &ServeBench) -> anyhow::Result<Vec<Vec<u8>>> {
    let (w, h) = opts.size;
    let base = opts.picture.resized(w, h).context("resizing the picture")?;
    Ok((0..opts.slots).map(|k| base.pixels.iter().map(|&p| p.wrapping_add(k as u8)).collect()).collect())
}

fn in_process(
    opts: &ServeBench,
    r: &Renderer,
    pics: &[Vec<u8>],
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<(Way, (u32, u32), BackendReport, bool)> {
    let (w, h) = opts.size;
    let mut ctx = opts.model.builder(w, h).slots(opts.slots).build().context("the in-process context")?;
    // Fast start: timed on the session the context was built for (the fused one).
    if !ctx.wait_settled(std::time::Duration::from_secs(300))? {
        anyhow::bail!("the in-process context's fused session was not ready within 300 s");
    }
    let (ow, oh) = ctx.output_size();
    let backend = ctx.report().clone();
    let gpu = ctx.sync_mode() == SyncMode::Gpu && r.semaphore_fd.is_some();
    let (ib, ob) = (w as u64 * h as u64 * 4, ow as u64 * oh as u64 * 4);
    let mut buffers: Vec<RBuffer> = Vec::new();
    let mut ids = Vec::new();
    for pic in pics {
        let i = r.buffer(ib, usage(), false, true)?;
        let o = r.buffer(ob, usage(), false, true)?;
        fill(r, i.buffer, pic, None, None)?;
        let import = |b: &RBuffer, width, height| -> anyhow::Result<BufferImport> {
            Ok(BufferImport {
                memory: r.export(&b.alloc)?,
                size: b.size,
                usage: usage(),
                layout: PixelLayout::packed(width, height, FORMAT),
            })
        };
        let iid = ctx.import_input_buffer(import(&i, w, h)?)?;
        let oid = ctx.import_output_buffer(import(&o, ow, oh)?)?;
        ids.push((iid, oid));
        buffers.push(i);
        buffers.push(o);
    }
    let sync = if gpu {
        let rendered = r.semaphore(true, true)?;
        let tl = ctx.import_timeline(SemaphoreImport {
            fd: r.export_semaphore(rendered)?,
            semaphore_type: vk::SemaphoreType::TIMELINE,
            origin: r.identity,
        })?;
        let ready = r.import_semaphore(ctx.export_timelines()?.output_ready)?;
        Some((rendered, tl, ready))
    } else {
        None
    };
    let mut n = 0u64;
    let mut frame = |ctx: &mut neural_frame::NeuralFrameContext, k: usize| -> anyhow::Result<neural_frame::Ticket> {
        n += 1;
        let (i, o) = ids[k];
        let f = match sync {
            Some((rendered, tl, _)) => {
                r.signal(rendered, n)?;
                Frame::new(i, o).wait_for(tl, n)
            }
            None => Frame::new(i, o),
        };
        match ctx.submit(f)? {
            Submitted::Frame(t) => Ok(t),
            Submitted::Skipped => bail!("a frame was skipped"),
        }
    };
    // With the post pass submitted once the host saw the model finish (`--post-wait host`), the host
    // drives the frame: the renderer waits through the context then (the worker does the same).
    let host_driven = ctx.tuning().cuda.is_some_and(|c| c.handover.post_wait == neural_frame::PostWait::Host);
    let done = |ctx: &mut neural_frame::NeuralFrameContext, t: &neural_frame::Ticket| -> anyhow::Result<()> {
        match sync {
            Some((_, _, ready)) if !host_driven => r.wait(ready, t.value()),
            _ => ctx.wait(t).map(|_| ()).map_err(Into::into),
        }
    };
    progress("in-process");
    let (lat, fps, intervals) = time_frames(opts, pics.len(), &mut ctx, &mut frame, |ctx, t| done(ctx, &t))?;
    ctx.wait_all()?;
    drop(ctx);
    r.idle()?;
    if let Some((rendered, _, ready)) = sync {
        r.destroy_semaphore(rendered);
        r.destroy_semaphore(ready);
    }
    for b in buffers {
        r.destroy_buffer(b);
    }
    Ok((way("in-process", &lat, fps, &intervals), (ow, oh), backend, gpu))
}

/// A way's numbers from its latencies (ms), its pipelined frames/s and the
/// intervals between its pipelined frames completing (ms).
fn way(name: &'static str, latencies: &[f64], fps: f64, intervals: &[f64]) -> Way {
    Way {
        way: name,
        sync_median_ms: median(&mut latencies.to_vec()),
        sync_p99_ms: p99(latencies),
        pipelined_fps: fps,
        pipelined_median_ms: median(&mut intervals.to_vec()),
    }
}

/// Times frames one at a time (latencies in ms, after the warm-up), then with
/// `slots` frames in flight (frames/s, and the intervals between frames
/// completing after the first, in ms): the same loop for both ways.
fn time_frames<S, T>(
    opts: &ServeBench,
    pictures: usize,
    state: &mut S,
    mut submit: impl FnMut(&mut S, usize) -> anyhow::Result<T>,
    mut done: impl FnMut(&mut S, T) -> anyhow::Result<()>,
) -> anyhow::Result<(Vec<f64>, f64, Vec<f64>)> {
    let mut lat = Vec::new();
    for f in 0..opts.warmup + opts.frames {
        let start = Instant::now();
        let t = submit(state, f % pictures)?;
        done(state, t)?;
        if f >= opts.warmup {
            lat.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let start = Instant::now();
    let mut pending = std::collections::VecDeque::new();
    let mut intervals = Vec::with_capacity(opts.frames);
    let mut last = start;
    let mut completed = |intervals: &mut Vec<f64>| {
        let now = Instant::now();
        intervals.push((now - last).as_secs_f64() * 1e3);
        last = now;
    };
    for f in 0..opts.frames {
        if pending.len() == opts.slots {
            let t = pending.pop_front().context("pending")?;
            done(state, t)?;
            completed(&mut intervals);
        }
        pending.push_back(submit(state, f % pictures)?);
    }
    for t in pending {
        done(state, t)?;
        completed(&mut intervals);
    }
    let fps = opts.frames as f64 / start.elapsed().as_secs_f64();
    // The first interval includes filling the ring (as `bench`'s pipelined mode leaves it out).
    if !intervals.is_empty() {
        intervals.remove(0);
    }
    Ok((lat, fps, intervals))
}

/// The worker, a child process of this one, on a socket of its own.
struct WorkerProcess {
    child: Child,
    socket: PathBuf,
}

impl WorkerProcess {
    fn start(model: &ModelArgs, slots: usize) -> anyhow::Result<Self> {
        let socket = std::env::temp_dir().join(format!("neural-frame-bench-{}.sock", std::process::id()));
        let exe = std::env::current_exe().context("this program's path")?;
        let mut cmd = Command::new(exe);
        let mut model = model.clone();
        if model.cuda.fast_start.is_none() {
            // The served frames are timed from the client's first: on the session the in-process
            // run is timed on, not a fast start's first one.
            model.cuda.fast_start = Some(false);
        }
        let options = serde_json::to_string(&model).context("the model's options as JSON")?;
        cmd.arg("--quiet").arg("serve").arg("--socket").arg(&socket).arg("--model-options").arg(options);
        cmd.args(["--slots", &slots.to_string(), "--max-clients", "1"]).stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd.spawn().context("starting the worker")?;
        let mut w = WorkerProcess { child, socket };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !w.socket.exists() {
            if let Some(status) = w.child.try_wait()? {
                bail!("the worker exited ({status}) before listening: run `neural-frame serve` alone to see why");
            }
            if Instant::now() > deadline {
                bail!("the worker did not listen within 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(w)
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn served(
    opts: &ServeBench,
    r: &Renderer,
    pics: &[Vec<u8>],
    gpu_in_process: bool,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Way> {
    let (w, h) = opts.size;
    let worker = WorkerProcess::start(&opts.model, opts.slots)?;
    let cd = r.client_device();
    let mut o = Options::new(&worker.socket, w, h, FORMAT);
    (o.input_slots, o.output_slots, o.sync) = (opts.slots as u16, opts.slots as u16, SyncPreference::Auto);
    // SAFETY: the renderer's device has external memory fds (and semaphore fds where the driver does) and outlives the client.
    let mut client = unsafe { Client::connect(&cd, o) }.context("connecting to the worker")?;
    for (k, pic) in pics.iter().enumerate() {
        fill(r, client.input_slot(k).buffer(), pic, Some(&cd), Some(client.input_slot(k)))?;
    }
    let gpu = client.sync_mode() == neural_frame_client::SyncMode::Gpu;
    if gpu != gpu_in_process {
        bail!("the worker chose {:?} mode and the in-process way ran the other: not comparable", client.sync_mode());
    }
    let mut n = 0u64;
    let mut frame = |client: &mut Client, k: usize| -> anyhow::Result<neural_frame_client::FrameId> {
        n += 1;
        if gpu {
            r.signal(client.rendered_timeline().context("GPU mode's timeline")?, n)?;
            Ok(client.submit(k, k, n, 0)?)
        } else {
            Ok(client.submit(k, k, 0, 0)?)
        }
    };
    let done = |client: &mut Client, id: neural_frame_client::FrameId| -> anyhow::Result<()> {
        if gpu {
            let e = client.enqueued(id)?;
            r.wait(e.output_ready.semaphore, e.output_ready.value)?;
            // The worker's Done for it is on its way; collected later, without waiting.
            client.try_done(id)?;
        } else {
            client.wait_done(id)?;
        }
        Ok(())
    };
    progress("served");
    let (lat, fps, intervals) = time_frames(opts, pics.len(), &mut client, &mut frame, done)?;
    client.close()?;
    r.idle()?;
    drop(worker);
    Ok(way("served", &lat, fps, &intervals))
}

pub(crate) fn run(opts: &ServeBench, mut progress: impl FnMut(&str)) -> anyhow::Result<ServeReport> {
    let r = Renderer::new(false).context("the renderer's own Vulkan device")?;
    let pics = frames_for(opts)?;
    let (in_process, output, backend, gpu) = in_process(opts, &r, &pics, &mut progress)?;
    let served = served(opts, &r, &pics, gpu, &mut progress)?;
    Ok(ServeReport {
        argv: argv(),
        model: opts.model.model.display().to_string(),
        size: opts.size,
        output,
        backend: backend.backend.to_string(),
        device: backend,
        renderer_device: r.name.clone(),
        sync_mode: if gpu { "gpu" } else { "host" }.into(),
        frames: opts.frames,
        warmup: opts.warmup,
        slots: opts.slots,
        modes: vec![ServeMode::from(&in_process), ServeMode::from(&served)],
        served_vs_in_process: served.pipelined_fps / in_process.pipelined_fps,
        overhead_ms: served.sync_median_ms - in_process.sync_median_ms,
        in_process,
        served,
    })
}

pub(crate) fn render(r: &ServeReport) -> String {
    let mut s = format!(
        "{} {}x{} → {}x{} on the {} backend ({}), {} mode, {} frames, {} slots; renderer on {}\n",
        r.model,
        r.size.0,
        r.size.1,
        r.output.0,
        r.output.1,
        r.backend,
        r.device.cuda_device.as_deref().unwrap_or(&r.device.vulkan_device.name),
        r.sync_mode,
        r.frames,
        r.slots,
        r.renderer_device
    );
    s += &format!(
        "{:<12} {:>14} {:>12} {:>16} {:>18}\n",
        "way", "sync median", "sync p99", "pipelined fps", "pipelined median"
    );
    for m in &r.modes {
        s += &format!(
            "{:<12} {:>11.3} ms {:>9.3} ms {:>16.1} {:>15.3} ms\n",
            m.mode, m.median_ms, m.p99_ms, m.fps, m.pipelined_median_ms
        );
    }
    s += &format!(
        "per-frame overhead of the worker: {:+.3} ms (target ≤ 0.1 ms); pipelined throughput {:.1}% of in-process (target ≥ 97%)\n",
        r.overhead_ms,
        r.served_vs_in_process * 100.0
    );
    s
}
