//! The WSL host bridge end to end on Linux: the real binary, told it runs
//! under WSL (GPUTASKMAN_WSL=1), starts a stand-in `powershell.exe` put
//! first on PATH that plays a recorded bridge stream (tests/data/wsl/), and
//! pairs vmwp.exe's contexts with a real process that maps a library named
//! libcuda.so.1.
// The stand-in powershell.exe is a shell script.
#![cfg(unix)]

mod common;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn stream() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/wsl/bridge-vmwp.txt")
}

/// A directory holding a `powershell.exe` with this body.
fn fake_powershell(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("powershell.exe");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The tests run one at a time: each one's CUDA process must be the only
/// one for the pairing to be what it asserts.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A sleeping process that maps a copy of libm named libcuda.so.1: a CUDA
/// process, as far as the scan can tell.
struct CudaSleeper {
    child: Child,
    _dir: tempfile::TempDir,
}

impl CudaSleeper {
    fn start() -> CudaSleeper {
        let dir = tempfile::tempdir().unwrap();
        let lib = common::library_named(dir.path(), "libcuda.so.1");
        let child = Command::new("sleep").arg("60").env("LD_PRELOAD", &lib).spawn().unwrap();
        // Wait until the library is mapped.
        let maps = format!("/proc/{}/maps", child.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(&maps)
            .unwrap_or_default()
            .contains("libcuda.so.1")
        {
            assert!(Instant::now() < deadline, "the sleeper never mapped the library");
            std::thread::sleep(Duration::from_millis(20));
        }
        CudaSleeper { child, _dir: dir }
    }
}

impl Drop for CudaSleeper {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// `gputaskman --json` under a forced WSL, with PATH starting at `bin`.
fn json(bin: Option<&Path>, extra: &[&str]) -> Value {
    let sys = tempfile::tempdir().unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let path = match bin {
        Some(dir) => format!("{}:{path}", dir.display()),
        None => path,
    };
    let out = assert_cmd::Command::cargo_bin("gputaskman")
        .unwrap()
        .args(["--json"])
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .args(extra)
        .env("GPUTASKMAN_WSL", "1")
        .env("GPUTASKMAN_SYS_ROOT", sys.path())
        .env("PATH", path)
        .env("BRIDGE_STREAM", stream())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn backend(s: &Value) -> &Value {
    s["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "wsl-host")
        .expect("a wsl-host backend")
}

fn process(s: &Value, pid: u32) -> Option<&Value> {
    s["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid)
}

#[test]
fn linux_processes_get_the_hosts_counters_through_the_bridge() {
    let _serial = serial();
    let sleeper = CudaSleeper::start();
    let bin = fake_powershell("cat \"$BRIDGE_STREAM\"; exec sleep 60");
    let s = json(Some(bin.path()), &[]);
    assert_eq!(s["host"]["wsl"], true);
    let b = backend(&s);
    assert_eq!(b["status"], "ok", "{b}");
    assert!(b["detail"].as_str().unwrap().contains("1 guessed"), "{b}");

    // No NVML here: the adapter becomes a device of its own, with its totals.
    let device = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["backend"] == "wsl-host")
        .unwrap();
    assert!(device["notes"][0].as_str().unwrap().contains("matched no"), "{device}");

    // The CUDA process that ran before gputaskman: vmwp.exe's first
    // context, by a guess.
    let p = process(&s, sleeper.child.id()).expect("the CUDA process is listed");
    assert_eq!(p["host_pid"], 5544);
    let g = &p["gpu"][0];
    assert_eq!(
        (g["source"].as_str(), g["match"].as_str()),
        (Some("wsl-host"), Some("guess"))
    );
    assert_eq!(g["vram_bytes"], 2_147_483_648u64);
    assert_eq!(g["spill_bytes"], 67_108_864);
    assert!(p["notes"].to_string().contains("vmwp.exe"), "{p}");

    // A Windows process on the same GPU, by its Windows name.
    let chrome = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host_pid"] == 7788)
        .unwrap();
    assert_eq!(chrome["name"], "chrome");
    assert_eq!(chrome["gpu"][0]["vram_bytes"], 310_378_496);
    assert_eq!(chrome["gpu"][0]["match"], Value::Null);
    assert!(
        chrome["notes"][0].as_str().unwrap().contains("Windows process"),
        "{chrome}"
    );
    // Only measured bytes are summed: the host's per-process figures, each
    // once, nothing else.
    let sum = s["attribution"]["measured_sum_bytes"].as_u64().unwrap();
    assert_eq!(sum, listed_vram(&s, None), "{s}");
    assert!(recorded_sums().contains(&sum), "{sum}");
}

/// The VRAM the listed processes hold, on one device or all.
fn listed_vram(s: &Value, device: Option<u64>) -> u64 {
    s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["gpu"].as_array().unwrap())
        .filter(|g| device.is_none() || g["device"].as_u64() == device)
        .filter_map(|g| g["vram_bytes"].as_u64())
        .sum()
}

/// What the recorded stream's per-process Local Usage adds up to: vmwp.exe's
/// first context, chrome and dwm; and vmwp.exe's second context when the
/// third sample is the one shown.
fn recorded_sums() -> [u64; 2] {
    let base = 2_147_483_648 + 310_378_496 + 201_326_592;
    [base, base + 6_442_450_944]
}

#[test]
fn no_host_skips_the_bridge_and_says_why_vram_is_na() {
    let _serial = serial();
    let sleeper = CudaSleeper::start();
    // A powershell.exe that would fail the test if it were started.
    let bin = fake_powershell("echo started > \"$(dirname \"$0\")/started\"; exit 1");
    let s = json(Some(bin.path()), &["--no-host"]);
    let b = backend(&s);
    assert_eq!(b["status"], "unavailable");
    assert!(b["detail"].as_str().unwrap().contains("--no-host"), "{b}");
    let p = process(&s, sleeper.child.id()).expect("a CUDA process is listed");
    assert!(p["gpu"].as_array().unwrap().is_empty());
    assert!(p["notes"].to_string().contains("VRAM n/a"), "{p}");
    assert!(!bin.path().join("started").exists(), "the bridge was not started");
}

#[test]
fn missing_interop_and_a_slow_start_are_notes_not_hangs() {
    let _serial = serial();
    // No powershell.exe anywhere.
    let s = json(None, &[]);
    let b = backend(&s);
    assert_eq!(b["status"], "unavailable");
    assert!(
        b["detail"].as_str().unwrap().contains("powershell.exe is not on PATH"),
        "{b}"
    );

    // One that never sends a sample: one-shot output waits boundedly, then
    // says "starting" and shows no figures rather than zeros.
    let sleeper = CudaSleeper::start();
    let bin = fake_powershell("echo 'gputaskman-bridge 1'; exec sleep 60");
    let started = Instant::now();
    let s = json(Some(bin.path()), &[]);
    assert!(started.elapsed() < Duration::from_secs(30));
    let b = backend(&s);
    assert!(b["detail"].as_str().unwrap().starts_with("starting"), "{b}");
    let p = process(&s, sleeper.child.id()).unwrap();
    assert!(p["gpu"].as_array().unwrap().is_empty(), "no zeros: {p}");
    assert!(p["notes"].to_string().contains("starting"), "{p}");
}

#[test]
fn host_adapters_are_nvmls_devices_by_luid_and_nvml_keeps_the_totals() {
    let _serial = serial();
    let sleeper = CudaSleeper::start();
    let bin = fake_powershell("cat \"$BRIDGE_STREAM\"; exec sleep 60");
    // NVML inside WSL: the card at 01:00.0 (the bridge's adapter line puts
    // LUID 0x0000C6F5 there), and a Windows PID (above Linux's pid_max).
    let scenario = common::Scenario::new(&serde_json::json!({
        "driver_version": "581.57",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4090",
            "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 25757220864u64, "used": 10200547328u64, "free": 15556673536u64, "reserved": 0},
            "graphics_processes": [{"pid": 4194999, "used_memory": null}]
        }]
    }));
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let sys = tempfile::tempdir().unwrap();
    let out = scenario
        .command()
        .arg("--json")
        .env("GPUTASKMAN_WSL", "1")
        .env("GPUTASKMAN_SYS_ROOT", sys.path())
        .env("PATH", path)
        .env("BRIDGE_STREAM", stream())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();

    let devices = s["devices"].as_array().unwrap();
    assert_eq!(
        devices.len(),
        1,
        "the host adapter is NVML's device, not a second one: {devices:?}"
    );
    let d = &devices[0];
    assert_eq!(
        (d["backend"].as_str(), d["memory_used_bytes"].as_u64()),
        (Some("nvml"), Some(10_200_547_328))
    );
    assert_eq!(
        d["shared_memory_used_bytes"], 402_653_184,
        "what NVML cannot see comes from the host"
    );

    let p = process(&s, sleeper.child.id()).unwrap();
    let g = &p["gpu"][0];
    assert_eq!(
        (g["device"].as_u64(), g["source"].as_str()),
        (Some(0), Some("wsl-host"))
    );
    assert_eq!(g["match"], "guess");

    let windows = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host_pid"] == 4194999)
        .unwrap();
    assert!(
        windows["notes"][0]
            .as_str()
            .unwrap()
            .contains("a Windows process NVML lists"),
        "{windows}"
    );
    // NVML says n/a per process here; the host's counters are summed instead.
    let sum = s["attribution"]["devices"][0]["measured_sum_bytes"].as_u64().unwrap();
    assert_eq!(sum, listed_vram(&s, Some(0)), "{s}");
    assert!(recorded_sums().contains(&sum), "{sum}");
}
