//! Every byte of a discovered server: a real llama.cpp server (xllamacpp,
//! CPU build, Gemma 3 270M) whose PID a fake-NVML RTX 4090 lists with 1 GiB
//! of device memory. Its own log puts every buffer in host memory, so the
//! reconciliation must say the device parts are 0 as reported, the CUDA
//! context is an estimate, and the rest is unexplained and large, value by
//! value, in `--json` (valid against the schema) and `--once`. Needs
//! GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh sets
//! them); without them that test says SKIPPED and passes. A second test
//! gives a stand-in process a CUDA build's log on its stderr: its device
//! buffers are the parts, its host buffers are left out, value by value.

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
    let parts = parts_of(r);
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

/// A process named llama-server whose stderr is a log with a CUDA build's
/// buffer lines (the capture the product is modelled on: Qwen3-0.6B Q8_0,
/// -c 4096), waiting on its stdin; killed when dropped.
struct LoggedServer {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

const CUDA_LOG: &str = "\
load_tensors: offloaded 29/29 layers to GPU
load_tensors:        CUDA0 model buffer size =   604.15 MiB
load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
llama_context:  CUDA_Host  output buffer size =     0.58 MiB
llama_kv_cache:        CUDA0 KV buffer size =   448.00 MiB
sched_reserve:      CUDA0 compute buffer size =   300.75 MiB
sched_reserve:  CUDA_Host compute buffer size =    16.01 MiB
";

impl LoggedServer {
    fn start() -> LoggedServer {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("llama-server");
        std::os::unix::fs::symlink("/bin/sh", &exe).unwrap();
        let log = dir.path().join("llama.log");
        std::fs::write(&log, CUDA_LOG).unwrap();
        let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf/qwen3-0.6b-shape.gguf");
        let child = std::process::Command::new(&exe)
            .args(["-c", "read _", "llama-server", "-m"])
            .arg(&model)
            .args(["-c", "4096"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .spawn()
            .unwrap();
        LoggedServer { child, _dir: dir }
    }
}

impl Drop for LoggedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_cuda_servers_logged_device_buffers_are_its_parts_and_host_buffers_are_not() {
    let server = LoggedServer::start();
    let pid = server.child.id();
    let measured = 1700 * MIB;
    let mut scenario = rtx_4090(pid);
    scenario["devices"][0]["compute_processes"][0]["used_memory"] = json!(measured);
    let s = Scenario::new(&scenario).json(&["--json"]);
    let p = common::process(&s, pid);
    let rows = p["reconciliation"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{p:#}");
    let r = &rows[0];
    let mib = |x: f64| (x * MIB as f64).round() as u64;
    let figures: Vec<(&str, u64, &str)> = parts_of(r).into_iter().map(|(k, b, p, _)| (k, b, p)).collect();
    // CPU_Mapped weights, the pinned CUDA_Host output and compute buffers
    // are system RAM: not in the device's equation.
    assert_eq!(
        figures,
        [
            ("weights", mib(604.15), "reported"),
            ("kv", 448 * MIB, "reported"),
            ("compute", mib(300.75), "reported"),
            ("output", 0, "reported"),
            ("context", 256 * MIB, "estimated"),
        ]
    );
    let reported = mib(604.15) + 448 * MIB + mib(300.75);
    assert_eq!(r["reported_bytes"], reported);
    assert_eq!(r["estimated_bytes"], 256 * MIB);
    assert_eq!(r["unexplained_bytes"], measured - reported - 256 * MIB);
    assert_eq!(r["large"], false);
    assert_eq!(r["likely_causes"], json!([]));
}

/// A reconciliation row's parts as (kind, bytes, provenance, source).
fn parts_of(r: &Value) -> Vec<(&str, u64, &str, &str)> {
    r["parts"]
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
        .collect()
}
