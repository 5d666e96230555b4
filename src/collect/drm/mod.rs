//! AMD, Intel and every other DRM GPU on Linux: devices from sysfs, per
//! process usage from the DRM fdinfo of each open DRM file descriptor
//! (the kernel's Documentation/gpu/drm-usage-stats.rst).
//!
//! The rooms: `sysfs` (the device list and what drivers publish there),
//! `device` (a device's entry: name, notes, each vendor's values), `fdinfo`
//! (the parser of one fdinfo file), `holders` (which processes hold DRM
//! files, looked at in turn so a sample costs little), `clients` (the
//! readings grouped by client, counted once, attributed to processes).
//! This file holds the source that runs them each sample.

mod amdgpu_health;
mod clients;
mod device;
pub mod fdinfo;
mod holders;
pub mod sysfs;

pub use holders::{ScanStats, DEEP_EVERY, MAX_RELIST};

use super::nvml::Sample;
use super::source::{Report, Round, Source};
use crate::snapshot::{Backend, BackendStatus};
use clients::EngineMarks;
use device::{device_label, DeviceReader};
use holders::Holders;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use sysfs::DrmDevice;

/// Every process's fds are looked at again within this period (or within
/// `processes / MAX_RELIST` samples, whichever is longer); the device list
/// is read again this often.
pub const RESCAN_EVERY: Duration = Duration::from_secs(5);

pub struct DrmSource {
    proc_root: PathBuf,
    sys_root: PathBuf,
    index_base: u32,
    covered: HashSet<String>,
    clock: Box<dyn FnMut() -> Duration + Send>,
    rescan_every: Duration,
    /// Devices read at the last device scan (those NVML covers left out).
    devices: Vec<DrmDevice>,
    /// Nodes of devices left to another backend: their fds are skipped.
    covered_nodes: HashSet<String>,
    /// (covered devices, sysfs error) from the last discovery.
    covered_count: usize,
    error: Option<String>,
    sampled: bool,
    last_full: Option<Duration>,
    holders: Holders,
    marks: EngineMarks,
    reader: DeviceReader,
    process_notes: BTreeMap<u32, Vec<String>>,
    stats: ScanStats,
}

impl DrmSource {
    /// A source reading `proc_root` (normally `/proc`) and `sys_root`
    /// (normally `/sys`). Nothing is read until the first sample.
    pub fn new(proc_root: PathBuf, sys_root: PathBuf) -> DrmSource {
        let start = Instant::now();
        DrmSource {
            proc_root,
            sys_root,
            index_base: 0,
            covered: HashSet::new(),
            clock: Box::new(move || start.elapsed()),
            rescan_every: RESCAN_EVERY,
            devices: Vec::new(),
            covered_nodes: HashSet::new(),
            covered_count: 0,
            error: None,
            sampled: false,
            last_full: None,
            holders: Holders::default(),
            marks: EngineMarks::default(),
            reader: DeviceReader::new(),
            process_notes: BTreeMap::new(),
            stats: ScanStats::default(),
        }
    }

    /// DRM devices are numbered from `base` on (after NVML's devices).
    pub fn set_index_base(&mut self, base: u32) {
        self.index_base = base;
    }

    /// PCI addresses another backend reads (NVML's `pci_bus_id`s, any
    /// spelling): those devices are left out here. Takes effect at the
    /// next device scan, or at once when called before the first sample.
    pub fn set_covered_pci<I, S>(&mut self, ids: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let covered: HashSet<String> = ids.into_iter().map(|s| sysfs::normalize_pci(s.as_ref())).collect();
        if covered != self.covered {
            self.covered = covered;
            self.last_full = None;
        }
    }

    /// Where to look up device names (pci.ids); empty for none.
    pub fn set_pci_ids(&mut self, files: Vec<PathBuf>) {
        self.reader.set_pci_ids(files);
    }

    /// The time source for rates and the rescan period (tests drive it).
    pub fn set_clock(&mut self, clock: impl FnMut() -> Duration + Send + 'static) {
        self.clock = Box::new(clock);
    }

    /// How often every process's fds are looked at again.
    pub fn set_rescan_every(&mut self, every: Duration) {
        self.rescan_every = every;
    }

    /// Whether the machine has a DRM device at all (a card or render node
    /// in /sys/class/drm). Cheap: one directory read.
    pub fn is_present(&self) -> bool {
        sysfs::any_node(&self.sys_root)
    }

    /// The backend line: what was found, or why nothing was.
    pub fn backend(&self) -> Backend {
        let line = |status, detail: String| Backend {
            name: "drm".into(),
            status,
            detail,
        };
        if let Some(e) = &self.error {
            return line(BackendStatus::Error, e.clone());
        }
        let (devices, covered): (Vec<String>, usize) = if self.sampled {
            (self.devices.iter().map(device_label).collect(), self.covered_count)
        } else {
            match sysfs::discover(&self.sys_root) {
                Ok(list) => {
                    let covered = list.iter().filter(|d| self.is_covered(d)).count();
                    let mine = list.iter().filter(|d| !self.is_covered(d)).map(device_label);
                    (mine.collect(), covered)
                }
                Err(e) => return line(BackendStatus::Error, e),
            }
        };
        if devices.is_empty() {
            let detail = if covered > 0 {
                "no DRM GPU besides the devices NVML reads".to_string()
            } else {
                format!("no DRM GPU (no {}/class/drm/card*)", self.sys_root.display())
            };
            return line(BackendStatus::Unavailable, detail);
        }
        let mut detail = format!(
            "{} device{}: {}",
            devices.len(),
            if devices.len() == 1 { "" } else { "s" },
            devices.join(", ")
        );
        if self.sampled {
            detail.push_str(&format!(
                "; {} process{} with DRM clients",
                self.stats.holders,
                if self.stats.holders == 1 { "" } else { "es" }
            ));
            if self.stats.denied > 0 {
                detail.push_str(&format!(
                    "; {} process{} not readable (run as root to see every client)",
                    self.stats.denied,
                    if self.stats.denied == 1 { "" } else { "es" }
                ));
            }
        }
        line(BackendStatus::Ok, detail)
    }

    /// What the last sample did (for benchmarks and the status line).
    pub fn scan_stats(&self) -> ScanStats {
        self.stats
    }

    /// Notes per PID from the last sample (shared clients, spill on an
    /// integrated GPU, clamped rates, unreadable lines). The collector adds
    /// them to the process rows; they are not in [`GpuUsage`].
    pub fn take_process_notes(&mut self) -> BTreeMap<u32, Vec<String>> {
        std::mem::take(&mut self.process_notes)
    }

    /// A first reading of the busy counters, so that the next sample has
    /// engine percentages.
    pub fn prime(&mut self) {
        let _ = self.sample(None);
        self.process_notes.clear();
    }

    fn is_covered(&self, d: &DrmDevice) -> bool {
        d.pci.as_ref().is_some_and(|p| self.covered.contains(p))
    }

    /// Reads every DRM device (or only the one with index `only`) and the
    /// processes using it. An error is a failure to read /sys or /proc
    /// themselves; a machine without DRM devices is an empty sample.
    pub fn sample(&mut self, only: Option<u32>) -> Result<Sample, String> {
        let now = (self.clock)();
        self.process_notes.clear();
        let full = self
            .last_full
            .is_none_or(|t| now.saturating_sub(t) >= self.rescan_every);
        self.stats = ScanStats::default();
        self.sampled = true;
        if full {
            self.last_full = Some(now);
            match sysfs::discover(&self.sys_root) {
                Ok(all) => {
                    self.error = None;
                    let (covered, mine): (Vec<DrmDevice>, Vec<DrmDevice>) =
                        all.into_iter().partition(|d| self.is_covered(d));
                    self.covered_count = covered.len();
                    self.covered_nodes = covered
                        .iter()
                        .flat_map(|d| d.cards.iter().chain(&d.renders).cloned())
                        .collect();
                    self.devices = mine;
                }
                Err(e) => {
                    self.error = Some(e.clone());
                    self.devices.clear();
                    return Err(e);
                }
            }
        }
        if self.devices.is_empty() {
            self.holders = Holders::default();
            self.marks = EngineMarks::default();
            return Ok(Sample::default());
        }
        if let Err(e) = self
            .holders
            .refresh(&self.proc_root, now, self.rescan_every, &mut self.stats)
        {
            self.error = Some(e.clone());
            return Err(e);
        }
        self.error = None;

        let readings = self.holders.read_fdinfo(&self.proc_root, &mut self.stats);
        let clients = clients::group(readings, &self.devices, &self.covered_nodes, &mut self.process_notes);
        self.stats.clients = clients.len();
        let rates = self.marks.rates(&clients, now);

        let mut sample = Sample::default();
        for (i, dev) in self.devices.clone().iter().enumerate() {
            let index = self.index_base + i as u32;
            if only.is_some_and(|o| o != index) {
                continue;
            }
            let mut device = self.reader.entry(&self.sys_root, dev, index, now);
            let denied = self.holders.denied();
            if denied > 0 {
                device.process_list_complete = false;
                device.notes.push(format!(
                    "{} process{} could not be inspected (permission denied): run as root to see every DRM client",
                    denied,
                    if denied == 1 { "" } else { "es" }
                ));
            }
            sample.devices.push(device);
            let holders = &self.holders;
            sample.processes.extend(clients::attribute(
                (dev, i, index),
                &clients,
                &rates,
                &|pid| holders.uses_kfd(pid),
                &mut self.process_notes,
            ));
        }
        Ok(sample)
    }
}

impl Source for DrmSource {
    fn prime(&mut self) {
        DrmSource::prime(self);
    }

    /// DRM devices come after NVML's and leave NVIDIA cards NVML reads to it.
    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        self.set_index_base(round.devices.len() as u32);
        self.set_covered_pci(round.devices.iter().filter_map(|d| d.pci_bus_id.as_deref()));
        let (backend, mut reading) = match self.sample(round.only) {
            Ok(sample) => (self.backend(), sample.into_reading()),
            Err(e) => (
                Backend {
                    name: "drm".into(),
                    status: BackendStatus::Error,
                    detail: e,
                },
                Report::default(),
            ),
        };
        reading.notes = self.take_process_notes();
        (backend, reading)
    }
}

// Unix only: the fixtures are /proc trees with fd symlinks.
#[cfg(all(test, unix))]
mod tests;

#[cfg(all(test, unix))]
mod bench;
