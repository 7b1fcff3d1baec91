//! SIGINT and SIGTERM as a flag: `serve` and `stream` finish the work in flight
//! and exit when it is set.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::bail;

/// Set by SIGINT and SIGTERM.
pub(crate) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Whether SIGINT or SIGTERM came.
pub(crate) fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Installs the handlers. A second signal ends the process at once (a drain that
/// hangs); system calls the signal interrupts resume.
pub(crate) fn install() -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; zeroed is an empty mask and no flags.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: the handler only stores to an atomic.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            bail!("installing the handler for signal {signal}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(())
}
