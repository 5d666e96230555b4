//! zstd for recordings: the encoder the writer flushes after every line,
//! and a frame decoder that says where a frame ends early or is damaged.
//!
//! zstd is the C library (the `zstd` crate), behind the default feature
//! `zstd`: no pure-Rust encoder can flush a block mid-frame and keep its
//! history, which is what makes a crash-safe recording small (see
//! [`super::write`]). Without the feature (a cross-compiled type check, a
//! platform without a C compiler) plain recordings work and a `.zst` one
//! is refused with that reason.

use std::fs::File;
use std::io;

/// The first bytes of every zstd frame (RFC 8878, 3.1.1).
pub const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Why a `.zst` recording cannot be read or written by this build.
#[cfg(not(feature = "zstd"))]
const NO_ZSTD: &str = "this gputaskman was built without zstd (the `zstd` feature); record to a plain .jsonl file";

/// Whether a file that begins with `head` (its first bytes, up to 4) is
/// zstd. A file cut inside the magic number still counts.
pub fn starts_as_zstd(head: &[u8]) -> bool {
    let head = &head[..head.len().min(MAGIC.len())];
    !head.is_empty() && MAGIC.starts_with(head)
}

/// Where the next frame starts at or after `from`.
pub fn find_magic(data: &[u8], from: usize) -> Option<usize> {
    if from >= data.len() {
        return None;
    }
    data[from..].windows(4).position(|w| w == MAGIC).map(|i| from + i)
}

/// Whether this build reads and writes zstd.
pub fn available() -> io::Result<()> {
    #[cfg(feature = "zstd")]
    {
        Ok(())
    }
    #[cfg(not(feature = "zstd"))]
    {
        Err(io::Error::new(io::ErrorKind::Unsupported, NO_ZSTD))
    }
}

/// A zstd frame being written: lines go in, each flushed to the file as a
/// complete block.
pub struct Encoder {
    #[cfg(feature = "zstd")]
    inner: zstd::stream::write::Encoder<'static, File>,
    #[cfg(not(feature = "zstd"))]
    _file: File,
}

impl Encoder {
    /// Opens a frame (with a checksum) on `file` at `level`.
    #[cfg(feature = "zstd")]
    pub fn new(file: File, level: i32) -> io::Result<Encoder> {
        let mut inner = zstd::stream::write::Encoder::new(file, level)?;
        inner.include_checksum(true)?;
        Ok(Encoder { inner })
    }

    #[cfg(not(feature = "zstd"))]
    pub fn new(file: File, _level: i32) -> io::Result<Encoder> {
        available().map(|()| Encoder { _file: file })
    }

    /// Compresses `line` and hands its block to the OS (ZSTD_e_flush): the
    /// line is complete on disk, the compressor keeps its history.
    pub fn write_flushed(&mut self, line: &[u8]) -> io::Result<()> {
        #[cfg(feature = "zstd")]
        {
            use std::io::Write as _;
            self.inner.write_all(line)?;
            self.inner.flush()
        }
        #[cfg(not(feature = "zstd"))]
        {
            let _ = line;
            Err(io::Error::new(io::ErrorKind::Unsupported, NO_ZSTD))
        }
    }

    /// Closes the frame; returns the file for the next one.
    pub fn finish(self) -> io::Result<File> {
        #[cfg(feature = "zstd")]
        {
            self.inner.finish()
        }
        #[cfg(not(feature = "zstd"))]
        {
            Ok(self._file)
        }
    }
}

/// Decodes one frame at a time.
pub struct Decoder {
    #[cfg(feature = "zstd")]
    inner: zstd::stream::raw::Decoder<'static>,
}

impl Decoder {
    pub fn new() -> io::Result<Decoder> {
        #[cfg(feature = "zstd")]
        {
            Ok(Decoder {
                inner: zstd::stream::raw::Decoder::new()?,
            })
        }
        #[cfg(not(feature = "zstd"))]
        {
            Err(io::Error::new(io::ErrorKind::Unsupported, NO_ZSTD))
        }
    }

    /// Decodes the frame at the start of `data`, handing what it decodes
    /// to `sink` a buffer at a time (so a frame that decodes to gigabytes
    /// is never held whole), and handing the decoder at most `step` bytes a
    /// call. Ok(true): the frame is complete; Ok(false): the data ends
    /// inside it, or `sink` returned false to stop early; Err: it is
    /// damaged (what the failing call decoded is not handed on). Also
    /// returns the bytes consumed, and how far into `data` the decoder had
    /// read when it last handed output on (with a `step` of 1, the end of
    /// the last block decoded whole). `buf` is scratch space.
    #[cfg(feature = "zstd")]
    pub fn decode_frame(
        &mut self,
        data: &[u8],
        step: usize,
        buf: &mut [u8],
        sink: &mut dyn FnMut(&[u8]) -> bool,
    ) -> (Result<bool, String>, usize, usize) {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        let decoder = &mut self.inner;
        if let Err(e) = decoder.reinit() {
            return (Err(e.to_string()), 0, 0);
        }
        let mut pos = 0;
        let mut output_at = 0;
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
                    Err(e) => return (Err(e.to_string()), input.pos(), output_at),
                    // The frame is decoded and flushed.
                    Ok(0) => {
                        let complete = sink(&buf[..produced]);
                        return (Ok(complete), input.pos(), input.pos());
                    }
                    Ok(_) => {
                        if produced > 0 {
                            output_at = input.pos();
                        }
                        if !sink(&buf[..produced]) {
                            return (Ok(false), input.pos(), output_at);
                        }
                        if produced < buf.len() && input.pos() == limit {
                            break;
                        }
                        if produced == 0 && input.pos() == before {
                            return (Err("the decoder made no progress".into()), input.pos(), output_at);
                        }
                    }
                }
            }
            pos = limit;
            if limit == data.len() {
                return (Ok(false), pos, output_at);
            }
        }
    }

    /// Never called: [`Decoder::new`] fails without zstd.
    #[cfg(not(feature = "zstd"))]
    pub fn decode_frame(
        &mut self,
        _data: &[u8],
        _step: usize,
        _buf: &mut [u8],
        _sink: &mut dyn FnMut(&[u8]) -> bool,
    ) -> (Result<bool, String>, usize, usize) {
        (Err(NO_ZSTD.into()), 0, 0)
    }
}
