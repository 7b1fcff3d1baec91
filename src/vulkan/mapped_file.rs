//! Imported memory that is a file mapped on the host (Mesa's software driver
//! exports its memory as a memfd and maps it again on import): the driver's
//! mapping must lie within the file. A file's owner shares it writable, so what
//! the driver reads of it at import (Mesa: the mapping's size and the data's
//! offset, from a header at the file's start) may have changed between any check
//! made before the import and the driver's own read; a mapping past the file's
//! end faults (SIGBUS) when touched, and the fault ends the process. So the
//! mapping the driver made is checked after the import, before anything
//! touches it, against `/proc/self/maps` and the file's length.

use std::os::fd::AsFd;

/// A regular file (a memfd) behind an imported descriptor: a duplicate of it, to
/// learn its length after the import has taken the descriptor, its identity, and
/// where this process mapped it before the import.
pub(crate) struct MemoryFile {
    file: std::fs::File,
    dev: (u64, u64),
    ino: u64,
    before: Vec<u64>,
    /// Held from before the import to the check (and the undoing of a refused one).
    _lock: std::sync::MutexGuard<'static, ()>,
}

/// Imports of memory files and their frees, one at a time in the process: the
/// import's mapping is told apart as the one that was not there before it, which
/// holds only while no other import or free of the same file maps or unmaps.
static MAPPING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The lock that orders imports of memory files and their frees.
pub(crate) fn lock() -> std::sync::MutexGuard<'static, ()> {
    MAPPING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The driver's host mapping of an imported memory file: the mapping (`start`,
/// `len`) and the data in it (`data`).
#[derive(Debug)]
pub(crate) struct FileMapping {
    start: usize,
    len: usize,
    data: usize,
}

/// Mesa's memory header: the mapping's size and the data's offset (two `size_t`),
/// then 16 bytes naming the driver build; the data's offset is also kept in the
/// `size_t` just before the data.
const MESA_HEADER: usize = 32;

/// An import whose mapping was refused: why, and how to undo it.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) why: String,
    /// The mapping the import made of the file, where one was found.
    pub(crate) mapping: Option<FileMapping>,
}

impl MemoryFile {
    /// The memory file behind `fd`; `None` where `fd` is no regular file (a device
    /// file such as NVIDIA's, an anon inode such as a dma-buf: nothing the host maps
    /// from a length the owner can change).
    pub(crate) fn of(fd: &impl AsFd) -> Option<Self> {
        let file = std::fs::File::from(fd.as_fd().try_clone_to_owned().ok()?);
        let meta = file.metadata().ok()?;
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() {
            return None;
        }
        let dev = libc::dev_t::from(meta.dev());
        let lock = lock();
        let mut f = MemoryFile {
            dev: (libc::major(dev).into(), libc::minor(dev).into()),
            ino: meta.ino(),
            file,
            before: Vec::new(),
            _lock: lock,
        };
        f.before = f.mappings().map(|m| m.iter().map(|m| m.start).collect()).unwrap_or_default();
        Some(f)
    }

    /// This process's mappings of the file.
    fn mappings(&self) -> Result<Vec<Mapping>, String> {
        let maps =
            std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps cannot be read ({e})"))?;
        Ok(maps.lines().filter_map(Mapping::parse).filter(|m| (m.dev, m.ino) == (self.dev, self.ino)).collect())
    }

    /// Checks that the `len` bytes at `ptr` (the driver's host mapping of the
    /// imported memory) are the file's own pages: the mapping the import made of
    /// the file, from its start, covers them, and they lie within its length.
    pub(crate) fn check_mapping(&self, ptr: *const u8, len: u64) -> Result<FileMapping, Refused> {
        let refuse = |why: String, mapping: Option<FileMapping>| Err(Refused { why, mapping });
        let mappings = match self.mappings() {
            Ok(m) => m,
            Err(why) => return refuse(why, None),
        };
        let file_len = match self.file.metadata() {
            Ok(m) => m.len(),
            Err(e) => return refuse(format!("the memory file cannot be looked at ({e})"), None),
        };
        let start = ptr as u64;
        // The import's own mapping: the one that was not there before it.
        let Some(m) = mappings.into_iter().find(|m| !self.before.contains(&m.start)) else {
            return refuse(
                format!("the driver made no mapping of the memory file, yet maps its memory at {start:#x}"),
                None,
            );
        };
        let mapping = FileMapping { start: m.start as usize, len: (m.end - m.start) as usize, data: ptr as usize };
        let end = start.checked_add(len);
        if m.offset != 0 || start < m.start || end.is_none_or(|e| e > m.end) {
            return refuse(
                format!(
                    "the driver's mapping of it ({len} bytes at {start:#x}) is not within its mapping of the memory \
                     file ({} bytes at {:#x}): the file's header (the mapping's size and the data's offset, at its \
                     start) was changed, or it is not memory the driver exported",
                    m.end - m.start,
                    m.start
                ),
                Some(mapping),
            );
        }
        let offset = start - m.start;
        if offset + len > file_len {
            return refuse(
                format!(
                    "the driver maps {len} bytes of the memory file at offset {offset}, past its end ({file_len} \
                     bytes): the file's header (the mapping's size and the data's offset, at its start) was changed"
                ),
                Some(mapping),
            );
        }
        if (offset as usize) < MESA_HEADER {
            return refuse(
                format!(
                    "the memory file's data starts at offset {offset}, inside its header: it is not memory the driver exported"
                ),
                Some(mapping),
            );
        }
        Ok(mapping)
    }
}

impl FileMapping {
    /// Whether [`disarm`](Self::disarm) leaves a header that points at this
    /// mapping exactly (the data lies after a whole header, inside the mapping).
    pub(crate) fn disarmable(&self) -> bool {
        self.data >= self.start + MESA_HEADER && self.data < self.start + self.len
    }

    /// Takes the mapping out of the file's owner's reach before the driver frees
    /// it: Mesa's free reads the data's offset (before the data) and the mapping's
    /// size (in the header) from the memory itself, then unmaps what they say, so a
    /// file rewritten by its owner would have it unmap any part of this process.
    /// The mapping is replaced, in place, by private memory that holds the true
    /// values; the driver then unmaps exactly it. Where the layout allows no such
    /// header ([`disarmable`](Self::disarmable)), the mapping is only replaced.
    ///
    /// # Safety
    /// Nothing may use the memory any more (the GPU's work on it is complete), and
    /// the driver's free must follow.
    pub(crate) unsafe fn disarm(&self) {
        // SAFETY: MAP_FIXED over the driver's own mapping of the file, which nothing uses any more.
        let p = unsafe {
            libc::mmap(
                self.start as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED || !self.disarmable() {
            return;
        }
        let offset = self.data - self.start;
        // SAFETY: the private mapping made above covers the header and the word before the data.
        unsafe {
            (self.start as *mut usize).write_unaligned(self.len);
            (self.start as *mut usize).add(1).write_unaligned(offset);
            ((self.data - std::mem::size_of::<usize>()) as *mut usize).write_unaligned(offset);
        }
    }

    /// Unmaps the mapping without the driver (for a refused import whose layout
    /// the driver's free would misread: its allocation is left unfreed).
    ///
    /// # Safety
    /// Nothing may use the memory, and the driver must never free it.
    pub(crate) unsafe fn unmap(&self) {
        // SAFETY: the caller's promise; the range is the driver's mapping of the file.
        unsafe { libc::munmap(self.start as *mut libc::c_void, self.len) };
    }
}

/// A line of `/proc/self/maps`: `start-end perms offset major:minor inode path`.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    dev: (u64, u64),
    ino: u64,
}

impl Mapping {
    fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_ascii_whitespace();
        let (start, end) = words.next()?.split_once('-')?;
        let _perms = words.next()?;
        let offset = words.next()?;
        let (major, minor) = words.next()?.split_once(':')?;
        let ino = words.next()?;
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        Some(Mapping {
            start: hex(start)?,
            end: hex(end)?,
            offset: hex(offset)?,
            dev: (hex(major)?, hex(minor)?),
            ino: ino.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd};

    fn memfd(len: u64) -> std::os::fd::OwnedFd {
        // SAFETY: memfd_create with a NUL-terminated name; the descriptor is ours.
        let fd = unsafe { libc::memfd_create(c"nf-mapped-file-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        std::fs::File::from(fd.try_clone().expect("dup")).set_len(len).expect("ftruncate");
        fd
    }

    /// Maps `map_len` bytes of `fd` from its start, as Mesa's import does.
    fn map(fd: &std::os::fd::OwnedFd, map_len: usize) -> *mut u8 {
        // SAFETY: a fresh shared mapping of an open file; never touched by these tests.
        let p =
            unsafe { libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    #[test]
    fn a_mapping_within_the_file_passes_and_one_past_its_end_or_elsewhere_is_refused() {
        let page = 4096;
        let fd = memfd(3 * page);
        // Mapped as a header would say: 3 pages, data after the first.
        let file = MemoryFile::of(&fd).expect("a memfd is a memory file");
        let p = map(&fd, 3 * page as usize);
        // SAFETY: pointer arithmetic inside the mapping, never dereferenced here.
        let data = unsafe { p.add(page as usize) };
        let mapping = file.check_mapping(data, 2 * page).expect("within the file");
        assert!(mapping.disarmable());
        // Disarmed, the mapping is private memory holding the true header, and Mesa's
        // free (the offset before the data, the size in the header) unmaps exactly it.
        // SAFETY: nothing uses the mapping; it is freed just below, as Mesa frees it.
        unsafe { mapping.disarm() };
        assert!(file.mappings().expect("maps").is_empty(), "the file is still mapped after disarming");
        // SAFETY: the private mapping holds the header that disarm wrote.
        let (offset, size) = unsafe {
            let offset = (data as *const usize).sub(1).read_unaligned();
            (offset, (data.sub(offset) as *const usize).read_unaligned())
        };
        assert_eq!((offset, size), (page as usize, 3 * page as usize));
        // SAFETY: as Mesa's os_free_fd does.
        assert_eq!(unsafe { libc::munmap(data.sub(offset).cast(), size) }, 0);

        // A header that said 5 pages: the mapping runs past the file's end.
        drop(file);
        let file = MemoryFile::of(&fd).expect("a memory file");
        let long = map(&fd, 5 * page as usize);
        // SAFETY: as above.
        let refused = file.check_mapping(unsafe { long.add(page as usize) }, 3 * page).expect_err("past the end");
        assert!(
            refused.why.contains("past its end") && refused.why.contains(&format!("({} bytes)", 3 * page)),
            "{}",
            refused.why
        );
        // SAFETY: the refused mapping, unused.
        unsafe { refused.mapping.expect("the mapping").unmap() };

        // An offset that points out of the mapping, into memory that is not the file.
        drop(file);
        let file = MemoryFile::of(&fd).expect("a memory file");
        let q = map(&fd, 3 * page as usize);
        let elsewhere = Box::new([0u8; 64]);
        let refused = file.check_mapping(elsewhere.as_ptr(), 64).expect_err("not the file's pages");
        assert!(refused.why.contains("not within"), "{}", refused.why);
        let m = refused.mapping.expect("the mapping");
        assert!(!m.disarmable(), "data outside the mapping cannot be given a header");
        // SAFETY: unused.
        unsafe { m.unmap() };
        let _ = q;

        // Data inside the header: refused.
        drop(file);
        let file = MemoryFile::of(&fd).expect("a memory file");
        let r = map(&fd, 3 * page as usize);
        // SAFETY: as above.
        let refused = file.check_mapping(unsafe { r.add(8) }, page).expect_err("inside the header");
        assert!(refused.why.contains("inside its header"), "{}", refused.why);
        // SAFETY: unused.
        unsafe { refused.mapping.expect("the mapping").unmap() };

        // No mapping made by the import at all.
        drop(file);
        let file = MemoryFile::of(&fd).expect("a memory file");
        let refused = file.check_mapping(elsewhere.as_ptr(), 64).expect_err("no mapping");
        assert!(refused.why.contains("made no mapping") && refused.mapping.is_none(), "{}", refused.why);

        // A pipe is no memory file.
        drop(file);
        let (rd, _wr) = std::io::pipe().expect("pipe");
        assert!(MemoryFile::of(&rd).is_none());
    }
}
