//! A device's health: why its clocks are held down and for how long, the
//! errors it has counted (XIDs, ECC, retired pages, remapped rows), and
//! whether it still answers. Every figure a card lacks is null, with the
//! reason in `unavailable`; a lost GPU says since when.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Health {
    /// The clock-event (throttle) reasons active now, by name (see
    /// [`REASONS`]: `sw_power_cap`, `hw_thermal_slowdown`, ...); empty when
    /// none is; null when the driver does not say.
    pub throttle_reasons: Option<Vec<String>>,
    /// Time the driver held clocks down for each cause since it loaded,
    /// and the share of the last interval.
    #[serde(default)]
    pub violations: Vec<Violation>,
    /// The performance state, 0 (P0, most) to 15; null when not reported.
    pub performance_state: Option<u32>,
    /// ECC error counts; null when ECC is off or the card has none.
    pub ecc: Option<EccCounts>,
    /// Rows remapped (A100 and later); null on cards without remapping.
    pub remapped_rows: Option<RemappedRows>,
    /// Pages retired (cards before A100); null on cards without retirement.
    pub retired_pages: Option<RetiredPages>,
    /// XID events read in this sample, oldest first.
    #[serde(default)]
    pub xid_events: Vec<XidEvent>,
    /// XID events read since this gputaskman started.
    #[serde(default)]
    pub xid_count: u64,
    /// NVLink: which links are up and which fell; null on cards without
    /// NVLink.
    #[serde(default)]
    pub nvlink: Option<NvLinks>,
    /// Where `throttle_reasons` come from, which names the set they are
    /// drawn from: `nvml` ([`REASONS`]) or `gpu_metrics` (amdgpu's
    /// ASIC-independent throttler bits, [`AMD_THROTTLERS`]); null when
    /// none are read (and in snapshots written before it existed: NVML's).
    #[serde(default)]
    pub throttle_source: Option<String>,
    /// Power limits (W): the one in force, the operator's, the default, and
    /// the range the operator may set.
    pub power_limits: Option<PowerLimits>,
    /// The temperatures (°C, of the sensor `temperature_c` reads) at which
    /// the card slows itself down and shuts down; null where the driver
    /// names none.
    #[serde(default)]
    pub temperature_limits: Option<TemperatureLimits>,
    /// RFC 3339 time the GPU first stopped answering (`GPU_IS_LOST`, fallen
    /// off the bus); null while it answers. The device's other figures are
    /// then its last good ones, marked `stale`.
    pub lost_since: Option<String>,
    /// Why a figure above is null: field name → the reason.
    #[serde(default)]
    pub unavailable: BTreeMap<String, String>,
}

/// One violation counter (nvmlDeviceGetViolationStatus).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Violation {
    /// `power`, `thermal`, `sync_boost`, `board_limit`, `low_utilization`,
    /// `reliability`.
    pub policy: String,
    /// Seconds held down since the driver loaded.
    pub seconds: f64,
    /// Fraction (0..1) of the last sampling interval held down; null on a
    /// first reading.
    pub share: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct EccCounts {
    /// Since the driver loaded.
    pub volatile_corrected: Option<u64>,
    pub volatile_uncorrected: Option<u64>,
    /// Over the card's life (kept in its infoROM).
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    /// A remap waits for the next GPU reset.
    pub pending: bool,
    /// A remap failed: the card should be serviced.
    pub failure: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RetiredPages {
    /// Retired for multiple single-bit errors.
    pub single_bit: u32,
    /// Retired for a double-bit error.
    pub double_bit: u32,
    /// A retirement waits for the next reboot.
    pub pending: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct XidEvent {
    pub xid: u64,
    /// What NVIDIA's XID table says it means; null for an XID not in
    /// [`xid_meaning`]'s table.
    pub meaning: Option<String>,
    /// RFC 3339 time it was read (NVML gives no time of its own).
    pub seen_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PowerLimits {
    /// The limit the card enforces now (the lowest of every limiter).
    pub enforced_w: Option<f64>,
    /// The power-management limit set now.
    pub current_w: Option<f64>,
    pub default_w: Option<f64>,
    pub min_w: Option<f64>,
    pub max_w: Option<f64>,
}

/// A card's NVLinks by number (nvmlDeviceGetNvLinkState).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NvLinks {
    pub active: Vec<u32>,
    /// Links the card has that are not active: unused by design, or down.
    pub inactive: Vec<u32>,
    /// Links seen active since gputaskman started that are inactive now:
    /// a link that fell, which slows every transfer that used it.
    pub went_down: Vec<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TemperatureLimits {
    /// The card slows its clocks at this temperature (NVML's slowdown
    /// threshold; amdgpu's critical maximum, hwmon `temp*_crit`).
    pub slowdown_c: Option<u32>,
    /// The card shuts down at this temperature (NVML's shutdown threshold;
    /// amdgpu's emergency maximum, hwmon `temp*_emergency`).
    pub shutdown_c: Option<u32>,
    /// The highest temperature the card is meant to run at (NVML's GPU max
    /// operating temperature); reaching it under load is normal.
    pub gpu_max_c: Option<u32>,
    /// The memory's (NVML's memory max operating temperature).
    pub memory_max_c: Option<u32>,
}

/// A GPU this close to its slowdown temperature (°C) is marked hot: the
/// next degrees cost clocks.
pub const HOT_MARGIN_C: u32 = 5;

/// The `nvmlClocksEventReason*` bits (nvml.h), their names here and in
/// words. Idle, applications clocks, display clocks and sync boost hold
/// clocks down by design; the others are throttling.
pub const REASONS: &[(u64, &str, &str)] = &[
    (0x1, "gpu_idle", "idle"),
    (0x2, "applications_clocks", "applications clocks"),
    (0x4, "sw_power_cap", "power cap"),
    (0x8, "hw_slowdown", "hardware slowdown"),
    (0x10, "sync_boost", "sync boost"),
    (0x20, "sw_thermal_slowdown", "thermal"),
    (0x40, "hw_thermal_slowdown", "hardware thermal"),
    (0x80, "hw_power_brake_slowdown", "power brake"),
    (0x100, "display_clocks", "display clocks"),
];

/// amdgpu's ASIC-independent throttler bits (`SMU_THROTTLER_*_BIT` in the
/// kernel's drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h), as
/// `gpu_metrics`' `indep_throttle_status` carries them: (bit number, name,
/// words). Every one of them costs clocks: power and current limits,
/// temperatures, the platform's hot signals.
pub const AMD_THROTTLERS: &[(u32, &str, &str)] = &[
    (0, "amd_ppt0", "power limit (PPT0)"),
    (1, "amd_ppt1", "power limit (PPT1)"),
    (2, "amd_ppt2", "power limit (PPT2)"),
    (3, "amd_ppt3", "power limit (PPT3)"),
    (4, "amd_spl", "sustained power limit (SPL)"),
    (5, "amd_fppt", "fast power limit (FPPT)"),
    (6, "amd_sppt", "slow power limit (SPPT)"),
    (7, "amd_sppt_apu", "APU slow power limit (SPPT)"),
    (16, "amd_tdc_gfx", "current limit (TDC GFX)"),
    (17, "amd_tdc_soc", "current limit (TDC SoC)"),
    (18, "amd_tdc_mem", "current limit (TDC memory)"),
    (19, "amd_tdc_vdd", "current limit (TDC VDD)"),
    (20, "amd_tdc_cvip", "current limit (TDC CVIP)"),
    (21, "amd_edc_cpu", "current limit (EDC CPU)"),
    (22, "amd_edc_gfx", "current limit (EDC GFX)"),
    (23, "amd_apcc", "current limit (APCC)"),
    (32, "amd_temp_gpu", "thermal (GPU)"),
    (33, "amd_temp_core", "thermal (core)"),
    (34, "amd_temp_mem", "thermal (memory)"),
    (35, "amd_temp_edge", "thermal (edge)"),
    (36, "amd_temp_hotspot", "thermal (hotspot)"),
    (37, "amd_temp_soc", "thermal (SoC)"),
    (38, "amd_temp_vr_gfx", "thermal (VR GFX)"),
    (39, "amd_temp_vr_soc", "thermal (VR SoC)"),
    (40, "amd_temp_vr_mem0", "thermal (VR memory 0)"),
    (41, "amd_temp_vr_mem1", "thermal (VR memory 1)"),
    (42, "amd_temp_liquid0", "thermal (liquid 0)"),
    (43, "amd_temp_liquid1", "thermal (liquid 1)"),
    (44, "amd_vrhot0", "VR hot (0)"),
    (45, "amd_vrhot1", "VR hot (1)"),
    (46, "amd_prochot_cpu", "PROCHOT (CPU)"),
    (47, "amd_prochot_gfx", "PROCHOT (GFX)"),
    (56, "amd_ppm", "power management (PPM)"),
    (57, "amd_fit", "reliability (FIT)"),
];

/// The names of the bits set in an amdgpu `indep_throttle_status`; a bit
/// the kernel does not name is `amd_bit_N`, never dropped.
pub fn amd_throttler_names(mask: u64) -> Vec<String> {
    (0..64)
        .filter(|bit| mask & (1u64 << bit) != 0)
        .map(|bit| match AMD_THROTTLERS.iter().find(|(b, _, _)| *b == bit) {
            Some((_, name, _)) => name.to_string(),
            None => format!("amd_bit_{bit}"),
        })
        .collect()
}

/// The reasons that cost speed without anyone asking for it.
const THROTTLING: &[&str] = &[
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
];

/// The names of the bits set in `mask`; a bit nvml.h does not name is
/// `bit_0x...`, never dropped.
pub fn reason_names(mask: u64) -> Vec<String> {
    let mut names: Vec<String> = REASONS
        .iter()
        .filter(|(bit, _, _)| mask & bit != 0)
        .map(|(_, name, _)| name.to_string())
        .collect();
    let known = REASONS.iter().fold(0, |all, (bit, _, _)| all | bit);
    let mut rest = mask & !known;
    while rest != 0 {
        let bit = rest & rest.wrapping_neg();
        names.push(format!("bit_{bit:#x}"));
        rest &= !bit;
    }
    names
}

/// A reason's words ("power cap"); the name itself when it has none.
pub fn reason_words(name: &str) -> &str {
    REASONS
        .iter()
        .map(|(_, n, words)| (*n, *words))
        .chain(AMD_THROTTLERS.iter().map(|(_, n, words)| (*n, *words)))
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, words)| words)
}

/// Whether a reason costs speed: NVML's throttling ones, every amdgpu
/// throttler, and any bit neither names.
fn is_throttling(reason: &str) -> bool {
    THROTTLING.contains(&reason) || reason.starts_with("bit_") || reason.starts_with("amd_")
}

/// The violation policy that times a reason, so a reason is shown with
/// its share ("power cap: 38%").
fn policy_of(reason: &str) -> Option<&'static str> {
    match reason {
        "sw_power_cap" | "hw_power_brake_slowdown" => Some("power"),
        "sw_thermal_slowdown" | "hw_thermal_slowdown" => Some("thermal"),
        "sync_boost" => Some("sync_boost"),
        _ => None,
    }
}

/// What the common XIDs mean, from NVIDIA's "XID Errors" table
/// (docs.nvidia.com/deploy/xid-errors, "XID Error Listing"), in short.
pub fn xid_meaning(xid: u64) -> Option<&'static str> {
    Some(match xid {
        13 => "graphics engine exception",
        31 => "GPU memory page fault",
        43 => "GPU stopped processing (an application fault)",
        45 => "preemptive cleanup, due to previous errors",
        48 => "double-bit ECC error",
        61 => "internal micro-controller breakpoint/warning",
        62 => "internal micro-controller halt",
        63 => "ECC page retirement or row remapping recorded",
        64 => "ECC page retirement or row remapping failed to record",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        119 => "GSP RPC timeout",
        120 => "GSP error",
        _ => return None,
    })
}

/// How a device stands, worst first: what the live view marks on its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    Lost,
    /// Errors that call for attention: XIDs now, uncorrected ECC, a remap
    /// failure or pending, pages pending retirement.
    Errors(Vec<String>),
    /// Throttling reasons now, in words with their share where timed.
    Throttled(Vec<String>),
    /// Within [`HOT_MARGIN_C`] of its slowdown temperature, in words:
    /// `86 °C, slowdown at 87 °C`.
    Hot(String),
    Ok,
}

impl Health {
    /// The share of the last interval the policy timed, if any.
    fn share(&self, policy: &str) -> Option<f64> {
        self.violations
            .iter()
            .find(|v| v.policy == policy)
            .and_then(|v| v.share)
    }

    /// The throttling reasons active now in words, with the share of the
    /// last interval where a counter times them: `power cap 38%`.
    pub fn throttling(&self) -> Vec<String> {
        let reasons = self.throttle_reasons.iter().flatten();
        reasons
            .filter(|r| is_throttling(r))
            .map(|r| match policy_of(r).and_then(|p| self.share(p)) {
                Some(share) => format!("{} {:.0}%", reason_words(r), share * 100.0),
                None => reason_words(r).to_string(),
            })
            .collect()
    }

    /// The errors worth a person's attention, in words.
    pub fn errors(&self) -> Vec<String> {
        let mut errors: Vec<String> = self
            .xid_events
            .iter()
            .map(|x| match &x.meaning {
                Some(m) => format!("XID {} ({m})", x.xid),
                None => format!("XID {}", x.xid),
            })
            .collect();
        let ecc = self.ecc.as_ref();
        if let Some(n) = ecc.and_then(|e| e.volatile_uncorrected).filter(|n| *n > 0) {
            errors.push(format!("{n} uncorrected ECC error{}", plural(n)));
        }
        if let Some(rows) = &self.remapped_rows {
            if rows.failure {
                errors.push("row remapping failed".into());
            }
            if rows.pending {
                errors.push("row remap pending a reset".into());
            }
        }
        if self.retired_pages.as_ref().is_some_and(|p| p.pending) {
            errors.push("page retirement pending a reboot".into());
        }
        if let Some(down) = self.nvlink.as_ref().map(|l| &l.went_down).filter(|d| !d.is_empty()) {
            let links: Vec<String> = down.iter().map(u32::to_string).collect();
            errors.push(format!("NVLink {} went down", links.join(", ")));
        }
        errors
    }

    /// `86 °C, slowdown at 87 °C` when `temperature_c` is within
    /// [`HOT_MARGIN_C`] of the slowdown temperature.
    pub fn hot(&self, temperature_c: Option<u32>) -> Option<String> {
        let t = temperature_c?;
        let slowdown = self.temperature_limits.as_ref()?.slowdown_c?;
        (t.saturating_add(HOT_MARGIN_C) >= slowdown).then(|| format!("{t} °C, slowdown at {slowdown} °C"))
    }

    /// How the device stands, worst first; `temperature_c` is the
    /// device's temperature now (for [`Mark::Hot`]).
    pub fn mark(&self, temperature_c: Option<u32>) -> Mark {
        if self.lost_since.is_some() {
            return Mark::Lost;
        }
        let errors = self.errors();
        if !errors.is_empty() {
            return Mark::Errors(errors);
        }
        let throttling = self.throttling();
        if !throttling.is_empty() {
            return Mark::Throttled(throttling);
        }
        match self.hot(temperature_c) {
            Some(hot) => Mark::Hot(hot),
            None => Mark::Ok,
        }
    }

    /// One line for a device that is not plainly healthy (`--once`), or
    /// None when it is.
    pub fn line(&self, temperature_c: Option<u32>) -> Option<String> {
        match self.mark(temperature_c) {
            Mark::Ok => None,
            Mark::Hot(hot) => Some(format!("hot: {hot}")),
            Mark::Lost => Some(format!(
                "lost since {}: not answering; last values shown, stale",
                self.lost_since.as_deref().unwrap_or("?")
            )),
            Mark::Errors(errors) => {
                let mut line = format!("errors: {}", errors.join(", "));
                let throttling = self.throttling();
                if !throttling.is_empty() {
                    line = format!("{line}, throttled: {}", throttling.join(", "));
                }
                Some(line)
            }
            Mark::Throttled(reasons) => Some(format!("throttled: {}", reasons.join(", "))),
        }
    }
}

/// What got worse between two readings of one device (`diff`): errors
/// counted since, a remap or retirement newly failed or pending, XIDs in
/// the later one, a GPU lost since, throttling that started. A count
/// unknown on the earlier side is said as such, never taken for 0.
pub fn news(before: Option<&Health>, after: Option<&Health>) -> Vec<String> {
    let Some(a) = after else { return Vec::new() };
    let empty = Health::default();
    let b = before.unwrap_or(&empty);
    let mut out = Vec::new();
    let mut grew = |what: &str, then: Option<u64>, now: Option<u64>, known_before: bool| match (then, now) {
        (Some(t), Some(n)) if n > t => out.push(format!("{what}: {t} -> {n} (+{})", n - t)),
        (None, Some(n)) if n > 0 => out.push(format!(
            "{what}: {n} ({})",
            if known_before { "n/a before" } else { "not read before" }
        )),
        _ => {}
    };
    let known = before.is_some();
    let (be, ae) = (b.ecc.clone().unwrap_or_default(), a.ecc.clone().unwrap_or_default());
    grew(
        "uncorrected ECC errors (volatile)",
        be.volatile_uncorrected,
        ae.volatile_uncorrected,
        known,
    );
    grew(
        "uncorrected ECC errors (aggregate)",
        be.aggregate_uncorrected,
        ae.aggregate_uncorrected,
        known,
    );
    grew(
        "corrected ECC errors (aggregate)",
        be.aggregate_corrected,
        ae.aggregate_corrected,
        known,
    );
    let rows = |h: &Health, f: fn(&RemappedRows) -> u32| h.remapped_rows.as_ref().map(|r| u64::from(f(r)));
    grew(
        "rows remapped (uncorrectable)",
        rows(b, |r| r.uncorrectable),
        rows(a, |r| r.uncorrectable),
        known,
    );
    let pages = |h: &Health| {
        h.retired_pages
            .as_ref()
            .map(|p| u64::from(p.single_bit) + u64::from(p.double_bit))
    };
    grew("pages retired", pages(b), pages(a), known);
    let flag = |h: &Health, f: fn(&Health) -> bool| f(h);
    for (what, f) in [
        (
            "row remapping failed",
            (|h: &Health| h.remapped_rows.as_ref().is_some_and(|r| r.failure)) as fn(&Health) -> bool,
        ),
        ("row remap pending a reset", |h: &Health| {
            h.remapped_rows.as_ref().is_some_and(|r| r.pending)
        }),
        ("page retirement pending a reboot", |h: &Health| {
            h.retired_pages.as_ref().is_some_and(|p| p.pending)
        }),
    ] {
        if flag(a, f) && !flag(b, f) {
            out.push(what.to_string());
        }
    }
    let fell = |h: &Health| h.nvlink.as_ref().map(|l| l.went_down.clone()).unwrap_or_default();
    let was_down = fell(b);
    for link in fell(a).into_iter().filter(|l| !was_down.contains(l)) {
        out.push(format!("NVLink {link} went down"));
    }
    out.extend(a.xid_events.iter().map(|x| match &x.meaning {
        Some(m) => format!("XID {} ({m}) at {}", x.xid, x.seen_at),
        None => format!("XID {} at {}", x.xid, x.seen_at),
    }));
    if let (Some(since), None) = (&a.lost_since, &b.lost_since) {
        out.push(format!("lost since {since}"));
    }
    let was = b.throttling();
    let started: Vec<String> = a
        .throttling()
        .into_iter()
        .filter(|t| !was.iter().any(|w| w.split(' ').next() == t.split(' ').next()))
        .collect();
    if !started.is_empty() {
        out.push(format!("throttled now: {}", started.join(", ")));
    }
    out
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn violation(policy: &str, share: Option<f64>) -> Violation {
        Violation {
            policy: policy.into(),
            seconds: 12.5,
            share,
        }
    }

    #[test]
    fn reasons_are_named_and_unknown_bits_kept() {
        assert_eq!(reason_names(0), Vec::<String>::new());
        assert_eq!(reason_names(0x4 | 0x40), ["sw_power_cap", "hw_thermal_slowdown"]);
        assert_eq!(reason_names(0x1 | 0x1000), ["gpu_idle", "bit_0x1000"]);
        assert_eq!(reason_words("sw_power_cap"), "power cap");
        assert_eq!(reason_words("bit_0x1000"), "bit_0x1000");
    }

    #[test]
    fn a_power_cap_is_shown_with_its_share_and_idle_is_not_throttling() {
        let health = Health {
            throttle_reasons: Some(reason_names(0x1 | 0x4)),
            violations: vec![violation("power", Some(0.38)), violation("thermal", None)],
            ..Health::default()
        };
        assert_eq!(health.mark(None), Mark::Throttled(vec!["power cap 38%".into()]));
        assert_eq!(health.line(None).as_deref(), Some("throttled: power cap 38%"));
        let idle = Health {
            throttle_reasons: Some(reason_names(0x1)),
            ..Health::default()
        };
        assert_eq!(idle.mark(None), Mark::Ok);
        assert_eq!(idle.line(None), None);
    }

    #[test]
    fn errors_outrank_throttling_and_lost_outranks_both() {
        let mut health = Health {
            throttle_reasons: Some(reason_names(0x20)),
            ecc: Some(EccCounts {
                volatile_uncorrected: Some(3),
                ..EccCounts::default()
            }),
            xid_events: vec![XidEvent {
                xid: 79,
                meaning: xid_meaning(79).map(str::to_string),
                seen_at: "2026-01-01T00:00:00Z".into(),
            }],
            ..Health::default()
        };
        assert_eq!(
            health.line(None).as_deref(),
            Some("errors: XID 79 (GPU has fallen off the bus), 3 uncorrected ECC errors, throttled: thermal")
        );
        health.lost_since = Some("2026-01-01T00:00:01Z".into());
        assert_eq!(health.mark(None), Mark::Lost);
    }

    #[test]
    fn news_says_what_got_worse_and_an_unknown_count_is_not_zero() {
        let before = Health {
            ecc: Some(EccCounts {
                volatile_uncorrected: Some(1),
                aggregate_corrected: None,
                ..EccCounts::default()
            }),
            ..Health::default()
        };
        let after = Health {
            ecc: Some(EccCounts {
                volatile_uncorrected: Some(3),
                aggregate_corrected: Some(5),
                ..EccCounts::default()
            }),
            remapped_rows: Some(RemappedRows {
                correctable: 0,
                uncorrectable: 1,
                pending: false,
                failure: true,
            }),
            throttle_reasons: Some(reason_names(0x4)),
            lost_since: Some("2026-12-02T04:00:00Z".into()),
            ..Health::default()
        };
        assert_eq!(
            news(Some(&before), Some(&after)),
            [
                "uncorrected ECC errors (volatile): 1 -> 3 (+2)",
                "corrected ECC errors (aggregate): 5 (n/a before)",
                "rows remapped (uncorrectable): 1 (n/a before)",
                "row remapping failed",
                "lost since 2026-12-02T04:00:00Z",
                "throttled now: power cap",
            ]
        );
        // The same reading twice: nothing new.
        assert!(news(Some(&after), Some(&after)).is_empty());
        assert!(news(Some(&after), None).is_empty());
    }

    #[test]
    fn amd_throttlers_are_named_throttling_and_unknown_bits_kept() {
        let mask = (1 << 0) | (1 << 36) | (1 << 50);
        assert_eq!(
            amd_throttler_names(mask),
            ["amd_ppt0", "amd_temp_hotspot", "amd_bit_50"]
        );
        let health = Health {
            throttle_reasons: Some(amd_throttler_names(mask)),
            throttle_source: Some("gpu_metrics".into()),
            ..Health::default()
        };
        assert_eq!(
            health.line(None).as_deref(),
            Some("throttled: power limit (PPT0), thermal (hotspot), amd_bit_50")
        );
        // Every bit number and name appears once.
        for (i, (bit, name, _)) in AMD_THROTTLERS.iter().enumerate() {
            assert!(*bit < 64);
            assert!(
                AMD_THROTTLERS[i + 1..].iter().all(|(b, n, _)| b != bit && n != name),
                "{name}"
            );
        }
    }

    #[test]
    fn a_gpu_near_its_slowdown_temperature_is_hot_and_throttling_outranks_it() {
        let mut health = Health {
            temperature_limits: Some(TemperatureLimits {
                slowdown_c: Some(87),
                shutdown_c: Some(92),
                ..TemperatureLimits::default()
            }),
            ..Health::default()
        };
        assert_eq!(health.mark(Some(81)), Mark::Ok);
        // A temperature no card has (a hand-edited snapshot): no overflow.
        assert!(matches!(health.mark(Some(u32::MAX)), Mark::Hot(_)));
        assert_eq!(health.mark(Some(82)), Mark::Hot("82 °C, slowdown at 87 °C".into()));
        assert_eq!(health.line(Some(86)).as_deref(), Some("hot: 86 °C, slowdown at 87 °C"));
        // No temperature, or no threshold: nothing is claimed.
        assert_eq!(health.mark(None), Mark::Ok);
        health.throttle_reasons = Some(reason_names(0x20));
        assert_eq!(health.mark(Some(88)), Mark::Throttled(vec!["thermal".into()]));
        health.throttle_reasons = None;
        health.temperature_limits = Some(TemperatureLimits::default());
        assert_eq!(health.mark(Some(120)), Mark::Ok);
    }

    #[test]
    fn a_fallen_nvlink_is_an_error_and_news_once() {
        let up = Health {
            nvlink: Some(NvLinks {
                active: vec![0, 1],
                inactive: vec![2],
                went_down: vec![],
            }),
            ..Health::default()
        };
        assert_eq!(up.mark(None), Mark::Ok, "an unused link is no fault");
        let fallen = Health {
            nvlink: Some(NvLinks {
                active: vec![0],
                inactive: vec![1, 2],
                went_down: vec![1],
            }),
            ..Health::default()
        };
        assert_eq!(fallen.line(None).as_deref(), Some("errors: NVLink 1 went down"));
        assert_eq!(news(Some(&up), Some(&fallen)), ["NVLink 1 went down"]);
        assert!(news(Some(&fallen), Some(&fallen)).is_empty());
    }

    #[test]
    fn unknown_counts_are_not_errors() {
        // ECC off: the counts are null, which is not "0 errors" and not an error.
        let health = Health {
            ecc: None,
            unavailable: BTreeMap::from([("ecc".to_string(), "ECC is off".to_string())]),
            ..Health::default()
        };
        assert_eq!(health.mark(None), Mark::Ok);
        assert_eq!(xid_meaning(12345), None);
    }
}
