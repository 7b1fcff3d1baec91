//! The C API's planar frames and frame lists, driven as a host drives them, on the CPU
//! backend (lavapipe). The renderer of examples/support plays the host: one exportable
//! allocation that is not dedicated, imported once with `nf_context_import_memory`, frames'
//! planes placed in it (`nf_context_place_input_planes`/`_output_planes`) at offsets that are
//! multiples of 4 but not of 16, the planes out of R, G, B order, the rest of the allocation
//! poisoned; each result compared with ONNX Runtime's own CPU run of the same planes (computed
//! here, not by the library). Then a context on the renderer's device
//! (`nf_context_new_on_device`) runs frames with two waits and two signals through
//! `nf_frame`'s lists, the signals checked on the caller's own timelines; an old program's
//! smaller `nf_frame` is still taken; and the refusals name the C function and field.

mod common;

#[path = "../../examples/support/renderer.rs"]
mod renderer;

#[path = "../../tests/common/src/plane_pixels.rs"]
mod plane_pixels;

use std::ffi::{CStr, CString, c_void};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::ptr;
use std::sync::Mutex;
use std::time::Duration;

use ash::vk::{self, Handle};
use half::f16;
use neural_frame::ort;
use neural_frame_c::*;
use plane_pixels::{bytes_of, decode, encode, pitch, value};
use renderer::{RBuffer, Renderer};

/// One test at a time: each makes a renderer with its own Vulkan device.
static SERIAL: Mutex<()> = Mutex::new(());

/// The pooled block's usage: the renderer fills and reads it with copies.
const POOL_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);
/// What every byte outside the input planes holds before a frame: as f32 and f16 a NaN.
const POISON: u8 = 0xff;
const MODEL: &str = "models/test/tiny-x2-f32.onnx";

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

/// A context of its own on the renderer's physical device (import by fd).
fn own_context(r: &Renderer, width: u32, height: u32) -> *mut nf_context {
    let b = builder(width, height);
    let mut ctx = ptr::null_mut();
    // SAFETY: a live builder, freed once; valid pointers.
    unsafe {
        ok(nf_builder_set_device_uuid(b, r.identity.device_uuid.as_ptr()));
        ok(nf_context_new(b, &mut ctx));
        nf_builder_free(b);
    }
    ctx
}

/// A context on the renderer's own device, by its raw handles (bring your own device).
fn byo_context(r: &Renderer, width: u32, height: u32) -> *mut nf_context {
    let b = builder(width, height);
    let raw = |h: u64| h as usize as *mut c_void;
    // SAFETY: ash's vkGetInstanceProcAddr has the C signature nf_vk_get_instance_proc_addr
    // names (a dispatchable handle is a pointer; the result an optional function).
    let gipa = unsafe {
        std::mem::transmute::<
            vk::PFN_vkGetInstanceProcAddr,
            unsafe extern "system" fn(*mut c_void, *const std::ffi::c_char) -> nf_vk_void_function,
        >(r.entry.static_fn().get_instance_proc_addr)
    };
    let device = nf_vulkan_device {
        struct_size: size_of::<nf_vulkan_device>() as u32,
        get_instance_proc_addr: Some(gipa),
        instance: raw(r.instance.handle().as_raw()),
        api_version: vk::API_VERSION_1_2,
        physical_device: raw(r.physical.as_raw()),
        device: raw(r.device.handle().as_raw()),
        queue_family_index: r.queue_family,
        queue: raw(r.queue.as_raw()),
        post_queue: r.post_queue.map_or(ptr::null_mut(), |q| raw(q.as_raw())),
        enabled_instance_extensions: ptr::null(),
        enabled_instance_extension_count: 0,
        enabled_device_extensions: ptr::null(),
        enabled_device_extension_count: 0,
        // The test submits to the renderer's queue only while no call on the context runs.
        queue_lock: ptr::null(),
    };
    let mut ctx = ptr::null_mut();
    // SAFETY: the renderer's live handles, which outlive the context; the builder is freed once.
    unsafe {
        ok(nf_context_new_on_device(b, &device, &mut ctx));
        nf_builder_free(b);
    }
    ctx
}

/// The renderer's export of `alloc`, as C hands it over: the descriptor is now the caller's.
fn export(r: &Renderer, alloc: &renderer::Allocation) -> nf_memory_import {
    let m = r.export(alloc).expect("vkGetMemoryFdKHR");
    nf_memory_import {
        fd: m.fd.into_raw_fd(),
        allocation_size: m.allocation_size,
        memory_type_index: m.memory_type_index,
        dedicated: m.dedicated,
        device_uuid: m.origin.device_uuid,
        driver_uuid: m.origin.driver_uuid,
    }
}

/// ONNX Runtime's CPU run of the test model (NCHW, RGB, values in [0, 1] as they are) on
/// the colour planes `rgb` of `w`×`h`: the output's planes R, G, B.
fn reference(rgb: &[Vec<f32>], w: u32, h: u32) -> Vec<Vec<f32>> {
    let env = neural_frame::ort_environment().expect("ONNX Runtime loads");
    let mut session = ort::session::Session::builder(env)
        .expect("builder")
        .commit_from_file(common::root().join(MODEL))
        .expect("the model loads");
    let input = session.inputs()[0].name().to_string();
    let tensor: Vec<f32> = rgb.iter().flatten().copied().collect();
    let value = ort::value::Tensor::from_array(([1usize, 3, h as usize, w as usize], tensor)).expect("tensor");
    let out = session.run(ort::inputs![input.as_str() => value]).expect("the reference run");
    let (shape, o) = out[0].try_extract_tensor::<f32>().expect("f32 output");
    assert_eq!(&shape[..], &[1, 3, 2 * h as i64, 2 * w as i64], "the model's output shape");
    let plane = (4 * w * h) as usize;
    (0..3).map(|k| o[k * plane..(k + 1) * plane].to_vec()).collect()
}

/// Where the planes of a frame of `w`×`h` lie in the block from `at` on: 4-byte aligned,
/// the planes in the block in the order G, R, B, with gaps between; and the end.
fn layout(memory: nf_memory, at: u64, w: u32, h: u32, format: vk::Format) -> ([nf_plane; 3], u64) {
    let p = pitch(w, format);
    let size = p * h as u64;
    let gap = 4 * 37;
    let offsets = [at + size + gap, at, at + 2 * (size + gap) + 4];
    (offsets.map(|offset| nf_plane { memory, offset, row_pitch: p }), offsets[2] + size)
}

/// A frame's three planes and its size.
type Placed = ([nf_plane; 3], (u32, u32));

fn planar(format: vk::Format, w: u32, h: u32, planes: &[nf_plane]) -> nf_planar_frame {
    nf_planar_frame {
        format: format.as_raw(),
        width: w,
        height: h,
        planes: planes.as_ptr(),
        plane_count: planes.len(),
        ..nf_planar_frame::default()
    }
}

/// Whether byte `i` of the block lies inside the rows of one of `planes` (`w` pixels of
/// `e` bytes, `h` rows).
fn inside(planes: &[nf_plane], i: u64, w: u32, h: u32, e: u64) -> bool {
    planes
        .iter()
        .any(|p| i >= p.offset && i - p.offset < p.row_pitch * h as u64 && (i - p.offset) % p.row_pitch < w as u64 * e)
}

/// One host frame through the C calls: the block written with the input planes and poison
/// elsewhere, placed, submitted and waited for; the output planes against ONNX Runtime's run,
/// and no byte outside them written. Gives the largest difference.
fn check_frame(
    r: &Renderer,
    pool: &RBuffer,
    ctx: *mut nf_context,
    format: vk::Format,
    (input, output): (Placed, Placed),
    seed: u32,
) -> f32 {
    let ((in_planes, (w, h)), (out_planes, (ow, oh))) = (input, output);
    let e = bytes_of(format);
    let mut block = vec![POISON; pool.size as usize];
    let rgb: Vec<Vec<f32>> = (0..3u32)
        .map(|k| {
            (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| value(seed, k, x, y, w, format)).collect()
        })
        .collect();
    for (k, plane) in in_planes.iter().enumerate() {
        for y in 0..h as usize {
            for x in 0..w as usize {
                let at = plane.offset as usize + y * plane.row_pitch as usize + x * e as usize;
                block[at..at + e as usize].copy_from_slice(&encode(rgb[k][y * w as usize + x], format));
            }
        }
    }
    r.upload(pool, &block).expect("upload the block");
    let (mut in_id, mut out_id) = (0, 0);
    let mut ticket = nf_ticket::default();
    // SAFETY: a live context; the structs and their planes live through each call.
    unsafe {
        ok(nf_context_place_input_planes(ctx, &planar(format, w, h, &in_planes), &mut in_id));
        ok(nf_context_place_output_planes(ctx, &planar(format, ow, oh, &out_planes), &mut out_id));
        ok(nf_context_submit(ctx, &nf_frame { input: in_id, output: out_id, ..nf_frame::default() }, &mut ticket));
        ok(nf_context_wait(ctx, ticket.value, ptr::null_mut()));
        ok(nf_context_unregister_input(ctx, in_id));
        ok(nf_context_unregister_output(ctx, out_id));
    }
    let got = r.download(pool, pool.size as usize).expect("download the block");
    let want = reference(&rgb, w, h);
    let mut worst = (0f32, 0, 0, 0);
    for (k, plane) in out_planes.iter().enumerate() {
        for y in 0..oh as usize {
            for x in 0..ow as usize {
                let at = plane.offset as usize + y * plane.row_pitch as usize + x * e as usize;
                let v = decode(&got[at..at + e as usize], format);
                let mut want_v = want[k][y * ow as usize + x];
                if format == vk::Format::R16_SFLOAT {
                    want_v = f16::from_f32(want_v).to_f32();
                }
                let d = if v.is_nan() { f32::INFINITY } else { (v - want_v).abs() };
                if d > worst.0 {
                    worst = (d, x, y, k);
                }
            }
        }
    }
    // Every byte outside the output planes is as it was: the input planes, and poison.
    let stray = (0..got.len()).find(|&i| !inside(&out_planes, i as u64, ow, oh, e) && got[i] != block[i]);
    assert_eq!(stray, None, "{format:?} {w}x{h}: a byte outside the output planes was written");
    println!(
        "{format:?} {w}x{h} frame {seed}: max |diff| {:.2e} at ({}, {}) plane {} against ONNX Runtime",
        worst.0, worst.1, worst.2, worst.3
    );
    worst.0
}

/// RGBS (R32) at width 100 and RGBH (R16) at width 64, three frames each at block offsets
/// 4·3, 4·1001 and 4·25013, through one import of one pooled allocation; then released.
#[test]
fn planar_frames_in_imported_memory_match_onnx_runtime() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let r = Renderer::new(true).expect("a renderer with its own Vulkan device");
    for (format, w, tol) in [(vk::Format::R32_SFLOAT, 100u32, 1e-4f32), (vk::Format::R16_SFLOAT, 64, 4e-3)] {
        let h = 18;
        let ctx = own_context(&r, w, h);
        let (mut ow, mut oh) = (0, 0);
        // SAFETY: a live context and writable pointers.
        ok(unsafe { nf_context_output_size(ctx, &mut ow, &mut oh) });
        let pool = r.pool(4 << 20, POOL_USAGE).expect("a pooled block");
        let mut memory = 0;
        // SAFETY: a live context; the descriptor is handed over.
        ok(unsafe { nf_context_import_memory(ctx, &export(&r, &pool.alloc), &mut memory) });
        assert!(memory > 0);
        for (n, at) in [(0u32, 4u64 * 3), (1, 4 * 1001), (2, 4 * 25_013)] {
            let (input, end) = layout(memory, at, w, h, format);
            let (output, _) = layout(memory, end + 4 * 7, ow, oh, format);
            assert!(output.iter().chain(&input).all(|p| p.offset % 4 == 0), "4-byte offsets");
            assert!(input.iter().any(|p| p.offset % 16 != 0), "offsets that are not all multiples of 16");
            let worst = check_frame(&r, &pool, ctx, format, ((input, (w, h)), (output, (ow, oh))), n + 5);
            assert!(worst <= tol, "{format:?} {w}x{h} frame {n}: max |diff| {worst} over {tol}");
        }
        // SAFETY: a live context.
        unsafe {
            ok(nf_context_release_memory(ctx, memory));
            assert_eq!(nf_context_release_memory(ctx, memory), nf_status::NF_STATUS_INVALID_ARGUMENT);
            assert!(message().contains("not a registered memory"), "{}", message());
            let (planes, _) = layout(memory, 0, w, h, format);
            let mut id = 0;
            let status = nf_context_place_input_planes(ctx, &planar(format, w, h, &planes), &mut id);
            assert_eq!(status, nf_status::NF_STATUS_INVALID_ARGUMENT, "released memory is refused");
            assert!(message().contains("nf_planar_frame.planes[0].memory"), "{}", message());
            ok(nf_context_wait_all(ctx));
            nf_context_free(ctx);
        }
        r.destroy_buffer(pool);
    }
    assert_eq!(r.validation_errors(), 0, "the renderer's instance");
}

/// What a host may get wrong: refused with NF_STATUS_INVALID_ARGUMENT and a message naming
/// the C function and field; a dedicated allocation's import leaves the descriptor the
/// caller's; frame lists in NF_SYNC_HOST are refused; the context still runs afterwards.
#[test]
fn bad_planes_are_refused_naming_the_c_fields() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (64, 18);
    let ctx = own_context(&r, w, h);
    let pool = r.pool(1 << 20, POOL_USAGE).expect("a pooled block");
    let invalid = nf_status::NF_STATUS_INVALID_ARGUMENT;
    let f = vk::Format::R32_SFLOAT;
    let mut memory = 0;
    // SAFETY: a live context; every struct and array lives through its call.
    unsafe {
        ok(nf_context_import_memory(ctx, &export(&r, &pool.alloc), &mut memory));
        let (good, _) = layout(memory, 0, w, h, f);
        let mut id = 0;
        let refused = |frame: nf_planar_frame, words: &[&str]| {
            let mut id = 0;
            assert_eq!(nf_context_place_input_planes(ctx, &frame, &mut id), invalid, "{words:?}");
            for word in words {
                assert!(message().contains(word), "{word:?} not in: {}", message());
            }
            assert_eq!(id, 0, "out is written on success only");
        };
        let bad_format = nf_planar_frame { format: vk::Format::R8_SNORM.as_raw(), ..planar(f, w, h, &good) };
        refused(bad_format, &["nf_context_place_input_planes", "nf_planar_frame.format is 10", "VK_FORMAT_R32_SFLOAT"]);
        refused(planar(f, w, h, &good[..2]), &["nf_context_place_input_planes", "nf_planar_frame.plane_count is 2"]);
        let mut odd = good;
        odd[1].offset += 2;
        refused(planar(f, w, h, &odd), &["nf_context_place_input_planes", "plane 1", "offset (", "multiples of 4"]);
        refused(planar(f, w + 1, h, &good), &["nf_context_place_input_planes", "65×18"]);
        let mut stranger = good;
        stranger[2].memory = 77;
        refused(planar(f, w, h, &stranger), &["nf_planar_frame.planes[2].memory", "never gave"]);
        let no_planes = nf_planar_frame { planes: ptr::null(), ..planar(f, w, h, &good) };
        refused(no_planes, &["nf_planar_frame.planes is NULL"]);
        let unset = nf_planar_frame { struct_size: 0, ..planar(f, w, h, &good) };
        assert_eq!(nf_context_place_input_planes(ctx, &unset, &mut id), nf_status::NF_STATUS_STRUCT_SIZE);
        assert!(message().contains("NF_PLANAR_FRAME_INIT"), "{}", message());
        // Output planes that overlap.
        let (mut ow, mut oh) = (0, 0);
        ok(nf_context_output_size(ctx, &mut ow, &mut oh));
        let (mut out, _) = layout(memory, 1 << 18, ow, oh, f);
        out[1].offset = out[0].offset + 64;
        assert_eq!(nf_context_place_output_planes(ctx, &planar(f, ow, oh, &out), &mut id), invalid);
        assert!(message().contains("nf_context_place_output_planes") && message().contains("overlap"), "{}", message());

        // A dedicated allocation holds one resource: refused, and the descriptor is still ours.
        let dedicated = r.buffer(1 << 16, POOL_USAGE, false, true).expect("a dedicated allocation");
        let import = export(&r, &dedicated.alloc);
        let mut none = 0;
        assert_eq!(nf_context_import_memory(ctx, &import, &mut none), invalid);
        assert!(message().contains("dedicated"), "{}", message());
        let fd = OwnedFd::from_raw_fd(import.fd);
        assert!(std::fs::File::from(fd).metadata().is_ok(), "the failed import closed the descriptor");
        let negative = nf_memory_import { fd: -1, ..import };
        assert_eq!(nf_context_import_memory(ctx, &negative, &mut none), invalid);
        assert_eq!(nf_context_import_memory(ctx, ptr::null(), &mut none), invalid);
        assert_eq!(none, 0);

        // The good placement still runs; a frame of this host-signalled context that signals or
        // waits through the new lists is refused (it has no timeline to name).
        let mut input = 0;
        ok(nf_context_place_input_planes(ctx, &planar(f, w, h, &good), &mut input));
        let (out, _) = layout(memory, 1 << 18, ow, oh, f);
        let mut output = 0;
        ok(nf_context_place_output_planes(ctx, &planar(f, ow, oh, &out), &mut output));
        let mut mode = 9;
        ok(nf_context_sync_mode(ctx, &mut mode));
        assert_eq!(mode, NF_SYNC_HOST);
        let point = [nf_sync_point { timeline: 1, value: 1 }];
        let signals = nf_frame {
            input,
            output,
            signal_output_ready: point.as_ptr(),
            signal_output_ready_count: 1,
            ..nf_frame::default()
        };
        let mut ticket = nf_ticket::default();
        assert_eq!(nf_context_submit(ctx, &signals, &mut ticket), invalid);
        assert!(message().contains("nf_frame.signal_output_ready[0].timeline"), "{}", message());
        ok(nf_context_submit(ctx, &nf_frame { input, output, ..nf_frame::default() }, &mut ticket));
        ok(nf_context_wait(ctx, ticket.value, ptr::null_mut()));
        nf_context_free(ctx);
        r.destroy_buffer(dedicated);
    }
    r.destroy_buffer(pool);
    assert_eq!(r.validation_errors(), 0);
}

/// A context on the renderer's device: two frames, each waiting for two input timelines (one
/// reached only later, from another thread) and an output-free one, and signalling the
/// caller's timelines for input consumed (one) and output ready (two); the output is read
/// after the caller's own timelines only. The second frame names one of its waits in the old
/// single field and the other in the list. An old program's `nf_frame` (the first version's
/// size) is taken, its lists unread; bad lists are refused naming the field.
#[test]
fn waits_and_signals_as_lists_on_the_callers_device() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let r = Renderer::new(true).expect("a renderer");
    let (w, h) = (24u32, 16u32);
    let ctx = byo_context(&r, w, h);
    let (ow, oh) = (2 * w, 2 * h);
    let rgba = common::picture(w, h);
    let want = common::reference(&common::tiny_model(), w, h, &rgba);
    let storage = vk::BufferUsageFlags::STORAGE_BUFFER;
    let input = r.buffer((w * h * 4) as u64, storage, true, false).expect("input buffer");
    let output = r.buffer((ow * oh * 4) as u64, storage, true, false).expect("output buffer");
    r.write(&input, &rgba);
    let rgba8 = vk::Format::R8G8B8A8_UNORM.as_raw();
    let caller_buffer = |b: &RBuffer, (w, h): (u32, u32)| nf_caller_buffer {
        struct_size: size_of::<nf_caller_buffer>() as u32,
        buffer: b.buffer.as_raw(),
        size: b.size,
        usage: storage.as_raw(),
        layout: nf_pixel_layout { width: w, height: h, row_pitch: w as u64 * 4, format: rgba8 },
    };
    let sems: Vec<vk::Semaphore> = (0..6).map(|_| r.semaphore(true, false).expect("a timeline")).collect();
    let (mut i, mut o) = (0, 0);
    let mut ids = [0u64; 6];
    // SAFETY: a live context; the renderer's buffers and timelines outlive it.
    unsafe {
        let mut mode = 9;
        ok(nf_context_sync_mode(ctx, &mut mode));
        assert_eq!(mode, NF_SYNC_GPU, "a context on the caller's device is GPU-signalled");
        ok(nf_context_register_input_buffer(ctx, &caller_buffer(&input, (w, h)), &mut i));
        ok(nf_context_register_output_buffer(ctx, &caller_buffer(&output, (ow, oh)), &mut o));
        for (id, s) in ids.iter_mut().zip(&sems) {
            ok(nf_context_register_timeline(ctx, s.as_raw(), id));
        }
    }
    let [plane_a, plane_b, free, reads_done, written, written_too] = [0, 1, 2, 3, 4, 5].map(|k| (sems[k], ids[k]));
    let point = |t: (vk::Semaphore, u64), value: u64| nf_sync_point { timeline: t.1, value };
    for n in 1..=2u64 {
        r.write(&output, &vec![POISON; output.size as usize]);
        let waits = if n == 1 { vec![point(plane_a, n), point(plane_b, 10 * n)] } else { vec![point(plane_b, 10 * n)] };
        let output_free = [point(free, n)];
        let consumed = [point(reads_done, 3 * n)];
        let ready = [point(written, 7 * n), point(written_too, 100 + n)];
        let frame = nf_frame {
            input: i,
            output: o,
            // The second frame's first wait in the first version's single field.
            wait_timeline: if n == 2 { plane_a.1 } else { 0 },
            wait_value: if n == 2 { n } else { 0 },
            waits: waits.as_ptr(),
            wait_count: waits.len(),
            output_free: output_free.as_ptr(),
            output_free_count: 1,
            signal_input_consumed: consumed.as_ptr(),
            signal_input_consumed_count: 1,
            signal_output_ready: ready.as_ptr(),
            signal_output_ready_count: 2,
            ..nf_frame::default()
        };
        r.signal(plane_a.0, n).expect("signal");
        r.signal(free.0, n).expect("signal");
        // The second input's producer finishes later, on another thread: until then nothing of
        // the caller's is signalled (the CPU backend waits inside nf_context_submit).
        let device = r.device.clone();
        let (late, written_sem) = (plane_b.0, written.0);
        let signaller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            // SAFETY: live timelines of the renderer's device, below the value signalled.
            let before = unsafe { device.get_semaphore_counter_value(written_sem) }.expect("value");
            let info = vk::SemaphoreSignalInfo::default().semaphore(late).value(10 * n);
            // SAFETY: as above.
            unsafe { device.signal_semaphore(&info) }.expect("signal");
            before
        });
        let mut ticket = nf_ticket::default();
        // SAFETY: a live context; the frame's lists live through the call.
        ok(unsafe { nf_context_submit(ctx, &frame, &mut ticket) });
        let before = signaller.join().expect("the signalling thread");
        assert!(before < 7 * n, "output ready ({before}) signalled before the frame's second wait was reached");
        // The caller's own timelines, not the ticket's: consumed, then ready on both.
        r.wait(reads_done.0, 3 * n).expect("input consumed, on the caller's timeline");
        r.wait(written.0, 7 * n).expect("output ready, on the caller's timeline");
        r.wait(written_too.0, 100 + n).expect("output ready, on the second timeline");
        let got = r.read(&output, output.size as usize);
        common::assert_close(&got, &want, &format!("frame {n}, read after the caller's timelines"));
        println!(
            "frame {n}: two waits, two output-ready signals and one input-consumed signal reached; output matches"
        );
        // SAFETY: a live context.
        ok(unsafe { nf_context_wait(ctx, ticket.value, ptr::null_mut()) });
    }
    // SAFETY: a live context; every struct and array lives through its call.
    unsafe {
        // An old program's nf_frame: its struct_size ends before the lists, which are not read
        // (here they hold a timeline this context never gave).
        let bogus = [nf_sync_point { timeline: 999, value: 1 }];
        let lists = nf_frame {
            input: i,
            output: o,
            wait_timeline: plane_a.1,
            wait_value: 3,
            waits: bogus.as_ptr(),
            wait_count: 1,
            signal_output_ready: bogus.as_ptr(),
            signal_output_ready_count: 1,
            ..nf_frame::default()
        };
        let mut ticket = nf_ticket::default();
        assert_eq!(nf_context_submit(ctx, &lists, &mut ticket), nf_status::NF_STATUS_INVALID_ARGUMENT);
        assert!(message().contains("nf_frame.waits[0].timeline") && message().contains("never gave"), "{}", message());
        let first_version = std::mem::offset_of!(nf_frame, waits) as u32;
        assert_eq!(first_version, 88);
        let old = nf_frame { struct_size: first_version, ..lists };
        r.write(&output, &vec![POISON; output.size as usize]);
        r.signal(plane_a.0, 3).expect("signal");
        ok(nf_context_submit(ctx, &old, &mut ticket));
        ok(nf_context_wait(ctx, ticket.value, ptr::null_mut()));
        common::assert_close(&r.read(&output, output.size as usize), &want, "an old-size nf_frame");
        // A list NULL with a count.
        let null_list = nf_frame { input: i, output: o, output_free_count: 2, ..nf_frame::default() };
        assert_eq!(nf_context_submit(ctx, &null_list, &mut ticket), nf_status::NF_STATUS_INVALID_ARGUMENT);
        assert!(message().contains("nf_frame.output_free is NULL"), "{}", message());
        ok(nf_context_wait_all(ctx));
        nf_context_free(ctx);
    }
    r.destroy_buffer(input);
    r.destroy_buffer(output);
    for s in sems {
        r.destroy_semaphore(s);
    }
    assert_eq!(r.validation_errors(), 0, "the renderer's instance");
}
