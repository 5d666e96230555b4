//! A DRM device's entry in the snapshot: vendor, name (from pci.ids),
//! driver version, notes on its driver, nodes and kind, and the values each
//! vendor's driver publishes in sysfs (`sysfs::read_values`: amdgpu, i915,
//! xe and the rest).

use super::sysfs::{self, DrmDevice};
use crate::snapshot::Device;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where pci.ids usually is.
const PCI_IDS: [&str; 3] = [
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// Reads devices' entries, keeping what is looked up once (names) and
/// what the next reading needs (energy counters).
pub(super) struct DeviceReader {
    pci_ids: Vec<PathBuf>,
    names: HashMap<(u16, u16), Option<String>>,
    energy: HashMap<String, sysfs::EnergyReading>,
}

impl DeviceReader {
    pub(super) fn new() -> DeviceReader {
        DeviceReader {
            pci_ids: PCI_IDS.iter().map(PathBuf::from).collect(),
            names: HashMap::new(),
            energy: HashMap::new(),
        }
    }

    /// Where to look up device names (pci.ids); empty for none.
    pub(super) fn set_pci_ids(&mut self, files: Vec<PathBuf>) {
        self.pci_ids = files;
        self.names.clear();
    }

    /// The device's entry: what its driver publishes in sysfs, with notes on
    /// its driver, nodes and kind.
    pub(super) fn entry(&mut self, sys_root: &Path, dev: &DrmDevice, index: u32, now: Duration) -> Device {
        let mut device = Device {
            index,
            backend: "drm".into(),
            vendor: sysfs::vendor_name(dev.vendor_id, dev.driver.as_deref()),
            pci_bus_id: dev.pci.clone(),
            process_list_complete: true,
            ..Device::default()
        };
        device.name = self.name(dev);
        device.driver_version = dev.driver.as_ref().and_then(|d| {
            sysfs::read_text(&sys_root.join("module").join(d).join("version"))
                .ok()
                .flatten()
                .filter(|v| !v.is_empty())
        });
        let mut nodes: Vec<&str> = dev.cards.iter().chain(&dev.renders).map(String::as_str).collect();
        nodes.sort_unstable();
        device.notes.push(format!(
            "driver {}; nodes {}{}",
            dev.driver.as_deref().unwrap_or("none bound"),
            nodes.join(", "),
            match (dev.vendor_id, dev.device_id) {
                (Some(v), Some(d)) => format!("; PCI id {v:04x}:{d:04x}"),
                _ => String::new(),
            }
        ));
        if let Some(why) = dev.integrated_because {
            device.notes.push(format!(
                "integrated GPU ({why}): its memory is system RAM; per-process GTT/system memory is shown as Spill"
            ));
        }
        if dev.driver.as_deref().is_some_and(sysfs::display_only) {
            device
                .notes
                .push("a display controller only: no GPU engines or per-process memory".into());
        }
        let mut energy = self.energy.get(&dev.key).copied();
        let awake = sysfs::read_values(dev, &mut device, &mut energy, now);
        if let (Some(awake), Some("amdgpu")) = (awake, dev.driver.as_deref()) {
            super::amdgpu_health::read(dev, &mut device, awake.hwmon.as_ref());
        }
        if let Some(e) = energy {
            self.energy.insert(dev.key.clone(), e);
        }
        if device
            .clocks
            .as_ref()
            .is_some_and(|c| *c == crate::snapshot::Clocks::default())
        {
            device.clocks = None;
        }
        device
    }

    /// Its name in pci.ids, looked up once per PCI id; else the driver.
    fn name(&mut self, dev: &DrmDevice) -> Option<String> {
        let (Some(v), Some(d)) = (dev.vendor_id, dev.device_id) else {
            return dev.driver.clone();
        };
        let files = &self.pci_ids;
        let looked_up = self
            .names
            .entry((v, d))
            .or_insert_with(|| sysfs::pci_ids_name(files, v, d))
            .clone();
        Some(looked_up.unwrap_or_else(|| format!("{} [{v:04x}:{d:04x}]", dev.driver.as_deref().unwrap_or("GPU"))))
    }
}

/// A device as the backend line names it: driver and address.
pub(super) fn device_label(d: &DrmDevice) -> String {
    format!(
        "{} {}",
        d.driver.as_deref().unwrap_or("no driver"),
        d.pci.as_deref().unwrap_or(&d.key)
    )
}
