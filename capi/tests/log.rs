//! nf_set_log_callback: what the library announces reaches a C caller's callback, with the
//! C API's names, at the levels asked for; NULL turns it off. A process of its own (the
//! logger is the process's).

mod common;

use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;
use std::sync::Mutex;

use neural_frame_c::*;

static RECEIVED: Mutex<Vec<(nf_log_level, String, usize)>> = Mutex::new(Vec::new());

/// The test's callback: records the level, the text and the user pointer.
unsafe extern "C" fn record(user: *mut c_void, level: nf_log_level, message: *const c_char) {
    // SAFETY: the library passes a NUL-terminated text valid during the call.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned();
    // A call from inside the callback is refused.
    // SAFETY: no callback is installed by this call (it is refused).
    let inner = unsafe { nf_set_log_callback(None, ptr::null_mut(), NF_LOG_OFF) };
    assert_eq!(inner, nf_status::NF_STATUS_INVALID_ARGUMENT);
    RECEIVED.lock().unwrap_or_else(|e| e.into_inner()).push((level, text, user as usize));
}

fn message() -> String {
    // SAFETY: never NULL; read before the next call.
    unsafe { CStr::from_ptr(nf_last_error_message()) }.to_string_lossy().into_owned()
}

/// Builds a context on backend auto (no CUDA here: the library announces its fallback to the
/// CPU backend) and frees it.
fn build_auto() {
    let model = CString::new(common::tiny_model().to_str().expect("UTF-8")).expect("no NUL");
    let (mut b, mut ctx) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid arguments; each handle freed once.
    unsafe {
        assert_eq!(nf_builder_new(model.as_ptr(), &mut b), nf_status::NF_STATUS_OK);
        assert_eq!(nf_builder_set_backend(b, NF_BACKEND_AUTO), nf_status::NF_STATUS_OK);
        assert_eq!(nf_builder_set_frame_size(b, 8, 8), nf_status::NF_STATUS_OK);
        if let Some(library) = common::ort_library() {
            let library = CString::new(library.to_str().expect("UTF-8")).expect("no NUL");
            assert_eq!(nf_builder_set_ort_library(b, library.as_ptr()), nf_status::NF_STATUS_OK);
        }
        let status = nf_context_new(b, &mut ctx);
        assert_eq!(status, nf_status::NF_STATUS_OK, "{}", message());
        nf_context_free(ctx);
        nf_builder_free(b);
    }
}

#[test]
fn the_cpu_fallback_reaches_the_callback_with_c_names() {
    // SAFETY: a level out of range is refused before anything is installed.
    assert_eq!(unsafe { nf_set_log_callback(Some(record), ptr::null_mut(), 9) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    let user = 0x5EED_usize as *mut c_void;
    // SAFETY: `record` may be called from any thread, with any user pointer.
    assert_eq!(unsafe { nf_set_log_callback(Some(record), user, NF_LOG_WARN) }, nf_status::NF_STATUS_OK);
    build_auto();
    let got = std::mem::take(&mut *RECEIVED.lock().unwrap_or_else(|e| e.into_inner()));
    let fallback = got.iter().find(|(_, text, _)| text.contains("falling back to the CPU backend"));
    let Some((level, text, at)) = fallback else {
        panic!("the fallback was not announced; the callback got {got:?}");
    };
    assert_eq!((*level, *at), (NF_LOG_WARN, 0x5EED), "{text}");
    for (level, text, _) in &got {
        assert!(*level <= NF_LOG_WARN, "a record above the level asked for: {level} {text}");
        for rust in ["ContextBuilder::", "Backend::", "CudaOptions::", "NeuralFrameContext"] {
            assert!(!text.contains(rust), "a Rust name in a message to C: {text}");
        }
    }
    eprintln!("announced: {text}");

    // Off: nothing more arrives.
    // SAFETY: NULL turns it off.
    assert_eq!(unsafe { nf_set_log_callback(None, ptr::null_mut(), NF_LOG_WARN) }, nf_status::NF_STATUS_OK);
    build_auto();
    assert!(RECEIVED.lock().unwrap_or_else(|e| e.into_inner()).is_empty(), "a record after the callback was removed");
}
