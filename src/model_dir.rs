//! `gputaskman model DIR`: a table of every GGUF in a directory, what each
//! needs at its training context and at `-c`, and whether it fits the GPU
//! found now. Split models are listed once (their first part). Estimates
//! only, as in `model FILE`; unknown is `n/a`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use gguf::{BatchSettings, KvSettings};
use serde::Serialize;

use crate::model_args::{GpuFree, ModelArgs};
use crate::view::safe_text::safe;

/// The most directory entries looked at: a directory of millions of files
/// costs this many `stat`s, not all of them.
const MAX_ENTRIES: usize = 10_000;

/// One model at one context.
#[derive(Serialize)]
struct AtContext {
    context: Option<u32>,
    /// Weights + KV + state + compute (host and device) + output.
    buffers_bytes: Option<u64>,
    /// The device side fits the GPU's free memory less the margin.
    fits: Option<bool>,
}

#[derive(Serialize)]
struct Row {
    path: String,
    architecture: Option<String>,
    weights_bytes: Option<u64>,
    at_training_context: AtContext,
    at_requested_context: Option<AtContext>,
    error: Option<String>,
}

/// The GGUF files of `dir` (first parts of split sets), sorted by name.
fn gguf_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Later parts of a split set are read with their first.
            let later_part = name.contains("-of-") && !name.contains("-00001-of-");
            !later_part && gguf::is_gguf(p)
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Whether every GPU the split uses keeps its margin; null without a GPU.
fn fits(
    model: &gguf::Model,
    args: &ModelArgs,
    kv: &KvSettings,
    batch: &BatchSettings,
    gpus: &[GpuFree],
) -> Option<bool> {
    if gpus.is_empty() {
        return None;
    }
    let split = args.split(gpus).ok()?;
    let free: Vec<u64> = gpus.iter().map(|g| g.free_bytes).collect();
    let query = gguf::FitQuery {
        kv,
        fa: args.flash(),
        batch,
        split: &split,
        free_bytes: &free,
        margin_bytes: args.fit_target.saturating_mul(1 << 20),
        tensor_split_given: args.tensor_split_given(),
    };
    gguf::fit_device(model, &query).ok()?.fits
}

fn at(model: &gguf::Model, args: &ModelArgs, ctx: Option<u32>, batch: &BatchSettings, gpus: &[GpuFree]) -> AtContext {
    let kv = KvSettings {
        ctx,
        ..args.kv_settings()
    };
    let Ok(e) = gguf::estimate(model, &kv) else {
        return AtContext {
            context: None,
            buffers_bytes: None,
            fits: None,
        };
    };
    let c = gguf::compute(model, &kv, args.flash(), batch).ok();
    let buffers = c.as_ref().and_then(|c| {
        let state = e.recurrent_state_bytes?;
        e.weights_bytes?
            .checked_add(e.kv.bytes)?
            .checked_add(state)?
            .checked_add(c.compute_bytes?)?
            .checked_add(c.host_compute_bytes?)?
            .checked_add(c.output_bytes?)
    });
    let fits = fits(model, args, &kv, batch, gpus);
    AtContext {
        context: Some(e.kv.context),
        buffers_bytes: buffers,
        fits,
    }
}

fn row(path: &Path, args: &ModelArgs, batch: &BatchSettings, gpus: &[GpuFree]) -> Row {
    let mut r = Row {
        path: path.display().to_string(),
        architecture: None,
        weights_bytes: None,
        at_training_context: AtContext {
            context: None,
            buffers_bytes: None,
            fits: None,
        },
        at_requested_context: None,
        error: None,
    };
    match gguf::open(path) {
        Err(e) => r.error = Some(e.to_string()),
        Ok(m) => {
            r.architecture = m.info().architecture.clone();
            r.weights_bytes = m.info().weights_bytes;
            r.at_training_context = at(&m, args, None, batch, gpus);
            r.at_requested_context = args.ctx.filter(|&c| c > 0).map(|c| at(&m, args, Some(c), batch, gpus));
        }
    }
    r
}

/// Runs `model DIR`.
pub fn run(args: &ModelArgs, batch: &BatchSettings, gpus: &[GpuFree], out: &mut dyn Write) -> Result<()> {
    let rows: Vec<Row> = gguf_files(&args.file)?
        .iter()
        .map(|p| row(p, args, batch, gpus))
        .collect();
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &serde_json::json!({ "models": rows, "gpus": gpus }))?;
        writeln!(out)?;
        return Ok(());
    }
    let mib = |b: Option<u64>| {
        b.map_or_else(
            || "n/a".to_string(),
            |b| format!("{:.2} MiB", b as f64 / (1 << 20) as f64),
        )
    };
    let yes_no = |f: Option<bool>| match f {
        Some(true) => "yes",
        Some(false) => "no",
        None => "n/a",
    };
    let ctx = |c: Option<u32>| c.map_or_else(|| "n/a".to_string(), |c| c.to_string());
    writeln!(
        out,
        "{:<40} {:<10} {:>14} {:>8} {:>14} {:>5} {:>8} {:>14} {:>5}",
        "file", "arch", "weights", "train", "needs", "fits", "-c", "needs", "fits"
    )?;
    for r in &rows {
        let name = Path::new(&r.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (c2, n2, f2) = match &r.at_requested_context {
            Some(a) => (ctx(a.context), mib(a.buffers_bytes), yes_no(a.fits)),
            None => ("-".into(), "-".into(), "-"),
        };
        let t = &r.at_training_context;
        let line = format!(
            "{:<40} {:<10} {:>14} {:>8} {:>14} {:>5} {:>8} {:>14} {:>5}",
            name,
            r.architecture.as_deref().unwrap_or("n/a"),
            mib(r.weights_bytes),
            ctx(t.context),
            mib(t.buffers_bytes),
            yes_no(t.fits),
            c2,
            n2,
            f2
        );
        // File names and architectures are outside text.
        writeln!(out, "{}", safe(&line))?;
        if let Some(e) = &r.error {
            writeln!(out, "  {}", safe(e))?;
        }
    }
    writeln!(
        out,
        "(estimated; needs = weights, KV, compute and output buffers on every device; fits = every GPU's side within its free memory less {} MiB; the driver context is not included)",
        args.fit_target
    )?;
    Ok(())
}
