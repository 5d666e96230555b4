//! Error codes from every NVML call: the fake NVML answers each function it
//! exports with an error on every call (in turn, a different code each), and
//! then all of them at once. Every run must end in a snapshot (exit 0,
//! JSON that validates as a snapshot) that says what failed, never a panic,
//! a hang or an invented figure.

mod common;

use common::{Scenario, Sleeper};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Every function crates/fake-nvml exports that the collector may call
/// after init (nvmlInit*, nvmlShutdown and nvmlErrorString excepted).
const FUNCTIONS: &[&str] = &[
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlSystemGetProcessName",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetHandleBySerial",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetBrand",
    "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPciInfo_v2",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetBAR1MemoryInfo",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureV",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetPowerState",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetFanSpeed_v2",
    "nvmlDeviceGetNumFans",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetDisplayMode",
    "nvmlDeviceGetDisplayActive",
    "nvmlDeviceGetDriverModel",
    "nvmlDeviceGetDriverModel_v2",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses_v2",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetMPSComputeRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses_v2",
    "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetProcessesUtilizationInfo",
    "nvmlDeviceGetRunningProcessDetailList",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetViolationStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetCreate",
    "nvmlEventSetWait_v2",
];

/// Calls whose figures every sample shows: their failure must be said (a
/// device error, a list marked incomplete, no device). Others are not made
/// (v1 spellings where v2/v3 exist, lookups by serial, MPS lists) or give
/// descriptive fields that turn null (driver version, brand, ECC mode).
const MUST_REPORT: &[&str] = &[
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "nvmlDeviceGetProcessUtilization",
];

/// NVML return codes: UNINITIALIZED, INVALID_ARGUMENT, NO_PERMISSION,
/// INSUFFICIENT_SIZE, DRIVER_NOT_LOADED, TIMEOUT, IRQ_ISSUE, GPU_IS_LOST,
/// RESET_REQUIRED, OPERATING_SYSTEM, MEMORY, UNKNOWN, and a code no header
/// defines.
const CODES: &[u32] = &[1, 2, 4, 7, 9, 10, 11, 15, 16, 17, 20, 999, 12345];

const LLAMA_VRAM: u64 = 1_406_669_824;

fn scenario(llama: u32, errors: Value) -> Value {
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "errors": errors,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 17171480576u64, "used": 5379194880u64, "free": 11792285696u64},
            "utilization": {"gpu": 15, "memory": 30},
            "temperature_c": 37,
            "power_mw": 26000,
            "compute_processes": [{"pid": llama, "used_memory": LLAMA_VRAM}],
            "process_utilization": [{"pid": llama, "sm": 15, "mem": 3}]
        }]
    })
}

/// Runs `--json` and checks what any fault must leave: exit 0 within the
/// watchdog's bounds, a snapshot, no panic, and no figure the driver did not
/// give (the device's used memory is the scenario's or null, the process's
/// VRAM the scenario's or null).
fn check(what: &str, s: &Scenario, llama: u32) -> Value {
    let started = Instant::now();
    let out = s.command().arg("--json").output().unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: exit {:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert!(took < Duration::from_secs(20), "{what}: took {took:?}");
    let snap: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    assert!(snap["schema_version"].is_u64(), "{what}");
    for d in snap["devices"].as_array().unwrap() {
        let used = &d["memory_used_bytes"];
        assert!(used.is_null() || used == 5379194880u64, "{what}: used {used}");
    }
    for p in snap["processes"].as_array().unwrap() {
        for g in p["gpu"].as_array().into_iter().flatten() {
            let vram = &g["vram_bytes"];
            assert!(
                vram.is_null() || (p["pid"] == llama && vram == LLAMA_VRAM),
                "{what}: pid {} vram {vram}",
                p["pid"]
            );
        }
    }
    snap
}

fn says_a_call_failed(snap: &Value) -> bool {
    let devices = snap["devices"].as_array().unwrap();
    let nvml_ok = snap["backends"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["name"] == "nvml" && b["status"] == "ok");
    !nvml_ok
        || devices.is_empty()
        || devices
            .iter()
            .any(|d| !d["errors"].as_array().unwrap().is_empty() || d["process_list_complete"] == false)
}

#[test]
fn every_call_failing_with_any_code_still_gives_a_snapshot_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", "/nonexistent/m.gguf"]);
    let pid = llama.pid();
    let healthy = check("no fault", &Scenario::new(&scenario(pid, json!({}))), pid);
    assert!(!says_a_call_failed(&healthy), "{healthy:#}");

    let mut unreported = Vec::new();
    for (i, function) in FUNCTIONS.iter().enumerate() {
        let code = CODES[i % CODES.len()];
        let what = format!("{function} -> {code}");
        let snap = check(&what, &Scenario::new(&scenario(pid, json!({ *function: code }))), pid);
        if !says_a_call_failed(&snap) {
            unreported.push(*function);
        }
    }
    eprintln!("failures not said (not called, or a descriptive field left null): {unreported:?}");
    for f in MUST_REPORT {
        assert!(!unreported.contains(f), "{f} failed and the snapshot does not say so");
    }

    // Everything at once: NVML is there but answers nothing.
    let all: serde_json::Map<String, Value> = FUNCTIONS.iter().map(|f| (f.to_string(), json!(999))).collect();
    let s = Scenario::new(&scenario(pid, Value::Object(all)));
    let snap = check("every call", &s, pid);
    assert!(snap["devices"].as_array().unwrap().is_empty(), "{snap:#}");
    let out = s.command().arg("--once").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nvml:"), "{text}");
}
