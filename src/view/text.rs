//! The one-shot text view (`--once`): renders a Snapshot, reads nothing else.
//! Every string from the snapshot is written through [`safe`]: each was
//! written by a process, a driver or a remote host.

use super::safe_text::safe;
use super::{opt, percent};
use crate::snapshot::{device_label, BackendStatus, Device, Match, Process, Snapshot};
use crate::units::bytes;
use std::fmt::Write;

const BAR_WIDTH: usize = 30;

/// `--list-gpus`: one device a line, with its index.
pub fn gpu_list(devices: &[Device]) -> String {
    let mut out = String::new();
    for d in devices {
        let _ = writeln!(
            out,
            "{}{}: {} ({}, {}, {})",
            // A MIG instance under its GPU.
            if d.parent.is_some() { "  " } else { "" },
            d.label(),
            safe(opt(d.name.as_deref())),
            safe(opt(d.uuid.as_deref())),
            safe(opt(d.pci_bus_id.as_deref())),
            bytes(d.memory_total_bytes)
        );
    }
    out
}

pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    let host = s.host.hostname.as_deref().unwrap_or("this machine");
    let mut where_ = vec![s.host.os_name.clone().unwrap_or_else(|| s.host.os.clone())];
    where_.extend(s.host.kernel.as_ref().map(|k| format!("kernel {k}")));
    if s.host.wsl {
        where_.push("WSL".into());
    }
    if s.host.container {
        where_.push("container".into());
    }
    let _ = writeln!(
        out,
        "gputaskman  {}  ({})  {}",
        safe(host),
        safe(&where_.join(", ")),
        safe(&s.taken_at)
    );

    if s.devices.is_empty() {
        let _ = writeln!(out, "\nNo GPU found. What each source said:");
    } else {
        let _ = writeln!(out);
    }
    for b in &s.backends {
        let status = match b.status {
            BackendStatus::Ok => "ok",
            BackendStatus::Unavailable => "unavailable",
            BackendStatus::Error => "ERROR",
        };
        let _ = writeln!(out, "  {}: {status}: {}", safe(&b.name), safe(&b.detail));
    }

    for d in &s.devices {
        render_device(&mut out, s, d);
    }

    let _ = writeln!(out);
    if s.processes.is_empty() {
        let _ = writeln!(out, "No process holds GPU memory or runs an AI or GPU runtime.");
    } else {
        render_processes(&mut out, &s.processes, &s.devices);
    }
    if s.attribution.normalized {
        let _ = writeln!(
            out,
            "\nNote: per-process figures add up to more than a device reports used; bars are scaled to the device total."
        );
    }
    out
}

fn render_device(out: &mut String, s: &Snapshot, d: &Device) {
    let _ = writeln!(
        out,
        "\n{}  {}  {}  {}",
        match &d.mig {
            Some(mig) => format!("  MIG {} {}", d.label(), safe(opt(mig.profile.as_deref()))),
            None => format!("GPU {}", d.label()),
        },
        safe(opt(d.name.as_deref())),
        safe(opt(d.pci_bus_id.as_deref())),
        safe(opt(d.uuid.as_deref()))
    );
    let mut driver = format!(
        "  driver {}  CUDA {}",
        safe(opt(d.driver_version.as_deref())),
        safe(opt(d.cuda_version.as_deref()))
    );
    if let Some(model) = &d.driver_model {
        let _ = write!(driver, "  {}", safe(model));
    }
    let _ = writeln!(out, "{driver}");
    let bar = match (d.memory_used_bytes, d.memory_total_bytes) {
        (Some(u), Some(t)) if t > 0 => {
            let filled = ((u as f64 / t as f64) * BAR_WIDTH as f64).round() as usize;
            let filled = filled.min(BAR_WIDTH);
            format!("[{}{}]", "#".repeat(filled), ".".repeat(BAR_WIDTH - filled))
        }
        _ => format!("[{}]", "?".repeat(BAR_WIDTH)),
    };
    let _ = writeln!(
        out,
        "  memory {bar} {} used of {}, {} free{}",
        bytes(d.memory_used_bytes),
        bytes(d.memory_total_bytes),
        bytes(d.memory_free_bytes),
        d.memory_reserved_bytes
            .filter(|r| *r > 0)
            .map(|r| format!(", {} reserved by the driver", bytes(Some(r))))
            .unwrap_or_default()
    );
    let power = match (d.power_w, d.power_limit_w) {
        (Some(p), Some(l)) => format!("{p:.1} W of {l:.0} W"),
        (Some(p), None) => format!("{p:.1} W"),
        _ => "n/a".into(),
    };
    let _ = writeln!(
        out,
        "  gpu {}  mem activity {}  temp {}  power {power}  fan {}",
        percent(d.gpu_util_percent),
        percent(d.memory_activity_percent),
        d.temperature_c
            .map(|t| format!("{t} °C"))
            .unwrap_or_else(|| "n/a".into()),
        percent(d.fan_percent),
    );
    if let Some(a) = s.attribution.devices.iter().find(|a| a.device == d.index) {
        let mut line = format!("  processes: {} measured", bytes(a.measured_sum_bytes));
        if let Some(rest) = a.unattributed_bytes {
            let _ = write!(line, ", {} used by no listed process", bytes(Some(rest)));
        }
        if a.normalized {
            line.push_str(" (more than the device reports used: normalized)");
        }
        let _ = writeln!(out, "{line}");
    }
    if d.stale {
        let _ = writeln!(
            out,
            "  ! STALE: the driver stopped answering; these are its last values"
        );
    }
    for e in &d.errors {
        let _ = writeln!(out, "  ! {} failed: {}", safe(&e.query), safe(&e.message));
    }
    if !d.process_list_complete {
        let _ = writeln!(out, "  ! the process list of this device is incomplete: a query failed");
    }
    for n in &d.notes {
        let _ = writeln!(out, "  note: {}", safe(n));
    }
}

fn render_processes(out: &mut String, processes: &[Process], devices: &[Device]) {
    let _ = writeln!(
        out,
        "{:>7}  {:<10} {:<16} {:<10} {:>3} {:>10} {:>4} {:>4} {:>6} {:>10}  {:<20} COMMAND",
        "PID", "USER", "NAME", "KIND", "GPU", "VRAM", "CTX", "SM%", "CPU%", "RSS", "RUNTIMES"
    );
    for p in processes {
        let rows: Vec<Option<&crate::snapshot::GpuUsage>> = if p.gpu.is_empty() {
            vec![None]
        } else {
            p.gpu.iter().map(Some).collect()
        };
        for (i, g) in rows.into_iter().enumerate() {
            let marker = match g.and_then(|g| g.pairing) {
                Some(Match::Exact) => "*",
                Some(Match::Guess) => "?",
                None => " ",
            };
            let first = i == 0;
            let _ = writeln!(
                out,
                "{:>7}{marker} {:<10.10} {:<16.16} {:<10} {:>3} {:>10} {:>4} {:>4} {:>6} {:>10}  {:<20.20} {}",
                match (first, p.host_pid) {
                    (false, _) => String::new(),
                    // A process outside this container: only its host PID.
                    (true, Some(h)) if h == p.pid && p.name.is_none() => format!("H:{h}"),
                    (true, _) => p.pid.to_string(),
                },
                safe(if first { p.user.as_deref().unwrap_or("n/a") } else { "" }),
                safe(if first { p.name.as_deref().unwrap_or("n/a") } else { "" }),
                if first {
                    format!("{:?}", p.kind).to_lowercase()
                } else {
                    String::new()
                },
                g.map(|g| device_label(devices, g.device)).unwrap_or_else(|| "-".into()),
                g.map(|g| bytes(g.vram_bytes)).unwrap_or_else(|| "-".into()),
                safe(&g.map(|g| g.contexts.join("+")).unwrap_or_else(|| "-".into())),
                // NVML's SM busy, or an Apple GPU's share of GPU time.
                g.map(|g| {
                    let busy = g.engines.get("sm").or_else(|| g.engines.get("gpu")).copied();
                    percent(busy).trim_end_matches('%').to_string()
                })
                .unwrap_or_else(|| "-".into()),
                if first {
                    p.cpu_percent.map(|c| format!("{c:.1}")).unwrap_or_else(|| "n/a".into())
                } else {
                    String::new()
                },
                if first { bytes(p.rss_bytes) } else { String::new() },
                safe(&if first { p.runtimes.join(",") } else { String::new() }),
                safe(if first {
                    p.cmdline.as_deref().unwrap_or("n/a")
                } else {
                    ""
                }),
            );
        }
        if let Some(f) = p.footprint_bytes {
            // macOS: unified memory has no per-process VRAM figure.
            let _ = writeln!(
                out,
                "{:>9}footprint: {} (what macOS books to the process, GPU buffers included)",
                "",
                bytes(Some(f))
            );
        }
        for m in &p.models {
            render_model(out, m);
        }
        for n in &p.notes {
            let _ = writeln!(out, "{:>9}note: {}", "", safe(n));
        }
    }
    let _ = writeln!(
        out,
        "\n* the PID was checked against /proc; ? paired by a guess; n/a: the source cannot say"
    );
}

/// A model row: what it is, how sure we are, and its memory estimated and
/// reported side by side (never added to the measured figures above).
fn render_model(out: &mut String, m: &crate::snapshot::Model) {
    let file = m
        .path
        .as_deref()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or("n/a");
    let mut what: Vec<String> = Vec::new();
    what.extend(m.architecture.clone());
    what.extend(m.file_type.clone());
    what.extend(m.params.map(|p| format!("{:.1}M params", p as f64 / 1e6)));
    let sureness = if m.confirmed { "confirmed" } else { "unconfirmed" };
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(" ({})", what.join(", "))
    };
    let _ = writeln!(
        out,
        "{:>9}model: {}{} [{}: {sureness}]",
        "",
        safe(file),
        safe(&what),
        safe(&m.evidence.join(", "))
    );
    let slots = match (m.slots_busy, m.slots_total) {
        (Some(b), Some(t)) => format!(", slots {b}/{t} busy"),
        (None, Some(t)) => format!(", {t} slots"),
        _ => String::new(),
    };
    let url = m
        .server_url
        .as_deref()
        .map(|u| format!(", {}", safe(u)))
        .unwrap_or_default();
    let context = m.context.map(|c| c.to_string()).unwrap_or_else(|| "n/a".into());
    let _ = writeln!(out, "{:>16}context {context}{}{slots}{url}", "", super::per_slot(m));
    if let Some(a) = &m.activity {
        let _ = writeln!(out, "{:>16}now: {}", "", super::activity(a));
    }
    let _ = writeln!(
        out,
        "{:>16}{:<10} {:>10} {:>10} {:>10}",
        "", "", "weights", "KV cache", "compute"
    );
    if let Some(e) = &m.estimate {
        let _ = writeln!(
            out,
            "{:>16}{:<10} {:>10} {:>10} {:>10}  (from the file header and settings)",
            "",
            "estimated",
            bytes(e.weights_bytes),
            bytes(e.kv_bytes),
            "n/a"
        );
    }
    if let Some(r) = &m.reported {
        let _ = writeln!(
            out,
            "{:>16}{:<10} {:>10} {:>10} {:>10}  ({})",
            "",
            "reported",
            bytes(r.weights_bytes),
            bytes(r.kv_bytes),
            bytes(r.compute_bytes),
            safe(&r.source)
        );
    }
    if let Some(without) = m.estimate.as_ref().and_then(|e| e.kv_bytes_without_window) {
        let _ = writeln!(
            out,
            "{:>16}note: sliding-window layers hold only their window; had they the whole context, the KV cache would be {} (what calculators that ignore the window say)",
            "",
            bytes(Some(without))
        );
    }
    for n in &m.notes {
        let _ = writeln!(out, "{:>16}note: {}", "", safe(n));
    }
}
