//! On a machine without a GPU (CI, this project's machines) the tool still
//! runs, exits 0 and says why nothing was found.

use assert_cmd::Command;

fn has_system_nvml() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/nvidia/lib64",
    ]
    .iter()
    .any(|d| std::path::Path::new(d).join("libnvidia-ml.so.1").exists())
}

#[test]
fn once_without_a_driver_explains_why_no_gpu_was_found() {
    if has_system_nvml() {
        eprintln!("SKIPPED: this machine has an NVIDIA driver");
        return;
    }
    let out = Command::cargo_bin("gputaskman")
        .unwrap()
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--once")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("No GPU found."), "{text}");
    assert!(
        text.contains("nvml: unavailable: libnvidia-ml.so.1 not found: no NVIDIA driver is installed"),
        "{text}"
    );
}

#[test]
fn a_wrong_library_path_is_named_in_the_explanation() {
    let out = Command::cargo_bin("gputaskman")
        .unwrap()
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["devices"], serde_json::json!([]));
    assert_eq!(s["backends"][0]["name"], "nvml");
    assert_eq!(s["backends"][0]["status"], "unavailable");
    let detail = s["backends"][0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("cannot load /nonexistent/libnvidia-ml.so.1"),
        "{detail}"
    );
    // A null is not a 0: no device means no sum at all.
    assert_eq!(s["attribution"]["measured_sum_bytes"], serde_json::Value::Null);
}

#[test]
fn the_library_path_can_come_from_the_environment() {
    let out = Command::cargo_bin("gputaskman")
        .unwrap()
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/env/libnvidia-ml.so")
        .arg("--json")
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(s["backends"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/env/libnvidia-ml.so"));
}
