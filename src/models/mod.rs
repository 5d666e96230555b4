//! Model discovery: which model files a process runs, how sure we are, the
//! settings that drive its memory, and what it costs — estimated from the
//! GGUF header and reported by the runtime, kept apart and never summed
//! into measured totals.
//!
//! Evidence, strongest first (shared/DESIGN.md rule 4): `api` (the
//! runtime's local API names the file), `mapped` (the file is mmapped into
//! the process now), `cmdline` (a launch argument), `installed` (sits in an
//! app's model folder: proves nothing). Two sources, one of them `api` or
//! `mapped`, make a model `confirmed`. An API naming a file the process
//! neither maps nor holds open is only `claimed`: anyone's `/props` can
//! name any file, so that word is no source.

pub mod access;
pub mod breakdown;
pub mod budget;
pub mod cmdline;
mod hf_folder;
pub mod log_sources;
pub mod logs;
pub mod probe;
pub mod runtimes;
pub mod sockets;

use crate::procs::ProcInfo;
use crate::snapshot::{
    Model, ModelEstimate, ModelReported, ModelSettings, ReportedBuffer, SettingSource, SettingSources,
};
use access::{Access, Want};
use budget::ByteBudget;
use cmdline::LaunchSettings;
use gguf::regular_file;
use probe::Prober;
use runtimes::llamacpp::ServerState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// A process's API is asked at most this often; between probes the last
/// answer is reused.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(15);

/// The listening sockets of one discovery round, read once when a probe
/// first needs them.
type Listening = std::sync::OnceLock<HashMap<u64, SocketAddr>>;

/// One discovery round, shared by its threads.
struct Round {
    number: u64,
    listening: Listening,
    /// What the round's threads may read of outside files, together.
    bytes: ByteBudget,
    /// When the round stops waiting; header walks still running then stop.
    deadline: Instant,
}
/// Between full probes, what changes from second to second (llama.cpp's
/// `/slots` and `/metrics`: busy slots, requests, token counters) is asked
/// again at most this often, so the live view shows what the server does
/// now and token rates have two samples to come from.
pub const LIVE_INTERVAL: Duration = Duration::from_secs(2);
/// The window of the token rates of a server first seen busy: its second
/// sample is taken this long after the first (well inside [`DEADLINE`]).
const FIRST_RATE_WINDOW: Duration = Duration::from_millis(300);
/// The most of a log file that is read, from its end.
const LOG_TAIL: u64 = 8 << 20;
/// Ports of one process that are probed at most.
const MAX_PORTS: usize = 4;
/// How long one round of discovery waits for a process. A process whose
/// files or API do not answer by then (a FUSE mount that never replies, a
/// socket that accepts and stalls) is left with a note; the others are
/// never held up by it, and it is not looked at again while its last
/// discovery is still stuck.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Bytes of outside files (vLLM folders' config.json and safetensors
/// headers) one probe may read, and one round across all its threads.
/// Real folders take well under 1 MiB (a header is ~150 bytes a tensor).
const PROBE_BYTES: u64 = 32 << 20;
const ROUND_BYTES: u64 = 64 << 20;
/// Discovery threads alive at once, at most, stuck ones included; each
/// takes the round's processes one after another. Hostile processes
/// respawned every few seconds must not grow the monitor's threads
/// without end.
const MAX_DISCOVERY_THREADS: usize = 16;
/// Entries each discovery cache holds at most, however many model files
/// processes name over time.
const MAX_CACHED: usize = 512;
/// Ollama manifests read at most per probe of `ollama serve` (a folder of
/// pulled models holds tens), and the most of each that is read (real
/// ones are under 2 KiB).
const MAX_MANIFESTS: usize = 256;
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Entries of one folder of Ollama's manifests tree looked at at most.
const MAX_DIR_ENTRIES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Evidence {
    Api,
    Mapped,
    Cmdline,
    /// The API names the file, but the process neither maps it nor holds
    /// it open: its word alone (anyone's /props can name any file) is no
    /// evidence that the file is loaded.
    Claimed,
    Installed,
}

impl Evidence {
    fn as_str(self) -> &'static str {
        match self {
            Evidence::Api => "api",
            Evidence::Mapped => "mapped",
            Evidence::Cmdline => "cmdline",
            Evidence::Claimed => "claimed",
            Evidence::Installed => "installed",
        }
    }
}

/// A model file found for a process, with what says so.
struct Found {
    path: PathBuf,
    evidence: Vec<Evidence>,
    deleted: bool,
    /// Why the process could not read the file itself, so it is not read
    /// for it ([`access`]).
    refused: Option<String>,
}

/// Records `evidence` for `path`, once.
fn add(found: &mut Vec<Found>, path: PathBuf, evidence: Evidence, deleted: bool) {
    match found.iter_mut().find(|f| f.path == path) {
        Some(f) => {
            if !f.evidence.contains(&evidence) {
                f.evidence.push(evidence);
            }
            f.deleted |= deleted;
        }
        None => found.push(Found {
            path,
            evidence: vec![evidence],
            deleted,
            refused: None,
        }),
    }
}

/// A model the runtime's API says it has loaded.
#[derive(Debug, Clone, Default)]
struct ApiModel {
    /// The file, when the API names one (Ollama: when its blob is here).
    path: Option<PathBuf>,
    name: Option<String>,
    /// What the API says of a model it names without a file (LM Studio).
    architecture: Option<String>,
    file_type: Option<String>,
    context: Option<u64>,
    /// Estimated from the model folder's safetensors headers (vLLM).
    weights_bytes: Option<u64>,
    kv_bytes_per_token: Option<u64>,
    reported: Option<ModelReported>,
    /// What the runtime says the model is doing (Ollama: when it unloads).
    activity: Option<crate::snapshot::ModelActivity>,
}

/// What a process's runtime API said, kept for [`PROBE_INTERVAL`].
#[derive(Debug, Clone, Default)]
struct ApiAnswer {
    server_url: Option<String>,
    /// The TCP ports the process listens on (sorted); None when its file
    /// descriptors cannot be read.
    listen_ports: Option<Vec<u16>>,
    /// llama.cpp's server state, which also drives the settings.
    server: Option<ServerState>,
    /// The address that answered, for the live refreshes.
    addr: Option<SocketAddr>,
    /// When the live part (llama.cpp's `/slots`, `/metrics`) was read.
    live_at: Option<Instant>,
    /// Token rates from the last two counter samples.
    rates: TokenRates,
    models: Vec<ApiModel>,
    /// Ollama: the models in its models folder.
    installed: Vec<Installed>,
    notes: Vec<String>,
}

/// A model in Ollama's models folder: its name (from the manifest's path)
/// and its blob, when that is a regular file here.
#[derive(Debug, Clone)]
struct Installed {
    name: String,
    blob: Option<PathBuf>,
}

/// A sample of a runtime's token totals: when, prompt, generated, and
/// whether the requests in flight are counted in them
/// ([`ServerState::token_totals`]).
type Counters = (Instant, Option<u64>, Option<u64>, bool);

/// Tokens per second between two samples of the totals; null without two
/// like samples, over no time, or when a total went backwards (a restart,
/// or a request that ended between the reads of `/slots` and `/metrics`).
#[derive(Debug, Clone, Default)]
struct TokenRates {
    last: Option<Counters>,
    prompt: Option<f64>,
    generation: Option<f64>,
}

impl TokenRates {
    fn sample(&mut self, now: Counters) {
        let rate = |before: Option<u64>, after: Option<u64>, seconds: f64| {
            let delta = after?.checked_sub(before?)?;
            (seconds > 0.0).then(|| delta as f64 / seconds)
        };
        match self.last {
            Some((at, prompt, generated, in_flight)) if in_flight == now.3 => {
                let seconds = now.0.saturating_duration_since(at).as_secs_f64();
                self.prompt = rate(prompt, now.1, seconds);
                self.generation = rate(generated, now.2, seconds);
            }
            _ => (self.prompt, self.generation) = (None, None),
        }
        self.last = Some(now);
    }
}

impl ApiAnswer {
    /// Takes the server's token totals as a sample (now) for the rates.
    fn sample_counters(&mut self) {
        let Some(state) = &self.server else { return };
        let now = Instant::now();
        let (prompt, generated, in_flight) = state.token_totals();
        self.rates.sample((now, prompt, generated, in_flight));
        self.live_at = Some(now);
    }

    /// A server first seen while it works is sampled a second time after
    /// [`FIRST_RATE_WINDOW`], so a one-shot snapshot (and the live view's
    /// first figures) has its token rates; an idle one is not waited for.
    fn busy_with_counted_requests(&self) -> bool {
        self.server.as_ref().is_some_and(|s| {
            s.in_flight.is_some() && s.tokens_predicted_total.is_some() && s.slots_busy.is_some_and(|b| b > 0)
        })
    }

    /// What the runtime is doing now, for a model it serves.
    fn activity(&self) -> Option<crate::snapshot::ModelActivity> {
        let state = self.server.as_ref()?;
        Some(crate::snapshot::ModelActivity {
            requests_running: state.requests_processing,
            requests_waiting: state.requests_deferred,
            prompt_tokens_per_second: self.rates.prompt,
            generation_tokens_per_second: self.rates.generation,
            kv_cache_used_ratio: state.kv_cache_usage_ratio,
            expires_at: None,
            source: "api:/slots,/metrics".into(),
        })
    }
}

/// A process: its PID and start time (a reused PID is another process).
type ProcessKey = (u32, Option<String>);

/// A model file's header, read once per (path, size, mtime).
type Header = (u64, Option<SystemTime>, Arc<Result<gguf::Model, String>>);

/// A cache whose entries live while processes use them: each use stamps an
/// entry with the current discovery round, and after a round only what it
/// or the round before used is kept (at most [`MAX_CACHED`], the least
/// recently used going first). Servers coming and going with new model
/// files must not grow the monitor without bound.
struct RoundCache<K, V> {
    entries: HashMap<K, (V, u64)>,
}

impl<K: Eq + Hash + Clone, V: Clone> RoundCache<K, V> {
    fn new() -> Self {
        RoundCache {
            entries: HashMap::new(),
        }
    }

    fn get(&mut self, key: &K, round: u64) -> Option<V> {
        let (value, used) = self.entries.get_mut(key)?;
        *used = round;
        Some(value.clone())
    }

    fn insert(&mut self, key: K, value: V, round: u64) {
        self.entries.insert(key, (value, round));
        if self.entries.len() > MAX_CACHED {
            self.evict_oldest(self.entries.len() - MAX_CACHED);
        }
    }

    /// Keeps what this round or the one before used.
    fn sweep(&mut self, round: u64) {
        self.entries.retain(|_, (_, used)| *used + 1 >= round);
    }

    fn evict_oldest(&mut self, n: usize) {
        let mut by_age: Vec<(u64, K)> = self.entries.iter().map(|(k, (_, used))| (*used, k.clone())).collect();
        by_age.sort_unstable_by_key(|(used, _)| *used);
        for (_, key) in by_age.into_iter().take(n) {
            self.entries.remove(&key);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

pub struct Discovery {
    root: PathBuf,
    prober: Prober,
    extra_model_flags: Vec<String>,
    answers: Mutex<HashMap<ProcessKey, (Instant, ApiAnswer)>>,
    headers: Mutex<RoundCache<PathBuf, Header>>,
    /// Whether a mapped file is a GGUF, by path.
    magic: Mutex<RoundCache<String, bool>>,
    /// The current discovery round, for the caches' sweep.
    round: AtomicU64,
    /// Processes whose discovery thread has not returned yet.
    inflight: Mutex<HashSet<ProcessKey>>,
    /// Discovery threads alive, of every round (at most
    /// [`MAX_DISCOVERY_THREADS`]).
    threads: std::sync::atomic::AtomicUsize,
    /// A background discovery is running.
    busy: AtomicBool,
    /// What the last background discovery found, per process.
    latest: Mutex<HashMap<ProcessKey, Discovered>>,
}

/// A process's models and the notes discovery made about it.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    pub models: Vec<Model>,
    pub notes: Vec<String>,
    /// The TCP ports the process listens on (sorted); None when its file
    /// descriptors cannot be read. `diff` pairs a restarted server by them.
    pub listen_ports: Option<Vec<u16>>,
    /// Discovery did not finish for this process: its models are unknown.
    pub pending: bool,
}

/// Why a process's discovery gave no answer this round.
#[derive(Clone, Copy)]
enum Unfinished {
    /// An earlier round's discovery of it has not returned.
    StillRunning,
    /// This round's did not return by the deadline.
    Waiting,
    /// No thread took it by the deadline: all were busy (or none could be
    /// started).
    NoThread,
}

impl Discovered {
    /// Fills in what discovery found on the process's row.
    pub fn apply_to(self, p: &mut crate::snapshot::Process) {
        p.models = self.models;
        p.notes.extend(self.notes);
        p.listen_ports = self.listen_ports;
        p.models_pending = self.pending;
    }

    /// A process whose discovery did not finish within [`DEADLINE`], or
    /// did not start.
    fn unfinished(why: Unfinished) -> Discovered {
        let note = match why {
            Unfinished::StillRunning | Unfinished::Waiting => format!(
                "model discovery did not finish within {} s ({} on a file or API of this process that does not answer): models unknown",
                DEADLINE.as_secs(),
                match why {
                    Unfinished::StillRunning => "an earlier discovery of it is still waiting",
                    _ => "still waiting",
                }
            ),
            Unfinished::NoThread => format!(
                "model discovery did not start within {} s: all {MAX_DISCOVERY_THREADS} discovery threads were busy (some may be stuck on other processes' files), or none could be started: models unknown",
                DEADLINE.as_secs()
            ),
        };
        Discovered {
            notes: vec![note],
            pending: true,
            ..Discovered::default()
        }
    }
}

impl Discovery {
    pub fn new(root: PathBuf) -> Discovery {
        let extra_model_flags = std::env::var("GPUTASKMAN_MODEL_FLAGS")
            .map(|v| {
                v.split(',')
                    .map(|f| f.trim().to_string())
                    .filter(|f| !f.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Discovery {
            root,
            prober: Prober::default(),
            extra_model_flags,
            answers: Mutex::new(HashMap::new()),
            headers: Mutex::new(RoundCache::new()),
            magic: Mutex::new(RoundCache::new()),
            round: AtomicU64::new(0),
            inflight: Mutex::new(HashSet::new()),
            threads: std::sync::atomic::AtomicUsize::new(0),
            busy: AtomicBool::new(false),
            latest: Mutex::new(HashMap::new()),
        }
    }
    /// Discovers the models of every AI process on up to
    /// [`MAX_DISCOVERY_THREADS`] threads (each waits on its own probes, at
    /// most [`probe::TIMEOUT`] a request), for at most [`DEADLINE`]: a
    /// process not done by then is returned as pending with a note; its
    /// header walk stops at the deadline, and a thread stuck in the kernel
    /// keeps its slot until it returns. Returns, per PID, the models and
    /// notes.
    pub fn discover(self: &Arc<Self>, infos: &[&ProcInfo]) -> HashMap<u32, Discovered> {
        if infos.is_empty() {
            return HashMap::new();
        }
        let number = self.round.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = Instant::now() + DEADLINE;
        // Read by the first probe that needs it: a round whose answers are
        // all cached (the 15 s schedule) reads no socket table.
        let round = Arc::new(Round {
            number,
            listening: Listening::new(),
            bytes: ByteBudget::new("this round", ROUND_BYTES),
            deadline,
        });
        // Ollama's processes: a runner names its model, `ollama serve` none.
        let ollama_runner: HashMap<u32, bool> = infos
            .iter()
            .filter(|i| i.runtimes.iter().any(|r| r == "ollama"))
            .map(|i| {
                let launch = cmdline::parse_launch(&i.argv, &self.extra_model_flags);
                (i.pid, !launch.model_paths.is_empty())
            })
            .collect();
        let mut out = HashMap::new();
        let mut queue = VecDeque::new();
        for info in infos {
            let key = (info.pid, info.start_time.clone());
            if !self.inflight.lock().unwrap().insert(key) {
                out.insert(info.pid, Discovered::unfinished(Unfinished::StillRunning));
                continue;
            }
            queue.push_back((*info).clone());
        }
        let queued = queue.len();
        let queue = Arc::new(Mutex::new(queue));
        let (tx, rx) = mpsc::channel();
        let free = MAX_DISCOVERY_THREADS.saturating_sub(self.threads.load(Ordering::Acquire));
        for _ in 0..free.min(queued) {
            let (this, queue, round, tx) = (Arc::clone(self), Arc::clone(&queue), Arc::clone(&round), tx.clone());
            self.threads.fetch_add(1, Ordering::AcqRel);
            let spawned = std::thread::Builder::new()
                .name("discovery".into())
                .spawn(move || this.discover_queued(&queue, &round, &tx));
            if spawned.is_err() {
                self.threads.fetch_sub(1, Ordering::AcqRel);
            }
        }
        drop(tx);
        for _ in 0..queued {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok((pid, found)) => {
                    out.insert(pid, found);
                }
                Err(_) => break,
            }
        }
        // What no thread took by the deadline is not started: every
        // thread was busy (or stuck on another process's files).
        for info in std::mem::take(&mut *queue.lock().unwrap()) {
            self.inflight.lock().unwrap().remove(&(info.pid, info.start_time));
            out.insert(info.pid, Discovered::unfinished(Unfinished::NoThread));
        }
        // Whatever has not answered by the deadline is still waiting.
        for info in infos {
            out.entry(info.pid)
                .or_insert_with(|| Discovered::unfinished(Unfinished::Waiting));
        }
        pair_ollama_runners(infos, &ollama_runner, &mut out);
        // try_lock: a cache a stuck thread holds is swept next round.
        if let Ok(mut headers) = self.headers.try_lock() {
            headers.sweep(number);
        }
        if let Ok(mut magic) = self.magic.try_lock() {
            magic.sweep(number);
        }
        out
    }

    /// A discovery thread: takes processes from the round's queue until it
    /// is empty or the round is over, and sends what it finds.
    fn discover_queued(&self, queue: &Mutex<VecDeque<ProcInfo>>, round: &Round, tx: &mpsc::Sender<(u32, Discovered)>) {
        loop {
            let next = match Instant::now() < round.deadline {
                true => queue.lock().unwrap().pop_front(),
                false => None,
            };
            let Some(info) = next else { break };
            let found = self.discover_one(&info, round);
            self.inflight.lock().unwrap().remove(&(info.pid, info.start_time));
            let _ = tx.send((info.pid, found));
        }
        self.threads.fetch_sub(1, Ordering::AcqRel);
    }

    /// Starts a discovery of `infos` on a thread of its own unless one is
    /// still running, and returns at once. [`Discovery::latest`] gives what
    /// the last finished run found. The live view and `record` use this, so
    /// a runtime API that hangs never holds up a sample.
    pub fn discover_in_background(self: &Arc<Self>, infos: Vec<ProcInfo>) {
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        std::thread::spawn(move || {
            let found = this.discover(&infos.iter().collect::<Vec<_>>());
            let mut latest = this.latest.lock().unwrap();
            latest.clear();
            for info in &infos {
                if let Some(d) = found.get(&info.pid) {
                    latest.insert((info.pid, info.start_time.clone()), d.clone());
                }
            }
            drop(latest);
            this.busy.store(false, Ordering::Release);
        });
    }

    /// What the last background discovery found for a process, if it has
    /// seen it yet.
    pub fn latest(&self, pid: u32, start_time: &Option<String>) -> Option<Discovered> {
        self.latest.lock().unwrap().get(&(pid, start_time.clone())).cloned()
    }

    fn discover_one(&self, info: &ProcInfo, round: &Round) -> Discovered {
        let launch = cmdline::parse_launch(&info.argv, &self.extra_model_flags);
        // Every file the process names is opened only if it could open it.
        let access = Access::of_process(&self.root, info.pid, &info.mapped_files);
        #[cfg(not(any(target_os = "macos", windows)))]
        let cwd = std::fs::read_link(self.root.join(info.pid.to_string()).join("cwd")).ok();
        #[cfg(target_os = "macos")]
        let cwd = crate::procs::macos::cwd(info.pid);
        // Windows documents no way to read another process's working
        // directory (RTL_USER_PROCESS_PARAMETERS, Microsoft Learn, shows
        // only its image path and command line): relative model paths are
        // taken as given.
        #[cfg(windows)]
        let cwd: Option<PathBuf> = None;
        let resolve = |p: &Path| match (&cwd, p.is_relative()) {
            (Some(cwd), true) => cwd.join(p),
            _ => p.to_path_buf(),
        };
        let mut found: Vec<Found> = Vec::new();

        for path in &launch.model_paths {
            // vLLM names a Hugging Face repository or a folder; only files
            // are model files here.
            let resolved = resolve(Path::new(path));
            let refused = access.check(&resolved, Want::Read).err();
            if (refused.is_none() && resolved.is_file()) || path.to_ascii_lowercase().ends_with(".gguf") {
                add(&mut found, resolved, Evidence::Cmdline, false);
            }
        }
        for mapped in &info.mapped_files {
            let (path, deleted) = match mapped.strip_suffix(" (deleted)") {
                Some(p) => (p, true),
                None => (mapped.as_str(), false),
            };
            // A mapped path that names another file here (the process's
            // own mount namespace) is not read.
            let here = deleted || access.holds(Path::new(path));
            if (deleted && path.to_ascii_lowercase().ends_with(".gguf")) || (here && self.is_gguf(path, round.number)) {
                add(&mut found, PathBuf::from(path), Evidence::Mapped, deleted);
            }
        }
        let answer = self.api_answer(info, &launch, round, &access);
        add_api_paths(&mut found, &answer, info, &access, &resolve);
        for f in found.iter_mut().filter(|f| !f.evidence.contains(&Evidence::Mapped)) {
            f.refused = access.check(&f.path, Want::Read).err();
        }

        let mut notes = answer.notes.clone();
        let mapped = found.iter().any(|f| f.evidence.contains(&Evidence::Mapped));
        if !found.is_empty() && !mapped && info.maps_readable {
            notes.push(
                "the model file is not memory-mapped (loaded without mmap, or closed): no `mapped` evidence is possible"
                    .into(),
            );
        }
        let log = self.read_log(info, &launch, &resolve, &access, &mut notes);
        let mut models: Vec<Model> = found
            .into_iter()
            .map(|mut f| {
                f.evidence.sort();
                let api = answer.models.iter().find(|m| {
                    m.path
                        .as_deref()
                        .is_some_and(|p| resolve(p) == f.path || p.file_name() == f.path.file_name())
                });
                let log = log.as_ref().filter(|(_, report)| log_names(report, &f.path));
                let mut model = self.describe(&f, &launch, &answer, api, log, (round, &access));
                if f.deleted {
                    model
                        .notes
                        .push("the file was deleted or replaced after it was mapped".into());
                }
                model
            })
            .collect();
        // Models the API names without a file here (Ollama names whose blob
        // is elsewhere, vLLM repositories, LM Studio ids).
        for api in answer.models.iter().filter(|m| m.path.is_none()) {
            models.push(Model {
                name: api.name.clone(),
                architecture: api.architecture.clone(),
                file_type: api.file_type.clone(),
                evidence: vec![Evidence::Api.as_str().into()],
                context: api.context,
                server_url: answer.server_url.clone(),
                estimate: (api.kv_bytes_per_token.is_some() || api.weights_bytes.is_some()).then(|| ModelEstimate {
                    weights_bytes: api.weights_bytes,
                    kv_bytes_per_token: api.kv_bytes_per_token,
                    ..ModelEstimate::default()
                }),
                reported: api.reported.clone(),
                activity: api.activity.clone(),
                ..Model::default()
            });
        }
        // What Ollama has pulled but not loaded: named, never confirmed.
        let loaded = |i: &Installed| {
            answer.models.iter().any(|m| m.name.as_deref() == Some(i.name.as_str()))
                || models
                    .iter()
                    .any(|m| i.blob.is_some() && m.path == i.blob.as_ref().map(|b| b.display().to_string()))
        };
        let installed: Vec<Model> = answer
            .installed
            .iter()
            .filter(|i| !loaded(i))
            .map(|i| self.installed_model(i, round))
            .collect();
        models.extend(installed);
        Discovered {
            models,
            notes,
            listen_ports: answer.listen_ports.clone(),
            pending: false,
        }
    }

    /// Whether `path` is a GGUF file, by its magic bytes (Ollama's blobs have
    /// no extension). Libraries and system files are never model files.
    fn is_gguf(&self, path: &str, round: u64) -> bool {
        if path.contains(".so") || path.starts_with("/usr/lib") || path.starts_with("/lib") || path.ends_with(".py") {
            return false;
        }
        let key = path.to_string();
        if let Some(known) = self.magic.lock().unwrap().get(&key, round) {
            return known;
        }
        let answer = gguf::is_gguf(Path::new(path));
        self.magic.lock().unwrap().insert(key, answer, round);
        answer
    }

    fn header(&self, path: &Path, round: &Round) -> Arc<Result<gguf::Model, String>> {
        let meta = std::fs::metadata(path).ok();
        let stamp = (
            meta.as_ref().map(|m| m.len()).unwrap_or(0),
            meta.as_ref().and_then(|m| m.modified().ok()),
        );
        let key = path.to_path_buf();
        if let Some((len, mtime, model)) = self.headers.lock().unwrap().get(&key, round.number) {
            if (len, mtime) == stamp {
                return model;
            }
        }
        // The walk stops at the round's deadline rather than run on
        // unwaited-for; a walk out of time is tried again next round.
        let opened = gguf::open_until(path, round.deadline);
        let out_of_time = matches!(&opened, Err(e) if matches!(e.kind(), gguf::ErrorKind::OutOfTime { .. }));
        let model = Arc::new(opened.map_err(|e| e.to_string()));
        if !out_of_time {
            self.headers
                .lock()
                .unwrap()
                .insert(key, (stamp.0, stamp.1, model.clone()), round.number);
        }
        model
    }

    /// How many model headers and magic-byte answers are cached.
    #[cfg(test)]
    fn cached(&self) -> (usize, usize) {
        (self.headers.lock().unwrap().len(), self.magic.lock().unwrap().len())
    }

    /// The runtime API's answer for this process, probed at most every
    /// [`PROBE_INTERVAL`], its live part at most every [`LIVE_INTERVAL`].
    /// The token counters' last sample is carried from answer to answer.
    fn api_answer(&self, info: &ProcInfo, launch: &LaunchSettings, round: &Round, access: &Access) -> ApiAnswer {
        let key = (info.pid, info.start_time.clone());
        let cached = self.answers.lock().unwrap().get(&key).cloned();
        let key_for_api = launch.api_key.as_deref();
        let (at, answer) = match cached {
            Some((at, mut answer)) if at.elapsed() < PROBE_INTERVAL => {
                if answer.live_at.is_some_and(|t| t.elapsed() < LIVE_INTERVAL) {
                    return answer;
                }
                self.sample_live(key_for_api, &mut answer);
                (at, answer)
            }
            previous => {
                let mut answer = self.probe(info, launch, round, access);
                let first = previous.is_none();
                answer.rates = previous.map(|(_, a)| a.rates).unwrap_or_default();
                answer.sample_counters();
                if first && answer.busy_with_counted_requests() {
                    std::thread::sleep(FIRST_RATE_WINDOW);
                    self.sample_live(key_for_api, &mut answer);
                }
                (Instant::now(), answer)
            }
        };
        let mut answers = self.answers.lock().unwrap();
        answers.retain(|_, (at, _)| at.elapsed() < PROBE_INTERVAL * 4);
        answers.insert(key, (at, answer.clone()));
        answer
    }

    /// Asks a llama.cpp server again what changes from second to second.
    fn sample_live(&self, key: Option<&str>, answer: &mut ApiAnswer) {
        if let (Some(addr), Some(state)) = (answer.addr, answer.server.as_mut()) {
            state.clear_live();
            self.probe_llamacpp_live(addr, key, state);
            answer.sample_counters();
        }
    }

    fn probe(&self, info: &ProcInfo, launch: &LaunchSettings, round: &Round, access: &Access) -> ApiAnswer {
        let mut answer = ApiAnswer::default();
        let table = round.listening.get_or_init(|| sockets::listening(&self.root));
        let mut addrs = match sockets::listening_of(&self.root, info.pid, table) {
            Ok(addrs) => addrs,
            Err(e) => {
                answer.notes.push(format!("{e}: its API was not probed"));
                return answer;
            }
        };
        let mut ports: Vec<u16> = addrs.iter().map(SocketAddr::port).collect();
        ports.sort_unstable();
        ports.dedup();
        answer.listen_ports = Some(ports);
        addrs.sort_by_key(|a| (launch.port != Some(a.port()), a.port()));
        addrs.dedup_by_key(|a| a.port());
        let api = Api::for_runtimes(&info.runtimes);
        if matches!(api, Api::Ollama) {
            // `ollama runner --model BLOB` serves Ollama alone (/completion),
            // never /api/ps: its model is paired with `ollama serve`'s list
            // by `pair_ollama_runners`. `ollama serve` names no model.
            if !launch.model_paths.is_empty() {
                return answer;
            }
            answer.installed = ollama_installed();
        }
        let key = launch.api_key.as_deref();
        for listen in addrs.into_iter().take(MAX_PORTS) {
            let Some(addr) = probe::loopback_for(listen) else {
                answer.notes.push(format!(
                    "listens on {listen} only: not probed (probes go to loopback only)"
                ));
                continue;
            };
            let result = match api {
                Api::LlamaCpp => self.probe_llamacpp(addr, key).map(|mut state| {
                    answer.notes.append(&mut state.notes);
                    answer.models = vec![ApiModel {
                        path: state.model_path.as_ref().map(PathBuf::from),
                        name: state.model_alias.clone(),
                        ..ApiModel::default()
                    }];
                    answer.server = Some(state);
                }),
                Api::Ollama => self
                    .probe_ollama(addr, &answer.installed)
                    .map(|models| answer.models = models),
                Api::LmStudio => self.probe_lmstudio(addr).map(|models| answer.models = models),
                Api::Vllm => {
                    let budgets = hf_folder::Budgets {
                        probe: &ByteBudget::new("this probe", PROBE_BYTES),
                        round: &round.bytes,
                    };
                    self.probe_vllm(addr, key, access, &budgets, &mut answer.notes)
                        .map(|models| answer.models = models)
                }
            };
            match result {
                Ok(()) => {
                    answer.server_url = Some(format!("http://{addr}"));
                    answer.addr = Some(addr);
                    return answer;
                }
                Err(e) => answer.notes.push(format!("no {} API at {addr}: {e}", api.name())),
            }
        }
        answer
    }

    /// llama.cpp's server: /props names the model; /slots, /v1/models and
    /// /metrics (when enabled) add the settings.
    fn probe_llamacpp(&self, addr: SocketAddr, key: Option<&str>) -> Result<ServerState, String> {
        use runtimes::llamacpp;
        let mut state = ServerState::default();
        state.merge_props(&llamacpp::parse_props(&self.prober.get(addr, "/props", key)?)?);
        if let Ok(models) = self
            .prober
            .get(addr, "/v1/models", key)
            .and_then(|b| llamacpp::parse_v1_models(&b))
        {
            state.merge_v1_models(&models);
        }
        self.probe_llamacpp_live(addr, key, &mut state);
        Ok(state)
    }

    /// llama.cpp's live endpoints: `/slots` (busy slots) and `/metrics`
    /// (requests, token counters; with `--metrics`).
    fn probe_llamacpp_live(&self, addr: SocketAddr, key: Option<&str>, state: &mut ServerState) {
        use runtimes::llamacpp;
        if let Ok(slots) = self
            .prober
            .get(addr, "/slots", key)
            .and_then(|b| llamacpp::parse_slots(&b))
        {
            state.merge_slots(&slots);
        }
        let metrics = self.prober.get(addr, "/metrics", key);
        if let Ok(metrics) = metrics.and_then(|b| llamacpp::parse_metrics(&String::from_utf8_lossy(&b))) {
            state.merge_metrics(&metrics);
        }
    }

    /// Ollama's `ollama serve`: /api/ps lists what is loaded and how much of
    /// each sits in VRAM. Each is paired with its blob through the manifest
    /// of its name (/api/ps's digest is the manifest's).
    fn probe_ollama(&self, addr: SocketAddr, installed: &[Installed]) -> Result<Vec<ApiModel>, String> {
        let models = runtimes::ollama::parse_ps(&self.prober.get(addr, "/api/ps", None)?)?;
        Ok(models
            .into_iter()
            .map(|m| ApiModel {
                path: installed
                    .iter()
                    .find(|i| m.name.as_deref().or(m.model.as_deref()) == Some(i.name.as_str()))
                    .and_then(|i| i.blob.clone()),
                name: m.name.clone().or(m.model.clone()),
                architecture: m.family.clone(),
                file_type: m.quantization_level.clone(),
                context: m.context_length,
                weights_bytes: None,
                kv_bytes_per_token: None,
                reported: Some(ModelReported {
                    total_bytes: m.size,
                    device_bytes: m.size_vram,
                    source: "api:/api/ps".into(),
                    ..ModelReported::default()
                }),
                activity: Some(crate::snapshot::ModelActivity {
                    expires_at: m.expires_at.clone(),
                    source: "api:/api/ps".into(),
                    ..Default::default()
                }),
            })
            .collect())
    }

    /// LM Studio: its current REST API (`/api/v1/models`, LM Studio 0.4+),
    /// else the older `/api/v0/models`; of either, the loaded models.
    fn probe_lmstudio(&self, addr: SocketAddr) -> Result<Vec<ApiModel>, String> {
        use runtimes::lmstudio;
        let models = self
            .prober
            .get(addr, "/api/v1/models", None)
            .and_then(|b| lmstudio::parse_v1_models(&b))
            .or_else(|current| {
                self.prober
                    .get(addr, "/api/v0/models", None)
                    .and_then(|b| lmstudio::parse_models(&b))
                    .map_err(|older| format!("{current}; {older}"))
            })?;
        Ok(models
            .into_iter()
            .filter(|m| m.loaded)
            .map(|m| ApiModel {
                name: m.id,
                architecture: m.arch,
                file_type: m.quantization,
                context: m.loaded_context_length,
                ..ApiModel::default()
            })
            .collect())
    }

    /// vLLM: /v1/models names the model (a Hugging Face id or folder);
    /// config.json in that folder gives the KV cost per token, and /metrics
    /// the KV capacity vLLM reserved, in blocks.
    fn probe_vllm(
        &self,
        addr: SocketAddr,
        key: Option<&str>,
        access: &Access,
        budgets: &hf_folder::Budgets,
        notes: &mut Vec<String>,
    ) -> Result<Vec<ApiModel>, String> {
        use runtimes::vllm;
        let models = vllm::parse_models(&self.prober.get(addr, "/v1/models", key)?)?;
        let metrics = self
            .prober
            .get(addr, "/metrics", key)
            .and_then(|b| vllm::parse_metrics(&String::from_utf8_lossy(&b)))
            .ok();
        Ok(models
            .into_iter()
            .map(|m| {
                // A repository id is no folder here; a folder the process
                // could not list itself is not read for it.
                let folder = m
                    .root
                    .as_deref()
                    .or(m.id.as_deref())
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute() && p.is_dir())
                    .filter(|p| match access.check(p, Want::List) {
                        Ok(()) => true,
                        Err(why) => {
                            notes.push(format!("{}: {why}", p.display()));
                            false
                        }
                    });
                let config = folder
                    .as_ref()
                    .and_then(|f| hf_folder::config(f, access, budgets, notes));
                let weights =
                    folder
                        .as_deref()
                        .and_then(|f| match hf_folder::safetensors_weights(f, access, budgets) {
                            Ok(weights) => weights,
                            Err(why) => {
                                notes.push(why);
                                None
                            }
                        });
                let dtype = metrics.as_ref().and_then(|m| m.cache_dtype.as_deref());
                let per_token = config.as_ref().and_then(|c| vllm::kv_bytes_per_token(c, dtype));
                let capacity = metrics.as_ref().and_then(|m| m.kv_capacity_tokens());
                ApiModel {
                    path: None,
                    name: m.id,
                    architecture: None,
                    file_type: None,
                    context: m.max_model_len,
                    weights_bytes: weights,
                    kv_bytes_per_token: per_token,
                    reported: capacity.map(|tokens| ModelReported {
                        kv_bytes: per_token.and_then(|p| p.checked_mul(tokens)),
                        source: format!("api:/metrics ({tokens} KV tokens reserved)"),
                        ..ModelReported::default()
                    }),
                    activity: metrics.as_ref().map(|m| crate::snapshot::ModelActivity {
                        requests_running: m.requests_running,
                        requests_waiting: m.requests_waiting,
                        kv_cache_used_ratio: m.kv_cache_usage,
                        source: "api:/metrics".into(),
                        ..Default::default()
                    }),
                }
            })
            .collect())
    }

    /// The files a process's stdout and stderr are (/proc/PID/fd/1 and 2,
    /// Linux's; Windows gives no view of another process's standard
    /// handles, and under Wine /proc would be its Linux host's).
    fn stdout_and_stderr(&self, pid: u32) -> Vec<PathBuf> {
        if cfg!(not(target_os = "linux")) {
            return Vec::new();
        }
        let fd_dir = self.root.join(pid.to_string()).join("fd");
        ["1", "2"]
            .iter()
            .filter_map(|fd| std::fs::read_link(fd_dir.join(fd)).ok())
            .collect()
    }

    /// The runtime's log: stdout or stderr when it is a regular file, or
    /// --log-file (relative to the process's working directory, as the
    /// runtime opened it: `resolve`).
    fn read_log(
        &self,
        info: &ProcInfo,
        launch: &LaunchSettings,
        resolve: &dyn Fn(&Path) -> PathBuf,
        access: &Access,
        notes: &mut Vec<String>,
    ) -> Option<(String, logs::LogReport)> {
        let mut candidates = self.stdout_and_stderr(info.pid);
        candidates.extend(launch.log_file.as_deref().map(|f| resolve(Path::new(f))));
        candidates.dedup();
        for path in candidates {
            // A terminal, pipe or socket is no log to read; read_tail
            // opens regular files only and never blocks on a FIFO.
            if !std::fs::metadata(&path).map(|m| m.is_file()).unwrap_or(false) {
                continue;
            }
            // Its stdout and stderr it holds open; a --log-file it names.
            if let Err(why) = access.check(&path, Want::Read) {
                notes.push(format!("log {}: {why}", path.display()));
                continue;
            }
            match access
                .as_process(|| read_tail(&path, LOG_TAIL))
                .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            {
                Ok(text) => {
                    let report = logs::parse_log(&text);
                    if !report.buffers.is_empty() || !report.kv_caches.is_empty() || !report.ollama_memory.is_empty() {
                        return Some((path.display().to_string(), report));
                    }
                }
                Err(e) => notes.push(format!("log {} not readable: {e}", path.display())),
            }
        }
        let (source, text) = log_sources::elsewhere(&self.root, info.pid, info.ppid, notes)?;
        let report = logs::parse_log(&text);
        (!report.buffers.is_empty() || !report.kv_caches.is_empty() || !report.ollama_memory.is_empty())
            .then_some((source, report))
    }

    /// A model in Ollama's folder: its header, when its blob is here; no
    /// settings, so no estimate.
    fn installed_model(&self, installed: &Installed, round: &Round) -> Model {
        let mut model = Model::default();
        if let Some(blob) = &installed.blob {
            match self.header(blob, round).as_ref() {
                Ok(m) => describe_header(&mut model, m),
                Err(e) => model.notes.push(format!("model header not readable: {e}")),
            }
            model.path = Some(blob.display().to_string());
        }
        model.name = Some(installed.name.clone());
        model.evidence = vec![Evidence::Installed.as_str().into()];
        model
    }

    fn describe(
        &self,
        found: &Found,
        launch: &LaunchSettings,
        answer: &ApiAnswer,
        api: Option<&ApiModel>,
        log: Option<&(String, logs::LogReport)>,
        (round, access): (&Round, &Access),
    ) -> Model {
        let (path, evidence) = (found.path.as_path(), found.evidence.as_slice());
        let server = answer.server.as_ref();
        let mut notes = Vec::new();
        let mut settings = resolve_settings(launch, server, log.map(|(_, r)| r), &mut notes);
        if settings.context_total.is_none() {
            settings.context_total = api.and_then(|a| a.context);
            settings.sources.context_total = settings.context_total.map(|_| SettingSource::Api);
        }
        let mut model = Model {
            path: Some(path.display().to_string()),
            evidence: evidence.iter().map(|e| e.as_str().to_string()).collect(),
            confirmed: is_confirmed(&evidence.iter().map(|e| e.as_str().to_string()).collect::<Vec<_>>()),
            context: settings.context_total,
            slots_total: settings.sequences,
            notes,
            slots_busy: server.and_then(|s| s.slots_busy),
            server_url: answer.server_url.clone(),
            activity: answer.activity().or_else(|| api.and_then(|a| a.activity.clone())),
            ..Model::default()
        };
        // Opened with the process's own credentials (access::as_process),
        // split parts and the cache's stat too; a file it maps is proof.
        let header = match (&found.refused, found.evidence.contains(&Evidence::Mapped)) {
            (Some(why), _) => Arc::new(Err(why.clone())),
            (None, true) => self.header(path, round),
            (None, false) => access
                .as_process(|| self.header(path, round))
                .unwrap_or_else(|e| Arc::new(Err(e))),
        };
        match header.as_ref() {
            Ok(m) => {
                describe_header(&mut model, m);
                // What the runtime calls it (Ollama's tag, llama.cpp's
                // alias) is the name its users know.
                if let Some(name) = api.and_then(|a| a.name.clone()) {
                    model.name = Some(name);
                }
                let kv_settings = settings.to_kv();
                match gguf::estimate(m, &kv_settings) {
                    Ok(e) => {
                        let has_window = e.kv.caches.iter().any(|c| c.kind == gguf::CacheKind::Swa);
                        let without_window = has_window && !kv_settings.swa_full;
                        let full = gguf::KvSettings {
                            swa_full: true,
                            ..kv_settings
                        };
                        model.context = Some(u64::from(e.kv.context));
                        settings.fill_from_estimate(&e.kv);
                        model.estimate = Some(ModelEstimate {
                            weights_bytes: e.weights_bytes,
                            kv_bytes: Some(e.kv.bytes),
                            kv_bytes_per_token: Some(e.kv.bytes_per_token),
                            recurrent_state_bytes: e.recurrent_state_bytes,
                            kv_bytes_without_window: without_window
                                .then(|| gguf::estimate(m, &full).ok().map(|f| f.kv.bytes))
                                .flatten(),
                        })
                    }
                    Err(e) => model.notes.push(format!("no estimate: {e}")),
                }
            }
            Err(why) if found.refused.is_some() => model.notes.push(why.clone()),
            Err(e) => model.notes.push(format!("model header not readable: {e}")),
        }
        model.reported = api.and_then(|a| a.reported.clone());
        if let Some((source, report)) = log {
            model.reported = Some(ModelReported {
                weights_bytes: report.total(logs::BufferKind::Model, false),
                kv_bytes: report
                    .total(logs::BufferKind::Kv, false)
                    .or_else(|| report.kv_caches.iter().map(|c| c.bytes).reduce(|a, b| a + b)),
                compute_bytes: report.total(logs::BufferKind::Compute, false),
                total_bytes: None,
                device_bytes: None,
                source: format!("log:{source}"),
                memory_breakdown: (!report.memory_breakdown.is_empty()).then(|| report.memory_breakdown.clone()),
                buffers: report
                    .buffers
                    .iter()
                    .map(|b| ReportedBuffer {
                        device: b.device.clone(),
                        kind: format!("{:?}", b.kind).to_lowercase(),
                        bytes: b.bytes,
                        device_memory: logs::is_device_memory(&b.device),
                    })
                    .collect(),
            });
        }
        model.settings = Some(settings);
        model
    }
}

/// The runtime APIs gputaskman knows.
#[derive(Debug, Clone, Copy)]
enum Api {
    LlamaCpp,
    Ollama,
    LmStudio,
    Vllm,
}

impl Api {
    /// The API to ask, from the runtimes found in the process; llama.cpp's
    /// server (and servers built on it) otherwise.
    fn for_runtimes(runtimes: &[String]) -> Api {
        let has = |r: &str| runtimes.iter().any(|x| x == r);
        if has("ollama") {
            Api::Ollama
        } else if has("lm-studio") {
            Api::LmStudio
        } else if has("vllm") {
            Api::Vllm
        } else {
            Api::LlamaCpp
        }
    }

    fn name(self) -> &'static str {
        match self {
            Api::LlamaCpp => "llama.cpp",
            Api::Ollama => "Ollama",
            Api::LmStudio => "LM Studio",
            Api::Vllm => "vLLM",
        }
    }
}

/// Ollama's models folders: OLLAMA_MODELS, the user's, the service's
/// (envconfig.Models; the Linux install script's `ollama` user home).
fn ollama_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = std::env::var_os("OLLAMA_MODELS")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.extend(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ollama/models")));
    roots.push(PathBuf::from("/usr/share/ollama/.ollama/models"));
    roots.push(PathBuf::from("/var/lib/ollama/models"));
    roots
}

/// The models in the first of Ollama's folders that has manifests, by
/// name: at most [`MAX_MANIFESTS`], each read capped, from a tree exactly
/// `manifests/<host>/<namespace>/<model>/<tag>` deep (types/model/name.go,
/// `Filepath`), at most [`MAX_DIR_ENTRIES`] entries a folder. A manifest
/// that is not a regular file or not JSON is skipped.
fn ollama_installed() -> Vec<Installed> {
    let Some(root) = ollama_roots().into_iter().find(|r| r.join("manifests").is_dir()) else {
        return Vec::new();
    };
    let children = |dir: &Path| -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = entries
            .take(MAX_DIR_ENTRIES)
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        out.sort();
        out
    };
    let mut found = Vec::new();
    let mut read = 0;
    for (host, host_dir) in children(&root.join("manifests")) {
        for (namespace, ns_dir) in children(&host_dir) {
            for (model, model_dir) in children(&ns_dir) {
                for (tag, manifest) in children(&model_dir) {
                    if read >= MAX_MANIFESTS {
                        return found;
                    }
                    read += 1;
                    let Ok(body) = regular_file::read_capped(&manifest, MAX_MANIFEST_BYTES) else {
                        continue;
                    };
                    let Ok(blob) = runtimes::ollama::parse_manifest(&body) else {
                        continue;
                    };
                    found.push(Installed {
                        name: runtimes::ollama::manifest_name(&host, &namespace, &model, &tag),
                        blob: blob.map(|b| root.join("blobs").join(b)).filter(|p| p.is_file()),
                    });
                }
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// Records the files the API names: `api` when the process maps or holds
/// the file, else `claimed` (its word alone).
fn add_api_paths(
    found: &mut Vec<Found>,
    answer: &ApiAnswer,
    info: &ProcInfo,
    access: &Access,
    resolve: &dyn Fn(&Path) -> PathBuf,
) {
    // Ollama's blobs are found in its own folders, not named by the
    // process: `ollama serve` never holds them (its runners do).
    let paths_named_by_api = !matches!(Api::for_runtimes(&info.runtimes), Api::Ollama);
    for path in answer.models.iter().filter_map(|m| m.path.as_deref()) {
        // A server in a container names the file as its mount namespace
        // sees it; the same file name among what we found is that file.
        let resolved = resolve(path);
        let same_name = (!resolved.exists())
            .then(|| found.iter().find(|f| f.path.file_name() == resolved.file_name()))
            .flatten()
            .map(|f| f.path.clone());
        let path = same_name.unwrap_or(resolved);
        let mapped = found
            .iter()
            .any(|f| f.path == path && f.evidence.contains(&Evidence::Mapped));
        let evidence = match mapped || access.holds(&path) || !paths_named_by_api {
            true => Evidence::Api,
            false => Evidence::Claimed,
        };
        add(found, path, evidence, false);
    }
}

/// Ollama's runners (`ollama runner --model BLOB`) are asked nothing:
/// their model takes what `ollama serve`'s /api/ps says of the same blob,
/// with `api` evidence.
fn pair_ollama_runners(infos: &[&ProcInfo], launches: &HashMap<u32, bool>, out: &mut HashMap<u32, Discovered>) {
    let is_runner = |pid: u32| launches.get(&pid).copied();
    let served: Vec<Model> = infos
        .iter()
        .filter(|i| is_runner(i.pid) == Some(false))
        .filter_map(|i| out.get(&i.pid))
        .flat_map(|d| d.models.iter())
        .filter(|m| m.path.is_some() && m.evidence.iter().any(|e| e == Evidence::Api.as_str()))
        .cloned()
        .collect();
    for info in infos.iter().filter(|i| is_runner(i.pid) == Some(true)) {
        let Some(d) = out.get_mut(&info.pid) else { continue };
        for m in &mut d.models {
            let Some(s) = served.iter().find(|s| s.path.is_some() && s.path == m.path) else {
                continue;
            };
            if !m.evidence.iter().any(|e| e == Evidence::Api.as_str()) {
                m.evidence.insert(0, Evidence::Api.as_str().into());
            }
            m.confirmed = is_confirmed(&m.evidence);
            m.name = s.name.clone().or(m.name.take());
            m.server_url = s.server_url.clone();
            m.reported = m.reported.take().or(s.reported.clone());
            m.activity = m.activity.take().or(s.activity.clone());
        }
    }
}

/// Two sources, one of them `api` or `mapped` (the module's rule);
/// `installed` and `claimed` are no source.
fn is_confirmed(evidence: &[String]) -> bool {
    let strong = [Evidence::Api.as_str(), Evidence::Mapped.as_str()];
    let no_source = [Evidence::Installed.as_str(), Evidence::Claimed.as_str()];
    let sources = evidence.iter().filter(|e| !no_source.contains(&e.as_str())).count();
    sources >= 2 && evidence.iter().any(|e| strong.contains(&e.as_str()))
}

/// What a model file's header says of it.
fn describe_header(model: &mut Model, m: &gguf::Model) {
    let info = m.info();
    model.name = info.name.clone();
    model.architecture = info.architecture.clone();
    model.kind = Some(info.kind.as_str().to_string());
    model.params = info.params;
    model.file_type = info.file_type.as_ref().map(|f| f.to_string());
    model.layers = info.layers;
    model.context_train = info.context_train.map(u64::from);
}

/// A log describes a model when it names this file, or names none.
fn log_names(report: &logs::LogReport, path: &Path) -> bool {
    match report.model_path.as_deref() {
        Some(logged) => Path::new(logged) == path || Path::new(logged).file_name() == path.file_name(),
        None => true,
    }
}

/// A setting with where it was read.
type Sourced<T> = Option<(T, SettingSource)>;

/// The first known of `candidates`, strongest source first.
fn first<T, const N: usize>(candidates: [(Option<T>, SettingSource); N]) -> Sourced<T> {
    candidates
        .into_iter()
        .find_map(|(value, source)| value.map(|v| (v, source)))
}

/// llama-server's `-np auto` (the default since PR #16736, November 2025):
/// 4 slots sharing one unified KV cache (tools/server/server.cpp, "n_parallel
/// is set to auto, using n_parallel = 4 and kv_unified = true").
const AUTO_SLOTS: u32 = 4;

/// The settings llama.cpp runs the model with, each from the most direct
/// source: the API (what the server runs now), then the log of its load
/// (`llama_context: n_ctx`, `n_ctx_seq`, `n_seq_max`, `kv_unified`), then
/// the command line, then llama.cpp's defaults, which `notes` names with the
/// version they hold from. The total and per-sequence contexts follow from
/// each other as src/llama-context.cpp derives them: unified, one stream of
/// `n_ctx` cells (`n_ctx_seq = n_ctx`); otherwise `n_ctx = n_ctx_seq ×
/// n_seq_max`. A derived figure carries the weakest source it came from.
/// What only the model file can settle (`-c` absent or 0: the training
/// context; llama.cpp's padding of `-c`) is filled from the estimate.
fn resolve_settings(
    launch: &LaunchSettings,
    server: Option<&ServerState>,
    log: Option<&logs::LogReport>,
    notes: &mut Vec<String>,
) -> ModelSettings {
    use SettingSource::{Api, Argv, Default, Log};
    // llama-server's -np -1 is auto, as leaving it out.
    let np_given = launch.parallel.filter(|n| *n > 0);
    // Whether auto applies: the process answered as a llama-server and was
    // not given -np. A bare library user (llama-cli, bindings) gets 1.
    let auto = np_given.is_none() && server.is_some();
    let sequences = first([
        (server.and_then(|s| s.total_slots), Api),
        (log.and_then(|l| l.n_seq_max), Log),
        (np_given, Argv),
    ])
    .or_else(|| {
        notes.push(match auto {
            true => format!("slots assumed: {AUTO_SLOTS}, llama-server's -np auto (since llama.cpp PR #16736, November 2025; 1 before)"),
            false => "sequences assumed: 1, llama.cpp's n_seq_max default (src/llama-context.cpp)".into(),
        });
        Some((if auto { AUTO_SLOTS } else { 1 }, Default))
    });
    // No endpoint says it (see src/models/runtimes/llamacpp.rs).
    let several = sequences.is_some_and(|(n, _)| n > 1);
    let kv_unified = first([(log.and_then(|l| l.kv_unified), Log), (launch.kv_unified, Argv)]).or_else(|| {
        // With one sequence both layouts are the same cache.
        several.then(|| notes.push(match auto {
            true => "kv unified assumed: llama-server's default without -np (since llama.cpp PR #16736, November 2025)".into(),
            false => "kv unified assumed off: one KV stream per sequence, llama.cpp's default since PR #14363 (July 2025); builds before it shared one stream".into(),
        }));
        Some((auto, Default))
    });
    let mut per_seq = first([
        (server.and_then(|s| s.n_ctx_per_slot), Api),
        (log.and_then(|l| l.n_ctx_seq), Log),
    ]);
    let mut total = first([
        (server.and_then(ServerState::reported_total), Api),
        (log.and_then(|l| l.n_ctx), Log),
    ]);
    if let (Some((unified, u_src)), Some((seqs, s_src))) = (kv_unified, sequences) {
        let streams = if unified { 1 } else { u64::from(seqs.max(1)) };
        if let (None, Some((per, p_src))) = (total, per_seq) {
            total = per.checked_mul(streams).map(|t| (t, p_src.max(u_src).max(s_src)));
        }
        if let (None, Some((all, t_src))) = (per_seq, total) {
            per_seq = Some((all / streams, t_src.max(u_src).max(s_src)));
        }
    }
    let total = total.or(launch.ctx.filter(|c| *c > 0).map(|c| (c, Argv)));
    ModelSettings {
        context_total: total.map(|(v, _)| v),
        context_per_seq: per_seq.map(|(v, _)| v),
        sequences: sequences.map(|(v, _)| v),
        kv_unified: kv_unified.map(|(v, _)| v),
        sources: SettingSources {
            context_total: total.map(|(_, s)| s),
            context_per_seq: per_seq.map(|(_, s)| s),
            sequences: sequences.map(|(_, s)| s),
            kv_unified: kv_unified.map(|(_, s)| s),
        },
        cache_type_k: launch.cache_type_k.clone().unwrap_or_else(|| "f16".into()),
        cache_type_v: launch.cache_type_v.clone().unwrap_or_else(|| "f16".into()),
        n_gpu_layers: launch.n_gpu_layers,
        swa_full: launch.swa_full.unwrap_or(false),
        flash_attn: launch.flash_attn.clone(),
        ubatch: launch.ubatch,
    }
}

impl ModelSettings {
    /// What llama.cpp makes of settings the server did not report: `-c` 0
    /// or absent is the training context, `-c` is padded to 256 and split
    /// over the sequences (src/llama-context.cpp), as the estimate did.
    fn fill_from_estimate(&mut self, kv: &gguf::KvEstimate) {
        let total_source = match self.sources.context_total {
            None | Some(SettingSource::Argv) => self.sources.context_total.or(Some(SettingSource::Default)),
            _ => return,
        };
        self.context_total = Some(u64::from(kv.context));
        self.sources.context_total = total_source;
        if self.context_per_seq.is_none() {
            self.context_per_seq = Some(u64::from(kv.context_per_seq));
            self.sources.context_per_seq = total_source.max(self.sources.kv_unified).max(self.sources.sequences);
        }
    }

    fn to_kv(&self) -> gguf::KvSettings {
        let defaults = gguf::KvSettings::default();
        gguf::KvSettings {
            ctx: self.context_total.and_then(|c| u32::try_from(c).ok()),
            n_seq: self.sequences.unwrap_or(1).max(1),
            kv_unified: self.kv_unified.unwrap_or(false),
            type_k: self.cache_type_k.parse().unwrap_or(defaults.type_k),
            type_v: self.cache_type_v.parse().unwrap_or(defaults.type_v),
            n_ubatch: self.ubatch.unwrap_or(defaults.n_ubatch),
            swa_full: self.swa_full,
            flash_attn: self.flash_attn.as_deref() != Some("off"),
            n_gpu_layers: self
                .n_gpu_layers
                .and_then(|n| i32::try_from(n).ok())
                .filter(|n| *n >= 0),
        }
    }
}

/// The whole lines among the last `limit` bytes of a file.
fn read_tail(path: &Path, limit: u64) -> std::io::Result<String> {
    let mut file = regular_file::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(limit);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let text = match (start > 0, text.find('\n')) {
        (true, Some(nl)) => &text[nl + 1..],
        // The window lies inside one line (or the file was cut and
        // rewritten shorter while read): no line starts in it.
        (true, None) => "",
        (false, _) => &text[..],
    };
    // A last line without its newline may still be being written (the
    // runtime's stdout is block-buffered): `n_ctx_train = 3` of 32768. It
    // is read whole next time.
    Ok(match text.rfind('\n') {
        Some(nl) => text[..=nl].to_string(),
        None => String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ProcessKind;
    use std::io::Write;
    use std::process::{Child, Command};

    const SHAPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/qwen3-0.6b-shape.gguf");

    /// A real process (its /proc entries are read) working in `cwd`,
    /// described as the scan would describe an AI process with `argv`.
    struct Subject {
        child: Child,
        info: ProcInfo,
    }

    impl Subject {
        fn new(cwd: &Path, argv: &[&str]) -> Subject {
            let child = Command::new("sleep").arg("60").current_dir(cwd).spawn().expect("sleep");
            let info = ProcInfo {
                pid: child.id(),
                ppid: None,
                start_ticks: 0,
                name: "llama-server".into(),
                start_time: Some(format!("start-{}", child.id())),
                user: None,
                argv: argv.iter().map(|a| a.to_string()).collect(),
                cmdline: None,
                exe: None,
                runtimes: vec!["llama.cpp".into()],
                mapped_files: Vec::new(),
                maps_readable: true,
                kind: ProcessKind::Ai,
                cpu_percent: None,
                rss_bytes: None,
                notes: Vec::new(),
            };
            Subject { child, info }
        }
    }

    impl Drop for Subject {
        fn drop(&mut self) {
            self.child.kill().ok();
            self.child.wait().ok();
        }
    }

    fn discovery() -> Arc<Discovery> {
        Arc::new(Discovery::new(PathBuf::from("/proc")))
    }

    #[test]
    #[cfg(unix)] // FIFOs and device files
    fn a_fifo_or_device_named_as_model_config_or_log_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.gguf");
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.gguf")).unwrap();
        let a = Subject::new(dir.path(), &["llama-server", "-m", "f.gguf", "--log-file", "f.gguf"]);
        let b = Subject::new(dir.path(), &["llama-server", "-m", "zero.gguf"]);
        let started = Instant::now();
        let found = discovery().discover(&[&a.info, &b.info]);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
        for (subject, name) in [(&a, "f.gguf"), (&b, "zero.gguf")] {
            let d = &found[&subject.info.pid];
            assert!(!d.pending, "{:?}", d.notes);
            let model = &d.models[0];
            assert_eq!(model.path.as_deref(), Some(dir.path().join(name).to_str().unwrap()));
            assert!(
                model.notes.iter().any(|n| n.contains("not a regular file")),
                "{:?}",
                model.notes
            );
        }
        // vLLM's config.json as a symlink to /dev/zero, beside a FIFO named
        // like a weights file: neither is read.
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("config.json")).unwrap();
        assert!(Command::new("mkfifo")
            .arg(dir.path().join("x.safetensors"))
            .status()
            .unwrap()
            .success());
        let started = Instant::now();
        let access = Access::of_process(Path::new("/proc"), std::process::id(), &[]);
        let (probe, round) = (
            ByteBudget::new("this probe", 1 << 20),
            ByteBudget::new("this round", 1 << 20),
        );
        let budgets = hf_folder::Budgets {
            probe: &probe,
            round: &round,
        };
        let weights = hf_folder::safetensors_weights(dir.path(), &access, &budgets).unwrap_err();
        assert!(
            weights.ends_with("x.safetensors: not a regular file: a FIFO"),
            "{weights}"
        );
        let mut notes = Vec::new();
        assert_eq!(hf_folder::config(dir.path(), &access, &budgets, &mut notes), None);
        assert!(notes[0].contains("not a regular file: a character device"), "{notes:?}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_process_whose_discovery_hangs_does_not_hold_up_the_others_nor_itself_later() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(SHAPE, dir.path().join("m.gguf")).unwrap();
        let stuck = Subject::new(dir.path(), &["llama-server", "-m", "m.gguf"]);
        let honest = Subject::new(dir.path(), &["llama-server"]);
        let d = discovery();
        // Holding the header cache stands in for a file system that never
        // answers: `stuck` waits on it, `honest` needs no header.
        let held = d.headers.lock().unwrap();
        let started = Instant::now();
        let found = d.discover(&[&stuck.info, &honest.info]);
        let took = started.elapsed();
        assert!(
            took >= DEADLINE && took < DEADLINE + Duration::from_millis(900),
            "{took:?}"
        );
        assert!(!found[&honest.info.pid].pending);
        let waiting = &found[&stuck.info.pid];
        assert!(waiting.pending && waiting.models.is_empty());
        assert!(
            waiting.notes[0].contains("did not finish within 2 s"),
            "{:?}",
            waiting.notes
        );
        // Still stuck: not started again, and said so at once.
        let started = Instant::now();
        let again = d.discover(&[&stuck.info]);
        assert!(started.elapsed() < Duration::from_millis(100));
        assert!(again[&stuck.info.pid].notes[0].contains("an earlier discovery of it is still waiting"));
        drop(held);
        // Once it answers, the process is discovered like any other.
        let deadline = Instant::now() + Duration::from_secs(5);
        while d
            .inflight
            .lock()
            .unwrap()
            .contains(&(stuck.info.pid, stuck.info.start_time.clone()))
        {
            assert!(Instant::now() < deadline, "the stuck discovery never returned");
            std::thread::sleep(Duration::from_millis(10));
        }
        let found = d.discover(&[&stuck.info]);
        let d = &found[&stuck.info.pid];
        assert!(!d.pending);
        assert_eq!(d.models[0].architecture.as_deref(), Some("qwen3"));
    }

    #[test]
    fn discovery_threads_stay_at_their_limit_however_many_processes_are_stuck() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(SHAPE, dir.path().join("m.gguf")).unwrap();
        let stuck: Vec<Subject> = (0..MAX_DISCOVERY_THREADS + 4)
            .map(|_| Subject::new(dir.path(), &["llama-server", "-m", "m.gguf"]))
            .collect();
        let d = discovery();
        // Every one of them waits on the held header cache, as on a file
        // system that never answers.
        let held = d.headers.lock().unwrap();
        let found = d.discover(&stuck.iter().map(|s| &s.info).collect::<Vec<_>>());
        assert_eq!(d.threads.load(Ordering::Acquire), MAX_DISCOVERY_THREADS);
        let not_started: Vec<_> = found
            .values()
            .filter(|f| f.notes[0].contains("threads were busy"))
            .collect();
        assert_eq!(not_started.len(), 4, "{found:?}");
        assert!(not_started.iter().all(|f| f.pending && f.models.is_empty()));
        // Respawned processes (new PIDs) get no thread while all are stuck,
        // and are told so at once.
        let respawned: Vec<Subject> = (0..3)
            .map(|_| Subject::new(dir.path(), &["llama-server", "-m", "m.gguf"]))
            .collect();
        let started = Instant::now();
        let found = d.discover(&respawned.iter().map(|s| &s.info).collect::<Vec<_>>());
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(
            found.values().all(|f| f.notes[0].contains("threads were busy")),
            "{found:?}"
        );
        assert_eq!(d.threads.load(Ordering::Acquire), MAX_DISCOVERY_THREADS);
        drop(held);
        let deadline = Instant::now() + Duration::from_secs(10);
        while d.threads.load(Ordering::Acquire) > 0 {
            assert!(Instant::now() < deadline, "the stuck threads never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Free again: all are discovered.
        let found = d.discover(&respawned.iter().map(|s| &s.info).collect::<Vec<_>>());
        assert!(found.values().all(|f| !f.pending), "{found:?}");
    }

    #[test]
    fn headers_of_models_no_process_uses_any_more_are_evicted() {
        let dir = tempfile::tempdir().unwrap();
        let d = discovery();
        // 80 servers coming and going, each with a model file of its own.
        for i in 0..80 {
            let name = format!("m{i}.gguf");
            std::fs::copy(SHAPE, dir.path().join(&name)).unwrap();
            let server = Subject::new(dir.path(), &["llama-server", "-m", &name]);
            let found = d.discover(&[&server.info]);
            assert_eq!(found[&server.info.pid].models[0].architecture.as_deref(), Some("qwen3"));
            assert!(d.cached().0 <= 2, "round {i}: {:?} cached", d.cached());
        }
        // A round that sees no process with a model sweeps the rest.
        let bare = Subject::new(dir.path(), &["llama-server"]);
        d.discover(&[&bare.info]);
        d.discover(&[&bare.info]);
        assert_eq!(d.cached(), (0, 0));
        // However many in one round, at most MAX_CACHED are kept.
        let mut cache = RoundCache::new();
        for i in 0..(MAX_CACHED + 100) {
            cache.insert(i, (), 1);
        }
        assert_eq!(cache.len(), MAX_CACHED);
    }

    #[test]
    fn a_relative_log_file_is_read_from_the_process_working_directory() {
        let srv = tempfile::tempdir().unwrap();
        std::fs::copy(SHAPE, srv.path().join("m.gguf")).unwrap();
        std::fs::write(
            srv.path().join("server.log"),
            "llama_kv_cache:        CPU KV buffer size =   100.00 MiB\n",
        )
        .unwrap();
        let server = Subject::new(
            srv.path(),
            &["llama-server", "-m", "m.gguf", "--log-file", "server.log"],
        );
        let found = discovery().discover(&[&server.info]);
        let reported = found[&server.info.pid].models[0]
            .reported
            .clone()
            .expect("reported from the log");
        assert_eq!(reported.kv_bytes, Some(100 << 20));
        assert_eq!(
            reported.source,
            format!("log:{}", srv.path().join("server.log").display())
        );
    }

    const LINE: &str = "load_tensors:        CUDA0 model buffer size =  1024.00 MiB\n";

    /// Writes `text` in 7-byte pieces, as a runtime's buffered stdout
    /// lands: a reader may see a line cut anywhere.
    fn write_in_pieces(file: &mut std::fs::File, text: &str) {
        for piece in text.as_bytes().chunks(7) {
            let _ = file.write_all(piece);
        }
    }

    /// A log read while it is truncated in place (logrotate's copytruncate,
    /// a runtime restarted with `>`), rotated (renamed away, a new file
    /// begun) and appended to: each read gives whole lines' figures (1024
    /// MiB on CUDA0), nothing, or "not found" between the rename and the new
    /// file; never a panic, a cut figure or a cut device name.
    #[test]
    fn a_log_rotated_or_truncated_while_read_gives_whole_lines_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        std::fs::write(&path, LINE.repeat(100)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let lines = LINE.repeat(1 + (round % 150) as usize);
                    match round % 3 {
                        0 => {
                            let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&path);
                            if let Ok(f) = f.as_mut() {
                                write_in_pieces(f, &lines);
                            }
                        }
                        1 => {
                            let _ = std::fs::rename(&path, dir_of(&path).join("server.log.1"));
                            if let Ok(mut f) = std::fs::File::create(&path) {
                                write_in_pieces(&mut f, &lines);
                            }
                        }
                        _ => {
                            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&path) {
                                write_in_pieces(&mut f, &lines);
                            }
                        }
                    }
                }
            })
        };
        let (mut reads, mut figures, mut missing) = (0u32, 0usize, 0u32);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) || reads < 200 {
            // A small window, so the cut at its start is exercised too.
            match read_tail(&path, 1000) {
                Ok(text) => {
                    let report = logs::parse_log(&text);
                    for b in &report.buffers {
                        assert_eq!((b.device.as_str(), b.bytes), ("CUDA0", 1024 << 20), "{text:?}");
                    }
                    figures += report.buffers.len();
                    reads += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing += 1,
                Err(e) => panic!("{e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(figures > 0, "{reads} reads, {missing} between rotations, no figure");
    }

    fn dir_of(path: &Path) -> PathBuf {
        path.parent().unwrap().to_path_buf()
    }

    #[test]
    fn only_whole_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        std::fs::write(&path, LINE).unwrap();
        assert_eq!(read_tail(&path, 1000).unwrap(), LINE);
        // The last 30 bytes are the middle of the line: not a line.
        assert_eq!(read_tail(&path, 30).unwrap(), "");
        std::fs::write(&path, LINE.repeat(2)).unwrap();
        assert_eq!(read_tail(&path, LINE.len() as u64 + 3).unwrap(), LINE);
        // A line still being written waits for its newline.
        std::fs::write(&path, format!("{LINE}{}", &LINE[..40])).unwrap();
        assert_eq!(read_tail(&path, 1000).unwrap(), LINE);
    }

    /// A runtime writes its log in pieces (stdout is block-buffered when it
    /// is a file), so a read may end inside a line: `n_ctx_train = 3` of
    /// `n_ctx_train = 32768` was read as 3 before the reader kept to whole
    /// lines. Every line of a real log, cut at every byte, gives nothing
    /// until its newline is there, then what the whole line says.
    #[test]
    fn a_line_cut_while_it_is_written_gives_nothing_until_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let mut lines: Vec<&str> = include_str!("../../tests/data/llama-server/server.log")
            .lines()
            .collect();
        lines.extend([
            "time=2026-05-05T01:30:33.796+08:00 level=INFO source=device.go:240 msg=\"model weights\" device=CUDA0 size=\"13.0 GiB\"",
            "llama_kv_cache: size = 1024.00 MiB ( 32768 cells,  28 layers, 14/1 seqs), K (f16):  512.00 MiB, V (f16):  512.00 MiB",
        ]);
        let mut checked = 0;
        for line in lines {
            for cut in (1..line.len()).filter(|&i| line.is_char_boundary(i)) {
                std::fs::write(&path, &line[..cut]).unwrap();
                let report = logs::parse_log(&read_tail(&path, LOG_TAIL).unwrap());
                assert_eq!(report, logs::LogReport::default(), "{:?}", &line[..cut]);
                checked += 1;
            }
            std::fs::write(&path, format!("{line}\n")).unwrap();
            let whole = logs::parse_log(&format!("{line}\n"));
            assert_eq!(logs::parse_log(&read_tail(&path, LOG_TAIL).unwrap()), whole, "{line}");
        }
        assert!(checked > 5_000, "{checked}");
    }

    /// Only the command line is known (no API answered, no log): `-c 8192
    /// -np 2` is two streams of 4096, unified off by llama.cpp's default
    /// for an explicit -np, and the JSON says which figure came from where.
    #[test]
    fn settings_from_the_command_line_alone_say_what_was_assumed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(SHAPE, dir.path().join("m.gguf")).unwrap();
        let server = Subject::new(dir.path(), &["llama-server", "-m", "m.gguf", "-c", "8000", "-np", "2"]);
        let found = discovery().discover(&[&server.info]);
        let model = &found[&server.info.pid].models[0];
        let s = model.settings.clone().unwrap();
        // -c 8000 is padded to 8192 (src/llama-context.cpp), as llama.cpp does.
        assert_eq!(
            (s.context_total, s.context_per_seq, s.sequences, s.kv_unified),
            (Some(8192), Some(4096), Some(2), Some(false))
        );
        use SettingSource::{Argv, Default};
        assert_eq!(
            s.sources,
            SettingSources {
                context_total: Some(Argv),
                context_per_seq: Some(Default),
                sequences: Some(Argv),
                kv_unified: Some(Default),
            }
        );
        assert_eq!(model.context, Some(8192));
        assert_eq!(model.slots_total, Some(2));
        assert!(
            model
                .notes
                .iter()
                .any(|n| n.contains("kv unified assumed off") && n.contains("PR #14363")),
            "{:?}",
            model.notes
        );
        // Qwen3-0.6B's shape: 28 layers x 8 KV heads x 128 x f16 x (K + V)
        // = 112 KiB a cell, 8192 cells.
        assert_eq!(model.estimate.as_ref().unwrap().kv_bytes, Some(8192 * 28 * 4096));
    }

    /// The API answered but no log was found: `/props` gives one slot's
    /// context and the slots; the total follows from the layout llama.cpp
    /// defaults to (an explicit -np: separate streams; no -np: one unified
    /// cache), and carries the weakest source it came from.
    #[test]
    fn settings_from_the_api_without_a_log_derive_the_total() {
        let launch =
            |argv: &[&str]| cmdline::parse_launch(&argv.iter().map(|a| a.to_string()).collect::<Vec<_>>(), &[]);
        let state = |per_slot, slots| ServerState {
            n_ctx_per_slot: Some(per_slot),
            n_ctx_meta: Some(per_slot),
            total_slots: Some(slots),
            ..ServerState::default()
        };
        let mut notes = Vec::new();
        let split = resolve_settings(
            &launch(&["llama-server", "-c", "8192", "-np", "2"]),
            Some(&state(4096, 2)),
            None,
            &mut notes,
        );
        assert_eq!(
            (
                split.context_total,
                split.context_per_seq,
                split.sequences,
                split.kv_unified
            ),
            (Some(8192), Some(4096), Some(2), Some(false))
        );
        assert_eq!(split.sources.context_total, Some(SettingSource::Default));
        assert_eq!(split.sources.context_per_seq, Some(SettingSource::Api));
        let auto = resolve_settings(
            &launch(&["llama-server", "-c", "4096"]),
            Some(&state(4096, 4)),
            None,
            &mut notes,
        );
        assert_eq!(
            (
                auto.context_total,
                auto.context_per_seq,
                auto.sequences,
                auto.kv_unified
            ),
            (Some(4096), Some(4096), Some(4), Some(true))
        );
        assert!(notes.iter().any(|n| n.contains("PR #16736")), "{notes:?}");
        // The log, where there is one, settles what the API cannot say.
        let log = logs::parse_log("llama_context: n_ctx = 8192\nllama_context: kv_unified = true\n");
        let said = resolve_settings(
            &launch(&["llama-server", "-np", "2"]),
            Some(&state(8192, 2)),
            Some(&log),
            &mut notes,
        );
        assert_eq!((said.context_total, said.kv_unified), (Some(8192), Some(true)));
        assert_eq!(said.sources.kv_unified, Some(SettingSource::Log));
    }

    /// Rates need two samples: the first says null, not 0; a counter that
    /// went backwards (the server restarted its counting) says null too,
    /// and so does a pair of samples of which only one counts the requests
    /// in flight.
    #[test]
    fn token_rates_come_from_two_samples_of_the_counters() {
        let t0 = Instant::now();
        let mut rates = TokenRates::default();
        rates.sample((t0, Some(100), Some(40), true));
        assert_eq!((rates.prompt, rates.generation), (None, None));
        rates.sample((t0 + Duration::from_secs(2), Some(300), Some(100), true));
        assert_eq!((rates.prompt, rates.generation), (Some(100.0), Some(30.0)));
        rates.sample((t0 + Duration::from_secs(4), Some(300), Some(5), true));
        assert_eq!((rates.prompt, rates.generation), (Some(0.0), None));
        rates.sample((t0 + Duration::from_secs(4), Some(400), None, true));
        assert_eq!((rates.prompt, rates.generation), (None, None), "no time, no counter");
        rates.sample((t0 + Duration::from_secs(6), Some(500), Some(10), false));
        assert_eq!((rates.prompt, rates.generation), (None, None), "unlike samples");
    }

    /// A request in flight counts from its first token: two reads of a
    /// server whose counters have not moved (no request ended) still give
    /// the tokens generated between them, and a prompt is counted once,
    /// in flight while it is processed and in the counter after.
    #[test]
    fn requests_in_flight_move_the_token_totals() {
        use runtimes::llamacpp::{parse_metrics, parse_slots};
        let slots = |prompt_done: u64, decoded: u64| {
            format!(
                r#"[{{"id":0,"n_ctx":2048,"is_processing":false}},
                   {{"id":1,"n_ctx":2048,"is_processing":true,"id_task":7,"n_prompt_tokens_processed":{prompt_done},
                     "next_token":[{{"has_next_token":true,"n_decoded":{decoded}}}]}}]"#
            )
        };
        let metrics = |prompt: u64, predicted: u64| {
            parse_metrics(&format!(
                "llamacpp:prompt_tokens_total {prompt}\nllamacpp:tokens_predicted_total {predicted}\n"
            ))
            .unwrap()
        };
        let state = |slots_body: String, m| {
            let mut s = ServerState::default();
            s.merge_slots(&parse_slots(slots_body.as_bytes()).unwrap());
            s.merge_metrics(&m);
            s
        };
        // In its prompt: 5 of 16 processed, not yet in the counter.
        assert_eq!(
            state(slots(5, 0), metrics(100, 40)).token_totals(),
            (Some(105), Some(40), true)
        );
        // Generating: the prompt's 16 are in the counter, 11 tokens so far.
        assert_eq!(
            state(slots(16, 11), metrics(116, 40)).token_totals(),
            (Some(116), Some(51), true)
        );
        // A busy slot that does not say how far it is: the counters alone.
        let old = r#"[{"id":0,"n_ctx":2048,"is_processing":true}]"#.to_string();
        assert_eq!(
            state(old, metrics(116, 40)).token_totals(),
            (Some(116), Some(40), false)
        );
        let t0 = Instant::now();
        let mut rates = TokenRates::default();
        rates.sample((t0, Some(116), Some(51), true));
        let later = state(slots(16, 71), metrics(116, 40)).token_totals();
        rates.sample((t0 + Duration::from_millis(500), later.0, later.1, later.2));
        assert_eq!((rates.prompt, rates.generation), (Some(0.0), Some(120.0)));
    }
}
