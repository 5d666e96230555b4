//! The benchmark behind `scripts/bench_drm.sh`: samples a generated tree
//! (GPUTASKMAN_DRM_BENCH_ROOT, with proc/ and sys/) once a "second" on a
//! driven clock, so that every fifth refresh is a full scan, and prints the
//! cost of each kind of refresh. Also times a full scan of this machine's
//! real /proc (GPUTASKMAN_DRM_BENCH_REAL_PROC=1) against the tree's /sys.

use super::*;
use std::path::Path;
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
