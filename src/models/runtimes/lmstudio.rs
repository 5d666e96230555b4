//! LM Studio's REST API `GET /api/v0/models`: every model it knows, with
//! `state` telling the loaded ones (LM Studio docs, "LM Studio REST API").
//! LM Studio names no file on its command line, so this is where its models
//! are found.

use super::{lenient, parse_data_list};
use serde::{Deserialize, Serialize};

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
    fn garbage_and_wrong_types() {
        for body in [&b""[..], b"[]", b"true", b"{\"data\":[", b"\xfe\xff"] {
            assert!(parse_models(body).is_err(), "{body:?}");
        }
        assert_eq!(parse_models(br#"{"data":"none"}"#).unwrap(), vec![]);
        let odd = parse_models(br#"{"data":[{"id":[],"state":true,"max_context_length":-1},"x"]}"#).unwrap();
        assert_eq!(odd, [LmStudioModel::default()]);
    }
}
