//! What a model server says of its KV pool and its work in its own
//! figures (vLLM's log and `/metrics` today), beside the common split of
//! `ModelReported`: *reported*, each null where the runtime does not say,
//! never summed with estimates or measurements. The runtime's own name for
//! each figure is in `names`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(default)]
pub struct RuntimeReport {
    /// Tokens the KV pool holds (vLLM `KV cache size: N tokens`, else
    /// `num_gpu_blocks` × `block_size`).
    pub kv_tokens: Option<u64>,
    /// Blocks of the pool and tokens a block (vLLM `cache_config_info`).
    pub kv_blocks: Option<u64>,
    pub kv_block_size: Option<u64>,
    /// Where the pool lives, as the runtime says it (`GPU`, `CPU`).
    pub kv_pool_device: Option<String>,
    /// Requests of `max_model_len` tokens the pool holds at once.
    pub max_concurrency: Option<f64>,
    /// The longest request it takes, in tokens, as it runs (vLLM
    /// `max_model_len`).
    pub max_model_len: Option<u64>,
    /// The share of the device's memory it claims (vLLM
    /// `gpu_memory_utilization`), as it runs.
    pub memory_utilization: Option<f64>,
    /// The activations' peak it profiled before sizing the pool.
    pub activation_peak_bytes: Option<u64>,
    /// Preemptions since it started (vLLM `num_preemptions_total`).
    pub preemptions: Option<u64>,
    /// Prefix-cache hits over queries since it started, 0 to 1; null
    /// before any query.
    pub prefix_cache_hit_ratio: Option<f64>,
    /// Prompt and generated tokens since it started.
    pub prompt_tokens_total: Option<u64>,
    pub generation_tokens_total: Option<u64>,
    /// Each figure and where it came from, in the runtime's words
    /// (`kv_tokens: log "CPU KV cache size"`).
    pub names: Vec<String>,
}
