//! The real binary and the real nvml-wrapper path against the fake NVML
//! (crates/fake-nvml): every value in a scenario must come out as given,
//! unknown as null, failures as errors.

mod common;

use common::{device, process, Scenario, Sleeper};
use serde_json::{json, Value};

const GIB: u64 = 1 << 30;
/// PIDs that no process here has (pid_max is at most 4194304).
const GONE_A: u32 = 4_190_001;
const GONE_B: u32 = 4_190_002;
const GONE_C: u32 = 4_190_003;

/// Two GPUs, five processes: two real (one on both GPUs), three that are
/// not in our /proc. GPU 1's graphics list fails.
fn desktop(llama: u32, browser: u32) -> Value {
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [
            {
                "name": "NVIDIA GeForce RTX 4080 SUPER",
                "uuid": "GPU-11111111-2222-3333-4444-555555555555",
                "pci_bus_id": "00000000:01:00.0",
                "memory": {"total": 17171480576u64, "used": 5379194880u64, "free": 11792285696u64, "reserved": 0},
                "utilization": {"gpu": 15, "memory": 30},
                "temperature_c": 37,
                "power_mw": 26000,
                "power_limit_mw": 320000,
                "fan_percent": 30,
                "clocks": {"graphics_mhz": 2505, "sm_mhz": 2505, "memory_mhz": 11501, "video_mhz": 1950},
                "max_clocks": {"graphics_mhz": 3105, "sm_mhz": 3105, "memory_mhz": 11501, "video_mhz": 2415},
                "pcie": {"gen": 4, "width": 16, "max_gen": 4, "max_width": 16, "tx_kbps": 1000, "rx_kbps": 2000},
                "compute_processes": [
                    {"pid": llama, "used_memory": 1406669824u64},
                    {"pid": GONE_A, "used_memory": 536870912u64}
                ],
                "graphics_processes": [
                    {"pid": browser, "used_memory": null},
                    {"pid": GONE_B, "used_memory": 2340421632u64}
                ],
                "process_utilization": [
                    {"pid": llama, "sm": 15, "mem": 3, "enc": 0, "dec": 0},
                    {"pid": browser, "sm": 2, "mem": 1, "enc": 0, "dec": 7}
                ]
            },
            {
                "name": "NVIDIA RTX A2000 12GB",
                "uuid": "GPU-66666666-7777-8888-9999-000000000000",
                "pci_bus_id": "00000000:02:00.0",
                "memory": {"total": 12878610432u64, "used": 2684354560u64, "free": 10194255872u64, "reserved": 0},
                "utilization": {"gpu": 0, "memory": 0},
                "power_mw": 9000,
                "compute_processes": [
                    {"pid": llama, "used_memory": 2147483648u64},
                    {"pid": GONE_C, "used_memory": null}
                ],
                "errors": {"nvmlDeviceGetGraphicsRunningProcesses_v3": 999}
            }
        ]
    })
}

struct Desktop {
    _dir: tempfile::TempDir,
    llama: Sleeper,
    browser: Sleeper,
    scenario: Scenario,
}

fn desktop_scenario() -> Desktop {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(
        dir.path(),
        "llama-server",
        &[
            "-m",
            "/models/qwen3-0.6b-q8_0.gguf",
            "--api-key",
            "sk-live-secret-value",
            "--port",
            "8080",
        ],
    );
    let browser = Sleeper::spawn(dir.path(), "firefox", &["--new-window"]);
    let scenario = Scenario::new(&desktop(llama.pid(), browser.pid()));
    Desktop {
        _dir: dir,
        llama,
        browser,
        scenario,
    }
}

#[test]
fn json_reports_every_scenario_value_null_where_unknown_and_errors_per_device() {
    let d = desktop_scenario();
    let s = d.scenario.json(&["--json"]);

    assert_eq!(s["schema_version"], 1);
    let nvml = s["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "nvml")
        .unwrap();
    assert_eq!(nvml["status"], "ok");
    assert_eq!(nvml["detail"], "2 devices, driver 580.159.03, CUDA 13.0");

    let g0 = device(&s, 0);
    assert_eq!(g0["vendor"], "NVIDIA");
    assert_eq!(g0["name"], "NVIDIA GeForce RTX 4080 SUPER");
    assert_eq!(g0["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(g0["pci_bus_id"], "00000000:01:00.0");
    assert_eq!(g0["driver_version"], "580.159.03");
    assert_eq!(g0["cuda_version"], "13.0");
    assert_eq!(g0["memory_total_bytes"], 17171480576u64);
    assert_eq!(g0["memory_used_bytes"], 5379194880u64);
    assert_eq!(g0["memory_free_bytes"], 11792285696u64);
    assert_eq!(g0["memory_reserved_bytes"], 0);
    assert_eq!(g0["gpu_util_percent"], 15);
    assert_eq!(g0["memory_activity_percent"], 30);
    assert_eq!(g0["temperature_c"], 37);
    assert_eq!(g0["power_w"], 26.0);
    assert_eq!(g0["power_limit_w"], 320.0);
    assert_eq!(g0["fan_percent"], 30);
    assert_eq!(g0["clocks"]["graphics_mhz"], 2505);
    assert_eq!(g0["clocks"]["memory_max_mhz"], 11501);
    assert_eq!(g0["pcie"]["link_gen"], 4);
    assert_eq!(g0["pcie"]["link_width"], 16);
    assert_eq!(g0["pcie"]["tx_bytes_per_s"], 1000 * 1024);
    assert_eq!(g0["pcie"]["rx_bytes_per_s"], 2000 * 1024);
    // NVML has no notion of shared memory on Linux, and no driver model.
    assert_eq!(g0["shared_memory_used_bytes"], Value::Null);
    assert_eq!(g0["driver_model"], Value::Null);
    assert_eq!(g0["process_list_complete"], true);
    assert_eq!(g0["errors"], json!([]));

    let g1 = device(&s, 1);
    assert_eq!(g1["name"], "NVIDIA RTX A2000 12GB");
    // Missing from the scenario: not supported, so null, never 0.
    assert_eq!(g1["temperature_c"], Value::Null);
    assert_eq!(g1["power_limit_w"], Value::Null);
    assert_eq!(g1["fan_percent"], Value::Null);
    assert_eq!(g1["power_w"], 9.0);
    assert_eq!(g1["gpu_util_percent"], 0);
    // The failing graphics list is an error on that device, and its
    // process list is marked incomplete rather than shown as complete.
    assert_eq!(g1["process_list_complete"], false);
    let errors = g1["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["query"], "graphics processes");
    assert!(
        errors[0]["message"].as_str().unwrap().contains("unknown")
            || errors[0]["message"].as_str().unwrap().contains("internal"),
        "{errors:?}"
    );

    // Five processes hold GPU memory (others on this machine may be listed
    // for their AI runtimes, with no GPU entry).
    let mut on_gpu: Vec<u64> = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["gpu"].as_array().unwrap().is_empty())
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    on_gpu.sort();
    let mut expected = vec![
        d.llama.pid() as u64,
        d.browser.pid() as u64,
        GONE_A as u64,
        GONE_B as u64,
        GONE_C as u64,
    ];
    expected.sort();
    assert_eq!(on_gpu, expected);
    let llama = process(&s, d.llama.pid());
    assert_eq!(llama["name"], "llama-server");
    assert_eq!(llama["kind"], "ai");
    assert_eq!(llama["runtimes"], json!(["llama.cpp"]));
    let cmdline = llama["cmdline"].as_str().unwrap();
    assert!(cmdline.contains("--api-key <redacted>"), "{cmdline}");
    assert!(!cmdline.contains("sk-live-secret-value"), "{cmdline}");
    assert!(llama["start_time"].as_str().unwrap().ends_with('Z'));
    assert!(llama["rss_bytes"].as_u64().unwrap() > 0);
    assert!(llama["cpu_percent"].is_number());
    assert!(llama["user"].is_string());
    let gpu = llama["gpu"].as_array().unwrap();
    assert_eq!(gpu.len(), 2);
    assert_eq!(gpu[0]["device"], 0);
    assert_eq!(gpu[0]["vram_bytes"], 1406669824u64);
    assert_eq!(gpu[0]["source"], "nvml");
    // NVML gave the process's own PID: nothing was paired.
    assert_eq!(gpu[0]["match"], Value::Null);
    assert_eq!(gpu[0]["contexts"], json!(["C"]));
    assert_eq!(gpu[0]["engines"], json!({"sm": 15, "mem": 3, "enc": 0, "dec": 0}));
    assert_eq!(gpu[0]["spill_bytes"], Value::Null);
    assert_eq!(gpu[1]["device"], 1);
    assert_eq!(gpu[1]["vram_bytes"], 2 * GIB);
    // Device 1 has no per-process utilization: unknown, not 0%.
    assert_eq!(gpu[1]["engines"], json!({}));

    let browser = process(&s, d.browser.pid());
    assert_eq!(browser["name"], "firefox");
    assert_eq!(browser["kind"], "browser");
    assert_eq!(
        browser["gpu"][0]["vram_bytes"],
        Value::Null,
        "NVML_VALUE_NOT_AVAILABLE is null"
    );
    assert_eq!(browser["gpu"][0]["contexts"], json!(["G"]));
    assert_eq!(browser["gpu"][0]["engines"]["dec"], 7);

    // PIDs that are not in our /proc are listed with a note, unpaired.
    for (pid, vram) in [
        (GONE_A, json!(536870912u64)),
        (GONE_B, json!(2340421632u64)),
        (GONE_C, Value::Null),
    ] {
        let p = process(&s, pid);
        assert_eq!(p["name"], Value::Null);
        assert_eq!(p["gpu"][0]["vram_bytes"], vram);
        assert_eq!(p["gpu"][0]["match"], Value::Null);
        assert!(p["notes"][0].as_str().unwrap().contains("not in this /proc"), "{p:#}");
    }

    // Only measured bytes are summed: device 0 has 1.31 + 0.5 + 2.18 GiB
    // measured (the browser's n/a is not 0 and not summed), device 1 has 2 GiB.
    let a = &s["attribution"];
    assert_eq!(
        a["devices"][0]["measured_sum_bytes"],
        1406669824u64 + 536870912 + 2340421632
    );
    assert_eq!(
        a["devices"][0]["unattributed_bytes"],
        5379194880u64 - (1406669824 + 536870912 + 2340421632)
    );
    assert_eq!(a["devices"][1]["measured_sum_bytes"], 2 * GIB);
    // Device 1's list is incomplete: what is unattributed is unknown.
    assert_eq!(a["devices"][1]["unattributed_bytes"], Value::Null);
    assert_eq!(
        a["measured_sum_bytes"],
        1406669824u64 + 536870912 + 2340421632 + 2 * GIB
    );
    assert_eq!(a["normalized"], false);

    // Rows are ordered by measured VRAM, largest first.
    let order: Vec<u64> = common::pids(&s);
    assert_eq!(order[0], d.llama.pid() as u64, "{order:?}");
}

#[test]
fn json_output_validates_against_the_printed_schema() {
    let d = desktop_scenario();
    let snapshot = d.scenario.json(&["--json"]);
    let schema = common::schema();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&snapshot)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The schema is not vacuous: a snapshot with a wrong type fails it.
    let mut broken = snapshot.clone();
    broken["devices"][0]["memory_total_bytes"] = json!("lots");
    assert!(!validator.is_valid(&broken));
}

#[test]
fn gpu_filter_keeps_one_device_and_its_processes() {
    let d = desktop_scenario();
    let s = d.scenario.json(&["--json", "--gpu", "1"]);
    let devices = s["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0]["index"], 1);
    // With --gpu, only processes on that device are listed.
    let pids: Vec<u64> = common::pids(&s);
    assert_eq!(pids, vec![d.llama.pid() as u64, GONE_C as u64]);
    assert!(s["processes"][0]["gpu"]
        .as_array()
        .unwrap()
        .iter()
        .all(|g| g["device"] == 1));

    let out = d.scenario.command().args(["--json", "--gpu", "7"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gpu 7: no such device"));
}

#[test]
fn list_gpus_prints_one_device_a_line_with_its_index() {
    let d = desktop_scenario();
    let out = d.scenario.command().arg("--list-gpus").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "0: NVIDIA GeForce RTX 4080 SUPER (GPU-11111111-2222-3333-4444-555555555555, 00000000:01:00.0, 15.99 GiB)\n\
         1: NVIDIA RTX A2000 12GB (GPU-66666666-7777-8888-9999-000000000000, 00000000:02:00.0, 11.99 GiB)\n"
    );
}

#[test]
fn once_shows_devices_processes_errors_and_redacted_commands() {
    let d = desktop_scenario();
    let out = d.scenario.command().arg("--once").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("nvml: ok: 2 devices, driver 580.159.03, CUDA 13.0"),
        "{text}"
    );
    assert!(
        text.contains("GPU 0  NVIDIA GeForce RTX 4080 SUPER  00000000:01:00.0"),
        "{text}"
    );
    assert!(text.contains("5.01 GiB used of 15.99 GiB, 10.98 GiB free"), "{text}");
    assert!(
        text.contains("gpu 15%  mem activity 30%  temp 37 °C  power 26.0 W of 320 W  fan 30%"),
        "{text}"
    );
    assert!(text.contains("temp n/a"), "device 1 has no temperature: {text}");
    assert!(text.contains("! graphics processes failed:"), "{text}");
    assert!(text.contains("the process list of this device is incomplete"), "{text}");
    let llama_line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{} ", d.llama.pid())))
        .unwrap_or_else(|| panic!("no llama row, unmarked: {text}"));
    assert!(
        llama_line.contains("llama-server") && llama_line.contains("1.31 GiB"),
        "{llama_line}"
    );
    assert!(llama_line.contains("--api-key <redacted>"), "{llama_line}");
    assert!(!text.contains("sk-live-secret-value"));
    let browser_line = text.lines().find(|l| l.contains("firefox")).unwrap();
    assert!(browser_line.contains("n/a"), "unknown VRAM shows n/a: {browser_line}");
}

#[test]
fn a_device_lost_mid_run_reports_one_error_and_null_counters() {
    let mut s = desktop(1, 1);
    s["devices"][1]["lost_after_calls"] = json!(3);
    let scenario = Scenario::new(&s);
    let snap = scenario.json(&["--json"]);
    let g1 = device(&snap, 1);
    assert_eq!(g1["memory_total_bytes"], Value::Null, "{g1:#}");
    assert_eq!(g1["process_list_complete"], false);
    let lost: Vec<&Value> = g1["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["message"].as_str().unwrap().contains("GPU is lost"))
        .collect();
    assert_eq!(lost.len(), 1, "one 'lost' error, not one per query: {g1:#}");
    // The other device is untouched.
    assert_eq!(device(&snap, 0)["memory_used_bytes"], 5379194880u64);
}

#[test]
fn thirty_two_byte_process_records_are_read_with_the_right_pids() {
    let dir = tempfile::tempdir().unwrap();
    let a = Sleeper::spawn(dir.path(), "python3", &[]);
    let b = Sleeper::spawn(dir.path(), "python3", &[]);
    let c = Sleeper::spawn(dir.path(), "python3", &[]);
    let mut s = desktop(1, 1);
    s["devices"] = json!([{
        "name": "NVIDIA A100-SXM4-40GB",
        "uuid": "GPU-a",
        "memory": {"total": 42949672960u64, "used": 6442450944u64, "free": 36507222016u64, "reserved": 0},
        "process_struct_bytes": 32,
        "compute_processes": [
            {"pid": a.pid(), "used_memory": GIB},
            {"pid": b.pid(), "used_memory": 2 * GIB},
            {"pid": c.pid(), "used_memory": 3 * GIB}
        ]
    }]);
    let scenario = Scenario::new(&s);
    let snap = scenario.json(&["--json"]);
    for (sleeper, vram) in [(&a, GIB), (&b, 2 * GIB), (&c, 3 * GIB)] {
        let p = process(&snap, sleeper.pid());
        assert_eq!(p["gpu"][0]["vram_bytes"], vram, "{p:#}");
        assert_eq!(p["gpu"][0]["match"], Value::Null);
    }
    let on_gpu = snap["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["gpu"].as_array().unwrap().is_empty())
        .count();
    assert_eq!(on_gpu, 3);
    let notes = device(&snap, 0)["notes"].as_array().unwrap().clone();
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().contains("32-byte")),
        "{notes:?}"
    );
}

#[test]
fn a_failing_nvml_init_is_an_error_line_not_a_crash() {
    let scenario = Scenario::new(&json!({"init_error": 9, "devices": []}));
    let out = scenario.command().arg("--once").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("No GPU found"), "{text}");
    assert!(
        text.contains("nvml: unavailable:") && text.contains("did not start"),
        "{text}"
    );
}

#[test]
fn drivers_without_the_v2_memory_call_get_the_v1_call() {
    let mut s = desktop(1, 1);
    // NVML_ERROR_FUNCTION_NOT_FOUND, as a driver before 510 answers.
    s["devices"][0]["errors"] = json!({"nvmlDeviceGetMemoryInfo_v2": 13});
    let snap = Scenario::new(&s).json(&["--json"]);
    let g0 = device(&snap, 0);
    assert_eq!(g0["memory_total_bytes"], 17171480576u64);
    assert_eq!(g0["memory_free_bytes"], 11792285696u64);
    // v1 has no reserved field: unknown, not 0.
    assert_eq!(g0["memory_reserved_bytes"], Value::Null);
    assert_eq!(g0["errors"], json!([]));
}

#[test]
fn a_process_list_that_grows_between_count_and_fill_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let a = Sleeper::spawn(dir.path(), "python3", &[]);
    let mut s = desktop(1, 1);
    s["devices"] = json!([{
        "name": "NVIDIA L4",
        "memory": {"total": 24152899584u64, "used": 1073741824u64, "free": 23079157760u64, "reserved": 0},
        "process_list_grows_by": 12,
        "compute_processes": [{"pid": a.pid(), "used_memory": GIB}]
    }]);
    let snap = Scenario::new(&s).json(&["--json"]);
    assert_eq!(process(&snap, a.pid())["gpu"][0]["vram_bytes"], GIB);
    let on_gpu = snap["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["gpu"].as_array().unwrap().is_empty())
        .count();
    // 12 more than the count call said: more than any fixed headroom.
    assert_eq!(on_gpu, 13);
    assert_eq!(device(&snap, 0)["process_list_complete"], true);
}

#[test]
fn no_utilization_sample_means_idle_and_a_failed_query_means_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let a = Sleeper::spawn(dir.path(), "python3", &[]);
    let mut s = desktop(1, 1);
    let one = |extra: Value| {
        let mut d = json!({
            "name": "NVIDIA L4",
            "memory": {"total": 24152899584u64, "used": 1073741824u64, "free": 23079157760u64, "reserved": 0},
            "compute_processes": [{"pid": a.pid(), "used_memory": GIB}]
        });
        d.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        d
    };
    // An empty sample list: NVML answers NOT_FOUND, every process was idle.
    s["devices"] = json!([
        one(json!({"process_utilization": []})),
        one(json!({"errors": {"nvmlDeviceGetProcessUtilization": 999}}))
    ]);
    let snap = Scenario::new(&s).json(&["--json"]);
    let gpu = process(&snap, a.pid())["gpu"].as_array().unwrap().clone();
    assert_eq!(gpu[0]["engines"], json!({"sm": 0, "mem": 0, "enc": 0, "dec": 0}));
    assert_eq!(gpu[1]["engines"], json!({}));
    let errors = device(&snap, 1)["errors"].as_array().unwrap().clone();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["query"], "process utilization");
}

#[test]
fn a_driver_call_that_hangs_costs_one_deadline_and_says_so() {
    let mut s = desktop(1, 1);
    s["devices"][1]["hang_ms"] = json!({"nvmlDeviceGetTemperature": 10000});
    let scenario = Scenario::new(&s);
    let started = std::time::Instant::now();
    let snap = scenario.json(&["--json"]);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(6), "waited {took:?}");
    let nvml = snap["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "nvml")
        .unwrap();
    assert_eq!(nvml["status"], "error");
    let detail = nvml["detail"].as_str().unwrap();
    assert!(detail.starts_with("NVML has not answered for 3."), "{detail}");
    assert!(detail.ends_with("no values yet"), "{detail}");
    // Nothing measured is made up: no devices, no sum.
    assert_eq!(snap["devices"], json!([]));
    assert_eq!(snap["attribution"]["measured_sum_bytes"], Value::Null);
}

#[test]
fn implausible_driver_values_are_unknown_with_a_note_never_facts() {
    let dir = tempfile::tempdir().unwrap();
    let a = Sleeper::spawn(dir.path(), "python3", &[]);
    let b = Sleeper::spawn(dir.path(), "python3", &[]);
    let mut s = desktop(1, 1);
    s["devices"] = json!([{
        "name": "NVIDIA H100 80GB HBM3",
        "memory": {"total": 85899345920u64, "used": 1073741824u64, "free": 96636764160u64, "reserved": 0},
        "utilization": {"gpu": 250, "memory": 30},
        "temperature_c": 4294967295u64,
        "power_mw": 300000,
        "compute_processes": [
            {"pid": a.pid(), "used_memory": 9223372036854775808u64},
            {"pid": b.pid(), "used_memory": 9223372036854775808u64}
        ],
        "process_utilization": [
            {"pid": a.pid(), "sm": 4294967295u64, "mem": 1, "enc": 0, "dec": 0},
            {"pid": b.pid(), "sm": 40, "mem": 2, "enc": 0, "dec": 0}
        ]
    }]);
    let scenario = Scenario::new(&s);
    let snap = scenario.json(&["--json"]);
    let d = device(&snap, 0);
    assert_eq!(d["gpu_util_percent"], Value::Null);
    assert_eq!(d["memory_activity_percent"], 30);
    assert_eq!(d["temperature_c"], Value::Null);
    assert_eq!(d["memory_free_bytes"], Value::Null);
    assert_eq!(d["memory_used_bytes"], 1073741824u64);
    assert_eq!(d["power_w"], 300.0);
    let notes = d["notes"].to_string();
    assert!(
        notes.contains("gpu 250%") && notes.contains("temperature 4294967295 C"),
        "{notes}"
    );
    // Two processes of 2^63 bytes each: neither is a fact, so nothing sums
    // to "0 B" by wrapping.
    for pid in [a.pid(), b.pid()] {
        assert_eq!(process(&snap, pid)["gpu"][0]["vram_bytes"], Value::Null);
    }
    assert_eq!(process(&snap, a.pid())["gpu"][0]["engines"], json!({}));
    assert_eq!(process(&snap, b.pid())["gpu"][0]["engines"]["sm"], 40);
    assert_eq!(snap["attribution"]["measured_sum_bytes"], Value::Null);
    assert_eq!(snap["attribution"]["normalized"], false);
    let once = scenario.command().arg("--once").output().unwrap();
    let text = String::from_utf8_lossy(&once.stdout);
    assert!(text.contains("gpu n/a  mem activity 30%  temp n/a"), "{text}");
    assert!(text.contains("processes: n/a measured"), "{text}");
}

#[test]
fn ppid_is_the_parent_and_user_keeps_only_that_users_processes() {
    let d = desktop_scenario();
    let all = d.scenario.json(&["--json"]);
    let llama = process(&all, d.llama.pid());
    assert_eq!(llama["ppid"], json!(std::process::id()), "{llama}");
    let me = llama["user"].as_str().expect("our own process has a user").to_string();
    // The PIDs of no process here have no user: --user leaves them out.
    // (Other AI processes of this user on the machine may be listed too.)
    let mine = d.scenario.json(&["--json", "--user", &me]);
    let listed = mine["processes"].as_array().unwrap();
    assert!(listed.iter().all(|p| p["user"] == json!(me)), "{mine}");
    let pids: Vec<u64> = listed.iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    for pid in [d.llama.pid(), d.browser.pid()] {
        assert!(pids.contains(&u64::from(pid)), "{pid} missing: {mine}");
    }
    assert!(all["processes"].as_array().unwrap().len() > pids.len());
    // The devices are the whole devices' still.
    assert_eq!(mine["devices"], all["devices"]);
    // A user the system knows who runs none of them (a name it does not
    // know is an error: tests/cli_usage.rs).
    let nobody = d.scenario.json(&["--json", "--user", "nobody"]);
    assert_eq!(nobody["processes"], json!([]));
    let text = d
        .scenario
        .command()
        .args(["--once", "--user", "nobody"])
        .output()
        .unwrap();
    assert!(text.status.success());
    assert!(!String::from_utf8_lossy(&text.stdout).contains("llama-server"));
    let unknown = d
        .scenario
        .command()
        .args(["--once", "--user", "no-such-user-here"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn a_one_shot_measures_cpu_over_its_stated_window_with_every_thread_counted() {
    // The main thread waits while a second one spins: a clock of the main
    // thread alone (/proc/PID/schedstat) says 0 %; 10 ms ticks over a
    // window this short say 0 %, 100 % or 200 %, never in between.
    let mut busy = std::process::Command::new("python3")
        .args([
            "-c",
            "import threading\nt = threading.Thread(target=lambda: [None for _ in iter(int, 1)])\nt.start(); t.join()",
        ])
        .spawn()
        .expect("python3");
    let dir = tempfile::tempdir().unwrap();
    let idle = Sleeper::spawn(dir.path(), "idle", &[]);
    let mut s = desktop(1, 1);
    s["devices"] = json!([{
        "name": "NVIDIA A100-SXM4-40GB",
        "uuid": "GPU-a",
        "memory": {"total": 42949672960u64, "used": 3 * GIB, "free": 39728447488u64, "reserved": 0},
        "compute_processes": [
            {"pid": busy.id(), "used_memory": GIB},
            {"pid": idle.pid(), "used_memory": 2 * GIB}
        ]
    }]);
    let scenario = Scenario::new(&s);
    // Past python's start-up, so it spins.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let snaps: Vec<Value> = (0..5).map(|_| scenario.json(&["--json"])).collect();
    busy.kill().ok();
    busy.wait().ok();
    let mut readings = Vec::new();
    for snap in &snaps {
        let window = snap["cpu_window_seconds"].as_f64().expect("the window is stated");
        assert!((0.050..5.0).contains(&window), "window {window} s");
        assert_eq!(
            process(snap, idle.pid())["cpu_percent"],
            0.0,
            "an idle process used no CPU"
        );
        readings.push(process(snap, busy.id())["cpu_percent"].as_f64().expect("measured"));
    }
    // One thread spins: at most one core, and one scheduler tick (4 ms at
    // HZ=250, when the kernel adds a running thread's time) over the window.
    assert!(readings.iter().all(|c| (0.0..=110.0).contains(c)), "{readings:?}");
    assert!(
        readings.iter().any(|c| *c > 0.0),
        "the spinning thread is counted: {readings:?}"
    );
    // The schema names the field.
    let schema = common::schema();
    assert!(
        schema["properties"]["cpu_window_seconds"].is_object(),
        "{:#}",
        schema["properties"]
    );
}

#[test]
fn a_gpu_process_whose_name_says_nothing_still_has_its_libraries_read() {
    // The system's shell with a library named libcudart preloaded: its
    // name and folder say nothing, so the scan defers its maps, and NVML
    // naming it must bring them back for this one snapshot.
    let dir = tempfile::tempdir().unwrap();
    let lib = common::library_named(dir.path(), "libcudart.so.12");
    let mut shell = std::process::Command::new("/bin/sh")
        .args(["-c", "read _"])
        .env("LD_PRELOAD", &lib)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let mut s = desktop(1, 1);
    s["devices"] = json!([{
        "name": "NVIDIA A100-SXM4-40GB",
        "uuid": "GPU-a",
        "memory": {"total": 42949672960u64, "used": GIB, "free": 41875931136u64, "reserved": 0},
        "compute_processes": [{"pid": shell.id(), "used_memory": GIB}]
    }]);
    let scenario = Scenario::new(&s);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let snap = scenario.json(&["--json"]);
    shell.kill().ok();
    shell.wait().ok();
    let p = process(&snap, shell.id());
    assert_eq!(p["runtimes"], json!(["cudart"]), "{p:#}");
    assert!(
        !p["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("maps")),
        "{p:#}"
    );
}
