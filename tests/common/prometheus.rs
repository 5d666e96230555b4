//! A real Prometheus for the tests that check what it makes of `serve`'s
//! metrics (`tests/serve.rs`, `tests/usage.rs`), and the tools around it.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program on PATH; None (the caller's test is skipped, said on stderr)
/// without it.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!("SKIPPED: {name} is not installed (Debian package prometheus; .ci/run installs it)");
    }
    found
}

pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An HTTP/1.0 GET on loopback: (status, body); None when it cannot connect.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_with(port, path, &[])
}

/// [`http_get`] with extra header lines (`Authorization: Bearer …`).
pub fn http_get_with(port: u16, path: &str, headers: &[&str]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{extra}\r\n").ok()?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).ok()?;
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let (head, body) = reply.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// A Prometheus on loopback with its own config and storage, killed and
/// reaped when dropped. The Debian package's service is never used.
pub struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes 127.0.0.1:`target_port` every second, with the bearer token
    /// in `token_file` where one is given.
    pub fn start(binary: &Path, target_port: u16, token_file: Option<&Path>) -> Prometheus {
        let authorization = token_file
            .map(|f| {
                format!(
                    "\x20   authorization:\n      type: Bearer\n      credentials_file: {}\n",
                    f.display()
                )
            })
            .unwrap_or_default();
        Prometheus::start_with(binary, target_port, &authorization)
    }

    /// Scrapes 127.0.0.1:`target_port` every second with `scrape` (lines
    /// of the scrape config, indented four spaces: `scheme`, `tls_config`,
    /// `authorization`) added.
    pub fn start_with(binary: &Path, target_port: u16, scrape: &str) -> Prometheus {
        let authorization = scrape;
        Prometheus::with_config(
            binary,
            &format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: gputaskman\n    scrape_interval: 1s\n    scrape_timeout: 1s\n\
                 {authorization}\
                 \x20   static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
    }

    /// Prometheus on a port of its own with this `prometheus.yml`, ready.
    pub fn with_config(binary: &Path, yaml: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, yaml).unwrap();
        let port = super::free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, port, _dir: dir };
        wait_until("prometheus to be ready", Duration::from_secs(60), || {
            http_get(port, "/-/ready").and_then(|(status, _)| (status == 200).then_some(()))
        });
        p
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The instant vector of `query`: (labels, value) per series.
    pub fn query(&self, query: &str) -> Vec<(Value, f64)> {
        self.query_path(&format!("/api/v1/query?query={}", encode(query)))
    }

    /// The same, evaluated at `unix_s`.
    pub fn query_at(&self, query: &str, unix_s: f64) -> Vec<(Value, f64)> {
        self.query_path(&format!("/api/v1/query?query={}&time={unix_s:.3}", encode(query)))
    }

    fn query_path(&self, path: &str) -> Vec<(Value, f64)> {
        let (status, body) = http_get(self.port, path).expect("prometheus answers");
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{v}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["metric"].clone(),
                    s["value"][1].as_str().unwrap().parse::<f64>().unwrap(),
                )
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encoding for a query string value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// promtool's `check metrics` finds nothing to say about `text`.
pub fn promtool_clean(promtool: &Path, text: &str) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = super::said(&out);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{text}"
    );
}

/// Runs the shipped rules under `promtool test rules` on `input` (series
/// scraped every minute), expecting `alert_rule_test`.
pub fn promtool_test_rules(promtool: &Path, dir: &Path, input: Vec<Value>, alert_rule_test: Value) {
    let tests = serde_json::json!({
        "rule_files": [concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/prometheus/gputaskman-alerts.yml")],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input, "alert_rule_test": alert_rule_test}]
    });
    // JSON is YAML: promtool reads it as it is.
    let file = dir.join("alerts-test.yml");
    std::fs::write(&file, serde_json::to_vec_pretty(&tests).unwrap()).unwrap();
    let out = std::process::Command::new(promtool)
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    let said = super::said(&out);
    assert!(out.status.success(), "promtool test rules: {said}\n{tests:#}");
    assert!(said.contains("SUCCESS"), "{said}");
}
