//! The look: colours for a dark or light background or none (`--light`,
//! `--no-color`, NO_COLOR), block and box glyphs or their ASCII stand-ins
//! (`--ascii`), and the styles every part of the screen is drawn in.

use super::app::App;
use super::history;
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;
use ratatui::Frame;

/// Processes that get a segment of their own in a device's bar.
pub(super) const BAR_PROCESSES: usize = 4;
const PROCESS_GLYPHS: [char; BAR_PROCESSES] = ['█', '▓', '▒', '░'];
/// `--ascii`: for terminals and fonts without block elements.
const ASCII_PROCESS_GLYPHS: [char; BAR_PROCESSES] = ['#', '%', '=', '+'];
pub(super) const PROCESS_COLORS: [Color; BAR_PROCESSES] = [Color::Cyan, Color::Magenta, Color::Yellow, Color::Blue];
pub(super) const OTHERS_GLYPH: char = ':';
pub(super) const UNLISTED_GLYPH: char = '-';
pub(super) const FREE_GLYPH: char = '·';

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
    pub(super) fn of(app: &App) -> Theme {
        Theme {
            color: app.color,
            light: app.light,
            ascii: app.ascii,
        }
    }

    pub(super) fn ascii(self) -> bool {
        self.ascii
    }

    pub(super) fn fg(self, c: Color) -> Style {
        match (self.color, self.light) {
            (false, _) => Style::default(),
            (true, false) => Style::default().fg(c),
            (true, true) => Style::default().fg(on_light(c)),
        }
    }
    pub(super) fn process_glyph(self, i: usize) -> char {
        if self.ascii {
            ASCII_PROCESS_GLYPHS[i]
        } else {
            PROCESS_GLYPHS[i]
        }
    }
    pub(super) fn bars(self) -> &'static [char; 8] {
        if self.ascii {
            &history::ASCII_BARS
        } else {
            &history::BARS
        }
    }
    pub(super) fn border(self) -> border::Set {
        if self.ascii {
            ASCII_BORDER
        } else {
            border::PLAIN
        }
    }
    /// The separator between a device's memory and its activity figures.
    pub(super) fn separator(self) -> &'static str {
        if self.ascii {
            "| "
        } else {
            "│ "
        }
    }
    /// A temperature: `71 °C`, or `71 C` under `--ascii` (as `--once
    /// --ascii` prints it; the cell-by-cell fold would leave `71  C`).
    pub(super) fn celsius(self, t: u32) -> String {
        if self.ascii {
            format!("{t} C")
        } else {
            format!("{t} °C")
        }
    }
    /// `s` as this look draws it: in ASCII under `--ascii`.
    pub(super) fn text(self, s: String) -> String {
        crate::view::ascii::fold_when(self.ascii, s)
    }
    /// What a cut text ends with.
    pub(super) fn ellipsis(self) -> char {
        if self.ascii {
            '~'
        } else {
            '…'
        }
    }
    pub(super) fn cursor(self) -> char {
        if self.ascii {
            '_'
        } else {
            '▏'
        }
    }
    pub(super) fn bold(self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    pub(super) fn title(self) -> Style {
        self.fg(Color::LightCyan).add_modifier(Modifier::BOLD)
    }
    pub(super) fn header(self) -> Style {
        self.bold().add_modifier(Modifier::UNDERLINED)
    }
    pub(super) fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    /// Rows tagged with space for `k`.
    pub(super) fn tagged(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub(super) fn dim(self) -> Style {
        self.fg(Color::DarkGray)
    }
    pub(super) fn warn(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    /// Reported and estimated figures: never mistaken for measured ones.
    pub(super) fn not_measured(self) -> Style {
        self.fg(Color::LightGreen).add_modifier(Modifier::ITALIC)
    }
    pub(super) fn key(self) -> Style {
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

/// `--ascii`: what the screen holds that is not ASCII yet (a separator, an
/// arrow, a name), cell by cell; a cell's stand-in never takes more columns
/// than it has, and one that is empty is drawn blank.
pub(super) fn fold_to_ascii(f: &mut Frame) {
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
