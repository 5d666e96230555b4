//! Draws one frame from the App (a Snapshot and the view's settings) and
//! nothing else. Every figure keeps its kind: measured bytes are drawn
//! solid, what a runtime reported or a file implies is drawn with letters
//! and italics beside them, and unknown is `n/a`. Every string from the
//! snapshot (written by processes, drivers, remote hosts) is drawn through
//! `safe_text`, and table cells are cut there, on the escaped text.

use super::app::{sum, App, Layout as Placed};
use super::describe::{self, Part};
use super::history::{self, sparkline};
use crate::snapshot::{counted_for, device_label, on_or_inside, Device, Process, Snapshot};
use crate::units::bytes;
use crate::view::safe_text::{clip_marked, escape};
use crate::view::{explain, opt, percent};
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

/// From this width on the view starts with full columns.
pub const FULL_WIDTH: u16 = 170;
/// Processes that get a segment of their own in a device's bar.
const BAR_PROCESSES: usize = 4;
const PROCESS_GLYPHS: [char; BAR_PROCESSES] = ['█', '▓', '▒', '░'];
/// `--ascii`: for terminals and fonts without block elements.
const ASCII_PROCESS_GLYPHS: [char; BAR_PROCESSES] = ['#', '%', '=', '+'];
const PROCESS_COLORS: [Color; BAR_PROCESSES] = [Color::Cyan, Color::Magenta, Color::Yellow, Color::Blue];
const OTHERS_GLYPH: char = ':';
const UNLISTED_GLYPH: char = '-';
const FREE_GLYPH: char = '·';

/// Box drawing for terminals without it (`--ascii`).
const ASCII_BORDER: border::Set = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

/// The look `--light`, `--no-color` (and NO_COLOR) and `--ascii` choose.
#[derive(Clone, Copy)]
pub struct Theme {
    color: bool,
    light: bool,
    ascii: bool,
}

impl Theme {
    fn fg(self, c: Color) -> Style {
        match (self.color, self.light) {
            (false, _) => Style::default(),
            (true, false) => Style::default().fg(c),
            (true, true) => Style::default().fg(on_light(c)),
        }
    }
    fn process_glyph(self, i: usize) -> char {
        if self.ascii {
            ASCII_PROCESS_GLYPHS[i]
        } else {
            PROCESS_GLYPHS[i]
        }
    }
    fn bars(self) -> &'static [char; 8] {
        if self.ascii {
            &history::ASCII_BARS
        } else {
            &history::BARS
        }
    }
    fn border(self) -> border::Set {
        if self.ascii {
            ASCII_BORDER
        } else {
            border::PLAIN
        }
    }
    /// The separator between a device's memory and its activity figures.
    fn separator(self) -> &'static str {
        if self.ascii {
            "| "
        } else {
            "│ "
        }
    }
    /// What a cut text ends with.
    fn ellipsis(self) -> char {
        if self.ascii {
            '~'
        } else {
            '…'
        }
    }
    fn cursor(self) -> char {
        if self.ascii {
            '_'
        } else {
            '▏'
        }
    }
    fn bold(self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    fn title(self) -> Style {
        self.fg(Color::LightCyan).add_modifier(Modifier::BOLD)
    }
    fn header(self) -> Style {
        self.bold().add_modifier(Modifier::UNDERLINED)
    }
    fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    /// Rows tagged with space for `k`.
    fn tagged(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    fn dim(self) -> Style {
        self.fg(Color::DarkGray)
    }
    fn warn(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    /// Reported and estimated figures: never mistaken for measured ones.
    fn not_measured(self) -> Style {
        self.fg(Color::LightGreen).add_modifier(Modifier::ITALIC)
    }
    fn key(self) -> Style {
        self.fg(Color::Black)
            .bg(if self.color { Color::Cyan } else { Color::Reset })
            .add_modifier(if self.color { Modifier::empty() } else { Modifier::BOLD })
    }
}

/// The dark-background palette's colour for a light background: the bright
/// variants fade into white, and dim must be lighter than text, not darker.
fn on_light(c: Color) -> Color {
    match c {
        Color::LightCyan => Color::Blue,
        Color::LightGreen => Color::Green,
        // Dark orange (xterm-256 130): yellow is unreadable on white.
        Color::Yellow => Color::Indexed(130),
        Color::DarkGray => Color::Gray,
        Color::Gray => Color::DarkGray,
        other => other,
    }
}

pub fn draw(f: &mut Frame, app: &mut App) {
    let area = f.area();
    if app.full_columns.is_none() {
        app.full_columns = Some(area.width >= FULL_WIDTH);
    }
    let theme = Theme {
        color: app.color,
        light: app.light,
        ascii: app.ascii,
    };
    let placed = draw_main(f, app, theme, area);
    app.layout = placed;
    if let Some(scroll) = app.overlay {
        draw_overlay(f, theme, area, scroll);
    }
    if let Some(picker) = &app.picker {
        draw_picker(f, theme, area, picker);
    }
    if theme.ascii {
        fold_to_ascii(f);
    }
}

/// `--ascii`: what the screen holds that is not ASCII yet (a separator, an
/// arrow, a name), cell by cell; a cell's stand-in never takes more columns
/// than it has, and one that is empty is drawn blank.
fn fold_to_ascii(f: &mut Frame) {
    let mut folded = String::new();
    for cell in &mut f.buffer_mut().content {
        if cell.symbol().is_ascii() {
            continue;
        }
        folded.clear();
        cell.symbol()
            .chars()
            .for_each(|c| crate::view::ascii::stand_in(c, &mut folded));
        folded.truncate(1);
        cell.set_symbol(if folded.is_empty() { " " } else { &folded });
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
    let detail_min = if detail.is_empty() {
        0
    } else {
        (detail.len() as u16 + 1).min(9).min(spare.saturating_sub(table_floor))
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
        f.render_widget(Paragraph::new(detail).block(block).wrap(Wrap { trim: false }), d);
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
        spans.push(Span::styled(escape(format!("  {}", s.taken_at)), theme.dim()));
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
    let sort = format!("sort {}{}", app.sort.label(), arrow(app));
    let mut keys: Vec<(&str, String)> = Vec::new();
    if app.replay {
        keys.extend([
            ("[ ]", "step".to_string()),
            ("{ }", "start/end".into()),
            ("< >", "speed".into()),
            ("space", "play".into()),
        ]);
    }
    // The most wanted first: a narrow status line keeps those.
    keys.extend([
        ("s", sort),
        (
            "/",
            if app.filter.is_empty() {
                "filter".into()
            } else {
                escape(format!("filter:{}", app.filter)).into_owned()
            },
        ),
        ("g", format!("GPU {}", app.gpu_label().unwrap_or_else(|| "all".into()))),
    ]);
    if !app.readonly {
        keys.push(("k", "signal".into()));
        if !app.tagged.is_empty() {
            keys.push(("space", format!("{} tagged", app.tagged.len())));
        }
    }
    keys.extend([
        ("t", if app.tree { "list".into() } else { "tree".into() }),
        (
            "u",
            escape(format!("user {}", app.user.as_deref().unwrap_or("all"))).into_owned(),
        ),
        ("S", "reverse".into()),
        ("a", if app.show_all { "all".into() } else { "top".into() }),
        (
            "m",
            if app.full_columns == Some(true) {
                "full".into()
            } else {
                "slim".into()
            },
        ),
    ]);
    if !app.replay {
        keys.push(("p", if app.paused { "resume".into() } else { "pause".into() }));
    }
    // Every key that fits, and help and the way out always.
    let quit = [
        Span::styled("?", theme.key()),
        Span::raw(" explain "),
        Span::styled("q", theme.key()),
        Span::raw(" quit "),
    ];
    let room = (width as usize).saturating_sub(quit.iter().map(Span::width).sum());
    let mut spans = Vec::new();
    let mut used = 0;
    for (k, label) in keys {
        let pair = [
            Span::styled(k.to_string(), theme.key()),
            Span::raw(format!(" {label} ")),
        ];
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

fn arrow(app: &App) -> &'static str {
    // The column's natural order, flipped by S.
    let descending = !matches!(app.sort, super::app::SortKey::Name | super::app::SortKey::Pid);
    if descending != app.reversed {
        "↓"
    } else {
        "↑"
    }
}

/// What the table holds, counted per chosen GPU: "11 on GPU 0, 52 on
/// other GPUs", not "52 more not on a GPU" when they are on other GPUs.
fn table_title(app: &App, rows: &[&Process], theme: Theme) -> Line<'static> {
    let hidden = app.hidden_count();
    let mut text = match app.gpu_label() {
        // Rows on no GPU (an AI runtime on the CPU) are not "on GPU g".
        Some(g) => {
            let on = rows.iter().filter(|p| app.on_gpu(p)).count();
            let mut t = format!("PROCESSES  {on} on GPU {g}");
            if rows.len() > on {
                t.push_str(&format!(", {} on no GPU", rows.len() - on));
            }
            t
        }
        None => format!("PROCESSES  {} shown", rows.len()),
    };
    let elsewhere = app.elsewhere_count();
    if elsewhere > 0 {
        text.push_str(&format!(", {elsewhere} on other GPUs (g or a digit picks one)"));
    }
    if !app.show_all && hidden > 0 {
        text.push_str(&format!(", {hidden} more not on a GPU (a shows all)"));
    }
    if let Some(u) = &app.user {
        text.push_str(&format!(", user {}", escape(u.as_str())));
    }
    if !app.filter.is_empty() {
        text.push_str(&format!(", filter \"{}\"", escape(app.filter.as_str())));
    }
    if app.tree {
        text.push_str(", as a tree");
    }
    Line::from(Span::styled(text, theme.bold()))
}

// ---------------------------------------------------------------- devices

/// The devices' part of the screen in at most `budget` lines: full
/// headers (bar, legend, sparkline) for one or two GPUs on a tall screen,
/// then the same without the sparkline, then one dense line per GPU, then
/// one line for all of them.
fn header_lines(app: &App, snap: &Snapshot, theme: Theme, area: Rect, budget: usize) -> Vec<Line<'static>> {
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

/// Sources that are not ok, one line each.
fn problem_lines(snap: &Snapshot, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if snap.devices.is_empty() {
        out.push(Line::from(Span::styled(
            "No GPU found. What each source said:",
            theme.warn(),
        )));
    }
    for b in &snap.backends {
        let status = match b.status {
            crate::snapshot::BackendStatus::Ok => continue,
            crate::snapshot::BackendStatus::Unavailable => "unavailable",
            crate::snapshot::BackendStatus::Error => "ERROR",
        };
        let style = if snap.devices.is_empty() {
            theme.dim()
        } else {
            theme.warn()
        };
        out.push(Line::from(Span::styled(
            escape(format!("  {}: {status}: {}", b.name, b.detail)),
            style,
        )));
    }
    out
}

/// `GPU 0`, or a MIG instance indented under its GPU: `  MIG 0/1 3g.40gb`.
fn device_title(d: &Device) -> String {
    match &d.mig {
        Some(mig) => format!("  MIG {} {}", d.label(), escape(opt(mig.profile.as_deref()))),
        None => format!("GPU {}", d.label()),
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
    let mut flags = Vec::new();
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
                .map(|t| format!("  {t} °C"))
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
        spans.push(Span::raw(format!("  hottest {t} °C")));
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

fn device_lines(app: &App, snap: &Snapshot, d: &Device, theme: Theme, width: u16, compact: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    // Narrow terminals keep the readings and leave the versions out.
    let narrow = width < 130;
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
    // One span a reading: a narrow screen drops whole readings, never
    // half a figure.
    first.extend([
        Span::raw(format!(
            "  {}gpu {}",
            if narrow { "" } else { theme.separator() },
            percent(d.gpu_util_percent)
        )),
        Span::raw(format!("  mem act {}", percent(d.memory_activity_percent))),
        Span::raw(
            d.temperature_c
                .map(|t| format!("  {t} °C"))
                .unwrap_or_else(|| "  temp n/a".into()),
        ),
        Span::raw(format!("  {power}")),
    ]);
    out.push(fit(first, width));

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
pub enum Seg {
    Process(usize),
    Model(Part),
    Others,
    Unlisted,
}

/// A device's memory bar: segments in bytes on the scale of the device
/// total, with their legend.
pub struct Bar {
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
    pub fn of(snap: &Snapshot, d: &Device, theme: Theme) -> Bar {
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
    pub fn cells(&self, theme: Theme, width: usize) -> Vec<(char, Option<Seg>)> {
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

// ---------------------------------------------------------------- table

/// A column of the process table. Its [`Column::name`] is what the config
/// file's `columns` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Pid,
    /// The device index(es) the process is on: `0`, or `0,3`.
    Device,
    Name,
    User,
    Container,
    Kind,
    Runtime,
    Vram,
    Spill,
    Paged,
    Gpu,
    Cpu,
    Rss,
    Model,
    Inside,
}

const FULL: [Column; 15] = [
    Column::Pid,
    Column::Device,
    Column::Name,
    Column::User,
    Column::Container,
    Column::Kind,
    Column::Runtime,
    Column::Vram,
    Column::Spill,
    Column::Paged,
    Column::Gpu,
    Column::Cpu,
    Column::Rss,
    Column::Model,
    Column::Inside,
];
const SLIM: [Column; 11] = [
    Column::Pid,
    Column::Device,
    Column::Name,
    Column::User,
    Column::Container,
    Column::Vram,
    Column::Spill,
    Column::Gpu,
    Column::Cpu,
    Column::Model,
    Column::Inside,
];

/// When the columns are wider than the terminal, they are left out in this
/// order (the first first) until the rest fit; the last text column left
/// shrinks rather than go when it can. What is shown is never cut but for
/// text, on the right. PID, GPU and VRAM go last: a row without them says
/// nothing of who holds the card. Documented in README.
pub const DROP_ORDER: [Column; 15] = [
    Column::Paged,
    Column::Rss,
    Column::Kind,
    Column::Runtime,
    Column::User,
    Column::Inside,
    Column::Model,
    Column::Spill,
    Column::Container,
    Column::Cpu,
    Column::Gpu,
    Column::Name,
    Column::Device,
    Column::Vram,
    Column::Pid,
];

/// Text columns narrower than this are left out rather than shown.
const MIN_TEXT: usize = 6;

impl Column {
    pub const ALL: [Column; 15] = FULL;

    /// The config file's name of the column.
    pub fn name(self) -> &'static str {
        match self {
            Column::Pid => "pid",
            Column::Device => "device",
            Column::Name => "name",
            Column::User => "user",
            Column::Container => "container",
            Column::Kind => "kind",
            Column::Runtime => "runtime",
            Column::Vram => "vram",
            Column::Spill => "spill",
            Column::Paged => "paged",
            Column::Gpu => "gpu",
            Column::Cpu => "cpu",
            Column::Rss => "rss",
            Column::Model => "model",
            Column::Inside => "inside",
        }
    }

    pub fn from_name(name: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == name)
    }

    fn title(self) -> &'static str {
        match self {
            Column::Pid => "PID",
            Column::Device => "GPU",
            Column::Name => "NAME",
            Column::User => "USER",
            Column::Container => "CONTAINER",
            Column::Kind => "KIND",
            Column::Runtime => "RUNTIME",
            Column::Vram => "VRAM",
            Column::Spill => "SPILL",
            Column::Paged => "PAGED",
            Column::Gpu => "GPU%",
            Column::Cpu => "CPU%",
            Column::Rss => "RSS",
            Column::Model => "MODEL",
            Column::Inside => "WHAT IS INSIDE",
        }
    }

    /// The width it asks for; figures take more when a value needs it.
    fn width(self) -> usize {
        match self {
            Column::Pid => 8,
            Column::Device => 3,
            Column::Name => 15,
            Column::User => 8,
            Column::Container => 20,
            Column::Kind => 10,
            Column::Runtime => 16,
            // "712.0 MiB"; a wider figure ("1023.9 MiB") widens its column.
            Column::Vram | Column::Spill | Column::Paged | Column::Rss => 9,
            Column::Gpu => 4,
            Column::Cpu => 6,
            Column::Model => 26,
            Column::Inside => 14,
        }
    }

    /// Figures are right-aligned and never cut.
    fn figure(self) -> bool {
        matches!(
            self,
            Column::Vram
                | Column::Spill
                | Column::Paged
                | Column::Gpu
                | Column::Cpu
                | Column::Rss
                | Column::Pid
                | Column::Device
        )
    }

    fn sort_key(self) -> Option<super::app::SortKey> {
        use super::app::SortKey;
        Some(match self {
            Column::Pid => SortKey::Pid,
            Column::Name => SortKey::Name,
            Column::Vram => SortKey::Vram,
            Column::Spill => SortKey::Spill,
            Column::Gpu => SortKey::Gpu,
            Column::Cpu => SortKey::Cpu,
            _ => return None,
        })
    }

    fn value(self, app: &App, p: &Process) -> String {
        let usages: Vec<_> = app.usages(p).collect();
        let on_gpu = !usages.is_empty();
        let figure = |f: fn(&crate::snapshot::GpuUsage) -> Option<u64>| {
            if on_gpu {
                bytes(app.figure(p, f))
            } else {
                "-".into()
            }
        };
        match self {
            Column::Pid => format!("{}{}", describe::pid_label(p), describe::pairing_marker(&usages)),
            Column::Device if !on_gpu => "-".into(),
            Column::Device => {
                let devices: std::collections::BTreeSet<u32> = usages.iter().map(|g| g.device).collect();
                devices.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            }
            Column::Name => opt(p.name.as_deref()).to_string(),
            Column::User => opt(p.user.as_deref()).to_string(),
            Column::Container => p
                .container
                .as_ref()
                .map_or_else(|| "-".into(), describe::container_label),
            Column::Kind => describe::kind_label(p.kind).to_string(),
            Column::Runtime => describe::runtime_label(p),
            Column::Vram => figure(|g| g.vram_bytes),
            Column::Spill => figure(|g| g.spill_bytes),
            Column::Paged => figure(|g| g.paged_bytes),
            Column::Gpu if !on_gpu => "-".into(),
            Column::Gpu => app
                .gpu_percent(p)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "n/a".into()),
            Column::Cpu => p.cpu_percent.map(|c| format!("{c:.1}")).unwrap_or_else(|| "n/a".into()),
            Column::Rss => bytes(p.rss_bytes),
            Column::Model => describe::model_cell(p, app.replay),
            Column::Inside => describe::inside(p, app.replay),
        }
    }
}

/// The columns to draw and their widths in `width` terminal columns
/// (one space between two): the wanted ones, in their order, less those
/// [`DROP_ORDER`] leaves out first until the rest fit. A figure column is as
/// wide as its widest cell (`cells`: a column's cells, title included),
/// never narrower; the last text column left takes what is spare.
pub fn fit_columns(wanted: &[Column], cells: impl Fn(Column) -> usize, width: usize) -> Vec<(Column, usize)> {
    let mut cols: Vec<(Column, usize)> = wanted
        .iter()
        .map(|&c| (c, if c.figure() { c.width().max(cells(c)) } else { c.width() }))
        .collect();
    let needed = |cols: &[(Column, usize)]| -> usize {
        cols.iter().map(|(_, w)| w).sum::<usize>() + cols.len().saturating_sub(1)
    };
    for drop in DROP_ORDER {
        if needed(&cols) <= width {
            break;
        }
        // A text column that can shrink to fit is kept, shrunk.
        let over = needed(&cols) - width;
        let last_text = cols.iter().rposition(|(c, _)| !c.figure());
        if let Some(i) = last_text {
            if cols[i].0 == drop && cols[i].1 >= over + MIN_TEXT {
                cols[i].1 -= over;
                break;
            }
        }
        cols.retain(|(c, _)| *c != drop);
    }
    if needed(&cols) > width {
        // Not even the PID fits: nothing honest to draw.
        return Vec::new();
    }
    let spare = width - needed(&cols);
    if let Some(i) = cols.iter().rposition(|(c, _)| !c.figure()) {
        cols[i].1 += spare;
    }
    cols
}

fn draw_table(
    f: &mut Frame,
    app: &App,
    rows: &[(&Process, String)],
    selected: Option<usize>,
    theme: Theme,
    area: Rect,
) -> Placed {
    // Slim columns leave SPILL out where no source can say it (NVML on
    // Linux): a column of n/a says nothing a glance needs. CONTAINER, a
    // column of "-" on most machines, only when a process is in one.
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
    let wanted: Vec<Column> = wanted
        .into_iter()
        .filter(|c| *c != Column::Container || in_container)
        .collect();
    let body = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(1),
        ..area
    };
    let visible = body.height as usize;
    // Keep the selection in view, moving the window as little as possible.
    let mut offset = app.layout.offset.min(rows.len().saturating_sub(visible));
    if let Some(i) = selected {
        if i < offset {
            offset = i;
        } else if visible > 0 && i >= offset + visible {
            offset = i + 1 - visible;
        }
    }
    let shown = &rows[offset.min(rows.len())..(offset + visible).min(rows.len())];
    // Every visible cell, once: the figures' widths come from them.
    let values: Vec<Vec<String>> = shown
        .iter()
        .map(|(p, branch)| {
            wanted
                .iter()
                .map(|c| match c {
                    Column::Name if app.is_tagged(p) => format!("{branch}+{}", c.value(app, p)),
                    Column::Name => format!("{branch}{}", c.value(app, p)),
                    _ => c.value(app, p),
                })
                .collect()
        })
        .collect();
    let title = |c: Column| {
        let mut t = c.title().to_string();
        if c.sort_key() == Some(app.sort) {
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
    let cut = |s: &str, w: usize| clip_marked(s, w, theme.ellipsis());
    let header = Row::new(cols.iter().map(|(c, w)| {
        let line = Line::from(cut(&title(*c), *w));
        Cell::from(if c.figure() {
            line.alignment(Alignment::Right)
        } else {
            line
        })
    }))
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
                let cells = cols.iter().map(|(c, w)| {
                    let i = wanted.iter().position(|x| x == c).unwrap_or(0);
                    // Figures fit (their column is as wide as the widest);
                    // text is cut on the right, on its escaped form.
                    let v = cut(&row_values[i], *w);
                    let style = match c {
                        Column::Model | Column::Inside if p.models_pending && p.models.is_empty() => theme.warn(),
                        Column::Inside if !p.models.is_empty() => theme.not_measured(),
                        _ if v == "n/a" => theme.dim(),
                        _ => Style::default(),
                    };
                    let line = Line::from(Span::styled(v, style));
                    Cell::from(if c.figure() {
                        line.alignment(Alignment::Right)
                    } else {
                        line
                    })
                });
                let row = Row::new(cells);
                let i = offset + n;
                if Some(i) == selected {
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

// ---------------------------------------------------------------- detail

fn detail_lines(app: &App, snap: &Snapshot, p: &Process, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut head = vec![describe::kind_label(p.kind).to_string()];
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
        head.push(format!("started {t}"));
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
        out.extend(model_lines(m, measured, theme));
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
        Span::raw(escape(opt(p.cmdline.as_deref())).into_owned()),
    ]));
    out
}

fn model_lines(m: &crate::snapshot::Model, measured: Option<u64>, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut what = Vec::new();
    what.extend(m.architecture.clone());
    what.extend(m.file_type.clone());
    what.extend(m.params.map(|p| {
        if p >= 1_000_000_000 {
            format!("{:.1}B params", p as f64 / 1e9)
        } else {
            format!("{:.0}M params", p as f64 / 1e6)
        }
    }));
    what.extend(m.layers.map(|l| format!("{l} layers")));
    out.push(Line::from(vec![
        Span::styled("model ", theme.bold()),
        Span::styled(escape(describe::model_name(m)), theme.bold()),
        Span::raw(escape(format!(
            " {}  {}",
            describe::evidence_marker(m),
            what.join(", ")
        ))),
    ]));
    out.extend(memory_rows(m, measured, theme));
    let evidence: Vec<String> = m
        .evidence
        .iter()
        .map(|e| format!("{e} ({})", describe::evidence_meaning(e)))
        .collect();
    let verdict = if m.confirmed {
        "confirmed: two sources, one of them api or mapped"
    } else {
        "unconfirmed"
    };
    out.push(Line::from(vec![
        Span::styled("  evidence: ", theme.bold()),
        Span::raw(escape(format!(
            "{}; {verdict}",
            if evidence.is_empty() {
                "none".into()
            } else {
                evidence.join(", ")
            }
        ))),
    ]));
    let mut settings = Vec::new();
    let context = m.settings.as_ref().and_then(|s| s.context_total).or(m.context);
    settings.push(format!(
        "context {}{}{}",
        context.map(|c| c.to_string()).unwrap_or_else(|| "n/a".into()),
        crate::view::per_slot(m),
        m.context_train.map(|c| format!(" (trained {c})")).unwrap_or_default()
    ));
    settings.push(match (m.slots_busy, m.slots_total) {
        (Some(b), Some(t)) => format!("slots {b}/{t} busy"),
        (None, Some(t)) => format!("slots n/a/{t} busy"),
        _ => "slots n/a".into(),
    });
    if let Some(s) = &m.settings {
        settings.push(format!("cache K {} V {}", s.cache_type_k, s.cache_type_v));
        if s.kv_unified == Some(true) {
            settings.push("kv unified".into());
        }
        if let Some(n) = s.n_gpu_layers {
            settings.push(format!("GPU layers {n}"));
        }
        if let Some(fa) = &s.flash_attn {
            settings.push(format!("flash attn {fa}"));
        }
        if let Some(u) = s.ubatch {
            settings.push(format!("ubatch {u}"));
        }
        if s.swa_full {
            settings.push("swa-full".into());
        }
    }
    out.push(Line::from(vec![
        Span::styled("  settings: ", theme.bold()),
        Span::raw(escape(settings.join(" · "))),
    ]));
    if let Some(a) = &m.activity {
        out.push(Line::from(vec![
            Span::styled("  now: ", theme.bold()),
            Span::raw(escape(crate::view::activity(a)).into_owned()),
        ]));
    }
    out.push(Line::from(vec![
        Span::styled("  server: ", theme.bold()),
        Span::raw(escape(opt(m.server_url.as_deref())).into_owned()),
        Span::raw(escape(
            m.path.as_deref().map(|p| format!("  file {p}")).unwrap_or_default(),
        )),
    ]));
    out
}

/// Estimate, reported and measured memory of a model, side by side.
fn memory_rows(m: &crate::snapshot::Model, measured: Option<u64>, theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let row = |label: &str, w: Option<u64>, k: Option<u64>, c: Option<u64>, total: Option<u64>, src: String| {
        format!(
            "  {label:<10}{:>11}{:>11}{:>11}{:>11}  {}",
            bytes(w),
            bytes(k),
            bytes(c),
            bytes(total),
            escape(src)
        )
    };
    out.push(Line::from(Span::styled(
        format!(
            "  {:<10}{:>11}{:>11}{:>11}{:>11}  source",
            "", "weights", "KV cache", "compute", "total"
        ),
        theme.header(),
    )));
    if let Some(e) = &m.estimate {
        let kv = match (e.kv_bytes, e.recurrent_state_bytes) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        let total = e.weights_bytes.zip(kv).map(|(a, b)| a + b);
        out.push(Line::from(Span::styled(
            row(
                "estimated",
                e.weights_bytes,
                kv,
                None,
                total,
                "GGUF header + settings".into(),
            ),
            theme.not_measured(),
        )));
    } else {
        out.push(Line::from(Span::styled(
            row("estimated", None, None, None, None, "no estimate".into()),
            theme.dim(),
        )));
    }
    if let Some(r) = &m.reported {
        let total = r.total_bytes.or_else(|| {
            let parts = [r.weights_bytes, r.kv_bytes, r.compute_bytes];
            parts.iter().all(Option::is_some).then(|| parts.iter().flatten().sum())
        });
        out.push(Line::from(Span::styled(
            row(
                "reported",
                r.weights_bytes,
                r.kv_bytes,
                r.compute_bytes,
                total,
                r.source.clone(),
            ),
            theme.not_measured(),
        )));
        if let Some(dev) = r.device_bytes {
            out.push(Line::from(Span::styled(
                format!("  of which in device memory {}", bytes(Some(dev))),
                theme.not_measured(),
            )));
        }
    } else {
        out.push(Line::from(Span::styled(
            row("reported", None, None, None, None, "the runtime said nothing".into()),
            theme.dim(),
        )));
    }
    out.push(Line::from(row(
        "measured",
        None,
        None,
        None,
        measured,
        "the whole process's VRAM (a GPU counter cannot split it)".into(),
    )));
    if let Some(e) = &m.estimate {
        let mut extra = Vec::new();
        extra.extend(e.kv_bytes_per_token.map(|b| format!("KV per token {}", bytes(Some(b)))));
        extra.extend(
            e.kv_bytes_without_window
                .map(|b| format!("window-blind KV {} (upper bound)", bytes(Some(b)))),
        );
        if !extra.is_empty() {
            out.push(Line::from(Span::styled(
                format!("  {}", extra.join(" · ")),
                theme.not_measured(),
            )));
        }
    }
    out
}

// ---------------------------------------------------------------- overlay

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

fn draw_overlay(f: &mut Frame, theme: Theme, area: Rect, scroll: u16) {
    let w = area.width.saturating_sub(4).min(100);
    let rect = popup(f, area, w, area.height.saturating_sub(2));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_set(theme.border())
        .title(Span::styled(format!(" {} ", explain::TITLE), theme.title()))
        .title_bottom(Line::from(" ↑↓ scroll · ? or Esc closes · q quits ").alignment(Alignment::Right));
    let inner_w = w.saturating_sub(2) as usize;
    let text = explain::text_wrapped(inner_w.saturating_sub(1));
    let lines: Vec<Line> = text
        .lines()
        .skip(2) // the title is the block's
        .map(|l| {
            if l.chars().next().is_some_and(|c| c.is_ascii_digit()) || l == "Reading the screen" {
                Line::from(Span::styled(l.to_string(), theme.bold()))
            } else {
                Line::from(l.to_string())
            }
        })
        .collect();
    let max_scroll = (lines.len() as u16).saturating_sub(rect.height.saturating_sub(2));
    let mut all = vec![Line::from(Span::styled(
        format!("on {}", explain::PLATFORM),
        theme.dim(),
    ))];
    all.extend(lines);
    f.render_widget(
        Paragraph::new(all).block(block).scroll((scroll.min(max_scroll), 0)),
        rect,
    );
}

// ---------------------------------------------------------------- signals

/// `k`: which signal, then "send it?", naming every process it goes to.
fn draw_picker(f: &mut Frame, theme: Theme, area: Rect, picker: &super::app::Picker) {
    use crate::procs::signal::Signal;
    let signal = Signal::ALL[picker.choice];
    let named =
        |c: &super::app::Chosen| escape(format!("PID {} {} (user {})", c.target.pid, c.name, c.user)).into_owned();
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
