//! `neural-frame run`: a picture through the pipeline, as a renderer's frame
//! would go, and the result to a PNG.

use std::path::PathBuf;

use anyhow::Context as _;
use ash::vk;
use neural_frame::image_io::{self, PngOutput, Rgba8};
use neural_frame::{ModelContract, ScaleSource};

use crate::{ModelArgs, default_input};

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The peak resident set size of this process (`VmHWM` in `/proc/self/status`), in MiB.
fn max_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: f64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib / 1024.0)
}

/// What `run` was doing when a frame failed; where the model's scale is only
/// its metadata's word, the metadata is the first suspect.
fn frame_context(c: &ModelContract) -> String {
    match c.scale_source {
        ScaleSource::Metadata => format!(
            "running the frame (the model's `scale` metadata says {}; check it against the model's real output \
             size: a wrong `scale` makes the output tensor's shape differ from the one bound)",
            c.scale
        ),
        ScaleSource::Probe => format!(
            "running the frame (the model's scale, {}, came from a probe run at {}×{}: a model whose scale \
             depends on the frame size needs a `scale` metadata entry)",
            c.scale,
            neural_frame::PROBE_SIZE.0,
            neural_frame::PROBE_SIZE.1
        ),
        _ => "running the frame".into(),
    }
}

pub(crate) fn run_model(
    args: &ModelArgs,
    input: Option<PathBuf>,
    output: &std::path::Path,
    size: Option<(u32, u32)>,
    frames: usize,
    json: bool,
) -> anyhow::Result<()> {
    // Everything that can be checked cheaply is, before any work: the output
    // path (its temporary file is created now and written at the end), the
    // size against the host budget, the model file, then the device's limits
    // when the context is built, before the picture is resized.
    let out_file = PngOutput::create(output).context("checking --output")?;
    for stale in out_file.stale() {
        match &stale.removed {
            Ok(()) => eprintln!(
                "neural-frame: removed {}, left by process {} (no longer running)",
                stale.path.display(),
                stale.pid
            ),
            Err(e) => eprintln!(
                "neural-frame: warning: could not remove {}, left by process {} (no longer running): {e}",
                stale.path.display(),
                stale.pid
            ),
        }
    }
    if let Some((w, h)) = size {
        image_io::check_picture_size(w, h).with_context(|| format!("--size {w}x{h}"))?;
    }
    args.check_model()?;
    let input = input.unwrap_or_else(default_input);
    let picture = Rgba8::load(&input)?;
    let (width, height) = size.unwrap_or((picture.width, picture.height));
    let t = std::time::Instant::now();
    let mut ctx = args.context(width, height)?;
    let setup_ms = t.elapsed().as_secs_f64() * 1e3;
    let picture = if size.is_some() { picture.resized(width, height)? } else { picture };
    let report = ctx.report().clone();
    if !json {
        let fallback =
            if report.fallback_reason.is_some() { " (automatic fallback, see the warning above)" } else { "" };
        eprintln!("backend: {}{fallback}", report.backend);
        eprintln!("Vulkan device: {}", report.vulkan_device);
        if let Some(c) = &report.cuda_device {
            eprintln!("CUDA device:   {c} (paired by UUID)");
        }
        eprintln!(
            "ONNX Runtime {} ({}), providers: {}",
            report.runtime.version,
            report.runtime.library.display(),
            report.runtime.providers.join(", ")
        );
        let c = ctx.contract();
        eprintln!(
            "model: {} — {} `{}` → {} `{}`, {} (scale from {:?})",
            args.model.display(),
            c.input.describe(),
            c.input_name,
            c.output.describe(),
            c.output_name,
            c.scale,
            c.scale_source
        );
    }
    let in_image = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    let out_image = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    let (ow, oh) = ctx.output_size();
    let what = frame_context(ctx.contract());
    // Per frame: upload, pre, infer, post, readback (ms). Grown as frames run, never reserved by the count.
    let mut stages: Vec<[f64; 5]> = Vec::new();
    let mut result = Vec::new();
    let mut first_frame_ms = 0.0;
    let progress = (frames > 1 && !json).then(|| {
        let bar = indicatif::ProgressBar::new(frames as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} frames, {per_sec}, eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    for i in 0..frames {
        let t = std::time::Instant::now();
        ctx.upload(in_image, &picture.pixels)?;
        let upload = t.elapsed().as_secs_f64() * 1e3;
        let times = ctx.infer(in_image, out_image).with_context(|| what.clone())?;
        let t = std::time::Instant::now();
        result = ctx.readback(out_image)?;
        let readback = t.elapsed().as_secs_f64() * 1e3;
        if i == 0 {
            first_frame_ms = setup_ms + upload + times.pre_ms + times.infer_ms + times.post_ms + readback;
        }
        stages.push([upload, times.pre_ms, times.infer_ms, times.post_ms, readback]);
        if let Some(p) = &progress {
            p.inc(1);
        }
    }
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    out_file.write(&Rgba8 { width: ow, height: oh, pixels: result })?;
    let pick = |k: usize| {
        let mut v: Vec<f64> = stages.iter().skip(usize::from(stages.len() > 1)).map(|s| s[k]).collect();
        median(&mut v)
    };
    let summary = serde_json::json!({
        "input": input.display().to_string(),
        "output": output.display().to_string(),
        "input_size": [picture.width, picture.height],
        "output_size": [ow, oh],
        "frames": frames,
        "backend": report,
        "setup_ms": setup_ms,
        "time_to_first_frame_ms": first_frame_ms,
        "median_ms": {
            "upload": pick(0),
            "pre": pick(1),
            "infer": pick(2),
            "post": pick(3),
            "readback": pick(4),
        },
        "max_rss_mib": max_rss_mib(),
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let m = &summary["median_ms"];
        let f = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{} {}×{} → {} {}×{} ({} backend)",
            input.display(),
            picture.width,
            picture.height,
            output.display(),
            ow,
            oh,
            report.backend
        );
        println!(
            "median ms over {} frame(s){}: upload {:.3} | pre {:.3} | infer {:.3} | post {:.3} | readback {:.3}",
            frames,
            if frames > 1 { " (first excluded)" } else { "" },
            f("upload"),
            f("pre"),
            f("infer"),
            f("post"),
            f("readback")
        );
        println!("set-up {setup_ms:.1} ms, time to first frame {first_frame_ms:.1} ms");
    }
    Ok(())
}
