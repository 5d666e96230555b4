//! Windows GPU counters as `Get-Counter` and PDH name them: a counter path
//! with its instance (`pid_P_luid_0xH_0xL_phys_N_eng_E_engtype_T`) and a
//! value, a line at a time. Any text: a value, None (a counter we do not
//! read) or an error, never a panic; what parses adds into a reading, and
//! a reading's figures never wrap.
#![no_main]

use gputaskman::collect::wddm::{parse_instance, parse_line, parse_path, Reading};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = gputaskman_fuzz::text(data);
    let mut reading = Reading::new(1);
    for line in text.lines() {
        let _ = parse_instance(line);
        let _ = parse_path(line);
        if let Ok(Some(value)) = parse_line(line) {
            reading.add(value);
        }
    }
    for memory in reading.memory.values() {
        let _ = gputaskman::collect::wddm::split(memory);
    }
});
