//! The committed header, include/neural_frame.h, is what cbindgen makes of src/*.rs with
//! cbindgen.toml. `NEURAL_FRAME_BLESS=1 cargo test -p neural-frame-c --test header` rewrites it.

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

fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("capi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen reads capi/src/lib.rs and its modules");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/neural_frame.h");
    let fresh = generate();
    if std::env::var_os("NEURAL_FRAME_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("the header can be written");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let line = committed.lines().zip(fresh.lines()).position(|(a, b)| a != b).map(|n| n + 1);
        panic!(
            "{} is stale (first difference at line {}): regenerate it with \
             `NEURAL_FRAME_BLESS=1 cargo test -p neural-frame-c --test header` and commit it",
            path.display(),
            line.map_or_else(|| "the end".to_string(), |n| n.to_string()),
        );
    }
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
