//! What the live view says of use since it started: each process's GPU
//! time and energy (the GPU TIME and ENERGY columns, which `s` sorts by),
//! a user's totals in the table's title, every user's in `?`, and how each
//! figure was obtained in the detail pane. All from the view's
//! [`crate::accounting::Ledger`], fed every snapshot shown (in a replay:
//! since the last jump), on the chosen GPU(s).

use crate::accounting::{device_id, words, Group, Ledger, Obtained, ProcessKey, ProcessTotals};
use crate::snapshot::{Device, Process};
use crate::units::{duration, joules};
use std::collections::{BTreeMap, BTreeSet};

/// GPU time and energy summed over ledger rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    pub totals: Group<()>,
    /// How the GPU's energy that was shared out was obtained.
    pub energy_from: BTreeSet<Obtained>,
}

impl Spent {
    /// Whether nothing is known: no GPU time, no energy.
    pub fn is_unknown(&self) -> bool {
        self.totals.gpu_seconds.is_none() && self.totals.energy_j.is_none()
    }
}

/// The ledger seen from the chosen GPU(s).
pub struct Scope<'a> {
    ledger: &'a Ledger,
    /// The ledger's ids of the chosen device(s): `g` picks a GPU and its
    /// MIG instances.
    chosen: BTreeSet<String>,
}

impl<'a> Scope<'a> {
    pub fn new(ledger: &'a Ledger, devices: &[Device], gpu: Option<u32>) -> Scope<'a> {
        let chosen = devices
            .iter()
            .filter(|d| gpu.is_none_or(|g| d.index == g || d.parent == Some(g)))
            .map(device_id)
            .collect();
        Scope { ledger, chosen }
    }

    /// Whether a figure has been counted yet: the first interval has
    /// ended. Before it every total is 0 of nothing, so the columns wait.
    pub fn counting(&self) -> bool {
        self.ledger.covered_s > 0.0
    }

    fn sum<'r>(&self, rows: impl Iterator<Item = &'r ProcessTotals>) -> Spent {
        let mut spent = Spent::default();
        for row in rows.filter(|r| self.chosen.contains(&r.key.device)) {
            spent.totals.add(row);
            if row.energy_j.is_some() {
                let device = self.ledger.devices.get(&row.key.device);
                spent
                    .energy_from
                    .extend(device.into_iter().flat_map(|d| d.energy_parts()).map(|(_, how)| how));
            }
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

    /// A user's totals on the chosen device(s), exited processes included;
    /// None where the ledger has no row of theirs on any device.
    pub fn of_user(&self, user: &str) -> Option<Spent> {
        let rows: Vec<&ProcessTotals> = self
            .ledger
            .processes
            .values()
            .filter(|r| r.user.as_deref() == Some(user))
            .collect();
        (!rows.is_empty()).then(|| self.sum(rows.into_iter()))
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
    s.totals.gpu_seconds.map_or_else(|| "n/a".into(), duration)
}

pub fn energy_cell(s: &Spent) -> String {
    joules(s.totals.energy_j)
}

/// "GPU time 4m 5s integrated · energy 1.2 kJ attributed (of measured)":
/// each figure with how it was obtained, and for energy how the GPU's
/// figure it is a share of was.
pub fn said(s: &Spent) -> String {
    let gpu = match s.totals.gpu_seconds {
        Some(_) => format!(
            "GPU time {} {}",
            gpu_time_cell(s),
            words(&s.totals.gpu_seconds_obtained)
        ),
        None => "GPU time n/a (no busy share)".into(),
    };
    let energy = match s.totals.energy_j {
        Some(_) if s.energy_from.is_empty() => format!("energy {} attributed", energy_cell(s)),
        Some(_) => format!("energy {} attributed (of {})", energy_cell(s), words(&s.energy_from)),
        None => "energy n/a (not every share on the GPU is known)".into(),
    };
    format!("{gpu} · {energy}")
}
