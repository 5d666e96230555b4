//! Who used the GPU and what it cost: GPU time, memory-time and energy per
//! process and per GPU, integrated over a run of snapshots. Pure: snapshots
//! in, totals out; `serve`, `record`'s summary and the live view feed it.
//!
//! Over each interval between two snapshots that both list a device:
//! - the GPU's energy is the driver's counter difference where it has one
//!   ([`Obtained::Measured`]; a counter that went back, or jumped further
//!   than any card draws, restarted with a driver reload: that interval
//!   falls back to power), else the mean of the two power readings times
//!   the interval ([`Obtained::Integrated`]);
//! - a process's busy share is its engine figure of the later snapshot (NVML
//!   gives SM samples over the window since the last read, DRM engine time
//!   over the window): times the interval, GPU-seconds;
//! - the GPU's energy is attributed by busy share ([`Obtained::Attributed`]);
//!   shares over 1 in sum (MPS, overlapping engines) are scaled to 1; what
//!   no process kept busy is the GPU's idle energy, kept apart, never
//!   spread. Where a share is unknown, the interval's energy is unattributed.
//! - memory-time is the mean of the two measured VRAM readings times the
//!   interval.
//!
//! A process counts over an interval only when both snapshots list it on the
//! device, so its totals start at 0 when first seen (what a counter that
//! Prometheus's `increase()` reads must do); the busy share of one seen
//! only in the later snapshot goes to the unattributed energy. An interval
//! longer than the gap limit is not counted: it is a gap, said as such,
//! never filled in.

use crate::snapshot::{Container, Device, GpuUsage, Process, Snapshot};
use crate::units::unix_seconds;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How a figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Obtained {
    /// Read from the driver: an energy counter, engine time (DRM fdinfo).
    Measured,
    /// The GPU's energy shared out by busy share.
    Attributed,
    /// A sampled rate times time: power × time, SM share × time, bytes × time.
    Integrated,
}

/// How a sum of figures was obtained: `integrated`, `measured+integrated`.
pub fn words(set: &BTreeSet<Obtained>) -> String {
    set.iter().map(|o| o.word()).collect::<Vec<_>>().join("+")
}

impl Obtained {
    pub fn word(self) -> &'static str {
        match self {
            Obtained::Measured => "measured",
            Obtained::Attributed => "attributed",
            Obtained::Integrated => "integrated",
        }
    }
}

/// More than any GPU draws (the largest boards are near 1.5 kW): a counter
/// difference past this over an interval is a restart, not energy.
const MAX_PLAUSIBLE_WATTS: f64 = 10_000.0;

/// The longest interval counted between snapshots taken every
/// `interval_s`: three intervals and a second (a late sample, a slow driver
/// call, is not a gap; a stopped sampler or a suspended laptop is).
pub fn gap_limit(interval_s: f64) -> f64 {
    interval_s * 3.0 + 1.0
}

/// The usual step between snapshots taken at `times` (Unix seconds, in
/// order): the median of the forward steps, 1 s where there are none.
pub fn median_step(times: &[f64]) -> f64 {
    let mut steps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0.0).collect();
    steps.sort_by(f64::total_cmp);
    steps.get(steps.len().saturating_sub(1) / 2).copied().unwrap_or(1.0)
}

/// How Prometheus forgets a series that stops (its default lookback): a
/// process that exited keeps its counters this long in `serve`.
pub const KEEP_EXITED_S: f64 = 300.0;

/// One GPU's totals.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceTotals {
    /// UUID, else PCI bus id, else backend and index: the device across runs.
    pub id: String,
    pub index: u32,
    /// `0`, or `0/1` for a MIG instance.
    pub label: String,
    pub backend: String,
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// Measured: energy from the driver's counter.
    pub energy_counter_j: Option<f64>,
    /// Integrated: power × time, over intervals without a usable counter.
    pub energy_integrated_j: Option<f64>,
    /// Of the energy above: what no process kept busy.
    pub idle_energy_j: Option<f64>,
    /// Of the energy above: intervals whose busy shares were not all known.
    pub unattributed_energy_j: Option<f64>,
    /// Integrated: the device's busy share (its utilization) × time.
    pub busy_seconds: Option<f64>,
    /// Times the counter restarted (driver reload) or jumped.
    pub counter_resets: u32,
    /// Seconds of counted intervals.
    pub covered_s: f64,
}

impl DeviceTotals {
    /// All the device's energy, with how each part was obtained.
    pub fn energy_parts(&self) -> Vec<(f64, Obtained)> {
        [
            (self.energy_counter_j, Obtained::Measured),
            (self.energy_integrated_j, Obtained::Integrated),
        ]
        .into_iter()
        .filter_map(|(v, how)| v.map(|v| (v, how)))
        .collect()
    }
}

/// One process on one device, with one model label (a model found later
/// starts a row of its own, so each row's labels never change).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ProcessKey {
    pub pid: u32,
    pub start_time: Option<String>,
    /// [`DeviceTotals::id`].
    pub device: String,
    pub model: Option<String>,
}

impl ProcessKey {
    /// The least key of a PID: `range(first_of(pid)..)` starts at its rows.
    pub fn first_of(pid: u32) -> ProcessKey {
        ProcessKey {
            pid,
            start_time: None,
            device: String::new(),
            model: None,
        }
    }

    /// A process's row on a device: its model by the first label it has.
    fn of(p: &Process, device: String) -> ProcessKey {
        ProcessKey {
            pid: p.pid,
            start_time: p.start_time.clone(),
            device,
            model: p.models.iter().find_map(|m| m.label()).map(str::to_string),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessTotals {
    #[serde(flatten)]
    pub key: ProcessKey,
    pub device_label: String,
    pub name: Option<String>,
    pub user: Option<String>,
    /// The container's name, else its id's first 12 digits.
    pub container: Option<String>,
    pub pod: Option<String>,
    pub namespace: Option<String>,
    /// Busy share × time; null when the share was never known.
    pub gpu_seconds: Option<f64>,
    /// `measured` (DRM engine time) or `integrated` (NVML SM samples).
    pub gpu_seconds_obtained: Obtained,
    /// Integrated: measured VRAM × time, byte-seconds.
    pub memory_byte_seconds: Option<f64>,
    /// Attributed: its busy share of the GPU's energy.
    pub energy_j: Option<f64>,
    /// Unix seconds.
    pub first_seen: f64,
    pub last_seen: f64,
}

/// The totals of a run of snapshots.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// An interval longer than this is a gap.
    max_interval_s: f64,
    last: Option<Reading>,
    pub devices: BTreeMap<String, DeviceTotals>,
    pub processes: BTreeMap<ProcessKey, ProcessTotals>,
    /// Unix seconds of the first and last snapshots observed.
    pub first: Option<f64>,
    pub last_at: Option<f64>,
    /// Seconds of counted intervals.
    pub covered_s: f64,
    /// Intervals over the limit, and their seconds: not counted.
    pub gaps: u32,
    pub gap_s: f64,
}

/// What one interval needs of the snapshot before it.
#[derive(Debug, Clone)]
struct Reading {
    at: f64,
    /// By device id: energy counter, power.
    devices: HashMap<String, (Option<u64>, Option<f64>)>,
    /// By (pid, start time, device id): measured VRAM.
    held: HashMap<(u32, Option<String>, String), Option<u64>>,
}

/// The device across runs.
pub fn device_id(d: &Device) -> String {
    match (&d.uuid, &d.pci_bus_id) {
        (Some(u), _) => u.clone(),
        (None, Some(b)) => b.to_ascii_lowercase(),
        (None, None) => format!("{}:{}", d.backend, d.index),
    }
}

/// How a container is named in labels and roll-ups: its name, else the
/// first 12 digits of its id (as `docker ps` shows it).
pub fn container_label(c: &Container) -> String {
    c.name.clone().unwrap_or_else(|| c.id.chars().take(12).collect())
}

/// A usage entry's busy share (0 to 1) and how it was obtained: NVML's SM
/// share (samples, so integrated); elsewhere the busiest engine (DRM's
/// engine time over the window: measured). None when the source cannot say.
pub fn busy_share(g: &GpuUsage) -> Option<(f64, Obtained)> {
    if g.source == "nvml" {
        return g
            .engines
            .get("sm")
            .map(|sm| (f64::from((*sm).min(100)) / 100.0, Obtained::Integrated));
    }
    // Clamped: a share over 100% (plausible::check should have refused it)
    // would book more GPU time than wall time.
    g.engines
        .values()
        .max()
        .map(|v| (f64::from((*v).min(100)) / 100.0, Obtained::Measured))
}

/// Per (device index in this snapshot): each process's entry on it, the one
/// of the device's own backend where two sources list it (never both).
fn entries_by_device(snap: &Snapshot) -> BTreeMap<u32, Vec<(&Process, &GpuUsage)>> {
    let backend: HashMap<u32, &str> = snap.devices.iter().map(|d| (d.index, d.backend.as_str())).collect();
    let mut out: BTreeMap<u32, Vec<(&Process, &GpuUsage)>> = BTreeMap::new();
    for p in &snap.processes {
        let mut seen = BTreeSet::new();
        let own = p
            .gpu
            .iter()
            .filter(|g| backend.get(&g.device) == Some(&g.source.as_str()));
        let others = p
            .gpu
            .iter()
            .filter(|g| backend.get(&g.device) != Some(&g.source.as_str()));
        for g in own.chain(others) {
            if seen.insert(g.device) {
                out.entry(g.device).or_default().push((p, g));
            }
        }
    }
    out
}

/// Whether every process's busy share on `d` is known, so its energy can
/// be shared out: the driver lists them all (an incomplete list hides
/// some), none is on a MIG instance (a MIG GPU's processes are on its
/// instances), and each has a share.
fn every_share_known(snap: &Snapshot, d: &Device, on: &[(&Process, &GpuUsage)]) -> bool {
    d.process_list_complete
        && !snap.devices.iter().any(|i| i.parent == Some(d.index))
        && on.iter().all(|(_, g)| busy_share(g).is_some())
}

fn add(total: &mut Option<f64>, v: f64) {
    *total = Some(total.unwrap_or(0.0) + v);
}

/// The GPU's energy over an interval, and how obtained; counts a restart.
fn interval_energy(
    before: (Option<u64>, Option<f64>),
    after: (Option<u64>, Option<f64>),
    dt: f64,
    resets: &mut u32,
) -> Option<(f64, Obtained)> {
    if let (Some(e0), Some(e1)) = (before.0, after.0) {
        let joules = e1.checked_sub(e0).map(|mj| mj as f64 / 1000.0);
        match joules {
            Some(j) if j <= MAX_PLAUSIBLE_WATTS * dt => return Some((j, Obtained::Measured)),
            _ => *resets += 1,
        }
    }
    match (before.1, after.1) {
        (Some(p0), Some(p1)) => Some(((p0 + p1) / 2.0 * dt, Obtained::Integrated)),
        _ => None,
    }
}

impl Ledger {
    /// Intervals longer than `max_interval_s` are gaps.
    pub fn new(max_interval_s: f64) -> Ledger {
        Ledger {
            max_interval_s,
            ..Ledger::default()
        }
    }

    /// The gap limit it was made with.
    pub fn max_interval_s(&self) -> f64 {
        self.max_interval_s
    }

    /// Adds a snapshot, which must be later than the one before (an
    /// earlier or unreadable time is skipped).
    pub fn observe(&mut self, snap: &Snapshot) {
        let Some(at) = unix_seconds(&snap.taken_at) else { return };
        if self.last.as_ref().is_some_and(|r| at <= r.at) {
            return;
        }
        let entries = entries_by_device(snap);
        self.note_rows(snap, &entries, at);
        if let Some(before) = self.last.take() {
            let dt = at - before.at;
            if dt > self.max_interval_s {
                self.gaps += 1;
                self.gap_s += dt;
            } else {
                self.covered_s += dt;
                for d in &snap.devices {
                    let on = entries.get(&d.index).map_or(&[][..], Vec::as_slice);
                    self.interval(&before, snap, d, on, dt);
                }
            }
        }
        self.first.get_or_insert(at);
        self.last_at = Some(at);
        self.last = Some(Reading {
            at,
            // A stale device (lost, or its driver hung) repeats its last
            // values: no interval starts or ends on them.
            devices: snap
                .devices
                .iter()
                .filter(|d| !d.stale)
                .map(|d| (device_id(d), (d.energy_mj, d.power_w)))
                .collect(),
            held: entries
                .iter()
                .flat_map(|(index, on)| {
                    let id = snap.devices.iter().find(|d| d.index == *index).map(device_id);
                    on.iter()
                        .filter_map(move |(p, g)| Some(((p.pid, p.start_time.clone(), id.clone()?), g.vram_bytes)))
                })
                .collect(),
        });
    }

    /// Every device and process row the snapshot lists, created at 0 where
    /// its figure is known now (null where not), labels refreshed.
    fn note_rows(&mut self, snap: &Snapshot, entries: &BTreeMap<u32, Vec<(&Process, &GpuUsage)>>, at: f64) {
        for d in &snap.devices {
            let t = self.devices.entry(device_id(d)).or_default();
            t.id = device_id(d);
            t.index = d.index;
            t.label = d.label();
            t.backend.clone_from(&d.backend);
            t.name.clone_from(&d.name);
            t.uuid.clone_from(&d.uuid);
            let Some(on) = entries.get(&d.index) else { continue };
            // Energy is shared out only where every share is known
            // (`interval`): elsewhere a row's energy stays null, never a 0
            // that reads as "used nothing".
            let attributable = (d.energy_mj.is_some() || d.power_w.is_some()) && every_share_known(snap, d, on);
            for (p, g) in on {
                let key = ProcessKey::of(p, device_id(d));
                let share = busy_share(g);
                let row = self.processes.entry(key.clone()).or_insert_with(|| ProcessTotals {
                    key,
                    device_label: d.label(),
                    name: p.name.clone(),
                    user: p.user.clone(),
                    container: p.container.as_ref().map(container_label),
                    pod: p.container.as_ref().and_then(|c| c.pod.clone()),
                    namespace: p.container.as_ref().and_then(|c| c.namespace.clone()),
                    gpu_seconds: share.map(|_| 0.0),
                    gpu_seconds_obtained: share.map_or(Obtained::Integrated, |s| s.1),
                    memory_byte_seconds: g.vram_bytes.map(|_| 0.0),
                    energy_j: attributable.then_some(0.0),
                    first_seen: at,
                    last_seen: at,
                });
                row.last_seen = at;
            }
        }
    }

    /// One device over one interval.
    fn interval(&mut self, before: &Reading, snap: &Snapshot, d: &Device, on: &[(&Process, &GpuUsage)], dt: f64) {
        let id = device_id(d);
        let Some(&readings) = before.devices.get(&id).filter(|_| !d.stale) else {
            return;
        };
        let totals = self.devices.get_mut(&id).expect("noted");
        totals.covered_s += dt;
        if let Some(util) = d.gpu_util_percent {
            add(&mut totals.busy_seconds, f64::from(util) / 100.0 * dt);
        }
        let energy = interval_energy(readings, (d.energy_mj, d.power_w), dt, &mut totals.counter_resets);
        match energy {
            Some((j, Obtained::Measured)) => add(&mut totals.energy_counter_j, j),
            Some((j, _)) => add(&mut totals.energy_integrated_j, j),
            None => {}
        }
        let shares: Vec<Option<(f64, Obtained)>> = on.iter().map(|(_, g)| busy_share(g)).collect();
        let all_known = every_share_known(snap, d, on);
        let sum: f64 = shares.iter().flatten().map(|s| s.0).sum();
        let scale = sum.max(1.0);
        let mut unattributed = if all_known { 0.0 } else { 1.0 };
        if let (true, Some((e, _))) = (all_known, energy) {
            add(&mut totals.idle_energy_j, e * (1.0 - sum / scale));
        }
        for ((p, g), share) in on.iter().zip(&shares) {
            let was_here = before.held.get(&(p.pid, p.start_time.clone(), id.clone()));
            let key = ProcessKey::of(p, id.clone());
            let row = self.processes.get_mut(&key).filter(|r| r.first_seen <= before.at);
            let (Some(held_before), Some(row)) = (was_here, row) else {
                // Seen only now: its share of this interval is nobody's.
                if all_known {
                    unattributed += share.map_or(0.0, |s| s.0 / scale);
                }
                continue;
            };
            if let Some((s, how)) = share {
                add(&mut row.gpu_seconds, s * dt);
                row.gpu_seconds_obtained = *how;
                if let (true, Some((e, _))) = (all_known, energy) {
                    add(&mut row.energy_j, e * s / scale);
                }
            }
            if let (Some(v0), Some(v1)) = (held_before, g.vram_bytes) {
                add(&mut row.memory_byte_seconds, (*v0 as f64 + v1 as f64) / 2.0 * dt);
            }
        }
        if let Some((e, _)) = energy.filter(|_| unattributed > 0.0) {
            add(&mut totals.unattributed_energy_j, e * unattributed.min(1.0));
        }
    }

    /// Forgets process rows last seen more than `keep_s` before `now`.
    pub fn prune(&mut self, now: f64, keep_s: f64) {
        self.processes.retain(|_, p| now - p.last_seen <= keep_s);
    }

    /// Sums of the process rows grouped by `key` (for a label, None where
    /// it is unknown), in key order.
    pub fn roll_up<K: Ord + Clone + Default>(&self, key: impl Fn(&ProcessTotals) -> K) -> Vec<Group<K>> {
        let mut groups: BTreeMap<K, Group<K>> = BTreeMap::new();
        for p in self.processes.values() {
            let k = key(p);
            groups
                .entry(k.clone())
                .or_insert_with(|| Group {
                    key: k,
                    ..Group::default()
                })
                .add(p);
        }
        groups.into_values().collect()
    }
}

impl<K> Group<K> {
    /// Adds a process row's known figures (unknown is not 0).
    pub fn add(&mut self, p: &ProcessTotals) {
        self.rows += 1;
        if let Some(v) = p.gpu_seconds {
            add(&mut self.gpu_seconds, v);
            self.gpu_seconds_obtained.insert(p.gpu_seconds_obtained);
        }
        if let Some(v) = p.memory_byte_seconds {
            add(&mut self.memory_byte_seconds, v);
        }
        if let Some(v) = p.energy_j {
            add(&mut self.energy_j, v);
        }
    }
}

/// Process rows summed under one key.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Group<K> {
    pub key: K,
    /// Process-device rows summed.
    pub rows: usize,
    pub gpu_seconds: Option<f64>,
    pub gpu_seconds_obtained: BTreeSet<Obtained>,
    /// Integrated.
    pub memory_byte_seconds: Option<f64>,
    /// Attributed.
    pub energy_j: Option<f64>,
}

#[cfg(test)]
mod tests;
