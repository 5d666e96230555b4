//! The usage part of `summary`: a recording's snapshots through
//! [`crate::accounting::Ledger`], per device and rolled up per user,
//! process, container and model, in the units people pay in (GPU-hours,
//! GiB-hours, kWh) and, with `--price-per-kwh`, money. Each figure keeps
//! the word for how it was obtained; the time the recording covers is said,
//! and its gaps are never filled in.

use super::index::RecordingIndex;
use crate::accounting::{gap_limit, median_step, DeviceTotals, Group, Ledger, Obtained};
use crate::units::unix_seconds;
use serde::Serialize;
use std::collections::BTreeSet;

const JOULES_PER_KWH: f64 = 3.6e6;
const GIB: f64 = (1u64 << 30) as f64;

/// One row of a roll-up.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UsageRow {
    /// The user, container or model; for a process `PID name`; null: unknown.
    pub key: Option<String>,
    /// For a process: its start time (PID and start time name it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    pub gpu_hours: Option<f64>,
    /// `integrated` (NVML SM samples), `measured` (DRM engine time), or both.
    pub gpu_hours_obtained: BTreeSet<Obtained>,
    /// Integrated: measured VRAM held × time.
    pub gib_hours: Option<f64>,
    /// Attributed: its busy share of the GPUs' energy.
    pub kwh: Option<f64>,
    /// `kwh` × the price; null without `--price-per-kwh`.
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceUsage {
    #[serde(flatten)]
    pub totals: DeviceTotals,
    /// Measured (counter) plus integrated (power × time) energy, in kWh:
    /// each part is also given apart, in joules.
    pub kwh: Option<f64>,
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Usage {
    /// Seconds from the first snapshot to the last.
    pub span_s: f64,
    /// Of which counted: intervals no longer than `max_interval_s`.
    pub covered_s: f64,
    /// Intervals longer than that, and their seconds: not counted.
    pub gaps: u32,
    pub gap_s: f64,
    pub max_interval_s: f64,
    pub price_per_kwh: Option<f64>,
    pub devices: Vec<DeviceUsage>,
    pub users: Vec<UsageRow>,
    pub processes: Vec<UsageRow>,
    pub containers: Vec<UsageRow>,
    pub models: Vec<UsageRow>,
}

/// The longest interval counted: [`gap_limit`] of the recording's median
/// step (a late sample is not a gap; a stopped recorder is), read from the
/// index without parsing a snapshot.
fn max_interval(rec: &RecordingIndex) -> f64 {
    let times: Vec<f64> = (0..rec.len())
        .filter_map(|i| rec.taken_at(i).and_then(unix_seconds))
        .collect();
    gap_limit(median_step(&times))
}

/// A ledger ready for the recording's snapshots, in order.
pub fn ledger_for(rec: &RecordingIndex) -> Ledger {
    Ledger::new(max_interval(rec))
}

fn row<K>(g: &Group<K>, key: Option<String>, start_time: Option<String>) -> UsageRow {
    UsageRow {
        key,
        start_time,
        gpu_hours: g.gpu_seconds.map(|s| s / 3600.0),
        gpu_hours_obtained: g.gpu_seconds_obtained.clone(),
        gib_hours: g.memory_byte_seconds.map(|b| b / GIB / 3600.0),
        kwh: g.energy_j.map(|j| j / JOULES_PER_KWH),
        cost: None,
    }
}

impl Usage {
    pub fn of(ledger: &Ledger) -> Usage {
        let labelled = |key: fn(&crate::accounting::ProcessTotals) -> Option<String>| -> Vec<UsageRow> {
            ledger
                .roll_up(key)
                .iter()
                .map(|g| row(g, g.key.clone(), None))
                .collect()
        };
        let processes = ledger
            .roll_up(|p| (p.key.pid, p.key.start_time.clone(), p.name.clone()))
            .iter()
            .map(|g| {
                let (pid, start, name) = &g.key;
                row(
                    g,
                    Some(format!("{pid} {}", name.as_deref().unwrap_or("?"))),
                    start.clone(),
                )
            })
            .collect();
        Usage {
            span_s: ledger.first.zip(ledger.last_at).map_or(0.0, |(a, b)| b - a),
            covered_s: ledger.covered_s,
            gaps: ledger.gaps,
            gap_s: ledger.gap_s,
            max_interval_s: ledger.max_interval_s(),
            price_per_kwh: None,
            devices: ledger
                .devices
                .values()
                .map(|d| DeviceUsage {
                    kwh: (!d.energy_parts().is_empty())
                        .then(|| d.energy_parts().iter().map(|p| p.0).sum::<f64>() / JOULES_PER_KWH),
                    totals: d.clone(),
                    cost: None,
                })
                .collect(),
            users: labelled(|p| p.user.clone()),
            processes,
            containers: labelled(|p| p.container.clone()),
            models: labelled(|p| p.key.model.clone()),
        }
    }

    /// Puts a price on every kWh figure.
    pub fn set_price(&mut self, price_per_kwh: f64) {
        self.price_per_kwh = Some(price_per_kwh);
        let cost = |kwh: Option<f64>| kwh.map(|k| k * price_per_kwh);
        for d in &mut self.devices {
            d.cost = cost(d.kwh);
        }
        for r in [
            &mut self.users,
            &mut self.processes,
            &mut self.containers,
            &mut self.models,
        ]
        .into_iter()
        .flatten()
        {
            r.cost = cost(r.kwh);
        }
    }
}
