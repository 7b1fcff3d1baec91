//! The command line's own surface: what it says about itself and how it refuses bad
//! arguments. (The commands' behaviour is tested from the workspace root's tests/, which
//! run this binary; cargo builds it for them because this package has an integration test.)

use std::process::Command;

fn neural_frame(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_neural-frame")).args(args).output().expect("the binary runs")
}

#[test]
fn version_is_the_packages() {
    let out = neural_frame(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.trim(), format!("neural-frame {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn help_lists_the_commands_and_backends() {
    let out = neural_frame(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for command in ["run", "bench", "preflight", "serve"] {
        assert!(text.lines().any(|l| l.trim_start().starts_with(command)), "{command} missing from:\n{text}");
    }
    let out = neural_frame(&["run", "--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[possible values: auto, cuda, cpu]"), "{text}");
}

#[test]
fn an_unknown_backend_is_refused_with_the_choices() {
    let out = neural_frame(&["run", "--backend", "metal"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("invalid value 'metal'") && text.contains("auto, cuda, cpu"), "{text}");
}
