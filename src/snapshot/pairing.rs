//! How a measurement was paired with a process, a word the snapshot and the
//! reconciliation both use.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a device's entry, whose PID had to be translated (a container's
/// host PIDs, a WSL host's GPU contexts), was paired with a process here.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Match {
    /// Paired for certain: the counts and creation order agree, or the
    /// context appeared with the process (`*` on screen).
    Exact,
    /// Paired by a heuristic (`?` on screen).
    Guess,
}
