//! Values an amdgpu, i915 or xe device publishes in sysfs, written into a
//! scratch device directory and read back by the real reader: every file
//! with any content gives a value, None or a query error, never a panic;
//! percentages stay within 0..=100.
#![no_main]

use gputaskman::snapshot::Device;
use gputaskman::collect::drm::sysfs::{self, DrmDevice};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The files read, relative to the device directory (the card directory is
/// the same one).
const FILES: &[&str] = &[
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "product_name",
    "unique_id",
    "mem_info_vram_total",
    "mem_info_vram_used",
    "mem_info_gtt_total",
    "mem_info_gtt_used",
    "mem_info_vis_vram_total",
    "mem_info_vis_vram_used",
    "gpu_busy_percent",
    "mem_busy_percent",
    "pp_dpm_sclk",
    "pp_dpm_mclk",
    "gt_act_freq_mhz",
    "gt_RP0_freq_mhz",
    "lmem_total_bytes",
    "gt/gt0/throttle_reason_status",
    "gt/gt0/throttle_reason_pl1",
    "tile0/physical_vram_size_bytes",
    "tile0/gt0/freq0/act_freq",
    "tile0/gt0/freq0/rp0_freq",
    "tile0/gt0/freq0/throttle/status",
    "tile0/gt0/freq0/throttle/reason_thermal",
    "hwmon/hwmon0/temp1_input",
    "hwmon/hwmon0/temp1_label",
    "hwmon/hwmon0/temp2_input",
    "hwmon/hwmon0/power1_average",
    "hwmon/hwmon0/energy1_input",
    "hwmon/hwmon0/power1_cap",
    "hwmon/hwmon0/pwm1",
    "hwmon/hwmon0/pwm1_max",
    "hwmon/hwmon0/freq1_input",
    "hwmon/hwmon0/freq2_input",
    "power/runtime_status",
];

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("gputaskman-fuzz-sysfs-{}", std::process::id()));
        for file in FILES {
            std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let dir = scratch();
    let parts = gputaskman_fuzz::split(rest, FILES.len());
    for (file, part) in FILES.iter().zip(&parts) {
        std::fs::write(dir.join(file), part).unwrap();
    }
    let driver = ["amdgpu", "i915", "xe", "nouveau"][usize::from(which) % 4];
    let dev = DrmDevice {
        key: "0000:03:00.0".into(),
        pci: Some("0000:03:00.0".into()),
        driver: Some(driver.into()),
        vendor_id: Some(0x1002),
        device_id: Some(0x744c),
        cards: vec!["card0".into()],
        renders: vec!["renderD128".into()],
        dir: dir.clone(),
        card_dir: Some(dir.clone()),
        integrated: which & 0x80 != 0,
        integrated_because: None,
    };
    let mut energy = None;
    for second in 1..=2 {
        let mut device = Device::default();
        sysfs::read_values(&dev, &mut device, &mut energy, Duration::from_secs(second));
        for pct in [device.gpu_util_percent, device.memory_activity_percent]
            .into_iter()
            .flatten()
        {
            assert!(pct <= 100, "percent {pct}");
        }
    }
    for part in &parts {
        let text = gputaskman_fuzz::text(part);
        let _ = sysfs::parse_u64(&text);
        let _ = sysfs::normalize_pci(&text);
        let _ = sysfs::display_only(&text);
    }
});
