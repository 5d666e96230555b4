//! `serve` showing a fleet (`gputaskman --remote HOSTS serve`,
//! `--prometheus URL serve`): a round of the hosts every interval instead
//! of a sample of this machine, published as the `--remote --json`
//! document on `/snapshot` (the web view lists the hosts from it, each
//! expandable) and as each host's reachability on `/metrics`.
//!
//! Also the fleet's one-shot output (`--remote`/`--prometheus` with
//! `--once` or `--json`) and its JSON document.
//!
//! `/metrics` re-exports no host's figures: Prometheus scrapes the hosts
//! themselves, and the same GPU under two targets would be counted twice.

use super::remote::{Access, Fleet, FleetSource};
use crate::snapshot::Snapshot;
use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant};

impl Fleet {
    /// The fleet as JSON for `--remote ... --json` (and `/snapshot` of a
    /// `serve` that shows a fleet): per host its name, label, URL, status,
    /// staleness, the age of its snapshot and the snapshot; the round's
    /// error, if it could not be made.
    pub fn to_json(&self, now: Instant) -> FleetJson<'_> {
        FleetJson {
            hosts: self
                .hosts
                .iter()
                .map(|h| HostJson {
                    name: h.name(),
                    label: &h.target.label,
                    url: &h.target.url,
                    status: h.status(now),
                    stale: h.is_stale(),
                    error: h.error.as_deref(),
                    age_seconds: h.age(now).map(|a| a.as_secs_f64()),
                    snapshot: h.snapshot.as_deref(),
                })
                .collect(),
            error: self.error.as_deref(),
            taken_at: crate::units::now_rfc3339(),
        }
    }
}

/// [`Fleet::to_json`]'s document, borrowing the snapshots (a thousand
/// hosts' are tens of MB: written out, never copied).
#[derive(serde::Serialize)]
pub struct FleetJson<'a> {
    hosts: Vec<HostJson<'a>>,
    error: Option<&'a str>,
    /// When the round was made.
    taken_at: String,
}

#[derive(serde::Serialize)]
struct HostJson<'a> {
    name: String,
    label: &'a str,
    url: &'a str,
    status: String,
    stale: bool,
    error: Option<&'a str>,
    age_seconds: Option<f64>,
    snapshot: Option<&'a Snapshot>,
}

/// `gputaskman --remote URLS --once|--json`: one round over every host,
/// `--once` rows fitted to `width`, in ASCII only with `ascii`.
pub fn run_once(
    list: &str,
    access: &Access,
    json: bool,
    width: Option<usize>,
    ascii: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    run_once_source(&mut access.poller(list)?, json, width, ascii, out)
}

/// One round of `source`, as JSON or text: see [`run_once`].
pub fn run_once_source(
    source: &mut dyn FleetSource,
    json: bool,
    width: Option<usize>,
    ascii: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let fleet = source.poll();
    if let Some(e) = &fleet.error {
        anyhow::bail!("{}: {e}", source.flag());
    }
    if fleet.hosts.is_empty() {
        anyhow::bail!("{}: no host exports gputaskman series (yet)", source.flag());
    }
    let now = Instant::now();
    if json {
        serde_json::to_writer_pretty(&mut *out, &fleet.to_json(now))?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{}",
            crate::view::ascii::fold_when(ascii, fleet.to_text(now, width))
        )?;
    }
    // One round and no host answered: there is nothing to show, which a
    // script must not take for an empty fleet (status 0).
    if fleet.hosts.iter().all(|h| h.snapshot.is_none()) {
        let why: Vec<String> = fleet
            .hosts
            .iter()
            .map(|h| format!("{}: {}", h.target.label, h.error.as_deref().unwrap_or("no answer")))
            .collect();
        anyhow::bail!("no {} host answered ({})", source.flag(), why.join("; "));
    }
    Ok(())
}

/// The round as `/snapshot` answers it (what `--remote --json` prints),
/// command lines dropped first with `no_cmdline`.
pub fn snapshot_json(fleet: &mut Fleet, now: Instant, no_cmdline: bool) -> Vec<u8> {
    if no_cmdline {
        for snap in fleet.hosts.iter_mut().filter_map(|h| h.snapshot.as_mut()) {
            for p in &mut std::sync::Arc::make_mut(snap).processes {
                p.cmdline = None;
            }
        }
    }
    let mut json = serde_json::to_vec_pretty(&fleet.to_json(now)).unwrap_or_default();
    json.push(b'\n');
    json
}

/// Each host's reachability and the age of what is shown for it.
pub fn metrics(fleet: &Fleet, now: Instant, took: Duration) -> String {
    let mut out = String::new();
    let series = |out: &mut String, name: &str, help: &str, rows: &mut dyn Iterator<Item = (&str, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        // One instance under two of Prometheus's jobs is two hosts of one
        // label: one series, or Prometheus refuses the whole scrape.
        let mut written = std::collections::HashSet::new();
        for (host, value) in rows.filter(|(host, _)| written.insert(*host)) {
            let _ = write!(out, "{name}{{host=\"");
            super::metrics::escape_label(out, host);
            let _ = writeln!(out, "\"}} {value}");
        }
    };
    series(
        &mut out,
        "gputaskman_fleet_host_up",
        "1 when the host answered the last round, 0 when it did not.",
        &mut fleet.hosts.iter().map(|h| {
            let up = h.error.is_none() && h.snapshot.is_some() && fleet.error.is_none();
            (h.target.label.as_str(), if up { 1.0 } else { 0.0 })
        }),
    );
    series(
        &mut out,
        "gputaskman_fleet_host_age_seconds",
        "How old the host's figures shown are (absent for a host that never answered).",
        &mut fleet
            .hosts
            .iter()
            .filter_map(|h| Some((h.target.label.as_str(), h.age(now)?.as_secs_f64()))),
    );
    let _ = writeln!(
        out,
        "# HELP gputaskman_fleet_round_seconds How long the last round of the hosts took.\n\
         # TYPE gputaskman_fleet_round_seconds gauge\ngputaskman_fleet_round_seconds {}",
        took.as_secs_f64()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::remote::{HostState, Target};

    fn render(mut fleet: Fleet, now: Instant, no_cmdline: bool, took: Duration) -> crate::serve::Rendered {
        let json = snapshot_json(&mut fleet, now, no_cmdline);
        crate::serve::Rendered {
            metrics: metrics(&fleet, now, took).into_bytes().into(),
            snapshot: json.into(),
            at: now,
        }
    }

    fn host(label: &str, answered: Option<Duration>, error: Option<&str>, now: Instant) -> HostState {
        let mut snap = crate::serve::metrics::tests::snapshot();
        snap.host.hostname = Some(label.into());
        HostState {
            target: Target {
                label: label.into(),
                url: format!("http://{label}/snapshot"),
            },
            snapshot: answered.map(|_| std::sync::Arc::new(snap)),
            received: answered.map(|ago| now - ago),
            error: error.map(str::to_string),
            failures: u32::from(error.is_some()),
        }
    }

    #[test]
    fn a_round_is_published_as_the_fleet_json_and_each_hosts_reachability() {
        let now = Instant::now();
        let fleet = Fleet {
            hosts: vec![
                host("a:9464", Some(Duration::from_millis(250)), None, now),
                host("b\"\u{1b}:9464", Some(Duration::from_secs(12)), Some("timed out"), now),
                host("c:9464", None, Some("connection refused"), now),
            ],
            error: None,
        };
        let rendered = render(fleet, now, true, Duration::from_millis(40));
        let json: serde_json::Value = serde_json::from_slice(&rendered.snapshot).unwrap();
        let hosts = json["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 3);
        assert_eq!(hosts[0]["status"], "ok");
        assert_eq!(hosts[1]["stale"], true);
        assert_eq!(hosts[1]["age_seconds"], 12.0);
        assert!(hosts[2]["status"]
            .as_str()
            .unwrap()
            .starts_with("no answer: connection refused"));
        assert!(hosts[2]["snapshot"].is_null());
        assert_eq!(json["error"], serde_json::Value::Null);
        // --no-cmdline reaches every host's processes.
        for h in &hosts[..2] {
            let procs = h["snapshot"]["processes"].as_array().unwrap();
            assert!(
                !procs.is_empty() && procs.iter().all(|p| p["cmdline"].is_null()),
                "{h:#}"
            );
        }
        let metrics = String::from_utf8(rendered.metrics.to_vec()).unwrap();
        assert!(
            metrics.contains("gputaskman_fleet_host_up{host=\"a:9464\"} 1\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("gputaskman_fleet_host_up{host=\"b\\\"\\\\e:9464\"} 0\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("gputaskman_fleet_host_up{host=\"c:9464\"} 0\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("gputaskman_fleet_host_age_seconds{host=\"a:9464\"} 0.25\n"),
            "{metrics}"
        );
        assert!(
            !metrics.contains("gputaskman_fleet_host_age_seconds{host=\"c:9464\"}"),
            "{metrics}"
        );
        assert!(metrics.contains("gputaskman_fleet_round_seconds 0.04\n"), "{metrics}");
        assert!(json["taken_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{json:#}");
        // No host's own figures: Prometheus scrapes those from the hosts.
        assert!(!metrics.contains("gputaskman_gpu_"), "{metrics}");
    }

    #[test]
    fn one_instance_under_two_jobs_is_one_series_not_a_refused_scrape() {
        let now = Instant::now();
        let fleet = Fleet {
            hosts: vec![
                host("a:9464", Some(Duration::from_secs(1)), None, now),
                host("a:9464", None, Some("down"), now),
            ],
            error: None,
        };
        let metrics = metrics(&fleet, now, Duration::from_millis(5));
        assert_eq!(
            metrics.matches("gputaskman_fleet_host_up{host=\"a:9464\"}").count(),
            1,
            "{metrics}"
        );
    }

    #[test]
    fn a_round_prometheus_did_not_answer_marks_every_host_down() {
        let now = Instant::now();
        let fleet = Fleet {
            hosts: vec![host("a:9464", Some(Duration::from_secs(3)), None, now)],
            error: Some("HTTP 503".into()),
        };
        let rendered = render(fleet, now, false, Duration::from_millis(5));
        let metrics = String::from_utf8(rendered.metrics.to_vec()).unwrap();
        assert!(
            metrics.contains("gputaskman_fleet_host_up{host=\"a:9464\"} 0\n"),
            "{metrics}"
        );
        let json: serde_json::Value = serde_json::from_slice(&rendered.snapshot).unwrap();
        assert_eq!(json["error"], "HTTP 503");
    }
}
