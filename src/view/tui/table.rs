//! The process table: its title (what it holds, counted per chosen GPU),
//! the columns that are wanted and fit, and the rows, scrolled to keep the
//! selection in view.

use super::app::{App, Layout as Placed, SortKey};
use super::columns::{fit_columns, Column, FULL, SLIM};
use super::describe;
use super::theme::Theme;
use super::usage;
use crate::snapshot::Process;
use crate::view::safe_text::{clip_marked, escape};
use ratatui::layout::{Alignment, Constraint, Flex, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

/// The sorted column's arrow: its natural order, flipped by S.
fn arrow(app: &App) -> &'static str {
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
    if !app.tagged.is_empty() {
        text.push_str(&format!(", {} tagged (k signals them)", app.tagged.len()));
    }
    if let Some(u) = &app.user {
        text.push_str(&format!(", user {}", escape(u.as_str())));
        let scope = app.usage();
        if let Some(spent) = scope.counting().then(|| scope.of_user(u)).flatten() {
            text.push_str(&format!(" ({} since the view started)", usage::said(&spent)));
        }
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

/// How many rows, in the table's order, are asked whether a column has a
/// value: a fleet's hundred thousand rows cost no more than these each frame.
const SAID_ROWS: usize = 2_000;

/// The columns wanted before fitting: the full set (`m`), the config
/// file's or the slim set, less the columns no row has a value for (SPILL and PAGED under NVML, CONTAINER where no process is in one,
/// MODEL where none is known): a column of n/a says nothing a glance needs.
/// Who holds the card (PID, GPU, NAME, VRAM) is always asked for.
fn wanted_columns(app: &App, rows: &[(&Process, String)]) -> Vec<Column> {
    let set: &[Column] = match (&app.columns, app.full_columns == Some(true)) {
        (_, true) => &FULL,
        (Some(configured), false) => configured,
        (None, false) => &SLIM,
    };
    // Read from the figures where a cell is one, on any GPU (a crowd's
    // rows are thousands: no string is built and no device list walked
    // for them), else from the cell itself.
    let any = |has: &dyn Fn(&Process) -> bool| rows.is_empty() || rows.iter().take(SAID_ROWS).any(|(p, _)| has(p));
    let on_gpu = |f: fn(&crate::snapshot::GpuUsage) -> bool| move |p: &Process| p.gpu.iter().any(f);
    let scope = app.usage();
    let said = |c: Column| match c {
        Column::Pid | Column::Device | Column::Name | Column::Vram => true,
        Column::Spill => any(&on_gpu(|g| g.spill_bytes.is_some())),
        Column::Paged => any(&on_gpu(|g| g.paged_bytes.is_some())),
        Column::Gpu => any(&on_gpu(|g| !g.engines.is_empty())),
        Column::Cpu => any(&|p| p.cpu_percent.is_some()),
        Column::Rss => any(&|p| p.rss_bytes.is_some()),
        Column::User => any(&|p| p.user.is_some()),
        Column::Container => any(&|p| p.container.is_some()),
        // Only a fleet's rows have a host; one machine's never.
        Column::Host => rows.iter().take(SAID_ROWS).any(|(p, _)| p.host.is_some()),
        Column::Command => any(&|p| p.cmdline.is_some()),
        Column::Kind => true,
        Column::Runtime => any(&|p| !p.runtimes.is_empty()),
        Column::Model => any(&|p| !p.models.is_empty() || p.models_pending),
        Column::Inside => any(&|p| !matches!(describe::cell(c, app, p).as_str(), "" | "-" | "n/a")),
        Column::GpuTime => scope.counting() && any(&|p| scope.of_process(p).totals.gpu_seconds.is_some()),
        Column::Energy => scope.counting() && any(&|p| scope.of_process(p).totals.energy_j.is_some()),
    };
    let mut wanted: Vec<Column> = set.iter().copied().filter(|c| said(*c)).collect();
    // The column sorted by is shown, in the slim set too (`--sort energy`),
    // where it has something to say; before COMMAND, which takes the rest.
    let sorted = [Column::GpuTime, Column::Energy]
        .into_iter()
        .find(|c| SortKey::of_column(*c) == Some(app.sort));
    if let Some(c) = sorted.filter(|c| !wanted.contains(c) && said(*c)) {
        let at = wanted
            .iter()
            .position(|w| *w == Column::Command)
            .unwrap_or(wanted.len());
        wanted.insert(at, c);
    }
    wanted
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
