//! What the live view says of use since it started: each process's GPU
//! time and energy (the GPU TIME and ENERGY columns, which `s` sorts by),
//! a user's totals in the table's title, every user's in `?`, and how each
//! figure was obtained in the detail pane. All from the view's
//! [`crate::accounting::Ledger`], fed every snapshot shown (in a replay:
//! since the last jump), on the chosen GPU(s).

use crate::accounting::{device_id, Ledger, Obtained, ProcessKey, ProcessTotals};
use crate::snapshot::{Device, Process};
use crate::units::{duration, joules};
use std::collections::{BTreeMap, BTreeSet};

/// GPU time and energy summed over ledger rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    pub gpu_seconds: Option<f64>,
    pub gpu_seconds_obtained: BTreeSet<Obtained>,
    /// Attributed: a busy share of the GPU's energy.
    pub energy_j: Option<f64>,
    /// How the GPU's energy that was shared out was obtained.
    pub energy_from: BTreeSet<Obtained>,
}

impl Spent {
    fn add(&mut self, row: &ProcessTotals, energy_from: &[Obtained]) {
        if let Some(s) = row.gpu_seconds {
            *self.gpu_seconds.get_or_insert(0.0) += s;
            self.gpu_seconds_obtained.insert(row.gpu_seconds_obtained);
        }
        if let Some(j) = row.energy_j {
            *self.energy_j.get_or_insert(0.0) += j;
            self.energy_from.extend(energy_from);
        }
    }
}

/// The ledger seen from the chosen GPU(s): made once per frame or sort.
pub struct Scope<'a> {
    ledger: &'a Ledger,
    /// The ledger's ids of the chosen device(s): `g` picks a GPU and its
    /// MIG instances.
    chosen: BTreeSet<String>,
    /// How the energy of each device was obtained (a counter, power × time).
    energy_from: BTreeMap<&'a str, Vec<Obtained>>,
}

impl<'a> Scope<'a> {
    pub fn new(ledger: &'a Ledger, devices: &[Device], gpu: Option<u32>) -> Scope<'a> {
        let chosen = devices
            .iter()
            .filter(|d| gpu.is_none_or(|g| d.index == g || d.parent == Some(g)))
            .map(device_id)
            .collect();
        let energy_from = ledger
            .devices
            .values()
            .map(|d| {
                (
                    d.id.as_str(),
                    d.energy_parts().into_iter().map(|(_, how)| how).collect(),
                )
            })
            .collect();
        Scope {
            ledger,
            chosen,
            energy_from,
        }
    }

    /// Whether a figure has been counted yet: the first interval has
    /// ended. Before it every total is 0 of nothing, so the columns wait.
    pub fn counting(&self) -> bool {
        self.ledger.covered_s > 0.0
    }

    fn sum<'r>(&self, rows: impl Iterator<Item = &'r ProcessTotals>) -> Spent {
        let mut spent = Spent::default();
        for row in rows.filter(|r| self.chosen.contains(&r.key.device)) {
            let from = self.energy_from.get(row.key.device.as_str());
            spent.add(row, from.map_or(&[], Vec::as_slice));
        }
        spent
    }

    /// A process's GPU time and energy on the chosen device(s): its rows by
    /// PID and start time (a reused PID is another process), every model
    /// label it has had.
    pub fn of_process(&self, p: &Process) -> Spent {
        let rows = self
            .ledger
            .processes
            .range(ProcessKey::first_of(p.pid)..)
            .take_while(|(k, _)| k.pid == p.pid)
            .filter(|(k, _)| k.start_time == p.start_time)
            .map(|(_, r)| r);
        self.sum(rows)
    }

    /// Every user's totals on the chosen device(s), exited processes
    /// included; None is the processes whose user is unknown.
    pub fn by_user(&self) -> BTreeMap<Option<String>, Spent> {
        let mut users: BTreeMap<Option<String>, Vec<&ProcessTotals>> = BTreeMap::new();
        for row in self.ledger.processes.values() {
            users.entry(row.user.clone()).or_default().push(row);
        }
        users
            .into_iter()
            .map(|(u, rows)| (u, self.sum(rows.into_iter())))
            .collect()
    }

    /// The detail pane's line, once an interval has been counted.
    pub fn detail_line(&self, p: &Process) -> Option<String> {
        self.counting()
            .then(|| format!("since the view started: {}", said(&self.of_process(p))))
    }
}

pub fn gpu_time_cell(s: &Spent) -> String {
    s.gpu_seconds.map_or_else(|| "n/a".into(), duration)
}

pub fn energy_cell(s: &Spent) -> String {
    joules(s.energy_j)
}

fn words(set: &BTreeSet<Obtained>) -> String {
    set.iter().map(|o| o.word()).collect::<Vec<_>>().join("+")
}

/// "GPU time 4m 5s integrated · energy 1.2 kJ attributed (of measured)":
/// each figure with how it was obtained, and for energy how the GPU's
/// figure it is a share of was.
pub fn said(s: &Spent) -> String {
    let gpu = match s.gpu_seconds {
        Some(_) => format!("GPU time {} {}", gpu_time_cell(s), words(&s.gpu_seconds_obtained)),
        None => "GPU time n/a (no busy share)".into(),
    };
    let energy = match s.energy_j {
        Some(_) if s.energy_from.is_empty() => format!("energy {} attributed", energy_cell(s)),
        Some(_) => format!("energy {} attributed (of {})", energy_cell(s), words(&s.energy_from)),
        None => "energy n/a (not every share on the GPU is known)".into(),
    };
    format!("{gpu} · {energy}")
}
