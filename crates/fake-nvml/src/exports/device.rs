//! Per-device queries other than process lists.

use std::os::raw::{c_char, c_int, c_uint, c_ulong};

use crate::abi::{self, Ret};
use crate::scenario::{Clocks, Device};
use crate::state::{get, handle_of, mig_handle_of, put, put_str, supported, CallResult};

/// NVML_ERROR_INVALID_ARGUMENT unless the caller's struct says `expected`;
/// NVML_ERROR_ARGUMENT_VERSION_MISMATCH when it says another version.
///
/// # Safety
/// `version` is NULL or readable.
unsafe fn check_version(version: *const c_uint, expected: c_uint) -> CallResult {
    if get(version)? != expected {
        return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    Ok(())
}

fn enable_state(enabled: bool) -> c_uint {
    c_uint::from(enabled)
}

device_fn!(nvmlDeviceGetIndex => (index: *mut c_uint) |d| put(index, supported(d.index)?));

device_fn!(nvmlDeviceGetName => (name: *mut c_char, length: c_uint) |d| {
    put_str(name, length, supported(d.name.as_deref())?)
});

device_fn!(nvmlDeviceGetUUID => (uuid: *mut c_char, length: c_uint) |d| {
    put_str(uuid, length, supported(d.uuid.as_deref())?)
});

device_fn!(nvmlDeviceGetSerial => (serial: *mut c_char, length: c_uint) |d| {
    put_str(serial, length, supported(d.serial.as_deref())?)
});

device_fn!(nvmlDeviceGetBrand => (type_: *mut c_uint) |d| put(type_, supported(d.brand)?));

device_fn!(nvmlDeviceGetArchitecture => (arch: *mut c_uint) |d| {
    put(arch, supported(d.architecture)?)
});

device_fn!(nvmlDeviceGetMinorNumber => (minorNumber: *mut c_uint) |d| {
    put(minorNumber, supported(d.minor_number)?)
});

device_fn!(nvmlDeviceGetCudaComputeCapability => (major: *mut c_int, minor: *mut c_int) |d| {
    let capability = supported(d.cuda_compute_capability.as_ref())?;
    put(major, capability.major)?;
    put(minor, capability.minor)
});

/// A string into a fixed C char array, NUL-padded (truncated if it had to be).
fn fixed<const N: usize>(text: &str) -> [u8; N] {
    let mut bytes = [0u8; N];
    let len = text.len().min(N - 1);
    bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
    bytes
}

device_fn!(nvmlDeviceGetPciInfo_v2 | nvmlDeviceGetPciInfo_v3 => (pci: *mut abi::PciInfo) |d| {
    let address = supported(d.pci_address())?;
    put(pci, abi::PciInfo {
        bus_id_legacy: fixed(&address.legacy_bus_id()),
        domain: address.domain,
        bus: address.bus,
        device: address.device,
        pci_device_id: d.pci_device_id.unwrap_or(0),
        pci_subsystem_id: d.pci_subsystem_id.unwrap_or(0),
        bus_id: fixed(&address.bus_id()),
    })
});

// The v1 struct is shorter than today's; only the head both share is written.
device_fn!(nvmlDeviceGetPciInfo => (pci: *mut abi::PciInfoV1Head) |d| {
    let address = supported(d.pci_address())?;
    put(pci, abi::PciInfoV1Head {
        bus_id: fixed(&address.legacy_bus_id()),
        domain: address.domain,
        bus: address.bus,
        device: address.device,
        pci_device_id: d.pci_device_id.unwrap_or(0),
        pci_subsystem_id: d.pci_subsystem_id.unwrap_or(0),
    })
});

// v1 `used` counts the reserved memory too, as the real driver's does.
device_fn!(nvmlDeviceGetMemoryInfo => (memory: *mut abi::Memory) |d| {
    let m = supported(d.memory.as_ref())?;
    put(memory, abi::Memory { total: m.total, free: m.free, used: m.used + m.reserved })
});

device_fn!(nvmlDeviceGetMemoryInfo_v2 => (memory: *mut abi::MemoryV2) |d| {
    let m = supported(d.memory.as_ref())?;
    if memory.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let version = abi::struct_version::<abi::MemoryV2>(2);
    check_version(std::ptr::addr_of!((*memory).version), version)?;
    put(memory, abi::MemoryV2 {
        version,
        total: m.total,
        reserved: m.reserved,
        free: m.free,
        used: m.used,
    })
});

device_fn!(nvmlDeviceGetBAR1MemoryInfo => (bar1Memory: *mut abi::Bar1Memory) |d| {
    let b = supported(d.bar1.as_ref())?;
    put(bar1Memory, abi::Bar1Memory { total: b.total, free: b.free, used: b.used })
});

device_fn!(nvmlDeviceGetUtilizationRates => (utilization: *mut abi::Utilization) |d| {
    let u = supported(d.utilization.as_ref())?;
    put(utilization, abi::Utilization { gpu: u.gpu, memory: u.memory })
});

/// The sampling period the encoder/decoder queries report, in µs.
const CODEC_SAMPLING_PERIOD_US: c_uint = 1_000_000;

/// An encoder or decoder utilization and its sampling period.
///
/// # Safety
/// Both pointers are NULL or point at an unsigned int.
unsafe fn codec_utilization(percent: Option<u32>, utilization: *mut c_uint, period: *mut c_uint) -> CallResult {
    put(utilization, supported(percent)?)?;
    put(period, CODEC_SAMPLING_PERIOD_US)
}

device_fn!(nvmlDeviceGetEncoderUtilization => (utilization: *mut c_uint, samplingPeriodUs: *mut c_uint) |d| {
    codec_utilization(d.encoder_utilization, utilization, samplingPeriodUs)
});

device_fn!(nvmlDeviceGetDecoderUtilization => (utilization: *mut c_uint, samplingPeriodUs: *mut c_uint) |d| {
    codec_utilization(d.decoder_utilization, utilization, samplingPeriodUs)
});

fn gpu_temperature(device: &Device, sensor: c_uint) -> Result<u32, Ret> {
    if sensor != abi::TEMPERATURE_GPU {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    supported(device.temperature_c)
}

device_fn!(nvmlDeviceGetTemperature => (sensorType: c_uint, temp: *mut c_uint) |d| {
    put(temp, gpu_temperature(d, sensorType)?)
});

device_fn!(nvmlDeviceGetTemperatureV => (temperature: *mut abi::TemperatureV1) |d| {
    if temperature.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let t = &mut *temperature;
    check_version(&t.version, abi::struct_version::<abi::TemperatureV1>(1))?;
    let celsius = gpu_temperature(d, t.sensor_type)?;
    t.temperature = i32::try_from(celsius).map_err(|_| abi::ERROR_UNKNOWN)?;
    Ok(())
});

device_fn!(nvmlDeviceGetTemperatureThreshold => (thresholdType: c_uint, temp: *mut c_uint) |d| {
    let t = &d.temperature_thresholds;
    let value = match thresholdType {
        abi::TEMPERATURE_THRESHOLD_SHUTDOWN => t.shutdown,
        abi::TEMPERATURE_THRESHOLD_SLOWDOWN => t.slowdown,
        abi::TEMPERATURE_THRESHOLD_MEM_MAX => t.mem_max,
        abi::TEMPERATURE_THRESHOLD_GPU_MAX => t.gpu_max,
        _ => None,
    };
    put(temp, supported(value)?)
});

device_fn!(nvmlDeviceGetNvLinkState => (link: c_uint, isActive: *mut c_uint) |d| {
    let links = supported(d.nvlink.as_ref())?;
    // NVML_NVLINK_MAX_LINKS: no link number past it, whatever the scenario.
    let up = links
        .get(link as usize)
        .filter(|_| link < abi::NVLINK_MAX_LINKS)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    put(isActive, enable_state(*up))
});

device_fn!(nvmlDeviceGetPowerUsage => (power: *mut c_uint) |d| put(power, supported(d.power_mw)?));

device_fn!(nvmlDeviceGetEnforcedPowerLimit => (limit: *mut c_uint) |d| {
    put(limit, supported(d.power_limit_mw)?)
});

device_fn!(nvmlDeviceGetPowerManagementLimit => (limit: *mut c_uint) |d| {
    put(limit, supported(d.power_management_limit_mw)?)
});

device_fn!(nvmlDeviceGetPowerManagementLimitConstraints => (minLimit: *mut c_uint, maxLimit: *mut c_uint) |d| {
    let c = supported(d.power_limit_constraints_mw.as_ref())?;
    put(minLimit, c.min)?;
    put(maxLimit, c.max)
});

device_fn!(nvmlDeviceGetPerformanceState | nvmlDeviceGetPowerState => (pState: *mut c_uint) |d| {
    put(pState, supported(d.performance_state)?)
});

device_fn!(nvmlDeviceGetFanSpeed => (speed: *mut c_uint) |d| put(speed, supported(d.fan_percent)?));

device_fn!(nvmlDeviceGetFanSpeed_v2 => (fan: c_uint, speed: *mut c_uint) |d| {
    let percent = supported(d.fan_percent)?;
    if fan >= d.num_fans.unwrap_or(0) {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    put(speed, percent)
});

device_fn!(nvmlDeviceGetNumFans => (numFans: *mut c_uint) |d| put(numFans, supported(d.num_fans)?));

fn clock_mhz(clocks: &Clocks, type_: c_uint) -> Result<u32, Ret> {
    let value = match type_ {
        abi::CLOCK_GRAPHICS => clocks.graphics_mhz,
        abi::CLOCK_SM => clocks.sm_mhz,
        abi::CLOCK_MEM => clocks.memory_mhz,
        abi::CLOCK_VIDEO => clocks.video_mhz,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    supported(value)
}

device_fn!(nvmlDeviceGetClockInfo => (type_: c_uint, clock: *mut c_uint) |d| {
    put(clock, clock_mhz(&d.clocks, type_)?)
});

device_fn!(nvmlDeviceGetMaxClockInfo => (type_: c_uint, clock: *mut c_uint) |d| {
    put(clock, clock_mhz(&d.max_clocks, type_)?)
});

device_fn!(nvmlDeviceGetCurrPcieLinkGeneration => (currLinkGen: *mut c_uint) |d| {
    put(currLinkGen, supported(d.pcie.gen)?)
});

device_fn!(nvmlDeviceGetCurrPcieLinkWidth => (currLinkWidth: *mut c_uint) |d| {
    put(currLinkWidth, supported(d.pcie.width)?)
});

device_fn!(nvmlDeviceGetMaxPcieLinkGeneration => (maxLinkGen: *mut c_uint) |d| {
    put(maxLinkGen, supported(d.pcie.max_gen)?)
});

device_fn!(nvmlDeviceGetMaxPcieLinkWidth => (maxLinkWidth: *mut c_uint) |d| {
    put(maxLinkWidth, supported(d.pcie.max_width)?)
});

device_fn!(nvmlDeviceGetPcieThroughput => (counter: c_uint, value: *mut c_uint) |d| {
    let kbps = match counter {
        abi::PCIE_UTIL_TX_BYTES => d.pcie.tx_kbps,
        abi::PCIE_UTIL_RX_BYTES => d.pcie.rx_kbps,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    put(value, supported(kbps)?)
});

device_fn!(nvmlDeviceGetDriverModel | nvmlDeviceGetDriverModel_v2 => (current: *mut c_uint, pending: *mut c_uint) |d| {
    let model = supported(d.driver_model.as_ref())?;
    put(current, model.current)?;
    put(pending, model.pending)
});

device_fn!(nvmlDeviceGetMigMode => (currentMode: *mut c_uint, pendingMode: *mut c_uint) |d| {
    let mode = supported(d.mig_mode.as_ref())?;
    put(currentMode, mode.current)?;
    put(pendingMode, mode.pending)
});

device_fn!(nvmlDeviceGetComputeMode => (mode: *mut c_uint) |d| put(mode, supported(d.compute_mode)?));

device_fn!(nvmlDeviceGetPersistenceMode => (mode: *mut c_uint) |d| {
    put(mode, enable_state(supported(d.persistence_mode)?))
});

device_fn!(nvmlDeviceGetDisplayActive => (isActive: *mut c_uint) |d| {
    put(isActive, enable_state(supported(d.display_active)?))
});

device_fn!(nvmlDeviceGetDisplayMode => (display: *mut c_uint) |d| {
    put(display, enable_state(supported(d.display_mode)?))
});

device_fn!(nvmlDeviceGetEccMode => (current: *mut c_uint, pending: *mut c_uint) |d| {
    let now = supported(d.ecc.current)?;
    put(current, enable_state(now))?;
    put(pending, enable_state(supported(d.ecc.pending)?))
});

device_fn!(nvmlDeviceGetTotalEccErrors => (errorType: c_uint, counterType: c_uint, eccCounts: *mut u64) |d| {
    let e = &d.ecc;
    let count = match (errorType, counterType) {
        (abi::MEMORY_ERROR_TYPE_CORRECTED, abi::VOLATILE_ECC) => e.volatile_corrected,
        (abi::MEMORY_ERROR_TYPE_UNCORRECTED, abi::VOLATILE_ECC) => e.volatile_uncorrected,
        (abi::MEMORY_ERROR_TYPE_CORRECTED, abi::AGGREGATE_ECC) => e.aggregate_corrected,
        (abi::MEMORY_ERROR_TYPE_UNCORRECTED, abi::AGGREGATE_ECC) => e.aggregate_uncorrected,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    put(eccCounts, supported(count)?)
});

// Words beyond the scenario's mask are zero.
device_fn!(nvmlDeviceGetCpuAffinity => (cpuSetSize: c_uint, cpuSet: *mut c_ulong) |d| {
    let mask = supported(d.cpu_affinity.as_deref())?;
    if cpuSet.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    for i in 0..cpuSetSize as usize {
        cpuSet.add(i).write_unaligned(mask.get(i).copied().unwrap_or(0) as c_ulong);
    }
    Ok(())
});

device_fn!(nvmlDeviceIsMigDeviceHandle => (isMigDevice: *mut c_uint) |d| {
    put(isMigDevice, c_uint::from(d.mig.is_some()))
});

// A MIG handle has no MIG devices of its own: no `max_mig_device_count`.
device_fn!(nvmlDeviceGetMaxMigDeviceCount => (count: *mut c_uint) |d| {
    put(count, supported(d.max_mig_device_count)?)
});

// An index past the maximum is not an index; one below it with no MIG
// device there (or MIG off) is NOT_FOUND, as nvml.h says.
device_fn!(nvmlDeviceGetMigDeviceHandleByIndex => (index: c_uint, migDevice: *mut abi::Handle) |d| {
    let max = supported(d.max_mig_device_count)?;
    if index >= max {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    if !d.mig_enabled() || index as usize >= d.mig_handles.len() {
        return Err(abi::ERROR_NOT_FOUND);
    }
    put(migDevice, mig_handle_of(d.position, index as usize))
});

device_fn!(nvmlDeviceGetDeviceHandleFromMigDeviceHandle => (device: *mut abi::Handle) |d| {
    let place = d.mig.ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    put(device, handle_of(place.parent))
});

// Instance ids exist on MIG handles only.
device_fn!(nvmlDeviceGetGpuInstanceId => (id: *mut c_uint) |d| {
    put(id, supported(d.mig.map(|m| m.gpu_instance_id))?)
});

device_fn!(nvmlDeviceGetComputeInstanceId => (id: *mut c_uint) |d| {
    put(id, supported(d.mig.map(|m| m.compute_instance_id))?)
});
