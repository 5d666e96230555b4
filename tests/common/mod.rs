//! Shared by the end-to-end tests: the fake NVML, scenarios, and real
//! child processes whose PIDs go into them.
#![allow(dead_code)] // each test binary uses its own subset

pub mod tmux;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;

/// Builds crates/fake-nvml once per test binary, into its own target
/// directory so the build does not wait on the lock of the running `cargo
/// test`, and returns the path of the library.
pub fn fake_nvml() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = root.join("target").join("fake-nvml");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--package", "fake-nvml", "--target-dir"])
            .arg(&target)
            .current_dir(root)
            .status()
            .expect("run cargo build for fake-nvml");
        assert!(status.success(), "building fake-nvml failed");
        let lib = target.join("debug").join("libnvidia_ml.so");
        assert!(lib.exists(), "{} missing", lib.display());
        lib
    })
    .clone()
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

/// The process entry with this PID.
pub fn process(snapshot: &serde_json::Value, pid: u32) -> &serde_json::Value {
    snapshot["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {snapshot:#}"))
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
