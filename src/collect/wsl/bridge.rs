//! The bridge's child process: `powershell.exe` on the Windows side, started
//! through WSL interop, running `bridge.ps1` and streaming counters back.
//!
//! The collector never waits on it: a reader thread keeps the newest
//! complete sample, and [`Bridge::latest`] only takes a lock. The child is
//! killed when the bridge is dropped; lines are read with a length cap, and
//! a stream that stops is reported, not waited for.

use super::lines::{BridgeSample, Event, Parser, HELLO};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The script, run with `-EncodedCommand` (no file on the Windows side).
const SCRIPT: &str = include_str!("bridge.ps1");
/// Longest line read; longer ones are skipped to their end. A counter path
/// with a process name fits in a few hundred bytes.
const MAX_LINE: usize = 8192;
/// Most lines in one sample (five memory counters and a few dozen engines per
/// GPU process, a few hundred processes), so a stream without `end` cannot
/// grow without bound.
const MAX_SAMPLE_LINES: usize = 250_000;
/// A running bridge whose last sample is older than this is stalled.
pub const STALL: Duration = Duration::from_secs(10);
/// How much of the child's stderr is kept for the error message.
const STDERR_TAIL: usize = 2048;

/// Where the bridge is.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Started, no sample yet (powershell.exe and its first Get-Counter take
    /// a few seconds).
    Starting(Duration),
    /// Samples arrive; the newest is this old.
    Running(Duration),
    /// The child exited or could not be read; why.
    Failed(String),
}

#[derive(Debug, Default)]
struct Shared {
    latest: Option<(u64, BridgeSample, Instant)>,
    /// The last stream-level error (bad hello, Windows-side error line).
    error: Option<String>,
    /// Set when stdout ends: the child exited or closed it.
    ended: Option<String>,
    stderr: String,
}

pub struct Bridge {
    child: Child,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    started: Instant,
    program: PathBuf,
}

/// `powershell.exe` on PATH, or where Windows keeps it, seen through the
/// default /mnt/c mount (PATH lacks it when `appendWindowsPath=false`).
pub fn find_powershell() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("powershell.exe"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let fallback = PathBuf::from("/mnt/c/Windows/System32/WindowsPowerShell/v1.0/powershell.exe");
    on_path.into_iter().chain([fallback]).find(|p| p.is_file())
}

/// PowerShell's `-EncodedCommand`: base64 of the UTF-16LE script.
fn encoded_command(script: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = script.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char),
                false => out.push('='),
            }
        }
    }
    out
}

impl Bridge {
    /// Starts `program` (powershell.exe) with the bridge script.
    pub fn start(program: &Path) -> Result<Bridge, String> {
        let mut child = Command::new(program)
            .args([
                "-NoLogo",
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-EncodedCommand",
                &encoded_command(SCRIPT),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match e.raw_os_error() {
                // ENOEXEC: the kernel does not know how to run a Windows
                // binary, i.e. WSL interop is off.
                Some(8) => format!("cannot run {}: WSL interop is disabled ({e})", program.display()),
                _ => format!("cannot start {}: {e}", program.display()),
            })?;
        let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let reader = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("wsl-bridge".into())
            .spawn(move || read_stream(BufReader::new(stdout), &reader))
            .map_err(|e| e.to_string())?;
        let tail = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("wsl-bridge-err".into())
            .spawn(move || read_stderr(stderr, &tail))
            .map_err(|e| e.to_string())?;
        Ok(Bridge {
            child,
            shared,
            started: Instant::now(),
            program: program.to_path_buf(),
        })
    }

    /// The bridge's state and its newest sample with a sequence number that
    /// grows with each new one. Never blocks on the child.
    pub fn latest(&self) -> (Status, Option<(u64, BridgeSample)>) {
        let s = lock(&self.shared.0);
        let sample = s.latest.as_ref().map(|(seq, sample, _)| (*seq, sample.clone()));
        let status = match (&s.ended, &s.latest) {
            (Some(why), _) => {
                let stderr = s.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
                Status::Failed(match stderr.is_empty() {
                    true => why.clone(),
                    false => format!("{why}: {stderr}"),
                })
            }
            (None, Some((_, _, at))) => Status::Running(at.elapsed()),
            (None, None) => match &s.error {
                Some(e) => Status::Failed(e.clone()),
                None => Status::Starting(self.started.elapsed()),
            },
        };
        (status, sample)
    }

    /// The last stream-level error (the Windows side's own words), if any.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.shared.0).error.clone()
    }

    /// Waits up to `limit` for the first sample or the end of the stream
    /// (one-shot output would rather wait than print "starting").
    pub fn wait_first(&self, limit: Duration) {
        let (mutex, ready) = &*self.shared;
        let deadline = Instant::now() + limit;
        let mut s = lock(mutex);
        while s.latest.is_none() && s.ended.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            s = match ready.wait_timeout(s, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// The program the bridge runs (to start it again).
    pub fn program(&self) -> &Path {
        &self.program
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // The reader threads end when the pipes close.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads one line of at most [`MAX_LINE`] bytes; a longer one is skipped to
/// its end and returned empty. None at the end of the stream.
fn read_line_capped(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<()>> {
    buf.clear();
    let n = r.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > MAX_LINE && buf.last() != Some(&b'\n') {
        // Skip the rest of the long line.
        let mut skip = Vec::new();
        loop {
            skip.clear();
            let n = r.by_ref().take(MAX_LINE as u64).read_until(b'\n', &mut skip)?;
            if n == 0 || skip.last() == Some(&b'\n') {
                break;
            }
        }
        buf.clear();
    }
    Ok(Some(()))
}

fn read_stream(mut r: impl BufRead, shared: &(Mutex<Shared>, Condvar)) {
    let (mutex, ready) = shared;
    let mut parser = Parser::default();
    let mut buf = Vec::new();
    let mut seq = 0u64;
    let mut lines_in_sample = 0usize;
    let why = loop {
        match read_line_capped(&mut r, &mut buf) {
            Ok(Some(())) => {}
            Ok(None) => break "the bridge process ended".to_string(),
            Err(e) => break format!("reading the bridge failed: {e}"),
        }
        let line = String::from_utf8_lossy(&buf);
        lines_in_sample += 1;
        if lines_in_sample > MAX_SAMPLE_LINES {
            // Restart the parser: the sample in progress is dropped.
            parser = Parser::default();
            parser.line(HELLO);
            lines_in_sample = 0;
            lock(mutex).error = Some(format!("a sample longer than {MAX_SAMPLE_LINES} lines was dropped"));
            continue;
        }
        match parser.line(&line) {
            Event::None => {}
            Event::Sample(sample) => {
                seq += 1;
                lines_in_sample = 0;
                let mut s = lock(mutex);
                s.latest = Some((seq, *sample, Instant::now()));
                s.error = None;
                ready.notify_all();
            }
            Event::Error(e) => lock(mutex).error = Some(e),
        }
    };
    let mut s = lock(mutex);
    s.ended = Some(why);
    ready.notify_all();
}

fn read_stderr(mut r: impl Read, shared: &(Mutex<Shared>, Condvar)) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        let mut s = lock(&shared.0);
        s.stderr.push_str(&String::from_utf8_lossy(&buf[..n]));
        if s.stderr.len() > STDERR_TAIL {
            let cut = s.stderr.len() - STDERR_TAIL;
            let cut = (cut..s.stderr.len())
                .find(|&i| s.stderr.is_char_boundary(i))
                .unwrap_or(0);
            s.stderr.drain(..cut);
        }
    }
}

// The stand-in powershell.exe is a shell script.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in powershell.exe: a shell script.
    fn fake(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("powershell.exe");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn stream() -> String {
        format!("{}/tests/data/wsl/bridge-vmwp.txt", env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn the_script_is_passed_as_powershell_encodes_it() {
        // "ab" in UTF-16LE is 61 00 62 00.
        assert_eq!(encoded_command("ab"), "YQBiAA==");
        assert_eq!(encoded_command("abc"), "YQBiAGMA");
        assert!(encoded_command(SCRIPT).len() < 30_000, "fits a Windows command line");
    }

    #[test]
    fn samples_stream_in_and_the_child_is_killed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let program = fake(
            dir.path(),
            &format!("echo $$ > {}; cat {}; exec sleep 60", pid_file.display(), stream()),
        );
        let bridge = Bridge::start(&program).unwrap();
        bridge.wait_first(Duration::from_secs(10));
        // The reader may still be on its way through the later samples.
        let deadline = Instant::now() + Duration::from_secs(10);
        let (status, sample) = loop {
            let (status, sample) = bridge.latest();
            if sample.as_ref().is_some_and(|(seq, _)| *seq == 3) || Instant::now() > deadline {
                break (status, sample);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(matches!(status, Status::Running(_)), "{status:?}");
        let (seq, sample) = sample.unwrap();
        assert_eq!(seq, 3);
        assert_eq!(sample.names[&5544], "vmwp");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        drop(bridge);
        // SAFETY: kill with signal 0 only checks that the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "the child is gone after drop");
    }

    #[test]
    fn a_slow_start_is_starting_not_zeros_and_a_dead_one_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let slow = fake(dir.path(), &format!("echo '{}'; exec sleep 60", super::super::HELLO));
        let bridge = Bridge::start(&slow).unwrap();
        bridge.wait_first(Duration::from_millis(300));
        let (status, sample) = bridge.latest();
        assert!(matches!(status, Status::Starting(_)), "{status:?}");
        assert!(sample.is_none());
        drop(bridge);

        let dir = tempfile::tempdir().unwrap();
        let dead = fake(dir.path(), "echo 'Access is denied.' >&2; exit 1");
        let bridge = Bridge::start(&dead).unwrap();
        bridge.wait_first(Duration::from_secs(10));
        // stderr may land just after stdout ends.
        std::thread::sleep(Duration::from_millis(200));
        let (status, _) = bridge.latest();
        let Status::Failed(why) = status else {
            panic!("{status:?}")
        };
        assert!(why.contains("ended") && why.contains("Access is denied."), "{why}");

        let missing = Bridge::start(Path::new("/nonexistent/powershell.exe"));
        assert!(missing.err().unwrap().contains("cannot start"));
    }

    #[test]
    fn garbage_and_endless_lines_do_not_hang_or_grow() {
        let dir = tempfile::tempdir().unwrap();
        // A hello, a 1 MiB line, then a good stream.
        let program = fake(
            dir.path(),
            &format!(
                "echo '{}'; head -c 1048576 /dev/zero | tr '\\0' x; echo; tail -n +2 {}; exec sleep 60",
                super::super::HELLO,
                stream()
            ),
        );
        let bridge = Bridge::start(&program).unwrap();
        bridge.wait_first(Duration::from_secs(10));
        let (status, sample) = bridge.latest();
        assert!(matches!(status, Status::Running(_)), "{status:?}");
        assert!(sample.is_some());
        assert!(bridge.last_error().is_none());
    }
}
