//! A real vLLM server (vLLM 0.32's CPU build, scripts/vllm-env.sh) serving
//! a tiny float32 Llama that the test writes (tests/servers/tiny_llama.py:
//! 2 layers, 2 KV heads of 32, random weights, nothing downloaded), asked
//! once for a completion, then discovered by gputaskman: its model (the
//! folder, its safetensors' bytes), the settings it runs with, the KV pool
//! it reports (tokens, blocks, bytes), the estimate from the folder's
//! files checked against that pool to the block, and what it did.
//!
//! One server start (2 to 3 minutes on 2 cores) serves every assertion.
//! Skipped, loudly, where GPUTASKMAN_VLLM_PYTHON is not set
//! (scripts/test-env.sh sets it once scripts/vllm-env.sh has installed
//! vLLM; .ci/run does).

mod common;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long vLLM may take to serve: 167 s measured on a loaded 2-core
/// machine (its torch.compile warm-up is most of it).
const START_LIMIT: Duration = Duration::from_secs(540);

/// The KV cache the CPU build is given (VLLM_CPU_KVCACHE_SPACE, in GiB).
const KV_GIB: u64 = 1;

/// The vLLM server and its engine processes (one process group), ended
/// together when dropped, even when the test fails.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline && self.child.try_wait().ok().flatten().is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on loopback; the status line and body.
fn http(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<(String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    Ok((head.lines().next().unwrap_or_default().to_string(), body.to_string()))
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Starts `vllm serve MODEL` and waits until /v1/models answers.
fn serve(python: &Path, model: &Path, port: u16, log: &Path) -> Server {
    use std::os::unix::process::CommandExt;
    let vllm = python.with_file_name("vllm");
    let out = std::fs::File::create(log).unwrap();
    let child = Command::new(python)
        .arg(&vllm)
        .args(["serve"])
        .arg(model)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--dtype", "float32", "--max-model-len", "512"])
        .args(["--gpu-memory-utilization", "0.5", "--max-num-seqs", "4"])
        // Without a target device vLLM picks no platform, loads its
        // AVX-512 kernels and dies of SIGILL on AVX2 machines.
        .env("VLLM_TARGET_DEVICE", "cpu")
        .env("VLLM_CPU_KVCACHE_SPACE", KV_GIB.to_string())
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .env("VLLM_NO_USAGE_STATS", "1")
        .env("DO_NOT_TRACK", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("start vllm serve");
    let mut server = Server { child };
    let started = Instant::now();
    loop {
        if let Ok((status, _)) = http(port, "GET", "/v1/models", "") {
            if status.contains(" 200 ") {
                eprintln!("vLLM served after {:.0} s", started.elapsed().as_secs_f64());
                return server;
            }
        }
        if let Ok(Some(exit)) = server.child.try_wait() {
            panic!("vllm serve exited ({exit}):\n{}", log_tail(log));
        }
        assert!(
            started.elapsed() < START_LIMIT,
            "vllm serve did not answer in {START_LIMIT:?}:\n{}",
            log_tail(log)
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The tensor bytes of a safetensors file, as its header says them: the
/// file less its 8-byte length and the header.
fn safetensors_data_bytes(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    bytes.len() as u64 - 8 - header
}

fn children_of(snapshot: &Value, pid: u32) -> Vec<&Value> {
    let processes = snapshot["processes"].as_array().unwrap();
    processes.iter().filter(|p| p["ppid"] == pid).collect()
}

#[test]
fn a_real_vllm_server_is_discovered_with_its_model_settings_kv_pool_and_work() {
    let Some(python) = std::env::var_os("GPUTASKMAN_VLLM_PYTHON").map(PathBuf::from) else {
        eprintln!("SKIPPED: the real vLLM is not installed (scripts/vllm-env.sh; then scripts/test-env.sh sets GPUTASKMAN_VLLM_PYTHON)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-llama");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/tiny_llama.py");
    let made = Command::new(&python)
        .arg(script)
        .arg(&model)
        .arg("float32")
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let weights = safetensors_data_bytes(&model.join("model.safetensors"));

    let port = common::free_port();
    let log = dir.path().join("vllm.log");
    let server = serve(&python, &model, port, &log);
    let body = format!(
        r#"{{"model":"{}","prompt":"w1 w2 w3","max_tokens":8,"ignore_eos":true}}"#,
        model.display()
    );
    let (status, reply) = http(port, "POST", "/v1/completions", &body).unwrap();
    assert!(status.contains(" 200 "), "{status} {reply}\n{}", log_tail(&log));

    let snap = common::snapshot_without_gpu(&[]);
    let me = common::process(&snap, server.child.id());
    assert_eq!(me["kind"], "ai");
    let models = me["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{me:#}");
    let m = &models[0];
    let folder = model.display().to_string();
    // The folder it serves is the model: named by /v1/models and argv.
    assert_eq!(m["path"], folder.as_str(), "{m:#}");
    assert_eq!(m["name"], folder.as_str());
    assert_eq!(m["evidence"], serde_json::json!(["api", "cmdline"]));
    assert_eq!(m["confirmed"], true);
    assert_eq!(m["context"], 512);
    assert_eq!(m["server_url"], format!("http://127.0.0.1:{port}"));

    // The estimate from its files: the safetensors headers' bytes, and
    // 2 (K, V) × 2 layers × 2 KV heads × 32 × 4 bytes (--dtype float32).
    let estimate = &m["estimate"];
    assert_eq!(estimate["weights_bytes"], weights, "{m:#}");
    let per_token = 2 * 2 * 2 * 32 * 4;
    assert_eq!(estimate["kv_bytes_per_token"], per_token);

    // vLLM's own figures: the memory it gave the cache, its pool in
    // tokens and blocks, and the settings as it runs them.
    let reported = &m["reported"];
    assert_eq!(reported["kv_bytes"], KV_GIB << 30, "{m:#}");
    let runtime = &m["runtime"];
    let tokens = runtime["kv_tokens"].as_u64().expect("KV tokens from its log");
    assert_eq!(
        tokens,
        (KV_GIB << 30) / per_token,
        "the log's tokens are the bytes over the per-token cost"
    );
    let blocks = runtime["kv_blocks"].as_u64().expect("blocks from /metrics");
    let block_size = runtime["kv_block_size"].as_u64().unwrap();
    assert_eq!(blocks * block_size, tokens);
    assert_eq!(runtime["kv_pool_device"], "CPU");
    assert_eq!(runtime["max_model_len"], 512);
    assert_eq!(runtime["memory_utilization"], 0.5);
    assert_eq!(runtime["max_concurrency"], (tokens / 512) as f64);
    // The estimate's pool equals vLLM's, to the block.
    assert_eq!(estimate["kv_pool_blocks"], blocks, "{m:#}");
    assert_eq!(estimate["kv_bytes"], blocks * block_size * per_token);

    // What it did: one request of 3 prompt tokens and 8 generated, done.
    assert_eq!(runtime["prompt_tokens_total"], 3, "{runtime:#}");
    assert_eq!(runtime["generation_tokens_total"], 8);
    assert_eq!(runtime["preemptions"], 0);
    let activity = &m["activity"];
    assert_eq!(activity["requests_running"], 0, "{activity:#}");
    assert_eq!(activity["requests_waiting"], 0);
    assert_eq!(activity["source"], "api:/metrics");

    // Its engine core and worker: their setproctitle titles alone, not
    // probed as another runtime's server.
    let engine = children_of(&snap, server.child.id())
        .into_iter()
        .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("VLLM::")))
        .unwrap_or_else(|| panic!("no VLLM::EngineCore child in {snap:#}"));
    assert_eq!(engine["cmdline"], "VLLM::EngineCore", "{engine:#}");
    let worker = children_of(&snap, engine["pid"].as_u64().unwrap() as u32);
    assert!(worker.iter().any(|w| w["cmdline"] == "VLLM::Worker"), "{worker:#?}");
    let all = snap.to_string();
    assert!(
        !all.contains("no llama.cpp API"),
        "a vLLM process was probed as llama.cpp"
    );

    // The text view names the model by its folder.
    let once = assert_cmd::Command::cargo_bin("gputaskman")
        .unwrap()
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .args(["--once", "--wide"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&once.stdout);
    assert!(text.contains("model: tiny-llama [api, cmdline: confirmed]"), "{text}");
    assert!(text.contains("KV pool 1048576 tokens"), "{text}");
    drop(server);
}
