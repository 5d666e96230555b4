//! The DRM source end to end: the real binary on fixture /proc and /sys
//! trees (tests/data/drm), and on this machine's own.
//! The /sys root comes from `GPUTASKMAN_SYS_ROOT`, the /proc root from
//! `GPUTASKMAN_PROC_ROOT`.

mod common;

use assert_cmd::Command;
use common::{backend, notes, process};
use serde_json::{json, Value};
use std::path::PathBuf;

const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/drm")
        .join(name)
}

/// A copy of a fixture tree a test may change, so the tree stays as the
/// other tests expect it: (the folder that holds it, its root).
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture(name))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copied.success());
    let root = dir.path().join(name);
    (dir, root)
}

fn json_on(name: &str) -> Value {
    json_on_root(&fixture(name))
}

/// `--json` on the /proc and /sys trees under `root`.
fn json_on_root(root: &std::path::Path) -> Value {
    common::json_of(
        Command::cargo_bin("gputaskman")
            .unwrap()
            .env("GPUTASKMAN_PROC_ROOT", root.join("proc"))
            .env("GPUTASKMAN_SYS_ROOT", root.join("sys"))
            .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .arg("--json"),
    )
}

#[test]

fn amdgpu_discrete_card_in_json() {
    let s = json_on("amdgpu-dgpu");
    let b = backend(&s, "drm");
    assert_eq!(b["status"], "ok");
    assert_eq!(
        b["detail"],
        "1 device: amdgpu 0000:03:00.0; 4 processes with DRM clients"
    );
    let d = &s["devices"][0];
    assert_eq!(d["index"], 0);
    assert_eq!(d["backend"], "drm");
    assert_eq!(d["vendor"], "AMD");
    assert_eq!(d["pci_bus_id"], "0000:03:00.0");
    assert_eq!(d["memory_total_bytes"], 25_753_026_560u64);
    assert_eq!(d["memory_used_bytes"], 6u64 << 30);
    assert_eq!(d["shared_memory_used_bytes"], 512 * MIB);
    assert_eq!(d["gpu_util_percent"], 37);
    assert_eq!(d["memory_activity_percent"], 12);
    assert_eq!(d["temperature_c"], 45);
    assert_eq!(d["power_w"], 87.0);
    assert_eq!(d["power_limit_w"], 327.0);

    let gpu = |pid: u32| process(&s, pid)["gpu"][0].clone();
    assert_eq!(process(&s, 1000)["name"], "llama-server");
    // Client 217 is held by 1000 and its child 1001: counted to neither.
    assert_eq!(gpu(1000)["vram_bytes"], Value::Null);
    assert_eq!(gpu(1001)["vram_bytes"], 512 * MIB);
    assert_eq!(gpu(1200)["vram_bytes"], 1472 * MIB);
    assert_eq!(gpu(1200)["spill_bytes"], 128 * MIB);
    assert_eq!(gpu(1300)["vram_bytes"], 256 * MIB);
    for pid in [1000, 1001, 1200, 1300] {
        assert_eq!(gpu(pid)["source"], "drm");
        // An fd's owner is the process itself: nothing was paired.
        assert_eq!(gpu(pid)["match"], Value::Null);
    }
    // --json waits between two readings: the counters did not move.
    assert_eq!(gpu(1200)["engines"], json!({"compute": 0, "dma": 0, "gfx": 0}));
    assert!(
        notes(process(&s, 1000)).contains("held jointly by PIDs 1000, 1001"),
        "{}",
        notes(process(&s, 1000))
    );
    assert!(notes(process(&s, 1200)).contains("64.0 MiB of DRM buffers on 0000:03:00.0 (client 300) are shared"));
    assert_eq!(s["attribution"]["measured_sum_bytes"], (512 + 1472 + 256) * MIB);
    assert_eq!(
        s["attribution"]["devices"][0]["unattributed_bytes"],
        (6u64 << 30) - (512 + 1472 + 256) * MIB
    );
    assert!(s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["pid"] != 1500 && p["pid"] != 1400));
}

/// The card's health end to end: read from its gpu_metrics table, RAS
/// counters and hwmon limits (values: src/collect/drm/tests.rs).
#[test]
fn an_amdgpu_card_held_down_by_its_power_limit_says_so_in_json_and_once() {
    let s = json_on("amdgpu-dgpu");
    let h = &s["devices"][0]["health"];
    assert_eq!(h["throttle_reasons"], json!([]), "{h:#}");
    assert_eq!(h["throttle_source"], "gpu_metrics");
    assert_eq!(h["temperature_limits"]["slowdown_c"], 100);
    assert_eq!(h["power_limits"]["default_w"], 327.0);
    assert!(h["ecc"].is_null() && h["unavailable"]["ecc"].as_str().unwrap().contains("ras/"));
    let schema = common::schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&s), "{:?}", validator.iter_errors(&s).next());

    let (_dir, root) = copy_of("amdgpu-dgpu");
    let metrics = root.join("sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0/gpu_metrics");
    let mut table = std::fs::read(&metrics).unwrap();
    table[112..120].copy_from_slice(&(1u64 << 5).to_le_bytes());
    std::fs::write(&metrics, &table).unwrap();
    let s = json_on_root(&root);
    assert_eq!(s["devices"][0]["health"]["throttle_reasons"], json!(["amd_fppt"]));
    let once = Command::cargo_bin("gputaskman")
        .unwrap()
        .env("GPUTASKMAN_PROC_ROOT", root.join("proc"))
        .env("GPUTASKMAN_SYS_ROOT", root.join("sys"))
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .arg("--once")
        .output()
        .unwrap();
    let once = String::from_utf8(once.stdout).unwrap();
    assert!(once.contains("! health: throttled: fast power limit (FPPT)"), "{once}");
}

#[test]

fn an_apu_model_in_gtt_is_spill_in_json() {
    let s = json_on("amdgpu-apu");
    let p = process(&s, 2000);
    assert_eq!(p["name"], "ollama");
    assert_eq!(p["gpu"][0]["vram_bytes"], 5348 * 1024);
    assert_eq!(p["gpu"][0]["spill_bytes"], 25_258_000u64 * 1024);
    assert!(notes(p).contains("24.09 GiB of GTT/system memory on integrated GPU 0000:c4:00.0 is shown as Spill"));
}

#[test]

fn intel_xe_and_soc_trees_in_json() {
    let s = json_on("intel");
    assert_eq!(s["devices"].as_array().unwrap().len(), 2);
    assert_eq!(process(&s, 3000)["gpu"][0]["vram_bytes"], 6u64 << 30);
    assert_eq!(process(&s, 3000)["gpu"][0]["device"], 1);
    let s = json_on("xe");
    assert_eq!(s["devices"][0]["memory_total_bytes"], 12u64 << 30);
    assert_eq!(process(&s, 4000)["gpu"][0]["vram_bytes"], 23992 * 1024 - 16 * MIB);
    let s = json_on("soc");
    assert_eq!(s["devices"][1]["vendor"], "Arm");
    assert_eq!(process(&s, 5000)["gpu"][0]["spill_bytes"], 36496 * 1024);
}

#[test]

fn this_machine_without_a_drm_gpu_says_so() {
    if std::path::Path::new("/sys/class/drm").exists() {
        eprintln!("SKIPPED: this machine has /sys/class/drm");
        return;
    }
    let out = Command::cargo_bin("gputaskman")
        .unwrap()
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        *backend(&s, "drm"),
        json!({"name": "drm", "status": "unavailable", "detail": "no DRM GPU (no /sys/class/drm/card*)"})
    );
    assert!(s["devices"].as_array().unwrap().iter().all(|d| d["backend"] != "drm"));
}

/// Containers named end to end: processes of the amdgpu tree given the
/// cgroup files of a docker container and of the host. The naming from each
/// runtime's files is tested in src/collect/containers.rs on
/// tests/data/containers.
#[test]
fn a_process_in_a_docker_container_has_it_in_json_and_a_host_process_has_none() {
    const ID: &str = "3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";
    let (_dir, root) = copy_of("amdgpu-dgpu");
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
    let s = json_on_root(&root);
    // This machine has no /var/lib/docker for the id: the name is unknown.
    assert_eq!(
        process(&s, 1000)["container"],
        json!({"runtime": "docker", "id": ID, "name": null, "pod": null, "namespace": null})
    );
    assert!(process(&s, 1200).get("container").is_none(), "{s}");
}
