//! `gputaskman model`: the built binary on GGUF files written by the Python
//! `gguf` package (tests/data/gguf, made by scripts/gguf_fixtures.py) and on
//! the real gemma-3-270m file when GPUTASKMAN_GEMMA_GGUF names it. Expected
//! numbers are llama.cpp's own log lines for these shapes.

mod common;

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::{json, Value};

const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gguf")
        .join(name)
}

fn gputaskman() -> Command {
    let mut cmd = Command::cargo_bin("gputaskman").unwrap();
    // No GPU: the real NVML must not be found, whatever the machine has.
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .timeout(std::time::Duration::from_secs(60));
    cmd
}

fn model_json(file: &str, args: &[&str]) -> Value {
    let out = gputaskman()
        .arg("model")
        .arg(fixture(file))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn model_text(file: &str, args: &[&str]) -> String {
    let out = gputaskman()
        .arg("model")
        .arg(fixture(file))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn cache<'a>(j: &'a Value, kind: &str) -> &'a Value {
    j["kv"]["caches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} cache in {}", j["kv"]))
}

#[test]
fn json_has_the_fields_design_md_fixes() {
    let j = model_json("qwen3-0.6b-shape.gguf", &["--ctx", "4096"]);
    for field in [
        "path",
        "architecture",
        "name",
        "kind",
        "params",
        "file_type",
        "bits_per_weight",
        "weights_bytes",
        "layers",
        "context_train",
        "kv",
    ] {
        assert!(j.get(field).is_some(), "missing {field}: {j}");
    }
    for field in ["context", "type_k", "type_v", "bytes", "bytes_per_token", "caches"] {
        assert!(j["kv"].get(field).is_some(), "missing kv.{field}: {}", j["kv"]);
    }
    assert_eq!(j["architecture"], "qwen3");
    assert_eq!(j["kind"], "llm");
    assert_eq!(j["layers"], 28);
    assert_eq!(j["context_train"], 40960);
    assert_eq!(j["file_type"], "all F32");
    assert_eq!(j["params"], 128);
    assert_eq!(j["weights_bytes"], 512);
    assert_eq!(j["kv"]["context"], 4096);
    assert_eq!(
        (j["kv"]["type_k"].clone(), j["kv"]["type_v"].clone()),
        (json!("f16"), json!("f16"))
    );
    assert_eq!(j["kv"]["bytes"], 448 * MIB);
    assert_eq!(j["kv"]["bytes_per_token"], 112 * 1024);
    let full = cache(&j, "full");
    assert_eq!(
        (full["cells"].clone(), full["layers"].clone()),
        (json!(4096), json!(28))
    );
    assert_eq!(full["bytes"], 448 * MIB);
    assert!(j["path"].as_str().unwrap().ends_with("qwen3-0.6b-shape.gguf"));
}

#[test]
fn text_shows_llama_cpp_mib_lines() {
    let t = model_text("qwen3-0.6b-shape.gguf", &["-c", "4096"]);
    assert!(
        t.contains("448.00 MiB (4096 cells, 28 layers, 1 stream), K: 224.00 MiB, V: 224.00 MiB"),
        "{t}"
    );
    assert!(t.contains("112.00 KiB"), "{t}");
    assert!(t.contains("architecture    qwen3"), "{t}");
    assert!(!t.contains("GB"), "binary units only: {t}");
}

#[test]
fn qwen3_reference_settings() {
    let bytes = |args: &[&str]| {
        model_json("qwen3-0.6b-shape.gguf", args)["kv"]["bytes"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(bytes(&["--ctx", "32768"]), 3584 * MIB);
    assert_eq!(bytes(&["--ctx", "4000"]), 448 * MIB);
    assert_eq!(
        bytes(&["--ctx", "4096", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]),
        238 * MIB
    );
    assert_eq!(bytes(&["--ctx", "4096", "--ctk", "q4_0", "--ctv", "q4_0"]), 126 * MIB);
    let j = model_json("qwen3-0.6b-shape.gguf", &["--ctx", "4096", "--parallel", "4"]);
    let full = cache(&j, "full");
    assert_eq!(
        (full["cells"].clone(), full["streams"].clone()),
        (json!(1024), json!(4))
    );
    assert_eq!(j["kv"]["bytes"], 448 * MIB);
}

#[test]
fn llama_cpp_short_spellings_work() {
    let j = model_json(
        "qwen3-0.6b-shape.gguf",
        &["-c", "4096", "-np", "4", "-kvu", "-ctk", "q8_0", "-fa", "on"],
    );
    assert_eq!(j["kv"]["n_seq"], 4);
    assert_eq!(j["kv"]["unified"], true);
    assert_eq!(j["kv"]["type_k"], "q8_0");
}

#[test]
fn gemma3_sliding_window_caches() {
    let j = model_json("gemma3-4b-shape.gguf", &["--ctx", "32768"]);
    let (full, swa) = (cache(&j, "full"), cache(&j, "swa"));
    assert_eq!(
        (full["cells"].clone(), full["layers"].clone(), full["bytes"].clone()),
        (json!(32768), json!(5), json!(640 * MIB))
    );
    assert_eq!(
        (swa["cells"].clone(), swa["layers"].clone(), swa["bytes"].clone()),
        (json!(1536), json!(29), json!(174 * MIB))
    );
    let j = model_json(
        "gemma3-4b-shape.gguf",
        &["--ctx", "32768", "--parallel", "4", "--kv-unified"],
    );
    assert_eq!(
        (cache(&j, "swa")["cells"].clone(), cache(&j, "swa")["bytes"].clone()),
        (json!(4608), json!(522 * MIB))
    );
    let j = model_json("gemma3-4b-shape.gguf", &["--ctx", "32768", "--swa-full"]);
    assert_eq!(cache(&j, "swa")["bytes"], 3712 * MIB);
}

#[test]
fn gpt_oss_deepseek_mamba_bert() {
    let j = model_json("gpt-oss-20b-shape.gguf", &["--ctx", "131072"]);
    assert_eq!(
        (cache(&j, "full")["layers"].clone(), cache(&j, "full")["bytes"].clone()),
        (json!(12), json!(3072 * MIB))
    );
    assert_eq!(
        (cache(&j, "swa")["cells"].clone(), cache(&j, "swa")["bytes"].clone()),
        (json!(768), json!(18 * MIB))
    );

    let j = model_json("deepseek-v2-lite-shape.gguf", &["--ctx", "4096"]);
    assert_eq!(j["kv"]["bytes"], 127_401_984); // 121.50 MiB
    assert_eq!(cache(&j, "full")["v_bytes"], 0);

    let j = model_json("mamba-130m-shape.gguf", &["--ctx", "4096"]);
    assert_eq!(j["kind"], "recurrent");
    assert_eq!(j["recurrent_state_bytes"], 2_801_664);
    let t = model_text("mamba-130m-shape.gguf", &["--parallel", "4"]);
    assert!(
        t.contains("10.69 MiB (4 cells, 24 layers, 1 stream), R (f32): 1.69 MiB, S (f32): 9.00 MiB"),
        "{t}"
    );

    let j = model_json("bert-embedding-shape.gguf", &[]);
    assert_eq!(j["kind"], "embedding");
    assert_eq!(j["kv"]["caches"], json!([]));
    assert_eq!(j["kv"]["bytes"], 0);
}

#[test]
fn big_endian_split_and_blob_files() {
    let le = model_json("qwen3-0.6b-shape.gguf", &["--ctx", "4096"]);
    let be = model_json("qwen3-0.6b-shape-be.gguf", &["--ctx", "4096"]);
    assert_eq!(be["kv"], le["kv"]);
    assert_eq!(be["params"], le["params"]);
    assert_eq!(be["info"]["big_endian"], true);

    // Either part of a split model reads both.
    for part in ["tiny-split-00001-of-00002.gguf", "tiny-split-00002-of-00002.gguf"] {
        let j = model_json(part, &["--ctx", "4096"]);
        assert_eq!(j["info"]["split_parts"], 2, "{part}");
        assert_eq!(j["params"], 128, "{part}");
        assert_eq!(j["kv"]["bytes"], 448 * MIB);
    }

    let blob = model_json(
        "sha256-0f0e2b4c1d7a9e8f3b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a",
        &["--ctx", "4096"],
    );
    assert_eq!(blob["kv"], le["kv"]);
}

#[test]
fn gpu_split_with_n_gpu_layers() {
    let j = model_json("qwen3-0.6b-shape.gguf", &["--ctx", "4096", "--n-gpu-layers", "14"]);
    // 14 of 29 (28 layers + output): layers 15..27 and the output layer.
    assert_eq!(j["offload"]["n_gpu_layers"], 14);
    assert_eq!(j["offload"]["gpu"]["kv_bytes"], 13 * 16 * MIB);
    assert_eq!(j["offload"]["cpu"]["kv_bytes"], 15 * 16 * MIB);
    // output_norm on the GPU, blk.0 on the CPU
    assert_eq!(j["offload"]["gpu"]["weights_bytes"], 256);
    assert_eq!(j["offload"]["cpu"]["weights_bytes"], 256);
    let t = model_text("qwen3-0.6b-shape.gguf", &["--ctx", "4096", "-ngl", "14"]);
    assert!(t.contains("-ngl 14: 14 of 29 on the GPU (28 layers + output"), "{t}");
}

/// One GPU (`--gpu 1` of two): the weights-and-KV line against it.
#[test]
fn fit_line_against_the_gpu_named() {
    let s = common::Scenario::new(&json!({
        "driver_version": "580.159.03",
        "devices": [
            {"name": "Small GPU", "uuid": "GPU-00000000-0000-0000-0000-000000000001",
             "memory": {"total": 2147483648u64, "used": 2013265920u64, "free": 134217728u64}},
            {"name": "Big GPU", "uuid": "GPU-00000000-0000-0000-0000-000000000002",
             "memory": {"total": 8589934592u64, "used": 8053063680u64, "free": 536870912u64}}
        ]
    }));
    let model = fixture("qwen3-0.6b-shape.gguf");
    let model = model.to_str().unwrap();
    let j = s.json(&["model", model, "--gpu", "1", "--ctx", "4096", "--json"]);
    assert_eq!(j["gpu"]["name"], "Big GPU");
    assert_eq!(j["fit"]["free_bytes"], 512 * MIB);
    // 448 MiB of KV + 256 bytes of weights on the GPU (blk.0 norm and
    // output norm; no token embeddings in this file)
    assert_eq!(j["fit"]["needed_bytes"], 448 * MIB + 512);
    assert_eq!(j["fit"]["fits"], true);
    // 112 KiB per token: 4608 tokens need 504 MiB, 4864 need 532 MiB.
    assert_eq!(j["fit"]["max_context"], 4608);
    let out = s
        .command()
        .args(["model", model, "--gpu", "1", "--ctx", "8192"])
        .output()
        .unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(
        t.contains(
            "fits in free memory now: no (needs 896.00 MiB of 512.00 MiB free); largest context that fits: 4608"
        ),
        "{t}"
    );
}

#[test]
fn unknown_is_null_not_zero() {
    // Only general.architecture: nothing to size.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.gguf");
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(20u64.to_le_bytes());
    b.extend(b"general.architecture");
    b.extend(8u32.to_le_bytes());
    b.extend(5u64.to_le_bytes());
    b.extend(b"llama");
    std::fs::write(&path, b).unwrap();
    let out = gputaskman().arg("model").arg(&path).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["kv"], Value::Null);
    assert_eq!(j["layers"], Value::Null);
    assert_eq!(j["context_train"], Value::Null);
    assert_eq!(j["name"], Value::Null);
    assert_eq!(j["bits_per_weight"], Value::Null);
    assert!(j["kv_unavailable"].as_str().unwrap().contains("block_count"), "{j}");
    let t = gputaskman().arg("model").arg(&path).output().unwrap();
    assert!(String::from_utf8_lossy(&t.stdout).contains("KV cache        n/a (llama.block_count is missing)"));
}

#[test]
fn bad_files_fail_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("qwen3-0.6b-shape.gguf")).unwrap();
    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, &good[..100]).unwrap();
    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, b"hello, world").unwrap();
    let missing = dir.path().join("missing.gguf");
    for (path, needle) in [
        (&truncated, "at byte"),
        (&not_gguf, "not a GGUF file"),
        (&missing, "missing.gguf"),
    ] {
        let out = gputaskman().arg("model").arg(path).output().unwrap();
        assert!(!out.status.success(), "{} succeeded", path.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty());
    }
    // Settings llama.cpp refuses are errors too.
    let out = gputaskman()
        .arg("model")
        .arg(fixture("qwen3-0.6b-shape.gguf"))
        .args(["--cache-type-v", "q8_0", "--flash-attn", "off"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("flash attention"));
}

/// The real gemma-3-270m file, or None after saying the test is skipped.
fn gemma_or_skip(test: &str) -> Option<std::ffi::OsString> {
    let path = std::env::var_os("GPUTASKMAN_GEMMA_GGUF");
    if path.is_none() {
        eprintln!("!!! SKIPPED {test}: set GPUTASKMAN_GEMMA_GGUF to the assembled gemma-3-270m-q4_k_m.gguf");
    }
    path
}

#[test]
fn real_gemma_3_270m() {
    let Some(path) = gemma_or_skip("real_gemma_3_270m") else {
        return;
    };
    let out = gputaskman()
        .arg("model")
        .arg(&path)
        .args(["-c", "4096", "--parallel", "4", "--kv-unified", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["params"], 268_098_176u64);
    assert_eq!(j["file_type"], "Q4_K - Medium");
    assert_eq!(j["architecture"], "gemma3");
    let full = cache(&j, "full");
    assert_eq!(
        (full["cells"].clone(), full["layers"].clone(), full["bytes"].clone()),
        (json!(4096), json!(3), json!(12 * MIB))
    );
    let swa = cache(&j, "swa");
    assert_eq!(
        (swa["cells"].clone(), swa["layers"].clone(), swa["bytes"].clone()),
        (json!(2560), json!(15), json!(37 * MIB + MIB / 2))
    );
    let t = gputaskman()
        .arg("model")
        .arg(&path)
        .args(["-c", "4096", "-np", "4", "-kvu"])
        .output()
        .unwrap();
    let t = String::from_utf8(t.stdout).unwrap();
    assert!(t.contains("12.00 MiB (4096 cells, 3 layers, 1 stream)"), "{t}");
    assert!(t.contains("37.50 MiB (2560 cells, 15 layers, 1 stream)"), "{t}");
    assert!(t.contains("235.16 MiB (7.36 BPW)"), "{t}");
    // The compute line (checked in numbers below).
    assert!(
        t.contains("cpu backend, flash attention on, 512-token batch, 4 logit rows"),
        "{t}"
    );
    assert!(t.contains("the feed-forward block dominates"), "{t}");
}

/// The compute and output buffers and the device rows, on the real file:
/// the real server logs `CPU compute buffer size = 24.78 MiB` and
/// `CPU output buffer size = 4.00 MiB` for these settings
/// (/work/shared/reference/llama-server/server.log).
#[test]
fn real_gemma_3_270m_compute_output_and_devices() {
    let Some(path) = gemma_or_skip("real_gemma_3_270m_compute_output_and_devices") else {
        return;
    };
    let run = |extra: &[&str]| -> Value {
        let out = gputaskman()
            .arg("model")
            .arg(&path)
            .args(["-c", "4096", "-np", "4", "-kvu", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let j = run(&[]);
    let compute = j["compute_bytes"].as_u64().unwrap() as f64 / MIB as f64;
    assert!((compute - 24.78).abs() < 0.1, "{compute}");
    assert_eq!(j["output_bytes"], 4 * MIB);
    let devices = j["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{j:#}");
    let host = &devices[0];
    assert_eq!(host["device"], "host");
    assert_eq!(host["kv_bytes"], 49 * MIB + MIB / 2);
    let parts = ["weights_bytes", "kv_bytes", "compute_bytes", "output_bytes"];
    let sum: u64 = parts.iter().map(|k| host[*k].as_u64().unwrap()).sum();
    assert_eq!(host["total_bytes"], sum);
    assert_eq!(j["total_bytes"], sum);

    // On CUDA the GPU's row waits for its driver context: its total (and
    // the sum) is unknown, never the buffers passed off as the total.
    let j = run(&["--backend", "cuda", "-ngl", "99"]);
    let devices = j["devices"].as_array().unwrap();
    assert_eq!(devices[0]["device"], 0);
    assert_eq!(devices[1]["device"], "host");
    assert_eq!(devices[0]["total_bytes"], Value::Null);
    assert_eq!(devices[0]["driver_context_bytes"], Value::Null);
    assert!(devices[0]["buffers_bytes"].as_u64().unwrap() > 24 * MIB);
    assert_eq!(devices[0]["kv_bytes"], 49 * MIB + MIB / 2);
    assert_eq!(devices[1]["output_bytes"], 4 * MIB);
    assert_eq!(j["total_bytes"], Value::Null);

    // -nkvo: the KV cache and the attention move to the host; the GPU keeps
    // the feed-forward block without the masks.
    let k = run(&["--backend", "cuda", "-ngl", "99", "--no-kv-offload"]);
    let kd = k["devices"].as_array().unwrap();
    assert_eq!(kd[0]["kv_bytes"], 0);
    assert_eq!(kd[1]["kv_bytes"], 49 * MIB + MIB / 2);
    let c = &k["compute"];
    let ff = c["feed_forward_bytes"].as_u64().unwrap() - c["masks_bytes"].as_u64().unwrap();
    assert_eq!(kd[0]["compute_bytes"], ff);
    let host_before = devices[1]["compute_bytes"].as_u64().unwrap();
    assert_eq!(
        kd[1]["compute_bytes"].as_u64().unwrap(),
        host_before + c["attention_bytes"].as_u64().unwrap()
    );
    // -ot with a pattern no tensor has moves nothing.
    let o = run(&["--backend", "cuda", "-ngl", "99", "-ot", "exps=CPU"]);
    assert_eq!(o["devices"][0]["weights_bytes"], devices[0]["weights_bytes"]);
}

/// `--fit` on a fake-NVML GPU with the real gemma-3-270m file: the context
/// it answers fits within the free memory less llama.cpp's 1024 MiB margin,
/// one step more does not (exit 1), and a GPU that is not there is an error
/// (exit 2).
#[test]
fn fit_answers_the_largest_context_for_the_gpus_free_memory() {
    let Some(path) = gemma_or_skip("fit_answers_the_largest_context_for_the_gpus_free_memory") else {
        return;
    };
    let model = path.to_str().unwrap();
    let s = common::Scenario::new(&json!({
        "driver_version": "580.159.03",
        "devices": [
            {"name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-00000000-0000-0000-0000-000000000001",
             "memory": {"total": 25757220864u64, "used": 24289214464u64, "free": 1468006400u64}}
        ]
    }));
    let j = s.json(&["model", model, "--fit", "-c", "4096", "--json"]);
    let fit = &j["fit"];
    assert_eq!(fit["free_bytes"], 1400 * MIB);
    assert_eq!(fit["margin_bytes"], 1024 * MIB);
    assert_eq!(fit["fits"], true, "{fit:#}");
    assert_eq!(fit["gpu"], 0);
    assert_eq!(fit["gpu_layers"], 19, "18 layers + output");
    // The most slots at -c 4096: that many fit, one more does not (each
    // slot's sliding-window cache is a window and a batch of its own).
    let parallel = fit["parallel"].as_u64().unwrap();
    assert!(parallel > 1, "{fit:#}");
    let with_slots = |n: u64| {
        let out = s
            .command()
            .args(["model", model, "--fit", "-c", "4096", "-np", &n.to_string()])
            .output()
            .unwrap();
        out.status.code()
    };
    assert_eq!(with_slots(parallel), Some(0));
    assert_eq!(with_slots(parallel + 1), Some(1));
    assert_eq!(fit["llama_cpp"]["says"], "no changes: every GPU keeps its margin");
    let context = fit["context"].as_u64().unwrap();
    assert!(context > 4096 && context % 256 == 0, "{context}");
    let budget = (1400 - 1024) * MIB;
    let at = |ctx: u64| {
        let out = s
            .command()
            .args(["model", model, "--fit", "--json", "-c", &ctx.to_string()])
            .output()
            .unwrap();
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), j["fit"]["needed_bytes"].as_u64().unwrap(), j)
    };
    let (code, needed, _) = at(context);
    assert!(code == Some(0) && needed <= budget, "{needed} > {budget}");
    let (code, needed, j) = at(context + 256);
    assert!(code == Some(1) && needed > budget, "{code:?}: {needed} <= {budget}");
    // -c was given: llama.cpp's own fit keeps it and moves layers off.
    let says = j["fit"]["llama_cpp"]["says"].as_str().unwrap();
    assert!(
        says.starts_with(&format!(
            "keeps -c {} (set by you), then moves layers to the CPU: -ngl ",
            context + 256
        )),
        "{says}"
    );
    // No -c: it would lower the context, to about the largest that fits.
    let out = s.command().args(["model", model, "--fit", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["fit"]["llama_cpp"]["context"], context);

    let out = s.command().args(["model", model, "--gpu", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gpu"), "{out:?}");
}

/// Runs `gputaskman model PATH` under a 2 GiB address-space limit (so the
/// old, unbounded code fails fast instead of exhausting the machine) and
/// returns its exit status, stderr and peak RSS in KiB.
#[cfg(target_os = "linux")]
fn model_peak_rss(path: &std::path::Path) -> (i32, String, i64) {
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "ulimit -v 2097152 && exec \"$0\" model \"$1\""])
        .arg(env!("CARGO_BIN_EXE_gputaskman"))
        .arg(path)
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    let (status, _, err, peak_kib) = common::peak_rss(cmd, std::time::Duration::from_secs(60));
    (status.into_raw(), String::from_utf8_lossy(&err).into_owned(), peak_kib)
}

#[cfg(target_os = "linux")]
#[test]
fn split_set_of_symlinks_to_one_file_is_refused_in_bounded_memory() {
    // 3000 parts, every one a symlink to the same 8 MiB header: kept part
    // by part this was 3000 x 8 MiB, an allocation failure at 3-6 GB.
    let dir = tempfile::tempdir().unwrap();
    let blob = dir.path().join("blob.gguf");
    std::fs::write(&blob, common::split_bomb_part(3000)).unwrap();
    for no in 1..=3000 {
        std::os::unix::fs::symlink(&blob, dir.path().join(format!("m-{no:05}-of-03000.gguf"))).unwrap();
    }
    let first = dir.path().join("m-00001-of-03000.gguf");
    let started = std::time::Instant::now();
    let (status, err, peak_kib) = model_peak_rss(&first);
    let elapsed = started.elapsed();
    eprintln!("split bomb: exit status {status:#x}, peak RSS {peak_kib} KiB, {elapsed:?}");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 0,
        "status {status:#x}: {err}"
    );
    assert!(
        err.contains("m-00002-of-03000.gguf: part 2 of 3000 is the same file as part 1"),
        "{err}"
    );
    assert!(peak_kib < 200 * 1024, "peak RSS {peak_kib} KiB");
}

#[test]
fn a_bad_hyperparameter_hides_only_itself() {
    // key_length is nonsense; the head counts and value_length are fine and
    // must still be shown, with the error in place of the KV cache.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad-head.gguf");
    std::fs::write(
        &path,
        common::gguf_bytes(&[
            ("general.architecture", common::Kv::Str(b"llama")),
            ("llama.block_count", common::Kv::U32(4)),
            ("llama.embedding_length", common::Kv::U32(256)),
            ("llama.attention.head_count", common::Kv::U32(8)),
            ("llama.attention.head_count_kv", common::Kv::U32(2)),
            ("llama.attention.key_length", common::Kv::U32(u32::MAX)),
            ("llama.attention.value_length", common::Kv::U32(32)),
        ]),
    )
    .unwrap();
    let why = "llama.attention.key_length = 4294967295 is not a plausible head size (at most 65536)";
    let out = gputaskman().arg("model").arg(&path).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&j["info"]["head_count"], &j["info"]["head_count_kv"]),
        (&json!(8), &json!(2))
    );
    assert_eq!(
        (&j["info"]["key_length"], &j["info"]["value_length"]),
        (&Value::Null, &json!(32))
    );
    assert_eq!((&j["layers"], &j["kv"]), (&json!(4), &Value::Null));
    assert_eq!(j["kv_unavailable"], why);
    let t = gputaskman().arg("model").arg(&path).output().unwrap();
    let t = String::from_utf8(t.stdout).unwrap();
    assert!(t.contains("heads / KV      8 / 2\n"), "{t}");
    assert!(t.contains("head size K/V   n/a / 32\n"), "{t}");
    assert!(t.contains(&format!("KV cache        n/a ({why})")), "{t}");
}

/// `model DIR`: every GGUF once (the split set by its first part, the
/// extension-less Ollama blob included), and with a GPU whether each fits.
#[test]
fn a_directory_is_a_table_of_its_models() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/gguf");
    let out = gputaskman().arg("model").arg(&dir).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<String> = j["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 9, "{names:?}");
    assert!(names.contains(&"tiny-split-00001-of-00002.gguf".to_string()));
    assert!(!names.contains(&"tiny-split-00002-of-00002.gguf".to_string()));
    assert!(names.iter().any(|n| n.starts_with("sha256-")));
    // No vocabulary in these fixtures: the compute buffer, so the need, is unknown.
    assert_eq!(j["models"][0]["at_training_context"]["buffers_bytes"], Value::Null);

    let Some(gemma) = gemma_or_skip("a_directory_is_a_table_of_its_models (gemma part)") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&gemma, d.path().join("gemma.gguf")).unwrap();
    let s = common::Scenario::new(&json!({
        "driver_version": "580.159.03",
        "devices": [
            {"name": "NVIDIA GeForce RTX 4090", "uuid": "GPU-00000000-0000-0000-0000-000000000001",
             "memory": {"total": 25757220864u64, "used": 24289214464u64, "free": 1468006400u64}}
        ]
    }));
    let j = s.json(&["model", d.path().to_str().unwrap(), "-c", "4096", "--json"]);
    let m = &j["models"][0];
    assert_eq!(m["at_requested_context"]["context"], 4096);
    assert_eq!(m["at_requested_context"]["fits"], true, "{m:#}");
    // Its training context (32768) does not fit in 1400 MiB less 1024.
    assert_eq!(m["at_training_context"]["fits"], false, "{m:#}");
    let t = s
        .command()
        .args(["model", d.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&t.stdout).contains("gemma.gguf"));
}

/// `-fa auto` (the default) resolves per backend: on for the CPU; on CUDA
/// off for head sizes it has no kernel for (192 here), and said so.
#[test]
fn flash_attention_auto_resolves_per_backend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("head-192.gguf");
    std::fs::write(
        &path,
        common::gguf_bytes(&[
            ("general.architecture", common::Kv::Str(b"llama")),
            ("llama.block_count", common::Kv::U32(4)),
            ("llama.embedding_length", common::Kv::U32(1536)),
            ("llama.attention.head_count", common::Kv::U32(8)),
            ("llama.attention.head_count_kv", common::Kv::U32(8)),
            ("llama.attention.key_length", common::Kv::U32(192)),
            ("llama.attention.value_length", common::Kv::U32(192)),
        ]),
    )
    .unwrap();
    let run = |backend: &str| -> Value {
        let out = gputaskman()
            .arg("model")
            .arg(&path)
            .args(["-c", "4096", "--backend", backend, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let cpu = run("cpu");
    assert_eq!(cpu["flash_attn_auto"]["on"], true);
    assert_eq!(cpu["kv"]["flash_attn"], true);
    let cuda = run("cuda");
    assert_eq!(cuda["flash_attn_auto"]["on"], false, "{:#}", cuda["flash_attn_auto"]);
    assert_eq!(
        cuda["flash_attn_auto"]["why"],
        "no CUDA kernel for K/V head sizes 192/192"
    );
    assert_eq!(cuda["kv"]["flash_attn"], false);
    // Asked for explicitly, it is not resolved.
    let out = gputaskman()
        .arg("model")
        .arg(&path)
        .args(["-c", "4096", "--backend", "cuda", "-fa", "on", "--json"])
        .output()
        .unwrap();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&j["flash_attn_auto"], &j["kv"]["flash_attn"]),
        (&Value::Null, &json!(true))
    );
    let t = gputaskman()
        .arg("model")
        .arg(&path)
        .args(["-c", "4096", "--backend", "cuda"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&t.stdout).contains("flash attention auto -> off: no CUDA kernel"));
}
