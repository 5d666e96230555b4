//! Whether a process could itself read a file it names.
//!
//! gputaskman often runs as root, and every path a process names (its
//! `-m`, `--log-file`, its API's `model_path`, vLLM's model folder) is
//! opened by the monitor. Opened as root, a name of another user's file
//! (`/etc/shadow`, a 0600 model) would have root read it on the naming
//! process's behalf and show what it found: a confused deputy. So a named
//! file is opened only when the naming process's own credentials could
//! open it, judged as the kernel judges an open (path_resolution(7),
//! fs/namei.c `may_lookup` and `generic_permission`): search permission on
//! every directory walked, symlinks followed as the walk meets them, read
//! permission on the file, with the process's fsuid, fsgid and
//! supplementary groups from /proc/PID/status. A file the process maps or
//! holds open is proof by itself that it can read it.
//!
//! Linux only (the credentials come from /proc); elsewhere nothing is
//! checked and files are opened with the monitor's own rights.

#[cfg(target_os = "linux")]
pub use linux::{Access, Credentials, Want};

#[cfg(target_os = "linux")]
mod fs_creds;

#[cfg(not(target_os = "linux"))]
pub use other::{Access, Want};

#[cfg(target_os = "linux")]
mod linux {
    use gguf::regular_file;
    use std::collections::{HashSet, VecDeque};
    use std::ffi::OsString;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Component, Path, PathBuf};

    /// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (include/uapi/linux/capability.h):
    /// either lets a process read any file and search any directory.
    const DAC_CAPS: u64 = 1 << 1 | 1 << 2;
    /// The most of /proc/PID/status read (a few KiB in practice).
    const MAX_STATUS: u64 = 64 << 10;
    /// The most symlinks one walk follows: the kernel's MAXSYMLINKS
    /// (include/linux/namei.h), beyond which open(2) fails with ELOOP.
    const MAX_SYMLINKS: usize = 40;
    /// Open descriptors of one process looked at, at most (a server may
    /// hold tens of thousands of sockets; a model file is among the first).
    const MAX_FDS: usize = 16384;

    /// What the kernel checks a file access against.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Credentials {
        pub fsuid: u32,
        pub fsgid: u32,
        pub groups: Vec<u32>,
        /// CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH in effect, in the
        /// monitor's own user namespace (a capability held in a namespace
        /// the process made for itself grants nothing over the host's files).
        pub bypasses_permissions: bool,
    }

    impl Credentials {
        /// From the text of /proc/PID/status: `Uid:`/`Gid:` give real,
        /// effective, saved and filesystem ids (proc(5)), the fourth is the
        /// one file access uses; `Groups:`; `CapEff:` in hex.
        /// `same_user_namespace`: whether the process shares the monitor's.
        pub fn parse_status(text: &str, same_user_namespace: bool) -> Result<Credentials, String> {
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                    .ok_or_else(|| format!("no {name} line"))
            };
            let fs_id = |name: &str| -> Result<u32, String> {
                field(name)?
                    .split_whitespace()
                    .nth(3)
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("{name} has no filesystem id"))
            };
            let groups = field("Groups")?
                .split_whitespace()
                .map(|g| g.parse().map_err(|_| format!("Groups: {g:?} is not a group id")))
                .collect::<Result<Vec<u32>, String>>()?;
            let cap_eff = u64::from_str_radix(field("CapEff")?.trim(), 16).map_err(|e| format!("CapEff: {e}"))?;
            Ok(Credentials {
                fsuid: fs_id("Uid")?,
                fsgid: fs_id("Gid")?,
                groups,
                bypasses_permissions: same_user_namespace && cap_eff & DAC_CAPS != 0,
            })
        }

        /// The credentials of process `pid` under the proc root `root`.
        pub fn of_process(root: &Path, pid: u32) -> Result<Credentials, String> {
            let dir = root.join(pid.to_string());
            let status = regular_file::read_capped(&dir.join("status"), MAX_STATUS)
                .map_err(|e| format!("its credentials are not readable ({e})"))?;
            let ns = |d: &Path| std::fs::read_link(d.join("ns/user")).ok();
            let same_ns = ns(&dir).is_some() && ns(&dir) == ns(&root.join("self"));
            Credentials::parse_status(&String::from_utf8_lossy(&status), same_ns)
        }

        /// Whether these credentials get `bits` (4 read, 1 search/execute)
        /// on a file of `meta`: the owner's class if they own it, else the
        /// group's if they are in its group, else the others' — one class,
        /// as generic_permission does.
        fn allowed(&self, meta: &std::fs::Metadata, bits: u32) -> bool {
            if self.bypasses_permissions {
                return true;
            }
            let mode = meta.mode();
            let class = if meta.uid() == self.fsuid {
                mode >> 6
            } else if meta.gid() == self.fsgid || self.groups.contains(&meta.gid()) {
                mode >> 3
            } else {
                mode
            };
            class & bits == bits
        }
    }

    /// What the process would do with the path.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Want {
        /// Open a file and read it.
        Read,
        /// List a directory (read and search).
        List,
    }

    /// Whether `creds` may open `path` for `want`, walking it as the
    /// kernel does; the error says where the walk was refused. `path` must
    /// be absolute (relative ones are resolved against the process's cwd
    /// before). A directory the walk may not search is never looked into,
    /// so the answer tells no more than the process could learn itself.
    pub fn may_open(creds: &Credentials, path: &Path, want: Want) -> Result<(), String> {
        if !path.is_absolute() {
            return Err(format!("{} is not an absolute path", path.display()));
        }
        let mut todo: VecDeque<OsString> = VecDeque::new();
        push_front(&mut todo, path);
        let mut at = PathBuf::from("/");
        let mut links = 0;
        while let Some(name) = todo.pop_front() {
            let dir = std::fs::metadata(&at).map_err(|e| format!("{}: {e}", at.display()))?;
            if !dir.is_dir() {
                return Err(format!("{} is not a directory", at.display()));
            }
            if !creds.allowed(&dir, 1) {
                return Err(format!("no search permission on {}", at.display()));
            }
            if name == ".." {
                at.pop();
                continue;
            }
            let next = at.join(&name);
            let meta = std::fs::symlink_metadata(&next).map_err(|e| format!("{}: {e}", next.display()))?;
            if meta.file_type().is_symlink() {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(format!("more than {MAX_SYMLINKS} symlinks from {}", path.display()));
                }
                let target = std::fs::read_link(&next).map_err(|e| format!("{}: {e}", next.display()))?;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                push_front(&mut todo, &target);
            } else {
                at = next;
            }
        }
        let meta = std::fs::metadata(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        let (bits, what) = match want {
            Want::Read => (4, "read"),
            Want::List => (4 | 1, "list"),
        };
        match creds.allowed(&meta, bits) && !acl_decides(&meta, &at, creds) {
            true => Ok(()),
            false => Err(format!("no permission to {what} {}", at.display())),
        }
    }

    /// Puts the components of `path` before those still to walk (`.` and
    /// the root are no step; `..` is one).
    fn push_front(todo: &mut VecDeque<OsString>, path: &Path) {
        for c in path.components().rev() {
            match c {
                Component::Normal(n) => todo.push_front(n.to_os_string()),
                Component::ParentDir => todo.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    }

    /// A POSIX ACL (acl(5)) turns the group bits into the mask of named
    /// entries this check does not read: the access was granted through
    /// the group class on a file that has one, so it is not judged (and is
    /// refused). The owner's and others' classes are not masked.
    fn acl_decides(meta: &std::fs::Metadata, path: &Path, creds: &Credentials) -> bool {
        if creds.bypasses_permissions || meta.uid() == creds.fsuid {
            return false;
        }
        let in_group = meta.gid() == creds.fsgid || creds.groups.contains(&meta.gid());
        let others = meta.mode() & 4 != 0;
        if !in_group && others {
            return false;
        }
        has_acl(path)
    }

    fn has_acl(path: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return true;
        };
        // SAFETY: NUL-terminated strings; a null buffer of size 0 asks
        // only for the value's size.
        let size = unsafe {
            libc::getxattr(
                c_path.as_ptr(),
                c"system.posix_acl_access".as_ptr(),
                std::ptr::null_mut(),
                0,
            )
        };
        size >= 0
    }

    /// What one process may have opened for it: its credentials, and the
    /// files it holds open or maps (proof by themselves).
    pub struct Access {
        creds: Result<Credentials, String>,
        /// Device and inode of every file it holds open or maps.
        held: HashSet<(u64, u64)>,
        /// The paths its maps name, trusted as names only where the files
        /// themselves could not be read (`map_files` needs CAP_SYS_ADMIN:
        /// a monitor without it opens nothing the user running it could
        /// not).
        mapped: Option<HashSet<PathBuf>>,
    }

    impl Access {
        pub fn of_process(root: &Path, pid: u32, mapped_files: &[String]) -> Access {
            let dir = root.join(pid.to_string());
            let mut held = held_open(&dir.join("fd"));
            // A path in /proc/PID/maps is the process's mount namespace's:
            // one in a namespace of its own (`unshare -Urm`, a container)
            // may print `/root/secret.gguf` for a file of its own, and the
            // same string here names root's. map_files links to the files
            // themselves, so a mapped path counts only when it is one of
            // them here.
            let maps = held_open(&dir.join("map_files"));
            let mapped = maps
                .is_empty()
                .then(|| mapped_files.iter().map(PathBuf::from).collect());
            held.extend(maps);
            Access {
                creds: Credentials::of_process(root, pid),
                held,
                mapped,
            }
        }

        #[cfg(test)]
        pub fn with(creds: Result<Credentials, String>, held: &[&Path], mapped: &[&Path]) -> Access {
            Access {
                creds,
                held: held.iter().filter_map(|p| file_key(p)).collect(),
                mapped: Some(mapped.iter().map(|p| p.to_path_buf()).collect()),
            }
        }

        /// Whether the process maps `path` or holds it open: the file that
        /// path names here, not a name its maps print.
        pub fn holds(&self, path: &Path) -> bool {
            self.mapped.as_ref().is_some_and(|m| m.contains(path))
                || file_key(path).is_some_and(|k| self.held.contains(&k))
        }

        /// Runs `f` on this thread with the process's filesystem
        /// credentials (fs_creds), so the kernel itself refuses what the
        /// process could not open: no check-then-open race, and split parts
        /// or symlinks met while `f` runs are judged the same way. Runs it
        /// as the monitor when the monitor is not root, the process has the
        /// monitor's fsuid, or it bypasses permissions itself. Err (for a
        /// note) when its credentials are unknown or the switch failed.
        pub fn as_process<R>(&self, f: impl FnOnce() -> R) -> Result<R, String> {
            let creds = self.creds.as_ref().map_err(|e| format!("not opened: {e}"))?;
            if creds.bypasses_permissions {
                return Ok(f());
            }
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                // Not root, the switch is not possible, and a monitor given
                // CAP_DAC_* (setcap, a container) keeps them through it:
                // the kernel would not refuse for the process, and only the
                // walk's check-then-open would stand.
                if monitor_bypasses_permissions() {
                    return Err("not opened: the monitor holds CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH without being root, so it cannot open a file with only the process's rights".into());
                }
                return Ok(f());
            }
            if creds.fsuid == 0 {
                return Ok(f());
            }
            let _guard = super::fs_creds::Switched::to(creds.fsuid, creds.fsgid, &creds.groups)
                .map_err(|e| format!("not opened: could not take the process's credentials: {e}"))?;
            Ok(f())
        }

        /// Ok when the process holds `path` or its credentials may open it
        /// for `want`; else why not, for a note.
        pub fn check(&self, path: &Path, want: Want) -> Result<(), String> {
            if want == Want::Read && self.holds(path) {
                return Ok(());
            }
            let creds = self.creds.as_ref().map_err(|e| format!("not opened: {e}"))?;
            may_open(creds, path, want).map_err(|why| {
                format!(
                    "not opened: the process (fsuid {}, fsgid {}) could not {} it itself: {why}",
                    creds.fsuid,
                    creds.fsgid,
                    match want {
                        Want::Read => "read",
                        Want::List => "list",
                    }
                )
            })
        }
    }

    /// Whether this monitor itself holds CAP_DAC_OVERRIDE or
    /// CAP_DAC_READ_SEARCH (read once: a process's capabilities do not
    /// grow by themselves); unknown counts as holding them.
    fn monitor_bypasses_permissions() -> bool {
        static HOLDS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HOLDS.get_or_init(
            || match Credentials::of_process(Path::new("/proc"), std::process::id()) {
                Ok(me) => me.bypasses_permissions,
                Err(_) => true,
            },
        )
    }

    fn file_key(path: &Path) -> Option<(u64, u64)> {
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }

    /// Device and inode of each file the process has open or maps
    /// (/proc/PID/fd/N, /proc/PID/map_files/RANGE: stat follows the link
    /// to the file itself).
    fn held_open(fd_dir: &Path) -> HashSet<(u64, u64)> {
        let Ok(entries) = std::fs::read_dir(fd_dir) else {
            return HashSet::new();
        };
        entries
            .flatten()
            .take(MAX_FDS)
            .filter_map(|e| file_key(&e.path()))
            .collect()
    }
}

#[cfg(not(target_os = "linux"))]
mod other {
    use std::path::Path;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Want {
        Read,
        List,
    }

    /// Without /proc the naming process's credentials are not known: every
    /// file is opened with the monitor's own rights, and an API's word is
    /// taken as it was.
    pub struct Access;

    impl Access {
        pub fn of_process(_root: &Path, _pid: u32, _mapped_files: &[String]) -> Access {
            Access
        }

        pub fn holds(&self, _path: &Path) -> bool {
            true
        }

        pub fn check(&self, _path: &Path, _want: Want) -> Result<(), String> {
            Ok(())
        }

        pub fn as_process<R>(&self, f: impl FnOnce() -> R) -> Result<R, String> {
            Ok(f())
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::linux::may_open;
    use super::*;
    use std::os::unix::fs::{chown, symlink, PermissionsExt};
    use std::path::Path;

    /// /proc/PID/status of a process whose filesystem ids differ from its
    /// real ones (a setfsuid caller), trimmed.
    const STATUS: &str = "Name:\tllama-server\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t65534\nGid:\t1000\t1000\t1000\t65533\nFDSize:\t64\nGroups:\t4 24 27 \nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";

    fn nobody(groups: Vec<u32>) -> Credentials {
        Credentials {
            fsuid: 65534,
            fsgid: 65534,
            groups,
            bypasses_permissions: false,
        }
    }

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn credentials_are_the_filesystem_ids_groups_and_dac_capabilities() {
        let creds = Credentials::parse_status(STATUS, true).unwrap();
        assert_eq!(
            creds,
            Credentials {
                fsuid: 65534,
                fsgid: 65533,
                groups: vec![4, 24, 27],
                bypasses_permissions: false
            }
        );
        let root = STATUS.replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff");
        assert!(Credentials::parse_status(&root, true).unwrap().bypasses_permissions);
        // The same capabilities in a user namespace of its own grant nothing here.
        assert!(!Credentials::parse_status(&root, false).unwrap().bypasses_permissions);
        // CAP_DAC_READ_SEARCH alone (bit 2) is enough to read.
        let reader = STATUS.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000000004");
        assert!(Credentials::parse_status(&reader, true).unwrap().bypasses_permissions);
        for broken in [
            STATUS.replace("Uid:\t1000\t1000\t1000\t65534", "Uid:\t1000"),
            STATUS.replace("Groups:\t4 24 27 ", "Groups:\tfour"),
            STATUS.replace("CapEff:\t0000000000000000\n", ""),
            String::new(),
        ] {
            assert!(Credentials::parse_status(&broken, true).is_err(), "{broken}");
        }
        let own = Credentials::of_process(Path::new("/proc"), std::process::id()).unwrap();
        // SAFETY: getuid has no preconditions.
        assert_eq!(own.fsuid, unsafe { libc::getuid() });
    }

    #[test]
    fn the_walk_needs_search_on_every_directory_and_read_on_the_file() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: needs root to make files another user cannot read");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        mode(d, 0o755);
        let secret = d.join("secret.gguf");
        std::fs::write(&secret, b"GGUF").unwrap();
        mode(&secret, 0o600);
        let public = d.join("public.gguf");
        std::fs::write(&public, b"GGUF").unwrap();
        mode(&public, 0o644);
        let closed = d.join("closed");
        std::fs::create_dir(&closed).unwrap();
        mode(&closed, 0o700);
        std::fs::write(closed.join("inside.gguf"), b"GGUF").unwrap();
        mode(&closed.join("inside.gguf"), 0o644);
        let who = nobody(vec![]);

        assert_eq!(may_open(&who, &public, Want::Read), Ok(()));
        let e = may_open(&who, &secret, Want::Read).unwrap_err();
        assert_eq!(e, format!("no permission to read {}", secret.display()));
        let e = may_open(&who, &closed.join("inside.gguf"), Want::Read).unwrap_err();
        assert_eq!(e, format!("no search permission on {}", closed.display()));
        // A file that does not exist behind a closed directory is refused
        // the same way: the walk never looks inside.
        let e = may_open(&who, &closed.join("missing.gguf"), Want::Read).unwrap_err();
        assert_eq!(e, format!("no search permission on {}", closed.display()));
        assert!(may_open(&who, Path::new("/etc/shadow"), Want::Read).is_err());
        assert_eq!(may_open(&who, Path::new("/etc/hostname"), Want::Read), Ok(()));

        // Symlinks are followed as they are met: to the secret, refused;
        // through `..` out of the closed directory, allowed.
        let link = d.join("link.gguf");
        symlink(&secret, &link).unwrap();
        assert_eq!(
            may_open(&who, &link, Want::Read).unwrap_err(),
            format!("no permission to read {}", secret.display())
        );
        let relative = d.join("rel.gguf");
        symlink("closed/../public.gguf", &relative).unwrap();
        assert_eq!(
            may_open(&who, &relative, Want::Read).unwrap_err(),
            format!("no search permission on {}", closed.display()),
            "`..` after a closed directory still needs its search permission"
        );
        let around = d.join("around.gguf");
        symlink("./public.gguf", &around).unwrap();
        assert_eq!(may_open(&who, &around, Want::Read), Ok(()));
        let lp = d.join("loop.gguf");
        symlink(&lp, &lp).unwrap();
        assert!(may_open(&who, &lp, Want::Read)
            .unwrap_err()
            .contains("more than 40 symlinks"));

        // The group's class: a member reads a 0640 file of its group.
        chown(&secret, Some(0), Some(4242)).unwrap();
        mode(&secret, 0o640);
        assert_eq!(may_open(&nobody(vec![4242]), &secret, Want::Read), Ok(()));
        assert!(may_open(&who, &secret, Want::Read).is_err());
        // The owner's class alone counts for the owner, even if others may.
        chown(&public, Some(65534), None).unwrap();
        mode(&public, 0o044);
        assert!(may_open(&who, &public, Want::Read).is_err());
        // A folder is listed with read and search on it.
        assert_eq!(may_open(&who, d, Want::List), Ok(()));
        assert!(may_open(&who, &closed, Want::List).is_err());
        assert!(may_open(&who, Path::new("relative.gguf"), Want::Read).is_err());
        let root = Credentials {
            bypasses_permissions: true,
            ..who.clone()
        };
        assert_eq!(may_open(&root, &closed.join("inside.gguf"), Want::Read), Ok(()));
    }

    /// A GGUF v3 header with `split.count` and `split.no` (u32) and no
    /// tensors.
    fn split_part(no: u32, count: u32) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        for (key, v) in [("split.no", no), ("split.count", count)] {
            b.extend_from_slice(&(key.len() as u64).to_le_bytes());
            b.extend_from_slice(key.as_bytes());
            b.extend_from_slice(&4u32.to_le_bytes());
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// A 0600 root file inside a 0700 root folder, in a 0755 tempdir.
    fn root_only(d: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        mode(d, 0o755);
        let closed = d.join("closed");
        std::fs::create_dir_all(&closed).unwrap();
        mode(&closed, 0o700);
        let secret = closed.join(name);
        std::fs::write(&secret, bytes).unwrap();
        mode(&secret, 0o600);
        secret
    }

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            eprintln!("SKIPPED: needs root to take another user's credentials");
        }
        root
    }

    #[test]
    fn as_the_process_the_kernel_refuses_what_it_could_not_open_and_the_thread_gets_its_rights_back() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = root_only(dir.path(), "secret.gguf", b"GGUF");
        let access = Access::with(Ok(nobody(vec![])), &[], &[]);
        // The race: the path is checked while it names a file nobody may
        // read, then swapped for a symlink to the secret before the open.
        let public = dir.path().join("public.gguf");
        std::fs::write(&public, b"GGUF").unwrap();
        mode(&public, 0o644);
        assert_eq!(access.check(&public, Want::Read), Ok(()));
        std::fs::remove_file(&public).unwrap();
        symlink(&secret, &public).unwrap();
        let opened = access.as_process(|| std::fs::File::open(&public).map(|_| ())).unwrap();
        assert_eq!(opened.unwrap_err().raw_os_error(), Some(libc::EACCES));
        let inside = access.as_process(|| std::fs::read(&secret)).unwrap();
        assert_eq!(inside.unwrap_err().raw_os_error(), Some(libc::EACCES));
        // After it, the same thread is root again.
        assert_eq!(std::fs::read(&secret).unwrap(), b"GGUF");
        // A panic inside sets the credentials back as it unwinds.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            access.as_process(|| panic!("inside")).unwrap();
        }));
        assert!(caught.is_err());
        assert_eq!(std::fs::read(&secret).unwrap(), b"GGUF");
        // Unknown credentials: nothing is run.
        let unknown = Access::with(Err("its credentials are not readable".into()), &[], &[]);
        assert!(unknown.as_process(|| ()).unwrap_err().contains("not readable"));
    }

    #[test]
    fn a_split_part_that_links_to_a_root_only_file_is_not_read_for_the_process() {
        if !is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = root_only(dir.path(), "secret.gguf", &split_part(1, 2));
        let first = dir.path().join("m-00001-of-00002.gguf");
        std::fs::write(&first, split_part(0, 2)).unwrap();
        mode(&first, 0o644);
        symlink(&secret, dir.path().join("m-00002-of-00002.gguf")).unwrap();
        let access = Access::with(Ok(nobody(vec![])), &[], &[]);
        assert_eq!(access.check(&first, Want::Read), Ok(()));
        let e = access
            .as_process(|| gguf::open(&first))
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("ermission denied") && e.contains("00002"), "{e}");
        // As root the same walk reads part 2: it is the switch that refuses it.
        assert_eq!(gguf::open(&first).unwrap().parts().len(), 2);
    }

    #[test]
    fn a_file_the_process_holds_is_proof_by_itself() {
        let dir = tempfile::tempdir().unwrap();
        let held = dir.path().join("held.gguf");
        std::fs::write(&held, b"GGUF").unwrap();
        let other = dir.path().join("other.gguf");
        std::fs::write(&other, b"GGUF").unwrap();
        let unknown = Access::with(Err("its credentials are not readable".into()), &[&held], &[]);
        assert_eq!(unknown.check(&held, Want::Read), Ok(()));
        assert!(unknown.holds(&held));
        assert!(!unknown.holds(&other));
        assert_eq!(
            unknown.check(&other, Want::Read).unwrap_err(),
            "not opened: its credentials are not readable"
        );
        let mapped = Access::with(Err("x".into()), &[], &[&other]);
        assert!(mapped.holds(&other));
        // Our own open files, as /proc shows them.
        let file = std::fs::File::open(&other).unwrap();
        let own = Access::of_process(Path::new("/proc"), std::process::id(), &[]);
        assert!(own.holds(&other));
        drop(file);
    }

    /// A path the maps print counts only when it names, here, a file the
    /// process maps: one in a mount namespace of its own can print
    /// `/root/secret.gguf` for a file of its own.
    #[test]
    fn a_mapped_path_counts_only_for_the_file_the_process_maps() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: map_files needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mapped = dir.path().join("mine.gguf");
        let other = dir.path().join("secret.gguf");
        std::fs::write(&mapped, vec![7u8; 4096]).unwrap();
        std::fs::write(&other, vec![8u8; 4096]).unwrap();
        let file = std::fs::File::open(&mapped).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a private read-only mapping of an open file's first page,
        // unmapped below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        drop(file);
        let names = [mapped.display().to_string(), other.display().to_string()];
        let access = Access::of_process(Path::new("/proc"), std::process::id(), &names);
        let (holds_mapped, holds_other) = (access.holds(&mapped), access.holds(&other));
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(addr, 4096) };
        assert!(holds_mapped);
        assert!(
            !holds_other,
            "a name the maps printed counted for a file the process does not map"
        );
    }
}
