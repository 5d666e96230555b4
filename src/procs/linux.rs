//! The /proc scan on Linux, through the procfs crate. The root is a
//! parameter so tests can point it at a recorded tree.

use super::process::{lookup_user, ProcInfo, MAPS_REFRESH};
use super::{classify, redact};
use anyhow::Context;
use foldhash::{HashMap, HashMapExt, HashSet};
use procfs::process::Process;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A process younger than this is still loading its libraries (a Python
/// server imports its runtime seconds after it starts): its maps are
/// reread every [`YOUNG_MAPS_REFRESH`] instead of [`MAPS_REFRESH`].
const YOUNG: Duration = Duration::from_secs(60);
const YOUNG_MAPS_REFRESH: Duration = Duration::from_secs(1);
/// The most deferred maps a scan after the first reads while every
/// process is shown (`a`, `serve`, `record`): such a view has read every
/// process's within a few refreshes, and no refresh pays for them all.
const DEFERRED_MAPS_PER_SCAN: usize = 250;
/// How many scans read a process's empty argv again. A process seen in
/// exec's window has its new name but no argv yet: the kernel sets `comm`
/// in begin_new_exec and the new argv's bounds (mm->arg_start, arg_end)
/// only after, in the binary loader's create_elf_tables, so its cmdline
/// reads empty. A few reads later it has its argv; one that stays empty
/// (a process that cleared it) is left so.
const ARGV_REREADS: u8 = 3;

/// Where the kernel's PID allocator is: the last PID it gave, and how far
/// it has moved since the scanner started following it (in PIDs, counted
/// around pid_max; a wrap past the reserved low PIDs counts them too, which
/// only errs towards reading).
struct PidCursor {
    last: u64,
    travel: u64,
}

/// With the kernel's events, /proc is still listed every this many scans.
const RELIST_EVERY: u64 = 60;

/// PIDs of slack before a kept stat's PID could come back: a process
/// forked between the allocator's reading and its own scan is ahead of it.
const PID_MARGIN: u64 = 64;

/// The lifelong part of a process; classified: (comm, runtimes, kind) as
/// last classified.
type Static = super::process::Lifelong<u64, Option<(String, Vec<String>, crate::snapshot::ProcessKind)>>;

pub struct ProcScanner {
    root: PathBuf,
    ticks_per_second: u64,
    page_size: u64,
    boot_time_secs: Option<u64>,
    /// What the last scan listed, by PID ascending: walked beside the
    /// next listing, so a refresh looks nothing up by PID for the
    /// processes that did not change.
    known: Vec<Known>,
    statics: HashMap<(u32, u64), Static>,
    users: HashMap<u32, String>,
    /// While a one-shot's CPU window is open: each process's first reading,
    /// taken by the scan, for [`ProcScanner::close_cpu_window`].
    opened: Option<HashMap<u32, Opened>>,
    /// The root is the live /proc, so a PID's CPU-time clock is that
    /// process's (a recorded tree's PIDs are not processes here).
    live: bool,
    /// The shortest window a CPU% of the last scan (or closed window) was
    /// measured over.
    window: Option<Duration>,
    /// Each process's stat file, kept open between scans and reread from
    /// its start (no path walk, no open and close: two thirds of what a
    /// live view's refresh costs the kernel), with the start time it was
    /// opened for. The file is bound to the process, not to its PID: once
    /// the process is gone a read fails, even if the PID is reused.
    stat_files: HashMap<u32, (u64, std::fs::File)>,
    /// How many stat files may be held, within the open-file limit.
    stat_files_max: usize,
    /// Processes whose maps were not read yet: nothing in their name,
    /// argv or executable's folder says they could hold a runtime. Read
    /// when a GPU source names them ([`ProcScanner::read_deferred_maps`]),
    /// and [`DEFERRED_MAPS_PER_SCAN`] a scan after the first.
    deferred: HashSet<(u32, u64)>,
    /// How many deferred maps this scan may still read.
    catch_up_left: usize,
    /// A quiet process's stat is read every this many scans (1: every
    /// scan); see [`ProcScanner::read_quiet_processes_every`].
    quiet_every: u64,
    /// How far the kernel's PID allocator has moved; None where it cannot
    /// be followed (then no stat is kept).
    pid_cursor: Option<PidCursor>,
    /// The kernel's pid_max: where the allocator wraps.
    pid_max: Option<u64>,
    /// The PIDs a GPU source named last round: never quiet.
    holders: HashSet<u32>,
    /// The processes whose kept stat the last scan used, ascending.
    kept: Vec<u32>,
    /// How many times a process's empty argv was read again
    /// ([`ARGV_REREADS`]).
    argv_rereads: HashMap<(u32, u64), u8>,
    scans: u64,
    /// The last scan's rows, handed back by the sample ([`ProcScanner::keep`]).
    rows: Vec<ProcInfo>,
    /// The kernel's process events, where followed
    /// ([`ProcScanner::follow_process_events`]).
    events: Option<events::ProcEvents>,
    /// The PIDs the events since the last scan named new or exec'd: read,
    /// whatever is kept.
    eventful: HashSet<u32>,
    /// The next scan lists /proc whatever the events say (just subscribed,
    /// or events were lost).
    relist: bool,
    /// Processes whose names say they cannot load a runtime (a program in
    /// a system folder, a kernel thread): with the kernel's events, their
    /// kept stat stands until an event names them.
    inert: HashSet<(u32, u64)>,
}

/// What a scan keeps of one process it listed.
struct Known {
    pid: u32,
    start: u64,
    /// CPU ticks (user + system) at the reading the next CPU% spans from.
    cpu: (u64, Instant),
    /// A quiet process's last stat (no GPU source named it last round, it
    /// is no AI process and loaded no GPU runtime), and the PID travel
    /// ([`PidCursor`]) at which its PID could next be handed out.
    quiet: Option<(Stat, u64)>,
    /// Its names say it cannot load a runtime ([`ProcScanner::inert`]).
    inert: bool,
}

/// A process's CPU time when a one-shot's window opened.
struct Opened {
    start: u64,
    ticks: u64,
    nanos: Option<u64>,
    at: Instant,
}

impl ProcScanner {
    pub fn new(root: PathBuf) -> Self {
        let boot_time_secs = read_boot_time(&root);
        let pid_max = std::fs::read_to_string(root.join("sys/kernel/pid_max"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .filter(|&m: &u64| m > 0);
        ProcScanner {
            live: root == Path::new("/proc"),
            root,
            // From libc, not procfs (rustix's auxv reader, which valgrind's
            // vDSO makes fault: the scan could not be profiled).
            ticks_per_second: sysconf(libc::_SC_CLK_TCK).unwrap_or(100),
            page_size: sysconf(libc::_SC_PAGESIZE).unwrap_or(4096),
            boot_time_secs,
            known: Vec::new(),
            statics: HashMap::new(),
            users: HashMap::new(),
            opened: None,
            window: None,
            stat_files: HashMap::new(),
            stat_files_max: stat_files_budget(),
            deferred: Default::default(),
            catch_up_left: 0,
            scans: 0,
            quiet_every: 1,
            pid_cursor: None,
            pid_max,
            holders: Default::default(),
            kept: Default::default(),
            argv_rereads: HashMap::new(),
            rows: Vec::new(),
            events: None,
            eventful: Default::default(),
            relist: false,
            inert: Default::default(),
        }
    }

    /// Reads a quiet process's stat only every `every`th scan, for a view
    /// that shows no such process (the live view until `a`): they are most
    /// of a machine's processes and most of a refresh's cost (the kernel
    /// formats each stat line). In between, the scan lists such a process
    /// from its last reading, with its CPU% and RSS unknown (not stale
    /// figures); it is read at once when a GPU source names it
    /// ([`ProcScanner::note_gpu_holders`]), and a new PID is always read.
    /// Each scan reads a different `1/every` of them.
    pub fn read_quiet_processes_every(&mut self, every: u32) {
        self.quiet_every = u64::from(every.max(1));
        if self.quiet_every == 1 {
            self.forget_quiet();
        }
    }

    /// No kept stat stands: the next scan reads every process.
    fn forget_quiet(&mut self) {
        for k in &mut self.known {
            k.quiet = None;
        }
    }

    /// What the last scan keeps of `pid`.
    fn known_mut(&mut self, pid: u32) -> Option<&mut Known> {
        let at = self.known.binary_search_by_key(&pid, |k| k.pid).ok()?;
        Some(&mut self.known[at])
    }

    /// The PIDs the GPU sources named this round: of those the scan listed
    /// from a kept stat, each is read now (or left out of this round when
    /// its PID now belongs to another process), and none is quiet next scan.
    pub fn note_gpu_holders(&mut self, holders: std::collections::HashSet<u32>, scanned: &mut Vec<ProcInfo>) {
        let mut buf = [0u8; 2048];
        let now = Instant::now();
        let page_size = self.page_size;
        let mut gone = Vec::new();
        let kept = std::mem::take(&mut self.kept);
        let mut named: Vec<u32> = holders
            .iter()
            .copied()
            .filter(|pid| kept.binary_search(pid).is_ok())
            .collect();
        named.sort_unstable();
        for pid in named {
            let Ok(at) = scanned.binary_search_by_key(&pid, |i| i.pid) else {
                continue;
            };
            let info = &mut scanned[at];
            let dir = self.root.join(info.pid.to_string());
            let Some(stat) = self.read_stat_held(info.pid, &dir.join("stat"), &mut buf) else {
                // Exited since the listing: as if the scan had not found it.
                gone.push(info.pid);
                continue;
            };
            if stat.starttime != info.start_ticks || *stat.comm != *info.name {
                // It exec'd another program since its kept reading (or,
                // past the PID guard, is another process): read whole, as
                // the scan reads a new one.
                let young = false;
                if let Some(fixed) =
                    self.static_info(&dir, info.pid, &stat.comm, (stat.starttime, stat.vsize, young), now)
                {
                    classify_again(fixed, &stat.comm);
                    take_lifelong(info, fixed);
                }
                info.name = stat.comm.to_string();
                info.start_ticks = stat.starttime;
            }
            let ticks = stat.ticks();
            let ticks_per_second = self.ticks_per_second;
            if let Some(known) = self.known_mut(pid) {
                info.cpu_percent = (known.start == stat.starttime)
                    .then_some(known.cpu)
                    .and_then(|(before, at)| {
                        let secs = now.duration_since(at).as_secs_f64();
                        (secs > 0.0)
                            .then(|| ticks.saturating_sub(before) as f64 / ticks_per_second as f64 / secs * 100.0)
                    });
                known.start = stat.starttime;
                known.cpu = (ticks, now);
            }
            info.rss_bytes = resident_bytes(&stat, page_size);
            info.ppid = (stat.ppid != 0).then_some(stat.ppid);
        }
        scanned.retain(|i| !gone.contains(&i.pid));
        for pid in &holders {
            if let Some(known) = self.known_mut(*pid) {
                known.quiet = None;
            }
        }
        self.holders = holders.into_iter().collect();
    }

    /// Opens a one-shot's CPU window: the next [`scan`] is each process's
    /// first reading (with no CPU% of its own), [`close_cpu_window`] the
    /// second, so the work between them is inside the window instead of a
    /// sleep before it.
    ///
    /// [`scan`]: ProcScanner::scan
    /// [`close_cpu_window`]: ProcScanner::close_cpu_window
    pub fn open_cpu_window(&mut self) {
        self.opened = Some(HashMap::new());
        self.known.clear();
    }

    /// The second reading of an open window, for the listed processes only
    /// (the snapshot shows no other's CPU%): after at least `min` since each
    /// one's first reading, sleeping only what the work has not filled. The
    /// CPU time comes from the process's CPU-time clock, which the kernel
    /// keeps in nanoseconds for all its threads, exited ones included (the
    /// stat file's ticks are 10 ms: 100 % of a core in a 10 ms window), and
    /// from the ticks where that clock is not this process's (a recorded
    /// /proc). A process that exited or whose PID was reused in between has
    /// no CPU%.
    pub fn close_cpu_window(&mut self, min: Duration, processes: &mut [crate::snapshot::Process]) {
        let Some(opened) = self.opened.take() else {
            return;
        };
        let latest = processes
            .iter()
            .filter(|p| p.name.is_some())
            .filter_map(|p| opened.get(&p.pid))
            .map(|o| o.at)
            .max();
        if let Some(rest) = latest.and_then(|at| min.checked_sub(at.elapsed())) {
            std::thread::sleep(rest);
        }
        let mut buf = [0u8; 2048];
        let mut shortest: Option<Duration> = None;
        for p in processes.iter_mut().filter(|p| p.name.is_some()) {
            let Some(o) = opened.get(&p.pid) else { continue };
            p.cpu_percent = None;
            let stat = read_stat(&self.root.join(p.pid.to_string()).join("stat"), &mut buf);
            let Some(stat) = stat.filter(|s| s.starttime == o.start) else {
                continue;
            };
            let (after, at) = cpu_nanos_at(p.pid);
            let nanos = o.nanos.zip(after).map(|(before, after)| after.saturating_sub(before));
            let window = at.saturating_duration_since(o.at);
            let used = match nanos {
                Some(n) => n as f64 / 1e9,
                None => stat.ticks().saturating_sub(o.ticks) as f64 / self.ticks_per_second as f64,
            };
            p.cpu_percent = Some(used / window.as_secs_f64() * 100.0);
            shortest = Some(shortest.map_or(window, |s| s.min(window)));
        }
        self.window = shortest;
    }

    /// The shortest window a CPU% of the last scan (or of the window closed
    /// after it) was measured over.
    pub fn cpu_window(&self) -> Option<Duration> {
        self.window
    }

    /// Records every process's CPU time, so that the next [`scan`] can give
    /// CPU% for a one-shot snapshot.
    ///
    /// [`scan`]: ProcScanner::scan
    pub fn prime(&mut self) {
        let Ok(all) = procfs::process::all_processes_with_root(&self.root) else {
            return;
        };
        let now = Instant::now();
        let mut buf = [0u8; 2048];
        self.known = all
            .flatten()
            .filter_map(|process| {
                let stat = read_stat(&self.root.join(process.pid.to_string()).join("stat"), &mut buf)?;
                Some(Known {
                    pid: u32::try_from(process.pid).ok()?,
                    start: stat.starttime,
                    cpu: (stat.ticks(), now),
                    quiet: None,
                    inert: false,
                })
            })
            .collect();
        self.known.sort_unstable_by_key(|k| k.pid);
    }

    /// Reads every process: each one due (new, exec'd, not quiet, a quiet
    /// one's turn) from its stat, the others from their kept reading, and
    /// reuses the row of each whose lifelong part did not change (the rows
    /// handed back by [`ProcScanner::keep`]). A process that exits while it
    /// is read is left out; a /proc that cannot be listed is an error.
    pub fn scan(&mut self) -> anyhow::Result<Vec<ProcInfo>> {
        let pids = self.listing()?;
        let now = Instant::now();
        // Clock ticks since boot: how old each process is.
        let uptime_ticks = self.boot_time_secs.and_then(|boot| {
            let since_epoch = std::time::UNIX_EPOCH.elapsed().ok()?;
            Some(since_epoch.as_secs().checked_sub(boot)? * self.ticks_per_second)
        });
        let young_ticks = YOUNG.as_secs() * self.ticks_per_second;
        // The first scan is the one a user waits for; a view that shows no
        // quiet process reads deferred maps only of those a GPU source names.
        let catch_up = self.scans > 0 && self.quiet_every == 1;
        self.catch_up_left = if catch_up { DEFERRED_MAPS_PER_SCAN } else { 0 };
        self.scans += 1;
        self.kept.clear();
        if self.quiet_every > 1 {
            self.follow_pid_cursor();
        }
        let mut shortest: Option<Duration> = None;
        let mut out = Vec::with_capacity(pids.len());
        let mut rows = std::mem::take(&mut self.rows).into_iter().peekable();
        let mut known_before = std::mem::take(&mut self.known).into_iter().peekable();
        let mut known = Vec::with_capacity(pids.len());
        let mut gone = Vec::new();
        let mut buf = [0u8; 2048];
        let mut path = self.root.clone();
        let mut pid_text = String::new();
        for pid in pids {
            while let Some(k) = known_before.next_if(|k| k.pid < pid) {
                gone.push((k.pid, k.start));
            }
            let before = known_before.next_if(|k| k.pid == pid);
            let kept_until = before.as_ref().and_then(|b| Some(b.quiet.as_ref()?.1));
            while rows.next_if(|r| r.pid < pid).is_some() {}
            let mut previous = rows.next_if(|r| r.pid == pid);
            let kept = before.as_ref().and_then(|b| self.kept_stat(b));
            if let Some(row) = self.kept_row(kept.as_ref(), &mut previous) {
                self.kept.push(pid);
                known.extend(before);
                out.push(row);
                continue;
            }
            pid_text.clear();
            let _ = std::fmt::Write::write_fmt(&mut pid_text, format_args!("{pid}"));
            path.push(&pid_text);
            path.push("stat");
            let reused = kept.is_some();
            let stat = kept.or_else(|| self.read_stat_held(pid, &path, &mut buf));
            path.pop();
            let Some(stat) = stat else {
                path.pop();
                gone.extend(before.map(|b| (b.pid, b.start)));
                continue;
            };
            let key = (pid, stat.starttime);
            let ticks = stat.ticks();
            let reference = match before {
                Some(b) if b.start == stat.starttime => Some(b.cpu),
                Some(b) => {
                    gone.push((b.pid, b.start));
                    None
                }
                None => None,
            };
            let (cpu_percent, reference) = self.cpu_reading(reference, (ticks, reused), now, &mut shortest);
            self.note_opened(pid, stat.starttime, ticks);
            let page_size = self.page_size;
            let may_be_quiet = self.quiet_every > 1 && !self.holders.contains(&pid);
            let young = uptime_ticks.is_some_and(|up| up.saturating_sub(stat.starttime) < young_ticks);
            if !self.eventful.is_empty() && self.eventful.contains(&pid) {
                // It exec'd (or was renamed): read whole, even where its
                // name stayed (python exec'ing python with other argv).
                self.statics.remove(&key);
                self.deferred.remove(&key);
            }
            let fixed = self.static_info(&path, pid, &stat.comm, (stat.starttime, stat.vsize, young), now);
            path.pop();
            let entry = |inert: &HashSet<(u32, u64)>| Known {
                pid,
                start: stat.starttime,
                cpu: reference,
                quiet: None,
                inert: inert.contains(&key),
            };
            let Some(fixed) = fixed else {
                known.push(entry(&self.inert));
                continue;
            };
            let classified_anew = classify_again(fixed, &stat.comm);
            let rss_bytes = if reused { None } else { resident_bytes(&stat, page_size) };
            // The kernel's idle task and kthreadd's children say 0: no parent.
            let ppid = (stat.ppid != 0).then_some(stat.ppid);
            let info = match previous.filter(|row| row.start_ticks == stat.starttime && !classified_anew) {
                // The same process, its lifelong part as the row has it.
                Some(row) => ProcInfo {
                    ppid,
                    cpu_percent,
                    rss_bytes,
                    ..row
                },
                None => new_row(pid, ppid, &stat, cpu_percent, rss_bytes, fixed),
            };
            let mut entry = entry(&self.inert);
            if reused {
                self.kept.push(pid);
            }
            let quiet = may_be_quiet && !info.is_interesting();
            entry.quiet = self.quiet_reading(pid, stat, reused.then_some(kept_until).flatten(), quiet);
            known.push(entry);
            out.push(info);
        }
        gone.extend(known_before.map(|k| (k.pid, k.start)));
        self.known = known;
        self.forget_gone(&gone);
        self.window = shortest;
        Ok(out)
    }

    /// This scan's CPU% of a process from its `reference` reading (none
    /// from a kept stat), and the reference the next scan measures from: a
    /// kept stat is no new reading, so the last one stays and the next
    /// reading's CPU% spans both.
    fn cpu_reading(
        &self,
        reference: Option<(u64, Instant)>,
        (ticks, reused): (u64, bool),
        now: Instant,
        shortest: &mut Option<Duration>,
    ) -> (Option<f64>, (u64, Instant)) {
        let cpu_percent = reference.filter(|_| !reused).and_then(|(before, at)| {
            let window = now.duration_since(at);
            *shortest = Some(shortest.map_or(window, |s| s.min(window)));
            let secs = window.as_secs_f64();
            (secs > 0.0).then(|| ticks.saturating_sub(before) as f64 / self.ticks_per_second as f64 / secs * 100.0)
        });
        let next = match reference {
            Some((t, at)) if reused || now.duration_since(at).as_millis() < 50 => (t, at),
            _ => (ticks, now),
        };
        (cpu_percent, next)
    }

    /// What is kept of a reading: a kept one stays until its own bound
    /// (`kept_until`); a new reading of a `quiet` process is kept while no
    /// other process can have its PID: until the PID allocator comes round
    /// to it, or, with the kernel's events, until one names it.
    fn quiet_reading(&self, pid: u32, stat: Stat, kept_until: Option<u64>, quiet: bool) -> Option<(Stat, u64)> {
        let until = match kept_until {
            Some(at) => Some(at),
            None if quiet => self.reusable_at(pid).or(self.events.is_some().then_some(u64::MAX)),
            None => None,
        };
        until.map(|at| (stat, at))
    }

    /// Takes back the rows of the last [`scan`] as the sample left them:
    /// the next scan reuses the row of each process whose lifelong part
    /// did not change, so a refresh allocates only for what did.
    ///
    /// [`scan`]: ProcScanner::scan
    pub fn keep(&mut self, rows: Vec<ProcInfo>) {
        self.rows = rows;
    }

    /// Follows the kernel's process events ([`events`]) instead of listing
    /// /proc each scan and rereading quiet processes to see whether they
    /// exec'd: where this process may (root or CAP_NET_ADMIN, in the
    /// initial PID namespace) and the root is the live /proc. An error
    /// says why the scans go on listing /proc.
    pub fn follow_process_events(&mut self) -> Result<(), String> {
        if !self.live {
            return Err("a recorded /proc has no process events".into());
        }
        let events = events::ProcEvents::subscribe().map_err(|e| e.to_string())?;
        self.events = Some(events);
        // What happened before the subscription no event tells: list and
        // read everything once.
        self.relist = true;
        self.forget_quiet();
        Ok(())
    }

    /// The PIDs to scan, ascending: the listing of /proc, or, while the
    /// kernel's events are followed and none was lost, the last scan's less
    /// the gone plus the new (with the new and exec'd marked to be read).
    /// Every [`RELIST_EVERY`] scans /proc is listed anyway, for a process
    /// no event will name again (one whose stat could not be read once).
    fn listing(&mut self) -> anyhow::Result<Vec<u32>> {
        self.eventful.clear();
        if let Some(pending) = self.events.as_ref().map(events::ProcEvents::take) {
            if pending.lost {
                // An exec may be among the lost: no kept reading stands.
                self.forget_quiet();
                self.relist = true;
            }
            self.eventful.extend(pending.new.iter().chain(&pending.changed));
            if !self.relist && self.scans % RELIST_EVERY != 0 {
                let mut pids: Vec<u32> = self
                    .known
                    .iter()
                    .map(|k| k.pid)
                    .filter(|pid| !pending.gone.contains(pid))
                    .chain(pending.new.iter().copied())
                    .collect();
                pids.sort_unstable();
                pids.dedup();
                return Ok(pids);
            }
            self.relist = false;
        }
        let dir = std::fs::read_dir(&self.root)
            .with_context(|| format!("cannot list processes in {}", self.root.display()))?;
        let mut pids: Vec<u32> = dir
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .collect();
        pids.sort_unstable();
        Ok(pids)
    }

    /// While a one-shot's CPU window is open, each process's CPU time as
    /// the window opens on it.
    fn note_opened(&mut self, pid: u32, start: u64, ticks: u64) {
        let Some(opened) = &mut self.opened else { return };
        let (nanos, at) = if self.live {
            cpu_nanos_at(pid)
        } else {
            (None, Instant::now())
        };
        opened.insert(
            pid,
            Opened {
                start,
                ticks,
                nanos,
                at,
            },
        );
    }

    /// Forgets processes that are gone (the last scan listed them, this one
    /// did not, or under another start time), so no map grows without
    /// bound; every [`RELIST_EVERY`] scans each map is swept against the
    /// listing, for what a gone key list cannot name.
    fn forget_gone(&mut self, gone: &[(u32, u64)]) {
        if self.scans % RELIST_EVERY != 0 {
            for key in gone {
                let (pid, start) = *key;
                self.statics.remove(key);
                self.deferred.remove(key);
                self.inert.remove(key);
                self.argv_rereads.remove(key);
                if self.stat_files.get(&pid).is_some_and(|(s, _)| *s == start) {
                    self.stat_files.remove(&pid);
                }
            }
            return;
        }
        let known = &self.known;
        let listed = |&(pid, start): &(u32, u64)| {
            known
                .binary_search_by_key(&pid, |k| k.pid)
                .is_ok_and(|at| known[at].start == start)
        };
        self.statics.retain(|k, _| listed(k));
        self.stat_files.retain(|pid, (start, _)| listed(&(*pid, *start)));
        self.deferred.retain(listed);
        self.inert.retain(listed);
        self.argv_rereads.retain(|k, _| listed(k));
    }

    /// The row handed back for a process listed from its kept stat with
    /// nothing due, taken and without the figures of this scan; otherwise
    /// None, and the row stays for the scan to read.
    fn kept_row(&self, kept: Option<&Stat>, previous: &mut Option<ProcInfo>) -> Option<ProcInfo> {
        let (stat, row) = (kept?, previous.as_ref()?);
        if row.start_ticks != stat.starttime || !self.unchanged(row, stat.vsize) {
            return None;
        }
        let mut row = previous.take()?;
        row.cpu_percent = None;
        row.rss_bytes = None;
        Some(row)
    }

    /// Whether a process listed from its kept stat has nothing due that
    /// [`ProcScanner::static_info`] would read, from its row alone where it
    /// can: no deferred maps this scan may catch up, no empty argv (no
    /// command line) to read again.
    fn unchanged(&self, row: &ProcInfo, vsize: u64) -> bool {
        let key = (row.pid, row.start_ticks);
        let catch_up = self.catch_up_left > 0 && !self.deferred.is_empty() && self.deferred.contains(&key);
        let argv_due =
            row.cmdline.is_none() && vsize > 0 && self.argv_rereads.get(&key).is_none_or(|&n| n < ARGV_REREADS);
        !catch_up && !argv_due
    }

    /// A quiet process's last stat, when this scan need not read it: no
    /// event named it, it has not exited (its reaping tells no event), and
    /// either this is not its turn and its PID cannot belong to another
    /// process yet, or, with the kernel's events, its names say it cannot
    /// load a runtime (then only an event makes it read).
    fn kept_stat(&self, known: &Known) -> Option<Stat> {
        if self.quiet_every == 1 || (!self.eventful.is_empty() && self.eventful.contains(&known.pid)) {
            return None;
        }
        let (stat, reusable_at) = known.quiet.as_ref().filter(|(s, _)| !s.exited)?;
        let turn = (self.scans + u64::from(known.pid)) % self.quiet_every == 0;
        if self.events.is_some() {
            return (!turn || known.inert).then(|| stat.clone());
        }
        let travel = self.pid_cursor.as_ref()?.travel;
        (!turn && travel + PID_MARGIN < *reusable_at).then(|| stat.clone())
    }

    /// Follows the PID allocator before a scan that may keep stats: the
    /// last PID it gave (/proc/loadavg's fifth field) and how far it has
    /// moved in all. Without either (or pid_max), no stat is kept.
    fn follow_pid_cursor(&mut self) {
        let last = std::fs::read_to_string(self.root.join("loadavg"))
            .ok()
            .and_then(|t| t.split_whitespace().nth(4)?.parse::<u64>().ok());
        self.pid_cursor = match (last, self.pid_max, self.pid_cursor.take()) {
            (Some(last), Some(max), Some(c)) => Some(PidCursor {
                last,
                travel: c.travel + (last + max - c.last % max) % max,
            }),
            (Some(last), Some(_), None) => Some(PidCursor { last, travel: 0 }),
            _ => None,
        };
        if self.pid_cursor.is_none() {
            self.forget_quiet();
        }
    }

    /// The travel at which the allocator could give `pid` to a new process:
    /// allocation is cyclic (alloc_pid, idr_alloc_cyclic), so a live PID
    /// comes back only once the cursor has gone round to it.
    fn reusable_at(&self, pid: u32) -> Option<u64> {
        let (c, max) = (self.pid_cursor.as_ref()?, self.pid_max?);
        let ahead = (u64::from(pid) + max - c.last % max) % max;
        Some(c.travel + if ahead == 0 { max } else { ahead })
    }

    /// A process's stat, reread through the file held open for it, or read
    /// by its path (and the file kept, within the budget) when there is none
    /// or the one held is a gone process's.
    fn read_stat_held(&mut self, pid: u32, path: &Path, buf: &mut [u8]) -> Option<Stat> {
        use std::os::unix::fs::FileExt;
        if let Some((_, file)) = self.stat_files.get(&pid) {
            if let Some(stat) = file.read_at(buf, 0).ok().and_then(|n| parse_stat(&buf[..n])) {
                return Some(stat);
            }
            self.stat_files.remove(&pid);
        }
        let mut file = std::fs::File::open(path).ok()?;
        let n = std::io::Read::read(&mut file, buf).ok()?;
        let stat = parse_stat(&buf[..n])?;
        if self.stat_files.len() < self.stat_files_max {
            self.stat_files.insert(pid, (stat.starttime, file));
        }
        Some(stat)
    }

    /// The cached parts of a process; `dir` is its /proc directory. Maps
    /// are reread only when the address space changed size (a library was
    /// loaded) since the last reading, and at most every MAPS_REFRESH, or
    /// every YOUNG_MAPS_REFRESH while the process is `young` (a server
    /// loading its runtime is recognised within a second or two). A new
    /// `comm` means the process exec'd another program (or renamed itself,
    /// as setproctitle does with its argv too): everything is read anew,
    /// or a process seen between fork and exec keeps its parent's argv.
    fn static_info(
        &mut self,
        dir: &Path,
        pid: u32,
        comm: &str,
        (start, vsize, young): (u64, u64, bool),
        now: Instant,
    ) -> Option<&mut Static> {
        let key = (pid, start);
        let renamed = self
            .statics
            .get(&key)
            .is_some_and(|s| s.classified.as_ref().is_some_and(|c| c.0 != comm));
        if renamed {
            self.statics.remove(&key);
            self.deferred.remove(&key);
            self.inert.remove(&key);
        }
        let unread_argv = vsize > 0
            && self.statics.get(&key).is_some_and(|s| s.argv.is_empty())
            && self.argv_rereads.get(&key).is_none_or(|&n| n < ARGV_REREADS);
        if unread_argv {
            *self.argv_rereads.entry(key).or_default() += 1;
            self.statics.remove(&key);
            self.deferred.remove(&key);
        }
        let refresh = if young { YOUNG_MAPS_REFRESH } else { MAPS_REFRESH };
        let stale = match self.statics.get(&key) {
            None => true,
            Some(s) => s.maps_vsize != vsize && s.maps_read_at.is_some_and(|at| now.duration_since(at) >= refresh),
        };
        let catch_up = self.catch_up_left > 0 && self.deferred.contains(&key);
        if stale || catch_up {
            // Its owner, which also says it still exists: through the
            // stat file held for it (no path walk), else its folder.
            let owner = match self.stat_files.get(&pid) {
                Some((s, file)) if *s == start => file.metadata(),
                _ => std::fs::metadata(dir),
            };
            let uid = std::os::unix::fs::MetadataExt::uid(&owner.ok()?);
            let mut fixed = match self.statics.remove(&key) {
                Some(old) => old,
                None => {
                    let fixed = self.read_static(dir, uid, start);
                    // No address space, nothing mapped (a kernel thread).
                    if vsize == 0 || !classify::could_hold_runtime(comm, fixed.exe.as_deref(), &fixed.argv) {
                        self.deferred.insert(key);
                        self.inert.insert(key);
                    }
                    fixed
                }
            };
            // A process read anew this scan whose maps were deferred is
            // caught up too while the scan may.
            let catch_up = catch_up || (self.catch_up_left > 0 && self.deferred.contains(&key));
            if catch_up {
                self.catch_up_left -= 1;
                self.deferred.remove(&key);
            }
            if !self.deferred.contains(&key) {
                read_maps(dir, &mut fixed, now);
            }
            fixed.maps_vsize = vsize;
            fixed.classified = None;
            self.statics.insert(key, fixed);
        }
        self.statics.get_mut(&key)
    }

    /// Reads the deferred maps of the scanned processes `wanted` says (the
    /// GPU sources' processes, or every one where a pairing needs the
    /// libraries of all: in a container, under WSL), and classifies them
    /// again with what their maps say.
    pub fn read_deferred_maps(&mut self, wanted: impl Fn(u32) -> bool, scanned: &mut [ProcInfo]) {
        let now = Instant::now();
        for info in scanned.iter_mut().filter(|i| wanted(i.pid)) {
            let key = (info.pid, info.start_ticks);
            if !self.deferred.remove(&key) {
                continue;
            }
            let Some(fixed) = self.statics.get_mut(&key) else {
                continue;
            };
            read_maps(&self.root.join(info.pid.to_string()), fixed, now);
            fixed.classified = None;
            classify_again(fixed, &info.name);
            take_lifelong(info, fixed);
        }
    }

    fn read_static(&mut self, dir: &Path, uid: u32, start: u64) -> Static {
        let exe = std::fs::read_link(dir.join("exe"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let user = Some(self.user_name(uid));
        let start_time = self
            .boot_time_secs
            .and_then(|boot| start_rfc3339(boot, start, self.ticks_per_second));
        let mut fixed = Static {
            argv: Vec::new(),
            cmdline: None,
            exe,
            user,
            start_time,
            runtimes: Vec::new(),
            mapped_files: Vec::new(),
            maps_read_at: None,
            maps_vsize: 0,
            classified: None,
            notes: Vec::new(),
        };
        read_argv(dir, &mut fixed);
        fixed
    }

    /// Anonymous resident memory of a process (resident - shared pages of
    /// /proc/PID/statm). Read only for the processes a snapshot lists.
    pub fn rss_anon(&self, pid: u32) -> Option<u64> {
        let statm = Process::new_with_root(self.root.join(pid.to_string()))
            .ok()?
            .statm()
            .ok()?;
        Some(statm.resident.saturating_sub(statm.shared) * self.page_size)
    }

    /// The user's name, or the numeric uid when it has none.
    fn user_name(&mut self, uid: u32) -> String {
        self.users
            .entry(uid)
            .or_insert_with(|| lookup_user(uid).unwrap_or_else(|| uid.to_string()))
            .clone()
    }
}

/// Reads a process's argv (and the command line shown, redacted).
fn read_argv(dir: &Path, fixed: &mut Static) {
    match read_cmdline(&dir.join("cmdline")) {
        Ok((argv, cut)) => {
            if cut {
                fixed
                    .notes
                    .push(format!("command line cut at {} KiB", MAX_CMDLINE >> 10));
            }
            fixed.argv = argv;
        }
        Err(e) => fixed.notes.push(format!("command line not readable: {}", brief_io(&e))),
    }
    fixed.cmdline = (!fixed.argv.is_empty()).then(|| redact::join_args(&redact::redact_args(&fixed.argv)));
}

/// A row for a process read anew: this scan's figures and what its
/// lifelong part says.
fn new_row(
    pid: u32,
    ppid: Option<u32>,
    stat: &Stat,
    cpu_percent: Option<f64>,
    rss_bytes: Option<u64>,
    fixed: &Static,
) -> ProcInfo {
    let mut info = ProcInfo {
        pid,
        ppid,
        start_ticks: stat.starttime,
        name: stat.comm.to_string(),
        start_time: None,
        user: None,
        argv: Vec::new(),
        cmdline: None,
        exe: None,
        runtimes: Vec::new(),
        mapped_files: Vec::new(),
        maps_readable: false,
        kind: crate::snapshot::ProcessKind::Other,
        cpu_percent,
        rss_bytes,
        notes: Vec::new(),
    };
    take_lifelong(&mut info, fixed);
    info
}

/// Classifies a process (comm, runtimes, kind) again when its maps were
/// reread or its name changed; true when it did.
fn classify_again(fixed: &mut Static, comm: &str) -> bool {
    let again = fixed.classified.as_ref().is_none_or(|c| c.0 != comm);
    if again {
        let mut runtimes = fixed.runtimes.clone();
        classify::runtimes_from_names(comm, fixed.exe.as_deref(), &fixed.argv, &mut runtimes);
        let kind = classify::kind(comm, fixed.exe.as_deref(), &fixed.argv, &runtimes);
        fixed.classified = Some((comm.to_string(), runtimes, kind));
    }
    again
}

/// Rereads the file-backed mappings and the runtimes they imply.
fn read_maps(dir: &Path, fixed: &mut Static, now: Instant) {
    const NOTE: &str = "memory maps not readable";
    const CUT: &str = "memory maps cut";
    fixed.notes.retain(|n| !n.starts_with(NOTE) && !n.starts_with(CUT));
    let text = std::fs::File::open(dir.join("maps")).and_then(|f| {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_MAPS), &mut text)?;
        Ok(text)
    });
    match text {
        Ok(text) => {
            let mut files = mapped_paths(&text);
            if text.len() as u64 >= MAX_MAPS || files.len() > MAX_MAPPED_FILES {
                files.truncate(MAX_MAPPED_FILES);
                fixed.notes.push(format!(
                    "{CUT} at {} MiB or {MAX_MAPPED_FILES} files: runtimes and models past that are not seen",
                    MAX_MAPS >> 20
                ));
            }
            fixed.runtimes.clear();
            classify::runtimes_from_libraries(files.iter().map(String::as_str), &mut fixed.runtimes);
            fixed.mapped_files = files;
            fixed.maps_read_at = Some(now);
        }
        Err(e) => {
            // Another user's process without privileges: runtimes stay
            // unknown from the maps; the name still tells some. Not retried
            // until the process is seen anew.
            fixed
                .notes
                .push(format!("{NOTE} ({}): runtimes only from its name", brief_io(&e)));
            fixed.maps_read_at = None;
        }
    }
}

/// What a scanned process carries of its lifelong part (classified). Only
/// model discovery reads argv and the mapped files, and only of AI
/// processes: the other 99% are not copied every sample.
fn take_lifelong(info: &mut ProcInfo, fixed: &Static) {
    let (_, runtimes, kind) = fixed.classified.as_ref().expect("classified");
    let ai = *kind == crate::snapshot::ProcessKind::Ai;
    info.start_time = fixed.start_time.clone();
    info.user = fixed.user.clone();
    info.cmdline = fixed.cmdline.clone();
    info.exe = fixed.exe.clone();
    info.runtimes = runtimes.clone();
    info.kind = *kind;
    info.argv = if ai { fixed.argv.clone() } else { Vec::new() };
    info.mapped_files = if ai { fixed.mapped_files.clone() } else { Vec::new() };
    info.maps_readable = fixed.maps_read_at.is_some();
    info.notes = fixed.notes.clone();
}

mod events;
mod files;
mod stat;
mod sys;

pub use events::parse_datagram;
use files::{brief_io, read_cmdline, MAX_CMDLINE, MAX_MAPPED_FILES, MAX_MAPS};
pub use files::{mapped_paths, split_cmdline};
pub use stat::{parse_stat, start_time_of, Stat};
use stat::{read_boot_time, read_stat, resident_bytes, start_rfc3339};
use sys::{cpu_nanos_at, stat_files_budget, sysconf};

#[cfg(test)]
mod tests;
