//! The snapshot loader: a `gputaskman --json` file (for `diff`) or one
//! line of a recording (for the recording reader), with errors that say
//! what the data is instead when it is not a snapshot.

use super::{Snapshot, SCHEMA_VERSION};
use anyhow::{anyhow, bail, Context as _};
use std::path::Path;

/// A snapshot file larger than this is not a snapshot.
const MAX_SNAPSHOT_FILE: u64 = 256 << 20;
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Reads a `gputaskman --json` snapshot, with an error that names the file
/// and what is wrong with it.
pub fn load(path: &Path) -> anyhow::Result<Snapshot> {
    let name = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("{name}: cannot read"))?;
    if meta.is_dir() {
        bail!("{name}: a directory, not a snapshot file");
    }
    if meta.len() > MAX_SNAPSHOT_FILE {
        bail!(
            "{name}: {} bytes, too large for a snapshot (a recording? diff compares two `gputaskman --json` snapshots)",
            meta.len()
        );
    }
    let data = std::fs::read(path).with_context(|| format!("{name}: cannot read"))?;
    parse(&data).map_err(|e| anyhow!("{name}: {e}"))
}

/// [`load`] on bytes already read; the error does not name the file.
pub fn parse(data: &[u8]) -> anyhow::Result<Snapshot> {
    if data.starts_with(&ZSTD_MAGIC) {
        bail!("zstd-compressed data, not a snapshot (a recording? diff compares two `gputaskman --json` snapshots)");
    }
    if data.iter().all(|b| b.is_ascii_whitespace()) {
        bail!("empty, not a snapshot");
    }
    let value: serde_json::Value = match serde_json::from_slice(data) {
        Ok(v) => v,
        Err(e) => {
            // One JSON value a line: a recording, not a snapshot.
            let mut values = serde_json::Deserializer::from_slice(data).into_iter::<serde_json::Value>();
            let first = values.next();
            if let Some(Ok(v)) = &first {
                if v.get("schema_version").is_some() && values.next().is_some_and(|n| n.is_ok()) {
                    bail!("more than one JSON value (a recording?); diff compares two single `gputaskman --json` snapshots");
                }
            }
            bail!("not JSON ({e}); diff compares two `gputaskman --json` snapshots");
        }
    };
    let Some(object) = value.as_object() else {
        bail!(
            "not a gputaskman snapshot: the JSON is {}, not an object",
            json_kind(&value)
        );
    };
    match object.get("schema_version") {
        None => bail!("not a gputaskman snapshot: it has no `schema_version` (make one with `gputaskman --json`)"),
        Some(v) if v.as_u64() != Some(SCHEMA_VERSION as u64) => {
            bail!("schema_version {v}, but this gputaskman reads schema_version {SCHEMA_VERSION}")
        }
        Some(_) => {}
    }
    serde_json::from_value(value).map_err(|e| anyhow!("not a gputaskman snapshot: {e}"))
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
