//! Platforms without a process scan yet: the scan fails with a clear reason
//! instead of pretending no process runs.

use super::process::ProcInfo;
use std::path::PathBuf;

pub struct ProcScanner;

impl ProcScanner {
    pub fn new(_root: PathBuf) -> Self {
        ProcScanner
    }

    pub fn prime(&mut self) {}

    pub fn open_cpu_window(&mut self) {}

    pub fn close_cpu_window(&mut self, _min: std::time::Duration, _processes: &mut [crate::snapshot::Process]) {}

    pub fn cpu_window(&self) -> Option<std::time::Duration> {
        None
    }

    /// Every process's libraries are read as it is first seen here.
    pub fn read_deferred_maps(&mut self, _wanted: impl Fn(u32) -> bool, _scanned: &mut [ProcInfo]) {}

    pub fn rss_anon(&self, _pid: u32) -> Option<u64> {
        None
    }

    pub fn scan(&mut self) -> anyhow::Result<Vec<ProcInfo>> {
        anyhow::bail!("the process scan is not implemented on {}", std::env::consts::OS)
    }
}
