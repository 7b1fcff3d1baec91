//! What the library announces (`log::warn!`, `log::info!`: fallbacks, slow paths, options
//! not in effect) handed to a C caller's callback: `nf_set_log_callback` installs a
//! `log::Log` of this crate the first time it is called, and only then. The C API is a
//! library of its own (its `log` is not the one of a Rust program's CLI, which installs its
//! own logger for its own copy); in a Rust program that links this crate as an rlib and
//! installed a logger first, the call is refused with `NF_STATUS_UNSUPPORTED`.

use std::cell::Cell;
use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::{OnceLock, RwLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::{Fail, guard, names, nf_status};

/// A log level: one of the `NF_LOG_*` values (the order of `log::Level`).
pub type nf_log_level = c_int;
/// No message (as `max_level`: turns the callback off).
pub const NF_LOG_OFF: nf_log_level = 0;
/// Errors: something failed that a call's status does not report (a context freed while
/// its frames never finished).
pub const NF_LOG_ERROR: nf_log_level = 1;
/// Warnings: a fallback or an option not in effect (the CPU backend instead of CUDA, cuDNN
/// refusing a kernel), said once.
pub const NF_LOG_WARN: nf_log_level = 2;
/// What the library chose and why (a slow path taken, an option not in effect).
pub const NF_LOG_INFO: nf_log_level = 3;
/// Steps of the set-up, with times.
pub const NF_LOG_DEBUG: nf_log_level = 4;
/// Everything, per frame.
pub const NF_LOG_TRACE: nf_log_level = 5;

/// The caller's log callback: `user` as given to `nf_set_log_callback`, the record's level
/// (`NF_LOG_ERROR` … `NF_LOG_TRACE`), and its text (NUL-terminated UTF-8, valid during the
/// call only: copy it to keep it; the library's names in it are the C API's).
pub type nf_log_callback = Option<unsafe extern "C" fn(user: *mut c_void, level: nf_log_level, message: *const c_char)>;

/// The callback and its user pointer.
#[derive(Clone, Copy)]
struct Sink {
    callback: unsafe extern "C" fn(*mut c_void, nf_log_level, *const c_char),
    user: *mut c_void,
}

// SAFETY: the caller promises (nf_set_log_callback's contract) that the callback may be
// called with `user` from any thread.
unsafe impl Send for Sink {}
// SAFETY: as above.
unsafe impl Sync for Sink {}

/// The callback in effect. Read-locked while it runs, so that `nf_set_log_callback` (which
/// write-locks) returns only once no call of the old one is running.
static SINK: RwLock<Option<Sink>> = RwLock::new(None);

thread_local! {
    /// Whether this thread is inside the callback: records it causes are dropped, and
    /// `nf_set_log_callback` is refused (either would wait for itself).
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// The logger `nf_set_log_callback` installs.
struct ToCallback;

static LOGGER: ToCallback = ToCallback;

impl Log for ToCallback {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record<'_>) {
        if !self.enabled(r.metadata()) || IN_CALLBACK.try_with(Cell::get).unwrap_or(true) {
            return;
        }
        // Held until the callback returns (nf_set_log_callback waits for it).
        let current = SINK.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(sink) = *current else { return };
        let from = if r.target().starts_with("neural_frame") { String::new() } else { format!("{}: ", r.target()) };
        let text = names::c_names(&format!("{from}{}", r.args()));
        let text = CString::new(text.replace('\0', "\u{FFFD}")).unwrap_or_default();
        let level = match r.level() {
            Level::Error => NF_LOG_ERROR,
            Level::Warn => NF_LOG_WARN,
            Level::Info => NF_LOG_INFO,
            Level::Debug => NF_LOG_DEBUG,
            Level::Trace => NF_LOG_TRACE,
        };
        let _ = IN_CALLBACK.try_with(|c| c.set(true));
        // SAFETY: the caller's callback, with its user pointer and a NUL-terminated text that
        // lives during the call (nf_set_log_callback's contract).
        unsafe { (sink.callback)(sink.user, level, text.as_ptr()) };
        let _ = IN_CALLBACK.try_with(|c| c.set(false));
        drop(current);
    }

    fn flush(&self) {}
}

/// Whether this crate's logger is the process's (for this crate's copy of `log`): installed
/// at the first call, or refused once for good.
fn installed() -> Result<(), Fail> {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    if *INSTALLED.get_or_init(|| log::set_logger(&LOGGER).is_ok()) {
        Ok(())
    } else {
        Err(Fail::new(
            nf_status::NF_STATUS_UNSUPPORTED,
            "another logger is installed for the `log` crate this library was linked with (a Rust program that \
             links neural-frame-c as an rlib and set its own logger): the library's messages go to that logger",
        ))
    }
}

/// Hands what the library announces (fallbacks, slow paths, options not in effect: the
/// messages the CLI prints with `-v`) to `callback`, for every record of `max_level` and more
/// severe (`NF_LOG_WARN`: warnings and errors; `NF_LOG_INFO` adds what the library chose and
/// why; `NF_LOG_DEBUG`, `NF_LOG_TRACE`: more). `callback` NULL, or `max_level`
/// `NF_LOG_OFF`, turns it off. Until the first call nothing is logged anywhere; the last call
/// wins (one callback per process). Messages name the C API's functions and constants.
///
/// Threads: the callback is called on the thread that logs, which is the thread of an
/// `nf_*` call or one of the library's own (fast start builds its fused session on one), and
/// from several threads at once: it must be thread-safe, and `user` usable from any thread.
/// A message the library logs while the callback runs on that thread (an `nf_*` call from
/// inside the callback) is dropped, and `nf_set_log_callback` from inside the callback is
/// refused. This call waits until calls of the old callback running on other threads have
/// returned: once it returns, the old callback is never called again and its `user` may be
/// freed. The callback must therefore not wait for a thread that is inside
/// `nf_set_log_callback`.
///
/// Status: `NF_STATUS_OK`; `NF_STATUS_INVALID_ARGUMENT` where `max_level` is none of the
/// `NF_LOG_*` values, or the call comes from inside the callback; `NF_STATUS_UNSUPPORTED`
/// where another logger took the library's `log` first (only in a Rust program that links
/// this crate as an rlib); `NF_STATUS_INTERNAL`: a bug.
///
/// # Safety
/// `callback` is NULL or a function that may be called as said above, with `user`, from any
/// thread, until a later call of `nf_set_log_callback` returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nf_set_log_callback(
    callback: nf_log_callback,
    user: *mut c_void,
    max_level: nf_log_level,
) -> nf_status {
    guard(|| {
        if IN_CALLBACK.try_with(Cell::get).unwrap_or(false) {
            return Err(Fail::invalid("nf_set_log_callback was called from inside the log callback"));
        }
        let filter = match max_level {
            NF_LOG_OFF => LevelFilter::Off,
            NF_LOG_ERROR => LevelFilter::Error,
            NF_LOG_WARN => LevelFilter::Warn,
            NF_LOG_INFO => LevelFilter::Info,
            NF_LOG_DEBUG => LevelFilter::Debug,
            NF_LOG_TRACE => LevelFilter::Trace,
            other => {
                return Err(Fail::invalid(format!(
                    "max_level {other} is none of NF_LOG_OFF, _ERROR, _WARN, _INFO, _DEBUG, _TRACE"
                )));
            }
        };
        installed()?;
        let sink = callback.map(|callback| Sink { callback, user });
        let mut current = SINK.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        *current = sink;
        log::set_max_level(if sink.is_some() { filter } else { LevelFilter::Off });
        Ok(())
    })
}
