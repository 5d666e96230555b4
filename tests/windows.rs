//! The Windows build run for real: gputaskman.exe under Wine against the fake
//! NVML (nvml.dll, a WDDM driver, which gives no per-process memory) and the
//! fake PDH (pdh.dll, the GPU counters), with real Windows processes
//! (holder.exe under Wine) whose PIDs the scenarios name. Skips, saying so,
//! where wine or mingw-w64 is not installed; .ci/run installs both.
//!
//! What Wine cannot stand in for: Wine 8.0's gdi32 has no
//! D3DKMTQueryAdapterInfo, so no adapter's PCI address is known; the LUID ↔
//! PCI address match is tested on recorded counters
//! (src/collect/wddm/mod.rs). Where D3DKMT fails, adapters are matched by
//! DXGI's PCI ids: the fake DXGI (dxgi.dll) lists the adapters of a
//! scenario (FAKE_DXGI_SCENARIO); without one it fails as Wine 8.0's own
//! does without a display (DXGI_ERROR_UNSUPPORTED), and the counters'
//! adapters are devices of their own beside NVML's.

mod common;

use common::tmux::{tmux_path, Tmux};
use common::wine;
use common::{device, free_port, process, Daemon, Scenario};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::Duration;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The two adapters' LUIDs, as PDH instance names spell them.
const LUID_A: &str = "luid_0x00000000_0x0000E1A0";
const LUID_B: &str = "luid_0x00000000_0x0001F3C2";
const RTX_3090: &str = "NVIDIA GeForce RTX 3090";
/// In a process's command line; never in the output.
const SECRET: &str = "wine-test-secret-7f3a9c";

/// Two RTX 3090 under WDDM (NVML's driver model 0): totals, and processes
/// without memory figures, as the real driver gives them.
fn nvml_wddm(on_0: &[u32], on_1: &[u32]) -> Value {
    let processes =
        |pids: &[u32]| -> Vec<Value> { pids.iter().map(|p| json!({"pid": p, "used_memory": null})).collect() };
    json!({
        "driver_version": "581.57",
        "cuda_driver_version": 13000,
        "devices": [
            {
                "name": RTX_3090, "uuid": "GPU-3090-0000", "pci_bus_id": "00000000:01:00.0",
                "driver_model": {"current": 0, "pending": 0},
                "memory": {"total": 24 * GIB, "used": 6 * GIB, "free": 18 * GIB},
                "compute_processes": processes(on_0),
            },
            {
                "name": RTX_3090, "uuid": "GPU-3090-1111", "pci_bus_id": "00000000:21:00.0",
                "driver_model": {"current": 0, "pending": 0},
                "memory": {"total": 24 * GIB, "used": 14 * GIB, "free": 10 * GIB},
                "compute_processes": processes(on_1),
            }
        ]
    })
}

/// One process context's memory counters, in bytes.
fn memory(local: u64, non_local: u64, committed: u64) -> Value {
    json!({
        "Local Usage": local, "Non Local Usage": non_local,
        "Dedicated Usage": local, "Shared Usage": non_local, "Total Committed": committed,
    })
}

fn set(counters: &[&str], instances: Value) -> Value {
    json!({"counters": counters, "instances": instances})
}

const MEMORY_COUNTERS: [&str; 5] = [
    "Local Usage",
    "Non Local Usage",
    "Dedicated Usage",
    "Shared Usage",
    "Total Committed",
];

/// Four processes on two adapters:
/// - a: on A, 4 GiB local, 512 MiB spilled, 5 GiB committed (512 MiB
///   resident nowhere), 3D engine 40 % busy;
/// - b: on B, 10 GiB local, no spill, a compute engine 75 % busy;
/// - c: contexts on both adapters (1 GiB + 64 MiB on A, 2 GiB + 128 MiB on B);
/// - d: two contexts on B (`#1`), 256 + 768 MiB local, 32 MiB spilled.
fn pdh_two_adapters(a: u32, b: u32, c: u32, d: u32) -> Value {
    let memory_instances = json!({
        format!("pid_{a}_{LUID_A}_phys_0"): memory(4 * GIB, 512 * MIB, 5 * GIB),
        format!("pid_{b}_{LUID_B}_phys_0"): memory(10 * GIB, 0, 10 * GIB),
        format!("pid_{c}_{LUID_A}_phys_0"): memory(GIB, 64 * MIB, GIB + 64 * MIB),
        format!("pid_{c}_{LUID_B}_phys_0"): memory(2 * GIB, 128 * MIB, 2 * GIB + 512 * MIB),
        format!("pid_{d}_{LUID_B}_phys_0"): memory(256 * MIB, 32 * MIB, 288 * MIB),
        format!("pid_{d}_{LUID_B}_phys_0#1"): memory(768 * MIB, 0, 768 * MIB),
    });
    let busy = |percent: u32| json!({"Running Time": {"start": 1_000_000, "busy_percent": percent}});
    let engine_instances = json!({
        format!("pid_{a}_{LUID_A}_phys_0_eng_0_engtype_3D"): busy(40),
        format!("pid_{a}_{LUID_A}_phys_0_eng_1_engtype_Copy"): busy(0),
        format!("pid_{b}_{LUID_B}_phys_0_eng_4_engtype_Compute_0"): busy(75),
    });
    json!({"sets": {
        "GPU Process Memory": set(&MEMORY_COUNTERS, memory_instances),
        "GPU Engine": set(&["Running Time", "Utilization Percentage"], engine_instances),
        "GPU Adapter Memory": set(&["Dedicated Usage", "Shared Usage", "Total Committed"], json!({
            format!("{LUID_A}_phys_0"): {"Dedicated Usage": 5 * GIB, "Shared Usage": 576 * MIB, "Total Committed": 6 * GIB},
            format!("{LUID_B}_phys_0"): {"Dedicated Usage": 13 * GIB, "Shared Usage": 160 * MIB, "Total Committed": 14 * GIB},
        })),
        "GPU Local Adapter Memory": set(&["Local Usage"], json!({
            format!("{LUID_A}_phys_0_part_0"): {"Local Usage": 5 * GIB},
            format!("{LUID_B}_phys_0_part_0"): {"Local Usage": 13 * GIB},
        })),
    }})
}

/// Runs gputaskman.exe with `args` and parses stdout as JSON.
fn json_of(w: &wine::Wine, nvml: &Scenario, pdh: &Scenario, args: &[&str]) -> Value {
    json_from(w.gputaskman(nvml.path(), pdh.path()), args)
}

/// Runs this gputaskman.exe command with `args` and parses stdout as JSON.
fn json_from(cmd: std::process::Command, args: &[&str]) -> Value {
    let out = assert_cmd::Command::from_std(cmd)
        .args(args)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gputaskman.exe {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The process's GPU entry on this device.
fn on_device(p: &Value, index: u64) -> &Value {
    p["gpu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["device"] == index)
        .unwrap_or_else(|| panic!("no entry on device {index}: {p:#}"))
}

#[test]
fn json_lists_each_process_with_its_vram_and_spill_from_pdh_on_its_adapter() {
    let Some(w) = wine::wine() else { return };
    let a = w.holder(&["ggml-cuda.dll"], &["--api-key", SECRET, "-m", "model.gguf"]);
    let (b, c, d) = (w.holder(&[], &[]), w.holder(&[], &[]), w.holder(&[], &[]));
    let nvml = Scenario::new(&nvml_wddm(&[a.pid, c.pid], &[b.pid, c.pid, d.pid]));
    let pdh = Scenario::new(&pdh_two_adapters(a.pid, b.pid, c.pid, d.pid));
    let s = json_of(w, &nvml, &pdh, &["--json"]);

    let backend = |name: &str| {
        s["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .unwrap_or_else(|| panic!("no {name} backend: {s:#}"))
    };
    assert_eq!(backend("nvml")["status"], "ok", "{s:#}");
    let wddm = backend("wddm");
    assert_eq!(wddm["status"], "ok", "{wddm:#}");
    let detail = wddm["detail"].as_str().unwrap();
    assert!(detail.contains("5 process entries"), "{detail}");
    assert!(
        detail.contains("gdi32 has no D3DKMTQueryAdapterInfo"),
        "the backend line says why adapters are not matched: {detail}"
    );
    assert!(
        detail.contains("DXGI lists no adapters: CreateDXGIFactory1 failed (0x887A0004)"),
        "nor could DXGI: {detail}"
    );

    // NVML's devices keep NVML's totals; same name, told apart by bus.
    for (index, used, bus) in [(0, 6 * GIB, "00000000:01:00.0"), (1, 14 * GIB, "00000000:21:00.0")] {
        let dev = device(&s, index);
        assert_eq!(dev["name"], RTX_3090);
        assert_eq!(dev["backend"], "nvml");
        assert_eq!(dev["pci_bus_id"], bus);
        assert_eq!(dev["memory_used_bytes"], used);
        assert_eq!(dev["memory_total_bytes"], 24 * GIB);
    }
    // The counters' adapters, by LUID: Local Usage totals, size unknown.
    for (index, luid, used, shared) in [
        (2, "0x00000000_0x0000E1A0", 5 * GIB, 576 * MIB),
        (3, "0x00000000_0x0001F3C2", 13 * GIB, 160 * MIB),
    ] {
        let dev = device(&s, index);
        assert_eq!(dev["backend"], "wddm", "{dev:#}");
        assert_eq!(dev["name"], format!("WDDM adapter {luid}"));
        assert_eq!(dev["memory_used_bytes"], used);
        assert_eq!(dev["shared_memory_used_bytes"], shared);
        assert_eq!(dev["memory_total_bytes"], Value::Null, "the counters do not say");
    }
    assert_eq!(s["devices"].as_array().unwrap().len(), 4);

    // Value by value: VRAM = Local Usage, spill = Non Local Usage, paged =
    // Total Committed - both, on the adapter the counters name.
    let check = |pid: u32, index: u64, vram: u64, spill: u64, paged: u64| {
        let g = on_device(process(&s, pid), index);
        assert_eq!(g["source"], "wddm", "{g:#}");
        assert_eq!(
            (&g["vram_bytes"], &g["spill_bytes"], &g["paged_bytes"]),
            (&json!(vram), &json!(spill), &json!(paged)),
            "pid {pid} on device {index}: {g:#}"
        );
    };
    check(a.pid, 2, 4 * GIB, 512 * MIB, 512 * MIB);
    check(b.pid, 3, 10 * GIB, 0, 0);
    check(c.pid, 2, GIB, 64 * MIB, 0);
    check(c.pid, 3, 2 * GIB, 128 * MIB, 384 * MIB);
    check(d.pid, 3, GIB, 32 * MIB, 0);
    for (pid, wrong) in [(a.pid, 3), (b.pid, 2), (d.pid, 2)] {
        let p = process(&s, pid);
        assert!(
            p["gpu"].as_array().unwrap().iter().all(|g| g["device"] != wrong),
            "pid {pid} is not on device {wrong}: {p:#}"
        );
    }
    // NVML under WDDM lists the processes and cannot say their memory.
    for (pid, index) in [(a.pid, 0), (c.pid, 0), (b.pid, 1), (c.pid, 1), (d.pid, 1)] {
        let g = on_device(process(&s, pid), index);
        assert_eq!(
            (&g["source"], &g["vram_bytes"]),
            (&json!("nvml"), &Value::Null),
            "{g:#}"
        );
    }
    // Engine busy from two Running Time readings (the first is taken at
    // start): 40 % and 75 %, give or take the stamps' millisecond over a
    // window that --once can make a few tens of ms long on a loaded machine.
    let engine = |pid: u32, index: u64, engine: &str| {
        on_device(process(&s, pid), index)["engines"][engine]
            .as_u64()
            .unwrap_or_else(|| panic!("no {engine} figure for pid {pid}: {s:#}"))
    };
    let busy_3d = engine(a.pid, 2, "3d");
    assert!((32..=48).contains(&busy_3d), "{busy_3d}");
    assert_eq!(engine(a.pid, 2, "copy"), 0);
    let busy_compute = engine(b.pid, 3, "compute_0");
    assert!((67..=83).contains(&busy_compute), "{busy_compute}");

    // The process scan (Toolhelp) found them as what they are.
    for pid in [a.pid, b.pid, c.pid, d.pid] {
        assert_eq!(process(&s, pid)["name"], "holder.exe");
    }
    let runtimes = &process(&s, a.pid)["runtimes"];
    assert!(
        runtimes.as_array().unwrap().contains(&json!("ggml")),
        "ggml-cuda.dll is in its module list: {runtimes}"
    );
    let p = process(&s, a.pid);
    assert_eq!(p["kind"], "ai");
    // Its command line, read under Wine from the PEB (Wine 8.0 has no
    // ProcessCommandLineInformation), with the secret redacted.
    let cmdline = p["cmdline"]
        .as_str()
        .unwrap_or_else(|| panic!("no command line: {p:#}"));
    assert!(cmdline.contains("holder.exe"), "{cmdline}");
    assert!(cmdline.contains("--api-key <redacted> -m model.gguf"), "{cmdline}");
    assert!(!s.to_string().contains(SECRET), "the secret is nowhere in the snapshot");
    // The user is the token's account: under Wine, the Unix user running it.
    let id = std::process::Command::new("id").arg("-un").output().unwrap();
    let me = String::from_utf8_lossy(&id.stdout).trim().to_string();
    assert_eq!(p["user"], me, "{p:#}");
    assert!(p["exe"].as_str().unwrap().ends_with("\\holder.exe"), "{p:#}");

    // And the output is what the schema says.
    let schema = json_of(w, &nvml, &pdh, &["schema"]);
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&s)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// Under Wine the Linux host's /proc, /sys and /etc are one Z: drive away:
/// the Windows build reads none of them (no Linux kernel, distribution or
/// container on its host line, no DRM backend, no /proc in its notes), and
/// `--ascii` prints nothing but ASCII.
#[test]
fn the_windows_build_reads_nothing_of_the_linux_host_and_ascii_is_ascii() {
    let Some(w) = wine::wine() else { return };
    let ai = w.holder(&["ggml-cuda.dll"], &["-m", "model.gguf"]);
    let other = w.holder(&[], &[]);
    // A PID NVML names that no Windows process has.
    const GONE: u32 = 4_190_001;
    let mut nvml = nvml_wddm(&[ai.pid, GONE], &[other.pid]);
    nvml["devices"][0]["temperature_c"] = json!(61);
    let nvml = Scenario::new(&nvml);
    let pdh = Scenario::new(&pdh_two_adapters(ai.pid, other.pid, ai.pid, other.pid));
    // Without the variables a container runtime sets, which say the same
    // on Windows: only Linux's files could say "container" here.
    let mut cmd = w.gputaskman(nvml.path(), pdh.path());
    cmd.env_remove("container").env_remove("KUBERNETES_SERVICE_HOST");
    let s = json_from(cmd, &["--json"]);

    let host = &s["host"];
    assert_eq!(host["os"], "windows", "{host:#}");
    // The NT version (RtlGetVersion), "10.0.19045", not Linux's release.
    let kernel = host["kernel"].as_str().unwrap_or_else(|| panic!("{host:#}"));
    let numbers: Vec<&str> = kernel.split('.').collect();
    assert!(
        numbers.len() == 3 && numbers.iter().all(|n| n.parse::<u32>().is_ok()),
        "{host:#}"
    );
    assert_eq!(host["os_name"], Value::Null, "no os-release on Windows: {host:#}");
    assert_eq!(
        (&host["wsl"], &host["container"]),
        (&json!(false), &json!(false)),
        "{host:#}"
    );

    let backends: Vec<&Value> = s["backends"].as_array().unwrap().iter().map(|b| &b["name"]).collect();
    assert!(!backends.contains(&&json!("drm")), "DRM is Linux's: {backends:?}");

    let note = process(&s, GONE)["notes"][0].as_str().unwrap();
    assert!(note.contains("is not in the process list (Toolhelp)"), "{note}");
    // The runtime's listening sockets are the TCP table's (it has none).
    let p = process(&s, ai.pid);
    assert_eq!(p["listen_ports"], json!([]), "{p:#}");
    let all = s.to_string();
    for linux in ["/proc", "file descriptors", "PID namespace"] {
        assert!(!all.contains(linux), "{linux} in {s:#}");
    }

    let out = assert_cmd::Command::from_std(w.gputaskman(nvml.path(), pdh.path()))
        .args(["--once", "--ascii"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("61 C"),
        "the temperature, without its degree sign: {text}"
    );
    assert!(out.stdout.iter().all(|b| *b < 0x80), "{text}");
}

/// The holders and the scenario files of the two-adapter case.
struct TwoAdapters {
    holders: [wine::Holder; 4],
    nvml: Scenario,
    pdh: Scenario,
}

fn two_adapters(w: &wine::Wine) -> TwoAdapters {
    let holders = [(); 4].map(|_| w.holder(&[], &[]));
    let [a, b, c, d] = holders.each_ref().map(|h| h.pid);
    TwoAdapters {
        nvml: Scenario::new(&nvml_wddm(&[a, c], &[b, c, d])),
        pdh: Scenario::new(&pdh_two_adapters(a, b, c, d)),
        holders,
    }
}

#[test]
fn the_live_view_under_wine_draws_quits_on_q_and_restores_the_terminal() {
    let Some(w) = wine::wine() else { return };
    let Some(tmux) = tmux_path() else { return };
    let case = two_adapters(w);
    let t = Tmux::new(tmux, "wine");
    // --ascii: the rest of the look is drawn on Linux (tests/tui_tmux.rs).
    let line = w.gputaskman_line(case.nvml.path(), case.pdh.path());
    t.start(&format!("{line} --ascii; echo \"exited $?\"; sleep 600"));
    // Wine 8.0's console renders the view's escape sequences imperfectly
    // (it loses or shifts parts of some lines, more so under load), so
    // the screen is checked for what it always shows: the process table
    // with the processes' PIDs. Their figures are checked in --json and
    // /metrics, and every key on Linux (tests/tui_tmux.rs).
    // A row: its PID (the process's own, so no pairing marker) and name,
    // on one line (Wine's console may run other text into them).
    let pids = case.holders.each_ref().map(|h| h.pid.to_string());
    let rows = |s: &str| {
        pids.iter()
            .filter(|pid| s.lines().any(|l| l.contains("holder.exe") && l.contains(pid.as_str())))
            .count()
    };
    let screen = t.wait_for("the process table", Duration::from_secs(60), |s| {
        s.contains("PROCESSES") && rows(s) >= 2
    });
    assert_eq!(t.display("#{alternate_on}"), "1", "drawn on the alternate screen");
    let others: Vec<char> = screen.chars().filter(|c| !c.is_ascii()).collect();
    assert_eq!(others, Vec::<char>::new(), "--ascii draws ASCII only: {screen}");

    t.keys(&["q"]);
    let screen = t.wait_for("the view to quit", Duration::from_secs(20), |s| s.contains("exited "));
    assert!(screen.contains("exited 0"), "{screen}");
    assert!(!screen.contains("PROCESSES"), "the view's screen is gone: {screen}");
    assert_eq!(t.display("#{alternate_on}"), "0", "the alternate screen is left");
    assert_eq!(t.display("#{cursor_flag}"), "1", "the cursor is shown again");
}

/// GET `path` from 127.0.0.1:`port`, the body.
fn get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no reply: {reply:?}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

#[test]
fn serve_under_wine_answers_metrics_with_the_pdh_figures() {
    let Some(w) = wine::wine() else { return };
    let case = two_adapters(w);
    let [a, b, ..] = case.holders.each_ref().map(|h| h.pid);
    let port = free_port();
    let mut cmd = w.gputaskman(case.nvml.path(), case.pdh.path());
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--interval", "0.5"]);
    let _server = Daemon::start(cmd, port, Duration::from_secs(60));
    let metrics = get(port, "/metrics");
    // One series a line: `name{labels} value`.
    let value = |name: &str, pid: u32, device: u32| -> Option<f64> {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter(|l| l.contains(&format!("pid=\"{pid}\"")) && l.contains(&format!("device=\"{device}\"")))
            .find_map(|l| l.rsplit_once(' ')?.1.parse().ok())
    };
    for (name, pid, device, expected) in [
        ("gputaskman_process_vram_bytes", a, 2, 4 * GIB),
        ("gputaskman_process_spill_bytes", a, 2, 512 * MIB),
        ("gputaskman_process_paged_bytes", a, 2, 512 * MIB),
        ("gputaskman_process_vram_bytes", b, 3, 10 * GIB),
    ] {
        assert_eq!(
            value(name, pid, device),
            Some(expected as f64),
            "{name} of {pid} on {device}:\n{metrics}"
        );
    }
    assert_eq!(
        value("gputaskman_process_vram_bytes", a, 0),
        None,
        "NVML under WDDM has no figure, and n/a is no series:\n{metrics}"
    );
}

/// A card as NVML and DXGI both describe it.
struct Card {
    name: &'static str,
    uuid: &'static str,
    bus: &'static str,
    /// The PCI device id (the vendor is NVIDIA's, 10de).
    device_id: u32,
    subsys_id: u32,
    memory: u64,
}

const RTX_4090: Card = Card {
    name: "NVIDIA GeForce RTX 4090",
    uuid: "GPU-4090-0000",
    bus: "00000000:01:00.0",
    device_id: 0x2684,
    subsys_id: 0x16F1_10DE,
    memory: 24 * GIB,
};
const RTX_4080: Card = Card {
    name: "NVIDIA GeForce RTX 4080",
    uuid: "GPU-4080-1111",
    bus: "00000000:21:00.0",
    device_id: 0x2704,
    subsys_id: 0x1701_10DE,
    memory: 16 * GIB,
};
const NVIDIA: u32 = 0x10DE;

/// These cards under WDDM, with the PIDs NVML lists on each and no memory
/// figures, as the real driver gives them; pciDeviceId is (device id <<
/// 16) | vendor id (nvml.h).
fn nvml_cards(cards: &[(&Card, &[u32])]) -> Value {
    let devices: Vec<Value> = cards
        .iter()
        .map(|(c, pids)| {
            let processes: Vec<Value> = pids.iter().map(|p| json!({"pid": p, "used_memory": null})).collect();
            json!({
                "name": c.name, "uuid": c.uuid, "pci_bus_id": c.bus,
                "pci_device_id": (c.device_id << 16) | NVIDIA, "pci_subsystem_id": c.subsys_id,
                "driver_model": {"current": 0, "pending": 0},
                "memory": {"total": c.memory, "used": 2 * GIB, "free": c.memory - 2 * GIB},
                "compute_processes": processes,
            })
        })
        .collect();
    json!({"driver_version": "581.57", "cuda_driver_version": 13000, "devices": devices})
}

/// The fake DXGI's adapters: these cards at these LUIDs (the low halves of
/// LUID_A and LUID_B), after the Microsoft Basic Render Driver, a
/// software adapter that is never a device.
fn dxgi_cards(cards: &[(&Card, u32)]) -> Value {
    let mut adapters = vec![json!({
        "description": "Microsoft Basic Render Driver", "vendor_id": 0x1414, "device_id": 0x8C,
        "luid": {"high": 0, "low": 0x9}, "software": true,
    })];
    adapters.extend(cards.iter().map(|(c, low)| {
        json!({
            "description": c.name, "vendor_id": NVIDIA, "device_id": c.device_id,
            "subsys_id": c.subsys_id, "revision": 0xA1, "luid": {"high": 0, "low": low},
            "dedicated_video_memory": c.memory,
        })
    }));
    json!({ "adapters": adapters })
}

const LOW_A: u32 = 0xE1A0;
const LOW_B: u32 = 0x1F3C2;

/// gputaskman.exe --json against these NVML, PDH and DXGI scenarios.
fn json_with_dxgi(w: &wine::Wine, nvml: &Scenario, pdh: &Scenario, dxgi: &Scenario) -> Value {
    let mut cmd = w.gputaskman(nvml.path(), pdh.path());
    cmd.env("FAKE_DXGI_SCENARIO", wine::windows_path(dxgi.path()));
    json_from(cmd, &["--json"])
}

/// The process's WDDM entries, as (device, entry).
fn wddm_entries(p: &Value) -> Vec<(u64, &Value)> {
    p["gpu"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["source"] == "wddm")
        .map(|g| (g["device"].as_u64().unwrap(), g))
        .collect()
}

fn wddm_detail(s: &Value) -> String {
    let b = s["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "wddm")
        .unwrap_or_else(|| panic!("no wddm backend: {s:#}"));
    assert_eq!(b["status"], "ok", "{b:#}");
    b["detail"].as_str().unwrap().to_string()
}

#[test]
fn json_puts_each_process_s_pdh_vram_and_spill_on_its_nvml_device_by_dxgi_pci_ids() {
    let Some(w) = wine::wine() else { return };
    let holders = [(); 4].map(|_| w.holder(&[], &[]));
    let [a, b, c, d] = holders.each_ref().map(|h| h.pid);
    // PDH's adapter A is the 4080, NVML's second device; B the 4090, its
    // first: DXGI lists A first, so no order lines them up by chance.
    let nvml = Scenario::new(&nvml_cards(&[(&RTX_4090, &[b, c, d]), (&RTX_4080, &[a, c])]));
    let pdh = Scenario::new(&pdh_two_adapters(a, b, c, d));
    let dxgi = Scenario::new(&dxgi_cards(&[(&RTX_4080, LOW_A), (&RTX_4090, LOW_B)]));
    let s = json_with_dxgi(w, &nvml, &pdh, &dxgi);

    let detail = wddm_detail(&s);
    assert!(detail.contains("5 process entries"), "{detail}");
    assert!(
        detail.contains("adapters by LUID from DXGI PCI ids (gdi32 has no D3DKMTQueryAdapterInfo"),
        "the backend line says which match was used, and why: {detail}"
    );
    assert!(!detail.contains("share PCI ids"), "{detail}");

    // Two devices, NVML's, with NVML's totals and the shared memory only
    // the counters know.
    assert_eq!(s["devices"].as_array().unwrap().len(), 2, "{:#}", s["devices"]);
    for (index, card, shared) in [(0, &RTX_4090, 160 * MIB), (1, &RTX_4080, 576 * MIB)] {
        let dev = device(&s, index);
        assert_eq!(dev["backend"], "nvml", "{dev:#}");
        assert_eq!(dev["name"], card.name);
        assert_eq!(dev["memory_total_bytes"], card.memory);
        assert_eq!(dev["memory_used_bytes"], 2 * GIB);
        assert_eq!(dev["shared_memory_used_bytes"], shared, "{dev:#}");
    }

    // Value by value, on the device whose ids DXGI gave the LUID:
    // [device, VRAM, spill, paged] per WDDM entry.
    for (pid, want) in [
        (a, json!([[1, 4 * GIB, 512 * MIB, 512 * MIB]])),
        (b, json!([[0, 10 * GIB, 0, 0]])),
        (c, json!([[0, 2 * GIB, 128 * MIB, 384 * MIB], [1, GIB, 64 * MIB, 0]])),
        (d, json!([[0, GIB, 32 * MIB, 0]])),
    ] {
        let p = process(&s, pid);
        let got: Vec<Value> = wddm_entries(p)
            .into_iter()
            .map(|(dev, g)| json!([dev, g["vram_bytes"], g["spill_bytes"], g["paged_bytes"]]))
            .collect();
        assert_eq!(Value::from(got), want, "pid {pid}: {p:#}");
    }
    let busy_3d = wddm_entries(process(&s, a))[0].1["engines"]["3d"].as_u64().unwrap();
    assert!((32..=48).contains(&busy_3d), "{busy_3d}");
}

#[test]
fn two_identical_cards_under_dxgi_are_not_guessed_and_the_notes_say_why() {
    let Some(w) = wine::wine() else { return };
    let case = two_adapters(w);
    let [a, b, c, d] = case.holders.each_ref().map(|h| h.pid);
    // Two RTX 3090 of one board: the same ids, told apart only by address.
    let twin = Card {
        name: RTX_3090,
        uuid: "",
        bus: "",
        device_id: 0x2204,
        subsys_id: 0x3880_1462,
        memory: 24 * GIB,
    };
    let nvml = Scenario::new(&nvml_cards(&[
        (
            &Card {
                uuid: "GPU-3090-0000",
                bus: "00000000:01:00.0",
                ..twin
            },
            &[a, c],
        ),
        (
            &Card {
                uuid: "GPU-3090-1111",
                bus: "00000000:21:00.0",
                ..twin
            },
            &[b, c, d],
        ),
    ]));
    let dxgi = Scenario::new(&dxgi_cards(&[(&twin, LOW_A), (&twin, LOW_B)]));
    let s = json_with_dxgi(w, &nvml, &case.pdh, &dxgi);

    let why = "2 adapters and 2 devices share PCI ids 10de:2204 (subsystem 38801462), so DXGI cannot tell them apart and none is matched (D3DKMTQueryAdapterInfo's PCI address is needed)";
    let detail = wddm_detail(&s);
    assert!(detail.contains("adapters by LUID from DXGI PCI ids"), "{detail}");
    assert!(detail.contains(why), "{detail}");

    // NVML's two, then the counters' two adapters, each saying why.
    assert_eq!(s["devices"].as_array().unwrap().len(), 4, "{:#}", s["devices"]);
    for (index, luid, used) in [
        (2, "0x00000000_0x0000E1A0", 5 * GIB),
        (3, "0x00000000_0x0001F3C2", 13 * GIB),
    ] {
        let dev = device(&s, index);
        assert_eq!(dev["backend"], "wddm", "{dev:#}");
        assert_eq!(dev["memory_used_bytes"], used);
        let note = format!("adapter LUID {luid} is not matched: {why}");
        assert!(dev["notes"].as_array().unwrap().contains(&json!(note)), "{dev:#}");
    }
    for index in [0, 1] {
        assert_eq!(
            device(&s, index)["shared_memory_used_bytes"],
            Value::Null,
            "nothing lent to NVML's"
        );
    }
    // Each process's counters stay on its adapter's own device, none on an
    // NVML device: [device, VRAM] per WDDM entry.
    for (pid, want) in [
        (a, json!([[2, 4 * GIB]])),
        (b, json!([[3, 10 * GIB]])),
        (c, json!([[2, GIB], [3, 2 * GIB]])),
        (d, json!([[3, GIB]])),
    ] {
        let p = process(&s, pid);
        let got: Vec<Value> = wddm_entries(p)
            .into_iter()
            .map(|(dev, g)| json!([dev, g["vram_bytes"]]))
            .collect();
        assert_eq!(Value::from(got), want, "pid {pid}: {p:#}");
    }
}
