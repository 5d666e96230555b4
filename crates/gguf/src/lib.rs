//! A bounded, panic-free GGUF header reader and llama.cpp-exact memory math.
//!
//! ```no_run
//! use gguf::{estimate, open, KvSettings};
//!
//! let model = open("gemma-3-270m-q4_k_m.gguf".as_ref())?;
//! let info = model.info();
//! println!("{:?} {:?} params", info.architecture, info.params);
//! let settings = KvSettings { ctx: Some(4096), n_seq: 4, kv_unified: true, ..KvSettings::default() };
//! let est = estimate(&model, &settings)?;
//! println!("KV cache: {} bytes", est.kv.bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Reading: [`open`] reads only the header (metadata and tensor infos)
//! through a 64 KiB buffer with positioned reads; large arrays such as the
//! tokenizer vocabulary are walked without being kept. GGUF v2 and v3, both
//! byte orders, split models (`-00001-of-0000N.gguf`) and extension-less
//! blobs (Ollama) are handled. Every length and count from the file is
//! checked against the bytes left, so any input ends in a value or an
//! [`Error`] naming the byte offset, never a panic, hang or unbounded
//! allocation.
//!
//! Paths from outside input may name FIFOs or devices: every file is opened
//! through [`regular_file::open`], which never blocks and refuses anything
//! but a regular file; the main crate uses the same module for the other
//! files it reads.
//!
//! Math: [`estimate`] reproduces what llama.cpp allocates for the KV cache
//! (full and sliding-window caches, MLA, per-layer head counts, shared-KV
//! layers), the recurrent state of Mamba/RWKV and hybrid models, and the
//! GPU/CPU split of `--n-gpu-layers`; [`fit`] checks it against free GPU
//! memory. [`compute`] estimates llama.cpp's compute and output buffers.

pub mod backend;
pub mod compute;
mod error;
pub mod fit;
pub mod flash_auto;
mod hparams;
pub mod memory;
mod model;
pub mod placement;
mod reader;
pub mod regular_file;
mod split;
mod types;
mod value;
pub mod walk;

#[cfg(test)]
mod compute_tests;
#[cfg(test)]
mod placement_tests;
#[cfg(test)]
mod tests;
/// The test writer, for the workspace's own tests (feature `testutil`).
#[cfg(any(test, feature = "testutil"))]
pub mod testutil;

pub use backend::Backend;
pub use compute::{compute, BatchSettings, ComputeEstimate, FlashAttn, Peak};
pub use error::{Error, ErrorKind};
pub use fit::{fit_device, DeviceFit, FitQuery, GpuFit, LlamaCppFit, DEFAULT_MARGIN_BYTES};
pub use flash_auto::{resolve_auto, AutoFlash};
pub use memory::{
    estimate, fit, gpu_bytes_matching, max_context, CacheEstimate, CacheKind, CacheType, Estimate, EstimateError, Fit,
    KvEstimate, KvSettings, Offload, Placement,
};
pub use model::{is_gguf, open, open_until, Kind, Model, ModelInfo, Part, PerLayer};
pub use placement::{place, GpuShare, Placed, Split, SplitMode};
pub use reader::{read_header, read_header_within, Header, TensorInfo};
pub use types::{FileType, GgmlType, TypeInfo, ValueType};
pub use value::{
    Array, Metadata, Value, MAX_KEPT_ARRAY, MAX_KEPT_ARRAY_STRING, MAX_KEPT_STRING, MAX_KEPT_STRING_ARRAY,
};
