//! `neural-frame bench`'s `caller frames` mode: a renderer's own frames, on a
//! Vulkan device of its own, through the context's ring by file descriptor.
//!
//! The renderer (examples/support's, as `bench --serve` and the tests use it)
//! has its own instance and device on the context's GPU. It makes a ring of
//! input and output images (one more than the context's slots, as the
//! pipelined mode has) in exportable memory and hands them over once
//! (`import_input_image`, `import_output_image`). Where the context shares
//! semaphores (`SyncMode::Gpu`), it also hands over its "rendered" and "read"
//! timelines (`import_timeline`) and imports the context's "input consumed"
//! and "output ready". Per frame, nothing crosses the host:
//!
//! - the renderer "draws", one frame ahead: behind "input consumed" of the
//!   frame that last read the image, it takes the input image from
//!   `VK_QUEUE_FAMILY_EXTERNAL`, copies one of its pictures into it from its
//!   own device-local memory (put there once, before any timing), releases it
//!   and signals "rendered" = n;
//! - the context runs frame n, waiting on its GPU for "rendered" = n and for
//!   the renderer's "read" of the frame that last wrote the output;
//! - behind "output ready", the renderer takes the output image, copies the
//!   result into device-local memory of its own (what a compositor samples),
//!   releases it and signals "read" = n.
//!
//! The host retires the oldest frame (`wait`) once the ring is full, as the
//! pipelined mode does. In host-signalled mode (a driver without semaphore
//! fds: Mesa's lavapipe) the renderer's copies complete before each `submit`
//! (a host wait on its own timeline), and a result is read once its frame retired.
//!
//! With `--caller-queue transfer` (the default) the renderer records and submits
//! all of that (and with `--caller-no-copies` its bare semaphore submissions) on
//! a queue of a transfer-only family (TRANSFER without GRAPHICS and COMPUTE:
//! NVIDIA's copy engines, which run beside compute, where its graphics/compute
//! family's channel is time-sliced with CUDA's work: `--caller-queue main`
//! measures that, 73–77 % of `ort-alone` against 97–99 % on an H100 and an H200). The images' acquires from and
//! releases to `VK_QUEUE_FAMILY_EXTERNAL` then name the transfer family, and its
//! pictures and result buffers are handed from the main family to the transfer
//! family once, before any frame. A device without such a family (lavapipe)
//! runs on its main queue, said on stderr; the report names the queue used
//! (`renderer_queue`).
//!
//! After the timed frames, one result is read back (untimed) and compared with
//! `zero-copy sync`'s on the same picture; the run fails where they differ.

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::{Context as _, bail};
use ash::vk;
use neural_frame::{
    ErrorKind, Frame, FrameStats, ImportError, InputId, NeuralFrameContext, OutputId, SemaphoreImport, Submitted,
    SyncMode, Ticket, TimelineId, format_uuid,
};
use serde::Serialize;

use crate::bench_serve::fill;
use crate::bench_serve::renderer::{Lane, RBuffer, RImage, Renderer};
use crate::run::median;

type Result<T> = anyhow::Result<T>;

/// The images' format: the one the bench's own images have, so that the results compare.
const FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;

fn input_usage() -> vk::ImageUsageFlags {
    vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST
}

fn output_usage() -> vk::ImageUsageFlags {
    vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::TRANSFER_SRC
}

/// The timed frames.
pub(crate) struct Measured {
    /// Each frame's time (ms), from the moments frames retired ([`per_frame`]).
    pub(crate) intervals: Vec<f64>,
    /// The whole timed run (ms), up to the renderer's copy of the last result.
    pub(crate) total_ms: f64,
    /// Every timed frame's times, in order.
    pub(crate) stats: Vec<FrameStats>,
}

/// What the report says of the mode.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub(crate) enum CallerFramesReport {
    /// It ran: its numbers are the `caller frames` entry of the modes.
    Ran {
        /// How completion travelled: on the GPU (shared timelines) or through the host.
        sync_mode: SyncMode,
        /// The renderer's Vulkan device (its own instance and device).
        renderer_device: String,
        /// Input and output images in the renderer's ring.
        images: usize,
        /// Untimed frames first.
        warmup: usize,
        /// What the renderer does on its device per timed frame: `copies` (takes the input
        /// from the external family, copies a picture in, releases it; takes the output and
        /// copies it out) or `none` (its submissions carry only the semaphores).
        renderer_work: &'static str,
        /// The renderer's queue for that work: `transfer` (a transfer-only family's, asked for with
        /// `--caller-queue transfer`, the default), else its main family's, `graphics` (or `compute`).
        renderer_queue: &'static str,
        /// The transfer queue was asked for (the text report notes a fallback; the JSON has `argv`).
        #[serde(skip)]
        transfer_queue_asked: bool,
        /// Whether the frames' passes ran as CUDA kernels (else Vulkan compute passes).
        cuda_passes: bool,
        /// Model time of the timed frames: median (ms).
        model_median_ms: f64,
        /// CUDA stream idle between frames: median (ms; NaN on the CPU backend).
        gpu_gap_median_ms: f64,
        /// The largest per-channel difference from `zero-copy sync`'s image of the same picture (the run fails above 1).
        max_difference: u8,
    },
    /// It could not run here, and why.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// Runs the mode on `ctx`: `pictures` are what the renderer draws (picture
/// `k` into ring image `k mod pictures`), `reference` the context's own images
/// holding the same pictures in the same order and an output image, for the
/// check. A mode that cannot run here comes back `Skipped`, with the reason.
pub(crate) fn run(
    ctx: &mut NeuralFrameContext,
    pictures: &[Vec<u8>],
    reference: (&[InputId], OutputId),
    (frames, warmup, copies, transfer): (usize, usize, bool, bool),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<(Option<Measured>, CallerFramesReport)> {
    let r = match Renderer::new(false) {
        Ok(r) => r,
        Err(e) => return Ok(skipped(format!("the renderer cannot make a Vulkan device of its own here: {e:#}"))),
    };
    let here = ctx.device_identity();
    if r.identity.device_uuid != here.device_uuid {
        let uuid = format_uuid(&r.identity.device_uuid);
        return Ok(skipped(format!(
            "the renderer takes the first Vulkan device, {} ({uuid}), and the context runs on {} ({}): \
             pass --device {uuid} to run it there",
            r.name,
            ctx.report().vulkan_device.name,
            format_uuid(&here.device_uuid)
        )));
    }
    if r.identity.driver_uuid != here.driver_uuid {
        return Ok(skipped(format!(
            "the renderer's device {} reports driver {} and the context's {}: memory cannot be shared between drivers",
            r.name,
            format_uuid(&r.identity.driver_uuid),
            format_uuid(&here.driver_uuid)
        )));
    }
    let lane = r.lane_for(transfer);
    if transfer && lane == Lane::Main {
        log::warn!(
            "caller frames: the renderer's device ({}) has no transfer-only queue family: \
             its work runs on its {} queue instead (--caller-queue transfer)",
            r.name,
            r.lane_name(Lane::Main)
        );
    }
    let mut caller = Caller::new(r, ctx.slot_count() + 1, lane, transfer);
    match caller.measure(ctx, pictures, reference, (frames, warmup, copies), progress) {
        Ok(outcome) => {
            caller.close(ctx)?;
            Ok(outcome)
        }
        Err(e) => {
            caller.abandon();
            Err(e)
        }
    }
}

fn skipped(reason: String) -> (Option<Measured>, CallerFramesReport) {
    (None, CallerFramesReport::Skipped { reason })
}

/// How the renderer and the context hand frames over.
#[derive(Clone, Copy)]
enum Sync {
    /// Shared timelines.
    Gpu(GpuTimelines),
    /// Host-signalled: the renderer waits for its own timeline before each submit.
    Host { done: vk::Semaphore },
}

/// GPU-side sync's timelines, from the renderer's side: its two (and the
/// context's imports of them), and its imports of the context's two.
#[derive(Clone, Copy)]
struct GpuTimelines {
    rendered: vk::Semaphore,
    read: vk::Semaphore,
    rendered_id: TimelineId,
    read_id: TimelineId,
    consumed: vk::Semaphore,
    ready: vk::Semaphore,
}

/// Timings of a run of frames.
struct Timing {
    start: Instant,
    /// When each frame retired (ms since `start`).
    retired: Vec<f64>,
    stats: Vec<FrameStats>,
}

impl Timing {
    fn new(count: usize) -> Self {
        Timing { start: Instant::now(), retired: Vec::with_capacity(count), stats: Vec::with_capacity(count) }
    }

    /// Waits for the frame and notes when it retired.
    fn retire(&mut self, ctx: &mut NeuralFrameContext, ticket: &Ticket) -> Result<()> {
        self.stats.push(ctx.wait(ticket)?);
        self.retired.push(self.start.elapsed().as_secs_f64() * 1e3);
        Ok(())
    }

    /// `window`: the frames in flight at once.
    fn finish(self, window: usize) -> Measured {
        let total_ms = self.start.elapsed().as_secs_f64() * 1e3;
        Measured { intervals: per_frame(&self.retired, window), total_ms, stats: self.stats }
    }
}

/// Each frame's time from the moments frames retired: over each run of `window` consecutive
/// retirements, its length divided by `window`. With several frames in flight they retire in
/// bursts, and the interval between two of a burst is no frame's time (the median of single
/// intervals was 0.4 ms for 9.6 ms frames at 1080p on the H200). Single intervals where there
/// are too few frames; the first retirement (the ring filling) starts the first run.
fn per_frame(retired: &[f64], window: usize) -> Vec<f64> {
    let w = if window >= 1 && retired.len() > window { window } else { 1 };
    retired.windows(w + 1).map(|r| (r[w] - r[0]) / w as f64).collect()
}

/// The renderer and everything it made and handed over; released by `close`.
struct Caller {
    r: Renderer,
    /// Images in the ring.
    lanes: usize,
    inputs: Vec<RImage>,
    outputs: Vec<RImage>,
    /// The pictures, in device-local memory of the renderer's.
    scenes: Vec<RBuffer>,
    /// Where the renderer copies each output's result (device-local).
    shown: Vec<RBuffer>,
    /// The untimed readback of one result, for the check.
    check: Option<RBuffer>,
    semaphores: Vec<vk::Semaphore>,
    input_ids: Vec<InputId>,
    output_ids: Vec<OutputId>,
    timelines: Vec<TimelineId>,
    draw: Vec<vk::CommandBuffer>,
    read: Vec<vk::CommandBuffer>,
    sync: Option<Sync>,
    /// Frames handed to the context so far (the "rendered" and "read" values).
    n: u64,
    /// Per ring image: the ticket value of the frame that last used it.
    values: Vec<u64>,
    /// Host-signalled mode: the renderer's own timeline's last value.
    host_value: u64,
    /// The renderer's per-frame work: its copies (true), or only its semaphores.
    copies: bool,
    /// The renderer's queue for its per-frame work (and the ring's set-up and check).
    lane: Lane,
    /// The transfer queue was asked for (`--caller-queue transfer`).
    transfer_asked: bool,
}

impl Caller {
    fn new(r: Renderer, lanes: usize, lane: Lane, transfer_asked: bool) -> Self {
        Caller {
            r,
            lanes,
            inputs: Vec::new(),
            outputs: Vec::new(),
            scenes: Vec::new(),
            shown: Vec::new(),
            check: None,
            semaphores: Vec::new(),
            input_ids: Vec::new(),
            output_ids: Vec::new(),
            timelines: Vec::new(),
            draw: Vec::new(),
            read: Vec::new(),
            sync: None,
            n: 0,
            values: vec![0; lanes],
            host_value: 0,
            copies: true,
            lane,
            transfer_asked,
        }
    }

    /// Sets up, runs the warm-up and the timed frames, and checks one result.
    fn measure(
        &mut self,
        ctx: &mut NeuralFrameContext,
        pictures: &[Vec<u8>],
        reference: (&[InputId], OutputId),
        (frames, warmup, copies): (usize, usize, bool),
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<(Option<Measured>, CallerFramesReport)> {
        if let Some(reason) = self.set_up(ctx, pictures)? {
            return Ok(skipped(reason));
        }
        // At least one round of every slot with every image (each pairing's passes are
        // recorded on first use), unless asked for no warm-up.
        let warm = if warmup == 0 { 0 } else { warmup.max(self.lanes * ctx.slot_count()) };
        if warm > 0 {
            self.frames(ctx, warm, "caller warm-up", progress)?;
        }
        // The warm-up drew every image once: without copies the timed frames run on those pictures.
        self.copies = copies || warm < self.lanes;
        let measured = self.frames(ctx, frames.max(1), "caller frames", progress)?;
        let max_difference = self.compare(ctx, reference)?;
        let pick = |f: fn(&FrameStats) -> f64| -> Vec<f64> {
            measured.stats.iter().map(f).filter(|v| v.is_finite()).collect()
        };
        let sync_mode = match self.sync {
            Some(Sync::Gpu(_)) => SyncMode::Gpu,
            _ => SyncMode::Host,
        };
        let report = CallerFramesReport::Ran {
            sync_mode,
            renderer_device: self.r.name.clone(),
            images: self.lanes,
            warmup: warm,
            renderer_work: if self.copies { "copies" } else { "none" },
            renderer_queue: self.r.lane_name(self.lane),
            transfer_queue_asked: self.transfer_asked,
            cuda_passes: measured.stats.iter().all(|s| s.cuda_passes),
            model_median_ms: median(&mut pick(|s| s.infer_ms)),
            gpu_gap_median_ms: median(&mut pick(|s| s.gpu_gap_ms)),
            max_difference,
        };
        Ok((Some(measured), report))
    }

    /// The renderer's ring, handed to the context once; `Some(reason)` where the context refuses it.
    fn set_up(&mut self, ctx: &mut NeuralFrameContext, pictures: &[Vec<u8>]) -> Result<Option<String>> {
        let (w, h) = ctx.frame_size();
        let (ow, oh) = ctx.output_size();
        let result_bytes = u64::from(ow) * u64::from(oh) * 4;
        for _ in 0..self.lanes {
            self.inputs.push(self.r.image(w, h, FORMAT, input_usage(), true).context("the renderer's input image")?);
            self.outputs
                .push(self.r.image(ow, oh, FORMAT, output_usage(), true).context("the renderer's output image")?);
            self.shown.push(self.r.buffer(result_bytes, vk::BufferUsageFlags::TRANSFER_DST, false, false)?);
        }
        let usage = vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST;
        for p in pictures {
            self.scenes.push(self.r.buffer(p.len() as u64, usage, false, false)?);
            let scene = self.scenes.last().context("the picture's buffer")?;
            fill(&self.r, scene.buffer, p, None, None).context("putting a picture on the renderer's GPU")?;
        }
        // The pictures (written on the main family) and the result buffers, to the lane's family
        // once: exclusive buffers keep their contents across families only through a transfer.
        let buffers: Vec<&RBuffer> = self.scenes.iter().chain(&self.shown).collect();
        self.r.hand_over(&buffers, Lane::Main, self.lane)?;
        // GENERAL, and with the external queue family, where they live between uses (released
        // by the lane's family, which takes them from it per frame).
        self.r.prepare_on(self.lane, &self.inputs.iter().chain(&self.outputs).collect::<Vec<_>>(), true)?;
        for i in 0..self.lanes {
            match ctx.import_input_image(self.r.export_image(&self.inputs[i])?) {
                Ok(id) => self.input_ids.push(id),
                Err(e) => return refused(e, "an input image"),
            }
            match ctx.import_output_image(self.r.export_image(&self.outputs[i])?) {
                Ok(id) => self.output_ids.push(id),
                Err(e) => return refused(e, "an output image"),
            }
        }
        let sync = if ctx.sync_mode() == SyncMode::Gpu && self.r.semaphore_fd.is_some() {
            let rendered = self.semaphore(true)?;
            let read = self.semaphore(true)?;
            let mut ids = Vec::new();
            for s in [rendered, read] {
                let import = SemaphoreImport {
                    fd: self.r.export_semaphore(s)?,
                    semaphore_type: vk::SemaphoreType::TIMELINE,
                    origin: self.r.identity,
                };
                match ctx.import_timeline(import) {
                    Ok(id) => ids.push(id),
                    Err(e) => return refused(e, "a timeline"),
                }
            }
            self.timelines.extend(&ids);
            let exported = match ctx.export_timelines() {
                Ok(t) => t,
                Err(e) if e.kind() == ErrorKind::Unsupported => {
                    return Ok(Some(format!("the context cannot export its timelines: {e}")));
                }
                Err(e) => return Err(anyhow::Error::new(e).context("exporting the context's timelines")),
            };
            let consumed = self.r.import_semaphore(exported.input_consumed)?;
            self.semaphores.push(consumed);
            let ready = self.r.import_semaphore(exported.output_ready)?;
            self.semaphores.push(ready);
            Sync::Gpu(GpuTimelines { rendered, read, rendered_id: ids[0], read_id: ids[1], consumed, ready })
        } else {
            Sync::Host { done: self.semaphore(false)? }
        };
        self.sync = Some(sync);
        for i in 0..self.lanes {
            let scene = &self.scenes[i % self.scenes.len()];
            self.draw.push(self.r.render_commands_on(self.lane, &self.inputs[i], scene, true)?);
            self.read.push(self.r.read_commands_on(self.lane, &self.outputs[i], &self.shown[i], true)?);
        }
        Ok(None)
    }

    /// A timeline semaphore of the renderer's, exportable when asked.
    fn semaphore(&mut self, exportable: bool) -> Result<vk::Semaphore> {
        let s = self.r.semaphore(true, exportable)?;
        self.semaphores.push(s);
        Ok(s)
    }

    /// The ring image of frame `n` (1, 2, …).
    fn entry(&self, n: u64) -> usize {
        ((n - 1) % self.lanes as u64) as usize
    }

    /// `count` frames through the ring, drained at the end.
    fn frames(
        &mut self,
        ctx: &mut NeuralFrameContext,
        count: usize,
        label: &str,
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<Measured> {
        match self.sync.context("the renderer's ring is not set up")? {
            Sync::Gpu(timelines) => self.gpu_frames(ctx, count, &timelines, label, progress),
            Sync::Host { done } => self.host_frames(ctx, count, done, label, progress),
        }
    }

    /// The renderer draws frame `n` into its ring image once the context consumed
    /// the frame that last read it (a GPU wait), and signals "rendered" = n.
    fn draw(&self, n: u64, t: &GpuTimelines) -> Result<()> {
        let i = self.entry(n);
        let earlier = (self.values[i] > 0).then_some((t.consumed, self.values[i]));
        let cmds = if self.copies { &self.draw[i..=i] } else { &[] };
        self.r.submit_on(self.lane, cmds, earlier.as_slice(), &[(t.rendered, n)])
    }

    fn gpu_frames(
        &mut self,
        ctx: &mut NeuralFrameContext,
        count: usize,
        t: &GpuTimelines,
        label: &str,
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<Measured> {
        let (first, last) = (self.n + 1, self.n + count as u64);
        let lanes = self.lanes as u64;
        let mut timing = Timing::new(count);
        let mut pending: VecDeque<Ticket> = VecDeque::new();
        self.draw(first, t)?;
        for n in first..=last {
            if pending.len() == ctx.slot_count() {
                let ticket = pending.pop_front().context("ring bookkeeping")?;
                timing.retire(ctx, &ticket)?;
                progress(label, timing.stats.len(), count);
            }
            // The next frame's drawing goes on the renderer's queue before this frame's read,
            // which waits for this frame's result: drawing runs while the frame does.
            if n < last {
                self.draw(n + 1, t)?;
            }
            let i = self.entry(n);
            let mut frame = Frame::new(self.input_ids[i], self.output_ids[i]).wait_for(t.rendered_id, n);
            if n > lanes {
                frame = frame.output_free_after(t.read_id, n - lanes);
            }
            let ticket = submit(ctx, frame)?;
            self.values[i] = ticket.value();
            let cmds = if self.copies { &self.read[i..=i] } else { &[] };
            self.r.submit_on(self.lane, cmds, &[(t.ready, ticket.value())], &[(t.read, n)])?;
            pending.push_back(ticket);
        }
        while let Some(ticket) = pending.pop_front() {
            timing.retire(ctx, &ticket)?;
            progress(label, timing.stats.len(), count);
        }
        self.r.wait(t.read, last)?;
        self.n = last;
        Ok(timing.finish(ctx.slot_count()))
    }

    /// Submits the renderer's commands and waits for them (host-signalled mode).
    fn host_step(&mut self, cmds: &[vk::CommandBuffer], done: vk::Semaphore) -> Result<()> {
        self.host_value += 1;
        self.r.submit_on(self.lane, cmds, &[], &[(done, self.host_value)])?;
        self.r.wait(done, self.host_value)
    }

    fn host_frames(
        &mut self,
        ctx: &mut NeuralFrameContext,
        count: usize,
        done: vk::Semaphore,
        label: &str,
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<Measured> {
        let (first, last) = (self.n + 1, self.n + count as u64);
        let mut timing = Timing::new(count);
        let mut pending: VecDeque<(Ticket, usize)> = VecDeque::new();
        for n in first..=last {
            let mut cmds = Vec::with_capacity(2);
            if pending.len() == ctx.slot_count() {
                // The oldest frame retires; the renderer reads its result along with the next drawing.
                let (ticket, j) = pending.pop_front().context("ring bookkeeping")?;
                timing.retire(ctx, &ticket)?;
                progress(label, timing.stats.len(), count);
                if self.copies {
                    cmds.push(self.read[j]);
                }
            }
            let i = self.entry(n);
            if self.copies {
                cmds.push(self.draw[i]);
            }
            self.host_step(&cmds, done)?;
            let ticket = submit(ctx, Frame::new(self.input_ids[i], self.output_ids[i]))?;
            pending.push_back((ticket, i));
        }
        let mut reads = Vec::with_capacity(pending.len());
        while let Some((ticket, j)) = pending.pop_front() {
            timing.retire(ctx, &ticket)?;
            progress(label, timing.stats.len(), count);
            if self.copies {
                reads.push(self.read[j]);
            }
        }
        self.host_step(&reads, done)?;
        self.n = last;
        Ok(timing.finish(ctx.slot_count()))
    }

    /// Reads ring image 0's result back (untimed) and compares it with the
    /// context's own frame of the same picture: the largest difference.
    fn compare(&mut self, ctx: &mut NeuralFrameContext, (inputs, output): (&[InputId], OutputId)) -> Result<u8> {
        let (ow, oh) = ctx.output_size();
        let bytes = u64::from(ow) * u64::from(oh) * 4;
        self.check = Some(self.r.buffer(bytes, vk::BufferUsageFlags::TRANSFER_DST, true, false)?);
        let check = self.check.as_ref().context("the readback buffer")?;
        let cmd = self.r.read_commands_on(self.lane, &self.outputs[0], check, true)?;
        self.r.submit_on(self.lane, &[cmd], &[], &[])?;
        self.r.idle()?;
        let got = self.r.read(check, bytes as usize);
        // Ring image 0 holds picture 0, as `inputs[0]` does.
        let input = *inputs.first().context("no reference input")?;
        ctx.infer(input, output)?;
        let want = ctx.readback(output)?;
        let max_difference = got.iter().zip(&want).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(u8::MAX);
        if got.len() != want.len() || max_difference > 1 {
            bail!(
                "caller frames computed another image than zero-copy sync (largest difference {max_difference}): \
                 the renderer's imported frames are not what the context's own frames give"
            );
        }
        Ok(max_difference)
    }

    /// Waits for every frame, takes the imports back from the context, and
    /// releases the renderer's objects and device.
    fn close(self, ctx: &mut NeuralFrameContext) -> Result<()> {
        if let Err(e) = ctx.wait_all() {
            self.abandon();
            return Err(anyhow::Error::new(e).context("finishing the caller frames"));
        }
        // Every submission of the renderer's waited only for frames that are now done.
        self.r.idle()?;
        let unregistered = (|| -> Result<()> {
            for id in &self.input_ids {
                ctx.unregister_input(*id)?;
            }
            for id in &self.output_ids {
                ctx.unregister_output(*id)?;
            }
            for id in &self.timelines {
                ctx.unregister_timeline(*id)?;
            }
            Ok(())
        })();
        // The context's imports share the payloads: the renderer frees its own handles either way.
        for i in self.inputs.into_iter().chain(self.outputs) {
            self.r.destroy_image(i);
        }
        for b in self.scenes.into_iter().chain(self.shown).chain(self.check) {
            self.r.destroy_buffer(b);
        }
        for s in self.semaphores {
            self.r.destroy_semaphore(s);
        }
        drop(self.r);
        unregistered.context("taking the renderer's images back from the context")
    }

    /// After an error mid-run the renderer's queue may wait for a frame that will
    /// never be done, and idling its device would hang: its objects are left to the
    /// process's exit.
    fn abandon(self) {
        std::mem::forget(self);
    }
}

/// Submits a frame to a blocking ring.
fn submit(ctx: &mut NeuralFrameContext, frame: Frame) -> Result<Ticket> {
    match ctx.submit(frame)? {
        Submitted::Frame(ticket) => Ok(ticket),
        Submitted::Skipped => bail!("a blocking ring skipped a frame"),
    }
}

/// A refused import: unsupported here is a reason to skip the mode, anything else an error.
fn refused(e: ImportError, what: &str) -> Result<Option<String>> {
    if e.error().kind() == ErrorKind::Unsupported {
        return Ok(Some(format!("the context cannot import {what} of the renderer's: {}", e.error())));
    }
    Err(anyhow::Error::new(e).context(format!("importing {what} of the renderer's")))
}

#[cfg(test)]
mod tests {
    use ash::vk;

    use crate::bench_serve::renderer::transfer_only_family;

    fn family(flags: vk::QueueFlags, count: u32) -> vk::QueueFamilyProperties {
        vk::QueueFamilyProperties { queue_flags: flags, queue_count: count, ..Default::default() }
    }

    #[test]
    fn the_transfer_family_is_one_without_graphics_and_compute() {
        use vk::QueueFlags as Q;
        let sparse = Q::SPARSE_BINDING;
        // NVIDIA's: graphics + compute, transfer alone, compute alone, video decode, video encode, optical flow.
        let nvidia = [
            family(Q::GRAPHICS | Q::COMPUTE | Q::TRANSFER | sparse, 16),
            family(Q::TRANSFER | sparse, 2),
            family(Q::COMPUTE | Q::TRANSFER | sparse, 8),
            family(Q::VIDEO_DECODE_KHR, 4),
            family(Q::VIDEO_ENCODE_KHR, 1),
            family(Q::OPTICAL_FLOW_NV, 1),
        ];
        assert_eq!(transfer_only_family(&nvidia), Some(1));
        // lavapipe: one family that does everything.
        assert_eq!(transfer_only_family(&[family(Q::GRAPHICS | Q::COMPUTE | Q::TRANSFER | sparse, 1)]), None);
        // Compute with transfer is not transfer-only.
        assert_eq!(transfer_only_family(&[family(Q::GRAPHICS, 1), family(Q::COMPUTE | Q::TRANSFER, 2)]), None);
        // A plain transfer family is preferred to a video one that also transfers; empty families are not taken.
        let mixed = [
            family(Q::GRAPHICS | Q::COMPUTE | Q::TRANSFER, 1),
            family(Q::VIDEO_DECODE_KHR | Q::TRANSFER, 1),
            family(Q::TRANSFER, 0),
            family(Q::TRANSFER | Q::PROTECTED, 1),
        ];
        assert_eq!(transfer_only_family(&mixed), Some(3));
        assert_eq!(transfer_only_family(&mixed[..3]), Some(1));
        assert_eq!(transfer_only_family(&[]), None);
    }

    #[test]
    fn a_frames_time_is_taken_over_as_many_frames_as_are_in_flight() {
        use super::per_frame;
        // Three frames in flight retiring in bursts of three, 9 ms a frame: single intervals
        // would be 0.1, 0.1, 26.8, … (median 0.1).
        let mut retired = Vec::new();
        for burst in 0..5 {
            let t = 27.0 * f64::from(burst);
            retired.extend([t, t + 0.1, t + 0.2]);
        }
        let times = per_frame(&retired, 3);
        assert_eq!(times.len(), retired.len() - 3);
        assert!(times.iter().all(|&t| (t - 9.0).abs() < 1e-9), "{times:?}");
        // Too few frames for a window: single intervals.
        assert_eq!(per_frame(&[1.0, 3.0, 6.0], 3), vec![2.0, 3.0]);
        assert_eq!(per_frame(&[1.0, 3.0, 6.0], 0), vec![2.0, 3.0]);
        assert!(per_frame(&[1.0], 3).is_empty());
    }
}
