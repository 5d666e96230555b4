//! What a frame of the live view holds that a terminal would obey.
//!
//! Every string from outside (a process's name, a runtime's answer, a
//! remote host's snapshot, a recording) is escaped by `view::safe_text`
//! where the renderers write it, so it is shown as `\e]0;…` at its true
//! width. Two things here keep that promise honest:
//!
//! - [`scrub`], the last guard: run on every frame just before it is sent
//!   to the terminal (`term.rs`), it drops from each cell the characters a
//!   terminal obeys (ESC, C1, BEL, CR, bidi overrides ...). ratatui writes a
//!   `Span`'s graphemes into cells as they are (only `Buffer::set_stringn`
//!   filters controls), so a renderer that forgets to escape would
//!   otherwise hand an OSC to the terminal.
//! - [`first_foreign_control`] and [`every_view`], the check the tests and
//!   the `live_view` fuzz target run on the renderers themselves, before
//!   the guard: a text that reaches a cell unescaped is a bug even when the
//!   guard hides it (its width was counted wrong, and what it said is lost).

use super::app::App;
use super::render;
use crate::snapshot::Snapshot;
use crate::view::safe_text;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::Terminal;
use serde_json::Value;

/// The first cell, row by row, whose symbol holds a character a terminal
/// would obey: its column, row and symbol.
pub fn first_foreign_control(buf: &Buffer) -> Option<(u16, u16, String)> {
    let width = buf.area.width.max(1);
    buf.content.iter().enumerate().find_map(|(i, cell)| {
        let symbol = cell.symbol();
        symbol.chars().any(safe_text::hidden).then(|| {
            let (x, y) = (i as u16 % width, i as u16 / width);
            (buf.area.x + x, buf.area.y + y, symbol.to_string())
        })
    })
}

/// Drops from every cell the characters a terminal would obey (a cell left
/// empty is a blank); returns how many cells it changed.
pub fn scrub(buf: &mut Buffer) -> usize {
    let mut changed = 0;
    for cell in &mut buf.content {
        if cell.symbol().chars().any(safe_text::hidden) {
            let kept: String = cell.symbol().chars().filter(|c| !safe_text::hidden(*c)).collect();
            cell.set_symbol(if kept.is_empty() { " " } else { &kept });
            changed += 1;
        }
    }
    changed
}

/// The keys that reach each view, each script pressed from the view's
/// first state: the top view, every process (`a`), the tree (`t`), full
/// columns (`m`), a GPU alone (`0`, `g`), the next user (`u`), the keys
/// (`?`, with every source's line) and the explain text (`e` in it), and
/// the signal picker with its confirmation (`k`, Enter).
const VIEWS: [&[KeyCode]; 11] = [
    &[],
    &[KeyCode::Char('a')],
    &[KeyCode::Char('a'), KeyCode::Char('t')],
    &[KeyCode::Char('a'), KeyCode::Char('m')],
    &[KeyCode::Char('0')],
    &[KeyCode::Char('g'), KeyCode::Char('g')],
    &[KeyCode::Char('u')],
    &[KeyCode::Char('?')],
    &[KeyCode::Char('?'), KeyCode::Char('e')],
    &[KeyCode::Char('k')],
    &[KeyCode::Char('k'), KeyCode::Enter],
];

/// Draws `snapshot` in every view of [`VIEWS`], live and in replay, with
/// each process of the table selected in turn (its detail pane), at each
/// size, and gives every frame to `check` with a description of it. Stops
/// at the first frame `check` refuses and returns its description.
pub fn every_view(
    snapshot: &Snapshot,
    feed_status: &str,
    sizes: &[(u16, u16)],
    mut check: impl FnMut(&Buffer) -> bool,
) -> Result<usize, String> {
    let mut frames = 0;
    for replay in [false, true] {
        for keys in VIEWS {
            for &(w, h) in sizes {
                let mut selected = 0;
                loop {
                    let mut app = App::new(true, replay);
                    app.feed_status = feed_status.to_string();
                    app.apply(super::feed::Update::Next(Box::new(snapshot.clone())));
                    for _ in 0..selected {
                        app.on_key(KeyEvent::from(KeyCode::Down));
                    }
                    for key in keys.iter() {
                        app.on_key(KeyEvent::from(*key));
                    }
                    let mut terminal = Terminal::new(TestBackend::new(w, h)).map_err(|e| e.to_string())?;
                    terminal
                        .draw(|f| render::draw(f, &mut app))
                        .map_err(|e| e.to_string())?;
                    frames += 1;
                    if !check(terminal.backend().buffer()) {
                        return Err(format!(
                            "{w}x{h}, replay {replay}, row {selected} selected, keys {keys:?}"
                        ));
                    }
                    selected += 1;
                    if selected >= app.rows().len() {
                        break;
                    }
                }
            }
        }
    }
    Ok(frames)
}

/// The strings of a snapshot's JSON, values and map keys, that the data
/// model takes as free text: each one it carries when changed, unlike an
/// enum's name or a field's. Strings a process or host writes are many
/// more than a hand-made list of fields would name, and new fields join
/// without anyone remembering to. Finding them costs a parse per string;
/// filling them in again costs one.
pub struct FreeText {
    json: Value,
    paths: Vec<Vec<Step>>,
}

impl FreeText {
    pub fn of(base: &Snapshot) -> FreeText {
        let json = serde_json::to_value(base).unwrap_or(Value::Null);
        let mut strings = Vec::new();
        collect_strings(&json, &mut Vec::new(), &mut strings);
        // Map keys are renamed last (`collect_strings` lists them after
        // what is under them), so a path found here still leads there.
        let mut kept = json.clone();
        let mut paths = Vec::new();
        for path in strings {
            let mut trial = kept.clone();
            if prefix_at(&mut trial, &path, "\u{1b}") && carried(&trial) {
                kept = trial;
                paths.push(path);
            }
        }
        FreeText { json, paths }
    }

    /// How many strings are free text.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// The base with text from `texts`, taken in turn, put before every
    /// free-text string; the base itself without texts. None only when
    /// two texts made two of a map's keys one.
    pub fn filled(&self, texts: &[String]) -> Option<Snapshot> {
        let mut json = self.json.clone();
        if !texts.is_empty() {
            for (i, path) in self.paths.iter().enumerate() {
                prefix_at(&mut json, path, &texts[i % texts.len()]);
            }
        }
        serde_json::from_value(json).ok()
    }
}

/// Whether the data model carries `json` as it is: it parses, and writes
/// back the same (a renamed struct field would parse too, as a missing
/// field with its default and an unknown one ignored).
fn carried(json: &Value) -> bool {
    serde_json::from_value::<Snapshot>(json.clone())
        .ok()
        .and_then(|s| serde_json::to_value(s).ok())
        .is_some_and(|back| back == *json)
}

/// A step into JSON: an object's key (the string may be the key itself),
/// or an array's index.
#[derive(Clone, Debug)]
enum Step {
    Field(String),
    Key(String),
    Index(usize),
}

fn collect_strings(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::String(_) => out.push(at.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(Step::Index(i));
                collect_strings(item, at, out);
                at.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                at.push(Step::Field(k.clone()));
                collect_strings(item, at, out);
                at.pop();
                // After what is under it: renaming the key first would
                // lose the way to those.
                at.push(Step::Key(k.clone()));
                out.push(at.clone());
                at.pop();
            }
        }
        _ => {}
    }
}

/// Puts `text` before the string at `path`; false when the path no longer
/// leads to one (an earlier change renamed a key on the way).
fn prefix_at(v: &mut Value, path: &[Step], text: &str) -> bool {
    let Some((last, ways)) = path.split_last() else {
        return false;
    };
    let mut here = v;
    for step in ways {
        here = match (step, here) {
            (Step::Field(k), Value::Object(map)) => match map.get_mut(k) {
                Some(next) => next,
                None => return false,
            },
            (Step::Index(i), Value::Array(items)) => match items.get_mut(*i) {
                Some(next) => next,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, here) {
        (Step::Field(k), Value::Object(map)) => match map.get_mut(k) {
            Some(Value::String(s)) => {
                s.insert_str(0, text);
                true
            }
            _ => false,
        },
        (Step::Index(i), Value::Array(items)) => match items.get_mut(*i) {
            Some(Value::String(s)) => {
                s.insert_str(0, text);
                true
            }
            _ => false,
        },
        (Step::Key(k), Value::Object(map)) => match map.remove(k) {
            Some(item) => {
                map.insert(format!("{text}{k}"), item);
                true
            }
            None => false,
        },
        _ => false,
    }
}
