//! GPU time and energy in the live view: the columns once an interval is
//! counted, `s` and `--sort` by them, a user's totals in the title and in
//! `?`, n/a where energy cannot be shared out, replay jumps and pauses.

use super::app::{App, SortKey};
use super::feed::Update;
use super::fixture::desktop;
use super::tests::{app_with, key, row, screen};
use crate::snapshot::Snapshot;

/// The desktop at `at` seconds past 17:31:50 with the GPU's energy counter
/// at `joules`; Discord's SM share known (0 %), chrome run by bob. Shares:
/// dwm 4 %, llama-server 15 %, chrome 2 %, msedge 0, whisper 1 %.
fn desktop_at(at: u32, joules: u64) -> Snapshot {
    let mut s = desktop();
    s.taken_at = format!("2026-11-30T17:32:{at:02}.000Z");
    s.devices[0].energy_mj = Some(joules * 1000);
    for p in &mut s.processes {
        if p.pid == 9120 {
            p.gpu[0].engines.insert("sm".into(), 0);
        }
        if p.pid == 7310 {
            p.user = Some("bob".into());
        }
    }
    s
}

/// Two samples 10 s apart, 2000 J between them (200 W), counted with a
/// 5 s interval (gaps are over 16 s).
fn counted() -> App {
    let mut app = app_with(desktop_at(0, 1_000));
    app.count_usage_every(5.0);
    app.show(desktop_at(0, 1_000));
    app.show(desktop_at(10, 3_000));
    app
}

#[test]
fn the_columns_wait_for_an_interval_then_say_each_process_share() {
    let mut app = app_with(desktop_at(0, 1_000));
    app.count_usage_every(5.0);
    app.show(desktop_at(0, 1_000));
    key(&mut app, 'm');
    let s = screen(&mut app, 220, 40);
    assert!(
        !s.contains("ENERGY") && !s.contains("GPU TIME"),
        "nothing counted yet:\n{s}"
    );
    app.show(desktop_at(10, 3_000));
    let s = screen(&mut app, 220, 40);
    assert!(s.contains("GPU TIME") && s.contains("ENERGY"), "{s}");
    // 15 % of 10 s; 15 % of 2000 J. The idle 78 % is nobody's.
    let llama = row(&s, "4242");
    assert!(llama.contains("1.5s") && llama.contains("300 J"), "{llama}");
    let dwm = row(&s, "1468");
    assert!(dwm.contains("0.4s") && dwm.contains("80.0 J"), "{dwm}");
    let edge = row(&s, "7822");
    assert!(edge.contains("0.0s") && edge.contains("0.0 J"), "{edge}");
    let idle = app.ledger.devices.values().next().unwrap().idle_energy_j.unwrap();
    assert!((idle - 2000.0 * 0.78).abs() < 1e-6, "{idle}");
}

#[test]
fn s_reaches_gpu_time_and_energy_once_counted_and_sorts_by_them() {
    let mut app = counted();
    for _ in 0..4 {
        key(&mut app, 's');
    }
    assert_eq!(app.sort, SortKey::GpuTime);
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Energy);
    let s = screen(&mut app, 220, 40);
    assert!(s.contains("ENERGY↓"), "{s}");
    let order: Vec<u32> = app.rows().iter().map(|p| p.pid).collect();
    // 300, 80, 40, 20 J, then the two at 0 by PID.
    assert_eq!(order, vec![4242, 1468, 7310, 6010, 7822, 9120]);
    key(&mut app, 'S');
    let order: Vec<u32> = app.rows().iter().map(|p| p.pid).collect();
    assert_eq!(order, vec![7822, 9120, 6010, 7310, 1468, 4242], "ties stay by PID");
    // Before anything is counted `s` passes them by.
    let mut fresh = app_with(desktop_at(0, 1_000));
    for _ in 0..4 {
        key(&mut fresh, 's');
    }
    assert_eq!(fresh.sort, SortKey::Name);
}

#[test]
fn sort_energy_shows_its_column_in_the_slim_set_too() {
    let mut app = counted();
    app.sort = SortKey::Energy;
    let s = screen(&mut app, 140, 40);
    assert_eq!(app.full_columns, Some(false));
    assert!(s.contains("ENERGY↓") && !s.contains("GPU TIME"), "{s}");
    assert!(row(&s, "4242").contains("300 J"), "{s}");
}

#[test]
fn energy_is_na_where_a_share_on_the_gpu_is_unknown() {
    let mut app = app_with(desktop());
    app.count_usage_every(5.0);
    app.show(desktop());
    let mut later = desktop();
    later.taken_at = "2026-11-30T17:32:08.000Z".into();
    app.show(later);
    key(&mut app, 'm');
    let s = screen(&mut app, 220, 40);
    // Discord's share is unknown: the power can be shared out to no one.
    assert!(s.contains("GPU TIME") && !s.contains("ENERGY"), "{s}");
    app.selected_pid = Some(4242);
    let s = screen(&mut app, 220, 50);
    assert!(
        s.contains(
            "since the view started: GPU time 1.5s integrated · energy n/a (not every share on the GPU is known)"
        ),
        "{s}"
    );
}

#[test]
fn a_users_totals_are_in_the_title_and_every_users_in_the_key_list() {
    let mut app = counted();
    app.user = Some("bob".into());
    let s = screen(&mut app, 220, 40);
    assert!(
        s.contains(
            "user bob (GPU time 0.2s integrated · energy 40.0 J attributed (of measured) since the view started)"
        ),
        "{s}"
    );
    app.user = None;
    key(&mut app, '?');
    let s = screen(&mut app, 120, 60);
    assert!(s.contains("Use since the view started, per user"), "{s}");
    // ana: everything but chrome: 2.0 s of GPU time, 400 J.
    assert!(
        s.contains("ana          GPU time 2.0s integrated · energy 400 J attributed (of measured)"),
        "{s}"
    );
    assert!(s.contains("bob          GPU time 0.2s integrated"), "{s}");
}

#[test]
fn a_replay_jump_counts_anew_and_a_pause_loses_nothing() {
    let mut app = App::new(false, true);
    app.count_usage_every(5.0);
    app.apply(Update::Seek(vec![desktop_at(0, 1_000), desktop_at(10, 3_000)]));
    app.apply(Update::Next(Box::new(desktop_at(20, 5_000))));
    assert!((app.ledger.covered_s - 20.0).abs() < 1e-9);
    app.apply(Update::Seek(vec![desktop_at(30, 7_000), desktop_at(40, 9_000)]));
    assert!((app.ledger.covered_s - 10.0).abs() < 1e-9, "since the jump");
    // Live and paused: held samples are counted on resume.
    let mut app = counted();
    key(&mut app, 'p');
    app.show(desktop_at(20, 5_000));
    assert!((app.ledger.covered_s - 10.0).abs() < 1e-9);
    key(&mut app, 'p');
    assert!((app.ledger.covered_s - 20.0).abs() < 1e-9);
    // A wait longer than the gap limit is not counted.
    app.show(desktop_at(50, 9_000));
    assert_eq!(app.ledger.gaps, 1);
}
