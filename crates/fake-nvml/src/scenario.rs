//! The JSON scenario: what the fake driver reports. Every field is optional;
//! a query whose field is absent answers `NVML_ERROR_NOT_SUPPORTED`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// Function name → value (an NVML return code, or milliseconds to sleep).
pub type PerFunction<T> = BTreeMap<String, T>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<i32>,
    pub nvml_version: Option<String>,
    /// Returned by every nvmlInit* call.
    pub init_error: Option<u32>,
    /// Injected return codes for every call of a function, on any device.
    #[serde(default)]
    pub errors: PerFunction<u32>,
    /// Sleeps before answering, for every call of a function.
    #[serde(default)]
    pub hang_ms: PerFunction<u64>,
    /// Default record stride of the `_v3` process lists for every device.
    pub process_struct_bytes: Option<usize>,
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub pci_device_id: Option<u32>,
    pub pci_subsystem_id: Option<u32>,
    pub serial: Option<String>,
    /// NVML index; defaults to the position in `devices` (see [`Scenario::normalize`]).
    pub index: Option<u32>,
    pub minor_number: Option<u32>,
    /// `nvmlBrandType_t` value.
    pub brand: Option<u32>,
    /// `nvmlDeviceArchitecture_t` value.
    pub architecture: Option<u32>,
    pub cuda_compute_capability: Option<ComputeCapability>,
    pub memory: Option<Memory>,
    pub bar1: Option<Bar1>,
    pub utilization: Option<Utilization>,
    pub encoder_utilization: Option<u32>,
    pub decoder_utilization: Option<u32>,
    pub temperature_c: Option<u32>,
    #[serde(default)]
    pub temperature_thresholds: TemperatureThresholds,
    pub power_mw: Option<u32>,
    pub power_limit_mw: Option<u32>,
    /// The energy counter (nvmlDeviceGetTotalEnergyConsumption).
    pub energy: Option<crate::energy::Energy>,
    /// Defaults to `power_limit_mw`.
    pub power_management_limit_mw: Option<u32>,
    pub power_limit_constraints_mw: Option<MinMax>,
    /// P-state number (0..15, 32 = unknown); answers both performance and power state.
    pub performance_state: Option<u32>,
    /// Each NVLink's state (true: active), by link number; absent: the
    /// card has no NVLink (NOT_SUPPORTED); past the last link,
    /// INVALID_ARGUMENT (nvmlDeviceGetNvLinkState).
    pub nvlink: Option<Vec<bool>>,
    pub fan_percent: Option<u32>,
    /// Defaults to 1 when `fan_percent` is given.
    pub num_fans: Option<u32>,
    #[serde(default)]
    pub clocks: Clocks,
    #[serde(default)]
    pub max_clocks: Clocks,
    #[serde(default)]
    pub pcie: Pcie,
    pub driver_model: Option<CurrentPending>,
    pub compute_mode: Option<u32>,
    pub persistence_mode: Option<bool>,
    pub display_active: Option<bool>,
    pub display_mode: Option<bool>,
    #[serde(default)]
    pub ecc: Ecc,
    #[serde(default)]
    pub health: crate::health::Health,
    pub mig_mode: Option<CurrentPending>,
    /// nvmlDeviceGetMaxMigDeviceCount; defaults to the number of
    /// `mig_devices` when `mig_mode` is given.
    pub max_mig_device_count: Option<u32>,
    /// The MIG devices (one per compute instance), by MIG device index. Only
    /// with `mig_mode.current` 1.
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
    /// 64-bit words of the CPU affinity mask.
    pub cpu_affinity: Option<Vec<u64>>,
    pub compute_processes: Option<Vec<Process>>,
    pub graphics_processes: Option<Vec<Process>>,
    pub mps_compute_processes: Option<Vec<Process>>,
    pub process_utilization: Option<Vec<ProcessUtilization>>,
    /// Record stride the `_v3` process lists write: 24 (correct) or 32 (R530/535 bug).
    pub process_struct_bytes: Option<usize>,
    /// Extra processes that appear between the count call and the fill call.
    #[serde(default)]
    pub process_list_grows_by: u32,
    /// After this many calls touching the device, every one answers GPU_IS_LOST.
    pub lost_after_calls: Option<u64>,
    #[serde(default)]
    pub errors: PerFunction<u32>,
    #[serde(default)]
    pub hang_ms: PerFunction<u64>,
    /// Set by [`Scenario::normalize`]: the device's position in `devices`.
    #[serde(skip)]
    pub position: usize,
    /// Set by [`Scenario::normalize`] on the devices that stand for MIG
    /// handles: which instance of which GPU they are.
    #[serde(skip)]
    pub mig: Option<MigPlace>,
    /// Set by [`Scenario::normalize`]: what each MIG device handle answers,
    /// by MIG device index, as a device of its own.
    #[serde(skip)]
    pub mig_handles: Vec<Device>,
}

/// A MIG device as the scenario spells it: what NVML answers on its handle.
/// Everything else on a MIG handle is NOT_SUPPORTED, as it is per instance
/// in NVML (utilization, temperature, power, clocks are the board's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    /// e.g. "NVIDIA A100-SXM4-80GB MIG 3g.40gb".
    pub name: Option<String>,
    /// e.g. "MIG-5c1b2c7e-...".
    pub uuid: Option<String>,
    pub memory: Option<Memory>,
    #[serde(default)]
    pub errors: PerFunction<u32>,
}

/// Where a MIG handle sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigPlace {
    /// The parent GPU's position in `devices`.
    pub parent: usize,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeCapability {
    pub major: i32,
    pub minor: i32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub total: u64,
    pub used: u64,
    pub free: u64,
    #[serde(default)]
    pub reserved: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bar1 {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    pub gpu: u32,
    pub memory: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemperatureThresholds {
    pub shutdown: Option<u32>,
    pub slowdown: Option<u32>,
    pub mem_max: Option<u32>,
    pub gpu_max: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinMax {
    pub min: u32,
    pub max: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clocks {
    pub graphics_mhz: Option<u32>,
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub video_mhz: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pcie {
    pub gen: Option<u32>,
    pub width: Option<u32>,
    pub max_gen: Option<u32>,
    pub max_width: Option<u32>,
    pub tx_kbps: Option<u32>,
    pub rx_kbps: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentPending {
    pub current: u32,
    pub pending: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ecc {
    pub current: Option<bool>,
    /// Defaults to `current`.
    pub pending: Option<bool>,
    pub volatile_corrected: Option<u64>,
    pub volatile_uncorrected: Option<u64>,
    pub aggregate_corrected: Option<u64>,
    pub aggregate_uncorrected: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    /// `null` (or absent): NVML_VALUE_NOT_AVAILABLE, as under Windows WDDM.
    pub used_memory: Option<u64>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// usedGpuCcProtectedMemory of the 32-byte record.
    #[serde(default)]
    pub cc_protected_memory: u64,
    /// What nvmlSystemGetProcessName answers for this pid.
    pub name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessUtilization {
    pub pid: u32,
    pub sm: u32,
    pub mem: u32,
    #[serde(default)]
    pub enc: u32,
    #[serde(default)]
    pub dec: u32,
    #[serde(default)]
    pub jpg: u32,
    #[serde(default)]
    pub ofa: u32,
    /// µs; absent: the time of the query, so the sample is always new.
    pub timestamp: Option<u64>,
}

/// The process lists a device has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessKind {
    Compute,
    Graphics,
    Mps,
}

/// A PCI address, parsed from `[domain:]bus:device.function` (hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl PciAddress {
    pub fn parse(text: &str) -> Option<PciAddress> {
        let (rest, function) = text.trim().rsplit_once('.')?;
        let mut parts = rest.rsplit(':');
        let device = parts.next()?;
        let bus = parts.next()?;
        let domain = parts.next().unwrap_or("0");
        if parts.next().is_some() {
            return None;
        }
        let hex = |digits: &str| u32::from_str_radix(digits, 16).ok();
        Some(PciAddress {
            domain: hex(domain)?,
            bus: hex(bus)?,
            device: hex(device)?,
            function: hex(function)?,
        })
    }

    /// NVML's `busId`: `DDDDDDDD:BB:DD.F`, uppercase hex.
    pub fn bus_id(&self) -> String {
        format!(
            "{:08X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }

    /// NVML's `busIdLegacy` (and the v1 `busId`): `DDDD:BB:DD.F`.
    pub fn legacy_bus_id(&self) -> String {
        format!(
            "{:04X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl Device {
    /// The parsed `pci_bus_id` (checked when the scenario is loaded).
    pub fn pci_address(&self) -> Option<PciAddress> {
        self.pci_bus_id.as_deref().and_then(PciAddress::parse)
    }

    pub fn processes(&self, kind: ProcessKind) -> Option<&[Process]> {
        match kind {
            ProcessKind::Compute => self.compute_processes.as_deref(),
            ProcessKind::Graphics => self.graphics_processes.as_deref(),
            ProcessKind::Mps => self.mps_compute_processes.as_deref(),
        }
    }

    /// MIG mode is on now (`mig_mode.current` 1).
    pub fn mig_enabled(&self) -> bool {
        self.mig_mode.as_ref().is_some_and(|mode| mode.current == 1)
    }

    /// What the handle of `mig` answers: its own name, UUID, memory and
    /// errors, and of the parent's process records those of its instance
    /// (in MIG mode, a MIG handle lists its compute instance's processes).
    fn mig_handle(&self, position: usize, mig: &MigDevice) -> Device {
        let place = MigPlace {
            parent: position,
            gpu_instance_id: mig.gpu_instance_id,
            compute_instance_id: mig.compute_instance_id,
        };
        let of_instance = |list: &Option<Vec<Process>>| {
            list.as_ref().map(|processes| {
                processes
                    .iter()
                    .filter(|p| {
                        p.gpu_instance_id == Some(place.gpu_instance_id)
                            && p.compute_instance_id == Some(place.compute_instance_id)
                    })
                    .cloned()
                    .collect()
            })
        };
        Device {
            name: mig.name.clone(),
            uuid: mig.uuid.clone(),
            memory: mig.memory.clone(),
            errors: mig.errors.clone(),
            compute_processes: of_instance(&self.compute_processes),
            graphics_processes: of_instance(&self.graphics_processes),
            mps_compute_processes: of_instance(&self.mps_compute_processes),
            process_struct_bytes: self.process_struct_bytes,
            position,
            mig: Some(place),
            ..Device::default()
        }
    }

    /// Every process the device lists, in any list.
    pub fn all_processes(&self) -> impl Iterator<Item = &Process> {
        [ProcessKind::Compute, ProcessKind::Graphics, ProcessKind::Mps]
            .into_iter()
            .filter_map(|kind| self.processes(kind))
            .flatten()
    }
}

impl Scenario {
    /// Reads and checks a scenario file; the error names the file.
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let mut scenario: Scenario = fake_dll::load_scenario("fake-nvml", path)?;
        scenario
            .normalize()
            .map_err(|e| format!("fake-nvml: invalid {}: {e}", path.display()))?;
        Ok(scenario)
    }

    /// Resolves the defaults that depend on position or on top-level settings.
    fn normalize(&mut self) -> Result<(), String> {
        let default_stride = self.process_struct_bytes.unwrap_or(24);
        for (position, device) in self.devices.iter_mut().enumerate() {
            let stride = device.process_struct_bytes.unwrap_or(default_stride);
            if stride != 24 && stride != 32 {
                return Err(format!("process_struct_bytes must be 24 or 32, not {stride}"));
            }
            device.process_struct_bytes = Some(stride);
            if let (Some(text), None) = (&device.pci_bus_id, device.pci_address()) {
                return Err(format!("pci_bus_id {text:?} is not [domain:]bus:device.function"));
            }
            device.index.get_or_insert(position as u32);
            if device.fan_percent.is_some() {
                device.num_fans.get_or_insert(1);
            }
            if device.power_management_limit_mw.is_none() {
                device.power_management_limit_mw = device.power_limit_mw;
            }
            if device.ecc.pending.is_none() {
                device.ecc.pending = device.ecc.current;
            }
            device.position = position;
            if !device.mig_devices.is_empty() && !device.mig_enabled() {
                return Err("mig_devices need mig_mode.current 1".into());
            }
            if device.mig_mode.is_some() {
                let count = device.mig_devices.len() as u32;
                let max = *device.max_mig_device_count.get_or_insert(count);
                if max < count {
                    return Err(format!(
                        "max_mig_device_count {max} is less than the {count} mig_devices"
                    ));
                }
            }
            device.mig_handles = device
                .mig_devices
                .iter()
                .map(|mig| device.mig_handle(position, mig))
                .collect();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_fills_defaults_and_rejects_bad_strides() {
        let mut s: Scenario = serde_json::from_str(
            r#"{"process_struct_bytes": 32,
                "devices": [{"power_limit_mw": 5, "fan_percent": 40, "ecc": {"current": true}},
                            {"index": 7, "process_struct_bytes": 24}]}"#,
        )
        .unwrap();
        s.normalize().unwrap();
        assert_eq!(s.devices[0].index, Some(0));
        assert_eq!(s.devices[0].process_struct_bytes, Some(32));
        assert_eq!(s.devices[0].power_management_limit_mw, Some(5));
        assert_eq!(s.devices[0].num_fans, Some(1));
        assert_eq!(s.devices[0].ecc.pending, Some(true));
        assert_eq!(s.devices[1].index, Some(7));
        assert_eq!(s.devices[1].process_struct_bytes, Some(24));
        assert_eq!(s.devices[1].num_fans, None);

        let mut bad: Scenario = serde_json::from_str(r#"{"devices": [{"process_struct_bytes": 16}]}"#).unwrap();
        assert_eq!(
            bad.normalize().unwrap_err(),
            "process_struct_bytes must be 24 or 32, not 16"
        );
    }

    #[test]
    fn pci_addresses() {
        let a = PciAddress::parse("00000000:af:00.0").unwrap();
        assert_eq!(
            a,
            PciAddress {
                domain: 0,
                bus: 0xaf,
                device: 0,
                function: 0
            }
        );
        assert_eq!(a.bus_id(), "00000000:AF:00.0");
        assert_eq!(a.legacy_bus_id(), "0000:AF:00.0");
        assert_eq!(PciAddress::parse("01:02.3").unwrap().bus_id(), "00000000:01:02.3");
        assert_eq!(PciAddress::parse("0:01:00"), None);
        assert_eq!(PciAddress::parse("1:2:3:4.0"), None);
        assert_eq!(PciAddress::parse("zz:00.0"), None);
    }

    #[test]
    fn unknown_fields_are_errors() {
        let err = serde_json::from_str::<Scenario>(r#"{"devices": [{"temprature_c": 3}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `temprature_c`"), "{err}");
    }
}
