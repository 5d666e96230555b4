//! The live view of a server, end to end: the real binary in tmux against
//! the fake NVML with 8 H100s and 64 processes, each a real process of the
//! test's. It fits 160x45 and 80x24, signals what `k` is confirmed for
//! (and nothing under --readonly), draws a child under its parent with
//! `t`, and filters by user with `u` and `/`. Without tmux: SKIPPED.
//! With GPUTASKMAN_SCREENSHOTS=DIR the 160x45 and 80x24 screens are
//! written there (docs/screenshots/ holds the committed ones).

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{fake_nvml, Scenario, Sleeper};
use gputaskman::units::bytes;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

const MIB: u64 = 1 << 20;
const H100: u64 = 85_520_809_984;

/// One server at a time: each test's processes would be another's rows.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Server {
    _guard: std::sync::MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
    procs: Vec<Sleeper>,
    /// PID: (device, VRAM).
    vram: HashMap<u32, (u32, u64)>,
    scenario: Scenario,
}

/// The 8-H100 box the unit tests draw too (`view::tui::fixture::server`):
/// its devices, with what the driver holds and no processes.
fn h100x8() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/screens/h100x8.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The 8 GPUs with 8 processes each, and `extra` (PID, VRAM) on GPU 0, and
/// `ghosts` PIDs no process has (another namespace's: no user).
fn server(extra: &[(u32, u64)], ghosts: &[u32]) -> Server {
    let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Vec::new();
    let mut vram = HashMap::new();
    let mut scenario = h100x8();
    for (index, device) in (0..8u32).zip(scenario["devices"].as_array_mut().unwrap()) {
        let mut list = Vec::new();
        for n in 0..8u32 {
            let name = if n == 0 { "trainer" } else { "worker" };
            let p = Sleeper::spawn(dir.path(), name, &["--rank", &(index * 8 + n).to_string()]);
            // Distinct on every row: 9.00 GiB, 8.79 GiB, ...
            let bytes = (9 << 30) - u64::from(n) * 217 * MIB - u64::from(index) * 3 * MIB;
            vram.insert(p.pid(), (index, bytes));
            list.push(json!({"pid": p.pid(), "used_memory": bytes}));
            procs.push(p);
        }
        if index == 0 {
            for &(pid, bytes) in extra {
                vram.insert(pid, (0, bytes));
                list.push(json!({"pid": pid, "used_memory": bytes}));
            }
            for &pid in ghosts {
                list.push(json!({"pid": pid, "used_memory": 64 * MIB}));
            }
        }
        let listed: u64 = list.iter().map(|p| p["used_memory"].as_u64().unwrap()).sum();
        let memory = &mut device["memory"];
        let used = memory["used"].as_u64().unwrap() + listed;
        memory["used"] = json!(used);
        memory["free"] = json!(memory["total"].as_u64().unwrap() - used);
        device["compute_processes"] = json!(list);
    }
    let scenario = Scenario::new(&scenario);
    Server {
        _guard: guard,
        _dir: dir,
        procs,
        vram,
        scenario,
    }
}

fn view_command(scenario: &Path, flags: &str) -> String {
    format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {} --interval 0.5 {flags}; echo EXITED $?; sleep 600",
        scenario.display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
    )
}

fn first_pid(line: &str) -> Option<u32> {
    line.split_whitespace()
        .next()?
        .trim_end_matches(['*', '?'])
        .parse()
        .ok()
}

/// The table rows whose VRAM and GPU index are the scenario's own.
fn honest_rows<'a>(screen: &'a str, server: &Server) -> Vec<&'a str> {
    screen
        .lines()
        .filter(|l| {
            let Some((device, vram)) = first_pid(l).and_then(|pid| server.vram.get(&pid)) else {
                return false;
            };
            l.split_whitespace().nth(1) == Some(device.to_string().as_str()) && l.contains(&bytes(Some(*vram)))
        })
        .collect()
}

fn screenshot(name: &str, screen: &str) {
    if let Some(dir) = std::env::var_os("GPUTASKMAN_SCREENSHOTS") {
        let text: String = screen.lines().map(|l| format!("{}\n", l.trim_end())).collect();
        std::fs::write(Path::new(&dir).join(name), text).unwrap();
    }
}

/// Whether the process has ended (gone, or a zombie its parent, this
/// test, has not reaped yet).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

fn me() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn eight_gpus_and_64_processes_fit_160x45_and_80x24() {
    let Some(tmux) = tmux_path() else { return };
    let s = server(&[], &[]);
    let t = Tmux::new(tmux, "server");
    t.start_sized(&view_command(s.scenario.path(), ""), 160, 45);
    let screen = t.wait_for("8 GPUs and 20 rows", Duration::from_secs(15), |screen| {
        (0..8).all(|i| screen.lines().any(|l| l.starts_with(&format!("GPU {i} "))))
            && honest_rows(screen, &s).len() >= 20
    });
    for i in 0..8u64 {
        let line = screen.lines().find(|l| l.starts_with(&format!("GPU {i} "))).unwrap();
        assert!(
            line.contains("H100") && line.contains(&format!("{} °C", 40 + i)),
            "{line}"
        );
        assert!(line.contains(&format!("/{}", bytes(Some(H100)))), "{line}");
    }
    // All 64 of the scenario's (AI processes elsewhere on the machine, on
    // its CPU, may be shown beside them).
    let shown: usize = screen
        .split("PROCESSES  ")
        .nth(1)
        .and_then(|t| t.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(shown >= 64, "{screen}");
    screenshot("8-gpus-160x45.txt", &screen);

    t.run(&["resize-window", "-t", "view", "-x", "80", "-y", "24"]);
    // tmux crops the last frame to the new size at once: wait for the
    // view's own 80-column frame (its header and status line).
    let screen = t.wait_for("8 rows at 80x24", Duration::from_secs(10), |screen| {
        screen.lines().all(|l| l.chars().count() <= 80)
            && honest_rows(screen, &s).len() >= 8
            && screen.lines().any(|l| l.contains(" PID GPU NAME"))
            && screen.contains("q quit")
    });
    assert!(screen.lines().any(|l| l.contains(" PID GPU NAME")), "{screen}");
    assert!(screen.contains("q quit"), "{screen}");
    screenshot("8-gpus-80x24.txt", &screen);

    // A digit: one GPU, its processes counted apart from the others'.
    t.keys(&["3"]);
    let screen = t.wait_for("GPU 3 alone", Duration::from_secs(5), |s| s.contains("8 on GPU 3"));
    assert!(screen.contains("56 on other GPUs"), "{screen}");
    t.keys(&["q"]);
    t.wait_for("exit", Duration::from_secs(5), |s| s.contains("EXITED 0"));
    drop(s.procs);
}

#[test]
fn k_and_its_confirmation_end_a_process_and_readonly_refuses() {
    let Some(tmux) = tmux_path() else { return };
    let s = server(&[], &[]);
    let target = s.procs[5].pid();
    let spared = s.procs[6].pid();
    for readonly in [true, false] {
        let pid = if readonly { spared } else { target };
        let t = Tmux::new(tmux.clone(), if readonly { "readonly" } else { "kill" });
        t.start_sized(
            &view_command(s.scenario.path(), if readonly { "--readonly" } else { "" }),
            120,
            40,
        );
        t.wait_for("the first figures", Duration::from_secs(15), |screen| {
            honest_rows(screen, &s).len() >= 10
        });
        // The PID whole, as a filter: its row alone, selected.
        t.keys(&["/", &pid.to_string(), "Enter"]);
        t.wait_for("its row alone", Duration::from_secs(5), |screen| {
            screen.contains("PROCESSES  1 shown") && honest_rows(screen, &s).len() == 1
        });
        t.keys(&["k"]);
        if readonly {
            let screen = t.wait_for("the refusal", Duration::from_secs(5), |s| s.contains("read-only view"));
            assert!(!screen.contains("Send a signal"), "{screen}");
            std::thread::sleep(Duration::from_millis(300));
            assert!(!ended(pid), "--readonly sent a signal");
            continue;
        }
        let screen = t.wait_for("the picker", Duration::from_secs(5), |s| {
            s.contains("Send a signal to:")
        });
        assert!(
            screen.contains(&format!("PID {pid} worker (user {})", me())),
            "{screen}"
        );
        assert!(!ended(pid), "nothing is sent before the confirmation");
        t.keys(&["Enter"]);
        t.wait_for("the confirmation", Duration::from_secs(5), |s| {
            s.contains("Send SIGTERM to:")
        });
        assert!(!ended(pid), "nothing is sent before the confirmation");
        t.keys(&["y"]);
        t.wait_for("the result", Duration::from_secs(5), |s| {
            s.contains(&format!("SIGTERM to {pid} worker: sent"))
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !ended(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ended(pid), "SIGTERM did not end {pid}");
        assert!(!ended(spared), "another process was signalled");
    }
}

/// A parent (`ollama serve`, a shell) with one child (`ollama_llama_server`,
/// a sleep), both killed when dropped.
struct Family {
    parent: Child,
    child: Option<u32>,
}

impl Drop for Family {
    fn drop(&mut self) {
        if let Some(child) = self.child {
            let _ = Command::new("kill").args(["-KILL", &child.to_string()]).status();
        }
        let _ = self.parent.kill();
        let _ = self.parent.wait();
    }
}

fn family(dir: &Path) -> Family {
    let which = |program: &str| {
        let out = Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let parent_exe = dir.join("ollama");
    let child_exe = dir.join("ollama_llama_server");
    std::os::unix::fs::symlink(which("sh"), &parent_exe).unwrap();
    std::os::unix::fs::symlink(which("sleep"), &child_exe).unwrap();
    let parent = Command::new(&parent_exe)
        .args(["-c", &format!("{} 600 & wait", child_exe.display()), "ollama", "serve"])
        .spawn()
        .unwrap();
    let pid = parent.id();
    let mut family = Family { parent, child: None };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        family.child = children.split_whitespace().next().and_then(|c| c.parse().ok());
        if family.child.is_some() {
            return family;
        }
        assert!(std::time::Instant::now() < deadline, "the child did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn t_shows_a_child_under_its_parent() {
    let Some(tmux) = tmux_path() else { return };
    let dir = tempfile::tempdir().unwrap();
    let f = family(dir.path());
    let parent = f.parent.id();
    // The child holds more: sorted by VRAM it comes first, as a tree second.
    let child = f.child.unwrap();
    let s = server(&[(parent, 300 * MIB), (child, 10 << 30)], &[]);
    let t = Tmux::new(tmux, "tree");
    t.start_sized(&view_command(s.scenario.path(), "--gpu 0"), 160, 45);
    let row_of = |screen: &str, pid: u32| screen.lines().position(|l| first_pid(l) == Some(pid));
    let screen = t.wait_for("both rows", Duration::from_secs(15), |screen| {
        row_of(screen, parent).is_some() && row_of(screen, child).is_some()
    });
    assert!(row_of(&screen, child) < row_of(&screen, parent), "{screen}");
    t.keys(&["t"]);
    let screen = t.wait_for("the tree", Duration::from_secs(5), |screen| {
        screen.contains("as a tree")
    });
    let at = row_of(&screen, parent).unwrap();
    let below = screen.lines().nth(at + 1).unwrap();
    assert_eq!(first_pid(below), Some(child), "{screen}");
    assert!(below.contains("└─ ollama_llam"), "{below}");
}

#[test]
fn u_and_slash_filter_by_user() {
    let Some(tmux) = tmux_path() else { return };
    // PIDs of no process here: rows with no user.
    let ghosts = [3_999_901, 3_999_902];
    let s = server(&[], &ghosts);
    let t = Tmux::new(tmux, "user");
    t.start_sized(&view_command(s.scenario.path(), "--gpu 0"), 160, 45);
    let has = |screen: &str, pid: u32| {
        screen.lines().any(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|f| f.contains(&pid.to_string()))
        })
    };
    t.wait_for("the rows", Duration::from_secs(15), |screen| {
        has(screen, ghosts[0]) && honest_rows(screen, &s).len() >= 8
    });
    let user = me();
    t.keys(&["u"]);
    let screen = t.wait_for("one user", Duration::from_secs(5), |screen| {
        screen.contains(&format!(", user {user}"))
    });
    assert!(!has(&screen, ghosts[0]) && !has(&screen, ghosts[1]), "{screen}");
    assert_eq!(honest_rows(&screen, &s).len(), 8, "{screen}");
    // The only user: `u` again is every user.
    t.keys(&["u"]);
    t.wait_for("every user", Duration::from_secs(5), |screen| has(screen, ghosts[0]));
    // `/` matches the user too (root where the tests run as root).
    t.keys(&["/", &user, "Enter"]);
    let screen = t.wait_for("the filter", Duration::from_secs(5), |screen| {
        screen.contains(&format!("filter \"{user}\"")) && !has(screen, ghosts[0])
    });
    assert_eq!(honest_rows(&screen, &s).len(), 8, "{screen}");
}

/// Issue 37 on the 8-H100 box: at 80x24 the eight GPU lines fit (no line
/// for a source that found nothing), at 120x35 a COMMAND column shows the
/// command lines (redacted), `m` adds no column that is n/a on every NVML
/// row, the driver's reserve is said, and `--ascii` writes `40 C`.
#[test]
fn the_first_hour_on_eight_gpus_at_80x24_and_120x35() {
    let Some(tmux) = tmux_path() else { return };
    let s = server(&[], &[]);
    // 512 MiB the driver keeps: used + free + reserved = total.
    let mut scenario: serde_json::Value = serde_json::from_slice(&std::fs::read(s.scenario.path()).unwrap()).unwrap();
    for d in scenario["devices"].as_array_mut().unwrap() {
        let free = d["memory"]["free"].as_u64().unwrap();
        d["memory"]["free"] = json!(free - 512 * MIB);
        d["memory"]["reserved"] = json!(512 * MIB);
    }
    std::fs::write(s.scenario.path(), serde_json::to_vec(&scenario).unwrap()).unwrap();
    let gpu_lines = |screen: &str| {
        (0..8)
            .filter(|i| screen.lines().any(|l| l.starts_with(&format!("GPU {i} "))))
            .count()
    };
    let t = Tmux::new(tmux.clone(), "first-hour");
    t.start_sized(&view_command(s.scenario.path(), ""), 80, 24);
    let screen = t.wait_for("eight GPU lines at 80x24", Duration::from_secs(15), |screen| {
        gpu_lines(screen) == 8 && honest_rows(screen, &s).len() >= 4
    });
    for source in ["drm:", "jetson:", "ascend:"] {
        assert!(!screen.contains(source), "{screen}");
    }

    t.run(&["resize-window", "-t", "view", "-x", "120", "-y", "35"]);
    let screen = t.wait_for("the command column at 120x35", Duration::from_secs(10), |screen| {
        screen.contains(" COMMAND") && gpu_lines(screen) == 8 && honest_rows(screen, &s).len() >= 8
    });
    let rank = s.procs[9].pid();
    let line = screen.lines().find(|l| first_pid(l) == Some(rank)).unwrap();
    // The command line (the sleeper's: a shell under the name `worker`).
    assert!(line.contains("/worker -c 'read _' worker"), "{screen}");
    t.keys(&["m"]);
    let screen = t.wait_for("full columns", Duration::from_secs(5), |screen| screen.contains(" RSS"));
    assert!(!screen.contains("SPILL") && !screen.contains("PAGED"), "{screen}");
    // ?: the keys, and every source's line (the screen shows those that
    // matter); the footer says what keys do.
    assert!(screen.contains("s sort") && screen.contains("? keys"), "{screen}");
    t.keys(&["?"]);
    let screen = t.wait_for("the keys", Duration::from_secs(5), |screen| {
        screen.contains(" Keys ") && screen.contains("e explains")
    });
    assert!(screen.contains("reverse the sort"), "{screen}");
    assert!(screen.contains("drm: unavailable"), "{screen}");
    t.keys(&["q"]);
    t.wait_for("exit", Duration::from_secs(5), |s| s.contains("EXITED 0"));

    // One GPU, its full header: the reserve, and the ASCII temperature.
    let t = Tmux::new(tmux, "first-hour-ascii");
    t.start_sized(&view_command(s.scenario.path(), "--ascii --gpu 0"), 120, 35);
    let screen = t.wait_for("GPU 0's header", Duration::from_secs(15), |screen| {
        screen.contains("reserved by the driver")
    });
    assert!(screen.contains(", 512.0 MiB reserved by the driver"), "{screen}");
    assert!(screen.contains("  40 C  "), "{screen}");
    assert!(!screen.contains("40  C"), "{screen}");
}
