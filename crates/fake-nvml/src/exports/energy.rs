//! The energy counter; the value is [`crate::energy::Energy::counter_mj`].

use std::os::raw::c_ulonglong;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::state::{put, supported};

device_fn!(nvmlDeviceGetTotalEnergyConsumption => (energy: *mut c_ulonglong) |d| {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |t| t.as_millis() as u64);
    put(energy, supported(d.energy.as_ref())?.counter_mj(now_ms))
});
