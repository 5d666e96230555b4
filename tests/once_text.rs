//! `--once` as text, by the real binary against the fake NVML: the live
//! view's column names, pairing markers only where a PID was translated,
//! and rows fitted to a terminal (tmux, 80 columns) but whole in a pipe.

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{fake_nvml, Scenario, Sleeper};
use serde_json::{json, Value};
use std::time::Duration;

const GIB: u64 = 1 << 30;

/// An H100 with a process on it (9.00 GiB, a command line far longer
/// than 80 columns) and a PID not in our /proc (a row with a long note).
fn server(pid: u32) -> Value {
    json!({
        "driver_version": "580.95.05",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-8d7c6b5a-0000-0000-0000-000000000000",
            "pci_bus_id": "00000000:18:00.0",
            "memory": {"total": 80 * GIB, "used": 10 * GIB, "free": 70 * GIB, "reserved": 0},
            "utilization": {"gpu": 41, "memory": 12},
            "compute_processes": [
                {"pid": pid, "used_memory": 9 * GIB},
                {"pid": 4_190_001, "used_memory": GIB}
            ],
            "process_utilization": [{"pid": pid, "sm": 37, "mem": 9, "enc": 0, "dec": 0}]
        }]
    })
}

const ARGS: [&str; 6] = [
    "--model",
    "/srv/models/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
    "--tensor-parallel-size",
    "1",
    "--max-model-len",
    "32768-and-the-tail-end-of-a-long-command-line",
];

/// The table's header and the row of `pid`, as printed.
fn rows(text: &str, pid: u32) -> (&str, &str) {
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("PID "))
        .unwrap_or_else(|| panic!("no header in\n{text}"));
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row of {pid} in\n{text}"));
    (header, row)
}

#[test]
fn once_uses_the_live_views_column_names_and_no_marker_for_a_pid_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let p = Sleeper::spawn(dir.path(), "vllm-serve", &ARGS);
    let scenario = Scenario::new(&server(p.pid()));
    let out = scenario.command().arg("--once").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (header, row) = rows(&text, p.pid());
    let names: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        names,
        ["PID", "USER", "NAME", "KIND", "GPU", "VRAM", "GPU%", "CPU%", "RSS", "RUNTIME", "COMMAND"],
        "{text}"
    );
    // NVML gave the process's own PID: nothing was paired, nothing marked.
    assert!(row.trim_start().starts_with(&format!("{} ", p.pid())), "{row}");
    assert!(!row.contains('*') && !text.contains("paired"), "{text}");
    // VRAM and GPU% (NVML's SM busy) under their names.
    let at = |name: &str| header.find(name).unwrap() + name.len();
    assert_eq!(row[..at("VRAM")].trim_end().rsplit(' ').next(), Some("GiB"), "{row}");
    assert!(row[..at("VRAM")].ends_with("9.00 GiB"), "{header}\n{row}");
    assert!(row[..at("GPU%")].ends_with("37"), "{header}\n{row}");
    // A pipe gets whole rows: the command to its last byte.
    assert!(row.ends_with("32768-and-the-tail-end-of-a-long-command-line"), "{row}");
    assert!(row.chars().count() > 80, "{row}");
    assert!(!text.contains('…'), "{text}");
}

#[test]
fn once_in_an_80_column_terminal_fits_its_rows_and_cuts_only_text() {
    let Some(tmux) = tmux_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = Sleeper::spawn(dir.path(), "vllm-serve", &ARGS);
    let scenario = Scenario::new(&server(p.pid()));
    let t = Tmux::new(tmux, "once-fit");
    let once = |extra: &str| {
        format!(
            "env -u GPUTASKMAN_NVML_LIB FAKE_NVML_SCENARIO={} {} --nvml-lib {} --once {extra}; echo ONCE-DONE; sleep 600",
            scenario.path().display(),
            env!("CARGO_BIN_EXE_gputaskman"),
            fake_nvml().display()
        )
    };
    t.start_sized(&once(""), 80, 40);
    t.wait_for("--once to finish", Duration::from_secs(30), |s| s.contains("ONCE-DONE"));
    // Joined: a row the terminal wrapped would come back as one long line;
    // from the top of the history: other AI processes on this machine are
    // rows too, and may scroll the header off the pane.
    let screen = t.run(&["capture-pane", "-p", "-J", "-S", "-", "-t", "view"]);
    let (header, row) = rows(&screen, p.pid());
    // The command is last and cut with an ellipsis; the figures are whole.
    assert!(header.trim_end().ends_with("COMMAND"), "{header}");
    assert!(row.ends_with('…'), "{row}");
    assert!(row.contains(" 9.00 GiB "), "{row}");
    assert!(row.contains(&format!("{} ", p.pid())), "{row}");
    let memory = screen.lines().find(|l| l.contains("memory [")).unwrap();
    assert!(
        memory.ends_with("10.00 GiB used of 80.00 GiB, 70.00 GiB free"),
        "{memory}"
    );
    // The note under the other row is wrapped between words under its
    // first word, not by the terminal at its edge.
    let note = screen
        .lines()
        .position(|l| l.trim_start().starts_with("note: PID 4190001"))
        .unwrap_or_else(|| panic!("no note in\n{screen}"));
    let next = screen.lines().nth(note + 1).unwrap();
    assert!(
        next.starts_with(&" ".repeat(15)) && next.trim_start().len() > 10,
        "{screen}"
    );
    // Below the title and the device's name, nothing is wider.
    for line in screen.lines().skip_while(|l| !l.contains("memory [")) {
        assert!(line.chars().count() <= 80, "wider than the terminal:\n{line}\n{screen}");
    }

    // --wide: whole rows in the terminal too.
    t.run(&["kill-server"]);
    let t = Tmux::new(tmux_path().unwrap(), "once-wide");
    t.start_sized(&once("--wide"), 80, 40);
    t.wait_for("--once --wide to finish", Duration::from_secs(30), |s| {
        s.contains("ONCE-DONE")
    });
    let screen = t.run(&["capture-pane", "-p", "-J", "-S", "-", "-t", "view"]);
    let (_, row) = rows(&screen, p.pid());
    assert!(row.ends_with("32768-and-the-tail-end-of-a-long-command-line"), "{row}");
}

#[test]
fn once_with_ascii_prints_nothing_but_ascii() {
    let dir = tempfile::tempdir().unwrap();
    // A command line that brings its own non-ASCII, beside the view's.
    let p = Sleeper::spawn(dir.path(), "vllm-serve", &["--served-model-name", "模型-Grüße"]);
    let scenario = Scenario::new(&server(p.pid()));
    let once = |extra: &[&str]| {
        let out = scenario.command().arg("--once").args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(!once(&[]).is_ascii(), "without --ascii the text is not ASCII only");
    let text = once(&["--ascii"]);
    assert!(text.bytes().all(|b| b < 0x80), "{text}");
    let (_, row) = rows(&text, p.pid());
    assert!(
        row.ends_with("--served-model-name ????-Gr??e"),
        "column for column: {row}"
    );
}
