//! A [`Snapshot`] in the Prometheus text exposition format (0.0.4).
//!
//! Written by hand rather than through prometheus-client: that crate's model
//! is a registry of long-lived metric families whose series are updated in
//! place, which suits counters a program owns. Here every sample is a fresh
//! picture (processes come and go, models appear, a device answers or not),
//! so the text is rendered from scratch once per sample; a series of a
//! process that exited is simply not written again. Doing that through a
//! registry would mean clearing and refilling every family each sample, for
//! a format that is a few lines of escaping.
//!
//! The rules the output keeps (shared/DESIGN.md):
//! - unknown (`null`) writes no sample at all, never a 0;
//! - measured, estimated and reported numbers are different metric names
//!   (`gputaskman_process_vram_bytes`, `gputaskman_model_estimated_kv_bytes`,
//!   `gputaskman_model_reported_kv_bytes`), never a label on one name;
//! - base units in the name (`_bytes`, `_ratio`, `_celsius`, `_watts`,
//!   `_hertz`, `_seconds`), none in labels;
//! - every family has HELP and TYPE; a label set appears once per family.

use crate::snapshot::reconciliation::{Provenance, Reconciliation};
use crate::snapshot::{Device, GpuUsage, Model, PodAllocation, Process, Snapshot};
use std::collections::HashSet;
use std::fmt::Write;

/// How long a command-line label may be, in bytes; longer ones are cut at a
/// character boundary and end in `...`.
const CMDLINE_LABEL_MAX: usize = 1024;

#[derive(Clone, Copy)]
enum Kind {
    Gauge,
}

/// One metric family: its name, help and type.
struct Def {
    name: &'static str,
    help: &'static str,
    kind: Kind,
}

macro_rules! families {
    ($($id:ident = $name:literal, $help:literal;)*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy)]
        #[repr(usize)]
        enum F { $($id,)* }
        const DEFS: &[Def] = &[$(Def { name: $name, help: $help, kind: Kind::Gauge },)*];
    };
}

families! {
    BUILD_INFO = "gputaskman_build_info", "The gputaskman version serving these metrics (always 1).";
    HOST_INFO = "gputaskman_host_info", "The host the sample was taken on (always 1).";
    SAMPLE_TIMESTAMP = "gputaskman_sample_timestamp_seconds", "When the sample these metrics come from was taken, in Unix seconds. Samples are taken on their own schedule (--interval), not per scrape.";
    SAMPLE_DURATION = "gputaskman_sample_duration_seconds", "How long taking the last sample took.";
    BACKEND_UP = "gputaskman_backend_up", "Whether a measurement source answered in the last sample (1) or not (0); the status label says unavailable (absent here) or error.";
    DEVICE_INFO = "gputaskman_device_info", "A device and what it is (always 1).";
    DEVICE_POD_ALLOCATION = "gputaskman_device_pod_allocation_info", "Kubernetes: the kubelet allocated the device to this pod's container, as this resource (its pod-resources API; always 1).";
    DEVICE_ALLOCATED_IDLE = "gputaskman_device_allocated_idle", "Kubernetes: 1 when no process of the pod the device is allocated to uses it (allocated and idle), 0 when one does; absent where that cannot be told.";
    DEVICE_MEMORY_TOTAL = "gputaskman_device_memory_total_bytes", "Measured: device memory in total.";
    DEVICE_MEMORY_USED = "gputaskman_device_memory_used_bytes", "Measured: device memory in use, by every process and the driver.";
    DEVICE_MEMORY_FREE = "gputaskman_device_memory_free_bytes", "Measured: device memory free.";
    DEVICE_MEMORY_RESERVED = "gputaskman_device_memory_reserved_bytes", "Measured: device memory the driver keeps for itself.";
    DEVICE_SHARED_MEMORY_USED = "gputaskman_device_shared_memory_used_bytes", "Measured: GPU-accessible system memory in use (WDDM shared usage).";
    DEVICE_UTILIZATION = "gputaskman_device_utilization_ratio", "Measured: share of the last sample period the GPU was busy (0 to 1).";
    DEVICE_MEMORY_ACTIVITY = "gputaskman_device_memory_activity_ratio", "Measured: share of the last sample period the memory controller was busy (0 to 1). Not bandwidth, not capacity.";
    DEVICE_TEMPERATURE = "gputaskman_device_temperature_celsius", "Measured: GPU temperature.";
    DEVICE_POWER = "gputaskman_device_power_watts", "Measured: power draw.";
    DEVICE_POWER_LIMIT = "gputaskman_device_power_limit_watts", "The enforced power limit.";
    DEVICE_FAN = "gputaskman_device_fan_speed_ratio", "Measured: fan speed as a share of its maximum (0 to 1).";
    DEVICE_CLOCK = "gputaskman_device_clock_hertz", "Measured: current clock, per clock domain.";
    DEVICE_CLOCK_MAX = "gputaskman_device_clock_max_hertz", "The highest clock of a clock domain.";
    DEVICE_PCIE_TX = "gputaskman_device_pcie_tx_bytes_per_second", "Measured: PCIe transmit throughput over the last sample window.";
    DEVICE_PCIE_RX = "gputaskman_device_pcie_rx_bytes_per_second", "Measured: PCIe receive throughput over the last sample window.";
    DEVICE_STALE = "gputaskman_device_stale", "1 when the driver stopped answering and these are its last values.";
    DEVICE_LIST_COMPLETE = "gputaskman_device_process_list_complete", "0 when a process-list query on the device failed: its process series are then incomplete, not absent.";
    DEVICE_QUERY_ERRORS = "gputaskman_device_query_errors", "How many queries against the device failed in the last sample.";
    DEVICE_ATTRIBUTED = "gputaskman_device_attributed_memory_bytes", "Measured: the sum of per-process device memory on the device (only measured figures are summed).";
    DEVICE_UNATTRIBUTED = "gputaskman_device_unattributed_memory_bytes", "Measured: device memory used that no listed process accounts for (driver, other PID namespaces).";
    DEVICE_NORMALIZED = "gputaskman_device_attribution_normalized", "1 when the per-process sum exceeds the device's used memory.";
    PROCESS_INFO = "gputaskman_process_info", "A process the sample lists, with its user, start time and (redacted) command line (always 1).";
    PROCESS_RSS = "gputaskman_process_resident_memory_bytes", "Measured: resident system memory of the process.";
    PROCESS_FOOTPRINT = "gputaskman_process_footprint_bytes", "Measured (macOS): the physical footprint, what the system books to the process, its GPU buffers included on unified memory. Not device memory: never summed with it.";
    PROCESS_CPU = "gputaskman_process_cpu_ratio", "Measured: CPU time over the last sample period, as a share of one core.";
    PROCESS_VRAM = "gputaskman_process_vram_bytes", "Measured: device memory the process holds on a device.";
    PROCESS_SPILL = "gputaskman_process_spill_bytes", "Measured: GPU-accessible system memory the process holds (WDDM Non Local Usage).";
    PROCESS_PAGED = "gputaskman_process_paged_bytes", "Estimated: an estimate of non-residency on WDDM (Total Committed - Local - Non Local), floored at 0; not proof of paging, never part of measured totals.";
    PROCESS_GPU_UTILIZATION = "gputaskman_process_gpu_utilization_ratio", "Measured: share of the last sample period the process kept a GPU engine busy (0 to 1).";
    MODEL_INFO = "gputaskman_model_info", "A model a process runs, with its kind and whether two sources confirm it (always 1).";
    MODEL_PARAMETERS = "gputaskman_model_parameters", "From the model file: number of parameters.";
    MODEL_CONTEXT = "gputaskman_model_context_tokens", "The context the runtime runs the model with, in tokens: llama.cpp's n_ctx, all slots together.";
    MODEL_CONTEXT_TRAIN = "gputaskman_model_context_train_tokens", "From the model file: the context it was trained with, in tokens.";
    MODEL_SLOTS = "gputaskman_model_slots", "Reported: parallel slots the runtime serves the model with.";
    MODEL_SLOTS_BUSY = "gputaskman_model_slots_busy", "Reported: slots processing a request now.";
    MODEL_REQUESTS_RUNNING = "gputaskman_model_requests_running", "Reported: requests the runtime is processing now.";
    MODEL_REQUESTS_WAITING = "gputaskman_model_requests_waiting", "Reported: requests waiting for a slot.";
    MODEL_PROMPT_TPS = "gputaskman_model_prompt_tokens_per_second", "From the runtime's reported counter: prompt tokens processed per second between the last two samples (absent until there are two).";
    MODEL_GENERATION_TPS = "gputaskman_model_generation_tokens_per_second", "From the runtime's reported counter: tokens generated per second between the last two samples (absent until there are two).";
    MODEL_KV_USED = "gputaskman_model_kv_cache_used_ratio", "Reported: share of the KV cache in use (0 to 1), where the runtime says it.";
    MODEL_EST_WEIGHTS = "gputaskman_model_estimated_weights_bytes", "Estimated from the model file: the weights. Never part of measured totals.";
    MODEL_EST_KV = "gputaskman_model_estimated_kv_bytes", "Estimated from the model file and launch settings: the KV cache, as llama.cpp allocates it. Never part of measured totals.";
    MODEL_EST_KV_PER_TOKEN = "gputaskman_model_estimated_kv_per_token_bytes", "Estimated: KV cache cost of one more token of context in the full-attention layers.";
    MODEL_EST_RECURRENT = "gputaskman_model_estimated_recurrent_state_bytes", "Estimated: recurrent state (Mamba, RWKV layers).";
    MODEL_EST_KV_NO_WINDOW = "gputaskman_model_estimated_kv_without_window_bytes", "Estimated: the KV cache if sliding-window layers held the whole context (what window-blind calculators say).";
    MODEL_EST_COMPUTE = "gputaskman_model_estimated_compute_bytes", "Estimated: llama.cpp's compute buffers, every device's (the host's included), for the backend the process maps.";
    MODEL_EST_OUTPUT = "gputaskman_model_estimated_output_bytes", "Estimated: llama.cpp's output buffer (logits), in host memory.";
    MODEL_REP_WEIGHTS = "gputaskman_model_reported_weights_bytes", "Reported by the runtime: the weights.";
    MODEL_REP_KV = "gputaskman_model_reported_kv_bytes", "Reported by the runtime: the KV cache.";
    MODEL_REP_COMPUTE = "gputaskman_model_reported_compute_bytes", "Reported by the runtime: compute buffers.";
    MODEL_REP_TOTAL = "gputaskman_model_reported_total_bytes", "Reported by the runtime: everything the model takes (Ollama's size).";
    MODEL_REP_DEVICE = "gputaskman_model_reported_device_bytes", "Reported by the runtime: of which in device memory (Ollama's size_vram).";
    MODEL_KV_POOL_TOKENS = "gputaskman_model_kv_pool_tokens", "Reported by the server: tokens its KV pool holds (vLLM, SGLang, TGI).";
    MODEL_MEMORY_UTILIZATION = "gputaskman_model_memory_utilization_ratio", "Reported by the server: the share of the device's memory it claims (vLLM gpu_memory_utilization, SGLang mem_fraction_static).";
    PART_REPORTED = "gputaskman_process_reported_part_bytes", "Reported by the runtime: one part (weights, kv, compute, output) of a process's memory on a device, for the comparison with its measured VRAM. Never part of measured totals.";
    PART_ESTIMATED = "gputaskman_process_estimated_part_bytes", "Estimated: one part (weights, kv, compute, output, context: the driver's) of a process's memory on a device, for the comparison with its measured VRAM. Never part of measured totals.";
    UNEXPLAINED = "gputaskman_process_unexplained_bytes", "Measured VRAM minus the reported and the estimated parts of the process on the device, signed: negative when the parts claim more. A comparison, not a measurement.";
    UNEXPLAINED_LARGE = "gputaskman_process_unexplained_large", "1 when the unexplained rest is over 300 MiB and a tenth of the measured VRAM: a second model, a LoRA, an allocator pool, a projector.";
    RENDER_DURATION = "gputaskman_render_duration_seconds", "How long rendering these metrics from the sample took (once per sample, not per scrape).";
}

/// Family buffers: samples are grouped by family, whatever order the
/// snapshot is walked in.
struct Out {
    bodies: Vec<String>,
    seen: Vec<HashSet<String>>,
}

enum Value {
    Int(u64),
    Float(f64),
}

impl Out {
    fn new() -> Out {
        Out {
            bodies: vec![String::new(); DEFS.len()],
            seen: vec![HashSet::new(); DEFS.len()],
        }
    }

    /// One sample. `labels` is a list of `name="value"` pairs already
    /// escaped and joined by commas (see [`Labels`]). A label set already
    /// written in this family is dropped: a duplicate would make Prometheus
    /// reject the whole scrape.
    fn sample(&mut self, family: F, labels: &str, value: Value) {
        let i = family as usize;
        if let Value::Float(f) = value {
            if !f.is_finite() {
                return;
            }
        }
        if !self.seen[i].insert(labels.to_string()) {
            return;
        }
        let body = &mut self.bodies[i];
        body.push_str(DEFS[i].name);
        if !labels.is_empty() {
            body.push('{');
            body.push_str(labels);
            body.push('}');
        }
        body.push(' ');
        let _ = match value {
            Value::Int(v) => write!(body, "{v}"),
            Value::Float(v) => write!(body, "{v}"),
        };
        body.push('\n');
    }

    fn opt_u64(&mut self, family: F, labels: &str, value: Option<u64>) {
        if let Some(v) = value {
            self.sample(family, labels, Value::Int(v));
        }
    }

    fn opt_f64(&mut self, family: F, labels: &str, value: Option<f64>) {
        if let Some(v) = value {
            self.sample(family, labels, Value::Float(v));
        }
    }

    fn flag(&mut self, family: F, labels: &str, value: bool) {
        self.sample(family, labels, Value::Int(value as u64));
    }

    fn finish(self, out: &mut String) {
        for (def, body) in DEFS.iter().zip(&self.bodies) {
            if body.is_empty() {
                continue;
            }
            write_header(out, def);
            out.push_str(body);
        }
    }
}

fn write_header(out: &mut String, def: &Def) {
    let kind = match def.kind {
        Kind::Gauge => "gauge",
    };
    let _ = writeln!(out, "# HELP {} {}", def.name, def.help);
    let _ = writeln!(out, "# TYPE {} {kind}", def.name);
}

/// A label set being built: `a="x",b="y"`. Unknown values leave the label
/// out (in Prometheus an empty label and a missing one are the same).
#[derive(Clone, Default)]
pub(super) struct Labels(pub(super) String);

impl Labels {
    pub(super) fn add(&mut self, name: &str, value: Option<&str>) -> &mut Labels {
        let Some(value) = value else { return self };
        if value.is_empty() {
            return self;
        }
        if !self.0.is_empty() {
            self.0.push(',');
        }
        self.0.push_str(name);
        self.0.push_str("=\"");
        escape_label(&mut self.0, value);
        self.0.push('"');
        self
    }

    fn with(&self, name: &str, value: Option<&str>) -> Labels {
        let mut l = self.clone();
        l.add(name, value);
        l
    }

    /// These labels followed by `more`'s.
    fn join(&self, more: &Labels) -> Labels {
        match (self.0.is_empty(), more.0.is_empty()) {
            (_, true) => self.clone(),
            (true, false) => more.clone(),
            (false, false) => Labels(format!("{},{}", self.0, more.0)),
        }
    }
}

/// The text format's label-value escaping (backslash, double quote,
/// newline), and more: a value is written by whoever runs the process (its
/// command line, a model's name), and `curl .../metrics` in a terminal
/// obeys an ESC, a CR or a bidi override in it. Those characters are
/// written as the terminal views show them (`view::safe_text`: `\e`,
/// `\r`, `\u{202e}`), the backslash itself escaped, so the value Prometheus
/// stores is that visible text; the format allows no other escape (client
/// parsers refuse `\e`).
pub(crate) fn escape_label(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if crate::view::safe_text::hidden(c) => {
                out.push('\\');
                out.push_str(&crate::view::safe_text::escape(c.to_string()));
            }
            c => out.push(c),
        }
    }
}

fn ratio(percent: Option<u32>) -> Option<f64> {
    percent.map(|p| p as f64 / 100.0)
}

fn mhz(m: Option<u32>) -> Option<u64> {
    m.map(|m| m as u64 * 1_000_000)
}

/// At most [`CMDLINE_LABEL_MAX`] bytes, cut at a character boundary.
fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= CMDLINE_LABEL_MAX {
        return s.into();
    }
    let mut end = CMDLINE_LABEL_MAX - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end]).into()
}

/// What a sample says about itself beyond the snapshot.
#[derive(Debug, Clone, Copy, Default)]
pub struct SampleInfo {
    /// How long `Collector::sample` took.
    pub duration_s: Option<f64>,
}

/// The name of every family `render` may write (the fleet view's query
/// asks only for these).
#[cfg(test)]
pub(crate) fn family_names() -> impl Iterator<Item = &'static str> {
    DEFS.iter().map(|d| d.name)
}

/// The whole exposition for one snapshot. Rendered once per sample; a
/// scrape only copies the result.
pub fn render(snap: &Snapshot, info: SampleInfo) -> String {
    let started = std::time::Instant::now();
    let mut out = Out::new();

    out.sample(
        F::BUILD_INFO,
        &Labels::default().with("version", Some(env!("CARGO_PKG_VERSION"))).0,
        Value::Int(1),
    );
    let mut host = Labels::default();
    host.add("hostname", snap.host.hostname.as_deref())
        .add("os", Some(&snap.host.os))
        .add("os_name", snap.host.os_name.as_deref())
        .add("kernel", snap.host.kernel.as_deref())
        .add("wsl", Some(bool_str(snap.host.wsl)))
        .add("container", Some(bool_str(snap.host.container)));
    out.sample(F::HOST_INFO, &host.0, Value::Int(1));
    out.opt_f64(F::SAMPLE_TIMESTAMP, "", crate::units::unix_seconds(&snap.taken_at));
    out.opt_f64(F::SAMPLE_DURATION, "", info.duration_s);
    for b in &snap.backends {
        let status = serde_json::to_value(b.status).ok();
        let mut l = Labels::default();
        l.add("backend", Some(&b.name))
            .add("status", status.as_ref().and_then(|s| s.as_str()));
        out.flag(F::BACKEND_UP, &l.0, b.status == crate::snapshot::BackendStatus::Ok);
    }

    for d in &snap.devices {
        device(&mut out, snap, d);
    }
    for p in &snap.processes {
        process(&mut out, snap, p);
    }

    let mut text = String::with_capacity(out.bodies.iter().map(|b| b.len()).sum::<usize>() + 16 * 1024);
    out.finish(&mut text);
    let health = snap.devices.iter().filter_map(|d| {
        let labels = device_series_labels(d).0;
        Some((d.health.as_ref()?, labels))
    });
    super::health_metrics::render(&mut text, health);
    // The render's own cost, measured up to here, closes the exposition.
    write_header(&mut text, &DEFS[F::RENDER_DURATION as usize]);
    let _ = writeln!(
        text,
        "{} {}",
        DEFS[F::RENDER_DURATION as usize].name,
        started.elapsed().as_secs_f64()
    );
    text
}

fn bool_str(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

/// The labels that name a device in every device and process-on-device
/// series: backend, device (its label: the index, or `0/1` for a MIG
/// instance), uuid; for a MIG instance also its GPU (`parent_device`),
/// `gpu_instance`, `compute_instance` and `mig_profile`. `device` is the
/// listed device, where there is one, of the entry numbered `index`.
fn device_labels(backend: &str, index: u32, device: Option<&Device>) -> Labels {
    let mig = device.and_then(|d| d.mig.as_ref());
    let id = |value: Option<u32>| value.map(|v| v.to_string());
    let mut l = Labels::default();
    l.add("backend", Some(backend))
        .add("device", Some(&device.map_or_else(|| index.to_string(), Device::label)))
        .add("uuid", device.and_then(|d| d.uuid.as_deref()))
        .add("parent_device", id(device.and_then(|d| d.parent)).as_deref())
        .add("gpu_instance", id(mig.map(|m| m.gpu_instance_id)).as_deref())
        .add("compute_instance", id(mig.map(|m| m.compute_instance_id)).as_deref())
        .add("mig_profile", mig.and_then(|m| m.profile.as_deref()));
    l
}

/// The labels of a device's own series (those `device` writes and the
/// health families): [`device_labels`], and for a device the kubelet
/// allocated to one container its `namespace`, `pod` and `container`, as
/// dcgm-exporter's are (a device shared by several names them in
/// `gputaskman_device_pod_allocation_info`). Not on the process-on-device
/// series, whose pod is the process's own.
fn device_series_labels(d: &Device) -> Labels {
    let l = device_labels(&d.backend, d.index, Some(d));
    match d.pods.as_deref() {
        Some([a]) => with_pod(l, a),
        _ => l,
    }
}

/// `labels` with the allocation's `namespace`, `pod` and `container`.
fn with_pod(mut labels: Labels, a: &PodAllocation) -> Labels {
    labels
        .add("namespace", Some(&a.namespace))
        .add("pod", Some(&a.pod))
        .add("container", Some(&a.container));
    labels
}

fn device(out: &mut Out, snap: &Snapshot, d: &Device) {
    for a in d.pods.iter().flatten() {
        let pod = with_pod(device_labels(&d.backend, d.index, Some(d)), a);
        let mut info = pod.clone();
        info.add("resource", Some(&a.resource))
            .add("device_id", Some(&a.device_id));
        out.sample(F::DEVICE_POD_ALLOCATION, &info.0, Value::Int(1));
        if let Some(in_use) = a.in_use {
            out.sample(F::DEVICE_ALLOCATED_IDLE, &pod.0, Value::Int(u64::from(!in_use)));
        }
    }
    let l = device_series_labels(d);
    let ls = l.0.as_str();
    let mut info = l.clone();
    info.add("name", d.name.as_deref())
        .add("vendor", Some(&d.vendor))
        .add("pci_bus_id", d.pci_bus_id.as_deref())
        .add("driver_version", d.driver_version.as_deref())
        .add("cuda_version", d.cuda_version.as_deref())
        .add("driver_model", d.driver_model.as_deref());
    out.sample(F::DEVICE_INFO, &info.0, Value::Int(1));
    out.opt_u64(F::DEVICE_MEMORY_TOTAL, ls, d.memory_total_bytes);
    out.opt_u64(F::DEVICE_MEMORY_USED, ls, d.memory_used_bytes);
    out.opt_u64(F::DEVICE_MEMORY_FREE, ls, d.memory_free_bytes);
    out.opt_u64(F::DEVICE_MEMORY_RESERVED, ls, d.memory_reserved_bytes);
    out.opt_u64(F::DEVICE_SHARED_MEMORY_USED, ls, d.shared_memory_used_bytes);
    out.opt_f64(F::DEVICE_UTILIZATION, ls, ratio(d.gpu_util_percent));
    out.opt_f64(F::DEVICE_MEMORY_ACTIVITY, ls, ratio(d.memory_activity_percent));
    out.opt_u64(F::DEVICE_TEMPERATURE, ls, d.temperature_c.map(u64::from));
    out.opt_f64(F::DEVICE_POWER, ls, d.power_w);
    out.opt_f64(F::DEVICE_POWER_LIMIT, ls, d.power_limit_w);
    out.opt_f64(F::DEVICE_FAN, ls, ratio(d.fan_percent));
    if let Some(c) = &d.clocks {
        for (domain, v) in [("graphics", c.graphics_mhz), ("sm", c.sm_mhz), ("memory", c.memory_mhz)] {
            out.opt_u64(F::DEVICE_CLOCK, &l.with("clock", Some(domain)).0, mhz(v));
        }
        for (domain, v) in [("graphics", c.graphics_max_mhz), ("memory", c.memory_max_mhz)] {
            out.opt_u64(F::DEVICE_CLOCK_MAX, &l.with("clock", Some(domain)).0, mhz(v));
        }
    }
    if let Some(p) = &d.pcie {
        out.opt_u64(F::DEVICE_PCIE_TX, ls, p.tx_bytes_per_s);
        out.opt_u64(F::DEVICE_PCIE_RX, ls, p.rx_bytes_per_s);
    }
    out.flag(F::DEVICE_STALE, ls, d.stale);
    out.flag(F::DEVICE_LIST_COMPLETE, ls, d.process_list_complete);
    out.sample(F::DEVICE_QUERY_ERRORS, ls, Value::Int(d.errors.len() as u64));
    // The attribution entry of this device (matched by index, in order).
    if let Some(a) = snap
        .attribution
        .devices
        .iter()
        .zip(&snap.devices)
        .find(|(a, dev)| a.device == d.index && dev.backend == d.backend)
        .map(|(a, _)| a)
    {
        out.opt_u64(F::DEVICE_ATTRIBUTED, ls, a.measured_sum_bytes);
        out.opt_u64(F::DEVICE_UNATTRIBUTED, ls, a.unattributed_bytes);
        out.flag(F::DEVICE_NORMALIZED, ls, a.normalized);
    }
}

/// The labels that name a process: pid, process name, kind, runtimes
/// (comma-joined), and the host PID where the driver reported another one.
/// In a container: its runtime, its name (else its id's first 12 digits)
/// and, in Kubernetes, the pod and namespace, under the names
/// kube-state-metrics uses, so the series join with the cluster's.
fn process_labels(p: &Process) -> Labels {
    let kind = serde_json::to_value(p.kind).ok();
    let runtime = p.runtimes.join(",");
    let host_pid = p.host_pid.map(|h| h.to_string());
    let c = p.container.as_ref();
    let container = c.map(crate::accounting::container_label);
    let mut l = Labels::default();
    l.add("pid", Some(&p.pid.to_string()))
        .add("host_pid", host_pid.as_deref())
        .add("process", p.name.as_deref())
        .add("kind", kind.as_ref().and_then(|k| k.as_str()))
        .add("runtime", Some(&runtime))
        .add("container_runtime", c.map(|c| c.runtime.as_str()))
        .add("container", container.as_deref())
        .add("pod", c.and_then(|c| c.pod.as_deref()))
        .add("namespace", c.and_then(|c| c.namespace.as_deref()));
    l
}

fn process(out: &mut Out, snap: &Snapshot, p: &Process) {
    let l = process_labels(p);
    let ls = l.0.as_str();
    let mut info = l.clone();
    info.add("user", p.user.as_deref())
        .add("start_time", p.start_time.as_deref())
        .add("cmdline", p.cmdline.as_deref().map(clip).as_deref());
    out.sample(F::PROCESS_INFO, &info.0, Value::Int(1));
    out.opt_u64(F::PROCESS_RSS, ls, p.rss_bytes);
    out.opt_u64(F::PROCESS_FOOTPRINT, ls, p.footprint_bytes);
    out.opt_f64(F::PROCESS_CPU, ls, p.cpu_percent.map(|c| c / 100.0));
    for g in &p.gpu {
        gpu_usage(out, snap, &l, g);
    }
    for m in &p.models {
        model(out, &l, m);
    }
    for r in &p.reconciliation {
        reconciliation(out, snap, &l, r);
    }
}

/// The comparison row of one device: each part under the name of its
/// provenance, the signed rest and whether it is large.
fn reconciliation(out: &mut Out, snap: &Snapshot, process: &Labels, r: &Reconciliation) {
    let device = snap
        .devices
        .iter()
        .find(|d| d.index == r.device && d.backend == r.measured_source);
    let l = process.join(&device_labels(&r.measured_source, r.device, device));
    for p in &r.parts {
        let family = match p.provenance {
            Provenance::Reported => F::PART_REPORTED,
            Provenance::Estimated => F::PART_ESTIMATED,
        };
        let kind = serde_json::to_value(p.kind).ok();
        let mut part = l.with("part", kind.as_ref().and_then(|k| k.as_str()));
        part.add("model", p.model.as_deref());
        out.sample(family, &part.0, Value::Int(p.bytes));
    }
    out.sample(F::UNEXPLAINED, &l.0, Value::Float(r.unexplained_bytes as f64));
    out.flag(F::UNEXPLAINED_LARGE, &l.0, r.large);
}

fn gpu_usage(out: &mut Out, snap: &Snapshot, process: &Labels, g: &GpuUsage) {
    let device = snap
        .devices
        .iter()
        .find(|d| d.index == g.device && d.backend == g.source);
    let mut l = process.join(&device_labels(&g.source, g.device, device));
    let pairing = g.pairing.and_then(|m| serde_json::to_value(m).ok());
    l.add("match", pairing.as_ref().and_then(|m| m.as_str()));
    let ls = l.0.as_str();
    out.opt_u64(F::PROCESS_VRAM, ls, g.vram_bytes);
    out.opt_u64(F::PROCESS_SPILL, ls, g.spill_bytes);
    out.opt_u64(F::PROCESS_PAGED, ls, g.paged_bytes);
    for (engine, percent) in &g.engines {
        out.opt_f64(
            F::PROCESS_GPU_UTILIZATION,
            &l.with("engine", Some(engine)).0,
            ratio(Some(*percent)),
        );
    }
}

fn model(out: &mut Out, process: &Labels, m: &Model) {
    // A model is named by its name, else by its file's name.
    let file_name = m
        .path
        .as_deref()
        .and_then(|p| std::path::Path::new(p).file_name())
        .and_then(|f| f.to_str());
    let evidence = m.evidence.join(",");
    let mut l = process.clone();
    l.add("model", m.name.as_deref().or(file_name))
        .add("path", m.path.as_deref())
        .add("architecture", m.architecture.as_deref())
        .add("file_type", m.file_type.as_deref())
        .add("evidence", Some(&evidence));
    let ls = l.0.as_str();
    let mut info = l.clone();
    info.add("model_kind", m.kind.as_deref())
        .add("confirmed", Some(bool_str(m.confirmed)))
        .add("server_url", m.server_url.as_deref());
    out.sample(F::MODEL_INFO, &info.0, Value::Int(1));
    out.opt_u64(F::MODEL_PARAMETERS, ls, m.params);
    out.opt_u64(F::MODEL_CONTEXT, ls, m.context);
    out.opt_u64(F::MODEL_CONTEXT_TRAIN, ls, m.context_train);
    out.opt_u64(F::MODEL_SLOTS, ls, m.slots_total.map(u64::from));
    out.opt_u64(F::MODEL_SLOTS_BUSY, ls, m.slots_busy.map(u64::from));
    if let Some(a) = &m.activity {
        out.opt_u64(F::MODEL_REQUESTS_RUNNING, ls, a.requests_running);
        out.opt_u64(F::MODEL_REQUESTS_WAITING, ls, a.requests_waiting);
        out.opt_f64(F::MODEL_PROMPT_TPS, ls, a.prompt_tokens_per_second);
        out.opt_f64(F::MODEL_GENERATION_TPS, ls, a.generation_tokens_per_second);
        out.opt_f64(F::MODEL_KV_USED, ls, a.kv_cache_used_ratio);
    }
    if let Some(e) = &m.estimate {
        out.opt_u64(F::MODEL_EST_WEIGHTS, ls, e.weights_bytes);
        out.opt_u64(F::MODEL_EST_KV, ls, e.kv_bytes);
        out.opt_u64(F::MODEL_EST_KV_PER_TOKEN, ls, e.kv_bytes_per_token);
        out.opt_u64(F::MODEL_EST_RECURRENT, ls, e.recurrent_state_bytes);
        out.opt_u64(F::MODEL_EST_KV_NO_WINDOW, ls, e.kv_bytes_without_window);
        out.opt_u64(F::MODEL_EST_COMPUTE, ls, e.compute_bytes);
        out.opt_u64(F::MODEL_EST_OUTPUT, ls, e.output_bytes);
    }
    if let Some(r) = &m.reported {
        let l = l.with("source", Some(&r.source));
        let ls = l.0.as_str();
        out.opt_u64(F::MODEL_REP_WEIGHTS, ls, r.weights_bytes);
        out.opt_u64(F::MODEL_REP_KV, ls, r.kv_bytes);
        out.opt_u64(F::MODEL_REP_COMPUTE, ls, r.compute_bytes);
        out.opt_u64(F::MODEL_REP_TOTAL, ls, r.total_bytes);
        out.opt_u64(F::MODEL_REP_DEVICE, ls, r.device_bytes);
    }
    if let Some(r) = &m.runtime {
        out.opt_u64(F::MODEL_KV_POOL_TOKENS, ls, r.kv_tokens);
        out.opt_f64(F::MODEL_MEMORY_UTILIZATION, ls, r.memory_utilization);
    }
}

#[cfg(test)]
pub(crate) mod tests;
