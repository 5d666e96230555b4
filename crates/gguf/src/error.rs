//! Errors of the reader: one line each, naming the file and the byte offset.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a file could not be read as GGUF.
///
/// Displays as one line: `FILE: at byte N: what is wrong` (the parts that are
/// known). Every count or length taken from the file is checked before use,
/// so a hostile file ends here rather than in a panic or a huge allocation.
#[derive(Debug)]
pub struct Error {
    path: Option<PathBuf>,
    offset: Option<u64>,
    kind: ErrorKind,
}

/// What went wrong, without the file and offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Shown in the message, so not also a `source` (an error chain
    /// printed whole would say it twice).
    #[error("{0}")]
    Io(io::Error),
    /// The first four bytes are kept for callers, never shown: the file
    /// may be another user's secret (/etc/shadow named as a model).
    #[error("not a GGUF file (it does not start with \"GGUF\")")]
    NotGguf([u8; 4]),
    #[error("GGUF version 1 is not supported (llama.cpp dropped it; re-convert the model)")]
    VersionOne,
    #[error("unsupported GGUF version {0} (2 and 3 are supported)")]
    UnsupportedVersion(u32),
    #[error("file ends early: {what} needs {needed} bytes, {left} left")]
    Truncated { what: &'static str, needed: u64, left: u64 },
    #[error("{what} of {len} bytes is longer than the {left} bytes left in the file")]
    TooLong { what: &'static str, len: u64, left: u64 },
    #[error("{what} of {len} bytes is over the reader's limit of {limit} bytes")]
    OverLimit { what: &'static str, len: u64, limit: u64 },
    #[error("{what} count {count} cannot fit in the {left} bytes left in the file")]
    CountTooLarge { what: &'static str, count: u64, left: u64 },
    #[error("key {key:?}: unknown value type {ty}")]
    BadValueType { key: String, ty: u32 },
    #[error("key {key:?}: arrays of arrays are not valid GGUF")]
    NestedArray { key: String },
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("general.alignment must be a u32, found {0}")]
    AlignmentType(&'static str),
    #[error("general.alignment {0} is not a power of two")]
    BadAlignment(u32),
    #[error("tensor {name:?}: {n_dims} dimensions, at most 4 are allowed")]
    TooManyDims { name: String, n_dims: u32 },
    #[error("tensor {name:?}: dimension {dim} is negative ({value})")]
    NegativeDim { name: String, dim: usize, value: i64 },
    #[error("tensor {name:?}: the product of its dimensions {dims:?} overflows")]
    DimOverflow { name: String, dims: Vec<u64> },
    #[error("tensor {name:?}: row of {ne0} elements is not a multiple of the {ty} block of {block}")]
    RowNotBlock {
        name: String,
        ne0: u64,
        ty: &'static str,
        block: u64,
    },
    #[error("duplicate tensor name {0:?}")]
    DuplicateTensor(String),
    #[error("tensor {name:?}: data offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor { name: String, offset: u64, alignment: u32 },
    #[error(
        "tensor {name:?}: data ends at byte {end}, past the end of the file ({size} bytes); is the file truncated?"
    )]
    TensorPastEnd { name: String, end: u64, size: u64 },
    #[error("{0}")]
    Split(String),
    #[error("the header walk read {read} bytes, far more than the {on_disk} bytes the file has on disk: a sparse file, not a model")]
    Sparse { read: u64, on_disk: u64 },
    #[error("the header walk ran out of time after reading {read} bytes")]
    OutOfTime { read: u64 },
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        Error {
            path: None,
            offset: None,
            kind,
        }
    }

    pub(crate) fn at(offset: u64, kind: ErrorKind) -> Self {
        Error {
            path: None,
            offset: Some(offset),
            kind,
        }
    }

    pub(crate) fn with_path(mut self, path: &Path) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }

    /// The file the error is about, when the error came from [`crate::open`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The byte offset in the file where the problem was found, when known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        if let Some(offset) = self.offset {
            write!(f, "at byte {offset}: ")?;
        }
        write!(f, "{}", self.kind)
    }
}

/// No `source`: the one error that has one, `Io`, says it in the message
/// (the API guidelines' rule: show the source or return it, not both).
impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::new(ErrorKind::Io(e))
    }
}
