//! Discovery against real processes: files they name, logs, settings and
//! the estimate's placement.

use super::*;
use crate::models::hf_folder;
use crate::snapshot::{ProcessKind, SettingSources};
use std::process::{Child, Command};

const SHAPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/qwen3-0.6b-shape.gguf");

/// A real process (its /proc entries are read) working in `cwd`,
/// described as the scan would describe an AI process with `argv`.
struct Subject {
    child: Child,
    info: ProcInfo,
}

impl Subject {
    fn new(cwd: &Path, argv: &[&str]) -> Subject {
        let child = Command::new("sleep").arg("60").current_dir(cwd).spawn().expect("sleep");
        let info = ProcInfo {
            pid: child.id(),
            ppid: None,
            start_ticks: 0,
            name: "llama-server".into(),
            start_time: Some(format!("start-{}", child.id())),
            user: None,
            argv: argv.iter().map(|a| a.to_string()).collect(),
            cmdline: None,
            exe: None,
            runtimes: vec!["llama.cpp".into()],
            mapped_files: Vec::new(),
            maps_readable: true,
            kind: ProcessKind::Ai,
            cpu_percent: None,
            rss_bytes: None,
            notes: Vec::new(),
        };
        Subject { child, info }
    }
}

impl Drop for Subject {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

fn discovery() -> Arc<Discovery> {
    Arc::new(Discovery::new(PathBuf::from("/proc")))
}

#[test]
#[cfg(unix)] // FIFOs and device files
fn a_fifo_or_device_named_as_model_config_or_log_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.gguf");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.gguf")).unwrap();
    let a = Subject::new(dir.path(), &["llama-server", "-m", "f.gguf", "--log-file", "f.gguf"]);
    let b = Subject::new(dir.path(), &["llama-server", "-m", "zero.gguf"]);
    let started = Instant::now();
    let found = discovery().discover(&[&a.info, &b.info]);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    for (subject, name) in [(&a, "f.gguf"), (&b, "zero.gguf")] {
        let d = &found[&subject.info.pid];
        assert!(!d.pending, "{:?}", d.notes);
        let model = &d.models[0];
        assert_eq!(model.path.as_deref(), Some(dir.path().join(name).to_str().unwrap()));
        assert!(
            model.notes.iter().any(|n| n.contains("not a regular file")),
            "{:?}",
            model.notes
        );
    }
    // vLLM's config.json as a symlink to /dev/zero, beside a FIFO named
    // like a weights file: neither is read.
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("config.json")).unwrap();
    assert!(Command::new("mkfifo")
        .arg(dir.path().join("x.safetensors"))
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let access = Access::of_process(Path::new("/proc"), std::process::id(), &[]);
    let (probe, round) = (
        ByteBudget::new("this probe", 1 << 20),
        ByteBudget::new("this round", 1 << 20),
    );
    let budgets = hf_folder::Budgets {
        probe: &probe,
        round: &round,
    };
    let weights = hf_folder::safetensors_weights(dir.path(), &access, &budgets).unwrap_err();
    assert!(
        weights.ends_with("x.safetensors: not a regular file: a FIFO"),
        "{weights}"
    );
    let mut notes = Vec::new();
    assert_eq!(hf_folder::config(dir.path(), &access, &budgets, &mut notes), None);
    assert!(notes[0].contains("not a regular file: a character device"), "{notes:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_process_whose_discovery_hangs_does_not_hold_up_the_others_nor_itself_later() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(SHAPE, dir.path().join("m.gguf")).unwrap();
    let stuck = Subject::new(dir.path(), &["llama-server", "-m", "m.gguf"]);
    let honest = Subject::new(dir.path(), &["llama-server"]);
    let d = discovery();
    // Holding the header cache stands in for a file system that never
    // answers: `stuck` waits on it, `honest` needs no header.
    let held = d.headers.lock().unwrap();
    let started = Instant::now();
    let found = d.discover(&[&stuck.info, &honest.info]);
    let took = started.elapsed();
    assert!(
        took >= DEADLINE && took < DEADLINE + Duration::from_millis(900),
        "{took:?}"
    );
    assert!(!found[&honest.info.pid].pending);
    let waiting = &found[&stuck.info.pid];
    assert!(waiting.pending && waiting.models.is_empty());
    assert!(
        waiting.notes[0].contains("did not finish within 2 s"),
        "{:?}",
        waiting.notes
    );
    // Still stuck: not started again, and said so at once.
    let started = Instant::now();
    let again = d.discover(&[&stuck.info]);
    assert!(started.elapsed() < Duration::from_millis(100));
    assert!(again[&stuck.info.pid].notes[0].contains("an earlier discovery of it is still waiting"));
    drop(held);
    // Once it answers, the process is discovered like any other.
    let deadline = Instant::now() + Duration::from_secs(5);
    while d
        .inflight
        .lock()
        .unwrap()
        .contains(&(stuck.info.pid, stuck.info.start_time.clone()))
    {
        assert!(Instant::now() < deadline, "the stuck discovery never returned");
        std::thread::sleep(Duration::from_millis(10));
    }
    let found = d.discover(&[&stuck.info]);
    let d = &found[&stuck.info.pid];
    assert!(!d.pending);
    assert_eq!(d.models[0].architecture.as_deref(), Some("qwen3"));
}

#[test]
fn discovery_threads_stay_at_their_limit_however_many_processes_are_stuck() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(SHAPE, dir.path().join("m.gguf")).unwrap();
    let stuck: Vec<Subject> = (0..MAX_DISCOVERY_THREADS + 4)
        .map(|_| Subject::new(dir.path(), &["llama-server", "-m", "m.gguf"]))
        .collect();
    let d = discovery();
    // Every one of them waits on the held header cache, as on a file
    // system that never answers.
    let held = d.headers.lock().unwrap();
    let found = d.discover(&stuck.iter().map(|s| &s.info).collect::<Vec<_>>());
    assert_eq!(d.threads.load(Ordering::Acquire), MAX_DISCOVERY_THREADS);
    let not_started: Vec<_> = found
        .values()
        .filter(|f| f.notes[0].contains("threads were busy"))
        .collect();
    assert_eq!(not_started.len(), 4, "{found:?}");
    assert!(not_started.iter().all(|f| f.pending && f.models.is_empty()));
    // Respawned processes (new PIDs) get no thread while all are stuck,
    // and are told so at once.
    let respawned: Vec<Subject> = (0..3)
        .map(|_| Subject::new(dir.path(), &["llama-server", "-m", "m.gguf"]))
        .collect();
    let started = Instant::now();
    let found = d.discover(&respawned.iter().map(|s| &s.info).collect::<Vec<_>>());
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(
        found.values().all(|f| f.notes[0].contains("threads were busy")),
        "{found:?}"
    );
    assert_eq!(d.threads.load(Ordering::Acquire), MAX_DISCOVERY_THREADS);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.threads.load(Ordering::Acquire) > 0 {
        assert!(Instant::now() < deadline, "the stuck threads never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Free again: all are discovered.
    let found = d.discover(&respawned.iter().map(|s| &s.info).collect::<Vec<_>>());
    assert!(found.values().all(|f| !f.pending), "{found:?}");
}

#[test]
fn headers_of_models_no_process_uses_any_more_are_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let d = discovery();
    // 80 servers coming and going, each with a model file of its own.
    for i in 0..80 {
        let name = format!("m{i}.gguf");
        std::fs::copy(SHAPE, dir.path().join(&name)).unwrap();
        let server = Subject::new(dir.path(), &["llama-server", "-m", &name]);
        let found = d.discover(&[&server.info]);
        assert_eq!(found[&server.info.pid].models[0].architecture.as_deref(), Some("qwen3"));
        assert!(d.cached().0 <= 2, "round {i}: {:?} cached", d.cached());
    }
    // A round that sees no process with a model sweeps the rest.
    let bare = Subject::new(dir.path(), &["llama-server"]);
    d.discover(&[&bare.info]);
    d.discover(&[&bare.info]);
    assert_eq!(d.cached(), (0, 0));
}

#[test]
fn a_relative_log_file_is_read_from_the_process_working_directory() {
    let srv = tempfile::tempdir().unwrap();
    std::fs::copy(SHAPE, srv.path().join("m.gguf")).unwrap();
    std::fs::write(
        srv.path().join("server.log"),
        "llama_kv_cache:        CPU KV buffer size =   100.00 MiB\n",
    )
    .unwrap();
    let server = Subject::new(
        srv.path(),
        &["llama-server", "-m", "m.gguf", "--log-file", "server.log"],
    );
    let found = discovery().discover(&[&server.info]);
    let reported = found[&server.info.pid].models[0]
        .reported
        .clone()
        .expect("reported from the log");
    assert_eq!(reported.kv_bytes, Some(100 << 20));
    assert_eq!(
        reported.source,
        format!("log:{}", srv.path().join("server.log").display())
    );
}

/// Only the command line is known (no API answered, no log): `-c 8192
/// -np 2` is two streams of 4096, unified off by llama.cpp's default
/// for an explicit -np, and the JSON says which figure came from where.
#[test]
fn settings_from_the_command_line_alone_say_what_was_assumed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(SHAPE, dir.path().join("m.gguf")).unwrap();
    let server = Subject::new(dir.path(), &["llama-server", "-m", "m.gguf", "-c", "8000", "-np", "2"]);
    let found = discovery().discover(&[&server.info]);
    let model = &found[&server.info.pid].models[0];
    let s = model.settings.clone().unwrap();
    // -c 8000 is padded to 8192 (src/llama-context.cpp), as llama.cpp does.
    assert_eq!(
        (s.context_total, s.context_per_seq, s.sequences, s.kv_unified),
        (Some(8192), Some(4096), Some(2), Some(false))
    );
    use SettingSource::{Argv, Default};
    assert_eq!(
        s.sources,
        SettingSources {
            context_total: Some(Argv),
            context_per_seq: Some(Default),
            sequences: Some(Argv),
            kv_unified: Some(Default),
        }
    );
    assert_eq!(model.context, Some(8192));
    assert_eq!(model.slots_total, Some(2));
    assert!(
        model
            .notes
            .iter()
            .any(|n| n.contains("kv unified assumed off") && n.contains("PR #14363")),
        "{:?}",
        model.notes
    );
    // Qwen3-0.6B's shape: 28 layers x 8 KV heads x 128 x f16 x (K + V)
    // = 112 KiB a cell, 8192 cells.
    assert_eq!(model.estimate.as_ref().unwrap().kv_bytes, Some(8192 * 28 * 4096));
}

/// Llama 3.1 8B's shape in Q4_K (token embeddings, layers) and Q6_K
/// (output), norms F32: a header and a sparse hole.
fn llama_8b(path: &Path) {
    const F32: u32 = 0;
    const Q4_K: u32 = 12;
    const Q6_K: u32 = 14;
    let mut b = gguf::testutil::Builder::default()
        .arch(
            "llama",
            &[
                ("block_count", 32),
                ("context_length", 131072),
                ("embedding_length", 4096),
                ("feed_forward_length", 14336),
                ("attention.head_count", 32),
                ("attention.head_count_kv", 8),
            ],
        )
        .tensor("token_embd.weight", &[4096, 128256], Q4_K)
        .tensor("output_norm.weight", &[4096], F32)
        .tensor("output.weight", &[4096, 128256], Q6_K);
    for il in 0..32 {
        let t = |n: &str| format!("blk.{il}.{n}.weight");
        b = b
            .tensor(&t("attn_norm"), &[4096], F32)
            .tensor(&t("attn_q"), &[4096, 4096], Q4_K)
            .tensor(&t("attn_k"), &[4096, 1024], Q4_K)
            .tensor(&t("attn_v"), &[4096, 1024], Q4_K)
            .tensor(&t("attn_output"), &[4096, 4096], Q4_K)
            .tensor(&t("ffn_norm"), &[4096], F32)
            .tensor(&t("ffn_gate"), &[4096, 14336], Q4_K)
            .tensor(&t("ffn_up"), &[4096, 14336], Q4_K)
            .tensor(&t("ffn_down"), &[14336, 4096], Q4_K);
    }
    b.write(path);
}

/// Issue 29's case: an Ollama runner with `-ngl 33` on a CUDA build. The
/// token embeddings stay on the host (src/llama-model.cpp
/// `load_tensors`: the input layer is never offloaded), so the GPU's
/// weights are the file less them, in discovery's rows, in the
/// reconciliation's weights part and in `gputaskman model`'s rows alike:
/// one placement function. Before, the reconciliation put the whole
/// file on the GPU.
#[test]
fn an_ollama_runner_places_its_weights_as_model_does() {
    let dir = tempfile::tempdir().unwrap();
    let blob = dir.path().join("sha256-8b");
    llama_8b(&blob);
    let argv = [
        "/usr/bin/ollama",
        "runner",
        "--model",
        "sha256-8b",
        "--ctx-size",
        "8192",
        "--batch-size",
        "512",
        "--n-gpu-layers",
        "33",
        "--parallel",
        "1",
    ];
    let mut runner = Subject::new(dir.path(), &argv);
    runner.info.runtimes = vec!["cuda".into(), "ggml".into()];
    let found = discovery().discover(&[&runner.info]);
    let model = &found[&runner.info.pid].models[0];
    let e = model.estimate.as_ref().unwrap();
    let whole = e.weights_bytes.unwrap();
    let embeddings = 4096 * 128256 / 256 * 144;
    let gpu = &e.devices[0];
    assert_eq!(gpu.device, crate::model_devices::DeviceId::Gpu(0));
    assert_eq!(gpu.weights_bytes, Some(whole - embeddings), "{e:#?}");
    assert_eq!(e.backend.as_deref(), Some("cuda"));
    assert!(gpu.compute_bytes.is_some() && e.output_bytes.is_some(), "{e:#?}");

    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from([
        "gputaskman",
        "model",
        blob.to_str().unwrap(),
        "--ctx",
        "8192",
        "--batch",
        "512",
        "--n-gpu-layers",
        "33",
        "--backend",
        "cuda",
        "--json",
    ])
    .unwrap();
    let Some(crate::cli::Command::Model(args)) = cli.command else {
        panic!("not the model command")
    };
    let mut out = Vec::new();
    crate::model_cmd::run(&args, Vec::new(), false, &mut out).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    // The same rows, but for the GPU's compute buffer: `model` sizes a
    // llama-server's (one logit row per slot), an Ollama runner is a
    // library user that reserves a row for every token of the batch
    // (BatchSettings::n_outputs_max), so its logits dominate.
    let without_compute = |mut rows: serde_json::Value| {
        for r in rows.as_array_mut().unwrap() {
            r["compute_bytes"].take();
            r["buffers_bytes"].take();
        }
        rows
    };
    assert_eq!(
        without_compute(json["devices"].clone()),
        without_compute(serde_json::to_value(&e.devices).unwrap())
    );
    assert_eq!(json["devices"][1], serde_json::to_value(&e.devices[1]).unwrap());
    assert_eq!(json["compute"]["n_outputs"], 1);
    let why = e.compute_why.as_deref().unwrap();
    assert!(
        why.contains("logits dominate") && why.contains("x 512 outputs"),
        "{why}"
    );

    let mut p = crate::snapshot::Process {
        pid: runner.info.pid,
        runtimes: runner.info.runtimes.clone(),
        gpu: vec![crate::snapshot::GpuUsage::memory_only(0, Some(6 << 30), "nvml")],
        models: vec![model.clone()],
        ..crate::snapshot::Process::default()
    };
    let nvidia = crate::snapshot::Device {
        vendor: "NVIDIA".into(),
        ..crate::snapshot::Device::default()
    };
    crate::snapshot::reconcile::fill(&[nvidia], std::slice::from_mut(&mut p));
    let weights = &p.reconciliation[0].parts[0];
    assert_eq!(weights.bytes, whole - embeddings);
    assert_eq!(weights.source, "estimate (cuda)");
    let compute = &p.reconciliation[0].parts[2];
    assert_eq!(Some(compute.bytes), gpu.compute_bytes);
    assert!(p.reconciliation[0].missing.is_empty(), "{:?}", p.reconciliation[0]);
}

/// A CUDA build's `-fa auto` (llama.cpp's default) is what CUDA's kernels
/// make it: for heads of 32, which fattn.cu has no kernel for, off, so the
/// compute estimate holds the attention scores, as `gputaskman model
/// --backend cuda` says for the same file. Before, discovery took auto as
/// on whatever the backend.
#[test]
fn a_cuda_servers_auto_flash_attention_follows_its_kernels() {
    const F32: u32 = 0;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("heads-of-32.gguf");
    gguf::testutil::Builder::default()
        .arch(
            "llama",
            &[
                ("block_count", 4),
                ("context_length", 8192),
                ("embedding_length", 1024),
                ("feed_forward_length", 2048),
                ("attention.head_count", 32),
                ("attention.head_count_kv", 8),
            ],
        )
        .tensor("token_embd.weight", &[1024, 32000], F32)
        .write(&file);
    let mut server = Subject::new(dir.path(), &["llama-server", "-m", "heads-of-32.gguf", "-c", "4096"]);
    server.info.runtimes = vec!["cuda".into(), "llama.cpp".into()];
    let found = discovery().discover(&[&server.info]);
    let model = &found[&server.info.pid].models[0];
    assert!(
        model
            .notes
            .iter()
            .any(|n| n.starts_with("flash attention auto is off on cuda: no CUDA kernel for K/V head sizes 32/32")),
        "{:?}",
        model.notes
    );
    let why = model.estimate.as_ref().unwrap().compute_why.as_deref().unwrap();
    assert!(why.contains("scores"), "{why}");
    let mut with_fa = Subject::new(
        dir.path(),
        &["llama-server", "-m", "heads-of-32.gguf", "-c", "4096", "-fa", "on"],
    );
    with_fa.info.runtimes = server.info.runtimes.clone();
    let found = discovery().discover(&[&with_fa.info]);
    let on = &found[&with_fa.info.pid].models[0];
    assert!(!on.notes.iter().any(|n| n.starts_with("flash attention auto")));
    assert!(
        on.estimate.as_ref().unwrap().compute_bytes < model.estimate.as_ref().unwrap().compute_bytes,
        "asked for, flash attention keeps the scores out"
    );
}
