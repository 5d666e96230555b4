//! The live view end to end: the real binary in a real terminal (tmux),
//! against the fake NVML with a desktop-like scenario whose PIDs are real
//! processes. Keys go in with send-keys; the screen comes back with
//! capture-pane. Without tmux the tests say SKIPPED and pass.

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{fake_nvml, Scenario, Sleeper};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A shell line that runs the live view against the scenario, then says
/// how it ended and waits, so the pane (and what it shows) stays.
fn view_command(scenario: &Path, extra_env: &str) -> String {
    format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {extra_env} {} --interval 0.5; echo EXITED $?; (stty -a | grep -q -- -icanon && echo TTY-RAW || echo TTY-COOKED); sleep 600",
        scenario.display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
    )
}

/// The row of the process table that shows this PID.
fn row(screen: &str, pid: u32) -> &str {
    screen
        .lines()
        .find(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|first| first.trim_end_matches(['*', '?']) == pid.to_string())
        })
        .unwrap_or_else(|| panic!("no row for {pid}:\n{screen}"))
}

fn table_pids(screen: &str, pids: &[u32]) -> Vec<u32> {
    screen
        .lines()
        .filter_map(|l| {
            let first = l.split_whitespace().next()?;
            first.trim_end_matches(['*', '?']).parse().ok()
        })
        .filter(|p| pids.contains(p))
        .collect()
}

struct Desktop {
    _guard: std::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    shell: Sleeper,
    llama: Sleeper,
    firefox: Sleeper,
    whisper: Sleeper,
    discord: Sleeper,
    ollama: Sleeper,
    scenario: Scenario,
}

/// The desktop: an RTX 4080 SUPER with 5.01 of 15.99 GiB used, the
/// compositor 2.18 GiB, a llama-server 1.31 GiB, a browser, a speech
/// server, a process whose VRAM the driver cannot say, and an Ollama with
/// nothing on the GPU.
fn desktop() -> Desktop {
    // One desktop at a time: the view lists every AI process on the
    // machine, so another test's llama-server would show up here.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let shell = Sleeper::spawn(dir.path(), "gnome-shell", &[]);
    let llama = Sleeper::spawn(
        dir.path(),
        "llama-server",
        &["-m", "/nonexistent/Qwen3-0.6B-Q8_0.gguf", "-c", "4096"],
    );
    let firefox = Sleeper::spawn(dir.path(), "firefox", &[]);
    let whisper = Sleeper::spawn(dir.path(), "whisper-server", &[]);
    let discord = Sleeper::spawn(dir.path(), "Discord", &[]);
    let ollama = Sleeper::spawn(dir.path(), "ollama", &["serve"]);
    let scenario = Scenario::new(&json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 17171480576u64, "used": 5379194880u64, "free": 11792285696u64},
            "utilization": {"gpu": 15, "memory": 30},
            "temperature_c": 37,
            "power_mw": 26000,
            "power_limit_mw": 320000,
            "compute_processes": [
                {"pid": llama.pid(), "used_memory": 1406669824u64},
                {"pid": whisper.pid(), "used_memory": 100663296u64}
            ],
            "graphics_processes": [
                {"pid": shell.pid(), "used_memory": 2340757176u64},
                {"pid": firefox.pid(), "used_memory": 641728512u64},
                {"pid": discord.pid(), "used_memory": null}
            ],
            "process_utilization": [
                {"pid": llama.pid(), "sm": 15, "mem": 3},
                {"pid": firefox.pid(), "sm": 2, "mem": 1}
            ]
        }]
    }));
    Desktop {
        _guard: guard,
        _dir: dir,
        shell,
        llama,
        firefox,
        whisper,
        discord,
        ollama,
        scenario,
    }
}

#[test]
fn the_live_view_in_a_terminal_answers_keys() {
    let Some(tmux) = tmux_path() else { return };
    let d = desktop();
    let t = Tmux::new(tmux, "keys");
    let all = [
        d.shell.pid(),
        d.llama.pid(),
        d.firefox.pid(),
        d.whisper.pid(),
        d.discord.pid(),
        d.ollama.pid(),
    ];
    let started = Instant::now();
    t.start(&view_command(d.scenario.path(), ""));
    let s = t.wait_for("the first figures", Duration::from_secs(10), |s| {
        s.contains("5.01 GiB used of 15.99 GiB") && table_pids(s, &all).len() == 5 && s.contains("q quit")
    });
    let first = started.elapsed();
    eprintln!(
        "first figures on screen {} ms after tmux was asked to start the view",
        first.as_millis()
    );
    assert!(first < Duration::from_secs(3), "{first:?}");
    assert_eq!(
        t.display("#{alternate_on}"),
        "1",
        "the view runs in the alternate screen"
    );
    assert!(
        s.contains("GPU 0 NVIDIA GeForce RTX 4080 SUPER  ok  driver 580.159.03  CUDA 13.0"),
        "{s}"
    );
    assert!(s.contains("gpu 15%  mem act 30%  37 °C  power 26 W of 320 W"), "{s}");
    assert!(
        s.contains("█ gnome-shell 2.18 GiB  ▓ llama-server 1.31 GiB  ▒ firefox 612.0 MiB"),
        "{s}"
    );
    // Sorted by VRAM; the driver cannot say Discord's: n/a, last.
    assert_eq!(
        table_pids(&s, &all),
        vec![
            d.shell.pid(),
            d.llama.pid(),
            d.firefox.pid(),
            d.whisper.pid(),
            d.discord.pid()
        ],
        "{s}"
    );
    assert!(row(&s, d.shell.pid()).contains("window surfaces"), "{s}");
    assert!(
        row(&s, d.firefox.pid()).contains("page textures, video, canvas/WebGL"),
        "{s}"
    );
    let discord = row(&s, d.discord.pid());
    assert!(discord.contains("n/a") && !discord.contains("0 B"), "{discord}");
    assert!(
        !table_pids(&s, &all).contains(&d.ollama.pid()),
        "nothing on a GPU: only with a\n{s}"
    );
    assert!(s.contains("more not on a GPU (a shows all)"), "{s}");
    let shown = |s: &str| -> usize {
        let line = s.lines().find(|l| l.starts_with("PROCESSES  ")).unwrap_or("");
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    let top = shown(&s);
    // The sorted column's title carries the arrow; the footer says `s sort`.
    assert!(s.contains("VRAM↓") && s.contains("s sort"), "{s}");

    // s: the next sort column with a value somewhere. NVML knows no
    // spill: SPILL (n/a on every row) is skipped for GPU%, busiest first,
    // the idle ones by PID.
    t.keys(&["s"]);
    let s = t.wait_for("sort by GPU%", Duration::from_secs(5), |s| s.contains("GPU%↓"));
    let mut idle = vec![d.shell.pid(), d.whisper.pid(), d.discord.pid()];
    idle.sort();
    let by_busy: Vec<u32> = [d.llama.pid(), d.firefox.pid()].into_iter().chain(idle).collect();
    assert_eq!(table_pids(&s, &all), by_busy, "{s}");

    // a: all processes, the idle Ollama too.
    t.keys(&["a"]);
    let s = t.wait_for("all processes", Duration::from_secs(5), |s| {
        s.contains("PROCESSES") && !s.contains("more not on a GPU")
    });
    assert!(shown(&s) > top, "{s}");
    let ollama = row(&s, d.ollama.pid());
    assert!(ollama.contains("ollama"), "{ollama}");

    // m: full columns.
    t.keys(&["m"]);
    let s = t.wait_for("full columns", Duration::from_secs(5), |s| s.contains(" KIND "));
    let header = s.lines().find(|l| l.contains("WHAT IS INSIDE")).unwrap();
    for col in ["KIND", "RUNTIME", "GPU%↓", "RSS"] {
        assert!(header.contains(col), "{col} missing: {header}");
    }
    // NVML says no spill or paged figure for any row: no column of n/a.
    assert!(!header.contains("SPILL") && !header.contains("PAGED"), "{header}");
    assert!(row(&s, d.llama.pid()).contains("llama.cpp"), "{s}");

    // p: the screen holds still while samples keep coming.
    t.keys(&["p"]);
    let s = t.wait_for("paused", Duration::from_secs(5), |s| s.contains("PAUSED"));
    let stamp = |s: &str| s.lines().next().unwrap_or("").to_string();
    let frozen = stamp(&s);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(stamp(&t.screen()), frozen, "paused: the sample time must not move");
    t.keys(&["p"]);
    t.wait_for("resumed", Duration::from_secs(5), |s| {
        !s.contains("PAUSED") && stamp(s) != frozen
    });

    // ? then e: what can be known, and from where.
    t.keys(&["?"]);
    t.wait_for("the keys", Duration::from_secs(5), |s| s.contains("e explains"));
    t.keys(&["e"]);
    let s = t.wait_for("the overlay", Duration::from_secs(5), |s| {
        s.contains("What can be known about GPU memory?") && s.contains("q quits")
    });
    assert!(s.contains("Per-process VRAM [measured]"), "{s}");
    assert!(s.contains("NVML"), "{s}");

    // q: quits, and the terminal is as it was.
    t.keys(&["q"]);
    let s = t.wait_for("the exit and the tty mode", Duration::from_secs(5), |s| {
        s.contains("TTY-")
    });
    assert!(s.contains("EXITED 0"), "{s}");
    assert!(s.contains("TTY-COOKED"), "raw mode is off again\n{s}");
    assert_eq!(t.display("#{alternate_on}"), "0", "the alternate screen is left");
    assert_eq!(t.display("#{cursor_flag}"), "1", "the cursor is shown again");
    assert_eq!(t.display("#{mouse_any_flag}"), "0", "mouse reporting is off again");
}

/// The PID of the shell's child: the view.
fn child_of(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

#[test]
fn the_terminal_is_restored_after_ctrl_c_sigterm_sighup_and_a_panic() {
    let Some(tmux) = tmux_path() else { return };
    let d = desktop();
    for how in ["ctrl-c", "SIGTERM", "SIGHUP", "panic"] {
        let t = Tmux::new(tmux.clone(), how);
        let env = if how == "panic" { "GPUTASKMAN_TEST_PANIC=1" } else { "" };
        t.start(&view_command(d.scenario.path(), env));
        if how != "panic" {
            t.wait_for("the first figures", Duration::from_secs(10), |s| {
                s.contains("RTX 4080 SUPER")
            });
            assert_eq!(t.display("#{alternate_on}"), "1");
        }
        match how {
            "ctrl-c" => t.keys(&["C-c"]),
            "SIGTERM" | "SIGHUP" => {
                let shell: u32 = t.display("#{pane_pid}").parse().unwrap();
                let view = child_of(shell).expect("the view runs under the pane's shell");
                let signal = if how == "SIGTERM" { "-TERM" } else { "-HUP" };
                let ok = Command::new("kill").args([signal, &view.to_string()]).status().unwrap();
                assert!(ok.success());
            }
            _ => {}
        }
        let s = t.wait_for("exit", Duration::from_secs(10), |s| s.contains("TTY-"));
        assert!(s.contains("TTY-COOKED"), "{how}: raw mode is off again\n{s}");
        assert_eq!(t.display("#{alternate_on}"), "0", "{how}: alternate screen left\n{s}");
        assert_eq!(t.display("#{cursor_flag}"), "1", "{how}: cursor shown\n{s}");
        assert_eq!(t.display("#{mouse_any_flag}"), "0", "{how}: mouse off\n{s}");
        if how == "panic" {
            assert!(
                s.contains("panicking on purpose"),
                "the panic message is readable:\n{s}"
            );
            assert!(!s.contains("EXITED 0"), "{s}");
        } else {
            assert!(s.contains("EXITED 0"), "{how}: a clean exit\n{s}");
        }
    }
}

/// Closing the terminal (here: killing the tmux server, so the pty hangs up)
/// ends the view. crossterm alone would spin at 100% CPU reading the dead
/// tty forever; the view polls for the hang-up first.
#[test]
fn the_view_ends_when_its_terminal_goes_away() {
    let Some(tmux) = tmux_path() else { return };
    let d = desktop();
    let t = Tmux::new(tmux, "hangup");
    t.start(&view_command(d.scenario.path(), ""));
    t.wait_for("the first figures", Duration::from_secs(10), |s| {
        s.contains("RTX 4080 SUPER")
    });
    let shell: u32 = t.display("#{pane_pid}").parse().unwrap();
    let view = child_of(shell).expect("the view runs under the pane's shell");
    t.run(&["kill-server"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{view}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let state = std::fs::read_to_string(format!("/proc/{view}/stat")).unwrap_or_default();
    // Gone, or a zombie waiting for its (also ending) parent.
    assert!(
        state.is_empty() || state.contains(") Z "),
        "the view still runs: {state}"
    );
}

#[test]
fn a_recording_replays_in_a_terminal_with_its_keys() {
    let Some(tmux) = tmux_path() else { return };
    let d = desktop();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("desk.jsonl.zst");
    let out = Command::new(env!("CARGO_BIN_EXE_gputaskman"))
        .args(["record", "-o"])
        .arg(&file)
        .args(["--interval", "0.3", "--duration", "1.4"])
        .env("FAKE_NVML_SCENARIO", d.scenario.path())
        .env("GPUTASKMAN_NVML_LIB", fake_nvml())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let t = Tmux::new(tmux, "replay");
    t.start(&format!(
        "env NO_COLOR=1 {} replay {}; echo EXITED $?; sleep 600",
        env!("CARGO_BIN_EXE_gputaskman"),
        file.display()
    ));
    // The whole first frame: tmux may be read while it is being written
    // (CI once saw the title and the device header with no table yet).
    let llama = d.llama.pid().to_string();
    let s = t.wait_for("the first snapshot", Duration::from_secs(10), |s| {
        s.contains("replay 1/") && s.lines().any(|l| l.split_whitespace().next() == Some(llama.as_str()))
    });
    let total: usize = s
        .split("replay 1/")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in the title:\n{s}"));
    assert!(total >= 3, "{total} snapshots:\n{s}");
    assert!(s.contains("RTX 4080 SUPER"), "{s}");
    assert!(row(&s, d.llama.pid()).contains("1.31 GiB"), "{s}");
    assert!(s.contains("paused"), "{s}");

    t.keys(&["}"]);
    t.wait_for("the end", Duration::from_secs(5), |s| {
        s.contains(&format!("replay {total}/{total}"))
    });
    t.keys(&["["]);
    let s = t.wait_for("a step back", Duration::from_secs(5), |s| {
        s.contains(&format!("replay {}/{total}", total - 1))
    });
    assert!(row(&s, d.firefox.pid()).contains("612.0 MiB"), "{s}");
    t.keys(&["{", "p"]);
    t.wait_for("playing to the end", Duration::from_secs(10), |s| {
        s.contains("at the end")
    });
    t.keys(&["q"]);
    t.wait_for("exit", Duration::from_secs(5), |s| s.contains("EXITED 0"));
}
