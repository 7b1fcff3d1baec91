//! Checks that capi/include/neural_frame.h is what cbindgen makes of capi/src/*.rs with
//! capi/cbindgen.toml, or rewrites it (`--write`). A crate outside the workspace, so that the
//! tests and builds of neural-frame do not compile cbindgen; CI (.ci/run) runs it:
//!
//! ```sh
//! cargo run --release --manifest-path capi/header/Cargo.toml            # check
//! cargo run --release --manifest-path capi/header/Cargo.toml -- --write # rewrite
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The C API crate: capi/.
fn capi() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn generate() -> Result<String, String> {
    let dir = capi();
    let config =
        cbindgen::Config::from_file(dir.join("cbindgen.toml")).map_err(|e| format!("capi/cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .map_err(|e| format!("cbindgen cannot read capi/src/lib.rs and its modules: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|_| "the header is not UTF-8".to_string())
}

fn main() -> ExitCode {
    let write = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--write") => true,
        Some(other) => {
            eprintln!("header: unknown argument {other:?} (none: check; --write: rewrite the header)");
            return ExitCode::from(2);
        }
    };
    let path = capi().join("include/neural_frame.h");
    let shown = "capi/include/neural_frame.h";
    let fresh = match generate() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("header: {e}");
            return ExitCode::FAILURE;
        }
    };
    if write {
        if let Err(e) = std::fs::write(&path, &fresh) {
            eprintln!("header: cannot write {shown}: {e}");
            return ExitCode::FAILURE;
        }
        println!("header: wrote {shown}");
        return ExitCode::SUCCESS;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == fresh {
        println!("header: {shown} is current");
        return ExitCode::SUCCESS;
    }
    let line = committed.lines().zip(fresh.lines()).position(|(a, b)| a != b).map(|n| n + 1);
    eprintln!(
        "header: {shown} is stale (first difference at line {}): rewrite it with \
         `cargo run --release --manifest-path capi/header/Cargo.toml -- --write` and commit it",
        line.map_or_else(|| "the end".to_string(), |n| n.to_string()),
    );
    ExitCode::FAILURE
}
