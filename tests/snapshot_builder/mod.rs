//! Builds snapshots from the library's real types for the diff and record
//! tests, and runs the real binary on them.
#![allow(dead_code)] // each test binary uses its own subset

use gputaskman::snapshot::{Device, GpuUsage, Model, ModelEstimate, ModelReported, Process, Snapshot};
use serde_json::json;
use std::path::{Path, PathBuf};

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// An empty snapshot taken at `taken_at` (RFC 3339).
pub fn snapshot(taken_at: &str) -> Snapshot {
    serde_json::from_value(json!({
        "schema_version": 1,
        "taken_at": taken_at,
        "host": {"hostname": "test", "os": "linux", "wsl": false, "container": false},
        "backends": [{"name": "nvml", "status": "ok", "detail": "test"}],
        "devices": [],
        "processes": [],
        "attribution": {"normalized": false, "devices": []},
    }))
    .expect("a snapshot from the real types")
}

/// An NVML device with a name, identity and memory.
pub fn device(index: u32, name: &str, uuid: Option<&str>, bus: Option<&str>, used: Option<u64>) -> Device {
    Device {
        index,
        backend: "nvml".into(),
        vendor: "nvidia".into(),
        name: Some(name.into()),
        uuid: uuid.map(Into::into),
        pci_bus_id: bus.map(Into::into),
        memory_total_bytes: Some(24 * GIB),
        memory_used_bytes: used,
        memory_free_bytes: used.map(|u| 24 * GIB - u),
        process_list_complete: true,
        ..Device::default()
    }
}

/// A process with a name and start time, no memory yet.
pub fn process(pid: u32, name: &str, start_time: &str) -> Process {
    serde_json::from_value(json!({
        "pid": pid,
        "name": name,
        "start_time": start_time,
        "user": "alice",
        "cmdline": name,
        "kind": "ai",
        "runtimes": ["cuda"],
        "gpu": [],
        "models": [],
        "models_pending": false,
        "notes": [],
    }))
    .expect("a process from the real types")
}

/// Measured VRAM of a process on device `index`.
pub fn gpu(index: u32, vram: Option<u64>) -> GpuUsage {
    serde_json::from_value(json!({
        "device": index,
        "vram_bytes": vram,
        "source": "nvml",
        "match": "exact",
        "contexts": ["C"],
        "engines": {},
    }))
    .expect("a GPU usage from the real types")
}

/// A llama.cpp server's model on `port`, with its estimate and report.
pub fn server_model(port: u16, context: u64, kv: u64, blind: u64) -> Model {
    Model {
        path: Some("/models/gemma-3-270m-q4_k_m.gguf".into()),
        name: Some("gemma-3-270m".into()),
        architecture: Some("gemma3".into()),
        kind: Some("llm".into()),
        evidence: vec!["api".into(), "mapped".into()],
        confirmed: true,
        context: Some(context),
        slots_total: Some(1),
        server_url: Some(format!("http://127.0.0.1:{port}")),
        estimate: Some(ModelEstimate {
            weights_bytes: Some(241 * MIB),
            kv_bytes: Some(kv),
            kv_bytes_without_window: Some(blind),
            ..ModelEstimate::default()
        }),
        reported: Some(ModelReported {
            kv_bytes: Some(kv),
            source: "log:/tmp/server.log".into(),
            ..ModelReported::default()
        }),
        ..Model::default()
    }
}

/// Writes `s` as `gputaskman --json` does (pretty) into `dir/name`.
pub fn write(dir: &Path, name: &str, s: &Snapshot) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(s).unwrap()).unwrap();
    path
}

/// The real binary.
pub fn bin() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("gputaskman").unwrap();
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .timeout(std::time::Duration::from_secs(120));
    cmd
}

/// Runs the binary with `args`; returns stdout, failing on a non-zero exit.
pub fn run_ok(args: &[&std::ffi::OsStr]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `gputaskman diff BEFORE AFTER --json`, parsed.
pub fn diff_json(before: &Path, after: &Path) -> serde_json::Value {
    let out = run_ok(&[
        "diff".as_ref(),
        before.as_os_str(),
        after.as_os_str(),
        "--json".as_ref(),
    ]);
    serde_json::from_str(&out).expect("diff --json prints JSON")
}

/// `gputaskman diff BEFORE AFTER` (text).
pub fn diff_text(before: &Path, after: &Path) -> String {
    run_ok(&["diff".as_ref(), before.as_os_str(), after.as_os_str()])
}
