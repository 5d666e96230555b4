//! Init, error strings, system queries and handle lookups.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint};

use crate::abi::{self, Ret};
use crate::scenario::{PciAddress, Scenario};
use crate::state::{self, put, put_str, supported};

#[no_mangle]
pub extern "C" fn nvmlInit() -> Ret {
    state::init("nvmlInit")
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> Ret {
    state::init("nvmlInit_v2")
}

/// The flags (no GPUs, no attach) change nothing in the fake.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> Ret {
    state::init("nvmlInitWithFlags")
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> Ret {
    state::shutdown()
}

/// Works without init, like the real one.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: Ret) -> *const c_char {
    abi::error_string(result).as_ptr().cast()
}

system_fn!(false nvmlSystemGetDriverVersion => (version: *mut c_char, length: c_uint) |s| {
    put_str(version, length, supported(s.driver_version.as_deref())?)
});

system_fn!(false nvmlSystemGetNVMLVersion => (version: *mut c_char, length: c_uint) |s| {
    put_str(version, length, supported(s.nvml_version.as_deref())?)
});

system_fn!(false nvmlSystemGetCudaDriverVersion | nvmlSystemGetCudaDriverVersion_v2 => (cudaDriverVersion: *mut c_int) |s| {
    put(cudaDriverVersion, supported(s.cuda_driver_version)?)
});

system_fn!(false nvmlSystemGetProcessName => (pid: c_uint, name: *mut c_char, length: c_uint) |s| {
    put_str(name, length, &process_name(s, pid)?)
});

/// A process's name: the scenario's `name` for the pid, else the host's
/// `/proc/PID/comm`, else NVML_ERROR_NOT_FOUND.
fn process_name(scenario: &Scenario, pid: u32) -> Result<String, Ret> {
    let named = scenario
        .devices
        .iter()
        .flat_map(|device| device.all_processes())
        .find(|process| process.pid == pid)
        .and_then(|process| process.name.clone());
    named
        .or_else(|| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some(comm.trim_end().to_owned())
        })
        .ok_or(abi::ERROR_NOT_FOUND)
}

system_fn!(true nvmlDeviceGetCount | nvmlDeviceGetCount_v2 => (deviceCount: *mut c_uint) |s| {
    put(deviceCount, c_uint::try_from(s.devices.len()).map_err(|_| abi::ERROR_UNKNOWN)?)
});

lookup_fn!(nvmlDeviceGetHandleByIndex | nvmlDeviceGetHandleByIndex_v2 => (index: c_uint) |s| {
    s.devices
        .iter()
        .position(|d| d.index == Some(index))
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
});

lookup_fn!(nvmlDeviceGetHandleByUUID => (uuid: *const c_char) |s| {
    let uuid = c_string(uuid)?;
    find_by(s, |d| d.uuid.as_deref() == Some(uuid))
});

lookup_fn!(nvmlDeviceGetHandleBySerial => (serial: *const c_char) |s| {
    let serial = c_string(serial)?;
    find_by(s, |d| d.serial.as_deref() == Some(serial))
});

lookup_fn!(nvmlDeviceGetHandleByPciBusId | nvmlDeviceGetHandleByPciBusId_v2 => (pciBusId: *const c_char) |s| {
    let wanted = PciAddress::parse(c_string(pciBusId)?).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    find_by(s, |d| d.pci_address() == Some(wanted))
});

fn find_by(scenario: &Scenario, matches: impl Fn(&crate::scenario::Device) -> bool) -> Result<usize, Ret> {
    scenario.devices.iter().position(matches).ok_or(abi::ERROR_NOT_FOUND)
}

/// A caller's NUL-terminated UTF-8 string; NULL or non-UTF-8 is an invalid argument.
///
/// # Safety
/// `text` is NULL or points at a NUL-terminated string that outlives `'a`.
unsafe fn c_string<'a>(text: *const c_char) -> Result<&'a str, Ret> {
    if text.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    CStr::from_ptr(text).to_str().map_err(|_| abi::ERROR_INVALID_ARGUMENT)
}
