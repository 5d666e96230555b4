//! What an LLM runtime was told on its command line: the model files it was
//! pointed at and the settings that decide its memory (context, slots, cache
//! types, offload). This is `cmdline` evidence in the design's ranking: a file
//! named here proves only that it was asked for, not that it is loaded.
//!
//! One flag table serves every runtime, because their vocabularies barely
//! overlap and each flag means the same wherever it appears:
//! - llama.cpp `llama-server`/`llama-cli` (common/arg.cpp), also what Ollama
//!   passes when it spawns `llama-server` itself;
//! - llama-cpp-python `python -m llama_cpp.server` (llama_cpp/server/settings.py,
//!   underscore spellings such as `--n_ctx`);
//! - Ollama's runners: `ollama runner --model BLOB --ctx-size N ...` and the
//!   older `ollama_llama_server` (llm/server.go);
//! - vLLM `vllm serve MODEL` (vllm/engine/arg_utils.py);
//! - koboldcpp (`--contextsize`, `--gpulayers`, `--quantkv`).
//!
//! LM Studio passes no model path on argv. Long flags are compared with `_`
//! folded to `-` (vLLM and llama-cpp-python accept both), and `--flag=value`
//! is accepted everywhere.

use std::fmt;

/// `-ngl auto` in llama.cpp's own encoding (common/arg.cpp): let the loader
/// decide how many layers fit.
pub const GPU_LAYERS_AUTO: i64 = -1;
/// `-ngl all` in llama.cpp's own encoding: every layer on the GPU.
pub const GPU_LAYERS_ALL: i64 = -2;

/// The launch settings read from one process's argv. `None` means the flag was
/// not given (the runtime's default applies), never "zero".
///
/// Not `Serialize` on purpose: `api_key` is a secret, used only to
/// authenticate a loopback probe. `Debug` redacts it.
#[derive(Clone, Default, PartialEq)]
pub struct LaunchSettings {
    /// Model files (or, for vLLM, the model name or directory) in argv order,
    /// without duplicates.
    pub model_paths: Vec<String>,
    /// The name the server answers to (`-a`, `--served-model-name`, ...).
    pub model_alias: Option<String>,
    /// Requested context in tokens. llama.cpp: `-c`, total over all slots,
    /// 0 = the model's training context. vLLM: `--max-model-len`.
    pub ctx: Option<u64>,
    /// Server slots / concurrent sequences (`-np`, vLLM `--max-num-seqs`).
    pub parallel: Option<u32>,
    pub kv_unified: Option<bool>,
    /// Cache element type in the runtime's own vocabulary: ggml names for
    /// llama.cpp (`f16`, `q8_0`), vLLM's `--kv-cache-dtype` (`auto`, `fp8`).
    pub cache_type_k: Option<String>,
    pub cache_type_v: Option<String>,
    /// Layers to offload; [`GPU_LAYERS_AUTO`] and [`GPU_LAYERS_ALL`] encode
    /// `auto` and `all` as llama.cpp does.
    pub n_gpu_layers: Option<i64>,
    pub swa_full: Option<bool>,
    /// `on`, `off` or `auto`; a bare `-fa` (older builds) reads as `on`.
    pub flash_attn: Option<String>,
    pub ubatch: Option<u32>,
    /// `-b`: the logical batch.
    pub batch: Option<u32>,
    /// `-nkvo`: the KV cache stays in host memory.
    pub no_kv_offload: Option<bool>,
    /// `-ot`'s value as given (`exps=CPU`, or a regular expression).
    pub override_tensor: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    /// The first key of `--api-key` (llama.cpp accepts a comma-separated list).
    pub api_key: Option<String>,
    /// Path given to `--api-key-file`; never read here.
    pub api_key_file: Option<String>,
    pub log_file: Option<String>,
    /// Whether weights are memory-mapped: `--no-mmap`, `--load-mode`, ...
    pub mmap: Option<bool>,
    /// vLLM `--gpu-memory-utilization`: the fraction of device memory it
    /// claims up front.
    pub gpu_memory_utilization: Option<f64>,
    /// vLLM `--tensor-parallel-size`.
    pub tensor_parallel: Option<u32>,
    /// vLLM `--dtype`: the dtype the weights and activations run in
    /// (`auto`, `float32`, `bfloat16`, `half`), which its KV cache takes
    /// too when `--kv-cache-dtype` is `auto`.
    pub dtype: Option<String>,
}

impl fmt::Debug for LaunchSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchSettings")
            .field("model_paths", &self.model_paths)
            .field("model_alias", &self.model_alias)
            .field("ctx", &self.ctx)
            .field("parallel", &self.parallel)
            .field("kv_unified", &self.kv_unified)
            .field("cache_type_k", &self.cache_type_k)
            .field("cache_type_v", &self.cache_type_v)
            .field("n_gpu_layers", &self.n_gpu_layers)
            .field("swa_full", &self.swa_full)
            .field("flash_attn", &self.flash_attn)
            .field("ubatch", &self.ubatch)
            .field("batch", &self.batch)
            .field("no_kv_offload", &self.no_kv_offload)
            .field("override_tensor", &self.override_tensor)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_file", &self.api_key_file)
            .field("log_file", &self.log_file)
            .field("mmap", &self.mmap)
            .field("gpu_memory_utilization", &self.gpu_memory_utilization)
            .field("tensor_parallel", &self.tensor_parallel)
            .field("dtype", &self.dtype)
            .finish()
    }
}

/// What a recognised flag does with its value.
#[derive(Clone, Copy)]
enum Flag {
    Model,
    /// A value that looks like a path but is not a local model file (URLs,
    /// Hugging Face repos and file names inside them, tokens): consumed so
    /// that the `.gguf` rule does not pick it up.
    SkipValue,
    Alias,
    Ctx,
    /// vLLM's `--max-model-len`, which also takes `32k`/`1K` forms.
    CtxHuman,
    Parallel,
    KvUnified(bool),
    CacheK,
    CacheV,
    /// One value for both K and V (Ollama `--kv-cache-type`, vLLM
    /// `--kv-cache-dtype`).
    CacheBoth,
    /// llama-cpp-python `--type_k`/`--type_v`: a ggml type id.
    CacheKId,
    CacheVId,
    /// koboldcpp `--quantkv`: 0 f16, 1 q8_0, 2 q4_0.
    KoboldQuantKv,
    GpuLayers,
    SwaFull,
    /// Value optional: `-fa` alone, or `-fa on|off|auto` (also true/false/1/0).
    FlashAttn,
    /// koboldcpp `--flashattention`: a switch.
    FlashAttnOn,
    Ubatch,
    Batch,
    NoKvOffload,
    OverrideTensor,
    /// vLLM `--dtype`.
    Dtype,
    Host,
    Port,
    ApiKey,
    ApiKeyFile,
    LogFile,
    Mmap(bool),
    /// `-lm/--load-mode auto|none|mmap|mlock|mmap+mlock|dio` (llama.cpp, 2026).
    LoadMode,
    /// llama-cpp-python `--use_mmap True|False`.
    MmapBool,
    GpuMemoryUtilization,
    TensorParallel,
}

/// Long names are listed with `-` only; `_` in argv is folded to `-` first.
const FLAGS: &[(&str, Flag)] = &[
    ("-m", Flag::Model),
    ("--model", Flag::Model),
    // SGLang's and TGI's launcher's (a folder or a hub id).
    ("--model-path", Flag::Model),
    ("--model-id", Flag::Model),
    // Speculative-decoding draft models and multimodal projectors are files
    // the process loads too.
    ("-md", Flag::Model),
    ("--model-draft", Flag::Model),
    ("--spec-draft-model", Flag::Model),
    ("-mm", Flag::Model),
    ("--mmproj", Flag::Model),
    ("-mu", Flag::SkipValue),
    ("--model-url", Flag::SkipValue),
    ("-mmu", Flag::SkipValue),
    ("--mmproj-url", Flag::SkipValue),
    ("-hf", Flag::SkipValue),
    ("-hfr", Flag::SkipValue),
    ("--hf-repo", Flag::SkipValue),
    ("-hff", Flag::SkipValue),
    ("--hf-file", Flag::SkipValue),
    ("-hfd", Flag::SkipValue),
    ("-hfrd", Flag::SkipValue),
    ("--hf-repo-draft", Flag::SkipValue),
    ("--spec-draft-hf", Flag::SkipValue),
    ("-hfv", Flag::SkipValue),
    ("-hfrv", Flag::SkipValue),
    ("--hf-repo-v", Flag::SkipValue),
    ("-hffv", Flag::SkipValue),
    ("--hf-file-v", Flag::SkipValue),
    ("-hft", Flag::SkipValue),
    ("--hf-token", Flag::SkipValue),
    ("-a", Flag::Alias),
    ("--alias", Flag::Alias),
    ("--model-alias", Flag::Alias),
    ("--served-model-name", Flag::Alias),
    ("-c", Flag::Ctx),
    ("--ctx-size", Flag::Ctx),
    ("--n-ctx", Flag::Ctx),
    ("--contextsize", Flag::Ctx),
    ("--max-model-len", Flag::CtxHuman),
    ("-np", Flag::Parallel),
    ("--parallel", Flag::Parallel),
    ("--max-num-seqs", Flag::Parallel),
    ("-kvu", Flag::KvUnified(true)),
    ("--kv-unified", Flag::KvUnified(true)),
    ("-no-kvu", Flag::KvUnified(false)),
    ("--no-kv-unified", Flag::KvUnified(false)),
    ("-ctk", Flag::CacheK),
    ("--cache-type-k", Flag::CacheK),
    ("-ctv", Flag::CacheV),
    ("--cache-type-v", Flag::CacheV),
    ("--kv-cache-type", Flag::CacheBoth),
    ("--kv-cache-dtype", Flag::CacheBoth),
    ("--type-k", Flag::CacheKId),
    ("--type-v", Flag::CacheVId),
    ("--quantkv", Flag::KoboldQuantKv),
    ("-ngl", Flag::GpuLayers),
    ("--gpu-layers", Flag::GpuLayers),
    ("--n-gpu-layers", Flag::GpuLayers),
    ("--gpulayers", Flag::GpuLayers),
    ("--swa-full", Flag::SwaFull),
    ("-fa", Flag::FlashAttn),
    ("--flash-attn", Flag::FlashAttn),
    ("--flashattention", Flag::FlashAttnOn),
    ("-ub", Flag::Ubatch),
    ("--ubatch-size", Flag::Ubatch),
    ("-b", Flag::Batch),
    ("--batch-size", Flag::Batch),
    ("--n-batch", Flag::Batch),
    ("-nkvo", Flag::NoKvOffload),
    ("--no-kv-offload", Flag::NoKvOffload),
    ("-ot", Flag::OverrideTensor),
    ("--override-tensor", Flag::OverrideTensor),
    ("--host", Flag::Host),
    ("--port", Flag::Port),
    ("--api-key", Flag::ApiKey),
    ("--password", Flag::ApiKey),
    ("--api-key-file", Flag::ApiKeyFile),
    ("--log-file", Flag::LogFile),
    ("--mmap", Flag::Mmap(true)),
    ("--no-mmap", Flag::Mmap(false)),
    ("--nommap", Flag::Mmap(false)),
    ("-dio", Flag::Mmap(false)),
    ("--direct-io", Flag::Mmap(false)),
    ("-lm", Flag::LoadMode),
    ("--load-mode", Flag::LoadMode),
    ("--use-mmap", Flag::MmapBool),
    ("--gpu-memory-utilization", Flag::GpuMemoryUtilization),
    ("-tp", Flag::TensorParallel),
    ("--tensor-parallel-size", Flag::TensorParallel),
    ("--dtype", Flag::Dtype),
];

/// Reads the launch settings of an LLM runtime from its argv (`argv[0]` is
/// the program). `extra_model_flags` are user-configured flags whose value is
/// a model path (e.g. `["--weights"]`). Any argument ending in `.gguf` is a
/// model path too, except values of URL and Hugging Face flags.
///
/// Meant for processes already classified as LLM runtimes: on other programs
/// short flags such as `-c` mean something else.
pub fn parse_launch(argv: &[String], extra_model_flags: &[String]) -> LaunchSettings {
    let mut settings = LaunchSettings::default();
    let Some((program, args)) = program_and_args(argv) else {
        return settings;
    };
    let mut i = 0;
    // `vllm serve MODEL`: the model is the positional right after `serve`.
    if is_vllm(program) && args.first().map(String::as_str) == Some("serve") {
        i = 1;
        if let Some(model) = args.get(1).filter(|a| !a.starts_with('-')) {
            add_model(&mut settings, model);
            i = 2;
        }
    }
    while let Some(arg) = args.get(i) {
        i += 1;
        if !arg.starts_with('-') {
            if is_gguf(arg) {
                add_model(&mut settings, arg);
            }
            continue;
        }
        let (name, inline_value) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (arg.as_str(), None),
        };
        if extra_model_flags.iter().any(|f| f == name) {
            if let Some(value) = take_value(args, &mut i, inline_value) {
                add_model(&mut settings, value);
            }
            continue;
        }
        let Some(flag) = lookup(name) else {
            continue;
        };
        apply(&mut settings, flag, args, &mut i, inline_value);
    }
    settings
}

/// Splits argv into the program that runs and its own arguments, looking
/// through a Python interpreter: `python3 -m llama_cpp.server ARGS` runs the
/// module `llama_cpp.server`, `python3 /usr/bin/vllm serve ...` the script.
fn program_and_args(argv: &[String]) -> Option<(&str, &[String])> {
    let (first, rest) = argv.split_first()?;
    if !basename(first).starts_with("python") {
        return Some((first, rest));
    }
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        match arg.as_str() {
            // The module (or script) that runs; what follows is its argv.
            "-m" => return Some((rest.get(i + 1)?, rest.get(i + 2..)?)),
            // `python -c CODE`: no program arguments to read.
            "-c" => return None,
            // Interpreter options that take a value.
            "-W" | "-X" | "--check-hash-based-pycs" => i += 2,
            a if a.starts_with('-') => i += 1,
            script => return Some((script, rest.get(i + 1..)?)),
        }
    }
    None
}

fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn is_vllm(program: &str) -> bool {
    let name = basename(program);
    name == "vllm" || name == "vllm.exe" || program == "vllm.entrypoints.cli.main"
}

fn is_gguf(arg: &str) -> bool {
    arg.len() > 5
        && arg
            .get(arg.len() - 5..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(".gguf"))
}

fn is_url(arg: &str) -> bool {
    arg.contains("://")
}

fn add_model(settings: &mut LaunchSettings, value: &str) {
    if value.is_empty() || is_url(value) || settings.model_paths.iter().any(|p| p == value) {
        return;
    }
    settings.model_paths.push(value.to_string());
}

fn lookup(name: &str) -> Option<Flag> {
    let folded;
    let name = if name.starts_with("--") && name.contains('_') {
        folded = name.replace('_', "-");
        folded.as_str()
    } else {
        name
    };
    FLAGS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The value of a flag: inline (`--flag=value`) or the next argument.
fn take_value<'a>(args: &'a [String], i: &mut usize, inline: Option<&'a str>) -> Option<&'a str> {
    if inline.is_some() {
        return inline;
    }
    let value = args.get(*i)?;
    *i += 1;
    Some(value)
}

fn apply(settings: &mut LaunchSettings, flag: Flag, args: &[String], i: &mut usize, inline: Option<&str>) {
    // Switches first: they take no value.
    match flag {
        Flag::KvUnified(on) => return settings.kv_unified = Some(on),
        Flag::SwaFull => return settings.swa_full = Some(true),
        Flag::NoKvOffload => return settings.no_kv_offload = Some(true),
        Flag::FlashAttnOn => return settings.flash_attn = Some("on".into()),
        Flag::Mmap(on) => return settings.mmap = Some(on),
        Flag::FlashAttn => {
            // The value is optional: take the next argument only when it is
            // one the flag accepts.
            let candidate = inline.or_else(|| args.get(*i).map(String::as_str));
            match candidate.and_then(flash_attn_mode) {
                Some(mode) => {
                    if inline.is_none() {
                        *i += 1;
                    }
                    settings.flash_attn = Some(mode.into());
                }
                None => settings.flash_attn = Some("on".into()),
            }
            return;
        }
        _ => {}
    }
    let Some(value) = take_value(args, i, inline) else {
        return;
    };
    match flag {
        Flag::Model => add_model(settings, value),
        Flag::SkipValue => {}
        Flag::Alias => settings.model_alias = Some(value.to_string()),
        Flag::Ctx => settings.ctx = value.parse().ok(),
        Flag::CtxHuman => settings.ctx = parse_human_count(value),
        Flag::Parallel => settings.parallel = value.parse().ok(),
        Flag::CacheK => settings.cache_type_k = Some(value.to_string()),
        Flag::CacheV => settings.cache_type_v = Some(value.to_string()),
        Flag::CacheBoth => {
            settings.cache_type_k = Some(value.to_string());
            settings.cache_type_v = Some(value.to_string());
        }
        Flag::CacheKId => settings.cache_type_k = ggml_cache_type_name(value).map(String::from),
        Flag::CacheVId => settings.cache_type_v = ggml_cache_type_name(value).map(String::from),
        Flag::KoboldQuantKv => {
            let name = match value {
                "0" => Some("f16"),
                "1" => Some("q8_0"),
                "2" => Some("q4_0"),
                _ => None,
            };
            settings.cache_type_k = name.map(String::from);
            settings.cache_type_v = name.map(String::from);
        }
        Flag::GpuLayers => {
            settings.n_gpu_layers = match value {
                "auto" => Some(GPU_LAYERS_AUTO),
                "all" => Some(GPU_LAYERS_ALL),
                n => n.parse().ok(),
            }
        }
        Flag::Ubatch => settings.ubatch = value.parse().ok(),
        Flag::Batch => settings.batch = value.parse().ok(),
        Flag::OverrideTensor => settings.override_tensor = Some(value.to_string()),
        Flag::Host => settings.host = Some(value.to_string()),
        Flag::Port => settings.port = value.parse().ok(),
        Flag::ApiKey => {
            settings.api_key = value
                .split(',')
                .map(str::trim)
                .find(|k| !k.is_empty())
                .map(String::from)
        }
        Flag::ApiKeyFile => settings.api_key_file = Some(value.to_string()),
        Flag::LogFile => settings.log_file = Some(value.to_string()),
        Flag::LoadMode => settings.mmap = load_mode_uses_mmap(value),
        Flag::MmapBool => settings.mmap = parse_bool(value),
        Flag::GpuMemoryUtilization => {
            settings.gpu_memory_utilization = value.parse().ok().filter(|f: &f64| f.is_finite() && *f > 0.0)
        }
        Flag::TensorParallel => settings.tensor_parallel = value.parse().ok(),
        Flag::Dtype => settings.dtype = Some(value.to_string()),
        // Switches, handled above.
        Flag::KvUnified(_)
        | Flag::SwaFull
        | Flag::NoKvOffload
        | Flag::FlashAttn
        | Flag::FlashAttnOn
        | Flag::Mmap(_) => {}
    }
}

/// Whether a llama.cpp load mode (`-lm`, and the `load_mode = X` the loader
/// logs) memory-maps the model file. src/llama-model-loader.cpp maps for
/// `mmap`, `mmap+mlock` and `auto`; `auto` falls back to reading on devices
/// without mmap support, so it stays unknown. `none`, `mlock` and `dio` read.
pub fn load_mode_uses_mmap(mode: &str) -> Option<bool> {
    match mode {
        "mmap" | "mmap+mlock" => Some(true),
        "none" | "mlock" | "dio" => Some(false),
        _ => None,
    }
}

fn flash_attn_mode(value: &str) -> Option<&'static str> {
    match value.to_ascii_lowercase().as_str() {
        "on" | "enabled" => Some("on"),
        "off" | "disabled" => Some("off"),
        "auto" => Some("auto"),
        other => parse_bool(other).map(|on| if on { "on" } else { "off" }),
    }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// ggml type ids (ggml/include/ggml.h) of the types llama.cpp accepts for a
/// KV cache, for llama-cpp-python's numeric `--type_k`/`--type_v`.
fn ggml_cache_type_name(id: &str) -> Option<&'static str> {
    Some(match id.parse::<u32>().ok()? {
        0 => "f32",
        1 => "f16",
        2 => "q4_0",
        3 => "q4_1",
        6 => "q5_0",
        7 => "q5_1",
        8 => "q8_0",
        20 => "iq4_nl",
        30 => "bf16",
        _ => return None,
    })
}

/// vLLM's human-readable integers (vllm/engine/arg_utils.py
/// `human_readable_int`): `1k` = 1000, `1K` = 1024, likewise m/M and g/G;
/// `25.6k` = 25600. `-1` and `auto` ("as large as fits") read as unknown.
fn parse_human_count(value: &str) -> Option<u64> {
    if let Ok(n) = value.parse::<u64>() {
        return Some(n);
    }
    let last = value.chars().last()?;
    let multiplier: f64 = match last {
        'k' => 1e3,
        'm' => 1e6,
        'g' => 1e9,
        'K' => 1024.0,
        'M' => 1024.0 * 1024.0,
        'G' => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let number: f64 = value.get(..value.len() - 1)?.parse().ok()?;
    let count = (number * multiplier).round();
    // Beyond 2^53 an f64 no longer holds every integer; no context is that big.
    (count.is_finite() && (0.0..=9_007_199_254_740_992.0).contains(&count)).then_some(count as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    fn parse(line: &str) -> LaunchSettings {
        parse_launch(&argv(line), &[])
    }

    #[test]
    fn reference_llama_server_cmdline() {
        let text = include_str!("../../tests/data/llama-server/cmdline.txt");
        let line = text.trim().strip_prefix("cmdline:").unwrap();
        let s = parse(line);
        assert_eq!(s.model_paths, ["/srv/models/gemma-3-270m-q4_k_m.gguf"]);
        assert_eq!(s.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(s.port, Some(8090));
        assert_eq!(s.ctx, Some(4096));
        assert_eq!(s.parallel, None, "-np not given: auto");
        assert_eq!(s.api_key, None);
    }

    #[test]
    fn llama_server_full_flag_set() {
        let s = parse(
            "llama-server --model=/m/a.gguf -a chat -c 8192 -np 2 -kvu -ctk q8_0 -ctv q4_0 \
             -ngl 99 --swa-full -fa on -ub 256 --host 0.0.0.0 --port 8080 --api-key k1,k2 \
             --api-key-file /etc/keys --log-file /var/log/l.txt --no-mmap",
        );
        assert_eq!(s.model_paths, ["/m/a.gguf"]);
        assert_eq!(s.model_alias.as_deref(), Some("chat"));
        assert_eq!(s.ctx, Some(8192));
        assert_eq!(s.parallel, Some(2));
        assert_eq!(s.kv_unified, Some(true));
        assert_eq!(s.cache_type_k.as_deref(), Some("q8_0"));
        assert_eq!(s.cache_type_v.as_deref(), Some("q4_0"));
        assert_eq!(s.n_gpu_layers, Some(99));
        assert_eq!(s.swa_full, Some(true));
        assert_eq!(s.flash_attn.as_deref(), Some("on"));
        assert_eq!(s.ubatch, Some(256));
        assert_eq!(s.host.as_deref(), Some("0.0.0.0"));
        assert_eq!(s.port, Some(8080));
        assert_eq!(s.api_key.as_deref(), Some("k1"));
        assert_eq!(s.api_key_file.as_deref(), Some("/etc/keys"));
        assert_eq!(s.log_file.as_deref(), Some("/var/log/l.txt"));
        assert_eq!(s.mmap, Some(false));
    }

    #[test]
    fn long_flag_spellings_and_switch_forms() {
        let s = parse(
            "llama-server --model /m/a.gguf --ctx-size 4096 --parallel 4 --no-kv-unified \
             --cache-type-k f16 --n-gpu-layers all -fa --ubatch-size 128 --load-mode none",
        );
        assert_eq!(s.ctx, Some(4096));
        assert_eq!(s.parallel, Some(4));
        assert_eq!(s.kv_unified, Some(false));
        assert_eq!(s.n_gpu_layers, Some(GPU_LAYERS_ALL));
        // Bare -fa (older builds) followed by another flag: on, nothing eaten.
        assert_eq!(s.flash_attn.as_deref(), Some("on"));
        assert_eq!(s.ubatch, Some(128));
        assert_eq!(s.mmap, Some(false));

        let s = parse("llama-server -m x.gguf -ngl auto --flash-attn=auto -lm mmap");
        assert_eq!(s.n_gpu_layers, Some(GPU_LAYERS_AUTO));
        assert_eq!(s.flash_attn.as_deref(), Some("auto"));
        assert_eq!(s.mmap, Some(true));

        let s = parse("llama-server -m x.gguf -fa off -lm auto");
        assert_eq!(s.flash_attn.as_deref(), Some("off"));
        assert_eq!(s.mmap, None, "auto depends on the device");

        // A bare -fa as the last argument.
        assert_eq!(parse("llama-cli -m x.gguf -fa").flash_attn.as_deref(), Some("on"));
    }

    #[test]
    fn urls_and_hugging_face_values_are_not_paths() {
        let s = parse(
            "llama-server -hf ggml-org/gemma-3-1b-it-GGUF -hff gemma-3-1b-it-Q4_K_M.gguf \
             -mu https://example.invalid/m.gguf https://example.invalid/other.gguf \
             --mmproj /m/mmproj-f16.gguf -md /m/draft.bin",
        );
        assert_eq!(s.model_paths, ["/m/mmproj-f16.gguf", "/m/draft.bin"]);
    }

    #[test]
    fn positional_gguf_extra_flags_and_dedup() {
        let extra = vec!["--weights".to_string()];
        let s = parse_launch(
            &argv("myllm /m/A.GGUF --weights /m/custom.bin --weights=/m/other.bin -m /m/A.GGUF"),
            &extra,
        );
        assert_eq!(s.model_paths, ["/m/A.GGUF", "/m/custom.bin", "/m/other.bin"]);
        // argv[0] is the program, never a model.
        assert!(parse("/opt/x.gguf --port 1").model_paths.is_empty());
    }

    #[test]
    fn llama_cpp_python_server() {
        let s = parse(
            "/usr/bin/python3 -u -m llama_cpp.server --model /m/q.gguf --n_ctx 2048 \
             --n_gpu_layers -1 --host 127.0.0.1 --port 8000 --model_alias q --type_k 8 \
             --flash_attn True --use_mmap False --api_key secret",
        );
        assert_eq!(s.model_paths, ["/m/q.gguf"], "python's own -m is not a model flag");
        assert_eq!(s.ctx, Some(2048));
        assert_eq!(s.n_gpu_layers, Some(-1));
        assert_eq!(s.port, Some(8000));
        assert_eq!(s.model_alias.as_deref(), Some("q"));
        assert_eq!(s.cache_type_k.as_deref(), Some("q8_0"));
        assert_eq!(s.flash_attn.as_deref(), Some("on"));
        assert_eq!(s.mmap, Some(false));
        assert_eq!(s.api_key.as_deref(), Some("secret"));
        // `python -c CODE` has no program arguments.
        assert_eq!(parse("python3 -c print(1) -m /m/x.gguf"), LaunchSettings::default());
    }

    /// What places buffers beyond -ngl: the batch, -nkvo and -ot as given.
    #[test]
    fn placement_flags() {
        let s = parse("llama-server -m /m/q.gguf -b 1024 -nkvo -ot exps=CPU");
        assert_eq!(s.batch, Some(1024));
        assert_eq!(s.no_kv_offload, Some(true));
        assert_eq!(s.override_tensor.as_deref(), Some("exps=CPU"));
        let s = parse("llama-server -m /m/q.gguf --override-tensor=blk\\..*_exps\\.=CPU");
        assert_eq!(s.override_tensor.as_deref(), Some("blk\\..*_exps\\.=CPU"));
        assert_eq!((s.batch, s.no_kv_offload), (None, None));
    }

    #[test]
    fn ollama_runners() {
        let blob = "/root/.ollama/models/blobs/sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa";
        let s = parse(&format!(
            "/usr/bin/ollama runner --model {blob} --ctx-size 8192 --batch-size 512 \
             --n-gpu-layers 29 --threads 8 --parallel 4 --port 41235"
        ));
        assert_eq!(s.model_paths, [blob]);
        assert_eq!(s.ctx, Some(8192));
        assert_eq!(s.n_gpu_layers, Some(29));
        assert_eq!(s.parallel, Some(4));
        assert_eq!(s.port, Some(41235));
        assert_eq!(s.batch, Some(512));

        let s = parse(&format!(
            "/tmp/ollama123/runners/cuda_v12/ollama_llama_server --model {blob} --ctx-size 2048 \
             --batch-size 512 --embedding --n-gpu-layers 33 --flash-attn --kv-cache-type q8_0 \
             --parallel 1 --port 33421"
        ));
        assert_eq!(s.ctx, Some(2048));
        assert_eq!(s.flash_attn.as_deref(), Some("on"));
        assert_eq!(s.cache_type_k.as_deref(), Some("q8_0"));
        assert_eq!(s.cache_type_v.as_deref(), Some("q8_0"));
    }

    #[test]
    fn vllm_serve() {
        let s = parse(
            "/usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen3-0.6B --max-model-len 32k \
             --port 8001 --host 127.0.0.1 --kv-cache-dtype fp8 --gpu-memory-utilization 0.85 \
             --tensor-parallel-size 2 --served-model-name qwen small --max-num-seqs 64",
        );
        assert_eq!(s.model_paths, ["Qwen/Qwen3-0.6B"]);
        assert_eq!(s.ctx, Some(32_000));
        assert_eq!(s.port, Some(8001));
        assert_eq!(s.cache_type_k.as_deref(), Some("fp8"));
        assert_eq!(s.cache_type_v.as_deref(), Some("fp8"));
        assert_eq!(s.gpu_memory_utilization, Some(0.85));
        assert_eq!(s.dtype, None);
        assert_eq!(s.tensor_parallel, Some(2));
        assert_eq!(s.model_alias.as_deref(), Some("qwen"));
        assert_eq!(s.parallel, Some(64));
        let s = parse("vllm serve /models/tiny --dtype=float32");
        assert_eq!(s.dtype.as_deref(), Some("float32"));

        let s = parse("vllm serve /models/llama --max_model_len=2K -tp 4");
        assert_eq!(s.model_paths, ["/models/llama"]);
        assert_eq!(s.ctx, Some(2048));
        assert_eq!(s.tensor_parallel, Some(4));

        let s = parse("python -m vllm.entrypoints.openai.api_server --model /models/m --max-model-len auto");
        assert_eq!(s.model_paths, ["/models/m"]);
        assert_eq!(s.ctx, None);
        // `serve` of another program is not a vLLM positional.
        assert!(parse("ollama serve").model_paths.is_empty());
    }

    #[test]
    fn koboldcpp() {
        let s = parse(
            "koboldcpp /m/k.gguf --contextsize 8192 --gpulayers 20 --port 5001 \
             --flashattention --quantkv 1 --nommap --password pw",
        );
        assert_eq!(s.model_paths, ["/m/k.gguf"]);
        assert_eq!(s.ctx, Some(8192));
        assert_eq!(s.n_gpu_layers, Some(20));
        assert_eq!(s.port, Some(5001));
        assert_eq!(s.flash_attn.as_deref(), Some("on"));
        assert_eq!(s.cache_type_v.as_deref(), Some("q8_0"));
        assert_eq!(s.mmap, Some(false));
        assert_eq!(s.api_key.as_deref(), Some("pw"));
    }

    #[test]
    fn garbage_truncated_and_huge_values() {
        assert_eq!(parse_launch(&[], &[]), LaunchSettings::default());
        assert_eq!(parse(""), LaunchSettings::default());
        // Flags at the end with no value, wrong types, overflowing numbers.
        let s = parse("llama-server -c 99999999999999999999999 --port 70000 -np -1 -ngl x -m");
        assert_eq!(s.ctx, None);
        assert_eq!(s.port, None);
        assert_eq!(s.parallel, None);
        assert_eq!(s.n_gpu_layers, None);
        assert!(s.model_paths.is_empty());
        let s = parse("vllm serve --max-model-len 1e400k --gpu-memory-utilization NaN");
        assert_eq!(s.ctx, None);
        assert_eq!(s.gpu_memory_utilization, None);
        assert_eq!(parse_human_count("99999999999G"), None);
        assert_eq!(parse_human_count("-3k"), None);
        assert_eq!(parse_human_count("25.6k"), Some(25_600));
        // Non-ASCII and odd tokens do not panic.
        let s = parse("llama-server -m é.gguf --=x -= = .gguf ×.GGUF --model=");
        assert_eq!(s.model_paths, ["é.gguf", "×.GGUF"]);
    }

    #[test]
    fn debug_redacts_the_api_key() {
        let s = parse("llama-server --api-key hunter2");
        let shown = format!("{s:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }
}
