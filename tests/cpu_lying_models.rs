//! Models whose shapes lie about their scale (issue 25), on the CPU backend: the
//! output dims' symbols are checked by a probe run, which wins with a warning
//! where they disagree; a correct model keeps its scale without one; and ONNX
//! Runtime's shape error on a frame is said in the contract's terms. The frames
//! are compared with ONNX Runtime's CPU run (tests/common/src/contract.rs).

use std::sync::Mutex;

use common::contract;
use neural_frame::Backend;

/// Every record the library logs at info level or above, as "LEVEL message".
static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Info && m.target().starts_with("neural_frame")
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let line = format!("{} {}", r.level(), r.args());
            if r.level() <= log::Level::Warn {
                eprintln!("[{line}]");
            }
            RECORDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
        }
    }
    fn flush(&self) {}
}

/// The records that name `model` (the tests run in parallel: each filters by its model).
fn logged(model: &str) -> Vec<String> {
    static LOGGER: Capture = Capture;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    RECORDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|l| l.contains(model))
        .cloned()
        .collect()
}

#[test]
fn symbols_say_x1_model_is_x2() {
    logged("");
    contract::symbols_say_x1_model_is_x2(Backend::Cpu, logged);
}

#[test]
fn symbols_say_x2_model_is_x1() {
    logged("");
    contract::symbols_say_x2_model_is_x1(Backend::Cpu, logged);
}

#[test]
fn correct_symbols_are_checked_quietly() {
    logged("");
    contract::correct_symbols_are_checked_quietly(Backend::Cpu, logged);
}

#[test]
fn a_shape_error_on_a_frame_is_explained() {
    contract::a_shape_error_on_a_frame_is_explained(Backend::Cpu);
}
