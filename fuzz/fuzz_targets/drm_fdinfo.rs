//! /proc/PID/fdinfo/FD of a DRM client: any bytes parse to a bounded
//! record, never a panic.
#![no_main]

use gputaskman::collect::drm::fdinfo::{parse, MAX_LINES, MAX_NAMES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let info = parse(data);
    assert!(info.regions.len() <= MAX_NAMES);
    assert!(info.engines.len() <= MAX_NAMES);
    assert!(info.malformed as usize <= MAX_LINES);
    for region in info.regions.values() {
        // Derived figures must not overflow whatever the counters say.
        let _ = (region.held(), region.private());
    }
});
