//! A recording file (`gputaskman record`: JSON lines, plain or zstd), as
//! `replay`, `summary` and `plot` open it: any bytes give an index whose
//! snapshots read or are named as skipped, or an error, never a panic; an
//! index never claims more snapshots than the file has lines.
#![no_main]

use gputaskman::record::index::{open_recording, parse_line};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

fn scratch() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| std::env::temp_dir().join(format!("gputaskman-fuzz-recording-{}.jsonl", std::process::id())))
}

fuzz_target!(|data: &[u8]| {
    let _ = parse_line(1, data, false);
    let path = scratch();
    std::fs::write(path, data).unwrap();
    let Ok(index) = open_recording(path) else {
        return;
    };
    let lines = data.split(|b| *b == b'\n').count();
    // zstd frames can hold more lines than the compressed bytes show.
    if !data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        assert!(index.len() <= lines, "{} snapshots from {lines} lines", index.len());
    }
    let mut seen = 0;
    let _skipped = index.for_each(|_, _| seen += 1);
    assert!(seen <= index.len());
    for i in 0..index.len().min(4) {
        let _ = index.get(i);
        let _ = index.taken_at(i);
    }
});
