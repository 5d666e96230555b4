//! The reconciliation's record: a process's measured device memory beside
//! the parts that explain it, each with its provenance. Data only, below
//! both the snapshot that carries it and `reconcile`, which computes it.

use super::pairing::Match;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a part's figure comes from (DESIGN.md rule 1).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    /// The runtime said so (its log's buffer lines).
    Reported,
    /// Computed from the model file and settings, or a documented figure.
    Estimated,
}

impl Provenance {
    pub fn label(self) -> &'static str {
        match self {
            Provenance::Reported => "reported",
            Provenance::Estimated => "estimated",
        }
    }
}

/// What a part of a process's device memory is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PartKind {
    Weights,
    /// The KV cache, with any recurrent state (llama.cpp's `RS` buffers).
    Kv,
    Compute,
    Output,
    /// What the GPU driver holds for the process's context before any
    /// buffer (CUDA: the context, its kernels and bookkeeping).
    Context,
}

impl PartKind {
    pub fn label(self) -> &'static str {
        match self {
            PartKind::Weights => "weights",
            PartKind::Kv => "KV",
            PartKind::Compute => "compute",
            PartKind::Output => "output",
            PartKind::Context => "context",
        }
    }
}

/// One known part: its bytes on the device, where the figure comes from,
/// and the model it belongs to (none for the driver's context).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Part {
    pub kind: PartKind,
    pub bytes: u64,
    pub provenance: Provenance,
    /// E.g. `log:/var/log/llama.log`, `estimate`, or the figure's reference.
    pub source: String,
    /// The model's name (or file name); null for the driver's context.
    pub model: Option<String>,
}

/// A process's device memory on one device, explained part by part.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Reconciliation {
    /// The device's index.
    pub device: u32,
    /// Measured: the process's device memory there (the reference).
    pub measured_bytes: u64,
    /// The backend that measured it (`nvml`, `wddm`, `drm`).
    pub measured_source: String,
    /// How the runtime's per-device buffers (`CUDA0`, `Vulkan1`) were paired
    /// with this device: `exact` when the process holds one device and the
    /// runtime names one, `guess` when paired by order; null when no
    /// runtime buffer is placed (every part estimated).
    #[serde(rename = "match")]
    pub pairing: Option<Match>,
    /// The known parts; none of them is added to `measured_bytes`.
    pub parts: Vec<Part>,
    /// The parts nobody knows for this device: the rest holds them.
    pub missing: Vec<PartKind>,
    /// The sum of the reported parts (reported bytes only).
    pub reported_bytes: u64,
    /// The sum of the estimated parts (estimated bytes only).
    pub estimated_bytes: u64,
    /// measured - reported - estimated: positive when the parts leave
    /// memory unexplained, negative when they claim more than was measured.
    pub unexplained_bytes: i64,
    /// The rest is beyond what the estimates' spread explains
    /// ([`LARGE_REST`](super::reconcile::LARGE_REST)).
    pub large: bool,
    /// What users find behind a rest that large, the likeliest first.
    pub likely_causes: Vec<String>,
}
