//! Views render a Snapshot and read nothing else, so recordings play back
//! through the same code.

pub mod ascii;
pub mod diff;
pub mod explain;
pub mod safe_text;
pub mod summary;
pub mod text;
pub mod tui;
pub mod usage;

/// How text tells a device apart: its UUID, else its PCI bus id.
pub fn device_ident<'a>(uuid: Option<&'a str>, pci_bus_id: Option<&'a str>) -> &'a str {
    uuid.or(pci_bus_id).unwrap_or("no UUID or bus id")
}

/// How text names a model: its file name, else the name its runtime gives.
pub fn model_name<'a>(path: Option<&'a str>, name: Option<&'a str>) -> &'a str {
    path.map(|p| p.rsplit('/').next().unwrap_or(p))
        .or(name)
        .unwrap_or("(unnamed model)")
}

pub fn percent(p: Option<u32>) -> String {
    p.map(|p| format!("{p}%")).unwrap_or_else(|| "n/a".into())
}

pub fn opt(s: Option<&str>) -> &str {
    s.unwrap_or("n/a")
}

/// ` (N per slot)` when a model's sequences each hold less than the whole
/// context (llama.cpp without a unified cache: `-c 8192 -np 2` is two
/// streams of 4096); empty otherwise.
pub fn per_slot(m: &crate::snapshot::Model) -> String {
    let settings = m.settings.as_ref();
    match (
        settings.and_then(|s| s.context_per_seq),
        settings.and_then(|s| s.context_total),
    ) {
        (Some(per), Some(total)) if per < total => format!(" ({per} per slot)"),
        _ => String::new(),
    }
}

/// A model's slots (parallel sequences) as words: `slots 1/4 busy`,
/// `4 slots, busy n/a`, `1 slot, busy n/a`; `None` when neither is known.
pub fn slots(busy: Option<u32>, total: Option<u32>) -> Option<String> {
    let noun = |t: u32| if t == 1 { "slot" } else { "slots" };
    match (busy, total) {
        (Some(b), Some(t)) => Some(format!("slots {b}/{t} busy")),
        (None, Some(t)) => Some(format!("{t} {}, busy n/a", noun(t))),
        (Some(b), None) => Some(format!("{b} busy, slots n/a")),
        (None, None) => None,
    }
}

/// What a runtime says a model is doing now, `n/a` where it does not say:
/// `requests 2 running, 0 waiting · tokens/s prompt 150.2, generation 31.0`.
pub fn activity(a: &crate::snapshot::ModelActivity) -> String {
    let count = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into());
    let rate = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "n/a".into());
    let mut parts = vec![
        format!(
            "requests {} running, {} waiting",
            count(a.requests_running),
            count(a.requests_waiting)
        ),
        format!(
            "tokens/s prompt {}, generation {}",
            rate(a.prompt_tokens_per_second),
            rate(a.generation_tokens_per_second)
        ),
    ];
    parts.extend(a.kv_cache_used_ratio.map(|r| format!("KV {:.0}% used", r * 100.0)));
    parts.extend(a.expires_at.as_ref().map(|t| format!("unloads {t}")));
    parts.join(" · ")
}

/// A server's KV pool in its own figures (vLLM), `n/a` where it does not
/// say: `KV pool 1048576 tokens (CPU), 8192 blocks of 128 · 2048.00x
/// requests of 512 tokens · memory utilization 0.5`.
pub fn runtime_pool(r: &crate::snapshot::runtime_report::RuntimeReport) -> String {
    let count = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into());
    let device = r.kv_pool_device.as_ref().map(|d| format!(" ({d})")).unwrap_or_default();
    // SGLang says its pages' size but not their count; TGI 3 neither.
    let blocks = match (r.kv_blocks, r.kv_block_size) {
        (None, None) => String::new(),
        (None, Some(size)) => format!(", blocks of {size}"),
        (blocks, size) => format!(", {} blocks of {}", count(blocks), count(size)),
    };
    let mut parts = vec![format!("KV pool {} tokens{device}{blocks}", count(r.kv_tokens))];
    parts.extend(
        r.max_concurrency
            .map(|c| format!("{c:.2}x requests of {} tokens", count(r.max_model_len))),
    );
    parts.extend(r.memory_utilization.map(|u| format!("memory utilization {u}")));
    parts.join(" · ")
}

/// A process's memory on one device set against its parts, as words:
/// `measured 1.66 GiB (nvml) = weights 604.15 MiB reported + ... +
/// unexplained +12.00 MiB`. A comparison, never a sum: each part keeps its
/// provenance, an unknown part reads `n/a`. Not escaped (the caller does).
pub fn reconciliation_equation(r: &crate::snapshot::reconciliation::Reconciliation) -> String {
    use crate::units::{bytes, signed_bytes};
    let mut terms: Vec<String> = r
        .parts
        .iter()
        .map(|p| format!("{} {} {}", p.kind.label(), bytes(Some(p.bytes)), p.provenance.label()))
        .collect();
    terms.extend(r.missing.iter().map(|k| format!("{} n/a", k.label())));
    terms.push(format!("unexplained {}", signed_bytes(r.unexplained_bytes)));
    format!(
        "measured {} ({}) = {}",
        bytes(Some(r.measured_bytes)),
        r.measured_source,
        terms.join(" + ")
    )
}

/// What a large rest likely is, when the rest is large.
pub fn reconciliation_causes(r: &crate::snapshot::reconciliation::Reconciliation) -> Option<String> {
    r.large
        .then(|| format!("large rest; likely: {}", r.likely_causes.join("; ")))
}

/// An estimate's per-device rows as words, one a device, labelled
/// estimated: `GPU 0: weights 4.54 GiB + KV 256.0 MiB + compute 560.0 MiB +
/// output 0 B (estimated, cuda)`. A GPU's index is the runtime's device
/// number (CUDA0 is 0). Not escaped (the caller does).
pub fn estimate_device_lines(e: &crate::snapshot::ModelEstimate) -> Vec<String> {
    use crate::model_devices::DeviceId;
    use crate::units::bytes;
    let backend = e.backend.as_deref().unwrap_or("backend unknown");
    e.devices
        .iter()
        .map(|d| {
            let name = match d.device {
                DeviceId::Gpu(i) => format!("GPU {i}"),
                DeviceId::Host => "host".to_string(),
            };
            let kv = d.recurrent_state_bytes.map(|s| d.kv_bytes.saturating_add(s));
            format!(
                "{name}: weights {} + KV {} + compute {} + output {} (estimated, {backend})",
                bytes(d.weights_bytes),
                bytes(kv),
                bytes(d.compute_bytes),
                bytes(d.output_bytes)
            )
        })
        .collect()
}

/// What an estimate's buffers (weights, KV with recurrent state, compute,
/// output) add up to, all estimated; null when one is unknown.
pub fn estimate_buffers(e: &crate::snapshot::ModelEstimate) -> Option<u64> {
    let kv = match (e.kv_bytes, e.recurrent_state_bytes) {
        (Some(k), Some(r)) => Some(k.saturating_add(r)),
        (k, r) => k.or(r),
    };
    [e.weights_bytes, kv, e.compute_bytes, e.output_bytes]
        .into_iter()
        .try_fold(0u64, |sum, b| sum.checked_add(b?))
}
