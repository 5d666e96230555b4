//! `gputaskman model FILE`: what a GGUF model file is and what it will cost
//! under llama.cpp launch settings. The numbers are *estimated* (computed
//! from the header and the settings), never measured; the math lives in the
//! `gguf` crate and follows llama.cpp to the byte.

use std::io::Write;

use anyhow::Result;
use gguf::{CacheEstimate, CacheKind, CacheType, Estimate, EstimateError, Fit, KvSettings, Model, ModelInfo};
use serde::Serialize;

use crate::model_args::{GpuFree, ModelArgs};
use crate::view::safe_text::safe;

const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// `--fit`'s "does not fit": exit status 1 (src/main.rs), apart from the
/// errors (2) of a file that cannot be read or a GPU that is not there.
#[derive(Debug)]
pub struct DoesNotFit;

impl std::fmt::Display for DoesNotFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("does not fit at these settings (see the fit lines for what would)")
    }
}

impl std::error::Error for DoesNotFit {}

/// Runs `gputaskman model`. `gpus` are the GPUs found (by index), the one
/// `--gpu` names when it was given. A file that cannot be read is an error
/// whose message names the file and the byte offset; settings llama.cpp
/// would refuse are errors too; a model the math cannot size prints its
/// info with the KV cache unknown.
pub fn run(args: &ModelArgs, gpus: Vec<GpuFree>, gpu_asked: bool, out: &mut dyn Write) -> Result<()> {
    if gpu_asked && gpus.is_empty() {
        anyhow::bail!("the GPU --gpu names is not on this machine (or NVML did not answer)");
    }
    let roomiest = gpus.iter().max_by_key(|g| g.free_bytes).cloned();
    let batch = gguf::BatchSettings {
        backend: args.backend(roomiest.as_ref()),
        n_batch: args.batch,
        ..gguf::BatchSettings::default()
    };
    if args.file.is_dir() {
        return crate::model_dir::run(args, &batch, &gpus, out);
    }
    let model = gguf::open(&args.file)?;
    // `-fa auto` becomes what the backend's rule says, for every figure below.
    let auto_flash = (args.flash_attn == crate::model_args::FlashAttn::Auto)
        .then(|| gguf::resolve_auto(&model, batch.backend, args.cache_type_k, args.cache_type_v));
    let resolved;
    let args = match &auto_flash {
        Some(a) => {
            let mut r = args.clone();
            r.flash_attn = if a.on {
                crate::model_args::FlashAttn::On
            } else {
                crate::model_args::FlashAttn::Off
            };
            resolved = r;
            &resolved
        }
        None => args,
    };
    let settings = args.kv_settings();
    let (estimate, unavailable) = match gguf::estimate(&model, &settings) {
        Ok(e) => (Some(e), None),
        Err(EstimateError::Settings(msg)) => anyhow::bail!("{}: {msg}", args.file.display()),
        Err(EstimateError::Model(reason)) => (None, Some(reason)),
    };
    let compute = match estimate {
        Some(_) => Some(gguf::compute(&model, &settings, args.flash(), &batch)?),
        None => None,
    };
    let split = split_for(args, &gpus, batch.backend)?;
    let placed = match &compute {
        Some(c) if c.backend != gguf::Backend::Cpu => Some(gguf::place(&model, &settings, c, &split)?),
        _ => None,
    };
    let mut devices = match (&estimate, &compute, &placed) {
        (_, Some(c), Some(p)) => crate::model_devices::placed(p, c, &gpus),
        (Some(e), Some(c), None) => crate::model_devices::devices(e, c, None, Default::default()),
        _ => Vec::new(),
    };
    let projector = match &args.mmproj {
        Some(path) => Some(projector(path, args, &devices)?),
        None => None,
    };
    if let Some(p) = &projector {
        crate::model_devices::add_projector(&mut devices, p);
    }
    // One GPU: the weights-and-KV line against it; several: every GPU the
    // split uses is checked, with the compute buffers.
    let fit = match (&gpus[..], &estimate) {
        ([g], Some(_)) => Some(gguf::fit(&model, &settings, g.free_bytes)?),
        _ => None,
    };
    let device_fit = match (&estimate, args.fit || (gpus.len() > 1 && placed.is_some())) {
        (Some(_), true) => Some(device_fit(&model, args, &settings, &batch, &split, &gpus)?),
        (None, true) if args.fit => anyhow::bail!(
            "{}: --fit needs the KV estimate: {}",
            args.file.display(),
            unavailable.unwrap_or_default()
        ),
        _ => None,
    };
    let report = Report {
        model: &model,
        args,
        estimate: estimate.as_ref(),
        compute: compute.as_ref(),
        device_fit: device_fit.as_ref(),
        devices: &devices,
        placed: placed.as_ref(),
        projector: projector.as_ref(),
        auto_flash: auto_flash.as_ref(),
        unavailable: unavailable.as_deref(),
        gpu: if gpus.len() == 1 { gpus.first() } else { None },
        fit: fit.as_ref(),
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report.json())?;
        writeln!(out)?;
    } else {
        report.text(out)?;
    }
    match device_fit.as_ref().filter(|_| args.fit).map(|f| f.fits) {
        Some(Some(false)) => Err(DoesNotFit.into()),
        Some(None) => anyhow::bail!("whether it fits is unknown: a part of a GPU's estimate is unknown"),
        _ => Ok(()),
    }
}

/// The projector of `--mmproj` and the device clip.cpp loads it on: the
/// first GPU row, else (CPU backend, `--no-mmproj-offload`) the host.
fn projector(
    path: &std::path::Path,
    args: &ModelArgs,
    rows: &[crate::model_devices::Device],
) -> Result<crate::model_devices::Projector> {
    use crate::model_devices::DeviceId;
    let file = gguf::open(path)?;
    let first_gpu = rows.iter().map(|d| d.device).find(|d| matches!(d, DeviceId::Gpu(_)));
    Ok(crate::model_devices::Projector {
        path: path.display().to_string(),
        device: match first_gpu {
            Some(gpu) if !args.no_mmproj_offload => gpu,
            _ => DeviceId::Host,
        },
        weights_bytes: file.info().weights_bytes,
        compute_bytes: None,
    })
}

/// The split over the GPUs found; on a GPU backend with none found (an
/// estimate for another machine), one stand-in GPU 0.
fn split_for(args: &ModelArgs, gpus: &[GpuFree], backend: gguf::Backend) -> Result<gguf::Split> {
    let mut split = args.split(gpus)?;
    if gpus.is_empty() && backend != gguf::Backend::Cpu {
        split.weights = vec![1.0];
        split.ids = vec![0];
        split.main_gpu = 0;
    }
    Ok(split)
}

/// `--fit`: every GPU's free memory (`--vram` for each, else as found) less
/// the margin, on a GPU backend.
fn device_fit(
    model: &Model,
    args: &ModelArgs,
    settings: &KvSettings,
    batch: &gguf::BatchSettings,
    split: &gguf::Split,
    gpus: &[GpuFree],
) -> Result<gguf::DeviceFit> {
    if batch.backend == gguf::Backend::Cpu {
        anyhow::bail!("--fit answers for a GPU: give --backend cuda, vulkan or metal");
    }
    let free: Vec<u64> = match (args.vram, gpus) {
        (Some(v), _) => vec![v; split.weights.len()],
        (None, []) => anyhow::bail!("--fit: no GPU found to read free memory from; give --vram SIZE"),
        (None, _) => gpus.iter().map(|g| g.free_bytes).collect(),
    };
    let query = gguf::FitQuery {
        kv: settings,
        fa: args.flash(),
        batch,
        split,
        free_bytes: &free,
        margin_bytes: args.fit_target.saturating_mul(1 << 20),
        tensor_split_given: args.tensor_split_given(),
    };
    gguf::fit_device(model, &query).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))
}

struct Report<'a> {
    model: &'a Model,
    args: &'a ModelArgs,
    estimate: Option<&'a Estimate>,
    compute: Option<&'a gguf::ComputeEstimate>,
    devices: &'a [crate::model_devices::Device],
    placed: Option<&'a gguf::Placed>,
    projector: Option<&'a crate::model_devices::Projector>,
    /// What `-fa auto` became, when it was auto.
    auto_flash: Option<&'a gguf::AutoFlash>,
    unavailable: Option<&'a str>,
    gpu: Option<&'a GpuFree>,
    fit: Option<&'a Fit>,
    device_fit: Option<&'a gguf::DeviceFit>,
}

/// The `model --json` document. The fields DESIGN.md fixes come first;
/// unknown values are null.
#[derive(Serialize)]
struct Json<'a> {
    path: String,
    architecture: Option<&'a str>,
    name: Option<&'a str>,
    kind: &'static str,
    params: Option<u64>,
    file_type: Option<&'static str>,
    bits_per_weight: Option<f64>,
    weights_bytes: Option<u64>,
    layers: Option<u32>,
    context_train: Option<u32>,
    kv: Option<JsonKv<'a>>,
    file_type_id: Option<u32>,
    file_type_guessed: Option<bool>,
    size_label: Option<&'a str>,
    info: &'a ModelInfo,
    kv_unavailable: Option<&'a str>,
    recurrent_state_bytes: Option<u64>,
    offload: Option<&'a gguf::Offload>,
    gpu: Option<&'a GpuFree>,
    fit: Option<FitJson<'a>>,
    /// Compute buffers of every device, the host's included; null when unknown.
    compute_bytes: Option<u64>,
    output_bytes: Option<u64>,
    /// What the devices need, summed; null when a part is unknown.
    total_bytes: Option<u64>,
    compute: Option<&'a gguf::ComputeEstimate>,
    /// `-sm`, and whether llama.cpp runs the GPUs as a pipeline (its
    /// input copies are not in the compute figures); null on the CPU.
    split_mode: Option<gguf::SplitMode>,
    pipeline_parallel: Option<bool>,
    mmproj: Option<&'a crate::model_devices::Projector>,
    /// `-fa auto` resolved for the backend: on, whether the backend's rule
    /// was checked, why; null when -fa was on or off.
    flash_attn_auto: Option<AutoFlashJson<'a>>,
    devices: &'a [crate::model_devices::Device],
}

#[derive(Serialize)]
struct AutoFlashJson<'a> {
    on: bool,
    checked: bool,
    why: &'a str,
}

/// `fit`: the weights-and-KV check against the roomiest GPU, or with
/// `--fit` the device answer (context, parallel, gpu_layers).
#[derive(Serialize)]
#[serde(untagged)]
enum FitJson<'a> {
    Kv(&'a Fit),
    Device(&'a gguf::DeviceFit),
}

#[derive(Serialize)]
struct JsonKv<'a> {
    context: u32,
    type_k: CacheType,
    type_v: CacheType,
    bytes: u64,
    bytes_per_token: u64,
    caches: &'a [CacheEstimate],
    context_per_seq: u32,
    n_seq: u32,
    unified: bool,
    flash_attn: bool,
    swa_full: bool,
    n_ubatch: u32,
}

impl Report<'_> {
    fn json(&self) -> Json<'_> {
        let info = self.model.info();
        let settings = self.args.kv_settings();
        Json {
            path: self.args.file.display().to_string(),
            architecture: info.architecture.as_deref(),
            name: info.name.as_deref(),
            kind: info.kind.as_str(),
            params: info.params,
            file_type: info.file_type.as_ref().and_then(|f| f.name),
            bits_per_weight: info.bits_per_weight,
            weights_bytes: info.weights_bytes,
            layers: info.layers,
            context_train: info.context_train,
            kv: self.estimate.map(|e| JsonKv {
                context: e.kv.context,
                type_k: e.kv.type_k,
                type_v: e.kv.type_v,
                bytes: e.kv.bytes,
                bytes_per_token: e.kv.bytes_per_token,
                caches: &e.kv.caches,
                context_per_seq: e.kv.context_per_seq,
                n_seq: e.kv.n_seq,
                unified: e.kv.unified,
                flash_attn: settings.flash_attn,
                swa_full: settings.swa_full,
                n_ubatch: settings.n_ubatch,
            }),
            file_type_id: info.file_type.as_ref().map(|f| f.id),
            file_type_guessed: info.file_type.as_ref().map(|f| f.guessed),
            size_label: info.size_label.as_deref(),
            info,
            kv_unavailable: self.unavailable,
            recurrent_state_bytes: self.estimate.and_then(|e| e.recurrent_state_bytes),
            offload: self.estimate.map(|e| &e.offload),
            gpu: self.gpu,
            fit: match self.device_fit {
                Some(f) => Some(FitJson::Device(f)),
                None => self.fit.map(FitJson::Kv),
            },
            compute_bytes: crate::model_devices::sum(self.devices, |d| d.compute_bytes),
            output_bytes: crate::model_devices::sum(self.devices, |d| d.output_bytes),
            total_bytes: crate::model_devices::sum(self.devices, |d| d.total_bytes),
            compute: self.compute,
            split_mode: self.placed.map(|_| self.args.split_mode),
            pipeline_parallel: self.placed.map(|p| p.pipeline_parallel),
            mmproj: self.projector,
            flash_attn_auto: self.auto_flash.map(|a| AutoFlashJson {
                on: a.on,
                checked: a.checked,
                why: &a.why,
            }),
            devices: self.devices,
        }
    }

    fn text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let info = self.model.info();
        let na = || "n/a".to_string();
        // Every value passes here: the file's strings are its author's.
        let row = |out: &mut dyn Write, label: &str, value: String| writeln!(out, "{label:<16}{}", safe(&value));

        row(out, "file", self.args.file.display().to_string())?;
        if info.split_parts > 1 {
            row(out, "parts", format!("{} (split model)", info.split_parts))?;
        }
        row(out, "architecture", info.architecture.clone().unwrap_or_else(na))?;
        row(out, "name", info.name.clone().unwrap_or_else(na))?;
        row(out, "size label", info.size_label.clone().unwrap_or_else(na))?;
        row(out, "kind", info.kind.as_str().to_string())?;
        row(
            out,
            "params",
            info.params
                .map_or_else(na, |p| format!("{:.2} M ({})", p as f64 / 1e6, thousands(p))),
        )?;
        row(
            out,
            "file type",
            info.file_type.as_ref().map_or_else(na, |f| f.to_string()),
        )?;
        let bpw = info
            .bits_per_weight
            .map_or_else(String::new, |b| format!(" ({b:.2} BPW)"));
        let weights = match info.weights_bytes {
            Some(w) => format!("{}{bpw}", size(w)),
            None => format!("n/a ({} tensors of unknown type)", info.tensors_unknown_type),
        };
        row(out, "weights", weights)?;
        row(out, "layers", opt(info.layers))?;
        row(out, "training ctx", opt(info.context_train))?;
        row(out, "embedding", opt(info.embedding_length))?;
        let heads = |h: &Option<gguf::PerLayer>| h.as_ref().map_or_else(na, |h| h.to_string());
        row(
            out,
            "heads / KV",
            format!("{} / {}", heads(&info.head_count), heads(&info.head_count_kv)),
        )?;
        row(
            out,
            "head size K/V",
            format!("{} / {}", opt(info.key_length), opt(info.value_length)),
        )?;

        let Some(e) = self.estimate else {
            return row(
                out,
                "KV cache",
                format!("n/a ({})", self.unavailable.unwrap_or("unknown")),
            );
        };
        self.text_kv(out, e)?;
        self.text_offload(out, e)?;
        if let Some(c) = self.compute {
            crate::model_devices::text(out, c, self.devices)?;
        }
        if let Some(a) = self.auto_flash {
            writeln!(
                out,
                "  flash attention auto -> {}: {}",
                if a.on { "on" } else { "off" },
                a.why
            )?;
        }
        if let Some(p) = self.projector {
            let on = match p.device {
                crate::model_devices::DeviceId::Gpu(i) => format!("GPU {i}"),
                crate::model_devices::DeviceId::Host => "host".to_string(),
            };
            let line = format!(
                "  projector {}: {} of weights on {on}; its compute buffer is not estimated, so that row's compute and total are n/a",
                p.path,
                p.weights_bytes.map_or_else(|| "n/a".into(), size)
            );
            writeln!(out, "{}", safe(&line))?;
        }
        if self.placed.is_some_and(|p| p.pipeline_parallel) {
            writeln!(
                out,
                "  pipeline parallel across the GPUs: llama.cpp keeps 4 copies of each GPU's graph inputs, not in these compute figures"
            )?;
        }
        if let Some(f) = self.device_fit {
            device_fit_text(out, f)?;
        }
        if let (Some(gpu), Some(fit)) = (self.gpu, self.fit) {
            row(
                out,
                "GPU",
                format!(
                    "{}: {} free of {}",
                    gpu.name,
                    size(gpu.free_bytes),
                    size(gpu.total_bytes)
                ),
            )?;
            writeln!(out, "{}", fit_line(fit))?;
        }
        writeln!(
            out,
            "(estimated from the file header and the settings; the driver's context on a GPU is not included)"
        )
    }

    fn text_kv(&self, out: &mut dyn Write, e: &Estimate) -> std::io::Result<()> {
        let kv = &e.kv;
        let settings = self.args.kv_settings();
        let seqs = match (kv.n_seq, kv.unified) {
            (1, _) => "1 seq".to_string(),
            (n, true) => format!("{n} seqs, unified"),
            (n, false) => format!("{n} seqs, {} per seq", kv.context_per_seq),
        };
        writeln!(
            out,
            "{:<16}ctx {} ({seqs}), K {}, V {}, flash attention {}",
            "KV cache",
            kv.context,
            kv.type_k,
            kv.type_v,
            if settings.flash_attn { "on" } else { "off" },
        )?;
        if kv.caches.is_empty() {
            writeln!(out, "  none: llama.cpp runs this architecture without a KV cache")?;
        }
        for c in &kv.caches {
            writeln!(out, "  {:<14}{}", c.kind.as_str(), cache_line(c))?;
        }
        if e.kv.caches.iter().any(|c| c.kind != CacheKind::Recurrent) {
            writeln!(out, "  {:<14}{:.2} MiB", "KV total", kv.bytes as f64 / MIB)?;
            writeln!(
                out,
                "  {:<14}{:.2} KiB (one more token of context)",
                "per token",
                kv.bytes_per_token as f64 / KIB
            )?;
        }
        match e.recurrent_state_bytes {
            None => writeln!(
                out,
                "  {:<14}n/a (state layout of this architecture not known)",
                "recurrent"
            )?,
            Some(0) => {}
            Some(b) => writeln!(
                out,
                "  {:<14}{:.2} MiB (independent of the context)",
                "state total",
                b as f64 / MIB
            )?,
        }
        if let Some(train) = self.model.info().context_train {
            if kv.context_per_seq > train {
                writeln!(
                    out,
                    "  note: {} cells per sequence exceed the training context {train}",
                    kv.context_per_seq
                )?;
            }
        }
        Ok(())
    }

    fn text_offload(&self, out: &mut dyn Write, e: &Estimate) -> std::io::Result<()> {
        if self.args.n_gpu_layers.is_none() && self.gpu.is_none() {
            return Ok(());
        }
        let layers = self.model.info().layers.unwrap_or(0);
        let side = |p: &gguf::Placement| {
            let mut parts = vec![
                format!("weights {}", p.weights_bytes.map_or_else(|| "n/a".into(), size)),
                format!("KV {}", size(p.kv_bytes)),
            ];
            match p.recurrent_state_bytes {
                Some(0) => {}
                Some(b) => parts.push(format!("state {}", size(b))),
                None => parts.push("state n/a".into()),
            }
            let total = p.total().map_or_else(|| "n/a".into(), size);
            format!("{total} ({})", parts.join(", "))
        };
        writeln!(
            out,
            "{:<16}-ngl {}: {} of {} on the GPU ({layers} layers + output; token embeddings stay on the CPU)",
            "offload",
            self.args
                .n_gpu_layers
                .map_or_else(|| "all".to_string(), |n| n.to_string()),
            e.offload.n_gpu_layers,
            layers.saturating_add(1),
        )?;
        writeln!(out, "  {:<14}{}", "GPU", side(&e.offload.gpu))?;
        writeln!(out, "  {:<14}{}", "CPU", side(&e.offload.cpu))
    }
}

/// `fits in free memory now: yes (needs X of Y free); largest context that fits: N`
fn fit_line(fit: &Fit) -> String {
    let verdict = match fit.fits {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let needs = fit.needed_bytes.map_or_else(|| "n/a".into(), size);
    let largest = match fit.max_context {
        None => "n/a".to_string(),
        Some(0) => "none (not even 256 tokens)".to_string(),
        Some(n) => n.to_string(),
    };
    format!(
        "fits in free memory now: {verdict} (needs {needs} of {} free); largest context that fits: {largest}",
        size(fit.free_bytes)
    )
}

/// `--fit`'s answer: the verdict naming the GPU that decides, a line per
/// GPU when there are several, and what llama.cpp's own --fit would do.
fn device_fit_text(out: &mut dyn Write, f: &gguf::DeviceFit) -> std::io::Result<()> {
    let verdict = |fits: Option<bool>| match fits {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let context = match f.context {
        None => "n/a".to_string(),
        Some(0) => "none with these layers".to_string(),
        Some(c) => c.to_string(),
    };
    let parallel = match f.parallel {
        None => "n/a".to_string(),
        Some(0) => "none".to_string(),
        Some(p) => p.to_string(),
    };
    let which = f.gpu.map_or_else(String::new, |g| format!(" on GPU {g}"));
    writeln!(
        out,
        "fit             {}: needs {} of {} free{which} less a {} margin (weights, KV and compute on the GPU; its driver context not included); largest context that fits: {context}; slots at this context: {parallel}; -ngl {}",
        verdict(f.fits),
        f.needed_bytes.map_or_else(|| "n/a".into(), size),
        size(f.free_bytes),
        size(f.margin_bytes),
        opt(f.gpu_layers),
    )?;
    if f.gpus.len() > 1 {
        for g in &f.gpus {
            writeln!(
                out,
                "  GPU {:<10}{}: needs {} of {} free",
                g.gpu,
                verdict(g.fits),
                g.needed_bytes.map_or_else(|| "n/a".into(), size),
                size(g.free_bytes)
            )?;
        }
    }
    writeln!(out, "llama.cpp --fit {}", f.llama_cpp.says)
}

/// `12.00 MiB (4096 cells, 3 layers, 4/1 seqs), K (f16): 6.00 MiB, V (f16): 6.00 MiB`
/// in the shape of llama.cpp's log line; R and S for the recurrent state.
fn cache_line(c: &CacheEstimate) -> String {
    let (k, v) = if c.kind == CacheKind::Recurrent {
        ("R (f32)", "S (f32)")
    } else {
        ("K", "V")
    };
    format!(
        "{:.2} MiB ({} cells, {} layers, {} stream{}), {k}: {:.2} MiB, {v}: {:.2} MiB",
        c.bytes as f64 / MIB,
        c.cells,
        c.layers,
        c.streams,
        if c.streams == 1 { "" } else { "s" },
        c.k_bytes as f64 / MIB,
        c.v_bytes as f64 / MIB,
    )
}

/// Binary units: MiB below 1 GiB, else GiB with the MiB figure beside it.
fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.2} GiB ({:.2} MiB)", b / GIB, b / MIB)
    } else {
        format!("{:.2} MiB", b / MIB)
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| v.to_string())
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or("?"))
        .collect();
    groups.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(size(448 << 20), "448.00 MiB");
        assert_eq!(size(3584 << 20), "3.50 GiB (3584.00 MiB)");
        assert_eq!(thousands(268_098_176), "268,098,176");
        assert_eq!(thousands(7), "7");
    }

    #[test]
    fn fit_line_reads_as_specified() {
        let fit = Fit {
            free_bytes: 8 << 30,
            needed_bytes: Some(300 << 20),
            fits: Some(true),
            max_context: Some(32768),
        };
        assert_eq!(
            fit_line(&fit),
            "fits in free memory now: yes (needs 300.00 MiB of 8.00 GiB (8192.00 MiB) free); largest context that fits: 32768"
        );
    }
}
