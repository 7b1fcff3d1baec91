//! `neural-frame bench` on the CPU backend: every mode runs and reports.

use common::{json, neural_frame, text};

/// The modes a report should list: `caller frames` after the pipelined mode where it
/// ran, and where it did not, the report and stderr say why.
fn expected_modes(r: &serde_json::Value, stderr: &[u8], host_naive: bool) -> Vec<&'static str> {
    let mut modes = vec!["ort-alone", "zero-copy sync", "zero-copy pipelined"];
    match r["caller_frames"]["status"].as_str() {
        Some("ran") => modes.push("caller frames"),
        Some("skipped") => {
            let reason = r["caller_frames"]["reason"].as_str().unwrap_or_default();
            assert!(!reason.is_empty(), "a skipped mode says why: {r}");
            let said = format!("caller frames skipped: {reason}");
            assert!(String::from_utf8_lossy(stderr).contains(&said), "stderr says why too");
        }
        other => panic!("caller_frames.status is {other:?}: {r}"),
    }
    modes.push("host pinned");
    if host_naive {
        modes.push("host naive");
    }
    modes
}

#[test]
fn bench_reports_every_mode() {
    let o = neural_frame(
        &[
            "bench",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32.onnx",
            "--size",
            "64x36",
            "--frames",
            "8",
            "--warmup",
            "2",
            "--host-naive",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    let modes: Vec<&str> = r["modes"].as_array().expect("modes").iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(modes, expected_modes(&r, &o.stderr, true));
    // The competent host path computes the zero-copy path's image (the bench checks it and says so).
    assert_eq!(r["host_pinned_max_difference"], 0, "{r}");
    assert!(r["host_naive_parts"]["run_ms"].as_f64().is_some_and(|v| v > 0.0), "{r}");
    for m in r["modes"].as_array().expect("modes") {
        assert!(m["median_ms"].as_f64().is_some_and(|v| v > 0.0), "{m}");
        assert!(m["fps"].as_f64().is_some_and(|v| v > 0.0), "{m}");
    }
    assert!(r["time_to_first_frame_ms"].as_f64().is_some_and(|v| v > 0.0));
    assert_eq!(r["output_size"], serde_json::json!([128, 72]));
    // The --warmup frames, then each mode's own warm-up of 0.5 s (none with --warmup 0, below).
    assert_eq!((r["warmup"].as_u64(), r["warmup_min_ms"].as_f64()), (Some(2), Some(500.0)), "{r}");
    let table = neural_frame(
        &[
            "bench",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32.onnx",
            "--size",
            "32x18",
            "--frames",
            "4",
            "--warmup",
            "0",
            // The pass times are then not measured: the table says so, not NaN.
            "--no-gpu-timestamps",
        ],
        &[],
    );
    assert_eq!(table.status.code(), Some(0), "{}", text(&table));
    let stdout = String::from_utf8_lossy(&table.stdout);
    assert!(stdout.contains("zero-copy pipelined"), "{}", text(&table));
    assert!(stdout.contains("0 warm-up frames then 0 ms a mode"), "{}", text(&table));
    // No NaN and no Rust names (`Heuristic`, `Gpu`): what was not measured reads n/a, what does
    // not apply on the CPU backend says so.
    assert!(!stdout.contains("NaN"), "{}", text(&table));
    assert!(!stdout.contains("Heuristic") && !stdout.contains("Gpu"), "{}", text(&table));
    assert!(stdout.contains("CUDA options: not in effect on the CPU backend"), "{}", text(&table));
    assert!(stdout.contains("pre n/a ms"), "{}", text(&table));
}

#[test]
fn several_contexts_run_at_once() {
    // Two contexts on one device stand in for one per GPU here.
    let o = neural_frame(
        &[
            "bench",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32.onnx",
            "--size",
            "48x32",
            "--frames",
            "10",
            "--devices",
            "0,0",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = json(&o);
    let devices = r["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 2);
    assert_eq!(devices.iter().map(|d| d["frames"].as_u64().unwrap_or(0)).sum::<u64>(), 10);
    assert!(r["total_fps"].as_f64().is_some_and(|v| v > 0.0));
}

#[test]
fn cuda_only_options_are_reported_and_diagnostics_say_they_need_cuda() {
    let o = neural_frame(
        &[
            "bench",
            "--backend",
            "cpu",
            "--model",
            "models/test/tiny-x2-f32.onnx",
            "--size",
            "40x24",
            "--frames",
            "6",
            "--warmup",
            "1",
            "--diagnose",
            "--cuda-graph",
            "--post-wait",
            "host",
            "--spin-wait",
            "--side-stream-wait",
            "--no-gpu-timestamps",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped on the CPU backend"), "{}", text(&o));
    let r = json(&o);
    assert_eq!(r["cuda_graph"], false, "no CUDA graphs on the CPU backend");
    assert_eq!(r["spin_wait"], true);
    assert_eq!(r["side_stream_wait"], false, "no CUDA streams on the CPU backend");
    assert_eq!(r["gpu_timestamps"], false);
    assert!(r["sync_timeline"].is_null() && r["interference"].is_null());
    assert!(r["stages"]["pre_ms"].is_null(), "no timestamps: the pass times are not numbers");
    let frames = r["pipelined"]["frames"].as_array().expect("per-frame times");
    assert_eq!(frames.len(), 6);
    let modes: Vec<&str> = r["modes"].as_array().expect("modes").iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(modes, expected_modes(&r, &o.stderr, false));
    assert!(r["host_naive_parts"].is_null(), "the naive round trip runs only with --host-naive");
}

/// A JSON file under the system's temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        TempFile(std::env::temp_dir().join(format!("neural-frame-{}-{name}", std::process::id())))
    }
    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }
    fn json(&self) -> serde_json::Value {
        let bytes = std::fs::read(&self.0).unwrap_or_else(|e| panic!("reading {}: {e}", self.0.display()));
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", self.0.display()))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The report's `argv` is the command line exactly as given, the program first.
fn assert_argv(r: &serde_json::Value, args: &[&str]) {
    let argv: Vec<&str> = r["argv"].as_array().expect("argv").iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(argv.len(), args.len() + 1, "{argv:?}");
    assert_eq!(argv[0], common::bin().to_str().expect("a UTF-8 path"), "the program, as it was started");
    assert_eq!(argv[1..], *args);
}

/// The renderer's own images on a device of its own, imported by fd, through the
/// ring: on lavapipe (no semaphore fds) in host-signalled mode. `--device 0` puts
/// the context on the device the renderer takes (the first), so it runs here.
#[test]
fn caller_frames_run_the_renderers_own_images_and_argv_is_recorded() {
    let file = TempFile::new("caller-frames.json");
    let args = [
        "bench",
        "--backend",
        "cpu",
        "--device",
        "0",
        "--model",
        "models/test/tiny-x2-f32.onnx",
        "--size",
        "48x32",
        "--frames",
        "7",
        "--warmup",
        "1",
        "--slots",
        "2",
        "--json-file",
        file.path(),
    ];
    let o = neural_frame(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = file.json();
    assert_argv(&r, &args);
    let c = &r["caller_frames"];
    assert_eq!(c["status"], "ran", "the mode runs where the renderer and the context share a device: {c}");
    let gpu = r["backend"]["vulkan_device"]["external_semaphore_fd"].as_bool().expect("external_semaphore_fd");
    assert_eq!(c["sync_mode"], if gpu { "gpu" } else { "host" }, "{c}");
    assert_eq!(c["images"], 3, "one more than the slots, as the pipelined mode has");
    assert!(c["warmup"].as_u64().is_some_and(|w| w >= 6), "every slot with every image first: {c}");
    assert!(c["max_difference"].as_u64().is_some_and(|d| d <= 1), "the zero-copy sync image: {c}");
    assert_eq!(c["cuda_passes"], false, "no CUDA on the CPU backend");
    assert!(c["renderer_device"].as_str().is_some_and(|d| !d.is_empty()), "{c}");
    let modes = r["modes"].as_array().expect("modes");
    let mode = |name: &str| modes.iter().find(|m| m["mode"] == name).unwrap_or_else(|| panic!("no {name}: {r}"));
    let (caller, alone) = (mode("caller frames"), mode("ort-alone"));
    assert_eq!(caller["frames"], 7);
    for k in ["median_ms", "fps", "throughput_vs_ort", "ms_per_output_megapixel"] {
        assert!(caller[k].as_f64().is_some_and(|v| v.is_finite() && v > 0.0), "caller frames' {k}: {caller}");
    }
    // Against ort-alone, as every mode is.
    let ratio = caller["fps"].as_f64().unwrap_or(f64::NAN) / alone["fps"].as_f64().unwrap_or(f64::NAN);
    let reported = caller["throughput_vs_ort"].as_f64().unwrap_or(f64::NAN);
    assert!((ratio - reported).abs() <= 1e-9 * ratio, "throughput_vs_ort {reported}, fps ratio {ratio}");
    // The table says how it ran.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("caller frames: 3 images of a renderer's own device"), "{}", text(&o));
    assert!(stdout.contains("imported by fd"), "{}", text(&o));
}

#[test]
fn several_contexts_record_argv() {
    let args = [
        "bench",
        "--backend",
        "cpu",
        "--model",
        "models/test/tiny-x2-f32.onnx",
        "--size",
        "32x16",
        "--frames",
        "4",
        "--devices",
        "0",
        "--json",
    ];
    let o = neural_frame(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_argv(&json(&o), &args);
}

/// `bench --serve --json-file`: what identifies the run, both ways as modes, and their ratio.
#[test]
fn bench_serve_writes_both_modes_and_argv() {
    let file = TempFile::new("serve.json");
    let args = [
        "bench",
        "--serve",
        "--backend",
        "cpu",
        "--model",
        "models/test/tiny-x2-f32.onnx",
        "--size",
        "32x16",
        "--frames",
        "5",
        "--warmup",
        "1",
        "--json-file",
        file.path(),
    ];
    let o = neural_frame(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = file.json();
    assert_argv(&r, &args);
    assert_eq!(r["model"], "models/test/tiny-x2-f32.onnx");
    assert_eq!(r["size"], serde_json::json!([32, 16]));
    assert_eq!(r["frames"], 5);
    assert!(r["device"]["vulkan_device"]["name"].as_str().is_some_and(|d| !d.is_empty()), "{r}");
    assert_eq!(r["device"]["backend"], "cpu");
    let modes = r["modes"].as_array().expect("modes");
    let names: Vec<&str> = modes.iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(names, ["in-process", "served"]);
    for m in modes {
        for k in ["fps", "median_ms"] {
            assert!(m[k].as_f64().is_some_and(|v| v.is_finite() && v > 0.0), "{k}: {m}");
        }
    }
    let fps = |i: usize| modes[i]["fps"].as_f64().unwrap_or(f64::NAN);
    let ratio = r["served_vs_in_process"].as_f64().unwrap_or(f64::NAN);
    assert!((ratio - fps(1) / fps(0)).abs() <= 1e-9 * ratio, "served_vs_in_process {ratio}: {r}");
    // Without --json the table goes to stdout, the JSON only to the file.
    assert!(String::from_utf8_lossy(&o.stdout).contains("per-frame overhead of the worker"), "{}", text(&o));
}

/// `--json-file -` writes the report to stdout (as `--json` does), not to a file named `-`.
#[test]
fn json_file_dash_is_stdout() {
    let dir = std::env::temp_dir().join(format!("neural-frame-bench-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("made");
    let model = common::root().join("models/test/tiny-x2-f32.onnx");
    let args = ["bench", "--backend", "cpu", "--model", model.to_str().expect("UTF-8"), "--size", "32x16"];
    let exe = common::bin();
    let more = ["--frames", "3", "--warmup", "1", "--json-file", "-"];
    let o = std::process::Command::new(exe).args(args).args(more).current_dir(&dir).output().expect("runs");
    let cwd_dash = dir.join("-").exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!cwd_dash, "a file named - was written");
    let r = json(&o);
    assert!(r["modes"].as_array().is_some_and(|m| !m.is_empty()), "{r}");
}
