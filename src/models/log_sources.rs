//! Where a runtime's log lies when it is not a file of its own: the systemd
//! journal (Ollama's Linux service logs there: its stdout is a socket of
//! journald's) and Docker's json-file log of the process's container
//! (Docker Model Runner, llama.cpp in a container). Both give the text that
//! `logs::parse_log` reads. Hostile input: the journal is read through
//! `journalctl` under a deadline with capped output, Docker's log as a
//! regular file only, its tail capped; neither blocks another process's
//! discovery (each process is discovered on a thread of its own).

use crate::collect::ascend::run;
use gguf::regular_file;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `journalctl` may take: a log line is never this slow to print.
pub const JOURNAL_DEADLINE: Duration = Duration::from_secs(2);
/// The last lines asked of the journal: a load's lines are a few hundred.
const JOURNAL_LINES: &str = "20000";
/// A Docker log line is one JSON object per output line; longer ones are
/// not llama.cpp's lines.
const MAX_DOCKER_LINE: usize = 64 << 10;

/// `journalctl`: GPUTASKMAN_JOURNALCTL, else the first on PATH.
pub fn journalctl() -> Option<PathBuf> {
    std::env::var_os("GPUTASKMAN_JOURNALCTL")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .map(|dir| dir.join("journalctl"))
                .find(|p| p.is_file())
        })
}

/// Whether a standard stream (a /proc/PID/fd link's target) is a socket,
/// as journald's stream is for a service's stdout and stderr.
pub fn is_socket(target: &Path) -> bool {
    target.to_string_lossy().starts_with("socket:[")
}

/// The journal's lines of `pids` (the process, and its parent for a runner
/// whose output the parent copies: Ollama), their message text only, at
/// most `cap` bytes, killed past `deadline`. Err says why none came, and
/// that only root and the systemd-journal (or adm) group read other users'
/// and system services' lines, when that is the likely cause.
pub fn journal(journalctl: &Path, pids: &[u32], deadline: Duration, cap: u64) -> Result<String, String> {
    let matches: Vec<String> = pids.iter().map(|p| format!("_PID={p}")).collect();
    let mut args = vec!["--no-pager", "--quiet", "-o", "cat", "-n", JOURNAL_LINES];
    args.extend(matches.iter().map(String::as_str));
    let denied = || {
        format!(
            "journal: no lines of PID {} readable here (journalctl shows system services' lines to root and the systemd-journal and adm groups only)",
            pids.first().copied().unwrap_or_default()
        )
    };
    match run::with_deadline(journalctl, &args, deadline, cap) {
        Ok(text) if text.trim().is_empty() && !is_root() => Err(denied()),
        Ok(text) => Ok(text),
        Err(e) if e.contains("insufficient permissions") || e.contains("not seeing messages") => Err(denied()),
        Err(e) => Err(format!("journal: {e}")),
    }
}

fn is_root() -> bool {
    #[cfg(unix)]
    // SAFETY: geteuid has no preconditions.
    return unsafe { libc::geteuid() } == 0;
    #[cfg(not(unix))]
    false
}

/// Docker's json-file log of container `id` under `root` (`/`):
/// `var/lib/docker/containers/ID/ID-json.log`. The id must be a container
/// id (64 hex digits: it names a path).
pub fn docker_log_path(root: &Path, id: &str) -> Option<PathBuf> {
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| {
        root.join("var/lib/docker/containers")
            .join(id)
            .join(format!("{id}-json.log"))
    })
}

/// The output lines of a json-file log (`{"log":"...\n","stream":"stderr",
/// "time":"..."}` a line), in order; lines that are not such objects are
/// skipped. Pure.
pub fn docker_log_text(json_lines: &str) -> String {
    let mut text = String::new();
    for line in json_lines.lines().filter(|l| l.len() <= MAX_DOCKER_LINE) {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(log) = value.get("log").and_then(|l| l.as_str()) {
            text.push_str(log);
            if !log.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}

/// Where else process `pid` logs, read: Docker's json-file log of its
/// container, else the journal when its stdout or stderr (or its
/// parent's, for a runner whose output the parent copies) is a socket.
/// Gives (where, text); what stops a read is a note.
pub fn elsewhere(proc_root: &Path, pid: u32, ppid: Option<u32>, notes: &mut Vec<String>) -> Option<(String, String)> {
    if cfg!(not(target_os = "linux")) {
        return None;
    }
    match docker_log(proc_root, Path::new("/"), pid) {
        Some(Ok(found)) => return Some(found),
        Some(Err(why)) => notes.push(why),
        None => {}
    }
    let socket = |p: u32| {
        ["1", "2"].iter().any(|fd| {
            std::fs::read_link(proc_root.join(p.to_string()).join("fd").join(fd)).is_ok_and(|t| is_socket(&t))
        })
    };
    let pids: Vec<u32> = std::iter::once(pid).chain(ppid.filter(|&p| p > 1)).collect();
    if !pids.iter().any(|&p| socket(p)) {
        return None;
    }
    let tool = journalctl()?;
    match journal(&tool, &pids, JOURNAL_DEADLINE, LOG_TAIL) {
        Ok(text) => Some((format!("journal:_PID={pid}"), text)),
        Err(why) => {
            notes.push(why);
            None
        }
    }
}

/// Docker's json-file log of the system container process `pid` runs in,
/// under the filesystem root `fs_root`: (where, its output text), or why
/// it could not be read; None when the process is in no such container or
/// its log driver keeps no file there.
pub fn docker_log(proc_root: &Path, fs_root: &Path, pid: u32) -> Option<Result<(String, String), String>> {
    let id = crate::collect::containers::docker_id(proc_root, pid)?;
    let path = docker_log_path(fs_root, &id).filter(|p| p.symlink_metadata().is_ok())?;
    Some(match read_tail(&path, LOG_TAIL) {
        Ok(lines) => Ok((format!("docker:{}", path.display()), docker_log_text(&lines))),
        Err(e) => Err(format!("docker log {} not readable: {e}", path.display())),
    })
}

/// The most of a log that is read, from its end.
pub(super) const LOG_TAIL: u64 = 8 << 20;

/// The whole lines among the last `limit` bytes of a file.
pub(super) fn read_tail(path: &Path, limit: u64) -> std::io::Result<String> {
    let mut file = regular_file::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(limit);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(limit).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let text = match (start > 0, text.find('\n')) {
        (true, Some(nl)) => &text[nl + 1..],
        // The window lies inside one line (or the file was cut and
        // rewritten shorter while read): no line starts in it.
        (true, None) => "",
        (false, _) => &text[..],
    };
    // A last line without its newline may still be being written (the
    // runtime's stdout is block-buffered): `n_ctx_train = 3` of 32768. It
    // is read whole next time.
    Ok(match text.rfind('\n') {
        Some(nl) => text[..=nl].to_string(),
        None => String::new(),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const ID: &str = "4f1c3b2a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";

    #[test]
    fn docker_lines_give_the_output_and_skip_what_is_not_theirs() {
        let recorded = concat!(
            r#"{"log":"load_tensors:        CUDA0 model buffer size =   604.00 MiB\n","stream":"stderr","time":"2026-11-30T09:00:00.1Z"}"#,
            "\n",
            "not json\n",
            r#"{"stream":"stdout"}"#,
            "\n",
            r#"{"log":"sched_reserve:      CUDA0 compute buffer size =   300.75 MiB","stream":"stderr"}"#,
            "\n",
        );
        let text = docker_log_text(recorded);
        assert_eq!(
            text,
            "load_tensors:        CUDA0 model buffer size =   604.00 MiB\nsched_reserve:      CUDA0 compute buffer size =   300.75 MiB\n"
        );
        let report = crate::models::logs::parse_log(&text);
        assert_eq!(
            report.total(crate::models::logs::BufferKind::Compute, true),
            Some(315_359_232)
        );
        assert_eq!(
            docker_log_text(&format!("{{\"log\":\"{}\"}}\n", "x".repeat(MAX_DOCKER_LINE))),
            ""
        );
    }

    #[test]
    fn a_docker_log_path_comes_from_a_container_id_only() {
        assert_eq!(
            docker_log_path(Path::new("/"), ID),
            Some(PathBuf::from(format!("/var/lib/docker/containers/{ID}/{ID}-json.log")))
        );
        for bad in ["", "../../etc", &"a".repeat(63), &format!("{}/", &ID[..63])] {
            assert_eq!(docker_log_path(Path::new("/"), bad), None, "{bad}");
        }
    }

    /// A recorded tree: /proc/PID/cgroup of a process in a system container
    /// and Docker's folder of it.
    #[test]
    fn a_containers_docker_log_is_read_from_the_tree_and_a_fifo_never_blocks() {
        let tree = tempfile::tempdir().unwrap();
        let (proc_root, fs_root) = (tree.path().join("proc"), tree.path().join("fs"));
        let cgroup = |pid: u32, text: &str| {
            std::fs::create_dir_all(proc_root.join(pid.to_string())).unwrap();
            std::fs::write(proc_root.join(pid.to_string()).join("cgroup"), text).unwrap();
        };
        cgroup(10, &format!("0::/system.slice/docker-{ID}.scope\n"));
        cgroup(
            11,
            &format!("0::/user.slice/user-1000.slice/user@1000.service/app.slice/docker-{ID}.scope\n"),
        );
        cgroup(12, "0::/user.slice/user-1000.slice/session-2.scope\n");
        assert!(docker_log(&proc_root, &fs_root, 10).is_none(), "no folder: no log");
        let folder = fs_root.join("var/lib/docker/containers").join(ID);
        std::fs::create_dir_all(&folder).unwrap();
        let log = folder.join(format!("{ID}-json.log"));
        std::fs::write(
            &log,
            concat!(
                r#"{"log":"sched_reserve:      CUDA0 compute buffer size =   300.75 MiB\n","stream":"stderr"}"#,
                "\n"
            ),
        )
        .unwrap();
        let (source, text) = docker_log(&proc_root, &fs_root, 10).unwrap().unwrap();
        assert_eq!(source, format!("docker:{}", log.display()));
        assert_eq!(text, "sched_reserve:      CUDA0 compute buffer size =   300.75 MiB\n");
        // A rootless container's cgroup names what its user chose; outside
        // any container there is no log.
        assert!(docker_log(&proc_root, &fs_root, 11).is_none());
        assert!(docker_log(&proc_root, &fs_root, 12).is_none());
        assert!(docker_log(&proc_root, &fs_root, 13).is_none());

        std::fs::remove_file(&log).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&log).status().unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        let e = docker_log(&proc_root, &fs_root, 10).unwrap().unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{e}");
        assert!(e.contains("not readable"), "{e}");
    }

    fn fake_journalctl(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("journalctl");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn the_journal_is_asked_for_the_pids_and_gives_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        // Prints its arguments, then a line of Ollama's.
        let tool = fake_journalctl(
            dir.path(),
            "echo \"args: $*\"; echo 'load_tensors:        CUDA0 model buffer size =  4096.00 MiB'",
        );
        let text = journal(&tool, &[4242, 17], JOURNAL_DEADLINE, 1 << 20).unwrap();
        assert!(
            text.starts_with("args: --no-pager --quiet -o cat -n 20000 _PID=4242 _PID=17\n"),
            "{text}"
        );
        assert_eq!(
            crate::models::logs::parse_log(&text).total(crate::models::logs::BufferKind::Model, true),
            Some(4096 << 20)
        );
    }

    #[test]
    fn a_denied_hung_or_flooding_journal_says_so_and_never_waits() {
        let dir = tempfile::tempdir().unwrap();
        let denied = fake_journalctl(
            dir.path(),
            "echo 'No journal files were opened due to insufficient permissions.' >&2; exit 1",
        );
        let e = journal(&denied, &[4242], JOURNAL_DEADLINE, 1 << 20).unwrap_err();
        assert!(e.contains("PID 4242") && e.contains("systemd-journal"), "{e}");

        let hung = fake_journalctl(dir.path(), "sleep 30");
        let started = std::time::Instant::now();
        let e = journal(&hung, &[1], Duration::from_millis(300), 1 << 20).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{e}");
        assert!(e.contains("did not answer"), "{e}");

        let flood = fake_journalctl(dir.path(), "yes 'llama_context: n_ctx = 4096'");
        let text = journal(&flood, &[1], JOURNAL_DEADLINE, 64 << 10).unwrap_or_default();
        assert!(text.len() <= 64 << 10);
    }

    #[test]
    fn only_a_socket_is_journald_s_stream() {
        assert!(is_socket(Path::new("socket:[123456]")));
        assert!(!is_socket(Path::new("pipe:[1]")));
        assert!(!is_socket(Path::new("/var/log/socket:[1]")));
    }

    /// A real llama.cpp server's load log (xllamacpp, Gemma 3 270M,
    /// `-lv 4`), written as Docker's json-file driver writes a container's
    /// stderr, read back from a recorded tree: the same text, so the same
    /// reported buffers as the plain log, each figure the line's own.
    /// Needs GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF
    /// (scripts/test.sh sets them); without them it says SKIPPED.
    #[test]
    fn a_real_servers_log_in_docker_json_file_form_reports_its_buffers() {
        let (Some(python), Some(model)) = (
            std::env::var_os("GPUTASKMAN_TEST_PYTHON"),
            std::env::var_os("GPUTASKMAN_GEMMA_GGUF"),
        ) else {
            eprintln!("SKIPPED: set GPUTASKMAN_TEST_PYTHON and GPUTASKMAN_GEMMA_GGUF (scripts/test.sh does)");
            return;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/llama_server.py");
        let out = std::process::Command::new(python)
            .arg(script)
            .arg("--model")
            .arg(model)
            .args(["--port", &port.to_string(), "-c", "4096", "--exit-after-load"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let plain = String::from_utf8_lossy(&out.stderr).into_owned();

        let tree = tempfile::tempdir().unwrap();
        let (proc_root, fs_root) = (tree.path().join("proc"), tree.path().join("fs"));
        std::fs::create_dir_all(proc_root.join("10")).unwrap();
        std::fs::write(
            proc_root.join("10/cgroup"),
            format!("0::/system.slice/docker-{ID}.scope\n"),
        )
        .unwrap();
        let folder = fs_root.join("var/lib/docker/containers").join(ID);
        std::fs::create_dir_all(&folder).unwrap();
        let json_file: String = plain
            .lines()
            .map(|l| {
                let entry = serde_json::json!({"log": format!("{l}\n"), "stream": "stderr", "time": "2026-12-02T04:00:00.000000001Z"});
                format!("{entry}\n")
            })
            .collect();
        std::fs::write(folder.join(format!("{ID}-json.log")), json_file).unwrap();

        let (source, text) = docker_log(&proc_root, &fs_root, 10).unwrap().unwrap();
        assert_eq!(text, plain.lines().map(|l| format!("{l}\n")).collect::<String>());
        let logs = crate::models::logs::parse_log(&text);
        let reported = crate::models::estimate::reported_from_log(&source, &logs);
        let from_plain = crate::models::estimate::reported_from_log(&source, &crate::models::logs::parse_log(&plain));
        assert_eq!(reported, from_plain);
        assert_eq!(
            reported.source,
            format!("log:docker:{}", folder.join(format!("{ID}-json.log")).display())
        );
        // Each figure is its line's: `<dev> compute buffer size = N MiB`.
        let mib_of = |what: &str| -> u64 {
            plain
                .lines()
                .filter(|l| l.contains(what))
                .filter_map(|l| {
                    l.rsplit('=')
                        .next()?
                        .trim()
                        .strip_suffix("MiB")?
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
                .map(|m| (m * 1048576.0).round() as u64)
                .sum()
        };
        assert!(mib_of("compute buffer size") > 1 << 20, "{plain}");
        assert_eq!(reported.compute_bytes, Some(mib_of("compute buffer size")));
        assert_eq!(reported.weights_bytes, Some(mib_of("model buffer size")));
        assert!(!reported.buffers.is_empty() && reported.buffers.iter().all(|b| !b.device_memory));
    }
}
