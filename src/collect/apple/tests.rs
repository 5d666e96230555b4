use super::*;

const GIB: u64 = 1 << 30;

/// JSON as the platform layer would hand it on (`{"$data": "..."}` is CFData).
fn value(j: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match j {
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap()),
        },
        J::String(s) => Value::Str(s.clone()),
        J::Array(a) => Value::Array(a.iter().map(value).collect()),
        J::Object(o) => match o.get("$data") {
            Some(J::String(s)) => Value::Data(s.as_bytes().to_vec()),
            _ => Value::Dict(o.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
        },
        J::Null => unreachable!("the registry has no null"),
    }
}

fn dict(j: serde_json::Value) -> Dict {
    match value(&j) {
        Value::Dict(d) => d,
        other => panic!("not a dictionary: {other:?}"),
    }
}

fn entry(j: &serde_json::Value) -> Entry {
    Entry {
        class: j["class"].as_str().unwrap().into(),
        id: Ok(j["id"].as_u64().unwrap()),
        properties: match j.get("error") {
            Some(e) => Err(e.as_str().unwrap().into()),
            None => Ok(dict(j["properties"].clone())),
        },
    }
}

fn load(name: &str) -> Registry {
    let path = format!("{}/tests/data/apple/{name}", env!("CARGO_MANIFEST_DIR"));
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    Ok(j["accelerators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| Accelerator {
            service: entry(a),
            clients: match a.get("clients_error") {
                Some(e) => Err(e.as_str().unwrap().into()),
                None => Ok(a["clients"].as_array().unwrap().iter().map(entry).collect()),
            },
        })
        .collect())
}

fn share(sample: &Sample, pid: u32) -> Option<Option<u32>> {
    sample
        .processes
        .iter()
        .find(|(p, _)| *p == pid)
        .map(|(_, g)| g.engines.get("gpu").copied())
}

#[test]
fn an_m4_reads_as_its_chip_with_unified_memory_and_every_published_figure() {
    let registry = load("m4-t0.json");
    let acc = &registry.as_ref().unwrap()[0];
    let d = device(&acc.service, 2, Some(16 * GIB));
    assert_eq!(d.index, 2);
    assert_eq!(d.backend, "apple");
    assert_eq!(d.vendor, "Apple");
    assert_eq!(d.name.as_deref(), Some("Apple M4 (10-core GPU)"));
    assert_eq!(d.gpu_util_percent, Some(21));
    assert_eq!(d.memory_used_bytes, Some(351141888));
    assert_eq!(d.memory_total_bytes, Some(16 * GIB));
    // No VRAM split and no spill on unified memory: unknown, not 0.
    assert_eq!(d.memory_free_bytes, None);
    assert_eq!(d.shared_memory_used_bytes, None);
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    let notes = d.notes.join("\n");
    assert!(
        notes.contains("unified memory") && notes.contains("1.47 GiB allocated"),
        "{notes}"
    );
    // The rest of PerformanceStatistics, as the chip says it, the "(driver)"
    // reading included and never mistaken for the in-use figure.
    assert!(notes.contains("Renderer Utilization %=19"), "{notes}");
    assert!(notes.contains("Tiler Utilization %=20"), "{notes}");
    assert!(notes.contains("In use system memory (driver)=0"), "{notes}");
}

#[test]
fn intel_macs_name_their_chips_in_data_and_a_discrete_card_has_vram() {
    let registry = load("intel-mac.json").unwrap();
    let igpu = device(&registry[0].service, 0, Some(32 * GIB));
    assert_eq!(igpu.vendor, "Intel");
    assert_eq!(igpu.name.as_deref(), Some("Intel(R) UHD Graphics 630"));
    assert_eq!(igpu.gpu_util_percent, Some(7));
    assert_eq!(igpu.memory_used_bytes, Some(256 << 20));
    let dgpu = device(&registry[1].service, 1, Some(32 * GIB));
    assert_eq!(dgpu.vendor, "AMD");
    assert_eq!(dgpu.name.as_deref(), Some("AMD Radeon Pro 5500M"));
    assert_eq!(dgpu.gpu_util_percent, Some(64));
    assert_eq!(dgpu.memory_used_bytes, Some(2 * GIB));
    assert_eq!(dgpu.memory_free_bytes, Some(2 * GIB));
    assert_eq!(dgpu.memory_total_bytes, Some(4 * GIB));
}

#[test]
fn two_samples_give_each_process_its_share_of_the_window() {
    let mut apple = Apple::new(true);
    let t0 = Instant::now();
    let (first, backend) = apple.sample(&load("m4-t0.json"), t0, 0, Some(16 * GIB), None);
    assert_eq!(backend.status, BackendStatus::Ok);
    assert!(
        backend.detail.contains("Apple M4 (10-core GPU) (4 GPU clients)"),
        "{}",
        backend.detail
    );
    // One row per process (python3.12's two queues are one row), and no
    // share before a second sample: unknown, not 0.
    assert_eq!(first.processes.len(), 3);
    assert_eq!(share(&first, 4245), Some(None));
    assert_eq!(share(&first, 421), Some(None));
    assert!(first.busy.values().all(|b| !b));

    let (second, _) = apple.sample(
        &load("m4-t1.json"),
        t0 + Duration::from_secs(1),
        0,
        Some(16 * GIB),
        None,
    );
    // 12 ms, 500 + 230 ms over two queues, and a client opened in the window
    // whose 150 ms are all the window's.
    assert_eq!(share(&second, 421), Some(Some(1)));
    assert_eq!(share(&second, 4245), Some(Some(73)));
    assert_eq!(share(&second, 6001), Some(Some(15)));
    assert_eq!(second.busy.get(&4245), Some(&true));
    assert_eq!(second.devices[0].gpu_util_percent, Some(74));
    assert_eq!(second.devices[0].memory_used_bytes, Some(6 * GIB));
    for (_, g) in &second.processes {
        assert_eq!(g.source, "apple");
        assert_eq!(g.vram_bytes, None, "a footprint is not VRAM");
        assert_eq!(g.spill_bytes, None);
        assert_eq!(g.pairing, None, "a client's creator is not a pairing");
    }
    assert_eq!(second.creators.get(&6001).map(String::as_str), Some("ollama"));
}

#[test]
fn a_client_whose_process_exited_is_dropped_and_forgotten() {
    let mut tracker = GpuTimeTracker::default();
    let t0 = Instant::now();
    let registry = load("m4-t0.json").unwrap();
    let before = clients(registry[0].clients.as_ref().unwrap());
    assert!(before.errors.is_empty() && before.unreadable.is_empty());
    let before = before.list;
    assert!(before.iter().any(|c| c.pid == 5120 && c.name == "Safari"));
    tracker.update(t0, &before, &[]);
    let registry = load("m4-t1.json").unwrap();
    let after = clients(registry[0].clients.as_ref().unwrap()).list;
    let shares = tracker.update(t0 + Duration::from_secs(1), &after, &[]);
    assert!(shares.iter().all(|p| p.pid != 5120), "{shares:?}");
    let (_, seen) = tracker.last.as_ref().unwrap();
    assert!(
        !seen.contains_key(&4294970201),
        "the exited client's counter is not kept"
    );
    assert_eq!(seen.len(), after.len());
}

#[test]
fn a_failed_client_query_is_unavailable_never_zero_and_the_next_window_spans_the_gap() {
    let mut apple = Apple::new(false);
    let t0 = Instant::now();
    apple.sample(&load("m4-t0.json"), t0, 0, Some(16 * GIB), None);
    let (failed, backend) = apple.sample(
        &load("m4-clients-failed.json"),
        t0 + Duration::from_secs(1),
        0,
        Some(16 * GIB),
        None,
    );
    assert_eq!(backend.status, BackendStatus::Ok);
    assert!(backend.detail.contains("not root"), "{}", backend.detail);
    let d = &failed.devices[0];
    assert!(
        !d.process_list_complete,
        "an empty list must not pose as 'no processes'"
    );
    assert_eq!(d.errors.len(), 1);
    assert_eq!(d.errors[0].query, "Metal clients");
    assert!(d.errors[0].message.contains("kIOReturnError"));
    assert!(failed.processes.is_empty());
    // The device figures still read.
    assert_eq!(d.gpu_util_percent, Some(74));
    // The next good read measures from the last good one, 2.5 s back.
    let (next, _) = apple.sample(&load("m4-t1.json"), t0 + Duration::from_millis(2500), 0, None, None);
    assert_eq!(share(&next, 4245), Some(Some(29)));
    assert_eq!(share(&next, 421), Some(Some(0)));

    // The registry itself failing is the backend's error, with no device.
    let (none, backend) = apple.sample(
        &Err("IOServiceGetMatchingServices: 0xe00002c7".into()),
        t0,
        0,
        None,
        None,
    );
    assert_eq!(backend.status, BackendStatus::Error);
    assert!(none.devices.is_empty());
    let (_, backend) = apple.sample(&Ok(Vec::new()), t0, 0, None, None);
    assert_eq!(backend.status, BackendStatus::Unavailable);
}

#[test]
fn unreadable_clients_and_counters_leave_their_share_unknown_and_the_list_incomplete() {
    let client = |id: u64, props: serde_json::Value| Entry {
        class: CLIENT_CLASS.into(),
        id: Ok(id),
        properties: Ok(dict(props)),
    };
    let children = vec![
        client(
            1,
            serde_json::json!({"IOUserClientCreator": "pid 10, a", "AppUsage": "garbage"}),
        ),
        client(
            2,
            serde_json::json!({"IOUserClientCreator": "pid 11, b", "AppUsage": [{"API": "Metal"}]}),
        ),
        client(
            3,
            serde_json::json!({"IOUserClientCreator": "pid 12, c", "AppUsage": [{"accumulatedGPUTime": -5}]}),
        ),
        client(4, serde_json::json!({"IOUserClientCreator": "kernel", "AppUsage": []})),
        client(5, serde_json::json!({"AppUsage": []})),
        Entry {
            class: CLIENT_CLASS.into(),
            id: Ok(6),
            properties: Err("IORegistryEntryCreateCFProperties: 0xe00002bd".into()),
        },
        // Another user-client class with no GPU time: not a process's client.
        Entry {
            class: "IOAccelSharedUserClient".into(),
            id: Ok(7),
            properties: Ok(dict(serde_json::json!({"IOUserClientCreator": "pid 13, d"}))),
        },
        // Intel Macs' clients carry the counter themselves; no AppUsage is 0.
        Entry {
            class: "IntelDeviceUserClient".into(),
            id: Ok(8),
            properties: Ok(dict(
                serde_json::json!({"IOUserClientCreator": "pid 14, e", "accumulatedGPUTime": 7}),
            )),
        },
        client(
            9,
            serde_json::json!({"IOUserClientCreator": "pid 15, f", "AppUsage": []}),
        ),
    ];
    let Clients {
        list,
        errors,
        unreadable,
    } = clients(&children);
    assert_eq!(unreadable, [4, 5, 6], "the clients left out are remembered by ID");
    let pids: Vec<u32> = list.iter().map(|c| c.pid).collect();
    assert_eq!(pids, [10, 11, 12, 14, 15]);
    assert!(list[0].gpu_time_ns.as_ref().unwrap_err().contains("not an array"));
    assert!(list[1]
        .gpu_time_ns
        .as_ref()
        .unwrap_err()
        .contains("no accumulatedGPUTime"));
    assert!(list[2].gpu_time_ns.is_err(), "a negative counter is not a count");
    assert_eq!(list[3].gpu_time_ns, Ok(7));
    assert_eq!(list[4].gpu_time_ns, Ok(0));
    assert_eq!(errors.len(), 3, "{errors:?}");

    let registry = Ok(vec![Accelerator {
        service: Entry {
            class: "AGXAcceleratorG16G".into(),
            id: Ok(99),
            properties: Ok(dict(serde_json::json!({"model": "Apple M4"}))),
        },
        clients: Ok(children),
    }]);
    let mut apple = Apple::new(true);
    let t0 = Instant::now();
    apple.sample(&registry, t0, 0, None, None);
    let (s, _) = apple.sample(&registry, t0 + Duration::from_secs(1), 0, None, None);
    assert_eq!(share(&s, 10), Some(None));
    assert!(s.process_notes[&10][0].starts_with("GPU time not readable"));
    assert_eq!(
        share(&s, 14),
        Some(Some(0)),
        "a counter that did not move is a measured 0"
    );
    assert!(!s.devices[0].process_list_complete);
    assert_eq!(s.devices[0].errors.len(), 3);
    assert!(s.devices[0].notes[0].contains("no PerformanceStatistics"));
}

#[test]
fn a_counter_that_goes_backwards_is_unknown_for_that_window() {
    let c = |ns| Client {
        id: 1,
        pid: 7,
        name: "x".into(),
        gpu_time_ns: Ok(ns),
    };
    let mut tracker = GpuTimeTracker::default();
    let t0 = Instant::now();
    tracker.update(t0, &[c(1_000_000_000)], &[]);
    let p = &tracker.update(t0 + Duration::from_secs(1), &[c(500)], &[])[0];
    assert_eq!(p.share_percent, None);
    assert!(!p.busy);
    assert!(p.note.as_deref().unwrap().contains("backwards"));
    // A share over 100% (overlapping queues) is capped at the whole GPU.
    let p = &tracker.update(t0 + Duration::from_secs(2), &[c(5_000_000_000)], &[])[0];
    assert_eq!(p.share_percent, Some(100));
}

#[test]
fn a_client_unreadable_for_a_window_is_remembered_and_never_counted_whole_life_when_it_reads_again() {
    let client = |props: Result<serde_json::Value, &str>| Entry {
        class: CLIENT_CLASS.into(),
        id: Ok(0x1234),
        properties: props.map(dict).map_err(str::to_string),
    };
    // 20 s of GPU time over its life, 10 ms of it in each 1 s window.
    let ok = |ns: u64| {
        client(Ok(serde_json::json!({
            "IOUserClientCreator": "pid 77, mlx",
            "AppUsage": [{"API": "Metal", "accumulatedGPUTime": ns}],
        })))
    };
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let window = |tracker: &mut GpuTimeTracker, t: Instant, e: Entry| {
        let c = clients(&[e]);
        tracker.update(t, &c.list, &c.unreadable)
    };
    for unreadable in [
        client(Err("IORegistryEntryCreateCFProperties: 0xe00002bd")),
        client(Ok(serde_json::json!({"AppUsage": []}))),
        client(Ok(
            serde_json::json!({"IOUserClientCreator": "pid 77, mlx", "AppUsage": "garbage"}),
        )),
    ] {
        let mut tracker = GpuTimeTracker::default();
        window(&mut tracker, at(0), ok(20_000_000_000));
        let p = window(&mut tracker, at(1), ok(20_010_000_000));
        assert_eq!(p[0].share_percent, Some(1));
        window(&mut tracker, at(2), unreadable);
        let p = window(&mut tracker, at(3), ok(20_030_000_000));
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].share_percent, None,
            "20 s of life in a 1 s window is not 100%: unknown"
        );
        assert!(!p[0].busy);
        assert!(p[0]
            .note
            .as_deref()
            .unwrap()
            .contains("not readable in the previous sample"));
        // And the window after that is measured again.
        let p = window(&mut tracker, at(4), ok(20_040_000_000));
        assert_eq!(p[0].share_percent, Some(1));
        assert_eq!(p[0].note, None);
    }
}

#[test]
fn wrong_types_and_values_are_unknown_with_a_note_never_a_panic() {
    let service = |stats: serde_json::Value| Entry {
        class: "AGXAcceleratorG13G".into(),
        id: Ok(1),
        properties: Ok(dict(serde_json::json!({"model": 42, "PerformanceStatistics": stats}))),
    };
    let d = device(&service(serde_json::json!("busy")), 0, None);
    assert_eq!(d.name.as_deref(), Some("AGXAcceleratorG13G"));
    assert_eq!(d.gpu_util_percent, None);
    assert!(d.notes[0].contains("not a dictionary"), "{:?}", d.notes);
    let d = device(
        &service(
            serde_json::json!({"Device Utilization %": 250, "In use system memory": -1, "Alloc system memory": 1.5}),
        ),
        0,
        None,
    );
    assert_eq!(d.gpu_util_percent, None);
    assert_eq!(d.memory_used_bytes, None);
    assert_eq!(d.memory_total_bytes, None);
    let notes = d.notes.join("\n");
    assert!(notes.contains("250% is out of range"), "{notes}");
    assert!(
        notes.contains("\"In use system memory\" is an integer, not a count"),
        "{notes}"
    );
    assert!(
        notes.contains("\"Alloc system memory\" is a number, not a count"),
        "{notes}"
    );
    let failed = Entry {
        class: "AGXAcceleratorG13G".into(),
        id: Ok(1),
        properties: Err("0xe00002bd".into()),
    };
    let d = device(&failed, 0, None);
    assert_eq!(d.errors[0].query, "accelerator properties");
    assert_eq!(d.gpu_util_percent, None);
    assert_eq!(
        parse_creator("pid 421, WindowServer"),
        Some((421, "WindowServer".into()))
    );
    assert_eq!(parse_creator("pid 77"), Some((77, String::new())));
    assert_eq!(parse_creator("pid 0, kernel_task"), None);
    assert_eq!(parse_creator("pid -3, x"), None);
    assert_eq!(parse_creator("pid 99999999999, x"), None);
}

fn wanted(pid: u32, busy: bool) -> Wanted {
    Wanted {
        pid,
        start: 1,
        busy,
        gpu_client: busy,
        ai: false,
    }
}

#[test]
fn busy_and_new_processes_are_measured_every_2s_and_idle_ones_every_30s() {
    let mut s = FootprintSchedule::default();
    let t0 = Instant::now();
    let at = |secs: u64| t0 + Duration::from_secs(secs);
    let keys = |v: Vec<(u32, u64)>| v.into_iter().map(|(pid, _)| pid).collect::<Vec<_>>();
    let list = [wanted(1, true), wanted(2, false)];
    // Both are new: due at once, the busy one first.
    assert_eq!(keys(s.due(t0, &list)), [1, 2]);
    s.record((1, 1), t0, Ok(100));
    s.record((2, 1), t0, Ok(200));
    assert_eq!(s.footprint((1, 1)), (Some(100), None));
    assert!(s.due(at(1), &list).is_empty());
    assert_eq!(keys(s.due(at(2), &list)), [1]);
    s.record((1, 1), at(2), Ok(150));
    assert_eq!(keys(s.due(at(4), &list)), [1]);
    s.record((1, 1), at(4), Ok(160));
    assert!(s.due(at(29), &list).iter().all(|k| k.0 != 2), "idle: not before 30 s");
    assert!(s.due(at(30), &list).contains(&(2, 1)));
    s.record((2, 1), at(30), Ok(210));
    // A process that turns busy is due within 2 s of its last measurement;
    // a new one (or a reused PID: another start) at once.
    let list = [
        wanted(1, false),
        wanted(2, true),
        Wanted {
            start: 9,
            ..wanted(1, false)
        },
    ];
    assert_eq!(s.due(at(31), &list), [(1, 9)]);
    s.record((1, 9), at(31), Ok(50));
    assert_eq!(s.due(at(32), &list), [(2, 1)]);
    // A process no longer listed is forgotten.
    s.due(at(33), &[wanted(2, true)]);
    assert_eq!(s.footprint((1, 1)), (None, None));
    assert_eq!(s.footprint((2, 1)), (Some(210), None));
}

#[test]
fn an_unreadable_footprint_is_unknown_with_its_reason_and_retried_only_as_often_as_an_idle_one() {
    let mut s = FootprintSchedule::default();
    let t0 = Instant::now();
    let list = [wanted(1, true), wanted(2, true), wanted(3, true)];
    s.due(t0, &list);
    s.record((1, 1), t0, Err(Unmeasured::Denied));
    s.record((2, 1), t0, Err(Unmeasured::Gone));
    s.record((3, 1), t0, Err(Unmeasured::Other("EIO".into())));
    let (bytes, note) = s.footprint((1, 1));
    assert_eq!(bytes, None, "unknown, never 0");
    assert!(note.unwrap().contains("another user's process"));
    assert_eq!(s.footprint((2, 1)), (None, None));
    assert_eq!(s.footprint((3, 1)).1.as_deref(), Some("footprint not readable: EIO"));
    // Nothing is asked again at once, the exited process included (the
    // footprint thread would otherwise spin on it until the next sample).
    assert!(s.due(t0, &list).is_empty());
    let due = s.due(t0 + Duration::from_secs(2), &list);
    assert!(
        !due.contains(&(1, 1)),
        "a denied process is not asked again every 2 s: {due:?}"
    );
    assert!(due.contains(&(2, 1)) && due.contains(&(3, 1)));
    assert!(s.due(t0 + Duration::from_secs(30), &list).contains(&(1, 1)));
    // The wish list is bounded.
    let many: Vec<Wanted> = (0..MAX_FOLLOWED as u32 + 100).map(|p| wanted(p, false)).collect();
    assert_eq!(FootprintSchedule::default().due(t0, &many).len(), MAX_FOLLOWED);
}

#[test]
fn past_the_bound_gpu_clients_ai_and_busy_processes_are_followed_first_and_the_rest_say_so() {
    let t0 = Instant::now();
    // 600 idle non-GPU processes listed first, then (past 512 in list
    // order) a GPU client, an AI process and a busy GPU client.
    let mut list: Vec<Wanted> = (1..=600).map(|p| wanted(p, false)).collect();
    list.push(Wanted {
        gpu_client: true,
        ..wanted(1001, false)
    });
    list.push(Wanted {
        ai: true,
        ..wanted(1002, false)
    });
    list.push(wanted(1003, true));
    let mut s = FootprintSchedule::default();
    let due = s.due(t0, &list);
    assert_eq!(due.len(), MAX_FOLLOWED);
    // The busy GPU client, the GPU client, the AI process, then list order.
    assert_eq!(&due[..4], [(1003, 1), (1001, 1), (1002, 1), (1, 1)]);
    for &key in &due {
        s.record(key, t0, Ok(1));
    }
    for pid in [1001, 1002, 1003, 1, 509] {
        assert_eq!(s.footprint((pid, 1)), (Some(1), None), "pid {pid}");
    }
    // Those cut off are unknown with a note, never silently blank.
    for pid in [510, 600] {
        let (bytes, note) = s.footprint((pid, 1));
        assert_eq!(bytes, None);
        assert!(note.unwrap().contains("only 512 processes are followed"), "pid {pid}");
    }
    // Fewer listed later: nothing is cut, and no stale note stays.
    s.due(t0, &list[..10]);
    assert_eq!(s.footprint((600, 1)), (None, None));
}

#[test]
fn footprints_are_measured_off_the_sampling_thread_and_in_line_for_one_shot() {
    let slow: Arc<Measure> = Arc::new(|pid| {
        std::thread::sleep(Duration::from_millis(100));
        Ok(u64::from(pid) * 1000)
    });
    let background = Footprints::new(Arc::clone(&slow), true, Duration::from_millis(10));
    let asked = Instant::now();
    background.want(vec![wanted(5, true), wanted(6, false)]);
    assert!(
        asked.elapsed() < Duration::from_millis(50),
        "a sample never waits on a measurement"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while background.footprint(6, 1).0.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(background.footprint(5, 1).0, Some(5000));
    assert_eq!(background.footprint(6, 1).0, Some(6000));
    drop(background);

    let inline = Footprints::new(slow, false, Duration::from_millis(10));
    inline.want(vec![wanted(7, false)]);
    assert_eq!(inline.footprint(7, 1), (Some(7000), None));
}

#[test]
fn a_one_shot_snapshot_measures_footprints_for_at_most_its_budget_gpu_clients_first() {
    let slow: Arc<Measure> = Arc::new(|pid| {
        std::thread::sleep(Duration::from_millis(100));
        Ok(u64::from(pid))
    });
    let inline = Footprints::new(slow, false, Duration::from_millis(10)).with_budget(Duration::from_millis(150));
    // Eight idle processes listed before the one GPU client.
    let mut list: Vec<Wanted> = (1..=8).map(|p| wanted(p, false)).collect();
    list.push(wanted(99, true));
    let asked = Instant::now();
    inline.want(list);
    assert!(
        asked.elapsed() < Duration::from_millis(700),
        "not 9 x 100 ms: {:?}",
        asked.elapsed()
    );
    assert_eq!(inline.footprint(99, 1), (Some(99), None), "the GPU client first");
    let (bytes, note) = inline.footprint(8, 1);
    assert_eq!(bytes, None, "unknown, never 0");
    assert!(note.unwrap().contains("one-shot snapshot spends at most"));
    // Not a measurement: still due, and an earlier value stands.
    let mut s = FootprintSchedule::default();
    let t0 = Instant::now();
    s.due(t0, &[wanted(1, false)]);
    s.record((1, 1), t0, Err(Unmeasured::OverBudget));
    assert_eq!(s.due(t0, &[wanted(1, false)]), [(1, 1)]);
    s.record((1, 1), t0, Ok(5));
    s.record((1, 1), t0 + IDLE_EVERY, Err(Unmeasured::OverBudget));
    assert_eq!(s.footprint((1, 1)), (Some(5), None));
}

#[test]
fn snapshots_from_before_footprints_still_read_with_the_footprint_unknown() {
    use crate::snapshot::Process;
    let mut p = crate::snapshot::tests::process(42, &[]);
    p.footprint_bytes = Some(3 * GIB);
    let mut json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["footprint_bytes"], 3 * GIB);
    json.as_object_mut().unwrap().remove("footprint_bytes");
    let old: Process = serde_json::from_value(json).unwrap();
    assert_eq!(old.footprint_bytes, None, "absent is unknown, never 0");
}

#[test]
fn a_client_whose_registry_id_cannot_be_read_is_left_out_with_an_error_never_merged_under_id_0() {
    let no_id = |class: &str, pid: u32, ns: u64| Entry {
        class: class.into(),
        id: Err("IORegistryEntryGetRegistryEntryID failed: 0xe00002c2".into()),
        properties: Ok(dict(serde_json::json!({
            "IOUserClientCreator": format!("pid {pid}, p{pid}"),
            "AppUsage": [{"API": "Metal", "accumulatedGPUTime": ns}],
        }))),
    };
    let children = vec![
        no_id(CLIENT_CLASS, 10, 5),
        no_id("IntelDeviceUserClient", 11, 6),
        // Not a process's client: no error for it.
        Entry {
            class: "IOAccelSharedUserClient".into(),
            id: Err("0xe00002c2".into()),
            properties: Ok(Dict::new()),
        },
        Entry {
            class: CLIENT_CLASS.into(),
            id: Ok(3),
            properties: Ok(dict(serde_json::json!({
                "IOUserClientCreator": "pid 12, c",
                "AppUsage": [{"API": "Metal", "accumulatedGPUTime": 7}],
            }))),
        },
    ];
    let c = clients(&children);
    assert_eq!(c.list.iter().map(|c| c.pid).collect::<Vec<_>>(), [12]);
    assert_eq!(c.errors.len(), 2, "{:?}", c.errors);
    assert!(c.errors.iter().all(|e| e.contains("registry entry ID not readable")));
    assert!(c.unreadable.is_empty(), "no ID to remember");

    let registry = Ok(vec![Accelerator {
        service: Entry {
            class: "AGXAcceleratorG16G".into(),
            id: Ok(99),
            properties: Ok(Dict::new()),
        },
        clients: Ok(children),
    }]);
    let (s, _) = Apple::new(true).sample(&registry, Instant::now(), 0, None, None);
    assert!(!s.devices[0].process_list_complete);
    assert_eq!(s.processes.len(), 1);

    // An accelerator whose own ID cannot be read: device figures, no
    // per-process time (it is followed under that ID), and it says so.
    let registry = Ok(vec![Accelerator {
        service: Entry {
            class: "AGXAcceleratorG16G".into(),
            id: Err("IORegistryEntryGetRegistryEntryID failed: 0xe00002c2".into()),
            properties: Ok(dict(serde_json::json!({"model": "Apple M4"}))),
        },
        clients: Ok(Vec::new()),
    }]);
    let (s, backend) = Apple::new(true).sample(&registry, Instant::now(), 0, None, None);
    assert_eq!(backend.status, BackendStatus::Ok);
    assert_eq!(s.devices[0].name.as_deref(), Some("Apple M4"));
    assert!(!s.devices[0].process_list_complete);
    assert!(s.devices[0].errors[0]
        .message
        .contains("registry entry ID not readable"));
}
