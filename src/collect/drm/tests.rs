use super::clients::{class, Class};
use super::*;
use crate::collect::nvml::GpuProcess;
use crate::snapshot::GpuUsage;
use crate::snapshot::{Clocks, Pcie};
use std::path::Path;
use std::sync::{Arc, Mutex};

const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/drm").join(name)
}

/// Copies a tree, links as links, so a test can change it.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &target).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

struct Fixture {
    source: DrmSource,
    time: Arc<Mutex<Duration>>,
    root: PathBuf,
    _copy: Option<tempfile::TempDir>,
}

impl Fixture {
    /// The fixture as committed (read only).
    fn open(name: &str) -> Fixture {
        Fixture::at(fixture(name), None)
    }

    /// A private copy the test may change.
    fn copy(name: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&fixture(name), dir.path());
        Fixture::at(dir.path().to_path_buf(), Some(dir))
    }

    fn at(root: PathBuf, copy: Option<tempfile::TempDir>) -> Fixture {
        let mut source = DrmSource::new(root.join("proc"), root.join("sys"));
        source.set_pci_ids(vec![fixture("pci.ids")]);
        let time = Arc::new(Mutex::new(Duration::ZERO));
        let clock = time.clone();
        source.set_clock(move || *clock.lock().unwrap());
        Fixture {
            source,
            time,
            root,
            _copy: copy,
        }
    }

    fn sample_at(&mut self, secs: f64, only: Option<u32>) -> Sample {
        *self.time.lock().unwrap() = Duration::from_secs_f64(secs);
        self.source.sample(only).expect("the sample reads")
    }

    /// Rewrites one line of a fixture file (`key:` to the new value).
    fn set(&self, file: &str, key: &str, value: &str) {
        let path = self.root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut found = false;
        let out: Vec<String> = text
            .lines()
            .map(|l| {
                if l.split(':').next() == Some(key) {
                    found = true;
                    format!("{key}:\t{value}")
                } else {
                    l.to_string()
                }
            })
            .collect();
        assert!(found, "{key} in {file}");
        std::fs::write(&path, out.join("\n") + "\n").unwrap();
    }
}

fn usage(sample: &Sample, pid: u32) -> &GpuUsage {
    let found: Vec<&GpuProcess> = sample.processes.iter().filter(|p| p.pid == pid).collect();
    assert_eq!(found.len(), 1, "one entry for PID {pid}: {:?}", sample.processes);
    &found[0].usage
}

fn pids(sample: &Sample) -> Vec<u32> {
    sample.processes.iter().map(|p| p.pid).collect()
}

fn engines(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn has_note(notes: &[String], part: &str) -> bool {
    notes.iter().any(|n| n.contains(part))
}

#[test]
fn amdgpu_discrete_card_value_by_value() {
    let mut f = Fixture::open("amdgpu-dgpu");
    let s = f.sample_at(0.0, None);
    assert_eq!(s.devices.len(), 1);
    let d = &s.devices[0];
    assert_eq!(d.index, 0);
    assert_eq!(d.backend, "drm");
    assert_eq!(d.vendor, "AMD");
    assert_eq!(
        d.name.as_deref(),
        Some("Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]")
    );
    assert_eq!(d.pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert_eq!(d.uuid, None);
    assert_eq!(d.driver_version, None);
    assert_eq!(d.memory_total_bytes, Some(25_753_026_560));
    assert_eq!(d.memory_used_bytes, Some(6 << 30));
    assert_eq!(d.memory_free_bytes, Some(25_753_026_560 - (6 << 30)));
    assert_eq!(d.shared_memory_used_bytes, Some(512 * MIB));
    assert_eq!(d.gpu_util_percent, Some(37));
    assert_eq!(d.memory_activity_percent, Some(12));
    assert_eq!(d.temperature_c, Some(45), "the edge sensor");
    assert_eq!(d.power_w, Some(87.0));
    assert_eq!(d.power_limit_w, Some(327.0));
    assert_eq!(d.fan_percent, Some(30));
    assert_eq!(
        d.clocks,
        Some(Clocks {
            graphics_mhz: Some(1838),
            sm_mhz: None,
            memory_mhz: Some(1250),
            graphics_max_mhz: Some(2526),
            memory_max_mhz: Some(1250),
        })
    );
    assert_eq!(
        d.pcie,
        Some(Pcie {
            link_gen: Some(4),
            link_width: Some(16),
            max_link_gen: Some(4),
            max_link_width: Some(16),
            tx_bytes_per_s: None,
            rx_bytes_per_s: None,
        })
    );
    assert!(d.process_list_complete);
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    assert!(
        has_note(&d.notes, "driver amdgpu; nodes card0, renderD128; PCI id 1002:744c"),
        "{:?}",
        d.notes
    );
    assert!(has_note(
        &d.notes,
        "GTT (system RAM the GPU maps): 512.0 MiB used of 16.00 GiB"
    ));
    assert!(!has_note(&d.notes, "CPU-visible"), "all VRAM is visible: no note");
    assert!(!has_note(&d.notes, "integrated"));

    // 1400 holds no DRM fd; 1500 exited (no fdinfo); 1600 is a zombie.
    assert_eq!(pids(&s), [1000, 1001, 1200, 1300]);
    for p in &s.processes {
        assert_eq!(p.usage.device, 0);
        assert_eq!(p.usage.source, "drm");
        assert_eq!(p.usage.pairing, None, "an fd's owner is not a pairing");
        assert!(p.usage.contexts.is_empty());
        assert!(p.usage.engines.is_empty(), "no rate from one sample");
    }
    // Client 217 is held by 1000 and 1001: counted to neither.
    let u = usage(&s, 1000);
    assert_eq!((u.vram_bytes, u.spill_bytes, u.paged_bytes), (None, None, None));
    let u = usage(&s, 1001);
    assert_eq!(
        (u.vram_bytes, u.spill_bytes, u.paged_bytes),
        (Some(512 * MIB), Some(2 * MIB), Some(0))
    );
    // Client 300 shares 64 MiB of its 1.5 GiB: the private 1472 MiB count.
    let u = usage(&s, 1200);
    assert_eq!(
        (u.vram_bytes, u.spill_bytes, u.paged_bytes),
        (Some(1472 * MIB), Some(128 * MIB), Some(0))
    );
    let u = usage(&s, 1300);
    assert_eq!(
        (u.vram_bytes, u.spill_bytes, u.paged_bytes),
        (Some(256 * MIB), Some(16 * MIB), Some(0))
    );

    let notes = f.source.take_process_notes();
    let joint = "DRM client 217 on 0000:03:00.0 (VRAM 4.00 GiB, GTT/system 256.0 MiB) is held jointly by PIDs 1000, 1001 (an inherited or passed fd): counted to none of them";
    assert!(has_note(&notes[&1000], joint), "{notes:?}");
    assert!(has_note(&notes[&1001], joint));
    assert!(has_note(&notes[&1000], "uses ROCm/HIP (/dev/kfd)"));
    assert!(!notes.get(&1001).is_some_and(|n| has_note(n, "ROCm")));
    assert!(has_note(
        &notes[&1200],
        "64.0 MiB of DRM buffers on 0000:03:00.0 (client 300) are shared with other clients (dma-buf): counted to none"
    ));
    assert!(!notes.contains_key(&1300));

    let stats = f.source.scan_stats();
    assert_eq!(stats.holders, 4);
    assert_eq!(stats.clients, 4);
    assert_eq!(stats.denied, 0);
    assert!(stats.full_scan);
    let b = f.source.backend();
    assert_eq!(b.status, BackendStatus::Ok);
    assert_eq!(b.detail, "1 device: amdgpu 0000:03:00.0; 4 processes with DRM clients");
}

#[test]
fn a_client_reached_through_several_fds_and_processes_counts_once() {
    let mut f = Fixture::open("amdgpu-dgpu");
    let s = f.sample_at(0.0, None);
    let sum: u64 = s.processes.iter().filter_map(|p| p.usage.vram_bytes).sum();
    // 512 MiB (client 218) + 1472 MiB (300) + 256 MiB (100); client
    // 217's 4 GiB, seen through three fds in two processes, in none.
    assert_eq!(sum, (512 + 1472 + 256) * MIB);
    // Six DRM fds, and the one of 1500, which exited (ENOENT): tried
    // once, then forgotten.
    assert_eq!(f.source.scan_stats().fdinfo_read, 7);
    f.sample_at(1.0, None);
    assert_eq!(f.source.scan_stats().fdinfo_read, 6);
}

#[test]
fn engine_percent_comes_from_two_samples() {
    let mut f = Fixture::copy("amdgpu-dgpu");
    *f.time.lock().unwrap() = Duration::from_secs(10);
    f.source.prime();
    assert!(f.source.take_process_notes().is_empty(), "priming leaves no notes");
    f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "5500000000 ns");
    f.set("proc/1300/fdinfo/12", "drm-engine-gfx", "2250000000 ns");
    let s = f.sample_at(11.0, None);
    assert_eq!(
        usage(&s, 1200).engines,
        engines(&[("compute", 0), ("dma", 0), ("gfx", 50)])
    );
    assert_eq!(usage(&s, 1300).engines, engines(&[("gfx", 25)]));
    // A process with a jointly held client has no engine figure of its own.
    assert!(usage(&s, 1000).engines.is_empty());
    assert!(usage(&s, 1001).engines.is_empty());
    assert!(!f.source.scan_stats().full_scan);
}

#[test]
fn a_counter_going_backwards_keeps_the_larger_value_and_over_100_is_clamped() {
    let mut f = Fixture::copy("amdgpu-dgpu");
    f.sample_at(0.0, None);
    f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "5500000000 ns");
    assert_eq!(usage(&f.sample_at(1.0, None), 1200).engines["gfx"], 50);
    // Backwards: no progress past 5.5 s of busy time yet.
    f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "5400000000 ns");
    assert_eq!(usage(&f.sample_at(2.0, None), 1200).engines["gfx"], 0);
    // Caught up: measured from the larger value, 2.3 s busy in 2 s.
    f.set("proc/1200/fdinfo/9", "drm-engine-gfx", "7800000000 ns");
    let s = f.sample_at(3.0, None);
    assert_eq!(usage(&s, 1200).engines["gfx"], 100);
    let notes = f.source.take_process_notes();
    assert!(
        has_note(
            &notes[&1200],
            "engine gfx on 0000:03:00.0 (client 300) measured 115% over the sample: shown as 100%"
        ),
        "{notes:?}"
    );
}

#[test]
fn an_apu_model_in_gtt_is_spill_with_a_note() {
    let mut f = Fixture::open("amdgpu-apu");
    let s = f.sample_at(0.0, None);
    let d = &s.devices[0];
    assert_eq!(d.name.as_deref(), Some("Phoenix1"));
    assert_eq!(d.memory_total_bytes, Some(512 * MIB));
    assert_eq!(d.memory_used_bytes, Some(100 * MIB));
    assert_eq!(d.shared_memory_used_bytes, Some(26_214_400_000));
    assert_eq!(d.gpu_util_percent, Some(88));
    assert_eq!(d.memory_activity_percent, Some(0), "a measured 0 stays 0");
    assert_eq!(d.temperature_c, Some(61));
    assert_eq!(d.power_w, Some(25.0));
    assert_eq!(d.power_limit_w, None);
    assert_eq!(d.fan_percent, None);
    let clocks = d.clocks.as_ref().unwrap();
    assert_eq!(
        (clocks.graphics_mhz, clocks.graphics_max_mhz, clocks.memory_mhz),
        (Some(2700), Some(2700), None)
    );
    assert!(
        has_note(&d.notes, "integrated GPU (an AMD APU (no VRAM vendor))"),
        "{:?}",
        d.notes
    );
    assert!(has_note(&d.notes, "VRAM here is a 512.0 MiB carve-out of system RAM"));

    let u = usage(&s, 2000);
    assert_eq!(u.vram_bytes, Some(5348 * 1024));
    assert_eq!(u.spill_bytes, Some(25_258_000 * 1024));
    assert_eq!(u.paged_bytes, Some(0));
    let u = usage(&s, 2100);
    assert_eq!((u.vram_bytes, u.spill_bytes), (Some(64 * MIB), Some(12 * MIB)));
    let notes = f.source.take_process_notes();
    assert!(
        has_note(
            &notes[&2000],
            "24.09 GiB of GTT/system memory on integrated GPU 0000:c4:00.0 is shown as Spill"
        ),
        "{notes:?}"
    );
    assert!(has_note(&notes[&2000], "ROCm/HIP"));
    assert!(!notes.contains_key(&2100), "12 MiB of GTT is no story");
}

#[test]
fn intel_igpu_and_arc_with_local_memory_after_nvml_devices() {
    let mut f = Fixture::copy("intel");
    f.source.set_index_base(2);
    let s = f.sample_at(0.0, None);
    assert_eq!(s.devices.iter().map(|d| d.index).collect::<Vec<_>>(), [2, 3]);
    let (igpu, arc) = (&s.devices[0], &s.devices[1]);
    assert_eq!(igpu.pci_bus_id.as_deref(), Some("0000:00:02.0"));
    assert_eq!(igpu.vendor, "Intel");
    assert_eq!(igpu.name.as_deref(), Some("Raptor Lake-S GT1 [UHD Graphics 770]"));
    let c = igpu.clocks.as_ref().unwrap();
    assert_eq!((c.graphics_mhz, c.graphics_max_mhz), (Some(350), Some(1650)));
    assert!(has_note(
        &igpu.notes,
        "integrated GPU (Intel's integrated GPU (PCI 00:02.0))"
    ));
    assert!(!has_note(&igpu.notes, "throttled"), "{:?}", igpu.notes);
    assert_eq!(igpu.memory_total_bytes, None);
    assert_eq!(igpu.pcie, None);

    assert_eq!(arc.pci_bus_id.as_deref(), Some("0000:03:00.0"));
    assert_eq!(arc.name.as_deref(), Some("DG2 [Arc A770]"));
    let c = arc.clocks.as_ref().unwrap();
    assert_eq!((c.graphics_mhz, c.graphics_max_mhz), (Some(2400), Some(2400)));
    assert!(
        has_note(&arc.notes, "throttled (gt0): PL1 (sustained power limit)"),
        "{:?}",
        arc.notes
    );
    assert!(has_note(
        &arc.notes,
        "i915 publishes neither the size nor the use of local memory"
    ));
    assert_eq!(arc.memory_total_bytes, None);
    assert_eq!(arc.power_limit_w, Some(190.0));
    assert_eq!(arc.power_w, None, "power needs two energy readings");
    assert_eq!(arc.temperature_c, None);
    assert_eq!(arc.pcie.as_ref().unwrap().link_gen, Some(1));

    let u = usage(&s, 3000);
    assert_eq!(u.device, 3);
    assert_eq!(
        (u.vram_bytes, u.spill_bytes, u.paged_bytes),
        (Some(6 << 30), Some(8 * MIB), None)
    );
    let u = usage(&s, 3100);
    assert_eq!(u.device, 2);
    assert_eq!((u.vram_bytes, u.spill_bytes), (None, Some(6044 * 1024)));
    let u = usage(&s, 3200);
    assert_eq!((u.vram_bytes, u.spill_bytes), (None, Some(96 * MIB)));
    let notes = f.source.take_process_notes();
    assert!(has_note(
        &notes[&3200],
        "32.0 MiB of DRM buffers on 0000:00:02.0 (client 2) are shared"
    ));
    assert!(has_note(
        &notes[&3200],
        "96.0 MiB of GTT/system memory on integrated GPU 0000:00:02.0"
    ));
    assert!(!notes.contains_key(&3000), "{notes:?}");

    // One second later: 2 s of compute on 4 engines, 45 J used.
    f.set("proc/3000/fdinfo/6", "drm-engine-compute", "32000000000 ns");
    std::fs::write(
        f.root.join(
            "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:03:00.0/hwmon/hwmon4/energy1_input",
        ),
        "123501789000\n",
    )
    .unwrap();
    let s = f.sample_at(1.0, Some(3));
    assert_eq!(s.devices.len(), 1, "only device 3");
    assert_eq!(s.devices[0].power_w, Some(45.0));
    assert_eq!(pids(&s), [3000]);
    assert_eq!(
        usage(&s, 3000).engines,
        engines(&[
            ("compute", 50),
            ("copy", 0),
            ("render", 0),
            ("video", 0),
            ("video-enhance", 0)
        ])
    );
}

#[test]
fn xe_cycles_give_percent_and_shared_vram_is_not_counted() {
    let mut f = Fixture::copy("xe");
    let s = f.sample_at(0.0, None);
    let d = &s.devices[0];
    assert_eq!(d.name.as_deref(), Some("Battlemage G21 [Arc B580]"));
    assert_eq!(d.memory_total_bytes, Some(12 << 30));
    assert_eq!(d.memory_used_bytes, None);
    assert_eq!(d.temperature_c, Some(55), "the pkg sensor");
    assert_eq!(d.power_limit_w, Some(190.0));
    assert_eq!(d.fan_percent, None, "an rpm reading is not a percent");
    let c = d.clocks.as_ref().unwrap();
    assert_eq!((c.graphics_mhz, c.graphics_max_mhz), (Some(2850), Some(2850)));
    assert!(has_note(&d.notes, "throttled (gt0): thermal"), "{:?}", d.notes);
    assert!(!has_note(&d.notes, "throttled (gt1)"));
    assert!(has_note(&d.notes, "xe publishes the size of VRAM but not its use"));
    let u = usage(&s, 4000);
    // 23992 KiB resident, 16 MiB of it shared; gtt 192 KiB + system 0.
    assert_eq!(u.vram_bytes, Some(23992 * 1024 - 16 * MIB));
    assert_eq!(u.spill_bytes, Some(192 * 1024));
    assert_eq!(u.paged_bytes, None);
    assert!(u.engines.is_empty());

    let file = "proc/4000/fdinfo/3";
    f.set(file, "drm-cycles-rcs", &(28_257_900u64 + 500_000_000).to_string());
    f.set(file, "drm-cycles-ccs", "2000000000");
    for e in ["rcs", "bcs", "vcs", "vecs", "ccs"] {
        f.set(file, &format!("drm-total-cycles-{e}"), "8655183225");
    }
    let s = f.sample_at(1.0, None);
    assert_eq!(
        usage(&s, 4000).engines,
        engines(&[("bcs", 0), ("ccs", 50), ("rcs", 50), ("vcs", 0), ("vecs", 0)])
    );
}

#[test]
fn a_soc_gpu_and_an_unknown_display_driver_with_a_malformed_fdinfo() {
    let mut f = Fixture::copy("soc");
    let s = f.sample_at(0.0, None);
    assert_eq!(s.devices.len(), 2);
    let (display, gpu) = (&s.devices[0], &s.devices[1]);
    assert_eq!(display.vendor, "unknown");
    assert_eq!(display.name.as_deref(), Some("rockchip-drm"));
    assert_eq!(display.pci_bus_id, None);
    assert!(
        has_note(&display.notes, "driver rockchip-drm; nodes card0"),
        "{:?}",
        display.notes
    );
    assert_eq!(gpu.vendor, "Arm");
    assert_eq!(gpu.name.as_deref(), Some("panfrost"));
    assert!(has_note(&gpu.notes, "driver panfrost; nodes card1, renderD128"));
    assert!(has_note(&gpu.notes, "integrated GPU (a SoC GPU (not on PCI))"));
    let u = usage(&s, 5000);
    assert_eq!(u.device, 1);
    assert_eq!((u.vram_bytes, u.spill_bytes), (None, Some(36496 * 1024)));
    let notes = f.source.take_process_notes();
    assert!(
        has_note(&notes[&5000], "fdinfo of fd 7 had 2 unreadable lines"),
        "{notes:?}"
    );

    // fragment: busy time; vertex-tiler (its ns line is broken): cycles
    // at the top frequency.
    let file = "proc/5000/fdinfo/7";
    f.set(
        file,
        "drm-engine-fragment",
        &(1_846_584_880u64 + 400_000_000).to_string(),
    );
    f.set(
        file,
        "drm-cycles-vertex-tiler",
        &(52_617_357u64 + 399_999_993).to_string(),
    );
    let s = f.sample_at(1.0, None);
    assert_eq!(
        usage(&s, 5000).engines,
        engines(&[("fragment", 40), ("vertex-tiler", 50)])
    );
}

#[test]
fn processes_that_exit_or_close_mid_scan_are_normal() {
    let mut f = Fixture::copy("amdgpu-dgpu");
    assert_eq!(pids(&f.sample_at(0.0, None)), [1000, 1001, 1200, 1300]);
    // 1200 exits; 1300 closes its fd (the link and fdinfo go).
    std::fs::remove_dir_all(f.root.join("proc/1200")).unwrap();
    std::fs::remove_file(f.root.join("proc/1300/fdinfo/12")).unwrap();
    std::fs::remove_file(f.root.join("proc/1300/fd/12")).unwrap();
    let s = f.sample_at(1.0, None);
    assert_eq!(pids(&s), [1000, 1001]);
    assert!(s.devices[0].process_list_complete);
    // And once every process has been looked at again.
    let s = f.sample_at(7.0, None);
    assert_eq!(f.source.scan_stats().fd_dirs_read, 6, "all that are left");
    assert_eq!(pids(&s), [1000, 1001]);
}

#[test]
fn new_processes_at_once_and_new_fds_of_known_ones_within_the_period() {
    let mut f = Fixture::copy("amdgpu-dgpu");
    f.sample_at(0.0, None);
    let text = std::fs::read_to_string(f.root.join("proc/1300/fdinfo/12"))
        .unwrap()
        .replace("drm-client-id:\t100", "drm-client-id:\t777");
    let new = f.root.join("proc/7000");
    std::fs::create_dir_all(new.join("fd")).unwrap();
    std::fs::create_dir_all(new.join("fdinfo")).unwrap();
    std::os::unix::fs::symlink("/dev/dri/renderD128", new.join("fd/3")).unwrap();
    std::fs::write(new.join("fdinfo/3"), &text).unwrap();
    // 1400, seen before, opens a DRM fd: found when its turn comes.
    std::os::unix::fs::symlink("/dev/dri/renderD128", f.root.join("proc/1400/fd/9")).unwrap();
    std::fs::create_dir_all(f.root.join("proc/1400/fdinfo")).unwrap();
    std::fs::write(
        f.root.join("proc/1400/fdinfo/9"),
        text.replace("drm-client-id:\t777", "drm-client-id:\t778"),
    )
    .unwrap();

    let s = f.sample_at(1.0, None);
    let stats = f.source.scan_stats();
    assert!(!stats.full_scan);
    // The new PID, and a fifth of the 8 known (1000 and 1001).
    assert_eq!(stats.fd_dirs_read, 1 + 2);
    assert_eq!(stats.fdinfo_read, 7);
    assert_eq!(pids(&s), [1000, 1001, 1200, 1300, 7000]);
    assert_eq!(usage(&s, 7000).vram_bytes, Some(256 * MIB));

    // Within one rescan period every process has had its turn.
    let mut picked_up = None;
    for t in 2..=5 {
        if pids(&f.sample_at(t as f64, None)).contains(&1400) {
            picked_up.get_or_insert(t);
        }
    }
    assert_eq!(picked_up, Some(3), "1200 and 1300 at 2 s, 1400 at 3 s");
}

#[test]
fn every_process_is_looked_at_again_within_the_period() {
    let mut f = Fixture::open("amdgpu-dgpu");
    f.source.set_rescan_every(Duration::from_secs(2));
    f.sample_at(0.0, None);
    assert!(f.source.scan_stats().full_scan);
    assert_eq!(f.source.scan_stats().fd_dirs_read, 7);
    // Half a period: half of the 7 processes (rounded up), in turn.
    f.sample_at(1.0, None);
    assert!(!f.source.scan_stats().full_scan);
    assert_eq!(f.source.scan_stats().fd_dirs_read, 4);
    f.sample_at(2.0, None);
    assert_eq!(f.source.scan_stats().fd_dirs_read, 4);
    // A long pause: everyone once, not more.
    f.sample_at(60.0, None);
    assert_eq!(f.source.scan_stats().fd_dirs_read, 7);
}

#[test]
fn an_fd_number_reused_for_a_drm_file_is_found_on_a_deep_look() {
    let mut f = Fixture::copy("amdgpu-dgpu");
    f.source.set_rescan_every(Duration::from_secs(1));
    f.sample_at(0.0, None);
    let links = f.source.scan_stats().links_read;
    assert_eq!(links, 17, "every link on the first look");
    // 1400 closes its stderr (fd 2) and opens the render node, which
    // gets the same number.
    std::fs::remove_file(f.root.join("proc/1400/fd/2")).unwrap();
    std::os::unix::fs::symlink("/dev/dri/renderD128", f.root.join("proc/1400/fd/2")).unwrap();
    std::fs::create_dir_all(f.root.join("proc/1400/fdinfo")).unwrap();
    std::fs::copy(f.root.join("proc/1300/fdinfo/12"), f.root.join("proc/1400/fdinfo/2")).unwrap();
    std::fs::write(
        f.root.join("proc/1400/fdinfo/2"),
        std::fs::read_to_string(f.root.join("proc/1300/fdinfo/12"))
            .unwrap()
            .replace("drm-client-id:\t100", "drm-client-id:\t555"),
    )
    .unwrap();
    let mut found_at = None;
    for t in 1..=(DEEP_EVERY + 1) {
        let s = f.sample_at(t as f64, None);
        if t == 1 {
            assert_eq!(f.source.scan_stats().fd_dirs_read, 7, "everyone, each second");
            assert_eq!(f.source.scan_stats().links_read, 0, "no new fd number: no link read");
        }
        if found_at.is_none() && pids(&s).contains(&1400) {
            found_at = Some(t);
        }
    }
    // The deep look at PID 1400 comes when (visits + 1400) % 12 == 0.
    assert_eq!(found_at, Some((DEEP_EVERY - 1400 % DEEP_EVERY) % DEEP_EVERY));
}

#[test]
fn one_sample_looks_again_at_no_more_than_max_relist_processes() {
    let f = Fixture::copy("amdgpu-dgpu");
    for pid in 20_000..20_250 {
        let fd = f.root.join(format!("proc/{pid}/fd"));
        std::fs::create_dir_all(&fd).unwrap();
        std::os::unix::fs::symlink("/dev/null", fd.join("0")).unwrap();
    }
    let mut f = Fixture::at(f.root.clone(), f._copy);
    f.sample_at(0.0, None);
    assert_eq!(f.source.scan_stats().fd_dirs_read, 257);
    f.sample_at(60.0, None);
    assert_eq!(f.source.scan_stats().fd_dirs_read, MAX_RELIST);
    // Links only on the deep looks (one process in DEEP_EVERY).
    assert!(f.source.scan_stats().links_read < 20, "{:?}", f.source.scan_stats());
}

#[test]
fn devices_nvml_reads_are_left_to_it() {
    let mut f = Fixture::open("amdgpu-dgpu");
    f.source.set_covered_pci(["00000000:03:00.0"]);
    let before = f.source.backend();
    assert_eq!(before.detail, "no DRM GPU besides the devices NVML reads");
    let s = f.sample_at(0.0, None);
    assert!(s.devices.is_empty() && s.processes.is_empty());
    let b = f.source.backend();
    assert_eq!(b.status, BackendStatus::Unavailable);
    assert_eq!(b.detail, "no DRM GPU besides the devices NVML reads");
}

#[test]
fn an_unreadable_proc_is_an_error_not_an_empty_list() {
    let mut f = Fixture::open("amdgpu-dgpu");
    f.source.proc_root = PathBuf::from("/nonexistent/proc");
    let e = f.source.sample(None).unwrap_err();
    assert!(e.starts_with("cannot list /nonexistent/proc"), "{e}");
    assert_eq!(f.source.backend().status, BackendStatus::Error);
}

#[test]
fn this_machine_without_a_drm_gpu_says_so_cleanly() {
    let mut source = DrmSource::new(PathBuf::from("/proc"), PathBuf::from("/sys"));
    let present = source.is_present();
    let before = source.backend();
    let sample = source
        .sample(None)
        .expect("reading the real /proc and /sys never fails here");
    if present {
        eprintln!("this machine has DRM devices: {}", source.backend().detail);
        assert_eq!(before.status, BackendStatus::Ok);
        return;
    }
    assert!(sample.devices.is_empty() && sample.processes.is_empty());
    assert_eq!(source.scan_stats().processes, 0, "no device: /proc is not even listed");
    for b in [before, source.backend()] {
        assert_eq!(b.name, "drm");
        assert_eq!(b.status, BackendStatus::Unavailable);
        assert_eq!(b.detail, "no DRM GPU (no /sys/class/drm/card*)");
    }
    assert!(source.take_process_notes().is_empty());
}

#[test]
fn regions_are_classed_by_name() {
    for (name, want) in [
        ("vram", Class::Vram),
        ("vram0", Class::Vram),
        ("local0", Class::Vram),
        ("gtt", Class::Spill),
        ("system0", Class::Spill),
        ("system", Class::Spill),
        ("memory", Class::Spill),
        ("cpu", Class::Paged),
        ("stolen", Class::Other),
        ("gds", Class::Other),
    ] {
        assert_eq!(class(name), want, "{name}");
    }
}

#[test]
fn an_amdgpu_cards_health_comes_from_gpu_metrics_ras_and_hwmon() {
    use crate::snapshot::health::{Mark, PowerLimits, TemperatureLimits};
    let dev = "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0";
    let mut f = Fixture::copy("amdgpu-dgpu");
    let s = f.sample_at(0.0, None);
    let d = &s.devices[0];
    let h = d.health.as_ref().expect("gpu_metrics read");
    assert_eq!(h.throttle_reasons, Some(vec![]));
    assert_eq!(h.throttle_source.as_deref(), Some("gpu_metrics"));
    assert_eq!(
        h.temperature_limits,
        Some(TemperatureLimits {
            slowdown_c: Some(100),
            shutdown_c: Some(105),
            ..TemperatureLimits::default()
        }),
        "the edge sensor's, as the temperature is"
    );
    assert_eq!(
        h.power_limits,
        Some(PowerLimits {
            enforced_w: None,
            current_w: Some(327.0),
            default_w: Some(327.0),
            min_w: Some(294.0),
            max_w: Some(360.0),
        })
    );
    // A consumer card: no RAS, so no ECC figure, and the reason why.
    assert_eq!(h.ecc, None);
    assert!(h.unavailable["ecc"].contains("ras/ absent"), "{:?}", h.unavailable);
    assert!(h.unavailable.contains_key("violations") && h.xid_count == 0);
    assert_eq!(h.mark(d.temperature_c), Mark::Ok);
    assert!(d.errors.is_empty(), "{:?}", d.errors);

    // Held down by its power limit and the hotspot; then RAS errors; then
    // free again but 96 °C against its 100 °C.
    let metrics = f.root.join(dev).join("gpu_metrics");
    let mut table = std::fs::read(&metrics).unwrap();
    table[112..120].copy_from_slice(&((1u64 << 0) | (1u64 << 36)).to_le_bytes());
    std::fs::write(&metrics, &table).unwrap();
    let s = f.sample_at(1.0, None);
    let d = &s.devices[0];
    assert_eq!(
        d.health.as_ref().unwrap().mark(d.temperature_c),
        Mark::Throttled(vec!["power limit (PPT0)".into(), "thermal (hotspot)".into()])
    );
    let ras = f.root.join(dev).join("ras");
    std::fs::create_dir(&ras).unwrap();
    std::fs::write(ras.join("umc_err_count"), "ue: 2\nce: 5\n").unwrap();
    std::fs::write(ras.join("gfx_err_count"), "ue: 0\nce: 1\n").unwrap();
    let s = f.sample_at(2.0, None);
    let h = s.devices[0].health.clone().unwrap();
    assert_eq!(h.ecc.as_ref().and_then(|e| e.volatile_uncorrected), Some(2));
    assert_eq!(h.ecc.as_ref().and_then(|e| e.volatile_corrected), Some(6));
    assert_eq!(
        h.line(s.devices[0].temperature_c).as_deref(),
        Some("errors: 2 uncorrected ECC errors, throttled: power limit (PPT0), thermal (hotspot)")
    );
    std::fs::remove_dir_all(&ras).unwrap();
    table[112..120].copy_from_slice(&0u64.to_le_bytes());
    std::fs::write(&metrics, &table).unwrap();
    std::fs::write(f.root.join(dev).join("hwmon/hwmon2/temp1_input"), "96000\n").unwrap();
    let s = f.sample_at(3.0, None);
    let d = &s.devices[0];
    assert_eq!(
        d.health.as_ref().unwrap().mark(d.temperature_c),
        Mark::Hot("96 °C, slowdown at 100 °C".into())
    );

    // A table the kernel cannot have written: a reason, and no mark claimed.
    std::fs::write(&metrics, b"\x10\x00\x01\x03garbage").unwrap();
    let s = f.sample_at(4.0, None);
    assert_eq!(s.devices[0].health, None);
}
