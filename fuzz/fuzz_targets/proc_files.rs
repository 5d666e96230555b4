//! What the process scan reads from /proc: /proc/PID/stat (our parser),
//! /proc/PID/status and /proc/PID/maps (procfs's parsers, as the scan calls
//! them) and /proc/net/tcp{,6} (our parser). Any bytes: a value or None /
//! an error, never a panic.
#![no_main]

use gputaskman_fuzz::procs::linux::parse_stat;
use gputaskman_fuzz::sockets;
use libfuzzer_sys::fuzz_target;
use procfs::FromRead;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Some(stat) = parse_stat(rest) {
                // The comm sits between the first '(' and the last ')'.
                assert!(stat.comm.len() < rest.len());
                assert!(!stat.comm.contains('\0') || rest.contains(&0));
            }
        }
        1 => {
            let _ = procfs::process::Status::from_read(rest);
        }
        2 => {
            if let Ok(maps) = procfs::process::MemoryMaps::from_read(rest) {
                // The scan keeps file-backed paths; walking them must be safe.
                for map in maps {
                    let _ = map.pathname;
                }
            }
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
