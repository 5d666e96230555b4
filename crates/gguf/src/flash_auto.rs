//! What llama.cpp's `-fa auto` (its default) becomes on a backend.
//!
//! src/llama-context.cpp (`sched_reserve`) reserves a graph with flash
//! attention and keeps it only when every layer's FLASH_ATTN_EXT node lands
//! on the layer's own device, i.e. when that backend's `supports_op` takes
//! the op for the model's shapes; otherwise it logs "Flash Attention was
//! auto, set to disabled". The shapes that matter are the K and V head
//! sizes of the attention (with MLA, `kv_lora_rank + n_rot` and
//! `kv_lora_rank`: the compressed cache) and the cache types.

use crate::backend::Backend;
use crate::memory::CacheType;
use crate::model::Model;

/// The answer, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoFlash {
    pub on: bool,
    /// `false` when the backend's rule was not read from its source here
    /// and `on` is an assumption.
    pub checked: bool,
    pub why: String,
}

/// The K and V head sizes flash attention sees.
fn head_sizes(model: &Model) -> Option<(u32, u32)> {
    let info = model.info();
    let arch = info.architecture.as_deref()?;
    let key = |suffix: &str| model.metadata().get_u32(&format!("{arch}.{suffix}"));
    match (key("attention.kv_lora_rank"), key("rope.dimension_count")) {
        (Some(rank), Some(rot)) if rank > 0 => Some((rank.checked_add(rot)?, rank)),
        _ => Some((info.key_length?, info.value_length?)),
    }
}

/// ggml/src/ggml-cuda/fattn.cu `ggml_cuda_get_best_fattn_kernel` (what
/// `supports_op` asks): K head sizes 40, 64, 72, 80, 96, 112, 128 and 256
/// with V of the same size, or 576 with V 512 (MLA); K and V of one type
/// (a build without GGML_CUDA_FA_ALL_QUANTS, the released one) among f32,
/// f16, bf16, q4_0 and q8_0.
fn cuda(k: u32, v: u32, type_k: CacheType, type_v: CacheType) -> Result<(), String> {
    let heads = matches!(k, 40 | 64 | 72 | 80 | 96 | 112 | 128 | 256) && v == k || (k == 576 && v == 512);
    if !heads {
        return Err(format!("no CUDA kernel for K/V head sizes {k}/{v}"));
    }
    if type_k != type_v {
        return Err(format!(
            "K {type_k} and V {type_v} differ (CUDA's kernels take one type)"
        ));
    }
    let typed = |t: CacheType| {
        matches!(
            t,
            CacheType::F32 | CacheType::F16 | CacheType::BF16 | CacheType::Q4_0 | CacheType::Q8_0
        )
    };
    if !typed(type_k) {
        return Err(format!("no CUDA kernel for {type_k} caches"));
    }
    Ok(())
}

/// Resolves `-fa auto` for `backend`.
pub fn resolve_auto(model: &Model, backend: Backend, type_k: CacheType, type_v: CacheType) -> AutoFlash {
    match backend {
        // ggml-cpu runs FLASH_ATTN_EXT for every shape; the real server logs
        // "set to enabled" (tests/compute_matrix.rs).
        Backend::Cpu => AutoFlash {
            on: true,
            checked: true,
            why: "the CPU backend has flash attention for every shape".into(),
        },
        Backend::Cuda => match head_sizes(model) {
            None => AutoFlash {
                on: true,
                checked: false,
                why: "head sizes unknown: taken as on".into(),
            },
            Some((k, v)) => match cuda(k, v, type_k, type_v) {
                Ok(()) => AutoFlash {
                    on: true,
                    checked: true,
                    why: format!("CUDA has a kernel for K/V head sizes {k}/{v} and {type_k} caches"),
                },
                Err(why) => AutoFlash {
                    on: false,
                    checked: true,
                    why,
                },
            },
        },
        Backend::Vulkan | Backend::Metal => AutoFlash {
            on: true,
            checked: false,
            why: format!(
                "taken as on: current {} builds have kernels for the common head sizes (their rule is not modelled here)",
                backend.as_str()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Builder;

    fn llama(head: u32) -> Model {
        Builder::default()
            .arch(
                "llama",
                &[
                    ("block_count", 2),
                    ("embedding_length", 1024),
                    ("attention.head_count", 8),
                    ("attention.head_count_kv", 8),
                    ("attention.key_length", head),
                    ("attention.value_length", head),
                ],
            )
            .open()
    }

    #[test]
    fn cuda_auto_follows_its_kernels_head_sizes_and_types() {
        let f16 = CacheType::F16;
        let at = |head: u32, k: CacheType, v: CacheType| resolve_auto(&llama(head), Backend::Cuda, k, v);
        assert!(at(128, f16, f16).on);
        assert!(at(256, CacheType::Q8_0, CacheType::Q8_0).on);
        let odd = at(192, f16, f16);
        assert_eq!((odd.on, odd.checked), (false, true));
        assert_eq!(odd.why, "no CUDA kernel for K/V head sizes 192/192");
        assert!(!at(128, CacheType::Q8_0, f16).on);
        assert!(!at(128, CacheType::Q5_1, CacheType::Q5_1).on);
        // The CPU takes every shape.
        assert!(resolve_auto(&llama(192), Backend::Cpu, f16, f16).on);
        let metal = resolve_auto(&llama(192), Backend::Metal, f16, f16);
        assert_eq!((metal.on, metal.checked), (true, false));
    }

    #[test]
    fn mla_heads_are_the_compressed_cache() {
        let m = Builder::default()
            .arch(
                "deepseek2",
                &[
                    ("block_count", 2),
                    ("embedding_length", 2048),
                    ("attention.head_count", 16),
                    ("attention.head_count_kv", 16),
                    ("attention.key_length", 192),
                    ("attention.value_length", 128),
                    ("attention.kv_lora_rank", 512),
                    ("rope.dimension_count", 64),
                ],
            )
            .open();
        let r = resolve_auto(&m, Backend::Cuda, CacheType::F16, CacheType::F16);
        assert!(r.on, "{}", r.why);
        assert!(r.why.contains("576/512"), "{}", r.why);
    }
}
