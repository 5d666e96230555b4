//! Health queries: clock-event reasons, violation counters, row
//! remapping, retired pages, and XID events through the event-set calls.

use std::os::raw::{c_uint, c_ulonglong};
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::abi;
use crate::state::{put, supported, CallResult};

device_fn!(nvmlDeviceGetCurrentClocksEventReasons | nvmlDeviceGetCurrentClocksThrottleReasons => (reasons: *mut c_ulonglong) |d| {
    put(reasons, supported(d.health.clock_event_reasons)?)
});

/// When this process first asked for a violation counter: the counters
/// grow from then on.
fn first_asked() -> Instant {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    *FIRST.get_or_init(Instant::now)
}

device_fn!(nvmlDeviceGetViolationStatus => (perfPolicyType: c_uint, violTime: *mut abi::ViolationTime) |d| {
    let v = supported(d.health.violations.get(&perfPolicyType.to_string()))?;
    let elapsed_ns = first_asked().elapsed().as_nanos() as f64;
    let now_us = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |t| t.as_micros() as u64);
    put(violTime, abi::ViolationTime {
        reference_time: now_us,
        violation_time: v.violation_ns + (v.share.clamp(0.0, 1.0) * elapsed_ns) as u64,
    })
});

device_fn!(nvmlDeviceGetRemappedRows => (corrRows: *mut c_uint, uncRows: *mut c_uint, isPending: *mut c_uint, failureOccurred: *mut c_uint) |d| {
    let rows = supported(d.health.remapped_rows.as_ref())?;
    put(corrRows, rows.correctable)?;
    put(uncRows, rows.uncorrectable)?;
    put(isPending, c_uint::from(rows.pending))?;
    put(failureOccurred, c_uint::from(rows.failure))
});

// The count query (NULL addresses) and the fill both answer the count;
// the addresses are made up, one page apart.
device_fn!(nvmlDeviceGetRetiredPages => (cause: c_uint, pageCount: *mut c_uint, addresses: *mut c_ulonglong) |d| {
    let pages = supported(d.health.retired_pages.as_ref())?;
    let count = match cause {
        abi::PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT => pages.single_bit,
        abi::PAGE_RETIREMENT_CAUSE_DOUBLE_BIT => pages.double_bit,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    let room = crate::state::get(pageCount)?;
    put(pageCount, count)?;
    if room < count {
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    for i in 0..count as usize {
        if addresses.is_null() {
            return Err(abi::ERROR_INVALID_ARGUMENT);
        }
        addresses.add(i).write_unaligned(0x1000 * (i as u64 + 1));
    }
    Ok(())
});

device_fn!(nvmlDeviceGetRetiredPagesPendingStatus => (isPending: *mut c_uint) |d| {
    put(isPending, c_uint::from(supported(d.health.retired_pages.as_ref())?.pending))
});

/// One event set: the devices registered with it (by position) and how
/// many of each one's XIDs it has delivered.
struct EventSet {
    registered: Vec<(usize, usize)>,
}

/// Every set created, by handle number (never reused; a freed one is None).
static SETS: Mutex<Vec<Option<EventSet>>> = Mutex::new(Vec::new());

/// `nvmlEventSet_t` values are this plus the set's number.
const SET_BASE: usize = 0x6576_7400_0000;

fn sets() -> std::sync::MutexGuard<'static, Vec<Option<EventSet>>> {
    SETS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn set_number(set: *mut abi::EventSetSt) -> Result<usize, abi::Ret> {
    (set as usize).checked_sub(SET_BASE).ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// Runs `body` on the registrations of a live set; another handle is
/// NVML_ERROR_INVALID_ARGUMENT.
fn registered_with(set: *mut abi::EventSetSt, body: impl FnOnce(&mut Vec<(usize, usize)>) -> CallResult) -> CallResult {
    let number = set_number(set)?;
    let mut all = sets();
    let live = all.get_mut(number).and_then(Option::as_mut);
    body(&mut live.ok_or(abi::ERROR_INVALID_ARGUMENT)?.registered)
}

system_fn!(false nvmlEventSetCreate => (set: *mut *mut abi::EventSetSt) |_s| {
    let mut all = sets();
    all.push(Some(EventSet { registered: Vec::new() }));
    put(set, (SET_BASE + all.len() - 1) as *mut abi::EventSetSt)
});

system_fn!(false nvmlEventSetFree => (set: *mut abi::EventSetSt) |_s| {
    let number = set_number(set)?;
    let mut all = sets();
    let slot = all.get_mut(number).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    slot.take().map(|_| ()).ok_or(abi::ERROR_INVALID_ARGUMENT)
});

device_fn!(nvmlDeviceGetSupportedEventTypes => (eventTypes: *mut c_ulonglong) |_d| {
    put(eventTypes, abi::EVENT_TYPE_XID_CRITICAL_ERROR)
});

// Only XIDs are events here; registering for any other type is NOT_SUPPORTED,
// as it is on a card that lacks it.
device_fn!(nvmlDeviceRegisterEvents => (eventTypes: c_ulonglong, set: *mut abi::EventSetSt) |d| {
    if eventTypes & !abi::EVENT_TYPE_XID_CRITICAL_ERROR != 0 {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    registered_with(set, |registered| {
        if !registered.iter().any(|(position, _)| *position == d.position) {
            registered.push((d.position, 0));
        }
        Ok(())
    })
});

// Never blocks, whatever the timeout: the next XID not yet delivered, or
// NVML_ERROR_TIMEOUT when there is none (what a real wait answers when
// its timeout passes).
system_fn!(false nvmlEventSetWait_v2 | nvmlEventSetWait => (set: *mut abi::EventSetSt, data: *mut abi::EventData, _timeoutms: c_uint) |s| {
    registered_with(set, |registered| {
        for (position, delivered) in registered.iter_mut() {
            let Some(xid) = s.devices.get(*position).and_then(|d| d.health.xid_events.get(*delivered)) else {
                continue;
            };
            *delivered += 1;
            return put(data, abi::EventData {
                device: crate::state::handle_of(*position),
                event_type: abi::EVENT_TYPE_XID_CRITICAL_ERROR,
                event_data: *xid,
                gpu_instance_id: abi::NO_INSTANCE_ID,
                compute_instance_id: abi::NO_INSTANCE_ID,
            });
        }
        Err(abi::ERROR_TIMEOUT)
    })
});
