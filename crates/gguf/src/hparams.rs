//! The hyperparameters the memory math needs, read from the metadata the way
//! llama.cpp reads them (src/llama-model.cpp `load_hparams` and the per-arch
//! cases, src/llama-hparams.cpp for the per-layer helpers, src/llama-arch.cpp
//! for the architecture lists).

use crate::value::{Metadata, Value};

/// llama.cpp's LLAMA_MAX_LAYERS: per-layer arrays are this long at most.
pub(crate) const MAX_LAYERS: u32 = 512;

/// Architectures whose context has no KV cache at all
/// (src/llama-model.cpp `create_memory`: `res = nullptr`).
pub(crate) const NO_KV_ARCHS: &[&str] = &[
    "bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "eurobert",
    "modern-bert",
    "gemma-embedding",
    "wavtokenizer-dec",
    "dream",
    "llada",
    "llada-moe",
    "rnd1",
];

/// src/llama-arch.cpp `llm_arch_is_recurrent`.
pub(crate) const RECURRENT_ARCHS: &[&str] = &["mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"];

/// src/llama-arch.cpp `llm_arch_is_hybrid`.
pub(crate) const HYBRID_ARCHS: &[&str] = &[
    "jamba",
    "falcon-h1",
    "plamo2",
    "granitehybrid",
    "lfm2",
    "lfm2moe",
    "nemotron_h",
    "nemotron_h_moe",
    "qwen3next",
    "kimi-linear",
    "qwen35",
    "qwen35moe",
];

/// Which memory llama.cpp creates for the model (`llama_model::create_memory`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memory {
    /// No memory module: encoders, diffusion models.
    None,
    /// `llama_kv_cache`, or `llama_kv_cache_iswa` when some layers slide.
    Kv,
    /// `llama_memory_recurrent` only.
    Recurrent,
    /// `llama_memory_hybrid`: a KV cache for the attention layers and a
    /// recurrent state for the others.
    Hybrid,
}

/// Per-layer sizes of the recurrent state, in f32 elements per cell
/// (src/llama-hparams.cpp `n_embd_r`, `n_embd_s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StateWidths {
    pub r: u64,
    pub s: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct Hparams {
    pub n_layer: u32,
    pub n_ctx_train: Option<u32>,
    pub n_head_kv: Vec<u32>,
    pub head_k: u32,
    pub head_v: u32,
    pub head_k_swa: u32,
    pub head_v_swa: u32,
    /// Sliding window; 0 when no layer slides.
    pub n_swa: u32,
    pub swa_layers: Vec<bool>,
    /// Layers at or after this index have no KV of their own.
    pub n_layer_kv_from_start: u32,
    /// Multi-head latent attention: only K is cached.
    pub is_mla: bool,
    pub memory: Memory,
    /// Layers with an attention KV cache (before `has_kv`).
    pub attention_layers: Vec<bool>,
    /// Layers with a recurrent state.
    pub recurrent_layers: Vec<bool>,
    /// `None` when the state size of this architecture is not known here.
    pub state: Option<StateWidths>,
}

/// Reads `{arch}.*` keys.
struct Keys<'a> {
    meta: &'a Metadata,
    arch: &'a str,
}

impl Keys<'_> {
    fn get(&self, suffix: &str) -> Option<&Value> {
        self.meta.get(&format!("{}.{}", self.arch, suffix))
    }

    fn u32(&self, suffix: &str) -> Result<Option<u32>, String> {
        match self.get(suffix) {
            None => Ok(None),
            Some(v) => v
                .as_u32()
                .map(Some)
                .ok_or_else(|| format!("{}.{} is not a u32 ({:?})", self.arch, suffix, v)),
        }
    }

    fn required_u32(&self, suffix: &str) -> Result<u32, String> {
        self.u32(suffix)?
            .ok_or_else(|| format!("{}.{} is missing", self.arch, suffix))
    }

    /// A head size key, checked with [`plausible_head_size`].
    fn head_size(&self, suffix: &str) -> Result<Option<u32>, String> {
        self.u32(suffix)?
            .map(|v| plausible_head_size(|| format!("{}.{suffix}", self.arch), v))
            .transpose()
    }

    /// A scalar for every layer or an array with one element per layer, as
    /// llama.cpp's `get_key_or_arr` accepts.
    fn per_layer(&self, suffix: &str, n_layer: u32) -> Result<Option<Vec<u32>>, String> {
        self.per_layer_with(suffix, n_layer, Value::as_u32)
    }

    fn per_layer_bool(&self, suffix: &str, n_layer: u32) -> Result<Option<Vec<bool>>, String> {
        self.per_layer_with(suffix, n_layer, Value::as_bool)
    }

    fn per_layer_with<T: Clone>(
        &self,
        suffix: &str,
        n_layer: u32,
        convert: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<Vec<T>>, String> {
        let key = || format!("{}.{}", self.arch, suffix);
        let Some(value) = self.get(suffix) else {
            return Ok(None);
        };
        if let Some(v) = convert(value) {
            return Ok(Some(vec![v; n_layer as usize]));
        }
        let array = value
            .as_array()
            .ok_or_else(|| format!("{} has an unexpected type", key()))?;
        if array.len != u64::from(n_layer) {
            return Err(format!(
                "{} has {} elements, expected one per layer ({n_layer})",
                key(),
                array.len
            ));
        }
        let values = array
            .values
            .as_ref()
            .ok_or_else(|| format!("{} was too large to keep", key()))?;
        values
            .iter()
            .map(|v| convert(v).ok_or_else(|| format!("{} has an element of unexpected type", key())))
            .collect::<Result<Vec<T>, String>>()
            .map(Some)
    }
}

/// The largest head size taken as real. llama.cpp has no such limit, but
/// its largest heads are 576 (DeepSeek MLA's K) and 512 (Gemma 4's global
/// layers), and ggml's flash-attention kernels go no higher
/// (ggml/src/ggml-cuda/fattn.cu); a header claiming more is broken or
/// hostile, and its KV sizes would be petabytes shown as facts.
const MAX_HEAD_SIZE: u32 = 65536;

fn plausible_head_size(key: impl Fn() -> String, value: u32) -> Result<u32, String> {
    if value > MAX_HEAD_SIZE {
        return Err(format!(
            "{} = {value} is not a plausible head size (at most {MAX_HEAD_SIZE})",
            key()
        ));
    }
    Ok(value)
}

/// Layer `il` slides for period `p` (src/llama-hparams.cpp `set_swa_pattern`):
/// the last layer of each period is full; with `dense_first` the first is.
fn swa_period(n_layer: u32, p: u32, dense_first: bool) -> Vec<bool> {
    (0..n_layer)
        .map(|il| {
            if p == 0 {
                true
            } else if dense_first {
                il % p != 0
            } else {
                il % p < p - 1
            }
        })
        .collect()
}

/// The attention heads, each read on its own: [`crate::ModelInfo`] shows
/// the ones that are good even when another key (or the rest of the
/// hyperparameters) is bad.
pub(crate) struct Heads {
    pub n_head: Result<Vec<u32>, String>,
    pub n_head_kv: Result<Vec<u32>, String>,
    pub head_k: Result<u32, String>,
    pub head_v: Result<u32, String>,
}

impl Heads {
    /// The heads of a file whose architecture, block count (at most
    /// llama.cpp's limit) and embedding length are readable.
    pub fn from_metadata(meta: &Metadata) -> Option<Heads> {
        let keys = Keys {
            meta,
            arch: meta.get_str("general.architecture")?,
        };
        let n_layer = keys.u32("block_count").ok()??;
        let n_embd = keys.u32("embedding_length").ok()??;
        (n_layer <= MAX_LAYERS).then(|| Heads::read(&keys, n_layer, n_embd))
    }

    fn read(keys: &Keys, n_layer: u32, n_embd: u32) -> Heads {
        let n_head = keys
            .per_layer("attention.head_count", n_layer)
            .map(|h| h.unwrap_or_else(|| vec![0; n_layer as usize]));
        // head_count_kv is optional and defaults to head_count.
        let n_head_kv = match keys.per_layer("attention.head_count_kv", n_layer) {
            Ok(Some(h)) => Ok(h),
            Ok(None) => n_head.clone(),
            Err(e) => Err(e),
        };
        // Head sizes default to n_embd / n_head of layer 0; models without
        // attention heads have none (src/llama-model.cpp load_hparams).
        let arch = keys.arch;
        let default = n_head.as_ref().map_err(Clone::clone).and_then(|h| {
            match n_embd.checked_div(h.first().copied().unwrap_or(0)) {
                Some(d) => plausible_head_size(|| format!("{arch}.embedding_length / {arch}.attention.head_count"), d)
                    .map(Some),
                None => Ok(None),
            }
        });
        let size = |suffix: &str| match default.clone()? {
            Some(d) => Ok(keys.head_size(suffix)?.unwrap_or(d)),
            None => Ok(0),
        };
        Heads {
            head_k: size("attention.key_length"),
            head_v: size("attention.value_length"),
            n_head,
            n_head_kv,
        }
    }
}

impl Hparams {
    /// Reads the hyperparameters; the error says which key is missing or bad.
    pub fn from_metadata(meta: &Metadata) -> Result<Hparams, String> {
        let arch = meta
            .get_str("general.architecture")
            .ok_or("general.architecture is missing")?;
        let keys = Keys { meta, arch };

        let n_layer = keys.required_u32("block_count")?;
        if n_layer > MAX_LAYERS {
            return Err(format!(
                "{arch}.block_count = {n_layer} is over llama.cpp's limit of {MAX_LAYERS} layers"
            ));
        }
        let n_embd = keys.required_u32("embedding_length")?;
        let n_ctx_train = keys.u32("context_length")?;
        let heads = Heads::read(&keys, n_layer, n_embd);
        heads.n_head?;
        let n_head_kv = heads.n_head_kv?;
        let (head_k, head_v) = (heads.head_k?, heads.head_v?);
        let n_ff = keys
            .per_layer("feed_forward_length", n_layer)?
            .unwrap_or_else(|| vec![0; n_layer as usize]);

        let head_k_swa = keys.head_size("attention.key_length_swa")?.unwrap_or(head_k);
        let head_v_swa = keys.head_size("attention.value_length_swa")?.unwrap_or(head_v);

        let (n_swa, swa_layers) = sliding_window(&keys, n_layer)?;

        let nextn = keys.u32("nextn_predict_layers")?.unwrap_or(0);
        let n_layer_kv_from_start = match arch {
            // gemma3n: layers from 20 on reuse the KV of layers 18 and 19.
            "gemma3n" => 20.min(n_layer),
            _ => {
                let shared = keys.u32("attention.shared_kv_layers")?.unwrap_or(0);
                n_layer.saturating_sub(shared).saturating_sub(nextn)
            }
        };

        let is_mla = keys.u32("attention.key_length_mla")?.unwrap_or(0) != 0
            && keys.u32("attention.value_length_mla")?.unwrap_or(0) != 0;

        let memory = if NO_KV_ARCHS.contains(&arch) {
            Memory::None
        } else if RECURRENT_ARCHS.contains(&arch) {
            Memory::Recurrent
        } else if HYBRID_ARCHS.contains(&arch) {
            Memory::Hybrid
        } else {
            Memory::Kv
        };

        let (attention_layers, recurrent_layers) = match memory {
            Memory::None => (vec![false; n_layer as usize], vec![false; n_layer as usize]),
            Memory::Kv => (vec![true; n_layer as usize], vec![false; n_layer as usize]),
            Memory::Recurrent => (vec![false; n_layer as usize], vec![true; n_layer as usize]),
            Memory::Hybrid => hybrid_layers(&keys, &n_head_kv, &n_ff)?,
        };

        let state = if recurrent_layers.iter().any(|&r| r) {
            state_widths(&keys, n_embd)?
        } else {
            Some(StateWidths { r: 0, s: 0 })
        };

        Ok(Hparams {
            n_layer,
            n_ctx_train,
            n_head_kv,
            head_k,
            head_v,
            head_k_swa,
            head_v_swa,
            n_swa,
            swa_layers,
            n_layer_kv_from_start,
            is_mla,
            memory,
            attention_layers,
            recurrent_layers,
            state,
        })
    }

    /// src/llama-hparams.cpp `is_swa`.
    pub fn is_swa(&self, il: u32) -> bool {
        self.swa_layers.get(il as usize).copied().unwrap_or(false)
    }

    /// src/llama-hparams.cpp `has_kv`.
    pub fn has_kv(&self, il: u32) -> bool {
        il < self.n_layer_kv_from_start
    }

    fn n_head_kv(&self, il: u32) -> u64 {
        u64::from(self.n_head_kv.get(il as usize).copied().unwrap_or(0))
    }

    /// src/llama-hparams.cpp `n_embd_k_gqa`: K head size (the `_swa` one on
    /// sliding layers) times the layer's KV heads.
    pub fn n_embd_k_gqa(&self, il: u32) -> u64 {
        let head = if self.is_swa(il) { self.head_k_swa } else { self.head_k };
        u64::from(head) * self.n_head_kv(il)
    }

    /// src/llama-hparams.cpp `n_embd_v_gqa`.
    pub fn n_embd_v_gqa(&self, il: u32) -> u64 {
        let head = if self.is_swa(il) { self.head_v_swa } else { self.head_v };
        u64::from(head) * self.n_head_kv(il)
    }

    /// src/llama-hparams.cpp `n_embd_v_gqa_max`: the widest V of any layer.
    pub fn n_embd_v_gqa_max(&self) -> u64 {
        (0..self.n_layer).map(|il| self.n_embd_v_gqa(il)).max().unwrap_or(0)
    }
}

/// The sliding window and which layers use it, per architecture as
/// src/llama-model.cpp `load_hparams` sets them.
fn sliding_window(keys: &Keys, n_layer: u32) -> Result<(u32, Vec<bool>), String> {
    let none = (0, vec![false; n_layer as usize]);
    let window = keys.u32("attention.sliding_window")?;
    let positive = window.filter(|&w| w > 0);
    let period = |p| swa_period(n_layer, p, false);
    Ok(match keys.arch {
        // gemma 2 defaults the window to 4096.
        "gemma2" => (window.unwrap_or(4096), period(2)),
        "gpt-oss" => (keys.required_u32("attention.sliding_window")?, period(2)),
        "cohere2" => (keys.required_u32("attention.sliding_window")?, period(4)),
        "gemma3n" => (keys.required_u32("attention.sliding_window")?, period(5)),
        // gemma 3 slides only when the file has a window (1B has none).
        "gemma3" => positive.map_or(none, |w| (w, period(6))),
        "olmo2" | "exaone4" | "exaone-moe" | "afmoe" => positive.map_or(none, |w| (w, period(4))),
        "smallthinker" => positive.map_or(none, |w| (w, swa_period(n_layer, 4, true))),
        // llama 4: chunked attention, 3 chunked layers then 1 full, chunk
        // 8192, unless the file sets the window to 0.
        "llama4" => {
            if window == Some(0) {
                none
            } else {
                (8192, period(4))
            }
        }
        // gemma 4 and newer architectures ship the pattern: a per-layer bool
        // array (true = sliding) or one bool for all layers, both read with
        // get_key_or_arr into swa_layers, or a period (src/llama-model.cpp
        // reads it into a uint32_t; like every u32 key here, any integer
        // type is taken). The integer case is tried first: the bool reader
        // would call it an unexpected type.
        _ => match positive {
            None => none,
            Some(w) => {
                const KEY: &str = "attention.sliding_window_pattern";
                let is_integer = keys
                    .get(KEY)
                    .is_some_and(|v| v.as_i64().is_some() || v.as_u64().is_some());
                if is_integer {
                    (w, period(keys.required_u32(KEY)?))
                } else if let Some(layers) = keys.per_layer_bool(KEY, n_layer)? {
                    (w, layers)
                } else {
                    none
                }
            }
        },
    })
}

/// Which layers of a hybrid model are attention and which recurrent
/// (src/llama-model.cpp: `recurrent_layer_arr` per arch and the
/// `llama_memory_hybrid` filters in `create_memory`).
fn hybrid_layers(keys: &Keys, n_head_kv: &[u32], n_ff: &[u32]) -> Result<(Vec<bool>, Vec<bool>), String> {
    Ok(match keys.arch {
        // Falcon-H1 runs attention and SSM side by side in every layer.
        "falcon-h1" => (vec![true; n_head_kv.len()], vec![true; n_head_kv.len()]),
        // Qwen3-Next / Qwen3.5: full attention every `full_attention_interval`
        // layers (default 4), gated delta net in the others.
        "qwen3next" | "qwen35" | "qwen35moe" => {
            let interval = keys.u32("full_attention_interval")?.unwrap_or(4).max(1);
            let recurrent: Vec<bool> = (0..n_head_kv.len() as u32).map(|il| (il + 1) % interval != 0).collect();
            (recurrent.iter().map(|r| !r).collect(), recurrent)
        }
        // Nemotron-H: mamba layers have neither KV heads nor an FFN; MLP
        // layers have an FFN and belong to neither memory.
        "nemotron_h" | "nemotron_h_moe" => {
            let recurrent: Vec<bool> = n_head_kv
                .iter()
                .zip(n_ff)
                .map(|(&kv, &ff)| kv == 0 && ff == 0)
                .collect();
            let attention = n_head_kv.iter().zip(n_ff).map(|(&kv, &ff)| kv > 0 && ff == 0).collect();
            (attention, recurrent)
        }
        // The rest mark recurrent layers with head_count_kv = 0.
        _ => (
            n_head_kv.iter().map(|&kv| kv > 0).collect(),
            n_head_kv.iter().map(|&kv| kv == 0).collect(),
        ),
    })
}

/// src/llama-hparams.cpp `n_embd_r` / `n_embd_s` for the state layouts this
/// crate knows: RWKV (wkv head size), LFM2 (short convolution), Mamba-style
/// SSMs. `None` for Kimi-Linear, whose KDA state layout is not modelled.
fn state_widths(keys: &Keys, n_embd: u32) -> Result<Option<StateWidths>, String> {
    if keys.arch == "kimi-linear" {
        return Ok(None);
    }
    let n_embd = u64::from(n_embd);
    let wkv_head_size = u64::from(keys.u32("wkv.head_size")?.unwrap_or(0));
    let l_cache = u64::from(keys.u32("shortconv.l_cache")?.unwrap_or(0));
    let d_conv = u64::from(keys.u32("ssm.conv_kernel")?.unwrap_or(0));
    let d_inner = u64::from(keys.u32("ssm.inner_size")?.unwrap_or(0));
    let d_state = u64::from(keys.u32("ssm.state_size")?.unwrap_or(0));
    let n_group = u64::from(keys.u32("ssm.group_count")?.unwrap_or(0));
    let overflow = || format!("{}: the recurrent state size overflows", keys.arch);
    let r = if wkv_head_size != 0 {
        let token_shift = u64::from(keys.u32("token_shift_count")?.unwrap_or(2));
        token_shift.checked_mul(n_embd)
    } else if l_cache != 0 {
        n_embd.checked_mul(l_cache - 1)
    } else {
        // The first column of the conv state is shifted out, so d_conv - 1.
        n_group
            .checked_mul(d_state)
            .and_then(|v| v.checked_mul(2))
            .and_then(|v| v.checked_add(d_inner))
            .and_then(|v| v.checked_mul(d_conv.saturating_sub(1)))
    }
    .ok_or_else(overflow)?;
    let s = if wkv_head_size != 0 {
        n_embd.checked_mul(wkv_head_size)
    } else {
        d_state.checked_mul(d_inner)
    }
    .ok_or_else(overflow)?;
    Ok(Some(StateWidths { r, s }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swa_periods_match_llama_cpp() {
        // gemma 3: period 6, layers 5, 11, 17 full.
        let g3 = swa_period(18, 6, false);
        let full: Vec<u32> = (0..18).filter(|&il| !g3[il as usize]).collect();
        assert_eq!(full, vec![5, 11, 17]);
        // period 2: odd layers full.
        assert_eq!(swa_period(4, 2, false), vec![true, false, true, false]);
        // dense first: layer 0 of each period full.
        assert_eq!(swa_period(5, 4, true), vec![false, true, true, true, false]);
        assert_eq!(swa_period(2, 0, false), vec![true, true]);
    }
}
