//! The fleet view's data: several hosts' `gputaskman serve` polled for
//! `/snapshot`, each snapshot tagged with the host it came from, and the
//! last good one kept, with its age, when a host stops answering. A host
//! that goes quiet is shown stale, never dropped.
//!
//! [`RemoteFeed`] polls on a thread of its own and hands over a [`Fleet`]
//! after every round; [`Fleet::devices`] and [`Fleet::processes`] flatten
//! it into host-tagged rows. As a live-view [`Feed`] it hands the view one
//! merged [`Snapshot`] (see [`Fleet::merged`]): every device gets a
//! fleet-wide index and its place (its host and the host's own label,
//! [`FleetPlace`]), every process its host, and a host that stopped
//! answering is an error line with the age of what is shown, its devices
//! marked stale. A [`FleetSource`] makes the rounds: [`Poller`] asks each
//! host, `super::prometheus` asks Prometheus once for all of them.
//!
//! Requests are plain GETs with a timeout, a bounded body, no proxy and no
//! redirects (as in `models/probe.rs`), to the addresses the user named.

use crate::snapshot::{
    Attribution, Backend, BackendStatus, Device, FleetPlace, Host, Process, QueryError, Snapshot, SCHEMA_VERSION,
};
use crate::view::safe_text::escape;
use crate::view::tui::feed::{Feed, FeedCommand, Update};
use anyhow::{bail, Context};
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one host may take to answer.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// The largest snapshot read (a machine with thousands of GPU processes
/// stays far below it).
pub const BODY_LIMIT: u64 = 64 << 20;
/// The port of `gputaskman serve` when a host is named without one.
pub const DEFAULT_PORT: u16 = 9464;

/// A host to poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// What the view shows in its host column: `host:port` as given.
    pub label: String,
    /// The snapshot's URL.
    pub url: String,
}

/// Parses `--remote`: a comma-separated list of `http://host:port` or
/// `https://host:port` (`http://` and the port may be left out;
/// `/snapshot` may be given).
pub fn parse_targets(list: &str) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (scheme, rest) = if let Some(rest) = item.strip_prefix("http://") {
            ("http", rest)
        } else if let Some(rest) = item.strip_prefix("https://") {
            ("https", rest)
        } else if item.contains("://") {
            bail!("--remote {item}: give http://host:port or https://host:port");
        } else {
            ("http", item)
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if !matches!(path, "" | "/" | "/snapshot") {
            bail!("--remote {item}: give the server's address (http://host:port), not a path");
        }
        if authority.is_empty() || authority.contains('@') {
            bail!("--remote {item}: give host:port (credentials go in a token file, not in the URL)");
        }
        let has_port = match authority.rfind(':') {
            Some(i) => !authority[i..].contains(']') && authority[i + 1..].parse::<u16>().is_ok(),
            None => false,
        };
        let authority = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{DEFAULT_PORT}")
        };
        // A host named twice (`a` and `http://a:9464`) is one host.
        if !targets.iter().any(|t: &Target| t.label == authority) {
            targets.push(Target {
                url: format!("{scheme}://{authority}/snapshot"),
                label: authority,
            });
        }
    }
    if targets.is_empty() {
        bail!("--remote: give at least one host, e.g. http://hostA:{DEFAULT_PORT}");
    }
    Ok(targets)
}

/// What is known of one host.
#[derive(Debug, Clone)]
pub struct HostState {
    pub target: Target,
    /// The last snapshot the host sent, kept when it stops answering;
    /// shared, so that a round hands the fleet over without copying it.
    pub snapshot: Option<Arc<Snapshot>>,
    /// When that snapshot arrived.
    pub received: Option<Instant>,
    /// Why the last poll failed; None when it succeeded.
    pub error: Option<String>,
    /// Polls failed in a row.
    pub failures: u32,
}

impl HostState {
    /// A host known by its label and URL, not polled yet.
    pub(crate) fn new(target: Target) -> HostState {
        HostState {
            target,
            snapshot: None,
            received: None,
            error: None,
            failures: 0,
        }
    }

    /// How old the snapshot shown is.
    pub fn age(&self, now: Instant) -> Option<Duration> {
        self.received.map(|r| now.saturating_duration_since(r))
    }

    /// The host stopped answering; what is shown is its last answer.
    pub fn is_stale(&self) -> bool {
        self.error.is_some() && self.snapshot.is_some()
    }

    /// The host's name for a view: its label, with the hostname it reports
    /// when that says more.
    pub fn name(&self) -> String {
        match self.snapshot.as_ref().and_then(|s| s.host.hostname.as_deref()) {
            Some(h) if !self.target.label.starts_with(h) => format!("{h} ({})", self.target.label),
            _ => self.target.label.clone(),
        }
    }

    /// One line: `ok`, `stale: last answer 12 s ago (...)`, `no answer yet`.
    pub fn status(&self, now: Instant) -> String {
        let age = self.age(now).map(|a| a.as_secs_f64());
        match (&self.error, age) {
            (None, Some(_)) => "ok".into(),
            (None, None) => "not polled yet".into(),
            (Some(e), Some(age)) => format!("stale: last answer {age:.0} s ago ({e})"),
            (Some(e), None) => format!("no answer: {e}"),
        }
    }
}

/// Every host after one round of polling.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub hosts: Vec<HostState>,
    /// Why the round could not be made at all (Prometheus did not answer);
    /// the hosts are then the last round's, each marked with it.
    pub error: Option<String>,
}

/// What makes the fleet's rounds: [`Poller`] asks every host itself,
/// `super::prometheus::PromPoller` asks Prometheus once for all of them.
pub trait FleetSource: Send {
    /// One round. A host that fails is a host with an error; the round
    /// itself fails only with [`Fleet::error`].
    fn poll(&mut self) -> Fleet;
    /// The flag that named the source, for messages (`--remote`).
    fn flag(&self) -> &'static str;
}

impl Fleet {
    /// Every device of every host with a snapshot, tagged with the host, in
    /// host order.
    pub fn devices(&self) -> Vec<(&HostState, &Device)> {
        self.hosts
            .iter()
            .flat_map(|h| {
                h.snapshot
                    .iter()
                    .flat_map(move |s| s.devices.iter().map(move |d| (h, d)))
            })
            .collect()
    }

    /// Every process of every host, tagged with the host, the most measured
    /// device memory first (unknown last).
    pub fn processes(&self) -> Vec<(&HostState, &Process)> {
        let mut rows: Vec<(&HostState, &Process)> = self
            .hosts
            .iter()
            .flat_map(|h| {
                h.snapshot
                    .iter()
                    .flat_map(move |s| s.processes.iter().map(move |p| (h, p)))
            })
            .collect();
        let vram = |p: &Process| {
            let known: Vec<u64> = p.gpu.iter().filter_map(|g| g.vram_bytes).collect();
            (!known.is_empty()).then(|| known.iter().sum::<u64>())
        };
        rows.sort_by_key(|r| std::cmp::Reverse(vram(r.1)));
        rows
    }
}

/// How the view names each host: the hostname each reports when those are
/// all different, else the label (`host:port`) the user gave.
fn short_names(hosts: &[HostState]) -> Vec<String> {
    let names: Vec<Option<&str>> = hosts
        .iter()
        .map(|h| h.snapshot.as_ref().and_then(|s| s.host.hostname.as_deref()))
        .collect();
    let unique = names.iter().all(|n| n.is_some()) && names.iter().enumerate().all(|(i, n)| !names[..i].contains(n));
    hosts
        .iter()
        .zip(&names)
        .map(|(h, n)| match (unique, n) {
            (true, Some(n)) => n.to_string(),
            _ => h.target.label.clone(),
        })
        .collect()
}

impl Fleet {
    /// The whole fleet as one snapshot for a view that shows one machine:
    /// devices numbered across the fleet, each with its host and the host's
    /// own label (`fleet`), processes with their host, one backend line per host saying how it
    /// answered (with the age of a stale host's last answer), a stale
    /// host's devices marked stale, and a host that never answered shown as
    /// a device-less entry with its error. Nothing is summed across hosts
    /// but measured bytes (the attribution is recomputed).
    pub fn merged(&self, now: Instant) -> Snapshot {
        let names = short_names(&self.hosts);
        let mut backends = Vec::new();
        let mut devices: Vec<Device> = Vec::new();
        let mut processes = Vec::new();
        for (h, name) in self.hosts.iter().zip(&names) {
            let ok = h.error.is_none() && h.snapshot.is_some();
            let mut detail = h.status(now);
            if h.is_stale() {
                detail.push_str("; showing its last answer");
            }
            backends.push(Backend {
                name: format!("host {name}"),
                status: if ok { BackendStatus::Ok } else { BackendStatus::Error },
                detail,
            });
            let Some(snap) = &h.snapshot else {
                devices.push(Device {
                    index: devices.len() as u32,
                    backend: "remote".into(),
                    name: Some("no answer".into()),
                    fleet: Some(FleetPlace {
                        host: name.clone(),
                        label: "-".into(),
                    }),
                    process_list_complete: false,
                    errors: vec![QueryError {
                        query: format!("GET {}", h.target.url),
                        message: h.error.clone().unwrap_or_else(|| "not polled yet".into()),
                    }],
                    ..Device::default()
                });
                continue;
            };
            for b in snap.backends.iter().filter(|b| b.status != BackendStatus::Ok) {
                backends.push(Backend {
                    name: format!("{name} {}", b.name),
                    ..b.clone()
                });
            }
            let mut index = HashMap::new();
            for d in &snap.devices {
                let mut d = d.clone();
                // The host's own label, before the fleet's numbering.
                let label = d.label();
                let fleet_index = devices.len() as u32;
                index.insert((d.backend.clone(), d.index), fleet_index);
                d.index = fleet_index;
                // A MIG instance's GPU comes before it in the host's list.
                d.parent = d
                    .parent
                    .and_then(|parent| index.get(&(d.backend.clone(), parent)).copied());
                d.fleet = Some(FleetPlace {
                    host: name.clone(),
                    label,
                });
                if h.is_stale() {
                    d.stale = true;
                    d.notes.push(format!("{name}: {}", h.status(now)));
                }
                devices.push(d);
            }
            for p in &snap.processes {
                let mut p = p.clone();
                p.host = Some(name.clone());
                for g in &mut p.gpu {
                    // An entry naming a device the host did not list keeps
                    // an index no device has, rather than another host's.
                    g.device = index.get(&(g.source.clone(), g.device)).copied().unwrap_or(u32::MAX);
                }
                if h.is_stale() {
                    p.notes.push(format!("{name}: {}", h.status(now)));
                }
                processes.push(p);
            }
        }
        if let Some(e) = &self.error {
            backends.insert(
                0,
                Backend {
                    name: "fleet".into(),
                    status: BackendStatus::Error,
                    detail: e.clone(),
                },
            );
        }
        let taken_at = crate::units::now_rfc3339();
        // The rows come from every host: the shortest of their windows.
        let cpu_window_seconds = self
            .hosts
            .iter()
            .filter_map(|h| h.snapshot.as_ref()?.cpu_window_seconds)
            .reduce(f64::min);
        Snapshot {
            schema_version: SCHEMA_VERSION,
            taken_at,
            cpu_window_seconds,
            host: Host {
                hostname: Some(format!(
                    "{} host{}",
                    self.hosts.len(),
                    if self.hosts.len() == 1 { "" } else { "s" }
                )),
                os: std::env::consts::OS.into(),
                os_name: None,
                kernel: None,
                wsl: false,
                container: false,
            },
            backends,
            attribution: Attribution::compute(&devices, &processes),
            devices,
            processes,
        }
    }

    /// The fleet as text for `--remote ... --once`: each host's status line
    /// and its snapshot as `--once` prints it (rows fitted to `width`).
    pub fn to_text(&self, now: Instant, width: Option<usize>) -> String {
        let mut out = String::new();
        for (h, name) in self.hosts.iter().zip(short_names(&self.hosts)) {
            // The name and the status quote what the host answered.
            let head = format!("== {name} ({}): {}", h.target.url, h.status(now));
            out.push_str(&escape(head));
            out.push('\n');
            if let Some(s) = &h.snapshot {
                out.push_str(&crate::view::text::render(s, width));
            }
            out.push('\n');
        }
        out
    }
}

/// Reads the token for `--remote-token-file`.
pub fn read_token(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--remote-token-file {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "--remote-token-file {}: a token is one line of visible ASCII characters",
            path.display()
        );
    }
    Ok(token.to_string())
}

/// How the `--remote` hosts are reached: the token sent to them, and the
/// TLS files for https:// hosts.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub token_file: Option<std::path::PathBuf>,
    pub tls: super::tls::ClientFiles,
}

impl Access {
    /// The poller of the hosts in `list` (`--remote`).
    pub fn poller(&self, list: &str) -> anyhow::Result<Poller> {
        let (targets, token, agent) = self.open(list)?;
        Ok(Poller::new(targets, token.as_deref(), agent))
    }

    /// The targets, the token and the client for them; an https:// host
    /// without `--remote-ca` is refused (no system roots are read).
    fn open(&self, list: &str) -> anyhow::Result<(Vec<Target>, Option<String>, ureq::Agent)> {
        let targets = parse_targets(list)?;
        if let Some(t) = targets.iter().find(|t| t.url.starts_with("https://")) {
            if self.tls.ca.is_none() {
                bail!(
                    "--remote {}: an https:// host needs --remote-ca FILE, the CA its certificate chains to",
                    t.label
                );
            }
        }
        let token = self.token_file.as_deref().map(read_token).transpose()?;
        let agent = super::tls::client_agent(&self.tls, TIMEOUT)?;
        Ok((targets, token, agent))
    }
}

/// `gputaskman --remote URLS`: the live view over every host, polled each
/// `interval` seconds.
pub fn run_live(list: &str, access: &Access, interval: f64, look: crate::view::tui::Look) -> anyhow::Result<()> {
    run_live_source(Box::new(access.poller(list)?), interval, look)
}

/// The live view over the fleet `source` gathers, a round each `interval`
/// seconds.
pub fn run_live_source(
    source: Box<dyn FleetSource>,
    interval: f64,
    look: crate::view::tui::Look,
) -> anyhow::Result<()> {
    // Bounded (more than 0, at most a day) by `cli::values::seconds`.
    let interval = Duration::from_secs_f64(interval);
    crate::view::tui::term::require_terminal()?;
    // Other machines' PIDs: no signal from here ever reaches them.
    let look = crate::view::tui::Look { readonly: true, ..look };
    crate::view::tui::run_feed(Box::new(RemoteFeed::start(source, interval)), look)
}

/// Polls every host, in parallel.
pub struct Poller {
    agent: ureq::Agent,
    authorization: Option<String>,
    hosts: Vec<HostState>,
}

impl Poller {
    /// `token`: sent as `Authorization: Bearer` to every host, through
    /// `agent` ([`Access`]'s, with TLS where asked).
    pub fn new(targets: Vec<Target>, token: Option<&str>, agent: ureq::Agent) -> Poller {
        Poller {
            agent,
            authorization: token.map(|t| format!("Bearer {t}")),
            hosts: targets.into_iter().map(HostState::new).collect(),
        }
    }

    /// One round: every host at once, so a host that hangs costs one
    /// timeout, not one per host.
    pub fn poll(&mut self) -> Fleet {
        let this = &*self;
        let results: Vec<Result<Snapshot, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = this
                .hosts
                .iter()
                .map(|h| {
                    let url = h.target.url.as_str();
                    scope.spawn(move || this.fetch(url))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("the poller panicked".into())))
                .collect()
        });
        let now = Instant::now();
        for (host, result) in self.hosts.iter_mut().zip(results) {
            match result {
                Ok(snapshot) => {
                    host.snapshot = Some(Arc::new(snapshot));
                    host.received = Some(now);
                    host.error = None;
                    host.failures = 0;
                }
                Err(e) => {
                    host.error = Some(e);
                    host.failures += 1;
                }
            }
        }
        Fleet {
            hosts: self.hosts.clone(),
            error: None,
        }
    }

    fn fetch(&self, url: &str) -> Result<Snapshot, String> {
        let mut request = self.agent.get(url);
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request.call().map_err(|e| e.to_string())?;
        match response.status().as_u16() {
            200 => {}
            401 => return Err("HTTP 401: the host wants a token (or another one)".into()),
            s => return Err(format!("HTTP {s}")),
        }
        super::answer::read(&read_body(&mut response, BODY_LIMIT)?)
    }
}

/// An answer's body, at most `limit` bytes (more is an error, not a cut).
pub fn read_body(response: &mut ureq::http::Response<ureq::Body>, limit: u64) -> Result<Vec<u8>, String> {
    response
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| e.to_string())
}

/// A poller on a thread of its own: a round every `interval`, each handed
/// over as a [`Fleet`]. Never blocks the caller.
pub struct RemoteFeed {
    /// Each round, with how long it took.
    rx: Receiver<(Fleet, Duration)>,
    stopped: bool,
    interval: Duration,
    /// How long the last round took: when longer than the interval, the
    /// view refreshes at that pace, and says so.
    round: Option<Duration>,
    /// The last round's hosts: (answering, stale, never answered).
    counts: Option<(usize, usize, usize)>,
    /// `remote` or `prometheus`, for the status line.
    source: &'static str,
}

impl FleetSource for Poller {
    fn poll(&mut self) -> Fleet {
        Poller::poll(self)
    }

    fn flag(&self) -> &'static str {
        "--remote"
    }
}

impl RemoteFeed {
    pub fn start(poller: Box<dyn FleetSource>, interval: Duration) -> RemoteFeed {
        let (tx, rx) = mpsc::channel();
        let flag = poller.flag();
        spawn_rounds(poller, interval, move |fleet, took| tx.send((fleet, took)).is_ok()); // until the view goes
        RemoteFeed {
            rx,
            stopped: false,
            interval,
            round: None,
            counts: None,
            source: flag.trim_start_matches('-'),
        }
    }

    /// The newest round since the last call, if any.
    pub fn latest(&mut self) -> Option<Fleet> {
        let mut last = None;
        loop {
            match self.rx.try_recv() {
                Ok((f, took)) => {
                    self.counts = Some(count(&f));
                    self.round = Some(took);
                    last = Some(f)
                }
                Err(TryRecvError::Empty) => return last,
                Err(TryRecvError::Disconnected) => {
                    self.stopped = true;
                    return last;
                }
            }
        }
    }

    /// Waits up to `timeout` for the next round.
    pub fn next(&mut self, timeout: Duration) -> Option<Fleet> {
        let (fleet, took) = self.rx.recv_timeout(timeout).ok()?;
        self.counts = Some(count(&fleet));
        self.round = Some(took);
        Some(fleet)
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }
}

/// Makes a round of `source` every `interval` (back to back when slower),
/// on a thread of its own, handing each to `each` until it says stop.
pub fn spawn_rounds(
    mut source: Box<dyn FleetSource>,
    interval: Duration,
    mut each: impl FnMut(Fleet, Duration) -> bool + Send + 'static,
) {
    std::thread::Builder::new()
        .name("gputaskman-fleet".into())
        .spawn(move || loop {
            let started = Instant::now();
            let fleet = source.poll();
            if !each(fleet, started.elapsed()) {
                return;
            }
            if let Some(rest) = interval.checked_sub(started.elapsed()) {
                std::thread::sleep(rest);
            }
        })
        .expect("spawn the fleet's poller");
}

fn count(f: &Fleet) -> (usize, usize, usize) {
    let ok = f
        .hosts
        .iter()
        .filter(|h| h.error.is_none() && h.snapshot.is_some())
        .count();
    let stale = f.hosts.iter().filter(|h| h.is_stale()).count();
    (ok, stale, f.hosts.len() - ok - stale)
}

impl Feed for RemoteFeed {
    fn poll(&mut self, now: Instant) -> Option<Update> {
        self.latest().map(|f| Update::Next(Box::new(f.merged(now))))
    }

    fn command(&mut self, _command: FeedCommand, _now: Instant) {}

    fn status(&self) -> String {
        if self.stopped {
            return format!("{}: the poller stopped", self.source);
        }
        let every = match self.round.filter(|r| *r > self.interval) {
            Some(r) => format!(
                "{}, every {:.1} s (a round takes {:.1} s)",
                self.source,
                self.interval.as_secs_f64(),
                r.as_secs_f64()
            ),
            None => format!("{}, every {:.1} s", self.source, self.interval.as_secs_f64()),
        };
        match self.counts {
            None => format!("{every}: waiting for the first answers"),
            Some((ok, 0, 0)) => format!("{every}: {ok} answering"),
            Some((ok, stale, none)) => {
                format!("{every}: {ok} answering, {stale} stale, {none} never answered")
            }
        }
    }

    fn next_due(&self) -> Option<Instant> {
        None
    }

    fn is_replay(&self) -> bool {
        false
    }

    fn interval_s(&self) -> f64 {
        self.interval.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::super::http::{tests::Fixed, Limits, Server, Token};
    use super::*;
    use std::net::TcpListener;
    use std::sync::Arc;

    #[test]
    fn targets_take_the_usual_spellings() {
        let t = parse_targets("http://hostA:9464, hostB,http://[::1]:9500/snapshot,10.0.0.3/").unwrap();
        let urls: Vec<&str> = t.iter().map(|t| t.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://hostA:9464/snapshot",
                "http://hostB:9464/snapshot",
                "http://[::1]:9500/snapshot",
                "http://10.0.0.3:9464/snapshot"
            ]
        );
        assert_eq!(t[1].label, "hostB:9464");
        assert_eq!(parse_targets("[::1]").unwrap()[0].label, "[::1]:9464");
        // One host named twice is one host (one series, one page entry).
        assert_eq!(parse_targets("a,http://a:9464,https://a:9464/").unwrap().len(), 1);
        for bad in ["", "ftp://a:1", "http://user:pw@a:1", "https://a:1/metrics", ","] {
            assert!(parse_targets(bad).is_err(), "{bad}");
        }
    }

    /// A host serving a fixed snapshot whose hostname is `name`.
    fn host(name: &str, vram: u64, token: Option<&str>) -> super::super::http::Handle {
        let mut snap = super::super::metrics::tests::snapshot();
        snap.host.hostname = Some(name.into());
        snap.processes[0].gpu[0].vram_bytes = Some(vram);
        let body = Arc::new(serde_json::to_vec(&snap).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Server::new(
            listener,
            Limits::default(),
            token.map(Token::new),
            None,
            Arc::new(Fixed(body)),
        )
        .unwrap()
        .spawn()
        .unwrap()
    }

    /// The client `--remote` uses without TLS.
    fn agent() -> ureq::Agent {
        crate::models::probe::agent(TIMEOUT)
    }

    fn target(handle: &super::super::http::Handle) -> Target {
        parse_targets(&format!("http://{}", handle.addr())).unwrap().remove(0)
    }

    #[test]
    fn a_host_that_stops_answering_turns_stale_with_its_age_and_stays() {
        let a = host("alpha", 1 << 30, None);
        let b = host("beta", 3 << 30, None);
        let c = host("gamma", 2 << 30, None);
        let mut poller = Poller::new(vec![target(&a), target(&b), target(&c)], None, agent());
        let fleet = poller.poll();
        let names: Vec<String> = fleet.hosts.iter().map(|h| h.name()).collect();
        assert!(names[0].starts_with("alpha (127.0.0.1:"), "{names:?}");
        assert!(fleet.hosts.iter().all(|h| h.error.is_none() && !h.is_stale()));
        assert_eq!(fleet.devices().len(), 3);
        // Rows of every host, the largest measured VRAM first, each tagged.
        let rows = fleet.processes();
        assert_eq!(rows.len(), 6);
        let top: Vec<_> = rows
            .iter()
            .take(3)
            .map(|(h, p)| (h.snapshot.as_ref().unwrap().host.hostname.clone().unwrap(), p.pid))
            .collect();
        assert_eq!(
            top,
            [("beta".into(), 4242), ("gamma".into(), 4242), ("alpha".into(), 4242)]
        );

        b.stop();
        std::thread::sleep(Duration::from_millis(50));
        let fleet = poller.poll();
        let beta = &fleet.hosts[1];
        assert!(beta.is_stale(), "{beta:?}");
        assert_eq!(beta.failures, 1);
        assert_eq!(beta.snapshot.as_ref().unwrap().host.hostname.as_deref(), Some("beta"));
        let age = beta.age(Instant::now()).unwrap();
        assert!(age >= Duration::from_millis(50), "{age:?}");
        let status = beta.status(Instant::now());
        assert!(status.starts_with("stale: last answer "), "{status}");
        // Still in the rows: stale, not dropped.
        assert_eq!(fleet.processes().len(), 6);
        assert!(!fleet.hosts[0].is_stale() && !fleet.hosts[2].is_stale());
    }

    #[test]
    fn a_host_never_reached_says_why() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut poller = Poller::new(parse_targets(&format!("127.0.0.1:{port}")).unwrap(), None, agent());
        let fleet = poller.poll();
        let h = &fleet.hosts[0];
        assert!(h.snapshot.is_none() && !h.is_stale());
        assert!(h.status(Instant::now()).starts_with("no answer: "), "{h:?}");
    }

    #[test]
    fn the_token_is_sent_and_a_wrong_one_is_reported() {
        let a = host("alpha", 1, Some("right-token"));
        let mut right = Poller::new(vec![target(&a)], Some("right-token"), agent());
        assert!(right.poll().hosts[0].error.is_none());
        let mut wrong = Poller::new(vec![target(&a)], Some("wrong-token"), agent());
        let fleet = wrong.poll();
        assert!(
            fleet.hosts[0].error.as_deref().unwrap().contains("401"),
            "{:?}",
            fleet.hosts[0]
        );
    }

    #[test]
    fn the_feed_polls_on_its_own_thread() {
        let a = host("alpha", 1, None);
        let mut feed = RemoteFeed::start(
            Box::new(Poller::new(vec![target(&a)], None, agent())),
            Duration::from_millis(50),
        );
        let first = feed.next(Duration::from_secs(5)).expect("a first round");
        assert!(first.hosts[0].snapshot.is_some());
        std::thread::sleep(Duration::from_millis(200));
        assert!(feed.latest().is_some());
        assert!(!feed.is_stopped());
    }

    #[test]
    fn the_merged_view_numbers_devices_across_hosts_and_marks_a_stale_host() {
        let a = host("alpha", 1 << 30, None);
        let b = host("beta", 2 << 30, None);
        let mut poller = Poller::new(vec![target(&a), target(&b)], None, agent());
        let snap = poller.poll().merged(Instant::now());
        // Numbered across the fleet; each keeps its name and its host's
        // own label beside the host's name.
        let devices: Vec<(u32, &str, &str, String)> = snap
            .devices
            .iter()
            .map(|d| {
                let place = d.fleet.as_ref().unwrap();
                (d.index, d.name.as_deref().unwrap(), place.host.as_str(), d.label())
            })
            .collect();
        assert_eq!(
            devices,
            [
                (0, "NVIDIA GeForce RTX 4080 SUPER", "alpha", "0".into()),
                (1, "NVIDIA GeForce RTX 4080 SUPER", "beta", "0".into())
            ]
        );
        let llama: Vec<(&str, &str, u32)> = snap
            .processes
            .iter()
            .filter(|p| p.pid == 4242)
            .map(|p| (p.host.as_deref().unwrap(), p.name.as_deref().unwrap(), p.gpu[0].device))
            .collect();
        assert_eq!(llama, [("alpha", "llama-server", 0), ("beta", "llama-server", 1)]);
        assert_eq!(snap.attribution.devices[1].measured_sum_bytes, Some(2 << 30));
        assert_eq!(snap.host.hostname.as_deref(), Some("2 hosts"));
        assert!(snap.backends.iter().all(|b| b.status == BackendStatus::Ok));

        b.stop();
        std::thread::sleep(Duration::from_millis(1100));
        let snap = poller.poll().merged(Instant::now());
        assert_eq!(snap.devices.len(), 2, "a stale host is kept");
        assert!(!snap.devices[0].stale);
        assert!(snap.devices[1].stale);
        let beta = snap.backends.iter().find(|b| b.name == "host beta").unwrap();
        assert_eq!(beta.status, BackendStatus::Error);
        assert!(
            beta.detail.starts_with("stale: last answer 1 s ago (")
                && beta.detail.ends_with("; showing its last answer"),
            "{}",
            beta.detail
        );
        assert_eq!(
            snap.processes
                .iter()
                .filter(|p| p.host.as_deref() == Some("beta") && p.pid == 4242)
                .count(),
            1
        );
    }

    #[test]
    fn a_host_that_never_answered_is_an_entry_with_its_error() {
        let a = host("alpha", 1, None);
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let targets = vec![
            target(&a),
            parse_targets(&format!("127.0.0.1:{port}")).unwrap().remove(0),
        ];
        let snap = Poller::new(targets, None, agent()).poll().merged(Instant::now());
        let dead = &snap.devices[1];
        assert_eq!(dead.name.as_deref(), Some("no answer"));
        assert_eq!(dead.fleet.as_ref().unwrap().host, format!("127.0.0.1:{port}"));
        assert!(!dead.process_list_complete);
        assert_eq!(dead.errors[0].query, format!("GET http://127.0.0.1:{port}/snapshot"));
        // Not every host has a hostname: every host goes by its label.
        assert!(snap.devices[0].fleet.as_ref().unwrap().host.starts_with("127.0.0.1:"));
    }

    #[test]
    fn the_live_view_feed_hands_over_merged_snapshots_and_says_who_is_stale() {
        let a = host("alpha", 1, None);
        let b = host("beta", 2, None);
        let mut feed = RemoteFeed::start(
            Box::new(Poller::new(vec![target(&a), target(&b)], None, agent())),
            Duration::from_millis(100),
        );
        let wait_for = |feed: &mut RemoteFeed, what: &dyn Fn(&Snapshot) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Some(Update::Next(s)) = feed.poll(Instant::now()) {
                    if what(&s) {
                        return *s;
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            panic!("no such snapshot came");
        };
        let first = wait_for(&mut feed, &|s| s.devices.len() == 2);
        assert!(!first.devices[1].stale);
        assert!(feed.status().ends_with("2 answering"), "{}", feed.status());
        b.stop();
        let stale = wait_for(&mut feed, &|s| s.devices.len() == 2 && s.devices[1].stale);
        assert!(stale.devices[1].notes.iter().any(|n| n.contains("stale: last answer")));
        assert!(feed.status().contains("1 answering, 1 stale"), "{}", feed.status());
        assert!(!feed.is_replay());
    }

    /// A source whose rounds take 300 ms.
    struct Slow;

    impl FleetSource for Slow {
        fn poll(&mut self) -> Fleet {
            std::thread::sleep(Duration::from_millis(300));
            Fleet::default()
        }

        fn flag(&self) -> &'static str {
            "--prometheus"
        }
    }

    #[test]
    fn a_round_slower_than_the_interval_is_said_on_the_status_line() {
        let mut feed = RemoteFeed::start(Box::new(Slow), Duration::from_millis(100));
        assert_eq!(feed.status(), "prometheus, every 0.1 s: waiting for the first answers");
        assert!(feed.next(Duration::from_secs(10)).is_some());
        let status = feed.status();
        assert!(
            status.starts_with("prometheus, every 0.1 s (a round takes 0."),
            "{status}"
        );
        assert!(status.ends_with("s): 0 answering"), "{status}");
    }
}
