//! llama.cpp's memory-breakdown table: per device, what the process took
//! (`self` = `model` + `context` + `compute`) beside the device's total and
//! free memory and what neither accounts for. *Reported* figures, in whole
//! MiB (llama.cpp divides bytes by 2^20 and drops the fraction).
//!
//! Printed by `common_memory_breakdown_print` (llama.cpp common/, 2026),
//! `llama_memory_breakdown_print` (src/llama-context.cpp, late 2025) and
//! first `llama_print_memory_breakdown` (ggml-org/llama.cpp pull 15860,
//! 2025-09), in two layouts:
//!
//! ```text
//! FUNC: | memory breakdown [MiB] | total   free    self   model   context   compute    unaccounted |
//! FUNC: |   - CUDA0 (RTX 3090)   | 24124 = 23860 + (15946 = 15364 +     411 +     170) +      -15681 |
//! FUNC: |   - Host               |                  296 =   222 +      49 +      24                |
//! FUNC: memory breakdown:      total   free     self   model   context   compute    unaccounted
//! FUNC:   - CUDA0 (RTX 4090):  24080 = 9436 + (14193 = 13169 +      38 +     985) +         451
//! FUNC:   - CPU (EPYC 7742):  515628              72 =     0 +      57 +      15
//! ```
//!
//! `--fit` (on by default since late 2025) prints the same table for each
//! dry run while it fits the settings to free memory (`common_params_fit_impl`
//! / `llama_params_fit_impl`, between `fitting params to device memory` and
//! `fitting params to free memory took`): that is a *projection*, kept
//! apart from the table of the real allocation (printed at exit, or after
//! the context is made). A table seen before any of the real load's buffer
//! lines is a projection too (an estimate such as a projector's). Before
//! 2026 an unaccounted figure below 0 was printed as a wrapped size_t
//! (`17592186036877`): taken as unknown.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longer lines are skipped: no table row is anywhere near it.
const MAX_LINE: usize = 4096;
/// A table holds a row per device and buffer type: more is not llama.cpp's.
const MAX_ROWS: usize = 64;
/// Unaccounted MiB beyond this (2^40 MiB = 1 ZiB) is a wrapped negative.
const MAX_MIB: i64 = 1 << 40;

/// One row: a device (`CUDA0`, with the description llama.cpp printed) or
/// the host, or another buffer type (`CPU_REPACK`). MiB, floored.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct BreakdownRow {
    /// ggml's device or buffer-type name: `CUDA0`, `Vulkan1`, `Host`, `CPU_REPACK`.
    pub device: String,
    /// The device's description, prefixes such as `NVIDIA ` stripped by
    /// llama.cpp: `RTX 4090`.
    pub description: Option<String>,
    /// Device memory total and free as the backend reported them (GPU rows).
    pub total_mib: Option<u64>,
    pub free_mib: Option<u64>,
    /// model + context + compute.
    pub self_mib: u64,
    /// Weights.
    pub model_mib: u64,
    /// The context's memory: KV cache, recurrent state and output buffer.
    pub context_mib: u64,
    pub compute_mib: u64,
    /// total - free - self: drivers, other processes; null where unknown.
    pub unaccounted_mib: Option<i64>,
}

/// One printed table.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct BreakdownTable {
    pub rows: Vec<BreakdownRow>,
}

/// The last table of the real allocation and the last projection, apart.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MemoryBreakdown {
    /// What the runtime allocated: the last table printed after its load.
    pub allocated: Option<BreakdownTable>,
    /// What `--fit` (or an estimate before the load) projected: the last
    /// table printed inside a fit or before the load's buffers. Never what
    /// the process holds.
    pub projected: Option<BreakdownTable>,
}

impl MemoryBreakdown {
    pub fn is_empty(&self) -> bool {
        self.allocated.is_none() && self.projected.is_none()
    }
}

/// Reads every table of a log; see the module doc. Never fails. A log
/// appended to across restarts holds other processes' tables: a fit's
/// start begins a new process (both tables dropped), and a model load
/// (`loaded meta data`) outside a fit drops the allocation before it, and a
/// projection unless a fit just ended (that fit was for this load).
pub fn parse(text: &str) -> MemoryBreakdown {
    let mut out = MemoryBreakdown::default();
    let mut in_fit = false;
    let mut fit_ended = false;
    // A buffer line of a real load since the last fit.
    let mut loaded = false;
    let mut table: Option<(BreakdownTable, bool)> = None;
    for line in text.lines().filter(|l| l.len() <= MAX_LINE) {
        if let Some((t, _)) = table.as_mut() {
            if let Some(row) = parse_row(line) {
                if t.rows.len() < MAX_ROWS {
                    t.rows.push(row);
                }
                continue;
            }
        }
        if let Some((t, projected)) = table.take() {
            keep(&mut out, t, projected);
        }
        if line.contains("memory breakdown") {
            table = Some((BreakdownTable::default(), in_fit || !loaded));
        } else if line.contains("fitting params to free memory took")
            || line.contains("fit params to free device memory")
        {
            (in_fit, fit_ended, loaded) = (false, true, false);
        } else if line.contains("fitting params to device memory") {
            out = MemoryBreakdown::default();
            in_fit = true;
        } else if line.contains("params_fit") {
            in_fit = true;
        } else if !in_fit && line.contains("loaded meta data") {
            out.allocated = None;
            if !fit_ended {
                out.projected = None;
            }
            (fit_ended, loaded) = (false, false);
        } else if !in_fit && line.contains(" buffer size = ") {
            loaded = true;
        }
    }
    if let Some((t, projected)) = table {
        keep(&mut out, t, projected);
    }
    out
}

fn keep(out: &mut MemoryBreakdown, table: BreakdownTable, projected: bool) {
    if table.rows.is_empty() {
        return;
    }
    if projected {
        out.projected = Some(table);
    } else {
        out.allocated = Some(table);
    }
}

/// `|   - NAME (DESC) | NUMBERS |` or `  - NAME (DESC):  NUMBERS`.
fn parse_row(line: &str) -> Option<BreakdownRow> {
    let at = line.find("  - ")?;
    let rest = line[at + 4..].trim().trim_end_matches('|').trim_end();
    let (label, numbers) = match rest.split_once('|') {
        Some((label, numbers)) => (label.trim(), numbers),
        None => {
            let colon = rest.rfind(':')?;
            (rest[..colon].trim(), &rest[colon + 1..])
        }
    };
    let (device, description) = match label.split_once(" (") {
        Some((name, desc)) => (name.trim(), Some(desc.trim_end_matches(')').to_string())),
        None => (label, None),
    };
    if device.is_empty() || device.len() > 64 || !numbers.contains('=') {
        return None;
    }
    let values: Vec<i64> = numbers
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect::<Option<_>>()?;
    let unsigned = |v: i64| u64::try_from(v).ok();
    let row = |total: Option<u64>, free: Option<u64>, s: &[i64], unaccounted: Option<i64>| {
        Some(BreakdownRow {
            device: device.to_string(),
            description: description.clone(),
            total_mib: total,
            free_mib: free,
            self_mib: unsigned(s[0])?,
            model_mib: unsigned(s[1])?,
            context_mib: unsigned(s[2])?,
            compute_mib: unsigned(s[3])?,
            unaccounted_mib: unaccounted.filter(|u| u.abs() < MAX_MIB),
        })
    };
    match (numbers.contains('('), values.as_slice()) {
        (true, [total, free, s @ .., unaccounted]) if s.len() == 4 => {
            row(unsigned(*total), unsigned(*free), s, Some(*unaccounted))
        }
        (false, s) if s.len() == 4 => row(None, None, s, None),
        // The 2025-09 host row: the host's total, then self = ...
        (false, [total, s @ ..]) if s.len() == 4 => row(unsigned(*total), None, s, None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(device: &str, desc: &str, n: [i64; 7]) -> BreakdownRow {
        BreakdownRow {
            device: device.into(),
            description: Some(desc.into()),
            total_mib: Some(n[0] as u64),
            free_mib: Some(n[1] as u64),
            self_mib: n[2] as u64,
            model_mib: n[3] as u64,
            context_mib: n[4] as u64,
            compute_mib: n[5] as u64,
            unaccounted_mib: (n[6].abs() < MAX_MIB).then_some(n[6]),
        }
    }

    fn host(device: &str, n: [u64; 4]) -> BreakdownRow {
        BreakdownRow {
            device: device.into(),
            self_mib: n[0],
            model_mib: n[1],
            context_mib: n[2],
            compute_mib: n[3],
            ..BreakdownRow::default()
        }
    }

    /// The recorded server (tests/data/llama-server/server.log:
    /// xllamacpp, CPU, gemma-3-270m, -c 4096): the fit's dry run at start,
    /// the real allocation at exit.
    #[test]
    fn the_reference_servers_fit_projection_and_allocation_stay_apart() {
        let log = include_str!("../../tests/data/llama-server/server.log");
        let b = parse(log);
        assert_eq!(
            b.projected.unwrap().rows,
            [host("Host", [296, 222, 49, 24]), host("CPU_REPACK", [12, 12, 0, 0])]
        );
        assert_eq!(
            b.allocated.unwrap().rows,
            [host("Host", [309, 235, 49, 24]), host("CPU_REPACK", [12, 12, 0, 0])]
        );
    }

    /// Tables printed in public threads, their layouts from 2025-09 on.
    #[test]
    fn every_published_layout_reads() {
        // ggml-org/llama.cpp pull 15860 (the first layout, at exit).
        let first = "llama_print_memory_breakdown: memory breakdown:      total   free     self   model   context   compute    unaccounted\n\
            llama_print_memory_breakdown:   - CUDA0 (RTX 4090):  24080 = 9436 + (14193 = 13169 +      38 +     985) +         451\n\
            llama_print_memory_breakdown:   - CPU (EPYC 7742):  515628              72 =     0 +      57 +      15\n";
        let log = format!("load_tensors:        CUDA0 model buffer size = 13169.00 MiB\n{first}");
        let b = parse(&log);
        let rows = b.allocated.unwrap().rows;
        assert_eq!(
            rows[0],
            gpu("CUDA0", "RTX 4090", [24080, 9436, 14193, 13169, 38, 985, 451])
        );
        assert_eq!(
            rows[1],
            BreakdownRow {
                description: Some("EPYC 7742".into()),
                total_mib: Some(515628),
                ..host("CPU", [72, 0, 57, 15])
            }
        );
        assert!(b.projected.is_none());
        // No load before it: a projection, not what the process holds.
        assert!(parse(first).allocated.is_none());

        // ggml-org/llama.cpp issue 19437: a fit's table with the wrapped
        // negative unaccounted figure of late 2025.
        let wrapped = "llama_params_fit_impl: getting device memory data for initial parameters:\n\
            llama_memory_breakdown_print: | memory breakdown [MiB]  | total   free     self   model   context   compute       unaccounted |\n\
            llama_memory_breakdown_print: |   - CUDA0 (GTX 1080 Ti) | 11165 = 8702 + (10001 =  9814 +     134 +      51) + 17592186036877 |\n\
            llama_memory_breakdown_print: |   - Host                |                   197 =   166 +       0 +      30                   |\n\
            llama_params_fit_impl: context size reduced from 262144 to 30000 -> need 6257 MiB less memory in total\n\
            llama_params_fit: fitting params to free memory took 1.96 seconds\n";
        let b = parse(wrapped);
        let rows = b.projected.unwrap().rows;
        assert_eq!(rows[0].unaccounted_mib, None);
        assert_eq!(rows[0].self_mib, 10001);
        assert_eq!(rows[1], host("Host", [197, 166, 0, 30]));
        assert!(b.allocated.is_none());

        // ollama/ollama pull 16031: two GPUs inside a fit, negative
        // unaccounted printed as such (2026).
        let two = "common_params_fit_impl: getting device memory data for initial parameters:\n\
            common_memory_breakdown_print: | memory breakdown [MiB] | total    free     self   model   context   compute    unaccounted |\n\
            common_memory_breakdown_print: |   - CUDA0 (RTX 5090)   | 32606 = 30991 + ( 4205 =     0 +       0 +    4205) +       -2590 |\n\
            common_memory_breakdown_print: |   - CUDA1 (RTX 3090)   | 24575 = 23332 + (17829 =  1177 +   15360 +    1292) +      -16586 |\n\
            common_memory_breakdown_print: |   - Host               |                  25094 =  1502 +   21504 +    2088                |\n\
            common_params_fit_impl: memory for test allocation by device:\n";
        let rows = parse(two).projected.unwrap().rows;
        assert_eq!(
            rows[0],
            gpu("CUDA0", "RTX 5090", [32606, 30991, 4205, 0, 0, 4205, -2590])
        );
        assert_eq!(
            rows[1],
            gpu("CUDA1", "RTX 3090", [24575, 23332, 17829, 1177, 15360, 1292, -16586])
        );
        assert_eq!(rows[2], host("Host", [25094, 1502, 21504, 2088]));
    }

    /// The recorded log twice, as a log file appended to by a restart, and
    /// then a third run with -fit off still loading: no table is its.
    #[test]
    fn a_restarted_server_never_shows_the_last_runs_tables() {
        let log = include_str!("../../tests/data/llama-server/server.log");
        let twice = format!("{log}{log}");
        assert_eq!(parse(&twice), parse(log));
        let loading = "llama_model_loader: loaded meta data with 33 key-value pairs and 236 tensors from /m.gguf\n\
            load_tensors:   CPU_Mapped model buffer size =   235.16 MiB\n";
        assert!(parse(&format!("{log}{loading}")).is_empty());
    }

    #[test]
    fn garbage_truncated_and_huge_input_never_panic() {
        for text in [
            "",
            "memory breakdown",
            "memory breakdown\n  - \n  - X | = |\n  - Y | 1 = 2 + 3 |\n",
            "memory breakdown\n  - CUDA0 (x | 99999999999999999999 = 1 + (1 = 1 + 1 + 1) + 1 |\n",
            "memory breakdown\n  - CUDA0 | -1 = 1 + (1 = 1 + -1 + 1) + 1 |\n",
        ] {
            let b = parse(text);
            assert!(b.allocated.is_none() && b.projected.is_none(), "{text:?}: {b:?}");
        }
        let many = format!("memory breakdown\n{}", "  - Host | 1 = 1 + 0 + 0 |\n".repeat(10_000));
        assert_eq!(parse(&many).projected.unwrap().rows.len(), MAX_ROWS);
        let long = format!("memory breakdown\n  - Host | 1 = 1 + 0 + 0 |{}\n", " ".repeat(MAX_LINE));
        assert!(parse(&long).is_empty());
    }
}
