//! DRM devices from /sys/class/drm and what their drivers publish in sysfs.
//!
//! Layout (real): `/sys/class/drm/card0` and `/sys/class/drm/renderD128`
//! are links into the device tree; each has a `device` link to the device
//! (a PCI function such as `0000:08:00.0`, or a platform device such as
//! `fb000000.gpu`), whose `driver` link names the driver and whose
//! `vendor`/`device` files hold the PCI ids. Connectors (`card0-DP-1`) and
//! `version` are skipped.

use crate::snapshot::{Clocks, Device, Pcie, QueryError};
use std::collections::BTreeMap;
use std::io::{BufRead, ErrorKind};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One DRM device with its nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct DrmDevice {
    /// The PCI address, or the device's sysfs name when it is not PCI.
    pub key: String,
    pub pci: Option<String>,
    pub driver: Option<String>,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    /// `card0`, ... and `renderD128`, ... (the names under /dev/dri).
    pub cards: Vec<String>,
    pub renders: Vec<String>,
    /// The device's own sysfs directory (links resolved).
    pub dir: PathBuf,
    /// `class/drm/cardN` (i915 puts its frequency files there).
    pub card_dir: Option<PathBuf>,
    /// Its memory is system RAM: an APU, an Intel iGPU, a SoC GPU.
    pub integrated: bool,
    /// Why `integrated` was decided, for the device note.
    pub integrated_because: Option<&'static str>,
}

/// The number after `card` / `renderD` when the whole name is a node.
fn node_number(name: &str) -> Option<(bool, u32)> {
    let (card, digits) = match name.strip_prefix("card") {
        Some(d) => (true, d),
        None => (false, name.strip_prefix("renderD")?),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((card, digits.parse().ok()?))
}

/// True when /sys/class/drm has a card or render node.
pub fn any_node(sys_root: &Path) -> bool {
    std::fs::read_dir(sys_root.join("class/drm"))
        .map(|dir| {
            dir.flatten()
                .any(|e| e.file_name().to_str().and_then(node_number).is_some())
        })
        .unwrap_or(false)
}

/// Every DRM device, in card order. A missing /sys/class/drm is no device;
/// one that cannot be read is an error.
pub fn discover(sys_root: &Path) -> Result<Vec<DrmDevice>, String> {
    let class = sys_root.join("class/drm");
    let entries = match std::fs::read_dir(&class) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", class.display())),
    };
    let mut nodes: Vec<(bool, u32, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let (card, n) = node_number(&name)?;
            Some((card, n, name))
        })
        .collect();
    // Cards first, in number order, so a device's place follows its card.
    nodes.sort_by_key(|(card, n, _)| (!*card, *n));
    let mut devices: Vec<DrmDevice> = Vec::new();
    for (card, _, name) in nodes {
        let node_dir = class.join(&name);
        let Ok(dir) = std::fs::canonicalize(node_dir.join("device")) else {
            continue;
        };
        let i = match devices.iter().position(|d| d.dir == dir) {
            Some(i) => i,
            None => {
                devices.push(describe(dir));
                devices.len() - 1
            }
        };
        let d = &mut devices[i];
        if card {
            d.card_dir.get_or_insert(node_dir);
            d.cards.push(name);
        } else {
            d.renders.push(name);
        }
    }
    Ok(devices)
}

fn describe(dir: PathBuf) -> DrmDevice {
    let key = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pci = is_pci_address(&key).then(|| key.to_ascii_lowercase());
    let driver = std::fs::read_link(dir.join("driver"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()));
    let id = |file: &str| {
        read_text(&dir.join(file))
            .ok()
            .flatten()
            .and_then(|t| parse_u64(&t))
            .map(|v| v as u16)
    };
    let (vendor_id, device_id) = (id("vendor"), id("device"));
    let (integrated, integrated_because) = integrated(&dir, pci.as_deref(), vendor_id, driver.as_deref());
    DrmDevice {
        key,
        pci,
        driver,
        vendor_id,
        device_id,
        cards: Vec::new(),
        renders: Vec::new(),
        dir,
        card_dir: None,
        integrated,
        integrated_because,
    }
}

/// Integrated GPUs keep everything in system RAM. Signs, strongest first:
/// not a PCI device (a SoC GPU); Intel's iGPU, always at 00:02.0; an
/// amdgpu device with no VRAM vendor (APUs have no VRAM chips: amdgpu hides
/// `mem_info_vram_vendor` or says `unknown`).
fn integrated(
    dir: &Path,
    pci: Option<&str>,
    vendor: Option<u16>,
    driver: Option<&str>,
) -> (bool, Option<&'static str>) {
    let Some(pci) = pci else {
        return (true, Some("a SoC GPU (not on PCI)"));
    };
    if vendor == Some(0x8086) && pci.ends_with(":00:02.0") {
        return (true, Some("Intel's integrated GPU (PCI 00:02.0)"));
    }
    if driver == Some("amdgpu") && dir.join("mem_info_vram_total").exists() {
        match read_text(&dir.join("mem_info_vram_vendor")) {
            Ok(None) => return (true, Some("an AMD APU (no VRAM vendor)")),
            Ok(Some(v)) if v.eq_ignore_ascii_case("unknown") => return (true, Some("an AMD APU (no VRAM vendor)")),
            _ => {}
        }
    }
    (false, None)
}

fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && [0, 1, 2, 3, 5, 6, 8, 9, 11].iter().all(|&i| b[i].is_ascii_hexdigit())
}

/// `0000:08:00.0` from any spelling (NVML writes `00000000:08:00.0`).
pub fn normalize_pci(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    match s.split_once(':') {
        Some((domain, rest)) if rest.len() == 7 => match u32::from_str_radix(domain, 16) {
            Ok(d) => format!("{d:04x}:{rest}"),
            Err(_) => s,
        },
        _ => s,
    }
}

/// The vendor's name from its PCI id, or from the driver off PCI.
pub fn vendor_name(vendor_id: Option<u16>, driver: Option<&str>) -> String {
    let by_id = match vendor_id {
        Some(0x1002) | Some(0x1022) => Some("AMD"),
        Some(0x8086) => Some("Intel"),
        Some(0x10de) => Some("NVIDIA"),
        Some(0x1af4) => Some("Red Hat (virtio)"),
        Some(0x15ad) => Some("VMware"),
        Some(0x1234) => Some("QEMU"),
        Some(0x1a03) => Some("ASPEED"),
        Some(0x102b) => Some("Matrox"),
        Some(0x1414) => Some("Microsoft"),
        Some(0x80ee) => Some("VirtualBox"),
        Some(0x5143) => Some("Qualcomm"),
        Some(0x1ed5) => Some("Moore Threads"),
        _ => None,
    };
    if let Some(name) = by_id {
        return name.into();
    }
    let by_driver = match driver {
        Some("panfrost" | "panthor" | "lima") => Some("Arm"),
        Some("msm") => Some("Qualcomm"),
        Some("v3d" | "vc4") => Some("Broadcom"),
        Some("etnaviv") => Some("Vivante"),
        Some("asahi") => Some("Apple"),
        Some("powervr" | "pvr") => Some("Imagination"),
        Some("tegra" | "nouveau") => Some("NVIDIA"),
        _ => None,
    };
    match (by_driver, vendor_id) {
        (Some(name), _) => name.into(),
        (None, Some(id)) => format!("unknown (PCI vendor {id:04x})"),
        (None, None) => "unknown".into(),
    }
}

/// Drivers that drive a display and nothing else: listed, with a note.
pub fn display_only(driver: &str) -> bool {
    matches!(
        driver,
        "simpledrm"
            | "efidrm"
            | "vesadrm"
            | "ofdrm"
            | "ast"
            | "mgag200"
            | "bochs-drm"
            | "bochs"
            | "cirrus"
            | "cirrus-qemu"
            | "hyperv_drm"
            | "vboxvideo"
            | "udl"
            | "gm12u320"
            | "gud"
    )
}

/// The device's name from pci.ids (`/usr/share/misc/pci.ids` and the like):
/// read as a stream, stopping once the vendor's section is past.
pub fn pci_ids_name(files: &[PathBuf], vendor: u16, device: u16) -> Option<String> {
    let vendor_tag = format!("{vendor:04x}");
    let device_tag = format!("{device:04x}");
    for path in files {
        let Ok(file) = std::fs::File::open(path) else {
            continue;
        };
        let mut in_vendor = false;
        for line in std::io::BufReader::new(file).split(b'\n').map_while(Result::ok) {
            let Ok(line) = std::str::from_utf8(&line) else {
                continue;
            };
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            if !line.starts_with('\t') {
                if in_vendor {
                    return None;
                }
                in_vendor = line.starts_with(&vendor_tag) && line[4..].starts_with(' ');
                continue;
            }
            if in_vendor && !line.starts_with("\t\t") {
                let rest = &line[1..];
                if rest.starts_with(&device_tag) && rest.get(4..5) == Some(" ") {
                    return Some(rest[4..].trim().to_string()).filter(|n| !n.is_empty());
                }
            }
        }
    }
    None
}

/// A sysfs file's text, trimmed; `None` when the file does not exist or the
/// driver declines to answer (not supported on this chip, device asleep).
pub fn read_text(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).trim().to_string())),
        Err(e) if quiet(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(super) fn quiet(e: &std::io::Error) -> bool {
    // ENOENT, EPERM, EINVAL, ENODEV, EBUSY, ENODATA, EOPNOTSUPP: the
    // driver has nothing to say here, which is not a fault.
    e.kind() == ErrorKind::NotFound || matches!(e.raw_os_error(), Some(1 | 16 | 19 | 22 | 61 | 95))
}

/// hwmon millidegrees, rounded to °C; None past what a u32 holds.
pub(super) fn celsius(milli: u64) -> Option<u32> {
    u32::try_from(milli.checked_add(500)? / 1000).ok()
}

/// A decimal or `0x` hexadecimal number.
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Reads numbers and records real failures as query errors.
pub(super) struct Reader<'a> {
    pub(super) errors: &'a mut Vec<QueryError>,
}

impl Reader<'_> {
    pub(super) fn text(&mut self, path: &Path) -> Option<String> {
        match read_text(path) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push(QueryError {
                    query: path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    message: e.to_string(),
                });
                None
            }
        }
    }

    pub(super) fn num(&mut self, path: &Path) -> Option<u64> {
        self.text(path).and_then(|t| parse_u64(&t))
    }
}

/// What the previous sample read, for figures that need two readings.
#[derive(Debug, Clone, Copy)]
pub struct EnergyReading {
    pub at: Duration,
    pub microjoules: u64,
}

/// A device's sensors were read (it was awake), with the hwmon directory
/// they came from where it has one.
pub struct Awake {
    pub hwmon: Option<Hwmon>,
}

/// The device's first hwmon directory, and which of its `temp<N>` sensors
/// the temperature was read from.
pub struct Hwmon {
    pub dir: PathBuf,
    pub temperature_sensor: Option<u32>,
}

/// Fills `device` with what sysfs says now. `energy` carries the previous
/// energy reading of this device, for power from energy counters. None
/// when the device is asleep and its sensors were left alone.
pub fn read_values(
    dev: &DrmDevice,
    device: &mut Device,
    energy: &mut Option<EnergyReading>,
    now: Duration,
) -> Option<Awake> {
    let mut errors = Vec::new();
    let mut r = Reader { errors: &mut errors };
    let asleep = r.text(&dev.dir.join("power/runtime_status")).as_deref() == Some("suspended");
    if asleep {
        device
            .notes
            .push("asleep (runtime suspended): its sensors were not read, so as not to wake it".into());
    }
    pcie(&mut r, dev, device);
    match dev.driver.as_deref() {
        Some("amdgpu") => amdgpu(&mut r, dev, device, asleep),
        Some("i915") => i915(&mut r, dev, device),
        Some("xe") => xe(&mut r, dev, device),
        _ => {}
    }
    let awake = (!asleep).then(|| Awake {
        hwmon: hwmon(&mut r, dev, device, energy, now),
    });
    device.errors.extend(errors);
    awake
}

fn pcie(r: &mut Reader, dev: &DrmDevice, device: &mut Device) {
    if dev.pci.is_none() {
        return;
    }
    let gen = |speed: Option<String>| -> Option<u32> {
        let gts: f64 = speed?.split_whitespace().next()?.parse().ok()?;
        Some(match gts {
            x if x < 4.0 => 1,
            x if x < 6.0 => 2,
            x if x < 12.0 => 3,
            x if x < 24.0 => 4,
            x if x < 48.0 => 5,
            x if x < 96.0 => 6,
            _ => 7,
        })
    };
    let width = |w: Option<u64>| w.filter(|w| *w > 0 && *w <= 64).map(|w| w as u32);
    let pcie = Pcie {
        link_gen: gen(r.text(&dev.dir.join("current_link_speed"))),
        link_width: width(r.num(&dev.dir.join("current_link_width"))),
        max_link_gen: gen(r.text(&dev.dir.join("max_link_speed"))),
        max_link_width: width(r.num(&dev.dir.join("max_link_width"))),
        tx_bytes_per_s: None,
        rx_bytes_per_s: None,
    };
    device.pcie = (pcie != Pcie::default()).then_some(pcie);
}

fn percent(v: Option<u64>) -> Option<u32> {
    v.filter(|p| *p <= 100).map(|p| p as u32)
}

fn amdgpu(r: &mut Reader, dev: &DrmDevice, device: &mut Device, asleep: bool) {
    let f = |name: &str| dev.dir.join(name);
    if let Some(name) = r.text(&f("product_name")).filter(|n| !n.is_empty()) {
        device.name = Some(name);
    }
    device.uuid = r.text(&f("unique_id")).filter(|u| !u.is_empty());
    device.memory_total_bytes = r.num(&f("mem_info_vram_total"));
    device.memory_used_bytes = r.num(&f("mem_info_vram_used"));
    device.memory_free_bytes = match (device.memory_total_bytes, device.memory_used_bytes) {
        (Some(t), Some(u)) => Some(t.saturating_sub(u)),
        _ => None,
    };
    let gtt_total = r.num(&f("mem_info_gtt_total"));
    let gtt_used = r.num(&f("mem_info_gtt_used"));
    device.shared_memory_used_bytes = gtt_used;
    if gtt_total.is_some() || gtt_used.is_some() {
        device.notes.push(format!(
            "GTT (system RAM the GPU maps): {} used of {}",
            crate::units::bytes(gtt_used),
            crate::units::bytes(gtt_total)
        ));
    }
    let vis_total = r.num(&f("mem_info_vis_vram_total"));
    let vis_used = r.num(&f("mem_info_vis_vram_used"));
    if vis_total.is_some() && vis_total != device.memory_total_bytes {
        device.notes.push(format!(
            "CPU-visible VRAM: {} used of {}",
            crate::units::bytes(vis_used),
            crate::units::bytes(vis_total)
        ));
    }
    if dev.integrated {
        device.notes.push(format!(
            "VRAM here is a {} carve-out of system RAM; a model on this APU usually lives in GTT, shown per process as Spill",
            crate::units::bytes(device.memory_total_bytes)
        ));
    }
    if asleep {
        return;
    }
    device.gpu_util_percent = percent(r.num(&f("gpu_busy_percent")));
    device.memory_activity_percent = percent(r.num(&f("mem_busy_percent")));
    let (sclk, sclk_max) = dpm_levels(r.text(&f("pp_dpm_sclk")));
    let (mclk, mclk_max) = dpm_levels(r.text(&f("pp_dpm_mclk")));
    let clocks = device.clocks.get_or_insert_with(Clocks::default);
    clocks.graphics_mhz = clocks.graphics_mhz.or(sclk);
    clocks.graphics_max_mhz = sclk_max;
    clocks.memory_mhz = clocks.memory_mhz.or(mclk);
    clocks.memory_max_mhz = mclk_max;
}

/// amdgpu's `pp_dpm_*` lists, e.g. `1: 2482Mhz *`: the current level (the
/// one marked `*`) and the highest.
fn dpm_levels(text: Option<String>) -> (Option<u32>, Option<u32>) {
    let Some(text) = text else {
        return (None, None);
    };
    let (mut current, mut max) = (None, None);
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(':') else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let Some(mhz) = parts
            .next()
            .and_then(|v| v.to_ascii_lowercase().strip_suffix("mhz").map(str::to_string))
            .and_then(|v| v.parse::<u32>().ok())
        else {
            continue;
        };
        max = max.max(Some(mhz));
        if parts.any(|p| p == "*") {
            current = Some(mhz);
        }
    }
    (current, max)
}

/// i915: frequencies in the card directory (or per GT), throttle reasons
/// per GT, local memory size where the driver publishes it.
fn i915(r: &mut Reader, dev: &DrmDevice, device: &mut Device) {
    let Some(card) = dev.card_dir.as_deref() else {
        return;
    };
    let gt0 = card.join("gt/gt0");
    let act = r
        .num(&card.join("gt_act_freq_mhz"))
        .or_else(|| r.num(&gt0.join("rps_act_freq_mhz")));
    let rp0 = r
        .num(&card.join("gt_RP0_freq_mhz"))
        .or_else(|| r.num(&gt0.join("rps_RP0_freq_mhz")));
    if act.is_some() || rp0.is_some() {
        let clocks = device.clocks.get_or_insert_with(Clocks::default);
        clocks.graphics_mhz = act.map(|v| v as u32);
        clocks.graphics_max_mhz = rp0.map(|v| v as u32);
    }
    for gt in sorted_dirs(&card.join("gt"), "gt") {
        throttle(r, &gt, "throttle_reason_", device);
    }
    let lmem = r
        .num(&dev.dir.join("lmem_total_bytes"))
        .or_else(|| r.num(&card.join("lmem_total_bytes")));
    device.memory_total_bytes = lmem;
    if !dev.integrated && lmem.is_none() {
        device.notes.push(
            "i915 publishes neither the size nor the use of local memory in sysfs: per-process VRAM comes from fdinfo (drm-*-local0)"
                .into(),
        );
    }
}

/// xe: per-tile VRAM size, per-GT frequencies and throttle reasons.
fn xe(r: &mut Reader, dev: &DrmDevice, device: &mut Device) {
    let mut vram: Option<u64> = None;
    let tiles = sorted_dirs(&dev.dir, "tile");
    for tile in &tiles {
        let size = r
            .num(&tile.join("physical_vram_size_bytes"))
            .or_else(|| r.num(&tile.join("memory/physical_vram_size_bytes")));
        if let Some(s) = size {
            vram = Some(vram.unwrap_or(0) + s);
        }
    }
    device.memory_total_bytes = vram;
    if vram.is_some() {
        device.notes.push(
            "xe publishes the size of VRAM but not its use: per-process VRAM comes from fdinfo (drm-*-vram0)".into(),
        );
    }
    let mut first = true;
    for tile in &tiles {
        for gt in sorted_dirs(tile, "gt") {
            let freq = gt.join("freq0");
            if first {
                let act = r.num(&freq.join("act_freq"));
                let rp0 = r.num(&freq.join("rp0_freq"));
                if act.is_some() || rp0.is_some() {
                    let clocks = device.clocks.get_or_insert_with(Clocks::default);
                    clocks.graphics_mhz = act.map(|v| v as u32);
                    clocks.graphics_max_mhz = rp0.map(|v| v as u32);
                    first = false;
                }
            }
            throttle(r, &freq.join("throttle"), "reason_", device);
        }
    }
}

/// Subdirectories `<prefix>N`, in number order.
fn sorted_dirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let n: u32 = name.to_str()?.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Intel throttle reasons (`<prefix>pl1` ... with `<prefix>status` or
/// i915's `throttle_reason_status`): a note when any is set.
fn throttle(r: &mut Reader, dir: &Path, prefix: &str, device: &mut Device) {
    const REASONS: [(&str, &str); 8] = [
        ("pl1", "PL1 (sustained power limit)"),
        ("pl2", "PL2 (burst power limit)"),
        ("pl4", "PL4 (peak current limit)"),
        ("thermal", "thermal"),
        ("prochot", "PROCHOT (platform hot)"),
        ("ratl", "RATL (running average thermal limit)"),
        ("vr_tdc", "VR TDC (voltage regulator current)"),
        ("vr_thermalert", "VR thermal alert"),
    ];
    let status_file = if prefix == "reason_" {
        "status".to_string()
    } else {
        format!("{prefix}status")
    };
    let Some(status) = r.num(&dir.join(status_file)) else {
        return;
    };
    let reasons: Vec<&str> = REASONS
        .iter()
        .filter(|(file, _)| r.num(&dir.join(format!("{prefix}{file}"))).is_some_and(|v| v != 0))
        .map(|(_, words)| *words)
        .collect();
    if status != 0 || !reasons.is_empty() {
        let gt = dir
            .ancestors()
            .find_map(|a| {
                a.file_name()?
                    .to_str()
                    .filter(|n| n.starts_with("gt"))
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let why = if reasons.is_empty() {
            "reason not given".to_string()
        } else {
            reasons.join(", ")
        };
        device.notes.push(format!("throttled ({gt}): {why}"));
    }
}

/// The first hwmon directory of the device: temperature, power, fan,
/// clocks (amdgpu), energy (i915, xe: power from two readings).
fn hwmon(
    r: &mut Reader,
    dev: &DrmDevice,
    device: &mut Device,
    energy: &mut Option<EnergyReading>,
    now: Duration,
) -> Option<Hwmon> {
    let h = sorted_dirs(&dev.dir.join("hwmon"), "hwmon").into_iter().next()?;
    let f = |name: &str| h.join(name);
    // Temperature: the sensor labelled edge (amdgpu) or pkg (xe), else the
    // first one present.
    let mut labelled: BTreeMap<String, (u32, u64)> = BTreeMap::new();
    let mut first = None;
    for i in 1..=4 {
        let Some(milli) = r.num(&f(&format!("temp{i}_input"))) else {
            continue;
        };
        first = first.or(Some((i, milli)));
        if let Some(label) = r.text(&f(&format!("temp{i}_label"))) {
            labelled.insert(label.to_ascii_lowercase(), (i, milli));
        }
    }
    let temp = labelled.get("edge").or(labelled.get("pkg")).copied().or(first);
    device.temperature_c = temp.and_then(|(_, m)| celsius(m));

    let power_uw = r.num(&f("power1_average")).or_else(|| r.num(&f("power1_input")));
    device.power_w = power_uw.map(|uw| uw as f64 / 1e6);
    let energy_uj = r.num(&f("energy1_input")).or_else(|| r.num(&f("energy2_input")));
    if let Some(uj) = energy_uj {
        if device.power_w.is_none() {
            if let Some(prev) = *energy {
                let dt = now.saturating_sub(prev.at).as_secs_f64();
                if dt > 0.0 && uj >= prev.microjoules {
                    device.power_w = Some((uj - prev.microjoules) as f64 / dt / 1e6);
                }
            }
        }
        *energy = Some(EnergyReading {
            at: now,
            microjoules: uj,
        });
    }
    let limit = r
        .num(&f("power1_cap"))
        .or_else(|| r.num(&f("power1_max")))
        .or_else(|| r.num(&f("power2_max")))
        .filter(|uw| *uw > 0);
    device.power_limit_w = limit.map(|uw| uw as f64 / 1e6);

    if let Some(pwm) = r.num(&f("pwm1")) {
        let max = r.num(&f("pwm1_max")).filter(|m| *m > 0).unwrap_or(255);
        device.fan_percent = Some(((pwm.min(max) * 100 + max / 2) / max) as u32);
    }
    // amdgpu: freq1 is sclk, freq2 mclk, in Hz.
    let sclk = r.num(&f("freq1_input")).map(|hz| (hz / 1_000_000) as u32);
    let mclk = r.num(&f("freq2_input")).map(|hz| (hz / 1_000_000) as u32);
    if sclk.is_some() || mclk.is_some() {
        let clocks = device.clocks.get_or_insert_with(Clocks::default);
        clocks.graphics_mhz = sclk.or(clocks.graphics_mhz);
        clocks.memory_mhz = mclk.or(clocks.memory_mhz);
    }
    Some(Hwmon {
        temperature_sensor: temp.map(|(sensor, _)| sensor),
        dir: h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_told_from_connectors() {
        assert_eq!(node_number("card0"), Some((true, 0)));
        assert_eq!(node_number("renderD129"), Some((false, 129)));
        assert_eq!(node_number("card0-DP-1"), None);
        assert_eq!(node_number("version"), None);
        assert_eq!(node_number("card"), None);
        assert_eq!(node_number("controlD64"), None);
    }

    #[test]
    fn pci_addresses_are_normalized() {
        assert_eq!(normalize_pci("00000000:0A:00.0"), "0000:0a:00.0");
        assert_eq!(normalize_pci("0000:08:00.0"), "0000:08:00.0");
        assert!(is_pci_address("0000:c4:00.0"));
        assert!(!is_pci_address("fb000000.gpu"));
    }

    #[test]
    fn dpm_levels_give_current_and_max() {
        let (cur, max) = dpm_levels(Some("0: 500Mhz\n1: 1200Mhz *\n2: 2482Mhz\n".into()));
        assert_eq!((cur, max), (Some(1200), Some(2482)));
        assert_eq!(dpm_levels(Some("garbage".into())), (None, None));
    }

    #[test]
    fn vendors_by_id_then_by_driver() {
        assert_eq!(vendor_name(Some(0x1002), Some("amdgpu")), "AMD");
        assert_eq!(vendor_name(Some(0x8086), Some("xe")), "Intel");
        assert_eq!(vendor_name(None, Some("panfrost")), "Arm");
        assert_eq!(vendor_name(Some(0xabcd), Some("mystery")), "unknown (PCI vendor abcd)");
        assert_eq!(vendor_name(None, None), "unknown");
    }

    #[test]
    fn pci_ids_are_looked_up_within_the_vendor() {
        let dir = tempfile::tempdir().unwrap();
        let ids = dir.path().join("pci.ids");
        std::fs::write(
            &ids,
            "# comment\n1000  Broadcom\n\t744c  not this one\n1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
             \t15bf  Phoenix1\n\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX]\n\t\t1002 0e3b  a subsystem\n\
             8086  Intel Corporation\n\t56a0  DG2 [Arc A770]\n",
        )
        .unwrap();
        let files = [ids];
        assert_eq!(
            pci_ids_name(&files, 0x1002, 0x744c).as_deref(),
            Some("Navi 31 [Radeon RX 7900 XT/7900 XTX]")
        );
        assert_eq!(pci_ids_name(&files, 0x8086, 0x56a0).as_deref(), Some("DG2 [Arc A770]"));
        assert_eq!(pci_ids_name(&files, 0x1002, 0x1234), None);
        assert_eq!(pci_ids_name(&[], 0x1002, 0x744c), None);
    }
}
