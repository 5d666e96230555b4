//! An NVML whose start hangs (`nvmlInit_v2` never returns, as on a driver
//! stuck in a GPU reset): the real binary on the fake NVML must still
//! answer. One-shots within the watchdog's deadline with the backend line
//! saying NVML is starting, `serve` binds and answers /healthz, `record
//! --duration` ends on time and on SIGTERM, `model` prints its report.

mod common;

use common::{backend, fake_nvml, free_port, Daemon, Scenario};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One ordinary GPU behind an init that sleeps ten minutes.
fn hung_start() -> Scenario {
    Scenario::new(&json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "hang_ms": {"nvmlInit_v2": 600_000},
        "devices": [{
            "name": "NVIDIA L4",
            "memory": {"total": 24152899584u64, "used": 1073741824u64, "free": 23079157760u64, "reserved": 0}
        }]
    }))
}

/// The nvml line says it is starting, with how long it has waited, and
/// nothing is made up meanwhile.
fn assert_starting(snap: &serde_json::Value) {
    let nvml = backend(snap, "nvml");
    assert_eq!(nvml["status"], "error", "{nvml}");
    let detail = nvml["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("starting: NVML's initialisation (nvmlInit_v2) has not returned for ")
            && detail.ends_with("no values yet"),
        "{detail}"
    );
    assert_eq!(snap["devices"], json!([]));
    assert_eq!(snap["attribution"]["measured_sum_bytes"], serde_json::Value::Null);
}

#[test]
fn a_one_shot_answers_within_the_deadline_while_nvml_init_hangs() {
    let sc = hung_start();
    let mut json = sc.command();
    let started = Instant::now();
    let out = json.arg("--json").timeout(Duration::from_secs(20)).output().unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{:?} after {took:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_starting(&serde_json::from_slice(&out.stdout).unwrap());

    let out = sc
        .command()
        .arg("--once")
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("nvml: ERROR: starting: NVML's initialisation"), "{text}");

    // `model` reads the roomiest GPU through NVML for its fit line.
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/qwen3-0.6b-shape.gguf");
    let mut fit = sc.command();
    let started = Instant::now();
    let out = fit
        .args(["model", model])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(out.status.success(), "{:?} after {took:?}", out.status);
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("qwen3"));
}

/// GET `path` on loopback `port`: the status and the body.
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

#[test]
fn serve_binds_and_answers_healthz_while_nvml_init_hangs() {
    let sc = hung_start();
    let port = free_port();
    let lib = fake_nvml();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", sc.path())
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--nvml-lib")
        .arg(lib)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--interval", "1"]);
    let started = Instant::now();
    // Waits at most 15 s for "ready" (it never came before: the init ran
    // on the main thread ahead of the sampler).
    let _serve = Daemon::start(cmd, port, Duration::from_secs(15));
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    let (status, body) = get(port, "/healthz");
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(port, "/snapshot");
    assert_eq!(status, 200);
    assert_starting(&serde_json::from_str(&body).unwrap());
    // Later samples do not wait on the hung init again: the next ones come
    // every interval, so /healthz stays healthy.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(get(port, "/healthz").0, 200);
}

#[test]
fn record_ends_at_its_duration_and_on_sigterm_while_nvml_init_hangs() {
    let sc = hung_start();
    let dir = tempfile::tempdir().unwrap();
    // Built (on the first call) before any clock starts.
    let lib = fake_nvml();
    let record = |file: &str, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
        cmd.env("FAKE_NVML_SCENARIO", sc.path())
            .env_remove("GPUTASKMAN_NVML_LIB")
            .arg("--nvml-lib")
            .arg(&lib)
            .args(["record", "-o"])
            .arg(dir.path().join(file))
            .args(["--interval", "0.5"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let wait = |child: &mut std::process::Child, limit: Duration| {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    let started = Instant::now();
    let mut timed = record("timed.jsonl", &["--duration", "2"]);
    let status = wait(&mut timed, Duration::from_secs(15));
    let took = started.elapsed();
    assert!(status.is_some_and(|s| s.success()), "{status:?} after {took:?}");
    // One deadline (3 s) for the first sample, then the duration is up.
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let first = std::fs::read_to_string(dir.path().join("timed.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_starting(&first);

    let mut endless = record("endless.jsonl", &[]);
    std::thread::sleep(Duration::from_secs(1));
    let signalled = Instant::now();
    // SAFETY: a signal to our own child, not yet reaped.
    unsafe { libc::kill(endless.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait(&mut endless, Duration::from_secs(15));
    let took = signalled.elapsed();
    assert!(status.is_some_and(|s| s.success()), "{status:?} after {took:?}");
    // At most one deadline: the sample in progress ends first.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
