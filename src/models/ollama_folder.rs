//! Ollama's models folder: the manifests of what it has pulled, each
//! naming its model (`host/namespace/model:tag`) and its blob.

use super::runtimes;
use crate::snapshot::{Model, NameSource};
use gguf::regular_file;
use std::path::{Path, PathBuf};

/// Ollama manifests read at most per probe of `ollama serve` (a folder of
/// pulled models holds tens), and the most of each that is read (real
/// ones are under 2 KiB).
const MAX_MANIFESTS: usize = 256;
const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Entries of one folder of Ollama's manifests tree looked at at most.
const MAX_DIR_ENTRIES: usize = 1024;

/// A model in Ollama's models folder: its name (from the manifest's path)
/// and its blob, when that is a regular file here.
#[derive(Debug, Clone)]
pub(super) struct Installed {
    pub(super) name: String,
    pub(super) blob: Option<PathBuf>,
}

/// Ollama's models folders: OLLAMA_MODELS, the user's, the service's
/// (envconfig.Models; the Linux install script's `ollama` user home).
fn roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = std::env::var_os("OLLAMA_MODELS")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.extend(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".ollama/models")));
    roots.push(PathBuf::from("/usr/share/ollama/.ollama/models"));
    roots.push(PathBuf::from("/var/lib/ollama/models"));
    roots
}

/// The models in the first of Ollama's folders that has manifests, by
/// name: at most [`MAX_MANIFESTS`], each read capped, from a tree exactly
/// `manifests/<host>/<namespace>/<model>/<tag>` deep (types/model/name.go,
/// `Filepath`), at most [`MAX_DIR_ENTRIES`] entries a folder. A manifest
/// that is not a regular file or not JSON is skipped.
pub(super) fn installed() -> Vec<Installed> {
    let Some(root) = roots().into_iter().find(|r| r.join("manifests").is_dir()) else {
        return Vec::new();
    };
    let children = |dir: &Path| -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = entries
            .take(MAX_DIR_ENTRIES)
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        out.sort();
        out
    };
    let mut found = Vec::new();
    let mut read = 0;
    for (host, host_dir) in children(&root.join("manifests")) {
        for (namespace, ns_dir) in children(&host_dir) {
            for (model, model_dir) in children(&ns_dir) {
                for (tag, manifest) in children(&model_dir) {
                    if read >= MAX_MANIFESTS {
                        return found;
                    }
                    read += 1;
                    let Ok(body) = regular_file::read_capped(&manifest, MAX_MANIFEST_BYTES) else {
                        continue;
                    };
                    let Ok(blob) = runtimes::ollama::parse_manifest(&body) else {
                        continue;
                    };
                    found.push(Installed {
                        name: runtimes::ollama::manifest_name(&host, &namespace, &model, &tag),
                        blob: blob.map(|b| root.join("blobs").join(b)).filter(|p| p.is_file()),
                    });
                }
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// Names each model whose file is one of `installed`'s blobs by its tag
/// (the first by name, when several tags share a blob), unless it has one.
/// A blob is named by its content (`sha256-<hex>`), so the same file name
/// is the same blob wherever the process sees the folder.
pub(super) fn name_by_tag(models: &mut [Model], installed: &[Installed]) {
    for model in models
        .iter_mut()
        .filter(|m| m.name_source != Some(NameSource::OllamaTag))
    {
        let Some(file) = model.path.as_deref().and_then(|p| Path::new(p).file_name()) else {
            continue;
        };
        let blob_of = |i: &&Installed| i.blob.as_deref().and_then(Path::file_name) == Some(file);
        if let Some(tagged) = installed.iter().find(blob_of) {
            (model.name, model.name_source) = (Some(tagged.name.clone()), Some(NameSource::OllamaTag));
        }
    }
}
