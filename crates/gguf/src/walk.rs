//! What one header walk may cost: bytes read, compared with the blocks the
//! file really has on disk, and time.
//!
//! The walk's work is proportional to what the header claims (a string
//! array of 10^11 entries is walked entry by entry), and a sparse file
//! claims any size for free: a 4 TB file with 4 KiB on disk reads back as
//! zeros, and zeros are valid empty strings. A real header lives in blocks
//! the file has, so reading far more bytes than the file holds on disk
//! means the walk is in a hole, and it stops there.

use std::time::{Duration, Instant};

/// Bytes a walk may read past the file's allocated bytes: one 64 KiB window
/// past the last block, files small enough to be stored inline in the inode
/// (st_blocks 0 on ext4 and btrfs), and metadata-only fixtures.
pub const SPARSE_SLACK: u64 = 1 << 20;
/// How many times its allocated bytes a walk may read: file systems that
/// compress (btrfs, ZFS) count the compressed blocks, and a header of
/// strings compresses well. Reading more than this is a walk through holes.
pub const SPARSE_FACTOR: u64 = 4;
/// How long `open` lets one model's walk run: a real header takes
/// milliseconds (Gemma 3's 262,144-token vocabulary about 10 ms).
pub const DEFAULT_WALK_TIME: Duration = Duration::from_secs(10);

/// The limits of one walk. [`Limits::unbounded`] is the in-memory reader's
/// (the fuzzer's `Cursor`); [`Limits::for_file`] a file's.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Bytes the walk may read (its windows, not the ranges it seeks past).
    pub max_read: u64,
    /// Bytes the file has on disk (st_blocks × 512), when known.
    pub on_disk: Option<u64>,
    /// When the walk must have ended; past it the walk stops with an error
    /// (it is cancelled, not left running on a thread nobody waits for).
    pub deadline: Option<Instant>,
}

impl Limits {
    pub fn unbounded() -> Limits {
        Limits {
            max_read: u64::MAX,
            on_disk: None,
            deadline: None,
        }
    }

    /// Limits for a file of `meta`, read until `deadline`, at most
    /// `max_read` bytes.
    pub fn for_file(meta: &std::fs::Metadata, max_read: u64, deadline: Option<Instant>) -> Limits {
        Limits {
            max_read,
            on_disk: allocated_bytes(meta),
            deadline,
        }
    }

    /// Why a walk that has read `read` bytes must stop now, if it must.
    pub(crate) fn exceeded(&self, read: u64, now: Instant) -> Option<Exceeded> {
        if let Some(on_disk) = self.on_disk {
            if read > on_disk.saturating_mul(SPARSE_FACTOR).saturating_add(SPARSE_SLACK) {
                return Some(Exceeded::Sparse { on_disk });
            }
        }
        if read > self.max_read {
            return Some(Exceeded::Read { limit: self.max_read });
        }
        match self.deadline {
            Some(deadline) if now >= deadline => Some(Exceeded::Time),
            _ => None,
        }
    }
}

/// Which limit a walk ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exceeded {
    Sparse { on_disk: u64 },
    Read { limit: u64 },
    Time,
}

/// The bytes a file has on disk: st_blocks counts 512-byte units whatever
/// the file system's block size (stat(2)).
#[cfg(unix)]
pub fn allocated_bytes(meta: &std::fs::Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    Some(meta.blocks().saturating_mul(512))
}

/// Windows reports no allocated size through std: no sparse check there;
/// the byte cap and the deadline still hold.
#[cfg(not(unix))]
pub fn allocated_bytes(_meta: &std::fs::Metadata) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_past_four_times_the_blocks_on_disk_is_in_a_hole() {
        let limits = Limits {
            max_read: 256 << 20,
            on_disk: Some(4096),
            deadline: None,
        };
        let now = Instant::now();
        assert_eq!(limits.exceeded(4 * 4096 + SPARSE_SLACK, now), None);
        assert_eq!(
            limits.exceeded(4 * 4096 + SPARSE_SLACK + 1, now),
            Some(Exceeded::Sparse { on_disk: 4096 })
        );
        // A file with no blocks (inline data) still gets the slack.
        let inline = Limits {
            on_disk: Some(0),
            ..limits
        };
        assert_eq!(inline.exceeded(SPARSE_SLACK, now), None);
        assert!(inline.exceeded(SPARSE_SLACK + 1, now).is_some());
    }

    #[test]
    fn the_byte_cap_and_the_deadline_hold_without_a_block_count() {
        let now = Instant::now();
        let limits = Limits {
            max_read: 1000,
            on_disk: None,
            deadline: Some(now + Duration::from_secs(1)),
        };
        assert_eq!(limits.exceeded(1000, now), None);
        assert_eq!(limits.exceeded(1001, now), Some(Exceeded::Read { limit: 1000 }));
        assert_eq!(limits.exceeded(0, now + Duration::from_secs(1)), Some(Exceeded::Time));
        assert_eq!(
            Limits::unbounded().exceeded(u64::MAX, now + Duration::from_secs(3600)),
            None
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_sparse_file_has_fewer_bytes_on_disk_than_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.gguf");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(10 << 30).unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(meta.len(), 10 << 30);
        assert!(
            allocated_bytes(&meta).unwrap() < 1 << 20,
            "{:?}",
            allocated_bytes(&meta)
        );
        std::fs::write(&path, vec![1u8; 64 << 10]).unwrap();
        let written = allocated_bytes(&std::fs::metadata(&path).unwrap()).unwrap();
        assert!(written >= 64 << 10, "{written}");
    }
}
