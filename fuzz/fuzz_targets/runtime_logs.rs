//! llama.cpp, Ollama, vLLM, SGLang and TGI log text, as read from a runtime's stdout/stderr
//! file or --log-file: any text gives a report, never a panic; a figure
//! cannot exceed what the text could say, and reports add up without
//! overflow.
#![no_main]

use gputaskman::models::logs::{parse_log, BufferKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = gputaskman_fuzz::text(data);
    let report = parse_log(&text);
    // One buffer or cache per line at most.
    let lines = text.lines().count();
    assert!(report.buffers.len() <= lines);
    assert!(report.ollama_memory.len() <= lines);
    assert!(report.kv_caches.len() <= lines);
    if let Some((offloaded, total)) = report.offloaded_layers {
        let _ = (offloaded, total);
    }
    for kind in [
        BufferKind::Model,
        BufferKind::Kv,
        BufferKind::Compute,
        BufferKind::Output,
        BufferKind::Rs,
    ] {
        let all = report.total(kind, false);
        let device = report.total(kind, true);
        if let (Some(all), Some(device)) = (all, device) {
            assert!(device <= all, "{kind:?}: device {device} > all {all}");
        }
    }
    let _ = serde_json::to_string(&report.kv_caches).unwrap();
    if let Some(server) = &report.server {
        assert!(server.names.len() <= 16, "one name a figure: {:?}", server.names);
    }
});
