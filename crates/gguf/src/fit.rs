//! What fits on a device: llama.cpp's `--fit` question asked of the
//! estimate. common/fit.cpp (`common_fit_params`) keeps a margin free on
//! each device (`--fit-target`, 1024 MiB by default), shrinks the context
//! first and moves layers off the GPU only when the context cannot shrink
//! enough; the answer here follows that order, with the device side of the
//! estimate: offloaded weights, KV and recurrent state, and the compute
//! buffer. The driver's context is not in it (unknown here).

use crate::compute::{compute, BatchSettings, FlashAttn};
use crate::memory::{estimate, EstimateError, KvSettings};
use crate::model::Model;

/// llama.cpp's default `--fit-target`, per device.
pub const DEFAULT_MARGIN_BYTES: u64 = 1024 << 20;

const CTX_STEP: u32 = 256;

/// The answer for one device.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceFit {
    pub free_bytes: u64,
    pub margin_bytes: u64,
    /// The device side at the settings asked for; `None` when a part is unknown.
    pub needed_bytes: Option<u64>,
    /// `needed_bytes <= free_bytes - margin_bytes`.
    pub fits: Option<bool>,
    /// The largest context (a multiple of 256 up to the training context)
    /// that fits with the layers asked for; `Some(0)` when none does.
    pub context: Option<u32>,
    /// The slots: the count asked for (not searched).
    pub parallel: u32,
    /// The layers to offload (the output layer counting as one): those
    /// asked for when some context fits, else the most that fit at the
    /// context asked for; `Some(0)` when not even one does.
    pub gpu_layers: Option<u32>,
}

/// The device bytes for `kv`: offloaded weights + KV + state + compute.
/// With no layer offloaded the device compute buffer is not modelled.
fn device_bytes(
    model: &Model,
    kv: &KvSettings,
    fa: FlashAttn,
    batch: &BatchSettings,
) -> Result<Option<u64>, EstimateError> {
    let e = estimate(model, kv)?;
    if e.offload.n_gpu_layers == 0 {
        return Ok(None);
    }
    let c = compute(model, kv, fa, batch)?;
    Ok(e.offload.gpu.total().and_then(|b| b.checked_add(c.compute_bytes?)))
}

/// Answers `--fit` for a device with `free_bytes` free now.
pub fn fit_device(
    model: &Model,
    kv: &KvSettings,
    fa: FlashAttn,
    batch: &BatchSettings,
    free_bytes: u64,
    margin_bytes: u64,
) -> Result<DeviceFit, EstimateError> {
    let budget = free_bytes.saturating_sub(margin_bytes);
    let needed_bytes = device_bytes(model, kv, fa, batch)?;
    let fits_at = |s: &KvSettings| -> Result<Option<bool>, EstimateError> {
        Ok(device_bytes(model, s, fa, batch)?.map(|n| n <= budget))
    };
    let train = estimate(
        model,
        &KvSettings {
            ctx: None,
            ..kv.clone()
        },
    )?
    .kv
    .context;
    // Binary search: the device side never shrinks as the context grows.
    // Invariant: contexts of `lo` steps fit (0: none known to), above `hi` do not.
    let (mut lo, mut hi) = (0u32, train / CTX_STEP);
    let mut context = Some(0);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match fits_at(&KvSettings {
            ctx: Some(mid * CTX_STEP),
            ..kv.clone()
        })? {
            None => {
                context = None;
                break;
            }
            Some(true) => lo = mid,
            Some(false) => hi = mid - 1,
        }
    }
    if context.is_some() {
        context = Some(lo * CTX_STEP);
    }
    let asked_layers = estimate(model, kv)?.offload.n_gpu_layers;
    let gpu_layers = match context {
        Some(c) if c > 0 => Some(asked_layers),
        None => None,
        Some(_) => {
            // Layers, fewest first: more layers never need less.
            let mut best = Some(0);
            for n in 1..=asked_layers {
                let s = KvSettings {
                    n_gpu_layers: Some(n as i32),
                    ..kv.clone()
                };
                match fits_at(&s)? {
                    Some(true) => best = Some(n),
                    Some(false) => break,
                    None => {
                        best = None;
                        break;
                    }
                }
            }
            best
        }
    };
    Ok(DeviceFit {
        free_bytes,
        margin_bytes,
        needed_bytes,
        fits: needed_bytes.map(|n| n <= budget),
        context,
        parallel: kv.n_seq,
        gpu_layers,
    })
}
