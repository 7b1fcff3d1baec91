//! `neural-frame run`: a picture through the pipeline, as a renderer's frame
//! would go, and the result to a PNG.

use std::path::PathBuf;

use anyhow::Context as _;
use ash::vk;
use neural_frame::image_io::{self, PngOutput, Rgba8};
use neural_frame::{Frame, ModelContract, ScaleSource, Submitted};

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

/// An `--input` or `--output`: `PATH`, or `NAME=PATH` for a model tensor by name.
#[derive(Debug, Clone)]
pub(crate) struct Named {
    pub(crate) name: Option<String>,
    pub(crate) path: PathBuf,
}

/// `PATH` or `NAME=PATH` (a path that exists as given is a path, even with an `=`).
pub(crate) fn parse_named(s: &str) -> Result<Named, String> {
    if s.is_empty() {
        return Err("an empty path".into());
    }
    match s.split_once('=') {
        Some((name, path)) if !std::path::Path::new(s).exists() => {
            if name.is_empty() || path.is_empty() {
                return Err(format!("`{s}` is not PATH or NAME=PATH"));
            }
            Ok(Named { name: Some(name.to_string()), path: PathBuf::from(path) })
        }
        _ => Ok(Named { name: None, path: PathBuf::from(s) }),
    }
}

/// The one unnamed entry of `v` (the frame's), or an error when there are several.
fn unnamed(v: &[Named], flag: &str) -> anyhow::Result<Option<PathBuf>> {
    let mut plain = v.iter().filter(|n| n.name.is_none());
    let first = plain.next().map(|n| n.path.clone());
    if plain.next().is_some() {
        anyhow::bail!("{flag} PATH is given more than once; name the model's other tensors: {flag} NAME=PATH");
    }
    Ok(first)
}

pub(crate) fn run_model(
    args: &ModelArgs,
    inputs: Vec<Named>,
    outputs: Vec<Named>,
    size: Option<(u32, u32)>,
    frames: usize,
    json: bool,
) -> anyhow::Result<()> {
    // Everything that can be checked cheaply is, before any work: the output
    // paths (their temporary files are created now and written at the end), the
    // size against the host budget, the model file, then the device's limits
    // when the context is built, before the pictures are resized.
    let output = unnamed(&outputs, "--output")?.unwrap_or_else(|| PathBuf::from("upscaled.png"));
    let output = output.as_path();
    let out_file = PngOutput::create(output).context("checking --output")?;
    let mut named_out = Vec::new();
    for n in outputs.iter().filter(|n| n.name.is_some()) {
        let file = PngOutput::create(&n.path).with_context(|| format!("checking --output {}", n.path.display()))?;
        named_out.push((n.name.clone().unwrap_or_default(), n.path.clone(), file));
    }
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
    let plain_input = unnamed(&inputs, "--input")?;
    let named_in: Vec<(String, PathBuf)> =
        inputs.iter().filter_map(|n| n.name.clone().map(|name| (name, n.path.clone()))).collect();
    let input = plain_input.clone().unwrap_or_else(|| {
        named_in
            .first()
            .map(|n| n.1.clone())
            .filter(|_| inputs.iter().all(|n| n.name.is_some()))
            .unwrap_or_else(default_input)
    });
    let picture = Rgba8::load(&input)?;
    let mut extra_pictures = Vec::new();
    for (name, path) in &named_in {
        let p = Rgba8::load(path).with_context(|| format!("--input {name}={}", path.display()))?;
        if size.is_none() && (p.width, p.height) != (picture.width, picture.height) {
            anyhow::bail!(
                "input sizes disagree: {} is {}×{} but {} is {}×{}; give pictures of one size, or --size WxH to resize \
                 them all",
                path.display(),
                p.width,
                p.height,
                input.display(),
                picture.width,
                picture.height
            );
        }
        extra_pictures.push((name.clone(), path.clone(), p));
    }
    let (width, height) = size.unwrap_or((picture.width, picture.height));
    let t = std::time::Instant::now();
    let mut ctx = args.context(width, height)?;
    let setup_ms = t.elapsed().as_secs_f64() * 1e3;
    let contract = ctx.contract().clone();
    // The frame's picture: the unnamed --input, else the one named like the model's frame input.
    let (input, picture) = match (plain_input, extra_pictures.iter().position(|(n, ..)| *n == contract.input_name)) {
        (Some(_), Some(_)) => anyhow::bail!(
            "--input {} is the model's frame input, which --input PATH gives already",
            contract.input_name
        ),
        (None, Some(k)) => {
            let (_, path, p) = extra_pictures.remove(k);
            (path, p)
        }
        (None, None) if !extra_pictures.is_empty() => anyhow::bail!(
            "no picture for the model's frame input `{}`: give --input PATH or --input {}=PATH",
            contract.input_name,
            contract.input_name
        ),
        (_, None) => (input, picture),
    };
    for (name, ..) in &extra_pictures {
        if contract.extra_input(name).is_none() {
            anyhow::bail!(
                "--input {name}=…: the model has no input `{name}`; its inputs are {}",
                contract.describe_inputs()
            );
        }
    }
    let missing: Vec<String> = contract
        .extra_inputs
        .iter()
        .filter(|t| !extra_pictures.iter().any(|(n, ..)| *n == t.name))
        .map(|t| format!("--input {}=PATH ({})", t.name, t.kind.describe()))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!("the model takes more inputs than the frame: give {}", missing.join(", "));
    }
    for (name, ..) in &named_out {
        if contract.extra_output(name).is_none() && *name != contract.output_name {
            anyhow::bail!(
                "--output {name}=…: the model has no output `{name}`; its outputs are {}",
                contract.describe_outputs()
            );
        }
    }
    let resize = |p: Rgba8| if size.is_some() { p.resized(width, height) } else { Ok(p) };
    let picture = resize(picture)?;
    let extra_pictures =
        extra_pictures.into_iter().map(|(n, path, p)| Ok((n, path, resize(p)?))).collect::<anyhow::Result<Vec<_>>>()?;
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
    let mut frame = Frame::new(in_image, out_image);
    for (name, _, p) in &extra_pictures {
        let image = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
        ctx.upload(image, &p.pixels)?;
        frame = frame.with_input(name.clone(), image);
    }
    // The frame's output (by its name too), and the extra outputs asked for.
    let mut extra_out = Vec::new();
    let mut out_file = Some(out_file);
    let plain_output = unnamed(&outputs, "--output")?;
    for (name, path, file) in named_out {
        if name == contract.output_name {
            if plain_output.is_some() {
                anyhow::bail!(
                    "the model's frame output `{name}` is given twice: by --output PATH and by --output {name}=PATH"
                );
            }
            log::info!("the model's output `{name}` goes to {}", path.display());
            out_file = Some(file);
            continue;
        }
        let image = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
        frame = frame.with_output(name.clone(), image);
        log::info!("the model's output `{name}` goes to {}", path.display());
        extra_out.push((image, file));
    }
    if !named_out_has_frame(&outputs, &contract.output_name) {
        log::info!(
            "--output {} takes the model's output `{}` ({}), its first image output",
            output.display(),
            contract.output_name,
            contract.output.describe()
        );
    }
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
        let times = match ctx.submit(frame.clone()).with_context(|| what.clone())? {
            Submitted::Frame(ticket) => ctx.wait(&ticket).with_context(|| what.clone())?,
            Submitted::Skipped => anyhow::bail!("a blocking submission was skipped"),
        };
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
    for (image, file) in extra_out {
        file.write(&Rgba8 { width: ow, height: oh, pixels: ctx.readback(image)? })?;
    }
    if let Some(file) = out_file {
        file.write(&Rgba8 { width: ow, height: oh, pixels: result })?;
    }
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

fn named_out_has_frame(outputs: &[Named], name: &str) -> bool {
    outputs.iter().any(|n| n.name.as_deref() == Some(name))
}
