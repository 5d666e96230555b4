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
fn without_mmap_the_model_is_named_by_api_and_cmdline_and_it_says_so() {
    let Some((python, model)) = environment() else { return };
    let server = Server::start(&python, &model, &["-c", "2048", "-np", "1", "--no-mmap"]);
    let s = snapshot();
    let m = model_of(&s, server.pid());
    assert_eq!(evidence(m), ["api", "cmdline"]);
    assert_eq!(m["confirmed"], true);
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
