//! DRM clients from the fdinfo readings. A client is a kernel `struct
//! drm_file`, keyed by (device, `drm-client-id`); several fds or processes
//! reaching one client count it once. Its bytes go to a process only when
//! that process alone holds it, and then only the part no other client also
//! counts (held less `drm-shared-*`); the rest is named in notes, never
//! summed. Engine percentages come from two readings of the busy counters.

use super::fdinfo;
use super::holders::DrmFd;
use super::sysfs::{self, DrmDevice};
use crate::collect::nvml::GpuProcess;
use crate::snapshot::GpuUsage;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

/// A client: the kernel's `struct drm_file`, named by device and
/// `drm-client-id` (or, without one, by the fd that reaches it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Ident {
    Id(u64),
    Fd(u32, u32),
}

pub(super) type ClientKey = (String, Ident);

/// The last counter values seen for one engine of one client, each with
/// the time it was read. A counter that goes backwards keeps the larger,
/// older value until the driver catches up.
#[derive(Debug, Clone, Copy, Default)]
struct EngineMark {
    busy_ns: Option<(u64, Duration)>,
    cycles: Option<(u64, u64)>,
}

/// Groups the readings by client: one entry per (device, client id),
/// with every process that reaches it.
pub(super) fn group(
    readings: Vec<(u32, DrmFd, fdinfo::Fdinfo)>,
    devices: &[DrmDevice],
    covered_nodes: &HashSet<String>,
    notes: &mut BTreeMap<u32, Vec<String>>,
) -> BTreeMap<ClientKey, Client> {
    let mut by_node: HashMap<&str, usize> = HashMap::new();
    let mut by_pci: HashMap<&str, usize> = HashMap::new();
    for (i, d) in devices.iter().enumerate() {
        for n in d.cards.iter().chain(&d.renders) {
            by_node.insert(n, i);
        }
        if let Some(p) = &d.pci {
            by_pci.insert(p, i);
        }
    }
    let mut clients: BTreeMap<ClientKey, Client> = BTreeMap::new();
    for (pid, fd, info) in readings {
        if covered_nodes.contains(&fd.node) && info.pdev.is_none() {
            continue;
        }
        // drm-pdev names the device in every mount namespace; the node
        // name is the fallback (it can differ inside a container).
        let device = match &info.pdev {
            Some(p) => by_pci.get(sysfs::normalize_pci(p).as_str()).copied(),
            None => by_node.get(fd.node.as_str()).copied(),
        };
        let Some(device) = device else {
            continue;
        };
        if info.malformed > 0 || info.truncated {
            notes.entry(pid).or_default().push(format!(
                "fdinfo of fd {} had {} unreadable line{}{}",
                fd.fd,
                info.malformed,
                if info.malformed == 1 { "" } else { "s" },
                if info.truncated {
                    " and was cut at the size limit"
                } else {
                    ""
                }
            ));
        }
        let ident = match info.client_id {
            Some(id) => Ident::Id(id),
            None => Ident::Fd(pid, fd.fd),
        };
        let key = (devices[device].key.clone(), ident);
        let client = clients.entry(key).or_insert_with(|| Client {
            device,
            info,
            holders: BTreeSet::new(),
        });
        client.holders.insert(pid);
    }
    clients
}

/// The last engine counters of each open client, for the next rates.
#[derive(Default)]
pub(super) struct EngineMarks(HashMap<ClientKey, BTreeMap<String, EngineMark>>);

impl EngineMarks {
    /// Engine busy percent per client since the previous sample. A client
    /// seen for the first time has none yet (`None`).
    pub(super) fn rates(&mut self, clients: &BTreeMap<ClientKey, Client>, now: Duration) -> HashMap<ClientKey, Rates> {
        let mut out = HashMap::new();
        let mut marks = HashMap::new();
        for (key, client) in clients {
            let prev = self.0.remove(key);
            let mut current: BTreeMap<String, EngineMark> = BTreeMap::new();
            let mut rates = Rates::default();
            let mut complete = prev.is_some();
            for (name, engine) in &client.info.engines {
                let before = prev.as_ref().and_then(|p| p.get(name)).copied().unwrap_or_default();
                let (mark, pct) = engine_rate(engine, before, now);
                current.insert(name.clone(), mark);
                match pct {
                    Some(p) => {
                        if p > 100.0 {
                            rates.clamped.push((name.clone(), p));
                        }
                        rates.engines.insert(name.clone(), p.min(100.0));
                    }
                    None => complete &= !(engine.busy_ns.is_some() || engine.cycles.is_some()),
                }
            }
            rates.known = complete && !client.info.engines.is_empty();
            out.insert(key.clone(), rates);
            marks.insert(key.clone(), current);
        }
        // Clients not seen now are closed: their marks go.
        self.0 = marks;
        out
    }
}

/// The per-process entries of one device, and the notes that go with
/// them.
pub(super) fn attribute(
    (dev, device, index): (&DrmDevice, usize, u32),
    clients: &BTreeMap<ClientKey, Client>,
    rates: &HashMap<ClientKey, Rates>,
    uses_kfd: &dyn Fn(u32) -> bool,
    notes: &mut BTreeMap<u32, Vec<String>>,
) -> Vec<GpuProcess> {
    let where_ = dev.pci.clone().unwrap_or_else(|| dev.key.clone());
    let mut per_pid: BTreeMap<u32, Acc> = BTreeMap::new();
    for (key, client) in clients.iter().filter(|(_, c)| c.device == device) {
        let (vram, spill, paged, shared) = split_regions(&client.info);
        let id = match &key.1 {
            Ident::Id(id) => format!("client {id}"),
            Ident::Fd(pid, fd) => format!("the client of PID {pid} fd {fd}"),
        };
        let rate = rates.get(key);
        if client.holders.len() == 1 {
            let pid = *client.holders.iter().next().expect("one holder");
            let acc = per_pid.entry(pid).or_default();
            acc.vram = add(acc.vram, vram.private);
            acc.spill = add(acc.spill, spill.private);
            acc.paged = add(acc.paged, paged.private);
            if shared > 0 {
                notes.entry(pid).or_default().push(format!(
                    "{} of DRM buffers on {where_} ({id}) are shared with other clients (dma-buf): counted to none",
                    crate::units::bytes(Some(shared))
                ));
            }
            match rate {
                Some(r) if r.known => {
                    for (engine, pct) in &r.engines {
                        *acc.engines.entry(engine.clone()).or_default() += pct;
                    }
                    for (engine, pct) in &r.clamped {
                        notes.entry(pid).or_default().push(format!(
                            "engine {engine} on {where_} ({id}) measured {pct:.0}% over the sample: shown as 100%"
                        ));
                    }
                }
                Some(r) if !client.info.engines.is_empty() || !r.engines.is_empty() => acc.engines_unknown = true,
                _ => {}
            }
        } else {
            let holders: Vec<String> = client.holders.iter().map(u32::to_string).collect();
            let mut held = Vec::new();
            for (label, bytes) in [("VRAM", vram.held), ("GTT/system", spill.held), ("CPU", paged.held)] {
                if let Some(b) = bytes.filter(|b| *b > 0) {
                    held.push(format!("{label} {}", crate::units::bytes(Some(b))));
                }
            }
            let held = if held.is_empty() {
                "no memory".to_string()
            } else {
                held.join(", ")
            };
            for pid in &client.holders {
                let acc = per_pid.entry(*pid).or_default();
                acc.engines_unknown |= !client.info.engines.is_empty();
                notes.entry(*pid).or_default().push(format!(
                    "DRM {id} on {where_} ({held}) is held jointly by PIDs {} (an inherited or passed fd): counted to none of them",
                    holders.join(", ")
                ));
            }
        }
    }
    let mut out = Vec::new();
    for (pid, acc) in per_pid {
        if dev.integrated && acc.spill.unwrap_or(0) >= 64 << 20 && acc.spill > acc.vram.or(Some(0)) {
            notes.entry(pid).or_default().push(format!(
                "{} of GTT/system memory on integrated GPU {where_} is shown as Spill: system RAM the GPU maps, where an integrated GPU keeps its data (VRAM shows only the small carve-out)",
                crate::units::bytes(acc.spill)
            ));
        }
        let kfd = uses_kfd(pid);
        if kfd && dev.driver.as_deref() == Some("amdgpu") {
            notes.entry(pid).or_default().push(
                "uses ROCm/HIP (/dev/kfd): its compute queues run outside DRM, so their work is missing from the engine %".into(),
            );
        }
        let engines = if acc.engines_unknown {
            BTreeMap::new()
        } else {
            acc.engines
                .into_iter()
                .map(|(name, pct)| (name, pct.clamp(0.0, 100.0).round() as u32))
                .collect()
        };
        out.push(GpuProcess {
            pid,
            usage: GpuUsage {
                device: index,
                vram_bytes: acc.vram,
                spill_bytes: acc.spill,
                paged_bytes: acc.paged,
                source: "drm".into(),
                // The fd's owner itself: nothing was paired.
                pairing: None,
                contexts: Vec::new(),
                engines,
            },
        });
    }
    out
}

#[derive(Debug)]
pub(super) struct Client {
    pub(super) device: usize,
    info: fdinfo::Fdinfo,
    holders: BTreeSet<u32>,
}

#[derive(Debug, Default)]
pub(super) struct Rates {
    /// Percent per engine (clamped to 100).
    engines: BTreeMap<String, f64>,
    /// Engines whose rate came out over 100%, with the rate.
    clamped: Vec<(String, f64)>,
    /// Every engine with counters had a previous reading.
    known: bool,
}

#[derive(Debug, Default)]
struct Acc {
    vram: Option<u64>,
    spill: Option<u64>,
    paged: Option<u64>,
    engines: BTreeMap<String, f64>,
    engines_unknown: bool,
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

/// Where a memory region's bytes belong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Device-local memory.
    Vram,
    /// System RAM the GPU maps (GTT, i915/xe system, SoC memory).
    Spill,
    /// amdgpu's CPU domain: out of the GPU's reach.
    Paged,
    /// Stolen memory, amdgpu's GDS/GWS/OA/doorbells: not summed.
    Other,
}

pub(super) fn class(region: &str) -> Class {
    let base = region.trim_end_matches(|c: char| c.is_ascii_digit());
    match base {
        "vram" | "local" | "lmem" => Class::Vram,
        "gtt" | "system" | "smem" | "memory" => Class::Spill,
        "cpu" => Class::Paged,
        _ => Class::Other,
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Bytes {
    held: Option<u64>,
    private: Option<u64>,
}

/// VRAM, spill and paged bytes of a client (held, and private), and the
/// bytes it shares with other clients.
fn split_regions(info: &fdinfo::Fdinfo) -> (Bytes, Bytes, Bytes, u64) {
    let (mut vram, mut spill, mut paged) = (Bytes::default(), Bytes::default(), Bytes::default());
    let mut shared = 0u64;
    for (name, region) in &info.regions {
        let slot = match class(name) {
            Class::Vram => &mut vram,
            Class::Spill => &mut spill,
            Class::Paged => &mut paged,
            Class::Other => continue,
        };
        slot.held = add(slot.held, region.held());
        slot.private = add(slot.private, region.private());
        shared = shared.saturating_add(region.shared.unwrap_or(0));
    }
    (vram, spill, paged, shared)
}

/// One engine's busy percent since `before`, and the marks to keep. Busy
/// nanoseconds over wall time when the driver gives them; else busy cycles
/// over total cycles; else busy cycles over the top frequency. Divided by
/// the engine count. A counter that went backwards keeps the older, larger
/// value (the spec asks for that) and gives no rate this time.
fn engine_rate(engine: &fdinfo::Engine, before: EngineMark, now: Duration) -> (EngineMark, Option<f64>) {
    let capacity = engine.capacity.unwrap_or(1).max(1) as f64;
    let mut mark = before;
    let mut pct = None;
    if let Some(busy) = engine.busy_ns {
        match before.busy_ns {
            // Backwards: no progress past the larger value yet.
            Some((prev, _)) if busy < prev => pct = Some(0.0),
            Some((prev, at)) => {
                let wall = now.saturating_sub(at).as_nanos() as f64;
                if wall > 0.0 {
                    pct = Some((busy - prev) as f64 / wall / capacity * 100.0);
                    mark.busy_ns = Some((busy, now));
                }
            }
            None => mark.busy_ns = Some((busy, now)),
        }
        return (mark, pct);
    }
    if let Some(cycles) = engine.cycles {
        // The second figure is the engine's clock in cycles (total-cycles)
        // or, with only maxfreq, wall time at the top frequency.
        let clock = match (engine.total_cycles, engine.maxfreq_hz) {
            (Some(total), _) => Some(total),
            (None, Some(hz)) => Some((now.as_secs_f64() * hz as f64) as u64),
            (None, None) => None,
        };
        let Some(clock) = clock else {
            return (mark, None);
        };
        match before.cycles {
            // The engine clock went backwards (a reset): start again.
            Some((_, prev_clock)) if clock < prev_clock => mark.cycles = Some((cycles, clock)),
            Some((prev, _)) if cycles < prev => pct = Some(0.0),
            Some((prev, prev_clock)) => {
                if clock > prev_clock {
                    pct = Some((cycles - prev) as f64 / (clock - prev_clock) as f64 / capacity * 100.0);
                    mark.cycles = Some((cycles, clock));
                }
            }
            None => mark.cycles = Some((cycles, clock)),
        }
    }
    (mark, pct)
}
