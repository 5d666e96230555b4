//! Shared by the integration tests: the built library and scenario sessions.
//!
//! FAKE_NVML_SCENARIO is process-wide and the fake's state lives in the
//! loaded library, so a [`Session`] holds a lock for the whole test.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

/// The libnvidia_ml.so this test run was built with. The package is also an
/// rlib, so `cargo test` compiles the library (both crate types at once) into
/// `target/<profile>/deps/`, next to the test executable. It does not always
/// copy it up to `target/<profile>/`, so that copy may be stale.
pub fn lib_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let path = deps.join(format!("{DLL_PREFIX}nvidia_ml{DLL_SUFFIX}"));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

static LOCK: Mutex<()> = Mutex::new(());

/// One test's scenario file, named by FAKE_NVML_SCENARIO while the session lives.
pub struct Session {
    _lock: MutexGuard<'static, ()>,
    pub file: tempfile::NamedTempFile,
}

impl Session {
    pub fn new(scenario: &Value) -> Session {
        Session::with_text(&scenario.to_string())
    }

    pub fn with_text(text: &str) -> Session {
        let lock = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), text).expect("write scenario");
        std::env::set_var("FAKE_NVML_SCENARIO", file.path());
        Session { _lock: lock, file }
    }

    /// Replaces the scenario file in place (new size, so new stamp).
    pub fn rewrite(&self, scenario: &Value) {
        let mut file = std::fs::File::create(self.file.path()).expect("rewrite scenario");
        file.write_all(scenario.to_string().as_bytes()).expect("write scenario");
    }

    /// A session with no scenario variable at all.
    pub fn unset() -> MutexGuard<'static, ()> {
        let lock = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        std::env::remove_var("FAKE_NVML_SCENARIO");
        lock
    }
}

/// The scenario of the README, as the brief spells it, plus optional fields.
pub fn example() -> Value {
    serde_json::json!({
        "driver_version": "580.159.03", "cuda_driver_version": 13000, "nvml_version": "13.580.159.03",
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "uuid": "GPU-3f2a9c1e-5b7d-4e21-9a0c-0123456789ab",
            "pci_bus_id": "00000000:01:00.0",
            "memory": {"total": 17171480576u64, "used": 5379194880u64, "free": 11792285696u64, "reserved": 0},
            "utilization": {"gpu": 15, "memory": 30}, "temperature_c": 37, "power_mw": 26000, "power_limit_mw": 320000,
            "compute_processes": [{"pid": 4242, "used_memory": 1406669824}],
            "graphics_processes": [{"pid": 4343, "used_memory": null}],
            "process_utilization": [{"pid": 4242, "sm": 15, "mem": 3, "enc": 0, "dec": 0}],
            "errors": {"nvmlDeviceGetMPSComputeRunningProcesses_v3": 999},
            "fan_percent": 30,
            "clocks": {"graphics_mhz": 2505, "sm_mhz": 2505, "memory_mhz": 11501, "video_mhz": 2040},
            "max_clocks": {"graphics_mhz": 3105, "sm_mhz": 3105, "memory_mhz": 11501, "video_mhz": 2415},
            "pcie": {"gen": 4, "width": 16, "max_gen": 4, "max_width": 16, "tx_kbps": 1200, "rx_kbps": 34000},
            "driver_model": {"current": 1, "pending": 0},
            "brand": 5, "architecture": 8, "minor_number": 3, "serial": "1650923001234",
            "cuda_compute_capability": {"major": 8, "minor": 9},
            "performance_state": 2, "compute_mode": 0, "persistence_mode": true,
            "encoder_utilization": 4, "decoder_utilization": 6,
            "bar1": {"total": 268435456, "free": 200000000, "used": 68435456},
            "ecc": {"current": true, "pending": false, "volatile_uncorrected": 2},
            "temperature_thresholds": {"shutdown": 98, "slowdown": 95},
            "power_limit_constraints_mw": {"min": 150000, "max": 352000},
            "cpu_affinity": [255]
        }, {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
            "pci_bus_id": "0000:41:00.0",
            "memory": {"total": 85520809984u64, "used": 4000000000u64, "free": 81520809984u64, "reserved": 500000000},
            "compute_processes": [],
            "graphics_processes": []
        }]
    })
}
