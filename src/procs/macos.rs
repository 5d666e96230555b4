//! The process scan on macOS, through libproc and sysctl: `proc_listallpids`
//! for the list, `proc_pidinfo` (`PROC_PIDTBSDINFO`: name, user, start;
//! `PROC_PIDTASKINFO`: CPU time, resident size), `proc_pidpath` for the
//! executable, `sysctl(KERN_PROCARGS2)` for argv, and
//! `PROC_PIDREGIONPATHINFO2` for the file-backed mappings (libraries, a
//! memory-mapped GGUF file) that classification and model discovery read.
//!
//! Without root the kernel answers the task, argv and region calls only for
//! the user's own processes: another user's process keeps its name, user and
//! executable, and its command line, runtimes and mapped files are unknown,
//! with a note (never an empty list posing as "none").
//!
//! The argv parser is plain Rust, tested everywhere; the rest is macOS only.

#[cfg(target_os = "macos")]
pub use sys::{cwd, listening_sockets, ProcScanner};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `struct socket_fdinfo` (xnu bsd/sys/proc_info.h) as `PROC_PIDFDSOCKETINFO`
/// fills it, read by offset: `proc_fileinfo` (24 bytes), then
/// `socket_info`: `vinfo_stat` (136), `soi_so`, `soi_pcb`, three ints, eight
/// shorts, `soi_oobmark`, two 24-byte `sockbuf_info`, `soi_kind` (at 24 +
/// 232), a reserved word, and the protocol union (at 24 + 240). For TCP that
/// is `tcp_sockinfo`: an 80-byte `in_sockinfo` (`insi_lport` at +4, in
/// network order; `insi_vflag` at +24; `insi_laddr` at +48, an IPv4 address
/// in its last four bytes) and then `tcpsi_state`. The same offsets are
/// worked out, and checked against sockets bound on a real Mac, by other
/// monitors that read this struct without the C header.
pub const SOCKET_FDINFO_SIZE: usize = 792;
const SOI_KIND: usize = 24 + 232;
const SOI_PROTO: usize = 24 + 240;
const INSI_LPORT: usize = SOI_PROTO + 4;
const INSI_VFLAG: usize = SOI_PROTO + 24;
const INSI_LADDR: usize = SOI_PROTO + 48;
const TCPSI_STATE: usize = SOI_PROTO + 80;
/// `SOCKINFO_TCP`, `TSI_S_LISTEN`, `INI_IPV4`, `INI_IPV6`.
const SOCKINFO_TCP: i32 = 2;
const TSI_S_LISTEN: i32 = 1;
const INI_IPV4: u8 = 1;
const INI_IPV6: u8 = 2;

/// The local address of a listening TCP socket, from a `socket_fdinfo`
/// buffer; None for any other socket or a buffer of another size.
pub fn listening_addr(buf: &[u8]) -> Option<SocketAddr> {
    if buf.len() != SOCKET_FDINFO_SIZE {
        return None;
    }
    let int = |at: usize| i32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
    if int(SOI_KIND) != SOCKINFO_TCP || int(TCPSI_STATE) != TSI_S_LISTEN {
        return None;
    }
    let port = u16::from_be(int(INSI_LPORT) as u16);
    let laddr: [u8; 16] = buf[INSI_LADDR..INSI_LADDR + 16].try_into().expect("16 bytes");
    let ip = match buf[INSI_VFLAG] {
        v if v & INI_IPV6 != 0 => IpAddr::V6(Ipv6Addr::from(laddr)),
        v if v & INI_IPV4 != 0 => IpAddr::V4(Ipv4Addr::new(laddr[12], laddr[13], laddr[14], laddr[15])),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The argv in a `KERN_PROCARGS2` buffer: `argc` (a native-endian i32), the
/// executable path, NUL padding, then `argc` NUL-terminated arguments (the
/// environment follows and is never read). None for a buffer that does not
/// hold that shape.
pub fn parse_procargs2(buf: &[u8]) -> Option<Vec<String>> {
    let argc = i32::from_ne_bytes(buf.get(..4)?.try_into().ok()?);
    let argc = usize::try_from(argc).ok()?;
    let rest = &buf[4..];
    // Skip the executable path and the NULs after it.
    let path_end = rest.iter().position(|&b| b == 0)?;
    let mut at = path_end;
    while rest.get(at) == Some(&0) {
        at += 1;
    }
    let mut argv = Vec::with_capacity(argc.min(4096));
    for _ in 0..argc {
        // Each argument ends with a NUL; a buffer cut short is not argv.
        let len = rest.get(at..)?.iter().position(|&b| b == 0)?;
        argv.push(String::from_utf8_lossy(&rest[at..at + len]).into_owned());
        at += len + 1;
    }
    Some(argv)
}

/// What a walk of a process's regions found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions {
    /// The distinct files mapped, in address order of first appearance.
    pub files: Vec<String>,
    /// Regions read (0: the first read failed).
    pub read: usize,
    /// The walk stopped at its bound with regions left: files mapped past
    /// it are missing.
    pub truncated: bool,
}

/// Walks a process's regions: `region_at(address)` gives the next region at
/// or after `address` (its file path, empty for none; its start; its size),
/// None at the end. At most `max` regions are read.
pub fn walk_regions(max: usize, mut region_at: impl FnMut(u64) -> Option<(String, u64, u64)>) -> Regions {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut address: u64 = 0;
    let mut read = 0;
    loop {
        if read == max {
            // One more look tells a map of exactly `max` regions from a
            // longer one.
            let truncated = region_at(address).is_some();
            return Regions { files, read, truncated };
        }
        let Some((path, start, size)) = region_at(address) else {
            break;
        };
        read += 1;
        if !path.is_empty() && !seen.contains(&path) {
            seen.insert(path.clone());
            files.push(path);
        }
        let next = start.saturating_add(size);
        if next <= address {
            break;
        }
        address = next;
    }
    Regions {
        files,
        read,
        truncated: false,
    }
}

#[cfg(target_os = "macos")]
mod sys {
    use super::super::process::{lookup_user, ProcInfo, MAPS_REFRESH};
    use super::super::{classify, redact};
    use crate::units::format_unix_nanos;
    use std::collections::HashMap;
    use std::ffi::{c_int, c_void, CStr};
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    /// `struct proc_regioninfo` (xnu bsd/sys/proc_info.h), not in libc.
    #[repr(C)]
    #[allow(non_camel_case_types)]
    struct proc_regioninfo {
        pri_protection: u32,
        pri_max_protection: u32,
        pri_inheritance: u32,
        pri_flags: u32,
        pri_offset: u64,
        pri_behavior: u32,
        pri_user_wired_count: u32,
        pri_user_tag: u32,
        pri_pages_resident: u32,
        pri_pages_shared_now_private: u32,
        pri_pages_swapped_out: u32,
        pri_pages_dirtied: u32,
        pri_ref_count: u32,
        pri_shadow_depth: u32,
        pri_share_mode: u32,
        pri_private_pages_resident: u32,
        pri_shared_pages_resident: u32,
        pri_obj_id: u32,
        pri_depth: u32,
        pri_address: u64,
        pri_size: u64,
    }

    // 4 words, an offset, 14 words, address and size: no padding.
    const _: () = assert!(std::mem::size_of::<proc_regioninfo>() == 96);

    /// `struct proc_regionwithpathinfo`.
    #[repr(C)]
    #[allow(non_camel_case_types)]
    struct proc_regionwithpathinfo {
        prp_prinfo: proc_regioninfo,
        prp_vip: libc::vnode_info_path,
    }

    /// The next vnode-backed region at or after an address (xnu
    /// bsd/sys/proc_info.h: `PROC_PIDREGIONPATHINFO2 22`, used by lsof-like
    /// tools since 10.15).
    const PROC_PIDREGIONPATHINFO2: c_int = 22;
    /// Regions looked at per process, at most: bounds a pathological map.
    const MAX_REGIONS: usize = 65536;

    /// The lifelong part of a process; classified: its kind.
    type Static = super::super::process::Lifelong<Option<u64>, crate::snapshot::ProcessKind>;

    pub struct ProcScanner {
        /// CPU time (ns) at the previous sample.
        cpu: HashMap<(u32, u64), (u64, Instant)>,
        statics: HashMap<(u32, u64), Static>,
        users: HashMap<u32, String>,
        /// Mach absolute time units to ns (1/1 on Intel, 125/3 on Apple
        /// Silicon): `pti_total_user` is in those units.
        timebase: (u64, u64),
        /// The shortest CPU% window of the last scan.
        window: Option<Duration>,
    }

    impl ProcScanner {
        pub fn new(_root: PathBuf) -> Self {
            let mut tb = mach2::mach_time::mach_timebase_info { numer: 0, denom: 0 };
            // SAFETY: fills the struct; 0 (KERN_SUCCESS) on success.
            let ok = unsafe { mach2::mach_time::mach_timebase_info(&mut tb) } == 0 && tb.denom != 0;
            ProcScanner {
                cpu: HashMap::new(),
                statics: HashMap::new(),
                users: HashMap::new(),
                timebase: if ok { (tb.numer.into(), tb.denom.into()) } else { (1, 1) },
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
            super::super::process::close_by_rescan(latest, min, processes, || self.scan());
        }

        /// The shortest window a CPU% of the last scan was measured over.
        pub fn cpu_window(&self) -> Option<Duration> {
            self.window
        }

        /// Every process's libraries are read as it is first seen here.
        pub fn read_deferred_maps(&mut self, _wanted: impl Fn(u32) -> bool, _scanned: &mut [ProcInfo]) {}

        pub fn prime(&mut self) {
            let now = Instant::now();
            for pid in list_pids().unwrap_or_default() {
                if let (Some(bsd), Some(task)) = (bsd_info(pid), task_info(pid)) {
                    let key = (pid, start_micros(&bsd));
                    self.cpu.insert(key, (self.cpu_ns(&task), now));
                }
            }
        }

        /// Anonymous resident memory is a /proc notion: unknown here.
        pub fn rss_anon(&self, _pid: u32) -> Option<u64> {
            None
        }

        fn cpu_ns(&self, task: &libc::proc_taskinfo) -> u64 {
            let ticks = u128::from(task.pti_total_user + task.pti_total_system);
            (ticks * u128::from(self.timebase.0) / u128::from(self.timebase.1)) as u64
        }

        pub fn scan(&mut self) -> anyhow::Result<Vec<ProcInfo>> {
            let pids = list_pids()?;
            let now = Instant::now();
            let mut seen = HashMap::with_capacity(pids.len());
            let mut shortest: Option<Duration> = None;
            let mut out = Vec::with_capacity(pids.len());
            for pid in pids {
                // Exited since the list: left out.
                let Some(bsd) = bsd_info(pid) else { continue };
                let start = start_micros(&bsd);
                let key = (pid, start);
                let task = task_info(pid);
                let cpu_now = task.as_ref().map(|t| self.cpu_ns(t));
                let cpu_percent = match (cpu_now, self.cpu.get(&key)) {
                    (Some(ns), Some(&(before, at))) => {
                        let window = now.duration_since(at);
                        shortest = Some(shortest.map_or(window, |s| s.min(window)));
                        let secs = window.as_secs_f64();
                        (secs > 0.0).then(|| ns.saturating_sub(before) as f64 / 1e9 / secs * 100.0)
                    }
                    _ => None,
                };
                if let Some(ns) = cpu_now {
                    let reference = match self.cpu.get(&key) {
                        Some(&(t, at)) if now.duration_since(at).as_millis() < 50 => (t, at),
                        _ => (ns, now),
                    };
                    seen.insert(key, reference);
                }
                let name = cstr(&bsd.pbi_name)
                    .filter(|n| !n.is_empty())
                    .or_else(|| cstr(&bsd.pbi_comm))
                    .unwrap_or_default();
                if !self.statics.contains_key(&key) {
                    let user = self.user_name(bsd.pbi_uid);
                    let mut fixed = read_static(pid, &name, &bsd, user, now);
                    fixed.maps_vsize = task.as_ref().map(|t| t.pti_virtual_size);
                    self.statics.insert(key, fixed);
                }
                let fixed = self.statics.get_mut(&key).expect("inserted above");
                // Libraries load late (PyTorch, MLX on first use): the maps
                // are reread like the Linux scan's, at most every
                // MAPS_REFRESH and only when the address space changed size
                // (walking every region of every process is the costly part).
                let vsize = task.as_ref().map(|t| t.pti_virtual_size);
                if fixed
                    .maps_read_at
                    .is_some_and(|at| now.duration_since(at) >= MAPS_REFRESH)
                    && vsize != fixed.maps_vsize
                {
                    reclassify(pid, &name, fixed, now);
                    fixed.maps_vsize = vsize;
                }
                let ai = fixed.classified == crate::snapshot::ProcessKind::Ai;
                out.push(ProcInfo {
                    pid,
                    ppid: (bsd.pbi_ppid != 0).then_some(bsd.pbi_ppid),
                    start_ticks: start,
                    name,
                    start_time: fixed.start_time.clone(),
                    user: fixed.user.clone(),
                    argv: if ai { fixed.argv.clone() } else { Vec::new() },
                    cmdline: fixed.cmdline.clone(),
                    exe: fixed.exe.clone(),
                    runtimes: fixed.runtimes.clone(),
                    mapped_files: if ai { fixed.mapped_files.clone() } else { Vec::new() },
                    maps_readable: fixed.maps_read_at.is_some(),
                    kind: fixed.classified,
                    cpu_percent,
                    rss_bytes: task.map(|t| t.pti_resident_size),
                    notes: fixed.notes.clone(),
                });
            }
            // Forget processes that are gone, so neither map grows.
            let listed: std::collections::HashSet<(u32, u64)> = out.iter().map(|p| (p.pid, p.start_ticks)).collect();
            self.statics.retain(|k, _| listed.contains(k));
            self.cpu = seen;
            self.window = shortest;
            Ok(out)
        }

        fn user_name(&mut self, uid: u32) -> String {
            self.users
                .entry(uid)
                .or_insert_with(|| lookup_user(uid).unwrap_or_else(|| uid.to_string()))
                .clone()
        }
    }

    fn read_static(pid: u32, name: &str, bsd: &libc::proc_bsdinfo, user: String, now: Instant) -> Static {
        let mut notes = Vec::new();
        let argv = match argv(pid) {
            Some(argv) => argv,
            None => {
                notes.push("command line not readable (another user's process: root sees it)".into());
                Vec::new()
            }
        };
        let cmdline = (!argv.is_empty()).then(|| redact::join_args(&redact::redact_args(&argv)));
        let micros = start_micros(bsd);
        let mut fixed = Static {
            argv,
            cmdline,
            exe: pidpath(pid),
            user: Some(user),
            start_time: format_unix_nanos(i128::from(micros) * 1000),
            runtimes: Vec::new(),
            mapped_files: Vec::new(),
            maps_read_at: None,
            maps_vsize: None,
            classified: crate::snapshot::ProcessKind::Other,
            notes,
        };
        reclassify(pid, name, &mut fixed, now);
        fixed
    }

    /// Rereads the mapped files and classifies the process again.
    fn reclassify(pid: u32, name: &str, fixed: &mut Static, now: Instant) {
        const NOTE: &str = "memory maps not readable";
        const CUT: &str = "memory maps longer than";
        fixed.notes.retain(|n| !n.starts_with(NOTE) && !n.starts_with(CUT));
        match mapped_files(pid) {
            Some(walk) => {
                if walk.truncated {
                    fixed.notes.push(format!(
                        "{CUT} {MAX_REGIONS} regions: files mapped past them are not known"
                    ));
                }
                let files = walk.files;
                fixed.runtimes.clear();
                classify::runtimes_from_libraries(files.iter().map(String::as_str), &mut fixed.runtimes);
                fixed.mapped_files = files;
                fixed.maps_read_at = Some(now);
            }
            None => {
                fixed.notes.push(format!(
                    "{NOTE} (another user's process: root sees them): runtimes only from its name"
                ));
                fixed.maps_read_at = None;
            }
        }
        classify::runtimes_from_names(name, fixed.exe.as_deref(), &fixed.argv, &mut fixed.runtimes);
        fixed.classified = classify::kind(name, fixed.exe.as_deref(), &fixed.argv, &fixed.runtimes);
    }

    fn list_pids() -> anyhow::Result<Vec<u32>> {
        // SAFETY: a null buffer asks for the count.
        let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
        anyhow::ensure!(n >= 0, "proc_listallpids failed: {}", std::io::Error::last_os_error());
        // Room for processes started since the count.
        let mut pids = vec![0 as c_int; n as usize + 256];
        let bytes = c_int::try_from(pids.len() * std::mem::size_of::<c_int>())?;
        // SAFETY: the buffer holds `bytes` bytes.
        let n = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
        anyhow::ensure!(n >= 0, "proc_listallpids failed: {}", std::io::Error::last_os_error());
        pids.truncate((n as usize).min(pids.len()));
        Ok(pids
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .filter(|&p| p > 0)
            .collect())
    }

    /// One `proc_pidinfo` call into a plain-data struct; None unless the
    /// kernel filled all of it.
    fn pidinfo<T>(pid: u32, flavor: c_int, arg: u64) -> Option<T> {
        let size = c_int::try_from(std::mem::size_of::<T>()).ok()?;
        let mut out = std::mem::MaybeUninit::<T>::zeroed();
        // SAFETY: the buffer is `size` bytes; T is a C struct of plain data
        // for which all-zero bytes are valid.
        let n = unsafe { libc::proc_pidinfo(pid as c_int, flavor, arg, out.as_mut_ptr().cast::<c_void>(), size) };
        // SAFETY: the kernel wrote `size` bytes over zeroed plain data.
        (n == size).then(|| unsafe { out.assume_init() })
    }

    fn bsd_info(pid: u32) -> Option<libc::proc_bsdinfo> {
        pidinfo(pid, libc::PROC_PIDTBSDINFO, 0)
    }

    /// Not for another user's process without root.
    fn task_info(pid: u32) -> Option<libc::proc_taskinfo> {
        pidinfo(pid, libc::PROC_PIDTASKINFO, 0)
    }

    /// Start time in microseconds since the epoch: with the PID it names
    /// the process, and it orders processes by creation.
    fn start_micros(bsd: &libc::proc_bsdinfo) -> u64 {
        bsd.pbi_start_tvsec
            .saturating_mul(1_000_000)
            .saturating_add(bsd.pbi_start_tvusec)
    }

    fn cstr(chars: &[libc::c_char]) -> Option<String> {
        let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn pidpath(pid: u32) -> Option<String> {
        let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
        // SAFETY: the buffer holds the size passed.
        let n = unsafe { libc::proc_pidpath(pid as c_int, buf.as_mut_ptr().cast(), buf.len() as u32) };
        (n > 0).then(|| String::from_utf8_lossy(&buf[..(n as usize).min(buf.len())]).into_owned())
    }

    fn argv(pid: u32) -> Option<Vec<String>> {
        let mut argmax: c_int = 0;
        let mut len = std::mem::size_of::<c_int>();
        let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
        // SAFETY: KERN_ARGMAX is an int; `len` is its size.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                2,
                (&mut argmax as *mut c_int).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        let size = if rc == 0 && argmax > 0 {
            (argmax as usize).min(4 << 20)
        } else {
            1 << 20
        };
        let mut buf = vec![0u8; size];
        let mut len = buf.len();
        let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid as c_int];
        // SAFETY: the buffer holds `len` bytes; the kernel writes at most that.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                3,
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return None;
        }
        super::parse_procargs2(&buf[..len.min(buf.len())])
    }

    /// The distinct files mapped into a process, in address order; None
    /// when the kernel will not say (another user's process).
    fn mapped_files(pid: u32) -> Option<super::Regions> {
        let walk = super::walk_regions(MAX_REGIONS, |address| {
            let region = pidinfo::<proc_regionwithpathinfo>(pid, PROC_PIDREGIONPATHINFO2, address)?;
            // SAFETY: vip_path is a NUL-terminated C string of MAXPATHLEN
            // bytes laid out as [[c_char; 32]; 32].
            let path = unsafe { CStr::from_ptr(region.prp_vip.vip_path.as_ptr().cast()) };
            Some((
                path.to_string_lossy().into_owned(),
                region.prp_prinfo.pri_address,
                region.prp_prinfo.pri_size,
            ))
        });
        // The first call failing means "not allowed"; a later one, the end
        // of the map.
        (walk.read > 0 || task_info(pid).is_some()).then_some(walk)
    }

    /// The listening TCP sockets of a process (for probing its runtime's
    /// API): its socket fds (`PROC_PIDLISTFDS`), each read with
    /// `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)`. Err for another user's
    /// process without root.
    pub fn listening_sockets(pid: u32) -> Result<Vec<std::net::SocketAddr>, String> {
        const PROC_PIDFDSOCKETINFO: c_int = 3;
        const MAX_FDS: usize = 65536;
        let denied = || format!("file descriptors not readable: {}", std::io::Error::last_os_error());
        // SAFETY: a null buffer asks for the size needed.
        let bytes = unsafe { libc::proc_pidinfo(pid as c_int, libc::PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
        if bytes <= 0 {
            return Err(denied());
        }
        let entry = std::mem::size_of::<libc::proc_fdinfo>();
        // Room for fds opened since the size was asked.
        let count = (bytes as usize / entry + 32).min(MAX_FDS);
        let empty = libc::proc_fdinfo {
            proc_fd: 0,
            proc_fdtype: 0,
        };
        let mut fds = vec![empty; count];
        let size = c_int::try_from(count * entry).map_err(|e| e.to_string())?;
        // SAFETY: the buffer holds `size` bytes of plain-data entries.
        let bytes =
            unsafe { libc::proc_pidinfo(pid as c_int, libc::PROC_PIDLISTFDS, 0, fds.as_mut_ptr().cast(), size) };
        if bytes <= 0 {
            return Err(denied());
        }
        fds.truncate((bytes as usize / entry).min(count));
        let mut out = Vec::new();
        let mut buf = vec![0u8; super::SOCKET_FDINFO_SIZE];
        for fd in fds.iter().filter(|f| f.proc_fdtype == libc::PROX_FDTYPE_SOCKET as u32) {
            // SAFETY: the buffer holds SOCKET_FDINFO_SIZE bytes.
            let n = unsafe {
                libc::proc_pidfdinfo(
                    pid as c_int,
                    fd.proc_fd,
                    PROC_PIDFDSOCKETINFO,
                    buf.as_mut_ptr().cast(),
                    super::SOCKET_FDINFO_SIZE as c_int,
                )
            };
            if n as usize == super::SOCKET_FDINFO_SIZE {
                out.extend(super::listening_addr(&buf));
            }
        }
        Ok(out)
    }

    /// A process's working directory (`PROC_PIDVNODEPATHINFO`), to resolve
    /// relative model paths on its command line.
    pub fn cwd(pid: u32) -> Option<PathBuf> {
        let info: libc::proc_vnodepathinfo = pidinfo(pid, libc::PROC_PIDVNODEPATHINFO, 0)?;
        // SAFETY: vip_path is a NUL-terminated C string of MAXPATHLEN bytes.
        let path = unsafe { CStr::from_ptr(info.pvi_cdir.vip_path.as_ptr().cast()) };
        let path = path.to_string_lossy();
        (!path.is_empty()).then(|| PathBuf::from(path.into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_give_each_file_once_and_a_walk_cut_at_its_bound_says_so() {
        // Region i at i*4096, 4096 long; files repeat and interleave.
        let map: Vec<(String, u64, u64)> = ["a", "", "b", "a", "c", "b", "d"]
            .iter()
            .enumerate()
            .map(|(i, f)| (f.to_string(), i as u64 * 4096, 4096))
            .collect();
        let region_at = |address: u64| map.iter().find(|r| r.1 >= address).cloned();
        let all = walk_regions(100, region_at);
        assert_eq!(all.files, ["a", "b", "c", "d"]);
        assert_eq!((all.read, all.truncated), (7, false));
        // Exactly the bound: not cut.
        assert!(!walk_regions(7, region_at).truncated);
        let cut = walk_regions(5, region_at);
        assert_eq!(cut.files, ["a", "b", "c"]);
        assert_eq!((cut.read, cut.truncated), (5, true));
        // Nothing readable at all.
        assert_eq!(walk_regions(5, |_| None).read, 0);
        // A region that does not move the walk forward ends it.
        let stuck = walk_regions(100, |_| Some(("x".to_string(), 0, 0)));
        assert_eq!((stuck.files.len(), stuck.read, stuck.truncated), (1, 1, false));
        // Many distinct files stay quick (a set, not a scan of the list).
        let many = walk_regions(60_000, |a| (a < 60_000).then(|| (format!("/lib/{a}"), a, 1)));
        assert_eq!((many.files.len(), many.truncated), (60_000, false));
    }

    /// A `socket_fdinfo` as the kernel fills it for a TCP socket.
    fn socket(state: i32, vflag: u8, laddr: [u8; 16], port: u16) -> Vec<u8> {
        let mut b = vec![0u8; SOCKET_FDINFO_SIZE];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(SOI_KIND, &SOCKINFO_TCP.to_ne_bytes());
        put(TCPSI_STATE, &state.to_ne_bytes());
        // insi_lport holds the port in network order in an int.
        put(INSI_LPORT, &i32::from(port.to_be()).to_ne_bytes());
        put(INSI_VFLAG, &[vflag]);
        put(INSI_LADDR, &laddr);
        b
    }

    #[test]
    fn listening_tcp_sockets_are_read_by_offset_and_others_skipped() {
        let mut v4 = [0u8; 16];
        v4[12..].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(
            listening_addr(&socket(TSI_S_LISTEN, INI_IPV4, v4, 8080)),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        let v6 = std::net::Ipv6Addr::LOCALHOST.octets();
        // An IPv6 socket that also takes IPv4 has both flags.
        assert_eq!(
            listening_addr(&socket(TSI_S_LISTEN, INI_IPV4 | INI_IPV6, v6, 11434)),
            Some("[::1]:11434".parse().unwrap())
        );
        // Established (4), not TCP (UDP is SOCKINFO_IN), or a short buffer.
        assert_eq!(listening_addr(&socket(4, INI_IPV4, v4, 8080)), None);
        let mut udp = socket(TSI_S_LISTEN, INI_IPV4, v4, 53);
        udp[SOI_KIND..SOI_KIND + 4].copy_from_slice(&1i32.to_ne_bytes());
        assert_eq!(listening_addr(&udp), None);
        assert_eq!(listening_addr(&socket(TSI_S_LISTEN, INI_IPV4, v4, 80)[..700]), None);
        assert_eq!(listening_addr(&socket(TSI_S_LISTEN, 0, v4, 80)), None);
    }

    fn buf(argc: i32, body: &[u8]) -> Vec<u8> {
        let mut b = argc.to_ne_bytes().to_vec();
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn procargs2_gives_argv_and_never_the_environment() {
        let b = buf(
            3,
            b"/opt/homebrew/bin/llama-server\0\0\0\0llama-server\0-m\0/Users/a/m.gguf\0HOME=/Users/a\0API_KEY=s\0",
        );
        assert_eq!(parse_procargs2(&b).unwrap(), ["llama-server", "-m", "/Users/a/m.gguf"]);
    }

    #[test]
    fn a_short_or_lying_procargs2_buffer_is_none_never_a_panic() {
        assert_eq!(parse_procargs2(&[]), None);
        assert_eq!(parse_procargs2(&[1, 0]), None);
        assert_eq!(parse_procargs2(&buf(-1, b"/x\0a\0")), None);
        assert_eq!(parse_procargs2(&buf(5, b"/x\0a\0b\0")), None);
        assert_eq!(parse_procargs2(&buf(2, b"/x\0a\0b")), None, "the last argument is cut");
        assert_eq!(parse_procargs2(&buf(1, b"/x-without-a-nul")), None);
        assert_eq!(parse_procargs2(&buf(i32::MAX, b"/x\0a\0")), None);
        assert_eq!(parse_procargs2(&buf(0, b"/x\0")).unwrap(), Vec::<String>::new());
    }
}
