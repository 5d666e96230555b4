//! A vLLM server, asked and described: `/v1/models` names what it serves
//! (a Hugging Face id, or a folder here), `/metrics` its KV pool
//! (`cache_config_info`) and its work, the folder's `config.json` and
//! safetensors headers the estimate, and its log (runtimes::vllm_log) the
//! memory it gave each part. Its own figures are kept as reported, the
//! estimate from the folder apart, and the two are never summed.

use super::access::Access;
use super::hf_folder;
use super::probe::Prober;
use super::runtimes::vllm::{self, VllmMetrics};
use super::runtimes::vllm_log::{self, VllmLogReport};
use crate::snapshot::runtime_report::RuntimeReport;
use crate::snapshot::{Model, ModelActivity, ModelEstimate, ModelReported, NameSource};
use std::net::SocketAddr;
use std::path::PathBuf;

/// One model a vLLM server serves, as its API and its folder say.
#[derive(Debug, Clone, Default)]
pub(super) struct Served {
    /// Its id in `/v1/models` (`--served-model-name`, else the model argument).
    pub(super) name: Option<String>,
    /// The folder it was loaded from, when that is a folder here the
    /// process could list.
    pub(super) folder: Option<PathBuf>,
    /// Whether its command line names that folder too (`vllm serve DIR`).
    pub(super) named_by_cmdline: bool,
    pub(super) max_model_len: Option<u64>,
    /// Estimated from the folder: the safetensors headers' bytes and the
    /// KV cost of one token from config.json.
    pub(super) weights_bytes: Option<u64>,
    pub(super) kv_bytes_per_token: Option<u64>,
    pub(super) metrics: Option<VllmMetrics>,
}

/// What a probe needs of the process's command line.
pub(super) struct Launch<'a> {
    pub(super) api_key: Option<&'a str>,
    /// `--dtype`, which the KV cache follows when its own dtype is `auto`.
    pub(super) dtype: Option<&'a str>,
    pub(super) model_paths: &'a [String],
}

/// Asks a vLLM server at `addr` what it serves; `/metrics` is optional.
pub(super) fn probe(
    prober: &Prober,
    addr: SocketAddr,
    launch: &Launch,
    (access, budgets): (&Access, &hf_folder::Budgets),
    notes: &mut Vec<String>,
) -> Result<Vec<Served>, String> {
    let models = vllm::parse_models(&prober.get(addr, "/v1/models", launch.api_key)?)?;
    let metrics = prober
        .get(addr, "/metrics", launch.api_key)
        .and_then(|b| vllm::parse_metrics(&String::from_utf8_lossy(&b)))
        .ok();
    Ok(models
        .into_iter()
        .map(|m| {
            let folder = hf_folder::read(
                m.root.as_deref().or(m.id.as_deref()),
                launch.model_paths,
                access,
                budgets,
                notes,
            );
            let cache_dtype = metrics.as_ref().and_then(|m| m.cache_dtype.as_deref());
            Served {
                name: m.id,
                named_by_cmdline: folder.named_by_cmdline,
                max_model_len: m.max_model_len,
                weights_bytes: folder.weights_bytes,
                kv_bytes_per_token: folder
                    .config
                    .as_ref()
                    .and_then(|c| vllm::kv_bytes_per_token(c, launch.dtype, cache_dtype)),
                folder: folder.path,
                metrics: metrics.clone(),
            }
        })
        .collect())
}

/// The snapshot's model for what a vLLM server serves, with what its log
/// (`log`: where it was read, what it said) reported.
pub(super) fn model(served: &Served, server_url: Option<String>, log: Option<(&str, &VllmLogReport)>) -> Model {
    let metrics = served.metrics.as_ref();
    let runtime = runtime_report(served, log.map(|(_, r)| r));
    let reported = reported(metrics, log);
    // The estimate's pool: the memory vLLM gave the cache, in whole blocks
    // of the per-token cost from config.json.
    let kv_pool_blocks = match (reported.as_ref().and_then(|r| r.kv_bytes), served.kv_bytes_per_token) {
        (Some(bytes), Some(per_token)) => metrics
            .and_then(|m| m.block_size)
            .and_then(|block| vllm_log::kv_pool_blocks(bytes, per_token, block)),
        _ => None,
    };
    let estimate_kv = kv_pool_blocks
        .zip(metrics.and_then(|m| m.block_size))
        .and_then(|(blocks, block)| blocks.checked_mul(block)?.checked_mul(served.kv_bytes_per_token?));
    let (evidence, confirmed) = hf_folder::served_evidence(served.named_by_cmdline);
    Model {
        path: served.folder.as_ref().map(|f| f.display().to_string()),
        name: served.name.clone(),
        name_source: served.name.as_ref().map(|_| NameSource::Api),
        confirmed,
        evidence,
        context: served.max_model_len,
        server_url,
        estimate: (served.kv_bytes_per_token.is_some() || served.weights_bytes.is_some()).then(|| ModelEstimate {
            weights_bytes: served.weights_bytes,
            kv_bytes_per_token: served.kv_bytes_per_token,
            kv_bytes: estimate_kv,
            kv_pool_blocks,
            ..ModelEstimate::default()
        }),
        reported,
        runtime: Some(runtime),
        activity: metrics
            .map(|m| ModelActivity::from_metrics(m.requests_running, m.requests_waiting, m.kv_cache_usage)),
        ..Model::default()
    }
}

/// The bytes vLLM says it gave the KV cache and the weights: the KV
/// cache's from `/metrics` (`kv_cache_memory_bytes`, exact, set when the
/// size was given: `--kv-cache-memory-bytes`, the CPU build's
/// `VLLM_CPU_KVCACHE_SPACE`), else from its log (GiB to two decimals), the
/// weights' from its log.
fn reported(metrics: Option<&VllmMetrics>, log: Option<(&str, &VllmLogReport)>) -> Option<ModelReported> {
    let from_metrics = metrics.and_then(|m| m.kv_cache_memory_bytes);
    let kv_bytes = from_metrics.or(log.and_then(|(_, l)| l.kv_bytes));
    let weights_bytes = log.and_then(|(_, l)| l.weights_bytes);
    let mut sources = Vec::new();
    if from_metrics.is_some() {
        sources.push("api:/metrics".to_string());
    }
    if let Some((path, _)) =
        log.filter(|(_, l)| weights_bytes.is_some() || (from_metrics.is_none() && l.kv_bytes.is_some()))
    {
        sources.push(format!("log:{path}"));
    }
    (kv_bytes.is_some() || weights_bytes.is_some()).then(|| ModelReported {
        kv_bytes,
        weights_bytes,
        source: sources.join(", "),
        ..ModelReported::default()
    })
}

/// vLLM's own figures of its pool and work, each named as vLLM names it.
fn runtime_report(served: &Served, log: Option<&VllmLogReport>) -> RuntimeReport {
    let metrics = served.metrics.as_ref();
    let mut names = Vec::new();
    let mut name = |field: &str, from: &str| names.push(format!("{field}: {from}"));
    let kv_tokens = match (
        log.and_then(|l| l.kv_tokens),
        metrics.and_then(VllmMetrics::kv_capacity_tokens),
    ) {
        (Some(tokens), _) => {
            let pool = log.and_then(|l| l.kv_pool_device.as_deref()).unwrap_or("GPU");
            name("kv_tokens", &format!("log \"{pool} KV cache size: N tokens\""));
            Some(tokens)
        }
        (None, Some(tokens)) => {
            name("kv_tokens", "/metrics cache_config_info num_gpu_blocks × block_size");
            Some(tokens)
        }
        (None, None) => None,
    };
    if metrics.is_some_and(|m| m.num_gpu_blocks.is_some()) {
        name("kv_blocks", "/metrics cache_config_info num_gpu_blocks, block_size");
    }
    match (
        metrics.and_then(|m| m.kv_cache_memory_bytes),
        log.and_then(|l| l.kv_bytes_line),
    ) {
        (Some(_), _) => name("reported.kv_bytes", "/metrics cache_config_info kv_cache_memory_bytes"),
        (None, Some(line)) => name("reported.kv_bytes", &format!("log \"{line}\"")),
        (None, None) => {}
    }
    if log.is_some_and(|l| l.weights_bytes.is_some()) {
        name("reported.weights_bytes", "log \"Model loading took\"");
    }
    if log.is_some_and(|l| l.activation_peak_bytes.is_some()) {
        name("activation_peak_bytes", "log \"torch peak memory increase\"");
    }
    RuntimeReport {
        kv_tokens,
        kv_blocks: metrics.and_then(|m| m.num_gpu_blocks),
        kv_block_size: metrics.and_then(|m| m.block_size),
        kv_pool_device: log.and_then(|l| l.kv_pool_device.clone()),
        max_concurrency: log.and_then(|l| l.max_concurrency),
        max_model_len: served.max_model_len.or(log.and_then(|l| l.max_model_len)),
        memory_utilization: metrics.and_then(|m| m.gpu_memory_utilization),
        activation_peak_bytes: log.and_then(|l| l.activation_peak_bytes),
        preemptions: metrics.and_then(|m| m.preemptions),
        prefix_cache_hit_ratio: metrics.and_then(VllmMetrics::prefix_cache_hit_ratio),
        prompt_tokens_total: metrics.and_then(|m| m.prompt_tokens),
        generation_tokens_total: metrics.and_then(|m| m.generation_tokens),
        names,
    }
}
