//! Appending snapshots to a recording: one JSON object (serde_json, one
//! line) per snapshot, handed to the operating system after each one, so a
//! recording cut short (Ctrl-C, a crash, a full disk) reads back up to its
//! last complete line.
//!
//! A new (or empty) file whose name ends in `.zst` gets zstd; a file that
//! already holds data is appended to in the format of its content, see
//! [`RecordWriter::open`]. Each line is compressed with a zstd
//! *flush* (the block ends with the line, the compressor keeps its history,
//! so a snapshot costs only what changed since the last one), and a frame
//! is closed every [`LINES_PER_FRAME`] lines. A file cut anywhere decodes
//! up to the last flushed line: what follows the cut is one incomplete
//! block, which the reader reports and skips. Frames also bound damage: a
//! corrupt spot costs the rest of its frame, and the reader goes on from
//! the next frame. Appending to a file that was cut short starts a new
//! frame; the reader finds it by its magic number.
//!
//! Depends on the snapshot types, serde_json and [`super::codec`] only.

use super::codec::Encoder;
use crate::snapshot::Snapshot;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// zstd level: level 3 is zstd's default and compresses a snapshot of 200
/// processes in well under a millisecond.
pub const ZSTD_LEVEL: i32 = 3;
/// Lines per zstd frame (one minute at the default interval).
pub const LINES_PER_FRAME: usize = 60;

/// Whether a recording at `path` is written with zstd.
pub fn is_zstd_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("zst"))
}

pub struct RecordWriter {
    sink: Sink,
    lines: u64,
}

enum Sink {
    Plain(File),
    Zstd {
        /// None between frames (the next line opens one).
        encoder: Option<Encoder>,
        /// Kept between frames.
        file: Option<File>,
        in_frame: usize,
        lines_per_frame: usize,
    },
}

impl RecordWriter {
    /// Opens `path` for appending (creating it). A new or empty file is
    /// zstd when its name ends in `.zst`; a file with data in it keeps the
    /// format of that data (its first bytes: the zstd magic number or
    /// not), whatever its name. The reader goes by content too, so this is
    /// the one choice that keeps every line, old and new, readable: plain
    /// lines after zstd frames (or frames after plain lines) would be lost
    /// as damage, and refusing would leave a renamed recording impossible
    /// to continue. [`RecordWriter::is_zstd`] says which it is, so the
    /// caller can say so when the name disagrees.
    pub fn open(path: &Path) -> io::Result<RecordWriter> {
        Self::open_with(path, LINES_PER_FRAME)
    }

    /// [`RecordWriter::open`] with another frame length (tests).
    pub fn open_with(path: &Path, lines_per_frame: usize) -> io::Result<RecordWriter> {
        let mut file = OpenOptions::new().create(true).append(true).read(true).open(path)?;
        let mut head = Vec::with_capacity(4);
        (&mut file).take(4).read_to_end(&mut head)?;
        let zstd = if head.is_empty() {
            is_zstd_name(path)
        } else {
            super::codec::starts_as_zstd(&head)
        };
        if zstd {
            super::codec::available()?;
        }
        let sink = if zstd {
            Sink::Zstd {
                encoder: None,
                file: Some(file),
                in_frame: 0,
                lines_per_frame: lines_per_frame.max(1),
            }
        } else {
            // A line cut short by an earlier crash stays a line of its own
            // (which the reader skips), not the head of the next one.
            let len = file.metadata()?.len();
            if len > 0 {
                file.seek(SeekFrom::Start(len - 1))?;
                let mut last = [0u8; 1];
                file.read_exact(&mut last)?;
                if last[0] != b'\n' {
                    file.write_all(b"\n")?;
                }
            }
            Sink::Plain(file)
        };
        Ok(RecordWriter { sink, lines: 0 })
    }

    /// Appends one snapshot as one line and hands it to the OS.
    pub fn append(&mut self, snapshot: &Snapshot) -> io::Result<()> {
        let mut line = serde_json::to_vec(snapshot).map_err(io::Error::other)?;
        line.push(b'\n');
        self.append_line(&line)
    }

    /// Appends bytes that already are one line (ending in `\n`).
    pub fn append_line(&mut self, line: &[u8]) -> io::Result<()> {
        match &mut self.sink {
            Sink::Plain(file) => {
                file.write_all(line)?;
                file.flush()?;
            }
            Sink::Zstd {
                encoder,
                file,
                in_frame,
                lines_per_frame,
            } => {
                if encoder.is_none() {
                    let f = file.take().expect("a file between frames");
                    *encoder = Some(Encoder::new(f, ZSTD_LEVEL)?);
                    *in_frame = 0;
                }
                let e = encoder.as_mut().expect("opened above");
                e.write_flushed(line)?;
                *in_frame += 1;
                if *in_frame >= *lines_per_frame {
                    let f = encoder.take().expect("open").finish()?;
                    *file = Some(f);
                }
            }
        }
        self.lines += 1;
        Ok(())
    }

    /// Whether this writer appends zstd.
    pub fn is_zstd(&self) -> bool {
        matches!(self.sink, Sink::Zstd { .. })
    }

    /// Lines written by this writer.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Closes the open zstd frame (a plain file has nothing to close).
    pub fn finish(self) -> io::Result<()> {
        match self.sink {
            Sink::Plain(mut f) => f.flush(),
            Sink::Zstd { encoder, .. } => match encoder {
                Some(e) => e.finish().map(|_| ()),
                None => Ok(()),
            },
        }
    }
}
