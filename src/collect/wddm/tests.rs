use super::*;

fn ids_adapter(low: u32) -> Adapter {
    Adapter {
        luid: Luid { high: 0, low },
        key: AdapterKey::Ids(PciIds {
            vendor: 0x10DE,
            device: 0x2684,
            subsystem: 0,
        }),
    }
}

#[test]
fn d3dkmt_table_with_addresses_is_kept_and_dxgi_not_asked() {
    let d3dkmt = Ok((vec![Adapter::at(RTX, 1, 0, 0)], "D3DKMTEnumAdapters2"));
    let table = choose_adapter_table(d3dkmt, || panic!("DXGI asked"));
    assert_eq!(
        table,
        Ok((vec![Adapter::at(RTX, 1, 0, 0)], "D3DKMTEnumAdapters2".to_string()))
    );
}

#[test]
fn empty_d3dkmt_table_falls_back_to_dxgi() {
    let table = choose_adapter_table(Ok((vec![], "D3DKMTEnumAdapters2")), || Ok(vec![ids_adapter(7)]));
    let (adapters, how) = table.unwrap();
    assert_eq!(adapters, vec![ids_adapter(7)]);
    assert!(how.starts_with("DXGI PCI ids ("), "{how}");
    assert!(
        how.contains("D3DKMTQueryAdapterInfo gave no adapter's PCI address"),
        "{how}"
    );
}

#[test]
fn empty_d3dkmt_table_and_no_dxgi_is_an_error_naming_both() {
    let table = choose_adapter_table(Ok((vec![], "D3DKMTEnumAdapters2")), || Err("no dxgi.dll".into()));
    let why = table.unwrap_err();
    assert!(
        why.contains("D3DKMTQueryAdapterInfo gave no adapter's PCI address"),
        "{why}"
    );
    assert!(why.contains("DXGI lists no adapters: no dxgi.dll"), "{why}");
}

#[test]
fn failed_d3dkmt_falls_back_to_dxgi() {
    let table = choose_adapter_table(Err("gdi32 has no D3DKMTQueryAdapterInfo".into()), || {
        Ok(vec![ids_adapter(7)])
    });
    assert_eq!(
        table,
        Ok((
            vec![ids_adapter(7)],
            "DXGI PCI ids (gdi32 has no D3DKMTQueryAdapterInfo)".to_string()
        ))
    );
}

const MIB: u64 = 1 << 20;
const RTX: Luid = Luid { high: 0, low: 0xC6F5 };

/// A recorded Get-Counter dump as one reading.
fn dump(name: &str, at_ms: u64) -> Reading {
    let path = format!("{}/tests/data/wddm/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut r = Reading::new(at_ms);
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        if let Some(v) = parse_line(line).unwrap_or_else(|e| panic!("{name}: {e}")) {
            r.add(v);
        }
    }
    r
}

fn nvml_device(index: u32, name: &str, bus: &str) -> Device {
    Device {
        index,
        backend: "nvml".into(),
        vendor: "NVIDIA".into(),
        name: Some(name.into()),
        pci_bus_id: Some(bus.into()),
        process_list_complete: true,
        ..Device::default()
    }
}

fn context(pid: u32, luid: Luid) -> ContextKey {
    ContextKey { pid, luid, dup: 0 }
}

#[test]
fn instance_names_parse_in_either_case_and_bad_ones_do_not() {
    let i = parse_instance("pid_1234_luid_0x00000000_0x0000C6F5_phys_0_eng_3_engtype_VideoDecode").unwrap();
    assert_eq!(i.pid, Some(1234));
    assert_eq!(i.luid, RTX);
    assert_eq!((i.phys, i.eng, i.engtype.as_deref()), (0, Some(3), Some("videodecode")));
    let i = parse_instance("pid_88_luid_0x00000001_0x0001f3c2_phys_1_eng_5_engtype_compute_1#2").unwrap();
    assert_eq!(i.luid, Luid { high: 1, low: 0x1F3C2 });
    assert_eq!((i.phys, i.engtype.as_deref(), i.dup), (1, Some("compute_1"), 2));
    let i = parse_instance("luid_0x00000000_0x0000c6f5_phys_0_part_0").unwrap();
    assert_eq!((i.pid, i.part), (None, Some(0)));
    assert_eq!(parse_instance("luid_0x00000000_0x0000c6f5_phys_0").unwrap().pid, None);
    for bad in [
        "",
        "_Total",
        "pid_x_luid_0x0_0x1_phys_0",
        "pid_1_luid_0x0_phys_0",
        "pid_1_luid_0x0_0x123456789_phys_0",
        "pid_1_luid_0x0_0x1_phys_0_eng_1",
        "pid_1_luid_0x0_0x1_phys_0_eng_1_engtype_",
        "pid_1_luid_0x0_0x1_phys_0_extra",
        "pid_1_luid_0x0_0x1_phys_0#",
        "pid_99999999999_luid_0x0_0x1_phys_0",
    ] {
        assert_eq!(parse_instance(bad), None, "{bad:?}");
    }
}

#[test]
fn counter_lines_parse_and_garbage_is_an_error_not_a_panic() {
    let v = parse_line("\\\\pc\\gpu process memory(pid_4_luid_0x0_0x1_phys_0)\\local usage\t1.5E+09")
        .unwrap()
        .unwrap();
    assert_eq!(
        (v.set, v.counter, v.value),
        (CounterSet::ProcessMemory, Counter::LocalUsage, 1_500_000_000)
    );
    // PDH's own spelling, without a machine name.
    let v = parse_line("\\GPU Engine(pid_4_luid_0x0_0x1_phys_0_eng_0_engtype_3D)\\Running Time\t42")
        .unwrap()
        .unwrap();
    assert_eq!(v.instance.engtype.as_deref(), Some("3d"));
    // Counters not read are skipped, not errors.
    let skipped = "\\\\pc\\gpu engine(pid_4_luid_0x0_0x1_phys_0_eng_0_engtype_3d)\\utilization percentage\t3";
    assert_eq!(parse_line(skipped), Ok(None));
    assert_eq!(parse_line("\\\\pc\\processor(_total)\\% processor time\t3"), Ok(None));
    for bad in [
        "no tab here",
        "\\\\pc\\gpu process memory(pid_4_luid_0x0_0x1_phys_0)\\local usage\t-5",
        "\\\\pc\\gpu process memory(pid_4_luid_0x0_0x1_phys_0)\\local usage\tNaN",
        "\\\\pc\\gpu process memory(oops)\\local usage\t5",
        "\\\\pc\\gpu process memory\\local usage\t5",
        "\\\\pc\t5",
        "\t",
    ] {
        assert!(parse_line(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn dwm_is_charged_its_local_usage_not_its_tenfold_dedicated_usage() {
    let r = dump("desktop-4090-t0.txt", 0);
    let dwm = r.memory[&context(1432, RTX)];
    assert_eq!(dwm.dedicated, Some(10 * dwm.local.unwrap()), "the recorded case");
    let s = split(&dwm);
    assert_eq!(s.vram, Some(192 * MIB));
    assert_eq!(s.spill, Some(24 * MIB));
    assert!(!s.fallback);
    // Committed 256 MiB, resident 192 + 24: 40 MiB resident nowhere.
    assert_eq!(s.paged, Some(40 * MIB));
}

#[test]
fn a_spilled_process_shows_more_spill_than_vram() {
    let r = dump("desktop-4090-t0.txt", 0);
    let s = split(&r.memory[&context(6604, RTX)]);
    assert!(s.spill.unwrap() > s.vram.unwrap());
    assert_eq!((s.vram, s.spill), (Some(3174 * MIB), Some(5530 * MIB)));
    assert_eq!(s.paged, Some(0), "all of it is resident somewhere");
}

#[test]
fn paged_is_floored_at_zero_and_unknown_without_its_inputs() {
    let m = ProcessMemory {
        local: Some(100),
        non_local: Some(50),
        total_committed: Some(120),
        ..ProcessMemory::default()
    };
    assert_eq!(split(&m).paged, Some(0));
    let m = ProcessMemory {
        local: Some(100),
        total_committed: Some(300),
        ..ProcessMemory::default()
    };
    assert_eq!(
        (split(&m).vram, split(&m).spill, split(&m).paged),
        (Some(100), None, None)
    );
}

#[test]
fn dedicated_and_shared_stand_in_only_when_local_counters_are_missing() {
    let r = dump("no-local-usage.txt", 0);
    let s = split(&r.memory[&context(1044, RTX)]);
    assert_eq!((s.vram, s.spill, s.paged), (Some(1920 * MIB), Some(320 * MIB), None));
    assert!(s.fallback);
    let mut devices = [nvml_device(0, "NVIDIA GeForce RTX 3060", "00000000:2B:00.0")];
    let luids = BTreeMap::from([(RTX, 0)]);
    let a = attribute(&r, &BTreeMap::new(), &luids, &mut devices, 1, "wddm", true);
    let c = a.contexts.iter().find(|c| c.context.pid == 1044).unwrap();
    assert!(c.notes[0].contains("Dedicated and Shared Usage"), "{:?}", c.notes);
    assert_eq!(
        split(&ProcessMemory::default()),
        Split::default(),
        "nothing known is nothing"
    );
}

#[test]
fn engine_percent_comes_from_running_time_over_two_readings() {
    let mut clock = EngineClock::default();
    assert!(
        clock.percents(&dump("desktop-4090-t0.txt", 10_000)).is_empty(),
        "one reading tells nothing"
    );
    let p = clock.percents(&dump("desktop-4090-t1.txt", 11_000));
    let python = &p[&context(9120, RTX)];
    assert_eq!(python["3d"], 95);
    assert_eq!(python["copy"], 1);
    assert_eq!(python["cuda"], 0);
    assert_eq!(p[&context(7788, RTX)]["videodecode"], 20);
    // The same reading again (no new sample yet) gives the same answer.
    assert_eq!(
        clock.percents(&dump("desktop-4090-t1.txt", 11_000))[&context(9120, RTX)]["3d"],
        95
    );
    // A reset counter gives no figure rather than a wrapped one.
    let mut r = dump("desktop-4090-t0.txt", 12_000);
    r.at_ms = 12_000;
    let p = clock.percents(&r);
    let python = p
        .get(&context(9120, RTX))
        .expect("engines that did not go back still have a figure");
    assert!(!python.contains_key("3d"), "{python:?}");
    assert_eq!(python.get("cuda"), Some(&0), "{python:?}");
}

fn engine(pid: u32, dup: u32, eng: u32, engtype: &str, time: u64) -> CounterValue {
    CounterValue {
        set: CounterSet::Engine,
        counter: Counter::RunningTime,
        instance: parse_instance(&format!(
            "pid_{pid}_luid_0x0_0x1_phys_0_eng_{eng}_engtype_{engtype}#{dup}"
        ))
        .unwrap(),
        value: time,
    }
}

fn ctx(pid: u32, dup: u32) -> ContextKey {
    ContextKey {
        pid,
        luid: Luid { high: 0, low: 1 },
        dup,
    }
}

#[test]
fn an_engine_new_in_a_known_context_has_no_figure_but_a_new_context_counts_whole() {
    let mut clock = EngineClock::default();
    let mut r0 = Reading::new(10_000);
    r0.add(engine(1, 0, 0, "3d", 100));
    clock.percents(&r0);
    // One second later: context 1 shows an engine it did not list before,
    // with a lifetime's worth of time; context 2 is new.
    let mut r1 = Reading::new(11_000);
    r1.add(engine(1, 0, 0, "3d", 100));
    r1.add(engine(1, 0, 1, "copy", 10_000_000));
    r1.add(engine(2, 0, 0, "3d", 5_000_000));
    let p = clock.percents(&r1);
    assert_eq!(p[&ctx(1, 0)].get("copy"), None, "not a false 100 %: {p:?}");
    assert_eq!(p[&ctx(1, 0)]["3d"], 0);
    assert_eq!(p[&ctx(2, 0)]["3d"], 50, "started inside the window");
}

#[test]
fn a_vanished_dup_resets_the_baselines_of_its_siblings() {
    let mut clock = EngineClock::default();
    let mut r0 = Reading::new(10_000);
    r0.add(engine(5, 0, 0, "3d", 0));
    r0.add(engine(5, 1, 0, "3d", 50_000_000));
    r0.add(engine(6, 0, 0, "3d", 0));
    clock.percents(&r0);
    // #0 went away: #1 is #0 now, with its own (larger) time.
    let mut r1 = Reading::new(11_000);
    r1.add(engine(5, 0, 0, "3d", 51_000_000));
    r1.add(engine(6, 0, 0, "3d", 2_000_000));
    let p = clock.percents(&r1);
    assert!(
        !p.contains_key(&ctx(5, 0)),
        "not 100 % from another context's baseline: {p:?}"
    );
    assert_eq!(p[&ctx(6, 0)]["3d"], 20, "other processes are untouched");
    // The next reading measures against the new baseline.
    let mut r2 = Reading::new(12_000);
    r2.add(engine(5, 0, 0, "3d", 52_000_000));
    assert_eq!(clock.percents(&r2)[&ctx(5, 0)]["3d"], 10);
    let before = BTreeSet::from([ctx(5, 0), ctx(5, 1), ctx(6, 0)]);
    let now = BTreeSet::from([ctx(5, 0), ctx(6, 0)]);
    assert_eq!(renumbered(&before, &now), BTreeSet::from([ctx(5, 0)]));
}

#[test]
fn cuda_on_the_3d_engine_is_explained() {
    let mut clock = EngineClock::default();
    clock.percents(&dump("desktop-4090-t0.txt", 0));
    let t1 = dump("desktop-4090-t1.txt", 1000);
    let engines = clock.percents(&t1);
    let luids = BTreeMap::from([(RTX, 0)]);
    let mut devices = [nvml_device(0, "NVIDIA GeForce RTX 4090", "00000000:01:00.0")];
    let a = attribute(&t1, &engines, &luids, &mut devices, 1, "wddm", true);
    let python = a.contexts.iter().find(|c| c.context.pid == 9120).unwrap();
    let note = cuda_on_3d_note(&["cuda".into(), "pytorch".into()], &python.usage).unwrap();
    assert!(note.contains("3D engine"), "{note}");
    let chrome = a.contexts.iter().find(|c| c.context.pid == 7788).unwrap();
    assert_eq!(cuda_on_3d_note(&["d3d11".into()], &chrome.usage), None);
}

#[test]
fn adapters_match_devices_by_luid_through_the_pci_address_never_by_name() {
    let r = dump("two-rtx3090.txt", 0);
    let (a, b) = (Luid { high: 0, low: 0xE1A0 }, Luid { high: 0, low: 0x1F3C2 });
    let mut devices = [
        nvml_device(0, "NVIDIA GeForce RTX 3090", "00000000:01:00.0"),
        nvml_device(1, "NVIDIA GeForce RTX 3090", "00000000:21:00.0"),
    ];
    // The first LUID is the card on bus 0x21, NVML's second.
    let addresses = [Adapter::at(a, 0x21, 0, 0), Adapter::at(b, 1, 0, 0)];
    let matched = match_devices(&devices, &addresses);
    assert!(matched.ambiguous.is_empty(), "{matched:?}");
    let luids = matched.luids;
    assert_eq!(luids, BTreeMap::from([(a, 1), (b, 0)]));
    let out = attribute(&r, &BTreeMap::new(), &luids, &mut devices, 2, "wddm", true);
    assert!(out.devices.is_empty(), "both adapters are NVML devices");
    let on = |pid: u32| {
        out.contexts
            .iter()
            .find(|c| c.context.pid == pid)
            .unwrap()
            .usage
            .clone()
    };
    assert_eq!((on(4410).device, on(4410).vram_bytes), (1, Some(20 << 30)));
    assert_eq!((on(4412).device, on(4412).vram_bytes), (0, Some(10 << 30)));
    assert_eq!(on(1320).device, 1);
    // Device totals stay NVML's; the shared memory NVML cannot see is added.
    assert_eq!(devices[1].memory_used_bytes, None);
    assert_eq!(devices[1].shared_memory_used_bytes, Some(192 * MIB));
    assert_eq!(devices[0].shared_memory_used_bytes, Some(100 * MIB));
}

#[test]
fn an_address_two_devices_share_matches_neither_and_unmatched_adapters_become_devices() {
    let devices = [
        nvml_device(0, "A", "00000000:01:00.0"),
        nvml_device(1, "B", "00000001:01:00.0"),
    ];
    let matched = match_devices(&devices, &[Adapter::at(RTX, 1, 0, 0)]);
    assert!(matched.luids.is_empty());
    assert_eq!(
        matched.ambiguous[&RTX],
        "1 adapter and 2 devices share PCI address 01:00.0: none is matched"
    );
    assert_eq!(parse_pci_bus_id("00000000:2B:00.1"), Some((0x2B, 0, 1)));
    assert_eq!(parse_pci_bus_id("0000:2b:1f.0"), Some((0x2B, 0x1F, 0)));
    assert_eq!(parse_pci_bus_id("garbage"), None);

    // No match at all: the RTX becomes a device of its own; the
    // software adapter, which holds no local memory, does not.
    let r = dump("desktop-4090-t0.txt", 0);
    let out = attribute(&r, &BTreeMap::new(), &BTreeMap::new(), &mut [], 0, "wddm", true);
    assert_eq!(out.devices.len(), 1);
    let d = &out.devices[0];
    assert_eq!((d.index, d.backend.as_str()), (0, "wddm"));
    assert_eq!(d.memory_used_bytes, Some(12_650_020_864), "Local Usage of the adapter");
    assert_eq!(d.memory_total_bytes, None, "the counters do not say");
    assert!(out.contexts.iter().all(|c| c.context.luid == RTX));
    assert_eq!(out.contexts.len(), 4);
}

/// An adapter as DXGI describes it: LUID and PCI ids, no address.
fn described(luid: Luid, vendor: u16, device: u16, subsystem: u32) -> Adapter {
    Adapter {
        luid,
        key: AdapterKey::Ids(PciIds {
            vendor,
            device,
            subsystem,
        }),
    }
}

fn with_ids(mut d: Device, device: u16, subsystem: u32) -> Device {
    d.pci_ids = Some(PciIds {
        vendor: 0x10DE,
        device,
        subsystem,
    });
    d
}

#[test]
fn without_an_address_adapters_match_devices_by_pci_ids_each_side_holds_once() {
    let (a, b, basic) = (
        Luid { high: 0, low: 0xE1A0 },
        Luid { high: 0, low: 0x1F3C2 },
        Luid { high: 0, low: 0x9 },
    );
    let devices = [
        with_ids(
            nvml_device(0, "NVIDIA GeForce RTX 4090", "00000000:01:00.0"),
            0x2684,
            0x16F1_10DE,
        ),
        with_ids(
            nvml_device(1, "NVIDIA GeForce RTX 4080", "00000000:21:00.0"),
            0x2704,
            0x1703_10DE,
        ),
    ];
    // DXGI lists the 4080 first; its order says nothing.
    let adapters = [
        described(a, 0x10DE, 0x2704, 0x1703_10DE),
        described(b, 0x10DE, 0x2684, 0x16F1_10DE),
        described(basic, 0x1414, 0x008C, 0),
    ];
    let matched = match_devices(&devices, &adapters);
    assert_eq!(matched.luids, BTreeMap::from([(a, 1), (b, 0)]));
    assert!(
        matched.ambiguous.is_empty(),
        "no device is a Microsoft adapter: {matched:?}"
    );

    // Another board of the same model (subsystem) is another card.
    let other_board = [described(a, 0x10DE, 0x2684, 0x8933_1043)];
    assert!(match_devices(&devices, &other_board).luids.is_empty());
    // A device without ids (NVML said none) matches nothing by ids, and
    // an address never matches ids.
    let bare = [nvml_device(0, "NVIDIA GeForce RTX 4090", "00000000:01:00.0")];
    assert!(match_devices(&bare, &adapters).luids.is_empty());
    assert!(match_devices(&devices, &[Adapter::at(a, 0x2684, 0, 0)])
        .luids
        .is_empty());
}

#[test]
fn two_identical_cards_are_not_guessed_by_pci_ids_and_say_why() {
    let (a, b) = (Luid { high: 0, low: 0xE1A0 }, Luid { high: 0, low: 0x1F3C2 });
    let twin =
        |index: u32, bus: &str| with_ids(nvml_device(index, "NVIDIA GeForce RTX 4090", bus), 0x2684, 0x16F1_10DE);
    let devices = [twin(0, "00000000:01:00.0"), twin(1, "00000000:21:00.0")];
    let adapters = [
        described(a, 0x10DE, 0x2684, 0x16F1_10DE),
        described(b, 0x10DE, 0x2684, 0x16F1_10DE),
    ];
    let matched = match_devices(&devices, &adapters);
    assert!(matched.luids.is_empty(), "{matched:?}");
    let why = &matched.ambiguous[&a];
    assert_eq!(
        why,
        "2 adapters and 2 devices share PCI ids 10de:2684 (subsystem 16f110de), so DXGI cannot tell them apart and none is matched (D3DKMTQueryAdapterInfo's PCI address is needed)"
    );
    assert_eq!(&matched.ambiguous[&b], why);
    // One adapter (the other card in TCC, not a WDDM adapter) and two
    // devices: still not guessed.
    let one = match_devices(&devices, &adapters[..1]);
    assert!(one.luids.is_empty());
    assert!(
        one.ambiguous[&a].starts_with("1 adapter and 2 devices share"),
        "{one:?}"
    );

    // The adapters become devices of their own, each saying why; the
    // NVML devices get none of their memory.
    let r = dump("two-rtx3090.txt", 0);
    let mut nvml = devices.clone();
    let mut out = attribute(&r, &BTreeMap::new(), &matched.luids, &mut nvml, 2, "wddm", true);
    out.explain(&matched);
    assert_eq!(out.adapters, BTreeMap::from([(a, 2), (b, 3)]));
    assert_eq!(out.devices.len(), 2);
    for d in &out.devices {
        assert!(
            d.notes.iter().any(|n| n.contains("DXGI cannot tell them apart")),
            "{d:?}"
        );
    }
    assert!(
        out.contexts.iter().all(|c| c.usage.device >= 2),
        "none on an NVML device"
    );
    assert_eq!(nvml[0].shared_memory_used_bytes, None);
}

#[test]
fn a_process_total_over_contexts_is_unknown_when_any_part_is() {
    let usage = |vram: Option<u64>, spill: Option<u64>| GpuUsage {
        device: 0,
        vram_bytes: vram,
        spill_bytes: spill,
        paged_bytes: Some(1),
        source: "wddm".into(),
        pairing: None,
        contexts: Vec::new(),
        engines: BTreeMap::new(),
    };
    let c = |dup: u32, u: GpuUsage| ContextUsage {
        context: ContextKey { pid: 7, luid: RTX, dup },
        usage: u,
        notes: vec![],
    };
    let (rows, _) = per_process(vec![c(0, usage(Some(100), Some(5))), c(1, usage(None, Some(6)))]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1.vram_bytes, None, "100 known + unknown is not 100 measured");
    assert_eq!(rows[0].1.spill_bytes, Some(11));
    assert_eq!(rows[0].1.paged_bytes, Some(2));
}

#[test]
fn a_reading_with_a_luid_the_table_lacks_asks_for_a_reread() {
    let r = dump("desktop-4090-t0.txt", 0);
    assert!(unknown_luid(&r, &[]));
    let all: Vec<Adapter> = r
        .contexts()
        .iter()
        .map(|c| c.luid)
        .chain(r.adapters.keys().copied())
        .map(|luid| Adapter::at(luid, 1, 0, 0))
        .collect();
    assert!(!unknown_luid(&r, &all));
}

#[test]
fn a_reading_with_failures_or_drops_is_not_a_complete_process_list() {
    let mut r = dump("desktop-4090-t0.txt", 0);
    let out = attribute(&r, &BTreeMap::new(), &BTreeMap::new(), &mut [], 0, "wddm", true);
    assert!(out.devices[0].process_list_complete);
    let out = attribute(&r, &BTreeMap::new(), &BTreeMap::new(), &mut [], 0, "wddm", false);
    assert!(!out.devices[0].process_list_complete, "a counter read failed");
    r.dropped = 3;
    let out = attribute(&r, &BTreeMap::new(), &BTreeMap::new(), &mut [], 0, "wddm", true);
    assert!(!out.devices[0].process_list_complete, "values were dropped");
}

#[test]
fn readings_are_bounded() {
    let mut r = Reading::new(0);
    for pid in 0..(MAX_INSTANCES as u32 + 10) {
        r.add(CounterValue {
            set: CounterSet::ProcessMemory,
            counter: Counter::LocalUsage,
            instance: parse_instance(&format!("pid_{pid}_luid_0x0_0x1_phys_0")).unwrap(),
            value: 1,
        });
    }
    assert_eq!(r.memory.len(), MAX_INSTANCES);
    assert_eq!(r.dropped, 10);
}
