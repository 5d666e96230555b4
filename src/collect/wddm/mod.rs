//! Windows GPU performance counters (WDDM): per-process GPU memory and engine
//! time for every API (Direct3D, Vulkan, OpenGL, CUDA), where NVML under WDDM
//! says "not available" for per-process memory.
//!
//! Everything here is plain Rust over counter values, so the Linux tests run
//! it on recorded dumps (tests/data/wddm/) and the WSL host bridge
//! (`collect::wsl`) reuses it for what the Windows side streams back. Only
//! [`pdh`] calls Windows.
//!
//! The counter sets (Microsoft, "GPU performance counters" in the WDDM 2.x
//! documentation; the same names Task Manager and System Informer read):
//! - `GPU Process Memory(pid_P_luid_0xHHHHHHHH_0xLLLLLLLL_phys_N)`: Local Usage
//!   (device-local, VRAM), Non Local Usage (system memory the GPU maps),
//!   Dedicated Usage, Shared Usage, Total Committed.
//! - `GPU Engine(pid_P_luid_..._phys_N_eng_E_engtype_T)`: Running Time, in
//!   100 ns units, cumulative.
//! - `GPU Adapter Memory(luid_..._phys_N)`: Dedicated Usage, Shared Usage,
//!   Total Committed.
//! - `GPU Local Adapter Memory(luid_..._phys_N_part_K)`: Local Usage.
//!
//! Why Local/Non Local and not Dedicated/Shared: Dedicated Usage counts every
//! allocation in a dedicated segment the process can reference, including
//! surfaces other processes own and share with it, so the compositor
//! (dwm.exe) shows several times what it keeps resident. Local Usage is what
//! is resident in the adapter's local memory for the process.

#[cfg(windows)]
pub mod pdh;

use crate::snapshot::{Device, GpuUsage, PciIds};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A WDDM adapter's locally unique identifier (two 32-bit halves, as the
/// counter instance names spell it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Luid {
    pub high: u32,
    pub low: u32,
}

impl fmt::Display for Luid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:08X}_0x{:08X}", self.high, self.low)
    }
}

/// A counter instance name, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The Windows process; None for adapter-wide instances.
    pub pid: Option<u32>,
    pub luid: Luid,
    /// The physical adapter within a linked (multi-GPU) adapter.
    pub phys: u32,
    pub eng: Option<u32>,
    /// The engine type, lowercased: `3d`, `compute_0`, `copy`,
    /// `videodecode`, `videoencode`, `cuda`, ...
    pub engtype: Option<String>,
    /// The memory partition (`GPU Local Adapter Memory`).
    pub part: Option<u32>,
    /// PDH numbers instances that share a name `name#1`, `name#2`, ...:
    /// several GPU contexts in one process (vmwp.exe hosts one per Linux
    /// process under WSL).
    pub dup: u32,
}

fn parse_hex_u32(s: &str) -> Option<u32> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

fn parse_dec_u32(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `pid_1234_luid_0x00000000_0x0000C6F5_phys_0_eng_3_engtype_3D`,
/// `luid_0x00000000_0x0000C6F5_phys_0` and
/// `luid_0x00000000_0x0000C6F5_phys_0_part_0`, in any case (Get-Counter
/// lowercases them, PDH does not), with an optional `#N` suffix.
pub fn parse_instance(name: &str) -> Option<Instance> {
    let (name, dup) = match name.rsplit_once('#') {
        Some((n, d)) => (n, parse_dec_u32(d)?),
        None => (name, 0),
    };
    if name.len() > 256 {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let tokens: Vec<&str> = lower.split('_').collect();
    let mut t = tokens.as_slice();
    let mut pid = None;
    if let ["pid", p, rest @ ..] = t {
        pid = Some(parse_dec_u32(p)?);
        t = rest;
    }
    let ["luid", high, low, "phys", phys, rest @ ..] = t else {
        return None;
    };
    let mut instance = Instance {
        pid,
        luid: Luid {
            high: parse_hex_u32(high)?,
            low: parse_hex_u32(low)?,
        },
        phys: parse_dec_u32(phys)?,
        eng: None,
        engtype: None,
        part: None,
        dup,
    };
    match rest {
        [] => {}
        // The engine type is the rest of the name: it can hold underscores
        // (`Compute_0`, `Graphics_1`).
        ["eng", eng, "engtype", engtype @ ..] if !engtype.is_empty() => {
            instance.eng = Some(parse_dec_u32(eng)?);
            let engtype = engtype.join("_");
            if engtype.is_empty() || engtype.len() > 64 {
                return None;
            }
            instance.engtype = Some(engtype);
        }
        ["part", part] => instance.part = Some(parse_dec_u32(part)?),
        _ => return None,
    }
    Some(instance)
}

/// The counter sets read, by their English names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CounterSet {
    Engine,
    ProcessMemory,
    AdapterMemory,
    LocalAdapterMemory,
}

impl CounterSet {
    pub const ALL: [CounterSet; 4] = [
        CounterSet::Engine,
        CounterSet::ProcessMemory,
        CounterSet::AdapterMemory,
        CounterSet::LocalAdapterMemory,
    ];

    pub fn english(self) -> &'static str {
        match self {
            CounterSet::Engine => "GPU Engine",
            CounterSet::ProcessMemory => "GPU Process Memory",
            CounterSet::AdapterMemory => "GPU Adapter Memory",
            CounterSet::LocalAdapterMemory => "GPU Local Adapter Memory",
        }
    }

    /// The counters of this set that are read.
    pub fn counters(self) -> &'static [Counter] {
        match self {
            CounterSet::Engine => &[Counter::RunningTime],
            CounterSet::ProcessMemory => &[
                Counter::LocalUsage,
                Counter::NonLocalUsage,
                Counter::DedicatedUsage,
                Counter::SharedUsage,
                Counter::TotalCommitted,
            ],
            CounterSet::AdapterMemory => &[Counter::DedicatedUsage, Counter::SharedUsage, Counter::TotalCommitted],
            CounterSet::LocalAdapterMemory => &[Counter::LocalUsage],
        }
    }

    fn from_name(name: &str) -> Option<CounterSet> {
        CounterSet::ALL
            .into_iter()
            .find(|s| s.english().eq_ignore_ascii_case(name))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Counter {
    RunningTime,
    LocalUsage,
    NonLocalUsage,
    DedicatedUsage,
    SharedUsage,
    TotalCommitted,
}

impl Counter {
    const ALL: [Counter; 6] = [
        Counter::RunningTime,
        Counter::LocalUsage,
        Counter::NonLocalUsage,
        Counter::DedicatedUsage,
        Counter::SharedUsage,
        Counter::TotalCommitted,
    ];

    pub fn english(self) -> &'static str {
        match self {
            Counter::RunningTime => "Running Time",
            Counter::LocalUsage => "Local Usage",
            Counter::NonLocalUsage => "Non Local Usage",
            Counter::DedicatedUsage => "Dedicated Usage",
            Counter::SharedUsage => "Shared Usage",
            Counter::TotalCommitted => "Total Committed",
        }
    }

    fn from_name(name: &str) -> Option<Counter> {
        Counter::ALL
            .into_iter()
            .find(|c| c.english().eq_ignore_ascii_case(name))
    }
}

/// One counter value of one instance.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterValue {
    pub set: CounterSet,
    pub counter: Counter,
    pub instance: Instance,
    /// Bytes for memory counters; 100 ns units for Running Time.
    pub value: u64,
}

/// Reads a counter path as Get-Counter prints it,
/// `\\host\gpu process memory(pid_1_luid_..._phys_0)\local usage`, with or
/// without the `\\host` part. Ok(None) for counter sets and counters this
/// module does not read (`Utilization Percentage`, another set).
pub fn parse_path(path: &str) -> Result<Option<(CounterSet, Instance, Counter)>, String> {
    let bad = || format!("not a counter path: {:?}", clip(path));
    let mut p = path.trim();
    if let Some(rest) = p.strip_prefix("\\\\") {
        // The machine name runs to the next backslash.
        p = &rest[rest.find('\\').ok_or_else(bad)?..];
    }
    let p = p.strip_prefix('\\').ok_or_else(bad)?;
    let open = p.find('(').ok_or_else(bad)?;
    let close = p.rfind(")\\").ok_or_else(bad)?;
    if close < open {
        return Err(bad());
    }
    let (set, instance, counter) = (&p[..open], &p[open + 1..close], &p[close + 2..]);
    let (Some(set), Some(counter)) = (CounterSet::from_name(set), Counter::from_name(counter)) else {
        return Ok(None);
    };
    if !set.counters().contains(&counter) {
        return Ok(None);
    }
    let instance =
        parse_instance(instance).ok_or_else(|| format!("not a GPU counter instance: {:?}", clip(instance)))?;
    Ok(Some((set, instance, counter)))
}

/// Reads one `PATH<TAB>VALUE` line (Get-Counter's Path and CookedValue).
pub fn parse_line(line: &str) -> Result<Option<CounterValue>, String> {
    let (path, value) = line
        .rsplit_once('\t')
        .ok_or_else(|| format!("no tab between path and value: {:?}", clip(line)))?;
    let Some((set, instance, counter)) = parse_path(path)? else {
        return Ok(None);
    };
    let value = parse_value(value).ok_or_else(|| format!("not a counter value: {:?}", clip(value)))?;
    Ok(Some(CounterValue {
        set,
        counter,
        instance,
        value,
    }))
}

/// A cooked counter value: a non-negative number, printed by PowerShell as
/// an integer or a double (`1.5E+09`).
fn parse_value(text: &str) -> Option<u64> {
    let v: f64 = text.trim().parse().ok()?;
    // Counters are never negative; `as` saturates at u64::MAX.
    (v.is_finite() && v >= 0.0).then_some(v.round() as u64)
}

/// At most 80 characters of outside input, for messages.
pub(crate) fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// A process's GPU context on one adapter: PDH instances of one process
/// that share a name are numbered (`#1`), and stay apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContextKey {
    pub pid: u32,
    pub luid: Luid,
    pub dup: u32,
}

/// One engine of one context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct EngineKey {
    context: ContextKey,
    phys: u32,
    eng: u32,
}

/// A process's memory counters on one adapter, summed over its physical
/// adapters. None: the counter was not in the reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessMemory {
    pub local: Option<u64>,
    pub non_local: Option<u64>,
    pub dedicated: Option<u64>,
    pub shared: Option<u64>,
    pub total_committed: Option<u64>,
}

/// An adapter's memory counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdapterMemory {
    /// `GPU Local Adapter Memory` Local Usage, summed over partitions.
    pub local: Option<u64>,
    pub dedicated: Option<u64>,
    pub shared: Option<u64>,
    pub total_committed: Option<u64>,
}

fn add(slot: &mut Option<u64>, value: u64) {
    *slot = Some(slot.unwrap_or(0).saturating_add(value));
}

/// Most instances one reading keeps: a machine has a few hundred GPU
/// processes with a few dozen engines each.
pub const MAX_INSTANCES: usize = 200_000;

/// Every counter value of one collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Milliseconds since the Unix epoch when the counters were collected.
    pub at_ms: u64,
    pub memory: BTreeMap<ContextKey, ProcessMemory>,
    engines: BTreeMap<EngineKey, (String, u64)>,
    pub adapters: BTreeMap<Luid, AdapterMemory>,
    /// Values left out because the reading was full.
    pub dropped: usize,
}

impl Reading {
    pub fn new(at_ms: u64) -> Reading {
        Reading {
            at_ms,
            ..Reading::default()
        }
    }

    pub fn add(&mut self, v: CounterValue) {
        if self.memory.len() + self.engines.len() + self.adapters.len() >= MAX_INSTANCES {
            self.dropped += 1;
            return;
        }
        let i = v.instance;
        let Some(pid) = i.pid else {
            let a = self.adapters.entry(i.luid).or_default();
            match (v.set, v.counter) {
                (CounterSet::LocalAdapterMemory, Counter::LocalUsage) => add(&mut a.local, v.value),
                (CounterSet::AdapterMemory, Counter::DedicatedUsage) => add(&mut a.dedicated, v.value),
                (CounterSet::AdapterMemory, Counter::SharedUsage) => add(&mut a.shared, v.value),
                (CounterSet::AdapterMemory, Counter::TotalCommitted) => add(&mut a.total_committed, v.value),
                _ => {}
            }
            return;
        };
        let context = ContextKey {
            pid,
            luid: i.luid,
            dup: i.dup,
        };
        match (v.set, i.eng, i.engtype) {
            (CounterSet::Engine, Some(eng), Some(engtype)) => {
                let key = EngineKey {
                    context,
                    phys: i.phys,
                    eng,
                };
                self.engines.insert(key, (engtype, v.value));
            }
            (CounterSet::ProcessMemory, None, None) => {
                let m = self.memory.entry(context).or_default();
                let slot = match v.counter {
                    Counter::LocalUsage => &mut m.local,
                    Counter::NonLocalUsage => &mut m.non_local,
                    Counter::DedicatedUsage => &mut m.dedicated,
                    Counter::SharedUsage => &mut m.shared,
                    Counter::TotalCommitted => &mut m.total_committed,
                    Counter::RunningTime => return,
                };
                add(slot, v.value);
            }
            _ => {}
        }
    }

    /// Every context the reading has memory or engine time for.
    pub fn contexts(&self) -> Vec<ContextKey> {
        let mut all: Vec<ContextKey> = self.memory.keys().copied().collect();
        all.extend(self.engines.keys().map(|k| k.context));
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Every adapter LUID the reading names, in order, once each.
    pub fn luids(&self) -> Vec<Luid> {
        let mut all: Vec<Luid> = self.adapters.keys().copied().collect();
        all.extend(self.memory.keys().map(|k| k.luid));
        all.extend(self.engines.keys().map(|k| k.context.luid));
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// A process's memory on one adapter as gputaskman shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    pub vram: Option<u64>,
    pub spill: Option<u64>,
    /// Total Committed - Local - Non Local, floored at 0: committed memory
    /// resident nowhere the GPU can reach now. An estimate of
    /// non-residency, not proof of paging.
    pub paged: Option<u64>,
    /// VRAM and spill are Dedicated and Shared Usage: this Windows has no
    /// Local/Non Local counters.
    pub fallback: bool,
}

/// Local Usage is VRAM and Non Local Usage spill; Dedicated/Shared Usage
/// stand in only where both are missing (older WDDM), and say so.
pub fn split(m: &ProcessMemory) -> Split {
    if m.local.is_some() || m.non_local.is_some() {
        let paged = match (m.total_committed, m.local, m.non_local) {
            (Some(t), Some(l), Some(n)) => Some(t.saturating_sub(l.saturating_add(n))),
            _ => None,
        };
        return Split {
            vram: m.local,
            spill: m.non_local,
            paged,
            fallback: false,
        };
    }
    Split {
        vram: m.dedicated,
        spill: m.shared,
        paged: None,
        fallback: m.dedicated.is_some() || m.shared.is_some(),
    }
}

/// The contexts whose key may name another context now: every surviving
/// dup of a (pid, LUID) one of whose dups vanished since `before`.
pub fn renumbered(before: &BTreeSet<ContextKey>, now: &BTreeSet<ContextKey>) -> BTreeSet<ContextKey> {
    let gone: BTreeSet<(u32, Luid)> = before
        .iter()
        .filter(|c| !now.contains(c))
        .map(|c| (c.pid, c.luid))
        .collect();
    now.iter()
        .filter(|c| gone.contains(&(c.pid, c.luid)))
        .copied()
        .collect()
}

/// Engine busy percent from Running Time deltas between two readings.
#[derive(Debug, Default)]
pub struct EngineClock {
    previous: Option<Previous>,
    /// The last answer: a reading seen again (the bridge has not sent a new
    /// one yet) gives it again instead of an empty window.
    last: BTreeMap<ContextKey, BTreeMap<String, u32>>,
}

impl EngineClock {
    /// Per context, per engine type: the busiest engine of that type over
    /// the time since the previous reading (Task Manager shows the same).
    /// Empty on the first reading: busy time needs two.
    pub fn percents(&mut self, reading: &Reading) -> BTreeMap<ContextKey, BTreeMap<String, u32>> {
        if self.previous.as_ref().is_some_and(|p| p.at_ms == reading.at_ms) {
            return self.last.clone();
        }
        let now = Previous {
            at_ms: reading.at_ms,
            engines: reading.engines.iter().map(|(k, (_, t))| (*k, *t)).collect(),
            contexts: reading.contexts().into_iter().collect(),
        };
        let previous = self.previous.replace(now);
        self.last = self.compute(reading, previous);
        self.last.clone()
    }

    fn compute(&self, reading: &Reading, previous: Option<Previous>) -> BTreeMap<ContextKey, BTreeMap<String, u32>> {
        let mut out: BTreeMap<ContextKey, BTreeMap<String, u32>> = BTreeMap::new();
        let Some(Previous {
            at_ms: before_ms,
            engines: before,
            contexts: before_contexts,
        }) = previous
        else {
            return out;
        };
        // A dup gone: the survivors' keys may name other contexts now, so
        // their baselines are not theirs. No figure this time.
        let now_contexts: BTreeSet<ContextKey> = reading.contexts().into_iter().collect();
        let shifted = renumbered(&before_contexts, &now_contexts);
        // Running Time is in 100 ns units: 10_000 per millisecond.
        let window = reading.at_ms.saturating_sub(before_ms).saturating_mul(10_000);
        if window == 0 {
            return out;
        }
        for (key, (engtype, time)) in &reading.engines {
            if shifted.contains(&key.context) {
                continue;
            }
            let busy = match before.get(key) {
                // A counter that went backwards was reset (a new context under
                // an old name): no figure this time.
                Some(&b) if *time >= b => time - b,
                Some(_) => continue,
                // A context new since the previous reading started inside the
                // window: all its engine time is in it.
                None if !before_contexts.contains(&key.context) => *time,
                // An engine missing from a context that was there: its time
                // may predate the window (the counter set lagged). No figure.
                None => continue,
            };
            let percent = ((busy as f64 / window as f64) * 100.0).round().min(100.0) as u32;
            let slot = out.entry(key.context).or_default().entry(engtype.clone()).or_insert(0);
            *slot = (*slot).max(percent);
        }
        out
    }
}

/// The reading engine percentages are measured against.
#[derive(Debug)]
struct Previous {
    at_ms: u64,
    engines: BTreeMap<EngineKey, u64>,
    contexts: BTreeSet<ContextKey>,
}

/// What tells an adapter from the others, to find its device by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKey {
    /// Where it sits on the PCI bus: D3DKMTQueryAdapterInfo's
    /// KMTQAITYPE_ADAPTERADDRESS (bus, device, function), or the WSL
    /// bridge's `adapter` line. One card has one.
    Address { bus: u32, device: u32, function: u32 },
    /// What it is: DXGI_ADAPTER_DESC1's VendorId, DeviceId and SubSysId
    /// (Microsoft Learn, IDXGIAdapter1::GetDesc1), where no address is
    /// known. Two cards of one model and board share them.
    Ids(PciIds),
}

impl AdapterKey {
    /// The device's key of the same kind as this one, if it has one.
    fn of(&self, d: &Device) -> Option<AdapterKey> {
        match self {
            AdapterKey::Address { .. } => {
                let (bus, device, function) = d.pci_bus_id.as_deref().and_then(parse_pci_bus_id)?;
                Some(AdapterKey::Address { bus, device, function })
            }
            AdapterKey::Ids(_) => d.pci_ids.map(AdapterKey::Ids),
        }
    }
}

impl fmt::Display for AdapterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdapterKey::Address { bus, device, function } => {
                write!(f, "PCI address {bus:02x}:{device:02x}.{function:x}")
            }
            AdapterKey::Ids(ids) => write!(f, "PCI ids {ids}"),
        }
    }
}

/// An adapter the counters may name, by LUID, and what tells it apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adapter {
    pub luid: Luid,
    pub key: AdapterKey,
}

impl Adapter {
    /// An adapter at this PCI address (D3DKMT, the WSL bridge).
    pub fn at(luid: Luid, bus: u32, device: u32, function: u32) -> Adapter {
        Adapter {
            luid,
            key: AdapterKey::Address { bus, device, function },
        }
    }
}

/// Bus, device and function of an NVML PCI bus id, `00000000:01:00.0`.
pub fn parse_pci_bus_id(id: &str) -> Option<(u32, u32, u32)> {
    let mut parts = id.trim().rsplitn(3, ':');
    let dev_fn = parts.next()?;
    let bus = parts.next()?;
    let (dev, func) = dev_fn.split_once('.')?;
    let hex = |s: &str| (!s.is_empty() && s.len() <= 8).then(|| u32::from_str_radix(s, 16).ok())?;
    Some((hex(bus)?, hex(dev)?, hex(func)?))
}

/// Which device each adapter LUID is, and why the others are none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matched {
    pub luids: BTreeMap<Luid, u32>,
    /// Adapters left unmatched because their key is not one device's and
    /// one adapter's alone: per LUID, why.
    pub ambiguous: BTreeMap<Luid, String>,
}

/// Which device each adapter LUID is. A LUID names one adapter and nothing
/// else, and names are never compared: an adapter is a device when its key
/// (PCI address, else PCI ids) is that device's and no other device's or
/// adapter's. Two cards of one model have the same ids, so by ids they
/// stay apart rather than being guessed; a bus address two devices share
/// (NVML domains this module ignores) matches neither.
pub fn match_devices(devices: &[Device], adapters: &[Adapter]) -> Matched {
    let mut out = Matched::default();
    for a in adapters {
        let mut found = devices.iter().filter(|d| a.key.of(d) == Some(a.key));
        let (first, more) = (found.next(), found.count());
        let twins = adapters.iter().filter(|b| b.key == a.key).count();
        match first {
            Some(d) if more == 0 && twins == 1 => {
                out.luids.insert(a.luid, d.index);
            }
            None => {}
            Some(_) => {
                let n = |count: usize, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
                let why = format!("{} and {} share {}", n(twins, "adapter"), n(more + 1, "device"), a.key);
                let why = match a.key {
                    AdapterKey::Ids(_) => format!(
                        "{why}, so DXGI cannot tell them apart and none is matched (D3DKMTQueryAdapterInfo's PCI address is needed)"
                    ),
                    AdapterKey::Address { .. } => format!("{why}: none is matched"),
                };
                out.ambiguous.insert(a.luid, why);
            }
        }
    }
    out
}

/// A process's usage on one device, from the counters.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextUsage {
    pub context: ContextKey,
    pub usage: GpuUsage,
    pub notes: Vec<String>,
}

/// What one reading says, on devices that already exist and new ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributed {
    /// Adapters no existing device matched, as devices of their own.
    pub devices: Vec<Device>,
    /// Their LUIDs and indexes.
    pub adapters: BTreeMap<Luid, u32>,
    pub contexts: Vec<ContextUsage>,
}

impl Attributed {
    /// Says on each adapter that became a device of its own why no device
    /// matched it, where the match knows (a key several share).
    pub fn explain(&mut self, matched: &Matched) {
        for (luid, index) in &self.adapters {
            let (Some(why), Some(d)) = (
                matched.ambiguous.get(luid),
                self.devices.iter_mut().find(|d| d.index == *index),
            ) else {
                continue;
            };
            d.notes.push(format!("adapter LUID {luid} is not matched: {why}"));
        }
    }
}

/// Turns a reading into per-context usage on devices. Adapters in `luids`
/// are the existing devices (whose totals stay the backend's own; only the
/// shared memory NVML cannot see is filled in); the others become devices
/// numbered from `index_base`. `source` names the backend (`wddm`,
/// `wsl-host`). `complete`: every counter was read and none dropped (a new
/// device's process list says so only then).
pub fn attribute(
    reading: &Reading,
    engines: &BTreeMap<ContextKey, BTreeMap<String, u32>>,
    luids: &BTreeMap<Luid, u32>,
    existing: &mut [Device],
    index_base: u32,
    source: &str,
    complete: bool,
) -> Attributed {
    let mut out = Attributed::default();
    let mut extra: BTreeMap<Luid, u32> = BTreeMap::new();
    let contexts = reading.contexts();
    let holds_memory = |luid: &Luid| {
        reading
            .memory
            .iter()
            .any(|(k, m)| k.luid == *luid && split(m).vram.unwrap_or(0) > 0)
    };
    for luid in reading.luids() {
        let memory = reading.adapters.get(&luid).copied().unwrap_or_default();
        if let Some(&index) = luids.get(&luid) {
            if let Some(d) = existing.iter_mut().find(|d| d.index == index) {
                d.shared_memory_used_bytes = d.shared_memory_used_bytes.or(memory.shared);
            }
            continue;
        }
        // Software adapters (Microsoft Basic Render Driver) hold no local
        // memory: they are not devices worth a row.
        if memory.local.or(memory.dedicated).unwrap_or(0) == 0 && !holds_memory(&luid) {
            continue;
        }
        let index = index_base + extra.len() as u32;
        extra.insert(luid, index);
        out.devices.push(Device {
            index,
            backend: source.to_string(),
            vendor: "unknown".into(),
            name: Some(format!("WDDM adapter {luid}")),
            memory_used_bytes: memory.local.or(memory.dedicated),
            shared_memory_used_bytes: memory.shared,
            process_list_complete: complete && reading.dropped == 0,
            notes: vec![format!(
                "adapter LUID {luid} matched no {} device by PCI address or ids: its totals are the Windows counters' (Local Usage, else Dedicated Usage); the memory size is unknown to them",
                if luids.is_empty() && existing.is_empty() { "other" } else { "NVML" }
            )],
            ..Device::default()
        });
    }
    out.adapters = extra;
    for context in contexts {
        let Some(&device) = luids.get(&context.luid).or_else(|| out.adapters.get(&context.luid)) else {
            continue;
        };
        let memory = reading.memory.get(&context).copied().unwrap_or_default();
        let s = split(&memory);
        let mut notes = Vec::new();
        if s.fallback {
            notes.push(format!(
                "GPU {device}: VRAM and spill are WDDM Dedicated and Shared Usage (this Windows has no Local/Non Local Usage counters): they count surfaces shared with other processes too"
            ));
        }
        out.contexts.push(ContextUsage {
            context,
            usage: GpuUsage {
                device,
                vram_bytes: s.vram,
                spill_bytes: s.spill,
                paged_bytes: s.paged,
                source: source.to_string(),
                pairing: None,
                contexts: Vec::new(),
                engines: engines.get(&context).cloned().unwrap_or_default(),
            },
            notes,
        });
    }
    out
}

/// Notes by Windows PID.
pub type Notes = BTreeMap<u32, Vec<String>>;

/// One row per process and device: its contexts on the device summed, and
/// each process's notes. A byte figure is summed only when every context
/// has it: a known part plus an unknown part is unknown, not a measured
/// total. Engines take the busiest context's figure.
#[cfg_attr(not(windows), allow(dead_code))]
pub fn per_process(contexts: Vec<ContextUsage>) -> (Vec<(u32, GpuUsage)>, Notes) {
    let mut notes: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut by_pid: BTreeMap<(u32, u32), GpuUsage> = BTreeMap::new();
    for c in contexts {
        notes.entry(c.context.pid).or_default().extend(c.notes);
        let key = (c.context.pid, c.usage.device);
        match by_pid.get_mut(&key) {
            None => {
                by_pid.insert(key, c.usage);
            }
            Some(u) => {
                let sum = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_add(b?));
                u.vram_bytes = sum(u.vram_bytes, c.usage.vram_bytes);
                u.spill_bytes = sum(u.spill_bytes, c.usage.spill_bytes);
                u.paged_bytes = sum(u.paged_bytes, c.usage.paged_bytes);
                for (engine, p) in c.usage.engines {
                    let slot = u.engines.entry(engine).or_insert(0);
                    *slot = (*slot).max(p);
                }
            }
        }
    }
    (by_pid.into_iter().map(|((pid, _), u)| (pid, u)).collect(), notes)
}

/// Whether a reading names an adapter LUID the address table lacks (the
/// table failed, or an adapter was reset or added): time to read it again.
#[cfg_attr(not(windows), allow(dead_code))]
pub fn unknown_luid(reading: &Reading, adapters: &[Adapter]) -> bool {
    reading.luids().iter().any(|l| !adapters.iter().any(|a| a.luid == *l))
}

/// The adapter table and the call that listed it.
#[cfg_attr(not(windows), allow(dead_code))]
pub type AdapterTable = Result<(Vec<Adapter>, String), String>;

/// The adapter table from D3DKMT's answer, else from DXGI: D3DKMT's PCI
/// addresses when it gives any, unchanged; when it fails, or gives none
/// (D3DKMTQueryAdapterInfo failed for every adapter), DXGI's PCI ids, with
/// the reason D3DKMT gave none in the backend line.
#[cfg_attr(not(windows), allow(dead_code))]
pub fn choose_adapter_table(
    d3dkmt: Result<(Vec<Adapter>, &'static str), String>,
    dxgi: impl FnOnce() -> Result<Vec<Adapter>, String>,
) -> AdapterTable {
    let why = match d3dkmt {
        Ok((adapters, how)) if !adapters.is_empty() => return Ok((adapters, how.to_string())),
        Ok((_, how)) => format!("D3DKMTQueryAdapterInfo gave no adapter's PCI address (adapters from {how})"),
        Err(why) => why,
    };
    match dxgi() {
        Ok(adapters) => Ok((adapters, format!("DXGI PCI ids ({why})"))),
        Err(dxgi) => Err(format!("{why}; DXGI lists no adapters: {dxgi}")),
    }
}

/// Windows books CUDA kernels of a process on its adapter's 3D engine on
/// many drivers (Task Manager shows them under "3D", or under "Cuda" when
/// that graph is picked). Said where it happens, so "3D" is not read as
/// graphics.
pub fn cuda_on_3d_note(runtimes: &[String], usage: &GpuUsage) -> Option<String> {
    let cuda = runtimes.iter().any(|r| r == "cuda" || r == "cudart");
    let busy_3d = usage.engines.get("3d").is_some_and(|&p| p > 0);
    let named_cuda = usage
        .engines
        .iter()
        .any(|(k, &p)| (k == "cuda" || k.starts_with("compute")) && p > 0);
    (cuda && busy_3d && !named_cuda).then(|| {
        format!(
            "GPU {}: this CUDA process's kernels are booked by Windows on the 3D engine: its 3D figure is compute, not graphics",
            usage.device
        )
    })
}

#[cfg(test)]
mod tests;
