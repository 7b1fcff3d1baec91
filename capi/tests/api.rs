//! The C API's entry points called from Rust (the crate is also an rlib): the status and
//! message of a failure, the string convention, NULL arguments, and the host path across
//! two sizes against the library's own `infer`.

mod common;

use std::ffi::{CStr, CString, c_char};
use std::ptr;

use neural_frame_c::*;

fn message() -> String {
    // SAFETY: nf_last_error_message never returns NULL; the text is read before the next call.
    unsafe { CStr::from_ptr(nf_last_error_message()) }.to_string_lossy().into_owned()
}

#[test]
fn a_missing_model_file_is_a_model_contract_failure_naming_the_file() {
    let path = CString::new(format!("{}/no-such-model.onnx", env!("CARGO_TARGET_TMPDIR"))).expect("no NUL");
    let mut builder = ptr::null_mut();
    // SAFETY: a NUL-terminated path and a writable out pointer.
    assert_eq!(unsafe { nf_builder_new(path.as_ptr(), &mut builder) }, nf_status::NF_STATUS_OK);
    // SAFETY: a live builder.
    assert_eq!(unsafe { nf_builder_set_backend(builder, NF_BACKEND_CPU) }, nf_status::NF_STATUS_OK);
    // SAFETY: as above.
    assert_eq!(unsafe { nf_builder_set_frame_size(builder, 8, 8) }, nf_status::NF_STATUS_OK);
    let mut ctx = ptr::null_mut();
    // SAFETY: a live builder and a writable out pointer.
    let status = unsafe { nf_context_new(builder, &mut ctx) };
    let text = message();
    assert_eq!(status, nf_status::NF_STATUS_MODEL_CONTRACT, "{text}");
    assert!(ctx.is_null(), "a failed nf_context_new leaves *out as it was");
    assert!(text.contains(path.to_str().expect("UTF-8")), "the message names the file: {text}");
    // SAFETY: the builder is live and freed once.
    unsafe { nf_builder_free(builder) };
    assert_eq!(message(), text, "a *_free call leaves the message, for a caller that frees before it reports");
    let mut again = ptr::null_mut();
    // SAFETY: a NUL-terminated path and a writable out pointer; the builder is freed once.
    unsafe {
        assert_eq!(nf_builder_new(path.as_ptr(), &mut again), nf_status::NF_STATUS_OK);
        assert_eq!(message(), "", "a successful call resets the message");
        nf_builder_free(again);
    }
}

#[test]
fn null_arguments_and_bad_values_are_refused_with_a_message() {
    let mut builder = ptr::null_mut();
    // SAFETY: NULL is an accepted argument (refused with a status).
    assert_eq!(unsafe { nf_builder_new(ptr::null(), &mut builder) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    assert!(message().contains("model_path"), "{}", message());
    // SAFETY: as above.
    assert_eq!(unsafe { nf_builder_set_slots(ptr::null_mut(), 2) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    let model = CString::new(common::tiny_model().to_str().expect("UTF-8")).expect("no NUL");
    // SAFETY: a NUL-terminated path and a writable out pointer.
    assert_eq!(unsafe { nf_builder_new(model.as_ptr(), &mut builder) }, nf_status::NF_STATUS_OK);
    // SAFETY: all-zero is a valid nf_cuda_options (integers); its struct_size is set next.
    let mut cuda: nf_cuda_options = unsafe { std::mem::zeroed() };
    cuda.struct_size = size_of::<nf_cuda_options>() as u32;
    // SAFETY: a writable struct of struct_size bytes.
    assert_eq!(unsafe { nf_cuda_options_default(&mut cuda) }, nf_status::NF_STATUS_OK);
    let bad = nf_cuda_options { precision: 7, ..cuda };
    // SAFETY: a live builder and a readable struct.
    assert_eq!(unsafe { nf_builder_set_cuda_options(builder, &bad) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    assert!(message().contains("precision 7"), "{}", message());
    // SAFETY: as above.
    assert_eq!(unsafe { nf_builder_set_frame_size(builder, 0, 4) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    // SAFETY: as above.
    assert_eq!(unsafe { nf_builder_set_slots(builder, 0) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    // SAFETY: a live builder, NULL out pointer (refused).
    assert_eq!(unsafe { nf_context_new(builder, ptr::null_mut()) }, nf_status::NF_STATUS_INVALID_ARGUMENT);
    let mut len = 0usize;
    // SAFETY: NULL context (refused).
    let status = unsafe { nf_context_backend_name(ptr::null(), ptr::null_mut(), &mut len) };
    assert_eq!(status, nf_status::NF_STATUS_INVALID_ARGUMENT);
    // SAFETY: the builder is live and freed once; NULL is ignored.
    unsafe {
        nf_builder_free(builder);
        nf_builder_free(ptr::null_mut());
        nf_context_free(ptr::null_mut());
    }
    // SAFETY: a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(nf_version()) }.to_str().expect("UTF-8");
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
}

/// The host path at two sizes (the second resizes the context) equals the library's `infer`,
/// and the report's strings come back by the size-in/size-out convention.
#[test]
fn infer_rgba8_at_two_sizes_matches_infer() {
    let model = common::tiny_model();
    let path = CString::new(model.to_str().expect("UTF-8")).expect("no NUL");
    let (mut builder, mut ctx) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid arguments; each handle is freed once below.
    unsafe {
        assert_eq!(nf_builder_new(path.as_ptr(), &mut builder), nf_status::NF_STATUS_OK);
        assert_eq!(nf_builder_set_backend(builder, NF_BACKEND_CPU), nf_status::NF_STATUS_OK);
        assert_eq!(nf_builder_set_frame_size(builder, 20, 12), nf_status::NF_STATUS_OK);
        if let Some(library) = common::ort_library() {
            let library = CString::new(library.to_str().expect("UTF-8")).expect("no NUL");
            assert_eq!(nf_builder_set_ort_library(builder, library.as_ptr()), nf_status::NF_STATUS_OK);
        }
        let status = nf_context_new(builder, &mut ctx);
        assert_eq!(status, nf_status::NF_STATUS_OK, "{}", message());
        nf_builder_free(builder);
    }
    let string = |get: unsafe extern "C" fn(*const nf_context, *mut c_char, *mut usize) -> nf_status| {
        let mut len = 0usize;
        // SAFETY: a live context; NULL buffer: a query.
        assert_eq!(unsafe { get(ctx, ptr::null_mut(), &mut len) }, nf_status::NF_STATUS_OK);
        let mut buf = vec![0u8; len];
        let mut cap = len;
        // SAFETY: a buffer of `cap` bytes.
        assert_eq!(unsafe { get(ctx, buf.as_mut_ptr().cast(), &mut cap) }, nf_status::NF_STATUS_OK);
        assert_eq!((cap, buf.pop()), (len, Some(0)), "the text and its NUL");
        String::from_utf8(buf).expect("UTF-8")
    };
    assert_eq!(string(nf_context_backend_name), "cpu");
    assert!(!string(nf_context_device_name).is_empty());
    assert_eq!(string(nf_context_fallback_reason), "");
    let (mut sx, mut sy) = (0, 0);
    // SAFETY: a live context and writable out pointers.
    assert_eq!(unsafe { nf_context_scale(ctx, &mut sx, &mut sy) }, nf_status::NF_STATUS_OK);
    assert_eq!((sx, sy), (2, 2));
    for (width, height) in [(20u32, 12u32), (33, 17)] {
        let picture = common::picture(width, height);
        let mut out = vec![0xA5u8; (width * sx * height * sy * 4) as usize];
        // SAFETY: a live context, an input of width*height*4 bytes, an output of out.len() bytes.
        let status =
            unsafe { nf_context_infer_rgba8(ctx, picture.as_ptr(), width, height, out.as_mut_ptr(), out.len()) };
        assert_eq!(status, nf_status::NF_STATUS_OK, "{}", message());
        let (mut fw, mut fh) = (0, 0);
        // SAFETY: a live context and writable out pointers.
        assert_eq!(unsafe { nf_context_frame_size(ctx, &mut fw, &mut fh) }, nf_status::NF_STATUS_OK);
        assert_eq!((fw, fh), (width, height));
        let want = common::reference(&model, width, height, &picture);
        common::assert_close(&out, &want, &format!("nf_context_infer_rgba8 at {width}x{height}"));
    }
    // SAFETY: the context is live and freed once.
    unsafe { nf_context_free(ctx) };
}
