//! The y4m container's unit tests (cli/src/y4m_tests.rs). The CLI's binary has no
//! unit-test target (its test executable would be named like the library's), so the
//! module is compiled here on its own.

#[allow(dead_code)]
#[path = "../src/y4m.rs"]
mod y4m;
