//! `gputaskman diff` as text: the measured moves, then the models
//! (estimated and reported) apart. Small moves are counted, not listed.
//! Every string quoted (names, paths, file names) is written by others and
//! reaches the terminal only escaped.

use crate::snapshot::diff::*;
use crate::units::{bytes as bytes_text, duration, signed_bytes};
use crate::view::safe_text::safe;
use crate::view::{device_ident, model_name};
use std::fmt::Write as _;

/// How a change reads in text; `unit` is [`bytes_text`] or [`tokens`].
fn fmt_change(c: &Bytes, unit: fn(Option<u64>) -> String) -> String {
    let is_bytes = unit(Some(1 << 20)) == bytes_text(Some(1 << 20));
    let moved = |d: i64| if is_bytes { signed_bytes(d) } else { format!("{d:+}") };
    match c.state {
        State::Same => format!("{} (same)", unit(c.after)),
        State::Grew | State::Shrank => format!(
            "{} -> {}  {}",
            unit(c.before),
            unit(c.after),
            moved(c.delta.unwrap_or(0))
        ),
        State::BecameKnown => format!("n/a -> {}  (became known)", unit(c.after)),
        State::BecameUnknown => format!("{} -> n/a  (became unknown)", unit(c.before)),
        State::Unknown => "n/a".into(),
        State::NotListedBefore => format!("not listed -> {}", unit(c.after)),
        State::NotListedAfter => format!("{} -> not listed", unit(c.before)),
    }
}

fn tokens(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into())
}

fn fmt_percent(c: &Percent) -> String {
    let p = |v: Option<f64>| v.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "n/a".into());
    match c.state {
        State::NotListedBefore => format!("not listed -> {}", p(c.after)),
        State::NotListedAfter => format!("{} -> not listed", p(c.before)),
        _ => format!("{} -> {}", p(c.before), p(c.after)),
    }
}

fn process_title(r: &ProcessRef) -> String {
    format!("{} {}", r.pid, safe(r.name.as_deref().unwrap_or("(not in /proc)")))
}

fn pairing_words(p: &ProcessDiff) -> String {
    match p.paired_by {
        Some(Pairing::PidStartTime) => String::new(),
        Some(Pairing::Pid) => "  [same PID; start time unknown]".into(),
        Some(Pairing::NamePort) => format!(
            "  [restarted: same name, listening on port {}]",
            p.port.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
        ),
        Some(Pairing::Name) => "  [another start: paired by name, the only one of that name on each side]".into(),
        None => String::new(),
    }
}

fn process_heading(p: &ProcessDiff) -> String {
    match (&p.before, &p.after) {
        (Some(b), Some(a)) if b.pid == a.pid => format!("  ~ {}{}", process_title(a), pairing_words(p)),
        (Some(b), Some(a)) => format!(
            "  ~ {} -> {} {}{}",
            b.pid,
            a.pid,
            safe(a.name.as_deref().unwrap_or("(not in /proc)")),
            pairing_words(p)
        ),
        (None, Some(a)) => format!("  + {}  not listed before", process_title(a)),
        (Some(b), None) => format!("  - {}  not listed after", process_title(b)),
        (None, None) => String::new(),
    }
}

/// The text output: measured moves of 16 MiB or more, what appeared and
/// went, values that became known or unknown, then the models section.
pub fn render(d: &Diff) -> String {
    let mut out = String::new();
    let elapsed = d
        .elapsed_s
        .map(|s| format!(", {} later", duration(s)))
        .unwrap_or_default();
    let _ = writeln!(out, "before: {}  ({})", safe(&d.before.file), safe(&d.before.taken_at));
    let _ = writeln!(
        out,
        "after:  {}  ({}{elapsed})",
        safe(&d.after.file),
        safe(&d.after.taken_at)
    );

    write_devices(&mut out, d);
    write_processes(&mut out, d);
    write_models(&mut out, d);
    out
}

/// Devices (measured): those with a move shown, or listed on one side.
fn write_devices(out: &mut String, d: &Diff) {
    let _ = writeln!(out, "\nDevices (measured)");
    let mut any = false;
    for dev in d.devices.iter().filter(|x| device_shown(x)) {
        any = true;
        let r = dev.after.as_ref().or(dev.before.as_ref()).expect("one side");
        let ident = device_ident(r.uuid.as_deref(), r.pci_bus_id.as_deref());
        let head = format!(
            "GPU {} {} ({})",
            r.index,
            safe(r.name.as_deref().unwrap_or("(unnamed)")),
            safe(ident)
        );
        match (&dev.before, &dev.after) {
            (Some(b), Some(a)) if b.index != a.index => {
                let _ = writeln!(out, "  ~ {head}  [was GPU {} before]", b.index);
            }
            (Some(_), Some(_)) => {
                let _ = writeln!(out, "  ~ {head}");
            }
            (None, _) => {
                let _ = writeln!(out, "  + {head}  not listed before");
            }
            (_, None) => {
                let _ = writeln!(out, "  - {head}  not listed after");
            }
        }
        for (label, c) in [
            ("used", &dev.memory_used_bytes),
            ("free", &dev.memory_free_bytes),
            ("total", &dev.memory_total_bytes),
            ("reserved", &dev.memory_reserved_bytes),
            ("shared used", &dev.shared_memory_used_bytes),
        ] {
            if c.shown_bytes() || (matches!(c.state, State::NotListedAfter | State::NotListedBefore) && label == "used")
            {
                let _ = writeln!(out, "      {label:<12} {}", fmt_change(c, bytes_text));
            }
        }
        for news in &dev.health_news {
            let _ = writeln!(out, "      ! health: {}", safe(news));
        }
    }
    if !any {
        let _ = writeln!(out, "  no move of {} or more", bytes_text(Some(HIDE_BELOW)));
    }
}

/// Processes (measured), then how much was left out.
fn write_processes(out: &mut String, d: &Diff) {
    let _ = writeln!(out, "\nProcesses (measured)");
    let mut any = false;
    for p in d.processes.iter().filter(|p| process_shown(p)) {
        any = true;
        let _ = writeln!(out, "{}", process_heading(p));
        let one_sided = p.before.is_none() || p.after.is_none();
        for g in &p.gpu {
            for (label, c) in [
                ("vram", &g.vram_bytes),
                ("spill", &g.spill_bytes),
                ("paged", &g.paged_bytes),
            ] {
                // On one side only: print what is known (vram always).
                let show = if one_sided {
                    label == "vram" || c.before.or(c.after).is_some()
                } else {
                    c.shown_bytes()
                };
                if show {
                    let _ = writeln!(
                        out,
                        "      {:<22} {}",
                        safe(&format!("{label} {}", short_device(g))),
                        fmt_change(c, bytes_text)
                    );
                }
            }
        }
        if one_sided || p.rss_bytes.shown_bytes() {
            let _ = writeln!(out, "      {:<22} {}", "rss", fmt_change(&p.rss_bytes, bytes_text));
        }
        if p.cpu_percent.state != State::Unknown {
            let _ = writeln!(out, "      {:<22} {}", "cpu", fmt_percent(&p.cpu_percent));
        }
    }
    if !any {
        let _ = writeln!(out, "  no move of {} or more", bytes_text(Some(HIDE_BELOW)));
    }
    if d.hidden.moves > 0 || d.hidden.processes > 0 || d.hidden.devices > 0 {
        let _ = writeln!(
            out,
            "\n  Hidden: {} move{} under {} ({} paired process{} and {} device{} with nothing larger); --json has them all.",
            d.hidden.moves,
            if d.hidden.moves == 1 { "" } else { "s" },
            bytes_text(Some(HIDE_BELOW)),
            d.hidden.processes,
            if d.hidden.processes == 1 { "" } else { "es" },
            d.hidden.devices,
            if d.hidden.devices == 1 { "" } else { "s" },
        );
    }
    if d.hidden.off_gpu > 0 {
        let _ = writeln!(
            out,
            "  {} process{} on no GPU left out; --json has them all.",
            d.hidden.off_gpu,
            if d.hidden.off_gpu == 1 { "" } else { "es" },
        );
    }
}

/// Models: estimated and reported, apart from the measured figures.
fn write_models(out: &mut String, d: &Diff) {
    if !d.models.is_empty() {
        let _ = writeln!(
            out,
            "\nModels (estimated from the model file, and reported by the runtime: not measured, never added to the figures above)"
        );
        for m in &d.models {
            let p = &d.processes[m.process];
            let who = match (m.pid_before, m.pid_after) {
                (Some(b), Some(a)) if a != b => format!("{b} -> {a}"),
                (Some(x), _) | (_, Some(x)) => x.to_string(),
                (None, None) => "?".into(),
            };
            let name = model_name(m.path.as_deref(), m.name.as_deref());
            let listed = match (m.pid_before, m.pid_after) {
                (None, Some(_)) => "  not listed before",
                (Some(_), None) => "  not listed after",
                _ => "",
            };
            let _ = writeln!(out, "  {who} {}{listed}", safe(name));
            let rows: [Row; 11] = [
                ("context (tokens)", &m.context, tokens),
                ("slots", &m.slots_total, tokens),
                ("estimate KV", &m.estimate.kv_bytes, bytes_text),
                (
                    "estimate KV, window-blind",
                    &m.estimate.kv_bytes_without_window,
                    bytes_text,
                ),
                ("estimate KV per token", &m.estimate.kv_bytes_per_token, bytes_text),
                (
                    "estimate recurrent state",
                    &m.estimate.recurrent_state_bytes,
                    bytes_text,
                ),
                ("estimate weights", &m.estimate.weights_bytes, bytes_text),
                ("reported KV", &m.reported.kv_bytes, bytes_text),
                ("reported weights", &m.reported.weights_bytes, bytes_text),
                ("reported compute", &m.reported.compute_bytes, bytes_text),
                ("reported total", &m.reported.total_bytes, bytes_text),
            ];
            for (label, c, unit) in rows {
                if c.state != State::Unknown {
                    let _ = writeln!(out, "      {label:<27} {}", fmt_change(c, unit));
                }
            }
            if p.before.is_some() && p.after.is_some() {
                // The measured move of the same process, for comparison.
                let mut measured = vec![format!("rss {}", short_move(&p.rss_bytes))];
                for g in &p.gpu {
                    measured.push(format!("vram {} {}", short_device(g), short_move(&g.vram_bytes)));
                }
                let _ = writeln!(
                    out,
                    "      {:<27} {}",
                    "measured, same process",
                    safe(&measured.join(", "))
                );
            }
        }
    }
}

/// A line of the models section: label, change, unit.
type Row<'a> = (&'a str, &'a Bytes, fn(Option<u64>) -> String);

/// `GPU 1` (the device's index in AFTER, or in BEFORE when only there).
fn short_device(g: &GpuDiff) -> String {
    match g.device_after.or(g.device_before) {
        Some(i) => format!("GPU {i}"),
        None => g.device.clone(),
    }
}

fn short_move(c: &Bytes) -> String {
    match c.state {
        State::Grew | State::Shrank | State::Same => signed_bytes(c.delta.unwrap_or(0)),
        State::BecameKnown => "became known".into(),
        State::BecameUnknown => "became unknown".into(),
        State::Unknown => "n/a".into(),
        State::NotListedBefore => "not listed before".into(),
        State::NotListedAfter => "not listed after".into(),
    }
}
