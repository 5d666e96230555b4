//! Sending a signal to a process the live view shows (`k`). A PID names a
//! process only together with its start time: before the signal goes, the
//! process's start time is read again, and a PID that now belongs to
//! another process (the one shown exited and the PID was reused) is not
//! signalled. PID 0 and 1 (the process group, init) are never signalled.
//! Linux only: elsewhere the view says so and sends nothing.

/// The signals the picker offers, in its order (TERM, the polite one,
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Int,
    Hup,
    Kill,
    Stop,
    Cont,
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::Term,
        Signal::Int,
        Signal::Hup,
        Signal::Kill,
        Signal::Stop,
        Signal::Cont,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
            Signal::Hup => "SIGHUP",
            Signal::Kill => "SIGKILL",
            Signal::Stop => "SIGSTOP",
            Signal::Cont => "SIGCONT",
        }
    }

    /// What it asks of the process, for the picker.
    pub fn meaning(self) -> &'static str {
        match self {
            Signal::Term => "ask it to end (it may clean up)",
            Signal::Int => "as Ctrl-C does",
            Signal::Hup => "hang up (many servers reload)",
            Signal::Kill => "end it now (no clean-up)",
            Signal::Stop => "pause it",
            Signal::Cont => "resume a paused one",
        }
    }

    #[cfg(target_os = "linux")]
    fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Int => libc::SIGINT,
            Signal::Hup => libc::SIGHUP,
            Signal::Kill => libc::SIGKILL,
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
        }
    }
}

/// A process as the snapshot named it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub pid: u32,
    pub start_time: Option<String>,
}

/// What became of one signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// PID 0 or 1, or one whose start time cannot be checked.
    Refused(&'static str),
    /// The PID now names another process, or none.
    Gone,
    PermissionDenied,
    Failed(String),
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Sent => "sent".into(),
            Outcome::Refused(why) => format!("not sent: {why}"),
            Outcome::Gone => "not sent: it exited (its PID is no longer the process shown)".into(),
            Outcome::PermissionDenied => "permission denied".into(),
            Outcome::Failed(e) => format!("failed: {e}"),
        }
    }
}

/// Sends `signal` to `target` if it is still the process shown (its start
/// time read from `proc_root` agrees with the snapshot's).
pub fn send(target: &Target, signal: Signal, proc_root: &std::path::Path) -> Outcome {
    if target.pid <= 1 {
        return Outcome::Refused("PID 0 and 1 are never signalled");
    }
    let Some(shown) = &target.start_time else {
        return Outcome::Refused("its start time is unknown, so its PID may name another process");
    };
    send_checked(target.pid, shown, signal, proc_root)
}

#[cfg(target_os = "linux")]
fn send_checked(pid: u32, shown: &str, signal: Signal, proc_root: &std::path::Path) -> Outcome {
    match super::linux::start_time_of(proc_root, pid) {
        Some(now) if now == shown => {}
        _ => return Outcome::Gone,
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Outcome::Refused("no such PID on this system");
    };
    // SAFETY: kill(2) takes plain integers; the PID is > 1 (checked above),
    // so it names one process, never a group.
    if unsafe { libc::kill(pid, signal.number()) } == 0 {
        return Outcome::Sent;
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EPERM) => Outcome::PermissionDenied,
        Some(libc::ESRCH) => Outcome::Gone,
        _ => Outcome::Failed(e.to_string()),
    }
}

#[cfg(not(target_os = "linux"))]
fn send_checked(_pid: u32, _shown: &str, _signal: Signal, _proc_root: &std::path::Path) -> Outcome {
    Outcome::Refused("signals are sent on Linux only in this version")
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn target(pid: u32) -> Target {
        Target {
            pid,
            start_time: crate::procs::linux::start_time_of(Path::new("/proc"), pid),
        }
    }

    #[test]
    fn a_signal_reaches_the_process_shown_and_no_other() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let shown = target(child.id());
        assert!(shown.start_time.is_some());
        // The same PID with another start time: a reused PID, not signalled.
        let reused = Target {
            start_time: Some("2000-01-01T00:00:00.000Z".into()),
            ..shown.clone()
        };
        assert_eq!(send(&reused, Signal::Kill, Path::new("/proc")), Outcome::Gone);
        assert!(child.try_wait().unwrap().is_none(), "a reused PID was signalled");
        assert_eq!(send(&shown, Signal::Term, Path::new("/proc")), Outcome::Sent);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        // Reaped: its PID names no process now.
        assert_eq!(send(&shown, Signal::Term, Path::new("/proc")), Outcome::Gone);
    }

    #[test]
    fn init_and_unknown_start_times_are_refused() {
        for pid in [0, 1] {
            assert!(matches!(
                send(&target(pid), Signal::Term, Path::new("/proc")),
                Outcome::Refused(_)
            ));
        }
        let unknown = Target {
            pid: std::process::id(),
            start_time: None,
        };
        assert!(matches!(
            send(&unknown, Signal::Term, Path::new("/proc")),
            Outcome::Refused(_)
        ));
    }

    #[test]
    fn another_users_process_is_permission_denied() {
        // Unprivileged, PID 1 is refused before kill(2); find a root-owned
        // process other than init to ask for one.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("SKIPPED: running as root, every signal is permitted");
            return;
        }
        let Some(pid) = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid > 1)
            .find(|pid| {
                use std::os::unix::fs::MetadataExt;
                std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == 0)
            })
        else {
            eprintln!("SKIPPED: no process of root's is visible");
            return;
        };
        assert_eq!(
            send(&target(pid), Signal::Cont, Path::new("/proc")),
            Outcome::PermissionDenied
        );
    }
}
