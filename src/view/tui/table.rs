//! The process table: its title (what it holds, counted per chosen GPU),
//! the columns that are wanted and fit, and the rows, scrolled to keep the
//! selection in view.

use super::app::{App, Layout as Placed, SortKey};
use super::columns::{fit_columns, Column, FULL, SLIM};
use super::describe;
use super::theme::Theme;
use crate::snapshot::Process;
use crate::view::safe_text::{clip_marked, escape};
use ratatui::layout::{Alignment, Constraint, Flex, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

/// The sorted column's arrow: its natural order, flipped by S.
pub(super) fn arrow(app: &App) -> &'static str {
    if app.sort.descending() != app.reversed {
        "↓"
    } else {
        "↑"
    }
}

/// What the table holds, counted per chosen GPU: "11 on GPU 0, 52 on
/// other GPUs", not "52 more not on a GPU" when they are on other GPUs.
/// Each process is counted once, in one part ([`App::counts`]), so the
/// parts add up to the processes `u` and `/` let through; the ancestors
/// `t` adds (`rows` that are not listed) are said apart.
pub(super) fn table_title(app: &App, rows: &[&Process], theme: Theme) -> Line<'static> {
    let c = app.counts();
    let mut text = match app.gpu_label() {
        // Rows on no GPU (an AI runtime on the CPU) are not "on GPU g".
        Some(g) => {
            let mut t = format!("PROCESSES  {} on GPU {g}", c.on_chosen);
            if c.on_no_gpu_listed > 0 {
                t.push_str(&format!(", {} on no GPU", c.on_no_gpu_listed));
            }
            t
        }
        None => format!("PROCESSES  {} shown", c.on_chosen + c.on_no_gpu_listed),
    };
    if c.on_other_gpus > 0 {
        text.push_str(&format!(", {} on other GPUs (g or a digit picks one)", c.on_other_gpus));
    }
    if c.hidden > 0 {
        text.push_str(&format!(", {} more not on a GPU (a shows all)", c.hidden));
    }
    if let Some(u) = &app.user {
        text.push_str(&format!(", user {}", escape(u.as_str())));
    }
    if !app.filter.is_empty() {
        text.push_str(&format!(", filter \"{}\"", escape(app.filter.as_str())));
    }
    if app.tree {
        text.push_str(", as a tree");
        let ancestors = rows.iter().filter(|p| !app.is_listed(p)).count();
        if ancestors > 0 {
            text.push_str(&format!(" with {ancestors} parents dimmed"));
        }
    }
    Line::from(Span::styled(text, theme.bold()))
}

/// The columns wanted before fitting: the full set (`m`), the config
/// file's, or the slim set. Slim columns leave SPILL out where no source
/// can say it (NVML on Linux): a column of n/a says nothing a glance needs.
/// CONTAINER, a column of "-" on most machines, only when a process is in
/// one.
fn wanted_columns(app: &App, rows: &[(&Process, String)]) -> Vec<Column> {
    let in_container = rows.iter().any(|(p, _)| p.container.is_some());
    let spill_known = rows.iter().any(|(p, _)| app.figure(p, |g| g.spill_bytes).is_some());
    let wanted: Vec<Column> = match (&app.columns, app.full_columns == Some(true)) {
        (_, true) => FULL.to_vec(),
        (Some(configured), false) => configured.clone(),
        (None, false) => SLIM
            .into_iter()
            .filter(|c| *c != Column::Spill || spill_known)
            .collect(),
    };
    wanted
        .into_iter()
        .filter(|c| *c != Column::Container || in_container)
        .collect()
}

/// The first row shown: the last one, kept while the selection stays in
/// view, else moved as little as puts it there.
fn scroll_offset(app: &App, rows: usize, selected: Option<usize>, visible: usize) -> usize {
    let mut offset = app.layout.offset.min(rows.saturating_sub(visible));
    if let Some(i) = selected {
        if i < offset {
            offset = i;
        } else if visible > 0 && i >= offset + visible {
            offset = i + 1 - visible;
        }
    }
    offset
}

/// A figure right-aligned, text as it is.
fn aligned(line: Line<'static>, c: Column) -> Cell<'static> {
    Cell::from(if c.figure() {
        line.alignment(Alignment::Right)
    } else {
        line
    })
}

/// One process's row: each fitted column's value, text cut on the right on
/// its escaped form (figures fit: their column is as wide as the widest).
fn process_row(
    app: &App,
    p: &Process,
    values: &[String],
    wanted: &[Column],
    cols: &[(Column, usize)],
    theme: Theme,
) -> Row<'static> {
    Row::new(cols.iter().map(|(c, w)| {
        let i = wanted.iter().position(|x| x == c).unwrap_or(0);
        let v = clip_marked(&values[i], *w, theme.ellipsis());
        let style = match c {
            Column::Model | Column::Inside if p.models_pending && p.models.is_empty() => theme.warn(),
            Column::Inside if !p.models.is_empty() => theme.not_measured(),
            // An ancestor `t` shows to hold the tree together, not a row
            // of its own.
            _ if v == "n/a" || !app.is_listed(p) => theme.dim(),
            _ => Style::default(),
        };
        aligned(Line::from(Span::styled(v, style)), *c)
    }))
}

pub(super) fn draw_table(
    f: &mut Frame,
    app: &App,
    rows: &[(&Process, String)],
    selected: Option<usize>,
    theme: Theme,
    area: Rect,
) -> Placed {
    let wanted = wanted_columns(app, rows);
    let body = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(1),
        ..area
    };
    let visible = body.height as usize;
    let offset = scroll_offset(app, rows.len(), selected, visible);
    let shown = &rows[offset.min(rows.len())..(offset + visible).min(rows.len())];
    // Every visible cell, once: the figures' widths come from them.
    let values: Vec<Vec<String>> = shown
        .iter()
        .map(|(p, branch)| {
            wanted
                .iter()
                .map(|c| match c {
                    Column::Name if app.is_tagged(p) => format!("{branch}+{}", describe::cell(*c, app, p)),
                    Column::Name => format!("{branch}{}", describe::cell(*c, app, p)),
                    _ => describe::cell(*c, app, p),
                })
                .collect()
        })
        .collect();
    let title = |c: Column| {
        let mut t = c.title().to_string();
        if SortKey::of_column(c) == Some(app.sort) {
            t.push_str(arrow(app));
        }
        t
    };
    let cells = |c: Column| {
        let i = wanted.iter().position(|w| *w == c).unwrap_or(0);
        values
            .iter()
            .map(|row| crate::view::safe_text::width(&row[i]))
            .chain([title(c).chars().count()])
            .max()
            .unwrap_or(0)
    };
    let cols = fit_columns(&wanted, cells, area.width as usize);
    let header = Row::new(
        cols.iter()
            .map(|(c, w)| aligned(Line::from(clip_marked(&title(*c), *w, theme.ellipsis())), *c)),
    )
    .style(theme.header());
    let widths: Vec<Constraint> = if rows.is_empty() {
        vec![Constraint::Fill(1)]
    } else {
        cols.iter().map(|(_, w)| Constraint::Length(*w as u16)).collect()
    };
    let body_rows: Vec<Row> = if rows.is_empty() {
        let msg = if app.filter.is_empty() && app.user.is_none() {
            "No process holds GPU memory or runs an AI or GPU runtime."
        } else {
            "No process matches the filter (/ then Esc clears it; u cycles the users)."
        };
        vec![Row::new(vec![Cell::from(Line::from(Span::styled(msg, theme.dim())))])]
    } else {
        shown
            .iter()
            .zip(&values)
            .enumerate()
            .map(|(n, ((p, _), row_values))| {
                let row = process_row(app, p, row_values, &wanted, &cols, theme);
                if Some(offset + n) == selected {
                    row.style(theme.selected())
                } else if app.is_tagged(p) {
                    row.style(theme.tagged())
                } else {
                    row
                }
            })
            .collect()
    };
    let table = Table::new(body_rows, widths)
        .header(header)
        .column_spacing(1)
        .flex(Flex::Start);
    f.render_widget(table, area);
    Placed {
        table_body: body,
        offset,
    }
}
