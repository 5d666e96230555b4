//! NVIDIA Jetson boards (Xavier, Orin): the integrated GPU that NVML does
//! not see (the `nvgpu` driver has no NVML), read from the Tegra sysfs.
//!
//! - **Device**: the GPU's devfreq node (`/sys/class/devfreq/17000000.ga10b`
//!   on Orin, `17000000.gv11b` on Xavier, `17000000.gpu` on JetPack 6):
//!   `cur_freq` and `max_freq` in Hz, and its platform device's `load`, the
//!   busy share in tenths of a percent (0..=1000). The board name is the
//!   device tree's `model` (`/proc/device-tree` is a link to
//!   `/sys/firmware/devicetree/base`), NUL-terminated; its `compatible`
//!   naming `nvidia,tegra194` / `nvidia,tegra234` is what makes it a Jetson.
//! - **Memory**: unified, as on Apple Silicon: the GPU works in system RAM,
//!   so the total is `MemTotal` of /proc/meminfo, used is what nvmap (the
//!   Tegra memory manager every GPU buffer goes through) has handed out, its
//!   client list's `total`, and free and spill are n/a: RAM the CPU has not
//!   taken is not "free for the GPU", and nothing spills.
//! - **Per process**: nvmap's client list in debugfs,
//!   `/sys/kernel/debug/nvmap/iovmm/clients`, one line a client
//!   (`CLIENT PROCESS PID SIZE`, the size in KiB with a `K`), then `total`.
//!   debugfs is root-only and not always mounted; then the processes are
//!   unknown, said in a note, never "none".
//! - **Power**: the INA3221 monitors' hwmon nodes (`name` = `ina3221`),
//!   channel N's `inN_label` (`VDD_GPU_SOC`, `VDD_CPU_CV`, `VIN_SYS_5V0` on
//!   an AGX Orin), `inN_input` in mV and `currN_input` in mA; on JetPack 4
//!   the `ina3221x` IIO nodes (`rail_name_N`, `in_powerN_input` in mW:
//!   `POM_5V_GPU` on a Nano). The GPU's power is the rail whose label names
//!   the GPU, the others are noted.
//! - **Temperature**: the thermal zone whose `type` is the GPU's
//!   (`gpu-thermal` on Orin, `GPU-therm` on Xavier), in millidegrees.
//!
//! Paths and formats: NVIDIA's Jetson Linux Developer Guide (power and
//! thermal chapters), the nvmap driver's debugfs code in NVIDIA's L4T
//! kernel sources (`nvmap_dev.c`), and the layouts other Jetson monitors
//! read; tests/data/jetson/README.md lists them.

use super::drm::sysfs::{parse_u64, read_text};
use super::source::{Owner, Report, Round, Source};
use crate::snapshot::{Backend, BackendStatus, Clocks, Device, GpuUsage};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The devfreq names of Tegra GPUs: the address and the GPU's own name
/// (gv11b Xavier, ga10b Orin, gp10b TX2, gm20b Nano/TX1) or, from JetPack 6,
/// just `gpu`.
const GPU_DEVFREQ: &[&str] = &["ga10b", "gv11b", "gp10b", "gm20b", "gpu"];

/// The most bytes of the nvmap client list read: one line a client, a few
/// hundred clients on a busy board.
const CLIENTS_CAP: u64 = 1 << 20;

/// The debugfs file with nvmap's clients, under the /sys root.
const CLIENTS: &str = "kernel/debug/nvmap/iovmm/clients";

/// One line of nvmap's client list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmapClient {
    /// The client's name (`user` for processes).
    pub client: String,
    /// The process's comm as the kernel printed it (may hold spaces).
    pub process: String,
    pub pid: u32,
    pub bytes: u64,
}

/// nvmap's client list: the clients, and the `total` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmapClients {
    pub clients: Vec<NvmapClient>,
    pub total_bytes: Option<u64>,
}

/// A size as nvmap prints it: KiB with a `K` (also `M`, `G` and plain
/// bytes, which older kernels used); `None` when it is not one, or does not
/// fit in 64 bits.
fn nvmap_size(token: &str) -> Option<u64> {
    let (digits, shift) = match token.as_bytes().last()? {
        b'K' | b'k' => (&token[..token.len() - 1], 10),
        b'M' | b'm' => (&token[..token.len() - 1], 20),
        b'G' | b'g' => (&token[..token.len() - 1], 30),
        _ => (token, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Reads nvmap's client list. The kernel prints each client as
/// `%-18s %18s %8u` (name, comm, PID) and then the size, so the fields are
/// taken from both ends: the comm, between them, may hold spaces. Lines
/// that are not a client (the header, a kernel client with PID 0, damage)
/// are skipped.
pub fn parse_clients(text: &str) -> NvmapClients {
    let mut out = NvmapClients::default();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(first), Some(last)) = (fields.first(), fields.last()) else {
            continue;
        };
        if *first == "total" {
            out.total_bytes = nvmap_size(last);
            continue;
        }
        if fields.len() < 3 {
            continue;
        }
        let (Some(bytes), Ok(pid)) = (nvmap_size(last), fields[fields.len() - 2].parse::<u32>()) else {
            continue;
        };
        if pid == 0 {
            continue;
        }
        out.clients.push(NvmapClient {
            client: first.to_string(),
            process: fields[1..fields.len() - 2].join(" "),
            pid,
            bytes,
        });
    }
    out
}

/// `MemTotal` of /proc/meminfo, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The device tree's `model`: NUL-terminated, maybe with more strings after.
pub fn board_model(raw: &str) -> Option<String> {
    let model = raw.split('\0').next()?.trim();
    (!model.is_empty()).then(|| model.to_string())
}

/// Whether the device tree's `compatible` (NUL-separated strings, most
/// specific first: `nvidia,p3701-0000`, `nvidia,tegra234`) names a Tegra.
pub fn is_tegra(compatible: &str) -> bool {
    compatible.split('\0').any(|c| c.trim().starts_with("nvidia,tegra"))
}

/// One INA3221 channel: its label and power, where both readings exist.
#[derive(Debug, Clone, PartialEq)]
pub struct Rail {
    pub label: String,
    pub watts: Option<f64>,
}

/// Power from a channel's millivolts and milliamperes.
pub fn rail_watts(millivolts: Option<u64>, milliamps: Option<u64>) -> Option<f64> {
    let (mv, ma) = (millivolts?, milliamps?);
    Some(mv as f64 * ma as f64 / 1e6)
}

/// The rail that powers the GPU: the one whose label says GPU
/// (`VDD_GPU_SOC` on AGX Orin, `VDD_CPU_GPU_CV` on Orin NX/Nano, `GPU` on
/// Xavier, `POM_5V_GPU` on a Nano).
pub fn gpu_rail(rails: &[Rail]) -> Option<&Rail> {
    rails.iter().find(|r| r.label.to_ascii_uppercase().contains("GPU"))
}

/// The Tegra GPU's devfreq directory, if this machine has one.
fn find_gpu(sys_root: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(sys_root.join("class/devfreq")).ok()?;
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.split_once('.').is_some_and(|(_, gpu)| GPU_DEVFREQ.contains(&gpu))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Directories `<dir>/<prefix>N`, in number order.
fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// A sysfs file's text; `None` when absent or unreadable (a value that is
/// not there is unknown, and the board keeps being read).
fn text(path: &Path) -> Option<String> {
    read_text(path).ok().flatten()
}

fn num(path: &Path) -> Option<u64> {
    text(path).and_then(|t| parse_u64(&t))
}

/// The INA3221 channels of every monitor: the hwmon nodes of L4T 34 and
/// later, then the IIO nodes of the `ina3221x` driver of L4T 32 (JetPack
/// 4: Nano, TX2, Xavier), whose channel N is `rail_name_N` with
/// `in_powerN_input` in mW.
fn rails(sys_root: &Path) -> Vec<Rail> {
    let mut out = Vec::new();
    for hwmon in numbered(&sys_root.join("class/hwmon"), "hwmon") {
        if text(&hwmon.join("name")).as_deref() != Some("ina3221") {
            continue;
        }
        for channel in 1..=3 {
            // `NC`: a channel not connected to anything.
            let Some(label) = text(&hwmon.join(format!("in{channel}_label"))).filter(|l| l != "NC") else {
                continue;
            };
            let watts = rail_watts(
                num(&hwmon.join(format!("in{channel}_input"))),
                num(&hwmon.join(format!("curr{channel}_input"))),
            );
            out.push(Rail { label, watts });
        }
    }
    let mut monitors: Vec<PathBuf> = std::fs::read_dir(sys_root.join("bus/i2c/drivers/ina3221x"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    monitors.sort();
    for iio in monitors.iter().flat_map(|m| numbered(m, "iio:device")) {
        for channel in 0..3 {
            let Some(label) = text(&iio.join(format!("rail_name_{channel}"))).filter(|l| l != "NC") else {
                continue;
            };
            let watts = num(&iio.join(format!("in_power{channel}_input"))).map(|mw| mw as f64 / 1e3);
            out.push(Rail { label, watts });
        }
    }
    out
}

/// The GPU's thermal zone, in degrees.
fn gpu_temperature(sys_root: &Path) -> Option<u32> {
    numbered(&sys_root.join("class/thermal"), "thermal_zone")
        .into_iter()
        .find(|zone| text(&zone.join("type")).is_some_and(|t| t.to_ascii_lowercase().starts_with("gpu")))
        .and_then(|zone| text(&zone.join("temp")))
        // Millidegrees, signed: a zone below freezing is not a GPU reading.
        .and_then(|t| t.trim().parse::<i64>().ok())
        .and_then(|milli| u32::try_from((milli + 500) / 1000).ok())
}

/// What the nvmap client list said, or why it could not be read.
fn read_clients(sys_root: &Path) -> Result<NvmapClients, String> {
    let debugfs = sys_root.join("kernel/debug");
    match std::fs::read_dir(&debugfs).map(|mut entries| entries.next().is_none()) {
        Ok(true) => {
            return Err(format!(
                "debugfs is not mounted at {}: per-process GPU memory unknown (as root: mount -t debugfs none {})",
                debugfs.display(),
                debugfs.display()
            ))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(format!(
                "no {}: debugfs is not there, per-process GPU memory unknown",
                debugfs.display()
            ))
        }
        _ => {}
    }
    let path = sys_root.join(CLIENTS);
    match gguf::regular_file::read_capped(&path, CLIENTS_CAP) {
        Ok(bytes) => {
            let list = parse_clients(&String::from_utf8_lossy(&bytes));
            // Even an idle board lists its `total`: a list with neither
            // clients nor total is a format this reader does not know, not
            // "no processes".
            if list.clients.is_empty() && list.total_bytes.is_none() {
                return Err(format!(
                    "{} holds no client list this reader knows: per-process GPU memory unknown",
                    path.display()
                ));
            }
            Ok(list)
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => Err(format!(
            "{} is not readable (debugfs is root-only): per-process GPU memory unknown",
            path.display()
        )),
        Err(e) => Err(format!("{}: {e}: per-process GPU memory unknown", path.display())),
    }
}

/// The Jetson source: the roots it reads (recorded trees in tests).
pub struct JetsonSource {
    proc_root: PathBuf,
    sys_root: PathBuf,
}

impl JetsonSource {
    pub fn new(proc_root: PathBuf, sys_root: PathBuf) -> JetsonSource {
        JetsonSource { proc_root, sys_root }
    }

    /// The board's GPU and its processes, numbered from `index`; `None`
    /// when this is not a Jetson.
    pub fn sample(&self, index: u32) -> Option<(Device, Vec<(Owner, GpuUsage)>)> {
        let sys = &self.sys_root;
        // Other SoCs name their GPU's devfreq node `ADDR.gpu` too (an
        // RK3588's Mali is `fb000000.gpu`): only a Tegra board is a Jetson.
        let compatible = text(&sys.join("firmware/devicetree/base/compatible"))?;
        if !is_tegra(&compatible) {
            return None;
        }
        let devfreq = find_gpu(sys)?;
        let model = text(&sys.join("firmware/devicetree/base/model")).and_then(|m| board_model(&m));
        let gpu_name = devfreq
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split_once('.'))
            .map(|(_, g)| g.to_string())
            .filter(|g| g != "gpu");
        let mut d = Device {
            index,
            backend: "jetson".into(),
            vendor: "NVIDIA".into(),
            name: Some(match (model, gpu_name) {
                (Some(m), Some(g)) => format!("{m} (integrated GPU {g})"),
                (Some(m), None) => format!("{m} (integrated GPU)"),
                (None, Some(g)) => format!("Jetson integrated GPU {g}"),
                (None, None) => "Jetson integrated GPU".into(),
            }),
            ..Device::default()
        };
        // `load` is in tenths of a percent; over 1000 is left to the
        // plausibility check (shown as out of range, not clamped).
        d.gpu_util_percent =
            num(&devfreq.join("device/load")).map(|l| u32::try_from(l.saturating_add(5) / 10).unwrap_or(u32::MAX));
        let mhz = |file: &str| num(&devfreq.join(file)).map(|hz| u32::try_from(hz / 1_000_000).unwrap_or(u32::MAX));
        let (cur, max) = (mhz("cur_freq"), mhz("max_freq"));
        if cur.is_some() || max.is_some() {
            d.clocks = Some(Clocks {
                graphics_mhz: cur,
                graphics_max_mhz: max,
                ..Clocks::default()
            });
        }
        d.temperature_c = gpu_temperature(sys);
        let rails = rails(sys);
        if let Some(rail) = gpu_rail(&rails) {
            d.power_w = rail.watts;
            if rail.label != "GPU" {
                d.notes.push(format!(
                    "power is the INA3221 rail {}: the GPU and whatever else that rail feeds",
                    rail.label
                ));
            }
        }
        let others: Vec<String> = rails
            .iter()
            .filter(|r| gpu_rail(&rails).is_none_or(|g| g.label != r.label))
            .map(|r| match r.watts {
                Some(w) => format!("{} {w:.1} W", r.label),
                None => format!("{} n/a", r.label),
            })
            .collect();
        if !others.is_empty() {
            d.notes.push(format!("other rails: {}", others.join(", ")));
        }
        let meminfo = gguf::regular_file::read_capped(&self.proc_root.join("meminfo"), 1 << 16)
            .ok()
            .and_then(|b| mem_total(&String::from_utf8_lossy(&b)));
        d.memory_total_bytes = meminfo;
        let mut usage = Vec::new();
        match read_clients(sys) {
            Ok(list) => {
                d.process_list_complete = true;
                d.memory_used_bytes = list.total_bytes;
                for c in list.clients {
                    usage.push((
                        Owner::Local(c.pid),
                        GpuUsage::memory_only(index, Some(c.bytes), "jetson"),
                    ));
                }
            }
            Err(why) => d.notes.push(why),
        }
        d.notes.push(format!(
            "unified memory: the GPU shares system RAM ({} in all); used is what nvmap has handed out \
             (GPU and multimedia buffers); free and spill are n/a: RAM the CPU has not taken is not free \
             for the GPU, and nothing spills",
            crate::units::bytes(d.memory_total_bytes)
        ));
        Some((d, usage))
    }
}

impl Source for JetsonSource {
    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        let Some((device, usage)) = self.sample(round.next_index()) else {
            return (
                Backend {
                    name: "jetson".into(),
                    status: BackendStatus::Unavailable,
                    detail: "not a Jetson: no Tegra device tree with a GPU devfreq node".into(),
                },
                Report::default(),
            );
        };
        let detail = match (&device.name, device.process_list_complete) {
            (Some(name), true) => format!("{name}: nvmap client list read"),
            (Some(name), false) => format!("{name}: no per-process GPU memory (see the device's notes)"),
            (None, _) => "Jetson GPU".into(),
        };
        let mut report = Report {
            devices: vec![device],
            usage,
            ..Report::default()
        };
        report.retain_device(round.only);
        (
            Backend {
                name: "jetson".into(),
                status: BackendStatus::Ok,
                detail,
            },
            report,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list as nvmap_dev.c prints it: `%-18s %18s %8u` then the size.
    const CLIENTS_TEXT: &str = "\
CLIENT                        PROCESS      PID        SIZE
user                      gnome-shell     1960     40260K
user                         Xorg         1783     83204K
user                   llama server       4242   1048576K
nvmap-kernel                 kernel          0     16384K
total                                              1188424K
";

    #[test]
    fn clients_are_read_from_both_ends_and_kernel_clients_are_left_out() {
        let list = parse_clients(CLIENTS_TEXT);
        assert_eq!(list.clients.len(), 3, "{list:?}");
        assert_eq!(list.clients[0].process, "gnome-shell");
        assert_eq!(list.clients[0].pid, 1960);
        assert_eq!(list.clients[0].bytes, 40260 * 1024);
        assert_eq!(list.clients[2].process, "llama server");
        assert_eq!(list.clients[2].bytes, 1 << 30);
        assert_eq!(list.total_bytes, Some(1188424 * 1024));
    }

    #[test]
    fn damaged_sizes_are_not_facts() {
        let list = parse_clients("user x 12 K\nuser y 13 99999999999999999999K\nuser z 14 12Q\ntotal\n");
        assert!(list.clients.is_empty(), "{list:?}");
        assert_eq!(list.total_bytes, None);
        assert_eq!(nvmap_size("18446744073709551615K"), None);
        assert_eq!(nvmap_size("3M"), Some(3 << 20));
        assert_eq!(nvmap_size("512"), Some(512));
    }

    #[test]
    fn meminfo_model_and_rails() {
        assert_eq!(
            mem_total("MemTotal:       31697608 kB\nMemFree: 1 kB\n"),
            Some(31697608 * 1024)
        );
        assert_eq!(mem_total("MemTotal: lots\n"), None);
        assert_eq!(
            board_model("NVIDIA Jetson AGX Orin Developer Kit\0"),
            Some("NVIDIA Jetson AGX Orin Developer Kit".into())
        );
        assert_eq!(board_model("\0"), None);
        assert_eq!(rail_watts(Some(5080), Some(960)), Some(4.8768));
        assert_eq!(rail_watts(None, Some(960)), None);
        let rails = [
            Rail {
                label: "VDD_CPU_CV".into(),
                watts: Some(1.0),
            },
            Rail {
                label: "VDD_GPU_SOC".into(),
                watts: Some(4.0),
            },
        ];
        assert_eq!(gpu_rail(&rails).unwrap().label, "VDD_GPU_SOC");
        assert!(gpu_rail(&rails[..1]).is_none());
        assert!(is_tegra(
            "nvidia,p3737-0000+p3701-0000\0nvidia,p3701-0000\0nvidia,tegra234\0"
        ));
        assert!(!is_tegra("rockchip,rk3588-evb1-v10\0rockchip,rk3588\0"));
    }

    #[test]
    fn another_socs_gpu_devfreq_node_is_no_jetson() {
        // An RK3588: its Mali's devfreq node is `fb000000.gpu`, as a
        // JetPack 6 Orin's is `17000000.gpu`.
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        let node = sys.join("class/devfreq/fb000000.gpu");
        std::fs::create_dir_all(node.join("device")).unwrap();
        std::fs::write(node.join("cur_freq"), "300000000\n").unwrap();
        std::fs::write(node.join("device/load"), "500\n").unwrap();
        let base = sys.join("firmware/devicetree/base");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("compatible"), "rockchip,rk3588\0").unwrap();
        let source = JetsonSource::new(dir.path().join("proc"), sys.clone());
        assert!(source.sample(0).is_none());
        std::fs::write(base.join("compatible"), "nvidia,p3767-0005\0nvidia,tegra234\0").unwrap();
        let (device, _) = source.sample(0).expect("a Tegra board");
        assert_eq!(device.gpu_util_percent, Some(50));
    }
}
