//! Where a first frame's time goes, in one process: the first context, its
//! first frames, a resize, then a second and a third context built while the
//! process is warm (what a `serve` worker pays per client), with and without
//! fast start.
//!
//! ```sh
//! cargo run --release --example first_frames -- [--model PATH] [--size WxH]
//! ```
//!
//! Defaults: `models/upscale-fp16.onnx` at 960×540. Every time is wall-clock, on
//! this thread, in milliseconds; a frame's time is `infer`'s (submit to done,
//! synchronously). Run with `NEURAL_FRAME_TRACE=1` for the library's own
//! timeline of each build.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use neural_frame::ash::vk;
use neural_frame::{InputId, NeuralFrameContext, OutputId};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A picture that is not flat: gradients and a checker, so that no run can be skipped or folded.
fn picture(width: u32, height: u32) -> Vec<u8> {
    let mut texels = Vec::with_capacity((width * height * 4) as usize);
    for y in 0..height {
        for x in 0..width {
            let checker = if (x / 7 + y / 5) % 2 == 0 { 40 } else { 0 };
            texels.extend_from_slice(&[(x * 255 / width) as u8, (y * 255 / height) as u8, checker + 100, 255]);
        }
    }
    texels
}

struct Images {
    input: InputId,
    output: OutputId,
}

fn images(ctx: &mut NeuralFrameContext) -> Result<Images, Box<dyn Error>> {
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    let (w, h) = ctx.frame_size();
    ctx.upload(input, &picture(w, h))?;
    Ok(Images { input, output })
}

/// `n` frames, each timed; returns the times.
fn frames(ctx: &mut NeuralFrameContext, im: &Images, n: usize) -> Result<Vec<f64>, Box<dyn Error>> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            ctx.infer(im.input, im.output)?;
            Ok(ms(t))
        })
        .collect()
}

fn show(what: &str, times: &[f64]) {
    let text: Vec<String> = times.iter().map(|t| format!("{t:.1}")).collect();
    println!("{what}: [{}] ms", text.join(", "));
}

fn build(model: &PathBuf, (w, h): (u32, u32), fast: bool) -> Result<(NeuralFrameContext, f64), Box<dyn Error>> {
    let t = Instant::now();
    let ctx =
        NeuralFrameContext::builder(model).frame_size(w, h).map_cuda_options(|c| c.with_fast_start(fast)).build()?;
    let build_ms = ms(t);
    let s = &ctx.report().startup;
    println!(
        "  build {build_ms:.0} ms: runtime {:.0}, vulkan {:.0}, cuda {:.0}, session {:.0}, buffers {:.0}, first run {:.0} \
         ({} backend, fast start {fast})",
        s.runtime_ms,
        s.vulkan_ms,
        s.cuda_ms,
        s.session_ms,
        s.buffers_ms,
        s.first_run_ms,
        ctx.report().backend
    );
    Ok((ctx, build_ms))
}

fn run() -> Result<(), Box<dyn Error>> {
    let mut model = PathBuf::from("models/upscale-fp16.onnx");
    let mut size = (960u32, 540u32);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = args.next().ok_or("--model needs a path")?.into(),
            "--size" => {
                let v = args.next().ok_or("--size needs WxH")?;
                let (w, h) = v.split_once('x').ok_or("--size is WxH, e.g. 960x540")?;
                size = (w.parse()?, h.parse()?);
            }
            "-h" | "--help" => {
                println!("first_frames [--model PATH] [--size WxH]");
                return Ok(());
            }
            other => return Err(format!("unknown argument `{other}` (see --help)").into()),
        }
    }
    let start = Instant::now();
    println!("first context ({}×{}):", size.0, size.1);
    let (mut a, _) = build(&model, size, true)?;
    let im = images(&mut a)?;
    let first = frames(&mut a, &im, 1)?;
    println!("  time to first frame {:.0} ms (process start to its result)", ms(start));
    show("  frames 1-5", &[first, frames(&mut a, &im, 4)?].concat());
    let t = Instant::now();
    let settled = a.wait_settled(Duration::from_secs(30))?;
    println!(
        "  fused session settled: {settled} (waited {:.0} ms; ready {:.0} ms after build)",
        ms(t),
        a.report().startup.fused_ms
    );
    show("  frames after the takeover", &frames(&mut a, &im, 5)?);
    let other = (size.0 + size.0 / 3, size.1 + size.1 / 3);
    let t = Instant::now();
    a.resize(other.0, other.1)?;
    let resize_ms = ms(t);
    let im2 = images(&mut a)?;
    let after = frames(&mut a, &im2, 5)?;
    println!("  resize to {}×{}: {resize_ms:.0} ms", other.0, other.1);
    show("  frames at the new size", &after);

    for fast in [true, false] {
        println!("another context in this process ({}×{}, fast start {fast}), the first still alive:", size.0, size.1);
        let t = Instant::now();
        let (mut b, _) = build(&model, size, fast)?;
        let imb = images(&mut b)?;
        let f = frames(&mut b, &imb, 1)?;
        println!("  build + images + first frame {:.0} ms", ms(t));
        let f = [f, frames(&mut b, &imb, 4)?].concat();
        show("  frames 1-5", &f);
        b.wait_settled(Duration::from_secs(30))?;
    }
    Ok(())
}
