//! LM Studio's REST API: every model it knows, and which are loaded. LM
//! Studio names no file on its command line, so this is where its models are
//! found. Two versions:
//! - `GET /api/v1/models` (LM Studio 0.4+, docs "LM Studio REST API: List
//!   your models", lmstudio.ai/docs/developer/rest/list): `models[]` by
//!   `key`, each with `loaded_instances[]` (`id`, `config.context_length`);
//! - `GET /api/v0/models` (0.3.x, the beta REST API): `data[]` by `id`, with
//!   `state` `loaded` and `loaded_context_length`.

use super::{lenient, lenient_vec, parse_data_list, parse_object};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Loaded instances read per model (LM Studio loads a few at most).
const MAX_INSTANCES: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LmStudioModel {
    pub id: Option<String>,
    /// `type`: `llm`, `vlm` or `embeddings`.
    pub kind: Option<String>,
    pub arch: Option<String>,
    /// `gguf` or `mlx`.
    pub compatibility_type: Option<String>,
    pub quantization: Option<String>,
    /// `loaded` or `not-loaded`.
    pub state: Option<String>,
    /// `state` is `loaded`.
    pub loaded: bool,
    pub max_context_length: Option<u64>,
    /// The context it was loaded with (present only when loaded).
    pub loaded_context_length: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawModel {
    #[serde(deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    arch: Option<String>,
    #[serde(deserialize_with = "lenient")]
    compatibility_type: Option<String>,
    #[serde(deserialize_with = "lenient")]
    quantization: Option<String>,
    #[serde(deserialize_with = "lenient")]
    state: Option<String>,
    #[serde(deserialize_with = "lenient")]
    max_context_length: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    loaded_context_length: Option<u64>,
}

/// All models, loaded or not; filter on [`LmStudioModel::loaded`].
pub fn parse_models(body: &[u8]) -> Result<Vec<LmStudioModel>, String> {
    Ok(parse_data_list::<RawModel>(body, "LM Studio /api/v0/models")?
        .into_iter()
        .map(|m| LmStudioModel {
            loaded: m.state.as_deref() == Some("loaded"),
            id: m.id,
            kind: m.kind,
            arch: m.arch,
            compatibility_type: m.compatibility_type,
            quantization: m.quantization,
            state: m.state,
            max_context_length: m.max_context_length,
            loaded_context_length: m.loaded_context_length,
        })
        .collect())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawV1Models {
    /// Absent in anything but this API's answer (an older LM Studio's
    /// `{"error": "Unexpected endpoint or method."}`).
    models: Option<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawV1Model {
    #[serde(deserialize_with = "lenient")]
    key: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient")]
    architecture: Option<String>,
    #[serde(deserialize_with = "lenient")]
    format: Option<String>,
    #[serde(deserialize_with = "lenient")]
    quantization: Option<RawQuantization>,
    #[serde(deserialize_with = "lenient")]
    max_context_length: Option<u64>,
    #[serde(deserialize_with = "lenient_vec")]
    loaded_instances: Vec<RawInstance>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawQuantization {
    #[serde(deserialize_with = "lenient")]
    name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawInstance {
    #[serde(deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient")]
    config: Option<RawInstanceConfig>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawInstanceConfig {
    #[serde(deserialize_with = "lenient")]
    context_length: Option<u64>,
}

/// `GET /api/v1/models`: one entry per loaded instance (`loaded`, named by
/// the instance's id), then one per model not loaded. An answer without a
/// `models` field is an error, so the caller can ask the older API.
pub fn parse_v1_models(body: &[u8]) -> Result<Vec<LmStudioModel>, String> {
    const WHAT: &str = "LM Studio /api/v1/models";
    let raw: RawV1Models = parse_object(body, WHAT)?;
    let Some(models) = raw.models else {
        return Err(match super::api_error_message(body) {
            Some(message) => format!("{WHAT}: the server answered an error: {message}"),
            None => format!("{WHAT}: no models list"),
        });
    };
    let models: Vec<RawV1Model> = match models {
        Value::Array(items) => items.into_iter().filter_map(super::convert).collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for m in models {
        let model = LmStudioModel {
            id: m.key,
            kind: m.kind,
            arch: m.architecture,
            compatibility_type: m.format,
            quantization: m.quantization.and_then(|q| q.name),
            state: None,
            loaded: false,
            max_context_length: m.max_context_length,
            loaded_context_length: None,
        };
        if m.loaded_instances.is_empty() {
            out.push(model);
            continue;
        }
        for instance in m.loaded_instances.into_iter().take(MAX_INSTANCES) {
            out.push(LmStudioModel {
                id: instance.id,
                state: Some("loaded".into()),
                loaded: true,
                loaded_context_length: instance.config.and_then(|c| c.context_length),
                ..model.clone()
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture() {
        // tests/data/lmstudio/models.json follows the shape of LM Studio's docs.
        let models = parse_models(include_bytes!("../../../tests/data/lmstudio/models.json")).unwrap();
        assert_eq!(models.len(), 3);
        let loaded: Vec<_> = models.iter().filter(|m| m.loaded).collect();
        assert_eq!(
            loaded,
            [&LmStudioModel {
                id: Some("meta-llama-3.1-8b-instruct".into()),
                kind: Some("llm".into()),
                arch: Some("llama".into()),
                compatibility_type: Some("gguf".into()),
                quantization: Some("Q4_K_M".into()),
                state: Some("loaded".into()),
                loaded: true,
                max_context_length: Some(131_072),
                loaded_context_length: Some(8192),
            }]
        );
        assert_eq!(models[0].compatibility_type.as_deref(), Some("mlx"));
        assert_eq!(models[2].kind.as_deref(), Some("embeddings"));
        assert_eq!(models[2].loaded_context_length, None);
    }

    #[test]
    fn current_api_lists_each_loaded_instance() {
        // tests/data/lmstudio/models_v1.json follows LM Studio's docs for
        // `GET /api/v1/models` (LM Studio 0.4+).
        let models = parse_v1_models(include_bytes!("../../../tests/data/lmstudio/models_v1.json")).unwrap();
        let loaded: Vec<_> = models.iter().filter(|m| m.loaded).cloned().collect();
        let first = LmStudioModel {
            id: Some("openai/gpt-oss-20b".into()),
            kind: Some("llm".into()),
            arch: Some("gpt-oss".into()),
            compatibility_type: Some("gguf".into()),
            quantization: Some("MXFP4".into()),
            state: Some("loaded".into()),
            loaded: true,
            max_context_length: Some(131_072),
            loaded_context_length: Some(16_384),
        };
        // The second instance of the same model, loaded with less context.
        let second = LmStudioModel {
            id: Some("openai/gpt-oss-20b:2".into()),
            loaded_context_length: Some(4096),
            ..first.clone()
        };
        assert_eq!(loaded, [first, second]);
        assert_eq!(models.len(), 4, "two instances and two models not loaded");
        assert_eq!(models[2].id.as_deref(), Some("qwen2-vl-7b-instruct"));
        assert_eq!(models[2].compatibility_type.as_deref(), Some("mlx"));
        assert_eq!(models[2].loaded_context_length, None);
        assert_eq!(models[3].kind.as_deref(), Some("embedding"));
        assert_eq!(models[3].arch, None, "absent for embedding models");
    }

    #[test]
    fn current_api_garbage_and_wrong_types() {
        for body in [&b""[..], b"[]", b"true", b"{\"models\":[", b"\xfe\xff"] {
            assert!(parse_v1_models(body).is_err(), "{body:?}");
        }
        let err = parse_v1_models(br#"{"error":{"message":"Unexpected endpoint or method."}}"#);
        assert!(err.is_err(), "an error answer is not an empty list");
        assert_eq!(parse_v1_models(br#"{"models":"none"}"#).unwrap(), vec![]);
        let odd = parse_v1_models(
            br#"{"models":[{"key":[],"quantization":"x","loaded_instances":[7,{"id":1,"config":[]}]},"x"]}"#,
        )
        .unwrap();
        let instance = LmStudioModel {
            state: Some("loaded".into()),
            loaded: true,
            ..LmStudioModel::default()
        };
        assert_eq!(odd, [instance]);
        let many = format!(
            r#"{{"models":[{{"key":"k","loaded_instances":[{}]}}]}}"#,
            vec![r#"{"id":"i"}"#; 5000].join(",")
        );
        assert_eq!(parse_v1_models(many.as_bytes()).unwrap().len(), MAX_INSTANCES);
    }

    #[test]
    fn garbage_and_wrong_types() {
        for body in [&b""[..], b"[]", b"true", b"{\"data\":[", b"\xfe\xff"] {
            assert!(parse_models(body).is_err(), "{body:?}");
        }
        assert_eq!(parse_models(br#"{"data":"none"}"#).unwrap(), vec![]);
        let odd = parse_models(br#"{"data":[{"id":[],"state":true,"max_context_length":-1},"x"]}"#).unwrap();
        assert_eq!(odd, [LmStudioModel::default()]);
    }
}
