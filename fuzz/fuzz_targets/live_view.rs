//! The live view's renderers on hostile snapshots (src/view/tui/audit.rs):
//! the input is a snapshot's JSON and up to three texts, NUL-separated;
//! each text is put before every free-text string of the snapshot (or of
//! tests/data/snapshots/desktop-full.json when the JSON does not parse,
//! as in the seeds: a parsed snapshot costs a parse per string to find
//! them).
//! No frame of any view, live or replayed, may hold a character a terminal
//! obeys, and neither may `--once`'s text but its line ends.
#![no_main]

use gputaskman::snapshot::load;
use gputaskman::view::safe_text::hidden;
use gputaskman::view::tui::audit::{every_view, first_foreign_control, FreeText};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static BASE: &[u8] = include_bytes!("../../tests/data/snapshots/desktop-full.json");

/// Enough rows for every part of the screen; each one is drawn selected in
/// every view, so more only slows the fuzzer.
const MAX_PROCESSES: usize = 4;

/// The base's free-text strings, found once (a parse per string).
fn base() -> &'static FreeText {
    static BASE_TEXT: OnceLock<FreeText> = OnceLock::new();
    BASE_TEXT.get_or_init(|| FreeText::of(&load::parse(BASE).expect("the base snapshot parses")))
}

fuzz_target!(|data: &[u8]| {
    let parts = gputaskman_fuzz::split(data, 4);
    let parsed = load::parse(parts[0]).ok().map(|mut s| {
        s.processes.truncate(MAX_PROCESSES);
        s.devices.truncate(MAX_PROCESSES);
        FreeText::of(&s)
    });
    let texts: Vec<String> = parts[1..]
        .iter()
        .map(|p| gputaskman_fuzz::text(p))
        .filter(|t| !t.is_empty())
        .collect();
    let Some(snapshot) = parsed.as_ref().unwrap_or_else(|| base()).filled(&texts) else {
        return;
    };

    let once = gputaskman::view::text::render(&snapshot, Some(100));
    assert!(!once.chars().any(|c| c != '\n' && hidden(c)), "{once:?}");

    let status = texts.first().cloned().unwrap_or_default();
    let mut at = None;
    let checked = every_view(&snapshot, &status, &[(120, 40)], |buf| {
        at = first_foreign_control(buf);
        at.is_none()
    });
    if let Err(view) = checked {
        panic!("{view}: {at:?}");
    }
});
