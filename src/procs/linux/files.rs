//! What a process's cmdline and maps files say, read with caps: a
//! process writes its argv, and its maps can be huge.

use std::path::Path;

/// The most of a command line that is read. The kernel lets a process with
/// a large stack limit carry far more; argv past this is not needed to
/// classify it or to find its model, and a hostile one must not cost RAM.
pub(super) const MAX_CMDLINE: u64 = 256 << 10;
/// The most of /proc/PID/maps that is read: 65,530 mappings (the default
/// vm.max_map_count) of 4 KiB paths would be 270 MB.
pub(super) const MAX_MAPS: u64 = 8 << 20;
/// The most distinct mapped files kept for a process.
pub(super) const MAX_MAPPED_FILES: usize = 4096;

/// A process's argv from /proc/PID/cmdline, read as bytes and decoded
/// lossily (one invalid byte must not hide the process's runtime), at most
/// [`MAX_CMDLINE`] bytes; true when it was cut.
pub(super) fn read_cmdline(path: &Path) -> std::io::Result<(Vec<String>, bool)> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path)?, MAX_CMDLINE + 1),
        &mut bytes,
    )?;
    let cut = bytes.len() as u64 > MAX_CMDLINE;
    bytes.truncate(MAX_CMDLINE as usize);
    Ok((split_cmdline(&bytes), cut))
}

/// NUL-separated arguments (the last NUL is a terminator), lossily.
/// Trailing NULs are padding, not empty arguments: a process that renames
/// itself with setproctitle (vLLM's `VLLM::EngineCore`, `VLLM::Worker`)
/// writes its title over the start of the argv area and fills the rest
/// with NULs, which the kernel still returns (fs/proc/base.c
/// get_mm_cmdline reads up to the end of the area when its last byte is
/// NUL), hundreds of them. A real trailing `""` argument is dropped too.
pub fn split_cmdline(bytes: &[u8]) -> Vec<String> {
    let Some(last) = bytes.iter().rposition(|b| *b != 0) else {
        return Vec::new();
    };
    let bytes = &bytes[..=last];
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The file-backed paths of a /proc/PID/maps text, each once, in order.
/// Read here rather than by procfs's parser, which panics on a mapped file
/// whose path starts with `/SYSV` but is no SysV segment name (`/SYSV`,
/// `/SYSVé`: found by fuzz/ proc_files). SysV segments, anonymous and
/// `[special]` mappings are not files.
pub fn mapped_paths(text: &[u8]) -> Vec<String> {
    fn trim_spaces(b: &[u8]) -> &[u8] {
        &b[b.iter().position(|c| *c != b' ').unwrap_or(b.len())..]
    }
    // A set, not a search of the list: a Python process maps hundreds of
    // files, and a search per line was most of the first look at it.
    let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    let mut files: Vec<String> = Vec::new();
    for line in text.split(|b| *b == b'\n') {
        // address perms offset dev inode, then the path (spaces and all).
        let mut rest = line;
        for _ in 0..5 {
            rest = trim_spaces(rest);
            rest = &rest[rest.iter().position(|b| *b == b' ').unwrap_or(rest.len())..];
        }
        let path = trim_spaces(rest);
        if !path.starts_with(b"/") || path.starts_with(b"/SYSV") {
            continue;
        }
        if seen.insert(path) {
            files.push(String::from_utf8_lossy(path).into_owned());
        }
    }
    files
}

/// An I/O error as a note says it.
pub(super) fn brief_io(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::NotFound => "process exited".into(),
        _ => e.to_string(),
    }
}
