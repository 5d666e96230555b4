//! `gputaskman diff`: snapshots built from the real types, written as
//! `--json` writes them, compared by the real binary. Every pairing rule,
//! PID reuse, processes that appear and go, counters that turn null,
//! adapters of the same name, small moves hidden from text only, and wrong
//! files refused with the file named.

mod snapshot_builder;

use gputaskman::snapshot;
use serde_json::Value;
use snapshot_builder::{device, diff_json, diff_text, gpu, process, server_model, snapshot, write, GIB, MIB};
use std::path::Path;

const BEFORE: &str = "2026-01-01T10:00:00.000Z";
const AFTER: &str = "2026-01-01T10:05:00.000Z";
/// Started long before BEFORE.
const OLD: &str = "2026-01-01T09:00:00.000Z";
/// Started between BEFORE and AFTER.
const NEW: &str = "2026-01-01T10:02:00.000Z";

/// The process entry whose sides have these PIDs (None: not listed).
fn entry(d: &Value, before: Option<u32>, after: Option<u32>) -> &Value {
    d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["before"]["pid"].as_u64() == before.map(u64::from) && p["after"]["pid"].as_u64() == after.map(u64::from)
        })
        .unwrap_or_else(|| panic!("no entry {before:?} -> {after:?} in {d:#}"))
}

fn pids(d: &Value) -> Vec<(Option<u64>, Option<u64>, Value)> {
    d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["before"]["pid"].as_u64(),
                p["after"]["pid"].as_u64(),
                p["paired_by"].clone(),
            )
        })
        .collect()
}

/// BEFORE and AFTER with one NVIDIA L4 using `used_before`, then `used_after`.
fn one_l4(used_before: u64, used_after: u64) -> (snapshot::Snapshot, snapshot::Snapshot) {
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    before
        .devices
        .push(device(0, "NVIDIA L4", Some("GPU-a"), None, Some(used_before)));
    after
        .devices
        .push(device(0, "NVIDIA L4", Some("GPU-a"), None, Some(used_after)));
    (before, after)
}

fn pair(dir: &Path, before: &snapshot::Snapshot, after: &snapshot::Snapshot) -> (Value, String) {
    let b = write(dir, "before.json", before);
    let a = write(dir, "after.json", after);
    (diff_json(&b, &a), diff_text(&b, &a))
}

#[test]
fn the_same_pid_and_start_time_pair_and_measured_moves_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    before.devices.push(device(
        0,
        "NVIDIA RTX 4090",
        Some("GPU-a"),
        Some("00000000:01:00.0"),
        Some(4 * GIB),
    ));
    after.devices.push(device(
        0,
        "NVIDIA RTX 4090",
        Some("GPU-a"),
        Some("00000000:01:00.0"),
        Some(5 * GIB),
    ));
    let mut p = process(100, "python3", OLD);
    p.rss_bytes = Some(GIB);
    p.cpu_percent = Some(10.0);
    p.gpu.push(gpu(0, Some(2 * GIB)));
    before.processes.push(p.clone());
    p.rss_bytes = Some(GIB + 40 * MIB);
    p.cpu_percent = Some(95.5);
    p.gpu[0].vram_bytes = Some(2 * GIB + 512 * MIB);
    after.processes.push(p);

    let (d, text) = pair(dir.path(), &before, &after);
    assert_eq!(d["processes"].as_array().unwrap().len(), 1);
    let e = entry(&d, Some(100), Some(100));
    assert_eq!(e["paired_by"], "pid_start_time");
    assert_eq!(e["gpu"][0]["vram_bytes"]["before"], 2 * GIB);
    assert_eq!(e["gpu"][0]["vram_bytes"]["after"], 2 * GIB + 512 * MIB);
    assert_eq!(e["gpu"][0]["vram_bytes"]["delta"], 512 * MIB);
    assert_eq!(e["gpu"][0]["vram_bytes"]["state"], "grew");
    assert_eq!(e["gpu"][0]["device"], "GPU 0 NVIDIA RTX 4090");
    assert_eq!(e["rss_bytes"]["delta"], 40 * MIB);
    assert_eq!(e["cpu_percent"]["delta"], 85.5);
    let dev = &d["devices"][0];
    assert_eq!(dev["paired_by"], "uuid");
    assert_eq!(dev["memory_used_bytes"]["delta"], GIB);
    assert_eq!(dev["memory_free_bytes"]["delta"], -(GIB as i64));
    assert_eq!(dev["memory_total_bytes"]["state"], "same");
    assert_eq!(d["elapsed_s"], 300.0);

    assert!(text.contains("~ 100 python3\n"), "{text}");
    assert!(text.contains("2.00 GiB -> 2.50 GiB  +512.0 MiB"), "{text}");
    assert!(text.contains("1.00 GiB -> 1.04 GiB  +40.0 MiB"), "{text}");
    assert!(text.contains("10% -> 96%"), "{text}");
    assert!(text.contains("4.00 GiB -> 5.00 GiB  +1.00 GiB"), "{text}");
    assert!(text.contains("5m 0s later"), "{text}");
}

#[test]
fn a_reused_pid_is_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    // Two names, so no other rule can pair them either.
    let mut old = process(4242, "trainer", OLD);
    old.gpu.push(gpu(0, Some(3 * GIB)));
    old.rss_bytes = Some(500 * MIB);
    before.processes.push(old);
    let mut new = process(4242, "blender", NEW);
    new.gpu.push(gpu(0, Some(GIB)));
    after.processes.push(new);

    let (d, text) = pair(dir.path(), &before, &after);
    let gone = entry(&d, Some(4242), None);
    assert_eq!(gone["paired_by"], Value::Null);
    assert_eq!(gone["before"]["start_time"], OLD);
    assert_eq!(gone["gpu"][0]["vram_bytes"]["before"], 3 * GIB);
    assert_eq!(gone["gpu"][0]["vram_bytes"]["after"], Value::Null);
    assert_eq!(gone["gpu"][0]["vram_bytes"]["delta"], Value::Null);
    assert_eq!(gone["gpu"][0]["vram_bytes"]["state"], "not_listed_after");
    assert_eq!(gone["rss_bytes"]["state"], "not_listed_after");
    let came = entry(&d, None, Some(4242));
    assert_eq!(came["after"]["start_time"], NEW);
    assert_eq!(came["gpu"][0]["vram_bytes"]["after"], GIB);
    assert_eq!(came["gpu"][0]["vram_bytes"]["state"], "not_listed_before");
    assert!(text.contains("- 4242 trainer  not listed after"), "{text}");
    assert!(text.contains("+ 4242 blender  not listed before"), "{text}");
    assert!(text.contains("3.00 GiB -> not listed"), "{text}");
    assert!(text.contains("not listed -> 1.00 GiB"), "{text}");

    // The same name does not make a reused PID the same process either:
    // the new one started after BEFORE, but the PID rule saw two
    // processes, and the name rule pairs them only as a restart.
    let mut after = snapshot(AFTER);
    let mut new = process(4242, "trainer", NEW);
    new.gpu.push(gpu(0, Some(GIB)));
    after.processes.push(new);
    let (d, _) = pair(dir.path(), &before, &after);
    let e = entry(&d, Some(4242), Some(4242));
    assert_eq!(e["paired_by"], "name", "a restart, not the same process: {e:#}");
}

#[test]
fn a_pid_without_start_time_pairs_by_pid_unless_the_names_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    // Rows of PIDs outside this /proc: no name, no start time.
    for s in [&mut before, &mut after] {
        let mut p = process(77, "x", OLD);
        p.name = None;
        p.start_time = None;
        p.gpu.push(gpu(0, Some(GIB)));
        s.processes.push(p);
    }
    after.processes[0].gpu[0].vram_bytes = Some(GIB + 100 * MIB);
    let mut a = process(88, "alpha", OLD);
    a.start_time = None;
    before.processes.push(a);
    let mut b = process(88, "beta", OLD);
    b.start_time = None;
    after.processes.push(b);

    let (d, text) = pair(dir.path(), &before, &after);
    let e = entry(&d, Some(77), Some(77));
    assert_eq!(e["paired_by"], "pid");
    assert_eq!(e["gpu"][0]["vram_bytes"]["delta"], 100 * MIB);
    assert!(text.contains("[same PID; start time unknown]"), "{text}");
    entry(&d, Some(88), None);
    entry(&d, None, Some(88));
}

#[test]
fn servers_without_a_discovered_model_pair_by_their_listening_ports() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    // Two Python servers whose APIs discovery could not read: no model,
    // only the ports their sockets listen on (`listen_ports`).
    for (snap, pids, start, vram) in [(&mut before, [300, 301], OLD, 0), (&mut after, [400, 401], NEW, GIB)] {
        for (pid, ports) in pids.into_iter().zip([vec![8000], vec![8001, 9090]]) {
            let mut p = process(pid, "python3", start);
            p.listen_ports = Some(ports);
            p.gpu.push(gpu(0, Some(GIB + vram * u64::from(pid % 2))));
            snap.processes.push(p);
        }
    }
    // A third one, whose descriptors could not be read, pairs with nothing.
    before.processes.push(process(302, "python3", OLD));
    after.processes.push(process(402, "python3", NEW));

    let (d, text) = pair(dir.path(), &before, &after);
    let e = entry(&d, Some(300), Some(400));
    assert_eq!(e["paired_by"], "name_port");
    assert_eq!(e["port"], 8000);
    assert_eq!(e["gpu"][0]["vram_bytes"]["delta"], 0);
    let e = entry(&d, Some(301), Some(401));
    assert_eq!(e["paired_by"], "name_port");
    assert_eq!(e["port"], 8001);
    assert_eq!(e["gpu"][0]["vram_bytes"]["delta"], GIB);
    entry(&d, Some(302), None);
    entry(&d, None, Some(402));
    assert!(text.contains("python3"), "{text}");
}

#[test]
fn a_server_restarted_under_a_new_pid_pairs_by_name_and_port() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    // Two servers of the same name: only their ports tell them apart.
    for (pid, port, ctx, kv, blind, rss) in [
        (100, 8080, 4096, 12 * MIB, 72 * MIB, 300 * MIB),
        (101, 8081, 2048, 10 * MIB, 36 * MIB, 280 * MIB),
    ] {
        let mut p = process(pid, "llama-server", OLD);
        p.models.push(server_model(port, ctx, kv, blind));
        p.rss_bytes = Some(rss);
        before.processes.push(p);
    }
    for (pid, port, ctx, kv, blind, rss) in [
        (200, 8080, 32768, 96 * MIB, 576 * MIB, 383 * MIB),
        (201, 8081, 2048, 10 * MIB, 36 * MIB, 281 * MIB),
    ] {
        let mut p = process(pid, "llama-server", NEW);
        p.models.push(server_model(port, ctx, kv, blind));
        p.rss_bytes = Some(rss);
        after.processes.push(p);
    }

    let (d, text) = pair(dir.path(), &before, &after);
    assert_eq!(d["processes"].as_array().unwrap().len(), 2, "{d:#}");
    let e = entry(&d, Some(100), Some(200));
    assert_eq!(e["paired_by"], "name_port");
    assert_eq!(e["port"], 8080);
    assert_eq!(e["rss_bytes"]["delta"], 83 * MIB);
    let e = entry(&d, Some(101), Some(201));
    assert_eq!(e["paired_by"], "name_port");
    assert_eq!(e["port"], 8081);

    // The models section: estimate and report apart from the measured.
    let m = d["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["pid_before"] == 100)
        .unwrap();
    assert_eq!(m["pid_after"], 200);
    assert_eq!(m["paired_by"], "path");
    assert_eq!(m["context"]["before"], 4096);
    assert_eq!(m["context"]["after"], 32768);
    assert_eq!(m["estimate"]["kv_bytes"]["delta"], 84 * MIB);
    assert_eq!(m["estimate"]["kv_bytes_without_window"]["delta"], 504 * MIB);
    assert_eq!(m["reported"]["kv_bytes"]["delta"], 84 * MIB);
    assert_eq!(m["reported"]["source_after"], "log:/tmp/server.log");
    // No estimate or report leaks into the measured entries.
    for p in d["processes"].as_array().unwrap() {
        let mut keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "after",
                "before",
                "cpu_percent",
                "gpu",
                "paired_by",
                "port",
                "rss_bytes"
            ],
            "{p:#}"
        );
    }

    let (measured, models) = text.split_once("Models (estimated").expect("a models section");
    assert!(
        measured.contains("~ 100 -> 200 llama-server  [restarted: same name, listening on port 8080]"),
        "{text}"
    );
    assert!(measured.contains("300.0 MiB -> 383.0 MiB  +83.0 MiB"), "{text}");
    assert!(!measured.contains("84.0 MiB"), "no estimate among the measured: {text}");
    assert!(models.contains("100 -> 200 gemma-3-270m-q4_k_m.gguf"), "{text}");
    assert!(
        models.contains("context (tokens)            4096 -> 32768  +28672"),
        "{text}"
    );
    assert!(
        models.contains("estimate KV                 12.0 MiB -> 96.0 MiB  +84.0 MiB"),
        "{text}"
    );
    assert!(
        models.contains("estimate KV, window-blind   72.0 MiB -> 576.0 MiB  +504.0 MiB"),
        "{text}"
    );
    assert!(
        models.contains("reported KV                 12.0 MiB -> 96.0 MiB  +84.0 MiB"),
        "{text}"
    );
    assert!(models.contains("measured, same process      rss +83.0 MiB"), "{text}");
}

#[test]
fn a_name_unique_on_both_sides_pairs_across_a_new_pid() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    let mut o = process(10, "ollama", OLD);
    o.gpu.push(gpu(0, Some(4 * GIB)));
    before.processes.push(o);
    let mut o = process(20, "ollama", NEW);
    o.gpu.push(gpu(0, Some(6 * GIB)));
    after.processes.push(o);
    // Two of a name on each side: never paired by name.
    for pid in [30, 31, 40, 41] {
        let (s, start) = if pid < 40 {
            (&mut before, OLD)
        } else {
            (&mut after, NEW)
        };
        let mut p = process(pid, "python3", start);
        p.gpu.push(gpu(0, Some(GIB)));
        s.processes.push(p);
    }

    let (d, text) = pair(dir.path(), &before, &after);
    let e = entry(&d, Some(10), Some(20));
    assert_eq!(e["paired_by"], "name");
    assert_eq!(e["gpu"][0]["vram_bytes"]["delta"], 2 * GIB);
    for pid in [30, 31] {
        assert_eq!(
            entry(&d, Some(pid), None)["gpu"][0]["vram_bytes"]["state"],
            "not_listed_after"
        );
    }
    for pid in [40, 41] {
        assert_eq!(
            entry(&d, None, Some(pid))["gpu"][0]["vram_bytes"]["state"],
            "not_listed_before"
        );
    }
    assert!(
        text.contains("~ 10 -> 20 ollama  [another start: paired by name, the only one of that name on each side]"),
        "{text}"
    );
}

#[test]
fn a_process_already_running_at_before_is_never_taken_for_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    let mut a = process(10, "llama-server", OLD);
    a.models.push(server_model(8080, 4096, 12 * MIB, 72 * MIB));
    before.processes.push(a);
    // Same name, same port, but alive since before BEFORE was taken: it
    // was there all along (not listed then), so it is not pid 10 again.
    let mut b = process(20, "llama-server", "2026-01-01T09:59:00.000Z");
    b.models.push(server_model(8080, 4096, 12 * MIB, 72 * MIB));
    after.processes.push(b);

    let (d, _) = pair(dir.path(), &before, &after);
    assert_eq!(pids(&d).len(), 2, "{d:#}");
    entry(&d, Some(10), None);
    entry(&d, None, Some(20));
    let m: Vec<&Value> = d["models"].as_array().unwrap().iter().collect();
    assert_eq!(m.len(), 2);
    assert!(m.iter().any(|m| m["context"]["state"] == "not_listed_after"));
    assert!(m.iter().any(|m| m["context"]["state"] == "not_listed_before"));
}

#[test]
fn counters_that_turn_null_or_become_known_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    before
        .devices
        .push(device(0, "NVIDIA A2000", Some("GPU-a"), None, Some(2 * GIB)));
    after.devices.push(device(0, "NVIDIA A2000", Some("GPU-a"), None, None));
    let mut p = process(5, "game", OLD);
    p.gpu.push(gpu(0, Some(GIB)));
    p.rss_bytes = None;
    before.processes.push(p.clone());
    p.gpu[0].vram_bytes = None;
    p.rss_bytes = Some(100 * MIB);
    after.processes.push(p);

    let (d, text) = pair(dir.path(), &before, &after);
    let e = entry(&d, Some(5), Some(5));
    let vram = &e["gpu"][0]["vram_bytes"];
    assert_eq!(vram["before"], GIB);
    assert_eq!(vram["after"], Value::Null);
    assert_eq!(vram["delta"], Value::Null);
    assert_eq!(vram["state"], "became_unknown");
    assert_eq!(e["rss_bytes"]["state"], "became_known");
    assert_eq!(e["rss_bytes"]["after"], 100 * MIB);
    assert_eq!(e["gpu"][0]["spill_bytes"]["state"], "unknown");
    assert_eq!(d["devices"][0]["memory_used_bytes"]["state"], "became_unknown");
    assert!(text.contains("1.00 GiB -> n/a  (became unknown)"), "{text}");
    assert!(text.contains("n/a -> 100.0 MiB  (became known)"), "{text}");
    assert!(
        text.contains("used         2.00 GiB -> n/a  (became unknown)"),
        "{text}"
    );
}

#[test]
fn adapters_with_the_same_name_are_never_paired() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    // The card in slot 01 was swapped for another of the same model: same
    // name, same index, same bus id, another UUID.
    before.devices.push(device(
        0,
        "NVIDIA RTX 3090",
        Some("GPU-old"),
        Some("0000:01:00.0"),
        Some(GIB),
    ));
    after.devices.push(device(
        0,
        "NVIDIA RTX 3090",
        Some("GPU-new"),
        Some("0000:01:00.0"),
        Some(GIB),
    ));
    let mut p = process(9, "worker", OLD);
    p.gpu.push(gpu(0, Some(512 * MIB)));
    before.processes.push(p.clone());
    after.processes.push(p);

    let (d, text) = pair(dir.path(), &before, &after);
    let devices = d["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{d:#}");
    assert_eq!(devices[0]["before"]["uuid"], "GPU-old");
    assert_eq!(devices[0]["after"], Value::Null);
    assert_eq!(devices[0]["memory_used_bytes"]["state"], "not_listed_after");
    assert_eq!(devices[1]["after"]["uuid"], "GPU-new");
    assert_eq!(devices[1]["memory_used_bytes"]["state"], "not_listed_before");
    // The process is the same; its memory on the two cards is not compared.
    let e = entry(&d, Some(9), Some(9));
    let g = e["gpu"].as_array().unwrap();
    assert_eq!(g.len(), 2, "{e:#}");
    assert_eq!(g[0]["vram_bytes"]["state"], "not_listed_after");
    assert_eq!(g[0]["vram_bytes"]["before"], 512 * MIB);
    assert_eq!(g[1]["vram_bytes"]["state"], "not_listed_before");
    assert_eq!(g[1]["vram_bytes"]["after"], 512 * MIB);
    assert!(
        text.contains("- GPU 0 NVIDIA RTX 3090 (GPU-old)  not listed after"),
        "{text}"
    );
    assert!(
        text.contains("+ GPU 0 NVIDIA RTX 3090 (GPU-new)  not listed before"),
        "{text}"
    );

    // Without UUIDs or bus ids, a name alone pairs nothing.
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    before.devices.push(device(0, "NVIDIA RTX 3090", None, None, Some(GIB)));
    after.devices.push(device(0, "NVIDIA RTX 3090", None, None, Some(GIB)));
    let (d, _) = pair(dir.path(), &before, &after);
    assert_eq!(d["devices"].as_array().unwrap().len(), 2);
    assert_eq!(d["devices"][0]["paired_by"], Value::Null);
}

#[test]
fn devices_pair_by_uuid_then_bus_id_whatever_their_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = snapshot(BEFORE);
    let mut after = snapshot(AFTER);
    before
        .devices
        .push(device(0, "NVIDIA A100", Some("GPU-a"), None, Some(10 * GIB)));
    before
        .devices
        .push(device(1, "NVIDIA A100", None, Some("00000000:81:00.0"), Some(GIB)));
    // Enumerated in another order (CUDA_VISIBLE_DEVICES, a driver update);
    // the bus id written another way.
    after
        .devices
        .push(device(0, "NVIDIA A100", None, Some("0000:81:00.0"), Some(3 * GIB)));
    after
        .devices
        .push(device(1, "NVIDIA A100", Some("GPU-a"), None, Some(12 * GIB)));
    let mut p = process(3, "train", OLD);
    p.gpu.push(gpu(0, Some(8 * GIB)));
    before.processes.push(p.clone());
    p.gpu[0].device = 1;
    p.gpu[0].vram_bytes = Some(10 * GIB);
    after.processes.push(p);

    let (d, text) = pair(dir.path(), &before, &after);
    let devices = d["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    let by_uuid = devices.iter().find(|x| x["paired_by"] == "uuid").unwrap();
    assert_eq!(by_uuid["before"]["index"], 0);
    assert_eq!(by_uuid["after"]["index"], 1);
    assert_eq!(by_uuid["memory_used_bytes"]["delta"], 2 * GIB);
    let by_bus = devices.iter().find(|x| x["paired_by"] == "pci_bus_id").unwrap();
    assert_eq!(by_bus["before"]["index"], 1);
    assert_eq!(by_bus["after"]["index"], 0);
    assert_eq!(by_bus["memory_used_bytes"]["delta"], 2 * GIB);
    let g = &entry(&d, Some(3), Some(3))["gpu"];
    assert_eq!(g.as_array().unwrap().len(), 1);
    assert_eq!(g[0]["device_before"], 0);
    assert_eq!(g[0]["device_after"], 1);
    assert_eq!(g[0]["vram_bytes"]["delta"], 2 * GIB);
    assert!(text.contains("[was GPU 0 before]"), "{text}");
}

#[test]
fn moves_under_16_mib_are_hidden_in_text_and_kept_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let (mut before, mut after) = one_l4(GIB, GIB + 8 * MIB);
    for (pid, b, a) in [
        (1, GIB, GIB + 8 * MIB),
        (2, GIB, GIB - 15 * MIB),
        (3, GIB, GIB + 16 * MIB),
        (4, GIB, GIB),
    ] {
        let mut p = process(pid, &format!("p{pid}"), OLD);
        p.gpu.push(gpu(0, Some(b)));
        before.processes.push(p.clone());
        p.gpu[0].vram_bytes = Some(a);
        after.processes.push(p);
    }

    let (d, text) = pair(dir.path(), &before, &after);
    assert_eq!(d["hide_below_bytes"], 16 * MIB);
    assert_eq!(entry(&d, Some(1), Some(1))["gpu"][0]["vram_bytes"]["delta"], 8 * MIB);
    assert_eq!(
        entry(&d, Some(2), Some(2))["gpu"][0]["vram_bytes"]["delta"],
        -15 * MIB as i64
    );
    assert_eq!(entry(&d, Some(3), Some(3))["gpu"][0]["vram_bytes"]["delta"], 16 * MIB);
    assert_eq!(entry(&d, Some(4), Some(4))["gpu"][0]["vram_bytes"]["state"], "same");
    // Hidden: the device's used and free (8 MiB each), p1 and p2.
    assert_eq!(d["hidden"]["moves"], 4);
    assert_eq!(d["hidden"]["processes"], 3);
    assert_eq!(d["hidden"]["devices"], 1);
    assert!(text.contains("~ 3 p3"), "{text}");
    assert!(text.contains("+16.0 MiB"), "{text}");
    assert!(
        !text.contains(" p1\n") && !text.contains(" p2\n") && !text.contains(" p4\n"),
        "{text}"
    );
    assert!(
        text.contains("Hidden: 4 moves under 16.0 MiB (3 paired processes and 1 device with nothing larger); --json has them all."),
        "{text}"
    );
}

/// Runs diff on `before` and `after` files and returns stderr; the exit
/// must be 2.
fn refused(before: &Path, after: &Path) -> String {
    let out = snapshot_builder::bin()
        .args(["diff".as_ref(), before.as_os_str(), after.as_os_str()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn wrong_files_are_refused_with_the_file_named_and_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.json", &snapshot(BEFORE));
    let file = |name: &str, body: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let mut v2 = serde_json::to_value(snapshot(AFTER)).unwrap();
    v2["schema_version"] = 2.into();
    let line = serde_json::to_string(&snapshot(AFTER)).unwrap();
    let mut no_devices = serde_json::to_value(snapshot(AFTER)).unwrap();
    no_devices.as_object_mut().unwrap().remove("devices");
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (
            file("notes.txt", b"GPU 0: 15 GiB used\n"),
            "notes.txt: not JSON (expected value at line 1 column 1)",
        ),
        (
            file("array.json", b"[1, 2]"),
            "array.json: not a gputaskman snapshot: the JSON is an array, not an object",
        ),
        (
            file("package.json", br#"{"name": "x", "version": "1.0"}"#),
            "package.json: not a gputaskman snapshot: it has no `schema_version`",
        ),
        (
            file("v2.json", &serde_json::to_vec(&v2).unwrap()),
            "v2.json: schema_version 2, but this gputaskman reads schema_version 1",
        ),
        (
            file("run.jsonl", format!("{line}\n{line}\n").as_bytes()),
            "run.jsonl: more than one JSON value (a recording?)",
        ),
        (
            file("run.jsonl.zst", &[0x28, 0xb5, 0x2f, 0xfd, 0, 0]),
            "run.jsonl.zst: zstd-compressed data",
        ),
        (
            file("partial.json", &serde_json::to_vec(&no_devices).unwrap()),
            "partial.json: not a gputaskman snapshot: missing field `devices`",
        ),
        (file("empty.json", b""), "empty.json: empty, not a snapshot"),
        (dir.path().join("missing.json"), "missing.json: cannot read"),
    ];
    for (path, expected) in cases {
        let err = refused(&good, &path);
        assert!(err.contains(expected), "{}: {err}", path.display());
        assert!(err.contains(&path.display().to_string()), "names the file: {err}");
        // BEFORE is checked the same way.
        let err = refused(&path, &good);
        assert!(err.contains(expected), "{}: {err}", path.display());
    }
}

/// The committed fixtures: a pair written by an earlier build. They must
/// keep reading (schema_version 1 only grows), and their diff is known.
#[test]
fn committed_fixtures_still_read_and_diff_as_recorded() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/snapshots");
    let d = diff_json(&data.join("before.json"), &data.join("after.json"));
    let e = entry(&d, Some(2101), Some(2417));
    assert_eq!(e["paired_by"], "name_port");
    assert_eq!(e["port"], 8080);
    assert_eq!(e["gpu"][0]["vram_bytes"]["delta"], 84 * MIB);
    let m = &d["models"][0];
    assert_eq!(m["estimate"]["kv_bytes"]["delta"], 84 * MIB);
    assert_eq!(m["estimate"]["kv_bytes_without_window"]["delta"], 504 * MIB);
    assert_eq!(entry(&d, Some(1500), Some(1500))["paired_by"], "pid_start_time");
    assert_eq!(d["devices"][0]["paired_by"], "uuid");
    assert_eq!(d["devices"][0]["memory_used_bytes"]["delta"], 84 * MIB + 4 * MIB);
}

/// A process on no GPU on either side (a shell that came, a daemon whose
/// RSS moved) is counted, not listed: the text leads with what moved on the
/// GPU. JSON keeps every process.
#[test]
fn processes_on_no_gpu_are_counted_not_listed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut before, mut after) = one_l4(GIB, 2 * GIB);
    let mut server = process(1, "llama-server", OLD);
    server.gpu.push(gpu(0, Some(GIB)));
    before.processes.push(server.clone());
    server.gpu[0].vram_bytes = Some(2 * GIB);
    after.processes.push(server);
    // Gone, came and moved, none of them on a GPU.
    let mut daemon = process(2, "sshd", OLD);
    daemon.rss_bytes = Some(10 * MIB);
    before.processes.push(daemon.clone());
    daemon.rss_bytes = Some(500 * MIB);
    after.processes.push(daemon);
    before.processes.push(process(3, "bash", OLD));
    after.processes.push(process(4, "vim", NEW));

    let (d, text) = pair(dir.path(), &before, &after);
    assert_eq!(d["processes"].as_array().unwrap().len(), 4, "{d:#}");
    assert_eq!(d["hidden"]["off_gpu"], 3);
    assert!(text.contains("~ 1 llama-server"), "{text}");
    for name in ["sshd", "bash", "vim"] {
        assert!(!text.contains(name), "{name} listed: {text}");
    }
    assert!(!text.contains("rss n/a"), "{text}");
    assert!(
        text.contains("3 processes on no GPU left out; --json has them all."),
        "{text}"
    );
}
