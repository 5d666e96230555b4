//! The Jetson source end to end: the real binary on fixture /proc and /sys
//! trees (tests/data/jetson, written by its make_fixtures.sh from published
//! Orin and Xavier layouts), pointed at them by `GPUTASKMAN_PROC_ROOT` and
//! `GPUTASKMAN_SYS_ROOT` as the DRM tests are.

mod common;

use assert_cmd::Command;
use common::{backend, notes, process};
use serde_json::Value;
use std::path::{Path, PathBuf};

const KIB: u64 = 1 << 10;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/jetson")
        .join(name)
}

fn on_root(root: &Path) -> Command {
    let mut cmd = Command::cargo_bin("gputaskman").unwrap();
    cmd.env("GPUTASKMAN_PROC_ROOT", root.join("proc"))
        .env("GPUTASKMAN_SYS_ROOT", root.join("sys"))
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .env("GPUTASKMAN_NPU_SMI", "/nonexistent/npu-smi");
    cmd
}

fn json_on(root: &Path) -> Value {
    common::json_of(on_root(root).arg("--json"))
}

#[test]
fn an_agx_orin_gives_its_gpu_unified_memory_rails_and_nvmap_clients() {
    let s = json_on(&fixture("orin"));
    assert_eq!(backend(&s, "jetson")["status"], "ok");
    let devices = s["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{devices:?}");
    let d = &devices[0];
    assert_eq!(d["backend"], "jetson");
    assert_eq!(d["vendor"], "NVIDIA");
    assert_eq!(d["name"], "NVIDIA Jetson AGX Orin Developer Kit (integrated GPU ga10b)");
    assert_eq!(d["gpu_util_percent"], 54, "load 537 is 53.7 %");
    assert_eq!(d["clocks"]["graphics_mhz"], 918);
    assert_eq!(d["clocks"]["graphics_max_mhz"], 1300);
    assert_eq!(d["temperature_c"], 45, "gpu-thermal, not the first zone");
    assert_eq!(d["power_w"], 4.8768, "VDD_GPU_SOC: 5080 mV x 960 mA");
    // Unified memory: total is RAM, used is nvmap's total, free is unknown.
    assert_eq!(d["memory_total_bytes"], 31697608 * KIB);
    assert_eq!(d["memory_used_bytes"], 4330056 * KIB);
    assert_eq!(d["memory_free_bytes"], Value::Null);
    assert_eq!(d["shared_memory_used_bytes"], Value::Null);
    assert_eq!(d["process_list_complete"], true);
    let n = notes(d);
    assert!(n.contains("unified memory"), "{n}");
    assert!(
        n.contains("VIN_SYS_5V0 7.6 W") && n.contains("VDDQ_VDD2_1V8AO 0.5 W"),
        "{n}"
    );
    assert!(!n.contains("NC "), "unconnected channels are left out: {n}");

    let llama = process(&s, 4242);
    assert_eq!(llama["name"], "llama-server");
    assert_eq!(llama["kind"], "ai");
    assert!(
        llama["runtimes"].as_array().unwrap().iter().any(|r| r == "cudart"),
        "{llama}"
    );
    assert_eq!(llama["gpu"][0]["vram_bytes"], 4194304 * KIB);
    assert_eq!(llama["gpu"][0]["source"], "jetson");
    assert_eq!(process(&s, 1783)["gpu"][0]["vram_bytes"], 83204 * KIB);
    // A client whose process has gone: a row with a note, its bytes kept.
    let gone = process(&s, 1101);
    assert_eq!(gone["name"], Value::Null);
    assert_eq!(gone["gpu"][0]["vram_bytes"], 12288 * KIB);
    assert_eq!(
        s["attribution"]["devices"][0]["measured_sum_bytes"],
        (40260 + 83204 + 4194304 + 12288) * KIB
    );
}

#[test]
fn a_xavier_reads_its_own_names() {
    let s = json_on(&fixture("xavier"));
    let d = &s["devices"][0];
    assert_eq!(d["name"], "Jetson-AGX (integrated GPU gv11b)");
    assert_eq!(d["gpu_util_percent"], 100);
    assert_eq!(d["clocks"]["graphics_mhz"], 1377);
    assert_eq!(d["temperature_c"], 50, "GPU-therm");
    assert_eq!(d["power_w"], 28.612096, "the rail named GPU: 19024 mV x 1504 mA");
    assert_eq!(d["memory_used_bytes"], 6291456 * KIB);
    let torch = process(&s, 3001);
    assert_eq!(torch["kind"], "ai");
    assert_eq!(torch["gpu"][0]["vram_bytes"], 6291456 * KIB);
}

#[test]
fn without_debugfs_the_processes_are_unknown_and_say_why() {
    let s = json_on(&fixture("orin-no-debugfs"));
    let d = &s["devices"][0];
    assert_eq!(d["name"], "NVIDIA Jetson Orin Nano Developer Kit (integrated GPU)");
    assert_eq!(d["memory_total_bytes"], 7802108 * KIB);
    assert_eq!(
        d["memory_used_bytes"],
        Value::Null,
        "no nvmap list: used unknown, not 0"
    );
    assert_eq!(d["process_list_complete"], false);
    assert_eq!(d["gpu_util_percent"], 0, "a measured idle GPU stays 0");
    assert_eq!(d["power_w"], 2.0, "VDD_CPU_GPU_CV");
    let n = notes(d);
    assert!(
        n.contains("debugfs is not there, per-process GPU memory unknown"),
        "{n}"
    );
    assert!(
        n.contains("VDD_CPU_GPU_CV: the GPU and whatever else that rail feeds"),
        "{n}"
    );
    // The CUDA process is still listed (its runtime), with no GPU figure.
    let p = process(&s, 4242);
    assert!(p["gpu"].as_array().unwrap().is_empty(), "{p}");
    assert_eq!(s["attribution"]["devices"][0]["unattributed_bytes"], Value::Null);
}

#[test]
fn an_unmounted_or_unreadable_debugfs_is_a_note() {
    // /sys/kernel/debug is an empty folder where debugfs is not mounted;
    // git keeps no empty folder, so this tree is copied and made here.
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(status.success());
    };
    copy(&fixture("orin"), &dir.path().join("orin"));
    let root = dir.path().join("orin");
    std::fs::remove_dir_all(root.join("sys/kernel/debug/nvmap")).unwrap();
    let s = json_on(&root);
    let n = notes(&s["devices"][0]);
    assert!(n.contains("debugfs is not mounted at"), "{n}");
    assert!(n.contains("mount -t debugfs none"), "{n}");

    // Mounted, but the list is in a shape this reader does not know.
    std::fs::create_dir_all(root.join("sys/kernel/debug/nvmap/iovmm")).unwrap();
    std::fs::write(
        root.join("sys/kernel/debug/nvmap/iovmm/clients"),
        "pid=4242 bytes=1048576\n",
    )
    .unwrap();
    let s = json_on(&root);
    let d = &s["devices"][0];
    assert_eq!(d["process_list_complete"], false);
    assert!(notes(d).contains("holds no client list this reader knows"), "{d}");
    std::fs::remove_file(root.join("sys/kernel/debug/nvmap/iovmm/clients")).unwrap();

    // Mounted, but the list is not a regular file (nor readable as one).
    std::fs::create_dir_all(root.join("sys/kernel/debug/nvmap/iovmm/clients")).unwrap();
    let s = json_on(&root);
    let d = &s["devices"][0];
    assert_eq!(d["process_list_complete"], false);
    assert!(notes(d).contains("per-process GPU memory unknown"), "{d}");
}

#[test]
fn the_board_is_in_list_gpus_and_once() {
    let out = on_root(&fixture("orin")).arg("--list-gpus").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NVIDIA Jetson AGX Orin Developer Kit (integrated GPU ga10b)"),
        "{text}"
    );
    let out = on_root(&fixture("orin")).arg("--once").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("llama-server"), "{text}");
    assert!(text.contains("Jetson AGX Orin"), "{text}");
}

#[test]
fn a_machine_that_is_no_jetson_has_the_source_unavailable() {
    let s = json_on(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/drm/amdgpu-dgpu"));
    let b = backend(&s, "jetson");
    assert_eq!(b["status"], "unavailable");
    assert!(s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["backend"] != "jetson"));
}

#[test]
fn a_nano_on_jetpack_4_reads_its_iio_power_monitor() {
    let s = json_on(&fixture("nano"));
    let d = &s["devices"][0];
    assert_eq!(d["name"], "NVIDIA Jetson Nano Developer Kit (integrated GPU)");
    assert_eq!(d["gpu_util_percent"], 100, "load 998");
    assert_eq!(d["temperature_c"], 36, "GPU-therm 35.5");
    assert_eq!(d["power_w"], 2.117, "POM_5V_GPU, in mW");
    let n = notes(d);
    assert!(n.contains("POM_5V_IN 4.7 W, POM_5V_CPU 1.0 W"), "{n}");
    assert_eq!(d["memory_total_bytes"], 4051032 * KIB);
    assert_eq!(d["memory_used_bytes"], 1603584 * KIB);
    assert_eq!(process(&s, 2222)["gpu"][0]["vram_bytes"], 1572864 * KIB);
}
