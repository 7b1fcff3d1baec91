//! The plugin and the test host on a real VapourSynth R81 core, on lavapipe: GPU frames through
//! the core's own filters, a GPU plane exported by fd, and `nf.Model`'s refusals.
//!
//! Needs the environment `vapoursynth/ci-env.sh DIR` makes (`. DIR/env.sh`); without
//! `NF_VAPOURSYNTH_LIB` the test says it is skipped and passes. CI makes the environment, and a
//! failure there fails CI before this runs.
//!
//! The environment is applied to a child process: the core `dlopen`s `libvulkan.so.1` (the
//! Vulkan 1.4 loader) and the loader reads `VK_DRIVER_FILES` (the backports' lavapipe), and
//! `LD_LIBRARY_PATH` counts only from a process's start. So where `NF_VAPOURSYNTH_LD_LIBRARY_PATH`
//! or `NF_VAPOURSYNTH_VK_DRIVER_FILES` is set, the test runs this binary again for itself alone
//! with `LD_LIBRARY_PATH` and `VK_DRIVER_FILES` set from them (and `VK_ICD_FILENAMES` unset), and
//! checks its exit status; the rest of the test process, and every other test, keep the
//! system's Vulkan. Without them (a machine whose own loader and driver have Vulkan 1.4) it runs
//! in-process.
#![cfg(unix)]

use std::ffi::c_int;
use std::path::PathBuf;
use std::process::Command;

use neural_frame_vapoursynth::ffi::*;
use neural_frame_vapoursynth::host::{Arg, Core, Host, LIB_VAR};

/// Set in the child process this test starts.
const CHILD_VAR: &str = "NF_VAPOURSYNTH_TEST_CHILD";
const LD_VAR: &str = "NF_VAPOURSYNTH_LD_LIBRARY_PATH";
const DRIVER_VAR: &str = "NF_VAPOURSYNTH_VK_DRIVER_FILES";

#[test]
fn vapoursynth_r81() {
    if std::env::var_os(LIB_VAR).is_none() {
        println!(
            "skipped: {LIB_VAR} is not set (make the environment with `bash vapoursynth/ci-env.sh DIR` \
             and `. DIR/env.sh`)"
        );
        return;
    }
    let in_child = std::env::var_os(CHILD_VAR).is_some();
    let ld = std::env::var_os(LD_VAR);
    let driver = std::env::var_os(DRIVER_VAR);
    if !in_child && (ld.is_some() || driver.is_some()) {
        run_in_child(ld, driver);
        return;
    }
    if let Err(e) = checks() {
        panic!("{e}");
    }
}

/// Runs this test alone in a child process with the Vulkan 1.4 loader and the lavapipe.
fn run_in_child(ld: Option<std::ffi::OsString>, driver: Option<std::ffi::OsString>) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = Command::new(exe);
    command.args(["--exact", "vapoursynth_r81", "--nocapture", "--test-threads=1"]).env(CHILD_VAR, "1");
    if let Some(ld) = ld {
        let mut paths = vec![ld];
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            paths.push(old);
        }
        command
            .env("LD_LIBRARY_PATH", std::env::join_paths(paths.iter().flat_map(std::env::split_paths)).expect("paths"));
    }
    if let Some(driver) = driver {
        command.env("VK_DRIVER_FILES", driver).env_remove("VK_ICD_FILENAMES").env_remove("VK_ADD_DRIVER_FILES");
    }
    let output = command.output().expect("the test binary runs again");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the test in its Vulkan 1.4 environment failed: {}", output.status);
}

fn checks() -> Result<(), String> {
    let host = Host::from_env().ok_or("no library")??;
    let api = host.api_version()?;
    assert_eq!(api, VAPOURSYNTH_API_VERSION, "API version");
    let core = host.create_core(0)?;
    let info = core.info()?;
    println!(
        "core: {} (R{}, API {:#x})",
        info.version_string.lines().next().unwrap_or(""),
        info.core_version,
        info.api_version
    );
    assert!(info.core_version >= VAPOURSYNTH_CORE_R81, "R{}", info.core_version);

    let device = core.vulkan_info()?;
    let name = neural_frame_vapoursynth::host::buffer_text(&device.deviceName);
    println!(
        "device: {name}, memory export {:#x}, semaphore export {:#x}",
        device.exportHandleType, device.semaphoreExportHandleType
    );
    if std::env::var(DRIVER_VAR).is_ok_and(|d| d.contains("lvp")) {
        assert!(name.contains("llvmpipe"), "the lavapipe of ci-env.sh, not {name}");
    }

    gpu_round_trip(&core)?;
    exported_planes(&core, &device)?;
    plugin_refusals(&core)?;
    model_matches_onnx_runtime(&core)?;
    two_hundred_frames_stay_flat(&core)?;
    Ok(())
}

/// BlankClip → GPUUpload → Expr("x 2 *") → GPUDownload.
fn gpu_round_trip(core: &Core<'_>) -> Result<(), String> {
    let blank = core.clip(
        "std",
        "BlankClip",
        &[
            ("format", Arg::Int(pfRGBS.into())),
            ("width", Arg::Int(100)),
            ("height", Arg::Int(36)),
            ("color", Arg::Floats(&[0.25, 0.5, 0.75])),
        ],
    )?;
    let gpu = core.clip("std", "GPUUpload", &[("clip", Arg::Nodes(&[&blank]))])?;
    assert_eq!(gpu.residency()?, nrGPU);
    let doubled = core.clip("std", "Expr", &[("clips", Arg::Nodes(&[&gpu])), ("expr", Arg::Str("x 2 *"))])?;
    assert_eq!(doubled.residency()?, nrGPU);
    assert_eq!(doubled.frame(0)?.residency()?, nrGPU);
    let cpu = core.clip("std", "GPUDownload", &[("clip", Arg::Nodes(&[&doubled]))])?;
    assert_eq!(cpu.residency()?, nrCPU);
    let vi = cpu.video_info()?;
    assert_eq!((vi.width, vi.height), (100, 36));
    for n in [0, 1] {
        let frame = cpu.frame(n)?;
        assert_eq!(frame.residency()?, nrCPU);
        for (plane, want) in [0.5f32, 1.0, 1.5].into_iter().enumerate() {
            let pixels = frame.plane_f32(plane as c_int)?;
            assert_eq!(pixels.len(), 100 * 36);
            assert!(pixels.iter().all(|v| *v == want), "frame {n} plane {plane}: want {want}, got {:?}", &pixels[..4]);
        }
    }
    println!("GPUUpload → Expr(\"x 2 *\") → GPUDownload: 0.5, 1.0, 1.5 in every pixel of 2 frames");
    Ok(())
}

/// The open file descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// A new GPU frame's planes exported by fd: the layout, and every fd closed afterwards.
fn exported_planes(core: &Core<'_>, device: &VSVulkanCoreInfo) -> Result<(), String> {
    if device.exportHandleType == 0 {
        return Err("the core's device does not export memory".into());
    }
    let before = open_fds();
    {
        let frame = core.new_gpu_frame(pfRGBS, 100, 36)?;
        assert_eq!(frame.residency()?, nrGPU);
        let mut exports = Vec::new();
        for plane in 0..3 {
            let (width, height, stride) = frame.plane_size(plane)?;
            let buffer = frame.gpu_plane(plane)?;
            let e = frame.export_plane(plane)?;
            let m = e.memory;
            println!(
                "plane {plane}: memoryId {} of {} bytes (type {}), offset {}, size {}, stride {stride}, handle type {:#x}, fd {}",
                m.memoryId, m.memorySize, m.memoryTypeIndex, m.offset, m.size, m.handleType, m.handle
            );
            assert!(stride >= width * 4, "stride {stride} for {width} floats");
            assert_eq!(m.size, (stride * height) as u64, "an exported plane is stride × height bytes");
            assert_eq!(buffer.bufferSize, m.size, "getGPUPlane's buffer is the exported plane");
            assert!(m.offset + m.size <= m.memorySize, "the plane lies in the allocation");
            assert_eq!(m.handleType, device.exportHandleType);
            assert!(m.handle >= 0);
            exports.push(e);
        }
        assert_eq!(open_fds(), before + 3, "one new fd per export");
    }
    assert_eq!(open_fds(), before, "every exported fd is closed");
    println!("3 planes exported and their fds closed ({before} fds open before and after)");
    Ok(())
}

/// The checkout's root, for the models: `NF_REPO_ROOT` (a test binary copied to another
/// machine), else where this crate was built.
fn root() -> String {
    std::env::var("NF_REPO_ROOT").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/..").to_string())
}

/// The plugin, built next to this test (`target/<profile>/` or its `deps/`).
fn plugin_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let deps = exe.parent().ok_or("the test binary has no directory")?;
    let name = "libneural_frame_vapoursynth.so";
    [deps.join(name), deps.parent().map(|d| d.join(name)).unwrap_or_default()]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| format!("no {name} next to {}", exe.display()))
}

/// `nf.Model`'s refusal for `clip`.
fn model_error(
    core: &Core<'_>,
    clip: &neural_frame_vapoursynth::host::Node<'_>,
    extra: &[(&str, Arg<'_>)],
    model: &str,
) -> String {
    let mut args = vec![("clip", Arg::Nodes(std::slice::from_ref(&clip))), ("model", Arg::Str(model))];
    for (k, v) in extra {
        args.push((
            k,
            match v {
                Arg::Int(i) => Arg::Int(*i),
                Arg::Ints(i) => Arg::Ints(i),
                Arg::Str(s) => Arg::Str(s),
                _ => unreachable!("the tests pass ints and strings"),
            },
        ));
    }
    match core.invoke("nf", "Model", &args) {
        Ok(_) => panic!("nf.Model made a clip where it must refuse"),
        Err(e) => e,
    }
}

fn blank<'c>(
    core: &'c Core<'c>,
    format: u32,
    width: i64,
    height: i64,
) -> Result<neural_frame_vapoursynth::host::Node<'c>, String> {
    core.clip(
        "std",
        "BlankClip",
        &[("format", Arg::Int(format.into())), ("width", Arg::Int(width)), ("height", Arg::Int(height))],
    )
}

/// A clip of `format` whose three planes vary across the frame and from frame to frame: a
/// grid of 4 × 3 one-pixel clips of varied colours, resized to the frame (bicubic, so that it
/// overshoots a little, as real float frames may), two such grids spliced (120 frames each).
fn picture<'c>(
    core: &'c Core<'c>,
    format: u32,
    width: i64,
    height: i64,
) -> Result<neural_frame_vapoursynth::host::Node<'c>, String> {
    let mut halves = Vec::new();
    for seed in [3u32, 11] {
        let mut rows = Vec::new();
        for y in 0..3u32 {
            let mut cells = Vec::new();
            for x in 0..4u32 {
                let v = |k: u32| {
                    let mut s = (seed * 977 + y * 131 + x * 31 + k * 7).wrapping_mul(2654435761);
                    s ^= s >> 13;
                    (s % 1000) as f64 / 1000.0
                };
                // Integer formats take codes.
                let scale = if format == pfRGB24 { 255.0 } else { 1.0 };
                let colour = [(v(0) * scale).round(), (v(1) * scale).round(), (v(2) * scale).round()];
                cells.push(core.clip(
                    "std",
                    "BlankClip",
                    &[
                        ("format", Arg::Int(format.into())),
                        ("width", Arg::Int(1)),
                        ("height", Arg::Int(1)),
                        ("length", Arg::Int(120)),
                        ("color", Arg::Floats(&colour)),
                    ],
                )?);
            }
            let refs: Vec<&_> = cells.iter().collect();
            rows.push(core.clip("std", "StackHorizontal", &[("clips", Arg::Nodes(&refs))])?);
        }
        let refs: Vec<&_> = rows.iter().collect();
        let grid = core.clip("std", "StackVertical", &[("clips", Arg::Nodes(&refs))])?;
        halves.push(core.clip(
            "resize",
            "Bicubic",
            &[("clip", Arg::Nodes(&[&grid])), ("width", Arg::Int(width)), ("height", Arg::Int(height))],
        )?);
    }
    let refs: Vec<&_> = halves.iter().collect();
    core.clip("std", "Splice", &[("clips", Arg::Nodes(&refs))])
}

fn expect(error: &str, wanted: &[&str]) {
    println!("  {error}");
    assert!(error.starts_with("Model: "), "{error}");
    for w in wanted {
        assert!(error.contains(w), "{error:?} does not say {w:?}");
    }
}

/// A CPU frame's three planes as values in [0, 1] (RGBS or RGBH as they are, RGB24's codes / 255).
fn planes_f32(frame: &neural_frame_vapoursynth::host::Frame<'_>) -> Result<Vec<Vec<f32>>, String> {
    let f = frame.format()?;
    (0..3)
        .map(|p| {
            let bytes = frame.plane_bytes(p)?;
            Ok(if f.bytesPerSample == 1 {
                bytes.iter().map(|&b| b as f32 / 255.0).collect()
            } else if f.bytesPerSample == 2 {
                bytes.chunks_exact(2).map(|b| half::f16::from_ne_bytes([b[0], b[1]]).to_f32()).collect()
            } else {
                bytes.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect()
            })
        })
        .collect()
}

/// nf.Model on RGBS and RGBH clips of widths 64 and 100 (padded pitches), ×2 and ×4 models,
/// against ONNX Runtime's CPU run of the same frames; the output stays on the GPU and
/// std.Expr consumes it there before GPUDownload.
fn model_matches_onnx_runtime(core: &Core<'_>) -> Result<(), String> {
    let root = root();
    let x2 = format!("{root}/models/test/tiny-x2-f32.onnx");
    let x4 = format!("{root}/models/upscale.onnx");
    for (model, scale) in [(&x2, 2), (&x4, 4)] {
        let path = std::path::Path::new(model.as_str());
        let contract = neural_frame::NeuralFrameContext::builder(path)
            .backend(neural_frame::Backend::Cpu)
            .frame_size(64, 18)
            .build()
            .map_err(|e| e.to_string())?
            .contract()
            .clone();
        // Frames handed over on the GPU where the device shares semaphores (NVIDIA), else "auto".
        let gpu = if core.vulkan_info()?.semaphoreExportHandleType != 0 { "gpu" } else { "auto" };
        let cases = [
            (pfRGBS, 64, 18, gpu),
            (pfRGBS, 100, 18, "host"),
            (pfRGBH, 64, 18, "host"),
            (pfRGBH, 100, 18, gpu),
            (pfRGB24, 100, 18, gpu),
            (pfRGB24, 64, 18, "host"),
        ];
        for (format, width, height, sync) in cases {
            let clip = picture(core, format, width, height)?;
            let up = core.clip(
                "nf",
                "Model",
                &[("clip", Arg::Nodes(&[&clip])), ("model", Arg::Str(model)), ("sync", Arg::Str(sync))],
            )?;
            assert_eq!(up.residency()?, nrGPU, "nf.Model's output is on the GPU");
            let vi = up.video_info()?;
            assert_eq!((vi.width, vi.height), (width as c_int * scale, height as c_int * scale));
            // A core GPU filter consumes it before the download.
            let same = core.clip("std", "Expr", &[("clips", Arg::Nodes(&[&up])), ("expr", Arg::Str("x"))])?;
            assert_eq!(same.residency()?, nrGPU);
            let down = core.clip("std", "GPUDownload", &[("clip", Arg::Nodes(&[&same]))])?;
            // The host path runs frames on several threads at once; the GPU path one at a time.
            let mode = if sync == "gpu" { fmParallelRequests } else { fmParallel };
            assert_eq!(up.filter_mode()?, mode, "nf.Model's filter mode with sync={sync}");
            let psnr = |got: &[Vec<f32>], want: &[Vec<f32>]| {
                let mut sq = 0f64;
                let mut count = 0usize;
                for k in 0..3 {
                    assert_eq!(got[k].len(), want[k].len(), "plane {k}'s size");
                    for (g, w) in got[k].iter().zip(&want[k]) {
                        // RGB24 holds codes: the model's value clamped and rounded, as written.
                        let w = if format == pfRGB24 { (w.clamp(0.0, 1.0) * 255.0).round() / 255.0 } else { *w };
                        let d = if g.is_nan() { f64::INFINITY } else { (*g - w) as f64 };
                        sq += d * d;
                        count += 1;
                    }
                }
                10.0 * (1.0 / (sq / count as f64)).log10()
            };
            let mut worst = f64::INFINITY;
            // The clip's two pictures (frames 0–119 and 120–239).
            let mut wants = Vec::new();
            for n in [0, 130] {
                let input = planes_f32(&clip.frame(n)?)?;
                let want = common::planes::reference_planes(path, &contract, &input, width as u32, height as u32);
                let p = psnr(&planes_f32(&down.frame(n)?)?, &want);
                worst = worst.min(p);
                assert!(p >= 45.0, "{model} format {format:#x} {width}x{height} frame {n}: PSNR {p:.1} dB");
                wants.push(want);
            }
            // 24 frames requested at once, the two pictures alternating, none of them cached
            // yet: each output is its own input's.
            let ns: Vec<c_int> = (0..12).flat_map(|i| [10 + i, 140 + i]).collect();
            for (n, frame) in ns.iter().zip(down.frames(&ns)?) {
                let want = &wants[usize::from(*n >= 120)];
                let p = psnr(&planes_f32(&frame?)?, want);
                worst = worst.min(p);
                assert!(
                    p >= 45.0,
                    "{model} format {format:#x} {width}x{height} frame {n} (requested with 23 others): PSNR {p:.1} dB"
                );
            }
            println!(
                "  nf.Model ×{scale} format {format:#x} {width}×{height} sync={sync}: PSNR ≥ {worst:.1} dB against ONNX Runtime's CPU run"
            );
        }
    }
    Ok(())
}

/// How many times each memory file (memfd) is mapped into this process, by inode: lavapipe
/// maps each allocation of the core's once, and neural-frame maps each one it imports again.
fn memfd_mappings() -> std::collections::HashMap<String, usize> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut count = std::collections::HashMap::new();
    for line in maps.lines().filter(|l| l.contains("/memfd:")) {
        if let Some(inode) = line.split_whitespace().nth(4) {
            *count.entry(inode.to_string()).or_insert(0) += 1;
        }
    }
    count
}

/// 200 frames through nf.Model: the process's open descriptors stay flat while it runs and
/// are back where they started once the clip is freed, and so are the imports (on lavapipe,
/// the memory files mapped a second time).
fn two_hundred_frames_stay_flat(core: &Core<'_>) -> Result<(), String> {
    let model = &format!("{}/models/test/tiny-x2-f32.onnx", root());
    let before = open_fds();
    // Memory files the drivers themselves map twice (NVIDIA's has one), before the clip.
    let twice_before = memfd_mappings().values().filter(|&&n| n > 1).count();
    {
        let clip = picture(core, pfRGBS, 100, 18)?;
        let up = core.clip("nf", "Model", &[("clip", Arg::Nodes(&[&clip])), ("model", Arg::Str(model))])?;
        let down = core.clip("std", "GPUDownload", &[("clip", Arg::Nodes(&[&up]))])?;
        let mut at_20 = 0;
        for n in 0..200 {
            let frame = down.frame(n)?;
            assert!(planes_f32(&frame)?.iter().flatten().all(|v| v.is_finite()), "frame {n}");
            if n == 20 {
                at_20 = open_fds();
            }
        }
        let at_200 = open_fds();
        println!("  200 frames: {before} fds before, {at_20} after frame 20, {at_200} after frame 200");
        assert!(at_200 <= at_20, "descriptors grew from {at_20} to {at_200} over 180 frames");
        let twice = memfd_mappings().values().filter(|&&n| n > 1).count();
        println!("  while the clip lives: {twice} memory files mapped twice ({twice_before} before the clip)");
        if std::env::var(DRIVER_VAR).is_ok_and(|d| d.contains("lvp")) {
            assert!(twice > twice_before, "lavapipe's allocations come as memory files, which the filter imports");
        }
    }
    let after = open_fds();
    let twice = memfd_mappings().values().filter(|&&n| n > 1).count();
    println!("  clip freed: {after} fds, {twice} memory files mapped twice");
    assert!(after <= before, "{after} descriptors open after the clip, {before} before");
    assert!(twice <= twice_before, "an import outlived the filter ({twice} mapped twice, {twice_before} before)");
    Ok(())
}

/// Every refusal `nf.Model` makes at creation.
fn plugin_refusals(core: &Core<'_>) -> Result<(), String> {
    let plugin = plugin_path()?;
    core.load_plugin(&plugin)?;
    println!("loaded {}; nf.Model says:", plugin.display());
    let model = &format!("{}/models/test/tiny-x1-f32-same-dims.onnx", root());
    assert!(std::path::Path::new(model).is_file(), "{model}");

    let rgbs = blank(core, pfRGBS, 64, 32)?;
    let rgbh = blank(core, pfRGBH, 64, 32)?;

    let rgb48 = blank(core, pfRGB48, 64, 32)?;
    expect(
        &model_error(core, &rgb48, &[], model),
        &["Model: the clip is RGB48", "core.resize.Bicubic(clip, format=vs.RGBS)"],
    );
    let yuv = blank(core, pfYUV420P8, 64, 32)?;
    expect(&model_error(core, &yuv, &[], model), &["Model: the clip is YUV420P8", "format=vs.RGBS, matrix_in_s="]);
    let gray = blank(core, pfGray8, 64, 32)?;
    expect(&model_error(core, &gray, &[], model), &["Model: the clip is Gray8", "ShufflePlanes"]);

    let other_size = blank(core, pfRGBS, 48, 16)?;
    let sizes =
        core.clip("std", "Splice", &[("clips", Arg::Nodes(&[&rgbs, &other_size])), ("mismatch", Arg::Int(1))])?;
    let vi = sizes.video_info()?;
    assert_eq!((vi.width, vi.height), (0, 0), "Splice(mismatch=True) of two sizes has a variable size");
    expect(&model_error(core, &sizes, &[], model), &["Model: the clip's frame size varies"]);
    let formats = core.clip("std", "Splice", &[("clips", Arg::Nodes(&[&rgbs, &rgbh])), ("mismatch", Arg::Int(1))])?;
    assert_eq!(formats.video_info()?.format.colorFamily, cfUndefined);
    expect(&model_error(core, &formats, &[], model), &["Model: the clip's format varies"]);

    let missing = &format!("{}/vapoursynth/no-such-model.onnx", root());
    expect(&model_error(core, &rgbs, &[], missing), &["Model: cannot read the model file", "no-such-model.onnx"]);
    expect(
        &model_error(core, &rgbs, &[("backend", Arg::Str("gpu"))], model),
        &["Model: backend is auto, cuda or cpu, not \"gpu\""],
    );
    expect(
        &model_error(core, &rgbs, &[("precision", Arg::Str("int8"))], model),
        &["Model: precision is auto, fp32 or fp16"],
    );
    expect(
        &model_error(core, &rgbs, &[("tile", Arg::Ints(&[0]))], model),
        &["Model: a tile's size is a positive number"],
    );
    expect(&model_error(core, &rgbs, &[("tile_overlap", Arg::Int(8))], model), &["Model: tile_overlap without tile"]);
    expect(&model_error(core, &rgbs, &[("sync", Arg::Str("queue"))], model), &["Model: sync is auto, host or gpu"]);
    if core.vulkan_info()?.semaphoreExportHandleType == 0 {
        expect(
            &model_error(core, &rgbs, &[("sync", Arg::Str("gpu"))], model),
            &["Model: sync=\"gpu\" needs semaphores shared", "does not export them"],
        );
    }
    // A model file that is not a model: neural-frame's own message, through the filter's.
    let not_a_model = &format!("{}/vapoursynth/Cargo.toml", root());
    expect(&model_error(core, &rgbs, &[("backend", Arg::Str("cpu"))], not_a_model), &["Model: "]);
    Ok(())
}
