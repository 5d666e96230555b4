//! The C ABI as nvml.h states it, called through nvml-wrapper-sys's raw
//! bindings (their types are nvml.h's): versioned and unversioned entry
//! points, struct layouts and versions, the list protocol, NULL arguments.

mod common;

use std::ffi::CStr;
use std::mem::zeroed;
use std::os::raw::{c_char, c_int, c_uint};
use std::ptr::{null, null_mut};

use common::{lib_path, Session};
use nvml_wrapper_sys::bindings::*;
use serde_json::json;

const SUCCESS: u32 = nvmlReturn_enum_NVML_SUCCESS;
const UNINITIALIZED: u32 = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
const INVALID_ARGUMENT: u32 = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
const NOT_SUPPORTED: u32 = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
const NOT_FOUND: u32 = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
const INSUFFICIENT_SIZE: u32 = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
const VERSION_MISMATCH: u32 = nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;

/// NVML_STRUCT_VERSION(name, version).
fn struct_version<T>(version: u32) -> u32 {
    std::mem::size_of::<T>() as u32 | (version << 24)
}

struct Raw {
    lib: NvmlLib,
}

impl Raw {
    /// Loads the library; the session must outlive it.
    fn load() -> Raw {
        let lib = unsafe { NvmlLib::new(lib_path()) }.expect("load libnvidia_ml");
        Raw { lib }
    }

    fn init(&self) {
        assert_eq!(unsafe { self.lib.nvmlInit_v2() }, SUCCESS);
    }

    fn device(&self, index: u32) -> nvmlDevice_t {
        let mut device = null_mut();
        assert_eq!(
            unsafe { self.lib.nvmlDeviceGetHandleByIndex_v2(index, &mut device) },
            SUCCESS
        );
        device
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // Balance every init this test made; stops at UNINITIALIZED.
        while unsafe { self.lib.nvmlShutdown() } == SUCCESS {}
    }
}

fn text(buffer: &[c_char]) -> String {
    unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_str().unwrap().to_owned()
}

fn scenario() -> serde_json::Value {
    json!({
        "driver_version": "580.159.03",
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER", "uuid": "GPU-1", "serial": "S1",
            "pci_bus_id": "00000000:01:00.0", "pci_device_id": 0x270310de_u32,
            "memory": {"total": 1000, "used": 300, "free": 600, "reserved": 100},
            "temperature_c": 37, "fan_percent": 45, "performance_state": 8,
            "driver_model": {"current": 1, "pending": 0}, "mig_mode": {"current": 0, "pending": 1},
            "compute_mode": 3, "display_active": false, "display_mode": true,
            "compute_processes": [
                {"pid": 4242, "used_memory": 1406669824, "cc_protected_memory": 77, "name": "llama-server"},
                {"pid": 4243, "used_memory": null}
            ],
            "graphics_processes": [{"pid": 4343, "used_memory": 5}],
            "mps_compute_processes": [{"pid": 4444, "used_memory": 6}],
            "process_utilization": [
                {"pid": 4242, "sm": 10, "mem": 1, "timestamp": 100},
                {"pid": 4243, "sm": 20, "mem": 2, "enc": 3, "dec": 4, "jpg": 5, "ofa": 6, "timestamp": 200},
                {"pid": 4343, "sm": 30, "mem": 3, "timestamp": 300}
            ]
        }]
    })
}

#[test]
fn calls_before_init_and_unbalanced_shutdown() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    let mut count = 0;
    unsafe {
        assert_eq!(raw.lib.nvmlDeviceGetCount_v2(&mut count), UNINITIALIZED);
        assert_eq!(raw.lib.nvmlShutdown(), UNINITIALIZED);
        let message = CStr::from_ptr(raw.lib.nvmlErrorString(15));
        assert_eq!(message.to_str().unwrap(), "GPU is lost");
        assert_eq!(raw.lib.nvmlInitWithFlags(0), SUCCESS);
        assert_eq!(raw.lib.nvmlInit(), SUCCESS);
        assert_eq!(raw.lib.nvmlShutdown(), SUCCESS);
        assert_eq!(raw.lib.nvmlDeviceGetCount(&mut count), SUCCESS);
        assert_eq!(count, 1);
        assert_eq!(raw.lib.nvmlShutdown(), SUCCESS);
        assert_eq!(raw.lib.nvmlDeviceGetCount_v2(&mut count), UNINITIALIZED);
    }
}

#[test]
fn handles_and_bad_arguments() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let mut other = null_mut();
        assert_eq!(raw.lib.nvmlDeviceGetHandleByIndex(0, &mut other), SUCCESS);
        assert_eq!(other, device);
        let legacy = c"0000:01:00.0";
        assert_eq!(
            raw.lib.nvmlDeviceGetHandleByPciBusId(legacy.as_ptr(), &mut other),
            SUCCESS
        );
        assert_eq!(other, device);
        assert_eq!(raw.lib.nvmlDeviceGetHandleBySerial(c"S1".as_ptr(), &mut other), SUCCESS);
        assert_eq!(other, device);
        assert_eq!(
            raw.lib
                .nvmlDeviceGetHandleByPciBusId_v2(c"0000:02:00.0".as_ptr(), &mut other),
            NOT_FOUND
        );
        assert_eq!(raw.lib.nvmlDeviceGetHandleByUUID(null(), &mut other), INVALID_ARGUMENT);
        assert_eq!(raw.lib.nvmlDeviceGetHandleByIndex_v2(0, null_mut()), INVALID_ARGUMENT);
        assert_eq!(raw.lib.nvmlDeviceGetCount_v2(null_mut()), INVALID_ARGUMENT);
        assert_eq!(
            raw.lib.nvmlDeviceGetTemperature(device, 0, null_mut()),
            INVALID_ARGUMENT
        );

        let mut temp = 0;
        assert_eq!(
            raw.lib.nvmlDeviceGetTemperature(null_mut(), 0, &mut temp),
            INVALID_ARGUMENT
        );
        let bogus = device.cast::<u8>().wrapping_add(1).cast();
        assert_eq!(raw.lib.nvmlDeviceGetTemperature(bogus, 0, &mut temp), INVALID_ARGUMENT);
        assert_eq!(raw.lib.nvmlDeviceGetTemperature(device, 1, &mut temp), INVALID_ARGUMENT);
        assert_eq!(raw.lib.nvmlDeviceGetTemperature(device, 0, &mut temp), SUCCESS);
        assert_eq!(temp, 37);

        // Strings: too short a buffer is INSUFFICIENT_SIZE, as in NVML.
        let mut name = [0 as c_char; 96];
        assert_eq!(
            raw.lib.nvmlDeviceGetName(device, name.as_mut_ptr(), 5),
            INSUFFICIENT_SIZE
        );
        assert_eq!(raw.lib.nvmlDeviceGetName(device, name.as_mut_ptr(), 96), SUCCESS);
        assert_eq!(text(&name), "NVIDIA GeForce RTX 4080 SUPER");
        let mut version = [0 as c_char; 80];
        assert_eq!(raw.lib.nvmlSystemGetDriverVersion(version.as_mut_ptr(), 80), SUCCESS);
        assert_eq!(text(&version), "580.159.03");
    }
}

#[test]
fn pci_info_versions() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let mut pci: nvmlPciInfo_t = zeroed();
        assert_eq!(raw.lib.nvmlDeviceGetPciInfo_v3(device, &mut pci), SUCCESS);
        assert_eq!(text(&pci.busId), "00000000:01:00.0");
        assert_eq!(text(&pci.busIdLegacy), "0000:01:00.0");
        assert_eq!((pci.domain, pci.bus, pci.device), (0, 1, 0));
        assert_eq!(pci.pciDeviceId, 0x270310de);

        // v1 writes only the head its shorter struct shares with today's.
        let mut pci: nvmlPciInfo_t = zeroed();
        pci.busId = [0x55; 32];
        assert_eq!(raw.lib.nvmlDeviceGetPciInfo(device, &mut pci), SUCCESS);
        assert_eq!(text(&pci.busIdLegacy), "0000:01:00.0");
        assert_eq!(pci.bus, 1);
        assert_eq!(pci.busId, [0x55; 32]);
    }
}

#[test]
fn memory_info_versions() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let mut v1: nvmlMemory_t = zeroed();
        assert_eq!(raw.lib.nvmlDeviceGetMemoryInfo(device, &mut v1), SUCCESS);
        // v1 "used" includes the reserved memory.
        assert_eq!((v1.total, v1.used, v1.free), (1000, 400, 600));

        let mut v2: nvmlMemory_v2_t = zeroed();
        assert_eq!(raw.lib.nvmlDeviceGetMemoryInfo_v2(device, &mut v2), VERSION_MISMATCH);
        v2.version = struct_version::<nvmlMemory_v2_t>(1);
        assert_eq!(raw.lib.nvmlDeviceGetMemoryInfo_v2(device, &mut v2), VERSION_MISMATCH);
        v2.version = struct_version::<nvmlMemory_v2_t>(2);
        assert_eq!(raw.lib.nvmlDeviceGetMemoryInfo_v2(device, &mut v2), SUCCESS);
        assert_eq!((v2.total, v2.reserved, v2.used, v2.free), (1000, 100, 300, 600));
        assert_eq!(v2.version, struct_version::<nvmlMemory_v2_t>(2));

        let mut t: nvmlTemperature_t = zeroed();
        assert_eq!(raw.lib.nvmlDeviceGetTemperatureV(device, &mut t), VERSION_MISMATCH);
        t.version = struct_version::<nvmlTemperature_t>(1);
        assert_eq!(raw.lib.nvmlDeviceGetTemperatureV(device, &mut t), SUCCESS);
        assert_eq!(t.temperature, 37);
    }
}

#[test]
fn enum_queries() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let (mut a, mut b) = (9, 9);
        assert_eq!(raw.lib.nvmlDeviceGetDriverModel(device, &mut a, &mut b), SUCCESS);
        assert_eq!(
            (a, b),
            (
                nvmlDriverModel_enum_NVML_DRIVER_WDM,
                nvmlDriverModel_enum_NVML_DRIVER_WDDM
            )
        );
        let (mut a, mut b) = (9, 9);
        assert_eq!(raw.lib.nvmlDeviceGetDriverModel_v2(device, &mut a, &mut b), SUCCESS);
        assert_eq!((a, b), (1, 0));
        let (mut a, mut b) = (9, 9);
        assert_eq!(raw.lib.nvmlDeviceGetMigMode(device, &mut a, &mut b), SUCCESS);
        assert_eq!((a, b), (0, 1));
        let mut value: c_uint = 9;
        assert_eq!(raw.lib.nvmlDeviceIsMigDeviceHandle(device, &mut value), SUCCESS);
        assert_eq!(value, 0);
        assert_eq!(raw.lib.nvmlDeviceGetFanSpeed(device, &mut value), SUCCESS);
        assert_eq!(value, 45);
        assert_eq!(raw.lib.nvmlDeviceGetPowerState(device, &mut value), SUCCESS);
        assert_eq!(value, 8);
        assert_eq!(raw.lib.nvmlDeviceGetComputeMode(device, &mut value), SUCCESS);
        assert_eq!(value, 3);
        assert_eq!(raw.lib.nvmlDeviceGetDisplayActive(device, &mut value), SUCCESS);
        assert_eq!(value, 0);
        assert_eq!(raw.lib.nvmlDeviceGetDisplayMode(device, &mut value), SUCCESS);
        assert_eq!(value, 1);
        assert_eq!(raw.lib.nvmlDeviceGetPersistenceMode(device, &mut value), NOT_SUPPORTED);
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        assert_eq!(
            raw.lib
                .nvmlDeviceGetCudaComputeCapability(device, &mut major, &mut minor),
            NOT_SUPPORTED
        );
    }
}

/// Reads `count` records of `T` after a successful call.
fn pids_v1(records: &[nvmlProcessInfo_v1_t]) -> Vec<(u32, u64)> {
    records.iter().map(|r| (r.pid, r.usedGpuMemory)).collect()
}

#[test]
fn process_list_versions() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let mut count = 0;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetComputeRunningProcesses(device, &mut count, null_mut()),
            INSUFFICIENT_SIZE
        );
        assert_eq!(count, 2);
        let mut v1: Vec<nvmlProcessInfo_v1_t> = vec![zeroed(); 2];
        assert_eq!(
            raw.lib
                .nvmlDeviceGetComputeRunningProcesses(device, &mut count, v1.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!(pids_v1(&v1), vec![(4242, 1406669824), (4243, u64::MAX)]);

        let mut count = 1;
        let mut v2: Vec<nvmlProcessInfo_v2_t> = vec![zeroed(); 1];
        assert_eq!(
            raw.lib
                .nvmlDeviceGetGraphicsRunningProcesses_v2(device, &mut count, v2.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!(
            (v2[0].pid, v2[0].usedGpuMemory, v2[0].gpuInstanceId),
            (4343, 5, u32::MAX)
        );
        let mut count = 1;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetMPSComputeRunningProcesses(device, &mut count, v1.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!((count, v1[0].pid, v1[0].usedGpuMemory), (1, 4444, 6));
        let mut count = 1;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetMPSComputeRunningProcesses_v2(device, &mut count, v2.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!(v2[0].pid, 4444);
        assert_eq!(
            raw.lib
                .nvmlDeviceGetGraphicsRunningProcesses(device, null_mut(), null_mut()),
            INVALID_ARGUMENT
        );

        // The detail list: 32-byte records with the CC-protected memory.
        let mut details: Vec<nvmlProcessDetail_v1_t> = vec![zeroed(); 2];
        let mut list = nvmlProcessDetailList_v1_t {
            version: struct_version::<nvmlProcessDetailList_v1_t>(1),
            mode: 0,
            numProcArrayEntries: 0,
            procArray: null_mut(),
        };
        assert_eq!(
            raw.lib.nvmlDeviceGetRunningProcessDetailList(device, &mut list),
            INSUFFICIENT_SIZE
        );
        assert_eq!(list.numProcArrayEntries, 2);
        list.procArray = details.as_mut_ptr();
        assert_eq!(
            raw.lib.nvmlDeviceGetRunningProcessDetailList(device, &mut list),
            SUCCESS
        );
        assert_eq!(
            (details[0].pid, details[0].usedGpuCcProtectedMemory, details[1].pid),
            (4242, 77, 4243)
        );
        list.mode = 1;
        assert_eq!(
            raw.lib.nvmlDeviceGetRunningProcessDetailList(device, &mut list),
            SUCCESS
        );
        assert_eq!((list.numProcArrayEntries, details[0].pid), (1, 4343));
        list.version = 1;
        assert_eq!(
            raw.lib.nvmlDeviceGetRunningProcessDetailList(device, &mut list),
            VERSION_MISMATCH
        );

        // Process names: the scenario's, else the host's /proc.
        let mut name = [0 as c_char; 64];
        assert_eq!(raw.lib.nvmlSystemGetProcessName(4242, name.as_mut_ptr(), 64), SUCCESS);
        assert_eq!(text(&name), "llama-server");
        let me = std::process::id();
        assert_eq!(raw.lib.nvmlSystemGetProcessName(me, name.as_mut_ptr(), 64), SUCCESS);
        let comm = std::fs::read_to_string(format!("/proc/{me}/comm")).unwrap();
        assert_eq!(text(&name), comm.trim_end());
        assert_eq!(
            raw.lib.nvmlSystemGetProcessName(u32::MAX, name.as_mut_ptr(), 64),
            NOT_FOUND
        );
    }
}

#[test]
fn scrambled_v3_stays_inside_the_callers_buffer() {
    let _s = Session::new(&json!({"process_struct_bytes": 32, "devices": [{"compute_processes": [
        {"pid": 1, "used_memory": 10}, {"pid": 2, "used_memory": 20}
    ]}]}));
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        // Room for exactly two records, followed by a canary record.
        let mut records: Vec<nvmlProcessInfo_t> = vec![zeroed(); 3];
        records[2].pid = 0xC0FFEE;
        records[2].usedGpuMemory = 0xC0FFEE;
        let mut count = 2;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetComputeRunningProcesses_v3(device, &mut count, records.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!(count, 2);
        assert_eq!((records[0].pid, records[0].usedGpuMemory), (1, 10));
        assert_eq!((records[1].pid, records[1].usedGpuMemory), (0, 2));
        assert_eq!((records[2].pid, records[2].usedGpuMemory), (0xC0FFEE, 0xC0FFEE));
        // _v2 is unaffected by the bug.
        let mut count = 2;
        let mut v2: Vec<nvmlProcessInfo_v2_t> = vec![zeroed(); 2];
        assert_eq!(
            raw.lib
                .nvmlDeviceGetComputeRunningProcesses_v2(device, &mut count, v2.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!((v2[1].pid, v2[1].usedGpuMemory), (2, 20));
    }
}

#[test]
fn list_growth_follows_nvml_semantics() {
    let _s = Session::new(&json!({"devices": [{"process_list_grows_by": 2, "graphics_processes": [
        {"pid": 1, "used_memory": 10}
    ]}]}));
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let mut count = 0;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetGraphicsRunningProcesses_v3(device, &mut count, null_mut()),
            INSUFFICIENT_SIZE
        );
        assert_eq!(count, 1);
        let mut records: Vec<nvmlProcessInfo_t> = vec![zeroed(); 3];
        assert_eq!(
            raw.lib
                .nvmlDeviceGetGraphicsRunningProcesses_v3(device, &mut count, records.as_mut_ptr()),
            INSUFFICIENT_SIZE
        );
        assert_eq!(count, 3, "the fill call reports the grown list");
        assert_eq!(
            raw.lib
                .nvmlDeviceGetGraphicsRunningProcesses_v3(device, &mut count, records.as_mut_ptr()),
            SUCCESS
        );
        let pids: Vec<u32> = records.iter().map(|r| r.pid).collect();
        assert_eq!(pids, vec![1, 1_000_000, 1_000_001]);
    }
}

#[test]
fn process_utilization_samples() {
    let _s = Session::new(&scenario());
    let raw = Raw::load();
    raw.init();
    let device = raw.device(0);
    unsafe {
        let mut count = 0;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetProcessUtilization(device, null_mut(), &mut count, 150),
            INSUFFICIENT_SIZE
        );
        assert_eq!(count, 2);
        let mut samples: Vec<nvmlProcessUtilizationSample_t> = vec![zeroed(); 2];
        count = 1;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetProcessUtilization(device, samples.as_mut_ptr(), &mut count, 150),
            INSUFFICIENT_SIZE
        );
        assert_eq!(count, 2);
        assert_eq!(
            raw.lib
                .nvmlDeviceGetProcessUtilization(device, samples.as_mut_ptr(), &mut count, 150),
            SUCCESS
        );
        let got: Vec<_> = samples
            .iter()
            .map(|s| (s.pid, s.timeStamp, s.smUtil, s.memUtil, s.encUtil, s.decUtil))
            .collect();
        assert_eq!(got, vec![(4243, 200, 20, 2, 3, 4), (4343, 300, 30, 3, 0, 0)]);
        assert_eq!(
            raw.lib
                .nvmlDeviceGetProcessUtilization(device, samples.as_mut_ptr(), &mut count, 300),
            NOT_FOUND
        );
        assert_eq!(count, 0);

        let mut infos: Vec<nvmlProcessUtilizationInfo_v1_t> = vec![zeroed(); 3];
        let mut info = nvmlProcessesUtilizationInfo_v1_t {
            version: 1,
            processSamplesCount: 0,
            lastSeenTimeStamp: 0,
            procUtilArray: null_mut(),
        };
        assert_eq!(
            raw.lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut info),
            VERSION_MISMATCH
        );
        info.version = struct_version::<nvmlProcessesUtilizationInfo_v1_t>(1);
        assert_eq!(
            raw.lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut info),
            INSUFFICIENT_SIZE
        );
        assert_eq!(info.processSamplesCount, 3);
        info.procUtilArray = infos.as_mut_ptr();
        assert_eq!(
            raw.lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut info),
            SUCCESS
        );
        let second = infos[1];
        assert_eq!(
            (
                second.pid,
                second.timeStamp,
                second.smUtil,
                second.jpgUtil,
                second.ofaUtil
            ),
            (4243, 200, 20, 5, 6)
        );
    }
}

/// An A100 in MIG mode with a 3g.40gb and a 2g.20gb instance, a process in
/// each, and a second GPU without MIG.
fn mig_scenario() -> serde_json::Value {
    json!({
        "devices": [{
            "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a100",
            "memory": {"total": 85899345920u64, "used": 7516192768u64, "free": 78383153152u64},
            "mig_mode": {"current": 1, "pending": 1}, "max_mig_device_count": 7,
            "compute_processes": [
                {"pid": 501, "used_memory": 2147483648u64, "gpu_instance_id": 1, "compute_instance_id": 0},
                {"pid": 502, "used_memory": 5368709120u64, "gpu_instance_id": 2, "compute_instance_id": 0}
            ],
            "mig_devices": [
                {"gpu_instance_id": 1, "compute_instance_id": 0, "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
                 "uuid": "MIG-11111111-2222-3333-4444-555555555555",
                 "memory": {"total": 42949672960u64, "used": 2181038080u64, "free": 40768634880u64}},
                {"gpu_instance_id": 2, "compute_instance_id": 0, "name": "NVIDIA A100-SXM4-80GB MIG 2g.20gb",
                 "uuid": "MIG-66666666-7777-8888-9999-000000000000",
                 "memory": {"total": 21474836480u64, "used": 5402263552u64, "free": 16072572928u64},
                 "errors": {"nvmlDeviceGetGraphicsRunningProcesses_v3": 4}}
            ]
        }, {
            "name": "NVIDIA L4", "uuid": "GPU-l4", "compute_processes": []
        }]
    })
}

#[test]
fn mig_devices_answer_on_their_own_handles() {
    let _s = Session::new(&mig_scenario());
    let raw = Raw::load();
    raw.init();
    let (a100, l4) = (raw.device(0), raw.device(1));
    unsafe {
        let (mut current, mut pending, mut count, mut is_mig) = (9, 9, 0, 9);
        assert_eq!(raw.lib.nvmlDeviceGetMigMode(a100, &mut current, &mut pending), SUCCESS);
        assert_eq!((current, pending), (1, 1));
        assert_eq!(raw.lib.nvmlDeviceGetMaxMigDeviceCount(a100, &mut count), SUCCESS);
        assert_eq!(count, 7);
        assert_eq!(raw.lib.nvmlDeviceIsMigDeviceHandle(a100, &mut is_mig), SUCCESS);
        assert_eq!(is_mig, 0);
        assert_eq!(raw.lib.nvmlDeviceGetMaxMigDeviceCount(l4, &mut count), NOT_SUPPORTED);

        let mut handles = [null_mut(); 2];
        for (index, handle) in handles.iter_mut().enumerate() {
            assert_eq!(
                raw.lib.nvmlDeviceGetMigDeviceHandleByIndex(a100, index as u32, handle),
                SUCCESS
            );
        }
        let mut missing = null_mut();
        assert_eq!(
            raw.lib.nvmlDeviceGetMigDeviceHandleByIndex(a100, 2, &mut missing),
            NOT_FOUND
        );
        assert_eq!(
            raw.lib.nvmlDeviceGetMigDeviceHandleByIndex(a100, 7, &mut missing),
            INVALID_ARGUMENT
        );
        assert_eq!(
            raw.lib.nvmlDeviceGetMigDeviceHandleByIndex(l4, 0, &mut missing),
            NOT_SUPPORTED
        );

        let mig = handles[1];
        assert_eq!(raw.lib.nvmlDeviceIsMigDeviceHandle(mig, &mut is_mig), SUCCESS);
        assert_eq!(is_mig, 1);
        let (mut gi, mut ci) = (0, 9);
        assert_eq!(raw.lib.nvmlDeviceGetGpuInstanceId(mig, &mut gi), SUCCESS);
        assert_eq!(raw.lib.nvmlDeviceGetComputeInstanceId(mig, &mut ci), SUCCESS);
        assert_eq!((gi, ci), (2, 0));
        assert_eq!(raw.lib.nvmlDeviceGetGpuInstanceId(a100, &mut gi), NOT_SUPPORTED);
        let mut parent = null_mut();
        assert_eq!(
            raw.lib.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &mut parent),
            SUCCESS
        );
        assert_eq!(parent, a100);
        assert_eq!(
            raw.lib.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(a100, &mut parent),
            INVALID_ARGUMENT
        );

        let mut name = [0 as c_char; 96];
        assert_eq!(raw.lib.nvmlDeviceGetName(mig, name.as_mut_ptr(), 96), SUCCESS);
        assert_eq!(text(&name), "NVIDIA A100-SXM4-80GB MIG 2g.20gb");
        assert_eq!(raw.lib.nvmlDeviceGetUUID(mig, name.as_mut_ptr(), 96), SUCCESS);
        assert_eq!(text(&name), "MIG-66666666-7777-8888-9999-000000000000");
        let mut memory: nvmlMemory_t = zeroed();
        assert_eq!(raw.lib.nvmlDeviceGetMemoryInfo(mig, &mut memory), SUCCESS);
        assert_eq!((memory.total, memory.used), (21474836480, 5402263552));
        // Per instance NVML has no utilization, temperature or power.
        let mut utilization: nvmlUtilization_t = zeroed();
        assert_eq!(
            raw.lib.nvmlDeviceGetUtilizationRates(mig, &mut utilization),
            NOT_SUPPORTED
        );
        let mut temperature = 0;
        assert_eq!(
            raw.lib.nvmlDeviceGetTemperature(mig, 0, &mut temperature),
            NOT_SUPPORTED
        );

        // The parent lists every process with its instance; the MIG handle
        // only its own, and answers its own injected errors.
        let mut records: Vec<nvmlProcessInfo_t> = vec![zeroed(); 4];
        let mut count = 4;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetComputeRunningProcesses_v3(a100, &mut count, records.as_mut_ptr()),
            SUCCESS
        );
        let listed: Vec<_> = records[..count as usize]
            .iter()
            .map(|r| (r.pid, r.gpuInstanceId, r.computeInstanceId))
            .collect();
        assert_eq!(listed, vec![(501, 1, 0), (502, 2, 0)]);
        let mut count = 4;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetComputeRunningProcesses_v3(mig, &mut count, records.as_mut_ptr()),
            SUCCESS
        );
        assert_eq!((count, records[0].pid, records[0].usedGpuMemory), (1, 502, 5368709120));
        let mut count = 4;
        assert_eq!(
            raw.lib
                .nvmlDeviceGetGraphicsRunningProcesses_v3(mig, &mut count, records.as_mut_ptr()),
            nvmlReturn_enum_NVML_ERROR_NO_PERMISSION
        );
        // A handle past the instances is no handle.
        let forged = (mig as usize + 5) as nvmlDevice_t;
        assert_eq!(
            raw.lib.nvmlDeviceGetName(forged, name.as_mut_ptr(), 96),
            INVALID_ARGUMENT
        );
    }
}

#[test]
fn mig_devices_need_mig_mode() {
    let mut scenario = mig_scenario();
    scenario["devices"][0]["mig_mode"] = json!({"current": 0, "pending": 1});
    let _s = Session::new(&scenario);
    let raw = Raw::load();
    assert_eq!(unsafe { raw.lib.nvmlInit_v2() }, nvmlReturn_enum_NVML_ERROR_UNKNOWN);
}
