//! Planar float frames in a host's pooled memory (tests/cpu_planes.rs on the CPU
//! backend, tests/gpu_planes.rs on the CUDA backend): the renderer of
//! examples/support plays the host, with one exportable block that is not
//! dedicated, imported once; frames' planes are placed in it at offsets that are
//! multiples of 4 but of nothing larger, with padded pitches, as VapourSynth R81
//! lays out RGBS and RGBH. Every result is compared with ONNX Runtime's CPU run
//! of the same planes, the output region poisoned first.

use std::path::Path;

use ash::vk;
use half::f16;
use neural_frame::{
    Backend, Element, ErrorKind, MemoryId, ModelContract, NeuralFrameContext, PlanarFrame, Plane, TensorKind,
};

use super::foreign::{Renderer, own, renderer, serial};
use super::open_fds;
use super::pipeline::{affine, element_index, rgba_channel};
use super::plane_pixels::{bytes_of, decode, encode, pitch, quantize, value};

/// The block's usage: the renderer fills and reads it with copies.
const POOL_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// The byte every poisoned output holds: as f32 and as f16 a NaN.
const POISON: u8 = 0xff;

/// ONNX Runtime's CPU run of the model on colour planes `rgb` (each w × h, values as
/// the frame holds them): the output's colour planes R, G, B.
pub fn reference_planes(model: &Path, contract: &ModelContract, rgb: &[Vec<f32>], w: u32, h: u32) -> Vec<Vec<f32>> {
    let env = neural_frame::ort_environment().expect("ONNX Runtime loads");
    let mut session =
        ort::session::Session::builder(env).expect("builder").commit_from_file(model).expect("model loads");
    let kind: TensorKind = contract.input;
    let plane = (w * h) as usize;
    let c = kind.channels as usize;
    let mut t = vec![0f32; c * plane];
    for px in 0..plane {
        for ch in 0..c {
            let (mul, add) = affine(kind.normalization, ch);
            let colour = rgba_channel(kind, ch);
            let v = if colour < 3 { rgb[colour][px] } else { 1.0 };
            t[element_index(kind, plane, px, ch)] = v * mul + add;
        }
    }
    let shape = kind.shape(w, h).map(|d| d as usize);
    let name = contract.input_name.as_str();
    let out = match kind.element {
        Element::F32 => {
            let value = ort::value::Tensor::from_array((shape, t)).expect("tensor");
            session.run(ort::inputs![name => value]).expect("reference run")
        }
        Element::F16 => {
            let data: Vec<f16> = t.iter().map(|v| f16::from_f32(*v)).collect();
            let value = ort::value::Tensor::from_array((shape, data)).expect("tensor");
            session.run(ort::inputs![name => value]).expect("reference run")
        }
        other => panic!("no planar reference for {other:?}"),
    };
    let value = &out[contract.output_name.as_str()];
    let o: Vec<f32> = match contract.output.element {
        Element::F32 => value.try_extract_tensor::<f32>().expect("f32").1.to_vec(),
        Element::F16 => value.try_extract_tensor::<f16>().expect("f16").1.iter().map(|v| v.to_f32()).collect(),
        other => panic!("no planar reference for {other:?}"),
    };
    let okind = contract.output;
    let shape = value.shape().to_vec();
    let (oh, ow) = match okind.layout {
        neural_frame::Layout::Nchw => (shape[2], shape[3]),
        neural_frame::Layout::Nhwc => (shape[1], shape[2]),
    };
    let oplane = (ow * oh) as usize;
    assert_eq!(o.len(), okind.channels as usize * oplane, "output of shape {shape:?}");
    (0..3)
        .map(|k| {
            let ch = (0..okind.channels as usize).find(|&ch| rgba_channel(okind, ch) == k).expect("an RGB output");
            let (mul, add) = affine(okind.normalization, ch);
            (0..oplane).map(|px| (o[element_index(okind, oplane, px, ch)] - add) / mul).collect()
        })
        .collect()
}

/// Where the planes of a frame of `w × h` lie in the block from `at` on: 4-byte aligned,
/// planes in an order that is not R, G, B, with gaps between.
fn layout(memory: MemoryId, at: u64, w: u32, h: u32, format: vk::Format) -> (PlanarFrame, u64) {
    let p = pitch(w, format);
    let size = p * h as u64;
    let gap = 4 * 37;
    let offsets = [at + size + gap, at, at + 2 * (size + gap) + 4];
    let planes = offsets.iter().map(|&offset| Plane { memory, offset, row_pitch: p }).collect();
    (PlanarFrame { format, width: w, height: h, planes }, offsets[2] + size)
}

/// One host frame through the context: the block written with the input planes and
/// poison elsewhere, the frame run, the output planes read back and compared.
#[allow(clippy::too_many_arguments)]
fn check_frame(
    r: &Renderer,
    pool: &super::foreign::RBuffer,
    ctx: &mut NeuralFrameContext,
    model: &str,
    (input, output): (&PlanarFrame, &PlanarFrame),
    seed: u32,
    tol: f32,
) -> bool {
    let (w, h) = (input.width, input.height);
    let format = input.format;
    let e = bytes_of(format) as usize;
    let mut block = vec![POISON; pool.size as usize];
    let rgb: Vec<Vec<f32>> = (0..3u32)
        .map(|k| {
            (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| value(seed, k, x, y, w, format)).collect()
        })
        .collect();
    for (k, plane) in input.planes.iter().enumerate() {
        for y in 0..h as usize {
            for x in 0..w as usize {
                let at = plane.offset as usize + y * plane.row_pitch as usize + x * e;
                block[at..at + e].copy_from_slice(&encode(rgb[k][y * w as usize + x], format));
            }
        }
    }
    r.upload(pool, &block).expect("upload the block");
    let in_id = ctx.place_input_planes(input).expect("place the input planes");
    let out_id = ctx.place_output_planes(output).expect("place the output planes");
    let stats = ctx.infer(in_id, out_id).expect("the planar frame");
    let got = r.download(pool, pool.size as usize).expect("download the block");
    let contract = ctx.contract().clone();
    let want = reference_planes(Path::new(model), &contract, &rgb, w, h);
    let (ow, oh) = (output.width, output.height);
    let oe = bytes_of(output.format) as usize;
    let mut worst = (0f32, 0, 0, 0);
    let mut sq = 0f64;
    for (k, plane) in output.planes.iter().enumerate() {
        for y in 0..oh as usize {
            for x in 0..ow as usize {
                let at = plane.offset as usize + y * plane.row_pitch as usize + x * oe;
                let v = decode(&got[at..at + oe], output.format);
                let want_v = quantize(want[k][y * ow as usize + x], output.format);
                let d = if v.is_nan() { f32::INFINITY } else { (v - want_v).abs() };
                sq += (d as f64).powi(2);
                if d > worst.0 {
                    worst = (d, x, y, k);
                }
            }
        }
    }
    let mse = sq / (3 * ow * oh) as f64;
    let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (1.0 / mse).log10() };
    // The input planes are untouched, and no byte of the block outside the output planes was written.
    for (k, plane) in input.planes.iter().enumerate() {
        let at = plane.offset as usize + (h as usize - 1) * plane.row_pitch as usize;
        assert_eq!(
            decode(&got[at..at + e], format),
            rgb[k][(h as usize - 1) * w as usize],
            "input plane {k} was written"
        );
    }
    let outside = |i: usize| {
        !output.planes.iter().any(|p| {
            let rel = i as i64 - p.offset as i64;
            rel >= 0 && (rel as u64) < p.row_pitch * oh as u64 && ((rel as u64) % p.row_pitch) < ow as u64 * oe as u64
        }) && !input.planes.iter().any(|p| {
            let rel = i as i64 - p.offset as i64;
            rel >= 0 && (rel as u64) < p.row_pitch * h as u64 && ((rel as u64) % p.row_pitch) < w as u64 * e as u64
        })
    };
    let stray = (0..got.len()).step_by(61).find(|&i| outside(i) && got[i] != POISON);
    assert_eq!(stray, None, "{model}: a byte outside the planes was written");
    ctx.unregister_input(in_id).expect("unregister");
    ctx.unregister_output(out_id).expect("unregister");
    println!(
        "{model} {format:?} {w}x{h}: max |diff| {:.2e} at ({}, {}) plane {}, PSNR {psnr:.1} dB, CUDA passes {}",
        worst.0, worst.1, worst.2, worst.3, stats.cuda_passes
    );
    assert!(worst.0 <= tol, "{model} {format:?}: ({}, {}) plane {} differs by {}", worst.1, worst.2, worst.3, worst.0);
    assert!(psnr >= 45.0, "{model}: PSNR {psnr:.1} dB");
    stats.cuda_passes
}

/// RGBS and RGBH frames of widths 64 and 100 (padded pitches), ×2 models of f32 and f16
/// tensors, RGB and BGR order, unit, signed and mean/std ranges, several frames a context
/// with the placements made and dropped each frame, then the block released: every
/// descriptor closed.
pub fn planar_frames_match_onnx_runtime(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let cases: [(&str, vk::Format, u32, f32); 7] = [
        // One code of 255 (and a hair for the f32 model's rounding at a code's midpoint).
        ("models/test/tiny-x2-f32.onnx", vk::Format::R8_UNORM, 100, 1.0 / 255.0 + 1e-5),
        ("models/test/tiny-x2-f16.onnx", vk::Format::R8_UNORM, 64, 1.0 / 255.0 + 1e-5),
        ("models/test/tiny-x2-f32.onnx", vk::Format::R32_SFLOAT, 100, 1e-4),
        ("models/test/tiny-x2-f32.onnx", vk::Format::R16_SFLOAT, 64, 4e-3),
        ("models/test/tiny-x2-f16.onnx", vk::Format::R16_SFLOAT, 100, 8e-3),
        ("models/test/tiny-x2-f32-bgr-signed.onnx", vk::Format::R32_SFLOAT, 64, 1e-4),
        ("models/test/tiny-x2-f32-meanstd.onnx", vk::Format::R16_SFLOAT, 100, 4e-3),
    ];
    for (model, format, w, tol) in cases {
        let h = 18;
        let mut ctx = own(&r, backend, model, w, h);
        let (ow, oh) = ctx.output_size();
        let pool = r.pool(4 << 20, POOL_USAGE).expect("a pooled block");
        let fds = open_fds();
        let memory = ctx.import_memory(r.export(&pool.alloc).expect("export")).expect("import the block once");
        assert_eq!(open_fds(), fds, "the import owns the exported descriptor (closed, or kept by the driver)");
        let mut cuda = Vec::new();
        for (n, at) in [(0u32, 4u64 * 3), (1, 4 * 1001), (2, 4 * 25_013)] {
            let (input, end) = layout(memory, at, w, h, format);
            let (output, _) = layout(memory, (end + 4 * 7).next_multiple_of(4), ow, oh, format);
            cuda.push(check_frame(&r, &pool, &mut ctx, model, (&input, &output), n + 5, tol));
        }
        let on_cuda = backend == Backend::Cuda;
        assert!(cuda.iter().all(|&c| c == on_cuda), "CUDA passes {cuda:?} on {backend:?}");
        ctx.release_memory(memory).expect("release");
        ctx.wait_all().expect("drained");
        assert!(open_fds() <= fds, "every descriptor of the import closed: {} > {fds}", open_fds());
        let stale = ctx.release_memory(memory).expect_err("released twice");
        assert_eq!(stale.kind(), ErrorKind::InvalidArgument);
        assert_eq!(ctx.validation_errors(), 0, "the context's instance");
        drop(ctx);
        r.destroy_buffer(pool);
    }
    assert_eq!(r.validation_errors(), 0, "the renderer's instance");
}

/// A tiled frame into planes of halves and bytes: tiles whose edges fall inside a word of
/// the output planes (×2 tiles of odd width: bytes split 2 + 2 at a word), where the word's
/// pixels of the other tile are kept. Compared with ONNX Runtime's CPU run of the whole frame
/// (the tiny model's window is one pixel, inside the overlap).
pub fn tiled_planar_frames_match_onnx_runtime(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let model = "models/test/tiny-x2-f32.onnx";
    for (format, tol) in [(vk::Format::R8_UNORM, 1.0 / 255.0 + 1e-5), (vk::Format::R16_SFLOAT, 4e-3)] {
        let (w, h) = (100, 18);
        let mut ctx = NeuralFrameContext::builder(model)
            .backend(backend)
            .device(neural_frame::DeviceSelector::Uuid(r.identity.device_uuid))
            .frame_size(w, h)
            .tiling(neural_frame::Tiling::new(37, 13, 4).expect("tiling"))
            .validation(true)
            .build()
            .expect("a tiled context");
        assert!(ctx.tiles().is_some_and(|(_, n)| n > 2), "tiled: {:?}", ctx.tiles());
        let (ow, oh) = ctx.output_size();
        let pool = r.pool(1 << 20, POOL_USAGE).expect("a pooled block");
        let memory = ctx.import_memory(r.export(&pool.alloc).expect("export")).expect("import");
        let (input, end) = layout(memory, 4 * 5, w, h, format);
        let (output, _) = layout(memory, (end + 4 * 3).next_multiple_of(4), ow, oh, format);
        check_frame(&r, &pool, &mut ctx, model, (&input, &output), 11, tol);
        ctx.release_memory(memory).expect("release");
        ctx.wait_all().expect("drained");
        assert_eq!(ctx.validation_errors(), 0, "the context's instance");
        drop(ctx);
        r.destroy_buffer(pool);
    }
    assert_eq!(r.validation_errors(), 0, "the renderer's instance");
}

/// What a host may get wrong is refused with a message that says what, and leaves the
/// context usable.
pub fn bad_planes_are_refused(backend: Backend) {
    let _serial = serial();
    let r = renderer();
    let model = "models/test/tiny-x2-f32.onnx";
    let (w, h) = (64, 18);
    let mut ctx = own(&r, backend, model, w, h);
    let pool = r.pool(1 << 20, POOL_USAGE).expect("a pooled block");
    let memory = ctx.import_memory(r.export(&pool.alloc).expect("export")).expect("import");
    let f = vk::Format::R32_SFLOAT;
    let (good, _) = layout(memory, 0, w, h, f);
    let refused = |ctx: &mut NeuralFrameContext, frame: PlanarFrame, words: &str| {
        let e = ctx.place_input_planes(&frame).expect_err(words);
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(words), "{words:?} not in: {e}");
    };
    refused(&mut ctx, PlanarFrame { format: vk::Format::R8_SNORM, ..good.clone() }, "R8_SNORM");
    refused(&mut ctx, PlanarFrame { width: w + 1, ..good.clone() }, "65×18");
    refused(&mut ctx, PlanarFrame { planes: good.planes[..2].to_vec(), ..good.clone() }, "not 2");
    let mut odd = good.clone();
    odd.planes[1].offset += 2;
    refused(&mut ctx, odd, "multiples of 4");
    let mut narrow = good.clone();
    narrow.planes[0].row_pitch = 64 * 4 - 4;
    refused(&mut ctx, narrow, "at least a row");
    let mut past = good.clone();
    past.planes[2].offset = (1 << 20) - 64;
    refused(&mut ctx, past, "does not fit");
    // Output planes that overlap, and a single plane for a three-channel model.
    let (ow, oh) = ctx.output_size();
    let (out, _) = layout(memory, 0, ow, oh, f);
    let mut overlap = out.clone();
    overlap.planes[1].offset = overlap.planes[0].offset + 64;
    let e = ctx.place_output_planes(&overlap).expect_err("overlap");
    assert!(e.to_string().contains("overlap"), "{e}");
    let e = ctx.place_output_planes(&PlanarFrame { planes: out.planes[..1].to_vec(), ..out.clone() }).expect_err("one");
    assert!(e.to_string().contains("three planes"), "{e}");
    // A dedicated allocation holds one resource: refused, the descriptor given back.
    let dedicated = r.buffer(1 << 16, POOL_USAGE, false, true).expect("dedicated");
    let failed = ctx.import_memory(r.export(&dedicated.alloc).expect("export")).expect_err("dedicated");
    assert!(failed.error().to_string().contains("dedicated"), "{}", failed.error());
    drop(failed.into_fd());
    // The context still runs the good placement.
    let input = ctx.place_input_planes(&good).expect("the good placement");
    let (out, _) = layout(memory, 1 << 18, ow, oh, f);
    let output = ctx.place_output_planes(&out).expect("output");
    ctx.infer(input, output).expect("a frame after the refusals");
    drop(ctx);
    r.destroy_buffer(pool);
    r.destroy_buffer(dedicated);
}
