//! What fits on the GPUs: llama.cpp's `--fit` question asked of the
//! estimate. common/fit.cpp (`common_params_fit_impl`) keeps a margin free
//! on each device (`--fit-target`, 1024 MiB by default), shrinks the
//! context first and moves layers off the GPUs only when the context cannot
//! shrink enough; the answer here follows that order, on every GPU the
//! split uses ([`crate::placement`]), with each GPU's side of the estimate:
//! its weights, KV and recurrent state, and its compute buffer. The
//! driver's context is not in it (unknown here).

use crate::compute::{compute, BatchSettings, FlashAttn};
use crate::memory::{estimate, EstimateError, KvSettings};
use crate::model::Model;
use crate::placement::{place, Split};

/// llama.cpp's default `--fit-target`, per device.
pub const DEFAULT_MARGIN_BYTES: u64 = 1024 << 20;

/// llama.cpp's default `--fit-ctx`: the least context its fit lowers an
/// unset `-c` to (common/common.h `fit_params_min_ctx`).
pub const LLAMA_CPP_FIT_MIN_CONTEXT: u32 = 4096;

/// llama.cpp's `LLAMA_MAX_SEQ` (src/llama-cparams.h): the most sequences.
pub const MAX_PARALLEL: u32 = 256;

const CTX_STEP: u32 = 256;

/// One GPU's check.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GpuFit {
    /// The GPU's own index ([`Split::ids`]).
    pub gpu: u32,
    pub free_bytes: u64,
    /// Its side at the settings asked for; `None` when a part is unknown.
    pub needed_bytes: Option<u64>,
    /// `needed_bytes <= free_bytes - margin_bytes`.
    pub fits: Option<bool>,
}

/// What llama.cpp's own `--fit` (on by default) would do with the same
/// file and flags, by the rules of common/fit.cpp.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LlamaCppFit {
    /// The context it would run with; `None` when it gives up or unknown.
    pub context: Option<u32>,
    /// The `-ngl` it would run with; `None` when it gives up or unknown.
    pub gpu_layers: Option<u32>,
    /// In words.
    pub says: String,
}

/// The answer for the GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceFit {
    /// Every GPU the split uses.
    pub gpus: Vec<GpuFit>,
    /// The GPU with the least room left at the settings asked for (the one
    /// that decides); its free and needed bytes follow.
    pub gpu: Option<u32>,
    pub free_bytes: u64,
    pub margin_bytes: u64,
    pub needed_bytes: Option<u64>,
    /// Every GPU fits.
    pub fits: Option<bool>,
    /// The largest context (a multiple of 256 up to the training context)
    /// that fits with the layers asked for; `Some(0)` when none does.
    pub context: Option<u32>,
    /// The most slots (`-np`, up to 256) such that every count from one up
    /// to it fits at the context asked for, the total context shared among
    /// them as llama-server does; `Some(0)` when not even one does. (With a
    /// cache per slot each slot's cells are padded to 256, so a count can
    /// need more than the next.)
    pub parallel: Option<u32>,
    /// The layers to offload (the output layer counting as one): those
    /// asked for when some context fits, else the most that fit at the
    /// context asked for; `Some(0)` when not even one does.
    pub gpu_layers: Option<u32>,
    pub llama_cpp: LlamaCppFit,
}

/// What is asked: the settings, the split and the GPUs' free memory.
pub struct FitQuery<'a> {
    pub kv: &'a KvSettings,
    pub fa: FlashAttn,
    pub batch: &'a BatchSettings,
    pub split: &'a Split,
    /// Free bytes per GPU, in the order of [`Split::weights`].
    pub free_bytes: &'a [u64],
    pub margin_bytes: u64,
    /// `-ts` came from the user (llama.cpp's fit then leaves the layers).
    pub tensor_split_given: bool,
}

impl FitQuery<'_> {
    /// Each used GPU's side for `kv`: its weights + KV + state + compute.
    fn needs(&self, model: &Model, kv: &KvSettings) -> Result<Vec<(usize, Option<u64>)>, EstimateError> {
        let c = compute(model, kv, self.fa, self.batch)?;
        let placed = place(model, kv, &c, self.split)?;
        Ok(placed
            .gpus
            .iter()
            .map(|g| {
                let need = g.placement.total().and_then(|b| b.checked_add(g.compute_bytes?));
                (g.gpu, need)
            })
            .collect())
    }

    fn budget(&self, gpu: usize) -> u64 {
        self.free_bytes
            .get(gpu)
            .copied()
            .unwrap_or(0)
            .saturating_sub(self.margin_bytes)
    }

    /// Whether every used GPU fits: false when one does not, unknown when
    /// one is unknown and none fails. Settings llama.cpp refuses do not fit.
    fn fits(&self, model: &Model, kv: &KvSettings) -> Result<Option<bool>, EstimateError> {
        let needs = match self.needs(model, kv) {
            Ok(n) => n,
            Err(EstimateError::Settings(_)) => return Ok(Some(false)),
            Err(e) => return Err(e),
        };
        if needs.iter().any(|&(g, n)| n.is_some_and(|n| n > self.budget(g))) {
            return Ok(Some(false));
        }
        Ok(needs.iter().all(|(_, n)| n.is_some()).then_some(true))
    }

    /// The largest multiple of 256 up to `train` that fits: a binary
    /// search, as no GPU's side shrinks when the context grows.
    fn largest_context(&self, model: &Model, kv: &KvSettings, train: u32) -> Result<Option<u32>, EstimateError> {
        // Invariant: `lo` steps fit (0: none known to), above `hi` do not.
        let (mut lo, mut hi) = (0u32, train / CTX_STEP);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let s = KvSettings {
                ctx: Some(mid * CTX_STEP),
                ..kv.clone()
            };
            match self.fits(model, &s)? {
                None => return Ok(None),
                Some(true) => lo = mid,
                Some(false) => hi = mid - 1,
            }
        }
        Ok(Some(lo * CTX_STEP))
    }

    /// The most layers up to `asked` that fit at `kv`'s context, fewest
    /// first: more layers never need less.
    fn most_layers(&self, model: &Model, kv: &KvSettings, asked: u32) -> Result<Option<u32>, EstimateError> {
        let mut best = 0;
        for n in 1..=asked {
            let s = KvSettings {
                n_gpu_layers: Some(n as i32),
                ..kv.clone()
            };
            match self.fits(model, &s)? {
                Some(true) => best = n,
                Some(false) => break,
                None => return Ok(None),
            }
        }
        Ok(Some(best))
    }

    /// The most slots that fit, counting up from one to the first that
    /// does not: the KV cells stay the total context (padded per slot
    /// without `-kvu`), the logits and output rows grow with the slots.
    fn most_parallel(&self, model: &Model) -> Result<Option<u32>, EstimateError> {
        let mut best = 0;
        for n in 1..=MAX_PARALLEL {
            let s = KvSettings {
                n_seq: n,
                ..self.kv.clone()
            };
            match self.fits(model, &s)? {
                Some(true) => best = n,
                Some(false) => break,
                None => return Ok(None),
            }
        }
        Ok(Some(best))
    }
}

/// Answers `--fit` for the GPUs of `q.split`.
pub fn fit_device(model: &Model, q: &FitQuery<'_>) -> Result<DeviceFit, EstimateError> {
    let kv = q.kv;
    let ids = |g: usize| q.split.ids.get(g).copied().unwrap_or(g as u32);
    let needs = q.needs(model, kv)?;
    let gpus: Vec<GpuFit> = needs
        .iter()
        .map(|&(g, need)| GpuFit {
            gpu: ids(g),
            free_bytes: q.free_bytes.get(g).copied().unwrap_or(0),
            needed_bytes: need,
            fits: need.map(|n| n <= q.budget(g)),
        })
        .collect();
    let room = |f: &GpuFit| f.needed_bytes.map(|n| f.free_bytes as i128 - n as i128);
    let tightest = gpus.iter().filter(|f| room(f).is_some()).min_by_key(|f| room(f));
    let fits = q.fits(model, kv)?;
    let train = estimate(
        model,
        &KvSettings {
            ctx: None,
            ..kv.clone()
        },
    )?
    .kv
    .context;
    let context = q.largest_context(model, kv, train)?;
    let asked_layers = estimate(model, kv)?.offload.n_gpu_layers;
    let gpu_layers = match context {
        Some(c) if c > 0 => Some(asked_layers),
        None => None,
        Some(_) => q.most_layers(model, kv, asked_layers)?,
    };
    let llama_cpp = llama_cpp_fit(model, q, fits, context, train, asked_layers)?;
    Ok(DeviceFit {
        gpu: tightest.map(|f| f.gpu),
        free_bytes: tightest.or(gpus.first()).map_or(0, |f| f.free_bytes),
        needed_bytes: tightest.and_then(|f| f.needed_bytes),
        gpus,
        margin_bytes: q.margin_bytes,
        fits,
        context,
        parallel: q.most_parallel(model)?,
        gpu_layers,
        llama_cpp,
    })
}

/// common/fit.cpp's order: nothing changes when every device fits; an
/// unset `-c` is lowered (interpolated between the training context and
/// `--fit-ctx` 4096, rounded down to 256), one the user set is kept; then
/// layers move to the CPU, unless the user set `-ngl`, `-ts` (several
/// GPUs), `-sm row` or `-ot`, where it gives up and loads as asked.
fn llama_cpp_fit(
    model: &Model,
    q: &FitQuery<'_>,
    fits: Option<bool>,
    largest: Option<u32>,
    train: u32,
    asked_layers: u32,
) -> Result<LlamaCppFit, EstimateError> {
    let asked_ctx = estimate(model, q.kv)?.kv.context;
    let unknown = |says: &str| LlamaCppFit {
        context: None,
        gpu_layers: None,
        says: says.to_string(),
    };
    match fits {
        None => return Ok(unknown("unknown: a part of a GPU's estimate is unknown")),
        Some(true) => {
            return Ok(LlamaCppFit {
                context: Some(asked_ctx),
                gpu_layers: Some(asked_layers),
                says: "no changes: every GPU keeps its margin".into(),
            })
        }
        Some(false) => {}
    }
    let ctx_set = q.kv.ctx.is_some_and(|c| c > 0);
    let floor = LLAMA_CPP_FIT_MIN_CONTEXT.min(train);
    if !ctx_set {
        match largest {
            None => return Ok(unknown("unknown: a part of a GPU's estimate is unknown")),
            Some(c) if c >= floor => {
                return Ok(LlamaCppFit {
                    context: Some(c),
                    gpu_layers: Some(asked_layers),
                    says: format!(
                        "lowers the context to about {c} (it interpolates between {train} and {floor} and may pick a little less)"
                    ),
                })
            }
            Some(_) => {}
        }
    }
    let ctx = if ctx_set { asked_ctx } else { floor };
    let why_kept = if ctx_set {
        format!("keeps -c {ctx} (set by you)")
    } else {
        format!("lowers the context to {floor} (--fit-ctx)")
    };
    let user_set = [
        (q.kv.n_gpu_layers.is_some(), "-ngl"),
        (q.tensor_split_given && q.split.weights.len() > 1, "-ts"),
        (
            q.split.mode == crate::placement::SplitMode::Row && q.split.weights.len() > 1,
            "-sm row",
        ),
        (q.split.host_pattern.is_some(), "-ot"),
    ];
    if let Some((_, flag)) = user_set.iter().find(|(set, _)| *set) {
        return Ok(LlamaCppFit {
            context: Some(ctx),
            gpu_layers: Some(asked_layers),
            says: format!("{why_kept}, then gives up ({flag} set by you) and loads as asked: it would not fit"),
        });
    }
    let at_ctx = KvSettings {
        ctx: Some(ctx),
        ..q.kv.clone()
    };
    let layers = q.most_layers(model, &at_ctx, asked_layers)?;
    let moe = model.tensors().iter().any(|t| t.name.contains("_exps"));
    Ok(LlamaCppFit {
        context: Some(ctx),
        gpu_layers: layers,
        says: format!(
            "{why_kept}, then moves layers to the CPU: -ngl {}{}",
            layers.map_or_else(|| "n/a".to_string(), |l| l.to_string()),
            if moe {
                " (for a mixture of experts it first keeps the expert tensors in system memory: not modelled here)"
            } else {
                ""
            }
        ),
    })
}
