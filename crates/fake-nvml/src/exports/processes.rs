//! Process lists and per-process utilization; the work is in [`crate::processes`].

use std::os::raw::c_uint;

use crate::abi;
use crate::processes::{self, Version};
use crate::scenario::ProcessKind;

/// Exports one process list in one struct version under `name`.
macro_rules! process_list_fn {
    ($($name:ident: $kind:ident, $version:ident, $record:ty;)+) => {$(
        device_fn!($name => (infoCount: *mut c_uint, infos: *mut $record) |d| {
            processes::running_processes(d, ProcessKind::$kind, Version::$version, infoCount, infos.cast())
        });
    )+};
}

process_list_fn! {
    nvmlDeviceGetComputeRunningProcesses: Compute, V1, abi::ProcessInfoV1;
    nvmlDeviceGetComputeRunningProcesses_v2: Compute, V2, abi::ProcessInfoV2;
    nvmlDeviceGetComputeRunningProcesses_v3: Compute, V3, abi::ProcessInfoV2;
    nvmlDeviceGetGraphicsRunningProcesses: Graphics, V1, abi::ProcessInfoV1;
    nvmlDeviceGetGraphicsRunningProcesses_v2: Graphics, V2, abi::ProcessInfoV2;
    nvmlDeviceGetGraphicsRunningProcesses_v3: Graphics, V3, abi::ProcessInfoV2;
    nvmlDeviceGetMPSComputeRunningProcesses: Mps, V1, abi::ProcessInfoV1;
    nvmlDeviceGetMPSComputeRunningProcesses_v2: Mps, V2, abi::ProcessInfoV2;
    nvmlDeviceGetMPSComputeRunningProcesses_v3: Mps, V3, abi::ProcessInfoV2;
}

device_fn!(nvmlDeviceGetRunningProcessDetailList => (plist: *mut abi::ProcessDetailListV1) |d| {
    processes::detail_list(d, plist)
});

device_fn!(nvmlDeviceGetProcessUtilization => (
    utilization: *mut abi::ProcessUtilizationSample,
    processSamplesCount: *mut c_uint,
    lastSeenTimeStamp: u64,
) |d| {
    processes::utilization_samples(d, utilization, processSamplesCount, lastSeenTimeStamp)
});

device_fn!(nvmlDeviceGetProcessesUtilizationInfo => (procesesUtilInfo: *mut abi::ProcessesUtilizationInfoV1) |d| {
    processes::utilization_info(d, procesesUtilInfo)
});
