//! What is drawn over the screen: the `?` explain text and the `k` signal
//! picker.

use super::app::{App, Chosen, Picker, KEYS};
use super::header::backend_line;
use super::theme::Theme;
use crate::procs::signal::Signal;
use crate::view::explain;
use crate::view::safe_text::escape;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

/// A `w` x `h` box centred in `area` (neither larger than it), cleared for
/// an overlay to be drawn in.
fn popup(f: &mut Frame, area: Rect, w: u16, h: u16) -> Rect {
    let rect = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, rect);
    rect
}

/// `?`: the explain text, scrolled.
pub(super) fn draw_overlay(f: &mut Frame, app: &App, theme: Theme, area: Rect, scroll: u16) {
    let w = area.width.saturating_sub(4).min(100);
    let rect = popup(f, area, w, area.height.saturating_sub(2));
    let inner_w = w.saturating_sub(2) as usize;
    let (title, lines, keys) = if app.explaining {
        (explain::TITLE, explain_lines(app, theme, inner_w), "e keys")
    } else {
        ("Keys", key_lines(app, theme), "e explains")
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(Span::styled(format!(" {title} "), theme.title()))
        .title_bottom(
            Line::from(format!(" ↑↓ scroll · {keys} · ? or Esc closes · q quits ")).alignment(Alignment::Right),
        );
    let paragraph = Paragraph::new(lines).wrap(Wrap { trim: false });
    let rows = paragraph.line_count(inner_w as u16) as u16;
    let max_scroll = rows.saturating_sub(rect.height.saturating_sub(2));
    f.render_widget(paragraph.block(block).scroll((scroll.min(max_scroll), 0)), rect);
}

/// `?`: the keys of this view (a replay's, a read-only view's), what
/// each does, then every source's status line (the screen shows only
/// those that matter).
fn key_lines(app: &App, theme: Theme) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = KEYS
        .iter()
        .filter(|k| k.applies(app.replay, app.readonly))
        .map(|k| {
            Line::from(vec![
                Span::styled(format!("{:<10}", k.keys), theme.bold()),
                Span::raw(format!(" {}", k.does)),
            ])
        })
        .collect();
    let scope = app.usage();
    let users = scope.by_user();
    if scope.counting() && !users.is_empty() {
        lines.push(Line::default());
        lines.push(Line::from(Span::styled(
            "Use since the view started, per user",
            theme.bold(),
        )));
        lines.extend(users.iter().map(|(user, spent)| {
            let user = user.as_deref().map_or_else(|| "n/a".into(), |u| escape(u).into_owned());
            Line::from(format!("  {user:<12} {}", super::usage::said(spent)))
        }));
    }
    if let Some(snap) = &app.snapshot {
        lines.push(Line::default());
        lines.push(Line::from(Span::styled("Sources", theme.bold())));
        lines.extend(
            snap.backends
                .iter()
                .map(|b| Line::from(format!("  {}", backend_line(b)))),
        );
    }
    lines
}

/// `e` in `?`: what can be known, for the sources this machine has (no
/// Jetson section on a box without one).
fn explain_lines(app: &App, theme: Theme, width: usize) -> Vec<Line<'static>> {
    let has = |source: &str| {
        app.snapshot
            .as_ref()
            .is_some_and(|s| s.devices.iter().any(|d| d.backend == source))
    };
    let text = explain::text_wrapped_for(width.saturating_sub(1), |l| l.only_with.is_none_or(has));
    let mut lines = vec![Line::from(Span::styled(
        format!("on {}", explain::PLATFORM),
        theme.dim(),
    ))];
    lines.extend(
        text.lines()
            .skip(2) // the title is the block's
            .map(|l| {
                if l.chars().next().is_some_and(|c| c.is_ascii_digit()) || l == "Reading the screen" {
                    Line::from(Span::styled(l.to_string(), theme.bold()))
                } else {
                    Line::from(l.to_string())
                }
            }),
    );
    lines
}

/// `k`: which signal, then "send it?", naming every process it goes to.
pub(super) fn draw_picker(f: &mut Frame, theme: Theme, area: Rect, picker: &Picker) {
    let signal = Signal::ALL[picker.choice];
    let named = |c: &Chosen| escape(format!("PID {} {} (user {})", c.target.pid, c.name, c.user)).into_owned();
    let mut lines = Vec::new();
    if picker.confirming {
        lines.push(Line::from(Span::styled(
            format!("Send {} to:", signal.name()),
            theme.warn(),
        )));
    } else {
        lines.push(Line::from("Send a signal to:"));
    }
    const LISTED: usize = 4;
    for c in picker.chosen.iter().take(LISTED) {
        lines.push(Line::from(Span::styled(format!("  {}", named(c)), theme.bold())));
    }
    if picker.chosen.len() > LISTED {
        lines.push(Line::from(format!(
            "  and {} more tagged",
            picker.chosen.len() - LISTED
        )));
    }
    lines.push(Line::default());
    if picker.confirming {
        lines.push(Line::from(vec![
            Span::styled(" y ", theme.key()),
            Span::raw(" or Enter sends it  "),
            Span::styled(" n ", theme.key()),
            Span::raw(" or Esc cancels"),
        ]));
    } else {
        for (i, s) in Signal::ALL.iter().enumerate() {
            let line = format!(
                "{} {} {:<8} {}",
                if i == picker.choice { '>' } else { ' ' },
                i + 1,
                s.name(),
                s.meaning()
            );
            lines.push(Line::from(if i == picker.choice {
                Span::styled(line, theme.selected())
            } else {
                Span::raw(line)
            }));
        }
        lines.push(Line::default());
        lines.push(Line::from("↑↓ or 1-6 choose · Enter asks to confirm · Esc cancels"));
    }
    let w = area.width.saturating_sub(2).min(72);
    let rect = popup(f, area, w, (lines.len() as u16 + 2).min(area.height));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(Span::styled(" signal ", theme.title()));
    f.render_widget(Paragraph::new(lines).block(block), rect);
}
