//! What a model server that serves a Hugging Face model (SGLang, TGI) says
//! of its model, its KV pool and its work, in the figures the two share.
//! Each is null where the server does not say it, never 0; `names` keeps
//! the runtime's own word for each figure and where it was read.

use super::as_count;

/// Bytes of one GiB: SGLang's "GB" (sglang/srt/utils.py
/// `get_available_gpu_memory`, `/ (1 << 30)`; mem_cache/memory_pool.py
/// `GB = 1024 * 1024 * 1024`).
pub const GIB: f64 = (1u64 << 30) as f64;

/// The server's figures of its model and pool, from its API or its log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerFigures {
    /// What it loaded: a folder here or a hub id (SGLang `model_path`,
    /// TGI `model_id`).
    pub model: Option<String>,
    /// The name clients ask for (SGLang `served_model_name`).
    pub served_name: Option<String>,
    /// The weights' dtype as it runs them, and the KV cache's.
    pub dtype: Option<String>,
    pub kv_dtype: Option<String>,
    /// The longest request in tokens (`max_model_len` in the snapshot).
    pub context: Option<u64>,
    /// Tokens its KV pool holds, and the pool's blocks where it has them.
    pub kv_tokens: Option<u64>,
    pub kv_blocks: Option<u64>,
    pub kv_block_size: Option<u64>,
    /// The share of the device's memory it claims (SGLang
    /// `mem_fraction_static`).
    pub memory_utilization: Option<f64>,
    /// Memory it says the weights, the KV pool and its graphs took.
    pub weights_bytes: Option<u64>,
    pub kv_bytes: Option<u64>,
    pub graph_bytes: Option<u64>,
    /// `field: where, in the runtime's words`.
    pub names: Vec<String>,
}

impl ServerFigures {
    /// Names where `field` came from, once.
    pub fn name(&mut self, field: &str, from: &str) {
        let line = format!("{field}: {from}");
        if !self.names.contains(&line) {
            self.names.push(line);
        }
    }

    /// Fills the pool's and the memory's figures `self` lacks from `other`
    /// (a log under an API's answer), with `other`'s names for them.
    pub fn fill_from(&mut self, other: &ServerFigures) {
        fn take<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>) -> bool {
            let taken = mine.is_none() && theirs.is_some();
            if taken {
                mine.clone_from(theirs);
            }
            taken
        }
        let mut taken = Vec::new();
        let mut fill = |field: &str, took: bool| {
            if took {
                taken.push(field.to_string());
            }
        };
        fill("max_model_len", take(&mut self.context, &other.context));
        fill("kv_tokens", take(&mut self.kv_tokens, &other.kv_tokens));
        fill("kv_blocks", take(&mut self.kv_blocks, &other.kv_blocks));
        fill("kv_block_size", take(&mut self.kv_block_size, &other.kv_block_size));
        fill(
            "reported.weights_bytes",
            take(&mut self.weights_bytes, &other.weights_bytes),
        );
        fill("reported.kv_bytes", take(&mut self.kv_bytes, &other.kv_bytes));
        fill(
            "reported.compute_bytes",
            take(&mut self.graph_bytes, &other.graph_bytes),
        );
        for field in taken {
            let prefix = format!("{field}: ");
            if let Some(line) = other.names.iter().find(|n| n.starts_with(&prefix)) {
                self.names.push(line.clone());
            }
        }
    }
}

/// What the server is doing, from its `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerWork {
    pub requests_running: Option<u64>,
    pub requests_waiting: Option<u64>,
    /// Share of the KV pool in use, 0 to 1.
    pub kv_used_ratio: Option<f64>,
    /// Prompt and generated tokens since it started.
    pub prompt_tokens: Option<u64>,
    pub generation_tokens: Option<u64>,
    /// Whether those totals move while a request runs (SGLang's
    /// `realtime_tokens_total`, 0.5.10+, each batch's tokens as it runs
    /// them) or only when it ends (SGLang's `prompt_tokens_total` and
    /// `generation_tokens_total`, TGI's per-request histograms): rates are
    /// taken only from the first kind.
    pub counts_in_flight: bool,
    pub prefix_cache_hit_ratio: Option<f64>,
}

/// GiB as the runtime prints them (`1.06`) in bytes; None for what is not
/// a plausible size: negative (SGLang's figures are drops in free memory,
/// and a docs build recorded `weight: -6.94`), not finite, over 1 PiB.
pub fn gib_bytes(gib: f64) -> Option<u64> {
    (gib.is_finite() && (0.0..=(1u64 << 20) as f64).contains(&gib)).then(|| (gib * GIB).round() as u64)
}

/// A Prometheus value over several series of one name: the ranks of one
/// engine repeat the same figure (tensor-parallel ranks), so within an
/// engine (its other labels: `dp_rank`, `engine_type`, ...) the highest
/// counts; engines serve apart and add.
#[derive(Default)]
pub(crate) struct RankSum {
    by_engine: Vec<(String, u64)>,
}

impl RankSum {
    pub(crate) fn add(&mut self, engine: &str, value: f64) {
        let Some(n) = as_count(value) else { return };
        match self.by_engine.iter_mut().find(|(e, _)| e == engine) {
            Some((_, highest)) => *highest = (*highest).max(n),
            None => self.by_engine.push((engine.to_string(), n)),
        }
    }

    pub(crate) fn total(&self) -> Option<u64> {
        (!self.by_engine.is_empty()).then(|| self.by_engine.iter().fold(0u64, |t, (_, n)| t.saturating_add(*n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gib_figures_that_are_not_sizes_are_unknown() {
        assert_eq!(gib_bytes(1.06), Some(1_138_166_333));
        assert_eq!(gib_bytes(0.0), Some(0));
        assert_eq!(gib_bytes(-6.94), None);
        assert_eq!(gib_bytes(f64::NAN), None);
        assert_eq!(gib_bytes(f64::INFINITY), None);
        assert_eq!(gib_bytes(2e6), None);
    }

    #[test]
    fn ranks_of_one_engine_repeat_and_engines_add() {
        let mut sum = RankSum::default();
        assert_eq!(sum.total(), None);
        sum.add("", 3.0);
        sum.add("", 5.0);
        assert_eq!(sum.total(), Some(5), "tensor-parallel ranks repeat one figure");
        let mut dp = RankSum::default();
        for (rank, value) in [("0", 2.0), ("0", 2.0), ("1", 4.0), ("1", f64::NAN), ("2", -1.0)] {
            dp.add(rank, value);
        }
        assert_eq!(dp.total(), Some(6));
    }

    #[test]
    fn a_log_fills_what_the_api_left_unknown_with_its_names() {
        let mut api = ServerFigures {
            kv_tokens: Some(20480),
            ..ServerFigures::default()
        };
        api.name("kv_tokens", "/server_info max_total_num_tokens");
        let mut log = ServerFigures {
            kv_tokens: Some(1),
            kv_bytes: Some(7),
            ..ServerFigures::default()
        };
        log.name("kv_tokens", "log \"#tokens\"");
        log.name("reported.kv_bytes", "log \"K size\" + \"V size\"");
        api.fill_from(&log);
        assert_eq!((api.kv_tokens, api.kv_bytes), (Some(20480), Some(7)));
        assert_eq!(
            api.names,
            [
                "kv_tokens: /server_info max_total_num_tokens",
                "reported.kv_bytes: log \"K size\" + \"V size\""
            ]
        );
    }
}
