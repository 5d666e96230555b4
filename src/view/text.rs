//! The one-shot text view (`--once`): renders a Snapshot, reads nothing else.
//! Every string from the snapshot is written through [`safe`]: each was
//! written by a process, a driver or a remote host.

use super::safe_text::{escape, safe};
use super::tui::describe;
use super::{opt, percent};
use crate::snapshot::reconciliation::Reconciliation;
use crate::snapshot::{device_label, BackendStatus, Device, Match, Process, Snapshot};
use crate::units::bytes;
use std::fmt::Write;

const BAR_WIDTH: usize = 30;
const MIN_BAR_WIDTH: usize = 10;

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

/// `--once`. `width`: the terminal's, which process rows are fitted to;
/// None (a pipe, `--wide`) for full rows.
pub fn render(s: &Snapshot, width: Option<usize>) -> String {
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
        render_device(&mut out, s, d, width);
    }

    let _ = writeln!(out);
    if s.processes.is_empty() {
        let _ = writeln!(out, "No process holds GPU memory or runs an AI or GPU runtime.");
    } else {
        render_processes(&mut out, &s.processes, &s.devices, width);
    }
    if s.attribution.normalized {
        let _ = writeln!(
            out,
            "\nNote: per-process figures add up to more than a device reports used; bars are scaled to the device total."
        );
    }
    out
}

fn render_device(out: &mut String, s: &Snapshot, d: &Device, width: Option<usize>) {
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
    let figures = format!(
        "{} used of {}, {} free{}",
        bytes(d.memory_used_bytes),
        bytes(d.memory_total_bytes),
        bytes(d.memory_free_bytes),
        d.memory_reserved_bytes
            .filter(|r| *r > 0)
            .map(|r| format!(", {} reserved by the driver", bytes(Some(r))))
            .unwrap_or_default()
    );
    // In a narrow terminal the bar gives way to the figures.
    let bar_width = width.map_or(BAR_WIDTH, |w| {
        w.saturating_sub("  memory [] ".len() + figures.len())
            .clamp(MIN_BAR_WIDTH, BAR_WIDTH)
    });
    let bar = match (d.memory_used_bytes, d.memory_total_bytes) {
        (Some(u), Some(t)) if t > 0 => {
            let filled = ((u as f64 / t as f64) * bar_width as f64).round() as usize;
            let filled = filled.min(bar_width);
            format!("[{}{}]", "#".repeat(filled), ".".repeat(bar_width - filled))
        }
        _ => format!("[{}]", "?".repeat(bar_width)),
    };
    let _ = writeln!(out, "  memory {bar} {figures}");
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
    if let Some(line) = d.health.as_ref().and_then(|h| h.line(d.temperature_c)) {
        let _ = writeln!(out, "  ! health: {}", safe(&line));
    }
    if let Some(pods) = d.pods_line() {
        let mark = if d.allocated_idle() { "! " } else { "" };
        let _ = writeln!(out, "  {mark}{}", safe(&pods));
    }
    for e in &d.errors {
        let _ = writeln!(out, "  ! {} failed: {}", safe(&e.query), safe(&e.message));
    }
    if !d.process_list_complete {
        let _ = writeln!(out, "  ! the process list of this device is incomplete: a query failed");
    }
    for n in &d.notes {
        wrapped(out, 2, "note: ", n, width);
    }
}

/// One column of the process table: its header, one cell per row, and
/// whether it holds a figure (right-aligned, never cut).
struct Column {
    title: &'static str,
    cells: Vec<String>,
    figure: bool,
    /// The width full rows pad to, so that columns stand where they
    /// always have whatever the rows hold.
    usual: usize,
    width: usize,
}

impl Column {
    /// As wide as its widest cell or its title.
    fn natural(&self) -> usize {
        self.cells
            .iter()
            .map(|s| width_of(s))
            .chain([self.title.len()])
            .max()
            .unwrap_or(0)
    }
}

/// What a row too wide for the terminal gives up, in order, until it fits:
/// text is cut (with an ellipsis) to the width given, then whole columns
/// go. Figures are never cut; a row whose figures alone are wider than the
/// terminal is left to wrap.
enum Give {
    Cut(&'static str, usize),
    Drop(&'static str),
}

const GIVE_ORDER: &[Give] = &[
    Give::Cut("COMMAND", 24),
    Give::Cut("RUNTIME", 12),
    Give::Cut("NAME", 12),
    Give::Cut("USER", 8),
    Give::Drop("KIND"),
    Give::Cut("COMMAND", 12),
    Give::Drop("RUNTIME"),
    Give::Drop("USER"),
    Give::Cut("NAME", 8),
    Give::Cut("COMMAND", 1),
];

/// The process table, with the live view's column names. `width`: the
/// terminal's, which rows are fitted to; None for full rows.
fn render_processes(out: &mut String, processes: &[Process], devices: &[Device], width: Option<usize>) {
    let mut columns: Vec<Column> = [
        // The pairing marker's column follows the digits.
        ("PID ", true, 8),
        ("USER", false, 10),
        ("NAME", false, 16),
        ("KIND", false, 10),
        ("GPU", true, 3),
        ("VRAM", true, 10),
        ("GPU%", true, 4),
        ("CPU%", true, 6),
        ("RSS", true, 10),
        ("RUNTIME", false, 20),
        ("COMMAND", false, 0),
    ]
    .into_iter()
    .map(|(title, figure, usual)| Column {
        title,
        cells: Vec::new(),
        figure,
        usual,
        width: 0,
    })
    .collect();
    // Per table row, the lines printed under it (models, notes).
    let mut under: Vec<String> = Vec::new();
    let mut paired = Vec::new();
    for p in processes {
        let rows: Vec<Option<&crate::snapshot::GpuUsage>> = if p.gpu.is_empty() {
            vec![None]
        } else {
            p.gpu.iter().map(Some).collect()
        };
        for (i, g) in rows.into_iter().enumerate() {
            let first = i == 0;
            paired.extend(g.and_then(|g| g.pairing));
            let marker = match g.and_then(|g| g.pairing) {
                Some(Match::Exact) => "*",
                Some(Match::Guess) => "?",
                None => " ",
            };
            let text = |s: &str| if first { escape(s).into_owned() } else { String::new() };
            let cells = [
                if first {
                    format!("{}{marker}", describe::pid_label(p))
                } else {
                    marker.to_string()
                },
                text(p.user.as_deref().unwrap_or("n/a")),
                text(p.name.as_deref().unwrap_or("n/a")),
                text(p.kind.label()),
                g.map(|g| device_label(devices, g.device)).unwrap_or_else(|| "-".into()),
                g.map(|g| bytes(g.vram_bytes)).unwrap_or_else(|| "-".into()),
                // NVML's SM busy, or an Apple GPU's share of GPU time: the
                // live view's GPU%.
                g.map(|g| {
                    let busy = g.engines.get("sm").or_else(|| g.engines.get("gpu")).copied();
                    percent(busy).trim_end_matches('%').to_string()
                })
                .unwrap_or_else(|| "-".into()),
                match (first, p.cpu_percent) {
                    (false, _) => String::new(),
                    (true, Some(c)) => format!("{c:.1}"),
                    (true, None) => "n/a".into(),
                },
                if first { bytes(p.rss_bytes) } else { String::new() },
                text(&if p.runtimes.is_empty() {
                    "-".into()
                } else {
                    p.runtimes.join(",")
                }),
                text(p.cmdline.as_deref().unwrap_or("n/a")),
            ];
            for (column, cell) in columns.iter_mut().zip(cells) {
                column.cells.push(cell);
            }
            let mut lines = String::new();
            if i + 1 == p.gpu.len().max(1) {
                render_under(&mut lines, p, width);
            }
            under.push(lines);
        }
    }
    for c in &mut columns {
        c.width = c.natural().max(c.usual);
    }
    if let Some(limit) = width {
        fit(&mut columns, limit);
    }
    let line = |cell: &dyn Fn(&Column) -> String| {
        let cells: Vec<String> = columns.iter().map(cell).collect();
        cells.join(" ").trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&|c: &Column| pad(c, &cut(c.title, c.width))));
    for (row, lines) in under.iter().enumerate() {
        let _ = writeln!(out, "{}", line(&|c: &Column| pad(c, &cut(&c.cells[row], c.width))));
        out.push_str(lines);
    }
    // The markers' meaning, for those shown.
    let mut legend = Vec::new();
    if paired.contains(&Match::Exact) {
        legend.push("* a host PID paired with this process for certain");
    }
    if paired.contains(&Match::Guess) {
        legend.push("? paired by a guess");
    }
    legend.push("n/a: the source cannot say");
    let _ = writeln!(out, "\n{}", legend.join("; "));
}

/// The footprint, models and notes printed under a process's last row.
fn render_under(out: &mut String, p: &Process, width: Option<usize>) {
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
        render_model(out, m, width);
    }
    for r in &p.reconciliation {
        render_reconciliation(out, r, width);
    }
    for n in &p.notes {
        wrapped(out, 9, "note: ", n, width);
    }
}

/// One device's measured memory set against the parts, each with its
/// provenance, and the signed rest: a comparison, not a sum.
fn render_reconciliation(out: &mut String, r: &Reconciliation, width: Option<usize>) {
    let head = format!("GPU {} memory: ", r.device);
    wrapped(out, 9, &head, &super::reconciliation_equation(r), width);
    if let Some(causes) = super::reconciliation_causes(r) {
        wrapped(out, 9 + head.len(), "", &causes, width);
    }
}

/// `HEAD TEXT` indented by `indent`, escaped; in a terminal of `width`
/// wrapped between words under the text's first word, so a line never
/// runs back to the left edge and nothing in it is cut.
fn wrapped(out: &mut String, indent: usize, head: &str, text: &str, width: Option<usize>) {
    let text = escape(text);
    let lead = indent + head.len();
    let room = width.map_or(usize::MAX, |w| w.saturating_sub(lead).max(20));
    let mut line = String::new();
    let mut head = head.to_string();
    for word in text.split(' ') {
        if !line.trim().is_empty() && width_of(&line) + 1 + width_of(word) > room {
            let _ = writeln!(out, "{:indent$}{head}{}", "", line.trim_end());
            line.clear();
            head = " ".repeat(head.len());
        }
        if !line.is_empty() || word.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    let _ = writeln!(out, "{:indent$}{head}{}", "", line.trim_end());
}

/// Columns taken by an escaped cell.
fn width_of(s: &str) -> usize {
    // Cells are escaped already: what is left is printable.
    super::safe_text::width(s)
}

/// A cell padded to its column; text on the left, figures on the right.
fn pad(c: &Column, s: &str) -> String {
    let room = c.width.saturating_sub(width_of(s));
    if c.figure {
        format!("{}{s}", " ".repeat(room))
    } else {
        format!("{s}{}", " ".repeat(room))
    }
}

/// `s` cut to `max` columns, an ellipsis in the last when cut.
fn cut(s: &str, max: usize) -> String {
    if width_of(s) <= max {
        return s.to_string();
    }
    super::safe_text::clip_marked(s, max, '…')
}

/// Gives up what [`GIVE_ORDER`] says until the row fits `limit` columns.
fn fit(columns: &mut Vec<Column>, limit: usize) {
    let total = |columns: &[Column]| columns.iter().map(|c| c.width).sum::<usize>() + columns.len().saturating_sub(1);
    if total(columns) <= limit {
        return;
    }
    // First the padding goes: each column as wide as what it holds.
    for c in columns.iter_mut() {
        c.width = c.natural();
    }
    for give in GIVE_ORDER {
        let over = total(columns).saturating_sub(limit);
        if over == 0 {
            return;
        }
        match give {
            Give::Cut(title, least) => {
                if let Some(c) = columns.iter_mut().find(|c| c.title == *title) {
                    c.width = c.width.saturating_sub(over).max((*least).min(c.width));
                }
            }
            Give::Drop(title) => columns.retain(|c| c.title != *title),
        }
    }
}

/// A model row: what it is, how sure we are, and its memory estimated and
/// reported side by side (never added to the measured figures above).
fn render_model(out: &mut String, m: &crate::snapshot::Model, width: Option<usize>) {
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
    let evidence = m.evidence.join(", ");
    wrapped(
        out,
        9,
        "model: ",
        &format!("{file}{what} [{evidence}: {sureness}]"),
        width,
    );
    let slots = super::slots(m.slots_busy, m.slots_total)
        .map(|s| format!(", {s}"))
        .unwrap_or_default();
    let url = m.server_url.as_deref().map(|u| format!(", {u}")).unwrap_or_default();
    let context = m.context.map(|c| c.to_string()).unwrap_or_else(|| "n/a".into());
    let settings = format!("context {context}{}{slots}{url}", super::per_slot(m));
    wrapped(out, 16, "", &settings, width);
    if let Some(a) = &m.activity {
        wrapped(out, 16, "now: ", &super::activity(a), width);
    }
    if let Some(r) = &m.runtime {
        wrapped(out, 16, "", &super::runtime_pool(r), width);
    }
    let _ = writeln!(
        out,
        "{:>16}{:<10} {:>10} {:>10} {:>10}",
        "", "", "weights", "KV cache", "compute"
    );
    if let Some(e) = &m.estimate {
        let row = format!(
            "{:<10} {:>10} {:>10} {:>10}  (from the file header and settings)",
            "estimated",
            bytes(e.weights_bytes),
            bytes(e.kv_bytes),
            bytes(e.compute_bytes)
        );
        wrapped(out, 16, "", &row, width);
        for line in super::estimate_device_lines(e) {
            wrapped(out, 16, "  ", &line, width);
        }
    }
    if let Some(r) = &m.reported {
        let row = format!(
            "{:<10} {:>10} {:>10} {:>10}  ({})",
            "reported",
            bytes(r.weights_bytes),
            bytes(r.kv_bytes),
            bytes(r.compute_bytes),
            r.source
        );
        wrapped(out, 16, "", &row, width);
    }
    if let Some(without) = m.estimate.as_ref().and_then(|e| e.kv_bytes_without_window) {
        let text = format!(
            "sliding-window layers hold only their window; had they the whole context, the KV cache would be {} (what calculators that ignore the window say)",
            bytes(Some(without))
        );
        wrapped(out, 16, "note: ", &text, width);
    }
    for n in &m.notes {
        wrapped(out, 16, "note: ", n, width);
    }
}
