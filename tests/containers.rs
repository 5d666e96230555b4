//! Inside a PID namespace NVML's PIDs are the host's. These tests make real
//! PID namespaces (unshare, as root), start processes inside that map a
//! library named libcuda.so.1, give their host PIDs to the fake NVML, and
//! run the binary inside the namespace (nsenter).

mod common;

use common::{device, fake_nvml, Scenario, Sleeper};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const GIB: u64 = 1 << 30;

fn namespaces_allowed() -> bool {
    let ok = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIPPED: unshare --pid is not permitted here (needs root)");
    }
    ok
}

/// A PID namespace with three sleepers: two that map libcuda.so.1 (started
/// in that order) and one that does not (like nvidia-smi).
struct Namespace {
    child: Child,
    /// (host PID, namespace PID) of the libcuda processes, oldest first.
    cuda: Vec<(u32, u32)>,
    /// The namespace's first process (host PID), for nsenter.
    init: u32,
}

impl Namespace {
    fn start(dir: &Path) -> Namespace {
        let lib = dir.join("libcuda.so.1");
        std::fs::copy(libm(), &lib).unwrap();
        let script = format!(
            "LD_PRELOAD={lib} sleep 600 & sleep 0.2; LD_PRELOAD={lib} sleep 600 & sleep 0.2; sleep 600 & echo ready; read _",
            lib = lib.display()
        );
        let mut child = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        let init = children(child.id())[0];
        let sleepers = children(init);
        assert_eq!(sleepers.len(), 3, "{sleepers:?}");
        let cuda: Vec<(u32, u32)> = sleepers
            .iter()
            .filter(|&&p| maps_libcuda(p))
            .map(|&p| (p, namespace_pid(p)))
            .collect();
        assert_eq!(cuda.len(), 2);
        Namespace { child, cuda, init }
    }

    /// Runs the binary inside the namespace against the scenario.
    fn snapshot(&self, scenario: &Scenario) -> Value {
        let out = Command::new("nsenter")
            .args(["--target", &self.init.to_string(), "--pid", "--mount", "--"])
            .arg(assert_cmd::cargo::cargo_bin("gputaskman"))
            .arg("--json")
            .arg("--nvml-lib")
            .arg(fake_nvml())
            .env("FAKE_NVML_SCENARIO", scenario.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Killing the namespace's first process ends every process in it.
        let _ = Command::new("kill").args(["-9", &self.init.to_string()]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn libm() -> &'static str {
    [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("a libm to copy")
}

/// Children of a process, oldest first (from the host's /proc).
fn children(pid: u32) -> Vec<u32> {
    for _ in 0..100 {
        let mut kids: Vec<(u64, u32)> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
                let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                let started: u64 = fields.get(19)?.parse().ok()?;
                (fields.get(1)?.parse::<u32>().ok()? == pid).then_some((started, p))
            })
            .collect();
        if !kids.is_empty() {
            kids.sort();
            return kids.into_iter().map(|(_, p)| p).collect();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no children of {pid}");
}

fn maps_libcuda(pid: u32) -> bool {
    for _ in 0..50 {
        if std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("libcuda.so.1")) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The innermost PID of a process, from the NSpid line the host sees.
fn namespace_pid(pid: u32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    line.split_whitespace().last().unwrap().parse().unwrap()
}

fn scenario(processes: Value) -> Scenario {
    Scenario::new(&json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA L40S",
            "uuid": "GPU-ns",
            "memory": {"total": 48305799168u64, "used": 7 * GIB, "free": 48305799168u64 - 7 * GIB, "reserved": 0},
            "compute_processes": processes
        }]
    }))
}

fn by_host_pid(s: &Value, host: u32) -> &Value {
    s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["host_pid"] == host)
        .unwrap_or_else(|| panic!("host pid {host} not in {s:#}"))
}

#[test]
fn matching_counts_pair_host_pids_exactly_in_creation_order() {
    if !namespaces_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = Namespace::start(dir.path());
    let [(host_a, ns_a), (host_b, ns_b)] = [ns.cuda[0], ns.cuda[1]];
    let s = ns.snapshot(&scenario(json!([
        {"pid": host_a, "used_memory": GIB},
        {"pid": host_b, "used_memory": 2 * GIB}
    ])));
    assert_eq!(s["host"]["container"], true);
    assert!(s["backends"][0]["detail"].as_str().unwrap().contains("paired"), "{s:#}");
    let a = by_host_pid(&s, host_a);
    assert_eq!(a["pid"], ns_a);
    assert_eq!(a["name"], "sleep");
    assert_eq!(a["gpu"][0]["vram_bytes"], GIB);
    assert_eq!(a["gpu"][0]["match"], "exact");
    let b = by_host_pid(&s, host_b);
    assert_eq!(b["pid"], ns_b);
    assert_eq!(b["gpu"][0]["vram_bytes"], 2 * GIB);
    assert_eq!(b["gpu"][0]["match"], "exact");
    assert_eq!(device(&s, 0)["process_list_complete"], true);
}

#[test]
fn a_host_only_process_is_left_over_and_the_rest_are_guesses() {
    if !namespaces_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Started before the namespace: the oldest host PID.
    let outside = Sleeper::spawn(dir.path(), "python3", &[]);
    let ns = Namespace::start(dir.path());
    let [(host_a, ns_a), (host_b, ns_b)] = [ns.cuda[0], ns.cuda[1]];
    let s = ns.snapshot(&scenario(json!([
        {"pid": outside.pid(), "used_memory": 3 * GIB},
        {"pid": host_a, "used_memory": GIB},
        {"pid": host_b, "used_memory": 2 * GIB}
    ])));
    let h = by_host_pid(&s, outside.pid());
    assert_eq!(h["pid"], outside.pid());
    assert_eq!(h["name"], Value::Null);
    assert_eq!(h["gpu"][0]["match"], Value::Null);
    assert_eq!(h["gpu"][0]["vram_bytes"], 3 * GIB);
    assert!(h["notes"][0]
        .as_str()
        .unwrap()
        .starts_with(&format!("H:{}", outside.pid())));
    for (host, pid, vram) in [(host_a, ns_a, GIB), (host_b, ns_b, 2 * GIB)] {
        let p = by_host_pid(&s, host);
        assert_eq!(p["pid"], pid);
        assert_eq!(p["gpu"][0]["match"], "guess");
        assert_eq!(p["gpu"][0]["vram_bytes"], vram);
    }
}

#[test]
fn the_sleeper_without_libcuda_is_never_a_candidate() {
    if !namespaces_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = Namespace::start(dir.path());
    let (host_a, ns_a) = ns.cuda[0];
    // One host PID, two libcuda candidates: a guess, the oldest, never the
    // plain sleeper.
    let s = ns.snapshot(&scenario(json!([{"pid": host_a, "used_memory": GIB}])));
    let a = by_host_pid(&s, host_a);
    assert_eq!(a["pid"], ns_a);
    assert_eq!(a["gpu"][0]["match"], "guess");
}
