//! The `neural-frame` command line: `run`, `bench`, `preflight` and `serve`. Clap, the
//! logger, progress bars and image files live here; the library takes plain values.

#[cfg(feature = "diagnostics")]
mod bench;
#[cfg(feature = "diagnostics")]
mod bench_caller;
mod bench_serve;
mod cuda_args;
mod logger;
mod model_text;
mod pipe;
mod run;
mod serve;
mod signals;
mod stream;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use neural_frame::image_io::{self, Rgba8};
use neural_frame::{
    Backend, ColorOrder, DeviceSelector, ErrorKind, Layout, NeuralFrameContext, Normalization, TensorDeclaration,
    Tiling, preflight,
};

#[derive(Parser)]
#[command(name = "neural-frame", version, about = "Zero-copy neural inference on Vulkan frames")]
struct Cli {
    /// Say what the library does (-v), in more detail (-vv), or everything (-vvv).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Print errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum BackendArg {
    Auto,
    Cuda,
    Cpu,
}

impl BackendArg {
    /// Its name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BackendArg::Auto => "auto",
            BackendArg::Cuda => "cuda",
            BackendArg::Cpu => "cpu",
        }
    }
}

/// `bench --caller-queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CallerQueueArg {
    Transfer,
    Main,
}

/// The model's options, shared by every command that builds a context; serialised (JSON) as
/// `bench --serve` hands them to its worker (`serve --model-options`).
#[derive(Args, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelArgs {
    /// The ONNX model.
    #[arg(long, default_value = "models/upscale.onnx")]
    model: PathBuf,
    /// `auto`: CUDA where available, else the CPU backend (announced); `cuda` or `cpu` to insist.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    backend: BackendArg,
    /// Vulkan device: `auto`, an index, or a UUID. The CUDA device is found by UUID.
    #[arg(long, default_value = "auto")]
    #[serde(with = "model_text::device")]
    device: DeviceSelector,
    /// ONNX Runtime library (else ORT_DYLIB_PATH, .runtime/, then the Python package's).
    #[arg(long)]
    ort_library: Option<PathBuf>,
    /// Leave out the Vulkan timestamp queries that time the pre and post passes.
    #[arg(long)]
    no_gpu_timestamps: bool,
    /// Wait for frames by polling (a busy core) instead of sleeping in the driver.
    #[arg(long)]
    spin_wait: bool,
    /// The model's tensor layout, `nchw` or `nhwc`, where its shapes are ambiguous (overrides its metadata).
    #[arg(long, value_parser = parse_with::<Layout>)]
    #[serde(with = "model_text::layout")]
    layout: Option<Layout>,
    /// The model's colour order, `rgb` or `bgr` (overrides its metadata; default rgb).
    #[arg(long, value_parser = parse_with::<ColorOrder>)]
    #[serde(with = "model_text::color")]
    color: Option<ColorOrder>,
    /// The value range of the model's float tensors: `0,1`, `-1,1` or `0,255` (overrides its metadata; default 0,1).
    #[arg(long, value_parser = parse_with::<Normalization>, allow_hyphen_values = true, conflicts_with_all = ["mean", "std"])]
    #[serde(with = "model_text::range")]
    range: Option<Normalization>,
    /// Per-channel mean of the model's normalisation t = (x − mean) / std, for x in [0, 1] (with --std).
    #[arg(long, value_name = "R,G,B", requires = "std", allow_hyphen_values = true, value_parser = Normalization::parse_mean)]
    mean: Option<[f32; 3]>,
    /// Run frames as tiles of WIDTHxHEIGHT input pixels (the halo included), through the ring like frames.
    #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
    tile: Option<(u32, u32)>,
    /// Pixels of context on each side of a tile (with --tile; at least the model's receptive radius for
    /// a result equal to the untiled one).
    #[arg(long, default_value_t = neural_frame::DEFAULT_TILE_OVERLAP, requires = "tile")]
    tile_overlap: u32,
    /// Tile frames whose slot buffers would exceed this many MiB (the largest square tiles that fit).
    #[arg(long, value_name = "MIB", conflicts_with = "tile", value_parser = parse_mib, allow_hyphen_values = true)]
    memory_budget: Option<u64>,
    /// Per-channel std of the model's normalisation (with --mean), none of them 0.
    #[arg(long, value_name = "R,G,B", requires = "mean", allow_hyphen_values = true, value_parser = Normalization::parse_std)]
    std: Option<[f32; 3]>,
    #[command(flatten)]
    cuda: cuda_args::CudaArgs,
}

/// `--memory-budget` at most: its bytes (`MIB << 20`) must fit in 64 bits.
const MAX_BUDGET_MIB: u64 = u64::MAX >> 20;

/// `--memory-budget MIB`: a whole number of MiB from 1 to [`MAX_BUDGET_MIB`], never wrapped.
fn parse_mib(s: &str) -> Result<u64, String> {
    let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match s.parse::<u64>() {
        Ok(n) if digits && (1..=MAX_BUDGET_MIB).contains(&n) => Ok(n),
        _ if digits && s.bytes().any(|b| b != b'0') => Err(format!(
            "{s} MiB is more bytes than 64 bits can count (at most {MAX_BUDGET_MIB} MiB, 16 EiB); the budget is in \
             MiB: `--memory-budget 4096` is 4 GiB"
        )),
        _ => Err(format!("must be a whole number of MiB from 1 to {MAX_BUDGET_MIB} (4096 is 4 GiB), got `{s}`")),
    }
}

/// A warning for tiles that start less than an overlap apart (a tile smaller than four times the
/// overlap): each pixel then runs through the model many times over.
fn tile_warning(t: &Tiling) -> Option<String> {
    let (w, h) = t.tile;
    let (sx, sy) = t.step();
    if sx >= t.overlap && sy >= t.overlap {
        return None;
    }
    let times = (f64::from(w) / f64::from(sx.max(1))) * (f64::from(h) / f64::from(sy.max(1)));
    let side = 4 * t.overlap;
    Some(format!(
        "--tile {w}x{h} with --tile-overlap {o} starts a tile every {sx}×{sy} pixels (the tile less three times the \
         overlap): each pixel runs through the model about {times:.0} times; use tiles of at least four times the \
         overlap (--tile {side}x{side} or larger), or a smaller --tile-overlap (at most {max} for {w}x{h})",
        o = t.overlap,
        max = w.min(h) / 4
    ))
}

/// Shortens each run of more than 200 characters without a space (a model's
/// metadata value of a million characters, quoted in an error) to its start and end.
fn shorten_long_words(s: &str) -> String {
    const LONG: usize = 200;
    let mut out = String::new();
    for word in s.split_inclusive(char::is_whitespace) {
        let n = word.chars().count();
        if n <= LONG {
            out.push_str(word);
            continue;
        }
        out.extend(word.chars().take(100));
        out.push_str(&format!("…[{} characters left out]…", n - 140));
        out.extend(word.chars().skip(n - 40));
    }
    out
}

/// `serve --model-options`: the model's options as `serde_json` writes [`ModelArgs`].
fn parse_model_options(s: &str) -> Result<ModelArgs, String> {
    serde_json::from_str(s).map_err(|e| format!("not the model options as JSON: {e}"))
}

/// A clap value parser over a library type's `FromStr`.
fn parse_with<T: std::str::FromStr<Err = String>>(s: &str) -> Result<T, String> {
    s.parse()
}

impl ModelArgs {
    fn backend(&self) -> Backend {
        match self.backend {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Cuda => Backend::Cuda,
            BackendArg::Cpu => Backend::Cpu,
        }
    }

    /// The options on `builder`: the CUDA options whole (`CudaArgs::options`). What the command
    /// line changes from a default is the user's; the rest is the library's, from `neural-frame
    /// tune`'s cache where it has an entry for this model, GPU and size, else the defaults
    /// (which may fall back, announced).
    fn tune(&self, b: neural_frame::ContextBuilder) -> neural_frame::ContextBuilder {
        let b = b.gpu_timestamps(!self.no_gpu_timestamps).cuda_options(self.cuda.options());
        if self.spin_wait { b.spin_wait(true) } else { b }
    }

    /// Checks that `--model` names a readable file, with a message for each way it can fail.
    fn check_model(&self) -> anyhow::Result<()> {
        neural_frame::check_model_file(&self.model).context("checking --model")?;
        self.check_ort_library()
    }

    /// Refuses an `--ort-library` that is a directory, naming the libraries in it.
    fn check_ort_library(&self) -> anyhow::Result<()> {
        let Some(dir) = self.ort_library.as_deref().filter(|p| p.is_dir()) else {
            return Ok(());
        };
        let mut found: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("libonnxruntime.so"))
            .collect();
        found.sort();
        let hint = match found.last() {
            Some(n) => format!(": such as --ort-library {}", dir.join(n).display()),
            None => " (such as DIR/libonnxruntime.so.1.31.1; this directory has none)".into(),
        };
        anyhow::bail!(
            "--ort-library {}: is a directory; give the ONNX Runtime library file itself{hint}",
            dir.display()
        )
    }

    /// `--tile` and `--tile-overlap` (checked when the command line is parsed).
    fn tiling(&self) -> Option<Tiling> {
        self.tile.map(|(w, h)| Tiling { tile: (w, h), overlap: self.tile_overlap })
    }

    /// What `--layout`, `--color`, `--range` and `--mean`/`--std` declare.
    fn declaration(&self) -> TensorDeclaration {
        let normalization = match (self.mean, self.std) {
            (Some(mean), Some(std)) => Some(Normalization::MeanStd { mean, std }),
            _ => self.range,
        };
        TensorDeclaration { layout: self.layout, color: self.color, normalization }
    }

    /// A builder with these options.
    fn builder(&self, width: u32, height: u32) -> neural_frame::ContextBuilder {
        let b = NeuralFrameContext::builder(&self.model)
            .backend(self.backend())
            .device(self.device)
            .frame_size(width, height)
            .declare(self.declaration());
        let mut b = self.tune(b);
        if let Some(t) = self.tiling() {
            b = b.tiling(t);
        }
        if let Some(mib) = self.memory_budget {
            b = b.memory_budget(mib << 20);
        }
        if let Some(p) = self.ort_library() {
            b = b.ort_library(p);
        }
        b
    }

    /// `--ort-library`, else the Python package's runtime when the library's own search finds none.
    fn ort_library(&self) -> Option<PathBuf> {
        self.ort_library.clone().or_else(python_onnx_runtime)
    }

    fn context(&self, width: u32, height: u32) -> anyhow::Result<NeuralFrameContext> {
        self.check_model()?;
        self.builder(width, height)
            .build()
            .with_context(|| format!("setting up {} (--backend {})", self.model.display(), self.backend.name()))
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run a model on an image through the zero-copy pipeline and write the result.
    ///
    /// The image is uploaded into a Vulkan image as a renderer would hold it,
    /// goes through the pre pass, ONNX Runtime and the post pass into an output
    /// Vulkan image, and is read back to a PNG.
    Run {
        #[command(flatten)]
        model: ModelArgs,
        /// Input PNG or JPEG for the frame (default: the bundled sample photo models/coffee.png); NAME=PATH
        /// for a model input by name (repeatable: `--input color=c.png --input albedo=a.png`); `-` reads standard input.
        #[arg(long, value_parser = run::parse_named)]
        input: Vec<run::Named>,
        /// Output PNG for the frame's output (default: upscaled.png); NAME=PATH for a model output by name
        /// (repeatable); `-` writes standard output, and a FIFO is written as a stream.
        #[arg(long, value_parser = run::parse_named)]
        output: Vec<run::Named>,
        /// Resize the inputs to WIDTHxHEIGHT first (e.g. 960x540).
        #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
        size: Option<(u32, u32)>,
        /// Run the same frame N times (1 to 1000000) and print per-stage medians.
        #[arg(long, default_value_t = 1, value_parser = count(1, MAX_RUN_FRAMES), allow_negative_numbers = true)]
        frames: usize,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stream frames through the model: YUV4MPEG2 (`ffmpeg -f yuv4mpegpipe`) or raw RGBA8/RGB24,
    /// from a file, a pipe or a FIFO into another, in order (docs/stream.md).
    ///
    /// Several frames are in flight: while one runs the model, the next is uploaded and
    /// converted on the GPU and the one before converted and read back. Exit code: 0 when
    /// every frame was written, 1 on an error (the frames before it are written whole),
    /// 130 after Ctrl-C or SIGTERM (the frames in flight are written first).
    Stream(stream::StreamArgs),
    /// Measure the pipeline against ONNX Runtime alone and against the host round trip.
    ///
    /// Modes: ort-alone (the floor), zero-copy sync, zero-copy pipelined (the
    /// ring), host round trip (readback → host tensors → upload).
    Bench {
        #[command(flatten)]
        model: ModelArgs,
        /// Input frame size WIDTHxHEIGHT.
        #[arg(long, default_value = "960x540", value_parser = parse_size, allow_hyphen_values = true)]
        size: (u32, u32),
        /// Timed frames per mode (1 to 100000).
        #[arg(long, default_value_t = 100, value_parser = count(1, MAX_BENCH_FRAMES), allow_negative_numbers = true)]
        frames: usize,
        /// Untimed frames first; then ort-alone, sync and pipelined each warm up in their own
        /// pattern for 0.5 s (0 to 10000; 0: no warm-up at all).
        #[arg(long, default_value_t = 10, value_parser = count(0, MAX_WARMUP), allow_negative_numbers = true)]
        warmup: usize,
        /// Slots in the ring (frames in flight, 1 to 64).
        #[arg(long, default_value_t = 3, value_parser = count(1, MAX_SLOTS), allow_negative_numbers = true)]
        slots: usize,
        /// The picture frames are made from (default: the bundled sample).
        #[arg(long)]
        input: Option<PathBuf>,
        /// Run one context per device at once (`all`, or a comma-separated list of
        /// indices or UUIDs), frames distributed round-robin; reports per-device and total frames/s.
        #[arg(long)]
        devices: Option<String>,
        /// Also time the naive host round trip (a staging buffer per call, the tensor
        /// built and converted on the CPU, ORT on host tensors): slow, kept as the path users start from.
        #[arg(long)]
        host_naive: bool,
        /// Also measure where the time goes (CUDA backend): a host-polled timeline of
        /// synchronous frames, and the model's GPU time while Vulkan is idle, waiting or busy.
        #[arg(long)]
        diagnose: bool,
        /// `caller frames`: the renderer submits only its semaphores per timed frame, no copies (the
        /// cost of its submissions beside CUDA, against the same ring with its work).
        #[arg(long)]
        caller_no_copies: bool,
        /// `caller frames`: the renderer's queue for its per-frame work (copies, or with
        /// `--caller-no-copies` its bare semaphore submissions). `transfer`: a queue of a
        /// transfer-only family (the copy engines, beside CUDA's compute) where the device has one,
        /// else its main queue, said so; `main`: its graphics (or compute) queue, whose work is
        /// time-sliced with CUDA's. The report names the queue used.
        #[arg(long, value_enum, default_value_t = CallerQueueArg::Transfer)]
        caller_queue: CallerQueueArg,
        /// The same as `--caller-queue transfer`, the default (kept for earlier scripts).
        #[arg(long, hide = true, conflicts_with = "caller_queue")]
        caller_transfer_queue: bool,
        /// Measure `neural-frame serve` instead: the same frames in this process and
        /// through a worker process, from a renderer's device of this process (per-frame
        /// overhead and pipelined throughput against in-process).
        #[arg(long, conflicts_with_all = ["devices", "diagnose"])]
        serve: bool,
        /// Also write the report as JSON to this file (`-`: to stdout, as --json)
        #[arg(long)]
        json_file: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve renderers in other processes over a Unix socket (docs/protocol.md).
    ///
    /// Each client hands over its GPU slots once and then sends frames by slot
    /// index; it gets its own context, ring and imports. A model the contract
    /// refuses for every frame is refused at start (exit code 1, before listening).
    /// No client can hold the worker: its hand-over and any one step of its session
    /// are bounded (--session-timeout), and so are a frame (--frame-timeout) and an
    /// idle session (--idle-timeout); a session past its bound is ended or, when its
    /// thread is stuck in a driver call, abandoned: its client gets Error(Timeout)
    /// and its place is freed. Ctrl-C (or SIGTERM) finishes the frames in flight,
    /// tells the clients and exits 0, waiting for its sessions at most
    /// --session-timeout.
    Serve {
        #[command(flatten)]
        model: ModelArgs,
        /// The socket (default: $XDG_RUNTIME_DIR/neural-frame.sock), created with mode 0600.
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Clients served at once (1 to 64); more are refused as busy.
        #[arg(long, default_value_t = 4, value_parser = count(1, MAX_CLIENTS), allow_negative_numbers = true)]
        max_clients: usize,
        /// Also serve this user (repeatable); other users than the worker's are refused.
        #[arg(long)]
        allow_uid: Vec<u32>,
        /// Frames in flight per client (1 to 64).
        #[arg(long, default_value_t = 3, value_parser = count(1, MAX_SLOTS), allow_negative_numbers = true)]
        slots: usize,
        /// How long one frame may take on the worker, from its Enqueued to its Done, in seconds (1 to 3600);
        /// a frame past it ends its session with Error(Timeout).
        #[arg(long, default_value_t = 10, value_parser = count(1, 3600), allow_negative_numbers = true)]
        frame_timeout: usize,
        /// Seconds (1 to 3600) a client's hand-over may take (connecting to Ready: its Hello, building its
        /// model, importing its slots), and any one step of its session without progress (a driver call on
        /// a frame, a send it leaves unread, its drain, its release; --frame-timeout where longer, since on
        /// the CPU backend a frame's step runs the model). A session past it is abandoned: its client gets
        /// Error(Timeout), its socket is shut and its place freed. A stopping worker waits for its sessions
        /// at most this long too.
        #[arg(long, default_value_t = 60, value_parser = count(1, 3600), allow_negative_numbers = true)]
        session_timeout: usize,
        /// Seconds (0 to 86400; 0: never) a client may stay after its Ready with no frame in flight and no
        /// message, before it is ended with Error(Timeout) and its place freed (so that --max-clients idle
        /// clients cannot lock the others out).
        #[arg(long, default_value_t = 120, value_parser = count(0, 86_400), allow_negative_numbers = true)]
        idle_timeout: usize,
        /// The model's options serialised as JSON, in place of their flags (what `bench --serve` hands
        /// its worker; the fields are the flags' names with `_` for `-`, the CUDA ones under `cuda`).
        #[arg(long, value_name = "JSON", value_parser = parse_model_options)]
        model_options: Option<ModelArgs>,
    },
    /// Measure the tuning options on this machine for one model and frame size, and cache the fastest.
    ///
    /// Each candidate (NHWC kernels with the bias fused or apart, NCHW; CUDA graphs on and
    /// off; the winner's post wait and spin wait) runs in a context of its own, one frame
    /// at a time and with the ring full; the highest pipelined throughput wins (ties
    /// within 1 %: the lower latency) and is written to the tune cache under the model's
    /// SHA-256, the GPU, its driver, ONNX Runtime and the frame size. On the CPU backend
    /// only spin wait is in effect, and only it is measured.
    Tune {
        #[command(flatten)]
        model: ModelArgs,
        /// The frame size WIDTHxHEIGHT to tune for (an entry holds for this size only).
        #[arg(long, value_parser = parse_size, allow_hyphen_values = true)]
        size: (u32, u32),
        /// Timed frames per candidate, one at a time and again with the ring full (1 to 100000).
        #[arg(long, default_value_t = 100, value_parser = count(1, MAX_BENCH_FRAMES), allow_negative_numbers = true)]
        frames: usize,
        /// Untimed frames per candidate first (0 to 10000; at least two per slot).
        #[arg(long, default_value_t = 10, value_parser = count(0, MAX_WARMUP), allow_negative_numbers = true)]
        warmup: usize,
        /// The tune cache (default: $NEURAL_FRAME_TUNE_CACHE, else $XDG_CACHE_HOME/neural-frame/tune.json,
        /// else ~/.cache/neural-frame/tune.json).
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Also write the report as JSON to this file (`-`: to stdout, as --json)
        #[arg(long)]
        json_file: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check each link of the zero-copy chain on this machine.
    ///
    /// Exit code: 0 when every stage that ran passed (skipped stages say why),
    /// 2 when data differed, 1 on an error.
    Preflight {
        /// Run only this stage (1: Vulkan → Vulkan, 2: Vulkan → CUDA, 3: ONNX Runtime's CUDA
        /// provider); all when absent. Repeatable.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=3))]
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
        /// Trials of the GPU→CPU→GPU reference round trip (1 to 1000).
        #[arg(long, default_value_t = 5, value_parser = count(1, MAX_TRIALS), allow_negative_numbers = true)]
        trials: usize,
        /// Image size as WIDTHxHEIGHT (at most the device's maxImageDimension2D a side).
        #[arg(long, default_value = "1920x1080", value_parser = parse_size, allow_hyphen_values = true)]
        size: (u32, u32),
        /// Change one byte after the import (to see a difference detected).
        #[arg(long, hide = true)]
        inject_fault: bool,
        /// ONNX Runtime library for stage 3 (else ORT_DYLIB_PATH, .runtime/, then the Python package's).
        #[arg(long)]
        ort_library: Option<PathBuf>,
    },
}

impl Command {
    /// The model options of a command that runs a model.
    fn model_args(&self) -> Option<&ModelArgs> {
        match self {
            Command::Run { model, .. } | Command::Bench { model, .. } | Command::Serve { model, .. } => Some(model),
            _ => None,
        }
    }
}

/// `run --frames` at most: the per-frame timings are kept for the medians (40 bytes a frame).
const MAX_RUN_FRAMES: usize = 1_000_000;
/// `bench --frames` at most: the benchmark keeps every frame's statistics in its report.
const MAX_BENCH_FRAMES: usize = 100_000;
/// `bench --warmup` at most.
const MAX_WARMUP: usize = 10_000;
/// `bench --slots` at most: each slot holds its own input and output buffers.
const MAX_SLOTS: usize = 64;
/// `serve --max-clients` at most.
const MAX_CLIENTS: usize = 64;
/// `preflight --trials` at most.
const MAX_TRIALS: usize = 1_000;

/// A parser for a count option in `min..=max`, whose message names the range.
fn count(min: usize, max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |s| {
        let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        match s.parse::<usize>() {
            Ok(n) if digits && (min..=max).contains(&n) => Ok(n),
            _ => Err(format!("must be a whole number from {min} to {max}, got `{s}`")),
        }
    }
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(|| format!("`{s}` is not WIDTHxHEIGHT (e.g. 960x540)"))?;
    let side = |v: &str, what: &str| -> Result<u32, String> {
        let v = v.trim();
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) || v.bytes().all(|b| b == b'0') {
            return Err(format!("`{s}`: {what} must be a positive integer, got `{v}`"));
        }
        v.parse().map_err(|_| format!("`{s}`: {what} {v} is too large (at most {})", u32::MAX))
    };
    Ok((side(w, "width")?, side(h, "height")?))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Values that are fine alone but not together: a bad option, as clap reports one (exit code 2).
    if let Some(t) = cli.command.model_args().and_then(ModelArgs::tiling)
        && let Err(e) = t.check()
    {
        use clap::CommandFactory;
        Cli::command().error(clap::error::ErrorKind::ValueValidation, format!("--tile/--tile-overlap: {e}")).exit();
    }
    logger::init(cli.verbose, cli.quiet);
    if let Some(w) = cli.command.model_args().and_then(ModelArgs::tiling).as_ref().and_then(tile_warning) {
        log::warn!("{w}");
    }
    match dispatch(cli.command, cli.quiet) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("neural-frame: error: {}", shorten_long_words(&chain_text(&e)));
            if let Some(hint) = hint(&e) {
                eprintln!("neural-frame: hint: {hint}");
            }
            ExitCode::from(1)
        }
    }
}

/// The error and its causes, `: ` between them, each said once: a library error that names its
/// cause in its own text (the I/O errors do) is not followed by that cause again.
fn chain_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// What the command line's flags can do about an error of the library, by its kind.
fn hint(e: &anyhow::Error) -> Option<&'static str> {
    let kind = e.chain().find_map(|c| c.downcast_ref::<neural_frame::Error>())?.kind();
    Some(match kind {
        ErrorKind::ProviderUnavailable => {
            "`--backend cpu` runs on the CPU; `--device` picks another Vulkan device; `neural-frame preflight` checks \
             the Vulkan → CUDA chain"
        }
        ErrorKind::NoDevice => "`--device auto|INDEX|UUID` picks the Vulkan device; `neural-frame preflight` lists it",
        ErrorKind::RuntimeMissing => "`--ort-library PATH` names the library; `scripts/setup.sh` installs it",
        ErrorKind::Unsupported | ErrorKind::InvalidArgument => return None,
        ErrorKind::Timeout => "a frame did not finish in time; `-vv` shows each step",
        ErrorKind::Internal => "this is a bug of neural-frame: please report it with the message and `-vv`'s log",
        _ => return None,
    })
}

fn dispatch(command: Command, quiet: bool) -> anyhow::Result<u8> {
    match command {
        Command::Stream(args) => stream::run(&args, quiet),
        Command::Bench {
            model,
            size,
            frames,
            warmup,
            slots,
            input,
            devices,
            host_naive,
            diagnose,
            caller_no_copies,
            caller_queue,
            caller_transfer_queue,
            serve,
            json_file,
            json,
        } => {
            // Nothing to drain: a signal ends `bench` at once, with 130 (its report is written at its end only).
            signals::install(130)?;
            image_io::check_picture_size(size.0, size.1).with_context(|| format!("--size {}x{}", size.0, size.1))?;
            model.check_model()?;
            let picture = Rgba8::load(&input.unwrap_or_else(default_input))?;
            if serve {
                let options = bench_serve::ServeBench { model: model.clone(), size, frames, warmup, slots, picture };
                let report = bench_serve::run(&options, |way| {
                    if !json && !quiet {
                        eprintln!("neural-frame bench --serve: timing {way}");
                    }
                })
                .with_context(|| format!("benchmarking {} through a worker", model.model.display()))?;
                emit(&report, json, json_file.as_deref(), || bench_serve::render(&report))?;
                return Ok(0);
            }
            #[cfg(not(feature = "diagnostics"))]
            {
                let _ =
                    (devices, host_naive, diagnose, caller_no_copies, caller_queue, caller_transfer_queue, json_file);
                anyhow::bail!(
                    "this neural-frame was built without its `diagnostics` feature, which `bench` needs (its probes): \
                     rebuild with the default features, or run `bench --serve`"
                )
            }
            #[cfg(feature = "diagnostics")]
            {
                let options = bench::BenchOptions {
                    model: model.clone(),
                    size,
                    frames,
                    warmup,
                    slots,
                    picture,
                    host_naive,
                    diagnose,
                    caller_no_copies,
                    caller_transfer_queue: caller_transfer_queue || caller_queue == CallerQueueArg::Transfer,
                };
                if let Some(list) = devices {
                    let selectors = if list == "all" {
                        neural_frame::suitable_devices(model.backend())?
                            .into_iter()
                            .map(|d| DeviceSelector::Uuid(d.uuid_bytes))
                            .collect()
                    } else {
                        list.split(',')
                            .map(|d| d.trim().parse::<DeviceSelector>().map_err(|e| anyhow::anyhow!(e)))
                            .collect::<anyhow::Result<Vec<_>>>()?
                    };
                    let report = bench::run_multi(&options, &selectors).with_context(|| {
                        format!("benchmarking {} on {} device(s)", model.model.display(), selectors.len())
                    })?;
                    emit(&report, json, json_file.as_deref(), || bench::render_multi(&report))?;
                    return Ok(0);
                }
                let bar = (!json && !quiet).then(|| {
                    let bar = indicatif::ProgressBar::new(0);
                    bar.set_style(
                        indicatif::ProgressStyle::with_template("{msg:>20} {bar:40} {pos}/{len}")
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    bar
                });
                let report = bench::run(&options, |mode, done, total| {
                    if let Some(b) = &bar {
                        b.set_message(mode.to_string());
                        b.set_length(total as u64);
                        b.set_position(done as u64);
                    }
                })
                .with_context(|| format!("benchmarking {}", model.model.display()))?;
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
                emit(&report, json, json_file.as_deref(), || bench::render(&report))?;
                Ok(0)
            }
        }
        Command::Run { model, input, output, size, frames, json } => {
            // Nothing to drain: a signal ends `run` at once (its outputs are renamed into place whole).
            signals::install(130)?;
            run::run_model(&model, input, output, size, frames, json, quiet)?;
            Ok(0)
        }
        Command::Serve {
            model,
            model_options,
            socket,
            max_clients,
            allow_uid,
            slots,
            frame_timeout,
            session_timeout,
            idle_timeout,
        } => {
            let secs = |s: usize| std::time::Duration::from_secs(s as u64);
            serve::serve(serve::ServeOptions {
                model: model_options.unwrap_or(model),
                socket: socket.unwrap_or_else(neural_frame_client::default_socket),
                max_clients,
                allow_uid,
                slots,
                frame_timeout: secs(frame_timeout),
                session_timeout: secs(session_timeout),
                idle_timeout: (idle_timeout > 0).then(|| secs(idle_timeout)),
            })?;
            Ok(0)
        }
        Command::Tune { model, size, frames, warmup, cache, json_file, json } => {
            // A signal ends `tune` at once, with 130: its cache is written whole (renamed) or not at all.
            signals::install(130)?;
            tune::run(tune::TuneOptions { model, size, frames, warmup, cache, json, json_file })?;
            Ok(0)
        }
        Command::Preflight { stage, device, json, validation, trials, size, inject_fault, ort_library } => {
            let options = preflight::Options {
                device,
                width: size.0,
                height: size.1,
                trials,
                validation,
                inject_fault,
                ort_library: ort_library.or_else(python_onnx_runtime),
            };
            let report = preflight::run(&stage, &options);
            if json {
                println!("{}", serde_json::to_string_pretty(&report).context("serialising the report")?);
            } else if quiet {
                // Errors only: the stages that failed, with their reasons.
                for s in report
                    .stages
                    .iter()
                    .filter(|s| matches!(s.status, preflight::Status::Error | preflight::Status::Different))
                {
                    eprintln!(
                        "neural-frame: error: preflight stage {} ({}) {:?}: {}",
                        s.stage,
                        s.name,
                        s.status,
                        s.reason.as_deref().unwrap_or("no reason given")
                    );
                }
            } else {
                print!("{}", preflight::render(&report));
            }
            Ok(report.exit_code() as u8)
        }
    }
}

/// ONNX Runtime from an installed Python `onnxruntime-gpu` / `onnxruntime` package, asked of
/// `python3` once, and only when the library's own search (.runtime/, setup.sh's link, pip's
/// directories) finds nothing: the library spawns no process itself, so the CLI offers this
/// fallback. Never over an ORT_DYLIB_PATH that is set: a path the user named that is wrong is
/// the library's error, not a reason to load another runtime.
fn python_onnx_runtime() -> Option<PathBuf> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            if std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| !p.is_empty())
                || neural_frame::locate_onnx_runtime(None).is_ok()
            {
                return None;
            }
            // The package's capi/libonnxruntime.so.X.Y.Z, not its providers' libraries (the last name in order).
            let find = "import onnxruntime, os, glob; d = os.path.join(os.path.dirname(onnxruntime.__file__), 'capi'); \
                        print(sorted(f for f in glob.glob(os.path.join(d, 'libonnxruntime.so*')) \
                        if 'providers' not in os.path.basename(f))[-1])";
            let out = std::process::Command::new("python3")
                .args(["-c", find])
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            let library = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
            log::info!("ONNX Runtime: the Python package's {}", library.display());
            Some(library)
        })
        .clone()
}

/// Prints a report as JSON or as text (not with `--quiet`), and writes the JSON to `json_file` when given
/// (`-`: to stdout, as `--json` does).
pub(crate) fn emit(
    report: &impl serde::Serialize,
    json: bool,
    json_file: Option<&std::path::Path>,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let encoded = serde_json::to_string_pretty(report)?;
    let to_stdout = json_file.is_some_and(|f| f.as_os_str() == "-");
    if let Some(f) = json_file.filter(|_| !to_stdout) {
        std::fs::write(f, &encoded).with_context(|| format!("writing {}", f.display()))?;
    }
    if json || to_stdout {
        println!("{encoded}");
    } else if !logger::quiet() {
        print!("{}", text());
    }
    Ok(())
}

pub(crate) fn default_input() -> PathBuf {
    let rel = PathBuf::from("models/coffee.png");
    if rel.is_file() {
        return rel;
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().skip(1).map(|a| a.join(&rel)).find(|p| p.is_file()))
        .unwrap_or(rel)
}
