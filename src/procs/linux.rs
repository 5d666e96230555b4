//! The /proc scan on Linux, through the procfs crate. The root is a
//! parameter so tests can point it at a recorded tree.

use super::process::{lookup_user, ProcInfo, MAPS_REFRESH};
use super::{classify, redact};
use crate::units::format_unix_nanos;
use anyhow::Context;
use procfs::process::Process;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A process younger than this is still loading its libraries (a Python
/// server imports its runtime seconds after it starts): its maps are
/// reread every [`YOUNG_MAPS_REFRESH`] instead of [`MAPS_REFRESH`].
const YOUNG: Duration = Duration::from_secs(60);
const YOUNG_MAPS_REFRESH: Duration = Duration::from_secs(1);
/// The most deferred maps a scan after the first reads: a live view has
/// read every process's within a few refreshes, and no refresh pays for
/// them all.
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
    /// CPU ticks (user + system) at the previous sample.
    cpu: HashMap<(u32, u64), (u64, Instant)>,
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
    deferred: std::collections::HashSet<(u32, u64)>,
    /// How many deferred maps this scan may still read.
    catch_up_left: usize,
    /// A quiet process's stat is read every this many scans (1: every
    /// scan); see [`ProcScanner::read_quiet_processes_every`].
    quiet_every: u64,
    /// The last stat read of each quiet process (no GPU source named it
    /// last round, it is no AI process and loaded no GPU runtime), and the
    /// PID travel ([`PidCursor`]) at which its PID could next be handed out.
    quiet: HashMap<u32, (Stat, u64)>,
    /// How far the kernel's PID allocator has moved; None where it cannot
    /// be followed (then no stat is kept).
    pid_cursor: Option<PidCursor>,
    /// The kernel's pid_max: where the allocator wraps.
    pid_max: Option<u64>,
    /// The PIDs a GPU source named last round: never quiet.
    holders: std::collections::HashSet<u32>,
    /// The processes whose kept stat the last scan used.
    kept: std::collections::HashSet<u32>,
    /// How many times a process's empty argv was read again
    /// ([`ARGV_REREADS`]).
    argv_rereads: HashMap<(u32, u64), u8>,
    scans: u64,
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
            cpu: HashMap::new(),
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
            quiet: HashMap::new(),
            pid_cursor: None,
            pid_max,
            holders: Default::default(),
            kept: Default::default(),
            argv_rereads: HashMap::new(),
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
            self.quiet.clear();
        }
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
        for info in scanned
            .iter_mut()
            .filter(|i| kept.contains(&i.pid) && holders.contains(&i.pid))
        {
            let dir = self.root.join(info.pid.to_string());
            let Some(stat) = self.read_stat_held(info.pid, &dir.join("stat"), &mut buf) else {
                // Exited since the listing: as if the scan had not found it.
                gone.push(info.pid);
                continue;
            };
            if stat.starttime != info.start_ticks || stat.comm != info.name {
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
                info.name = stat.comm.clone();
                info.start_ticks = stat.starttime;
            }
            let key = (info.pid, stat.starttime);
            let ticks = stat.ticks();
            info.cpu_percent = self.cpu.get(&key).and_then(|&(before, at)| {
                let secs = now.duration_since(at).as_secs_f64();
                (secs > 0.0).then(|| ticks.saturating_sub(before) as f64 / self.ticks_per_second as f64 / secs * 100.0)
            });
            info.rss_bytes = resident_bytes(&stat, page_size);
            info.ppid = (stat.ppid != 0).then_some(stat.ppid);
            self.cpu.insert(key, (ticks, now));
        }
        scanned.retain(|i| !gone.contains(&i.pid));
        for pid in &holders {
            self.quiet.remove(pid);
        }
        self.holders = holders;
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
        self.cpu.clear();
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
        for process in all.flatten() {
            if let Some(stat) = read_stat(&self.root.join(process.pid.to_string()).join("stat"), &mut buf) {
                self.cpu
                    .insert((process.pid as u32, stat.starttime), (stat.ticks(), now));
            }
        }
    }

    /// Reads every process. A process that exits while it is read is left
    /// out; a /proc that cannot be listed is an error.
    pub fn scan(&mut self) -> anyhow::Result<Vec<ProcInfo>> {
        let dir = std::fs::read_dir(&self.root)
            .with_context(|| format!("cannot list processes in {}", self.root.display()))?;
        let now = Instant::now();
        // Clock ticks since boot: how old each process is.
        let uptime_ticks = self.boot_time_secs.and_then(|boot| {
            let since_epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some(since_epoch.as_secs().checked_sub(boot)? * self.ticks_per_second)
        });
        let young_ticks = YOUNG.as_secs() * self.ticks_per_second;
        // The first scan is the one a user waits for.
        self.catch_up_left = if self.scans == 0 { 0 } else { DEFERRED_MAPS_PER_SCAN };
        self.scans += 1;
        let mut seen = HashMap::with_capacity(self.cpu.len());
        self.kept.clear();
        if self.quiet_every > 1 {
            self.follow_pid_cursor();
        }
        let mut shortest: Option<Duration> = None;
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        let mut path = self.root.clone();
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            path.push(&name);
            path.push("stat");
            let kept = self.kept_stat(pid);
            let reused = kept.is_some();
            let stat = kept.or_else(|| self.read_stat_held(pid, &path, &mut buf));
            path.pop();
            let Some(stat) = stat else {
                path.pop();
                continue;
            };
            let key = (pid, stat.starttime);
            let ticks = stat.ticks();
            let cpu_percent = self.cpu.get(&key).filter(|_| !reused).and_then(|&(before, at)| {
                let window = now.duration_since(at);
                shortest = Some(shortest.map_or(window, |s| s.min(window)));
                let secs = window.as_secs_f64();
                (secs > 0.0).then(|| ticks.saturating_sub(before) as f64 / self.ticks_per_second as f64 / secs * 100.0)
            });
            self.note_opened(pid, stat.starttime, ticks);
            let reference = match self.cpu.get(&key) {
                // A kept stat is no new reading: the last one stays the
                // reference, and the next reading's CPU% spans both.
                Some(&(t, at)) if reused || now.duration_since(at).as_millis() < 50 => (t, at),
                _ => (ticks, now),
            };
            seen.insert(key, reference);

            let page_size = self.page_size;
            let may_be_quiet = self.quiet_every > 1 && !self.holders.contains(&pid);
            let young = uptime_ticks.is_some_and(|up| up.saturating_sub(stat.starttime) < young_ticks);
            let fixed = self.static_info(&path, pid, &stat.comm, (stat.starttime, stat.vsize, young), now);
            path.pop();
            let Some(fixed) = fixed else { continue };
            classify_again(fixed, &stat.comm);
            let rss_bytes = if reused { None } else { resident_bytes(&stat, page_size) };
            let kept_stat = (!reused && may_be_quiet).then(|| stat.clone());
            let mut info = ProcInfo {
                pid,
                // The kernel's idle task and kthreadd's children say 0: no parent.
                ppid: (stat.ppid != 0).then_some(stat.ppid),
                start_ticks: stat.starttime,
                name: stat.comm,
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
            if reused {
                self.kept.insert(pid);
            } else {
                match kept_stat.filter(|_| !info.is_interesting()).zip(self.reusable_at(pid)) {
                    Some(kept) => self.quiet.insert(pid, kept),
                    None => self.quiet.remove(&pid),
                };
            }
            out.push(info);
        }
        self.forget_gone(seen);
        self.window = shortest;
        Ok(out)
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

    /// Forgets processes that are gone (`seen`: this scan's, with their CPU
    /// references), so no map grows without bound.
    fn forget_gone(&mut self, seen: HashMap<(u32, u64), (u64, Instant)>) {
        self.statics.retain(|k, _| seen.contains_key(k));
        self.stat_files
            .retain(|pid, (start, _)| seen.contains_key(&(*pid, *start)));
        self.deferred.retain(|k| seen.contains_key(k));
        self.quiet.retain(|pid, (s, _)| seen.contains_key(&(*pid, s.starttime)));
        self.argv_rereads.retain(|k, _| seen.contains_key(k));
        self.cpu = seen;
    }

    /// A quiet process's last stat, when this scan is not its turn and its
    /// PID cannot belong to another process yet.
    fn kept_stat(&self, pid: u32) -> Option<Stat> {
        if self.quiet_every == 1 || (self.scans + u64::from(pid)) % self.quiet_every == 0 {
            return None;
        }
        let travel = self.pid_cursor.as_ref()?.travel;
        let (stat, reusable_at) = self.quiet.get(&pid)?;
        (travel + PID_MARGIN < *reusable_at).then(|| stat.clone())
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
            self.quiet.clear();
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
            let process = Process::new_with_root(dir.to_path_buf()).ok()?;
            let mut fixed = match self.statics.remove(&key) {
                Some(old) => old,
                None => {
                    let fixed = self.read_static(dir, &process, start);
                    // No address space, nothing mapped (a kernel thread).
                    if vsize == 0 || !classify::could_hold_runtime(comm, fixed.exe.as_deref(), &fixed.argv) {
                        self.deferred.insert(key);
                    }
                    fixed
                }
            };
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

    fn read_static(&mut self, dir: &Path, process: &Process, start: u64) -> Static {
        let mut notes = Vec::new();
        let argv = match read_cmdline(&dir.join("cmdline")) {
            Ok((argv, cut)) => {
                if cut {
                    notes.push(format!("command line cut at {} KiB", MAX_CMDLINE >> 10));
                }
                argv
            }
            Err(e) => {
                notes.push(format!("command line not readable: {}", brief_io(&e)));
                Vec::new()
            }
        };
        let cmdline = (!argv.is_empty()).then(|| redact::join_args(&redact::redact_args(&argv)));
        let exe = process.exe().ok().map(|p| p.to_string_lossy().into_owned());
        let user = process.uid().ok().map(|uid| self.user_name(uid));
        let start_time = self
            .boot_time_secs
            .and_then(|boot| start_rfc3339(boot, start, self.ticks_per_second));
        Static {
            argv,
            cmdline,
            exe,
            user,
            start_time,
            runtimes: Vec::new(),
            mapped_files: Vec::new(),
            maps_read_at: None,
            maps_vsize: 0,
            classified: None,
            notes,
        }
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

/// The most of a command line that is read. The kernel lets a process with
/// a large stack limit carry far more; argv past this is not needed to
/// classify it or to find its model, and a hostile one must not cost RAM.
const MAX_CMDLINE: u64 = 256 << 10;
/// The most of /proc/PID/maps that is read: 65,530 mappings (the default
/// vm.max_map_count) of 4 KiB paths would be 270 MB.
const MAX_MAPS: u64 = 8 << 20;
/// The most distinct mapped files kept for a process.
const MAX_MAPPED_FILES: usize = 4096;

/// A process's argv from /proc/PID/cmdline, read as bytes and decoded
/// lossily (one invalid byte must not hide the process's runtime), at most
/// [`MAX_CMDLINE`] bytes; true when it was cut.
fn read_cmdline(path: &Path) -> std::io::Result<(Vec<String>, bool)> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path)?, MAX_CMDLINE + 1),
        &mut bytes,
    )?;
    let cut = bytes.len() as u64 > MAX_CMDLINE;
    bytes.truncate(MAX_CMDLINE as usize);
    Ok((split_cmdline(&bytes), cut))
}

/// NUL-separated arguments (the last NUL is a terminator), lossily.
/// Trailing NULs are padding, not empty arguments: a process that renames
/// itself with setproctitle (vLLM's `VLLM::EngineCore`, `VLLM::Worker`)
/// writes its title over the start of the argv area and fills the rest
/// with NULs, which the kernel still returns (fs/proc/base.c
/// get_mm_cmdline reads up to the end of the area when its last byte is
/// NUL), hundreds of them. A real trailing `""` argument is dropped too.
pub fn split_cmdline(bytes: &[u8]) -> Vec<String> {
    let Some(last) = bytes.iter().rposition(|b| *b != 0) else {
        return Vec::new();
    };
    let bytes = &bytes[..=last];
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Classifies a process (comm, runtimes, kind) again when its maps were
/// reread or its name changed.
fn classify_again(fixed: &mut Static, comm: &str) {
    if fixed.classified.as_ref().is_none_or(|c| c.0 != comm) {
        let mut runtimes = fixed.runtimes.clone();
        classify::runtimes_from_names(comm, fixed.exe.as_deref(), &fixed.argv, &mut runtimes);
        let kind = classify::kind(comm, fixed.exe.as_deref(), &fixed.argv, &runtimes);
        fixed.classified = Some((comm.to_string(), runtimes, kind));
    }
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

fn brief_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::NotFound => "process exited".into(),
        _ => e.to_string(),
    }
}

#[derive(Clone)]
pub struct Stat {
    pub comm: String,
    pub ppid: u32,
    pub utime: u64,
    pub stime: u64,
    pub starttime: u64,
    pub vsize: u64,
    pub rss: u64,
}

impl Stat {
    /// CPU ticks, user + system; saturating, since a forged or corrupt
    /// stat line can say 2^64-1.
    pub fn ticks(&self) -> u64 {
        self.utime.saturating_add(self.stime)
    }
}

/// A start time in ticks after boot as the snapshot's `start_time` says it.
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

/// Resident bytes from a stat line. No address space (vsize 0): an exiting
/// process whose memory is already released, or a zombie: its RSS is
/// unknown, not 0 B. A page count no machine holds is no fact either.
fn resident_bytes(stat: &Stat, page_size: u64) -> Option<u64> {
    (stat.vsize > 0).then(|| stat.rss.checked_mul(page_size)).flatten()
}

fn start_rfc3339(boot_secs: u64, start_ticks: u64, ticks_per_second: u64) -> Option<String> {
    let nanos =
        boot_secs as i128 * 1_000_000_000 + start_ticks as i128 * 1_000_000_000 / ticks_per_second.max(1) as i128;
    format_unix_nanos(nanos)
}

/// The `start_time` a scan of `root` would give the process `pid` now:
/// with the PID it names the process, so a signal never reaches another
/// one that took a reused PID.
pub fn start_time_of(root: &Path, pid: u32) -> Option<String> {
    let mut buf = [0u8; 2048];
    let stat = read_stat(&root.join(pid.to_string()).join("stat"), &mut buf)?;
    start_rfc3339(
        read_boot_time(root)?,
        stat.starttime,
        sysconf(libc::_SC_CLK_TCK).unwrap_or(100),
    )
}

/// How many stat files a scanner may hold open: half the open-file limit,
/// after raising the soft limit toward the hard one (which any process may
/// do), so that sockets, DRM fdinfo and model files always have room.
fn stat_files_budget() -> usize {
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
fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf takes no pointer; it returns -1 for an unknown name.
    u64::try_from(unsafe { libc::sysconf(name) }).ok().filter(|v| *v > 0)
}

/// [`cpu_nanos`] and the moment it was read, the two close together: a
/// scanner preempted between them (a loaded machine) would pair the CPU
/// time with a later moment, and over a 50 ms window a millisecond off is
/// 2 % of a core. The closest of a few tries is kept, stamped midway.
fn cpu_nanos_at(pid: u32) -> (Option<u64>, Instant) {
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

/// Reads /proc/PID/stat with one open and one read into `buf`.
fn read_stat(path: &Path, buf: &mut [u8]) -> Option<Stat> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let n = f.read(buf).ok()?;
    parse_stat(&buf[..n])
}

/// The file-backed paths of a /proc/PID/maps text, each once, in order.
/// Read here rather than by procfs's parser, which panics on a mapped file
/// whose path starts with `/SYSV` but is no SysV segment name (`/SYSV`,
/// `/SYSVé`: found by fuzz/ proc_files). SysV segments, anonymous and
/// `[special]` mappings are not files.
pub fn mapped_paths(text: &[u8]) -> Vec<String> {
    fn trim_spaces(b: &[u8]) -> &[u8] {
        &b[b.iter().position(|c| *c != b' ').unwrap_or(b.len())..]
    }
    // A set, not a search of the list: a Python process maps hundreds of
    // files, and a search per line was most of the first look at it.
    let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    let mut files: Vec<String> = Vec::new();
    for line in text.split(|b| *b == b'\n') {
        // address perms offset dev inode, then the path (spaces and all).
        let mut rest = line;
        for _ in 0..5 {
            rest = trim_spaces(rest);
            rest = &rest[rest.iter().position(|b| *b == b' ').unwrap_or(rest.len())..];
        }
        let path = trim_spaces(rest);
        if !path.starts_with(b"/") || path.starts_with(b"/SYSV") {
            continue;
        }
        if seen.insert(path) {
            files.push(String::from_utf8_lossy(path).into_owned());
        }
    }
    files
}

/// One /proc/PID/stat line: the comm between the first '(' and the last ')'
/// (a comm may hold both, and any byte but NUL: it is decoded lossily, so a
/// name that is not UTF-8 never hides a process), then the numeric fields.
/// `None` for anything else.
pub fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let open = bytes.iter().position(|b| *b == b'(')?;
    let close = bytes.iter().rposition(|b| *b == b')')?;
    let comm = String::from_utf8_lossy(bytes.get(open + 1..close)?).into_owned();
    let text = std::str::from_utf8(bytes.get(close + 2..)?).ok()?;
    let mut fields = text.split_ascii_whitespace();
    // Fields after the comm, from 0: state is 0, ppid 1; utime 11,
    // stime 12, starttime 19, vsize 20, rss 21 (proc(5), numbered from 3).
    let mut nth = |skip: usize| -> Option<u64> { fields.nth(skip)?.parse().ok() };
    let ppid = u32::try_from(nth(1)?).ok()?;
    let utime = nth(9)?;
    let stime = nth(0)?;
    let starttime = nth(6)?;
    let vsize = nth(0)?;
    let rss = nth(0)?;
    Some(Stat {
        comm,
        ppid,
        utime,
        stime,
        starttime,
        vsize,
        rss,
    })
}

/// The `btime` line of /proc/stat: boot time in seconds since the epoch.
fn read_boot_time(root: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(root.join("stat")).ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests;
