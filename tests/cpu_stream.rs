//! `neural-frame stream` (docs/stream.md) end to end on the CPU backend: y4m and raw
//! frames through pipes, files and FIFOs, every output frame compared with an
//! independent reference (tests/common/src/stream.rs: the document's conversions in f64
//! and ONNX Runtime's CPU run of the model), and its error paths: exit status, a
//! message that names the problem, and whole, valid frames before it.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::bin;
use common::pipeline::picture;
use common::stream::{Clip, Conv, Model, Stop, compare, expected, parse};

const MODEL: &str = "models/test/tiny-x2-f32.onnx";

/// How long one run of the CLI may take before the test kills it and fails.
const LIMIT: Duration = Duration::from_secs(120);

/// How close an output frame must be to the reference.
#[derive(Debug, Clone, Copy)]
struct Tol {
    /// Smallest PSNR over all of a frame's samples (on the 0…2ᴺ−1 scale), dB.
    psnr: f64,
    /// Largest |difference| of a sample.
    max: u16,
}

/// 8-bit streams. The GPU converts in f32, the reference in f64: a value on a .5
/// boundary can round apart at each of the three roundings, the RGBA8 frame the model
/// reads (a 1/255 step that then goes through the model), the post pass's RGBA8 output,
/// and the final Y/U/V/A samples. 3 covers one step at each; the PSNR bounds how often.
const EIGHT: Tol = Tol { psnr: 45.0, max: 3 };

/// 10-bit streams: the frames between are RGBA16F, whose step (2⁻¹¹ just below 1) is
/// half a 10-bit code: the f32 and f64 conversions can round to different half floats at
/// a tie, at the model's input (a step the model may enlarge) and at its output, and the
/// final samples can round apart; 4 codes (one 8-bit step) covers these. PSNR on 0…1023.
const DEEP: Tol = Tol { psnr: 45.0, max: 4 };

/// A fresh, empty directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpu_stream").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

/// How a run of the CLI ended.
struct Ended {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
    secs: f64,
}

impl Ended {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The status and stderr, for assertion messages.
    fn say(&self) -> String {
        let (code, signal) = (self.status.code(), self.status.signal());
        format!("exit {code:?}, signal {signal:?}, after {:.1} s; stderr:\n{}", self.secs, self.stderr)
    }

    /// stderr in lower case.
    fn err(&self) -> String {
        self.stderr.to_lowercase()
    }
}

/// A running `neural-frame stream --model MODEL --backend cpu ARGS`: stdin fed by a thread,
/// stdout and stderr read by threads, everything bounded by [`LIMIT`].
struct Running {
    child: Child,
    chunks: Option<Receiver<Vec<u8>>>,
    out: Vec<u8>,
    feeder: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<String>>,
    start: Instant,
}

impl Running {
    /// Starts the CLI and writes `pieces` to its stdin, `pause` before each after the first;
    /// a write that fails (the CLI closed its end) ends the feeding quietly.
    fn start(args: &[&str], pieces: Vec<Vec<u8>>, pause: Duration) -> Running {
        let mut child = Command::new(bin())
            .args(["stream", "--model", MODEL, "--backend", "cpu"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the neural-frame binary runs");
        let mut stdin = child.stdin.take().expect("stdin");
        let feeder = std::thread::spawn(move || {
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(pause);
                }
                if stdin.write_all(piece).is_err() {
                    return;
                }
            }
        });
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    // A closed receiver (the test stopped reading) drops stdout: the pipe closes.
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = stderr.read_to_end(&mut b);
            String::from_utf8_lossy(&b).into_owned()
        });
        Running {
            child,
            chunks: Some(rx),
            out: Vec::new(),
            feeder: Some(feeder),
            stderr: Some(stderr),
            start: Instant::now(),
        }
    }

    fn left(&self) -> Duration {
        LIMIT.saturating_sub(self.start.elapsed())
    }

    /// Kills the CLI (still ours: not waited for yet) and fails with what it said.
    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let said = self.stderr.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
        panic!("{why} (killed after {:.1} s); stderr:\n{said}", self.start.elapsed().as_secs_f64())
    }

    /// Reads stdout until it holds `n` whole y4m frames or ends; returns the frames there.
    fn read_frames(&mut self, n: usize) -> usize {
        loop {
            let have = parse(&self.out).map(|p| p.clip.frames.len()).unwrap_or(0);
            if have >= n {
                return have;
            }
            let Some(rx) = &self.chunks else { return have };
            match rx.recv_timeout(self.left()) {
                Ok(chunk) => self.out.extend(chunk),
                Err(RecvTimeoutError::Disconnected) => return have,
                Err(RecvTimeoutError::Timeout) => self.fail(&format!("no {n} frames on stdout in time")),
            }
        }
    }

    /// Stops reading stdout: the read end of the pipe closes.
    fn close_output(&mut self) {
        self.chunks = None;
    }

    /// Reads the rest of stdout (unless closed) and waits for the exit, within [`LIMIT`].
    fn end(mut self) -> Ended {
        while let Some(rx) = &self.chunks {
            match rx.recv_timeout(self.left()) {
                Ok(chunk) => self.out.extend(chunk),
                Err(RecvTimeoutError::Disconnected) => self.chunks = None,
                Err(RecvTimeoutError::Timeout) => self.fail("stdout did not end in time"),
            }
        }
        let status = loop {
            match self.child.try_wait().expect("wait") {
                Some(status) => break status,
                None if self.left().is_zero() => self.fail("the CLI did not exit in time"),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let secs = self.start.elapsed().as_secs_f64();
        let stderr = self.stderr.take().map(|t| t.join().expect("stderr reader")).unwrap_or_default();
        if let Some(f) = self.feeder.take() {
            f.join().expect("feeder");
        }
        Ended { status, stdout: std::mem::take(&mut self.out), stderr, secs }
    }
}

/// Runs the CLI on `input` through pipes.
fn stream(args: &[&str], input: Vec<u8>) -> Ended {
    Running::start(args, vec![input], Duration::ZERO).end()
}

/// Checks every frame of `out` against the reference of the same frame of `input`;
/// prints and returns the worst PSNR and difference.
fn check_frames(model: &Model, input: &Clip, conv: Conv, out: &Clip, tol: Tol, what: &str) -> (f64, u16) {
    assert_eq!((out.width, out.height), model.out_size(input.width, input.height), "{what}: output size");
    assert_eq!(out.layout, input.layout, "{what}: output layout");
    assert!(out.frames.len() <= input.frames.len(), "{what}: more frames out than in");
    let mut worst = (f64::INFINITY, 0u16);
    for (i, got) in out.frames.iter().enumerate() {
        let d = compare(got, &expected(model, input, i, conv), input.layout);
        assert!(
            d.psnr >= tol.psnr && d.max <= tol.max,
            "{what}: frame {i}: PSNR {:.2} dB, max diff {} (plane {}, sample {}); limits {} dB, {}",
            d.psnr,
            d.max,
            d.at.0,
            d.at.1,
            tol.psnr,
            tol.max
        );
        worst = (worst.0.min(d.psnr), worst.1.max(d.max));
    }
    println!("{what}: {} frames, worst PSNR {:.2} dB, worst max diff {}", out.frames.len(), worst.0, worst.1);
    worst
}

/// A whole successful y4m run: exit 0, every frame out, whole; returns the output.
fn check_y4m(model: &Model, clip: &Clip, conv: Conv, end: &Ended, tol: Tol, what: &str) -> Clip {
    assert_eq!(end.code(), Some(0), "{what}: {}", end.say());
    let out = parse(&end.stdout).unwrap_or_else(|e| panic!("{what}: output is not y4m ({e}); {}", end.say()));
    assert_eq!(out.stop, Stop::End, "{what}: output after {} frames", out.clip.frames.len());
    assert_eq!(out.clip.frames.len(), clip.frames.len(), "{what}: frames out");
    check_frames(model, clip, conv, &out.clip, tol, what);
    out.clip
}

/// What a failed run wrote before failing: nothing, or a header and whole frames (a cut
/// one at the end only where `partial_ok`: the test itself stopped reading), each equal
/// to the reference of its input frame (the input parsed as its header says). Returns how many.
fn check_written(model: &Model, input: &[u8], conv: Conv, out: &[u8], partial_ok: bool, what: &str) -> usize {
    if out.is_empty() {
        println!("{what}: no output");
        return 0;
    }
    let inp = parse(input).expect("the test's input has a header");
    let got = parse(out).unwrap_or_else(|e| panic!("{what}: the output is not y4m ({e})"));
    let n = got.clip.frames.len();
    match &got.stop {
        Stop::End => {}
        Stop::Partial(_) if partial_ok => {}
        other => panic!("{what}: the output ends in {other:?} after {n} whole frames"),
    }
    check_frames(model, &inp.clip, conv, &got.clip, EIGHT, what);
    n
}

/// The inputs are not all alike: consecutive frames differ, and so does chroma within one.
fn assert_varied(clip: &Clip) {
    assert!(clip.frames.windows(2).all(|w| w[0] != w[1]), "consecutive frames are equal");
    for f in &clip.frames {
        assert!(f.iter().all(|p| p.iter().any(|v| *v != p[0])), "a constant plane");
    }
}

fn bt709() -> Conv {
    Conv::new("bt709", false)
}

/// Whether a line of `stderr` that mentions a frame names frame `k` (0-based) or `k + 1` (1-based).
fn names_frame(stderr: &str, k: usize) -> bool {
    let (a, b) = (k.to_string(), (k + 1).to_string());
    stderr
        .lines()
        .filter(|l| l.to_lowercase().contains("frame"))
        .any(|l| l.split(|c: char| !c.is_ascii_digit()).any(|t| t == a || t == b))
}

#[test]
fn y4m_420_pipe_matches_onnx_runtime() {
    let model = Model::new(MODEL);
    let (w, h, n) = (38, 22, 32);
    let clip = Clip::generate("420jpeg", w, h, n, bt709(), 1);
    assert_varied(&clip);
    let params = "F30000:1001 Ip A1:1 C420jpeg XCOLORRANGE=LIMITED XFOO=bar";
    let end = stream(&[], clip.y4m(params));
    check_y4m(&model, &clip, bt709(), &end, EIGHT, "4:2:0 38×22");
    // The header: W and H scaled, every other parameter carried over.
    let out = parse(&end.stdout).expect("y4m");
    let (ow, oh) = model.out_size(w, h);
    let mut want: Vec<String> =
        params.split(' ').map(String::from).chain([format!("W{ow}"), format!("H{oh}")]).collect();
    let mut got = out.tokens.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "output header");
}

#[test]
fn y4m_420_odd_size_matches_onnx_runtime() {
    // No C tag: 4:2:0 (420jpeg); ⌈37/2⌉ × ⌈21/2⌉ chroma, the last column and row covering one luma pixel.
    let model = Model::new(MODEL);
    let clip = Clip::generate("420jpeg", 37, 21, 8, bt709(), 2);
    assert_varied(&clip);
    let end = stream(&[], clip.y4m("F25:1 Ip A1:1"));
    check_y4m(&model, &clip, bt709(), &end, EIGHT, "4:2:0 37×21");
}

#[test]
fn y4m_444alpha_and_10bit() {
    let model = Model::new(MODEL);
    // 4:4:4 with alpha: the output's alpha plane is the post pass's alpha for a
    // 3-channel model (the input's alpha resampled), as `expected_image` computes it.
    let clip = Clip::generate("444alpha", 38, 22, 6, bt709(), 3);
    assert_varied(&clip);
    let end = stream(&[], clip.y4m("F25:1 Ip A1:1 C444alpha"));
    check_y4m(&model, &clip, bt709(), &end, EIGHT, "4:4:4 + alpha");

    // 10-bit full range: 16-bit little-endian words, RGBA16F frames between.
    let full = Conv::new("bt709", true);
    let clip = Clip::generate("420p10", 36, 20, 6, full, 4);
    assert_varied(&clip);
    assert!(clip.frames[0][0].iter().any(|v| *v > 255), "10-bit samples");
    let end = stream(&[], clip.y4m("F25:1 Ip A1:1 C420p10 XCOLORRANGE=FULL"));
    check_y4m(&model, &clip, full, &end, DEEP, "4:2:0 10-bit full range");
}

#[test]
fn raw_rgb24_and_rgba() {
    let model = Model::new(MODEL);
    let d = dir("raw");
    let (w, h, n) = (36u32, 20u32, 8u32);
    let (ow, oh) = model.out_size(w, h);
    for (format, bpp) in [("rgb24", 3usize), ("rgba", 4usize)] {
        let pictures: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let mut p = picture(w, h, 40 + 3 * i);
                if bpp == 3 {
                    p.chunks_mut(4).for_each(|px| px[3] = 255); // rgb24 is widened with alpha 255
                }
                p
            })
            .collect();
        let input: Vec<u8> = pictures.iter().flat_map(|p| p.chunks(4).flat_map(|px| px[..bpp].to_vec())).collect();
        let (inp, outp) = (d.join(format!("in.{format}")), d.join(format!("out.{format}")));
        std::fs::write(&inp, &input).expect("write the input");
        let args = ["--format", format, "--size", "36x20", "--input", s(&inp), "--output", s(&outp)];
        let end = stream(&args, Vec::new());
        assert_eq!(end.code(), Some(0), "{format}: {}", end.say());
        let got = std::fs::read(&outp).expect("the output file");
        let frame = (ow * oh) as usize * bpp;
        assert_eq!(got.len(), n as usize * frame, "{format}: output bytes");
        let mut worst = 0u8;
        for (i, pic) in pictures.iter().enumerate() {
            let want = model.run8(pic, w, h);
            let got = &got[i * frame..(i + 1) * frame];
            for (p, px) in got.chunks(bpp).enumerate() {
                for (c, v) in px.iter().enumerate() {
                    let diff = v.abs_diff(want[p * 4 + c]);
                    // The post pass's f32 rounding against the reference's: 1 (as tests/cpu_pipeline.rs).
                    assert!(diff <= 1, "{format} frame {i}: pixel {p} channel {c} differs by {diff}");
                    worst = worst.max(diff);
                }
            }
        }
        println!("{format}: {n} frames, worst difference {worst}");
    }
}

#[test]
fn matrix_and_range_flags() {
    let model = Model::new(MODEL);
    let bt601_full = Conv::new("bt601", true);
    let clip = Clip::generate("420jpeg", 38, 22, 6, bt601_full, 5);
    // The two settings give measurably different frames, so that the test can tell them apart.
    let d = compare(&expected(&model, &clip, 0, bt601_full), &expected(&model, &clip, 0, bt709()), clip.layout);
    assert!(d.max > 10 && d.psnr < 40.0, "bt601/full and bt709/limited are too alike: {d:?}");

    // Without flags and without XCOLORRANGE: BT.709, limited.
    let input = clip.y4m("F25:1 Ip A1:1 C420jpeg");
    let plain = stream(&[], input.clone());
    let a = check_y4m(&model, &clip, bt709(), &plain, EIGHT, "defaults (bt709, limited)");
    // --matrix, with the range from the header.
    let end = stream(&["--matrix", "bt601"], clip.y4m("F25:1 Ip A1:1 C420jpeg XCOLORRANGE=FULL"));
    let b = check_y4m(&model, &clip, bt601_full, &end, EIGHT, "--matrix bt601, XCOLORRANGE=FULL");
    let d = compare(&a.frames[0], &b.frames[0], clip.layout);
    assert!(d.max > 10, "the settings changed nothing: {d:?}");
    // Both flags on a header without XCOLORRANGE.
    let flagged = stream(&["--matrix", "bt601", "--color-range", "full"], input);
    check_y4m(&model, &clip, bt601_full, &flagged, EIGHT, "--matrix bt601 --color-range full");
}

#[test]
fn frames_limit() {
    let model = Model::new(MODEL);
    let clip = Clip::generate("420jpeg", 38, 22, 12, bt709(), 6);
    let end = stream(&["--frames", "5"], clip.y4m("F25:1 Ip A1:1 C420jpeg"));
    assert_eq!(end.code(), Some(0), "{}", end.say());
    let out = parse(&end.stdout).expect("y4m");
    assert_eq!(out.stop, Stop::End);
    assert_eq!(out.clip.frames.len(), 5, "--frames 5 on 12 frames");
    check_frames(&model, &clip, bt709(), &out.clip, EIGHT, "--frames 5");
}

#[test]
fn truncated_stream_fails_at_the_cut_frame() {
    let model = Model::new(MODEL);
    let clip = Clip::generate("420jpeg", 38, 22, 10, bt709(), 7);
    let pieces = clip.y4m_pieces("F25:1 Ip A1:1 C420jpeg");
    let k = 6; // cut in the middle of frame k's planes
    let mut input = pieces[..=k].concat();
    input.extend(&pieces[k + 1][..pieces[k + 1].len() / 2]);
    let end = stream(&[], input.clone());
    println!("truncated_stream_fails_at_the_cut_frame: {}", end.say());
    assert_eq!(end.code(), Some(1), "{}", end.say());
    let err = end.err();
    assert!(names_frame(&end.stderr, k), "the message names frame {k} (or {}): {}", k + 1, end.say());
    let said = ["cut short", "truncated", "incomplete", "short", "unexpected end", "ends"];
    assert!(said.iter().any(|w| err.contains(w)), "the message says the stream was cut: {}", end.say());
    let n = check_written(&model, &input, bt709(), &end.stdout, false, "before the cut");
    assert!(n <= k, "{n} frames written from {k} whole ones");
}

#[test]
fn lying_header_is_refused() {
    let model = Model::new(MODEL);
    let clip = Clip::generate("420jpeg", 38, 22, 10, bt709(), 8);
    let mut pieces = clip.y4m_pieces("F25:1 Ip A1:1 C420jpeg");
    pieces[0] = b"YUV4MPEG2 W40 H24 F25:1 Ip A1:1 C420jpeg\n".to_vec();
    let input = pieces.concat();
    let end = stream(&[], input.clone());
    println!("lying_header_is_refused: {}", end.say());
    assert_eq!(end.code(), Some(1), "{}", end.say());
    assert!(end.stderr.contains("FRAME") || end.err().contains("match"), "{}", end.say());
    check_written(&model, &input, bt709(), &end.stdout, false, "header that lies");
}

#[test]
fn size_change_mid_stream_is_refused() {
    let model = Model::new(MODEL);
    let first = Clip::generate("420jpeg", 38, 22, 4, bt709(), 9);
    let second = Clip::generate("420jpeg", 40, 24, 4, bt709(), 10);
    let params = "F25:1 Ip A1:1 C420jpeg";
    let input = [first.y4m(params), second.y4m(params)].concat();
    let end = stream(&[], input.clone());
    println!("size_change_mid_stream_is_refused: {}", end.say());
    assert_eq!(end.code(), Some(1), "{}", end.say());
    let err = end.err();
    assert!(err.contains("size") || err.contains("chang"), "the message names the size change: {}", end.say());
    let n = check_written(&model, &input, bt709(), &end.stdout, false, "before the size change");
    assert!(n <= 4);
}

#[test]
fn closed_output_ends_with_exit_1() {
    let model = Model::new(MODEL);
    // 80 frames out are ~400 KB, far over a pipe's buffer: the CLI must meet the closed end.
    let clip = Clip::generate("420jpeg", 38, 22, 80, bt709(), 11);
    let input = clip.y4m("F25:1 Ip A1:1 C420jpeg");
    let mut run = Running::start(&[], vec![input.clone()], Duration::ZERO);
    let had = run.read_frames(2);
    assert!(had >= 2, "2 frames before closing");
    run.close_output();
    let end = run.end();
    println!("closed_output_ends_with_exit_1: {}", end.say());
    assert_eq!(end.status.signal(), None, "killed by a signal (SIGPIPE not ignored?): {}", end.say());
    assert_eq!(end.code(), Some(1), "{}", end.say());
    assert!(end.secs < 60.0, "took {:.1} s", end.secs);
    let err = end.err();
    assert!(
        ["closed", "broken pipe", "pipe"].iter().any(|w| err.contains(w)),
        "the message says the output closed: {}",
        end.say()
    );
    check_written(&model, &input, bt709(), &end.stdout, true, "before closing");
}

#[test]
fn raw_without_size_or_format_is_refused() {
    let raw = picture(36, 20, 12);
    // Raw frames need --size: an error (1), or clap's usage error (2).
    let end = stream(&["--format", "rgba"], raw.clone());
    println!("raw_without_size_or_format_is_refused: {}", end.say());
    assert!(matches!(end.code(), Some(1 | 2)), "{}", end.say());
    assert!(end.err().contains("size"), "{}", end.say());
    println!("rgba without --size: exit {:?}", end.code());
    // Raw bytes with the default --format auto: not y4m, so --format is needed.
    let end = stream(&["--size", "36x20"], raw);
    println!("raw_without_size_or_format_is_refused: {}", end.say());
    assert_eq!(end.code(), Some(1), "{}", end.say());
    assert!(end.err().contains("format"), "{}", end.say());
}

/// SIGINT (and SIGTERM) while a slow producer feeds frames: exit 130 once the frames in
/// flight are written, every frame out whole and valid, and a message saying so.
#[test]
fn sigint_writes_whole_frames_and_exits_130() {
    let model = Model::new(MODEL);
    let clip = Clip::generate("420jpeg", 38, 22, 40, bt709(), 13);
    let pieces = clip.y4m_pieces("F25:1 Ip A1:1 C420jpeg");
    let input = pieces.concat();
    for (signal, name, said) in [(libc::SIGINT, "SIGINT", "interrupt"), (libc::SIGTERM, "SIGTERM", "")] {
        let mut run = Running::start(&[], pieces.clone(), Duration::from_millis(250));
        let had = run.read_frames(3);
        assert!(had >= 3, "3 frames before {name}");
        // SAFETY: kill on our own child's pid, not waited for yet.
        assert_eq!(unsafe { libc::kill(run.child.id() as i32, signal) }, 0);
        let end = run.end();
        println!("{name}: {}", end.say());
        assert_eq!(end.status.signal(), None, "{name} killed it: {}", end.say());
        assert_eq!(end.code(), Some(130), "{name}: {}", end.say());
        assert!(end.err().contains(said), "{name}: the message says it was interrupted: {}", end.say());
        let n = check_written(&model, &input, bt709(), &end.stdout, false, name);
        assert!((3..40).contains(&n), "{name}: {n} frames written");
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(s(p)).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", p.display());
}

#[test]
fn fifos_in_and_out() {
    let model = Model::new(MODEL);
    let clip = Clip::generate("420jpeg", 38, 22, 6, bt709(), 14);
    let input = clip.y4m("F25:1 Ip A1:1 C420jpeg");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let d = std::env::temp_dir().join(format!("neural-frame-stream-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    let (fin, fout) = (d.join("in.y4m"), d.join("out.y4m"));
    mkfifo(&fin);
    mkfifo(&fout);
    let start = Instant::now();
    let mut child = Command::new(bin())
        .args(["stream", "--model", MODEL, "--backend", "cpu", "--input", s(&fin), "--output", s(&fout)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the neural-frame binary runs");
    let mut stderr = child.stderr.take().expect("stderr");
    let said = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let (wpath, rpath) = (fin.clone(), fout.clone());
    let writer = std::thread::spawn(move || {
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&wpath) {
            let _ = f.write_all(&input);
        }
    });
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&rpath) {
            let _ = f.read_to_end(&mut b);
        }
        b
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Our threads may still wait in open() for the other end (the CLI ended before opening it): give them one.
    while !(writer.is_finished() && reader.is_finished()) && start.elapsed() < LIMIT + Duration::from_secs(10) {
        let _ = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fin);
        let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fout);
        std::thread::sleep(Duration::from_millis(50));
    }
    let said = said.join().expect("stderr reader");
    let out = reader.join().expect("reader");
    writer.join().expect("writer");
    let _ = std::fs::remove_dir_all(&d);
    let status = status.unwrap_or_else(|| panic!("the CLI did not end in time; stderr:\n{said}"));
    let end = Ended { status, stdout: out, stderr: said, secs: start.elapsed().as_secs_f64() };
    check_y4m(&model, &clip, bt709(), &end, EIGHT, "FIFOs");
}

/// `name` on PATH, if there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

#[test]
fn ffmpeg_round_trip() {
    let Some(ffmpeg) = on_path("ffmpeg") else {
        println!("ffmpeg is not on PATH: the round trip through ffmpeg was skipped");
        return;
    };
    let mut source = Command::new(&ffmpeg)
        .args(["-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", "30"])
        .args(["-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ffmpeg runs");
    let mut cli = Command::new(bin())
        .args(["stream", "--model", MODEL, "--backend", "cpu"])
        .stdin(Stdio::from(source.stdout.take().expect("ffmpeg's stdout")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the neural-frame binary runs");
    let mut cli_err = cli.stderr.take().expect("stderr");
    let cli_said = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = cli_err.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    // ffmpeg decodes the CLI's stream and writes it again as y4m.
    let sink = Command::new(&ffmpeg)
        .args(["-v", "error", "-f", "yuv4mpegpipe", "-i", "-", "-f", "yuv4mpegpipe", "-"])
        .stdin(Stdio::from(cli.stdout.take().expect("the CLI's stdout")))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ffmpeg runs");
    let sink = sink.wait_with_output().expect("ffmpeg ends");
    let cli_status = cli.wait().expect("the CLI ends");
    let _ = source.wait();
    let cli_said = cli_said.join().expect("stderr reader");
    assert_eq!(cli_status.code(), Some(0), "neural-frame stream: {cli_status}; stderr:\n{cli_said}");
    let ff_said = String::from_utf8_lossy(&sink.stderr);
    assert!(sink.status.success(), "ffmpeg refused the stream ({}): {ff_said}", sink.status);
    let back = parse(&sink.stdout).unwrap_or_else(|e| panic!("ffmpeg's output: {e}"));
    assert_eq!((back.clip.width, back.clip.height), (128, 96), "the size ffmpeg read");
    assert_eq!(back.clip.frames.len(), 30, "the frames ffmpeg read");
    println!("ffmpeg round trip: 30 frames of 128×96 decoded by ffmpeg");
}

fn fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(s(path)).expect("a path");
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// SIGTERM while `stream` waits, before its first frame, for a writer of its input
/// FIFO or for a reader of its output FIFO: exit code 130 (docs/stream.md) within
/// a second, saying so.
#[test]
fn sigterm_while_waiting_on_a_fifo_ends_stream_at_once() {
    let d = dir("sigterm");
    let (input, output) = (d.join("in.fifo"), d.join("out.fifo"));
    fifo(&input);
    fifo(&output);
    let clip = d.join("clip.y4m");
    let mut y4m = b"YUV4MPEG2 W16 H8 F25:1 Ip A1:1 C444\n".to_vec();
    for k in 0..2u8 {
        y4m.extend_from_slice(b"FRAME\n");
        y4m.extend((0..16 * 8 * 3).map(|i| (i as u8).wrapping_mul(7).wrapping_add(k)));
    }
    std::fs::write(&clip, &y4m).expect("a clip");
    let out_file = d.join("out.y4m");
    for (what, args) in [
        ("its input", ["stream", "--backend", "cpu", "--model", MODEL, "--input", s(&input), "--output", s(&out_file)]),
        ("its output", ["stream", "--backend", "cpu", "--model", MODEL, "--input", s(&clip), "--output", s(&output)]),
    ] {
        let (code, took, stderr) = common::sigterm_when(&args, common::waits_on_a_fifo);
        assert_eq!(code, Some(130), "waiting on {what}: {stderr}");
        assert!(took < Duration::from_secs(1), "waiting on {what}: {took:?}");
        assert!(stderr.contains("interrupted"), "waiting on {what}: {stderr}");
    }
}

/// A model that takes more inputs than the frame is refused at the set-up, naming
/// its inputs and what to use instead (it failed at frame 1 with a library-only
/// remedy); a set-up refused leaves no output file it created, and an existing one
/// as it was.
#[test]
fn a_model_of_two_inputs_is_refused_at_set_up_leaving_the_output_alone() {
    let d = dir("two-inputs");
    let clip = d.join("clip.y4m");
    let mut y4m = b"YUV4MPEG2 W16 H8 F25:1 Ip A1:1 C444\nFRAME\n".to_vec();
    y4m.extend((0..16 * 8 * 3).map(|i| (i as u8).wrapping_mul(7)));
    std::fs::write(&clip, &y4m).expect("a clip");
    let (new, old) = (d.join("new.y4m"), d.join("old.y4m"));
    std::fs::write(&old, "kept").expect("an old file");
    for out in [&new, &old] {
        let model = "models/test/tiny-x1-f32-color-albedo.onnx";
        let o = common::neural_frame(
            &["stream", "--backend", "cpu", "--model", model, "--input", s(&clip), "--output", s(out)],
            &[],
        );
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains("`albedo`") && e.contains("neural-frame run --input") && !e.contains("frame 1"), "{e}");
    }
    assert!(!new.exists(), "the output the refused stream created is left behind");
    assert_eq!(std::fs::read_to_string(&old).ok().as_deref(), Some("kept"), "an existing output was changed");
}
