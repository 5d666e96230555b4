//! The fleet read from Prometheus (`gputaskman --prometheus URL`): every
//! host Prometheus scrapes `serve` on, from the latest samples it keeps,
//! through its HTTP query API. Prometheus does the fan-out, the retries
//! and the history. A round asks, whatever the number of hosts:
//!
//! - `up` and `timestamp(up)`: which targets answered their last scrape,
//!   and when that was (the age a host's figures are shown with);
//! - the last sample time of every host seen in the hour
//!   (`last_over_time`), so a host that went down is named, never
//!   dropped, and the jobs `serve` is scraped under are known;
//! - then the families [`rebuild`] reads, by one `__name__` regex, of
//!   only the hosts scraped since their figures were last read: a host's
//!   series change only when Prometheus scrapes it (every 15 s or so),
//!   and a refresh each second pays for the few that were. They are asked
//!   by instance, [`HOSTS_PER_QUERY`] a query; the first round, and one
//!   after more than half the hosts were scraped, in one query for all.
//!
//! A host is a (`job`, `instance`) pair. What it last sent is kept, shown
//! stale, when it goes down, as `--remote` keeps a quiet host's last
//! answer.

pub mod answer;
pub mod rebuild;

use super::remote::{Fleet, FleetSource, HostState, Target};
use answer::Series;
use anyhow::{bail, Context};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// How long Prometheus may take to answer one query.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read: a thousand hosts of eight GPUs and twelve
/// processes each answer 51.5 MiB (BENCHMARKS.md: the fleet view).
pub const BODY_LIMIT: u64 = 1 << 30;
/// How many down hosts' last figures one round fetches (one query each).
const RECALLED: usize = 16;
/// How far back a host is remembered after its last sample.
const SEEN_WITHIN: &str = "1h";
/// How many hosts scraped since the last round one query asks for by
/// instance (a regex of their names, a few KiB of URL).
const HOSTS_PER_QUERY: usize = 64;

/// How Prometheus is reached: its URL and the files that hold its
/// credentials and the CA of an https:// URL.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub url: String,
    /// A bearer token, one line.
    pub token_file: Option<PathBuf>,
    /// `user:password`, one line (HTTP basic auth).
    pub basic_auth_file: Option<PathBuf>,
    /// The only roots trusted for an https:// URL.
    pub ca: Option<PathBuf>,
}

impl Access {
    /// The poller, or why Prometheus cannot be asked with these settings.
    pub fn open(&self) -> anyhow::Result<PromPoller> {
        let base = self.url.trim().trim_end_matches('/');
        let rest = match (base.strip_prefix("http://"), base.strip_prefix("https://")) {
            (Some(rest), _) => rest,
            (_, Some(rest)) => {
                if self.ca.is_none() {
                    bail!("--prometheus {base}: an https:// URL needs --prometheus-ca FILE, the CA its certificate chains to");
                }
                rest
            }
            _ => bail!("--prometheus {base}: give http://host:port or https://host:port"),
        };
        if rest.is_empty() || rest.split('/').next().is_some_and(|a| a.is_empty() || a.contains('@')) {
            bail!("--prometheus {base}: give host:port (credentials go in a file, not in the URL)");
        }
        if base.contains(['?', '#']) {
            bail!("--prometheus {base}: give Prometheus's address, without a query");
        }
        let authorization = match (&self.token_file, &self.basic_auth_file) {
            (Some(_), Some(_)) => bail!("--prometheus-token-file and --prometheus-basic-auth-file: give one"),
            (Some(path), None) => Some(format!("Bearer {}", super::remote::read_token(path)?)),
            (None, Some(path)) => Some(basic_auth(path)?),
            (None, None) => None,
        };
        let files = super::tls::ClientFiles {
            ca: self.ca.clone(),
            cert: None,
            key: None,
        };
        let agent = super::tls::client_agent(&files, TIMEOUT)?;
        Ok(PromPoller {
            agent,
            query_url: format!("{base}/api/v1/query"),
            authorization,
            hosts: BTreeMap::new(),
            read_at: HashMap::new(),
        })
    }
}

/// `Basic <base64(user:password)>` from a one-line file.
fn basic_auth(path: &std::path::Path) -> anyhow::Result<String> {
    use base64::Engine;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--prometheus-basic-auth-file {}", path.display()))?;
    let line = text.trim_end_matches(['\r', '\n']);
    if !line.contains(':') || line.contains(['\r', '\n']) || line.chars().any(char::is_control) {
        bail!(
            "--prometheus-basic-auth-file {}: one line, user:password",
            path.display()
        );
    }
    Ok(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(line)
    ))
}

/// The query for every series [`rebuild::snapshot`] reads.
pub fn data_query() -> String {
    let names: Vec<&str> = rebuild::FAMILIES
        .iter()
        .map(|f| f.strip_prefix("gputaskman_").unwrap_or(f))
        .collect();
    format!("{{__name__=~\"gputaskman_({})\"}}", names.join("|"))
}

/// The label matchers of one target: `job="…",instance="…"` (values
/// quoted as PromQL strings, which take JSON's escapes).
fn host_matchers(job: &str, instance: &str) -> String {
    let quoted = |v: &str| serde_json::to_string(v).unwrap_or_default();
    format!("job={},instance={}", quoted(job), quoted(instance))
}

/// The query for one host's series: [`data_query`]'s families, of the
/// target `job`/`instance`.
fn host_query(job: &str, instance: &str) -> String {
    let data = data_query();
    format!("{},{}}}", data.trim_end_matches('}'), host_matchers(job, instance))
}

/// Asks Prometheus for the fleet, one round at a time.
pub struct PromPoller {
    agent: ureq::Agent,
    query_url: String,
    authorization: Option<String>,
    /// Every host seen, by (job, instance), with what it last sent.
    hosts: BTreeMap<(String, String), HostState>,
    /// The scrape (its `timestamp(up)`) each host's figures were read
    /// from: a host not scraped since is not asked again.
    read_at: HashMap<(String, String), f64>,
}

/// What one round's queries answered.
struct Round {
    data: Vec<Series>,
    /// The hosts whose series `data` holds; None: every host's.
    asked: Option<BTreeSet<(String, String)>>,
    up: Vec<Series>,
    scraped: Vec<Series>,
    seen: Vec<Series>,
}

/// `s` as a literal in a PromQL (RE2) regex.
fn regex_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The data query for the hosts whose instances are `instances`.
fn instances_query(instances: &[&str]) -> String {
    let alternatives: Vec<String> = instances.iter().map(|i| regex_literal(i)).collect();
    let regex = serde_json::to_string(&alternatives.join("|")).unwrap_or_default();
    format!("{},instance=~{regex}}}", data_query().trim_end_matches('}'))
}

fn host_key(s: &Series) -> Option<(String, String)> {
    Some((s.label("job")?.to_string(), s.label("instance")?.to_string()))
}

impl PromPoller {
    /// An instant query's vector, at `time` (Unix seconds) where given,
    /// else now.
    fn query_at(&self, query: &str, time: Option<f64>) -> Result<Vec<Series>, String> {
        answer::vector(&self.get(query, time)?)
    }

    /// The body of an instant query's answer (`time` as in [`Self::query_at`]).
    fn get(&self, query: &str, time: Option<f64>) -> Result<Vec<u8>, String> {
        let mut request = self.agent.get(&self.query_url).query("query", query);
        if let Some(t) = time {
            request = request.query("time", format!("{t:.3}"));
        }
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request.call().map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = super::remote::read_body(&mut response, BODY_LIMIT)?;
        match status {
            // Prometheus answers a bad query 400 and a timeout 503 with its
            // JSON error: the envelope says why.
            200 | 400 | 422 | 503 => Ok(body),
            401 | 403 => Err(format!("HTTP {status}: Prometheus wants credentials (or other ones)")),
            s => Err(format!("HTTP {s}")),
        }
    }

    /// The answers of `queries`, asked at once.
    fn ask_all(&self, queries: &[String]) -> Vec<Result<Vec<Series>, String>> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = queries.iter().map(|q| scope.spawn(|| self.query_at(q, None))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("the query thread panicked".into())))
                .collect()
        })
    }

    fn ask(&self) -> Result<Round, String> {
        let queries = [
            "up".to_string(),
            "timestamp(up)".to_string(),
            format!("max by (job, instance) (last_over_time(gputaskman_sample_timestamp_seconds[{SEEN_WITHIN}]))"),
        ];
        let mut answers = self.ask_all(&queries);
        let mut next = || answers.remove(0);
        let (up, scraped, seen) = (next()?, next()?, next()?);
        // The hosts of `serve`'s jobs that answered a scrape since their
        // figures were read.
        let jobs: BTreeSet<&str> = seen.iter().filter_map(|s| s.label("job")).collect();
        let answering: BTreeSet<(String, String)> = up
            .iter()
            .filter(|s| s.value() == Some(1.0))
            .filter_map(host_key)
            .filter(|(job, _)| jobs.contains(job.as_str()))
            .collect();
        let fresh: BTreeSet<(String, String)> = scraped
            .iter()
            .filter_map(|s| Some((host_key(s)?, s.value()?)))
            .filter(|(key, at)| answering.contains(key) && self.read_at.get(key) != Some(at))
            .map(|(key, _)| key)
            .collect();
        // The first round, and one after most hosts were scraped, asks
        // for every host at once.
        let every_host = self.hosts.is_empty() || 2 * fresh.len() > answering.len();
        let (data, asked) = if every_host {
            (self.query_at(&data_query(), None)?, None)
        } else {
            let instances: Vec<&str> = fresh
                .iter()
                .map(|(_, i)| i.as_str())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let queries: Vec<String> = instances.chunks(HOSTS_PER_QUERY).map(instances_query).collect();
            let mut data = Vec::new();
            for answer in self.ask_all(&queries) {
                // Another job's target of the same instance is not asked.
                data.extend(
                    answer?
                        .into_iter()
                        .filter(|s| host_key(s).is_some_and(|k| fresh.contains(&k))),
                );
            }
            (data, Some(fresh))
        };
        Ok(Round {
            data,
            asked,
            up,
            scraped,
            seen,
        })
    }

    /// One round: the hosts as Prometheus knows them now.
    pub fn poll(&mut self) -> Fleet {
        let round = match self.ask() {
            Ok(round) => round,
            Err(e) => {
                let why = format!("Prometheus did not answer: {e}");
                let hosts = self
                    .hosts
                    .values_mut()
                    .map(|h| {
                        h.error = Some(why.clone());
                        h.failures += 1;
                        h.clone()
                    })
                    .collect();
                return Fleet {
                    hosts,
                    error: Some(why),
                };
            }
        };
        let now = Instant::now();
        let now_unix = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let seen = self.apply(round, now, now_unix);
        self.recall(seen, now, now_unix);
        Fleet {
            hosts: self.hosts.values().cloned().collect(),
            error: None,
        }
    }

    /// A down host this viewer has no figures of yet: its series as they
    /// were at its last good scrape (found by a range query, then an
    /// instant query at that time; at most [`RECALLED`] hosts a round),
    /// shown stale with their age.
    fn recall(&mut self, seen: HashMap<(String, String), Option<f64>>, now: Instant, now_unix: f64) {
        let wanted: Vec<(String, String)> = self
            .hosts
            .iter()
            .filter(|(key, h)| h.error.is_some() && h.snapshot.is_none() && seen.get(*key).copied().flatten().is_some())
            .map(|(key, _)| key.clone())
            .take(RECALLED)
            .collect();
        let taken_at = crate::units::now_rfc3339();
        for (job, instance) in wanted {
            let query = host_query(&job, &instance);
            let last = format!(
                "gputaskman_sample_timestamp_seconds{{{}}}[{SEEN_WITHIN}]",
                host_matchers(&job, &instance)
            );
            let at = self.get(&last, None).and_then(|body| answer::newest_sample_time(&body));
            let Ok(Some(at)) = at else { continue };
            let Ok(series) = self.query_at(&query, Some(at)) else {
                continue;
            };
            let refs: Vec<&Series> = series.iter().collect();
            if refs.is_empty() {
                continue;
            }
            let Some(host) = self.hosts.get_mut(&(job, instance)) else {
                continue;
            };
            host.snapshot = Some(std::sync::Arc::new(rebuild::snapshot(&refs, &taken_at)));
            host.received = now.checked_sub(Duration::from_secs_f64((now_unix - at).max(0.0)));
        }
    }

    /// Folds one round into the hosts known: pure but for `now`. Gives
    /// back each host's last sample time.
    fn apply(&mut self, round: Round, now: Instant, now_unix: f64) -> HashMap<(String, String), Option<f64>> {
        let mut data: HashMap<(String, String), Vec<&Series>> = HashMap::new();
        for s in &round.data {
            if let Some(key) = host_key(s) {
                data.entry(key).or_default().push(s);
            }
        }
        let by_key = |v: &[Series]| -> HashMap<(String, String), Option<f64>> {
            v.iter().filter_map(|s| Some((host_key(s)?, s.value()))).collect()
        };
        let (up, scraped, seen) = (by_key(&round.up), by_key(&round.scraped), by_key(&round.seen));
        // The jobs `serve` is scraped under: every target of them is a
        // host, those that never answered among them.
        let jobs: BTreeSet<&str> = seen.keys().chain(data.keys()).map(|(job, _)| job.as_str()).collect();
        let keys: BTreeSet<(String, String)> = seen
            .keys()
            .chain(data.keys())
            .chain(up.keys().filter(|(job, _)| jobs.contains(job.as_str())))
            .cloned()
            .collect();
        // A host Prometheus no longer knows (no target, no sample in the
        // hour: a pod replaced by a rollout) is forgotten, not kept forever.
        self.hosts.retain(|key, _| keys.contains(key));
        self.read_at.retain(|key, _| keys.contains(key));
        let ago = |t: Option<f64>| t.map(|t| (now_unix - t).max(0.0));
        let taken_at = crate::units::now_rfc3339();
        for key in keys {
            let host = self.hosts.entry(key.clone()).or_insert_with(|| {
                HostState::new(Target {
                    label: key.1.clone(),
                    url: format!("prometheus: job=\"{}\" instance=\"{}\"", key.0, key.1),
                })
            });
            let last_sample = ago(seen.get(&key).copied().flatten());
            let since = last_sample.map_or_else(String::new, |a| format!(", its last sample {a:.0} s ago"));
            let answered = up.get(&key).copied().flatten().map(|v| v == 1.0);
            let scraped_at = scraped.get(&key).copied().flatten();
            // Not asked this round: not scraped since its figures were read.
            let unchanged = round.asked.as_ref().is_some_and(|asked| !asked.contains(&key))
                && host.snapshot.is_some()
                && scraped_at.is_some()
                && self.read_at.get(&key) == scraped_at.as_ref();
            match answered {
                Some(true) if data.contains_key(&key) || unchanged => {
                    if let Some(series) = data.get(&key) {
                        host.snapshot = Some(std::sync::Arc::new(rebuild::snapshot(series, &taken_at)));
                        match scraped_at {
                            Some(at) => self.read_at.insert(key.clone(), at),
                            None => self.read_at.remove(&key),
                        };
                    }
                    let age = ago(scraped_at).unwrap_or(0.0);
                    host.received = now.checked_sub(Duration::from_secs_f64(age)).or(Some(now));
                    host.error = None;
                    host.failures = 0;
                }
                Some(true) => {
                    host.error = Some("up, but exports no gputaskman series".into());
                    host.failures += 1;
                }
                Some(false) => {
                    host.error = Some(format!("down: Prometheus's last scrape of it failed{since}"));
                    host.failures += 1;
                }
                None => {
                    host.error = Some(format!("no longer scraped by Prometheus{since}"));
                    host.failures += 1;
                }
            }
        }
        seen
    }
}

impl FleetSource for PromPoller {
    fn poll(&mut self) -> Fleet {
        PromPoller::poll(self)
    }

    fn flag(&self) -> &'static str {
        "--prometheus"
    }
}

#[cfg(test)]
mod tests;
