//! What `npu-smi info` and `npu-smi info -t usages` print (an outside
//! tool's output): any text gives chips, processes or nothing, never a
//! panic; every process entry points at a listed chip, and a chip's used
//! memory never comes without a total.
#![no_main]

use gputaskman::collect::ascend;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = gputaskman_fuzz::text(data);
    let info = ascend::parse_info(&text);
    for chip in &info.chips {
        assert!(chip.memory_used_bytes.is_none() || chip.memory_total_bytes.is_some(), "{chip:?}");
    }
    let (devices, usage) = ascend::devices(&info, 3);
    assert_eq!(devices.len(), info.chips.len());
    for (_, u) in &usage {
        assert!(devices.iter().any(|d| d.index == u.device), "{u:?}");
    }
    // The same text as `-t usages` output: blocks or nothing.
    for chip in ascend::parse_usages(&text) {
        let _ = chip.memory_activity_percent();
    }
});
