//! The parsers of gputaskman that read outside input, compiled from `../src`
//! by `#[path]` (gputaskman is a binary crate; tests/diff.rs and
//! tests/record.rs compile its modules the same way). Each module sits at
//! this crate's root, where its `crate::` and `super::` paths resolve as in
//! the binary. Nothing here changes what the parsers do.
#![allow(dead_code, unused_imports, clippy::all)]

#[path = "../../src/snapshot/mod.rs"]
pub mod snapshot;

/// The views' sanitizer: `snapshot::diff` quotes names through it, and the
/// `terminal_text` target tests it.
#[path = "../../src/view/safe_text.rs"]
pub mod safe_text;

/// `collect::drm::sysfs` formats device notes with `crate::view::bytes`; the
/// real one lives in the live view's module tree, which needs the whole
/// binary. The notes' wording is not under test here.
pub mod view {
    pub use super::safe_text;

    pub fn bytes(b: Option<u64>) -> String {
        format!("{b:?} B")
    }
}

#[path = "../../src/collect/drm/fdinfo.rs"]
pub mod fdinfo;
#[path = "../../src/collect/drm/sysfs.rs"]
pub mod sysfs;

#[path = "../../src/models/cmdline.rs"]
pub mod cmdline;
#[path = "../../src/models/logs.rs"]
pub mod logs;
#[path = "../../src/models/runtimes/mod.rs"]
pub mod runtimes;
#[path = "../../src/models/sockets.rs"]
pub mod sockets;

#[path = "../../src/procs/mod.rs"]
pub mod procs;

/// Splits fuzz input into up to `n` parts at NUL bytes (the last part takes
/// the rest), so one input can feed several files or fields.
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.splitn(n, |b| *b == 0).collect();
    parts.resize(n, b"");
    parts
}

/// Bytes as text the way the binary reads files: lossy UTF-8.
pub fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

// Windows counters: PDH counter paths and values (`wddm`), and the WSL host
// bridge's line stream (`wsl`, which pairs contexts through `container`).
#[path = "../../src/collect/container.rs"]
pub mod container;
#[path = "../../src/collect/wddm/mod.rs"]
pub mod wddm;
#[path = "../../src/collect/wsl/mod.rs"]
pub mod wsl;

// Recordings: the zstd/plain codec and the crash-tolerant reader.
#[path = "../../src/record/codec.rs"]
pub mod codec;
#[path = "../../src/record/index.rs"]
pub mod index;
