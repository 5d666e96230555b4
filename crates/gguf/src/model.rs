//! A model: one GGUF file or all parts of a split one, and what it is.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, ErrorKind};
use crate::hparams::{Heads, Hparams, HYBRID_ARCHS, NO_KV_ARCHS, RECURRENT_ARCHS};
use crate::reader::{read_header_within, Header, TensorInfo};
use crate::regular_file;
use crate::split::SplitName;
use crate::types::FileType;
use crate::value::Metadata;
use crate::walk::{Limits, DEFAULT_WALK_TIME};

/// What kind of model a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Kind {
    /// A causal language model.
    Llm,
    /// `{arch}.pooling_type` set (not none, not rank).
    Embedding,
    /// `{arch}.pooling_type` = 4 (rank).
    Reranker,
    /// Non-causal: `{arch}.attention.causal` false, or an architecture that
    /// llama.cpp runs without a KV cache (BERT family, diffusion models).
    Encoder,
    /// Mamba / RWKV: a fixed-size state instead of a KV cache.
    Recurrent,
    /// Attention layers and recurrent layers mixed.
    Hybrid,
    /// A speech model (`stt.*` keys).
    Speech,
    /// A decision model (`decision.type` key).
    Decision,
}

impl Kind {
    /// The name used in JSON and text: "llm", "embedding", ...
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Llm => "llm",
            Kind::Embedding => "embedding",
            Kind::Reranker => "reranker",
            Kind::Encoder => "encoder",
            Kind::Recurrent => "recurrent",
            Kind::Hybrid => "hybrid",
            Kind::Speech => "speech",
            Kind::Decision => "decision",
        }
    }

    fn classify(meta: &Metadata, arch: Option<&str>) -> Kind {
        if meta.contains("decision.type") {
            return Kind::Decision;
        }
        if meta.iter().any(|(k, _)| k.starts_with("stt.")) {
            return Kind::Speech;
        }
        let Some(arch) = arch else {
            return Kind::Llm;
        };
        let key = |suffix: &str| format!("{arch}.{suffix}");
        // llama.cpp's pooling types: 0 none, 1 mean, 2 cls, 3 last, 4 rank.
        match meta.get(&key("pooling_type")).and_then(|v| v.as_i64()) {
            Some(4) => return Kind::Reranker,
            Some(p) if p > 0 => return Kind::Embedding,
            _ => {}
        }
        if meta.get_bool(&key("attention.causal")) == Some(false) || NO_KV_ARCHS.contains(&arch) {
            Kind::Encoder
        } else if RECURRENT_ARCHS.contains(&arch) {
            Kind::Recurrent
        } else if HYBRID_ARCHS.contains(&arch) {
            Kind::Hybrid
        } else {
            Kind::Llm
        }
    }
}

/// A count that is the same for every layer or differs per layer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
pub enum PerLayer {
    Same(u32),
    Varies(Vec<u32>),
}

impl PerLayer {
    fn from_values(values: &[u32]) -> Option<PerLayer> {
        let first = *values.first()?;
        Some(if values.iter().all(|&v| v == first) {
            PerLayer::Same(first)
        } else {
            PerLayer::Varies(values.to_vec())
        })
    }
}

impl std::fmt::Display for PerLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PerLayer::Same(v) => write!(f, "{v}"),
            PerLayer::Varies(values) => {
                let min = values.iter().min().copied().unwrap_or(0);
                let max = values.iter().max().copied().unwrap_or(0);
                write!(f, "{min}-{max} (per layer)")
            }
        }
    }
}

/// What a model file is, as llama.cpp's loader would print it. Unknown
/// values are `None`, never 0.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ModelInfo {
    pub architecture: Option<String>,
    pub name: Option<String>,
    pub size_label: Option<String>,
    pub kind: Kind,
    /// Sum over all tensors of the product of their dimensions (llama.cpp's
    /// "model params"); `None` only if the sum overflows.
    pub params: Option<u64>,
    /// Sum of the tensors' data bytes; `None` when a tensor has a type id
    /// this crate does not know.
    pub weights_bytes: Option<u64>,
    /// weights_bytes * 8 / params (llama.cpp's "BPW").
    pub bits_per_weight: Option<f64>,
    pub file_type: Option<FileType>,
    pub tensors: u64,
    /// Tensors whose ggml type id is unknown (their bytes are unknown).
    pub tensors_unknown_type: u64,
    /// `{arch}.block_count`.
    pub layers: Option<u32>,
    pub context_train: Option<u32>,
    pub embedding_length: Option<u32>,
    pub head_count: Option<PerLayer>,
    pub head_count_kv: Option<PerLayer>,
    /// K head size with llama.cpp's default (embedding / heads) applied.
    pub key_length: Option<u32>,
    pub value_length: Option<u32>,
    pub gguf_version: u32,
    pub big_endian: bool,
    pub split_parts: u32,
}

/// One file of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Part {
    pub path: PathBuf,
    pub version: u32,
    pub big_endian: bool,
    pub alignment: u32,
    pub data_offset: u64,
    pub file_size: u64,
    pub tensors: u64,
}

/// A GGUF model: the metadata of its first file and the tensors of all its
/// parts.
#[derive(Clone, Debug)]
pub struct Model {
    path: PathBuf,
    parts: Vec<Part>,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    info: ModelInfo,
    hparams: Result<Hparams, String>,
}

/// True when the file starts with the GGUF magic (Ollama keeps models as
/// extension-less blobs such as `sha256-…`; this is how to spot them).
pub fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    regular_file::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map(|()| &magic == b"GGUF")
        .unwrap_or(false)
}

/// The most header bytes (metadata and tensor infos as stored, summed over
/// the parts) one model may have. Real headers are far smaller: the largest
/// vocabularies (256k tokens with merges) take about 10 MB and a tensor info
/// under 100 bytes, so even a model of thousands of tensors stays under
/// 20 MB. Without a cap a split set of thousands of hostile parts would be
/// kept in memory whole.
const MAX_HEADER_BYTES: u64 = 256 << 20;

/// llama.cpp keeps `split.count` in a `uint16_t` (tools/gguf-split writes it
/// with `gguf_set_val_u16`, src/llama-model-loader.cpp reads it back into
/// `uint16_t n_split`), so no loadable model has more parts.
const MAX_SPLIT_COUNT: u32 = u16::MAX as u32;

/// Reads the header of a model file, and of all the other parts when it is
/// one part of a split model (any part may be given). Reads only the
/// headers: a 250 MB model takes milliseconds; the walk is stopped after
/// [`DEFAULT_WALK_TIME`], or once it has read far more than the file has
/// on disk (a sparse file, see [`crate::walk`]).
pub fn open(path: &Path) -> Result<Model, Error> {
    open_until(path, Instant::now() + DEFAULT_WALK_TIME)
}

/// [`open`], with the walks of all parts ended by `deadline`: past it the
/// walk stops with [`ErrorKind::OutOfTime`] instead of running on.
pub fn open_until(path: &Path, deadline: Instant) -> Result<Model, Error> {
    open_capped(path, MAX_HEADER_BYTES, deadline)
}

pub(crate) fn open_capped(path: &Path, max_header_bytes: u64, deadline: Instant) -> Result<Model, Error> {
    let read_file = |path: &Path| read_file(path, max_header_bytes, deadline);
    let (first_id, first) = read_file(path)?;
    let count = first.metadata.get("split.count").and_then(|v| v.as_u32()).unwrap_or(1);
    if count <= 1 {
        return Model::from_parts(path, vec![(path.to_path_buf(), first)]).map_err(|e| e.with_path(path));
    }
    if count > MAX_SPLIT_COUNT {
        return Err(split_error(
            path,
            format!("split.count is {count}, more than llama.cpp's limit of {MAX_SPLIT_COUNT} parts"),
        ));
    }
    let name = SplitName::parse(path).ok_or_else(|| {
        split_error(
            path,
            format!("split.count is {count} but the name does not end in -NNNNN-of-NNNNN.gguf, so the other parts cannot be found"),
        )
    })?;
    if name.count != count {
        return Err(split_error(
            path,
            format!("the name says {} parts, split.count says {count}", name.count),
        ));
    }
    let mut first = Some((first_id, first));
    // Which part each file is: parts that are one file (symlinks or hard
    // links to it) would make one header count many times.
    let mut seen = HashMap::new();
    let mut header_bytes = 0u64;
    let mut parts = Vec::new();
    for no in 1..=count {
        let part_path = name.part_path(no);
        let opened = if no == name.no { first.take() } else { None };
        let (id, mut header) = match opened {
            Some(h) => h,
            None => read_file(&part_path)?,
        };
        if let Some(earlier) = seen.insert(id, no) {
            return Err(split_error(
                &part_path,
                format!("part {no} of {count} is the same file as part {earlier}; the parts of a split model must be distinct files"),
            ));
        }
        header_bytes = header_bytes.saturating_add(header.data_offset);
        if header_bytes > max_header_bytes {
            return Err(split_error(
                &part_path,
                format!(
                    "the headers of parts 1 to {no} of {count} take {header_bytes} bytes, over the limit of {max_header_bytes} bytes for one model"
                ),
            ));
        }
        if let Some(split_no) = header.metadata.get("split.no").and_then(|v| v.as_u32()) {
            if split_no != no - 1 {
                return Err(split_error(
                    &part_path,
                    format!("split.no is {split_no}, expected {} for part {no} of {count}", no - 1),
                ));
            }
        }
        // Only the first part's metadata is used (from_parts): drop the
        // others' now rather than hold every part's at once.
        if no > 1 {
            header.metadata = Metadata::default();
        }
        parts.push((part_path, header));
    }
    let first_path = parts[0].0.clone();
    Model::from_parts(path, parts).map_err(|e| e.with_path(&first_path))
}

/// What makes two paths one file: device and inode on unix (symlinks and
/// hard links alike), the canonical path elsewhere.
#[cfg(unix)]
type FileId = (u64, u64);
#[cfg(not(unix))]
type FileId = PathBuf;

#[cfg(unix)]
fn file_id(file: &std::fs::File, _path: &Path) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_id(_file: &std::fs::File, path: &Path) -> std::io::Result<FileId> {
    std::fs::canonicalize(path)
}

fn read_file(path: &Path, max_read: u64, deadline: Instant) -> Result<(FileId, Header), Error> {
    let file = regular_file::open(path).map_err(|e| Error::from(e).with_path(path))?;
    let id = file_id(&file, path).map_err(|e| Error::from(e).with_path(path))?;
    let meta = file.metadata().map_err(|e| Error::from(e).with_path(path))?;
    let limits = Limits::for_file(&meta, max_read, Some(deadline));
    let header = read_header_within(file, limits).map_err(|e| e.with_path(path))?;
    Ok((id, header))
}

fn split_error(path: &Path, msg: String) -> Error {
    Error::new(ErrorKind::Split(msg)).with_path(path)
}

impl Model {
    /// A model from one header read with [`crate::read_header`] (no split
    /// parts are followed); `path` is only recorded.
    pub fn from_header(path: &Path, header: Header) -> Result<Model, Error> {
        Model::from_parts(path, vec![(path.to_path_buf(), header)])
    }

    fn from_parts(path: &Path, parts: Vec<(PathBuf, Header)>) -> Result<Model, Error> {
        let mut tensors = Vec::new();
        let mut names = HashSet::new();
        let mut part_infos = Vec::new();
        let mut metadata = None;
        for (index, (part_path, header)) in parts.into_iter().enumerate() {
            part_infos.push(Part {
                path: part_path.clone(),
                version: header.version,
                big_endian: header.big_endian,
                alignment: header.alignment,
                data_offset: header.data_offset,
                file_size: header.file_size,
                tensors: header.tensors.len() as u64,
            });
            for mut t in header.tensors {
                if !names.insert(t.name.clone()) {
                    return Err(split_error(
                        &part_path,
                        format!("tensor {:?} appears in more than one part", t.name),
                    ));
                }
                t.part = index as u32;
                tensors.push(t);
            }
            metadata.get_or_insert(header.metadata);
        }
        let metadata = metadata.unwrap_or_default();
        if part_infos.len() > 1 {
            if let Some(expected) = metadata.get("split.tensors.count").and_then(|v| v.as_u64()) {
                if expected != tensors.len() as u64 {
                    return Err(Error::new(ErrorKind::Split(format!(
                        "split.tensors.count is {expected} but the parts hold {} tensors",
                        tensors.len()
                    ))));
                }
            }
        }
        let hparams = Hparams::from_metadata(&metadata);
        let info = ModelInfo::compute(&metadata, &tensors, &part_infos);
        Ok(Model {
            path: path.to_path_buf(),
            parts: part_infos,
            metadata,
            tensors,
            info,
            hparams,
        })
    }

    /// The path the model was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The files of the model (one unless it is split).
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The metadata of the first part.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensors of all parts.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// What the model is.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The hyperparameters for the memory math, or why they are missing.
    pub(crate) fn hparams(&self) -> Result<&Hparams, &str> {
        self.hparams.as_ref().map_err(String::as_str)
    }
}

impl ModelInfo {
    fn compute(meta: &Metadata, tensors: &[TensorInfo], parts: &[Part]) -> ModelInfo {
        let architecture = meta.get_str("general.architecture").map(str::to_string);
        let arch = architecture.as_deref();
        let arch_u32 = |suffix: &str| arch.and_then(|a| meta.get_u32(&format!("{a}.{suffix}")));

        let params = tensors.iter().try_fold(0u64, |acc, t| acc.checked_add(t.n_elements));
        let weights_bytes = tensors
            .iter()
            .try_fold(0u64, |acc, t| t.n_bytes.and_then(|b| acc.checked_add(b)));
        let bits_per_weight = match (weights_bytes, params) {
            (Some(bytes), Some(params)) if params > 0 => Some(bytes as f64 * 8.0 / params as f64),
            _ => None,
        };
        let file_type = match meta.get_u32("general.file_type") {
            Some(id) => Some(FileType::from_id(id)),
            None => FileType::guess(tensors.iter().map(|t| t.ggml_type)),
        };

        // Head counts are read as the hyperparameters read them (scalar or
        // per layer, head_count_kv defaulting to head_count) but each on its
        // own, so one bad key (or a bad key elsewhere) hides only itself;
        // and only when the file has them: a missing count is unknown, not 0.
        let has = |suffix: &str| arch.is_some_and(|a| meta.contains(&format!("{a}.{suffix}")));
        let (head_count, head_count_kv, key_length, value_length) = match Heads::from_metadata(meta) {
            Some(h) if has("attention.head_count") => (
                h.n_head.ok().as_deref().and_then(PerLayer::from_values),
                h.n_head_kv.ok().as_deref().and_then(PerLayer::from_values),
                h.head_k.ok().filter(|&h| h > 0),
                h.head_v.ok().filter(|&h| h > 0),
            ),
            _ => (None, None, None, None),
        };

        ModelInfo {
            kind: Kind::classify(meta, arch),
            name: meta.get_str("general.name").map(str::to_string),
            size_label: meta.get_str("general.size_label").map(str::to_string),
            params,
            weights_bytes,
            bits_per_weight,
            file_type,
            tensors: tensors.len() as u64,
            tensors_unknown_type: tensors.iter().filter(|t| t.n_bytes.is_none()).count() as u64,
            layers: arch_u32("block_count"),
            context_train: arch_u32("context_length"),
            embedding_length: arch_u32("embedding_length"),
            head_count,
            head_count_kv,
            key_length,
            value_length,
            gguf_version: parts.first().map_or(0, |p| p.version),
            big_endian: parts.first().is_some_and(|p| p.big_endian),
            split_parts: parts.len() as u32,
            architecture,
        }
    }
}
