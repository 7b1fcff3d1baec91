//! The C ABI's rules that the compiler does not check: the versioned structs can grow (their
//! size a multiple of 8, their last field ending at their size, so that a later field starts
//! at the size an older program passes), and the library's Rust names in messages become the
//! C API's (the mapping table, and a message from the library itself).

use std::mem::{offset_of, size_of, size_of_val};

use neural_frame_c::*;

/// `(name, size, end of the last field)` of a struct.
macro_rules! layout {
    ($t:ty, $last:ident) => {{
        // SAFETY: every struct it is used on is valid all-zero (integers, pointers, bools,
        // optional function pointers).
        let value: $t = unsafe { std::mem::zeroed() };
        (stringify!($t), size_of::<$t>(), offset_of!($t, $last) + size_of_val(&value.$last))
    }};
}

#[test]
fn versioned_structs_end_at_their_size_a_multiple_of_8() {
    let structs = [
        layout!(nf_frame, signal_output_ready_count),
        layout!(nf_planar_frame, plane_count),
        layout!(nf_ticket, output_ready_value),
        layout!(nf_frame_stats, reserved),
        layout!(nf_vulkan_device, queue_lock),
        layout!(nf_caller_image, layout),
        layout!(nf_caller_memory, reserved),
        layout!(nf_caller_buffer, layout),
        layout!(nf_image_import, reserved),
        layout!(nf_buffer_import, layout),
        layout!(nf_semaphore_import, reserved),
        layout!(nf_cuda_options, reserved_end),
    ];
    for (name, size, end) in structs {
        assert_eq!(size % 8, 0, "{name} is {size} bytes, not a multiple of 8");
        assert_eq!(end, size, "{name}'s last field ends at {end}, before its size {size}: add a reserved field");
    }
}

#[test]
fn rust_names_become_c_names() {
    for (rust, c, message) in [
        (
            "raw handles need a context built on your device (ContextBuilder::build_on); this one has its own",
            "raw handles need a context built on your device (nf_context_new_on_device); this one has its own",
            "build_on",
        ),
        (
            "choose another Vulkan device (ContextBuilder::device) or the CPU backend (Backend::Cpu)",
            "choose another Vulkan device (nf_builder_set_device_uuid or nf_builder_set_device_index) or the CPU \
             backend (NF_BACKEND_CPU)",
            "device",
        ),
        (
            "build the context with ContextBuilder::device(DeviceSelector::Uuid(..)) of the exporting device",
            "build the context with nf_builder_set_device_uuid of the exporting device",
            "device by UUID",
        ),
        (
            "a frame size of 0×0 is empty: set one with ContextBuilder::frame_size",
            "a frame size of 0×0 is empty: set one with nf_builder_set_frame_size",
            "frame_size",
        ),
        (
            "the frame does not give the model's input `albedo` (x): add Frame::with_input(\"albedo\", ..); the",
            "the frame does not give the model's input `albedo` (x): add an nf_named_input named \"albedo\" in \
             nf_frame.extra_inputs; the",
            "with_input",
        ),
        (
            "running it without them (CudaOptions::with_fuse_conv_act(false), --fuse-conv-act false, says so)",
            "running it without them (nf_cuda_options.fuse_conv_act = NF_TRISTATE_OFF, --fuse-conv-act false, says \
             so)",
            "fuse_conv_act",
        ),
        (
            "host-signalled mode (SyncMode::Host): learn of completion from wait, try_wait or wait_input_consumed",
            "host-signalled mode (NF_SYNC_HOST): learn of completion from nf_context_wait, nf_context_try_wait or \
             nf_context_wait_input_consumed",
            "host mode",
        ),
        (
            "works on images the context created (create_input_image, create_output_image), not on the caller's",
            "works on images the context created (nf_context_create_input_image, nf_context_create_output_image), \
             not on the caller's",
            "create_*",
        ),
        (
            "the ticket belongs to another NeuralFrameContext",
            "the ticket belongs to another nf_context",
            "NeuralFrameContext",
        ),
        (
            "(NeuralFrameContext::resize changes the frame size; register resources of the new size)",
            "(nf_context_resize changes the frame size; register resources of the new size)",
            "resize",
        ),
        (
            "PostWait::Host on the caller's single queue; keep PostWait::Gpu, or give CallerDevice::post_queue a queue",
            "NF_POST_WAIT_HOST on the caller's single queue; keep NF_POST_WAIT_GPU, or give \
             nf_vulkan_device.post_queue a queue",
            "post_wait",
        ),
        (
            "--tile 64x64, or `Tiling::new(64, 64, overlap)` in the library",
            "--tile 64x64, or \
             `nf_builder_set_tiling(builder, 64, 64, overlap)` in the library",
            "tiling",
        ),
        (
            "the frame signals a timeline of the caller's, but the context runs in host-signalled mode \
             (SyncMode::Host): wait for the ticket on the host (wait, wait_input_consumed) instead",
            "the frame signals a timeline of the caller's, but the context runs in host-signalled mode \
             (NF_SYNC_HOST): wait for the ticket on the host (nf_context_wait, nf_context_wait_input_consumed) instead",
            "signals in host mode",
        ),
        (
            "import it once (import_memory), then place_input_planes",
            "import it once (nf_context_import_memory), then nf_context_place_input_planes",
            "planes",
        ),
        // C names are left alone, and so is a Rust name inside a longer one.
        ("call nf_context_wait_settled first", "call nf_context_wait_settled first", "C name"),
        ("my_register_timeline_helper", "my_register_timeline_helper", "inside an identifier"),
    ] {
        assert_eq!(c_names(rust), c, "{message}");
    }
}

/// Every Rust name of the table is translated where it stands alone, and its C form is left as
/// it is by a second pass (no C name holds a Rust key).
#[test]
fn the_table_translates_each_name_once() {
    for (rust, c) in rust_to_c_names() {
        if rust.contains("{}") {
            continue;
        }
        let once = c_names(&format!("see {rust}."));
        assert_eq!(once, format!("see {c}."), "{rust}");
        assert_eq!(c_names(&once), once, "{rust}: its C form {c} is translated again");
    }
}

/// `nf_frame`'s first version ends where the lists of waits and signals start (88 bytes on
/// 64-bit targets), and the fixed array elements keep their layout.
#[test]
#[cfg(target_pointer_width = "64")]
fn the_frame_lists_follow_the_first_version() {
    assert_eq!(offset_of!(nf_frame, waits), 88, "nf_frame's first version was 88 bytes");
    assert_eq!(size_of::<nf_frame>(), 88 + 8 * 8);
    assert_eq!((size_of::<nf_sync_point>(), offset_of!(nf_sync_point, value)), (16, 8));
    assert_eq!((size_of::<nf_plane>(), offset_of!(nf_plane, offset), offset_of!(nf_plane, row_pitch)), (24, 8, 16));
    assert_eq!((size_of::<nf_planar_frame>(), offset_of!(nf_planar_frame, planes)), (32, 16));
}
