//! Under WSL: the Windows host's GPU counters, read through a bridge.
//!
//! Windows charges the GPU memory of every Linux process to the utility VM's
//! worker process, vmwp.exe, so nvidia-smi inside WSL lists no process. A
//! long-lived `powershell.exe` started through WSL interop ([`bridge`])
//! reads the WDDM counters on the Windows side once a second and streams
//! them back in the line format [`lines::Parser`] reads. vmwp.exe's GPU contexts
//! (PDH instances `pid_<vmwp>_luid_..._phys_0`, `#1`, `#2`, ... when there
//! are several) are then paired with the Linux processes that can hold
//! one ([`ContextPairing`]); every other Windows process is shown as what
//! it is, a host process.
//!
//! Everything but [`bridge`]'s child process is pure and tested on recorded
//! streams (tests/data/wsl/).

pub mod bridge;
pub mod lines;

pub use lines::{BridgeSample, Event, Parser, HELLO};

use super::container::{Candidate, Pair};
use super::source::{self, Report, Round, Source};
use super::wddm::{self, ContextKey, EngineClock};
use crate::procs::ProcInfo;
use crate::snapshot::{Backend, BackendStatus, Device, GpuUsage, Match, Process};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Pairs vmwp.exe's GPU contexts with the Linux processes that can hold
/// one, over a sequence of samples.
///
/// Nothing on either side names the other, so the pairing goes by time. A
/// context is exact (`*`) only when, in the sample it first appeared, it
/// was the only new context and exactly one new process (first seen at or
/// before that sample) was waiting without an exact context: then it can be
/// no one else's. Everything else (contexts and processes that were there
/// before the first sample, several that arrived together, a context that
/// appeared with no new process waiting) is paired oldest to oldest, and
/// that is a guess (`?`), recomputed every sample. A context whose process
/// exited is withheld (shown unpaired) until Windows drops it, so a
/// newcomer never inherits it. A context with no process to pair is shown
/// unpaired (`n/a`).
///
/// PDH numbers a process's contexts on an adapter by position (`#1`,
/// `#2`): when one goes away the higher ones are renumbered, so a key no
/// longer names the same context. Which one went cannot be told from the
/// keys (the top key is always the one that vanishes), so when any dup of a
/// (pid, LUID) disappears every surviving dup of it loses its exact pair
/// and its withheld mark and is guessed again.
#[derive(Debug, Default)]
pub struct ContextPairing {
    started: bool,
    sample: u64,
    preexisting_contexts: BTreeSet<ContextKey>,
    preexisting_candidates: BTreeSet<Candidate>,
    first_seen: BTreeMap<ContextKey, u64>,
    /// The sample each candidate was first seen in.
    candidate_seen: BTreeMap<Candidate, u64>,
    /// The contexts listed last sample, to see dups vanish.
    last_listed: BTreeSet<ContextKey>,
    exact: BTreeMap<ContextKey, Candidate>,
    guessed: BTreeMap<ContextKey, Candidate>,
    withheld: BTreeSet<ContextKey>,
}

impl ContextPairing {
    /// `contexts`: vmwp.exe's contexts now; `candidates`: the Linux
    /// processes alive now that can hold a GPU context.
    pub fn pair(&mut self, contexts: &[ContextKey], candidates: &[Candidate]) -> BTreeMap<ContextKey, Pair> {
        self.sample += 1;
        let listed: BTreeSet<ContextKey> = contexts.iter().copied().collect();
        let alive: BTreeSet<Candidate> = candidates.iter().cloned().collect();
        if !self.started {
            self.started = true;
            self.preexisting_contexts = listed.clone();
            self.preexisting_candidates = alive.clone();
        }
        self.preexisting_contexts.retain(|c| listed.contains(c));
        self.preexisting_candidates.retain(|c| alive.contains(c));
        self.first_seen.retain(|c, _| listed.contains(c));
        for c in &listed {
            self.first_seen.entry(*c).or_insert(self.sample);
        }
        self.candidate_seen.retain(|c, _| alive.contains(c));
        for c in &alive {
            self.candidate_seen.entry(c.clone()).or_insert(self.sample);
        }

        // A dup gone: the survivors of its (pid, LUID) may be renumbered.
        let shifted = wddm::renumbered(&self.last_listed, &listed);
        self.last_listed = listed.clone();
        for c in &shifted {
            self.exact.remove(c);
            self.withheld.remove(c);
        }

        // Contexts whose process exited are withheld while Windows lists them.
        self.withheld.retain(|c| listed.contains(c));
        for (context, candidate) in self.exact.iter().chain(&self.guessed) {
            if listed.contains(context) && !alive.contains(candidate) && !shifted.contains(context) {
                self.withheld.insert(*context);
            }
        }
        self.guessed.clear();
        self.exact
            .retain(|context, candidate| listed.contains(context) && alive.contains(candidate));

        // Exact: the one context new this sample, and the one new process
        // waiting for it (seen at or before this sample, no exact context).
        let appeared: Vec<ContextKey> = listed
            .iter()
            .copied()
            .filter(|c| {
                self.first_seen[c] == self.sample
                    && !self.preexisting_contexts.contains(c)
                    && !self.withheld.contains(c)
                    && !self.exact.contains_key(c)
            })
            .collect();
        let paired: BTreeSet<&Candidate> = self.exact.values().collect();
        let waiting: Vec<&Candidate> = alive
            .iter()
            .filter(|c| {
                !self.preexisting_candidates.contains(*c)
                    && !paired.contains(c)
                    && self.candidate_seen.get(*c).is_some_and(|&seen| seen <= self.sample)
            })
            .collect();
        if let ([context], [candidate]) = (appeared.as_slice(), waiting.as_slice()) {
            let candidate = (*candidate).clone();
            self.exact.insert(*context, candidate);
        }

        let taken: BTreeSet<&Candidate> = self.exact.values().collect();
        let mut free: Vec<ContextKey> = listed
            .iter()
            .copied()
            .filter(|c| !self.exact.contains_key(c) && !self.withheld.contains(c))
            .collect();
        let mut people: Vec<Candidate> = alive.iter().filter(|c| !taken.contains(c)).cloned().collect();
        // Pre-existing contexts first in PDH's order (`#1` after the
        // unnumbered one), then new ones in the order they appeared.
        let order = |c: &ContextKey| (!self.preexisting_contexts.contains(c), self.first_seen[c], *c);
        free.sort_by_key(order);
        people.sort();

        let new_contexts: Vec<ContextKey> = free
            .iter()
            .copied()
            .filter(|c| !self.preexisting_contexts.contains(c))
            .collect();
        let new_people: Vec<Candidate> = people
            .iter()
            .filter(|c| !self.preexisting_candidates.contains(c))
            .cloned()
            .collect();
        let mut out: BTreeMap<ContextKey, Pair> = BTreeMap::new();
        if !new_contexts.is_empty() && new_contexts.len() == new_people.len() {
            // As many new contexts as new processes: new to new, in order
            // (a guess: nothing proved which is whose).
            for (context, person) in new_contexts.iter().zip(&new_people) {
                self.guessed.insert(*context, person.clone());
            }
            free.retain(|c| !new_contexts.contains(c));
            people.retain(|p| !new_people.contains(p));
        }
        // The rest, oldest to oldest.
        for (context, person) in free.iter().zip(&people) {
            self.guessed.insert(*context, person.clone());
        }
        for context in &listed {
            let pair = match (self.exact.get(context), self.guessed.get(context)) {
                (Some(p), _) => Pair::Exact(p.pid),
                (None, Some(p)) => Pair::Guess(p.pid),
                (None, None) => Pair::Host,
            };
            out.insert(*context, pair);
        }
        out
    }
}

/// Whose a usage entry from the host is, in this distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum Owner {
    /// A Linux process, paired with a vmwp.exe context.
    Linux { pid: u32, vmwp: u32 },
    /// A Windows process (or a vmwp.exe context nothing here pairs with).
    Windows(u32),
}

/// What the host said this sample, ready to merge.
#[derive(Debug, Clone, Default)]
pub struct HostSample {
    pub devices: Vec<Device>,
    pub usage: Vec<(Owner, GpuUsage)>,
    /// Per Windows PID shown: the name and what to say about it.
    pub windows: BTreeMap<u32, (Option<String>, String)>,
    /// Per Linux PID: notes about its pairing.
    pub linux_notes: BTreeMap<u32, Vec<String>>,
}

/// Whether a Windows process name is the VM worker process.
fn is_vmwp(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "vmwp" || n == "vmwp.exe"
}

/// Turns the newest bridge sample into usage on devices (existing ones
/// matched by LUID, the rest new from `index_base`) and pairs vmwp.exe's
/// contexts with `candidates`. Engine percentages and pairing keep their
/// state in the arguments across samples.
pub fn host_sample(
    sample: &BridgeSample,
    clock: &mut EngineClock,
    pairing: &mut ContextPairing,
    existing: &mut [Device],
    index_base: u32,
    candidates: &[Candidate],
) -> HostSample {
    let engines = clock.percents(&sample.reading);
    let matched = wddm::match_devices(existing, &sample.adapters);
    let complete = sample.errors.is_empty() && sample.reading.dropped == 0;
    let mut attributed = wddm::attribute(
        &sample.reading,
        &engines,
        &matched.luids,
        existing,
        index_base,
        "wsl-host",
        complete,
    );
    attributed.explain(&matched);
    let vmwp_contexts: Vec<ContextKey> = attributed
        .contexts
        .iter()
        .map(|c| c.context)
        .filter(|c| sample.names.get(&c.pid).is_some_and(|n| is_vmwp(n)))
        .collect();
    let vmwp_count = vmwp_contexts.iter().map(|c| c.pid).collect::<BTreeSet<_>>().len();
    let pairs = pairing.pair(&vmwp_contexts, candidates);
    let mut out = HostSample {
        devices: attributed.devices,
        ..HostSample::default()
    };
    for c in attributed.contexts {
        let mut usage = c.usage;
        let name = sample.names.get(&c.context.pid).cloned();
        let owner = match pairs.get(&c.context) {
            Some(Pair::Exact(pid)) | Some(Pair::Guess(pid)) => {
                usage.pairing = Some(match pairs[&c.context] {
                    Pair::Exact(_) => Match::Exact,
                    _ => Match::Guess,
                });
                let notes = out.linux_notes.entry(*pid).or_default();
                notes.extend(c.notes);
                notes.push(format!(
                    "GPU {}: memory from the Windows host's counters for vmwp.exe (PID {}), {}",
                    usage.device,
                    c.context.pid,
                    match usage.pairing {
                        Some(Match::Exact) => "whose context appeared with this process (exact)",
                        _ => "paired by start order (a guess: it was there before gputaskman watched, or started in a batch)",
                    }
                ));
                Owner::Linux {
                    pid: *pid,
                    vmwp: c.context.pid,
                }
            }
            Some(Pair::Host) => {
                let mut note = "vmwp.exe: a GPU context of a Linux process that no process here pairs with (exited, in another distribution, or not yet seen)".to_string();
                if vmwp_count > 1 {
                    note.push_str("; more than one vmwp.exe holds GPU memory: another VM may own it");
                }
                out.windows.insert(c.context.pid, (name, note));
                Owner::Windows(c.context.pid)
            }
            None => {
                let mut note = format!("a Windows process (PID {} on the host)", c.context.pid);
                for n in &c.notes {
                    note.push_str("; ");
                    note.push_str(n);
                }
                out.windows.insert(c.context.pid, (name, note));
                Owner::Windows(c.context.pid)
            }
        };
        out.usage.push((owner, usage));
    }
    out
}

/// The backend line for the host bridge's state.
pub fn backend(status: BackendStatus, detail: String) -> Backend {
    Backend {
        name: "wsl-host".into(),
        status,
        detail,
    }
}

/// Forced on or off by `GPUTASKMAN_WSL=1|0` (tests run the bridge on Linux
/// with a stand-in powershell.exe); None leaves it to detection.
pub fn forced() -> Option<bool> {
    match std::env::var("GPUTASKMAN_WSL").ok()?.as_str() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    }
}

/// Why Windows programs cannot be started from here, if they cannot: WSL
/// registers its interop handler with binfmt_misc, and `[interop]
/// enabled=false` in /etc/wsl.conf (or `echo 0 >` the entry) turns it off.
fn interop_problem() -> Option<String> {
    let entries = [
        "/proc/sys/fs/binfmt_misc/WSLInterop",
        "/proc/sys/fs/binfmt_misc/WSLInterop-late",
    ];
    for entry in entries {
        if let Ok(text) = std::fs::read_to_string(entry) {
            return match text.lines().next() {
                Some("enabled") => None,
                _ => Some(format!(
                    "WSL interop is disabled ({entry}): Windows programs cannot be started, so the host counters cannot be read ([interop] enabled=true in /etc/wsl.conf turns it on)"
                )),
            };
        }
    }
    Some("WSL interop is not registered (no /proc/sys/fs/binfmt_misc/WSLInterop): Windows programs cannot be started, so the host counters cannot be read".into())
}

/// How long one-shot output waits for the bridge's first sample.
pub const FIRST_SAMPLE_WAIT: Duration = Duration::from_secs(10);
/// A failed bridge is started again after this long.
const RESTART_AFTER: Duration = Duration::from_secs(30);
/// A bridge with no sample for this long, starting or running, is given up:
/// its child killed, and started again after [`RESTART_AFTER`].
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// Why a bridge in this state is to be given up, if it is: it failed, or
/// sent no sample for longer than `limit` (powershell.exe or Get-Counter
/// hung).
fn give_up(status: &bridge::Status, limit: Duration) -> Option<String> {
    let restart = RESTART_AFTER.as_secs();
    match status {
        bridge::Status::Failed(why) => Some(format!("the host bridge failed: {why}")),
        bridge::Status::Starting(waited) if *waited > limit => Some(format!(
            "the host bridge sent no sample in {:.0} s after it started (powershell.exe hung?): stopped, started again in {restart} s",
            waited.as_secs_f64()
        )),
        bridge::Status::Running(age) if *age > limit => Some(format!(
            "the host bridge has sent nothing for {:.0} s (Get-Counter hung?): stopped, started again in {restart} s",
            age.as_secs_f64()
        )),
        _ => None,
    }
}

enum State {
    /// Not started, and why (`--no-host`, interop off, no powershell.exe).
    Off(Backend),
    Running(bridge::Bridge),
    /// Failed at start; tried again after [`RESTART_AFTER`].
    Failed {
        why: String,
        at: Instant,
        program: PathBuf,
    },
}

/// Under WSL, the Windows host's counters as a source: after the other
/// sources, whose devices they are matched to by PCI address.
pub struct WslGuest {
    host: WslHost,
    /// Per Windows PID of the last sample: its name and what to say.
    windows: BTreeMap<u32, (Option<String>, String)>,
}

impl WslGuest {
    /// Starts the bridge unless `no_host`; `wait_first`: wait (boundedly)
    /// for its first sample, for one-shot output, rather than say
    /// "starting".
    pub fn open(no_host: bool, wait_first: bool) -> WslGuest {
        let host = WslHost::open(no_host);
        if wait_first {
            host.wait_first();
        }
        WslGuest {
            host,
            windows: BTreeMap::new(),
        }
    }
}

impl Source for WslGuest {
    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        let candidates = candidates(round.scanned);
        let index_base = round.next_index();
        let (backend, sample) = self.host.sample(&mut round.devices, index_base, &candidates);
        self.windows = sample.windows;
        let mut reading = Report {
            devices: sample.devices,
            usage: sample
                .usage
                .into_iter()
                .map(|(owner, u)| match owner {
                    Owner::Linux { pid, vmwp } => (source::Owner::Paired { pid, host_pid: vmwp }, u),
                    Owner::Windows(pid) => (source::Owner::Host(pid), u),
                })
                .collect(),
            notes: sample.linux_notes,
        };
        reading.retain_device(round.only);
        (backend, reading)
    }

    /// Names the Windows processes NVML lists, which have no Linux process.
    fn finish(&mut self, _scanned: &[ProcInfo], processes: &mut [Process]) {
        for p in processes
            .iter_mut()
            .filter(|p| p.name.is_none() && p.host_pid.is_some())
        {
            let (name, note) = self.windows.remove(&p.pid).unwrap_or_else(|| {
                let note = format!(
                    "PID {} is not a Linux process here: a Windows process NVML lists",
                    p.pid
                );
                (None, note)
            });
            p.name = name;
            p.notes = vec![note];
        }
    }
}

/// The Linux processes that can hold a GPU context (through /dev/dxg: the
/// CUDA, D3D12 and DXCore user-mode libraries).
fn candidates(scanned: &[ProcInfo]) -> Vec<Candidate> {
    scanned
        .iter()
        .filter(|i| {
            i.runtimes
                .iter()
                .any(|r| matches!(r.as_str(), "cuda" | "d3d12" | "dxcore"))
        })
        .map(|i| Candidate {
            started: i.start_ticks,
            pid: i.pid,
        })
        .collect()
}

/// The host source as the collector holds it.
pub struct WslHost {
    state: State,
    clock: EngineClock,
    pairing: ContextPairing,
    /// [`GIVE_UP_AFTER`]; shorter in tests.
    give_up_after: Duration,
}

impl WslHost {
    /// Starts the bridge unless `no_host` or interop is missing.
    pub fn open(no_host: bool) -> WslHost {
        let off = |status, detail: String| State::Off(backend(status, detail));
        let state = if no_host {
            off(
                BackendStatus::Unavailable,
                format!("skipped (--no-host): {NO_HOST_WHY}"),
            )
        } else if let Some(problem) = (forced() != Some(true)).then(interop_problem).flatten() {
            off(BackendStatus::Unavailable, problem)
        } else {
            match bridge::find_powershell() {
                None => off(
                    BackendStatus::Unavailable,
                    "powershell.exe is not on PATH nor in /mnt/c/Windows/System32/WindowsPowerShell/v1.0 (appendWindowsPath=false, or C: not mounted there): the host counters cannot be read".into(),
                ),
                Some(program) => start(program),
            }
        };
        WslHost {
            state,
            clock: EngineClock::default(),
            pairing: ContextPairing::default(),
            give_up_after: GIVE_UP_AFTER,
        }
    }

    /// For one-shot output: waits (boundedly) for the first sample.
    pub fn wait_first(&self) {
        if let State::Running(b) = &self.state {
            b.wait_first(FIRST_SAMPLE_WAIT);
        }
    }

    /// The newest host sample as usage on devices. `candidates` are the
    /// Linux processes that can hold a GPU context.
    pub fn sample(
        &mut self,
        existing: &mut [Device],
        index_base: u32,
        candidates: &[Candidate],
    ) -> (Backend, HostSample) {
        if let State::Failed { at, program, .. } = &self.state {
            if at.elapsed() >= RESTART_AFTER {
                self.state = start(program.clone());
            }
        }
        let na = |why: &str| na_notes(candidates, why);
        let bridge = match &mut self.state {
            State::Off(b) => {
                let why = match b.detail.starts_with("skipped") {
                    true => NO_HOST_WHY.to_string(),
                    false => b.detail.clone(),
                };
                return (b.clone(), na(&why));
            }
            State::Failed { why, .. } => {
                let why = why.clone();
                return (backend(BackendStatus::Error, why.clone()), na(&why));
            }
            State::Running(b) => b,
        };
        let (status, latest) = bridge.latest();
        if let Some(why) = give_up(&status, self.give_up_after) {
            // Dropping the bridge kills its child; the restart is timed
            // from now, the failure, not from when it was started.
            self.state = State::Failed {
                why: why.clone(),
                at: Instant::now(),
                program: bridge.program().to_path_buf(),
            };
            return (backend(BackendStatus::Error, why.clone()), na(&why));
        }
        let sample = match status {
            bridge::Status::Starting(waited) => {
                let detail = format!(
                    "starting: powershell.exe on the Windows side has sent no sample yet ({:.1} s; the first takes a few seconds)",
                    waited.as_secs_f64()
                );
                return (backend(BackendStatus::Ok, detail), na("the host bridge is starting"));
            }
            bridge::Status::Failed(why) => return (backend(BackendStatus::Error, why.clone()), na(&why)),
            bridge::Status::Running(age) if age > bridge::STALL => {
                let why = format!(
                    "the host bridge has sent nothing for {:.0} s (Get-Counter hangs?): no host figures shown",
                    age.as_secs_f64()
                );
                return (backend(BackendStatus::Error, why.clone()), na(&why));
            }
            bridge::Status::Running(_) => match latest {
                Some((_, sample)) => sample,
                None => return (backend(BackendStatus::Error, "no sample".into()), na("no sample")),
            },
        };
        let out = host_sample(
            &sample,
            &mut self.clock,
            &mut self.pairing,
            existing,
            index_base,
            candidates,
        );
        let count = |m: Option<Match>| {
            out.usage
                .iter()
                .filter(|(o, u)| matches!(o, Owner::Linux { .. }) && u.pairing == m)
                .count()
        };
        let unpaired = out
            .windows
            .values()
            .filter(|(n, _)| n.as_deref().is_some_and(is_vmwp))
            .count();
        let mut detail = format!(
            "Windows GPU counters through powershell.exe: {} Linux process{} paired with vmwp.exe contexts ({} exact, {} guessed, {} context{} unpaired), {} Windows process{}",
            count(Some(Match::Exact)) + count(Some(Match::Guess)),
            if count(Some(Match::Exact)) + count(Some(Match::Guess)) == 1 { "" } else { "es" },
            count(Some(Match::Exact)),
            count(Some(Match::Guess)),
            unpaired,
            if unpaired == 1 { "" } else { "s" },
            out.windows.len() - unpaired,
            if out.windows.len() - unpaired == 1 { "" } else { "es" },
        );
        if !sample.errors.is_empty() || sample.reading.dropped > 0 {
            detail.push_str("; the process list is incomplete");
        }
        if sample.reading.dropped > 0 {
            detail.push_str(&format!(
                "; {} counter values dropped (more than {} instances)",
                sample.reading.dropped,
                wddm::MAX_INSTANCES
            ));
        }
        for e in sample
            .notes
            .iter()
            .chain(&sample.errors)
            .chain(bridge.last_error().as_ref())
        {
            detail.push_str("; ");
            detail.push_str(e);
        }
        (backend(BackendStatus::Ok, detail), out)
    }
}

const NO_HOST_WHY: &str = "under WSL, Windows charges every Linux process's GPU memory to vmwp.exe, so per-process VRAM is n/a without the host counters";

fn start(program: PathBuf) -> State {
    match bridge::Bridge::start(&program) {
        Ok(b) => State::Running(b),
        Err(why) => State::Failed {
            why,
            at: Instant::now(),
            program,
        },
    }
}

/// Says on every process that could hold GPU memory why its VRAM is n/a.
fn na_notes(candidates: &[Candidate], why: &str) -> HostSample {
    let mut out = HostSample::default();
    for c in candidates {
        out.linux_notes
            .entry(c.pid)
            .or_default()
            .push(format!("VRAM n/a: {why}"));
    }
    out
}

#[cfg(test)]
mod tests;
