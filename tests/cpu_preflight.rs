//! Pre-flight stage 1 for real on whatever Vulkan driver is present (Mesa's
//! lavapipe in CI), and the error paths of the command.

use common::{json, neural_frame, text};
use neural_frame::{Backend, ErrorKind, NeuralFrameContext, SyncMode};

#[test]
fn stage1_exports_imports_and_compares_every_byte() {
    let out = neural_frame(&["preflight", "--stage", "1", "--json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = json(&out);
    let stage = &report["stages"][0];
    assert_eq!(stage["stage"], 1);
    assert_eq!(stage["status"], "passed", "{stage}");
    let d = &stage["details"];
    assert_eq!(d["bytes_compared"], 1920 * 1080 * 4);
    assert_eq!(d["identical"], true);
    assert!(d["export_ms"].as_f64().is_some_and(|t| t >= 0.0), "{d}");
    assert!(d["import_ms"].as_f64().is_some_and(|t| t >= 0.0), "{d}");
    assert_eq!(d["round_trip"]["trials"], 5);
    assert!(d["round_trip"]["min_ms"].as_f64().is_some_and(|t| t > 0.0), "{d}");
    assert!(d["round_trip"]["median_ms"].as_f64() >= d["round_trip"]["min_ms"].as_f64());
    assert!(!d["device"]["name"].as_str().unwrap_or("").is_empty(), "{d}");
    assert!(!d["device"]["driver_name"].as_str().unwrap_or("").is_empty(), "{d}");
    assert_eq!(d["device"]["uuid"].as_str().map(str::len), Some(36), "{d}");
}

#[test]
fn stage1_text_report_names_device_and_timings() {
    let out = neural_frame(&["preflight", "--stage", "1"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    for needle in
        ["PASSED", "8294400 bytes compared: identical", "UUID:", "driver", "export", "import", "round trip: min"]
    {
        assert!(s.contains(needle), "missing {needle:?} in:\n{s}");
    }
}

#[test]
fn changed_byte_after_import_is_detected_with_exit_2() {
    let out = neural_frame(&["preflight", "--stage", "1", "--json", "--inject-fault"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stage = &json(&out)["stages"][0];
    assert_eq!(stage["status"], "different");
    let diff = &stage["details"]["difference"];
    assert_eq!(diff["x"], 960);
    assert_eq!(diff["y"], 540);
    assert_eq!(diff["channel"], 1);
    assert_eq!(diff["bytes_different"], 1);
    assert_ne!(diff["expected"], diff["got"]);
}

#[test]
fn no_vulkan_driver_exits_1_and_says_so() {
    let out = neural_frame(
        &["preflight", "--stage", "1"],
        &[("VK_DRIVER_FILES", "/nonexistent/icd.json"), ("VK_ICD_FILENAMES", "/nonexistent/icd.json")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("no Vulkan driver found") && s.contains("mesa-vulkan-drivers"), "{}", text(&out));
}

#[test]
fn missing_vulkan_loader_exits_1_and_says_so() {
    let out =
        neural_frame(&["preflight", "--stage", "1"], &[("NEURAL_FRAME_VULKAN_LIBRARY", "/nonexistent/libvulkan.so.1")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("Vulkan loader not found") && s.contains("libvulkan1"), "{}", text(&out));
}

#[test]
fn missing_extension_is_named() {
    // Semaphore sharing needs VK_KHR_external_semaphore_fd. Where the driver lacks
    // it (lavapipe), the context runs in host-signalled mode and exporting its
    // timelines names the extension; where it has it, export works.
    let ctx = NeuralFrameContext::builder("models/test/tiny-x2-f32.onnx")
        .backend(Backend::Cpu)
        .frame_size(8, 8)
        .build()
        .expect("a context");
    let has = ctx.report().vulkan_device.external_semaphore_fd;
    match ctx.export_timelines() {
        Ok(_) => assert!(has && ctx.sync_mode() == SyncMode::Gpu),
        Err(e) => {
            assert!(!has && ctx.sync_mode() == SyncMode::Host);
            assert_eq!(e.kind(), ErrorKind::Unsupported);
            let msg = e.to_string();
            assert!(
                msg.contains("VK_KHR_external_semaphore_fd") && msg.contains(&ctx.report().vulkan_device.name),
                "{msg}"
            );
        }
    }
}

#[test]
fn stage1_has_no_validation_errors() {
    let out = neural_frame(&["preflight", "--stage", "1", "--json", "--validation", "--trials", "1"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stage = &json(&out)["stages"][0];
    assert_eq!(stage["details"]["validation_errors"], 0, "{}", text(&out));
}

#[test]
fn full_preflight_reports_every_stage_and_never_skips_silently() {
    let out = neural_frame(&["preflight", "--json", "--size", "64x48", "--trials", "1"], &[]);
    let report = json(&out);
    let stages = report["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 3, "{report}");
    assert_eq!(stages[0]["status"], "passed", "{report}");
    // SAFETY: only probes whether the library can be opened.
    #[cfg(feature = "cuda")]
    let (has_cuda, why) = (unsafe { cudarc::driver::sys::is_culib_present() }, "NVIDIA driver");
    #[cfg(not(feature = "cuda"))]
    let (has_cuda, why) = (false, "built without its `cuda` feature");
    for stage in &stages[1..] {
        if has_cuda {
            assert_ne!(stage["status"], "skipped", "{report}");
        } else {
            assert_eq!(stage["status"], "skipped", "{report}");
            let reason = stage["reason"].as_str().unwrap_or("");
            assert!(reason.contains(why), "{report}");
        }
    }
    if !has_cuda {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
}

#[test]
fn bad_arguments_are_refused() {
    let out = neural_frame(&["preflight", "--stage", "4"], &[]);
    assert_eq!(out.status.code(), Some(2), "clap usage error: {}", text(&out));
    let out = neural_frame(&["preflight", "--device", "not-a-device"], &[]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let out = neural_frame(&["preflight", "--stage", "1", "--device", "99"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("device index 99"), "{}", text(&out));
}
