//! Prometheus's answer to an instant query (`GET /api/v1/query`): the
//! envelope `{"status": "success"|"error", "data": {"resultType":
//! "vector", "result": [{"metric": {...}, "value": [t, "v"]}]}}` of its
//! HTTP API (prometheus/docs/querying/api.md). The body is whatever
//! answered at the URL the user gave: it is read as outside input, every
//! error a message, never a panic.

use serde::Deserialize;
use std::collections::HashMap;

/// One series of an instant vector: its labels (`__name__` among them)
/// and its value at the evaluation time.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Series {
    pub metric: HashMap<String, String>,
    /// (evaluation time in Unix seconds, the value as Prometheus writes
    /// it: `"12"`, `"0.5"`, `"NaN"`, `"+Inf"`).
    value: (f64, String),
}

impl Series {
    /// The label's value; None where the series has no such label (an
    /// empty value is the same as none in Prometheus).
    pub fn label(&self, name: &str) -> Option<&str> {
        self.metric.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The family's name.
    pub fn name(&self) -> &str {
        self.label("__name__").unwrap_or("")
    }

    /// The value where it is a finite number; NaN and infinities (which
    /// no `serve` series holds) are unknown.
    pub fn value(&self) -> Option<f64> {
        self.value.1.parse::<f64>().ok().filter(|v| v.is_finite())
    }

    /// The value as a count of bytes (or of anything): a finite number at
    /// least 0 and below 2^64, rounded; else unknown.
    pub fn count(&self) -> Option<u64> {
        self.value()
            .filter(|v| *v >= 0.0 && *v < 18_446_744_073_709_551_616.0)
            .map(|v| v.round() as u64)
    }

    #[cfg(test)]
    pub fn new(labels: &[(&str, &str)], value: &str) -> Series {
        Series {
            metric: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            value: (0.0, value.into()),
        }
    }
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

/// The series of an instant-vector answer, or what Prometheus (or
/// whatever answered) said was wrong.
pub fn vector(body: &[u8]) -> Result<Vec<Series>, String> {
    serde_json::from_value(result(body, "vector")?).map_err(|e| format!("a series Prometheus sent does not read ({e})"))
}

#[derive(Deserialize)]
struct Range {
    values: Vec<(f64, String)>,
}

/// The time of the newest sample in a range-vector (`matrix`) answer:
/// when Prometheus last scraped what the query selects; None when it
/// selects nothing.
pub fn newest_sample_time(body: &[u8]) -> Result<Option<f64>, String> {
    let ranges: Vec<Range> = serde_json::from_value(result(body, "matrix")?)
        .map_err(|e| format!("a range Prometheus sent does not read ({e})"))?;
    Ok(ranges
        .iter()
        .flat_map(|r| r.values.iter().map(|v| v.0))
        .filter(|t| t.is_finite())
        .reduce(f64::max))
}

/// The `result` of an answer of the type asked for.
fn result(body: &[u8], wanted: &str) -> Result<serde_json::Value, String> {
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|e| format!("not an answer of Prometheus's query API ({e})"))?;
    if envelope.status != "success" {
        let kind = envelope.error_type.as_deref().unwrap_or("error");
        let why = envelope.error.as_deref().unwrap_or("no reason given");
        return Err(format!("Prometheus answered {kind}: {why}"));
    }
    let data = envelope
        .data
        .ok_or_else(|| "Prometheus answered success without data".to_string())?;
    if data.result_type != wanted {
        return Err(format!(
            "Prometheus answered a {} where a {wanted} was asked for",
            data.result_type
        ));
    }
    Ok(data.result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_reads_with_its_labels_and_values() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","instance":"a:9464","job":"gputaskman"},"value":[1796040000.5,"1"]},
            {"metric":{"__name__":"x","empty":""},"value":[1796040000.5,"NaN"]},
            {"metric":{"__name__":"y"},"value":[1796040000.5,"-3"]}]}}"#;
        let v = vector(body).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].name(), v[0].label("instance"), v[0].count()),
            ("up", Some("a:9464"), Some(1))
        );
        assert_eq!((v[1].label("empty"), v[1].value()), (None, None));
        assert_eq!((v[2].value(), v[2].count()), (Some(-3.0), None));
    }

    #[test]
    fn errors_and_other_answers_are_said_never_taken_for_an_empty_fleet() {
        let err = vector(br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#);
        assert_eq!(err.unwrap_err(), "Prometheus answered bad_data: parse error at char 3");
        let matrix = vector(br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#);
        assert!(matrix.unwrap_err().contains("a matrix where a vector"));
        assert!(vector(b"<html>login</html>").unwrap_err().starts_with("not an answer"));
        assert!(vector(br#"{"status":"success"}"#).unwrap_err().contains("without data"));
        let odd =
            vector(br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#);
        assert!(odd.unwrap_err().starts_with("a series Prometheus sent"));
    }

    #[test]
    fn the_newest_sample_of_a_range_is_its_last_scrape() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"instance":"a"},"values":[[100.5,"1"],[102.5,"1"]]},
            {"metric":{"instance":"a"},"values":[[101.0,"7"]]}]}}"#;
        assert_eq!(newest_sample_time(body).unwrap(), Some(102.5));
        let none = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert_eq!(newest_sample_time(none).unwrap(), None);
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(newest_sample_time(vector).is_err());
    }

    #[test]
    fn any_bytes_are_an_answer_or_an_error_never_a_panic() {
        let good =
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,"2"]}]}}"#;
        for cut in 0..good.len() {
            let _ = vector(&good[..cut]);
            let mut flipped = good.to_vec();
            flipped[cut] ^= 0x55;
            let _ = vector(&flipped);
        }
    }
}
