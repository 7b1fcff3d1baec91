//! scripts/setup.sh, run again on a machine that has everything, installs nothing: it reads
//! ldconfig's cache without a pipe into `grep -q` (under `set -o pipefail`, grep's early exit
//! killed ldconfig with SIGPIPE now and then, a library that was there counted as missing, and
//! the script re-ran `apt-get update` and `apt-get install`, or pip for the CUDA wheels).
//!
//! The script runs with a PATH whose first directory holds a fake `ldconfig` (a long listing,
//! the libraries near its top, as on a machine with many libraries) and fake `apt-get`,
//! `sudo`, `python3` and `pip` that only write down that they were called. ORT_DYLIB_PATH
//! names an existing file, so the script neither installs ONNX Runtime nor links it.
//! `NEURAL_FRAME_SETUP_SCRIPT=path` checks another copy of the script (an older one).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs of the script with the long listing, for each kind of machine.
const RUNS_CPU: usize = 60;
const RUNS_GPU: usize = 15;

/// The libraries the script looks for: the Vulkan loader and the CUDA provider's libraries.
const LIBRARIES: &[&str] = &[
    "libvulkan.so.1",
    "libcudart.so.13",
    "libcublas.so.13",
    "libcufft.so.12",
    "libcurand.so.10",
    "libnvrtc.so.13",
    "libcudnn.so.9",
];

fn script() -> PathBuf {
    match std::env::var_os("NEURAL_FRAME_SETUP_SCRIPT") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup.sh"),
    }
}

/// A directory of fake commands and the file they write their calls to.
struct Fakes {
    dir: PathBuf,
    calls: PathBuf,
    listing: PathBuf,
}

impl Fakes {
    fn new(name: &str) -> Fakes {
        let dir = std::env::temp_dir().join(format!("neural-frame-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).expect("a temporary directory");
        let fakes = Fakes { calls: dir.join("calls"), listing: dir.join("ldconfig.txt"), dir };
        // `exec`: ldconfig's exit status is cat's, 141 when a reader leaves early (SIGPIPE).
        fakes.command("ldconfig", &format!("exec cat '{}'", fakes.listing.display()));
        for name in ["apt-get", "sudo", "python3", "pip", "pip3"] {
            fakes.command(name, &format!("echo \"{name} $*\" >> '{}'", fakes.calls.display()));
        }
        fakes
    }

    fn command(&self, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.join("bin").join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("a fake command is written");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("and made executable");
    }

    /// ldconfig -p's listing: the libraries the script looks for, then `filler` others.
    fn listing(&self, filler: usize) {
        let mut text = format!("{} libs found in cache `/etc/ld.so.cache'\n", LIBRARIES.len() + filler);
        for lib in LIBRARIES {
            let _ = writeln!(text, "\t{lib} (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/{lib}");
        }
        for n in 0..filler {
            let _ = writeln!(text, "\tlibfiller{n}.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfiller{n}.so.1");
        }
        std::fs::write(&self.listing, text).expect("the listing is written");
    }

    /// Runs the script once; the calls the fakes recorded (none: empty).
    fn run(&self, kind: &str) -> (Output, String) {
        let _ = std::fs::remove_file(&self.calls);
        let path = std::env::join_paths(
            std::iter::once(self.dir.join("bin"))
                .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .expect("a PATH");
        // Any existing file: the script only checks that the variable is set.
        let ort = script();
        let out = Command::new("bash")
            .arg(script())
            .arg(kind)
            .env("PATH", path)
            .env("ORT_DYLIB_PATH", ort)
            .env("XDG_DATA_HOME", self.dir.join("data"))
            .output()
            .expect("bash runs the script");
        let calls = std::fs::read_to_string(&self.calls).unwrap_or_default();
        (out, calls)
    }
}

impl Drop for Fakes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn describe(out: &Output, calls: &str) -> String {
    format!("exit {:?}; called:\n{calls}stderr:\n{}", out.status.code(), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn setup_installs_nothing_when_everything_is_there() {
    let script = script();
    assert!(script.is_file(), "{} is not a file", script.display());
    let fakes = Fakes::new("setup");

    // A short listing first: where the machine lacks what the script checks for outside
    // ldconfig (the Vulkan driver's and the validation layer's JSON files), the script rightly
    // installs them, and this test has nothing to check.
    fakes.listing(0);
    let (out, calls) = fakes.run("--cpu");
    assert!(out.status.success(), "{} failed: {}", script.display(), describe(&out, &calls));
    if !calls.is_empty() {
        eprintln!(
            "skipped: this machine lacks a Vulkan driver or the validation layer (run scripts/setup.sh); \
             the script called:\n{calls}"
        );
        return;
    }

    // 5,000 libraries (420 kB): far more than a pipe holds (64 kB), so a `grep -q` that stops at the
    // first lines leaves ldconfig writing into a closed pipe.
    fakes.listing(5_000);
    for (kind, runs) in [("--cpu", RUNS_CPU), ("--gpu", RUNS_GPU)] {
        for run in 1..=runs {
            let (out, calls) = fakes.run(kind);
            assert!(
                out.status.success() && calls.is_empty(),
                "{} {kind}, run {run} of {runs}: every library is in ldconfig's cache, yet the script \
                 installed something: {}",
                script.display(),
                describe(&out, &calls)
            );
        }
    }
}
