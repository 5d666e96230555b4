//! Containers named end to end: the real binary on a fixture /proc tree
//! (tests/data/drm/amdgpu-dgpu: processes holding DRM memory) whose
//! processes have the cgroup files of a docker container and of the host.
//! The naming itself, from each runtime's files, is tested in
//! src/collect/containers.rs on tests/data/containers.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::Path;

const ID: &str = "3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";

#[test]
fn a_process_in_a_docker_container_has_it_in_json_and_a_host_process_has_null() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/drm/amdgpu-dgpu");
    let dir = tempfile::tempdir().unwrap();
    // A copy, so the fixture tree stays as tests/drm.rs expects it.
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&fixture)
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copied.success());
    let root = dir.path().join("amdgpu-dgpu");
    std::fs::write(
        root.join("proc/1000/cgroup"),
        format!("0::/system.slice/docker-{ID}.scope\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("proc/1200/cgroup"),
        "0::/user.slice/user-1000.slice/session-2.scope\n",
    )
    .unwrap();
    let out = Command::cargo_bin("gputaskman")
        .unwrap()
        .env("GPUTASKMAN_PROC_ROOT", root.join("proc"))
        .env("GPUTASKMAN_SYS_ROOT", root.join("sys"))
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snap: Value = serde_json::from_slice(&out.stdout).unwrap();
    let process = |pid: u64| {
        snap["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("no process {pid}"))
            .clone()
    };
    // This machine has no /var/lib/docker for the id: the name is unknown.
    assert_eq!(
        process(1000)["container"],
        json!({"runtime": "docker", "id": ID, "name": null, "pod": null, "namespace": null})
    );
    assert_eq!(process(1200)["container"], Value::Null);
}
