//! The detail pane of the selected process.

use super::app::{sum, App};
use super::describe;
use super::history::{self, sparkline};
use super::model_rows;
use super::theme::Theme;
use crate::snapshot::{device_label, Process, Snapshot};
use crate::units::{bytes, time_on_screen};
use crate::view::opt;
use crate::view::safe_text::escape;
use ratatui::style::Color;
use ratatui::text::{Line, Span};

/// The selected process: what it is, each GPU it is on with what the
/// source measured, its VRAM over time, its models, the notes that explain
/// surprises, and its command line.
pub(super) fn detail_lines(app: &App, snap: &Snapshot, p: &Process, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut head = vec![p.kind.label().to_string()];
    if !p.runtimes.is_empty() {
        head.push(p.runtimes.join(", "));
    }
    if let Some(c) = &p.container {
        head.push(format!(
            "{} container {} ({})",
            c.runtime,
            describe::container_label(c),
            c.id
        ));
    }
    head.push(format!("user {}", opt(p.user.as_deref())));
    head.push(format!(
        "CPU {}",
        p.cpu_percent
            .map(|c| format!("{c:.1}%"))
            .unwrap_or_else(|| "n/a".into())
    ));
    head.push(format!("RSS {}", bytes(p.rss_bytes)));
    if let Some(t) = &p.start_time {
        head.push(format!(
            "started {}",
            time_on_screen(t, app.zone).unwrap_or_else(|| t.clone())
        ));
    }
    out.push(Line::raw(escape(head.join(" · "))));

    for g in &p.gpu {
        let pairing = match g.pairing {
            Some(crate::snapshot::Match::Exact) => ", PID exact",
            Some(crate::snapshot::Match::Guess) => ", PID paired by a guess",
            None => "",
        };
        let mut engines: Vec<String> = g.engines.iter().map(|(k, v)| format!("{k} {v}%")).collect();
        if engines.is_empty() {
            engines.push("engines n/a".into());
        }
        out.push(Line::from(vec![
            Span::raw(format!("GPU {}: ", device_label(&snap.devices, g.device))),
            Span::styled(format!("VRAM {}", bytes(g.vram_bytes)), theme.bold()),
            Span::raw(escape(format!(
                " measured ({}{pairing}) · spill {} · paged {} · contexts {} · {}",
                g.source,
                bytes(g.spill_bytes),
                bytes(g.paged_bytes),
                if g.contexts.is_empty() {
                    "n/a".into()
                } else {
                    g.contexts.join("+")
                },
                engines.join(" "),
            ))),
        ]));
    }
    if p.gpu.is_empty() {
        out.push(Line::from(Span::styled(
            "No GPU lists this process: it holds no GPU memory (it may run on the CPU).",
            theme.dim(),
        )));
    }
    if let Some(line) = app.usage().detail_line(p) {
        out.push(Line::raw(line));
    }
    let hist = app.history.process(&history::key(p));
    if hist.iter().any(Option::is_some) {
        let w = (width as usize).saturating_sub(30).clamp(10, history::CAPACITY);
        let max = hist.iter().flatten().copied().max();
        out.push(Line::from(vec![
            Span::raw("VRAM over time "),
            Span::styled(sparkline(&hist, max, w, theme.bars()), theme.fg(Color::Magenta)),
            Span::styled(format!(" peak {}", bytes(max)), theme.dim()),
        ]));
    }

    let measured = sum(p.gpu.iter().map(|g| g.vram_bytes));
    for m in &p.models {
        out.extend(model_rows::model_lines(m, measured, theme));
    }
    for r in &p.reconciliation {
        out.push(Line::from(vec![
            Span::raw(format!("GPU {} memory: ", device_label(&snap.devices, r.device))),
            Span::raw(escape(crate::view::reconciliation_equation(r)).into_owned()),
        ]));
        if let Some(causes) = crate::view::reconciliation_causes(r) {
            out.push(Line::from(Span::styled(escape(causes).into_owned(), theme.warn())));
        }
    }
    if p.models.is_empty() && p.models_pending {
        let pending = describe::pending(app.replay);
        out.push(Line::from(Span::styled(format!("model: {pending}"), theme.warn())));
    }
    for n in describe::notes(snap, p, app.replay) {
        out.push(Line::from(vec![
            Span::styled("note: ", theme.warn()),
            Span::raw(escape(n)),
        ]));
    }
    out.push(Line::from(vec![
        Span::styled("cmd ", theme.dim()),
        Span::raw(escape(describe::command(p)).into_owned()),
    ]));
    out
}
