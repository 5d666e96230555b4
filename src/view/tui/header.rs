//! The devices' part of the screen: a header a device (title, readings,
//! memory bar and its legend, the used-over-time sparkline), fitted to the
//! lines the table leaves, down to one summary line for all of them.

use super::app::App;
use super::describe::{self, Part};
use super::history::{self, sparkline};
use super::theme::{Theme, BAR_PROCESSES, FREE_GLYPH, OTHERS_GLYPH, PROCESS_COLORS, UNLISTED_GLYPH};
use crate::snapshot::{counted_for, on_or_inside, Device, Process, Snapshot};
use crate::units::bytes;
use crate::view::safe_text::{clip_marked, escape};
use crate::view::{opt, percent};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

/// The devices' part of the screen in at most `budget` lines: full
/// headers (bar, legend, sparkline) for one or two GPUs on a tall screen,
/// then the same without the sparkline, then one dense line per GPU, then
/// one line for all of them.
pub(super) fn header_lines(app: &App, snap: &Snapshot, theme: Theme, area: Rect, budget: usize) -> Vec<Line<'static>> {
    let width = area.width;
    let mut out = problem_lines(snap, theme);
    let shown: Vec<&Device> = snap
        .devices
        .iter()
        .filter(|d| app.gpu.is_none_or(|g| on_or_inside(&snap.devices, d.index, g)))
        .collect();
    let room = budget.saturating_sub(out.len()).max(1);
    let mut choices: Vec<Vec<Line<'static>>> = Vec::new();
    if shown.len() <= 2 {
        for compact in [false, true] {
            if compact || area.height >= 30 {
                choices.push(
                    shown
                        .iter()
                        .flat_map(|d| device_lines(app, snap, d, theme, width, compact))
                        .collect(),
                );
            }
        }
    }
    // A line a device only when they fit: a fleet's thousands of devices
    // cost the one summary line, not a line each that is thrown away.
    if shown.len() <= room {
        choices.push(shown.iter().map(|d| dense_line(snap, d, theme, width)).collect());
    }
    let lines = match choices.into_iter().find(|c| c.len() <= room) {
        Some(lines) => lines,
        None if shown.is_empty() => Vec::new(),
        None => vec![summary_line(&shown, theme, width)],
    };
    // The devices before the sources' complaints when both do not fit.
    out.truncate(budget.saturating_sub(lines.len()));
    out.extend(lines);
    out
}

/// Sources that are not ok and matter, one line each: one that failed
/// (an error, not "not on this machine"), one whose devices are shown, or
/// every source when none found a device. A Jetson or Ascend source
/// unavailable on an NVIDIA server says nothing a glance needs; `?`,
/// `--once --wide` and the JSON keep the whole list.
fn problem_lines(snap: &Snapshot, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if snap.devices.is_empty() {
        out.push(Line::from(Span::styled(
            "No GPU found. What each source said:",
            theme.warn(),
        )));
    }
    for b in &snap.backends {
        if b.status == crate::snapshot::BackendStatus::Ok {
            continue;
        }
        let matters = snap.devices.is_empty()
            || b.status == crate::snapshot::BackendStatus::Error
            || snap.devices.iter().any(|d| d.backend == b.name);
        if !matters {
            continue;
        }
        let style = if snap.devices.is_empty() {
            theme.dim()
        } else {
            theme.warn()
        };
        out.push(Line::from(Span::styled(format!("  {}", backend_line(b)), style)));
    }
    out
}

/// A source's status line, escaped: `drm: unavailable: no DRM GPU`.
pub(super) fn backend_line(b: &crate::snapshot::Backend) -> String {
    let status = match b.status {
        crate::snapshot::BackendStatus::Ok => "ok",
        crate::snapshot::BackendStatus::Unavailable => "unavailable",
        crate::snapshot::BackendStatus::Error => "ERROR",
    };
    escape(format!("{}: {status}: {}", b.name, b.detail)).into_owned()
}

/// `GPU 0`, or a MIG instance indented under its GPU: `  MIG 0/1 3g.40gb`.
/// In a fleet view the host comes first: `alpha GPU 0`.
fn device_title(d: &Device) -> String {
    let title = match &d.mig {
        Some(mig) => format!("  MIG {} {}", d.label(), escape(opt(mig.profile.as_deref()))),
        None => format!("GPU {}", d.label()),
    };
    match &d.fleet {
        Some(place) => format!("{} {title}", escape(&place.host)),
        None => title,
    }
}

/// Keeps whole spans from the left while they fit in `width` columns: a
/// figure is shown whole or not at all, never cut.
fn fit(spans: Vec<Span<'static>>, width: u16) -> Line<'static> {
    let mut used = 0;
    let mut kept = Vec::new();
    for s in spans {
        let w = s.width();
        if used + w > width as usize {
            break;
        }
        used += w;
        kept.push(s);
    }
    Line::from(kept)
}

/// One line for a device: index, name, memory bar with used/total, then
/// util, temperature and power while they fit.
fn dense_line(snap: &Snapshot, d: &Device, theme: Theme, width: u16) -> Line<'static> {
    let head = Span::styled(format!("{:<6}", device_title(d)), theme.bold());
    // An instance's name is its GPU's and its profile, both said already.
    let name = match d.mig {
        Some(_) => Span::raw(""),
        None => Span::styled(
            format!(" {}", clip_marked(opt(d.name.as_deref()), 22, theme.ellipsis())),
            theme.bold(),
        ),
    };
    let memory = Span::raw(format!(
        " {}/{}",
        bytes(d.memory_used_bytes),
        bytes(d.memory_total_bytes)
    ));
    let mut flags: Vec<Span<'static>> = super::health_mark::mark(d, theme).into_iter().collect();
    if d.stale {
        flags.push(Span::styled(" ! STALE", theme.warn()));
    }
    if !d.process_list_complete {
        flags.push(Span::styled(" ! list incomplete", theme.warn()));
    }
    if !d.errors.is_empty() {
        flags.push(Span::styled(format!(" ! {} failed", d.errors.len()), theme.warn()));
    }
    let power = match (d.power_w, d.power_limit_w) {
        (Some(p), Some(l)) => format!("  {p:.0}/{l:.0} W"),
        (Some(p), None) => format!("  {p:.0} W"),
        _ => "  power n/a".into(),
    };
    let readings = [
        Span::raw(format!("  gpu {}", percent(d.gpu_util_percent))),
        Span::raw(
            d.temperature_c
                .map(|t| format!("  {}", theme.celsius(t)))
                .unwrap_or_else(|| "  temp n/a".into()),
        ),
        Span::raw(power),
    ];
    let fixed: usize = [&head, &name, &memory].iter().map(|s| s.width()).sum::<usize>()
        + flags.iter().map(Span::width).sum::<usize>()
        + readings.iter().map(Span::width).sum::<usize>();
    // The bar takes what the words leave, up to 40 columns; under 6 there
    // is no bar worth drawing.
    let bar_w = (width as usize).saturating_sub(fixed + 3).min(40);
    let mut spans = vec![head, name];
    if bar_w >= 6 {
        spans.push(Span::raw(" ["));
        spans.extend(Bar::of(snap, d, theme).spans(theme, bar_w));
        spans.push(Span::raw("]"));
    }
    spans.push(memory);
    spans.extend(flags);
    spans.extend(readings);
    fit(spans, width)
}

/// All the devices shown on one line, when not even a line each fits.
fn summary_line(devices: &[&Device], theme: Theme, width: u16) -> Line<'static> {
    // Only measured bytes are summed, and only when every device says:
    // a sum with a hole in it is no total.
    let all = |f: fn(&Device) -> Option<u64>| devices.iter().map(|d| f(d)).sum::<Option<u64>>();
    let utils: Vec<u32> = devices.iter().filter_map(|d| d.gpu_util_percent).collect();
    let hottest = devices.iter().filter_map(|d| d.temperature_c).max();
    let mut spans = vec![
        Span::styled(format!("{} GPUs", devices.len()), theme.bold()),
        Span::raw(format!(
            "  used {} of {}",
            bytes(all(|d| d.memory_used_bytes)),
            bytes(all(|d| d.memory_total_bytes))
        )),
    ];
    if let (Some(lo), Some(hi)) = (utils.iter().min(), utils.iter().max()) {
        spans.push(Span::raw(format!("  gpu {lo}-{hi}%")));
    }
    if let Some(t) = hottest {
        spans.push(Span::raw(format!("  hottest {}", theme.celsius(t))));
    }
    let troubled = devices
        .iter()
        .filter(|d| d.stale || !d.errors.is_empty() || !d.process_list_complete)
        .count();
    if troubled > 0 {
        spans.push(Span::styled(format!("  ! {troubled} with problems"), theme.warn()));
    }
    spans.push(Span::styled("  (a digit shows one GPU)", theme.dim()));
    fit(spans, width)
}

/// A device's first full line: its title and name, the driver's versions
/// where there is room, then its readings, each a span of its own so a
/// narrow screen drops whole readings, never half a figure.
fn readings_line(d: &Device, theme: Theme, width: u16, narrow: bool) -> Line<'static> {
    let mut first = vec![
        Span::styled(format!("{} ", device_title(d)), theme.bold()),
        Span::styled(
            clip_marked(
                opt(d.name.as_deref()),
                (width as usize).saturating_sub(8),
                theme.ellipsis(),
            ),
            theme.bold(),
        ),
    ];
    first.extend(super::health_mark::mark(d, theme));
    if !narrow {
        first.push(Span::raw(escape(format!(
            "  driver {}  CUDA {}",
            opt(d.driver_version.as_deref()),
            opt(d.cuda_version.as_deref())
        ))));
    }
    if let Some(m) = &d.driver_model {
        first.push(Span::raw(escape(format!("  {m}"))));
    }
    let power = match (d.power_w, d.power_limit_w) {
        (Some(p), Some(l)) if narrow => format!("{p:.0}/{l:.0} W"),
        (Some(p), Some(l)) => format!("power {p:.0} W of {l:.0} W"),
        (Some(p), None) => format!("power {p:.0} W"),
        _ => "power n/a".into(),
    };
    first.extend([
        Span::raw(format!(
            "  {}gpu {}",
            if narrow { "" } else { theme.separator() },
            percent(d.gpu_util_percent)
        )),
        Span::raw(format!("  mem act {}", percent(d.memory_activity_percent))),
        Span::raw(
            d.temperature_c
                .map(|t| format!("  {}", theme.celsius(t)))
                .unwrap_or_else(|| "  temp n/a".into()),
        ),
        Span::raw(format!("  {power}")),
    ]);
    fit(first, width)
}

fn device_lines(app: &App, snap: &Snapshot, d: &Device, theme: Theme, width: u16, compact: bool) -> Vec<Line<'static>> {
    // Narrow terminals keep the readings and leave the versions out.
    let narrow = width < 130;
    let mut out = vec![readings_line(d, theme, width, narrow)];

    // The memory bar.
    let bar = Bar::of(snap, d, theme);
    let mut figures = vec![
        Span::raw(format!(
            " {} used of {}",
            bytes(d.memory_used_bytes),
            bytes(d.memory_total_bytes)
        )),
        Span::raw(format!(", {} free", bytes(d.memory_free_bytes))),
    ];
    // The driver's own share, so the parts add up to the total as `--once`
    // shows them (NVML's v2 memory info: used + free + reserved = total).
    figures.extend(
        d.memory_reserved_bytes
            .filter(|r| *r > 0)
            .map(|r| Span::raw(format!(", {} reserved by the driver", bytes(Some(r))))),
    );
    let shared = format!("shared {}", bytes(d.shared_memory_used_bytes));
    if !narrow {
        figures.push(Span::raw(format!("  {shared}")));
    }
    let figures_width: usize = figures.iter().map(Span::width).sum();
    let bar_width = (width as usize).saturating_sub(figures_width + 6).clamp(10, 80);
    let mut line = vec![Span::raw("mem [")];
    line.extend(bar.spans(theme, bar_width));
    line.push(Span::raw("]"));
    line.extend(figures);
    out.push(fit(line, width));

    // What the segments are, packed into as few lines as the width allows.
    let mut entries = Vec::new();
    if let Some(n) = &bar.normalized {
        entries.push(n.iter().map(|part| Span::styled(part.clone(), theme.warn())).collect());
    }
    entries.extend(bar.legend(theme));
    if narrow {
        entries.push(vec![Span::raw(shared)]);
    }
    let max_lines = if compact { 2 } else { 3 };
    out.extend(pack(entries, width as usize, max_lines));

    if !compact {
        let hist = app.history.device(d.index);
        let total = app.history.device_total(d.index).or(d.memory_total_bytes);
        let w = (width as usize).saturating_sub(32).clamp(10, history::CAPACITY);
        let mut line = vec![
            Span::raw("used over time "),
            Span::styled(sparkline(&hist, total, w, theme.bars()), theme.fg(Color::Cyan)),
            Span::styled(
                match hist.len().min(w) {
                    1 => " the last sample".to_string(),
                    n => format!(" the last {n} samples"),
                },
                theme.dim(),
            ),
        ];
        if !d.process_list_complete {
            line.push(Span::styled(
                "  ! process list incomplete: a query failed",
                theme.warn(),
            ));
        }
        out.push(fit(line, width));
    } else if !d.process_list_complete {
        out.push(Line::from(Span::styled(
            "  ! process list incomplete: a query failed",
            theme.warn(),
        )));
    }
    if d.stale {
        out.push(Line::from(Span::styled(
            "  ! STALE: the driver stopped answering; these are its last values",
            theme.warn(),
        )));
    }
    if let Some(pods) = d.pods_line() {
        let style = if d.allocated_idle() { theme.warn() } else { theme.dim() };
        out.push(fit(
            vec![Span::styled(escape(format!("  {pods}")).into_owned(), style)],
            width,
        ));
    }
    for e in &d.errors {
        out.push(Line::from(Span::styled(
            escape(format!("  ! {} failed: {}", e.query, e.message)),
            theme.warn(),
        )));
    }
    out
}

/// Lays entries out left to right, two spaces apart, starting a new line
/// when one would not fit; at most `max_lines` (the rest is cut). An entry
/// wider than a line keeps the spans that fit whole, or is left out.
fn pack(entries: Vec<Vec<Span<'static>>>, width: usize, max_lines: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Vec<Span<'static>>> = Vec::new();
    let mut used = 0;
    for entry in entries {
        let entry = fit(entry, width.min(u16::MAX as usize) as u16).spans;
        if entry.is_empty() {
            continue;
        }
        let w: usize = entry.iter().map(|s| s.width()).sum();
        let count = lines.len();
        match lines.last_mut() {
            Some(line) if used + 2 + w <= width => {
                line.push(Span::raw("  "));
                line.extend(entry);
                used += 2 + w;
            }
            _ if count < max_lines => {
                lines.push(entry);
                used = w;
            }
            _ => break,
        }
    }
    lines.into_iter().map(Line::from).collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Seg {
    Process(usize),
    Model(Part),
    Others,
    Unlisted,
}

/// A device's memory bar: segments in bytes on the scale of the device
/// total, with their legend.
pub(super) struct Bar {
    total: Option<u64>,
    /// (bytes drawn, what)
    segments: Vec<(f64, Seg)>,
    /// (glyph, label, what it is made of) of the legend, in order.
    legend: Vec<(String, String, Option<String>, Seg)>,
    /// Why the bar is scaled, when it is, in parts a narrow line drops
    /// from the end.
    normalized: Option<[String; 3]>,
}

impl Bar {
    pub(super) fn of(snap: &Snapshot, d: &Device, theme: Theme) -> Bar {
        let counted = counted_for(&snap.devices, d.index);
        let mut holders: Vec<(&Process, u64)> = snap
            .processes
            .iter()
            .filter_map(|p| {
                // Two sources measuring one device are not added.
                let v = p
                    .gpu
                    .iter()
                    .filter(|g| counted.contains(&g.device))
                    .filter_map(|g| g.vram_bytes)
                    .max()?;
                Some((p, v))
            })
            .filter(|(_, v)| *v > 0)
            .collect();
        holders.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.pid.cmp(&b.0.pid)));
        let measured: u64 = holders.iter().map(|(_, v)| v).sum();
        let used = d.memory_used_bytes;
        // Rows over the device's used figure: scale them into it.
        let (scale, normalized) = match used {
            Some(u) if measured > u && measured > 0 => (
                u as f64 / measured as f64,
                Some([
                    format!("NORMALIZED: rows add up to {},", bytes(Some(measured))),
                    format!(" more than the {} the device reports used;", bytes(Some(u))),
                    " segments scaled to it.".to_string(),
                ]),
            ),
            _ => (1.0, None),
        };
        let mut segments = Vec::new();
        let mut legend = Vec::new();
        for (i, (p, v)) in holders.iter().take(BAR_PROCESSES).enumerate() {
            let name = escape(opt(p.name.as_deref()));
            let mut drawn = 0u64;
            let label = format!("{name} {}", bytes(Some(*v)));
            let mut parts_label = None;
            if let Some((parts, how)) = describe::model_split(p, d.index) {
                let parts_sum: u64 = parts.iter().map(|(_, b)| b).sum();
                // Parts never outgrow the measured segment they sit in.
                let fit = if parts_sum > *v {
                    *v as f64 / parts_sum as f64
                } else {
                    1.0
                };
                let mut words = Vec::new();
                for (part, b) in &parts {
                    segments.push((*b as f64 * fit * scale, Seg::Model(*part)));
                    drawn += (*b as f64 * fit) as u64;
                    words.push(format!("{} {}", part.glyph(), bytes(Some(*b))));
                }
                parts_label = Some(format!("= {} {how}", words.join(" ")));
            }
            segments.push((v.saturating_sub(drawn) as f64 * scale, Seg::Process(i)));
            legend.push((theme.process_glyph(i).to_string(), label, parts_label, Seg::Process(i)));
        }
        let rest: Vec<u64> = holders.iter().skip(BAR_PROCESSES).map(|(_, v)| *v).collect();
        if !rest.is_empty() {
            let r: u64 = rest.iter().sum();
            segments.push((r as f64 * scale, Seg::Others));
            legend.push((
                OTHERS_GLYPH.to_string(),
                format!("{} more {}", rest.len(), bytes(Some(r))),
                None,
                Seg::Others,
            ));
        }
        if let Some(u) = used {
            let unlisted = u.saturating_sub(measured);
            if unlisted > 0 {
                segments.push((unlisted as f64, Seg::Unlisted));
                legend.push((
                    UNLISTED_GLYPH.to_string(),
                    format!("no listed process {}", bytes(Some(unlisted))),
                    None,
                    Seg::Unlisted,
                ));
            }
        }
        Bar {
            total: d.memory_total_bytes,
            segments,
            legend,
            normalized,
        }
    }

    fn style(theme: Theme, seg: Option<Seg>) -> Style {
        match seg {
            Some(Seg::Process(i)) => theme.fg(PROCESS_COLORS[i]),
            Some(Seg::Model(_)) => theme.not_measured(),
            Some(Seg::Others) => theme.fg(Color::Gray),
            Some(Seg::Unlisted) => theme.fg(Color::Red),
            None => theme.dim(),
        }
    }

    fn glyph(theme: Theme, seg: Seg) -> char {
        match seg {
            Seg::Process(i) => theme.process_glyph(i),
            Seg::Model(p) => p.glyph(),
            Seg::Others => OTHERS_GLYPH,
            Seg::Unlisted => UNLISTED_GLYPH,
        }
    }

    /// The bar's cells: cumulative rounding, so segments never drift.
    pub(super) fn cells(&self, theme: Theme, width: usize) -> Vec<(char, Option<Seg>)> {
        let Some(total) = self.total.filter(|t| *t > 0) else {
            return vec![('?', None); width];
        };
        let mut out = Vec::with_capacity(width);
        let mut at = 0.0;
        for (b, seg) in &self.segments {
            let end = ((at + b) / total as f64 * width as f64).round().min(width as f64) as usize;
            while out.len() < end {
                out.push((Bar::glyph(theme, *seg), Some(*seg)));
            }
            at += b;
        }
        while out.len() < width {
            out.push((FREE_GLYPH, None));
        }
        out
    }

    fn spans(&self, theme: Theme, width: usize) -> Vec<Span<'static>> {
        let mut spans: Vec<Span<'static>> = Vec::new();
        let mut run = String::new();
        let mut run_seg: Option<Option<Seg>> = None;
        for (c, seg) in self.cells(theme, width) {
            if run_seg.is_some() && run_seg != Some(seg) {
                spans.push(Span::styled(
                    std::mem::take(&mut run),
                    Bar::style(theme, run_seg.flatten()),
                ));
            }
            run_seg = Some(seg);
            run.push(c);
        }
        if !run.is_empty() {
            spans.push(Span::styled(run, Bar::style(theme, run_seg.flatten())));
        }
        spans
    }

    /// One entry (a few spans) per segment.
    fn legend(&self, theme: Theme) -> Vec<Vec<Span<'static>>> {
        let mut out = Vec::new();
        for (glyph, label, parts, seg) in &self.legend {
            let mut entry = vec![
                Span::styled(glyph.clone(), Bar::style(theme, Some(*seg))),
                Span::raw(format!(" {label}")),
            ];
            entry.extend(parts.as_ref().map(|p| Span::raw(format!(" {p}"))));
            out.push(entry);
        }
        if self.legend.iter().any(|(_, _, parts, _)| parts.is_some()) {
            out.push(vec![Span::styled(
                "W weights K KV cache C compute: not measured".to_string(),
                theme.not_measured(),
            )]);
        }
        out
    }
}
