//! Tests of the reader and the memory math on synthetic files.
//!
//! The KV numbers are llama.cpp's own log lines for these shapes
//! (/work/shared/reference/llamacpp-kv.md), reproduced to the byte.

use std::io::Cursor;
use std::path::Path;

use proptest::prelude::*;

use crate::testutil::{arr, Builder};
use crate::*;

const MIB: u64 = 1 << 20;

fn model(b: &Builder) -> Model {
    let header = read_header(Cursor::new(b.to_bytes())).expect("valid test file");
    Model::from_header(Path::new("test.gguf"), header).expect("valid test model")
}

fn at_ctx(ctx: u32) -> KvSettings {
    KvSettings {
        ctx: Some(ctx),
        ..KvSettings::default()
    }
}

fn est(b: &Builder, s: KvSettings) -> Estimate {
    estimate(&model(b), &s).expect("estimate")
}

fn cache(e: &Estimate, kind: CacheKind) -> &CacheEstimate {
    e.kv.caches
        .iter()
        .find(|c| c.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} cache in {:?}", e.kv.caches))
}

// --- reference shapes -------------------------------------------------------

fn qwen3_0_6b() -> Builder {
    Builder::default().arch(
        "qwen3",
        &[
            ("block_count", 28),
            ("context_length", 40960),
            ("embedding_length", 1024),
            ("attention.head_count", 16),
            ("attention.head_count_kv", 8),
            ("attention.key_length", 128),
            ("attention.value_length", 128),
        ],
    )
}

fn llama3_8b() -> Builder {
    // No key_length: the head size defaults to 4096 / 32 = 128.
    Builder::default().arch(
        "llama",
        &[
            ("block_count", 32),
            ("context_length", 8192),
            ("embedding_length", 4096),
            ("attention.head_count", 32),
            ("attention.head_count_kv", 8),
        ],
    )
}

fn gemma3_4b() -> Builder {
    Builder::default().arch(
        "gemma3",
        &[
            ("block_count", 34),
            ("context_length", 131072),
            ("embedding_length", 2560),
            ("attention.head_count", 8),
            ("attention.head_count_kv", 4),
            ("attention.key_length", 256),
            ("attention.value_length", 256),
            ("attention.sliding_window", 1024),
        ],
    )
}

fn gpt_oss_20b() -> Builder {
    Builder::default().arch(
        "gpt-oss",
        &[
            ("block_count", 24),
            ("context_length", 131072),
            ("embedding_length", 2880),
            ("attention.head_count", 64),
            ("attention.head_count_kv", 8),
            ("attention.key_length", 64),
            ("attention.value_length", 64),
            ("attention.sliding_window", 128),
        ],
    )
}

pub(crate) fn deepseek_v2_lite() -> Builder {
    // As convert_hf_to_gguf.py writes MLA models: one KV head, K = rank +
    // rope dims (576), V = rank (512), the MLA head sizes separately.
    Builder::default().arch(
        "deepseek2",
        &[
            ("block_count", 27),
            ("context_length", 163840),
            ("embedding_length", 2048),
            ("attention.head_count", 16),
            ("attention.head_count_kv", 1),
            ("attention.key_length", 576),
            ("attention.value_length", 512),
            ("attention.key_length_mla", 192),
            ("attention.value_length_mla", 128),
            ("attention.kv_lora_rank", 512),
            ("rope.dimension_count", 64),
        ],
    )
}

pub(crate) fn mamba_130m() -> Builder {
    ssm_130m("mamba", 16, 48)
}

/// The 130m Mamba shapes (state-spaces/mamba-130m, mamba2-130m): 24 layers
/// of 768, d_inner 1536; Mamba-2's time-step rank is its head count.
pub(crate) fn ssm_130m(arch: &str, d_state: u32, dt_rank: u32) -> Builder {
    Builder::default().arch(
        arch,
        &[
            ("block_count", 24),
            ("context_length", 1048576),
            ("embedding_length", 768),
            ("attention.head_count", 0),
            ("ssm.conv_kernel", 4),
            ("ssm.inner_size", 1536),
            ("ssm.state_size", d_state),
            ("ssm.time_step_rank", dt_rank),
        ],
    )
}

fn bert() -> Builder {
    Builder::default()
        .arch(
            "bert",
            &[
                ("block_count", 12),
                ("context_length", 512),
                ("embedding_length", 384),
                ("attention.head_count", 12),
                ("pooling_type", 1),
            ],
        )
        .kv("bert.attention.causal", Value::Bool(false))
}

#[test]
fn qwen3_f16_4096_is_448_mib() {
    let e = est(&qwen3_0_6b(), at_ctx(4096));
    assert_eq!(e.kv.bytes, 448 * MIB);
    assert_eq!(e.kv.bytes, 469_762_048);
    assert_eq!(e.kv.bytes_per_token, 112 * 1024);
    assert_eq!(e.kv.context, 4096);
    assert_eq!(
        e.kv.caches,
        vec![CacheEstimate {
            kind: CacheKind::Full,
            cells: 4096,
            layers: 28,
            streams: 1,
            k_bytes: 224 * MIB,
            v_bytes: 224 * MIB,
            bytes: 448 * MIB,
        }]
    );
    assert_eq!(e.recurrent_state_bytes, Some(0));
}

#[test]
fn qwen3_32768_is_3584_mib() {
    assert_eq!(est(&qwen3_0_6b(), at_ctx(32768)).kv.bytes, 3584 * MIB);
}

#[test]
fn qwen3_4000_is_padded_to_4096() {
    let e = est(&qwen3_0_6b(), at_ctx(4000));
    assert_eq!((e.kv.context, e.kv.caches[0].cells), (4096, 4096));
    assert_eq!(e.kv.bytes, 448 * MIB);
}

#[test]
fn qwen3_four_sequences_not_unified_split_the_context() {
    let s = KvSettings {
        n_seq: 4,
        ..at_ctx(4096)
    };
    let e = est(&qwen3_0_6b(), s);
    let c = cache(&e, CacheKind::Full);
    assert_eq!((c.cells, c.streams, c.layers), (1024, 4, 28));
    assert_eq!((e.kv.context, e.kv.context_per_seq), (4096, 1024));
    assert_eq!(e.kv.bytes, 448 * MIB);
}

#[test]
fn qwen3_quantized_caches() {
    let q8 = KvSettings {
        type_k: CacheType::Q8_0,
        type_v: CacheType::Q8_0,
        ..at_ctx(4096)
    };
    assert_eq!(est(&qwen3_0_6b(), q8).kv.bytes, 238 * MIB);
    let q4 = KvSettings {
        type_k: CacheType::Q4_0,
        type_v: CacheType::Q4_0,
        ..at_ctx(4096)
    };
    assert_eq!(est(&qwen3_0_6b(), q4).kv.bytes, 126 * MIB);
}

#[test]
fn every_cache_type_uses_ggml_row_size() {
    // 1024-wide rows: f32 4096, f16/bf16 2048, q8_0 1088, q4_0/iq4_nl 576,
    // q4_1 640, q5_0 704, q5_1 768 bytes; x 4096 cells x 28 layers x 2.
    for (ty, row) in [
        (CacheType::F32, 4096),
        (CacheType::F16, 2048),
        (CacheType::BF16, 2048),
        (CacheType::Q8_0, 1088),
        (CacheType::Q4_0, 576),
        (CacheType::Iq4Nl, 576),
        (CacheType::Q4_1, 640),
        (CacheType::Q5_0, 704),
        (CacheType::Q5_1, 768),
    ] {
        let s = KvSettings {
            type_k: ty,
            type_v: ty,
            ..at_ctx(4096)
        };
        assert_eq!(est(&qwen3_0_6b(), s).kv.bytes, row * 4096 * 28 * 2, "{ty}");
    }
}

#[test]
fn llama3_8b_8192_is_1024_mib() {
    assert_eq!(est(&llama3_8b(), at_ctx(8192)).kv.bytes, 1024 * MIB);
}

#[test]
fn default_context_is_the_training_context() {
    let e = est(&llama3_8b(), KvSettings::default());
    assert_eq!((e.kv.context, e.kv.bytes), (8192, 1024 * MIB));
}

#[test]
fn gemma3_4b_32768_full_and_swa() {
    let e = est(&gemma3_4b(), at_ctx(32768));
    let full = cache(&e, CacheKind::Full);
    assert_eq!((full.cells, full.layers, full.bytes), (32768, 5, 640 * MIB));
    let swa = cache(&e, CacheKind::Swa);
    assert_eq!((swa.cells, swa.layers, swa.bytes), (1536, 29, 174 * MIB));
    assert_eq!(e.kv.bytes, 814 * MIB);
    // one more token costs only in the 5 full layers: 5 x 4 x 256 x 2 x 2
    assert_eq!(e.kv.bytes_per_token, 20480);
}

#[test]
fn gemma3_4b_four_sequences_unified() {
    let s = KvSettings {
        n_seq: 4,
        kv_unified: true,
        ..at_ctx(32768)
    };
    let e = est(&gemma3_4b(), s);
    let swa = cache(&e, CacheKind::Swa);
    assert_eq!((swa.cells, swa.bytes), (4608, 522 * MIB));
    assert_eq!(cache(&e, CacheKind::Full).bytes, 640 * MIB);
}

#[test]
fn gemma3_4b_swa_full() {
    let s = KvSettings {
        swa_full: true,
        ..at_ctx(32768)
    };
    let e = est(&gemma3_4b(), s);
    let swa = cache(&e, CacheKind::Swa);
    assert_eq!((swa.cells, swa.bytes), (32768, 3712 * MIB));
    // with full-size SWA caches every layer grows with the context
    assert_eq!(e.kv.bytes_per_token, 34 * 4096);
}

#[test]
fn gemma3_without_window_has_no_swa() {
    let mut b = gemma3_4b();
    b.kv.retain(|(k, _)| k != "gemma3.attention.sliding_window");
    let e = est(&b, at_ctx(32768));
    assert_eq!(e.kv.caches.len(), 1);
    assert_eq!(cache(&e, CacheKind::Full).layers, 34);
}

#[test]
fn gpt_oss_20b_131072() {
    let e = est(&gpt_oss_20b(), at_ctx(131072));
    let full = cache(&e, CacheKind::Full);
    assert_eq!((full.cells, full.layers, full.bytes), (131072, 12, 3072 * MIB));
    let swa = cache(&e, CacheKind::Swa);
    assert_eq!((swa.cells, swa.layers, swa.bytes), (768, 12, 18 * MIB));
}

#[test]
fn deepseek_v2_lite_mla_stores_k_only() {
    let e = est(&deepseek_v2_lite(), at_ctx(4096));
    let c = cache(&e, CacheKind::Full);
    assert_eq!(c.bytes, 127_401_984);
    assert_eq!(c.bytes, 121 * MIB + MIB / 2);
    assert_eq!((c.k_bytes, c.v_bytes), (c.bytes, 0));
}

#[test]
fn mamba_130m_recurrent_state() {
    let one = est(&mamba_130m(), at_ctx(4096));
    assert_eq!(one.kv.bytes, 0);
    let r = cache(&one, CacheKind::Recurrent);
    assert_eq!((r.cells, r.layers), (1, 24));
    assert_eq!((r.k_bytes, r.v_bytes), (442_368, 2_359_296)); // 0.42 + 2.25 MiB
    assert_eq!(one.recurrent_state_bytes, Some(2_801_664)); // 2.67 MiB
                                                            // independent of the context
    let long = est(&mamba_130m(), at_ctx(65536));
    assert_eq!(long.recurrent_state_bytes, Some(2_801_664));
    let four = est(
        &mamba_130m(),
        KvSettings {
            n_seq: 4,
            ..at_ctx(4096)
        },
    );
    assert_eq!(four.recurrent_state_bytes, Some(11_206_656)); // 10.69 MiB
}

#[test]
fn bert_has_no_kv_cache() {
    let m = model(&bert());
    assert_eq!(m.info().kind, Kind::Embedding);
    let e = estimate(&m, &at_ctx(512)).unwrap();
    assert!(e.kv.caches.is_empty());
    assert_eq!((e.kv.bytes, e.kv.bytes_per_token), (0, 0));
}

#[test]
fn per_layer_kv_heads_array() {
    // Layers alternate 8 and 2 KV heads; a 0 would be a recurrent layer in a
    // hybrid, here just a layer without K/V width.
    let heads: Vec<Value> = (0..4).map(|il| Value::I32(if il % 2 == 0 { 8 } else { 2 })).collect();
    let b = Builder::default()
        .arch(
            "llama",
            &[
                ("block_count", 4),
                ("context_length", 4096),
                ("embedding_length", 1024),
                ("attention.head_count", 8),
            ],
        )
        .kv("llama.attention.head_count_kv", arr(ValueType::I32, heads));
    let m = model(&b);
    assert_eq!(m.info().head_count_kv, Some(PerLayer::Varies(vec![8, 2, 8, 2])));
    // head 128; K: (1024 + 256 + 1024 + 256) x 2 bytes x 4096 cells
    let with_fa = estimate(&m, &at_ctx(4096)).unwrap();
    assert_eq!(cache(&with_fa, CacheKind::Full).k_bytes, 2560 * 2 * 4096);
    assert_eq!(cache(&with_fa, CacheKind::Full).v_bytes, 2560 * 2 * 4096);
    // without flash attention V is padded to the widest layer (1024)
    let no_fa = KvSettings {
        flash_attn: false,
        ..at_ctx(4096)
    };
    let e = estimate(&m, &no_fa).unwrap();
    assert_eq!(cache(&e, CacheKind::Full).v_bytes, 4 * 1024 * 2 * 4096);
    assert_eq!(cache(&e, CacheKind::Full).k_bytes, 2560 * 2 * 4096);
}

#[test]
fn wrong_length_head_array_is_reported() {
    let b = Builder::default()
        .arch(
            "llama",
            &[("block_count", 4), ("context_length", 4096), ("embedding_length", 1024)],
        )
        .kv(
            "llama.attention.head_count",
            arr(ValueType::U32, vec![Value::U32(8); 3]),
        );
    let err = estimate(&model(&b), &at_ctx(4096)).unwrap_err();
    assert!(err.to_string().contains("3 elements"), "{err}");
}

#[test]
fn nonsense_head_size_is_named_with_its_value() {
    for (key, value) in [
        ("attention.key_length", u32::MAX),
        ("attention.value_length", u32::MAX),
        ("attention.key_length_swa", 1 << 20),
        ("attention.value_length_swa", 65537),
    ] {
        let full = format!("qwen3.{key}");
        let mut b = qwen3_0_6b();
        b.kv.retain(|(k, _)| *k != full);
        let b = b.u32(&full, value);
        let e = estimate(&model(&b), &at_ctx(4096)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("qwen3.{key} = {value} is not a plausible head size (at most 65536)")
        );
    }
    // The default head size, embedding_length / head_count, is checked too.
    let mut b = llama3_8b();
    b.kv.retain(|(k, _)| k != "llama.embedding_length");
    let e = estimate(&model(&b.u32("llama.embedding_length", u32::MAX)), &at_ctx(4096)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "llama.embedding_length / llama.attention.head_count = 134217727 is not a plausible head size (at most 65536)"
    );
}

#[test]
fn quantized_v_without_flash_attention_is_refused() {
    let s = KvSettings {
        type_v: CacheType::Q8_0,
        flash_attn: false,
        ..at_ctx(4096)
    };
    assert!(matches!(
        estimate(&model(&qwen3_0_6b()), &s),
        Err(EstimateError::Settings(_))
    ));
}

#[test]
fn gemma3n_layers_from_20_share_kv() {
    let b = Builder::default().arch(
        "gemma3n",
        &[
            ("block_count", 30),
            ("context_length", 32768),
            ("embedding_length", 2048),
            ("attention.head_count", 8),
            ("attention.head_count_kv", 2),
            ("attention.key_length", 256),
            ("attention.value_length", 256),
            ("attention.sliding_window", 512),
        ],
    );
    let e = est(&b, at_ctx(4096));
    // layers 0..20, period 5: 4, 9, 14, 19 full
    assert_eq!(cache(&e, CacheKind::Full).layers, 4);
    assert_eq!(cache(&e, CacheKind::Swa).layers, 16);
}

#[test]
fn gemma4_per_layer_pattern_and_swa_head_sizes() {
    let pattern: Vec<Value> = (0..6).map(|il| Value::Bool(il % 3 != 2)).collect();
    let b = Builder::default()
        .arch(
            "gemma4",
            &[
                ("block_count", 6),
                ("context_length", 32768),
                ("embedding_length", 1536),
                ("attention.head_count", 8),
                ("attention.head_count_kv", 1),
                ("attention.key_length", 512),
                ("attention.value_length", 512),
                ("attention.key_length_swa", 256),
                ("attention.value_length_swa", 256),
                ("attention.sliding_window", 512),
                ("attention.shared_kv_layers", 2),
            ],
        )
        .kv("gemma4.attention.sliding_window_pattern", arr(ValueType::Bool, pattern));
    let e = est(&b, at_ctx(4096));
    // KV for layers 0..4 only: 2 is full (512 wide), 0, 1, 3 slide (256).
    let full = cache(&e, CacheKind::Full);
    assert_eq!((full.layers, full.bytes), (1, 512 * 2 * 2 * 4096));
    let swa = cache(&e, CacheKind::Swa);
    assert_eq!(swa.cells, 1024);
    assert_eq!((swa.layers, swa.bytes), (3, 3 * 256 * 2 * 2 * 1024));
}

#[test]
fn sliding_window_pattern_as_a_period_of_any_integer_type() {
    // A period of 3 (layers 0, 1 slide, 2 is full, ...) as any integer type
    // gives what the same pattern as a bool array gives; a scalar bool is
    // every layer (get_key_or_arr fills the scalar in).
    let model_with = |pattern: Value| {
        Builder::default()
            .arch(
                "newarch",
                &[
                    ("block_count", 6),
                    ("context_length", 32768),
                    ("embedding_length", 1024),
                    ("attention.head_count", 8),
                    ("attention.head_count_kv", 2),
                    ("attention.sliding_window", 512),
                ],
            )
            .kv("newarch.attention.sliding_window_pattern", pattern)
    };
    let layers = |b: &Builder| {
        let e = est(b, at_ctx(4096));
        let n = |kind| e.kv.caches.iter().find(|c| c.kind == kind).map_or(0, |c| c.layers);
        (n(CacheKind::Full), n(CacheKind::Swa))
    };
    let bools = (0..6).map(|il| Value::Bool(il % 3 != 2)).collect();
    assert_eq!(layers(&model_with(arr(ValueType::Bool, bools))), (2, 4));
    for period in [
        Value::U8(3),
        Value::I8(3),
        Value::U16(3),
        Value::I16(3),
        Value::U32(3),
        Value::I32(3),
        Value::U64(3),
        Value::I64(3),
    ] {
        assert_eq!(layers(&model_with(period.clone())), (2, 4), "{period:?}");
    }
    assert_eq!(layers(&model_with(Value::Bool(true))), (0, 6));
    assert_eq!(layers(&model_with(Value::Bool(false))), (6, 0));
    let e = estimate(&model(&model_with(Value::I32(-1))), &at_ctx(4096)).unwrap_err();
    assert!(
        e.to_string()
            .contains("newarch.attention.sliding_window_pattern is not a u32"),
        "{e}"
    );
}

#[test]
fn llama4_is_chunked_every_fourth_layer_full() {
    let b = Builder::default().arch(
        "llama4",
        &[
            ("block_count", 48),
            ("context_length", 262144),
            ("embedding_length", 5120),
            ("attention.head_count", 40),
            ("attention.head_count_kv", 8),
        ],
    );
    let e = est(&b, at_ctx(32768));
    assert_eq!(cache(&e, CacheKind::Full).layers, 12);
    let swa = cache(&e, CacheKind::Swa);
    assert_eq!((swa.layers, swa.cells), (36, 8192 + 512));
}

#[test]
fn hybrid_attention_and_recurrent_layers() {
    // jamba-like: every 4th layer attention (head_count_kv > 0), the rest
    // mamba (head_count_kv 0).
    let kv_heads: Vec<Value> = (0..8).map(|il| Value::U32(if il % 4 == 3 { 8 } else { 0 })).collect();
    let b = Builder::default()
        .arch(
            "jamba",
            &[
                ("block_count", 8),
                ("context_length", 4096),
                ("embedding_length", 1024),
                ("attention.head_count", 8),
                ("ssm.conv_kernel", 4),
                ("ssm.inner_size", 2048),
                ("ssm.state_size", 16),
            ],
        )
        .kv("jamba.attention.head_count_kv", arr(ValueType::U32, kv_heads));
    let m = model(&b);
    assert_eq!(m.info().kind, Kind::Hybrid);
    let e = estimate(&m, &at_ctx(4096)).unwrap();
    let full = cache(&e, CacheKind::Full);
    assert_eq!((full.layers, full.bytes), (2, 2 * 1024 * 2 * 2 * 4096));
    let rec = cache(&e, CacheKind::Recurrent);
    assert_eq!(rec.layers, 6);
    assert_eq!(rec.bytes, 6 * (3 * 2048 + 16 * 2048) * 4);
    assert_eq!(e.kv.bytes, full.bytes);
    assert_eq!(e.recurrent_state_bytes, Some(rec.bytes));
}

#[test]
fn qwen3next_full_attention_interval() {
    let b = Builder::default().arch(
        "qwen3next",
        &[
            ("block_count", 8),
            ("context_length", 4096),
            ("embedding_length", 2048),
            ("attention.head_count", 16),
            ("attention.head_count_kv", 2),
            ("attention.key_length", 256),
            ("attention.value_length", 256),
            ("ssm.conv_kernel", 4),
            ("ssm.inner_size", 4096),
            ("ssm.state_size", 128),
            ("ssm.group_count", 16),
        ],
    );
    let e = est(&b, at_ctx(4096));
    assert_eq!(cache(&e, CacheKind::Full).layers, 2);
    let rec = cache(&e, CacheKind::Recurrent);
    assert_eq!(rec.layers, 6);
    // r = 3 x (4096 + 2 x 16 x 128), s = 128 x 4096
    assert_eq!(rec.k_bytes, 6 * 3 * 8192 * 4);
    assert_eq!(rec.v_bytes, 6 * 128 * 4096 * 4);
}

#[test]
fn rwkv_state_uses_wkv_head_size() {
    let b = Builder::default().arch(
        "rwkv6",
        &[
            ("block_count", 24),
            ("context_length", 1048576),
            ("embedding_length", 2048),
            ("wkv.head_size", 64),
        ],
    );
    let e = est(&b, at_ctx(4096));
    let rec = cache(&e, CacheKind::Recurrent);
    assert_eq!(rec.k_bytes, 24 * 2 * 2048 * 4);
    assert_eq!(rec.v_bytes, 24 * 2048 * 64 * 4);
}

// --- GPU split and fit -----------------------------------------------------

/// A 4-layer llama with real tensors (f16, 256 wide) and tied embeddings.
fn tiny_llama(tied: bool) -> Builder {
    let mut b = Builder::default()
        .arch(
            "llama",
            &[
                ("block_count", 4),
                ("context_length", 2048),
                ("embedding_length", 256),
                ("attention.head_count", 4),
                ("attention.head_count_kv", 2),
            ],
        )
        .u32("general.file_type", 1)
        .tensor("token_embd.weight", &[256, 1000], 1)
        .tensor("output_norm.weight", &[256], 0);
    if !tied {
        b = b.tensor("output.weight", &[256, 1000], 1);
    }
    for il in 0..4 {
        b = b.tensor(&format!("blk.{il}.attn_q.weight"), &[256, 256], 1).tensor(
            &format!("blk.{il}.attn_norm.weight"),
            &[256],
            0,
        );
    }
    b
}

const EMBD: u64 = 256 * 1000 * 2;
const LAYER: u64 = 256 * 256 * 2 + 256 * 4;
const NORM: u64 = 256 * 4;
/// KV of one layer at 2048 cells: 2 heads x 64 x 2 bytes x 2 (K, V).
const KV_LAYER: u64 = 2 * 64 * 2 * 2 * 2048;

#[test]
fn n_gpu_layers_splits_weights_and_kv() {
    let m = model(&tiny_llama(false));
    let info = m.info();
    assert_eq!(info.weights_bytes, Some(2 * EMBD + NORM + 4 * LAYER));
    assert_eq!(info.params, Some(2 * 256_000 + 256 + 4 * (65536 + 256)));
    let ngl = |n| {
        estimate(
            &m,
            &KvSettings {
                n_gpu_layers: Some(n),
                ..at_ctx(2048)
            },
        )
        .unwrap()
        .offload
    };
    // all (5 = 4 layers + output): token_embd stays on the CPU
    let all = ngl(5);
    assert_eq!(all.gpu.weights_bytes, Some(EMBD + NORM + 4 * LAYER));
    assert_eq!(all.cpu.weights_bytes, Some(EMBD));
    assert_eq!((all.gpu.kv_bytes, all.cpu.kv_bytes), (4 * KV_LAYER, 0));
    // 2: the output layer and layer 3
    let two = ngl(2);
    assert_eq!(two.gpu.weights_bytes, Some(EMBD + NORM + LAYER));
    assert_eq!(two.cpu.weights_bytes, Some(EMBD + 3 * LAYER));
    assert_eq!((two.gpu.kv_bytes, two.cpu.kv_bytes), (KV_LAYER, 3 * KV_LAYER));
    // 0: everything on the CPU
    let none = ngl(0);
    assert_eq!(none.gpu.total(), Some(0));
    assert_eq!(ngl(-1), all);
    assert_eq!(ngl(100), all);
}

#[test]
fn tied_output_is_duplicated_on_the_gpu() {
    let m = model(&tiny_llama(true));
    let e = estimate(&m, &at_ctx(2048)).unwrap();
    assert_eq!(e.offload.gpu.weights_bytes, Some(EMBD + NORM + 4 * LAYER));
    assert_eq!(e.offload.cpu.weights_bytes, Some(EMBD));
}

#[test]
fn fit_and_largest_context() {
    let m = model(&tiny_llama(false));
    let base = EMBD + NORM + 4 * LAYER;
    let per_256 = KV_LAYER / 8 * 4; // 4 layers, 256 cells
                                    // exactly 1024 cells' worth free
    let f = fit(&m, &at_ctx(2048), base + 4 * per_256).unwrap();
    assert_eq!(f.needed_bytes, Some(base + 8 * per_256));
    assert_eq!(f.fits, Some(false));
    assert_eq!(f.max_context, Some(1024));
    let roomy = fit(&m, &at_ctx(2048), u64::MAX).unwrap();
    assert_eq!((roomy.fits, roomy.max_context), (Some(true), Some(2048)));
    let tight = fit(&m, &at_ctx(2048), base).unwrap();
    assert_eq!(tight.max_context, Some(0));
}

// --- model info ------------------------------------------------------------

#[test]
fn info_names_file_type_and_guesses_when_missing() {
    let m = model(&tiny_llama(false));
    let ft = m.info().file_type.clone().unwrap();
    assert_eq!((ft.id, ft.name, ft.guessed), (1, Some("F16"), false));
    let mut b = tiny_llama(false);
    b.kv.retain(|(k, _)| k != "general.file_type");
    let guessed = model(&b).info().file_type.clone().unwrap();
    assert_eq!((guessed.id, guessed.guessed), (1, true));
    assert_eq!(guessed.to_string(), "F16 (guessed)");
}

#[test]
fn kinds() {
    let kind = |b: Builder| model(&b).info().kind;
    assert_eq!(kind(qwen3_0_6b()), Kind::Llm);
    assert_eq!(kind(mamba_130m()), Kind::Recurrent);
    assert_eq!(kind(bert()), Kind::Embedding);
    assert_eq!(kind(qwen3_0_6b().u32("qwen3.pooling_type", 4)), Kind::Reranker);
    assert_eq!(kind(qwen3_0_6b().u32("qwen3.pooling_type", 0)), Kind::Llm);
    assert_eq!(
        kind(qwen3_0_6b().kv("qwen3.attention.causal", Value::Bool(false))),
        Kind::Encoder
    );
    assert_eq!(
        kind(Builder::default().arch("dream", &[("block_count", 2)])),
        Kind::Encoder
    );
    assert_eq!(kind(qwen3_0_6b().str("stt.model_type", "whisper")), Kind::Speech);
    assert_eq!(kind(qwen3_0_6b().str("decision.type", "tree")), Kind::Decision);
    for k in [
        Kind::Llm,
        Kind::Embedding,
        Kind::Reranker,
        Kind::Encoder,
        Kind::Recurrent,
        Kind::Hybrid,
        Kind::Speech,
        Kind::Decision,
    ] {
        assert!(!k.as_str().is_empty());
    }
}

#[test]
fn unknown_tensor_type_is_tolerated() {
    let b = tiny_llama(false).tensor("blk.0.new_quant.weight", &[256, 4], 99);
    let m = model(&b);
    let info = m.info();
    assert_eq!(info.tensors_unknown_type, 1);
    assert_eq!(info.weights_bytes, None);
    assert_eq!(info.bits_per_weight, None);
    assert_eq!(info.params, Some(2 * 256_000 + 256 + 4 * (65536 + 256) + 1024));
    let e = estimate(&m, &at_ctx(2048)).unwrap();
    assert_eq!(e.kv.bytes, 4 * KV_LAYER);
    assert_eq!(e.offload.gpu.weights_bytes, None);
    assert_eq!(e.offload.cpu.weights_bytes, Some(EMBD));
}

// --- format ----------------------------------------------------------------

/// A file with every value type, a kept and a skipped array of each kind.
fn all_value_types() -> Builder {
    let tokens: Vec<Value> = (0..=MAX_KEPT_STRING_ARRAY)
        .map(|i| Value::String(format!("tok{i}")))
        .collect();
    let scores = vec![Value::F32(0.5); MAX_KEPT_ARRAY as usize + 1];
    qwen3_0_6b()
        .tensor("blk.0.attn_norm.weight", &[1024], 0)
        .tensor("blk.0.attn_q.weight", &[1024, 4], 8)
        .kv("t.u8", Value::U8(1))
        .kv("t.i8", Value::I8(-2))
        .kv("t.u16", Value::U16(3))
        .kv("t.i16", Value::I16(-4))
        .kv("t.u32", Value::U32(5))
        .kv("t.i32", Value::I32(-6))
        .kv("t.f32", Value::F32(7.5))
        .kv("t.bool", Value::Bool(true))
        .kv("t.string", Value::String("héllo".into()))
        .kv("t.u64", Value::U64(1 << 40))
        .kv("t.i64", Value::I64(-(1 << 40)))
        .kv("t.f64", Value::F64(-0.25))
        .kv("t.tags", arr(ValueType::String, vec![Value::String("a".into())]))
        .kv("t.tokens", arr(ValueType::String, tokens))
        .kv("t.scores", arr(ValueType::F32, scores))
}

#[test]
fn reads_every_value_type_and_skips_large_arrays() {
    let m = model(&all_value_types());
    let meta = m.metadata();
    let b = all_value_types();
    for (key, value) in &b.kv {
        let got = meta.get(key).unwrap();
        match value {
            Value::Array(a) if a.len > MAX_KEPT_STRING_ARRAY && a.elem_type == ValueType::String => {
                assert_eq!(got.as_array().unwrap().values, None, "{key}");
                assert_eq!(got.as_array().unwrap().len, a.len);
            }
            Value::Array(a) if a.len > MAX_KEPT_ARRAY => {
                assert_eq!(got.as_array().unwrap().values, None, "{key}");
            }
            _ => assert_eq!(got, value, "{key}"),
        }
    }
}

#[test]
fn truncated_at_every_offset_is_an_error() {
    let bytes = all_value_types().to_bytes();
    assert!(read_header(Cursor::new(&bytes)).is_ok());
    for len in 0..bytes.len() {
        let r = read_header(Cursor::new(&bytes[..len]));
        assert!(r.is_err(), "prefix of {len} bytes read as valid");
    }
}

fn error_of(bytes: Vec<u8>) -> Error {
    read_header(Cursor::new(bytes)).unwrap_err()
}

/// Header bytes: magic, version 3, the counts.
fn prefix(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(n_tensors.to_le_bytes());
    b.extend(n_kv.to_le_bytes());
    b
}

fn key(b: &mut Vec<u8>, k: &str) {
    b.extend((k.len() as u64).to_le_bytes());
    b.extend(k.as_bytes());
}

#[test]
fn hostile_array_count() {
    let mut b = prefix(0, 1);
    key(&mut b, "a");
    b.extend(9u32.to_le_bytes()); // array
    b.extend(4u32.to_le_bytes()); // of u32
    let count_at = b.len() as u64;
    b.extend((1u64 << 60).to_le_bytes());
    b.extend([0u8; 64]);
    let e = error_of(b);
    assert_eq!(e.offset(), Some(count_at));
    assert!(
        matches!(e.kind(), ErrorKind::CountTooLarge { count, .. } if *count == 1 << 60),
        "{e}"
    );
    assert!(e.to_string().contains(&format!("at byte {count_at}")), "{e}");
}

#[test]
fn hostile_string_array_count() {
    let mut b = prefix(0, 1);
    key(&mut b, "tokenizer.ggml.tokens");
    b.extend(9u32.to_le_bytes());
    b.extend(8u32.to_le_bytes()); // of strings
    b.extend(u64::MAX.to_le_bytes());
    b.extend([0u8; 64]);
    assert!(matches!(error_of(b).kind(), ErrorKind::CountTooLarge { .. }));
}

#[test]
fn hostile_string_longer_than_file() {
    let mut b = prefix(0, 1);
    let at = b.len() as u64;
    b.extend(1000u64.to_le_bytes());
    b.extend(b"short");
    let e = error_of(b);
    assert_eq!(e.offset(), Some(at));
    assert!(matches!(e.kind(), ErrorKind::TooLong { len: 1000, .. }), "{e}");
}

#[test]
fn hostile_counts() {
    let e = error_of(prefix(u64::MAX, 0));
    assert_eq!(e.offset(), Some(8));
    assert!(matches!(e.kind(), ErrorKind::CountTooLarge { .. }));
    let e = error_of(prefix(0, 1 << 40));
    assert_eq!(e.offset(), Some(16));
}

#[test]
fn hostile_tensor_dims() {
    let one = |dims: &[u64]| Builder::default().tensor("t", &[1], 0).to_bytes_with_dims(dims);
    // n_dims 5
    let e = error_of(one(&[1, 1, 1, 1, 1]));
    assert!(matches!(e.kind(), ErrorKind::TooManyDims { n_dims: 5, .. }), "{e}");
    // a dimension of 2^40 elements: its data cannot be in the file
    let e = error_of(one(&[1 << 40]));
    assert!(matches!(e.kind(), ErrorKind::TensorPastEnd { .. }), "{e}");
    // a product that overflows
    let e = error_of(one(&[1 << 32, 1 << 32]));
    assert!(matches!(e.kind(), ErrorKind::DimOverflow { .. }), "{e}");
    // elements that fit in i64 but whose bytes do not fit in u64 (found by
    // the fuzzer: 2^62 f32 values)
    let e = error_of(one(&[1 << 62]));
    assert!(matches!(e.kind(), ErrorKind::DimOverflow { .. }), "{e}");
    // a negative dimension
    let e = error_of(one(&[u64::MAX]));
    assert!(matches!(e.kind(), ErrorKind::NegativeDim { .. }), "{e}");
    // a row that is not whole blocks
    let e = error_of(Builder::default().tensor("t", &[32], 8).to_bytes_with_dims(&[33]));
    assert!(matches!(e.kind(), ErrorKind::RowNotBlock { .. }), "{e}");
}

#[test]
fn hostile_value_types_and_keys() {
    let mut b = prefix(0, 1);
    key(&mut b, "k");
    b.extend(13u32.to_le_bytes());
    b.extend([0u8; 16]);
    assert!(matches!(error_of(b).kind(), ErrorKind::BadValueType { ty: 13, .. }));

    let mut b = prefix(0, 1);
    key(&mut b, "k");
    b.extend(9u32.to_le_bytes());
    b.extend(9u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend([0u8; 16]);
    assert!(matches!(error_of(b).kind(), ErrorKind::NestedArray { .. }));

    let dup = qwen3_0_6b().u32("qwen3.block_count", 1);
    assert!(matches!(error_of(dup.to_bytes()).kind(), ErrorKind::DuplicateKey(_)));

    let dup_t = Builder::default().tensor("t", &[1], 0).tensor("t", &[1], 0);
    assert!(matches!(
        error_of(dup_t.to_bytes()).kind(),
        ErrorKind::DuplicateTensor(_)
    ));
}

#[test]
fn alignment_is_honoured_and_checked() {
    let b = tiny_llama(false).u32("general.alignment", 64);
    let h = read_header(Cursor::new(b.to_bytes())).unwrap();
    assert_eq!(h.alignment, 64);
    assert_eq!(h.data_offset % 64, 0);
    assert!(h.tensors.iter().all(|t| t.offset % 64 == 0));
    let bad = tiny_llama(false).u32("general.alignment", 48);
    assert!(matches!(error_of(bad.to_bytes()).kind(), ErrorKind::BadAlignment(48)));
    let zero = tiny_llama(false).u32("general.alignment", 0);
    assert!(matches!(error_of(zero.to_bytes()).kind(), ErrorKind::BadAlignment(0)));
    let wrong_type = tiny_llama(false).kv("general.alignment", Value::U64(32));
    assert!(matches!(
        error_of(wrong_type.to_bytes()).kind(),
        ErrorKind::AlignmentType("u64")
    ));
}

#[test]
fn versions() {
    let v = |version| {
        Builder {
            version,
            ..qwen3_0_6b()
        }
        .to_bytes()
    };
    assert!(matches!(error_of(v(1)).kind(), ErrorKind::VersionOne));
    assert!(matches!(error_of(v(4)).kind(), ErrorKind::UnsupportedVersion(4)));
    assert_eq!(read_header(Cursor::new(v(2))).unwrap().version, 2);
    let e = error_of(b"GGML\x03\0\0\0".to_vec());
    assert!(matches!(e.kind(), ErrorKind::NotGguf(_)));
    assert!(e.to_string().contains("not a GGUF file"));
}

#[test]
fn big_endian_file_reads_like_little_endian() {
    let le = all_value_types();
    let be = Builder {
        big_endian: true,
        ..all_value_types()
    };
    let (hl, hb) = (
        read_header(Cursor::new(le.to_bytes())).unwrap(),
        read_header(Cursor::new(be.to_bytes())).unwrap(),
    );
    assert!(hb.big_endian && !hl.big_endian);
    assert_eq!(hb.version, 3);
    assert_eq!(hb.tensors, hl.tensors);
    let (ml, mb): (Vec<_>, Vec<_>) = (hl.metadata.iter().collect(), hb.metadata.iter().collect());
    assert_eq!(ml, mb);
    let m = Model::from_header(Path::new("be.gguf"), hb).unwrap();
    assert_eq!(estimate(&m, &at_ctx(4096)).unwrap().kv.bytes, 448 * MIB);
}

#[test]
fn split_model_of_two_parts_is_merged() {
    let dir = tempfile::tempdir().unwrap();
    let part = |no: u32| {
        let mut b = Builder::default()
            .u32("split.count", 2)
            .kv("split.no", Value::U16(no as u16))
            .kv("split.tensors.count", Value::I32(3));
        b.kv.iter_mut().for_each(|(k, v)| {
            if k == "split.count" {
                *v = Value::U16(2);
            }
        });
        b
    };
    let first = tiny_llama(false);
    let mut p1 = part(0);
    p1.kv.extend(first.kv.clone());
    let p1 = p1
        .tensor("token_embd.weight", &[256, 1000], 1)
        .tensor("blk.0.attn_q.weight", &[256, 256], 1);
    let p2 = part(1).tensor("output.weight", &[256, 1000], 1);
    let path1 = dir.path().join("m-00001-of-00002.gguf");
    let path2 = dir.path().join("m-00002-of-00002.gguf");
    p1.write(&path1);
    p2.write(&path2);

    for path in [&path1, &path2] {
        let m = open(path).unwrap();
        assert_eq!(m.parts().len(), 2);
        assert_eq!(m.info().split_parts, 2);
        assert_eq!(m.tensors().len(), 3);
        assert_eq!(m.info().params, Some(2 * 256_000 + 65536));
        assert_eq!(m.info().weights_bytes, Some(2 * EMBD + 65536 * 2));
        assert_eq!(m.tensors()[2].part, 1);
        assert_eq!(m.info().layers, Some(4));
    }

    std::fs::remove_file(&path2).unwrap();
    let e = open(&path1).unwrap_err();
    assert_eq!(e.path(), Some(path2.as_path()));
    let lone = dir.path().join("renamed.gguf");
    std::fs::copy(&path1, &lone).unwrap();
    assert!(matches!(open(&lone).unwrap_err().kind(), ErrorKind::Split(_)));
}

/// The first part of a split set of `count` parts.
fn split_part(count: u32) -> Builder {
    tiny_llama(false).u32("split.count", count)
}

#[cfg(unix)]
#[test]
fn split_parts_that_are_one_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.gguf");
    split_part(3).write(&real);
    let first = dir.path().join("m-00001-of-00003.gguf");
    std::fs::hard_link(&real, &first).unwrap();
    let second = dir.path().join("m-00002-of-00003.gguf");
    std::os::unix::fs::symlink(&real, &second).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("m-00003-of-00003.gguf")).unwrap();
    let e = open(&first).unwrap_err();
    assert_eq!(e.path(), Some(second.as_path()));
    assert_eq!(
        e.kind().to_string(),
        "part 2 of 3 is the same file as part 1; the parts of a split model must be distinct files"
    );
}

#[test]
fn split_headers_over_the_cap_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("m-00001-of-00002.gguf");
    let second = dir.path().join("m-00002-of-00002.gguf");
    split_part(2).write(&first);
    Builder::default()
        .u32("split.count", 2)
        .u32("split.no", 1)
        .write(&second);
    let one = open(&first).unwrap().parts()[0].data_offset;
    let two = open(&first).unwrap().parts()[1].data_offset;
    assert_eq!(model::open_capped(&first, one + two, far()).unwrap().parts().len(), 2);
    let e = model::open_capped(&first, one + two - 1, far()).unwrap_err();
    assert_eq!(e.path(), Some(second.as_path()));
    assert_eq!(
        e.kind().to_string(),
        format!(
            "the headers of parts 1 to 2 of 2 take {} bytes, over the limit of {} bytes for one model",
            one + two,
            one + two - 1
        )
    );
}

#[test]
fn split_count_beyond_llama_cpp_u16_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("m-00001-of-65536.gguf");
    split_part(65536).write(&first);
    let e = open(&first).unwrap_err();
    assert_eq!(
        e.kind().to_string(),
        "split.count is 65536, more than llama.cpp's limit of 65535 parts"
    );
}

#[test]
fn ollama_blob_without_extension() {
    let dir = tempfile::tempdir().unwrap();
    let blob = dir
        .path()
        .join("sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa");
    tiny_llama(false).write(&blob);
    assert!(is_gguf(&blob));
    let m = open(&blob).unwrap();
    assert_eq!(m.info().architecture.as_deref(), Some("llama"));
    let other = dir.path().join("sha256-0000");
    std::fs::write(&other, b"{\"not\": \"gguf\"}").unwrap();
    assert!(!is_gguf(&other));
    assert!(!is_gguf(&dir.path().join("missing")));
    let e = open(&other).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::NotGguf(_)));
    assert!(e.to_string().starts_with(&other.display().to_string()), "{e}");
}

#[test]
fn sparse_file_of_a_large_model_opens() {
    // 32 layers of 4096 x 4096 f16: 1 GiB of tensor data as a hole.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.gguf");
    let mut b = llama3_8b();
    for il in 0..32 {
        b = b.tensor(&format!("blk.{il}.attn_q.weight"), &[4096, 4096], 1);
    }
    b.write(&path);
    let m = open(&path).unwrap();
    assert_eq!(m.info().weights_bytes, Some(32 * 4096 * 4096 * 2));
}

// --- files that are not regular files ---------------------------------------

/// Runs `f` on a thread and waits at most 2 s: a call that blocks (open(2)
/// on a FIFO without a writer) fails the test instead of hanging it.
#[cfg(unix)]
fn within_2s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(2))
        .expect("the call did not return within 2 s (blocked on a FIFO or device?)")
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// `open` and `is_gguf` on `path` both return at once, `open` with an error
/// whose message contains `what`.
#[cfg(unix)]
fn refused_at_once(path: &Path, what: &str) {
    let p = path.to_path_buf();
    let e = within_2s(move || open(&p).map(|_| ()).map_err(|e| e.to_string())).unwrap_err();
    assert!(e.contains(&format!("not a regular file: {what}")), "{e}");
    assert!(e.starts_with(&path.display().to_string()), "{e}");
    let p = path.to_path_buf();
    assert!(!within_2s(move || is_gguf(&p)));
}

#[cfg(unix)]
#[test]
fn fifo_device_and_directory_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f.gguf");
    mkfifo(&fifo);
    refused_at_once(&fifo, "a FIFO");
    refused_at_once(Path::new("/dev/zero"), "a character device");

    let to_fifo = dir.path().join("to-fifo.gguf");
    std::os::unix::fs::symlink(&fifo, &to_fifo).unwrap();
    refused_at_once(&to_fifo, "a FIFO");
    let to_zero = dir.path().join("to-zero.gguf");
    std::os::unix::fs::symlink("/dev/zero", &to_zero).unwrap();
    refused_at_once(&to_zero, "a character device");

    let subdir = dir.path().join("x.gguf");
    std::fs::create_dir(&subdir).unwrap();
    refused_at_once(&subdir, "a directory");

    // A regular file, and a symlink to one, still open.
    let real = dir.path().join("real.gguf");
    tiny_llama(false).write(&real);
    let to_real = dir.path().join("to-real.gguf");
    std::os::unix::fs::symlink(&real, &to_real).unwrap();
    for p in [real, to_real] {
        assert!(is_gguf(&p));
        assert_eq!(open(&p).unwrap().info().layers, Some(4));
    }
}

#[cfg(unix)]
#[test]
fn split_part_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("m-00001-of-00002.gguf");
    let second = dir.path().join("m-00002-of-00002.gguf");
    tiny_llama(false).u32("split.count", 2).write(&first);
    mkfifo(&second);
    let p = first.clone();
    let e = within_2s(move || open(&p).map(|_| ()).unwrap_err());
    assert_eq!(e.path(), Some(second.as_path()));
    assert!(e.to_string().contains("not a regular file: a FIFO"), "{e}");
}

// --- property tests ----------------------------------------------------------

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        prop::num::f32::NORMAL.prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        ".{0,40}".prop_map(Value::String),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        prop::num::f64::NORMAL.prop_map(Value::F64),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => scalar(),
        1 => (0u32..13)
            .prop_filter("no nested arrays", |t| *t != 9)
            .prop_flat_map(|t| {
                let elem = ValueType::from_id(t).unwrap();
                prop::collection::vec(scalar(), 0..20).prop_map(move |vals| {
                    // keep only elements of the chosen type
                    let vals: Vec<Value> =
                        vals.into_iter().filter(|v| v.value_type() == elem).collect();
                    arr(elem, vals)
                })
            }),
    ]
}

fn tensor_type() -> impl Strategy<Value = u32> {
    prop::sample::select(vec![0u32, 1, 2, 3, 6, 7, 8, 10, 12, 14, 20, 24, 28, 30, 39, 41])
}

prop_compose! {
    fn builder()(
        version in 2u32..4,
        big_endian in any::<bool>(),
        kv in prop::collection::btree_map("[a-z.]{1,12}", value(), 0..12),
        tensors in prop::collection::btree_map(
            "[a-z_.0-9]{1,16}",
            (tensor_type(), prop::collection::vec(1u64..4, 0..4)),
            0..6,
        ),
    ) -> Builder {
        let mut b = Builder { version, big_endian, ..Builder::default() };
        for (k, v) in kv {
            b = b.kv(&k, v);
        }
        for (name, (ty, mut dims)) in tensors {
            let block = GgmlType(ty).info().unwrap().block_size;
            if let Some(d0) = dims.first_mut() {
                *d0 *= block;
            } else {
                dims.push(block);
            }
            b = b.tensor(&name, &dims, ty);
        }
        b
    }
}

proptest! {
    #[test]
    fn round_trips_random_valid_files(b in builder()) {
        let h = read_header(Cursor::new(b.to_bytes())).unwrap();
        prop_assert_eq!(h.version, b.version);
        prop_assert_eq!(h.big_endian, b.big_endian);
        let got: Vec<(&str, &Value)> = h.metadata.iter().collect();
        let want: Vec<(&str, &Value)> = b.kv.iter().map(|(k, v)| (k.as_str(), v)).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(h.tensors.len(), b.tensors.len());
        for (t, spec) in h.tensors.iter().zip(&b.tensors) {
            prop_assert_eq!(&t.name, &spec.name);
            prop_assert_eq!(&t.dims, &spec.dims);
            prop_assert_eq!(t.ggml_type.0, spec.ty);
        }
    }

    #[test]
    fn random_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut bytes = b"GGUF\x03\0\0\0".to_vec();
        bytes.extend(tail);
        let _ = read_header(Cursor::new(bytes));
    }

    #[test]
    fn random_corruption_never_panics(
        pos in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut bytes = all_value_types().to_bytes();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        if let Ok(h) = read_header(Cursor::new(bytes)) {
            if let Ok(m) = Model::from_header(Path::new("x"), h) {
                let _ = estimate(&m, &KvSettings::default());
            }
        }
    }
}

// --- files written by the Python gguf package ----------------------------

fn python_fixture(name: &str) -> Model {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gguf");
    open(&dir.join(name)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn reads_files_written_by_the_python_writer() {
    let le = python_fixture("qwen3-0.6b-shape.gguf");
    let be = python_fixture("qwen3-0.6b-shape-be.gguf");
    assert!(be.info().big_endian && !le.info().big_endian);
    assert_eq!(be.tensors(), le.tensors());
    let kv = |m: &Model| estimate(m, &at_ctx(4096)).unwrap().kv;
    assert_eq!(kv(&be), kv(&le));
    assert_eq!(kv(&le).bytes, 448 * MIB);
    assert_eq!(le.info().head_count_kv, Some(PerLayer::Same(8)));

    let mamba = python_fixture("mamba-130m-shape.gguf");
    // no head counts in the file: unknown, not 0
    assert_eq!((mamba.info().head_count.clone(), mamba.info().key_length), (None, None));
    assert_eq!(
        estimate(&mamba, &at_ctx(4096)).unwrap().recurrent_state_bytes,
        Some(2_801_664)
    );

    let split = python_fixture("tiny-split-00002-of-00002.gguf");
    assert_eq!((split.parts().len(), split.tensors().len()), (2, 2));
    assert_eq!(split.metadata().get_u32("qwen3.block_count"), Some(28));
}

#[test]
fn a_header_that_keeps_more_than_the_budget_in_memory_is_refused() {
    // 600 arrays of 4096 u8: 2.4 MB on disk, but ~80 MB as kept values.
    let mut b = Builder::default().str("general.architecture", "llama");
    for i in 0..600 {
        b = b.kv(&format!("bomb.{i}"), arr(ValueType::U8, vec![Value::U8(7); 4096]));
    }
    let bytes = b.to_bytes();
    assert!(bytes.len() < 3 << 20, "{}", bytes.len());
    let err = read_header(Cursor::new(bytes)).unwrap_err().to_string();
    assert!(
        err.contains("metadata and tensor infos kept in memory") && err.contains("67108864"),
        "{err}"
    );
    // A real header's worth of kept metadata and tensors is far below it.
    let mut b = qwen3_0_6b();
    for i in 0..2000 {
        b = b.tensor(&format!("blk.{i}.attn_q.weight"), &[32], 0);
    }
    assert!(read_header(Cursor::new(b.to_bytes())).is_ok());
}

// --- walk limits: sparse files, bytes read, time -----------------------------

/// A deadline no test reaches.
fn far() -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_secs(3600)
}

/// A GGUF header of one string array claiming `count` entries, nothing
/// after it: the zeros that follow read as empty strings.
fn claims_strings(count: u64) -> Vec<u8> {
    let mut bytes = Builder::default()
        .kv("tokenizer.ggml.tokens", arr(ValueType::String, Vec::new()))
        .header_bytes();
    // The array's length is the header's last field.
    let at = bytes.len() - 8;
    bytes[at..].copy_from_slice(&count.to_le_bytes());
    bytes
}

#[cfg(unix)]
#[test]
fn a_sparse_file_is_refused_once_the_walk_reads_past_its_blocks() {
    // 10 GiB claimed, 4 KiB on disk: before, the walk read all 10 GiB of
    // holes as 1.3 billion empty strings (16 s of CPU) and returned a model.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse10g.gguf");
    let size = 10u64 << 30;
    let header = claims_strings((size - 128) / 8);
    std::fs::write(&path, &header).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(size)
        .unwrap();
    let started = std::time::Instant::now();
    let e = open(&path).unwrap_err();
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(1), "took {took:?}");
    let ErrorKind::Sparse { read, on_disk } = *e.kind() else {
        panic!("{e}")
    };
    assert!(on_disk < 1 << 20, "{on_disk}");
    assert!(
        read <= on_disk * walk::SPARSE_FACTOR + walk::SPARSE_SLACK + (64 << 10),
        "{read}"
    );
    assert!(e.to_string().contains("a sparse file, not a model"), "{e}");
}

#[test]
fn a_walk_stops_at_its_byte_cap_and_its_deadline() {
    let mut bytes = claims_strings(1 << 20);
    bytes.resize(bytes.len() + (8 << 20), 0);
    let capped = walk::Limits {
        max_read: 1 << 20,
        ..walk::Limits::unbounded()
    };
    let e = read_header_within(Cursor::new(&bytes), capped).unwrap_err();
    assert_eq!(
        e.kind().to_string(),
        format!(
            "header bytes read of {} bytes is over the reader's limit of 1048576 bytes",
            (1 << 20) + (64 << 10)
        )
    );
    let late = walk::Limits {
        deadline: Some(std::time::Instant::now()),
        ..walk::Limits::unbounded()
    };
    let e = read_header_within(Cursor::new(&bytes), late).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::OutOfTime { read: 0 }), "{e}");
    // Within its limits the same header reads whole.
    assert_eq!(
        read_header_within(Cursor::new(&bytes), walk::Limits::unbounded())
            .unwrap()
            .metadata
            .len(),
        1
    );
}

#[test]
fn a_file_that_is_not_gguf_is_named_without_its_bytes() {
    // /etc/shadow named as a model must not have its first bytes shown.
    let e = error_of(b"root:$6$abc:19000:0:99999:7:::\n".to_vec());
    assert!(matches!(e.kind(), ErrorKind::NotGguf(_)));
    let shown = e.to_string();
    assert_eq!(shown, "at byte 0: not a GGUF file (it does not start with \"GGUF\")");
    for leak in ["72", "6f", "root", "[", "0x"] {
        assert!(!shown.contains(leak), "{shown}");
    }
}
