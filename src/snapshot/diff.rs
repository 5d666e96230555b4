//! Two snapshots compared (`gputaskman diff BEFORE.json AFTER.json`).
//!
//! The rules kept here:
//! - only *measured* counters are compared (device memory, per-process
//!   VRAM/spill/paged per device, RSS, CPU); what runtimes report and what
//!   model files imply sit in their own section ([`ModelDiff`]), never mixed
//!   in;
//! - a process or device missing from one side is "not listed", never 0; a
//!   value that became known or unknown says so ([`State`]);
//! - processes pair by PID and start time (a reused PID is another
//!   process), then by name plus a listening port (a model server that
//!   restarts under a new PID), then by a name unique on both sides; never
//!   two processes that were alive at the same time;
//! - devices pair by UUID, then PCI bus id, never by name: two adapters of
//!   the same model are different devices.
//!
//! The text of a diff is [`crate::view::diff`]; the files are read by
//! [`super::load`].

use super::{Device, GpuUsage, Model, Process, Snapshot};
use crate::units::unix_seconds;
use serde::Serialize;
use std::collections::HashMap;

/// Moves smaller than this are left out of the text output (and counted);
/// `--json` keeps them.
pub const HIDE_BELOW: u64 = 16 << 20;

/// How a value moved between the two sides.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Same,
    Grew,
    Shrank,
    /// Null before, a value after.
    BecameKnown,
    /// A value before, null after.
    BecameUnknown,
    /// Null on both sides.
    Unknown,
    /// The process, device or model is not in BEFORE at all (not 0).
    NotListedBefore,
    /// The process, device or model is not in AFTER at all (not 0).
    NotListedAfter,
}

/// One counter on both sides. `delta` is set only when both are known.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Change<T, D> {
    pub before: Option<T>,
    pub after: Option<T>,
    pub delta: Option<D>,
    pub state: State,
}

/// A byte (or token) count on both sides.
pub type Bytes = Change<u64, i64>;
/// A percentage on both sides.
pub type Percent = Change<f64, f64>;

/// Which side of the diff a thing is listed on, when it is on one only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Only {
    Before,
    After,
}

/// One counter on both sides; `moved` says how two known values compare.
fn change<T: Copy, D>(before: Option<T>, after: Option<T>, moved: impl FnOnce(T, T) -> (State, D)) -> Change<T, D> {
    let (state, delta) = match (before, after) {
        (Some(b), Some(a)) => {
            let (state, d) = moved(b, a);
            (state, Some(d))
        }
        (None, Some(_)) => (State::BecameKnown, None),
        (Some(_), None) => (State::BecameUnknown, None),
        (None, None) => (State::Unknown, None),
    };
    Change {
        before,
        after,
        delta,
        state,
    }
}

fn bytes(before: Option<u64>, after: Option<u64>) -> Bytes {
    change(before, after, |b, a| {
        let d = a as i128 - b as i128;
        let d = d.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let state = match d.cmp(&0) {
            std::cmp::Ordering::Equal => State::Same,
            std::cmp::Ordering::Greater => State::Grew,
            std::cmp::Ordering::Less => State::Shrank,
        };
        (state, d)
    })
}

fn percent(before: Option<f64>, after: Option<f64>) -> Percent {
    change(before, after, |b, a| {
        let d = a - b;
        let state = if d > 0.0 {
            State::Grew
        } else if d < 0.0 {
            State::Shrank
        } else {
            State::Same
        };
        (state, d)
    })
}

/// A value listed on one side only: the other side is "not listed".
fn one_sided<T: Copy, D>(only: Only, value: Option<T>) -> Change<T, D> {
    match only {
        Only::Before => Change {
            before: value,
            after: None,
            delta: None,
            state: State::NotListedAfter,
        },
        Only::After => Change {
            before: None,
            after: value,
            delta: None,
            state: State::NotListedBefore,
        },
    }
}

fn pick<T: Copy, D>(
    before: Option<T>,
    after: Option<T>,
    both: impl Fn(Option<T>, Option<T>) -> Change<T, D>,
    listed: (bool, bool),
) -> Change<T, D> {
    match listed {
        (true, true) => both(before, after),
        (true, false) => one_sided(Only::Before, before),
        (false, true) => one_sided(Only::After, after),
        (false, false) => both(None, None),
    }
}

impl<T, D> Change<T, D> {
    /// A move of at least [`HIDE_BELOW`], a value that became known or
    /// unknown, or a value on one side only: what the text output shows.
    pub fn shown_bytes(&self) -> bool
    where
        D: Copy + Into<i128>,
    {
        match self.state {
            State::Grew | State::Shrank => {
                self.delta.map(|d| d.into().unsigned_abs() >= HIDE_BELOW as u128) == Some(true)
            }
            State::Same | State::Unknown => false,
            State::BecameKnown | State::BecameUnknown => true,
            State::NotListedBefore | State::NotListedAfter => true,
        }
    }

    /// A move under [`HIDE_BELOW`]: left out of the text output.
    pub fn hidden_move(&self) -> bool
    where
        D: Copy + Into<i128>,
    {
        matches!(self.state, State::Grew | State::Shrank) && !self.shown_bytes()
    }
}

/// Where a side came from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SideInfo {
    pub file: String,
    pub taken_at: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceRef {
    pub index: u32,
    pub backend: String,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
}

/// Measured memory of one device on both sides.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceDiff {
    pub before: Option<DeviceRef>,
    pub after: Option<DeviceRef>,
    /// `uuid` or `pci_bus_id`; null when listed on one side only.
    pub paired_by: Option<&'static str>,
    pub memory_total_bytes: Bytes,
    pub memory_used_bytes: Bytes,
    pub memory_free_bytes: Bytes,
    pub memory_reserved_bytes: Bytes,
    pub shared_memory_used_bytes: Bytes,
    /// What got worse in its health (new errors, lost, throttling that
    /// started), in words; see `health::news`.
    pub health_news: Vec<String>,
}

/// How two process entries were judged to be the same process.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Pairing {
    /// The same PID and start time: certain.
    PidStartTime,
    /// The same PID where a start time is unknown (a process outside this
    /// /proc): reuse of the PID cannot be ruled out.
    Pid,
    /// The same name, listening on the same port (a server that restarted
    /// under a new PID).
    NamePort,
    /// The only process of this name on each side.
    Name,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessRef {
    pub pid: u32,
    pub start_time: Option<String>,
    pub name: Option<String>,
    /// Ports from the process's models' `server_url`.
    pub ports: Vec<u16>,
}

/// Measured counters of one process (or two entries judged the same
/// process) on both sides.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessDiff {
    pub before: Option<ProcessRef>,
    pub after: Option<ProcessRef>,
    pub paired_by: Option<Pairing>,
    /// The port the pairing went by (`name_port`).
    pub port: Option<u16>,
    pub rss_bytes: Bytes,
    pub cpu_percent: Percent,
    /// One entry per device the process is listed on, on either side.
    pub gpu: Vec<GpuDiff>,
    /// It runs a model on a side (its models are in `models`): listed
    /// even when on no GPU, a CPU server being one.
    #[serde(skip)]
    pub runs_model: bool,
}

/// A process's measured memory on one device.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GpuDiff {
    /// `GPU 0 NVIDIA ...` as of AFTER (or BEFORE when only there).
    pub device: String,
    pub device_before: Option<u32>,
    pub device_after: Option<u32>,
    pub vram_bytes: Bytes,
    pub spill_bytes: Bytes,
    pub paged_bytes: Bytes,
}

/// What a model file implies (estimate) and what the runtime says
/// (reported), on both sides. Not measured; never added to measured
/// figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelDiff {
    /// Index into `processes` of the process that runs the model.
    pub process: usize,
    pub pid_before: Option<u32>,
    pub pid_after: Option<u32>,
    pub name: Option<String>,
    pub path: Option<String>,
    /// `path`, `name` or `only_model`; null when on one side only.
    pub paired_by: Option<&'static str>,
    /// Tokens.
    pub context: Bytes,
    pub slots_total: Bytes,
    pub estimate: EstimateDiff,
    pub reported: ReportedDiff,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EstimateDiff {
    pub weights_bytes: Bytes,
    pub kv_bytes: Bytes,
    pub kv_bytes_per_token: Bytes,
    pub recurrent_state_bytes: Bytes,
    pub kv_bytes_without_window: Bytes,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReportedDiff {
    pub weights_bytes: Bytes,
    pub kv_bytes: Bytes,
    pub compute_bytes: Bytes,
    pub total_bytes: Bytes,
    pub device_bytes: Bytes,
    pub source_before: Option<String>,
    pub source_after: Option<String>,
}

/// What the text output leaves out (all of it is in `--json`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Hidden {
    /// Measured moves under [`HIDE_BELOW`].
    pub moves: usize,
    /// Paired processes with nothing shown.
    pub processes: usize,
    /// Paired devices with nothing shown.
    pub devices: usize,
    /// Processes on no GPU on either side and running no model (RSS
    /// only): left out of the text, which leads with what moved on the GPU.
    pub off_gpu: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Diff {
    pub before: SideInfo,
    pub after: SideInfo,
    /// Seconds from BEFORE to AFTER, when both times parse.
    pub elapsed_s: Option<f64>,
    pub hide_below_bytes: u64,
    pub devices: Vec<DeviceDiff>,
    pub processes: Vec<ProcessDiff>,
    pub models: Vec<ModelDiff>,
    pub hidden: Hidden,
}

/// The port of a URL such as `http://127.0.0.1:8080/v1`, with the scheme's
/// default when none is written.
pub fn url_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let after_host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.1,
        None => host_port,
    };
    match after_host.rsplit_once(':') {
        Some((_, port)) => port.parse().ok(),
        None => match scheme {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        },
    }
}

/// The ports a process listens on: what discovery read from its sockets,
/// and those of its models' server URLs (snapshots from before
/// `listen_ports` have only these).
fn ports(p: &Process) -> Vec<u16> {
    let mut ports: Vec<u16> = p
        .models
        .iter()
        .filter_map(|m| m.server_url.as_deref())
        .filter_map(url_port)
        .chain(p.listen_ports.iter().flatten().copied())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn normalize_bus_id(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    let parts: Vec<&str> = id.split(':').collect();
    match parts.as_slice() {
        [domain, bus, devfn] => match u32::from_str_radix(domain, 16) {
            Ok(d) => format!("{d:04x}:{bus}:{devfn}"),
            Err(_) => id.clone(),
        },
        [bus, devfn] => format!("0000:{bus}:{devfn}"),
        _ => id.clone(),
    }
}

/// Pairs devices: by UUID, then by PCI bus id (unless both UUIDs are known
/// and differ), never by name or index.
/// A device on each side (by position), and what paired them.
type DevicePair = (Option<usize>, Option<usize>, Option<&'static str>);

fn pair_devices(before: &[Device], after: &[Device]) -> Vec<DevicePair> {
    let mut taken_after = vec![false; after.len()];
    let mut pairs: Vec<(Option<usize>, Option<usize>, Option<&'static str>)> = Vec::new();
    let mut open_before = Vec::new();
    for (i, b) in before.iter().enumerate() {
        let found = b.uuid.as_ref().and_then(|u| {
            after
                .iter()
                .enumerate()
                .find(|(j, a)| !taken_after[*j] && a.uuid.as_ref() == Some(u))
                .map(|(j, _)| j)
        });
        match found {
            Some(j) => {
                taken_after[j] = true;
                pairs.push((Some(i), Some(j), Some("uuid")));
            }
            None => open_before.push(i),
        }
    }
    for i in open_before {
        let b = &before[i];
        let found = b.pci_bus_id.as_deref().map(normalize_bus_id).and_then(|bus| {
            after
                .iter()
                .enumerate()
                .find(|(j, a)| {
                    !taken_after[*j]
                        && a.pci_bus_id.as_deref().map(normalize_bus_id).as_deref() == Some(bus.as_str())
                        && !matches!((&b.uuid, &a.uuid), (Some(x), Some(y)) if x != y)
                })
                .map(|(j, _)| j)
        });
        match found {
            Some(j) => {
                taken_after[j] = true;
                pairs.push((Some(i), Some(j), Some("pci_bus_id")));
            }
            None => pairs.push((Some(i), None, None)),
        }
    }
    for (j, taken) in taken_after.iter().enumerate() {
        if !taken {
            pairs.push((None, Some(j), None));
        }
    }
    pairs
}

/// Start times are read as boot time (whole seconds in /proc/stat) plus
/// ticks, so they may read up to a second early.
const START_TIME_SLACK_S: f64 = 2.0;

/// True when `after` was already running when BEFORE was taken: then it
/// is not a restart of a process listed in BEFORE under another PID.
fn alive_at(after: &Process, before_taken_at: Option<f64>) -> bool {
    match (after.start_time.as_deref().and_then(unix_seconds), before_taken_at) {
        (Some(started), Some(taken)) => started < taken - START_TIME_SLACK_S,
        _ => false,
    }
}

/// Pairs processes (see the module's rules). Returns (before, after,
/// pairing, port).
#[allow(clippy::type_complexity)]
fn pair_processes(
    before: &Snapshot,
    after: &Snapshot,
) -> Vec<(Option<usize>, Option<usize>, Option<Pairing>, Option<u16>)> {
    let (b, a) = (&before.processes, &after.processes);
    let mut b_of_a: Vec<Option<usize>> = vec![None; a.len()];
    let mut pair_of_b: Vec<Option<(usize, Pairing, Option<u16>)>> = vec![None; b.len()];
    let before_at = unix_seconds(&before.taken_at);

    // 1. PID and start time; the PID alone where a start time is unknown
    //    and the names do not disagree.
    let mut by_pid: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, p) in a.iter().enumerate() {
        by_pid.entry(p.pid).or_default().push(j);
    }
    for (i, pb) in b.iter().enumerate() {
        let Some(candidates) = by_pid.get(&pb.pid) else {
            continue;
        };
        for &j in candidates {
            if b_of_a[j].is_some() {
                continue;
            }
            let pa = &a[j];
            let how = match (&pb.start_time, &pa.start_time) {
                (Some(x), Some(y)) if x == y => Some(Pairing::PidStartTime),
                (Some(_), Some(_)) => None,
                _ => match (&pb.name, &pa.name) {
                    (Some(x), Some(y)) if x != y => None,
                    _ => Some(Pairing::Pid),
                },
            };
            if let Some(how) = how {
                b_of_a[j] = Some(i);
                pair_of_b[i] = Some((j, how, None));
                break;
            }
        }
    }

    // 2. Name and listening port, when exactly one candidate each way.
    let b_ports: Vec<Vec<u16>> = b.iter().map(ports).collect();
    let a_ports: Vec<Vec<u16>> = a.iter().map(ports).collect();
    let port_candidates = |i: usize, b_of_a: &[Option<usize>]| -> Vec<(usize, u16)> {
        let pb = &b[i];
        let Some(name) = &pb.name else { return vec![] };
        a.iter()
            .enumerate()
            .filter(|(j, pa)| b_of_a[*j].is_none() && pa.name.as_ref() == Some(name) && !alive_at(pa, before_at))
            .filter_map(|(j, _)| b_ports[i].iter().find(|p| a_ports[j].contains(p)).map(|&p| (j, p)))
            .collect()
    };
    for i in 0..b.len() {
        if pair_of_b[i].is_some() || b_ports[i].is_empty() {
            continue;
        }
        let found = port_candidates(i, &b_of_a);
        if let [(j, port)] = found[..] {
            // And no other open BEFORE process claims the same one.
            let rivals = (0..b.len())
                .filter(|&k| k != i && pair_of_b[k].is_none() && !b_ports[k].is_empty())
                .any(|k| port_candidates(k, &b_of_a).iter().any(|&(jj, _)| jj == j));
            if !rivals {
                b_of_a[j] = Some(i);
                pair_of_b[i] = Some((j, Pairing::NamePort, Some(port)));
            }
        }
    }

    // 3. A name that is unique on each side (over the whole snapshot).
    let mut count_b: HashMap<&str, usize> = HashMap::new();
    for p in b {
        if let Some(n) = &p.name {
            *count_b.entry(n).or_default() += 1;
        }
    }
    let mut count_a: HashMap<&str, usize> = HashMap::new();
    for p in a {
        if let Some(n) = &p.name {
            *count_a.entry(n).or_default() += 1;
        }
    }
    for i in 0..b.len() {
        if pair_of_b[i].is_some() {
            continue;
        }
        let Some(name) = b[i].name.as_deref() else { continue };
        if count_b.get(name) != Some(&1) || count_a.get(name) != Some(&1) {
            continue;
        }
        let Some(j) = a.iter().position(|p| p.name.as_deref() == Some(name)) else {
            continue;
        };
        if b_of_a[j].is_none() && !alive_at(&a[j], before_at) {
            b_of_a[j] = Some(i);
            pair_of_b[i] = Some((j, Pairing::Name, None));
        }
    }

    let mut out: Vec<_> = pair_of_b
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            Some((j, how, port)) => (Some(i), Some(*j), Some(*how), *port),
            None => (Some(i), None, None, None),
        })
        .collect();
    out.extend(
        b_of_a
            .iter()
            .enumerate()
            .filter(|(_, i)| i.is_none())
            .map(|(j, _)| (None, Some(j), None, None)),
    );
    out
}

fn process_ref(p: &Process) -> ProcessRef {
    ProcessRef {
        pid: p.pid,
        start_time: p.start_time.clone(),
        name: p.name.clone(),
        ports: ports(p),
    }
}

fn device_ref(d: &Device) -> DeviceRef {
    DeviceRef {
        index: d.index,
        backend: d.backend.clone(),
        name: d.name.clone(),
        uuid: d.uuid.clone(),
        pci_bus_id: d.pci_bus_id.clone(),
    }
}

fn device_label(d: &Device) -> String {
    match &d.name {
        Some(n) => format!("GPU {} {n}", d.label()),
        None => format!("GPU {}", d.label()),
    }
}

/// Compares two snapshots. `before_file` and `after_file` only label the
/// sides.
pub fn diff(before: &Snapshot, after: &Snapshot, before_file: &str, after_file: &str) -> Diff {
    let device_pairs = pair_devices(&before.devices, &after.devices);
    let (devices, dev_b, dev_a) = diff_devices(before, after, &device_pairs);
    let label_of = |k: Option<usize>, side_b: Option<&GpuUsage>, side_a: Option<&GpuUsage>| -> String {
        if let Some(k) = k {
            let (i, j, _) = device_pairs[k];
            if let Some(j) = j {
                return device_label(&after.devices[j]);
            }
            if let Some(i) = i {
                return device_label(&before.devices[i]);
            }
        }
        let g = side_a.or(side_b).expect("one side");
        format!("GPU {} ({})", g.device, g.source)
    };

    // Processes.
    let mut processes = Vec::new();
    let mut models = Vec::new();
    for (i, j, how, port) in pair_processes(before, after) {
        let pb = i.map(|i| &before.processes[i]);
        let pa = j.map(|j| &after.processes[j]);
        let listed = (pb.is_some(), pa.is_some());
        // GPU entries, paired through the device pairing; entries on a
        // device that neither snapshot lists pair by source and index.
        #[derive(PartialEq, Eq, Hash, Clone, Copy)]
        enum DevKey<'a> {
            Paired(usize),
            Unlisted(&'a str, u32),
        }
        let mut slots: Vec<(DevKey, Option<&GpuUsage>, Option<&GpuUsage>)> = Vec::new();
        for g in pb.map(|p| p.gpu.as_slice()).unwrap_or_default() {
            let key = match dev_b.get(&(g.source.as_str(), g.device)) {
                Some(&k) => DevKey::Paired(k),
                None => DevKey::Unlisted(g.source.as_str(), g.device),
            };
            slots.push((key, Some(g), None));
        }
        for g in pa.map(|p| p.gpu.as_slice()).unwrap_or_default() {
            let key = match dev_a.get(&(g.source.as_str(), g.device)) {
                Some(&k) => DevKey::Paired(k),
                None => DevKey::Unlisted(g.source.as_str(), g.device),
            };
            match slots.iter_mut().find(|s| s.0 == key && s.2.is_none()) {
                Some(slot) => slot.2 = Some(g),
                None => slots.push((key, None, Some(g))),
            }
        }
        let gpu = slots
            .into_iter()
            .map(|(key, gb, ga)| {
                let k = match key {
                    DevKey::Paired(k) => Some(k),
                    DevKey::Unlisted(..) => None,
                };
                let listed = (gb.is_some(), ga.is_some());
                let field = |f: fn(&GpuUsage) -> Option<u64>| pick(gb.and_then(f), ga.and_then(f), bytes, listed);
                GpuDiff {
                    device: label_of(k, gb, ga),
                    device_before: gb.map(|g| g.device),
                    device_after: ga.map(|g| g.device),
                    vram_bytes: field(|g| g.vram_bytes),
                    spill_bytes: field(|g| g.spill_bytes),
                    paged_bytes: field(|g| g.paged_bytes),
                }
            })
            .collect();
        let index = processes.len();
        processes.push(ProcessDiff {
            before: pb.map(process_ref),
            after: pa.map(process_ref),
            paired_by: how,
            port,
            rss_bytes: pick(
                pb.and_then(|p| p.rss_bytes),
                pa.and_then(|p| p.rss_bytes),
                bytes,
                listed,
            ),
            cpu_percent: pick(
                pb.and_then(|p| p.cpu_percent),
                pa.and_then(|p| p.cpu_percent),
                percent,
                listed,
            ),
            gpu,
            runs_model: [pb, pa].iter().flatten().any(|p| !p.models.is_empty()),
        });
        models.extend(diff_models(index, pb, pa));
    }

    let processes = biggest_first(processes, &mut models);

    let hidden = count_hidden(&devices, &processes);

    Diff {
        before: SideInfo {
            file: before_file.to_string(),
            taken_at: before.taken_at.clone(),
        },
        after: SideInfo {
            file: after_file.to_string(),
            taken_at: after.taken_at.clone(),
        },
        elapsed_s: unix_seconds(&after.taken_at)
            .zip(unix_seconds(&before.taken_at))
            .map(|(a, b)| a - b),
        hide_below_bytes: HIDE_BELOW,
        devices,
        processes,
        models,
        hidden,
    }
}

/// Device index on each side, by (backend, index), to its pair.
type DeviceIndex<'a> = HashMap<(&'a str, u32), usize>;

/// The measured memory of each device pair, and where each side's devices
/// sit in `device_pairs`.
fn diff_devices<'a>(
    before: &'a Snapshot,
    after: &'a Snapshot,
    device_pairs: &[DevicePair],
) -> (Vec<DeviceDiff>, DeviceIndex<'a>, DeviceIndex<'a>) {
    let mut devices = Vec::new();
    // (backend, index) on each side -> index into device_pairs.
    let mut dev_b = DeviceIndex::new();
    let mut dev_a = DeviceIndex::new();
    for (k, &(i, j, how)) in device_pairs.iter().enumerate() {
        let db = i.map(|i| &before.devices[i]);
        let da = j.map(|j| &after.devices[j]);
        if let Some(d) = db {
            dev_b.insert((d.backend.as_str(), d.index), k);
        }
        if let Some(d) = da {
            dev_a.insert((d.backend.as_str(), d.index), k);
        }
        let listed = (db.is_some(), da.is_some());
        let field = |f: fn(&Device) -> Option<u64>| pick(db.and_then(f), da.and_then(f), bytes, listed);
        devices.push(DeviceDiff {
            before: db.map(device_ref),
            after: da.map(device_ref),
            paired_by: how,
            memory_total_bytes: field(|d| d.memory_total_bytes),
            memory_used_bytes: field(|d| d.memory_used_bytes),
            memory_free_bytes: field(|d| d.memory_free_bytes),
            memory_reserved_bytes: field(|d| d.memory_reserved_bytes),
            shared_memory_used_bytes: field(|d| d.shared_memory_used_bytes),
            health_news: super::health::news(db.and_then(|d| d.health.as_ref()), da.and_then(|d| d.health.as_ref())),
        });
    }
    (devices, dev_b, dev_a)
}

/// The biggest measured moves first; then what appeared or went. Models
/// follow their processes to the new places.
fn biggest_first(processes: Vec<ProcessDiff>, models: &mut [ModelDiff]) -> Vec<ProcessDiff> {
    let weight = |p: &ProcessDiff| -> u64 {
        let mut w = p.rss_bytes.delta.map(|d| d.unsigned_abs()).unwrap_or(0) / 4;
        for g in &p.gpu {
            w = w.max(g.vram_bytes.delta.map(|d| d.unsigned_abs()).unwrap_or(0));
            w = w.max(g.spill_bytes.delta.map(|d| d.unsigned_abs()).unwrap_or(0));
            if g.vram_bytes.delta.is_none() {
                w = w.max(g.vram_bytes.before.or(g.vram_bytes.after).unwrap_or(0));
            }
        }
        w
    };
    let mut order: Vec<usize> = (0..processes.len()).collect();
    order.sort_by_key(|&k| {
        (
            std::cmp::Reverse(weight(&processes[k])),
            processes[k]
                .after
                .as_ref()
                .or(processes[k].before.as_ref())
                .map(|r| r.pid),
        )
    });
    let mut new_index = vec![0; processes.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut slots: Vec<Option<ProcessDiff>> = processes.into_iter().map(Some).collect();
    let processes: Vec<ProcessDiff> = order.iter().map(|&k| slots[k].take().expect("each once")).collect();
    for m in models.iter_mut() {
        m.process = new_index[m.process];
    }
    models.sort_by_key(|m| m.process);
    processes
}

/// The moves under [`HIDE_BELOW`], and the devices and processes with
/// nothing shown, that the text leaves out.
fn count_hidden(devices: &[DeviceDiff], processes: &[ProcessDiff]) -> Hidden {
    let mut hidden = Hidden::default();
    for d in devices {
        let fields = [
            &d.memory_total_bytes,
            &d.memory_used_bytes,
            &d.memory_free_bytes,
            &d.memory_reserved_bytes,
            &d.shared_memory_used_bytes,
        ];
        hidden.moves += fields.iter().filter(|c| c.hidden_move()).count();
        if !device_shown(d) {
            hidden.devices += 1;
        }
    }
    for p in processes {
        hidden.moves += process_counters(p).iter().filter(|c| c.hidden_move()).count();
        if off_gpu(p) {
            hidden.off_gpu += 1;
        } else if !process_shown(p) {
            hidden.processes += 1;
        }
    }
    hidden
}

fn process_counters(p: &ProcessDiff) -> Vec<&Bytes> {
    let mut v = vec![&p.rss_bytes];
    for g in &p.gpu {
        v.extend([&g.vram_bytes, &g.spill_bytes, &g.paged_bytes]);
    }
    v
}

/// On no GPU on either side and running no model: RSS only.
fn off_gpu(p: &ProcessDiff) -> bool {
    p.gpu.is_empty() && !p.runs_model
}

/// A process is shown when it came, went or moved, unless it is
/// [`off_gpu`]: then it is only counted ([`Hidden::off_gpu`]).
pub fn process_shown(p: &ProcessDiff) -> bool {
    !off_gpu(p) && (p.before.is_none() || p.after.is_none() || process_counters(p).iter().any(|c| c.shown_bytes()))
}

pub fn device_shown(d: &DeviceDiff) -> bool {
    !d.health_news.is_empty()
        || d.before.is_none()
        || d.after.is_none()
        || [
            &d.memory_total_bytes,
            &d.memory_used_bytes,
            &d.memory_free_bytes,
            &d.memory_reserved_bytes,
            &d.shared_memory_used_bytes,
        ]
        .iter()
        .any(|c| c.shown_bytes())
}

/// Pairs a process's models by path, then by name, then the only model on
/// each side.
fn diff_models(process: usize, pb: Option<&Process>, pa: Option<&Process>) -> Vec<ModelDiff> {
    let mb: &[Model] = pb.map(|p| p.models.as_slice()).unwrap_or_default();
    let ma: &[Model] = pa.map(|p| p.models.as_slice()).unwrap_or_default();
    let mut taken = vec![false; ma.len()];
    let mut pairs: Vec<(Option<usize>, Option<usize>, Option<&'static str>)> = Vec::new();
    for (i, m) in mb.iter().enumerate() {
        let by_path = m.path.as_ref().and_then(|path| {
            ma.iter()
                .enumerate()
                .position(|(j, x)| !taken[j] && x.path.as_ref() == Some(path))
        });
        let found = by_path.map(|j| (j, "path")).or_else(|| {
            m.name.as_ref().and_then(|name| {
                ma.iter()
                    .enumerate()
                    .position(|(j, x)| !taken[j] && x.name.as_ref() == Some(name))
                    .map(|j| (j, "name"))
            })
        });
        match found {
            Some((j, how)) => {
                taken[j] = true;
                pairs.push((Some(i), Some(j), Some(how)));
            }
            None => pairs.push((Some(i), None, None)),
        }
    }
    // The only model left on each side of a process on both sides.
    let open_b: Vec<usize> = pairs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.1.is_none())
        .map(|(k, _)| k)
        .collect();
    let open_a: Vec<usize> = (0..ma.len()).filter(|&j| !taken[j]).collect();
    if let ([k], [j]) = (open_b.as_slice(), open_a.as_slice()) {
        pairs[*k].1 = Some(*j);
        pairs[*k].2 = Some("only_model");
        taken[*j] = true;
    }
    for (j, t) in taken.iter().enumerate() {
        if !t {
            pairs.push((None, Some(j), None));
        }
    }

    pairs
        .into_iter()
        .map(|(i, j, how)| {
            let b = i.map(|i| &mb[i]);
            let a = j.map(|j| &ma[j]);
            let listed = (b.is_some(), a.is_some());
            let est = |f: fn(&super::ModelEstimate) -> Option<u64>| {
                pick(
                    b.and_then(|m| m.estimate.as_ref()).and_then(f),
                    a.and_then(|m| m.estimate.as_ref()).and_then(f),
                    bytes,
                    listed,
                )
            };
            let rep = |f: fn(&super::ModelReported) -> Option<u64>| {
                pick(
                    b.and_then(|m| m.reported.as_ref()).and_then(f),
                    a.and_then(|m| m.reported.as_ref()).and_then(f),
                    bytes,
                    listed,
                )
            };
            let latest = a.or(b).expect("one side");
            ModelDiff {
                process,
                pid_before: b.and(pb.map(|p| p.pid)),
                pid_after: a.and(pa.map(|p| p.pid)),
                name: latest.name.clone(),
                path: latest.path.clone(),
                paired_by: how,
                context: pick(b.and_then(|m| m.context), a.and_then(|m| m.context), bytes, listed),
                slots_total: pick(
                    b.and_then(|m| m.slots_total.map(u64::from)),
                    a.and_then(|m| m.slots_total.map(u64::from)),
                    bytes,
                    listed,
                ),
                estimate: EstimateDiff {
                    weights_bytes: est(|e| e.weights_bytes),
                    kv_bytes: est(|e| e.kv_bytes),
                    kv_bytes_per_token: est(|e| e.kv_bytes_per_token),
                    recurrent_state_bytes: est(|e| e.recurrent_state_bytes),
                    kv_bytes_without_window: est(|e| e.kv_bytes_without_window),
                },
                reported: ReportedDiff {
                    weights_bytes: rep(|r| r.weights_bytes),
                    kv_bytes: rep(|r| r.kv_bytes),
                    compute_bytes: rep(|r| r.compute_bytes),
                    total_bytes: rep(|r| r.total_bytes),
                    device_bytes: rep(|r| r.device_bytes),
                    source_before: b.and_then(|m| m.reported.as_ref()).map(|r| r.source.clone()),
                    source_after: a.and_then(|m| m.reported.as_ref()).map(|r| r.source.clone()),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_urls_with_the_schemes_defaults() {
        assert_eq!(url_port("http://127.0.0.1:8080"), Some(8080));
        assert_eq!(url_port("http://127.0.0.1:8080/v1/models"), Some(8080));
        assert_eq!(url_port("http://[::1]:11434/api"), Some(11434));
        assert_eq!(url_port("http://localhost/"), Some(80));
        assert_eq!(url_port("https://user:pw@localhost"), Some(443));
        assert_eq!(url_port("localhost:80"), None);
    }

    #[test]
    fn bus_ids_compare_without_domain_width_or_case() {
        assert_eq!(normalize_bus_id("00000000:01:00.0"), "0000:01:00.0");
        assert_eq!(normalize_bus_id("0000:0A:00.0"), "0000:0a:00.0");
        assert_eq!(normalize_bus_id("01:00.0"), "0000:01:00.0");
    }

    #[test]
    fn changes_say_what_became_known_and_unknown() {
        assert_eq!(bytes(Some(10), Some(4)).delta, Some(-6));
        assert_eq!(bytes(Some(10), Some(4)).state, State::Shrank);
        assert_eq!(bytes(None, Some(4)).state, State::BecameKnown);
        assert_eq!(bytes(Some(4), None).state, State::BecameUnknown);
        assert_eq!(bytes(None, None).state, State::Unknown);
        assert_eq!(bytes(Some(0), Some(0)).state, State::Same);
        assert!(bytes(Some(0), Some(HIDE_BELOW)).shown_bytes());
        assert!(bytes(Some(0), Some(HIDE_BELOW - 1)).hidden_move());
    }
}
