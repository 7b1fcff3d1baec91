//! `neural-frame stream`: a sequence of frames (YUV4MPEG2, or raw RGBA8/RGB24)
//! from a file, pipe or FIFO through the model into another, in order
//! (docs/stream.md). A reader thread parses the input, the main thread keeps the
//! context's host stream full (its lanes upload, convert on the GPU and read back
//! while other frames run the model), and a writer thread writes the results.
//! Bounded queues between them: a slow consumer stops the reader.

use std::io::{Read, Write};
use std::os::fd::{AsFd as _, AsRawFd as _, RawFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, sync_channel};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use neural_frame::{HostLayout, YuvLayout, YuvMatrix, YuvRange};

use crate::ModelArgs;
use crate::run::median;
use crate::{pipe, signals};
use neural_frame_cli::copy::{copy_out, copy_threads};
use neural_frame_cli::y4m::{self, FrameReader, FrameWriter, Y4mHeader};

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// A stream that starts with `YUV4MPEG2 ` is y4m; raw frames need --format.
    Auto,
    /// YUV4MPEG2 (what `ffmpeg -f yuv4mpegpipe` and `vspipe -c y4m` write).
    Y4m,
    /// Raw RGBA, 4 bytes a pixel (needs --size).
    Rgba,
    /// Raw RGB, 3 bytes a pixel (needs --size).
    Rgb24,
}

/// `--matrix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MatrixArg {
    Bt601,
    Bt709,
    Bt2020,
}

/// `--color-range` (the model's value range is `--range`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RangeArg {
    Limited,
    Full,
}

#[derive(Args)]
pub(crate) struct StreamArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// The input: a file, a FIFO, or `-` for standard input.
    #[arg(short, long, default_value = "-")]
    pub(crate) input: PathBuf,
    /// The output: a file, a FIFO, or `-` for standard output.
    #[arg(short, long, default_value = "-")]
    pub(crate) output: PathBuf,
    /// The frames' format; the output has the input's.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub(crate) format: FormatArg,
    /// The size WIDTHxHEIGHT of raw frames (a y4m stream gives it in its header).
    #[arg(long, value_parser = crate::parse_size, allow_hyphen_values = true)]
    pub(crate) size: Option<(u32, u32)>,
    /// Stop after N frames.
    #[arg(long, value_parser = crate::count(1, usize::MAX), allow_negative_numbers = true)]
    pub(crate) frames: Option<usize>,
    /// The YUV matrix (default: BT.709; y4m headers do not carry one).
    #[arg(long, value_enum)]
    pub(crate) matrix: Option<MatrixArg>,
    /// The YUV range (default: the header's XCOLORRANGE, else limited).
    #[arg(long, value_enum)]
    pub(crate) color_range: Option<RangeArg>,
    /// Frames in flight (1 to 16): each has its own pinned staging on both sides.
    #[arg(long, default_value_t = 4, value_parser = crate::count(1, 16), allow_negative_numbers = true)]
    pub(crate) depth: usize,
}

fn is_std(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// Grows a pipe's buffer to 1 MiB (frames are megabytes; the default 64 KiB costs a
/// context switch per 64 KiB). Not a pipe, or not allowed: left as it is.
fn widen_pipe(fd: std::os::fd::BorrowedFd<'_>) {
    // SAFETY: fcntl on a live descriptor; F_SETPIPE_SZ fails harmlessly on anything but a pipe.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
}

fn open_input(path: &Path) -> anyhow::Result<Box<dyn Read + Send>> {
    if is_std(path) {
        use std::io::IsTerminal as _;
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            bail!("--input -: standard input is a terminal; pipe a stream into it (`ffmpeg … -f yuv4mpegpipe - |`)");
        }

        widen_pipe(stdin.as_fd());
        return Ok(Box::new(stdin));
    }
    let file = std::fs::File::open(path).with_context(|| format!("opening --input {}", path.display()))?;
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        bail!("--input {} is a directory: give a file, a FIFO or `-`", path.display());
    }
    Ok(Box::new(file))
}

/// The output: its file, the pipe's descriptor and capacity where it is a pipe, and
/// the path of a regular file this run created (removed if the set-up fails).
struct Output {
    file: std::fs::File,
    pipe: Option<(RawFd, usize)>,
    created: Option<std::path::PathBuf>,
}

fn open_output(path: &Path, input: &Path) -> anyhow::Result<Output> {
    let (file, created) = if is_std(path) {
        // Standard output's own descriptor, unbuffered (std's Stdout is line-buffered).
        let fd = std::io::stdout().as_fd().try_clone_to_owned().context("duplicating standard output")?;
        (std::fs::File::from(fd), None)
    } else {
        open_output_file(path, input)?
    };
    widen_pipe(file.as_fd());
    let pipe = pipe::capacity(file.as_raw_fd()).map(|c| (file.as_raw_fd(), c));
    Ok(Output { file, pipe, created })
}

/// Opens (creating, not yet truncating) the output file: a set-up refused after it
/// leaves an existing file as it was, and removes one it created.
fn open_output_file(path: &Path, input: &Path) -> anyhow::Result<(std::fs::File, Option<std::path::PathBuf>)> {
    if !is_std(input)
        && let (Ok(a), Ok(b)) = (std::fs::canonicalize(path), std::fs::canonicalize(input))
        && a == b
    {
        bail!("--output {} is the input: give the output a path of its own", path.display());
    }
    let existed = std::fs::symlink_metadata(path).is_ok();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("opening --output {}", path.display()))?;
    let created = !existed && file.metadata().is_ok_and(|m| m.is_file());
    Ok((file, created.then(|| path.to_path_buf())))
}

/// Where the frames go, and the pipe's descriptor and capacity where it is a pipe.
type Sink = (Box<dyn Write + Send>, Option<(RawFd, usize)>);

impl Output {
    /// The set-up succeeded: a regular file is emptied for the frames, and kept.
    fn take(self) -> anyhow::Result<Sink> {
        if self.file.metadata().is_ok_and(|m| m.is_file()) {
            self.file.set_len(0).context("emptying --output for the frames")?;
        }
        Ok((Box::new(self.file), self.pipe))
    }
}

/// What the frames are: their size, their layout, and how the output is headed.
struct Shape {
    width: u32,
    height: u32,
    layout: HostLayout,
    header: Option<Y4mHeader>,
    describe: String,
}

fn yuv_layout(h: &Y4mHeader, args: &StreamArgs) -> HostLayout {
    let matrix = match args.matrix.unwrap_or(MatrixArg::Bt709) {
        MatrixArg::Bt601 => YuvMatrix::Bt601,
        MatrixArg::Bt709 => YuvMatrix::Bt709,
        MatrixArg::Bt2020 => YuvMatrix::Bt2020,
    };
    let range = match (args.color_range, h.range) {
        (Some(RangeArg::Full), _) | (None, Some(YuvRange::Full)) => YuvRange::Full,
        _ => YuvRange::Limited,
    };
    HostLayout::Yuv(YuvLayout { subsampling: h.sub, bits: h.bits, alpha: h.alpha, matrix, range, siting: h.siting })
}

type Frames = FrameReader<Box<dyn Read + Send>>;

/// Opens the input, decides its format and reads the y4m header.
fn open_frames(args: &StreamArgs) -> anyhow::Result<(Frames, Shape, Option<u64>)> {
    let mut input = open_input(&args.input)?;
    let (is_y4m, head) = y4m::sniff(&mut input).with_context(|| format!("reading --input {}", args.input.display()))?;
    let format = match args.format {
        FormatArg::Auto if is_y4m => FormatArg::Y4m,
        FormatArg::Auto if head.is_empty() => bail!("--input {}: the stream is empty", args.input.display()),
        FormatArg::Auto => bail!(
            "--input {} is not a YUV4MPEG2 stream (it starts with {:?}): for raw frames give --format rgba|rgb24 and \
             --size WxH",
            args.input.display(),
            String::from_utf8_lossy(&head)
        ),
        f => f,
    };
    let file_len =
        (!is_std(&args.input)).then(|| std::fs::metadata(&args.input).ok()).flatten().filter(|m| m.is_file());
    match format {
        FormatArg::Y4m => {
            if args.size.is_some() {
                bail!("--size is for raw frames: a y4m stream gives its size in its header");
            }
            let (reader, header) = FrameReader::y4m(input, head).map_err(anyhow::Error::from)?;
            let layout = yuv_layout(&header, args);
            let count = file_len.map(|m| {
                let header_len = header.to_line().len() as u64;
                m.len().saturating_sub(header_len) / (header.frame_len() as u64 + 6)
            });
            let describe = format!("y4m C{}", header.colour_name());
            let shape = Shape { width: header.width, height: header.height, layout, header: Some(header), describe };
            Ok((reader, shape, count))
        }
        FormatArg::Rgba | FormatArg::Rgb24 => {
            let Some((width, height)) = args.size else {
                bail!("raw frames (--format {}) need --size WxH: the stream does not say its frame size", {
                    if format == FormatArg::Rgba { "rgba" } else { "rgb24" }
                });
            };
            neural_frame::image_io::check_picture_size(width, height)
                .with_context(|| format!("--size {width}x{height}"))?;
            let (layout, describe) = match format {
                FormatArg::Rgba => (HostLayout::Rgba8, "raw RGBA8"),
                _ => (HostLayout::Rgb8, "raw RGB24"),
            };
            let frame_len = layout.frame_len(width, height);
            let count = file_len.map(|m| m.len() / frame_len as u64);
            let shape = Shape { width, height, layout, header: None, describe: describe.into() };
            Ok((FrameReader::raw(input, frame_len, head), shape, count))
        }
        FormatArg::Auto => unreachable!("decided above"),
    }
}

/// What the reader thread sends: a frame, or why the input ended early.
type ReadItem = Result<(Vec<u8>, f64), y4m::StreamError>;

fn spawn_reader(
    mut frames: Frames,
    limit: Option<usize>,
    tx: SyncSender<ReadItem>,
    pool: Receiver<Vec<u8>>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("stream-reader".into()).spawn(move || {
        while limit.is_none_or(|l| frames.frames() < l as u64) {
            let mut buf = pool.try_recv().unwrap_or_default();
            let t = Instant::now();
            match frames.next_frame(&mut buf) {
                Ok(true) => {
                    if tx.send(Ok((buf, t.elapsed().as_secs_f64() * 1e3))).is_err() {
                        return;
                    }
                }
                Ok(false) => return,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    })
}

/// What the writer thread reports when it stops: frames written, its per-frame times, and its error.
type WriterEnd = (u64, Vec<f64>, Option<std::io::Error>);

fn spawn_writer(
    mut writer: FrameWriter<Box<dyn Write + Send>>,
    pipe: Option<(RawFd, usize)>,
    rx: Receiver<Vec<u8>>,
    pool: SyncSender<Vec<u8>>,
) -> std::io::Result<std::thread::JoinHandle<WriterEnd>> {
    std::thread::Builder::new().name("stream-writer".into()).spawn(move || {
        let (mut n, mut times) = (0u64, Vec::new());
        // The writer owns the output (and so its descriptor) for as long as this lives.
        let mut spliced = pipe.map(|(fd, capacity)| pipe::SplicedPipe::new(fd, capacity));
        for frame in rx {
            let t = Instant::now();
            let written = match &mut spliced {
                Some(pipe) => writer.write_marker().and_then(|()| pipe.splice(frame)),
                None => writer.write_frame(&frame).map(|()| vec![frame]),
            };
            match written {
                Ok(free) => free.into_iter().for_each(|b| drop(pool.try_send(b))),
                Err(e) => return (n, times, Some(e)),
            }
            times.push(t.elapsed().as_secs_f64() * 1e3);
            n += 1;
        }
        match writer.finish() {
            Ok(_) => (n, times, None),
            Err(e) => (n, times, Some(e)),
        }
    })
}

fn describe_write_error(e: &std::io::Error, written: u64) -> String {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        format!("the output was closed by its reader after {written} frames (broken pipe)")
    } else {
        format!("writing frame {}: {e}", written + 1)
    }
}

/// Runs the stream; the exit code (0, or 130 when interrupted).
pub(crate) fn run(args: &StreamArgs, quiet: bool) -> anyhow::Result<u8> {
    signals::install(130)?;
    args.model.check_model()?;
    let started = Instant::now();
    let (frames, shape, count) = open_frames(args)?;
    let output = open_output(&args.output, &args.input)?;
    if shape.header.as_ref().is_some_and(|h| h.interlaced) && !quiet {
        eprintln!("neural-frame: warning: the stream is interlaced; its frames are processed as progressive pictures");
    }
    let set_up = (|| {
        let mut ctx = args.model.context(shape.width, shape.height)?;
        let extra = &ctx.contract().extra_inputs;
        if !extra.is_empty() {
            bail!(
                "the model takes more inputs than the frame ({}), and `stream` gives it the frame alone: run it with \
                 `neural-frame run --input NAME=PATH` for each, or from the library with `Frame::with_input`",
                ctx.contract().describe_inputs()
            );
        }
        let stream = ctx
            .host_stream(shape.layout, shape.layout, args.depth)
            .with_context(|| format!("setting up {} lanes for {}×{} frames", args.depth, shape.width, shape.height))?;
        Ok((ctx, stream))
    })();
    let (mut ctx, mut stream) = match set_up {
        Ok(v) => v,
        Err(e) => {
            if let Some(path) = &output.created {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    };
    let (output, pipe) = output.take()?;
    let (ow, oh) = ctx.output_size();
    let setup_ms = started.elapsed().as_secs_f64() * 1e3;
    if !quiet {
        let report = ctx.report();
        eprintln!(
            "stream: {} {}×{} → {ow}×{oh}, backend {}, precision {}, {} frames in flight (set-up {:.0} ms)",
            shape.describe,
            shape.width,
            shape.height,
            report.backend,
            ctx.precision().running,
            args.depth,
            setup_ms
        );
    }
    let writer = match &shape.header {
        Some(h) => FrameWriter::y4m(output, &h.resized(ow, oh)).context("writing the output's header")?,
        None => FrameWriter::raw(output),
    };
    let (read_tx, read_rx) = sync_channel::<ReadItem>(2);
    let (read_pool_tx, read_pool_rx) = sync_channel::<Vec<u8>>(args.depth + 2);
    let (write_tx, write_rx) = sync_channel::<Vec<u8>>(2);
    let (write_pool_tx, write_pool_rx) = sync_channel::<Vec<u8>>(4);
    let _reader = spawn_reader(frames, args.frames, read_tx, read_pool_rx).context("starting the reader thread")?;
    let writer = spawn_writer(writer, pipe, write_rx, write_pool_tx).context("starting the writer thread")?;
    let total = match (args.frames.map(|f| f as u64), count) {
        (Some(f), Some(c)) => Some(f.min(c)),
        (f, c) => f.or(c),
    };
    let progress = (!quiet).then(|| {
        let bar = match total {
            Some(n) => indicatif::ProgressBar::new(n),
            None => indicatif::ProgressBar::no_length(),
        };
        let template = if total.is_some() {
            "{bar:40} {pos}/{len} frames, {per_sec}, eta {eta}"
        } else {
            "{pos} frames, {per_sec}"
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        bar
    });

    signals::drain(130);
    let copiers = copy_threads(stream.output_len());
    let mut t = Times::default();
    let (mut input_done, mut interrupted) = (false, false);
    let mut input_error: Option<y4m::StreamError> = None;
    let mut sent = 0u64;
    let run_start = Instant::now();
    let outcome: anyhow::Result<()> = (|| {
        loop {
            if !interrupted && signals::stopped() {
                interrupted = true;
                input_done = true;
            }
            // Keep the lanes full while frames come.
            while stream.has_room() && !input_done {
                let item = if stream.in_flight() == 0 {
                    match read_rx.recv_timeout(Duration::from_millis(100)) {
                        Ok(item) => Some(item),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => {
                            input_done = true;
                            None
                        }
                    }
                } else {
                    match read_rx.try_recv() {
                        Ok(item) => Some(item),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            input_done = true;
                            None
                        }
                    }
                };
                match item {
                    Some(Ok((buf, read_ms))) => {
                        let s = Instant::now();
                        ctx.stream_push(&mut stream, |staging| staging.copy_from_slice(&buf))
                            .with_context(|| format!("frame {}", sent + stream.in_flight() as u64 + 1))?;
                        t.read.push(read_ms);
                        t.push.push(s.elapsed().as_secs_f64() * 1e3);
                        let _ = read_pool_tx.try_send(buf);
                    }
                    Some(Err(e)) => {
                        input_error = Some(e);
                        input_done = true;
                    }
                    None if stream.in_flight() == 0 && signals::stopped() => break,
                    None => {}
                }
            }
            if stream.in_flight() == 0 {
                if input_done {
                    return Ok(());
                }
                continue;
            }
            // The oldest frame to the writer.
            let s = Instant::now();
            let mut out = write_pool_rx.try_recv().unwrap_or_default();
            let popped = ctx
                .stream_pop(&mut stream, |bytes| {
                    let c = Instant::now();
                    copy_out(&mut out, bytes, copiers);
                    t.copy.push(c.elapsed().as_secs_f64() * 1e3);
                })
                .with_context(|| format!("frame {}", sent + 1))?;
            let Some(((), stats)) = popped else { continue };
            t.pop.push(s.elapsed().as_secs_f64() * 1e3);
            t.model.push(stats.infer_ms);
            t.read_back.push(stream.last_read_back_ms());
            if write_tx.send(out).is_err() {
                return Ok(()); // the writer stopped: its error is reported below
            }
            sent += 1;
            if let Some(bar) = &progress {
                bar.inc(1);
            }
        }
    })();
    drop(write_tx);
    let (written, write_times, write_error) =
        writer.join().map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let close = ctx.close_stream(stream);
    outcome?;
    if let Some(e) = write_error {
        bail!("{}", describe_write_error(&e, written));
    }
    close.context("closing the stream")?;
    let seconds = run_start.elapsed().as_secs_f64();
    if !quiet {
        eprintln!(
            "stream: {written} frames in {seconds:.2} s, {:.1} frames/s; medians per frame: read {:.2} ms, upload \
             {:.2} ms, frame and read-back {:.2} ms (model {:.2} ms, read-back on the GPU {:.2} ms, copy out {:.2} ms \
             on {copiers} threads), write {:.2} ms",
            written as f64 / seconds.max(1e-9),
            median(&mut t.read),
            median(&mut t.push),
            median(&mut t.pop),
            median(&mut t.model),
            median(&mut t.read_back),
            median(&mut t.copy),
            median(&mut write_times.clone()),
        );
    }
    if let Some(e) = input_error {
        bail!(e);
    }
    if interrupted {
        eprintln!("neural-frame: interrupted: stopped after {written} frames, each written whole");
        return Ok(130);
    }
    Ok(0)
}

/// Per-frame times of the main thread's steps, in ms.
#[derive(Default)]
struct Times {
    read: Vec<f64>,
    push: Vec<f64>,
    pop: Vec<f64>,
    model: Vec<f64>,
    read_back: Vec<f64>,
    copy: Vec<f64>,
}
