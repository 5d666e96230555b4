//! The real gemma-3-270m Q4_K_M file (253 MB), found through
//! GPUTASKMAN_GEMMA_GGUF. Expected values are llama-server's own log for
//! `-c 4096` with its default 4 slots sharing a unified cache
//! (/work/shared/reference/llama-server/server.log).

use gguf::{estimate, open, CacheKind, Kind, KvSettings};

const MIB: u64 = 1 << 20;

#[test]
fn gemma_3_270m_matches_llama_server() {
    let Some(path) = std::env::var_os("GPUTASKMAN_GEMMA_GGUF") else {
        eprintln!("SKIPPED gemma_3_270m_matches_llama_server: GPUTASKMAN_GEMMA_GGUF is not set");
        return;
    };
    let model = open(path.as_ref()).expect("the gemma file opens");
    let info = model.info();
    assert_eq!(info.architecture.as_deref(), Some("gemma3"));
    assert_eq!(info.name.as_deref(), Some("Gemma 3 270m"));
    assert_eq!(info.size_label.as_deref(), Some("270M"));
    assert_eq!(info.kind, Kind::Llm);
    assert_eq!(info.params, Some(268_098_176));
    assert_eq!(info.tensors, 236);
    assert_eq!(model.metadata().len(), 33);
    let ft = info.file_type.clone().unwrap();
    assert_eq!((ft.name, ft.guessed), (Some("Q4_K - Medium"), false));
    // llama.cpp: "file size = 235.16 MiB (7.36 BPW)"
    let weights = info.weights_bytes.unwrap();
    assert_eq!(format!("{:.2}", weights as f64 / MIB as f64), "235.16");
    assert_eq!(format!("{:.2}", info.bits_per_weight.unwrap()), "7.36");
    assert_eq!((info.layers, info.context_train), (Some(18), Some(32768)));

    let settings = KvSettings {
        ctx: Some(4096),
        n_seq: 4,
        kv_unified: true,
        ..KvSettings::default()
    };
    let e = estimate(&model, &settings).unwrap();
    let full = e.kv.caches.iter().find(|c| c.kind == CacheKind::Full).unwrap();
    assert_eq!((full.cells, full.layers, full.bytes), (4096, 3, 12 * MIB));
    let swa = e.kv.caches.iter().find(|c| c.kind == CacheKind::Swa).unwrap();
    assert_eq!((swa.cells, swa.layers), (2560, 15));
    assert_eq!(swa.bytes, 37 * MIB + MIB / 2);
}
