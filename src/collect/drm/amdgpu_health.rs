//! An amdgpu card's health from sysfs: the throttlers holding its clocks
//! down (the ASIC-independent bits of `gpu_metrics`), its RAS error counts
//! (`ras/<block>_err_count`), its power limits (hwmon `power1_cap*`) and
//! its critical and shutdown temperatures (hwmon `temp*_crit`,
//! `temp*_emergency`). What amdgpu has no counterpart for (violation
//! time, XIDs, remapped rows) is null with the reason, never 0.

use super::sysfs::{quiet, DrmDevice, Hwmon, Reader};
use crate::snapshot::health::{amd_throttler_names, EccCounts, Health, PowerLimits, TemperatureLimits};
use crate::snapshot::{Device, QueryError};
use std::io::Read;
use std::path::Path;

/// `gpu_metrics` tables are a few hundred bytes (v1.6, the largest, about
/// 1 KiB); a longer file is not one.
const GPU_METRICS_LIMIT: u64 = 16 << 10;
/// `ras/` holds one `<block>_err_count` per IP block, about a dozen.
const MAX_RAS_BLOCKS: usize = 64;

/// The ASIC-independent throttler bits (`SMU_THROTTLER_*_BIT`) of a
/// `gpu_metrics` table, or why it gives none.
///
/// The table is the kernel's `struct gpu_metrics_vX_Y`
/// (drivers/gpu/drm/amd/include/kgd_pp_interface.h), little-endian with
/// C's natural alignment, after a 4-byte header: `structure_size` (u16),
/// `format_revision`, `content_revision`. `indep_throttle_status` (u64)
/// is at byte 112 of v1.3 (discrete cards: RX 5000 to 7000, MI100, MI200)
/// and at byte 120 of v2.2 to v2.4 (APUs); the other layouts carry only
/// ASIC-dependent bits, whose meaning differs per chip.
pub fn indep_throttle_status(table: &[u8]) -> Result<u64, String> {
    let [lo, hi, format, content] = *table
        .get(..4)
        .and_then(|h| <&[u8; 4]>::try_from(h).ok())
        .ok_or_else(|| format!("gpu_metrics is {} bytes, shorter than its header", table.len()))?;
    let size = usize::from(u16::from_le_bytes([lo, hi]));
    let offset = match (format, content) {
        (1, 3) => 112,
        (2, 2..=4) => 120,
        (1, 0..=2 | 4..=6) | (2, 0..=1) | (3, 0) => {
            return Err(format!(
                "gpu_metrics v{format}.{content} has only chip-specific throttle bits, which are not decoded"
            ))
        }
        _ => {
            return Err(format!(
                "gpu_metrics v{format}.{content} is a layout this gputaskman does not know"
            ))
        }
    };
    let field = table
        .get(offset..offset + 8)
        .filter(|_| size >= offset + 8)
        .ok_or_else(|| {
            format!(
                "gpu_metrics v{format}.{content} is {} bytes (its header says {size}), shorter than that layout",
                table.len()
            )
        })?;
    let status = u64::from_le_bytes(field.try_into().expect("8 bytes"));
    // The kernel fills a table with 0xff before the SMU's figures go in
    // (smu_cmn_init_soft_gpu_metrics): all ones is a field left unset.
    if status == u64::MAX {
        return Err(format!(
            "this card leaves gpu_metrics v{format}.{content}'s throttle status unset"
        ));
    }
    Ok(status)
}

/// The summed counts of `ras/*_err_count` (`ue: N`, `ce: N` lines, one file
/// per IP block); None when the card has no RAS (`ras/` absent: consumer
/// cards).
pub fn ras_counts(device_dir: &Path) -> Result<Option<EccCounts>, String> {
    let dir = device_dir.join("ras");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_err_count"))
        })
        .collect();
    files.sort();
    if files.len() > MAX_RAS_BLOCKS {
        return Err(format!("{} RAS blocks, more than a card has: not summed", files.len()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    let (mut corrected, mut uncorrected) = (0u64, 0u64);
    for file in files {
        let block = file.file_name().unwrap_or_default().to_string_lossy();
        let text = super::sysfs::read_text(&file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .ok_or_else(|| format!("{block}: the driver declined to answer"))?;
        let count = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    format!(
                        "{block}: no `{key}` count in {:?}",
                        text.chars().take(80).collect::<String>()
                    )
                })
        };
        uncorrected = uncorrected.saturating_add(count("ue:")?);
        corrected = corrected.saturating_add(count("ce:")?);
    }
    Ok(Some(EccCounts {
        volatile_corrected: Some(corrected),
        volatile_uncorrected: Some(uncorrected),
        aggregate_corrected: None,
        aggregate_uncorrected: None,
    }))
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(GPU_METRICS_LIMIT)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Fills `device.health` for an awake amdgpu card; `hwmon` is where its
/// sensors were read.
pub(super) fn read(dev: &DrmDevice, device: &mut Device, hwmon: Option<&Hwmon>) {
    let mut errors = Vec::new();
    read_into(&mut Reader { errors: &mut errors }, dev, device, hwmon);
    device.errors.extend(errors);
}

fn read_into(r: &mut Reader, dev: &DrmDevice, device: &mut Device, hwmon: Option<&Hwmon>) {
    let mut health = Health::default();
    let mut unavailable = |field: &str, why: String| {
        health.unavailable.insert(field.to_string(), why);
    };
    let metrics = dev.dir.join("gpu_metrics");
    let mut failed = |query: &str, message: String| {
        r.errors.push(QueryError {
            query: query.to_string(),
            message,
        })
    };
    let status = match read_capped(&metrics) {
        Ok(table) => indep_throttle_status(&table),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("no gpu_metrics (a kernel before 5.10, or a chip without it)".to_string())
        }
        Err(e) if quiet(&e) => Err(format!("the driver declined to answer gpu_metrics: {e}")),
        // A real failure: an error of the sample, not only a null.
        Err(e) => {
            failed("gpu_metrics", e.to_string());
            Err(format!("the query failed: {e}"))
        }
    };
    let reasons = status.map(amd_throttler_names);
    let ecc = ras_counts(&dev.dir);
    match &ecc {
        Ok(None) => unavailable("ecc", "no RAS error counters (ras/ absent: this card has none)".into()),
        Err(why) => {
            failed("ras error counts", why.clone());
            unavailable("ecc", format!("the query failed: {why}"));
        }
        Ok(Some(_)) => {}
    }
    if let Err(why) = &reasons {
        unavailable("throttle_reasons", why.clone());
    }
    for (field, why) in [
        ("violations", "amdgpu keeps no time counters for throttling"),
        ("xid_events", "XIDs are NVIDIA's"),
        ("remapped_rows", "row remapping is NVIDIA's"),
        (
            "retired_pages",
            "amdgpu lists bad pages (ras/gpu_vram_bad_pages), not read",
        ),
        (
            "performance_state",
            "amdgpu has no P-states: its DPM levels are the clocks",
        ),
    ] {
        unavailable(field, why.into());
    }
    health.throttle_source = reasons.is_ok().then(|| "gpu_metrics".to_string());
    health.throttle_reasons = reasons.ok();
    health.ecc = ecc.ok().flatten();
    if let Some(Hwmon {
        dir: h,
        temperature_sensor,
    }) = hwmon
    {
        let watts = |r: &mut Reader, name: &str| r.num(&h.join(name)).filter(|uw| *uw > 0).map(|uw| uw as f64 / 1e6);
        let limits = PowerLimits {
            enforced_w: None,
            current_w: watts(r, "power1_cap"),
            default_w: watts(r, "power1_cap_default"),
            min_w: watts(r, "power1_cap_min"),
            max_w: watts(r, "power1_cap_max"),
        };
        health.power_limits = (limits != PowerLimits::default()).then_some(limits);
        let sensor = temperature_sensor.unwrap_or(1);
        // Millidegrees: the sensor's critical maximum, and its emergency
        // maximum, where the chip shuts down (drivers/gpu/drm/amd/pm/
        // amdgpu_pm.c, "hwmon interfaces for GPU temperature").
        let celsius = |r: &mut Reader, what: &str| {
            r.num(&h.join(format!("temp{sensor}_{what}")))
                .and_then(super::sysfs::celsius)
                .filter(|c| (1..=150).contains(c))
        };
        let limits = TemperatureLimits {
            slowdown_c: celsius(r, "crit"),
            shutdown_c: celsius(r, "emergency"),
            ..TemperatureLimits::default()
        };
        health.temperature_limits = (limits != TemperatureLimits::default()).then_some(limits);
    }
    // Limits alone say nothing of how the card stands: no mark is claimed.
    if health.throttle_reasons.is_some() || health.ecc.is_some() {
        device.health = Some(health);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `size` bytes with the header and `status` at `offset`.
    fn table(format: u8, content: u8, size: u16, offset: usize, status: u64) -> Vec<u8> {
        let mut t = vec![0u8; usize::from(size)];
        t[..2].copy_from_slice(&size.to_le_bytes());
        t[2] = format;
        t[3] = content;
        if offset + 8 <= t.len() {
            t[offset..offset + 8].copy_from_slice(&status.to_le_bytes());
        }
        t
    }

    #[test]
    fn the_independent_throttle_bits_are_read_where_each_layout_has_them() {
        // Sizes are the kernel structs' (gcc: sizeof struct gpu_metrics_v1_3
        // = 120, v2_2 = 128, v2_3 = 152, v2_4 = 168).
        let hot = (1u64 << 36) | 1;
        assert_eq!(indep_throttle_status(&table(1, 3, 120, 112, hot)), Ok(hot));
        for (content, size) in [(2, 128), (3, 152), (4, 168)] {
            assert_eq!(indep_throttle_status(&table(2, content, size, 120, hot)), Ok(hot));
        }
        // v1.0 to v1.2, v2.0, v2.1, v1.4 to v1.6, v3.0: no such field.
        for (format, content) in [(1, 0), (1, 2), (1, 4), (1, 6), (2, 0), (2, 1), (3, 0)] {
            let e = indep_throttle_status(&table(format, content, 200, 112, hot)).unwrap_err();
            assert!(e.contains("chip-specific"), "{e}");
        }
        // A layout newer than this code: not claimed to be either.
        for (format, content) in [(1, 7), (2, 5), (3, 1), (9, 9)] {
            let e = indep_throttle_status(&table(format, content, 200, 112, hot)).unwrap_err();
            assert!(e.contains("does not know"), "{e}");
        }
    }

    #[test]
    fn short_unset_and_hostile_tables_are_reasons_not_figures() {
        assert!(indep_throttle_status(&[]).unwrap_err().contains("0 bytes"));
        assert!(indep_throttle_status(&[120, 0, 1]).is_err());
        // Cut short of the field, or a header naming a shorter table.
        assert!(indep_throttle_status(&table(1, 3, 116, 112, 1)).is_err());
        let mut lying = table(1, 3, 120, 112, 1);
        lying[..2].copy_from_slice(&100u16.to_le_bytes());
        assert!(indep_throttle_status(&lying).unwrap_err().contains("header says 100"));
        let unset = indep_throttle_status(&table(2, 2, 128, 120, u64::MAX)).unwrap_err();
        assert!(unset.contains("unset"), "{unset}");
        // Any bytes at all: an answer or a reason, never a panic.
        for len in 0..140 {
            for fill in [0u8, 0x55, 0xff] {
                let _ = indep_throttle_status(&vec![fill; len]);
            }
        }
    }

    #[test]
    fn ras_counts_are_summed_over_blocks_and_a_garbled_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ras_counts(dir.path()), Ok(None));
        let ras = dir.path().join("ras");
        std::fs::create_dir(&ras).unwrap();
        std::fs::write(ras.join("features"), "feature mask: 0x3fff\n").unwrap();
        std::fs::write(ras.join("umc_err_count"), "ue: 2\nce: 7\n").unwrap();
        std::fs::write(ras.join("gfx_err_count"), "ue: 1\nce: 0\nde: 0\n").unwrap();
        let counts = ras_counts(dir.path()).unwrap().unwrap();
        assert_eq!(
            (counts.volatile_uncorrected, counts.volatile_corrected),
            (Some(3), Some(7))
        );
        assert_eq!(counts.aggregate_uncorrected, None);
        std::fs::write(ras.join("sdma_err_count"), "Query currently inaccessible\n").unwrap();
        let e = ras_counts(dir.path()).unwrap_err();
        assert!(e.contains("sdma_err_count") && e.contains("inaccessible"), "{e}");
        // More blocks than a card has: not a partial total.
        std::fs::remove_file(ras.join("sdma_err_count")).unwrap();
        for i in 0..MAX_RAS_BLOCKS {
            std::fs::write(ras.join(format!("b{i}_err_count")), "ue: 0\nce: 0\n").unwrap();
        }
        let e = ras_counts(dir.path()).unwrap_err();
        assert!(e.contains("not summed"), "{e}");
    }
}
