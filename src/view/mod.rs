//! Views render a Snapshot and read nothing else, so recordings play back
//! through the same code.

pub mod explain;
pub mod safe_text;
pub mod text;
pub mod tui;

/// Binary units, labelled as such; unknown is `n/a`, a measured 0 is `0 B`.
pub fn bytes(b: Option<u64>) -> String {
    const KIB: f64 = 1024.0;
    let Some(b) = b else { return "n/a".into() };
    let v = b as f64;
    if v >= KIB * KIB * KIB {
        format!("{:.2} GiB", v / (KIB * KIB * KIB))
    } else if v >= KIB * KIB {
        format!("{:.1} MiB", v / (KIB * KIB))
    } else if v >= KIB {
        format!("{:.1} KiB", v / KIB)
    } else {
        format!("{b} B")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_use_binary_units_and_unknown_is_not_zero() {
        assert_eq!(bytes(None), "n/a");
        assert_eq!(bytes(Some(0)), "0 B");
        assert_eq!(bytes(Some(1023)), "1023 B");
        assert_eq!(bytes(Some(1536)), "1.5 KiB");
        assert_eq!(bytes(Some(448 << 20)), "448.0 MiB");
        assert_eq!(bytes(Some(17_171_480_576)), "15.99 GiB");
    }
}
