//! The fake, loaded by nvml-wrapper exactly as gputaskman loads a real NVML:
//! every scenario value comes back through nvml-wrapper's public API.

mod common;

use std::time::{Duration, Instant};

use common::{example, lib_path, Session};
use nvml_wrapper::enum_wrappers::device::{
    Brand, Clock, EccCounter, MemoryError, PcieUtilCounter, PerformanceState, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::{DeviceArchitecture, UsedGpuMemory};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde_json::json;

fn init() -> Result<Nvml, NvmlError> {
    let path = lib_path();
    Nvml::builder().lib_path(path.as_os_str()).init()
}

fn pids(processes: &[nvml_wrapper::struct_wrappers::device::ProcessInfo]) -> Vec<u32> {
    processes.iter().map(|p| p.pid).collect()
}

#[test]
fn system_values() {
    let _s = Session::new(&example());
    let nvml = init().unwrap();
    assert_eq!(nvml.sys_driver_version().unwrap(), "580.159.03");
    assert_eq!(nvml.sys_nvml_version().unwrap(), "13.580.159.03");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 13000);
    assert_eq!(nvml.device_count().unwrap(), 2);
}

#[test]
fn device_identity() {
    let _s = Session::new(&example());
    let nvml = init().unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.name().unwrap(), "NVIDIA GeForce RTX 4080 SUPER");
    assert_eq!(d.uuid().unwrap(), "GPU-3f2a9c1e-5b7d-4e21-9a0c-0123456789ab");
    assert_eq!(d.index().unwrap(), 0);
    assert_eq!(d.serial().unwrap(), "1650923001234");
    assert_eq!(d.minor_number().unwrap(), 3);
    assert_eq!(d.brand().unwrap(), Brand::GeForce);
    assert_eq!(d.architecture().unwrap(), DeviceArchitecture::Ada);
    let cc = d.cuda_compute_capability().unwrap();
    assert_eq!((cc.major, cc.minor), (8, 9));
    let pci = d.pci_info().unwrap();
    assert_eq!(pci.bus_id, "00000000:01:00.0");
    assert_eq!((pci.domain, pci.bus, pci.device), (0, 1, 0));

    // The second device's short bus id comes back in NVML's long form.
    let h100 = nvml.device_by_index(1).unwrap();
    assert_eq!(h100.pci_info().unwrap().bus_id, "00000000:41:00.0");
    assert_eq!(h100.index().unwrap(), 1);

    // Lookups find the same devices.
    let by_uuid = nvml.device_by_uuid("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee").unwrap();
    assert_eq!(by_uuid.name().unwrap(), "NVIDIA H100 80GB HBM3");
    let by_bus = nvml.device_by_pci_bus_id("00000000:01:00.0").unwrap();
    assert_eq!(by_bus.uuid().unwrap(), "GPU-3f2a9c1e-5b7d-4e21-9a0c-0123456789ab");
    assert!(matches!(nvml.device_by_uuid("GPU-nope"), Err(NvmlError::NotFound)));
    assert!(matches!(nvml.device_by_index(2), Err(NvmlError::InvalidArg)));
}

#[test]
fn device_readings() {
    let _s = Session::new(&example());
    let nvml = init().unwrap();
    let d = nvml.device_by_index(0).unwrap();

    let m = d.memory_info().unwrap();
    assert_eq!(
        (m.total, m.used, m.free, m.reserved),
        (17171480576, 5379194880, 11792285696, 0)
    );
    let h100 = nvml.device_by_index(1).unwrap().memory_info().unwrap();
    assert_eq!((h100.used, h100.reserved), (4000000000, 500000000));

    let u = d.utilization_rates().unwrap();
    assert_eq!((u.gpu, u.memory), (15, 30));
    assert_eq!(d.temperature(TemperatureSensor::Gpu).unwrap(), 37);
    assert_eq!(d.temperature_threshold(TemperatureThreshold::Shutdown).unwrap(), 98);
    assert!(matches!(
        d.temperature_threshold(TemperatureThreshold::GpuMax),
        Err(NvmlError::NotSupported)
    ));
    assert_eq!(d.power_usage().unwrap(), 26000);
    assert_eq!(d.enforced_power_limit().unwrap(), 320000);
    assert_eq!(d.power_management_limit().unwrap(), 320000);
    let limits = d.power_management_limit_constraints().unwrap();
    assert_eq!((limits.min_limit, limits.max_limit), (150000, 352000));
    assert_eq!(d.performance_state().unwrap(), PerformanceState::Two);
    assert_eq!(d.num_fans().unwrap(), 1);
    assert_eq!(d.fan_speed(0).unwrap(), 30);
    assert!(matches!(d.fan_speed(1), Err(NvmlError::InvalidArg)));
    assert_eq!(d.clock_info(Clock::Graphics).unwrap(), 2505);
    assert_eq!(d.clock_info(Clock::Memory).unwrap(), 11501);
    assert_eq!(d.clock_info(Clock::Video).unwrap(), 2040);
    assert_eq!(d.max_clock_info(Clock::SM).unwrap(), 3105);
    assert_eq!(d.current_pcie_link_gen().unwrap(), 4);
    assert_eq!(d.current_pcie_link_width().unwrap(), 16);
    assert_eq!(d.max_pcie_link_gen().unwrap(), 4);
    assert_eq!(d.max_pcie_link_width().unwrap(), 16);
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Send).unwrap(), 1200);
    assert_eq!(d.pcie_throughput(PcieUtilCounter::Receive).unwrap(), 34000);
    let encoder = d.encoder_utilization().unwrap();
    assert_eq!((encoder.utilization, encoder.sampling_period), (4, 1_000_000));
    assert_eq!(d.decoder_utilization().unwrap().utilization, 6);
    let bar1 = d.bar1_memory_info().unwrap();
    assert_eq!((bar1.total, bar1.free, bar1.used), (268435456, 200000000, 68435456));
    let ecc = d.is_ecc_enabled().unwrap();
    assert_eq!((ecc.currently_enabled, ecc.pending_enabled), (true, false));
    assert_eq!(
        d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .unwrap(),
        2
    );
    assert!(matches!(
        d.total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate),
        Err(NvmlError::NotSupported)
    ));
    assert!(d.is_in_persistent_mode().unwrap());
    assert_eq!(d.cpu_affinity(2).unwrap(), vec![255, 0]);
}

#[test]
fn processes_and_unavailable_memory() {
    let _s = Session::new(&example());
    let nvml = init().unwrap();
    let d = nvml.device_by_index(0).unwrap();

    let compute = d.running_compute_processes().unwrap();
    assert_eq!(pids(&compute), vec![4242]);
    assert_eq!(compute[0].used_gpu_memory, UsedGpuMemory::Used(1406669824));
    assert_eq!(compute[0].gpu_instance_id, None);
    assert_eq!(compute[0].compute_instance_id, None);
    assert_eq!(d.running_compute_processes_count().unwrap(), 1);

    let graphics = d.running_graphics_processes().unwrap();
    assert_eq!(pids(&graphics), vec![4343]);
    assert_eq!(graphics[0].used_gpu_memory, UsedGpuMemory::Unavailable);

    // An empty list is a success; the injected error hits only its function.
    let h100 = nvml.device_by_index(1).unwrap();
    assert!(h100.running_compute_processes().unwrap().is_empty());
    assert!(matches!(d.mps_running_compute_processes(), Err(NvmlError::Unknown)));

    let samples = d.process_utilization_stats(None).unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!((samples[0].pid, samples[0].sm_util, samples[0].mem_util), (4242, 15, 3));
    // Default timestamps are "now": newer than anything seen before.
    let later = d.process_utilization_stats(samples[0].timestamp - 1).unwrap();
    assert_eq!(later.len(), 1);
}

#[test]
fn instance_ids_come_back() {
    let _s = Session::new(&json!({"devices": [{"compute_processes": [
        {"pid": 7, "used_memory": 1, "gpu_instance_id": 1, "compute_instance_id": 0}
    ]}]}));
    let nvml = init().unwrap();
    let p = &nvml.device_by_index(0).unwrap().running_compute_processes().unwrap()[0];
    assert_eq!((p.gpu_instance_id, p.compute_instance_id), (Some(1), Some(0)));
}

#[test]
fn missing_fields_are_not_supported() {
    let _s = Session::new(&json!({"devices": [{"name": "bare"}]}));
    let nvml = init().unwrap();
    assert!(matches!(nvml.sys_driver_version(), Err(NvmlError::NotSupported)));
    assert!(matches!(nvml.sys_cuda_driver_version(), Err(NvmlError::NotSupported)));
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.name().unwrap(), "bare");
    assert!(matches!(d.uuid(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.pci_info(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.memory_info(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.utilization_rates(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        d.temperature(TemperatureSensor::Gpu),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(d.power_usage(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.enforced_power_limit(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.clock_info(Clock::SM), Err(NvmlError::NotSupported)));
    assert!(matches!(d.bar1_memory_info(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.running_compute_processes(), Err(NvmlError::NotSupported)));
    assert!(matches!(d.running_graphics_processes(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        d.process_utilization_stats(None),
        Err(NvmlError::NotSupported)
    ));
    // The index alone always exists: it defaults to the position.
    assert_eq!(d.index().unwrap(), 0);
}

#[test]
fn injected_errors_per_function_and_system_wide() {
    let _s = Session::new(&json!({
        "driver_version": "1.0",
        "errors": {"nvmlSystemGetDriverVersion": 4, "nvmlDeviceGetName": 17},
        "devices": [
            {"name": "a", "compute_processes": [], "graphics_processes": [],
             "errors": {"nvmlDeviceGetComputeRunningProcesses_v3": 999, "nvmlDeviceGetUUID": 15}},
            {"name": "b", "uuid": "GPU-b", "compute_processes": []}
        ]
    }));
    let nvml = init().unwrap();
    assert!(matches!(nvml.sys_driver_version(), Err(NvmlError::NoPermission)));
    let a = nvml.device_by_index(0).unwrap();
    let b = nvml.device_by_index(1).unwrap();
    assert!(matches!(a.running_compute_processes(), Err(NvmlError::Unknown)));
    assert!(matches!(a.uuid(), Err(NvmlError::GpuLost)));
    assert!(a.running_graphics_processes().unwrap().is_empty());
    assert!(b.running_compute_processes().unwrap().is_empty());
    assert_eq!(b.uuid().unwrap(), "GPU-b");
    // Top-level errors hit every device.
    assert!(matches!(a.name(), Err(NvmlError::OperatingSystem)));
    assert!(matches!(b.name(), Err(NvmlError::OperatingSystem)));
}

#[test]
fn init_error_and_bad_scenarios() {
    {
        let _s = Session::new(&json!({"init_error": 9, "devices": []}));
        assert!(matches!(init(), Err(NvmlError::DriverNotLoaded)));
    }
    {
        let _s = Session::with_text("{\"devices\": [ {\"name\": 3} ]}");
        assert!(matches!(init(), Err(NvmlError::Unknown)));
    }
    {
        let _lock = Session::unset();
        assert!(matches!(init(), Err(NvmlError::DriverNotLoaded)));
    }
}

#[test]
fn lost_after_calls() {
    let _s = Session::new(&json!({"devices": [
        {"name": "fragile", "temperature_c": 50, "lost_after_calls": 3},
        {"name": "sturdy", "temperature_c": 40}
    ]}));
    let nvml = init().unwrap();
    // Call 1: the handle lookup.
    let fragile = nvml.device_by_index(0).unwrap();
    let sturdy = nvml.device_by_index(1).unwrap();
    assert_eq!(fragile.temperature(TemperatureSensor::Gpu).unwrap(), 50); // 2
    assert_eq!(fragile.name().unwrap(), "fragile"); // 3
    assert!(matches!(fragile.name(), Err(NvmlError::GpuLost)));
    assert!(matches!(
        fragile.temperature(TemperatureSensor::Gpu),
        Err(NvmlError::GpuLost)
    ));
    assert!(matches!(nvml.device_by_index(0), Err(NvmlError::GpuLost)));
    assert_eq!(sturdy.temperature(TemperatureSensor::Gpu).unwrap(), 40);
    assert_eq!(nvml.device_count().unwrap(), 2);
}

#[test]
fn struct_bytes_32_scrambles_pids() {
    let _s = Session::new(&json!({"devices": [{"process_struct_bytes": 32, "compute_processes": [
        {"pid": 4242, "used_memory": 1406669824},
        {"pid": 4343, "used_memory": 2048}
    ]}]}));
    let nvml = init().unwrap();
    let processes = nvml.device_by_index(0).unwrap().running_compute_processes().unwrap();
    // Record 0 is intact; record 1 starts inside record 0's 32-byte layout:
    // its pid is the low half of usedGpuCcProtectedMemory (0) and its
    // "used memory" is the second process's pid.
    assert_eq!(pids(&processes), vec![4242, 0]);
    assert_eq!(processes[0].used_gpu_memory, UsedGpuMemory::Used(1406669824));
    assert_eq!(processes[1].used_gpu_memory, UsedGpuMemory::Used(4343));
    // gpuInstanceId/computeInstanceId are the two halves of 2048.
    assert_eq!(processes[1].gpu_instance_id, Some(2048));
    assert_eq!(processes[1].compute_instance_id, Some(0));
}

#[test]
fn hang_ms_delays_the_answer() {
    let _s = Session::new(&json!({"devices": [
        {"temperature_c": 61, "power_mw": 1, "hang_ms": {"nvmlDeviceGetTemperature": 200}}
    ]}));
    let nvml = init().unwrap();
    let d = nvml.device_by_index(0).unwrap();
    let start = Instant::now();
    assert_eq!(d.temperature(TemperatureSensor::Gpu).unwrap(), 61);
    assert!(start.elapsed() >= Duration::from_millis(200));
    // Another function on the same device answers at once; the hang does not hold the lock.
    let start = Instant::now();
    assert_eq!(d.power_usage().unwrap(), 1);
    assert!(start.elapsed() < Duration::from_millis(200));
}

#[test]
fn hang_ms_in_init_and_system_calls() {
    let _s = Session::new(&json!({"cuda_driver_version": 12040, "devices": [],
        "hang_ms": {"nvmlInit_v2": 200, "nvmlSystemGetCudaDriverVersion_v2": 200}}));
    let start = Instant::now();
    let nvml = init().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(200));
    let start = Instant::now();
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12040);
    assert!(start.elapsed() >= Duration::from_millis(200));
}

#[test]
fn hang_does_not_block_other_threads() {
    let _s = Session::new(&json!({"devices": [
        {"temperature_c": 61, "power_mw": 1, "hang_ms": {"nvmlDeviceGetTemperature": 1000}}
    ]}));
    let nvml = init().unwrap();
    // Were the hang holding the lock, the second call would wait ~900 ms.
    std::thread::scope(|scope| {
        let hung = scope.spawn(|| {
            nvml.device_by_index(0)
                .unwrap()
                .temperature(TemperatureSensor::Gpu)
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(100));
        let start = Instant::now();
        assert_eq!(nvml.device_by_index(0).unwrap().power_usage().unwrap(), 1);
        assert!(start.elapsed() < Duration::from_millis(700));
        assert_eq!(hung.join().unwrap(), 61);
    });
}

#[test]
fn scenario_reloads_when_the_file_changes() {
    let s = Session::new(&json!({"devices": [{"name": "first"}]}));
    let nvml = init().unwrap();
    assert_eq!(nvml.device_count().unwrap(), 1);
    s.rewrite(&json!({"devices": [{"name": "second"}, {"name": "third", "temperature_c": 70}]}));
    assert_eq!(nvml.device_count().unwrap(), 2);
    assert_eq!(nvml.device_by_index(0).unwrap().name().unwrap(), "second");
    let third = nvml.device_by_index(1).unwrap();
    assert_eq!(third.temperature(TemperatureSensor::Gpu).unwrap(), 70);

    // A broken file keeps the last good scenario (a writer may be mid-way).
    std::fs::write(s.file.path(), "{\"devices\": [").unwrap();
    assert_eq!(nvml.device_count().unwrap(), 2);
    s.rewrite(&json!({"devices": []}));
    assert_eq!(nvml.device_count().unwrap(), 0);
    // A handle from before the change no longer names a device.
    assert!(matches!(third.name(), Err(NvmlError::InvalidArg)));
}

#[test]
fn process_list_grows_between_count_and_fill() {
    // nvml-wrapper asks for the count, then fills a buffer 5 records larger.
    let s = Session::new(&json!({"devices": [{"process_list_grows_by": 3, "compute_processes": [
        {"pid": 10, "used_memory": 1}, {"pid": 11, "used_memory": 2}
    ]}]}));
    let nvml = init().unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.running_compute_processes_count().unwrap(), 2);
    let processes = d.running_compute_processes().unwrap();
    assert_eq!(pids(&processes), vec![10, 11, 1_000_000, 1_000_001, 1_000_002]);
    assert_eq!(processes[2].used_gpu_memory, UsedGpuMemory::Used(64 << 20));
    drop(nvml);

    // More newcomers than that headroom: the fill call fails with INSUFFICIENT_SIZE.
    s.rewrite(&json!({"devices": [{"process_list_grows_by": 8, "compute_processes": [
        {"pid": 10, "used_memory": 1}
    ]}]}));
    let nvml = init().unwrap();
    let d = nvml.device_by_index(0).unwrap();
    assert!(matches!(
        d.running_compute_processes(),
        Err(NvmlError::InsufficientSize(_))
    ));
}

#[test]
fn init_is_reference_counted() {
    let _s = Session::new(&json!({"devices": [{"name": "x"}]}));
    let first = init().unwrap();
    let second = init().unwrap();
    second.shutdown().unwrap();
    assert_eq!(first.device_by_index(0).unwrap().name().unwrap(), "x");
    first.shutdown().unwrap();
    // And again, after the count went back to zero.
    let third = init().unwrap();
    assert_eq!(third.device_count().unwrap(), 1);
}

#[test]
fn shipped_example_scenario() {
    let _s = Session::with_text(include_str!("../scenarios/example.json"));
    let nvml = init().unwrap();
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 13000);
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.name().unwrap(), "NVIDIA GeForce RTX 4080 SUPER");
    assert_eq!(d.memory_info().unwrap().used, 5379194880);
    assert!(matches!(d.running_compute_processes(), Err(NvmlError::Unknown)));
    let graphics = d.running_graphics_processes().unwrap();
    assert_eq!(pids(&graphics), vec![4343]);
    assert_eq!(graphics[0].used_gpu_memory, UsedGpuMemory::Unavailable);
    assert_eq!(d.process_utilization_stats(None).unwrap()[0].pid, 4242);
}

#[test]
fn mig_devices_through_the_wrapper() {
    let _s = Session::new(&json!({
        "devices": [{
            "name": "NVIDIA H100 80GB HBM3",
            "memory": {"total": 85520809984u64, "used": 3000000000u64, "free": 82520809984u64},
            "mig_mode": {"current": 1, "pending": 1}, "max_mig_device_count": 7,
            "compute_processes": [
                {"pid": 71, "used_memory": 1000000000u64, "gpu_instance_id": 3, "compute_instance_id": 0},
                {"pid": 72, "used_memory": 2000000000u64, "gpu_instance_id": 5, "compute_instance_id": 1}
            ],
            "mig_devices": [
                {"gpu_instance_id": 3, "compute_instance_id": 0, "name": "NVIDIA H100 80GB HBM3 MIG 4g.40gb",
                 "uuid": "MIG-3", "memory": {"total": 42949672960u64, "used": 1000000000u64, "free": 41949672960u64}},
                {"gpu_instance_id": 5, "compute_instance_id": 1, "name": "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb",
                 "uuid": "MIG-5-1", "memory": {"total": 42949672960u64, "used": 2000000000u64, "free": 40949672960u64}}
            ]
        }]
    }));
    let nvml = init().unwrap();
    assert_eq!(nvml.device_count().unwrap(), 1, "MIG devices are not GPUs");
    let gpu = nvml.device_by_index(0).unwrap();
    let mode = gpu.mig_mode().unwrap();
    assert_eq!((mode.current, mode.pending), (1, 1));
    assert_eq!(gpu.mig_device_count().unwrap(), 7);
    assert!(!gpu.mig_is_mig_device_handle().unwrap());
    let second = gpu.mig_device_by_index(1).unwrap();
    assert!(second.mig_is_mig_device_handle().unwrap());
    assert_eq!(second.name().unwrap(), "NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb");
    assert_eq!(second.uuid().unwrap(), "MIG-5-1");
    assert_eq!(second.memory_info().unwrap().used, 2000000000);
    assert_eq!(pids(&second.running_compute_processes().unwrap()), vec![72]);
    assert_eq!(pids(&gpu.running_compute_processes().unwrap()), vec![71, 72]);
    assert!(matches!(second.utilization_rates(), Err(NvmlError::NotSupported)));
    assert_eq!(
        second.mig_parent_device().unwrap().name().unwrap(),
        "NVIDIA H100 80GB HBM3"
    );
    assert!(matches!(gpu.mig_device_by_index(2), Err(NvmlError::NotFound)));
}
