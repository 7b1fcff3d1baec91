//! A Rust program that links neural-frame-c as an rlib and installed its own `log` logger:
//! nf_set_log_callback says so (NF_STATUS_UNSUPPORTED) instead of replacing it. (A C program
//! links the cdylib or staticlib, whose `log` nothing else installs a logger for.)

use std::ptr;

use neural_frame_c::*;

struct Mine;

impl log::Log for Mine {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, _: &log::Record<'_>) {}
    fn flush(&self) {}
}

static MINE: Mine = Mine;

unsafe extern "C" fn ignore(_: *mut std::ffi::c_void, _: nf_log_level, _: *const std::ffi::c_char) {}

#[test]
fn another_logger_first_is_refused_not_replaced() {
    log::set_logger(&MINE).expect("the first logger of this process");
    // SAFETY: `ignore` may be called from any thread.
    let status = unsafe { nf_set_log_callback(Some(ignore), ptr::null_mut(), NF_LOG_WARN) };
    assert_eq!(status, nf_status::NF_STATUS_UNSUPPORTED);
}
