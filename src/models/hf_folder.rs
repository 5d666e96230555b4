//! A Hugging Face model folder that a server's API names (vLLM's
//! `/v1/models` `root`, SGLang's `model_path`, TGI's `model_id`): its
//! `config.json` and the headers of its `.safetensors`.
//!
//! The folder is whatever the process says, so everything here is read
//! only when the process itself could read it ([`Access`]), and paid for
//! from the probe's and the round's byte budgets ([`budget`]); a header
//! over its cap stops the folder's reading at that file. Whatever stops a
//! read is said in a note: the weights are then unknown, never a partial
//! sum.

use super::access::{Access, Want};
use super::budget::{take_all, ByteBudget};
use super::runtimes::vllm;
use gguf::regular_file;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of a folder's config.json that is read (real ones are a few
/// KiB; a symlink to /dev/zero must not be read until memory runs out).
pub const MAX_CONFIG_JSON: u64 = 1 << 20;
/// The largest safetensors header read. The format allows 100 MB
/// ([`vllm::MAX_SAFETENSORS_HEADER`]); real ones hold ~150 bytes a tensor,
/// so a shard of a thousand tensors is ~150 KB, and DeepSeek V3's largest
/// under 200 KB.
pub const MAX_HEADER: u64 = 8 << 20;
/// Entries of the folder looked at, at most.
const MAX_ENTRIES: usize = 1024;

/// The budgets a read is paid from, in the order they are charged.
pub struct Budgets<'a> {
    pub probe: &'a ByteBudget,
    pub round: &'a ByteBudget,
}

impl Budgets<'_> {
    fn take(&self, n: u64) -> Result<(), String> {
        take_all(&[self.probe, self.round], n)
    }
}

/// What a server's folder says of its model.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    /// The folder, when the API named one here that the process could
    /// list (a hub id is none).
    pub path: Option<PathBuf>,
    /// Whether the process's command line names that folder too.
    pub named_by_cmdline: bool,
    pub config: Option<vllm::HfConfig>,
    /// The safetensors headers' bytes.
    pub weights_bytes: Option<u64>,
}

/// The folder `model` names, read as the process could: its config and
/// its weights' bytes, each None with a note when it cannot be read.
pub fn read(
    model: Option<&str>,
    model_paths: &[String],
    access: &Access,
    budgets: &Budgets,
    notes: &mut Vec<String>,
) -> Folder {
    // A repository id is no folder here; a folder the process could not
    // list itself is not read for it.
    let path = model
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .filter(|p| match access.check(p, Want::List) {
            Ok(()) => true,
            Err(why) => {
                notes.push(format!("{}: {why}", p.display()));
                false
            }
        });
    let Some(folder) = path else {
        return Folder::default();
    };
    let config = config(&folder, access, budgets, notes);
    let weights_bytes = match safetensors_weights(&folder, access, budgets) {
        Ok(weights) => weights,
        Err(why) => {
            notes.push(why);
            None
        }
    };
    Folder {
        named_by_cmdline: model_paths.iter().any(|p| Path::new(p) == folder.as_path()),
        path: Some(folder),
        config,
        weights_bytes,
    }
}

/// The evidence of a model a server's API names (vLLM, SGLang, TGI):
/// `api`, and `cmdline` when its command line names the same folder,
/// which confirms it (two sources, one of them the API:
/// evidence::is_confirmed's rule, which sits above this room).
pub fn served_evidence(named_by_cmdline: bool) -> (Vec<String>, bool) {
    let mut evidence = vec!["api".to_string()];
    if named_by_cmdline {
        evidence.push("cmdline".into());
    }
    (evidence, named_by_cmdline)
}

/// The folder's config.json, parsed; None with a note when it is missing,
/// refused or not a config.
pub fn config(folder: &Path, access: &Access, budgets: &Budgets, notes: &mut Vec<String>) -> Option<vllm::HfConfig> {
    let path = folder.join("config.json");
    let read = access
        .check(&path, Want::Read)
        .and_then(|()| access.as_process(|| read_config(&path, budgets))?);
    match read.and_then(|bytes| vllm::parse_hf_config(&bytes)) {
        Ok(config) => Some(config),
        Err(e) => {
            notes.push(format!("{}: {e}: no KV estimate", path.display()));
            None
        }
    }
}

/// config.json's bytes, capped and paid for (run as the process).
fn read_config(path: &Path, budgets: &Budgets) -> Result<Vec<u8>, String> {
    {
        let file = regular_file::open(path).map_err(|e| e.to_string())?;
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        if size > MAX_CONFIG_JSON {
            return Err(format!("{size} bytes, over the limit of {MAX_CONFIG_JSON}"));
        }
        budgets.take(size)?;
        regular_file::read_capped(path, MAX_CONFIG_JSON).map_err(|e| e.to_string())
    }
}

/// The bytes of every tensor in the folder's `.safetensors` files, from
/// their headers alone. Ok(None) when the folder has none; Err (for a
/// note) at the first file that is refused, unreadable, over its cap or
/// over a budget.
pub fn safetensors_weights(folder: &Path, access: &Access, budgets: &Budgets) -> Result<Option<u64>, String> {
    access.check(folder, Want::List)?;
    let mut total = 0u64;
    let mut files = 0;
    let entries = access
        .as_process(|| std::fs::read_dir(folder))?
        .map_err(|e| format!("{}: {e}", folder.display()))?;
    for entry in entries.flatten().take(MAX_ENTRIES) {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("safetensors") {
            continue;
        }
        let summary = read_header(&path, access, budgets).map_err(|e| format!("{}: {e}", path.display()))?;
        total = total
            .checked_add(summary.bytes)
            .ok_or_else(|| format!("{}: the weights' total overflows", folder.display()))?;
        files += 1;
    }
    Ok((files > 0).then_some(total))
}

/// One file's header: refused, capped and paid for before it is read.
fn read_header(path: &Path, access: &Access, budgets: &Budgets) -> Result<vllm::SafetensorsSummary, String> {
    access.check(path, Want::Read)?;
    access.as_process(|| read_header_bytes(path, budgets))?
}

/// The header's bytes, parsed (run as the process).
fn read_header_bytes(path: &Path, budgets: &Budgets) -> Result<vllm::SafetensorsSummary, String> {
    let mut file = regular_file::open(path).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix).map_err(|e| e.to_string())?;
    let len = vllm::safetensors_header_len(&prefix)?;
    let whole = len + 8;
    if whole > MAX_HEADER {
        return Err(format!(
            "a header of {len} bytes, over the limit of {MAX_HEADER} bytes: the weights are not estimated"
        ));
    }
    if whole > size {
        return Err(format!("a header of {len} bytes in a file of {size}"));
    }
    budgets
        .take(whole)
        .map_err(|e| format!("{e}: the weights are not estimated"))?;
    let mut bytes = Vec::with_capacity(whole as usize);
    bytes.extend_from_slice(&prefix);
    file.take(len).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    vllm::parse_safetensors_header(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn safetensors(header: &str) -> Vec<u8> {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0u8; 8]);
        bytes
    }

    fn everyone() -> Access {
        Access::of_process(Path::new("/proc"), std::process::id(), &[])
    }

    #[test]
    fn headers_are_summed_within_the_budgets_and_a_spent_budget_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let one = safetensors(r#"{"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}"#);
        for name in ["a.safetensors", "b.safetensors"] {
            std::fs::write(dir.path().join(name), &one).unwrap();
        }
        let header = one.len() as u64 - 8;
        let (probe, round) = (
            ByteBudget::new("this probe", 1 << 20),
            ByteBudget::new("this round", 1 << 20),
        );
        let budgets = Budgets {
            probe: &probe,
            round: &round,
        };
        assert_eq!(safetensors_weights(dir.path(), &everyone(), &budgets), Ok(Some(16)));
        assert_eq!(round.left(), (1 << 20) - 2 * header);
        // A round that can pay for one header only: no partial sum.
        let small = ByteBudget::new("this round", header);
        let budgets = Budgets {
            probe: &probe,
            round: &small,
        };
        let e = safetensors_weights(dir.path(), &everyone(), &budgets).unwrap_err();
        assert!(e.contains("read budget of this round is spent"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(safetensors_weights(empty.path(), &everyone(), &budgets), Ok(None));
    }

    #[test]
    fn a_header_over_its_cap_stops_the_folder_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut big = (MAX_HEADER - 7).to_le_bytes().to_vec();
        big.extend_from_slice(b"{");
        std::fs::write(dir.path().join("big.safetensors"), &big).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("big.safetensors"))
            .unwrap()
            .set_len(MAX_HEADER + 16)
            .unwrap();
        let (probe, round) = (
            ByteBudget::new("this probe", 1 << 30),
            ByteBudget::new("this round", 1 << 30),
        );
        let e = safetensors_weights(
            dir.path(),
            &everyone(),
            &Budgets {
                probe: &probe,
                round: &round,
            },
        )
        .unwrap_err();
        assert!(
            e.ends_with("over the limit of 8388608 bytes: the weights are not estimated"),
            "{e}"
        );
        assert_eq!(round.left(), 1 << 30, "nothing was paid for or read");
    }
}
