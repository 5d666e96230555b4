//! The counters of who used the GPU and what it cost: the [`Ledger`]'s
//! totals since `serve` started, as Prometheus counters. A restart starts
//! them at 0 again, which `increase()` and `rate()` take as a counter
//! reset; a process that exited keeps its series for
//! [`crate::accounting::KEEP_EXITED_S`], then it is gone.
//!
//! As in `metrics`, how a figure was obtained is in its name and help, never
//! a label: the device's counter energy and its power × time are two names.

use super::metrics::Labels;
use crate::accounting::{DeviceTotals, Ledger, ProcessTotals};
use std::fmt::Write;

type DeviceFigure = fn(&DeviceTotals) -> Option<f64>;
type ProcessFigure = fn(&ProcessTotals) -> Option<f64>;

const DEVICE_FAMILIES: &[(&str, &str, DeviceFigure)] = &[
    (
        "gputaskman_device_energy_joules_total",
        "Measured: energy the device drew by its driver's counter (NVML total energy consumption) since serve started; intervals where the counter restarted are not in it.",
        |d| d.energy_counter_j,
    ),
    (
        "gputaskman_device_integrated_energy_joules_total",
        "Integrated: power draw times time, over the intervals without a usable energy counter, since serve started.",
        |d| d.energy_integrated_j,
    ),
    (
        "gputaskman_device_idle_energy_joules_total",
        "Of the device's energy (both names above): the part no process kept busy, kept apart, never spread over processes.",
        |d| d.idle_energy_j,
    ),
    (
        "gputaskman_device_unattributed_energy_joules_total",
        "Of the device's energy: intervals where a process's busy share was unknown, or the process was new, so nobody's.",
        |d| d.unattributed_energy_j,
    ),
    (
        "gputaskman_device_busy_seconds_total",
        "Integrated: the device's utilization times time, since serve started.",
        |d| d.busy_seconds,
    ),
    (
        "gputaskman_device_energy_restarts_total",
        "Times the device's energy counter went back or jumped (a driver reload) since serve started.",
        |d| Some(f64::from(d.counter_resets)),
    ),
];

const PROCESS_FAMILIES: &[(&str, &str, ProcessFigure)] = &[
    (
        "gputaskman_process_gpu_seconds_total",
        "The process's busy share of a device times time, since serve saw it: integrated from NVML's SM samples (backend nvml) or measured engine time (DRM fdinfo).",
        |p| p.gpu_seconds,
    ),
    (
        "gputaskman_process_energy_joules_total",
        "Attributed: the process's busy share of its device's energy (counter, else power times time), since serve saw it. The idle part is the device's, not the processes'.",
        |p| p.energy_j,
    ),
    (
        "gputaskman_process_memory_byte_seconds_total",
        "Integrated: measured device memory the process held times time, since serve saw it.",
        |p| p.memory_byte_seconds,
    ),
];

fn device_labels(d: &DeviceTotals) -> Labels {
    let mut l = Labels::default();
    l.add("backend", Some(&d.backend))
        .add("device", Some(&d.label))
        .add("uuid", d.uuid.as_deref());
    l
}

/// The labels of a process row: the names `metrics` uses for the same
/// things (pid, process, user, container, pod, namespace, model, device),
/// none of which changes while the row lives.
fn process_labels(ledger: &Ledger, p: &ProcessTotals) -> Labels {
    let device = ledger.devices.get(&p.key.device);
    let mut l = Labels::default();
    l.add("pid", Some(&p.key.pid.to_string()))
        .add("process", p.name.as_deref())
        .add("user", p.user.as_deref())
        .add("container", p.container.as_deref())
        .add("pod", p.pod.as_deref())
        .add("namespace", p.namespace.as_deref())
        .add("model", p.key.model.as_deref())
        .add("backend", device.map(|d| d.backend.as_str()))
        .add("device", Some(&p.device_label))
        .add("uuid", device.and_then(|d| d.uuid.as_deref()));
    l
}

/// One counter family; a label set is written once (the first given).
fn family(out: &mut String, name: &str, help: &str, rows: impl Iterator<Item = (Labels, Option<f64>)>) {
    let samples: Vec<(Labels, f64)> = rows.filter_map(|(l, v)| Some((l, v?))).collect();
    if samples.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    let mut seen = std::collections::HashSet::new();
    for (labels, value) in samples {
        if seen.insert(labels.0.clone()) {
            let _ = writeln!(out, "{name}{{{}}} {value}", labels.0);
        }
    }
}

/// Appends the counter families of `ledger` to an exposition.
pub fn render(ledger: &Ledger, out: &mut String) {
    for (name, help, figure) in DEVICE_FAMILIES {
        let rows = ledger.devices.values().map(|d| (device_labels(d), figure(d)));
        family(out, name, help, rows);
    }
    for (name, help, figure) in PROCESS_FAMILIES {
        // Newest start time first: a PID reused within the keeping time
        // is the new process's series.
        let rows = ledger
            .processes
            .values()
            .rev()
            .map(|p| (process_labels(ledger, p), figure(p)));
        family(out, name, help, rows);
    }
}
