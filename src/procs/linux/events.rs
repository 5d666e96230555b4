//! The kernel's process events: the proc connector (netlink
//! `NETLINK_CONNECTOR`, group `CN_IDX_PROC`; include/uapi/linux/cn_proc.h,
//! drivers/connector/cn_proc.c), which tells of every fork, exec, rename
//! and exit as it happens. With it a live view learns of new, exec'd and
//! gone processes without listing /proc or rereading each process's stat.
//!
//! The kernel sends only to a listener with CAP_NET_ADMIN in the initial
//! user namespace and in the initial PID namespace (cn_proc_mcast_ctl
//! ignores the others silently), and its PIDs are the initial namespace's.
//! So [`ProcEvents::subscribe`] proves the feed works before it is used: it
//! starts a thread of its own and waits for the kernel to tell of it under
//! this process's own PID. Anywhere else (no privilege, a container) the
//! scanner lists /proc instead.
//!
//! One thread reads the socket as events come and folds them into a
//! bounded [`Pending`]; the scanner takes it each sample. A burst larger
//! than the socket's buffer (ENOBUFS) or than the fold's bound marks the
//! fold lost, and the scanner lists /proc once to catch up.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

// include/uapi/linux/connector.h and cn_proc.h.
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 0x0000_0001;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_COMM: u32 = 0x0000_0200;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
/// struct nlmsghdr.
const NLMSG_HDR: usize = 16;
/// struct cn_msg: cb_id (idx, val), seq, ack, len (u16), flags (u16).
const CN_MSG: usize = 20;
/// Where struct proc_event's event_data starts in it: what, cpu,
/// timestamp_ns.
const EVENT_DATA: usize = 16;
/// PIDs a fold holds before it counts as lost: a burst past this is
/// caught up by one listing, and the fold's memory stays bounded.
const PENDING_MAX: usize = 1 << 16;
/// The socket's receive buffer asked for (SO_RCVBUFFORCE as root): each
/// event costs its buffer about a kilobyte, and a machine starting a
/// thousand processes a second sends three thousand events.
const RECEIVE_BUFFER: libc::c_int = 8 << 20;
/// How long [`ProcEvents::subscribe`] waits for the kernel to tell of its
/// own thread.
const PROOF_WAIT: Duration = Duration::from_millis(300);
/// How long the reader waits in recv before it looks whether its
/// subscription was dropped.
const READ_TIMEOUT: libc::timeval = libc::timeval { tv_sec: 1, tv_usec: 0 };

/// What changed since the scanner last looked, by PID (thread group ids:
/// threads' own events are not folded).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Forked: a process the scanner has not read.
    pub new: HashSet<u32>,
    /// Exec'd another program or renamed itself: read whole again.
    pub changed: HashSet<u32>,
    /// Exited. A PID that exited and was given again since is in `new`
    /// too: the scanner drops the old process before it reads the new one.
    pub gone: HashSet<u32>,
    /// Events were lost (the socket's buffer or the fold's bound ran
    /// over, or the socket failed): the scanner must list /proc.
    pub lost: bool,
}

impl Pending {
    fn len(&self) -> usize {
        self.new.len() + self.changed.len() + self.gone.len()
    }

    /// Folds one event in.
    fn fold(&mut self, event: Event) {
        match event {
            Event::Fork(pid) => {
                self.new.insert(pid);
            }
            Event::Exec(pid) => {
                self.changed.insert(pid);
            }
            Event::Exit(pid) => {
                self.new.remove(&pid);
                self.changed.remove(&pid);
                self.gone.insert(pid);
            }
        }
        if self.len() > PENDING_MAX {
            *self = Pending {
                lost: true,
                ..Pending::default()
            };
        }
    }
}

/// One process-level event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Fork(u32),
    /// An exec, or a new name (prctl PR_SET_NAME of the main thread).
    Exec(u32),
    Exit(u32),
}

/// The events of one netlink datagram (several messages may share one).
/// Threads' forks and exits, and events this scanner does not use, are
/// left out; a message cut short ends the reading.
pub fn parse_datagram(bytes: &[u8]) -> Vec<Event> {
    let u32_at = |b: &[u8], at: usize| -> Option<u32> { Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?)) };
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some(len) = u32_at(rest, 0) {
        let len = len as usize;
        if len < NLMSG_HDR || len > rest.len() {
            break;
        }
        let message = &rest[..len];
        // cb_id must be the process connector's.
        let ours =
            u32_at(message, NLMSG_HDR) == Some(CN_IDX_PROC) && u32_at(message, NLMSG_HDR + 4) == Some(CN_VAL_PROC);
        let event = NLMSG_HDR + CN_MSG;
        let data = event + EVENT_DATA;
        let field = |n: usize| u32_at(message, data + 4 * n);
        let parsed = match u32_at(message, event).filter(|_| ours) {
            // parent_pid, parent_tgid, child_pid, child_tgid
            Some(PROC_EVENT_FORK) => field(2)
                .zip(field(3))
                .filter(|(p, t)| p == t)
                .map(|(p, _)| Event::Fork(p)),
            // process_pid, process_tgid: an exec by any thread is its
            // process's (de_thread makes it the leader).
            Some(PROC_EVENT_EXEC) => field(1).map(Event::Exec),
            Some(PROC_EVENT_COMM) => field(0)
                .zip(field(1))
                .filter(|(p, t)| p == t)
                .map(|(p, _)| Event::Exec(p)),
            Some(PROC_EVENT_EXIT) => field(0)
                .zip(field(1))
                .filter(|(p, t)| p == t)
                .map(|(p, _)| Event::Exit(p)),
            _ => None,
        };
        out.extend(parsed);
        // NLMSG_ALIGN: messages are padded to 4 bytes.
        let next = (len + 3) & !3;
        rest = rest.get(next..).unwrap_or_default();
    }
    out
}

/// A subscription to the kernel's process events, read by a thread of
/// its own until this is dropped.
pub struct ProcEvents {
    pending: Arc<Mutex<Pending>>,
}

impl ProcEvents {
    /// Subscribes, and proves the feed speaks of this PID namespace's
    /// processes; an error says why it cannot be used here.
    pub fn subscribe() -> std::io::Result<ProcEvents> {
        let socket = open_socket()?;
        let pending = Arc::new(Mutex::new(Pending::default()));
        let weak = Arc::downgrade(&pending);
        std::thread::Builder::new()
            .name("gputaskman-proc-events".into())
            .spawn(move || read_events(&socket, &weak))?;
        let events = ProcEvents { pending };
        // A child of ours that exits at once: its exit, under the PID
        // fork gave here, proves the kernel speaks of our namespace.
        let pid = fork_and_exit()?;
        let deadline = std::time::Instant::now() + PROOF_WAIT;
        loop {
            if events.pending.lock().is_ok_and(|p| p.gone.contains(&pid)) {
                // What the proof folded is not the scanner's concern.
                events.take();
                return Ok(events);
            }
            if std::time::Instant::now() >= deadline {
                return Err(std::io::Error::other(
                    "the kernel sends this process no process events (no CAP_NET_ADMIN, or another PID namespace)",
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// What changed since the last call.
    pub fn take(&self) -> Pending {
        match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(_) => Pending {
                lost: true,
                ..Pending::default()
            },
        }
    }
}

/// Forks a child that exits at once, waits for it, and gives its PID.
fn fork_and_exit() -> std::io::Result<u32> {
    // SAFETY: the child calls only _exit, which is async-signal-safe (a
    // forked copy of a threaded process may call nothing else); waitpid
    // writes only `status`.
    unsafe {
        match libc::fork() {
            0 => libc::_exit(0),
            p if p < 0 => Err(std::io::Error::last_os_error()),
            p => {
                let mut status = 0;
                libc::waitpid(p, &mut status, 0);
                Ok(p as u32)
            }
        }
    }
}

/// The connector socket, bound to the process events group, listening.
fn open_socket() -> std::io::Result<OwnedFd> {
    let last = std::io::Error::last_os_error;
    // SAFETY: socket takes no pointer; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_CONNECTOR,
        )
    };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: setsockopt reads the value it is given, alive for the call.
    // Without the privilege to force the buffer, the system's maximum
    // applies.
    unsafe {
        let size = &RECEIVE_BUFFER as *const libc::c_int as *const libc::c_void;
        let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        if libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, size, len) != 0 {
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, size, len);
        }
        let timeout = &READ_TIMEOUT as *const libc::timeval as *const libc::c_void;
        let len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, timeout, len);
    }
    // SAFETY: sockaddr_nl is plain data, zeroed then filled; bind reads it.
    let bound = unsafe {
        let mut address: libc::sockaddr_nl = std::mem::zeroed();
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        address.nl_groups = CN_IDX_PROC;
        libc::bind(
            fd,
            &address as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if bound != 0 {
        return Err(last());
    }
    let message = listen_message();
    // SAFETY: send reads `message`, alive for the call.
    if unsafe { libc::send(fd, message.as_ptr().cast(), message.len(), 0) } < 0 {
        return Err(last());
    }
    Ok(socket)
}

/// The request to listen: nlmsghdr, cn_msg { id: { CN_IDX_PROC,
/// CN_VAL_PROC }, seq, ack, len 4, flags }, then the operation.
fn listen_message() -> Vec<u8> {
    let total = (NLMSG_HDR + CN_MSG + 4) as u32;
    let mut m = Vec::with_capacity(total as usize);
    m.extend(total.to_ne_bytes());
    m.extend((libc::NLMSG_DONE as u16).to_ne_bytes());
    m.extend(0u16.to_ne_bytes());
    m.extend(0u32.to_ne_bytes());
    m.extend(std::process::id().to_ne_bytes());
    for word in [CN_IDX_PROC, CN_VAL_PROC, 0, 0] {
        m.extend(word.to_ne_bytes());
    }
    m.extend(4u16.to_ne_bytes());
    m.extend(0u16.to_ne_bytes());
    m.extend(PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

/// Reads the socket, folding each event in, until the subscription is
/// dropped (seen at the next event or within [`READ_TIMEOUT`]).
fn read_events(socket: &OwnedFd, pending: &Weak<Mutex<Pending>>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // SAFETY: recv writes at most buf.len() bytes into buf.
        let n = unsafe { libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let error = usize::try_from(n).is_err().then(std::io::Error::last_os_error);
        let Some(pending) = pending.upgrade() else { return };
        let Ok(mut p) = pending.lock() else { return };
        match error.map(|e| e.raw_os_error()) {
            None => {
                for event in parse_datagram(&buf[..n as usize]) {
                    p.fold(event);
                }
            }
            Some(Some(libc::EINTR | libc::EAGAIN)) => {}
            // The buffer ran over: some events are gone.
            Some(Some(libc::ENOBUFS)) => p.lost = true,
            Some(_) => {
                p.lost = true;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
