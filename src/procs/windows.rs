//! The process scan on Windows, kept thin: Toolhelp for the process list and
//! each process's loaded modules (its runtimes, from the one classification
//! table), the process's own handle for times, memory, image path and
//! command line. A process we may not open (another user's, protected) is
//! listed by name with a note.
//!
//! Microsoft Learn: CreateToolhelp32Snapshot (TH32CS_SNAPPROCESS,
//! TH32CS_SNAPMODULE), GetProcessTimes, GetProcessMemoryInfo,
//! QueryFullProcessImageNameW, NtQueryInformationProcess with
//! ProcessCommandLineInformation (Windows 8.1+; where it is unknown, the
//! PEB's command line through ReadProcessMemory), and the token's user
//! (OpenProcessToken, GetTokenInformation TokenUser, LookupAccountSidW).

use super::process::{ProcInfo, MAPS_REFRESH};
use super::wincmd::split_command_line;
use super::{classify, redact};
use crate::units::format_unix_nanos;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use windows::core::{PCWSTR, PWSTR};
use windows::Wdk::System::Threading::{
    NtQueryInformationProcess, ProcessBasicInformation, ProcessCommandLineInformation,
};
use windows::Win32::Foundation::{
    CloseHandle, ERROR_BAD_LENGTH, FILETIME, HANDLE, STATUS_INVALID_INFO_CLASS, UNICODE_STRING,
};
use windows::Win32::Security::{
    GetTokenInformation, LookupAccountSidW, TokenUser, SID_NAME_USE, TOKEN_QUERY, TOKEN_USER,
};
use windows::Win32::System::Diagnostics::Debug::ReadProcessMemory;
use windows::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Module32FirstW, Module32NextW, Process32FirstW, Process32NextW, MODULEENTRY32W,
    PROCESSENTRY32W, TH32CS_SNAPMODULE, TH32CS_SNAPMODULE32, TH32CS_SNAPPROCESS,
};
use windows::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows::Win32::System::Threading::{
    GetProcessTimes, OpenProcess, OpenProcessToken, QueryFullProcessImageNameW, PEB, PROCESS_BASIC_INFORMATION,
    PROCESS_NAME_WIN32, PROCESS_QUERY_INFORMATION, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_VM_READ,
    RTL_USER_PROCESS_PARAMETERS,
};

/// Longest command line read (the documented limit is 32767 characters).
const MAX_CMDLINE_BYTES: u32 = 64 * 1024;
/// 100 ns FILETIME ticks between 1601-01-01 and 1970-01-01.
const EPOCH_DIFFERENCE_100NS: i128 = 116_444_736_000_000_000;
/// Tries of a module snapshot that fails with ERROR_BAD_LENGTH (the
/// process was loading or unloading a module meanwhile).
const MODULE_SNAPSHOT_TRIES: usize = 3;
/// The note on a process whose module list could not be read.
const MODULES_UNREADABLE: &str = "loaded modules unreadable (the Toolhelp module snapshot failed)";

struct Static {
    user: Option<String>,
    argv: Vec<String>,
    cmdline: Option<String>,
    exe: Option<String>,
    start_time: Option<String>,
    modules: Vec<String>,
    /// The last module snapshot succeeded.
    modules_ok: bool,
    modules_read_at: Instant,
    runtimes: Vec<String>,
    kind: crate::snapshot::ProcessKind,
    notes: Vec<String>,
}

pub struct ProcScanner {
    /// CPU time (100 ns) at the previous sample, per (pid, creation time).
    cpu: HashMap<(u32, u64), (u64, Instant)>,
    /// Per (pid, creation time, name): the creation time is 0 for a
    /// process we may not open, so the name tells a reused PID apart.
    statics: HashMap<(u32, u64, String), Static>,
    /// The shortest CPU% window of the last scan.
    window: Option<Duration>,
}

/// A process handle closed on drop.
struct Process(HANDLE);

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: the handle came from OpenProcess and is closed once.
        unsafe {
            let _ = CloseHandle(self.0);
        }
    }
}

fn ticks(t: FILETIME) -> u64 {
    (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)
}

fn wide(buf: &[u16]) -> String {
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    String::from_utf16_lossy(&buf[..end])
}

impl ProcScanner {
    pub fn new(_root: PathBuf) -> Self {
        ProcScanner {
            cpu: HashMap::new(),
            statics: HashMap::new(),
            window: None,
        }
    }

    /// Opens a one-shot's CPU window: the next scan is the first reading.
    pub fn open_cpu_window(&mut self) {
        self.cpu.clear();
    }

    /// The second reading of the window: a rescan (one call a process
    /// here), CPU% for the listed processes.
    pub fn close_cpu_window(&mut self, min: Duration, processes: &mut [crate::snapshot::Process]) {
        let latest = self.cpu.values().map(|&(_, at)| at).max();
        super::process::close_by_rescan(latest, min, processes, || self.scan());
    }

    /// The shortest window a CPU% of the last scan was measured over.
    pub fn cpu_window(&self) -> Option<Duration> {
        self.window
    }

    /// Every process's libraries are read as it is first seen here.
    pub fn read_deferred_maps(&mut self, _wanted: impl Fn(u32) -> bool, _scanned: &mut [ProcInfo]) {}

    /// Records CPU times, so the next scan has CPU%.
    pub fn prime(&mut self) {
        let _ = self.scan();
    }

    pub fn rss_anon(&self, _pid: u32) -> Option<u64> {
        None
    }

    pub fn scan(&mut self) -> anyhow::Result<Vec<ProcInfo>> {
        let now = Instant::now();
        let mut out = Vec::new();
        let mut seen_cpu = HashMap::new();
        let mut seen_static = HashMap::new();
        let mut shortest: Option<Duration> = None;
        for (pid, ppid, name) in list_processes()? {
            let handle = open(pid);
            let times = handle.as_ref().and_then(process_times);
            let created = times.map(|t| t.0).unwrap_or(0);
            let key = (pid, created);
            let cpu_percent = match (times, self.cpu.get(&key)) {
                (Some((_, cpu)), Some(&(before, at))) => {
                    let window = now.duration_since(at);
                    shortest = Some(shortest.map_or(window, |s| s.min(window)));
                    let secs = window.as_secs_f64();
                    (secs > 0.0).then(|| cpu.saturating_sub(before) as f64 / 1e7 / secs * 100.0)
                }
                _ => None,
            };
            if let Some((_, cpu)) = times {
                seen_cpu.insert(key, (cpu, now));
            }
            let static_key = (pid, created, name.clone());
            let mut fixed = match self.statics.remove(&static_key) {
                Some(s) => s,
                None => read_static(pid, &name, handle.as_ref(), created),
            };
            if now.duration_since(fixed.modules_read_at) >= MAPS_REFRESH && handle.is_some() {
                set_modules(&mut fixed, modules(pid));
                fixed.modules_read_at = now;
                classify_into(&mut fixed, &name);
            }
            let rss_bytes = handle.as_ref().and_then(working_set);
            let ai = fixed.kind == crate::snapshot::ProcessKind::Ai;
            out.push(ProcInfo {
                pid,
                ppid,
                start_ticks: created,
                name: name.clone(),
                start_time: fixed.start_time.clone(),
                user: fixed.user.clone(),
                argv: if ai { fixed.argv.clone() } else { Vec::new() },
                cmdline: fixed.cmdline.clone(),
                exe: fixed.exe.clone(),
                runtimes: fixed.runtimes.clone(),
                mapped_files: if ai { fixed.modules.clone() } else { Vec::new() },
                maps_readable: handle.is_some() && fixed.modules_ok,
                kind: fixed.kind,
                cpu_percent,
                rss_bytes,
                notes: fixed.notes.clone(),
            });
            seen_static.insert(static_key, fixed);
        }
        self.cpu = seen_cpu;
        self.statics = seen_static;
        self.window = shortest;
        Ok(out)
    }
}

/// (PID, parent PID, exe name) of every process. Windows keeps the
/// parent's PID after the parent exits, and may give it to a new process:
/// a parent is one only while it started before its child.
fn list_processes() -> anyhow::Result<Vec<(u32, Option<u32>, String)>> {
    // SAFETY: a process snapshot; the handle is closed below.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) }?;
    let snap = Process(snap);
    let mut entry = PROCESSENTRY32W {
        dwSize: std::mem::size_of::<PROCESSENTRY32W>() as u32,
        ..Default::default()
    };
    let mut out = Vec::new();
    // SAFETY: entry.dwSize is set as the API requires.
    let mut more = unsafe { Process32FirstW(snap.0, &mut entry) }.is_ok();
    while more {
        if entry.th32ProcessID != 0 {
            let ppid = (entry.th32ParentProcessID != 0).then_some(entry.th32ParentProcessID);
            out.push((entry.th32ProcessID, ppid, wide(&entry.szExeFile)));
        }
        // SAFETY: as above.
        more = unsafe { Process32NextW(snap.0, &mut entry) }.is_ok();
    }
    Ok(out)
}

fn open(pid: u32) -> Option<Process> {
    // SAFETY: a query-only handle, closed on drop.
    unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, false, pid) }
        .ok()
        .map(Process)
}

/// (creation time, user + kernel time), both in 100 ns units.
fn process_times(p: &Process) -> Option<(u64, u64)> {
    let (mut created, mut exited, mut kernel, mut user) = Default::default();
    // SAFETY: four FILETIMEs to write into.
    unsafe { GetProcessTimes(p.0, &mut created, &mut exited, &mut kernel, &mut user) }.ok()?;
    Some((ticks(created), ticks(kernel) + ticks(user)))
}

fn working_set(p: &Process) -> Option<u64> {
    let mut counters = PROCESS_MEMORY_COUNTERS::default();
    let size = std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
    // SAFETY: counters has `size` bytes.
    unsafe { GetProcessMemoryInfo(p.0, &mut counters, size) }.ok()?;
    Some(counters.WorkingSetSize as u64)
}

fn image_path(p: &Process) -> Option<String> {
    let mut buf = vec![0u16; 1024];
    let mut len = buf.len() as u32;
    // SAFETY: buf holds len characters.
    unsafe { QueryFullProcessImageNameW(p.0, PROCESS_NAME_WIN32, PWSTR(buf.as_mut_ptr()), &mut len) }.ok()?;
    Some(String::from_utf16_lossy(&buf[..(len as usize).min(buf.len())]))
}

/// The command line: NtQueryInformationProcess's
/// ProcessCommandLineInformation (Windows 8.1+), else, where the class is
/// unknown (Wine 8.0 answers STATUS_INVALID_INFO_CLASS), read from the
/// process's PEB.
fn command_line(p: &Process, pid: u32) -> Option<String> {
    let mut needed = 0u32;
    // SAFETY: a zero-length query returns the size needed.
    let status =
        unsafe { NtQueryInformationProcess(p.0, ProcessCommandLineInformation, std::ptr::null_mut(), 0, &mut needed) };
    if status == STATUS_INVALID_INFO_CLASS {
        return command_line_from_peb(pid);
    }
    if needed == 0 || needed > MAX_CMDLINE_BYTES {
        return None;
    }
    // u64 elements keep the UNICODE_STRING header aligned.
    let mut buf = vec![0u64; (needed as usize).div_ceil(8)];
    // SAFETY: buf has `needed` bytes.
    let status = unsafe {
        NtQueryInformationProcess(
            p.0,
            ProcessCommandLineInformation,
            buf.as_mut_ptr().cast(),
            needed,
            &mut needed,
        )
    };
    if status.is_err() {
        return None;
    }
    // SAFETY: the buffer starts with a UNICODE_STRING whose Buffer points into it.
    let s = unsafe { &*buf.as_ptr().cast::<UNICODE_STRING>() };
    if s.Buffer.is_null() {
        return None;
    }
    // SAFETY: Length bytes of UTF-16 at Buffer, inside buf.
    let text = unsafe { std::slice::from_raw_parts(s.Buffer.0, usize::from(s.Length) / 2) };
    Some(String::from_utf16_lossy(text))
}

/// One value of type T read from another process's memory.
fn read_remote<T: Default>(p: &Process, at: usize) -> Option<T> {
    let mut value = T::default();
    // SAFETY: writes at most size_of::<T>() bytes into value.
    unsafe {
        ReadProcessMemory(
            p.0,
            at as *const _,
            (&mut value as *mut T).cast(),
            std::mem::size_of::<T>(),
            None,
        )
    }
    .ok()?;
    Some(value)
}

/// The command line as the process's PEB holds it (winternl.h: PEB's
/// ProcessParameters, RTL_USER_PROCESS_PARAMETERS' CommandLine), which
/// needs PROCESS_VM_READ.
fn command_line_from_peb(pid: u32) -> Option<String> {
    // SAFETY: a query and read handle, closed on drop.
    let p = unsafe { OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, false, pid) }
        .ok()
        .map(Process)?;
    let mut basic = PROCESS_BASIC_INFORMATION::default();
    let size = std::mem::size_of::<PROCESS_BASIC_INFORMATION>() as u32;
    // SAFETY: basic has `size` bytes.
    let status = unsafe {
        NtQueryInformationProcess(
            p.0,
            ProcessBasicInformation,
            (&mut basic as *mut PROCESS_BASIC_INFORMATION).cast(),
            size,
            &mut 0,
        )
    };
    if status.is_err() || basic.PebBaseAddress.is_null() {
        return None;
    }
    let peb = basic.PebBaseAddress as usize;
    let params: usize = read_remote(&p, peb + std::mem::offset_of!(PEB, ProcessParameters))?;
    let line: UNICODE_STRING = read_remote(
        &p,
        params + std::mem::offset_of!(RTL_USER_PROCESS_PARAMETERS, CommandLine),
    )?;
    let bytes = u32::from(line.Length);
    if line.Buffer.is_null() || bytes == 0 || bytes > MAX_CMDLINE_BYTES {
        return None;
    }
    let mut text = vec![0u16; bytes as usize / 2];
    // SAFETY: text holds `bytes` bytes.
    unsafe {
        ReadProcessMemory(
            p.0,
            line.Buffer.0 as *const _,
            text.as_mut_ptr().cast(),
            bytes as usize,
            None,
        )
    }
    .ok()?;
    Some(String::from_utf16_lossy(&text))
}

/// The account the process runs as (its token's user), without the domain.
fn user(p: &Process) -> Option<String> {
    let mut token = HANDLE::default();
    // SAFETY: a query-only token handle, closed on drop.
    unsafe { OpenProcessToken(p.0, TOKEN_QUERY, &mut token) }.ok()?;
    let token = Process(token);
    // u64 elements keep TOKEN_USER (a pointer and a u32) aligned.
    let mut buf = [0u64; 64];
    let mut needed = 0u32;
    // SAFETY: buf has size_of_val(&buf) bytes.
    unsafe {
        GetTokenInformation(
            token.0,
            TokenUser,
            Some(buf.as_mut_ptr().cast()),
            std::mem::size_of_val(&buf) as u32,
            &mut needed,
        )
    }
    .ok()?;
    // SAFETY: GetTokenInformation wrote a TOKEN_USER whose SID lies in buf.
    let sid = unsafe { &*buf.as_ptr().cast::<TOKEN_USER>() }.User.Sid;
    let (mut name, mut domain) = ([0u16; 256], [0u16; 256]);
    let (mut name_len, mut domain_len) = (name.len() as u32, domain.len() as u32);
    let mut kind = SID_NAME_USE::default();
    // SAFETY: both buffers hold the lengths given.
    unsafe {
        LookupAccountSidW(
            PCWSTR::null(),
            sid,
            Some(PWSTR(name.as_mut_ptr())),
            &mut name_len,
            Some(PWSTR(domain.as_mut_ptr())),
            &mut domain_len,
            &mut kind,
        )
    }
    .ok()?;
    Some(wide(&name))
}

/// The loaded modules' paths (Toolhelp's module snapshot); None when the
/// snapshot failed (ERROR_BAD_LENGTH, a module list changing meanwhile, is
/// tried again a few times), which is not an empty list.
fn modules(pid: u32) -> Option<Vec<String>> {
    let mut tries = 0;
    let snap = loop {
        tries += 1;
        // SAFETY: a module snapshot of one process; closed below.
        match unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPMODULE | TH32CS_SNAPMODULE32, pid) } {
            Ok(snap) => break snap,
            Err(e) if e.code() == ERROR_BAD_LENGTH.to_hresult() && tries < MODULE_SNAPSHOT_TRIES => continue,
            Err(_) => return None,
        }
    };
    let snap = Process(snap);
    let mut entry = MODULEENTRY32W {
        dwSize: std::mem::size_of::<MODULEENTRY32W>() as u32,
        ..Default::default()
    };
    let mut out = Vec::new();
    // SAFETY: entry.dwSize is set.
    let mut more = unsafe { Module32FirstW(snap.0, &mut entry) }.is_ok();
    while more && out.len() < 4096 {
        out.push(wide(&entry.szExePath));
        // SAFETY: as above.
        more = unsafe { Module32NextW(snap.0, &mut entry) }.is_ok();
    }
    Some(out)
}

/// Takes a module snapshot's result: a failed one keeps the modules read
/// before (for classification) but marks them unreadable, with a note.
fn set_modules(s: &mut Static, modules: Option<Vec<String>>) {
    s.notes.retain(|n| n != MODULES_UNREADABLE);
    match modules {
        Some(m) => {
            s.modules = m;
            s.modules_ok = true;
        }
        None => {
            s.modules_ok = false;
            s.notes.push(MODULES_UNREADABLE.into());
        }
    }
}

fn read_static(pid: u32, name: &str, handle: Option<&Process>, created: u64) -> Static {
    let argv = handle
        .and_then(|p| command_line(p, pid))
        .map(|l| split_command_line(&l))
        .unwrap_or_default();
    let cmdline = (!argv.is_empty()).then(|| redact::join_args(&redact::redact_args(&argv)));
    let start_time = (created > 0)
        .then(|| format_unix_nanos((i128::from(created) - EPOCH_DIFFERENCE_100NS) * 100))
        .flatten();
    let mut notes = Vec::new();
    if handle.is_none() {
        notes.push("not readable without more privileges: command line, modules and memory unknown".into());
    }
    let mut s = Static {
        user: handle.and_then(user),
        argv,
        cmdline,
        exe: handle.and_then(image_path),
        start_time,
        modules: Vec::new(),
        modules_ok: false,
        modules_read_at: Instant::now(),
        runtimes: Vec::new(),
        kind: crate::snapshot::ProcessKind::Other,
        notes,
    };
    if handle.is_some() {
        set_modules(&mut s, modules(pid));
    }
    classify_into(&mut s, name);
    s
}

fn classify_into(s: &mut Static, name: &str) {
    let mut runtimes = Vec::new();
    classify::runtimes_from_libraries(s.modules.iter().map(String::as_str), &mut runtimes);
    classify::runtimes_from_names(name, s.exe.as_deref(), &s.argv, &mut runtimes);
    s.kind = classify::kind(name, s.exe.as_deref(), &s.argv, &runtimes);
    s.runtimes = runtimes;
}
