//! What a model costs in memory under given launch settings, computed the
//! way llama.cpp allocates it, to the byte.
//!
//! One function per concern, each citing the llama.cpp source it follows.
//! Included: the weights (tensor data bytes), the KV caches (full and
//! sliding-window), the recurrent state, and their split between GPU and CPU
//! for `--n-gpu-layers`. Excluded, because they depend on the backend and
//! the graph rather than the file: compute buffers (`sched_reserve`), the
//! output (logits) buffer, which lives in host memory, the CUDA/driver
//! context, and buffer alignment padding.

use std::fmt;
use std::str::FromStr;

use crate::hparams::{Hparams, Memory};
use crate::model::Model;
use crate::types::GgmlType;

/// llama.cpp pads the context to a multiple of 256 cells
/// (src/llama-context.cpp, and the SWA cache in src/llama-kv-cache-iswa.cpp).
const CTX_PAD: u32 = 256;
/// llama.cpp's LLAMA_MAX_SEQ.
const MAX_SEQ: u32 = 256;
/// common's default logical batch (`-b`), which caps the micro-batch.
const DEFAULT_N_BATCH: u32 = 2048;
/// Recurrent states are f32 (src/llama-model.cpp `create_memory`).
const STATE_BYTES: u64 = 4;

/// A KV cache element type that llama.cpp accepts for `-ctk` / `-ctv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
    Iq4Nl,
    Q5_0,
    Q5_1,
}

impl CacheType {
    /// All accepted types, in llama.cpp's `kv_cache_types` order.
    pub const ALL: [CacheType; 9] = [
        CacheType::F32,
        CacheType::F16,
        CacheType::BF16,
        CacheType::Q8_0,
        CacheType::Q4_0,
        CacheType::Q4_1,
        CacheType::Iq4Nl,
        CacheType::Q5_0,
        CacheType::Q5_1,
    ];

    /// The ggml type.
    pub fn ggml_type(self) -> GgmlType {
        match self {
            CacheType::F32 => GgmlType::F32,
            CacheType::F16 => GgmlType::F16,
            CacheType::BF16 => GgmlType::BF16,
            CacheType::Q8_0 => GgmlType::Q8_0,
            CacheType::Q4_0 => GgmlType::Q4_0,
            CacheType::Q4_1 => GgmlType::Q4_1,
            CacheType::Iq4Nl => GgmlType::IQ4_NL,
            CacheType::Q5_0 => GgmlType::Q5_0,
            CacheType::Q5_1 => GgmlType::Q5_1,
        }
    }

    /// The name llama.cpp uses on its command line and in its log.
    pub fn name(self) -> &'static str {
        self.ggml_type().name().unwrap_or("?")
    }

    /// Block-quantized (ggml_is_quantized): needs flash attention for V.
    pub fn is_quantized(self) -> bool {
        !matches!(self, CacheType::F32 | CacheType::F16 | CacheType::BF16)
    }
}

impl fmt::Display for CacheType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CacheType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CacheType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = CacheType::ALL.iter().map(|t| t.name()).collect();
                format!("unknown cache type {s:?} (one of {})", names.join(", "))
            })
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for CacheType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Launch settings, with llama.cpp's command-line defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvSettings {
    /// `-c`: total context; `None` or 0 means the training context.
    pub ctx: Option<u32>,
    /// `-np`: parallel sequences (slots).
    pub n_seq: u32,
    /// `-kvu`: one KV stream shared by all sequences.
    pub kv_unified: bool,
    /// `-ctk`
    pub type_k: CacheType,
    /// `-ctv`
    pub type_v: CacheType,
    /// `-ub`
    pub n_ubatch: u32,
    /// `--swa-full`: sliding-window layers get full-size caches.
    pub swa_full: bool,
    /// `-fa`: llama.cpp's default, auto, enables it on CPU and CUDA.
    pub flash_attn: bool,
    /// `-ngl`: `None` or negative means every layer.
    pub n_gpu_layers: Option<i32>,
}

impl Default for KvSettings {
    fn default() -> Self {
        KvSettings {
            ctx: None,
            n_seq: 1,
            kv_unified: false,
            type_k: CacheType::F16,
            type_v: CacheType::F16,
            n_ubatch: 512,
            swa_full: false,
            flash_attn: true,
            n_gpu_layers: None,
        }
    }
}

/// Which cache a line of the estimate is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum CacheKind {
    /// Full-attention layers: cells grow with the context.
    Full,
    /// Sliding-window layers: cells capped by the window.
    Swa,
    /// Recurrent state: fixed per sequence.
    Recurrent,
}

impl CacheKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheKind::Full => "full",
            CacheKind::Swa => "swa",
            CacheKind::Recurrent => "recurrent",
        }
    }
}

/// One cache as llama.cpp logs it: `size = X MiB (cells, layers, seqs), K, V`
/// (for a recurrent cache K is R and V is S, both f32).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CacheEstimate {
    pub kind: CacheKind,
    /// Cells per stream.
    pub cells: u32,
    pub layers: u32,
    /// KV streams: the sequence count without `--kv-unified`, else 1.
    pub streams: u32,
    pub k_bytes: u64,
    pub v_bytes: u64,
    pub bytes: u64,
}

/// The KV side of an estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KvEstimate {
    /// Total context after llama.cpp's padding (`n_ctx`).
    pub context: u32,
    /// Context per sequence (`n_ctx_seq`).
    pub context_per_seq: u32,
    pub n_seq: u32,
    pub unified: bool,
    pub type_k: CacheType,
    pub type_v: CacheType,
    /// Bytes of the attention caches (full + swa), as llama.cpp allocates.
    pub bytes: u64,
    /// Cost of one more token of context: the per-cell bytes of the caches
    /// that grow with the context (full-attention layers, and sliding ones
    /// with `--swa-full`).
    pub bytes_per_token: u64,
    /// The caches, recurrent state included (its bytes are in
    /// [`Estimate::recurrent_state_bytes`], not in `bytes`).
    pub caches: Vec<CacheEstimate>,
}

/// Memory on one side of the `--n-gpu-layers` split.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Placement {
    /// `None` when a tensor there has an unknown type.
    pub weights_bytes: Option<u64>,
    pub kv_bytes: u64,
    /// `None` when the state layout of the architecture is unknown.
    pub recurrent_state_bytes: Option<u64>,
}

impl Placement {
    /// Weights + KV + recurrent state, when all are known.
    pub fn total(&self) -> Option<u64> {
        self.weights_bytes?
            .checked_add(self.kv_bytes)?
            .checked_add(self.recurrent_state_bytes?)
    }
}

/// The GPU/CPU split for a layer count (src/llama-model.cpp `load_tensors`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Offload {
    /// Layers offloaded, the output layer counting as one (at most
    /// `layers + 1`).
    pub n_gpu_layers: u32,
    pub gpu: Placement,
    pub cpu: Placement,
}

/// What the model costs under the settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Estimate {
    pub weights_bytes: Option<u64>,
    pub kv: KvEstimate,
    /// `Some(0)` for models without recurrent layers; `None` when unknown.
    pub recurrent_state_bytes: Option<u64>,
    pub offload: Offload,
}

/// Why no estimate could be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EstimateError {
    /// The settings are ones llama.cpp itself would refuse.
    #[error("{0}")]
    Settings(String),
    /// The model lacks what the math needs (a key, a known layout).
    #[error("{0}")]
    Model(String),
}

/// Whether the GPU side of an estimate fits in some free memory.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Fit {
    pub free_bytes: u64,
    /// GPU weights + KV + recurrent state for the settings; `None` if unknown.
    pub needed_bytes: Option<u64>,
    pub fits: Option<bool>,
    /// The largest context (a multiple of 256, at most the training context)
    /// that fits; `Some(0)` when none does, `None` when unknown.
    pub max_context: Option<u32>,
}

/// Estimates what llama.cpp allocates for `model` under `settings`.
pub fn estimate(model: &Model, settings: &KvSettings) -> Result<Estimate, EstimateError> {
    let hp = model.hparams().map_err(|e| EstimateError::Model(e.to_string()))?;
    check_settings(settings)?;
    let ctx = plan_context(hp, settings)?;
    let ngl = gpu_layers(hp.n_layer, settings.n_gpu_layers);
    let on_gpu = |il: u32| layer_on_gpu(il, hp.n_layer, ngl);

    let mut gpu = Placement::default();
    let mut cpu = Placement::default();
    let mut caches = Vec::new();
    let mut bytes_per_token = 0u64;
    for spec in kv_caches(hp, &ctx, settings) {
        let mut cache = CacheEstimate {
            kind: spec.kind,
            cells: spec.cells,
            layers: spec.layers.len() as u32,
            streams: ctx.n_stream,
            k_bytes: 0,
            v_bytes: 0,
            bytes: 0,
        };
        for &il in &spec.layers {
            let row = kv_row_bytes(hp, il, settings)?;
            let per_cell = add(row.k, row.v)?;
            let cells = mul(u64::from(spec.cells), u64::from(ctx.n_stream))?;
            let (k, v) = (mul(row.k, cells)?, mul(row.v, cells)?);
            cache.k_bytes = add(cache.k_bytes, k)?;
            cache.v_bytes = add(cache.v_bytes, v)?;
            let side = if on_gpu(il) { &mut gpu } else { &mut cpu };
            side.kv_bytes = add(side.kv_bytes, add(k, v)?)?;
            if spec.grows_with_context {
                bytes_per_token = add(bytes_per_token, per_cell)?;
            }
        }
        cache.bytes = add(cache.k_bytes, cache.v_bytes)?;
        caches.push(cache);
    }
    let kv_bytes = add(gpu.kv_bytes, cpu.kv_bytes)?;

    let recurrent = recurrent_state(hp, settings)?;
    if let Some(state) = &recurrent {
        gpu.recurrent_state_bytes = Some(0);
        cpu.recurrent_state_bytes = Some(0);
        for &il in &state.layers {
            let side = if on_gpu(il) { &mut gpu } else { &mut cpu };
            side.recurrent_state_bytes = Some(add(side.recurrent_state_bytes.unwrap_or(0), state.per_layer)?);
        }
        if !state.layers.is_empty() {
            caches.push(state.cache.clone());
        }
    }
    let recurrent_state_bytes = recurrent.as_ref().map(|s| s.cache.bytes);

    let (gpu_weights, cpu_weights) = weights_split(model, hp, ngl);
    gpu.weights_bytes = gpu_weights;
    cpu.weights_bytes = cpu_weights;

    Ok(Estimate {
        weights_bytes: model.info().weights_bytes,
        kv: KvEstimate {
            context: ctx.n_ctx,
            context_per_seq: ctx.n_ctx_seq,
            n_seq: ctx.n_seq,
            unified: settings.kv_unified,
            type_k: settings.type_k,
            type_v: settings.type_v,
            bytes: kv_bytes,
            bytes_per_token,
            caches,
        },
        recurrent_state_bytes,
        offload: Offload {
            n_gpu_layers: ngl,
            gpu,
            cpu,
        },
    })
}

/// Checks `free_bytes` against the GPU side of the estimate and searches the
/// largest context that fits (weights, KV and recurrent state on the GPU;
/// compute buffers and the driver's context are not included).
pub fn fit(model: &Model, settings: &KvSettings, free_bytes: u64) -> Result<Fit, EstimateError> {
    let needed_bytes = estimate(model, settings)?.offload.gpu.total();
    Ok(Fit {
        free_bytes,
        needed_bytes,
        fits: needed_bytes.map(|n| n <= free_bytes),
        max_context: max_context(model, settings, free_bytes)?,
    })
}

/// The largest context, a multiple of 256 up to the (padded) training
/// context, whose GPU side fits in `free_bytes`: `Some(0)` when not even 256
/// fits, `None` when the GPU bytes are unknown. Binary search: the KV size
/// never shrinks as the context grows.
pub fn max_context(model: &Model, settings: &KvSettings, free_bytes: u64) -> Result<Option<u32>, EstimateError> {
    let hp = model.hparams().map_err(|e| EstimateError::Model(e.to_string()))?;
    let Some(train) = hp.n_ctx_train.and_then(|c| pad(c, CTX_PAD)) else {
        return Ok(None);
    };
    let needed = |ctx: u32| -> Result<Option<u64>, EstimateError> {
        let s = KvSettings {
            ctx: Some(ctx),
            ..settings.clone()
        };
        Ok(estimate(model, &s)?.offload.gpu.total())
    };
    // Invariant: steps <= lo fit (lo = 0: none known to), steps > hi do not.
    let (mut lo, mut hi) = (0u32, train / CTX_PAD);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match needed(mid * CTX_PAD)? {
            None => return Ok(None),
            Some(n) if n <= free_bytes => lo = mid,
            Some(_) => hi = mid - 1,
        }
    }
    Ok(Some(lo * CTX_PAD))
}

fn mul(a: u64, b: u64) -> Result<u64, EstimateError> {
    a.checked_mul(b)
        .ok_or_else(|| EstimateError::Model("memory size overflows".into()))
}

fn add(a: u64, b: u64) -> Result<u64, EstimateError> {
    a.checked_add(b)
        .ok_or_else(|| EstimateError::Model("memory size overflows".into()))
}

fn pad(x: u32, n: u32) -> Option<u32> {
    x.checked_add(n - 1).map(|v| v / n * n)
}

/// Settings llama.cpp refuses (src/llama-context.cpp, common/arg.cpp).
fn check_settings(s: &KvSettings) -> Result<(), EstimateError> {
    let bad = |msg: String| Err(EstimateError::Settings(msg));
    if s.n_seq == 0 || s.n_seq > MAX_SEQ {
        return bad(format!("--parallel must be 1..={MAX_SEQ}, got {}", s.n_seq));
    }
    if s.n_ubatch == 0 {
        return bad("--ubatch must be at least 1".into());
    }
    if s.type_v.is_quantized() && !s.flash_attn {
        return bad(format!(
            "a quantized V cache ({}) needs flash attention; llama.cpp refuses it without",
            s.type_v
        ));
    }
    Ok(())
}

/// Context sizes after llama.cpp's padding and per-sequence split.
#[derive(Clone, Copy, Debug)]
struct ContextPlan {
    n_ctx: u32,
    n_ctx_seq: u32,
    n_seq: u32,
    n_stream: u32,
    n_ubatch: u32,
}

/// src/llama-context.cpp (`llama_context::llama_context`): n_ctx = PAD(ctx
/// or n_ctx_train, 256); unified: one stream of n_ctx cells; otherwise
/// n_ctx_seq = PAD(n_ctx / n_seq, 256) cells in each of n_seq streams and
/// n_ctx rounded to n_ctx_seq * n_seq. The micro-batch is capped by the
/// logical batch, itself capped by the requested context.
fn plan_context(hp: &Hparams, s: &KvSettings) -> Result<ContextPlan, EstimateError> {
    let requested = match s.ctx {
        Some(c) if c > 0 => c,
        _ => hp
            .n_ctx_train
            .filter(|&c| c > 0)
            .ok_or_else(|| EstimateError::Model("no training context length in the file; give --ctx".into()))?,
    };
    let too_big = || EstimateError::Settings(format!("context {requested} is too large"));
    let n_ubatch = s.n_ubatch.min(requested.min(DEFAULT_N_BATCH));
    let n_ctx = pad(requested, CTX_PAD).ok_or_else(too_big)?;
    let (n_ctx, n_ctx_seq, n_stream) = if s.kv_unified {
        (n_ctx, n_ctx, 1)
    } else {
        let n_ctx_seq = pad(n_ctx / s.n_seq, CTX_PAD).ok_or_else(too_big)?;
        if n_ctx_seq == 0 {
            return Err(EstimateError::Settings(format!(
                "context {requested} split over {} sequences leaves none per sequence",
                s.n_seq
            )));
        }
        let total = n_ctx_seq.checked_mul(s.n_seq).ok_or_else(too_big)?;
        (total, n_ctx_seq, s.n_seq)
    };
    Ok(ContextPlan {
        n_ctx,
        n_ctx_seq,
        n_seq: s.n_seq,
        n_stream,
        n_ubatch,
    })
}

/// One KV cache: its cells per stream and its layers.
struct CacheSpec {
    kind: CacheKind,
    cells: u32,
    layers: Vec<u32>,
    grows_with_context: bool,
}

/// The caches llama.cpp creates (src/llama-model.cpp `create_memory`):
/// none for encoders; one full cache; with sliding layers the pair of
/// src/llama-kv-cache-iswa.cpp, the sliding one holding
/// PAD(min(n_ctx_seq, n_swa * (unified ? n_seq : 1) + n_ubatch), 256) cells
/// unless `swa_full`; for hybrids one cache over the attention layers.
/// Layers without KV of their own (`has_kv`) are left out.
fn kv_caches(hp: &Hparams, ctx: &ContextPlan, s: &KvSettings) -> Vec<CacheSpec> {
    let layers = |want_swa: Option<bool>| -> Vec<u32> {
        (0..hp.n_layer)
            .filter(|&il| hp.attention_layers.get(il as usize).copied().unwrap_or(false))
            .filter(|&il| hp.has_kv(il))
            .filter(|&il| match want_swa {
                Some(swa) => hp.is_swa(il) == swa,
                None => true,
            })
            .collect()
    };
    let full = |layers| CacheSpec {
        kind: CacheKind::Full,
        cells: ctx.n_ctx_seq,
        layers,
        grows_with_context: true,
    };
    let iswa = hp.memory == Memory::Kv && hp.n_swa > 0 && hp.swa_layers.iter().any(|&s| s);
    match hp.memory {
        Memory::None | Memory::Recurrent => Vec::new(),
        Memory::Kv if iswa => vec![
            full(layers(Some(false))),
            CacheSpec {
                kind: CacheKind::Swa,
                cells: swa_cells(hp.n_swa, ctx, s),
                layers: layers(Some(true)),
                grows_with_context: s.swa_full,
            },
        ],
        Memory::Kv | Memory::Hybrid => vec![full(layers(None))],
    }
}

/// src/llama-kv-cache-iswa.cpp: the sliding cache size.
fn swa_cells(n_swa: u32, ctx: &ContextPlan, s: &KvSettings) -> u32 {
    if s.swa_full {
        return ctx.n_ctx_seq;
    }
    let seqs = if s.kv_unified { u64::from(ctx.n_seq) } else { 1 };
    let wanted = u64::from(n_swa) * seqs + u64::from(ctx.n_ubatch);
    let capped = wanted.min(u64::from(ctx.n_ctx_seq)) as u32;
    // n_ctx_seq is itself a multiple of 256, so padding cannot exceed it.
    pad(capped, CTX_PAD).unwrap_or(ctx.n_ctx_seq)
}

struct RowBytes {
    k: u64,
    v: u64,
}

/// Bytes of one cell of layer `il` (src/llama-kv-cache.cpp constructor):
/// K is `n_embd_k_gqa(il)` wide; V is `n_embd_v_gqa(il)` wide with flash
/// attention, else every layer's V takes the widest V of the model
/// ([TAG_V_CACHE_VARIABLE]: V is stored transposed); MLA stores no V.
/// Row bytes are ggml_row_size: width / block * type size.
fn kv_row_bytes(hp: &Hparams, il: u32, s: &KvSettings) -> Result<RowBytes, EstimateError> {
    let row = |ty: CacheType, width: u64, what: &str| {
        ty.ggml_type().row_bytes(width).ok_or_else(|| {
            let block = ty.ggml_type().info().map_or(1, |i| i.block_size);
            EstimateError::Settings(format!(
                "{what} cache type {ty} needs a width that is a multiple of {block}; layer {il} has {width}"
            ))
        })
    };
    let k = row(s.type_k, hp.n_embd_k_gqa(il), "K")?;
    let v = if hp.is_mla {
        0
    } else {
        let width = if s.flash_attn {
            hp.n_embd_v_gqa(il)
        } else {
            hp.n_embd_v_gqa_max()
        };
        row(s.type_v, width, "V")?
    };
    Ok(RowBytes { k, v })
}

/// The recurrent state: which layers hold one, the bytes per layer, and the
/// cache line as llama.cpp logs it (R and S).
struct RecurrentState {
    layers: Vec<u32>,
    per_layer: u64,
    cache: CacheEstimate,
}

/// src/llama-memory-recurrent.cpp: per recurrent layer an R tensor of
/// `n_embd_r` and an S tensor of `n_embd_s` f32 values per cell, with
/// max(1, n_seq) cells (src/llama-model.cpp `create_memory`): independent of
/// the context. `None` when the state layout is unknown; no layers when the
/// model has none.
fn recurrent_state(hp: &Hparams, s: &KvSettings) -> Result<Option<RecurrentState>, EstimateError> {
    let Some(widths) = hp.state else {
        return Ok(None);
    };
    let cells = s.n_seq.max(1);
    let layers: Vec<u32> = (0..hp.n_layer)
        .filter(|&il| hp.recurrent_layers.get(il as usize).copied().unwrap_or(false))
        .collect();
    let per_cell = |w: u64| mul(mul(w, STATE_BYTES)?, u64::from(cells));
    let (r, s) = (per_cell(widths.r)?, per_cell(widths.s)?);
    let n = layers.len() as u64;
    let (k_bytes, v_bytes) = (mul(r, n)?, mul(s, n)?);
    Ok(Some(RecurrentState {
        per_layer: add(r, s)?,
        cache: CacheEstimate {
            kind: CacheKind::Recurrent,
            cells,
            layers: n as u32,
            streams: 1,
            k_bytes,
            v_bytes,
            bytes: add(k_bytes, v_bytes)?,
        },
        layers,
    }))
}

/// Layers offloaded for `-ngl`: negative or absent means all of them, the
/// output layer included (n_layer + 1).
fn gpu_layers(n_layer: u32, n_gpu_layers: Option<i32>) -> u32 {
    let all = n_layer.saturating_add(1);
    match n_gpu_layers {
        Some(n) if n >= 0 => (n as u32).min(all),
        _ => all,
    }
}

/// src/llama-model.cpp `load_tensors`: layer `il` (the output layer is
/// index n_layer) is on the GPU when il >= n_layer + 1 - n_gpu_layers. The
/// input layer (token embeddings) always stays on the CPU.
fn layer_on_gpu(il: u32, n_layer: u32, ngl: u32) -> bool {
    il >= n_layer.saturating_add(1).saturating_sub(ngl)
}

/// Bytes of the tensors `-ngl` puts on the GPU whose name contains
/// `pattern`: what `-ot PATTERN=CPU` (common/arg.cpp `--override-tensor`,
/// matched against tensor names in src/llama-model.cpp) keeps in host
/// memory instead, e.g. `exps` for a mixture of experts' expert weights.
/// `None` when such a tensor has an unknown type.
pub fn gpu_bytes_matching(
    model: &Model,
    n_gpu_layers: Option<i32>,
    pattern: &str,
) -> Result<Option<u64>, EstimateError> {
    let hp = model.hparams().map_err(|e| EstimateError::Model(e.to_string()))?;
    let ngl = gpu_layers(hp.n_layer, n_gpu_layers);
    let mut sum = Some(0u64);
    for t in model.tensors().iter().filter(|t| t.name.contains(pattern)) {
        let on_gpu = match tensor_layer(&t.name, hp.n_layer) {
            TensorLayer::Input => false,
            TensorLayer::Layer(il) => layer_on_gpu(il, hp.n_layer, ngl),
            TensorLayer::Output => layer_on_gpu(hp.n_layer, hp.n_layer, ngl),
        };
        if on_gpu {
            sum = sum.and_then(|s| t.n_bytes.and_then(|b| s.checked_add(b)));
        }
    }
    Ok(sum)
}

/// Where a tensor lives: the input layer, repeating layer N (`blk.N.`), or
/// the output layer (`output.*`, `output_norm.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TensorLayer {
    Input,
    Layer(u32),
    Output,
}

fn tensor_layer(name: &str, n_layer: u32) -> TensorLayer {
    if let Some(rest) = name.strip_prefix("blk.") {
        let digits = rest.split('.').next().unwrap_or("");
        return match digits.parse::<u32>() {
            Ok(il) if il < n_layer => TensorLayer::Layer(il),
            _ => TensorLayer::Input,
        };
    }
    if name.starts_with("output") {
        TensorLayer::Output
    } else {
        TensorLayer::Input
    }
}

/// Weight bytes on the GPU and on the CPU for `ngl` offloaded layers.
/// Models that tie their output to the token embeddings (no
/// `output.weight`) get a copy of `token_embd.weight` on the output layer's
/// device (llama.cpp creates it with TENSOR_DUPLICATED); on the CPU that
/// copy is the same mapped data and costs nothing.
fn weights_split(model: &Model, hp: &Hparams, ngl: u32) -> (Option<u64>, Option<u64>) {
    let mut gpu = Some(0u64);
    let mut cpu = Some(0u64);
    let output_on_gpu = layer_on_gpu(hp.n_layer, hp.n_layer, ngl);
    let mut has_output = false;
    let mut token_embd = None;
    for t in model.tensors() {
        let on_gpu = match tensor_layer(&t.name, hp.n_layer) {
            TensorLayer::Input => false,
            TensorLayer::Layer(il) => layer_on_gpu(il, hp.n_layer, ngl),
            TensorLayer::Output => output_on_gpu,
        };
        has_output |= t.name == "output.weight";
        if t.name == "token_embd.weight" {
            token_embd = Some(t.n_bytes);
        }
        let side = if on_gpu { &mut gpu } else { &mut cpu };
        *side = side.and_then(|sum| t.n_bytes.and_then(|b| sum.checked_add(b)));
    }
    if let (false, true, Some(bytes), true) = (has_output, output_on_gpu, token_embd, hp.memory != Memory::None) {
        gpu = gpu.and_then(|sum| bytes.and_then(|b| sum.checked_add(b)));
    }
    (gpu, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_type_names_parse() {
        for t in CacheType::ALL {
            assert_eq!(t.name().parse::<CacheType>(), Ok(t));
        }
        assert_eq!("Q8_0".parse::<CacheType>(), Ok(CacheType::Q8_0));
        assert!("q4_k".parse::<CacheType>().is_err());
    }

    #[test]
    fn offload_follows_llama_cpp_layer_rule() {
        // 28 layers, -ngl 10: layers 19..=27 and the output layer (28).
        let on: Vec<u32> = (0..=28).filter(|&il| layer_on_gpu(il, 28, 10)).collect();
        assert_eq!(on, (19..=28).collect::<Vec<_>>());
        assert_eq!(gpu_layers(28, None), 29);
        assert_eq!(gpu_layers(28, Some(-1)), 29);
        assert_eq!(gpu_layers(28, Some(999)), 29);
        assert!(!layer_on_gpu(27, 28, 0));
        assert!(layer_on_gpu(0, 28, 29));
    }

    #[test]
    fn tensor_names_map_to_layers() {
        assert_eq!(tensor_layer("blk.3.attn_q.weight", 28), TensorLayer::Layer(3));
        assert_eq!(tensor_layer("blk.28.attn_q.weight", 28), TensorLayer::Input);
        assert_eq!(tensor_layer("blk.x.attn_q.weight", 28), TensorLayer::Input);
        assert_eq!(tensor_layer("output.weight", 28), TensorLayer::Output);
        assert_eq!(tensor_layer("output_norm.weight", 28), TensorLayer::Output);
        assert_eq!(tensor_layer("token_embd.weight", 28), TensorLayer::Input);
    }
}
