//! The running-process lists (compute, graphics, MPS; struct versions v1, v2,
//! v3 and the detail list) and per-process utilization samples, all through
//! NVML's two-call list protocol in [`hand_out`].
//!
//! Records are built as bytes because their layout is the point: every
//! version shares the prefix `{u32 pid; u32 pad; u64 usedGpuMemory; u32
//! gpuInstanceId; u32 computeInstanceId; u64 usedGpuCcProtectedMemory}` and
//! differs only in how much of it one record holds (16, 24 or 32 bytes).
//!
//! The R530/535 bug (`process_struct_bytes: 32`): `_v3` writes 32-byte
//! records where the caller expects 24-byte ones. The real driver writes
//! `count * 32` bytes and runs past the caller's buffer; the fake writes the
//! same byte stream but stops at the end of the caller's buffer
//! (`*infoCount * 24` bytes as passed in), so the caller sees exactly what the
//! driver would have left inside its buffer (scrambled PIDs after the first
//! record) and nothing past it is touched.

use std::mem::{offset_of, size_of};
use std::os::raw::c_uint;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::abi::{self, ProcessDetailV1, ProcessInfoV1, ProcessInfoV2, Ret};
use crate::scenario::{Device, Process, ProcessKind, ProcessUtilization};
use crate::state::CallResult;

/// First PID of the processes that `process_list_grows_by` adds.
pub const GROWTH_PID_BASE: u32 = 1_000_000;
/// Memory of each process that `process_list_grows_by` adds (a CUDA context).
pub const GROWTH_USED_MEMORY: u64 = 64 << 20;

/// Bytes of the full record, `nvmlProcessDetail_v1_t`.
const RECORD_BYTES: usize = size_of::<ProcessDetailV1>();

/// The struct a process-list export takes.
#[derive(Clone, Copy)]
pub enum Version {
    /// `nvmlProcessInfo_v1_t`: 16 bytes.
    V1,
    /// `nvmlProcessInfo_v2_t`: 24 bytes.
    V2,
    /// `nvmlProcessInfo_t` (= v2 layout), written with the device's `process_struct_bytes`.
    V3,
    /// `nvmlProcessDetail_v1_t`: 32 bytes.
    Detail,
}

impl Version {
    /// Bytes per record in the caller's buffer, and bytes per record written.
    fn strides(self, device: &Device) -> (usize, usize) {
        match self {
            Version::V1 => (size_of::<ProcessInfoV1>(), size_of::<ProcessInfoV1>()),
            Version::V2 => (size_of::<ProcessInfoV2>(), size_of::<ProcessInfoV2>()),
            Version::V3 => (
                size_of::<ProcessInfoV2>(),
                device.process_struct_bytes.unwrap_or(size_of::<ProcessInfoV2>()),
            ),
            Version::Detail => (RECORD_BYTES, RECORD_BYTES),
        }
    }
}

fn record(process: &Process) -> [u8; RECORD_BYTES] {
    let mut bytes = [0u8; RECORD_BYTES];
    let used = process.used_memory.unwrap_or(abi::VALUE_NOT_AVAILABLE_U64);
    let gpu_instance = process.gpu_instance_id.unwrap_or(abi::NO_INSTANCE_ID);
    let compute_instance = process.compute_instance_id.unwrap_or(abi::NO_INSTANCE_ID);
    let mut set = |offset: usize, value: &[u8]| {
        bytes[offset..offset + value.len()].copy_from_slice(value);
    };
    set(offset_of!(ProcessDetailV1, pid), &process.pid.to_ne_bytes());
    set(offset_of!(ProcessDetailV1, used_gpu_memory), &used.to_ne_bytes());
    set(
        offset_of!(ProcessDetailV1, gpu_instance_id),
        &gpu_instance.to_ne_bytes(),
    );
    set(
        offset_of!(ProcessDetailV1, compute_instance_id),
        &compute_instance.to_ne_bytes(),
    );
    set(
        offset_of!(ProcessDetailV1, used_gpu_cc_protected_memory),
        &process.cc_protected_memory.to_ne_bytes(),
    );
    bytes
}

/// The processes `process_list_grows_by` adds: deterministic PIDs from
/// [`GROWTH_PID_BASE`], each holding [`GROWTH_USED_MEMORY`].
fn grown(count: u32) -> impl Iterator<Item = Process> {
    (0..count).map(|i| Process {
        pid: GROWTH_PID_BASE + i,
        used_memory: Some(GROWTH_USED_MEMORY),
        gpu_instance_id: None,
        compute_instance_id: None,
        cc_protected_memory: 0,
        name: None,
    })
}

/// NVML's list protocol. `*count` holds the caller's capacity in records.
/// When the caller gives no buffer, or one too small for `needed` records,
/// `*count` becomes `needed` and the answer is NVML_ERROR_INSUFFICIENT_SIZE
/// (or success for an empty list); otherwise `fill(capacity)` writes the
/// records and `*count` becomes `needed`.
///
/// # Safety
/// `count` is NULL or valid for reading and writing a `c_uint`.
unsafe fn hand_out(count: *mut c_uint, has_buffer: bool, needed: usize, fill: impl FnOnce(usize)) -> CallResult {
    if count.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let capacity = count.read() as usize;
    let needed_count = c_uint::try_from(needed).map_err(|_| abi::ERROR_UNKNOWN)?;
    count.write(needed_count);
    if needed == 0 {
        return Ok(());
    }
    if !has_buffer || capacity < needed {
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    fill(capacity);
    Ok(())
}

/// One process list of one device into a caller's buffer of `version` records.
/// A call with a buffer and a nonzero capacity is a fill call: it also sees
/// the `process_list_grows_by` newcomers.
///
/// # Safety
/// `count` is NULL or valid for a `c_uint`; `buffer` is NULL or valid for
/// writing `*count` records of `version`.
pub unsafe fn running_processes(
    device: &Device,
    kind: ProcessKind,
    version: Version,
    count: *mut c_uint,
    buffer: *mut u8,
) -> CallResult {
    let listed = device.processes(kind).ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let is_fill = !buffer.is_null() && !count.is_null() && count.read() > 0;
    let extra = if is_fill { device.process_list_grows_by } else { 0 };
    let processes: Vec<Process> = listed.iter().cloned().chain(grown(extra)).collect();
    let (caller_stride, written_stride) = version.strides(device);
    hand_out(count, !buffer.is_null(), processes.len(), |capacity| {
        let bytes: Vec<u8> = processes
            .iter()
            .flat_map(|process| record(process).into_iter().take(written_stride))
            .collect();
        let room = capacity * caller_stride;
        // SAFETY: the caller's buffer holds `capacity` records of `caller_stride` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer, bytes.len().min(room)) };
    })
}

/// nvmlDeviceGetRunningProcessDetailList.
///
/// # Safety
/// `list` is NULL or points at an `nvmlProcessDetailList_t` whose `procArray`
/// is NULL or holds `numProcArrayEntries` records.
pub unsafe fn detail_list(device: &Device, list: *mut abi::ProcessDetailListV1) -> CallResult {
    if list.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let list = &mut *list;
    if list.version != abi::struct_version::<abi::ProcessDetailListV1>(1) {
        return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    let kind = match list.mode {
        abi::PROCESS_MODE_COMPUTE => ProcessKind::Compute,
        abi::PROCESS_MODE_GRAPHICS => ProcessKind::Graphics,
        abi::PROCESS_MODE_MPS => ProcessKind::Mps,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    running_processes(
        device,
        kind,
        Version::Detail,
        &mut list.num_proc_array_entries,
        list.proc_array.cast(),
    )
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as u64)
}

/// The samples newer than `last_seen` (µs), each with its timestamp;
/// NVML_ERROR_NOT_FOUND when there are none.
fn fresh_samples(device: &Device, last_seen: u64) -> Result<Vec<(&ProcessUtilization, u64)>, Ret> {
    let samples = device.process_utilization.as_ref().ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let now = now_us();
    let fresh: Vec<_> = samples
        .iter()
        .map(|sample| (sample, sample.timestamp.unwrap_or(now)))
        .filter(|(_, timestamp)| *timestamp > last_seen)
        .collect();
    if fresh.is_empty() {
        return Err(abi::ERROR_NOT_FOUND);
    }
    Ok(fresh)
}

/// Writes `items` into a caller's array of `T` through [`hand_out`].
///
/// # Safety
/// As [`hand_out`]; `buffer` is NULL or valid for `*count` values of `T`.
unsafe fn hand_out_array<T>(count: *mut c_uint, buffer: *mut T, items: Vec<T>) -> CallResult {
    let needed = items.len();
    hand_out(count, !buffer.is_null(), needed, |_| {
        for (i, item) in items.into_iter().enumerate() {
            // SAFETY: `hand_out` checked that the buffer has room for `needed` items.
            unsafe { buffer.add(i).write_unaligned(item) };
        }
    })
}

/// nvmlDeviceGetProcessUtilization.
///
/// # Safety
/// `count` is NULL or valid for a `c_uint`; `buffer` is NULL or holds `*count` samples.
pub unsafe fn utilization_samples(
    device: &Device,
    buffer: *mut abi::ProcessUtilizationSample,
    count: *mut c_uint,
    last_seen: u64,
) -> CallResult {
    if count.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let samples = fresh_samples(device, last_seen).inspect_err(|_| count.write(0))?;
    let samples = samples
        .into_iter()
        .map(|(s, time_stamp)| abi::ProcessUtilizationSample {
            pid: s.pid,
            time_stamp,
            sm_util: s.sm,
            mem_util: s.mem,
            enc_util: s.enc,
            dec_util: s.dec,
        })
        .collect();
    hand_out_array(count, buffer, samples)
}

/// nvmlDeviceGetProcessesUtilizationInfo.
///
/// # Safety
/// `info` is NULL or points at an `nvmlProcessesUtilizationInfo_t` whose
/// `procUtilArray` is NULL or holds `processSamplesCount` entries.
pub unsafe fn utilization_info(device: &Device, info: *mut abi::ProcessesUtilizationInfoV1) -> CallResult {
    if info.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let info = &mut *info;
    if info.version != abi::struct_version::<abi::ProcessesUtilizationInfoV1>(1) {
        return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    let samples = fresh_samples(device, info.last_seen_time_stamp).inspect_err(|_| info.process_samples_count = 0)?;
    let samples = samples
        .into_iter()
        .map(|(s, time_stamp)| abi::ProcessUtilizationInfoV1 {
            time_stamp,
            pid: s.pid,
            sm_util: s.sm,
            mem_util: s.mem,
            enc_util: s.enc,
            dec_util: s.dec,
            jpg_util: s.jpg,
            ofa_util: s.ofa,
        })
        .collect();
    hand_out_array(&mut info.process_samples_count, info.proc_util_array, samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, used: Option<u64>) -> Process {
        Process {
            pid,
            used_memory: used,
            gpu_instance_id: None,
            compute_instance_id: None,
            cc_protected_memory: 0,
            name: None,
        }
    }

    fn device(stride: usize, grows_by: u32) -> Device {
        Device {
            compute_processes: Some(vec![process(10, Some(100)), process(11, None)]),
            process_struct_bytes: Some(stride),
            process_list_grows_by: grows_by,
            ..Device::default()
        }
    }

    /// Reads back 24-byte records the way a caller of `_v2`/`_v3` does.
    fn read_v2(bytes: &[u8]) -> Vec<(u32, u64, u32)> {
        bytes
            .chunks(24)
            .map(|r| {
                (
                    u32::from_ne_bytes(r[0..4].try_into().unwrap()),
                    u64::from_ne_bytes(r[8..16].try_into().unwrap()),
                    u32::from_ne_bytes(r[16..20].try_into().unwrap()),
                )
            })
            .collect()
    }

    #[test]
    fn count_then_fill() {
        let d = device(24, 0);
        let mut count = 0;
        let r = unsafe { running_processes(&d, ProcessKind::Compute, Version::V3, &mut count, std::ptr::null_mut()) };
        assert_eq!((r, count), (Err(abi::ERROR_INSUFFICIENT_SIZE), 2));
        let mut buf = vec![0u8; 3 * 24];
        count = 3;
        let r = unsafe { running_processes(&d, ProcessKind::Compute, Version::V3, &mut count, buf.as_mut_ptr()) };
        assert_eq!((r, count), (Ok(()), 2));
        assert_eq!(
            read_v2(&buf),
            vec![(10, 100, u32::MAX), (11, u64::MAX, u32::MAX), (0, 0, 0)]
        );
    }

    #[test]
    fn scrambled_records_stop_at_the_buffer_end() {
        let d = device(32, 0);
        // Exactly two 24-byte records of room: 48 bytes of the 64-byte stream.
        let mut buf = vec![0xAAu8; 2 * 24 + 8];
        let mut count = 2;
        let r = unsafe { running_processes(&d, ProcessKind::Compute, Version::V3, &mut count, buf.as_mut_ptr()) };
        assert_eq!((r, count), (Ok(()), 2));
        assert_eq!(&buf[48..], &[0xAA; 8], "nothing past the caller's buffer");
        // Record 1 starts at byte 24: the cc-protected memory of process 10,
        // then process 11's pid where usedGpuMemory belongs.
        assert_eq!(read_v2(&buf[..48]), vec![(10, 100, u32::MAX), (0, 11, u32::MAX)]);
    }

    #[test]
    fn growth_shows_in_fill_calls_only() {
        let d = device(24, 3);
        let mut count = 0;
        let r = unsafe { running_processes(&d, ProcessKind::Compute, Version::V1, &mut count, std::ptr::null_mut()) };
        assert_eq!((r, count), (Err(abi::ERROR_INSUFFICIENT_SIZE), 2));
        let mut buf = vec![0u8; 16 * 4];
        count = 4;
        let r = unsafe { running_processes(&d, ProcessKind::Compute, Version::V1, &mut count, buf.as_mut_ptr()) };
        assert_eq!((r, count), (Err(abi::ERROR_INSUFFICIENT_SIZE), 5));
        assert_eq!(buf, vec![0u8; 16 * 4], "nothing written on INSUFFICIENT_SIZE");
        let mut buf = vec![0u8; 16 * 5];
        count = 5;
        let r = unsafe { running_processes(&d, ProcessKind::Compute, Version::V1, &mut count, buf.as_mut_ptr()) };
        assert_eq!((r, count), (Ok(()), 5));
        let pids: Vec<u32> = buf
            .chunks(16)
            .map(|r| u32::from_ne_bytes(r[0..4].try_into().unwrap()))
            .collect();
        assert_eq!(
            pids,
            vec![10, 11, GROWTH_PID_BASE, GROWTH_PID_BASE + 1, GROWTH_PID_BASE + 2]
        );
    }

    #[test]
    fn missing_list_is_not_supported_and_empty_list_succeeds() {
        let mut d = Device::default();
        let mut count = 0;
        let r = unsafe { running_processes(&d, ProcessKind::Graphics, Version::V2, &mut count, std::ptr::null_mut()) };
        assert_eq!(r, Err(abi::ERROR_NOT_SUPPORTED));
        d.graphics_processes = Some(vec![]);
        count = 7;
        let r = unsafe { running_processes(&d, ProcessKind::Graphics, Version::V2, &mut count, std::ptr::null_mut()) };
        assert_eq!((r, count), (Ok(()), 0));
    }
}
