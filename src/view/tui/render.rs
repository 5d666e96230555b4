//! Draws one frame from the App (a Snapshot and the view's settings) and
//! nothing else. Every figure keeps its kind: measured bytes are drawn
//! solid, what a runtime reported or a file implies is drawn with letters
//! and italics beside them, and unknown is `n/a`. Every string from the
//! snapshot (written by processes, drivers, remote hosts) is drawn through
//! `safe_text`, and table cells are cut there, on the escaped text.

//!
//! This file lays the screen out (title, devices, table, detail pane,
//! footer) and draws the overlays over it; each part is drawn by its own
//! module: `header`, `table`, `detail`, `overlay`, in the `theme`'s look.

use super::app::{App, Layout as Placed, KEYS};
use super::columns::FULL_WIDTH;
use super::detail::detail_lines;
use super::header::header_lines;
use super::overlay::{draw_overlay, draw_picker};
use super::table::{draw_table, table_title};
use super::theme::{fold_to_ascii, Theme};
use crate::snapshot::Process;
use crate::units::time_on_screen;
use crate::view::opt;
use crate::view::safe_text::escape;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

pub fn draw(f: &mut Frame, app: &mut App) {
    let area = f.area();
    if app.full_columns.is_none() {
        app.full_columns = Some(area.width >= FULL_WIDTH);
    }
    let theme = Theme::of(app);
    let placed = draw_main(f, app, theme, area);
    app.layout = placed;
    if let Some(scroll) = app.overlay {
        draw_overlay(f, app, theme, area, scroll);
    }
    if let Some(picker) = &app.picker {
        draw_picker(f, theme, area, picker);
    }
    if theme.ascii() {
        fold_to_ascii(f);
    }
}

fn draw_main(f: &mut Frame, app: &App, theme: Theme, area: Rect) -> Placed {
    let title = title_line(app, theme);
    let status = status_line(app, theme, area.width);
    let Some(snap) = &app.snapshot else {
        let [t, body, s] =
            Layout::vertical([Constraint::Length(1), Constraint::Fill(1), Constraint::Length(1)]).areas(area);
        f.render_widget(Paragraph::new(title), t);
        f.render_widget(
            Paragraph::new(vec![
                Line::default(),
                Line::from("  Sampling: the first figures come in a moment."),
            ]),
            body,
        );
        f.render_widget(Paragraph::new(status), s);
        return Placed::default();
    };

    // The process table (its header row included) always gets at least
    // half the screen; the devices take at most what is left beside the
    // title, the table's title and the status line.
    let table_min = area.height / 2;
    let budget = area.height.saturating_sub(3 + table_min).max(1) as usize;
    let header = header_lines(app, snap, theme, area, budget);
    let tree_rows = app.tree_rows();
    let rows: Vec<&Process> = tree_rows.iter().map(|(p, _)| *p).collect();
    let selected = app.selected(&rows);
    let detail = selected
        .map(|(_, p)| detail_lines(app, snap, p, theme, area.width))
        .unwrap_or_default();

    // The table takes what its rows need (at least its half), leaving the
    // detail pane a few lines; the detail pane takes the rest.
    let fixed = 1 + header.len() as u16 + 1 + 1; // title, header, table title, status
    let spare = area.height.saturating_sub(fixed);
    let table_need = rows.len().max(1) as u16 + 1;
    // Half the screen, or less when the rows need less.
    let table_floor = table_min.min(table_need).max(3).min(spare);
    // Each detail line's rows once wrapped: the pane is sized by them, and
    // a line that does not fit whole is left out, never cut mid-sentence.
    let wrapped: Vec<usize> = detail
        .iter()
        .map(|l| {
            Paragraph::new(l.clone())
                .wrap(Wrap { trim: false })
                .line_count(area.width)
        })
        .collect();
    let detail_rows = wrapped.iter().sum::<usize>().min(u16::MAX as usize) as u16;
    let detail_min = if detail.is_empty() {
        0
    } else {
        (detail_rows + 1).min(9).min(spare.saturating_sub(table_floor))
    };
    // A detail pane of a line or two says nothing: the table has them.
    let detail_min = if detail_min < 3 { 0 } else { detail_min };
    let table_h = table_need.min(spare.saturating_sub(detail_min)).max(table_floor);
    let detail_h = if detail_min == 0 { 0 } else { spare - table_h };
    let [t, h, tt, table_area, d, s] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(header.len() as u16),
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Length(detail_h),
        Constraint::Fill(1),
    ])
    .areas(area);

    f.render_widget(Paragraph::new(title), t);
    f.render_widget(Paragraph::new(header), h);
    f.render_widget(Paragraph::new(table_title(app, &rows, theme)), tt);
    let placed = draw_table(f, app, &tree_rows, selected.map(|(i, _)| i), theme, table_area);
    if detail_h > 0 {
        let (pid, name) = selected
            .map(|(_, p)| (p.pid, escape(opt(p.name.as_deref())).into_owned()))
            .unwrap_or_default();
        let block = Block::default()
            .borders(Borders::TOP)
            .border_set(theme.border())
            .border_style(theme.dim())
            .title(Span::styled(format!(" PID {pid} {name} "), theme.bold()));
        let mut room = d.height.saturating_sub(1) as usize;
        let whole: Vec<Line> = detail
            .into_iter()
            .zip(wrapped)
            .take_while(|(_, rows)| {
                let fits = *rows <= room;
                room = room.saturating_sub(*rows);
                fits
            })
            .map(|(line, _)| line)
            .collect();
        f.render_widget(Paragraph::new(whole).block(block).wrap(Wrap { trim: false }), d);
    }
    f.render_widget(Paragraph::new(status), s);
    placed
}

fn title_line(app: &App, theme: Theme) -> Line<'static> {
    let mut spans = vec![Span::styled("gputaskman", theme.title())];
    if let Some(s) = &app.snapshot {
        spans.push(Span::raw(escape(format!(
            "  {}",
            s.host.hostname.as_deref().unwrap_or("this machine")
        ))));
    }
    // A remote feed's status quotes what its hosts answered.
    if !app.feed_status.is_empty() {
        spans.push(Span::raw(escape(format!("  {}", app.feed_status))));
    }
    if let Some(s) = &app.snapshot {
        // Local time on screen; the snapshot (and its JSON) stays UTC.
        let at = time_on_screen(&s.taken_at, app.zone).unwrap_or_else(|| s.taken_at.clone());
        spans.push(Span::styled(escape(format!("  {at}")), theme.dim()));
    }
    if app.paused {
        spans.push(Span::styled("  PAUSED (p resumes)", theme.warn()));
    }
    if app.discovering() {
        let what = if app.replay {
            "  models were being discovered"
        } else {
            "  discovering models…"
        };
        spans.push(Span::styled(what, theme.warn()));
    }
    Line::from(spans)
}

fn status_line(app: &App, theme: Theme, width: u16) -> Line<'static> {
    if let Some(m) = &app.message {
        return Line::from(vec![
            Span::styled(" ! ", theme.key()),
            Span::styled(escape(format!(" {m}")).into_owned(), theme.warn()),
        ]);
    }
    if app.typing_filter {
        return Line::from(vec![
            Span::styled(" / ", theme.key()),
            Span::raw(escape(format!(
                " filter: {}{}  Enter keeps it, Esc clears it",
                app.filter,
                theme.cursor()
            ))),
        ]);
    }
    // What each key does (the states are on screen already: the sorted
    // column's arrow, the table's title), from the one table of keys.
    let keys = KEYS
        .iter()
        .filter(|k| !k.word.is_empty() && !matches!(k.keys, "?" | "q"))
        .filter(|k| k.applies(app.replay, app.readonly));
    // Every key that fits, and help and the way out always.
    let quit = [
        Span::styled("?", theme.key()),
        Span::raw(" keys "),
        Span::styled("q", theme.key()),
        Span::raw(" quit "),
    ];
    let room = (width as usize).saturating_sub(quit.iter().map(Span::width).sum());
    let mut spans = Vec::new();
    let mut used = 0;
    for k in keys {
        let pair = [Span::styled(k.keys, theme.key()), Span::raw(format!(" {} ", k.word))];
        let w: usize = pair.iter().map(Span::width).sum();
        if used + w > room {
            break;
        }
        used += w;
        spans.extend(pair);
    }
    spans.extend(quit);
    Line::from(spans)
}
