//! gputaskman.exe under Wine, for tests/windows.rs: the Windows build
//! (x86_64-pc-windows-gnu, linked by Debian's mingw-w64), the fake NVML as
//! nvml.dll, the fake PDH as pdh.dll and the fake DXGI as dxgi.dll beside
//! it, the C helpers of tests/windows built with mingw, and a Wine prefix of
//! the tests' own.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

const TARGET: &str = "x86_64-pc-windows-gnu";
const MINGW_GCC: &str = "x86_64-w64-mingw32-gcc";
/// Longest a Wine process of the tests may take to start (the first one
/// starts wineserver).
const START: Duration = Duration::from_secs(60);

/// The built folder and the prefix.
pub struct Wine {
    /// gputaskman.exe, nvml.dll, pdh.dll, dxgi.dll, bcryptprimitives.dll,
    /// holder.exe and ggml-cuda.dll.
    pub app: PathBuf,
    prefix: PathBuf,
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join(program).exists()))
}

/// Everything built and the prefix made, once per test binary; None, after
/// a loud SKIPPED line, where wine or mingw-w64 is not installed.
pub fn wine() -> Option<&'static Wine> {
    for (program, package) in [("wine", "wine wine64"), (MINGW_GCC, "gcc-mingw-w64-x86-64")] {
        if !on_path(program) {
            eprintln!(
                "SKIPPED: {program} is not installed (apt-get install --no-install-recommends {package}); the Windows build was not run under Wine"
            );
            return None;
        }
    }
    static WINE: OnceLock<Wine> = OnceLock::new();
    Some(WINE.get_or_init(setup))
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn setup() -> Wine {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A target directory of its own: the running `cargo test` holds the lock
    // of target/.
    let target = root.join("target").join("wine");
    let cargo = |args: &[&str], what: &str| {
        run(
            Command::new(env!("CARGO"))
                .args(["build", "--quiet", "--target", TARGET, "--target-dir"])
                .arg(&target)
                .args(args)
                .current_dir(root),
            what,
        )
    };
    cargo(
        &["--package", "gputaskman", "--bin", "gputaskman"],
        "cargo build gputaskman.exe",
    );
    cargo(
        &[
            "--package",
            "fake-nvml",
            "--package",
            "fake-pdh",
            "--package",
            "fake-dxgi",
            "--lib",
        ],
        "cargo build the fake DLLs",
    );
    let built = target.join(TARGET).join("debug");
    let app = target.join("app");
    std::fs::create_dir_all(&app).unwrap();
    for (from, to) in [
        ("gputaskman.exe", "gputaskman.exe"),
        ("nvidia_ml.dll", "nvml.dll"),
        ("pdh.dll", "pdh.dll"),
        ("dxgi.dll", "dxgi.dll"),
    ] {
        std::fs::copy(built.join(from), app.join(to)).unwrap_or_else(|e| panic!("{from}: {e}"));
    }
    let here = root.join("tests").join("windows");
    for (source, output, flags) in [
        (
            "bcryptprimitives.c",
            "bcryptprimitives.dll",
            &["-shared", "-ladvapi32"][..],
        ),
        ("holder.c", "holder.exe", &[][..]),
        ("runtime_dll.c", "ggml-cuda.dll", &["-shared"][..]),
    ] {
        run(
            Command::new(MINGW_GCC)
                .arg("-O2")
                .arg("-o")
                .arg(app.join(output))
                .arg(here.join(source))
                .args(flags),
            &format!("{MINGW_GCC} {source}"),
        );
    }
    let prefix = target.join("prefix");
    let wine = Wine { app, prefix };
    // A prefix takes some seconds to make and lasts: made once, kept in
    // target/wine/prefix. Console programs need no display.
    if !wine.prefix.join("system.reg").exists() {
        std::fs::create_dir_all(&wine.prefix).unwrap();
        run(
            wine.env(&mut Command::new("timeout")).args(["300", "wineboot", "-i"]),
            "wineboot -i",
        );
    }
    wine
}

/// `path` as Windows programs under Wine name it (Wine's Z: is /).
pub fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display())
}

impl Wine {
    fn env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            // The fake pdh.dll and dxgi.dll beside the .exe, not Wine's
            // own. The fake DXGI has no adapters unless a test names a
            // scenario (FAKE_DXGI_SCENARIO).
            .env("WINEDLLOVERRIDES", "pdh=n;dxgi=n")
            .env_remove("FAKE_DXGI_SCENARIO")
            .env_remove("DISPLAY")
            .env_remove("GPUTASKMAN_NVML_LIB")
    }

    /// `wine gputaskman.exe`, against these fake NVML and PDH scenarios.
    pub fn gputaskman(&self, nvml: &Path, pdh: &Path) -> Command {
        let mut cmd = Command::new("wine");
        self.env(&mut cmd)
            .arg(self.app.join("gputaskman.exe"))
            .env("FAKE_NVML_SCENARIO", windows_path(nvml))
            .env("FAKE_PDH_SCENARIO", windows_path(pdh))
            .current_dir(&self.app);
        cmd
    }

    /// The same as a shell line, for a terminal (tmux) to run.
    pub fn gputaskman_line(&self, nvml: &Path, pdh: &Path) -> String {
        let cmd = self.gputaskman(nvml, pdh);
        let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
        let mut line = format!(
            "cd {} && env -u DISPLAY -u GPUTASKMAN_NVML_LIB -u FAKE_DXGI_SCENARIO",
            quote(self.app.as_os_str())
        );
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                line.push_str(&format!(" {}={}", k.to_string_lossy(), quote(v)));
            }
        }
        line.push_str(&format!(" {}", quote(cmd.get_program())));
        for arg in cmd.get_args() {
            line.push_str(&format!(" {}", quote(arg)));
        }
        line
    }

    /// A holder.exe that loads `dlls` (file names in the app folder) and
    /// carries `args` in its command line.
    pub fn holder(&self, dlls: &[&str], args: &[&str]) -> Holder {
        let mut cmd = Command::new("wine");
        self.env(&mut cmd)
            .arg(self.app.join("holder.exe"))
            .args(dlls.iter().map(|d| windows_path(&self.app.join(d))))
            .args(args)
            .current_dir(&self.app)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("start holder.exe under wine");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let mut holder = Holder { child, stdin, pid: 0 };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(START).unwrap_or_default();
        holder.pid = line
            .trim()
            .strip_prefix("pid ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("holder.exe did not start: {line:?}"));
        holder
    }
}

/// A Windows process under Wine: it ends when its stdin closes, and is
/// killed if it has not a few seconds later, even when the test fails.
pub struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its Windows PID.
    pub pid: u32,
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
