//! The live view at scale and in small terminals: device headers that
//! shrink with the device count and the screen, a table that keeps at
//! least half of it, columns left out in a fixed order rather than cut,
//! and every figure on screen one that is in the snapshot. Then what acts
//! on it: GPU digits, `k` and its confirmation, space, `t`, `u`, `/`.

use super::app::{Action, App};
use super::fixture::{desktop, server};
use super::{columns, render};
use crate::procs::signal::{Signal, Target};
use crate::snapshot::Snapshot;
use crate::units::bytes;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::Terminal;
use std::collections::BTreeSet;

/// The sizes the issue names.
const SIZES: [(u16, u16); 4] = [(60, 16), (80, 24), (120, 40), (200, 60)];

fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        for x in 0..w {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn app_with(s: Snapshot) -> App {
    let mut app = App::new(false, false);
    app.show(s);
    app
}

fn key(app: &mut App, code: KeyCode) -> Action {
    app.on_key(KeyEvent::from(code))
}

fn chars(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

/// The table's rows: from the line after the column titles to the first
/// line that does not start with a PID.
fn table_rows(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .skip_while(|l| !(l.contains(" PID ") && l.contains("VRAM")))
        .skip(1)
        .take_while(|l| first_pid(l).is_some())
        .collect()
}

fn first_pid(line: &str) -> Option<u32> {
    line.split_whitespace()
        .next()?
        .trim_end_matches(['*', '?'])
        .parse()
        .ok()
}

/// Every byte figure on screen ("9.00 GiB", "512.0 MiB", "0 B"), in the
/// order they are drawn.
fn byte_figures(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (y, line) in text.lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        for unit in [" GiB", " MiB", " KiB", " B"] {
            let unit: Vec<char> = unit.chars().collect();
            for at in 0..chars.len().saturating_sub(unit.len() - 1) {
                if chars[at..at + unit.len()] != unit[..] {
                    continue;
                }
                // A unit is a unit only when what follows is not a letter.
                if chars.get(at + unit.len()).is_some_and(|c| c.is_alphanumeric()) {
                    continue;
                }
                let start = (0..at)
                    .rev()
                    .take_while(|&i| chars[i].is_ascii_digit() || chars[i] == '.')
                    .last();
                if let Some(start) = start {
                    let figure: String = chars[start..at + unit.len()].iter().collect();
                    out.push(((y, start), figure));
                }
            }
        }
    }
    out.sort();
    out.into_iter().map(|(_, f)| f).collect()
}

/// Every byte figure the view may honestly draw from `s`: the counters, a
/// process's figures summed over its devices, a device's holders summed
/// from any rank on (the bar's "N more"), what no listed process holds, a
/// model's parts and totals, and the sums over all devices.
fn honest_figures(s: &Snapshot) -> BTreeSet<String> {
    let mut raw: Vec<Option<u64>> = Vec::new();
    for d in &s.devices {
        raw.extend([
            d.memory_total_bytes,
            d.memory_used_bytes,
            d.memory_free_bytes,
            d.shared_memory_used_bytes,
            d.memory_reserved_bytes,
        ]);
        let mut holders: Vec<u64> = s
            .processes
            .iter()
            .filter_map(|p| {
                p.gpu
                    .iter()
                    .filter(|g| g.device == d.index)
                    .filter_map(|g| g.vram_bytes)
                    .max()
            })
            .filter(|v| *v > 0)
            .collect();
        holders.sort_unstable_by(|a, b| b.cmp(a));
        for from in 0..holders.len() {
            raw.push(Some(holders[from..].iter().sum()));
        }
        let measured: u64 = holders.iter().sum();
        raw.push(d.memory_used_bytes.map(|u| u.saturating_sub(measured)));
    }
    let all = |f: fn(&crate::snapshot::Device) -> Option<u64>| s.devices.iter().map(f).sum::<Option<u64>>();
    raw.extend([all(|d| d.memory_used_bytes), all(|d| d.memory_total_bytes)]);
    for p in &s.processes {
        raw.extend([p.rss_bytes, p.rss_anon_bytes, p.footprint_bytes]);
        for field in [
            (|g: &crate::snapshot::GpuUsage| g.vram_bytes) as fn(&crate::snapshot::GpuUsage) -> Option<u64>,
            |g| g.spill_bytes,
            |g| g.paged_bytes,
        ] {
            raw.extend(p.gpu.iter().map(field));
            raw.push(super::app::sum(p.gpu.iter().map(field)));
        }
        for m in &p.models {
            if let Some(e) = &m.estimate {
                raw.extend([
                    e.weights_bytes,
                    e.kv_bytes,
                    e.kv_bytes_per_token,
                    e.kv_bytes_without_window,
                ]);
                raw.push(e.weights_bytes.zip(e.kv_bytes).map(|(a, b)| a + b));
            }
            if let Some(r) = &m.reported {
                raw.extend([
                    r.weights_bytes,
                    r.kv_bytes,
                    r.compute_bytes,
                    r.total_bytes,
                    r.device_bytes,
                ]);
                raw.push(super::app::sum(
                    [r.weights_bytes, r.kv_bytes, r.compute_bytes].into_iter(),
                ));
            }
        }
    }
    raw.into_iter().flatten().map(|b| bytes(Some(b))).collect()
}

/// What every screen must hold: each byte figure is one of the snapshot's,
/// each row's PID is a process's, its GPU cell its devices, its VRAM cell
/// its measured VRAM; and the table has at least half the screen.
fn assert_honest(app: &mut App, w: u16, h: u16, what: &str) {
    let s = screen(app, w, h);
    let snap = app.snapshot.clone().unwrap();
    let honest = honest_figures(&snap);
    for figure in byte_figures(&s) {
        assert!(
            honest.contains(&figure),
            "{what} {w}x{h}: {figure:?} is no figure of the snapshot\n{s}"
        );
    }
    // The devices' readings: each one the snapshot's, none cut at the
    // edge (every reading ends in its unit, never in a digit).
    let mut readings: BTreeSet<String> = BTreeSet::new();
    for d in &snap.devices {
        readings.extend(
            [d.gpu_util_percent, d.memory_activity_percent, d.temperature_c]
                .into_iter()
                .flatten()
                .map(|v| v.to_string()),
        );
        readings.extend(
            [d.power_w, d.power_limit_w]
                .into_iter()
                .flatten()
                .map(|v| format!("{v:.0}")),
        );
    }
    for line in s.lines().take_while(|l| !l.starts_with("PROCESSES")).skip(1) {
        assert!(
            !line.trim_end().ends_with(|c: char| c.is_ascii_digit()),
            "{what} {w}x{h}: a figure cut at the edge: {line:?}\n{s}"
        );
        let chars: Vec<char> = line.chars().collect();
        let mut at = 0;
        while at < chars.len() {
            if !chars[at].is_ascii_digit() || (at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '.')) {
                at += 1;
                continue;
            }
            let end = (at..chars.len())
                .find(|&i| !(chars[i].is_ascii_digit() || chars[i] == '.'))
                .unwrap_or(chars.len());
            let number: String = chars[at..end].iter().collect();
            let rest: String = chars[end..].iter().take(3).collect();
            if rest.starts_with('%')
                || rest.starts_with(" °C")
                || rest.starts_with(" W")
                || rest.starts_with('/') && !rest.starts_with("/ ")
            {
                assert!(
                    readings.contains(&number),
                    "{what} {w}x{h}: {number}{rest} is no reading of the snapshot: {line:?}\n{s}"
                );
            }
            at = end;
        }
    }
    let rows = table_rows(&s);
    assert!(!rows.is_empty(), "{what} {w}x{h}: no process row\n{s}");
    let header_at = s
        .lines()
        .position(|l| l.contains(" PID ") && l.contains("VRAM"))
        .unwrap();
    let header = s.lines().nth(header_at).unwrap();
    let gpu_col = header.find(" GPU ").map(|at| at + " GPU".len());
    let table_lines = 1 + rows.len();
    let shown_rows = app.rows().len();
    assert!(
        table_lines >= (usize::from(h) / 2).min(shown_rows + 1),
        "{what} {w}x{h}: the table has {table_lines} lines, less than half\n{s}"
    );
    for row in rows {
        let pid = first_pid(row).unwrap();
        let p = snap
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .unwrap_or_else(|| panic!("{what}: PID {pid} is no process\n{s}"));
        if let Some(end) = gpu_col {
            // The GPU column is right-aligned under its title.
            let cell: String = row.chars().take(end).collect::<String>();
            let cell = cell.split_whitespace().last().unwrap();
            let on: BTreeSet<u32> = app.usages(p).map(|g| g.device).collect();
            let said: BTreeSet<u32> = cell.split(',').map(|d| d.parse().unwrap()).collect();
            assert_eq!(said, on, "{what} {w}x{h}: row {row:?}");
        }
        let vram = bytes(app.figure(p, |g| g.vram_bytes));
        let first = byte_figures(row).into_iter().next().unwrap_or_else(|| "n/a".into());
        if vram != "n/a" {
            assert_eq!(first, vram, "{what} {w}x{h}: row {row:?}");
        }
    }
}

#[test]
fn every_size_and_device_count_shows_only_numbers_from_the_snapshot() {
    for (gpus, per_gpu) in [(1, 6), (2, 8), (8, 8)] {
        for (w, h) in SIZES {
            let what = format!("{gpus} GPUs");
            let mut app = app_with(server(gpus, per_gpu));
            assert_honest(&mut app, w, h, &what);
            chars(&mut app, "m");
            assert_honest(&mut app, w, h, &format!("{what}, m"));
            chars(&mut app, "t");
            assert_honest(&mut app, w, h, &format!("{what}, m, t"));
            chars(&mut app, "1");
            assert_honest(&mut app, w, h, &format!("{what}, GPU 1"));
        }
    }
    for (w, h) in SIZES {
        assert_honest(&mut app_with(desktop()), w, h, "desktop");
    }
}

#[test]
fn a_figure_cut_from_the_left_is_caught() {
    // The check above can fail: "9.00 GiB" drawn as "0 GiB" is no figure.
    let honest = honest_figures(&server(1, 6));
    assert!(honest.contains("9.00 GiB") || honest.iter().any(|f| f.ends_with(" GiB")));
    for cut in byte_figures("  1.3 GiB  00 GiB") {
        assert!(!honest.contains(&cut), "{cut}");
    }
}

#[test]
fn device_headers_shrink_with_the_device_count_and_the_screen() {
    // One GPU on a tall screen: the full header, sparkline and all.
    let s = screen(&mut app_with(server(1, 6)), 200, 60);
    assert!(s.contains("used over time"), "{s}");
    // Eight at 160x45: a line each, all eight, and 20 rows or more.
    let mut app = app_with(server(8, 8));
    let s = screen(&mut app, 160, 45);
    for i in 0..8 {
        let line = s
            .lines()
            .find(|l| l.starts_with(&format!("GPU {i} ")))
            .unwrap_or_else(|| panic!("GPU {i}\n{s}"));
        let d = &app.snapshot.as_ref().unwrap().devices[i];
        let used = format!("{}/{}", bytes(d.memory_used_bytes), bytes(d.memory_total_bytes));
        assert!(
            line.contains(&used) && line.contains(&format!("{} °C", d.temperature_c.unwrap())),
            "{line}"
        );
        assert!(line.contains('['), "a bar: {line}");
    }
    assert!(table_rows(&s).len() >= 20, "{s}");
    // At 80x24 the lines still fit, and 8 rows or more with a GPU index.
    let s = screen(&mut app, 80, 24);
    assert_eq!(s.lines().filter(|l| l.starts_with("GPU ")).count(), 8, "{s}");
    assert!(table_rows(&s).len() >= 8, "{s}");
    assert!(s.lines().any(|l| l.contains(" PID GPU NAME")), "{s}");
    // At 60x16 not even a line each: one line for all eight.
    let s = screen(&mut app, 60, 16);
    assert!(s.contains("8 GPUs  used "), "{s}");
    assert!(!s.lines().any(|l| l.starts_with("GPU 0 ")), "{s}");
    assert!(table_rows(&s).len() >= 6, "{s}");
}

#[test]
fn columns_go_in_the_documented_order_and_figures_are_never_cut() {
    let mut app = app_with(desktop());
    let header = |app: &mut App, w| {
        let s = screen(app, w, 30);
        s.lines().find(|l| l.contains(" PID ")).unwrap().to_string()
    };
    let h80 = header(&mut app, 80);
    assert!(
        h80.contains("VRAM") && h80.contains("GPU%") && h80.contains("MODEL"),
        "{h80}"
    );
    assert!(!h80.contains("USER") && !h80.contains("INSIDE"), "{h80}");
    let h60 = header(&mut app, 60);
    assert!(h60.contains("PID GPU NAME") && h60.contains("VRAM"), "{h60}");
    assert!(!h60.contains("MODEL"), "{h60}");
    // A PID wider than its column widens it: never a cut figure.
    let mut s = desktop();
    s.processes[0].pid = 4_000_000_001;
    let mut app = app_with(s);
    let shown = screen(&mut app, 60, 16);
    assert!(shown.contains("4000000001*"), "{shown}");
    // What the order says, checked on the table's own fitting.
    let fitted = columns::fit_columns(&columns::Column::ALL, |_| 0, 80);
    let kept: Vec<_> = fitted.iter().map(|(c, _)| *c).collect();
    for dropped in &columns::DROP_ORDER[..6] {
        assert!(!kept.contains(dropped), "{dropped:?} in {kept:?}");
    }
    assert!(fitted.iter().map(|(_, w)| w + 1).sum::<usize>() - 1 <= 80);
}

#[test]
fn digit_keys_pick_a_gpu_and_the_title_counts_per_gpu() {
    let mut app = app_with(server(8, 8));
    let s = screen(&mut app, 160, 45);
    assert!(s.contains("PROCESSES  64 shown"), "{s}");
    // The process on GPUs 0 and 1 says both.
    assert!(
        s.lines().any(|l| first_pid(l) == Some(10_003) && l.contains(" 0,1 ")),
        "{s}"
    );
    chars(&mut app, "3");
    assert_eq!(app.gpu, Some(3));
    let s = screen(&mut app, 160, 45);
    assert!(s.contains("PROCESSES  8 on GPU 3, 56 on other GPUs"), "{s}");
    assert!(!s.contains("not on a GPU"), "{s}");
    chars(&mut app, "1");
    let s = screen(&mut app, 160, 45);
    // GPU 1: its own 8 and the data-parallel one from GPU 0.
    assert!(s.contains("PROCESSES  9 on GPU 1"), "{s}");
    let dp = s.lines().find(|l| first_pid(l) == Some(10_003)).unwrap();
    assert!(dp.contains(" 1 ") && dp.contains("3.00 GiB"), "{dp}");
    chars(&mut app, "1");
    assert_eq!(app.gpu, None, "the same digit again: all GPUs");
    chars(&mut app, "9");
    assert_eq!(app.gpu, None);
    assert!(screen(&mut app, 160, 45).contains("no GPU 9"));
}

#[test]
fn k_names_the_process_asks_which_signal_and_sends_only_when_confirmed() {
    let mut app = app_with(desktop());
    app.selected_pid = Some(4242);
    chars(&mut app, "k");
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("PID 4242 llama-server (user ana)"), "{s}");
    assert!(s.contains("> 1 SIGTERM") && s.contains("6 SIGCONT"), "{s}");
    key(&mut app, KeyCode::Down);
    assert_eq!(key(&mut app, KeyCode::Enter), Action::Redraw);
    let s = screen(&mut app, 100, 30);
    assert!(
        s.contains("Send SIGINT to:") && s.contains("PID 4242 llama-server (user ana)"),
        "{s}"
    );
    // Anything else than yes or no does nothing while it asks.
    assert_eq!(key(&mut app, KeyCode::Char('x')), Action::None);
    let target = Target {
        pid: 4242,
        start_time: Some("2026-11-30T09:00:00.000Z".into()),
    };
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        Action::Signal(Signal::Int, vec![target])
    );
    assert!(app.picker.is_none());
    // Esc closes the picker and nothing else.
    chars(&mut app, "k");
    assert_eq!(key(&mut app, KeyCode::Esc), Action::Redraw);
    assert!(app.picker.is_none());
    assert_eq!(key(&mut app, KeyCode::Esc), Action::Redraw, "Esc never quits");
}

#[test]
fn space_tags_several_and_k_signals_them_all() {
    let mut app = app_with(desktop());
    app.selected_pid = Some(1468);
    chars(&mut app, " ");
    assert_eq!(app.selected_pid, Some(4242), "space moves on");
    chars(&mut app, " ");
    let s = screen(&mut app, 100, 30);
    assert!(s.contains("+dwm.exe") && s.contains("+llama-server"), "{s}");
    assert!(s.contains("2 tagged"), "{s}");
    chars(&mut app, "k");
    let s = screen(&mut app, 100, 30);
    assert!(
        s.contains("PID 1468 dwm.exe (user ana)") && s.contains("PID 4242 llama-server"),
        "{s}"
    );
    key(&mut app, KeyCode::Enter);
    let Action::Signal(Signal::Term, targets) = key(&mut app, KeyCode::Enter) else {
        panic!("no signal")
    };
    assert_eq!(targets.iter().map(|t| t.pid).collect::<Vec<_>>(), [1468, 4242]);
    assert!(app.tagged.is_empty());
}

#[test]
fn readonly_and_replay_refuse_k() {
    for (readonly, replay, says) in [(true, false, "read-only view"), (false, true, "a recording")] {
        let mut app = App::new(false, replay);
        app.readonly |= readonly;
        app.show(desktop());
        assert_eq!(key(&mut app, KeyCode::Char('k')), Action::Redraw);
        assert!(app.picker.is_none());
        let s = screen(&mut app, 120, 30);
        assert!(s.contains(says), "{s}");
        assert!(!s.contains("k signal"), "not offered: {s}");
    }
}

#[test]
fn t_draws_children_under_their_parents_and_a_loop_once() {
    let mut app = app_with(server(1, 6));
    chars(&mut app, "t");
    let s = screen(&mut app, 120, 30);
    let rows = table_rows(&s);
    let parent = rows.iter().position(|l| first_pid(l) == Some(10_000)).unwrap();
    assert_eq!(first_pid(rows[parent + 1]), Some(10_001), "{s}");
    // The branch and the name, cut on the right as text is.
    assert!(rows[parent + 1].contains(" └─ VLLM::Engin…"), "{s}");
    assert!(s.contains("as a tree"), "{s}");
    // A forged recording where two processes are each other's parent.
    let mut forged = server(1, 6);
    forged.processes[3].ppid = Some(forged.processes[4].pid);
    forged.processes[4].ppid = Some(forged.processes[3].pid);
    let mut app = app_with(forged);
    chars(&mut app, "t");
    let mut pids: Vec<u32> = app.rows().iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    assert_eq!(pids, (10_000..10_006).collect::<Vec<_>>());
    // A forged chain 5000 deep: every row once, the branches drawn only
    // so deep (not 15,000 columns a row).
    let mut deep = server(1, 3);
    let template = deep.processes[0].clone();
    deep.processes = (0..5000u32)
        .map(|n| crate::snapshot::Process {
            pid: 50_000 + n,
            ppid: n.checked_sub(1).map(|p| 50_000 + p),
            ..template.clone()
        })
        .collect();
    let mut app = app_with(deep);
    chars(&mut app, "t");
    let rows = app.tree_rows();
    assert_eq!(rows.len(), 5000);
    assert!(
        rows.iter().all(|(_, branch)| branch.chars().count() <= 27),
        "{:?}",
        rows.last()
    );
    screen(&mut app, 120, 30);
}

#[test]
fn u_cycles_the_users_and_slash_matches_user_kind_runtime_and_model() {
    let mut app = app_with(server(2, 6));
    let users = |app: &App| {
        app.rows()
            .iter()
            .filter_map(|p| p.user.clone())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(users(&app).len(), 3);
    chars(&mut app, "u");
    assert_eq!(users(&app), BTreeSet::from(["ana".to_string()]));
    assert!(screen(&mut app, 120, 30).contains(", user ana"));
    chars(&mut app, "uu");
    assert_eq!(users(&app), BTreeSet::from(["svc".to_string()]));
    chars(&mut app, "u");
    assert_eq!(app.user, None);
    chars(&mut app, "/root");
    key(&mut app, KeyCode::Enter);
    assert_eq!(users(&app), BTreeSet::from(["root".to_string()]));
    for (needle, pid) in [("compositor", 1468), ("onnxruntime", 6010), ("qwen3", 4242)] {
        let mut app = app_with(desktop());
        chars(&mut app, &format!("/{needle}"));
        let pids: Vec<u32> = app.rows().iter().map(|p| p.pid).collect();
        assert_eq!(pids, [pid], "{needle}");
    }
}

/// The 8-GPU server with a llama-server on GPU 4 and one on GPU 6 (each
/// with a model), a process on GPUs 4 and 5, an AI runtime on no GPU with a
/// model and an idle process on no GPU: 66 processes.
fn server_with_models_on_other_gpus() -> Snapshot {
    let mut s = server(8, 8);
    for pid in [10_400, 10_600] {
        let p = s.processes.iter_mut().find(|p| p.pid == pid).unwrap();
        p.name = Some("llama-server".into());
        p.models = vec![super::fixture::qwen()];
    }
    let both = s.processes.iter_mut().find(|p| p.pid == 10_403).unwrap();
    both.gpu.push(super::fixture::usage(5, Some(1 << 30), &["C"], Some(5)));
    let template = s.processes[0].clone();
    let mut on_cpu = crate::snapshot::Process {
        pid: 20_000,
        gpu: vec![],
        models: vec![super::fixture::qwen()],
        ..template.clone()
    };
    on_cpu.name = Some("llama-cli".into());
    let idle = crate::snapshot::Process {
        pid: 20_001,
        gpu: vec![],
        name: Some("sshd".into()),
        ..template
    };
    s.processes.extend([on_cpu, idle]);
    s
}

#[test]
fn picking_a_gpu_lists_only_its_processes_and_the_title_parts_add_up() {
    let mut app = app_with(server_with_models_on_other_gpus());
    assert_eq!(app.snapshot.as_ref().unwrap().processes.len(), 66);
    chars(&mut app, "5");
    for (w, h) in [(80, 24), (120, 35), (160, 45)] {
        let s = screen(&mut app, w, h);
        // 8 of its own and the one on GPUs 4 and 5 (counted once, on 5),
        // the model on the CPU, 55 on other GPUs, the idle one: 66.
        assert!(
            s.contains("PROCESSES  9 on GPU 5, 1 on no GPU, 55 on other GPUs"),
            "{w}x{h}\n{s}"
        );
    }
    let c = app.counts();
    assert_eq!(c.on_chosen + c.on_no_gpu_listed + c.on_other_gpus + c.hidden, 66);
    // The llama-servers on GPUs 4 and 6 are on other GPUs: not rows that
    // would say GPU `-` (on no GPU) and VRAM `-`.
    let mut pids: Vec<u32> = app.rows().iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    let mut want: Vec<u32> = (10_500..10_508).chain([10_403, 20_000]).collect();
    want.sort_unstable();
    assert_eq!(pids, want);
    let s = screen(&mut app, 160, 45);
    let both = s.lines().find(|l| first_pid(l) == Some(10_403)).unwrap();
    assert!(both.contains(" 5 ") && both.contains("1.00 GiB"), "{both}");
    // `a`: the idle one too; still each process once.
    chars(&mut app, "a");
    let s = screen(&mut app, 160, 45);
    assert!(
        s.contains("PROCESSES  9 on GPU 5, 2 on no GPU, 55 on other GPUs"),
        "{s}"
    );
    assert!(!s.contains("not on a GPU"), "{s}");
    for p in app.rows().into_iter().filter(|p| !p.gpu.is_empty()) {
        assert!(app.on_gpu(p), "{} is on another GPU, listed as on none", p.pid);
    }
    // All GPUs: the 64 on GPUs and the model on the CPU shown, 1 left out.
    chars(&mut app, "a5");
    let s = screen(&mut app, 160, 45);
    assert!(s.contains("PROCESSES  65 shown, 1 more not on a GPU"), "{s}");
}

/// One H100 with an `ollama serve` (no VRAM) whose runner holds the most,
/// under a shell, and an idle `sshd`.
fn server_with_ollama() -> Snapshot {
    let mut s = server(1, 6);
    let template = s.processes[3].clone();
    let process = |pid: u32, ppid: Option<u32>, name: &str, vram: Option<u64>| {
        let mut p = crate::snapshot::Process {
            pid,
            ppid,
            gpu: vram
                .map(|v| vec![super::fixture::usage(0, Some(v), &["C"], Some(50))])
                .unwrap_or_default(),
            cpu_percent: None,
            ..template.clone()
        };
        p.name = Some(name.into());
        p
    };
    s.processes.extend([
        process(30_000, Some(1), "bash", None),
        process(30_001, Some(30_000), "ollama", None),
        process(30_002, Some(30_001), "ollama_llama_server", Some(20 << 30)),
        process(30_003, None, "sshd", None),
    ]);
    s
}

#[test]
fn t_keeps_the_ancestors_dimmed_and_sorts_a_subtree_by_its_heaviest() {
    let mut app = App::new(true, false);
    app.show(server_with_ollama());
    chars(&mut app, "t");
    let order = |app: &App| {
        app.tree_rows()
            .iter()
            .map(|(p, b)| (p.pid, b.clone()))
            .collect::<Vec<_>>()
    };
    let rows = order(&app);
    // The runner is the heaviest: its shell and `ollama serve` come first,
    // though neither holds VRAM nor would be listed without `t`.
    assert_eq!(
        rows[..3],
        [
            (30_000, String::new()),
            (30_001, "└─ ".to_string()),
            (30_002, "   └─ ".to_string())
        ],
        "{rows:?}"
    );
    assert!(!rows.iter().any(|(pid, _)| *pid == 30_003), "{rows:?}");
    let mut t = Terminal::new(TestBackend::new(160, 45)).unwrap();
    t.draw(|f| render::draw(f, &mut app)).unwrap();
    let buf = t.backend().buffer().clone();
    let line_of = |pid: u32| {
        (0..45u16)
            .find(|&y| {
                let line: String = (0..160u16).map(|x| buf[(x, y)].symbol().to_string()).collect();
                first_pid(&line) == Some(pid)
            })
            .unwrap()
    };
    let fg = |y: u16| buf[(2, y)].fg;
    assert_eq!(fg(line_of(30_001)), ratatui::style::Color::DarkGray);
    assert_eq!(fg(line_of(30_000)), ratatui::style::Color::DarkGray);
    assert_ne!(fg(line_of(10_001)), ratatui::style::Color::DarkGray);
    let s: String = (0..160u16)
        .map(|x| buf[(x, 0)].symbol().to_string())
        .collect::<String>();
    let title = (0..45u16)
        .map(|y| {
            (0..160u16)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .find(|l| l.contains("PROCESSES"))
        .unwrap_or(s);
    assert!(title.contains("as a tree with 2 parents dimmed"), "{title}");
    // `a`: the idle rows (sshd, the VRAM-less shell) sort last by VRAM,
    // but the subtree goes where its heaviest member does: first.
    chars(&mut app, "a");
    let rows = order(&app);
    assert_eq!(rows[0].0, 30_000, "{rows:?}");
    assert_eq!(rows[2].0, 30_002, "{rows:?}");
    let sshd = rows.iter().position(|(pid, _)| *pid == 30_003).unwrap();
    assert!(sshd > 2, "{rows:?}");
}
