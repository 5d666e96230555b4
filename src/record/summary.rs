//! `gputaskman summary FILE`: per device and per process, min / median /
//! max / last of the measured memory, when the peak was, and each model's
//! context and KV cache (estimated and reported, apart) over time.
//!
//! The text is [`crate::view::summary`].
//!
//! Processes are followed across snapshots by PID and start time (a reused
//! PID is another process); devices by UUID, then PCI bus id, then
//! backend and index. Unknown values are counted, never taken as 0.

use super::index::RecordingIndex;
use crate::snapshot::{Device, Model, Process};
use crate::units::unix_seconds;
use serde::Serialize;
use std::collections::HashMap;

/// Statistics of one measured value over the snapshots that list its
/// owner.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Stats {
    pub min: Option<u64>,
    /// The lower middle of the known values (a value that was measured).
    pub median: Option<u64>,
    pub max: Option<u64>,
    /// In the last snapshot that lists the owner (null when unknown there).
    pub last: Option<u64>,
    /// When the maximum was first reached.
    pub peak_at: Option<String>,
    /// Snapshots with a measured value.
    pub known: usize,
    /// Snapshots that list the owner without a measured value.
    pub unknown: usize,
}

#[derive(Default)]
struct Series {
    values: Vec<(u64, usize)>,
    unknown: usize,
    last: Option<u64>,
}

impl Series {
    fn add(&mut self, v: Option<u64>, at: usize) {
        match v {
            Some(v) => self.values.push((v, at)),
            None => self.unknown += 1,
        }
        self.last = v;
    }

    fn stats(&self, times: &[String]) -> Stats {
        if self.values.is_empty() {
            return Stats {
                unknown: self.unknown,
                ..Stats::default()
            };
        }
        let mut sorted: Vec<u64> = self.values.iter().map(|v| v.0).collect();
        sorted.sort_unstable();
        let max = *sorted.last().expect("not empty");
        let peak = self.values.iter().find(|v| v.0 == max).expect("max is in there").1;
        Stats {
            min: sorted.first().copied(),
            median: Some(sorted[(sorted.len() - 1) / 2]),
            max: Some(max),
            last: self.last,
            peak_at: Some(times[peak].to_string()),
            known: self.values.len(),
            unknown: self.unknown,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceSummary {
    pub index: u32,
    pub backend: String,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    /// Snapshots that list the device.
    pub samples: usize,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Stats,
    pub shared_memory_used_bytes: Stats,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessDeviceSummary {
    /// `GPU 0 NVIDIA ...`.
    pub device: String,
    pub vram_bytes: Stats,
    pub spill_bytes: Stats,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessSummary {
    pub pid: u32,
    pub start_time: Option<String>,
    pub name: Option<String>,
    pub first_seen: String,
    pub last_seen: String,
    /// Snapshots that list the process.
    pub samples: usize,
    /// Measured VRAM over all devices (sum of the known per-device values).
    pub vram_bytes: Stats,
    pub spill_bytes: Stats,
    pub rss_bytes: Stats,
    pub gpu: Vec<ProcessDeviceSummary>,
}

/// A model's settings and memory at one time: a point is written when any
/// of them changes. Estimated and reported figures, never measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelPoint {
    pub at: String,
    pub context: Option<u64>,
    pub slots_total: Option<u32>,
    pub estimate_kv_bytes: Option<u64>,
    pub estimate_kv_bytes_without_window: Option<u64>,
    pub reported_kv_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelTimeline {
    pub pid: u32,
    pub start_time: Option<String>,
    pub process: Option<String>,
    pub name: Option<String>,
    pub path: Option<String>,
    pub points: Vec<ModelPoint>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub file: String,
    pub snapshots: usize,
    pub first: Option<String>,
    pub last: Option<String>,
    /// The median time between snapshots.
    pub interval_s: Option<f64>,
    pub skipped: Vec<String>,
    pub devices: Vec<DeviceSummary>,
    pub processes: Vec<ProcessSummary>,
    pub models: Vec<ModelTimeline>,
    /// GPU time, memory-time and energy: [`super::usage`].
    pub usage: super::usage::Usage,
}

/// How a device is followed across snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeviceKey {
    Uuid(String),
    Bus(String),
    Index(String, u32),
}

pub fn device_key(d: &Device) -> DeviceKey {
    match (&d.uuid, &d.pci_bus_id) {
        (Some(u), _) => DeviceKey::Uuid(u.clone()),
        (None, Some(b)) => DeviceKey::Bus(b.to_ascii_lowercase()),
        (None, None) => DeviceKey::Index(d.backend.clone(), d.index),
    }
}

pub fn device_label(d: &Device) -> String {
    match &d.name {
        Some(n) => format!("GPU {} {n}", d.index),
        None => format!("GPU {}", d.index),
    }
}

/// A process across snapshots: PID and start time.
pub type ProcessKey = (u32, Option<String>);

#[derive(Default)]
struct ProcAcc {
    name: Option<String>,
    first: usize,
    last: usize,
    samples: usize,
    vram: Series,
    spill: Series,
    rss: Series,
    gpu: Vec<(DeviceKey, String, Series, Series)>,
}

struct DevAcc {
    device: Device,
    samples: usize,
    used: Series,
    shared: Series,
}

/// Builds the summary of a recording, parsing one batch of snapshots at a
/// time (an hour of 200 processes is never all in memory).
pub fn summarize(file: &str, rec: &RecordingIndex) -> Summary {
    let mut times: Vec<String> = Vec::with_capacity(rec.len());
    let mut devices: Vec<(DeviceKey, DevAcc)> = Vec::new();
    let mut procs: Vec<(ProcessKey, ProcAcc)> = Vec::new();
    let mut proc_index: HashMap<ProcessKey, usize> = HashMap::new();
    let mut models: Vec<ModelTimeline> = Vec::new();
    let mut model_index: HashMap<ModelKey, usize> = HashMap::new();

    let mut ledger = super::usage::ledger_for(rec);
    let failed = rec.for_each(|_, s| {
        ledger.observe(&s);
        let at = times.len();
        times.push(s.taken_at.clone());
        let mut keys: HashMap<(&str, u32), (DeviceKey, String)> = HashMap::new();
        for d in &s.devices {
            let key = device_key(d);
            keys.insert((d.backend.as_str(), d.index), (key.clone(), device_label(d)));
            let k = match devices.iter().position(|(k, _)| *k == key) {
                Some(k) => k,
                None => {
                    devices.push((
                        key,
                        DevAcc {
                            device: d.clone(),
                            samples: 0,
                            used: Series::default(),
                            shared: Series::default(),
                        },
                    ));
                    devices.len() - 1
                }
            };
            let acc = &mut devices[k].1;
            acc.device = d.clone();
            acc.samples += 1;
            acc.used.add(d.memory_used_bytes, at);
            acc.shared.add(d.shared_memory_used_bytes, at);
        }
        for p in &s.processes {
            let key: ProcessKey = (p.pid, p.start_time.clone());
            let k = *proc_index.entry(key.clone()).or_insert_with(|| {
                procs.push((
                    key.clone(),
                    ProcAcc {
                        first: at,
                        ..ProcAcc::default()
                    },
                ));
                procs.len() - 1
            });
            let acc = &mut procs[k].1;
            if p.name.is_some() {
                acc.name = p.name.clone();
            }
            acc.last = at;
            acc.samples += 1;
            acc.rss.add(p.rss_bytes, at);
            let known: Vec<u64> = p.gpu.iter().filter_map(|g| g.vram_bytes).collect();
            acc.vram.add((!known.is_empty()).then(|| known.iter().sum()), at);
            let known: Vec<u64> = p.gpu.iter().filter_map(|g| g.spill_bytes).collect();
            acc.spill.add((!known.is_empty()).then(|| known.iter().sum()), at);
            for g in &p.gpu {
                let (dk, label) = keys.get(&(g.source.as_str(), g.device)).cloned().unwrap_or_else(|| {
                    (
                        DeviceKey::Index(g.source.clone(), g.device),
                        format!("GPU {} ({})", g.device, g.source),
                    )
                });
                let slot = match acc.gpu.iter().position(|e| e.0 == dk) {
                    Some(i) => i,
                    None => {
                        acc.gpu.push((dk, label, Series::default(), Series::default()));
                        acc.gpu.len() - 1
                    }
                };
                acc.gpu[slot].2.add(g.vram_bytes, at);
                acc.gpu[slot].3.add(g.spill_bytes, at);
            }
            if p.models_pending {
                continue;
            }
            follow_models(&mut models, &mut model_index, &key, p, &s.taken_at);
        }
    });

    let processes = process_summaries(procs, &times);

    let mut gaps: Vec<f64> = times
        .windows(2)
        .filter_map(|w| Some(unix_seconds(&w[1])? - unix_seconds(&w[0])?))
        .collect();
    gaps.sort_by(f64::total_cmp);

    Summary {
        file: file.to_string(),
        snapshots: times.len(),
        first: times.first().map(|t| t.to_string()),
        last: times.last().map(|t| t.to_string()),
        interval_s: gaps.get(gaps.len().saturating_sub(1) / 2).copied(),
        skipped: rec.skipped.iter().cloned().chain(failed).collect(),
        devices: devices
            .into_iter()
            .map(|(_, acc)| DeviceSummary {
                index: acc.device.index,
                backend: acc.device.backend.clone(),
                name: acc.device.name.clone(),
                uuid: acc.device.uuid.clone(),
                pci_bus_id: acc.device.pci_bus_id.clone(),
                samples: acc.samples,
                memory_total_bytes: acc.device.memory_total_bytes,
                memory_used_bytes: acc.used.stats(&times),
                shared_memory_used_bytes: acc.shared.stats(&times),
            })
            .collect(),
        processes,
        models,
        usage: super::usage::Usage::of(&ledger),
    }
}

/// A model of a process across snapshots: the process, the model's path
/// and name.
type ModelKey = (ProcessKey, Option<String>, Option<String>);

/// Adds a point to the timeline of each of `p`'s models where any of its
/// figures changed.
fn follow_models(
    models: &mut Vec<ModelTimeline>,
    model_index: &mut HashMap<ModelKey, usize>,
    key: &ProcessKey,
    p: &Process,
    taken_at: &str,
) {
    for m in &p.models {
        let mkey = (key.clone(), m.path.clone(), m.name.clone());
        let i = *model_index.entry(mkey).or_insert_with(|| {
            models.push(ModelTimeline {
                pid: p.pid,
                start_time: p.start_time.clone(),
                process: p.name.clone(),
                name: m.name.clone(),
                path: m.path.clone(),
                points: Vec::new(),
            });
            models.len() - 1
        });
        let point = model_point(taken_at, m);
        let points = &mut models[i].points;
        let changed = points.last().is_none_or(|last| {
            (
                last.context,
                last.slots_total,
                last.estimate_kv_bytes,
                last.estimate_kv_bytes_without_window,
                last.reported_kv_bytes,
            ) != (
                point.context,
                point.slots_total,
                point.estimate_kv_bytes,
                point.estimate_kv_bytes_without_window,
                point.reported_kv_bytes,
            )
        });
        if changed {
            points.push(point);
        }
    }
}

/// The processes' statistics, the largest VRAM first.
fn process_summaries(procs: Vec<(ProcessKey, ProcAcc)>, times: &[String]) -> Vec<ProcessSummary> {
    let mut processes: Vec<ProcessSummary> = procs
        .into_iter()
        .map(|((pid, start_time), acc)| ProcessSummary {
            pid,
            start_time,
            name: acc.name,
            first_seen: times[acc.first].clone(),
            last_seen: times[acc.last].clone(),
            samples: acc.samples,
            vram_bytes: acc.vram.stats(times),
            spill_bytes: acc.spill.stats(times),
            rss_bytes: acc.rss.stats(times),
            gpu: acc
                .gpu
                .iter()
                .map(|(_, label, vram, spill)| ProcessDeviceSummary {
                    device: label.clone(),
                    vram_bytes: vram.stats(times),
                    spill_bytes: spill.stats(times),
                })
                .collect(),
        })
        .collect();
    processes.sort_by(|a, b| {
        b.vram_bytes
            .max
            .cmp(&a.vram_bytes.max)
            .then(b.rss_bytes.max.cmp(&a.rss_bytes.max))
            .then(a.pid.cmp(&b.pid))
    });
    processes
}

fn model_point(at: &str, m: &Model) -> ModelPoint {
    ModelPoint {
        at: at.to_string(),
        context: m.context,
        slots_total: m.slots_total,
        estimate_kv_bytes: m.estimate.as_ref().and_then(|e| e.kv_bytes),
        estimate_kv_bytes_without_window: m.estimate.as_ref().and_then(|e| e.kv_bytes_without_window),
        reported_kv_bytes: m.reported.as_ref().and_then(|r| r.kv_bytes),
    }
}
