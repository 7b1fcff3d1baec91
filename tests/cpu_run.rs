//! `neural-frame run` end to end on the CPU backend, and its error paths: each
//! exits 1 with a message that says what is wrong and leaves no output file.

use std::path::{Path, PathBuf};

use common::{json, neural_frame, text};

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpu_run");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

fn png_size(path: &Path) -> (u32, u32) {
    let img = image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (img.width(), img.height())
}

#[test]
fn upscales_the_bundled_sample_4x_on_the_cpu_backend() {
    let out = tmp("coffee-x4.png");
    let o = neural_frame(
        &["run", "--model", "models/upscale.onnx", "--backend", "cpu", "--output", out.to_str().unwrap_or("")],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(png_size(&out), (2400, 1600), "coffee.png is 600×400");
    // Nobody asked for the CUDA options: the CPU backend does not warn that they are not in effect.
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!e.contains("not in effect") && !e.contains("warning"), "{e}");
    let s = String::from_utf8_lossy(&o.stdout);
    for needle in ["upload", "pre", "infer", "post", "readback", "cpu backend"] {
        assert!(s.contains(needle), "{needle:?} missing:\n{}", text(&o));
    }
}

#[test]
fn resizes_runs_several_frames_and_reports_json() {
    let out = tmp("small.png");
    let o = neural_frame(
        &[
            "run",
            "--backend",
            "cpu",
            "--size",
            "48x27",
            "--frames",
            "3",
            "--json",
            "--output",
            out.to_str().unwrap_or(""),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(png_size(&out), (192, 108));
    let j = json(&o);
    assert_eq!(j["frames"], 3);
    assert_eq!(j["backend"]["backend"], "cpu");
    for k in ["upload", "pre", "infer", "post", "readback"] {
        assert!(j["median_ms"][k].as_f64().is_some_and(|v| v >= 0.0), "{k}: {j}");
    }
    assert!(j["time_to_first_frame_ms"].as_f64().is_some_and(|v| v > 0.0));
}

#[test]
fn automatic_backend_uses_cuda_or_announces_the_fallback() {
    let out = tmp("auto.png");
    let o = neural_frame(&["run", "--size", "16x9", "--output", out.to_str().unwrap_or("")], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    if stdout.contains("(cuda backend)") {
        assert!(!stderr.contains("falling back"), "{}", text(&o));
    } else {
        assert!(stdout.contains("(cpu backend)"), "{}", text(&o));
        assert!(
            stderr.contains("CUDA backend unavailable (") && stderr.contains("falling back to the CPU backend"),
            "{}",
            text(&o)
        );
        // Insisting on CUDA where it is unavailable is an error, never a fallback.
        let o =
            neural_frame(&["run", "--backend", "cuda", "--size", "16x9", "--output", out.to_str().unwrap_or("")], &[]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("CUDA"), "{}", text(&o));
    }
}

/// A build without the `cuda` feature refuses the CUDA backend, saying why and how to rebuild
/// (the CPU backend's runs are the other tests of this file, in the same build).
#[cfg(not(feature = "cuda"))]
#[test]
fn a_build_without_cuda_refuses_the_cuda_backend() {
    let out = tmp("no-cuda.png");
    fails(
        &["run", "--backend", "cuda", "--size", "16x9"],
        &[],
        &out,
        &["built without its `cuda` feature", "rebuild with the default features"],
    );
}

fn fails(args: &[&str], env: &[(&str, &str)], out: &Path, needles: &[&str]) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--output", out.to_str().unwrap_or("")]);
    let o = neural_frame(&all, env);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    for n in needles {
        assert!(e.contains(n), "{n:?} missing in:\n{}", text(&o));
    }
    assert!(!out.exists(), "{} was written", out.display());
    let stem = format!(".{}.", out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().expect("dir"))
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&stem) && n.ends_with(".tmp")
        })
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn missing_model() {
    fails(
        &["run", "--backend", "cpu", "--model", "models/nope.onnx"],
        &[],
        &tmp("e1.png"),
        &["models/nope.onnx", "no such file"],
    );
}

#[test]
fn file_that_is_not_onnx() {
    let bogus = tmp("bogus.onnx");
    std::fs::write(&bogus, b"this is not a protobuf at all").expect("write");
    fails(
        &["run", "--backend", "cpu", "--model", bogus.to_str().unwrap_or("")],
        &[],
        &tmp("e2.png"),
        &["not an ONNX model"],
    );
}

#[test]
fn unsupported_input_signature() {
    fails(
        &["run", "--backend", "cpu", "--model", "models/test/bad-one-channel.onnx"],
        &[],
        &tmp("e3.png"),
        &["`gray` Float32 [1, 1, ?, ?]", "no input for the frame"],
    );
    fails(
        &["run", "--backend", "cpu", "--model", "models/test/tiny-x2-f32.onnx", "--layout", "nhwc"],
        &[],
        &tmp("e3b.png"),
        &["declared NHWC"],
    );
}

#[test]
fn layout_colour_and_range_options_reach_the_model() {
    // The same picture through the same ×2 model, told BGR [-1, 1] or nothing: both run, the contract line says
    // what was declared, and the outputs differ.
    let (plain, declared) = (tmp("plain.png"), tmp("declared.png"));
    let base = ["run", "--backend", "cpu", "--model", "models/test/tiny-x2-f32.onnx", "--size", "32x24"];
    let o = neural_frame(&[&base[..], &["--output", plain.to_str().unwrap_or("")]].concat(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = neural_frame(
        &[&base[..], &["--color", "bgr", "--range", "-1,1", "--output", declared.to_str().unwrap_or("")]].concat(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("NCHW BGR f32 [-1, 1]"), "{}", text(&o));
    let read = |p: &Path| image::open(p).expect("png").to_rgba8().into_raw();
    assert_ne!(read(&plain), read(&declared), "--color/--range changed nothing");
    let o = neural_frame(
        &[
            &base[..],
            &["--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225", "--output", declared.to_str().unwrap_or("")],
        ]
        .concat(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("mean [0.485, 0.456, 0.406]"), "{}", text(&o));
    // A model without metadata runs, its scale from the probe.
    let o = neural_frame(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32-no-meta.onnx",
            "--size",
            "32x24",
            "--output",
            declared.to_str().unwrap_or(""),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("×2 (scale from Probe)"), "{}", text(&o));
    assert_eq!(png_size(&declared), (64, 48));
    // Values the options cannot take: exit code 2, naming the option.
    for (args, needle) in [
        (&["--range", "0,2"][..], "--range"),
        (&["--color", "grb"][..], "--color"),
        (&["--mean", "0.5,0.5"][..], "--mean"),
        (&["--mean", "0.5,0.5,0.5"][..], "--std"),
        (&["--mean", "0.5,0.5,0.5", "--std", "1,0,1"][..], "zero"),
    ] {
        let o = neural_frame(&[&base[..], args].concat(), &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
}

#[test]
fn unreadable_image() {
    let bad = tmp("broken.png");
    std::fs::write(&bad, b"\x89PNG\r\n\x1a\nbroken").expect("write");
    fails(
        &["run", "--backend", "cpu", "--input", bad.to_str().unwrap_or("")],
        &[],
        &tmp("e4.png"),
        &["broken.png", "decode"],
    );
    fails(
        &["run", "--backend", "cpu", "--input", "no/such/picture.jpg"],
        &[],
        &tmp("e4b.png"),
        &["no/such/picture.jpg"],
    );
}

#[test]
fn image_larger_than_the_device_allows() {
    let big = tmp("wide.png");
    image::RgbaImage::from_pixel(20000, 1, image::Rgba([9, 8, 7, 255])).save(&big).expect("write png");
    fails(
        &["run", "--backend", "cpu", "--input", big.to_str().unwrap_or("")],
        &[],
        &tmp("e5.png"),
        &["maxImageDimension2D"],
    );
}

#[test]
fn no_vulkan_driver() {
    fails(
        &["run", "--backend", "cpu", "--size", "8x8"],
        &[("VK_DRIVER_FILES", "/nonexistent.json"), ("VK_ICD_FILENAMES", "/nonexistent.json")],
        &tmp("e6.png"),
        &["no Vulkan driver found"],
    );
}

#[test]
fn onnx_runtime_missing() {
    fails(
        &["run", "--backend", "cpu", "--size", "8x8"],
        &[("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")],
        &tmp("e7.png"),
        &["ONNX Runtime not found", "onnxruntime==1.31.1"],
    );
}

/// `--ort-library` naming a FIFO or a directory says what it is, not that it does not exist.
#[test]
fn an_onnx_runtime_path_that_is_no_file_says_what_it_is() {
    let fifo = tmp("ort-fifo.so");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs").success());
    let dir = std::env::temp_dir();
    let cases =
        [(fifo.to_str().expect("UTF-8"), "is not a regular file"), (dir.to_str().expect("UTF-8"), "is a directory")];
    for (i, (path, says)) in cases.into_iter().enumerate() {
        fails(
            &["run", "--backend", "cpu", "--size", "8x8", "--ort-library", path],
            &[],
            &tmp(&format!("e-ort-{i}.png")),
            &[path, says],
        );
    }
    let _ = std::fs::remove_file(&fifo);
}

#[test]
fn a_library_that_is_not_onnx_runtime() {
    let vulkan = ["/usr/lib/x86_64-linux-gnu/libvulkan.so.1", "/usr/lib/aarch64-linux-gnu/libvulkan.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("the Vulkan loader is installed");
    fails(
        &["run", "--backend", "cpu", "--size", "8x8"],
        &[("ORT_DYLIB_PATH", vulkan)],
        &tmp("e8.png"),
        &["does not export OrtGetApiBase"],
    );
}

#[test]
fn onnx_runtime_too_old() {
    // A stand-in library that answers OrtGetApiBase like ONNX Runtime 1.16 would.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("old-ort");
    std::fs::create_dir_all(&dir).expect("dir");
    let src = dir.join("old.c");
    std::fs::write(
        &src,
        "typedef struct { const void* (*GetApi)(unsigned); const char* (*GetVersionString)(void); } Base;\n\
         static const void* api(unsigned v) { (void)v; return 0; }\n\
         static const char* version(void) { return \"1.16.3\"; }\n\
         static Base base = { api, version };\n\
         const Base* OrtGetApiBase(void) { return &base; }\n",
    )
    .expect("write");
    let lib = dir.join("libonnxruntime.so.1.16.3");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("a C compiler (cc) to build the stand-in library");
    assert!(cc.success());
    fails(
        &["run", "--backend", "cpu", "--size", "8x8"],
        &[("ORT_DYLIB_PATH", lib.to_str().unwrap_or(""))],
        &tmp("e9.png"),
        &["1.16.3", "needs 1.31 or newer"],
    );
}

#[test]
fn named_inputs_and_outputs() {
    // Two named inputs (the frame's by its name too), and a model of two outputs, both written.
    let (color, albedo) = (tmp("color.png"), tmp("albedo.png"));
    for (p, seed) in [(&color, 1u32), (&albedo, 2)] {
        let img = image::RgbaImage::from_fn(24, 16, |x, y| {
            image::Rgba([(x * 10) as u8, (y * 15) as u8, (seed * 90) as u8, 255])
        });
        img.save(p).expect("write a test picture");
    }
    let out = tmp("denoised.png");
    let o = neural_frame(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x1-f32-color-albedo.onnx",
            "--input",
            &format!("color={}", color.display()),
            "--input",
            &format!("albedo={}", albedo.display()),
            "--output",
            out.to_str().unwrap_or(""),
            "-v",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(png_size(&out), (24, 16));
    assert!(text(&o).contains("the model's output `output`"), "{}", text(&o));
    let (image, edges) = (tmp("image.png"), tmp("edges.png"));
    let o = neural_frame(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32-two-outputs.onnx",
            "--input",
            color.to_str().unwrap_or(""),
            "--output",
            image.to_str().unwrap_or(""),
            "--output",
            &format!("edges={}", edges.display()),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!((png_size(&image), png_size(&edges)), ((48, 32), (48, 32)));
    // What the options can get wrong: each exits 1, saying what to give.
    fails(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x1-f32-color-albedo.onnx",
            "--input",
            color.to_str().unwrap_or(""),
        ],
        &[],
        &tmp("e-missing.png"),
        &["--input albedo=PATH (NCHW RGB f32 [0, 1])"],
    );
    fails(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x1-f32-color-albedo.onnx",
            "--input",
            color.to_str().unwrap_or(""),
            "--input",
            &format!("normal={}", albedo.display()),
        ],
        &[],
        &tmp("e-unknown.png"),
        &["no input `normal`", "`color` (the frame"],
    );
    fails(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32-two-outputs.onnx",
            "--input",
            color.to_str().unwrap_or(""),
            "--output",
            &format!("depth={}", tmp("e-d.png").display()),
        ],
        &[],
        &tmp("e-out.png"),
        &["no output `depth`", "`edges`"],
    );
    fails(
        &[
            "run",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x1-f32-color-albedo.onnx",
            "--input",
            color.to_str().unwrap_or(""),
            "--input",
            "albedo=models/coffee.png",
        ],
        &[],
        &tmp("e-size.png"),
        &["input sizes disagree", "--size"],
    );
}

#[test]
fn tiles_from_the_command_line() {
    let (whole, tiled, budget) = (tmp("whole.png"), tmp("tiled.png"), tmp("budget.png"));
    let base = ["run", "--backend", "cpu", "--model", "models/test/tiny-x2-f32.onnx", "--size", "100x60"];
    let o = neural_frame(&[&base[..], &["--output", whole.to_str().unwrap_or("")]].concat(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = neural_frame(
        &[&base[..], &["--tile", "32x32", "--tile-overlap", "4", "--output", tiled.to_str().unwrap_or(""), "-v"]]
            .concat(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("tiles of 32×32 (overlap 4)"), "{}", text(&o));
    let o =
        neural_frame(&[&base[..], &["--memory-budget", "1", "--output", budget.to_str().unwrap_or("")]].concat(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let read = |p: &Path| image::open(p).expect("png").to_rgba8().into_raw();
    assert_eq!(read(&whole), read(&tiled), "tiled at an overlap above the receptive radius differs");
    assert_eq!(read(&whole), read(&budget), "tiles chosen by the budget differ");
    for (args, needle) in [
        (&["--tile", "16x16", "--tile-overlap", "8"][..], "twice the overlap"),
        (&["--tile", "40x40", "--tile-overlap", "16"][..], "three times the overlap"),
        (&["--tile", "16x16", "--tile-overlap", "20"][..], "not smaller than the tile"),
        (&["--tile-overlap", "4"][..], "--tile"),
        (&["--tile", "0x16"][..], "positive"),
    ] {
        let o = neural_frame(&[&base[..], args].concat(), &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(needle), "{args:?}: {}", text(&o));
    }
}

/// `--input /dev/zero` and `/dev/urandom` (and any stream that is no PNG or JPEG) are refused
/// at once from their first bytes: within a second, the process's peak memory under 200 MiB
/// (from `wait4`, the child's own), not after reading gigabytes.
#[test]
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives its peak memory
fn a_device_as_input_is_refused_at_once() {
    use std::io::Read as _;
    for device in ["/dev/zero", "/dev/urandom"] {
        let out = tmp(&format!("device-{}.png", device.trim_start_matches("/dev/")));
        let model = "models/test/tiny-x2-f32.onnx";
        let args =
            ["run", "--backend", "cpu", "--model", model, "--input", device, "--output", out.to_str().expect("UTF-8")];
        let start = std::time::Instant::now();
        let mut child = std::process::Command::new(common::bin())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("runs");
        // SAFETY: rusage is plain data; all zeros is a valid value.
        let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
        // SAFETY: the child's pid, waited for once here (not through `child.wait`).
        let waited = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        let took = start.elapsed();
        assert_eq!(waited, child.id() as libc::pid_t, "wait4");
        let mut e = String::new();
        child.stderr.take().expect("stderr").read_to_string(&mut e).expect("stderr read");
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 1, "status {status:#x}: {e}");
        assert!(took < std::time::Duration::from_secs(1), "{device} refused after {took:?}");
        let peak_mib = usage.ru_maxrss / 1024;
        assert!(peak_mib < 200, "{device}: peak memory {peak_mib} MiB");
        assert!(e.contains(device) && e.contains("not a PNG or JPEG"), "{e}");
        assert!(!out.exists(), "{} was written", out.display());
        println!("{device}: refused after {took:?}, peak memory {peak_mib} MiB");
    }
}

/// SIGTERM while `run` waits for a writer of its input FIFO: exit code 130
/// within a second, saying so, and no output.
#[test]
fn sigterm_while_the_input_fifo_has_no_writer_ends_run_at_once() {
    let fifo = tmp("input.fifo");
    let out = tmp("never.png");
    let c = std::ffi::CString::new(fifo.to_str().unwrap_or("")).expect("a path");
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let args =
        ["run", "--backend", "cpu", "--input", fifo.to_str().unwrap_or(""), "--output", out.to_str().unwrap_or("")];
    let (code, took, stderr) = common::sigterm_when(&args, common::waits_on_a_fifo);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(took < std::time::Duration::from_secs(1), "{took:?}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!out.exists(), "an output after the interruption");
    let _ = std::fs::remove_file(&fifo);
}

/// `--input NAME=PIC` with a name the model lacks, and no picture for the frame:
/// the message names the name and the model's inputs (it said only that the
/// frame's input had no picture).
#[test]
fn an_input_name_the_model_lacks_is_named_with_the_inputs() {
    let out = tmp("nosuch.png");
    let o = neural_frame(
        &["run", "--backend", "cpu", "--input", "nosuch=models/coffee.png", "--output", out.to_str().unwrap_or("")],
        &[],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(e.contains("`nosuch`") && e.contains("`input` (the frame"), "{e}");
    assert!(!out.exists());
}

/// `--tile` on a fixed-size model whose size the tiles are not: the message names
/// the tile size and the fix (it printed `Some((16, 16))`), and the model's own
/// size as the tile runs.
#[test]
fn a_fixed_size_models_tile_mismatch_names_the_tile_and_the_fix() {
    let out = tmp("fixed.png");
    let model = "models/test/tiny-x2-f32-fixed-32x24.onnx";
    let o = neural_frame(
        &["run", "--backend", "cpu", "--model", model, "--size", "64x48", "--tile", "16x16", "--tile-overlap", "2"]
            .into_iter()
            .chain(["--output", out.to_str().unwrap_or("")])
            .collect::<Vec<_>>(),
        &[],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(e.contains("tiles of 16×16") && e.contains("--tile 32x24") && !e.contains("Some("), "{e}");
    assert!(e.contains("(--backend cpu)") && !e.contains("Cpu"), "no Debug names: {e}");
    let o = neural_frame(
        &["run", "--backend", "cpu", "--model", model, "--size", "64x48", "--tile", "32x24", "--tile-overlap", "2"]
            .into_iter()
            .chain(["--output", out.to_str().unwrap_or("")])
            .collect::<Vec<_>>(),
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(png_size(&out), (128, 96));
}
