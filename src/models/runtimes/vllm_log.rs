//! What vLLM logs of its memory as it starts: the KV pool it made (tokens,
//! the memory it took), the weights it loaded and the activation peak it
//! profiled, in its own words. Lines are found by their text wherever the
//! prefix (`(EngineCore pid=N) INFO 12-02 04:15:40 [file.py:123]`) and
//! colours put them; when a log holds several starts, the last one counts.
//!
//! The formats, vLLM 0.6 to 0.32:
//! - `GPU KV cache size: 2,097,152 tokens` and, on the same line,
//!   `Maximum concurrency for 512 tokens per request: 4096.00x`
//!   (vllm/v1/core/kv_cache_utils.py `update_kv_cache_capacity`; `CPU` on
//!   the CPU build, `GPU + host` with hierarchical sparse attention);
//! - `Available KV cache memory: 11.45 GiB` (vllm/v1/worker/gpu_worker.py
//!   `determine_available_memory`);
//! - `Explicitly set (1.0/23.54) GiB for KV cache on node 0.` and
//!   `Auto set (…/…) GiB for KV cache on node 0, …` (the CPU build:
//!   vllm/v1/worker/cpu_worker.py `determine_available_memory`);
//! - `Model loading took 1.12 GiB memory and 3.4 seconds`
//!   (vllm/v1/worker/gpu_model_runner.py `load_model`);
//! - `torch peak memory increase: 0.6GiB` inside the memory profile
//!   (vllm/utils/mem_utils.py `MemoryProfilingResult.__repr__`, logged at
//!   debug level);
//! - `Using max model len 512` (vllm/config/model.py).
//!
//! vLLM prints GiB rounded to two decimals (vllm/utils/mem_utils.py
//! `format_gib`): those bytes are within 5 MiB of its own; tokens are exact.

use serde::Serialize;

/// Bytes of one GiB, the unit of vLLM's memory lines.
const GIB: f64 = (1u64 << 30) as f64;

/// Longest line looked at; vLLM's config dumps are long, these are not.
const MAX_LINE: usize = 4096;

/// What one vLLM start logged of its memory. Every field is null when its
/// line is absent, never 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VllmLogReport {
    /// Tokens its KV pool holds: `KV cache size: N tokens`.
    pub kv_tokens: Option<u64>,
    /// Where that pool lives, as vLLM says it: `GPU`, `CPU`, `GPU + host`.
    pub kv_pool_device: Option<String>,
    /// Requests of `max_model_len` tokens the pool holds at once.
    pub max_concurrency: Option<f64>,
    /// Tokens per request that concurrency is counted for (its max model len).
    pub max_model_len: Option<u64>,
    /// Memory given to the KV cache (`Available KV cache memory`, or the
    /// CPU build's `Explicitly set`/`Auto set … GiB for KV cache`).
    pub kv_bytes: Option<u64>,
    /// The phrase `kv_bytes` came from, for the note beside it.
    pub kv_bytes_line: Option<&'static str>,
    /// `Model loading took X GiB memory`.
    pub weights_bytes: Option<u64>,
    /// `torch peak memory increase`: the activations' peak in profiling.
    pub activation_peak_bytes: Option<u64>,
}

impl VllmLogReport {
    fn is_empty(&self) -> bool {
        *self == VllmLogReport::default()
    }
}

/// vLLM's memory lines in a log; None when it has none of them.
pub fn parse_vllm_log(text: &str) -> Option<VllmLogReport> {
    let mut report = VllmLogReport::default();
    for line in text.lines().filter(|l| l.len() <= MAX_LINE) {
        read_line(line, &mut report);
    }
    (!report.is_empty()).then_some(report)
}

fn read_line(line: &str, report: &mut VllmLogReport) {
    if let Some((before, after)) = line.split_once(" KV cache size: ") {
        // The pool's name is the last word(s) before the phrase, after the
        // `[file.py:N]` prefix.
        let device = before.rsplit(']').next().unwrap_or(before).trim();
        report.kv_pool_device = (!device.is_empty() && device.len() <= 16).then(|| device.to_string());
        report.kv_tokens = after.split_once(" tokens").and_then(|(n, _)| count(n));
    } else if let Some((_, after)) = line.split_once("Available KV cache memory: ") {
        report.kv_bytes = gib_before(after, "GiB");
        report.kv_bytes_line = Some("Available KV cache memory");
    } else if let Some(at) = line.find(" GiB for KV cache") {
        // `Explicitly set (1.0/23.54) GiB for KV cache`: the first figure.
        let head = &line[..at];
        let phrase = if head.contains("Explicitly set (") {
            "Explicitly set … GiB for KV cache"
        } else {
            "Auto set … GiB for KV cache"
        };
        let figure = head.rsplit_once('(').and_then(|(_, f)| f.split('/').next());
        report.kv_bytes = figure.and_then(|f| gib(f.trim()));
        report.kv_bytes_line = report.kv_bytes.map(|_| phrase);
    } else if let Some((_, after)) = line.split_once("Model loading took ") {
        report.weights_bytes = gib_before(after, "GiB");
    } else if let Some((_, after)) = line.split_once("Using max model len ") {
        report.max_model_len = count(after.trim());
    }
    // On the pool's line since 2025, on a line of its own before.
    if let Some((_, rest)) = line.split_once("Maximum concurrency for ") {
        let (len, rest) = rest.split_once(" tokens per request: ").unwrap_or(("", ""));
        report.max_model_len = count(len).or(report.max_model_len);
        report.max_concurrency = rest
            .split_once('x')
            .and_then(|(n, _)| n.trim().parse::<f64>().ok())
            .filter(|c| c.is_finite() && *c >= 0.0);
    }
    if let Some((_, after)) = line.split_once("torch peak memory increase: ") {
        report.activation_peak_bytes = gib_before(after, "GiB");
    }
}

/// `2,097,152` (vLLM's thousands separators) as a number.
fn count(text: &str) -> Option<u64> {
    let digits: String = text.trim().chars().filter(|c| *c != ',').collect();
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The GiB figure in front of `unit` (`11.45 GiB`, `0.6GiB`), in bytes.
fn gib_before(text: &str, unit: &str) -> Option<u64> {
    gib(text.split_once(unit)?.0.trim())
}

/// A GiB figure in bytes: finite, not negative, below 2^64 bytes.
fn gib(figure: &str) -> Option<u64> {
    let value: f64 = figure.parse().ok()?;
    let bytes = value * GIB;
    (value.is_finite() && value >= 0.0 && bytes < u64::MAX as f64).then(|| bytes.round() as u64)
}

/// The KV pool vLLM makes of `available_bytes`: whole blocks of
/// `block_size` tokens, each costing `block_size × bytes_per_token` over
/// all layers (vllm/v1/core/kv_cache_utils.py `get_num_blocks`:
/// `available_memory // page_size // num_layers`, the page one layer's
/// block). Returns the blocks; None when a figure is 0 or the product
/// overflows.
pub fn kv_pool_blocks(available_bytes: u64, bytes_per_token: u64, block_size: u64) -> Option<u64> {
    available_bytes.checked_div(bytes_per_token.checked_mul(block_size)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of the real vLLM 0.32 CPU server of tests/real_vllm.rs
    /// (a float32 Llama of 2 layers, 2 KV heads of 32, 1 GiB of KV cache).
    const CPU_START: &str = "\
(APIServer pid=6427) INFO 12-02 04:16:40 [model.py:2152] Using max model len 512
(Worker pid=7107) INFO 12-02 04:18:40 [cpu_worker.py:260] Explicitly set (1.0/23.54) GiB for KV cache on node 0.
(EngineCore pid=6885) INFO 12-02 04:18:40 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 512 tokens per request: 2048.00x
";

    /// A GPU start of vLLM 0.11 (its lines as gpu_worker.py and
    /// gpu_model_runner.py print them), colours and all.
    const GPU_START: &str = "\
\x1b[1;36m(EngineCore_DP0 pid=812)\x1b[0;0m INFO 10-14 09:12:01 [gpu_model_runner.py:2653] Model loading took 1.1201 GiB and 3.512 seconds
(EngineCore_DP0 pid=812) DEBUG 10-14 09:12:09 [gpu_worker.py:298] Memory profiling takes 5.12 seconds. Total non KV cache memory: 2.31GiB; torch peak memory increase: 0.61GiB; total consumed (from mem_get_info): 3.4GiB; weights memory: 1.12GiB.
(EngineCore_DP0 pid=812) INFO 10-14 09:12:09 [gpu_worker.py:299] Available KV cache memory: 11.45 GiB
(EngineCore_DP0 pid=812) INFO 10-14 09:12:10 [kv_cache_utils.py:1087] GPU KV cache size: 107,184 tokens
(EngineCore_DP0 pid=812) INFO 10-14 09:12:10 [kv_cache_utils.py:1091] Maximum concurrency for 40,960 tokens per request: 2.62x
";

    #[test]
    fn the_cpu_build_says_its_pool_in_tokens_and_gib() {
        let r = parse_vllm_log(CPU_START).unwrap();
        assert_eq!(r.kv_tokens, Some(1_048_576));
        assert_eq!(r.kv_pool_device.as_deref(), Some("CPU"));
        assert_eq!(r.max_concurrency, Some(2048.0));
        assert_eq!(r.max_model_len, Some(512));
        assert_eq!(r.kv_bytes, Some(1 << 30));
        assert_eq!(r.kv_bytes_line, Some("Explicitly set … GiB for KV cache"));
        assert_eq!(r.weights_bytes, None, "the CPU build logs no weights");
        assert_eq!(r.activation_peak_bytes, None);
        // 1 GiB of 1,024-byte tokens in blocks of 128: 8,192 blocks.
        assert_eq!(kv_pool_blocks(1 << 30, 1024, 128), Some(8192));
    }

    #[test]
    fn a_gpu_start_says_weights_activations_and_kv() {
        let r = parse_vllm_log(GPU_START).unwrap();
        assert_eq!(r.kv_tokens, Some(107_184));
        assert_eq!(r.kv_pool_device.as_deref(), Some("GPU"));
        // Older builds print the concurrency on a line of its own.
        assert_eq!(r.max_concurrency, Some(2.62));
        assert_eq!(r.max_model_len, Some(40_960));
        assert_eq!(r.kv_bytes, Some((11.45 * GIB).round() as u64));
        assert_eq!(r.kv_bytes_line, Some("Available KV cache memory"));
        assert_eq!(r.weights_bytes, Some((1.1201 * GIB).round() as u64));
        assert_eq!(r.activation_peak_bytes, Some((0.61 * GIB).round() as u64));
    }

    #[test]
    fn the_last_start_of_an_appended_log_counts() {
        let twice = format!("{GPU_START}{CPU_START}");
        let r = parse_vllm_log(&twice).unwrap();
        assert_eq!(r.kv_tokens, Some(1_048_576));
        assert_eq!(r.kv_bytes, Some(1 << 30));
    }

    #[test]
    fn garbage_is_no_report_and_bad_figures_are_unknown() {
        assert_eq!(parse_vllm_log(""), None);
        assert_eq!(parse_vllm_log("llama_kv_cache: size = 448.00 MiB\n"), None);
        let odd = "GPU KV cache size: -5 tokens, Maximum concurrency for x tokens per request: NaNx\n\
                   Available KV cache memory: inf GiB\n\
                   Model loading took 1e300 GiB memory\n\
                   Explicitly set (/) GiB for KV cache\n\
                   torch peak memory increase: -1GiB\n";
        let r = parse_vllm_log(odd).unwrap();
        assert_eq!(
            (
                r.kv_tokens,
                r.max_concurrency,
                r.kv_bytes,
                r.weights_bytes,
                r.activation_peak_bytes
            ),
            (None, None, None, None, None)
        );
        let long = format!("GPU KV cache size: {} tokens\n", "9".repeat(MAX_LINE));
        assert_eq!(parse_vllm_log(&long), None, "an over-long line is skipped");
        assert_eq!(count("99999999999999999999999"), None);
        assert_eq!(kv_pool_blocks(1 << 30, 0, 16), None);
        assert_eq!(kv_pool_blocks(1 << 30, u64::MAX, 16), None);
    }
}
