//! Helpers shared by the integration tests (tests/*.rs): a crate of its own, compiled once
//! rather than into each test binary.

pub mod contract;
pub mod foreign;
pub mod host_stream;
pub mod pipeline;
pub mod plane_pixels;
pub mod planes;
pub mod serve;
pub mod stream;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository's root (the `neural-frame` package's directory).
pub fn root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `neural-frame` binary (package `neural-frame-cli`): `NEURAL_FRAME_BIN`, else the one
/// cargo built beside this test (`target/<profile>/neural-frame`; `cargo test --workspace` and
/// `cargo test` at the root build it, and so does scripts/test).
pub fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NEURAL_FRAME_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test knows its path");
    // target/<profile>/deps/<test> → target/<profile>/neural-frame
    let deps = exe.parent().expect("the test's directory");
    let path = deps.parent().map(|dir| dir.join("neural-frame")).filter(|p| p.is_file());
    let build = "run `cargo test --workspace` (it builds the CLI package too), or set NEURAL_FRAME_BIN";
    let Some(path) = path else { panic!("the neural-frame binary is not built beside {}: {build}", exe.display()) };
    // A binary older than the library it links was built before the last library change:
    // `cargo test -p neural-frame` (or `--test X`) does not rebuild the CLI package.
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let newest_lib = std::fs::read_dir(deps)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        // The compiled library (.rlib), not the metadata that `cargo clippy` or `cargo check` write
        // (.rmeta), which says nothing of the binary's age.
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libneural_frame-") && n.ends_with(".rlib"))
        })
        .filter_map(|p| modified(&p))
        .max();
    if let (Some(lib), Some(binary)) = (newest_lib, modified(&path)) {
        assert!(binary >= lib, "{} is older than the library it is tested against: {build}", path.display());
    }
    path
}

/// Runs the `neural-frame` binary with `args` and extra environment.
pub fn neural_frame(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the neural-frame binary runs")
}

/// Starts `neural-frame` with `args`, sends it SIGTERM once `blocked` says (of its
/// pid) that it has reached the wait to interrupt, or after 3 s,
/// and waits (at most 10 s) for it to end: its exit code (`None`: killed by a
/// signal), how long it took after the signal, and its stderr.
pub fn sigterm_when(args: &[&str], blocked: impl Fn(u32) -> bool) -> (Option<i32>, std::time::Duration, String) {
    use std::time::{Duration, Instant};
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let log = std::env::temp_dir().join(format!("nf-sigterm-{}-{n}.log", std::process::id()));
    let mut child = Command::new(bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("the neural-frame binary runs");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let start = Instant::now();
    while !blocked(child.id()) && start.elapsed() < Duration::from_secs(3) {
        assert!(child.try_wait().expect("try_wait").is_none(), "it ended before the signal:\n{}", read());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.try_wait().expect("try_wait").is_none(), "it ended before the signal:\n{}", read());
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let signalled = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if signalled.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = signalled.elapsed();
    let stderr = read();
    let _ = std::fs::remove_file(&log);
    (status.code(), took, stderr)
}

/// Whether a thread of process `pid` waits in opening a FIFO for its other end
/// (the kernel's `wait_for_partner`, in /proc/PID/task/*/wchan).
pub fn waits_on_a_fifo(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.trim() == "wait_for_partner"))
}

/// Whether process `pid` has a handler of its own for SIGTERM (SigCgt in
/// /proc/PID/status): before it, SIGTERM ends the process by the signal.
pub fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0)
}

/// stdout and stderr as text, for assertion messages.
pub fn text(out: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Parses the binary's stdout as JSON.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(out)))
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// The reason every GPU test carries in its `#[ignore]`.
pub const GPU: &str =
    "needs an NVIDIA GPU with Vulkan and CUDA: run scripts/test -- --include-ignored on a machine with an NVIDIA GPU";

/// Prints the library's warnings and errors (the validation layer's messages
/// among them) to stderr, once per process.
pub fn log_to_stderr() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, m: &log::Metadata) -> bool {
            m.level() <= log::Level::Warn
        }
        fn log(&self, r: &log::Record) {
            if self.enabled(r.metadata()) {
                eprintln!("[{} {}] {}", r.level(), r.target(), r.args());
            }
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// Checks that the CUDA backend runs here: a tiny context on it builds. When it
/// does not, the test fails with the pre-flight report (it never passes without running).
pub fn gpu() {
    log_to_stderr();
    use neural_frame::{Backend, NeuralFrameContext, preflight};
    let attempt =
        NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").backend(Backend::Cuda).frame_size(8, 8).build();
    if let Err(e) = attempt {
        let options = preflight::Options { width: 64, height: 64, trials: 1, ..Default::default() };
        let report = preflight::run(&[], &options);
        panic!(
            "no GPU for this test ({e}): GPU tests run with `scripts/test -- --include-ignored` on a machine with \
             an NVIDIA GPU; pre-flight says:\n{}",
            preflight::render(&report)
        )
    }
}

/// Resident memory of this process (`VmRSS`), in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}
