//! SGLang: its `GET /server_info` (`/get_server_info` before 0.5.10), its
//! `GET /metrics` (with `--enable-metrics`) and the memory lines of its log.
//!
//! - `/server_info` is every server argument, flat (`model_path`,
//!   `served_model_name`, `dtype`, `kv_cache_dtype`, `context_length`,
//!   `mem_fraction_static`, `page_size`, `tp_size`), the scheduler's
//!   `max_total_num_tokens` (the KV pool in tokens), `version`, and
//!   `internal_states`, one per data-parallel rank, whose `memory_usage`
//!   (0.4.10+) is `{weight, kvcache, token_capacity, graph}` in GiB; `graph`
//!   is an object by phase from 0.5.23 (sglang/srt/entrypoints/http_server.py,
//!   managers/scheduler.py). It also holds `api_key` in clear: nothing here
//!   keeps any field but those read.
//! - `/metrics`: `sglang:num_running_reqs`, `num_queue_reqs`, `token_usage`
//!   (0..1 of the pool), `cache_hit_rate`, repeated per tensor-parallel
//!   rank (observability/scheduler_metrics_mixin.py); the token totals
//!   `prompt_tokens_total` and `generation_tokens_total`, which grow as
//!   each request ends (metrics_collector.py `observe_one_finished_request`),
//!   and from 0.5.10 `realtime_tokens_total{mode}` (`prefill_compute`,
//!   `prefill_cache`, `decode`), which grows with each batch run.
//! - The log: `Load weight end. ... mem usage=1.06 GB.`, `KV Cache is
//!   allocated. #tokens: 20480, K size: 0.12 GB, V size: 0.12 GB` (`KV
//!   size` for MLA), `Capture cuda graph end. ... mem usage=0.07 GB.`,
//!   `max_total_num_tokens=20480, ..., context_len=32768`, which closes a
//!   start (model_executor/model_runner.py, mem_cache/memory_pool.py,
//!   managers/scheduler.py); "GB" is GiB, printed to two decimals. A
//!   speculative decoder's draft model loads within the same start, after
//!   the target: the target's first figures count.
//!
//! Memory figures are one GPU's (a rank's): with `tp_size` over 1 the
//! weights are split across that many.

use super::figures::{gib_bytes, RankSum, ServerFigures, ServerWork};
use super::{parse_object, parse_prometheus};
use serde_json::Value;

/// The longest log line looked at (the `server_args=ServerArgs(...)` dump
/// is ~9 KB and says nothing read here).
const MAX_LINE: usize = 4096;

/// `GET /server_info` (or `/get_server_info`).
pub fn parse_server_info(body: &[u8]) -> Result<ServerFigures, String> {
    const WHAT: &str = "SGLang /server_info";
    let info: serde_json::Map<String, Value> = parse_object(body, WHAT)?;
    let text = |key: &str| info.get(key).and_then(Value::as_str).map(String::from);
    let count = |v: Option<&Value>| v.and_then(Value::as_u64);
    if text("model_path").is_none() && info.get("internal_states").is_none() {
        return Err(format!("{WHAT}: neither model_path nor internal_states"));
    }
    let mut f = ServerFigures {
        model: text("model_path"),
        served_name: text("served_model_name"),
        dtype: text("dtype").filter(|d| d != "auto"),
        kv_dtype: text("kv_cache_dtype").filter(|d| d != "auto"),
        context: count(info.get("context_length")),
        kv_block_size: count(info.get("page_size")),
        memory_utilization: info
            .get("mem_fraction_static")
            .and_then(Value::as_f64)
            .filter(|u| (0.0..=1.0).contains(u)),
        ..ServerFigures::default()
    };
    let tp = count(info.get("tp_size")).filter(|&n| n > 1);
    let one_gpu = tp.map(|n| format!(" (one GPU of tp_size {n})")).unwrap_or_default();
    if f.context.is_some() {
        f.name("max_model_len", "/server_info context_length");
    }
    if f.memory_utilization.is_some() {
        f.name("memory_utilization", "/server_info mem_fraction_static");
    }
    if f.kv_block_size.is_some() {
        f.name("kv_block_size", "/server_info page_size");
    }
    let first_rank = info
        .get("internal_states")
        .and_then(Value::as_array)
        .and_then(|ranks| ranks.first());
    let usage = first_rank.and_then(|r| r.get("memory_usage"));
    f.kv_tokens = count(info.get("max_total_num_tokens"));
    if f.kv_tokens.is_some() {
        f.name("kv_tokens", "/server_info max_total_num_tokens");
    } else {
        f.kv_tokens = count(usage.and_then(|u| u.get("token_capacity")));
        if f.kv_tokens.is_some() {
            f.name("kv_tokens", "/server_info memory_usage.token_capacity");
        }
    }
    let gib = |key: &str| usage.and_then(|u| u.get(key));
    f.weights_bytes = gib("weight").and_then(Value::as_f64).and_then(gib_bytes);
    if f.weights_bytes.is_some() {
        f.name(
            "reported.weights_bytes",
            &format!("/server_info memory_usage.weight{one_gpu}"),
        );
    }
    f.kv_bytes = gib("kvcache").and_then(Value::as_f64).and_then(gib_bytes);
    if f.kv_bytes.is_some() {
        f.name(
            "reported.kv_bytes",
            &format!("/server_info memory_usage.kvcache{one_gpu}"),
        );
    }
    // A number, or (0.5.23) one per captured phase, which add up.
    f.graph_bytes = match gib("graph") {
        Some(Value::Object(phases)) => phases
            .values()
            .try_fold(0u64, |total, v| total.checked_add(v.as_f64().and_then(gib_bytes)?)),
        Some(v) => v.as_f64().and_then(gib_bytes),
        None => None,
    };
    if f.graph_bytes.is_some() {
        f.name(
            "reported.compute_bytes",
            &format!("/server_info memory_usage.graph (CUDA graphs){one_gpu}"),
        );
    }
    Ok(f)
}

/// `GET /metrics`: series repeated per tensor-parallel rank count once;
/// data-parallel ranks add up ([`RankSum`]). The token totals are the
/// real-time ones where the server has them (0.5.10+), else those that
/// grow as each request ends.
pub fn parse_metrics(text: &str) -> Result<ServerWork, String> {
    let mut running = RankSum::default();
    let mut waiting = RankSum::default();
    let (mut prompt_done, mut generated_done) = (RankSum::default(), RankSum::default());
    let (mut prompt_now, mut generated_now) = (RankSum::default(), RankSum::default());
    let mut work = ServerWork::default();
    let mut any = false;
    for s in parse_prometheus(text)? {
        let Some(name) = s.name.strip_prefix("sglang:") else {
            continue;
        };
        any = true;
        let engine = engine_key(&s.labels);
        match (name, s.label("mode")) {
            ("num_running_reqs", _) => running.add(&engine, s.value),
            ("num_queue_reqs", _) => waiting.add(&engine, s.value),
            ("prompt_tokens_total", _) => prompt_done.add(&engine, s.value),
            ("generation_tokens_total", _) => generated_done.add(&engine, s.value),
            ("realtime_tokens_total", Some("prefill_compute" | "prefill_cache")) => prompt_now.add(&engine, s.value),
            ("realtime_tokens_total", Some("decode")) => generated_now.add(&engine, s.value),
            ("token_usage", _) if (0.0..=1.0).contains(&s.value) => {
                work.kv_used_ratio = Some(work.kv_used_ratio.map_or(s.value, |u| u.max(s.value)));
            }
            ("cache_hit_rate", _) if (0.0..=1.0).contains(&s.value) => {
                let highest = work.prefix_cache_hit_ratio.map_or(s.value, |u| u.max(s.value));
                work.prefix_cache_hit_ratio = Some(highest);
            }
            _ => {}
        }
    }
    if !any {
        return Err("SGLang /metrics: no sglang: series (is --enable-metrics on?)".into());
    }
    work.requests_running = running.total();
    work.requests_waiting = waiting.total();
    work.counts_in_flight = generated_now.total().is_some();
    (work.prompt_tokens, work.generation_tokens) = if work.counts_in_flight {
        (prompt_now.total(), generated_now.total())
    } else {
        (prompt_done.total(), generated_done.total())
    };
    Ok(work)
}

/// The labels that tell one engine's series from another's: all but the
/// ranks within it (and the writer's pid), which repeat one figure.
fn engine_key(labels: &[(String, String)]) -> String {
    const WITHIN: &[&str] = &["tp_rank", "pp_rank", "moe_ep_rank", "attn_cp_rank", "pid"];
    let mut key: Vec<String> = labels
        .iter()
        .filter(|(k, _)| !WITHIN.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    key.sort();
    key.join(",")
}

/// SGLang's memory lines in a log; None when it has none. The last start
/// counts (a `Load weight begin.` after the summary line that closes the
/// one before), and of its ranks the first (`TP0`, or no rank tag on one
/// GPU); within a start the first model's figures (the target's, not a
/// speculative draft's), every graph capture's memory added.
pub fn parse_log(text: &str) -> Option<ServerFigures> {
    const RANK: &str = " (the first GPU's)";
    let mut f = ServerFigures::default();
    let mut seen = false;
    // Whether a start is open (its summary line not yet seen).
    let mut open = false;
    for line in text.lines().filter(|l| l.len() <= MAX_LINE) {
        let Some(message) = first_rank_message(line) else {
            continue;
        };
        if message.starts_with("Load weight begin.") {
            if !open {
                f = ServerFigures::default();
                open = true;
            }
            seen = true;
        } else if let Some(rest) = message.strip_prefix("Load weight end.") {
            if f.weights_bytes.is_none() {
                f.weights_bytes = field(rest, "mem usage=", ' ').and_then(gib);
                if f.weights_bytes.is_some() {
                    f.name(
                        "reported.weights_bytes",
                        &format!("log \"Load weight end. ... mem usage\"{RANK}"),
                    );
                }
            }
            seen = true;
        } else if let Some(rest) = message.strip_prefix("KV Cache is allocated.") {
            if f.kv_bytes.is_none() {
                f.kv_tokens = field(rest, "#tokens: ", ',').and_then(|n| n.parse().ok());
                f.kv_bytes = match (field(rest, "K size: ", ' '), field(rest, "V size: ", ' ')) {
                    (Some(k), Some(v)) => gib(k).zip(gib(v)).and_then(|(k, v)| k.checked_add(v)),
                    _ => field(rest, "KV size: ", ' ').and_then(gib),
                };
                if f.kv_tokens.is_some() {
                    f.name("kv_tokens", "log \"KV Cache is allocated. #tokens\"");
                }
                if f.kv_bytes.is_some() {
                    f.name(
                        "reported.kv_bytes",
                        &format!("log \"KV Cache is allocated\" K size + V size{RANK}"),
                    );
                }
            }
            seen = true;
        } else if message.starts_with("Capture ") && message.contains(" end.") {
            // Each capture (decode, piecewise, draft) takes its own.
            if let Some(bytes) = field(message, "mem usage=", ' ').and_then(gib) {
                f.graph_bytes = f.graph_bytes.unwrap_or(0).checked_add(bytes);
                f.name(
                    "reported.compute_bytes",
                    &format!("log \"Capture cuda graph end. ... mem usage\"{RANK}"),
                );
                seen = true;
            }
        } else if let Some(rest) = message.strip_prefix("max_total_num_tokens=") {
            open = false;
            let tokens = rest.split(',').next().and_then(|n| n.trim().parse().ok());
            if f.kv_tokens.is_none() && tokens.is_some() {
                f.kv_tokens = tokens;
                f.name("kv_tokens", "log \"max_total_num_tokens\"");
            }
            f.context = field(rest, "context_len=", ',').and_then(|n| n.parse().ok());
            if f.context.is_some() {
                f.name("max_model_len", "log \"context_len\"");
            }
            seen = true;
        }
    }
    seen.then_some(f)
}

/// The message of a line SGLang's logger wrote for the first rank:
/// `[2025-12-12 20:19:51] X` or `[2025-10-07 23:17:19 DP0 TP0] X`; None for
/// another rank's line. A line without that prefix (a logging config of
/// the user's) is taken whole.
fn first_rank_message(line: &str) -> Option<&str> {
    let line = line.trim_start_matches('\r');
    let Some(inner) = line.strip_prefix('[') else {
        return Some(line.trim());
    };
    let (prefix, message) = inner.split_once("] ")?;
    let ranks_zero = prefix.split_whitespace().skip(2).all(|tag| {
        tag.trim_start_matches(|c: char| c.is_ascii_uppercase() || c == '_')
            .parse::<u32>()
            .is_ok_and(|rank| rank == 0)
    });
    ranks_zero.then_some(message.trim())
}

/// The value after `key` up to `end` (or the line's end), trimmed of a
/// closing `.`.
fn field<'a>(text: &'a str, key: &str, end: char) -> Option<&'a str> {
    let (_, after) = text.split_once(key)?;
    let value = after.split(end).next()?.trim();
    let value = value.trim_end_matches(['.', ',']);
    (!value.is_empty()).then_some(value)
}

/// `1.06 GB` as SGLang prints GiB.
fn gib(text: &str) -> Option<u64> {
    gib_bytes(text.trim_end_matches("GB").trim().parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER_INFO: &[u8] = include_bytes!("../../../tests/data/sglang/server_info.json");
    const SERVER_INFO_046: &[u8] = include_bytes!("../../../tests/data/sglang/server_info-0.4.6.json");
    const LOG: &str = include_str!("../../../tests/data/sglang/server.log");
    const LOG_TP: &str = include_str!("../../../tests/data/sglang/server-tp.log");

    /// SGLang 0.5.6.post2 serving Qwen2.5-0.5B-Instruct on one GPU
    /// (tests/data/sglang/README.md).
    #[test]
    fn server_info_gives_the_pool_and_the_memory_it_took() {
        let f = parse_server_info(SERVER_INFO).unwrap();
        assert_eq!(f.model.as_deref(), Some("qwen/qwen2.5-0.5b-instruct"));
        assert_eq!(f.served_name.as_deref(), Some("qwen/qwen2.5-0.5b-instruct"));
        assert_eq!(
            (f.dtype.as_deref(), f.kv_dtype.as_deref()),
            (None, None),
            "auto is no dtype"
        );
        assert_eq!(f.context, None, "context_length is the argument, null when not given");
        assert_eq!(f.kv_tokens, Some(20480));
        assert_eq!(f.kv_block_size, Some(1));
        assert_eq!(f.memory_utilization, Some(0.841));
        assert_eq!(f.weights_bytes, Some(gib_bytes(1.06).unwrap()));
        assert_eq!(f.kv_bytes, Some(246_960_620), "0.23 GiB");
        assert_eq!(f.graph_bytes, Some(75_161_928), "0.07 GiB");
        assert!(f
            .names
            .contains(&"kv_tokens: /server_info max_total_num_tokens".to_string()));
        let older = parse_server_info(SERVER_INFO_046).unwrap();
        assert_eq!(older.model.as_deref(), Some("qwen/qwen2.5-0.5b-instruct"));
        assert_eq!(
            (older.weights_bytes, older.kv_bytes),
            (None, None),
            "no memory_usage before 0.4.10"
        );
    }

    #[test]
    fn server_info_of_another_shape_is_an_error_or_unknown() {
        for body in [&b""[..], b"[]", b"{}", b"{\"model_path\":", b"\xff"] {
            assert!(parse_server_info(body).is_err(), "{body:?}");
        }
        let odd = parse_server_info(
            br#"{"model_path":"/m","tp_size":4,"mem_fraction_static":7,"max_total_num_tokens":-1,
                "internal_states":[{"memory_usage":{"weight":-6.94,"kvcache":"x","graph":{"decode":0.5,"verify":0.25},"token_capacity":99}}]}"#,
        )
        .unwrap();
        assert_eq!(odd.memory_utilization, None);
        assert_eq!(odd.weights_bytes, None, "a drop in free memory below 0 is no size");
        assert_eq!(odd.kv_bytes, None);
        assert_eq!(odd.graph_bytes, Some(gib_bytes(0.75).unwrap()), "phases add up");
        assert_eq!(odd.kv_tokens, Some(99), "token_capacity when the top level has none");
        assert!(
            odd.names
                .iter()
                .any(|n| n.ends_with("(CUDA graphs) (one GPU of tp_size 4)")),
            "{:?}",
            odd.names
        );
        // 16,385 phases of 1 PiB: a sum past 2^64 is unknown, not wrapped.
        let phases: Vec<String> = (0..16_385).map(|i| format!(r#""p{i}":1048576"#)).collect();
        let huge = format!(
            r#"{{"model_path":"/m","internal_states":[{{"memory_usage":{{"graph":{{{}}}}}}}]}}"#,
            phases.join(",")
        );
        assert_eq!(parse_server_info(huge.as_bytes()).unwrap().graph_bytes, None);
        let with_key = parse_server_info(br#"{"model_path":"/m","api_key":"sk-secret"}"#).unwrap();
        assert!(!format!("{with_key:?}").contains("sk-secret"), "the key is never kept");
    }

    #[test]
    fn metrics_count_each_engine_once() {
        let work = parse_metrics(include_str!("../../../tests/data/sglang/metrics.txt")).unwrap();
        assert_eq!(work.requests_running, Some(162));
        assert_eq!(work.requests_waiting, Some(2826));
        assert_eq!(work.kv_used_ratio, Some(0.28));
        assert_eq!(work.prompt_tokens, Some(8_128_902));
        assert_eq!(work.generation_tokens, Some(7_557_572));
        assert_eq!(work.prefix_cache_hit_ratio, Some(0.007507552643049313));
        assert!(!work.counts_in_flight, "these totals grow as each request ends");
        let ranks = "sglang:num_running_reqs{dp_rank=\"0\",tp_rank=\"0\"} 3\n\
                     sglang:num_running_reqs{dp_rank=\"0\",tp_rank=\"1\"} 3\n\
                     sglang:num_running_reqs{dp_rank=\"1\",tp_rank=\"2\"} 2\n\
                     sglang:num_queue_reqs{dp_rank=\"1\",pid=\"915\"} 1\n\
                     sglang:generation_tokens_total{is_streaming=\"true\"} 10\n\
                     sglang:generation_tokens_total{is_streaming=\"false\"} 5\n";
        let work = parse_metrics(ranks).unwrap();
        assert_eq!(work.requests_running, Some(5), "TP ranks repeat, DP ranks add");
        assert_eq!(work.requests_waiting, Some(1));
        assert_eq!(work.generation_tokens, Some(15));
        assert!(parse_metrics("vllm:num_requests_running 1\n").is_err());
        assert!(parse_metrics("<html>").is_err());
    }

    /// 0.5.10's real-time counters (metrics_collector.py
    /// `increment_realtime_tokens`) are the totals where they are served:
    /// they grow while a request runs.
    #[test]
    fn real_time_counters_are_taken_where_served() {
        let text = "sglang:generation_tokens_total{model_name=\"m\"} 100\n\
                    sglang:realtime_tokens_total{mode=\"prefill_compute\",tp_rank=\"0\"} 40\n\
                    sglang:realtime_tokens_total{mode=\"prefill_compute\",tp_rank=\"1\"} 40\n\
                    sglang:realtime_tokens_total{mode=\"prefill_cache\",tp_rank=\"0\"} 2\n\
                    sglang:realtime_tokens_total{mode=\"decode\",tp_rank=\"0\"} 700\n";
        let work = parse_metrics(text).unwrap();
        assert!(work.counts_in_flight);
        assert_eq!((work.prompt_tokens, work.generation_tokens), (Some(42), Some(700)));
    }

    #[test]
    fn the_log_gives_what_each_part_took() {
        let f = parse_log(LOG).unwrap();
        assert_eq!(f.weights_bytes, Some(gib_bytes(1.06).unwrap()));
        assert_eq!(f.kv_tokens, Some(20480));
        assert_eq!(f.kv_bytes, Some(2 * gib_bytes(0.12).unwrap()));
        assert_eq!(f.graph_bytes, Some(gib_bytes(0.07).unwrap()));
        assert_eq!(f.context, Some(32768));
    }

    /// Several threads' real lines: eight ranks' lines where TP0's count,
    /// MLA's single buffer, 0.5.10's `elapsed=` and 0.5.23's `dtype:`.
    #[test]
    fn the_log_of_many_ranks_and_versions() {
        // The last start is PR 11716's (TP0's `Load weight begin`); its
        // TP5 lines are not TP0's, and the later threads' TP0 lines fill it.
        let f = parse_log(LOG_TP).unwrap();
        assert_eq!(f.weights_bytes, Some(gib_bytes(15.50).unwrap()), "{f:?}");
        assert_eq!(f.kv_tokens, Some(1_106_304));
        assert_eq!(f.kv_bytes, Some(2 * gib_bytes(25.32).unwrap()));
        assert_eq!(f.graph_bytes, Some(gib_bytes(1.00).unwrap()));
        let mla =
            parse_log("[2025-10-07 23:17:19 DP0 TP0] KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB\n")
                .unwrap();
        assert_eq!(
            (mla.kv_tokens, mla.kv_bytes),
            (Some(975_424), Some(gib_bytes(43.67).unwrap()))
        );
        // A speculative decoder: the draft loads after the target, in the
        // same start (no summary line between); the target's figures count.
        let draft = "[t] Load weight begin. avail mem=80 GB\n\
                     [t] Load weight end. type=T, avail mem=60 GB, mem usage=15.00 GB.\n\
                     [t] KV Cache is allocated. #tokens: 100, K size: 20.00 GB, V size: 20.00 GB\n\
                     [t] Load weight begin. avail mem=20 GB\n\
                     [t] Load weight end. type=D, avail mem=19.5 GB, mem usage=0.50 GB.\n\
                     [t] KV Cache is allocated. #tokens: 100, K size: 0.50 GB, V size: 0.50 GB\n\
                     [t] max_total_num_tokens=100, context_len=8192\n";
        let f = parse_log(draft).unwrap();
        assert_eq!(f.weights_bytes, Some(gib_bytes(15.0).unwrap()));
        assert_eq!(f.kv_bytes, Some(gib_bytes(40.0).unwrap()));
        // After the summary line, a new start replaces it.
        let again = format!(
            "{draft}[t] Load weight begin. avail mem=80 GB\n[t] Load weight end. type=T, mem usage=14.00 GB.\n"
        );
        let f = parse_log(&again).unwrap();
        assert_eq!((f.weights_bytes, f.kv_bytes), (Some(gib_bytes(14.0).unwrap()), None));
        let other_rank = parse_log("[2025-10-07 23:17:19 DP1 TP1] KV Cache is allocated. #tokens: 5, KV size: 1 GB\n");
        assert_eq!(other_rank, None);
        assert_eq!(parse_log("nothing of SGLang\n"), None);
        for garbage in [
            "[x] KV Cache is allocated. #tokens: , K size: GB",
            "KV Cache is allocated. K size: -1 GB, V size: NaN GB",
            "[2025-01-01 00:00:00 TPx] Load weight end.",
            "[",
            "max_total_num_tokens=",
        ] {
            let _ = parse_log(garbage);
        }
    }
}
