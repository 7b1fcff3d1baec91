//! `neural-frame run` with inputs and outputs that are not regular files
//! (devices, symlinks, FIFOs, standard input and output), one path given for
//! two outputs, and the unclear cases of issue 25: each is written correctly
//! or refused before any work, with a message that names the problem and the fix.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{bin, text};

const TINY: &str = "models/test/tiny-x2-f32.onnx";

/// A fresh, empty directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpu_io").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

/// The repository's file `rel`, absolute (the runs below may start elsewhere).
fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel).display().to_string()
}

/// `run --backend cpu` of the tiny ×2 model at 32×24 with `args`, from `cwd`, with `stdin` and `stdout`.
fn run_in(cwd: &Path, args: &[&str], stdin: Stdio, stdout: Stdio) -> Output {
    let model = repo(TINY);
    let input = repo("models/coffee.png");
    let mut all = vec!["run", "--backend", "cpu", "--size", "32x24"];
    if !args.contains(&"--model") {
        all.extend(["--model", &model]);
    }
    if !args.contains(&"--input") {
        all.extend(["--input", &input]);
    }
    all.extend_from_slice(args);
    let child = Command::new(bin())
        .args(&all)
        .current_dir(cwd)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the neural-frame binary runs");
    child.wait_with_output().expect("it ends")
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    run_in(cwd, args, Stdio::null(), Stdio::piped())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 1 before any work (no context was set up), every needle in stderr.
fn refused_up_front(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    let e = stderr(o);
    for n in needles {
        assert!(e.contains(n), "{n:?} missing in:\n{}", text(o));
    }
    assert!(!e.contains("backend: cpu"), "refused only after the work began:\n{}", text(o));
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    let img = image::load_from_memory(bytes).unwrap_or_else(|e| panic!("not a PNG ({e}), {} bytes", bytes.len()));
    (img.width(), img.height())
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(s(p)).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", p.display());
}

fn is_char_device(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

#[test]
fn outputs_that_are_devices_or_directories_are_refused_before_any_work() {
    let d = dir("refused");
    // A symlink to /dev/full: refused, and the link left as it was.
    let link = d.join("full-link.png");
    std::os::unix::fs::symlink("/dev/full", &link).expect("symlink");
    let o = run(&d, &["--output", s(&link)]);
    refused_up_front(&o, &["a symlink to /dev/full", "character device", "`-` for standard output"]);
    assert!(std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()), "the link was replaced");
    // A copy of /dev/full (a device node: only where this test may create one, as root).
    let copy = d.join("full-copy.png");
    let copied = Command::new("cp").args(["-a", "/dev/full", s(&copy)]).stderr(Stdio::null()).status();
    if copied.is_ok_and(|c| c.success()) && is_char_device(&copy) {
        let o = run(&d, &["--output", s(&copy)]);
        refused_up_front(&o, &["character device", "not a file"]);
        assert!(is_char_device(&copy), "the device node was replaced by a file");
    } else {
        eprintln!("no copy of /dev/full here (not root): its case is left to the symlink's");
    }
    // A directory, and a path ending in `/` or `/.` (of a directory that does not exist yet).
    let o = run(&d, &["--output", s(&d)]);
    refused_up_front(&o, &["is a directory", "DIR/out.png"]);
    for p in [format!("{}/new/", d.display()), format!("{}/new/.", d.display())] {
        let o = run(&d, &["--output", &p]);
        refused_up_front(&o, &["ends in", "names a directory, not a file", "DIR/out.png"]);
    }
    assert!(!d.join("new").exists(), "{}", d.join("new").display());
    let left: Vec<_> = std::fs::read_dir(&d).expect("dir").filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(left.len() <= 2, "files left: {left:?}");
}

#[test]
fn a_fifo_output_is_written_as_a_stream() {
    let d = dir("fifo-out");
    let fifo = d.join("out.png");
    mkfifo(&fifo);
    // The reader: a process that can be ended if the FIFO is never written (or replaced by a file).
    let reader = Command::new("cat").arg(&fifo).stdout(Stdio::piped()).spawn().expect("cat");
    let o = run(&d, &["--output", s(&fifo)]);
    // Unblock a reader still waiting for a writer (none came): a writer that opens and closes.
    let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
    let mut reader = reader;
    let t = std::time::Instant::now();
    while reader.try_wait().ok().flatten().is_none() && t.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = reader.kill(); // still waiting on a FIFO that was replaced

    let bytes = reader.wait_with_output().expect("the reader").stdout;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stderr(&o).contains("is a FIFO: the PNG is written to it directly, as a stream"), "{}", text(&o));
    assert_eq!(png_size(&bytes), (64, 48));
    use std::os::unix::fs::FileTypeExt as _;
    assert!(std::fs::metadata(&fifo).is_ok_and(|m| m.file_type().is_fifo()), "the FIFO was replaced");
}

#[test]
fn standard_output_takes_the_png_and_a_full_device_is_an_error() {
    let d = dir("stdout");
    let o = run(&d, &["--output", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(png_size(&o.stdout), (64, 48), "stdout holds the PNG alone");
    let e = stderr(&o);
    assert!(e.contains("--output - is standard output") && e.contains("→ standard output 64×48"), "{e}");
    assert!(!d.join("-").exists(), "a file named `-` was written");
    // With --json the report goes to stderr too.
    let o = run(&d, &["--output", "-", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(png_size(&o.stdout), (64, 48));
    assert!(stderr(&o).contains("\"output_size\""), "{}", stderr(&o));
    // Standard output on a full device: an error, never rc 0.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let o = run_in(&d, &["--output", "-"], Stdio::null(), Stdio::from(full));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("No space left on device"), "{}", text(&o));
}

#[test]
fn one_path_for_two_outputs_is_refused_up_front() {
    let d = dir("twice");
    let two = repo("models/test/tiny-x2-f32-two-outputs.onnx");
    let x = d.join("x.png");
    for args in [
        vec!["--model", &two, "--output", s(&x), "--output", &format!("edges={}", x.display())],
        vec!["--model", &two, "--output", s(&x), "--output", &format!("edges={}/../twice/x.png", d.display())],
        vec!["--model", &two, "--output", "-", "--output", "edges=-"],
    ] {
        let o = run(&d, &args);
        refused_up_front(&o, &["each output needs a path of its own"]);
        assert!(!x.exists());
    }
    // The frame's default output (upscaled.png) and a named one at that path.
    let o = run(&d, &["--model", &two, "--output", "edges=upscaled.png"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("where the frame's output goes by default (upscaled.png)"), "{}", text(&o));
    assert!(!d.join("upscaled.png").exists());
    // The frame's output by its name at that path is fine.
    let o = run(&d, &["--model", &two, "--output", "image=upscaled.png", "--output", "edges=e.png"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(d.join("upscaled.png").is_file() && d.join("e.png").is_file());
    assert!(text(&o).contains("→ upscaled.png 64×48"), "{}", text(&o));
}

#[test]
fn standard_input_and_a_fifo_are_read_as_streams() {
    let d = dir("stdin");
    let photo = std::fs::read(repo("models/coffee.png")).expect("the sample");
    let out = d.join("out.png");
    // --input -
    let mut child = Command::new(bin())
        .args(["run", "--backend", "cpu", "--model", &repo(TINY), "--size", "32x24", "--input", "-", "--output"])
        .arg(&out)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    child.stdin.take().expect("stdin").write_all(&photo).expect("write stdin");
    let o = child.wait_with_output().expect("ends");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(png_size(&std::fs::read(&out).expect("out")), (64, 48));
    assert!(text(&o).contains("standard input 32×24"), "{}", text(&o));
    // A FIFO.
    let fifo = d.join("in.png");
    mkfifo(&fifo);
    let writer = {
        let (fifo, photo) = (fifo.clone(), photo.clone());
        std::thread::spawn(move || {
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo).and_then(|mut f| f.write_all(&photo));
        })
    };
    std::fs::remove_file(&out).expect("rm");
    let o = run(&d, &["--input", s(&fifo), "--output", s(&out)]);
    if o.status.code() != Some(0) {
        let _ = std::fs::File::open(&fifo); // unblock the writer
    }
    writer.join().expect("the writer");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!stderr(&o).contains("Illegal seek"), "{}", text(&o));
    assert_eq!(png_size(&std::fs::read(&out).expect("out")), (64, 48));
    // Empty standard input, and `-` twice: clear errors.
    let o = run(&d, &["--input", "-", "--output", s(&out)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("standard input: is empty"), "{}", text(&o));
    let o = run(&d, &["--input", "-", "--input", "albedo=-", "--output", s(&out)]);
    refused_up_front(&o, &["standard input can be read once"]);
}

#[test]
fn memory_budgets_that_overflow_are_refused_not_wrapped() {
    let d = dir("budget");
    for mib in ["17592186044416", "17592186044417", "99999999999999999999999"] {
        let o = run(&d, &["--memory-budget", mib, "--output", s(&d.join("b.png"))]);
        assert_eq!(o.status.code(), Some(2), "{mib}: {}", text(&o));
        assert!(stderr(&o).contains("more bytes than 64 bits can count"), "{mib}: {}", text(&o));
        assert!(stderr(&o).contains("--memory-budget 4096` is 4 GiB"), "{mib}: {}", text(&o));
    }
    let o = run(&d, &["--memory-budget", "-1", "--output", s(&d.join("b.png"))]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("whole number of MiB"), "{}", text(&o));
}

#[test]
fn negative_numbers_in_value_lists() {
    let d = dir("negative");
    let o = run(&d, &["--mean", "-0.5,0,0", "--std", "-1,1,1", "--output", s(&d.join("n.png"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(stderr(&o).contains("mean [-0.5, 0.0, 0.0]") || stderr(&o).contains("mean [-0.5, 0, 0]"), "{}", text(&o));
}

#[test]
fn tiles_an_overlap_apart_are_warned_of_with_the_fix() {
    let d = dir("tile");
    let o = run(&d, &["--tile", "73x73", "--output", s(&d.join("t.png"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let e = stderr(&o);
    assert!(e.contains("starts a tile every 1×1 pixels") && e.contains("--tile 96x96 or larger"), "{e}");
    assert!(e.contains("--tile-overlap (at most 18 for 73x73)"), "{e}");
    let o = run(&d, &["--tile", "96x96", "--output", s(&d.join("t.png"))]);
    assert!(!stderr(&o).contains("starts a tile every"), "{}", text(&o));
}

#[test]
fn quiet_prints_errors_only() {
    let d = dir("quiet");
    let o = run(&d, &["-q", "--output", s(&d.join("q.png"))]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stdout.is_empty() && o.stderr.is_empty(), "-q printed:\n{}", text(&o));
    let o = run(&d, &["-q", "--input", "no/such.png", "--output", s(&d.join("q.png"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("no/such.png"), "{}", text(&o));
}

/// `-q` on every other command: nothing on stdout or stderr when all goes well
/// (no report, no progress, no notices, no worker log), and still the errors.
#[test]
fn quiet_is_errors_only_for_every_command() {
    let d = dir("quiet-every");
    let (model, input) = (repo(TINY), repo("models/coffee.png"));
    let cache = d.join("tune.json");
    let quiet = |args: &[&str]| {
        let o = Command::new(bin())
            .args(args)
            .current_dir(&d)
            .env("NEURAL_FRAME_TUNE_CACHE", &cache)
            .stdin(Stdio::null())
            .output()
            .expect("the binary runs");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty() && o.stderr.is_empty(), "{args:?} printed with -q:\n{}", text(&o));
    };
    let tiny = ["--backend", "cpu", "--model", &model, "--size", "32x16", "--frames", "2"];
    quiet(&["-q", "preflight", "--stage", "1", "--size", "64x64", "--trials", "1"]);
    quiet(&[&["-q", "bench"], &tiny[..], &["--warmup", "1", "--input", &input]].concat());
    quiet(&[&["-q", "bench", "--serve"], &tiny[..], &["--warmup", "1", "--input", &input]].concat());
    quiet(&[&["-q", "tune"], &tiny[..], &["--warmup", "2", "--cache", s(&cache)]].concat());
    // `serve -q`: a client served and the worker stopped, without a line.
    let socket = d.join("worker.sock");
    let log = d.join("worker.log");
    let mut worker = Command::new(bin())
        .args(["-q", "serve", "--backend", "cpu", "--model", &model, "--socket", s(&socket)])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("the log"))
        .spawn()
        .expect("the worker starts");
    let start = std::time::Instant::now();
    while !socket.exists() {
        assert!(start.elapsed().as_secs() < 60, "the worker did not listen");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let client =
        common::serve::render(&socket, Path::new(&input), &d.join("served.png"), 2, &[]).output().expect("render");
    assert!(client.status.success(), "{}", text(&client));
    // SAFETY: kill on our own child's pid.
    assert_eq!(unsafe { libc::kill(worker.id() as i32, libc::SIGTERM) }, 0);
    let status = worker.wait().expect("the worker ends");
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success() && said.is_empty(), "serve -q ({status}) printed:\n{said}");
    // An error still shows.
    let o = Command::new(bin())
        .args(["-q", "bench", "--backend", "cpu", "--model", "no/such.onnx"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("no/such.onnx"), "{}", text(&o));
}

/// A model input given twice is named as such before any work, not blamed on
/// the model's `scale` metadata after the frame failed.
#[test]
fn an_input_given_twice_is_named() {
    let d = dir("input-twice");
    let model = repo("models/test/tiny-x1-f32-color-albedo.onnx");
    let pic = repo("models/coffee.png");
    let o = run(
        &d,
        &["--model", &model, "--input", &pic, "--input", &format!("albedo={pic}"), "--input", &format!("albedo={pic}")],
    );
    refused_up_front(&o, &["--input albedo=… is given twice", "each model input takes one picture"]);
    assert!(!stderr(&o).contains("scale"), "{}", text(&o));
}

/// ONNX Runtime's own error line (with ANSI colour codes) is not printed before
/// the command line's message when a frame fails; with `-v` it is, through the log.
#[test]
fn onnx_runtime_lines_go_through_the_log() {
    let d = dir("ort-lines");
    let model = repo("models/test/tiny-x2-f32-says-x3.onnx");
    let o = run(&d, &["--model", &model, "--output", s(&d.join("o.png"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = stderr(&o);
    assert!(e.contains("neural-frame: error: running the frame"), "{e}");
    assert!(!e.contains('\u{1b}') && !e.contains("[E:onnxruntime"), "ONNX Runtime printed on its own:\n{e}");
    let o = run(&d, &["-v", "--model", &model, "--output", s(&d.join("o.png"))]);
    let e = stderr(&o);
    assert!(e.contains("onnxruntime: error (") && !e.contains('\u{1b}'), "{e}");
}

/// Appends a `metadata_props` entry (ModelProto field 14) to a model's protobuf.
fn with_metadata(model: &Path, key: &str, value: &str) -> Vec<u8> {
    fn varint(mut n: usize, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    fn field(tag: u8, data: &[u8], out: &mut Vec<u8>) {
        out.push(tag);
        varint(data.len(), out);
        out.extend_from_slice(data);
    }
    let mut entry = Vec::new();
    field(0x0a, key.as_bytes(), &mut entry);
    field(0x12, value.as_bytes(), &mut entry);
    let mut bytes = std::fs::read(model).expect("the model");
    field(0x72, &entry, &mut bytes);
    bytes
}

#[test]
fn a_huge_metadata_value_is_not_echoed_whole() {
    let d = dir("metadata");
    let model = d.join("huge-scale.onnx");
    std::fs::write(&model, with_metadata(Path::new(&repo(TINY)), "scale", &"9".repeat(1_000_000))).expect("write");
    let o = run(&d, &["--model", s(&model), "--output", s(&d.join("m.png"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = stderr(&o);
    assert!(e.len() < 4000, "{} bytes of stderr", e.len());
    assert!(e.contains("metadata scale `9999") && e.contains("characters left out"), "{e}");
}

#[test]
fn an_ort_library_that_is_a_directory() {
    let d = dir("ort-dir");
    std::fs::write(d.join("libonnxruntime.so.1.31.1"), b"").expect("write");
    let o = run(&d, &["--ort-library", s(&d), "--output", s(&d.join("o.png"))]);
    refused_up_front(&o, &["is a directory", "give the ONNX Runtime library file itself", "libonnxruntime.so.1.31.1"]);
    assert!(!stderr(&o).contains("does not exist"), "{}", text(&o));
}

#[test]
fn a_png_header_beyond_the_size_limit_is_named() {
    let d = dir("huge-header");
    let png = d.join("huge.png");
    let mut f = std::fs::File::create(&png).expect("create");
    f.write_all(b"\x89PNG\r\n\x1a\n").expect("write");
    let chunk = |f: &mut std::fs::File, kind: &[u8], data: &[u8]| {
        let mut crc = flate_crc(kind);
        crc = flate_crc_update(crc, data);
        f.write_all(&(data.len() as u32).to_be_bytes()).and_then(|()| f.write_all(kind)).expect("write");
        f.write_all(data).and_then(|()| f.write_all(&(!crc).to_be_bytes())).expect("write");
    };
    let mut ihdr = Vec::new();
    ihdr.extend(2_147_483_647u32.to_be_bytes());
    ihdr.extend(1u32.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]);
    chunk(&mut f, b"IHDR", &ihdr);
    // Ten zero bytes as zlib's stored block: header, final block of 10 bytes, Adler-32 of ten zeros.
    let idat = [0x78, 0x01, 0x01, 10, 0, !10, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x0a, 0x00, 0x01];
    chunk(&mut f, b"IDAT", &idat);
    chunk(&mut f, b"IEND", &[]);
    drop(f);
    let o = run(&d, &["--input", s(&png), "--output", s(&d.join("o.png"))]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = stderr(&o);
    assert!(e.contains("2147483647×1") && e.contains("too large") && e.contains("65536 pixels a side"), "{e}");
    assert!(!e.contains("Memory limit exceeded"), "{e}");
}

/// CRC-32 (PNG's) of `data`, before the final inversion.
fn flate_crc(data: &[u8]) -> u32 {
    flate_crc_update(0xffff_ffff, data)
}

fn flate_crc_update(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { 0xedb8_8320 ^ (crc >> 1) } else { crc >> 1 };
        }
    }
    crc
}
