//! The DRM client usage stats that a driver prints in /proc/PID/fdinfo/FD
//! for an open DRM file (the kernel's Documentation/gpu/drm-usage-stats.rst).
//!
//! The parser takes any bytes and never panics. It is bounded: at most
//! [`MAX_BYTES`] are read, [`MAX_LINES`] lines looked at, and [`MAX_NAMES`]
//! regions and engines kept. What it cannot read is counted in
//! [`Fdinfo::malformed`], never guessed.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// The most of one fdinfo file that is read (real ones are under 4 KiB).
pub const MAX_BYTES: usize = 64 * 1024;
/// The most lines looked at in one file.
pub const MAX_LINES: usize = 1024;
/// The most regions and the most engines kept for one client.
pub const MAX_NAMES: usize = 64;
/// The longest key accepted.
const MAX_KEY: usize = 128;

/// Bytes a client holds in one memory region. Each is `None` when the
/// driver does not print it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Region {
    /// `drm-total-`: private plus shared.
    pub total: Option<u64>,
    /// `drm-shared-`: buffers shared with other clients (dma-buf, flink).
    pub shared: Option<u64>,
    /// `drm-resident-`: backed by memory in the region now.
    pub resident: Option<u64>,
    /// `drm-purgeable-`: resident and the driver may drop it.
    pub purgeable: Option<u64>,
    /// `drm-active-`: in use by the GPU right now.
    pub active: Option<u64>,
    /// `drm-memory-`: the old name of resident (amdgpu before 6.13).
    pub memory: Option<u64>,
}

impl Region {
    /// What the client has in the region now: resident, else the old
    /// `drm-memory-` alias (which is resident), else total.
    pub fn held(&self) -> Option<u64> {
        self.resident.or(self.memory).or(self.total)
    }

    /// What no other client also counts: held less shared. Never more than
    /// the client's own share, so summing it over clients counts no buffer
    /// twice.
    pub fn private(&self) -> Option<u64> {
        self.held().map(|h| h.saturating_sub(self.shared.unwrap_or(0)))
    }
}

/// Busy counters of one engine (or group of identical engines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Engine {
    /// `drm-engine-`: nanoseconds busy with this client's work.
    pub busy_ns: Option<u64>,
    /// `drm-engine-capacity-`: how many identical engines (1 when absent).
    pub capacity: Option<u64>,
    /// `drm-cycles-`: busy cycles.
    pub cycles: Option<u64>,
    /// `drm-total-cycles-`: cycles elapsed on the engine's clock.
    pub total_cycles: Option<u64>,
    /// `drm-maxfreq-`: the engine's top frequency in Hz.
    pub maxfreq_hz: Option<u64>,
}

/// One DRM fd's usage stats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fdinfo {
    /// `drm-driver`: present on every DRM fd; its absence means the fd is
    /// not a DRM file (or the driver prints no stats).
    pub driver: Option<String>,
    /// `drm-pdev`: the PCI address of the device.
    pub pdev: Option<String>,
    /// `drm-client-id`: the kernel's `struct drm_file`; unique per device
    /// (with `drm-pdev`) or globally.
    pub client_id: Option<u64>,
    pub regions: BTreeMap<String, Region>,
    pub engines: BTreeMap<String, Engine>,
    /// Lines that could not be read: no colon, a number that does not
    /// parse or overflows, an unknown unit, a name over the limits.
    pub malformed: u32,
    /// The file was longer than the limits: the rest was not read.
    pub truncated: bool,
}

/// Reads and parses one fdinfo file, at most [`MAX_BYTES`] of it.
pub fn read(path: &Path) -> std::io::Result<Fdinfo> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::with_capacity(2048);
    file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    let over = bytes.len() > MAX_BYTES;
    bytes.truncate(MAX_BYTES);
    let mut info = parse(&bytes);
    info.truncated |= over;
    Ok(info)
}

/// Parses fdinfo text. Keys that are not `drm-` (pos, flags, amd-*, ...)
/// and `drm-` keys this version does not know are skipped without
/// complaint; a known key with a value that does not read is malformed.
pub fn parse(bytes: &[u8]) -> Fdinfo {
    let mut info = Fdinfo::default();
    let mut lines = bytes.split(|b| *b == b'\n');
    for line in lines.by_ref().take(MAX_LINES) {
        let Ok(line) = std::str::from_utf8(line) else {
            info.malformed += 1;
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !parse_line(&mut info, line) {
            info.malformed += 1;
        }
    }
    if lines.any(|l| !l.iter().all(u8::is_ascii_whitespace)) {
        info.truncated = true;
    }
    info
}

/// Takes one non-empty line; false when it is malformed.
fn parse_line(info: &mut Fdinfo, line: &str) -> bool {
    let Some((key, value)) = line.split_once(':') else {
        return false;
    };
    let (key, value) = (key.trim(), value.trim());
    if key.is_empty() || key.len() > MAX_KEY || key.contains(char::is_whitespace) {
        return false;
    }
    let Some(rest) = key.strip_prefix("drm-") else {
        return true;
    };
    match rest {
        "driver" => return set_word(&mut info.driver, value),
        "pdev" => return set_word(&mut info.pdev, value),
        "client-id" => {
            return match plain_number(value) {
                Some(v) => {
                    info.client_id = Some(v);
                    true
                }
                None => false,
            }
        }
        _ => {}
    }
    // Longest prefixes first: "total-cycles-" before "total-", and
    // "engine-capacity-" before "engine-".
    if let Some(name) = rest.strip_prefix("total-cycles-") {
        return set_engine(info, name, plain_number(value), |e, v| e.total_cycles = Some(v));
    }
    if let Some(name) = rest.strip_prefix("engine-capacity-") {
        let capacity = plain_number(value).filter(|c| *c > 0);
        return set_engine(info, name, capacity, |e, v| e.capacity = Some(v));
    }
    if let Some(name) = rest.strip_prefix("engine-") {
        return set_engine(info, name, nanoseconds(value), |e, v| e.busy_ns = Some(v));
    }
    if let Some(name) = rest.strip_prefix("cycles-") {
        return set_engine(info, name, plain_number(value), |e, v| e.cycles = Some(v));
    }
    if let Some(name) = rest.strip_prefix("maxfreq-") {
        return set_engine(info, name, hertz(value), |e, v| e.maxfreq_hz = Some(v));
    }
    if rest.starts_with("curfreq-") {
        return hertz(value).is_some();
    }
    type SetRegion = fn(&mut Region, u64);
    let regions: [(&str, SetRegion); 6] = [
        ("total-", |r, v| r.total = Some(v)),
        ("shared-", |r, v| r.shared = Some(v)),
        ("resident-", |r, v| r.resident = Some(v)),
        ("purgeable-", |r, v| r.purgeable = Some(v)),
        ("active-", |r, v| r.active = Some(v)),
        ("memory-", |r, v| r.memory = Some(v)),
    ];
    for (prefix, set) in regions {
        if let Some(name) = rest.strip_prefix(prefix) {
            let Some(bytes) = bytes(value) else {
                return false;
            };
            if !valid_name(name) || (!info.regions.contains_key(name) && info.regions.len() >= MAX_NAMES) {
                return false;
            }
            set(info.regions.entry(name.to_string()).or_default(), bytes);
            return true;
        }
    }
    // A drm- key from a newer kernel: not ours to judge.
    true
}

fn set_word(slot: &mut Option<String>, value: &str) -> bool {
    if value.is_empty() || value.len() > MAX_KEY || value.contains(char::is_whitespace) {
        return false;
    }
    *slot = Some(value.to_string());
    true
}

fn set_engine(info: &mut Fdinfo, name: &str, value: Option<u64>, set: impl FnOnce(&mut Engine, u64)) -> bool {
    let Some(value) = value else {
        return false;
    };
    if !valid_name(name) || (!info.engines.contains_key(name) && info.engines.len() >= MAX_NAMES) {
        return false;
    }
    set(info.engines.entry(name.to_string()).or_default(), value);
    true
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// `N` and an optional unit; the multiplier for that unit.
fn number_with_unit(value: &str, unit_of: impl Fn(&str) -> Option<u64>) -> Option<u64> {
    let mut parts = value.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let unit = parts.next().unwrap_or("");
    if parts.next().is_some() {
        return None;
    }
    n.checked_mul(unit_of(unit)?)
}

fn plain_number(value: &str) -> Option<u64> {
    number_with_unit(value, |u| u.is_empty().then_some(1))
}

/// Bytes: no unit, KiB or MiB (the spec's), GiB (for when it comes).
fn bytes(value: &str) -> Option<u64> {
    number_with_unit(value, |u| match u {
        "" => Some(1),
        "KiB" => Some(1 << 10),
        "MiB" => Some(1 << 20),
        "GiB" => Some(1 << 30),
        _ => None,
    })
}

fn nanoseconds(value: &str) -> Option<u64> {
    number_with_unit(value, |u| matches!(u, "ns" | "").then_some(1))
}

fn hertz(value: &str) -> Option<u64> {
    number_with_unit(value, |u| match u {
        "" | "Hz" => Some(1),
        "KHz" | "kHz" => Some(1_000),
        "MHz" => Some(1_000_000),
        "GHz" => Some(1_000_000_000),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_amdgpu_keys_read_as_resident_memory() {
        let info = parse(
            b"pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1130\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:08:00.0\n\
              drm-client-id:\t217\npasid:\t32774\ndrm-memory-vram:\t2068 KiB\ndrm-memory-gtt: \t8192 KiB\n\
              drm-memory-cpu: \t0 KiB\namd-evicted-vram:\t0 KiB\ndrm-engine-gfx:\t107322799 ns\n",
        );
        assert_eq!(info.driver.as_deref(), Some("amdgpu"));
        assert_eq!(info.pdev.as_deref(), Some("0000:08:00.0"));
        assert_eq!(info.client_id, Some(217));
        assert_eq!(info.regions["vram"].held(), Some(2068 * 1024));
        assert_eq!(info.regions["gtt"].held(), Some(8192 * 1024));
        assert_eq!(info.regions["cpu"].held(), Some(0));
        assert_eq!(info.engines["gfx"].busy_ns, Some(107_322_799));
        assert_eq!(info.malformed, 0);
        assert!(!info.truncated);
    }

    #[test]
    fn every_standard_key_and_unit_is_read() {
        let info = parse(
            b"drm-driver: xe\ndrm-client-id: 3\ndrm-pdev: 0000:03:00.0\n\
              drm-total-vram0: 23992 KiB\ndrm-shared-vram0: 16 MiB\ndrm-active-vram0: 0\n\
              drm-resident-vram0: 23992 KiB\ndrm-purgeable-vram0: 512\n\
              drm-cycles-rcs: 28257900\ndrm-total-cycles-rcs: 7655183225\n\
              drm-engine-capacity-vcs: 2\ndrm-cycles-vcs: 0\ndrm-total-cycles-vcs: 7655183225\n\
              drm-engine-fragment: 1846584880 ns\ndrm-maxfreq-fragment: 799999987 Hz\n\
              drm-curfreq-fragment: 800 MHz\ndrm-maxfreq-tiler: 800 MHz\n\
              drm-new-key-from-2030: whatever\n",
        );
        assert_eq!(info.malformed, 0, "{info:?}");
        let vram = info.regions["vram0"];
        assert_eq!(vram.total, Some(23992 * 1024));
        assert_eq!(vram.shared, Some(16 << 20));
        assert_eq!(vram.active, Some(0));
        assert_eq!(vram.resident, Some(23992 * 1024));
        assert_eq!(vram.purgeable, Some(512));
        assert_eq!(vram.private(), Some(23992 * 1024 - (16 << 20)));
        assert_eq!(info.engines["rcs"].cycles, Some(28_257_900));
        assert_eq!(info.engines["rcs"].total_cycles, Some(7_655_183_225));
        assert_eq!(info.engines["rcs"].busy_ns, None);
        assert_eq!(info.engines["vcs"].capacity, Some(2));
        assert_eq!(info.engines["fragment"].busy_ns, Some(1_846_584_880));
        assert_eq!(info.engines["fragment"].maxfreq_hz, Some(799_999_987));
        assert_eq!(info.engines["tiler"].maxfreq_hz, Some(800_000_000));
    }

    #[test]
    fn malformed_lines_are_counted_and_the_rest_is_kept() {
        let mut text = b"drm-driver: amdgpu\n\
              no colon on this line\n\
              drm-client-id: twelve\n\
              drm-engine-gfx: 12 ms\n\
              drm-engine-compute: 5 ns extra\n\
              drm-memory-vram: 99999999999999999999999 KiB\n\
              drm-memory-gtt: 18446744073709551615 MiB\n\
              drm-total-vram: 12 TiB\n\
              drm-engine-capacity-gfx: 0\n\
              drm-total-: 5\n\
              drm-memory-bad name: 5\n\
              : 7\n\
              drm-pdev: two words\n\
              drm-driver:\n\
              drm-memory-cpu: 4 KiB\n"
            .to_vec();
        text.extend_from_slice(b"drm-engine-dec: \xff\xfe ns\n");
        text.extend_from_slice(&[0xc3, 0x28, b'\n']);
        text.extend_from_slice(format!("drm-{}: 1\n", "k".repeat(500)).as_bytes());
        let info = parse(&text);
        assert_eq!(
            info.driver.as_deref(),
            Some("amdgpu"),
            "a bad later value keeps the good one"
        );
        assert_eq!(info.client_id, None);
        assert_eq!(info.pdev, None);
        assert_eq!(info.regions.get("cpu").and_then(|r| r.held()), Some(4096));
        assert!(!info.regions.contains_key("vram"), "{:?}", info.regions);
        assert!(!info.regions.contains_key("gtt"), "overflow is not a number");
        assert!(info.engines.is_empty(), "{:?}", info.engines);
        assert_eq!(info.malformed, 16);
    }

    #[test]
    fn the_parser_is_bounded() {
        let mut text = Vec::new();
        for i in 0..(MAX_LINES + 50) {
            text.extend_from_slice(format!("drm-memory-r{i}: {i}\n").as_bytes());
        }
        let info = parse(&text);
        assert!(info.truncated);
        assert_eq!(info.regions.len(), MAX_NAMES);
        assert_eq!(info.malformed as usize, MAX_LINES - MAX_NAMES);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("5");
        let mut big = b"drm-driver: i915\n".to_vec();
        big.resize(MAX_BYTES * 4, b'x');
        std::fs::write(&path, &big).unwrap();
        let info = read(&path).unwrap();
        assert!(info.truncated);
        assert_eq!(info.driver.as_deref(), Some("i915"));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap deterministic fuzz: xorshift bytes biased toward the
        // characters fdinfo is made of.
        let alphabet = b"drm-enginvtalcyshpuKMiBbHz0123456789: \t\n\xff";
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut text = Vec::new();
            for _ in 0..(state % 400) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let info = parse(&text);
            assert!(info.regions.len() <= MAX_NAMES && info.engines.len() <= MAX_NAMES);
        }
    }
}
