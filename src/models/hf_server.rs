//! SGLang and TGI, asked and described: each names the Hugging Face model
//! it serves (a folder here or a hub id) and says, in its API, `/metrics`
//! and log, the KV pool it made, the memory each part took and what it is
//! doing (runtimes::sglang, runtimes::tgi). The folder's `config.json` and
//! safetensors headers give the estimate. Their own figures are kept as
//! reported, the estimate apart, and the two are never summed.

use super::access::Access;
use super::hf_folder;
use super::probe::Prober;
use super::runtimes::figures::{ServerFigures, ServerWork};
use super::runtimes::{sglang, tgi, vllm};
use crate::snapshot::runtime_report::RuntimeReport;
use crate::snapshot::{Model, ModelActivity, ModelEstimate, ModelReported, NameSource};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Which of the two servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runtime {
    Sglang,
    Tgi,
}

impl Runtime {
    fn metrics(self, body: &[u8]) -> Result<ServerWork, String> {
        let text = String::from_utf8_lossy(body);
        match self {
            Runtime::Sglang => sglang::parse_metrics(&text),
            Runtime::Tgi => tgi::parse_metrics(&text),
        }
    }
}

/// What one such server serves, as its API and its folder say.
#[derive(Debug, Clone)]
pub(super) struct Served {
    pub(super) runtime: Runtime,
    pub(super) figures: ServerFigures,
    /// From `/metrics`; None when it is not served (SGLang without
    /// `--enable-metrics`) or did not answer.
    pub(super) work: Option<ServerWork>,
    /// The folder, when it is one here.
    folder: Option<PathBuf>,
    named_by_cmdline: bool,
    /// Estimated from the folder: the safetensors headers' bytes and the
    /// KV cost of one token from config.json.
    weights_bytes: Option<u64>,
    kv_bytes_per_token: Option<u64>,
}

/// Asks the server at `addr` what it serves (SGLang's `/server_info`,
/// `/get_server_info` before 0.5.10; TGI's `/info`) and what it is doing
/// (`/metrics`, optional), and reads the folder it names.
pub(super) fn probe(
    prober: &Prober,
    addr: SocketAddr,
    runtime: Runtime,
    (key, model_paths): (Option<&str>, &[String]),
    (access, budgets): (&Access, &hf_folder::Budgets),
    notes: &mut Vec<String>,
) -> Result<Served, String> {
    let figures = match runtime {
        Runtime::Sglang => prober
            .get(addr, "/server_info", key)
            .and_then(|b| sglang::parse_server_info(&b))
            .or_else(|current| {
                prober
                    .get(addr, "/get_server_info", key)
                    .and_then(|b| sglang::parse_server_info(&b))
                    .map_err(|older| format!("{current}; {older}"))
            })?,
        Runtime::Tgi => tgi::parse_info(&prober.get(addr, "/info", key)?)?,
    };
    let metrics = prober.get(addr, "/metrics", key);
    let folder = hf_folder::read(figures.model.as_deref(), model_paths, access, budgets, notes);
    Ok(Served {
        runtime,
        work: metrics.and_then(|b| runtime.metrics(&b)).ok(),
        kv_bytes_per_token: folder
            .config
            .as_ref()
            .and_then(|c| vllm::kv_bytes_per_token(c, figures.dtype.as_deref(), figures.kv_dtype.as_deref())),
        weights_bytes: folder.weights_bytes,
        folder: folder.path,
        named_by_cmdline: folder.named_by_cmdline,
        figures,
    })
}

/// `/metrics` read again; an answer that does not come leaves the work
/// unknown rather than the last figures shown as now.
pub(super) fn refresh_work(
    prober: &Prober,
    addr: SocketAddr,
    key: Option<&str>,
    served: &mut Served,
) -> Result<(), String> {
    let work = prober
        .get(addr, "/metrics", key)
        .and_then(|b| served.runtime.metrics(&b));
    served.work = work.as_ref().ok().cloned();
    work.map(|_| ())
}

/// The log's figures under the API's, and the log's path when a reported
/// figure came from it.
fn with_log(served: &Served, log: Option<(&str, &ServerFigures)>) -> (ServerFigures, Option<String>) {
    let mut figures = served.figures.clone();
    let Some((path, from_log)) = log else {
        return (figures, None);
    };
    let before = (figures.weights_bytes, figures.kv_bytes, figures.graph_bytes);
    figures.fill_from(from_log);
    let reported_from_log = before != (figures.weights_bytes, figures.kv_bytes, figures.graph_bytes);
    (figures, reported_from_log.then(|| format!("log:{path}")))
}

/// The snapshot's model for what the server serves, with what its log
/// (`log`: where it was read, what it said) adds.
pub(super) fn model(served: &Served, server_url: Option<String>, log: Option<(&str, &ServerFigures)>) -> Model {
    let (f, log_source) = with_log(served, log);
    // The pool in whole blocks where the server says them, else in tokens.
    let pool_tokens = f
        .kv_blocks
        .zip(f.kv_block_size)
        .and_then(|(blocks, size)| blocks.checked_mul(size))
        .or(f.kv_tokens);
    let (evidence, confirmed) = hf_folder::served_evidence(served.named_by_cmdline);
    let name = f.served_name.clone().or(f.model.clone());
    let work = served.work.as_ref();
    Model {
        path: served.folder.as_ref().map(|p| p.display().to_string()),
        name_source: name.as_ref().map(|_| NameSource::Api),
        name,
        confirmed,
        evidence,
        context: f.context,
        server_url,
        estimate: (served.kv_bytes_per_token.is_some() || served.weights_bytes.is_some()).then(|| ModelEstimate {
            weights_bytes: served.weights_bytes,
            kv_bytes_per_token: served.kv_bytes_per_token,
            kv_bytes: pool_tokens
                .zip(served.kv_bytes_per_token)
                .and_then(|(t, b)| t.checked_mul(b)),
            ..ModelEstimate::default()
        }),
        reported: reported(&f, has_memory(&served.figures), log_source),
        runtime: Some(runtime_report(served.runtime, &f, work)),
        activity: work.map(|w| ModelActivity::from_metrics(w.requests_running, w.requests_waiting, w.kv_used_ratio)),
        ..Model::default()
    }
}

/// Whether the figures say any part's memory.
fn has_memory(f: &ServerFigures) -> bool {
    f.weights_bytes.is_some() || f.kv_bytes.is_some() || f.graph_bytes.is_some()
}

/// The memory the server says each part took: weights, KV pool and its
/// graphs (`compute`: CUDA graphs' memory, its own word in the names),
/// from its API (`from_api`) and its log (`log_source`).
fn reported(f: &ServerFigures, from_api: bool, log_source: Option<String>) -> Option<ModelReported> {
    let mut sources = Vec::new();
    if from_api {
        sources.push("api".to_string());
    }
    sources.extend(log_source);
    has_memory(f).then(|| ModelReported {
        weights_bytes: f.weights_bytes,
        kv_bytes: f.kv_bytes,
        compute_bytes: f.graph_bytes,
        source: sources.join(", "),
        ..ModelReported::default()
    })
}

/// The server's own figures of its pool and work, each named as it names it.
fn runtime_report(runtime: Runtime, f: &ServerFigures, work: Option<&ServerWork>) -> RuntimeReport {
    let mut names = f.names.clone();
    if let Some(w) = work.filter(|w| w.generation_tokens.is_some()) {
        names.push(match (runtime, w.counts_in_flight) {
            (Runtime::Sglang, true) => {
                "generation_tokens_total: /metrics sglang:realtime_tokens_total{mode=\"decode\"}".into()
            }
            (Runtime::Sglang, false) => {
                "generation_tokens_total: /metrics sglang:generation_tokens_total (counted as each request ends: no token rates)".into()
            }
            (Runtime::Tgi, _) => {
                "generation_tokens_total: /metrics tgi_request_generated_tokens_sum (counted as each request ends: no token rates)"
                    .into()
            }
        });
    }
    RuntimeReport {
        kv_tokens: f.kv_tokens,
        kv_blocks: f.kv_blocks,
        kv_block_size: f.kv_block_size,
        max_model_len: f.context,
        memory_utilization: f.memory_utilization,
        prefix_cache_hit_ratio: work.and_then(|w| w.prefix_cache_hit_ratio),
        prompt_tokens_total: work.and_then(|w| w.prompt_tokens),
        generation_tokens_total: work.and_then(|w| w.generation_tokens),
        names,
        ..RuntimeReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(runtime: Runtime, api: &[u8], kv_bytes_per_token: Option<u64>) -> Served {
        let figures = match runtime {
            Runtime::Sglang => sglang::parse_server_info(api).unwrap(),
            Runtime::Tgi => tgi::parse_info(api).unwrap(),
        };
        Served {
            runtime,
            figures,
            work: None,
            folder: None,
            named_by_cmdline: false,
            weights_bytes: None,
            kv_bytes_per_token,
        }
    }

    /// TGI 3 says its pool only in its log: the log's blocks size the
    /// pool, the estimate follows them, and the API's context stays.
    #[test]
    fn a_tgi_3_pool_comes_from_its_log() {
        let s = served(
            Runtime::Tgi,
            include_bytes!("../../tests/data/tgi/info-3.3.json"),
            Some(1000),
        );
        let log = tgi::parse_log(include_str!("../../tests/data/tgi/launcher.log")).unwrap();
        let m = model(&s, None, Some(("/var/log/tgi.log", &log)));
        let r = m.runtime.as_ref().unwrap();
        assert_eq!(
            (r.kv_tokens, r.kv_blocks, r.kv_block_size),
            (Some(52125), Some(52719), Some(1))
        );
        assert_eq!(m.context, Some(8000), "/info's, not the log's default line");
        assert!(
            r.names.contains(&"max_model_len: /info max_total_tokens".to_string()),
            "{:?}",
            r.names
        );
        assert!(r.names.iter().any(|n| n.starts_with("kv_tokens: log")), "{:?}", r.names);
        assert_eq!(
            m.estimate.unwrap().kv_bytes,
            Some(52719 * 1000),
            "whole blocks, not the batch limit"
        );
        assert_eq!(m.reported, None, "TGI says no bytes");
        assert_eq!(m.activity, None, "no /metrics read");
    }

    /// SGLang 0.4.6 has no memory_usage in its API: the log's figures are
    /// reported, and said to come from the log.
    #[test]
    fn sglang_before_memory_usage_reports_from_its_log() {
        let s = served(
            Runtime::Sglang,
            include_bytes!("../../tests/data/sglang/server_info-0.4.6.json"),
            None,
        );
        let log = sglang::parse_log(include_str!("../../tests/data/sglang/server.log")).unwrap();
        let m = model(
            &s,
            Some("http://127.0.0.1:30000".into()),
            Some(("/tmp/sglang.log", &log)),
        );
        let r = m.reported.unwrap();
        assert_eq!(r.source, "log:/tmp/sglang.log");
        assert_eq!(r.weights_bytes, crate::models::runtimes::figures::gib_bytes(1.06));
        assert_eq!(r.compute_bytes, crate::models::runtimes::figures::gib_bytes(0.07));
        assert_eq!(m.estimate, None, "no folder, no estimate");
        let without_log = model(&s, None, None);
        assert_eq!(without_log.reported, None);
        assert_eq!(without_log.evidence, ["api"]);
    }
}
