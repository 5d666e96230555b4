//! Taking another process's filesystem credentials on this thread only.
//!
//! setfsuid(2), setfsgid(2) and the raw setgroups system call act on the
//! calling thread alone (glibc's setgroups() and setuid() broadcast to
//! every thread; the raw syscall does not). capabilities(7), "Effect of
//! user ID changes on capabilities": a change of the fsuid from 0 to
//! non-zero clears CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER and
//! the other filesystem capabilities from the effective set, and a change
//! back to 0 restores them from the permitted set. So while [`Switched`]
//! lives, the kernel judges this thread's opens as the process's own.

/// This thread's filesystem ids and groups, taken for a process; set back
/// on drop (also when the closure panics and unwinds).
pub struct Switched {
    uid: u32,
    gid: u32,
    groups: Vec<libc::gid_t>,
}

fn set_groups(groups: &[libc::gid_t]) -> std::io::Result<()> {
    // SAFETY: the pointer and length describe a live slice of gid_t.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn own_groups() -> std::io::Result<Vec<libc::gid_t>> {
    // SAFETY: a size of 0 asks only for the count.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut groups = vec![0; n as usize];
    // SAFETY: the buffer holds n entries.
    let got = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    groups.truncate(got as usize);
    Ok(groups)
}

/// setfsuid/setfsgid return the previous id whether or not they succeed
/// (setfsuid(2)); a second call with the same id says whether it took.
fn set_fs_id(set: unsafe extern "C" fn(u32) -> libc::c_int, id: u32, what: &str) -> Result<u32, String> {
    // SAFETY: setfsuid/setfsgid have no memory preconditions.
    let previous = unsafe { set(id) } as u32;
    // SAFETY: as above.
    let now = unsafe { set(id) } as u32;
    match now == id {
        true => Ok(previous),
        false => Err(format!("{what} {id} did not take (it is {now})")),
    }
}

impl Switched {
    pub fn to(uid: u32, gid: u32, groups: &[u32]) -> Result<Switched, String> {
        let saved = own_groups().map_err(|e| format!("getgroups: {e}"))?;
        set_groups(groups).map_err(|e| format!("setgroups: {e}"))?;
        // The guard from here on sets back what was set so far.
        let mut guard = Switched {
            uid: u32::MAX,
            gid: u32::MAX,
            groups: saved,
        };
        guard.gid = set_fs_id(libc::setfsgid, gid, "fsgid")?;
        guard.uid = set_fs_id(libc::setfsuid, uid, "fsuid")?;
        Ok(guard)
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        // The fsuid first: back at 0 it restores the capabilities the
        // group changes need.
        let back = [
            (
                self.uid,
                libc::setfsuid as unsafe extern "C" fn(u32) -> libc::c_int,
                "fsuid",
            ),
            (self.gid, libc::setfsgid, "fsgid"),
        ];
        for (id, set, what) in back.into_iter().filter(|(id, _, _)| *id != u32::MAX) {
            if let Err(e) = set_fs_id(set, id, what) {
                // A thread left with a process's rights would read less,
                // never more; but it must not go on as if nothing happened.
                panic!("could not set this thread's {what} back: {e}");
            }
        }
        if let Err(e) = set_groups(&self.groups) {
            panic!("could not set this thread's groups back: {e}");
        }
    }
}
