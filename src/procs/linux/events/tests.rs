use super::*;

/// One netlink message of the process connector: nlmsghdr, cn_msg with
/// the connector's id, proc_event (what, cpu, timestamp), then `data`.
fn message(what: u32, data: &[u32]) -> Vec<u8> {
    let mut m = Vec::new();
    let len = (NLMSG_HDR + CN_MSG + EVENT_DATA + 4 * data.len()) as u32;
    m.extend(len.to_ne_bytes());
    m.extend([0u8; 12]);
    for word in [CN_IDX_PROC, CN_VAL_PROC, 7, 0] {
        m.extend(word.to_ne_bytes());
    }
    m.extend(((EVENT_DATA + 4 * data.len()) as u16).to_ne_bytes());
    m.extend(0u16.to_ne_bytes());
    m.extend(what.to_ne_bytes());
    m.extend(3u32.to_ne_bytes());
    m.extend(123_456_789u64.to_ne_bytes());
    for word in data {
        m.extend(word.to_ne_bytes());
    }
    m
}

#[test]
fn events_are_read_by_process_and_threads_are_left_out() {
    let mut datagram = Vec::new();
    // A process forks 200; a thread 201 of 200 is made; 200 execs; its
    // thread 201 exits; 200 renames itself; 200 exits.
    datagram.extend(message(PROC_EVENT_FORK, &[1, 1, 200, 200]));
    datagram.extend(message(PROC_EVENT_FORK, &[200, 200, 201, 200]));
    datagram.extend(message(PROC_EVENT_EXEC, &[201, 200]));
    datagram.extend(message(PROC_EVENT_EXIT, &[201, 200, 0, 17, 1, 1]));
    datagram.extend(message(PROC_EVENT_COMM, &[200, 200, 0x6c6c_616d, 0, 0, 0]));
    datagram.extend(message(0x4, &[200, 200, 1000, 1000])); // a uid change: not read
    datagram.extend(message(PROC_EVENT_EXIT, &[200, 200, 0, 17, 1, 1]));
    assert_eq!(
        parse_datagram(&datagram),
        vec![Event::Fork(200), Event::Exec(200), Event::Exec(200), Event::Exit(200)]
    );
}

#[test]
fn a_datagram_cut_short_or_forged_ends_the_reading_without_a_panic() {
    let whole = message(PROC_EVENT_FORK, &[1, 1, 300, 300]);
    for cut in 0..whole.len() {
        // A message whose length says more than the datagram holds is
        // not read; one cut inside its fields has no event.
        assert!(parse_datagram(&whole[..cut]).len() <= 1);
    }
    // Another connector's id: not ours.
    let mut other = whole.clone();
    other[NLMSG_HDR..NLMSG_HDR + 4].copy_from_slice(&9u32.to_ne_bytes());
    assert!(parse_datagram(&other).is_empty());
    // A length under the header's: the reading ends.
    let mut short = whole.clone();
    short[..4].copy_from_slice(&3u32.to_ne_bytes());
    assert!(parse_datagram(&short).is_empty());
    assert_eq!(parse_datagram(&whole), vec![Event::Fork(300)]);
}

#[test]
fn the_fold_drops_a_pid_that_came_and_went_and_keeps_one_given_again() {
    let mut p = Pending::default();
    p.fold(Event::Fork(10));
    p.fold(Event::Exec(10));
    p.fold(Event::Exit(10));
    assert!(p.new.is_empty() && p.changed.is_empty());
    assert_eq!(p.gone, [10].into());
    // 10 is given to a new process: the old one goes, the new is read.
    p.fold(Event::Fork(10));
    assert_eq!((p.new.clone(), p.gone.clone()), ([10].into(), [10].into()));
    // Past its bound the fold is lost, and empty.
    for pid in 0..=PENDING_MAX as u32 {
        p.fold(Event::Fork(1000 + pid));
    }
    assert!(p.lost);
    assert!(p.len() < 10);
}

/// As root in the initial PID namespace (CI's machine), the real
/// kernel's events of a real child: its fork, its exec and its exit.
#[test]
fn the_kernel_tells_of_a_child_that_forks_execs_and_exits() {
    let events = match ProcEvents::subscribe() {
        Ok(events) => events,
        Err(e) => {
            // Not root, or in a container: the scanner lists /proc there.
            assert!(
                unsafe { libc::geteuid() } != 0 || std::path::Path::new("/.dockerenv").exists(),
                "root yet no process events: {e}"
            );
            return;
        }
    };
    let mut child = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(50));
    let seen = events.take();
    assert!(seen.new.contains(&pid), "fork: {seen:?}");
    assert!(seen.changed.contains(&pid), "exec: {seen:?}");
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let seen = events.take();
    assert!(seen.gone.contains(&pid), "exit: {seen:?}");
    assert!(!seen.lost);
}
