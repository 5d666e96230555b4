//! Who used the GPU and what it cost, end to end: two real processes at
//! known SM shares on a fake GPU whose energy counter advances at a known
//! power; `record`, then `summary --price-per-kwh`, value by value against
//! the recorded counters; and `serve` scraped by a real Prometheus, whose
//! `increase()` over the run matches the summary within a sample.

mod common;

use common::prometheus::{http_get, promtool_clean, tool, wait_until, Prometheus};
use common::{fake_nvml, free_port, Daemon, Scenario, Sleeper};
use gputaskman::record::open_recording;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const GIB: u64 = 1 << 30;
const WATTS: f64 = 200.0;
/// (SM %, VRAM) of the two processes.
const TRAINER: (u32, u64) = (30, GIB);
const SERVER: (u32, u64) = (50, 2 * GIB);

fn scenario(trainer: u32, server: u32) -> Value {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    json!({
        "driver_version": "580.95.05",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA L4",
            "uuid": "GPU-0e0e0e0e-1111-2222-3333-444444444444",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 24u64 * GIB, "used": 4 * GIB, "free": 20 * GIB, "reserved": 0},
            "utilization": {"gpu": 80, "memory": 10},
            "power_mw": 200000,
            "power_limit_mw": 300000,
            "energy": {"power_mw": 200000, "start_mj": 987_654_321u64, "at_unix_ms": now_ms},
            "compute_processes": [
                {"pid": trainer, "used_memory": TRAINER.1},
                {"pid": server, "used_memory": SERVER.1}
            ],
            "process_utilization": [
                {"pid": trainer, "sm": TRAINER.0, "mem": 5},
                {"pid": server, "sm": SERVER.0, "mem": 5}
            ]
        }]
    })
}

struct Machine {
    _dir: tempfile::TempDir,
    trainer: Sleeper,
    server: Sleeper,
    scenario: Scenario,
}

fn machine() -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let trainer = Sleeper::spawn(dir.path(), "trainer", &[]);
    let server = Sleeper::spawn(dir.path(), "vllm-serve", &[]);
    let scenario = Scenario::new(&scenario(trainer.pid(), server.pid()));
    Machine {
        _dir: dir,
        trainer,
        server,
        scenario,
    }
}

fn record(m: &Machine, path: &Path, duration: &str) {
    let out = m
        .scenario
        .command()
        .args(["record", "-o"])
        .arg(path)
        .args(["--interval", "0.5", "--duration", duration])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn summary(m: &Machine, path: &Path, extra: &[&str]) -> std::process::Output {
    let out = m
        .scenario
        .command()
        .arg("summary")
        .arg(path)
        .args(["--price-per-kwh", "0.30"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// What the recording says, computed here from its raw readings: the
/// seconds between samples and the energy the counter moved by.
fn recorded_intervals(path: &Path) -> (usize, f64, f64) {
    recorded_intervals_from(path, 0)
}

/// The same from the snapshot numbered `first` on.
fn recorded_intervals_from(path: &Path, first: usize) -> (usize, f64, f64) {
    let rec = open_recording(path).unwrap();
    let mut at_and_mj = vec![];
    rec.for_each(|i, s| {
        if i < first {
            return;
        }
        let at = gputaskman::units::unix_seconds(&s.taken_at).unwrap();
        at_and_mj.push((at, s.devices[0].energy_mj.expect("the counter is read")));
    });
    let seconds = at_and_mj.windows(2).map(|w| w[1].0 - w[0].0).sum();
    let joules = at_and_mj.windows(2).map(|w| (w[1].1 - w[0].1) as f64 / 1000.0).sum();
    (at_and_mj.len(), seconds, joules)
}

fn row(rows: &Value, pid: u32) -> &Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"].as_str().unwrap().starts_with(&format!("{pid} ")))
        .unwrap_or_else(|| panic!("no row for {pid} in {rows:#}"))
}

fn assert_near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: {got}, expected {want} ± {tolerance}"
    );
}

#[test]
fn summary_gives_gpu_time_memory_time_energy_and_cost_per_process_and_user() {
    let m = machine();
    let path = m._dir.path().join("run.jsonl");
    record(&m, &path, "5");
    let (samples, seconds, joules) = recorded_intervals(&path);
    assert!(samples >= 8, "{samples} samples");
    // The counter advanced at the scenario's power. A snapshot is stamped
    // when it starts and the counter read after the process scan, which is
    // long in the first sample (every process read whole): so from the
    // second sample on, within the few tens of milliseconds a loaded
    // machine's scans drift by.
    let (_, later_seconds, later_joules) = recorded_intervals_from(&path, 1);
    assert_near("counter watts", later_joules / later_seconds, WATTS, WATTS * 0.1);

    let s: Value = serde_json::from_slice(&summary(&m, &path, &["--json"]).stdout).unwrap();
    let u = &s["usage"];
    assert_near("covered", u["covered_s"].as_f64().unwrap(), seconds, 1e-6);
    assert_eq!(u["gaps"], 0);
    let d = &u["devices"][0];
    assert_near("device J", d["energy_counter_j"].as_f64().unwrap(), joules, 1e-6);
    assert_eq!(d["energy_integrated_j"], Value::Null, "the counter was there");
    assert_near("idle J", d["idle_energy_j"].as_f64().unwrap(), joules * 0.2, 1e-6);
    assert_eq!(d["counter_resets"], 0);
    for (pid, (sm, vram)) in [(m.trainer.pid(), TRAINER), (m.server.pid(), SERVER)] {
        let share = f64::from(sm) / 100.0;
        let r = row(&u["processes"], pid);
        assert_near(
            "GPU-hours",
            r["gpu_hours"].as_f64().unwrap(),
            share * seconds / 3600.0,
            1e-9,
        );
        assert_eq!(r["gpu_hours_obtained"], json!(["integrated"]));
        let gib_hours = vram as f64 / GIB as f64 * seconds / 3600.0;
        assert_near("GiB-hours", r["gib_hours"].as_f64().unwrap(), gib_hours, 1e-9);
        let kwh = share * joules / 3.6e6;
        assert_near("kWh", r["kwh"].as_f64().unwrap(), kwh, 1e-12);
        assert_near("cost", r["cost"].as_f64().unwrap(), kwh * 0.30, 1e-12);
    }
    // Both run as this user: the roll-up is their sum.
    let user = &u["users"][0];
    assert_near("user kWh", user["kwh"].as_f64().unwrap(), 0.8 * joules / 3.6e6, 1e-12);

    let text = String::from_utf8(summary(&m, &path, &[]).stdout).unwrap();
    assert!(text.contains("at 0.3 per kWh"), "{text}");
    let (_, usage) = text.split_once("Usage: covers").unwrap();
    let trainer_line = usage
        .lines()
        .find(|l| l.contains(&format!("{} trainer", m.trainer.pid())))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        trainer_line.contains(" integrated") && trainer_line.contains(" attributed"),
        "{trainer_line}"
    );
}

#[test]
fn prometheus_increase_over_the_run_matches_the_summary() {
    let (Some(prometheus), Some(promtool)) = (tool("prometheus"), tool("promtool")) else {
        return;
    };
    let m = machine();
    // Prometheus first, so it scrapes serve from its first sample on.
    let port = free_port();
    let prom = Prometheus::start(&prometheus, port, None);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", m.scenario.path())
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--interval", "0.5"]);
    let _serve = Daemon::start(cmd, port, Duration::from_secs(30));
    // The run starts once Prometheus has serve's counters.
    wait_until(
        &format!("the counters in Prometheus\n{}", prom.log()),
        Duration::from_secs(60),
        || (prom.query("gputaskman_process_energy_joules_total").len() == 2).then_some(()),
    );
    let path = m._dir.path().join("run.jsonl");
    record(&m, &path, "6");
    let s: Value = serde_json::from_slice(&summary(&m, &path, &["--json"]).stdout).unwrap();

    let (_, text) = http_get(port, "/metrics").expect("serve answers");
    assert!(
        text.contains("# TYPE gputaskman_process_energy_joules_total counter"),
        "{text}"
    );
    promtool_clean(&promtool, &text);
    for (pid, (sm, _)) in [(m.trainer.pid(), TRAINER), (m.server.pid(), SERVER)] {
        let share = f64::from(sm) / 100.0;
        let summary_j = row(&s["usage"]["processes"], pid)["kwh"].as_f64().unwrap() * 3.6e6;
        let summary_s = row(&s["usage"]["processes"], pid)["gpu_hours"].as_f64().unwrap() * 3600.0;
        // Over the recording's window, evaluated at its end.
        let end = gputaskman::units::unix_seconds(s["last"].as_str().unwrap()).unwrap();
        let window = s["usage"]["covered_s"].as_f64().unwrap().round() as u64;
        let q = |family: &str| {
            let query = format!("increase({family}{{pid=\"{pid}\"}}[{window}s])");
            wait_until(&format!("{query}\n{}", prom.log()), Duration::from_secs(30), || {
                prom.query_at(&query, end).first().map(|r| r.1)
            })
        };
        // serve and record sample the same counters on their own clocks, and
        // Prometheus scrapes each second: they agree within a sample and a
        // scrape (1.5 s at this process's share).
        let slack = share * 1.5;
        assert_near(
            "increase J",
            q("gputaskman_process_energy_joules_total"),
            summary_j,
            WATTS * slack,
        );
        assert_near(
            "increase s",
            q("gputaskman_process_gpu_seconds_total"),
            summary_s,
            slack,
        );
    }
}

/// The energy cell of the process's row (`72.0 J`, `1.2 kJ`), in joules.
fn energy_cell(screen: &str, pid: u32) -> Option<f64> {
    let line = screen.lines().find(|l| {
        l.split_whitespace().next() == Some(&format!("{pid}*")[..]) || l.trim_start().starts_with(&format!("{pid} "))
    })?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "J" || *w == "kJ")?;
    let v: f64 = words.get(at.checked_sub(1)?)?.parse().ok()?;
    Some(if words[at] == "kJ" { v * 1000.0 } else { v })
}

#[test]
fn the_live_view_sorts_by_energy_with_each_process_share() {
    let Some(tmux) = common::tmux::tmux_path() else { return };
    let m = machine();
    let t = common::tmux::Tmux::new(tmux, "usage");
    t.start(&format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {} --sort energy --interval 0.5; sleep 600",
        m.scenario.path().display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
    ));
    let (server, trainer) = (m.server.pid(), m.trainer.pid());
    // A second or more of counting at 200 W: tens of joules each.
    let screen = t.wait_for("both rows' energy", Duration::from_secs(60), |s| {
        energy_cell(s, trainer).is_some_and(|j| j >= 50.0) && energy_cell(s, server).is_some()
    });
    assert!(
        screen.contains("ENERGY↓"),
        "sorted by it, and its column shown:\n{screen}"
    );
    let place = |pid: u32| screen.lines().position(|l| l.contains(&format!("{pid}"))).unwrap();
    assert!(place(server) < place(trainer), "50 % before 30 %:\n{screen}");
    // Both were on the GPU over the same intervals: their energies stand
    // as their SM shares, whatever the intervals were.
    let ratio = energy_cell(&screen, server).unwrap() / energy_cell(&screen, trainer).unwrap();
    let want = f64::from(SERVER.0) / f64::from(TRAINER.0);
    assert_near("energy ratio", ratio, want, want * 0.03);
    // `u` picks the user: the title holds its totals, the two summed.
    t.keys(&["u"]);
    let screen = t.wait_for("the user's totals", Duration::from_secs(10), |s| {
        s.contains("since the view started)")
    });
    assert!(
        screen.contains("integrated · energy") && screen.contains("attributed (of measured)"),
        "{screen}"
    );
}
