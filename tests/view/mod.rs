//! The views' sanitizer for the test crates that compile `src/snapshot` by
//! `#[path]`: `snapshot::diff` quotes names and paths through it. The test
//! crate must declare `mod view` at its root.

#[allow(dead_code)]
#[path = "../../src/view/safe_text.rs"]
pub mod safe_text;
