//! No text from outside reaches a cell of the live view unescaped, in any
//! view, live or replayed: the desktop fixture with every free-text string
//! of its JSON (names, command lines, paths, a runtime's answers, notes,
//! the host, the devices, map keys) prefixed by terminal escapes.

use super::audit::{every_view, first_foreign_control, scrub, FreeText};
use super::fixture::desktop;
use crate::snapshot::{Container, Snapshot};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

/// An OSC title, an SGR colour, OSC 52 (the clipboard), a screen clear, a
/// forged row and a right-to-left override: what an Ollama look-alike put
/// in `/api/ps`'s `expires_at` to retitle the pane and paint the line red.
const FORGE: [&str; 3] = [
    "\u{1b}]0;PWNED\u{7}\u{1b}[41mRED\u{1b}[0m\u{202e}",
    "\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[2J",
    "\r\nFORGED ROW\u{9b}31m\u{2066}",
];

/// The fixture with every optional string filled in, so each is there to
/// be made hostile.
fn full_desktop() -> Snapshot {
    let mut s = desktop();
    s.host.kernel = Some("6.12.0".into());
    s.devices[0].driver_model = Some("WDDM".into());
    s.devices[0].uuid = Some("GPU-0".into());
    s.devices[0].pci_bus_id = Some("00000000:01:00.0".into());
    for p in &mut s.processes {
        p.user = Some("ana".into());
        p.exe = Some("/usr/bin/x".into());
        p.start_time = Some("2026-11-30T17:00:00.000Z".into());
        p.notes = vec!["a note".into()];
        p.container = Some(Container {
            runtime: "docker".into(),
            id: "0".repeat(64),
            name: Some("box".into()),
            pod: Some("pod".into()),
            namespace: Some("ns".into()),
        });
        for m in &mut p.models {
            m.notes = vec!["a model note".into()];
            m.kind = Some("llm".into());
            if let Some(a) = &mut m.activity {
                a.expires_at = Some("2026-11-30T18:00:00Z".into());
                a.kv_cache_used_ratio = Some(0.5);
            }
        }
    }
    s
}

fn hostile() -> Snapshot {
    FreeText::of(&full_desktop()).filled(&FORGE.map(String::from)).unwrap()
}

#[test]
fn every_free_text_string_is_made_hostile() {
    let s = hostile();
    let json = serde_json::to_string(&s).unwrap();
    let llama = s.processes.iter().find(|p| p.pid == 4242).unwrap();
    let activity = llama.models[0].activity.as_ref().unwrap();
    assert!(
        activity.expires_at.as_deref().unwrap().contains('\u{1b}'),
        "{activity:?}"
    );
    assert!(llama.cmdline.as_deref().unwrap().contains('\u{1b}') || llama.cmdline.as_deref().unwrap().contains('\r'));
    assert!(s
        .host
        .hostname
        .as_deref()
        .unwrap()
        .chars()
        .any(crate::view::safe_text::hidden));
    // Enums keep their names: the snapshot still parses as itself.
    assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), s);
    let before = serde_json::to_string(&full_desktop()).unwrap();
    assert!(
        json.matches("\\u001b").count() > before.matches("\\u001b").count() + 50,
        "{json}"
    );
}

#[test]
fn no_view_lets_text_from_outside_reach_a_cell_unescaped() {
    let s = hostile();
    let mut found = None;
    let frames = every_view(&s, FORGE[0], &[(80, 24), (200, 60)], |buf| {
        found = first_foreign_control(buf);
        found.is_none()
    });
    assert!(frames.is_ok(), "{:?} at {found:?}", frames);
    assert!(frames.unwrap() > 100);
}

#[test]
fn the_guard_drops_what_a_terminal_obeys_and_keeps_the_rest() {
    let mut buf = Buffer::empty(Rect::new(0, 0, 4, 1));
    buf[(0, 0)].set_symbol("a\u{1b}");
    buf[(1, 0)].set_symbol("\u{202e}");
    buf[(2, 0)].set_symbol("é");
    buf[(3, 0)].set_symbol("\u{9d}x");
    assert_eq!(first_foreign_control(&buf), Some((0, 0, "a\u{1b}".into())));
    assert_eq!(scrub(&mut buf), 3);
    let shown: Vec<&str> = buf.content.iter().map(|c| c.symbol()).collect();
    assert_eq!(shown, ["a", " ", "é", "x"]);
    assert_eq!(first_foreign_control(&buf), None);
    assert_eq!(scrub(&mut buf), 0);
}

#[test]
fn the_text_views_of_a_hostile_snapshot_hold_nothing_a_terminal_obeys_but_line_ends() {
    let s = hostile();
    for width in [None, Some(80), Some(200)] {
        let out = crate::view::text::render(&s, width);
        let bad: Vec<char> = out
            .chars()
            .filter(|c| *c != '\n' && crate::view::safe_text::hidden(*c))
            .collect();
        assert!(bad.is_empty(), "{width:?}: {bad:?} in\n{out}");
        assert!(!out.lines().any(|l| l.trim_start().starts_with("FORGED")), "{out}");
    }
    let d = crate::snapshot::diff::diff(&full_desktop(), &s, "before", "after");
    let out = crate::view::diff::render(&d);
    assert!(
        !out.chars().any(|c| c != '\n' && crate::view::safe_text::hidden(c)),
        "{out}"
    );
}

/// The `live_view` fuzz target starts from this file when its input is no
/// snapshot: it must parse, and hold what makes the renderers draw the
/// detail pane's every line (a model with a runtime's activity).
#[test]
fn the_fuzz_targets_base_snapshot_parses_and_has_a_runtimes_activity() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/snapshots/desktop-full.json");
    let s = crate::snapshot::load::parse(&std::fs::read(path).unwrap()).unwrap();
    assert!(s.processes.iter().flat_map(|p| &p.models).any(|m| m.activity.is_some()));
}
