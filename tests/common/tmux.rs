//! A tmux server of the test's own, for the live view end to end: keys go
//! in with send-keys, the screen comes back with capture-pane.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub const WIDTH: u32 = 160;
pub const HEIGHT: u32 = 45;

pub fn tmux_path() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("tmux"))
            .find(|p| p.exists())
    });
    if found.is_none() {
        eprintln!(
            "SKIPPED: tmux is not installed (apt-get install -y tmux); the live view's end-to-end test did not run"
        );
    }
    found
}

/// A tmux server of our own (its own socket), killed when dropped.
pub struct Tmux {
    tmux: PathBuf,
    socket: String,
}

impl Tmux {
    pub fn new(tmux: PathBuf, name: &str) -> Tmux {
        Tmux {
            tmux,
            socket: format!("gputaskman-test-{name}-{}", std::process::id()),
        }
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.tmux)
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `command` (a shell line) in a detached session of our size.
    pub fn start(&self, command: &str) {
        self.start_sized(command, WIDTH, HEIGHT);
    }

    /// Starts `command` in a detached session of `width` x `height`.
    pub fn start_sized(&self, command: &str, width: u32, height: u32) {
        self.start_with(command, width, height, &[]);
    }

    /// Starts `command` in a tmux set as an operator's may be: what an
    /// OSC 52 sends becomes a paste buffer and programs may set the pane
    /// title, so a forged escape that got through would show. The options
    /// are set in the same tmux call as the session, before `command`
    /// draws (give it a short `sleep` first).
    pub fn start_permissive(&self, command: &str) {
        let options = [
            ";",
            "set-option",
            "-g",
            "set-clipboard",
            "on",
            ";",
            "set-option",
            "-g",
            "allow-rename",
            "on",
        ];
        self.start_with(command, WIDTH, HEIGHT, &options);
    }

    fn start_with(&self, command: &str, width: u32, height: u32, then: &[&str]) {
        let (width, height) = (width.to_string(), height.to_string());
        let mut args = vec![
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "view",
            "-x",
            &width,
            "-y",
            &height,
            command,
        ];
        args.extend_from_slice(then);
        self.run(&args);
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "view"])
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "view"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    pub fn display(&self, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", "view", format])
            .trim()
            .to_string()
    }

    /// Waits until the screen satisfies `ok`, and returns it; panics with
    /// the last screen after `limit`.
    pub fn wait_for(&self, what: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            if start.elapsed() > limit {
                panic!("waited {limit:?} for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new(&self.tmux)
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}
