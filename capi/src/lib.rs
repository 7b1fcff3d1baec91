//! The C API of neural-frame (issue 24 §1): opaque handles, a status code from every call
//! and the message of the last failure, for C and C++ programs. The header,
//! `include/neural_frame.h`, is generated from this crate's sources by cbindgen
//! (`capi/header`, which CI runs, fails when the committed one differs; its `--write`
//! rewrites it), and its preamble (`cbindgen.toml`) states the conventions: who frees
//! what, which pointers are borrowed, how strings come back, who closes a descriptor.
//!
//! It covers a context on a device of its own ([`nf_context_new`], chosen by UUID with
//! [`nf_builder_set_device_uuid`]) or on the caller's Vulkan device
//! ([`nf_context_new_on_device`]); the builder's options (`builder.rs`); the caller's
//! images, buffers and timeline semaphores by handle (`register.rs`) or by file
//! descriptor (`import.rs`); memory imported once with planar frames placed in it
//! (`planes.rs`); frames with their waits and signals, tickets, waits and stats
//! (`frame.rs`); the context's report (`context.rs`); the host path for tools
//! (`context.rs`) and image files (`png.rs`).
//! Not yet: Windows handles (issue 24 §2).
//!
//! Every entry point runs inside `catch_unwind`: a panic becomes `NF_STATUS_INTERNAL`
//! with its message, never an unwind into C. No Rust type crosses the boundary.

// The C names (nf_status, NF_STATUS_OK, …) are the API; Rust's casing rules do not apply.
#![allow(non_camel_case_types)]

mod builder;
mod context;
mod device;
mod frame;
mod import;
mod logging;
mod names;
mod options;
mod planes;
mod png;
mod register;
mod tickets;

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use neural_frame::ErrorKind;

pub use builder::*;
pub use context::*;
pub use device::*;
pub use frame::*;
pub use import::*;
pub use logging::*;
pub use names::{c_names, rust_to_c_names};
pub use options::*;
pub use planes::*;
pub use png::*;
pub use register::*;

/// What a call did: `NF_STATUS_OK` (0), or why it failed. The failures mirror
/// `neural_frame::ErrorKind`, plus `NF_STATUS_BUFFER_TOO_SMALL` for the C side's
/// caller buffers. `nf_last_error_message()` gives the text of the last failure.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nf_status {
    /// The call succeeded.
    NF_STATUS_OK = 0,
    /// A size, pointer, handle, format or parameter the caller passed is not acceptable.
    NF_STATUS_INVALID_ARGUMENT = 1,
    /// The device, driver or build lacks something that is needed; the message says what.
    NF_STATUS_UNSUPPORTED = 2,
    /// A bounded wait ran out.
    NF_STATUS_TIMEOUT = 3,
    /// The GPU was lost or a kernel faulted: free the context and build a new one.
    NF_STATUS_DEVICE_LOST = 4,
    /// No Vulkan loader, driver or device matching what was asked for.
    NF_STATUS_NO_DEVICE = 5,
    /// CUDA or ONNX Runtime's CUDA execution provider cannot be used here.
    NF_STATUS_PROVIDER_UNAVAILABLE = 6,
    /// ONNX Runtime itself could not be found or loaded.
    NF_STATUS_RUNTIME_MISSING = 7,
    /// The model does not fit what the pipeline supports (or its file cannot be read).
    NF_STATUS_MODEL_CONTRACT = 8,
    /// An image file could not be read or written.
    NF_STATUS_IMAGE = 9,
    /// A Vulkan call failed.
    NF_STATUS_VULKAN = 10,
    /// A CUDA driver call failed.
    NF_STATUS_CUDA = 11,
    /// ONNX Runtime failed.
    NF_STATUS_ONNX_RUNTIME = 12,
    /// Reading or writing a file failed.
    NF_STATUS_IO = 13,
    /// A bug inside neural-frame (a broken invariant or a caught panic): please report it
    /// with the message.
    NF_STATUS_INTERNAL = 14,
    /// A caller buffer is smaller than what the call writes; the size it needs is in the
    /// size argument (strings) or the message.
    NF_STATUS_BUFFER_TOO_SMALL = 15,
    /// A struct's `struct_size` (its first field) is smaller than the struct's first version,
    /// or larger than 4096: it was not set. Set it to `sizeof` the struct, with the struct's
    /// `NF_*_INIT` macro (see VERSIONED STRUCTS in the preamble).
    NF_STATUS_STRUCT_SIZE = 16,
}

/// A failure on its way to the caller: a status and its message.
pub(crate) struct Fail {
    status: nf_status,
    message: String,
}

impl Fail {
    pub(crate) fn new(status: nf_status, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(nf_status::NF_STATUS_INVALID_ARGUMENT, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(nf_status::NF_STATUS_INTERNAL, message)
    }

    /// The same failure, its message preceded by `prefix` (the call or field it is about).
    pub(crate) fn prefixed(self, prefix: &str) -> Self {
        Self { status: self.status, message: format!("{prefix}{}", self.message) }
    }
}

impl Fail {
    /// The status and message of a library error the caller cannot take, its Rust names
    /// (`ContextBuilder::build_on`, `Backend::Cpu`, …) translated into the C API's
    /// (`nf_context_new_on_device`, `NF_BACKEND_CPU`, …).
    pub(crate) fn of(e: &neural_frame::Error) -> Self {
        Self { status: status_of(e.kind()), message: names::c_names(&e.to_string()) }
    }
}

impl From<neural_frame::Error> for Fail {
    fn from(e: neural_frame::Error) -> Self {
        Self::of(&e)
    }
}

fn status_of(kind: ErrorKind) -> nf_status {
    use nf_status::*;
    match kind {
        ErrorKind::InvalidArgument => NF_STATUS_INVALID_ARGUMENT,
        ErrorKind::Unsupported => NF_STATUS_UNSUPPORTED,
        ErrorKind::Timeout => NF_STATUS_TIMEOUT,
        ErrorKind::DeviceLost => NF_STATUS_DEVICE_LOST,
        ErrorKind::NoDevice => NF_STATUS_NO_DEVICE,
        ErrorKind::ProviderUnavailable => NF_STATUS_PROVIDER_UNAVAILABLE,
        ErrorKind::RuntimeMissing => NF_STATUS_RUNTIME_MISSING,
        ErrorKind::ModelContract => NF_STATUS_MODEL_CONTRACT,
        ErrorKind::Image => NF_STATUS_IMAGE,
        ErrorKind::Vulkan => NF_STATUS_VULKAN,
        ErrorKind::Cuda => NF_STATUS_CUDA,
        ErrorKind::OnnxRuntime => NF_STATUS_ONNX_RUNTIME,
        ErrorKind::Io => NF_STATUS_IO,
        ErrorKind::Internal => NF_STATUS_INTERNAL,
        // A kind newer than this crate.
        _ => NF_STATUS_INTERNAL,
    }
}

thread_local! {
    /// The message of the last failed call on this thread ("" after a success).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_message(message: &str) {
    // A NUL inside the text would end the C string early.
    let text = CString::new(message.replace('\0', "\u{FFFD}")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|m| *m.borrow_mut() = text);
}

/// Runs one entry point: clears the last message, catches a panic, records a failure.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Fail>) -> nf_status {
    set_message("");
    run(f)
}

/// Runs a `*_free` entry point: like [`guard`], but the last message (and the pointer
/// `nf_last_error_message` gave) stays as it was, unless it fails: a caller frees its
/// handles after a failure, then reads the message.
pub(crate) fn guard_free(f: impl FnOnce() -> Result<(), Fail>) {
    run(f);
}

/// Catches a panic, records a failure.
fn run(f: impl FnOnce() -> Result<(), Fail>) -> nf_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => nf_status::NF_STATUS_OK,
        Ok(Err(fail)) => {
            set_message(&fail.message);
            fail.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            set_message(&format!("a panic inside neural-frame (a bug: please report it): {what}"));
            nf_status::NF_STATUS_INTERNAL
        }
    }
}

/// `what` must not be null.
pub(crate) fn non_null<T>(p: *const T, what: &str) -> Result<(), Fail> {
    if p.is_null() { Err(Fail::invalid(format!("{what} is NULL"))) } else { Ok(()) }
}

/// Writes `value` through an out pointer that must not be null.
///
/// # Safety
/// `p` is null or points to a writable `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T, what: &str) -> Result<(), Fail> {
    non_null(p, what)?;
    // SAFETY: not null, and writable by the caller's contract.
    unsafe { p.write(value) };
    Ok(())
}

/// Reads a struct the caller passed by pointer.
///
/// # Safety
/// `p` is null or points to a readable, initialised `T`.
pub(crate) unsafe fn read_arg<'a, T>(p: *const T, what: &str) -> Result<&'a T, Fail> {
    non_null(p, what)?;
    // SAFETY: not null, readable and initialised by the caller's contract.
    Ok(unsafe { &*p })
}

/// The largest `struct_size` taken: anything above is taken for a field never set.
const MAX_STRUCT_SIZE: usize = 4096;

/// A struct that can grow (VERSIONED STRUCTS in the header's preamble): its first field is
/// the `uint32_t struct_size` the caller sets to `sizeof` the struct as its header has it.
///
/// # Safety
/// The implementor is `#[repr(C)]`, starts with a `u32` (`struct_size`), and [`base`] gives a
/// valid value (the default implementation: all bytes zero, which every field must allow:
/// integers, floats, `bool`, raw pointers, `Option` of a function pointer).
///
/// [`base`]: Versioned::base
pub(crate) unsafe trait Versioned: Copy {
    /// The struct's C name, for messages.
    const NAME: &'static str;
    /// The struct's `NF_*_INIT` macro, for messages.
    const INIT: &'static str;
    /// The size of the struct's first version: the least `struct_size` taken.
    const FIRST_SIZE: usize;
    /// The value whose fields stand in for those a caller's older struct lacks.
    fn base() -> Self {
        // SAFETY: every field allows all bytes zero (the trait's contract).
        unsafe { std::mem::zeroed() }
    }
}

/// The `struct_size` the caller set at `p` (not NULL), checked against `T`'s first version.
///
/// # Safety
/// `p` points to at least 4 readable bytes.
unsafe fn struct_size<T: Versioned>(p: *const T) -> Result<usize, Fail> {
    // SAFETY: the caller's contract: struct_size, the first field, is readable.
    let size = unsafe { p.cast::<u32>().read_unaligned() } as usize;
    if size < T::FIRST_SIZE || size > MAX_STRUCT_SIZE {
        return Err(Fail::new(
            nf_status::NF_STATUS_STRUCT_SIZE,
            format!(
                "{}.struct_size is {size}, not the size of a version of {} (the first is {} bytes, this \
                 library's {}): set it to sizeof({}), e.g. with {}",
                T::NAME,
                T::NAME,
                T::FIRST_SIZE,
                std::mem::size_of::<T>(),
                T::NAME,
                T::INIT
            ),
        ));
    }
    Ok(size)
}

/// Reads a versioned struct the caller filled in: the first `struct_size` bytes of it, at
/// most this library's size; the fields an older caller's struct lacks come from
/// [`Versioned::base`]. A newer caller's struct is taken where every byte beyond this
/// library's fields is zero (a field added later is 0 when unused); a byte that is not gives
/// `NF_STATUS_UNSUPPORTED`, naming it.
///
/// # Safety
/// `p` is NULL or points to `struct_size` readable bytes (its first field), initialised as
/// a `T` as far as this library's `T` reaches.
pub(crate) unsafe fn read_versioned<T: Versioned>(p: *const T, what: &str) -> Result<T, Fail> {
    non_null(p, what)?;
    // SAFETY: not null; the caller's contract.
    let size = unsafe { struct_size(p) }?;
    let ours = std::mem::size_of::<T>();
    if size > ours {
        // SAFETY: `size` readable bytes (the caller's contract).
        let tail = unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(ours), size - ours) };
        if let Some(at) = tail.iter().position(|&b| b != 0) {
            return Err(Fail::new(
                nf_status::NF_STATUS_UNSUPPORTED,
                format!(
                    "{} is a newer version ({size} bytes) than this library's ({ours} bytes, version {}), and \
                     sets byte {} of it, a field this library does not know: use a library at least as new as \
                     the header",
                    T::NAME,
                    env!("CARGO_PKG_VERSION"),
                    ours + at
                ),
            ));
        }
    }
    let mut value = T::base();
    // SAFETY: `size.min(ours)` bytes are readable at `p` and writable in `value`, which does not
    // overlap the caller's struct; the bytes are the caller's fields of a `T` (its contract).
    unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&raw mut value).cast::<u8>(), size.min(ours)) };
    Ok(value)
}

/// Checks the `struct_size` of a versioned struct the library is to write (before the call
/// does anything), and gives it for [`write_versioned`].
///
/// # Safety
/// `p` is NULL or points to a writable struct whose first field the caller set.
pub(crate) unsafe fn out_size<T: Versioned>(p: *mut T, what: &str) -> Result<usize, Fail> {
    non_null(p, what)?;
    // SAFETY: not null; the caller's contract.
    unsafe { struct_size(p.cast_const()) }
}

/// Writes `value` into the caller's versioned struct of `size` bytes (from [`out_size`]): the
/// fields it has, at most this library's; bytes beyond this library's fields are zeroed.
/// Its `struct_size` stays as the caller set it.
///
/// # Safety
/// `p` points to `size` writable bytes, `size` from [`out_size`] of the same pointer.
pub(crate) unsafe fn write_versioned<T: Versioned>(p: *mut T, size: usize, value: T) {
    let ours = std::mem::size_of::<T>();
    let bytes = (&raw const value).cast::<u8>();
    // SAFETY: `size` writable bytes at `p` (the caller's contract), `ours` readable at `bytes`;
    // the first 4 bytes (struct_size) are left as the caller set them.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.add(4), p.cast::<u8>().add(4), size.min(ours) - 4);
        if size > ours {
            std::ptr::write_bytes(p.cast::<u8>().add(ours), 0, size - ours);
        }
    }
}

/// A string from a NUL-terminated C string (UTF-8).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub(crate) unsafe fn str_arg(p: *const c_char, what: &str) -> Result<String, Fail> {
    non_null(p, what)?;
    // SAFETY: not null, and NUL-terminated by the caller's contract.
    let bytes = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(bytes).map(str::to_string).map_err(|_| Fail::invalid(format!("{what} is not UTF-8")))
}

/// A path from a NUL-terminated C string (bytes on Unix, UTF-8 elsewhere).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub(crate) unsafe fn path_arg(p: *const c_char, what: &str) -> Result<PathBuf, Fail> {
    non_null(p, what)?;
    // SAFETY: not null, and NUL-terminated by the caller's contract.
    let bytes = unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes();
    if bytes.is_empty() {
        return Err(Fail::invalid(format!("{what} is an empty string")));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes).map(PathBuf::from).map_err(|_| Fail::invalid(format!("{what} is not UTF-8")))
    }
}

/// Copies `text` and its NUL into the caller's buffer by the size-in/size-out convention.
///
/// # Safety
/// `len` is null or points to a `size_t`; `buf` is null or points to `*len` writable bytes.
pub(crate) unsafe fn write_string(text: &str, buf: *mut c_char, len: *mut usize) -> Result<(), Fail> {
    non_null(len, "len")?;
    let needed = text.len() + 1;
    // SAFETY: `len` is not null and points to a size_t (the caller's contract).
    let capacity = unsafe { *len };
    // SAFETY: as above.
    unsafe { *len = needed };
    if buf.is_null() {
        return Ok(());
    }
    if capacity < needed {
        return Err(Fail::new(
            nf_status::NF_STATUS_BUFFER_TOO_SMALL,
            format!("the buffer holds {capacity} bytes, the text and its NUL need {needed}"),
        ));
    }
    // SAFETY: `buf` has at least `capacity >= needed` writable bytes, and does not overlap `text`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
        *buf.add(text.len()) = 0;
    }
    Ok(())
}

/// # Safety
/// `a` and `b` are NULL or writable.
pub(crate) unsafe fn write_pair((x, y): (u32, u32), a: *mut u32, b: *mut u32) -> Result<(), Fail> {
    non_null(a, "the first out pointer")?;
    non_null(b, "the second out pointer")?;
    // SAFETY: not null and writable (the caller's contract).
    unsafe {
        *a = x;
        *b = y;
    }
    Ok(())
}

/// The major version of the header (`capi/Cargo.toml`'s version, checked by the tests).
pub const NF_VERSION_MAJOR: u32 = 0;
/// The minor version of the header.
pub const NF_VERSION_MINOR: u32 = 1;
/// The patch version of the header.
pub const NF_VERSION_PATCH: u32 = 0;
// NF_VERSION, the header's version as text ("0.1.0"), is defined by capi/cbindgen.toml's
// `after_includes` (cbindgen writes no string constant); tests/header.rs keeps it in step.
/// The header's version as one number, `MAJOR * 1000000 + MINOR * 1000 + PATCH`, for `#if`
/// and for comparing with `nf_version_number()`.
pub const NF_VERSION_NUMBER: u32 = 1000;

/// The version of the library that runs, e.g. "0.1.0" (compare it with the header's
/// `NF_VERSION`): a static string, never to be freed. A program built against a header of
/// version M.m.p runs with a library of the same M (and, while M is 0, the same m) and a
/// version at least as new; `nf_version_number()` compares as a number.
///
/// Status: none (it returns the text). Callable at any time; it does not touch the last
/// error message.
#[unsafe(no_mangle)]
pub extern "C" fn nf_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The version of the library that runs as one number, `MAJOR * 1000000 + MINOR * 1000 +
/// PATCH` (compare it with the header's `NF_VERSION_NUMBER`).
///
/// Status: none (it returns the number). Callable at any time; it does not touch the last
/// error message.
#[unsafe(no_mangle)]
pub extern "C" fn nf_version_number() -> u32 {
    let part = |s: &str| s.parse::<u32>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 1_000_000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 1_000
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}

/// The message of the last call on this thread that failed, or "" when the last call
/// succeeded (`*_free` calls do not count): NUL-terminated UTF-8, owned by the library,
/// valid until the next `nf_*` call on this thread other than a `*_free` (copy it to keep
/// it). Never NULL; it does not reset the message.
///
/// Status: none (it returns the text).
#[unsafe(no_mangle)]
pub extern "C" fn nf_last_error_message() -> *const c_char {
    LAST_ERROR.try_with(|m| m.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}
