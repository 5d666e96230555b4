//! What a new user tripped over in the live view (issue 37): the command
//! line as a column, columns no row has a value for left out, source lines
//! only where they matter, the driver's reserve, `--ascii` temperatures,
//! slots, and detail lines cut whole.

use super::fixture::{desktop, server};
use super::tests::{app_with, key, row, screen};
use crate::snapshot::{Backend, BackendStatus, Snapshot};

fn header(s: &str) -> &str {
    s.lines().find(|l| l.trim_start().starts_with("PID ")).unwrap_or("")
}

/// The 8-H100 server with the sources an NVIDIA box also lists: DRM,
/// Jetson and Ascend not there, and one that failed.
fn server_with_sources() -> Snapshot {
    let mut s = server(8, 8);
    for (name, detail) in [
        ("drm", "no DRM GPU (no /sys/class/drm/card*)"),
        ("jetson", "not a Jetson: no Tegra device tree"),
        ("ascend", "npu-smi not found: no Ascend driver"),
    ] {
        s.backends.push(Backend {
            name: name.into(),
            status: BackendStatus::Unavailable,
            detail: detail.into(),
        });
    }
    s
}

#[test]
fn the_command_line_is_a_column_redacted_and_cut_on_the_right() {
    let mut s = server(8, 8);
    let secret = "sk-live-0123456789abcdef0123456789abcdef";
    s.processes[3].cmdline = Some(format!("python3 train.py --rank 3 --api-key {secret}"));
    let mut app = app_with(s);
    let shown = screen(&mut app, 120, 35);
    assert!(header(&shown).trim_end().ends_with("COMMAND"), "{shown}");
    let line = row(&shown, "10003");
    assert!(line.contains("python3 train.py --rank 3"), "{line}");
    assert!(!shown.contains(secret), "{shown}");
    // Cut on the right, marked, within the screen.
    let narrow = screen(&mut app, 100, 35);
    let line = row(&narrow, "10003");
    assert!(line.ends_with('…') && line.contains("python3 train"), "{narrow}");
    assert!(narrow.lines().all(|l| l.chars().count() <= 100));
    // A known column the config file can name.
    assert_eq!(
        super::columns::Column::from_name("command"),
        Some(super::columns::Column::Command)
    );
}

#[test]
fn full_columns_leave_out_what_no_row_has_a_value_for() {
    // NVML says no spill and no paged memory for any process.
    let mut app = app_with(server(8, 8));
    key(&mut app, 'm');
    for width in [120, 200] {
        let shown = screen(&mut app, width, 35);
        let head = header(&shown);
        assert!(head.contains("VRAM") && head.contains("RSS"), "{shown}");
        assert!(!head.contains("SPILL") && !head.contains("PAGED"), "{width}: {head}");
    }
    // The desktop's speech app has both: there they are shown.
    let mut app = app_with(desktop());
    key(&mut app, 'm');
    let head = screen(&mut app, 200, 50);
    assert!(
        header(&head).contains("SPILL") && header(&head).contains("PAGED"),
        "{head}"
    );
}

#[test]
fn sources_that_found_nothing_give_their_lines_to_the_gpus_at_80x24() {
    let mut s = server_with_sources();
    s.backends.push(Backend {
        name: "wddm".into(),
        status: BackendStatus::Error,
        detail: "PdhCollectQueryData failed".into(),
    });
    let mut app = app_with(s);
    let shown = screen(&mut app, 80, 24);
    for i in 0..8 {
        assert!(
            shown.lines().any(|l| l.starts_with(&format!("GPU {i} "))),
            "GPU {i} has no line:\n{shown}"
        );
    }
    assert!(!shown.contains("drm: unavailable"), "{shown}");
    assert!(!shown.contains("jetson:") && !shown.contains("ascend:"), "{shown}");
    // A source that failed is said.
    assert!(shown.contains("wddm: ERROR: PdhCollectQueryData failed"), "{shown}");
}

#[test]
fn the_driver_reserve_is_said_so_the_parts_add_up() {
    let mut s = desktop();
    s.devices[0].memory_reserved_bytes = Some(512 << 20);
    let mut app = app_with(s);
    let shown = screen(&mut app, 160, 40);
    assert!(
        shown.contains("5.01 GiB used of 15.99 GiB, 10.98 GiB free, 512.0 MiB reserved by the driver"),
        "{shown}"
    );
}

#[test]
fn ascii_temperatures_read_as_the_one_shot_writes_them() {
    for (gpus, w, h) in [(1, 160, 40), (8, 160, 45)] {
        let mut app = app_with(server(gpus, 4));
        app.ascii = true;
        let shown = screen(&mut app, w, h);
        assert!(shown.contains("  40 C"), "{shown}");
        assert!(!shown.contains("40  C"), "{shown}");
    }
}

#[test]
fn slots_read_as_words() {
    for (busy, total, said) in [
        (None, Some(1), "1 slot, busy n/a"),
        (None, Some(4), "4 slots, busy n/a"),
        (Some(1), Some(4), "slots 1/4 busy"),
    ] {
        let mut s = desktop();
        let llama = s.processes.iter_mut().find(|p| p.pid == 4242).unwrap();
        llama.models[0].slots_busy = busy;
        llama.models[0].slots_total = total;
        let mut app = app_with(s);
        app.selected_pid = Some(4242);
        let shown = screen(&mut app, 200, 60);
        assert!(shown.contains(said), "{said}:\n{shown}");
        assert!(!shown.contains("n/a/"), "{shown}");
    }
}

#[test]
fn a_detail_line_that_does_not_fit_whole_is_left_out_not_cut() {
    let mut s = server(8, 8);
    let note = "this note is long enough to wrap over two rows of a narrow pane and \
                must never be shown in part, for a sentence cut in the middle says the \
                opposite of what it meant";
    s.processes[0].notes = vec![note.into(); 3];
    let mut app = app_with(s);
    app.selected_pid = Some(10_000);
    for (w, h) in [(120, 35), (80, 24), (100, 30)] {
        let shown = screen(&mut app, w, h);
        let pane: String = shown
            .lines()
            .skip_while(|l| !l.starts_with(" PID 10000"))
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ");
        // Each note is there whole (its words in order) or not at all.
        let notes = pane.matches("note: ").count();
        let whole = pane.split_whitespace().collect::<Vec<_>>().join(" ");
        let note_words = note.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(whole.matches(&note_words).count(), notes, "{w}x{h}:\n{shown}");
        if (w, h) == (120, 35) {
            // Room for one note of the three, and not for the next.
            assert_eq!(notes, 1, "{shown}");
        }
    }
}

#[test]
fn question_mark_lists_the_keys_then_e_explains_for_this_machine_only() {
    let mut app = app_with(server_with_sources());
    key(&mut app, '?');
    let keys = screen(&mut app, 120, 60);
    assert!(keys.contains(" Keys "), "{keys}");
    assert!(keys.contains("S          reverse the sort"), "{keys}");
    assert!(keys.contains("k          send a signal"), "{keys}");
    // A live view: no replay keys.
    assert!(!keys.contains("step back or forward"), "{keys}");
    // Every source's line, those the main screen leaves out too.
    assert!(keys.contains("jetson: unavailable: not a Jetson"), "{keys}");
    assert!(keys.contains("nvml: ok: 8 devices"), "{keys}");
    // e: what can be known, without the sections of sources this box
    // does not have.
    key(&mut app, 'e');
    let explained = screen(&mut app, 120, 80);
    assert!(explained.contains(crate::view::explain::TITLE), "{explained}");
    assert!(explained.contains("Per-process VRAM"), "{explained}");
    assert!(
        !explained.contains("Jetson (Nano") && !explained.contains("Ascend NPUs"),
        "{explained}"
    );
    // e again: the keys; Esc closes.
    key(&mut app, 'e');
    assert!(screen(&mut app, 120, 60).contains(" Keys "));
    app.on_key(ratatui::crossterm::event::KeyEvent::from(
        ratatui::crossterm::event::KeyCode::Esc,
    ));
    assert!(!screen(&mut app, 120, 60).contains(" Keys "));
    // On a Jetson its section is there.
    #[cfg(target_os = "linux")]
    {
        let mut s = server(1, 4);
        s.devices[0].backend = "jetson".into();
        let mut app = app_with(s);
        key(&mut app, '?');
        key(&mut app, 'e');
        assert!(screen(&mut app, 120, 120).contains("Jetson (Nano"));
    }
}

#[test]
fn the_footer_says_what_each_key_does() {
    let mut app = app_with(server(8, 8));
    let shown = screen(&mut app, 200, 50);
    let footer = shown.lines().rev().find(|l| !l.is_empty()).unwrap();
    for said in [
        "s sort",
        "/ filter",
        "g GPU",
        "k signal",
        "t tree",
        "u user",
        "S reverse",
        "a all",
        "m columns",
        "p pause",
        "? keys",
        "q quit",
    ] {
        assert!(footer.contains(said), "{said} in {footer}");
    }
    // Actions only: no state (the sorted column's arrow and the table's
    // title say those).
    for state in ["VRAM↓", "slim", "top", "user all", "GPU all"] {
        assert!(!footer.contains(state), "{state} in {footer}");
    }
    // Every word in the footer is a key of the one table.
    for k in super::app::KEYS
        .iter()
        .filter(|k| !k.word.is_empty() && k.applies(false, false))
    {
        assert!(
            footer.contains(&format!("{} {}", k.keys, k.word)),
            "{} in {footer}",
            k.keys
        );
    }
}

/// Issue 29: the detail pane of a model server sets its measured memory
/// against the parts (reconcile::fill, the one computation `--once` and
/// `--json` show too) and names the signed rest.
#[test]
fn the_detail_pane_sets_a_servers_measured_memory_against_its_parts() {
    let mut s = desktop();
    crate::snapshot::reconcile::fill(&s.devices, &mut s.processes);
    let llama = s.processes.iter().find(|p| p.pid == 4242).unwrap();
    let r = llama
        .reconciliation
        .first()
        .expect("the server's GPU 0 is reconciled")
        .clone();
    assert!(!r.parts.is_empty(), "{r:?}");
    let mut app = app_with(s);
    app.selected_pid = Some(4242);
    let shown = screen(&mut app, 200, 50);
    let pane = shown
        .lines()
        .skip_while(|l| !l.starts_with(" PID 4242"))
        .collect::<Vec<_>>()
        .join("\n");
    let line = pane
        .lines()
        .find(|l| l.contains("memory: measured"))
        .unwrap_or_else(|| panic!("no reconciliation line:\n{shown}"));
    let want = crate::view::reconciliation_equation(&r);
    assert!(line.contains(&want), "{line}\n{want}");
    for part in &r.parts {
        assert!(line.contains(part.kind.label()), "{line}");
    }
    assert!(
        line.contains(&format!(
            "unexplained {}",
            crate::units::signed_bytes(r.unexplained_bytes)
        )),
        "{line}"
    );
}
