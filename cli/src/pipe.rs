//! Frames into a pipe without copying them into it: vmsplice(2) maps the frame's
//! pages into the pipe, so the writer does not copy 12 MB a 4K frame (a pipe's
//! write(2) does, and the reader copies again). The pages stay the pipe's until its
//! reader has read them: a frame's buffer is held, neither reused nor freed, until
//! more bytes than the pipe holds have been written after it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

/// The capacity of the pipe or FIFO `fd` (F_GETPIPE_SZ), or None when it is not one.
pub(crate) fn capacity(fd: RawFd) -> Option<usize> {
    // SAFETY: fcntl on a descriptor the caller holds open; F_GETPIPE_SZ only reads.
    let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    usize::try_from(size).ok().filter(|&s| s > 0)
}

/// A pipe that frames are spliced into, and the buffers it still refers to.
pub(crate) struct SplicedPipe {
    fd: RawFd,
    capacity: usize,
    /// Buffers spliced, with the byte count written when each ended.
    held: VecDeque<(Vec<u8>, u64)>,
    written: u64,
}

impl SplicedPipe {
    /// Splices into the pipe `fd` of `capacity` bytes. The caller keeps `fd` open for as
    /// long as this value is used.
    pub(crate) fn new(fd: RawFd, capacity: usize) -> Self {
        Self { fd, capacity, held: VecDeque::new(), written: 0 }
    }

    /// Splices all of `frame` into the pipe and holds the buffer; returns the buffers
    /// the pipe no longer refers to (their bytes were read), for reuse.
    pub(crate) fn splice(&mut self, frame: Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
        let mut rest: &[u8] = &frame;
        while !rest.is_empty() {
            let iov = libc::iovec { iov_base: rest.as_ptr() as *mut libc::c_void, iov_len: rest.len() };
            // SAFETY: iov names live memory of `frame`, which is held below (not reused or freed)
            // until the pipe's reader has consumed it; the kernel only reads it.
            let k = unsafe { libc::vmsplice(self.fd, &iov, 1, 0) };
            if k < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                self.hold(frame);
                return Err(e);
            }
            rest = &rest[k as usize..];
        }
        self.written += frame.len() as u64;
        self.hold(frame);
        let mut free = Vec::new();
        while let Some((_, end)) = self.held.front() {
            // Once more than the pipe holds came after a buffer, its reader has read all of it.
            if self.written - end <= self.capacity as u64 {
                break;
            }
            free.extend(self.held.pop_front().map(|(b, _)| b));
        }
        Ok(free)
    }

    fn hold(&mut self, frame: Vec<u8>) {
        self.held.push_back((frame, self.written));
    }
}

impl Drop for SplicedPipe {
    fn drop(&mut self) {
        // The last buffers may still be in the pipe, unread: freeing them would let the
        // allocator hand their pages out again while the reader reads them. They are left
        // to the process's end (at most the pipe's capacity and one frame).
        for (buffer, _) in self.held.drain(..) {
            std::mem::forget(buffer);
        }
    }
}
