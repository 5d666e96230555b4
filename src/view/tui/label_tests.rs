//! Labels that say only what is so: the sorted column's name, sort keys
//! with something to order, "what is inside" only where there is GPU
//! memory, discovery in the past tense in a replay, and notes only on the
//! platform they are true of.

use super::app::{App, SortKey};
use super::fixture::{desktop, overcounted};
use super::tests::{app_with, key, row, screen};
use crate::snapshot::Snapshot;

/// The table's header line.
fn header(s: &str) -> &str {
    s.lines()
        .find(|l| l.trim_start().starts_with("PID "))
        .unwrap_or_else(|| panic!("no header in\n{s}"))
}

#[test]
fn the_sorted_columns_header_keeps_its_name() {
    for sort in [SortKey::Gpu, SortKey::Cpu, SortKey::Vram] {
        for full in [false, true] {
            for width in [120, 160] {
                let mut app = app_with(desktop());
                app.sort = sort;
                app.full_columns = Some(full);
                let s = screen(&mut app, width, 48);
                let words: Vec<&str> = header(&s).split_whitespace().collect();
                // The name whole, with its arrow: "GPU%↓", never "PU%↓".
                let shown = format!("{}↓", sort.label());
                assert!(words.contains(&shown.as_str()), "{sort:?} {full} {width}: {words:?}");
            }
        }
    }
}

/// The desktop with no spill figure anywhere (NVML on Linux).
fn no_spill() -> Snapshot {
    let mut s = desktop();
    for p in &mut s.processes {
        for g in &mut p.gpu {
            g.spill_bytes = None;
        }
    }
    s
}

#[test]
fn s_skips_a_column_no_row_has_a_value_in() {
    for full in [false, true] {
        let mut app = app_with(no_spill());
        app.full_columns = Some(full);
        screen(&mut app, 160, 48);
        assert_eq!(app.sort, SortKey::Vram);
        key(&mut app, 's');
        assert_eq!(
            app.sort,
            SortKey::Gpu,
            "SPILL is n/a on every row (full columns: {full})"
        );
    }
    // With a spill figure somewhere, SPILL is next.
    let mut app = app_with(desktop());
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Spill);
}

#[test]
fn what_is_inside_is_said_only_of_processes_that_hold_gpu_memory() {
    let mut s = desktop();
    // A llama.cpp server on the CPU: its model is in RAM, not in a GPU.
    let llama = s.processes.iter_mut().find(|p| p.pid == 4242).unwrap();
    llama.gpu.clear();
    let mut app = app_with(s);
    app.show_all = true;
    let s = screen(&mut app, 200, 48);
    // The command line last, where there is room for it.
    let last_words: Vec<&str> = header(&s).split_whitespace().rev().take(2).collect();
    assert_eq!(last_words, ["COMMAND", "INSIDE"], "{s}");
    let torch = row(&s, "5150");
    let last_two: Vec<&str> = torch.split_whitespace().rev().take(2).collect();
    assert_eq!(last_two, ["python3", "-"], "{torch}");
    assert!(!torch.contains("tensors"), "{torch}");
    // The server's model is not inside a GPU; what it is doing still shows.
    let server = row(&s, "4242");
    assert!(server.contains(" - · now 1/4 busy"), "{server}");
    assert!(!server.contains("weights"), "{server}");
    // On the GPU it is said.
    assert!(row(&s, "1468").contains("window surfaces"), "{s}");
}

#[test]
fn a_replay_speaks_of_discovery_in_the_past() {
    let mut s = desktop();
    let llama = s.processes.iter_mut().find(|p| p.pid == 4242).unwrap();
    llama.models.clear();
    llama.models_pending = true;
    for (replay, cell, title, note) in [
        (
            false,
            "discovering…",
            "discovering models…",
            "Model discovery has not looked at this process yet",
        ),
        (
            true,
            "was being discovered",
            "models were being discovered",
            "Model discovery had not looked at this process yet when this was recorded",
        ),
    ] {
        let mut app = App::new(false, replay);
        app.show(s.clone());
        app.selected_pid = Some(4242);
        let screen = screen(&mut app, 160, 48);
        assert!(row(&screen, "4242").contains(cell), "{screen}");
        assert!(screen.lines().next().unwrap().contains(title), "{screen}");
        assert!(screen.contains(note), "{screen}");
        if replay {
            assert!(!screen.contains("discovering"), "{screen}");
        }
    }
}

/// The desktop as a Linux machine's NVML sees it: no driver model.
fn linux(mut s: Snapshot) -> Snapshot {
    s.host.os = "linux".into();
    for d in &mut s.devices {
        d.driver_model = None;
    }
    s
}

#[test]
fn notes_appear_only_on_the_platform_they_are_true_of() {
    // Unknown VRAM on Linux: no word of WDDM.
    let mut app = app_with(linux(desktop()));
    app.selected_pid = Some(9120);
    let s = screen(&mut app, 160, 48);
    assert!(
        s.contains("note: VRAM n/a: the driver did not say what this process holds"),
        "{s}"
    );
    assert!(!s.contains("WDDM"), "{s}");
    // Rows over the device's used on NVML: no note about WDDM's
    // Dedicated Usage (the bar says it is normalized).
    let mut app = app_with(linux(overcounted()));
    app.selected_pid = Some(1468);
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("NORMALIZED"), "{s}");
    assert!(!s.contains("Dedicated Usage"), "{s}");
    // Where the Windows counters measured the row, it is said.
    let mut w = desktop();
    w.processes.iter_mut().find(|p| p.pid == 1468).unwrap().gpu[0].source = "wddm".into();
    let mut app = app_with(w);
    app.selected_pid = Some(1468);
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("note: Dedicated Usage double-counts surfaces"), "{s}");
}

#[test]
fn what_is_inside_says_only_what_evidence_shows() {
    use super::describe::inside;
    use super::fixture::{process, usage};
    use crate::snapshot::ProcessKind;
    // A vLLM worker with 62 GiB: vLLM by its command line, PyTorch and
    // CUDA by their libraries; the most telling is said, with its evidence.
    let mut worker = process(7001, "python3", ProcessKind::Ai, None, 4096);
    worker.runtimes = vec!["cuda".into(), "pytorch".into(), "vllm".into()];
    worker.gpu = vec![usage(0, Some(62 << 30), &["C"], None)];
    assert_eq!(inside(&worker, false), "vllm (name or command line)");
    // train.py with 4 GiB: libtorch mapped.
    let mut train = process(7002, "python3", ProcessKind::Ai, None, 2048);
    train.cmdline = Some("python3 train.py".into());
    train.runtimes = vec!["cudart".into(), "pytorch".into()];
    train.gpu = vec![usage(0, Some(4 << 30), &["C"], None)];
    assert_eq!(inside(&train, false), "pytorch (library loaded)");
    // A llama-server found by its name or its libllama.
    let mut llama = process(7003, "llama-server", ProcessKind::Ai, None, 512);
    llama.runtimes = vec!["llama.cpp".into()];
    llama.gpu = vec![usage(0, Some(1 << 30), &["C"], None)];
    assert_eq!(inside(&llama, false), "llama.cpp (name or library)");
    // A PID the driver lists and /proc does not: nothing is known, nothing
    // is said (its compute context says nothing of what fills it).
    let mut ghost = process(7004, "x", ProcessKind::Other, None, 0);
    ghost.name = None;
    ghost.cmdline = None;
    ghost.user = None;
    ghost.rss_bytes = None;
    ghost.gpu = vec![usage(0, Some(2 << 30), &["C"], None)];
    assert_eq!(inside(&ghost, false), "");
    // Only a runtime name the view knows is ever said: a forged one is not
    // echoed into the column.
    ghost.runtimes = vec!["\u{1b}]0;pwned\u{7}".into()];
    assert_eq!(inside(&ghost, false), "");
    // The 8-GPU server's PyTorch jobs with no runtime found: no guess.
    let mut app = app_with(super::fixture::server(8, 8));
    for (w, h) in [(80, 24), (120, 35), (200, 50)] {
        let s = screen(&mut app, w, h);
        for guess in ["CUDA context", "model runtime buffers", "ML runtime tensors"] {
            assert!(!s.contains(guess), "{guess} at {w}x{h}\n{s}");
        }
    }
}
