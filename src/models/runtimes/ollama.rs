//! Ollama's `GET /api/ps`: the models loaded now, with how much of each sits
//! in VRAM (docs/api.md "List Running Models"; `context_length` since 2025).
//! Also Ollama's models folder: `manifests/<host>/<namespace>/<model>/<tag>`
//! JSON files whose layer of media type `application/vnd.ollama.image.model`
//! names the GGUF blob by digest (server/images.go: GetManifest,
//! GetBlobsPath). /api/ps's `digest` is the sha256 of the manifest file
//! itself (GetManifest hashes the bytes it decodes), not of the blob: a
//! loaded model is paired with its blob by name, through its manifest.

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

/// The media type of the layer that is the model's weights
/// (server/images.go, `MediaTypeModel`).
const MODEL_LAYER: &str = "application/vnd.ollama.image.model";

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawManifest {
    #[serde(deserialize_with = "lenient_vec")]
    layers: Vec<RawLayer>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawLayer {
    #[serde(rename = "mediaType", deserialize_with = "lenient")]
    media_type: Option<String>,
    #[serde(deserialize_with = "lenient")]
    digest: Option<String>,
}

/// A manifest's model layer: the file name of its blob (`sha256-<hex>`),
/// None when it has no model layer or its digest is not a sha256 digest
/// (GetBlobsPath accepts only `^sha256[:-][0-9a-fA-F]{64}$`, so a digest
/// can never name a path outside `blobs/`).
pub fn parse_manifest(body: &[u8]) -> Result<Option<String>, String> {
    let raw: RawManifest = parse_object(body, "Ollama manifest")?;
    Ok(raw
        .layers
        .into_iter()
        .find(|l| l.media_type.as_deref() == Some(MODEL_LAYER))
        .and_then(|l| l.digest)
        .and_then(|d| blob_file_name(&d)))
}

fn blob_file_name(digest: &str) -> Option<String> {
    let hex = digest
        .strip_prefix("sha256:")
        .or_else(|| digest.strip_prefix("sha256-"))?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| format!("sha256-{hex}"))
}

/// The name Ollama shows for the manifest at `host/namespace/model/tag`:
/// the default host and namespace left out (types/model/name.go,
/// `DisplayShortest`: `registry.ollama.ai`, `library`).
pub fn manifest_name(host: &str, namespace: &str, model: &str, tag: &str) -> String {
    match (host, namespace) {
        ("registry.ollama.ai", "library") => format!("{model}:{tag}"),
        ("registry.ollama.ai", _) => format!("{namespace}/{model}:{tag}"),
        _ => format!("{host}/{namespace}/{model}:{tag}"),
    }
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
    fn manifests_name_their_model_blob() {
        let model = format!("sha256:{}", "A1".repeat(32));
        let body = format!(
            r#"{{"schemaVersion":2,"layers":[{{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:{t}"}},{{"mediaType":"application/vnd.ollama.image.model","digest":"{model}","size":1}}]}}"#,
            t = "0".repeat(64)
        );
        assert_eq!(
            parse_manifest(body.as_bytes()).unwrap(),
            Some(format!("sha256-{}", "A1".repeat(32)))
        );
        for digest in [
            "sha256:../../../../etc/passwd",
            "sha256:",
            "md5:0123",
            &format!("sha256:{}", "g".repeat(64)),
            &format!("sha256:{}/x", "a".repeat(63)),
        ] {
            let body =
                format!(r#"{{"layers":[{{"mediaType":"application/vnd.ollama.image.model","digest":"{digest}"}}]}}"#);
            assert_eq!(parse_manifest(body.as_bytes()).unwrap(), None, "{digest}");
        }
        assert_eq!(parse_manifest(br#"{"layers":[7,{"mediaType":1}]}"#).unwrap(), None);
        assert!(parse_manifest(b"\x00{").is_err());
        assert_eq!(
            manifest_name("registry.ollama.ai", "library", "llama3.1", "8b"),
            "llama3.1:8b"
        );
        assert_eq!(manifest_name("registry.ollama.ai", "me", "m", "latest"), "me/m:latest");
        assert_eq!(
            manifest_name("hf.co", "unsloth", "Qwen3-GGUF", "Q4_K_M"),
            "hf.co/unsloth/Qwen3-GGUF:Q4_K_M"
        );
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
