//! The `neural-frame` command line.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use neural_frame::preflight;
use neural_frame::vulkan::DeviceSelector;

#[derive(Parser)]
#[command(
    name = "neural-frame",
    version,
    about = "Zero-copy neural inference on Vulkan frames"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check each link of the zero-copy chain on this machine.
    ///
    /// Exit code: 0 when every stage that ran passed (skipped stages say why),
    /// 2 when data differed, 1 on an error.
    Preflight {
        /// Run only this stage (1: Vulkan → Vulkan, 2: Vulkan → CUDA); all when absent.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
        stage: Vec<u8>,
        /// Vulkan device: `auto`, an index, or a UUID.
        #[arg(long, default_value = "auto")]
        device: DeviceSelector,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Run under VK_LAYER_KHRONOS_validation; any validation error fails the stage.
        #[arg(long)]
        validation: bool,
        /// Trials of the GPU→CPU→GPU reference round trip.
        #[arg(long, default_value_t = 5)]
        trials: usize,
        /// Image size as WIDTHxHEIGHT.
        #[arg(long, default_value = "1920x1080", value_parser = parse_size)]
        size: (u32, u32),
        /// Change one byte after the import (to see a difference detected).
        #[arg(long, hide = true)]
        inject_fault: bool,
    },
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("`{s}` is not WIDTHxHEIGHT"))?;
    let w: u32 = w.trim().parse().map_err(|_| format!("bad width in `{s}`"))?;
    let h: u32 = h.trim().parse().map_err(|_| format!("bad height in `{s}`"))?;
    if w == 0 || h == 0 {
        return Err(format!("`{s}`: width and height must be at least 1"));
    }
    Ok((w, h))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("neural-frame: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Preflight {
            stage,
            device,
            json,
            validation,
            trials,
            size,
            inject_fault,
        } => {
            let options = preflight::Options {
                device,
                width: size.0,
                height: size.1,
                trials,
                validation,
                inject_fault,
            };
            let report = preflight::run(&stage, &options);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).context("serialising the report")?
                );
            } else {
                print!("{}", preflight::render(&report));
            }
            Ok(report.exit_code() as u8)
        }
    }
}
