//! AMD, Intel and every other DRM GPU on Linux: devices from sysfs, per
//! process usage from the DRM fdinfo of each open DRM file descriptor
//! (the kernel's Documentation/gpu/drm-usage-stats.rst).
//!
//! Cost: reading every fd of every process is the expensive part, so it is
//! done in full only on the first sample. After that, each sample lists
//! /proc (one directory read), looks at the fds of PIDs it has not seen
//! yet and of a slice of the others (in turn, so that every process is
//! looked at again within [`RESCAN_EVERY`], at most [`MAX_RELIST`] a
//! sample, without a spike), reading only the links of fd numbers that are
//! new since the last look, and rereads only the fdinfo of the DRM fds it
//! knows.
//!
//! Counting: a client is a kernel `struct drm_file`, keyed by (device,
//! `drm-client-id`); several fds or processes reaching one client count it
//! once. Its bytes go to a process only when that process alone holds it,
//! and then only the part no other client also counts (held less
//! `drm-shared-*`); the rest is named in notes, never summed.

pub mod fdinfo;
pub mod sysfs;

use super::nvml::{GpuProcess, Sample};
use super::source::{Report, Round, Source};
use crate::snapshot::{Backend, BackendStatus, Device, GpuUsage};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use sysfs::DrmDevice;

/// Every process's fds are looked at again within this period (or within
/// `processes / MAX_RELIST` samples, whichever is longer); the device list
/// is read again this often.
pub const RESCAN_EVERY: Duration = Duration::from_secs(5);

/// The most known processes whose fds one sample looks at again: it bounds
/// the cost of a sample on a machine with thousands of processes (new PIDs
/// are always looked at at once).
pub const MAX_RELIST: usize = 100;

/// Where pci.ids usually is.
const PCI_IDS: [&str; 3] = [
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// A DRM file descriptor of a process: the fd number and the node it opens
/// (`renderD128`, `card0`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct DrmFd {
    fd: u32,
    node: String,
}

/// Every this many looks at a process, every one of its fd links is read
/// again; in between, only the links of fd numbers that are new since the
/// last look. (An fd number that went from another file to a DRM file is so
/// found within DEEP_EVERY rescan periods; one that went from a DRM file to
/// another loses its `drm-driver` line and is dropped at once.)
pub const DEEP_EVERY: u32 = 12;

/// What the last look at a process's fds found.
#[derive(Debug, Clone, Default)]
struct FdState {
    /// Every fd number, sorted.
    numbers: Vec<u32>,
    /// The fd that has /dev/kfd open (ROCm), if any.
    kfd: Option<u32>,
    /// Looks so far.
    visits: u32,
}

/// What a process's fd directory said.
enum FdScan {
    /// The DRM fds (maybe none), what to remember, and the links read.
    Found(Vec<DrmFd>, FdState, usize),
    /// Exited between listing and reading: normal.
    Gone,
    /// Not ours to read (another user's process, and we are not root).
    Denied,
}

/// A client: the kernel's `struct drm_file`, named by device and
/// `drm-client-id` (or, without one, by the fd that reaches it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Ident {
    Id(u64),
    Fd(u32, u32),
}

type ClientKey = (String, Ident);

/// The last counter values seen for one engine of one client, each with
/// the time it was read. A counter that goes backwards keeps the larger,
/// older value until the driver catches up.
#[derive(Debug, Clone, Copy, Default)]
struct EngineMark {
    busy_ns: Option<(u64, Duration)>,
    cycles: Option<(u64, u64)>,
}

/// Counts of the work a sample did, for the benchmark and the status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Processes listed in /proc.
    pub processes: usize,
    /// Processes whose fd directory was read this sample.
    pub fd_dirs_read: usize,
    /// fd links read this sample.
    pub links_read: usize,
    /// fdinfo files read this sample.
    pub fdinfo_read: usize,
    /// Processes holding DRM fds.
    pub holders: usize,
    /// Distinct clients.
    pub clients: usize,
    /// Processes whose fds could not be read (permission).
    pub denied: usize,
    /// Whether this sample looked at every process's fds (the first
    /// sample; later ones look at new PIDs and a slice of the others).
    pub full_scan: bool,
}

pub struct DrmSource {
    proc_root: PathBuf,
    sys_root: PathBuf,
    index_base: u32,
    covered: HashSet<String>,
    pci_ids: Vec<PathBuf>,
    names: HashMap<(u16, u16), Option<String>>,
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
    /// When the fds were last looked at (None: the next sample looks at
    /// every process).
    last_refresh: Option<Duration>,
    seen: HashSet<u32>,
    /// Known PIDs in the order they are looked at again, and where the
    /// next slice starts.
    order: Vec<u32>,
    cursor: usize,
    holders: BTreeMap<u32, Vec<DrmFd>>,
    fd_state: HashMap<u32, FdState>,
    denied: BTreeSet<u32>,
    marks: HashMap<ClientKey, BTreeMap<String, EngineMark>>,
    energy: HashMap<String, sysfs::EnergyReading>,
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
            pci_ids: PCI_IDS.iter().map(PathBuf::from).collect(),
            names: HashMap::new(),
            clock: Box::new(move || start.elapsed()),
            rescan_every: RESCAN_EVERY,
            devices: Vec::new(),
            covered_nodes: HashSet::new(),
            covered_count: 0,
            error: None,
            sampled: false,
            last_full: None,
            last_refresh: None,
            seen: HashSet::new(),
            order: Vec::new(),
            cursor: 0,
            holders: BTreeMap::new(),
            fd_state: HashMap::new(),
            denied: BTreeSet::new(),
            marks: HashMap::new(),
            energy: HashMap::new(),
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
        self.pci_ids = files;
        self.names.clear();
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
            self.holders.clear();
            self.seen.clear();
            self.order.clear();
            self.marks.clear();
            self.last_refresh = None;
            return Ok(Sample::default());
        }
        if let Err(e) = self.refresh_holders(now) {
            self.error = Some(e.clone());
            return Err(e);
        }
        self.error = None;

        let readings = self.read_fdinfo();
        let clients = self.clients(readings);
        self.stats.clients = clients.len();
        let rates = self.rates(&clients, now);

        let mut sample = Sample::default();
        for (i, dev) in self.devices.clone().iter().enumerate() {
            let index = self.index_base + i as u32;
            if only.is_some_and(|o| o != index) {
                continue;
            }
            let mut device = self.device_entry(dev, index, now);
            if !self.denied.is_empty() {
                device.process_list_complete = false;
                device.notes.push(format!(
                    "{} process{} could not be inspected (permission denied): run as root to see every DRM client",
                    self.denied.len(),
                    if self.denied.len() == 1 { "" } else { "es" }
                ));
            }
            sample.devices.push(device);
            sample.processes.extend(self.attribute(i, index, &clients, &rates));
        }
        Ok(sample)
    }

    /// Lists /proc and finds the DRM fds: of every process on the first
    /// sample; later, of new PIDs and of the next slice of known ones, sized
    /// so that each is looked at again within the rescan period. Exited
    /// processes are dropped.
    fn refresh_holders(&mut self, now: Duration) -> Result<(), String> {
        let listed: HashSet<u32> = match std::fs::read_dir(&self.proc_root) {
            Ok(dir) => dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect(),
            Err(e) => return Err(format!("cannot list {}: {e}", self.proc_root.display())),
        };
        self.stats.processes = listed.len();
        let first = self.last_refresh.is_none();
        let elapsed = self.last_refresh.map(|t| now.saturating_sub(t)).unwrap_or_default();
        self.last_refresh = Some(now);
        if first {
            self.seen.clear();
            self.order.clear();
            self.cursor = 0;
            self.holders.clear();
            self.fd_state.clear();
            self.denied.clear();
            self.stats.full_scan = true;
        } else {
            self.seen.retain(|p| listed.contains(p));
            self.order.retain(|p| listed.contains(p));
            self.holders.retain(|p, _| listed.contains(p));
            self.fd_state.retain(|p, _| listed.contains(p));
            self.denied.retain(|p| listed.contains(p));
        }
        // Known PIDs, in turn: as many as the time since the last sample
        // asks for, at most all of them.
        let mut again = Vec::new();
        if !first && !self.order.is_empty() {
            let share = elapsed.as_secs_f64() / self.rescan_every.as_secs_f64().max(1e-3);
            let n = ((self.order.len() as f64 * share).ceil() as usize)
                .min(self.order.len())
                .min(MAX_RELIST);
            for _ in 0..n {
                self.cursor %= self.order.len();
                again.push(self.order[self.cursor]);
                self.cursor += 1;
            }
        }
        let mut new: Vec<u32> = listed.iter().copied().filter(|p| !self.seen.contains(p)).collect();
        new.sort_unstable();
        for &pid in &new {
            self.seen.insert(pid);
            self.order.push(pid);
        }
        for pid in new.into_iter().chain(again) {
            self.stats.fd_dirs_read += 1;
            self.denied.remove(&pid);
            let previous = self.fd_state.remove(&pid);
            let known = self.holders.get(&pid).map(Vec::as_slice).unwrap_or_default();
            match scan_fds(&self.proc_root, pid, previous.as_ref(), known) {
                FdScan::Found(fds, state, links) => {
                    self.stats.links_read += links;
                    self.fd_state.insert(pid, state);
                    if fds.is_empty() {
                        self.holders.remove(&pid);
                    } else {
                        self.holders.insert(pid, fds);
                    }
                }
                FdScan::Gone => {
                    self.holders.remove(&pid);
                }
                FdScan::Denied => {
                    self.denied.insert(pid);
                }
            }
        }
        self.stats.denied = self.denied.len();
        Ok(())
    }

    /// Reads the fdinfo of every known DRM fd. An fd that is gone (closed,
    /// or the process exited: ENOENT) or no longer a DRM file is forgotten.
    fn read_fdinfo(&mut self) -> Vec<(u32, DrmFd, fdinfo::Fdinfo)> {
        let mut readings = Vec::new();
        let mut read = 0;
        for (pid, fds) in self.holders.iter_mut() {
            let dir = self.proc_root.join(pid.to_string()).join("fdinfo");
            fds.retain(|fd| {
                read += 1;
                match fdinfo::read(&dir.join(fd.fd.to_string())) {
                    Ok(info) if info.driver.is_some() => {
                        readings.push((*pid, fd.clone(), info));
                        true
                    }
                    _ => false,
                }
            });
        }
        self.holders.retain(|_, fds| !fds.is_empty());
        self.stats.fdinfo_read = read;
        self.stats.holders = self.holders.len();
        readings
    }

    /// Groups the readings by client: one entry per (device, client id),
    /// with every process that reaches it.
    fn clients(&mut self, readings: Vec<(u32, DrmFd, fdinfo::Fdinfo)>) -> BTreeMap<ClientKey, Client> {
        let mut by_node: HashMap<&str, usize> = HashMap::new();
        let mut by_pci: HashMap<&str, usize> = HashMap::new();
        for (i, d) in self.devices.iter().enumerate() {
            for n in d.cards.iter().chain(&d.renders) {
                by_node.insert(n, i);
            }
            if let Some(p) = &d.pci {
                by_pci.insert(p, i);
            }
        }
        let mut clients: BTreeMap<ClientKey, Client> = BTreeMap::new();
        for (pid, fd, info) in readings {
            if self.covered_nodes.contains(&fd.node) && info.pdev.is_none() {
                continue;
            }
            // drm-pdev names the device in every mount namespace; the node
            // name is the fallback (it can differ inside a container).
            let device = match &info.pdev {
                Some(p) => by_pci.get(sysfs::normalize_pci(p).as_str()).copied(),
                None => by_node.get(fd.node.as_str()).copied(),
            };
            let Some(device) = device else {
                continue;
            };
            if info.malformed > 0 || info.truncated {
                self.process_notes.entry(pid).or_default().push(format!(
                    "fdinfo of fd {} had {} unreadable line{}{}",
                    fd.fd,
                    info.malformed,
                    if info.malformed == 1 { "" } else { "s" },
                    if info.truncated {
                        " and was cut at the size limit"
                    } else {
                        ""
                    }
                ));
            }
            let ident = match info.client_id {
                Some(id) => Ident::Id(id),
                None => Ident::Fd(pid, fd.fd),
            };
            let key = (self.devices[device].key.clone(), ident);
            let client = clients.entry(key).or_insert_with(|| Client {
                device,
                info,
                holders: BTreeSet::new(),
            });
            client.holders.insert(pid);
        }
        clients
    }

    /// Engine busy percent per client since the previous sample. A client
    /// seen for the first time has none yet (`None`).
    fn rates(&mut self, clients: &BTreeMap<ClientKey, Client>, now: Duration) -> HashMap<ClientKey, Rates> {
        let mut out = HashMap::new();
        let mut marks = HashMap::new();
        for (key, client) in clients {
            let prev = self.marks.remove(key);
            let mut current: BTreeMap<String, EngineMark> = BTreeMap::new();
            let mut rates = Rates::default();
            let mut complete = prev.is_some();
            for (name, engine) in &client.info.engines {
                let before = prev.as_ref().and_then(|p| p.get(name)).copied().unwrap_or_default();
                let (mark, pct) = engine_rate(engine, before, now);
                current.insert(name.clone(), mark);
                match pct {
                    Some(p) => {
                        if p > 100.0 {
                            rates.clamped.push((name.clone(), p));
                        }
                        rates.engines.insert(name.clone(), p.min(100.0));
                    }
                    None => complete &= !(engine.busy_ns.is_some() || engine.cycles.is_some()),
                }
            }
            rates.known = complete && !client.info.engines.is_empty();
            out.insert(key.clone(), rates);
            marks.insert(key.clone(), current);
        }
        // Clients not seen now are closed: their marks go.
        self.marks = marks;
        out
    }

    fn device_entry(&mut self, dev: &DrmDevice, index: u32, now: Duration) -> Device {
        let mut device = Device {
            index,
            backend: "drm".into(),
            vendor: sysfs::vendor_name(dev.vendor_id, dev.driver.as_deref()),
            pci_bus_id: dev.pci.clone(),
            process_list_complete: true,
            ..Device::default()
        };
        device.name = self.device_name(dev);
        device.driver_version = dev.driver.as_ref().and_then(|d| {
            sysfs::read_text(&self.sys_root.join("module").join(d).join("version"))
                .ok()
                .flatten()
                .filter(|v| !v.is_empty())
        });
        let mut nodes: Vec<&str> = dev.cards.iter().chain(&dev.renders).map(String::as_str).collect();
        nodes.sort_unstable();
        device.notes.push(format!(
            "driver {}; nodes {}{}",
            dev.driver.as_deref().unwrap_or("none bound"),
            nodes.join(", "),
            match (dev.vendor_id, dev.device_id) {
                (Some(v), Some(d)) => format!("; PCI id {v:04x}:{d:04x}"),
                _ => String::new(),
            }
        ));
        if let Some(why) = dev.integrated_because {
            device.notes.push(format!(
                "integrated GPU ({why}): its memory is system RAM; per-process GTT/system memory is shown as Spill"
            ));
        }
        if dev.driver.as_deref().is_some_and(sysfs::display_only) {
            device
                .notes
                .push("a display controller only: no GPU engines or per-process memory".into());
        }
        let mut energy = self.energy.get(&dev.key).copied();
        sysfs::read_values(dev, &mut device, &mut energy, now);
        if let Some(e) = energy {
            self.energy.insert(dev.key.clone(), e);
        }
        if device
            .clocks
            .as_ref()
            .is_some_and(|c| *c == crate::snapshot::Clocks::default())
        {
            device.clocks = None;
        }
        device
    }

    fn device_name(&mut self, dev: &DrmDevice) -> Option<String> {
        let (Some(v), Some(d)) = (dev.vendor_id, dev.device_id) else {
            return dev.driver.clone();
        };
        let files = &self.pci_ids;
        let looked_up = self
            .names
            .entry((v, d))
            .or_insert_with(|| sysfs::pci_ids_name(files, v, d))
            .clone();
        Some(looked_up.unwrap_or_else(|| format!("{} [{v:04x}:{d:04x}]", dev.driver.as_deref().unwrap_or("GPU"))))
    }

    /// The per-process entries of one device, and the notes that go with
    /// them.
    fn attribute(
        &mut self,
        device: usize,
        index: u32,
        clients: &BTreeMap<ClientKey, Client>,
        rates: &HashMap<ClientKey, Rates>,
    ) -> Vec<GpuProcess> {
        let dev = &self.devices[device];
        let where_ = dev.pci.clone().unwrap_or_else(|| dev.key.clone());
        let mut per_pid: BTreeMap<u32, Acc> = BTreeMap::new();
        for (key, client) in clients.iter().filter(|(_, c)| c.device == device) {
            let (vram, spill, paged, shared) = split_regions(&client.info);
            let id = match &key.1 {
                Ident::Id(id) => format!("client {id}"),
                Ident::Fd(pid, fd) => format!("the client of PID {pid} fd {fd}"),
            };
            let rate = rates.get(key);
            if client.holders.len() == 1 {
                let pid = *client.holders.iter().next().expect("one holder");
                let acc = per_pid.entry(pid).or_default();
                acc.vram = add(acc.vram, vram.private);
                acc.spill = add(acc.spill, spill.private);
                acc.paged = add(acc.paged, paged.private);
                if shared > 0 {
                    self.process_notes.entry(pid).or_default().push(format!(
                        "{} of DRM buffers on {where_} ({id}) are shared with other clients (dma-buf): counted to none",
                        crate::units::bytes(Some(shared))
                    ));
                }
                match rate {
                    Some(r) if r.known => {
                        for (engine, pct) in &r.engines {
                            *acc.engines.entry(engine.clone()).or_default() += pct;
                        }
                        for (engine, pct) in &r.clamped {
                            self.process_notes.entry(pid).or_default().push(format!(
                                "engine {engine} on {where_} ({id}) measured {pct:.0}% over the sample: shown as 100%"
                            ));
                        }
                    }
                    Some(r) if !client.info.engines.is_empty() || !r.engines.is_empty() => acc.engines_unknown = true,
                    _ => {}
                }
            } else {
                let holders: Vec<String> = client.holders.iter().map(u32::to_string).collect();
                let mut held = Vec::new();
                for (label, bytes) in [("VRAM", vram.held), ("GTT/system", spill.held), ("CPU", paged.held)] {
                    if let Some(b) = bytes.filter(|b| *b > 0) {
                        held.push(format!("{label} {}", crate::units::bytes(Some(b))));
                    }
                }
                let held = if held.is_empty() {
                    "no memory".to_string()
                } else {
                    held.join(", ")
                };
                for pid in &client.holders {
                    let acc = per_pid.entry(*pid).or_default();
                    acc.engines_unknown |= !client.info.engines.is_empty();
                    self.process_notes.entry(*pid).or_default().push(format!(
                        "DRM {id} on {where_} ({held}) is held jointly by PIDs {} (an inherited or passed fd): counted to none of them",
                        holders.join(", ")
                    ));
                }
            }
        }
        let mut out = Vec::new();
        for (pid, acc) in per_pid {
            if dev.integrated && acc.spill.unwrap_or(0) >= 64 << 20 && acc.spill > acc.vram.or(Some(0)) {
                self.process_notes.entry(pid).or_default().push(format!(
                    "{} of GTT/system memory on integrated GPU {where_} is shown as Spill: system RAM the GPU maps, where an integrated GPU keeps its data (VRAM shows only the small carve-out)",
                    crate::units::bytes(acc.spill)
                ));
            }
            let kfd = self.fd_state.get(&pid).is_some_and(|s| s.kfd.is_some());
            if kfd && dev.driver.as_deref() == Some("amdgpu") {
                self.process_notes.entry(pid).or_default().push(
                    "uses ROCm/HIP (/dev/kfd): its compute queues run outside DRM, so their work is missing from the engine %".into(),
                );
            }
            let engines = if acc.engines_unknown {
                BTreeMap::new()
            } else {
                acc.engines
                    .into_iter()
                    .map(|(name, pct)| (name, pct.clamp(0.0, 100.0).round() as u32))
                    .collect()
            };
            out.push(GpuProcess {
                pid,
                usage: GpuUsage {
                    device: index,
                    vram_bytes: acc.vram,
                    spill_bytes: acc.spill,
                    paged_bytes: acc.paged,
                    source: "drm".into(),
                    // The fd's owner itself: nothing was paired.
                    pairing: None,
                    contexts: Vec::new(),
                    engines,
                },
            });
        }
        out
    }
}

#[derive(Debug)]
struct Client {
    device: usize,
    info: fdinfo::Fdinfo,
    holders: BTreeSet<u32>,
}

#[derive(Debug, Default)]
struct Rates {
    /// Percent per engine (clamped to 100).
    engines: BTreeMap<String, f64>,
    /// Engines whose rate came out over 100%, with the rate.
    clamped: Vec<(String, f64)>,
    /// Every engine with counters had a previous reading.
    known: bool,
}

#[derive(Debug, Default)]
struct Acc {
    vram: Option<u64>,
    spill: Option<u64>,
    paged: Option<u64>,
    engines: BTreeMap<String, f64>,
    engines_unknown: bool,
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

/// Where a memory region's bytes belong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Device-local memory.
    Vram,
    /// System RAM the GPU maps (GTT, i915/xe system, SoC memory).
    Spill,
    /// amdgpu's CPU domain: out of the GPU's reach.
    Paged,
    /// Stolen memory, amdgpu's GDS/GWS/OA/doorbells: not summed.
    Other,
}

fn class(region: &str) -> Class {
    let base = region.trim_end_matches(|c: char| c.is_ascii_digit());
    match base {
        "vram" | "local" | "lmem" => Class::Vram,
        "gtt" | "system" | "smem" | "memory" => Class::Spill,
        "cpu" => Class::Paged,
        _ => Class::Other,
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Bytes {
    held: Option<u64>,
    private: Option<u64>,
}

/// VRAM, spill and paged bytes of a client (held, and private), and the
/// bytes it shares with other clients.
fn split_regions(info: &fdinfo::Fdinfo) -> (Bytes, Bytes, Bytes, u64) {
    let (mut vram, mut spill, mut paged) = (Bytes::default(), Bytes::default(), Bytes::default());
    let mut shared = 0u64;
    for (name, region) in &info.regions {
        let slot = match class(name) {
            Class::Vram => &mut vram,
            Class::Spill => &mut spill,
            Class::Paged => &mut paged,
            Class::Other => continue,
        };
        slot.held = add(slot.held, region.held());
        slot.private = add(slot.private, region.private());
        shared = shared.saturating_add(region.shared.unwrap_or(0));
    }
    (vram, spill, paged, shared)
}

/// One engine's busy percent since `before`, and the marks to keep. Busy
/// nanoseconds over wall time when the driver gives them; else busy cycles
/// over total cycles; else busy cycles over the top frequency. Divided by
/// the engine count. A counter that went backwards keeps the older, larger
/// value (the spec asks for that) and gives no rate this time.
fn engine_rate(engine: &fdinfo::Engine, before: EngineMark, now: Duration) -> (EngineMark, Option<f64>) {
    let capacity = engine.capacity.unwrap_or(1).max(1) as f64;
    let mut mark = before;
    let mut pct = None;
    if let Some(busy) = engine.busy_ns {
        match before.busy_ns {
            // Backwards: no progress past the larger value yet.
            Some((prev, _)) if busy < prev => pct = Some(0.0),
            Some((prev, at)) => {
                let wall = now.saturating_sub(at).as_nanos() as f64;
                if wall > 0.0 {
                    pct = Some((busy - prev) as f64 / wall / capacity * 100.0);
                    mark.busy_ns = Some((busy, now));
                }
            }
            None => mark.busy_ns = Some((busy, now)),
        }
        return (mark, pct);
    }
    if let Some(cycles) = engine.cycles {
        // The second figure is the engine's clock in cycles (total-cycles)
        // or, with only maxfreq, wall time at the top frequency.
        let clock = match (engine.total_cycles, engine.maxfreq_hz) {
            (Some(total), _) => Some(total),
            (None, Some(hz)) => Some((now.as_secs_f64() * hz as f64) as u64),
            (None, None) => None,
        };
        let Some(clock) = clock else {
            return (mark, None);
        };
        match before.cycles {
            // The engine clock went backwards (a reset): start again.
            Some((_, prev_clock)) if clock < prev_clock => mark.cycles = Some((cycles, clock)),
            Some((prev, _)) if cycles < prev => pct = Some(0.0),
            Some((prev, prev_clock)) => {
                if clock > prev_clock {
                    pct = Some((cycles - prev) as f64 / (clock - prev_clock) as f64 / capacity * 100.0);
                    mark.cycles = Some((cycles, clock));
                }
            }
            None => mark.cycles = Some((cycles, clock)),
        }
    }
    (mark, pct)
}

/// Looks at a process's fds: the DRM ones (links to /dev/dri/*) and
/// whether /dev/kfd is open. With what the last look found (`previous`, and
/// the DRM fds then, `known`), only new fd numbers have their link read,
/// except on every [`DEEP_EVERY`]th look.
fn scan_fds(proc_root: &Path, pid: u32, previous: Option<&FdState>, known: &[DrmFd]) -> FdScan {
    let dir = proc_root.join(pid.to_string()).join("fd");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return FdScan::Denied,
        Err(_) => return FdScan::Gone,
    };
    let visits = previous.map_or(0, |p| p.visits + 1);
    let shallow = previous.filter(|_| (visits + pid) % DEEP_EVERY != 0);
    let mut fds = Vec::new();
    let mut state = FdState {
        visits,
        ..FdState::default()
    };
    let mut links = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(fd) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        state.numbers.push(fd);
        if let Some(prev) = shallow {
            if prev.numbers.binary_search(&fd).is_ok() {
                if let Some(d) = known.iter().find(|d| d.fd == fd) {
                    fds.push(d.clone());
                } else if prev.kfd == Some(fd) {
                    state.kfd = Some(fd);
                }
                continue;
            }
        }
        // An fd closed since the listing has no link: skip it. A link we
        // may not read (a restricted process) makes the process unreadable.
        links += 1;
        let target = match std::fs::read_link(entry.path()) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::PermissionDenied => return FdScan::Denied,
            Err(_) => continue,
        };
        let Some(target) = target.to_str() else {
            continue;
        };
        if let Some(node) = target.strip_prefix("/dev/dri/") {
            if !node.is_empty() && !node.contains('/') {
                fds.push(DrmFd {
                    fd,
                    node: node.to_string(),
                });
            }
        } else if target == "/dev/kfd" {
            state.kfd = Some(fd);
        }
    }
    state.numbers.sort_unstable();
    fds.sort_by_key(|f| f.fd);
    FdScan::Found(fds, state, links)
}

fn device_label(d: &DrmDevice) -> String {
    format!(
        "{} {}",
        d.driver.as_deref().unwrap_or("no driver"),
        d.pci.as_deref().unwrap_or(&d.key)
    )
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
mod tests {
    use super::*;
    use crate::snapshot::{Clocks, Pcie};
    use std::sync::{Arc, Mutex};

    const MIB: u64 = 1 << 20;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/drm").join(name)
    }

    /// Copies a tree, links as links, so a test can change it.
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
            } else if kind.is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }

    struct Fixture {
        source: DrmSource,
        time: Arc<Mutex<Duration>>,
        root: PathBuf,
        _copy: Option<tempfile::TempDir>,
    }

    impl Fixture {
        /// The fixture as committed (read only).
        fn open(name: &str) -> Fixture {
            Fixture::at(fixture(name), None)
        }

        /// A private copy the test may change.
        fn copy(name: &str) -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            copy_tree(&fixture(name), dir.path());
            Fixture::at(dir.path().to_path_buf(), Some(dir))
        }

        fn at(root: PathBuf, copy: Option<tempfile::TempDir>) -> Fixture {
            let mut source = DrmSource::new(root.join("proc"), root.join("sys"));
            source.set_pci_ids(vec![fixture("pci.ids")]);
            let time = Arc::new(Mutex::new(Duration::ZERO));
            let clock = time.clone();
            source.set_clock(move || *clock.lock().unwrap());
            Fixture {
                source,
                time,
                root,
                _copy: copy,
            }
        }

        fn sample_at(&mut self, secs: f64, only: Option<u32>) -> Sample {
            *self.time.lock().unwrap() = Duration::from_secs_f64(secs);
            self.source.sample(only).expect("the sample reads")
        }

        /// Rewrites one line of a fixture file (`key:` to the new value).
        fn set(&self, file: &str, key: &str, value: &str) {
            let path = self.root.join(file);
            let text = std::fs::read_to_string(&path).unwrap();
            let mut found = false;
            let out: Vec<String> = text
                .lines()
                .map(|l| {
                    if l.split(':').next() == Some(key) {
                        found = true;
                        format!("{key}:\t{value}")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            assert!(found, "{key} in {file}");
            std::fs::write(&path, out.join("\n") + "\n").unwrap();
        }
    }

    fn usage(sample: &Sample, pid: u32) -> &GpuUsage {
        let found: Vec<&GpuProcess> = sample.processes.iter().filter(|p| p.pid == pid).collect();
        assert_eq!(found.len(), 1, "one entry for PID {pid}: {:?}", sample.processes);
        &found[0].usage
    }

    fn pids(sample: &Sample) -> Vec<u32> {
        sample.processes.iter().map(|p| p.pid).collect()
    }

    fn engines(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn has_note(notes: &[String], part: &str) -> bool {
        notes.iter().any(|n| n.contains(part))
    }

    #[test]
    fn amdgpu_discrete_card_value_by_value() {
        let mut f = Fixture::open("amdgpu-dgpu");
        let s = f.sample_at(0.0, None);
        assert_eq!(s.devices.len(), 1);
        let d = &s.devices[0];
        assert_eq!(d.index, 0);
        assert_eq!(d.backend, "drm");
        assert_eq!(d.vendor, "AMD");
        assert_eq!(
            d.name.as_deref(),
            Some("Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]")
        );
        assert_eq!(d.pci_bus_id.as_deref(), Some("0000:03:00.0"));
        assert_eq!(d.uuid, None);
        assert_eq!(d.driver_version, None);
        assert_eq!(d.memory_total_bytes, Some(25_753_026_560));
        assert_eq!(d.memory_used_bytes, Some(6 << 30));
        assert_eq!(d.memory_free_bytes, Some(25_753_026_560 - (6 << 30)));
        assert_eq!(d.shared_memory_used_bytes, Some(512 * MIB));
        assert_eq!(d.gpu_util_percent, Some(37));
        assert_eq!(d.memory_activity_percent, Some(12));
        assert_eq!(d.temperature_c, Some(45), "the edge sensor");
        assert_eq!(d.power_w, Some(87.0));
        assert_eq!(d.power_limit_w, Some(327.0));
        assert_eq!(d.fan_percent, Some(30));
        assert_eq!(
            d.clocks,
            Some(Clocks {
                graphics_mhz: Some(1838),
                sm_mhz: None,
                memory_mhz: Some(1250),
                graphics_max_mhz: Some(2526),
                memory_max_mhz: Some(1250),
            })
        );
        assert_eq!(
            d.pcie,
            Some(Pcie {
                link_gen: Some(4),
                link_width: Some(16),
                max_link_gen: Some(4),
                max_link_width: Some(16),
                tx_bytes_per_s: None,
                rx_bytes_per_s: None,
            })
        );
        assert!(d.process_list_complete);
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        assert!(
            has_note(&d.notes, "driver amdgpu; nodes card0, renderD128; PCI id 1002:744c"),
            "{:?}",
            d.notes
        );
        assert!(has_note(
            &d.notes,
            "GTT (system RAM the GPU maps): 512.0 MiB used of 16.00 GiB"
        ));
        assert!(!has_note(&d.notes, "CPU-visible"), "all VRAM is visible: no note");
        assert!(!has_note(&d.notes, "integrated"));

        // 1400 holds no DRM fd; 1500 exited (no fdinfo); 1600 is a zombie.
        assert_eq!(pids(&s), [1000, 1001, 1200, 1300]);
        for p in &s.processes {
            assert_eq!(p.usage.device, 0);
            assert_eq!(p.usage.source, "drm");
            assert_eq!(p.usage.pairing, None, "an fd's owner is not a pairing");
            assert!(p.usage.contexts.is_empty());
            assert!(p.usage.engines.is_empty(), "no rate from one sample");
        }
        // Client 217 is held by 1000 and 1001: counted to neither.
        let u = usage(&s, 1000);
        assert_eq!((u.vram_bytes, u.spill_bytes, u.paged_bytes), (None, None, None));
        let u = usage(&s, 1001);
        assert_eq!(
            (u.vram_bytes, u.spill_bytes, u.paged_bytes),
            (Some(512 * MIB), Some(2 * MIB), Some(0))
        );
        // Client 300 shares 64 MiB of its 1.5 GiB: the private 1472 MiB count.
        let u = usage(&s, 1200);
        assert_eq!(
            (u.vram_bytes, u.spill_bytes, u.paged_bytes),
            (Some(1472 * MIB), Some(128 * MIB), Some(0))
        );
        let u = usage(&s, 1300);
        assert_eq!(
            (u.vram_bytes, u.spill_bytes, u.paged_bytes),
            (Some(256 * MIB), Some(16 * MIB), Some(0))
        );

        let notes = f.source.take_process_notes();
        let joint = "DRM client 217 on 0000:03:00.0 (VRAM 4.00 GiB, GTT/system 256.0 MiB) is held jointly by PIDs 1000, 1001 (an inherited or passed fd): counted to none of them";
        assert!(has_note(&notes[&1000], joint), "{notes:?}");
        assert!(has_note(&notes[&1001], joint));
        assert!(has_note(&notes[&1000], "uses ROCm/HIP (/dev/kfd)"));
        assert!(!notes.get(&1001).is_some_and(|n| has_note(n, "ROCm")));
        assert!(has_note(
            &notes[&1200],
            "64.0 MiB of DRM buffers on 0000:03:00.0 (client 300) are shared with other clients (dma-buf): counted to none"
        ));
        assert!(!notes.contains_key(&1300));

        let stats = f.source.scan_stats();
        assert_eq!(stats.holders, 4);
        assert_eq!(stats.clients, 4);
        assert_eq!(stats.denied, 0);
        assert!(stats.full_scan);
        let b = f.source.backend();
        assert_eq!(b.status, BackendStatus::Ok);
        assert_eq!(b.detail, "1 device: amdgpu 0000:03:00.0; 4 processes with DRM clients");
    }

    #[test]
    fn a_client_reached_through_several_fds_and_processes_counts_once() {
        let mut f = Fixture::open("amdgpu-dgpu");
        let s = f.sample_at(0.0, None);
        let sum: u64 = s.processes.iter().filter_map(|p| p.usage.vram_bytes).sum();
        // 512 MiB (client 218) + 1472 MiB (300) + 256 MiB (100); client
        // 217's 4 GiB, seen through three fds in two processes, in none.
        assert_eq!(sum, (512 + 1472 + 256) * MIB);
        // Six DRM fds, and the one of 1500, which exited (ENOENT): tried
        // once, then forgotten.
        assert_eq!(f.source.scan_stats().fdinfo_read, 7);
        f.sample_at(1.0, None);
        assert_eq!(f.source.scan_stats().fdinfo_read, 6);
    }

    #[test]
    fn engine_percent_comes_from_two_samples() {
        let mut f = Fixture::copy("amdgpu-dgpu");
        *f.time.lock().unwrap() = Duration::from_secs(10);
        f.source.prime();
        assert!(f.source.take_process_notes().is_empty(), "priming leaves no notes");
        f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "5500000000 ns");
        f.set("proc/1300/fdinfo/12", "drm-engine-gfx", "2250000000 ns");
        let s = f.sample_at(11.0, None);
        assert_eq!(
            usage(&s, 1200).engines,
            engines(&[("compute", 0), ("dma", 0), ("gfx", 50)])
        );
        assert_eq!(usage(&s, 1300).engines, engines(&[("gfx", 25)]));
        // A process with a jointly held client has no engine figure of its own.
        assert!(usage(&s, 1000).engines.is_empty());
        assert!(usage(&s, 1001).engines.is_empty());
        assert!(!f.source.scan_stats().full_scan);
    }

    #[test]
    fn a_counter_going_backwards_keeps_the_larger_value_and_over_100_is_clamped() {
        let mut f = Fixture::copy("amdgpu-dgpu");
        f.sample_at(0.0, None);
        f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "5500000000 ns");
        assert_eq!(usage(&f.sample_at(1.0, None), 1200).engines["gfx"], 50);
        // Backwards: no progress past 5.5 s of busy time yet.
        f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "5400000000 ns");
        assert_eq!(usage(&f.sample_at(2.0, None), 1200).engines["gfx"], 0);
        // Caught up: measured from the larger value, 2.3 s busy in 2 s.
        f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "7800000000 ns");
        let s = f.sample_at(3.0, None);
        assert_eq!(usage(&s, 1200).engines["gfx"], 100);
        let notes = f.source.take_process_notes();
        assert!(
            has_note(
                &notes[&1200],
                "engine gfx on 0000:03:00.0 (client 300) measured 115% over the sample: shown as 100%"
            ),
            "{notes:?}"
        );
    }

    #[test]
    fn an_apu_model_in_gtt_is_spill_with_a_note() {
        let mut f = Fixture::open("amdgpu-apu");
        let s = f.sample_at(0.0, None);
        let d = &s.devices[0];
        assert_eq!(d.name.as_deref(), Some("Phoenix1"));
        assert_eq!(d.memory_total_bytes, Some(512 * MIB));
        assert_eq!(d.memory_used_bytes, Some(100 * MIB));
        assert_eq!(d.shared_memory_used_bytes, Some(26_214_400_000));
        assert_eq!(d.gpu_util_percent, Some(88));
        assert_eq!(d.memory_activity_percent, Some(0), "a measured 0 stays 0");
        assert_eq!(d.temperature_c, Some(61));
        assert_eq!(d.power_w, Some(25.0));
        assert_eq!(d.power_limit_w, None);
        assert_eq!(d.fan_percent, None);
        let clocks = d.clocks.as_ref().unwrap();
        assert_eq!(
            (clocks.graphics_mhz, clocks.graphics_max_mhz, clocks.memory_mhz),
            (Some(2700), Some(2700), None)
        );
        assert!(
            has_note(&d.notes, "integrated GPU (an AMD APU (no VRAM vendor))"),
            "{:?}",
            d.notes
        );
        assert!(has_note(&d.notes, "VRAM here is a 512.0 MiB carve-out of system RAM"));

        let u = usage(&s, 2000);
        assert_eq!(u.vram_bytes, Some(5348 * 1024));
        assert_eq!(u.spill_bytes, Some(25_258_000 * 1024));
        assert_eq!(u.paged_bytes, Some(0));
        let u = usage(&s, 2100);
        assert_eq!((u.vram_bytes, u.spill_bytes), (Some(64 * MIB), Some(12 * MIB)));
        let notes = f.source.take_process_notes();
        assert!(
            has_note(
                &notes[&2000],
                "24.09 GiB of GTT/system memory on integrated GPU 0000:c4:00.0 is shown as Spill"
            ),
            "{notes:?}"
        );
        assert!(has_note(&notes[&2000], "ROCm/HIP"));
        assert!(!notes.contains_key(&2100), "12 MiB of GTT is no story");
    }

    #[test]
    fn intel_igpu_and_arc_with_local_memory_after_nvml_devices() {
        let mut f = Fixture::copy("intel");
        f.source.set_index_base(2);
        let s = f.sample_at(0.0, None);
        assert_eq!(s.devices.iter().map(|d| d.index).collect::<Vec<_>>(), [2, 3]);
        let (igpu, arc) = (&s.devices[0], &s.devices[1]);
        assert_eq!(igpu.pci_bus_id.as_deref(), Some("0000:00:02.0"));
        assert_eq!(igpu.vendor, "Intel");
        assert_eq!(igpu.name.as_deref(), Some("Raptor Lake-S GT1 [UHD Graphics 770]"));
        let c = igpu.clocks.as_ref().unwrap();
        assert_eq!((c.graphics_mhz, c.graphics_max_mhz), (Some(350), Some(1650)));
        assert!(has_note(
            &igpu.notes,
            "integrated GPU (Intel's integrated GPU (PCI 00:02.0))"
        ));
        assert!(!has_note(&igpu.notes, "throttled"), "{:?}", igpu.notes);
        assert_eq!(igpu.memory_total_bytes, None);
        assert_eq!(igpu.pcie, None);

        assert_eq!(arc.pci_bus_id.as_deref(), Some("0000:03:00.0"));
        assert_eq!(arc.name.as_deref(), Some("DG2 [Arc A770]"));
        let c = arc.clocks.as_ref().unwrap();
        assert_eq!((c.graphics_mhz, c.graphics_max_mhz), (Some(2400), Some(2400)));
        assert!(
            has_note(&arc.notes, "throttled (gt0): PL1 (sustained power limit)"),
            "{:?}",
            arc.notes
        );
        assert!(has_note(
            &arc.notes,
            "i915 publishes neither the size nor the use of local memory"
        ));
        assert_eq!(arc.memory_total_bytes, None);
        assert_eq!(arc.power_limit_w, Some(190.0));
        assert_eq!(arc.power_w, None, "power needs two energy readings");
        assert_eq!(arc.temperature_c, None);
        assert_eq!(arc.pcie.as_ref().unwrap().link_gen, Some(1));

        let u = usage(&s, 3000);
        assert_eq!(u.device, 3);
        assert_eq!(
            (u.vram_bytes, u.spill_bytes, u.paged_bytes),
            (Some(6 << 30), Some(8 * MIB), None)
        );
        let u = usage(&s, 3100);
        assert_eq!(u.device, 2);
        assert_eq!((u.vram_bytes, u.spill_bytes), (None, Some(6044 * 1024)));
        let u = usage(&s, 3200);
        assert_eq!((u.vram_bytes, u.spill_bytes), (None, Some(96 * MIB)));
        let notes = f.source.take_process_notes();
        assert!(has_note(
            &notes[&3200],
            "32.0 MiB of DRM buffers on 0000:00:02.0 (client 2) are shared"
        ));
        assert!(has_note(
            &notes[&3200],
            "96.0 MiB of GTT/system memory on integrated GPU 0000:00:02.0"
        ));
        assert!(!notes.contains_key(&3000), "{notes:?}");

        // One second later: 2 s of compute on 4 engines, 45 J used.
        f.set("proc/3000/fdinfo/6", "drm-engine-compute", "32000000000 ns");
        std::fs::write(
            f.root.join(
                "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:03:00.0/hwmon/hwmon4/energy1_input",
            ),
            "123501789000\n",
        )
        .unwrap();
        let s = f.sample_at(1.0, Some(3));
        assert_eq!(s.devices.len(), 1, "only device 3");
        assert_eq!(s.devices[0].power_w, Some(45.0));
        assert_eq!(pids(&s), [3000]);
        assert_eq!(
            usage(&s, 3000).engines,
            engines(&[
                ("compute", 50),
                ("copy", 0),
                ("render", 0),
                ("video", 0),
                ("video-enhance", 0)
            ])
        );
    }

    #[test]
    fn xe_cycles_give_percent_and_shared_vram_is_not_counted() {
        let mut f = Fixture::copy("xe");
        let s = f.sample_at(0.0, None);
        let d = &s.devices[0];
        assert_eq!(d.name.as_deref(), Some("Battlemage G21 [Arc B580]"));
        assert_eq!(d.memory_total_bytes, Some(12 << 30));
        assert_eq!(d.memory_used_bytes, None);
        assert_eq!(d.temperature_c, Some(55), "the pkg sensor");
        assert_eq!(d.power_limit_w, Some(190.0));
        assert_eq!(d.fan_percent, None, "an rpm reading is not a percent");
        let c = d.clocks.as_ref().unwrap();
        assert_eq!((c.graphics_mhz, c.graphics_max_mhz), (Some(2850), Some(2850)));
        assert!(has_note(&d.notes, "throttled (gt0): thermal"), "{:?}", d.notes);
        assert!(!has_note(&d.notes, "throttled (gt1)"));
        assert!(has_note(&d.notes, "xe publishes the size of VRAM but not its use"));
        let u = usage(&s, 4000);
        // 23992 KiB resident, 16 MiB of it shared; gtt 192 KiB + system 0.
        assert_eq!(u.vram_bytes, Some(23992 * 1024 - 16 * MIB));
        assert_eq!(u.spill_bytes, Some(192 * 1024));
        assert_eq!(u.paged_bytes, None);
        assert!(u.engines.is_empty());

        let file = "proc/4000/fdinfo/3";
        f.set(file, "drm-cycles-rcs", &(28_257_900u64 + 500_000_000).to_string());
        f.set(file, "drm-cycles-ccs", "2000000000");
        for e in ["rcs", "bcs", "vcs", "vecs", "ccs"] {
            f.set(file, &format!("drm-total-cycles-{e}"), "8655183225");
        }
        let s = f.sample_at(1.0, None);
        assert_eq!(
            usage(&s, 4000).engines,
            engines(&[("bcs", 0), ("ccs", 50), ("rcs", 50), ("vcs", 0), ("vecs", 0)])
        );
    }

    #[test]
    fn a_soc_gpu_and_an_unknown_display_driver_with_a_malformed_fdinfo() {
        let mut f = Fixture::copy("soc");
        let s = f.sample_at(0.0, None);
        assert_eq!(s.devices.len(), 2);
        let (display, gpu) = (&s.devices[0], &s.devices[1]);
        assert_eq!(display.vendor, "unknown");
        assert_eq!(display.name.as_deref(), Some("rockchip-drm"));
        assert_eq!(display.pci_bus_id, None);
        assert!(
            has_note(&display.notes, "driver rockchip-drm; nodes card0"),
            "{:?}",
            display.notes
        );
        assert_eq!(gpu.vendor, "Arm");
        assert_eq!(gpu.name.as_deref(), Some("panfrost"));
        assert!(has_note(&gpu.notes, "driver panfrost; nodes card1, renderD128"));
        assert!(has_note(&gpu.notes, "integrated GPU (a SoC GPU (not on PCI))"));
        let u = usage(&s, 5000);
        assert_eq!(u.device, 1);
        assert_eq!((u.vram_bytes, u.spill_bytes), (None, Some(36496 * 1024)));
        let notes = f.source.take_process_notes();
        assert!(
            has_note(&notes[&5000], "fdinfo of fd 7 had 2 unreadable lines"),
            "{notes:?}"
        );

        // fragment: busy time; vertex-tiler (its ns line is broken): cycles
        // at the top frequency.
        let file = "proc/5000/fdinfo/7";
        f.set(
            file,
            "drm-engine-fragment",
            &(1_846_584_880u64 + 400_000_000).to_string(),
        );
        f.set(
            file,
            "drm-cycles-vertex-tiler",
            &(52_617_357u64 + 399_999_993).to_string(),
        );
        let s = f.sample_at(1.0, None);
        assert_eq!(
            usage(&s, 5000).engines,
            engines(&[("fragment", 40), ("vertex-tiler", 50)])
        );
    }

    #[test]
    fn processes_that_exit_or_close_mid_scan_are_normal() {
        let mut f = Fixture::copy("amdgpu-dgpu");
        assert_eq!(pids(&f.sample_at(0.0, None)), [1000, 1001, 1200, 1300]);
        // 1200 exits; 1300 closes its fd (the link and fdinfo go).
        std::fs::remove_dir_all(f.root.join("proc/1200")).unwrap();
        std::fs::remove_file(f.root.join("proc/1300/fdinfo/12")).unwrap();
        std::fs::remove_file(f.root.join("proc/1300/fd/12")).unwrap();
        let s = f.sample_at(1.0, None);
        assert_eq!(pids(&s), [1000, 1001]);
        assert!(s.devices[0].process_list_complete);
        // And once every process has been looked at again.
        let s = f.sample_at(7.0, None);
        assert_eq!(f.source.scan_stats().fd_dirs_read, 6, "all that are left");
        assert_eq!(pids(&s), [1000, 1001]);
    }

    #[test]
    fn new_processes_at_once_and_new_fds_of_known_ones_within_the_period() {
        let mut f = Fixture::copy("amdgpu-dgpu");
        f.sample_at(0.0, None);
        let text = std::fs::read_to_string(f.root.join("proc/1300/fdinfo/12"))
            .unwrap()
            .replace("drm-client-id:\t100", "drm-client-id:\t777");
        let new = f.root.join("proc/7000");
        std::fs::create_dir_all(new.join("fd")).unwrap();
        std::fs::create_dir_all(new.join("fdinfo")).unwrap();
        std::os::unix::fs::symlink("/dev/dri/renderD128", new.join("fd/3")).unwrap();
        std::fs::write(new.join("fdinfo/3"), &text).unwrap();
        // 1400, seen before, opens a DRM fd: found when its turn comes.
        std::os::unix::fs::symlink("/dev/dri/renderD128", f.root.join("proc/1400/fd/9")).unwrap();
        std::fs::create_dir_all(f.root.join("proc/1400/fdinfo")).unwrap();
        std::fs::write(
            f.root.join("proc/1400/fdinfo/9"),
            text.replace("drm-client-id:\t777", "drm-client-id:\t778"),
        )
        .unwrap();

        let s = f.sample_at(1.0, None);
        let stats = f.source.scan_stats();
        assert!(!stats.full_scan);
        // The new PID, and a fifth of the 8 known (1000 and 1001).
        assert_eq!(stats.fd_dirs_read, 1 + 2);
        assert_eq!(stats.fdinfo_read, 7);
        assert_eq!(pids(&s), [1000, 1001, 1200, 1300, 7000]);
        assert_eq!(usage(&s, 7000).vram_bytes, Some(256 * MIB));

        // Within one rescan period every process has had its turn.
        let mut picked_up = None;
        for t in 2..=5 {
            if pids(&f.sample_at(t as f64, None)).contains(&1400) {
                picked_up.get_or_insert(t);
            }
        }
        assert_eq!(picked_up, Some(3), "1200 and 1300 at 2 s, 1400 at 3 s");
    }

    #[test]
    fn every_process_is_looked_at_again_within_the_period() {
        let mut f = Fixture::open("amdgpu-dgpu");
        f.source.set_rescan_every(Duration::from_secs(2));
        f.sample_at(0.0, None);
        assert!(f.source.scan_stats().full_scan);
        assert_eq!(f.source.scan_stats().fd_dirs_read, 7);
        // Half a period: half of the 7 processes (rounded up), in turn.
        f.sample_at(1.0, None);
        assert!(!f.source.scan_stats().full_scan);
        assert_eq!(f.source.scan_stats().fd_dirs_read, 4);
        f.sample_at(2.0, None);
        assert_eq!(f.source.scan_stats().fd_dirs_read, 4);
        // A long pause: everyone once, not more.
        f.sample_at(60.0, None);
        assert_eq!(f.source.scan_stats().fd_dirs_read, 7);
    }

    #[test]
    fn an_fd_number_reused_for_a_drm_file_is_found_on_a_deep_look() {
        let mut f = Fixture::copy("amdgpu-dgpu");
        f.source.set_rescan_every(Duration::from_secs(1));
        f.sample_at(0.0, None);
        let links = f.source.scan_stats().links_read;
        assert_eq!(links, 17, "every link on the first look");
        // 1400 closes its stderr (fd 2) and opens the render node, which
        // gets the same number.
        std::fs::remove_file(f.root.join("proc/1400/fd/2")).unwrap();
        std::os::unix::fs::symlink("/dev/dri/renderD128", f.root.join("proc/1400/fd/2")).unwrap();
        std::fs::create_dir_all(f.root.join("proc/1400/fdinfo")).unwrap();
        std::fs::copy(f.root.join("proc/1300/fdinfo/12"), f.root.join("proc/1400/fdinfo/2")).unwrap();
        std::fs::write(
            f.root.join("proc/1400/fdinfo/2"),
            std::fs::read_to_string(f.root.join("proc/1300/fdinfo/12"))
                .unwrap()
                .replace("drm-client-id:\t100", "drm-client-id:\t555"),
        )
        .unwrap();
        let mut found_at = None;
        for t in 1..=(DEEP_EVERY + 1) {
            let s = f.sample_at(t as f64, None);
            if t == 1 {
                assert_eq!(f.source.scan_stats().fd_dirs_read, 7, "everyone, each second");
                assert_eq!(f.source.scan_stats().links_read, 0, "no new fd number: no link read");
            }
            if found_at.is_none() && pids(&s).contains(&1400) {
                found_at = Some(t);
            }
        }
        // The deep look at PID 1400 comes when (visits + 1400) % 12 == 0.
        assert_eq!(found_at, Some((DEEP_EVERY - 1400 % DEEP_EVERY) % DEEP_EVERY));
    }

    #[test]
    fn one_sample_looks_again_at_no_more_than_max_relist_processes() {
        let f = Fixture::copy("amdgpu-dgpu");
        for pid in 20_000..20_250 {
            let fd = f.root.join(format!("proc/{pid}/fd"));
            std::fs::create_dir_all(&fd).unwrap();
            std::os::unix::fs::symlink("/dev/null", fd.join("0")).unwrap();
        }
        let mut f = Fixture::at(f.root.clone(), f._copy);
        f.sample_at(0.0, None);
        assert_eq!(f.source.scan_stats().fd_dirs_read, 257);
        f.sample_at(60.0, None);
        assert_eq!(f.source.scan_stats().fd_dirs_read, MAX_RELIST);
        // Links only on the deep looks (one process in DEEP_EVERY).
        assert!(f.source.scan_stats().links_read < 20, "{:?}", f.source.scan_stats());
    }

    #[test]
    fn devices_nvml_reads_are_left_to_it() {
        let mut f = Fixture::open("amdgpu-dgpu");
        f.source.set_covered_pci(["00000000:03:00.0"]);
        let before = f.source.backend();
        assert_eq!(before.detail, "no DRM GPU besides the devices NVML reads");
        let s = f.sample_at(0.0, None);
        assert!(s.devices.is_empty() && s.processes.is_empty());
        let b = f.source.backend();
        assert_eq!(b.status, BackendStatus::Unavailable);
        assert_eq!(b.detail, "no DRM GPU besides the devices NVML reads");
    }

    #[test]
    fn an_unreadable_proc_is_an_error_not_an_empty_list() {
        let mut f = Fixture::open("amdgpu-dgpu");
        f.source.proc_root = PathBuf::from("/nonexistent/proc");
        let e = f.source.sample(None).unwrap_err();
        assert!(e.starts_with("cannot list /nonexistent/proc"), "{e}");
        assert_eq!(f.source.backend().status, BackendStatus::Error);
    }

    #[test]
    fn this_machine_without_a_drm_gpu_says_so_cleanly() {
        let mut source = DrmSource::new(PathBuf::from("/proc"), PathBuf::from("/sys"));
        let present = source.is_present();
        let before = source.backend();
        let sample = source
            .sample(None)
            .expect("reading the real /proc and /sys never fails here");
        if present {
            eprintln!("this machine has DRM devices: {}", source.backend().detail);
            assert_eq!(before.status, BackendStatus::Ok);
            return;
        }
        assert!(sample.devices.is_empty() && sample.processes.is_empty());
        assert_eq!(source.scan_stats().processes, 0, "no device: /proc is not even listed");
        for b in [before, source.backend()] {
            assert_eq!(b.name, "drm");
            assert_eq!(b.status, BackendStatus::Unavailable);
            assert_eq!(b.detail, "no DRM GPU (no /sys/class/drm/card*)");
        }
        assert!(source.take_process_notes().is_empty());
    }

    #[test]
    fn regions_are_classed_by_name() {
        for (name, want) in [
            ("vram", Class::Vram),
            ("vram0", Class::Vram),
            ("local0", Class::Vram),
            ("gtt", Class::Spill),
            ("system0", Class::Spill),
            ("system", Class::Spill),
            ("memory", Class::Spill),
            ("cpu", Class::Paged),
            ("stolen", Class::Other),
            ("gds", Class::Other),
        ] {
            assert_eq!(class(name), want, "{name}");
        }
    }
}

/// The benchmark behind `scripts/bench_drm.sh`: samples a generated tree
/// (GPUTASKMAN_DRM_BENCH_ROOT, with proc/ and sys/) once a "second" on a
/// driven clock, so that every fifth refresh is a full scan, and prints the
/// cost of each kind of refresh. Also times a full scan of this machine's
/// real /proc (GPUTASKMAN_DRM_BENCH_REAL_PROC=1) against the tree's /sys.
#[cfg(all(test, unix))]
mod bench {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn percentile(sorted: &[f64], p: f64) -> f64 {
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }

    /// Wall and on-CPU milliseconds: on a shared, loaded machine the second
    /// is the cost, the first what a user waits.
    fn report(label: &str, runs: Vec<(f64, f64)>) {
        for (kind, mut ms) in [
            ("wall", runs.iter().map(|r| r.0).collect::<Vec<_>>()),
            ("cpu", runs.iter().map(|r| r.1).collect()),
        ] {
            ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let mean = ms.iter().sum::<f64>() / ms.len() as f64;
            println!(
                "BENCH {label} [{kind}]: n={} mean={mean:.3} ms median={:.3} ms p95={:.3} ms min={:.3} ms",
                ms.len(),
                percentile(&ms, 0.5),
                percentile(&ms, 0.95),
                ms[0],
            );
        }
    }

    fn thread_cpu_ms() -> f64 {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a plain out-parameter.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 * 1000.0 + t.tv_nsec as f64 / 1e6
    }

    fn source(proc_root: &Path, sys_root: &Path) -> (DrmSource, Arc<Mutex<Duration>>) {
        let mut source = DrmSource::new(proc_root.to_path_buf(), sys_root.to_path_buf());
        source.set_pci_ids(Vec::new());
        let time = Arc::new(Mutex::new(Duration::ZERO));
        let clock = time.clone();
        source.set_clock(move || *clock.lock().unwrap());
        (source, time)
    }

    fn timed(source: &mut DrmSource) -> (f64, f64) {
        let (start, cpu) = (Instant::now(), thread_cpu_ms());
        let sample = source.sample(None).expect("bench sample");
        let run = (start.elapsed().as_secs_f64() * 1000.0, thread_cpu_ms() - cpu);
        std::hint::black_box(&sample);
        run
    }

    fn run(proc_root: PathBuf, sys_root: PathBuf, rounds: usize, label: &str) {
        // The first sample of a new source reads every fd link of every
        // process.
        let first: Vec<(f64, f64)> = (0..rounds.div_ceil(20).max(5))
            .map(|_| timed(&mut source(&proc_root, &sys_root).0))
            .collect();
        // Then a sample a second: new PIDs, a fifth of the others (the fd
        // list; links of new fd numbers; every link on each 12th look), the
        // fdinfo of the known DRM fds.
        let (mut source, time) = source(&proc_root, &sys_root);
        let mut steady = Vec::new();
        let mut links = 0;
        for round in 0..rounds + 5 {
            *time.lock().unwrap() = Duration::from_secs(round as u64);
            let run = timed(&mut source);
            if round >= 5 {
                steady.push(run); // after a warm-up
                links += source.scan_stats().links_read;
            }
        }
        println!(
            "BENCH {label}: last sample {:?}; links read per refresh {:.0}",
            source.scan_stats(),
            links as f64 / rounds as f64
        );
        report(&format!("{label} first sample (every fd link of every process)"), first);
        report(&format!("{label} refresh at 1 s"), steady);
        // The values alone: a refresh with no PID due (no time passed).
        let values: Vec<(f64, f64)> = (0..rounds).map(|_| timed(&mut source)).collect();
        report(
            &format!("{label} values only (list /proc, reread known DRM fdinfo)"),
            values,
        );
    }

    #[test]
    #[ignore = "a benchmark: scripts/bench_drm.sh runs it"]
    fn bench_drm_scan() {
        let Some(root) = std::env::var_os("GPUTASKMAN_DRM_BENCH_ROOT").map(PathBuf::from) else {
            eprintln!("set GPUTASKMAN_DRM_BENCH_ROOT (scripts/bench_drm.sh does)");
            return;
        };
        let rounds: usize = std::env::var("GPUTASKMAN_DRM_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(500);
        run(root.join("proc"), root.join("sys"), rounds, "fixture");
        if std::env::var_os("GPUTASKMAN_DRM_BENCH_REAL_PROC").is_some() {
            run(PathBuf::from("/proc"), root.join("sys"), rounds / 5, "real /proc");
        }
    }
}
