//! Ollama's `GET /api/ps`: the models loaded now, with how much of each sits
//! in VRAM (docs/api.md "List Running Models"; `context_length` since 2025).

use super::{lenient, lenient_vec, parse_object};
use serde::{Deserialize, Serialize};

/// One running model. `size` is everything the model holds (weights, KV
/// cache, graph) as Ollama planned it; `size_vram` the part on GPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OllamaModel {
    /// The tag (`llama3.1:8b`).
    pub name: Option<String>,
    pub model: Option<String>,
    pub size: Option<u64>,
    pub size_vram: Option<u64>,
    pub digest: Option<String>,
    /// `details.format` (`gguf`), `details.family`, `details.parameter_size`
    /// (`8.0B`), `details.quantization_level` (`Q4_K_M`).
    pub format: Option<String>,
    pub family: Option<String>,
    pub parameter_size: Option<String>,
    pub quantization_level: Option<String>,
    /// RFC 3339 time at which Ollama unloads the model if idle.
    pub expires_at: Option<String>,
    pub context_length: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawPs {
    #[serde(deserialize_with = "lenient_vec")]
    models: Vec<RawModel>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawModel {
    #[serde(deserialize_with = "lenient")]
    name: Option<String>,
    #[serde(deserialize_with = "lenient")]
    model: Option<String>,
    #[serde(deserialize_with = "lenient")]
    size: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    size_vram: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    digest: Option<String>,
    #[serde(deserialize_with = "lenient")]
    details: Option<RawDetails>,
    #[serde(deserialize_with = "lenient")]
    expires_at: Option<String>,
    #[serde(deserialize_with = "lenient")]
    context_length: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawDetails {
    #[serde(deserialize_with = "lenient")]
    format: Option<String>,
    #[serde(deserialize_with = "lenient")]
    family: Option<String>,
    #[serde(deserialize_with = "lenient")]
    parameter_size: Option<String>,
    #[serde(deserialize_with = "lenient")]
    quantization_level: Option<String>,
}

pub fn parse_ps(body: &[u8]) -> Result<Vec<OllamaModel>, String> {
    let raw: RawPs = parse_object(body, "Ollama /api/ps")?;
    Ok(raw
        .models
        .into_iter()
        .map(|m| {
            let details = m.details.unwrap_or_default();
            OllamaModel {
                name: m.name,
                model: m.model,
                size: m.size,
                size_vram: m.size_vram,
                digest: m.digest,
                format: details.format,
                family: details.family,
                parameter_size: details.parameter_size,
                quantization_level: details.quantization_level,
                expires_at: m.expires_at,
                context_length: m.context_length,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture() {
        // tests/data/ollama/ps.json follows the shape of Ollama's API docs.
        let models = parse_ps(include_bytes!("../../../tests/data/ollama/ps.json")).unwrap();
        assert_eq!(models.len(), 2);
        assert_eq!(
            models[0],
            OllamaModel {
                name: Some("llama3.1:8b".into()),
                model: Some("llama3.1:8b".into()),
                size: Some(6_654_289_920),
                size_vram: Some(6_654_289_920),
                digest: Some("46e0c10c039e019119339687c3c1757cc81b9da49709a3b3924863ba87ca666e".into()),
                format: Some("gguf".into()),
                family: Some("llama".into()),
                parameter_size: Some("8.0B".into()),
                quantization_level: Some("Q4_K_M".into()),
                expires_at: Some("2026-11-30T17:35:12.123456789Z".into()),
                context_length: Some(8192),
            }
        );
        assert_eq!(models[1].family.as_deref(), Some("qwen3moe"));
    }

    #[test]
    fn empty_garbage_and_wrong_types() {
        assert_eq!(parse_ps(br#"{"models":[]}"#).unwrap(), vec![]);
        assert_eq!(parse_ps(b"{}").unwrap(), vec![]);
        for body in [
            &b""[..],
            b"[]",
            b"null",
            b"{\"models\":[",
            b"\x00\x01",
            b"404 page not found",
        ] {
            assert!(parse_ps(body).is_err(), "{body:?}");
        }
        let err = parse_ps(br#"{"error":"unauthorized"}"#);
        assert_eq!(err.unwrap(), vec![], "an object without models is an empty list");
        let odd =
            parse_ps(br#"{"models":[7,{"name":1,"size":-5,"size_vram":1e99,"details":"x","context_length":"8k"}]}"#)
                .unwrap();
        assert_eq!(odd, [OllamaModel::default()]);
    }
}
