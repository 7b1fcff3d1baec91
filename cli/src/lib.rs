//! The parts of the `neural-frame` command line that stand on their own, as a library for
//! its tests: the YUV4MPEG2 container of `neural-frame stream`, and its threaded copy of a
//! frame out of the read-back staging.

pub mod copy;
pub mod y4m;
