//! The process scan: who is running, under which name and user, with which
//! command line (redacted), memory, CPU time and runtimes.
//!
//! The scanner keeps state between samples: CPU time for CPU%, and the parts
//! of a process that do not change while it lives (command line, user,
//! executable) keyed by (pid, start time), so that a live view rereads only
//! /proc/PID/stat each tick. Runtimes come from /proc/PID/maps, which a
//! process can grow (PyTorch loads libcuda lazily): they are reread every
//! [`MAPS_REFRESH`].

pub mod classify;
mod process;
pub mod redact;
pub mod signal;

/// Public for fuzz/, which calls `linux::parse_stat` and `mapped_paths`.
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "linux")]
pub use linux::ProcScanner;

#[cfg(any(test, windows))]
mod wincmd;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::ProcScanner;

// libproc and sysctl; its argv parser is tested everywhere.
#[cfg(any(test, target_os = "macos"))]
pub mod macos;
#[cfg(target_os = "macos")]
pub use macos::ProcScanner;

#[cfg(not(any(target_os = "linux", windows, target_os = "macos")))]
mod unsupported;
#[cfg(not(any(target_os = "linux", windows, target_os = "macos")))]
pub use unsupported::ProcScanner;

pub use process::{user_exists, ProcInfo, MAPS_REFRESH};
