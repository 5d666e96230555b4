//! Does `gputaskman --json` say what `nvidia-smi` says? The checks of
//! scripts/device-check.sh, as a pure function of the two programs' output
//! taken a moment apart:
//!
//! - every GPU nvidia-smi lists is a gputaskman device of the same index,
//!   its total memory within nvidia-smi's rounding (it prints whole MiB)
//!   and its used memory within [`USED_DRIFT`] (the two readings are not
//!   the same instant);
//! - every holder (`gpu-hog`) is listed by both, gputaskman's VRAM figure
//!   within nvidia-smi's rounding of its `used_memory`, and at least what
//!   the holder allocated, the rest being the CUDA context, which nvidia-smi
//!   counts the same way and which stays under [`MAX_CONTEXT_OVERHEAD`]; a
//!   context-only holder (`PID:context`) must show more than 0, the
//!   context's own cost.
//!
//! Input comes from `--format=csv,noheader,nounits`:
//! `nvidia-smi --query-gpu=index,memory.total,memory.used` gives
//! `0, 81559, 7345` and `--query-compute-apps=pid,used_memory` gives
//! `4242, 2534`. A field nvidia-smi cannot fill reads `[N/A]` (or `[Not
//! Supported]`): that is unknown, and a check that needs it fails.

use serde_json::Value;
use std::fmt::Write;

const MIB: u64 = 1 << 20;
/// How far device used memory may move between the two readings.
pub const USED_DRIFT: u64 = 64 * MIB;
/// A CUDA context costs a few hundred MiB (more with large kernels
/// loaded); more than this on top of the allocation is not a context.
pub const MAX_CONTEXT_OVERHEAD: u64 = 1 << 30;

/// A process that allocated `bytes` of device memory (0: a context alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub bytes: u64,
}

impl std::str::FromStr for Holder {
    type Err = String;

    /// `PID:SIZE`, e.g. `4242:2GiB`, or `PID:context` for a holder of a
    /// context alone.
    fn from_str(text: &str) -> Result<Holder, String> {
        let (pid, size) = text
            .split_once(':')
            .ok_or_else(|| format!("{text:?}: give PID:SIZE, e.g. 4242:2GiB, or PID:context"))?;
        Ok(Holder {
            pid: pid.trim().parse().map_err(|_| format!("{pid:?}: not a PID"))?,
            bytes: if size.trim() == "context" {
                0
            } else {
                crate::parse_size(size)?
            },
        })
    }
}

/// One check and what it found.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub pass: bool,
    pub what: String,
    pub detail: String,
}

/// Every check, in order.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    fn check(&mut self, pass: bool, what: impl Into<String>, detail: impl Into<String>) {
        self.checks.push(Check {
            pass,
            what: what.into(),
            detail: detail.into(),
        });
    }

    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| !c.pass).count()
    }

    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.failures() == 0
    }

    /// One line a check, then the verdict.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let _ = writeln!(
                out,
                "{}  {}: {}",
                if c.pass { "PASS" } else { "FAIL" },
                c.what,
                c.detail
            );
        }
        let _ = writeln!(
            out,
            "{}: {} checks, {} failed",
            if self.passed() { "PASSED" } else { "FAILED" },
            self.checks.len(),
            self.failures()
        );
        out
    }
}

/// A number nvidia-smi printed, or None for `[N/A]` and the like.
fn smi_number(field: &str) -> Result<Option<u64>, String> {
    let field = field.trim();
    if field.starts_with('[') && field.ends_with(']') {
        return Ok(None);
    }
    field
        .parse()
        .map(Some)
        .map_err(|_| format!("{field:?} is not a number"))
}

/// The rows of a `csv,noheader,nounits` answer with `columns` fields each.
fn smi_rows(text: &str, columns: usize) -> Vec<Result<Vec<Option<u64>>, String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != columns {
                return Err(format!("{line:?}: {} fields where {columns} were asked", fields.len()));
            }
            fields.into_iter().map(smi_number).collect()
        })
        .collect()
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// Whether a byte count is what nvidia-smi's whole MiB stand for (it
/// drops the fraction; a rounding to the nearest is inside too).
fn within_rounding(bytes: u64, smi_mib: u64) -> bool {
    bytes.abs_diff(smi_mib.saturating_mul(MIB)) < MIB
}

/// The checks of one moment: `snapshot` is `gputaskman --json`,
/// `smi_gpus` and `smi_apps` nvidia-smi's two answers.
pub fn compare(snapshot: &Value, smi_gpus: &str, smi_apps: &str, holders: &[Holder]) -> Report {
    let mut report = Report::default();
    compare_gpus(&mut report, snapshot, smi_gpus);
    compare_holders(&mut report, snapshot, smi_apps, holders);
    report
}

/// Each whole GPU's count, total and used memory against nvidia-smi's
/// `--query-gpu` lines.
fn compare_gpus(report: &mut Report, snapshot: &Value, smi_gpus: &str) {
    let devices: Vec<&Value> = snapshot["devices"]
        .as_array()
        .map(|d| d.iter().collect())
        .unwrap_or_default();
    // Whole GPUs of NVML: MIG instances have a parent.
    let gpus: Vec<&Value> = devices
        .iter()
        .copied()
        .filter(|d| d["backend"] == "nvml" && d["parent"].is_null())
        .collect();
    let rows = smi_rows(smi_gpus, 3);
    report.check(
        !rows.is_empty() && rows.len() == gpus.len(),
        "GPUs",
        format!("nvidia-smi lists {}, gputaskman {}", rows.len(), gpus.len()),
    );
    for row in rows {
        let (index, total, used) = match row.as_deref() {
            Ok([Some(index), total, used]) => (*index, *total, *used),
            Ok(_) => {
                report.check(false, "nvidia-smi GPU line", "no index");
                continue;
            }
            Err(e) => {
                report.check(false, "nvidia-smi GPU line", e.clone());
                continue;
            }
        };
        let Some(device) = gpus.iter().find(|d| d["index"] == index) else {
            report.check(
                false,
                format!("GPU {index}"),
                "nvidia-smi lists it, gputaskman does not",
            );
            continue;
        };
        for (what, ours, theirs, fits) in [
            ("memory total", device["memory_total_bytes"].as_u64(), total, None),
            (
                "memory used",
                device["memory_used_bytes"].as_u64(),
                used,
                Some(USED_DRIFT),
            ),
        ] {
            let what = format!("GPU {index} {what}");
            let (Some(ours), Some(theirs)) = (ours, theirs) else {
                report.check(
                    false,
                    what,
                    format!(
                        "gputaskman {}, nvidia-smi {}: a side cannot say",
                        ours.map_or("n/a".into(), mib),
                        theirs.map_or("[N/A]".into(), |t| format!("{t} MiB"))
                    ),
                );
                continue;
            };
            let pass = match fits {
                None => within_rounding(ours, theirs),
                Some(drift) => ours.abs_diff(theirs.saturating_mul(MIB)) <= drift,
            };
            report.check(pass, what, format!("gputaskman {}, nvidia-smi {theirs} MiB", mib(ours)));
        }
    }
}

/// Each holder's VRAM against nvidia-smi's `--query-compute-apps` line for
/// its PID, and the context overhead above what it allocated.
fn compare_holders(report: &mut Report, snapshot: &Value, smi_apps: &str, holders: &[Holder]) {
    let apps: Vec<(u64, Option<u64>)> = smi_rows(smi_apps, 2)
        .into_iter()
        .filter_map(|row| match row.as_deref() {
            Ok([Some(pid), used]) => Some((*pid, *used)),
            _ => None,
        })
        .collect();
    for holder in holders {
        let what = match holder.bytes {
            0 => format!("holder {} (a context, nothing allocated)", holder.pid),
            bytes => format!("holder {} ({})", holder.pid, mib(bytes)),
        };
        let theirs = apps
            .iter()
            .find(|(pid, _)| *pid == u64::from(holder.pid))
            .map(|(_, u)| *u);
        let ours = snapshot["processes"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["pid"] == holder.pid))
            .and_then(|p| p["gpu"].as_array())
            .and_then(|gpu| {
                gpu.iter()
                    .filter(|g| g["source"] == "nvml")
                    .filter_map(|g| g["vram_bytes"].as_u64())
                    .max()
            });
        let (ours, theirs) = match (ours, theirs) {
            (Some(ours), Some(Some(theirs))) => (ours, theirs),
            (ours, theirs) => {
                let said = match theirs {
                    None => "not listed".to_string(),
                    Some(None) => "[N/A]".to_string(),
                    Some(Some(t)) => format!("{t} MiB"),
                };
                report.check(
                    false,
                    what,
                    format!(
                        "gputaskman {}, nvidia-smi {said}",
                        ours.map_or("lists no VRAM for it".into(), mib)
                    ),
                );
                continue;
            }
        };
        let overhead = ours.checked_sub(holder.bytes);
        // A context costs something: 0 for a context-only holder means the
        // figure is not its.
        let pass = within_rounding(ours, theirs) && overhead.is_some_and(|o| o <= MAX_CONTEXT_OVERHEAD && o > 0);
        report.check(
            pass,
            what,
            format!(
                "gputaskman {}, nvidia-smi {theirs} MiB; context overhead {}",
                mib(ours),
                overhead.map_or_else(|| "negative: less than was allocated".into(), mib)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_parse_as_pid_and_size() {
        assert_eq!(
            "42:2GiB".parse(),
            Ok(Holder {
                pid: 42,
                bytes: 2 << 30
            })
        );
        assert!("42".parse::<Holder>().is_err());
        assert!("x:2GiB".parse::<Holder>().is_err());
        assert!("42:2GB".parse::<Holder>().is_err());
        assert_eq!("42:context".parse(), Ok(Holder { pid: 42, bytes: 0 }));
    }

    #[test]
    fn nvidia_smi_placeholders_are_unknown_and_garbage_is_an_error() {
        assert_eq!(smi_number(" [N/A]"), Ok(None));
        assert_eq!(smi_number("[Not Supported]"), Ok(None));
        assert_eq!(smi_number(" 81559 "), Ok(Some(81559)));
        assert!(smi_number("81559 MiB").is_err());
        let rows = smi_rows("0, 1, 2\n\n1, 2\n", 3);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], Ok(vec![Some(0), Some(1), Some(2)]));
        assert!(rows[1].is_err());
    }

    #[test]
    fn whole_mib_cover_the_fraction_nvidia_smi_drops() {
        assert!(within_rounding(81559 * MIB, 81559));
        assert!(within_rounding(81559 * MIB + MIB - 1, 81559));
        assert!(within_rounding(81559 * MIB - MIB / 2, 81559));
        assert!(!within_rounding(81560 * MIB, 81559));
        assert!(!within_rounding(81558 * MIB, 81559));
    }

    #[test]
    fn a_context_only_holder_passes_with_its_cost_and_fails_with_none() {
        let snapshot = |vram: u64| {
            serde_json::json!({
                "devices": [{"index": 0, "backend": "nvml", "memory_total_bytes": 1000 * MIB, "memory_used_bytes": 500 * MIB}],
                "processes": [{"pid": 7, "gpu": [{"source": "nvml", "vram_bytes": vram}]}]
            })
        };
        let context = [Holder { pid: 7, bytes: 0 }];
        let report = compare(&snapshot(500 * MIB), "0, 1000, 500", "7, 500", &context);
        assert!(report.passed(), "{}", report.render());
        assert!(report.render().contains(
            "PASS  holder 7 (a context, nothing allocated): gputaskman 500.0 MiB, nvidia-smi 500 MiB; context overhead 500.0 MiB"
        ));
        let report = compare(&snapshot(0), "0, 1000, 500", "7, 0", &context);
        assert_eq!(report.failures(), 1, "{}", report.render());
    }

    #[test]
    fn an_empty_comparison_is_no_pass() {
        let report = compare(&serde_json::json!({"devices": []}), "", "", &[]);
        assert!(!report.passed(), "{}", report.render());
    }
}
