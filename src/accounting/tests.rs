use super::*;
use crate::snapshot::{Attribution, Host, Model};

/// A recorded-like sample: one GPU (counter in mJ, power), processes by
/// (pid, sm %, vram).
fn snap(at: &str, energy_mj: Option<u64>, power_w: Option<f64>, procs: &[(u32, Option<u32>, Option<u64>)]) -> Snapshot {
    let device = Device {
        index: 0,
        backend: "nvml".into(),
        vendor: "NVIDIA".into(),
        uuid: Some("GPU-a".into()),
        energy_mj,
        power_w,
        gpu_util_percent: Some(80),
        process_list_complete: true,
        ..Device::default()
    };
    let processes = procs
        .iter()
        .map(|&(pid, sm, vram)| Process {
            pid,
            name: Some(format!("p{pid}")),
            start_time: Some("2026-01-01T00:00:00Z".into()),
            user: Some(if pid == 10 { "ann" } else { "bob" }.into()),
            gpu: vec![GpuUsage {
                device: 0,
                vram_bytes: vram,
                spill_bytes: None,
                paged_bytes: None,
                source: "nvml".into(),
                pairing: None,
                contexts: vec!["C".into()],
                engines: sm.map(|s| BTreeMap::from([("sm".to_string(), s)])).unwrap_or_default(),
            }],
            ..Process::default()
        })
        .collect();
    Snapshot {
        schema_version: 1,
        taken_at: at.into(),
        cpu_window_seconds: None,
        host: Host {
            hostname: None,
            os: "linux".into(),
            os_name: None,
            kernel: None,
            wsl: false,
            container: false,
        },
        backends: vec![],
        devices: vec![device],
        processes,
        attribution: Attribution::default(),
    }
}

fn row(l: &Ledger, pid: u32) -> &ProcessTotals {
    l.processes.values().find(|p| p.key.pid == pid).expect("row")
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

const GIB: u64 = 1 << 30;

#[test]
fn shares_integrate_into_gpu_seconds_and_the_counter_is_attributed_with_idle_apart() {
    let mut l = Ledger::new(10.0);
    // 200 W for 2 s per interval = 400 J; p10 at 30 %, p20 at 50 %.
    let procs = [(10, Some(30), Some(2 * GIB)), (20, Some(50), Some(GIB))];
    l.observe(&snap("2026-01-01T00:00:00Z", Some(1_000_000), Some(200.0), &procs));
    assert_eq!(row(&l, 10).gpu_seconds, Some(0.0), "starts at 0 when first seen");
    l.observe(&snap("2026-01-01T00:00:02Z", Some(1_400_000), Some(200.0), &procs));
    l.observe(&snap("2026-01-01T00:00:04Z", Some(1_800_000), Some(200.0), &procs));
    let d = &l.devices["GPU-a"];
    assert!(close(d.energy_counter_j, 800.0));
    assert_eq!(d.energy_integrated_j, None, "the counter was there: nothing integrated");
    assert!(close(d.idle_energy_j, 800.0 * 0.2));
    assert!(close(d.busy_seconds, 0.8 * 4.0));
    assert!(close(row(&l, 10).gpu_seconds, 0.3 * 4.0));
    assert!(close(row(&l, 20).gpu_seconds, 0.5 * 4.0));
    assert!(close(row(&l, 10).energy_j, 800.0 * 0.3));
    assert!(close(row(&l, 20).energy_j, 800.0 * 0.5));
    assert!(close(row(&l, 10).memory_byte_seconds, 2.0 * GIB as f64 * 4.0));
    assert_eq!(row(&l, 10).gpu_seconds_obtained, Obtained::Integrated);
    assert_eq!(l.covered_s, 4.0);
    let users = l.roll_up(|p| p.user.clone());
    assert_eq!(users.len(), 2);
    assert!(close(users[0].energy_j, 240.0) && users[0].key.as_deref() == Some("ann"));
}

#[test]
fn a_counter_that_goes_back_is_a_reset_and_that_interval_is_integrated_from_power() {
    let mut l = Ledger::new(10.0);
    let procs = [(10, Some(100), None)];
    l.observe(&snap("2026-01-01T00:00:00Z", Some(5_000_000), Some(100.0), &procs));
    // Driver reloaded: the counter starts again near 0.
    l.observe(&snap("2026-01-01T00:00:01Z", Some(50), Some(300.0), &procs));
    l.observe(&snap("2026-01-01T00:00:02Z", Some(250_050), Some(300.0), &procs));
    let d = &l.devices["GPU-a"];
    assert_eq!(d.counter_resets, 1);
    assert!(close(d.energy_counter_j, 250.0));
    assert!(close(d.energy_integrated_j, 200.0), "mean of 100 W and 300 W over 1 s");
    assert!(close(row(&l, 10).energy_j, 450.0));
    assert_eq!(row(&l, 10).memory_byte_seconds, None, "VRAM never known: null, not 0");
}

#[test]
fn shares_over_one_are_scaled_and_unknown_shares_leave_energy_unattributed() {
    let mut l = Ledger::new(10.0);
    let both = [(10, Some(80), None), (20, Some(70), None)];
    l.observe(&snap("2026-01-01T00:00:00Z", None, Some(150.0), &both));
    l.observe(&snap("2026-01-01T00:00:01Z", None, Some(150.0), &both));
    assert!(close(row(&l, 10).energy_j, 150.0 * 0.8 / 1.5));
    assert!(close(l.devices["GPU-a"].idle_energy_j, 0.0));
    assert!(close(row(&l, 10).gpu_seconds, 0.8), "GPU time is not scaled");
    let one_unknown = [(10, Some(80), None), (20, None, None)];
    l.observe(&snap("2026-01-01T00:00:02Z", None, Some(150.0), &one_unknown));
    let d = &l.devices["GPU-a"];
    assert!(close(d.unattributed_energy_j, 150.0));
    assert!(
        close(row(&l, 10).energy_j, 80.0),
        "no share of an interval it cannot be told"
    );
    assert!(close(row(&l, 10).gpu_seconds, 1.6));
}

#[test]
fn a_gap_is_not_filled_and_a_newcomer_starts_at_zero() {
    let mut l = Ledger::new(5.0);
    l.observe(&snap("2026-01-01T00:00:00Z", Some(0), None, &[(10, Some(50), None)]));
    l.observe(&snap(
        "2026-01-01T00:01:00Z",
        Some(6_000_000),
        None,
        &[(10, Some(50), None)],
    ));
    assert_eq!((l.gaps, l.gap_s, l.covered_s), (1, 60.0, 0.0));
    assert!(close(row(&l, 10).gpu_seconds, 0.0));
    let two = [(10, Some(50), None), (20, Some(25), None)];
    l.observe(&snap("2026-01-01T00:01:01Z", Some(6_100_000), None, &two));
    // p20 was not in the sample before: its quarter is nobody's.
    assert!(close(row(&l, 20).gpu_seconds, 0.0));
    let d = &l.devices["GPU-a"];
    assert!(close(d.unattributed_energy_j, 25.0));
    assert!(close(d.idle_energy_j, 25.0));
    assert!(close(row(&l, 10).energy_j, 50.0));
}

#[test]
fn a_model_found_later_starts_a_row_of_its_own_and_exited_rows_are_pruned() {
    let mut l = Ledger::new(10.0);
    let procs = [(10, Some(40), None)];
    l.observe(&snap("2026-01-01T00:00:00Z", None, Some(100.0), &procs));
    l.observe(&snap("2026-01-01T00:00:01Z", None, Some(100.0), &procs));
    let mut with_model = snap("2026-01-01T00:00:02Z", None, Some(100.0), &procs);
    with_model.processes[0].models.push(Model {
        path: Some("/m/gemma-3-270m.gguf".into()),
        ..Model::default()
    });
    l.observe(&with_model);
    with_model.taken_at = "2026-01-01T00:00:03Z".into();
    l.observe(&with_model);
    let models = l.roll_up(|p| p.key.model.clone());
    assert_eq!(models.len(), 2);
    // The interval it was found in belongs to the new row, which starts
    // at 0 there: that interval is unattributed, not counted twice.
    assert!(close(models[0].gpu_seconds, 0.4), "before the model was known");
    assert_eq!(models[1].key.as_deref(), Some("gemma-3-270m"));
    assert!(close(models[1].gpu_seconds, 0.4));
    l.prune(unix_seconds("2026-01-01T00:00:03Z").unwrap() + 300.0, 300.0);
    assert_eq!(l.processes.len(), 1, "the row last seen at 00:00:01 is gone");
}

#[test]
fn a_stale_device_repeating_its_last_values_adds_nothing() {
    let mut l = Ledger::new(10.0);
    let procs = [(10, Some(50), Some(GIB))];
    l.observe(&snap("2026-01-01T00:00:00Z", Some(1_000_000), Some(200.0), &procs));
    l.observe(&snap("2026-01-01T00:00:02Z", Some(1_400_000), Some(200.0), &procs));
    // Lost (or hung): the same figures again, marked stale, twice.
    for at in ["2026-01-01T00:00:04Z", "2026-01-01T00:00:06Z"] {
        let mut s = snap(at, Some(1_400_000), Some(200.0), &procs);
        s.devices[0].stale = true;
        l.observe(&s);
    }
    // Back: the interval from a stale reading is not counted either.
    l.observe(&snap("2026-01-01T00:00:08Z", Some(2_600_000), Some(200.0), &procs));
    let d = &l.devices["GPU-a"];
    assert!(close(d.energy_counter_j, 400.0), "{:?}", d.energy_counter_j);
    assert!(
        close(row(&l, 10).gpu_seconds, 0.5 * 2.0),
        "{:?}",
        row(&l, 10).gpu_seconds
    );
    assert!(close(row(&l, 10).memory_byte_seconds, GIB as f64 * 2.0));
}

#[test]
fn energy_that_can_never_be_shared_out_is_null_not_zero() {
    let mut l = Ledger::new(10.0);
    let procs = [(10, Some(50), None)];
    // The driver lists only some of the device's processes (another
    // container's are hidden): its energy cannot be shared out.
    let incomplete = |at| {
        let mut s = snap(at, Some(1_000_000), Some(200.0), &procs);
        s.devices[0].process_list_complete = false;
        s
    };
    l.observe(&incomplete("2026-01-01T00:00:00Z"));
    l.observe(&incomplete("2026-01-01T00:00:01Z"));
    assert_eq!(row(&l, 10).energy_j, None, "n/a, never a 0 that reads as idle");
    assert!(close(row(&l, 10).gpu_seconds, 0.5), "its GPU time still counts");
    // A share unknown from the first sample: null too.
    let mut l = Ledger::new(10.0);
    l.observe(&snap("2026-01-01T00:00:00Z", Some(0), None, &[(10, None, None)]));
    assert_eq!((row(&l, 10).energy_j, row(&l, 10).gpu_seconds), (None, None));
    // Where it will be shared out, it starts at 0 (a counter's first value).
    let mut l = Ledger::new(10.0);
    l.observe(&snap("2026-01-01T00:00:00Z", Some(0), None, &procs));
    assert_eq!(row(&l, 10).energy_j, Some(0.0));
}

#[test]
fn the_gap_limit_is_three_intervals_and_a_second() {
    assert_eq!(gap_limit(1.0), 4.0);
    assert_eq!(gap_limit(0.5), 2.5);
}
