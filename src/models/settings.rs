//! The settings a model runs with (context, sequences, KV layout and
//! types), each from the most direct source that says it (the runtime's
//! API, its log, the command line, llama.cpp's defaults), with where each
//! was read.

use super::cmdline::LaunchSettings;
use super::logs;
use super::runtimes::llamacpp::ServerState;
use crate::snapshot::{ModelSettings, SettingSource, SettingSources};

/// A setting with where it was read.
type Sourced<T> = Option<(T, SettingSource)>;

/// The first known of `candidates`, strongest source first.
fn first<T, const N: usize>(candidates: [(Option<T>, SettingSource); N]) -> Sourced<T> {
    candidates
        .into_iter()
        .find_map(|(value, source)| value.map(|v| (v, source)))
}

/// llama-server's `-np auto` (the default since PR #16736, November 2025):
/// 4 slots sharing one unified KV cache (tools/server/server.cpp, "n_parallel
/// is set to auto, using n_parallel = 4 and kv_unified = true").
const AUTO_SLOTS: u32 = 4;

/// The settings llama.cpp runs the model with, each from the most direct
/// source: the API (what the server runs now), then the log of its load
/// (`llama_context: n_ctx`, `n_ctx_seq`, `n_seq_max`, `kv_unified`), then
/// the command line, then llama.cpp's defaults, which `notes` names with the
/// version they hold from. The total and per-sequence contexts follow from
/// each other as src/llama-context.cpp derives them: unified, one stream of
/// `n_ctx` cells (`n_ctx_seq = n_ctx`); otherwise `n_ctx = n_ctx_seq ×
/// n_seq_max`. A derived figure carries the weakest source it came from.
/// What only the model file can settle (`-c` absent or 0: the training
/// context; llama.cpp's padding of `-c`) is filled from the estimate.
pub(super) fn resolve_settings(
    launch: &LaunchSettings,
    server: Option<&ServerState>,
    log: Option<&logs::LogReport>,
    notes: &mut Vec<String>,
) -> ModelSettings {
    use SettingSource::{Api, Argv, Default, Log};
    // llama-server's -np -1 is auto, as leaving it out.
    let np_given = launch.parallel.filter(|n| *n > 0);
    // Whether auto applies: the process answered as a llama-server and was
    // not given -np. A bare library user (llama-cli, bindings) gets 1.
    let auto = np_given.is_none() && server.is_some();
    let sequences = first([
        (server.and_then(|s| s.total_slots), Api),
        (log.and_then(|l| l.n_seq_max), Log),
        (np_given, Argv),
    ])
    .or_else(|| {
        notes.push(match auto {
            true => format!("slots assumed: {AUTO_SLOTS}, llama-server's -np auto (since llama.cpp PR #16736, November 2025; 1 before)"),
            false => "sequences assumed: 1, llama.cpp's n_seq_max default (src/llama-context.cpp)".into(),
        });
        Some((if auto { AUTO_SLOTS } else { 1 }, Default))
    });
    // No endpoint says it (see src/models/runtimes/llamacpp.rs).
    let several = sequences.is_some_and(|(n, _)| n > 1);
    let kv_unified = first([(log.and_then(|l| l.kv_unified), Log), (launch.kv_unified, Argv)]).or_else(|| {
        // With one sequence both layouts are the same cache.
        several.then(|| notes.push(match auto {
            true => "kv unified assumed: llama-server's default without -np (since llama.cpp PR #16736, November 2025)".into(),
            false => "kv unified assumed off: one KV stream per sequence, llama.cpp's default since PR #14363 (July 2025); builds before it shared one stream".into(),
        }));
        Some((auto, Default))
    });
    let mut per_seq = first([
        (server.and_then(|s| s.n_ctx_per_slot), Api),
        (log.and_then(|l| l.n_ctx_seq), Log),
    ]);
    let mut total = first([
        (server.and_then(ServerState::reported_total), Api),
        (log.and_then(|l| l.n_ctx), Log),
    ]);
    if let (Some((unified, u_src)), Some((seqs, s_src))) = (kv_unified, sequences) {
        let streams = if unified { 1 } else { u64::from(seqs.max(1)) };
        if let (None, Some((per, p_src))) = (total, per_seq) {
            total = per.checked_mul(streams).map(|t| (t, p_src.max(u_src).max(s_src)));
        }
        if let (None, Some((all, t_src))) = (per_seq, total) {
            per_seq = Some((all / streams, t_src.max(u_src).max(s_src)));
        }
    }
    // `-c` is the total itself (llama.cpp's `n_ctx`, padded later by the
    // estimate); a total derived from a layout that was only assumed is
    // weaker than it: `-c 8192` stays `argv`, not `default`.
    let given = launch.ctx.filter(|c| *c > 0).map(|c| (c, Argv));
    let total = match (total, given) {
        (Some((_, derived)), Some(given)) if derived > Argv => Some(given),
        (total, given) => total.or(given),
    };
    ModelSettings {
        context_total: total.map(|(v, _)| v),
        context_per_seq: per_seq.map(|(v, _)| v),
        sequences: sequences.map(|(v, _)| v),
        kv_unified: kv_unified.map(|(v, _)| v),
        sources: SettingSources {
            context_total: total.map(|(_, s)| s),
            context_per_seq: per_seq.map(|(_, s)| s),
            sequences: sequences.map(|(_, s)| s),
            kv_unified: kv_unified.map(|(_, s)| s),
        },
        cache_type_k: launch.cache_type_k.clone().unwrap_or_else(|| "f16".into()),
        cache_type_v: launch.cache_type_v.clone().unwrap_or_else(|| "f16".into()),
        n_gpu_layers: launch.n_gpu_layers,
        swa_full: launch.swa_full.unwrap_or(false),
        flash_attn: launch.flash_attn.clone(),
        ubatch: launch.ubatch,
        batch: launch.batch,
        no_kv_offload: launch.no_kv_offload,
        override_tensor: launch.override_tensor.clone(),
    }
}

impl ModelSettings {
    /// What llama.cpp makes of settings the server did not report: `-c` 0
    /// or absent is the training context, `-c` is padded to 256 and split
    /// over the sequences (src/llama-context.cpp), as the estimate did.
    pub(super) fn fill_from_estimate(&mut self, kv: &gguf::KvEstimate) {
        let total_source = match self.sources.context_total {
            None | Some(SettingSource::Argv) => self.sources.context_total.or(Some(SettingSource::Default)),
            _ => return,
        };
        self.context_total = Some(u64::from(kv.context));
        self.sources.context_total = total_source;
        if self.context_per_seq.is_none() {
            self.context_per_seq = Some(u64::from(kv.context_per_seq));
            self.sources.context_per_seq = total_source.max(self.sources.kv_unified).max(self.sources.sequences);
        }
    }

    pub(super) fn to_kv(&self) -> gguf::KvSettings {
        let defaults = gguf::KvSettings::default();
        gguf::KvSettings {
            ctx: self.context_total.and_then(|c| u32::try_from(c).ok()),
            n_seq: self.sequences.unwrap_or(1).max(1),
            kv_unified: self.kv_unified.unwrap_or(false),
            type_k: self.cache_type_k.parse().unwrap_or(defaults.type_k),
            type_v: self.cache_type_v.parse().unwrap_or(defaults.type_v),
            n_ubatch: self.ubatch.unwrap_or(defaults.n_ubatch),
            swa_full: self.swa_full,
            flash_attn: self.flash_attn.as_deref() != Some("off"),
            n_gpu_layers: self
                .n_gpu_layers
                .and_then(|n| i32::try_from(n).ok())
                .filter(|n| *n >= 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::cmdline;

    /// The API answered but no log was found: `/props` gives one slot's
    /// context and the slots; the total follows from the layout llama.cpp
    /// defaults to (an explicit -np: separate streams; no -np: one unified
    /// cache), and carries the weakest source it came from.
    #[test]
    fn settings_from_the_api_without_a_log_derive_the_total() {
        let launch =
            |argv: &[&str]| cmdline::parse_launch(&argv.iter().map(|a| a.to_string()).collect::<Vec<_>>(), &[]);
        let state = |per_slot, slots| ServerState {
            n_ctx_per_slot: Some(per_slot),
            n_ctx_meta: Some(per_slot),
            total_slots: Some(slots),
            ..ServerState::default()
        };
        let with_api = |argv: &[&str], (per_slot, slots), notes: &mut Vec<String>| {
            resolve_settings(&launch(argv), Some(&state(per_slot, slots)), None, notes)
        };
        let mut notes = Vec::new();
        let split = with_api(&["llama-server", "-c", "8192", "-np", "2"], (4096, 2), &mut notes);
        assert_eq!(
            (
                split.context_total,
                split.context_per_seq,
                split.sequences,
                split.kv_unified
            ),
            (Some(8192), Some(4096), Some(2), Some(false))
        );
        // The total is what -c says, not the product of an assumed layout.
        assert_eq!(split.sources.context_total, Some(SettingSource::Argv));
        assert_eq!(split.sources.context_per_seq, Some(SettingSource::Api));
        let auto = with_api(&["llama-server", "-c", "4096"], (4096, 4), &mut notes);
        assert_eq!(
            (
                auto.context_total,
                auto.context_per_seq,
                auto.sequences,
                auto.kv_unified
            ),
            (Some(4096), Some(4096), Some(4), Some(true))
        );
        assert!(notes.iter().any(|n| n.contains("PR #16736")), "{notes:?}");
        // As the trial saw it: `-c 8192`, no -np, a llama-server whose
        // /props says 8192 a slot and 4 slots; the total was tagged
        // `default` (derived through the assumed unified layout).
        let trial = with_api(&["llama-server", "-c", "8192"], (8192, 4), &mut notes);
        assert_eq!(
            (trial.context_total, trial.sources.context_total),
            (Some(8192), Some(SettingSource::Argv))
        );
        assert_eq!(trial.sources.context_per_seq, Some(SettingSource::Api));
        // Without -c the derived total keeps the weakest source it came from.
        let derived = with_api(&["llama-server"], (8192, 4), &mut notes);
        assert_eq!(
            (derived.context_total, derived.sources.context_total),
            (Some(8192), Some(SettingSource::Default))
        );
        // The log, where there is one, settles what the API cannot say.
        let log = logs::parse_log("llama_context: n_ctx = 8192\nllama_context: kv_unified = true\n");
        let said = resolve_settings(
            &launch(&["llama-server", "-np", "2"]),
            Some(&state(8192, 2)),
            Some(&log),
            &mut notes,
        );
        assert_eq!((said.context_total, said.kv_unified), (Some(8192), Some(true)));
        assert_eq!(said.sources.kv_unified, Some(SettingSource::Log));
    }
}
