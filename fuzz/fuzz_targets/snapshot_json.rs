//! Snapshot JSON as `gputaskman diff` reads it (a file from anywhere):
//! a snapshot or an error, never a panic; a snapshot that parses writes out
//! as JSON that parses back equal, and diffs against itself and a default.
#![no_main]

use gputaskman::snapshot::{diff, load};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(snapshot) = load::parse(data) else {
        return;
    };
    let json = serde_json::to_vec(&snapshot).expect("a parsed snapshot serializes");
    let again = load::parse(&json).expect("a written snapshot parses back");
    // NaN never equals itself; JSON has no NaN, so equality must hold.
    assert_eq!(snapshot, again);
    let d = diff::diff(&snapshot, &again, "a", "b");
    let _ = serde_json::to_string(&d).unwrap();
});
