//! What a scan says of one process, and what the platform scanners share
//! (the lifelong part, the user name, the rescan): below `procs`, which
//! re-exports it, and below each scanner, which uses it.

use crate::snapshot::ProcessKind;
use std::time::Duration;

/// What does not change while a process lives, read once per (pid, start
/// time) by the Linux and macOS scanners, and what they last read of its
/// maps. `V` is how they know the address-space size (Linux always reads
/// it; macOS not for every process), `C` what they keep of the
/// classification.
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[derive(Debug, Clone)]
pub(super) struct Lifelong<V, C> {
    pub(super) argv: Vec<String>,
    pub(super) cmdline: Option<String>,
    pub(super) exe: Option<String>,
    pub(super) user: Option<String>,
    pub(super) start_time: Option<String>,
    pub(super) runtimes: Vec<String>,
    pub(super) mapped_files: Vec<String>,
    pub(super) maps_read_at: Option<std::time::Instant>,
    /// The address-space size when the maps were read.
    pub(super) maps_vsize: V,
    pub(super) classified: C,
    pub(super) notes: Vec<String>,
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
/// The user name for a uid through the system's name service (passwd,
/// LDAP, ...). None when the uid has no name.
pub(super) fn lookup_user(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: getpwuid_r writes into `pwd` and `buf`, both owned here and
    // alive for the call; `result` is set to null or to `&pwd`.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut result);
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(pwd.pw_name).to_string_lossy().into_owned())
    }
}

/// Whether the system's name service knows a user by this name (passwd,
/// LDAP, ...); None where this platform is not asked (Windows names carry
/// a domain and are matched as the scan spells them).
pub fn user_exists(name: &str) -> Option<bool> {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        // A name with a NUL byte names no user.
        let Ok(c_name) = std::ffi::CString::new(name) else {
            return Some(false);
        };
        let mut buf = vec![0u8; 4096];
        // SAFETY: getpwnam_r writes into `pwd` and `buf`, both owned here
        // and alive for the call; `result` is set to null or to `&pwd`.
        unsafe {
            let mut pwd: libc::passwd = std::mem::zeroed();
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwnam_r(
                c_name.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            );
            // An error of the name service (not "no entry") is no answer.
            (rc == 0).then_some(!result.is_null())
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = name;
        None
    }
}

/// The second reading of a one-shot's CPU window where it is a whole rescan
/// (macOS, Windows: a process's CPU time is one call there, no file): at
/// least `min` after the first reading (`latest`, the last process's),
/// sleeping only what the work left; the listed processes take the
/// rescan's CPU%, and one gone by then has none.
#[cfg(any(windows, target_os = "macos"))]
pub(super) fn close_by_rescan(
    latest: Option<std::time::Instant>,
    min: Duration,
    processes: &mut [crate::snapshot::Process],
    rescan: impl FnOnce() -> anyhow::Result<Vec<ProcInfo>>,
) {
    if let Some(rest) = latest.and_then(|at| min.checked_sub(at.elapsed())) {
        std::thread::sleep(rest);
    }
    let again: std::collections::HashMap<u32, Option<f64>> = rescan()
        .unwrap_or_default()
        .into_iter()
        .map(|i| (i.pid, i.cpu_percent))
        .collect();
    for p in processes.iter_mut().filter(|p| p.name.is_some()) {
        p.cpu_percent = again.get(&p.pid).copied().flatten();
    }
}

/// How often a process's maps are reread for new runtimes.
pub const MAPS_REFRESH: Duration = Duration::from_secs(10);

/// One process as the scan sees it. `argv` is the raw command line for the
/// code that looks for model paths; only `cmdline` (redacted) ever leaves
/// the process.
#[derive(Debug, Clone)]
pub struct ProcInfo {
    pub pid: u32,
    /// The parent's PID; None where the platform does not say.
    pub ppid: Option<u32>,
    /// Start time in clock ticks after boot: creation order, for pairing
    /// host PIDs inside containers.
    pub start_ticks: u64,
    pub name: String,
    pub start_time: Option<String>,
    pub user: Option<String>,
    pub argv: Vec<String>,
    pub cmdline: Option<String>,
    pub exe: Option<String>,
    pub runtimes: Vec<String>,
    /// File-backed mappings (deduplicated paths), for model discovery.
    pub mapped_files: Vec<String>,
    /// Whether /proc/PID/maps could be read (not another user's process
    /// without privileges): without it, runtimes and mapped files are
    /// unknown, not absent.
    pub maps_readable: bool,
    pub kind: ProcessKind,
    pub cpu_percent: Option<f64>,
    pub rss_bytes: Option<u64>,
    pub notes: Vec<String>,
}

/// Runtimes that mean the process can hold GPU memory, so it is listed even
/// when no GPU backend attributes memory to it.
const GPU_RUNTIMES: &[&str] = &["cuda", "cudart", "hip", "rocm", "level-zero", "opencl", "ascendcl"];

impl ProcInfo {
    /// Whether the process belongs in a snapshot without any GPU backend
    /// listing it: AI work, or a GPU compute runtime loaded.
    pub fn is_interesting(&self) -> bool {
        self.kind == ProcessKind::Ai || self.runtimes.iter().any(|r| GPU_RUNTIMES.contains(&r.as_str()))
    }
}
