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

fn header() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/neural_frame.h"))
        .expect("the header is readable")
}

/// Each function's declaration in the header with the comment above it.
fn declarations(header: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = header.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with(['/', ' ', '#', '*', '}']) || line.starts_with("typedef") {
            continue;
        }
        let Some(open) = line.find('(') else { continue };
        let name: String = line[..open]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.starts_with("nf_") {
            continue;
        }
        let doc: Vec<&str> = lines[..i].iter().rev().take_while(|l| l.starts_with("//")).copied().collect();
        let doc = doc.into_iter().rev().collect::<Vec<_>>().join("\n");
        out.push((name, doc));
    }
    out
}

/// Every function's comment in the header says which status codes it returns ("Status:"),
/// naming codes that exist.
#[test]
fn every_function_lists_its_status_codes() {
    let header = header();
    let decls = declarations(&header);
    assert!(decls.len() >= 75, "only {} declarations found", decls.len());
    let names: Vec<&str> = decls.iter().map(|(n, _)| n.as_str()).collect();
    for name in sources().iter().flat_map(|p| std::fs::read_to_string(p).ok()).flat_map(|s| {
        s.split("extern \"C\" fn ").skip(1).filter_map(|r| r.split('(').next()).map(str::to_string).collect::<Vec<_>>()
    }) {
        assert!(names.contains(&name.as_str()), "{name}: no declaration with its comment found in the header");
    }
    for (name, doc) in &decls {
        assert!(doc.contains("// Status:"), "{name}: its comment has no `Status:` paragraph:\n{doc}");
        for code in
            doc.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("NF_STATUS_"))
        {
            assert!(header.contains(&format!("  {code} = ")), "{name} names {code}, which nf_status lacks");
        }
    }
}

/// The version macros and functions are capi/Cargo.toml's version.
#[test]
fn the_version_macros_follow_cargo_toml() {
    let header = header();
    let version = env!("CARGO_PKG_VERSION");
    assert!(header.contains(&format!("#define NF_VERSION \"{version}\"")), "NF_VERSION is not {version}");
    let part = |s: &str| s.parse::<u32>().expect("a number");
    let (major, minor, patch) = (
        part(env!("CARGO_PKG_VERSION_MAJOR")),
        part(env!("CARGO_PKG_VERSION_MINOR")),
        part(env!("CARGO_PKG_VERSION_PATCH")),
    );
    for (name, value) in [
        ("NF_VERSION_MAJOR", major),
        ("NF_VERSION_MINOR", minor),
        ("NF_VERSION_PATCH", patch),
        ("NF_VERSION_NUMBER", major * 1_000_000 + minor * 1000 + patch),
    ] {
        assert!(header.contains(&format!("#define {name} {value}\n")), "{name} is not {value}");
    }
    use neural_frame_c::*;
    assert_eq!((NF_VERSION_MAJOR, NF_VERSION_MINOR, NF_VERSION_PATCH), (major, minor, patch));
    assert_eq!(nf_version_number(), NF_VERSION_NUMBER);
    // SAFETY: a static NUL-terminated string.
    assert_eq!(unsafe { std::ffi::CStr::from_ptr(nf_version()) }.to_str(), Ok(version));
}

/// Every struct that starts with `struct_size` has its init macro, and every init macro names
/// such a struct.
#[test]
fn every_versioned_struct_has_an_init_macro() {
    let header = header();
    let mut versioned = Vec::new();
    let mut rest = header.as_str();
    while let Some(at) = rest.find("typedef struct nf_") {
        let body = &rest[at..];
        let name: String = body["typedef struct ".len()..].chars().take_while(|c| *c != ' ').collect();
        let first_field = body.lines().skip(1).find(|l| !l.trim_start().starts_with("//")).unwrap_or("");
        if first_field.trim() == "uint32_t struct_size;" {
            versioned.push(name);
        }
        rest = &body[1..];
    }
    assert!(versioned.len() >= 11, "versioned structs: {versioned:?}");
    for name in &versioned {
        let init = format!("#define {}_INIT NF_STRUCT_INIT({name})", name.to_uppercase());
        assert!(header.contains(&init), "no `{init}`");
    }
    assert_eq!(header.matches("_INIT NF_STRUCT_INIT(").count(), versioned.len(), "a macro for another struct");
}

/// The C names the library's Rust names are translated into exist in the header.
#[test]
fn the_translated_names_are_the_headers() {
    let header = header();
    for (rust, c) in neural_frame_c::rust_to_c_names() {
        for word in c.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')) {
            if word.starts_with("nf_") || word.starts_with("NF_") {
                assert!(header.contains(word), "{rust} becomes {c}, but the header has no {word}");
            }
        }
    }
}
