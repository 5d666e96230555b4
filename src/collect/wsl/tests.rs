use super::lines::MAX_ERRORS_KEPT;
use super::*;
use crate::collect::wddm::Luid;

const LUID: Luid = Luid { high: 0, low: 0xC6F5 };

fn ctx(dup: u32) -> ContextKey {
    ContextKey {
        pid: 5544,
        luid: LUID,
        dup,
    }
}

fn cand(started: u64, pid: u32) -> Candidate {
    Candidate { started, pid }
}

/// Every sample of a recorded stream, and the errors on the way.
fn stream(name: &str) -> (Vec<BridgeSample>, Vec<String>) {
    let path = format!("{}/tests/data/wsl/{name}", env!("CARGO_MANIFEST_DIR"));
    let mut parser = Parser::default();
    let (mut samples, mut errors) = (vec![], vec![]);
    for line in std::fs::read_to_string(path).unwrap().lines() {
        match parser.line(line) {
            Event::Sample(s) => samples.push(*s),
            Event::Error(e) => errors.push(e),
            Event::None => {}
        }
    }
    (samples, errors)
}

#[test]
fn a_pre_existing_process_is_a_guess_and_a_new_one_exact() {
    let mut p = ContextPairing::default();
    let pairs = p.pair(&[ctx(0)], &[cand(100, 40)]);
    assert_eq!(pairs[&ctx(0)], Pair::Guess(40), "both were there before we watched");
    assert_eq!(
        p.pair(&[ctx(0)], &[cand(100, 40)])[&ctx(0)],
        Pair::Guess(40),
        "and stays a guess"
    );
    // A process starts, then its context appears a sample later.
    let pairs = p.pair(&[ctx(0)], &[cand(100, 40), cand(500, 77)]);
    assert_eq!(pairs.len(), 1);
    let pairs = p.pair(&[ctx(0), ctx(1)], &[cand(100, 40), cand(500, 77)]);
    assert_eq!(pairs[&ctx(1)], Pair::Exact(77));
    assert_eq!(pairs[&ctx(0)], Pair::Guess(40));
    // The exact pair holds while both live.
    let pairs = p.pair(&[ctx(0), ctx(1)], &[cand(100, 40), cand(500, 77)]);
    assert_eq!(pairs[&ctx(1)], Pair::Exact(77));
}

#[test]
fn the_context_of_an_exited_process_is_withheld_from_a_newcomer() {
    let mut p = ContextPairing::default();
    p.pair(&[], &[]);
    p.pair(&[ctx(0)], &[cand(100, 40)]);
    assert_eq!(p.pair(&[ctx(0)], &[cand(100, 40)])[&ctx(0)], Pair::Exact(40));
    // 40 exits; 41 starts and makes a context while Windows still lists 40's.
    let pairs = p.pair(&[ctx(0), ctx(1)], &[cand(900, 41)]);
    assert_eq!(pairs[&ctx(0)], Pair::Host, "40's memory is not handed to 41");
    assert_eq!(pairs[&ctx(1)], Pair::Exact(41));
    // Windows drops it: nothing is withheld any more.
    let pairs = p.pair(&[ctx(1)], &[cand(900, 41)]);
    assert_eq!(pairs.len(), 1);
    assert!(p.withheld.is_empty());
    // A guessed pair's process exiting withholds its context too.
    let mut p = ContextPairing::default();
    p.pair(&[ctx(0), ctx(1)], &[cand(1, 10), cand(2, 11)]);
    let pairs = p.pair(&[ctx(0), ctx(1)], &[cand(2, 11)]);
    assert_eq!(pairs[&ctx(0)], Pair::Host);
    assert_eq!(pairs[&ctx(1)], Pair::Guess(11));
}

#[test]
fn contexts_that_appear_together_are_guessed_and_extras_are_unpaired() {
    let mut p = ContextPairing::default();
    p.pair(&[], &[]);
    let pairs = p.pair(&[ctx(0), ctx(1)], &[cand(10, 1), cand(20, 2)]);
    assert_eq!((pairs[&ctx(0)], pairs[&ctx(1)]), (Pair::Guess(1), Pair::Guess(2)));
    // Nothing to pair with: n/a.
    let mut p = ContextPairing::default();
    assert_eq!(p.pair(&[ctx(0)], &[])[&ctx(0)], Pair::Host);
    // A process that was there before makes its first context later: a
    // guess (it is not new, so the context is not certainly its).
    let mut p = ContextPairing::default();
    p.pair(&[], &[cand(10, 1)]);
    assert_eq!(p.pair(&[ctx(0)], &[cand(10, 1)])[&ctx(0)], Pair::Guess(1));
}

#[test]
fn a_context_that_appeared_before_its_process_is_not_claimed_exact() {
    // Case A: X appears with no new process waiting (another distro,
    // WSLg); later P starts and makes its own context Y.
    let mut p = ContextPairing::default();
    p.pair(&[], &[]);
    p.pair(&[ctx(0)], &[]);
    let pairs = p.pair(&[ctx(0)], &[cand(500, 77)]);
    assert_eq!(pairs[&ctx(0)], Pair::Guess(77), "X predates P: at most a guess");
    let pairs = p.pair(&[ctx(0), ctx(1)], &[cand(500, 77)]);
    assert_eq!(pairs[&ctx(1)], Pair::Exact(77), "P's own context");
    assert_eq!(pairs[&ctx(0)], Pair::Host);
}

#[test]
fn two_processes_started_together_are_guessed_however_their_contexts_arrive() {
    // Case B: two processes in one sample, contexts one per sample.
    let mut p = ContextPairing::default();
    p.pair(&[], &[]);
    let both = [cand(10, 1), cand(20, 2)];
    p.pair(&[], &both);
    assert_eq!(p.pair(&[ctx(0)], &both)[&ctx(0)], Pair::Guess(1));
    let pairs = p.pair(&[ctx(0), ctx(1)], &both);
    assert_eq!((pairs[&ctx(0)], pairs[&ctx(1)]), (Pair::Guess(1), Pair::Guess(2)));
    let pairs = p.pair(&[ctx(0), ctx(1)], &both);
    assert_eq!((pairs[&ctx(0)], pairs[&ctx(1)]), (Pair::Guess(1), Pair::Guess(2)));
}

#[test]
fn a_vanished_dup_demotes_its_siblings_to_guesses() {
    let (c40, c41) = (cand(100, 40), cand(200, 41));
    let setup = || {
        let mut p = ContextPairing::default();
        p.pair(&[], &[]);
        p.pair(&[], std::slice::from_ref(&c40));
        assert_eq!(p.pair(&[ctx(0)], std::slice::from_ref(&c40))[&ctx(0)], Pair::Exact(40));
        p.pair(&[ctx(0)], &[c40.clone(), c41.clone()]);
        let pairs = p.pair(&[ctx(0), ctx(1)], &[c40.clone(), c41.clone()]);
        assert_eq!((pairs[&ctx(0)], pairs[&ctx(1)]), (Pair::Exact(40), Pair::Exact(41)));
        p
    };
    // 40 exits and Windows drops its #0: 41's context is #0 now. It is
    // not withheld as 40's, and not claimed exact.
    let mut p = setup();
    let pairs = p.pair(&[ctx(0)], std::slice::from_ref(&c41));
    assert_eq!(pairs[&ctx(0)], Pair::Guess(41));
    // 41 exits instead: #0 may be either context; a guess too.
    let mut p = setup();
    let pairs = p.pair(&[ctx(0)], std::slice::from_ref(&c40));
    assert_eq!(pairs[&ctx(0)], Pair::Guess(40));
}

#[test]
fn the_recorded_stream_parses_and_pairs_vmwp_contexts() {
    let (samples, errors) = stream("bridge-vmwp.txt");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(samples.len(), 3);
    let first = &samples[0];
    assert_eq!(first.names.get(&5544).map(String::as_str), Some("vmwp"));
    assert_eq!(first.adapters.len(), 1);
    let mut nvml = [Device {
        index: 0,
        backend: "nvml".into(),
        pci_bus_id: Some("00000000:01:00.0".into()),
        process_list_complete: true,
        ..Device::default()
    }];
    let (mut clock, mut pairing) = (EngineClock::default(), ContextPairing::default());
    // A Linux process that was running before the first sample.
    let old = cand(1_000, 312);
    let s = host_sample(
        first,
        &mut clock,
        &mut pairing,
        &mut nvml,
        1,
        std::slice::from_ref(&old),
    );
    assert!(s.devices.is_empty(), "the adapter is NVML's device 0");
    let linux: Vec<_> = s
        .usage
        .iter()
        .filter(|(o, _)| matches!(o, Owner::Linux { .. }))
        .collect();
    assert_eq!(linux.len(), 1);
    assert_eq!(linux[0].0, Owner::Linux { pid: 312, vmwp: 5544 });
    assert_eq!(linux[0].1.pairing, Some(Match::Guess));
    assert_eq!(linux[0].1.vram_bytes, Some(2_147_483_648));
    assert_eq!(linux[0].1.device, 0);
    assert!(linux[0].1.engines.is_empty(), "engine time needs two samples");
    let chrome = s.usage.iter().find(|(o, _)| *o == Owner::Windows(7788)).unwrap();
    assert_eq!(chrome.1.pairing, None);
    assert_eq!(s.windows[&7788].0.as_deref(), Some("chrome"));
    // A new Linux process starts; its context appears in the next sample.
    let new = cand(90_000, 4711);
    let s = host_sample(
        &samples[1],
        &mut clock,
        &mut pairing,
        &mut nvml,
        1,
        &[old.clone(), new.clone()],
    );
    let linux: Vec<_> = s
        .usage
        .iter()
        .filter(|(o, _)| matches!(o, Owner::Linux { .. }))
        .collect();
    assert_eq!(linux.len(), 1, "no new context yet");
    let s = host_sample(&samples[2], &mut clock, &mut pairing, &mut nvml, 1, &[old, new]);
    let owner = |pid: u32| {
        s.usage
            .iter()
            .find(|(o, _)| matches!(o, Owner::Linux { pid: p, .. } if *p == pid))
    };
    let (_, fresh) = owner(4711).unwrap();
    assert_eq!(fresh.pairing, Some(Match::Exact));
    assert_eq!(fresh.vram_bytes, Some(6_442_450_944));
    assert_eq!(owner(312).unwrap().1.pairing, Some(Match::Guess));
    assert!(s.linux_notes[&4711].iter().any(|n| n.contains("exact")));
    assert_eq!(nvml[0].shared_memory_used_bytes, Some(402_653_184));
}

#[test]
fn the_stream_is_checked_and_bad_lines_are_errors_not_panics() {
    let mut p = Parser::default();
    assert!(matches!(p.line("Windows PowerShell"), Event::Error(_)), "no hello");
    let mut p = Parser::default();
    assert_eq!(p.line(HELLO), Event::None);
    assert!(matches!(p.line("stray"), Event::Error(_)));
    assert_eq!(
        p.line("error Get-Counter: The specified object was not found"),
        Event::Error("Windows side: Get-Counter: The specified object was not found".into())
    );
    p.line("begin 1700000000000");
    for bad in [
        "proc x chrome",
        "proc 12",
        "adapter 0 1 2",
        "adapter zz 0 1 0 0",
        "\\\\pc\\gpu engine(pid_1)\\running time\t5",
        "garbage\t",
        "\u{0}\u{1}",
        &"x".repeat(10_000),
    ] {
        assert_eq!(p.line(bad), Event::None);
    }
    p.line("proc 7 a\u{7}b");
    let Event::Sample(s) = p.line("end") else {
        panic!("a sample")
    };
    assert_eq!(s.errors.len(), MAX_ERRORS_KEPT + 1);
    assert!(s.errors.last().unwrap().contains("3 more"));
    assert!(
        s.errors.iter().all(|e| e.chars().count() < 200),
        "outside input is clipped"
    );
    assert_eq!(s.names[&7], "ab");
    assert_eq!(s.reading.at_ms, 1_700_000_000_000);
    // A sample cut short is dropped with a word, the next one is read.
    p.line("begin 1");
    assert!(matches!(p.line("begin 2"), Event::Error(_)));
    assert!(matches!(p.line("end"), Event::Sample(_)));
}

#[test]
fn a_bridge_silent_past_the_limit_is_given_up_starting_or_running() {
    let limit = GIVE_UP_AFTER;
    let starting = |s| bridge::Status::Starting(Duration::from_secs(s));
    let running = |s| bridge::Status::Running(Duration::from_secs(s));
    assert_eq!(give_up(&starting(5), limit), None);
    assert!(give_up(&starting(900), limit).is_some_and(|w| w.contains("no sample")));
    assert_eq!(give_up(&running(15), limit), None, "stale is said, not yet given up");
    assert!(give_up(&running(31), limit).is_some_and(|w| w.contains("nothing for 31 s")));
    assert!(give_up(&bridge::Status::Failed("ended".into()), limit).is_some());
}

// A stand-in powershell.exe that says hello and hangs: given up after
// the limit, its child killed, a restart timed from the failure.
#[cfg(unix)]
#[test]
fn a_hung_bridge_is_killed_and_restarted_later() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (program, pid_file) = (dir.path().join("powershell.exe"), dir.path().join("pid"));
    let body = format!(
        "#!/bin/sh\necho $$ > {}\necho '{HELLO}'\nexec sleep 60\n",
        pid_file.display()
    );
    std::fs::write(&program, body).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut host = WslHost {
        state: start(program.clone()),
        clock: EngineClock::default(),
        pairing: ContextPairing::default(),
        give_up_after: Duration::from_millis(300),
    };
    let (b, _) = host.sample(&mut [], 0, &[]);
    assert_eq!(b.status, BackendStatus::Ok, "{}", b.detail);
    assert!(b.detail.starts_with("starting"), "{}", b.detail);
    std::thread::sleep(Duration::from_millis(500));
    let before = Instant::now();
    let (b, _) = host.sample(&mut [], 0, &[]);
    assert_eq!(b.status, BackendStatus::Error);
    assert!(b.detail.contains("no sample"), "{}", b.detail);
    let State::Failed { at, program: again, .. } = &host.state else {
        panic!("given up")
    };
    assert!(*at >= before, "the restart is timed from the failure");
    assert_eq!(*again, program);
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    // SAFETY: signal 0 only checks that the process exists.
    assert!(unsafe { libc::kill(pid, 0) } != 0, "the hung child is killed");
}

#[test]
fn a_sample_with_bad_lines_or_drops_is_not_a_complete_process_list() {
    let (samples, _) = stream("bridge-vmwp.txt");
    let host = |sample: &BridgeSample| {
        let (mut clock, mut pairing) = (EngineClock::default(), ContextPairing::default());
        host_sample(sample, &mut clock, &mut pairing, &mut [], 0, &[])
    };
    assert!(host(&samples[0]).devices[0].process_list_complete);
    let mut bad = samples[0].clone();
    bad.errors.push("not a counter value: \"x\"".into());
    assert!(!host(&bad).devices[0].process_list_complete, "a line could not be read");
    let mut dropped = samples[0].clone();
    dropped.reading.dropped = 1;
    assert!(!host(&dropped).devices[0].process_list_complete, "values were dropped");
}

#[test]
fn a_sample_with_a_bad_time_is_dropped_not_dated_1970() {
    let mut p = Parser::default();
    p.line(HELLO);
    for bad in ["begin", "begin soon", "begin 0", "begin -5", "begin 1.5e12"] {
        assert!(
            matches!(p.line(bad), Event::Error(e) if e.contains("bad time")),
            "{bad}"
        );
        assert_eq!(
            p.line("\\\\pc\\gpu process memory(pid_4_luid_0x0_0x1_phys_0)\\local usage\t5"),
            Event::None,
            "its lines are skipped quietly"
        );
        assert_eq!(p.line("end"), Event::None, "{bad}: no sample");
    }
    p.line("begin 1700000000000");
    let Event::Sample(s) = p.line("end") else {
        panic!("the next good sample is read")
    };
    assert_eq!(s.reading.at_ms, 1_700_000_000_000);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
}
