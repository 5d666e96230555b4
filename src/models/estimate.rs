//! What a model costs: estimated from its GGUF header and the settings it
//! runs with (crates/gguf's llama.cpp math), and reported by its runtime
//! (log lines, APIs). The two are kept apart in the snapshot and never
//! summed into measured totals (shared/DESIGN.md).

use super::logs;
use crate::snapshot::{Model, ModelEstimate, ModelReported, ModelSettings, NameSource, ReportedBuffer};

/// What a model file's header says of it.
pub(super) fn describe_header(model: &mut Model, m: &gguf::Model) {
    let info = m.info();
    model.name = info.name.clone();
    model.name_source = model.name.as_ref().map(|_| NameSource::Header);
    model.architecture = info.architecture.clone();
    model.kind = Some(info.kind.as_str().to_string());
    model.params = info.params;
    model.file_type = info.file_type.as_ref().map(|f| f.to_string());
    model.layers = info.layers;
    model.context_train = info.context_train.map(u64::from);
}

/// The estimate of a model from its header and its settings, and the
/// context llama.cpp runs it with (its padding of `-c`, the training
/// context for none); the settings the runtime did not report are filled
/// from the same math ([`ModelSettings::fill_from_estimate`]). For a model
/// with sliding-window layers it also gives what the KV cache would take
/// with `--swa-full`, so the well-known "6x" surprise is explained.
pub(super) fn estimate(m: &gguf::Model, settings: &mut ModelSettings) -> Result<(ModelEstimate, u64), String> {
    let kv_settings = settings.to_kv();
    let e = gguf::estimate(m, &kv_settings).map_err(|e| e.to_string())?;
    let has_window = e.kv.caches.iter().any(|c| c.kind == gguf::CacheKind::Swa);
    let without_window = has_window && !kv_settings.swa_full;
    let full = gguf::KvSettings {
        swa_full: true,
        ..kv_settings
    };
    settings.fill_from_estimate(&e.kv);
    let estimate = ModelEstimate {
        weights_bytes: e.weights_bytes,
        kv_bytes: Some(e.kv.bytes),
        kv_bytes_per_token: Some(e.kv.bytes_per_token),
        recurrent_state_bytes: e.recurrent_state_bytes,
        kv_bytes_without_window: without_window
            .then(|| gguf::estimate(m, &full).ok().map(|f| f.kv.bytes))
            .flatten(),
        kv_pool_blocks: None,
    };
    Ok((estimate, u64::from(e.kv.context)))
}

/// What the runtime's log (read from `source`) reports of a model's
/// buffers: weights, KV cache and compute, each only as the log says it.
pub(super) fn reported_from_log(source: &str, report: &logs::LogReport) -> ModelReported {
    ModelReported {
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
    }
}
