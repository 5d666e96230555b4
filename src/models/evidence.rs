//! What says a process runs a model file, strongest first
//! (shared/DESIGN.md rule 4): `api` (the runtime's local API names the
//! file), `mapped` (the file is mmapped into the process now), `cmdline` (a
//! launch argument), `installed` (sits in an app's model folder: proves
//! nothing). Two sources, one of them `api` or `mapped`, make a model
//! `confirmed`. An API naming a file the process neither maps nor holds
//! open is only `claimed`: anyone's `/props` can name any file, so that
//! word is no source.

use super::access::Access;
use super::api::ApiAnswer;
use crate::procs::ProcInfo;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Evidence {
    Api,
    Mapped,
    Cmdline,
    /// The API names the file, but the process neither maps it nor holds
    /// it open: its word alone (anyone's /props can name any file) is no
    /// evidence that the file is loaded.
    Claimed,
    Installed,
}

impl Evidence {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Evidence::Api => "api",
            Evidence::Mapped => "mapped",
            Evidence::Cmdline => "cmdline",
            Evidence::Claimed => "claimed",
            Evidence::Installed => "installed",
        }
    }
}

/// A model file found for a process, with what says so.
pub(super) struct Found {
    pub(super) path: PathBuf,
    pub(super) evidence: Vec<Evidence>,
    pub(super) deleted: bool,
    /// Why the process could not read the file itself, so it is not read
    /// for it ([`super::access`]).
    pub(super) refused: Option<String>,
}

/// Records `evidence` for `path`, once.
pub(super) fn add(found: &mut Vec<Found>, path: PathBuf, evidence: Evidence, deleted: bool) {
    match found.iter_mut().find(|f| f.path == path) {
        Some(f) => {
            if !f.evidence.contains(&evidence) {
                f.evidence.push(evidence);
            }
            f.deleted |= deleted;
        }
        None => found.push(Found {
            path,
            evidence: vec![evidence],
            deleted,
            refused: None,
        }),
    }
}

/// Records the files the API names: `api` when the process maps or holds
/// the file, else `claimed` (its word alone).
pub(super) fn add_api_paths(
    found: &mut Vec<Found>,
    answer: &ApiAnswer,
    info: &ProcInfo,
    access: &Access,
    resolve: &dyn Fn(&Path) -> PathBuf,
) {
    // Ollama's blobs are found in its own folders, not named by the
    // process: `ollama serve` never holds them (its runners do).
    // (Ollama is the API asked of any process it is among the runtimes of:
    // `Api::for_process`.)
    let paths_named_by_api = !info.runtimes.iter().any(|r| r == "ollama");
    for path in answer.models.iter().filter_map(|m| m.path.as_deref()) {
        // A server in a container names the file as its mount namespace
        // sees it; the same file name among what we found is that file.
        let resolved = resolve(path);
        let same_name = (!resolved.exists())
            .then(|| found.iter().find(|f| f.path.file_name() == resolved.file_name()))
            .flatten()
            .map(|f| f.path.clone());
        let path = same_name.unwrap_or(resolved);
        let mapped = found
            .iter()
            .any(|f| f.path == path && f.evidence.contains(&Evidence::Mapped));
        let evidence = match mapped || access.holds(&path) || !paths_named_by_api {
            true => Evidence::Api,
            false => Evidence::Claimed,
        };
        add(found, path, evidence, false);
    }
}

/// Two sources, one of them `api` or `mapped` (the rule above);
/// `installed` and `claimed` are no source.
pub(super) fn is_confirmed(evidence: &[String]) -> bool {
    let strong = [Evidence::Api.as_str(), Evidence::Mapped.as_str()];
    let no_source = [Evidence::Installed.as_str(), Evidence::Claimed.as_str()];
    let sources = evidence.iter().filter(|e| !no_source.contains(&e.as_str())).count();
    sources >= 2 && evidence.iter().any(|e| strong.contains(&e.as_str()))
}
