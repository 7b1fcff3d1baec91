//! The C API from C: tests/upscale.c, compiled with the system `cc` against
//! include/neural_frame.h and linked with the cdylib this test build made, runs the ×2
//! test model on the CPU backend (lavapipe, ONNX Runtime's CPU provider); its output
//! equals the library's own `infer` within 1 of 255. Also: the header compiles alone as
//! C11 and as C++17 with -Wall -Wextra -Werror.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The C compiler, or None (the test then says so and passes).
fn compiler(name: &str) -> Option<&str> {
    let found = Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: no `{name}` on this machine, so the C API is not tested from C/C++ here");
    }
    found.then_some(name)
}

/// The directory of libneural_frame_c.so: the cdylib of this test build, beside the
/// test's own deps/ directory (target/<profile>/), else in deps/.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its path");
    let deps = exe.parent().expect("the test's directory");
    let name = format!("{}neural_frame_c{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let candidates = [deps.parent().map(Path::to_path_buf), Some(deps.to_path_buf())];
    candidates.into_iter().flatten().find(|dir| dir.join(&name).is_file()).unwrap_or_else(|| {
        panic!("{name} is not beside {} nor in its parent: cargo builds the cdylib with the tests", deps.display())
    })
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn header_compiles_alone_as_c11_and_cpp17() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi-header");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let source = "#include \"neural_frame.h\"\nint main(void) { return NF_STATUS_OK; }\n";
    for (tool, std, file) in [("cc", "-std=c11", "alone.c"), ("c++", "-std=c++17", "alone.cpp")] {
        let Some(tool) = compiler(tool) else { continue };
        std::fs::write(dir.join(file), source).expect("the source is written");
        run(Command::new(tool)
            .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-I"])
            .arg(include_dir())
            .arg(dir.join(file)));
    }
}

#[test]
fn c_program_upscales_like_infer() {
    let Some(cc) = compiler("cc") else { return };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capi-c-program");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let lib = library_dir();
    let exe = dir.join("upscale");
    run(Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(include_dir())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upscale.c"))
        .arg("-L")
        .arg(&lib)
        .arg("-lneural_frame_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe));

    let (width, height) = (37, 23);
    let picture = common::picture(width, height);
    let (input, output) = (dir.join("in.rgba"), dir.join("out.rgba"));
    std::fs::write(&input, &picture).expect("the input is written");
    let _ = std::fs::remove_file(&output);
    let model = common::tiny_model();
    let out = run(Command::new(&exe)
        .arg(&model)
        .arg("cpu")
        .arg(width.to_string())
        .arg(height.to_string())
        .arg(&input)
        .arg(&output)
        .current_dir(common::root()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    for line in ["backend=cpu", "scale=2x2", "output=74x46", "ok"] {
        assert!(stdout.lines().any(|l| l == line), "the program did not print {line}:\n{stdout}");
    }
    let got = std::fs::read(&output).expect("the program wrote its output");
    let want = common::reference(&model, width, height, &picture);
    common::assert_close(&got, &want, "the C program's output against the library's infer");
}
