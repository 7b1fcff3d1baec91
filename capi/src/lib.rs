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
//! descriptor (`import.rs`); frames with their waits, tickets, waits and stats
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
mod options;
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
pub use options::*;
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
}

impl Fail {
    /// The status and message of a library error the caller cannot take.
    pub(crate) fn of(e: &neural_frame::Error) -> Self {
        Self { status: status_of(e.kind()), message: e.to_string() }
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

/// The library's version, e.g. "0.1.0": a static string, never to be freed. Callable
/// at any time; it does not touch the last error message.
#[unsafe(no_mangle)]
pub extern "C" fn nf_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last call on this thread that failed, or "" when the last call
/// succeeded (`*_free` calls do not count): NUL-terminated UTF-8, owned by the library,
/// valid until the next `nf_*` call on this thread other than a `*_free` (copy it to keep
/// it). Never NULL; it does not reset the message.
#[unsafe(no_mangle)]
pub extern "C" fn nf_last_error_message() -> *const c_char {
    LAST_ERROR.try_with(|m| m.borrow().as_ptr()).unwrap_or(c"".as_ptr())
}
