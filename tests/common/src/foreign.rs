//! Scenarios of the renderer's own frames, run on the CPU backend
//! (tests/cpu_foreign.rs) and the CUDA backend (tests/gpu_foreign.rs): a
//! renderer with its own instance and device (examples/support) hands images,
//! buffers and timelines over by handle (bring your own device) or by file
//! descriptor, and every result is compared with ONNX Runtime's CPU run. The
//! renderer's instance runs under the validation layer, which must stay silent.

#[path = "../../../examples/support/renderer.rs"]
pub mod renderer;

use std::path::Path;
use std::time::{Duration, Instant};

use super::open_fds;
use super::pipeline::{POISON, expected_image, max_diff, picture, reference_output, values};
use ash::vk;
use neural_frame::{
    Backend, BufferImport, CallerBuffer, CallerImage, CallerMemory, ErrorKind, Frame, ImageImport, NeuralFrameContext,
    PixelLayout, Submitted, SyncMode,
};
pub use renderer::{RBuffer, RImage, Renderer};

pub const F32: &str = "models/test/tiny-x2-f32.onnx";
pub const U8: &str = "models/test/tiny-x1-rgba-u8.onnx";

/// The tests of this file run one at a time: some count the process's open file
/// descriptors and its memory, which tests running beside them would move.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn renderer() -> Renderer {
    Renderer::new(true).expect("a renderer with its own Vulkan device and the validation layer")
}

/// A context on the renderer's device (bring your own device).
pub fn byo(r: &Renderer, backend: Backend, model: &str, w: u32, h: u32) -> NeuralFrameContext {
    // SAFETY: the renderer outlives every context of these tests (dropped first), and
    // submits to its queue under the lock it hands over.
    unsafe { NeuralFrameContext::builder(model).backend(backend).frame_size(w, h).build_on(r.caller_device()) }
        .expect("context on the renderer's device")
}

/// A context of its own on the renderer's physical device (import by fd).
pub fn own(r: &Renderer, backend: Backend, model: &str, w: u32, h: u32) -> NeuralFrameContext {
    NeuralFrameContext::builder(model)
        .backend(backend)
        .device(neural_frame::DeviceSelector::Uuid(r.identity.device_uuid))
        .frame_size(w, h)
        .validation(true)
        .build()
        .expect("context of its own")
}

pub fn caller_image(i: &RImage, layout: vk::ImageLayout) -> CallerImage {
    CallerImage {
        image: i.image,
        format: i.format,
        width: i.width,
        height: i.height,
        usage: i.usage,
        tiling: vk::ImageTiling::OPTIMAL,
        layout,
    }
}

pub const IN_USAGE: vk::ImageUsageFlags =
    vk::ImageUsageFlags::from_raw(vk::ImageUsageFlags::SAMPLED.as_raw() | vk::ImageUsageFlags::TRANSFER_DST.as_raw());
pub const OUT_USAGE: vk::ImageUsageFlags =
    vk::ImageUsageFlags::from_raw(vk::ImageUsageFlags::STORAGE.as_raw() | vk::ImageUsageFlags::TRANSFER_SRC.as_raw());
pub const ALL: vk::AccessFlags =
    vk::AccessFlags::from_raw(vk::AccessFlags::MEMORY_READ.as_raw() | vk::AccessFlags::MEMORY_WRITE.as_raw());
pub const GENERAL: (vk::ImageLayout, vk::ImageLayout) = (vk::ImageLayout::GENERAL, vk::ImageLayout::GENERAL);

/// The renderer's "draw" into `image` (a copy from `staging`), and its readback of `output` into `readback`,
/// recorded once; `external`: the images are shared by fd and move through the external queue family.
pub struct Commands {
    pub render: vk::CommandBuffer,
    pub read: vk::CommandBuffer,
}

pub fn commands(
    r: &Renderer,
    input: &RImage,
    staging: &RBuffer,
    output: &RImage,
    readback: &RBuffer,
    external: bool,
) -> Commands {
    Commands {
        render: r.render_commands(input, staging, external).expect("render commands"),
        read: r.read_commands(output, readback, external).expect("readback commands"),
    }
}

/// Puts the images in GENERAL (and, shared by fd, with the external queue family), and waits.
pub fn prepare(r: &Renderer, images: &[&RImage], external: bool) {
    r.prepare(images, external).expect("prepare the images");
}

/// What the pipeline should give for `rgba` with the model at `model` (≤ 1/255 per channel).
pub fn expected(ctx: &NeuralFrameContext, model: &str, rgba: &[u8]) -> Vec<u8> {
    let (w, h) = ctx.frame_size();
    let contract = ctx.contract().clone();
    let reference = reference_output(Path::new(model), &contract, rgba, w, h);
    expected_image(&contract, &reference, rgba, w, h)
}

pub fn bgra(rgba: &[u8]) -> Vec<u8> {
    rgba.chunks(4).flat_map(|p| [p[2], p[1], p[0], p[3]]).collect()
}

pub fn bring_your_own_device_ring_with_gpu_sync_matches_onnx_runtime(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    byo_ring(&r, backend, false);
    // The renderer's timelines created exportable and registered so (where its device shares
    // semaphores): on CUDA the model's stream waits for them itself, no batch of the context's
    // on the renderer's queue.
    if r.has_semaphore_fd() {
        byo_ring(&r, backend, true);
    }
}

fn byo_ring(r: &Renderer, backend: Backend, exportable_timelines: bool) {
    println!("bring your own device, exportable timelines: {exportable_timelines}");
    let (w, h) = (37, 21);
    let mut ctx = byo(r, backend, F32, w, h);
    assert_eq!(ctx.sync_mode(), SyncMode::Gpu, "on the caller's device, semaphores are shared by nature");
    assert!(ctx.report().caller_device);
    let (ow, oh) = ctx.output_size();
    let k = 3;
    let mut ring = Vec::new();
    // Entries 0 and 2 of the ring have exportable memory (registered with it: on CUDA their
    // frames run as CUDA kernels), entry 1 not (the Vulkan passes): the route changes
    // from frame to frame.
    let shared = |n: u32| n != 1;
    for n in 0..k {
        let input = r.image(w, h, vk::Format::B8G8R8A8_UNORM, IN_USAGE, shared(n)).expect("input");
        let output = r.image(ow, oh, vk::Format::R8G8B8A8_UNORM, OUT_USAGE, shared(n)).expect("output");
        let rgba = picture(w, h, 40 + n);
        let staging = r.buffer(rgba.len() as u64, vk::BufferUsageFlags::TRANSFER_SRC, true, false).expect("staging");
        r.write(&staging, &bgra(&rgba));
        let readback =
            r.buffer((ow * oh * 4) as u64, vk::BufferUsageFlags::TRANSFER_DST, true, false).expect("readback");
        readback_poison(r, &readback);
        ring.push((input, output, staging, readback, rgba));
    }
    prepare(r, &ring.iter().flat_map(|e| [&e.0, &e.1]).collect::<Vec<_>>(), false);
    let rendered = r.semaphore(true, exportable_timelines).expect("timeline");
    let read_done = r.semaphore(true, exportable_timelines).expect("timeline");
    // SAFETY: the renderer's own timeline semaphores (exportable where registered so), alive
    // until the end of the test.
    let (rendered_id, read_id) = unsafe {
        if exportable_timelines {
            (
                ctx.register_exportable_timeline(rendered).expect("timeline"),
                ctx.register_exportable_timeline(read_done).expect("timeline"),
            )
        } else {
            (ctx.register_timeline(rendered).expect("timeline"), ctx.register_timeline(read_done).expect("timeline"))
        }
    };
    let mut ids = Vec::new();
    let mut cmds = Vec::new();
    for (n, (input, output, staging, readback, _)) in ring.iter().enumerate() {
        let (ci, co) = (caller_image(input, vk::ImageLayout::GENERAL), caller_image(output, vk::ImageLayout::GENERAL));
        let memory = |i: &RImage| CallerMemory {
            memory: i.alloc.memory,
            allocation_size: i.alloc.size,
            dedicated: i.alloc.dedicated,
        };
        // SAFETY: images of the renderer's device (bound at offset 0 to their own allocations,
        // exportable where shared), alive until the end of the test.
        let (i, o) = unsafe {
            if shared(n as u32) {
                (
                    ctx.register_input_image_with_memory(ci, memory(input)).expect("input"),
                    ctx.register_output_image_with_memory(co, memory(output)).expect("output"),
                )
            } else {
                (ctx.register_input_image(ci).expect("input"), ctx.register_output_image(co).expect("output"))
            }
        };
        ids.push((i, o));
        cmds.push(commands(r, input, staging, output, readback, false));
    }
    let frames = 3 * k as u64 + 1;
    let mut tickets = Vec::new();
    let mut last = vec![0u64; k as usize];
    let mut consumed = vk::Semaphore::null();
    let wants: Vec<Vec<u8>> = ring.iter().map(|e| expected(&ctx, F32, &e.4)).collect();
    let check = |n: u64| {
        let i = ((n - 1) % k as u64) as usize;
        r.wait(read_done, n).expect("readback done");
        let got = r.read(&ring[i].3, (ow * oh * 4) as usize);
        let (d, x, y, c) = max_diff(&got, &wants[i], ow);
        assert!(d <= 1, "frame {n}: ({x}, {y}) ch {c} differs by {d}");
    };
    for n in 1..=frames {
        let i = ((n - 1) % k as u64) as usize;
        if n > k as u64 {
            check(n - k as u64); // before this frame's readback overwrites the buffer
        }
        let wait: Vec<_> = (last[i] > 0).then_some((consumed, last[i])).into_iter().collect();
        r.submit(&[cmds[i].render], &wait, &[(rendered, n)]).expect("render");
        let mut frame = Frame::new(ids[i].0, ids[i].1).wait_for(rendered_id, n);
        if n > k as u64 {
            frame = frame.output_free_after(read_id, n - k as u64);
        }
        let Submitted::Frame(t) = ctx.submit(frame).expect("submit") else { panic!("skipped") };
        last[i] = t.value();
        consumed = t.input_consumed().semaphore;
        tickets.push((i, t));
        r.submit(&[cmds[i].read], &[(t.output_ready().semaphore, t.value())], &[(read_done, n)]).expect("read");
    }
    for n in frames + 1 - k as u64..=frames {
        check(n);
    }
    ctx.wait_all().expect("all frames");
    // The caller's own output images read back by the context (tools and tests), each
    // holding its entry's last frame.
    for (i, (_, o)) in ids.iter().enumerate() {
        let got = ctx.readback(*o).expect("readback of the caller's output image");
        let (d, x, y, c) = max_diff(&got, &wants[i], ow);
        assert!(d <= 1, "readback of entry {i}: ({x}, {y}) ch {c} differs by {d}");
    }
    for (i, t) in &tickets {
        let stats = ctx.wait(t).expect("retired");
        assert_eq!(stats.cuda_passes, backend == Backend::Cuda && shared(*i as u32), "entry {i}: {stats:?}");
    }
    drop(ctx);
    r.idle().expect("idle");
    for (input, output, staging, readback, _) in ring {
        r.destroy_image(input);
        r.destroy_image(output);
        r.destroy_buffer(staging);
        r.destroy_buffer(readback);
    }
    r.destroy_semaphore(rendered);
    r.destroy_semaphore(read_done);
    assert_eq!(r.validation_errors(), 0, "the validation layer reported errors");
}

pub fn readback_poison(r: &Renderer, b: &RBuffer) {
    r.write(b, &vec![0xa5; b.size as usize]);
}

pub fn bring_your_own_buffers_with_row_pitch_and_formats(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let (w, h) = (29, 11);
    let mut ctx = byo(&r, backend, F32, w, h);
    let (ow, oh) = ctx.output_size();
    let rgba = picture(w, h, 5);
    let storage = vk::BufferUsageFlags::STORAGE_BUFFER;
    // Input: BGRA8 rows padded to a pitch of width × 4 + 12 bytes.
    let in_layout =
        PixelLayout { width: w, height: h, row_pitch: w as u64 * 4 + 12, format: vk::Format::B8G8R8A8_UNORM };
    let input = r.buffer(in_layout.bytes(), storage, true, false).expect("input buffer");
    let mut texels = vec![0x77u8; in_layout.bytes() as usize];
    for y in 0..h as usize {
        let row = bgra(&rgba[y * w as usize * 4..(y + 1) * w as usize * 4]);
        texels[y * in_layout.row_pitch as usize..][..row.len()].copy_from_slice(&row);
    }
    r.write(&input, &texels);
    let want = expected(&ctx, F32, &rgba);
    // SAFETY: buffers of the renderer's device, alive until the end of the test.
    let input_id = unsafe {
        ctx.register_input_buffer(CallerBuffer {
            buffer: input.buffer,
            size: input.size,
            usage: storage,
            layout: in_layout,
        })
    }
    .expect("input buffer");
    for (format, pitch) in
        [(vk::Format::R8G8B8A8_UNORM, ow as u64 * 4 + 8), (vk::Format::B8G8R8A8_UNORM, ow as u64 * 4)]
    {
        let layout = PixelLayout { width: ow, height: oh, row_pitch: pitch, format };
        let output = r.buffer(layout.bytes(), storage, true, false).expect("output buffer");
        readback_poison(&r, &output);
        // SAFETY: as above.
        let out_id = unsafe {
            ctx.register_output_buffer(CallerBuffer {
                buffer: output.buffer,
                size: output.size,
                usage: storage,
                layout,
            })
        }
        .expect("output buffer");
        let stats = ctx.infer(input_id, out_id).expect("infer");
        assert!(stats.pre_pass && stats.post_pass);
        let bytes = r.read(&output, layout.bytes() as usize);
        let mut got = Vec::new();
        for y in 0..oh as usize {
            let row = &bytes[y * pitch as usize..][..ow as usize * 4];
            got.extend(if format == vk::Format::B8G8R8A8_UNORM { bgra(row) } else { row.to_vec() });
        }
        let (d, x, y, c) = max_diff(&got, &want, ow);
        assert!(d <= 1, "{format:?}: ({x}, {y}) ch {c} differs by {d}");
        ctx.unregister_output(out_id).expect("unregister");
        r.destroy_buffer(output);
    }
    // A half-float output buffer holds the model's output unclamped.
    let layout = PixelLayout::packed(ow, oh, vk::Format::R16G16B16A16_SFLOAT);
    let output = r.buffer(layout.bytes(), storage, true, false).expect("output buffer");
    readback_poison(&r, &output);
    // SAFETY: as above.
    let out_id = unsafe {
        ctx.register_output_buffer(CallerBuffer { buffer: output.buffer, size: output.size, usage: storage, layout })
    }
    .expect("output buffer");
    ctx.infer(input_id, out_id).expect("infer");
    let bytes = r.read(&output, layout.bytes() as usize);
    let contract = ctx.contract().clone();
    let tensor = values(contract.output, &reference_output(Path::new(F32), &contract, &rgba, w, h));
    let plane = (ow * oh) as usize;
    let worst = (0..plane)
        .flat_map(|i| (0..3).map(move |c| (i, c)))
        .map(|(i, c)| {
            let v = half::f16::from_le_bytes([bytes[(i * 4 + c) * 2], bytes[(i * 4 + c) * 2 + 1]]).to_f32();
            super::pipeline::abs_diff(v, tensor[c * plane + i])
        })
        .fold(0f32, f32::max);
    assert!(worst <= 2e-3, "RGBA16F buffer differs from ORT's tensor by {worst}");
    drop(ctx);
    r.destroy_buffer(input);
    r.destroy_buffer(output);
    assert_eq!(r.validation_errors(), 0);
}

pub fn import_by_fd_images_and_buffers(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let (w, h) = (31, 17);
    let mut ctx = own(&r, backend, F32, w, h);
    let (ow, oh) = ctx.output_size();
    if r.semaphore_fd.is_none() {
        assert_eq!(ctx.sync_mode(), SyncMode::Host, "no semaphore fds: host-signalled mode");
    }
    let rgba = picture(w, h, 21);
    let want = expected(&ctx, F32, &rgba);
    // Images: the renderer draws into its exported input and reads its exported output.
    let input = r.image(w, h, vk::Format::R8G8B8A8_UNORM, IN_USAGE, true).expect("input");
    let output = r.image(ow, oh, vk::Format::R8G8B8A8_UNORM, OUT_USAGE, true).expect("output");
    let staging = r.buffer(rgba.len() as u64, vk::BufferUsageFlags::TRANSFER_SRC, true, false).expect("staging");
    r.write(&staging, &rgba);
    let readback = r.buffer((ow * oh * 4) as u64, vk::BufferUsageFlags::TRANSFER_DST, true, false).expect("readback");
    readback_poison(&r, &readback);
    prepare(&r, &[&input, &output], true);
    let image = |i: &RImage| r.export_image(i).expect("export");
    let in_id = ctx.import_input_image(image(&input)).expect("import input");
    let out_id = ctx.import_output_image(image(&output)).expect("import output");
    let cmds = commands(&r, &input, &staging, &output, &readback, true);
    let done = r.semaphore(true, false).expect("timeline");
    for n in 1..=3u64 {
        // Host-signalled hand-over: the renderer's work is complete before submit.
        r.submit(&[cmds.render], &[], &[(done, 2 * n - 1)]).expect("render");
        r.wait(done, 2 * n - 1).expect("rendered");
        let Submitted::Frame(t) = ctx.submit(Frame::new(in_id, out_id)).expect("submit") else { panic!() };
        let stats = ctx.wait(&t).expect("frame");
        // On CUDA the images CUDA imported by fd run through the CUDA kernels.
        assert_eq!(stats.cuda_passes, backend == Backend::Cuda, "{stats:?}");
        r.submit(&[cmds.read], &[], &[(done, 2 * n)]).expect("read");
        r.wait(done, 2 * n).expect("read back");
        let got = r.read(&readback, (ow * oh * 4) as usize);
        let (d, x, y, c) = max_diff(&got, &want, ow);
        assert!(d <= 1, "image frame {n}: ({x}, {y}) ch {c} differs by {d}");
        readback_poison(&r, &readback);
    }
    // Linear buffers, exported device-local memory (the seed renderer's slots).
    let storage =
        vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::TRANSFER_SRC;
    let in_layout = PixelLayout::packed(w, h, vk::Format::R8G8B8A8_UNORM);
    let out_layout = PixelLayout::packed(ow, oh, vk::Format::R8G8B8A8_UNORM);
    let in_buf = r.buffer(in_layout.bytes(), storage, true, true).expect("input buffer");
    let out_buf = r.buffer(out_layout.bytes(), storage, true, true).expect("output buffer");
    r.write(&in_buf, &rgba);
    readback_poison(&r, &out_buf);
    let buf_in = ctx
        .import_input_buffer(BufferImport {
            memory: r.export(&in_buf.alloc).expect("export"),
            size: in_buf.size,
            usage: storage,
            layout: in_layout,
        })
        .expect("import input buffer");
    let buf_out = ctx
        .import_output_buffer(BufferImport {
            memory: r.export(&out_buf.alloc).expect("export"),
            size: out_buf.size,
            usage: storage,
            layout: out_layout,
        })
        .expect("import output buffer");
    let stats = ctx.infer(buf_in, buf_out).expect("infer buffers");
    assert!(stats.pre_pass && stats.post_pass, "an f32 model needs the passes");
    // Host-visible memory (the test writes and reads it mapped) takes the Vulkan passes: the
    // CUDA passes take device-local memory only.
    assert!(!stats.cuda_passes, "host-visible buffers imported by fd: {stats:?}");
    let got = r.read(&out_buf, out_layout.bytes() as usize);
    let (d, x, y, c) = max_diff(&got, &want, ow);
    assert!(d <= 1, "buffers: ({x}, {y}) ch {c} differs by {d}");
    assert_eq!(ctx.validation_errors(), 0, "the context's own instance");
    drop(ctx);
    for i in [input, output] {
        r.destroy_image(i);
    }
    for b in [staging, readback, in_buf, out_buf] {
        r.destroy_buffer(b);
    }
    r.destroy_semaphore(done);
    assert_eq!(r.validation_errors(), 0, "the renderer's instance");
}

pub fn a_buffer_the_model_takes_as_it_is_runs_no_pass(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let (w, h) = (23, 13);
    let mut ctx = own(&r, backend, U8, w, h);
    let rgba = picture(w, h, 33);
    let storage = vk::BufferUsageFlags::STORAGE_BUFFER;
    let layout = PixelLayout::packed(w, h, vk::Format::R8G8B8A8_UNORM);
    let in_buf = r.buffer(layout.bytes(), storage, true, true).expect("input");
    let out_buf = r.buffer(layout.bytes(), storage, true, true).expect("output");
    r.write(&in_buf, &rgba);
    readback_poison(&r, &out_buf);
    let i = ctx
        .import_input_buffer(BufferImport {
            memory: r.export(&in_buf.alloc).expect("export"),
            size: in_buf.size,
            usage: storage,
            layout,
        })
        .expect("import");
    let o = ctx
        .import_output_buffer(BufferImport {
            memory: r.export(&out_buf.alloc).expect("export"),
            size: out_buf.size,
            usage: storage,
            layout,
        })
        .expect("import");
    ctx.poison_slot_tensors(POISON).expect("poison the slots");
    let stats = ctx.infer(i, o).expect("infer");
    assert!(!stats.pre_pass && !stats.post_pass, "{stats:?}");
    let contract = ctx.contract().clone();
    let want = reference_output(Path::new(U8), &contract, &rgba, w, h);
    assert_eq!(r.read(&out_buf, want.len()), want, "the model wrote the caller's buffer with ORT's result");
    let untouched = POISON.to_le_bytes();
    for (k, (tin, tout)) in ctx.slot_tensors().expect("slot tensors").iter().enumerate() {
        assert!(tin.chunks(4).chain(tout.chunks(4)).all(|c| c == untouched), "slot {k}'s own tensors were used");
    }
    // The same buffers with a model that needs conversion would run the passes; a caller's
    // image input with this model takes the pre pass.
    let image = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("image");
    ctx.upload(image, &rgba).expect("upload");
    let stats = ctx.infer(image, o).expect("image in, buffer out");
    assert!(stats.pre_pass && !stats.post_pass, "{stats:?}");
    assert_eq!(r.read(&out_buf, want.len()), want);
    drop(ctx);
    r.destroy_buffer(in_buf);
    r.destroy_buffer(out_buf);
    assert_eq!(r.validation_errors(), 0);
}

pub fn bad_imports_are_refused_and_give_the_fd_back(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    // Large enough that the described image needs more memory than a 4×4 one holds, with any
    // driver's alignment (NVIDIA rounds image memory up to 64 KiB).
    let (w, h) = (256, 192);
    let mut ctx = own(&r, backend, F32, w, h);
    let (ow, oh) = ctx.output_size();
    let input = r.image(w, h, vk::Format::R8G8B8A8_UNORM, IN_USAGE, true).expect("input");
    let import = |memory| ImageImport {
        memory,
        format: input.format,
        width: w,
        height: h,
        usage: input.usage,
        tiling: vk::ImageTiling::OPTIMAL,
    };
    // Exportable memory may hold a descriptor of its own (lavapipe's memory files): made before counting.
    let small = r.image(4, 4, vk::Format::R8G8B8A8_UNORM, IN_USAGE, true).expect("small image");
    let r32 = r.image(w, h, vk::Format::R32_SFLOAT, IN_USAGE, true).expect("r32 image");
    let out = r.image(ow, oh, vk::Format::R8G8B8A8_UNORM, vk::ImageUsageFlags::TRANSFER_SRC, true).expect("output");
    // A binary semaphore, exported where the driver can (not lavapipe: there a pipe stands in for its fd).
    let binary = r.semaphore_fd.as_ref().map(|_| r.semaphore(false, true).expect("binary semaphore"));
    let fds = open_fds();
    // Another physical device (its UUID differs): refused, fd returned.
    let mut m = r.export(&input.alloc).expect("export");
    m.origin.device_uuid[0] ^= 0xff;
    let e = ctx.import_input_image(import(m)).expect_err("another device");
    assert_eq!(e.error().kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("same physical device"), "{e}");
    let mut m = r.export(&input.alloc).expect("export");
    assert_eq!(open_fds(), fds + 2, "the failed import's descriptor is still open, and the caller's");
    m.fd = e.into_fd();
    // A wrong memory type: refused; the same descriptor then imports fine.
    let (size, good_type, dedicated, origin) = (m.allocation_size, m.memory_type_index, m.dedicated, m.origin);
    m.memory_type_index = 31;
    let e = ctx.import_input_image(import(m)).expect_err("a memory type the device lacks");
    assert!(e.to_string().contains("memory type"), "{e}");
    let m = neural_frame::MemoryImport {
        fd: e.into_fd(),
        allocation_size: size,
        memory_type_index: good_type,
        dedicated,
        origin,
    };
    let fd_count = open_fds();
    let id = ctx.import_input_image(import(m)).expect("the returned fd imports");
    ctx.unregister_input(id).expect("unregister");
    assert_eq!(open_fds(), fd_count - 1, "a successful import owns the caller's descriptor, closed with the import");
    // An fd that is not memory.
    let (rd, wr) = std::io::pipe().expect("pipe");
    let pipe_fd: std::os::fd::OwnedFd = rd.into();
    let mut m = r.export(&input.alloc).expect("export");
    drop(std::mem::replace(&mut m.fd, pipe_fd));
    let e = ctx.import_input_image(import(m)).expect_err("a pipe");
    assert!(e.to_string().contains("pipe"), "{e}");
    drop((e.into_fd(), wr));
    // Memory smaller than described: the description needs more than the allocation holds.
    let e = ctx.import_input_image(import(r.export(&small.alloc).expect("export"))).expect_err("memory too small");
    assert!(e.to_string().contains("smaller"), "{e}");
    drop(e.into_fd());
    // ... or the description claims a larger allocation than the memory behind the fd.
    let mut m = r.export(&input.alloc).expect("export");
    let is_memfd =
        std::fs::File::from(m.fd.try_clone().expect("dup")).metadata().is_ok_and(|md| md.is_file() && md.len() > 0);
    m.allocation_size += 1 << 20;
    match ctx.import_input_image(import(m)) {
        Err(e) => {
            assert_eq!(e.error().kind(), ErrorKind::InvalidArgument, "{e}");
            println!("an allocation size larger than the memory: refused ({e})");
            drop(e.into_fd());
        }
        Ok(id) => {
            assert!(!is_memfd, "the driver's memory file says its size, and the lie was not caught");
            println!("an allocation size larger than the memory: the driver accepted it (its fds carry no size)");
            ctx.unregister_input(id).expect("unregister");
        }
    }
    // A format the pre pass cannot read (a depth format: copy depth into R32F first), and missing usage bits.
    let e = ctx
        .import_input_image(ImageImport {
            format: vk::Format::D32_SFLOAT,
            ..import(r.export(&r32.alloc).expect("export"))
        })
        .expect_err("D32");
    assert!(e.to_string().contains("D32_SFLOAT") && e.to_string().contains("R8G8B8A8_UNORM"), "{e}");
    drop(e.into_fd());
    let e = ctx
        .import_input_image(ImageImport {
            usage: vk::ImageUsageFlags::TRANSFER_DST,
            ..import(r.export(&input.alloc).expect("export"))
        })
        .expect_err("no SAMPLED");
    assert!(e.to_string().contains("SAMPLED"), "{e}");
    drop(e.into_fd());
    let e = ctx.import_output_image(r.export_image(&out).expect("export")).expect_err("no STORAGE");
    assert!(e.to_string().contains("STORAGE"), "{e}");
    drop(e.into_fd());
    // A binary semaphore where a timeline is needed, as the caller declares it: refused, fd returned.
    let (fd, pipe_end) = match binary {
        Some(s) => (r.export_semaphore(s).expect("export the binary semaphore"), None),
        None => {
            let (rd, wr) = std::io::pipe().expect("pipe");
            (rd.into(), Some(wr))
        }
    };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let e = ctx
        .import_timeline(neural_frame::SemaphoreImport {
            fd,
            semaphore_type: vk::SemaphoreType::BINARY,
            origin: ctx.device_identity(),
        })
        .expect_err("a binary semaphore");
    assert_eq!(e.error().kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("binary semaphore") && e.to_string().contains("TIMELINE"), "{e}");
    let fd = e.into_fd();
    assert_eq!(std::os::fd::AsRawFd::as_raw_fd(&fd), raw, "the caller's own descriptor comes back");
    drop((fd, pipe_end));
    if let Some(s) = binary {
        // SAFETY: the renderer's semaphore, not in use.
        unsafe { r.device.destroy_semaphore(s, None) };
    }
    assert_eq!(open_fds(), fds, "every descriptor went back to the caller and was closed there");
    // The context is still usable.
    let i = ctx.create_input_image(vk::Format::R8G8B8A8_UNORM).expect("input");
    let o = ctx.create_output_image(vk::Format::R8G8B8A8_UNORM).expect("output");
    ctx.upload(i, &picture(w, h, 2)).expect("upload");
    ctx.infer(i, o).expect("infer after refusals");
    drop(ctx);
    for img in [input, small, r32, out] {
        r.destroy_image(img);
    }
    assert_eq!(r.validation_errors(), 0);
}

/// One renderer-side frame set-up on the renderer's device: an input image with a
/// picture in its staging buffer, an output image and its readback buffer, registered.
pub struct Pair {
    pub input: RImage,
    pub output: RImage,
    pub staging: RBuffer,
    pub readback: RBuffer,
    pub cmds: Commands,
    pub ids: (neural_frame::InputId, neural_frame::OutputId),
    pub rgba: Vec<u8>,
}

/// A registered pair on a context built on the renderer's device.
pub fn pair(r: &Renderer, ctx: &mut NeuralFrameContext, seed: u32) -> Pair {
    let (w, h) = ctx.frame_size();
    let (ow, oh) = ctx.output_size();
    let input = r.image(w, h, vk::Format::R8G8B8A8_UNORM, IN_USAGE, false).expect("input");
    let output = r.image(ow, oh, vk::Format::R8G8B8A8_UNORM, OUT_USAGE, false).expect("output");
    let rgba = picture(w, h, seed);
    let staging = r.buffer(rgba.len() as u64, vk::BufferUsageFlags::TRANSFER_SRC, true, false).expect("staging");
    r.write(&staging, &rgba);
    let readback = r.buffer((ow * oh * 4) as u64, vk::BufferUsageFlags::TRANSFER_DST, true, false).expect("readback");
    readback_poison(r, &readback);
    prepare(r, &[&input, &output], false);
    // SAFETY: images of the renderer's device, destroyed only after the context.
    let ids = unsafe {
        (
            ctx.register_input_image(caller_image(&input, vk::ImageLayout::GENERAL)).expect("input"),
            ctx.register_output_image(caller_image(&output, vk::ImageLayout::GENERAL)).expect("output"),
        )
    };
    let cmds = commands(r, &input, &staging, &output, &readback, false);
    Pair { input, output, staging, readback, cmds, ids, rgba }
}

impl Pair {
    /// Draws the pair's picture (and waits for it).
    pub fn render(&self, r: &Renderer) {
        r.submit(&[self.cmds.render], &[], &[]).expect("render");
        r.idle().expect("idle");
    }
    /// Reads the output image back (and waits for it).
    pub fn read(&self, r: &Renderer) -> Vec<u8> {
        r.submit(&[self.cmds.read], &[], &[]).expect("read");
        r.idle().expect("idle");
        r.read(&self.readback, self.readback.size as usize)
    }
    pub fn destroy(self, r: &Renderer) {
        r.destroy_image(self.input);
        r.destroy_image(self.output);
        r.destroy_buffer(self.staging);
        r.destroy_buffer(self.readback);
    }
}

fn timed_builder(r: &Renderer, backend: Backend, timeout: Duration) -> NeuralFrameContext {
    // SAFETY: as in `byo`.
    unsafe {
        NeuralFrameContext::builder(F32)
            .backend(backend)
            .frame_size(24, 16)
            .frame_timeout(timeout)
            .build_on(r.caller_device())
    }
    .expect("context")
}

/// A value that never arrives is a timeout, the context stays usable once it
/// arrives, `try_wait` answers without blocking, and a drop with a frame still
/// waiting does not hang.
pub fn timeouts_leave_the_context_usable(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let timeout = Duration::from_millis(300);
    let mut ctx = timed_builder(&r, backend, timeout);
    let p = pair(&r, &mut ctx, 8);
    p.render(&r);
    let (ow, _) = ctx.output_size();
    let want = expected(&ctx, F32, &p.rgba);
    let t = r.semaphore(true, false).expect("timeline");
    // SAFETY: the renderer's timeline, alive until the end.
    let tid = unsafe { ctx.register_timeline(t) }.expect("timeline");
    let (i, o) = p.ids;
    // "Input written" never arrives: the frame times out (at submit on the CPU backend, which
    // runs the model inside it; at wait on the CUDA backend, whose GPU waits).
    let started = Instant::now();
    let waited = match ctx.submit(Frame::new(i, o).wait_for(tid, 5)) {
        Err(e) => Err(e),
        Ok(Submitted::Frame(ticket)) => ctx.wait(&ticket).map(|_| ()),
        Ok(Submitted::Skipped) => panic!("skipped"),
    };
    let e = waited.expect_err("a value that never arrives");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(started.elapsed() < timeout * 4, "bounded by the frame timeout");
    // It arrives late: the context goes on.
    r.signal(t, 5).expect("signal");
    ctx.wait_all().expect("the late frame finishes");
    let Submitted::Frame(ticket) = ctx.submit(Frame::new(i, o).wait_for(tid, 5)).expect("submit") else { panic!() };
    ctx.wait(&ticket).expect("frame");
    let (d, ..) = max_diff(&p.read(&r), &want, ow);
    assert!(d <= 1, "after the timeout, frames are right again (diff {d})");
    // "Output free" not yet reached: the frame is in flight; try_wait says so at once.
    let Submitted::Frame(ticket) = ctx.submit(Frame::new(i, o).output_free_after(tid, 6)).expect("submit") else {
        panic!()
    };
    let t0 = Instant::now();
    assert_eq!(ctx.try_wait(&ticket).expect("try_wait"), None, "the output is not free yet");
    assert!(t0.elapsed() < Duration::from_millis(100), "try_wait does not block");
    let e = ctx.wait_timeout(&ticket, Duration::from_millis(100)).expect_err("still held");
    assert_eq!(e.kind(), ErrorKind::Timeout);
    r.signal(t, 6).expect("signal");
    let stats = loop {
        if let Some(s) = ctx.try_wait(&ticket).expect("try_wait") {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the frame never retired");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(stats.ticket, ticket.value());
    assert_eq!(ctx.try_wait(&ticket).expect("again").map(|s| s.ticket), Some(ticket.value()), "retired stays retired");
    assert_eq!(ctx.wait(&ticket).expect("wait").ticket, ticket.value());
    // A frame that waits for ever, then the context is dropped: no hang.
    let _ = ctx.submit(Frame::new(i, o).output_free_after(tid, 1000)).expect("submit");
    let t0 = Instant::now();
    drop(ctx);
    assert!(t0.elapsed() < timeout * 10 + Duration::from_secs(2), "drop took {:?}", t0.elapsed());
    // (The frame's GPU objects are leaked, with an error logged, rather than destroyed in use.)
    r.signal(t, 1000).expect("release the renderer's side");
    r.idle().expect("idle");
    p.destroy(&r);
    r.destroy_semaphore(t);
}

/// Unregistering what a frame in flight uses keeps it alive until the frame is
/// done: the frame's result is right, the handle is refused from then on, and
/// the validation layer sees no use of a destroyed object.
pub fn unregister_in_flight_keeps_it_alive(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let mut ctx = byo(&r, backend, F32, 24, 16);
    let p = pair(&r, &mut ctx, 13);
    p.render(&r);
    let (ow, _) = ctx.output_size();
    let want = expected(&ctx, F32, &p.rgba);
    let t = r.semaphore(true, false).expect("timeline");
    // SAFETY: the renderer's timeline, alive until the end.
    let tid = unsafe { ctx.register_timeline(t) }.expect("timeline");
    let (i, o) = p.ids;
    let Submitted::Frame(ticket) = ctx.submit(Frame::new(i, o).output_free_after(tid, 1)).expect("submit") else {
        panic!()
    };
    assert_eq!(ctx.in_flight(), 1);
    ctx.unregister_input(i).expect("unregister the input in flight");
    ctx.unregister_output(o).expect("unregister the output in flight");
    ctx.unregister_timeline(tid).expect("unregister the timeline in flight");
    let e = ctx.submit(Frame::new(i, o)).expect_err("an unregistered handle");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("unregistered"), "{e}");
    r.signal(t, 1).expect("signal");
    ctx.wait(&ticket).expect("the frame finishes");
    let (d, ..) = max_diff(&p.read(&r), &want, ow);
    assert!(d <= 1, "the frame used its registrations to the end (diff {d})");
    drop(ctx);
    p.destroy(&r);
    r.destroy_semaphore(t);
    assert_eq!(r.validation_errors(), 0);
}

/// A frame waits for every one of several "input written" and "output free" points,
/// and signals several timelines of the caller's with "input consumed" and "output
/// ready": the output is read back after the caller's own "written" timeline alone.
pub fn waits_and_signals_as_lists(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let mut ctx = byo(&r, backend, F32, 24, 16);
    let p = pair(&r, &mut ctx, 17);
    p.render(&r);
    let (ow, _) = ctx.output_size();
    let want = expected(&ctx, F32, &p.rgba);
    let sems: Vec<vk::Semaphore> = (0..6).map(|_| r.semaphore(true, false).expect("timeline")).collect();
    // SAFETY: the renderer's timelines, alive until the end.
    let ids: Vec<_> = sems.iter().map(|&s| unsafe { ctx.register_timeline(s) }.expect("register")).collect();
    let [plane_a, plane_b, free, reads_done, written, written_too] = [0, 1, 2, 3, 4, 5].map(|k| (sems[k], ids[k]));
    let (i, o) = p.ids;
    for n in 1..=2u64 {
        let frame = Frame::new(i, o)
            .wait_for(plane_a.1, n)
            .wait_for(plane_b.1, 10 * n)
            .output_free_after(free.1, n)
            .signal_input_consumed(reads_done.1, 3 * n)
            .signal_output_ready(written.1, 7 * n)
            .signal_output_ready(written_too.1, 100 + n);
        r.signal(plane_a.0, n).expect("signal");
        r.signal(free.0, n).expect("signal");
        // The second plane's producer finishes later, on another thread: until then nothing
        // of the caller's is signalled (the CPU backend waits inside submit, CUDA on the GPU).
        let device = r.device.clone();
        let (late, written_sem) = (plane_b.0, written.0);
        let signaller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            // SAFETY: live timelines of the renderer's device, values below the ones signalled.
            let before = unsafe { device.get_semaphore_counter_value(written_sem) }.expect("value");
            let info = vk::SemaphoreSignalInfo::default().semaphore(late).value(10 * n);
            // SAFETY: as above.
            unsafe { device.signal_semaphore(&info) }.expect("signal");
            before
        });
        let Submitted::Frame(ticket) = ctx.submit(frame).expect("submit") else { panic!() };
        let before = signaller.join().expect("the signalling thread");
        assert!(before < 7 * n, "output ready ({before}) signalled before the frame's second wait was reached");
        // The caller's own timelines, not the ticket: consumed, then ready.
        r.wait(reads_done.0, 3 * n).expect("input consumed, on the caller's timeline");
        r.wait(written.0, 7 * n).expect("output ready, on the caller's timeline");
        r.wait(written_too.0, 100 + n).expect("output ready, on the second timeline");
        let (d, x, y, c) = max_diff(&p.read(&r), &want, ow);
        assert!(d <= 1, "frame {n}: ({x}, {y}) ch {c} differs by {d}");
        ctx.wait(&ticket).expect("the frame is done");
        readback_poison(&r, &p.readback);
    }
    // Signals in host-signalled mode are refused like waits: not on this context (Gpu mode).
    assert_eq!(ctx.sync_mode(), SyncMode::Gpu);
    drop(ctx);
    p.destroy(&r);
    for s in sems {
        r.destroy_semaphore(s);
    }
    assert_eq!(r.validation_errors(), 0);
}

/// Once "input consumed" is reached the renderer overwrites the input, before the
/// post pass has run: the result is unchanged (the frame's alpha travelled in the
/// slot). The input is a host-visible buffer the renderer overwrites from the
/// host, and the post pass is held by an "output free" value the host signals
/// afterwards: no submission of the renderer's has to pass the held post pass
/// on the shared queue.
pub fn input_overwritten_after_input_consumed(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let (w, h) = (24, 16);
    let mut ctx = byo(&r, backend, F32, w, h);
    let (ow, oh) = ctx.output_size();
    let rgba = picture(w, h, 17);
    let want = expected(&ctx, F32, &rgba);
    let storage = vk::BufferUsageFlags::STORAGE_BUFFER;
    let layout = PixelLayout::packed(w, h, vk::Format::R8G8B8A8_UNORM);
    let input = r.buffer(layout.bytes(), storage, true, false).expect("input buffer");
    r.write(&input, &rgba);
    let out_layout = PixelLayout::packed(ow, oh, vk::Format::R8G8B8A8_UNORM);
    let output = r.buffer(out_layout.bytes(), storage, true, false).expect("output buffer");
    readback_poison(&r, &output);
    // SAFETY: buffers and a timeline of the renderer's device, alive until the end.
    let (i, o, tid, t) = unsafe {
        let i =
            ctx.register_input_buffer(CallerBuffer { buffer: input.buffer, size: input.size, usage: storage, layout });
        let o = ctx.register_output_buffer(CallerBuffer {
            buffer: output.buffer,
            size: output.size,
            usage: storage,
            layout: out_layout,
        });
        let t = r.semaphore(true, false).expect("timeline");
        (i.expect("input"), o.expect("output"), ctx.register_timeline(t).expect("timeline"), t)
    };
    let Submitted::Frame(ticket) = ctx.submit(Frame::new(i, o).output_free_after(tid, 1)).expect("submit") else {
        panic!()
    };
    ctx.wait_input_consumed(&ticket, Duration::from_secs(10)).expect("input consumed");
    assert_eq!(ctx.try_wait(&ticket).expect("try_wait"), None, "the post pass is still held back");
    r.write(&input, &vec![0x33; rgba.len()]); // garbage, alpha too
    r.signal(t, 1).expect("output free");
    ctx.wait(&ticket).expect("frame");
    let (d, x, y, c) = max_diff(&r.read(&output, out_layout.bytes() as usize), &want, ow);
    assert!(d <= 1, "overwriting the input after input consumed changed the result at ({x}, {y}) ch {c} by {d}");
    drop(ctx);
    r.destroy_buffer(input);
    r.destroy_buffer(output);
    r.destroy_semaphore(t);
    assert_eq!(r.validation_errors(), 0);
}

/// 1,000 frames over a ring of 5 registered images with GPU-side hand-offs:
/// the open file descriptors and the resident memory stay flat.
pub fn a_thousand_frames_stay_flat(backend: Backend) {
    let _serial = serial();
    let r = Renderer::new(false).expect("renderer"); // the validation layer's own memory would grow
    let mut ctx = byo(&r, backend, F32, 16, 12);
    let (ow, _) = ctx.output_size();
    let ring: Vec<Pair> = (0..5).map(|k| pair(&r, &mut ctx, 50 + k)).collect();
    let wants: Vec<Vec<u8>> = ring.iter().map(|p| expected(&ctx, F32, &p.rgba)).collect();
    let rendered = r.semaphore(true, false).expect("timeline");
    let read_done = r.semaphore(true, false).expect("timeline");
    // SAFETY: the renderer's timelines, alive until the end.
    let (rid, did) =
        unsafe { (ctx.register_timeline(rendered).expect("t"), ctx.register_timeline(read_done).expect("t")) };
    let k = ring.len() as u64;
    let mut last = vec![0u64; ring.len()];
    let mut consumed = vk::Semaphore::null();
    let mut marks = Vec::new();
    for n in 1..=1000u64 {
        let i = ((n - 1) % k) as usize;
        let p = &ring[i];
        let wait: Vec<_> = (last[i] > 0).then_some((consumed, last[i])).into_iter().collect();
        r.submit(&[p.cmds.render], &wait, &[(rendered, n)]).expect("render");
        let mut frame = Frame::new(p.ids.0, p.ids.1).wait_for(rid, n);
        if n > k {
            frame = frame.output_free_after(did, n - k);
        }
        let Submitted::Frame(t) = ctx.submit(frame).expect("submit") else { panic!() };
        last[i] = t.value();
        consumed = t.input_consumed().semaphore;
        r.submit(&[p.cmds.read], &[(t.output_ready().semaphore, t.value())], &[(read_done, n)]).expect("read");
        if n == 100 || n == 1000 {
            r.wait(read_done, n).expect("read back");
            let (d, ..) = max_diff(&r.read(&p.readback, p.readback.size as usize), &wants[i], ow);
            assert!(d <= 1, "frame {n} differs by {d}");
            ctx.wait_all().expect("drained");
            marks.push((open_fds(), super::rss_kib()));
        }
    }
    let ((fds0, rss0), (fds1, rss1)) = (marks[0], marks[1]);
    println!("after 100 frames: {fds0} fds, {rss0} KiB resident; after 1000: {fds1} fds, {rss1} KiB");
    assert_eq!(fds1, fds0, "file descriptors leaked over 900 frames");
    assert!(rss1 < rss0 + 8 * 1024, "resident memory grew by {} KiB over 900 frames", rss1 - rss0);
    drop(ctx);
    for p in ring {
        p.destroy(&r);
    }
    r.destroy_semaphore(rendered);
    r.destroy_semaphore(read_done);
}
