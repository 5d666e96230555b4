//! Which TCP ports a process listens on. On Linux: the listening sockets of
//! /proc/net/tcp and tcp6, matched to the process through the socket inodes
//! among its file descriptors (proc(5)). On macOS: libproc. On Windows: the
//! TCP tables with each socket's owning PID (GetExtendedTcpTable); no
//! /proc is read there, not even the one Wine maps from its Linux host.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// TCP_LISTEN in the kernel's tcp_states.h, as /proc/net/tcp prints it.
const LISTEN: &str = "0A";

/// Listening sockets by inode, from `root/net/tcp` and `root/net/tcp6`;
/// empty off Linux, where [`listening_of`] asks the system per process.
pub fn listening(root: &Path) -> HashMap<u64, SocketAddr> {
    let mut out = HashMap::new();
    if cfg!(not(target_os = "linux")) {
        return out;
    }
    for (file, v6) in [("tcp", false), ("tcp6", true)] {
        if let Ok(text) = std::fs::read_to_string(root.join("net").join(file)) {
            out.extend(parse_table(&text, v6));
        }
    }
    out
}

/// Parses a /proc/net/tcp{,6} table: `sl local_address rem_address st ...
/// uid timeout inode`, addresses as hex `ADDR:PORT` in host byte order per
/// 32-bit word.
pub fn parse_table(text: &str, v6: bool) -> Vec<(u64, SocketAddr)> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) != Some(&LISTEN) {
                return None;
            }
            let (addr, port) = fields.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let ip = if v6 { parse_v6(addr)? } else { parse_v4(addr)? };
            let inode = fields.get(9)?.parse().ok()?;
            Some((inode, SocketAddr::new(ip, port)))
        })
        .collect()
}

fn parse_v4(hex: &str) -> Option<IpAddr> {
    (hex.len() == 8).then_some(())?;
    let word = u32::from_str_radix(hex, 16).ok()?;
    Some(IpAddr::V4(Ipv4Addr::from(word.to_ne_bytes())))
}

fn parse_v6(hex: &str) -> Option<IpAddr> {
    (hex.len() == 32).then_some(())?;
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let word = u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok()?;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    Some(IpAddr::V6(Ipv6Addr::from(bytes)))
}

/// The socket inodes among a process's file descriptors. Err when the fds
/// cannot be read (another user's process without privileges).
#[cfg(any(test, not(any(target_os = "macos", windows))))]
pub fn socket_inodes(root: &Path, pid: u32) -> Result<Vec<u64>, String> {
    let dir = root.join(pid.to_string()).join("fd");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("file descriptors not readable: {e}"))?;
    Ok(entries
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy();
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect())
}

/// A process's listening TCP sockets: on Linux its socket inodes looked up
/// in `table` (from [`listening`]); on macOS through libproc and on Windows
/// through the owner-PID TCP tables (the table is empty there: there is no
/// /proc). Err when they cannot be read.
pub fn listening_of(root: &Path, pid: u32, table: &HashMap<u64, SocketAddr>) -> Result<Vec<SocketAddr>, String> {
    #[cfg(target_os = "macos")]
    {
        let _ = (root, table);
        crate::procs::macos::listening_sockets(pid)
    }
    #[cfg(windows)]
    {
        let _ = (root, table);
        windows_tcp::listening_sockets(pid)
    }
    #[cfg(not(any(target_os = "macos", windows)))]
    Ok(socket_inodes(root, pid)?
        .iter()
        .filter_map(|i| table.get(i).copied())
        .collect())
}

/// Microsoft Learn: GetExtendedTcpTable (iphlpapi.h) with
/// TCP_TABLE_OWNER_PID_LISTENER, MIB_TCPTABLE_OWNER_PID and
/// MIB_TCP6TABLE_OWNER_PID: every listening socket with its owning PID, one
/// call per address family.
#[cfg(windows)]
mod windows_tcp {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    use windows::Win32::Foundation::{ERROR_INSUFFICIENT_BUFFER, NO_ERROR};
    use windows::Win32::NetworkManagement::IpHelper::{
        GetExtendedTcpTable, MIB_TCP6ROW_OWNER_PID, MIB_TCPROW_OWNER_PID, TCP_TABLE_OWNER_PID_LISTENER,
    };

    /// ws2def.h's address families, as GetExtendedTcpTable takes them.
    const AF_INET: u32 = 2;
    const AF_INET6: u32 = 23;
    /// A table that grows between the size query and the read is asked
    /// again; the buffer has room for PAD_ROWS rows more than the call asked
    /// for, so a busy host's table seldom outgrows it.
    const TRIES: usize = 5;
    const PAD_ROWS: usize = 16;

    pub fn listening_sockets(pid: u32) -> Result<Vec<SocketAddr>, String> {
        let mut out = Vec::new();
        // SAFETY: each table is read as the row type of its family.
        let v4 = unsafe { rows::<MIB_TCPROW_OWNER_PID>(AF_INET) }?;
        out.extend(v4.iter().filter(|r| r.dwOwningPid == pid).map(|r| {
            SocketAddr::new(
                IpAddr::V4(Ipv4Addr::from(r.dwLocalAddr.to_ne_bytes())),
                port(r.dwLocalPort),
            )
        }));
        // SAFETY: as above, the IPv6 table as IPv6 rows.
        let v6 = unsafe { rows::<MIB_TCP6ROW_OWNER_PID>(AF_INET6) }?;
        out.extend(
            v6.iter()
                .filter(|r| r.dwOwningPid == pid)
                .map(|r| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(r.ucLocalAddr)), port(r.dwLocalPort))),
        );
        Ok(out)
    }

    /// The port is in network byte order in the low 16 bits.
    fn port(dw: u32) -> u16 {
        u16::from_be(dw as u16)
    }

    /// The rows of one family's table: a u32 count, then the rows.
    ///
    /// SAFETY: `Row` must be the row type of `family`'s owner-PID table.
    unsafe fn rows<Row: Copy>(family: u32) -> Result<Vec<Row>, String> {
        let row = std::mem::size_of::<Row>();
        let mut asked = 0usize;
        for _ in 0..TRIES {
            // u64 words: aligned for the rows' u32 fields.
            let mut buf = vec![0u64; (asked + PAD_ROWS * row).div_ceil(8)];
            let len = buf.len() * 8;
            let mut size = len as u32;
            // SAFETY: buf holds size bytes.
            let rc = unsafe {
                GetExtendedTcpTable(
                    Some(buf.as_mut_ptr().cast()),
                    &mut size,
                    false,
                    family,
                    TCP_TABLE_OWNER_PID_LISTENER,
                    0,
                )
            };
            if rc == ERROR_INSUFFICIENT_BUFFER.0 {
                asked = size as usize;
                continue;
            }
            if rc != NO_ERROR.0 {
                return Err(format!(
                    "the TCP table is not readable: {}",
                    std::io::Error::from_raw_os_error(rc as i32)
                ));
            }
            // SAFETY: u64 words viewed as their len bytes, in the same
            // allocation, borrowed while buf lives and is not written.
            let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) };
            let count = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            // The count is not trusted past the bytes the call filled (the
            // size it reports, never more than the buffer).
            let n = super::rows_that_fit(count, (size as usize).min(len), row);
            return Ok((0..n)
                .map(|i| {
                    let at = &bytes[4 + i * row..4 + (i + 1) * row];
                    // SAFETY: at is row bytes of buf (n rows fit after the
                    // count); Row is the family's row type, of u32 and byte
                    // fields that follow the count unpadded, any bits valid.
                    unsafe { at.as_ptr().cast::<Row>().read_unaligned() }
                })
                .collect());
        }
        Err("the TCP table kept growing while it was read".into())
    }
}

/// How many of a table's `count` rows of `row` bytes lie in the `filled`
/// bytes of a buffer that holds a u32 count, then the rows.
#[cfg(any(test, windows))]
fn rows_that_fit(count: u32, filled: usize, row: usize) -> usize {
    (count as usize).min(filled.saturating_sub(4) / row.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_table_count_is_clamped_to_the_filled_bytes() {
        // MIB_TCPROW_OWNER_PID is 24 bytes: 4 for the count, then the rows.
        assert_eq!(rows_that_fit(3, 4 + 3 * 24, 24), 3);
        assert_eq!(rows_that_fit(2, 4 + 3 * 24, 24), 2);
        assert_eq!(rows_that_fit(1000, 4 + 3 * 24 + 23, 24), 3);
        assert_eq!(rows_that_fit(u32::MAX, 4, 24), 0);
        assert_eq!(rows_that_fit(5, 2, 24), 0);
    }

    // Recorded from a machine with llama-server on 127.0.0.1:8090 and an
    // sshd on every interface (the kernel prints addresses per 32-bit word
    // in host order; these are from a little-endian machine).
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F9A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31666 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F9A 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   3: garbage
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:2B66 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0
";

    #[test]
    #[cfg(target_endian = "little")]
    fn listening_sockets_are_parsed_and_others_skipped() {
        let v4 = parse_table(TCP, false);
        assert_eq!(
            v4,
            vec![
                (31666, "127.0.0.1:8090".parse().unwrap()),
                (1234, "0.0.0.0:22".parse().unwrap())
            ]
        );
        let v6 = parse_table(TCP6, true);
        assert_eq!(v6, vec![(777, "[::1]:11110".parse().unwrap())]);
    }

    #[test]
    fn our_own_listener_is_found_through_our_fds() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let root = Path::new("/proc");
        let table = listening(root);
        let inodes = socket_inodes(root, std::process::id()).unwrap();
        let ours: Vec<SocketAddr> = inodes.iter().filter_map(|i| table.get(i).copied()).collect();
        assert!(ours.iter().any(|a| a.port() == port), "{ours:?}");
        assert_eq!(listening_of(root, std::process::id(), &table).unwrap(), ours);
    }
}
