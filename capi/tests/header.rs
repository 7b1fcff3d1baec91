//! The committed header, include/neural_frame.h, declares every entry point of src/*.rs.
//! That it is what cbindgen makes of them is checked by `capi/header` (CI runs it; a crate of
//! its own, so that the tests do not build cbindgen).

use std::path::{Path, PathBuf};

/// The crate's sources: src/lib.rs first, then its modules by name. cbindgen reads lib.rs
/// and the modules it declares, each file as it is (it expands no macros, so every entry
/// point is written out).
fn sources() -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: Vec<PathBuf> = std::fs::read_dir(&src)
        .expect("capi/src is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("lib.rs"))
        .collect();
    modules.sort();
    std::iter::once(src.join("lib.rs")).chain(modules).collect()
}

/// Every entry point of src/*.rs is in the header, and none is made by a macro (cbindgen
/// would not see it).
#[test]
fn header_declares_every_entry_point() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src: String = sources().iter().map(|p| std::fs::read_to_string(p).expect("a source is readable")).collect();
    assert!(!src.contains("macro_rules!"), "capi/src defines a macro: cbindgen does not expand macros");
    let header = std::fs::read_to_string(dir.join("include/neural_frame.h")).expect("the header is readable");
    let names: Vec<&str> = src.split("extern \"C\" fn ").skip(1).filter_map(|rest| rest.split('(').next()).collect();
    assert!(names.len() >= 70, "only {} entry points found: {names:?}", names.len());
    for name in names {
        assert!(header.contains(&format!("{name}(")), "{name} is not declared in the header");
    }
}
