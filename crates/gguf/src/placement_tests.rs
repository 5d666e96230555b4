//! Tests of the multi-GPU placement and of `--fit` across GPUs, on a
//! Qwen3-0.6B shape (28 layers, tied embeddings, 16 MiB of f16 KV per
//! layer at 4096 cells) whose per-layer tensor is one 4 KiB norm.

use crate::placement::layer_counts;
use crate::*;

const MIB: u64 = 1 << 20;
const F32: u32 = 0;
const NORM: u64 = 1024 * 4;
const EMBD: u64 = 1024 * 151936 * 4;
const KV_LAYER: u64 = 16 * MIB;

fn qwen3() -> Model {
    let mut b = crate::compute_tests::qwen3().tensor("output_norm.weight", &[1024], F32);
    for il in 0..28 {
        b = b.tensor(&format!("blk.{il}.attn_norm.weight"), &[1024], F32);
    }
    b.open()
}

fn kv(ctx: u32) -> KvSettings {
    KvSettings {
        ctx: Some(ctx),
        ..KvSettings::default()
    }
}

fn cuda() -> BatchSettings {
    BatchSettings {
        backend: Backend::Cuda,
        ..BatchSettings::default()
    }
}

fn split(mode: SplitMode, weights: &[f64]) -> Split {
    Split {
        mode,
        weights: weights.to_vec(),
        ids: (0..weights.len() as u32).map(|i| i + 4).collect(),
        ..Split::default()
    }
}

fn placed(m: &Model, s: &Split) -> (Placed, ComputeEstimate) {
    let c = compute(m, &kv(4096), FlashAttn::On, &cuda()).unwrap();
    (place(m, &kv(4096), &c, s).unwrap(), c)
}

#[test]
fn layers_go_to_gpus_by_cumulative_fractions_as_llama_cpp_does() {
    // 29 slots (28 layers + output) over 8 equal GPUs: GPU k takes the
    // steps s with k/8 <= s/29 < (k+1)/8.
    assert_eq!(layer_counts(28, 29, &[1.0; 8]), vec![4, 4, 3, 4, 4, 3, 4, 3]);
    // -ts 3,1 on 19 slots: steps below 0.75 x 19 = 14.25 on the first.
    assert_eq!(layer_counts(18, 19, &[3.0, 1.0]), vec![15, 4]);
    // By free memory, any scale: 60 GiB and 20 GiB free is 3:1.
    assert_eq!(layer_counts(18, 19, &[60e9, 20e9]), vec![15, 4]);
    // -ngl 10: only the 10 offloaded slots are shared.
    assert_eq!(layer_counts(28, 10, &[1.0, 1.0]), vec![5, 5]);
    assert_eq!(layer_counts(28, 0, &[1.0, 1.0]), vec![0, 0]);
    // A share of 0 gets nothing.
    assert_eq!(layer_counts(28, 29, &[1.0, 0.0, 1.0]), vec![15, 0, 14]);
}

#[test]
fn layer_split_gives_each_gpu_its_layers_kv_and_compute() {
    let m = qwen3();
    let (p, c) = placed(&m, &split(SplitMode::Layer, &[1.0, 1.0]));
    assert_eq!(p.gpus.len(), 2);
    let (a, b) = (&p.gpus[0], &p.gpus[1]);
    // 29 slots: steps 0..14 (layers 0-14) on the first, layers 15-27 and
    // the output on the second.
    assert_eq!((a.layers, b.layers), (15, 14));
    assert_eq!((a.holds_output, b.holds_output), (false, true));
    assert_eq!(a.placement.kv_bytes, 15 * KV_LAYER);
    assert_eq!(b.placement.kv_bytes, 13 * KV_LAYER);
    assert_eq!(a.placement.weights_bytes, Some(15 * NORM));
    // The output norm and the tied output's copy of the embeddings.
    assert_eq!(b.placement.weights_bytes, Some(13 * NORM + NORM + EMBD));
    assert_eq!(p.host.weights_bytes, Some(EMBD));
    assert_eq!(p.host.kv_bytes, 0);
    // The logits are reserved where the output layer is.
    assert_eq!(b.compute_bytes, c.compute_bytes);
    let no_logits = c.attention_bytes.unwrap_or(0).max(c.feed_forward_bytes.unwrap());
    assert_eq!(a.compute_bytes, Some(no_logits));
    assert!(p.pipeline_parallel);
    // Together they are the one-GPU placement.
    let (one, _) = placed(&m, &split(SplitMode::Layer, &[1.0]));
    assert_eq!(one.gpus[0].placement.kv_bytes, 28 * KV_LAYER);
    assert_eq!(one.gpus[0].placement.weights_bytes, Some(29 * NORM + EMBD));
    assert!(!one.pipeline_parallel);
}

#[test]
fn row_split_shares_the_matrices_and_keeps_kv_on_the_main_gpu() {
    let m = qwen3();
    let mut s = split(SplitMode::Row, &[3.0, 1.0]);
    s.main_gpu = 1;
    let (p, c) = placed(&m, &s);
    let all = 29 * NORM + EMBD;
    assert_eq!(p.gpus[0].placement.weights_bytes, Some((all as f64 * 0.75) as u64));
    assert_eq!(p.gpus[1].placement.weights_bytes, Some((all as f64 * 0.25) as u64));
    assert_eq!(
        (p.gpus[0].placement.kv_bytes, p.gpus[1].placement.kv_bytes),
        (0, 28 * KV_LAYER)
    );
    assert_eq!(p.gpus[1].compute_bytes, c.compute_bytes);
    // The other GPU's share of the intermediate results is not modelled.
    assert_eq!(p.gpus[0].compute_bytes, None);
    assert!(!p.pipeline_parallel);
}

#[test]
fn split_mode_none_uses_the_main_gpu_only() {
    let m = qwen3();
    let mut s = split(SplitMode::None, &[1.0, 1.0, 1.0]);
    s.main_gpu = 2;
    let (p, _) = placed(&m, &s);
    assert_eq!(p.gpus.len(), 1);
    assert_eq!((p.gpus[0].gpu, p.gpus[0].layers), (2, 29));
    assert_eq!(p.gpus[0].placement.kv_bytes, 28 * KV_LAYER);
}

#[test]
fn fit_checks_every_gpu_and_names_the_one_that_decides() {
    let m = qwen3();
    let s = split(SplitMode::Layer, &[1.0, 1.0]);
    let (p, _) = placed(&m, &s);
    let need = |i: usize| p.gpus[i].placement.total().unwrap() + p.gpus[i].compute_bytes.unwrap();
    let margin = 1024 * MIB;
    let fit = |free: &[u64]| {
        fit_device(
            &m,
            &FitQuery {
                kv: &kv(4096),
                fa: FlashAttn::On,
                batch: &cuda(),
                split: &s,
                free_bytes: free,
                margin_bytes: margin,
                tensor_split_given: false,
            },
        )
        .unwrap()
    };
    // Both exactly at their need plus the margin: fits.
    let f = fit(&[need(0) + margin, need(1) + margin]);
    assert_eq!(f.fits, Some(true));
    assert_eq!(f.gpus.iter().map(|g| g.gpu).collect::<Vec<_>>(), vec![4, 5]);
    assert_eq!(f.llama_cpp.says, "no changes: every GPU keeps its margin");
    // One byte less on the second: it does not, and the second is named
    // however roomy the first is.
    let f = fit(&[u64::MAX / 4, need(1) + margin - 1]);
    assert_eq!(f.fits, Some(false));
    assert_eq!((f.gpu, f.needed_bytes), (Some(5), Some(need(1))));
    assert_eq!(f.gpus[0].fits, Some(true));
    assert_eq!(f.gpus[1].fits, Some(false));
    // The context that fits is below 4096 then, and -c was set: llama.cpp
    // keeps it and moves layers off.
    assert!(f.context.unwrap() < 4096, "{f:?}");
    assert!(
        f.llama_cpp
            .says
            .starts_with("keeps -c 4096 (set by you), then moves layers to the CPU"),
        "{}",
        f.llama_cpp.says
    );
}

#[test]
fn fit_parallel_is_the_most_slots_at_the_context() {
    let m = qwen3();
    let s = split(SplitMode::Layer, &[1.0]);
    let margin = 0;
    let at = |n_seq: u32| {
        let k = KvSettings {
            n_seq,
            kv_unified: true,
            ..kv(4096)
        };
        let c = compute(&m, &k, FlashAttn::On, &cuda()).unwrap();
        let p = place(&m, &k, &c, &s).unwrap();
        p.gpus[0].placement.total().unwrap() + p.gpus[0].compute_bytes.unwrap()
    };
    // One cache for all (llama-server's default with -np auto), so only
    // the slots' logits rows grow: they outgrow the feed-forward block past some
    // count: room for exactly that many, not one more.
    let n = (1..256).find(|&n| at(n + 1) > at(n)).unwrap();
    assert!(n > 40, "{n}");
    let free = at(n);
    let unified = KvSettings {
        kv_unified: true,
        ..kv(4096)
    };
    let f = fit_device(
        &m,
        &FitQuery {
            kv: &unified,
            fa: FlashAttn::On,
            batch: &cuda(),
            split: &s,
            free_bytes: &[free],
            margin_bytes: margin,
            tensor_split_given: false,
        },
    )
    .unwrap();
    assert_eq!(f.parallel, Some(n));
}
