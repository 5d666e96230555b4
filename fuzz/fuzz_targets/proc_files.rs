//! What the process scan reads from /proc: /proc/PID/stat and
//! /proc/PID/maps (our readers), /proc/PID/status (procfs's parser, as the
//! scan calls it) and /proc/net/tcp{,6} (ours); and the kernel's process
//! events (netlink datagrams). Any bytes: a value or None / an error, never
//! a panic.
#![no_main]

use gputaskman::procs::linux::{mapped_paths, parse_datagram, parse_stat};
use gputaskman::models::sockets;
use libfuzzer_sys::fuzz_target;
use procfs::FromRead;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 5 {
        0 => {
            if let Some(stat) = parse_stat(rest) {
                // The comm sits between the first '(' and the last ')'.
                // Lossy: one bad byte is one U+FFFD.
                assert!(stat.comm.chars().count() < rest.len());
                assert!(!stat.comm.contains('\0') || rest.contains(&0));
            }
        }
        1 => {
            let _ = procfs::process::Status::from_read(rest);
        }
        2 => {
            // The scan's own reader (procfs's MemoryMaps panicked on
            // `/SYSV` paths: fuzz/regressions/proc_files-maps-sysv.bin).
            let files = mapped_paths(rest);
            assert!(files.iter().all(|f| f.starts_with('/')));
            assert!(files.len() <= rest.split(|b| *b == b'\n').count());
        }
        3 => {
            // At most one event per 16-byte netlink header.
            assert!(parse_datagram(rest).len() <= rest.len() / 16);
        }
        _ => {
            let text = gputaskman_fuzz::text(rest);
            for v6 in [false, true] {
                let table = sockets::parse_table(&text, v6);
                assert!(table.len() <= text.lines().count());
                for (_, addr) in table {
                    assert_eq!(addr.is_ipv6(), v6);
                }
            }
        }
    }
});
