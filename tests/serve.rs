//! `gputaskman serve` end to end: the real binary against the fake NVML
//! with real child processes in the scenario, scraped by a real Prometheus,
//! checked by promtool, and attacked over loopback.

mod common;

use common::prometheus::{promtool_clean, tool, wait_until, Prometheus};
use common::{free_port, serve, Scenario, Sleeper};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const USED: u64 = 5_379_194_880;
const LLAMA_VRAM: u64 = 1_406_669_824;

fn data(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// One device with a llama-server (known VRAM, a model file on its command
/// line) and a game whose VRAM the driver cannot say (WDDM-style null).
fn scenario(name: &str, used: u64, llama: u32, game: Option<u32>) -> Value {
    let mut graphics = vec![];
    if let Some(g) = game {
        graphics.push(json!({"pid": g, "used_memory": null}));
    }
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": name,
            "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 17171480576u64, "used": used, "free": 17171480576u64 - used, "reserved": 0},
            "utilization": {"gpu": 15, "memory": 30},
            "temperature_c": 37,
            "power_mw": 26000,
            "power_limit_mw": 320000,
            "compute_processes": [{"pid": llama, "used_memory": LLAMA_VRAM}],
            "graphics_processes": graphics,
            "process_utilization": [{"pid": llama, "sm": 15, "mem": 3, "enc": 0, "dec": 0}]
        }]
    })
}

/// The processes of a scenario: real, named like what they pretend to be.
struct Machine {
    dir: tempfile::TempDir,
    llama: Sleeper,
    game: Sleeper,
    scenario: Scenario,
}

fn machine(device_name: &str, used: u64) -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let model = data("gguf/qwen3-0.6b-shape.gguf");
    let llama = Sleeper::spawn(
        dir.path(),
        "llama-server",
        &["-m", &model, "-c", "4096", "--api-key", "sk-live-secret-value"],
    );
    let game = Sleeper::spawn(dir.path(), "game", &[]);
    let scenario = Scenario::new(&scenario(device_name, used, llama.pid(), Some(game.pid())));
    Machine {
        dir,
        llama,
        game,
        scenario,
    }
}

struct Reply {
    status: u16,
    head: String,
    body: String,
}

/// Sends `request` as it is and reads the reply to the end.
fn raw(port: u16, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the reply");
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

fn get(port: u16, path: &str, headers: &[&str]) -> Reply {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    raw(port, req.as_bytes())
}

/// The sample lines of one metric family.
fn series<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .collect()
}

/// The value of the one series of `name` whose labels contain all `having`.
fn value(text: &str, name: &str, having: &[&str]) -> Option<f64> {
    let found: Vec<&str> = series(text, name)
        .into_iter()
        .filter(|l| having.iter().all(|h| l.contains(h)))
        .collect();
    assert!(found.len() <= 1, "several series match: {found:#?}");
    found.first().map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
}

#[test]
fn metrics_carry_the_scenario_with_labels_and_nothing_for_unknowns() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &["--interval", "0.2"]);
    let llama = format!("pid=\"{}\"", m.llama.pid());
    let game = format!("pid=\"{}\"", m.game.pid());
    // Discovery runs in the background: wait for the model to land.
    let text = wait_until("the model series", Duration::from_secs(20), || {
        let r = get(server.port, "/metrics", &[]);
        assert_eq!(r.status, 200);
        assert!(r.head.contains("Content-Type: text/plain; version=0.0.4"), "{}", r.head);
        series(&r.body, "gputaskman_model_estimated_kv_bytes")
            .iter()
            .any(|l| l.contains(&llama))
            .then_some(r.body)
    });
    let dev = [
        "backend=\"nvml\"",
        "device=\"0\"",
        "uuid=\"GPU-11111111-2222-3333-4444-555555555555\"",
    ];
    assert_eq!(
        value(&text, "gputaskman_device_memory_used_bytes", &dev),
        Some(USED as f64)
    );
    assert_eq!(
        value(&text, "gputaskman_device_memory_total_bytes", &dev),
        Some(17171480576.0)
    );
    assert_eq!(value(&text, "gputaskman_device_utilization_ratio", &dev), Some(0.15));
    assert_eq!(value(&text, "gputaskman_device_memory_activity_ratio", &dev), Some(0.3));
    assert_eq!(value(&text, "gputaskman_device_temperature_celsius", &dev), Some(37.0));
    assert_eq!(value(&text, "gputaskman_device_power_watts", &dev), Some(26.0));
    assert_eq!(value(&text, "gputaskman_device_power_limit_watts", &dev), Some(320.0));
    assert_eq!(
        value(&text, "gputaskman_device_unattributed_memory_bytes", &dev),
        Some((USED - LLAMA_VRAM) as f64)
    );
    // The fake device has no fan: no series, not a 0.
    assert!(series(&text, "gputaskman_device_fan_speed_ratio").is_empty());
    let info = series(&text, "gputaskman_device_info");
    assert!(info[0].contains("name=\"NVIDIA GeForce RTX 4080 SUPER\""), "{info:?}");

    let vram = series(&text, "gputaskman_process_vram_bytes");
    assert_eq!(vram.len(), 1, "the game's VRAM is unknown: no series for it\n{text}");
    let line = vram[0];
    for label in [
        llama.as_str(),
        "process=\"llama-server\"",
        "kind=\"ai\"",
        "runtime=\"llama.cpp\"",
        "backend=\"nvml\"",
        "device=\"0\"",
        "uuid=\"GPU-11111111-2222-3333-4444-555555555555\"",
    ] {
        assert!(line.contains(label), "{label} missing: {line}");
    }
    assert!(line.ends_with(&format!(" {LLAMA_VRAM}")), "{line}");
    assert_eq!(
        value(
            &text,
            "gputaskman_process_gpu_utilization_ratio",
            &[&llama, "engine=\"sm\""]
        ),
        Some(0.15)
    );
    assert!(value(&text, "gputaskman_process_info", &[&game]).is_some());
    // Secrets stay redacted in the command line label.
    let pinfo = series(&text, "gputaskman_process_info");
    assert!(pinfo.iter().any(|l| l.contains("--api-key <redacted>")), "{pinfo:#?}");
    assert!(!text.contains("sk-live-secret-value"));

    // The model: estimate and reported under different names, its labels.
    // (Other tests' llama-servers run too: only this one's series count.)
    let kv: Vec<&str> = series(&text, "gputaskman_model_estimated_kv_bytes")
        .into_iter()
        .filter(|l| l.contains(&llama))
        .collect();
    assert_eq!(kv.len(), 1, "{text}");
    for label in [
        llama.as_str(),
        "architecture=\"qwen3\"",
        "evidence=\"cmdline\"",
        "path=\"",
    ] {
        assert!(kv[0].contains(label), "{label} missing: {}", kv[0]);
    }
    assert!(kv[0].ends_with(&format!(" {}", 448u64 << 20)), "{}", kv[0]);
    assert_eq!(value(&text, "gputaskman_model_context_tokens", &[&llama]), Some(4096.0));
    // Every family has HELP and TYPE.
    for name in [
        "gputaskman_device_memory_used_bytes",
        "gputaskman_process_vram_bytes",
        "gputaskman_model_estimated_kv_bytes",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}");
        assert!(text.contains(&format!("# TYPE {name} gauge\n")), "{name}");
    }
    assert_eq!(get(server.port, "/healthz", &[]).body, "ok\n");
    assert_eq!(get(server.port, "/nothing", &[]).status, 404);
}

#[test]
fn promtool_accepts_the_metrics() {
    let Some(promtool) = tool("promtool") else { return };
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &["--interval", "0.2"]);
    // The model's series and its reconciliation row (the parts and the
    // signed rest), so that promtool lints those families too.
    let text = wait_until("the model series", Duration::from_secs(20), || {
        let body = get(server.port, "/metrics", &[]).body;
        let shown = |name| !series(&body, name).is_empty();
        (shown("gputaskman_model_estimated_kv_bytes")
            && shown("gputaskman_process_estimated_part_bytes")
            && shown("gputaskman_process_unexplained_bytes"))
        .then_some(body)
    });
    promtool_clean(&promtool, &text);
}

#[test]
fn snapshot_is_the_json_of_dash_dash_json() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &[]);
    let r = get(server.port, "/snapshot", &[]);
    assert_eq!(r.status, 200);
    assert!(r.head.contains("Content-Type: application/json"));
    let served: Value = serde_json::from_str(&r.body).unwrap();
    let once = m.scenario.json(&["--json"]);
    let schema = common::schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&served), "/snapshot does not follow the schema");
    assert_eq!(served["devices"], once["devices"]);
    // The scenario's GPU processes: AI processes that other tests start
    // meanwhile may come and go between the two snapshots.
    let pids = |s: &Value| {
        let mut p: Vec<u64> = s["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| !p["gpu"].as_array().unwrap().is_empty())
            .map(|p| p["pid"].as_u64().unwrap())
            .collect();
        p.sort();
        p
    };
    assert!(pids(&served).contains(&u64::from(m.llama.pid())), "{served:#}");
    assert_eq!(pids(&served), pids(&once));
    let llama = common::process(&served, m.llama.pid());
    assert!(llama["cmdline"].as_str().unwrap().contains("--api-key <redacted>"));
}

#[test]
fn no_cmdline_drops_command_lines_everywhere() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &["--no-cmdline"]);
    let snap: Value = serde_json::from_str(&get(server.port, "/snapshot", &[]).body).unwrap();
    assert!(snap["processes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["cmdline"].is_null()));
    let text = get(server.port, "/metrics", &[]).body;
    assert!(!series(&text, "gputaskman_process_info").is_empty());
    assert!(!text.contains("cmdline="), "{text}");
    assert!(!text.contains("--api-key"));
}

#[test]
fn scrapes_read_the_latest_sample_and_never_take_one() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &["--interval", "3600"]);
    // The first two samples come at once and 250 ms later; the second is
    // the first with CPU%. The next is an hour away.
    let first = wait_until("the second sample", Duration::from_secs(20), || {
        let body = get(server.port, "/metrics", &[]).body;
        (!series(&body, "gputaskman_process_cpu_ratio").is_empty()).then_some(body)
    });
    let stamp = series(&first, "gputaskman_sample_timestamp_seconds")[0].to_string();
    for _ in 0..200 {
        let body = get(server.port, "/metrics", &[]).body;
        assert_eq!(body, first, "a scrape changed the metrics");
    }
    assert_eq!(series(&first, "gputaskman_sample_timestamp_seconds")[0], stamp);
}

#[test]
fn series_of_an_exited_process_are_gone_from_the_next_sample() {
    let mut m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &["--interval", "0.2"]);
    let game = format!("pid=\"{}\"", m.game.pid());
    let llama = format!("pid=\"{}\"", m.llama.pid());
    let text = get(server.port, "/metrics", &[]).body;
    assert!(text.contains(&game));
    // The game exits: the driver stops listing it and /proc loses it.
    std::fs::write(
        m.scenario.path(),
        serde_json::to_vec_pretty(&scenario("NVIDIA GeForce RTX 4080 SUPER", USED, m.llama.pid(), None)).unwrap(),
    )
    .unwrap();
    drop(std::mem::replace(
        &mut m.game,
        Sleeper::spawn(m.dir.path(), "other", &[]),
    ));
    // Its gauges go with the next sample; its usage counters stay (for
    // accounting::KEEP_EXITED_S), so increase() over a window keeps what it used.
    let text = wait_until("the game's series to go", Duration::from_secs(10), || {
        let body = get(server.port, "/metrics", &[]).body;
        let gauges = body
            .lines()
            .filter(|l| l.contains(&game))
            .all(|l| l.split('{').next().is_some_and(|name| name.ends_with("_total")));
        gauges.then_some(body)
    });
    assert!(value(&text, "gputaskman_process_vram_bytes", &[&llama]).is_some());
    assert!(value(&text, "gputaskman_process_gpu_seconds_total", &[&game]).is_some());
}

/// A token file readable by its owner only.
fn token_file(dir: &Path, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn with_a_token_every_request_needs_it() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let file = token_file(m.dir.path(), TOKEN);
    let server = serve(m.scenario.path(), &["--token-file", file.to_str().unwrap()]);
    for path in ["/metrics", "/snapshot", "/healthz", "/nothing"] {
        let none = get(server.port, path, &[]);
        assert_eq!(none.status, 401, "{path} without a token");
        assert!(none.head.contains("WWW-Authenticate: Bearer"));
        assert!(!none.body.contains("gputaskman_"));
        let wrong = get(
            server.port,
            path,
            &["Authorization: Bearer 0123456789abcdef0123456789abcdeX"],
        );
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
        let short = get(server.port, path, &["Authorization: Bearer 0123"]);
        assert_eq!(short.status, 401);
        let basic = get(server.port, path, &[&format!("Authorization: Basic {TOKEN}")]);
        assert_eq!(basic.status, 401);
    }
    let ok = get(server.port, "/metrics", &[&format!("Authorization: Bearer {TOKEN}")]);
    assert_eq!(ok.status, 200);
    assert!(ok.body.contains("gputaskman_device_memory_used_bytes"));
    let lower = get(server.port, "/healthz", &[&format!("authorization: bearer {TOKEN}")]);
    assert_eq!(lower.status, 200);
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    for addr in ["0.0.0.0", "192.0.2.1", "[::]"] {
        let out = m
            .scenario
            .command()
            .args(["serve", "--listen", &format!("{addr}:{}", free_port())])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{addr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("refusing to listen on")
                && err.contains("not a loopback address")
                && err.contains("--token-file"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    // A token file that is missing is an error too, not an open server.
    let out = m
        .scenario
        .command()
        .args(["serve", "--listen", "0.0.0.0:1", "--token-file", "/nonexistent/token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-file /nonexistent/token"));
}

#[test]
fn oversized_and_non_get_requests_are_rejected() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &[]);
    let port = server.port;
    let huge = format!("GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "a".repeat(64 * 1024));
    let r = raw(port, huge.as_bytes());
    assert_eq!(r.status, 431);
    assert!(!r.body.contains("gputaskman_"));
    let many = format!("GET /metrics HTTP/1.1\r\n{}\r\n", "X-A: b\r\n".repeat(100));
    assert_eq!(raw(port, many.as_bytes()).status, 431);
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(4096));
    assert_eq!(raw(port, long.as_bytes()).status, 414);
    let body = raw(port, b"GET /metrics HTTP/1.1\r\nContent-Length: 1000000\r\n\r\nabc");
    assert_eq!(body.status, 413);
    for method in ["POST", "PUT", "DELETE", "HEAD", "OPTIONS"] {
        let r = raw(port, format!("{method} /metrics HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(r.status, 405, "{method}");
        assert!(r.head.contains("Allow: GET"));
    }
    assert_eq!(raw(port, b"garbage\r\n\r\n").status, 400);
    // The query string changes nothing.
    let a = get(port, "/snapshot?x=1", &[]);
    assert_eq!(a.status, 200);
    // And after all that the server still serves.
    assert_eq!(get(port, "/healthz", &[]).status, 200);
}

#[test]
fn slow_connections_do_not_starve_a_normal_request() {
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let server = serve(m.scenario.path(), &[]);
    let port = server.port;
    // 100 connections that send nothing, 100 that trickle a request head
    // a byte at a time and never finish it.
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let trickling: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let head = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
            let mut i = 0;
            let mut socks = trickling;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for s in &mut socks {
                    let _ = s.write_all(&[head.get(i).copied().unwrap_or(b'a')]);
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            socks
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let started = Instant::now();
        let r = get(port, "/metrics", &[]);
        slowest = slowest.max(started.elapsed());
        assert_eq!(r.status, 200);
        assert!(r.body.contains("gputaskman_device_memory_used_bytes"));
    }
    assert!(
        slowest < Duration::from_millis(500),
        "a normal request took {slowest:?}"
    );
    // The slow ones are cut: with 408 at the read deadline (2 s), or with
    // 503 sooner when a newer connection needed the slot.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut socks = trickler.join().unwrap();
    let mut cut = 0;
    for s in socks.iter_mut() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        if out.starts_with("HTTP/1.1 408 ") || out.starts_with("HTTP/1.1 503 ") {
            cut += 1;
        }
    }
    assert_eq!(cut, 100, "every trickling connection gets 408 or 503");
    drop(idle);
    assert_eq!(get(port, "/healthz", &[]).status, 200);
}

#[test]
fn a_real_prometheus_scrapes_the_scenario() {
    let Some(prometheus) = tool("prometheus") else { return };
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let file = token_file(m.dir.path(), TOKEN);
    let server = serve(
        m.scenario.path(),
        &["--interval", "0.5", "--token-file", file.to_str().unwrap()],
    );
    let prom = Prometheus::start(&prometheus, server.port, Some(&file));
    let llama = m.llama.pid().to_string();
    let game = m.game.pid().to_string();

    let query = |q: &str| {
        wait_until(
            &format!("{q} in Prometheus\n{}", prom.log()),
            Duration::from_secs(60),
            || {
                let r = prom.query(q);
                (!r.is_empty()).then_some(r)
            },
        )
    };
    let up = query("up{job=\"gputaskman\"} == 1");
    assert_eq!(up.len(), 1);
    let used = query("gputaskman_device_memory_used_bytes");
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].1, USED as f64);
    assert_eq!(used[0].0["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(used[0].0["device"], "0");
    let util = query("gputaskman_device_utilization_ratio");
    assert_eq!(util[0].1, 0.15);
    let vram = query(&format!("gputaskman_process_vram_bytes{{pid=\"{llama}\"}}"));
    assert_eq!(vram.len(), 1);
    assert_eq!(vram[0].1, LLAMA_VRAM as f64);
    let labels = &vram[0].0;
    assert_eq!(labels["process"], "llama-server");
    assert_eq!(labels["kind"], "ai");
    assert_eq!(labels["runtime"], "llama.cpp");
    assert_eq!(labels["device"], "0");
    assert_eq!(labels["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    // The game is listed, its VRAM unknown: an info series, no VRAM series.
    assert_eq!(query(&format!("gputaskman_process_info{{pid=\"{game}\"}}")).len(), 1);
    assert!(prom
        .query(&format!("gputaskman_process_vram_bytes{{pid=\"{game}\"}}"))
        .is_empty());
    let kv = query(&format!("gputaskman_model_estimated_kv_bytes{{pid=\"{llama}\"}}"));
    assert_eq!(kv[0].1, (448u64 << 20) as f64);
    assert_eq!(kv[0].0["architecture"], "qwen3");
    assert_eq!(kv[0].0["evidence"], "cmdline");
    // Measured sum per device through PromQL matches the attribution.
    let sum = query("sum by (device) (gputaskman_process_vram_bytes)");
    assert_eq!(sum[0].1, LLAMA_VRAM as f64);

    // Every query of the Grafana dashboard is valid PromQL, and those on
    // what the scenario has give series.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/grafana/gputaskman.json"))
            .unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(
                target["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$instance", ".*")
                    .replace("$device", ".*"),
            );
        }
    }
    assert!(exprs.len() >= 10);
    for expr in &exprs {
        let result = prom.query(expr);
        let has_data = [
            "vram_bytes",
            "memory_used_bytes",
            "unattributed",
            "estimated_kv",
            "model_info",
        ]
        .iter()
        .any(|m| expr.contains(m))
            && !expr.contains("spill");
        if has_data {
            assert!(!result.is_empty(), "no series for the dashboard's {expr}");
        }
    }
}

#[test]
fn remote_lists_every_host_and_says_which_stopped_answering() {
    let a = machine("GPU of host A", 1 << 30);
    let b = machine("GPU of host B", 2 << 30);
    let c = machine("GPU of host C", 3 << 30);
    let sa = serve(a.scenario.path(), &[]);
    let sb = serve(b.scenario.path(), &[]);
    let sc = serve(c.scenario.path(), &[]);
    let list = format!(
        "http://127.0.0.1:{},127.0.0.1:{},http://127.0.0.1:{}/",
        sa.port, sb.port, sc.port
    );
    let fleet = |list: &str| {
        let out = assert_cmd::Command::cargo_bin("gputaskman")
            .unwrap()
            .args(["--remote", list, "--json"])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let f = fleet(&list);
    let hosts = f["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3);
    for (h, (name, used, port)) in hosts.iter().zip([
        ("GPU of host A", 1u64 << 30, sa.port),
        ("GPU of host B", 2 << 30, sb.port),
        ("GPU of host C", 3 << 30, sc.port),
    ]) {
        assert_eq!(h["label"], format!("127.0.0.1:{port}"));
        assert_eq!(h["status"], "ok");
        assert_eq!(h["stale"], false);
        let d = &h["snapshot"]["devices"][0];
        assert_eq!(d["name"], name);
        assert_eq!(d["memory_used_bytes"], used);
    }
    let text = assert_cmd::Command::cargo_bin("gputaskman")
        .unwrap()
        .args(["--remote", &list, "--once"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    for port in [sa.port, sb.port, sc.port] {
        assert!(
            text.contains(&format!("== 127.0.0.1:{port} (http://127.0.0.1:{port}/snapshot): ok")),
            "{text}"
        );
    }

    drop(sb);
    let f = fleet(&list);
    let hosts = f["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3, "a host that stops answering is not dropped");
    assert_eq!(hosts[0]["status"], "ok");
    assert!(
        hosts[1]["status"].as_str().unwrap().starts_with("no answer: "),
        "{:#}",
        hosts[1]
    );
    assert!(hosts[1]["error"].is_string());
    assert_eq!(hosts[2]["status"], "ok");

    // The live fleet view is not wired into the terminal view yet.
    let live = assert_cmd::Command::cargo_bin("gputaskman")
        .unwrap()
        .args(["--remote", &list])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert_eq!(live.status.code(), Some(2));
}

/// The server's thread count, from /proc.
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

/// One authenticated scrape of /metrics with a 1 s budget: its status
/// (None when it did not answer in time) and how long it took.
fn scrape_within_a_second(port: u16) -> (Option<u16>, Duration) {
    let started = Instant::now();
    let status = (|| {
        let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let req = format!("GET /metrics HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).ok()?;
        let text = String::from_utf8_lossy(&out);
        let status = text.split(' ').nth(1)?.parse().ok()?;
        (status != 200 || text.contains("gputaskman_device_memory_used_bytes")).then_some(status)
    })();
    (status, started.elapsed())
}

#[test]
fn a_slow_loris_flood_neither_starves_authenticated_scrapes_nor_grows_threads() {
    const ATTACKERS: usize = 530;
    const SCRAPES: usize = 40;
    // The server's cap on connection threads (serve::http::Limits).
    const CONNECTIONS: usize = 64;
    let m = machine("NVIDIA GeForce RTX 4080 SUPER", USED);
    let file = token_file(m.dir.path(), TOKEN);
    let server = serve(m.scenario.path(), &["--token-file", file.to_str().unwrap()]);
    let (port, pid) = (server.port, server.pid());
    // The sampler, discovery, accept and rejecter threads, before the
    // attack (after one request: "ready" is printed before the accept loop
    // starts its rejecter): a connection thread counts against the cap
    // until it is joined, so the attack adds at most CONNECTIONS to these.
    assert_eq!(
        get(port, "/healthz", &[&format!("Authorization: Bearer {TOKEN}")]).status,
        200
    );
    std::thread::sleep(Duration::from_millis(100));
    let at_rest = threads(pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Keeps 530 connections open, each sending one more byte of a head
    // that never ends every 0.5 s, and opens a new one for each that the
    // server cuts. Loopback only; it stops when told or after 30 s.
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let addr = ([127, 0, 0, 1], port).into();
            let head = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
            let mut socks: Vec<Option<(TcpStream, usize)>> = (0..ATTACKERS).map(|_| None).collect();
            let (mut opened, until) = (0, Instant::now() + Duration::from_secs(30));
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < until {
                for slot in &mut socks {
                    let alive = slot.as_mut().is_some_and(|(s, i)| {
                        *i += 1;
                        s.write_all(&[head.get(*i).copied().unwrap_or(b'a')]).is_ok()
                    });
                    if !alive {
                        *slot = TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                            .ok()
                            .filter(|mut s| s.write_all(&head[..1]).is_ok())
                            .map(|s| (s, 0));
                        opened += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            opened
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let mut most_threads = threads(pid);
    let mut answered = Vec::new();
    let mut statuses = Vec::new();
    for _ in 0..SCRAPES {
        let (status, took) = scrape_within_a_second(port);
        most_threads = most_threads.max(threads(pid));
        statuses.push(status);
        if status == Some(200) && took < Duration::from_secs(1) {
            answered.push(took);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let opened = attacker.join().unwrap();
    answered.sort();
    let (p50, max) = (answered.get(answered.len() / 2).copied(), answered.last().copied());
    eprintln!(
        "slow loris: {opened} attacking connections opened; {} of {SCRAPES} scrapes 200 within 1 s \
         (p50 {p50:?}, max {max:?}); at most {most_threads} server threads ({at_rest} at rest)",
        answered.len()
    );
    assert!(opened >= ATTACKERS, "the attack ran: {opened}");
    assert!(
        answered.len() * 100 >= SCRAPES * 95,
        "{} of {SCRAPES} scrapes answered 200 within 1 s: {statuses:?}",
        answered.len()
    );
    assert!(
        most_threads <= at_rest + CONNECTIONS,
        "the server grew to {most_threads} threads ({at_rest} at rest)"
    );
    assert_eq!(
        get(port, "/healthz", &[&format!("Authorization: Bearer {TOKEN}")]).status,
        200
    );
}

#[test]
fn implausible_driver_values_never_become_series() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &[]);
    let mut s = scenario("NVIDIA H100 80GB HBM3", 1 << 30, llama.pid(), None);
    let device = &mut s["devices"][0];
    device["utilization"] = json!({"gpu": 250, "memory": 30});
    device["temperature_c"] = json!(4294967295u64);
    device["process_utilization"] = json!([{"pid": llama.pid(), "sm": 4294967295u64, "mem": 3, "enc": 0, "dec": 0}]);
    let scenario = Scenario::new(&s);
    let server = serve(scenario.path(), &[]);
    let body = wait_until("a sample with the memory series", Duration::from_secs(20), || {
        let body = get(server.port, "/metrics", &[]).body;
        (!series(&body, "gputaskman_device_memory_used_bytes").is_empty()).then_some(body)
    });
    // The help text says 0 to 1: a 2.5 never reaches it, nor 2^32-1 °C.
    assert_eq!(
        series(&body, "gputaskman_device_utilization_ratio"),
        Vec::<&str>::new(),
        "{body}"
    );
    assert_eq!(
        series(&body, "gputaskman_device_temperature_celsius"),
        Vec::<&str>::new()
    );
    assert_eq!(
        series(&body, "gputaskman_process_gpu_utilization_ratio"),
        Vec::<&str>::new()
    );
    assert_eq!(value(&body, "gputaskman_device_memory_activity_ratio", &[]), Some(0.3));
}
