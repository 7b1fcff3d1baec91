//! `neural-frame run`: a picture through the pipeline, as a renderer's frame
//! would go, and the result to a PNG.

use std::path::{Path, PathBuf};

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

/// What `run` was doing when a frame failed. Where ONNX Runtime failed the run
/// (the error's kind) and the model's scale is only its metadata's word, the
/// metadata is the first suspect; any other failure (an argument, the device) is
/// named as it is.
fn frame_context(c: &ModelContract, e: &neural_frame::Error) -> String {
    if e.kind() != neural_frame::ErrorKind::OnnxRuntime {
        return "running the frame".into();
    }
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

/// Refuses a model input given twice (`--input albedo=a.png --input albedo=b.png`),
/// before any work: each model input takes one picture.
fn check_named_inputs(inputs: &[Named]) -> anyhow::Result<()> {
    for (j, b) in inputs.iter().enumerate() {
        let Some(name) = &b.name else { continue };
        if let Some(a) = inputs[..j].iter().find(|a| a.name.as_ref() == Some(name)) {
            anyhow::bail!(
                "--input {name}=… is given twice ({} and {}): each model input takes one picture; keep one of them",
                a.path.display(),
                b.path.display()
            );
        }
    }
    Ok(())
}

/// `-`: standard input or output.
fn is_std(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// What identifies an output path: two paths with the same key are one file.
#[derive(PartialEq, Eq)]
enum PathKey {
    Std,
    Inode(u64, u64),
    Path(PathBuf),
}

fn path_key(p: &Path) -> PathKey {
    use std::os::unix::fs::MetadataExt as _;
    if is_std(p) {
        return PathKey::Std;
    }
    if let Ok(m) = std::fs::metadata(p) {
        return PathKey::Inode(m.dev(), m.ino());
    }
    // Not there yet: its directory, resolved, and its name.
    let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let parent = std::fs::canonicalize(parent).or_else(|_| std::path::absolute(parent)).unwrap_or(parent.into());
    PathKey::Path(parent.join(p.file_name().unwrap_or_default()))
}

/// How `--output NAME=PATH` or `--output PATH` is written on the command line.
fn flag(n: &Named) -> String {
    match &n.name {
        Some(name) => format!("--output {name}={}", n.path.display()),
        None => format!("--output {}", n.path.display()),
    }
}

/// Refuses one path given for two outputs (or `-` twice): the second would overwrite the first.
fn check_distinct(outputs: &[Named]) -> anyhow::Result<()> {
    let keys: Vec<PathKey> = outputs.iter().map(|n| path_key(&n.path)).collect();
    for (j, b) in outputs.iter().enumerate() {
        if let Some(a) = (0..j).find(|&i| keys[i] == keys[j]).map(|i| &outputs[i]) {
            let what = if is_std(&b.path) { "standard output (`-`)".to_string() } else { "one file".to_string() };
            anyhow::bail!(
                "{} and {} are {what}: each output needs a path of its own, or one would overwrite the other",
                flag(a),
                flag(b)
            );
        }
    }
    Ok(())
}

/// Opens an output (`-`: standard output), and says on stderr when it is a stream.
fn open_output(n: &Named, quiet: bool) -> anyhow::Result<PngOutput> {
    let file = if is_std(&n.path) { PngOutput::stdout() } else { PngOutput::create(&n.path) }
        .with_context(|| format!("checking {}", flag(n)))?;
    if let Some(what) = file.stream()
        && !quiet
    {
        eprintln!(
            "neural-frame: {} is {what}: the PNG is written to it directly, as a stream (no temporary file and \
             rename){}",
            flag(n),
            if what == "a FIFO" { "; the write waits for a reader" } else { "" }
        );
    }
    Ok(file)
}

/// Reads an input picture; `-` is standard input, a FIFO is read as a stream.
fn load_input(path: &Path) -> anyhow::Result<Rgba8> {
    if !is_std(path) {
        return Ok(Rgba8::load(path)?);
    }
    use std::io::IsTerminal as _;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        anyhow::bail!(
            "--input -: standard input is a terminal; pipe a PNG or JPEG into it (`< in.png`, `cat in.png |`) or \
             give a file path"
        );
    }
    Ok(Rgba8::read(stdin.lock(), "standard input")?)
}

pub(crate) fn run_model(
    args: &ModelArgs,
    inputs: Vec<Named>,
    outputs: Vec<Named>,
    size: Option<(u32, u32)>,
    frames: usize,
    json: bool,
    quiet: bool,
) -> anyhow::Result<()> {
    // Everything that can be checked cheaply is, before any work: the output
    // paths (their temporary files are created now and written at the end), the
    // size against the host budget, the model file, then the device's limits
    // when the context is built, before the pictures are resized.
    if inputs.iter().filter(|n| is_std(&n.path)).count() > 1 {
        anyhow::bail!("--input - is given more than once: standard input can be read once; give the others as files");
    }
    check_named_inputs(&inputs)?;
    check_distinct(&outputs)?;
    let plain = unnamed(&outputs, "--output")?;
    let default_output = Named { name: None, path: PathBuf::from("upscaled.png") };
    let out_named = outputs.iter().find(|n| n.name.is_none()).cloned().unwrap_or_else(|| default_output.clone());
    let output = out_named.path.as_path();
    // The default path is not opened when a named output has it: that one may be the frame's (checked below).
    let default_taken = plain.is_none() && outputs.iter().any(|n| path_key(&n.path) == path_key(&out_named.path));
    let mut out_file = if default_taken { None } else { Some(open_output(&out_named, quiet)?) };
    let mut named_out = Vec::new();
    for n in outputs.iter().filter(|n| n.name.is_some()) {
        named_out.push((n.name.clone().unwrap_or_default(), n.path.clone(), open_output(n, quiet)?));
    }
    // Where the summary goes: stdout, unless the picture does.
    let to_stdout = !outputs.iter().any(|n| is_std(&n.path));
    let print = |line: String| if to_stdout { println!("{line}") } else { eprintln!("{line}") };
    for stale in out_file.iter().chain(named_out.iter().map(|n| &n.2)).flat_map(PngOutput::stale) {
        match &stale.removed {
            Ok(()) if quiet => {}
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
    let picture = load_input(&input)?;
    let mut extra_pictures = Vec::new();
    for (name, path) in &named_in {
        // The first named input is `input` when none is plain: read once (standard input can be read once).
        let p = if plain_input.is_none() && *path == input {
            picture.clone()
        } else {
            load_input(path).with_context(|| format!("--input {name}={}", path.display()))?
        };
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
    // A name the model does not have is the first thing wrong with the command line.
    for (name, ..) in &extra_pictures {
        if *name != contract.input_name && contract.extra_input(name).is_none() {
            anyhow::bail!(
                "--input {name}=…: the model has no input `{name}`; its inputs are {}",
                contract.describe_inputs()
            );
        }
    }
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
    if !json && !quiet {
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
        let p = ctx.precision();
        eprintln!("precision: {} ({})", p.running, p.reason);
        if !p.rewrites.is_empty() {
            eprintln!("graph rewrites: {}", p.rewrites.join("; "));
        }
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
    let mut output = output.to_path_buf();
    if plain.is_none() && !named_out_has_frame(&outputs, &contract.output_name) {
        // The frame's output goes to the default path: no other output may go there.
        if let Some(n) = outputs.iter().find(|n| path_key(&n.path) == path_key(&output)) {
            anyhow::bail!(
                "{} is also where the frame's output goes by default ({}): give the frame's output a path of its \
                 own with --output PATH, or the other output another path",
                flag(n),
                output.display()
            );
        }
    }
    for (name, path, file) in named_out {
        if name == contract.output_name {
            output = path.clone();
            if plain.is_some() {
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
    let framed = |e: neural_frame::Error| {
        let what = frame_context(&contract, &e);
        anyhow::Error::new(e).context(what)
    };
    // Per frame: upload, pre, infer, post, readback (ms). Grown as frames run, never reserved by the count.
    let mut stages: Vec<[f64; 5]> = Vec::new();
    let mut result = Vec::new();
    let mut first_frame_ms = 0.0;
    let progress = (frames > 1 && !json && !quiet).then(|| {
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
        let times = match ctx.submit(frame.clone()).map_err(framed)? {
            Submitted::Frame(ticket) => ctx.wait(&ticket).map_err(framed)?,
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
        print(serde_json::to_string_pretty(&summary)?);
    } else if !quiet {
        let m = &summary["median_ms"];
        let f = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
        let shown = |p: &Path, std: &str| if is_std(p) { std.to_string() } else { p.display().to_string() };
        print(format!(
            "{} {}×{} → {} {}×{} ({} backend)",
            shown(&input, "standard input"),
            picture.width,
            picture.height,
            shown(&output, "standard output"),
            ow,
            oh,
            report.backend
        ));
        print(format!(
            "median ms over {} frame(s){}: upload {:.3} | pre {:.3} | infer {:.3} | post {:.3} | readback {:.3}",
            frames,
            if frames > 1 { " (first excluded)" } else { "" },
            f("upload"),
            f("pre"),
            f("infer"),
            f("post"),
            f("readback")
        ));
        print(format!("set-up {setup_ms:.1} ms, time to first frame {first_frame_ms:.1} ms"));
    }
    Ok(())
}

fn named_out_has_frame(outputs: &[Named], name: &str) -> bool {
    outputs.iter().any(|n| n.name.as_deref() == Some(name))
}
