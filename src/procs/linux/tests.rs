use super::*;

#[test]
fn mapped_paths_are_the_files_once_each_and_never_a_panic() {
    let maps = "55d0c1a00000-55d0c1a28000 r--p 00000000 fe:00 1835 /usr/bin/llama server\n\
                55d0c1a28000-55d0c1b00000 r-xp 00028000 fe:00 1835 /usr/bin/llama server\n\
                7f0000000000-7f0000001000 rw-s 00000000 00:01 32768 /SYSV0000162e (deleted)\n\
                7f0000001000-7f0000002000 rw-p 00000000 00:00 0 \n\
                7f0000002000-7f0000003000 r--p 00000000 fe:00 99 /usr/lib/libcuda.so.1\n\
                7ffc0000-7ffc1000 rw-p 00000000 00:00 0                          [stack]\n";
    assert_eq!(
        mapped_paths(maps.as_bytes()),
        ["/usr/bin/llama server", "/usr/lib/libcuda.so.1"]
    );
    // fuzz/ proc_files found procfs's parser panicking on these.
    for line in [
        "0-1 r--p 0 0:0 1 /SYSV",
        "0-1 r--p 0 0:0 1 /SYSV\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}",
        "0-1",
    ] {
        assert!(mapped_paths(line.as_bytes()).is_empty(), "{line}");
    }
    let crash = include_bytes!("../../../fuzz/regressions/proc_files-maps-sysv.bin");
    let _ = mapped_paths(&crash[1..]);
}
use crate::snapshot::ProcessKind;
use std::process::Command;

#[test]
fn the_scan_finds_a_child_with_its_redacted_command_line_and_times() {
    // `; true` keeps the shell from exec-ing sleep, so its argv stays.
    let mut child = Command::new("sh")
        .args(["-c", "sleep 30; true", "sh", "--api-key", "topsecret"])
        .spawn()
        .expect("spawn a child");
    let pid = child.id();
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    scanner.prime();
    std::thread::sleep(std::time::Duration::from_millis(60));
    let procs = scanner.scan().expect("scan /proc");
    child.kill().ok();
    child.wait().ok();
    let me = procs.iter().find(|p| p.pid == pid).expect("child is listed");
    assert_eq!(me.ppid, Some(std::process::id()));
    let cmdline = me.cmdline.as_deref().expect("own child's cmdline is readable");
    assert!(cmdline.contains("--api-key <redacted>"), "{cmdline}");
    assert!(!cmdline.contains("topsecret"));
    assert_eq!(
        me.user.as_deref(),
        lookup_user(unsafe { libc::getuid() }).as_deref().or(Some("0"))
    );
    let started = me.start_time.as_deref().expect("start time");
    assert!(started.ends_with('Z') && started.starts_with("20"), "{started}");
    assert_eq!(me.cpu_percent.map(|c| c < 50.0), Some(true));
    assert!(me.rss_bytes.unwrap() > 0);
    assert_eq!(me.kind, ProcessKind::Other);
    // Only AI processes carry their mapped files (model discovery is
    // their only reader).
    assert!(me.mapped_files.is_empty(), "{:?}", me.mapped_files);
}

/// While a view shows no quiet process, each is read every Nth scan
/// and listed in between from its last reading with CPU% and RSS
/// unknown (never a stale figure); one a GPU source names is read at
/// once and from then on.
#[test]
fn quiet_processes_are_read_every_nth_scan_and_at_once_when_a_gpu_source_names_them() {
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    scanner.read_quiet_processes_every(3);
    let listed = |procs: &[ProcInfo]| {
        procs
            .iter()
            .find(|p| p.pid == pid)
            .cloned()
            .expect("the child is listed")
    };
    assert!(listed(&scanner.scan().unwrap()).rss_bytes.is_some(), "first seen: read");
    let mut kept_scans = 0;
    for _ in 0..3 {
        let p = listed(&scanner.scan().unwrap());
        assert_eq!(p.name, "sleep");
        if p.rss_bytes.is_none() {
            assert_eq!(p.cpu_percent, None, "a kept reading has no CPU% of its own");
            kept_scans += 1;
        }
    }
    assert_eq!(kept_scans, 2, "read once in three scans");
    // The next kept scan, then a GPU source names it: read at once.
    let mut procs = loop {
        let procs = scanner.scan().unwrap();
        if listed(&procs).rss_bytes.is_none() {
            break procs;
        }
    };
    scanner.note_gpu_holders([pid].into_iter().collect(), &mut procs);
    let p = listed(&procs);
    assert!(
        p.rss_bytes.is_some() && p.cpu_percent.is_some(),
        "read when named: {p:?}"
    );
    for _ in 0..3 {
        assert!(
            listed(&scanner.scan().unwrap()).rss_bytes.is_some(),
            "a holder is never quiet"
        );
    }
    // Every scan again: the view shows every process.
    scanner.note_gpu_holders(Default::default(), &mut procs);
    scanner.read_quiet_processes_every(1);
    for _ in 0..3 {
        assert!(listed(&scanner.scan().unwrap()).rss_bytes.is_some());
        assert!(scanner.kept.is_empty(), "no kept reading: {:?}", scanner.kept);
    }
    child.kill().ok();
    child.wait().ok();
}

use named_lib::library_named;

#[test]
fn maps_are_read_first_for_processes_that_could_hold_a_runtime_and_later_for_the_rest() {
    // Both map a library named libcuda (preloaded): one is the system's
    // shell, whose name says nothing; the other is named llama-server.
    let dir = tempfile::tempdir().unwrap();
    let lib = library_named(dir.path(), "libcuda.so.1");
    let server = dir.path().join("llama-server");
    std::os::unix::fs::symlink("/bin/sh", &server).unwrap();
    let spawn = |program: &Path| {
        Command::new(program)
            .args(["-c", "read _"])
            .env("LD_PRELOAD", &lib)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let (mut shell, mut named) = (spawn(Path::new("/bin/sh")), spawn(&server));
    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
    // Past the dynamic loader, so the library is mapped.
    std::thread::sleep(Duration::from_millis(200));
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    let first = scanner.scan().expect("scan");
    // The scans after read a few hundred deferred maps each, in PID order:
    // as many as it takes the other processes on the machine.
    let again = (0..100)
        .map(|_| scanner.scan().expect("scan"))
        .find(|procs| procs.iter().any(|p| p.pid == shell.id() && p.maps_readable))
        .expect("the shell's maps read within 100 scans");
    // A GPU source naming a deferred process has its maps read at once.
    let mut other = ProcScanner::new(PathBuf::from("/proc"));
    let mut named_by_gpu = other.scan().expect("scan");
    let pid = shell.id();
    other.read_deferred_maps(|p| p == pid, &mut named_by_gpu);
    for child in [&mut shell, &mut named, &mut sleeper] {
        child.kill().ok();
        child.wait().ok();
    }
    let find = |procs: &[ProcInfo], pid: u32| procs.iter().find(|p| p.pid == pid).cloned().expect("listed");
    let server_first = find(&first, named.id());
    assert!(
        server_first.maps_readable,
        "a runtime's name: its maps are read at once"
    );
    assert_eq!(server_first.runtimes, ["cuda", "llama.cpp"]);
    let shell_first = find(&first, pid);
    assert!(
        !shell_first.maps_readable,
        "the shell's maps are not read by the first scan"
    );
    assert!(shell_first.runtimes.is_empty());
    let shell_later = find(&again, pid);
    assert!(shell_later.maps_readable);
    assert_eq!(shell_later.runtimes, ["cuda"]);
    let shell_named = find(&named_by_gpu, pid);
    assert!(shell_named.maps_readable);
    assert!(
        shell_named
            .cmdline
            .as_deref()
            .is_some_and(|c| c.ends_with("-c 'read _'")),
        "{:?}",
        shell_named.cmdline
    );
    assert_eq!(shell_named.runtimes, ["cuda"]);
    let another = find(&named_by_gpu, sleeper.id());
    assert!(!another.maps_readable, "only the process asked for");
}

#[test]
fn an_exited_process_not_yet_reaped_has_an_unknown_rss_not_zero() {
    let mut child = Command::new("true").spawn().expect("spawn a child");
    let pid = child.id();
    // Not waited for: a zombie once it exits.
    let stat_path = PathBuf::from(format!("/proc/{pid}/stat"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !std::fs::read_to_string(&stat_path).is_ok_and(|s| s.contains(") Z ")) {
        assert!(std::time::Instant::now() < deadline, "the child never became a zombie");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    let procs = scanner.scan().expect("scan /proc");
    child.wait().ok();
    let zombie = procs.iter().find(|p| p.pid == pid).expect("a zombie is still listed");
    assert_eq!(zombie.rss_bytes, None);
    let me = procs
        .iter()
        .find(|p| p.pid == std::process::id())
        .expect("this test is listed");
    assert!(me.rss_bytes.unwrap() > 0);
}

#[test]
fn a_runtime_loaded_seconds_after_start_is_seen_within_seconds() {
    // A Python server imports its runtime after it starts: here a copy
    // of libm named libllama.so, loaded 1.5 s in.
    let dir = tempfile::tempdir().unwrap();
    let lib = library_named(dir.path(), "libllama.so");
    let script = format!(
        "import ctypes, time; time.sleep(1.5); ctypes.CDLL({:?}); time.sleep(30)",
        lib.display().to_string()
    );
    let mut child = Command::new("python3").args(["-c", &script]).spawn().expect("python3");
    let pid = child.id();
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    let started = Instant::now();
    let mut seen_after = None;
    while started.elapsed() < Duration::from_secs(8) {
        let procs = scanner.scan().expect("scan /proc");
        let me = procs.iter().find(|p| p.pid == pid).expect("the child is listed");
        if me.runtimes.iter().any(|r| r == "llama.cpp") {
            assert_eq!(me.kind, ProcessKind::Ai);
            seen_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    child.kill().ok();
    child.wait().ok();
    let seen_after = seen_after.expect("libllama was never seen in the maps");
    // Loaded at 1.5 s; seen on the next reading of the maps, a second
    // later at most (not MAPS_REFRESH, 10 s, later).
    assert!(seen_after < Duration::from_millis(3500), "seen after {seen_after:?}");
}

#[test]
fn a_stat_line_with_a_name_that_is_not_utf8_or_forged_counters_still_parses() {
    let mut line = b"4242 (llama\xff\xfe) evil) S 1 1 1 0 -1 0 0 0 0 0 ".to_vec();
    line.extend_from_slice(b"18446744073709551615 18446744073709551615 0 0 20 0 1 0 777 4096 18446744073709551615 0\n");
    let stat = parse_stat(&line).expect("parsed");
    assert_eq!(&*stat.comm, "llama\u{fffd}\u{fffd}) evil");
    assert_eq!(stat.ticks(), u64::MAX);
    assert_eq!(stat.ppid, 1);
    assert_eq!(stat.starttime, 777);
    assert_eq!(stat.rss, u64::MAX);
}

#[test]
fn argv_is_split_lossily_and_never_lost_for_one_bad_byte() {
    assert_eq!(
        split_cmdline(b"llama-server\0-m\0/m/\xffx.gguf\0"),
        ["llama-server", "-m", "/m/\u{fffd}x.gguf"]
    );
    assert!(split_cmdline(b"").is_empty());
    assert_eq!(split_cmdline(b"a\0\0b"), ["a", "", "b"]);
    assert!(split_cmdline(b"\0\0\0").is_empty());
}

/// vLLM's engine core and workers rename themselves with setproctitle:
/// the title, then NULs to the end of the old argv area.
#[test]
fn a_setproctitle_title_is_the_title_alone() {
    let mut area = b"VLLM::EngineCore".to_vec();
    area.resize(4096, 0);
    assert_eq!(split_cmdline(&area), ["VLLM::EngineCore"]);
    assert_eq!(split_cmdline(b"VLLM::Worker_TP0\0\0\0\0"), ["VLLM::Worker_TP0"]);
}

#[test]
fn a_process_that_execs_another_program_is_read_anew() {
    // Seen first as the shell, then as what the shell exec's: same PID,
    // same start time, a new program and argv.
    let mut child = Command::new("sh")
        .args([
            "-c",
            "sleep 0.5; exec python3 -c 'import time; time.sleep(30)' vllm serve",
        ])
        .spawn()
        .expect("sh");
    let pid = child.id();
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    let find = |scanner: &mut ProcScanner| scanner.scan().expect("scan").into_iter().find(|p| p.pid == pid);
    let before = find(&mut scanner).expect("the shell is listed");
    let deadline = Instant::now() + Duration::from_secs(5);
    // A scan in exec's window sees the new name with no argv yet
    // (ARGV_REREADS): the next scans read it.
    let after = loop {
        let p = find(&mut scanner).expect("still listed");
        if (p.name == "python3" && !p.argv.is_empty()) || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().ok();
    child.wait().ok();
    assert_ne!(before.name, "python3", "seen before the exec");
    assert_eq!(after.name, "python3");
    assert_eq!(after.runtimes, ["vllm"], "argv read anew after the exec");
    assert_eq!(after.kind, ProcessKind::Ai);
    assert!(
        after.cmdline.as_deref().is_some_and(|c| c.ends_with("vllm serve")),
        "{:?}",
        after.cmdline
    );
}

/// A fixture /proc of one process, PID 500, named `comm` with `argv`,
/// whose PID allocator last gave `last_pid` and wraps at 1000.
fn one_process_root(root: &Path, comm: &str, argv: &str, last_pid: u32) {
    std::fs::create_dir_all(root.join("500")).unwrap();
    std::fs::create_dir_all(root.join("sys/kernel")).unwrap();
    std::fs::write(root.join("sys/kernel/pid_max"), "1000\n").unwrap();
    std::fs::write(root.join("stat"), "cpu  1 0 1 100 0 0 0 0 0 0\nbtime 1764500000\n").unwrap();
    std::fs::write(root.join("loadavg"), format!("0.00 0.01 0.05 1/80 {last_pid}\n")).unwrap();
    std::fs::write(
        root.join("500/stat"),
        format!(
            "500 ({comm}) S 1 500 500 0 -1 4194560 1000 0 0 0 500 100 0 0 20 0 8 0 123456 \
             8589934592 262144 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0"
        ),
    )
    .unwrap();
    std::fs::write(root.join("500/cmdline"), argv).unwrap();
}

/// A scanner of `root` that reads quiet processes every other scan,
/// after its first scan.
fn quiet_every_other_scan(root: &Path) -> ProcScanner {
    let mut scanner = ProcScanner::new(root.to_path_buf());
    scanner.read_quiet_processes_every(2);
    scanner.scan().unwrap();
    scanner
}

/// The kept stat a scan would use for `pid`.
fn kept_stat_of(scanner: &ProcScanner, pid: u32) -> Option<Stat> {
    scanner.kept_stat(scanner.known.iter().find(|k| k.pid == pid)?)
}

/// A kept stat is used only while the PID allocator (cyclic) cannot
/// have handed its PID to another process: not once the cursor has
/// come round to it, never for a PID just ahead of the cursor, never
/// where pid_max or the cursor cannot be read.
#[test]
fn a_kept_stat_is_used_only_while_its_pid_cannot_have_been_reused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    one_process_root(root, "sleep", "sleep\x00100\x00", 600);
    let mut scanner = quiet_every_other_scan(root);
    // Not its turn (odd scan): kept, 900 PIDs before the cursor is back.
    scanner.scans = 1;
    assert!(kept_stat_of(&scanner, 500).is_some());
    // 850 PIDs later the cursor is within the margin of 500.
    std::fs::write(root.join("loadavg"), "0.00 0.01 0.05 1/80 450\n").unwrap();
    scanner.follow_pid_cursor();
    assert!(kept_stat_of(&scanner, 500).is_none(), "the cursor is back near PID 500");

    // A PID just ahead of the cursor could be given again at once.
    one_process_root(root, "sleep", "sleep\x00100\x00", 490);
    let mut near = quiet_every_other_scan(root);
    near.scans = 1;
    assert!(kept_stat_of(&near, 500).is_none());

    // No pid_max: nothing kept.
    std::fs::remove_file(root.join("sys/kernel/pid_max")).unwrap();
    let blind = quiet_every_other_scan(root);
    assert!(blind.known.iter().all(|k| k.quiet.is_none()));
}

/// A quiet process a GPU source names after it exec'd another program
/// is read whole in that sample: its new name, command line and kind,
/// not its old program's.
#[test]
fn a_named_quiet_process_that_execd_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    one_process_root(root, "bash", "bash\x00", 600);
    // Scans 1 and 2 read it (first seen, then its turn); scan 3 lists
    // it from its kept (bash) reading.
    let mut scanner = quiet_every_other_scan(root);
    scanner.scan().unwrap();
    one_process_root(
        root,
        "python3",
        "python3\x00-m\x00vllm.entrypoints.openai.api_server\x00",
        600,
    );
    let mut procs = scanner.scan().unwrap();
    assert!(scanner.kept.contains(&500));
    assert_eq!(procs[0].name, "bash");
    scanner.note_gpu_holders([500].into_iter().collect(), &mut procs);
    let p = &procs[0];
    assert_eq!(p.name, "python3");
    assert_eq!(
        p.cmdline.as_deref(),
        Some("python3 -m vllm.entrypoints.openai.api_server")
    );
    assert_eq!(p.kind, ProcessKind::Ai);
    assert!(p.rss_bytes.is_some());
}

/// A process read in exec's window (its new name, no argv yet) gets its
/// argv, runtime and kind on a later scan, not an empty argv for life.
#[test]
fn a_process_seen_before_its_argv_is_set_is_read_again() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("stat"),
        "cpu  1 0 1 100 0 0 0 0 0 0\nbtime 1764500000\n",
    )
    .unwrap();
    let dir = root.path().join("4242");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("stat"),
        "4242 (python3) S 1 4242 4242 0 -1 4194560 1000 0 0 0 500 100 0 0 20 0 8 0 123456 \
         8589934592 262144 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0",
    )
    .unwrap();
    std::fs::write(dir.join("cmdline"), "").unwrap();
    let mut scanner = ProcScanner::new(root.path().to_path_buf());
    let listed = |scanner: &mut ProcScanner| {
        let procs = scanner.scan().unwrap();
        procs.into_iter().find(|p| p.pid == 4242).expect("listed")
    };
    let first = listed(&mut scanner);
    assert!(first.argv.is_empty() && first.cmdline.is_none(), "{first:?}");
    std::fs::write(dir.join("cmdline"), "python3\0-m\0vllm.entrypoints.openai.api_server\0").unwrap();
    let later = listed(&mut scanner);
    assert_eq!(
        later.cmdline.as_deref(),
        Some("python3 -m vllm.entrypoints.openai.api_server")
    );
    assert_eq!(later.kind, ProcessKind::Ai, "{later:?}");
    // One that keeps an empty argv is read again a few times, then left.
    std::fs::write(dir.join("cmdline"), "").unwrap();
    let mut other = ProcScanner::new(root.path().to_path_buf());
    for _ in 0..=ARGV_REREADS {
        listed(&mut other);
    }
    assert_eq!(other.argv_rereads.get(&(4242, 123456)), Some(&ARGV_REREADS));
    listed(&mut other);
    assert_eq!(other.argv_rereads.get(&(4242, 123456)), Some(&ARGV_REREADS));
}

#[test]
fn a_process_whose_name_and_argv_are_not_utf8_is_listed_with_its_runtime() {
    use std::os::unix::ffi::OsStrExt;
    // python3 exec'd through a symlink whose name is not UTF-8 (that
    // name is the comm), `vllm` among its first arguments and an
    // invalid byte in a later one.
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join(std::ffi::OsStr::from_bytes(b"py\xff"));
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("python3");
    std::os::unix::fs::symlink(python, &link).unwrap();
    let mut child = Command::new(&link)
        .args(["-c", "import time; time.sleep(30)", "vllm"])
        .arg(std::ffi::OsStr::from_bytes(b"--model=/srv/\xffm"))
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    let found = loop {
        let procs = scanner.scan().expect("scan /proc");
        // Past exec's window: the new name and its argv (a scan in the
        // window sees the name and no argv yet, and a later one reads it).
        let me = procs
            .into_iter()
            .find(|p| p.pid == pid && p.name.starts_with("py") && !p.argv.is_empty());
        if me.is_some() || Instant::now() > deadline {
            break me;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().ok();
    child.wait().ok();
    let me = found.expect("the process is listed");
    assert_eq!(me.name, "py\u{fffd}");
    assert_eq!(me.runtimes, ["vllm"]);
    assert_eq!(me.kind, ProcessKind::Ai);
    assert_eq!(me.argv.last().map(String::as_str), Some("--model=/srv/\u{fffd}m"));
}

#[test]
fn stat_files_are_held_between_scans_and_let_go_with_their_process() {
    use std::os::fd::AsRawFd;
    let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
    let pid = child.id();
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    // The fd the scanner holds for the child, and what it is open on.
    let held = |scanner: &ProcScanner| {
        scanner.stat_files.get(&pid).map(|(_, f)| {
            let fd = f.as_raw_fd();
            (fd, std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap())
        })
    };
    let first = scanner.scan().expect("scan");
    let after_first = held(&scanner);
    let second = scanner.scan().expect("scan");
    let after_second = held(&scanner);
    child.kill().ok();
    child.wait().ok();
    let gone = scanner.scan().expect("scan");
    assert_eq!(first.iter().chain(&second).filter(|p| p.pid == pid).count(), 2);
    let (_, target) = after_first.clone().expect("a file held after the first scan");
    assert_eq!(target, PathBuf::from(format!("/proc/{pid}/stat")));
    assert_eq!(after_second, after_first, "reread, not opened again");
    assert!(!gone.iter().any(|p| p.pid == pid), "an exited process is not listed");
    assert_eq!(held(&scanner), None, "its file is let go");
}

#[test]
fn a_missing_proc_root_is_an_error_not_an_empty_list() {
    let mut scanner = ProcScanner::new(PathBuf::from("/nonexistent/proc"));
    let err = scanner.scan().unwrap_err().to_string();
    assert!(err.contains("/nonexistent/proc"), "{err}");
}

/// A child that runs `sh`, reads a line from its stdin, then execs
/// `llama-server` (a link to sleep, under a folder of its own: the name
/// is the program's); the child and the link's folder.
fn shell_that_execs_llama_server() -> (std::process::Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let llama = dir.path().join("llama-server");
    std::os::unix::fs::symlink("/bin/sleep", &llama).unwrap();
    let child = Command::new("sh")
        .args(["-c", &format!("read line; exec {} 30", llama.display())])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, dir)
}

/// Scans with the rows handed back, as the collector does; the child's row.
fn scan_kept(scanner: &mut ProcScanner, pid: u32) -> Option<ProcInfo> {
    scan_kept_at(scanner, pid).map(|(row, _)| row)
}

/// [`scan_kept`], and where the kept row's command line is in memory.
fn scan_kept_at(scanner: &mut ProcScanner, pid: u32) -> Option<(ProcInfo, Option<*const u8>)> {
    let rows = scanner.scan().unwrap();
    let row = rows
        .iter()
        .find(|p| p.pid == pid)
        .map(|p| (p.clone(), p.cmdline.as_ref().map(|c| c.as_ptr())));
    scanner.keep(rows);
    row
}

/// How many scans (rows handed back) until `pid` is listed as
/// `llama-server`, an AI process read whole, after its shell exec'd.
fn scans_until_llama_server(scanner: &mut ProcScanner, child: &mut std::process::Child) -> u32 {
    let pid = child.id();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for scans in 1..=20 {
        let row = scan_kept(scanner, pid).expect("listed");
        if row.name == "llama-server" && row.kind == ProcessKind::Ai && row.rss_bytes.is_some() {
            return scans;
        }
    }
    panic!("never seen as llama-server");
}

/// With the kernel's events (CI runs as root in the initial namespaces),
/// a quiet program of a system folder is not read again: its row is the
/// one handed back (the same strings, not a copy), with no figures of
/// its own; an exec into llama-server is seen in the next scan, and an
/// exit is gone from it, though the scans list no /proc.
#[test]
fn with_process_events_quiet_rows_are_kept_and_an_exec_or_exit_shows_in_the_next_scan() {
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    scanner.read_quiet_processes_every(5);
    if let Err(e) = scanner.follow_process_events() {
        assert_ne!(unsafe { libc::geteuid() }, 0, "root, yet no process events: {e}");
        return;
    }
    let mut quiet = Command::new("sleep").arg("30").spawn().unwrap();
    let (mut shell, _dir) = shell_that_execs_llama_server();
    std::thread::sleep(Duration::from_millis(50));
    let first = scan_kept(&mut scanner, quiet.id()).expect("listed");
    assert!(first.rss_bytes.is_some(), "new: read");
    // The deferred maps' catch-up reads it once: from then on the row stays.
    scan_kept(&mut scanner, quiet.id());
    let (_, mut last) = scan_kept_at(&mut scanner, quiet.id()).unwrap();
    assert!(last.is_some());
    for _ in 0..6 {
        let (row, at) = scan_kept_at(&mut scanner, quiet.id()).expect("still listed");
        assert_eq!(
            (row.rss_bytes, row.cpu_percent),
            (None, None),
            "kept, never read: {row:?}"
        );
        assert_eq!(at, last, "the row handed back, not a new one");
        last = at;
    }
    assert_eq!(scans_until_llama_server(&mut scanner, &mut shell), 1);
    // An exec that keeps the name (sh into sh) is read whole too: the
    // event says so, the name cannot.
    let mut same = Command::new("sh")
        .args(["-c", "read line; exec sh -c 'sleep 30; true' renamed"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    scan_kept(&mut scanner, same.id()).expect("listed");
    std::io::Write::write_all(&mut same.stdin.take().unwrap(), b"go\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let after = scan_kept(&mut scanner, same.id()).expect("listed");
    assert!(
        after.cmdline.as_deref().is_some_and(|c| c.ends_with("renamed")),
        "{:?}",
        after.cmdline
    );
    same.kill().ok();
    same.wait().ok();
    quiet.kill().unwrap();
    quiet.wait().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(scan_kept(&mut scanner, quiet.id()).is_none(), "gone in the next scan");
    shell.kill().ok();
    shell.wait().ok();
}

/// Without events a quiet process is read on its turn, one scan in
/// `quiet_every`: an exec into llama-server is seen within that many.
#[test]
fn without_events_an_exec_is_seen_within_quiet_every_scans() {
    let mut scanner = ProcScanner::new(PathBuf::from("/proc"));
    scanner.read_quiet_processes_every(5);
    let (mut shell, _dir) = shell_that_execs_llama_server();
    std::thread::sleep(Duration::from_millis(50));
    for _ in 0..7 {
        assert!(scan_kept(&mut scanner, shell.id()).is_some());
    }
    let scans = scans_until_llama_server(&mut scanner, &mut shell);
    assert!((1..=5).contains(&scans), "{scans} scans");
    shell.kill().ok();
    shell.wait().ok();
}
