//! `serve` over TLS end to end: certificates made by openssl, the real
//! Prometheus (Debian's) scraping over HTTPS and with a client
//! certificate (mutual TLS), curl as a client with and without one, and
//! the token over TLS.

mod common;

use common::prometheus::{tool, wait_until, Prometheus};
use common::{free_port, Daemon, Scenario};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const TOKEN: &str = "tls-token-0123456789abcdef01234567";

/// The tools these tests drive; None (after a SKIPPED line) where one is
/// missing, which CI (which installs them) takes for a failure.
fn tools() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let found = (tool("openssl"), tool("curl"), tool("prometheus"));
    match found {
        (Some(openssl), Some(curl), Some(prometheus)) => Some((openssl, curl, prometheus)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "the TLS tests need openssl, curl and prometheus"
            );
            None
        }
    }
}

fn openssl(openssl: &Path, dir: &Path, args: &[&str]) {
    let out = Command::new(openssl).current_dir(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate,
/// both signed by it, under `dir`: ca.pem, server.{pem,key}, client.{pem,key}.
fn certificates(tool: &Path, dir: &Path) {
    let p256 = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(p256);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=gputaskman test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(tool, dir, &ca);
    for (who, usage, san) in [
        ("server", "serverAuth", "IP:127.0.0.1"),
        ("client", "clientAuth", "DNS:prometheus"),
    ] {
        let mut req = vec!["req"];
        req.extend(p256);
        let (key, csr, pem, subj) = (
            format!("{who}.key"),
            format!("{who}.csr"),
            format!("{who}.pem"),
            format!("/CN={who}"),
        );
        req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(tool, dir, &req);
        let ext = format!("{who}.ext");
        std::fs::write(
            dir.join(&ext),
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage={usage}\nsubjectAltName={san}\n"),
        )
        .unwrap();
        openssl(
            tool,
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        );
    }
}

/// `serve` over TLS with the certificates in `dir`, on `listen`.
fn serve_tls(scenario: &Path, dir: &Path, listen: &str, extra: &[&str]) -> Daemon {
    let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", scenario)
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--nvml-lib")
        .arg(common::fake_nvml())
        .args(["serve", "--interval", "0.5", "--listen", listen])
        .arg("--tls-cert")
        .arg(dir.join("server.pem"))
        .arg("--tls-key")
        .arg(dir.join("server.key"))
        .args(extra);
    Daemon::start(cmd, port, Duration::from_secs(30))
}

/// curl's HTTP status for `path` (0 when no HTTP answer came: refused in
/// the handshake) and its body.
fn curl(curl: &Path, port: u16, path: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new(curl)
        .args(["-s", "-m", "10", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn machine() -> Scenario {
    Scenario::new(
        &json!({"driver_version": "580.159.03", "cuda_driver_version": 13000, "devices": [{
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
            "memory": {"total": 85520809984u64, "used": 2000000000u64, "free": 83520809984u64}
        }]}),
    )
}

/// Waits for Prometheus to have scraped the target successfully, and
/// returns one of its series.
fn scraped(prometheus: &Prometheus) -> f64 {
    wait_until("a successful scrape over TLS", Duration::from_secs(60), || {
        let up = prometheus.query("up{job=\"gputaskman\"}");
        if up.first().map(|(_, v)| *v) != Some(1.0) {
            return None;
        }
        let used = prometheus.query("gputaskman_device_memory_used_bytes");
        used.first().map(|(_, v)| *v)
    })
}

#[test]
fn prometheus_scrapes_serve_over_https_and_plain_http_gets_no_answer() {
    let Some((openssl_bin, curl_bin, prometheus_bin)) = tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    certificates(&openssl_bin, dir.path());
    let s = machine();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let port = free_port();
    let token_arg = token.to_string_lossy().into_owned();
    let server = serve_tls(
        s.path(),
        dir.path(),
        &format!("127.0.0.1:{port}"),
        &["--token-file", &token_arg],
    );
    let ca = dir.path().join("ca.pem").to_string_lossy().into_owned();

    // The token still works over TLS, and is still needed.
    let auth = format!("Authorization: Bearer {TOKEN}");
    let (status, body) = curl(&curl_bin, server.port, "/healthz", &["--cacert", &ca, "-H", &auth]);
    assert_eq!((status, body.trim()), (200, "ok"));
    assert_eq!(curl(&curl_bin, server.port, "/metrics", &["--cacert", &ca]).0, 401);
    // The browser's sign-in: its session cookie is Secure over TLS.
    let form = format!("token={TOKEN}");
    let (status, headers) = curl(
        &curl_bin,
        server.port,
        "/login",
        &["--cacert", &ca, "-D", "-", "-d", &form],
    );
    assert_eq!(status, 303, "{headers}");
    let cookie = headers
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_default();
    assert!(
        cookie.contains("HttpOnly") && cookie.trim_end().ends_with("; Secure"),
        "{headers}"
    );
    // A certificate the client does not trust: no answer at all.
    assert_eq!(curl(&curl_bin, server.port, "/healthz", &["-H", &auth]).0, 0);
    // Plain HTTP to the TLS port gets no HTTP answer, and the server goes on.
    let plain = common::prometheus::http_get(server.port, "/healthz");
    assert!(plain.as_ref().is_none_or(|(status, _)| *status != 200), "{plain:?}");

    let prometheus = Prometheus::start_with(
        &prometheus_bin,
        server.port,
        &format!(
            "\x20   scheme: https\n    tls_config:\n      ca_file: {ca}\n    authorization:\n      type: Bearer\n      credentials_file: {}\n",
            token.display()
        ),
    );
    assert_eq!(scraped(&prometheus), 2000000000.0, "{}", prometheus.log());
}

#[test]
fn with_a_client_ca_only_clients_with_its_certificate_are_answered() {
    let Some((openssl_bin, curl_bin, prometheus_bin)) = tools() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    certificates(&openssl_bin, dir.path());
    let s = machine();
    let ca = dir.path().join("ca.pem").to_string_lossy().into_owned();
    let (cert, key) = (
        dir.path().join("client.pem").to_string_lossy().into_owned(),
        dir.path().join("client.key").to_string_lossy().into_owned(),
    );
    // Every address, no token: mutual TLS is the authentication.
    let port = free_port();
    let server = serve_tls(
        s.path(),
        dir.path(),
        &format!("0.0.0.0:{port}"),
        &["--tls-client-ca", &ca],
    );
    let (status, body) = curl(
        &curl_bin,
        server.port,
        "/snapshot",
        &["--cacert", &ca, "--cert", &cert, "--key", &key],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("NVIDIA H100 80GB HBM3"), "{body}");
    // No certificate, or one the CA did not sign (the server's own): refused.
    assert_eq!(curl(&curl_bin, server.port, "/snapshot", &["--cacert", &ca]).0, 0);
    let (own, own_key) = (
        dir.path().join("server.pem").to_string_lossy().into_owned(),
        dir.path().join("server.key").to_string_lossy().into_owned(),
    );
    let self_signed = dir.path().join("other");
    std::fs::create_dir(&self_signed).unwrap();
    certificates(&openssl_bin, &self_signed);
    let (stranger, stranger_key) = (
        self_signed.join("client.pem").to_string_lossy().into_owned(),
        self_signed.join("client.key").to_string_lossy().into_owned(),
    );
    assert_eq!(
        curl(
            &curl_bin,
            server.port,
            "/snapshot",
            &["--cacert", &ca, "--cert", &stranger, "--key", &stranger_key]
        )
        .0,
        0
    );
    // The server's certificate is for serving, not for a client.
    assert_eq!(
        curl(
            &curl_bin,
            server.port,
            "/snapshot",
            &["--cacert", &ca, "--cert", &own, "--key", &own_key]
        )
        .0,
        0
    );

    // gputaskman's own --remote, with the CA and the client certificate;
    // without the certificate the host is named as not answering.
    let remote = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gputaskman"))
            .args(["--remote", &format!("https://127.0.0.1:{}", server.port), "--json"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = remote(&["--remote-ca", &ca, "--remote-cert", &cert, "--remote-key", &key]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("NVIDIA H100 80GB HBM3"),
        "{out:?}"
    );
    let out = remote(&["--remote-ca", &ca]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no --remote host answered"),
        "{out:?}"
    );
    let out = remote(&[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs --remote-ca"),
        "{out:?}"
    );

    let prometheus = Prometheus::start_with(
        &prometheus_bin,
        server.port,
        &format!("\x20   scheme: https\n    tls_config:\n      ca_file: {ca}\n      cert_file: {cert}\n      key_file: {key}\n"),
    );
    assert_eq!(scraped(&prometheus), 2000000000.0, "{}", prometheus.log());
}

#[test]
fn tls_files_that_do_not_serve_are_refused_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("server.pem"), "not a certificate\n").unwrap();
    std::fs::write(dir.path().join("server.key"), "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gputaskman"))
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--tls-cert")
        .arg(dir.path().join("server.pem"))
        .arg("--tls-key")
        .arg(dir.path().join("server.key"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("--tls-cert") && said.contains("no CERTIFICATE block"),
        "{said}"
    );
    // A key without a certificate is a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_gputaskman"))
        .args(["serve", "--tls-key"])
        .arg(dir.path().join("server.key"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
