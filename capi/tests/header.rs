//! The committed header, include/neural_frame.h, is what cbindgen makes of src/lib.rs with
//! cbindgen.toml. `NEURAL_FRAME_BLESS=1 cargo test -p neural-frame-c --test header` rewrites it.

use std::path::Path;

fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("capi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen reads capi/src/lib.rs");
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

/// Every entry point of src/lib.rs is in the header.
#[test]
fn header_declares_every_entry_point() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(dir.join("src/lib.rs")).expect("src/lib.rs is readable");
    let header = std::fs::read_to_string(dir.join("include/neural_frame.h")).expect("the header is readable");
    let names: Vec<&str> = src.split("extern \"C\" fn ").skip(1).filter_map(|rest| rest.split('(').next()).collect();
    assert!(names.len() >= 15, "only {} entry points found: {names:?}", names.len());
    for name in names {
        assert!(header.contains(&format!("{name}(")), "{name} is not declared in the header");
    }
}
