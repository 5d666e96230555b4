//! `gputaskman model` across several GPUs (fake NVML): the split llama.cpp
//! makes by default (by free memory) and with `-ts`/`-sm`/`-mg`, a row per
//! GPU named as NVML names it, and `--fit` checking every GPU the split
//! uses. The model is a full Qwen3-0.6B shape written by
//! tests/servers/shape_model.py (data a hole): 28 layers, 16 MiB of f16 KV
//! per layer at 4096 cells. Needs GPUTASKMAN_TEST_PYTHON; without it each
//! test says SKIPPED and passes.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The Qwen3-0.6B shape in a temporary directory, or None (SKIPPED)
/// without Python.
fn qwen3() -> Option<(tempfile::TempDir, String)> {
    let python = common::test_python()?;
    let dir = tempfile::tempdir().unwrap();
    let path = shape(&python, "qwen3-0.6b", dir.path());
    Some((dir, path.to_str().unwrap().to_string()))
}

fn shape(python: &Path, name: &str, dir: &Path) -> PathBuf {
    let out = dir.join(format!("{name}.gguf"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/shape_model.py");
    let st = std::process::Command::new(python)
        .arg(script)
        .arg(name)
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "shape_model.py {name}");
    out
}

/// Eight H100s, each with `free[i]` bytes free.
fn h100s(free: &[u64]) -> common::Scenario {
    let total = 85_520_809_984u64;
    let devices: Vec<Value> = free
        .iter()
        .enumerate()
        .map(|(i, &f)| {
            json!({"name": "NVIDIA H100 80GB HBM3", "uuid": format!("GPU-00000000-0000-0000-0000-00000000000{i}"),
                   "memory": {"total": total, "used": total - f, "free": f}})
        })
        .collect();
    common::Scenario::new(&json!({"driver_version": "580.159.03", "devices": devices}))
}

fn gpu_rows(j: &Value) -> Vec<&Value> {
    j["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["device"] != "host")
        .collect()
}

fn field(rows: &[&Value], key: &str) -> Vec<u64> {
    rows.iter().map(|d| d[key].as_u64().unwrap()).collect()
}

#[test]
fn eight_gpus_split_the_layers_like_llama_cpp() {
    let Some((_dir, model)) = qwen3() else {
        return;
    };
    let model = model.as_str();
    let s = h100s(&[40 * GIB; 8]);

    // Equal free memory: 29 slots (28 layers + output), GPU k takes the
    // steps s with k/8 <= s/29 < (k+1)/8 (src/llama-model.cpp load_tensors).
    let j = s.json(&["model", model, "-c", "4096", "--json"]);
    let rows = gpu_rows(&j);
    assert_eq!(field(&rows, "device"), (0..8).collect::<Vec<u64>>());
    let layers = field(&rows, "layers");
    assert_eq!(layers, vec![4, 4, 3, 4, 4, 3, 4, 3]);
    // The last one holds the output layer, so two blocks of KV.
    let kv: Vec<u64> = [4, 4, 3, 4, 4, 3, 4, 2].iter().map(|l| l * 16 * MIB).collect();
    assert_eq!(field(&rows, "kv_bytes"), kv);
    assert!(rows.iter().all(|d| d["name"] == "NVIDIA H100 80GB HBM3"), "{rows:?}");
    assert_eq!(j["split_mode"], "layer");
    assert_eq!(j["pipeline_parallel"], true);
    // Several GPUs: every one is checked, with its compute buffer.
    let fit = &j["fit"];
    assert_eq!(fit["gpus"].as_array().unwrap().len(), 8, "{fit:#}");
    assert_eq!(fit["fits"], true);

    // By free memory: 60 GiB free on GPU 0 and 20 GiB on GPU 1 is 3:1 of
    // the 29 slots (steps below 21.75 on GPU 0).
    let s2 = h100s(&[60 * GIB, 20 * GIB]);
    let j = s2.json(&["model", model, "-c", "4096", "--json"]);
    assert_eq!(field(&gpu_rows(&j), "layers"), vec![22, 7]);
    // -ts overrides it; -ts 1,3 is the mirror.
    let j = s2.json(&["model", model, "-c", "4096", "-ts", "1,3", "--json"]);
    assert_eq!(field(&gpu_rows(&j), "layers"), vec![8, 21]);
    // -sm none -mg 1: the main GPU only, every layer and the whole cache.
    let j = s2.json(&["model", model, "-c", "4096", "-sm", "none", "-mg", "1", "--json"]);
    let rows = gpu_rows(&j);
    assert_eq!(field(&rows, "device"), vec![1]);
    assert_eq!(field(&rows, "kv_bytes"), vec![28 * 16 * MIB]);
    // -sm row: the KV cache on the main GPU, the weights shared 3:1.
    let j = s2.json(&["model", model, "-c", "4096", "-sm", "row", "--json"]);
    let rows = gpu_rows(&j);
    assert_eq!(field(&rows, "kv_bytes"), vec![28 * 16 * MIB, 0]);
    let w = field(&rows, "weights_bytes");
    assert!((w[0] as f64 / w[1] as f64 - 3.0).abs() < 1e-6, "{w:?}");

    // The text names each GPU.
    let out = s.command().args(["model", model, "-c", "4096"]).output().unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("GPU 7: NVIDIA H100 80GB HBM3"), "{t}");
    assert!(t.contains("pipeline parallel across the GPUs"), "{t}");

    // More shares than GPUs, or a main GPU that is not there: errors (2).
    for bad in [&["-ts", "1,1,1"][..], &["-sm", "none", "-mg", "2"][..]] {
        let out = s2.command().args(["model", model]).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {out:?}");
    }
}

#[test]
fn fit_checks_every_gpu_and_names_the_one_short_of_room() {
    let Some((_dir, model)) = qwen3() else {
        return;
    };
    let model = model.as_str();
    // GPU 5 has 1100 MiB free: 76 MiB above the margin, less than its
    // three layers and compute buffer need. The rest are roomy.
    let mut free = [40 * GIB; 8];
    free[5] = 1100 * MIB;
    let s = h100s(&free);
    let args = [
        "model",
        model,
        "-c",
        "4096",
        "-ts",
        "1,1,1,1,1,1,1,1",
        "--fit",
        "--json",
    ];
    let out = s.command().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fit = &j["fit"];
    assert_eq!(fit["fits"], false);
    assert_eq!(fit["gpu"], 5, "{fit:#}");
    assert_eq!(fit["free_bytes"], 1100 * MIB);
    let gpus = fit["gpus"].as_array().unwrap();
    let verdicts: Vec<bool> = gpus.iter().map(|g| g["fits"].as_bool().unwrap()).collect();
    assert_eq!(verdicts, vec![true, true, true, true, true, false, true, true]);
    // GPU 5's need is its row's buffers: weights, KV and compute.
    let row = &j["devices"][5];
    assert_eq!(row["device"], 5);
    assert_eq!(gpus[5]["needed_bytes"], row["buffers_bytes"]);
    assert!(gpus[5]["needed_bytes"].as_u64().unwrap() > 76 * MIB);
    // -ts was given, so llama.cpp's fit keeps -c and then gives up.
    let says = fit["llama_cpp"]["says"].as_str().unwrap();
    assert!(says.contains("gives up (-ts set by you)"), "{says}");
    // By free memory instead, GPU 5 gets no layer of its own and every
    // GPU keeps its margin... except that a GPU without layers has a
    // compute buffer that is not modelled: unknown (exit 2), never 0.
    let out = s
        .command()
        .args(["model", model, "-c", "4096", "--fit", "--json"])
        .output()
        .unwrap();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["devices"][5]["layers"], 0, "{:#}", j["devices"]);
    assert_eq!(j["devices"][5]["compute_bytes"], Value::Null);
    assert_eq!(out.status.code(), Some(2));
}

/// Writes a projector GGUF (arch `clip`, a Gemma 3 style vision input
/// projection) with the gguf package, its data a hole: 7,252,992 bytes of
/// F16 weights.
fn projector(python: &Path, out: &Path) {
    let script = r#"
import sys
import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter
w = GGUFWriter(sys.argv[1], "clip")
w.add_bool("clip.has_vision_encoder", True)
w.add_string("clip.projector_type", "gemma3")
data = 0
for name, ne in [("v.patch_embd.weight", [14, 14, 3, 1152]), ("mm.input_projection.weight", [1152, 2560])]:
    nbytes = int(np.prod(ne)) * 2
    w.add_tensor_info(name, list(reversed(ne)), np.dtype(np.float16), nbytes, raw_dtype=T.F16)
    data += -(-nbytes // 32) * 32
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
w.close()
with open(sys.argv[1], "r+b") as f:
    f.seek(0, 2)
    f.truncate(-(-f.tell() // 32) * 32 + data)
"#;
    let st = std::process::Command::new(python)
        .args(["-c", script])
        .arg(out)
        .status()
        .unwrap();
    assert!(st.success(), "projector writer");
}

#[test]
fn mmproj_weights_go_to_the_first_gpu_and_its_compute_is_unknown() {
    let Some((dir, model)) = qwen3() else {
        return;
    };
    let python = common::test_python().unwrap();
    let mmproj = dir.path().join("mmproj.gguf");
    projector(&python, &mmproj);
    let mmproj = mmproj.to_str().unwrap();
    let weights = 14 * 14 * 3 * 1152 * 2 + 1152 * 2560 * 2;
    let s = h100s(&[40 * GIB, 40 * GIB]);
    let base = s.json(&["model", &model, "-c", "4096", "--json"]);
    let j = s.json(&["model", &model, "-c", "4096", "--mmproj", mmproj, "--json"]);
    assert_eq!(j["mmproj"]["device"], 0);
    assert_eq!(j["mmproj"]["weights_bytes"], weights);
    assert_eq!(j["mmproj"]["compute_bytes"], Value::Null);
    let (before, after) = (&base["devices"][0], &j["devices"][0]);
    assert_eq!(
        after["weights_bytes"].as_u64().unwrap(),
        before["weights_bytes"].as_u64().unwrap() + weights
    );
    // Its compute buffer is not estimated: that GPU's compute is unknown,
    // never the model's alone; the other GPU is untouched.
    assert!(before["compute_bytes"].as_u64().is_some());
    assert_eq!(after["compute_bytes"], Value::Null);
    assert_eq!(after["buffers_bytes"], Value::Null);
    assert_eq!(j["devices"][1], base["devices"][1]);
    let out = s
        .command()
        .args(["model", &model, "-c", "4096", "--mmproj", mmproj])
        .output()
        .unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(
        t.contains("6.92 MiB of weights on GPU 0; its compute buffer is not estimated"),
        "{t}"
    );
    // --no-mmproj-offload: on the host instead.
    let j = s.json(&[
        "model",
        &model,
        "-c",
        "4096",
        "--mmproj",
        mmproj,
        "--no-mmproj-offload",
        "--json",
    ]);
    assert_eq!(j["mmproj"]["device"], "host");
    assert_eq!(j["devices"][0], base["devices"][0]);
    assert_eq!(j["devices"][2]["compute_bytes"], Value::Null);
}
