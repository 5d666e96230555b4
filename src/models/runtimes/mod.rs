//! Parsers for what LLM runtimes answer on their local APIs: llama.cpp's
//! `llama-server`, Ollama, LM Studio, vLLM, SGLang and TGI. Pure functions over bytes the
//! caller fetched (loopback, GET only); they never panic on what a server
//! sends, and they tell a wrong shape from a missing field:
//! - a body that is not JSON, or whose top level is not the expected object
//!   or array, is an error (the server's own `{"error": {"message"}}` is
//!   quoted in it);
//! - a missing field, an extra field or a field of the wrong type is just
//!   unknown (`None`), so one odd field never hides the rest.
//!
//! Also here: a small reader of the Prometheus text format that llama.cpp and
//! vLLM use for `/metrics`.

pub mod figures;
pub mod llamacpp;
pub mod lmstudio;
pub mod ollama;
pub mod sglang;
pub mod tgi;
pub mod vllm;
pub mod vllm_log;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Bodies larger than this are refused before parsing: no answer of these
/// APIs comes near it.
pub const MAX_BODY: usize = 32 << 20;

/// Prometheus lines longer than this are skipped.
const MAX_METRIC_LINE: usize = 16 << 10;
/// Label pairs read per sample; vLLM's `cache_config_info` has about 15.
const MAX_LABELS: usize = 64;

/// Parses a body whose top level must be a JSON object.
pub(crate) fn parse_object<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, String> {
    parse_top_level(body, what, b'{', "object")
}

/// `{"data": [...]}`: the list of models an OpenAI-style API (vLLM, LM
/// Studio, llama-server) answers with, entries of another type skipped.
#[derive(Deserialize, Default)]
#[serde(default, bound = "T: DeserializeOwned + Default")]
struct DataList<T> {
    #[serde(deserialize_with = "lenient_vec")]
    data: Vec<T>,
}

/// The entries of a [`DataList`] body.
pub(crate) fn parse_data_list<T: DeserializeOwned + Default>(body: &[u8], what: &str) -> Result<Vec<T>, String> {
    Ok(parse_object::<DataList<T>>(body, what)?.data)
}

/// Parses a body whose top level must be a JSON array.
pub(crate) fn parse_array<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, String> {
    parse_top_level(body, what, b'[', "array")
}

fn parse_top_level<T: DeserializeOwned>(body: &[u8], what: &str, open: u8, shape: &str) -> Result<T, String> {
    if body.len() > MAX_BODY {
        return Err(format!("{what}: body of {} bytes is too large", body.len()));
    }
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let first = body.iter().copied().find(|b| !b.is_ascii_whitespace());
    if first != Some(open) {
        if first == Some(b'{') {
            if let Some(message) = api_error_message(body) {
                return Err(format!("{what}: the server answered an error: {message}"));
            }
        }
        return Err(format!("{what}: expected a JSON {shape}"));
    }
    serde_json::from_slice(body).map_err(|e| format!("{what}: not valid JSON: {e}"))
}

/// `{"error": {"code": 501, "message": "..."}}` (llama-server) or
/// `{"error": "..."}` (Ollama).
pub(crate) fn api_error_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    let message = error.get("message").unwrap_or(error);
    Some(match message.as_str() {
        Some(text) => text.chars().take(200).collect(),
        None => message.to_string().chars().take(200).collect(),
    })
}

/// A value as `T`, or `None` when it has another shape. An array never reads
/// as a struct (serde would fill the fields in order); no field these parsers
/// read as a single value is an array.
pub(crate) fn convert<T: DeserializeOwned>(value: Value) -> Option<T> {
    if value.is_array() {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// `deserialize_with` for optional fields: a value of the wrong type reads
/// as `None` instead of failing the whole document.
pub(crate) fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(convert(Value::deserialize(deserializer)?))
}

/// `deserialize_with` for lists: not a list reads as empty, and elements of
/// the wrong shape are dropped.
pub(crate) fn lenient_vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items.into_iter().filter_map(convert).collect(),
        _ => Vec::new(),
    })
}

/// One sample of the Prometheus text exposition format:
/// `name{label="value",...} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl PromSample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Reads Prometheus text: comments (`# HELP`, `# TYPE`) and blank lines are
/// skipped, and so are malformed or overlong lines. An error only when the
/// text has lines but not one sample (an HTML or JSON error page, say).
pub fn parse_prometheus(text: &str) -> Result<Vec<PromSample>, String> {
    let mut samples = Vec::new();
    let mut rejected = 0usize;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_prom_line(line) {
            Some(sample) => samples.push(sample),
            None => rejected += 1,
        }
    }
    if samples.is_empty() && rejected > 0 {
        return Err(format!("not Prometheus text: none of {rejected} lines is a sample"));
    }
    Ok(samples)
}

fn parse_prom_line(line: &str) -> Option<PromSample> {
    if line.len() > MAX_METRIC_LINE {
        return None;
    }
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (name, mut rest) = line.split_at(name_end);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = parse_labels(inner, &mut labels)?;
    }
    // The value, then an optional timestamp.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        number => number.parse().ok()?,
    };
    Some(PromSample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Reads `label="value",...}` and returns the text after `}`.
fn parse_labels<'a>(mut text: &'a str, labels: &mut Vec<(String, String)>) -> Option<&'a str> {
    loop {
        text = text.trim_start().trim_start_matches(',').trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Some(after);
        }
        if labels.len() >= MAX_LABELS {
            return None;
        }
        let (key, after) = text.split_once('=')?;
        let quoted = after.trim_start().strip_prefix('"')?;
        let mut chars = quoted.char_indices();
        let mut value = String::new();
        let end = loop {
            let (at, c) = chars.next()?;
            match c {
                '"' => break at,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        text = quoted.get(end + 1..)?;
        labels.push((key.trim().to_string(), value));
    }
}

/// A Prometheus value as a count: finite, not negative, exactly
/// representable (below 2^53).
pub(crate) fn as_count(value: f64) -> Option<u64> {
    (value.is_finite() && (0.0..=9_007_199_254_740_992.0).contains(&value)).then_some(value.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_lines() {
        let text = "# HELP x y\n# TYPE x gauge\n\
                    plain 1\n\
                    with_ts 2.5 1700000000000\n\
                    vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",num_gpu_blocks=\"27487\"} 1.0\n\
                    esc{a=\"q\\\"uote\",b=\"back\\\\slash\",c=\"new\\nline\",} -3e2\n\
                    inf +Inf\n\
                    bad{unterminated=\"x 1\n\
                    9starts_with_digit 1\n";
        let samples = parse_prometheus(text).unwrap();
        assert_eq!(samples.len(), 5);
        assert_eq!(
            samples[0],
            PromSample {
                name: "plain".into(),
                labels: vec![],
                value: 1.0
            }
        );
        assert_eq!(samples[1].value, 2.5);
        assert_eq!(samples[2].label("num_gpu_blocks"), Some("27487"));
        assert_eq!(samples[2].label("block_size"), Some("16"));
        assert_eq!(samples[3].label("a"), Some("q\"uote"));
        assert_eq!(samples[3].label("b"), Some("back\\slash"));
        assert_eq!(samples[3].label("c"), Some("new\nline"));
        assert_eq!(samples[3].value, -300.0);
        assert_eq!(samples[4].value, f64::INFINITY);
    }

    #[test]
    fn prometheus_garbage() {
        assert_eq!(parse_prometheus("").unwrap(), vec![]);
        assert_eq!(parse_prometheus("# only comments\n").unwrap(), vec![]);
        assert!(parse_prometheus("<html><body>Not found</body></html>").is_err());
        assert!(parse_prometheus("{\"error\":{\"code\":501}}").is_err());
        let many_labels: String = format!(
            "m{{{}}} 1",
            (0..100).map(|i| format!("l{i}=\"v\"")).collect::<Vec<_>>().join(",")
        );
        assert!(parse_prometheus(&many_labels).is_err());
        let long = format!("m{{l=\"{}\"}} 1", "x".repeat(MAX_METRIC_LINE));
        assert!(parse_prometheus(&long).is_err());
        for line in [
            "m{",
            "m{a",
            "m{a=",
            "m{a=\"",
            "m{a=\"\\",
            "m{a=\"v\"",
            "m{a=\"v\"} ",
            "m x",
            "m{é=\"ü\"} 1",
        ] {
            let _ = parse_prometheus(line);
        }
        assert_eq!(parse_prometheus("m{é=\"ü\"} 1").unwrap()[0].label("é"), Some("ü"));
        assert_eq!(as_count(1e300), None);
        assert_eq!(as_count(-1.0), None);
        assert_eq!(as_count(f64::NAN), None);
        assert_eq!(as_count(3.0), Some(3));
    }

    #[derive(Deserialize, Debug, Default, PartialEq)]
    #[serde(default)]
    struct Probe {
        #[serde(deserialize_with = "lenient")]
        n: Option<u64>,
        #[serde(deserialize_with = "lenient_vec")]
        list: Vec<u32>,
    }

    #[test]
    fn json_top_level_and_lenient_fields() {
        let ok: Probe = parse_object(b" {\"n\": 5, \"list\": [1, \"x\", [3], 2], \"extra\": {}}", "probe").unwrap();
        assert_eq!(
            ok,
            Probe {
                n: Some(5),
                list: vec![1, 2]
            }
        );
        let odd: Probe = parse_object(b"{\"n\": \"5\", \"list\": 7}", "probe").unwrap();
        assert_eq!(odd, Probe::default());
        let neg: Probe = parse_object(b"{\"n\": -1}", "probe").unwrap();
        assert_eq!(neg.n, None);
        assert!(
            parse_object::<Probe>(b"[1,2]", "probe").is_err(),
            "a struct must not read an array"
        );
        assert!(parse_object::<Probe>(b"", "probe").is_err());
        assert!(parse_object::<Probe>(b"{\"n\": 1", "probe").is_err());
        assert!(parse_object::<Probe>(b"\xff\xfe", "probe").is_err());
        assert!(parse_array::<Vec<Probe>>(b"{}", "probe").is_err());
        let err = parse_array::<Vec<Probe>>(
            b"{\"error\":{\"code\":501,\"message\":\"This server does not support slots endpoint.\"}}",
            "slots",
        )
        .unwrap_err();
        assert!(err.contains("does not support slots"), "{err}");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse_array::<Vec<Probe>>(deep.as_bytes(), "deep").is_err());
        let huge = vec![b' '; MAX_BODY + 1];
        assert!(parse_object::<Probe>(&huge, "huge").is_err());
    }
}
