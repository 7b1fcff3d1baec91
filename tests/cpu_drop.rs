//! Dropping contexts with frames in flight on the CPU backend. In a test binary
//! of its own: the open-fd count is process-wide, and other tests running in
//! parallel would move it.

use neural_frame::Backend;

#[test]
fn dropping_a_context_with_frames_in_flight_neither_hangs_nor_leaks() {
    let (before, after) =
        common::pipeline::drop_in_flight("models/test/tiny-x2-f32.onnx", Backend::Cpu, common::pipeline::plain, 10);
    assert_eq!(before, after, "file descriptors leaked");
}
