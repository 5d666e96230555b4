//! What a llama.cpp-based runtime says about its own memory in its log: the
//! model, KV, compute, output and recurrent-state buffers per device, the KV
//! caches with their cells and layers, and the context it settled on. These
//! are *reported* numbers (the runtime said so), never measured ones.
//!
//! Formats read (llama.cpp's function name leads each line; the lines come
//! from src/llama-model.cpp, src/llama-kv-cache.cpp,
//! src/llama-kv-cache-iswa.cpp, src/llama-memory-recurrent.cpp and
//! src/llama-context.cpp, and their 2024–2025 predecessors):
//! - buffers, every build since 2024: `FUNC: DEVICE KIND buffer size = N MiB`
//!   with KIND one of model, KV, compute, output, RS, printed by
//!   `load_tensors`/`llm_load_tensors`, `llama_kv_cache_init`, `init`,
//!   `llama_kv_cache(_unified)`, `llama_memory_recurrent`,
//!   `llama_new_context_with_model`, `llama_init_from_model`, `llama_context`
//!   and `sched_reserve`; before 2024-10 model buffers had no KIND word
//!   (`llm_load_tensors: CUDA0 buffer size = N MiB`). The same shape Ollama
//!   matches (llm/llama_server.go `bufferSizeRegex`).
//! - KV caches: `FUNC: size = N MiB (C cells, L layers, S/T seqs), K (f16): ..,
//!   V (f16): ..` (llama-kv-cache.cpp; recurrent caches print R and S), the
//!   older `KV self size = N MiB, K (f16): .., V (f16): ..`, and
//!   `llama_kv_cache_iswa: creating non-SWA|SWA KV cache` naming the next one.
//! - context: `llama_context: n_ctx = N`, `n_ctx_seq` (`n_ctx_per_seq` in
//!   2025), `n_seq_max`, `kv_unified`; `print_info: n_ctx_train = N`;
//!   `offloaded N/M layers to GPU`; `llama_model_loader: loaded meta data ...
//!   from PATH`; `loading model tensors ... (mmap = true)` or
//!   `(load_mode = mmap)`.
//! - Ollama's server.log: its own logfmt lines (`time=.. level=INFO
//!   source=device.go:245 msg="model weights" device=CUDA0 size="4.1 GiB"`,
//!   likewise "kv cache" and "compute graph", closed by "total memory") with
//!   raw llama.cpp lines interleaved.
//!
//! Anything may precede the function name: a timestamp and level letter
//! (`0.02.293.230 I`), a server module tag (`srv`), a syslog prefix. ANSI
//! colours are removed. Lines longer than [`MAX_LINE`] bytes are skipped.
//!
//! Precision: llama.cpp prints MiB with two decimals, so a figure converted
//! with `(mib * 1048576).round()` is within ±0.005 MiB (±5.2 KiB) of the
//! allocation. Ollama prints one decimal of the largest unit ("4.1 GiB"):
//! within ±0.05 of that unit.

use serde::Serialize;

/// Longer lines are skipped: no line this parser wants is anywhere near it.
pub const MAX_LINE: usize = 4096;
const BYTES_PER_MIB: f64 = 1_048_576.0;
/// Sizes above 1 EiB are taken as garbage.
const MAX_BYTES: f64 = (1u64 << 60) as f64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferKind {
    Model,
    Kv,
    Compute,
    Output,
    /// Recurrent state (mamba, RWKV, hybrids).
    Rs,
}

/// One allocation the runtime reported: `device` is ggml's buffer-type name
/// (`CUDA0`, `CPU_Mapped`, `CUDA_Host`, ...); see [`is_device_memory`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Buffer {
    pub device: String,
    pub kind: BufferKind,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvCacheKind {
    Full,
    Swa,
    Recurrent,
}

/// One component of a cache: `K`/`V` for attention caches, `R`/`S` for
/// recurrent state, with its element type as printed (`f16`, `q8_0`, `f32`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvPart {
    pub name: String,
    pub dtype: String,
    pub bytes: u64,
}

/// One cache's summary line. `cells`, `layers`, `seqs` and `streams` are
/// absent from the pre-2025 `KV self size` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvCacheLine {
    pub kind: KvCacheKind,
    pub bytes: u64,
    pub cells: Option<u64>,
    pub layers: Option<u32>,
    /// Sequences the cache serves (`4` in `4/1 seqs`).
    pub seqs: Option<u32>,
    /// KV streams (`1` in `4/1 seqs`: one unified stream).
    pub streams: Option<u32>,
    pub parts: Vec<KvPart>,
}

/// Everything one log says about the LAST model load in it: a new load
/// (`llama_model_loader: loaded meta data`, or Ollama starting a runner)
/// starts over. A speculative-decoding draft model loads after the main one,
/// so with `-md` the report describes the draft.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogReport {
    /// llama.cpp's buffer lines, in log order.
    pub buffers: Vec<Buffer>,
    /// Ollama's own per-device summary (its last "model weights" / "kv cache"
    /// / "compute graph" block), kept apart so that it never adds to the
    /// llama.cpp lines of the same load.
    pub ollama_memory: Vec<Buffer>,
    pub kv_caches: Vec<KvCacheLine>,
    /// Total context cells of the llama_context.
    pub n_ctx: Option<u64>,
    /// Cells per sequence (`n_ctx_seq`, `n_ctx_per_seq` in 2025).
    pub n_ctx_seq: Option<u64>,
    pub n_seq_max: Option<u32>,
    pub kv_unified: Option<bool>,
    pub n_ctx_train: Option<u64>,
    /// (offloaded, total) from `offloaded N/M layers to GPU`.
    pub offloaded_layers: Option<(u32, u32)>,
    pub model_path: Option<String>,
    /// Whether the weights were memory-mapped, from the loader's own line.
    pub mmap: Option<bool>,
    /// llama.cpp's memory-breakdown tables, allocation and `--fit`
    /// projection apart (super::breakdown).
    pub memory_breakdown: super::breakdown::MemoryBreakdown,
    /// vLLM's memory lines (runtimes::vllm_log), when it wrote any.
    pub vllm: Option<super::runtimes::vllm_log::VllmLogReport>,
    /// SGLang's or TGI's pool and memory lines (runtimes::sglang,
    /// runtimes::tgi), when it wrote any.
    #[serde(skip)]
    pub server: Option<super::runtimes::figures::ServerFigures>,
}

impl LogReport {
    /// Whether the log said nothing of a model's memory that is read here.
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
            && self.kv_caches.is_empty()
            && self.ollama_memory.is_empty()
            && self.vllm.is_none()
            && self.server.is_none()
    }

    /// Bytes of one kind, from llama.cpp's lines when the load printed any,
    /// else from Ollama's summary; with `device_only`, only device memory.
    /// `None` when the log reported no buffer of that kind at all; `Some(0)`
    /// when it did but none on a device.
    pub fn total(&self, kind: BufferKind, device_only: bool) -> Option<u64> {
        let source = if self.buffers.is_empty() {
            &self.ollama_memory
        } else {
            &self.buffers
        };
        let mut of_kind = source.iter().filter(|b| b.kind == kind).peekable();
        of_kind.peek()?;
        of_kind
            .filter(|b| !device_only || is_device_memory(&b.device))
            .try_fold(0u64, |sum, b| sum.checked_add(b.bytes))
    }
}

/// Whether a ggml buffer type lives in device memory. `CPU`, `CPU_Mapped`,
/// `CPU_REPACK` (any `CPU_*`), `AMX`, `BLAS` and pinned `*_Host` buffers are
/// system RAM; `RPC[host:port]` buffers sit on another machine. Everything
/// else is a device: `CUDA0`, `ROCm0`, `Vulkan0`, `SYCL0`, `MUSA0`, `Metal`,
/// `MTL0` and `MTL0_Mapped` (Apple's unified memory, wired for the GPU), as
/// Ollama's `isGPUBuffer` (llm/llama_server.go) decides.
pub fn is_device_memory(device: &str) -> bool {
    !(device.is_empty()
        || device == "CPU"
        || device == "BLAS"
        || device == "AMX"
        || device.starts_with("CPU_")
        || device.ends_with("_Host")
        || device.starts_with("RPC"))
}

/// Reads a whole log; see the module doc for what it understands. Never
/// fails: what it cannot read it skips.
pub fn parse_log(text: &str) -> LogReport {
    let mut parser = Parser::default();
    for line in text.lines() {
        if line.len() <= MAX_LINE {
            parser.line(line);
        }
    }
    parser.report.memory_breakdown = super::breakdown::parse(text);
    parser.report.vllm = super::runtimes::vllm_log::parse_vllm_log(text);
    parser.report.server = super::runtimes::sglang::parse_log(text).or_else(|| super::runtimes::tgi::parse_log(text));
    parser.report
}

#[derive(Default)]
struct Parser {
    report: LogReport,
    /// Set by `creating SWA|non-SWA KV cache`, taken by the next size line.
    next_kv_kind: Option<KvCacheKind>,
    /// Ollama closed its last memory block with "total memory": the next
    /// memory line starts a new block.
    ollama_block_done: bool,
}

impl Parser {
    fn line(&mut self, raw: &str) {
        let cleaned;
        let line = if raw.contains('\x1b') {
            cleaned = strip_ansi(raw);
            cleaned.as_str()
        } else {
            raw
        };
        if let Some(msg) = logfmt_value(line, "msg") {
            return self.ollama_line(line, msg);
        }
        if let Some(offloaded) = parse_offloaded(line) {
            self.report.offloaded_layers = Some(offloaded);
            return;
        }
        if let Some(buffer) = parse_buffer_line(line) {
            self.report.buffers.push(buffer);
            return;
        }
        let Some((func, rest)) = split_function(line) else {
            return;
        };
        if let Some(after) = rest.strip_prefix("KV self size") {
            let kind = self.next_kv_kind.take().unwrap_or(KvCacheKind::Full);
            if let Some(cache) = parse_kv_size(after, kind) {
                self.report.kv_caches.push(cache);
            }
            return;
        }
        match func {
            "llama_model_loader" => {
                if let Some(after) = rest.strip_prefix("loaded meta data") {
                    self.new_llama_load(loaded_model_path(after));
                }
            }
            "print_info" | "llm_load_print_meta" => {
                if let Some(("n_ctx_train", value)) = key_value(rest) {
                    self.report.n_ctx_train = value.parse().ok();
                }
            }
            "llama_context" | "llama_new_context_with_model" | "llama_init_from_model" => self.context_setting(rest),
            "load_tensors" | "llm_load_tensors" => {
                if let Some(mmap) = loader_mmap(rest) {
                    self.report.mmap = Some(mmap);
                }
            }
            _ if func.contains("kv_cache") || func.contains("memory_recurrent") => self.cache_line(func, rest),
            _ => {}
        }
    }

    /// A new llama.cpp load: what earlier loads reported no longer applies.
    /// Ollama's summary is its own and is reset by Ollama's runner start.
    fn new_llama_load(&mut self, model_path: Option<String>) {
        let ollama_memory = std::mem::take(&mut self.report.ollama_memory);
        self.report = LogReport {
            ollama_memory,
            model_path,
            ..LogReport::default()
        };
        self.next_kv_kind = None;
    }

    fn context_setting(&mut self, rest: &str) {
        let Some((key, value)) = key_value(rest) else {
            return;
        };
        let report = &mut self.report;
        match key {
            "n_ctx" => report.n_ctx = value.parse().ok(),
            "n_ctx_seq" | "n_ctx_per_seq" => report.n_ctx_seq = value.parse().ok(),
            "n_seq_max" => report.n_seq_max = value.parse().ok(),
            "kv_unified" => report.kv_unified = value.parse().ok(),
            _ => {}
        }
    }

    fn cache_line(&mut self, func: &str, rest: &str) {
        if let Some(after) = rest.strip_prefix("creating") {
            // "creating non-SWA KV cache, size = 4096 cells"
            // "creating     SWA KV cache, size = 2560 cells"
            let after = after.trim_start();
            if after.starts_with("non-SWA") {
                self.next_kv_kind = Some(KvCacheKind::Full);
            } else if after.starts_with("SWA") {
                self.next_kv_kind = Some(KvCacheKind::Swa);
            }
        } else if let Some(after) = rest.strip_prefix("size") {
            let kind = if func.contains("recurrent") {
                KvCacheKind::Recurrent
            } else {
                self.next_kv_kind.take().unwrap_or(KvCacheKind::Full)
            };
            if let Some(cache) = parse_kv_size(after, kind) {
                self.report.kv_caches.push(cache);
            }
        }
    }

    fn ollama_line(&mut self, line: &str, msg: &str) {
        let kind = match msg {
            "model weights" => BufferKind::Model,
            "kv cache" => BufferKind::Kv,
            "compute graph" => BufferKind::Compute,
            "total memory" => {
                self.ollama_block_done = true;
                return;
            }
            // llm/server.go logs the command of every runner it starts
            // (`ollama runner`, `ollama_llama_server`, `llama-server`).
            "starting runner" | "starting llama server" | "starting llama-server" => {
                let model_path = logfmt_value(line, "cmd").and_then(model_flag_value);
                self.report = LogReport {
                    model_path,
                    ..LogReport::default()
                };
                self.next_kv_kind = None;
                self.ollama_block_done = false;
                return;
            }
            other => {
                if let Some(offloaded) = parse_offloaded(other) {
                    self.report.offloaded_layers = Some(offloaded);
                }
                return;
            }
        };
        let device = logfmt_value(line, "device");
        let bytes = logfmt_value(line, "size").and_then(parse_human_bytes);
        let (Some(device), Some(bytes)) = (device, bytes) else {
            return;
        };
        if self.ollama_block_done {
            self.report.ollama_memory.clear();
            self.ollama_block_done = false;
        }
        self.report.ollama_memory.push(Buffer {
            device: device.to_string(),
            kind,
            bytes,
        });
    }
}

/// Removes ANSI escape sequences (`ESC [ ... final`) that colour logs.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            // Parameters and intermediates, then one final byte in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Finds llama.cpp's `FUNC:` among the first few tokens of a line and returns
/// it with the text after it; whatever precedes (timestamp, level, module
/// tag, syslog prefix) is skipped.
fn split_function(line: &str) -> Option<(&str, &str)> {
    let mut rest = line;
    for _ in 0..8 {
        let trimmed = rest.trim_start();
        let end = trimmed.find(char::is_whitespace).unwrap_or(trimmed.len());
        let (token, after) = trimmed.split_at(end);
        if token.is_empty() {
            return None;
        }
        if let Some(func) = token.strip_suffix(':').filter(|f| is_ident(f)) {
            return Some((func, after.trim_start()));
        }
        rest = after;
    }
    None
}

/// `key   = value` with the key alone on the left.
fn key_value(rest: &str) -> Option<(&str, &str)> {
    let (key, value) = rest.split_once('=')?;
    Some((key.trim(), value.trim()))
}

/// A decimal number of MiB at the start of `text` (after spaces), followed by
/// `MiB`; returns bytes and the text after `MiB`.
fn parse_mib_prefix(text: &str) -> Option<(u64, &str)> {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, after) = text.split_at(end);
    let after = after.trim_start().strip_prefix("MiB")?;
    Some((to_bytes(number.parse::<f64>().ok()? * BYTES_PER_MIB)?, after))
}

fn to_bytes(value: f64) -> Option<u64> {
    (value.is_finite() && (0.0..=MAX_BYTES).contains(&value)).then(|| value.round() as u64)
}

fn parse_buffer_line(line: &str) -> Option<Buffer> {
    const MARK: &str = " buffer size";
    let at = line.find(MARK)?;
    let (left, right) = line.split_at(at);
    let right = right.get(MARK.len()..)?.trim_start().strip_prefix('=')?;
    let (bytes, _) = parse_mib_prefix(right)?;
    let mut tokens = left.split_whitespace().rev();
    let last = tokens.next()?;
    let named_kind = match last {
        "model" => Some(BufferKind::Model),
        "KV" => Some(BufferKind::Kv),
        "compute" => Some(BufferKind::Compute),
        "output" => Some(BufferKind::Output),
        "RS" => Some(BufferKind::Rs),
        _ => None,
    };
    let device = if named_kind.is_some() { tokens.next()? } else { last };
    let func = tokens.next()?.strip_suffix(':').filter(|f| is_ident(f))?;
    if device.ends_with(':') {
        return None;
    }
    // Before 2024-10 the tensor loader printed "CUDA0 buffer size" for the
    // weights; other kindless lines ("input buffer", 2024) are not kept.
    let kind = match named_kind {
        Some(kind) => kind,
        None if func.ends_with("load_tensors") => BufferKind::Model,
        None => return None,
    };
    Some(Buffer {
        device: device.to_string(),
        kind,
        bytes,
    })
}

/// `offloaded 29/29 layers to GPU`, wherever it stands in the line.
fn parse_offloaded(line: &str) -> Option<(u32, u32)> {
    let (_, after) = line.split_once("offloaded ")?;
    let (counts, tail) = after.split_once(' ')?;
    if !tail.starts_with("layers to GPU") {
        return None;
    }
    let (done, total) = counts.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

/// "... with 33 key-value pairs and 236 tensors from PATH (version GGUF V3 (latest))"
fn loaded_model_path(after: &str) -> Option<String> {
    let (_, path) = after.split_once(" from ")?;
    let path = path.rfind(" (version ").map_or(path, |at| &path[..at]).trim();
    (!path.is_empty()).then(|| path.to_string())
}

/// `(mmap = true)` (2024–2025) or `(load_mode = mmap)` (2026) on the
/// "loading model tensors" line.
fn loader_mmap(rest: &str) -> Option<bool> {
    let value_after = |key: &str| {
        let (_, after) = rest.split_once(key)?;
        after.split([')', ',']).next().map(str::trim)
    };
    if let Some(value) = value_after("load_mode = ") {
        return super::cmdline::load_mode_uses_mmap(value);
    }
    value_after("(mmap = ")?.parse().ok()
}

/// After `size`/`KV self size`: `= N MiB (C cells, L layers, S/T seqs), K (t): N MiB, ...`
fn parse_kv_size(after: &str, kind: KvCacheKind) -> Option<KvCacheLine> {
    let after = after.trim_start().strip_prefix('=')?;
    let (bytes, mut tail) = parse_mib_prefix(after)?;
    let mut cache = KvCacheLine {
        kind,
        bytes,
        cells: None,
        layers: None,
        seqs: None,
        streams: None,
        parts: Vec::new(),
    };
    if let Some(open) = tail.trim_start().strip_prefix('(') {
        let (inside, rest) = open.split_once(')')?;
        tail = rest;
        // "4096 cells", "3 layers", "4/1 seqs", or "1 seqs  0 rs_seq".
        for item in inside.split(',') {
            let tokens: Vec<&str> = item.split_whitespace().take(4).collect();
            for pair in tokens.chunks_exact(2) {
                match (pair[0], pair[1]) {
                    (n, "cells") => cache.cells = n.parse().ok(),
                    (n, "layers") => cache.layers = n.parse().ok(),
                    (n, "seqs") => match n.split_once('/') {
                        Some((seqs, streams)) => {
                            cache.seqs = seqs.parse().ok();
                            cache.streams = streams.parse().ok();
                        }
                        None => cache.seqs = n.parse().ok(),
                    },
                    _ => {}
                }
            }
        }
    }
    // ", K (f16):  224.00 MiB, V (f16):  224.00 MiB"; at most K, V or R, S.
    for piece in tail.split(',').take(4) {
        let piece = piece.trim();
        let Some((name, typed)) = piece.split_once('(') else {
            continue;
        };
        let Some((dtype, amount)) = typed.split_once("):") else {
            continue;
        };
        let Some((part_bytes, _)) = parse_mib_prefix(amount) else {
            continue;
        };
        let name = name.trim();
        if name == "R" || name == "S" {
            cache.kind = KvCacheKind::Recurrent;
        }
        cache.parts.push(KvPart {
            name: name.to_string(),
            dtype: dtype.trim().to_string(),
            bytes: part_bytes,
        });
    }
    Some(cache)
}

/// The value of `key=` in a logfmt line (Go's log/slog text handler):
/// `key="quoted value"` or `key=bare`. Escaped quotes inside values end the
/// value early; no field this parser reads contains one.
fn logfmt_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut search = line;
    loop {
        let at = search.find(key)?;
        let before_ok = at == 0 || search[..at].ends_with(' ');
        let after = &search[at + key.len()..];
        if before_ok {
            if let Some(value) = after.strip_prefix('=') {
                return Some(match value.strip_prefix('"') {
                    Some(quoted) => quoted.split('"').next().unwrap_or(quoted),
                    None => value.split(' ').next().unwrap_or(value),
                });
            }
        }
        search = after;
    }
}

/// The path after `--model` in a runner command line Ollama logged.
fn model_flag_value(cmd: &str) -> Option<String> {
    let mut words = cmd.split_whitespace();
    words.find(|w| *w == "--model" || *w == "-m")?;
    words.next().map(String::from)
}

/// Go's `format.HumanBytes2` ("4.1 GiB", "65.5 MiB", "0 B") and decimal units.
fn parse_human_bytes(text: &str) -> Option<u64> {
    let (number, unit) = text.trim().split_once(' ').unwrap_or((text.trim(), "B"));
    let multiplier: f64 = match unit.trim() {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => BYTES_PER_MIB,
        "GiB" => BYTES_PER_MIB * 1024.0,
        "TiB" => BYTES_PER_MIB * 1024.0 * 1024.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return None,
    };
    to_bytes(number.parse::<f64>().ok()? * multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1_048_576;

    fn mib(value: f64) -> u64 {
        (value * BYTES_PER_MIB).round() as u64
    }

    fn buffer(device: &str, kind: BufferKind, bytes: u64) -> Buffer {
        Buffer {
            device: device.into(),
            kind,
            bytes,
        }
    }

    #[test]
    fn reference_server_log() {
        let report = parse_log(include_str!("../../tests/data/llama-server/server.log"));
        assert_eq!(
            report.model_path.as_deref(),
            Some("/srv/models/gemma-3-270m-q4_k_m.gguf")
        );
        assert_eq!(
            report.buffers,
            [
                buffer("CPU_Mapped", BufferKind::Model, mib(235.16)),
                buffer("CPU_REPACK", BufferKind::Model, mib(12.66)),
                buffer("CPU", BufferKind::Output, 4 * MIB),
                buffer("CPU", BufferKind::Kv, 12 * MIB),
                buffer("CPU", BufferKind::Kv, mib(37.5)),
                buffer("CPU", BufferKind::Compute, mib(24.78)),
            ]
        );
        let f16 = |name: &str, bytes| KvPart {
            name: name.into(),
            dtype: "f16".into(),
            bytes,
        };
        assert_eq!(
            report.kv_caches,
            [
                KvCacheLine {
                    kind: KvCacheKind::Full,
                    bytes: 12 * MIB,
                    cells: Some(4096),
                    layers: Some(3),
                    seqs: Some(4),
                    streams: Some(1),
                    parts: vec![f16("K", 6 * MIB), f16("V", 6 * MIB)],
                },
                KvCacheLine {
                    kind: KvCacheKind::Swa,
                    bytes: mib(37.5),
                    cells: Some(2560),
                    layers: Some(15),
                    seqs: Some(4),
                    streams: Some(1),
                    parts: vec![f16("K", mib(18.75)), f16("V", mib(18.75))],
                },
            ]
        );
        assert_eq!(report.n_ctx, Some(4096));
        assert_eq!(report.n_ctx_seq, Some(4096));
        assert_eq!(report.n_seq_max, Some(4));
        assert_eq!(report.kv_unified, Some(true));
        assert_eq!(report.n_ctx_train, Some(32768));
        assert_eq!(report.mmap, Some(true));
        assert_eq!(report.offloaded_layers, None, "a CPU build prints no offload line");
        assert!(report.ollama_memory.is_empty());

        assert_eq!(report.total(BufferKind::Model, false), Some(mib(235.16) + mib(12.66)));
        assert_eq!(report.total(BufferKind::Model, true), Some(0), "all in system RAM");
        assert_eq!(report.total(BufferKind::Kv, false), Some(mib(49.5)));
        assert_eq!(report.total(BufferKind::Compute, false), Some(mib(24.78)));
        assert_eq!(report.total(BufferKind::Rs, false), None, "unknown is not zero");
    }

    #[test]
    fn current_format_on_a_gpu() {
        let log = "\
load_tensors: offloaded 29/29 layers to GPU
load_tensors:        CUDA0 model buffer size =   604.15 MiB
load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
llama_context:  CUDA_Host  output buffer size =     0.58 MiB
llama_kv_cache:        CUDA0 KV buffer size =   448.00 MiB
llama_kv_cache: size =  448.00 MiB (  4096 cells,  28 layers,  1/1 seqs), K (f16):  224.00 MiB, V (f16):  224.00 MiB
sched_reserve:      CUDA0 compute buffer size =   300.75 MiB
sched_reserve:  CUDA_Host compute buffer size =    16.01 MiB
";
        let report = parse_log(log);
        assert_eq!(report.offloaded_layers, Some((29, 29)));
        assert_eq!(report.total(BufferKind::Model, true), Some(mib(604.15)));
        assert_eq!(report.total(BufferKind::Model, false), Some(mib(604.15) + mib(235.16)));
        assert_eq!(report.total(BufferKind::Output, true), Some(0));
        assert_eq!(report.total(BufferKind::Kv, true), Some(448 * MIB));
        assert_eq!(report.total(BufferKind::Compute, true), Some(mib(300.75)));
        assert_eq!(report.kv_caches[0].cells, Some(4096));
        assert_eq!(report.kv_caches[0].layers, Some(28));
    }

    #[test]
    fn every_historic_format() {
        let cases: &[(&str, Buffer)] = &[
            // until 2024-10: no kind word on the weights
            (
                "llm_load_tensors:      CUDA0 buffer size =  4095.05 MiB",
                buffer("CUDA0", BufferKind::Model, mib(4095.05)),
            ),
            (
                "llm_load_tensors:        CPU buffer size =    70.31 MiB",
                buffer("CPU", BufferKind::Model, mib(70.31)),
            ),
            (
                "llm_load_tensors: ROCm0 model buffer size = 1918.35 MiB",
                buffer("ROCm0", BufferKind::Model, mib(1918.35)),
            ),
            (
                "llama_kv_cache_init:      CUDA0 KV buffer size =  1024.00 MiB",
                buffer("CUDA0", BufferKind::Kv, 1024 * MIB),
            ),
            (
                "llama_new_context_with_model:  CUDA_Host  output buffer size =     2.02 MiB",
                buffer("CUDA_Host", BufferKind::Output, mib(2.02)),
            ),
            (
                "llama_new_context_with_model:      CUDA0 compute buffer size =   560.00 MiB",
                buffer("CUDA0", BufferKind::Compute, 560 * MIB),
            ),
            // 2025-01
            (
                "llama_init_from_model:    Vulkan0 compute buffer size =   164.01 MiB",
                buffer("Vulkan0", BufferKind::Compute, mib(164.01)),
            ),
            // 2025-03
            (
                "init:      CUDA1 KV buffer size =   224.00 MiB",
                buffer("CUDA1", BufferKind::Kv, 224 * MIB),
            ),
            (
                "llama_context:      Metal compute buffer size =   300.75 MiB",
                buffer("Metal", BufferKind::Compute, mib(300.75)),
            ),
            // 2025-05
            (
                "llama_kv_cache_unified:      SYCL0 KV buffer size =   448.00 MiB",
                buffer("SYCL0", BufferKind::Kv, 448 * MIB),
            ),
            // 2025-06
            (
                "llama_memory_recurrent:        CPU RS buffer size =     2.67 MiB",
                buffer("CPU", BufferKind::Rs, mib(2.67)),
            ),
            // 2026-01, with a timestamp and level letter
            (
                "0.02.386.114 I sched_reserve:      MTL0 compute buffer size =    24.78 MiB",
                buffer("MTL0", BufferKind::Compute, mib(24.78)),
            ),
        ];
        for (line, expected) in cases {
            let report = parse_log(line);
            assert_eq!(report.buffers, std::slice::from_ref(expected), "{line}");
        }

        // KV summaries of each era.
        let old = parse_log(
            "llama_new_context_with_model: KV self size  =  256.00 MiB, K (f16):  128.00 MiB, V (f16):  128.00 MiB",
        );
        assert_eq!(old.kv_caches[0].bytes, 256 * MIB);
        assert_eq!(old.kv_caches[0].cells, None);
        assert_eq!(old.kv_caches[0].parts[1].bytes, 128 * MIB);
        let mid = parse_log("llama_context: KV self size  =  238.00 MiB, K (q8_0):  119.00 MiB, V (q8_0):  119.00 MiB");
        assert_eq!(mid.kv_caches[0].parts[0].dtype, "q8_0");
        let unified = parse_log(
            "llama_kv_cache_unified: size =  448.00 MiB (  4096 cells,  28 layers,  1 seqs), K (f16):  224.00 MiB, V (f16):  224.00 MiB",
        );
        assert_eq!(unified.kv_caches[0].seqs, Some(1));
        assert_eq!(unified.kv_caches[0].streams, None);
        let iswa = parse_log(
            "llama_kv_cache_unified_iswa: creating     SWA KV cache, size = 1536 cells\n\
             llama_kv_cache_unified: size =  174.00 MiB (  1536 cells,  29 layers,  1 seqs), K (f16):   87.00 MiB, V (f16):   87.00 MiB",
        );
        assert_eq!(iswa.kv_caches[0].kind, KvCacheKind::Swa);
        let recurrent = parse_log(
            "llama_memory_recurrent: size =    2.67 MiB (     1 cells,  24 layers,  1 seqs  0 rs_seq), R (f32):    0.42 MiB, S (f32):    2.25 MiB",
        );
        let cache = &recurrent.kv_caches[0];
        assert_eq!(cache.kind, KvCacheKind::Recurrent);
        assert_eq!((cache.cells, cache.layers, cache.seqs), (Some(1), Some(24), Some(1)));
        assert_eq!(
            cache.parts[1],
            KvPart {
                name: "S".into(),
                dtype: "f32".into(),
                bytes: mib(2.25)
            }
        );
        let mla = parse_log(
            "llama_kv_cache: size =  121.50 MiB (  4096 cells,  27 layers,  1/1 seqs), K (f16):  121.50 MiB, V (f16):    0.00 MiB",
        );
        assert_eq!(mla.kv_caches[0].parts[1].bytes, 0);

        // Context lines of each era.
        let ctx = parse_log(
            "llama_new_context_with_model: n_ctx      = 8192\n\
             llama_init_from_model: n_seq_max     = 2\n\
             llama_context: n_ctx_per_seq = 4096\n\
             llm_load_print_meta: n_ctx_train      = 131072\n\
             llm_load_tensors: loading model tensors, this can take a while... (mmap = false)",
        );
        assert_eq!(ctx.n_ctx, Some(8192));
        assert_eq!(ctx.n_seq_max, Some(2));
        assert_eq!(ctx.n_ctx_seq, Some(4096));
        assert_eq!(ctx.n_ctx_train, Some(131072));
        assert_eq!(ctx.mmap, Some(false));
        let load_mode = parse_log("load_tensors: loading model tensors, this can take a while... (load_mode = none)");
        assert_eq!(load_mode.mmap, Some(false));
    }

    #[test]
    fn ollama_server_log() {
        let log = "\
time=2026-05-05T01:30:33.700+08:00 level=INFO source=server.go:430 msg=\"starting runner\" cmd=\"/usr/bin/ollama runner --model /root/.ollama/models/blobs/sha256-aaaa --port 44344\"
time=2026-05-05T01:30:33.796+08:00 level=INFO source=device.go:240 msg=\"model weights\" device=CUDA0 size=\"3.0 GiB\"
time=2026-05-05T01:30:33.796+08:00 level=INFO source=device.go:272 msg=\"total memory\" size=\"3.5 GiB\"
time=2026-05-05T01:30:34.100+08:00 level=INFO source=ggml.go:494 msg=\"offloaded 29/29 layers to GPU\"
time=2026-05-05T01:30:34.101+08:00 level=INFO source=device.go:240 msg=\"model weights\" device=CUDA0 size=\"4.1 GiB\"
time=2026-05-05T01:30:34.101+08:00 level=INFO source=device.go:245 msg=\"model weights\" device=CPU size=\"308.2 MiB\"
time=2026-05-05T01:30:34.101+08:00 level=INFO source=device.go:251 msg=\"kv cache\" device=CUDA0 size=\"1.8 GiB\"
time=2026-05-05T01:30:34.101+08:00 level=INFO source=device.go:262 msg=\"compute graph\" device=CUDA0 size=\"0 B\"
time=2026-05-05T01:30:34.101+08:00 level=INFO source=device.go:272 msg=\"total memory\" size=\"6.2 GiB\"
[GIN] 2026/05/05 - 01:30:40 | 200 |  1.2s |  127.0.0.1 | POST \"/api/generate\"
";
        let report = parse_log(log);
        assert_eq!(
            report.model_path.as_deref(),
            Some("/root/.ollama/models/blobs/sha256-aaaa")
        );
        assert_eq!(report.offloaded_layers, Some((29, 29)));
        let gib = |v: f64| (v * 1024.0 * BYTES_PER_MIB).round() as u64;
        assert_eq!(
            report.ollama_memory,
            [
                buffer("CUDA0", BufferKind::Model, gib(4.1)),
                buffer("CPU", BufferKind::Model, mib(308.2)),
                buffer("CUDA0", BufferKind::Kv, gib(1.8)),
                buffer("CUDA0", BufferKind::Compute, 0),
            ],
            "only the last block counts"
        );
        assert_eq!(report.total(BufferKind::Model, true), Some(gib(4.1)));
        assert_eq!(report.total(BufferKind::Compute, true), Some(0));

        // The older engine: raw llama.cpp lines between Ollama's own; they are
        // preferred over Ollama's summary.
        let log = "\
time=2024-11-01T10:00:00.000Z level=INFO source=server.go:383 msg=\"starting llama server\" cmd=\"/tmp/ollama/runners/cuda_v12/ollama_llama_server --model /root/.ollama/models/blobs/sha256-bbbb --ctx-size 8192\"
llama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from /root/.ollama/models/blobs/sha256-bbbb (version GGUF V3 (latest))
llm_load_tensors: offloaded 33/33 layers to GPU
llm_load_tensors:        CPU buffer size =    70.31 MiB
llm_load_tensors:      CUDA0 buffer size =  4095.05 MiB
llama_new_context_with_model: n_ctx      = 8192
llama_kv_cache_init:      CUDA0 KV buffer size =  1024.00 MiB
llama_new_context_with_model: KV self size  = 1024.00 MiB, K (f16):  512.00 MiB, V (f16):  512.00 MiB
time=2024-11-01T10:00:02.000Z level=INFO source=server.go:626 msg=\"llama runner started in 2.01 seconds\"
";
        let report = parse_log(log);
        assert_eq!(
            report.model_path.as_deref(),
            Some("/root/.ollama/models/blobs/sha256-bbbb")
        );
        assert_eq!(report.offloaded_layers, Some((33, 33)));
        assert_eq!(report.total(BufferKind::Model, true), Some(mib(4095.05)));
        assert_eq!(report.total(BufferKind::Kv, true), Some(1024 * MIB));
        assert_eq!(report.n_ctx, Some(8192));
        assert_eq!(report.kv_caches.len(), 1);
    }

    #[test]
    fn a_new_load_starts_over() {
        let log = "\
llama_model_loader: loaded meta data with 3 key-value pairs and 1 tensors from /m/first.gguf (version GGUF V3 (latest))
load_tensors:        CUDA0 model buffer size =   100.00 MiB
llama_context: n_ctx = 4096
llama_kv_cache_iswa: creating     SWA KV cache, size = 2560 cells
llama_model_loader: loaded meta data with 3 key-value pairs and 1 tensors from /m/with (version) in name.gguf (version GGUF V3 (latest))
load_tensors:        CUDA0 model buffer size =   200.00 MiB
llama_kv_cache: size =   12.00 MiB (  4096 cells,   3 layers,  1/1 seqs), K (f16):    6.00 MiB, V (f16):    6.00 MiB
";
        let report = parse_log(log);
        assert_eq!(report.model_path.as_deref(), Some("/m/with (version) in name.gguf"));
        assert_eq!(report.buffers, [buffer("CUDA0", BufferKind::Model, 200 * MIB)]);
        assert_eq!(report.n_ctx, None);
        assert_eq!(
            report.kv_caches[0].kind,
            KvCacheKind::Full,
            "pending SWA mark was reset"
        );
    }

    #[test]
    fn prefixes_and_colours() {
        let lines = [
            "\x1b[32mI \x1b[0mload_tensors:        CUDA0 model buffer size =   100.00 MiB",
            "Nov 30 17:00:00 host llama-server[123]: load_tensors: CUDA0 model buffer size = 100.00 MiB",
            "2026-01-01T00:00:00.000000Z I load_tensors: CUDA0 model buffer size = 100.00 MiB",
        ];
        for line in lines {
            assert_eq!(
                parse_log(line).buffers,
                [buffer("CUDA0", BufferKind::Model, 100 * MIB)],
                "{line}"
            );
        }
    }

    #[test]
    fn device_memory_classification() {
        for device in [
            "CUDA0",
            "CUDA1",
            "ROCm0",
            "Vulkan0",
            "SYCL0",
            "MUSA0",
            "Metal",
            "MTL0",
            "MTL0_Mapped",
        ] {
            assert!(is_device_memory(device), "{device}");
        }
        for device in [
            "CPU",
            "CPU_Mapped",
            "CPU_REPACK",
            "CUDA_Host",
            "Vulkan_Host",
            "BLAS",
            "AMX",
            "RPC[127.0.0.1:50052]",
            "",
        ] {
            assert!(!is_device_memory(device), "{device}");
        }
    }

    #[test]
    fn garbage_truncated_and_huge_input() {
        let garbage = [
            "",
            "\x1b",
            "\x1b[",
            ": : : :",
            "load_tensors:",
            "load_tensors: CUDA0 model buffer size",
            "load_tensors: CUDA0 model buffer size =",
            "load_tensors: CUDA0 model buffer size = abc MiB",
            "load_tensors: CUDA0 model buffer size = 1.2.3 MiB",
            "load_tensors: CUDA0 model buffer size = 100.00 GiB",
            "load_tensors: CUDA0 model buffer size = 99999999999999999999999999.00 MiB",
            "CUDA0 model buffer size = 1.00 MiB",
            "load_tensors: model buffer size = 1.00 MiB",
            "llama_context:  CPU input buffer size = 1.00 MiB",
            "llama_kv_cache: size = ",
            "llama_kv_cache: size = 1.00 MiB (  4096 cells",
            "llama_kv_cache: size = 1.00 MiB (x y z w v), K (f16: 1 MiB, V ): , R (",
            "llama_context: n_ctx = 99999999999999999999999",
            "llama_context: n_ctx = -5",
            "load_tensors: offloaded 99999999999/1 layers to GPU",
            "llama_model_loader: loaded meta data from ",
            "msg=",
            "msg=\"model weights\" device=CUDA0 size=\"1e400 GiB\"",
            "msg=\"model weights\" device= size=",
            "msg=\"starting runner\" cmd=\"ollama runner --model\"",
            "é: ü ñ buffer size = 1 MiB",
        ];
        for line in garbage {
            let report = parse_log(line);
            assert!(report.buffers.is_empty(), "{line:?}: {report:?}");
            assert!(report.ollama_memory.is_empty(), "{line:?}");
            assert_eq!(report.n_ctx, None, "{line:?}");
            assert_eq!(report.offloaded_layers, None, "{line:?}");
            assert_eq!(report.model_path, None, "{line:?}");
        }
        // A truncated cache line keeps what it could read before the cut.
        let cut = parse_log("llama_kv_cache: size = 1.00 MiB (x y z w v), K (f16: 1 MiB, V ): , R (");
        assert_eq!(cut.kv_caches.len(), 1);
        assert!(cut.kv_caches[0].parts.is_empty());
        // Overlong lines are skipped.
        let long = format!(
            "load_tensors: CUDA0 model buffer size = 1.00 MiB{}",
            " ".repeat(MAX_LINE)
        );
        assert!(parse_log(&long).buffers.is_empty());
        // Binary noise.
        let noise: String = (0u8..=255).map(char::from).cycle().take(100_000).collect();
        assert_eq!(parse_log(&noise), LogReport::default());
    }
}
