//! Hugging Face Text Generation Inference: its router's `GET /info`, its
//! `GET /metrics` and the lines of its log that size the KV pool.
//!
//! - `/info` (router/src/lib.rs `struct Info`): `model_id`,
//!   `max_total_tokens`, `max_input_tokens` (`max_input_length` before
//!   2.1), `version`; up to 2.2 also `model_dtype` and
//!   `max_batch_total_tokens`, the tokens the KV cache holds, which 2.3
//!   removed (commit 2b19d671): from then on only the log says it.
//! - `/metrics` has no token counters: `tgi_request_input_length_sum`
//!   grows as a request is taken and `tgi_request_generated_tokens_sum`
//!   when one ends (router/src/infer/mod.rs); `tgi_queue_size` and
//!   `tgi_batch_current_size` are the requests waiting and running.
//! - The log: the router's `Setting max batch total tokens to N` after
//!   warm-up (the smallest over the shards) and, from 2.4, a shard's
//!   `KV-cache blocks: N, size: B` (server/text_generation_server/models/
//!   flash_causal_lm.py). Lines are found by their text, whatever the
//!   timestamp, colours or JSON (`--json-output`) around them.

use super::figures::{ServerFigures, ServerWork};
use super::{as_count, parse_object, parse_prometheus};
use serde_json::Value;

const MAX_LINE: usize = 4096;

/// `GET /info`.
pub fn parse_info(body: &[u8]) -> Result<ServerFigures, String> {
    const WHAT: &str = "TGI /info";
    let info: serde_json::Map<String, Value> = parse_object(body, WHAT)?;
    let text = |key: &str| info.get(key).and_then(Value::as_str).map(String::from);
    let count = |key: &str| info.get(key).and_then(Value::as_u64);
    let Some(model) = text("model_id") else {
        return Err(format!("{WHAT}: no model_id"));
    };
    let mut f = ServerFigures {
        model: Some(model),
        dtype: text("model_dtype"),
        context: count("max_total_tokens"),
        kv_tokens: count("max_batch_total_tokens"),
        version: text("version"),
        ..ServerFigures::default()
    };
    if f.context.is_some() {
        f.name("context", "/info max_total_tokens");
    }
    if f.kv_tokens.is_some() {
        f.name("kv_tokens", "/info max_batch_total_tokens");
    }
    Ok(f)
}

/// `GET /metrics`; an error when it has no `tgi_` series.
pub fn parse_metrics(text: &str) -> Result<ServerWork, String> {
    let mut work = ServerWork::default();
    let mut any = false;
    for s in parse_prometheus(text)? {
        let Some(name) = s.name.strip_prefix("tgi_") else {
            continue;
        };
        any = true;
        let value = as_count(s.value);
        match name {
            "queue_size" => work.requests_waiting = value,
            "batch_current_size" => work.requests_running = value,
            "request_input_length_sum" => work.prompt_tokens = value,
            "request_generated_tokens_sum" => work.generation_tokens = value,
            _ => {}
        }
    }
    if !any {
        return Err("TGI /metrics: no tgi_ series".into());
    }
    Ok(work)
}

/// TGI's pool and context lines in a log; None when it has none. A later
/// start's lines replace an earlier one's.
pub fn parse_log(text: &str) -> Option<ServerFigures> {
    let mut f = ServerFigures::default();
    let mut seen = false;
    for line in text.lines().filter(|l| l.len() <= MAX_LINE) {
        if let Some(n) = number_after(line, "Setting max batch total tokens to ") {
            f.kv_tokens = Some(n);
            f.name("kv_tokens", "log \"Setting max batch total tokens to\"");
            seen = true;
        } else if let Some(n) = number_after(line, "KV-cache blocks: ") {
            f.kv_blocks = Some(n);
            f.kv_block_size = number_after(line, ", size: ");
            f.name("kv_blocks", "log \"KV-cache blocks: N, size: B\"");
            seen = true;
        } else if let Some(n) = number_after(line, "Maximum total tokens defaulted to ")
            .or_else(|| number_after(line, "Default `max_total_tokens` to "))
        {
            f.context = Some(n);
            f.name("context", "log \"max total tokens\" default");
            seen = true;
        }
    }
    seen.then_some(f)
}

/// The digits right after `phrase` in `line`.
fn number_after(line: &str, phrase: &str) -> Option<u64> {
    let (_, after) = line.split_once(phrase)?;
    let end = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
    after[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tests/data/tgi/README.md says where each answer comes from.
    #[test]
    fn info_of_each_version() {
        let v2 = parse_info(include_bytes!("../../../tests/data/tgi/info-2.2.json")).unwrap();
        assert_eq!(v2.model.as_deref(), Some("meta-llama/Meta-Llama-3.1-8B-Instruct"));
        assert_eq!(v2.dtype.as_deref(), Some("torch.float16"));
        assert_eq!((v2.context, v2.kv_tokens), (Some(4096), Some(19056)));
        assert_eq!(v2.version.as_deref(), Some("2.2.0"));
        let v3 = parse_info(include_bytes!("../../../tests/data/tgi/info-3.3.json")).unwrap();
        assert_eq!(v3.model.as_deref(), Some("/models/gemma-3-27b-it"));
        assert_eq!((v3.context, v3.kv_tokens, v3.dtype), (Some(8000), None, None));
        let v1 = parse_info(include_bytes!("../../../tests/data/tgi/info-1.2.json")).unwrap();
        assert_eq!((v1.context, v1.kv_tokens), (Some(2048), Some(47920)));
        for body in [&b""[..], b"[]", b"{}", b"{\"model_id\": 7}", b"{\"error\":\"x\"}"] {
            assert!(parse_info(body).is_err(), "{body:?}");
        }
        let odd = parse_info(br#"{"model_id":"m","max_total_tokens":-1,"max_batch_total_tokens":"x"}"#).unwrap();
        assert_eq!((odd.context, odd.kv_tokens), (None, None));
    }

    #[test]
    fn metrics_of_a_real_server() {
        let work = parse_metrics(include_str!("../../../tests/data/tgi/metrics.txt")).unwrap();
        assert_eq!(work.requests_waiting, Some(0));
        assert_eq!(work.requests_running, Some(0));
        assert_eq!(work.prompt_tokens, Some(662));
        assert_eq!(work.generation_tokens, Some(3423));
        assert!(!work.counts_in_flight, "a request's tokens count when it ends");
        assert!(parse_metrics("sglang:num_running_reqs 1\n").is_err());
        assert!(parse_metrics("{}").is_err());
    }

    #[test]
    fn the_log_sizes_the_pool() {
        let v3 = parse_log(include_str!("../../../tests/data/tgi/launcher.log")).unwrap();
        assert_eq!(v3.kv_tokens, Some(52125));
        assert_eq!((v3.kv_blocks, v3.kv_block_size), (Some(52719), Some(1)));
        assert_eq!(v3.context, Some(8000));
        let v2 = parse_log(include_str!("../../../tests/data/tgi/launcher-2.0.log")).unwrap();
        assert_eq!(
            (v2.kv_tokens, v2.kv_blocks, v2.context),
            (Some(801_568), None, Some(4096))
        );
        let json = r#"{"timestamp":"2024-05-01T12:00:00Z","level":"INFO","message":"Setting max batch total tokens to 1234","target":"text_generation_router"}"#;
        assert_eq!(parse_log(json).unwrap().kv_tokens, Some(1234));
        assert_eq!(parse_log("Setting max batch total tokens to x\n"), None);
        assert_eq!(
            parse_log("Setting max batch total tokens to 99999999999999999999999\n"),
            None
        );
    }
}
