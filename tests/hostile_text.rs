//! Text written by others reaches a terminal only escaped: a process whose
//! name and command line carry OSC 52 (the clipboard), an OSC title,
//! `ESC[2J`, `\r`, `\n` and U+202E; a GGUF whose name and architecture do;
//! snapshot files, a `--remote` host and an NVML device that do. Each is
//! run through the real binary and every text view: `--once`, the live
//! view in tmux, `model`, `summary`, `diff`, `--remote --once`,
//! `--list-gpus` and an error naming a path. JSON keeps the original text,
//! escaped by JSON's rules.

mod common;
mod snapshot_builder;

use gputaskman::snapshot;
use serde_json::Value;
use snapshot_builder::{device, gpu, process, snapshot, MIB};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A name: an OSC title, BEL, `\r\n`, and a right-to-left override; 12
/// bytes, under the 15 a process name keeps.
const COMM: &str = "\u{1b}]0;pw\u{7}\r\n\u{202e}";
const COMM_SHOWN: &str = "\\e]0;pw\\x07\\r\\n";
/// Arguments: OSC 52 (set the clipboard to "pwned"), clear the screen, the
/// 8-bit CSI, a carriage return and a newline that forge a row, and an
/// override that shows `exe.pdf` as `fdp.exe`.
const ARGS: [&str; 6] = [
    "\u{1b}]52;c;cHduZWQ=\u{7}",
    "\u{1b}[2J",
    "\u{9b}31m",
    "x\rFORGED",
    "y\nFORGED row",
    "\u{202e}fdp.exe",
];
const ARGS_SHOWN: [&str; 6] = [
    "\\e]52;c;cHduZWQ=\\x07",
    "\\e[2J",
    "\\u{9b}31m",
    "x\\rFORGED",
    "y\\nFORGED row",
    "\\u{202e}fdp.exe",
];

/// No line a view prints may start with what a `\r` or `\n` inside a field
/// would have begun.
fn assert_no_forged_rows(what: &str, out: &str) {
    assert!(
        !out.lines().any(|l| l.trim_start().starts_with("FORGED")),
        "{what} has a forged row:\n{out}"
    );
}

/// A llama-server look-alike (its argv[0]) whose name, set by writing
/// /proc/self/comm from the shell itself (a builtin, no exec after it),
/// is [`COMM`] and whose arguments are [`ARGS`].
struct Hostile(Child);

impl Hostile {
    fn spawn() -> Hostile {
        // argv[0] is llama-server's (words after it name a runtime only
        // after a loader such as python, so `sh -c … llama-server` is sh).
        let child = Command::new("sh")
            .arg0("llama-server")
            .arg("-c")
            .arg(r"printf '\033]0;pw\007\r\n\342\200\256' > /proc/self/comm; read _")
            .arg("llama-server")
            .args(ARGS)
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let comm = format!("/proc/{}/comm", child.id());
        let start = Instant::now();
        while std::fs::read_to_string(&comm).ok().as_deref() != Some(&format!("{COMM}\n")) {
            assert!(start.elapsed() < Duration::from_secs(10), "{comm} never took the name");
            std::thread::sleep(Duration::from_millis(10));
        }
        Hostile(child)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn once_shows_a_hostile_name_and_command_line_escaped_in_one_row() {
    let h = Hostile::spawn();
    let pid = h.0.id();
    let out = snapshot_builder::run_ok(&["--once".as_ref()]);
    common::assert_inert("--once", &out);
    assert_no_forged_rows("--once", &out);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(&format!("{pid} ")) || l.trim_start().starts_with(&format!("{pid}*")))
        .collect();
    assert_eq!(rows.len(), 1, "one row for PID {pid}:\n{out}");
    assert!(rows[0].contains(COMM_SHOWN), "{}", rows[0]);
    for a in ARGS_SHOWN {
        assert!(rows[0].contains(a), "{a} not in {}", rows[0]);
    }
}

#[test]
fn json_keeps_the_hostile_bytes_escaped_by_json_rules() {
    let h = Hostile::spawn();
    let pid = h.0.id();
    let out = snapshot_builder::bin().arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // JSON writes every control as \uXXXX or \n, \r: none leaves raw.
    assert!(!out.stdout.iter().any(|b| matches!(b, 0x1b | 0x07 | b'\r')));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(r#""name": "\u001b]0;pw\u0007\r\n"#), "{text}");
    let snap: Value = serde_json::from_str(&text).unwrap();
    let p = common::process(&snap, pid);
    assert_eq!(p["name"], COMM);
    let cmdline = p["cmdline"].as_str().unwrap();
    for a in ARGS {
        assert!(cmdline.contains(a), "{a:?} not in {cmdline:?}");
    }
}

/// A snapshot whose every outside string is hostile.
fn hostile_snapshot(taken_at: &str, vram: u64) -> snapshot::Snapshot {
    let mut s = snapshot(taken_at);
    s.host.hostname = Some("h\u{1b}]2;HOSTTITLE\u{7}".into());
    s.backends[0].detail = "ok\u{1b}[2J".into();
    let mut d = device(
        0,
        "GPU\u{1b}]0;DEVTITLE\u{7}",
        Some("GPU-\u{202e}1"),
        None,
        Some(4 * vram),
    );
    d.driver_version = Some("580\r\nFORGED driver".into());
    d.notes.push("note\u{1b}]52;c;bm90ZQ==\u{7}".into());
    s.devices.push(d);
    let mut p = process(4242, "\u{1b}]52;c;cHduZWQ=\u{7}", "2026-01-01T10:00:00Z");
    p.cmdline = Some("srv\nFORGED cmd \u{1b}[2J\u{202e}fdp.exe".into());
    p.notes.push("\u{9b}31mred".into());
    let mut g = gpu(0, Some(vram));
    g.source = "nvml".into();
    p.gpu.push(g);
    // What an Ollama look-alike answered on Ollama's port in `/api/ps`: the
    // live view's "now:" line printed it as given, retitling the pane and
    // painting the line red.
    let mut model = snapshot_builder::server_model(11434, 4096, 84 * MIB, 84 * MIB);
    model.activity = Some(snapshot::ModelActivity {
        expires_at: Some(EXPIRES_AT.into()),
        source: "api:/api/ps".into(),
        ..Default::default()
    });
    p.models.push(model);
    s.processes.push(p);
    s
}

/// `/api/ps`'s `expires_at` from a forged Ollama: an OSC title, a red
/// background and a right-to-left override.
const EXPIRES_AT: &str = "2026-01-01T10:05:00Z\u{1b}]0;PWNED\u{7}\u{1b}[41mRED\u{1b}[0m\u{202e}";

#[test]
fn summary_and_diff_show_hostile_snapshots_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot_builder::write(
        dir.path(),
        "b\u{1b}]0;FILE\u{7}.json",
        &hostile_snapshot("2026-01-01T10:00:00Z", 100 * MIB),
    );
    let after = snapshot_builder::write(
        dir.path(),
        "after.json",
        &hostile_snapshot("2026-01-01T10:01:00Z", 900 * MIB),
    );

    let summary = snapshot_builder::run_ok(&["summary".as_ref(), before.as_os_str()]);
    common::assert_inert("summary", &summary);
    assert_no_forged_rows("summary", &summary);
    assert!(summary.contains("b\\e]0;FILE\\x07.json: 1 snapshot from"), "{summary}");
    assert!(
        summary.contains("GPU 0 GPU\\e]0;DEVTITLE\\x07 (GPU-\\u{202e}1)"),
        "{summary}"
    );
    assert!(summary.contains("4242 \\e]52;c;cHduZWQ=\\x07  seen"), "{summary}");

    let diff = snapshot_builder::diff_text(&before, &after);
    common::assert_inert("diff", &diff);
    assert_no_forged_rows("diff", &diff);
    assert!(
        diff.contains("/b\\e]0;FILE\\x07.json  (2026-01-01T10:00:00Z)"),
        "{diff}"
    );
    assert!(diff.contains("GPU 0 GPU\\e]0;DEVTITLE\\x07 (GPU-\\u{202e}1)"), "{diff}");
    assert!(diff.contains("4242 \\e]52;c;cHduZWQ=\\x07"), "{diff}");

    // The JSON of either keeps the original name.
    let j = snapshot_builder::diff_json(&before, &after);
    assert!(j.to_string().contains(r#""name":"\u001b]52;c;cHduZWQ=\u0007""#), "{j}");
}

/// The live view on a hostile snapshot (a replay of one) in tmux: no title
/// set, no clipboard buffer made, the text shown as escapes, no row forged.
#[test]
fn live_view_shows_hostile_text_escaped_and_sets_no_title_or_clipboard() {
    let Some(tmux) = common::tmux::tmux_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = snapshot_builder::write(
        dir.path(),
        "hostile.json",
        &hostile_snapshot("2026-01-01T10:00:00Z", 100 * MIB),
    );
    let t = common::tmux::Tmux::new(tmux, "hostile");
    let bin = assert_cmd::cargo::cargo_bin("gputaskman");
    // The pause lets set-clipboard take effect before the view draws: with
    // it on, tmux keeps what an OSC 52 sends as a paste buffer.
    let command = format!("sleep 0.5; exec {} replay {}", bin.display(), file.display());
    t.start_permissive(&command);
    let title_before = t.display("#{pane_title}");
    let screen = t.wait_for("the process table", Duration::from_secs(30), |s| s.contains("cmd "));
    // Another frame, for whatever the first one sent to land.
    std::thread::sleep(Duration::from_millis(300));
    let screen = t.screen().max(screen);
    assert!(screen.contains("\\e]52;c;cHduZ"), "{screen}");
    assert!(screen.contains("srv\\nFORGED cmd \\e[2J\\u{202e}fdp.exe"), "{screen}");
    assert!(screen.contains("GPU\\e]0;DEVTITLE\\x07"), "{screen}");
    assert!(screen.contains("h\\e]2;HOSTTITLE\\x07"), "{screen}");
    assert!(
        screen.contains("unloads 2026-01-01T10:05:00Z\\e]0;PWNED\\x07\\e[41mRED\\e[0m\\u{202e}"),
        "{screen}"
    );
    assert_no_forged_rows("the live view", &screen);
    let title = t.display("#{pane_title}");
    assert!(
        !title.contains("TITLE") && !title.contains("PWNED"),
        "the pane's title became {title:?} (was {title_before:?})"
    );
    assert_eq!(t.run(&["list-buffers"]), "", "an OSC 52 reached tmux's clipboard");
    // With -e tmux writes the colours it holds: every escape is SGR.
    let colored = t.run(&["capture-pane", "-p", "-e", "-t", "view"]);
    common::assert_only_colours("the live view", &colored);
    t.keys(&["q"]);
}

/// The qwen3 fixture with its name and architecture strings overwritten in
/// place (same lengths, so the file stays valid).
fn hostile_gguf(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf/qwen3-0.6b-shape.gguf");
    let mut bytes = std::fs::read(src).unwrap();
    let put = |bytes: &mut Vec<u8>, old: &[u8], new: &[u8]| {
        assert_eq!(old.len(), new.len());
        let at = bytes.windows(old.len()).position(|w| w == old).unwrap();
        bytes[at..at + old.len()].copy_from_slice(new);
    };
    put(
        &mut bytes,
        b"qwen3-0.6b-shape",
        "\u{1b}]0;pw\u{7}\u{1b}[2J\r\n\u{202e}".as_bytes(),
    );
    // The value after the key (type u32, length u64), not the keys' prefix.
    let key = b"general.architecture";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 12;
    assert_eq!(&bytes[at..at + 5], b"qwen3");
    bytes[at..at + 5].copy_from_slice(b"\x1b[2J\x07");
    let path = dir.join("hostile.gguf");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn model_shows_hostile_gguf_strings_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_gguf(dir.path());
    let text = snapshot_builder::run_ok(&["model".as_ref(), file.as_os_str()]);
    common::assert_inert("model", &text);
    assert!(
        text.contains("name            \\e]0;pw\\x07\\e[2J\\r\\n\\u{202e}\n"),
        "{text}"
    );
    assert!(text.contains("architecture    \\e[2J\\x07\n"), "{text}");
    let json: Value = serde_json::from_str(&snapshot_builder::run_ok(&[
        "model".as_ref(),
        file.as_os_str(),
        "--json".as_ref(),
    ]))
    .unwrap();
    assert_eq!(json["name"], "\u{1b}]0;pw\u{7}\u{1b}[2J\r\n\u{202e}");
    assert_eq!(json["architecture"], "\u{1b}[2J\u{7}");
}

#[test]
fn an_error_naming_a_hostile_path_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m\u{1b}]0;pw\u{7}\n.gguf");
    let out = snapshot_builder::bin().arg("model").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    common::assert_inert("the error", err.trim_end_matches('\n'));
    assert!(err.contains("m\\e]0;pw\\x07\\n.gguf"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A `serve` look-alike on loopback answering `body` to its first `times`
/// connections; its port.
fn hostile_peer(body: Vec<u8>, times: usize) -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        for _ in 0..times {
            let Ok((mut conn, _)) = listener.accept() else { return };
            let mut req = [0u8; 4096];
            let _ = conn.read(&mut req);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    (port, server)
}

/// `--remote HOST --once` on a host that answers a hostile snapshot.
#[test]
fn remote_once_shows_a_hostile_host_escaped() {
    let body = serde_json::to_vec(&hostile_snapshot("2026-01-01T10:00:00Z", 100 * MIB)).unwrap();
    let (port, server) = hostile_peer(body, 1);
    let out = snapshot_builder::run_ok(&[
        "--remote".as_ref(),
        format!("127.0.0.1:{port}").as_ref(),
        "--once".as_ref(),
    ]);
    server.join().unwrap();
    common::assert_inert("--remote --once", &out);
    assert_no_forged_rows("--remote --once", &out);
    assert!(out.contains("== h\\e]2;HOSTTITLE\\x07 (http://127.0.0.1:"), "{out}");
    assert!(out.contains("   4242* alice "), "{out}");
    assert!(out.contains("\\e]52;c;cHduZWQ"), "{out}");
    assert!(out.contains("note: note\\e]52;c;bm90ZQ==\\x07"), "{out}");
}

/// The live view of a hostile `--remote` host in tmux: its runtime's
/// answer (the "now:" line of the selected process) and every name are
/// shown escaped; no title, colour or clipboard of theirs lands.
#[test]
fn remote_live_view_shows_a_hostile_host_escaped() {
    let Some(tmux) = common::tmux::tmux_path() else { return };
    let body = serde_json::to_vec(&hostile_snapshot("2026-01-01T10:00:00Z", 100 * MIB)).unwrap();
    let (port, _server) = hostile_peer(body, 200);
    let t = common::tmux::Tmux::new(tmux, "hostile-remote");
    let bin = assert_cmd::cargo::cargo_bin("gputaskman");
    t.start_permissive(&format!(
        "sleep 0.5; exec {} --remote 127.0.0.1:{port} --interval 0.2",
        bin.display()
    ));
    let screen = t.wait_for("the hostile runtime's line", Duration::from_secs(30), |s| {
        s.contains("unloads")
    });
    std::thread::sleep(Duration::from_millis(500));
    let screen = t.screen().max(screen);
    assert!(screen.contains("\\e]0;PWNED\\x07\\e[41mRED"), "{screen}");
    assert_no_forged_rows("the remote live view", &screen);
    let title = t.display("#{pane_title}");
    assert!(
        !title.contains("PWNED") && !title.contains("TITLE"),
        "the pane's title became {title:?}"
    );
    assert_eq!(t.run(&["list-buffers"]), "", "an OSC 52 reached tmux's clipboard");
    common::assert_only_colours(
        "the remote live view",
        &t.run(&["capture-pane", "-p", "-e", "-t", "view"]),
    );
    t.keys(&["q"]);
}

/// A device name from the driver (the fake NVML) in `--list-gpus` and
/// `--once`.
#[test]
fn list_gpus_and_once_show_a_hostile_device_name_escaped() {
    let scenario = common::Scenario::new(&serde_json::json!({
        "driver_version": "580\u{1b}]0;DRV\u{7}",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "RTX\u{1b}]0;DEVTITLE\u{7}\r\nFORGED gpu",
            "uuid": "GPU-\u{202e}1",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 17171480576u64, "used": 1u64 << 30, "free": 16097738752u64, "reserved": 0},
            "compute_processes": [],
            "graphics_processes": []
        }]
    }));
    for args in [&["--list-gpus"][..], &["--once"][..]] {
        let out = scenario.command().args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let out = String::from_utf8(out.stdout).unwrap();
        common::assert_inert(args[0], &out);
        assert_no_forged_rows(args[0], &out);
        assert!(out.contains("RTX\\e]0;DEVTITLE\\x07\\r\\nFORGED gpu"), "{out}");
        assert!(out.contains("GPU-\\u{202e}1"), "{out}");
    }
}
