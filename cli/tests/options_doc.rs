//! docs/options.md is what `neural-frame <command> --help` prints for every command, so the
//! options' documentation cannot drift from the command line. `NEURAL_FRAME_BLESS=1 cargo test
//! --release -p neural-frame-cli --test options_doc` rewrites it.

use std::path::Path;
use std::process::Command;

/// Every command, in the order the README lists them.
const COMMANDS: [&str; 6] = ["run", "stream", "bench", "tune", "serve", "preflight"];

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_neural-frame"))
        .args(args)
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .expect("neural-frame runs");
    assert!(out.status.success(), "neural-frame {args:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

fn generate() -> String {
    let mut doc = String::from(
        "# Options\n\nEvery command's options, as `neural-frame <command> --help` prints them (generated: \
         `NEURAL_FRAME_BLESS=1 cargo test --release -p neural-frame-cli --test options_doc`; CI checks that \
         it is current). The README has one line for each of `run`'s; docs/commands.md says more about \
         each command.\n\n",
    );
    doc.push_str("- ");
    doc.push_str(&COMMANDS.map(|c| format!("[`{c}`](#neural-frame-{c})")).join(", "));
    doc.push_str("\n\n## `neural-frame`\n\n```text\n");
    doc.push_str(help(&[]).trim_end());
    doc.push_str("\n```\n");
    for command in COMMANDS {
        doc.push_str(&format!("\n## `neural-frame {command}`\n\n```text\n"));
        doc.push_str(help(&[command]).trim_end());
        doc.push_str("\n```\n");
    }
    doc
}

#[test]
fn options_doc_is_the_command_lines_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/options.md");
    let fresh = generate();
    if std::env::var_os("NEURAL_FRAME_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("docs/options.md can be written");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let line = committed.lines().zip(fresh.lines()).position(|(a, b)| a != b).map_or(0, |n| n + 1);
        panic!(
            "docs/options.md differs from the command line's help (first at line {line}): regenerate it with \
             `NEURAL_FRAME_BLESS=1 cargo test --release -p neural-frame-cli --test options_doc` and commit it"
        );
    }
}
