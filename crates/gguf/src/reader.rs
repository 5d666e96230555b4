//! The bounded header reader.
//!
//! Reads the GGUF header (ggml/src/gguf.cpp `gguf_init_from_file_impl` is the
//! reference) through a 64 KiB buffer over any `Read + Seek`: positioned
//! reads, never the tensor data, never a memory map. Every count and length
//! from the file is checked against the bytes left before it is used, so a
//! hostile file costs at most one pass over its own bytes and allocations
//! bounded by the `MAX_KEPT_*` limits.

use std::collections::HashSet;
use std::io::{self, Read, Seek, SeekFrom};

use crate::error::{Error, ErrorKind};
use crate::types::{GgmlType, ValueType};
use crate::value::{
    Array, Metadata, Value, MAX_KEPT_ARRAY, MAX_KEPT_ARRAY_STRING, MAX_KEPT_STRING, MAX_KEPT_STRING_ARRAY,
};
use crate::walk::{Exceeded, Limits};

const BUF_SIZE: usize = 64 * 1024;
/// Keys and tensor names longer than this are refused (llama.cpp's own
/// limit for tensor names is 64 bytes; no real key comes near this).
const MAX_NAME: u64 = 64 * 1024;
/// The smallest key-value pair: key length, empty key, type, one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// The smallest tensor info: name length, empty name, n_dims 0, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// ggml's GGML_MAX_DIMS.
const MAX_DIMS: u32 = 4;
/// GGUF's default alignment of the data section (gguf.h GGUF_DEFAULT_ALIGNMENT).
const DEFAULT_ALIGNMENT: u32 = 32;
/// The most memory one header's kept metadata and tensor infos may take.
/// Each value is bounded by the `MAX_KEPT_*` limits, but a file may hold
/// any number of them (a sparse file of kept strings, or of 4096-element
/// u8 arrays that cost 32x in memory what they cost on disk). Real headers
/// keep a few MiB: ~1,000-2,000 tensor infos and small metadata, the
/// vocabularies being walked, not kept.
pub const MAX_KEPT_TOTAL: u64 = 64 << 20;

/// The header of one GGUF file: everything before the tensor data.
#[derive(Clone, Debug)]
pub struct Header {
    /// GGUF version, 2 or 3.
    pub version: u32,
    /// True when the file was written big-endian (read byte-swapped).
    pub big_endian: bool,
    /// Alignment of the data section and of each tensor (`general.alignment`).
    pub alignment: u32,
    /// The key-value metadata in file order.
    pub metadata: Metadata,
    /// The tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    /// Where the tensor data starts in the file.
    pub data_offset: u64,
    /// Size of the file in bytes.
    pub file_size: u64,
}

/// One tensor as the header describes it (its data is never read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// The dimensions, `ne[0]` (the row) first; at most four.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    /// Product of the dimensions.
    pub n_elements: u64,
    /// Bytes of the data; `None` when the type id is unknown.
    pub n_bytes: Option<u64>,
    /// Index of the split part (0-based) that holds the tensor.
    pub part: u32,
}

/// Reads the header of one GGUF file from any `Read + Seek` (a file, or an
/// in-memory `Cursor` as the fuzzer uses), with no limit on the bytes read
/// or the time taken. Does not follow split parts; see [`crate::open`] for
/// that.
pub fn read_header<R: Read + Seek>(reader: R) -> Result<Header, Error> {
    read_header_within(reader, Limits::unbounded())
}

/// [`read_header`] within `limits`: the walk stops with an error when it
/// has read more than they allow (or more than the file has on disk, a
/// sparse file) or runs past their deadline.
pub fn read_header_within<R: Read + Seek>(reader: R, limits: Limits) -> Result<Header, Error> {
    let mut src = Source::new(reader, limits)?;

    let magic: [u8; 4] = src.array("magic")?;
    if &magic != b"GGUF" {
        return Err(Error::at(0, ErrorKind::NotGguf(magic)));
    }
    let raw_version = src.u32("version")?;
    // A version with its low 16 bits zero is a small number read with the
    // wrong byte order: the file is big-endian (gguf.cpp does the same test).
    let version = if raw_version & 0xFFFF == 0 {
        src.big_endian = true;
        raw_version.swap_bytes()
    } else {
        raw_version
    };
    match version {
        1 => return Err(Error::at(4, ErrorKind::VersionOne)),
        2 | 3 => {}
        v => return Err(Error::at(4, ErrorKind::UnsupportedVersion(v))),
    }

    let n_tensors_at = src.pos;
    let n_tensors = src.u64("tensor count")?;
    let n_kv_at = src.pos;
    let n_kv = src.u64("metadata count")?;
    check_count(&src, n_tensors_at, "tensor", n_tensors, MIN_TENSOR_INFO_BYTES)?;
    check_count(&src, n_kv_at, "metadata", n_kv, MIN_KV_BYTES)?;

    let mut metadata = Metadata::default();
    for _ in 0..n_kv {
        let key_at = src.pos;
        let key = src.string("key", MAX_NAME)?;
        let type_at = src.pos;
        let type_id = src.u32("value type")?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| {
            Error::at(
                type_at,
                ErrorKind::BadValueType {
                    key: key.clone(),
                    ty: type_id,
                },
            )
        })?;
        let value = read_value(&mut src, ty, &key)?;
        src.keep(key_at, kept_size(&value) + key.len() as u64)?;
        if !metadata.insert(key.clone(), value) {
            return Err(Error::at(key_at, ErrorKind::DuplicateKey(key)));
        }
    }

    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if a.is_power_of_two() => *a,
        Some(Value::U32(a)) => return Err(Error::new(ErrorKind::BadAlignment(*a))),
        Some(other) => return Err(Error::new(ErrorKind::AlignmentType(other.value_type().name()))),
    };

    check_count(&src, n_tensors_at, "tensor", n_tensors, MIN_TENSOR_INFO_BYTES)?;
    let mut tensors = Vec::new();
    let mut tensor_at = Vec::new();
    let mut names = HashSet::new();
    for _ in 0..n_tensors {
        let at = src.pos;
        let info = read_tensor_info(&mut src)?;
        // The info, its name kept twice (here and in `names`) and its dims.
        let cost = std::mem::size_of::<TensorInfo>() as u64 + 2 * info.name.len() as u64 + 8 * info.dims.len() as u64;
        src.keep(at, cost)?;
        if !names.insert(info.name.clone()) {
            return Err(Error::at(at, ErrorKind::DuplicateTensor(info.name)));
        }
        tensors.push(info);
        tensor_at.push(at);
    }

    let data_offset = align_up(src.pos, alignment).ok_or_else(|| {
        Error::at(
            src.pos,
            ErrorKind::TooLong {
                what: "padding",
                len: u64::from(alignment),
                left: src.left(),
            },
        )
    })?;
    for (info, &at) in tensors.iter().zip(&tensor_at) {
        check_tensor_data(info, at, alignment, data_offset, src.len)?;
    }

    Ok(Header {
        version,
        big_endian: src.big_endian,
        alignment,
        metadata,
        tensors,
        data_offset,
        file_size: src.len,
    })
}

fn check_count<R>(src: &Source<R>, at: u64, what: &'static str, count: u64, min_bytes: u64) -> Result<(), Error> {
    if count > src.left() / min_bytes {
        return Err(Error::at(
            at,
            ErrorKind::CountTooLarge {
                what,
                count,
                left: src.left(),
            },
        ));
    }
    Ok(())
}

fn align_up(offset: u64, alignment: u32) -> Option<u64> {
    let a = u64::from(alignment);
    offset.checked_add(a - 1).map(|v| v / a * a)
}

/// The data of a known-type tensor must be aligned and lie inside the file.
fn check_tensor_data(
    info: &TensorInfo,
    at: u64,
    alignment: u32,
    data_offset: u64,
    file_size: u64,
) -> Result<(), Error> {
    if info.offset % u64::from(alignment) != 0 {
        return Err(Error::at(
            at,
            ErrorKind::MisalignedTensor {
                name: info.name.clone(),
                offset: info.offset,
                alignment,
            },
        ));
    }
    let Some(n_bytes) = info.n_bytes else {
        return Ok(());
    };
    let end = data_offset
        .checked_add(info.offset)
        .and_then(|v| v.checked_add(n_bytes));
    match end {
        Some(end) if end <= file_size => Ok(()),
        _ => Err(Error::at(
            at,
            ErrorKind::TensorPastEnd {
                name: info.name.clone(),
                end: end.unwrap_or(u64::MAX),
                size: file_size,
            },
        )),
    }
}

fn read_tensor_info<R: Read + Seek>(src: &mut Source<R>) -> Result<TensorInfo, Error> {
    let name = src.string("tensor name", MAX_NAME)?;
    let dims_at = src.pos;
    let n_dims = src.u32("tensor dimension count")?;
    if n_dims > MAX_DIMS {
        return Err(Error::at(dims_at, ErrorKind::TooManyDims { name, n_dims }));
    }
    let mut dims = Vec::with_capacity(MAX_DIMS as usize);
    for dim in 0..n_dims as usize {
        let at = src.pos;
        let value = src.i64("tensor dimension")?;
        let ne = u64::try_from(value).map_err(|_| {
            Error::at(
                at,
                ErrorKind::NegativeDim {
                    name: name.clone(),
                    dim,
                    value,
                },
            )
        })?;
        dims.push(ne);
    }
    // ggml keeps element counts in int64_t: the product must fit.
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &ne| acc.checked_mul(ne))
        .filter(|&n| i64::try_from(n).is_ok())
        .ok_or_else(|| {
            Error::at(
                dims_at,
                ErrorKind::DimOverflow {
                    name: name.clone(),
                    dims: dims.clone(),
                },
            )
        })?;
    let ggml_type = GgmlType(src.u32("tensor type")?);
    let offset = src.u64("tensor offset")?;
    let n_bytes = match ggml_type.info() {
        None => None,
        Some(info) => {
            let ne0 = dims.first().copied().unwrap_or(1);
            if ne0 % info.block_size != 0 {
                return Err(Error::at(
                    dims_at,
                    ErrorKind::RowNotBlock {
                        name,
                        ne0,
                        ty: info.name,
                        block: info.block_size,
                    },
                ));
            }
            // nbytes = ne0/blck * type_size * ne1 * ne2 * ne3 (gguf.cpp)
            let bytes = dims
                .iter()
                .skip(1)
                .try_fold(ne0 / info.block_size, |acc, &ne| acc.checked_mul(ne))
                .and_then(|blocks| blocks.checked_mul(info.type_size))
                .ok_or_else(|| {
                    Error::at(
                        dims_at,
                        ErrorKind::DimOverflow {
                            name: name.clone(),
                            dims: dims.clone(),
                        },
                    )
                })?;
            Some(bytes)
        }
    };
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        n_elements,
        n_bytes,
        part: 0,
    })
}

fn read_value<R: Read + Seek>(src: &mut Source<R>, ty: ValueType, key: &str) -> Result<Value, Error> {
    Ok(match ty {
        ValueType::U8 => Value::U8(src.u8("u8 value")?),
        ValueType::I8 => Value::I8(src.u8("i8 value")? as i8),
        ValueType::U16 => Value::U16(src.u16("u16 value")?),
        ValueType::I16 => Value::I16(src.u16("i16 value")? as i16),
        ValueType::U32 => Value::U32(src.u32("u32 value")?),
        ValueType::I32 => Value::I32(src.u32("i32 value")? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(src.u32("f32 value")?)),
        ValueType::Bool => Value::Bool(src.u8("bool value")? != 0),
        ValueType::U64 => Value::U64(src.u64("u64 value")?),
        ValueType::I64 => Value::I64(src.i64("i64 value")?),
        ValueType::F64 => Value::F64(f64::from_bits(src.u64("f64 value")?)),
        ValueType::String => {
            let len = src.string_len("string value")?;
            if len <= MAX_KEPT_STRING {
                Value::String(src.string_bytes(len, "string value")?)
            } else {
                src.skip(len, "string value")?;
                Value::LongString(len)
            }
        }
        ValueType::Array => Value::Array(read_array(src, key)?),
    })
}

/// What a kept value costs in memory, roughly: its enum slot and the bytes
/// it owns.
fn kept_size(value: &Value) -> u64 {
    let slot = std::mem::size_of::<Value>() as u64;
    match value {
        Value::String(s) => slot + s.len() as u64,
        Value::Array(Array { values: Some(v), .. }) => slot + v.iter().map(kept_size).sum::<u64>(),
        _ => slot,
    }
}

fn read_array<R: Read + Seek>(src: &mut Source<R>, key: &str) -> Result<Array, Error> {
    let type_at = src.pos;
    let type_id = src.u32("array element type")?;
    let elem_type = match ValueType::from_id(type_id) {
        Some(ValueType::Array) => return Err(Error::at(type_at, ErrorKind::NestedArray { key: key.to_string() })),
        Some(t) => t,
        None => {
            return Err(Error::at(
                type_at,
                ErrorKind::BadValueType {
                    key: key.to_string(),
                    ty: type_id,
                },
            ))
        }
    };
    let count_at = src.pos;
    let len = src.u64("array length")?;
    // Strings take at least their 8-byte length each.
    let min_elem = elem_type.fixed_size().unwrap_or(8);
    check_count(src, count_at, "array element", len, min_elem)?;

    let values = match elem_type.fixed_size() {
        Some(size) if len > MAX_KEPT_ARRAY => {
            src.skip(len * size, "array")?;
            None
        }
        Some(_) => {
            let mut values = Vec::with_capacity(len as usize);
            for _ in 0..len {
                values.push(read_value(src, elem_type, key)?);
            }
            Some(values)
        }
        // Strings: every length is walked (the array is checked), the
        // strings are kept only while the array is small.
        None if len > MAX_KEPT_STRING_ARRAY => {
            src.skip_strings(len, "array string")?;
            None
        }
        None => {
            let mut values = Vec::new();
            let mut keep = true;
            for _ in 0..len {
                let n = src.string_len("array string")?;
                if keep && n <= MAX_KEPT_ARRAY_STRING {
                    values.push(Value::String(src.string_bytes(n, "array string")?));
                } else {
                    keep = false;
                    src.skip(n, "array string")?;
                }
            }
            keep.then_some(values)
        }
    };
    Ok(Array { elem_type, len, values })
}

/// A buffered, bounds-checked view of the file: tracks the absolute
/// position, refills its 64 KiB window with a seek and reads only when the
/// position leaves it, and skips by moving the position.
struct Source<R> {
    inner: R,
    buf: Vec<u8>,
    buf_start: u64,
    buf_len: usize,
    pos: u64,
    len: u64,
    big_endian: bool,
    /// Memory kept so far (see [`MAX_KEPT_TOTAL`]).
    kept: u64,
    /// Bytes read from `inner` so far, checked against `limits` before
    /// every window.
    read: u64,
    limits: Limits,
}

impl<R> Source<R> {
    /// Books `bytes` more of kept memory for what was read at `at`.
    fn keep(&mut self, at: u64, bytes: u64) -> Result<(), Error> {
        self.kept = self.kept.saturating_add(bytes);
        if self.kept > MAX_KEPT_TOTAL {
            return Err(Error::at(
                at,
                ErrorKind::OverLimit {
                    what: "metadata and tensor infos kept in memory",
                    len: self.kept,
                    limit: MAX_KEPT_TOTAL,
                },
            ));
        }
        Ok(())
    }

    fn left(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }
}

macro_rules! read_int {
    ($name:ident, $ty:ty) => {
        fn $name(&mut self, what: &'static str) -> Result<$ty, Error> {
            let bytes = self.array(what)?;
            Ok(if self.big_endian {
                <$ty>::from_be_bytes(bytes)
            } else {
                <$ty>::from_le_bytes(bytes)
            })
        }
    };
}

impl<R: Read + Seek> Source<R> {
    fn new(mut inner: R, limits: Limits) -> Result<Self, Error> {
        let len = inner.seek(SeekFrom::End(0))?;
        Ok(Source {
            inner,
            buf: vec![0; BUF_SIZE],
            buf_start: 0,
            buf_len: 0,
            pos: 0,
            len,
            big_endian: false,
            kept: 0,
            read: 0,
            limits,
        })
    }

    read_int!(u8, u8);
    read_int!(u16, u16);
    read_int!(u32, u32);
    read_int!(u64, u64);
    read_int!(i64, i64);

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Error> {
        let mut bytes = [0u8; N];
        self.read_into(&mut bytes, what)?;
        Ok(bytes)
    }

    /// The bytes of the window from the current position on (empty when the
    /// position is outside the window).
    fn window(&self) -> &[u8] {
        match self.pos.checked_sub(self.buf_start) {
            Some(off) if off < self.buf_len as u64 => self.buf.get(off as usize..self.buf_len).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn refill(&mut self) -> Result<(), Error> {
        let at = self.pos;
        // Every loop of the walk consumes bytes, and every 64 KiB of them
        // comes through here: the one place the limits need checking.
        if let Some(exceeded) = self.limits.exceeded(self.read, std::time::Instant::now()) {
            let read = self.read;
            return Err(Error::at(
                at,
                match exceeded {
                    Exceeded::Sparse { on_disk } => ErrorKind::Sparse { read, on_disk },
                    Exceeded::Read { limit } => ErrorKind::OverLimit {
                        what: "header bytes read",
                        len: read,
                        limit,
                    },
                    Exceeded::Time => ErrorKind::OutOfTime { read },
                },
            ));
        }
        let io_err = |e: io::Error| Error::at(at, ErrorKind::Io(e));
        self.inner.seek(SeekFrom::Start(at)).map_err(io_err)?;
        let mut filled = 0;
        while filled < self.buf.len() {
            match self.inner.read(&mut self.buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        self.buf_start = at;
        self.buf_len = filled;
        self.read = self.read.saturating_add(filled as u64);
        Ok(())
    }

    fn read_into(&mut self, out: &mut [u8], what: &'static str) -> Result<(), Error> {
        let needed = out.len() as u64;
        if needed > self.left() {
            return Err(Error::at(
                self.pos,
                ErrorKind::Truncated {
                    what,
                    needed,
                    left: self.left(),
                },
            ));
        }
        let mut done = 0;
        while done < out.len() {
            if self.window().is_empty() {
                self.refill()?;
            }
            let window = self.window();
            if window.is_empty() {
                // The file shrank while we read it.
                return Err(Error::at(
                    self.pos,
                    ErrorKind::Truncated {
                        what,
                        needed: (out.len() - done) as u64,
                        left: 0,
                    },
                ));
            }
            let n = window.len().min(out.len() - done);
            out[done..done + n].copy_from_slice(&window[..n]);
            done += n;
            self.pos += n as u64;
        }
        Ok(())
    }

    fn skip(&mut self, n: u64, what: &'static str) -> Result<(), Error> {
        if n > self.left() {
            return Err(Error::at(
                self.pos,
                ErrorKind::TooLong {
                    what,
                    len: n,
                    left: self.left(),
                },
            ));
        }
        self.pos += n;
        Ok(())
    }

    /// Walks `count` length-prefixed strings without keeping them: the
    /// tokenizer's vocabulary (262,144 strings in gemma 3) goes through here,
    /// so lengths and bytes inside the window are handled in place; the
    /// general reads take over at the window's edge and report errors.
    fn skip_strings(&mut self, count: u64, what: &'static str) -> Result<(), Error> {
        for _ in 0..count {
            if let Some(prefix) = self.window().get(..8) {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(prefix);
                let len = if self.big_endian {
                    u64::from_be_bytes(bytes)
                } else {
                    u64::from_le_bytes(bytes)
                };
                if len <= self.left().saturating_sub(8) {
                    self.pos += 8 + len;
                    continue;
                }
            }
            let len = self.string_len(what)?;
            self.skip(len, what)?;
        }
        Ok(())
    }

    /// Reads a string's u64 length and checks it against the bytes left.
    fn string_len(&mut self, what: &'static str) -> Result<u64, Error> {
        let at = self.pos;
        let len = self.u64(what)?;
        if len > self.left() {
            return Err(Error::at(
                at,
                ErrorKind::TooLong {
                    what,
                    len,
                    left: self.left(),
                },
            ));
        }
        Ok(len)
    }

    /// Reads `len` bytes (already checked against the file) as a string.
    fn string_bytes(&mut self, len: u64, what: &'static str) -> Result<String, Error> {
        let size = usize::try_from(len).map_err(|_| {
            Error::at(
                self.pos,
                ErrorKind::OverLimit {
                    what,
                    len,
                    limit: usize::MAX as u64,
                },
            )
        })?;
        let mut bytes = vec![0; size];
        self.read_into(&mut bytes, what)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// A length-prefixed string of at most `limit` bytes.
    fn string(&mut self, what: &'static str, limit: u64) -> Result<String, Error> {
        let at = self.pos;
        let len = self.string_len(what)?;
        if len > limit {
            return Err(Error::at(at, ErrorKind::OverLimit { what, len, limit }));
        }
        self.string_bytes(len, what)
    }
}
