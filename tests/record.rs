//! `gputaskman record`, the recording reader, `summary` and `plot`.
//!
//! The writer and reader are called through the library, so truncation is
//! tested at every byte; the commands are run
//! as the real binary. The end-to-end test records a real llama.cpp server
//! (xllamacpp + Gemma 3 270M; needs GPUTASKMAN_TEST_PYTHON and
//! GPUTASKMAN_GEMMA_GGUF, which scripts/test.sh sets) while its context is
//! changed. `synthesize_an_hour_of_200_processes` is the benchmark behind
//! scripts/bench_record.sh (ignored in normal runs).

mod common;
mod snapshot_builder;

use gputaskman::record::open_recording;
use gputaskman::record::write::RecordWriter;
use gputaskman::snapshot::{self, Snapshot};
use serde_json::Value;
use snapshot_builder::{bin, device, gpu, process, server_model, snapshot, GIB, MIB};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const OLD: &str = "2026-01-01T09:00:00.000Z";

fn at(second: u64) -> String {
    format!("2026-01-01T10:{:02}:{:02}.000Z", second / 60, second % 60)
}

/// A recording read whole, as `summary` and `plot` read it: the index,
/// then every snapshot parsed in batches.
struct Recording {
    snapshots: Vec<Snapshot>,
    /// What indexing skipped, then what failed to parse.
    skipped: Vec<String>,
}

fn read_recording(path: &Path) -> anyhow::Result<Recording> {
    let ix = open_recording(path)?;
    let mut snapshots = Vec::new();
    let failed = ix.for_each(|_, s| snapshots.push(s));
    let mut skipped = ix.skipped.clone();
    skipped.extend(failed);
    Ok(Recording { snapshots, skipped })
}

/// `n` small snapshots, one a second, a process whose VRAM moves.
fn series(n: u64) -> Vec<Snapshot> {
    (0..n)
        .map(|i| {
            let mut s = snapshot(&at(i));
            s.devices
                .push(device(0, "NVIDIA L4", Some("GPU-l4"), None, Some(GIB + i * MIB)));
            let mut p = process(100, "train", OLD);
            p.gpu.push(gpu(0, Some(100 * MIB + i * MIB)));
            p.rss_bytes = Some(GIB);
            s.processes.push(p);
            s
        })
        .collect()
}

/// Writes `snaps` with `lines_per_frame`; returns the file length after
/// each one (after the writer is finished for the last).
fn write_recording(path: &Path, snaps: &[Snapshot], lines_per_frame: usize) -> Vec<u64> {
    let mut w = RecordWriter::open_with(path, lines_per_frame).unwrap();
    let mut offsets = Vec::new();
    for s in snaps {
        w.append(s).unwrap();
        offsets.push(std::fs::metadata(path).unwrap().len());
    }
    w.finish().unwrap();
    *offsets.last_mut().unwrap() = std::fs::metadata(path).unwrap().len();
    offsets
}

#[test]
fn a_plain_recording_cut_at_any_byte_reads_every_complete_line() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jsonl");
    let snaps = series(4);
    let offsets = write_recording(&full, &snaps, 60);
    let data = std::fs::read(&full).unwrap();
    assert_eq!(data.iter().filter(|&&b| b == b'\n').count(), 4, "one line per snapshot");
    let cut_path = dir.path().join("cut.jsonl");
    for cut in 0..=data.len() {
        std::fs::write(&cut_path, &data[..cut]).unwrap();
        let rec = read_recording(&cut_path).unwrap();
        // A line is whole once its JSON is (its newline may be missing).
        let whole = offsets.iter().filter(|&&o| o <= cut as u64 + 1).count();
        assert_eq!(rec.snapshots.len(), whole, "cut at {cut}: {:?}", rec.skipped);
        assert_eq!(rec.snapshots[..], snaps[..whole], "cut at {cut}");
        let at_boundary = cut == 0 || offsets.iter().any(|&o| o == cut as u64 || o == cut as u64 + 1);
        if at_boundary {
            assert!(rec.skipped.is_empty(), "cut at {cut}: {:?}", rec.skipped);
        } else {
            assert_eq!(rec.skipped.len(), 1, "cut at {cut}: {:?}", rec.skipped);
            let line = whole + 1;
            assert!(
                rec.skipped[0].starts_with(&format!("line {line}: incomplete (the last line, ")),
                "cut at {cut}: {:?}",
                rec.skipped
            );
            assert!(rec.skipped[0].contains("the recording was cut short"));
        }
    }
}

#[test]
fn a_zst_recording_cut_at_any_byte_reads_up_to_its_last_flushed_line() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jsonl.zst");
    let snaps = series(5);
    // Frames of 2 lines: [1 2] [3 4] [5].
    let offsets = write_recording(&full, &snaps, 2);
    let frame_ends = [offsets[1], offsets[3], offsets[4]];
    let data = std::fs::read(&full).unwrap();
    assert_eq!(&data[..4], &[0x28, 0xb5, 0x2f, 0xfd], "zstd");
    let whole = read_recording(&full).unwrap();
    assert_eq!(whole.snapshots, snaps);
    assert!(whole.skipped.is_empty(), "{:?}", whole.skipped);

    let cut_path = dir.path().join("cut.jsonl.zst");
    for cut in 0..=data.len() {
        std::fs::write(&cut_path, &data[..cut]).unwrap();
        let rec = read_recording(&cut_path).unwrap();
        let flushed = offsets.iter().filter(|&&o| o <= cut as u64).count();
        // A cut inside a frame's last bytes (its end mark and checksum)
        // still has the line: it was complete before them.
        let got = rec.snapshots.len();
        assert!(got == flushed || got == flushed + 1, "cut at {cut}: {got} vs {flushed}");
        assert_eq!(rec.snapshots[..], snaps[..got], "cut at {cut}");
        if cut == 0 || frame_ends.contains(&(cut as u64)) {
            assert!(rec.skipped.is_empty(), "cut at {cut}: {:?}", rec.skipped);
        } else {
            assert!(
                rec.skipped
                    .iter()
                    .any(|s| s.contains("ends early: the recording was cut short")),
                "cut at {cut}: {:?}",
                rec.skipped
            );
        }
    }
}

#[test]
fn appending_to_a_recording_that_was_cut_short_keeps_both_parts() {
    for name in ["run.jsonl", "run.jsonl.zst"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let snaps = series(5);
        let offsets = write_recording(&path, &snaps[..3], 60);
        // A crash in the middle of the third line.
        let data = std::fs::read(&path).unwrap();
        let cut = ((offsets[1] + offsets[2]) / 2) as usize;
        std::fs::write(&path, &data[..cut]).unwrap();
        // Recording again into the same file.
        write_recording(&path, &snaps[3..], 60);
        let rec = read_recording(&path).unwrap();
        let expected: Vec<Snapshot> = [&snaps[..2], &snaps[3..]].concat();
        assert_eq!(rec.snapshots, expected, "{name}: {:?}", rec.skipped);
        assert!(!rec.skipped.is_empty(), "{name}: the damage is said");
        if name.ends_with(".zst") {
            assert!(
                rec.skipped.iter().any(|s| s.contains("reading on from the next frame")),
                "{name}: {:?}",
                rec.skipped
            );
        } else {
            assert_eq!(rec.skipped.len(), 1, "{:?}", rec.skipped);
            assert!(rec.skipped[0].starts_with("line 3: not JSON"), "{:?}", rec.skipped);
        }
    }
}

#[test]
fn lines_that_are_not_snapshots_are_skipped_and_said_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.jsonl");
    let snaps = series(3);
    let line = |s: &Snapshot| serde_json::to_string(s).unwrap();
    let mut v2 = serde_json::to_value(&snaps[1]).unwrap();
    v2["schema_version"] = 2.into();
    let mut body = String::new();
    body += &format!("{}\n", line(&snaps[0]));
    body += "GPU 0: 15 GiB used\n";
    body += &format!("{v2}\n");
    body += "[]\n";
    body += "{\"schema_version\": 1}\n";
    body += "\n";
    body += &format!("{}\n", line(&snaps[1]));
    body += &"x".repeat(65 << 20);
    body += "\n";
    body += &format!("{}\n", line(&snaps[2]));
    body += &line(&snaps[2])[..100];
    std::fs::write(&path, body).unwrap();

    let rec = read_recording(&path).unwrap();
    assert_eq!(rec.snapshots, snaps);
    let expected = [
        "line 2: not JSON (expected value at line 1 column 1); skipped",
        "line 3: schema_version 2, but this gputaskman reads schema_version 1; skipped",
        "line 5: not a snapshot (missing field `taken_at` at line 1 column 21); skipped",
        "line 8: longer than 64 MiB; skipped",
        "line 10: incomplete (the last line, 100 bytes, has no newline: the recording was cut short); skipped",
    ];
    assert!(
        rec.skipped[2].starts_with("line 4: not a snapshot (invalid length 0, expected struct Snapshot"),
        "{:?}",
        rec.skipped
    );
    let mut others = rec.skipped.clone();
    others.remove(2);
    assert_eq!(others, expected);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn garbage_and_damaged_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let path = dir.path().join("garbage");
    for round in 0..300 {
        let len = rng.below(5000) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if round % 2 == 0 {
            data.splice(0..0, [0x28, 0xb5, 0x2f, 0xfd]);
        }
        if round % 3 == 0 {
            for _ in 0..rng.below(20) {
                let at = rng.below(data.len() as u64 + 1) as usize;
                data.insert(at, b'\n');
            }
        }
        std::fs::write(&path, &data).unwrap();
        let rec = read_recording(&path).unwrap();
        assert!(rec.snapshots.is_empty());
        assert!(rec.skipped.len() <= 101, "notes are bounded: {}", rec.skipped.len());
    }

    // A real recording with bytes flipped: whatever is read is real.
    let snaps = series(12);
    let full = dir.path().join("full.jsonl.zst");
    write_recording(&full, &snaps, 3);
    let data = std::fs::read(&full).unwrap();
    for round in 0..200 {
        let mut bad = data.clone();
        for _ in 0..1 + round % 4 {
            let at = rng.below(bad.len() as u64) as usize;
            bad[at] ^= 1 << rng.below(8);
        }
        std::fs::write(&path, &bad).unwrap();
        let rec = read_recording(&path).unwrap();
        for s in &rec.snapshots {
            assert!(snaps.contains(s), "round {round}: a snapshot that was never written");
        }
    }
}

/// The real binary's `record`, run to its end.
fn record(path: &Path, interval: &str, duration: &str) -> String {
    let out = bin()
        .args(["record", "-o"])
        .arg(path)
        .args(["--interval", interval, "--duration", duration])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn record_writes_one_snapshot_per_interval_plain_and_zst() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::Sleeper::spawn(dir.path(), "llama-server", &["-c", "4096"]);
    for name in ["run.jsonl", "run.jsonl.zst"] {
        let path = dir.path().join(name);
        let stderr = record(&path, "0.5", "2.5");
        assert!(
            stderr.contains(&format!("{}: 5 snapshots written", path.display())),
            "{stderr}"
        );
        let rec = read_recording(&path).unwrap();
        assert!(rec.skipped.is_empty(), "{:?}", rec.skipped);
        assert_eq!(rec.snapshots.len(), 5);
        let times: Vec<f64> = rec
            .snapshots
            .iter()
            .map(|s| gputaskman::units::unix_seconds(&s.taken_at).unwrap())
            .collect();
        for w in times.windows(2) {
            let gap = w[1] - w[0];
            assert!((0.3..0.8).contains(&gap), "{name}: {gap} s between snapshots");
        }
        for s in &rec.snapshots {
            assert_eq!(s.schema_version, 1);
            let p = s.processes.iter().find(|p| p.pid == server.pid());
            assert_eq!(p.and_then(|p| p.name.as_deref()), Some("llama-server"), "{name}");
        }
        let raw = std::fs::read(&path).unwrap();
        if name.ends_with(".zst") {
            assert_eq!(&raw[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
        } else {
            assert_eq!(raw.iter().filter(|&&b| b == b'\n').count(), 5);
        }
    }
    // Recording again appends.
    let path = dir.path().join("run.jsonl.zst");
    record(&path, "0.5", "1");
    assert_eq!(read_recording(&path).unwrap().snapshots.len(), 7);
}

/// Starts `record` in the background and waits for `lines` snapshots.
fn start_recording(path: &Path, interval: &str) -> std::process::Child {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gputaskman"))
        .env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .args(["record", "-o"])
        .arg(path)
        .args(["--interval", interval])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
}

/// Waits until `path` reads with at least `n` snapshots satisfying `ok`.
fn wait_for(path: &Path, n: usize, ok: impl Fn(&Snapshot) -> bool, what: &str) -> Recording {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(rec) = read_recording(path) {
            if rec.snapshots.iter().filter(|s| ok(s)).count() >= n {
                return rec;
            }
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kills the recorder when dropped (a failing test leaves nothing behind).
struct Recorder(std::process::Child);

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the PID of a child we own and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

#[test]
fn ctrl_c_closes_the_recording_and_a_kill_leaves_it_readable() {
    let dir = tempfile::tempdir().unwrap();
    // Ctrl-C: the frame is closed, nothing to skip.
    let path = dir.path().join("int.jsonl.zst");
    let mut rec = Recorder(start_recording(&path, "0.1"));
    wait_for(&path, 3, |_| true, "3 snapshots");
    signal(&rec.0, libc::SIGINT);
    let status = rec.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let r = read_recording(&path).unwrap();
    assert!(r.snapshots.len() >= 3);
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);

    // SIGKILL: no chance to close anything; every line written reads.
    let path = dir.path().join("kill.jsonl.zst");
    let mut rec = Recorder(start_recording(&path, "0.1"));
    let seen = wait_for(&path, 3, |_| true, "3 snapshots").snapshots.len();
    signal(&rec.0, libc::SIGKILL);
    let _ = rec.0.wait();
    let r = read_recording(&path).unwrap();
    assert!(r.snapshots.len() >= seen, "{} < {seen}", r.snapshots.len());
    assert!(
        r.skipped.iter().any(|s| s.contains("the recording was cut short")),
        "{:?}",
        r.skipped
    );
}

/// A recording with known values for summary and plot.
fn known_recording(dir: &Path) -> PathBuf {
    let path = dir.join("known.jsonl.zst");
    let mut w = RecordWriter::open(&path).unwrap();
    let vram = [100, 300, 200, 50];
    let used = [Some(GIB), Some(3 * GIB), Some(2 * GIB), None];
    for i in 0..4 {
        let mut s = snapshot(&at(i as u64));
        s.devices.push(device(0, "NVIDIA L4", Some("GPU-l4"), None, used[i]));
        let mut p = process(100, "train", OLD);
        p.gpu.push(gpu(0, Some(vram[i] * MIB)));
        p.rss_bytes = Some(GIB + i as u64 * MIB);
        s.processes.push(p);
        // PID 200 is reused after two snapshots.
        let (name, start) = if i < 2 {
            ("a", OLD)
        } else {
            ("b", "2026-01-01T10:00:01.500Z")
        };
        let mut p = process(200, name, start);
        p.rss_bytes = Some(10 * MIB);
        s.processes.push(p);
        // A server whose context is raised (a restart under the same PID
        // would be another start time; here the model changes in place).
        let mut p = process(300, "llama-server", OLD);
        p.rss_bytes = if i == 1 { None } else { Some(300 * MIB) };
        if i == 0 {
            p.models_pending = true;
        } else if i < 3 {
            p.models.push(server_model(8080, 4096, 12 * MIB, 72 * MIB));
        } else {
            p.models.push(server_model(8080, 32768, 96 * MIB, 576 * MIB));
        }
        s.processes.push(p);
        w.append(&s).unwrap();
    }
    w.finish().unwrap();
    path
}

fn stats(v: &Value) -> (Value, Value, Value, Value, Value, Value, Value) {
    (
        v["min"].clone(),
        v["median"].clone(),
        v["max"].clone(),
        v["last"].clone(),
        v["peak_at"].clone(),
        v["known"].clone(),
        v["unknown"].clone(),
    )
}

#[test]
fn summary_gives_min_median_max_last_and_peak_per_device_and_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = known_recording(dir.path());
    let out = snapshot_builder::run_ok(&["summary".as_ref(), path.as_os_str(), "--json".as_ref()]);
    let s: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["snapshots"], 4);
    assert_eq!(s["first"], at(0));
    assert_eq!(s["last"], at(3));
    assert_eq!(s["interval_s"], 1.0);
    assert_eq!(s["skipped"], serde_json::json!([]));
    let d = &s["devices"][0];
    assert_eq!(d["uuid"], "GPU-l4");
    assert_eq!(d["samples"], 4);
    assert_eq!(
        stats(&d["memory_used_bytes"]),
        (
            GIB.into(),
            (2 * GIB).into(),
            (3 * GIB).into(),
            Value::Null,
            at(1).into(),
            3.into(),
            1.into()
        )
    );
    let procs = s["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 4, "PID 200 reused is two processes: {s:#}");
    let train = &procs[0];
    assert_eq!(train["pid"], 100);
    assert_eq!(
        stats(&train["gpu"][0]["vram_bytes"]),
        (
            (50 * MIB).into(),
            (100 * MIB).into(),
            (300 * MIB).into(),
            (50 * MIB).into(),
            at(1).into(),
            4.into(),
            0.into()
        )
    );
    assert_eq!(train["gpu"][0]["device"], "GPU 0 NVIDIA L4");
    assert_eq!(train["vram_bytes"]["max"], 300 * MIB);
    assert_eq!(train["rss_bytes"]["last"], GIB + 3 * MIB);
    assert_eq!(train["rss_bytes"]["peak_at"], at(3));
    let server = procs.iter().find(|p| p["pid"] == 300).unwrap();
    assert_eq!(server["rss_bytes"]["known"], 3);
    assert_eq!(server["rss_bytes"]["unknown"], 1);
    // No GPU entry: VRAM is unknown, not 0.
    assert_eq!(server["vram_bytes"]["max"], Value::Null);
    assert_eq!(server["vram_bytes"]["unknown"], 4);
    let reused: Vec<&Value> = procs.iter().filter(|p| p["pid"] == 200).collect();
    assert_eq!(reused.len(), 2);
    assert_eq!(reused[0]["name"], "a");
    assert_eq!(reused[0]["samples"], 2);
    assert_eq!(reused[0]["last_seen"], at(1));
    assert_eq!(reused[1]["name"], "b");
    assert_eq!(reused[1]["first_seen"], at(2));

    let m = &s["models"][0];
    assert_eq!(m["pid"], 300);
    let points = m["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{m:#}");
    assert_eq!(points[0]["at"], at(1), "the pending sample is not a point");
    assert_eq!(points[0]["context"], 4096);
    assert_eq!(points[0]["estimate_kv_bytes"], 12 * MIB);
    assert_eq!(points[0]["reported_kv_bytes"], 12 * MIB);
    assert_eq!(points[1]["at"], at(3));
    assert_eq!(points[1]["context"], 32768);
    assert_eq!(points[1]["estimate_kv_bytes"], 96 * MIB);
    assert_eq!(points[1]["estimate_kv_bytes_without_window"], 576 * MIB);

    let text = snapshot_builder::run_ok(&["summary".as_ref(), path.as_os_str()]);
    assert!(
        text.contains("4 snapshots from 2026-01-01T10:00:00.000Z to 2026-01-01T10:00:03.000Z (3.0s, every 1.0s)"),
        "{text}"
    );
    assert!(
        text.contains("GPU 0 NVIDIA L4 (GPU-l4), total 24.00 GiB, in 4 snapshots"),
        "{text}"
    );
    assert!(
        text.contains(
            "      used                            1.00 GiB    2.00 GiB    3.00 GiB         n/a   10:00:01  (1 n/a)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "      vram GPU 0 NVIDIA L4            50.0 MiB   100.0 MiB   300.0 MiB    50.0 MiB   10:00:01\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "10:00:03  context 32768, slots 1, estimate KV 96.0 MiB (window-blind 576.0 MiB), reported KV 96.0 MiB"
        ),
        "{text}"
    );
    // What never held GPU memory is counted, not listed (issue 37 item 8):
    // the two runs of PID 200 and the server with no GPU entry.
    let never: Vec<&Value> = procs
        .iter()
        .filter(|p| p["gpu"].as_array().is_some_and(|g| g.is_empty()))
        .collect();
    assert_eq!(never.len(), 3, "{procs:#?}");
    assert!(
        text.contains("  3 processes never on a GPU left out (--all lists them; --json has them all)\n"),
        "{text}"
    );
    assert!(!text.contains("  200 a  seen"), "{text}");
    let all = snapshot_builder::run_ok(&["summary".as_ref(), path.as_os_str(), "--all".as_ref()]);
    assert!(all.contains("  200 a  seen") && all.contains("  200 b  seen"), "{all}");
    assert!(!all.contains("never on a GPU left out"), "{all}");
}

/// One snapshot is one, not "1 snapshots" (as summary said).
#[test]
fn summary_counts_one_snapshot_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.jsonl");
    let mut w = RecordWriter::open(&path).unwrap();
    let mut s = snapshot(&at(0));
    s.devices.push(device(0, "NVIDIA L4", Some("GPU-l4"), None, Some(GIB)));
    let mut p = process(100, "train", OLD);
    p.gpu.push(gpu(0, Some(MIB)));
    s.processes.push(p);
    w.append(&s).unwrap();
    w.finish().unwrap();
    let text = snapshot_builder::run_ok(&["summary".as_ref(), path.as_os_str()]);
    assert!(text.contains(": 1 snapshot from "), "{text}");
    assert!(text.contains("total 24.00 GiB, in 1 snapshot\n"), "{text}");
    assert!(text.contains("(1 snapshot)\n"), "{text}");
    assert!(!text.contains("1 snapshots"), "{text}");
}

/// Tags open and close in order (a small well-formedness check).
fn well_formed(svg: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').ok_or("an unclosed tag")?;
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
            if open != name {
                return Err(format!("<{open}> closed by </{name}>"));
            }
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().ok_or("an empty tag")?);
        }
        if tag.contains('<') || tag.contains('&') && !tag.contains("&amp;") && !tag.contains("&quot;") {
            return Err(format!("unescaped text in <{tag}>"));
        }
    }
    match stack.is_empty() {
        true => Ok(()),
        false => Err(format!("unclosed: {stack:?}")),
    }
}

#[test]
fn plot_draws_a_self_contained_svg_with_gaps_for_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = known_recording(dir.path());
    let svg_path = dir.path().join("mem.svg");
    bin()
        .args(["plot".as_ref(), path.as_os_str(), "-o".as_ref(), svg_path.as_os_str()])
        .assert()
        .success();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    well_formed(&svg).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(!svg.contains("href"), "self-contained");
    assert!(svg.contains("GPU 0 NVIDIA L4 used (peak 3.00 GiB)"), "{svg}");
    assert!(svg.contains("100 train vram GPU 0 (peak 300.0 MiB)"), "{svg}");
    // The axis reaches the device's total (24 GiB), drawn as its ceiling.
    assert!(svg.contains("GPU 0 NVIDIA L4 total (peak 24.00 GiB)"), "{svg}");
    for label in [
        ">0<",
        ">8 GiB<",
        ">16 GiB<",
        ">24 GiB<",
        ">10:00:00<",
        ">10:00:03<",
        ">time (UTC)<",
    ] {
        assert!(svg.contains(label), "{label}: {svg}");
    }
    // Device used: 3 known points, then a gap (not a drop to 0).
    let device_line = svg
        .split("<title>GPU 0 NVIDIA L4 used</title>")
        .nth(1)
        .and_then(|s| s.split("points=\"").nth(1))
        .and_then(|s| s.split('"').next())
        .unwrap();
    assert_eq!(device_line.split(' ').count(), 3, "{device_line}");
    assert_eq!(
        svg.matches("<polyline").count(),
        3,
        "used, total and one process's VRAM; no RSS without --rss"
    );

    bin()
        .args([
            "plot".as_ref(),
            path.as_os_str(),
            "-o".as_ref(),
            svg_path.as_os_str(),
            "--rss".as_ref(),
        ])
        .assert()
        .success();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    well_formed(&svg).unwrap();
    assert!(svg.contains("300 llama-server rss (peak 300.0 MiB)"), "{svg}");
    // RSS of 300 is unknown in the second snapshot: two runs.
    let server = svg.split("<title>300 llama-server rss</title>").nth(1).unwrap();
    let server = &server[..server.find("</g>").unwrap()];
    assert_eq!(
        server.matches("<circle").count() + server.matches("<polyline").count(),
        2,
        "{server}"
    );
}

/// Two GPUs and 14 processes: 18 series, more than the 12 colours of the
/// palette. Every series has a colour of its own, and each device's total
/// is drawn as its ceiling. (The old plot cycled 12 colours and drew no
/// total.)
#[test]
fn plot_gives_every_series_its_own_colour_and_draws_each_device_total() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.jsonl");
    let mut w = RecordWriter::open(&path).unwrap();
    for i in 0..3u64 {
        let mut s = snapshot(&at(i));
        for d in 0..2 {
            let mut dev = device(d, "NVIDIA L4", Some(&format!("GPU-l4-{d}")), None, Some(GIB + i * MIB));
            dev.memory_total_bytes = Some(24 * GIB);
            s.devices.push(dev);
        }
        for pid in 0..14u32 {
            let mut p = process(1000 + pid, &format!("w{pid}"), OLD);
            p.gpu.push(gpu(pid % 2, Some((u64::from(pid) + 1) * 10 * MIB)));
            s.processes.push(p);
        }
        w.append(&s).unwrap();
    }
    w.finish().unwrap();
    let svg_path = dir.path().join("many.svg");
    bin()
        .args(["plot".as_ref(), path.as_os_str(), "-o".as_ref(), svg_path.as_os_str()])
        .args(["--top", "14"])
        .assert()
        .success();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    well_formed(&svg).unwrap();
    let colours: Vec<&str> = svg
        .split(r#"<g fill="none" stroke=""#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert_eq!(colours.len(), 2 + 2 + 14, "{svg}");
    let distinct: std::collections::BTreeSet<&str> = colours.iter().copied().collect();
    assert_eq!(distinct.len(), colours.len(), "a colour is shared: {colours:?}");
    for d in 0..2 {
        let label = format!("GPU {d} NVIDIA L4 total");
        assert!(svg.contains(&format!("{label} (peak 24.00 GiB)")), "{label}: {svg}");
        // Three points, all at the total.
        let line = svg
            .split(&format!("<title>{label}</title>"))
            .nth(1)
            .and_then(|s| s.split("points=\"").nth(1))
            .and_then(|s| s.split('"').next())
            .unwrap();
        let ys: std::collections::BTreeSet<&str> = line.split(' ').map(|p| p.split(',').nth(1).unwrap()).collect();
        assert_eq!((line.split(' ').count(), ys.len()), (3, 1), "{line}");
    }
    // The axis reaches the totals.
    assert!(svg.contains(">24 GiB<"), "{svg}");
}

#[test]
fn summary_and_plot_refuse_a_file_that_is_no_recording() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "GPU 0: 15 GiB used\n").unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let svg = dir.path().join("x.svg");
    for (args, expected) in [
        (
            vec!["summary".as_ref(), notes.as_os_str()],
            "notes.txt: no snapshot in it (not a recording from `gputaskman record`?): line 1: not JSON",
        ),
        (
            vec!["summary".as_ref(), empty.as_os_str()],
            "empty.jsonl: empty, no snapshot in it",
        ),
        (
            vec!["plot".as_ref(), notes.as_os_str(), "-o".as_ref(), svg.as_os_str()],
            "notes.txt: no snapshot in it",
        ),
        (
            vec!["summary".as_ref(), dir.path().join("none.jsonl").as_os_str()],
            "none.jsonl: cannot read",
        ),
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(expected), "{err}");
    }
    assert!(!svg.exists());

    // One pretty-printed snapshot (`--json`) is a recording of one.
    let one = snapshot_builder::write(dir.path(), "one.json", &series(1)[0]);
    let out = snapshot_builder::run_ok(&["summary".as_ref(), one.as_os_str(), "--json".as_ref()]);
    let s: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["snapshots"], 1);
    assert_eq!(s["processes"][0]["vram_bytes"]["max"], 100 * MIB);
}

/// Replay's one-at-a-time reads (with each time read from the index, not
/// parsed) give what the batches give.
fn same_as_index(path: &Path, rec: &Recording) {
    let ix = open_recording(path).unwrap();
    assert_eq!(ix.len(), rec.snapshots.len(), "{}: {:?}", path.display(), rec.skipped);
    for (i, s) in rec.snapshots.iter().enumerate().rev() {
        assert_eq!(ix.taken_at(i), Some(s.taken_at.as_str()));
        assert_eq!(&ix.get(i).unwrap(), s, "{}: snapshot {i}", path.display());
    }
    assert!(ix.get(rec.snapshots.len()).is_err());
}

#[test]
fn replay_reads_one_at_a_time_what_summary_reads_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = series(7);
    // Plain and zstd, whole and cut at a few places.
    for (name, frame) in [("a.jsonl", 60), ("a.jsonl.zst", 3)] {
        let full = dir.path().join(name);
        write_recording(&full, &snaps, frame);
        let data = std::fs::read(&full).unwrap();
        let cut_path = dir.path().join(format!("cut-{name}"));
        for cut in (0..=data.len()).step_by(37).chain([data.len()]) {
            std::fs::write(&cut_path, &data[..cut]).unwrap();
            same_as_index(&cut_path, &read_recording(&cut_path).unwrap());
        }
        // Appended to after a crash.
        std::fs::write(&cut_path, &data[..data.len() / 2]).unwrap();
        write_recording(&cut_path, &snaps[..2], 60);
        let rec = read_recording(&cut_path).unwrap();
        assert!(rec.snapshots.len() >= 2);
        same_as_index(&cut_path, &rec);
    }
    // Lines that are not snapshots; one pretty-printed snapshot.
    let mixed = dir.path().join("mixed.jsonl");
    let line = serde_json::to_string(&snaps[0]).unwrap();
    std::fs::write(&mixed, format!("{line}\nGPU 0\n[]\n\n{line}\n{}", &line[..50])).unwrap();
    let rec = read_recording(&mixed).unwrap();
    assert_eq!(rec.snapshots.len(), 2);
    same_as_index(&mixed, &rec);
    let one = snapshot_builder::write(dir.path(), "one.json", &snaps[3]);
    same_as_index(&one, &read_recording(&one).unwrap());
    // Bytes flipped in a zstd recording.
    let full = dir.path().join("a.jsonl.zst");
    let data = std::fs::read(&full).unwrap();
    let mut rng = Rng(7);
    let bad = dir.path().join("bad.jsonl.zst");
    for _ in 0..60 {
        let mut d = data.clone();
        let at = rng.below(d.len() as u64) as usize;
        d[at] ^= 1 << rng.below(8);
        std::fs::write(&bad, &d).unwrap();
        let rec = read_recording(&bad).unwrap();
        let ix = open_recording(&bad).unwrap();
        // A line damaged in its middle is indexed, then fails to parse in
        // either way of reading, and is named among what was skipped.
        let one_at_a_time: Vec<Snapshot> = (0..ix.len()).filter_map(|i| ix.get(i).ok()).collect();
        assert_eq!(one_at_a_time, rec.snapshots);
        assert_eq!(ix.len() - one_at_a_time.len(), rec.skipped.len() - ix.skipped.len());
    }
}

// ------------------------------------------------------------ end to end

/// A real llama.cpp server on a given port (see tests/llama_server.rs).
struct Server {
    daemon: common::Daemon,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(python: &Path, model: &Path, port: u16, extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/llama_server.py");
        let mut cmd = std::process::Command::new(python);
        cmd.arg(script)
            .arg("--model")
            .arg(model)
            .args(["--port", &port.to_string()])
            .args(extra)
            .stderr(std::fs::File::create(dir.path().join("server.log")).unwrap());
        let daemon = common::Daemon::start(cmd, port, Duration::from_secs(120));
        Server { daemon, _dir: dir }
    }
}

fn environment() -> Option<(PathBuf, PathBuf)> {
    let python = std::env::var_os("GPUTASKMAN_TEST_PYTHON").map(PathBuf::from);
    let model = std::env::var_os("GPUTASKMAN_GEMMA_GGUF").map(PathBuf::from);
    match (python, model) {
        (Some(p), Some(m)) if p.exists() && m.exists() => Some((p, m)),
        _ => {
            eprintln!("SKIPPED: set GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh does)");
            None
        }
    }
}

/// The model of process `pid` in `s`, when discovery has filled it.
fn model_of(s: &Snapshot, pid: u32) -> Option<&snapshot::Model> {
    s.processes.iter().find(|p| p.pid == pid)?.models.first()
}

/// Waits until the last 4 snapshots that list `pid` show its model served
/// at `context` and its RSS within 1 MiB.
fn wait_settled(path: &Path, pid: u32, context: u64) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(rec) = read_recording(path) {
            let last: Vec<&snapshot::Process> = rec
                .snapshots
                .iter()
                .rev()
                .filter_map(|s| s.processes.iter().find(|p| p.pid == pid))
                .take(4)
                .collect();
            let served = last.iter().all(|p| {
                p.models
                    .first()
                    .is_some_and(|m| m.context == Some(context) && m.server_url.is_some())
            });
            let rss: Vec<u64> = last.iter().filter_map(|p| p.rss_bytes).collect();
            let still = rss.len() == 4 && rss.iter().max().unwrap() - rss.iter().min().unwrap() <= MIB;
            if last.len() == 4 && served && still {
                return;
            }
        }
        assert!(Instant::now() < deadline, "timed out waiting for {pid} to settle");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// RSS over the recording of two processes, for a failure message.
fn rss_trace(rec: &Recording, a: u32, b: u32) -> String {
    rec.snapshots
        .iter()
        .map(|s| {
            let rss = |pid: u32| {
                s.processes
                    .iter()
                    .find(|p| p.pid == pid)
                    .map(|p| format!("{:?}/{}", p.rss_bytes.map(|r| r / MIB), p.models.len()))
                    .unwrap_or_else(|| "-".into())
            };
            format!("{} a={} b={}", s.taken_at, rss(a), rss(b))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Records a real llama.cpp server at -c 4096, restarts it on the same
/// port at -c 32768 (as a reload does: a new PID), and diffs the last
/// snapshot of each: the diff pairs the two by name and port and shows
/// the measured growth of the process beside the estimate (+84 MiB, what
/// llama.cpp logs) and the window-blind figure (+504 MiB).
#[test]
fn a_recorded_context_change_diffs_measured_growth_beside_the_estimate() {
    let Some((python, model)) = environment() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.jsonl.zst");
    let port = common::free_port();
    let mut recorder = Recorder(start_recording(&run, "0.5"));

    let first = Server::start(&python, &model, port, &["-c", "4096", "-np", "1"]);
    let a_pid = first.daemon.pid();
    // Discovery runs in the background, and a server's RSS grows for a
    // while after it answers (pages of the mapped model are touched): wait
    // until the model is described by the server's API and the RSS has
    // held still for 4 samples.
    wait_settled(&run, a_pid, 4096);
    drop(first);
    let second = Server::start(&python, &model, port, &["-c", "32768", "-np", "1"]);
    let b_pid = second.daemon.pid();
    wait_settled(&run, b_pid, 32768);
    signal(&recorder.0, libc::SIGINT);
    assert!(recorder.0.wait().unwrap().success());
    drop(second);

    let rec = read_recording(&run).unwrap();
    assert!(rec.skipped.is_empty(), "{:?}", rec.skipped);
    let last_with = |pid: u32| {
        rec.snapshots
            .iter()
            .rev()
            .find(|s| model_of(s, pid).is_some_and(|m| m.server_url.is_some()))
            .cloned()
            .unwrap()
    };
    let before = snapshot_builder::write(dir.path(), "before.json", &last_with(a_pid));
    let after = snapshot_builder::write(dir.path(), "after.json", &last_with(b_pid));
    let d = snapshot_builder::diff_json(&before, &after);
    let e = d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["before"]["pid"] == a_pid)
        .unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(e["after"]["pid"], b_pid, "{e:#}");
    assert_eq!(e["paired_by"], "name_port", "{d:#}");
    assert_eq!(e["port"], port);
    let rss = e["rss_bytes"]["delta"].as_i64().expect("RSS measured on both sides");
    let m = d["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["pid_before"] == a_pid)
        .unwrap();
    assert_eq!(m["pid_after"], b_pid);
    assert_eq!(m["context"]["before"], 4096);
    assert_eq!(m["context"]["after"], 32768);
    assert_eq!(m["estimate"]["kv_bytes"]["delta"], 84 * MIB);
    assert_eq!(m["reported"]["kv_bytes"]["delta"], 84 * MIB, "llama.cpp's log agrees");
    assert_eq!(m["estimate"]["kv_bytes_without_window"]["delta"], 504 * MIB);
    let (est, blind) = (84 * MIB as i64, 504 * MIB as i64);
    eprintln!(
        "-c 4096 -> 32768 across a restart on port {port}: measured RSS {:+.1} MiB, estimate +84 MiB, window-blind +504 MiB",
        rss as f64 / MIB as f64
    );
    assert!(
        (rss - est).abs() < (rss - blind).abs(),
        "the measured growth ({rss}) follows the window-aware estimate, not the window-blind one: {:#}\n{}",
        e["rss_bytes"],
        rss_trace(&rec, a_pid, b_pid)
    );

    let text = snapshot_builder::diff_text(&before, &after);
    let (measured, models) = text.split_once("Models (estimated").expect("a models section");
    assert!(
        measured.contains(&format!("~ {a_pid} -> {b_pid} "))
            && measured.contains(&format!("listening on port {port}]")),
        "{text}"
    );
    assert!(
        models.contains("context (tokens)            4096 -> 32768  +28672"),
        "{text}"
    );
    assert!(models.contains("+84.0 MiB") && models.contains("+504.0 MiB"), "{text}");
    assert!(models.contains("measured, same process      rss "), "{text}");

    // The summary follows each server and its context over time.
    let out = snapshot_builder::run_ok(&["summary".as_ref(), run.as_os_str(), "--json".as_ref()]);
    let s: Value = serde_json::from_str(&out).unwrap();
    let points = |pid: u32| -> Vec<Value> {
        s["models"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["pid"] == pid)
            .flat_map(|m| m["points"].as_array().unwrap().clone())
            .collect()
    };
    let (a, b) = (points(a_pid), points(b_pid));
    assert!(a.iter().all(|p| p["context"] == 4096), "{a:?}");
    assert!(b.iter().all(|p| p["context"] == 32768), "{b:?}");
    let (a, b) = (a.last().unwrap(), b.last().unwrap());
    assert_eq!(a["reported_kv_bytes"], a["estimate_kv_bytes"]);
    assert_eq!(b["reported_kv_bytes"], b["estimate_kv_bytes"]);
    let grew = b["estimate_kv_bytes"].as_u64().unwrap() - a["estimate_kv_bytes"].as_u64().unwrap();
    assert_eq!(grew, 84 * MIB);
}

// ------------------------------------------------------------ benchmark

/// One hour at 1 s of 200 processes on 2 devices, written with the real
/// writer, plain and zstd, then read back with the real reader. Run by
/// scripts/bench_record.sh (in release), which reads the BENCH lines.
#[test]
#[ignore = "benchmark: scripts/bench_record.sh"]
fn synthesize_an_hour_of_200_processes() {
    let out = PathBuf::from(std::env::var("GPUTASKMAN_BENCH_DIR").expect("GPUTASKMAN_BENCH_DIR"));
    let snapshots: usize = std::env::var("GPUTASKMAN_BENCH_SNAPSHOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600);
    let plain = out.join("hour.jsonl");
    let zst = out.join("hour.jsonl.zst");
    let _ = std::fs::remove_file(&plain);
    let _ = std::fs::remove_file(&zst);
    let mut wp = RecordWriter::open(&plain).unwrap();
    let mut wz = RecordWriter::open(&zst).unwrap();
    let mut gen = Synth::new(200);
    let mut write_s = [0f64; 2];
    for i in 0..snapshots {
        let s = gen.next(i);
        let t = Instant::now();
        wp.append(&s).unwrap();
        write_s[0] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        wz.append(&s).unwrap();
        write_s[1] += t.elapsed().as_secs_f64();
    }
    wp.finish().unwrap();
    wz.finish().unwrap();
    for (name, path, w) in [("plain", &plain, write_s[0]), ("zst", &zst, write_s[1])] {
        let t = Instant::now();
        let rec = read_recording(path).unwrap();
        let read_s = t.elapsed().as_secs_f64();
        assert_eq!(rec.snapshots.len(), snapshots);
        assert!(rec.skipped.is_empty());
        assert_eq!(rec.snapshots[snapshots - 1].processes.len(), 200);
        drop(rec);
        // Replay's way in: index, then parse the snapshots shown.
        let t = Instant::now();
        let ix = open_recording(path).unwrap();
        let open_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let last = ix.get(snapshots - 1).unwrap();
        let last_ms = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        // The End key: the sparklines' five minutes before the last one.
        let indices: Vec<usize> = (snapshots.saturating_sub(300)..snapshots).collect();
        let window: Vec<Snapshot> = ix.get_many(&indices).into_iter().map(Result::unwrap).collect();
        let window_ms = t.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(ix.len(), snapshots);
        assert_eq!(window.last(), Some(&last));
        println!(
            "BENCH {name} bytes={} write_ms_per_snapshot={:.3} read_all_s={read_s:.3} index_open_s={open_s:.3} get_last_ms={last_ms:.1} get_last_300_ms={window_ms:.1} snapshots={snapshots}",
            std::fs::metadata(path).unwrap().len(),
            w * 1000.0 / snapshots as f64
        );
    }
}

/// Realistic snapshots: 200 processes (AI servers with models, trainers,
/// browsers, a compositor, tools), VRAM that mostly holds still, some that
/// leaks, RSS in pages, CPU% from tick counts over jittered windows.
struct Synth {
    rng: Rng,
    base: Vec<snapshot::Process>,
    devices: Vec<snapshot::Device>,
}

impl Synth {
    fn new(n: u32) -> Synth {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let kinds = [
            ("llama-server", "ai", "/opt/llama.cpp/bin/llama-server -m /srv/models/qwen3-8b-q4_k_m.gguf -c 16384 -np 4 -ngl 99 --port {port} --host 127.0.0.1"),
            ("python3", "ai", "python3 -m vllm.entrypoints.openai.api_server --model /srv/hf/Qwen3-8B --port {port} --gpu-memory-utilization 0.4"),
            ("python3", "ai", "python3 train.py --config configs/run-{port}.yaml --batch-size 32 --lr 0.0003 --api-key <redacted>"),
            ("ollama", "ai", "/usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa --port {port}"),
            ("firefox", "browser", "/usr/lib/firefox/firefox -contentproc -childID {port} -isForBrowser -prefsLen 31245 -prefMapSize 244787 -jsInitLen 231800 -parentBuildID 20251120000000 tab"),
            ("chrome", "browser", "/opt/google/chrome/chrome --type=gpu-process --crashpad-handler-pid={port} --enable-crash-reporter --gpu-preferences=WAAAAAAAAAAgAAAEAAAAAAAAAAAAAAAAAABgAAEAAAA"),
            ("code", "other", "/usr/share/code/code --type=renderer --crashpad-handler-pid={port} --enable-crash-reporter=a --app-path=/usr/share/code/resources/app"),
            ("blender", "other", "/opt/blender/blender --background scene-{port}.blend --render-anim --cycles-device CUDA"),
        ];
        let mut base = Vec::new();
        for i in 0..n {
            let (name, kind, cmd) = kinds[(i as usize * 7 + i as usize / 3) % kinds.len()];
            let port = 8000 + i;
            let mut p = process(
                10_000 + i * 37,
                name,
                &format!(
                    "2026-01-01T0{}:{:02}:{:02}.{:03}Z",
                    i % 9,
                    i % 60,
                    (i * 7) % 60,
                    i % 1000
                ),
            );
            p.kind = serde_json::from_value(Value::from(kind)).unwrap();
            p.user = Some(if i % 5 == 0 { "root" } else { "alice" }.into());
            p.cmdline = Some(cmd.replace("{port}", &port.to_string()));
            p.exe = Some(format!("/usr/bin/{name}"));
            p.runtimes = match kind {
                "ai" => vec![
                    "cuda".into(),
                    "cublas".into(),
                    if name == "python3" { "pytorch" } else { "llama.cpp" }.into(),
                ],
                "browser" => vec!["vulkan".into()],
                _ => vec![],
            };
            p.rss_bytes = Some((200 + rng.below(4000)) * MIB);
            if i % 4 != 3 {
                // Most hold tens to hundreds of MiB; a few AI processes GiBs.
                let vram = if i % 25 == 0 {
                    1024 + rng.below(4096)
                } else {
                    32 + rng.below(256)
                };
                let mut g = gpu(i % 2, Some(vram * MIB));
                g.engines = [("sm", 0u32), ("mem", 0), ("enc", 0), ("dec", 0)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                p.gpu.push(g);
            }
            if kind == "ai" && i % 3 == 0 {
                let mut m = server_model(port as u16, 16384, 2304 * MIB, 2304 * MIB);
                m.path = Some(format!("/srv/models/model-{}.gguf", i % 7));
                m.params = Some(8_190_735_360);
                m.file_type = Some("Q4_K - Medium".into());
                m.layers = Some(36);
                m.context_train = Some(40960);
                m.slots_total = Some(4);
                m.slots_busy = Some(1);
                m.settings = Some(snapshot::ModelSettings {
                    context_total: Some(16384),
                    sequences: Some(4),
                    cache_type_k: "f16".into(),
                    cache_type_v: "f16".into(),
                    n_gpu_layers: Some(99),
                    ..Default::default()
                });
                if let Some(r) = &mut m.reported {
                    r.weights_bytes = Some(4_683_073_536);
                    r.compute_bytes = Some(304_087_040);
                    r.buffers = vec![
                        snapshot::ReportedBuffer {
                            device: "CUDA0".into(),
                            kind: "model".into(),
                            bytes: 4_368_439_296,
                            device_memory: true,
                        },
                        snapshot::ReportedBuffer {
                            device: "CUDA0".into(),
                            kind: "kv".into(),
                            bytes: 2304 * MIB,
                            device_memory: true,
                        },
                    ];
                }
                p.models.push(m);
            }
            base.push(p);
        }
        let devices = (0..2)
            .map(|i| {
                let mut d = device(
                    i,
                    "NVIDIA GeForce RTX 4090",
                    Some(&format!("GPU-5e7c1b2a-9f3d-4c1e-8a6b-2d4f0e9c7a3{i}")),
                    Some(&format!("00000000:0{}:00.0", i + 1)),
                    Some(0),
                );
                d.driver_version = Some("550.120".into());
                d.cuda_version = Some("12.4".into());
                d.memory_reserved_bytes = Some(333 * MIB);
                d
            })
            .collect();
        Synth { rng, base, devices }
    }

    fn next(&mut self, i: usize) -> Snapshot {
        let rng = &mut self.rng;
        let mut s = snapshot(&format!(
            "2026-01-01T{:02}:{:02}:{:02}.{:03}Z",
            10 + i / 3600,
            (i / 60) % 60,
            i % 60,
            rng.below(40)
        ));
        s.backends[0].detail = "2 devices, driver 550.120, CUDA 12.4".into();
        for (k, p) in self.base.iter_mut().enumerate() {
            // RSS: pages come and go; a few processes grow steadily.
            let rss = p.rss_bytes.unwrap_or(0) as i64 + (rng.below(65) as i64 - 32) * 4096;
            let leak = if k % 50 == 7 { 256 * 1024 } else { 0 };
            p.rss_bytes = Some((rss.max(4096) as u64) + leak);
            let ticks = rng.below(if k % 10 == 0 { 400 } else { 30 });
            let window = 1.0 + (rng.below(2000) as f64 - 1000.0) / 1e6;
            p.cpu_percent = Some(ticks as f64 / window);
            for g in &mut p.gpu {
                // VRAM holds still but for an allocation now and then.
                if rng.below(60) == 0 {
                    let v = g.vram_bytes.unwrap_or(0) as i64 + (rng.below(9) as i64 - 4) * 2 * MIB as i64;
                    g.vram_bytes = Some(v.max(0) as u64);
                }
                if k % 40 == 1 {
                    g.vram_bytes = g.vram_bytes.map(|v| v + MIB / 4);
                }
                for (_, v) in g.engines.iter_mut() {
                    *v = rng.below(100) as u32;
                }
            }
            for m in &mut p.models {
                m.slots_busy = Some(rng.below(5) as u32);
            }
        }
        let mut devices = self.devices.clone();
        for d in &mut devices {
            let used: u64 = self
                .base
                .iter()
                .flat_map(|p| &p.gpu)
                .filter(|g| g.device == d.index)
                .filter_map(|g| g.vram_bytes)
                .sum::<u64>()
                .min(24 * GIB - 512 * MIB)
                + 512 * MIB;
            d.memory_used_bytes = Some(used);
            d.memory_free_bytes = Some(24 * GIB - used);
            d.gpu_util_percent = Some(rng.below(100) as u32);
            d.memory_activity_percent = Some(rng.below(60) as u32);
            d.temperature_c = Some(40 + rng.below(30) as u32);
            d.power_w = Some(80.0 + rng.below(30000) as f64 / 100.0);
            d.power_limit_w = Some(450.0);
            d.fan_percent = Some(30 + rng.below(40) as u32);
        }
        s.devices = devices;
        s.processes = self.base.clone();
        s.attribution = snapshot::Attribution::compute(&s.devices, &s.processes);
        s
    }
}

/// Runs the real binary; returns its status code and stderr.
fn run_status(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let out = bin().args(args).output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn plot_refuses_to_write_over_its_recording_by_name_symlink_or_hard_link() {
    let dir = tempfile::tempdir().unwrap();
    let path = known_recording(dir.path());
    let before = std::fs::read(&path).unwrap();
    let symlink = dir.path().join("link.svg");
    std::os::unix::fs::symlink(&path, &symlink).unwrap();
    let hard = dir.path().join("hard.svg");
    std::fs::hard_link(&path, &hard).unwrap();
    // The same file by another spelling of its name.
    let dotted = dir.path().join(".").join(path.file_name().unwrap());
    for output in [&path, &symlink, &hard, &dotted] {
        let (code, err) = run_status(&["plot".as_ref(), path.as_os_str(), "-o".as_ref(), output.as_os_str()]);
        assert_eq!(code, Some(2), "{}: {err}", output.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!(
                "-o {}: that is the recording being read ({}); give another file",
                output.display(),
                path.display()
            )),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "{}", output.display());
    }
    // Another file is written as before.
    let svg = dir.path().join("mem.svg");
    run_status(&["plot".as_ref(), path.as_os_str(), "-o".as_ref(), svg.as_os_str()]);
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}

#[test]
fn record_appends_in_the_format_of_the_content_whatever_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = series(3);
    // zstd content under a plain name, plain content under a .zst name.
    let zstd_named_plain = dir.path().join("zstd-inside.jsonl");
    write_recording(&dir.path().join("tmp.jsonl.zst"), &snaps, 60);
    std::fs::rename(dir.path().join("tmp.jsonl.zst"), &zstd_named_plain).unwrap();
    let plain_named_zstd = dir.path().join("plain-inside.jsonl.zst");
    write_recording(&dir.path().join("tmp.jsonl"), &snaps, 60);
    std::fs::rename(dir.path().join("tmp.jsonl"), &plain_named_zstd).unwrap();
    for (path, zstd) in [(&zstd_named_plain, true), (&plain_named_zstd, false)] {
        let stderr = record(path, "0.2", "0.4");
        assert!(
            stderr.contains(&format!(
                "{}: its content is {}, whatever its name says; appending {0}",
                path.display(),
                if zstd { "zstd" } else { "plain JSON lines" }
            )),
            "{stderr}"
        );
        let raw = std::fs::read(path).unwrap();
        assert_eq!(raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]), zstd);
        let rec = read_recording(path).unwrap();
        assert!(rec.skipped.is_empty(), "{}: {:?}", path.display(), rec.skipped);
        assert_eq!(rec.snapshots.len(), 5, "{}", path.display());
        assert_eq!(&rec.snapshots[..3], &snaps[..]);
        let out = snapshot_builder::run_ok(&["summary".as_ref(), path.as_os_str(), "--json".as_ref()]);
        let s: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(s["snapshots"], 5, "{out}");
        assert_eq!(s["skipped"], serde_json::json!([]), "{out}");
    }
}

/// Runs the real binary to its end; returns its status, stdout, stderr,
/// peak resident memory (bytes, from wait4's rusage) and wall time.
fn run_measured(args: &[&std::ffi::OsStr]) -> (i32, String, String, u64, Duration) {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("gputaskman"));
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .args(args);
    let started = Instant::now();
    let (status, out, err, peak_kib) = common::peak_rss(cmd, Duration::from_secs(300));
    let took = started.elapsed();
    let code = status
        .code()
        .unwrap_or_else(|| -std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
        peak_kib as u64 * 1024,
        took,
    )
}

/// A zstd recording with a bomb in it: two snapshots in a frame, then a
/// frame of a snapshot, `bomb` newlines, one line of `bomb` bytes, and a
/// snapshot, then a frame of one more snapshot. A few hundred KiB on disk.
fn bomb_recording(dir: &Path, bomb: usize) -> (PathBuf, Vec<Snapshot>) {
    use std::io::Write as _;
    let snaps = series(5);
    let path = dir.join("bomb.jsonl.zst");
    write_recording(&path, &snaps[..2], 60);
    let line = |s: &Snapshot| {
        let mut l = serde_json::to_vec(s).unwrap();
        l.push(b'\n');
        l
    };
    let file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    let mut z = zstd::stream::write::Encoder::new(file, 1).unwrap();
    z.write_all(&line(&snaps[2])).unwrap();
    let newlines = vec![b'\n'; 1 << 20];
    let zeros = vec![b'0'; 1 << 20];
    for block in [&newlines, &zeros] {
        for _ in 0..bomb >> 20 {
            z.write_all(block).unwrap();
        }
    }
    z.write_all(b"\n").unwrap();
    z.write_all(&line(&snaps[3])).unwrap();
    z.finish().unwrap();
    let mut w = RecordWriter::open(&path).unwrap();
    w.append(&snaps[4]).unwrap();
    w.finish().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20);
    (path, snaps)
}

#[test]
fn a_decompression_bomb_costs_bounded_memory_and_keeps_the_snapshots_around_it() {
    const BOMB: usize = 512 << 20;
    const MAX_RSS: u64 = 200 << 20;
    let dir = tempfile::tempdir().unwrap();
    let (path, snaps) = bomb_recording(dir.path(), BOMB);
    let too_long = format!("line {}: longer than 64 MiB; skipped", 4 + BOMB);

    let (code, out, err, rss, took) = run_measured(&["summary".as_ref(), path.as_os_str(), "--json".as_ref()]);
    eprintln!(
        "summary of a {} MiB bomb: peak RSS {} MiB, {took:?}",
        BOMB >> 19,
        rss >> 20
    );
    assert_eq!(code, 0, "{err}");
    let s: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["snapshots"], 5, "{out}");
    assert_eq!(s["skipped"], serde_json::json!([too_long]), "{out}");
    assert!(rss < MAX_RSS, "summary peaked at {} MiB", rss >> 20);

    let svg = dir.path().join("bomb.svg");
    let (code, _, err, rss, took) = run_measured(&["plot".as_ref(), path.as_os_str(), "-o".as_ref(), svg.as_os_str()]);
    eprintln!(
        "plot of a {} MiB bomb: peak RSS {} MiB, {took:?}",
        BOMB >> 19,
        rss >> 20
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("skipped: {too_long}")), "{err}");
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    assert!(rss < MAX_RSS, "plot peaked at {} MiB", rss >> 20);

    // The reader `replay` uses: every snapshot, one at a time, backwards.
    let ix = open_recording(&path).unwrap();
    assert_eq!(ix.skipped, [too_long]);
    assert_eq!(ix.len(), 5);
    for i in (0..5).rev() {
        assert_eq!(ix.get(i).unwrap(), snaps[i], "snapshot {i}");
    }
}
