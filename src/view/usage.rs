//! The usage part of `summary` as text: how much of the recording is
//! counted, then per device and per user, process, container and model
//! GPU-hours, GiB-hours, kWh and cost, each figure followed by how it was
//! obtained. Names from the recording are escaped.

use crate::accounting::words;
use crate::record::usage::{Usage, UsageRow};
use crate::units::duration;
use crate::view::safe_text::safe;
use std::fmt::Write as _;

/// A figure in hours or kWh: small ones keep their first digits.
fn figure(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.3}"),
        Some(v) => format!("{v:.6}"),
    }
}

/// A figure and its word; an unknown figure has none.
fn labelled(v: Option<f64>, how: &str) -> String {
    match v {
        Some(_) if !how.is_empty() => format!("{} {how}", figure(v)),
        _ => figure(v),
    }
}

fn rows(out: &mut String, title: &str, rows: &[UsageRow], priced: bool) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {title:<30} {:>22} {:>22} {:>22}{}",
        "GPU-hours",
        "GiB-hours",
        "kWh",
        if priced { "         cost" } else { "" }
    );
    for r in rows {
        let name = r
            .key
            .as_deref()
            .map_or_else(|| "n/a".to_string(), |k| safe(k).to_string());
        let cost = if priced {
            format!(" {:>12}", figure(r.cost))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "    {:<28} {:>22} {:>22} {:>22}{cost}",
            name,
            labelled(r.gpu_hours, &words(&r.gpu_hours_obtained)),
            labelled(r.gib_hours, "integrated"),
            labelled(r.kwh, "attributed"),
        );
    }
}

pub fn render(out: &mut String, u: &Usage) {
    let gaps = match u.gaps {
        0 => String::new(),
        n => format!(
            "; {n} gap{} over {} ({}) not counted, never filled in",
            if n == 1 { "" } else { "s" },
            duration(u.max_interval_s),
            duration(u.gap_s)
        ),
    };
    let price = u.price_per_kwh.map(|p| format!(", at {p} per kWh")).unwrap_or_default();
    let _ = writeln!(
        out,
        "\nUsage: covers {} of {}{gaps}{price}",
        duration(u.covered_s),
        duration(u.span_s)
    );
    let priced = u.price_per_kwh.is_some();
    for d in &u.devices {
        let t = &d.totals;
        let kwh = |j: Option<f64>| j.map(|j| j / 3.6e6);
        let resets = match t.counter_resets {
            0 => String::new(),
            n => format!(", counter restarted {n}x"),
        };
        let cost = if priced {
            format!(", cost {}", figure(d.cost))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  GPU {} {}: {} kWh measured, {} kWh integrated; idle {} kWh, unattributed {} kWh; busy {} GPU-hours integrated{resets}{cost}",
            safe(&t.label),
            safe(t.name.as_deref().unwrap_or("(unnamed)")),
            figure(kwh(t.energy_counter_j)),
            figure(kwh(t.energy_integrated_j)),
            figure(kwh(t.idle_energy_j)),
            figure(kwh(t.unattributed_energy_j)),
            figure(t.busy_seconds.map(|s| s / 3600.0)),
        );
    }
    rows(out, "per user", &u.users, priced);
    rows(out, "per process", &u.processes, priced);
    rows(out, "per container", &u.containers, priced);
    rows(out, "per model", &u.models, priced);
}
