//! What a model costs, computed from its file and launch settings: the
//! snapshot's record of it. Never summed with measured bytes (DESIGN.md
//! rule 1).

use crate::model_devices::Device;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Computed from the model file and the launch settings: never summed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ModelEstimate {
    /// The file's weights, wherever they are placed.
    pub weights_bytes: Option<u64>,
    pub kv_bytes: Option<u64>,
    pub kv_bytes_per_token: Option<u64>,
    pub recurrent_state_bytes: Option<u64>,
    /// What the KV cache would take if the sliding-window layers held the
    /// whole context (llama.cpp's `--swa-full`, and what calculators that
    /// ignore the window say). Null for models without sliding windows.
    pub kv_bytes_without_window: Option<u64>,
    /// The blocks of the KV pool vLLM makes of the memory it gives the
    /// cache (`kv_bytes`), from the per-token cost (runtimes::vllm_log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_pool_blocks: Option<u64>,
    /// The backend the compute buffers and placement are estimated for
    /// (`cpu`, `cuda`, `vulkan`, `metal`: the GPU library the process
    /// maps); null when it is unknown (its maps are not readable, or another GPU runtime is mapped).
    #[serde(default)]
    pub backend: Option<String>,
    /// As `gputaskman model --json` names them: the compute buffers of every
    /// device (the host's included), the output buffer, and what the
    /// devices need summed; null when a part is unknown.
    #[serde(default)]
    pub compute_bytes: Option<u64>,
    #[serde(default)]
    pub output_bytes: Option<u64>,
    #[serde(default)]
    pub total_bytes: Option<u64>,
    /// Which term of the compute buffer dominates, or why it is unknown.
    #[serde(default)]
    pub compute_why: Option<String>,
    /// One row per device (a GPU's index, `"host"`), `model --json`'s
    /// `devices[]`; empty when the backend is unknown.
    #[serde(default)]
    pub devices: Vec<Device>,
}
