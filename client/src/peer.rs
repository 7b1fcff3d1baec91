//! What the client shares with the thread that reads the socket (the release of
//! the worker's timelines, the dead-worker rule), and who the worker is.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use ash::vk;

use crate::error::{Error, Result};

/// The client's copies of the worker's two timelines and the highest value
/// handed out on each, shared with the socket's reader thread: whoever learns
/// first that the worker is gone (the reader at EOF, or the client on a
/// timeout or a fault) signals them from the host, so that the renderer's
/// queue and fences never wait on a dead worker, even while the renderer is
/// not calling into the client.
pub(crate) struct Release {
    pub(crate) device: ash::Device,
    /// (input consumed, output ready), once imported.
    pub(crate) timelines: Option<(vk::Semaphore, vk::Semaphore)>,
    pub(crate) highest: (u64, u64),
}

impl Release {
    pub(crate) fn saw(&mut self, input_consumed: u64, output_ready: u64) {
        self.highest = (self.highest.0.max(input_consumed), self.highest.1.max(output_ready));
    }

    pub(crate) fn release(&mut self) {
        let Some((consumed, ready)) = self.timelines else { return };
        for (semaphore, value) in [(consumed, self.highest.0), (ready, self.highest.1)] {
            // SAFETY: the client's imports, alive while `timelines` holds them (the client clears
            // it before destroying them, under the same lock).
            let now = unsafe { self.device.get_semaphore_counter_value(semaphore) };
            if now.is_ok_and(|v| v < value) {
                let info = vk::SemaphoreSignalInfo::default().semaphore(semaphore).value(value);
                // SAFETY: as above, and `value` is above the counter; the worker that would have
                // signalled it is gone. A failure leaves nothing better to do.
                let _ = unsafe { self.device.signal_semaphore(&info) };
            }
        }
    }
}

pub(crate) type Shared = std::sync::Arc<std::sync::Mutex<Release>>;

pub(crate) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Release> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The worker must run as this user (or root): slot memory is handed to whoever
/// listens on the socket, and a path such as `/tmp/neural-frame-UID.sock` could
/// have been bound by someone else first.
pub(crate) fn check_worker_user(stream: &UnixStream, socket: &Path) -> Result<()> {
    // SAFETY: ucred is plain data.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len describe a buffer of the size SO_PEERCRED writes.
    let rc = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&raw mut cred).cast(), &mut len)
    };
    if rc != 0 {
        return Err(Error::Io {
            what: format!("learning who serves {} (SO_PEERCRED)", socket.display()),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    if cred.uid != me && cred.uid != 0 {
        return Err(Error::Unsupported {
            what: format!(
                "{} is served by user {} (pid {}), not by this user ({me}) or root: the client does not hand GPU \
                 memory to another user's process",
                socket.display(),
                cred.uid,
                cred.pid
            ),
            remedy: "start your own worker (neural-frame serve), or pick its socket with Options::socket".into(),
        });
    }
    Ok(())
}
