//! llama.cpp's `llama-server` API (tools/server/README.md and
//! tools/server/server-context.cpp): `/props`, `/slots`, `/v1/models`,
//! `/metrics` (with `--metrics`).
//!
//! Context, as real servers report it (xllamacpp 2026.10 and the recorded
//! reference server): `/props` `default_generation_settings.n_ctx`, each
//! `/slots[].n_ctx` and `/v1/models` `meta.n_ctx` are all the context of ONE
//! slot, llama.cpp's `n_ctx_seq` (tools/server/server-context.cpp takes it
//! from `llama_n_ctx_seq`): 4096 for `-c 8192 -np 2`, whose cache holds 8192
//! cells in two streams. Builds of 2024 put the whole `llama_n_ctx` in
//! `meta.n_ctx`, so a `meta.n_ctx` above one slot's is the total
//! ([`ServerState::reported_total`]). No endpoint says whether the cache is
//! unified; the log does (`llama_context: kv_unified = false`).

use super::{as_count, convert, lenient, lenient_vec, parse_array, parse_data_list, parse_object, parse_prometheus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `GET /props`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Props {
    pub model_path: Option<String>,
    pub model_alias: Option<String>,
    /// The file type as llama.cpp names it (`Q4_K - Medium`).
    pub model_ftype: Option<String>,
    /// `default_generation_settings.n_ctx`: the context of one slot.
    pub n_ctx_per_slot: Option<u64>,
    pub total_slots: Option<u32>,
    pub build_info: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawProps {
    #[serde(deserialize_with = "lenient")]
    default_generation_settings: Option<RawGenerationSettings>,
    #[serde(deserialize_with = "lenient")]
    total_slots: Option<u32>,
    #[serde(deserialize_with = "lenient")]
    model_path: Option<String>,
    #[serde(deserialize_with = "lenient")]
    model_alias: Option<String>,
    #[serde(deserialize_with = "lenient")]
    model_ftype: Option<String>,
    #[serde(deserialize_with = "lenient")]
    build_info: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawGenerationSettings {
    #[serde(deserialize_with = "lenient")]
    n_ctx: Option<u64>,
    /// Builds of 2024 put the model path here instead of a top-level field.
    #[serde(deserialize_with = "lenient")]
    model: Option<String>,
}

pub fn parse_props(body: &[u8]) -> Result<Props, String> {
    let raw: RawProps = parse_object(body, "llama-server /props")?;
    let settings = raw.default_generation_settings.unwrap_or_default();
    Ok(Props {
        model_path: raw.model_path.or(settings.model),
        model_alias: raw.model_alias,
        model_ftype: raw.model_ftype,
        n_ctx_per_slot: settings.n_ctx,
        total_slots: raw.total_slots,
        build_info: raw.build_info,
    })
}

/// One entry of `GET /slots`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Slot {
    pub id: Option<u32>,
    /// This slot's context.
    pub n_ctx: Option<u64>,
    /// Generating or processing a prompt now.
    pub is_processing: Option<bool>,
    /// The request this slot works on (`id_task`), while processing.
    pub id_task: Option<u64>,
    /// Prompt tokens of that request processed so far.
    pub n_prompt_tokens_processed: Option<u64>,
    /// Tokens generated for that request so far (`next_token[0].n_decoded`).
    pub n_decoded: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawSlot {
    #[serde(deserialize_with = "lenient")]
    id: Option<u32>,
    #[serde(deserialize_with = "lenient")]
    n_ctx: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    is_processing: Option<bool>,
    /// Before `is_processing` (2024): 0 idle, anything else busy.
    #[serde(deserialize_with = "lenient")]
    state: Option<u32>,
    #[serde(deserialize_with = "lenient")]
    id_task: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    n_prompt_tokens_processed: Option<u64>,
    #[serde(deserialize_with = "lenient_vec")]
    next_token: Vec<RawNextToken>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawNextToken {
    #[serde(deserialize_with = "lenient")]
    n_decoded: Option<u64>,
}

/// What the requests in flight have done that llama-server's counters do
/// not hold yet. Its server adds a request's prompt tokens to
/// `prompt_tokens_total` when the prompt is done, as the first token is
/// sampled (`n_decoded` still 0), and its generated tokens to
/// `tokens_predicted_total` when the request ends (tools/server:
/// `server_metrics::on_prompt_eval`, `on_prediction`). So counters plus
/// these are totals that move with every token, and a rate over a short
/// window is right while long requests run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InFlight {
    /// Prompt tokens processed of the requests still in their prompt.
    pub prompt: u64,
    /// Tokens generated so far by the requests in flight.
    pub generated: u64,
}

impl InFlight {
    /// `None` when a busy slot does not say how far it is (older builds).
    fn of(slots: &[Slot]) -> Option<InFlight> {
        let mut in_flight = InFlight::default();
        for slot in slots.iter().filter(|s| s.is_processing == Some(true)) {
            let decoded = slot.n_decoded?;
            if decoded == 0 {
                in_flight.prompt = in_flight.prompt.saturating_add(slot.n_prompt_tokens_processed?);
            }
            in_flight.generated = in_flight.generated.saturating_add(decoded);
        }
        Some(in_flight)
    }
}

/// `GET /slots` (needs `--slots` in older builds; on by default since 2025).
pub fn parse_slots(body: &[u8]) -> Result<Vec<Slot>, String> {
    let items: Vec<Value> = parse_array(body, "llama-server /slots")?;
    Ok(items
        .into_iter()
        .filter_map(convert::<RawSlot>)
        .map(|raw| Slot {
            id: raw.id,
            n_ctx: raw.n_ctx,
            is_processing: raw.is_processing.or(raw.state.map(|state| state != 0)),
            id_task: raw.id_task,
            n_prompt_tokens_processed: raw.n_prompt_tokens_processed,
            n_decoded: raw.next_token.first().and_then(|t| t.n_decoded),
        })
        .collect())
}

/// One entry of `GET /v1/models` `data[]`, with llama-server's `meta`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct V1Model {
    pub id: Option<String>,
    /// Router mode (`--models-dir`) lists models that are not loaded:
    /// `loaded`, `unloaded`, `loading`. Absent for a single-model server.
    pub status: Option<String>,
    /// `meta.n_ctx`: one slot's context in current builds, the whole
    /// context in 2024's.
    pub n_ctx: Option<u64>,
    pub n_ctx_train: Option<u64>,
    pub n_params: Option<u64>,
    /// Bytes of the model's tensors (`meta.size`).
    pub size_bytes: Option<u64>,
    pub n_vocab: Option<u64>,
    pub n_embd: Option<u64>,
    pub ftype: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawV1Model {
    #[serde(deserialize_with = "lenient")]
    id: Option<String>,
    status: Option<Value>,
    #[serde(deserialize_with = "lenient")]
    meta: Option<RawMeta>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawMeta {
    #[serde(deserialize_with = "lenient")]
    n_ctx: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    n_ctx_train: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    n_params: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    size: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    n_vocab: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    n_embd: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    ftype: Option<String>,
}

/// `GET /v1/models` (also served as `/models`).
pub fn parse_v1_models(body: &[u8]) -> Result<Vec<V1Model>, String> {
    Ok(parse_data_list::<RawV1Model>(body, "llama-server /v1/models")?
        .into_iter()
        .map(|model| {
            let meta = model.meta.unwrap_or_default();
            // `"status": {"value": "loaded"}` in router mode; a bare string
            // is read too.
            let status = model
                .status
                .as_ref()
                .and_then(|status| status.get("value").unwrap_or(status).as_str().map(String::from));
            V1Model {
                id: model.id,
                status,
                n_ctx: meta.n_ctx,
                n_ctx_train: meta.n_ctx_train,
                n_params: meta.n_params,
                size_bytes: meta.size,
                n_vocab: meta.n_vocab,
                n_embd: meta.n_embd,
                ftype: meta.ftype,
            }
        })
        .collect())
}

/// The gauges of `GET /metrics` that say how busy the server is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// `llamacpp:requests_processing`: slots working now.
    pub requests_processing: Option<u64>,
    /// `llamacpp:requests_deferred`: requests waiting for a slot.
    pub requests_deferred: Option<u64>,
    /// `llamacpp:n_tokens_max`: the longest sequence seen (prompt + output).
    pub n_tokens_max: Option<u64>,
    /// `llamacpp:kv_cache_usage_ratio`, 0..1; removed from llama.cpp in
    /// May 2025, so usually absent.
    pub kv_cache_usage_ratio: Option<f64>,
    /// `llamacpp:prompt_tokens_total`: prompt tokens processed (a counter;
    /// tools/server/server-context.cpp).
    pub prompt_tokens_total: Option<u64>,
    /// `llamacpp:tokens_predicted_total`: tokens generated (a counter).
    pub tokens_predicted_total: Option<u64>,
}

/// `GET /metrics`, Prometheus text.
pub fn parse_metrics(text: &str) -> Result<Metrics, String> {
    let mut metrics = Metrics::default();
    for sample in parse_prometheus(text)? {
        match sample.name.as_str() {
            "llamacpp:requests_processing" => metrics.requests_processing = as_count(sample.value),
            "llamacpp:requests_deferred" => metrics.requests_deferred = as_count(sample.value),
            "llamacpp:n_tokens_max" => metrics.n_tokens_max = as_count(sample.value),
            "llamacpp:prompt_tokens_total" => metrics.prompt_tokens_total = as_count(sample.value),
            "llamacpp:tokens_predicted_total" => metrics.tokens_predicted_total = as_count(sample.value),
            "llamacpp:kv_cache_usage_ratio" => {
                metrics.kv_cache_usage_ratio = Some(sample.value).filter(|r| (0.0..=1.0).contains(r))
            }
            _ => {}
        }
    }
    Ok(metrics)
}

/// What one llama-server says about itself, merged from its endpoints.
/// Every field is what the server reported; unknown stays `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerState {
    pub model_path: Option<String>,
    pub model_alias: Option<String>,
    pub model_ftype: Option<String>,
    /// Context of one slot (`/props`, else `/slots`).
    pub n_ctx_per_slot: Option<u64>,
    /// `/v1/models` `meta.n_ctx`: see [`ServerState::reported_total`].
    pub n_ctx_meta: Option<u64>,
    pub total_slots: Option<u32>,
    /// Slots processing now (`/slots`).
    pub slots_busy: Option<u32>,
    pub n_params: Option<u64>,
    pub size_bytes: Option<u64>,
    pub n_ctx_train: Option<u64>,
    pub build_info: Option<String>,
    pub requests_processing: Option<u64>,
    pub requests_deferred: Option<u64>,
    pub n_tokens_max: Option<u64>,
    pub kv_cache_usage_ratio: Option<f64>,
    pub prompt_tokens_total: Option<u64>,
    pub tokens_predicted_total: Option<u64>,
    /// Tokens of the requests in flight (`/slots`) that the counters above
    /// do not hold yet: see [`InFlight`].
    #[serde(skip)]
    pub in_flight: Option<InFlight>,
    /// Figures the server reported that were not believed, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// llama.cpp's LLAMA_MAX_SEQ (src/llama-cparams.h): a server has at most
/// this many slots (`-np`), so a larger count is broken or hostile.
const MAX_SLOTS: u64 = 256;

/// Sets `slot` when `value` is known; with `keep`, only if `slot` is unknown.
fn fill<T: Clone>(slot: &mut Option<T>, value: &Option<T>, keep: bool) {
    if value.is_some() && !(keep && slot.is_some()) {
        slot.clone_from(value);
    }
}

impl ServerState {
    /// `/props` is the first authority on the model, context and slots.
    pub fn merge_props(&mut self, props: &Props) {
        fill(&mut self.model_path, &props.model_path, false);
        fill(&mut self.model_alias, &props.model_alias, false);
        fill(&mut self.model_ftype, &props.model_ftype, false);
        fill(&mut self.n_ctx_per_slot, &props.n_ctx_per_slot, false);
        match props.total_slots {
            Some(n) if u64::from(n) > MAX_SLOTS => self.notes.push(format!(
                "llama-server /props total_slots {n} is over llama.cpp's limit of {MAX_SLOTS} slots; ignored"
            )),
            n => fill(&mut self.total_slots, &n, false),
        }
        fill(&mut self.build_info, &props.build_info, false);
    }

    /// `/slots` gives the busy count, and slot context and count when
    /// `/props` did not; a `/props` count above the slots listed gives way
    /// to the list, which holds every slot.
    pub fn merge_slots(&mut self, slots: &[Slot]) {
        let per_slot = slots.iter().filter_map(|s| s.n_ctx).max();
        fill(&mut self.n_ctx_per_slot, &per_slot, true);
        let listed = slots.len();
        if listed as u64 > MAX_SLOTS {
            self.notes.push(format!(
                "llama-server /slots lists {listed} slots, over llama.cpp's limit of {MAX_SLOTS}; ignored"
            ));
        } else {
            if let Some(n) = self.total_slots.filter(|&n| n as usize > listed && listed > 0) {
                self.notes.push(format!(
                    "llama-server /props total_slots {n} is more than the {listed} slots /slots lists; ignored"
                ));
                self.total_slots = None;
            }
            fill(&mut self.total_slots, &u32::try_from(listed).ok(), true);
        }
        if slots.iter().any(|s| s.is_processing.is_some()) {
            let busy = slots.iter().filter(|s| s.is_processing == Some(true)).count();
            self.slots_busy = u32::try_from(busy).ok();
        }
        self.in_flight = InFlight::of(slots);
    }

    /// `/v1/models`: the first model (a single-model server lists one; a
    /// router's first loaded one).
    pub fn merge_v1_models(&mut self, models: &[V1Model]) {
        let Some(model) = models
            .iter()
            .find(|m| m.status.as_deref().is_none_or(|s| s == "loaded"))
        else {
            return;
        };
        fill(&mut self.model_path, &model.id, true);
        fill(&mut self.model_ftype, &model.ftype, true);
        fill(&mut self.n_ctx_meta, &model.n_ctx, false);
        fill(&mut self.n_ctx_train, &model.n_ctx_train, false);
        fill(&mut self.n_params, &model.n_params, false);
        fill(&mut self.size_bytes, &model.size_bytes, false);
    }

    pub fn merge_metrics(&mut self, metrics: &Metrics) {
        fill(&mut self.requests_processing, &metrics.requests_processing, false);
        fill(&mut self.requests_deferred, &metrics.requests_deferred, false);
        fill(&mut self.n_tokens_max, &metrics.n_tokens_max, false);
        fill(&mut self.kv_cache_usage_ratio, &metrics.kv_cache_usage_ratio, false);
        fill(&mut self.prompt_tokens_total, &metrics.prompt_tokens_total, false);
        fill(&mut self.tokens_predicted_total, &metrics.tokens_predicted_total, false);
    }

    /// Forgets what `/slots` and `/metrics` said, before they are asked
    /// again: an endpoint that stops answering leaves unknown, not stale.
    pub fn clear_live(&mut self) {
        self.slots_busy = None;
        self.requests_processing = None;
        self.requests_deferred = None;
        self.n_tokens_max = None;
        self.kv_cache_usage_ratio = None;
        self.prompt_tokens_total = None;
        self.tokens_predicted_total = None;
        self.in_flight = None;
    }

    /// Prompt tokens processed and tokens generated since the server
    /// started, the requests in flight included: `/metrics`' counters plus
    /// [`InFlight`]. Without `/slots`' figures, the counters alone (they
    /// move only when a request's prompt or generation ends); the flag
    /// says which, and only like samples are compared.
    pub fn token_totals(&self) -> (Option<u64>, Option<u64>, bool) {
        match &self.in_flight {
            Some(f) => (
                self.prompt_tokens_total.map(|t| t.saturating_add(f.prompt)),
                self.tokens_predicted_total.map(|t| t.saturating_add(f.generated)),
                true,
            ),
            None => (self.prompt_tokens_total, self.tokens_predicted_total, false),
        }
    }

    /// The whole context, when the API says it: a `meta.n_ctx` larger than
    /// one slot's is 2024's `llama_n_ctx`; today's builds report one slot's
    /// there, and the total follows from the slots and the cache layout
    /// (see `resolve_settings` in src/models/mod.rs).
    pub fn reported_total(&self) -> Option<u64> {
        let (meta, per_slot) = (self.n_ctx_meta?, self.n_ctx_per_slot?);
        (meta > per_slot).then_some(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = "/srv/models/gemma-3-270m-q4_k_m.gguf";

    fn reference(name: &str) -> &'static [u8] {
        match name {
            "props" => include_bytes!("../../../tests/data/llama-server/props.json"),
            "slots" => include_bytes!("../../../tests/data/llama-server/slots.json"),
            "slots_after" => include_bytes!("../../../tests/data/llama-server/slots_after.json"),
            "slots_busy" => include_bytes!("../../../tests/data/llama-server/slots_busy.json"),
            "v1_models" => include_bytes!("../../../tests/data/llama-server/v1_models.json"),
            "models" => include_bytes!("../../../tests/data/llama-server/models.json"),
            _ => unreachable!(),
        }
    }

    #[test]
    fn reference_props() {
        let props = parse_props(reference("props")).unwrap();
        assert_eq!(
            props,
            Props {
                model_path: Some(MODEL.into()),
                model_alias: Some(MODEL.into()),
                model_ftype: Some("Q4_K - Medium".into()),
                n_ctx_per_slot: Some(4096),
                total_slots: Some(4),
                build_info: Some("b0-unknown".into()),
            }
        );
    }

    #[test]
    fn reference_slots() {
        let idle = parse_slots(reference("slots")).unwrap();
        assert_eq!(idle.len(), 4);
        assert!(idle
            .iter()
            .all(|s| s.n_ctx == Some(4096) && s.is_processing == Some(false)));
        assert_eq!(idle[3].id, Some(3));
        // After a completion slot 3 keeps its task but is idle again.
        let after = parse_slots(reference("slots_after")).unwrap();
        assert_eq!(after.iter().filter(|s| s.is_processing == Some(true)).count(), 0);
        // During a generation with -np 2 (separate streams: 4096 / 2 each).
        let busy = parse_slots(reference("slots_busy")).unwrap();
        assert_eq!(busy.len(), 2);
        assert_eq!(
            busy[1],
            Slot {
                id: Some(1),
                n_ctx: Some(2048),
                is_processing: Some(true),
                id_task: Some(0),
                n_prompt_tokens_processed: Some(5),
                n_decoded: Some(11),
            }
        );
        let mut state = ServerState::default();
        state.merge_slots(&busy);
        assert_eq!(
            state.in_flight,
            Some(InFlight {
                prompt: 0,
                generated: 11
            })
        );
    }

    #[test]
    fn reference_models() {
        for name in ["v1_models", "models"] {
            let models = parse_v1_models(reference(name)).unwrap();
            assert_eq!(
                models,
                [V1Model {
                    id: Some(MODEL.into()),
                    status: None,
                    n_ctx: Some(4096),
                    n_ctx_train: Some(32768),
                    n_params: Some(268_098_176),
                    size_bytes: Some(246_587_904),
                    n_vocab: Some(262_144),
                    n_embd: Some(640),
                    ftype: Some("Q4_K - Medium".into()),
                }],
                "{name}"
            );
        }
    }

    #[test]
    fn reference_metrics() {
        let at_rest = parse_metrics(include_str!("../../../tests/data/llama-server/metrics.json"));
        assert_eq!(
            at_rest.unwrap(),
            Metrics {
                requests_processing: Some(0),
                requests_deferred: Some(0),
                n_tokens_max: Some(0),
                kv_cache_usage_ratio: None,
                prompt_tokens_total: Some(0),
                tokens_predicted_total: Some(0),
            }
        );
        let after = parse_metrics(include_str!("../../../tests/data/llama-server/metrics_after.txt"));
        assert_eq!(after.unwrap().n_tokens_max, Some(52));
        let busy = parse_metrics(include_str!("../../../tests/data/llama-server/metrics_busy.txt"));
        let busy = busy.unwrap();
        assert_eq!(busy.requests_processing, Some(1));
        assert_eq!(busy.n_tokens_max, Some(15));
        assert_eq!(
            (busy.prompt_tokens_total, busy.tokens_predicted_total),
            (Some(5), Some(0))
        );
        let old = parse_metrics("llamacpp:kv_cache_usage_ratio 0.25\nllamacpp:kv_cache_tokens 1024\n");
        assert_eq!(old.unwrap().kv_cache_usage_ratio, Some(0.25));
    }

    #[test]
    fn merged_state_of_the_reference_server() {
        let mut state = ServerState::default();
        state.merge_props(&parse_props(reference("props")).unwrap());
        state.merge_slots(&parse_slots(reference("slots_after")).unwrap());
        state.merge_v1_models(&parse_v1_models(reference("v1_models")).unwrap());
        let metrics = include_str!("../../../tests/data/llama-server/metrics_after.txt");
        state.merge_metrics(&parse_metrics(metrics).unwrap());
        assert_eq!(state.model_path.as_deref(), Some(MODEL));
        assert_eq!(state.n_ctx_per_slot, Some(4096));
        assert_eq!(state.total_slots, Some(4));
        assert_eq!(state.slots_busy, Some(0));
        assert_eq!(state.n_params, Some(268_098_176));
        assert_eq!(state.size_bytes, Some(246_587_904));
        assert_eq!(state.n_ctx_train, Some(32768));
        assert_eq!(state.n_tokens_max, Some(52));
        // Today's builds report one slot's context as meta.n_ctx too: it
        // says nothing about the total.
        assert_eq!(state.n_ctx_meta, Some(4096));
        assert_eq!(state.reported_total(), None);
        // A 2024 build's meta.n_ctx is the whole llama_n_ctx.
        let old = ServerState {
            n_ctx_meta: Some(4 * 4096),
            ..state.clone()
        };
        assert_eq!(old.reported_total(), Some(4 * 4096));

        // -np 2 with separate streams: 2048 a slot.
        let mut split = ServerState::default();
        split.merge_slots(&parse_slots(reference("slots_busy")).unwrap());
        assert_eq!(split.total_slots, Some(2));
        assert_eq!(split.slots_busy, Some(1));
        assert_eq!(split.n_ctx_per_slot, Some(2048));
    }

    #[test]
    fn implausible_slot_counts_are_unknown_with_a_note() {
        // total_slots 2^32-1 beside 17000 listed slots: neither is a count
        // llama.cpp can have (LLAMA_MAX_SEQ 256).
        let listed: Vec<Slot> = (0..17000).map(|_| Slot::default()).collect();
        let mut state = ServerState::default();
        state.merge_props(&parse_props(br#"{"total_slots":4294967295}"#).unwrap());
        state.merge_slots(&listed);
        assert_eq!(state.total_slots, None);
        assert_eq!(
            state.notes,
            [
                "llama-server /props total_slots 4294967295 is over llama.cpp's limit of 256 slots; ignored",
                "llama-server /slots lists 17000 slots, over llama.cpp's limit of 256; ignored",
            ]
        );
        // A /props count above the slots /slots lists is not believed: the
        // list (every slot, tools/server/server-context.cpp) counts instead.
        let mut state = ServerState::default();
        state.merge_props(&parse_props(br#"{"total_slots":8}"#).unwrap());
        state.merge_slots(&listed[..4]);
        assert_eq!(state.total_slots, Some(4));
        assert_eq!(
            state.notes,
            ["llama-server /props total_slots 8 is more than the 4 slots /slots lists; ignored"]
        );
        // Plausible counts stay, without notes.
        let mut state = ServerState::default();
        state.merge_props(&parse_props(br#"{"total_slots":4}"#).unwrap());
        state.merge_slots(&listed[..4]);
        assert_eq!((state.total_slots, state.notes.len()), (Some(4), 0));
    }

    #[test]
    fn older_and_router_shapes() {
        let props =
            parse_props(br#"{"default_generation_settings":{"n_ctx":2048,"model":"/m/a.gguf"},"total_slots":1}"#);
        assert_eq!(props.unwrap().model_path.as_deref(), Some("/m/a.gguf"));
        let slots = parse_slots(br#"[{"id":0,"n_ctx":512,"state":1},{"id":1,"state":0}]"#).unwrap();
        assert_eq!(slots[0].is_processing, Some(true));
        assert_eq!(slots[1].is_processing, Some(false));
        let router = parse_v1_models(
            br#"{"data":[{"id":"a","status":{"value":"unloaded"}},{"id":"b","status":{"value":"loaded"},"meta":{"n_ctx":8192}}]}"#,
        )
        .unwrap();
        let mut state = ServerState::default();
        state.merge_v1_models(&router);
        assert_eq!(state.model_path.as_deref(), Some("b"));
        assert_eq!(state.n_ctx_meta, Some(8192));
    }

    #[test]
    fn garbage_truncated_huge_and_wrong_types() {
        for body in [
            &b""[..],
            b"null",
            b"[]",
            b"\"x\"",
            b"{",
            b"{\"total_slots\": 4",
            b"\xff\x00",
            b"<html>",
        ] {
            assert!(parse_props(body).is_err(), "{body:?}");
            assert!(parse_v1_models(body).is_err(), "{body:?}");
        }
        for body in [&b""[..], b"{}", b"[", b"[{\"id\":0}", b"null"] {
            assert!(parse_slots(body).is_err(), "{body:?}");
        }
        let odd = parse_props(
            br#"{"default_generation_settings":[1],"total_slots":99999999999999999999,"model_path":7,"build_info":{"a":1}}"#,
        )
        .unwrap();
        assert_eq!(odd, Props::default());
        let odd = parse_props(br#"{"total_slots":-4,"default_generation_settings":{"n_ctx":1e30}}"#).unwrap();
        assert_eq!((odd.total_slots, odd.n_ctx_per_slot), (None, None));
        let slots =
            parse_slots(br#"[1, "x", null, [0, 4096], {"id":"zero","n_ctx":-1,"is_processing":"yes"}]"#).unwrap();
        assert_eq!(slots, [Slot::default()]);
        let models = parse_v1_models(br#"{"data":{"id":"x"}}"#).unwrap();
        assert!(models.is_empty());
        let models = parse_v1_models(br#"{"data":[{"id":5,"meta":{"n_params":"many","size":1.5}}]}"#).unwrap();
        assert_eq!(models, [V1Model::default()]);
        assert!(parse_metrics("<html>502 Bad Gateway</html>").is_err());
        let huge = parse_metrics("llamacpp:n_tokens_max 1e300\nllamacpp:kv_cache_usage_ratio 7\n").unwrap();
        assert_eq!(huge, Metrics::default());
        let mut state = ServerState {
            n_ctx_meta: Some(7),
            n_ctx_per_slot: Some(u64::MAX),
            ..Default::default()
        };
        assert_eq!(state.reported_total(), None, "a total smaller than a slot's is none");
        state.merge_slots(&[]);
        assert_eq!(state.slots_busy, None);
    }
}
