//! Huawei Ascend NPUs through the driver's own tool, `npu-smi info`, run
//! with a deadline (a hung tool is killed, with its children, and the
//! sample says so) and read by a pure parser.
//!
//! `npu-smi info` prints one table of devices and one of processes, in box
//! drawing made of `|`, `+`, `-` and `=`. Its shape, across driver versions
//! (21.x to 26.x; the recorded outputs in tests/data/ascend/ and their
//! README say where each comes from):
//!
//! ```text
//! | npu-smi 24.1.rc1                 Version: 24.1.rc1                  |
//! | NPU   Name        | Health  | Power(W)  Temp(C)  Hugepages-Usage(page)|
//! | Chip              | Bus-Id  | AICore(%) Memory-Usage(MB) HBM-Usage(MB)|
//! | 0     910B3       | OK      | 93.6      40       0    / 0             |
//! | 0                 | 0000:C1:00.0 | 0    0    / 0     3161 / 65536     |
//! | NPU     Chip      | Process id | Process name | Process memory(MB) | ...
//! | 0       0         | 1712733    | python3      | 48954              |
//! ```
//!
//! Each NPU has a row of its own (id, name, health, power, temperature)
//! and one row a chip (chip id and, on 310P cards, a device id; bus id;
//! AI Core %, memory, HBM). A chip is a device here. Inference cards (310,
//! 310P) have no HBM column: their `Memory-Usage` is the device's memory;
//! on training cards (910) `Memory-Usage` is the control CPU's DDR and the
//! HBM is the device memory. `NA` is unknown. "MB" is 2^20 bytes (a 64 GiB
//! 910B3 shows 65536).
//!
//! `npu-smi info -t usages -i N` then gives, per NPU, one block of
//! `Key : value` lines a chip, each ending with `Chip ID : C` (the shape
//! of Huawei's own `npu-smi` sources, which print `"\t%-30s : %u\n"`):
//! from it the memory bandwidth in use (`HBM Bandwidth Usage Rate(%)`, or
//! `DDR Bandwidth Usage Rate(%)` on cards without HBM) becomes the
//! device's memory activity. Drivers without it leave that unknown.

use super::source::{Owner, Report, Round, Source};
use crate::snapshot::{Backend, BackendStatus, Device, GpuUsage};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// One chip, as `npu-smi info` lists it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chip {
    pub npu: u32,
    pub chip: u32,
    /// The chip's name as printed (`910B3`, `310P3`).
    pub name: String,
    pub health: String,
    pub bus_id: Option<String>,
    pub power_w: Option<f64>,
    pub temperature_c: Option<u32>,
    pub aicore_percent: Option<u32>,
    /// The device memory: HBM where the table has an HBM column, else
    /// `Memory-Usage`.
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
}

/// One process row: which chip, which PID, how much device memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpuProcess {
    pub npu: u32,
    pub chip: u32,
    pub pid: u32,
    pub memory_bytes: Option<u64>,
}

/// What one `npu-smi info` printed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Info {
    /// The `Version:` of the header (the driver's).
    pub version: Option<String>,
    pub chips: Vec<Chip>,
    pub processes: Vec<NpuProcess>,
    /// Whether the process table was there: without it the processes are
    /// unknown, not none.
    pub process_table: bool,
}

/// A number or `NA`.
fn number<T: std::str::FromStr>(token: &str) -> Option<T> {
    token.parse().ok()
}

/// Power in watts: finite, not negative.
fn watts(token: &str) -> Option<f64> {
    number::<f64>(token).filter(|w| w.is_finite() && *w >= 0.0)
}

fn mib(token: &str) -> Option<u64> {
    number::<u64>(token)?.checked_mul(MIB)
}

/// `a / b` pairs of a cell (`0    / 0`, `59356/ 65536`), in order, and the
/// tokens before the first pair.
fn split_pairs(cell: &str) -> (Vec<String>, Vec<(String, String)>) {
    let spaced = cell.replace('/', " / ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut lead = Vec::new();
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens.get(i + 1) == Some(&"/") && i + 2 < tokens.len() {
            pairs.push((tokens[i].to_string(), tokens[i + 2].to_string()));
            i += 3;
        } else {
            if pairs.is_empty() && tokens[i] != "/" {
                lead.push(tokens[i].to_string());
            }
            i += 1;
        }
    }
    (lead, pairs)
}

fn is_bus_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit() || b == b'.'))
}

/// The NPU a row of the device table opens: its id, name, health, power
/// and temperature.
struct NpuRow {
    npu: u32,
    name: String,
    health: String,
    power_w: Option<f64>,
    temperature_c: Option<u32>,
}

/// Reads `npu-smi info`. Never fails: what is not there is left out, and
/// the caller decides what an empty table means.
pub fn parse_info(text: &str) -> Info {
    #[derive(PartialEq)]
    enum Table {
        None,
        Devices,
        Processes,
    }
    let mut info = Info::default();
    let mut table = Table::None;
    let mut has_hbm = false;
    let mut npu: Option<NpuRow> = None;
    for line in text.lines() {
        let line = line.trim();
        let Some(inner) = line.strip_prefix('|') else {
            continue;
        };
        let cells: Vec<&str> = inner.trim_end_matches('|').split('|').map(str::trim).collect();
        let first = cells.first().copied().unwrap_or_default();
        if first.starts_with("npu-smi") {
            info.version = cells
                .iter()
                .find_map(|c| c.split("Version:").nth(1))
                .and_then(|v| v.split_whitespace().next())
                .map(str::to_string);
            continue;
        }
        // Headers say which table the rows below belong to.
        if first.starts_with("NPU") && cells.get(1).is_some_and(|c| c.starts_with("Process id")) {
            table = Table::Processes;
            info.process_table = true;
            continue;
        }
        if first.starts_with("NPU") && first.contains("Name") {
            table = Table::Devices;
            continue;
        }
        if first.starts_with("Chip") {
            has_hbm = cells.iter().any(|c| c.contains("HBM-Usage"));
            continue;
        }
        match table {
            Table::Devices if cells.len() >= 3 => {
                let ids: Vec<&str> = first.split_whitespace().collect();
                if is_bus_id(cells[1]) || cells[1] == "NA" {
                    // A chip of the NPU above.
                    let (Some(row), Some(chip)) = (&npu, ids.first().and_then(|c| number::<u32>(c))) else {
                        continue;
                    };
                    let (lead, pairs) = split_pairs(cells[2]);
                    let memory = if has_hbm { pairs.get(1) } else { pairs.first() };
                    let total = memory.and_then(|(_, t)| mib(t)).filter(|t| *t > 0);
                    info.chips.push(Chip {
                        npu: row.npu,
                        chip,
                        name: row.name.clone(),
                        health: row.health.clone(),
                        bus_id: is_bus_id(cells[1]).then(|| cells[1].to_string()),
                        power_w: row.power_w,
                        temperature_c: row.temperature_c,
                        aicore_percent: lead.first().and_then(|t| number(t)),
                        memory_used_bytes: total.and(memory.and_then(|(u, _)| mib(u))),
                        memory_total_bytes: total,
                    });
                } else if let [id, name, ..] = ids[..] {
                    let Some(id) = number::<u32>(id) else {
                        continue;
                    };
                    let (lead, _) = split_pairs(cells[2]);
                    npu = Some(NpuRow {
                        npu: id,
                        name: name.to_string(),
                        health: cells[1].to_string(),
                        power_w: lead.first().and_then(|t| watts(t)),
                        temperature_c: lead.get(1).and_then(|t| number(t)),
                    });
                }
            }
            Table::Processes if cells.len() >= 4 => {
                let ids: Vec<u32> = first.split_whitespace().filter_map(number).collect();
                let (Some(&npu), Some(pid)) = (ids.first(), number::<u32>(cells[1])) else {
                    continue;
                };
                info.processes.push(NpuProcess {
                    npu,
                    chip: ids.get(1).copied().unwrap_or(0),
                    pid,
                    memory_bytes: mib(cells[3]),
                });
            }
            _ => {}
        }
    }
    info
}

/// One chip's block of `npu-smi info -t usages`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChipUsages {
    pub chip: u32,
    pub hbm_bandwidth_percent: Option<u32>,
    pub ddr_bandwidth_percent: Option<u32>,
}

impl ChipUsages {
    /// How busy the device memory's bandwidth is: HBM where the chip has
    /// it (910B prints a constant 0 for DDR), else DDR.
    pub fn memory_activity_percent(&self) -> Option<u32> {
        self.hbm_bandwidth_percent.or(self.ddr_bandwidth_percent)
    }
}

/// Reads `npu-smi info -t usages -i N`: one block a chip, closed by its
/// `Chip ID` line. Lines that are not `Key : number` are passed over.
pub fn parse_usages(text: &str) -> Vec<ChipUsages> {
    let mut out = Vec::new();
    let mut block = ChipUsages::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "HBM Bandwidth Usage Rate(%)" => block.hbm_bandwidth_percent = number(value),
            "DDR Bandwidth Usage Rate(%)" => block.ddr_bandwidth_percent = number(value),
            "Chip ID" => {
                if let Some(chip) = number(value) {
                    block.chip = chip;
                    out.push(std::mem::take(&mut block));
                }
                block = ChipUsages::default();
            }
            _ => {}
        }
    }
    out
}

/// The devices and per-process entries of one reading, numbered from
/// `base`.
pub fn devices(info: &Info, base: u32) -> (Vec<Device>, Vec<(Owner, GpuUsage)>) {
    let mut devices = Vec::new();
    for (i, chip) in info.chips.iter().enumerate() {
        let name = if chip.name.starts_with("Ascend") {
            chip.name.clone()
        } else {
            format!("Ascend {}", chip.name)
        };
        let mut d = Device {
            index: base + i as u32,
            backend: "ascend".into(),
            vendor: "Huawei".into(),
            name: Some(name),
            pci_bus_id: chip.bus_id.clone(),
            driver_version: info.version.clone(),
            memory_total_bytes: chip.memory_total_bytes,
            memory_used_bytes: chip.memory_used_bytes,
            memory_free_bytes: chip
                .memory_total_bytes
                .zip(chip.memory_used_bytes)
                .and_then(|(t, u)| t.checked_sub(u)),
            gpu_util_percent: chip.aicore_percent,
            temperature_c: chip.temperature_c,
            power_w: chip.power_w,
            process_list_complete: info.process_table,
            ..Device::default()
        };
        d.notes.push(format!(
            "NPU {} chip {}: utilization is AI Core busy %; power and temperature are the card's",
            chip.npu, chip.chip
        ));
        if chip.health != "OK" {
            d.notes.push(format!("npu-smi health: {}", chip.health));
        }
        if !info.process_table {
            d.notes
                .push("npu-smi printed no process table: processes unknown".into());
        }
        devices.push(d);
    }
    let usage = info
        .processes
        .iter()
        .filter_map(|p| {
            let at = info.chips.iter().position(|c| c.npu == p.npu && c.chip == p.chip)?;
            Some((
                Owner::Local(p.pid),
                GpuUsage::memory_only(base + at as u32, p.memory_bytes, "ascend"),
            ))
        })
        .collect();
    (devices, usage)
}

/// How long `npu-smi info` may take; past it, it is killed.
pub const DEADLINE: Duration = Duration::from_secs(3);

/// The most of its output read.
const OUTPUT_CAP: u64 = 1 << 20;

/// The Ascend source: where `npu-smi` is, if anywhere.
pub struct AscendSource {
    npu_smi: Option<PathBuf>,
    deadline: Duration,
}

impl AscendSource {
    /// `GPUTASKMAN_NPU_SMI` names the tool; else it is looked for on PATH
    /// and where Huawei's driver installs it.
    pub fn open() -> AscendSource {
        let npu_smi = std::env::var_os("GPUTASKMAN_NPU_SMI").map(PathBuf::from).or_else(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain([PathBuf::from("/usr/local/sbin"), PathBuf::from("/usr/local/bin")])
                .map(|dir| dir.join("npu-smi"))
                .find(|p| p.is_file())
        });
        AscendSource {
            npu_smi,
            deadline: DEADLINE,
        }
    }

    /// Each NPU's `-t usages`, all at once (a box of eight cards would
    /// not fit eight calls one after another in the deadline) and within
    /// what is left of the sample's deadline: its memory bandwidth onto its
    /// chips' devices, or a note on them saying why not.
    fn add_usages(&self, npu_smi: &Path, info: &Info, devices: &mut [Device], started: Instant) {
        let mut npus: Vec<u32> = info.chips.iter().map(|c| c.npu).collect();
        npus.dedup();
        let left = self.deadline.saturating_sub(started.elapsed());
        let reads: Vec<(u32, Result<String, String>)> = std::thread::scope(|scope| {
            let calls: Vec<_> = npus
                .iter()
                .map(|&npu| {
                    scope.spawn(move || {
                        let id = npu.to_string();
                        if left.is_zero() {
                            return Err("not run: npu-smi info took the sample's deadline".to_string());
                        }
                        run::with_deadline(npu_smi, &["info", "-t", "usages", "-i", &id], left, OUTPUT_CAP)
                    })
                })
                .collect();
            npus.iter()
                .zip(calls)
                .map(|(&npu, call)| (npu, call.join().unwrap_or_else(|_| Err("the call panicked".into()))))
                .collect()
        });
        for (npu, read) in reads {
            let chips = info.chips.iter().zip(devices.iter_mut()).filter(|(c, _)| c.npu == npu);
            match read {
                Ok(text) => {
                    let usages = parse_usages(&text);
                    for (chip, d) in chips {
                        d.memory_activity_percent = usages
                            .iter()
                            .find(|u| u.chip == chip.chip)
                            .and_then(ChipUsages::memory_activity_percent);
                        if d.memory_activity_percent.is_some() {
                            d.notes.push(
                                "memory activity is npu-smi's memory bandwidth usage rate (HBM, or DDR without HBM)"
                                    .into(),
                            );
                        }
                    }
                }
                Err(e) => {
                    for (_, d) in chips {
                        d.notes.push(format!(
                            "memory bandwidth unknown: npu-smi info -t usages -i {npu}: {e}"
                        ));
                    }
                }
            }
        }
    }

    fn backend(status: BackendStatus, detail: String) -> Backend {
        Backend {
            name: "ascend".into(),
            status,
            detail,
        }
    }
}

impl Source for AscendSource {
    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        let Some(npu_smi) = &self.npu_smi else {
            return (
                Self::backend(BackendStatus::Unavailable, "npu-smi not found: no Ascend driver".into()),
                Report::default(),
            );
        };
        let started = Instant::now();
        let text = match run::with_deadline(npu_smi, &["info"], self.deadline, OUTPUT_CAP) {
            Ok(text) => text,
            Err(e) => return (Self::backend(BackendStatus::Error, e), Report::default()),
        };
        let info = parse_info(&text);
        if info.chips.is_empty() {
            return (
                Self::backend(
                    BackendStatus::Error,
                    "npu-smi info printed no device table: devices unknown".into(),
                ),
                Report::default(),
            );
        }
        let (mut devices, usage) = devices(&info, round.next_index());
        self.add_usages(npu_smi, &info, &mut devices, started);
        let detail = format!(
            "npu-smi {}: {} chip(s)",
            info.version.as_deref().unwrap_or("(version not printed)"),
            devices.len()
        );
        let mut report = Report {
            devices,
            usage,
            ..Report::default()
        };
        report.retain_device(round.only);
        (Self::backend(BackendStatus::Ok, detail), report)
    }
}

/// Running an outside tool that may hang.
pub mod run {
    use std::io::Read;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Runs `program args`, and gives its standard output (lossy, at most
    /// `cap` bytes) if it exits 0 within `deadline`. Past the deadline it is
    /// killed with everything it started (its own process group), and the
    /// error says so; a failure gives its exit status and the first line of
    /// what it printed on stderr.
    pub fn with_deadline(program: &Path, args: &[&str], deadline: Duration, cap: u64) -> Result<String, String> {
        let name = program.display();
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().map_err(|e| format!("{name}: {e}"))?;
        let started = Instant::now();
        // Each pipe is drained on a thread of its own, so a tool that fills
        // one never blocks on the other, and a hung one never blocks us.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            let (sender, bytes) = mpsc::channel();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(pipe) = pipe {
                    let _ = pipe.take(cap).read_to_end(&mut buf);
                }
                let _ = sender.send(buf);
            });
            bytes
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
        let left = || deadline.saturating_sub(started.elapsed());
        let output = stdout.recv_timeout(left()).ok().zip(stderr.recv_timeout(left()).ok());
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) if output.is_some() => break status,
                Err(e) => {
                    kill_group(&mut child);
                    return Err(format!("{name}: {e}"));
                }
                _ if left().is_zero() || output.is_none() => {
                    kill_group(&mut child);
                    return Err(format!(
                        "{name} did not answer within {} s: killed",
                        deadline.as_secs_f64()
                    ));
                }
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let (stdout, stderr) = output.unwrap_or_default();
        if !status.success() {
            let why = String::from_utf8_lossy(&stderr);
            let why = why
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .trim();
            return Err(format!("{name} failed ({status}): {why}"));
        }
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    /// Kills the child's process group (the tool and what it started), then
    /// reaps the child.
    fn kill_group(child: &mut std::process::Child) {
        #[cfg(unix)]
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) with a negative PID signals the process group
            // made for this child (process_group(0) above), nothing else.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(name: &str) -> Info {
        let path = format!("{}/tests/data/ascend/{name}", env!("CARGO_MANIFEST_DIR"));
        parse_info(&std::fs::read_to_string(path).unwrap())
    }

    #[test]
    fn a_910b3_of_driver_24_1() {
        let info = recorded("910b3-24.1.rc1.txt");
        assert_eq!(info.version.as_deref(), Some("24.1.rc1.b030"));
        assert_eq!(info.chips.len(), 2);
        let c = &info.chips[0];
        assert_eq!(
            (c.npu, c.chip, c.name.as_str(), c.health.as_str()),
            (0, 0, "910B3", "OK")
        );
        assert_eq!(c.bus_id.as_deref(), Some("0000:C1:00.0"));
        assert_eq!(c.power_w, Some(101.8));
        assert_eq!(c.temperature_c, Some(43));
        assert_eq!(c.aicore_percent, Some(37));
        assert_eq!(c.memory_used_bytes, Some(52314 * MIB));
        assert_eq!(c.memory_total_bytes, Some(65536 * MIB));
        assert_eq!(info.chips[1].memory_used_bytes, Some(3314 * MIB));
        assert!(info.process_table);
        assert_eq!(
            info.processes,
            [NpuProcess {
                npu: 0,
                chip: 0,
                pid: 1712733,
                memory_bytes: Some(48954 * MIB)
            }]
        );
    }

    #[test]
    fn a_910b4_of_driver_26_with_the_container_column() {
        let info = recorded("910b4-26.0.rc1.txt");
        assert_eq!(info.version.as_deref(), Some("26.0.rc1"));
        assert_eq!(info.chips.len(), 1);
        assert_eq!(info.chips[0].memory_total_bytes, Some(32768 * MIB));
        assert_eq!(info.chips[0].memory_used_bytes, Some(12871 * MIB));
        assert_eq!(info.chips[0].aicore_percent, Some(4));
        // The host PID, not the one in the container.
        assert_eq!(info.processes[0].pid, 1712733);
        assert_eq!(info.processes[0].memory_bytes, Some(9981 * MIB));
    }

    #[test]
    fn a_310p3_duo_has_two_chips_on_one_npu_and_no_hbm() {
        let info = recorded("310p3-23.0.0.txt");
        assert_eq!(info.chips.len(), 3);
        let ids: Vec<(u32, u32)> = info.chips.iter().map(|c| (c.npu, c.chip)).collect();
        assert_eq!(ids, [(0, 0), (0, 1), (1, 0)]);
        // Memory-Usage is the device's memory where there is no HBM.
        assert_eq!(info.chips[0].memory_used_bytes, Some(10474 * MIB));
        assert_eq!(info.chips[0].memory_total_bytes, Some(44280 * MIB));
        assert_eq!(info.chips[0].power_w, None, "NA is unknown");
        assert_eq!(info.chips[0].temperature_c, Some(45));
        assert_eq!(info.chips[2].health, "Warning");
        assert_eq!(info.chips[2].power_w, Some(15.4));
        assert_eq!(info.processes.len(), 2);
        assert_eq!(info.processes[1].chip, 1);
        assert_eq!(info.processes[1].memory_bytes, None, "NA is unknown, not 0");
        let (devices, usage) = devices(&info, 2);
        assert_eq!(devices.iter().map(|d| d.index).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(devices[0].name.as_deref(), Some("Ascend 310P3"));
        assert_eq!(devices[0].memory_free_bytes, Some((44280 - 10474) * MIB));
        assert!(devices[2].notes.iter().any(|n| n == "npu-smi health: Warning"));
        assert_eq!(usage.iter().map(|(_, u)| u.device).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn a_910a_counts_hbm_not_the_control_cpus_ddr_and_has_no_process_table() {
        let info = recorded("910a-22.0.2.txt");
        assert_eq!(info.chips.len(), 1);
        assert_eq!(info.chips[0].memory_used_bytes, Some(0), "a measured 0 stays 0");
        assert_eq!(info.chips[0].memory_total_bytes, Some(32768 * MIB));
        assert!(!info.process_table);
        let (devices, _) = devices(&info, 0);
        assert!(
            !devices[0].process_list_complete,
            "no table: processes unknown, not none"
        );
    }

    #[test]
    fn usages_blocks_close_at_their_chip_id() {
        let path = format!(
            "{}/tests/data/ascend/310p3-23.0.0.usages-0.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let usages = parse_usages(&std::fs::read_to_string(path).unwrap());
        assert_eq!(usages.len(), 2);
        assert_eq!((usages[0].chip, usages[0].memory_activity_percent()), (0, Some(51)));
        assert_eq!((usages[1].chip, usages[1].memory_activity_percent()), (1, Some(3)));
        // HBM first: a 910B prints its DDR bandwidth as a constant 0.
        let hbm = parse_usages("DDR Bandwidth Usage Rate(%) : 0\nHBM Bandwidth Usage Rate(%) : 41\nChip ID : 0\n");
        assert_eq!(hbm[0].memory_activity_percent(), Some(41));
        // A block without its Chip ID, or an NA, gives nothing made up.
        assert!(parse_usages("HBM Bandwidth Usage Rate(%) : 41\n").is_empty());
        let na = parse_usages("HBM Bandwidth Usage Rate(%) : NA\nChip ID : 0\n");
        assert_eq!(na[0].memory_activity_percent(), None);
    }

    #[test]
    fn garbage_gives_nothing_and_never_panics() {
        for text in [
            "",
            "|",
            "||||",
            "| NPU Name |\n| 0 |",
            "| NPU Name | x | y |\n| 4294967296 910 | OK | 1 2 |\n| 0 | 0000:00:00.0 | / / / 1 / |",
        ] {
            let info = parse_info(text);
            assert!(info.chips.is_empty(), "{text:?}: {info:?}");
        }
    }

    #[test]
    fn pairs_and_lead_tokens() {
        let (lead, pairs) = split_pairs("0           0    / 0          59356/ 65536");
        assert_eq!(lead, ["0"]);
        assert_eq!(pairs, [("0".into(), "0".into()), ("59356".into(), "65536".into())]);
        let (lead, pairs) = split_pairs("NA  45  0 / 0");
        assert_eq!(lead, ["NA", "45"]);
        assert_eq!(pairs.len(), 1);
        assert!(is_bus_id("0000:C1:00.0"));
        assert!(!is_bus_id("OK"));
    }
}
