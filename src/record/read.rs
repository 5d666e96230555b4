//! Reading a recording back: JSON lines, plain or zstd (found by the
//! file's magic number, whatever its name).
//!
//! Bounded and forgiving: a line over [`MAX_LINE`] bytes is skipped without
//! being held in memory, a line that is not a snapshot (garbage, a
//! truncated last line, another schema version) is skipped, and each skip
//! is said in [`Recording::skipped`]. Damaged zstd data costs the rest of
//! its frame; reading goes on from the next frame. Nothing here panics on
//! what a file holds. Lines are parsed on every core.
//!
//! Depends on the snapshot types, serde_json and zstd only.

use crate::snapshot::{Snapshot, SCHEMA_VERSION};
use anyhow::Context as _;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Mutex;

/// A line longer than this is skipped.
pub const MAX_LINE: usize = 64 << 20;
/// At most this many skip notes are kept; the rest are counted.
const MAX_NOTES: usize = 100;
pub(crate) const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// Lines are handed to the parsers in batches of about this many bytes.
const BATCH_BYTES: usize = 4 << 20;

/// A recording read back.
#[derive(Debug, Default, Clone)]
pub struct Recording {
    /// In file order.
    pub snapshots: Vec<Snapshot>,
    /// What was skipped and why, e.g. `line 3601: incomplete (no newline,
    /// 812 bytes): the recording was cut short`.
    pub skipped: Vec<String>,
}

/// One line for the parsers: its number (1-based), its bytes, and whether
/// it is the last one and has no newline.
type Item = (u64, Vec<u8>, bool);

/// Splits decoded bytes into lines and hands them out in batches.
struct Lines {
    buf: Vec<u8>,
    /// The number of the line being gathered.
    line: u64,
    /// Inside a line over [`MAX_LINE`]: drop bytes up to its newline.
    overlong: bool,
    batch: Vec<Item>,
    batch_bytes: usize,
    tx: Option<SyncSender<Vec<Item>>>,
    notes: Vec<(u64, String)>,
}

impl Lines {
    fn new(tx: SyncSender<Vec<Item>>) -> Lines {
        Lines {
            buf: Vec::new(),
            line: 1,
            overlong: false,
            batch: Vec::new(),
            batch_bytes: 0,
            tx: Some(tx),
            notes: Vec::new(),
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let newline = data.iter().position(|&b| b == b'\n');
            let (part, rest, ends) = match newline {
                Some(i) => (&data[..i], &data[i + 1..], true),
                None => (data, &data[data.len()..], false),
            };
            data = rest;
            if !self.overlong {
                if self.buf.len() + part.len() > MAX_LINE {
                    self.notes.push((
                        self.line,
                        format!("line {}: longer than {} MiB; skipped", self.line, MAX_LINE >> 20),
                    ));
                    self.buf = Vec::new();
                    self.overlong = true;
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            if ends {
                if !self.overlong {
                    let line = std::mem::take(&mut self.buf);
                    self.emit(line, false);
                }
                self.overlong = false;
                self.line += 1;
            }
        }
    }

    fn emit(&mut self, line: Vec<u8>, unterminated: bool) {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        self.batch_bytes += line.len();
        self.batch.push((self.line, line, unterminated));
        if self.batch_bytes >= BATCH_BYTES || self.batch.len() >= 256 {
            self.send();
        }
    }

    fn send(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.batch_bytes = 0;
        if let Some(tx) = &self.tx {
            let _ = tx.send(batch);
        }
    }

    /// Damaged data interrupts the line being gathered: it is dropped.
    fn break_line(&mut self, why: &str) {
        if !self.buf.is_empty() || self.overlong {
            let what = if self.overlong {
                "longer than the limit".to_string()
            } else {
                format!("{} bytes", self.buf.len())
            };
            self.notes.push((
                self.line,
                format!("line {}: cut off by {why} ({what}); skipped", self.line),
            ));
            self.line += 1;
        }
        self.buf = Vec::new();
        self.overlong = false;
    }

    fn note(&mut self, text: String) {
        self.notes.push((self.line, text));
    }

    /// The end of the data: a last line without a newline is parsed all
    /// the same (a complete one is kept).
    fn finish(&mut self) {
        if !self.buf.is_empty() && !self.overlong {
            let line = std::mem::take(&mut self.buf);
            self.emit(line, true);
        }
        self.send();
        self.tx = None;
    }
}

/// Reads every snapshot of a recording (`gputaskman record`), plain or
/// zstd. Fails only when the file cannot be read; what is in it that is
/// not a snapshot is skipped and said in [`Recording::skipped`]. A file
/// that holds one pretty-printed snapshot (`gputaskman --json`) reads as a
/// recording of one.
pub fn read_recording(path: &Path) -> anyhow::Result<Recording> {
    let name = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("{name}: cannot read"))?;
    if meta.is_dir() {
        anyhow::bail!("{name}: a directory, not a recording");
    }
    let mut file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
    let mut head = Vec::with_capacity(4);
    (&mut file)
        .take(4)
        .read_to_end(&mut head)
        .with_context(|| format!("{name}: cannot read"))?;
    // A file cut inside the magic number is still a zstd one.
    let zstd = !head.is_empty() && ZSTD_MAGIC.starts_with(&head);

    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
    let (tx, rx) = sync_channel::<Vec<Item>>(workers * 2);
    let rx = Mutex::new(rx);
    let (mut parsed, notes, io_error) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let rx = &rx;
                scope.spawn(move || {
                    let mut out: Vec<(u64, Result<Snapshot, String>)> = Vec::new();
                    loop {
                        let batch = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => break,
                        };
                        let Ok(batch) = batch else { break };
                        for (n, line, unterminated) in batch {
                            out.push((n, parse_line(n, &line, unterminated)));
                        }
                    }
                    out
                })
            })
            .collect();
        let mut lines = Lines::new(tx);
        let io_error = if zstd {
            let mut data = head.clone();
            match file.read_to_end(&mut data) {
                Ok(_) => {
                    decode_zstd(&data, &mut lines);
                    None
                }
                Err(e) => Some(e),
            }
        } else {
            lines.push(&head);
            let mut chunk = vec![0u8; 1 << 20];
            loop {
                match file.read(&mut chunk) {
                    Ok(0) => break None,
                    Ok(n) => lines.push(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => break Some(e),
                }
            }
        };
        lines.finish();
        let mut parsed = Vec::new();
        for h in handles {
            match h.join() {
                Ok(v) => parsed.extend(v),
                Err(_) => lines.note("a parser thread failed".into()),
            }
        }
        (parsed, lines.notes, io_error)
    });
    if let Some(e) = io_error {
        return Err(anyhow::Error::new(e).context(format!("{name}: cannot read")));
    }
    parsed.sort_by_key(|(n, _)| *n);

    let mut recording = Recording::default();
    let mut skipped: Vec<(u64, String)> = notes;
    for (n, r) in parsed {
        match r {
            Ok(s) => recording.snapshots.push(s),
            Err(why) => skipped.push((n, why)),
        }
    }
    // One pretty-printed snapshot is a recording of one.
    if recording.snapshots.is_empty() && !zstd && meta.len() <= MAX_LINE as u64 {
        if let Ok(data) = std::fs::read(path) {
            if let Ok(s) = crate::snapshot::diff::parse(&data) {
                recording.snapshots.push(s);
                return Ok(recording);
            }
        }
    }
    skipped.sort_by_key(|(n, _)| *n);
    let more = skipped.len().saturating_sub(MAX_NOTES);
    recording.skipped = skipped.into_iter().take(MAX_NOTES).map(|(_, t)| t).collect();
    if more > 0 {
        recording.skipped.push(format!("... and {more} more skipped"));
    }
    Ok(recording)
}

pub(crate) fn parse_line(n: u64, line: &[u8], unterminated: bool) -> Result<Snapshot, String> {
    match serde_json::from_slice::<Snapshot>(line) {
        Ok(s) if s.schema_version == SCHEMA_VERSION => Ok(s),
        Ok(s) => Err(format!(
            "line {n}: schema_version {}, but this gputaskman reads schema_version {SCHEMA_VERSION}; skipped",
            s.schema_version
        )),
        Err(e) => {
            if unterminated {
                return Err(format!(
                    "line {n}: incomplete (the last line, {} bytes, has no newline: the recording was cut short); skipped",
                    line.len()
                ));
            }
            #[derive(serde::Deserialize)]
            struct Version {
                schema_version: serde_json::Value,
            }
            if let Ok(v) = serde_json::from_slice::<Version>(line) {
                if v.schema_version.as_u64() != Some(SCHEMA_VERSION as u64) {
                    return Err(format!(
                        "line {n}: schema_version {}, but this gputaskman reads schema_version {SCHEMA_VERSION}; skipped",
                        v.schema_version
                    ));
                }
            }
            if e.is_syntax() || e.is_eof() {
                Err(format!("line {n}: not JSON ({e}); skipped"))
            } else {
                Err(format!("line {n}: not a snapshot ({e}); skipped"))
            }
        }
    }
}

pub(crate) fn find_magic(data: &[u8], from: usize) -> Option<usize> {
    if from >= data.len() {
        return None;
    }
    data[from..].windows(4).position(|w| w == ZSTD_MAGIC).map(|i| from + i)
}

/// Decodes concatenated zstd frames into `lines`, going on past damage
/// from the next frame, and saying where a frame ends early.
fn decode_zstd(data: &[u8], lines: &mut Lines) {
    let mut decoder = match zstd::stream::raw::Decoder::new() {
        Ok(d) => d,
        Err(e) => {
            lines.note(format!("cannot start a zstd decoder: {e}"));
            return;
        }
    };
    let mut buf = vec![0u8; 1 << 17];
    let mut frame = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        if rest.len() < ZSTD_MAGIC.len() && ZSTD_MAGIC.starts_with(rest) {
            lines.note(format!(
                "the zstd frame at byte {pos} ends early: the recording was cut short"
            ));
            break;
        }
        if !rest.starts_with(&ZSTD_MAGIC) {
            let next = find_magic(data, pos + 1);
            let end = next.unwrap_or(data.len());
            lines.break_line("data that is not zstd");
            lines.note(format!("bytes {pos}..{end}: not zstd data; skipped"));
            pos = end;
            continue;
        }
        frame.clear();
        let (mut outcome, mut consumed) = decode_frame(&mut decoder, rest, rest.len(), &mut buf, &mut frame);
        let mut dropped = 0;
        match &outcome {
            // Every block decoded but the frame's checksum says one of them
            // is not what was written: none of its lines can be trusted.
            Err(e) if e.contains("checksum") => {
                dropped = frame.iter().filter(|&&b| b == b'\n').count();
                frame.clear();
            }
            // zstd drops what the failing call decoded before the damage:
            // decode the frame again a byte at a time to keep every block
            // before it (a recording cut short, then appended to).
            Err(_) => {
                frame.clear();
                (outcome, consumed) = decode_frame(&mut decoder, rest, 1, &mut buf, &mut frame);
            }
            Ok(_) => {}
        }
        lines.push(&frame);
        if dropped > 0 {
            lines.note(format!(
                "the zstd frame at byte {pos} fails its checksum: its {dropped} lines are dropped"
            ));
        }
        match outcome {
            Ok(true) => pos += consumed,
            Ok(false) => {
                lines.note(format!(
                    "the zstd frame at byte {pos} ends early: the recording was cut short (every line before the cut is kept)"
                ));
                lines.break_line("the end of the data");
                pos = data.len();
            }
            Err(e) => {
                lines.break_line("damaged zstd data");
                let next = find_magic(data, pos + 4);
                lines.note(format!(
                    "damaged zstd data in the frame at byte {pos} ({e}); {}",
                    match next {
                        Some(n) => format!("reading on from the next frame, at byte {n}"),
                        None => "nothing after it is read".into(),
                    }
                ));
                pos = next.unwrap_or(data.len());
            }
        }
    }
}

/// Decodes the frame at the start of `data` into `sink`, handing the
/// decoder at most `step` bytes a call. Ok(true): the frame is complete;
/// Ok(false): the data ends inside it; Err: it is damaged (what the failing
/// call decoded is not kept). Also returns the bytes consumed.
pub(crate) fn decode_frame(
    decoder: &mut zstd::stream::raw::Decoder,
    data: &[u8],
    step: usize,
    buf: &mut [u8],
    sink: &mut Vec<u8>,
) -> (Result<bool, String>, usize) {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    if let Err(e) = decoder.reinit() {
        return (Err(e.to_string()), 0);
    }
    let mut pos = 0;
    loop {
        let limit = (pos + step.max(1)).min(data.len());
        let mut input = InBuffer::around(&data[..limit]);
        input.set_pos(pos);
        loop {
            let before = input.pos();
            let mut output = OutBuffer::around(&mut *buf);
            let result = decoder.run(&mut input, &mut output);
            let produced = output.pos();
            match result {
                Err(e) => return (Err(e.to_string()), input.pos()),
                // The frame is decoded and flushed.
                Ok(0) => {
                    sink.extend_from_slice(&buf[..produced]);
                    return (Ok(true), input.pos());
                }
                Ok(_) => {
                    sink.extend_from_slice(&buf[..produced]);
                    if produced < buf.len() && input.pos() == limit {
                        break;
                    }
                    if produced == 0 && input.pos() == before {
                        return (Err("the decoder made no progress".into()), input.pos());
                    }
                }
            }
        }
        pos = limit;
        if limit == data.len() {
            return (Ok(false), pos);
        }
    }
}
