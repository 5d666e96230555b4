//! The live view's state and what each key does. Pure: no terminal here, so
//! tests drive it with key events and render it to a test backend.

use super::feed::{FeedCommand, Update};
use super::history::{self, History};
use crate::snapshot::{GpuUsage, Process, Snapshot};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;
use std::cmp::Ordering;

/// The columns `s` cycles through, in order. Also `--sort` and the config
/// file's `sort` (lowercase names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    Vram,
    Spill,
    Gpu,
    Cpu,
    Name,
    Pid,
}

impl SortKey {
    pub const ALL: [SortKey; 6] = [
        SortKey::Vram,
        SortKey::Spill,
        SortKey::Gpu,
        SortKey::Cpu,
        SortKey::Name,
        SortKey::Pid,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Vram => "VRAM",
            SortKey::Spill => "SPILL",
            SortKey::Gpu => "GPU%",
            SortKey::Cpu => "CPU%",
            SortKey::Name => "NAME",
            SortKey::Pid => "PID",
        }
    }

    fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }

    /// Figures sort largest first, names and PIDs from the start.
    fn descending(self) -> bool {
        !matches!(self, SortKey::Name | SortKey::Pid)
    }
}

/// What the main loop should do after an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    Redraw,
    Quit,
    Feed(FeedCommand),
}

/// Where the last frame put things, for the mouse and for paging.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    /// The table's rows (without its header).
    pub table_body: Rect,
    /// The first row shown.
    pub offset: usize,
}

pub struct App {
    pub snapshot: Option<Snapshot>,
    pub history: History,
    pub sort: SortKey,
    /// `S` flips the column's natural order.
    pub reversed: bool,
    /// `a`: every process in the snapshot, not only those on a GPU.
    pub show_all: bool,
    /// `m`: full columns; None until the first frame picks by width.
    pub full_columns: Option<bool>,
    /// `p` (live): the screen holds still; samples keep coming.
    pub paused: bool,
    /// Samples that arrived while paused, shown on resume.
    held: Vec<Snapshot>,
    pub filter: String,
    /// `/` was pressed: keys type into the filter.
    pub typing_filter: bool,
    /// The selected process follows its PID across refreshes and sorts.
    pub selected_pid: Option<u32>,
    pub selected_index: usize,
    /// `g`: one device, or all.
    pub gpu: Option<u32>,
    /// `?`: the overlay, with its scroll offset.
    pub overlay: Option<u16>,
    pub color: bool,
    /// `--light`: colours for a light background.
    pub light: bool,
    /// `--ascii`: no box drawing or block glyphs.
    pub ascii: bool,
    pub replay: bool,
    pub feed_status: String,
    pub layout: Layout,
}

impl App {
    pub fn new(color: bool, replay: bool) -> App {
        App {
            snapshot: None,
            history: History::default(),
            sort: SortKey::Vram,
            reversed: false,
            show_all: false,
            full_columns: None,
            paused: false,
            held: Vec::new(),
            filter: String::new(),
            typing_filter: false,
            selected_pid: None,
            selected_index: 0,
            gpu: None,
            overlay: None,
            color,
            light: false,
            ascii: false,
            replay,
            feed_status: String::new(),
            layout: Layout::default(),
        }
    }

    /// Takes what the feed sends. While paused (live), samples are held and
    /// shown together on resume, so the sparklines have no hole.
    pub fn apply(&mut self, update: Update) {
        match update {
            Update::Next(s) if self.paused && !self.replay => {
                self.held.push(*s);
                if self.held.len() > history::CAPACITY {
                    self.held.remove(0);
                }
            }
            Update::Next(s) => {
                self.history.push(&s);
                self.snapshot = Some(*s);
            }
            Update::Seek(list) => {
                self.history.clear();
                for s in &list {
                    self.history.push(s);
                }
                self.snapshot = list.into_iter().last();
            }
        }
    }

    /// Shows a snapshot (tests).
    #[cfg(test)]
    pub fn show(&mut self, s: Snapshot) {
        self.apply(Update::Next(Box::new(s)));
    }

    fn resume(&mut self) {
        self.paused = false;
        for s in std::mem::take(&mut self.held) {
            self.history.push(&s);
            self.snapshot = Some(s);
        }
    }

    /// The processes shown, filtered and sorted.
    pub fn rows(&self) -> Vec<&Process> {
        let Some(s) = &self.snapshot else { return Vec::new() };
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&Process> = s
            .processes
            .iter()
            .filter(|p| self.show_all || self.on_gpu(p) || !p.models.is_empty())
            .filter(|p| needle.is_empty() || matches_filter(p, &needle))
            .collect();
        rows.sort_by(|a, b| self.compare(a, b).then(a.pid.cmp(&b.pid)));
        rows
    }

    /// Whether the process has an entry on the chosen device(s).
    pub fn on_gpu(&self, p: &Process) -> bool {
        p.gpu.iter().any(|g| self.gpu.is_none_or(|d| g.device == d))
    }

    /// Processes the top view leaves out (shown with `a`).
    pub fn hidden_count(&self) -> usize {
        let Some(s) = &self.snapshot else { return 0 };
        s.processes
            .iter()
            .filter(|p| !self.on_gpu(p) && p.models.is_empty())
            .count()
    }

    fn compare(&self, a: &Process, b: &Process) -> Ordering {
        let (ka, kb) = (self.sort_value(self.sort, a), self.sort_value(self.sort, b));
        // Unknown sorts last in either direction: n/a is not small.
        let ord = match (&ka, &kb) {
            (Value::Unknown, Value::Unknown) => return Ordering::Equal,
            (Value::Unknown, _) => return Ordering::Greater,
            (_, Value::Unknown) => return Ordering::Less,
            (Value::Num(x), Value::Num(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (Value::Text(x), Value::Text(y)) => x.cmp(y),
            _ => Ordering::Equal,
        };
        let ord = if self.sort.descending() { ord.reverse() } else { ord };
        if self.reversed {
            ord.reverse()
        } else {
            ord
        }
    }

    /// The column `s` moves to: the next one some row shown has a value in
    /// (a column hidden, or n/a on every row, orders nothing).
    fn next_sort(&self) -> SortKey {
        let rows = self.rows();
        let mut key = self.sort.next();
        while key != self.sort {
            if rows.iter().any(|p| !matches!(self.sort_value(key, p), Value::Unknown)) {
                return key;
            }
            key = key.next();
        }
        self.sort.next()
    }

    fn sort_value(&self, key: SortKey, p: &Process) -> Value {
        let figure = |v: Option<f64>| v.map(Value::Num).unwrap_or(Value::Unknown);
        match key {
            SortKey::Vram => figure(self.figure(p, |g| g.vram_bytes).map(|v| v as f64)),
            SortKey::Spill => figure(self.figure(p, |g| g.spill_bytes).map(|v| v as f64)),
            SortKey::Gpu => figure(self.gpu_percent(p).map(f64::from)),
            SortKey::Cpu => figure(p.cpu_percent),
            SortKey::Name => p
                .name
                .as_ref()
                .map(|n| Value::Text(n.to_lowercase()))
                .unwrap_or(Value::Unknown),
            SortKey::Pid => Value::Num(f64::from(p.pid)),
        }
    }

    /// The process's entries on the chosen device(s).
    pub fn usages<'a>(&self, p: &'a Process) -> impl Iterator<Item = &'a GpuUsage> + 'a {
        let gpu = self.gpu;
        p.gpu.iter().filter(move |g| gpu.is_none_or(|d| g.device == d))
    }

    /// A figure of the process on the chosen device(s): per device the
    /// largest known one (two sources measuring one device are not added),
    /// summed over devices; None when none is known (unknown is not 0).
    pub fn figure(&self, p: &Process, field: impl Fn(&GpuUsage) -> Option<u64>) -> Option<u64> {
        let mut per_device: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
        for g in self.usages(p) {
            if let Some(v) = field(g) {
                let e = per_device.entry(g.device).or_insert(0);
                *e = (*e).max(v);
            }
        }
        (!per_device.is_empty()).then(|| per_device.values().sum())
    }

    /// The busiest engine figure (SM for NVML) on the chosen device(s).
    pub fn gpu_percent(&self, p: &Process) -> Option<u32> {
        self.usages(p)
            .filter_map(|g| {
                g.engines
                    .get("sm")
                    .copied()
                    .or_else(|| g.engines.values().copied().max())
            })
            .max()
    }

    /// The selected process, re-found by PID in the current rows.
    pub fn selected<'a>(&self, rows: &[&'a Process]) -> Option<(usize, &'a Process)> {
        if rows.is_empty() {
            return None;
        }
        let i = self
            .selected_pid
            .and_then(|pid| rows.iter().position(|p| p.pid == pid))
            .unwrap_or(self.selected_index.min(rows.len() - 1));
        Some((i, rows[i]))
    }

    fn select(&mut self, index: usize) {
        let rows = self.rows();
        if rows.is_empty() {
            return;
        }
        let i = index.min(rows.len() - 1);
        let pid = rows[i].pid;
        self.selected_index = i;
        self.selected_pid = Some(pid);
    }

    fn move_selection(&mut self, delta: isize) {
        let rows = self.rows();
        let current = self.selected(&rows).map(|(i, _)| i).unwrap_or(0);
        let next = (current as isize + delta).max(0) as usize;
        self.select(next);
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) && matches!(key.code, KeyCode::Char('c' | 'C')) {
            return Action::Quit;
        }
        if self.typing_filter {
            match key.code {
                KeyCode::Enter => self.typing_filter = false,
                KeyCode::Esc => {
                    self.typing_filter = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => return Action::None,
            }
            self.selected_pid = None;
            self.selected_index = 0;
            return Action::Redraw;
        }
        if let Some(scroll) = self.overlay {
            match key.code {
                KeyCode::Char('q') => return Action::Quit,
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::Enter => self.overlay = None,
                KeyCode::Down | KeyCode::Char('j') => self.overlay = Some(scroll.saturating_add(1)),
                KeyCode::Up | KeyCode::Char('k') => self.overlay = Some(scroll.saturating_sub(1)),
                KeyCode::PageDown | KeyCode::Char(' ') => self.overlay = Some(scroll.saturating_add(10)),
                KeyCode::PageUp => self.overlay = Some(scroll.saturating_sub(10)),
                KeyCode::Home => self.overlay = Some(0),
                _ => return Action::None,
            }
            return Action::Redraw;
        }
        let page = self.layout.table_body.height.max(1) as isize;
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc if !self.filter.is_empty() => self.filter.clear(),
            KeyCode::Esc => return Action::Quit,
            KeyCode::Char('s') => {
                self.sort = self.next_sort();
                self.reversed = false;
            }
            KeyCode::Char('S') => self.reversed = !self.reversed,
            KeyCode::Char('a') => self.show_all = !self.show_all,
            KeyCode::Char('m') => self.full_columns = Some(!self.full_columns.unwrap_or(false)),
            KeyCode::Char('p') if self.replay => return Action::Feed(FeedCommand::TogglePlay),
            KeyCode::Char('p') => {
                if self.paused {
                    self.resume();
                } else {
                    self.paused = true;
                }
            }
            KeyCode::Char('/') => self.typing_filter = true,
            KeyCode::Char('g') => self.next_gpu(),
            KeyCode::Char('?') | KeyCode::F(1) => self.overlay = Some(0),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-page),
            KeyCode::PageDown => self.move_selection(page),
            KeyCode::Home => self.select(0),
            KeyCode::End => self.select(usize::MAX),
            KeyCode::Char('[') if self.replay => return Action::Feed(FeedCommand::StepBack),
            KeyCode::Char(']') if self.replay => return Action::Feed(FeedCommand::StepForward),
            KeyCode::Char('{') if self.replay => return Action::Feed(FeedCommand::Start),
            KeyCode::Char('}') if self.replay => return Action::Feed(FeedCommand::End),
            KeyCode::Char('<') if self.replay => return Action::Feed(FeedCommand::Slower),
            KeyCode::Char('>') if self.replay => return Action::Feed(FeedCommand::Faster),
            KeyCode::Char(' ') if self.replay => return Action::Feed(FeedCommand::TogglePlay),
            _ => return Action::None,
        }
        Action::Redraw
    }

    pub fn on_mouse(&mut self, m: MouseEvent) -> Action {
        if self.overlay.is_some() {
            return match m.kind {
                MouseEventKind::ScrollDown => self.on_key(KeyEvent::from(KeyCode::Down)),
                MouseEventKind::ScrollUp => self.on_key(KeyEvent::from(KeyCode::Up)),
                _ => Action::None,
            };
        }
        match m.kind {
            MouseEventKind::ScrollDown => self.move_selection(1),
            MouseEventKind::ScrollUp => self.move_selection(-1),
            MouseEventKind::Down(MouseButton::Left) => {
                let body = self.layout.table_body;
                let inside = m.column >= body.x
                    && m.column < body.x + body.width
                    && m.row >= body.y
                    && m.row < body.y + body.height;
                if !inside {
                    return Action::None;
                }
                let index = self.layout.offset + usize::from(m.row - body.y);
                if index >= self.rows().len() {
                    return Action::None;
                }
                self.select(index);
            }
            _ => return Action::None,
        }
        Action::Redraw
    }

    /// All devices, then each device in turn.
    fn next_gpu(&mut self) {
        let Some(s) = &self.snapshot else { return };
        let indices: Vec<u32> = s.devices.iter().map(|d| d.index).collect();
        self.gpu = match self.gpu {
            None => indices.first().copied(),
            Some(current) => indices
                .iter()
                .position(|i| *i == current)
                .and_then(|p| indices.get(p + 1).copied()),
        };
    }

    /// Whether model discovery has not yet looked at some process.
    pub fn discovering(&self) -> bool {
        self.snapshot
            .as_ref()
            .is_some_and(|s| s.processes.iter().any(|p| p.models_pending))
    }
}

enum Value {
    Num(f64),
    Text(String),
    Unknown,
}

/// The sum of the known values; None when none is known (unknown is not 0).
pub fn sum(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.flatten().fold(None, |acc, v| Some(acc.unwrap_or(0) + v))
}

fn matches_filter(p: &Process, needle: &str) -> bool {
    let hit = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(needle));
    hit(p.name.as_deref())
        || hit(p.cmdline.as_deref())
        || p.pid.to_string() == needle
        || p.models
            .iter()
            .any(|m| hit(m.name.as_deref()) || hit(m.path.as_deref()))
}
