//! A GPU's health through NVML: clock-event reasons, violation counters
//! and their share of the interval, ECC counts, remapped rows or retired
//! pages, performance state, power limits, and XID events from an event
//! set read without waiting; and what a lost GPU keeps (its last good
//! values, stale, with its processes).
//!
//! Calls nvml-wrapper 0.13 does not wrap (clock-event reasons under their
//! driver-535 name, remapped rows, retired pages by count, the event set
//! kept across samples) are made on its loaded library, as `mod.rs` does.

use crate::collect::sample::GpuProcess;
use crate::snapshot::health::{
    reason_names, xid_meaning, EccCounts, Health, NvLinks, PowerLimits, RemappedRows, RetiredPages, TemperatureLimits,
    Violation, XidEvent,
};
use crate::snapshot::{Device, QueryError};
use crate::units::now_rfc3339;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, PerformancePolicy, TemperatureThreshold};
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device as NvmlDevice, Nvml};
use nvml_wrapper_sys::bindings::{nvmlEventData_t, nvmlEventSet_t};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// nvmlEventTypeXidCriticalError (nvml.h).
const EVENT_XID: u64 = 0x8;
/// NVML_ERROR_TIMEOUT: the event set has nothing new.
const NVML_ERROR_TIMEOUT: u32 = 10;
/// NVML_ERROR_INSUFFICIENT_SIZE: the retired-page count query's answer.
const NVML_ERROR_INSUFFICIENT_SIZE: u32 = 7;
/// NVML_NVLINK_MAX_LINKS (nvml.h): link numbers a card may have.
const NVLINK_MAX_LINKS: u32 = 18;
/// At most this many events are read a sample, so a storm cannot hold one.
const MAX_EVENTS: usize = 64;
/// At most this many XIDs are kept per device for one sample.
const MAX_XIDS_SHOWN: usize = 16;

/// The violation policies read, by nvmlPerfPolicyType_t and name.
const POLICIES: &[(PerformancePolicy, &str)] = &[
    (PerformancePolicy::Power, "power"),
    (PerformancePolicy::Thermal, "thermal"),
    (PerformancePolicy::SyncBoost, "sync_boost"),
    (PerformancePolicy::BoardLimit, "board_limit"),
    (PerformancePolicy::LowUtilization, "low_utilization"),
    (PerformancePolicy::Reliability, "reliability"),
];

/// What health reading keeps from one sample to the next.
#[derive(Default)]
pub struct HealthTracker {
    /// The XID event set; None until made, and for good once it failed.
    events: Option<nvmlEventSet_t>,
    events_failed: Option<String>,
    /// Devices registered with the set, by index.
    registered: BTreeSet<u32>,
    /// (device, policy) → (reference µs, violation ns) of the last reading.
    violations: HashMap<(u32, &'static str), (u64, u64)>,
    xid_count: HashMap<u32, u64>,
    /// XIDs read this sample for each device, by index.
    xids: HashMap<u32, Vec<XidEvent>>,
    lost_since: HashMap<u32, String>,
    /// Each device's last NVLink reading: shown when a query fails, and
    /// (its active and fallen links) the links seen up since gputaskman
    /// started.
    last_links: HashMap<u32, NvLinks>,
    /// Devices that answered no link: not asked again (18 calls a sample).
    no_nvlink: BTreeSet<u32>,
    /// Each device's last sample in which it answered.
    last_good: HashMap<u32, (Device, Vec<GpuProcess>)>,
}

/// Sorts query results: NotSupported is a figure the card lacks (null,
/// with why), GPU_IS_LOST stops the reading, anything else is an error.
struct Gather<'a> {
    errors: &'a mut Vec<QueryError>,
    unavailable: BTreeMap<String, String>,
    lost: bool,
}

impl Gather<'_> {
    fn take<T>(&mut self, field: &str, result: Result<T, NvmlError>) -> Option<T> {
        let why = match result {
            Ok(value) => return Some(value),
            Err(NvmlError::NotSupported) => "not supported by this card".to_string(),
            Err(NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => {
                "this driver has no such query".to_string()
            }
            Err(NvmlError::GpuLost) => {
                self.lost = true;
                "the GPU is lost".to_string()
            }
            Err(e) => {
                self.errors.push(QueryError {
                    query: field.replace('_', " "),
                    message: e.to_string(),
                });
                format!("the query failed: {e}")
            }
        };
        self.unavailable.entry(field.to_string()).or_insert(why);
        None
    }
}

fn symbol<T: Copy>(found: &Result<T, libloading::Error>) -> Result<T, NvmlError> {
    found
        .as_ref()
        .copied()
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))
}

impl HealthTracker {
    /// Reads `handle`'s health (device `index`); failures go to `errors`.
    /// Returns whether the GPU answered GPU_IS_LOST.
    pub fn read(
        &mut self,
        nvml: &Nvml,
        handle: &NvmlDevice,
        index: u32,
        errors: &mut Vec<QueryError>,
    ) -> (Health, bool) {
        self.register(nvml, handle, index);
        let mut g = Gather {
            errors,
            unavailable: BTreeMap::new(),
            lost: false,
        };
        let mut health = Health {
            throttle_reasons: g
                .take("throttle_reasons", clock_event_reasons(nvml, handle))
                .map(reason_names),
            performance_state: g.take("performance_state", performance_state(nvml, handle)),
            ..Health::default()
        };
        health.throttle_source = health.throttle_reasons.as_ref().map(|_| "nvml".to_string());
        for (policy, name) in POLICIES {
            // A policy the card does not time is left out, not shown as 0 s.
            let Ok(v) = handle.violation_status(*policy) else {
                continue;
            };
            let last = self
                .violations
                .insert((index, name), (v.reference_time, v.violation_time));
            health.violations.push(Violation {
                policy: name.to_string(),
                seconds: v.violation_time as f64 / 1e9,
                share: last.and_then(|last| share((last.0, last.1), (v.reference_time, v.violation_time))),
            });
        }
        health.ecc = read_ecc(&mut g, handle);
        health.remapped_rows = g.take("remapped_rows", remapped_rows(nvml, handle));
        health.retired_pages = g.take("retired_pages", retired_pages(nvml, handle));
        let range = handle.power_management_limit_constraints().ok();
        let limits = PowerLimits {
            enforced_w: handle.enforced_power_limit().ok().map(watts),
            current_w: handle.power_management_limit().ok().map(watts),
            default_w: handle.power_management_limit_default().ok().map(watts),
            min_w: range.as_ref().map(|c| watts(c.min_limit)),
            max_w: range.as_ref().map(|c| watts(c.max_limit)),
        };
        health.power_limits = (limits != PowerLimits::default()).then_some(limits);
        health.temperature_limits = temperature_limits(&mut g, handle);
        health.nvlink = self.nvlink(&mut g, handle, index);
        health.xid_events = self.xids.remove(&index).unwrap_or_default();
        if let Some(why) = &self.events_failed {
            g.unavailable.insert("xid_events".into(), why.clone());
        }
        health.xid_count = self.xid_count.get(&index).copied().unwrap_or(0);
        health.unavailable = g.unavailable;
        (health, g.lost)
    }

    /// The card's NVLinks, and which of those seen up have fallen; None
    /// (with why) on a card without NVLink.
    fn nvlink(&mut self, g: &mut Gather<'_>, handle: &NvmlDevice, index: u32) -> Option<NvLinks> {
        let none = "no NVLink on this card";
        if self.no_nvlink.contains(&index) {
            g.unavailable.insert("nvlink".into(), none.into());
            return None;
        }
        let mut links = NvLinks::default();
        for link in 0..NVLINK_MAX_LINKS {
            match handle.link_wrapper_for(link).is_active() {
                Ok(true) => links.active.push(link),
                Ok(false) => links.inactive.push(link),
                // A link number this card lacks (past its last, or a gap:
                // the 18-link bound ends the loop).
                Err(NvmlError::InvalidArg | NvmlError::NotSupported) => {}
                Err(e) => {
                    // The last reading stands, marked, so a fallen link
                    // is not forgotten for one failed query.
                    g.take::<()>("nvlink", Err(e));
                    return self.last_links.get(&index).cloned();
                }
            }
        }
        if links.active.is_empty() && links.inactive.is_empty() {
            self.no_nvlink.insert(index);
            g.unavailable.insert("nvlink".into(), none.into());
            return None;
        }
        // A link seen up before is now active or, if it fell, was in
        // the last reading's `went_down` (or active, and falls now).
        if let Some(last) = self.last_links.get(&index) {
            let seen = |l: &u32| last.active.contains(l) || last.went_down.contains(l);
            links.went_down = links.inactive.iter().copied().filter(seen).collect();
        }
        self.last_links.insert(index, links.clone());
        Some(links)
    }

    /// Registers `handle` for XIDs with the event set (made on first use).
    fn register(&mut self, nvml: &Nvml, handle: &NvmlDevice, index: u32) {
        if self.events_failed.is_some() || self.registered.contains(&index) {
            return;
        }
        let set = match self.events {
            Some(set) => set,
            None => match create_event_set(nvml) {
                Ok(set) => *self.events.insert(set),
                Err(e) => {
                    self.events_failed = Some(format!("no XID event set: {e}"));
                    return;
                }
            },
        };
        // SAFETY: the handle and set are valid for the life of `nvml`.
        let registered = unsafe {
            symbol(&nvml.lib().nvmlDeviceRegisterEvents).and_then(|f| nvml_try(f(handle.handle(), EVENT_XID, set)))
        };
        // Registered or not, it is not asked again: a card without XID
        // events says so once.
        self.registered.insert(index);
        if let Err(e) = registered {
            self.events_failed = Some(format!("XID events not readable: {e}"));
        }
    }

    /// Reads what the event set holds, without waiting (timeout 0), and
    /// files each XID under its device; called once a sample, before the
    /// devices are read. `index_of` names a handle's device.
    pub fn drain_events(&mut self, nvml: &Nvml, index_of: &dyn Fn(&NvmlDevice) -> Option<u32>) {
        let Some(set) = self.events else { return };
        let Ok(wait) = symbol(&nvml.lib().nvmlEventSetWait_v2) else {
            return;
        };
        for _ in 0..MAX_EVENTS {
            // SAFETY: `data` is a plain C struct NVML fills; the set is ours.
            let mut data: nvmlEventData_t = unsafe { std::mem::zeroed() };
            let rc = unsafe { wait(set, &mut data, 0) };
            if rc == NVML_ERROR_TIMEOUT || nvml_try(rc).is_err() {
                return;
            }
            if data.eventType & EVENT_XID == 0 {
                continue;
            }
            // SAFETY: NVML hands back a handle it gave us at registration.
            let device = unsafe { NvmlDevice::new(data.device, nvml) };
            let Some(index) = index_of(&device) else { continue };
            *self.xid_count.entry(index).or_default() += 1;
            let shown = self.xids.entry(index).or_default();
            if shown.len() < MAX_XIDS_SHOWN {
                shown.push(XidEvent {
                    xid: data.eventData,
                    meaning: xid_meaning(data.eventData).map(str::to_string),
                    seen_at: now_rfc3339(),
                });
            }
        }
    }

    /// After a device is read: keeps it as its last good reading when it
    /// answered; when it is lost, puts back its last good values marked
    /// stale, with `lost_since`, its processes kept (never zeros, never
    /// dropped), and the errors of this reading.
    pub fn settle(&mut self, device: &mut Device, processes: &mut Vec<GpuProcess>, lost: bool) {
        let index = device.index;
        if !lost {
            self.lost_since.remove(&index);
            self.last_good.insert(index, (device.clone(), processes.clone()));
            return;
        }
        let since = self.lost_since.entry(index).or_insert_with(now_rfc3339).clone();
        if let Some((good, good_processes)) = self.last_good.get(&index) {
            let errors = std::mem::take(&mut device.errors);
            *device = Device {
                errors,
                stale: true,
                process_list_complete: false,
                ..good.clone()
            };
            *processes = good_processes.clone();
        }
        let health = device.health.get_or_insert_with(Health::default);
        health.lost_since = Some(since);
        // This sample's XIDs (a lost GPU's 79 is the one that matters), not
        // the last good sample's again, and the count that includes them.
        health.xid_events = self.xids.remove(&index).unwrap_or_default();
        health.xid_count = self.xid_count.get(&index).copied().unwrap_or(0);
    }
}

/// The note a process on a lost GPU carries.
pub fn lost_note(device: &Device) -> Option<String> {
    let since = device.health.as_ref()?.lost_since.as_ref()?;
    Some(format!(
        "GPU {} is lost since {since}: its figures here are the last it gave",
        device.label()
    ))
}

/// The share of the interval between two readings spent held down.
fn share((ref_then, held_then): (u64, u64), (ref_now, held_now): (u64, u64)) -> Option<f64> {
    let interval_ns = ref_now.checked_sub(ref_then)? as f64 * 1000.0;
    let held_ns = held_now.checked_sub(held_then)? as f64;
    (interval_ns > 0.0).then(|| (held_ns / interval_ns).clamp(0.0, 1.0))
}

fn watts(milliwatts: u32) -> f64 {
    milliwatts as f64 / 1000.0
}

fn read_ecc(g: &mut Gather<'_>, handle: &NvmlDevice) -> Option<EccCounts> {
    let mode = g.take("ecc", handle.is_ecc_enabled())?;
    if !mode.currently_enabled {
        g.unavailable.insert("ecc".into(), "ECC is off".into());
        return None;
    }
    let mut count =
        |field: &str, error: MemoryError, counter: EccCounter| g.take(field, handle.total_ecc_errors(error, counter));
    Some(EccCounts {
        volatile_corrected: count("ecc.volatile_corrected", MemoryError::Corrected, EccCounter::Volatile),
        volatile_uncorrected: count(
            "ecc.volatile_uncorrected",
            MemoryError::Uncorrected,
            EccCounter::Volatile,
        ),
        aggregate_corrected: count("ecc.aggregate_corrected", MemoryError::Corrected, EccCounter::Aggregate),
        aggregate_uncorrected: count(
            "ecc.aggregate_uncorrected",
            MemoryError::Uncorrected,
            EccCounter::Aggregate,
        ),
    })
}

/// The hottest threshold taken as a fact (°C): a driver answering more, or
/// 0, is not describing a card.
const MAX_PLAUSIBLE_THRESHOLD_C: u32 = 150;

fn temperature_limits(g: &mut Gather<'_>, handle: &NvmlDevice) -> Option<TemperatureLimits> {
    let mut read = |field: &str, which: TemperatureThreshold| {
        let t = g.take(field, handle.temperature_threshold(which))?;
        if (1..=MAX_PLAUSIBLE_THRESHOLD_C).contains(&t) {
            return Some(t);
        }
        g.unavailable.insert(
            field.to_string(),
            format!("the driver answered {t} °C, not a plausible threshold"),
        );
        None
    };
    let limits = TemperatureLimits {
        slowdown_c: read("temperature_limits.slowdown_c", TemperatureThreshold::Slowdown),
        shutdown_c: read("temperature_limits.shutdown_c", TemperatureThreshold::Shutdown),
        gpu_max_c: read("temperature_limits.gpu_max_c", TemperatureThreshold::GpuMax),
        memory_max_c: read("temperature_limits.memory_max_c", TemperatureThreshold::MemoryMax),
    };
    (limits != TemperatureLimits::default()).then_some(limits)
}

fn create_event_set(nvml: &Nvml) -> Result<nvmlEventSet_t, NvmlError> {
    // SAFETY: the out-parameter is a pointer NVML fills.
    unsafe {
        let f = symbol(&nvml.lib().nvmlEventSetCreate)?;
        let mut set: nvmlEventSet_t = std::ptr::null_mut();
        nvml_try(f(&mut set))?;
        Ok(set)
    }
}

/// nvmlDeviceGetCurrentClocksEventReasons (driver 535+), else its older
/// name ...ThrottleReasons: the same bitmask.
fn clock_event_reasons(nvml: &Nvml, handle: &NvmlDevice) -> Result<u64, NvmlError> {
    // SAFETY: as in mod.rs; the out-parameter is a plain integer.
    unsafe {
        let lib = nvml.lib();
        let f = symbol(&lib.nvmlDeviceGetCurrentClocksEventReasons)
            .or_else(|_| symbol(&lib.nvmlDeviceGetCurrentClocksThrottleReasons))?;
        let mut mask = 0;
        nvml_try(f(handle.handle(), &mut mask))?;
        Ok(mask)
    }
}

fn performance_state(nvml: &Nvml, handle: &NvmlDevice) -> Result<u32, NvmlError> {
    // SAFETY: as above. 32 is NVML_PSTATE_UNKNOWN.
    unsafe {
        let f = symbol(&nvml.lib().nvmlDeviceGetPerformanceState)?;
        let mut state = 0;
        nvml_try(f(handle.handle(), &mut state))?;
        if state > 15 {
            return Err(NvmlError::NotSupported);
        }
        Ok(state)
    }
}

fn remapped_rows(nvml: &Nvml, handle: &NvmlDevice) -> Result<RemappedRows, NvmlError> {
    // SAFETY: as above; four plain integers.
    unsafe {
        let f = symbol(&nvml.lib().nvmlDeviceGetRemappedRows)?;
        let (mut correctable, mut uncorrectable, mut pending, mut failure) = (0, 0, 0, 0);
        nvml_try(f(
            handle.handle(),
            &mut correctable,
            &mut uncorrectable,
            &mut pending,
            &mut failure,
        ))?;
        Ok(RemappedRows {
            correctable,
            uncorrectable,
            pending: pending != 0,
            failure: failure != 0,
        })
    }
}

/// The count of pages retired for each cause: the size query (count 0,
/// no buffer), whose INSUFFICIENT_SIZE answer carries the count.
fn retired_pages(nvml: &Nvml, handle: &NvmlDevice) -> Result<RetiredPages, NvmlError> {
    // SAFETY: as above; a null buffer with count 0 is the size query.
    unsafe {
        let lib = nvml.lib();
        let f = symbol(&lib.nvmlDeviceGetRetiredPages)?;
        let mut counts = [0u32; 2];
        for (cause, count) in counts.iter_mut().enumerate() {
            let rc = f(handle.handle(), cause as u32, count, std::ptr::null_mut());
            if rc != NVML_ERROR_INSUFFICIENT_SIZE {
                nvml_try(rc)?;
            }
        }
        let pending = symbol(&lib.nvmlDeviceGetRetiredPagesPendingStatus)?;
        let mut state = 0;
        nvml_try(pending(handle.handle(), &mut state))?;
        Ok(RetiredPages {
            single_bit: counts[0],
            double_bit: counts[1],
            pending: state != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_the_held_time_over_the_interval() {
        // 10 s apart (µs), 3.8 s held (ns).
        let held = share((1_000_000, 5_000_000_000), (11_000_000, 8_800_000_000)).unwrap();
        assert!((held - 0.38).abs() < 1e-9, "{held}");
        // A counter that went back (driver reload) or no time passed: unknown.
        assert_eq!(share((1, 10), (1, 20)), None);
        assert_eq!(share((1, 10), (2, 5)), None);
    }
}
