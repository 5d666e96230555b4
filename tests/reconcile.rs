//! Every byte of a discovered server: a real llama.cpp server (xllamacpp,
//! CPU build, Gemma 3 270M) whose PID a fake-NVML RTX 4090 lists with 1 GiB
//! of device memory. Its own log puts every buffer in host memory, so the
//! reconciliation must say the device parts are 0 as reported, the CUDA
//! context is an estimate, and the rest is unexplained and large, value by
//! value, in `--json` (valid against the schema) and `--once`. Needs
//! GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh sets
//! them); without them the test says SKIPPED and passes.

mod common;

use common::Scenario;
use serde_json::{json, Value};

const MIB: u64 = 1 << 20;
const MEASURED: u64 = 1 << 30;

fn rtx_4090(pid: u32) -> Value {
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4090",
            "uuid": "GPU-44444444-0000-0000-0000-000000004090",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 25757220864u64, "used": 2147483648u64, "free": 23609737216u64, "reserved": 0},
            "utilization": {"gpu": 3, "memory": 1},
            "compute_processes": [{"pid": pid, "used_memory": MEASURED}],
            "graphics_processes": []
        }]
    })
}

#[test]
fn a_real_servers_measured_vram_is_set_against_its_parts_and_the_rest_is_named() {
    let (Some(python), Some(model)) = (common::test_python(), common::gemma_gguf()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = common::llama_server(&python, &model, &log, &["-c", "4096"]);
    let scenario = Scenario::new(&rtx_4090(server.pid()));
    let s = scenario.json(&["--json"]);

    let errors: Vec<String> = jsonschema::validator_for(&common::schema())
        .expect("the schema compiles")
        .iter_errors(&s)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    let p = common::process(&s, server.pid());
    // The runtime's own figures, every one in system RAM.
    let buffers = p["models"][0]["reported"]["buffers"].as_array().unwrap();
    assert!(buffers.len() >= 5, "{p:#}");
    assert!(buffers.iter().all(|b| b["device_memory"] == false), "{p:#}");

    // llama.cpp's own breakdown table: the one its --fit dry run printed at
    // start is a projection; the allocation's comes at exit, so a running
    // server has none yet (and none of an earlier run is taken for it).
    let breakdown = &p["models"][0]["reported"]["memory_breakdown"];
    assert_eq!(breakdown["projected"]["rows"][0]["device"], "Host", "{p:#}");
    assert!(
        breakdown["projected"]["rows"][0]["model_mib"].as_u64().unwrap() >= 200,
        "{breakdown:#}"
    );
    assert_eq!(breakdown["allocated"], Value::Null, "{breakdown:#}");

    let rows = p["reconciliation"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{p:#}");
    let r = &rows[0];
    assert_eq!(r["device"], 0);
    assert_eq!(r["measured_bytes"], MEASURED);
    assert_eq!(r["measured_source"], "nvml");
    assert_eq!(r["match"], "exact");
    let source = format!("log:{}", log.display());
    let parts: Vec<(&str, u64, &str, &str)> = r["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["kind"].as_str().unwrap(),
                x["bytes"].as_u64().unwrap(),
                x["provenance"].as_str().unwrap(),
                x["source"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        parts[..4],
        [
            ("weights", 0, "reported", source.as_str()),
            ("kv", 0, "reported", source.as_str()),
            ("compute", 0, "reported", source.as_str()),
            ("output", 0, "reported", source.as_str()),
        ]
    );
    assert_eq!(parts[4].0, "context");
    assert_eq!(parts[4].1, 256 * MIB);
    assert_eq!(parts[4].2, "estimated");
    assert_eq!(parts.len(), 5);
    assert_eq!(r["missing"], json!([]));
    assert_eq!(r["reported_bytes"], 0);
    assert_eq!(r["estimated_bytes"], 256 * MIB);
    assert_eq!(r["unexplained_bytes"], MEASURED - 256 * MIB);
    assert_eq!(r["large"], true);
    let first = r["likely_causes"][0].as_str().unwrap();
    assert!(first.contains("every buffer in host memory"), "{r:#}");

    let once = scenario.command().arg("--once").output().unwrap();
    let text = String::from_utf8_lossy(&once.stdout);
    assert!(
        text.contains(
            "GPU 0 memory: measured 1.00 GiB (nvml) = weights 0 B reported + KV 0 B reported + compute 0 B reported + output 0 B reported + context 256.0 MiB estimated + unexplained +768.0 MiB"
        ),
        "{text}"
    );
    assert!(
        text.contains("large rest; likely: the runtime's log puts every buffer in host memory"),
        "{text}"
    );
}
