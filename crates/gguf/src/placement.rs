//! Where llama.cpp puts an estimate across several GPUs: `-sm layer|row|none`,
//! `-ts`/`--tensor-split` and, without `-ts`, the default split by each
//! GPU's free memory; then `-nkvo` and `-ot PATTERN=CPU` on top.
//!
//! src/llama-model.cpp `load_tensors`: the split weights (the `-ts` values,
//! or every device's free memory when all are 0) become cumulative
//! fractions; offloaded layer `il` (the output layer is index `n_layer`)
//! goes to the first device whose cumulative fraction exceeds
//! `(il - i_gpu_start) / act_gpu_layers`, in `float`. So every GPU holds a
//! contiguous run of layers, the last one the output layer. With `-sm none`
//! src/llama.cpp `llama_model_load_from_file_impl` keeps only the main GPU.
//! With `-sm row` the matrices of every offloaded layer are split by rows
//! across the GPUs in the `-ts` proportions, while the KV cache and the
//! intermediate results stay on the main GPU (common/arg.cpp, `--main-gpu`:
//! "for intermediate results and KV (with split-mode = row)").

use crate::compute::ComputeEstimate;
use crate::memory::{estimate, gpu_bytes_matching, EstimateError, KvSettings, Placement};
use crate::model::Model;

/// `-sm`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum SplitMode {
    #[default]
    Layer,
    Row,
    None,
}

impl std::str::FromStr for SplitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "layer" => Ok(SplitMode::Layer),
            "row" => Ok(SplitMode::Row),
            "none" => Ok(SplitMode::None),
            _ => Err(format!("unknown split mode {s:?} (layer, row or none)")),
        }
    }
}

/// How the model is spread over the GPUs, in llama.cpp's device order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    pub mode: SplitMode,
    /// One weight per GPU: the `-ts` values, or (llama.cpp's default) each
    /// GPU's free bytes. Empty: no GPU.
    pub weights: Vec<f64>,
    /// The GPUs' own indices (NVML's), beside `weights`.
    pub ids: Vec<u32>,
    /// `-mg`: a position in `weights`.
    pub main_gpu: usize,
    /// `-nkvo`: the KV cache (and so the attention) stays in host memory.
    pub no_kv_offload: bool,
    /// `-ot PATTERN=CPU`: offloaded tensors whose name contains this stay
    /// in host memory.
    pub host_pattern: Option<String>,
}

/// One GPU's share.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GpuShare {
    /// Position in [`Split::weights`].
    pub gpu: usize,
    /// Layers it holds, the output layer counting as one.
    pub layers: u32,
    pub holds_output: bool,
    pub placement: Placement,
    /// Its compute buffer; `None` when not modelled.
    pub compute_bytes: Option<u64>,
}

/// The GPUs' shares and the host's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub gpus: Vec<GpuShare>,
    pub host: Placement,
    pub host_compute_bytes: Option<u64>,
    /// llama-context.cpp enables pipeline parallelism (the scheduler keeps
    /// 4 copies of every split's inputs, `GGML_SCHED_MAX_COPIES`) with more
    /// than one GPU, every layer offloaded in layer mode, the KV offloaded
    /// and no tensor override; those copies are not in `compute_bytes`.
    pub pipeline_parallel: bool,
}

/// A GPU's compute buffer for a backend other than the CPU. With `-nkvo`
/// the attention runs beside the cache on the host (src/llama-kv-cache.cpp
/// puts every layer's cache on the CPU when `offload_kqv` is off), so the
/// device keeps the feed-forward block (and the logits, on the device
/// holding the output layer) without the masks. A GPU holding no layer:
/// not modelled (large batches are still offloaded op by op).
pub fn gpu_compute(c: &ComputeEstimate, layers: u32, holds_output: bool, no_kv_offload: bool) -> Option<u64> {
    if layers == 0 {
        return None;
    }
    if no_kv_offload {
        // The feed-forward block is sized beside the masks; the logits are
        // not (compute.rs: the masks are freed by the output head).
        // A recurrent layer's scan stays beside its state, on the device.
        let ff = c
            .feed_forward_bytes?
            .saturating_sub(c.masks_bytes)
            .max(c.scan_bytes.unwrap_or(0));
        return if holds_output {
            Some(ff.max(c.logits_bytes?))
        } else {
            Some(ff)
        };
    }
    if holds_output {
        c.compute_bytes
    } else {
        // The logits are the output layer's; the rest peaks at the scores,
        // a recurrent layer's scan or the feed-forward block, whichever this
        // backend's graph makes.
        Some(
            c.attention_bytes
                .unwrap_or(0)
                .max(c.scan_bytes.unwrap_or(0))
                .max(c.feed_forward_bytes?),
        )
    }
}

/// The host's compute buffer: graph inputs, plus the attention with `-nkvo`.
pub fn host_compute(c: &ComputeEstimate, no_kv_offload: bool) -> Option<u64> {
    if no_kv_offload {
        c.host_compute_bytes
            .zip(c.attention_bytes)
            .map(|(h, a)| h.saturating_add(a))
    } else {
        c.host_compute_bytes
    }
}

/// Offloaded layers per GPU under `-sm layer`, in llama.cpp's float math.
pub fn layer_counts(n_layer: u32, n_gpu_layers: u32, weights: &[f64]) -> Vec<u32> {
    let n = weights.len();
    let mut counts = vec![0u32; n];
    if n == 0 || n_gpu_layers == 0 {
        return counts;
    }
    let sum: f64 = weights.iter().map(|w| w.max(0.0)).sum();
    // All zero: nothing to weigh by, so equal shares (llama.cpp would
    // divide by zero here; free memory of 0 everywhere is no real case).
    let weight = |i: usize| if sum > 0.0 { weights[i].max(0.0) } else { 1.0 };
    let total: f64 = (0..n).map(weight).sum();
    let mut acc = 0.0;
    let cumulative: Vec<f32> = (0..n)
        .map(|i| {
            acc += weight(i);
            (acc / total) as f32
        })
        .collect();
    let act = n_gpu_layers.min(n_layer.saturating_add(1));
    for step in 0..act {
        let x = step as f32 / act as f32;
        let gpu = cumulative.iter().position(|&s| s > x).unwrap_or(n - 1);
        counts[gpu] += 1;
    }
    counts
}

fn minus(a: &Placement, b: &Placement) -> Placement {
    Placement {
        weights_bytes: a.weights_bytes.zip(b.weights_bytes).map(|(a, b)| a.saturating_sub(b)),
        kv_bytes: a.kv_bytes.saturating_sub(b.kv_bytes),
        recurrent_state_bytes: a
            .recurrent_state_bytes
            .zip(b.recurrent_state_bytes)
            .map(|(a, b)| a.saturating_sub(b)),
    }
}

/// The GPU side when the last `ngl` layers are offloaded, with the `-ot`
/// bytes already moved to the host (`None` weights when unknown).
fn suffix(model: &Model, kv: &KvSettings, ngl: u32, host_pattern: Option<&str>) -> Result<Placement, EstimateError> {
    let s = KvSettings {
        n_gpu_layers: Some(ngl as i32),
        ..kv.clone()
    };
    let mut gpu = estimate(model, &s)?.offload.gpu;
    if let Some(p) = host_pattern {
        let moved = gpu_bytes_matching(model, s.n_gpu_layers, p)?;
        gpu.weights_bytes = gpu.weights_bytes.zip(moved).map(|(w, m)| w.saturating_sub(m));
    }
    Ok(gpu)
}

/// Spreads the estimate for `kv` over the GPUs of `split`. `c` is the
/// compute estimate for the same settings on the GPUs' backend.
pub fn place(model: &Model, kv: &KvSettings, c: &ComputeEstimate, split: &Split) -> Result<Placed, EstimateError> {
    let n_layer = model.info().layers.unwrap_or(0);
    let ngl = if split.weights.is_empty() {
        0
    } else {
        estimate(model, kv)?.offload.n_gpu_layers
    };
    let e = estimate(
        model,
        &KvSettings {
            n_gpu_layers: Some(ngl as i32),
            ..kv.clone()
        },
    )?;
    let pattern = split.host_pattern.as_deref();
    let main = split.main_gpu.min(split.weights.len().saturating_sub(1));
    let offloaded = suffix(model, kv, ngl, pattern)?;
    let mut gpus = match split.mode {
        _ if split.weights.is_empty() => Vec::new(),
        SplitMode::Layer if split.weights.len() > 1 => {
            let counts = layer_counts(n_layer, ngl, &split.weights);
            // Layers are handed out from the first offloaded one up: the
            // last GPU with any holds the output layer. A GPU's share is
            // the suffix from its first layer less the suffix after it.
            let mut above = ngl;
            let mut shares = Vec::with_capacity(counts.len());
            for (gpu, &layers) in counts.iter().enumerate() {
                let from = suffix(model, kv, above, pattern)?;
                above -= layers;
                let after = suffix(model, kv, above, pattern)?;
                shares.push(GpuShare {
                    gpu,
                    layers,
                    holds_output: layers > 0 && above == 0 && ngl > n_layer,
                    placement: minus(&from, &after),
                    compute_bytes: None,
                });
            }
            shares
        }
        SplitMode::Row if split.weights.len() > 1 => {
            let total: f64 = split.weights.iter().map(|w| w.max(0.0)).sum();
            let n = split.weights.len() as f64;
            (0..split.weights.len())
                .map(|gpu| {
                    let fraction = if total > 0.0 {
                        split.weights[gpu].max(0.0) / total
                    } else {
                        1.0 / n
                    };
                    let is_main = gpu == main;
                    GpuShare {
                        gpu,
                        layers: if is_main { ngl } else { 0 },
                        holds_output: is_main && ngl > n_layer,
                        placement: Placement {
                            weights_bytes: offloaded.weights_bytes.map(|w| (w as f64 * fraction) as u64),
                            kv_bytes: if is_main { offloaded.kv_bytes } else { 0 },
                            recurrent_state_bytes: if is_main {
                                offloaded.recurrent_state_bytes
                            } else {
                                Some(0)
                            },
                        },
                        compute_bytes: None,
                    }
                })
                .collect()
        }
        // One GPU, or -sm none: the main GPU holds every offloaded layer.
        _ => vec![GpuShare {
            gpu: main,
            layers: ngl,
            holds_output: ngl > n_layer,
            placement: offloaded.clone(),
            compute_bytes: None,
        }],
    };
    let row = split.mode == SplitMode::Row;
    let last_with_layers = gpus.iter().rposition(|g| g.layers > 0);
    for (i, g) in gpus.iter_mut().enumerate() {
        // The output layer's device reserves the logits; when the output
        // stays on the host the last offloaded device is charged them, as
        // for one GPU (llama.cpp offloads the head op by op).
        let logits_here = g.holds_output || Some(i) == last_with_layers;
        let layers = if row && g.gpu != main { 0 } else { g.layers };
        g.compute_bytes = gpu_compute(c, layers, logits_here, split.no_kv_offload);
        if split.no_kv_offload {
            g.placement.kv_bytes = 0;
        }
    }
    // The host keeps what is not offloaded, what `-ot` moved back, and the
    // cache with `-nkvo`.
    let mut host = e.offload.cpu.clone();
    if let Some(p) = pattern {
        let moved = gpu_bytes_matching(model, Some(ngl as i32), p)?;
        host.weights_bytes = host.weights_bytes.zip(moved).and_then(|(w, m)| w.checked_add(m));
    }
    if split.no_kv_offload {
        host.kv_bytes = e.kv.bytes;
    }
    Ok(Placed {
        pipeline_parallel: split.weights.len() > 1
            && split.mode == SplitMode::Layer
            && ngl > n_layer
            && !split.no_kv_offload
            && split.host_pattern.is_none(),
        gpus,
        host,
        host_compute_bytes: host_compute(c, split.no_kv_offload),
    })
}
