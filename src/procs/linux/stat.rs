//! One process's /proc/PID/stat: the fields the scanner reads, parsed
//! from bytes a process partly writes (its comm).

use super::sys::sysconf;
use crate::units::format_unix_nanos;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone)]
pub struct Stat {
    /// Shared: a quiet process's kept reading is handed out every scan.
    pub comm: Arc<str>,
    /// State `Z` or `X`: exited, not yet reaped.
    pub exited: bool,
    pub ppid: u32,
    pub utime: u64,
    pub stime: u64,
    pub starttime: u64,
    pub vsize: u64,
    pub rss: u64,
}

impl Stat {
    /// CPU ticks, user + system; saturating, since a forged or corrupt
    /// stat line can say 2^64-1.
    pub fn ticks(&self) -> u64 {
        self.utime.saturating_add(self.stime)
    }
}

/// Reads /proc/PID/stat with one open and one read into `buf`.
pub(super) fn read_stat(path: &Path, buf: &mut [u8]) -> Option<Stat> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let n = f.read(buf).ok()?;
    parse_stat(&buf[..n])
}

/// One /proc/PID/stat line: the comm between the first '(' and the last ')'
/// (a comm may hold both, and any byte but NUL: it is decoded lossily, so a
/// name that is not UTF-8 never hides a process), then the numeric fields.
/// `None` for anything else.
pub fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let open = bytes.iter().position(|b| *b == b'(')?;
    let close = bytes.iter().rposition(|b| *b == b')')?;
    let comm = Arc::from(String::from_utf8_lossy(bytes.get(open + 1..close)?));
    let text = std::str::from_utf8(bytes.get(close + 2..)?).ok()?;
    let mut fields = text.split_ascii_whitespace();
    let exited = matches!(fields.next()?, "Z" | "X");
    // Fields after the comm, from 0: state is 0, ppid 1; utime 11,
    // stime 12, starttime 19, vsize 20, rss 21 (proc(5), numbered from 3).
    let mut nth = |skip: usize| -> Option<u64> { fields.nth(skip)?.parse().ok() };
    let ppid = u32::try_from(nth(0)?).ok()?;
    let utime = nth(9)?;
    let stime = nth(0)?;
    let starttime = nth(6)?;
    let vsize = nth(0)?;
    let rss = nth(0)?;
    Some(Stat {
        comm,
        exited,
        ppid,
        utime,
        stime,
        starttime,
        vsize,
        rss,
    })
}

/// Resident bytes from a stat line. No address space (vsize 0): an exiting
/// process whose memory is already released, or a zombie: its RSS is
/// unknown, not 0 B. A page count no machine holds is no fact either.
pub(super) fn resident_bytes(stat: &Stat, page_size: u64) -> Option<u64> {
    (stat.vsize > 0).then(|| stat.rss.checked_mul(page_size)).flatten()
}

/// The `btime` line of /proc/stat: boot time in seconds since the epoch.
pub(super) fn read_boot_time(root: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(root.join("stat")).ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A start time in ticks after boot as the snapshot's `start_time` says it.
pub(super) fn start_rfc3339(boot_secs: u64, start_ticks: u64, ticks_per_second: u64) -> Option<String> {
    let nanos =
        boot_secs as i128 * 1_000_000_000 + start_ticks as i128 * 1_000_000_000 / ticks_per_second.max(1) as i128;
    format_unix_nanos(nanos)
}

/// The `start_time` a scan of `root` would give the process `pid` now:
/// with the PID it names the process, so a signal never reaches another
/// one that took a reused PID.
pub fn start_time_of(root: &Path, pid: u32) -> Option<String> {
    let mut buf = [0u8; 2048];
    let stat = read_stat(&root.join(pid.to_string()).join("stat"), &mut buf)?;
    start_rfc3339(
        read_boot_time(root)?,
        stat.starttime,
        sysconf(libc::_SC_CLK_TCK).unwrap_or(100),
    )
}
