//! The live view's state and what each key does. Pure: no terminal here, so
//! tests drive it with key events and render it to a test backend.

use super::columns::Column;
use super::feed::{FeedCommand, Update};
use super::history::{self, History};
use super::usage;
use crate::accounting::{gap_limit, Ledger};
use crate::procs::signal::{Signal, Target};
use crate::snapshot::{GpuUsage, Process, Snapshot};
use crate::units::Zone;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;
use std::cmp::Ordering;

/// The columns `s` cycles through, in order. Also `--sort` and the config
/// file's `sort` (`vram`, `gpu-time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SortKey {
    Vram,
    Spill,
    Gpu,
    Cpu,
    /// GPU time since the view started.
    GpuTime,
    /// Energy since the view started.
    Energy,
    Name,
    Pid,
    /// The host of a fleet view (`--remote`, `--prometheus`); `s` passes it
    /// by where no row has one.
    Host,
}

impl SortKey {
    pub const ALL: [SortKey; 9] = [
        SortKey::Vram,
        SortKey::Spill,
        SortKey::Gpu,
        SortKey::Cpu,
        SortKey::GpuTime,
        SortKey::Energy,
        SortKey::Name,
        SortKey::Pid,
        SortKey::Host,
    ];

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Vram => "VRAM",
            SortKey::Spill => "SPILL",
            SortKey::Gpu => "GPU%",
            SortKey::Cpu => "CPU%",
            SortKey::GpuTime => "GPU TIME",
            SortKey::Energy => "ENERGY",
            SortKey::Name => "NAME",
            SortKey::Pid => "PID",
            SortKey::Host => "HOST",
        }
    }

    fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }

    /// The key a column's title sorts by, if it is one.
    pub fn of_column(c: Column) -> Option<SortKey> {
        Some(match c {
            Column::Pid => SortKey::Pid,
            Column::Name => SortKey::Name,
            Column::Vram => SortKey::Vram,
            Column::Spill => SortKey::Spill,
            Column::Gpu => SortKey::Gpu,
            Column::Cpu => SortKey::Cpu,
            Column::GpuTime => SortKey::GpuTime,
            Column::Energy => SortKey::Energy,
            Column::Host => SortKey::Host,
            _ => return None,
        })
    }

    /// Figures sort largest first, names, PIDs and hosts from the start.
    pub fn descending(self) -> bool {
        !matches!(self, SortKey::Name | SortKey::Pid | SortKey::Host)
    }
}

/// Where a key works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyWhen {
    Always,
    /// The live view, not a replay.
    Live,
    Replay,
    /// Where signals may be sent: not `--readonly`, `--remote` or a replay.
    Signals,
}

/// One key of the view: what the footer calls it (an action; empty: not in
/// the footer), what it does, and where. One table for the footer, the `?`
/// list and the man page's KEYS section.
#[derive(Debug, Clone, Copy)]
pub struct KeyHelp {
    pub keys: &'static str,
    pub word: &'static str,
    pub does: &'static str,
    pub when: KeyWhen,
}

impl KeyHelp {
    pub fn applies(&self, replay: bool, readonly: bool) -> bool {
        match self.when {
            KeyWhen::Always => true,
            KeyWhen::Live => !replay,
            KeyWhen::Replay => replay,
            KeyWhen::Signals => !readonly,
        }
    }
}

const fn key(keys: &'static str, word: &'static str, does: &'static str, when: KeyWhen) -> KeyHelp {
    KeyHelp { keys, word, does, when }
}

/// Every key, the footer's order: the most wanted first (a narrow footer
/// keeps those), `?` and `q` last (the footer always shows them).
pub const KEYS: [KeyHelp; 20] = [
    key("[ ]", "step", "step back or forward one sample", KeyWhen::Replay),
    key(
        "{ }",
        "start/end",
        "go to the first or the last sample",
        KeyWhen::Replay,
    ),
    key("< >", "speed", "play slower or faster", KeyWhen::Replay),
    key("space", "play", "play or pause the replay", KeyWhen::Replay),
    key(
        "s",
        "sort",
        "sort by the next column: VRAM, SPILL, GPU%, CPU%, GPU TIME, ENERGY, NAME, PID",
        KeyWhen::Always,
    ),
    key(
        "/",
        "filter",
        "filter by name, command line, user or PID; Enter keeps it, Esc clears it",
        KeyWhen::Always,
    ),
    key("g", "GPU", "show the next GPU alone, then all of them", KeyWhen::Always),
    key(
        "k",
        "signal",
        "send a signal to the selected (or tagged) processes, once confirmed",
        KeyWhen::Signals,
    ),
    key(
        "space",
        "tag",
        "tag or untag the selected process for k",
        KeyWhen::Signals,
    ),
    key(
        "t",
        "tree",
        "show the processes as a tree of parents and children, or as a list",
        KeyWhen::Always,
    ),
    key(
        "u",
        "user",
        "show the next user's processes alone, then every user's",
        KeyWhen::Always,
    ),
    key("S", "reverse", "reverse the sort", KeyWhen::Always),
    key(
        "a",
        "all",
        "show the processes on no GPU too, or hide them",
        KeyWhen::Always,
    ),
    key("m", "columns", "show every column, or the slim set", KeyWhen::Always),
    key("p", "pause", "pause the refresh, or resume it", KeyWhen::Live),
    key("0-9", "", "show that GPU alone", KeyWhen::Always),
    key(
        "Up Down j PgUp PgDn Home End",
        "",
        "move the selection (the mouse wheel and a click too)",
        KeyWhen::Always,
    ),
    key(
        "Esc",
        "",
        "close what is open (the filter, this list); it never quits",
        KeyWhen::Always,
    ),
    key(
        "?",
        "keys",
        "this list of keys; e in it explains what can be known about GPU memory",
        KeyWhen::Always,
    ),
    key("q", "quit", "quit (Ctrl-C too)", KeyWhen::Always),
];

/// What the main loop should do after an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    None,
    Redraw,
    Quit,
    Feed(FeedCommand),
    /// The person confirmed: send this signal to these processes.
    Signal(Signal, Vec<Target>),
}

/// A process the signal picker will signal, with the words the
/// confirmation names it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub target: Target,
    pub name: String,
    pub user: String,
}

/// `k`: the signal picker, then its confirmation.
#[derive(Debug, Clone)]
pub struct Picker {
    pub chosen: Vec<Chosen>,
    /// Index into [`Signal::ALL`].
    pub choice: usize,
    pub confirming: bool,
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
    /// In the overlay: the explain text (`e`) rather than the keys.
    pub explaining: bool,
    pub color: bool,
    /// `--light`: colours for a light background.
    pub light: bool,
    /// `--ascii`: no box drawing or block glyphs.
    pub ascii: bool,
    pub replay: bool,
    /// `--readonly`, replay, `--remote`: `k` sends nothing.
    pub readonly: bool,
    /// `k`: the signal picker.
    pub picker: Option<Picker>,
    /// Space: processes tagged for `k`, by PID and start time (a reused
    /// PID is not tagged).
    pub tagged: std::collections::BTreeSet<Target>,
    /// `t`: children under their parents.
    pub tree: bool,
    /// `u` and `--user`: only this user's processes.
    pub user: Option<String>,
    /// The config file's `columns`, in its order (None: the built-in sets).
    pub columns: Option<Vec<Column>>,
    /// What the last action did (a signal sent, a key refused), shown in
    /// the status line until the next key.
    pub message: Option<String>,
    pub feed_status: String,
    pub layout: Layout,
    /// Where times on screen are told (the snapshot's stay UTC).
    pub zone: Zone,
    /// GPU time and energy since the view started (a replay: since the
    /// last jump), from every snapshot shown (`usage`).
    pub ledger: Ledger,
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
            explaining: false,
            color,
            light: false,
            ascii: false,
            replay,
            readonly: replay,
            picker: None,
            tagged: std::collections::BTreeSet::new(),
            tree: false,
            user: None,
            columns: None,
            message: None,
            feed_status: String::new(),
            layout: Layout::default(),
            zone: Zone::Local,
            ledger: Ledger::new(gap_limit(1.0)),
        }
    }

    /// Counts use from snapshots that come every `interval_s`: a longer
    /// wait between two is a gap, not counted.
    pub fn count_usage_every(&mut self, interval_s: f64) {
        self.ledger = Ledger::new(gap_limit(interval_s));
    }

    /// GPU time and energy on the chosen GPU(s).
    pub fn usage(&self) -> usage::Scope<'_> {
        let devices = self.snapshot.as_ref().map_or(&[][..], |s| &s.devices[..]);
        usage::Scope::new(&self.ledger, devices, self.gpu)
    }

    fn take(&mut self, s: Snapshot) {
        self.history.push(&s);
        self.ledger.observe(&s);
        self.snapshot = Some(s);
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
            Update::Next(s) => self.take(*s),
            Update::Seek(list) => {
                self.history.clear();
                self.ledger = Ledger::new(self.ledger.max_interval_s());
                for s in list {
                    self.take(s);
                }
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
            self.take(s);
        }
    }

    /// The processes shown, filtered and sorted (in tree order with `t`).
    pub fn rows(&self) -> Vec<&Process> {
        self.tree_rows().into_iter().map(|(p, _)| p).collect()
    }

    /// The rows with, under `t`, the branch drawn before each name ("" for
    /// a root, or without `t`). Under `t` a listed row's ancestors come
    /// too, listed or not (see [`App::is_listed`]): a runner under its
    /// `ollama serve`.
    pub fn tree_rows(&self) -> Vec<(&Process, String)> {
        let Some(s) = &self.snapshot else { return Vec::new() };
        let mut rows: Vec<&Process> = s.processes.iter().filter(|p| self.is_listed(p)).collect();
        let scope = self.usage();
        rows.sort_by(|a, b| self.compare(a, b, &scope).then(a.pid.cmp(&b.pid)));
        if self.tree {
            super::tree::tree_order(&rows, &s.processes, self.ascii)
        } else {
            rows.into_iter().map(|p| (p, String::new())).collect()
        }
    }

    /// Whether the process is a row of its own: `u` and `/` let it
    /// through and its [`Place`] is listed. A row that is not is an
    /// ancestor that `t` shows to hold the tree together.
    pub fn is_listed(&self, p: &Process) -> bool {
        self.lets_through(p) && self.place(p).is_listed()
    }

    /// Whether the process has an entry on the chosen device(s).
    pub fn on_gpu(&self, p: &Process) -> bool {
        self.usages(p).next().is_some()
    }

    /// Where a process stands with the chosen device: every process is in
    /// exactly one place, so the title's counts add up to the whole. A
    /// process on several GPUs is on the chosen one if it is on it at all.
    pub fn place(&self, p: &Process) -> Place {
        if self.on_gpu(p) {
            Place::OnChosen
        } else if !p.gpu.is_empty() {
            // On another GPU than the chosen one: counted, not listed (its
            // row would say `-`, "on no GPU", which is not so).
            Place::OnOtherGpu
        } else if self.show_all || !p.models.is_empty() {
            Place::OnNoGpuListed
        } else {
            Place::Hidden
        }
    }

    /// How many processes the user filter and `/` let through are in each
    /// [`Place`].
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        let Some(s) = &self.snapshot else { return c };
        for p in s.processes.iter().filter(|p| self.lets_through(p)) {
            match self.place(p) {
                Place::OnChosen => c.on_chosen += 1,
                Place::OnNoGpuListed => c.on_no_gpu_listed += 1,
                Place::OnOtherGpu => c.on_other_gpus += 1,
                Place::Hidden => c.hidden += 1,
            }
        }
        c
    }

    /// Whether `u` and `/` let the process through.
    fn lets_through(&self, p: &Process) -> bool {
        let needle = self.filter.to_lowercase();
        (self.user.is_none() || p.user == self.user) && (needle.is_empty() || matches_filter(p, &needle))
    }

    fn compare(&self, a: &Process, b: &Process, scope: &usage::Scope) -> Ordering {
        let (ka, kb) = (
            self.sort_value(self.sort, a, scope),
            self.sort_value(self.sort, b, scope),
        );
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
        let scope = self.usage();
        let mut key = self.sort.next();
        while key != self.sort {
            if rows
                .iter()
                .any(|p| !matches!(self.sort_value(key, p, &scope), Value::Unknown))
            {
                return key;
            }
            key = key.next();
        }
        self.sort.next()
    }

    fn sort_value(&self, key: SortKey, p: &Process, scope: &usage::Scope) -> Value {
        let figure = |v: Option<f64>| v.map(Value::Num).unwrap_or(Value::Unknown);
        let text = |t: Option<&str>| t.map(|t| Value::Text(t.to_lowercase())).unwrap_or(Value::Unknown);
        match key {
            SortKey::Vram => figure(self.figure(p, |g| g.vram_bytes).map(|v| v as f64)),
            SortKey::Spill => figure(self.figure(p, |g| g.spill_bytes).map(|v| v as f64)),
            SortKey::Gpu => figure(self.gpu_percent(p).map(f64::from)),
            SortKey::Cpu => figure(p.cpu_percent),
            // Nothing is counted before the first interval: n/a, so `s`
            // passes these by until then.
            SortKey::GpuTime | SortKey::Energy if !scope.counting() => Value::Unknown,
            SortKey::GpuTime => figure(scope.of_process(p).totals.gpu_seconds),
            SortKey::Energy => figure(scope.of_process(p).totals.energy_j),
            SortKey::Name => text(p.name.as_deref()),
            SortKey::Pid => Value::Num(f64::from(p.pid)),
            SortKey::Host => text(p.host.as_deref()),
        }
    }

    /// The process's entries on the chosen device(s).
    /// A GPU in MIG mode brings its instances' entries.
    pub fn usages<'a>(&'a self, p: &'a Process) -> impl Iterator<Item = &'a GpuUsage> + 'a {
        let gpu = self.gpu;
        let devices = self.snapshot.as_ref().map_or(&[][..], |s| &s.devices[..]);
        p.gpu
            .iter()
            .filter(move |g| gpu.is_none_or(|d| crate::snapshot::on_or_inside(devices, g.device, d)))
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
        self.message = None;
        if self.picker.is_some() {
            return self.on_picker_key(key);
        }
        if let Some(scroll) = self.overlay {
            match key.code {
                KeyCode::Char('q') => return Action::Quit,
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::Enter | KeyCode::F(1) => self.overlay = None,
                KeyCode::Char('e') => {
                    self.explaining = !self.explaining;
                    self.overlay = Some(0);
                }
                KeyCode::Down | KeyCode::Char('j') => self.overlay = Some(scroll.saturating_add(1)),
                KeyCode::Up => self.overlay = Some(scroll.saturating_sub(1)),
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
            // Esc closes what is open, and never quits: someone leaving
            // an overlay with one Esc too many keeps the view.
            KeyCode::Esc => self.filter.clear(),
            KeyCode::Char('s') => {
                self.sort = self.next_sort();
                self.reversed = false;
            }
            KeyCode::Char('S') => self.reversed = !self.reversed,
            KeyCode::Char('a') => {
                self.show_all = !self.show_all;
                return Action::Feed(FeedCommand::ShowAll(self.show_all));
            }
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
            KeyCode::Char(c @ '0'..='9') => self.pick_gpu(c as u32 - '0' as u32),
            KeyCode::Char('k') => self.open_picker(),
            KeyCode::Char(' ') if !self.replay => self.toggle_tag(),
            KeyCode::Char('t') => self.tree = !self.tree,
            KeyCode::Char('u') => self.next_user(),
            KeyCode::Char('?') | KeyCode::F(1) => {
                self.overlay = Some(0);
                self.explaining = false;
            }
            KeyCode::Up => self.move_selection(-1),
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

    /// How the chosen device is named (`1`, `0/1`), if one is.
    pub fn gpu_label(&self) -> Option<String> {
        let devices = self.snapshot.as_ref().map_or(&[][..], |s| &s.devices[..]);
        self.gpu.map(|g| crate::snapshot::device_label(devices, g))
    }

    /// The keys of the signal picker and its confirmation.
    fn on_picker_key(&mut self, key: KeyEvent) -> Action {
        let Some(picker) = &mut self.picker else {
            return Action::None;
        };
        let last = Signal::ALL.len() - 1;
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc | KeyCode::Char('n') => self.picker = None,
            KeyCode::Enter | KeyCode::Char('y') if picker.confirming => {
                let signal = Signal::ALL[picker.choice];
                let targets = picker.chosen.iter().map(|c| c.target.clone()).collect();
                self.picker = None;
                self.tagged.clear();
                return Action::Signal(signal, targets);
            }
            _ if picker.confirming => return Action::None,
            KeyCode::Enter => picker.confirming = true,
            KeyCode::Up => picker.choice = picker.choice.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => picker.choice = (picker.choice + 1).min(last),
            KeyCode::Char(c @ '1'..='6') => picker.choice = (c as usize - '1' as usize).min(last),
            _ => return Action::None,
        }
        Action::Redraw
    }

    /// Sends what the picker confirmed, and says in the status line what
    /// became of it.
    pub fn send(&mut self, signal: Signal, targets: &[Target]) {
        let names: std::collections::HashMap<u32, &str> = self
            .snapshot
            .iter()
            .flat_map(|s| &s.processes)
            .map(|p| (p.pid, crate::view::opt(p.name.as_deref())))
            .collect();
        let said: Vec<String> = targets
            .iter()
            .map(|t| {
                let outcome = crate::procs::signal::send(t, signal, std::path::Path::new("/proc"));
                let name = names.get(&t.pid).copied().unwrap_or("");
                format!("{} {name}: {}", t.pid, outcome.describe())
            })
            .collect();
        self.message = Some(format!("{} to {}", signal.name(), said.join("; ")));
    }

    /// `k`: the tagged processes shown, else the selected one.
    fn open_picker(&mut self) {
        if self.readonly {
            self.message = Some(if self.replay {
                "a recording: no signal is sent from a replay".into()
            } else {
                "read-only view (--readonly, the config's readonly, or --remote): no signal is sent".into()
            });
            return;
        }
        let rows = self.rows();
        let mut chosen: Vec<&Process> = rows.iter().copied().filter(|p| self.is_tagged(p)).collect();
        if chosen.is_empty() {
            chosen.extend(self.selected(&rows).map(|(_, p)| p));
        }
        if chosen.is_empty() {
            self.message = Some("no process selected".into());
            return;
        }
        let chosen = chosen
            .into_iter()
            .map(|p| Chosen {
                target: target(p),
                name: crate::view::opt(p.name.as_deref()).to_string(),
                user: crate::view::opt(p.user.as_deref()).to_string(),
            })
            .collect();
        self.picker = Some(Picker {
            chosen,
            choice: 0,
            confirming: false,
        });
    }

    /// Space: tags the selected process (or untags it) and moves on, as
    /// htop does.
    fn toggle_tag(&mut self) {
        let rows = self.rows();
        let Some((i, p)) = self.selected(&rows) else { return };
        let tag = target(p);
        if !self.tagged.remove(&tag) {
            self.tagged.insert(tag);
        }
        self.select(i + 1);
    }

    /// Whether space tagged this process (this one: PID and start time).
    pub fn is_tagged(&self, p: &Process) -> bool {
        !self.tagged.is_empty() && self.tagged.contains(&target(p))
    }

    /// `u`: every user, then each user of the snapshot in turn.
    fn next_user(&mut self) {
        let Some(s) = &self.snapshot else { return };
        let users: std::collections::BTreeSet<&str> = s.processes.iter().filter_map(|p| p.user.as_deref()).collect();
        let next = match &self.user {
            None => users.first(),
            Some(u) => users
                .range::<str, _>((std::ops::Bound::Excluded(u.as_str()), std::ops::Bound::Unbounded))
                .next(),
        };
        self.user = next.map(|u| u.to_string());
        self.selected_pid = None;
        self.selected_index = 0;
    }

    /// A digit: that device alone; the same digit again, all devices.
    fn pick_gpu(&mut self, index: u32) {
        let Some(s) = &self.snapshot else { return };
        if self.gpu == Some(index) {
            self.gpu = None;
        } else if s.devices.iter().any(|d| d.index == index) {
            self.gpu = Some(index);
        } else {
            self.message = Some(format!("no GPU {index} (g cycles through those there are)"));
        }
    }

    /// All devices, then each device in turn (a MIG instance after its GPU).
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

/// Where a process stands with the chosen device(s), for the rows and
/// the title's counts (see [`App::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the chosen GPU (or, with none chosen, on any).
    OnChosen,
    /// On no GPU, listed all the same (`a`, or it runs a model).
    OnNoGpuListed,
    /// On GPUs, none of them the chosen one.
    OnOtherGpu,
    /// On no GPU, left out until `a`.
    Hidden,
}

impl Place {
    pub fn is_listed(self) -> bool {
        matches!(self, Place::OnChosen | Place::OnNoGpuListed)
    }
}

/// The processes in each [`Place`]; together, every process `u` and `/`
/// let through, each once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub on_chosen: usize,
    pub on_no_gpu_listed: usize,
    pub on_other_gpus: usize,
    pub hidden: usize,
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

/// What names a process for a signal: its PID and start time.
fn target(p: &Process) -> Target {
    Target {
        pid: p.pid,
        start_time: p.start_time.clone(),
    }
}

/// `/`: the needle (lowercase) in the name, command line, user, kind,
/// runtimes, models or a fleet's host, or the PID whole.
fn matches_filter(p: &Process, needle: &str) -> bool {
    let hit = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(needle));
    hit(p.name.as_deref())
        || hit(p.host.as_deref())
        || hit(p.cmdline.as_deref())
        || hit(p.user.as_deref())
        || hit(Some(p.kind.label()))
        || p.runtimes.iter().any(|r| hit(Some(r)))
        || p.pid.to_string() == needle
        || p.models
            .iter()
            .any(|m| hit(m.name.as_deref()) || hit(m.path.as_deref()) || hit(m.architecture.as_deref()))
}
