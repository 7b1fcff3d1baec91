//! `neural-frame serve` on lavapipe: the CPU backend, host-signalled mode
//! (lavapipe has external memory fds but no external semaphore fds), the whole
//! protocol, its faults, and the client crate.

use common::serve;
use neural_frame_client::{SyncMode, SyncPreference};

#[test]
fn frames_match_onnx_runtime_in_host_mode() {
    serve::frames_match_onnx_runtime("cpu", SyncPreference::Auto, SyncMode::Host);
}

#[test]
fn faults_get_an_error_and_the_worker_keeps_serving() {
    serve::faults_get_an_error_and_the_worker_keeps_serving("cpu");
}

#[test]
fn bad_descriptors_get_an_error_and_the_worker_keeps_serving() {
    serve::bad_descriptors_get_an_error_and_the_worker_keeps_serving("cpu");
}

#[test]
fn render_example_matches_onnx_runtime() {
    serve::render_example_matches_onnx_runtime("cpu", 2);
}

#[test]
fn socket_mode_and_peer_check() {
    serve::socket_mode_and_peer_check("cpu");
}

#[test]
fn client_killed_mid_frame_releases_everything() {
    serve::client_killed_mid_frame_releases_everything("cpu");
}

#[test]
fn worker_killed_mid_frame_leaves_the_device_usable() {
    serve::worker_killed_mid_frame_leaves_the_device_usable("cpu");
}

#[test]
fn two_clients_with_different_sizes() {
    serve::two_clients_with_different_sizes("cpu");
}

#[test]
fn a_thousand_frames_stay_flat() {
    serve::a_thousand_frames_stay_flat("cpu");
}

#[test]
fn sigint_drains_and_tells_the_clients() {
    serve::sigint_drains_and_tells_the_clients("cpu");
}

#[test]
fn client_crate_dependency_tree() {
    serve::client_crate_dependency_tree();
}

#[test]
fn six_frames_equal_the_in_process_run() {
    serve::three_hundred_frames_equal_the_in_process_run_n(neural_frame::Backend::Cpu, "cpu", SyncMode::Host, 6);
}

/// `bench --serve` runs both ways and reports finite numbers (the timing itself is the benchmark's, not the test's).
#[test]
fn bench_serve_reports_both_ways() {
    let _serial = serve::serial();
    let out = common::neural_frame(
        &[
            "bench",
            "--serve",
            "--backend",
            "cpu",
            "--model",
            serve::F32,
            "--size",
            "32x16",
            "--frames",
            "5",
            "--warmup",
            "1",
            "--json",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let j = common::json(&out);
    assert_eq!(j["sync_mode"], "host", "{j}");
    assert_eq!(j["output"], serde_json::json!([64, 32]));
    for way in ["in_process", "served"] {
        for k in ["sync_median_ms", "pipelined_fps"] {
            let v = j[way][k].as_f64().unwrap_or(f64::NAN);
            assert!(v.is_finite() && v > 0.0, "{way}.{k} = {v}: {j}");
        }
    }
    assert!(j["overhead_ms"].as_f64().is_some_and(f64::is_finite), "{j}");
}

#[test]
fn pixel_values_keep_the_contract() {
    serve::pixel_values_keep_the_contract("cpu");
}

#[test]
fn protocol_doc_examples_are_true() {
    serve::protocol_doc_examples_are_true();
}

/// SIGTERM while the worker sets itself up (the model checked, a trial context
/// built, before it listens): exit code 0, as once it serves, within a second.
#[test]
fn sigterm_while_setting_up_ends_serve_at_once() {
    let socket = std::env::temp_dir().join(format!("nf-serve-setup-{}.sock", std::process::id()));
    let args = ["serve", "--backend", "cpu", "--model", "models/test/tiny-x2-f32.onnx", "--socket"];
    let args: Vec<&str> = args.into_iter().chain([socket.to_str().unwrap_or("")]).collect();
    // As soon as it catches the signal: it is setting up.
    let (code, took, stderr) = common::sigterm_when(&args, common::catches_sigterm);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(took < std::time::Duration::from_secs(1), "{took:?}: {stderr}");
    assert!(stderr.contains("interrupted"), "not during the set-up: {stderr}");
    assert!(!socket.exists(), "the socket is left behind: {stderr}");
}
