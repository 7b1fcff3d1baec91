//! The library's face as a crate outside the repository sees it: the context is
//! `Send`, errors are classified by kind, the library never prints, and the
//! example renderer matches ONNX Runtime in both ways in.

use std::path::{Path, PathBuf};

use common::pipeline::{expected_image, reference_output};
use common::text;
use neural_frame::{Error, ErrorKind, NeuralFrameContext};

#[test]
fn the_context_is_send_and_errors_have_kinds() {
    fn f<T: Send>() {}
    f::<NeuralFrameContext>();
    f::<Error>();
    let e =
        NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx").frame_size(0, 4).build().err().expect("empty size");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = NeuralFrameContext::builder("models/nope.onnx").frame_size(4, 4).build().err().expect("no model");
    assert_eq!(e.kind(), ErrorKind::ModelContract, "{e}");
    // A context moves to another thread and runs there.
    let mut ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(neural_frame::Backend::Cpu)
        .frame_size(8, 8)
        .build()
        .expect("context");
    let input = ctx.create_input_image(ash::vk::Format::R8G8B8A8_UNORM).expect("input");
    let output = ctx.create_output_image(ash::vk::Format::R8G8B8A8_UNORM).expect("output");
    std::thread::spawn(move || {
        ctx.upload(input, &[99; 8 * 8 * 4]).expect("upload");
        ctx.infer(input, output).expect("infer on another thread");
    })
    .join()
    .expect("the thread ran");
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src") {
        let p = entry.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_library_never_prints() {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    assert!(files.len() > 20, "the sources were found");
    let mut offenders = Vec::new();
    // Unit-test modules in files of their own (`*tests.rs`) may print.
    let unit_tests = |f: &Path| f.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with("tests.rs"));
    for f in files.iter().filter(|f| !f.starts_with("src/bin") && !unit_tests(f)) {
        let text = std::fs::read_to_string(f).expect("read");
        // Unit tests (at the end of a file, after `#[cfg(test)]`) may print.
        for (n, line) in text.lines().enumerate().take_while(|(_, l)| l.trim() != "#[cfg(test)]") {
            let code = line.split("//").next().unwrap_or("");
            if ["println!", "eprintln!", "print!(", "eprint!(", "dbg!("].iter().any(|m| code.contains(m)) {
                offenders.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(offenders.is_empty(), "the library prints (it must log):\n{}", offenders.join("\n"));
}

/// The example binary, built by `cargo test` beside the test binaries.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} is missing: `cargo test` builds the examples (or `cargo build --release --examples`)",
        path.display()
    );
    path
}

#[test]
fn foreign_renderer_example_matches_onnx_runtime_in_both_ways_in() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("foreign_example");
    std::fs::create_dir_all(&dir).expect("dir");
    let input = dir.join("in.png");
    let small = image::open("models/coffee.png")
        .expect("coffee")
        .resize_exact(40, 28, image::imageops::FilterType::Triangle)
        .to_rgba8();
    small.save(&input).expect("write input");
    let rgba = small.into_raw();
    let model = Path::new("models/upscale.onnx");
    let env = neural_frame::load_onnx_runtime(None).expect("ONNX Runtime");
    let _ = env;
    let ctx = NeuralFrameContext::builder(model)
        .backend(neural_frame::Backend::Cpu)
        .frame_size(40, 28)
        .build()
        .expect("context");
    let contract = ctx.contract().clone();
    let reference = reference_output(model, &contract, &rgba, 40, 28);
    let want = expected_image(&contract, &reference, &rgba, 40, 28);
    drop(ctx);
    for share in ["device", "fd"] {
        let out = dir.join(format!("out-{share}.png"));
        let o = std::process::Command::new(example("foreign_renderer"))
            .args(["--model", "models/upscale.onnx", "--input"])
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .args(["--share", share, "--frames", "4", "--validation", "--compare"])
            .output()
            .expect("the example runs");
        assert_eq!(o.status.code(), Some(0), "--share {share}: {}", text(&o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("byte for byte: yes"), "--share {share}: {}", text(&o));
        assert!(stdout.contains("validation errors: 0"), "--share {share}: {}", text(&o));
        let got = image::open(&out).expect("output png").to_rgba8().into_raw();
        assert_eq!(got.len(), want.len());
        let mse = got.iter().zip(&want).map(|(a, b)| (*a as f64 - *b as f64).powi(2)).sum::<f64>() / got.len() as f64;
        let psnr = if mse == 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() };
        println!("--share {share}: PSNR {psnr:.2} dB against ONNX Runtime's CPU run");
        assert!(psnr >= 48.0, "--share {share}: PSNR {psnr:.2} dB < 48 dB");
    }
}

#[test]
fn suitable_devices_insists_on_cuda_only_for_the_cuda_backend() {
    use neural_frame::Backend;
    let cpu = neural_frame::suitable_devices(Backend::Cpu).expect("lavapipe, at least");
    assert!(!cpu.is_empty());
    let auto = neural_frame::suitable_devices(Backend::Auto).expect("auto lists devices");
    // SAFETY: only probes whether the library can be opened.
    #[cfg(feature = "cuda")]
    let has_cuda = unsafe { cudarc::driver::sys::is_culib_present() };
    #[cfg(not(feature = "cuda"))]
    let has_cuda = false;
    if !has_cuda {
        // Without CUDA, `auto` is the CPU backend's list and `cuda` is an error with the reason.
        assert_eq!(auto.len(), cpu.len());
        let e = neural_frame::suitable_devices(Backend::Cuda).expect_err("no CUDA here");
        assert_eq!(e.kind(), ErrorKind::ProviderUnavailable, "{e}");
    }
}

#[test]
fn fusing_the_conv_bias_needs_nhwc() {
    // Both are on by default; turning NHWC off turns the default fusion off with it.
    let d = neural_frame::Tuning::default().cuda;
    assert_eq!(d, neural_frame::CudaOptions::default());
    assert!(
        d.provider.prefer_nhwc && d.provider.fuse_conv_bias && d.provider.cuda_graph && d.handover.cuda_passes,
        "{d:?}"
    );
    let e = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(neural_frame::Backend::Cpu)
        .map_cuda_options(|c| c.with_prefer_nhwc(false))
        .map_cuda_options(|c| c.with_fuse_conv_bias(true))
        .frame_size(8, 8)
        .build()
        .err()
        .expect("fuse_conv_bias without prefer_nhwc is refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("prefer_nhwc"), "{e}");
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(neural_frame::Backend::Cpu)
        .map_cuda_options(|c| c.with_prefer_nhwc(false))
        .frame_size(8, 8)
        .build()
        .expect("NHWC off takes the default fusion with it");
    assert_eq!(ctx.tuning().cuda, None, "no CUDA option is in effect on the CPU backend");
    // With the defaults it builds; off CUDA the tuning says that no CUDA option is in effect.
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(neural_frame::Backend::Cpu)
        .frame_size(8, 8)
        .build()
        .expect("context");
    let t = ctx.tuning();
    assert_eq!((t.cuda, t.gpu_timestamps), (None, true), "{t:?}");
    // Serialised flat, without the CUDA options where none is in effect.
    let json = serde_json::to_value(t).expect("JSON");
    assert_eq!(json, serde_json::json!({"gpu_timestamps": true, "spin_wait": t.spin_wait}));
    // Every CUDA option at once, forced: the same refusal as the setters'.
    let cuda = neural_frame::CudaOptions::default().with_prefer_nhwc(false).with_fuse_conv_bias(true);
    let e = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(neural_frame::Backend::Cpu)
        .cuda_options(cuda)
        .frame_size(8, 8)
        .build()
        .err()
        .expect("CudaOptions with the fused bias and without NHWC are refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // The CLI refuses fusion forced on with NHWC forced off, naming the option.
    let out = common::neural_frame(
        &["run", "--backend", "cpu", "--prefer-nhwc", "false", "--fuse-conv-bias", "--frames", "1"],
        &[],
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("--prefer-nhwc"), "{}", text(&out));
}
