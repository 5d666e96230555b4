//! Split models: `NAME-00001-of-00003.gguf` and the `split.*` keys
//! (src/llama-model-loader.cpp `llama_split_prefix`, `llama_split_path`;
//! tools/gguf-split writes `split.no` 0-based, file names 1-based).

use std::path::{Path, PathBuf};

/// The `-NNNNN-of-NNNNN.gguf` tail of a split part's file name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SplitName {
    dir: PathBuf,
    prefix: String,
    /// 1-based part number from the name.
    pub no: u32,
    pub count: u32,
}

impl SplitName {
    /// Parses `PREFIX-00002-of-00005.gguf`; `None` when the name does not
    /// follow llama.cpp's split naming.
    pub fn parse(path: &Path) -> Option<SplitName> {
        let name = path.file_name()?.to_str()?;
        let stem = name.strip_suffix(".gguf")?;
        let (rest, count) = stem.rsplit_once("-of-")?;
        let (prefix, no) = rest.rsplit_once('-')?;
        let number = |s: &str| {
            if s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit()) {
                s.parse::<u32>().ok()
            } else {
                None
            }
        };
        let (no, count) = (number(no)?, number(count)?);
        if prefix.is_empty() || no == 0 || no > count {
            return None;
        }
        Some(SplitName {
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            prefix: prefix.to_string(),
            no,
            count,
        })
    }

    /// The path of part `no` (1-based), as `llama_split_path` formats it.
    pub fn part_path(&self, no: u32) -> PathBuf {
        self.dir
            .join(format!("{}-{:05}-of-{:05}.gguf", self.prefix, no, self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_llama_cpp_split_names() {
        let s = SplitName::parse(Path::new("/m/Qwen3-8B-Q4_K_M-00002-of-00003.gguf")).unwrap();
        assert_eq!((s.no, s.count), (2, 3));
        assert_eq!(s.part_path(1), PathBuf::from("/m/Qwen3-8B-Q4_K_M-00001-of-00003.gguf"));
        for bad in [
            "model.gguf",
            "model-1-of-3.gguf",
            "model-00004-of-00003.gguf",
            "model-00000-of-00003.gguf",
            "-00001-of-00003.gguf",
            "model-00001-of-00003.bin",
            "sha256-0123abcd",
        ] {
            assert_eq!(SplitName::parse(Path::new(bad)), None, "{bad}");
        }
    }
}
