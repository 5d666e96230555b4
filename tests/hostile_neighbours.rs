//! A crowd of hostile processes on this machine's real /proc, next to one
//! honest llama.cpp server (xllamacpp serving the real Gemma 3 270M): a
//! model that is a FIFO (on the command line and in a fake /props), a
//! vLLM folder whose config.json is /dev/zero and whose weights are a FIFO,
//! a log file that is /dev/zero, names and argv full of terminal escapes
//! and bidi overrides, names and argv that are not UTF-8, and a split-set
//! bomb. `--json` and `--once` must finish within 3 s in bounded memory,
//! find the honest server with its model, list every hostile process, and
//! print no escape the program did not write; the live view likewise.
//!
//! The second crowd (issue 38) runs as `nobody` beside the monitor running
//! as root: vLLM APIs naming folders of oversized or countless safetensors
//! headers, a llama-server naming a sparse 4 TiB "model", one whose /props
//! names /etc/shadow, one naming a root-only model and log, and one that
//! names a file in argv and in its own /props without ever mapping it.
//! Needs GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh),
//! and root for the `nobody` members.
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
/// Ollama's `expires_at` as a forged `/api/ps` gave it: an OSC title, a
/// red background and a right-to-left override.
const EXPIRES_AT: &str = "2026-12-01T10:05:00Z\x1b]0;PWNED\x07\x1b[41mRED\x1b[0m\u{202e}";

const FORGE: &str = "\x1b]52;c;cHduZWQ=\x07\x1b]0;owned\x07\x1b[2J\r\nFORGED ROW\u{202e}evil\u{2066}";

/// The unprivileged user the second crowd runs as.
const NOBODY: u32 = 65534;

/// A hostile process: `sh` exec'd through a symlink named `comm` (the
/// process's name) with `argv[0]` NAME0 (a runtime's name makes it one:
/// the words after a program that is no loader name no runtime), `args`
/// after sh's `-c 'read _'`, as user and group `uid` when given. It waits
/// on its stdin and is killed when dropped.
struct Hostile {
    child: Child,
}

impl Hostile {
    fn spawn(uid: Option<u32>, dir: &Path, comm: &[u8], name0: &str, args: &[&OsStr]) -> Hostile {
        use std::os::unix::process::CommandExt;
        let exe = dir.join(OsStr::from_bytes(comm));
        if !exe.exists() {
            std::os::unix::fs::symlink("/bin/sh", &exe).unwrap();
        }
        let mut cmd = Command::new(&exe);
        cmd.arg0(name0)
            .args(["-c", "read _"])
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::piped());
        if let Some(uid) = uid {
            cmd.uid(uid).gid(uid);
        }
        let child = cmd.spawn().expect("spawn a hostile process");
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
    second: Option<SecondCrowd>,
    _dir: tempfile::TempDir,
}

/// The second crowd, all `nobody`.
struct SecondCrowd {
    /// vLLM APIs whose `root` is a folder of 1,024 headers of 16 MiB.
    oversized: Vec<Daemon>,
    /// A vLLM API whose `root` holds 64 headers of 1 MiB each.
    countless: Daemon,
    /// `llama-server -m sparse4t.gguf`: 4 TiB claimed, 4 KiB on disk.
    sparse: Hostile,
    /// A llama.cpp /props naming /etc/shadow as its model.
    shadow: Daemon,
    /// `llama-server -m SECRET --log-file SECRET_LOG`, both in a 0700
    /// root directory.
    secret: Hostile,
    secret_model: PathBuf,
    /// `-m public.gguf` and its own /props naming it, never mapped.
    claimed: Daemon,
}

/// A GGUF header of one string array claiming `count` entries: in a sparse
/// file the holes after it read as that many empty strings.
fn claims_strings(count: u64) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes()); // tensors
    out.extend(1u64.to_le_bytes()); // metadata
    let key = b"tokenizer.ggml.tokens";
    out.extend((key.len() as u64).to_le_bytes());
    out.extend(key);
    out.extend(9u32.to_le_bytes()); // array
    out.extend(8u32.to_le_bytes()); // of strings
    out.extend(count.to_le_bytes());
    out
}

/// A sparse file of `size` bytes that claims to be a GGUF of `size / 8`
/// vocabulary strings.
fn sparse_gguf(path: &Path, size: u64) {
    std::fs::write(path, claims_strings((size - 128) / 8)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(size)
        .unwrap();
}

/// A `.safetensors` file: the 8-byte length, then `json`, then 8 bytes of
/// tensor data.
fn safetensors(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json.as_bytes());
    out.extend([0u8; 8]);
    out
}

/// A folder of `links` hard links to one `.safetensors` file holding `json`.
fn safetensors_folder(folder: &Path, json: &str, links: usize) {
    std::fs::create_dir(folder).unwrap();
    let first = folder.join("model-00000.safetensors");
    std::fs::write(&first, safetensors(json)).unwrap();
    for no in 1..links {
        std::fs::hard_link(&first, folder.join(format!("model-{no:05}.safetensors"))).unwrap();
    }
}

fn mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A vLLM `/v1/models` naming `folder`, written to `path`.
fn vllm_models(path: &Path, folder: &Path) {
    let body = serde_json::json!({"object": "list", "data": [{"id": folder, "root": folder, "max_model_len": 4096}]});
    std::fs::write(path, body.to_string()).unwrap();
}

/// A llama.cpp `/props` naming `model`, written to `path`.
fn props_naming(path: &Path, model: &Path) {
    let body = serde_json::json!({"model_path": model, "default_generation_settings": {"n_ctx": 4096}});
    std::fs::write(path, body.to_string()).unwrap();
}

fn start_second_crowd(python: &Path, d: &Path) -> SecondCrowd {
    use common::Kv;
    // What `nobody` may read: the crowd's folder (a root 0700 tempdir)
    // opened to 0755, files 0644. The root-only part stays 0700.
    mode(d, 0o755);
    // The test Python may live under root's 0700 home (pyenv); `nobody`
    // runs the system's (fake_api.py needs only the standard library).
    let python = [Path::new("/usr/bin/python3"), python]
        .into_iter()
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o001 != 0)
        })
        .unwrap();
    let api = |no: usize, name: &str, routes: &[(&str, &Path)], extra: &[&str]| {
        let dir = d.join(format!("nobody-{no}"));
        std::fs::create_dir(&dir).unwrap();
        common::fake_api_as(Some(NOBODY), python, &dir, name, "serve", routes, extra)
    };
    // 16 MiB of tensor entries: parsed whole (before) each took ~10x that.
    let mut oversized = String::from("{");
    let mut no = 0;
    while oversized.len() < 16 << 20 {
        oversized.push_str(&format!(
            "\"t{no}\":{{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,0]}},"
        ));
        no += 1;
    }
    oversized.push_str("\"last\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}");
    safetensors_folder(&d.join("hf-oversized"), &oversized, 1024);
    let padded = format!(
        "{{\"__metadata__\":{{\"pad\":\"{}\"}},\"w\":{{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}}}",
        "x".repeat(1 << 20)
    );
    safetensors_folder(&d.join("hf-countless"), &padded, 64);
    vllm_models(&d.join("oversized.json"), &d.join("hf-oversized"));
    vllm_models(&d.join("countless.json"), &d.join("hf-countless"));
    let oversized = (0..4)
        .map(|no| api(no, "vllm", &[("/v1/models", &d.join("oversized.json"))], &[]))
        .collect();
    let countless = api(4, "vllm", &[("/v1/models", &d.join("countless.json"))], &[]);

    let sparse_model = d.join("sparse4t.gguf");
    sparse_gguf(&sparse_model, 4 << 40);
    let sparse = Hostile::spawn(
        Some(NOBODY),
        d,
        b"llama-server",
        "llama-server",
        &[OsStr::new("-m"), sparse_model.as_os_str()],
    );

    props_naming(&d.join("shadow-props.json"), Path::new("/etc/shadow"));
    let shadow = api(5, "llama-server", &[("/props", &d.join("shadow-props.json"))], &[]);

    let closed = d.join("root-only");
    std::fs::create_dir(&closed).unwrap();
    mode(&closed, 0o700);
    let secret_model = closed.join("secret.gguf");
    let secret_header = common::gguf_bytes(&[
        ("general.architecture", Kv::Str(b"llama")),
        ("general.name", Kv::Str(b"root-only-secret-model")),
    ]);
    std::fs::write(&secret_model, &secret_header).unwrap();
    mode(&secret_model, 0o600);
    let secret_log = closed.join("secret.log");
    std::fs::write(
        &secret_log,
        "load_tensors:        CUDA0 model buffer size =  1024.00 MiB\n",
    )
    .unwrap();
    mode(&secret_log, 0o600);
    let secret = Hostile::spawn(
        Some(NOBODY),
        d,
        b"llama-server",
        "llama-server",
        &[
            OsStr::new("-m"),
            secret_model.as_os_str(),
            OsStr::new("--log-file"),
            secret_log.as_os_str(),
        ],
    );

    let public = d.join("public.gguf");
    let public_header = common::gguf_bytes(&[
        ("general.architecture", Kv::Str(b"llama")),
        ("general.name", Kv::Str(b"public-model")),
    ]);
    std::fs::write(&public, public_header).unwrap();
    props_naming(&d.join("claimed-props.json"), &public);
    let public_arg = public.display().to_string();
    let claimed = api(
        6,
        "llama-server",
        &[("/props", &d.join("claimed-props.json"))],
        &["-m", &public_arg],
    );
    SecondCrowd {
        oversized,
        countless,
        sparse,
        shadow,
        secret,
        secret_model,
        claimed,
    }
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
    let ollama_ps = d.join("ollama-ps.json");
    std::fs::write(
        &ollama_ps,
        serde_json::json!({"models": [{"name": format!("evil{FORGE}"), "model": "evil", "size": 1u64 << 30,
            "digest": "0".repeat(64), "expires_at": EXPIRES_AT, "size_vram": 1u64 << 30, "context_length": 4096}]})
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
            None,
            d,
            b"llama-server",
            "llama-server",
            &[&os("-m"), &fifo_arg, &os("--log-file"), &os("/dev/zero")],
        ),
        // The split bomb.
        Hostile::spawn(
            None,
            d,
            b"llama-cli",
            "llama-cli",
            &[&os("-m"), &os("m-00001-of-03000.gguf")],
        ),
        // Escapes in the name (an OSC 52 clipboard write fits in 15 bytes)
        // and in argv; `llama-server` as $0 makes it an AI process.
        Hostile::spawn(
            None,
            d,
            b"\x1b]52;c;cHc=\x07",
            "llama-server",
            &[&os("--alias"), &os(FORGE)],
        ),
        // A name and an argument that are not UTF-8.
        Hostile::spawn(
            None,
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
        // Anyone can answer on Ollama's port: an `/api/ps` whose model name
        // and `expires_at` (the live view's "now:" line) carry escapes.
        common::fake_api(
            python,
            &api_dir,
            "ollama",
            "serve",
            &[("/api/ps", &ollama_ps)],
            &["serve"],
        ),
    ];
    // SAFETY: geteuid has no preconditions.
    let second = match unsafe { libc::geteuid() } {
        0 => Some(start_second_crowd(python, d)),
        _ => {
            eprintln!("SKIPPED the second crowd: it runs as nobody beside a root monitor (run as root)");
            None
        }
    };
    let honest = common::llama_server(python, gemma, &d.join("honest.log"), &["-c", "4096"]);
    Crowd {
        honest,
        honest_model: gemma.to_path_buf(),
        hostile,
        apis,
        second,
        _dir: dir,
    }
}

/// What the second crowd must not get: root's reading of what they could
/// not read, a parse of what no budget allows, a walk through holes, or
/// `confirmed` for a file named but never mapped.
fn check_second_crowd(second: &SecondCrowd, snap: &Value, json: &str) {
    for api in &second.oversized {
        let p = common::process(snap, api.pid());
        assert!(
            p["notes"]
                .to_string()
                .contains("over the limit of 8388608 bytes: the weights are not estimated"),
            "{p:#}"
        );
    }
    let p = common::process(snap, second.countless.pid());
    assert!(
        p["notes"]
            .to_string()
            .contains("the 32 MiB read budget of this probe is spent"),
        "{p:#}"
    );
    assert!(p["models"][0]["estimate"].is_null(), "no partial sum: {p:#}");

    let sparse = &common::process(snap, second.sparse.pid())["models"][0];
    assert!(
        sparse["notes"].to_string().contains("a sparse file, not a model"),
        "{sparse:#}"
    );

    let shadow = &common::process(snap, second.shadow.pid())["models"][0];
    assert_eq!(shadow["path"], "/etc/shadow");
    assert_eq!(shadow["evidence"], serde_json::json!(["claimed"]), "{shadow:#}");
    assert!(
        shadow["notes"]
            .to_string()
            .contains("could not read it itself: no permission to read /etc/shadow"),
        "{shadow:#}"
    );
    // Its first bytes ("root", 72 6f 6f 74) are nowhere.
    assert!(!json.contains("72, 6f"), "/etc/shadow's bytes were shown");

    let secret = common::process(snap, second.secret.pid());
    let model = &secret["models"][0];
    assert_eq!(model["path"], second.secret_model.display().to_string());
    assert!(model["name"].is_null() && model["architecture"].is_null(), "{model:#}");
    assert!(model["reported"].is_null(), "the root-only log was read: {model:#}");
    let dir = second.secret_model.parent().unwrap().display().to_string();
    assert!(
        model["notes"]
            .to_string()
            .contains(&format!("no search permission on {dir}")),
        "{model:#}"
    );
    assert!(
        secret["notes"].to_string().contains("secret.log: not opened"),
        "{secret:#}"
    );
    assert!(!json.contains("root-only-secret-model"));

    let claimed = &common::process(snap, second.claimed.pid())["models"][0];
    assert_eq!(
        claimed["evidence"],
        serde_json::json!(["cmdline", "claimed"]),
        "{claimed:#}"
    );
    assert_eq!(claimed["confirmed"], false);
    assert_eq!(
        claimed["architecture"], "llama",
        "a file it may read is read: {claimed:#}"
    );
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
    let ollama = common::process(&snap, crowd.apis[2].pid());
    assert_eq!(ollama["models"][0]["activity"]["expires_at"], EXPIRES_AT, "{ollama:#}");
    if let Some(second) = &crowd.second {
        check_second_crowd(second, &snap, &String::from_utf8_lossy(&json));
    }

    let (once, took, peak_kib) = run(&["--once"]);
    eprintln!("--once: {took:?}, peak RSS {peak_kib} KiB");
    assert!(took < Duration::from_secs(3), "--once took {took:?}");
    assert!(peak_kib < 100 * 1024, "--once peak RSS {peak_kib} KiB");
    let once = String::from_utf8(once).expect("--once prints UTF-8");
    common::assert_inert("--once", &once);
    assert!(!once.lines().any(|l| l.starts_with("FORGED ROW")), "{once}");
    assert!(once.contains("gemma"), "{once}");
    assert!(!once.contains("root-only-secret-model"), "{once}");

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
    // The forged Ollama alone, selected: its detail pane's "now:" line.
    tmux.keys(&["/"]);
    tmux.keys(&["ollama", "Enter"]);
    let screen = tmux.wait_for("the forged Ollama's now: line", Duration::from_secs(20), |s| {
        s.contains("unloads 2026-12-01T10:05:00Z")
    });
    assert!(screen.contains("\\e]0;PWNED\\x07\\e[41mRED\\e[0m\\u{202e}"), "{screen}");
    common::assert_only_colours("the live view", &tmux.run(&["capture-pane", "-p", "-e", "-t", "view"]));
    let title = tmux.display("#{pane_title}");
    assert!(
        !title.contains("owned") && !title.contains("PWNED"),
        "the pane title was set to {title:?}"
    );
    let buffers = tmux.run(&["list-buffers"]);
    assert!(buffers.is_empty(), "OSC 52 wrote the clipboard: {buffers}");
}

/// Threads of process `pid` (its /proc tasks).
fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count()
}

/// One `GET /snapshot` from a `serve` on loopback (no token needed there),
/// read to the end.
fn snapshot_from(port: u16) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn respawned_servers_naming_a_sparse_model_do_not_grow_serves_threads() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the hostile servers run as nobody beside a root serve (run as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mode(d, 0o755);
    let model = d.join("sparse4t.gguf");
    sparse_gguf(&model, 4 << 40);
    let port = common::free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1").args([
        "serve",
        "--interval",
        "0.5",
        "--listen",
        &format!("127.0.0.1:{port}"),
    ]);
    let serve = Daemon::start(cmd, port, Duration::from_secs(30));
    let spawn_three = || -> Vec<Hostile> {
        (0..3)
            .map(|_| {
                Hostile::spawn(
                    Some(NOBODY),
                    d,
                    b"llama-server",
                    "llama-server",
                    &[OsStr::new("-m"), model.as_os_str()],
                )
            })
            .collect()
    };
    // serve samples every 0.5 s, discovery in the background: wait for a
    // sample that has walked the sparse file.
    let first = spawn_three();
    let started = Instant::now();
    let listed = |reply: &str, h: &Hostile| reply.contains(&format!("\"pid\": {},", h.pid()));
    while !first.iter().all(|h| listed(&snapshot_from(port), h)) {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the servers were never listed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let discovered = snapshot_from(port);
    drop(first);
    std::thread::sleep(Duration::from_millis(1500));
    let at_rest = threads_of(serve.pid());
    // Three servers respawned (new PIDs) every 1.5 s, as a supervisor
    // restarting them would: each set is discovered before it is killed.
    for _ in 0..5 {
        let three = spawn_three();
        std::thread::sleep(Duration::from_millis(1500));
        drop(three);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let after = threads_of(serve.pid());
    eprintln!("serve threads: {at_rest} at rest, {after} after 5 rounds of 3 respawned servers");
    assert!(after <= at_rest + 1, "serve went from {at_rest} to {after} threads");
    assert!(discovered.contains("a sparse file, not a model"), "{discovered}");
}
