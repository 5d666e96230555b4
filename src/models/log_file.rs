//! The runtime's log, where it writes one to a file: its stdout or
//! stderr when they are regular files, or its --log-file; the last
//! [`LOG_TAIL`](super::log_sources::LOG_TAIL) bytes are read, whole lines only, for [`logs`] to parse.

use super::access::{Access, Want};
use super::cmdline::LaunchSettings;
use super::log_sources::{self, read_tail, LOG_TAIL};
use super::logs;
use crate::procs::ProcInfo;
use std::path::{Path, PathBuf};

/// The files a process's stdout and stderr are (/proc/PID/fd/1 and 2,
/// Linux's; Windows gives no view of another process's standard
/// handles, and under Wine /proc would be its Linux host's).
fn stdout_and_stderr(root: &Path, pid: u32) -> Vec<PathBuf> {
    if cfg!(not(target_os = "linux")) {
        return Vec::new();
    }
    let fd_dir = root.join(pid.to_string()).join("fd");
    ["1", "2"]
        .iter()
        .filter_map(|fd| std::fs::read_link(fd_dir.join(fd)).ok())
        .collect()
}

/// The runtime's log: stdout or stderr when it is a regular file, or
/// --log-file (relative to the process's working directory, as the
/// runtime opened it: `resolve`).
pub(super) fn read_log(
    root: &Path,
    info: &ProcInfo,
    launch: &LaunchSettings,
    resolve: &dyn Fn(&Path) -> PathBuf,
    access: &Access,
    notes: &mut Vec<String>,
) -> Option<(String, logs::LogReport)> {
    let mut candidates = stdout_and_stderr(root, info.pid);
    candidates.extend(launch.log_file.as_deref().map(|f| resolve(Path::new(f))));
    candidates.dedup();
    for path in candidates {
        // A terminal, pipe or socket is no log to read; read_tail
        // opens regular files only and never blocks on a FIFO.
        if !std::fs::metadata(&path).map(|m| m.is_file()).unwrap_or(false) {
            continue;
        }
        // Its stdout and stderr it holds open; a --log-file it names.
        if let Err(why) = access.check(&path, Want::Read) {
            notes.push(format!("log {}: {why}", path.display()));
            continue;
        }
        match access
            .as_process(|| read_tail(&path, LOG_TAIL))
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        {
            Ok(text) => {
                let report = logs::parse_log(&text);
                if !report.is_empty() {
                    return Some((path.display().to_string(), report));
                }
            }
            Err(e) => notes.push(format!("log {} not readable: {e}", path.display())),
        }
    }
    let (source, text) = log_sources::elsewhere(root, info.pid, info.ppid, notes)?;
    let report = logs::parse_log(&text);
    (!report.is_empty()).then_some((source, report))
}

/// A log describes a model when it names this file, or names none.
pub(super) fn log_names(report: &logs::LogReport, path: &Path) -> bool {
    match report.model_path.as_deref() {
        Some(logged) => Path::new(logged) == path || Path::new(logged).file_name() == path.file_name(),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    const LINE: &str = "load_tensors:        CUDA0 model buffer size =  1024.00 MiB\n";

    /// Writes `text` in 7-byte pieces, as a runtime's buffered stdout
    /// lands: a reader may see a line cut anywhere.
    fn write_in_pieces(file: &mut std::fs::File, text: &str) {
        for piece in text.as_bytes().chunks(7) {
            let _ = file.write_all(piece);
        }
    }

    /// A log read while it is truncated in place (logrotate's copytruncate,
    /// a runtime restarted with `>`), rotated (renamed away, a new file
    /// begun) and appended to: each read gives whole lines' figures (1024
    /// MiB on CUDA0), nothing, or "not found" between the rename and the new
    /// file; never a panic, a cut figure or a cut device name.
    #[test]
    fn a_log_rotated_or_truncated_while_read_gives_whole_lines_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        std::fs::write(&path, LINE.repeat(100)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let lines = LINE.repeat(1 + (round % 150) as usize);
                    match round % 3 {
                        0 => {
                            let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&path);
                            if let Ok(f) = f.as_mut() {
                                write_in_pieces(f, &lines);
                            }
                        }
                        1 => {
                            let _ = std::fs::rename(&path, dir_of(&path).join("server.log.1"));
                            if let Ok(mut f) = std::fs::File::create(&path) {
                                write_in_pieces(&mut f, &lines);
                            }
                        }
                        _ => {
                            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&path) {
                                write_in_pieces(&mut f, &lines);
                            }
                        }
                    }
                }
            })
        };
        let (mut reads, mut figures, mut missing) = (0u32, 0usize, 0u32);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) || reads < 200 {
            // A small window, so the cut at its start is exercised too.
            match read_tail(&path, 1000) {
                Ok(text) => {
                    let report = logs::parse_log(&text);
                    for b in &report.buffers {
                        assert_eq!((b.device.as_str(), b.bytes), ("CUDA0", 1024 << 20), "{text:?}");
                    }
                    figures += report.buffers.len();
                    reads += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing += 1,
                Err(e) => panic!("{e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(figures > 0, "{reads} reads, {missing} between rotations, no figure");
    }

    fn dir_of(path: &Path) -> PathBuf {
        path.parent().unwrap().to_path_buf()
    }

    #[test]
    fn only_whole_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        std::fs::write(&path, LINE).unwrap();
        assert_eq!(read_tail(&path, 1000).unwrap(), LINE);
        // The last 30 bytes are the middle of the line: not a line.
        assert_eq!(read_tail(&path, 30).unwrap(), "");
        std::fs::write(&path, LINE.repeat(2)).unwrap();
        assert_eq!(read_tail(&path, LINE.len() as u64 + 3).unwrap(), LINE);
        // A line still being written waits for its newline.
        std::fs::write(&path, format!("{LINE}{}", &LINE[..40])).unwrap();
        assert_eq!(read_tail(&path, 1000).unwrap(), LINE);
    }

    /// A runtime writes its log in pieces (stdout is block-buffered when it
    /// is a file), so a read may end inside a line: `n_ctx_train = 3` of
    /// `n_ctx_train = 32768` was read as 3 before the reader kept to whole
    /// lines. Every line of a real log, cut at every byte, gives nothing
    /// until its newline is there, then what the whole line says.
    #[test]
    fn a_line_cut_while_it_is_written_gives_nothing_until_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let mut lines: Vec<&str> = include_str!("../../tests/data/llama-server/server.log")
            .lines()
            .collect();
        lines.extend([
            "time=2026-05-05T01:30:33.796+08:00 level=INFO source=device.go:240 msg=\"model weights\" device=CUDA0 size=\"13.0 GiB\"",
            "llama_kv_cache: size = 1024.00 MiB ( 32768 cells,  28 layers, 14/1 seqs), K (f16):  512.00 MiB, V (f16):  512.00 MiB",
        ]);
        let mut checked = 0;
        for line in lines {
            for cut in (1..line.len()).filter(|&i| line.is_char_boundary(i)) {
                std::fs::write(&path, &line[..cut]).unwrap();
                let report = logs::parse_log(&read_tail(&path, LOG_TAIL).unwrap());
                assert_eq!(report, logs::LogReport::default(), "{:?}", &line[..cut]);
                checked += 1;
            }
            std::fs::write(&path, format!("{line}\n")).unwrap();
            let whole = logs::parse_log(&format!("{line}\n"));
            assert_eq!(logs::parse_log(&read_tail(&path, LOG_TAIL).unwrap()), whole, "{line}");
        }
        assert!(checked > 5_000, "{checked}");
    }
}
