//! Opening files named by outside input: regular files only, never blocking.
//!
//! A path taken from a process (its open files, its command line, a config
//! it names) may be a FIFO, a device node or a directory. A plain
//! `File::open` on a FIFO without a writer blocks forever in open(2), and
//! reading `/dev/zero` never ends. [`open`] returns at once for all of them
//! and refuses anything but a regular file; [`read_capped`] also bounds what
//! is read.
//!
//! The flags come from `libc` because their values differ by OS
//! (`O_NONBLOCK` is 0o4000 on Linux x86, 0x4 on macOS and the BSDs).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Opens `path` for reading if it is a regular file (symlinks are followed).
///
/// On unix the open uses `O_NONBLOCK` (so a FIFO without a writer does not
/// block the open) and `O_NOCTTY` (so a terminal never becomes the
/// controlling one), and the type is checked on the opened descriptor
/// (fstat), not on the path, so the file cannot be swapped in between.
/// `O_NONBLOCK` stays set: POSIX and Linux's open(2) say it has no effect on
/// reads of regular files. Anything else is an error of kind `InvalidInput`:
/// "not a regular file: a FIFO" (or "a character device", "a block
/// device", "a socket", "a directory").
pub fn open(path: &Path) -> io::Result<File> {
    let file = open_nonblocking(path)?;
    let file_type = file.metadata()?.file_type();
    if file_type.is_file() {
        Ok(file)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file: {}", describe(file_type)),
        ))
    }
}

/// Reads all of the regular file `path` if it holds at most `cap` bytes.
///
/// A file whose size is over `cap` is refused before anything is read or
/// allocated; at most `cap + 1` bytes are read, so a file that grew past
/// the cap while read (or one whose size the OS reports as 0, such as
/// /proc files) is an error too, never a silently truncated read.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let file = open(path)?;
    let size = file.metadata()?.len();
    if size > cap {
        return Err(over_cap(format!("the file is {size} bytes"), cap));
    }
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(over_cap("the file grew while read".to_string(), cap));
    }
    Ok(buf)
}

fn over_cap(what: String, cap: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what}, over the limit of {cap} bytes"),
    )
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(unix)]
fn describe(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "of an unknown type"
    }
}

#[cfg(not(unix))]
fn describe(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else {
        "a device or other special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_capped_reads_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_capped(&path, 10).unwrap(), b"0123456789");
        let e = read_capped(&path, 9).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(e.to_string(), "the file is 10 bytes, over the limit of 9 bytes");
    }

    #[test]
    fn read_capped_refuses_a_huge_file_before_allocating() {
        // 1 TiB as a sparse hole: allocating its size would abort the test.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.safetensors");
        File::create(&path).unwrap().set_len(1 << 40).unwrap();
        let e = read_capped(&path, 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the file is 1099511627776 bytes, over the limit of 1048576 bytes"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn read_capped_stops_at_the_cap_when_the_size_is_not_known() {
        // /proc files report size 0 but hold more: the cap + 1 read sees it.
        let e = read_capped(Path::new("/proc/self/status"), 16).unwrap_err();
        assert_eq!(e.to_string(), "the file grew while read, over the limit of 16 bytes");
        assert!(read_capped(Path::new("/proc/self/status"), 1 << 20)
            .unwrap()
            .starts_with(b"Name:"));
    }

    #[cfg(unix)]
    #[test]
    fn read_capped_refuses_dev_zero() {
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "not a regular file: a character device");
    }
}
