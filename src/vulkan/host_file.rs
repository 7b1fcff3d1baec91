//! Imported memory that is a file the host maps. Mesa's software driver
//! (lavapipe) exports its memory as a memfd that starts with a header (Mesa's
//! `os_memory_fd.c`: the mapping's size and the data's offset as two native
//! `size_t`, then 16 bytes naming the driver build; the data's offset again in
//! the `size_t` just before the data).
//!
//! Handed to the driver's own import, that header steers the driver for the
//! allocation's whole life: it maps as many bytes as the header says, and when
//! it frees the memory (also when it refuses an import itself, inside
//! `vkAllocateMemory`) it unmaps whatever the header and the word before the
//! data say at that moment. The file's owner can rewrite both at any moment, so
//! a driver import lets the owner unmap any part of this process.
//!
//! So where the device imports host memory (`VK_EXT_external_memory_host`;
//! lavapipe has it), the library maps the file itself, reads the data's offset
//! once, and imports its own mapping: the driver never reads the file, and the
//! library unmaps exactly what it mapped, after the driver has freed the memory.
//! What the owner writes to the file from then on is only data.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt as _;

use crate::error::{Error, Result};

/// Mesa's header: the mapping's size and the data's offset, then 16 bytes naming
/// the driver build, then (at the latest) the data's offset again, before the data.
const MESA_HEADER: u64 = 32 + 8;

/// This process's own shared mapping of a memory file, from its start, and where
/// the data lies in it. Unmapped when dropped.
#[derive(Debug)]
pub(crate) struct HostFile {
    ptr: *mut libc::c_void,
    len: usize,
    data: u64,
}

// SAFETY: the mapping is plain shared memory, owned by this value; nothing in it is thread-bound.
unsafe impl Send for HostFile {}
// SAFETY: as above; the value itself is only read.
unsafe impl Sync for HostFile {}

/// Whether `fd` is a regular file (a memfd): other descriptors (NVIDIA's device
/// files, dma-bufs and other anon inodes) are imported by the driver.
pub(crate) fn is_memory_file(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: `stat` is plain data, for which all zeroes is a value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes a `stat` for an open descriptor and nothing else.
    unsafe { libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG }
}

impl HostFile {
    /// Maps the memory file behind `fd`, which holds an allocation of
    /// `allocation` bytes after Mesa's header, as a range whose start and length
    /// are multiples of `alignment` (the device's `minImportedHostPointerAlignment`).
    pub(crate) fn map(fd: BorrowedFd<'_>, allocation: u64, alignment: u64) -> Result<Self> {
        let refuse = |why: String| Err(Error::InvalidArgument(format!("the imported memory file is refused: {why}")));
        let file = std::fs::File::from(
            fd.try_clone_to_owned().map_err(|e| Error::Io { what: "duplicating the memory file".into(), source: e })?,
        );
        let file_len =
            file.metadata().map_err(|e| Error::Io { what: "looking at the memory file".into(), source: e })?.len();
        let mut head = [0u8; 16];
        if file.read_at(&mut head, 0).ok() != Some(head.len()) {
            return refuse(format!(
                "it is {file_len} bytes, too short for the header Mesa's drivers start their exports with: it is not \
                 memory lavapipe exported"
            ));
        }
        let data = u64::from_ne_bytes(head[8..].try_into().unwrap_or_default());
        if data < MESA_HEADER {
            return refuse(format!(
                "its header puts the data at offset {data}, inside the header: it is not memory lavapipe exported"
            ));
        }
        let end = data.checked_add(allocation).filter(|&e| e <= file_len);
        let Some(end) = end else {
            return refuse(format!(
                "its header puts the data at offset {data}, and the allocation of {allocation} bytes from there runs \
                 past the file's end ({file_len} bytes): export the memory with vkGetMemoryFdKHR and send the file \
                 as it is"
            ));
        };
        // SAFETY: sysconf has no preconditions.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        if alignment > page || !alignment.is_power_of_two() {
            return Err(Error::Unsupported {
                device: "this device".into(),
                what: format!(
                    "importing a memory file as host memory (minImportedHostPointerAlignment is {alignment} bytes, \
                     the page is {page})"
                ),
                remedy: "use another device".into(),
            });
        }
        // The whole pages the data touches: the last one ends within the file's last page.
        let len = end.next_multiple_of(page);
        let len = usize::try_from(len).map_err(|_| Error::InvalidArgument(format!("a {len}-byte memory file")))?;
        // SAFETY: a new shared mapping of an open file, placed by the kernel.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return refuse(format!(
                "it cannot be mapped for reading and writing ({e}): a memfd sealed against writing cannot be shared"
            ));
        }
        Ok(HostFile { ptr, len, data })
    }

    /// The mapping's start.
    pub(crate) fn ptr(&self) -> *mut libc::c_void {
        self.ptr
    }

    /// The mapping's length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len as u64
    }

    /// Where the data starts in the mapping (the header's offset, read once).
    pub(crate) fn data_offset(&self) -> u64 {
        self.data
    }
}

impl Drop for HostFile {
    fn drop(&mut self) {
        // SAFETY: this value's own mapping; the memory imported from it was freed before (`Memory` frees the
        // allocation, then drops this).
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd};

    fn memfd(len: u64) -> std::os::fd::OwnedFd {
        // SAFETY: memfd_create with a NUL-terminated name; the descriptor is ours.
        let fd =
            unsafe { libc::memfd_create(c"nf-host-file-test".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        std::fs::File::from(fd.try_clone().expect("dup")).set_len(len).expect("ftruncate");
        fd
    }

    fn header(fd: &std::os::fd::OwnedFd, size: u64, offset: u64) {
        let f = std::fs::File::from(fd.try_clone().expect("dup"));
        let mut h = size.to_ne_bytes().to_vec();
        h.extend(offset.to_ne_bytes());
        f.write_all_at(&h, 0).expect("header");
    }

    fn maps_of(fd: &std::os::fd::OwnedFd) -> usize {
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::File::from(fd.try_clone().expect("dup")).metadata().expect("stat").ino().to_string();
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        maps.lines().filter(|l| l.split_ascii_whitespace().nth(4) == Some(ino.as_str())).count()
    }

    #[test]
    fn a_memory_file_is_mapped_once_from_its_header_and_its_lies_are_refused() {
        let page = 4096u64;
        let fd = memfd(3 * page + 100);
        header(&fd, 3 * page + 100, 64);
        let file = HostFile::map(fd.as_fd(), 2 * page, page).expect("a true header");
        assert_eq!((file.data_offset(), file.len()), (64, 3 * page));
        // The file's bytes are the mapping's: written through the file, read through the mapping.
        std::fs::File::from(fd.try_clone().expect("dup")).write_all_at(&[7, 8, 9], 64).expect("write");
        // SAFETY: the mapping covers the data's first bytes.
        let seen = unsafe { std::slice::from_raw_parts(file.ptr().cast::<u8>().add(64), 3) };
        assert_eq!(seen, [7, 8, 9]);
        // What the owner writes to the header afterwards changes nothing the library keeps.
        header(&fd, 1 << 40, 1 << 40);
        assert_eq!((file.data_offset(), file.len()), (64, 3 * page));
        assert_eq!(maps_of(&fd), 1);
        drop(file);
        assert_eq!(maps_of(&fd), 0, "dropping the host file unmaps it");

        let refused = |size: u64, offset: u64, allocation: u64| {
            header(&fd, size, offset);
            HostFile::map(fd.as_fd(), allocation, page).expect_err("a lie").to_string()
        };
        let e = refused(3 * page, 8, page);
        assert!(e.contains("offset 8, inside the header"), "{e}");
        let e = refused(3 * page, 2 * page, 2 * page);
        assert!(e.contains("runs past the file's end") && e.contains(&format!("({} bytes)", 3 * page + 100)), "{e}");
        let e = refused(3 * page, u64::MAX - 10, page);
        assert!(e.contains("runs past the file's end"), "{e}");
        assert_eq!(maps_of(&fd), 0, "a refused file is left unmapped");

        let short = memfd(10);
        let e = HostFile::map(short.as_fd(), 1, page).expect_err("too short").to_string();
        assert!(e.contains("10 bytes, too short for the header"), "{e}");

        // Sealed against writing, a memfd cannot be shared.
        header(&fd, 3 * page, 64);
        // SAFETY: fcntl on an open memfd.
        assert_eq!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_WRITE) }, 0);
        let e = HostFile::map(fd.as_fd(), page, page).expect_err("sealed").to_string();
        assert!(e.contains("cannot be mapped for reading and writing"), "{e}");

        let (rd, _wr) = std::io::pipe().expect("pipe");
        assert!(!is_memory_file(rd.as_fd()) && is_memory_file(fd.as_fd()));
    }
}
