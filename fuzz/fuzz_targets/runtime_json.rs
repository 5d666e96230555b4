//! Runtime API answers: llama.cpp /props, /slots and /v1/models, Ollama
//! /api/ps, LM Studio /api/v0/models and /api/v1/models, vLLM /v1/models
//! and the model's config.json, safetensors headers, SGLang /server_info
//! and TGI /info. The first byte picks the parser;
//! the rest is the body. A value or an error message, never a panic; what a
//! parse gives can be merged and asked for totals without overflow.
#![no_main]

use gputaskman::models::runtimes::{llamacpp, lmstudio, ollama, sglang, tgi, vllm};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 11 {
        0 => {
            if let Ok(props) = llamacpp::parse_props(body) {
                let mut s = llamacpp::ServerState::default();
                s.merge_props(&props);
                let _ = s.reported_total();
            }
        }
        1 => {
            if let Ok(slots) = llamacpp::parse_slots(body) {
                let mut s = llamacpp::ServerState::default();
                s.merge_slots(&slots);
                let _ = s.reported_total();
                s.clear_live();
            }
        }
        2 => {
            if let Ok(models) = llamacpp::parse_v1_models(body) {
                let mut s = llamacpp::ServerState::default();
                s.merge_v1_models(&models);
                let _ = s.reported_total();
            }
        }
        3 => {
            let _ = ollama::parse_ps(body);
        }
        4 => {
            let _ = lmstudio::parse_models(body);
        }
        5 => {
            let _ = vllm::parse_models(body);
        }
        6 => {
            if let Ok(config) = vllm::parse_hf_config(body) {
                let _ = (config.kv_heads(), config.head_dim());
                for dtype in [None, Some("auto"), Some("fp8"), Some("bfloat16")] {
                    let _ = vllm::kv_bytes_per_token(&config, dtype, dtype);
                }
            }
        }
        7 => {
            let _ = vllm::safetensors_header_len(body);
            let _ = vllm::parse_safetensors_header(body);
        }
        8 => {
            let _ = lmstudio::parse_v1_models(body);
        }
        9 => {
            if let Ok(mut figures) = sglang::parse_server_info(body) {
                let other = figures.clone();
                figures.fill_from(&other);
            }
        }
        _ => {
            let _ = tgi::parse_info(body);
        }
    }
});
