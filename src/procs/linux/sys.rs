//! What the scanner asks of the C library: its limits and clocks.

use std::time::{Duration, Instant};

/// How many stat files a scanner may hold open: half the open-file limit,
/// after raising the soft limit toward the hard one (which any process may
/// do), so that sockets, DRM fdinfo and model files always have room.
pub(super) fn stat_files_budget() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write only `limit`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        let want = limit.rlim_max.min(1 << 16);
        if limit.rlim_cur < want {
            let raised = libc::rlimit {
                rlim_cur: want,
                ..limit
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    usize::try_from(limit.rlim_cur / 2).unwrap_or(0)
}

/// A positive sysconf value.
pub(super) fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf takes no pointer; it returns -1 for an unknown name.
    u64::try_from(unsafe { libc::sysconf(name) }).ok().filter(|v| *v > 0)
}

/// [`cpu_nanos`] and the moment it was read, the two close together: a
/// scanner preempted between them (a loaded machine) would pair the CPU
/// time with a later moment, and over a 50 ms window a millisecond off is
/// 2 % of a core. The closest of a few tries is kept, stamped midway.
pub(super) fn cpu_nanos_at(pid: u32) -> (Option<u64>, Instant) {
    let mut best: Option<(Duration, Option<u64>, Instant)> = None;
    for _ in 0..4 {
        let before = Instant::now();
        let nanos = cpu_nanos(pid);
        let after = Instant::now();
        let took = after.duration_since(before);
        if best.as_ref().is_none_or(|(t, _, _)| took < *t) {
            best = Some((took, nanos, before + took / 2));
        }
        if nanos.is_none() || took < Duration::from_micros(50) {
            break;
        }
    }
    let (_, nanos, at) = best.expect("one try at least");
    (nanos, at)
}

/// A process's CPU time in nanoseconds, all its threads: its CPU-time
/// clock (the kernel's sum of their run times), read without a file. The
/// PID is one of this PID namespace's.
fn cpu_nanos(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: both calls write only to the locals passed, alive for them.
    let ok = unsafe {
        libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) == 0 && libc::clock_gettime(clock, &mut now) == 0
    };
    let secs = u64::try_from(now.tv_sec).ok()?;
    let nanos = u64::try_from(now.tv_nsec).ok()?;
    ok.then(|| secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}
