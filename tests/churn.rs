//! Load and churn: the live view (the real binary in tmux, against the fake
//! NVML) while about 1000 processes a second start and exit. It must not
//! panic, leak memory (RSS at the end within 10% of RSS after the warm-up)
//! or file descriptors (the same count), must keep refreshing, and a
//! process that exits must leave the screen within two refreshes.
//!
//! GPUTASKMAN_CHURN_SECS sets the length: 20 s by default (warm-up figures
//! at 5 s), so it runs with the other tests; scripts/long-checks.sh runs it
//! for 300 s (warm-up figures at 60 s). Without tmux it says SKIPPED.

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{fake_nvml, Scenario, Sleeper};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The view's refresh period.
const INTERVAL: Duration = Duration::from_secs(1);
/// Processes started (and reaped) a second.
const RATE: u64 = 1000;
const BATCH: u64 = 50;

/// Starts short-lived processes (forks of this test that sleep 0.2 s and
/// exit) in batches of [`BATCH`] at [`RATE`] a second until `stop`, reaping
/// each batch before its slot's next turn. A fork without exec is cheap
/// enough to keep the rate on a busy machine; the child calls only
/// async-signal-safe functions.
fn churn(stop: Arc<AtomicBool>, started: Arc<AtomicU64>) {
    let period = Duration::from_nanos(1_000_000_000 * BATCH / RATE);
    // Four batches in flight: each lives 0.2 s, a batch starts every 50 ms.
    let mut slots: Vec<Vec<libc::pid_t>> = (0..4).map(|_| Vec::new()).collect();
    let reap = |pids: &mut Vec<libc::pid_t>| {
        for pid in pids.drain(..) {
            // SAFETY: waiting on our own child.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        }
    };
    let mut turn = 0usize;
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let slot = &mut slots[turn % 4];
        reap(slot);
        for _ in 0..BATCH {
            // SAFETY: the child only sleeps and _exits.
            match unsafe { libc::fork() } {
                0 => unsafe {
                    let t = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 200_000_000,
                    };
                    libc::nanosleep(&t, std::ptr::null_mut());
                    libc::_exit(0);
                },
                pid if pid > 0 => {
                    slot.push(pid);
                    started.fetch_add(1, Ordering::Relaxed);
                }
                _ => break,
            }
        }
        turn += 1;
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    for slot in &mut slots {
        reap(slot);
    }
}

/// VmRSS in KiB and the number of open fds of `pid`, each the least of 20
/// readings over 2 s: a scan in progress holds a few /proc files open for a
/// moment, which is not a leak; a leak raises the floor.
/// `pid`'s open fds: those on a process's stat file (the scan holds one
/// per process it saw last) and the others, read in one pass.
fn stat_files_and_other_fds(pid: u32) -> (usize, usize) {
    let mut counts = (0, 0);
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd dir").flatten() {
        let stat_file = std::fs::read_link(e.path()).is_ok_and(|t| {
            t.to_string_lossy()
                .strip_prefix("/proc/")
                .and_then(|r| r.strip_suffix("/stat"))
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        });
        if stat_file {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    counts
}

/// The view's RSS and its open fds other than the stat files it holds, the
/// least of 20 readings.
fn rss_and_fds(pid: u32) -> (u64, usize) {
    let mut least = (u64::MAX, usize::MAX);
    for _ in 0..20 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the view is running");
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        let fds = stat_files_and_other_fds(pid).1;
        least = (least.0.min(rss), least.1.min(fds));
        std::thread::sleep(Duration::from_millis(100));
    }
    least
}

/// What `pid`'s fds point at, for the message when their number changed.
fn fd_targets(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .map(|e| format!("{:?} -> {:?}", e.file_name(), std::fs::read_link(e.path()).ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// The gputaskman process that `shell` (the pane's shell) started.
fn view_pid(shell: u32) -> u32 {
    let start = Instant::now();
    loop {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some(close) = stat.rfind(')') else { continue };
            let comm = &stat[stat.find('(').unwrap() + 1..close];
            let ppid = stat[close + 2..]
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            if comm == "gputaskman" && ppid == Some(shell) {
                return pid;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no gputaskman under the pane"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn has_row(screen: &str, pid: u32) -> bool {
    screen.lines().any(|l| {
        l.split_whitespace()
            .next()
            .is_some_and(|first| first.trim_end_matches(['*', '?']) == pid.to_string())
    })
}

#[test]
fn the_live_view_survives_a_thousand_processes_a_second() {
    let Some(tmux) = tmux_path() else { return };
    let secs: u64 = std::env::var("GPUTASKMAN_CHURN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let warm = if secs >= 120 { 60 } else { 5 };
    assert!(secs > warm + 5, "GPUTASKMAN_CHURN_SECS={secs}: too short");

    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario::new(&json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "memory": {"total": 17171480576u64, "used": 1073741824u64, "free": 16097738752u64},
            "compute_processes": [],
            "graphics_processes": []
        }]
    }));
    let t = Tmux::new(tmux, "churn");
    t.start(&format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {} --interval {}; echo EXITED $?; sleep 600",
        scenario.path().display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
        INTERVAL.as_secs_f64(),
    ));
    let shell: u32 = t.display("#{pane_pid}").parse().unwrap();
    let view = view_pid(shell);
    t.wait_for("the first figures", Duration::from_secs(20), |s| s.contains("q quit"));
    // All processes, so an AI process with nothing on the GPU has a row.
    t.keys(&["a"]);
    t.wait_for("all processes", Duration::from_secs(10), |s| s.contains("a all"));

    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let spawner = {
        let (stop, started) = (stop.clone(), started.clone());
        std::thread::spawn(move || churn(stop, started))
    };
    let begin = Instant::now();
    let stamp = |s: &str| s.lines().next().unwrap_or("").to_string();
    let mut last_stamp = stamp(&t.screen());
    let mut warm_figures = None;
    let mut gone_after: Vec<Duration> = Vec::new();
    let mut stale_screens = 0u32;
    let mut round = 0u32;
    // RSS along the way (MiB, every tenth of the run), to tell a leak's
    // slope from an allocator's steps.
    let mut series: Vec<String> = Vec::new();
    while begin.elapsed() < Duration::from_secs(secs) {
        if warm_figures.is_none() && begin.elapsed() >= Duration::from_secs(warm) {
            warm_figures = Some(rss_and_fds(view));
        }
        if begin.elapsed() >= Duration::from_secs(secs * series.len() as u64 / 10) {
            series.push(format!("{:.1}", rss_and_fds(view).0 as f64 / 1024.0));
        }
        // A known process appears, exits, and must leave the screen within
        // two refreshes (plus the time to capture the pane).
        round += 1;
        let known = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/churn.gguf"]);
        let pid = known.pid();
        t.wait_for("the known process's row", Duration::from_secs(10), |s| has_row(s, pid));
        drop(known);
        let killed = Instant::now();
        let s = t.wait_for("the exited process to leave", Duration::from_secs(30), |s| {
            !has_row(s, pid)
        });
        gone_after.push(killed.elapsed());
        assert!(!s.contains("panicked"), "{s}");
        let now = stamp(&s);
        if now == last_stamp {
            stale_screens += 1;
        }
        last_stamp = now;
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    spawner.join().unwrap();
    let elapsed = begin.elapsed().as_secs_f64();
    let end_figures = rss_and_fds(view);
    let (warm_rss, warm_fds) = warm_figures.expect("warm-up figures taken");
    let (end_rss, end_fds) = end_figures;
    let spawned = started.load(Ordering::Relaxed);
    let rate = spawned as f64 / elapsed;
    let worst = gone_after.iter().max().copied().unwrap_or_default();
    let line = format!(
        "churn: {secs} s, {spawned} processes started ({rate:.0}/s); view RSS {warm_rss} KiB at {warm} s, \
         {end_rss} KiB at the end ({:+.1}%); fds {warm_fds} then {end_fds}; {round} exited processes left \
         the screen after at most {} ms; RSS along the way (MiB): {}",
        (end_rss as f64 / warm_rss as f64 - 1.0) * 100.0,
        worst.as_millis(),
        series.join(" "),
    );
    eprintln!("{line}");

    // Still alive and refreshing: the title's sample time moves.
    let before = stamp(&t.screen());
    let s = t.wait_for("another refresh", 5 * INTERVAL, |s| stamp(s) != before);
    assert!(!s.contains("EXITED"), "the view ended:\n{s}");
    assert!(stale_screens < round, "the sample time never moved in {round} rounds");
    assert!(
        rate >= RATE as f64 / 4.0,
        "only {rate:.0} processes a second were started"
    );
    assert!(
        end_rss as f64 <= warm_rss as f64 * 1.10,
        "RSS grew from {warm_rss} KiB to {end_rss} KiB"
    );
    assert_eq!(end_fds, warm_fds, "open fds changed: {:#?}", fd_targets(view));
    // The stat files of exited processes are let go: two refreshes after
    // the churn stopped, no more are held than processes run.
    std::thread::sleep(2 * INTERVAL + Duration::from_millis(500));
    let held = stat_files_and_other_fds(view).0;
    let running = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .count();
    assert!(held <= running + 50, "{held} stat files held for {running} processes");
    assert!(
        worst <= 2 * INTERVAL + Duration::from_millis(500),
        "an exited process stayed on screen for {worst:?} (two refreshes are {:?})",
        2 * INTERVAL
    );

    t.keys(&["q"]);
    let s = t.wait_for("the view to quit", Duration::from_secs(10), |s| s.contains("EXITED"));
    assert!(s.contains("EXITED 0"), "{s}");
}
