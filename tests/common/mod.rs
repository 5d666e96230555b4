//! Shared by the end-to-end tests: the fake NVML, scenarios, and real
//! child processes whose PIDs go into them.
#![allow(dead_code)] // each test binary uses its own subset

pub mod prometheus;
pub mod tmux;
pub mod wine;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;

/// Builds crates/fake-nvml once per test binary, into its own target
/// directory so the build does not wait on the lock of the running `cargo
/// test`, and returns the path of the library.
pub fn fake_nvml() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| built("fake-nvml", "libnvidia_ml.so")).clone()
}

/// The check kit's binaries (crates/gpu-hog), built as [`fake_nvml`] is:
/// the folder that holds `gpu-hog` and `gpu-check`.
pub fn gpu_hog_kit() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| built("gpu-hog", "gpu-check").parent().unwrap().to_path_buf())
        .clone()
}

/// Builds a workspace package into target/fake-nvml (a target directory of
/// the tests' own) and returns the path of `file` it made.
fn built(package: &str, file: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = root.join("target").join("fake-nvml");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--package", package, "--target-dir"])
        .arg(&target)
        .current_dir(root)
        .status()
        .unwrap_or_else(|e| panic!("run cargo build for {package}: {e}"));
    assert!(status.success(), "building {package} failed");
    let path = target.join("debug").join(file);
    assert!(path.exists(), "{} missing", path.display());
    path
}

/// A scenario file that lives as long as the value.
pub struct Scenario {
    pub file: tempfile::NamedTempFile,
}

impl Scenario {
    pub fn new(json: &serde_json::Value) -> Scenario {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), serde_json::to_vec_pretty(json).unwrap()).unwrap();
        Scenario { file }
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The real binary, pointed at the fake NVML with this scenario.
    pub fn command(&self) -> assert_cmd::Command {
        let mut cmd = assert_cmd::Command::cargo_bin("gputaskman").unwrap();
        cmd.env("FAKE_NVML_SCENARIO", self.path())
            .env_remove("GPUTASKMAN_NVML_LIB")
            .arg("--nvml-lib")
            .arg(fake_nvml())
            .timeout(std::time::Duration::from_secs(60));
        cmd
    }

    /// Runs `args` and parses stdout as JSON.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.command().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "exit {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("stdout is JSON")
    }
}

/// What `gputaskman schema` prints (it takes no --nvml-lib, so not through
/// a scenario's command).
pub fn schema() -> serde_json::Value {
    let out = assert_cmd::Command::cargo_bin("gputaskman")
        .unwrap()
        .arg("schema")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the schema is JSON")
}

/// A real process, killed and reaped when dropped, even if the test fails.
pub struct Sleeper {
    child: Child,
}

impl Sleeper {
    /// A shell that waits on its stdin, under the name `name` (a symlink
    /// to sh, so it is the process's comm) and with `args` in its command
    /// line. It has no child of its own, so killing it leaves nothing behind.
    pub fn spawn(dir: &Path, name: &str, args: &[&str]) -> Sleeper {
        let exe = dir.join(name);
        if !exe.exists() {
            std::os::unix::fs::symlink(which("sh"), &exe).unwrap();
        }
        let child = Command::new(&exe)
            .args(["-c", "read _", name])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sleeper");
        Sleeper { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(program))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| panic!("{program} not on PATH"))
}

#[allow(unused_imports)] // each test binary uses its own subset, as above
pub use named_lib::library_named;

/// The process entry with this PID.
pub fn process(snapshot: &serde_json::Value, pid: u32) -> &serde_json::Value {
    snapshot["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {snapshot:#}"))
}

/// The PIDs of a snapshot's processes, in its order.
pub fn pids(snapshot: &serde_json::Value) -> Vec<u64> {
    snapshot["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect()
}

/// The backend entry named `name`.
pub fn backend<'a>(snapshot: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    snapshot["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no backend {name} in {snapshot:#}"))
}

/// An entry's notes (a device's, a process's), a line each.
pub fn notes(entry: &serde_json::Value) -> String {
    entry["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a finished command said: its stdout, then its stderr.
pub fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The JSON a gputaskman command prints, which must succeed.
pub fn json_of(cmd: &mut assert_cmd::Command) -> serde_json::Value {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The device entry with this index.
pub fn device(snapshot: &serde_json::Value, index: u32) -> &serde_json::Value {
    snapshot["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["index"] == index)
        .unwrap_or_else(|| panic!("device {index} not in {snapshot:#}"))
}

/// A background server a test starts: it prints a line starting with
/// "ready" when it serves. Killed by its PID and reaped when dropped, even
/// when the test fails.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
}

impl Daemon {
    /// Starts `cmd` (stdout is taken for the ready line) and waits up to
    /// `wait` for it. `port` is the port the command was told to use.
    pub fn start(mut cmd: Command, port: u16, wait: std::time::Duration) -> Daemon {
        use std::io::BufRead;
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the server");
        let stdout = child.stdout.take().unwrap();
        let daemon = Daemon { child, port };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(wait).unwrap_or_default();
        assert!(line.starts_with("ready"), "server did not start: {line:?}");
        daemon
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `gputaskman serve` on a free loopback port, against a scenario, with
/// `extra` after `serve --listen ADDR`.
pub fn serve(scenario: &Path, extra: &[&str]) -> Daemon {
    let port = free_port();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", scenario)
        .env_remove("GPUTASKMAN_NVML_LIB")
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(extra);
    Daemon::start(cmd, port, std::time::Duration::from_secs(30))
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The Python the end-to-end tests use (scripts/test.sh sets it), or None
/// after a loud SKIPPED line.
pub fn test_python() -> Option<PathBuf> {
    match std::env::var_os("GPUTASKMAN_TEST_PYTHON").map(PathBuf::from) {
        Some(p) if p.exists() => Some(p),
        _ => {
            eprintln!("SKIPPED: set GPUTASKMAN_TEST_PYTHON (scripts/test.sh does)");
            None
        }
    }
}

/// The real binary's JSON snapshot, with no NVIDIA library found.
pub fn snapshot_without_gpu(envs: &[(&str, &Path)]) -> serde_json::Value {
    let mut cmd = assert_cmd::Command::cargo_bin("gputaskman").unwrap();
    cmd.env("GPUTASKMAN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .arg("--json")
        .timeout(std::time::Duration::from_secs(60));
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The real Gemma 3 270M file (scripts/test.sh sets GPUTASKMAN_GEMMA_GGUF),
/// or None after a loud SKIPPED line.
pub fn gemma_gguf() -> Option<PathBuf> {
    match std::env::var_os("GPUTASKMAN_GEMMA_GGUF").map(PathBuf::from) {
        Some(p) if p.exists() => Some(p),
        _ => {
            eprintln!("SKIPPED: set GPUTASKMAN_GEMMA_GGUF (scripts/test.sh does)");
            None
        }
    }
}

/// A real llama.cpp server (tests/servers/llama_server.py on xllamacpp)
/// serving `model` on a free port, its stderr (llama.cpp's log) in `log`.
pub fn llama_server(python: &Path, model: &Path, log: &Path, extra: &[&str]) -> Daemon {
    llama_server_logging_to(python, model, std::fs::File::create(log).unwrap().into(), extra)
}

/// [`llama_server`] with llama.cpp's log going to `stderr` (`Stdio::null()`:
/// a server whose log no one can find).
pub fn llama_server_logging_to(python: &Path, model: &Path, stderr: std::process::Stdio, extra: &[&str]) -> Daemon {
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/llama_server.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .arg("--model")
        .arg(model)
        .args(["--port", &port.to_string()])
        .args(extra)
        .stderr(stderr);
    Daemon::start(cmd, port, std::time::Duration::from_secs(120))
}

/// Starts tests/servers/fake_api.py as a process named `name` (a symlink to
/// the Python in `dir`), serving each (PATH, FILE) route.
pub fn fake_api(python: &Path, dir: &Path, name: &str, mode: &str, routes: &[(&str, &Path)], extra: &[&str]) -> Daemon {
    fake_api_as(None, python, dir, name, mode, routes, extra)
}

/// [`fake_api`] run as user and group `uid` when given (the tests that run
/// as root start hostile neighbours as `nobody`); `dir` and the route
/// files must then be readable by it.
pub fn fake_api_as(
    uid: Option<u32>,
    python: &Path,
    dir: &Path,
    name: &str,
    mode: &str,
    routes: &[(&str, &Path)],
    extra: &[&str],
) -> Daemon {
    let exe = dir.join(name);
    std::os::unix::fs::symlink(std::fs::canonicalize(python).unwrap(), &exe).unwrap();
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/fake_api.py");
    let mut cmd = Command::new(&exe);
    cmd.arg(script).args(["--port", &port.to_string(), "--mode", mode]);
    for (path, file) in routes {
        cmd.arg(format!("{path}={}", file.display()));
    }
    cmd.args(extra);
    if let Some(uid) = uid {
        std::os::unix::process::CommandExt::uid(&mut cmd, uid);
        std::os::unix::process::CommandExt::gid(&mut cmd, uid);
    }
    Daemon::start(cmd, port, std::time::Duration::from_secs(30))
}

/// Runs `cmd` to its end (killed after `limit`) and returns its exit
/// status, stdout, stderr and peak RSS in KiB: wait4's rusage of that one
/// child, not of every test's children.
// The child is reaped by wait4, which std's Child::wait cannot replace: it
// gives no rusage.
#[allow(clippy::zombie_processes)]
pub fn peak_rss(mut cmd: Command, limit: std::time::Duration) -> (std::process::ExitStatus, Vec<u8>, Vec<u8>, i64) {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.read_to_end(&mut out);
            out
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let reaped = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let reaped = reaped.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while !reaped.load(Ordering::Acquire) {
                if start.elapsed() > limit {
                    // SAFETY: a signal to our own unreaped child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let mut status = 0;
    // SAFETY: plain out-parameters; the child is ours and not yet reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    reaped.store(true, Ordering::Release);
    assert_eq!(waited, pid);
    watchdog.join().unwrap();
    (
        std::process::ExitStatus::from_raw(status),
        stdout.join().unwrap(),
        stderr.join().unwrap(),
        usage.ru_maxrss,
    )
}

/// A metadata value for [`gguf_bytes`].
pub enum Kv<'a> {
    Str(&'a [u8]),
    U16(u16),
    U32(u32),
}

/// A little-endian GGUF v3 of no tensors with these key-value pairs.
pub fn gguf_bytes(kvs: &[(&str, Kv)]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes()); // tensors
    out.extend((kvs.len() as u64).to_le_bytes());
    for (key, value) in kvs {
        out.extend((key.len() as u64).to_le_bytes());
        out.extend(key.as_bytes());
        match value {
            Kv::Str(s) => {
                out.extend(8u32.to_le_bytes());
                out.extend((s.len() as u64).to_le_bytes());
                out.extend(*s);
            }
            Kv::U16(v) => {
                out.extend(2u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
            Kv::U32(v) => {
                out.extend(4u32.to_le_bytes());
                out.extend(v.to_le_bytes());
            }
        }
    }
    out
}

/// `split.count` = `count` (u16, as tools/gguf-split writes it) and eight
/// strings of just under 1 MiB, each kept whole by the reader: about 8 MiB
/// of header that a split set could repeat in every part.
pub fn split_bomb_part(count: u16) -> Vec<u8> {
    let filler = vec![b'x'; (1 << 20) - 1];
    let keys: Vec<String> = (0..8).map(|i| format!("bomb.{i}")).collect();
    let mut kvs = vec![
        ("general.architecture", Kv::Str(b"llama")),
        ("split.count", Kv::U16(count)),
    ];
    kvs.extend(keys.iter().map(|k| (k.as_str(), Kv::Str(&filler))));
    gguf_bytes(&kvs)
}

/// The bidi controls: marks, embeddings, overrides and isolates.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What no terminal may be sent from outside: C0 but `\n` (the views' own
/// line ends), DEL, C1, and the bidi controls.
pub fn assert_inert(what: &str, out: &str) {
    let bad: Vec<(usize, char)> = out
        .char_indices()
        .filter(|(_, c)| (c.is_control() && *c != '\n') || is_bidi(*c))
        .collect();
    assert!(bad.is_empty(), "{what} sends the terminal {bad:?}:\n{out}");
}

/// A screen as tmux's `capture-pane -e` gives it: every escape is a
/// colour (SGR, `ESC [ digits;… m`, what the live view sets itself), and
/// nothing else is a control or bidi character but the line ends.
pub fn assert_only_colours(what: &str, screen: &str) {
    for seq in screen.split('\u{1b}').skip(1) {
        let end = seq
            .find('m')
            .unwrap_or_else(|| panic!("{what}: an escape that is no SGR: {seq:?}"));
        assert!(
            seq.starts_with('[') && seq[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
            "{what}: {seq:?}"
        );
    }
    assert_inert(what, &screen.replace('\u{1b}', ""));
}
