//! The command line's logger: the library logs through the `log` facade, and
//! this prints its records on stderr. Warnings and errors by default, `-v`
//! for what the library does step by step, `-vv` for more, `--quiet` for
//! errors only. `NEURAL_FRAME_TRACE=1` is the same as `-vv`. Every command
//! asks [`quiet`] before printing anything but an error or the JSON it was asked for.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use log::{Level, LevelFilter, Log, Metadata, Record};

struct Stderr {
    start: Instant,
}

impl Log for Stderr {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let from = if r.target().starts_with("neural_frame") { String::new() } else { format!("{}: ", r.target()) };
        match r.level() {
            Level::Error => eprintln!("neural-frame: error: {from}{}", r.args()),
            Level::Warn => eprintln!("neural-frame: warning: {from}{}", r.args()),
            _ => eprintln!("[neural-frame {:>9.3} ms] {from}{}", self.start.elapsed().as_secs_f64() * 1e3, r.args()),
        }
    }

    fn flush(&self) {}
}

/// `--quiet`: errors only.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether `--quiet` was given: print errors (and JSON asked for with `--json`) only.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Installs the logger once, at the level the flags ask for.
pub fn init(verbose: u8, quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
    static LOGGER: OnceLock<Stderr> = OnceLock::new();
    let traced = std::env::var_os("NEURAL_FRAME_TRACE").is_some_and(|v| !v.is_empty() && v != "0");
    let level = match (quiet, verbose.max(if traced { 2 } else { 0 })) {
        (true, _) => LevelFilter::Error,
        (false, 0) => LevelFilter::Warn,
        (false, 1) => LevelFilter::Info,
        (false, 2) => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    };
    let logger = LOGGER.get_or_init(|| Stderr { start: Instant::now() });
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}
