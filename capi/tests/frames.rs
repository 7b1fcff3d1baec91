//! The C API's frames, registrations, builder options, queue lock and image files, called
//! from Rust on the CPU backend (a context of its own on lavapipe): a frame through
//! `nf_context_submit` equals the library's `infer`; tickets, waits and stats; the
//! numbers of registrations; a failed import leaves the descriptor open and the caller's.
//! (The caller's own device is tested from C++: capi/examples/renderer.cpp, run by capi/ci.sh.)

mod common;

use std::ffi::{CStr, CString, c_char};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::ptr;

use neural_frame::ash::vk;
use neural_frame_c::*;

fn message() -> String {
    // SAFETY: nf_last_error_message never returns NULL; the text is read before the next call.
    unsafe { CStr::from_ptr(nf_last_error_message()) }.to_string_lossy().into_owned()
}

fn ok(status: nf_status) {
    assert_eq!(status, nf_status::NF_STATUS_OK, "{}", message());
}

fn c(text: &str) -> CString {
    CString::new(text).expect("no NUL")
}

/// A builder for the ×2 test model on the CPU backend at `width`×`height`.
fn builder(width: u32, height: u32) -> *mut nf_builder {
    let model = c(common::tiny_model().to_str().expect("UTF-8"));
    let mut b = ptr::null_mut();
    // SAFETY: valid arguments; the builder is freed by the caller.
    unsafe {
        ok(nf_builder_new(model.as_ptr(), &mut b));
        ok(nf_builder_set_backend(b, NF_BACKEND_CPU));
        ok(nf_builder_set_frame_size(b, width, height));
        if let Some(library) = common::ort_library() {
            ok(nf_builder_set_ort_library(b, c(library.to_str().expect("UTF-8")).as_ptr()));
        }
    }
    b
}

fn context(b: *const nf_builder) -> *mut nf_context {
    let mut ctx = ptr::null_mut();
    // SAFETY: a live builder and a writable out pointer.
    ok(unsafe { nf_context_new(b, &mut ctx) });
    ctx
}

#[test]
fn builder_options_take_the_library_values_and_refuse_others() {
    let b = builder(16, 8);
    let mean = [0.485f32, 0.456, 0.406];
    let std = [0.229f32, 0.224, 0.225];
    let zero = [0.5f32, 0.0, 0.5];
    let uuid = [0u8; 16];
    let name = c("input");
    // SAFETY: a live builder; every pointer valid for its call.
    unsafe {
        ok(nf_builder_set_frame_timeout_ms(b, 5000));
        ok(nf_builder_set_back_pressure(b, NF_BACK_PRESSURE_SKIP));
        ok(nf_builder_set_memory_budget(b, 1 << 30));
        ok(nf_builder_set_threads(b, 1));
        ok(nf_builder_set_gpu_timestamps(b, false));
        ok(nf_builder_set_spin_wait(b, false));
        let mut cuda: nf_cuda_options = std::mem::zeroed();
        cuda.struct_size = size_of::<nf_cuda_options>() as u32;
        ok(nf_cuda_options_default(&mut cuda));
        assert_eq!(cuda.struct_size as usize, std::mem::size_of::<nf_cuda_options>());
        assert_eq!((cuda.prefer_nhwc, cuda.fuse_conv_bias, cuda.cuda_graph, cuda.cuda_passes), (1, 1, 1, 1));
        assert_eq!((cuda.precision, cuda.fuse_conv_act), (NF_PRECISION_AUTO, NF_TRISTATE_DEFAULT));
        cuda.fast_start = 0;
        cuda.cuda_graph = 0;
        cuda.conv_search = NF_CONV_SEARCH_EXHAUSTIVE;
        cuda.post_wait = NF_POST_WAIT_GPU;
        cuda.fuse_conv_act = NF_TRISTATE_OFF;
        ok(nf_builder_set_cuda_options(b, &cuda));
        ok(nf_builder_set_validation(b, false));
        ok(nf_builder_set_layout(b, NF_LAYOUT_NCHW));
        ok(nf_builder_set_color_order(b, NF_COLOR_ORDER_RGB));
        ok(nf_builder_set_normalization(b, NF_NORMALIZATION_MEAN_STD, mean.as_ptr(), std.as_ptr()));
        ok(nf_builder_declare(
            b,
            NF_LAYOUT_MODEL,
            NF_COLOR_ORDER_MODEL,
            NF_NORMALIZATION_UNIT,
            ptr::null(),
            ptr::null(),
        ));
        ok(nf_builder_declare_tensor(b, name.as_ptr(), NF_LAYOUT_NCHW, 0, 0, ptr::null(), ptr::null()));
        ok(nf_builder_set_tiling(b, 512, 512, 24));
        ok(nf_builder_set_device_index(b, 0));
        ok(nf_builder_set_device_uuid(b, uuid.as_ptr()));

        let invalid = nf_status::NF_STATUS_INVALID_ARGUMENT;
        assert_eq!(nf_builder_set_back_pressure(b, 9), invalid);
        assert!(message().contains("back pressure 9"), "{}", message());
        for (field, bad) in [
            ("conv_search", nf_cuda_options { conv_search: 9, ..cuda }),
            ("post_wait", nf_cuda_options { post_wait: 9, ..cuda }),
            ("precision", nf_cuda_options { precision: 7, ..cuda }),
            ("fuse_conv_act", nf_cuda_options { fuse_conv_act: 3, ..cuda }),
            ("cuda_graph", nf_cuda_options { cuda_graph: 2, ..cuda }),
        ] {
            assert_eq!(nf_builder_set_cuda_options(b, &bad), invalid, "{field}");
            assert!(message().contains(field), "{field}: {}", message());
        }
        for size in [0, 4, 4097] {
            let unset = nf_cuda_options { struct_size: size, ..cuda };
            assert_eq!(nf_builder_set_cuda_options(b, &unset), nf_status::NF_STATUS_STRUCT_SIZE, "{size}");
            assert!(message().contains("NF_CUDA_OPTIONS_INIT"), "{}", message());
        }
        assert_eq!(nf_builder_set_cuda_options(b, ptr::null()), invalid);
        // A newer header's larger struct: this library reads the fields it knows, where the
        // newer ones are 0 (unused); one that is set is refused, never ignored.
        #[repr(C)]
        struct Newer {
            known: nf_cuda_options,
            added: u64,
        }
        let mut newer = Newer { known: nf_cuda_options { struct_size: size_of::<Newer>() as u32, ..cuda }, added: 0 };
        ok(nf_builder_set_cuda_options(b, &newer.known));
        newer.added = 7;
        assert_eq!(nf_builder_set_cuda_options(b, &newer.known), nf_status::NF_STATUS_UNSUPPORTED);
        assert!(message().contains("newer version"), "{}", message());
        assert_eq!(nf_builder_set_layout(b, NF_LAYOUT_MODEL), invalid);
        assert_eq!(nf_builder_set_frame_timeout_ms(b, 0), invalid);
        assert_eq!(nf_builder_set_tiling(b, 40, 40, 24), invalid, "a tile not larger than 3 overlaps");
        assert_eq!(nf_builder_set_normalization(b, NF_NORMALIZATION_MEAN_STD, mean.as_ptr(), zero.as_ptr()), invalid);
        assert!(message().contains("zero"), "{}", message());
        assert_eq!(nf_builder_set_normalization(b, NF_NORMALIZATION_MEAN_STD, ptr::null(), std.as_ptr()), invalid);
        assert_eq!(nf_builder_set_device_uuid(b, ptr::null()), invalid);
        assert_eq!(nf_builder_set_spin_wait(ptr::null_mut(), true), invalid);
        nf_builder_free(b);
    }
}

/// Two frames through `nf_context_submit` into images the context created: the ticket's
/// values, the waits and stats, the readback's size query; the result equals `infer`.
#[test]
fn frames_through_submit_equal_infer() {
    let (width, height) = (24u32, 14u32);
    let b = builder(width, height);
    let ctx = context(b);
    // SAFETY: the builder is live and freed once; the context does not keep it.
    unsafe { nf_builder_free(b) };
    let picture = common::picture(width, height);
    let (mut input, mut output) = (0, 0);
    let rgba8 = vk::Format::R8G8B8A8_UNORM.as_raw();
    // SAFETY: a live context and valid pointers throughout; freed at the end.
    unsafe {
        ok(nf_context_create_input_image(ctx, rgba8, &mut input));
        ok(nf_context_create_output_image(ctx, rgba8, &mut output));
        assert!(input > 0 && output > input, "numbers above 0, never reused: {input}, {output}");
        ok(nf_context_upload(ctx, input, picture.as_ptr(), picture.len()));
        let mut mode = 7;
        ok(nf_context_sync_mode(ctx, &mut mode));
        assert_eq!(mode, NF_SYNC_HOST, "lavapipe has no semaphore fds: a context of its own is host-signalled");

        let frame = nf_frame { input, output, ..nf_frame::default() };
        let (mut first, mut second) = (nf_ticket::default(), nf_ticket::default());
        ok(nf_context_submit(ctx, &frame, &mut first));
        ok(nf_context_submit(ctx, &frame, &mut second));
        assert_eq!((first.value, second.value), (1, 2));
        assert_eq!((second.input_consumed_value, second.output_ready_value), (2, 2));
        assert_ne!(second.output_ready_semaphore, 0);

        let mut stats = nf_frame_stats::default();
        ok(nf_context_wait_timeout(ctx, second.value, 30_000_000_000, &mut stats));
        assert_eq!((stats.ticket, stats.tiles), (2, 1));
        assert!(stats.pre_pass && stats.post_pass && !stats.cuda_passes);
        assert!(stats.infer_ms >= 0.0 && stats.latency_ms >= stats.infer_ms, "{stats:?}");
        let mut done = false;
        ok(nf_context_try_wait(ctx, first.value, &mut done, ptr::null_mut()));
        assert!(done, "frames retire in order");
        let mut consumed = false;
        ok(nf_context_try_input_consumed(ctx, first.value, &mut consumed));
        assert!(consumed);
        ok(nf_context_wait_input_consumed(ctx, second.value, 1_000_000_000));
        ok(nf_context_wait(ctx, first.value, ptr::null_mut()));
        ok(nf_context_wait_all(ctx));
        let (mut slots, mut in_flight, mut skipped) = (0, 9, 9);
        ok(nf_context_ring(ctx, &mut slots, &mut in_flight, &mut skipped));
        assert_eq!((slots, in_flight, skipped), (3, 0, 0));

        // Tickets it never gave, and registrations it does not have, are refused.
        let invalid = nf_status::NF_STATUS_INVALID_ARGUMENT;
        assert_eq!(nf_context_wait(ctx, 3, ptr::null_mut()), invalid);
        assert!(message().contains("its last is 2"), "{}", message());
        assert_eq!(nf_context_wait(ctx, 0, ptr::null_mut()), invalid);
        let wrong = nf_frame { input: output, ..frame };
        let mut ticket = nf_ticket::default();
        assert_eq!(nf_context_submit(ctx, &wrong, &mut ticket), invalid);
        assert!(message().contains("registration of another kind"), "{}", message());
        let waits = nf_frame { wait_timeline: 99, wait_value: 1, ..frame };
        assert_eq!(nf_context_submit(ctx, &waits, &mut ticket), invalid);
        assert!(message().contains("never gave"), "{}", message());

        // The readback: the size first (no buffer), then the texels; a buffer too small is refused.
        let mut len = 0usize;
        ok(nf_context_readback(ctx, output, ptr::null_mut(), &mut len));
        assert_eq!(len, (width * 2 * height * 2 * 4) as usize);
        let mut got = vec![0u8; len];
        let mut short = len - 1;
        assert_eq!(
            nf_context_readback(ctx, output, got.as_mut_ptr(), &mut short),
            nf_status::NF_STATUS_BUFFER_TOO_SMALL
        );
        assert_eq!(short, len);
        ok(nf_context_readback(ctx, output, got.as_mut_ptr(), &mut len));
        let want = common::reference(&common::tiny_model(), width, height, &picture);
        common::assert_close(&got, &want, "a frame through nf_context_submit");

        // The report, and the context's identity.
        let mut len = 0usize;
        ok(nf_context_report(ctx, ptr::null_mut(), &mut len));
        let mut text = vec![0u8; len];
        ok(nf_context_report(ctx, text.as_mut_ptr().cast::<c_char>(), &mut len));
        let text = String::from_utf8(text[..len - 1].to_vec()).expect("UTF-8");
        for line in ["backend: cpu", "caller_device: no", "sync_mode: host", "scale: ×2", "slots: 3"] {
            assert!(text.lines().any(|l| l == line), "the report lacks `{line}`:\n{text}");
        }
        let (mut device_uuid, mut driver_uuid) = ([0u8; 16], [0u8; 16]);
        ok(nf_context_device_identity(ctx, device_uuid.as_mut_ptr(), driver_uuid.as_mut_ptr()));
        assert!(text.contains(&format!("device_uuid: {}", neural_frame::format_uuid(&device_uuid))), "{text}");

        // Unregistered numbers are gone; the caller's handles need the caller's device.
        ok(nf_context_unregister_input(ctx, input));
        assert_eq!(nf_context_unregister_input(ctx, input), invalid);
        assert!(message().contains("unregistered"), "{}", message());
        let image = nf_caller_image {
            struct_size: size_of::<nf_caller_image>() as u32,
            image: 1,
            format: rgba8,
            width,
            height,
            usage: 4,
            tiling: 0,
            layout: 1,
        };
        let mut id = 0;
        assert_eq!(nf_context_register_input_image(ctx, &image, &mut id), invalid);
        // The library's message names ContextBuilder::build_on; C callers read the C name.
        assert!(message().contains("(nf_context_new_on_device)"), "{}", message());
        assert!(!message().contains("ContextBuilder") && !message().contains("build_on"), "{}", message());
        assert_eq!(nf_context_register_timeline(ctx, 1, &mut id), invalid);
        assert_eq!(nf_context_register_exportable_timeline(ctx, 1, &mut id), invalid);
        assert!(message().contains("nf_context_new_on_device"), "{}", message());
        nf_context_free(ctx);
    }
}

/// The versioned structs of a frame: an unset `struct_size` is refused before anything is
/// submitted; a newer (larger) ticket or stats struct gets its unknown tail zeroed and keeps
/// its `struct_size`; a newer frame whose unknown field is set is refused.
#[test]
fn versioned_frame_structs_are_checked_before_anything_runs() {
    let (width, height) = (8u32, 8u32);
    let b = builder(width, height);
    let ctx = context(b);
    let rgba8 = vk::Format::R8G8B8A8_UNORM.as_raw();
    let (mut input, mut output) = (0, 0);
    // SAFETY: a live context and valid pointers throughout; freed at the end.
    unsafe {
        nf_builder_free(b);
        ok(nf_context_create_input_image(ctx, rgba8, &mut input));
        ok(nf_context_create_output_image(ctx, rgba8, &mut output));
        let frame = nf_frame { input, output, ..nf_frame::default() };
        let size = nf_status::NF_STATUS_STRUCT_SIZE;
        let mut ticket = nf_ticket::default();
        let unset = nf_frame { struct_size: 0, ..frame };
        assert_eq!(nf_context_submit(ctx, &unset, &mut ticket), size);
        assert!(
            message().contains("nf_frame.struct_size is 0") && message().contains("NF_FRAME_INIT"),
            "{}",
            message()
        );
        let mut unset_ticket = nf_ticket { struct_size: 3, ..nf_ticket::default() };
        assert_eq!(nf_context_submit(ctx, &frame, &mut unset_ticket), size);
        assert!(message().contains("NF_TICKET_INIT"), "{}", message());
        let (mut slots, mut in_flight) = (0, 9);
        ok(nf_context_ring(ctx, &mut slots, &mut in_flight, ptr::null_mut()));
        assert_eq!(in_flight, 0, "a refused struct submits nothing");

        // A newer header's ticket: 16 more bytes, which this library zeroes.
        #[repr(C)]
        struct NewerTicket {
            known: nf_ticket,
            added: [u64; 2],
        }
        let mut newer = NewerTicket {
            known: nf_ticket { struct_size: size_of::<NewerTicket>() as u32, ..nf_ticket::default() },
            added: [u64::MAX; 2],
        };
        ok(nf_context_submit(ctx, &frame, &mut newer.known));
        assert_eq!(newer.known.struct_size as usize, size_of::<NewerTicket>(), "struct_size stays the caller's");
        assert_eq!((newer.known.value, newer.added), (1, [0, 0]));
        #[repr(C)]
        struct NewerStats {
            known: nf_frame_stats,
            added: u64,
        }
        let mut stats = NewerStats {
            known: nf_frame_stats { struct_size: size_of::<NewerStats>() as u32, ..nf_frame_stats::default() },
            added: 99,
        };
        let mut unset_stats = nf_frame_stats { struct_size: 0, ..nf_frame_stats::default() };
        assert_eq!(nf_context_wait(ctx, 1, &mut unset_stats), size);
        ok(nf_context_wait(ctx, 1, &mut stats.known));
        assert_eq!((stats.known.ticket, stats.known.tiles, stats.added), (1, 1, 0));

        // A newer header's frame: its unknown field 0 is taken, set is refused.
        #[repr(C)]
        struct NewerFrame {
            known: nf_frame,
            waits: *const u64,
            wait_count: usize,
        }
        let mut newer = NewerFrame {
            known: nf_frame { struct_size: size_of::<NewerFrame>() as u32, ..frame },
            waits: ptr::null(),
            wait_count: 0,
        };
        ok(nf_context_submit(ctx, &newer.known, &mut ticket));
        assert_eq!(ticket.value, 2);
        newer.wait_count = 1;
        assert_eq!(nf_context_submit(ctx, &newer.known, &mut ticket), nf_status::NF_STATUS_UNSUPPORTED);
        assert!(message().contains("does not know"), "{}", message());
        ok(nf_context_wait_all(ctx));
        nf_context_free(ctx);
    }
}

/// A refused import leaves the descriptor open and the caller's; a negative one is refused
/// before anything is taken.
#[test]
fn a_failed_import_gives_the_descriptor_back() {
    let b = builder(8, 8);
    let ctx = context(b);
    let file = std::fs::File::open(common::tiny_model()).expect("a file to pass as a descriptor");
    let fd = file.into_raw_fd();
    let import = nf_image_import {
        struct_size: size_of::<nf_image_import>() as u32,
        memory: nf_memory_import {
            fd,
            allocation_size: 4096,
            memory_type_index: 0,
            dedicated: true,
            device_uuid: [0xEE; 16],
            driver_uuid: [0xEE; 16],
        },
        format: vk::Format::R8G8B8A8_UNORM.as_raw(),
        width: 8,
        height: 8,
        usage: vk::ImageUsageFlags::SAMPLED.as_raw(),
        tiling: vk::ImageTiling::OPTIMAL.as_raw(),
        reserved: 0,
    };
    let mut id = 0;
    // SAFETY: a live context; the import's descriptor is open; `id` is writable.
    let status = unsafe { nf_context_import_input_image(ctx, &import, &mut id) };
    assert_eq!(status, nf_status::NF_STATUS_INVALID_ARGUMENT, "{}", message());
    // SAFETY: the descriptor is still ours (the C API's rule): take it back and use it.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    assert!(file.metadata().is_ok_and(|m| m.len() > 0), "the descriptor was closed by a failed import");
    assert_eq!(file.as_raw_fd(), fd);
    let negative = nf_semaphore_import {
        struct_size: size_of::<nf_semaphore_import>() as u32,
        fd: -1,
        semaphore_type: 1,
        device_uuid: [0; 16],
        driver_uuid: [0; 16],
        reserved: 0,
    };
    // SAFETY: as above.
    let status = unsafe { nf_context_import_timeline(ctx, &negative, &mut id) };
    assert_eq!(status, nf_status::NF_STATUS_INVALID_ARGUMENT);
    assert!(message().contains("not a file descriptor"), "{}", message());
    // SAFETY: both live, freed once.
    unsafe {
        nf_context_free(ctx);
        nf_builder_free(b);
    }
}

#[test]
fn the_queue_lock_is_held_by_one_thread_and_released_by_it() {
    let mut lock = ptr::null_mut();
    // SAFETY: a writable out pointer.
    ok(unsafe { nf_queue_lock_new(&mut lock) });
    let shared = lock as usize;
    let other = move || {
        let lock = shared as *const nf_queue_lock;
        // SAFETY: the lock outlives the thread (joined below).
        let status = unsafe { nf_queue_lock_release(lock) };
        assert_eq!(status, nf_status::NF_STATUS_INVALID_ARGUMENT, "another thread does not hold it");
        // SAFETY: as above; this waits until the main thread releases it.
        ok(unsafe { nf_queue_lock_acquire(lock) });
        // SAFETY: as above.
        ok(unsafe { nf_queue_lock_release(lock) });
    };
    // SAFETY: the lock is live until freed at the end.
    unsafe {
        ok(nf_queue_lock_acquire(lock));
        assert_eq!(nf_queue_lock_acquire(lock), nf_status::NF_STATUS_INVALID_ARGUMENT, "twice on one thread");
        let other = std::thread::spawn(other);
        std::thread::sleep(std::time::Duration::from_millis(50));
        ok(nf_queue_lock_release(lock));
        other.join().expect("the other thread");
        assert_eq!(nf_queue_lock_release(lock), nf_status::NF_STATUS_INVALID_ARGUMENT);
        nf_queue_lock_free(lock);
        nf_queue_lock_free(ptr::null_mut());
    }
}

#[test]
fn images_read_and_written_as_rgba8() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi-images");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let coffee = c(common::root().join("models/coffee.png").to_str().expect("UTF-8"));
    let (mut w, mut h, mut pixels) = (0u32, 0u32, ptr::null_mut());
    // SAFETY: valid pointers; the pixels are freed once below.
    unsafe {
        ok(nf_image_read(coffee.as_ptr(), &mut w, &mut h, &mut pixels));
        assert_eq!((w, h), (600, 400));
        let texels = std::slice::from_raw_parts(pixels, (w * h * 4) as usize);
        assert!(texels.chunks_exact(4).all(|p| p[3] == 255), "an RGB PNG reads as opaque RGBA8");
        let copy = c(dir.join("copy.png").to_str().expect("UTF-8"));
        ok(nf_png_write(copy.as_ptr(), pixels, w, h));
        let (mut w2, mut h2, mut again) = (0u32, 0u32, ptr::null_mut());
        ok(nf_image_read(copy.as_ptr(), &mut w2, &mut h2, &mut again));
        assert_eq!((w2, h2), (w, h));
        assert!(std::slice::from_raw_parts(again, texels.len()) == texels, "a PNG round trip is exact");
        nf_pixels_free(again);
        nf_pixels_free(pixels);
        nf_pixels_free(ptr::null_mut());
        let missing = c(dir.join("missing.png").to_str().expect("UTF-8"));
        let status = nf_image_read(missing.as_ptr(), &mut w, &mut h, &mut pixels);
        assert_eq!(status, nf_status::NF_STATUS_IMAGE);
        assert!(message().contains("missing.png"), "{}", message());
        // nf_png_write creates the missing directories of its path (as `mkdir -p`); one it
        // cannot create (a file is in the way) is NF_STATUS_IMAGE naming it, and nothing is written.
        let absent = dir.join("no-such-directory");
        let _ = std::fs::remove_dir_all(&absent);
        let nested = absent.join("a").join("b").join("out.png");
        let one = [1u8, 2, 3, 255];
        ok(nf_png_write(c(nested.to_str().expect("UTF-8")).as_ptr(), one.as_ptr(), 1, 1));
        assert!(nested.is_file(), "the PNG in the directories nf_png_write created");
        let blocker = absent.join("a-file");
        std::fs::write(&blocker, b"not a directory").expect("a file");
        let beneath = c(blocker.join("out.png").to_str().expect("UTF-8"));
        assert_eq!(nf_png_write(beneath.as_ptr(), one.as_ptr(), 1, 1), nf_status::NF_STATUS_IMAGE);
        assert!(message().contains("a-file"), "{}", message());
        assert_eq!(std::fs::read(&blocker).expect("the file"), b"not a directory", "the file in the way is kept");
    }
}
