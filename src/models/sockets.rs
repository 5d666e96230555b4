//! Which TCP ports a process listens on: the listening sockets of
//! /proc/net/tcp and tcp6, matched to the process through the socket inodes
//! among its file descriptors (proc(5)).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// TCP_LISTEN in the kernel's tcp_states.h, as /proc/net/tcp prints it.
const LISTEN: &str = "0A";

/// Listening sockets by inode, from `root/net/tcp` and `root/net/tcp6`.
pub fn listening(root: &Path) -> HashMap<u64, SocketAddr> {
    let mut out = HashMap::new();
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
#[cfg_attr(target_os = "macos", allow(dead_code))]
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
/// in `table` (from [`listening`]); on macOS through libproc (the table is
/// empty there: there is no /proc). Err when its fds cannot be read.
pub fn listening_of(root: &Path, pid: u32, table: &HashMap<u64, SocketAddr>) -> Result<Vec<SocketAddr>, String> {
    #[cfg(target_os = "macos")]
    {
        let _ = (root, table);
        crate::procs::macos::listening_sockets(pid)
    }
    #[cfg(not(target_os = "macos"))]
    Ok(socket_inodes(root, pid)?
        .iter()
        .filter_map(|i| table.get(i).copied())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

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
