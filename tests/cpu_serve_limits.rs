//! `neural-frame serve` against clients that misbehave (issue 25) on lavapipe
//! (the CPU backend, host mode): a stalled hand-over, a session stuck in a
//! driver call, SIGTERM while one is stuck, idle clients at `--max-clients`, a
//! flood of unanswered Submits, memory files shorter than the driver maps, a
//! client racing its slot memory from a second thread (100 hand-overs, and
//! 1,000 in an ignored test that CI runs), the worker's memory after 15 bursts
//! of 60 clients (ignored, CI runs it), and models refused at start. Scenarios in tests/common/src/serve_limits.rs.

use common::serve::limits;

#[test]
fn a_stalled_hand_over_frees_its_place() {
    limits::a_stalled_hand_over_frees_its_place("cpu");
}

#[test]
fn a_session_stuck_in_a_driver_call_is_abandoned() {
    limits::a_session_stuck_in_a_driver_call_is_abandoned("cpu");
}

#[test]
fn sigterm_does_not_wait_for_a_stuck_session() {
    limits::sigterm_does_not_wait_for_a_stuck_session("cpu");
}

#[test]
fn idle_clients_are_ended_after_the_idle_timeout() {
    limits::idle_clients_are_ended_after_the_idle_timeout("cpu");
}

#[test]
fn a_flood_of_submits_is_bounded() {
    limits::a_flood_of_submits_is_bounded("cpu");
}

#[test]
fn memory_files_shorter_than_the_driver_maps_are_refused() {
    limits::memory_files_shorter_than_the_driver_maps_are_refused("cpu");
}

#[test]
fn a_client_racing_its_slot_memory_cannot_end_the_worker() {
    limits::a_client_racing_its_slot_memory_cannot_end_the_worker("cpu", 100);
}

/// The same for 1,000 hand-overs (about a minute): CI runs it (.ci/run).
#[test]
#[ignore = "about a minute: run by CI, or with --ignored"]
fn a_client_racing_its_slot_memory_a_thousand_times_cannot_end_the_worker() {
    limits::a_client_racing_its_slot_memory_cannot_end_the_worker("cpu", 1000);
}

/// 15 bursts of 60 clients (about a minute): CI runs it (.ci/run).
#[test]
#[ignore = "about a minute: run by CI, or with --ignored"]
fn worker_memory_comes_back_after_a_thousand_clients() {
    limits::worker_memory_comes_back_after_bursts("cpu", 15, 60);
}

#[test]
fn models_refused_for_every_frame_stop_the_worker_at_start() {
    limits::models_refused_for_every_frame_stop_the_worker_at_start("cpu");
}
