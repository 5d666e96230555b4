//! llama.cpp's compute and output buffers.
//!
//! The compute buffer is what ggml's graph allocator (ggml/src/ggml-alloc.c,
//! `ggml_gallocr_reserve`) needs for the worst-case graph that
//! src/llama-context.cpp `sched_reserve` builds: a prompt batch of
//! `n_tokens = min(n_ctx, n_ubatch)` tokens over the whole KV cache, with
//! `n_outputs = min(n_tokens, n_outputs_max)` rows of logits. The allocator
//! reuses a tensor's memory once its last consumer has run, so the buffer is
//! the largest set of tensors alive at one moment, not their sum. For the
//! decoders modelled here that moment is one of three:
//!
//! - attention without flash attention: the scores `kq` (src/llama-graph.cpp
//!   `build_attn_mha`, `ggml_mul_mat(k, q)` then an in-place `soft_max_ext`),
//!   `n_kv x n_tokens x n_head` f32, beside the masks and the layer's
//!   activations;
//! - the feed-forward block (`build_ffn` / `build_moe_ffn`): gate, up and
//!   their product, `n_ff` wide each (for a mixture of experts
//!   `n_ff_exp x n_expert_used`), beside the residual stream;
//! - the output head: `n_vocab x n_outputs` f32 logits beside the normed
//!   hidden state they are read from.
//!
//! The KQ masks (`build_attn_inp_kq_mask`, one per cache: full and
//! sliding-window) are graph inputs alive through the last layer's
//! attention: `n_kv x n_tokens`, f16 with flash attention and f32 without.
//!
//! The activation widths per token (3 x n_embd + 3 x n_q + 2 x n_kv_dim
//! around the scores; 3 x n_ff + 5 x n_embd around the feed-forward) are
//! the live sets of those moments, checked against the server's own
//! `sched_reserve: CPU compute buffer size` line on the shapes of
//! tests/compute_matrix.rs (RELIABILITY.md has the errors per case). The
//! GPU backends keep fewer activations beside the scores
//! (`beside_scores`), measured on recorded CUDA, Vulkan and Metal lines
//! from public threads (tests/data/compute-captures).
//!
//! Two other graphs are modelled, fitted the same way on real shapes:
//!
//! - DeepSeek's multi-head latent attention in its absorbed form
//!   (src/models/deepseek2.cpp, `is_mla`): one latent KV head of
//!   `kv_lora_rank + rope` dims, the query absorbed into it per head, and
//!   without flash attention the latent V cache made contiguous
//!   (`build_attn_mha`'s `ggml_cont(ggml_transpose(v))`), which extends the
//!   buffer when it is larger than the hole the absorbed query leaves;
//! - Mamba-1 and Mamba-2 (src/models/graph-context-mamba.cpp
//!   `build_mamba_layer`, `build_mamba2_layer`): no attention; the live set
//!   at the selective scan is the layer's activations and every sequence's
//!   conv and SSM states.
//!
//! - Granite-4.0-H (src/models/granite-hybrid.cpp): the Mamba-2 scan in
//!   most layers, attention without RoPE in a few, experts in every one.
//!
//! Architectures whose graph differs (RWKV, the other hybrids, encoders,
//! vision towers, MLA in an older GGUF without the split `k_b`/`v_b`) get
//! `None`: unknown, not a guess.

use crate::backend::Backend;
use crate::hparams::{Hparams, Memory};
use crate::memory::{estimate, CacheKind, CacheType, EstimateError, KvSettings};
use crate::model::Model;
use crate::value::Value;

const F32: u64 = 4;
const F16: u64 = 2;

/// `-fa on|off|auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashAttn {
    On,
    Off,
    Auto,
}

impl FlashAttn {
    /// What `auto` becomes. src/llama-context.cpp `resolve_fused_ops`
    /// reserves a one-token graph and keeps flash attention when every
    /// layer's FLASH_ATTN_EXT node lands on the layer's own device, i.e.
    /// when the backend has the kernel: [`crate::flash_auto::resolve_auto`]'s rule for
    /// the backend, the model's head sizes and the cache types.
    pub fn resolve(self, model: &Model, backend: Backend, type_k: CacheType, type_v: CacheType) -> bool {
        match self {
            FlashAttn::On => true,
            FlashAttn::Off => false,
            FlashAttn::Auto => crate::flash_auto::resolve_auto(model, backend, type_k, type_v).on,
        }
    }
}

/// What the compute estimate needs beyond the KV settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSettings {
    pub backend: Backend,
    /// `-b`: the logical batch (llama.cpp's default 2048).
    pub n_batch: u32,
    /// Rows of logits the context reserves. `None`: llama-server's, one per
    /// sequence (tools/server sets `n_outputs_max` to the slot count);
    /// `Some(0)` is the library default, `n_batch` (llama-cli, older
    /// servers that reserved a logit row for every token of the batch).
    pub n_outputs_max: Option<u32>,
    /// `--embeddings`: the output buffer holds `n_embd` floats per output.
    pub embeddings: bool,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            backend: Backend::Cpu,
            n_batch: 2048,
            n_outputs_max: None,
            embeddings: false,
        }
    }
}

/// Which live set is the largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Peak {
    AttentionScores,
    /// Attention with flash attention, when its activations outweigh the
    /// feed-forward block's (latent attention's absorbed queries).
    Attention,
    FeedForward,
    /// A recurrent layer's selective scan with the sequences' states.
    StateScan,
    Logits,
}

/// The compute and output buffers of one context.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ComputeEstimate {
    pub backend: Backend,
    pub flash_attn: bool,
    /// Tokens of the reserved batch: `min(n_ctx, n_ubatch)`.
    pub n_tokens: u32,
    /// Logit rows of the reserved batch.
    pub n_outputs: u32,
    /// The device's compute buffer (`<dev> compute buffer size`); `None`
    /// when the architecture's graph is not modelled.
    pub compute_bytes: Option<u64>,
    /// The host-side compute buffer of a GPU backend (`CUDA_Host` etc.):
    /// the graph inputs, which ggml's scheduler places on the CPU, and the
    /// token embeddings looked up there. `Some(0)` on the CPU backend
    /// (everything is in `compute_bytes`).
    pub host_compute_bytes: Option<u64>,
    /// The output buffer (`output buffer size`), in host memory.
    pub output_bytes: Option<u64>,
    /// The terms of the compute buffer.
    pub masks_bytes: u64,
    pub attention_bytes: Option<u64>,
    /// A recurrent layer's selective scan beside the states (Mamba, and
    /// the Mamba-2 layers of Granite-4.0-H).
    pub scan_bytes: Option<u64>,
    pub feed_forward_bytes: Option<u64>,
    pub logits_bytes: Option<u64>,
    pub peak: Option<Peak>,
    /// Which term dominates, or why there is no estimate.
    pub why: String,
}

/// Activation widths of one layer, in floats per token.
struct Widths {
    n_embd: u64,
    n_head: u64,
    n_q: u64,
    n_kv_dim: u64,
    /// The widest feed-forward block: `n_ff`, or `n_ff_exp x n_expert_used`
    /// for a mixture of experts, or the leading dense blocks' `n_ff` where
    /// wider (DeepSeek's first layers).
    n_ff_active: u64,
    /// Experts used per token; 0 without experts.
    n_used: u64,
    n_vocab: Option<u64>,
    graph: Graph,
}

/// Which layer graph the widths are for.
#[derive(Clone, Copy)]
enum Graph {
    /// Attention and a feed-forward block (src/models/llama.cpp and kin).
    Decoder,
    /// Absorbed multi-head latent attention (src/models/deepseek2.cpp).
    Mla {
        /// `kv_lora_rank`: the latent V width and the cached K's first part.
        rank: u64,
        /// `key_length_mla`: a query head before absorption (nope + rope).
        head_k: u64,
        /// `rope.dimension_count`.
        rope: u64,
        /// `q_lora_rank`: the query goes through a LoRA (DeepSeek-V3, Kimi).
        q_lora: bool,
    },
    /// Mamba-1's and Mamba-2's selective scan.
    Mamba(Ssm),
    /// Granite-4.0-H (src/models/granite-hybrid.cpp): Mamba-2 layers and a
    /// few attention layers, each followed by experts beside a shared one
    /// (or a dense block).
    GraniteHybrid {
        ssm: Ssm,
        /// `rope.scaling.finetuned`: Granite-4.0-H turns RoPE off.
        rope: bool,
    },
}

/// A Mamba layer's widths (src/models/graph-context-mamba.cpp
/// `build_mamba_layer`, `build_mamba2_layer`).
#[derive(Clone, Copy)]
struct Ssm {
    /// `ssm.inner_size`.
    d_inner: u64,
    /// Floats a token beside 15/2 x d_inner: Mamba-2's B and C
    /// (6 x n_group x d_state) and a dt per head; 0 for Mamba-1.
    beside: u64,
    /// One sequence's conv state (`n_embd_r`) and SSM state (`n_embd_s`) of
    /// one layer, in floats (src/llama-hparams.cpp).
    r: u64,
    s: u64,
}

/// Architectures whose graph is the llama decoder (src/models/*.cpp):
/// attention, then a gated FFN or routed experts without a shared expert.
const MODELLED: &[&str] = &[
    "llama",
    "qwen2",
    "qwen3",
    "qwen3moe",
    "granite",
    "granitemoe",
    "gemma3",
    "mistral3",
];

/// A key the graph cannot be sized without.
fn required(model: &Model, arch: &str, suffix: &str) -> Result<u64, String> {
    key_u64(model, arch, suffix).ok_or_else(|| format!("{arch}.{suffix} is missing"))
}

fn key_u64(model: &Model, arch: &str, suffix: &str) -> Option<u64> {
    let v = model.metadata().get(&format!("{arch}.{suffix}"))?;
    match v.as_array() {
        Some(a) => a.values.as_ref()?.iter().filter_map(Value::as_u64).max(),
        None => v.as_u64(),
    }
}

/// Which graph `arch` builds, or why it is not modelled.
fn graph(model: &Model, hp: &Hparams, arch: &str) -> Result<Graph, String> {
    let need = |suffix: &str| required(model, arch, suffix);
    let not_modelled = || format!("the compute graph of architecture {arch:?} is not modelled");
    match arch {
        _ if MODELLED.contains(&arch) && hp.memory == Memory::Kv && !hp.is_mla => Ok(Graph::Decoder),
        // An older deepseek2 GGUF keeps `wkv_b` whole and llama.cpp runs it
        // as plain multi-head attention over decompressed K and V.
        "deepseek2" if hp.is_mla => Ok(Graph::Mla {
            rank: need("attention.kv_lora_rank")?,
            head_k: need("attention.key_length_mla")?,
            rope: need("rope.dimension_count")?,
            q_lora: key_u64(model, arch, "attention.q_lora_rank").unwrap_or(0) != 0,
        }),
        "deepseek2" => Err(format!(
            "{} (an older GGUF without multi-head latent attention's split k_b/v_b)",
            not_modelled()
        )),
        "mamba" | "mamba2" if hp.memory == Memory::Recurrent => Ok(Graph::Mamba(ssm(model, hp, arch)?)),
        "granitehybrid" if hp.memory == Memory::Hybrid => Ok(Graph::GraniteHybrid {
            ssm: ssm(model, hp, arch)?,
            rope: model
                .metadata()
                .get(&format!("{arch}.rope.scaling.finetuned"))
                .and_then(Value::as_bool)
                .unwrap_or(true),
        }),
        _ => Err(not_modelled()),
    }
}

/// The Mamba widths of `arch`: Mamba-1's, or Mamba-2's where the model has
/// groups (mamba2, the hybrids' SSM layers).
fn ssm(model: &Model, hp: &Hparams, arch: &str) -> Result<Ssm, String> {
    let need = |suffix: &str| required(model, arch, suffix);
    let state = hp
        .state
        .ok_or_else(|| format!("the recurrent state of architecture {arch:?} is not modelled"))?;
    let beside = match arch {
        "mamba" => 0,
        _ => need("ssm.group_count")?
            .saturating_mul(need("ssm.state_size")?)
            .saturating_mul(6)
            .saturating_add(need("ssm.time_step_rank")?),
    };
    Ok(Ssm {
        d_inner: need("ssm.inner_size")?,
        beside,
        r: state.r,
        s: state.s,
    })
}

fn widths(model: &Model, hp: &Hparams) -> Result<Widths, String> {
    let arch = model.metadata().get_str("general.architecture").unwrap_or("");
    let graph = graph(model, hp, arch)?;
    let need = |suffix: &str| required(model, arch, suffix);
    let n_embd = need("embedding_length")?;
    // Mamba has no heads and no feed-forward block.
    let attends = !matches!(graph, Graph::Mamba(_));
    let n_head = if attends { need("attention.head_count")? } else { 0 };
    let n_head_kv = u64::from(hp.n_head_kv.iter().copied().max().unwrap_or(0));
    let dense = || need("feed_forward_length");
    let n_used = match key_u64(model, arch, "expert_count").unwrap_or(0) {
        0 => 0,
        _ => need("expert_used_count")?,
    };
    let n_ff_active = match n_used {
        _ if !attends => 0,
        0 => dense()?,
        _ => {
            // Without an expert width of their own (Granite, Mixtral) the
            // experts are `feed_forward_length` wide.
            let experts = key_u64(model, arch, "expert_feed_forward_length")
                .map_or_else(dense, Ok)?
                .checked_mul(n_used)
                .ok_or_else(|| format!("{arch}: implausible expert widths"))?;
            // The shared experts (deepseek2's `ffn_*_shexp`) run after the
            // routed ones have been summed, so they do not add to the peak:
            // measured on test shapes with 2 and 4 shared experts.
            match key_u64(model, arch, "leading_dense_block_count").unwrap_or(0) {
                0 => experts,
                _ => experts.max(dense()?),
            }
        }
    };
    // The vocabulary is the token embedding's rows (src/llama-model.cpp
    // creates tok_embd as {n_embd, n_vocab}).
    let n_vocab = model
        .tensors()
        .iter()
        .find(|t| t.name == "token_embd.weight")
        .and_then(|t| t.dims.get(1).copied());
    // The header is outside input (discovery sizes the file any process
    // maps): widths no real model comes near are refused, so the products
    // below stay far inside u64 (the largest real ones are ~2^17).
    const MAX_WIDTH: u64 = 1 << 24;
    let w = Widths {
        n_embd,
        n_head,
        n_q: n_head.saturating_mul(u64::from(hp.head_k)),
        n_kv_dim: n_head_kv.saturating_mul(u64::from(hp.head_k.max(hp.head_v))),
        n_ff_active,
        n_used,
        n_vocab,
        graph,
    };
    let (graph_a, graph_b) = match graph {
        Graph::Decoder => (0, 0),
        Graph::Mla { rank, head_k, .. } => (rank, head_k),
        Graph::Mamba(ssm) | Graph::GraniteHybrid { ssm, .. } => {
            (ssm.d_inner.max(ssm.beside), ssm.r.saturating_add(ssm.s))
        }
    };
    let widest = [
        graph_a,
        graph_b,
        w.n_embd,
        w.n_head,
        w.n_q,
        w.n_kv_dim,
        w.n_ff_active,
        w.n_used,
        w.n_vocab.unwrap_or(0),
    ];
    if widest.iter().any(|&x| x > MAX_WIDTH) {
        return Err(format!("{arch}: implausible widths in the header (over {MAX_WIDTH})"));
    }
    Ok(w)
}

/// Estimates the compute and output buffers llama.cpp reserves for `model`.
pub fn compute(
    model: &Model,
    kv: &KvSettings,
    flash_attn: FlashAttn,
    batch: &BatchSettings,
) -> Result<ComputeEstimate, EstimateError> {
    let hp = model.hparams().map_err(|e| EstimateError::Model(e.to_string()))?;
    let fa = flash_attn.resolve(model, batch.backend, kv.type_k, kv.type_v);
    let kv_fa = KvSettings {
        flash_attn: fa,
        ..kv.clone()
    };
    let est = estimate(model, &kv_fa)?;
    let (n_tokens, n_outputs) = reserved_batch(est.kv.context, kv, batch);
    let t = u64::from(n_tokens);

    let mask_bytes = if fa { F16 } else { F32 };
    // Saturating: cells and tokens come from a process's settings, and a
    // sum past u64 is refused below as implausible.
    let attention_caches = || est.kv.caches.iter().filter(|c| c.kind != CacheKind::Recurrent);
    let masks_bytes: u64 = attention_caches()
        .map(|c| u64::from(c.cells).saturating_mul(t).saturating_mul(mask_bytes))
        .fold(0, u64::saturating_add);
    let n_kv_max = attention_caches().map(|c| u64::from(c.cells)).max().unwrap_or(0);

    let mut out = ComputeEstimate {
        backend: batch.backend,
        flash_attn: fa,
        n_tokens,
        n_outputs,
        compute_bytes: None,
        host_compute_bytes: None,
        output_bytes: None,
        masks_bytes,
        attention_bytes: None,
        scan_bytes: None,
        feed_forward_bytes: None,
        logits_bytes: None,
        peak: None,
        why: String::new(),
    };
    let w = match widths(model, hp) {
        Ok(w) => w,
        Err(why) => {
            out.why = why;
            return Ok(out);
        }
    };
    // src/llama-context.cpp `output_reserve`: logits (n_vocab) and
    // embeddings (n_embd) floats for max(n_outputs_max, n_seq_max) rows;
    // at construction it is called with n_seq_max.
    let output_rows = u64::from(kv.n_seq);
    let output_width = w.n_vocab.map(|v| v + if batch.embeddings { w.n_embd } else { 0 });
    out.output_bytes = output_width.map(|width| width * output_rows * F32);

    let shape = ReservedBatch {
        n_kv: n_kv_max,
        n_tokens: t,
        n_seq: u64::from(kv.n_seq.max(1)),
        masks_bytes,
        flash_attn: fa,
        // The latent V cache's element size (the K cache's type: MLA keeps
        // V inside K), for its contiguous copy.
        v_cont_bytes_per_cell: kv.type_k.ggml_type().row_bytes(match w.graph {
            Graph::Mla { rank, .. } => rank,
            _ => 0,
        }),
    };
    let Some(moments) = layer_peaks(&w, batch.backend, &shape) else {
        out.why = "implausible settings: the graph's buffers would pass 2^64 bytes".into();
        return Ok(out);
    };
    // The output head (`build_inp_out_ids` prunes the last layer to the
    // n_outputs rows, then `result_norm` and `result_output`): the logits
    // beside the normed hidden state they are read from. The masks are
    // freed by then (ggml-alloc.c frees a tensor after its last consumer,
    // the last layer's attention). Checked on four GPU captures, three of
    // them byte-exact (tests/data/compute-captures).
    let logits = w.n_vocab.map(|v| (v + w.n_embd) * u64::from(n_outputs) * F32);
    out.attention_bytes = moments.attention;
    out.scan_bytes = moments.scan;
    out.feed_forward_bytes = Some(moments.feed_forward);
    out.logits_bytes = logits;

    let Some(logits) = logits else {
        out.why = "the vocabulary size (token_embd.weight) is unknown".into();
        return Ok(out);
    };
    let (peak, bytes) = largest(&moments, fa, logits);
    out.compute_bytes = Some(bytes);
    out.peak = Some(peak);
    // ggml's scheduler places graph inputs on the last backend, the CPU
    // (ggml-backend.cpp `ggml_backend_sched_backend_id_from_cur`), and the
    // token embeddings are looked up there (tok_embd stays on the CPU):
    // the host buffer holds the masks and the n_embd x n_tokens lookup.
    out.host_compute_bytes = Some(match batch.backend {
        Backend::Cpu => 0,
        _ => masks_bytes.saturating_add(t * w.n_embd * F32),
    });
    out.why = why(peak, &w, n_kv_max, n_tokens, n_outputs, fa);
    if batch.backend != Backend::Cpu && !matches!(w.graph, Graph::Decoder) {
        out.why
            .push_str("; taken from the CPU backend's live set (no GPU capture of this graph)");
    }
    Ok(out)
}

/// The reserved batch's tokens and logit rows. src/llama-context.cpp:
/// n_batch = min(n_ctx, n_batch) for causal models, n_ubatch = min(n_batch,
/// n_ubatch); sched_reserve takes n_tokens = min(n_ctx, n_ubatch) and
/// n_outputs = min(n_tokens, n_outputs_max).
fn reserved_batch(n_ctx: u32, kv: &KvSettings, batch: &BatchSettings) -> (u32, u32) {
    let n_batch = batch.n_batch.max(1).min(n_ctx);
    let n_tokens = kv.n_ubatch.max(1).min(n_batch);
    let n_outputs_max = match batch.n_outputs_max {
        None => kv.n_seq,
        Some(0) => n_batch,
        Some(n) => n,
    };
    (n_tokens, n_tokens.min(n_outputs_max))
}

/// The largest of the moments, and which it is.
fn largest(m: &Moments, fa: bool, logits: u64) -> (Peak, u64) {
    let attention_peak = if fa { Peak::Attention } else { Peak::AttentionScores };
    [
        m.attention.map(|b| (attention_peak, b)),
        m.scan.map(|b| (Peak::StateScan, b)),
        Some((Peak::FeedForward, m.feed_forward)),
        Some((Peak::Logits, logits)),
    ]
    .into_iter()
    .flatten()
    .max_by_key(|&(_, b)| b)
    .unwrap_or((Peak::FeedForward, m.feed_forward))
}

/// The reserved graph's sizes that the live sets depend on.
struct ReservedBatch {
    /// The largest cache's cells.
    n_kv: u64,
    n_tokens: u64,
    /// Sequences: each has its own recurrent state.
    n_seq: u64,
    masks_bytes: u64,
    flash_attn: bool,
    /// `None` when the cache type has no row size for the latent width.
    v_cont_bytes_per_cell: Option<u64>,
}

/// The live sets of a layer's moments, in bytes.
struct Moments {
    /// At the attention; `None` for a graph without attention.
    attention: Option<u64>,
    /// At a recurrent layer's scan; `None` for a graph without one.
    scan: Option<u64>,
    /// At the feed-forward block (0 for Mamba, which has none).
    feed_forward: u64,
}

/// The live sets at the attention, at a recurrent layer's scan and at the
/// feed-forward block. In u128: n_kv and t are each below 2^32 and the
/// widths below 2^24 (`widths`), so no product overflows; a total past u64
/// is no real configuration (its settings are a process's argv): None.
fn layer_peaks(w: &Widths, backend: Backend, b: &ReservedBatch) -> Option<Moments> {
    if b.masks_bytes == u64::MAX {
        return None; // saturated
    }
    let (n_kv, t, f32, masks) = (
        u128::from(b.n_kv),
        u128::from(b.n_tokens),
        u128::from(F32),
        u128::from(b.masks_bytes),
    );
    let scores = if b.flash_attn {
        0
    } else {
        n_kv * t * u128::from(w.n_head) * f32
    };
    let beside = |floats: u64| scores + t * u128::from(floats) * f32 + masks;
    let attention = match w.graph {
        Graph::Decoder => Some(beside(beside_scores(backend, w))),
        // Without RoPE the query is not copied once more (3 x n_q less
        // one): Granite-4.0-H-Tiny's attention layers, within 0.01 MiB.
        Graph::GraniteHybrid { rope, .. } => {
            let unroped = if rope { 0 } else { w.n_q };
            Some(beside(beside_scores(backend, w).saturating_sub(unroped)))
        }
        Graph::Mla { rank, head_k, rope, .. } => {
            // Fitted on the real server (tests/compute_matrix.rs and the
            // shapes of RELIABILITY.md): the residual stream and its norms
            // (5 x n_embd), per head the absorbed query and the `kqv` product
            // in the latent width (2 x rank) beside the query head before
            // absorption (nope + rope), and 16 floats per rope dim.
            let mut bytes = beside(5 * w.n_embd + w.n_head * (2 * rank + head_k) + 16 * rope);
            if !b.flash_attn {
                // The contiguous copy of the latent V goes where the absorbed
                // query (n_head x rank x t floats) was freed, when it fits.
                let v_cont = n_kv * u128::from(b.v_cont_bytes_per_cell?);
                if v_cont > u128::from(w.n_head) * u128::from(rank) * t * f32 {
                    bytes += v_cont;
                }
            }
            Some(bytes)
        }
        Graph::Mamba(_) => None,
    };
    let scan = match w.graph {
        Graph::Mamba(ssm) => Some(scan_bytes(ssm, b)),
        // The masks are graph inputs alive through the last attention layer.
        Graph::GraniteHybrid { ssm, .. } => Some(scan_bytes(ssm, b) + masks),
        _ => None,
    };
    let feed_forward = match w.graph {
        Graph::Mamba(_) => 0,
        // Granite-4.0-H's experts: the down projections of every expert used
        // and their weighted copy, n_embd each (`build_moe_ffn`), beside the
        // residual stream; measured on its shape and on 3 to 8 experts used.
        Graph::GraniteHybrid { .. } if w.n_used > 0 => {
            t * u128::from((3 * w.n_ff_active).max(2 * w.n_embd * w.n_used) + 5 * w.n_embd) * f32 + masks
        }
        _ => t * u128::from(3 * w.n_ff_active + 5 * w.n_embd) * f32 + masks,
    };
    let fits = |v: Option<u128>| v.map(u64::try_from).transpose().ok();
    Some(Moments {
        attention: fits(attention)?,
        scan: fits(scan)?,
        feed_forward: u64::try_from(feed_forward).ok()?,
    })
}

/// `ssm_scan` with its inputs: 15/2 x d_inner floats a token (and Mamba-2's
/// `beside`), fitted on the real server at d_inner 1536 and 2048 (llama.cpp
/// loads Mamba-1 and Mamba-2 with d_inner = 2 x n_embd only, so n_embd's
/// share cannot be told apart), with each sequence's states gathered for the
/// layer (`build_rs`).
fn scan_bytes(ssm: Ssm, b: &ReservedBatch) -> u128 {
    let (t, f32) = (u128::from(b.n_tokens), u128::from(F32));
    let (d_inner, n_seq) = (u128::from(ssm.d_inner), u128::from(b.n_seq));
    let mut bytes =
        t * (d_inner * 15 / 2 + u128::from(ssm.beside)) * f32 + n_seq * (u128::from(ssm.r) + u128::from(ssm.s)) * f32;
    // The scan's new SSM states beyond the first sequence's go where its
    // t x d_inner output was freed, when they fit (measured on 1 to 16
    // sequences, `-ub` 128 to 2048).
    let later_states = n_seq.saturating_sub(1) * u128::from(ssm.s) * f32;
    if later_states > t * d_inner * f32 {
        bytes += later_states;
    }
    bytes
}

/// Floats per token alive beside the attention scores (the layer's
/// activations at `soft_max_ext` and the `kqv` product that follows).
///
/// On the CPU backend: the residual, the normed input and the attention
/// output (3 x n_embd), Q before and after RoPE and the `kqv` result
/// (3 x n_q), and the new K and V rows (2 x n_kv_dim), fitted on the real
/// server's `sched_reserve` lines (tests/compute_matrix.rs). On the GPU
/// backends the recorded captures show a smaller set, 2 x n_embd + 2 x n_q:
/// byte-exact on CUDA Mistral-7B at -c 2048 and -c 32768
/// (fedora-copr/logdetective#106), and within 4 KiB on Vulkan
/// Qwen3-30B-A3B at -c 70000 (ggml-org/llama.cpp#15009) given that build's
/// 70016 cells. Those builds are older (2025) than the
/// CPU matrix's, so part of the difference may be the version, not the
/// backend; Metal has no capture where the scores dominate and takes the
/// GPU form unchecked.
fn beside_scores(backend: Backend, w: &Widths) -> u64 {
    match backend {
        Backend::Cpu => 3 * w.n_embd + 3 * w.n_q + 2 * w.n_kv_dim,
        Backend::Cuda | Backend::Vulkan | Backend::Metal => 2 * w.n_embd + 2 * w.n_q,
    }
}

fn why(peak: Peak, w: &Widths, n_kv: u64, n_tokens: u32, n_outputs: u32, fa: bool) -> String {
    let what = match peak {
        Peak::AttentionScores => format!(
            "attention scores dominate: {n_kv} cells x {n_tokens} tokens x {} heads in f32 (flash attention off)",
            w.n_head
        ),
        Peak::Attention => format!(
            "the attention's activations dominate: {} heads' absorbed queries x {n_tokens} tokens (flash attention keeps the scores out)",
            w.n_head
        ),
        Peak::FeedForward if matches!(w.graph, Graph::GraniteHybrid { .. }) && 2 * w.n_embd * w.n_used > 3 * w.n_ff_active => {
            format!(
                "the experts' outputs dominate: {} experts x {} wide x {n_tokens} tokens",
                w.n_used, w.n_embd
            )
        }
        Peak::FeedForward => format!(
            "the feed-forward block dominates: {} wide x {n_tokens} tokens{}",
            w.n_ff_active,
            if fa {
                " (flash attention keeps the scores out)"
            } else {
                ""
            }
        ),
        Peak::StateScan => format!("the selective scan dominates: its activations x {n_tokens} tokens and every sequence's state"),
        Peak::Logits => format!(
            "the logits dominate: {} tokens of vocabulary x {n_outputs} outputs in f32",
            w.n_vocab.unwrap_or(0)
        ),
    };
    match w.graph {
        Graph::Decoder => what,
        // Measured on test shapes (RELIABILITY.md): the q LoRA's own
        // intermediates added 0 to 4096 floats a token the fit does not hold.
        Graph::Mla { q_lora: true, .. } => {
            format!("{what}; the q LoRA's intermediates are not modelled (the server reserved up to 9% more on test shapes)")
        }
        Graph::Mla { .. } | Graph::Mamba(_) | Graph::GraniteHybrid { .. } => what,
    }
}
