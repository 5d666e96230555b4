//! `gputaskman summary` as text: a table per device and process, then each
//! model's timeline. Strings from the recording reach the terminal only
//! escaped.

use crate::record::summary::*;
use crate::units::{bytes, duration, unix_seconds};
use crate::view::safe_text::safe;
use crate::view::{device_ident, model_name};
use std::fmt::Write as _;

/// `HH:MM:SS` of an RFC 3339 time (the whole string when it is not one).
fn clock(t: &str) -> &str {
    t.get(11..19).filter(|_| t.len() >= 19).unwrap_or(t)
}

fn stats_row(out: &mut String, label: &str, s: &Stats) {
    let peak = s.peak_at.as_deref().map(clock).unwrap_or("n/a");
    let unknown = if s.unknown > 0 {
        format!("  ({} n/a)", s.unknown)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "      {:<28} {:>11} {:>11} {:>11} {:>11}   {}{unknown}",
        safe(label),
        bytes(s.min),
        bytes(s.median),
        bytes(s.max),
        bytes(s.last),
        safe(peak),
    );
}

/// `all`: list the processes never on a GPU too (by default they are
/// counted, not listed: what moved on the GPU leads).
pub fn render(s: &Summary, all: bool) -> String {
    let mut out = String::new();
    let span = match (&s.first, &s.last) {
        (Some(a), Some(b)) => {
            let length = unix_seconds(b)
                .zip(unix_seconds(a))
                .map(|(b, a)| duration(b - a))
                .unwrap_or_else(|| "n/a".into());
            let every = s.interval_s.map(|i| format!(", every {i:.1}s")).unwrap_or_default();
            format!(" from {} to {} ({length}{every})", safe(a), safe(b))
        }
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "{}: {}{span}",
        safe(&s.file),
        crate::record::index::snapshots(s.snapshots as u64)
    );
    if !s.skipped.is_empty() {
        let _ = writeln!(out, "skipped:");
        for why in &s.skipped {
            let _ = writeln!(out, "  {}", safe(why));
        }
    }
    let header = format!(
        "      {:<28} {:>11} {:>11} {:>11} {:>11}   {}",
        "", "min", "median", "max", "last", "peak at"
    );

    let _ = writeln!(out, "\nDevices (measured)");
    if s.devices.is_empty() {
        let _ = writeln!(out, "  none recorded");
    } else {
        let _ = writeln!(out, "{header}");
    }
    for d in &s.devices {
        let ident = device_ident(d.uuid.as_deref(), d.pci_bus_id.as_deref());
        let _ = writeln!(
            out,
            "  GPU {} {} ({}), total {}, in {}",
            d.index,
            safe(d.name.as_deref().unwrap_or("(unnamed)")),
            safe(ident),
            bytes(d.memory_total_bytes),
            crate::record::index::snapshots(d.samples as u64)
        );
        stats_row(&mut out, "used", &d.memory_used_bytes);
        if d.shared_memory_used_bytes.known > 0 {
            stats_row(&mut out, "shared used", &d.shared_memory_used_bytes);
        }
    }

    processes_section(&mut out, s, all, &header);
    models_section(&mut out, s);
    crate::view::usage::render(&mut out, &s.usage);
    out
}

/// The processes' rows; those never on a GPU only counted unless `all`.
fn processes_section(out: &mut String, s: &Summary, all: bool, header: &str) {
    let _ = writeln!(out, "\nProcesses (measured)");
    if s.processes.is_empty() {
        let _ = writeln!(out, "  none recorded");
    } else {
        let _ = writeln!(out, "{header}");
    }
    let (listed, never_on_gpu): (Vec<_>, Vec<_>) = s.processes.iter().partition(|p| all || !p.gpu.is_empty());
    for p in listed {
        let _ = writeln!(
            out,
            "  {} {}  seen {} - {} ({})",
            p.pid,
            safe(p.name.as_deref().unwrap_or("(not in /proc)")),
            safe(clock(&p.first_seen)),
            safe(clock(&p.last_seen)),
            crate::record::index::snapshots(p.samples as u64)
        );
        for g in &p.gpu {
            stats_row(out, &format!("vram {}", g.device), &g.vram_bytes);
            if g.spill_bytes.known > 0 {
                stats_row(out, &format!("spill {}", g.device), &g.spill_bytes);
            }
        }
        if p.gpu.len() > 1 {
            stats_row(out, "vram, all devices", &p.vram_bytes);
        }
        stats_row(out, "rss", &p.rss_bytes);
    }
    if !never_on_gpu.is_empty() {
        let n = never_on_gpu.len();
        let _ = writeln!(
            out,
            "  {n} process{} never on a GPU left out (--all lists them; --json has them all)",
            if n == 1 { "" } else { "es" }
        );
    }
}

/// Each model's settings and KV over time: estimated and reported, apart.
fn models_section(out: &mut String, s: &Summary) {
    if !s.models.is_empty() {
        let _ = writeln!(
            out,
            "\nModels over time (estimated from the model file, reported by the runtime: not measured)"
        );
        for m in &s.models {
            let name = model_name(m.path.as_deref(), m.name.as_deref());
            let _ = writeln!(
                out,
                "  {} {} {}",
                m.pid,
                safe(m.process.as_deref().unwrap_or("(not in /proc)")),
                safe(name)
            );
            for p in &m.points {
                let ctx = p.context.map(|c| c.to_string()).unwrap_or_else(|| "n/a".into());
                let slots = p.slots_total.map(|c| c.to_string()).unwrap_or_else(|| "n/a".into());
                let blind = match p.estimate_kv_bytes_without_window {
                    Some(b) => format!(" (window-blind {})", bytes(Some(b))),
                    None => String::new(),
                };
                let _ = writeln!(
                    out,
                    "      {}  context {ctx}, slots {slots}, estimate KV {}{blind}, reported KV {}",
                    safe(clock(&p.at)),
                    bytes(p.estimate_kv_bytes),
                    bytes(p.reported_kv_bytes)
                );
            }
        }
    }
}
