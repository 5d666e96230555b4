//! What a process's runtime API says: which API to ask (llama.cpp,
//! Ollama, LM Studio, vLLM, SGLang, TGI), the probes on loopback, and the answers kept
//! per process for [`PROBE_INTERVAL`], their live part (llama.cpp's
//! `/slots`, `/metrics`) for [`LIVE_INTERVAL`], with the token rates
//! between two samples of its counters.

use super::access::Access;
use super::budget::ByteBudget;
use super::cmdline::LaunchSettings;
use super::hf_folder;
use super::hf_server;
use super::ollama_folder::{self, Installed};
use super::probe::{self, Prober};
use super::round::{ProcessKey, Round};
use super::runtimes::{self, llamacpp::ServerState};
use super::sockets;
use super::vllm;
use crate::procs::ProcInfo;
use crate::snapshot::{ModelReported, NameSource};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A process's API is asked at most this often; between probes the last
/// answer is reused.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(15);

/// Between full probes, what changes from second to second (llama.cpp's
/// `/slots` and `/metrics`: busy slots, requests, token counters) is asked
/// again at most this often, so the live view shows what the server does
/// now and token rates have two samples to come from.
pub const LIVE_INTERVAL: Duration = Duration::from_secs(2);
/// The window of the token rates of a server first seen busy: its second
/// sample is taken this long after the first (well inside discovery's deadline).
const FIRST_RATE_WINDOW: Duration = Duration::from_millis(300);

/// Ports of one process that are probed at most.
const MAX_PORTS: usize = 4;

/// Bytes of outside files (vLLM folders' config.json and safetensors
/// headers) one probe may read, and one round across all its threads.
/// Real folders take well under 1 MiB (a header is ~150 bytes a tensor).
const PROBE_BYTES: u64 = 32 << 20;

/// A model the runtime's API says it has loaded.
#[derive(Debug, Clone, Default)]
pub(super) struct ApiModel {
    /// The file, when the API names one (Ollama: when its blob is here).
    pub(super) path: Option<PathBuf>,
    pub(super) name: Option<String>,
    /// What `name` is: Ollama's tag, or another runtime's name for it.
    pub(super) name_source: Option<NameSource>,
    /// What the API says of a model it names without a file (LM Studio).
    pub(super) architecture: Option<String>,
    pub(super) file_type: Option<String>,
    pub(super) context: Option<u64>,
    /// What a vLLM server serves (its model is described by super::vllm).
    pub(super) vllm: Option<Box<vllm::Served>>,
    /// What an SGLang or TGI server serves (super::hf_server).
    pub(super) hf_server: Option<Box<hf_server::Served>>,
    pub(super) reported: Option<ModelReported>,
    /// What the runtime says the model is doing (Ollama: when it unloads).
    pub(super) activity: Option<crate::snapshot::ModelActivity>,
}

/// What a process's runtime API said, kept for [`PROBE_INTERVAL`].
#[derive(Debug, Clone, Default)]
pub(super) struct ApiAnswer {
    pub(super) server_url: Option<String>,
    /// The TCP ports the process listens on (sorted); None when its file
    /// descriptors cannot be read.
    pub(super) listen_ports: Option<Vec<u16>>,
    /// llama.cpp's server state, which also drives the settings.
    pub(super) server: Option<ServerState>,
    /// The address that answered, for the live refreshes.
    addr: Option<SocketAddr>,
    /// When the live part (llama.cpp's `/slots`, `/metrics`) was read.
    live_at: Option<Instant>,
    /// Token rates from the last two counter samples.
    rates: TokenRates,
    pub(super) models: Vec<ApiModel>,
    /// Ollama: the models in its models folder (`ollama serve` lists
    /// them; a runner's blob takes its tag from them).
    pub(super) installed: Vec<Installed>,
    pub(super) notes: Vec<String>,
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
    /// The server's token totals and whether those in flight are in them:
    /// llama.cpp's, or vLLM's `/metrics` counters, which its engine moves
    /// at every step (vllm/v1/metrics/loggers.py), so a request in flight
    /// is counted as it runs.
    fn token_totals(&self) -> Option<(Option<u64>, Option<u64>, bool)> {
        if let Some(state) = &self.server {
            return Some(state.token_totals());
        }
        if let Some(w) = self.hf_server_work() {
            // Totals that grow only as requests end give no rate of what
            // the server does now: none is given.
            return w
                .counts_in_flight
                .then_some((w.prompt_tokens, w.generation_tokens, true));
        }
        let m = self.vllm_metrics()?;
        Some((m.prompt_tokens, m.generation_tokens, true))
    }

    /// Adds `note` unless it is there already (a refresh failing each time
    /// says so once).
    fn note_once(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// What an SGLang or TGI server's `/metrics` says it is doing.
    fn hf_server_work(&self) -> Option<&runtimes::figures::ServerWork> {
        self.models.iter().find_map(|m| m.hf_server.as_ref()?.work.as_ref())
    }

    /// The `/metrics` of a vLLM server (one answer for all it serves).
    fn vllm_metrics(&self) -> Option<&runtimes::vllm::VllmMetrics> {
        self.models.iter().find_map(|m| m.vllm.as_ref()?.metrics.as_ref())
    }

    /// Takes the server's token totals as a sample (now) for the rates.
    fn sample_counters(&mut self) {
        let Some((prompt, generated, in_flight)) = self.token_totals() else {
            return;
        };
        let now = Instant::now();
        self.rates.sample((now, prompt, generated, in_flight));
        self.live_at = Some(now);
    }

    /// A server first seen while it works is sampled a second time after
    /// [`FIRST_RATE_WINDOW`], so a one-shot snapshot (and the live view's
    /// first figures) has its token rates; an idle one is not waited for.
    fn busy_with_counted_requests(&self) -> bool {
        let llama_cpp = self.server.as_ref().is_some_and(|s| {
            s.in_flight.is_some() && s.tokens_predicted_total.is_some() && s.slots_busy.is_some_and(|b| b > 0)
        });
        let vllm = self
            .vllm_metrics()
            .is_some_and(|m| m.generation_tokens.is_some() && m.requests_running.is_some_and(|r| r > 0));
        let hf_server = self.hf_server_work().is_some_and(|w| {
            w.counts_in_flight && w.generation_tokens.is_some() && w.requests_running.is_some_and(|r| r > 0)
        });
        llama_cpp || vllm || hf_server
    }

    /// Tokens a second (prompt, generated) between the last two samples of
    /// the server's counters; null until two exist.
    pub(super) fn token_rates(&self) -> (Option<f64>, Option<f64>) {
        (self.rates.prompt, self.rates.generation)
    }

    /// What the runtime is doing now, for a model it serves.
    pub(super) fn activity(&self) -> Option<crate::snapshot::ModelActivity> {
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

/// vLLM's engine core and its workers, renamed by setproctitle
/// (vllm/utils `bind_process_name`: `VLLM::EngineCore`, `VLLM::Worker_TP0`;
/// the kernel keeps 15 bytes of it as the name). Their API server, the
/// parent, answers for the model.
pub(super) fn is_vllm_engine(name: &str) -> bool {
    name.starts_with("VLLM::")
}

/// SGLang's schedulers (one per GPU), detokenizer and controllers, renamed
/// by setproctitle (`sglang::scheduler_TP0`, `sglang::detokenizer`:
/// managers/scheduler.py); their ports are their own (ZMQ, NCCL). The main
/// process keeps its command line and answers for the model, except in
/// 0.5.2, which titled it `sglang::http_server/tokenizer_manager`.
fn is_sglang_worker(name: &str) -> bool {
    name.starts_with("sglang::") && !name.starts_with("sglang::http")
}

/// TGI's router (`text-generation-router`, which the launcher starts)
/// serves the API; the launcher and the shards (`text-generation-server
/// serve`, which hold the GPU) answer on no TCP port of its
/// (launcher/src/main.rs).
fn is_tgi_router(info: &ProcInfo) -> bool {
    use crate::procs::classify::file_name;
    info.argv.first().map(|a| file_name(a)) == Some("text-generation-router")
        || info.exe.as_deref().map(file_name) == Some("text-generation-router")
}

/// The runtime APIs gputaskman knows.
#[derive(Debug, Clone, Copy)]
pub(super) enum Api {
    LlamaCpp,
    Ollama,
    LmStudio,
    Vllm,
    Sglang,
    Tgi,
}

impl From<hf_server::Runtime> for Api {
    fn from(runtime: hf_server::Runtime) -> Api {
        match runtime {
            hf_server::Runtime::Sglang => Api::Sglang,
            hf_server::Runtime::Tgi => Api::Tgi,
        }
    }
}

impl Api {
    /// The API to ask a process, from the runtimes found in it; None for a
    /// process that is none of these servers (a PyTorch trainer, vLLM's
    /// engine core and workers, whose ports are its own ZMQ sockets): its
    /// ports are not probed as another runtime's.
    pub(super) fn for_process(info: &ProcInfo, launch: &LaunchSettings) -> Option<Api> {
        let has = |r: &str| info.runtimes.iter().any(|x| x == r);
        if has("ollama") {
            Some(Api::Ollama)
        } else if has("lm-studio") {
            Some(Api::LmStudio)
        } else if is_vllm_engine(&info.name) || is_sglang_worker(&info.name) {
            None
        } else if has("vllm") {
            Some(Api::Vllm)
        } else if has("sglang") {
            Some(Api::Sglang)
        } else if has("tgi") {
            is_tgi_router(info).then_some(Api::Tgi)
        } else if ["llama.cpp", "ggml", "koboldcpp"].iter().any(|r| has(r))
            || launch
                .model_paths
                .iter()
                .any(|p| p.to_ascii_lowercase().ends_with(".gguf"))
        {
            // llama.cpp's server and those built on it (llama-cpp-python,
            // koboldcpp), known by library, name, mapped or named GGUF.
            Some(Api::LlamaCpp)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Api::LlamaCpp => "llama.cpp",
            Api::Ollama => "Ollama",
            Api::LmStudio => "LM Studio",
            Api::Vllm => "vLLM",
            Api::Sglang => "SGLang",
            Api::Tgi => "TGI",
        }
    }
}

/// The runtime APIs of the monitored processes: the HTTP client and the
/// answers of each process, kept for [`PROBE_INTERVAL`].
pub(super) struct Apis {
    /// The /proc root, for the listening sockets.
    root: PathBuf,
    prober: Prober,
    answers: Mutex<HashMap<ProcessKey, (Instant, ApiAnswer)>>,
}

impl Apis {
    pub(super) fn new(root: PathBuf) -> Apis {
        Apis {
            root,
            prober: Prober::default(),
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// The runtime API's answer for this process, probed at most every
    /// [`PROBE_INTERVAL`], its live part at most every [`LIVE_INTERVAL`].
    /// The token counters' last sample is carried from answer to answer.
    pub(super) fn answer(&self, info: &ProcInfo, launch: &LaunchSettings, round: &Round, access: &Access) -> ApiAnswer {
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

    /// Asks a llama.cpp, SGLang, TGI or vLLM server again what changes
    /// from second to second.
    fn sample_live(&self, key: Option<&str>, answer: &mut ApiAnswer) {
        let Some(addr) = answer.addr else { return };
        if let Some(state) = answer.server.as_mut() {
            state.clear_live();
            self.probe_llamacpp_live(addr, key, state);
            answer.sample_counters();
        } else if let Some(served) = answer
            .models
            .iter_mut()
            .find_map(|m| m.hf_server.as_mut().filter(|s| s.work.is_some()))
        {
            if let Err(e) = hf_server::refresh_work(&self.prober, addr, key, served) {
                let note = format!("{} /metrics again: {e}", Api::from(served.runtime).name());
                answer.note_once(note);
            }
            answer.sample_counters();
        } else if answer.vllm_metrics().is_some() {
            // `/metrics` again; an answer that does not come leaves its
            // figures unknown rather than the last ones shown as now.
            let metrics = self
                .prober
                .get(addr, "/metrics", key)
                .and_then(|b| runtimes::vllm::parse_metrics(&String::from_utf8_lossy(&b)));
            for served in answer.models.iter_mut().filter_map(|m| m.vllm.as_mut()) {
                served.metrics = metrics.as_ref().ok().cloned();
            }
            if let Err(e) = metrics {
                answer.note_once(format!("vLLM's /metrics again: {e}"));
            }
            answer.sample_counters();
        }
    }

    fn probe(&self, info: &ProcInfo, launch: &LaunchSettings, round: &Round, access: &Access) -> ApiAnswer {
        let Some(api) = Api::for_process(info, launch) else {
            return ApiAnswer::default();
        };
        let mut answer = ApiAnswer {
            // What Ollama has pulled, by tag: `ollama serve` lists it, and
            // a runner's blob is named by it.
            installed: match api {
                Api::Ollama => ollama_folder::installed(),
                _ => Vec::new(),
            },
            ..ApiAnswer::default()
        };
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
        if matches!(api, Api::Ollama) {
            // `ollama runner --model BLOB` serves Ollama alone (/completion),
            // never /api/ps: its model is paired with `ollama serve`'s list
            // by `pair_ollama_runners`. `ollama serve` names no model.
            if !launch.model_paths.is_empty() {
                return answer;
            }
        }
        let key = launch.api_key.as_deref();
        for listen in addrs.into_iter().take(MAX_PORTS) {
            let Some(addr) = probe::loopback_for(listen) else {
                answer.notes.push(format!(
                    "listens on {listen} only: not probed (probes go to loopback only)"
                ));
                continue;
            };
            // The folder reads of vLLM, SGLang and TGI are paid from this.
            let probe_bytes = ByteBudget::new("this probe", PROBE_BYTES);
            let budgets = hf_folder::Budgets {
                probe: &probe_bytes,
                round: &round.bytes,
            };
            let result = match api {
                Api::LlamaCpp => self.probe_llamacpp(addr, key).map(|mut state| {
                    answer.notes.append(&mut state.notes);
                    answer.models = vec![ApiModel {
                        path: state.model_path.as_ref().map(PathBuf::from),
                        name: state.model_alias.clone(),
                        name_source: Some(NameSource::Api),
                        ..ApiModel::default()
                    }];
                    answer.server = Some(state);
                }),
                Api::Ollama => self
                    .probe_ollama(addr, &answer.installed)
                    .map(|models| answer.models = models),
                Api::LmStudio => self.probe_lmstudio(addr).map(|models| answer.models = models),
                Api::Sglang | Api::Tgi => {
                    let runtime = match api {
                        Api::Sglang => hf_server::Runtime::Sglang,
                        _ => hf_server::Runtime::Tgi,
                    };
                    let launched = (key, launch.model_paths.as_slice());
                    hf_server::probe(
                        &self.prober,
                        addr,
                        runtime,
                        launched,
                        (access, &budgets),
                        &mut answer.notes,
                    )
                    .map(|served| {
                        answer.models = vec![ApiModel {
                            hf_server: Some(Box::new(served)),
                            ..ApiModel::default()
                        }]
                    })
                }
                Api::Vllm => {
                    let vllm_launch = vllm::Launch {
                        api_key: key,
                        dtype: launch.dtype.as_deref(),
                        model_paths: &launch.model_paths,
                    };
                    vllm::probe(&self.prober, addr, &vllm_launch, (access, &budgets), &mut answer.notes).map(|served| {
                        answer.models = served
                            .into_iter()
                            .map(|s| ApiModel {
                                vllm: Some(Box::new(s)),
                                ..ApiModel::default()
                            })
                            .collect()
                    })
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
                name_source: Some(NameSource::OllamaTag),
                architecture: m.family.clone(),
                file_type: m.quantization_level.clone(),
                context: m.context_length,
                vllm: None,
                hf_server: None,
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
                name_source: Some(NameSource::Api),
                architecture: m.arch,
                file_type: m.quantization,
                context: m.loaded_context_length,
                ..ApiModel::default()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SGLang's workers are not asked; its main process is, whether it
    /// keeps its command line or (0.5.2) titles itself (comm keeps 15 bytes).
    #[test]
    fn sglang_workers_are_not_probed_and_its_http_server_is() {
        for worker in [
            "sglang::schedul",
            "sglang::detoken",
            "sglang::data_pa",
            "sglang::tokeniz",
        ] {
            assert!(is_sglang_worker(worker), "{worker}");
        }
        for server in ["sglang::http_se", "python3", "sglang"] {
            assert!(!is_sglang_worker(server), "{server}");
        }
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
