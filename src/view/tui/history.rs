//! The last few minutes of device memory and of each process's VRAM, for
//! the sparklines. Built from snapshots only, so a replay rebuilds it.

use crate::snapshot::{Process, Snapshot};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Samples kept: five minutes at the default 1 s interval.
pub const CAPACITY: usize = 300;
/// Series kept of processes gone from the latest sample: a host whose
/// PIDs all change every sample would otherwise leave CAPACITY samples'
/// worth of gone processes behind (2 GB for 300,000 a sample).
pub const GONE: usize = 1024;

/// A process across samples: a reused PID is another process.
pub type ProcessKey = (u32, Option<String>);

pub fn key(p: &Process) -> ProcessKey {
    (p.pid, p.start_time.clone())
}

#[derive(Debug, Default, Clone)]
pub struct History {
    /// Device index -> used memory per sample; None where unknown.
    devices: HashMap<u32, VecDeque<Option<u64>>>,
    device_totals: BTreeMap<u32, u64>,
    /// Measured VRAM per sample over all devices; None where unknown or
    /// the process was not there.
    processes: HashMap<ProcessKey, VecDeque<Option<u64>>>,
    len: usize,
}

impl History {
    pub fn clear(&mut self) {
        *self = History::default();
    }

    pub fn push(&mut self, s: &Snapshot) {
        let mut devices: HashMap<u32, Option<u64>> = HashMap::new();
        for d in &s.devices {
            devices.insert(d.index, d.memory_used_bytes);
            if let Some(t) = d.memory_total_bytes {
                self.device_totals.insert(d.index, t);
            }
        }
        let mut processes: HashMap<ProcessKey, Option<u64>> = HashMap::new();
        for p in &s.processes {
            let vram = p
                .gpu
                .iter()
                .filter_map(|g| g.vram_bytes)
                .fold(None, |acc: Option<u64>, v| Some(acc.unwrap_or(0) + v));
            processes.insert(key(p), vram);
        }
        let before = self.len;
        self.len = (before + 1).min(CAPACITY);
        append(&mut self.devices, devices, before, self.len);
        append(&mut self.processes, processes, before, self.len);
        self.processes.retain(|_, s| s.iter().any(Option::is_some));
        self.forget_long_gone(s);
    }

    /// Keeps the series of at most [`GONE`] processes absent from `s`,
    /// those seen last most recently.
    fn forget_long_gone(&mut self, s: &Snapshot) {
        let present: std::collections::HashSet<ProcessKey> = s.processes.iter().map(key).collect();
        let mut gone: Vec<(usize, ProcessKey)> = self
            .processes
            .iter()
            .filter(|(k, _)| !present.contains(*k))
            .map(|(k, series)| (series.iter().rev().take_while(|v| v.is_none()).count(), k.clone()))
            .collect();
        if gone.len() <= GONE {
            return;
        }
        gone.sort_unstable_by_key(|(absent_for, _)| *absent_for);
        for (_, k) in gone.drain(GONE..) {
            self.processes.remove(&k);
        }
    }

    pub fn device(&self, index: u32) -> Vec<Option<u64>> {
        self.devices
            .get(&index)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    pub fn device_total(&self, index: u32) -> Option<u64> {
        self.device_totals.get(&index).copied()
    }

    pub fn process(&self, key: &ProcessKey) -> Vec<Option<u64>> {
        self.processes
            .get(key)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Appends one sample to every series: the value where there is one, a
/// gap where not; a new series starts with gaps, so all stay aligned.
fn append<K: std::hash::Hash + Eq>(
    series: &mut HashMap<K, VecDeque<Option<u64>>>,
    mut values: HashMap<K, Option<u64>>,
    before: usize,
    len: usize,
) {
    for (k, s) in series.iter_mut() {
        s.push_back(values.remove(k).flatten());
        while s.len() > len {
            s.pop_front();
        }
    }
    for (k, v) in values {
        let mut s: VecDeque<Option<u64>> = std::iter::repeat_n(None, before.min(len - 1)).collect();
        s.push_back(v);
        series.insert(k, s);
    }
}

/// The sparklines' eight heights: block elements, and `--ascii`'s stand-ins.
pub const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
pub const ASCII_BARS: [char; 8] = ['_', '.', '-', '~', '=', '+', '*', '#'];

/// A text sparkline of the last `width` values, scaled to `max` (or the
/// largest value) and drawn with `bars`; a gap where unknown.
pub fn sparkline(values: &[Option<u64>], max: Option<u64>, width: usize, bars: &[char; 8]) -> String {
    let tail = &values[values.len().saturating_sub(width)..];
    let max = max.or_else(|| tail.iter().flatten().copied().max()).unwrap_or(0).max(1);
    tail.iter()
        .map(|v| match v {
            None => ' ',
            Some(v) => {
                let i = ((*v as f64 / max as f64) * 7.0).round() as usize;
                bars[i.min(7)]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tui::fixture;

    #[test]
    fn series_stay_aligned_and_gaps_are_unknown() {
        let mut h = History::default();
        let mut s = fixture::desktop();
        h.push(&s);
        let gone = s.processes.remove(1);
        h.push(&s);
        h.push(&s);
        let k = key(&gone);
        assert_eq!(h.process(&k).len(), 3);
        assert!(h.process(&k)[0].is_some());
        assert_eq!(&h.process(&k)[1..], &[None, None]);
        assert_eq!(h.device(0).len(), 3);
        for _ in 0..CAPACITY {
            h.push(&s);
        }
        assert_eq!(h.device(0).len(), CAPACITY);
        assert!(
            h.process(&k).is_empty(),
            "a process gone for the whole window is forgotten"
        );
    }

    #[test]
    fn sparkline_scales_to_the_maximum_and_leaves_gaps() {
        assert_eq!(
            sparkline(&[Some(0), Some(50), None, Some(100)], Some(100), 10, &BARS),
            "▁▅ █"
        );
        assert_eq!(sparkline(&[Some(1), Some(2), Some(3)], None, 2, &BARS), "▆█");
        assert_eq!(
            sparkline(&[Some(0), Some(50), None, Some(100)], Some(100), 10, &ASCII_BARS),
            "_= #"
        );
    }

    #[test]
    fn processes_that_change_every_sample_leave_a_bounded_history() {
        let mut h = History::default();
        let mut s = fixture::desktop();
        let template = s.processes[0].clone();
        for sample in 0..20u32 {
            s.processes = (0..200)
                .map(|i| Process {
                    pid: sample * 1000 + i,
                    gpu: template.gpu.clone(),
                    ..template.clone()
                })
                .collect();
            h.push(&s);
        }
        // The 200 of the latest sample and the GONE seen last most recently.
        assert_eq!(h.processes.len(), 200 + GONE);
        assert!(!h.process(&(19_000, template.start_time.clone())).is_empty());
        assert!(!h.process(&(14_000, template.start_time.clone())).is_empty());
        assert!(h.process(&(0, template.start_time.clone())).is_empty());
    }
}
