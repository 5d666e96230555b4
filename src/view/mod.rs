//! Views render a Snapshot and read nothing else, so recordings play back
//! through the same code.

pub mod diff;
pub mod explain;
pub mod safe_text;
pub mod summary;
pub mod text;
pub mod tui;

/// How text tells a device apart: its UUID, else its PCI bus id.
pub fn device_ident<'a>(uuid: Option<&'a str>, pci_bus_id: Option<&'a str>) -> &'a str {
    uuid.or(pci_bus_id).unwrap_or("no UUID or bus id")
}

/// How text names a model: its file name, else the name its runtime gives.
pub fn model_name<'a>(path: Option<&'a str>, name: Option<&'a str>) -> &'a str {
    path.map(|p| p.rsplit('/').next().unwrap_or(p))
        .or(name)
        .unwrap_or("(unnamed model)")
}

pub fn percent(p: Option<u32>) -> String {
    p.map(|p| format!("{p}%")).unwrap_or_else(|| "n/a".into())
}

pub fn opt(s: Option<&str>) -> &str {
    s.unwrap_or("n/a")
}
