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
//!   flash_causal_lm.py); the launcher's `Args {` opens a start. A message
//!   counts only as a whole: the end of a plain line after its `target:`
//!   prefix (colours dropped), or a JSON line's `message` (`--json-output`).
//!   A request's line echoes what the client sent (its stop strings) inside
//!   its span and ends in the outcome, so a client cannot write a pool.

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
        ..ServerFigures::default()
    };
    if f.context.is_some() {
        f.name("max_model_len", "/info max_total_tokens");
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
/// start (the launcher's `Args {`) begins again.
pub fn parse_log(text: &str) -> Option<ServerFigures> {
    let mut f = ServerFigures::default();
    let mut seen = false;
    for line in text.lines().filter(|l| l.len() <= MAX_LINE) {
        let Some(message) = message(line) else { continue };
        let number = |phrase: &str| message.strip_prefix(phrase).and_then(whole_number);
        if message.starts_with("Args {") {
            f = ServerFigures::default();
        } else if let Some(n) = number("Setting max batch total tokens to ") {
            f.kv_tokens = Some(n);
            f.name("kv_tokens", "log \"Setting max batch total tokens to\"");
            seen = true;
        } else if let Some((blocks, size)) = message
            .strip_prefix("KV-cache blocks: ")
            .and_then(|rest| rest.split_once(", size: "))
        {
            if let (Some(blocks), Some(size)) = (whole_number(blocks), whole_number(size)) {
                (f.kv_blocks, f.kv_block_size) = (Some(blocks), Some(size));
                f.name("kv_blocks", "log \"KV-cache blocks: N, size: B\"");
                seen = true;
            }
        } else if let Some(n) =
            number("Maximum total tokens defaulted to ").or_else(|| number("Default `max_total_tokens` to "))
        {
            f.context = Some(n);
            f.name("max_model_len", "log \"max total tokens\" default");
            seen = true;
        }
    }
    seen.then_some(f)
}

/// The message of one line of TGI's log: a JSON line's `message` (the
/// router's) or `fields.message` (the launcher's), or a plain line's text
/// after its last `: ` (`... INFO text_generation_router: router/src/
/// main.rs:354: Setting max batch total tokens to 801568`), colours
/// dropped. The pool's messages hold `: ` themselves, so the candidates are
/// every suffix after a `: `; the caller matches a whole message.
fn message(line: &str) -> Option<String> {
    let line = line.trim();
    if line.starts_with('{') {
        let v: Value = serde_json::from_str(line).ok()?;
        let text = v.get("message").or_else(|| v.get("fields")?.get("message"))?.as_str()?;
        return Some(text.to_string());
    }
    let plain = strip_colours(line);
    // The known messages start after the target's `: `.
    const STARTS: &[&str] = &[
        "Args {",
        "Setting max batch total tokens to ",
        "KV-cache blocks: ",
        "Maximum total tokens defaulted to ",
        "Default `max_total_tokens` to ",
    ];
    let at = STARTS
        .iter()
        .filter_map(|start| plain.rfind(&format!(": {start}")))
        .max()?;
    Some(plain[at + 2..].to_string())
}

/// A number that is all that is left of the message.
fn whole_number(text: &str) -> Option<u64> {
    let text = text.trim_end();
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `line` without its SGR colour sequences (`ESC [ ... m`).
fn strip_colours(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\x1b') {
        return line.into();
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // Skip to the sequence's final letter.
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out.into()
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
