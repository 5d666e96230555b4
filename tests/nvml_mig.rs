//! MIG through the real binary and the fake NVML: an A100 in MIG mode with
//! a 3g.40gb and a 2g.20gb instance, a process in each, and a second GPU
//! without MIG with a process of its own.

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{device, fake_nvml, process, Scenario, Sleeper};
use serde_json::{json, Value};
use std::time::Duration;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

struct Machine {
    _dir: tempfile::TempDir,
    trainer: Sleeper,
    server: Sleeper,
    render: Sleeper,
    scenario: Scenario,
}

fn machine() -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let trainer = Sleeper::spawn(dir.path(), "python3", &["train.py"]);
    let server = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/models/a.gguf"]);
    let render = Sleeper::spawn(dir.path(), "blender", &["-b"]);
    let scenario = Scenario::new(&json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA A100-SXM4-80GB",
            "uuid": "GPU-a1a1a1a1-0000-0000-0000-000000000000",
            "pci_bus_id": "00000000:07:00.0",
            "memory": {"total": 80 * GIB, "used": 8 * GIB, "free": 72 * GIB},
            "temperature_c": 41, "power_mw": 90000, "power_limit_mw": 400000,
            "mig_mode": {"current": 1, "pending": 1},
            "max_mig_device_count": 7,
            "compute_processes": [
                {"pid": trainer.pid(), "used_memory": 2 * GIB, "gpu_instance_id": 1, "compute_instance_id": 0},
                {"pid": server.pid(), "used_memory": 5 * GIB, "gpu_instance_id": 2, "compute_instance_id": 0}
            ],
            "graphics_processes": [],
            // As for a caller without the privilege NVML's aggregate lists
            // need: the instances' own lists still answer.
            "errors": {
                "nvmlDeviceGetComputeRunningProcesses_v3": 4,
                "nvmlDeviceGetGraphicsRunningProcesses_v3": 4
            },
            "mig_devices": [
                {"gpu_instance_id": 1, "compute_instance_id": 0,
                 "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
                 "uuid": "MIG-11111111-1111-1111-1111-111111111111",
                 "memory": {"total": 40 * GIB, "used": 2 * GIB + 20 * MIB, "free": 38 * GIB - 20 * MIB}},
                {"gpu_instance_id": 2, "compute_instance_id": 0,
                 "name": "NVIDIA A100-SXM4-80GB MIG 2g.20gb",
                 "uuid": "MIG-22222222-2222-2222-2222-222222222222",
                 "memory": {"total": 20 * GIB, "used": 5 * GIB + 12 * MIB, "free": 15 * GIB - 12 * MIB}}
            ]
        }, {
            "name": "NVIDIA L4",
            "uuid": "GPU-l4l4l4l4-0000-0000-0000-000000000000",
            "pci_bus_id": "00000000:41:00.0",
            "memory": {"total": 24 * GIB, "used": GIB, "free": 23 * GIB},
            "utilization": {"gpu": 30, "memory": 5},
            "compute_processes": [],
            "graphics_processes": [{"pid": render.pid(), "used_memory": 512 * MIB}],
            "process_utilization": [{"pid": render.pid(), "sm": 30, "mem": 5}]
        }]
    }));
    Machine {
        _dir: dir,
        trainer,
        server,
        render,
        scenario,
    }
}

fn indices(s: &Value) -> Vec<u64> {
    s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["index"].as_u64().unwrap())
        .collect()
}

#[test]
fn each_instance_is_a_device_under_its_gpu_with_its_own_memory_and_processes() {
    let m = machine();
    let s = m.scenario.json(&["--json"]);
    // The GPU, its instances right after it, then the next GPU; instances
    // are numbered after every GPU, so GPU 1 stays NVML's index 1.
    assert_eq!(indices(&s), vec![0, 2, 3, 1]);

    let a100 = device(&s, 0);
    assert_eq!(a100["parent"], Value::Null);
    assert_eq!(a100["mig"], Value::Null);
    assert_eq!(a100["memory_total_bytes"], 80 * GIB, "the whole card's totals are kept");
    assert_eq!(a100["memory_used_bytes"], 8 * GIB);
    assert_eq!(a100["temperature_c"], 41);
    assert_eq!(a100["power_w"], 90.0);
    assert_eq!(a100["process_list_complete"], true);
    assert_eq!(a100["errors"], json!([]), "the aggregate lists are not asked");

    for (index, gi, profile, uuid, total, used) in [
        (
            2,
            1,
            "3g.40gb",
            "MIG-11111111-1111-1111-1111-111111111111",
            40 * GIB,
            2 * GIB + 20 * MIB,
        ),
        (
            3,
            2,
            "2g.20gb",
            "MIG-22222222-2222-2222-2222-222222222222",
            20 * GIB,
            5 * GIB + 12 * MIB,
        ),
    ] {
        let d = device(&s, index);
        assert_eq!(d["parent"], 0, "{d}");
        assert_eq!(
            d["mig"],
            json!({"gpu_instance_id": gi, "compute_instance_id": 0, "profile": profile})
        );
        assert_eq!(d["uuid"], uuid);
        assert_eq!(d["memory_total_bytes"], total);
        assert_eq!(d["memory_used_bytes"], used);
        // NVML has no utilization, temperature or power per instance.
        for unknown in [
            "gpu_util_percent",
            "memory_activity_percent",
            "temperature_c",
            "power_w",
        ] {
            assert_eq!(d[unknown], Value::Null, "{unknown} of instance {index}");
        }
        assert_eq!(d["process_list_complete"], true);
        assert_eq!(d["driver_version"], "580.159.03");
    }

    for (pid, on, vram) in [
        (m.trainer.pid(), 2, 2 * GIB),
        (m.server.pid(), 3, 5 * GIB),
        (m.render.pid(), 1, 512 * MIB),
    ] {
        let gpu = &process(&s, pid)["gpu"];
        assert_eq!(gpu.as_array().unwrap().len(), 1, "pid {pid}: {gpu}");
        assert_eq!(gpu[0]["device"], on, "pid {pid}");
        assert_eq!(gpu[0]["vram_bytes"], vram, "pid {pid}");
        // The PID is the process's own: no pairing was made.
        assert_eq!(gpu[0]["match"], serde_json::Value::Null);
    }
    // Per-process utilization: n/a in MIG mode, measured on the L4.
    assert_eq!(process(&s, m.trainer.pid())["gpu"][0]["engines"], json!({}));
    assert_eq!(process(&s, m.render.pid())["gpu"][0]["engines"]["sm"], 30);

    // The GPU's sum holds its instances' processes; the total counts each once.
    let attribution = &s["attribution"];
    let of = |index: u64| {
        attribution["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["device"] == index)
            .unwrap()
            .clone()
    };
    assert_eq!(of(0)["measured_sum_bytes"], 7 * GIB);
    assert_eq!(of(0)["unattributed_bytes"], GIB);
    assert_eq!(of(2)["measured_sum_bytes"], 2 * GIB);
    assert_eq!(of(2)["unattributed_bytes"], 20 * MIB);
    assert_eq!(of(3)["unattributed_bytes"], 12 * MIB);
    assert_eq!(attribution["measured_sum_bytes"], 7 * GIB + 512 * MIB);
}

#[test]
fn list_gpus_and_once_name_instances_under_their_gpu() {
    let m = machine();
    let out = m.scenario.command().arg("--list-gpus").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "0: NVIDIA A100-SXM4-80GB (GPU-a1a1a1a1-0000-0000-0000-000000000000, 00000000:07:00.0, 80.00 GiB)\n\
         \x20 0/1: NVIDIA A100-SXM4-80GB MIG 3g.40gb (MIG-11111111-1111-1111-1111-111111111111, n/a, 40.00 GiB)\n\
         \x20 0/2: NVIDIA A100-SXM4-80GB MIG 2g.20gb (MIG-22222222-2222-2222-2222-222222222222, n/a, 20.00 GiB)\n\
         1: NVIDIA L4 (GPU-l4l4l4l4-0000-0000-0000-000000000000, 00000000:41:00.0, 24.00 GiB)\n"
    );

    let out = m.scenario.command().arg("--once").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\nGPU 0  NVIDIA A100-SXM4-80GB"), "{text}");
    assert!(
        text.contains("\n  MIG 0/1 3g.40gb  NVIDIA A100-SXM4-80GB MIG 3g.40gb"),
        "{text}"
    );
    assert!(text.contains("\n  MIG 0/2 2g.20gb  "), "{text}");
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&m.server.pid().to_string()))
        .unwrap_or_else(|| panic!("no row for the server: {text}"));
    assert!(row.contains(" 0/2 "), "the GPU column names the instance: {row}");
}

#[test]
fn gpu_selects_one_instance_or_a_gpu_with_its_instances() {
    let m = machine();
    let s = m.scenario.json(&["--json", "--gpu", "0/2"]);
    assert_eq!(indices(&s), vec![3]);
    let pids: Vec<u64> = common::pids(&s);
    assert_eq!(pids, vec![m.server.pid() as u64]);

    let s = m.scenario.json(&["--json", "--gpu", "0"]);
    assert_eq!(indices(&s), vec![0, 2, 3]);
    assert_eq!(s["processes"].as_array().unwrap().len(), 2);

    let s = m.scenario.json(&["--json", "--gpu", "1"]);
    assert_eq!(indices(&s), vec![1]);

    let out = m.scenario.command().args(["--json", "--gpu", "0/5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gpu 0/5: no such device"));
    let out = m.scenario.command().args(["--json", "--gpu", "0/x"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a malformed choice is a usage error");
}

#[test]
fn the_live_view_nests_instances_under_their_gpu() {
    let Some(tmux) = tmux_path() else { return };
    let m = machine();
    let t = Tmux::new(tmux, "mig");
    t.start(&format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {} --interval 0.5 --no-discovery; sleep 600",
        m.scenario.path().display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
    ));
    // One line per device (four of them), words apart by any spaces.
    let spaced = |s: &str| {
        s.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let s = t.wait_for("the devices", Duration::from_secs(15), |s| {
        let s = spaced(s);
        s.contains("MIG 0/2 2g.20gb") && s.contains("GPU 1 NVIDIA L4")
    });
    let indented = s.lines().any(|l| l.starts_with("  MIG 0/1"));
    let s = spaced(&s);
    let line_of = |what: &str| {
        s.lines()
            .position(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what} not on screen: {s}"))
    };
    let (gpu, first, second, next) = (
        line_of("GPU 0 NVIDIA A100-SXM4-80GB"),
        line_of("MIG 0/1 3g.40gb"),
        line_of("MIG 0/2 2g.20gb"),
        line_of("GPU 1 NVIDIA L4"),
    );
    assert!(gpu < first && first < second && second < next, "{s}");
    assert!(indented, "indented: {s}");
    // `g` picks the GPU, then its first instance: only its process is left.
    t.keys(&["g", "g"]);
    let s = t.wait_for("instance 0/1 alone", Duration::from_secs(10), |s| {
        s.contains("on GPU 0/1")
    });
    let pids = |s: &str, pid: u32| s.lines().any(|l| l.split_whitespace().next() == Some(&pid.to_string()));
    assert!(pids(&s, m.trainer.pid()), "{s}");
    assert!(!pids(&s, m.server.pid()) && !pids(&s, m.render.pid()), "{s}");
}

#[test]
fn mig_devices_that_cannot_be_listed_are_an_error_and_never_a_complete_list() {
    let m = machine();
    let mut scenario: Value = serde_json::from_slice(&std::fs::read(m.scenario.path()).unwrap()).unwrap();
    scenario["devices"][0]["errors"]["nvmlDeviceGetMigDeviceHandleByIndex"] = json!(999);
    let broken = Scenario::new(&scenario);
    let s = broken.json(&["--json"]);
    assert_eq!(indices(&s), vec![0, 1], "no instance is made up");
    let a100 = device(&s, 0);
    let queries: Vec<&str> = a100["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["query"].as_str().unwrap())
        .collect();
    // The GPU is then read whole: its aggregate lists refuse this caller.
    assert_eq!(
        queries,
        vec!["mig devices", "compute processes", "graphics processes"],
        "{a100}"
    );
    assert_eq!(a100["process_list_complete"], false);
    assert_eq!(a100["memory_used_bytes"], 8 * GIB);
    let of_a100 = s["attribution"]["devices"][0].clone();
    assert_eq!(
        of_a100["unattributed_bytes"],
        Value::Null,
        "not 'used by no listed process'"
    );
}

#[test]
fn a_model_fits_against_the_freest_instance_never_the_partitioned_gpu() {
    let m = machine();
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf/qwen3-0.6b-shape.gguf");
    let model = model.to_str().unwrap();
    // The A100 has 72 GiB free as a whole, but a process gets one instance:
    // 0/1 with 38 GiB less 20 MiB is the roomiest place, ahead of the L4's 23.
    let j = m.scenario.json(&["model", model, "--ctx", "4096", "--json"]);
    assert_eq!(j["gpu"]["name"], "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "{}", j["gpu"]);
    assert_eq!(j["fit"]["free_bytes"], 38 * GIB - 20 * MIB);
    let j = m
        .scenario
        .json(&["model", model, "--ctx", "4096", "--json", "--gpu", "0/2"]);
    assert_eq!(j["gpu"]["name"], "NVIDIA A100-SXM4-80GB MIG 2g.20gb");
    let j = m
        .scenario
        .json(&["model", model, "--ctx", "4096", "--json", "--gpu", "1"]);
    assert_eq!(j["gpu"]["name"], "NVIDIA L4");
}
