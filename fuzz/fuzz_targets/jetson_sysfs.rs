//! What a Jetson's kernel publishes: nvmap's client list (debugfs),
//! /proc/meminfo and the device tree's model. Any bytes give values or
//! nothing, never a panic; a client is never PID 0 and the list never
//! holds more clients than it has lines.
#![no_main]

use gputaskman::collect::jetson;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = gputaskman_fuzz::text(data);
    let list = jetson::parse_clients(&text);
    assert!(list.clients.len() <= text.lines().count());
    assert!(list.clients.iter().all(|c| c.pid != 0));
    let _ = jetson::mem_total(&text);
    if let Some(model) = jetson::board_model(&text) {
        assert!(!model.is_empty() && !model.contains('\0'));
    }
});
