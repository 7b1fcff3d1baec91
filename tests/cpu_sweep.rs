//! A new user's bad-input sweep of `neural-frame run`, `preflight` and `bench`
//! on the CPU backend: each bad input is refused early with a message that
//! says what is wrong, nothing crashes, and no output or temporary file is
//! left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{json, neural_frame, text};

const TINY: &str = "models/test/tiny-x2-f32.onnx";

/// A fresh, empty directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpu_sweep").join(name);
    if d.exists() {
        make_writable(&d);
        std::fs::remove_dir_all(&d).unwrap_or_else(|e| panic!("clearing {}: {e}", d.display()));
    }
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn make_writable(d: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Temporary files of the output's naming (`.NAME.*.tmp`) beside it.
fn temps(out: &Path) -> Vec<String> {
    let prefix = format!(".{}.", out.file_name().expect("file name").to_string_lossy());
    let mut v: Vec<String> = std::fs::read_dir(out.parent().expect("dir"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix) && n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `run` on the tiny model with `args`, writing to `out`.
fn run(args: &[&str], out: &Path) -> Output {
    let mut all = vec!["run", "--backend", "cpu", "--model", TINY];
    all.extend_from_slice(args);
    all.extend(["--output", s(out)]);
    neural_frame(&all, &[])
}

/// Exit 1, every needle in stderr, no output and no temporary file.
fn refused(o: &Output, out: &Path, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    let e = stderr(o);
    for n in needles {
        assert!(e.contains(n), "{n:?} missing in:\n{}", text(o));
    }
    assert!(!out.exists(), "{} was written:\n{}", out.display(), text(o));
    assert!(temps(out).is_empty(), "temporary files left: {:?}", temps(out));
}

/// A clap usage error (exit 2) whose message contains every needle.
fn usage_error(args: &[&str], needles: &[&str]) {
    let o = neural_frame(args, &[]);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    let e = stderr(&o);
    for n in needles {
        assert!(e.contains(n), "{args:?}: {n:?} missing in:\n{}", text(&o));
    }
}

/// The context is built (and inference can start) only after this line is printed.
fn reached_the_context(o: &Output) -> bool {
    stderr(o).contains("backend: ")
}

// ---- 1. large numbers ----

#[test]
fn run_refuses_a_huge_size_before_allocating() {
    let out = dir("huge-size").join("out.png");
    let o = run(&["--size", "100000x100000"], &out);
    refused(&o, &out, &["--size 100000x100000", "too large", "1 GiB"]);
    assert!(!reached_the_context(&o), "{}", text(&o));
    // Within the host budget but beyond the device: the device's limit is named.
    let o = run(&["--size", "16000x16000"], &out);
    refused(&o, &out, &["maxImageDimension2D"]);
}

#[test]
fn preflight_refuses_a_huge_size_naming_the_device_limit() {
    let o = neural_frame(&["preflight", "--stage", "1", "--size", "100000x100000"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("FAILED") && t.contains("maxImageDimension2D") && t.contains("100000×100000"), "{}", text(&o));
    let o = neural_frame(&["preflight", "--stage", "1", "--size", "1x100000", "--json"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let j = json(&o);
    assert_eq!(j["stages"][0]["status"], "error", "{j}");
    assert!(j["stages"][0]["reason"].as_str().is_some_and(|r| r.contains("maxImageDimension2D")), "{j}");
}

#[test]
fn frame_counts_out_of_range_are_usage_errors() {
    for frames in ["0", "18446744073709551615", "1000000000000", "1000001", "-1", "many"] {
        let mut args =
            vec!["run", "--backend", "cpu", "--model", TINY, "--size", "8x8", "--output", "/nonexistent/x.png"];
        args.extend(["--frames", frames]);
        usage_error(&args, &["--frames"]);
    }
    usage_error(&["run", "--frames", "0"], &["must be a whole number from 1 to 1000000, got `0`"]);
    usage_error(&["bench", "--backend", "cpu", "--frames", "0"], &["--frames", "from 1 to 100000"]);
    usage_error(&["bench", "--backend", "cpu", "--frames", "18446744073709551615"], &["--frames"]);
    usage_error(&["bench", "--backend", "cpu", "--warmup", "100000000"], &["--warmup", "from 0 to 10000"]);
    usage_error(&["bench", "--backend", "cpu", "--slots", "0"], &["--slots", "from 1 to 64"]);
    usage_error(&["preflight", "--trials", "0"], &["--trials", "from 1 to 1000"]);
    usage_error(&["preflight", "--trials", "18446744073709551615"], &["--trials"]);
}

#[test]
fn bench_refuses_a_huge_size() {
    let o = neural_frame(&["bench", "--backend", "cpu", "--model", TINY, "--size", "100000x100000"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("too large"), "{}", text(&o));
}

// ---- 2. unclear errors ----

#[test]
fn a_model_path_that_is_a_directory() {
    let out = dir("model-dir").join("out.png");
    let o =
        neural_frame(&["run", "--backend", "cpu", "--model", "models/test", "--size", "8x8", "--output", s(&out)], &[]);
    refused(&o, &out, &["models/test", "is a directory, not an ONNX model file"]);
    assert!(!stderr(&o).contains("no such file"), "{}", text(&o));
}

/// Whether `setpriv` can run a command as `nobody` here (we are root with the tool installed).
fn setpriv_nobody() -> bool {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn an_unreadable_model() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = dir("unreadable");
    // Open to everyone, so that a run as `nobody` gets as far as the model.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod 777");
    let model = d.join("locked.onnx");
    // Not a model either: read or not, the run must fail.
    std::fs::write(&model, b"not a protobuf").expect("write");
    std::fs::set_permissions(&model, std::fs::Permissions::from_mode(0o000)).expect("chmod 000");
    let out = d.join("out.png");
    let args = ["run", "--backend", "cpu", "--model", s(&model), "--size", "8x8", "--output", s(&out)];

    let o = neural_frame(&args, &[]);
    // Holds either way: exit 1, the model named, nothing written.
    refused(&o, &out, &[s(&model)]);
    let readable_here = std::fs::File::open(&model).is_ok();
    if !readable_here {
        refused(&o, &out, &["permission denied", "chmod"]);
        assert!(!stderr(&o).contains("error number 13"), "{}", text(&o));
        return;
    }
    // Root (or CAP_DAC_OVERRIDE) reads a chmod-000 file: the permission check
    // cannot be seen from this process. Try as `nobody`.
    refused(&o, &out, &["not an ONNX model"]);
    if setpriv_nobody() {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(common::bin())
            .args(args)
            .output()
            .expect("setpriv runs");
        refused(&o, &out, &[s(&model), "permission denied", "chmod"]);
        eprintln!(
            "an_unreadable_model: this test runs as root; the permission check was exercised as `nobody` via setpriv"
        );
    } else {
        eprintln!(
            "an_unreadable_model: NOT EXERCISED: this process can read a chmod-000 file (root?) and setpriv cannot \
             run as nobody; only the exit code and the absent output were checked"
        );
    }
}

#[test]
fn a_wrong_scale_in_the_metadata_is_named() {
    let out = dir("says-x3").join("out.png");
    let o = neural_frame(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32-says-x3.onnx",
            "--size",
            "8x8",
            "--output",
            s(&out),
        ],
        &[],
    );
    refused(&o, &out, &["`scale` metadata says ×3", "real output size"]);
    // The same network with the right metadata runs.
    let o = run(&["--size", "8x8"], &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn negative_and_zero_sizes_are_reported_by_the_size_parser() {
    for (size, needle) in [
        ("-5x10", "width must be a positive integer"),
        ("5x-10", "height must be a positive integer"),
        ("0x10", "width must be a positive integer"),
        ("10x", "height must be a positive integer"),
        ("10", "is not WIDTHxHEIGHT"),
        ("5000000000x2", "too large"),
    ] {
        usage_error(&["run", "--backend", "cpu", "--size", size], &[needle]);
        usage_error(&["preflight", "--size", size], &[needle]);
        usage_error(&["bench", "--backend", "cpu", "--size", size], &[needle]);
    }
    let o = neural_frame(&["run", "--size", "-5x10"], &[]);
    assert!(!stderr(&o).contains("unexpected argument"), "{}", text(&o));
}

#[test]
fn a_bad_output_path_fails_before_the_model_runs() {
    let d = dir("bad-output");
    // A directory.
    let o = run(&["--size", "8x8"], &d);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains(&format!("{}: is a directory", d.display())), "{}", text(&o));
    assert!(!reached_the_context(&o), "{}", text(&o));
    assert!(std::fs::read_dir(&d).expect("dir").next().is_none(), "something was written into {}", d.display());
    // A directory that cannot be made (under /proc nothing can be created, even by root).
    let out = Path::new("/proc/neural-frame-sweep/out.png");
    let o = run(&["--size", "8x8"], out);
    refused(&o, out, &["/proc/neural-frame-sweep/out.png", "cannot create its directory"]);
    assert!(!reached_the_context(&o), "{}", text(&o));
    // A file name ending in `..`.
    let o = run(&["--size", "8x8"], &d.join(".."));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!reached_the_context(&o), "{}", text(&o));
}

// ---- 3. leftover temporary files ----

/// A process id that is certainly not running: one that has run and been waited for.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn `true`");
    let pid = child.id();
    child.wait().expect("wait");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "pid {pid} was reused already");
    pid
}

#[test]
fn stale_temporary_files_of_dead_processes_are_removed_and_nothing_else() {
    let d = dir("stale");
    let out = d.join("out.png");
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .expect("/proc/sys/kernel/pid_max")
        .trim()
        .parse()
        .expect("a number");
    let beyond = format!(".out.png.{}.tmp", pid_max + 1);
    let waited = format!(".out.png.{}.tmp", dead_pid());
    let live = format!(".out.png.{}.tmp", std::process::id());
    let keep = [
        live.clone(),
        ".out.png.tmp".to_string(),
        ".out.png.0.tmp".to_string(),
        format!(".out.png.0{}.tmp", pid_max + 1),
        format!(".out.png.{}.tmp.bak", pid_max + 1),
        format!(".other.png.{}.tmp", pid_max + 1),
        format!("out.png.{}.tmp", pid_max + 1),
    ];
    for f in keep.iter().chain([&beyond, &waited]) {
        std::fs::write(d.join(f), b"x").expect("write");
    }
    // A directory of the naming is not ours to remove either.
    let dir_like = format!(".out.png.{}.tmp", pid_max + 2);
    std::fs::create_dir(d.join(&dir_like)).expect("mkdir");

    let o = run(&["--size", "8x8"], &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.is_file());
    for gone in [&beyond, &waited] {
        assert!(!d.join(gone).exists(), "{gone} survived:\n{}", text(&o));
        assert!(stderr(&o).contains(&format!("removed {}", d.join(gone).display())), "{}", text(&o));
    }
    for k in &keep {
        assert!(d.join(k).is_file(), "{k} was removed:\n{}", text(&o));
    }
    assert!(d.join(&dir_like).is_dir(), "{dir_like} was removed");
}

/// A child process that is killed if the test fails while it runs.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn kill_9_mid_run_leaves_no_output_and_the_next_run_cleans_up() {
    let d = dir("kill");
    let out = d.join("out.png");
    // Far more frames than run in the time before the kill.
    let mut child = Killed(
        Command::new(common::bin())
            .args(["run", "--backend", "cpu", "--model", TINY, "--size", "64x36", "--frames", "1000000"])
            .args(["--output", s(&out)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    let tmp = d.join(format!(".out.png.{}.tmp", child.0.id()));
    let t = Instant::now();
    while !tmp.exists() {
        assert!(t.elapsed() < Duration::from_secs(60), "{} never appeared", tmp.display());
        assert!(child.0.try_wait().expect("try_wait").is_none(), "the run ended before it was killed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    assert!(child.0.try_wait().expect("try_wait").is_none(), "the run ended before it was killed");
    child.0.kill().expect("SIGKILL");
    let status = child.0.wait().expect("wait");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status:?}");
    assert!(!out.exists(), "a killed run left {}", out.display());
    assert!(tmp.exists(), "the killed run's temporary file is expected to remain until the next run");

    let o = run(&["--size", "8x8"], &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.is_file());
    assert!(temps(&out).is_empty(), "temporary files survived the next run: {:?}\n{}", temps(&out), text(&o));
}

// ---- what already holds ----

#[test]
fn concurrent_runs_write_identical_pngs() {
    let d = dir("concurrent");
    let single = d.join("single.png");
    let o = run(&["--size", "48x27"], &single);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let reference = std::fs::read(&single).expect("read");
    let outs: Vec<PathBuf> = (0..4).map(|i| d.join(format!("c{i}.png"))).collect();
    let children: Vec<_> = outs
        .iter()
        .map(|out| {
            Command::new(common::bin())
                .args(["run", "--backend", "cpu", "--model", TINY, "--size", "48x27", "--output", s(out)])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for (child, out) in children.into_iter().zip(&outs) {
        let o = child.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let bytes = std::fs::read(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        assert!(bytes == reference, "{} differs from the single run's PNG", out.display());
        assert!(temps(out).is_empty(), "{:?}", temps(out));
    }
}

#[test]
fn a_full_disk_gives_a_clean_error_and_no_output() {
    let d = dir("full");
    let out = d.join("out.png");
    // At most one block may be written; SIGXFSZ is ignored, so the write fails with EFBIG.
    let o = Command::new("sh")
        .args(["-c", r#"ulimit -f 1; trap "" XFSZ; exec "$0" "$@""#])
        .arg(common::bin())
        .args(["run", "--backend", "cpu", "--model", TINY, "--size", "64x36", "--output", s(&out)])
        .output()
        .expect("sh runs");
    refused(&o, &out, &[s(&out), "File too large"]);
}

#[test]
fn a_read_only_directory_gives_a_clean_error() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = dir("read-only");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).expect("chmod 555");
    let probe = d.join("probe");
    let mode_bits_hold = std::fs::write(&probe, b"x").is_err();
    let _ = std::fs::remove_file(&probe);
    let out = if mode_bits_hold {
        d.join("out.png")
    } else {
        // Root ignores mode bits; creating a file under /proc fails even for root.
        eprintln!("a_read_only_directory_gives_a_clean_error: mode bits do not hold here (root); using /proc instead");
        PathBuf::from("/proc/neural-frame-sweep.png")
    };
    let o = run(&["--size", "8x8"], &out);
    make_writable(&d);
    refused(&o, &out, &[s(&out), "cannot create the temporary file"]);
    assert!(!reached_the_context(&o), "{}", text(&o));
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
        }
    }
    !c
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend((data.len() as u32).to_be_bytes());
    let mut body = kind.to_vec();
    body.extend_from_slice(data);
    png.extend_from_slice(&body);
    png.extend(crc32(&body).to_be_bytes());
}

#[test]
fn a_png_declaring_a_huge_size_is_refused_without_allocating() {
    assert_eq!(crc32(b"IEND"), 0xae42_6082, "the CRC used to build the PNG");
    let d = dir("huge-png");
    let picture = d.join("huge.png");
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend(100_000u32.to_be_bytes());
    ihdr.extend(100_000u32.to_be_bytes());
    ihdr.extend([8, 6, 0, 0, 0]); // 8-bit RGBA, deflate, no filter, no interlace
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    chunk(&mut png, b"IEND", &[]);
    std::fs::write(&picture, &png).expect("write");
    assert!(
        image::ImageReader::open(&picture).expect("open").into_dimensions().expect("a valid header")
            == (100_000, 100_000)
    );

    let out = d.join("out.png");
    let o =
        neural_frame(&["run", "--backend", "cpu", "--model", TINY, "--input", s(&picture), "--output", s(&out)], &[]);
    refused(&o, &out, &[s(&picture), "100000×100000", "too large"]);
    assert!(!reached_the_context(&o), "{}", text(&o));
}

#[test]
fn memory_stays_flat_over_many_frames() {
    let out = dir("rss").join("out.png");
    let rss = |frames: &str| -> f64 {
        let o = run(&["--size", "64x36", "--frames", frames, "--json"], &out);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let j = json(&o);
        assert_eq!(j["frames"].as_u64(), frames.parse().ok(), "{j}");
        j["max_rss_mib"].as_f64().unwrap_or_else(|| panic!("no max_rss_mib: {j}"))
    };
    let (a, b, c) = (rss("30"), rss("120"), rss("480"));
    eprintln!("peak RSS: 30 frames {a:.1} MiB, 120 frames {b:.1} MiB, 480 frames {c:.1} MiB");
    assert!(a > 1.0, "{a} MiB is not a plausible peak RSS");
    assert!(b <= a + 16.0 && c <= a + 16.0, "peak RSS grows with frames: {a:.1} → {b:.1} → {c:.1} MiB");
}
