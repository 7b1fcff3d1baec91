//! A client's slot memory, checked before any driver call sees it: a memory
//! file (a memfd, as Mesa's software driver exports its memory) must hold what
//! the driver will map of it, now and for as long as the worker uses it. A
//! shorter file faults (SIGBUS) when touched, and a fault kills the worker with
//! every client's session.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt as _;

use neural_frame_client::protocol::ErrorCode;

/// What a driver asks of the memory files it imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Driver {
    /// Mesa's lavapipe (`driverName` "llvmpipe"): its exports are memfds that start
    /// with a header (Mesa's `os_memory_fd.c`: the mapping's size and the data's
    /// offset as two native-endian `size_t`, then 16 bytes naming the driver build),
    /// and its import maps the header's size, whatever the file's length.
    MesaMemfd,
    /// Any other: the memory is the allocation itself.
    Plain,
}

impl Driver {
    /// The driver of the worker's device, by its `driverName`.
    pub(crate) fn of(driver_name: &str) -> Self {
        if driver_name == "llvmpipe" { Driver::MesaMemfd } else { Driver::Plain }
    }
}

/// Checks the memory file behind a slot's `fd` of `allocation` bytes; other kinds
/// of descriptor (dma-bufs, NVIDIA's device files) are left to the import. The
/// failure's error code and message.
///
/// - its length: at least the allocation, and, for Mesa's memfds, at least the
///   mapping its header describes, whose data (after the header's offset) holds
///   the allocation;
/// - that it cannot shrink while the worker maps it: sealed against shrinking
///   (`F_SEAL_SHRINK`; Mesa seals its memfds so), or sealed here where the file
///   allows it, and then measured again. A file its owner can still cut is
///   refused.
///
/// The header can still change after this read: the library maps the file itself
/// and reads the data's offset once, and the driver never sees the file (its
/// `vulkan/host_file.rs`).
pub(crate) fn check(fd: &OwnedFd, allocation: u64, driver: Driver) -> Result<(), (ErrorCode, String)> {
    if file_len(fd).is_none() {
        return Ok(());
    }
    check_length(fd, allocation, driver)?;
    seal_against_shrinking(fd)?;
    // Measured again once sealed: a file cut between the first look and the seal passed it.
    check_length(fd, allocation, driver)
}

/// The file's length against the allocation and, for Mesa's memfds, its header.
fn check_length(fd: &OwnedFd, allocation: u64, driver: Driver) -> Result<(), (ErrorCode, String)> {
    let Some(len) = file_len(fd) else { return Ok(()) };
    let too_small = |m: String| Err((ErrorCode::TooSmall, m));
    if len < allocation {
        return too_small(format!(
            "the memory behind the descriptor is {len} bytes, but the allocation is {allocation} bytes"
        ));
    }
    if driver == Driver::MesaMemfd {
        let file = std::fs::File::from(
            fd.try_clone().map_err(|e| (ErrorCode::BadHandle, format!("duplicating the descriptor: {e}")))?,
        );
        let mut head = [0u8; 16];
        if file.read_at(&mut head, 0).ok() != Some(head.len()) {
            return Err((
                ErrorCode::BadHandle,
                format!("the memory file ({len} bytes) cannot be read: it is not memory lavapipe exported"),
            ));
        }
        let word = |i: usize| u64::from_ne_bytes(head[i..i + 8].try_into().unwrap_or_default());
        let (mapped, offset) = (word(0), word(8));
        if offset >= mapped {
            return Err((
                ErrorCode::BadHandle,
                format!(
                    "the memory file ({len} bytes) does not start with lavapipe's header (a mapping of {mapped} bytes \
                     with its data at offset {offset}): it is not memory lavapipe exported"
                ),
            ));
        }
        if mapped > len {
            return too_small(format!(
                "the memory file is {len} bytes, but its header (lavapipe's, at its start) has the driver map {mapped} \
                 bytes of it: export the memory with vkGetMemoryFdKHR and send the file as it is"
            ));
        }
        if mapped - offset < allocation {
            return too_small(format!(
                "the memory file's header (lavapipe's) describes {} bytes of data at offset {offset}, less than the \
                 allocation of {allocation} bytes: export the memory with vkGetMemoryFdKHR and send the file as it is",
                mapped - offset
            ));
        }
    }
    Ok(())
}

/// The length of the regular file or memfd behind `fd`; `None` for anything
/// else (anon inodes such as dma-bufs, devices: the import checks those).
fn file_len(fd: &OwnedFd) -> Option<u64> {
    // SAFETY: `stat` is plain data, for which all zeroes is a value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes a `stat` for an open descriptor and nothing else.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    (!link.to_string_lossy().starts_with("anon_inode:")).then_some(st.st_size as u64)
}

/// Makes sure the file cannot shrink from now on (`F_SEAL_SHRINK`), or says why not.
fn seal_against_shrinking(fd: &OwnedFd) -> Result<(), (ErrorCode, String)> {
    let refuse = |why: String| {
        Err((
            ErrorCode::BadHandle,
            format!(
                "the memory file {why}, so its owner could cut it while the worker maps it (a fault that would end \
                 the worker): send memory exported with vkGetMemoryFdKHR (Mesa seals its memfds), or a memfd made \
                 with MFD_ALLOW_SEALING"
            ),
        ))
    };
    // SAFETY: fcntl on an open descriptor; F_GET_SEALS takes no argument.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        return refuse(format!("cannot be sealed ({}: not a memfd)", std::io::Error::last_os_error()));
    }
    if seals & libc::F_SEAL_SHRINK != 0 {
        return Ok(());
    }
    // SAFETY: as above; F_ADD_SEALS takes the seals to add.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } != 0 {
        return refuse(format!("is not sealed against shrinking and cannot be ({})", std::io::Error::last_os_error()));
    }
    Ok(())
}
