//! GPU health through the fake NVML, with real PIDs: a power cap with its
//! share of the interval, ECC and remapped rows, a card that lacks them
//! (null with a reason, never 0), an XID injected mid-run, and a GPU that
//! turns lost mid-run, in `--json`, `--once`, `/snapshot` and `/metrics`.

mod common;

use common::{device, fake_nvml, free_port, Daemon, Scenario, Sleeper};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const LLAMA_VRAM: u64 = 1_406_669_824;

/// An H100 under a power cap (38% of the time from now on) with 3
/// volatile uncorrected ECC errors and a failed row remap; a GeForce with
/// neither ECC nor remapping. `extra` is merged into the H100.
fn scenario(llama: u32, extra: Value) -> Value {
    let mut h100 = json!({
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
        "memory": {"total": 85520809984u64, "used": 2000000000u64, "free": 83520809984u64},
        "temperature_c": 86,
        "temperature_thresholds": {"slowdown": 87, "shutdown": 92},
        "power_mw": 699000,
        "power_limit_mw": 700000,
        "power_limit_constraints_mw": {"min": 200000, "max": 700000},
        "performance_state": 0,
        "ecc": {"current": true, "volatile_corrected": 0, "volatile_uncorrected": 3,
                "aggregate_corrected": 12, "aggregate_uncorrected": 3},
        "health": {
            "clock_event_reasons": 4,
            "violations": {"0": {"violation_ns": 2000000000u64, "share": 0.38},
                           "1": {"violation_ns": 0}},
            "remapped_rows": {"correctable": 2, "uncorrectable": 1, "failure": true}
        },
        "compute_processes": [{"pid": llama, "used_memory": LLAMA_VRAM}]
    });
    for (k, v) in extra.as_object().unwrap() {
        h100[k] = v.clone();
    }
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [h100, {
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
            "memory": {"total": 17171480576u64, "used": 500000000u64, "free": 16671480576u64},
            "ecc": {"current": false},
            "health": {"clock_event_reasons": 1}
        }]
    })
}

fn serve(s: &Scenario) -> Daemon {
    let port = free_port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", s.path())
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .args(["serve", "--interval", "0.3", "--listen", &format!("127.0.0.1:{port}")]);
    Daemon::start(cmd, port, Duration::from_secs(30))
}

fn get(port: u16, path: &str) -> String {
    ureq::get(&format!("http://127.0.0.1:{port}{path}"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
}

/// Polls `/snapshot` until `ok` holds, or fails naming `what`.
fn wait_for(port: u16, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let snap: Value = serde_json::from_str(&get(port, "/snapshot")).unwrap();
        if ok(&snap) {
            return snap;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{what}: {snap:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn metric_line<'a>(metrics: &'a str, start: &str) -> &'a str {
    metrics
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("{start} not in:\n{metrics}"))
}

#[test]
fn a_power_cap_ecc_and_remapped_rows_show_in_json_once_and_metrics_and_what_a_card_lacks_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let s = Scenario::new(&scenario(llama.pid(), json!({})));

    let snap = s.json(&["--json"]);
    let h = &device(&snap, 0)["health"];
    assert_eq!(h["throttle_reasons"], json!(["sw_power_cap"]), "{h:#}");
    assert_eq!(h["ecc"]["volatile_uncorrected"], 3);
    assert_eq!(h["ecc"]["aggregate_corrected"], 12);
    assert_eq!(
        h["remapped_rows"],
        json!({"correctable": 2, "uncorrectable": 1, "pending": false, "failure": true})
    );
    assert_eq!(h["performance_state"], 0);
    assert_eq!(h["power_limits"]["max_w"], 700.0);
    // One sample: the time held down is known, its share of an interval not yet.
    let power = h["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["policy"] == "power")
        .unwrap();
    assert!(power["seconds"].as_f64().unwrap() >= 2.0, "{power}");
    assert!(power["share"].is_null(), "{power}");
    // The GeForce: ECC off and no remapping are null with the reason, never 0.
    let g = &device(&snap, 1)["health"];
    assert!(
        g["ecc"].is_null() && g["remapped_rows"].is_null() && g["retired_pages"].is_null(),
        "{g:#}"
    );
    assert_eq!(g["unavailable"]["ecc"], "ECC is off");
    assert_eq!(g["unavailable"]["remapped_rows"], "not supported by this card");
    assert_eq!(g["throttle_reasons"], json!(["gpu_idle"]));
    // The snapshot still validates against the schema.
    let schema = common::schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&snap), "{:?}", validator.iter_errors(&snap).next());

    let once = String::from_utf8(s.command().arg("--once").output().unwrap().stdout).unwrap();
    assert!(
        once.contains("! health: errors: 3 uncorrected ECC errors, row remapping failed, throttled: power cap"),
        "{once}"
    );
    assert_eq!(
        once.matches("! health:").count(),
        1,
        "the idle GeForce is healthy:\n{once}"
    );

    let server = serve(&s);
    // Two samples apart, the power counter's share of the interval: 38%.
    let snap = wait_for(server.port, "a power share", |snap| {
        device(snap, 0)["health"]["violations"][0]["share"].is_number()
    });
    let share = device(&snap, 0)["health"]["violations"][0]["share"].as_f64().unwrap();
    assert!((share - 0.38).abs() < 0.05, "share {share}");
    let metrics = get(server.port, "/metrics");
    for line in [
        r#"gputaskman_device_throttle_reason{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",reason="sw_power_cap"} 1"#,
        r#"gputaskman_device_throttle_reason{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",reason="hw_thermal_slowdown"} 0"#,
        r#"gputaskman_device_ecc_errors_total{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",error="uncorrected",counter="volatile"} 3"#,
        r#"gputaskman_device_remapped_rows{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",kind="uncorrectable"} 1"#,
        r#"gputaskman_device_row_remap_failure{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000"} 1"#,
        r#"gputaskman_gpu_lost{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000"} 0"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in:\n{metrics}");
    }
    let ratio = metric_line(
        &metrics,
        r#"gputaskman_device_throttle_violation_ratio{backend="nvml",device="0","#,
    );
    assert!(ratio.contains(r#"policy="power""#), "{ratio}");
    // The GeForce has no ECC series at all, not zeros.
    assert!(
        !metrics.contains(r#"gputaskman_device_ecc_errors_total{backend="nvml",device="1""#),
        "{metrics}"
    );
}

#[test]
fn a_gpu_near_its_slowdown_temperature_is_marked_hot_and_an_implausible_threshold_is_no_fact() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let mut json = scenario(llama.pid(), json!({}));
    // The GeForce at 84 °C against an 88 °C slowdown; its driver answers 0
    // for the memory's threshold.
    json["devices"][1]["temperature_c"] = json!(84);
    json["devices"][1]["temperature_thresholds"] = json!({"slowdown": 88, "shutdown": 93, "gpu_max": 83, "mem_max": 0});
    let s = Scenario::new(&json);
    let snap = s.json(&["--json"]);
    let g = &device(&snap, 1)["health"];
    assert_eq!(
        g["temperature_limits"],
        json!({"slowdown_c": 88, "shutdown_c": 93, "gpu_max_c": 83, "memory_max_c": null}),
        "{g:#}"
    );
    assert_eq!(
        g["unavailable"]["temperature_limits.memory_max_c"],
        "the driver answered 0 °C, not a plausible threshold"
    );
    assert_eq!(
        device(&snap, 0)["health"]["unavailable"]["temperature_limits.gpu_max_c"],
        "not supported by this card"
    );
    let once = String::from_utf8(s.command().arg("--once").output().unwrap().stdout).unwrap();
    assert!(once.contains("! health: hot: 84 °C, slowdown at 88 °C"), "{once}");
    // The H100, at 86 °C against 87 °C, is throttled, which says more.
    assert!(!once.contains("hot: 86"), "{once}");
    let server = serve(&s);
    wait_for(server.port, "a sample", |snap| {
        !snap["devices"].as_array().unwrap().is_empty()
    });
    let metrics = get(server.port, "/metrics");
    assert!(
        metric_line(
            &metrics,
            r#"gputaskman_device_temperature_limit_celsius{backend="nvml",device="1",uuid="GPU-bbbbbbbb-0000-0000-0000-000000000000",limit="slowdown"}"#
        )
        .ends_with(" 88"),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"limit="memory_max""#), "{metrics}");
}

#[test]
fn an_xid_injected_mid_run_appears_within_a_refresh_with_its_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let s = Scenario::new(&scenario(llama.pid(), json!({})));
    let server = serve(&s);
    let before = wait_for(server.port, "a first sample", |snap| {
        !snap["devices"].as_array().unwrap().is_empty()
    });
    assert_eq!(device(&before, 0)["health"]["xid_count"], 0);
    let mut with_xid = scenario(llama.pid(), json!({}));
    with_xid["devices"][0]["health"]["xid_events"] = json!([79]);
    std::fs::write(s.path(), serde_json::to_vec(&with_xid).unwrap()).unwrap();
    let written = Instant::now();
    let snap = wait_for(server.port, "the XID", |snap| {
        !device(snap, 0)["health"]["xid_events"].as_array().unwrap().is_empty()
    });
    // Within one refresh (0.3 s) of a sample that read the new scenario.
    assert!(written.elapsed() < Duration::from_secs(3), "{:?}", written.elapsed());
    let xid = &device(&snap, 0)["health"]["xid_events"][0];
    assert_eq!(xid["xid"], 79);
    assert_eq!(xid["meaning"], "GPU has fallen off the bus");
    let metrics = get(server.port, "/metrics");
    assert!(
        metric_line(
            &metrics,
            r#"gputaskman_device_xid_events_total{backend="nvml",device="0""#
        )
        .ends_with(" 1"),
        "{metrics}"
    );
    // Delivered once: later samples show no new event, the count stays.
    let later = wait_for(server.port, "the next sample", |snap| {
        device(snap, 0)["health"]["xid_events"].as_array().unwrap().is_empty()
    });
    assert_eq!(device(&later, 0)["health"]["xid_count"], 1);
}

#[test]
fn a_gpu_turned_lost_mid_run_keeps_its_last_values_and_processes_marked() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let pid = llama.pid();
    let s = Scenario::new(&scenario(pid, json!({})));
    let server = serve(&s);
    wait_for(server.port, "a first sample", |snap| {
        !snap["devices"].as_array().unwrap().is_empty()
    });
    std::fs::write(
        s.path(),
        serde_json::to_vec(&scenario(pid, json!({"lost_after_calls": 0}))).unwrap(),
    )
    .unwrap();
    let snap = wait_for(server.port, "the lost GPU", |snap| {
        device(snap, 0)["health"]["lost_since"].is_string()
    });
    let d = device(&snap, 0);
    assert_eq!(d["stale"], true);
    // Its last good values, never zeros.
    assert_eq!(d["memory_used_bytes"], 2000000000u64);
    assert_eq!(d["temperature_c"], 86);
    assert!(d["errors"].to_string().contains("lost"), "{d:#}");
    // Its process is kept, with its last figure, and marked.
    let p = common::process(&snap, pid);
    assert_eq!(p["gpu"][0]["vram_bytes"], LLAMA_VRAM);
    assert!(common::notes(p).contains("GPU 0 is lost since"), "{p:#}");
    // The other GPU answers on.
    assert!(device(&snap, 1)["health"]["lost_since"].is_null());
    let metrics = get(server.port, "/metrics");
    assert!(
        metric_line(&metrics, r#"gputaskman_gpu_lost{backend="nvml",device="0""#).ends_with(" 1"),
        "{metrics}"
    );
}

/// The families the shipped alert rules read.
const RULE_INPUTS: &[&str] = &[
    "gputaskman_device_xid_events_total",
    "gputaskman_device_ecc_errors_total",
    "gputaskman_device_row_remap_failure",
    "gputaskman_gpu_lost",
    "gputaskman_device_throttle_reason",
    "gputaskman_device_memory_used_bytes",
    "gputaskman_device_memory_total_bytes",
    "gputaskman_device_temperature_celsius",
    "gputaskman_device_temperature_limit_celsius",
];

/// `name{a="x",b="y"} value` as (name, labels, value); our label values
/// hold no quote.
fn parse_sample(line: &str) -> (String, Vec<(String, String)>, String) {
    let (series, value) = line.rsplit_once(' ').unwrap();
    let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
    let labels = labels
        .trim_end_matches('}')
        .split("\",")
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once("=\"").unwrap();
            (k.to_string(), v.trim_end_matches('"').to_string())
        })
        .collect();
    (name.to_string(), labels, value.to_string())
}

#[test]
fn the_shipped_alert_rules_fire_on_a_fake_gpus_series_under_promtool() {
    let Some(promtool) = common::prometheus::tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    // The H100 96% full, under a power cap, with ECC errors, a failed
    // remap and an XID; the GeForce healthy; a third GPU lost from the start.
    let mut json = scenario(
        llama.pid(),
        json!({"memory": {"total": 85520809984u64, "used": 82099977584u64, "free": 3420832400u64}}),
    );
    json["devices"][0]["health"]["xid_events"] = json!([79]);
    json["devices"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "NVIDIA A100", "lost_after_calls": 0}));
    let s = Scenario::new(&json);
    let server = serve(&s);
    wait_for(server.port, "the XID", |snap| {
        device(snap, 0)["health"]["xid_count"] == 1
    });
    let metrics = get(server.port, "/metrics");

    // Each scraped series, on a host scraped every minute: counters are 0
    // for 5 minutes (gputaskman started before the event), then their value.
    let instance = ("instance".to_string(), "gpu-host:9464".to_string());
    let mut input = Vec::new();
    let mut samples = Vec::new();
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let (name, mut labels, value) = parse_sample(line);
        if !RULE_INPUTS.contains(&name.as_str()) {
            continue;
        }
        labels.push(instance.clone());
        let text: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        let values = if name.ends_with("_total") {
            format!("0x5 {value}x25")
        } else {
            format!("{value}x30")
        };
        input.push(json!({"series": format!("{name}{{{}}}", text.join(",")), "values": values}));
        samples.push((name, labels, value));
    }
    // What must fire at 15 minutes: each rule's series, its labels and summary.
    let one = |name: &str, device: &str, extra: Option<(&str, &str)>| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && l.iter().any(|(k, v)| k == "device" && v == device)
                    && extra.is_none_or(|(ek, ev)| l.iter().any(|(k, v)| k == ek && v == ev))
            })
            .unwrap_or_else(|| panic!("{name} of device {device} not in:\n{metrics}"))
            .clone()
    };
    let uuid = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
    let alert = |name: &str, severity: &str, labels: &[(String, String)], summary: String| {
        let mut l: serde_json::Map<String, Value> = labels
            .iter()
            .filter(|(k, _)| !["reason", "error", "counter"].contains(&k.as_str()) || name == "GPUUncorrectableECC")
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        l.insert("severity".into(), json!(severity));
        json!({"eval_time": "15m", "alertname": name,
               "exp_alerts": [{"exp_labels": l, "exp_annotations": {"summary": summary}}]})
    };
    let (_, xid, _) = one("gputaskman_device_xid_events_total", "0", None);
    let (_, ecc, _) = one(
        "gputaskman_device_ecc_errors_total",
        "0",
        Some(("error", "uncorrected")),
    );
    let ecc: Vec<_> = ecc.into_iter().collect();
    let (_, remap, _) = one("gputaskman_device_row_remap_failure", "0", None);
    let (_, lost, _) = one("gputaskman_gpu_lost", "2", None);
    let (_, throttle, _) = one(
        "gputaskman_device_throttle_reason",
        "0",
        Some(("reason", "sw_power_cap")),
    );
    let (_, memory, _) = one("gputaskman_device_memory_used_bytes", "0", None);
    let (_, temperature, _) = one("gputaskman_device_temperature_celsius", "0", None);
    let throttled = alert(
        "GPUThrottledByPowerOrHeat",
        "warning",
        &throttle,
        format!("GPU 0 ({uuid}) has been held down by power or heat for 10 minutes"),
    );
    common::prometheus::promtool_test_rules(
        &promtool,
        dir.path(),
        input,
        json!([
                alert("GPUXidError", "critical", &xid, format!("GPU 0 ({uuid}) reported an XID error")),
                alert("GPUUncorrectableECC", "critical", &ecc,
                      format!("GPU 0 ({uuid}) has 3 uncorrected ECC errors since the driver loaded")),
                alert("GPURowRemapFailure", "critical", &remap,
                      format!("GPU 0 ({uuid}) failed to remap a memory row: service the card")),
                alert("GPULost", "critical", &lost, "GPU 2 stopped answering (fell off the bus)".into()),
                throttled,
                // Not yet ten minutes held down at 8 minutes: nothing.
                {"eval_time": "8m", "alertname": "GPUThrottledByPowerOrHeat", "exp_alerts": []},
                alert("GPUMemoryNearlyFull", "warning", &memory,
                      format!("GPU 0 ({uuid}) memory is over 95% used")),
                // 86 °C against its 87 °C; the GeForce names no threshold.
                alert("GPUNearThermalSlowdown", "warning", &temperature,
                      format!("GPU 0 ({uuid}) has been within 5 °C of its slowdown temperature for 5 minutes")),
        ]),
    );
}

#[test]
fn an_nvlink_that_falls_mid_run_is_an_error_within_a_refresh_and_fires_its_alert() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let with_links = |links: Value| {
        let mut json = scenario(llama.pid(), json!({"nvlink": links}));
        // Healthy otherwise, so the link is what the mark says.
        json["devices"][0]["health"] = json!({"clock_event_reasons": 1});
        json["devices"][0]["ecc"] = json!({"current": false});
        json
    };
    // Link 3 unused by design from the start: inactive, not fallen.
    let s = Scenario::new(&with_links(json!([true, true, true, false])));
    let server = serve(&s);
    let snap = wait_for(server.port, "the links", |snap| {
        device(snap, 0)["health"]["nvlink"].is_object()
    });
    assert_eq!(
        device(&snap, 0)["health"]["nvlink"],
        json!({"active": [0, 1, 2], "inactive": [3], "went_down": []})
    );
    assert_eq!(
        device(&snap, 1)["health"]["unavailable"]["nvlink"],
        "no NVLink on this card"
    );
    assert!(device(&snap, 1)["health"]["nvlink"].is_null());

    std::fs::write(
        s.path(),
        serde_json::to_vec(&with_links(json!([true, false, true, false]))).unwrap(),
    )
    .unwrap();
    let written = Instant::now();
    wait_for(server.port, "the fallen link", |snap| {
        device(snap, 0)["health"]["nvlink"]["went_down"] == json!([1])
    });
    assert!(written.elapsed() < Duration::from_secs(3), "{:?}", written.elapsed());
    let metrics = get(server.port, "/metrics");
    let down = metric_line(
        &metrics,
        r#"gputaskman_device_nvlink_links_went_down{backend="nvml",device="0""#,
    );
    assert!(down.ends_with(" 1"), "{metrics}");
    assert!(metric_line(&metrics, r#"gputaskman_device_nvlink_links{backend="nvml",device="0",uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000",state="inactive"}"#).ends_with(" 2"));
    drop(server);
    let once = String::from_utf8(s.command().arg("--once").output().unwrap().stdout).unwrap();
    // A one-shot never saw link 1 up: inactive, not said to have fallen.
    assert!(!once.contains("NVLink"), "{once}");

    let Some(promtool) = common::prometheus::tool("promtool") else {
        return;
    };
    let (name, labels, _) = parse_sample(down);
    let text: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    let mut expected: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    expected.insert("severity".into(), json!("critical"));
    common::prometheus::promtool_test_rules(
        &promtool,
        dir.path(),
        vec![json!({"series": format!("{name}{{{}}}", text.join(",")), "values": "0x5 1x10"})],
        json!([
            {"eval_time": "3m", "alertname": "GPUNVLinkDown", "exp_alerts": []},
            {"eval_time": "8m", "alertname": "GPUNVLinkDown", "exp_alerts": [{"exp_labels": expected,
                "exp_annotations": {"summary": "GPU 0 (GPU-aaaaaaaa-0000-0000-0000-000000000000) lost 1 NVLink(s) since gputaskman started"}}]},
        ]),
    );
}

#[test]
fn diff_names_the_errors_that_are_new_between_two_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let mut calm = scenario(llama.pid(), json!({}));
    calm["devices"][0]["ecc"]["volatile_uncorrected"] = json!(0);
    calm["devices"][0]["health"] = json!({"clock_event_reasons": 1,
        "remapped_rows": {"correctable": 0, "uncorrectable": 0}});
    let before = Scenario::new(&calm).json(&["--json"]);
    let after = Scenario::new(&scenario(llama.pid(), json!({}))).json(&["--json"]);
    let (b, a) = (dir.path().join("before.json"), dir.path().join("after.json"));
    std::fs::write(&b, before.to_string()).unwrap();
    std::fs::write(&a, after.to_string()).unwrap();
    let out = assert_cmd::Command::cargo_bin("gputaskman")
        .unwrap()
        .arg("diff")
        .args([&b, &a])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{text}");
    for line in [
        "      ! health: uncorrected ECC errors (volatile): 0 -> 3 (+3)",
        "      ! health: rows remapped (uncorrectable): 0 -> 1 (+1)",
        "      ! health: row remapping failed",
        "      ! health: throttled now: power cap",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    }
    // The GeForce is as it was: nothing said of it.
    assert_eq!(text.matches("! health:").count(), 4, "{text}");
}
