//! What the kubelet says of a device: the pods' containers it was
//! allocated to (src/collect/kubelet.rs reads them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A device the kubelet allocated to a pod's container.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct PodAllocation {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// The extended resource it was allocated as (`nvidia.com/gpu`,
    /// `nvidia.com/mig-1g.10gb`).
    pub resource: String,
    /// The id the device plugin gave it (a GPU or MIG UUID, an index, a
    /// PCI address).
    pub device_id: String,
    /// Whether a process of the pod uses the device: false is allocated
    /// and idle (the process list is complete and none of the pod's is on
    /// it); null where that cannot be told (a process on it whose pod is
    /// unknown, or an incomplete process list).
    pub in_use: Option<bool>,
}

impl PodAllocation {
    /// Whether this is the allocation to that container of that pod.
    pub fn is_of(&self, namespace: &str, pod: &str, container: &str) -> bool {
        (self.namespace.as_str(), self.pod.as_str(), self.container.as_str()) == (namespace, pod, container)
    }

    /// `namespace/pod (container)`.
    pub fn name(&self) -> String {
        format!("{}/{} ({})", self.namespace, self.pod, self.container)
    }
}

/// Whether a device is allocated to a pod none of whose processes uses it.
pub fn any_idle(pods: &[PodAllocation]) -> bool {
    pods.iter().any(|a| a.in_use == Some(false))
}

/// What the kubelet allocated a device to, for a view: `pod ml/train-0
/// (trainer)`, `: allocated and idle` after one none of the pod's
/// processes uses; None where nothing is allocated.
pub fn pods_line(pods: &[PodAllocation]) -> Option<String> {
    let said: Vec<String> = pods
        .iter()
        .map(|a| match a.in_use {
            Some(false) => format!("{}: allocated and idle", a.name()),
            _ => a.name(),
        })
        .collect();
    (!said.is_empty()).then(|| format!("pod {}", said.join(", ")))
}
