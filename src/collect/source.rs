//! The interface every measurement source implements, and what one sample
//! of a source gives the collector. See docs/ARCHITECTURE.md for the data
//! flow of a sample and how a new source is added.

use crate::procs::ProcInfo;
use crate::snapshot::{Backend, Device, GpuUsage, Process};
use std::collections::{BTreeMap, HashSet};

/// A source of GPU measurements: opened once by the collector, then read
/// once per sample, in the order of [`super::Collector`]'s list.
pub trait Source {
    /// A first reading of what is measured as a rate (GPU or engine time),
    /// so that the next sample has one. Most sources have none.
    fn prime(&mut self) {}

    /// One sample: the source's status line, and what it read. A source
    /// whose driver calls can hang reads on a [`super::watchdog`] and
    /// answers in time regardless.
    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report);

    /// After the GPU entries are merged with the process scan: what this
    /// source adds to the listed processes (names, footprints, notes).
    fn finish(&mut self, _scanned: &[ProcInfo], _processes: &mut [Process]) {}
}

/// What a source sees of the sample in progress.
pub struct Round<'a> {
    /// Only this device (`--gpu`), by index.
    pub only: Option<u32>,
    /// The process scan of this sample.
    pub scanned: &'a [ProcInfo],
    /// The PIDs of the scan, where they can be checked against a source's
    /// (empty in a child PID namespace, whose PIDs no driver reports).
    pub visible: &'a HashSet<u32>,
    /// The devices the sources before this one found. A source numbers its
    /// own after them ([`Round::next_index`]) and may fill in theirs
    /// (a Windows adapter matched by LUID).
    pub devices: Vec<Device>,
}

impl Round<'_> {
    /// The first free device index.
    pub fn next_index(&self) -> u32 {
        self.devices.iter().map(|d| d.index + 1).max().unwrap_or(0)
    }
}

/// What one source read in one sample.
#[derive(Debug, Default)]
pub struct Report {
    /// Devices this source found, numbered after those of the sources
    /// before it.
    pub devices: Vec<Device>,
    /// GPU use per process. A source that reads PIDs as the driver gives
    /// them says [`Owner::Local`]; the collector's PID stage decides whose
    /// they are in a container or under WSL.
    pub usage: Vec<(Owner, GpuUsage)>,
    /// Notes for processes of the scan, by PID.
    pub notes: BTreeMap<u32, Vec<String>>,
}

impl Report {
    /// Keeps only the usage on device `only`, where the source reads every
    /// device regardless.
    pub fn retain_device(&mut self, only: Option<u32>) {
        if let Some(only) = only {
            self.usage.retain(|(_, u)| u.device == only);
        }
    }
}

/// Whose a GPU entry is, in this PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    /// The PID is ours (no namespace in between).
    Local(u32),
    /// A host PID paired with one of ours.
    Paired { pid: u32, host_pid: u32 },
    /// A host PID with no process here.
    Host(u32),
}
