//! NVIDIA devices through NVML, loaded at run time by nvml-wrapper so one
//! binary runs with or without the driver.
//!
//! Two places go around the wrapper, both for the driver quirks listed in
//! shared/reference/nvml.md:
//! - process lists: some R530/535 drivers write 32-byte records where the
//!   `_v3` calls promise 24-byte ones, which scrambles PIDs. We give the
//!   driver room for 32-byte records, decode both strides and keep the one
//!   whose PIDs exist in /proc (nvitop and gpustat work around the same bug).
//! - memory: nvml-wrapper only calls nvmlDeviceGetMemoryInfo_v2 (driver
//!   510+); older drivers get the v1 call.
//!
//! MIG: a GPU in MIG mode is read as itself (the whole card's memory,
//! power, temperature) and each of its MIG devices (one per compute
//! instance) as a device of its own, after it in the list. Per nvml.h, on a
//! GPU handle in MIG mode the process lists are the aggregate and need
//! privileges; "per-instance information can be queried by using specific
//! MIG device handles", which any user may: so the lists are read on each
//! MIG handle, and its processes are that instance's. NVML has no
//! utilization per instance (nor per process in MIG mode): those are null.

mod health;

use self::health::HealthTracker;
pub use super::sample::{GpuProcess, Sample};
use super::source::{Owner, Report, Round, Source};
use super::watchdog::{Request, Watchdog, Watched, DEADLINE};
use crate::snapshot::{Backend, BackendStatus, Clocks, Device, GpuUsage, MigInstance, PciIds, Pcie, QueryError};
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device as NvmlDevice, Nvml};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlMemory_t, nvmlProcessInfo_t, nvmlReturn_t};
use std::collections::{BTreeMap, HashMap};
use std::os::raw::c_uint;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// NVML_VALUE_NOT_AVAILABLE: the driver cannot say (WDDM per-process memory).
const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
const NVML_SUCCESS: nvmlReturn_t = 0;
const NVML_ERROR_INSUFFICIENT_SIZE: nvmlReturn_t = 7;

/// What the driver wrote per process: the layout nvml-wrapper expects, and
/// the one some drivers write instead.
const RECORD_BYTES: usize = std::mem::size_of::<nvmlProcessInfo_t>();
const QUIRK_RECORD_BYTES: usize = 32;

pub struct NvmlSource {
    nvml: Nvml,
    /// Per device: the newest process-utilization sample seen (µs).
    last_util_us: HashMap<u32, u64>,
    /// Health kept across samples: violation counters, XIDs, lost GPUs.
    health: HealthTracker,
}

/// The library nvml-wrapper loads when no path is given.
#[cfg(windows)]
const DEFAULT_LIB: &str = "nvml.dll";
#[cfg(not(windows))]
const DEFAULT_LIB: &str = "libnvidia-ml.so.1";

impl NvmlSource {
    /// Loads and initialises NVML. The error is a [`Backend`] line that says
    /// why in words a person can act on.
    pub fn open(lib: Option<&Path>) -> Result<NvmlSource, Backend> {
        let mut builder = Nvml::builder();
        if let Some(path) = lib {
            builder.lib_path(path.as_os_str());
        }
        let shown = lib
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| DEFAULT_LIB.to_string());
        match builder.init() {
            Ok(nvml) => Ok(NvmlSource {
                nvml,
                last_util_us: HashMap::new(),
                health: HealthTracker::default(),
            }),
            Err(NvmlError::LibloadingError(e)) => Err(Backend {
                name: "nvml".into(),
                status: BackendStatus::Unavailable,
                detail: match lib {
                    // The static musl build has no dynamic loader: dlopen
                    // fails whatever is installed, so "no driver" would lie.
                    _ if cfg!(all(target_env = "musl", target_feature = "crt-static")) => format!(
                        "this static build cannot load {shown} (no dynamic loader: {e}); \
                         the Debian package or `cargo install` build can"
                    ),
                    None => format!("{shown} not found: no NVIDIA driver is installed ({e})"),
                    Some(_) => format!("cannot load {shown}: {e}"),
                },
            }),
            Err(e @ (NvmlError::DriverNotLoaded | NvmlError::NoPermission | NvmlError::LibraryNotFound)) => {
                Err(Backend {
                    name: "nvml".into(),
                    status: BackendStatus::Unavailable,
                    detail: format!("{shown} loaded but NVML did not start: {e}"),
                })
            }
            Err(e) => Err(Backend {
                name: "nvml".into(),
                status: BackendStatus::Error,
                detail: format!("NVML initialisation failed: {e}"),
            }),
        }
    }

    /// Whether the library at `path` loads, without starting NVML (which
    /// can take seconds): a path given on the command line that does not
    /// is an error, where the default library missing is only a status.
    pub fn check_loads(path: &Path) -> Result<(), String> {
        // SAFETY: loading runs the library's initialisers, as nvml-wrapper's
        // load of the same file does right after; no symbol is called.
        match unsafe { libloading::Library::new(path) } {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("cannot load {}: {e}", path.display())),
        }
    }

    fn driver_versions(&self) -> (Option<String>, Option<String>) {
        let driver = self.nvml.sys_driver_version().ok();
        let cuda = self.nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        });
        (driver, cuda)
    }

    /// Reads every device (or only `only`). `pid_visible` says whether a PID
    /// exists in our /proc: it picks the process-record stride.
    pub fn sample(&mut self, only: Option<u32>, pid_visible: &dyn Fn(u32) -> bool) -> Result<Sample, String> {
        let count = self
            .nvml
            .device_count()
            .map_err(|e| format!("cannot count devices: {e}"))?;
        let (driver_version, cuda_version) = self.driver_versions();
        let mut sample = Sample::default();
        self.health.drain_events(&self.nvml, &|d| d.index().ok());
        // MIG instances are numbered after every GPU.
        let mut next_instance = count;
        for index in (0..count).filter(|i| only.is_none_or(|o| o == *i)) {
            let mut device = Device {
                index,
                backend: "nvml".into(),
                vendor: "NVIDIA".into(),
                driver_version: driver_version.clone(),
                cuda_version: cuda_version.clone(),
                ..Device::default()
            };
            let mut instances = Vec::new();
            match self.nvml.device_by_index(index) {
                Ok(handle) => match mig_devices(&handle) {
                    Ok(Some(handles)) => {
                        let template = Device {
                            parent: Some(index),
                            ..device.clone()
                        };
                        let (read, processes) = read_mig_gpu(
                            &self.nvml,
                            &handle,
                            &mut device,
                            &handles,
                            (&template, &mut next_instance),
                            pid_visible,
                        );
                        instances = read;
                        sample.processes.extend(processes);
                    }
                    mode => {
                        if let Err(e) = mode {
                            device.errors.push(QueryError {
                                query: "mig devices".into(),
                                message: describe(&e),
                            });
                        }
                        let last = self.last_util_us.get(&index).copied();
                        let (processes, newest) =
                            read_device(&self.nvml, &handle, &mut device, (last, &mut self.health), pid_visible);
                        if let Some(ts) = newest {
                            self.last_util_us.insert(index, ts);
                        }
                        sample.processes.extend(processes);
                    }
                },
                Err(e) => {
                    device.errors.push(QueryError {
                        query: "device handle".into(),
                        message: describe(&e),
                    });
                    let mut kept = Vec::new();
                    self.health
                        .settle(&mut device, &mut kept, matches!(e, NvmlError::GpuLost));
                    sample.processes.extend(kept);
                }
            }
            sample.devices.push(device);
            sample.devices.extend(instances);
        }
        Ok(sample)
    }
}

/// The error in words, with NVML's own code where it has one.
fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::GpuLost => "the GPU is lost: it fell off the bus or stopped answering".into(),
        other => other.to_string(),
    }
}

/// Collects query results: a value, nothing when the device does not
/// support the query (not a fault), or an error entry.
struct Reader<'a> {
    errors: &'a mut Vec<QueryError>,
    lost: bool,
}

impl Reader<'_> {
    fn get<T>(&mut self, query: &str, result: Result<T, NvmlError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => None,
            Err(e) => {
                if matches!(e, NvmlError::GpuLost) {
                    if self.lost {
                        return None;
                    }
                    self.lost = true;
                }
                self.errors.push(QueryError {
                    query: query.into(),
                    message: describe(&e),
                });
                None
            }
        }
    }
}

/// Fills `device` and returns the processes on it, with the newest
/// utilization timestamp seen.
fn read_device(
    nvml: &Nvml,
    handle: &NvmlDevice,
    device: &mut Device,
    (last_util_us, health): (Option<u64>, &mut HealthTracker),
    pid_visible: &dyn Fn(u32) -> bool,
) -> (Vec<GpuProcess>, Option<u64>) {
    let mut errors = Vec::new();
    let mut r = Reader {
        errors: &mut errors,
        lost: false,
    };
    read_properties(&mut r, nvml, handle, device);
    if !r.lost {
        let (read, lost) = health.read(nvml, handle, device.index, r.errors);
        device.health = Some(read);
        r.lost |= lost;
    }

    let (mut by_pid, complete) = read_lists(&mut r, nvml, handle, device, pid_visible);
    device.process_list_complete = complete && !r.lost;

    let mut newest = last_util_us;
    let since = last_util_us.unwrap_or_else(|| now_us().saturating_sub(1_000_000));
    let utilization = match handle.process_utilization_stats(since) {
        // Nothing newer than `since`: no listed process did GPU work.
        Err(NvmlError::NotFound) => Some(Vec::new()),
        other => r.get("process utilization", other),
    };
    if let Some(samples) = utilization {
        for usage in by_pid.values_mut() {
            for (engine, value) in [("sm", 0), ("mem", 0), ("enc", 0), ("dec", 0)] {
                usage.engines.insert(engine.into(), value);
            }
        }
        for s in samples {
            // Samples for PIDs not in the lists and stale timestamps are
            // noise the driver is known to return. Out-of-range values are
            // kept here: `plausible` makes that process's engines unknown
            // with a note (dropping the sample left it showing 0%).
            newest = newest.max(Some(s.timestamp));
            if let (true, Some(usage)) = (s.timestamp > since, by_pid.get_mut(&s.pid)) {
                usage.engines.insert("sm".into(), s.sm_util);
                usage.engines.insert("mem".into(), s.mem_util);
                usage.engines.insert("enc".into(), s.enc_util);
                usage.engines.insert("dec".into(), s.dec_util);
            }
        }
    }
    // After any the caller noted (MIG devices that could not be listed).
    let lost = r.lost;
    device.errors.extend(errors);
    let mut processes = listed_processes(by_pid);
    health.settle(device, &mut processes, lost);
    (processes, newest)
}

/// The entries of a device's lists as processes: exact where the PID is ours.
fn listed_processes(by_pid: BTreeMap<u32, GpuUsage>) -> Vec<GpuProcess> {
    by_pid
        .into_iter()
        // `pairing` stays None: the PID is the driver's own word, and only
        // the PID stage (container, WSL) pairs it with another.
        .map(|(pid, usage)| GpuProcess { pid, usage })
        .collect()
}

/// The compute, graphics and MPS lists of a GPU or MIG device handle, by
/// PID, as entries on `device`; false when a compute or graphics list
/// failed (the rows are then not the whole story).
fn read_lists(
    r: &mut Reader<'_>,
    nvml: &Nvml,
    handle: &NvmlDevice,
    device: &mut Device,
    pid_visible: &dyn Fn(u32) -> bool,
) -> (BTreeMap<u32, GpuUsage>, bool) {
    let mut complete = true;
    let mut by_pid: BTreeMap<u32, GpuUsage> = BTreeMap::new();
    // SAFETY: the handle is valid for the life of `nvml`, which outlives this
    // call; the library is the one nvml-wrapper loaded.
    let (raw, lib) = unsafe { (handle.handle(), nvml.lib()) };
    let lists = [
        (
            "compute processes",
            "C",
            lib.nvmlDeviceGetComputeRunningProcesses_v3.as_ref(),
        ),
        (
            "graphics processes",
            "G",
            lib.nvmlDeviceGetGraphicsRunningProcesses_v3.as_ref(),
        ),
        (
            "mps processes",
            "M",
            lib.nvmlDeviceGetMPSComputeRunningProcesses_v3.as_ref(),
        ),
    ];
    for (query, context, symbol) in lists {
        let Ok(function) = symbol else { continue };
        let listed = match process_list(*function, raw, pid_visible) {
            Ok(listed) => listed,
            Err(NvmlError::NotSupported) => continue,
            Err(e) => {
                // MPS lists are optional; a failed compute or graphics list
                // means the rows shown are not the whole story.
                complete &= context == "M";
                r.get(query, Err::<(), _>(e));
                continue;
            }
        };
        if listed.quirk_stride {
            device.notes.push(format!(
                "NVML wrote {QUIRK_RECORD_BYTES}-byte {query} records where {RECORD_BYTES} were asked (R530/535 driver quirk): read with that stride"
            ));
        }
        for (pid, used) in listed.records {
            let entry = by_pid.entry(pid).or_insert_with(|| GpuUsage {
                device: device.index,
                vram_bytes: None,
                spill_bytes: None,
                paged_bytes: None,
                source: "nvml".into(),
                pairing: None,
                contexts: Vec::new(),
                engines: BTreeMap::new(),
            });
            entry.contexts.push(context.into());
            // One figure per process, repeated in each list it appears in.
            entry.vram_bytes = entry.vram_bytes.max(used);
        }
    }
    (by_pid, complete)
}

/// The MIG device handles of a GPU in MIG mode; None when MIG is off or
/// the GPU has no MIG (NOT_SUPPORTED).
fn mig_devices<'n>(handle: &NvmlDevice<'n>) -> Result<Option<Vec<NvmlDevice<'n>>>, NvmlError> {
    let on = match handle.mig_mode() {
        Ok(mode) => mode.current == nvml_wrapper_sys::bindings::NVML_DEVICE_MIG_ENABLE,
        Err(NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => false,
        Err(e) => return Err(e),
    };
    if !on {
        return Ok(None);
    }
    let mut handles = Vec::new();
    // MIG device indices need not be dense: NOT_FOUND is a free slot.
    for index in 0..handle.mig_device_count()? {
        match handle.mig_device_by_index(index) {
            Ok(mig) => handles.push(mig),
            Err(NvmlError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(handles))
}

/// A GPU in MIG mode: its own figures into `device`, and each MIG device
/// as a device made from `template` (numbered from `next`), with the
/// processes read on its handle.
fn read_mig_gpu(
    nvml: &Nvml,
    handle: &NvmlDevice,
    device: &mut Device,
    handles: &[NvmlDevice],
    (template, next): (&Device, &mut u32),
    pid_visible: &dyn Fn(u32) -> bool,
) -> (Vec<Device>, Vec<GpuProcess>) {
    let mut errors = Vec::new();
    let mut r = Reader {
        errors: &mut errors,
        lost: false,
    };
    read_properties(&mut r, nvml, handle, device);
    device.notes.push(format!(
        "MIG mode: {} instance{}, each listed as a device of its own with its processes; this row is the whole GPU",
        handles.len(),
        if handles.len() == 1 { "" } else { "s" }
    ));
    let mut complete = true;
    let mut instances = Vec::new();
    let mut processes = Vec::new();
    for mig in handles {
        let mut instance = Device {
            index: *next,
            ..template.clone()
        };
        *next += 1;
        let mut instance_errors = Vec::new();
        let mut ir = Reader {
            errors: &mut instance_errors,
            lost: false,
        };
        instance.name = ir.get("name", mig.name());
        instance.uuid = ir.get("uuid", mig.uuid());
        if let Some((total, used, free, reserved)) = ir.get("memory", memory(nvml, mig)) {
            instance.memory_total_bytes = Some(total);
            instance.memory_used_bytes = Some(used);
            instance.memory_free_bytes = Some(free);
            instance.memory_reserved_bytes = reserved;
        }
        let ids = ir.get("instance ids", instance_ids(nvml, mig));
        instance.mig = ids.map(|(gpu_instance_id, compute_instance_id)| MigInstance {
            gpu_instance_id,
            compute_instance_id,
            profile: instance.name.as_deref().and_then(mig_profile),
        });
        let (by_pid, listed) = read_lists(&mut ir, nvml, mig, &mut instance, pid_visible);
        instance.process_list_complete = listed && !ir.lost;
        complete &= instance.process_list_complete;
        processes.extend(listed_processes(by_pid));
        instance.errors = instance_errors;
        instances.push(instance);
    }
    device.process_list_complete = complete && !r.lost;
    device.errors = errors;
    (instances, processes)
}

/// A MIG device's GPU instance and compute instance ids (not wrapped by
/// nvml-wrapper 0.13).
fn instance_ids(nvml: &Nvml, mig: &NvmlDevice) -> Result<(u32, u32), NvmlError> {
    // SAFETY: as in read_lists; both out-parameters are plain integers.
    unsafe {
        let lib = nvml.lib();
        let gpu = lib
            .nvmlDeviceGetGpuInstanceId
            .as_ref()
            .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
        let compute = lib
            .nvmlDeviceGetComputeInstanceId
            .as_ref()
            .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
        let (mut gi, mut ci) = (0, 0);
        nvml_try(gpu(mig.handle(), &mut gi))?;
        nvml_try(compute(mig.handle(), &mut ci))?;
        Ok((gi, ci))
    }
}

/// The profile in a MIG device's name: NVML names it after its GPU and
/// profile, "NVIDIA A100-SXM4-80GB MIG 3g.40gb" (nvidia-smi shows "MIG
/// 3g.40gb Device 0"): the word after "MIG".
fn mig_profile(name: &str) -> Option<String> {
    let mut words = name.split_whitespace().skip_while(|w| *w != "MIG");
    words.next()?;
    words.next().map(str::to_string)
}

/// The device's own figures: identity, memory, utilization, power,
/// clocks and PCIe, each failure noted in `r`.
fn read_properties(r: &mut Reader<'_>, nvml: &Nvml, handle: &NvmlDevice, device: &mut Device) {
    device.name = r.get("name", handle.name());
    device.uuid = r.get("uuid", handle.uuid());
    if let Some(pci) = r.get("pci info", handle.pci_info()) {
        // pciDeviceId is (device id << 16) | vendor id (nvml.h,
        // nvmlPciInfo_t); 0 is no id at all, which matches nothing.
        device.pci_ids = pci
            .pci_sub_system_id
            .filter(|_| pci.pci_device_id != 0)
            .map(|subsystem| PciIds {
                vendor: pci.pci_device_id as u16,
                device: (pci.pci_device_id >> 16) as u16,
                subsystem,
            });
        device.pci_bus_id = Some(pci.bus_id);
    }
    if let Some((total, used, free, reserved)) = r.get("memory", memory(nvml, handle)) {
        device.memory_total_bytes = Some(total);
        device.memory_used_bytes = Some(used);
        device.memory_free_bytes = Some(free);
        device.memory_reserved_bytes = reserved;
    }
    if let Some(u) = r.get("utilization", handle.utilization_rates()) {
        device.gpu_util_percent = Some(u.gpu);
        device.memory_activity_percent = Some(u.memory);
    }
    device.temperature_c = r.get("temperature", handle.temperature(TemperatureSensor::Gpu));
    device.power_w = r.get("power usage", handle.power_usage()).map(milliwatts);
    device.power_limit_w = r.get("power limit", handle.enforced_power_limit()).map(milliwatts);
    // mJ since the driver loaded (Volta and later); `accounting` reads it.
    device.energy_mj = r.get("total energy", handle.total_energy_consumption());
    device.fan_percent = r.get("fan speed", handle.fan_speed(0));
    device.driver_model = r.get("driver model", driver_model(nvml, handle));
    let clocks = Clocks {
        graphics_mhz: r.get("graphics clock", handle.clock_info(Clock::Graphics)),
        sm_mhz: r.get("sm clock", handle.clock_info(Clock::SM)),
        memory_mhz: r.get("memory clock", handle.clock_info(Clock::Memory)),
        graphics_max_mhz: r.get("max graphics clock", handle.max_clock_info(Clock::Graphics)),
        memory_max_mhz: r.get("max memory clock", handle.max_clock_info(Clock::Memory)),
    };
    device.clocks = (clocks != Clocks::default()).then_some(clocks);
    let pcie = Pcie {
        link_gen: r.get("pcie link generation", handle.current_pcie_link_gen()),
        link_width: r.get("pcie link width", handle.current_pcie_link_width()),
        max_link_gen: r.get("max pcie link generation", handle.max_pcie_link_gen()),
        max_link_width: r.get("max pcie link width", handle.max_pcie_link_width()),
        // NVML reports KB/s.
        tx_bytes_per_s: r
            .get("pcie tx", handle.pcie_throughput(PcieUtilCounter::Send))
            .map(|k| k as u64 * 1024),
        rx_bytes_per_s: r
            .get("pcie rx", handle.pcie_throughput(PcieUtilCounter::Receive))
            .map(|k| k as u64 * 1024),
    };
    device.pcie = (pcie != Pcie::default()).then_some(pcie);
}

fn milliwatts(mw: u32) -> f64 {
    mw as f64 / 1000.0
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// (total, used, free, reserved): the v2 call, or v1 on drivers before 510.
fn memory(nvml: &Nvml, handle: &NvmlDevice) -> Result<(u64, u64, u64, Option<u64>), NvmlError> {
    match handle.memory_info() {
        Ok(m) => Ok((m.total, m.used, m.free, Some(m.reserved))),
        Err(NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound) => {
            // SAFETY: as in read_device; `m` is a plain C struct NVML fills.
            unsafe {
                let f = nvml
                    .lib()
                    .nvmlDeviceGetMemoryInfo
                    .as_ref()
                    .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
                let mut m: nvmlMemory_t = std::mem::zeroed();
                nvml_try(f(handle.handle(), &mut m))?;
                Ok((m.total, m.used, m.free, None))
            }
        }
        Err(e) => Err(e),
    }
}

/// WDDM, TCC or MCDM. nvml-wrapper offers this on Windows only; the call
/// exists in every NVML, so it is made directly and answers NOT_SUPPORTED
/// where the notion does not apply.
fn driver_model(nvml: &Nvml, handle: &NvmlDevice) -> Result<String, NvmlError> {
    // SAFETY: as in read_device; both out-parameters are plain integers.
    unsafe {
        let f = nvml
            .lib()
            .nvmlDeviceGetDriverModel
            .as_ref()
            .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
        let (mut current, mut pending) = (0, 0);
        nvml_try(f(handle.handle(), &mut current, &mut pending))?;
        Ok(match current {
            0 => "WDDM".to_string(),
            1 => "TCC".to_string(),
            2 => "MCDM".to_string(),
            other => format!("unknown ({other})"),
        })
    }
}

type ProcessListFn = unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_t) -> nvmlReturn_t;

struct Listed {
    /// (pid, used bytes; None when NVML says "not available").
    records: Vec<(u32, Option<u64>)>,
    quirk_stride: bool,
}

/// Calls an NVML process-list function the way the header asks (count
/// first, then fill), retrying when the list grew in between, and decodes
/// the records with the stride the driver really used.
fn process_list(
    function: ProcessListFn,
    device: nvmlDevice_t,
    pid_visible: &dyn Fn(u32) -> bool,
) -> Result<Listed, NvmlError> {
    let mut count: c_uint = 0;
    // SAFETY: a null buffer with count 0 is the documented size query.
    let rc = unsafe { function(device, &mut count, std::ptr::null_mut()) };
    match rc {
        NVML_SUCCESS => {
            return Ok(Listed {
                records: Vec::new(),
                quirk_stride: false,
            })
        }
        NVML_ERROR_INSUFFICIENT_SIZE => {}
        other => nvml_try(other)?,
    }
    for _ in 0..4 {
        // Headroom for processes that start between the two calls; a buffer
        // of u64 keeps 8-byte alignment; room for the larger stride.
        let capacity = count as usize + 8;
        let mut buffer = vec![0u64; capacity * QUIRK_RECORD_BYTES / 8];
        let mut filled = capacity as c_uint;
        // SAFETY: the buffer holds `capacity` records of either stride.
        let rc = unsafe { function(device, &mut filled, buffer.as_mut_ptr().cast()) };
        if rc == NVML_ERROR_INSUFFICIENT_SIZE {
            count = filled.max(count + 8);
            continue;
        }
        nvml_try(rc)?;
        let bytes: Vec<u8> = buffer.iter().flat_map(|w| w.to_ne_bytes()).collect();
        return Ok(decode_records(&bytes, (filled as usize).min(capacity), pid_visible));
    }
    Err(NvmlError::InsufficientSize(Some(count as usize)))
}

/// Decodes `n` records, choosing between the expected stride and the
/// 32-byte quirk by which one yields PIDs that exist. Record layout (both):
/// u32 pid at 0, u64 usedGpuMemory at 8.
fn decode_records(bytes: &[u8], n: usize, pid_visible: &dyn Fn(u32) -> bool) -> Listed {
    let decode = |stride: usize| -> Vec<(u32, Option<u64>)> {
        (0..n)
            .filter_map(|i| {
                let at = i * stride;
                let pid = u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
                let used = u64::from_ne_bytes(bytes.get(at + 8..at + 16)?.try_into().ok()?);
                Some((pid, (used != VALUE_NOT_AVAILABLE).then_some(used)))
            })
            .collect()
    };
    let expected = decode(RECORD_BYTES);
    if n < 2 {
        return Listed {
            records: expected,
            quirk_stride: false,
        };
    }
    let quirk = decode(QUIRK_RECORD_BYTES);
    let score =
        |records: &[(u32, Option<u64>)]| records.iter().filter(|(pid, _)| *pid != 0 && pid_visible(*pid)).count();
    let zero_pids = |records: &[(u32, Option<u64>)]| records.iter().filter(|(pid, _)| *pid == 0).count();
    let (expected_score, quirk_score) = (score(&expected), score(&quirk));
    // PID 0 is never a process: a 24-byte read of 32-byte records lands on
    // the zero high half of the extra u64 field.
    let use_quirk = quirk_score > expected_score
        || (quirk_score == expected_score && zero_pids(&expected) > 0 && zero_pids(&quirk) == 0);
    if use_quirk {
        Listed {
            records: quirk,
            quirk_stride: true,
        }
    } else {
        Listed {
            records: expected,
            quirk_stride: false,
        }
    }
}

impl Sample {
    /// As a source's reading: the PIDs are the driver's, decided on by the
    /// collector's PID stage.
    pub fn into_reading(self) -> Report {
        let lost: HashMap<u32, String> = self
            .devices
            .iter()
            .filter_map(|d| Some((d.index, health::lost_note(d)?)))
            .collect();
        let notes = self
            .processes
            .iter()
            .filter_map(|g| Some((g.pid, vec![lost.get(&g.usage.device)?.clone()])))
            .collect();
        Report {
            devices: self.devices,
            usage: self
                .processes
                .into_iter()
                .map(|g| (Owner::Local(g.pid), g.usage))
                .collect(),
            notes,
        }
    }
}

/// NVML as the collector reads it: started and read on the [`Watchdog`],
/// since any driver call, `nvmlInit_v2` included, can hang.
pub struct WatchedNvml {
    watchdog: Watchdog,
    /// In a child PID namespace, NVML's PIDs are the host's (its status line
    /// says how they are paired).
    in_child_namespace: bool,
}

impl WatchedNvml {
    pub fn open(lib: Option<&Path>, in_child_namespace: bool) -> WatchedNvml {
        WatchedNvml {
            watchdog: watched(lib, |pid, r| r.visible.contains(&pid)),
            in_child_namespace,
        }
    }
}

/// NVML opened and sampled on a [`Watchdog`]; `visible` says whether a PID
/// of the request exists here (it picks the process-record stride).
pub fn watched(lib: Option<&Path>, visible: fn(u32, &Request) -> bool) -> Watchdog {
    let lib = lib.map(Path::to_path_buf);
    Watchdog::start(
        move || NvmlSource::open(lib.as_deref()),
        move |source: &mut NvmlSource, r: Request| source.sample(r.only, &|pid| visible(pid, &r)),
    )
}

impl Source for WatchedNvml {
    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        let (status, detail, sample) = match self.watchdog.sample(round.only, round.visible.clone(), DEADLINE) {
            Watched::Fresh(sample) => {
                let mut detail = summary(&sample.devices);
                if self.in_child_namespace {
                    detail.push_str("; in a container's PID namespace: NVML's host PIDs are paired with this container's CUDA processes by creation order");
                }
                (BackendStatus::Ok, detail, Some(sample))
            }
            Watched::Stale(waited, last) => (
                BackendStatus::Error,
                format!(
                    "NVML has not answered for {:.1} s (a driver call hangs); {}",
                    waited.as_secs_f64(),
                    if last.is_some() {
                        "showing its last values, marked stale"
                    } else {
                        "no values yet"
                    }
                ),
                last,
            ),
            Watched::Starting(waited) => (
                BackendStatus::Error,
                format!(
                    "starting: NVML's initialisation (nvmlInit_v2) has not returned for {:.1} s (the driver may hang); no values yet",
                    waited.as_secs_f64()
                ),
                None,
            ),
            Watched::Unavailable(why) => return (why, Report::default()),
            Watched::Failed(e) => (BackendStatus::Error, e, None),
        };
        let backend = Backend {
            name: "nvml".into(),
            status,
            detail,
        };
        (backend, sample.map(Sample::into_reading).unwrap_or_default())
    }
}

/// The status line of a fresh sample.
fn summary(devices: &[Device]) -> String {
    let first = devices.first();
    let version = |v: Option<&String>| v.cloned().unwrap_or_else(|| "n/a".into());
    let instances = devices.iter().filter(|d| d.parent.is_some()).count();
    let gpus = devices.len() - instances;
    format!(
        "{gpus} device{}{}, driver {}, CUDA {}",
        if gpus == 1 { "" } else { "s" },
        match instances {
            0 => String::new(),
            1 => " (1 MIG instance)".into(),
            n => format!(" ({n} MIG instances)"),
        },
        version(first.and_then(|d| d.driver_version.as_ref())),
        version(first.and_then(|d| d.cuda_version.as_ref())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(stride: usize, entries: &[(u32, u64)]) -> Vec<u8> {
        let mut bytes = vec![0u8; stride * (entries.len() + 8)];
        for (i, (pid, used)) in entries.iter().enumerate() {
            bytes[i * stride..i * stride + 4].copy_from_slice(&pid.to_ne_bytes());
            bytes[i * stride + 8..i * stride + 16].copy_from_slice(&used.to_ne_bytes());
            // gpuInstanceId / computeInstanceId: "not MIG".
            bytes[i * stride + 16..i * stride + 24].copy_from_slice(&[0xff; 8]);
        }
        bytes
    }

    #[test]
    fn mig_profiles_come_from_the_word_after_mig() {
        assert_eq!(
            mig_profile("NVIDIA A100-SXM4-80GB MIG 3g.40gb").as_deref(),
            Some("3g.40gb")
        );
        assert_eq!(mig_profile("MIG 1c.2g.20gb Device 0").as_deref(), Some("1c.2g.20gb"));
        assert_eq!(mig_profile("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(mig_profile("NVIDIA A100 MIG"), None);
    }

    #[test]
    fn the_expected_stride_is_kept_when_pids_exist() {
        let bytes = records(24, &[(100, 1 << 30), (200, VALUE_NOT_AVAILABLE), (300, 5)]);
        let listed = decode_records(&bytes, 3, &|pid| [100, 200, 300].contains(&pid));
        assert!(!listed.quirk_stride);
        assert_eq!(listed.records, vec![(100, Some(1 << 30)), (200, None), (300, Some(5))]);
    }

    #[test]
    fn thirty_two_byte_records_are_detected_and_read_right() {
        let bytes = records(32, &[(100, 1 << 30), (200, 2 << 30), (300, 3 << 30)]);
        let listed = decode_records(&bytes, 3, &|pid| [100, 200, 300].contains(&pid));
        assert!(listed.quirk_stride);
        assert_eq!(
            listed.records,
            vec![(100, Some(1 << 30)), (200, Some(2 << 30)), (300, Some(3 << 30))]
        );
        // Even when no PID is visible (another namespace), the zero PIDs of
        // the wrong stride give the quirk away.
        let listed = decode_records(&bytes, 3, &|_| false);
        assert!(listed.quirk_stride);
    }
}
