//! A model's rows in the detail pane: the estimate (GGUF header and
//! settings), what the runtime reported and what was measured side by
//! side, never summed together, then evidence, settings and activity.

use super::describe;
use super::theme::Theme;
use crate::snapshot::Model;
use crate::units::bytes;
use crate::view::opt;
use crate::view::safe_text::escape;
use ratatui::text::{Line, Span};

/// A model a process holds: what it is, its memory by kind and source, the
/// evidence for it, its settings, what it is doing and where it is served.
pub(super) fn model_lines(m: &Model, measured: Option<u64>, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut what = Vec::new();
    what.extend(m.architecture.clone());
    what.extend(m.file_type.clone());
    what.extend(m.params.map(|p| {
        if p >= 1_000_000_000 {
            format!("{:.1}B params", p as f64 / 1e9)
        } else {
            format!("{:.0}M params", p as f64 / 1e6)
        }
    }));
    what.extend(m.layers.map(|l| format!("{l} layers")));
    out.push(Line::from(vec![
        Span::styled("model ", theme.bold()),
        Span::styled(escape(describe::model_name(m)), theme.bold()),
        Span::raw(escape(format!(
            " {}  {}",
            describe::evidence_marker(m),
            what.join(", ")
        ))),
    ]));
    out.extend(memory_rows(m, measured, theme));
    let evidence: Vec<String> = m
        .evidence
        .iter()
        .map(|e| format!("{e} ({})", describe::evidence_meaning(e)))
        .collect();
    let verdict = if m.confirmed {
        "confirmed: two sources, one of them api or mapped"
    } else {
        "unconfirmed"
    };
    out.push(Line::from(vec![
        Span::styled("  evidence: ", theme.bold()),
        Span::raw(escape(format!(
            "{}; {verdict}",
            if evidence.is_empty() {
                "none".into()
            } else {
                evidence.join(", ")
            }
        ))),
    ]));
    let mut settings = Vec::new();
    let context = m.settings.as_ref().and_then(|s| s.context_total).or(m.context);
    settings.push(format!(
        "context {}{}{}",
        context.map(|c| c.to_string()).unwrap_or_else(|| "n/a".into()),
        crate::view::per_slot(m),
        m.context_train.map(|c| format!(" (trained {c})")).unwrap_or_default()
    ));
    settings.push(crate::view::slots(m.slots_busy, m.slots_total).unwrap_or_else(|| "slots n/a".into()));
    if let Some(s) = &m.settings {
        settings.push(format!("cache K {} V {}", s.cache_type_k, s.cache_type_v));
        if s.kv_unified == Some(true) {
            settings.push("kv unified".into());
        }
        if let Some(n) = s.n_gpu_layers {
            settings.push(format!("GPU layers {n}"));
        }
        if let Some(fa) = &s.flash_attn {
            settings.push(format!("flash attn {fa}"));
        }
        if let Some(u) = s.ubatch {
            settings.push(format!("ubatch {u}"));
        }
        if s.swa_full {
            settings.push("swa-full".into());
        }
    }
    out.push(Line::from(vec![
        Span::styled("  settings: ", theme.bold()),
        Span::raw(escape(settings.join(" · "))),
    ]));
    if let Some(a) = &m.activity {
        out.push(Line::from(vec![
            Span::styled("  now: ", theme.bold()),
            Span::raw(escape(crate::view::activity(a)).into_owned()),
        ]));
    }
    // The server's own pool (vLLM): its KV cache in tokens and blocks.
    if let Some(r) = &m.runtime {
        out.push(Line::from(vec![
            Span::styled("  pool: ", theme.bold()),
            Span::raw(escape(crate::view::runtime_pool(r)).into_owned()),
        ]));
    }
    out.push(Line::from(vec![
        Span::styled("  server: ", theme.bold()),
        Span::raw(escape(opt(m.server_url.as_deref())).into_owned()),
        Span::raw(escape(
            m.path.as_deref().map(|p| format!("  file {p}")).unwrap_or_default(),
        )),
    ]));
    out
}

/// Estimate, reported and measured memory of a model, side by side.
fn memory_rows(m: &Model, measured: Option<u64>, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let row = |label: &str, w: Option<u64>, k: Option<u64>, c: Option<u64>, total: Option<u64>, src: String| {
        format!(
            "  {label:<10}{:>11}{:>11}{:>11}{:>11}  {}",
            bytes(w),
            bytes(k),
            bytes(c),
            bytes(total),
            escape(src)
        )
    };
    out.push(Line::from(Span::styled(
        format!(
            "  {:<10}{:>11}{:>11}{:>11}{:>11}  source",
            "", "weights", "KV cache", "compute", "total"
        ),
        theme.header(),
    )));
    if let Some(e) = &m.estimate {
        let kv = match (e.kv_bytes, e.recurrent_state_bytes) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        out.push(Line::from(Span::styled(
            row(
                "estimated",
                e.weights_bytes,
                kv,
                e.compute_bytes,
                crate::view::estimate_buffers(e),
                "GGUF header + settings".into(),
            ),
            theme.not_measured(),
        )));
        for line in crate::view::estimate_device_lines(e) {
            out.push(Line::from(Span::styled(
                format!("    {}", escape(&line)),
                theme.not_measured(),
            )));
        }
    } else {
        out.push(Line::from(Span::styled(
            row("estimated", None, None, None, None, "no estimate".into()),
            theme.dim(),
        )));
    }
    if let Some(r) = &m.reported {
        let total = r.total_bytes.or_else(|| {
            let parts = [r.weights_bytes, r.kv_bytes, r.compute_bytes];
            parts.iter().all(Option::is_some).then(|| parts.iter().flatten().sum())
        });
        out.push(Line::from(Span::styled(
            row(
                "reported",
                r.weights_bytes,
                r.kv_bytes,
                r.compute_bytes,
                total,
                r.source.clone(),
            ),
            theme.not_measured(),
        )));
        if let Some(dev) = r.device_bytes {
            out.push(Line::from(Span::styled(
                format!("  of which in device memory {}", bytes(Some(dev))),
                theme.not_measured(),
            )));
        }
    } else {
        out.push(Line::from(Span::styled(
            row("reported", None, None, None, None, "the runtime said nothing".into()),
            theme.dim(),
        )));
    }
    out.push(Line::from(row(
        "measured",
        None,
        None,
        None,
        measured,
        "the whole process's VRAM (a GPU counter cannot split it)".into(),
    )));
    if let Some(e) = &m.estimate {
        let mut extra = Vec::new();
        extra.extend(e.kv_bytes_per_token.map(|b| format!("KV per token {}", bytes(Some(b)))));
        extra.extend(
            e.kv_bytes_without_window
                .map(|b| format!("window-blind KV {} (upper bound)", bytes(Some(b)))),
        );
        if !extra.is_empty() {
            out.push(Line::from(Span::styled(
                format!("  {}", extra.join(" · ")),
                theme.not_measured(),
            )));
        }
    }
    out
}
