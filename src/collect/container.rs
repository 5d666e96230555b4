//! Inside a container, NVML reports host PIDs: numbers that mean nothing in
//! the container's PID namespace (the driver ignores namespaces). This pairs
//! them with the container's own processes.
//!
//! Only processes that map libcuda can hold a CUDA context, and pure NVML
//! users (nvidia-smi) never load it, so they are the candidates. Both
//! namespaces number processes in creation order, so pairing goes by order:
//! when the counts agree every pair is exact, and stays fixed for as long as
//! both sides live; when they differ the pairs are a guess, recomputed each
//! refresh and never kept. A host PID whose container process exited is
//! withheld (shown as a host process) until NVML drops it, so a new process
//! never inherits the old one's memory.

use super::source::Owner;
use crate::procs::ProcInfo;
use crate::snapshot::{GpuUsage, Match};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

/// PROC_PID_INIT_INO in the kernel's include/linux/proc_ns.h: the inode of
/// the initial (host) PID namespace, the same on every Linux machine.
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// Whether we run in a PID namespace other than the host's. None when the
/// namespace link cannot be read. PID namespaces are Linux's: elsewhere
/// (and under Wine, whose /proc/self is Wine's Linux process) we are in
/// none.
pub fn in_child_pid_namespace(proc_root: &Path) -> Option<bool> {
    if cfg!(not(target_os = "linux")) {
        return Some(false);
    }
    let link = std::fs::read_link(proc_root.join("self/ns/pid")).ok()?;
    Some(link.to_string_lossy() != INITIAL_PID_NAMESPACE)
}

/// A container process that can hold a CUDA context.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    /// Creation order: start time after boot in clock ticks, then PID.
    pub started: u64,
    pub pid: u32,
}

/// What a host PID pairs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pair {
    /// This container process, certainly (counts and order agree).
    Exact(u32),
    /// This container process, by a guess (counts differ).
    Guess(u32),
    /// A process outside this container, or one whose container process
    /// exited.
    Host,
}

/// The pairing state kept between refreshes.
#[derive(Debug, Default)]
pub struct HostPidPairing {
    /// Exact pairs: host PID to container process.
    exact: BTreeMap<u32, Candidate>,
    /// Host PIDs whose container process exited while NVML still lists them.
    withheld: BTreeSet<u32>,
}

impl HostPidPairing {
    /// Pairs the host PIDs NVML lists now with the candidates alive now.
    pub fn pair(&mut self, host_pids: &[u32], candidates: &[Candidate]) -> BTreeMap<u32, Pair> {
        let listed: BTreeSet<u32> = host_pids.iter().copied().collect();
        let alive: BTreeSet<&Candidate> = candidates.iter().collect();
        self.withheld.retain(|h| listed.contains(h));
        let mut exited = Vec::new();
        self.exact.retain(|host, c| {
            if !listed.contains(host) {
                return false;
            }
            if !alive.contains(c) {
                exited.push(*host);
                return false;
            }
            true
        });
        self.withheld.extend(exited);

        let taken: BTreeSet<&Candidate> = self.exact.values().collect();
        let mut free_hosts: Vec<u32> = listed
            .iter()
            .copied()
            .filter(|h| !self.exact.contains_key(h) && !self.withheld.contains(h))
            .collect();
        let mut free: Vec<&Candidate> = alive.iter().copied().filter(|c| !taken.contains(c)).collect();
        free_hosts.sort_unstable();
        free.sort();

        let mut out: BTreeMap<u32, Pair> = listed.iter().map(|&h| (h, Pair::Host)).collect();
        if free_hosts.len() == free.len() {
            for (&h, c) in free_hosts.iter().zip(&free) {
                self.exact.insert(h, (*c).clone());
            }
        } else {
            // More host PIDs than candidates: the rest run elsewhere, and a
            // container is usually younger than what runs beside it, so the
            // newest host PIDs pair with the container's processes. More
            // candidates than host PIDs: some have not made a context yet;
            // the oldest are paired.
            let n = free_hosts.len().min(free.len());
            let hosts = &free_hosts[free_hosts.len() - n..];
            for (&h, c) in hosts.iter().zip(free.iter().take(n)) {
                out.insert(h, Pair::Guess(c.pid));
            }
        }
        for (h, c) in &self.exact {
            out.insert(*h, Pair::Exact(c.pid));
        }
        out
    }
}

/// The collector's PID stage: whose the PIDs the sources report as
/// [`Owner::Local`] are, in this PID namespace.
pub enum PidView {
    /// Ours: no namespace in between.
    Own,
    /// In a child PID namespace NVML's PIDs are the host's: they are paired
    /// with ours by creation order.
    Container(HostPidPairing),
    /// Under WSL, NVML's PIDs that are not ours are Windows PIDs.
    WslGuest,
}

impl PidView {
    pub fn new(in_child_namespace: bool, wsl: bool) -> PidView {
        match (in_child_namespace, wsl) {
            (true, _) => PidView::Container(HostPidPairing::default()),
            (false, true) => PidView::WslGuest,
            (false, false) => PidView::Own,
        }
    }

    /// Whether GPU entries are paired with processes by the libraries those
    /// map (libcuda in a container, libdxcore under WSL), so that every
    /// process's maps are needed, not only those of the PIDs a driver names.
    pub fn pairs_by_libraries(&self) -> bool {
        !matches!(self, PidView::Own)
    }

    /// The PIDs a source's can be checked against: none in a child
    /// namespace, where no driver's PID is ours.
    pub fn visible(&self, scanned: &[ProcInfo]) -> HashSet<u32> {
        match self {
            PidView::Container(_) => HashSet::new(),
            PidView::Own | PidView::WslGuest => scanned.iter().map(|p| p.pid).collect(),
        }
    }

    /// Gives each local entry its owner here: a container process, paired
    /// exactly or by a guess, a host (or Windows) process, or ours.
    pub fn owners(
        &mut self,
        scanned: &[ProcInfo],
        visible: &HashSet<u32>,
        usage: Vec<(Owner, GpuUsage)>,
    ) -> Vec<(Owner, GpuUsage)> {
        match self {
            PidView::Own => usage,
            PidView::WslGuest => usage
                .into_iter()
                .map(|(owner, u)| match owner {
                    Owner::Local(pid) if !visible.contains(&pid) => (Owner::Host(pid), u),
                    _ => (owner, u),
                })
                .collect(),
            PidView::Container(pairing) => pair_host_pids(pairing, scanned, usage),
        }
    }
}

fn pair_host_pids(
    pairing: &mut HostPidPairing,
    scanned: &[ProcInfo],
    usage: Vec<(Owner, GpuUsage)>,
) -> Vec<(Owner, GpuUsage)> {
    let candidates: Vec<Candidate> = scanned
        .iter()
        .filter(|i| i.runtimes.iter().any(|r| r == "cuda"))
        .map(|i| Candidate {
            started: i.start_ticks,
            pid: i.pid,
        })
        .collect();
    let mut host_pids: Vec<u32> = usage
        .iter()
        .filter_map(|(owner, _)| match owner {
            Owner::Local(pid) => Some(*pid),
            _ => None,
        })
        .collect();
    host_pids.sort_unstable();
    host_pids.dedup();
    let pairs = pairing.pair(&host_pids, &candidates);
    usage
        .into_iter()
        .map(|(owner, mut usage)| {
            let Owner::Local(host_pid) = owner else {
                return (owner, usage);
            };
            let owner = match pairs.get(&host_pid) {
                Some(Pair::Exact(pid)) => {
                    usage.pairing = Some(Match::Exact);
                    Owner::Paired { pid: *pid, host_pid }
                }
                Some(Pair::Guess(pid)) => {
                    usage.pairing = Some(Match::Guess);
                    Owner::Paired { pid: *pid, host_pid }
                }
                Some(Pair::Host) | None => {
                    usage.pairing = None;
                    Owner::Host(host_pid)
                }
            };
            (owner, usage)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(started: u64, pid: u32) -> Candidate {
        Candidate { started, pid }
    }

    #[test]
    fn equal_counts_pair_in_order_exactly() {
        let mut p = HostPidPairing::default();
        let pairs = p.pair(&[5002, 5001], &[c(20, 8), c(10, 7)]);
        assert_eq!(pairs[&5001], Pair::Exact(7));
        assert_eq!(pairs[&5002], Pair::Exact(8));
    }

    #[test]
    fn a_process_started_while_monitoring_is_paired_and_old_pairs_stay() {
        let mut p = HostPidPairing::default();
        p.pair(&[5001, 5002], &[c(10, 7), c(20, 8)]);
        let pairs = p.pair(&[5001, 5002, 5003], &[c(10, 7), c(20, 8), c(30, 9)]);
        assert_eq!(pairs[&5001], Pair::Exact(7));
        assert_eq!(pairs[&5002], Pair::Exact(8));
        assert_eq!(pairs[&5003], Pair::Exact(9));
    }

    #[test]
    fn a_killed_process_keeps_its_host_pid_withheld_from_a_newcomer() {
        let mut p = HostPidPairing::default();
        p.pair(&[5001, 5002], &[c(10, 7), c(20, 8)]);
        // 8 exits and 9 starts; NVML still lists 5002 for a moment and
        // already lists 9's host PID 5003.
        let pairs = p.pair(&[5001, 5002, 5003], &[c(10, 7), c(30, 9)]);
        assert_eq!(pairs[&5001], Pair::Exact(7));
        assert_eq!(pairs[&5002], Pair::Host, "8's memory is not handed to 9");
        assert_eq!(pairs[&5003], Pair::Exact(9));
        // NVML drops 5002: nothing is withheld any more.
        let pairs = p.pair(&[5001, 5003], &[c(10, 7), c(30, 9)]);
        assert_eq!(pairs.len(), 2);
        assert!(p.withheld.is_empty());
    }

    #[test]
    fn more_host_pids_than_candidates_is_a_guess_with_host_leftovers() {
        let mut p = HostPidPairing::default();
        let pairs = p.pair(&[100, 5001, 5002], &[c(10, 7), c(20, 8)]);
        assert_eq!(pairs[&100], Pair::Host);
        assert_eq!(pairs[&5001], Pair::Guess(7));
        assert_eq!(pairs[&5002], Pair::Guess(8));
        // Guesses are not kept: with the host process gone the counts agree
        // and the pairs become exact.
        let pairs = p.pair(&[5001, 5002], &[c(10, 7), c(20, 8)]);
        assert_eq!(pairs[&5001], Pair::Exact(7));
    }

    #[test]
    fn more_candidates_than_host_pids_pairs_the_oldest() {
        let mut p = HostPidPairing::default();
        let pairs = p.pair(&[5001], &[c(10, 7), c(20, 8)]);
        assert_eq!(pairs[&5001], Pair::Guess(7));
    }

    #[test]
    fn the_namespace_of_this_process_is_read() {
        // Whatever this machine is, the link is readable here.
        assert!(in_child_pid_namespace(Path::new("/proc")).is_some());
        assert_eq!(in_child_pid_namespace(Path::new("/nonexistent")), None);
    }
}
