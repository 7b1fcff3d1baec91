//! The unit tests of precision.rs.
use super::*;

#[test]
fn the_model_files_say_their_precision() {
    let read = |p: &str| std::fs::read(p).expect(p);
    assert_eq!(model_precision(&read("models/upscale.onnx")).expect("resolves"), "fp32");
    assert_eq!(model_precision(&read("models/upscale-fp16.onnx")).expect("resolves"), "fp16");
    assert_eq!(model_precision(&read("models/test/tiny-x1-rgba-u8.onnx")).expect("resolves"), "other");
}

/// Element order of both layouts: NCHW walks x, then y, then c; NHWC c, then x, then y.
#[test]
fn coords_follow_the_layout() {
    let nchw = TensorKind::NCHW_F32;
    assert_eq!(coords(nchw, 4, 3, 0), (0, 0, 0));
    assert_eq!(coords(nchw, 4, 3, 5), (1, 1, 0));
    assert_eq!(coords(nchw, 4, 3, 12 + 4 * 2 + 3), (3, 2, 1));
    let nhwc = TensorKind { layout: Layout::Nhwc, ..nchw };
    assert_eq!(coords(nhwc, 4, 3, 1), (0, 0, 1));
    assert_eq!(coords(nhwc, 4, 3, 3 * (4 * 2 + 3) + 2), (3, 2, 2));
    // Not flat: the pattern varies in x, y and c.
    let values: std::collections::HashSet<u32> = (0..64).flat_map(|i| [pattern(i, i / 3, i % 3).to_bits()]).collect();
    assert!(values.len() > 40, "{}", values.len());
}

/// Threads writing one cache file at once each leave a whole file, never a mix.
#[test]
fn cache_files_are_written_whole_by_racing_writers() {
    let dir = std::env::temp_dir().join(format!("neural-frame-race-{}", std::process::id()));
    let path = dir.join("model.onnx");
    let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 200_000 + usize::from(i)]).collect();
    std::thread::scope(|s| {
        for c in &contents {
            let path = &path;
            s.spawn(move || write_atomically(path, c).expect("each writer succeeds"));
        }
    });
    let got = std::fs::read(&path).expect("the file");
    assert!(contents.contains(&got), "a mixed file of {} bytes", got.len());
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").collect();
    assert_eq!(left.len(), 1, "temporary files left: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cache that cannot be written leaves the model as it is (rewrites), or keeps fp32
/// under Auto with the reason; a check that cannot run keeps fp32 under Auto too.
#[test]
fn failures_keep_the_model_as_it_is() {
    let model = Path::new("models/upscale.onnx");
    let bytes = std::fs::read(model).expect("model");
    // A directory under a regular file cannot be made.
    let blocked = Path::new("models/upscale.onnx/precision");
    let all = Rewrites { nhwc_io: false, fold_skip: true };
    let (path, _, changes) = rewritten(model, bytes, "fp32", all, Some(blocked)).expect("not fatal");
    assert_eq!((path.as_path(), changes.len()), (model, 0));
    let mut never = |_: &Path| -> Result<Vec<u8>> { panic!("no check without a cached model") };
    let r = resolve_in(Some(blocked), model, Precision::Auto, all, Some(("gpu", &mut never))).expect("not fatal");
    assert_eq!((r.report.running, r.path.as_path()), ("fp32", model), "{:?}", r.report);
    assert!(r.report.reason.contains("could not be cached"), "{}", r.report.reason);
    // A probe that fails on the converted model (a size the model refuses, an output not finite).
    let dir = std::env::temp_dir().join(format!("neural-frame-fails-{}", std::process::id()));
    let mut failing = |p: &Path| -> Result<Vec<u8>> {
        if p.to_string_lossy().contains("fp16") {
            Err(Error::InvalidArgument("gave 3 output values that are not finite".into()))
        } else {
            Ok(vec![1u8; 64])
        }
    };
    let r =
        resolve_in(Some(&dir), model, Precision::Auto, Rewrites::NONE, Some(("gpu", &mut failing))).expect("not fatal");
    assert_eq!((r.report.running, r.path.as_path()), ("fp32", model), "{:?}", r.report);
    assert!(r.report.reason.contains("not finite"), "{}", r.report.reason);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cached checks read back as written, an infinite PSNR (equal outputs) included.
#[test]
fn checks_round_trip_through_their_file() {
    let mut checks = std::collections::BTreeMap::new();
    let c = |psnr_db, max_error_levels, passed| PrecisionCheck { psnr_db, max_error_levels, size: (96, 64), passed };
    checks
        .insert("NVIDIA H200 a-b / NVIDIA 580 / ONNX Runtime 1.31.1 / 95f7d2e07fb128cf".to_string(), c(61.6, 1, true));
    checks.insert("another GPU / 0123456789abcdef".to_string(), c(f64::INFINITY, 0, true));
    checks.insert("a third / fedcba9876543210".to_string(), c(21.25, 200, false));
    let dir = std::env::temp_dir().join(format!("neural-frame-checks-{}", std::process::id()));
    let file = dir.join("x.checks.tsv");
    write_atomically(&file, write_checks(&checks).as_bytes()).expect("written");
    assert_eq!(read_checks(&file), checks);
    std::fs::write(&file, "not a check\n").expect("written");
    assert!(read_checks(&file).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn psnr_and_largest_difference() {
    assert_eq!(compare(&[1, 2, 3], &[1, 2, 3]), (f64::INFINITY, 0));
    let (psnr, max) = compare(&[0, 0, 0, 0], &[0, 0, 0, 2]);
    assert_eq!(max, 2);
    // MSE 1 → 20·log10(255) = 48.13 dB.
    assert!((psnr - 48.13).abs() < 0.01, "{psnr}");
}

/// The CPU backend keeps the model's precision, whatever is asked.
#[test]
fn the_cpu_backend_keeps_the_models_precision() {
    for asked in [Precision::Auto, Precision::Fp16, Precision::Fp32] {
        let r = resolve(Path::new("models/upscale.onnx"), asked, Rewrites::NONE, None).expect("resolves");
        assert_eq!((r.report.running, r.path.as_path()), ("fp32", Path::new("models/upscale.onnx")));
    }
    for asked in [Precision::Auto, Precision::Fp16, Precision::Fp32] {
        let r = resolve(Path::new("models/upscale-fp16.onnx"), asked, Rewrites::NONE, None).expect("resolves");
        assert_eq!((r.report.running, r.path.as_path()), ("fp16", Path::new("models/upscale-fp16.onnx")));
    }
}

/// Every model the rewrites apply to keeps its contract (names, scale, kinds) but for
/// NHWC image tensors, as the pipeline reads it from the rewritten file; the others are
/// left alone. (The rewrites' equality on ONNX Runtime is layout_tests.rs's.)
#[test]
fn rewritten_models_keep_their_contract() {
    use crate::onnx::session::{self, Provider, SessionConfig};
    let dir = std::env::temp_dir().join(format!("neural-frame-rewrites-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = SessionConfig {
        provider: Provider::Cpu,
        conv_search: crate::onnx::ConvSearch::Heuristic,
        prefer_nhwc: false,
        fuse_conv_bias: false,
        cuda_stream: None,
        threads: Some(1),
        declared: Default::default(),
    };
    let all = Rewrites { nhwc_io: true, fold_skip: true };
    let mut rewritten_count = 0;
    let mut models: Vec<PathBuf> = std::fs::read_dir("models/test")
        .expect("models/test")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx") && !p.to_string_lossy().contains("bad-"))
        .collect();
    models.push("models/upscale.onnx".into());
    models.push("models/upscale-fp16.onnx".into());
    models.sort();
    for model in models {
        let bytes = std::fs::read(&model).expect("model");
        let kind = model_precision(&bytes).expect("kind");
        let (path, _, changes) = rewritten(&model, bytes, kind, all, Some(&dir)).expect("rewrites");
        // SAFETY: no CUDA stream.
        let Ok((_, before)) = (unsafe { session::create(&model, &config) }) else {
            continue; // a model the contract refuses as it is (tested elsewhere)
        };
        // SAFETY: as above.
        let (_, after) =
            unsafe { session::create(&path, &config) }.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if changes.is_empty() {
            assert_eq!(path, model);
            continue;
        }
        rewritten_count += 1;
        let nhwc = |k: crate::onnx::TensorKind| crate::onnx::TensorKind { layout: Layout::Nhwc, ..k };
        assert_eq!(after.input, nhwc(before.input), "{}: {changes:?}", model.display());
        assert_eq!(after.output, nhwc(before.output), "{}: {changes:?}", model.display());
        assert_eq!(
            (after.input_name, after.output_name, after.scale),
            (before.input_name, before.output_name, before.scale)
        );
        let names = |t: &[crate::onnx::NamedTensor]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&after.extra_inputs), names(&before.extra_inputs), "{}", model.display());
        assert_eq!(names(&after.extra_outputs), names(&before.extra_outputs), "{}", model.display());
        assert_eq!(after.other_outputs, before.other_outputs, "{}", model.display());
    }
    assert!(rewritten_count >= 8, "{rewritten_count} models rewritten");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a probe (here the CPU provider, in 8-bit pixels), `Auto` converts the fp32
/// upscaler, checks it, caches both, and keeps fp32 where the check fails.
#[test]
fn auto_converts_checks_and_caches() {
    let dir = std::env::temp_dir().join(format!("neural-frame-precision-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = Some(dir.as_path());
    let mut runs = Vec::new();
    let mut probe = |p: &Path| -> Result<Vec<u8>> {
        runs.push(p.to_path_buf());
        // Stand-in for a device run: the fp16 file's output is off by one level in one place.
        let mut out = vec![100u8; 1000];
        if p.to_string_lossy().contains("fp16") {
            out[7] = 101;
        }
        Ok(out)
    };
    let r = resolve_in(
        cache,
        Path::new("models/upscale.onnx"),
        Precision::Auto,
        Rewrites::NONE,
        Some(("gpu-a", &mut probe)),
    )
    .expect("resolves");
    assert_eq!(r.report.running, "fp16", "{:?}", r.report);
    assert!(r.path.starts_with(&dir) && r.path.is_file(), "{}", r.path.display());
    assert_eq!(model_precision(&std::fs::read(&r.path).expect("resolves")).expect("resolves"), "fp16");
    let check = r.report.check.clone().expect("checked");
    assert!(check.passed && check.max_error_levels == 1, "{check:?}");
    let _ = probe;
    assert_eq!(runs.len(), 2, "one probe run of each model");
    // Cached: no probe runs the second time on that GPU.
    let mut again = |_: &Path| -> Result<Vec<u8>> { panic!("the check is cached") };
    let r2 = resolve_in(
        cache,
        Path::new("models/upscale.onnx"),
        Precision::Auto,
        Rewrites::NONE,
        Some(("gpu-a", &mut again)),
    )
    .expect("resolves");
    assert_eq!((r2.path, r2.report.check), (r.path.clone(), Some(check)));
    // Another GPU whose fp16 result is far off keeps fp32, and says why.
    let mut bad = |p: &Path| -> Result<Vec<u8>> {
        Ok(if p.to_string_lossy().contains("fp16") { vec![0u8; 1000] } else { vec![200u8; 1000] })
    };
    let r3 =
        resolve_in(cache, Path::new("models/upscale.onnx"), Precision::Auto, Rewrites::NONE, Some(("gpu-b", &mut bad)))
            .expect("resolves");
    assert_eq!((r3.report.running, r3.path.as_path()), ("fp32", Path::new("models/upscale.onnx")));
    assert!(r3.report.reason.contains("PSNR"), "{}", r3.report.reason);
    // A light model stays fp32 under Auto (no probe), and is converted when forced.
    let mut none = |_: &Path| -> Result<Vec<u8>> { panic!("no check for a light model") };
    let tiny = Path::new("models/test/tiny-x2-f32.onnx");
    let r6 = resolve_in(cache, tiny, Precision::Auto, Rewrites::NONE, Some(("gpu-a", &mut none))).expect("resolves");
    assert_eq!(r6.report.running, "fp32");
    assert!(r6.report.reason.contains("multiply-adds per input pixel"), "{}", r6.report.reason);
    let r7 = resolve_in(cache, tiny, Precision::Fp16, Rewrites::NONE, Some(("gpu-a", &mut none))).expect("resolves");
    assert_eq!(r7.report.running, "fp16");
    // Forced fp16 needs no check; forced fp32 keeps the file.
    let mut none = |_: &Path| -> Result<Vec<u8>> { panic!("no check when forced") };
    let r4 = resolve_in(
        cache,
        Path::new("models/upscale.onnx"),
        Precision::Fp16,
        Rewrites::NONE,
        Some(("gpu-c", &mut none)),
    )
    .expect("resolves");
    assert_eq!((r4.report.running, r4.report.check), ("fp16", None));
    let r5 = resolve_in(
        cache,
        Path::new("models/upscale.onnx"),
        Precision::Fp32,
        Rewrites::NONE,
        Some(("gpu-c", &mut none)),
    )
    .expect("resolves");
    assert_eq!(r5.report.running, "fp32");
    let _ = std::fs::remove_dir_all(&dir);
}
