//! What one pass of a sampled source gives: below the NVML source, which
//! takes it, and the watchdog thread, which carries it (and DRM, which
//! builds one too).

use crate::snapshot::{Device, GpuUsage};

/// A process a device lists.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProcess {
    pub pid: u32,
    pub usage: GpuUsage,
}

/// One pass over every device.
#[derive(Debug, Default, Clone)]
pub struct Sample {
    pub devices: Vec<Device>,
    pub processes: Vec<GpuProcess>,
}
