//! Apple GPUs (Apple Silicon first, Intel Macs as they come) through the
//! IOKit registry. A Mac with Apple Silicon has no VRAM: the GPU works in
//! the same memory as the CPU, so what can be known is narrower than on a
//! discrete card, and this module says exactly what:
//!
//! - **Device**: the `PerformanceStatistics` dictionary of the
//!   `IOAccelerator` service ("Device Utilization %", "In use system
//!   memory", "Alloc system memory", ...), the chip name (`model`,
//!   `gpu-core-count`) and the total unified memory (`hw.memsize`).
//! - **Per process**: the service's `AGXDeviceUserClient` children. Each
//!   names its creator (`IOUserClientCreator = "pid 421, WindowServer"`)
//!   and carries the GPU time its queues have used (`AppUsage = ({"API" =
//!   "Metal", "accumulatedGPUTime" = <ns>})`). The change between two
//!   samples over the time between them is the process's GPU share. Intel
//!   drivers put `accumulatedGPUTime` on the client itself.
//! - **Memory per process**: there is no per-process GPU memory counter.
//!   What macOS books to a process, graphics included, is its physical
//!   footprint (`proc_pid_rusage`, `ri_phys_footprint`); it costs tens of
//!   milliseconds a process, so [`Footprints`] measures it on a thread of
//!   its own on a schedule ([`FootprintSchedule`]); a one-shot snapshot
//!   measures in line for at most [`ONE_SHOT_BUDGET`], GPU clients, AI and
//!   busy processes first, and leaves the rest unknown with a note.
//!
//! Key names and shapes are those of public `ioreg -r -c IOAccelerator` and
//! `ioreg -c AGXDeviceUserClient` output quoted in other monitors' tests and
//! comments (an M4's PerformanceStatistics verbatim, WindowServer's and a
//! Python process's `AppUsage`, and a note from a probe on an M3 Max that
//! user clients are not registered services and are found as children of
//! the accelerator); `tests/data/apple/README.md` lists them.
//!
//! Everything here is plain Rust over a plain [`Value`] tree; the IOKit
//! calls that fill it are in `iokit.rs` (macOS only).

#[cfg(target_os = "macos")]
pub mod iokit;

use crate::snapshot::{Backend, BackendStatus, Device, GpuUsage, QueryError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A property value as the registry holds it (a CFType tree), copied into
/// plain Rust by the platform layer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Data(Vec<u8>),
    Array(Vec<Value>),
    Dict(Dict),
}

pub type Dict = BTreeMap<String, Value>;

impl Value {
    /// A non-negative integer (a counter, a byte count).
    fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::Float(f) if f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64 => {
                Some(*f as u64)
            }
            _ => None,
        }
    }

    /// A string, or a NUL-terminated byte string (Intel Macs publish
    /// `model` as data).
    fn as_text(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Data(d) => {
                let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
                std::str::from_utf8(&d[..end]).ok().map(str::to_string)
            }
            _ => None,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Data(_) => "data",
            Value::Array(_) => "an array",
            Value::Dict(_) => "a dictionary",
        }
    }
}

/// One registry entry: its class, its registry ID (unique for the life of
/// the boot, never reused) or why it could not be read, and its
/// properties, or why they could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub class: String,
    pub id: Result<u64, String>,
    pub properties: Result<Dict, String>,
}

/// An `IOAccelerator` service and its children, or why the children could
/// not be listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Accelerator {
    pub service: Entry,
    pub clients: Result<Vec<Entry>, String>,
}

/// What one read of the registry found.
pub type Registry = Result<Vec<Accelerator>, String>;

/// The class of the per-process clients on Apple Silicon.
pub const CLIENT_CLASS: &str = "AGXDeviceUserClient";

/// The device a service describes, before the per-process part.
pub fn device(service: &Entry, index: u32, unified_total: Option<u64>) -> Device {
    let mut d = Device {
        index,
        backend: "apple".into(),
        vendor: vendor(&service.class).into(),
        process_list_complete: true,
        ..Device::default()
    };
    let props = match &service.properties {
        Ok(p) => p,
        Err(e) => {
            d.errors.push(QueryError {
                query: "accelerator properties".into(),
                message: e.clone(),
            });
            d.name = Some(service.class.clone());
            return d;
        }
    };
    let model = props.get("model").and_then(Value::as_text);
    let cores = props.get("gpu-core-count").and_then(Value::as_u64);
    d.name = Some(match (model, cores) {
        (Some(m), Some(c)) => format!("{m} ({c}-core GPU)"),
        (Some(m), None) => m,
        (None, _) => service.class.clone(),
    });
    let Some(stats) = props.get("PerformanceStatistics") else {
        d.notes
            .push("no PerformanceStatistics on this accelerator: utilization and memory unknown".into());
        return d;
    };
    let Value::Dict(stats) = stats else {
        d.notes.push(format!(
            "PerformanceStatistics is {}, not a dictionary: utilization and memory unknown",
            stats.type_name()
        ));
        return d;
    };
    let mut used_keys = Vec::new();
    let mut number = |key: &'static str, d: &mut Device| -> Option<u64> {
        let v = stats.get(key)?;
        used_keys.push(key);
        let n = v.as_u64();
        if n.is_none() {
            d.notes
                .push(format!("\"{key}\" is {}, not a count: left unknown", v.type_name()));
        }
        n
    };
    let util = number("Device Utilization %", &mut d).or_else(|| number("GPU Activity(%)", &mut d));
    d.gpu_util_percent = match util {
        Some(u) if u <= 100 => Some(u as u32),
        Some(u) => {
            d.notes.push(format!("utilization {u}% is out of range: left unknown"));
            None
        }
        None => None,
    };
    let vram_used = number("vramUsedBytes", &mut d);
    let vram_free = number("vramFreeBytes", &mut d);
    if vram_used.is_some() || vram_free.is_some() {
        // A discrete card in an Intel Mac: real VRAM.
        d.memory_used_bytes = vram_used;
        d.memory_free_bytes = vram_free;
        d.memory_total_bytes = vram_used.zip(vram_free).and_then(|(u, f)| u.checked_add(f));
    } else {
        // Unified memory: the GPU's "total" is all of RAM, and there is no
        // free figure that means "free for the GPU" (macOS lets it wire up
        // to a working-set limit, and the CPU competes for the same pages).
        d.memory_total_bytes = unified_total;
        d.memory_used_bytes = number("In use system memory", &mut d);
        let alloc = number("Alloc system memory", &mut d);
        d.notes.push(format!(
            "unified memory: the GPU shares system RAM ({} in all); used is what the GPU driver has in use \
             (\"In use system memory\"), {} allocated (\"Alloc system memory\"); no VRAM, no spill",
            crate::units::bytes(unified_total),
            crate::units::bytes(alloc),
        ));
    }
    // Whatever else the chip publishes, as it says it.
    let extra: Vec<String> = stats
        .iter()
        .filter(|(k, _)| !used_keys.contains(&k.as_str()))
        .filter_map(|(k, v)| v.as_u64().map(|n| format!("{k}={n}")))
        .collect();
    if !extra.is_empty() {
        d.notes.push(format!("PerformanceStatistics: {}", extra.join(", ")));
    }
    d
}

fn vendor(class: &str) -> &'static str {
    if class.starts_with("AGX") {
        "Apple"
    } else if class.starts_with("Intel") {
        "Intel"
    } else if class.starts_with("AMD") || class.starts_with("ATI") {
        "AMD"
    } else {
        "unknown"
    }
}

/// One per-process client of an accelerator.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    /// The registry ID: a client is followed by it, so a queue that closes
    /// takes its counter with it instead of making its process's sum go
    /// backwards.
    pub id: u64,
    pub pid: u32,
    /// The creator's name as the kernel recorded it (p_comm, at most 16
    /// bytes: a long name is cut).
    pub name: String,
    /// Accumulated GPU time over all of the client's APIs, or why it is
    /// unknown.
    pub gpu_time_ns: Result<u64, String>,
}

/// The clients of a service as [`clients`] reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Clients {
    pub list: Vec<Client>,
    /// Why some clients are missing from `list`: the list is incomplete.
    pub errors: Vec<String>,
    /// The registry IDs of the clients left out of `list` (properties or
    /// creator not readable): the tracker remembers them, so that when one
    /// reads again its lifetime's GPU time is not taken for one window's.
    pub unreadable: Vec<u64>,
}

/// Reads the clients of a service. Children that are not per-process
/// clients (other user-client classes without a creator) are skipped; a
/// client whose properties could not be read, or whose creator cannot be
/// parsed, is an error: some process's time is then missing from the list.
pub fn clients(children: &[Entry]) -> Clients {
    let mut out = Clients::default();
    for child in children {
        let id = match &child.id {
            Ok(id) => *id,
            Err(e) => {
                // Without its ID a client cannot be followed from one
                // sample to the next (nor told from others): left out.
                let props = child.properties.as_ref().ok();
                let has = |k: &str| props.is_some_and(|p| p.contains_key(k));
                if child.class == CLIENT_CLASS
                    || (has("IOUserClientCreator") && (has("AppUsage") || has("accumulatedGPUTime")))
                {
                    out.errors
                        .push(format!("a {} client: registry entry ID not readable: {e}", child.class));
                }
                continue;
            }
        };
        let mut unreadable = |message: String| {
            out.errors.push(message);
            out.unreadable.push(id);
        };
        let props = match &child.properties {
            Ok(p) => p,
            Err(e) if child.class == CLIENT_CLASS => {
                unreadable(format!("client {id:#x}: properties not readable: {e}"));
                continue;
            }
            Err(_) => continue,
        };
        let time_source = props.get("AppUsage").or_else(|| props.get("accumulatedGPUTime"));
        let Some(creator) = props.get("IOUserClientCreator") else {
            if child.class == CLIENT_CLASS {
                unreadable(format!("client {id:#x}: no IOUserClientCreator"));
            }
            continue;
        };
        if child.class != CLIENT_CLASS && time_source.is_none() {
            continue;
        }
        let Some((pid, name)) = creator.as_text().as_deref().and_then(parse_creator) else {
            unreadable(format!(
                "client {id:#x}: IOUserClientCreator {creator:?} does not name a process"
            ));
            continue;
        };
        out.list.push(Client {
            id,
            pid,
            name,
            gpu_time_ns: gpu_time(props),
        });
    }
    out
}

/// `"pid 421, WindowServer"` → (421, "WindowServer").
fn parse_creator(text: &str) -> Option<(u32, String)> {
    let rest = text.trim().strip_prefix("pid ")?;
    let (pid, name) = match rest.split_once(',') {
        Some((pid, name)) => (pid, name.trim()),
        None => (rest, ""),
    };
    let pid: u32 = pid.trim().parse().ok()?;
    (pid > 0).then(|| (pid, name.to_string()))
}

/// The sum of `accumulatedGPUTime` over a client's `AppUsage` entries (one
/// per API: Metal, OpenCL, ...), or the client's own `accumulatedGPUTime`.
/// A client with an empty `AppUsage` has submitted no work yet: 0.
fn gpu_time(props: &Dict) -> Result<u64, String> {
    if let Some(direct) = props.get("accumulatedGPUTime") {
        return direct
            .as_u64()
            .ok_or_else(|| format!("accumulatedGPUTime is {}", direct.type_name()));
    }
    let usage = props.get("AppUsage").ok_or("no AppUsage")?;
    let Value::Array(apis) = usage else {
        return Err(format!("AppUsage is {}, not an array", usage.type_name()));
    };
    let mut total: u64 = 0;
    for api in apis {
        let Value::Dict(api) = api else {
            return Err(format!("an AppUsage entry is {}", api.type_name()));
        };
        let t = api
            .get("accumulatedGPUTime")
            .ok_or("an AppUsage entry has no accumulatedGPUTime")?;
        let t = t
            .as_u64()
            .ok_or_else(|| format!("accumulatedGPUTime is {}", t.type_name()))?;
        total = total.saturating_add(t);
    }
    Ok(total)
}

/// One process's GPU use over the last window.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessGpu {
    pub pid: u32,
    /// Percent of the window the GPU spent on this process's work; None on
    /// the first sample, or when a counter of the process is unknown.
    pub share_percent: Option<u32>,
    /// GPU time moved in this window (footprints of busy processes are
    /// measured more often).
    pub busy: bool,
    /// Why the share is unknown.
    pub note: Option<String>,
}

/// Per client registry ID: its creator's PID and its GPU time (ns), or
/// `None` for a client seen but not readable (its time, its properties or
/// its creator): its next readable window is unknown, not its whole life.
type Counters = HashMap<u64, Option<(u32, u64)>>;

/// The GPU time of every client at the previous sample, and when.
#[derive(Debug, Default)]
pub struct GpuTimeTracker {
    last: Option<(Instant, Counters)>,
}

impl GpuTimeTracker {
    /// Per process, the GPU share since the previous call. A client that
    /// has appeared since then was created in the window, so all of its
    /// time is the window's; a client that is gone (its process exited, or
    /// it closed its queue) is forgotten. A client listed in `unreadable`
    /// (or whose time could not be read) is remembered as such, and its
    /// next readable window is unknown: its counter holds time from before
    /// the window. A counter that went backwards leaves its process's share
    /// unknown for this window.
    pub fn update(&mut self, now: Instant, clients: &[Client], unreadable: &[u64]) -> Vec<ProcessGpu> {
        let mut per_pid: BTreeMap<u32, (Option<u64>, Option<String>)> = BTreeMap::new();
        let window = self
            .last
            .as_ref()
            .map(|(at, seen)| (now.saturating_duration_since(*at), seen));
        let mut current: Counters = HashMap::with_capacity(clients.len() + unreadable.len());
        for &id in unreadable {
            current.insert(id, None);
        }
        for c in clients {
            let entry = per_pid.entry(c.pid).or_insert((Some(0), None));
            let ns = match &c.gpu_time_ns {
                Ok(ns) => *ns,
                Err(e) => {
                    current.insert(c.id, None);
                    entry.0 = None;
                    entry.1 = Some(format!("GPU time not readable: {e}"));
                    continue;
                }
            };
            current.insert(c.id, Some((c.pid, ns)));
            let delta = match window.and_then(|(_, seen)| seen.get(&c.id)) {
                Some(&Some((pid, before))) if pid == c.pid => ns.checked_sub(before),
                Some(None) => {
                    entry.0 = None;
                    entry.1.get_or_insert_with(|| {
                        "a GPU client was not readable in the previous sample: share unknown for this window".into()
                    });
                    continue;
                }
                // A new client (or, never seen, a reused ID under another
                // PID): all of its time is this window's.
                _ => Some(ns),
            };
            match delta {
                Some(d) => entry.0 = entry.0.map(|sum| sum.saturating_add(d)),
                None => {
                    entry.0 = None;
                    entry
                        .1
                        .get_or_insert_with(|| "a GPU time counter went backwards".into());
                }
            }
        }
        let out = per_pid
            .into_iter()
            .map(|(pid, (moved, note))| {
                let share = match (window, moved) {
                    (Some((elapsed, _)), Some(ns)) if !elapsed.is_zero() => {
                        Some(((ns as f64 / elapsed.as_nanos() as f64) * 100.0).round().min(100.0) as u32)
                    }
                    _ => None,
                };
                ProcessGpu {
                    pid,
                    share_percent: share,
                    busy: window.is_some() && moved.is_some_and(|ns| ns > 0),
                    note,
                }
            })
            .collect();
        self.last = Some((now, current));
        out
    }
}

/// How often a busy or new process's footprint is measured.
pub const BUSY_EVERY: Duration = Duration::from_secs(2);
/// How often an idle process's footprint is measured.
pub const IDLE_EVERY: Duration = Duration::from_secs(30);
/// The most processes whose footprints are followed: bounds the work and
/// the memory on a machine with thousands of listed processes. GPU clients
/// come first, then AI processes, then busy ones, then the rest in list
/// order; those past the bound are unknown with a note.
pub const MAX_FOLLOWED: usize = 512;

/// A process whose footprint is wanted: its PID, its start (so that a
/// reused PID is a new process), whether it used the GPU in the last
/// window, whether it is a GPU client at all, and whether it is AI work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wanted {
    pub pid: u32,
    pub start: u64,
    pub busy: bool,
    pub gpu_client: bool,
    pub ai: bool,
}

impl Wanted {
    /// Lower is measured first, and followed first when there are more
    /// than [`MAX_FOLLOWED`].
    fn rank(&self) -> (bool, bool, bool) {
        (!self.gpu_client, !self.ai, !self.busy)
    }
}

/// Why a footprint could not be measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmeasured {
    /// Another user's process and we are not root: it will not change.
    Denied,
    /// The process exited.
    Gone,
    Other(String),
    /// Not measured: a one-shot snapshot's time for footprints
    /// ([`ONE_SHOT_BUDGET`]) ran out first.
    OverBudget,
}

/// The most time a one-shot snapshot spends measuring footprints in line
/// (GPU clients, AI and busy processes first); the rest are unknown with a
/// note. Tens of milliseconds each would otherwise add up to seconds.
pub const ONE_SHOT_BUDGET: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct Followed {
    measured_at: Option<Instant>,
    result: Option<Result<u64, Unmeasured>>,
    busy: bool,
}

/// When each process's footprint is due: busy and new processes every
/// [`BUSY_EVERY`], idle ones every [`IDLE_EVERY`], a process we may not
/// read (another user's, without root) only as often as an idle one. The
/// clock is the caller's, so tests drive it.
#[derive(Debug, Default)]
pub struct FootprintSchedule {
    followed: HashMap<(u32, u64), Followed>,
    /// Wanted but past [`MAX_FOLLOWED`] in the last wish list.
    cut: HashSet<(u32, u64)>,
}

impl FootprintSchedule {
    /// Sets the processes to follow (others are forgotten; past
    /// [`MAX_FOLLOWED`], GPU clients, AI and busy processes are kept
    /// first) and returns those due at `now`, never-measured ones first,
    /// then in that order.
    pub fn due(&mut self, now: Instant, wanted: &[Wanted]) -> Vec<(u32, u64)> {
        let mut ranked: Vec<&Wanted> = wanted.iter().collect();
        ranked.sort_by_key(|w| w.rank());
        let mut keep: HashMap<(u32, u64), (usize, bool)> = HashMap::with_capacity(ranked.len().min(MAX_FOLLOWED));
        self.cut.clear();
        for w in ranked {
            let key = (w.pid, w.start);
            if keep.contains_key(&key) {
                continue;
            }
            if keep.len() < MAX_FOLLOWED {
                keep.insert(key, (keep.len(), w.busy));
            } else {
                self.cut.insert(key);
            }
        }
        self.followed.retain(|k, _| keep.contains_key(k));
        let mut due = Vec::new();
        for (&key, &(order, busy)) in &keep {
            let f = self.followed.entry(key).or_insert(Followed {
                measured_at: None,
                result: None,
                busy,
            });
            f.busy = busy;
            let period = match &f.result {
                Some(Err(Unmeasured::Denied)) => IDLE_EVERY,
                _ if busy => BUSY_EVERY,
                _ => IDLE_EVERY,
            };
            let is_due = f
                .measured_at
                .is_none_or(|at| now.saturating_duration_since(at) >= period);
            if is_due {
                due.push((f.measured_at.is_some(), order, key));
            }
        }
        due.sort_unstable();
        due.into_iter().map(|(_, _, k)| k).collect()
    }

    pub fn record(&mut self, key: (u32, u64), now: Instant, result: Result<u64, Unmeasured>) {
        if let Some(f) = self.followed.get_mut(&key) {
            if result == Err(Unmeasured::OverBudget) {
                // Not a measurement: still due, and an earlier one stands.
                f.result.get_or_insert(result);
                return;
            }
            // An exited process stays followed (unknown) until the next
            // wish list drops it: forgetting it here would make it new, and
            // due, again at once.
            f.measured_at = Some(now);
            f.result = Some(result);
        }
    }

    /// The last footprint measured, and a note when it could not be.
    pub fn footprint(&self, key: (u32, u64)) -> (Option<u64>, Option<String>) {
        if self.cut.contains(&key) {
            return (
                None,
                Some(format!(
                    "footprint not measured: only {MAX_FOLLOWED} processes are followed (GPU clients, AI and busy processes first)"
                )),
            );
        }
        match self.followed.get(&key).and_then(|f| f.result.as_ref()) {
            Some(Ok(b)) => (Some(*b), None),
            Some(Err(Unmeasured::Denied)) => (
                None,
                Some("footprint not readable: another user's process (only root sees every process's memory)".into()),
            ),
            Some(Err(Unmeasured::Other(e))) => (None, Some(format!("footprint not readable: {e}"))),
            Some(Err(Unmeasured::OverBudget)) => (
                None,
                Some(format!(
                    "footprint not measured: a one-shot snapshot spends at most {} ms on footprints (GPU clients, AI and busy processes first)",
                    ONE_SHOT_BUDGET.as_millis()
                )),
            ),
            Some(Err(Unmeasured::Gone)) | None => (None, None),
        }
    }
}

/// Measures one process's footprint.
pub type Measure = dyn Fn(u32) -> Result<u64, Unmeasured> + Send + Sync;

struct Shared {
    schedule: FootprintSchedule,
    wanted: Vec<Wanted>,
    stop: bool,
}

/// Footprints measured on a thread of their own (the live view, `record`),
/// or in line for a one-shot snapshot.
pub struct Footprints {
    shared: Arc<(Mutex<Shared>, Condvar)>,
    measure: Arc<Measure>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// In line: the most time one [`Footprints::want`] measures for.
    budget: Duration,
}

impl Footprints {
    /// `tick` is how often the thread looks for due processes.
    pub fn new(measure: Arc<Measure>, background: bool, tick: Duration) -> Footprints {
        let shared = Arc::new((
            Mutex::new(Shared {
                schedule: FootprintSchedule::default(),
                wanted: Vec::new(),
                stop: false,
            }),
            Condvar::new(),
        ));
        let thread = background.then(|| {
            let shared = Arc::clone(&shared);
            let measure = Arc::clone(&measure);
            std::thread::spawn(move || loop {
                let due = {
                    let (lock, wake) = &*shared;
                    let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
                    if s.stop {
                        return;
                    }
                    let wanted = std::mem::take(&mut s.wanted);
                    let due = s.schedule.due(Instant::now(), &wanted);
                    s.wanted = wanted;
                    if due.is_empty() {
                        // Woken by a new wish list, by Drop, or by the tick.
                        let (s, _) = wake.wait_timeout(s, tick).unwrap_or_else(|e| e.into_inner());
                        if s.stop {
                            return;
                        }
                        continue;
                    }
                    due
                };
                Self::measure_all(&shared.0, &*measure, &due, None);
            })
        });
        Footprints {
            shared,
            measure,
            thread,
            budget: ONE_SHOT_BUDGET,
        }
    }

    #[cfg(test)]
    fn with_budget(mut self, budget: Duration) -> Footprints {
        self.budget = budget;
        self
    }

    /// Measures `due` in order; past `deadline`, the rest are left
    /// [`Unmeasured::OverBudget`].
    fn measure_all(lock: &Mutex<Shared>, measure: &Measure, due: &[(u32, u64)], deadline: Option<Instant>) {
        for &key in due {
            // Outside the lock: a sample never waits on a measurement.
            let result = match deadline {
                Some(d) if Instant::now() >= d => Err(Unmeasured::OverBudget),
                _ => measure(key.0),
            };
            let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
            if s.stop {
                return;
            }
            s.schedule.record(key, Instant::now(), result);
        }
    }

    /// Says which processes to follow; in line (no thread), measures the
    /// due ones before returning, for at most the budget.
    pub fn want(&self, wanted: Vec<Wanted>) {
        let started = Instant::now();
        let (lock, wake) = &*self.shared;
        let due = {
            let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wanted = wanted;
            if self.thread.is_some() {
                wake.notify_one();
                return;
            }
            let wanted = std::mem::take(&mut s.wanted);
            let due = s.schedule.due(Instant::now(), &wanted);
            s.wanted = wanted;
            due
        };
        Self::measure_all(lock, &*self.measure, &due, Some(started + self.budget));
    }

    pub fn footprint(&self, pid: u32, start: u64) -> (Option<u64>, Option<String>) {
        let s = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        s.schedule.footprint((pid, start))
    }
}

impl Drop for Footprints {
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

/// One sample of every accelerator: devices, per-process GPU use, and the
/// backend line.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub devices: Vec<Device>,
    pub processes: Vec<(u32, GpuUsage)>,
    /// Per PID: why its share is unknown.
    pub process_notes: BTreeMap<u32, Vec<String>>,
    /// Per PID: busy in the last window.
    pub busy: BTreeMap<u32, bool>,
    /// Per PID: the name its clients' creator had, for a process the scan
    /// does not see (it exited between the two reads).
    pub creators: BTreeMap<u32, String>,
}

/// What the collector keeps of a sample for after the merge: per PID, the
/// notes, whether it was busy, and its clients' creator name.
#[cfg(target_os = "macos")]
pub type Window = (BTreeMap<u32, Vec<String>>, BTreeMap<u32, bool>, BTreeMap<u32, String>);

/// Turns a read of the registry into a sample, keeping the GPU-time state
/// between samples (one tracker per accelerator, by registry ID).
#[derive(Debug, Default)]
pub struct Apple {
    trackers: HashMap<u64, GpuTimeTracker>,
    /// Root sees every process's footprint, command line and mapped files;
    /// anyone else sees only their own.
    as_root: bool,
}

impl Apple {
    pub fn new(as_root: bool) -> Apple {
        Apple {
            trackers: HashMap::new(),
            as_root,
        }
    }

    pub fn sample(
        &mut self,
        registry: &Registry,
        now: Instant,
        index_base: u32,
        unified_total: Option<u64>,
        only: Option<u32>,
    ) -> (Sample, Backend) {
        let mut sample = Sample::default();
        let accelerators = match registry {
            Ok(a) if a.is_empty() => {
                return (
                    sample,
                    backend(
                        BackendStatus::Unavailable,
                        "no IOAccelerator service in the IOKit registry".into(),
                    ),
                )
            }
            Ok(a) => a,
            Err(e) => return (sample, backend(BackendStatus::Error, e.clone())),
        };
        self.trackers
            .retain(|id, _| accelerators.iter().any(|a| a.service.id.as_ref() == Ok(id)));
        let mut clients_seen = 0;
        for (i, acc) in accelerators.iter().enumerate() {
            let index = index_base + i as u32;
            if only.is_some_and(|o| o != index) {
                continue;
            }
            let mut dev = device(&acc.service, index, unified_total);
            match (&acc.service.id, &acc.clients) {
                (Err(e), _) => {
                    // Its clients' GPU time is followed under its ID.
                    dev.process_list_complete = false;
                    dev.errors.push(QueryError {
                        query: "Metal clients".into(),
                        message: format!("the accelerator's registry entry ID not readable: {e}"),
                    });
                }
                (Ok(service_id), Ok(children)) => {
                    let Clients {
                        list,
                        errors,
                        unreadable,
                    } = clients(children);
                    clients_seen += list.len();
                    for c in &list {
                        sample.creators.entry(c.pid).or_insert_with(|| c.name.clone());
                    }
                    if !errors.is_empty() {
                        dev.process_list_complete = false;
                        dev.errors.extend(errors.into_iter().map(|message| QueryError {
                            query: "Metal clients".into(),
                            message,
                        }));
                    }
                    let tracker = self.trackers.entry(*service_id).or_default();
                    for p in tracker.update(now, &list, &unreadable) {
                        let mut engines = BTreeMap::new();
                        if let Some(s) = p.share_percent {
                            engines.insert("gpu".to_string(), s);
                        }
                        sample.busy.insert(p.pid, p.busy);
                        if let Some(note) = p.note {
                            sample.process_notes.entry(p.pid).or_default().push(note);
                        }
                        sample.processes.push((
                            p.pid,
                            GpuUsage {
                                device: index,
                                vram_bytes: None,
                                spill_bytes: None,
                                paged_bytes: None,
                                source: "apple".into(),
                                // The creator's own PID: nothing was
                                // paired (`match` is for translated PIDs).
                                pairing: None,
                                contexts: Vec::new(),
                                engines,
                            },
                        ));
                    }
                }
                (Ok(_), Err(e)) => {
                    // Unknown, not "no processes": the GPU-time state is
                    // kept, so the next good sample measures over the
                    // whole gap.
                    dev.process_list_complete = false;
                    dev.errors.push(QueryError {
                        query: "Metal clients".into(),
                        message: e.clone(),
                    });
                }
            }
            sample.devices.push(dev);
        }
        let names: Vec<&str> = sample.devices.iter().filter_map(|d| d.name.as_deref()).collect();
        let mut detail = format!(
            "{} ({} GPU client{}); unified memory: per-process memory is the physical footprint, not VRAM",
            names.join(", "),
            clients_seen,
            if clients_seen == 1 { "" } else { "s" }
        );
        if !self.as_root {
            detail.push_str(
                "; not root: footprints, command lines and mapped files of other users' processes are not visible",
            );
        }
        (sample, backend(BackendStatus::Ok, detail))
    }
}

fn backend(status: BackendStatus, detail: String) -> Backend {
    Backend {
        name: "apple".into(),
        status,
        detail,
    }
}

#[cfg(test)]
mod tests;
