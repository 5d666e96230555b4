//! Model discovery against a real llama.cpp server (xllamacpp, CPU) serving
//! the real Gemma 3 270M Q4_K_M file. Needs GPUTASKMAN_TEST_PYTHON (a Python
//! with xllamacpp) and GPUTASKMAN_GEMMA_GGUF (the model), which
//! scripts/test.sh sets; without them each test says SKIPPED and passes.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

fn environment() -> Option<(PathBuf, PathBuf)> {
    let python = std::env::var_os("GPUTASKMAN_TEST_PYTHON").map(PathBuf::from);
    let model = std::env::var_os("GPUTASKMAN_GEMMA_GGUF").map(PathBuf::from);
    match (python, model) {
        (Some(p), Some(m)) if p.exists() && m.exists() => Some((p, m)),
        _ => {
            eprintln!("SKIPPED: set GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh does)");
            None
        }
    }
}

/// A running server with its log file.
struct Server {
    daemon: common::Daemon,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(python: &Path, model: &Path, extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let daemon = common::llama_server(python, model, &log, extra);
        Server {
            port: daemon.port,
            daemon,
            log,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.daemon.pid()
    }
}

fn snapshot() -> Value {
    common::snapshot_without_gpu(&[])
}

fn model_of(snapshot: &Value, pid: u32) -> &Value {
    let p = common::process(snapshot, pid);
    assert_eq!(p["kind"], "ai", "{p:#}");
    let models = p["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{p:#}");
    &models[0]
}

fn evidence(model: &Value) -> Vec<&str> {
    model["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect()
}

#[test]
fn a_running_server_is_found_with_its_model_settings_and_memory() {
    let Some((python, model)) = environment() else { return };
    let server = Server::start(&python, &model, &["-c", "4096", "-np", "4", "--kv-unified"]);
    let s = snapshot();
    let m = model_of(&s, server.pid());
    assert_eq!(m["path"], model.display().to_string());
    assert_eq!(evidence(m), ["api", "mapped", "cmdline"]);
    assert_eq!(m["confirmed"], true);
    assert_eq!(m["architecture"], "gemma3");
    assert_eq!(m["kind"], "llm");
    assert_eq!(m["params"], 268_098_176u64);
    assert_eq!(m["file_type"], "Q4_K - Medium");
    assert_eq!(m["context"], 4096);
    assert_eq!(m["context_train"], 32768);
    assert_eq!(m["slots_total"], 4);
    assert_eq!(m["slots_busy"], 0);
    assert_eq!(m["server_url"], format!("http://127.0.0.1:{}", server.port));
    // What llama.cpp allocates for -c 4096 -np 4 --kv-unified: 12.00 MiB
    // full (4096 cells, 3 layers) + 37.50 MiB SWA (2560 cells, 15 layers).
    let kv = (12 * MIB) + (37 * MIB + MIB / 2);
    assert_eq!(m["estimate"]["kv_bytes"], kv);
    let header = gguf::open(&model).unwrap();
    assert_eq!(m["estimate"]["weights_bytes"], header.info().weights_bytes.unwrap());
    // The server's own log lines, read from its stderr file: the same KV.
    let reported = &m["reported"];
    assert_eq!(reported["source"], format!("log:{}", server.log.display()), "{m:#}");
    assert_eq!(reported["kv_bytes"], kv);
    assert!(reported["weights_bytes"].as_u64().unwrap() > 200 * MIB);
    assert!(reported["compute_bytes"].as_u64().unwrap() > 0);
    // On the CPU, RSS is the measured memory.
    let p = common::process(&s, server.pid());
    assert!(p["rss_bytes"].as_u64().unwrap() > 100 * MIB);
    assert_eq!(p["gpu"], serde_json::json!([]));
}

#[test]
fn without_mmap_the_model_is_named_by_cmdline_and_claimed_by_the_api_and_it_says_so() {
    let Some((python, model)) = environment() else { return };
    let server = Server::start(&python, &model, &["-c", "2048", "-np", "1", "--no-mmap"]);
    let s = snapshot();
    let m = model_of(&s, server.pid());
    // Loaded and closed, the file is neither mapped nor open: the API's
    // word is a claim (anyone's /props can name any file), no source.
    assert_eq!(evidence(m), ["cmdline", "claimed"]);
    assert_eq!(m["confirmed"], false);
    assert_eq!(m["context"], 2048);
    let notes = common::process(&s, server.pid())["notes"].to_string();
    assert!(notes.contains("not memory-mapped"), "{notes}");
}

#[test]
fn a_server_whose_api_needs_a_key_is_probed_with_its_own_key() {
    let Some((python, model)) = environment() else { return };
    let server = Server::start(
        &python,
        &model,
        &["-c", "1024", "-np", "1", "--api-key", "test-key-123"],
    );
    let s = snapshot();
    let m = model_of(&s, server.pid());
    assert!(evidence(m).contains(&"api"), "{m:#}");
    let p = common::process(&s, server.pid());
    assert!(
        !p.to_string().contains("test-key-123"),
        "the key never appears in output"
    );
}

/// The well-known surprise: raising a Gemma 3 server from -c 4096 to
/// -c 32768 grows a window-blind KV estimate by 6x what llama.cpp allocates,
/// since 15 of its 18 layers only hold a 512-token window. The tool shows
/// both numbers, llama.cpp's own log agrees with the window-aware one, and
/// the measured growth of the process follows it, not the window-blind one.
#[test]
fn raising_the_context_shows_the_sliding_window_gap() {
    let Some((python, model)) = environment() else { return };
    let mut rows = Vec::new();
    for ctx in ["4096", "32768"] {
        let server = Server::start(&python, &model, &["-c", ctx, "-np", "1"]);
        let s = snapshot();
        let m = model_of(&s, server.pid()).clone();
        // Anonymous resident memory: what the KV cache and buffers take,
        // without the model file's pages, which fault in at their own pace.
        let rss = common::process(&s, server.pid())["rss_anon_bytes"].as_u64().unwrap();
        assert_eq!(
            m["reported"]["kv_bytes"], m["estimate"]["kv_bytes"],
            "llama.cpp's log agrees: {m:#}"
        );
        rows.push((
            m["estimate"]["kv_bytes"].as_u64().unwrap(),
            m["estimate"]["kv_bytes_without_window"].as_u64().unwrap(),
            rss,
        ));
    }
    let (kv, blind, rss) = (
        rows[1].0 - rows[0].0,
        rows[1].1 - rows[0].1,
        rows[1].2 as i64 - rows[0].2 as i64,
    );
    eprintln!(
        "-c 4096 -> 32768: KV estimate +{} MiB (llama.cpp's log agrees), window-blind estimate +{} MiB, measured anonymous RSS {:+} MiB",
        kv / MIB,
        blind / MIB,
        rss / MIB as i64
    );
    // 3 full-attention layers x 28672 more cells x 1 KiB per cell.
    assert_eq!(kv, 84 * MIB);
    // All 18 layers x 28672 cells x 1 KiB.
    assert_eq!(blind, 504 * MIB);
    assert_eq!(blind / kv, 6);
    // The process grows with the window-aware estimate, not the blind one.
    assert!(
        (rss - kv as i64).abs() < (rss - blind as i64).abs(),
        "the process grew {rss} bytes"
    );
}

/// What the server's own log (stderr at -lv 4) says it settled on:
/// `llama_context: n_ctx = ..` and friends (src/llama-context.cpp) and the
/// bytes of every `llama_kv_cache: size = N MiB (...)` line
/// (src/llama-kv-cache.cpp), read here on their own, not by gputaskman's
/// parser.
#[derive(Debug)]
struct LoggedSettings {
    n_ctx: u64,
    n_ctx_seq: u64,
    n_seq_max: u64,
    kv_unified: bool,
    /// Each cache's size as printed, in MiB with two decimals.
    kv_mib: Vec<f64>,
}

fn logged_settings(log: &Path) -> LoggedSettings {
    let text = std::fs::read_to_string(log).unwrap();
    let value = |key: &str| -> String {
        text.lines()
            .filter_map(|l| l.split_once("llama_context: ").map(|(_, rest)| rest))
            .filter_map(|rest| rest.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| panic!("no `llama_context: {key} =` in {}", log.display()))
    };
    let kv_mib = text
        .lines()
        .filter_map(|l| l.split_once("llama_kv_cache: size = "))
        .map(|(_, rest)| rest.trim_start().split_once(' ').unwrap().0.parse().unwrap())
        .collect();
    LoggedSettings {
        n_ctx: value("n_ctx").parse().unwrap(),
        n_ctx_seq: value("n_ctx_seq").parse().unwrap(),
        n_seq_max: value("n_seq_max").parse().unwrap(),
        kv_unified: value("kv_unified").parse().unwrap(),
        kv_mib,
    }
}

/// The combinations people run, each against a real server: discovery's
/// estimate equals the KV bytes in the server's own `llama_kv_cache: size`
/// lines (to the two decimals of MiB it prints them with: exact for f16,
/// within 0.005 MiB a line for q8_0), and the settings it shows are the
/// log's `n_ctx`, `n_ctx_seq`, `n_seq_max` and `kv_unified`. A few servers
/// at a time (each about 400 MiB), one snapshot per batch.
#[test]
fn discovery_matches_the_servers_own_log_across_the_settings_people_use() {
    let Some((python, model)) = environment() else { return };
    let matrix: &[&[&str]] = &[
        &["-np", "1", "-c", "4096"],
        &["-np", "2", "-c", "8192"],
        &["-np", "4", "-c", "8192"],
        &["-np", "2", "-c", "8192", "--kv-unified"],
        &["-np", "4", "-c", "4096", "--kv-unified"],
        &["-c", "4096"],
        &[],
        &["-np", "1"],
        &["-np", "2"],
        &["-np", "2", "-c", "4096", "--swa-full"],
        &["-np", "4", "-c", "4096", "--kv-unified", "--swa-full"],
        &["-np", "2", "-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0"],
        &["-np", "1", "-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0", "--no-mmap"],
        &["-np", "2", "-c", "8192", "--no-mmap"],
    ];
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    for batch in matrix.chunks(4) {
        let servers: Vec<(&[&str], Server)> = std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .iter()
                .map(|flags| {
                    let (python, model) = (&python, &model);
                    scope.spawn(move || (*flags, Server::start(python, model, flags)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let s = snapshot();
        for (flags, server) in &servers {
            let logged = logged_settings(&server.log);
            let m = model_of(&s, server.pid());
            let settings = &m["settings"];
            let shown = (
                settings["context_total"].as_u64(),
                settings["context_per_seq"].as_u64(),
                settings["sequences"].as_u64(),
                settings["kv_unified"].as_bool(),
                m["context"].as_u64(),
                m["slots_total"].as_u64(),
            );
            let expected = (
                Some(logged.n_ctx),
                Some(logged.n_ctx_seq),
                Some(logged.n_seq_max),
                Some(logged.kv_unified),
                Some(logged.n_ctx),
                Some(logged.n_seq_max),
            );
            let log_mib: f64 = logged.kv_mib.iter().sum();
            let estimate = m["estimate"]["kv_bytes"].as_u64();
            let estimate_mib = estimate.map(|b| b as f64 / MIB as f64);
            let within = estimate_mib.is_some_and(|e| (e - log_mib).abs() <= 0.005 * logged.kv_mib.len() as f64 + 1e-9);
            eprintln!(
                "{:<50} log: n_ctx {} n_ctx_seq {} n_seq_max {} kv_unified {} KV {:?} = {log_mib:.2} MiB; estimate {:.4} MiB; settings {settings}",
                flags.join(" "),
                logged.n_ctx,
                logged.n_ctx_seq,
                logged.n_seq_max,
                logged.kv_unified,
                logged.kv_mib,
                estimate_mib.unwrap_or(f64::NAN),
            );
            if shown != expected || !within || m["reported"]["kv_bytes"].as_u64().is_none() {
                failures.push(format!(
                    "{}: shown {shown:?}, log {expected:?}; KV estimate {estimate_mib:?} MiB, log {log_mib} MiB",
                    flags.join(" ")
                ));
            }
            // f16 caches print exactly: the estimate is those bytes.
            if !flags.contains(&"q8_0") && estimate != Some((log_mib * MIB as f64).round() as u64) {
                failures.push(format!("{}: {estimate:?} bytes, log {log_mib} MiB", flags.join(" ")));
            }
        }
    }
    eprintln!(
        "matrix of {} servers: {:.1} s",
        matrix.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The issue's server: `-c 8192 -np 2` is two streams of 4096 cells, and
/// the text view shows 54.00 MiB estimated beside the 54.0 MiB reported.
#[test]
fn the_8192_by_2_server_shows_the_kv_llama_cpp_allocates() {
    let Some((python, model)) = environment() else { return };
    let server = Server::start(&python, &model, &["-c", "8192", "-np", "2"]);
    let mut cmd = assert_cmd::Command::cargo_bin("gputaskman").unwrap();
    let out = cmd
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .arg("--once")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = server.pid().to_string();
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| {
            l.split_whitespace()
                .next()
                .is_none_or(|w| w.trim_end_matches(['*', '?']) != pid)
        })
        .take(12)
        .collect();
    let block = block.join("\n");
    assert!(block.contains("context 8192 (4096 per slot)"), "{block}");
    let line = |kind: &str| {
        block
            .lines()
            .find(|l| l.trim_start().starts_with(kind))
            .unwrap_or("")
            .to_string()
    };
    assert!(line("estimated").contains("54.0 MiB"), "{block}");
    assert!(line("reported").contains("54.0 MiB"), "{block}");
}

/// One HTTP/1.1 request to a loopback port; the body of the answer.
fn http(port: u16, method: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut out = Vec::new();
    if s.write_all(request.as_bytes()).is_ok() {
        let _ = s.read_to_end(&mut out);
    }
    let text = String::from_utf8_lossy(&out);
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// The value of `name`'s one series for process `pid` in Prometheus text.
fn metric(text: &str, name: &str, pid: u32) -> Option<f64> {
    let pid = format!("pid=\"{pid}\"");
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(&pid))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Two clients sending completions to `port` until the value is dropped.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    clients: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(port: u16) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clients = (0..2)
            .map(|i| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let body = format!(
                        r#"{{"prompt":"Client {i} counts slowly from one to one hundred:","n_predict":48,"cache_prompt":false}}"#
                    );
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        http(port, "POST", "/completion", &body);
                    }
                })
            })
            .collect();
        Load { stop, clients }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for c in self.clients.drain(..) {
            let _ = c.join();
        }
    }
}

/// The live view of a server under load: its row says how many slots are
/// busy and how many tokens a second it generates.
#[test]
fn the_live_view_shows_a_loaded_server_busy_with_its_token_rate() {
    let Some((python, model)) = environment() else { return };
    let Some(tmux) = common::tmux::tmux_path() else { return };
    let server = Server::start(&python, &model, &["-c", "4096", "-np", "2"]);
    let _load = Load::start(server.port);
    let t = common::tmux::Tmux::new(tmux, "loaded");
    t.start_sized(
        &format!("GPUTASKMAN_NVML_LIB=/nonexistent {}", env!("CARGO_BIN_EXE_gputaskman")),
        240,
        45,
    );
    let pid = server.pid().to_string();
    // The rate needs two readings of the server's counters (2 s apart).
    let screen = t.wait_for(
        "the server's row with a token rate",
        std::time::Duration::from_secs(60),
        |s| {
            s.lines()
                .any(|l| l.trim_start().starts_with(&pid) && tokens_per_second(l).is_some_and(|r| r > 0.0))
        },
    );
    let row = screen.lines().find(|l| l.trim_start().starts_with(&pid)).unwrap();
    assert!(row.contains("/2 busy, "), "{row}");
}

/// The `N tok/s` figure of a live view row.
fn tokens_per_second(row: &str) -> Option<f64> {
    let before = &row[..row.find(" tok/s")?];
    before.rsplit(' ').next()?.parse().ok()
}

/// A server under load (two clients sending completions to its two slots)
/// shows what it does now: a one-shot `--json` samples a busy server's
/// token totals twice (the requests in flight counted from /slots), so it
/// has non-zero rates beside its requests and busy slots; `serve`,
/// sampling on, exports non-zero tokens per second and busy slots in
/// /metrics and in its /snapshot JSON.
#[test]
fn a_loaded_server_shows_its_requests_busy_slots_and_token_rates() {
    let Some((python, model)) = environment() else { return };
    let server = Server::start(&python, &model, &["-c", "4096", "-np", "2"]);
    let load = Load::start(server.port);
    std::thread::sleep(std::time::Duration::from_secs(2));
    // A snapshot taken between two requests sees no busy slot and takes
    // one sample (null rates): a few tries find it at work.
    let mut tries = 0;
    let activity = loop {
        tries += 1;
        let s = snapshot();
        let m = model_of(&s, server.pid());
        if m["slots_busy"].as_u64().unwrap_or(0) > 0 || tries == 5 {
            break m["activity"].clone();
        }
    };
    assert_eq!(activity["source"], "api:/slots,/metrics", "{activity:#}");
    assert!(activity["requests_running"].as_u64().is_some(), "{activity:#}");
    assert_eq!(activity["requests_waiting"], 0, "{activity:#}");
    let generation = activity["generation_tokens_per_second"].as_f64();
    assert!(
        generation.is_some_and(|r| r > 0.0),
        "one-shot rate of a busy server: {activity:#}"
    );
    eprintln!("one-shot --json of the loaded server: {generation:?} tokens/s generated");
    assert_eq!(activity["kv_cache_used_ratio"], Value::Null, "llama.cpp no longer says");

    let port = common::free_port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1").args([
        "serve",
        "--interval",
        "1",
        "--listen",
        &format!("127.0.0.1:{port}"),
    ]);
    let _serve = common::Daemon::start(cmd, port, std::time::Duration::from_secs(30));
    let started = std::time::Instant::now();
    let (mut generation, mut busy, mut prompt) = (0.0f64, 0.0f64, 0.0f64);
    while started.elapsed() < std::time::Duration::from_secs(60) && (generation <= 0.0 || busy <= 0.0 || prompt <= 0.0)
    {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let text = http(port, "GET", "/metrics", "");
        let of = |name| metric(&text, name, server.pid()).unwrap_or(0.0);
        generation = generation.max(of("gputaskman_model_generation_tokens_per_second"));
        prompt = prompt.max(of("gputaskman_model_prompt_tokens_per_second"));
        busy = busy.max(of("gputaskman_model_slots_busy"));
    }
    eprintln!(
        "under load, serve's /metrics: generation {generation:.1} tokens/s, prompt {prompt:.1} tokens/s, slots busy {busy} (after {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    assert!(generation > 0.0 && prompt > 0.0 && busy > 0.0);
    let snap: Value = serde_json::from_str(&http(port, "GET", "/snapshot", "")).unwrap();
    let activity = &model_of(&snap, server.pid())["activity"];
    assert!(
        activity["generation_tokens_per_second"].as_f64().is_some(),
        "{activity:#}"
    );
    drop(load);
}
