//! The Ascend source end to end: the real binary runs a stand-in `npu-smi`
//! (a shell script named by `GPUTASKMAN_NPU_SMI`) that prints a recorded
//! `npu-smi info` (tests/data/ascend), hangs, or fails.

mod common;

use assert_cmd::Command;
use common::{backend, device, process, Sleeper};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// The PID the recorded outputs name; replaced by a live process's.
const RECORDED_PID: &str = "1712733";

/// A stand-in `npu-smi` in `dir` that runs `body` (sh).
fn stand_in(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("npu-smi");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

/// A stand-in that prints the recorded output `name`, its process rows
/// naming `pid` (right-padded to the recorded PID's width, as npu-smi pads);
/// for `info -t usages -i N`, the recorded `NAME.usages-N.txt`, or a failure
/// as from a driver without it.
fn recorded(dir: &Path, name: &str, pid: u32) -> PathBuf {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ascend");
    let text = std::fs::read_to_string(data.join(name))
        .unwrap()
        .replace(RECORDED_PID, &format!("{pid:<7}"));
    let out = dir.join(format!("{name}.out"));
    std::fs::write(&out, text).unwrap();
    let usages = data.join(name.trim_end_matches(".txt"));
    let body = format!(
        r#"[ "$1" = info ] || exit 2
if [ "$2" = -t ]; then
  [ "$3" = usages ] && [ -f '{usages}.usages-'"$5"'.txt' ] && exec cat '{usages}.usages-'"$5"'.txt'
  echo 'Error: the parameter -t usages is invalid.' >&2
  exit 1
fi
cat '{out}'"#,
        usages = usages.display(),
        out = out.display()
    );
    stand_in(dir, &body)
}

fn gputaskman(npu_smi: &Path) -> Command {
    let mut cmd = Command::cargo_bin("gputaskman").unwrap();
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .env("GPUTASKMAN_NPU_SMI", npu_smi)
        .timeout(Duration::from_secs(60));
    cmd
}

fn json(npu_smi: &Path) -> Value {
    common::json_of(gputaskman(npu_smi).arg("--json"))
}

/// The Ascend devices of a snapshot (the machine may have others).
fn ascend_devices(s: &Value) -> Vec<&Value> {
    s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["backend"] == "ascend")
        .collect()
}

#[test]
fn a_910b3_of_driver_24_1_gives_chips_hbm_and_the_process_memory() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Sleeper::spawn(dir.path(), "python3", &["train.py"]);
    let s = json(&recorded(dir.path(), "910b3-24.1.rc1.txt", worker.pid()));
    let b = backend(&s, "ascend");
    assert_eq!(b["status"], "ok", "{b}");
    assert_eq!(b["detail"], "npu-smi 24.1.rc1.b030: 2 chip(s)");
    let chips = ascend_devices(&s);
    assert_eq!(chips.len(), 2);
    let first = chips[0]["index"].as_u64().unwrap() as u32;
    let d = device(&s, first);
    assert_eq!(d["vendor"], "Huawei");
    assert_eq!(d["name"], "Ascend 910B3");
    assert_eq!(d["pci_bus_id"], "0000:C1:00.0");
    assert_eq!(d["driver_version"], "24.1.rc1.b030");
    assert_eq!(d["memory_total_bytes"], 65536 * MIB);
    assert_eq!(d["memory_used_bytes"], 52314 * MIB);
    assert_eq!(d["gpu_util_percent"], 37);
    assert_eq!(d["temperature_c"], 43);
    assert_eq!(d["power_w"], 101.8);
    assert_eq!(d["process_list_complete"], true);
    assert_eq!(d["memory_activity_percent"], 41, "-t usages: HBM Bandwidth Usage Rate");
    assert_eq!(chips[1]["memory_activity_percent"], 0, "a measured 0 stays 0");
    let p = process(&s, worker.pid());
    assert_eq!(p["name"], "python3");
    let gpu = &p["gpu"].as_array().unwrap()[0];
    assert_eq!(gpu["device"], first);
    assert_eq!(gpu["source"], "ascend");
    assert_eq!(gpu["vram_bytes"], 48954 * MIB);
    let a = s["attribution"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["device"] == first)
        .unwrap();
    assert_eq!(a["measured_sum_bytes"], 48954 * MIB);
    assert_eq!(a["unattributed_bytes"], (52314 - 48954) * MIB);
}

#[test]
fn a_310p3_without_hbm_and_with_unknown_values_stays_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Sleeper::spawn(dir.path(), "python3", &["infer.py"]);
    let s = json(&recorded(dir.path(), "310p3-23.0.0.txt", worker.pid()));
    let chips = ascend_devices(&s);
    assert_eq!(chips.len(), 3, "a Duo card is two chips, then one more card");
    assert_eq!(chips[0]["memory_total_bytes"], 44280 * MIB);
    assert_eq!(chips[0]["power_w"], Value::Null, "NA is null, never 0");
    assert_eq!(chips[2]["power_w"], 15.4);
    assert_eq!(
        chips[0]["memory_activity_percent"], 51,
        "DDR bandwidth where there is no HBM"
    );
    assert_eq!(
        chips[1]["memory_activity_percent"], 3,
        "the Duo's second chip, its own block"
    );
    let notes = chips[2]["notes"].to_string();
    assert!(notes.contains("npu-smi health: Warning"), "{notes}");
    // NPU 1 answers no -t usages here: unknown, and why.
    assert_eq!(chips[2]["memory_activity_percent"], Value::Null);
    assert!(
        notes.contains("memory bandwidth unknown: npu-smi info -t usages -i 1:"),
        "{notes}"
    );
    assert!(notes.contains("the parameter -t usages is invalid"), "{notes}");
    let gpu = &process(&s, worker.pid())["gpu"].as_array().unwrap()[0];
    assert_eq!(gpu["device"], chips[0]["index"]);
    assert_eq!(gpu["vram_bytes"], 9058 * MIB);
}

#[test]
fn the_newest_shape_and_the_oldest_one_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let worker = Sleeper::spawn(dir.path(), "python3", &["-m", "vllm.entrypoints.openai.api_server"]);
    let s = json(&recorded(dir.path(), "910b4-26.0.rc1.txt", worker.pid()));
    let chips = ascend_devices(&s);
    assert_eq!(chips.len(), 1);
    assert_eq!(chips[0]["memory_used_bytes"], 12871 * MIB);
    assert_eq!(process(&s, worker.pid())["gpu"][0]["vram_bytes"], 9981 * MIB);

    let s = json(&recorded(dir.path(), "910a-22.0.2.txt", worker.pid()));
    let chips = ascend_devices(&s);
    assert_eq!(chips[0]["memory_used_bytes"], 0, "a measured 0 stays 0");
    assert_eq!(
        chips[0]["process_list_complete"], false,
        "no process table: unknown, not none"
    );
}

#[test]
fn the_chips_are_listed_by_list_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let out = gputaskman(&recorded(dir.path(), "310p3-23.0.0.txt", 1))
        .arg("--list-gpus")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("Ascend 310P3").count(), 3, "{text}");
}

#[test]
fn a_hung_npu_smi_is_killed_at_the_deadline_with_what_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let child_pid = dir.path().join("child.pid");
    let npu_smi = stand_in(
        dir.path(),
        &format!("sleep 120 &\necho $! > '{}'\nwait", child_pid.display()),
    );
    let started = Instant::now();
    let s = json(&npu_smi);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "the snapshot waited {took:?}");
    let b = backend(&s, "ascend");
    assert_eq!(b["status"], "error");
    let detail = b["detail"].as_str().unwrap();
    assert!(detail.ends_with("did not answer within 3 s: killed"), "{detail}");
    assert!(ascend_devices(&s).is_empty());
    let pid = std::fs::read_to_string(&child_pid).unwrap();
    let gone = Path::new("/proc").join(pid.trim());
    let deadline = Instant::now() + Duration::from_secs(5);
    while gone.exists() && std::fs::read_to_string(gone.join("stat")).is_ok_and(|s| !s.contains(") Z ")) {
        assert!(Instant::now() < deadline, "the tool's own child outlived the deadline");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_failing_npu_smi_is_an_error_with_its_message_not_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let npu_smi = stand_in(
        dir.path(),
        "echo 'dcmi module initialize failed. ret is -8005' >&2\nexit 3",
    );
    let s = json(&npu_smi);
    let b = backend(&s, "ascend");
    assert_eq!(b["status"], "error");
    let detail = b["detail"].as_str().unwrap();
    assert!(detail.contains("exit status: 3"), "{detail}");
    assert!(
        detail.ends_with("dcmi module initialize failed. ret is -8005"),
        "{detail}"
    );

    // Exit 0 with no table is no answer either.
    let s = json(&stand_in(dir.path(), "echo 'Usage: npu-smi info'"));
    let b = backend(&s, "ascend");
    assert_eq!(b["status"], "error");
    assert_eq!(b["detail"], "npu-smi info printed no device table: devices unknown");
}

#[test]
fn a_named_npu_smi_that_cannot_run_is_an_error_and_none_at_all_is_unavailable() {
    let s = json(Path::new("/nonexistent/npu-smi"));
    let b = backend(&s, "ascend");
    assert_eq!(b["status"], "error", "a named tool that cannot run is a failure: {b}");
    assert!(b["detail"].as_str().unwrap().contains("/nonexistent/npu-smi"), "{b}");

    let empty = tempfile::tempdir().unwrap();
    let out = gputaskman(Path::new("unused"))
        .env_remove("GPUTASKMAN_NPU_SMI")
        .env("PATH", empty.path())
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(backend(&s, "ascend")["status"], "unavailable");
}

#[test]
fn what_npu_smi_prints_reaches_no_terminal_unescaped() {
    let dir = tempfile::tempdir().unwrap();
    let npu_smi = stand_in(
        dir.path(),
        r#"printf '\033]0;pwned\007\033[2J\233 \342\200\256bad\n' >&2
exit 1"#,
    );
    let out = gputaskman(&npu_smi).arg("--once").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(r"failed (exit status: 1): \e]0;pwned\x07\e[2J"), "{text}");
    common::assert_inert("--once", &text);
}

#[test]
fn a_jetson_and_ascend_chips_are_numbered_in_turn_and_served_as_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let npu_smi = recorded(dir.path(), "910b3-24.1.rc1.txt", 1);
    let orin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/jetson/orin");
    let port = common::free_port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .env("GPUTASKMAN_NPU_SMI", &npu_smi)
        .env("GPUTASKMAN_PROC_ROOT", orin.join("proc"))
        .env("GPUTASKMAN_SYS_ROOT", orin.join("sys"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")]);
    let _server = common::Daemon::start(cmd, port, Duration::from_secs(30));
    let metrics = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    for line in [
        r#"gputaskman_backend_up{backend="jetson",status="ok"} 1"#,
        r#"gputaskman_backend_up{backend="ascend",status="ok"} 1"#,
        r#"gputaskman_device_info{backend="jetson",device="0",name="NVIDIA Jetson AGX Orin Developer Kit (integrated GPU ga10b)",vendor="NVIDIA"} 1"#,
        r#"gputaskman_device_info{backend="ascend",device="1",name="Ascend 910B3",vendor="Huawei",pci_bus_id="0000:C1:00.0",driver_version="24.1.rc1.b030"} 1"#,
        r#"gputaskman_device_memory_used_bytes{backend="ascend",device="1"} 54855204864"#,
        r#"gputaskman_device_memory_total_bytes{backend="ascend",device="2"} 68719476736"#,
        r#"gputaskman_device_memory_used_bytes{backend="jetson",device="0"} 4433977344"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in:\n{metrics}");
    }
}

#[test]
fn a_hung_usages_query_costs_what_is_left_of_the_deadline_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ascend/910b3-24.1.rc1.txt");
    let npu_smi = stand_in(
        dir.path(),
        &format!("[ \"$2\" = -t ] && exec sleep 120\ncat '{}'", table.display()),
    );
    let started = Instant::now();
    let s = json(&npu_smi);
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(backend(&s, "ascend")["status"], "ok", "the table was read");
    for chip in ascend_devices(&s) {
        assert_eq!(chip["memory_activity_percent"], Value::Null);
        let notes = chip["notes"].to_string();
        assert!(
            notes.contains("memory bandwidth unknown") && notes.contains("killed"),
            "{notes}"
        );
    }
}
