//! Run as an unprivileged user: another user's processes whose maps and
//! file descriptors cannot be read are listed with what can be read and a
//! note, never an error screen, and nothing needs root for the basics.

mod common;

use common::{process, Sleeper};
use std::process::Command;

/// The user the binary runs as: `nobody`.
const NOBODY: &str = "65534";

fn can_drop_privileges() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(root && setpriv) {
        eprintln!("SKIPPED: needs root and setpriv to run the binary as another user");
    }
    root && setpriv
}

#[test]
fn another_users_ai_process_is_listed_with_what_can_be_read() {
    if !can_drop_privileges() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/qwen3-0.6b-shape.gguf");
    let server = Sleeper::spawn(
        dir.path(),
        "llama-server",
        &["-m", model, "-c", "4096", "--api-key", "k-secret-1"],
    );
    let out = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
        .arg(assert_cmd::cargo::cargo_bin("gputaskman"))
        .arg("--json")
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = process(&s, server.pid());
    assert_eq!(p["name"], "llama-server");
    assert_eq!(p["user"], "root");
    assert_eq!(p["kind"], "ai");
    assert_eq!(p["runtimes"], serde_json::json!(["llama.cpp"]));
    // The command line is world-readable, and still redacted.
    let cmdline = p["cmdline"].as_str().unwrap();
    assert!(
        cmdline.contains("--api-key <redacted>") && !cmdline.contains("k-secret-1"),
        "{cmdline}"
    );
    let notes = p["notes"].to_string();
    assert!(
        notes.contains("memory maps not readable (permission denied)"),
        "{notes}"
    );
    assert!(notes.contains("file descriptors not readable"), "{notes}");
    // Unknown is not absent: no claim that the model is not mapped.
    assert!(!notes.contains("not memory-mapped"), "{notes}");
    let m = &p["models"][0];
    assert_eq!(m["path"], model);
    assert_eq!(m["evidence"], serde_json::json!(["cmdline"]));
    assert_eq!(m["estimate"]["kv_bytes"], 448u64 << 20);
}
