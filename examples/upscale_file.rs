//! The library on a picture file: load a PNG, run it through the model on a
//! context's own Vulkan images, and write the result as a PNG.
//!
//! ```sh
//! cargo run --release --example upscale_file -- [INPUT.png] [OUTPUT.png] [--model PATH]
//! ```
//!
//! Defaults: `models/coffee.png`, `upscaled.png` (in the current directory) and
//! `models/upscale.onnx`. The context picks its backend itself
//! (`Backend::Auto`): CUDA where the Vulkan device has a CUDA twin, the CPU
//! backend otherwise; the example says which ran, and why.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use neural_frame::ash::vk;
use neural_frame::image_io::{PngOutput, Rgba8};
use neural_frame::{Backend, NeuralFrameContext};

fn main() -> ExitCode {
    // The library's errors say what failed, why and what to do in their
    // `Display`; returning them from `main` would print their `Debug` instead.
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    // The arguments, by hand: two optional positionals and `--model PATH`.
    let mut files = Vec::new();
    let mut model = PathBuf::from("models/upscale.onnx");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = args.next().ok_or("--model needs a path")?.into(),
            "-h" | "--help" => {
                println!("upscale_file [INPUT.png] [OUTPUT.png] [--model PATH]");
                return Ok(());
            }
            flag if flag.starts_with('-') => return Err(format!("unknown option `{flag}` (see --help)").into()),
            _ if files.len() < 2 => files.push(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument `{arg}`: give at most an input and an output").into()),
        }
    }
    let mut files = files.into_iter();
    let input_path = files.next().unwrap_or_else(|| "models/coffee.png".into());
    let output_path = files.next().unwrap_or_else(|| "upscaled.png".into());

    // The picture as RGBA8 in memory, and the output file checked (created as a
    // temporary file) before any work is done.
    let picture = Rgba8::load(&input_path)?;
    let output_file = PngOutput::create(&output_path)?;

    // A context for frames of the picture's size. One frame at a time: one slot.
    let mut ctx = NeuralFrameContext::builder(&model)
        .backend(Backend::Auto)
        .frame_size(picture.width, picture.height)
        .slots(1)
        .build()?;
    let report = ctx.report();
    println!("backend: {} on {}", report.backend, report.vulkan_device);
    if let Some(cuda) = &report.cuda_device {
        println!("  paired with {cuda}");
    }
    if let Some(why) = &report.fallback_reason {
        println!("  (CUDA unavailable: {why})");
    }
    println!("ONNX Runtime {} from {}", report.runtime.version, report.runtime.library.display());

    // Images owned by the context, as a renderer would hold them: upload the
    // picture, run the frame, read the result back.
    let input = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM)?;
    let output = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM)?;
    ctx.upload(input, &picture.pixels)?;
    let stats = ctx.infer(input, output)?;
    let (width, height) = ctx.output_size();
    let result = Rgba8 { width, height, pixels: ctx.readback(output)? };
    output_file.write(&result)?;

    let c = ctx.contract();
    // The scale writes its own sign: `×4`.
    println!(
        "{}: {}×{} → {}×{} ({}, {} → {})",
        model.display(),
        picture.width,
        picture.height,
        width,
        height,
        c.scale,
        c.input.describe(),
        c.output.describe()
    );
    // n/a where a time was not measured (NaN: a device without timestamps).
    let ms = |v: f64| if v.is_finite() { format!("{v:.2} ms") } else { "n/a".to_string() };
    println!(
        "frame: pre {}, model {}, post {}, {} from submit to done",
        ms(stats.pre_ms),
        ms(stats.infer_ms),
        ms(stats.post_ms),
        ms(stats.latency_ms)
    );
    println!("wrote {}", output_path.display());
    Ok(())
}
