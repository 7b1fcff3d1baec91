//! SIGINT and SIGTERM. While a command sets itself up (opening its files, which
//! may be FIFOs that block; reading the model; building the context) a signal
//! ends the process at once with the command's documented exit code: nothing is
//! in flight yet. Once `serve` or `stream` runs its loop ([`drain`]), a signal is
//! a flag: the work in flight finishes, and a second signal ends the process at
//! once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use anyhow::bail;

/// Set by SIGINT and SIGTERM once the command drains.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

/// The exit code a signal ends the process with at once; negative: drain instead.
static AT_ONCE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    // Only atomics, write(2) and _exit(2): async-signal-safe.
    let code = AT_ONCE.load(Ordering::SeqCst);
    if code >= 0 {
        const SAID: &[u8] = b"\nneural-frame: interrupted (SIGINT or SIGTERM) while setting up; nothing was written\n";
        // SAFETY: write and _exit are async-signal-safe; SAID is a static buffer.
        unsafe {
            libc::write(2, SAID.as_ptr().cast(), SAID.len());
            libc::_exit(code);
        }
    }
    if STOP.swap(true, Ordering::SeqCst) {
        const SAID: &[u8] = b"\nneural-frame: a second signal: ending at once\n";
        // SAFETY: as above.
        unsafe {
            libc::write(2, SAID.as_ptr().cast(), SAID.len());
            libc::_exit(SECOND.load(Ordering::SeqCst).max(0));
        }
    }
}

/// Whether SIGINT or SIGTERM came.
pub(crate) fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Installs the handlers: until [`drain`], a signal ends the process at once with
/// exit code `at_once`. A second signal while draining ends it at once; system
/// calls the signal interrupts resume.
pub(crate) fn install(at_once: u8) -> anyhow::Result<()> {
    AT_ONCE.store(at_once.into(), Ordering::SeqCst);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; zeroed is an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: the handler only touches atomics, writes to stderr and exits.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            bail!("installing the handler for signal {signal}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// From now on a first signal sets [`STOP`] (the work in flight finishes), and a
/// second one ends the process at once with `second`.
pub(crate) fn drain(second: u8) {
    SECOND.store(second.into(), Ordering::SeqCst);
    AT_ONCE.store(-1, Ordering::SeqCst);
}

/// The exit code of a second signal while draining.
static SECOND: AtomicI32 = AtomicI32::new(-1);
