//! The live view rendered to ratatui's TestBackend from snapshots built
//! here (fixture.rs): what a person sees, asserted line by line, and the
//! whole screen compared with the committed insta snapshots in
//! tests/snapshots/.

use super::app::{Action, App, SortKey};
use super::feed::{FeedCommand, Update};
use super::fixture::{self, desktop, overcounted};
use super::render;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::style::Color;
use ratatui::Terminal;

fn draw(app: &mut App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render::draw(f, app)).unwrap();
    t
}

/// The screen as text, one line per row, trailing blanks trimmed.
pub(super) fn screen(app: &mut App, w: u16, h: u16) -> String {
    let t = draw(app, w, h);
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub(super) fn app_with(s: crate::snapshot::Snapshot) -> App {
    let mut app = App::new(false, false);
    // Times in UTC: the committed screens are the same in every time zone.
    app.zone = crate::units::Zone::Utc;
    app.feed_status = "live, every 1.0 s".into();
    app.show(s);
    app
}

pub(super) fn key(app: &mut App, c: char) -> Action {
    app.on_key(KeyEvent::from(KeyCode::Char(c)))
}

/// The line that starts (after blanks) with the PID.
pub(super) fn row<'a>(screen: &'a str, pid: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.trim_start().starts_with(pid))
        .unwrap_or_else(|| panic!("no row for {pid} in\n{screen}"))
}

/// The PIDs of the table rows, top to bottom.
fn pid_order(screen: &str) -> Vec<u32> {
    let pids = [1468, 4242, 7310, 7822, 6010, 9120, 5150];
    let table: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.starts_with("PROCESSES"))
        .skip(2)
        .take_while(|l| !l.starts_with('─') && !l.contains(" PID "))
        .collect();
    table
        .iter()
        .filter_map(|l| {
            // The first word, or the second after a fleet's HOST.
            l.split_whitespace().take(2).find_map(|word| {
                let pid: u32 = word.trim_end_matches(['*', '?']).parse().ok()?;
                pids.contains(&pid).then_some(pid)
            })
        })
        .collect()
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../../../tests/snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

#[test]
fn the_desktop_at_a_glance() {
    let mut app = app_with(desktop());
    let s = screen(&mut app, 200, 50);
    // Who holds the card: the device, its bar, the largest holders.
    assert!(
        s.contains("GPU 0 NVIDIA GeForce RTX 4080 SUPER  driver 580.159.03  CUDA 13.0  WDDM"),
        "{s}"
    );
    assert!(
        s.contains("5.01 GiB used of 15.99 GiB, 10.98 GiB free  shared 742.0 MiB"),
        "{s}"
    );
    assert!(s.contains("gpu 15%  mem act 30%  37 °C  power 26 W of 320 W"), "{s}");
    assert!(s.contains("█ dwm.exe 2.18 GiB"), "{s}");
    // What the model's KV cache costs, reported, drawn apart from measured.
    assert!(
        s.contains("▓ llama-server 1.31 GiB = W 604.2 MiB K 448.0 MiB C 149.4 MiB reported"),
        "{s}"
    );
    assert!(s.contains("W weights K KV cache C compute: not measured"), "{s}");
    assert!(s.contains("- no listed process 468.2 MiB"), "{s}");
    assert!(
        !s.contains("NORMALIZED"),
        "5.01 GiB used covers the rows: no scaling\n{s}"
    );
    let bar = s.lines().find(|l| l.starts_with("mem [")).unwrap();
    for glyph in ['█', 'W', 'K', 'C', '▒', '░', '-', '·'] {
        assert!(bar.contains(glyph), "{glyph} missing in {bar}");
    }
    // The model process's segment is its reported parts, right after the
    // compositor's: weights, KV cache, compute.
    assert!(bar.contains("█WWWKKC▒"), "{bar}");
    // Full columns at this width, sorted by VRAM.
    let header = s
        .lines()
        .find(|l| l.contains("PID") && l.contains("WHAT IS INSIDE"))
        .unwrap();
    for col in [
        "NAME", "KIND", "RUNTIME", "VRAM↓", "SPILL", "PAGED", "GPU%", "CPU%", "RSS", "MODEL",
    ] {
        assert!(header.contains(col), "{col} missing in {header}");
    }
    let llama = row(&s, "4242*");
    for cell in [
        "llama-server",
        "ai",
        "llama.cpp,cublas",
        "1.31 GiB",
        "712.0 MiB",
        "Qwen3-0.6B-Q8_0 [api✓]",
        "weights + KV cache (KV 448.0 MiB reported)",
    ] {
        assert!(llama.contains(cell), "{cell} missing in {llama}");
    }
    assert!(row(&s, "1468*").contains("window surfaces"));
    assert!(row(&s, "7310*").contains("page textures, video, canvas/WebGL"));
    let speech = row(&s, "6010*");
    assert!(speech.contains("96.0 MiB") && speech.contains("640.0 MiB") && speech.contains("32.0 MiB"));
    assert!(speech.contains("onnxruntime (library loaded)"), "{speech}");
    // Unknown is n/a, never 0.
    let discord = row(&s, "9120*");
    assert!(discord.contains("n/a"), "{discord}");
    assert!(!discord.contains(" 0 B"), "{discord}");
    // The process with nothing on a GPU waits for `a`.
    assert_eq!(pid_order(&s), vec![1468, 4242, 7310, 7822, 6010, 9120]);
    assert!(
        s.contains("PROCESSES  6 shown, 1 more not on a GPU (a shows all)"),
        "{s}"
    );
    settings().bind(|| insta::assert_snapshot!("tui_desktop_200x50", s));
}

#[test]
fn a_model_row_says_what_the_runtime_is_doing_now_where_it_fits() {
    let mut app = app_with(desktop());
    // Wide enough: busy slots and generated tokens a second in the row.
    let wide = screen(&mut app, 250, 50);
    let llama = row(&wide, "4242*");
    assert!(
        llama.contains("weights + KV cache (KV 448.0 MiB reported) · now 1/4 busy, 31 tok/s"),
        "{llama}"
    );
    // Narrower, it is cut from the right and marked, the memory kept whole.
    let narrow = screen(&mut app, 180, 50);
    let llama = row(&narrow, "4242*");
    assert!(llama.ends_with('…') && llama.contains("(KV 448.0 M"), "{narrow}");
}

#[test]
fn the_model_detail_shows_estimate_reported_and_measured_side_by_side() {
    let mut app = app_with(desktop());
    app.selected_pid = Some(4242);
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("PID 4242 llama-server"), "{s}");
    assert!(
        s.contains("model Qwen3-0.6B-Q8_0 [api✓]  qwen3, Q8_0, 596M params, 28 layers"),
        "{s}"
    );
    let line = |label: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("{label} missing\n{s}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("weights"), "weights KV cache compute total source");
    assert_eq!(
        line("estimated"),
        "estimated 604.2 MiB 448.0 MiB 149.4 MiB 1.17 GiB GGUF header + settings"
    );
    // The estimate's rows, one a device, as `model` prints them.
    assert_eq!(
        line("GPU 0: weights"),
        "GPU 0: weights 604.2 MiB + KV 448.0 MiB + compute 149.4 MiB + output 0 B (estimated, cuda)"
    );
    assert_eq!(
        line("host: weights"),
        "host: weights 0 B + KV 0 B + compute 0 B + output 593.5 KiB (estimated, cuda)"
    );
    assert_eq!(
        line("reported"),
        "reported 604.2 MiB 448.0 MiB 149.4 MiB 1.17 GiB log:/home/ana/llama.log"
    );
    assert!(line("measured").starts_with("measured n/a n/a n/a 1.31 GiB"));
    assert!(s.contains("KV per token 112.0 KiB"), "{s}");
    assert!(
        s.contains("evidence: api (the runtime's local API says it is loaded), mapped (the file is memory-mapped into the process now), cmdline (the file is a launch argument);"),
        "{s}"
    );
    assert!(s.contains("confirmed: two sources, one of them api or mapped"), "{s}");
    assert!(s.contains("settings: context 4096 (trained 40960) · slots 1/4 busy · cache K f16 V f16 · kv unified · GPU layers 99 · flash attn auto · ubatch 256"), "{s}");
    assert!(
        s.contains("now: requests 1 running, 0 waiting · tokens/s prompt 412.5, generation 31.2"),
        "{s}"
    );
    assert!(
        s.contains("server: http://127.0.0.1:8080  file /models/Qwen3-0.6B-Q8_0.gguf"),
        "{s}"
    );
    assert!(
        s.contains("note: Measured VRAM is 139.9 MiB more than the runtime's buffers"),
        "{s}"
    );
    assert!(s.contains("--api-key <redacted>"), "{s}");
    assert!(s.contains("VRAM over time "), "{s}");
    assert!(!s.contains("pool:"), "llama.cpp says no pool of its own\n{s}");
}

#[test]
fn the_model_detail_shows_the_servers_own_kv_pool() {
    let mut snap = desktop();
    let p = snap.processes.iter_mut().find(|p| p.pid == 4242).unwrap();
    p.models[0].runtime = Some(crate::snapshot::runtime_report::RuntimeReport {
        kv_tokens: Some(1_048_576),
        kv_blocks: Some(8192),
        kv_block_size: Some(128),
        kv_pool_device: Some("CPU".into()),
        max_concurrency: Some(2048.0),
        max_model_len: Some(512),
        memory_utilization: Some(0.5),
        ..Default::default()
    });
    let mut app = app_with(snap);
    app.selected_pid = Some(4242);
    let s = screen(&mut app, 180, 48);
    assert!(
        s.contains("pool: KV pool 1048576 tokens (CPU), 8192 blocks of 128 · 2048.00x requests of 512 tokens · memory utilization 0.5"),
        "{s}"
    );
}

/// SGLang says its pages' size, not their count; TGI 3 says neither.
#[test]
fn a_pool_without_a_block_count_says_what_is_known() {
    use crate::snapshot::runtime_report::RuntimeReport;
    let sglang = RuntimeReport {
        kv_tokens: Some(20480),
        kv_block_size: Some(1),
        memory_utilization: Some(0.841),
        ..Default::default()
    };
    assert_eq!(
        crate::view::runtime_pool(&sglang),
        "KV pool 20480 tokens, blocks of 1 · memory utilization 0.841"
    );
    let tgi = RuntimeReport {
        kv_tokens: Some(52125),
        ..Default::default()
    };
    assert_eq!(crate::view::runtime_pool(&tgi), "KV pool 52125 tokens");
    let none = RuntimeReport::default();
    assert_eq!(crate::view::runtime_pool(&none), "KV pool n/a tokens");
}

#[test]
fn notes_explain_spill_paged_and_unknown_vram() {
    let mut app = app_with(desktop());
    app.selected_pid = Some(6010);
    let s = screen(&mut app, 160, 48);
    assert!(
        s.contains(
            "note: Spill is GPU-accessible system RAM, not proof that VRAM overflowed. Here it is larger than VRAM"
        ),
        "{s}"
    );
    assert!(s.contains("note: Paged is an estimate"), "{s}");
    app.selected_pid = Some(9120);
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("VRAM n/a measured"), "{s}");
    assert!(
        s.contains("note: VRAM n/a: NVIDIA's driver under Windows WDDM reports no per-process figure"),
        "{s}"
    );
}

#[test]
fn the_bar_is_normalized_and_labelled_when_rows_exceed_used() {
    let mut app = app_with(overcounted());
    let s = screen(&mut app, 160, 48);
    assert!(
        s.contains("NORMALIZED: rows add up to 4.55 GiB, more than the 4.00 GiB the device reports used; segments scaled to it."),
        "{s}"
    );
    assert!(!s.contains("no listed process"), "{s}");
    // The bar's filled part is the device's used share (4 of 15.99 GiB),
    // not the rows' sum.
    let bar = s.lines().find(|l| l.starts_with("mem [")).unwrap();
    let inside: String = bar["mem [".len()..].chars().take_while(|c| *c != ']').collect();
    let filled = inside.chars().filter(|c| *c != '·').count() as f64;
    let share = filled / inside.chars().count() as f64;
    assert!((share - 4.0 / 15.99).abs() < 0.02, "{share} in {bar}");
    // NVML's rows are not the Windows counters': no note about those.
    assert!(!s.contains("Dedicated Usage"), "{s}");
}

#[test]
fn s_cycles_the_sort_and_capital_s_reverses_it() {
    let mut app = app_with(desktop());
    let order = |app: &mut App| pid_order(&screen(app, 160, 48));
    assert_eq!(order(&mut app), vec![1468, 4242, 7310, 7822, 6010, 9120]);
    assert_eq!(key(&mut app, 's'), Action::Redraw);
    assert_eq!(app.sort, SortKey::Spill);
    // Only the speech app has a spill figure; n/a sorts last, by PID.
    assert_eq!(order(&mut app), vec![6010, 1468, 4242, 7310, 7822, 9120]);
    assert!(screen(&mut app, 160, 48).contains("SPILL↓"));
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Gpu);
    assert_eq!(order(&mut app), vec![4242, 1468, 7310, 6010, 7822, 9120]);
    key(&mut app, 'S');
    // Reversed, and unknown still last: n/a is not small.
    assert_eq!(order(&mut app), vec![7822, 6010, 7310, 1468, 4242, 9120]);
    assert!(screen(&mut app, 160, 48).contains("GPU%↑"));
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Cpu);
    assert_eq!(order(&mut app), vec![4242, 6010, 7310, 1468, 9120, 7822]);
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Name);
    assert_eq!(order(&mut app), vec![7310, 9120, 1468, 4242, 7822, 6010]);
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Pid);
    assert_eq!(order(&mut app), vec![1468, 4242, 6010, 7310, 7822, 9120]);
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Vram);
}

#[test]
fn a_shows_all_processes_and_m_toggles_the_columns() {
    let mut app = app_with(desktop());
    let s = screen(&mut app, 120, 40);
    assert_eq!(app.full_columns, Some(false), "narrower than 150: slim");
    let header = s.lines().find(|l| l.contains("WHAT IS INSIDE")).unwrap();
    assert!(!header.contains("KIND") && !header.contains("RSS"), "{header}");
    assert!(!s.contains("python3"));
    // The feed is told, so a live one reads the processes no longer hidden
    // every sample.
    assert_eq!(key(&mut app, 'a'), Action::Feed(FeedCommand::ShowAll(true)));
    let s = screen(&mut app, 120, 40);
    let torch = row(&s, "5150");
    assert!(torch.contains("python3"), "{torch}");
    // Not on a GPU: "-", which is not "n/a" (unknown) and not 0.
    assert!(torch.split_whitespace().any(|c| c == "-"), "{torch}");
    assert!(s.contains("PROCESSES  7 shown"), "{s}");
    key(&mut app, 'm');
    // Full columns where they fit (at 120 the drop order leaves them out).
    let s = screen(&mut app, 200, 40);
    let header = s.lines().find(|l| l.contains("PID") && l.contains("NAME")).unwrap();
    assert!(
        header.contains("KIND") && header.contains("RUNTIME") && header.contains("PAGED"),
        "{header}"
    );
    // The footer says what m does, not which set is shown.
    assert!(s.contains("m columns"), "{s}");
    key(&mut app, 'm');
    let s = screen(&mut app, 200, 40);
    let header = s.lines().find(|l| l.contains("PID") && l.contains("NAME")).unwrap();
    assert!(!header.contains("KIND") && !header.contains("PAGED"), "{header}");
}

#[test]
fn discovering_is_shown_until_discovery_lands() {
    let mut s = desktop();
    let llama = s.processes.iter_mut().find(|p| p.pid == 4242).unwrap();
    llama.models.clear();
    llama.models_pending = true;
    let mut app = app_with(s);
    app.selected_pid = Some(4242);
    let screen1 = screen(&mut app, 160, 48);
    assert!(
        screen1.lines().next().unwrap().contains("discovering models…"),
        "{screen1}"
    );
    assert!(row(&screen1, "4242*").contains("discovering…"), "{screen1}");
    assert!(
        screen1.contains("note: Model discovery has not looked at this process yet"),
        "{screen1}"
    );
    // It lands on the next sample.
    app.apply(Update::Next(Box::new(desktop())));
    let screen2 = screen(&mut app, 160, 48);
    assert!(!screen2.contains("discovering"), "{screen2}");
    assert!(row(&screen2, "4242*").contains("Qwen3-0.6B-Q8_0 [api✓]"));
}

#[test]
fn question_mark_opens_what_can_be_known_and_esc_closes_it() {
    let mut app = app_with(desktop());
    // `?` lists the keys; `e` in it explains.
    key(&mut app, '?');
    key(&mut app, 'e');
    // Tall enough for every layer (the overlay scrolls on a smaller one).
    let s = screen(&mut app, 120, 64);
    assert!(s.contains(crate::view::explain::TITLE), "{s}");
    assert!(s.contains("Per-process VRAM [measured]"), "{s}");
    assert!(s.contains("Weights / KV cache / compute buffers"), "{s}");
    #[cfg(target_os = "linux")]
    assert!(s.contains("NVML") && s.contains("DRM fdinfo"), "{s}");
    app.on_key(KeyEvent::from(KeyCode::Down));
    assert_eq!(app.overlay, Some(1));
    assert_eq!(app.on_key(KeyEvent::from(KeyCode::Esc)), Action::Redraw);
    assert!(app.overlay.is_none());
    assert!(!screen(&mut app, 120, 40).contains(crate::view::explain::TITLE));
    // q quits from the overlay too; Esc with no overlay does not: one Esc
    // too many keeps the view.
    key(&mut app, '?');
    assert_eq!(key(&mut app, 'q'), Action::Quit);
    app.overlay = None;
    assert_eq!(app.on_key(KeyEvent::from(KeyCode::Esc)), Action::Redraw);
    assert_eq!(key(&mut app, 'q'), Action::Quit);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(app.on_key(ctrl_c), Action::Quit);
}

#[test]
fn slash_filters_by_name() {
    let mut app = app_with(desktop());
    key(&mut app, '/');
    for c in "CHR".chars() {
        key(&mut app, c);
    }
    let typing = screen(&mut app, 120, 40);
    assert!(typing.contains("filter: CHR▏"), "{typing}");
    // While typing, q is a letter, not quit.
    assert_eq!(key(&mut app, 'q'), Action::Redraw);
    app.on_key(KeyEvent::from(KeyCode::Backspace));
    app.on_key(KeyEvent::from(KeyCode::Enter));
    let s = screen(&mut app, 120, 40);
    assert_eq!(pid_order(&s), vec![7310]);
    assert!(s.contains("filter \"CHR\""), "{s}");
    // Esc clears the filter before it quits.
    assert_eq!(app.on_key(KeyEvent::from(KeyCode::Esc)), Action::Redraw);
    assert_eq!(pid_order(&screen(&mut app, 120, 40)).len(), 6);
    // A model name matches too.
    key(&mut app, '/');
    for c in "qwen".chars() {
        key(&mut app, c);
    }
    assert_eq!(pid_order(&screen(&mut app, 120, 40)), vec![4242]);
}

#[test]
fn slash_filters_a_fleet_by_host_and_the_host_column_names_each_row() {
    let mut snap = desktop();
    for p in &mut snap.processes {
        p.host = Some(if p.pid == 4242 { "gpu-node-7" } else { "gpu-node-1" }.into());
    }
    let mut app = app_with(snap);
    let all = screen(&mut app, 160, 40);
    assert!(all.contains("HOST"), "{all}");
    assert!(all.contains("gpu-node-7"), "{all}");
    key(&mut app, '/');
    for c in "node-7".chars() {
        key(&mut app, c);
    }
    app.on_key(KeyEvent::from(KeyCode::Enter));
    assert_eq!(pid_order(&screen(&mut app, 160, 40)), vec![4242]);
}

#[test]
fn s_sorts_a_fleet_by_host_after_the_pid_and_a_local_view_passes_it_by() {
    let mut snap = desktop();
    for p in &mut snap.processes {
        p.host = Some(
            if [4242, 7310].contains(&p.pid) {
                "GPU-node-7"
            } else {
                "gpu-node-1"
            }
            .into(),
        );
    }
    let mut app = app_with(snap);
    while app.sort != SortKey::Pid {
        key(&mut app, 's');
    }
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Host);
    let s = screen(&mut app, 160, 40);
    assert!(s.contains("HOST↑"), "{s}");
    // By host, case aside, then by PID within a host.
    assert_eq!(pid_order(&s), vec![1468, 6010, 7822, 9120, 4242, 7310]);
    // Reversed, ties stay by PID.
    key(&mut app, 'S');
    assert_eq!(
        pid_order(&screen(&mut app, 160, 40)),
        vec![4242, 7310, 1468, 6010, 7822, 9120]
    );
    key(&mut app, 's');
    assert_eq!(app.sort, SortKey::Vram);
    // No row has a host: `s` goes from PID back to VRAM (the test above).
}

#[test]
fn p_pauses_the_screen_and_resume_catches_up() {
    let mut app = app_with(desktop());
    assert_eq!(key(&mut app, 'p'), Action::Redraw);
    let mut later = desktop();
    later.devices[0].memory_used_bytes = Some(6 << 30);
    later.taken_at = "2026-11-30T17:32:00.000Z".into();
    app.apply(Update::Next(Box::new(later)));
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("PAUSED"), "{s}");
    assert!(s.contains("5.01 GiB used"), "paused: the old figures stay\n{s}");
    key(&mut app, 'p');
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("6.00 GiB used"), "{s}");
    assert!(!s.contains("PAUSED"));
    assert_eq!(app.history.device(0).len(), 2, "held samples reach the sparkline");
}

#[test]
fn selection_follows_the_process_and_the_mouse_selects() {
    let mut app = app_with(desktop());
    screen(&mut app, 160, 48);
    app.on_key(KeyEvent::from(KeyCode::Down));
    assert_eq!(app.selected_pid, Some(4242));
    key(&mut app, 's'); // by spill: llama-server moves to row 3
    let s = screen(&mut app, 160, 48);
    assert!(
        s.contains("PID 4242 llama-server"),
        "the selection follows the PID\n{s}"
    );
    app.on_key(KeyEvent::from(KeyCode::End));
    assert_eq!(app.selected_pid, Some(9120));
    app.on_key(KeyEvent::from(KeyCode::Home));
    assert_eq!(app.selected_pid, Some(6010));
    app.on_key(KeyEvent::from(KeyCode::PageDown));
    assert_eq!(app.selected_pid, Some(9120));
    // A click on the table's second row.
    screen(&mut app, 160, 48);
    let body = app.layout.table_body;
    let click = MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: body.x + 2,
        row: body.y + 1,
        modifiers: KeyModifiers::NONE,
    };
    assert_eq!(app.on_mouse(click), Action::Redraw);
    assert_eq!(app.selected_pid, Some(1468));
    let scroll = MouseEvent {
        kind: MouseEventKind::ScrollDown,
        ..click
    };
    app.on_mouse(scroll);
    assert_eq!(app.selected_pid, Some(4242));
}

#[test]
fn g_picks_a_gpu() {
    let mut s = desktop();
    let mut second = fixture::device();
    second.index = 1;
    second.name = Some("NVIDIA RTX A2000".into());
    second.memory_used_bytes = Some(1 << 30);
    s.devices.push(second);
    s.processes[1]
        .gpu
        .push(fixture::usage(1, Some(700 * fixture::MIB), &["C"], Some(50)));
    let mut app = app_with(s);
    let all = screen(&mut app, 160, 48);
    assert!(all.contains("GPU 0 NVIDIA GeForce RTX 4080 SUPER") && all.contains("GPU 1 NVIDIA RTX A2000"));
    assert!(row(&all, "4242*").contains("1.99 GiB"), "both devices add up");
    key(&mut app, 'g');
    assert_eq!(app.gpu, Some(0));
    key(&mut app, 'g');
    let one = screen(&mut app, 160, 48);
    assert!(
        !one.contains("GPU 0 NVIDIA") && one.contains("GPU 1 NVIDIA RTX A2000"),
        "{one}"
    );
    assert_eq!(pid_order(&one), vec![4242]);
    assert!(row(&one, "4242*").contains("700.0 MiB"));
    assert!(one.contains("PROCESSES  1 on GPU 1"), "{one}");
    key(&mut app, 'g');
    assert_eq!(app.gpu, None);
}

#[test]
fn no_color_draws_no_colour_and_the_same_text() {
    let mut plain = app_with(desktop());
    let mut colored = app_with(desktop());
    colored.color = true;
    assert_eq!(screen(&mut plain, 160, 48), screen(&mut colored, 160, 48));
    let colours = |app: &mut App| {
        let t = draw(app, 160, 48);
        t.backend()
            .buffer()
            .content()
            .iter()
            .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
            .count()
    };
    assert_eq!(colours(&mut plain), 0);
    assert!(colours(&mut colored) > 0);
}

#[test]
fn a_small_terminal_still_shows_who_holds_the_card() {
    let mut app = app_with(desktop());
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("GPU 0 NVIDIA GeForce RTX 4080 SUPER"), "{s}");
    assert!(s.contains("5.01 GiB used of 15.99 GiB"), "{s}");
    assert!(row(&s, "1468*").contains("dwm.exe"), "{s}");
    assert!(row(&s, "4242*").contains("1.31 GiB"), "{s}");
    settings().bind(|| insta::assert_snapshot!("tui_desktop_80x24", s));
    // Even a tiny one does not panic.
    for (w, h) in [(20, 5), (1, 1), (200, 3)] {
        screen(&mut app, w, h);
    }
}

#[test]
fn without_a_gpu_the_sources_say_why() {
    let mut s = desktop();
    s.devices.clear();
    s.backends[0].status = crate::snapshot::BackendStatus::Unavailable;
    s.backends[0].detail = "libnvidia-ml.so.1 not found: no NVIDIA driver is installed".into();
    for p in &mut s.processes {
        p.gpu.clear();
    }
    s.attribution = crate::snapshot::Attribution::compute(&s.devices, &s.processes);
    let mut app = app_with(s);
    let text = screen(&mut app, 120, 30);
    assert!(text.contains("No GPU found. What each source said:"), "{text}");
    assert!(
        text.contains("nvml: unavailable: libnvidia-ml.so.1 not found"),
        "{text}"
    );
    // The model server on the CPU is still listed.
    assert!(row(&text, "4242").contains("Qwen3-0.6B-Q8_0"), "{text}");
}

#[test]
fn before_the_first_sample_it_says_so() {
    let mut app = App::new(false, false);
    let s = screen(&mut app, 80, 10);
    assert!(s.contains("Sampling: the first figures come in a moment."), "{s}");
}

#[test]
fn replay_keys_drive_the_feed_and_seeks_rebuild_the_history() {
    let mut app = App::new(false, true);
    for (k, cmd) in [
        ('[', FeedCommand::StepBack),
        (']', FeedCommand::StepForward),
        ('{', FeedCommand::Start),
        ('}', FeedCommand::End),
        ('<', FeedCommand::Slower),
        ('>', FeedCommand::Faster),
        (' ', FeedCommand::TogglePlay),
        ('p', FeedCommand::TogglePlay),
    ] {
        assert_eq!(key(&mut app, k), Action::Feed(cmd), "{k}");
    }
    app.apply(Update::Seek(vec![desktop(), desktop(), overcounted()]));
    assert_eq!(app.history.device(0).len(), 3);
    assert_eq!(
        app.snapshot.as_ref().unwrap().devices[0].memory_used_bytes,
        Some(4 << 30)
    );
    app.apply(Update::Seek(vec![desktop()]));
    assert_eq!(app.history.device(0).len(), 1);
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("[ ] step") && s.contains("space play"), "{s}");
    // Live keys for replay are not offered to a live view.
    let mut live = App::new(false, false);
    assert_eq!(key(&mut live, '['), Action::None);
}

/// An Ollama runner's model in the MODEL column: its tag, not its blob's
/// hash (issue 37, item 5).
#[test]
fn an_ollama_blob_shows_its_tag_in_the_model_column() {
    let mut s = desktop();
    let llama = s.processes.iter_mut().find(|p| p.pid == 4242).unwrap();
    let model = &mut llama.models[0];
    model.path = Some(format!(
        "/usr/share/ollama/.ollama/models/blobs/sha256-{}",
        "8e".repeat(32)
    ));
    (model.name, model.name_source) = (Some("llama3.1:8b".into()), Some(crate::snapshot::NameSource::OllamaTag));
    let shown = screen(&mut app_with(s), 160, 30);
    assert!(shown.contains("llama3.1:8b"), "{shown}");
    assert!(!shown.contains("sha256-8e8e"), "{shown}");
}
