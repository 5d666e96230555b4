//! The process table's columns: their names (the config file's
//! `columns`), titles and widths, the slim and full sets, and how they are
//! fitted to a terminal's width. What a cell says is `describe::cell`'s;
//! drawing them is `table`'s.

/// From this width on the view starts with full columns.
pub const FULL_WIDTH: u16 = 170;

/// A column of the process table. Its [`Column::name`] is what the config
/// file's `columns` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// In a fleet view: the host the process runs on.
    Host,
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
    /// GPU time since the view started (`usage`).
    GpuTime,
    /// Energy attributed since the view started (`usage`).
    Energy,
    /// The command line (redacted), cut on the right.
    Command,
}

pub const FULL: [Column; 19] = [
    Column::Host,
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
    Column::GpuTime,
    Column::Energy,
    Column::Model,
    Column::Inside,
    Column::Command,
];
pub const SLIM: [Column; 13] = [
    Column::Host,
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
    Column::Command,
];

/// When the columns are wider than the terminal, they are left out in this
/// order (the first first) until the rest fit; the last text column left
/// shrinks rather than go when it can. What is shown is never cut but for
/// text, on the right. PID, GPU and VRAM go last: a row without them says
/// nothing of who holds the card. Documented in README.
pub const DROP_ORDER: [Column; 18] = [
    Column::Paged,
    Column::Rss,
    Column::Kind,
    Column::Runtime,
    Column::User,
    Column::GpuTime,
    Column::Energy,
    Column::Inside,
    Column::Model,
    Column::Spill,
    Column::Container,
    Column::Cpu,
    Column::Gpu,
    Column::Name,
    Column::Host,
    Column::Device,
    Column::Vram,
    Column::Pid,
];

/// Text columns narrower than this are left out rather than shown.
const MIN_TEXT: usize = 6;
/// COMMAND narrower than this says too little to be worth a column
/// (`python3 trai…`).
pub const MIN_COMMAND: usize = 12;

impl Column {
    pub const ALL: [Column; 19] = FULL;

    /// The config file's name of the column.
    pub fn name(self) -> &'static str {
        match self {
            Column::Host => "host",
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
            Column::GpuTime => "gpu-time",
            Column::Energy => "energy",
            Column::Command => "command",
        }
    }

    pub fn from_name(name: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn title(self) -> &'static str {
        match self {
            Column::Host => "HOST",
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
            Column::GpuTime => "GPU TIME",
            Column::Energy => "ENERGY",
            Column::Command => "COMMAND",
        }
    }

    /// The width it asks for; figures take more when a value needs it.
    pub fn width(self) -> usize {
        match self {
            Column::Host => 14,
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
            // "1h 2m 3s", "12.3 kJ".
            Column::GpuTime | Column::Energy => 8,
            // It takes what the others leave (`fit_columns`).
            Column::Command => MIN_COMMAND,
        }
    }

    /// Figures are right-aligned and never cut.
    pub fn figure(self) -> bool {
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
                | Column::GpuTime
                | Column::Energy
        )
    }
}

/// The columns to draw and their widths in `width` terminal columns
/// (one space between two): the wanted ones, in their order, less those
/// [`DROP_ORDER`] leaves out first until the rest fit. A figure column is as
/// wide as its widest cell (`cells`: a column's cells, title included),
/// never narrower; the last text column left takes what is spare. COMMAND
/// takes only what the others leave: what the last text column has beyond
/// its widest cell, when that is at least [`MIN_COMMAND`].
pub fn fit_columns(wanted: &[Column], cells: impl Fn(Column) -> usize, width: usize) -> Vec<(Column, usize)> {
    let others: Vec<Column> = wanted.iter().copied().filter(|c| *c != Column::Command).collect();
    let mut cols = fit_dropping(&others, &cells, width);
    let Some(at) = wanted.iter().position(|c| *c == Column::Command) else {
        return cols;
    };
    if cols.is_empty() {
        return cols;
    }
    let used = cols.iter().map(|(_, w)| w).sum::<usize>() + cols.len() - 1;
    let room = match cols.iter().rposition(|(c, _)| !c.figure()) {
        Some(i) => {
            let room = cols[i].1.saturating_sub(cells(cols[i].0).max(MIN_TEXT) + 1);
            if room >= MIN_COMMAND {
                cols[i].1 -= room + 1;
            }
            room
        }
        None => width.saturating_sub(used + 1),
    };
    if room >= MIN_COMMAND {
        // In its place among the kept columns.
        let before = wanted[..at]
            .iter()
            .filter(|c| cols.iter().any(|(k, _)| k == *c))
            .count();
        cols.insert(before, (Column::Command, room));
    }
    cols
}

/// [`fit_columns`] for every column but COMMAND.
fn fit_dropping(wanted: &[Column], cells: &impl Fn(Column) -> usize, width: usize) -> Vec<(Column, usize)> {
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
