//! The runtime probes against live HTTP servers on loopback that serve
//! recorded API answers (tests/data) under the runtime's process name, and
//! against servers that misbehave: the process is still listed with its
//! other evidence and a note, and the snapshot never waits long.

mod common;

use common::{process, test_python, Daemon};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn data(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
        .display()
        .to_string()
}

/// tests/servers/fake_api.py as a process named `name`, serving files of
/// tests/data.
fn fake_api(python: &Path, dir: &Path, name: &str, mode: &str, routes: &[(&str, &str)], extra: &[&str]) -> Daemon {
    let files: Vec<(&str, PathBuf)> = routes
        .iter()
        .map(|(path, file)| (*path, PathBuf::from(data(file))))
        .collect();
    let routes: Vec<(&str, &Path)> = files.iter().map(|(path, file)| (*path, file.as_path())).collect();
    common::fake_api(python, dir, name, mode, &routes, extra)
}

fn models(s: &Value, pid: u32) -> Vec<Value> {
    process(s, pid)["models"].as_array().unwrap().clone()
}

/// A stand-in `name` serving `routes`, and the models one snapshot lists
/// for it; None (the test skips) without the test Python.
fn served_models(name: &str, routes: &[(&str, &str)]) -> Option<Vec<Value>> {
    let python = test_python()?;
    let dir = tempfile::tempdir().unwrap();
    let server = fake_api(&python, dir.path(), name, "serve", routes, &[]);
    let s = common::snapshot_without_gpu(&[]);
    Some(models(&s, server.pid()))
}

#[test]
fn ollama_models_come_from_api_ps_with_their_blobs() {
    let Some(python) = test_python() else { return };
    let _one = OLLAMA.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // OLLAMA_MODELS with the first model's blob: a real GGUF file.
    // (/api/ps's digest is the manifest's; the manifest names the blob.)
    let (server, models_dir, (blob, _)) = ollama_serve(&python, dir.path());
    let s = common::snapshot_without_gpu(&[("OLLAMA_MODELS", &models_dir)]);
    let p = process(&s, server.pid());
    assert_eq!(p["kind"], "ai");
    assert_eq!(p["runtimes"], serde_json::json!(["ollama"]));
    let m = models(&s, server.pid());
    assert_eq!(
        m.iter().filter(|m| m["evidence"] == serde_json::json!(["api"])).count(),
        2,
        "{m:#?}"
    );
    // The first: its blob is here, so the file's header is read too.
    assert_eq!(m[0]["path"], blob.display().to_string());
    assert_eq!(m[0]["evidence"], serde_json::json!(["api"]));
    assert_eq!(m[0]["confirmed"], false, "one source is not a confirmation");
    assert_eq!(m[0]["architecture"], "qwen3");
    assert_eq!(m[0]["context"], 8192);
    assert_eq!(m[0]["reported"]["total_bytes"], 6_654_289_920u64);
    assert_eq!(m[0]["reported"]["device_bytes"], 6_654_289_920u64);
    assert_eq!(m[0]["reported"]["source"], "api:/api/ps");
    // Qwen3-0.6B shape at 8192 context, f16: 896 MiB, estimated beside.
    assert_eq!(m[0]["estimate"]["kv_bytes"], 896u64 << 20);
    assert_eq!(m[0]["server_url"], format!("http://127.0.0.1:{}", server.port));
    assert_eq!(p["listen_ports"], serde_json::json!([server.port]));
    // The second: no blob here, named by the API alone.
    assert_eq!(m[1]["path"], Value::Null);
    assert_eq!(m[1]["name"], "qwen3:30b");
    assert_eq!(m[1]["reported"]["device_bytes"], 16_106_127_360u64);
    assert_eq!(m[1]["estimate"], Value::Null);
    // When Ollama unloads each; it says nothing of requests or rates.
    assert_eq!(m[0]["activity"]["expires_at"], "2026-11-30T17:35:12.123456789Z");
    assert_eq!(m[1]["activity"]["expires_at"], "2026-11-30T17:40:00Z");
    assert_eq!(m[1]["activity"]["source"], "api:/api/ps");
    assert_eq!(m[1]["activity"]["requests_running"], Value::Null);
    assert_eq!(m[1]["activity"]["generation_tokens_per_second"], Value::Null);
}

/// The Ollama tests one at a time: every `ollama serve` on the machine reads
/// the models folder of the snapshot's OLLAMA_MODELS, so two at once would
/// serve the same blobs.
static OLLAMA: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// An Ollama models folder: `manifests/<registry>/<namespace>/<model>/<tag>`
/// naming each model's blob by digest (server/images.go, GetManifest and
/// GetBlobsPath), some blobs present, some not, and hostile entries.
/// A fake `ollama serve` in `dir` answering the recorded /api/ps, and its
/// model store (OLLAMA_MODELS, from [`ollama_store`]) with the blobs.
fn ollama_serve(python: &Path, dir: &Path) -> (Daemon, PathBuf, (PathBuf, PathBuf)) {
    let store = dir.join("ollama-models");
    let blobs = ollama_store(&store);
    let server = fake_api(
        python,
        dir,
        "ollama",
        "serve",
        &[("/api/ps", "ollama/ps.json")],
        &["serve"],
    );
    (server, store, blobs)
}

fn ollama_store(root: &Path) -> (PathBuf, PathBuf) {
    let blob = |hex: char| {
        root.join("blobs")
            .join(format!("sha256-{}", hex.to_string().repeat(64)))
    };
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    let (llama, gemma) = (blob('a'), blob('b'));
    std::fs::copy(data("gguf/qwen3-0.6b-shape.gguf"), &llama).unwrap();
    std::fs::copy(data("gguf/gemma3-4b-shape.gguf"), &gemma).unwrap();
    let manifest = |rel: &str, model_digest: &str| {
        let path = root.join("manifests").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let body = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": format!("sha256:{}", "c".repeat(64)), "size": 485},
            "layers": [
                {"mediaType": "application/vnd.ollama.image.template", "digest": format!("sha256:{}", "d".repeat(64)), "size": 1429},
                {"mediaType": "application/vnd.ollama.image.model", "digest": model_digest, "size": 4_920_734_272u64}
            ]
        });
        std::fs::write(path, body.to_string()).unwrap();
    };
    manifest(
        "registry.ollama.ai/library/llama3.1/8b",
        &format!("sha256:{}", "a".repeat(64)),
    );
    manifest(
        "registry.ollama.ai/library/gemma3/4b",
        &format!("sha256:{}", "b".repeat(64)),
    );
    // Pulled from Hugging Face; its blob is gone.
    manifest("hf.co/unsloth/Qwen3-GGUF/Q4_K_M", &format!("sha256:{}", "e".repeat(64)));
    // Hostile: a digest that walks out of blobs/, garbage, a FIFO.
    manifest(
        "registry.ollama.ai/library/evil/latest",
        "sha256:../../../../etc/passwd",
    );
    std::fs::write(
        root.join("manifests/registry.ollama.ai/library/gemma3/garbage"),
        b"\x00{not json",
    )
    .unwrap();
    let fifo = root.join("manifests/registry.ollama.ai/library/gemma3/fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    (llama, gemma)
}

#[test]
fn ollama_lists_installed_models_and_pairs_its_runner_by_blob() {
    let Some(python) = test_python() else { return };
    let _one = OLLAMA.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (serve, store, (llama, gemma)) = ollama_serve(&python, dir.path());
    // `ollama runner --model BLOB` (llm/server.go), as Ollama starts it.
    let runner_dir = dir.path().join("runner");
    std::fs::create_dir(&runner_dir).unwrap();
    let llama_arg = llama.display().to_string();
    let runner = common::Sleeper::spawn(
        &runner_dir,
        "ollama",
        &["runner", "--model", &llama_arg, "--ctx-size", "8192", "--port", "40123"],
    );
    let s = common::snapshot_without_gpu(&[("OLLAMA_MODELS", &store)]);

    // The runner's model: its blob on the command line and in /api/ps.
    let r = models(&s, runner.pid());
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0]["path"], llama_arg);
    assert_eq!(r[0]["evidence"], serde_json::json!(["api", "cmdline"]));
    assert_eq!(r[0]["confirmed"], true, "api and cmdline");
    assert_eq!(r[0]["name"], "llama3.1:8b");
    assert_eq!(r[0]["name_source"], "ollama-tag");
    assert_eq!(r[0]["architecture"], "qwen3");
    assert_eq!(r[0]["reported"]["total_bytes"], 6_654_289_920u64);
    assert_eq!(r[0]["reported"]["device_bytes"], 6_654_289_920u64);
    assert_eq!(r[0]["reported"]["source"], "api:/api/ps");
    assert_eq!(r[0]["activity"]["expires_at"], "2026-11-30T17:35:12.123456789Z");
    assert_eq!(r[0]["server_url"], format!("http://127.0.0.1:{}", serve.port));
    let notes = process(&s, runner.pid())["notes"].to_string();
    assert!(!notes.contains("no Ollama API"), "a runner has no /api/ps: {notes}");

    // The server: what /api/ps says is loaded, then what is installed.
    let m = models(&s, serve.pid());
    let names: Vec<&str> = m.iter().map(|m| m["name"].as_str().unwrap_or("?")).collect();
    assert_eq!(
        names,
        [
            "llama3.1:8b",
            "qwen3:30b",
            "evil:latest",
            "gemma3:4b",
            "hf.co/unsloth/Qwen3-GGUF:Q4_K_M"
        ],
        "{m:#?}"
    );
    assert_eq!(m[0]["path"], llama_arg, "the blob its manifest names");
    assert_eq!(m[0]["evidence"], serde_json::json!(["api"]));
    assert_eq!(m[1]["path"], Value::Null, "no manifest for it here");
    for installed in &m[2..] {
        assert_eq!(installed["evidence"], serde_json::json!(["installed"]), "{installed:#}");
        assert_eq!(installed["confirmed"], false, "installed proves nothing");
        assert_eq!(installed["reported"], Value::Null);
        assert_eq!(
            installed["estimate"],
            Value::Null,
            "not loaded: no settings to estimate with"
        );
        assert_eq!(installed["activity"], Value::Null);
    }
    assert_eq!(m[2]["path"], Value::Null, "a digest outside blobs/ is no path");
    assert_eq!(m[3]["path"], gemma.display().to_string());
    assert_eq!(m[3]["architecture"], "gemma3", "read from the blob's header");
    assert!(m[3]["params"].as_u64().unwrap() > 0, "{:#}", m[3]);
    assert_eq!(m[4]["path"], Value::Null, "its blob is gone");
}

/// A runner whose `ollama serve` is not seen (another user's, or not
/// answering): its blob is still named by the tag whose manifest names it
/// (`llama3.1:8b`, not `sha256-aaaa…`); a blob no manifest names takes the
/// header's `general.name`, and the JSON says which each is.
#[test]
fn an_ollama_runner_alone_is_named_by_its_tag_from_the_manifests() {
    let _one = OLLAMA.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("ollama-models");
    let (llama, _) = ollama_store(&store);
    let untagged = store.join("blobs").join(format!("sha256-{}", "f".repeat(64)));
    std::fs::copy(data("gguf/qwen3-0.6b-shape.gguf"), &untagged).unwrap();
    let runner = |blob: &Path| {
        let blob = blob.display().to_string();
        common::Sleeper::spawn(
            dir.path(),
            "ollama",
            &["runner", "--model", &blob, "--ctx-size", "2048", "--port", "40124"],
        )
    };
    let (tagged, bare) = (runner(&llama), runner(&untagged));
    let s = common::snapshot_without_gpu(&[("OLLAMA_MODELS", &store)]);
    let m = models(&s, tagged.pid());
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["path"], llama.display().to_string());
    assert_eq!(m[0]["name"], "llama3.1:8b", "{:#}", m[0]);
    assert_eq!(m[0]["name_source"], "ollama-tag");
    assert_eq!(
        m[0]["evidence"],
        serde_json::json!(["cmdline"]),
        "a manifest is no evidence"
    );
    let m = models(&s, bare.pid());
    assert_eq!(m[0]["name_source"], "header", "{:#}", m[0]);
    let header_name = m[0]["name"].as_str().expect("the header's general.name");
    assert!(!header_name.starts_with("sha256-"), "{header_name}");
}

#[test]
fn lm_studio_lists_only_its_loaded_model() {
    let Some(m) = served_models("lms", &[("/api/v0/models", "lmstudio/models.json")]) else {
        return;
    };
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["name"], "meta-llama-3.1-8b-instruct");
    assert_eq!(m[0]["context"], 8192);
    assert_eq!(m[0]["evidence"], serde_json::json!(["api"]));
}

#[test]
fn lm_studio_current_api_is_asked_first() {
    // Both answers served: the current one (LM Studio 0.4+) is the one read.
    let Some(m) = served_models(
        "lms",
        &[
            ("/api/v1/models", "lmstudio/models_v1.json"),
            ("/api/v0/models", "lmstudio/models.json"),
        ],
    ) else {
        return;
    };
    let names: Vec<&str> = m.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["openai/gpt-oss-20b", "openai/gpt-oss-20b:2"], "{m:#?}");
    assert_eq!(m[0]["context"], 16384);
    assert_eq!(m[1]["context"], 4096);
    assert_eq!(m[0]["evidence"], serde_json::json!(["api"]));
    assert_eq!(m[0]["architecture"], "gpt-oss");
    assert_eq!(m[0]["file_type"], "MXFP4");
    assert_eq!(m[0]["confirmed"], false);
}

#[test]
fn vllm_gives_the_model_and_kv_capacity_from_config_and_metrics() {
    let Some(m) = served_models(
        "vllm",
        &[("/v1/models", "vllm/models.json"), ("/metrics", "vllm/metrics.txt")],
    ) else {
        return;
    };
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["name"], "Qwen/Qwen3-0.6B");
    assert_eq!(m[0]["context"], 40960);
    // The pool in vLLM's own figures; no bytes, as neither /metrics (its
    // size was profiled, not set) nor a log says them.
    let runtime = &m[0]["runtime"];
    assert_eq!(runtime["kv_tokens"], 439_792, "{m:#?}");
    assert_eq!(runtime["kv_blocks"], 27_487);
    assert_eq!(runtime["kv_block_size"], 16);
    assert_eq!(runtime["memory_utilization"], 0.9);
    assert_eq!(m[0]["reported"], Value::Null);
    // What vLLM is doing now, as its recorded /metrics says.
    let activity = &m[0]["activity"];
    assert_eq!(activity["requests_running"], 2, "{activity:#}");
    assert_eq!(activity["requests_waiting"], 1);
    assert_eq!(activity["kv_cache_used_ratio"], 0.0125);
    assert_eq!(activity["source"], "api:/metrics");
    assert_eq!(activity["generation_tokens_per_second"], Value::Null, "one sample");
}

/// The token rates of a server whose counters move at 400 prompt and 600
/// generated tokens a second (`{{moving BASE RATE}}`). The window is timed
/// by the monitor and the counters by the server: on a loaded machine the
/// two clocks' reads are tens of ms apart.
fn assert_moving_rates(activity: &Value) {
    let generation = activity["generation_tokens_per_second"].as_f64().expect("two reads");
    let prompt = activity["prompt_tokens_per_second"].as_f64().unwrap();
    assert!((450.0..=750.0).contains(&generation), "{activity:#}");
    assert!((prompt / generation - 400.0 / 600.0).abs() < 0.02, "{activity:#}");
}

/// A vLLM server first seen busy is read again 300 ms later, so one
/// snapshot has its token rates: its counters move at 400 prompt and 600
/// generated tokens a second (tests/data/vllm/README.md), whoever reads
/// them and however often.
#[test]
fn a_busy_vllm_gives_its_token_rates_from_two_reads_of_its_counters() {
    let Some(m) = served_models(
        "vllm",
        &[
            ("/v1/models", "vllm/models.json"),
            ("/metrics", "vllm/metrics-moving.txt"),
        ],
    ) else {
        return;
    };
    let activity = &m[0]["activity"];
    assert_moving_rates(activity);
    assert_eq!(activity["requests_running"], 2);
    let total = m[0]["runtime"]["generation_tokens_total"].as_u64().unwrap();
    assert!(total >= 5000 + 180, "the later read is shown: {total}");
}

/// A folder holding a model of Qwen2.5-0.5B's shape (24 layers, 2 KV
/// heads of 64, bfloat16: 12,288 B of KV a token) and one 1 MiB tensor of
/// weights, for a server that names it.
fn qwen_05b_folder(dir: &Path) -> PathBuf {
    let folder = dir.join("qwen2.5-0.5b-instruct");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(
        folder.join("config.json"),
        r#"{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":896,
            "num_attention_heads":14,"num_key_value_heads":2,"num_hidden_layers":24,
            "torch_dtype":"bfloat16","max_position_embeddings":32768}"#,
    )
    .unwrap();
    let header = br#"{"model.embed_tokens.weight":{"dtype":"BF16","shape":[512,1024],"data_offsets":[0,1048576]}}"#;
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header);
    file.resize(file.len() + (1 << 20), 0);
    std::fs::write(folder.join("model.safetensors"), file).unwrap();
    folder
}

/// SGLang serving a folder here, its answers as recorded from SGLang
/// 0.5.6.post2 (tests/data/sglang): the pool and the memory each part
/// took in its own figures, beside the estimate from the folder, and what
/// it does now with token rates from two reads of its counters.
#[test]
fn sglang_reports_its_pool_beside_the_estimate_from_its_folder() {
    let Some(python) = test_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let folder = qwen_05b_folder(dir.path());
    let recorded = std::fs::read_to_string(data("sglang/server_info.json")).unwrap();
    let info = dir.path().join("server_info.json");
    let folder_text = folder.display().to_string();
    std::fs::write(
        &info,
        recorded
            .replace(
                r#""model_path":"qwen/qwen2.5-0.5b-instruct""#,
                &format!(r#""model_path":"{folder_text}""#),
            )
            .replace(
                r#""served_model_name":"qwen/qwen2.5-0.5b-instruct""#,
                r#""served_model_name":"qwen2.5-0.5b""#,
            ),
    )
    .unwrap();
    let metrics = PathBuf::from(data("sglang/metrics-moving.txt"));
    let server = common::fake_api(
        &python,
        dir.path(),
        "sglang",
        "serve",
        &[("/server_info", &info), ("/metrics", &metrics)],
        &["--model-path", &folder_text],
    );
    let s = common::snapshot_without_gpu(&[]);
    let m = models(&s, server.pid());
    assert_eq!(m.len(), 1, "{m:#?}");
    let m = &m[0];
    assert_eq!(m["name"], "qwen2.5-0.5b");
    assert_eq!(m["path"], folder_text.as_str());
    assert_eq!(m["evidence"], serde_json::json!(["api", "cmdline"]));
    assert_eq!(m["confirmed"], true);
    // SGLang's own figures, GiB to two decimals (0.5.6's memory_usage).
    let gib = |x: f64| (x * (1u64 << 30) as f64).round() as u64;
    assert_eq!(m["reported"]["weights_bytes"], gib(1.06), "{m:#}");
    assert_eq!(m["reported"]["kv_bytes"], gib(0.23));
    assert_eq!(m["reported"]["compute_bytes"], gib(0.07));
    assert_eq!(m["reported"]["source"], "api");
    let runtime = &m["runtime"];
    assert_eq!(runtime["kv_tokens"], 20480);
    assert_eq!(runtime["kv_block_size"], 1);
    assert_eq!(runtime["memory_utilization"], 0.841);
    assert_eq!(runtime["prefix_cache_hit_ratio"], 0.25);
    assert!(
        runtime["generation_tokens_total"].as_u64().unwrap() >= 5000,
        "the real-time counter, not the finished requests' 4900"
    );
    // The estimate: the folder's weights, and its per-token cost times
    // SGLang's pool, within SGLang's rounding of its own 0.23 GiB.
    let estimate = &m["estimate"];
    assert_eq!(estimate["weights_bytes"], 1 << 20);
    assert_eq!(estimate["kv_bytes_per_token"], 12_288);
    assert_eq!(estimate["kv_bytes"], 12_288 * 20_480);
    let reported_kv = m["reported"]["kv_bytes"].as_f64().unwrap();
    assert!(
        (12_288.0 * 20_480.0 / reported_kv - 1.0).abs() < 0.022,
        "0.23 GiB is 0.234 rounded"
    );
    let activity = &m["activity"];
    assert_eq!(activity["requests_running"], 2, "{activity:#}");
    assert_eq!(activity["requests_waiting"], 1);
    assert_eq!(activity["kv_cache_used_ratio"], 0.05);
    assert_moving_rates(activity);
}

/// TGI's router, its answers as TGI 2.2 (`/info` with the pool) and
/// 3.3.5 (`/metrics`) give them: the hub model by its id, its pool and
/// context, and the work in the router's figures, whose token counts grow
/// only as each request ends.
#[test]
fn tgi_gives_its_model_pool_and_work() {
    let Some(m) = served_models(
        "text-generation-router",
        &[("/info", "tgi/info-2.2.json"), ("/metrics", "tgi/metrics.txt")],
    ) else {
        return;
    };
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["name"], "meta-llama/Meta-Llama-3.1-8B-Instruct");
    assert_eq!(m[0]["path"], Value::Null, "a hub id is no folder here");
    assert_eq!(m[0]["context"], 4096);
    assert_eq!(m[0]["estimate"], Value::Null, "nothing to estimate from");
    assert_eq!(m[0]["reported"], Value::Null, "TGI says no bytes");
    let runtime = &m[0]["runtime"];
    assert_eq!(runtime["kv_tokens"], 19_056, "{runtime:#}");
    assert_eq!(runtime["generation_tokens_total"], 3423);
    assert_eq!(runtime["prompt_tokens_total"], 662);
    let names = runtime["names"].as_array().unwrap();
    assert!(
        names
            .iter()
            .any(|n| n.as_str().unwrap().contains("counted as each request ends")),
        "{names:?}"
    );
    assert_eq!(m[0]["activity"]["requests_running"], 0);
    assert_eq!(m[0]["activity"]["requests_waiting"], 0);
    assert_eq!(
        m[0]["activity"]["generation_tokens_per_second"],
        Value::Null,
        "totals of finished requests give no rate of what it does now"
    );
}

/// A llama-server whose model file is on its command line, but whose API
/// misbehaves: listed with cmdline evidence and a note saying why the API
/// gave nothing, and the snapshot does not wait on it.
fn misbehaving_llama_server(mode: &str) -> (Value, u32, Duration) {
    let python = test_python().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model = data("gguf/qwen3-0.6b-shape.gguf");
    let server = fake_api(
        &python,
        dir.path(),
        "llama-server",
        mode,
        &[],
        &["-m", &model, "-c", "4096"],
    );
    let started = Instant::now();
    let s = common::snapshot_without_gpu(&[]);
    let took = started.elapsed();
    let m = models(&s, server.pid());
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["path"], model);
    assert_eq!(m[0]["evidence"], serde_json::json!(["cmdline"]));
    assert_eq!(m[0]["confirmed"], false);
    assert_eq!(m[0]["context"], 4096);
    assert_eq!(m[0]["estimate"]["kv_bytes"], 448u64 << 20);
    (process(&s, server.pid()).clone(), server.pid(), took)
}

#[test]
fn an_api_answering_garbage_leaves_the_other_evidence_and_a_note() {
    if test_python().is_none() {
        return;
    }
    let (p, _, _) = misbehaving_llama_server("garbage");
    let notes = p["notes"].to_string();
    assert!(notes.contains("no llama.cpp API at 127.0.0.1:"), "{notes}");
    // The port it listens on is known all the same (diff pairs by it).
    let ports = p["listen_ports"]
        .as_array()
        .expect("listen_ports read from its sockets");
    assert_eq!(ports.len(), 1, "{p:#}");
    assert!(notes.contains(&format!("127.0.0.1:{}", ports[0])), "{notes}");
}

#[test]
fn an_api_that_never_answers_costs_one_timeout() {
    if test_python().is_none() {
        return;
    }
    let (p, _, took) = misbehaving_llama_server("hang");
    assert!(p["notes"].to_string().contains("no llama.cpp API"), "{p:#}");
    assert!(took < Duration::from_secs(5), "the snapshot waited {took:?}");
}

#[test]
fn a_redirect_is_not_followed_and_a_huge_answer_is_not_read() {
    if test_python().is_none() {
        return;
    }
    // On a loaded machine the Python server may miss the probe's 250 ms
    // (a timeout note, also not followed); the 302 must show within three.
    let redirected = (0..3).find_map(|_| {
        let (p, _, _) = misbehaving_llama_server("redirect");
        let notes = p["notes"].to_string();
        assert!(notes.contains("no llama.cpp API"), "{p:#}");
        notes.contains("HTTP 302").then_some(p)
    });
    assert!(redirected.is_some(), "no try saw the 302");
    let (p, _, _) = misbehaving_llama_server("huge");
    assert!(p["notes"].to_string().contains("no llama.cpp API"), "{p:#}");
}

/// The recorded server ran in another mount namespace (its /props says
/// /srv/models/...): the API's file and the command line's file with the
/// same name are one model, named by both.
#[test]
fn an_api_path_from_another_mount_namespace_joins_the_same_file() {
    let Some(python) = test_python() else { return };
    let Some(model) = std::env::var_os("GPUTASKMAN_GEMMA_GGUF") else {
        eprintln!("SKIPPED: set GPUTASKMAN_GEMMA_GGUF");
        return;
    };
    let model = model.to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let server = fake_api(
        &python,
        dir.path(),
        "llama-server",
        "serve",
        &[
            ("/props", "llama-server/props.json"),
            ("/slots", "llama-server/slots.json"),
            ("/v1/models", "llama-server/v1_models.json"),
        ],
        &["-m", &model],
    );
    let s = common::snapshot_without_gpu(&[]);
    let m = models(&s, server.pid());
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["path"], model);
    // The stand-in never maps or opens the file: its /props is a claim,
    // and a claim plus argv confirms nothing (both are the process's own say).
    assert_eq!(m[0]["evidence"], serde_json::json!(["cmdline", "claimed"]));
    assert_eq!(m[0]["confirmed"], false);
    // The recorded server: 4 slots of 4096 sharing one unified cache.
    assert_eq!(m[0]["slots_total"], 4);
    assert_eq!(m[0]["context"], 4096);
    assert_eq!(m[0]["estimate"]["kv_bytes"], (12u64 << 20) + (75u64 << 19));
}
