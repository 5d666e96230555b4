//! vLLM: its OpenAI-compatible `GET /v1/models`, its `GET /metrics`
//! (vllm/v1/metrics/loggers.py; V0 in vllm/engine/metrics.py), and the two
//! files that describe a model it serves: the Hugging Face `config.json`
//! (shape of the KV cache) and the `.safetensors` header (parameters and
//! bytes of the weights).

use super::{as_count, lenient, lenient_vec, parse_data_list, parse_object, parse_prometheus};
use serde::{Deserialize, Serialize};

/// One entry of `GET /v1/models` `data[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VllmModel {
    /// The served name (`--served-model-name`, else the model argument).
    pub id: Option<String>,
    /// The model it was loaded from (repo id or directory).
    pub root: Option<String>,
    pub max_model_len: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawModel {
    #[serde(deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    root: Option<String>,
    #[serde(deserialize_with = "lenient")]
    max_model_len: Option<u64>,
}

pub fn parse_models(body: &[u8]) -> Result<Vec<VllmModel>, String> {
    Ok(parse_data_list::<RawModel>(body, "vLLM /v1/models")?
        .into_iter()
        .map(|m| VllmModel {
            id: m.id,
            root: m.root,
            max_model_len: m.max_model_len,
        })
        .collect())
}

/// What vLLM's `/metrics` says about its KV cache and load. Request counts
/// are summed over engines (data parallel); the usage is the highest one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VllmMetrics {
    /// Fraction 0..1 of KV blocks in use: `vllm:kv_cache_usage_perc`
    /// (V1; despite the name not a percentage), else the older
    /// `vllm:gpu_cache_usage_perc`.
    pub kv_cache_usage: Option<f64>,
    pub requests_running: Option<u64>,
    pub requests_waiting: Option<u64>,
    /// From the labels of `vllm:cache_config_info`.
    pub num_gpu_blocks: Option<u64>,
    pub block_size: Option<u64>,
    pub cache_dtype: Option<String>,
    /// `gpu_memory_utilization` as it runs, also a label of `cache_config_info`.
    pub gpu_memory_utilization: Option<f64>,
    /// The bytes given to the KV cache when its size was set, not
    /// profiled (`kv_cache_memory_bytes`: `--kv-cache-memory-bytes`, the
    /// CPU build's `VLLM_CPU_KVCACHE_SPACE`); `None` otherwise.
    pub kv_cache_memory_bytes: Option<u64>,
    /// Counters since it started (vllm/v1/metrics/loggers.py): preemptions,
    /// prefix-cache queries and hits (tokens), prompt and generated tokens.
    pub preemptions: Option<u64>,
    pub prefix_cache_queries: Option<u64>,
    pub prefix_cache_hits: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub generation_tokens: Option<u64>,
}

impl VllmMetrics {
    /// Tokens the KV cache holds: blocks × tokens per block.
    pub fn kv_capacity_tokens(&self) -> Option<u64> {
        self.num_gpu_blocks?.checked_mul(self.block_size?)
    }

    /// Prefix-cache hits over queries, 0 to 1; None before any query.
    pub fn prefix_cache_hit_ratio(&self) -> Option<f64> {
        let (hits, queries) = (self.prefix_cache_hits?, self.prefix_cache_queries?);
        (queries > 0 && hits <= queries).then(|| hits as f64 / queries as f64)
    }
}

pub fn parse_metrics(text: &str) -> Result<VllmMetrics, String> {
    let mut metrics = VllmMetrics::default();
    let add = |total: &mut Option<u64>, value: f64| {
        if let Some(n) = as_count(value) {
            *total = Some(total.unwrap_or(0).saturating_add(n));
        }
    };
    for sample in parse_prometheus(text)? {
        match sample.name.as_str() {
            "vllm:kv_cache_usage_perc" | "vllm:gpu_cache_usage_perc" if (0.0..=1.0).contains(&sample.value) => {
                let highest = metrics.kv_cache_usage.map_or(sample.value, |u| u.max(sample.value));
                metrics.kv_cache_usage = Some(highest);
            }
            "vllm:num_requests_running" => add(&mut metrics.requests_running, sample.value),
            "vllm:num_requests_waiting" => add(&mut metrics.requests_waiting, sample.value),
            "vllm:num_preemptions_total" => add(&mut metrics.preemptions, sample.value),
            "vllm:prefix_cache_queries_total" => add(&mut metrics.prefix_cache_queries, sample.value),
            "vllm:prefix_cache_hits_total" => add(&mut metrics.prefix_cache_hits, sample.value),
            "vllm:prompt_tokens_total" => add(&mut metrics.prompt_tokens, sample.value),
            "vllm:generation_tokens_total" => add(&mut metrics.generation_tokens, sample.value),
            "vllm:cache_config_info" => {
                metrics.num_gpu_blocks = sample.label("num_gpu_blocks").and_then(|v| v.parse().ok());
                metrics.block_size = sample.label("block_size").and_then(|v| v.parse().ok());
                metrics.cache_dtype = sample.label("cache_dtype").map(String::from);
                metrics.gpu_memory_utilization = sample
                    .label("gpu_memory_utilization")
                    .and_then(|v| v.parse().ok())
                    .filter(|u: &f64| u.is_finite() && (0.0..=1.0).contains(u));
                metrics.kv_cache_memory_bytes = sample.label("kv_cache_memory_bytes").and_then(|v| v.parse().ok());
            }
            _ => {}
        }
    }
    Ok(metrics)
}

/// The fields of a Hugging Face `config.json` that shape the KV cache.
/// Multimodal configs keep them under `text_config`; those are used for
/// whatever the top level lacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HfConfig {
    pub model_type: Option<String>,
    /// `architectures[0]` (`Qwen3ForCausalLM`).
    pub architecture: Option<String>,
    pub num_hidden_layers: Option<u64>,
    pub num_attention_heads: Option<u64>,
    pub num_key_value_heads: Option<u64>,
    pub head_dim: Option<u64>,
    pub hidden_size: Option<u64>,
    /// `torch_dtype`, renamed `dtype` in transformers 4.56.
    pub dtype: Option<String>,
    /// Window of sliding-window attention, when the model has one (some
    /// configs set it while `use_sliding_window` is false).
    pub sliding_window: Option<u64>,
    pub max_position_embeddings: Option<u64>,
    /// Multi-head latent attention (DeepSeek V2/V3): the compressed KV width
    /// and the rope part stored beside it.
    pub kv_lora_rank: Option<u64>,
    pub qk_rope_head_dim: Option<u64>,
}

impl HfConfig {
    /// KV heads: `num_key_value_heads`, else one per attention head (MHA).
    pub fn kv_heads(&self) -> Option<u64> {
        self.num_key_value_heads.or(self.num_attention_heads)
    }

    /// `head_dim`, else `hidden_size / num_attention_heads`.
    pub fn head_dim(&self) -> Option<u64> {
        self.head_dim
            .or_else(|| self.hidden_size?.checked_div(self.num_attention_heads?))
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConfig {
    #[serde(deserialize_with = "lenient")]
    model_type: Option<String>,
    #[serde(deserialize_with = "lenient_vec")]
    architectures: Vec<String>,
    #[serde(deserialize_with = "lenient")]
    num_hidden_layers: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    num_attention_heads: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    num_key_value_heads: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    head_dim: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    hidden_size: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    torch_dtype: Option<String>,
    #[serde(deserialize_with = "lenient")]
    dtype: Option<String>,
    #[serde(deserialize_with = "lenient")]
    sliding_window: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    max_position_embeddings: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    kv_lora_rank: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    qk_rope_head_dim: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    text_config: Option<Box<RawConfig>>,
}

impl RawConfig {
    fn into_config(self) -> HfConfig {
        let inner = self.text_config.map(|t| t.into_config()).unwrap_or_default();
        HfConfig {
            model_type: self.model_type.or(inner.model_type),
            architecture: self.architectures.into_iter().next().or(inner.architecture),
            num_hidden_layers: self.num_hidden_layers.or(inner.num_hidden_layers),
            num_attention_heads: self.num_attention_heads.or(inner.num_attention_heads),
            num_key_value_heads: self.num_key_value_heads.or(inner.num_key_value_heads),
            head_dim: self.head_dim.or(inner.head_dim),
            hidden_size: self.hidden_size.or(inner.hidden_size),
            dtype: self.dtype.or(self.torch_dtype).or(inner.dtype),
            sliding_window: self.sliding_window.or(inner.sliding_window),
            max_position_embeddings: self.max_position_embeddings.or(inner.max_position_embeddings),
            kv_lora_rank: self.kv_lora_rank.or(inner.kv_lora_rank),
            qk_rope_head_dim: self.qk_rope_head_dim.or(inner.qk_rope_head_dim),
        }
    }
}

pub fn parse_hf_config(body: &[u8]) -> Result<HfConfig, String> {
    let raw: RawConfig = parse_object(body, "config.json")?;
    Ok(raw.into_config())
}

/// Bytes of KV cache one token costs in vLLM, over all layers:
/// 2 (K and V) × layers × KV heads × head dim × element bytes; for latent
/// attention (`kv_lora_rank`) one vector of `kv_lora_rank +
/// qk_rope_head_dim` per layer, as vLLM's MLA backends store it.
///
/// `kv_dtype` is `--kv-cache-dtype`: `None` or `auto` means the dtype the
/// model runs in (vllm/utils/torch_utils.py `kv_cache_dtype_str_to_dtype`
/// maps `auto` to the model's dtype): `served_dtype`, its `--dtype`, when
/// given and not `auto` (a float32 model served `--dtype float32` keeps 4
/// bytes), else the config's, float32 served in 16 bits as `--dtype auto`
/// does (vllm/config/model.py `_resolve_auto_dtype`); `fp8*` is 1 byte;
/// `bfloat16`/`float16` 2. Sliding windows are not
/// applied: this is the cost in a full-attention layer set, per token of
/// context. `None` when a needed field is unknown or the dtype is not one
/// of those.
pub fn kv_bytes_per_token(config: &HfConfig, served_dtype: Option<&str>, kv_dtype: Option<&str>) -> Option<u64> {
    let is_auto = |d: &Option<&str>| d.is_none_or(|d| d.eq_ignore_ascii_case("auto"));
    let element_bytes = match (is_auto(&kv_dtype), is_auto(&served_dtype)) {
        (false, _) => dtype_bytes(kv_dtype?)?,
        (true, false) => dtype_bytes(served_dtype?)?,
        (true, true) => match dtype_bytes(config.dtype.as_deref()?)? {
            4 => 2,
            n => n,
        },
    };
    let layers = config.num_hidden_layers?;
    let per_layer = match config.kv_lora_rank {
        Some(rank) => rank.checked_add(config.qk_rope_head_dim.unwrap_or(0))?,
        None => 2u64.checked_mul(config.kv_heads()?)?.checked_mul(config.head_dim()?)?,
    };
    layers.checked_mul(per_layer)?.checked_mul(element_bytes)
}

fn dtype_bytes(name: &str) -> Option<u64> {
    let name = name.to_ascii_lowercase();
    let name = name.trim_start_matches("torch.");
    match name {
        "float32" | "float" | "fp32" => Some(4),
        "float16" | "half" | "fp16" | "bfloat16" | "bf16" => Some(2),
        n if n.starts_with("fp8") || n.starts_with("float8") => Some(1),
        _ => None,
    }
}

/// Largest safetensors header read: the format itself caps it at 100 MB.
pub const MAX_SAFETENSORS_HEADER: u64 = 100 << 20;

/// The weights described by one `.safetensors` header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SafetensorsSummary {
    pub tensors: u64,
    /// Elements over all tensors.
    pub params: u64,
    /// Bytes of tensor data (from `data_offsets`).
    pub bytes: u64,
    /// The dtype holding the most bytes (`BF16`).
    pub main_dtype: Option<String>,
}

/// The header's length N from a file's first 8 bytes (little-endian u64);
/// the caller then reads `8 + N` bytes for [`parse_safetensors_header`].
pub fn safetensors_header_len(first_bytes: &[u8]) -> Result<u64, String> {
    let prefix: [u8; 8] = first_bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or("safetensors: fewer than 8 bytes")?;
    let len = u64::from_le_bytes(prefix);
    if !(2..=MAX_SAFETENSORS_HEADER).contains(&len) {
        return Err(format!("safetensors: header length {len} is out of range"));
    }
    Ok(len)
}

/// Distinct dtypes one header may hold: safetensors knows about twenty
/// (safetensors/src/tensor.rs `Dtype`); more is a hostile header.
const MAX_DTYPES: usize = 64;

/// Reads the header at the start of a `.safetensors` file: 8 bytes of
/// little-endian length N, then N bytes of JSON mapping each tensor name to
/// `{dtype, shape, data_offsets}` (`__metadata__` is skipped).
/// `first_bytes` must hold at least `8 + N` bytes. The JSON is summed as it
/// is parsed: no tensor, name or shape is kept.
pub fn parse_safetensors_header(first_bytes: &[u8]) -> Result<SafetensorsSummary, String> {
    let len = safetensors_header_len(first_bytes)?;
    let end = usize::try_from(len).ok().and_then(|n| n.checked_add(8));
    let header = end
        .and_then(|end| first_bytes.get(8..end))
        .ok_or_else(|| format!("safetensors: truncated: the header needs {len} bytes after the first 8"))?;
    let mut de = serde_json::Deserializer::from_slice(header);
    let summary = serde::Deserializer::deserialize_map(&mut de, SummingVisitor)
        .map_err(|e| format!("safetensors header: {e}"))?;
    de.end().map_err(|e| format!("safetensors header: {e}"))?;
    Ok(summary)
}

/// Sums the tensors of a header's JSON object as they go by.
struct SummingVisitor;

impl<'de> serde::de::Visitor<'de> for SummingVisitor {
    type Value = SafetensorsSummary;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object of tensors")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<SafetensorsSummary, A::Error> {
        use serde::de::Error;
        let mut summary = SafetensorsSummary::default();
        let mut bytes_by_dtype: Vec<(String, u64)> = Vec::new();
        while let Some(name) = map.next_key::<std::borrow::Cow<str>>()? {
            if name == "__metadata__" {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            let tensor: RawTensor = map.next_value()?;
            let [start, stop] = tensor.data_offsets;
            let bytes = stop
                .checked_sub(start)
                .ok_or_else(|| A::Error::custom(format!("tensor {name}: data ends before it starts")))?;
            let elements = tensor
                .shape
                .0
                .ok_or_else(|| A::Error::custom(format!("tensor {name}: shape overflows")))?;
            let overflow = || A::Error::custom("totals overflow");
            summary.tensors = summary.tensors.checked_add(1).ok_or_else(overflow)?;
            summary.params = summary.params.checked_add(elements).ok_or_else(overflow)?;
            summary.bytes = summary.bytes.checked_add(bytes).ok_or_else(overflow)?;
            match bytes_by_dtype.iter().position(|(dtype, _)| *dtype == tensor.dtype) {
                Some(i) => bytes_by_dtype[i].1 = bytes_by_dtype[i].1.saturating_add(bytes),
                None if bytes_by_dtype.len() < MAX_DTYPES => bytes_by_dtype.push((tensor.dtype, bytes)),
                None => return Err(A::Error::custom(format!("more than {MAX_DTYPES} dtypes"))),
            }
        }
        summary.main_dtype = bytes_by_dtype
            .into_iter()
            .max_by_key(|(_, bytes)| *bytes)
            .map(|(dtype, _)| dtype);
        Ok(summary)
    }
}

#[derive(Deserialize)]
struct RawTensor {
    dtype: String,
    shape: ShapeProduct,
    data_offsets: [u64; 2],
}

/// A tensor's element count, folded from its `shape` array as it is read
/// (a hostile shape of millions of 1s is never kept); None on overflow.
struct ShapeProduct(Option<u64>);

impl<'de> Deserialize<'de> for ShapeProduct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Folding;
        impl<'de> serde::de::Visitor<'de> for Folding {
            type Value = ShapeProduct;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of dimensions")
            }
            fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<ShapeProduct, S::Error> {
                let mut product = Some(1u64);
                while let Some(dim) = seq.next_element::<u64>()? {
                    product = product.and_then(|p| p.checked_mul(dim));
                }
                Ok(ShapeProduct(product))
            }
        }
        d.deserialize_seq(Folding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_config() -> HfConfig {
        parse_hf_config(include_bytes!("../../../tests/data/vllm/config.json")).unwrap()
    }

    #[test]
    fn models_fixture() {
        let models = parse_models(include_bytes!("../../../tests/data/vllm/models.json")).unwrap();
        assert_eq!(
            models,
            [VllmModel {
                id: Some("Qwen/Qwen3-0.6B".into()),
                root: Some("Qwen/Qwen3-0.6B".into()),
                max_model_len: Some(40960),
            }]
        );
    }

    #[test]
    fn metrics_fixture_and_older_names() {
        let metrics = parse_metrics(include_str!("../../../tests/data/vllm/metrics.txt")).unwrap();
        assert_eq!(
            metrics,
            VllmMetrics {
                kv_cache_usage: Some(0.0125),
                requests_running: Some(2),
                requests_waiting: Some(1),
                num_gpu_blocks: Some(27487),
                block_size: Some(16),
                cache_dtype: Some("auto".into()),
                gpu_memory_utilization: Some(0.9),
                prompt_tokens: Some(1234),
                ..VllmMetrics::default()
            }
        );
        assert_eq!(metrics.kv_capacity_tokens(), Some(439_792));

        let v0 = "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n\
                  vllm:num_requests_running{engine=\"0\"} 1.0\n\
                  vllm:num_requests_running{engine=\"1\"} 3.0\n\
                  vllm:gpu_cache_usage_perc{engine=\"1\"} 0.75\n";
        let metrics = parse_metrics(v0).unwrap();
        assert_eq!(metrics.kv_cache_usage, Some(0.75));
        assert_eq!(metrics.requests_running, Some(4));
        assert_eq!(metrics.requests_waiting, None);
        assert_eq!(metrics.kv_capacity_tokens(), None);
    }

    /// `/metrics` of the real vLLM 0.32 CPU server of tests/real_vllm.rs
    /// (its `vllm:` families), after one completion of a 3-token prompt
    /// and 8 generated tokens.
    #[test]
    fn metrics_of_a_real_cpu_server() {
        let metrics = parse_metrics(include_str!("../../../tests/data/vllm/metrics-cpu-0.32.txt")).unwrap();
        assert_eq!(
            metrics,
            VllmMetrics {
                kv_cache_usage: Some(0.0),
                requests_running: Some(0),
                requests_waiting: Some(0),
                num_gpu_blocks: Some(8192),
                block_size: Some(128),
                cache_dtype: Some("auto".into()),
                gpu_memory_utilization: Some(0.5),
                kv_cache_memory_bytes: Some(1 << 30),
                preemptions: Some(0),
                prefix_cache_queries: Some(3),
                prefix_cache_hits: Some(0),
                prompt_tokens: Some(3),
                generation_tokens: Some(8),
            }
        );
        assert_eq!(metrics.kv_capacity_tokens(), Some(1_048_576));
        assert_eq!(metrics.prefix_cache_hit_ratio(), Some(0.0));
    }

    #[test]
    fn config_fixture_and_kv_cost() {
        let config = fixture_config();
        assert_eq!(config.architecture.as_deref(), Some("Qwen3ForCausalLM"));
        assert_eq!(config.num_hidden_layers, Some(28));
        assert_eq!(config.kv_heads(), Some(8));
        assert_eq!(config.head_dim(), Some(128));
        assert_eq!(config.dtype.as_deref(), Some("bfloat16"));
        assert_eq!(config.sliding_window, None);
        assert_eq!(config.max_position_embeddings, Some(40960));
        // 2 × 28 × 8 × 128 × 2 = 114688: the 448 MiB per 4096 cells that
        // llama.cpp logs for Qwen3-0.6B.
        assert_eq!(kv_bytes_per_token(&config, None, None), Some(114_688));
        assert_eq!(
            kv_bytes_per_token(&config, None, None).map(|b| b * 4096),
            Some(448 << 20)
        );
        assert_eq!(kv_bytes_per_token(&config, None, Some("auto")), Some(114_688));
        assert_eq!(kv_bytes_per_token(&config, None, Some("fp8_e4m3")), Some(57_344));
        assert_eq!(kv_bytes_per_token(&config, None, Some("FP8")), Some(57_344));
        assert_eq!(kv_bytes_per_token(&config, None, Some("int3")), None);

        // No head_dim, no KV heads: hidden / heads, MHA. float32 served in 16 bits.
        let llama2 = parse_hf_config(
            br#"{"num_hidden_layers":32,"num_attention_heads":32,"hidden_size":4096,"torch_dtype":"float32"}"#,
        )
        .unwrap();
        assert_eq!(kv_bytes_per_token(&llama2, None, None), Some(2 * 32 * 32 * 128 * 2));
        // Served `--dtype float32`, its KV cache is float32 too, unless
        // `--kv-cache-dtype` says otherwise.
        let full = 2 * 32 * 32 * 128 * 4;
        assert_eq!(kv_bytes_per_token(&llama2, Some("float32"), None), Some(full));
        assert_eq!(kv_bytes_per_token(&llama2, Some("float32"), Some("auto")), Some(full));
        assert_eq!(kv_bytes_per_token(&llama2, Some("AUTO"), None), Some(full / 2));
        assert_eq!(
            kv_bytes_per_token(&llama2, Some("float32"), Some("fp8")),
            Some(full / 4)
        );
        assert_eq!(kv_bytes_per_token(&llama2, Some("half"), None), Some(full / 2));
        assert_eq!(kv_bytes_per_token(&llama2, Some("int7"), None), None);
        // Multimodal: the text model's shape under text_config; transformers' new `dtype`.
        let gemma = parse_hf_config(
            br#"{"model_type":"gemma3","dtype":"bfloat16","text_config":{"num_hidden_layers":34,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,"sliding_window":1024}}"#,
        )
        .unwrap();
        assert_eq!(gemma.sliding_window, Some(1024));
        assert_eq!(kv_bytes_per_token(&gemma, None, None), Some(2 * 34 * 4 * 256 * 2));
        // Latent attention: one 512 + 64 vector per layer.
        let deepseek = parse_hf_config(
            br#"{"num_hidden_layers":27,"num_attention_heads":16,"kv_lora_rank":512,"qk_rope_head_dim":64,"torch_dtype":"bfloat16"}"#,
        )
        .unwrap();
        assert_eq!(kv_bytes_per_token(&deepseek, None, None), Some(27 * 576 * 2));
    }

    #[test]
    fn config_garbage_and_huge_numbers() {
        for body in [&b""[..], b"[]", b"{", b"\"config\"", b"\xff"] {
            assert!(parse_hf_config(body).is_err(), "{body:?}");
            assert!(parse_models(body).is_err(), "{body:?}");
        }
        let odd = parse_hf_config(br#"{"num_hidden_layers":"28","architectures":"x","head_dim":-1,"text_config":[1]}"#)
            .unwrap();
        assert_eq!(odd, HfConfig::default());
        assert_eq!(kv_bytes_per_token(&odd, None, None), None);
        let zero_heads = parse_hf_config(br#"{"hidden_size":1024,"num_attention_heads":0}"#).unwrap();
        assert_eq!(zero_heads.head_dim(), None);
        let huge = parse_hf_config(
            br#"{"num_hidden_layers":18446744073709551615,"num_key_value_heads":8,"head_dim":128,"torch_dtype":"bfloat16"}"#,
        )
        .unwrap();
        assert_eq!(kv_bytes_per_token(&huge, None, None), None, "overflow is unknown");
        // Nesting deeper than serde_json's limit is an error, not a crash.
        let deep = format!(
            "{{\"text_config\":{}1{}}}",
            "{\"text_config\":".repeat(200),
            "}".repeat(200)
        );
        assert!(parse_hf_config(deep.as_bytes()).is_err());
        assert!(parse_metrics("Internal Server Error").is_err());
        let weird = parse_metrics("vllm:kv_cache_usage_perc 3\nvllm:num_requests_running -1\nvllm:cache_config_info{num_gpu_blocks=\"None\"} 1\n").unwrap();
        assert_eq!(weird, VllmMetrics::default());
    }

    fn safetensors(header: &str) -> Vec<u8> {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0u8; 28]);
        bytes
    }

    #[test]
    fn safetensors_header() {
        let file = safetensors(
            r#"{"__metadata__":{"format":"pt"},"a.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b.bias":{"dtype":"F32","shape":[4],"data_offsets":[12,28]},"scalar":{"dtype":"F32","shape":[],"data_offsets":[28,28]}}"#,
        );
        assert_eq!(safetensors_header_len(&file).unwrap() + 8, file.len() as u64 - 28);
        let summary = parse_safetensors_header(&file).unwrap();
        assert_eq!(
            summary,
            SafetensorsSummary {
                tensors: 3,
                params: 11,
                bytes: 28,
                main_dtype: Some("F32".into())
            }
        );
        // The header alone is enough; the data need not be there.
        let header_only = &file[..file.len() - 28];
        assert_eq!(parse_safetensors_header(header_only).unwrap(), summary);
    }

    #[test]
    fn safetensors_headers_are_summed_as_parsed_and_bounded() {
        // A shape of 100,000 ones folds to one element, never kept.
        let ones = vec!["1"; 100_000].join(",");
        let long = safetensors(&format!(
            r#"{{"a":{{"dtype":"F16","shape":[{ones}],"data_offsets":[0,2]}}}}"#
        ));
        assert_eq!(parse_safetensors_header(&long).unwrap().params, 1);
        // One dtype a tensor, past the 64 safetensors could ever name.
        let tensor = |i: usize| format!(r#""t{i}":{{"dtype":"D{i}","shape":[1],"data_offsets":[0,1]}}"#);
        let many = |n: usize| format!("{{{}}}", (0..n).map(tensor).collect::<Vec<_>>().join(","));
        assert_eq!(
            parse_safetensors_header(&safetensors(&many(MAX_DTYPES)))
                .unwrap()
                .tensors,
            64
        );
        let e = parse_safetensors_header(&safetensors(&many(MAX_DTYPES + 1))).unwrap_err();
        assert!(e.contains("more than 64 dtypes"), "{e}");
        // Trailing bytes after the object are no header.
        assert!(parse_safetensors_header(&safetensors(r#"{} {}"#)).is_err());
    }

    #[test]
    fn safetensors_garbage() {
        assert!(safetensors_header_len(b"short").is_err());
        assert!(safetensors_header_len(&u64::MAX.to_le_bytes()).is_err());
        assert!(safetensors_header_len(&(MAX_SAFETENSORS_HEADER + 1).to_le_bytes()).is_err());
        let file = safetensors(r#"{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#);
        let truncated = parse_safetensors_header(&file[..20]).unwrap_err();
        assert!(truncated.contains("truncated"), "{truncated}");
        for header in [
            "[1,2,3]",
            "{\"a\":1}",
            "{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[4,2]}}",
            "{\"a\":{\"dtype\":\"F16\",\"shape\":[18446744073709551615,2],\"data_offsets\":[0,2]}}",
            "{\"a\":{\"dtype\":\"F16\",\"shape\":[-1],\"data_offsets\":[0,2]}}",
            "{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0]}}",
            "{\"a\":{\"dtype\":\"F16\",\"shape\":[1]}}",
            "not json at all",
        ] {
            assert!(parse_safetensors_header(&safetensors(header)).is_err(), "{header}");
        }
        let many = "{\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]},\"b\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}";
        assert!(
            parse_safetensors_header(&safetensors(many)).is_err(),
            "byte total overflows"
        );
    }
}
