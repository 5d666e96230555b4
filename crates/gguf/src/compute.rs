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
//! Architectures whose graph differs (recurrent, hybrid, MLA, encoders,
//! vision towers, shared experts) get `None`: unknown, not a guess.

use crate::hparams::{Hparams, Memory};
use crate::memory::{estimate, EstimateError, KvSettings};
use crate::model::Model;
use crate::value::Value;

const F32: u64 = 4;
const F16: u64 = 2;

/// The backend whose compute buffer is estimated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Backend {
    Cpu,
    Cuda,
    Vulkan,
    Metal,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Vulkan => "vulkan",
            Backend::Metal => "metal",
        }
    }

    /// The name llama.cpp gives the first device's buffers in its log.
    pub fn buffer_name(self) -> &'static str {
        match self {
            Backend::Cpu => "CPU",
            Backend::Cuda => "CUDA0",
            Backend::Vulkan => "Vulkan0",
            Backend::Metal => "MTL0",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(Backend::Cpu),
            "cuda" => Ok(Backend::Cuda),
            "vulkan" => Ok(Backend::Vulkan),
            "metal" => Ok(Backend::Metal),
            _ => Err(format!("unknown backend {s:?} (cpu, cuda, vulkan or metal)")),
        }
    }
}

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
    /// when the backend has the kernel. On the CPU it does (the server logs
    /// "Flash Attention enabled", checked by tests/compute_matrix.rs); for
    /// CUDA, Metal and Vulkan current builds have kernels for the head
    /// sizes of the architectures modelled here, so `auto` is taken as on
    /// there too (unchecked: no GPU here; older Vulkan builds had none).
    pub fn resolve(self, _backend: Backend) -> bool {
        !matches!(self, FlashAttn::Off)
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
    FeedForward,
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
    /// `n_ff`, or `n_ff_exp x n_expert_used` for a mixture of experts.
    n_ff_active: u64,
    n_vocab: Option<u64>,
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

fn key_u64(model: &Model, arch: &str, suffix: &str) -> Option<u64> {
    let v = model.metadata().get(&format!("{arch}.{suffix}"))?;
    match v.as_array() {
        Some(a) => a.values.as_ref()?.iter().filter_map(Value::as_u64).max(),
        None => v.as_u64(),
    }
}

fn widths(model: &Model, hp: &Hparams) -> Result<Widths, String> {
    let arch = model.metadata().get_str("general.architecture").unwrap_or("");
    if !MODELLED.contains(&arch) || hp.memory != Memory::Kv || hp.is_mla {
        return Err(format!("the compute graph of architecture {arch:?} is not modelled"));
    }
    let need = |suffix: &str| key_u64(model, arch, suffix).ok_or_else(|| format!("{arch}.{suffix} is missing"));
    let n_embd = need("embedding_length")?;
    let n_head = need("attention.head_count")?;
    let n_head_kv = u64::from(hp.n_head_kv.iter().copied().max().unwrap_or(0));
    let n_ff_active = match key_u64(model, arch, "expert_count").unwrap_or(0) {
        0 => need("feed_forward_length")?,
        _ => need("expert_feed_forward_length")?
            .checked_mul(need("expert_used_count")?)
            .ok_or_else(|| format!("{arch}: implausible expert widths"))?,
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
        n_vocab,
    };
    let widest = [
        w.n_embd,
        w.n_head,
        w.n_q,
        w.n_kv_dim,
        w.n_ff_active,
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
    let fa = flash_attn.resolve(batch.backend);
    let kv_fa = KvSettings {
        flash_attn: fa,
        ..kv.clone()
    };
    let est = estimate(model, &kv_fa)?;
    // src/llama-context.cpp: n_batch = min(n_ctx, n_batch) for causal
    // models, n_ubatch = min(n_batch, n_ubatch); sched_reserve takes
    // n_tokens = min(n_ctx, n_ubatch) and n_outputs = min(n_tokens, n_outputs_max).
    let n_ctx = est.kv.context;
    let n_batch = batch.n_batch.max(1).min(n_ctx);
    let n_tokens = kv.n_ubatch.max(1).min(n_batch);
    let n_outputs_max = match batch.n_outputs_max {
        None => kv.n_seq,
        Some(0) => n_batch,
        Some(n) => n,
    };
    let n_outputs = n_tokens.min(n_outputs_max);
    let t = u64::from(n_tokens);

    let mask_bytes = if fa { F16 } else { F32 };
    // Saturating: cells and tokens come from a process's settings, and a
    // sum past u64 is refused below as implausible.
    let masks_bytes: u64 = est
        .kv
        .caches
        .iter()
        .map(|c| u64::from(c.cells).saturating_mul(t).saturating_mul(mask_bytes))
        .fold(0, u64::saturating_add);
    let n_kv_max = est.kv.caches.iter().map(|c| u64::from(c.cells)).max().unwrap_or(0);

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

    let Some((attention, feed_forward)) = layer_peaks(&w, batch.backend, (n_kv_max, t), masks_bytes, fa) else {
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
    out.attention_bytes = Some(attention);
    out.feed_forward_bytes = Some(feed_forward);
    out.logits_bytes = logits;

    let Some(logits) = logits else {
        out.why = "the vocabulary size (token_embd.weight) is unknown".into();
        return Ok(out);
    };
    let (peak, bytes) = [
        (Peak::AttentionScores, attention),
        (Peak::FeedForward, feed_forward),
        (Peak::Logits, logits),
    ]
    .into_iter()
    .max_by_key(|&(_, b)| b)
    .unwrap_or((Peak::FeedForward, feed_forward));
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
    Ok(out)
}

/// The live sets at the attention and at the feed-forward block, in bytes.
/// In u128: n_kv and t are each below 2^32 and the widths below 2^24
/// (`widths`), so no product overflows; a total past u64 is no real
/// configuration (its settings are a process's argv): None.
fn layer_peaks(w: &Widths, backend: Backend, (n_kv, t): (u64, u64), masks_bytes: u64, fa: bool) -> Option<(u64, u64)> {
    if masks_bytes == u64::MAX {
        return None; // saturated
    }
    let (t, f32, masks) = (u128::from(t), u128::from(F32), u128::from(masks_bytes));
    let scores = if fa {
        0
    } else {
        u128::from(n_kv) * t * u128::from(w.n_head) * f32
    };
    let attention = scores + t * u128::from(beside_scores(backend, w)) * f32 + masks;
    let feed_forward = t * u128::from(3 * w.n_ff_active + 5 * w.n_embd) * f32 + masks;
    Some((u64::try_from(attention).ok()?, u64::try_from(feed_forward).ok()?))
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
    match peak {
        Peak::AttentionScores => format!(
            "attention scores dominate: {n_kv} cells x {n_tokens} tokens x {} heads in f32 (flash attention off)",
            w.n_head
        ),
        Peak::FeedForward => format!(
            "the feed-forward block dominates: {} wide x {n_tokens} tokens{}",
            w.n_ff_active,
            if fa {
                " (flash attention keeps the scores out)"
            } else {
                ""
            }
        ),
        Peak::Logits => format!(
            "the logits dominate: {} tokens of vocabulary x {n_outputs} outputs in f32",
            w.n_vocab.unwrap_or(0)
        ),
    }
}
