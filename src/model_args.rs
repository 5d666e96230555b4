//! The arguments of `gputaskman model` and the GPU it is sized for: below
//! the command (`model_cmd`) and its directory table (`model_dir`), which
//! both read them.

use std::ffi::OsString;
use std::path::PathBuf;

use gguf::{CacheType, KvSettings};

const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Arguments of `gputaskman model`. Long names follow llama.cpp's; its
/// short multi-letter spellings (`-np`, `-ctk`, ...) work after
/// [`llama_cpp_spellings`] rewrote them, or as `--np`, `--ctk`, ...
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// The GGUF file: any part of a split model, or an extension-less blob (Ollama); a directory: a table of
    /// every GGUF in it
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Context size in tokens; 0 or absent: the model's training context
    #[arg(short = 'c', long = "ctx", visible_alias = "ctx-size", value_name = "N",
          value_parser = crate::cli::values::count, allow_negative_numbers = true)]
    pub ctx: Option<u32>,

    /// Parallel sequences (llama-server slots)
    #[arg(long, visible_alias = "np", value_name = "N", default_value_t = 1,
          value_parser = crate::cli::values::count, allow_negative_numbers = true)]
    pub parallel: u32,

    /// One KV cache shared by all sequences (llama-server's default with -np auto)
    #[arg(long, visible_alias = "kvu")]
    pub kv_unified: bool,

    /// K cache type: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1
    #[arg(long, visible_alias = "ctk", value_name = "T", default_value = "f16")]
    pub cache_type_k: CacheType,

    /// V cache type (quantized types need flash attention)
    #[arg(long, visible_alias = "ctv", value_name = "T", default_value = "f16")]
    pub cache_type_v: CacheType,

    /// Physical batch size, which sizes the sliding-window caches
    #[arg(long, visible_aliases = ["ub", "ubatch-size"], value_name = "N", default_value_t = 512,
          value_parser = crate::cli::values::count, allow_negative_numbers = true)]
    pub ubatch: u32,

    /// Full-size caches for sliding-window layers
    #[arg(long)]
    pub swa_full: bool,

    /// Layers to offload to the GPU (the output layer counts as one); negative: all
    #[arg(long, visible_aliases = ["ngl", "gpu-layers"], value_name = "N", allow_negative_numbers = true)]
    pub n_gpu_layers: Option<i32>,

    /// Flash attention; llama.cpp's default, auto, turns it on for CPU and CUDA
    #[arg(long, visible_alias = "fa", value_name = "on|off|auto", num_args = 0..=1,
          default_value = "auto", default_missing_value = "on")]
    pub flash_attn: FlashAttn,

    /// Logical batch size (llama.cpp's -b)
    #[arg(long, visible_aliases = ["b", "batch-size"], value_name = "N", default_value_t = 2048,
          value_parser = crate::cli::values::count, allow_negative_numbers = true)]
    pub batch: u32,

    /// Backend whose compute buffer is estimated; default: cuda when an NVIDIA GPU is found, else cpu
    #[arg(long, value_name = "cpu|cuda|vulkan|metal")]
    pub backend: Option<gguf::Backend>,

    /// Keep the KV cache (and the attention) in host memory (llama.cpp's -nkvo)
    #[arg(long, visible_alias = "nkvo")]
    pub no_kv_offload: bool,

    /// Keep offloaded tensors whose name contains PATTERN in host memory: PATTERN=CPU (llama.cpp's -ot;
    /// plain substrings such as exps, not regular expressions)
    #[arg(long, visible_alias = "ot", value_name = "PATTERN=CPU", value_parser = crate::model_devices::host_override_pattern)]
    pub override_tensor: Option<String>,

    /// Share of the model per GPU, comma-separated, in the order of the GPUs' indices (llama.cpp's -ts, e.g.
    /// 3,1); default: llama.cpp's, each GPU's free memory
    #[arg(long, visible_alias = "ts", value_name = "N0,N1,...", value_parser = parse_tensor_split)]
    pub tensor_split: Option<TensorSplit>,

    /// How the model spreads over several GPUs: layer (whole layers per GPU), row (matrices split by rows, KV
    /// on the main GPU) or none (the main GPU only); llama.cpp's -sm
    #[arg(long, visible_alias = "sm", value_name = "layer|row|none", default_value = "layer")]
    pub split_mode: gguf::SplitMode,

    /// The main GPU, counted among the GPUs found from 0 (llama.cpp's -mg): the whole model with -sm none, the
    /// KV cache and intermediate results with -sm row
    #[arg(long, visible_alias = "mg", value_name = "I", default_value_t = 0)]
    pub main_gpu: usize,

    /// A multimodal projector GGUF loaded beside the model (llama-server's --mmproj): its weights go to the first
    /// GPU, as tools/mtmd/clip.cpp puts them
    #[arg(long, value_name = "FILE")]
    pub mmproj: Option<PathBuf>,

    /// Keep the projector in host memory (llama-server's --no-mmproj-offload)
    #[arg(long, requires = "mmproj")]
    pub no_mmproj_offload: bool,

    /// Answer llama.cpp's --fit question for every GPU the split uses: the largest context, the most slots, then
    /// the -ngl, that fit each GPU's free memory now less the margin, and what llama.cpp's own --fit would do;
    /// exit status 1 when the settings asked for do not fit, 2 when it cannot tell (or on an error)
    #[arg(long)]
    pub fit: bool,

    /// With --fit: this much free memory on each GPU (e.g. 24GiB, 8000MiB) instead of what NVML reads
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "fit")]
    pub vram: Option<u64>,

    /// With --fit: MiB to leave free on the device (llama.cpp's --fit-target)
    #[arg(long, value_name = "MIB", default_value_t = 1024, requires = "fit")]
    pub fit_target: u64,

    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

/// `-ts 3,1`: one non-negative share per GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSplit(pub Vec<f64>);

fn parse_tensor_split(s: &str) -> Result<TensorSplit, String> {
    let shares = s
        .split([',', '/'])
        .map(|p| match p.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(format!("{p:?} is not a share (a number, 0 or more)")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if shares.len() > 128 {
        return Err("more shares than llama.cpp's 128 devices".into());
    }
    Ok(TensorSplit(shares))
}

/// `24GiB`, `8000MiB`, `512M`, `1.5G`, a bare number of MiB.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 24GiB)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "k" | "kb" | "kib" => KIB,
        _ => return Err(format!("{s:?}: unknown unit (KiB, MiB or GiB)")),
    };
    let bytes = n * scale;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// `--flash-attn` values, as llama.cpp spells them.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashAttn {
    On,
    Off,
    Auto,
}

pub use crate::model_devices::GpuFree;

/// The GPUs with their free memory (or the one `--gpu` names), by index:
/// llama.cpp's device order when CUDA numbers them as NVML does (identical
/// GPUs, or CUDA_DEVICE_ORDER=PCI_BUS_ID). NVML only: nothing else is read.
pub fn gpus_free(
    nvml_lib: Option<&std::path::Path>,
    only: Option<crate::snapshot::gpu_choice::GpuChoice>,
) -> Vec<GpuFree> {
    use crate::collect::watchdog::{Watched, DEADLINE};
    // Started on a watchdog: a driver that hangs costs the deadline, not
    // the command.
    let mut nvml = crate::collect::nvml::watched(nvml_lib, |_, _| true);
    let Watched::Fresh(sample) = nvml.sample(only.map(|choice| choice.index), Default::default(), DEADLINE) else {
        return Vec::new();
    };
    let partitioned: Vec<u32> = sample.devices.iter().filter_map(|d| d.parent).collect();
    let mut gpus: Vec<GpuFree> = sample
        .devices
        .into_iter()
        .filter(|d| only.is_none_or(|choice| choice.matches(d)) && !partitioned.contains(&d.index))
        .filter_map(|d| {
            Some(GpuFree {
                index: d.index,
                name: d.name.unwrap_or_else(|| format!("GPU {}", d.index)),
                free_bytes: d.memory_free_bytes?,
                total_bytes: d.memory_total_bytes?,
            })
        })
        .collect();
    gpus.sort_by_key(|g| g.index);
    // A CUDA process enumerates one MIG instance at most (NVIDIA's MIG user
    // guide, "CUDA Device Enumeration"), so llama.cpp never splits across
    // them: where MIG is on, the roomiest candidate alone is sized.
    if !partitioned.is_empty() {
        if let Some(roomiest) = gpus.iter().max_by_key(|g| g.free_bytes).cloned() {
            gpus = vec![roomiest];
        }
    }
    gpus
}

/// Rewrites llama.cpp's single-dash multi-letter options (`-np 4`, `-ctk
/// q8_0`, `-ngl 99`, `-fa`, `-kvu`, `-ub 512`) into the long options clap
/// parses. Other arguments pass unchanged.
pub fn llama_cpp_spellings<I: IntoIterator<Item = OsString>>(args: I) -> Vec<OsString> {
    const SPELLINGS: [(&str, &str); 13] = [
        ("-ts", "--tensor-split"),
        ("-sm", "--split-mode"),
        ("-mg", "--main-gpu"),
        ("-nkvo", "--no-kv-offload"),
        ("-ot", "--override-tensor"),
        ("-b", "--batch"),
        ("-np", "--parallel"),
        ("-kvu", "--kv-unified"),
        ("-ctk", "--cache-type-k"),
        ("-ctv", "--cache-type-v"),
        ("-ub", "--ubatch"),
        ("-ngl", "--n-gpu-layers"),
        ("-fa", "--flash-attn"),
    ];
    args.into_iter()
        .map(|arg| {
            SPELLINGS
                .iter()
                .find(|(short, _)| arg.to_str() == Some(short))
                .map_or(arg, |(_, long)| OsString::from(long))
        })
        .collect()
}

impl ModelArgs {
    /// The KV settings the flags say.
    pub fn kv_settings(&self) -> KvSettings {
        KvSettings {
            ctx: self.ctx,
            n_seq: self.parallel,
            kv_unified: self.kv_unified,
            type_k: self.cache_type_k,
            type_v: self.cache_type_v,
            n_ubatch: self.ubatch,
            swa_full: self.swa_full,
            flash_attn: self.flash_attn != FlashAttn::Off,
            n_gpu_layers: self.n_gpu_layers,
        }
    }

    /// `-fa` as the estimate takes it.
    pub fn flash(&self) -> gguf::FlashAttn {
        match self.flash_attn {
            FlashAttn::On => gguf::FlashAttn::On,
            FlashAttn::Off => gguf::FlashAttn::Off,
            FlashAttn::Auto => gguf::FlashAttn::Auto,
        }
    }

    /// The split over `gpus` (in index order) that `-sm`, `-ts`, `-mg`,
    /// `-nkvo` and `-ot` say; llama.cpp's default weighs each GPU by its
    /// free memory. `-ts` with more shares than GPUs, or `-mg` past the
    /// last GPU, are errors, as in llama.cpp.
    pub fn split(&self, gpus: &[GpuFree]) -> anyhow::Result<gguf::Split> {
        let weights = match &self.tensor_split {
            Some(TensorSplit(shares)) if shares.len() > gpus.len() => anyhow::bail!(
                "--tensor-split gives {} shares for {} GPU(s) found",
                shares.len(),
                gpus.len()
            ),
            // llama.cpp reads missing shares as 0; all 0 is its default.
            Some(TensorSplit(shares)) if shares.iter().any(|&s| s > 0.0) => {
                (0..gpus.len()).map(|i| shares.get(i).copied().unwrap_or(0.0)).collect()
            }
            _ => gpus.iter().map(|g| g.free_bytes as f64).collect(),
        };
        if !gpus.is_empty() && self.main_gpu >= gpus.len() {
            anyhow::bail!(
                "--main-gpu {}: invalid, {} GPU(s) found (llama.cpp: invalid value for main_gpu)",
                self.main_gpu,
                gpus.len()
            );
        }
        Ok(gguf::Split {
            mode: self.split_mode,
            weights,
            ids: gpus.iter().map(|g| g.index).collect(),
            main_gpu: self.main_gpu,
            no_kv_offload: self.no_kv_offload,
            host_pattern: self.override_tensor.clone(),
        })
    }

    /// `-ts` came with a share above 0 (llama.cpp's fit then leaves the
    /// layers alone).
    pub fn tensor_split_given(&self) -> bool {
        self.tensor_split
            .as_ref()
            .is_some_and(|TensorSplit(s)| s.iter().any(|&v| v > 0.0))
    }

    /// `--backend`, else the kind of device found: NVML finds NVIDIA GPUs.
    pub fn backend(&self, gpu: Option<&GpuFree>) -> gguf::Backend {
        self.backend.unwrap_or(if gpu.is_some() {
            gguf::Backend::Cuda
        } else {
            gguf::Backend::Cpu
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_spellings_are_rewritten() {
        let args = ["model", "f.gguf", "-np", "4", "-kvu", "-ctk", "q8_0", "-c", "4096"].map(OsString::from);
        let got = llama_cpp_spellings(args);
        let want = [
            "model",
            "f.gguf",
            "--parallel",
            "4",
            "--kv-unified",
            "--cache-type-k",
            "q8_0",
            "-c",
            "4096",
        ];
        assert_eq!(got, want.map(OsString::from));
    }
}
