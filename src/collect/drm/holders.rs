//! Which processes hold DRM files. Reading every fd of every process is
//! the expensive part, so it is done in full only on the first sample.
//! After that, each sample lists /proc (one directory read), looks at the
//! fds of PIDs it has not seen yet and of a slice of the others (in turn,
//! so that every process is looked at again within the rescan period, at
//! most [`MAX_RELIST`] a sample, without a spike), reading only the links
//! of fd numbers that are new since the last look, and rereads only the
//! fdinfo of the DRM fds it knows.

use super::fdinfo;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

/// The most known processes whose fds one sample looks at again: it bounds
/// the cost of a sample on a machine with thousands of processes (new PIDs
/// are always looked at at once).
pub const MAX_RELIST: usize = 100;

/// A DRM file descriptor of a process: the fd number and the node it opens
/// (`renderD128`, `card0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DrmFd {
    pub(super) fd: u32,
    pub(super) node: String,
}

/// Every this many looks at a process, every one of its fd links is read
/// again; in between, only the links of fd numbers that are new since the
/// last look. (An fd number that went from another file to a DRM file is so
/// found within DEEP_EVERY rescan periods; one that went from a DRM file to
/// another loses its `drm-driver` line and is dropped at once.)
pub const DEEP_EVERY: u32 = 12;

/// What the last look at a process's fds found.
#[derive(Debug, Clone, Default)]
struct FdState {
    /// Every fd number, sorted.
    numbers: Vec<u32>,
    /// The fd that has /dev/kfd open (ROCm), if any.
    kfd: Option<u32>,
    /// Looks so far.
    visits: u32,
}

/// What a process's fd directory said.
enum FdScan {
    /// The DRM fds (maybe none), what to remember, and the links read.
    Found(Vec<DrmFd>, FdState, usize),
    /// Exited between listing and reading: normal.
    Gone,
    /// Not ours to read (another user's process, and we are not root).
    Denied,
}

/// Counts of the work a sample did, for the benchmark and the status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Processes listed in /proc.
    pub processes: usize,
    /// Processes whose fd directory was read this sample.
    pub fd_dirs_read: usize,
    /// fd links read this sample.
    pub links_read: usize,
    /// fdinfo files read this sample.
    pub fdinfo_read: usize,
    /// Processes holding DRM fds.
    pub holders: usize,
    /// Distinct clients.
    pub clients: usize,
    /// Processes whose fds could not be read (permission).
    pub denied: usize,
    /// Whether this sample looked at every process's fds (the first
    /// sample; later ones look at new PIDs and a slice of the others).
    pub full_scan: bool,
}

/// The processes holding DRM fds, and what the last look at each found.
#[derive(Default)]
pub(super) struct Holders {
    /// When the fds were last looked at (None: the next sample looks at
    /// every process).
    last_refresh: Option<Duration>,
    seen: HashSet<u32>,
    /// Known PIDs in the order they are looked at again, and where the
    /// next slice starts.
    order: Vec<u32>,
    cursor: usize,
    by_pid: BTreeMap<u32, Vec<DrmFd>>,
    fd_state: HashMap<u32, FdState>,
    denied: BTreeSet<u32>,
}

impl Holders {
    /// Processes whose fds could not be read (permission).
    pub(super) fn denied(&self) -> usize {
        self.denied.len()
    }

    /// Whether the process has /dev/kfd open (ROCm).
    pub(super) fn uses_kfd(&self, pid: u32) -> bool {
        self.fd_state.get(&pid).is_some_and(|s| s.kfd.is_some())
    }

    /// Lists /proc and finds the DRM fds: of every process on the first
    /// sample; later, of new PIDs and of the next slice of known ones, sized
    /// so that each is looked at again within the rescan period. Exited
    /// processes are dropped.
    pub(super) fn refresh(
        &mut self,
        proc_root: &Path,
        now: Duration,
        rescan_every: Duration,
        stats: &mut ScanStats,
    ) -> Result<(), String> {
        let listed: HashSet<u32> = match std::fs::read_dir(proc_root) {
            Ok(dir) => dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect(),
            Err(e) => return Err(format!("cannot list {}: {e}", proc_root.display())),
        };
        stats.processes = listed.len();
        let first = self.last_refresh.is_none();
        let elapsed = self.last_refresh.map(|t| now.saturating_sub(t)).unwrap_or_default();
        self.last_refresh = Some(now);
        if first {
            self.seen.clear();
            self.order.clear();
            self.cursor = 0;
            self.by_pid.clear();
            self.fd_state.clear();
            self.denied.clear();
            stats.full_scan = true;
        } else {
            self.seen.retain(|p| listed.contains(p));
            self.order.retain(|p| listed.contains(p));
            self.by_pid.retain(|p, _| listed.contains(p));
            self.fd_state.retain(|p, _| listed.contains(p));
            self.denied.retain(|p| listed.contains(p));
        }
        // Known PIDs, in turn: as many as the time since the last sample
        // asks for, at most all of them.
        let mut again = Vec::new();
        if !first && !self.order.is_empty() {
            let share = elapsed.as_secs_f64() / rescan_every.as_secs_f64().max(1e-3);
            let n = ((self.order.len() as f64 * share).ceil() as usize)
                .min(self.order.len())
                .min(MAX_RELIST);
            for _ in 0..n {
                self.cursor %= self.order.len();
                again.push(self.order[self.cursor]);
                self.cursor += 1;
            }
        }
        let mut new: Vec<u32> = listed.iter().copied().filter(|p| !self.seen.contains(p)).collect();
        new.sort_unstable();
        for &pid in &new {
            self.seen.insert(pid);
            self.order.push(pid);
        }
        for pid in new.into_iter().chain(again) {
            stats.fd_dirs_read += 1;
            self.denied.remove(&pid);
            let previous = self.fd_state.remove(&pid);
            let known = self.by_pid.get(&pid).map(Vec::as_slice).unwrap_or_default();
            match scan_fds(proc_root, pid, previous.as_ref(), known) {
                FdScan::Found(fds, state, links) => {
                    stats.links_read += links;
                    self.fd_state.insert(pid, state);
                    if fds.is_empty() {
                        self.by_pid.remove(&pid);
                    } else {
                        self.by_pid.insert(pid, fds);
                    }
                }
                FdScan::Gone => {
                    self.by_pid.remove(&pid);
                }
                FdScan::Denied => {
                    self.denied.insert(pid);
                }
            }
        }
        stats.denied = self.denied.len();
        Ok(())
    }

    /// Reads the fdinfo of every known DRM fd. An fd that is gone (closed,
    /// or the process exited: ENOENT) or no longer a DRM file is forgotten.
    pub(super) fn read_fdinfo(&mut self, proc_root: &Path, stats: &mut ScanStats) -> Vec<(u32, DrmFd, fdinfo::Fdinfo)> {
        let mut readings = Vec::new();
        let mut read = 0;
        for (pid, fds) in self.by_pid.iter_mut() {
            let dir = proc_root.join(pid.to_string()).join("fdinfo");
            fds.retain(|fd| {
                read += 1;
                match fdinfo::read(&dir.join(fd.fd.to_string())) {
                    Ok(info) if info.driver.is_some() => {
                        readings.push((*pid, fd.clone(), info));
                        true
                    }
                    _ => false,
                }
            });
        }
        self.by_pid.retain(|_, fds| !fds.is_empty());
        stats.fdinfo_read = read;
        stats.holders = self.by_pid.len();
        readings
    }
}

/// Looks at a process's fds: the DRM ones (links to /dev/dri/*) and
/// whether /dev/kfd is open. With what the last look found (`previous`, and
/// the DRM fds then, `known`), only new fd numbers have their link read,
/// except on every [`DEEP_EVERY`]th look.
fn scan_fds(proc_root: &Path, pid: u32, previous: Option<&FdState>, known: &[DrmFd]) -> FdScan {
    let dir = proc_root.join(pid.to_string()).join("fd");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return FdScan::Denied,
        Err(_) => return FdScan::Gone,
    };
    let visits = previous.map_or(0, |p| p.visits + 1);
    let shallow = previous.filter(|_| (visits + pid) % DEEP_EVERY != 0);
    let mut fds = Vec::new();
    let mut state = FdState {
        visits,
        ..FdState::default()
    };
    let mut links = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(fd) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        state.numbers.push(fd);
        if let Some(prev) = shallow {
            if prev.numbers.binary_search(&fd).is_ok() {
                if let Some(d) = known.iter().find(|d| d.fd == fd) {
                    fds.push(d.clone());
                } else if prev.kfd == Some(fd) {
                    state.kfd = Some(fd);
                }
                continue;
            }
        }
        // An fd closed since the listing has no link: skip it. A link we
        // may not read (a restricted process) makes the process unreadable.
        links += 1;
        let target = match std::fs::read_link(entry.path()) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::PermissionDenied => return FdScan::Denied,
            Err(_) => continue,
        };
        let Some(target) = target.to_str() else {
            continue;
        };
        if let Some(node) = target.strip_prefix("/dev/dri/") {
            if !node.is_empty() && !node.contains('/') {
                fds.push(DrmFd {
                    fd,
                    node: node.to_string(),
                });
            }
        } else if target == "/dev/kfd" {
            state.kfd = Some(fd);
        }
    }
    state.numbers.sort_unstable();
    fds.sort_by_key(|f| f.fd);
    FdScan::Found(fds, state, links)
}
