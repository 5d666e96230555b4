//! Prometheus text from a runtime's /metrics (llama.cpp, vLLM, SGLang, TGI): any text
//! gives samples or an error, never a panic; every sample has a valid
//! metric name and came from one line.
#![no_main]

use gputaskman::models::runtimes::{llamacpp, parse_prometheus, sglang, tgi, vllm};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = gputaskman_fuzz::text(data);
    if let Ok(samples) = parse_prometheus(&text) {
        assert!(samples.len() <= text.lines().count());
        for s in &samples {
            assert!(!s.name.is_empty());
            assert!(s
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'));
        }
    }
    if let Ok(metrics) = llamacpp::parse_metrics(&text) {
        let mut s = llamacpp::ServerState::default();
        s.merge_metrics(&metrics);
    }
    if let Ok(metrics) = vllm::parse_metrics(&text) {
        let _ = metrics.kv_capacity_tokens();
    }
    if let Ok(work) = sglang::parse_metrics(&text) {
        assert!(work.kv_used_ratio.is_none_or(|r| (0.0..=1.0).contains(&r)));
    }
    let _ = tgi::parse_metrics(&text);
});
