//! Secrets in a command line never leave through any output: one process
//! whose command line carries the common spellings of API keys, tokens and
//! passwords, seen through `--once`, `--json`, `record`, `serve` (/metrics
//! and /snapshot) and the live view (tmux). Every output must show the
//! process with the redaction marker and contain none of the secret values.
//! (Unit tests of each spelling: `procs::redact::tests`.)

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{fake_nvml, free_port, Daemon, Scenario, Sleeper};
use serde_json::json;
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

/// Every secret value contains this, so one search finds any leak, whole or
/// in part.
const MARK: &str = "s3kr1t";
const REDACTED: &str = "<redacted>";

/// The command line: the spellings people use, each with its own value.
const ARGS: &[&str] = &[
    "--api-key",
    "k7Qw9s3kr1t01",
    "--api_key=k7Qw9s3kr1t02",
    "--hf-token",
    "hf_s3kr1t03abcdefghijklmnop",
    "OPENAI_API_KEY=sk-s3kr1t04abcdefghijklmnop",
    "--password=pws3kr1t05",
    "--model-url",
    "https://alice:pws3kr1t06@models.example.com/m.gguf",
    "--hook",
    "http://127.0.0.1:9/notify?token=tks3kr1t07&x=1",
    "-H",
    "Authorization: Bearer bts3kr1t08",
    "HF_TOKEN=hfs3kr1t09",
    "-token",
    "ts3kr1t10",
    "ghp_s3kr1t11abcdefghijklmnopqrstuvwxyz",
    "AWS_SECRET_ACCESS_KEY=awss3kr1t12",
    "https://tks3kr1t13@github.com/org/repo.git",
    "http://127.0.0.1:9/v1?api_key=aks3kr1t14",
    "--db-password",
    "dbs3kr1t15",
    "-H",
    "X-Api-Key: xks3kr1t16",
    "-H",
    "Authorization: Basic YWxpY2U6s3kr1t17",
];

struct Setup {
    _dir: tempfile::TempDir,
    process: Sleeper,
    scenario: Scenario,
}

/// The process on a (fake) GPU, so every view lists it by default.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let process = Sleeper::spawn(dir.path(), "llama-server", ARGS);
    let scenario = Scenario::new(&json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "memory": {"total": 17171480576u64, "used": 2147483648u64, "free": 15023996928u64},
            "compute_processes": [{"pid": process.pid(), "used_memory": 1406669824u64}],
            "graphics_processes": []
        }]
    }));
    Setup {
        _dir: dir,
        process,
        scenario,
    }
}

/// Fails naming the output and the secrets it shows.
fn assert_clean(what: &str, text: &str, pid: u32) {
    let leaks: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',')
        .filter(|w| w.contains(MARK))
        .collect();
    assert!(leaks.is_empty(), "{what} shows secrets {leaks:?}:\n{text}");
    assert!(
        text.contains(&pid.to_string()),
        "{what} does not show the process {pid}:\n{text}"
    );
    assert!(text.contains(REDACTED), "{what} has no {REDACTED}:\n{text}");
}

#[test]
fn the_command_line_is_redacted_in_once_and_json() {
    let s = setup();
    let pid = s.process.pid();
    let out = s.scenario.command().arg("--once").output().unwrap();
    assert!(out.status.success());
    assert_clean("--once", &String::from_utf8_lossy(&out.stdout), pid);

    let out = s.scenario.command().arg("--json").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_clean("--json", &text, pid);
    // Every spelling, not only the first: one marker per secret value.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cmdline = common::process(&v, pid)["cmdline"].as_str().unwrap().to_string();
    let values = ARGS.iter().filter(|a| a.contains(MARK)).count();
    assert_eq!(cmdline.matches(REDACTED).count(), values, "{cmdline}");
    assert!(
        cmdline.contains("--api-key <redacted>") && cmdline.contains("alice:<redacted>@models.example.com"),
        "{cmdline}"
    );
}

#[test]
fn the_command_line_is_redacted_in_a_recording() {
    let s = setup();
    let dir = tempfile::tempdir().unwrap();
    for name in ["r.jsonl", "r.jsonl.zst"] {
        let file = dir.path().join(name);
        let out = s
            .scenario
            .command()
            .args(["record", "-o"])
            .arg(&file)
            // Long enough for two samples on a loaded machine (the first one
            // waits for NVML and the process scan).
            .args(["--interval", "0.2", "--duration", "3"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut raw = Vec::new();
        std::fs::File::open(&file).unwrap().read_to_end(&mut raw).unwrap();
        let text = if name.ends_with(".zst") {
            // Read back through the binary (the file is compressed);
            // `summary` takes no --nvml-lib, so not the scenario's command.
            let out = assert_cmd::Command::cargo_bin("gputaskman")
                .unwrap()
                .args(["summary", "--json"])
                .arg(&file)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let summary = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(!summary.contains(MARK), "summary of {name}: {summary}");
            assert!(!raw.windows(MARK.len()).any(|w| w == MARK.as_bytes()));
            continue;
        } else {
            String::from_utf8(raw).unwrap()
        };
        assert!(text.lines().count() >= 2, "{text}");
        assert_clean(name, &text, s.process.pid());
    }
}

#[test]
fn the_command_line_is_redacted_in_serve_metrics_and_snapshot() {
    let s = setup();
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", s.scenario.path())
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")]);
    let _server = Daemon::start(cmd, port, Duration::from_secs(30));
    for path in ["/metrics", "/snapshot"] {
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            conn,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{path}: {reply}");
        assert_clean(path, &reply, s.process.pid());
    }
}

#[test]
fn the_command_line_is_redacted_in_the_live_view() {
    let Some(tmux) = tmux_path() else { return };
    let s = setup();
    let pid = s.process.pid();
    let t = Tmux::new(tmux, "secrets");
    t.start(&format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {} --interval 0.5; sleep 600",
        s.scenario.path().display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
    ));
    // The only GPU process is selected: its detail shows the command line.
    let screen = t.wait_for("the process's command line", Duration::from_secs(20), |s| {
        s.contains("cmd ") && s.contains(REDACTED)
    });
    assert_clean("the live view", &screen, pid);
    // The filter matches command lines: a secret value finds nothing.
    t.keys(&["/"]);
    t.keys(&["-l", "s3kr1t01"]);
    t.keys(&["Enter"]);
    let screen = t.wait_for("the filter", Duration::from_secs(10), |s| s.contains("s3kr1t01"));
    assert!(
        !screen
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&pid.to_string())),
        "a secret value matched the process:\n{screen}"
    );
}
