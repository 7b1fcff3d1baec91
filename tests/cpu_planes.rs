//! Planar float frames in a host's pooled memory on the CPU backend (lavapipe in CI):
//! the scenarios of tests/common/src/planes.rs.

use common::planes;
use neural_frame::Backend;

#[test]
fn planar_frames_match_onnx_runtime() {
    planes::planar_frames_match_onnx_runtime(Backend::Cpu);
}

#[test]
fn bad_planes_are_refused() {
    planes::bad_planes_are_refused(Backend::Cpu);
}

#[test]
fn tiled_planar_frames_match_onnx_runtime() {
    planes::tiled_planar_frames_match_onnx_runtime(Backend::Cpu);
}
