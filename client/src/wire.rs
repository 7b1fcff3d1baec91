//! Frames on a Unix stream socket, with file descriptors passed as
//! `SCM_RIGHTS` ancillary data on the frame's first byte.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::os::fd::AsRawFd;
//! use std::os::unix::net::UnixStream;
//!
//! use neural_frame_client::protocol::Message;
//! use neural_frame_client::wire;
//!
//! let (worker, client) = UnixStream::pair()?;
//! // Two descriptors travel with a GPU-mode Ready: pipes' read ends stand in for the timelines.
//! let (consumed, mut consumed_writer) = std::io::pipe()?;
//! let (ready, _ready_writer) = std::io::pipe()?;
//! wire::send(&worker, &Message::Ready { timelines: 2 }, &[consumed.as_raw_fd(), ready.as_raw_fd()])?;
//!
//! let (message, fds) = wire::recv(&client)?;
//! assert_eq!(message, Message::Ready { timelines: 2 });
//! assert_eq!(fds.len(), 2);
//! // The first descriptor received is the first pipe's read end: what is written shows through it.
//! consumed_writer.write_all(b"!")?;
//! let mut byte = [0u8; 1];
//! std::fs::File::from(fds.into_iter().next().ok_or("no descriptor")?).read_exact(&mut byte)?;
//! assert_eq!(&byte, b"!");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use crate::protocol::{ErrorCode, HEADER, MAX_FDS, MAX_MESSAGE, Message, WireError, kind_name};

/// What reading a frame can end in.
///
/// ```
/// use std::os::unix::net::UnixStream;
///
/// use neural_frame_client::protocol::{ErrorCode, Message};
/// use neural_frame_client::wire::{self, RecvError};
///
/// let (a, b) = UnixStream::pair()?;
/// wire::send_raw(&a, &[0xff; 8], &[])?; // a header that declares a frame of 4 GiB
/// drop(a);
/// match wire::recv(&b) {
///     Err(RecvError::Protocol(e)) => assert_eq!(e.code, ErrorCode::Malformed),
///     other => panic!("{other:?}"),
/// }
/// // A close at a frame boundary:
/// assert!(matches!(wire::recv(&b), Err(RecvError::Closed)));
///
/// // A close in the middle of a frame:
/// let (a, b) = UnixStream::pair()?;
/// wire::send_raw(&a, &Message::Consumed { frame: 1 }.encode()[..12], &[])?;
/// drop(a);
/// assert!(matches!(wire::recv(&b), Err(RecvError::Io(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub enum RecvError {
    /// The peer closed the connection at a frame boundary.
    Closed,
    /// The socket failed (or closed in the middle of a frame).
    Io(io::Error),
    /// The frame breaks the protocol.
    Protocol(WireError),
}

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecvError::Closed => write!(f, "the peer closed the connection"),
            RecvError::Io(e) => write!(f, "the socket failed: {e}"),
            RecvError::Protocol(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RecvError {}

/// Sends one message, with `fds` on its first byte. The number of descriptors
/// must be what the message declares.
///
/// The descriptors stay open on the sender's side: the receiver gets its own
/// copies.
///
/// ```
/// use std::io::ErrorKind;
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
///
/// use neural_frame_client::protocol::{Message, SlotMemory};
/// use neural_frame_client::wire;
///
/// let (client, worker) = UnixStream::pair()?;
/// let memory =
///     SlotMemory { allocation_size: 4096, buffer_size: 4096, memory_type_index: 0, usage: 0x20, dedicated: true };
/// // A file stands in for the memory fd vkGetMemoryFdKHR gives.
/// let slot = std::fs::File::open("/dev/null")?;
/// let slots = Message::Slots { inputs: vec![memory], outputs: vec![], timeline: false };
/// // One descriptor too few is refused before anything is sent.
/// assert_eq!(wire::send(&client, &slots, &[]).unwrap_err().kind(), ErrorKind::InvalidInput);
/// wire::send(&client, &slots, &[slot.as_raw_fd()])?;
/// let (got, fds) = wire::recv(&worker)?;
/// assert_eq!((got, fds.len()), (slots, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn send(stream: &UnixStream, message: &Message, fds: &[RawFd]) -> io::Result<()> {
    if fds.len() != message.fd_count() || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a {} message carries {} descriptors, not {}",
                kind_name(message.kind()),
                fds.len(),
                message.fd_count()
            ),
        ));
    }
    let bytes = message.encode();
    if bytes.len() > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {} message of {} bytes: the most is {MAX_MESSAGE}", kind_name(message.kind()), bytes.len()),
        ));
    }
    send_raw(stream, &bytes, fds)
}

/// Sends bytes as they are, with `fds` on the first (for tests of malformed input).
///
/// ```
/// use std::os::unix::net::UnixStream;
///
/// use neural_frame_client::protocol::{ErrorCode, Message};
/// use neural_frame_client::wire::{self, RecvError};
///
/// let (a, b) = UnixStream::pair()?;
/// // A Consumed frame whose header declares a descriptor that does not come.
/// let mut frame = Message::Consumed { frame: 1 }.encode();
/// frame[6] = 1;
/// wire::send_raw(&a, &frame, &[])?;
/// match wire::recv(&b) {
///     Err(RecvError::Protocol(e)) => assert_eq!(e.code, ErrorCode::FdCount),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn send_raw(stream: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut sent = 0;
    let mut first = true;
    while sent < bytes.len() || (first && bytes.is_empty()) {
        let rest = &bytes[sent..];
        let n = sendmsg(stream.as_raw_fd(), rest, if first { fds } else { &[] })?;
        first = false;
        sent += n;
        if bytes.is_empty() {
            break;
        }
    }
    Ok(())
}

fn sendmsg(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    // A cmsg buffer of u64s keeps the alignment cmsghdr needs.
    let mut control = [0u64; cmsg_words(MAX_FDS)];
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let payload = std::mem::size_of_val(fds) as u32;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(payload) } as usize;
        // SAFETY: msg_control points to a buffer of at least CMSG_SPACE(payload) bytes.
        let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        // SAFETY: cmsg points into `control` (non-null: the buffer holds a header).
        unsafe {
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as usize;
        }
        // SAFETY: CMSG_DATA has room for `payload` bytes (CMSG_SPACE above).
        unsafe { std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<RawFd>(), fds.len()) };
    }
    loop {
        // SAFETY: msg points at live buffers for the call's duration.
        let n = unsafe { libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

const fn cmsg_words(fds: usize) -> usize {
    // CMSG_SPACE(fds * 4) rounded up to u64 words, with room to spare for the header.
    (fds * 4 + 64).div_ceil(8)
}

/// Reads `buf.len()` bytes, taking any descriptors that arrive with them.
/// `Ok(false)`: the peer closed before the first byte.
fn recv_exact(socket: RawFd, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> Result<bool, RecvError> {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        let mut iov = libc::iovec { iov_base: rest.as_mut_ptr().cast(), iov_len: rest.len() };
        let mut control = [0u64; cmsg_words(MAX_FDS)];
        // SAFETY: msghdr is plain data.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg points at live buffers for the call's duration.
        let n = unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(RecvError::Io(e));
        }
        take_fds(&msg, fds);
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(RecvError::Protocol(WireError::new(
                ErrorCode::FdCount,
                format!("too many descriptors came with one message (the most is {MAX_FDS})"),
            )));
        }
        if n == 0 {
            if got == 0 {
                return Ok(false);
            }
            return Err(RecvError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the connection in the middle of a message",
            )));
        }
        got += n as usize;
    }
    Ok(true)
}

fn take_fds(msg: &libc::msghdr, fds: &mut Vec<OwnedFd>) {
    // SAFETY: msg was filled by recvmsg; the CMSG macros walk its control buffer.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: a header inside the control buffer.
        let (level, ty, len) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type, (*cmsg).cmsg_len) };
        if level == libc::SOL_SOCKET && ty == libc::SCM_RIGHTS {
            // SAFETY: CMSG_LEN(0) is arithmetic.
            let data_len = len - unsafe { libc::CMSG_LEN(0) } as usize;
            // SAFETY: the data of this header holds data_len bytes of descriptors.
            let data = unsafe { libc::CMSG_DATA(cmsg) }.cast::<RawFd>();
            for i in 0..data_len / std::mem::size_of::<RawFd>() {
                // SAFETY: in bounds (above); unaligned reads, as CMSG_DATA need not be aligned for RawFd.
                let fd = unsafe { data.add(i).read_unaligned() };
                // SAFETY: SCM_RIGHTS gave this process a new descriptor, now ours.
                fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        // SAFETY: walking the headers recvmsg wrote.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
}

/// Reads one frame and decodes it; checks that it came with the descriptors it
/// declares (excess descriptors are closed with the error).
///
/// Blocks until a whole frame has come; a peer that closes at a frame boundary
/// gives [`RecvError::Closed`].
///
/// ```
/// use std::os::unix::net::UnixStream;
///
/// use neural_frame_client::protocol::Message;
/// use neural_frame_client::wire::{self, RecvError};
///
/// let (worker, client) = UnixStream::pair()?;
/// wire::send(&worker, &Message::Done { frame: 1, infer_ms: 3.5 }, &[])?;
/// wire::send(&worker, &Message::Bye { reason: "shutting down".into() }, &[])?;
/// drop(worker);
/// let mut got = Vec::new();
/// loop {
///     match wire::recv(&client) {
///         Ok((message, _fds)) => got.push(message),
///         Err(RecvError::Closed) => break,
///         Err(e) => return Err(e.into()),
///     }
/// }
/// assert_eq!(got, [Message::Done { frame: 1, infer_ms: 3.5 }, Message::Bye { reason: "shutting down".into() }]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn recv(stream: &UnixStream) -> Result<(Message, Vec<OwnedFd>), RecvError> {
    let socket = stream.as_raw_fd();
    let mut fds = Vec::new();
    let mut header = [0u8; HEADER];
    if !recv_exact(socket, &mut header, &mut fds)? {
        return Err(RecvError::Closed);
    }
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let kind = u16::from_le_bytes([header[4], header[5]]);
    let declared = u16::from_le_bytes([header[6], header[7]]) as usize;
    if !(4..=MAX_MESSAGE - 4).contains(&len) {
        return Err(RecvError::Protocol(WireError::new(
            ErrorCode::Malformed,
            format!("a frame of {len} bytes (the most is {} and the least 4)", MAX_MESSAGE - 4),
        )));
    }
    let mut body = vec![0u8; len - 4];
    if !recv_exact(socket, &mut body, &mut fds)? && !body.is_empty() {
        return Err(RecvError::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection after a message's header",
        )));
    }
    let message = Message::decode(kind, &body).map_err(RecvError::Protocol)?;
    if declared != message.fd_count() || fds.len() != declared {
        return Err(RecvError::Protocol(WireError::new(
            ErrorCode::FdCount,
            format!(
                "a {} message needs {} file descriptors; its header declares {declared} and {} came",
                kind_name(kind),
                message.fd_count(),
                fds.len()
            ),
        )));
    }
    Ok((message, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;

    /// The tests that open descriptors run one at a time: one counts them.
    static FDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn fd_count() -> usize {
        std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
    }

    #[test]
    fn descriptors_travel_with_their_message() {
        let _serial = FDS.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = UnixStream::pair().expect("pair");
        let m = Message::Ready { timelines: 2 };
        let (r1, w1) = std::io::pipe().expect("pipe");
        let (r2, w2) = std::io::pipe().expect("pipe");
        send(&a, &m, &[r1.as_raw_fd(), r2.as_raw_fd()]).expect("send");
        send(&a, &Message::Consumed { frame: 3 }, &[]).expect("send");
        let (got, fds) = recv(&b).expect("recv");
        assert_eq!(got, m);
        assert_eq!(fds.len(), 2);
        // The descriptors are the pipes' read ends: a byte written shows through them.
        std::io::Write::write_all(&mut &w1, b"x").expect("write");
        let mut one = [0u8; 1];
        std::io::Read::read_exact(&mut std::fs::File::from(fds.into_iter().next().expect("fd")), &mut one)
            .expect("read");
        assert_eq!(&one, b"x");
        assert_eq!(recv(&b).expect("recv").0, Message::Consumed { frame: 3 });
        drop((w2, r1, r2));
        drop(a);
        assert!(matches!(recv(&b), Err(RecvError::Closed)));
    }

    #[test]
    fn a_wrong_descriptor_count_is_refused_and_closed() {
        let _serial = FDS.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = UnixStream::pair().expect("pair");
        let (r, _w) = std::io::pipe().expect("pipe");
        let before = fd_count();
        // A Ready that declares 2 and carries 1.
        let mut bytes = Message::Ready { timelines: 2 }.encode();
        send_raw(&a, &bytes, &[r.as_raw_fd()]).expect("send");
        match recv(&b) {
            Err(RecvError::Protocol(e)) => assert_eq!(e.code, ErrorCode::FdCount, "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(fd_count(), before, "the received descriptor was closed with the error");
        // A Consumed that carries one it does not declare.
        bytes = Message::Consumed { frame: 1 }.encode();
        send_raw(&a, &bytes, &[r.as_raw_fd()]).expect("send");
        assert!(matches!(recv(&b), Err(RecvError::Protocol(ref e)) if e.code == ErrorCode::FdCount));
        assert_eq!(fd_count(), before);
    }

    #[test]
    fn oversized_and_random_frames_are_malformed() {
        let _serial = FDS.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = UnixStream::pair().expect("pair");
        let mut big = Message::Consumed { frame: 1 }.encode();
        big[..4].copy_from_slice(&(1u32 << 30).to_le_bytes());
        send_raw(&a, &big, &[]).expect("send");
        assert!(matches!(recv(&b), Err(RecvError::Protocol(ref e)) if e.code == ErrorCode::Malformed));
        let (a, b) = UnixStream::pair().expect("pair");
        // Deterministic noise: a xorshift stream.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        send_raw(&a, &noise, &[]).expect("send");
        drop(a);
        assert!(recv(&b).is_err(), "random bytes are not a message");
    }
}
