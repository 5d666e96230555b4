//! Views render a Snapshot and read nothing else, so recordings play back
//! through the same code.

pub mod diff;
pub mod explain;
pub mod safe_text;
pub mod summary;
pub mod text;
pub mod tui;

pub fn percent(p: Option<u32>) -> String {
    p.map(|p| format!("{p}%")).unwrap_or_else(|| "n/a".into())
}

pub fn opt(s: Option<&str>) -> &str {
    s.unwrap_or("n/a")
}
