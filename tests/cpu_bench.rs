//! `neural-frame bench` on the CPU backend: every mode runs and reports.

mod common;

use common::{json, neural_frame, text};

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
    assert_eq!(modes, ["ort-alone", "zero-copy sync", "zero-copy pipelined", "host pinned", "host naive"]);
    // The competent host path computes the zero-copy path's image (the bench checks it and says so).
    assert_eq!(r["host_pinned_max_difference"], 0, "{r}");
    assert!(r["host_naive_parts"]["run_ms"].as_f64().is_some_and(|v| v > 0.0), "{r}");
    for m in r["modes"].as_array().expect("modes") {
        assert!(m["median_ms"].as_f64().is_some_and(|v| v > 0.0), "{m}");
        assert!(m["fps"].as_f64().is_some_and(|v| v > 0.0), "{m}");
    }
    assert!(r["time_to_first_frame_ms"].as_f64().is_some_and(|v| v > 0.0));
    assert_eq!(r["output_size"], serde_json::json!([128, 72]));
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
            "1",
        ],
        &[],
    );
    assert_eq!(table.status.code(), Some(0), "{}", text(&table));
    assert!(String::from_utf8_lossy(&table.stdout).contains("zero-copy pipelined"), "{}", text(&table));
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
    assert_eq!(modes, ["ort-alone", "zero-copy sync", "zero-copy pipelined", "host pinned"]);
    assert!(r["host_naive_parts"].is_null(), "the naive round trip runs only with --host-naive");
}
