//! A crowd of hostile processes on this machine's real /proc, next to one
//! honest llama.cpp server (xllamacpp serving the real Gemma 3 270M): a
//! model that is a FIFO (on the command line and in a fake /props), a
//! vLLM folder whose config.json is /dev/zero and whose weights are a FIFO,
//! a log file that is /dev/zero, names and argv full of terminal escapes
//! and bidi overrides, names and argv that are not UTF-8, and a split-set
//! bomb. `--json` and `--once` must finish within 3 s in bounded memory,
//! find the honest server with its model, list every hostile process, and
//! print no escape the program did not write; the live view likewise.
//! Needs GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh).
#![cfg(target_os = "linux")]

mod common;

use common::tmux::Tmux;
use common::Daemon;
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a terminal must never be sent from outside: the start of an OSC
/// (title, clipboard via OSC 52), a screen clear, a carriage return that
/// overwrites a row, and the bidi overrides that reorder what is shown.
const FORGE: &str = "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\r\nFORGED ROW\u{202e}evil\u{2066}";

/// A hostile process: `sh` exec'd through a symlink named `comm` (the
/// process's name), with `args` after sh's `-c 'read _' NAME0`. It waits on
/// its stdin and is killed when dropped.
struct Hostile {
    child: Child,
}

impl Hostile {
    fn spawn(dir: &Path, comm: &[u8], name0: &str, args: &[&OsStr]) -> Hostile {
        let exe = dir.join(OsStr::from_bytes(comm));
        std::os::unix::fs::symlink("/bin/sh", &exe).unwrap();
        let child = Command::new(&exe)
            .args(["-c", "read _", name0])
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn a hostile process");
        Hostile { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Crowd {
    honest: Daemon,
    honest_model: PathBuf,
    hostile: Vec<Hostile>,
    apis: Vec<Daemon>,
    _dir: tempfile::TempDir,
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

fn start_crowd(python: &Path, gemma: &Path) -> Crowd {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("f.gguf");
    mkfifo(&fifo);
    // The split bomb: 3000 parts, each a symlink to one 8 MiB header.
    let blob = d.join("blob.gguf");
    std::fs::write(&blob, common::split_bomb_part(3000)).unwrap();
    for no in 1..=3000 {
        std::os::unix::fs::symlink(&blob, d.join(format!("m-{no:05}-of-03000.gguf"))).unwrap();
    }
    // A vLLM model folder: config.json is /dev/zero, the weights a FIFO.
    let folder = d.join("hf-model");
    std::fs::create_dir(&folder).unwrap();
    std::os::unix::fs::symlink("/dev/zero", folder.join("config.json")).unwrap();
    mkfifo(&folder.join("x.safetensors"));
    // A llama.cpp /props that names the FIFO as its model, and a vLLM
    // /v1/models that names the folder.
    let props = d.join("props.json");
    std::fs::write(
        &props,
        serde_json::json!({"model_path": fifo, "total_slots": 4294967295u64, "default_generation_settings": {"n_ctx": 4096}})
            .to_string(),
    )
    .unwrap();
    let vllm_models = d.join("vllm-models.json");
    std::fs::write(
        &vllm_models,
        serde_json::json!({"object": "list", "data": [{"id": folder, "root": folder, "max_model_len": 4096}]})
            .to_string(),
    )
    .unwrap();

    let os = |s: &str| OsStr::new(s).to_owned();
    let fifo_arg = fifo.clone().into_os_string();
    let hostile = vec![
        // A FIFO model and a /dev/zero log on the command line.
        Hostile::spawn(
            d,
            b"llama-server",
            "llama-server",
            &[&os("-m"), &fifo_arg, &os("--log-file"), &os("/dev/zero")],
        ),
        // The split bomb.
        Hostile::spawn(d, b"llama-cli", "llama-cli", &[&os("-m"), &os("m-00001-of-03000.gguf")]),
        // Escapes in the name (an OSC 52 clipboard write fits in 15 bytes)
        // and in argv; `llama-server` as $0 makes it an AI process.
        Hostile::spawn(d, b"\x1b]52;c;cHc=\x07", "llama-server", &[&os("--alias"), &os(FORGE)]),
        // A name and an argument that are not UTF-8.
        Hostile::spawn(
            d,
            b"ll\xffama",
            "llama-server",
            &[&os("-m"), OsStr::from_bytes(b"/srv/\xff\xfe.gguf")],
        ),
    ];
    let api_dir = d.join("apis");
    std::fs::create_dir(&api_dir).unwrap();
    let apis = vec![
        common::fake_api(python, &api_dir, "llama-server", "serve", &[("/props", &props)], &[]),
        common::fake_api(python, &api_dir, "vllm", "serve", &[("/v1/models", &vllm_models)], &[]),
    ];
    let honest = common::llama_server(python, gemma, &d.join("honest.log"), &["-c", "4096"]);
    Crowd {
        honest,
        honest_model: gemma.to_path_buf(),
        hostile,
        apis,
        _dir: dir,
    }
}

/// Runs the real binary with `args`, no NVIDIA library, and returns its
/// stdout, wall time and peak RSS in KiB (wait4's rusage of that child).
fn run(args: &[&str]) -> (Vec<u8>, Duration, i64) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.args(args)
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    let (status, stdout, _stderr, peak_kib) = common::peak_rss(cmd, Duration::from_secs(30));
    let took = started.elapsed();
    assert!(status.success(), "{args:?}: {status:?}");
    (stdout, took, peak_kib)
}

#[test]
fn a_hostile_crowd_cannot_hang_it_blow_its_memory_forge_its_screen_or_hide() {
    let (Some(python), Some(gemma)) = (common::test_python(), common::gemma_gguf()) else {
        return;
    };
    let crowd = start_crowd(&python, &gemma);

    let (json, took, peak_kib) = run(&["--json"]);
    eprintln!("--json: {took:?}, peak RSS {peak_kib} KiB");
    assert!(took < Duration::from_secs(3), "--json took {took:?}");
    assert!(peak_kib < 100 * 1024, "--json peak RSS {peak_kib} KiB");
    let snap: Value = serde_json::from_slice(&json).expect("--json is JSON");
    let honest = common::process(&snap, crowd.honest.pid());
    let model = &honest["models"][0];
    assert_eq!(model["path"], crowd.honest_model.display().to_string(), "{honest:#}");
    assert_eq!(model["architecture"], "gemma3");
    assert!(
        model["evidence"].as_array().unwrap().contains(&"api".into()),
        "{model:#}"
    );
    assert_eq!(honest["models_pending"], false);

    // Every hostile process is listed, as what it is.
    for h in &crowd.hostile {
        let p = common::process(&snap, h.pid());
        assert_eq!(p["kind"], "ai", "{p:#}");
    }
    for api in &crowd.apis {
        assert_eq!(common::process(&snap, api.pid())["kind"], "ai");
    }
    let fifo_model = &common::process(&snap, crowd.hostile[0].pid())["models"][0];
    assert!(
        fifo_model["notes"].to_string().contains("not a regular file"),
        "{fifo_model:#}"
    );
    // Its /props claims 2^32-1 slots: not believed, and said so; the slot
    // count shown is llama-server's default, marked as such.
    let props_api = common::process(&snap, crowd.apis[0].pid());
    let settings = &props_api["models"][0]["settings"];
    assert_eq!(settings["sources"]["sequences"], "default", "{props_api:#}");
    assert_ne!(props_api["models"][0]["slots_total"], 4294967295u64);
    assert!(props_api["notes"].to_string().contains("4294967295"), "{props_api:#}");
    let bomb = &common::process(&snap, crowd.hostile[1].pid())["models"][0];
    assert!(bomb["notes"].to_string().contains("same file as part 1"), "{bomb:#}");
    // JSON carries the names as they are, escaped by JSON's own rules.
    let forged = common::process(&snap, crowd.hostile[2].pid());
    assert_eq!(forged["name"], "\x1b]52;c;cHc=\x07");
    assert!(forged["cmdline"].as_str().unwrap().contains(FORGE));
    let not_utf8 = common::process(&snap, crowd.hostile[3].pid());
    assert_eq!(not_utf8["name"], "ll\u{fffd}ama");

    let (once, took, peak_kib) = run(&["--once"]);
    eprintln!("--once: {took:?}, peak RSS {peak_kib} KiB");
    assert!(took < Duration::from_secs(3), "--once took {took:?}");
    assert!(peak_kib < 100 * 1024, "--once peak RSS {peak_kib} KiB");
    let once = String::from_utf8(once).expect("--once prints UTF-8");
    common::assert_inert("--once", &once);
    assert!(!once.lines().any(|l| l.starts_with("FORGED ROW")), "{once}");
    assert!(once.contains("gemma"), "{once}");

    // The live view, in a real terminal.
    let Some(tmux) = common::tmux::tmux_path() else { return };
    let tmux = Tmux::new(tmux, "hostile");
    tmux.start_permissive(&format!(
        "sleep 0.5; GPUTASKMAN_NVML_LIB=/nonexistent exec {}",
        env!("CARGO_BIN_EXE_gputaskman")
    ));
    let honest_pid = crowd.honest.pid().to_string();
    let screen = tmux.wait_for("the honest server's row", Duration::from_secs(20), |s| {
        s.contains(&honest_pid)
    });
    let raw = tmux.run(&["capture-pane", "-p", "-e", "-t", "view"]);
    common::assert_only_colours("the live view", &raw);
    assert!(
        !screen.lines().any(|l| l.trim_start().starts_with("FORGED ROW")),
        "{screen}"
    );
    let title = tmux.display("#{pane_title}");
    assert!(!title.contains("owned"), "the pane title was set to {title:?}");
    let buffers = tmux.run(&["list-buffers"]);
    assert!(buffers.is_empty(), "OSC 52 wrote the clipboard: {buffers}");
}
