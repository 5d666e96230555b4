//! The compute and output buffer estimate (crates/gguf/src/compute.rs)
//! against the real llama.cpp server (xllamacpp, CPU backend): for each
//! case the server loads a full-shape model whose data is a hole
//! (tests/servers/shape_model.py), logs `sched_reserve: CPU compute buffer
//! size` and `llama_context: CPU output buffer size` at -lv 4, and exits.
//! Target: within 2% or 1 MiB, whichever is larger, on every case; the one
//! known miss is listed in KNOWN_MISSES with the error measured
//! (RELIABILITY.md), so it fails if the miss grows or goes away.
//! Needs GPUTASKMAN_TEST_PYTHON (scripts/test.sh sets it); without it the
//! test says SKIPPED and passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gguf::{Backend, BatchSettings, FlashAttn, KvSettings};

const MIB: f64 = (1u64 << 20) as f64;

/// (shape, flash attention, n_ubatch, ctx, n_seq, unified)
type Case = (&'static str, bool, u32, u32, u32, bool);

const CASES: &[Case] = &[
    ("qwen3-0.6b", true, 512, 4096, 1, false),
    ("qwen3-0.6b", false, 512, 4096, 1, false),
    ("qwen3-0.6b", true, 128, 8192, 1, false),
    ("qwen3-0.6b", false, 2048, 2048, 1, false),
    ("qwen3-0.6b", false, 512, 8192, 4, false),
    ("qwen3-0.6b", true, 512, 8192, 4, true),
    ("llama-3.2-1b", true, 2048, 8192, 1, false),
    ("llama-3.2-1b", false, 128, 8192, 1, false),
    ("llama-3.2-1b", false, 512, 8192, 4, true),
    ("tinyllama-1.1b", true, 512, 2048, 1, false),
    ("tinyllama-1.1b", false, 512, 32768, 1, false),
    ("gemma3-1b", true, 512, 2048, 1, false),
    ("gemma3-1b", true, 2048, 2048, 1, false),
    ("gemma3-1b", true, 512, 8192, 4, true),
    ("gemma3-1b", false, 128, 8192, 1, false),
    ("gemma3-1b", false, 512, 32768, 1, false),
    ("gemma3-1b", false, 512, 2048, 1, false),
    ("granitemoe-1b-a400m", true, 128, 8192, 1, false),
    ("granitemoe-1b-a400m", true, 2048, 2048, 1, false),
    ("granitemoe-1b-a400m", false, 512, 8192, 4, false),
    ("granitemoe-1b-a400m", false, 512, 8192, 4, true),
    ("deepseek2-lite", true, 512, 4096, 1, false),
    ("deepseek2-lite", false, 128, 16384, 1, false),
    ("deepseek2-lite", false, 512, 8192, 4, false),
    ("mamba-130m", true, 512, 4096, 1, false),
    ("mamba-130m", false, 2048, 4096, 1, false),
    ("mamba-130m", true, 512, 8192, 16, false),
    ("mamba2-130m", true, 512, 4096, 1, false),
    ("mamba2-130m", false, 2048, 4096, 1, false),
    ("mamba2-130m", true, 512, 8192, 8, false),
    ("granite-4.0-h-tiny", true, 512, 4096, 1, false),
    ("granite-4.0-h-tiny", false, 512, 16384, 1, false),
    ("granite-4.0-h-tiny", true, 512, 8192, 8, false),
];

/// Cases the estimate misses, with the error measured (MiB): gemma3 with
/// flash attention off when its feed-forward block is the peak. The
/// server reserves 2 bytes per full-cache cell and token more than the live
/// set modelled, a tensor not identified in src/models/gemma3.cpp.
const KNOWN_MISSES: &[(Case, f64)] = &[(("gemma3-1b", false, 512, 2048, 1, false), 2.0)];

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("GPUTASKMAN_TEST_PYTHON").map(PathBuf::from)?;
    p.exists().then_some(p)
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers").join(name)
}

/// The `NAME buffer size = X MiB` figure of the first line with `what`.
fn logged_mib(log: &str, what: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.contains(what))?;
    line.rsplit('=')
        .next()?
        .trim()
        .trim_end_matches("MiB")
        .trim()
        .parse()
        .ok()
}

fn run_server(python: &Path, model: &Path, case: &Case) -> String {
    let (_, fa, ub, ctx, np, unified) = *case;
    let mut cmd = Command::new(python);
    cmd.arg(script("llama_server.py"))
        .arg("--model")
        .arg(model)
        .args(["--port", &common::free_port().to_string()])
        .args(["-c", &ctx.to_string(), "-ub", &ub.to_string(), "-np", &np.to_string()])
        .args(["-fa", if fa { "on" } else { "off" }])
        .args(["--no-repack", "--no-warmup", "--fit", "off", "--exit-after-load"]);
    if unified {
        cmd.arg("-kvu");
    }
    let out = cmd.output().expect("start the server");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_compute_and_output_buffers_match_the_real_servers_own_lines() {
    let Some(python) = python() else {
        eprintln!("SKIPPED: set GPUTASKMAN_TEST_PYTHON (scripts/test.sh does)");
        return;
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut report = vec!["| shape | fa | ubatch | ctx | np | unified | server MiB | estimate MiB | error | output server / estimate MiB |".to_string()];
    let mut failures = Vec::new();
    for case in CASES {
        let (shape, fa, ub, ctx, np, unified) = *case;
        let model = dir.path().join(format!("{shape}.gguf"));
        if !model.exists() {
            let st = Command::new(&python)
                .arg(script("shape_model.py"))
                .arg(shape)
                .arg(&model)
                .status()
                .unwrap();
            assert!(st.success(), "shape_model.py {shape}");
        }
        let log = run_server(&python, &model, case);
        let Some(server) = logged_mib(&log, "CPU compute buffer size") else {
            panic!("{case:?}: no compute buffer line in the log:\n{log}");
        };
        let server_out = logged_mib(&log, "output buffer size").expect("output buffer line");

        let m = gguf::open(&model).unwrap();
        let kv = KvSettings {
            ctx: Some(ctx),
            n_seq: np,
            kv_unified: unified,
            n_ubatch: ub,
            ..KvSettings::default()
        };
        let flash = if fa { FlashAttn::On } else { FlashAttn::Off };
        let batch = BatchSettings {
            backend: Backend::Cpu,
            ..BatchSettings::default()
        };
        let est = gguf::compute(&m, &kv, flash, &batch).unwrap();
        let ours = est.compute_bytes.expect("a modelled architecture") as f64 / MIB;
        let ours_out = est.output_bytes.unwrap() as f64 / MIB;
        let error = ours - server;
        report.push(format!(
            "| {shape} | {} | {ub} | {ctx} | {np} | {unified} | {server:.2} | {ours:.2} | {error:+.2} MiB ({:+.1}%) | {server_out:.2} / {ours_out:.2} |",
            if fa { "on" } else { "off" },
            100.0 * error / server
        ));
        // The log prints two decimals.
        assert!(
            (ours_out - server_out).abs() < 0.01,
            "{case:?}: output {ours_out} vs {server_out}"
        );
        let allowed = (0.02 * server).max(1.0);
        let known = KNOWN_MISSES
            .iter()
            .find(|(c, _)| c == case)
            .map(|&(_, measured)| measured);
        match known {
            Some(measured) if (error.abs() - measured).abs() > 0.1 => {
                failures.push(format!("{case:?}: known miss of {measured} MiB is now {error:+.2}"))
            }
            None if error.abs() > allowed => failures.push(format!(
                "{case:?}: estimate {ours:.2} MiB vs server {server:.2} MiB ({}: {})",
                est.why, error
            )),
            _ => {}
        }
    }
    eprintln!("{}", report.join("\n"));
    eprintln!("{} cases in {:.0} s", CASES.len(), started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
