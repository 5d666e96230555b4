//! The health part of a device's scenario (`"health": {...}`): clock-event
//! reasons, violation counters, row remapping, retired pages and XID
//! events. Every field is optional; an absent one answers
//! `NVML_ERROR_NOT_SUPPORTED`, as a card without the feature does.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// The `nvmlClocksEventReason*` bitmask both
    /// nvmlDeviceGetCurrentClocksEventReasons and its older name
    /// ...ThrottleReasons answer.
    pub clock_event_reasons: Option<u64>,
    /// nvmlDeviceGetViolationStatus by `nvmlPerfPolicyType_t` number ("0"
    /// power, "1" thermal, ...).
    #[serde(default)]
    pub violations: BTreeMap<String, Violation>,
    pub remapped_rows: Option<RemappedRows>,
    pub retired_pages: Option<RetiredPages>,
    /// XIDs delivered once each, in order, through the event-set calls to
    /// every set this device is registered with (a rewritten scenario that
    /// appends one delivers the new one).
    #[serde(default)]
    pub xid_events: Vec<u64>,
}

/// A violation counter that grows with the time the scenario has been
/// loaded: `violation_ns + share × elapsed`, so that a reader sampling it
/// twice sees `share` of the interval held down.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Violation {
    /// Time held down before the scenario was loaded (ns).
    #[serde(default)]
    pub violation_ns: u64,
    /// Fraction (0..=1) of wall time held down from then on.
    #[serde(default)]
    pub share: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    #[serde(default)]
    pub pending: bool,
    #[serde(default)]
    pub failure: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetiredPages {
    /// Pages retired for multiple single-bit errors.
    #[serde(default)]
    pub single_bit: u32,
    /// Pages retired for a double-bit error.
    #[serde(default)]
    pub double_bit: u32,
    #[serde(default)]
    pub pending: bool,
}
