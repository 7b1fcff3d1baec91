//! `neural-frame tune`: measures the options a context offers on this machine,
//! for one model and frame size, and writes the fastest to the tune cache that
//! contexts read (`neural_frame::tune`).
//!
//! Each candidate ([`tune::first_round`], then [`tune::second_round`] around
//! the first round's winner) gets a context of its own with its options forced
//! through the builder, a warm-up (at least two frames per slot: CUDA graphs are
//! captured on a slot's second run), a synchronous run (one frame at a time, the
//! median) and a pipelined run (the ring kept full, frames per second), like
//! `bench`'s zero-copy sync and pipelined modes, on images the context created
//! holding a pattern. A candidate that fails to build or run is reported with its
//! error, not fatal. The winner ([`tune::choose`]): the highest pipelined
//! throughput, ties (within 1 %) to the lower synchronous median.
//!
//! On the CPU backend the CUDA options are not in effect: the candidates are
//! spin waits off and on, and the entry is keyed by the backend, so it never
//! stands for the CUDA backend's options.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use ash::vk;
use neural_frame::tune::{self, Candidate, TuneCache, TuneEntry, TuneKey, TunedOptions};
use neural_frame::{BackendReport, Frame, InputId, NeuralFrameContext, OutputId, PostWait, Submitted};
use serde::Serialize;

use crate::ModelArgs;
use crate::bench_serve::argv;
use crate::run::median;

type Result<T> = anyhow::Result<T>;

/// What `tune` was asked.
pub(crate) struct TuneOptions {
    /// The model and how it runs (backend, device, ONNX Runtime, the options tune leaves alone).
    pub(crate) model: ModelArgs,
    /// The frame size to tune for.
    pub(crate) size: (u32, u32),
    /// Timed frames per candidate, in each of the synchronous and the pipelined run.
    pub(crate) frames: usize,
    /// Untimed frames per candidate first.
    pub(crate) warmup: usize,
    /// The cache file (else the default place).
    pub(crate) cache: Option<PathBuf>,
    /// Print the report as JSON.
    pub(crate) json: bool,
    /// Also write the report as JSON to this file.
    pub(crate) json_file: Option<PathBuf>,
}

/// What `tune` measured and did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TuneReport {
    /// This process's arguments, as given.
    argv: Vec<String>,
    /// Model file.
    model: String,
    /// Frame size tuned for.
    input_size: (u32, u32),
    /// Output size.
    output_size: (u32, u32),
    /// Backend and devices (of the first context, built with the defaults).
    backend: BackendReport,
    /// What the entry holds for.
    key: TuneKey,
    /// Timed frames per candidate, in each of the synchronous and the pipelined run.
    frames: usize,
    /// Untimed frames per candidate first (at least two per slot).
    warmup: usize,
    /// Ring slots.
    slots: usize,
    /// Every candidate, in the order measured.
    candidates: Vec<Candidate>,
    /// The winner's position in `candidates` (absent: none ran).
    chosen: Option<usize>,
    /// The cache file.
    cache: String,
    /// Whether the entry was written to it.
    written: bool,
    /// Whether it replaced an earlier entry for the same key.
    replaced: bool,
    /// What the candidates are on this backend.
    note: String,
}

/// Runs `tune` and prints its report. Fails when no candidate ran (after printing them all).
pub(crate) fn run(opts: TuneOptions) -> Result<()> {
    refuse_chosen_options(&opts.model);
    let (w, h) = opts.size;
    neural_frame::image_io::check_picture_size(w, h).with_context(|| format!("--size {w}x{h}"))?;
    opts.model.check_model()?;
    let cache_path = opts.cache.clone().or_else(TuneCache::default_path).context(
        "no place for the tune cache: none of NEURAL_FRAME_TUNE_CACHE, XDG_CACHE_HOME or HOME is set; pass --cache PATH",
    )?;
    // Before minutes of measuring: a cache that cannot be read fails now; a corrupt one is
    // replaced when the result is written (with a warning).
    check_cache(&cache_path)?;
    if let Some(dir) = cache_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            format!("the tune cache {} cannot be written: creating its directory failed", cache_path.display())
        })?;
    }
    let show = Progress::new(opts.json);

    // A context with the defaults: the backend, the devices and the key.
    show.line(format_args!("building a context with the defaults ({w}×{h})"));
    let probe = opts.model.context(w, h)?;
    let cuda = probe.backend_name() == "cuda";
    let backend = probe.report().clone();
    let key = TuneKey::for_context(&probe, &opts.model.model)
        .with_context(|| format!("hashing {}", opts.model.model.display()))?;
    let (slots, output_size) = (probe.slot_count(), probe.output_size());
    drop(probe);
    let note = if cuda {
        "CUDA backend: the kernels (NHWC with the bias fused or apart, NCHW) with CUDA graphs on and off, one with \
         the Vulkan passes for the record, then the winner's post wait (gpu, host) and spin wait (off, on)"
    } else {
        "CPU backend: the CUDA options (NHWC kernels, fused bias, CUDA graphs, CUDA passes, post wait) are not in \
         effect there; spin wait off and on are measured, and the entry is kept for the CPU backend only"
    };
    show.line(format_args!("{note}"));

    let pictures = patterns(w, h);
    let first = tune::first_round(cuda);
    let expected = first.len() + first.first().map_or(0, |best| tune::second_round(cuda, best).len());
    let mut candidates = Vec::new();
    for options in first {
        candidates.push(measure(&opts, options, &pictures, (candidates.len() + 1, expected), cuda, &show));
    }
    if let Some(best) = tune::choose(&candidates) {
        for options in tune::second_round(cuda, &candidates[best].options) {
            if candidates.iter().all(|c| c.options != options) {
                candidates.push(measure(&opts, options, &pictures, (candidates.len() + 1, expected), cuda, &show));
            }
        }
    }

    let chosen = tune::choose(&candidates);
    let warmup = warmup_frames(opts.warmup, slots);
    let entry = TuneEntry::from_candidates(key.clone(), candidates.clone(), opts.frames, warmup);
    // Read again, changed and written under the cache's lock: another tune may have added
    // entries meanwhile, or be writing now. A failure is reported after the measurements are,
    // so that they are not lost.
    let saved = entry
        .map(|entry| -> Result<bool> { Ok(TuneCache::update(&cache_path, |cache| cache.insert(entry).is_some())?) });
    let (written, replaced) = match &saved {
        Some(Ok(replaced)) => (true, *replaced),
        _ => (false, false),
    };
    let report = TuneReport {
        argv: argv(),
        model: opts.model.model.display().to_string(),
        input_size: (w, h),
        output_size,
        backend,
        key,
        frames: opts.frames,
        warmup,
        slots,
        candidates,
        chosen,
        cache: cache_path.display().to_string(),
        written,
        replaced,
        note: note.to_string(),
    };
    crate::emit(&report, opts.json, opts.json_file.as_deref(), || render(&report))?;
    match saved {
        Some(saved) => saved.map(|_| ()),
        None => anyhow::bail!(
            "no candidate ran, so nothing was written to {} (each candidate's error is above)",
            cache_path.display()
        ),
    }
}

/// The options tune chooses itself cannot be given, nor tiles (it measures whole frames):
/// a usage error, as clap reports one (exit code 2).
fn refuse_chosen_options(m: &ModelArgs) {
    let mut given = Vec::new();
    for (named, flag) in [
        (m.cuda.prefer_nhwc.is_some(), "--prefer-nhwc"),
        (m.cuda.fuse_conv_bias.is_some(), "--fuse-conv-bias"),
        (m.cuda.cuda_graph.is_some(), "--cuda-graph"),
        (m.cuda.passes.is_some(), "--passes"),
        (m.cuda.post_wait.is_some(), "--post-wait"),
        (m.spin_wait, "--spin-wait"),
    ] {
        if named {
            given.push(flag);
        }
    }
    let message = if !given.is_empty() {
        format!(
            "tune measures --prefer-nhwc, --fuse-conv-bias, --cuda-graph, --passes, --post-wait and --spin-wait \
             itself; leave out {}",
            given.join(", ")
        )
    } else if m.tile.is_some() || m.memory_budget.is_some() {
        "tune measures whole frames; leave out --tile and --memory-budget".to_string()
    } else {
        return;
    };
    use clap::CommandFactory;
    crate::Cli::command().error(clap::error::ErrorKind::ArgumentConflict, message).exit()
}

/// Whether the cache at `path` can be read and replaced: a corrupt one can (its file is
/// replaced), a path that is not a regular file or cannot be read cannot.
fn check_cache(path: &Path) -> Result<()> {
    match TuneCache::load(path) {
        Err(neural_frame::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::InvalidData => Ok(()),
        loaded => loaded.map(drop).map_err(Into::into),
    }
}

/// Warm-up frames for `warmup` asked and `slots` slots: two a slot at least
/// (CUDA graphs are captured from a slot's second run).
fn warmup_frames(warmup: usize, slots: usize) -> usize {
    warmup.max(2 * slots)
}

/// One candidate: its own context with `options` forced, warmed up, timed one
/// frame at a time and then with the ring full.
fn measure(
    opts: &TuneOptions,
    options: TunedOptions,
    pictures: &[Vec<u8>],
    (n, of): (usize, usize),
    cuda: bool,
    show: &Progress,
) -> Candidate {
    show.line(format_args!("[{n}/{of}] {}", label(&options, cuda)));
    let (w, h) = opts.size;
    let mut ctx = match options.apply_to(opts.model.builder(w, h)).build() {
        Ok(ctx) => ctx,
        Err(e) => {
            show.line(format_args!("[{n}/{of}] failed to build: {e}"));
            return Candidate::failed(options, None, e);
        }
    };
    // Fast start: each candidate is timed on its own session (the fused one where it fuses).
    match ctx.wait_settled(std::time::Duration::from_secs(300)) {
        Ok(true) => {}
        Ok(false) => return Candidate::failed(options, None, "the fused session was not ready within 300 s"),
        Err(e) => return Candidate::failed(options, None, e),
    }
    let in_effect = TunedOptions::in_effect(&ctx.tuning());
    let warmup = warmup_frames(opts.warmup, ctx.slot_count());
    let bar = show.bar(warmup + 2 * opts.frames);
    let timed = time(&mut ctx, pictures, opts.frames, warmup, &bar);
    bar.finish_and_clear();
    match timed {
        Ok((sync_ms, fps)) => {
            show.line(format_args!("[{n}/{of}] sync median {sync_ms:.3} ms, pipelined {fps:.1} frames/s"));
            Candidate::measured(options, in_effect, sync_ms, fps)
        }
        Err(e) => {
            show.line(format_args!("[{n}/{of}] failed: {e:#}"));
            Candidate::failed(options, Some(in_effect), format!("{e:#}"))
        }
    }
}

/// Warm-up, then the synchronous median (ms) and the pipelined throughput (frames/s).
fn time(
    ctx: &mut NeuralFrameContext,
    pictures: &[Vec<u8>],
    frames: usize,
    warmup: usize,
    bar: &indicatif::ProgressBar,
) -> Result<(f64, f64)> {
    let mut inputs = Vec::with_capacity(pictures.len());
    for pixels in pictures {
        let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).context("creating an input image")?;
        ctx.upload(input, pixels).context("uploading the pattern")?;
        inputs.push(input);
    }
    // One output more than slots: a frame never writes the image a frame in flight writes.
    let outputs = (0..=ctx.slot_count())
        .map(|_| ctx.create_output_image(vk::Format::R8G8B8A8_UNORM))
        .collect::<neural_frame::Result<Vec<_>>>()
        .context("creating the output images")?;
    bar.set_message("warm-up");
    pipelined(ctx, &inputs, &outputs, warmup, bar).context("warming up")?;
    bar.set_message("sync");
    let mut sync = Vec::with_capacity(frames);
    for i in 0..frames {
        let t = Instant::now();
        ctx.infer(inputs[i % inputs.len()], outputs[0]).context("a synchronous frame")?;
        sync.push(t.elapsed().as_secs_f64() * 1e3);
        bar.inc(1);
    }
    bar.set_message("pipelined");
    let t = Instant::now();
    pipelined(ctx, &inputs, &outputs, frames, bar).context("the pipelined frames")?;
    let fps = frames as f64 / t.elapsed().as_secs_f64();
    Ok((median(&mut sync), fps))
}

/// `frames` frames through the ring, kept full: each submit past the slot count
/// first retires the oldest frame.
fn pipelined(
    ctx: &mut NeuralFrameContext,
    inputs: &[InputId],
    outputs: &[OutputId],
    frames: usize,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let mut pending = VecDeque::new();
    for i in 0..frames {
        if pending.len() == ctx.slot_count()
            && let Some(ticket) = pending.pop_front()
        {
            ctx.wait(&ticket)?;
            bar.inc(1);
        }
        match ctx.submit(Frame::new(inputs[i % inputs.len()], outputs[i % outputs.len()]))? {
            Submitted::Frame(ticket) => pending.push_back(ticket),
            Submitted::Skipped => anyhow::bail!("a blocking ring skipped a frame"),
        }
    }
    for ticket in pending {
        ctx.wait(&ticket)?;
        bar.inc(1);
    }
    Ok(())
}

/// Four RGBA8 pictures of `w`×`h` that differ (R = x, G = y, B = x ^ y, shifted per
/// picture), so that frames are neither constant nor all alike.
fn patterns(w: u32, h: u32) -> Vec<Vec<u8>> {
    (0..4u32)
        .map(|k| {
            let mut pixels = Vec::with_capacity(w as usize * h as usize * 4);
            for y in 0..h {
                for x in 0..w {
                    let (x, y) = (x.wrapping_add(k * 37), y.wrapping_add(k * 59));
                    pixels.extend_from_slice(&[x as u8, y as u8, (x ^ y) as u8, 255]);
                }
            }
            pixels
        })
        .collect()
}

/// A candidate as words: all its options on CUDA, only spin wait elsewhere (the others are not in effect).
fn label(o: &TunedOptions, cuda: bool) -> String {
    if cuda {
        o.to_string()
    } else {
        format!("spin wait {}; the CUDA options off", if o.spin_wait { "on" } else { "off" })
    }
}

/// Progress on stderr: a line per step (not with `--quiet`), and a bar of a
/// candidate's frames on a terminal (not with `--json`).
struct Progress {
    lines: bool,
    bars: bool,
}

impl Progress {
    fn new(json: bool) -> Self {
        // `--quiet` leaves the logger at errors only.
        Self { lines: log::max_level() >= log::LevelFilter::Warn, bars: !json }
    }

    fn line(&self, text: std::fmt::Arguments<'_>) {
        if self.lines {
            eprintln!("neural-frame tune: {text}");
        }
    }

    fn bar(&self, len: usize) -> indicatif::ProgressBar {
        if !(self.lines && self.bars) {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new(len as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:>10} {bar:40} {pos}/{len}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    }
}

/// The report as a table.
fn render(r: &TuneReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let d = &r.backend.vulkan_device;
    let _ = writeln!(
        s,
        "{} at {}×{} → {}×{} on the {} backend: {}, driver {}, ONNX Runtime {}",
        r.model,
        r.input_size.0,
        r.input_size.1,
        r.output_size.0,
        r.output_size.1,
        r.backend.backend,
        r.backend.cuda_device.as_deref().unwrap_or(&d.to_string()),
        r.key.driver,
        r.key.runtime_version
    );
    let _ = writeln!(
        s,
        "{} timed frames per candidate one at a time and as many with the ring full ({} slots), after {} warm-up frames",
        r.frames, r.slots, r.warmup
    );
    let _ = writeln!(s, "{}", r.note);
    let _ = writeln!(
        s,
        "{:>3}  {:<7} {:<6} {:<6} {:<7} {:<9} {:<5} {:>14} {:>18}",
        "#", "kernels", "bias", "graphs", "passes", "post wait", "spin", "sync median ms", "pipelined frames/s"
    );
    let on = |b: bool| if b { "on" } else { "off" };
    // Off CUDA the CUDA options are not in effect: their columns say nothing.
    let cuda = |text: &'static str| if r.backend.backend == "cuda" { text } else { "—" };
    for (i, c) in r.candidates.iter().enumerate() {
        let (o, p, h) = (&c.options, &c.options.cuda.provider, &c.options.cuda.handover);
        let number = |v: Option<f64>, digits: usize| v.map_or("—".to_string(), |v| format!("{v:.digits$}"));
        let mark = if r.chosen == Some(i) { "  ← chosen" } else { "" };
        let _ = writeln!(
            s,
            "{:>3}  {:<7} {:<6} {:<6} {:<7} {:<9} {:<5} {:>14} {:>18}{mark}",
            i + 1,
            cuda(if p.prefer_nhwc { "NHWC" } else { "NCHW" }),
            cuda(if p.fuse_conv_bias { "fused" } else { "apart" }),
            cuda(on(p.cuda_graph)),
            cuda(if h.cuda_passes { "CUDA" } else { "Vulkan" }),
            cuda(if h.post_wait == PostWait::Host { "host" } else { "gpu" }),
            on(o.spin_wait),
            number(c.sync_median_ms, 3),
            number(c.pipelined_fps, 1),
        );
        if let Some(e) = &c.error {
            let _ = writeln!(s, "     failed: {}", e.replace('\n', "\n             "));
        }
        if let Some(in_effect) = &c.in_effect {
            let off = o.differences(in_effect);
            if !off.is_empty() {
                let _ = writeln!(s, "     not in effect: {}", off.join(", "));
            }
        }
    }
    match (r.chosen, r.written) {
        (Some(i), true) => {
            let cuda = r.backend.backend == "cuda";
            let _ = writeln!(s, "chosen: #{} ({})", i + 1, label(&r.candidates[i].options, cuda));
            let _ = writeln!(
                s,
                "{} {}, for {}",
                if r.replaced { "replaced the entry in" } else { "written to" },
                r.cache,
                r.key
            );
        }
        (Some(_), false) => {
            let _ = writeln!(s, "nothing written to {}: writing it failed (below)", r.cache);
        }
        (None, _) => {
            let _ = writeln!(s, "no candidate ran: nothing written to {}", r.cache);
        }
    }
    s
}
