//! `gputaskman serve`: the latest sample over HTTP, for Prometheus
//! (`/metrics`), for scripts and other gputaskman instances (`/snapshot`,
//! the same JSON as `--json`), for liveness checks (`/healthz`), and for a
//! person, in a browser (`/`, the web view: src/serve/web.rs).
//!
//! Sampling is decoupled from scrapes. One sampler thread owns the
//! [`Collector`] (model discovery in the background, so a sample never
//! waits on a runtime's API) and takes a sample every `--interval`; it
//! renders the metrics text and the JSON once per sample and publishes
//! them. A scrape copies the latest rendering: however often scrapes come,
//! they never cause a sample, a probe or a render.
//!
//! Under `--remote` or `--prometheus` it serves the fleet instead of this
//! machine: a round of the hosts each interval (src/serve/fleet.rs).

pub mod access;
pub mod answer;
pub mod fleet;
pub mod health_metrics;
pub mod http;
pub mod metrics;
// A few of the poller's accessors serve only its tests.
#[cfg_attr(not(test), allow(dead_code))]
pub mod prometheus;
pub mod remote;
pub mod tls;
pub mod usage;
pub mod web;

use crate::collect::Options;
use anyhow::{bail, Context};
use clap::Args;
use http::{Body, Handler, Limits, Response, Server, Token};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Loopback only unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but a loopback address needs
    /// --token-file (or --insecure-no-auth).
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Require `Authorization: Bearer <token>` on every request; the token
    /// is this file's content (surrounding whitespace ignored).
    #[arg(long, value_name = "FILE", conflicts_with = "insecure_no_auth")]
    pub token_file: Option<PathBuf>,
    /// Serve a non-loopback address without authentication (anyone who can
    /// reach it sees every process's name, user and redacted command line).
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Serve HTTPS with this certificate chain (PEM, the server's first);
    /// needs --tls-key. Plain HTTP otherwise.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: answer only clients whose certificate chains to this CA
    /// (PEM). Authenticates clients, so another address than loopback
    /// needs no token with it.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Leave command lines out of /metrics and /snapshot altogether.
    #[arg(long)]
    pub no_cmdline: bool,
    /// Seconds between samples (default: the global --interval, 1).
    #[arg(long, value_name = "S", value_parser = crate::cli::values::seconds, allow_negative_numbers = true)]
    pub interval: Option<f64>,
}

/// The shortest sampling period: a sample of a busy machine takes tens of
/// milliseconds.
const MIN_INTERVAL: f64 = 0.1;

/// How the server is to authenticate, from the address and the flags.
#[derive(Debug)]
pub enum Auth {
    Token(Token),
    None,
    /// Mutual TLS: every client shows a certificate from the given CA.
    ClientCertificates,
    /// Not loopback, no token, and the user said so: warn.
    Insecure,
}

/// Decides authentication, or refuses with a message a person can act on.
pub fn auth_for(
    addr: SocketAddr,
    token_file: Option<&Path>,
    insecure_no_auth: bool,
    client_certificates: bool,
) -> anyhow::Result<Auth> {
    if let Some(path) = token_file {
        return Ok(Auth::Token(read_token(path)?));
    }
    if is_loopback(addr) {
        return Ok(Auth::None);
    }
    if client_certificates {
        return Ok(Auth::ClientCertificates);
    }
    if insecure_no_auth {
        return Ok(Auth::Insecure);
    }
    bail!(
        "refusing to listen on {addr}: it is not a loopback address, and /metrics and /snapshot show every \
         GPU process's name, user and command line. Give --token-file FILE (clients then send \
         `Authorization: Bearer <token>`), --tls-client-ca FILE (mutual TLS: clients show a certificate), \
         or --insecure-no-auth to serve it to anyone who can reach it"
    )
}

fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

fn read_token(path: &Path) -> anyhow::Result<Token> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--token-file {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("--token-file {}: the file is empty", path.display());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "--token-file {}: a token is one line of visible ASCII characters (no spaces)",
            path.display()
        );
    }
    if token.len() < 16 {
        eprintln!(
            "gputaskman: warning: the token in {} is {} characters; 32 or more random ones are advised",
            path.display(),
            token.len()
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                eprintln!(
                    "gputaskman: warning: {} can be read by other users (chmod 600 it)",
                    path.display()
                );
            }
        }
    }
    Ok(Token::new(token))
}

/// One sample, rendered.
pub struct Rendered {
    pub metrics: Arc<Vec<u8>>,
    pub snapshot: Arc<Vec<u8>>,
    pub at: Instant,
}

/// The latest rendering, shared by the sampler (writer) and the
/// connections (readers).
pub struct Published {
    latest: RwLock<Option<Arc<Rendered>>>,
    /// /healthz fails when the last sample is older than this.
    stale_after: Duration,
    /// The web view's page, refreshing at the sampling interval.
    page: Arc<Vec<u8>>,
}

impl Published {
    pub fn new(interval: Duration) -> Published {
        Published {
            latest: RwLock::new(None),
            stale_after: (interval * 3).max(Duration::from_secs(10)),
            page: Arc::new(web::page(interval.as_secs_f64()).into_bytes()),
        }
    }

    pub fn publish(&self, rendered: Rendered) {
        *self.latest.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(rendered));
    }

    pub fn latest(&self) -> Option<Arc<Rendered>> {
        self.latest.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Handler for Published {
    fn get(&self, path: &str) -> Option<Response> {
        let latest = self.latest();
        let body = Response::new;
        let no_sample = || Response::text(503, "no sample yet\n");
        Some(match path {
            "/" => body(200, "text/html; charset=utf-8", Body::Shared(self.page.clone())),
            "/metrics" => match latest {
                Some(r) => body(
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    Body::Shared(r.metrics.clone()),
                ),
                None => no_sample(),
            },
            "/snapshot" => match latest {
                Some(r) => body(200, "application/json", Body::Shared(r.snapshot.clone())),
                None => no_sample(),
            },
            "/healthz" => match latest {
                Some(r) if r.at.elapsed() <= self.stale_after => Response::text(200, "ok\n"),
                Some(r) => body(
                    503,
                    "text/plain; charset=utf-8",
                    Body::Owned(format!(
                        "stale: the last sample is {:.0} s old\n",
                        r.at.elapsed().as_secs_f64()
                    )),
                ),
                None => no_sample(),
            },
            _ => return web::asset(path),
        })
    }
}

/// Renders a sample for publication: the metrics text and the `--json`
/// document, command lines dropped first with `--no-cmdline`.
/// The usage counters of `ledger` follow the sample's metrics.
pub fn render(
    mut snap: crate::snapshot::Snapshot,
    no_cmdline: bool,
    sample_s: f64,
    ledger: &crate::accounting::Ledger,
) -> Rendered {
    if no_cmdline {
        for p in &mut snap.processes {
            p.cmdline = None;
        }
    }
    let mut metrics = metrics::render(
        &snap,
        metrics::SampleInfo {
            duration_s: Some(sample_s),
        },
    );
    usage::render(ledger, &mut metrics);
    let mut json = serde_json::to_vec_pretty(&snap).unwrap_or_default();
    json.push(b'\n');
    Rendered {
        metrics: Arc::new(metrics.into_bytes()),
        snapshot: Arc::new(json),
        at: Instant::now(),
    }
}

/// Starts the sampler thread ([`crate::collect::spawn_sampler`]); each
/// sample is rendered and published.
fn start_sampler(options: Options, interval: Duration, no_cmdline: bool, published: Arc<Published>) {
    // Every process is read every sample: /snapshot lists them all.
    let every_sample = Arc::new(std::sync::atomic::AtomicU32::new(1));
    // A sample that comes more than three periods late (a stalled
    // machine) leaves a gap in the counters rather than a guess.
    let mut ledger = crate::accounting::Ledger::new(crate::accounting::gap_limit(interval.as_secs_f64()));
    crate::collect::spawn_sampler(options, interval, every_sample, move |snap, took| {
        ledger.observe(&snap);
        if let Some(now) = ledger.last_at {
            ledger.prune(now, crate::accounting::KEEP_EXITED_S);
        }
        published.publish(render(snap, no_cmdline, took.as_secs_f64(), &ledger));
        true
    });
}

/// `gputaskman serve`: never returns but with an error.
pub fn run(args: &ServeArgs, options: Options, default_interval: f64) -> anyhow::Result<()> {
    serve_with(args, default_interval, "a sample", |interval, published| {
        start_sampler(options, interval, args.no_cmdline, published)
    })
}

/// `gputaskman --remote HOSTS serve` and `--prometheus URL serve`: the
/// fleet `source` gathers, served (src/serve/fleet.rs).
pub fn run_fleet(args: &ServeArgs, source: Box<dyn remote::FleetSource>, default_interval: f64) -> anyhow::Result<()> {
    let every = format!("a round of the {} hosts", source.flag());
    let no_cmdline = args.no_cmdline;
    serve_with(args, default_interval, &every, |interval, published| {
        remote::spawn_rounds(source, interval, move |mut fleet, took| {
            let now = Instant::now();
            let snapshot = fleet::snapshot_json(&mut fleet, now, no_cmdline);
            published.publish(Rendered {
                metrics: Arc::new(fleet::metrics(&fleet, now, took).into_bytes()),
                snapshot: Arc::new(snapshot),
                at: now,
            });
            true
        })
    })
}

/// Checks the flags, listens, starts what publishes (`start`, given the
/// interval) and answers once there is a first publication; `every` names
/// what comes each interval, for the ready line.
fn serve_with(
    args: &ServeArgs,
    default_interval: f64,
    every: &str,
    start: impl FnOnce(Duration, Arc<Published>),
) -> anyhow::Result<()> {
    let interval = args.interval.unwrap_or(default_interval);
    // Bounded by `cli::values::seconds`; this floor is serve's own.
    if interval < MIN_INTERVAL {
        bail!("--interval {interval}: give a number of seconds, at least {MIN_INTERVAL}");
    }
    let interval = Duration::from_secs_f64(interval);
    let addr: SocketAddr = args.listen.parse().with_context(|| {
        format!(
            "--listen {}: give an IP address and port, e.g. {DEFAULT_LISTEN} or [::1]:9464",
            args.listen
        )
    })?;
    let auth = auth_for(
        addr,
        args.token_file.as_deref(),
        args.insecure_no_auth,
        args.tls_client_ca.is_some(),
    )?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::server_config(&tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        })?),
        _ => None,
    };
    let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let token = match auth {
        Auth::Token(t) => Some(t),
        Auth::None | Auth::ClientCertificates => None,
        Auth::Insecure => {
            eprintln!(
                "gputaskman: WARNING: serving {bound} without authentication (--insecure-no-auth): anyone who can \
                 reach it sees every GPU process's name, user{} on this machine",
                if args.no_cmdline {
                    ""
                } else {
                    " and (redacted) command line"
                }
            );
            None
        }
    };
    let authenticated = token.is_some();

    let published = Arc::new(Published::new(interval));
    start(interval, published.clone());
    // Answer only once there is something to answer with.
    while published.latest().is_none() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "ready: serving {}://{bound}/ (the web view), /metrics, /snapshot and /healthz{}{}; {every} every {} s",
        if tls.is_some() { "https" } else { "http" },
        if authenticated {
            " (Authorization: Bearer required; the page asks for the token)"
        } else {
            ""
        },
        if args.tls_client_ca.is_some() {
            " (a client certificate required)"
        } else {
            ""
        },
        interval.as_secs_f64()
    )?;
    stdout.flush()?;
    drop(stdout);
    Server::new(listener, Limits::default(), token, tls, published)
        .context("serve")?
        .run();
    bail!("the server stopped")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_goes_without_a_token() {
        let lo: SocketAddr = "127.0.0.1:9464".parse().unwrap();
        let lo6: SocketAddr = "[::1]:9464".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9464".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9464".parse().unwrap();
        let lan: SocketAddr = "192.168.1.2:9464".parse().unwrap();
        for a in [lo, lo6, mapped] {
            assert!(matches!(auth_for(a, None, false, false), Ok(Auth::None)), "{a}");
        }
        for a in [any, lan] {
            let e = auth_for(a, None, false, false).unwrap_err().to_string();
            assert!(
                e.contains("not a loopback address") && e.contains("--token-file"),
                "{e}"
            );
            assert!(matches!(auth_for(a, None, true, false), Ok(Auth::Insecure)));
            // Mutual TLS authenticates every client.
            assert!(matches!(auth_for(a, None, false, true), Ok(Auth::ClientCertificates)));
        }
    }

    #[test]
    fn a_token_file_is_read_trimmed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "  abcdefghijklmnopqrstuvwxyz\n").unwrap();
        let any: SocketAddr = "0.0.0.0:9464".parse().unwrap();
        let Ok(Auth::Token(t)) = auth_for(any, Some(&file), false, false) else {
            panic!("a token")
        };
        assert!(t.matches(b"abcdefghijklmnopqrstuvwxyz"));
        std::fs::write(&file, "\n").unwrap();
        assert!(auth_for(any, Some(&file), false, false)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        std::fs::write(&file, "two words").unwrap();
        assert!(auth_for(any, Some(&file), false, false).is_err());
        assert!(auth_for(any, Some(&dir.path().join("missing")), false, false).is_err());
    }

    #[test]
    fn no_cmdline_drops_command_lines_from_both_renderings() {
        let snap = metrics::tests::snapshot();
        let kept = render(snap.clone(), false, 0.01, &Default::default());
        assert!(String::from_utf8_lossy(&kept.metrics).contains("cmdline=\""));
        assert!(String::from_utf8_lossy(&kept.snapshot).contains("--api-key <redacted>"));
        let dropped = render(snap, true, 0.01, &Default::default());
        assert!(!String::from_utf8_lossy(&dropped.metrics).contains("cmdline="));
        let json: serde_json::Value = serde_json::from_slice(&dropped.snapshot).unwrap();
        assert!(json["processes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["cmdline"].is_null()));
    }

    #[test]
    fn healthz_turns_unhealthy_when_samples_stop() {
        let p = Published::new(Duration::from_millis(100));
        assert_eq!(p.get("/healthz").unwrap().status, 503);
        assert_eq!(p.get("/metrics").unwrap().status, 503);
        p.publish(render(metrics::tests::snapshot(), false, 0.0, &Default::default()));
        assert_eq!(p.get("/healthz").unwrap().status, 200);
        assert_eq!(p.get("/metrics").unwrap().status, 200);
        assert!(p.get("/other").is_none());
    }
}
