//! The unit tests of precision.rs.
use super::*;
use crate::onnx::probe_frame::{coords, pattern};
#[cfg(feature = "cuda")]
use crate::onnx::probe_frame::{probe_options, probe_pixels};
use crate::onnx::tensor::{Layout, TensorKind};

/// A stand-in for a device's probe (the check is tested without a GPU): its probe frames run
/// under `options`, and `outputs` gives what a model path's frame gives (called only when
/// the frame runs).
fn stand_in<'a>(
    options: &str,
    outputs: impl Fn(&Path) -> Result<ProbeOutputs> + 'a,
) -> impl FnMut(&Path) -> Result<Probe<'a>> + 'a {
    let outputs = std::rc::Rc::new(outputs);
    let options = options.to_string();
    move |p: &Path| {
        let (outputs, p) = (std::rc::Rc::clone(&outputs), p.to_path_buf());
        Ok(Probe::new(options.clone(), move || outputs(&p)))
    }
}

/// A model's probe outputs: the main output only, `pixels`, at [`CHECK_SIZE`].
fn main_only(pixels: Vec<u8>) -> ProbeOutputs {
    ProbeOutputs { size: CHECK_SIZE, outputs: vec![("output".into(), ProbeValues::Pixels(pixels))] }
}

/// Whether `p` is a converted (fp16) model.
fn is_fp16(p: &Path) -> bool {
    p.to_string_lossy().contains("fp16")
}

/// A fresh cache directory of this test's own.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("neural-frame-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

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
    let all = Rewrites { fold_skip: true };
    let (path, _, changes) = rewritten(model, bytes, all, Some(blocked)).expect("not fatal");
    assert_eq!((path.as_path(), changes.len()), (model, 0));
    let mut never = stand_in("", |_| panic!("no check without a cached model"));
    let r = resolve_in(Some(blocked), model, Precision::Auto, all, Some(("gpu", &mut never))).expect("not fatal");
    assert_eq!((r.report.running, r.path.as_path()), ("fp32", model), "{:?}", r.report);
    assert!(r.report.reason.contains("could not be cached"), "{}", r.report.reason);
    // A probe that fails on the converted model (a size the model refuses, an output not finite).
    let dir = std::env::temp_dir().join(format!("neural-frame-fails-{}", std::process::id()));
    let mut failing = stand_in("", |p| {
        if is_fp16(p) {
            Err(Error::InvalidArgument("gave 3 output values that are not finite".into()))
        } else {
            Ok(main_only(vec![1u8; 64]))
        }
    });
    let r =
        resolve_in(Some(&dir), model, Precision::Auto, Rewrites::NONE, Some(("gpu", &mut failing))).expect("not fatal");
    assert_eq!((r.report.running, r.path.as_path()), ("fp32", model), "{:?}", r.report);
    assert!(r.report.reason.contains("not finite"), "{}", r.report.reason);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cached checks read back as written, an infinite PSNR (equal outputs) included; a line
/// of the earlier format (no output name) is not read.
#[test]
fn checks_round_trip_through_their_file() {
    let mut checks = std::collections::BTreeMap::new();
    let c = |psnr_db, max_error_levels, passed| PrecisionCheck {
        psnr_db,
        max_error_levels,
        output: "edges".into(),
        size: (96, 64),
        passed,
    };
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
    std::fs::write(&file, "true\t61.6\t1\t96\t64\tgpu / 0123456789abcdef\n").expect("written");
    assert!(read_checks(&file).is_empty(), "a line of version 1 read: {:?}", read_checks(&file));
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

/// Every model the rewrites apply to keeps its contract (names, scale, kinds), as the
/// pipeline reads it from the rewritten file; the others are left alone. (The rewrites'
/// equality on ONNX Runtime is graph/fold/tests.rs's.)
#[test]
fn rewritten_models_keep_their_contract() {
    use crate::onnx::session;
    let dir = std::env::temp_dir().join(format!("neural-frame-rewrites-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = cpu_config();
    let all = Rewrites { fold_skip: true };
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
        let (path, _, changes) = rewritten(&model, bytes, all, Some(&dir)).expect("rewrites");
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
        assert_eq!(after.input, before.input, "{}: {changes:?}", model.display());
        assert_eq!(after.output, before.output, "{}: {changes:?}", model.display());
        assert_eq!(
            (after.input_name, after.output_name, after.scale),
            (before.input_name, before.output_name, before.scale)
        );
        let names = |t: &[crate::onnx::NamedTensor]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&after.extra_inputs), names(&before.extra_inputs), "{}", model.display());
        assert_eq!(names(&after.extra_outputs), names(&before.extra_outputs), "{}", model.display());
        assert_eq!(after.other_outputs, before.other_outputs, "{}", model.display());
    }
    assert!(rewritten_count >= 2, "{rewritten_count} models rewritten");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a probe (here a stand-in, in 8-bit pixels), `Auto` converts the fp32
/// upscaler, checks it, caches both, and keeps fp32 where the check fails.
#[test]
fn auto_converts_checks_and_caches() {
    let dir = std::env::temp_dir().join(format!("neural-frame-precision-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = Some(dir.as_path());
    let runs = std::cell::RefCell::new(Vec::new());
    let mut probe = stand_in("", |p| {
        runs.borrow_mut().push(p.to_path_buf());
        // Stand-in for a device run: the fp16 file's output is off by one level in one place.
        let mut out = vec![100u8; 1000];
        if is_fp16(p) {
            out[7] = 101;
        }
        Ok(main_only(out))
    });
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
    assert!(check.passed && check.max_error_levels == 1 && check.output == "output", "{check:?}");
    assert_eq!(runs.borrow().len(), 2, "one probe run of each model");
    // Cached: no probe runs the second time on that GPU.
    let mut again = stand_in("", |_| panic!("the check is cached"));
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
    let mut bad = stand_in("", |p| Ok(main_only(if is_fp16(p) { vec![0u8; 1000] } else { vec![200u8; 1000] })));
    let r3 =
        resolve_in(cache, Path::new("models/upscale.onnx"), Precision::Auto, Rewrites::NONE, Some(("gpu-b", &mut bad)))
            .expect("resolves");
    assert_eq!((r3.report.running, r3.path.as_path()), ("fp32", Path::new("models/upscale.onnx")));
    assert!(r3.report.reason.contains("PSNR"), "{}", r3.report.reason);
    // A light model stays fp32 under Auto (no probe), and is converted when forced.
    let mut none = stand_in("", |_| panic!("no check for a light model"));
    let tiny = Path::new("models/test/tiny-x2-f32.onnx");
    let r6 = resolve_in(cache, tiny, Precision::Auto, Rewrites::NONE, Some(("gpu-a", &mut none))).expect("resolves");
    assert_eq!(r6.report.running, "fp32");
    assert!(r6.report.reason.contains("multiply-adds per input pixel"), "{}", r6.report.reason);
    let r7 = resolve_in(cache, tiny, Precision::Fp16, Rewrites::NONE, Some(("gpu-a", &mut none))).expect("resolves");
    assert_eq!(r7.report.running, "fp16");
    // Forced fp16 needs no check; forced fp32 keeps the file.
    let mut none = stand_in("", |_| panic!("no check when forced"));
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

/// The check's cached result is the one of the probe's options (the caller's declarations,
/// the CUDA provider's kernel options): other options run the check again, and may fail it.
#[test]
fn the_check_is_cached_per_probe_options() {
    let dir = fresh_dir("options");
    let model = Path::new("models/upscale.onnx");
    let runs = std::cell::Cell::new(0);
    let resolve = |options: &str, fp16_off_by: u8| {
        let mut probe = stand_in(options, |p| {
            runs.set(runs.get() + 1);
            Ok(main_only(vec![if is_fp16(p) { 100 + fp16_off_by } else { 100 }; 1000]))
        });
        resolve_in(Some(&dir), model, Precision::Auto, Rewrites::NONE, Some(("gpu-a", &mut probe))).expect("resolves")
    };
    let a = "CUDA, conv search Heuristic, declared Unit";
    assert_eq!(resolve(a, 1).report.running, "fp16");
    assert_eq!(runs.replace(0), 2);
    // The same options: cached (a result that would fail is not looked at).
    assert_eq!(resolve(a, 200).report.running, "fp16");
    assert_eq!(runs.replace(0), 0, "cached");
    // Another declared range, or other kernels: checked again.
    let r = resolve("CUDA, conv search Heuristic, declared Signed", 200);
    assert_eq!(runs.replace(0), 2, "checked again");
    assert_eq!(r.report.running, "fp32", "{:?}", r.report);
    assert!(!r.report.check.expect("checked").passed);
    assert_eq!(resolve("CUDA, conv search Exhaustive, declared Unit", 1).report.running, "fp16");
    assert_eq!(runs.replace(0), 2, "checked again");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A check cached by a version before the key named the probe's options is not read: its
/// entry, for this GPU and model, says the check passed, and the check runs (and fails) again.
#[test]
fn checks_cached_by_an_earlier_version_are_not_read() {
    let dir = fresh_dir("old-checks");
    let model = Path::new("models/upscale.onnx");
    let mut forced = stand_in("", |_| panic!("no check when forced"));
    let r =
        resolve_in(Some(&dir), model, Precision::Fp16, Rewrites::NONE, Some(("gpu-a", &mut forced))).expect("resolves");
    let converted = r.report.converted.expect("converted");
    let sha16 = &converted.file_name().expect("name").to_string_lossy()[..16];
    // Version 1's file and line: `passed psnr max width height key`, the key `GPU / model`.
    std::fs::write(converted.with_extension("checks.tsv"), format!("true\t61.6\t1\t96\t64\tgpu-a / {sha16}\n"))
        .expect("written");
    let runs = std::cell::Cell::new(0);
    let mut bad = stand_in("", |p| {
        runs.set(runs.get() + 1);
        Ok(main_only(vec![if is_fp16(p) { 0 } else { 200 }; 1000]))
    });
    let r =
        resolve_in(Some(&dir), model, Precision::Auto, Rewrites::NONE, Some(("gpu-a", &mut bad))).expect("resolves");
    assert_eq!((r.report.running, runs.get()), ("fp32", 2), "{:?}", r.report);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The probe's options name every setting of the session that changes its result (the
/// declarations, the CUDA provider's kernel options), in an order of their own; not the
/// device ordinal, the CPU threads or a stream.
#[cfg(feature = "cuda")]
#[test]
fn probe_options_name_what_changes_the_probe() {
    use crate::onnx::session::{Provider, SessionConfig};
    use crate::onnx::tensor::Normalization;
    let base = SessionConfig { provider: Provider::Cuda { ordinal: 0 }, threads: None, ..cpu_config() };
    let options = |c: &SessionConfig| probe_options(c);
    let mut declared_all = base.clone();
    declared_all.declared.all.normalization = Some(Normalization::Signed);
    let mut mean_std = base.clone();
    mean_std.declared.all.normalization = Some(Normalization::MeanStd { mean: [0.5; 3], std: [0.25; 3] });
    let mut mean_std2 = base.clone();
    mean_std2.declared.all.normalization = Some(Normalization::MeanStd { mean: [0.5; 3], std: [0.2; 3] });
    let mut per_tensor = base.clone();
    per_tensor.declared.per_tensor.insert("input".into(), declared_all.declared.all);
    let mut nhwc = base.clone();
    nhwc.prefer_nhwc = true;
    let mut fused = base.clone();
    fused.fuse_conv_bias = true;
    let mut exhaustive = base.clone();
    exhaustive.conv_search = crate::onnx::ConvSearch::Exhaustive;
    let all: Vec<String> =
        [&base, &declared_all, &mean_std, &mean_std2, &per_tensor, &nhwc, &fused, &exhaustive].map(options).into();
    let distinct: std::collections::HashSet<&String> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "{all:#?}");
    // What does not change the result does not change the key.
    let other = SessionConfig { provider: Provider::Cuda { ordinal: 3 }, threads: Some(2), ..base.clone() };
    assert_eq!(options(&other), options(&base));
    // Two tensors declared: one key whatever order the map keeps them in.
    let (mut ab, mut ba) = (base.clone(), base.clone());
    let (a, b) = (declared_all.declared.all, mean_std.declared.all);
    ab.declared.per_tensor.extend([("a".to_string(), a), ("b".to_string(), b)]);
    ba.declared.per_tensor.extend([("b".to_string(), b), ("a".to_string(), a)]);
    for _ in 0..8 {
        let mut fresh = ba.clone();
        fresh.declared.per_tensor = ba.declared.per_tensor.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(options(&ab), options(&fresh));
    }
}

/// Every output is compared: one out of tolerance, an image's or another tensor's, keeps
/// fp32 and is named in the report; where all are within it, the furthest is named.
#[test]
fn every_output_is_compared() {
    let dir = fresh_dir("outputs");
    let model = Path::new("models/upscale.onnx");
    // The main output equal, then an extra image output and a score, each off by `off`.
    let outputs = |fp16: bool, edges_off: u8, score_off: f32| ProbeOutputs {
        size: CHECK_SIZE,
        outputs: vec![
            ("image".into(), ProbeValues::Pixels(vec![100; 1000])),
            ("edges".into(), ProbeValues::Pixels(vec![if fp16 { 50 + edges_off } else { 50 }; 1000])),
            ("score".into(), ProbeValues::Values(vec![if fp16 { 0.5 + score_off } else { 0.5 }, -2.0])),
        ],
    };
    let mut gpu = 0;
    let mut resolve = |edges_off: u8, score_off: f32| {
        let mut probe = stand_in("", |p| Ok(outputs(is_fp16(p), edges_off, score_off)));
        gpu += 1; // a GPU of its own each time: nothing cached
        let gpu = format!("gpu-{gpu}");
        resolve_in(Some(&dir), model, Precision::Auto, Rewrites::NONE, Some((&gpu, &mut probe))).expect("resolves")
    };
    // The extra image output far off.
    let r = resolve(60, 0.0);
    let check = r.report.check.clone().expect("checked");
    assert_eq!((r.report.running, r.path.as_path()), ("fp32", model), "{:?}", r.report);
    assert_eq!((check.output.as_str(), check.max_error_levels, check.passed), ("edges", 60, false), "{check:?}");
    assert!(r.report.reason.contains("`edges`"), "{}", r.report.reason);
    // The score off by 0.1 of its largest magnitude, 2: 12.75 levels of 255, rounded up.
    let r = resolve(0, 0.1);
    let check = r.report.check.clone().expect("checked");
    assert_eq!((r.report.running, check.output.as_str(), check.max_error_levels), ("fp32", "score", 13), "{check:?}");
    assert!(r.report.reason.contains("`score`"), "{}", r.report.reason);
    // All within the tolerance: fp16, the output of the lowest PSNR named.
    let r = resolve(1, 0.0);
    let check = r.report.check.clone().expect("checked");
    assert_eq!((r.report.running, check.output.as_str(), check.passed), ("fp16", "edges", true), "{check:?}");
    assert!(r.report.reason.contains("`edges`"), "{}", r.report.reason);
    let r = resolve(0, 0.0);
    let check = r.report.check.clone().expect("checked");
    assert_eq!((check.output.as_str(), check.psnr_db), ("image", f64::INFINITY), "equal: the main output named");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Outputs that the two models disagree on (names, kinds, lengths, sizes) fail the check
/// as not run, never compared in part.
#[test]
fn outputs_that_do_not_match_are_an_error() {
    let px = |n: usize| ProbeValues::Pixels(vec![1; n]);
    let of = |outputs: Vec<(&str, ProbeValues)>| ProbeOutputs {
        size: CHECK_SIZE,
        outputs: outputs.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
    };
    let want = of(vec![("image", px(4)), ("edges", px(2))]);
    assert!(judge(&want, &want).expect("compared").passed);
    for got in [
        of(vec![("image", px(4))]),
        of(vec![("image", px(4)), ("other", px(2))]),
        of(vec![("image", px(4)), ("edges", px(3))]),
        of(vec![("image", px(4)), ("edges", ProbeValues::Values(vec![1.0; 2]))]),
        ProbeOutputs { size: (8, 8), ..want.clone() },
    ] {
        assert!(judge(&want, &got).is_err(), "{got:?}");
    }
    assert!(judge(&of(vec![]), &of(vec![])).is_err());
}

/// The report's probe size is the size that ran: a model of a fixed size runs at its own.
#[test]
fn the_check_reports_the_size_that_ran() {
    let dir = fresh_dir("size");
    let fixed = (40, 24);
    let mut probe = stand_in("", |p| {
        let n = (fixed.0 * fixed.1 * 3 * 4) as usize;
        Ok(ProbeOutputs {
            size: fixed,
            outputs: vec![("output".into(), ProbeValues::Pixels(vec![if is_fp16(p) { 101 } else { 100 }; n]))],
        })
    });
    let r = resolve_in(
        Some(&dir),
        Path::new("models/upscale.onnx"),
        Precision::Auto,
        Rewrites::NONE,
        Some(("gpu-a", &mut probe)),
    )
    .expect("resolves");
    assert_eq!(r.report.check.expect("checked").size, fixed);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `probe_pixels` (here on the CPU provider) runs every output of the model: the extra image
/// output, an output that is not an image; and a model of a fixed size at its own size.
#[cfg(feature = "cuda")]
#[test]
fn the_probe_runs_every_output_at_the_models_size() {
    use crate::graph::proto::Dim;

    let dir = fresh_dir("probe");
    std::fs::create_dir_all(&dir).expect("dir");
    let config = cpu_config();
    let run = |path: &Path| probe_pixels(path, &config).expect("probe").run().expect("runs");
    let shape = |o: &ProbeOutputs| {
        o.outputs
            .iter()
            .map(|(n, v)| match v {
                ProbeValues::Pixels(p) => (n.clone(), "pixels", p.len()),
                ProbeValues::Values(v) => (n.clone(), "values", v.len()),
            })
            .collect::<Vec<_>>()
    };
    let (w, h) = (CHECK_SIZE.0 as usize, CHECK_SIZE.1 as usize);
    let two = run(Path::new("models/test/tiny-x2-f32-two-outputs.onnx"));
    assert_eq!(two.size, CHECK_SIZE);
    let image = 4 * w * h;
    assert_eq!(shape(&two), [("image".into(), "pixels", 3 * image), ("edges".into(), "pixels", image)]);
    let score = run(Path::new("models/test/tiny-x2-f32-score-first.onnx"));
    assert_eq!(shape(&score), [("image".into(), "pixels", 3 * image), ("score".into(), "values", 1)]);
    // tiny-x2-f32 made to take only 40×24 frames.
    let mut m = ModelProto::decode_model(&std::fs::read("models/test/tiny-x2-f32.onnx").expect("model"), "test")
        .expect("decodes");
    let g = m.graph.as_mut().expect("graph");
    for (v, (fw, fh)) in [(&mut g.input[0], (40, 24)), (&mut g.output[0], (80, 48))] {
        let dims = &mut v.tensor_type_mut().expect("tensor").shape.as_mut().expect("shape").dim;
        dims[2].value = Some(Dim::Value(fh));
        dims[3].value = Some(Dim::Value(fw));
    }
    let path = dir.join("tiny-x2-f32-40x24.onnx");
    std::fs::write(&path, prost::Message::encode_to_vec(&m)).expect("written");
    let fixed = run(&path);
    assert_eq!(fixed.size, (40, 24));
    assert_eq!(shape(&fixed), [("output".into(), "pixels", 3 * 80 * 48)]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A one-thread CPU session's options, the CUDA ones off.
fn cpu_config() -> crate::onnx::session::SessionConfig {
    crate::onnx::session::SessionConfig {
        provider: crate::onnx::session::Provider::Cpu,
        conv_search: crate::onnx::ConvSearch::Heuristic,
        prefer_nhwc: false,
        fuse_conv_bias: false,
        cuda_stream: None,
        threads: Some(1),
        declared: Default::default(),
    }
}
