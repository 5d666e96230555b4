//! The health families of `/metrics`: throttle reasons and violation
//! time, XIDs, ECC, remapped rows, retired pages, performance state, power
//! limits and `gputaskman_gpu_lost`, named as Prometheus users expect
//! (counters end in `_total`; dcgm-exporter's signals under our prefix).
//! A figure a card lacks writes no sample, never a 0. Label values here are
//! our own words (reason and policy names from `snapshot::health`); the
//! device labels come escaped from `metrics.rs`.

use crate::snapshot::health::{Health, AMD_THROTTLERS, REASONS};
use std::fmt::Write;

/// (name, help, type) of every family this file writes.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    ("gputaskman_gpu_lost", "1 when the GPU stopped answering (GPU_IS_LOST, fallen off the bus): its other series are its last values, stale.", "gauge"),
    ("gputaskman_device_throttle_reason", "Measured: 1 for each clock-event (throttle) reason active now, 0 for the others its source names (reason label: NVML's sw_power_cap, hw_thermal_slowdown, ...; amdgpu's amd_ppt0, amd_temp_hotspot, ...).", "gauge"),
    ("gputaskman_device_throttle_violation_seconds_total", "Measured: time the driver held clocks down for a policy (power, thermal, ...) since it loaded.", "counter"),
    ("gputaskman_device_throttle_violation_ratio", "Measured: share of the last sample interval the driver held clocks down for a policy (0 to 1).", "gauge"),
    ("gputaskman_device_xid_events_total", "XID events read from the GPU since gputaskman started.", "counter"),
    ("gputaskman_device_last_xid", "The number of the last XID read in the last sample (absent when none was).", "gauge"),
    ("gputaskman_device_ecc_errors_total", "Measured: ECC errors (error: corrected or uncorrected; counter: volatile since the driver loaded, aggregate over the card's life). Absent when ECC is off.", "counter"),
    ("gputaskman_device_remapped_rows", "Measured: memory rows remapped (A100 and later), by kind (correctable, uncorrectable).", "gauge"),
    ("gputaskman_device_row_remap_pending", "1 when a row remap waits for the next GPU reset.", "gauge"),
    ("gputaskman_device_row_remap_failure", "1 when a row remap failed: the card should be serviced.", "gauge"),
    ("gputaskman_device_retired_pages", "Measured: memory pages retired, by cause (single_bit, double_bit).", "gauge"),
    ("gputaskman_device_retired_pages_pending", "1 when a page retirement waits for the next reboot.", "gauge"),
    ("gputaskman_device_performance_state", "The performance state: 0 (P0, most) to 15.", "gauge"),
    ("gputaskman_device_power_management_limit_watts", "Power limits, by limit: current (set now), default, min and max (the range the operator may set).", "gauge"),
    ("gputaskman_device_nvlink_links", "NVLinks of the card by state: active, inactive (unused by design, or down).", "gauge"),
    ("gputaskman_device_nvlink_links_went_down", "NVLinks seen active since gputaskman started that are inactive now.", "gauge"),
    ("gputaskman_device_temperature_limit_celsius", "The temperatures the driver names, by limit: slowdown (clocks drop), shutdown, gpu_max and memory_max (the highest meant to run at).", "gauge"),
];

/// Samples grouped by family, in [`FAMILIES`] order.
struct Bodies(Vec<String>);

impl Bodies {
    fn put(&mut self, family: &str, labels: &str, value: impl std::fmt::Display) {
        let Some(i) = FAMILIES.iter().position(|(name, _, _)| *name == family) else {
            return;
        };
        let _ = writeln!(self.0[i], "{family}{{{labels}}} {value}");
    }

    /// One sample per limit the card names, labelled `limit`.
    fn limits<T: std::fmt::Display>(&mut self, family: &str, labels: &str, limits: [(&str, Option<T>); 4]) {
        for (limit, value) in limits {
            if let Some(value) = value {
                self.put(family, &with(labels, "limit", limit), value);
            }
        }
    }
}

fn with(labels: &str, name: &str, value: &str) -> String {
    if labels.is_empty() {
        format!("{name}=\"{value}\"")
    } else {
        format!("{labels},{name}=\"{value}\"")
    }
}

/// Writes the families for `devices`: each a device's health and its
/// label set as `metrics.rs` writes it.
pub fn render<'a>(out: &mut String, devices: impl Iterator<Item = (&'a Health, String)>) {
    let mut b = Bodies(vec![String::new(); FAMILIES.len()]);
    for (h, l) in devices {
        device(&mut b, h, &l);
    }
    for ((name, help, kind), body) in FAMILIES.iter().zip(&b.0) {
        if body.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        out.push_str(body);
    }
}

fn device(b: &mut Bodies, h: &Health, l: &str) {
    b.put("gputaskman_gpu_lost", l, u8::from(h.lost_since.is_some()));
    if let Some(active) = &h.throttle_reasons {
        // Every reason the source names, 0 or 1; a bit it does not name, 1.
        let named: Vec<&str> = match h.throttle_source.as_deref() {
            Some("gpu_metrics") => AMD_THROTTLERS.iter().map(|(_, name, _)| *name).collect(),
            _ => REASONS.iter().map(|(_, name, _)| *name).collect(),
        };
        let unnamed = active.iter().map(String::as_str).filter(|a| !named.contains(a));
        for name in named.iter().copied().chain(unnamed) {
            let on = active.iter().any(|a| a == name);
            b.put(
                "gputaskman_device_throttle_reason",
                &with(l, "reason", name),
                u8::from(on),
            );
        }
    }
    for v in &h.violations {
        let pl = with(l, "policy", &v.policy);
        b.put("gputaskman_device_throttle_violation_seconds_total", &pl, v.seconds);
        if let Some(share) = v.share {
            b.put("gputaskman_device_throttle_violation_ratio", &pl, share);
        }
    }
    b.put("gputaskman_device_xid_events_total", l, h.xid_count);
    if let Some(last) = h.xid_events.last() {
        b.put("gputaskman_device_last_xid", l, last.xid);
    }
    if let Some(e) = &h.ecc {
        for (error, counter, count) in [
            ("corrected", "volatile", e.volatile_corrected),
            ("uncorrected", "volatile", e.volatile_uncorrected),
            ("corrected", "aggregate", e.aggregate_corrected),
            ("uncorrected", "aggregate", e.aggregate_uncorrected),
        ] {
            if let Some(count) = count {
                let el = with(&with(l, "error", error), "counter", counter);
                b.put("gputaskman_device_ecc_errors_total", &el, count);
            }
        }
    }
    if let Some(r) = &h.remapped_rows {
        b.put(
            "gputaskman_device_remapped_rows",
            &with(l, "kind", "correctable"),
            r.correctable,
        );
        b.put(
            "gputaskman_device_remapped_rows",
            &with(l, "kind", "uncorrectable"),
            r.uncorrectable,
        );
        b.put("gputaskman_device_row_remap_pending", l, u8::from(r.pending));
        b.put("gputaskman_device_row_remap_failure", l, u8::from(r.failure));
    }
    if let Some(p) = &h.retired_pages {
        b.put(
            "gputaskman_device_retired_pages",
            &with(l, "cause", "single_bit"),
            p.single_bit,
        );
        b.put(
            "gputaskman_device_retired_pages",
            &with(l, "cause", "double_bit"),
            p.double_bit,
        );
        b.put("gputaskman_device_retired_pages_pending", l, u8::from(p.pending));
    }
    if let Some(state) = h.performance_state {
        b.put("gputaskman_device_performance_state", l, state);
    }
    if let Some(p) = &h.power_limits {
        b.limits(
            "gputaskman_device_power_management_limit_watts",
            l,
            [
                ("current", p.current_w),
                ("default", p.default_w),
                ("min", p.min_w),
                ("max", p.max_w),
            ],
        );
    }
    if let Some(links) = &h.nvlink {
        b.put(
            "gputaskman_device_nvlink_links",
            &with(l, "state", "active"),
            links.active.len(),
        );
        b.put(
            "gputaskman_device_nvlink_links",
            &with(l, "state", "inactive"),
            links.inactive.len(),
        );
        b.put("gputaskman_device_nvlink_links_went_down", l, links.went_down.len());
    }
    if let Some(t) = &h.temperature_limits {
        b.limits(
            "gputaskman_device_temperature_limit_celsius",
            l,
            [
                ("slowdown", t.slowdown_c),
                ("shutdown", t.shutdown_c),
                ("gpu_max", t.gpu_max_c),
                ("memory_max", t.memory_max_c),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::health::{amd_throttler_names, reason_names, EccCounts, TemperatureLimits, Violation};

    #[test]
    fn a_power_cap_is_a_labelled_series_and_unknown_ecc_writes_nothing() {
        let h = Health {
            throttle_reasons: Some(reason_names(0x4)),
            violations: vec![Violation {
                policy: "power".into(),
                seconds: 2.5,
                share: Some(0.38),
            }],
            ..Health::default()
        };
        let mut text = String::new();
        render(&mut text, [(&h, "device=\"0\"".to_string())].into_iter());
        assert!(
            text.contains("gputaskman_device_throttle_reason{device=\"0\",reason=\"sw_power_cap\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("gputaskman_device_throttle_reason{device=\"0\",reason=\"gpu_idle\"} 0\n"));
        assert!(text.contains("gputaskman_device_throttle_violation_ratio{device=\"0\",policy=\"power\"} 0.38\n"));
        assert!(text.contains("# TYPE gputaskman_device_throttle_violation_seconds_total counter\n"));
        assert!(text.contains("gputaskman_gpu_lost{device=\"0\"} 0\n"));
        assert!(!text.contains("ecc"), "ECC unknown: no series\n{text}");

        let with_ecc = Health {
            ecc: Some(EccCounts {
                volatile_uncorrected: Some(3),
                ..EccCounts::default()
            }),
            ..Health::default()
        };
        let mut text = String::new();
        render(&mut text, [(&with_ecc, String::new())].into_iter());
        assert!(
            text.contains("gputaskman_device_ecc_errors_total{error=\"uncorrected\",counter=\"volatile\"} 3\n"),
            "{text}"
        );
        // Counts the card did not give are absent, not 0.
        assert!(!text.contains("error=\"corrected\""), "{text}");
        // No reasons known: no reason series at all.
        assert!(!text.contains("throttle_reason"), "{text}");
    }

    #[test]
    fn amdgpu_reasons_are_its_own_set_and_limits_are_labelled() {
        let h = Health {
            throttle_reasons: Some(amd_throttler_names((1 << 36) | (1 << 50))),
            throttle_source: Some("gpu_metrics".into()),
            temperature_limits: Some(TemperatureLimits {
                slowdown_c: Some(100),
                ..TemperatureLimits::default()
            }),
            ..Health::default()
        };
        let mut text = String::new();
        render(&mut text, [(&h, "device=\"1\"".to_string())].into_iter());
        for (series, value) in [
            ("reason=\"amd_temp_hotspot\"", 1),
            ("reason=\"amd_ppt0\"", 0),
            ("reason=\"amd_bit_50\"", 1),
        ] {
            let line = format!("gputaskman_device_throttle_reason{{device=\"1\",{series}}} {value}\n");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        assert!(
            !text.contains("reason=\"sw_power_cap\""),
            "NVML's names are not an amdgpu card's: {text}"
        );
        assert!(text.contains("gputaskman_device_temperature_limit_celsius{device=\"1\",limit=\"slowdown\"} 100\n"));
        assert!(!text.contains("limit=\"shutdown\""), "{text}");
    }
}
