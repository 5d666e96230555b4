//! Discovery: the threads that find each process's models, at most
//! [`MAX_DISCOVERY_THREADS`] alive, each round waited for at most
//! [`DEADLINE`]; a process not done by then is left pending with a note,
//! and never holds up the others. Per process it gathers the evidence,
//! the runtime's API answer, its log, the settings and the estimate into
//! the snapshot's [`Model`]s.

use super::access::{Access, Want};
use super::api::{ApiAnswer, ApiModel, Apis};
use super::budget::ByteBudget;
use super::cmdline::{self, LaunchSettings};
use super::estimate;
use super::evidence::{add, add_api_paths, is_confirmed, Evidence, Found};
use super::hf_server;
use super::log_file;
use super::logs;
use super::ollama_folder::{self, Installed};
use super::round::{Listening, ProcessKey, Round, RoundCache};
use super::settings::resolve_settings;
use super::vllm;
use crate::procs::ProcInfo;
use crate::snapshot::{Model, NameSource, SettingSource};
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How long one round of discovery waits for a process. A process whose
/// files or API do not answer by then (a FUSE mount that never replies, a
/// socket that accepts and stalls) is left with a note; the others are
/// never held up by it, and it is not looked at again while its last
/// discovery is still stuck.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Bytes of outside files (vLLM folders' config.json and safetensors
/// headers) one round may read across all its threads (a probe may read
/// half of it: the API's own limit).
const ROUND_BYTES: u64 = 64 << 20;
/// Discovery threads alive at once, at most, stuck ones included; each
/// takes the round's processes one after another. Hostile processes
/// respawned every few seconds must not grow the monitor's threads
/// without end.
const MAX_DISCOVERY_THREADS: usize = 16;

/// A model file's header, read once per (path, size, mtime).
type Header = (u64, Option<SystemTime>, Arc<Result<gguf::Model, String>>);

pub struct Discovery {
    root: PathBuf,
    apis: Apis,
    extra_model_flags: Vec<String>,
    headers: Mutex<RoundCache<PathBuf, Header>>,
    /// Whether a mapped file is a GGUF, by path.
    magic: Mutex<RoundCache<String, bool>>,
    /// The current discovery round, for the caches' sweep.
    round: AtomicU64,
    /// Processes whose discovery thread has not returned yet.
    inflight: Mutex<HashSet<ProcessKey>>,
    /// Discovery threads alive, of every round (at most
    /// [`MAX_DISCOVERY_THREADS`]).
    threads: AtomicUsize,
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
            apis: Apis::new(root.clone()),
            root,
            extra_model_flags,
            headers: Mutex::new(RoundCache::new()),
            magic: Mutex::new(RoundCache::new()),
            round: AtomicU64::new(0),
            inflight: Mutex::new(HashSet::new()),
            threads: AtomicUsize::new(0),
            busy: AtomicBool::new(false),
            latest: Mutex::new(HashMap::new()),
        }
    }
    /// Discovers the models of every AI process on up to
    /// [`MAX_DISCOVERY_THREADS`] threads (each waits on its own probes, at
    /// most [`super::probe::TIMEOUT`] a request), for at most [`DEADLINE`]: a
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
        let answer = self.apis.answer(info, &launch, round, &access);
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
        let log = log_file::read_log(&self.root, info, &launch, &resolve, &access, &mut notes);
        let runner = estimate::Runner {
            backend: estimate::backend_of(&info.runtimes, info.maps_readable),
            llama_server: answer.server.is_some(),
        };
        let mut models: Vec<Model> = found
            .into_iter()
            .map(|mut f| {
                f.evidence.sort();
                let api = answer.models.iter().find(|m| {
                    m.path
                        .as_deref()
                        .is_some_and(|p| resolve(p) == f.path || p.file_name() == f.path.file_name())
                });
                let log = log.as_ref().filter(|(_, report)| log_file::log_names(report, &f.path));
                let mut model = self.describe(&f, (&launch, runner), &answer, api, log, (round, &access));
                if f.deleted {
                    model
                        .notes
                        .push("the file was deleted or replaced after it was mapped".into());
                }
                model
            })
            .collect();
        models.extend(models_without_file(&answer, log.as_ref()));
        if launch.model_paths.is_empty() {
            // What Ollama has pulled but not loaded: named, never confirmed.
            let installed = self.not_loaded(&answer, &models, round);
            models.extend(installed);
        } else {
            // An Ollama runner's blob, named by Ollama's tag for it.
            ollama_folder::name_by_tag(&mut models, &answer.installed);
        }
        Discovered {
            models,
            notes,
            listen_ports: answer.listen_ports.clone(),
            pending: false,
        }
    }

    /// What Ollama has pulled (`answer.installed`) but not loaded: neither
    /// its API nor any model found names it.
    fn not_loaded(&self, answer: &ApiAnswer, models: &[Model], round: &Round) -> Vec<Model> {
        let loaded = |i: &Installed| {
            answer.models.iter().any(|m| m.name.as_deref() == Some(i.name.as_str()))
                || models
                    .iter()
                    .any(|m| i.blob.is_some() && m.path == i.blob.as_ref().map(|b| b.display().to_string()))
        };
        answer
            .installed
            .iter()
            .filter(|i| !loaded(i))
            .map(|i| self.installed_model(i, round))
            .collect()
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

    /// A model in Ollama's folder: its header, when its blob is here; no
    /// settings, so no estimate.
    fn installed_model(&self, installed: &Installed, round: &Round) -> Model {
        let mut model = Model::default();
        if let Some(blob) = &installed.blob {
            match self.header(blob, round).as_ref() {
                Ok(m) => estimate::describe_header(&mut model, m),
                Err(e) => model.notes.push(format!("model header not readable: {e}")),
            }
            model.path = Some(blob.display().to_string());
        }
        model.name = Some(installed.name.clone());
        model.name_source = Some(NameSource::OllamaTag);
        model.evidence = vec![Evidence::Installed.as_str().into()];
        model
    }

    fn describe(
        &self,
        found: &Found,
        (launch, runner): (&LaunchSettings, estimate::Runner),
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
                estimate::describe_header(&mut model, m);
                // What the runtime calls it (Ollama's tag, llama.cpp's
                // alias) is the name its users know.
                if let Some(api) = api.filter(|a| a.name.is_some()) {
                    (model.name, model.name_source) = (api.name.clone(), api.name_source);
                }
                match estimate::estimate(m, &mut settings, runner, &mut model.notes) {
                    Ok((estimate, context)) => {
                        model.context = Some(context);
                        model.estimate = Some(estimate);
                    }
                    Err(e) => model.notes.push(format!("no estimate: {e}")),
                }
            }
            Err(why) if found.refused.is_some() => model.notes.push(why.clone()),
            Err(e) => model.notes.push(format!("model header not readable: {e}")),
        }
        model.reported = api.and_then(|a| a.reported.clone());
        if let Some((source, report)) = log {
            model.reported = Some(estimate::reported_from_log(source, report));
        }
        model.settings = Some(settings);
        model
    }
}

/// The models an API names without a file here (Ollama names whose blob is
/// elsewhere, LM Studio ids), and what vLLM, SGLang and TGI serve (a
/// folder here, or a repository id), with what their log says.
fn models_without_file(answer: &ApiAnswer, log: Option<&(String, logs::LogReport)>) -> Vec<Model> {
    let api_only = answer.models.iter().filter(|m| m.path.is_none());
    let vllm_log = log.and_then(|(source, report)| Some((source.as_str(), report.vllm.as_ref()?)));
    let server_log = log.and_then(|(source, report)| Some((source.as_str(), report.server.as_ref()?)));
    api_only
        .map(|api| {
            let mut model = match (&api.vllm, &api.hf_server) {
                (Some(served), _) => vllm::model(served, answer.server_url.clone(), vllm_log),
                (None, Some(served)) => hf_server::model(served, answer.server_url.clone(), server_log),
                (None, None) => {
                    return Model {
                        name: api.name.clone(),
                        name_source: api.name.as_ref().and(api.name_source),
                        architecture: api.architecture.clone(),
                        file_type: api.file_type.clone(),
                        evidence: vec![Evidence::Api.as_str().into()],
                        context: api.context,
                        server_url: answer.server_url.clone(),
                        reported: api.reported.clone(),
                        activity: api.activity.clone(),
                        ..Model::default()
                    }
                }
            };
            // The counters are the server's: its rates are this model's
            // when it serves one (vLLM lists LoRA adapters too).
            if let (Some(activity), [_]) = (model.activity.as_mut(), &answer.models[..]) {
                (activity.prompt_tokens_per_second, activity.generation_tokens_per_second) = answer.token_rates();
            }
            model
        })
        .collect()
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
            if s.name.is_some() {
                (m.name, m.name_source) = (s.name.clone(), s.name_source);
            }
            m.server_url = s.server_url.clone();
            m.reported = m.reported.take().or(s.reported.clone());
            m.activity = m.activity.take().or(s.activity.clone());
        }
    }
}

#[cfg(test)]
mod tests;
