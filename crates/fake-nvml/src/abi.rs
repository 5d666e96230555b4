//! The C side of NVML: return codes, enum values and `#[repr(C)]` structs,
//! transcribed from nvml.h (as mirrored by nvml-wrapper-sys 0.10's bindings).

use std::mem::size_of;
use std::os::raw::c_uint;

/// `nvmlReturn_t`.
pub type Ret = c_uint;

pub const SUCCESS: Ret = 0;
pub const ERROR_UNINITIALIZED: Ret = 1;
pub const ERROR_INVALID_ARGUMENT: Ret = 2;
pub const ERROR_NOT_SUPPORTED: Ret = 3;
pub const ERROR_NOT_FOUND: Ret = 6;
pub const ERROR_INSUFFICIENT_SIZE: Ret = 7;
pub const ERROR_DRIVER_NOT_LOADED: Ret = 9;
pub const ERROR_TIMEOUT: Ret = 10;
pub const ERROR_GPU_IS_LOST: Ret = 15;
pub const ERROR_ARGUMENT_VERSION_MISMATCH: Ret = 25;
pub const ERROR_UNKNOWN: Ret = 999;

/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned long long`.
pub const VALUE_NOT_AVAILABLE_U64: u64 = u64::MAX;
/// gpuInstanceId / computeInstanceId of a process outside MIG.
pub const NO_INSTANCE_ID: u32 = 0xFFFF_FFFF;

/// `nvmlErrorString`: the message real NVML gives for each code, NUL-terminated.
pub fn error_string(code: Ret) -> &'static [u8] {
    match code {
        0 => b"Success\0",
        1 => b"Uninitialized\0",
        2 => b"Invalid Argument\0",
        3 => b"Not Supported\0",
        4 => b"Insufficient Permissions\0",
        5 => b"Already Initialized\0",
        6 => b"Not Found\0",
        7 => b"Insufficient Size\0",
        8 => b"Insufficient External Power\0",
        9 => b"Driver Not Loaded\0",
        10 => b"Timeout\0",
        11 => b"Interrupt request issue\0",
        12 => b"NVML Shared Library Not Found\0",
        13 => b"Function Not Found\0",
        14 => b"Corrupted infoROM\0",
        15 => b"GPU is lost\0",
        16 => b"GPU requires restart\0",
        17 => b"The operating system has blocked the request.\0",
        18 => b"RM has detected an NVML/RM version mismatch.\0",
        19 => b"In use by another client\0",
        20 => b"Insufficient Memory\0",
        21 => b"No data\0",
        22 => b"The requested vgpu operation is not available on target device, because ECC is enabled\0",
        23 => b"Insufficient resources\0",
        24 => b"Frequency not supported\0",
        25 => b"Argument version mismatch\0",
        26 => b"Deprecated\0",
        27 => b"Not ready\0",
        28 => b"GPU not found\0",
        29 => b"Invalid state\0",
        30 => b"Reset type not supported\0",
        _ => b"Unknown Error\0",
    }
}

/// `NVML_STRUCT_VERSION(name, version)`: the struct's size with the version in the top byte.
pub const fn struct_version<T>(version: u32) -> c_uint {
    size_of::<T>() as c_uint | (version << 24)
}

/// Opaque target of `nvmlDevice_t`.
#[repr(C)]
pub struct DeviceSt {
    _unused: [u8; 0],
}
/// `nvmlDevice_t`.
pub type Handle = *mut DeviceSt;

// nvmlClockType_t
pub const CLOCK_GRAPHICS: c_uint = 0;
pub const CLOCK_SM: c_uint = 1;
pub const CLOCK_MEM: c_uint = 2;
pub const CLOCK_VIDEO: c_uint = 3;

// nvmlPcieUtilCounter_t
pub const PCIE_UTIL_TX_BYTES: c_uint = 0;
pub const PCIE_UTIL_RX_BYTES: c_uint = 1;

// nvmlTemperatureSensors_t
pub const TEMPERATURE_GPU: c_uint = 0;

/// NVML_NVLINK_MAX_LINKS (nvml.h).
pub const NVLINK_MAX_LINKS: c_uint = 18;

// nvmlTemperatureThresholds_t
pub const TEMPERATURE_THRESHOLD_SHUTDOWN: c_uint = 0;
pub const TEMPERATURE_THRESHOLD_SLOWDOWN: c_uint = 1;
pub const TEMPERATURE_THRESHOLD_MEM_MAX: c_uint = 2;
pub const TEMPERATURE_THRESHOLD_GPU_MAX: c_uint = 3;

// nvmlMemoryErrorType_t
pub const MEMORY_ERROR_TYPE_CORRECTED: c_uint = 0;
pub const MEMORY_ERROR_TYPE_UNCORRECTED: c_uint = 1;

// nvmlEccCounterType_t
pub const VOLATILE_ECC: c_uint = 0;
pub const AGGREGATE_ECC: c_uint = 1;

// nvmlPageRetirementCause_t
pub const PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT: u32 = 0;
pub const PAGE_RETIREMENT_CAUSE_DOUBLE_BIT: u32 = 1;

/// nvmlEventTypeXidCriticalError.
pub const EVENT_TYPE_XID_CRITICAL_ERROR: u64 = 0x8;

/// Opaque target of `nvmlEventSet_t`.
#[repr(C)]
pub struct EventSetSt {
    _unused: [u8; 0],
}

/// `nvmlViolationTime_t`.
#[repr(C)]
pub struct ViolationTime {
    /// CPU timestamp (µs).
    pub reference_time: u64,
    /// Time held down (ns).
    pub violation_time: u64,
}

/// `nvmlEventData_t`.
#[repr(C)]
pub struct EventData {
    pub device: Handle,
    pub event_type: u64,
    pub event_data: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

// nvmlProcessDetailList_t.mode
pub const PROCESS_MODE_COMPUTE: c_uint = 0;
pub const PROCESS_MODE_GRAPHICS: c_uint = 1;
pub const PROCESS_MODE_MPS: c_uint = 2;

/// `nvmlPciInfo_t` (the v2/v3 layout).
#[repr(C)]
pub struct PciInfo {
    pub bus_id_legacy: [u8; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_subsystem_id: c_uint,
    pub bus_id: [u8; 32],
}

/// The head that the v1 `nvmlPciInfo_t` (busId[16], ids, reserved[4]) shares with
/// the current layout: all that `nvmlDeviceGetPciInfo` writes.
#[repr(C)]
pub struct PciInfoV1Head {
    pub bus_id: [u8; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_subsystem_id: c_uint,
}

/// `nvmlMemory_t` (v1).
#[repr(C)]
pub struct Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: u64,
    pub reserved: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlBAR1Memory_t`.
#[repr(C)]
pub struct Bar1Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlUtilization_t`.
#[repr(C)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlTemperature_v1_t`.
#[repr(C)]
pub struct TemperatureV1 {
    pub version: c_uint,
    pub sensor_type: c_uint,
    pub temperature: i32,
}

/// `nvmlProcessInfo_v1_t`.
#[repr(C)]
pub struct ProcessInfoV1 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
}

/// `nvmlProcessInfo_v2_t`, also `nvmlProcessInfo_t` (the `_v3` functions' struct).
#[repr(C)]
pub struct ProcessInfoV2 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// `nvmlProcessDetail_v1_t`: the 32-byte record R530/535 drivers wrote for `_v3`.
#[repr(C)]
pub struct ProcessDetailV1 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
    pub used_gpu_cc_protected_memory: u64,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProcessUtilizationSample {
    pub pid: c_uint,
    pub time_stamp: u64,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
}

/// `nvmlProcessUtilizationInfo_v1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProcessUtilizationInfoV1 {
    pub time_stamp: u64,
    pub pid: c_uint,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
    pub jpg_util: c_uint,
    pub ofa_util: c_uint,
}

/// `nvmlProcessesUtilizationInfo_v1_t`.
#[repr(C)]
pub struct ProcessesUtilizationInfoV1 {
    pub version: c_uint,
    pub process_samples_count: c_uint,
    pub last_seen_time_stamp: u64,
    pub proc_util_array: *mut ProcessUtilizationInfoV1,
}

/// `nvmlProcessDetailList_v1_t`.
#[repr(C)]
pub struct ProcessDetailListV1 {
    pub version: c_uint,
    pub mode: c_uint,
    pub num_proc_array_entries: c_uint,
    pub proc_array: *mut ProcessDetailV1,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_nvml_h() {
        assert_eq!(size_of::<PciInfo>(), 68);
        assert_eq!(size_of::<PciInfoV1Head>(), 36);
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(struct_version::<MemoryV2>(2), 40 | 2 << 24);
        assert_eq!(size_of::<TemperatureV1>(), 12);
        assert_eq!(size_of::<ProcessInfoV1>(), 16);
        assert_eq!(size_of::<ProcessInfoV2>(), 24);
        assert_eq!(size_of::<ProcessDetailV1>(), 32);
        assert_eq!(size_of::<ProcessUtilizationSample>(), 32);
        assert_eq!(size_of::<ProcessUtilizationInfoV1>(), 40);
        assert_eq!(size_of::<ProcessesUtilizationInfoV1>(), 24);
        assert_eq!(size_of::<ProcessDetailListV1>(), 24);
        assert_eq!(size_of::<ViolationTime>(), 16);
        assert_eq!(size_of::<EventData>(), 32);
    }
}
