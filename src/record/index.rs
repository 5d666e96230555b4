//! Reading a recording back: JSON lines, plain or zstd (found by the
//! file's magic number, whatever its name), opened for random access.
//! Opening one indexes its lines without parsing any JSON (a zstd file is
//! decompressed once, to count its lines), and a snapshot is parsed when it
//! is asked for: an hour of 200 processes opens in a fraction of what
//! parsing it whole takes, and memory stays at the compressed file (zstd)
//! or next to nothing (plain: lines are read from the file when asked
//! for), plus the snapshot lines of the two [`WINDOW`]s decoded last.
//!
//! Bounded and forgiving: a line over [`MAX_LINE`] bytes is skipped without
//! being held in memory (a zstd frame is decoded as a stream, a buffer at
//! a time, so a few hundred KiB that decode to gigabytes of newlines or
//! one endless line cost no more than a real recording), a line that is not a snapshot (garbage, a
//! truncated last line, another schema version) is skipped, and each skip
//! is said in [`RecordingIndex::skipped`]. Damaged zstd data costs the rest
//! of its frame; reading goes on from the next frame. Nothing here panics
//! on what a file holds. A line is taken at indexing when it starts as the
//! writer writes one (`{"schema_version":1,"taken_at":"`) and ends in `}`;
//! any other line is parsed there and then, so only a line damaged in its
//! middle can fail later, in [`RecordingIndex::get`].
//!
//! Depends on the snapshot types, serde_json and [`super::codec`] only.

use super::codec::{find_magic, starts_as_zstd, Decoder, MAGIC as ZSTD_MAGIC};
use crate::snapshot::{Snapshot, SCHEMA_VERSION};
use anyhow::Context as _;
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A line longer than this is skipped.
pub const MAX_LINE: usize = 64 << 20;
/// At most this many skip notes are kept; the rest are counted.
const MAX_NOTES: usize = 100;
/// The snapshot lines of a frame decoded for [`RecordingIndex::get`] at
/// most, as one [`Window`] (a line longer than this is a window of its
/// own): a frame of the recorder's (60 lines) fits whole; a bigger one
/// (one frame made by the zstd tool from a long plain recording) is read
/// a window at a time, not held whole.
const WINDOW: usize = 32 << 20;
/// Windows kept for the next [`RecordingIndex::get`].
const CACHED_WINDOWS: usize = 2;
/// Enough of a line's head to read its `taken_at`.
const HEAD: usize = 96;

enum Chunk {
    /// A zstd frame in the file, decoded when a line in it is asked for;
    /// `lines` are its snapshots' indices in [`RecordingIndex::lines`].
    /// A damaged one is decoded a byte of input at a time, which decodes
    /// all that comes before the damage (as indexing did).
    Frame {
        start: usize,
        len: usize,
        damaged: bool,
        lines: Range<usize>,
    },
    /// One pretty-printed snapshot re-written on one line.
    Bytes(Arc<Vec<u8>>),
}

/// Snapshot lines `lines` of zstd chunk `chunk`, decoded: line `lines.start
/// + k` is `data[starts[k]..starts[k + 1]]`.
struct Window {
    chunk: usize,
    lines: Range<usize>,
    starts: Vec<usize>,
    data: Vec<u8>,
}

struct Line {
    /// None: in the plain file itself.
    chunk: Option<usize>,
    offset: u64,
    len: usize,
    /// Its line number in the (decompressed) file, 1-based.
    number: u64,
}

/// A recording opened for random access.
pub struct RecordingIndex {
    path: PathBuf,
    /// The plain file (lines are read from it as asked for).
    file: Option<File>,
    /// The zstd file's bytes.
    compressed: Vec<u8>,
    chunks: Vec<Chunk>,
    lines: Vec<Line>,
    /// `taken_at` of each snapshot (None when its head could not say).
    times: Vec<Option<String>>,
    /// What was skipped and why, e.g. `line 3601: incomplete (no newline,
    /// 812 bytes): the recording was cut short`.
    pub skipped: Vec<String>,
    cache: Mutex<Vec<Window>>,
}

impl RecordingIndex {
    /// Snapshots in the recording.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// When snapshot `i` was taken (RFC 3339), read without parsing it.
    pub fn taken_at(&self, i: usize) -> Option<&str> {
        self.times.get(i)?.as_deref()
    }

    /// Snapshot `i`, parsed now. Fails on an index past the end, and on a
    /// line damaged in its middle (the error says which line).
    pub fn get(&self, i: usize) -> anyhow::Result<Snapshot> {
        let line = self
            .lines
            .get(i)
            .with_context(|| format!("{}: no snapshot {i} (it has {})", self.path.display(), self.len()))?;
        let bytes = self.line_bytes(i, line)?;
        parse_line(line.number, &bytes, false).map_err(|why| anyhow::anyhow!("{}: {why}", self.path.display()))
    }

    /// Snapshots `indices`, in that order, parsed on every core.
    pub fn get_many(&self, indices: &[usize]) -> Vec<anyhow::Result<Snapshot>> {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
        if indices.len() < 2 || workers == 1 {
            return indices.iter().map(|&i| self.get(i)).collect();
        }
        let per = indices.len().div_ceil(workers);
        std::thread::scope(|scope| {
            let handles: Vec<_> = indices
                .chunks(per)
                .map(|part| scope.spawn(move || part.iter().map(|&i| self.get(i)).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .zip(indices.chunks(per))
                .flat_map(|(h, part)| {
                    h.join().unwrap_or_else(|_| {
                        part.iter()
                            .map(|_| Err(anyhow::anyhow!("a parser thread failed")))
                            .collect()
                    })
                })
                .collect()
        })
    }

    /// Every snapshot in order, parsed a batch at a time (memory holds one
    /// batch): `f(i, snapshot)`. Returns what failed to parse (lines
    /// damaged in their middle).
    pub fn for_each(&self, mut f: impl FnMut(usize, Snapshot)) -> Vec<String> {
        const BATCH: usize = 64;
        let mut failed = Vec::new();
        let all: Vec<usize> = (0..self.len()).collect();
        for batch in all.chunks(BATCH) {
            for (&i, r) in batch.iter().zip(self.get_many(batch)) {
                match r {
                    Ok(s) => f(i, s),
                    Err(e) => failed.push(format!("{e:#}")),
                }
            }
        }
        failed
    }

    fn line_bytes(&self, i: usize, line: &Line) -> anyhow::Result<Vec<u8>> {
        let name = self.path.display();
        let Some(chunk) = line.chunk else {
            let file = self.file.as_ref().context("no file")?;
            let mut buf = vec![0u8; line.len];
            read_exact_at(file, &mut buf, line.offset)
                .with_context(|| format!("{name}: cannot read line {}", line.number))?;
            return Ok(buf);
        };
        let (start, len, damaged, lines) = match &self.chunks[chunk] {
            Chunk::Bytes(data) => {
                let (start, end) = (line.offset as usize, line.offset as usize + line.len);
                return data
                    .get(start..end)
                    .map(<[u8]>::to_vec)
                    .with_context(|| format!("{name}: line {} is not where it was", line.number));
            }
            Chunk::Frame {
                start,
                len,
                damaged,
                lines,
            } => (*start, *len, *damaged, lines.clone()),
        };
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let at = match cache.iter().position(|w| w.chunk == chunk && w.lines.contains(&i)) {
            Some(at) => at,
            None => {
                let window = self.decode_window(chunk, (start, len, damaged), self.window(lines, i))?;
                cache.insert(0, window);
                cache.truncate(CACHED_WINDOWS);
                0
            }
        };
        let w = &cache[at];
        let k = i - w.lines.start;
        Ok(w.data[w.starts[k]..w.starts[k + 1]].to_vec())
    }

    /// The lines around line `i` of a frame's `lines` that fit in a
    /// [`WINDOW`]: mostly ahead of it (summary and plot read forward,
    /// replay mostly does), a quarter behind (replay stepping back).
    fn window(&self, lines: Range<usize>, i: usize) -> Range<usize> {
        let len = |j: usize| self.lines[j].len;
        let (mut from, mut to, mut total) = (i, i + 1, len(i));
        for share in [WINDOW / 4, WINDOW] {
            while from > lines.start && total + len(from - 1) <= share {
                from -= 1;
                total += len(from);
            }
            while to < lines.end && total + len(to) <= WINDOW {
                total += len(to);
                to += 1;
            }
        }
        from..to
    }

    /// Decodes the frame of chunk `chunk` as a stream, keeping only the
    /// bytes of lines `window`, and stopping after the last of them.
    fn decode_window(
        &self,
        chunk: usize,
        (start, len, damaged): (usize, usize, bool),
        window: Range<usize>,
    ) -> anyhow::Result<Window> {
        let wanted = &self.lines[window.clone()];
        let mut data = Vec::with_capacity(wanted.iter().map(|l| l.len).sum());
        let mut starts = vec![0];
        let mut pos = 0u64;
        let mut sink = |out: &[u8]| {
            let end = pos + out.len() as u64;
            while let Some(line) = wanted.get(starts.len() - 1) {
                let (from, to) = (line.offset.max(pos), (line.offset + line.len as u64).min(end));
                if from < to {
                    data.extend_from_slice(&out[(from - pos) as usize..(to - pos) as usize]);
                }
                if line.offset + line.len as u64 > end {
                    break;
                }
                starts.push(data.len());
            }
            pos = end;
            starts.len() <= wanted.len()
        };
        let frame = &self.compressed[start..start + len];
        let mut buf = vec![0u8; 1 << 17];
        let step = if damaged { 1 } else { frame.len() };
        let (outcome, _, _) = Decoder::new()?.decode_frame(frame, step, &mut buf, &mut sink);
        if starts.len() <= wanted.len() {
            let why = outcome.err().unwrap_or_else(|| "it ends early".into());
            anyhow::bail!("{}: the zstd frame at byte {start}: {why}", self.path.display());
        }
        Ok(Window {
            chunk,
            lines: window,
            starts,
            data,
        })
    }
}

/// Gathers lines while indexing.
struct Indexer {
    lines: Vec<Line>,
    times: Vec<Option<String>>,
    /// At most [`MAX_NOTES`]; `more` counts the rest, so that a file of a
    /// billion bad lines costs no more than one of a hundred.
    notes: Vec<(u64, String)>,
    more: usize,
    /// The number of the next line.
    number: u64,
}

/// What a line's head says.
enum Head {
    Blank,
    /// Written by the recorder: its `taken_at`.
    Snapshot(String),
    /// Anything else: parse it to know.
    Other,
}

fn head_of(head: &[u8], last: Option<u8>) -> Head {
    let trimmed = head.iter().position(|b| !b.is_ascii_whitespace());
    let Some(first) = trimmed else { return Head::Blank };
    let prefix = format!("{{\"schema_version\":{SCHEMA_VERSION},\"taken_at\":\"");
    let head = &head[first..];
    if last == Some(b'}') {
        if let Some(rest) = head.strip_prefix(prefix.as_bytes()) {
            if let Some(end) = rest.iter().position(|&b| b == b'"') {
                if let Ok(t) = std::str::from_utf8(&rest[..end]) {
                    return Head::Snapshot(t.to_string());
                }
            }
        }
    }
    Head::Other
}

impl Indexer {
    /// Takes a whole line: `head` is its first bytes, `bytes` the whole
    /// line when at hand (else `read` fetches it), `last` its last
    /// non-blank byte.
    fn line(
        &mut self,
        (chunk, offset, len): (Option<usize>, u64, usize),
        head: &[u8],
        last: Option<u8>,
        terminated: bool,
        read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    ) {
        let number = self.number;
        self.number += 1;
        if len > MAX_LINE {
            self.note(
                number,
                format!("line {number}: longer than {} MiB; skipped", MAX_LINE >> 20),
            );
            return;
        }
        let parsed = match head_of(head, last) {
            Head::Blank => return,
            Head::Snapshot(t) if terminated => Ok(Some(t)),
            // Anything else, and a last line without its newline (cut
            // right after a `}`?), is parsed now.
            _ => match read(offset, len) {
                Some(bytes) => parse_line(number, &bytes, !terminated).map(|s| Some(s.taken_at)),
                None => Err(format!("line {number}: cannot be read back; skipped")),
            },
        };
        match parsed {
            Ok(t) => {
                self.lines.push(Line {
                    chunk,
                    offset,
                    len,
                    number,
                });
                self.times.push(t);
            }
            Err(why) => self.note(number, why),
        }
    }

    fn note(&mut self, number: u64, why: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.push((number, why));
        } else {
            self.more += 1;
        }
    }

    /// Forgets lines `number` on, which start at `self.lines[line..]`
    /// (a frame that is read again, or dropped).
    fn forget(&mut self, line: usize, number: u64) {
        self.lines.truncate(line);
        self.times.truncate(line);
        self.notes.retain(|(n, _)| *n < number);
    }
}

/// Opens a recording for random access: indexes it without parsing it.
/// Fails only when the file cannot be read.
pub fn open_recording(path: &Path) -> anyhow::Result<RecordingIndex> {
    let name = path.display();
    let mut file = File::open(path).with_context(|| format!("{name}: cannot read"))?;
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        anyhow::bail!("{name}: a directory, not a recording");
    }
    let mut head = Vec::with_capacity(4);
    (&mut file)
        .take(4)
        .read_to_end(&mut head)
        .with_context(|| format!("{name}: cannot read"))?;
    let zstd = starts_as_zstd(&head);
    let mut ix = Indexer {
        lines: Vec::new(),
        times: Vec::new(),
        notes: Vec::new(),
        more: 0,
        number: 1,
    };
    let mut index = RecordingIndex {
        path: path.to_path_buf(),
        file: None,
        compressed: Vec::new(),
        chunks: Vec::new(),
        lines: Vec::new(),
        times: Vec::new(),
        skipped: Vec::new(),
        cache: Mutex::new(Vec::new()),
    };
    if zstd {
        let mut data = head;
        file.read_to_end(&mut data)
            .with_context(|| format!("{name}: cannot read"))?;
        index_zstd(&data, &mut ix, &mut index.chunks);
        index.compressed = data;
    } else {
        index_plain(&file, &mut ix).with_context(|| format!("{name}: cannot read"))?;
        // One pretty-printed snapshot (`--json`) is a recording of one.
        if ix.lines.is_empty() && file.metadata()?.len() <= MAX_LINE as u64 {
            if let Ok(s) = std::fs::read(path)
                .map_err(anyhow::Error::from)
                .and_then(|d| crate::snapshot::load::parse(&d))
            {
                let compact = serde_json::to_vec(&s)?;
                ix.notes.clear();
                ix.more = 0;
                ix.lines.push(Line {
                    chunk: Some(0),
                    offset: 0,
                    len: compact.len(),
                    number: 1,
                });
                ix.times.push(Some(s.taken_at));
                index.chunks.push(Chunk::Bytes(Arc::new(compact)));
            }
        }
        index.file = Some(file);
    }
    ix.notes.sort_by_key(|(n, _)| *n);
    let more = ix.more;
    index.skipped = ix.notes.into_iter().map(|(_, t)| t).collect();
    if more > 0 {
        index.skipped.push(format!("... and {more} more skipped"));
    }
    index.lines = ix.lines;
    index.times = ix.times;
    Ok(index)
}

/// Scans a plain file for lines, keeping each one's head and last byte.
fn index_plain(file: &File, ix: &mut Indexer) -> std::io::Result<()> {
    let mut chunk = vec![0u8; 1 << 20];
    let mut pos: u64 = 0;
    let mut line_start: u64 = 0;
    let mut head: Vec<u8> = Vec::with_capacity(HEAD);
    let mut last: Option<u8> = None;
    let mut read_back = |offset: u64, len: usize| -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        read_exact_at(file, &mut buf, offset).ok().map(|_| buf)
    };
    loop {
        let n = match read_at(file, &mut chunk, pos) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let data = &chunk[..n];
        let mut i = 0;
        while i < n {
            match data[i..].iter().position(|&b| b == b'\n') {
                Some(k) => {
                    let part = &data[i..i + k];
                    take_head(&mut head, &mut last, part);
                    let end = pos + (i + k) as u64;
                    ix.line(
                        (None, line_start, (end - line_start) as usize),
                        &head,
                        last,
                        true,
                        &mut read_back,
                    );
                    head.clear();
                    last = None;
                    line_start = end + 1;
                    i += k + 1;
                }
                None => {
                    take_head(&mut head, &mut last, &data[i..]);
                    i = n;
                }
            }
        }
        pos += n as u64;
    }
    if pos > line_start {
        ix.line(
            (None, line_start, (pos - line_start) as usize),
            &head,
            last,
            false,
            &mut read_back,
        );
    }
    Ok(())
}

pub fn parse_line(n: u64, line: &[u8], unterminated: bool) -> Result<Snapshot, String> {
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

/// Reads at `offset` without a shared file cursor, so parser threads can
/// read lines of one file at once.
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn take_head(head: &mut Vec<u8>, last: &mut Option<u8>, part: &[u8]) {
    let room = HEAD.saturating_sub(head.len());
    head.extend_from_slice(&part[..part.len().min(room)]);
    if let Some(b) = part.iter().rev().find(|b| !b.is_ascii_whitespace()) {
        *last = Some(*b);
    }
}

/// Splits a frame's decoded bytes into lines as they come, holding one
/// line at most, and none longer than [`MAX_LINE`].
struct Splitter {
    chunk: usize,
    /// Decoded bytes seen.
    pos: u64,
    /// Where the current line starts.
    start: u64,
    head: Vec<u8>,
    last: Option<u8>,
    /// The current line, while it is at most [`MAX_LINE`] bytes.
    line: Vec<u8>,
    over: bool,
}

impl Splitter {
    fn new(chunk: usize) -> Splitter {
        Splitter {
            chunk,
            pos: 0,
            start: 0,
            head: Vec::with_capacity(HEAD),
            last: None,
            line: Vec::new(),
            over: false,
        }
    }

    fn feed(&mut self, ix: &mut Indexer, mut data: &[u8]) {
        while !data.is_empty() {
            // A run of blank lines is only counted (a bomb is mostly that).
            if self.pos == self.start {
                let blank = data.iter().position(|&b| b != b'\n').unwrap_or(data.len());
                ix.number += blank as u64;
                self.pos += blank as u64;
                self.start = self.pos;
                data = &data[blank..];
                if data.is_empty() {
                    return;
                }
            }
            let Some(nl) = data.iter().position(|&b| b == b'\n') else {
                self.take(data);
                self.pos += data.len() as u64;
                return;
            };
            self.take(&data[..nl]);
            self.pos += nl as u64;
            let line = std::mem::take(&mut self.line);
            ix.line(
                (Some(self.chunk), self.start, (self.pos - self.start) as usize),
                &self.head,
                self.last,
                true,
                &mut |_, _| (!self.over).then(|| line.clone()),
            );
            self.pos += 1;
            self.start = self.pos;
            self.head.clear();
            self.last = None;
            self.over = false;
            data = &data[nl + 1..];
        }
    }

    fn take(&mut self, part: &[u8]) {
        take_head(&mut self.head, &mut self.last, part);
        if self.over {
            return;
        }
        if self.line.len() + part.len() > MAX_LINE {
            self.over = true;
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(part);
        }
    }

    /// The length of a last line without its newline (0 if none).
    fn partial(&self) -> u64 {
        self.pos - self.start
    }
}

/// Decodes each frame once, as a stream, to index its lines; keeps where
/// it is.
fn index_zstd(data: &[u8], ix: &mut Indexer, chunks: &mut Vec<Chunk>) {
    let mut decoder = match Decoder::new() {
        Ok(d) => d,
        Err(e) => {
            ix.note(0, format!("cannot start a zstd decoder: {e}"));
            return;
        }
    };
    let mut buf = vec![0u8; 1 << 17];
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        let here = ix.number;
        if rest.len() < ZSTD_MAGIC.len() && ZSTD_MAGIC.starts_with(rest) {
            ix.note(
                here,
                format!("the zstd frame at byte {pos} ends early: the recording was cut short"),
            );
            break;
        }
        if !rest.starts_with(&ZSTD_MAGIC) {
            let end = find_magic(data, pos + 1).unwrap_or(data.len());
            ix.note(here, format!("bytes {pos}..{end}: not zstd data; skipped"));
            pos = end;
            continue;
        }
        let chunk = chunks.len();
        let first = ix.lines.len();
        let mut split = Splitter::new(chunk);
        let (mut outcome, mut consumed, _) = decoder.decode_frame(rest, rest.len(), &mut buf, &mut |out| {
            split.feed(ix, out);
            true
        });
        let mut damaged = false;
        match &outcome {
            Err(e) if e.contains("checksum") => {
                let dropped = ix.number - here;
                ix.forget(first, here);
                ix.note(
                    here,
                    format!("the zstd frame at byte {pos} fails its checksum: its {dropped} lines are dropped"),
                );
                split = Splitter::new(chunk);
            }
            // Again a byte at a time, which decodes all before the damage.
            // Those lines are kept only when the damage is a cut: the
            // recorder stopped mid-frame and a new frame was appended, so
            // a frame's magic lies where decoding failed. Damage inside a
            // frame (flipped bytes) can have decoded wrongly before it was
            // detected, and zstd checks a frame only whole, at its end.
            Err(_) => {
                ix.forget(first, here);
                ix.number = here;
                split = Splitter::new(chunk);
                let output_at;
                (outcome, consumed, output_at) = decoder.decode_frame(rest, 1, &mut buf, &mut |out| {
                    split.feed(ix, out);
                    true
                });
                let cut = find_magic(rest, output_at.max(1)).is_some_and(|m| m <= consumed);
                if !cut && ix.lines.len() > first {
                    let dropped = ix.number - here;
                    ix.forget(first, here);
                    ix.number = here;
                    split = Splitter::new(chunk);
                    ix.note(
                        here,
                        format!("the zstd frame at byte {pos} is damaged inside: its {dropped} lines before the damage cannot be checked (zstd checks a frame whole) and are dropped"),
                    );
                }
                damaged = true;
            }
            Ok(_) => {}
        }
        let partial = split.partial();
        if partial > 0 {
            let number = ix.number;
            ix.number += 1;
            ix.note(
                number,
                format!("line {number}: cut off by the end of its zstd frame ({partial} bytes); skipped"),
            );
        }
        chunks.push(Chunk::Frame {
            start: pos,
            len: consumed.max(1),
            damaged,
            lines: first..ix.lines.len(),
        });
        match outcome {
            Ok(true) => pos += consumed,
            Ok(false) => {
                ix.note(
                    here,
                    format!("the zstd frame at byte {pos} ends early: the recording was cut short (every line before the cut is kept)"),
                );
                pos = data.len();
            }
            Err(e) => {
                let next = find_magic(data, pos + 4);
                ix.note(
                    here,
                    format!(
                        "damaged zstd data in the frame at byte {pos} ({e}); {}",
                        match next {
                            Some(n) => format!("reading on from the next frame, at byte {n}"),
                            None => "nothing after it is read".into(),
                        }
                    ),
                );
                pos = next.unwrap_or(data.len());
            }
        }
    }
}

/// `1 snapshot`, `3 snapshots`: how many a recording holds (here,
/// below `record`, `plot` and `view::summary`, which all say it).
pub fn snapshots(n: u64) -> String {
    format!("{n} snapshot{}", if n == 1 { "" } else { "s" })
}
