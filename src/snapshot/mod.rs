//! The data model every source fills and every view renders.
//!
//! The field names listed in `shared/DESIGN.md` are a contract with users'
//! scripts: add fields freely, never rename these. The rules that hold here:
//! - four kinds of number, never mixed: *measured* (a counter), *reported* (a
//!   runtime said so), *estimated* (computed from a model file), *inferred*
//!   (a pairing guess, marked by `match`);
//! - unknown is `None` (JSON `null`), never 0; a measured 0 stays 0;
//! - only measured bytes are summed (see [`Attribution`]).

pub mod diff;
pub mod gpu_choice;
pub mod health;
mod kubernetes;
pub mod load;
mod model_estimate;
mod pairing;
pub mod reconcile;
pub mod reconciliation;
pub mod runtime_report;

pub use kubernetes::PodAllocation;
pub use model_estimate::ModelEstimate;
pub use pairing::Match;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Bumped only when a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Snapshot {
    pub schema_version: u32,
    /// RFC 3339, UTC.
    pub taken_at: String,
    /// The shortest window, in seconds, over which a `cpu_percent` in this
    /// snapshot was measured (the time between a process's two readings of
    /// its CPU time); null when none was measured, as in a live view's first
    /// sample. A one-shot snapshot measures over at least 10 ms, overlapped
    /// with its work, with a nanosecond clock.
    #[serde(default)]
    pub cpu_window_seconds: Option<f64>,
    pub host: Host,
    pub backends: Vec<Backend>,
    pub devices: Vec<Device>,
    pub processes: Vec<Process>,
    pub attribution: Attribution,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Host {
    pub hostname: Option<String>,
    /// `linux`, `windows`, `macos`, ... (std::env::consts::OS).
    pub os: String,
    /// The distribution's PRETTY_NAME where known.
    pub os_name: Option<String>,
    pub kernel: Option<String>,
    /// Running inside WSL (Windows Subsystem for Linux).
    pub wsl: bool,
    /// Running inside a container (Docker, Podman, Kubernetes, ...).
    pub container: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendStatus {
    /// The source answered.
    Ok,
    /// The source does not exist here (no driver, no library): not a fault.
    Unavailable,
    /// The source exists but failed.
    Error,
}

/// One measurement source and whether it answered.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Backend {
    /// `nvml`, `drm`, `jetson`, `ascend`, `wddm`, `wsl-host`, `apple`.
    pub name: String,
    pub status: BackendStatus,
    /// One line a person can act on: why it is unavailable, what failed, or
    /// what was found.
    pub detail: String,
}

/// A query against a device that failed. A failed query is reported, never
/// turned into an empty list or a zero.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct QueryError {
    /// What was asked, e.g. `compute processes`, `memory`.
    pub query: String,
    /// The source's own words, e.g. `Unknown error (NVML 999)`.
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Device {
    /// The backend's own index (NVML index for NVIDIA). A MIG instance is
    /// numbered after every GPU of its source: its number in this snapshot
    /// only; `parent`/`mig.gpu_instance_id` (its label, `0/1`) and its
    /// UUID name it across runs.
    pub index: u32,
    /// For a MIG instance: the index of the GPU it is part of. Null for a
    /// whole GPU.
    #[serde(default)]
    pub parent: Option<u32>,
    /// For a MIG instance: which instance of its GPU it is. Null for a
    /// whole GPU (MIG off, or no MIG).
    #[serde(default)]
    pub mig: Option<MigInstance>,
    /// Which backend measured this device.
    pub backend: String,
    /// Who made the device: `NVIDIA`, `AMD`, `Intel`, `Apple`, `Huawei`
    /// (Ascend), as its backend names it.
    pub vendor: String,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    /// The PCI vendor, device and subsystem ids (NVML's pci info): what a
    /// WDDM adapter DXGI lists is matched by when its PCI address is not
    /// known (collect::wddm). Not in the JSON: the bus id already names
    /// the device, and a replayed snapshot is never matched again.
    #[serde(skip)]
    #[schemars(skip)]
    pub pci_ids: Option<PciIds>,
    pub driver_version: Option<String>,
    /// The CUDA driver API version, e.g. `13.0`.
    pub cuda_version: Option<String>,
    /// `WDDM`, `TCC`, `MCDM` on Windows; null where the notion does not apply.
    pub driver_model: Option<String>,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_free_bytes: Option<u64>,
    /// Memory the driver keeps for itself (NVML v2 memory info).
    pub memory_reserved_bytes: Option<u64>,
    /// GPU-accessible system RAM in use (WDDM shared usage); null on NVML.
    pub shared_memory_used_bytes: Option<u64>,
    pub gpu_util_percent: Option<u32>,
    /// How busy the memory controller was (NVML "memory utilization"). Not
    /// bandwidth and not capacity.
    pub memory_activity_percent: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    /// Measured: the driver's energy counter, millijoules since it loaded
    /// (NVML's total energy consumption); null where there is none. It
    /// restarts when the driver reloads (`accounting` detects that).
    #[serde(default)]
    pub energy_mj: Option<u64>,
    pub fan_percent: Option<u32>,
    pub clocks: Option<Clocks>,
    pub pcie: Option<Pcie>,
    /// False when a process-list query on this device failed: then the
    /// processes shown for it are incomplete, not "none".
    pub process_list_complete: bool,
    /// Queries that failed on this device.
    pub errors: Vec<QueryError>,
    /// Things a person should know about how this device was read.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The driver stopped answering: these are the last values it gave.
    #[serde(default)]
    pub stale: bool,
    /// Throttling, errors and whether it answers (NVML); null where the
    /// source reads no health.
    #[serde(default)]
    pub health: Option<health::Health>,
    /// In a fleet view (`--remote`, `--prometheus`): the host the device is
    /// on and its label there. Absent in one machine's own snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetPlace>,
    /// Kubernetes: the containers the kubelet allocated this device to
    /// (its pod-resources API). Absent where that is not known (no
    /// kubelet socket, or it did not answer); empty when no pod holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<PodAllocation>>,
}

/// Where a device of a fleet view is: its host, and the label the host
/// gives it (`0`, `0/1`), which the fleet's own numbering replaces in
/// `index`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct FleetPlace {
    pub host: String,
    pub label: String,
}

/// A PCI function's identity, the same for every card of one model and
/// board: vendor and device id (`10de:2684`) and the 32-bit subsystem id
/// (subsystem device id << 16 | subsystem vendor id, as NVML's
/// pciSubSystemId and DXGI's SubSysId both hold it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciIds {
    pub vendor: u16,
    pub device: u16,
    pub subsystem: u32,
}

impl std::fmt::Display for PciIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:04x}:{:04x} (subsystem {:08x})",
            self.vendor, self.device, self.subsystem
        )
    }
}

/// One MIG device: a compute instance inside a GPU instance. Its memory
/// figures are the instance's (NVML's MIG device handle); its GPU's keep
/// the whole card's. NVML gives no utilization per instance: null here.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct MigInstance {
    /// NVML's GPU instance id (nvidia-smi's "GI ID").
    pub gpu_instance_id: u32,
    /// NVML's compute instance id inside that GPU instance ("CI ID").
    pub compute_instance_id: u32,
    /// The profile, e.g. `3g.40gb`, from the MIG device's name; null when
    /// the name does not say.
    pub profile: Option<String>,
}

impl Device {
    /// What the kubelet allocated the device to, for a view
    /// ([`kubernetes::pods_line`]); None where nothing is known or allocated.
    pub fn pods_line(&self) -> Option<String> {
        kubernetes::pods_line(self.pods.as_deref()?)
    }

    /// Allocated to a pod none of whose processes uses it.
    pub fn allocated_idle(&self) -> bool {
        self.pods.as_deref().is_some_and(kubernetes::any_idle)
    }

    /// How people name the device: its index (`1`), or for a MIG instance
    /// its GPU and GPU instance id (`0/1`), with the compute instance id
    /// when it is not the first one (`0/1.1`). `--gpu` takes the same.
    pub fn label(&self) -> String {
        if let Some(place) = &self.fleet {
            return place.label.clone();
        }
        match (&self.parent, &self.mig) {
            (Some(parent), Some(mig)) if mig.compute_instance_id == 0 => {
                format!("{parent}/{}", mig.gpu_instance_id)
            }
            (Some(parent), Some(mig)) => format!("{parent}/{}.{}", mig.gpu_instance_id, mig.compute_instance_id),
            _ => self.index.to_string(),
        }
    }
}

/// The label of the device numbered `index` (see [`Device::label`]); the
/// bare number where no such device is listed.
pub fn device_label(devices: &[Device], index: u32) -> String {
    devices
        .iter()
        .find(|d| d.index == index)
        .map_or_else(|| index.to_string(), Device::label)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Clocks {
    pub graphics_mhz: Option<u32>,
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub graphics_max_mhz: Option<u32>,
    pub memory_max_mhz: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Pcie {
    pub link_gen: Option<u32>,
    pub link_width: Option<u32>,
    pub max_link_gen: Option<u32>,
    pub max_link_width: Option<u32>,
    /// Bytes per second over the last sample window.
    pub tx_bytes_per_s: Option<u64>,
    pub rx_bytes_per_s: Option<u64>,
}

/// What a process is, from its name and the runtimes it has loaded.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ProcessKind {
    Ai,
    Compositor,
    Browser,
    Game,
    #[default]
    Other,
}

impl ProcessKind {
    /// Its name as the JSON writes it (`ai`, `compositor`, ...): the views'
    /// KIND column and the live view's filter.
    pub fn label(self) -> &'static str {
        match self {
            ProcessKind::Ai => "ai",
            ProcessKind::Compositor => "compositor",
            ProcessKind::Browser => "browser",
            ProcessKind::Game => "game",
            ProcessKind::Other => "other",
        }
    }
}

/// The default is a process nothing is known of: kind `other`, every
/// value unknown.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Process {
    /// The PID in this PID namespace; for a process outside this
    /// container, the host PID (then `host_pid` says so too).
    pub pid: u32,
    /// The PID the GPU driver reported when it is not ours: inside a
    /// container NVML reports host PIDs (shown as `H:<pid>` when no process
    /// here pairs with it).
    pub host_pid: Option<u32>,
    /// The parent's PID (in the same namespace as `pid`). Absent where the
    /// platform does not say or for a process not in this /proc, as in
    /// recordings made before it existed, so those rows' JSON (and
    /// recordings) stay as they were, as `container` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    /// The short name (comm); null when the process is not visible in /proc.
    pub name: Option<String>,
    /// RFC 3339 UTC: with the PID it names the process, so a reused PID is
    /// never mistaken for the old one.
    pub start_time: Option<String>,
    pub user: Option<String>,
    /// The command line with secrets (API keys, tokens, passwords, URL
    /// credentials) replaced by `<redacted>`.
    pub cmdline: Option<String>,
    pub exe: Option<String>,
    pub kind: ProcessKind,
    /// Runtimes found from the process's name and mapped libraries, e.g.
    /// `cuda`, `llama.cpp`, `pytorch`.
    pub runtimes: Vec<String>,
    /// Percent of one core since the previous sample; null with no previous
    /// sample.
    pub cpu_percent: Option<f64>,
    pub rss_bytes: Option<u64>,
    /// Of the resident memory, what is anonymous (heap, buffers a runtime
    /// allocated) rather than file-backed (a memory-mapped model, libraries),
    /// from /proc/PID/statm (resident - shared). What a CPU runtime's KV
    /// cache grows.
    pub rss_anon_bytes: Option<u64>,
    /// macOS: the physical footprint, what the kernel books to the process
    /// (`proc_pid_rusage`, `ri_phys_footprint`), its GPU memory included on
    /// unified memory. Not VRAM, never summed as such; null where not
    /// measured (other systems, another user's process without root, or not
    /// yet reached by the footprint thread).
    #[serde(default)]
    pub footprint_bytes: Option<u64>,
    /// One entry per device the process has memory or work on.
    pub gpu: Vec<GpuUsage>,
    /// Model files the process runs (filled by model discovery).
    pub models: Vec<Model>,
    /// Per device it holds measured memory on, that figure set against the
    /// parts of its models and its driver context, and the unexplained rest
    /// (src/snapshot/reconcile.rs): a comparison, never a sum. Empty for a
    /// process without a model or without measured device memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reconciliation: Vec<reconciliation::Reconciliation>,
    /// Discovery has not looked at this process yet (the live view probes
    /// runtimes in the background): `models` is not yet known.
    #[serde(default)]
    pub models_pending: bool,
    /// TCP ports the process listens on, sorted (AI processes, read by
    /// model discovery; null when not looked at or its descriptors cannot
    /// be read). `diff` pairs a server restarted under a new PID by them.
    #[serde(default)]
    pub listen_ports: Option<Vec<u16>>,
    /// The container the process runs in, from its cgroup
    /// (src/collect/containers.rs); absent outside one, or where that cannot
    /// be read, so host processes' JSON (and recordings) stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// In a fleet view (`--remote`, `--prometheus`): the host the process
    /// runs on. Absent in one machine's own snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What could not be read, and other things a person should know.
    pub notes: Vec<String>,
}

/// A container, named where its runtime's files say.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Container {
    /// `docker`, `podman`, `containerd` (Kubernetes among them) or `lxc`.
    pub runtime: String,
    /// The runtime's id: 64 hex digits, or for lxc the container's name.
    pub id: String,
    /// The container's name; null where the runtime's files do not say.
    pub name: Option<String>,
    /// Kubernetes: the pod's name; null elsewhere or unknown.
    pub pod: Option<String>,
    /// Kubernetes: the pod's namespace; null elsewhere or unknown.
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct GpuUsage {
    /// The device's index.
    pub device: u32,
    /// Measured device-local memory held by the process; null when the
    /// source cannot say (NVML under WDDM).
    pub vram_bytes: Option<u64>,
    /// Measured GPU-accessible system RAM held by the process (WDDM Non Local
    /// Usage; Shared Usage where that counter is missing, with a note).
    pub spill_bytes: Option<u64>,
    /// Memory paged out of the GPU's view, where a source reports it. WDDM:
    /// Total Committed - Local - Non Local, floored at 0: an estimate of
    /// non-residency, not proof of paging.
    pub paged_bytes: Option<u64>,
    /// The backend that measured it.
    pub source: String,
    /// How the entry was paired with this process when its PID had to be
    /// translated (container, WSL host); null when the source gave the
    /// process's own PID (nothing was paired) or paired none.
    #[serde(rename = "match")]
    pub pairing: Option<Match>,
    /// NVML context types: `C` compute, `G` graphics, `M` MPS.
    pub contexts: Vec<String>,
    /// Engine busy percent over the last sample window, e.g. `sm`, `mem`,
    /// `enc`, `dec`. Empty when the source cannot tell.
    pub engines: BTreeMap<String, u32>,
}

impl GpuUsage {
    /// Device memory a source measured for a process in this PID namespace,
    /// and nothing else (no spill, contexts or engine times).
    pub fn memory_only(device: u32, vram_bytes: Option<u64>, source: &str) -> GpuUsage {
        GpuUsage {
            device,
            vram_bytes,
            spill_bytes: None,
            paged_bytes: None,
            source: source.into(),
            pairing: Some(Match::Exact),
            contexts: Vec::new(),
            engines: BTreeMap::new(),
        }
    }
}

/// A model a process runs. Filled by model discovery; defined here so the
/// schema is fixed from the first version.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Model {
    pub path: Option<String>,
    pub name: Option<String>,
    /// Where `name` came from; null when there is no name.
    #[serde(default)]
    pub name_source: Option<NameSource>,
    pub architecture: Option<String>,
    pub kind: Option<String>,
    /// `api`, `mapped`, `cmdline`, `installed`, strongest first.
    pub evidence: Vec<String>,
    /// Two sources, one of them `api` or `mapped`.
    pub confirmed: bool,
    pub params: Option<u64>,
    pub file_type: Option<String>,
    pub layers: Option<u32>,
    pub context_train: Option<u64>,
    pub context: Option<u64>,
    pub slots_total: Option<u32>,
    pub slots_busy: Option<u32>,
    pub server_url: Option<String>,
    /// The settings the estimate was computed with.
    pub settings: Option<ModelSettings>,
    pub estimate: Option<ModelEstimate>,
    pub reported: Option<ModelReported>,
    /// The server's own figures of its KV pool and work (vLLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<runtime_report::RuntimeReport>,
    /// What the runtime is doing now, as its API says; null when no API
    /// answered.
    #[serde(default)]
    pub activity: Option<ModelActivity>,
    /// Why something is missing or surprising.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Where a model's name came from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum NameSource {
    /// Ollama's tag (`llama3.1:8b`): its manifest names the model's blob,
    /// or `/api/ps` lists it by that name.
    OllamaTag,
    /// What another runtime's API calls it (llama.cpp's alias, LM Studio's
    /// or vLLM's model id).
    Api,
    /// `general.name` in the GGUF header.
    Header,
}

impl Model {
    /// How views name the model (the MODEL column): Ollama's tag where one
    /// is known; else its file's name without `.gguf`, unless the file is
    /// named by its content (an Ollama blob, `sha256-<hex>`, which says
    /// nothing to a reader), where the header's or the API's name comes
    /// first; else whatever name it has; None without any.
    pub fn label(&self) -> Option<&str> {
        let file = self
            .path
            .as_deref()
            .map(|p| p.rsplit(['/', '\\']).next().unwrap_or(p))
            .map(|f| f.strip_suffix(".gguf").unwrap_or(f));
        let tag = self
            .name
            .as_deref()
            .filter(|_| self.name_source == Some(NameSource::OllamaTag));
        let named_by_content = file.is_some_and(is_content_address);
        match (tag, named_by_content) {
            (Some(tag), _) => Some(tag),
            (None, true) => self.name.as_deref().or(file),
            (None, false) => file.or(self.name.as_deref()),
        }
    }
}

/// An Ollama blob's file name: `sha256-` and 64 hex digits
/// (server/images.go, GetBlobsPath).
fn is_content_address(file: &str) -> bool {
    file.strip_prefix("sha256-")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What a runtime's API says a model is doing now: *reported* figures and
/// rates of reported counters, each null where the runtime does not say.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(default)]
pub struct ModelActivity {
    /// Requests being processed (llama.cpp `requests_processing`, vLLM
    /// `num_requests_running`).
    pub requests_running: Option<u64>,
    /// Requests waiting for a slot (llama.cpp `requests_deferred`, vLLM
    /// `num_requests_waiting`).
    pub requests_waiting: Option<u64>,
    /// Prompt tokens processed per second between the last two samples of
    /// the runtime's counter: null until two samples exist (a one-shot
    /// `--json` or `--once` has one).
    pub prompt_tokens_per_second: Option<f64>,
    /// Generated tokens per second, likewise.
    pub generation_tokens_per_second: Option<f64>,
    /// Share of the KV cache in use, 0 to 1, where the runtime says it
    /// (vLLM `kv_cache_usage_perc`; llama.cpp before May 2025).
    pub kv_cache_used_ratio: Option<f64>,
    /// When the runtime will unload the model (Ollama `expires_at`).
    pub expires_at: Option<String>,
    /// The endpoints it was read from, e.g. `api:/slots,/metrics`.
    pub source: String,
}

impl ModelActivity {
    /// What a server's `/metrics` says it is doing (vLLM, SGLang, TGI);
    /// token rates are the caller's, from two reads of its counters.
    pub fn from_metrics(running: Option<u64>, waiting: Option<u64>, kv_used: Option<f64>) -> ModelActivity {
        ModelActivity {
            requests_running: running,
            requests_waiting: waiting,
            kv_cache_used_ratio: kv_used,
            source: "api:/metrics".into(),
            ..ModelActivity::default()
        }
    }
}

/// Launch settings that drive a model's memory, from the runtime's API, its
/// log, or its command line (in that order of trust).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ModelSettings {
    /// `n_ctx`: the KV cache's context in tokens, all sequences together
    /// (llama.cpp pads and rounds it: src/llama-context.cpp). Older
    /// recordings called it `context` and `sequences` `slots`.
    #[serde(default, alias = "context")]
    pub context_total: Option<u64>,
    /// `n_ctx_seq`: the context of one sequence (slot), what llama-server's
    /// `/props` and `/slots` report per slot.
    #[serde(default)]
    pub context_per_seq: Option<u64>,
    /// `n_seq_max`: sequences (llama-server slots) the cache serves.
    #[serde(default, alias = "slots")]
    pub sequences: Option<u32>,
    /// One KV stream shared by all sequences (true) or one per sequence.
    #[serde(default)]
    pub kv_unified: Option<bool>,
    /// Where each of the four figures above came from.
    #[serde(default)]
    pub sources: SettingSources,
    pub cache_type_k: String,
    pub cache_type_v: String,
    pub n_gpu_layers: Option<i64>,
    pub swa_full: bool,
    pub flash_attn: Option<String>,
    pub ubatch: Option<u32>,
    /// `-b`: the logical batch; `-nkvo`; `-ot`'s value as given.
    #[serde(default)]
    pub batch: Option<u32>,
    #[serde(default)]
    pub no_kv_offload: Option<bool>,
    #[serde(default)]
    pub override_tensor: Option<String>,
}

/// Where a setting was read: the runtime's API (what it runs now), the log
/// of its load, its command line, or the runtime's default for what none of
/// them says (a note on the model names the default and its version).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum SettingSource {
    Api,
    Log,
    Argv,
    Default,
}

/// The source of each of [`ModelSettings`]'s context figures; null where
/// the figure is unknown.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(default)]
pub struct SettingSources {
    pub context_total: Option<SettingSource>,
    pub context_per_seq: Option<SettingSource>,
    pub sequences: Option<SettingSource>,
    pub kv_unified: Option<SettingSource>,
}

/// What the runtime said about itself (log lines, API): never summed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ModelReported {
    pub weights_bytes: Option<u64>,
    pub kv_bytes: Option<u64>,
    pub compute_bytes: Option<u64>,
    /// Everything the runtime says the model takes (Ollama's `size`).
    pub total_bytes: Option<u64>,
    /// Of which in device memory (Ollama's `size_vram`).
    pub device_bytes: Option<u64>,
    /// Where it was read, e.g. `log:/var/log/llama.log`, `api:/api/ps`.
    pub source: String,
    /// Every buffer the runtime reported, per device: the GPU buffers are
    /// the split that matters.
    #[serde(default)]
    pub buffers: Vec<ReportedBuffer>,
    /// llama.cpp's memory-breakdown table (`common_memory_breakdown_print`):
    /// the allocation and the `--fit` projection, never mixed; absent when
    /// the log printed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_breakdown: Option<crate::models::breakdown::MemoryBreakdown>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ReportedBuffer {
    /// ggml's buffer name: `CUDA0`, `Vulkan0`, `CPU_Mapped`, `CUDA_Host`, ...
    pub device: String,
    /// `model`, `kv`, `compute`, `output`, `rs`.
    pub kind: String,
    pub bytes: u64,
    /// True for device memory; false for system RAM (CPU, *_Host, BLAS).
    pub device_memory: bool,
}

/// How the per-process figures relate to the device totals.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Attribution {
    /// The sum of measured per-process VRAM over all devices shown. Null
    /// when no process had a measured figure.
    pub measured_sum_bytes: Option<u64>,
    /// True when, on some device, the measured per-process sum exceeds the
    /// device's used memory, so bars are scaled to the device total.
    pub normalized: bool,
    /// Per device: measured per-process sum and what the device reports
    /// used that no listed process accounts for.
    pub devices: Vec<DeviceAttribution>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DeviceAttribution {
    pub device: u32,
    pub measured_sum_bytes: Option<u64>,
    /// Device used minus the measured sum (driver, other namespaces,
    /// processes the source cannot attribute). Null when either is unknown,
    /// when the sum exceeds it, or when the device's process list is
    /// incomplete.
    pub unattributed_bytes: Option<u64>,
    pub normalized: bool,
    /// The per-process figures add up past 2^64 bytes: no source measured
    /// that, so no sum is given (`measured_sum_bytes` null).
    #[serde(default)]
    pub implausible: bool,
}

impl Attribution {
    /// Sums only measured per-process VRAM, per device and overall.
    pub fn compute(devices: &[Device], processes: &[Process]) -> Attribution {
        // The figures by the device they name, and each GPU's MIG
        // instances: one pass over the rows, not one per device (a fleet
        // view holds thousands of devices).
        let mut named: HashMap<u32, Vec<&GpuUsage>> = HashMap::new();
        for g in processes.iter().flat_map(|p| p.gpu.iter()) {
            named.entry(g.device).or_default().push(g);
        }
        let instances = instances_by_gpu(devices);
        let mut per_device = Vec::with_capacity(devices.len());
        for device in devices {
            let counted =
                std::iter::once(device.index).chain(instances.get(&device.index).into_iter().flatten().copied());
            let usages: Vec<&GpuUsage> = counted
                .flat_map(|i| named.get(&i).into_iter().flatten().copied())
                .collect();
            // The device's own backend's figures; where it has none (NVML
            // under WDDM), those of the Windows counters on that device. Two
            // sources measuring one device are never added.
            let on_device = |own: bool| -> Vec<u64> {
                usages
                    .iter()
                    .filter(|g| (g.source == device.backend) == own)
                    .filter_map(|g| g.vram_bytes)
                    .collect()
            };
            let mut measured = on_device(true);
            if measured.is_empty() {
                measured = on_device(false);
            }
            // Checked: figures from a driver or a hostile DRM client can
            // add up past u64 (two of 2^63 summed to "0 B").
            let total = measured.iter().try_fold(0u64, |a, b| a.checked_add(*b));
            let implausible = total.is_none();
            let sum = total.filter(|_| !measured.is_empty());
            let normalized = matches!((sum, device.memory_used_bytes), (Some(s), Some(u)) if s > u);
            // With an incomplete process list, what looks unattributed may
            // belong to the processes the failed query would have listed.
            let unattributed = match (sum, device.memory_used_bytes) {
                _ if !device.process_list_complete => None,
                (Some(s), Some(u)) => u.checked_sub(s),
                (None, Some(u)) => Some(u),
                _ => None,
            };
            per_device.push(DeviceAttribution {
                device: device.index,
                measured_sum_bytes: sum,
                unattributed_bytes: unattributed.filter(|_| !implausible),
                normalized,
                implausible,
            });
        }
        // A MIG instance's processes are in its GPU's sum already.
        let sums: Vec<u64> = per_device
            .iter()
            .zip(devices)
            .filter(|(_, device)| device.parent.is_none())
            .filter_map(|(d, _)| d.measured_sum_bytes)
            .collect();
        let sum = sums.iter().try_fold(0u64, |a, b| a.checked_add(*b));
        Attribution {
            measured_sum_bytes: sum.filter(|_| !sums.is_empty()),
            normalized: per_device.iter().any(|d| d.normalized),
            devices: per_device,
        }
    }
}

/// Whether a figure on device `on` counts for device `device`: it is on it,
/// or on one of its MIG instances (whose memory is part of the GPU's).
pub fn on_or_inside(devices: &[Device], on: u32, device: u32) -> bool {
    on == device || devices.iter().any(|d| d.index == on && d.parent == Some(device))
}

/// The devices whose figures count for `device`: itself and its MIG
/// instances ([`on_or_inside`] for many figures at the cost of one).
pub fn counted_for(devices: &[Device], device: u32) -> BTreeSet<u32> {
    let mut counted = instances_by_gpu(devices).remove(&device).unwrap_or_default();
    counted.insert(device);
    counted
}

/// Each GPU's MIG instances, by the GPU's index.
fn instances_by_gpu(devices: &[Device]) -> HashMap<u32, BTreeSet<u32>> {
    let mut instances: HashMap<u32, BTreeSet<u32>> = HashMap::new();
    for d in devices {
        if let Some(gpu) = d.parent.filter(|gpu| *gpu != d.index) {
            instances.entry(gpu).or_default().insert(d.index);
        }
    }
    instances
}

/// The JSON Schema of a snapshot, as `gputaskman schema` prints it.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Snapshot)).expect("a schema is plain JSON")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn device(index: u32, used: Option<u64>) -> Device {
        Device {
            index,
            backend: "nvml".into(),
            memory_used_bytes: used,
            process_list_complete: true,
            ..Device::default()
        }
    }

    pub(crate) fn process(pid: u32, usage: &[(u32, Option<u64>)]) -> Process {
        Process {
            pid,
            gpu: usage
                .iter()
                .map(|&(device, vram_bytes)| GpuUsage {
                    device,
                    vram_bytes,
                    spill_bytes: None,
                    paged_bytes: None,
                    source: "nvml".into(),
                    pairing: Some(Match::Exact),
                    contexts: vec!["C".into()],
                    engines: BTreeMap::new(),
                })
                .collect(),
            ..Process::default()
        }
    }

    #[test]
    fn figures_that_overflow_a_sum_give_no_sum_and_say_so() {
        let devices = [device(0, Some(1000)), device(1, Some(500))];
        let processes = [
            process(1, &[(0, Some(1 << 63))]),
            process(2, &[(0, Some(1 << 63)), (1, Some(200))]),
        ];
        let a = Attribution::compute(&devices, &processes);
        assert_eq!(a.devices[0].measured_sum_bytes, None);
        assert!(a.devices[0].implausible);
        assert_eq!(a.devices[0].unattributed_bytes, None);
        assert!(!a.devices[0].normalized);
        assert_eq!(a.devices[1].measured_sum_bytes, Some(200));
        assert!(!a.devices[1].implausible);
        assert_eq!(a.measured_sum_bytes, Some(200));
        // Two devices whose sums are each fine but overflow together.
        let processes = [process(1, &[(0, Some(u64::MAX - 1))]), process(2, &[(1, Some(2))])];
        let devices = [device(0, None), device(1, None)];
        assert_eq!(Attribution::compute(&devices, &processes).measured_sum_bytes, None);
    }

    /// The MODEL column's name for a model: an Ollama blob's hash says
    /// nothing, so Ollama's tag comes first, then the header's name, then
    /// the file; a file someone named keeps its name.
    #[test]
    fn a_model_is_labelled_by_its_tag_else_a_blob_by_its_header_name() {
        let blob = format!("/usr/share/ollama/.ollama/models/blobs/sha256-{}", "8e".repeat(32));
        let model = |path: Option<&str>, name: Option<&str>, source| Model {
            path: path.map(String::from),
            name: name.map(String::from),
            name_source: source,
            ..Model::default()
        };
        let tagged = model(Some(&blob), Some("llama3.1:8b"), Some(NameSource::OllamaTag));
        assert_eq!(tagged.label(), Some("llama3.1:8b"));
        let header = model(
            Some(&blob),
            Some("Meta Llama 3.1 8B Instruct"),
            Some(NameSource::Header),
        );
        assert_eq!(header.label(), Some("Meta Llama 3.1 8B Instruct"));
        let bare = model(Some(&blob), None, None);
        assert_eq!(bare.label(), Some(&blob[blob.len() - 71..]));
        let named = model(
            Some("/m/Qwen3-8B-Q4_K_M.gguf"),
            Some("Qwen3 8B"),
            Some(NameSource::Header),
        );
        assert_eq!(named.label(), Some("Qwen3-8B-Q4_K_M"));
        // Not 64 hex digits: a name someone gave, kept.
        let short = model(Some("/m/sha256-abc"), Some("x"), Some(NameSource::Header));
        assert_eq!(short.label(), Some("sha256-abc"));
        let api = model(None, Some("openai/gpt-oss-20b"), Some(NameSource::Api));
        assert_eq!(api.label(), Some("openai/gpt-oss-20b"));
        assert_eq!(model(None, None, None).label(), None);
    }

    #[test]
    fn only_measured_bytes_are_summed_and_unknown_stays_unknown() {
        let devices = [device(0, Some(1000)), device(1, Some(500))];
        let processes = [
            process(1, &[(0, Some(300)), (1, None)]),
            process(2, &[(0, Some(200))]),
            process(3, &[(1, None)]),
        ];
        let a = Attribution::compute(&devices, &processes);
        assert_eq!(a.measured_sum_bytes, Some(500));
        assert!(!a.normalized);
        assert_eq!(a.devices[0].measured_sum_bytes, Some(500));
        assert_eq!(a.devices[0].unattributed_bytes, Some(500));
        // Device 1 has processes but none measured: the sum is unknown, not 0.
        assert_eq!(a.devices[1].measured_sum_bytes, None);
        assert_eq!(a.devices[1].unattributed_bytes, Some(500));
    }

    #[test]
    fn a_sum_over_the_device_total_is_normalized() {
        let devices = [device(0, Some(100))];
        let processes = [process(1, &[(0, Some(80))]), process(2, &[(0, Some(40))])];
        let a = Attribution::compute(&devices, &processes);
        assert!(a.normalized);
        assert!(a.devices[0].normalized);
        assert_eq!(a.devices[0].unattributed_bytes, None);
    }

    #[test]
    fn windows_counters_are_summed_where_nvml_cannot_say_and_never_added_to_it() {
        let devices = [device(0, Some(1000))];
        let mut wddm = process(1, &[(0, None), (0, Some(300))]);
        wddm.gpu[1].source = "wddm".into();
        let a = Attribution::compute(&devices, std::slice::from_ref(&wddm));
        assert_eq!(a.devices[0].measured_sum_bytes, Some(300), "NVML under WDDM says n/a");
        // Where NVML measures, its figure stands alone.
        wddm.gpu[0].vram_bytes = Some(280);
        let a = Attribution::compute(&devices, &[wddm]);
        assert_eq!(a.devices[0].measured_sum_bytes, Some(280));
    }

    #[test]
    fn an_incomplete_list_never_claims_all_memory_unattributed() {
        let mut d = device(0, Some(100));
        d.process_list_complete = false;
        let a = Attribution::compute(&[d], &[]);
        assert_eq!(a.measured_sum_bytes, None);
        assert_eq!(a.devices[0].unattributed_bytes, None);
    }

    fn instance(index: u32, parent: u32, gpu_instance_id: u32, used: Option<u64>) -> Device {
        Device {
            parent: Some(parent),
            mig: Some(MigInstance {
                gpu_instance_id,
                compute_instance_id: 0,
                profile: None,
            }),
            ..device(index, used)
        }
    }

    #[test]
    fn a_mig_gpu_sums_its_instances_processes_and_the_total_counts_each_once() {
        // GPU 0 in MIG mode (instances 2 and 3), GPU 1 without.
        let devices = [
            device(0, Some(8000)),
            device(1, Some(900)),
            instance(2, 0, 1, Some(2100)),
            instance(3, 0, 2, Some(5200)),
        ];
        let processes = [
            process(1, &[(2, Some(2000))]),
            process(2, &[(3, Some(5000))]),
            process(3, &[(1, Some(800))]),
        ];
        let a = Attribution::compute(&devices, &processes);
        assert_eq!(a.devices[0].measured_sum_bytes, Some(7000));
        assert_eq!(a.devices[0].unattributed_bytes, Some(1000));
        assert_eq!(a.devices[2].measured_sum_bytes, Some(2000));
        assert_eq!(a.devices[2].unattributed_bytes, Some(100));
        assert_eq!(a.devices[3].measured_sum_bytes, Some(5000));
        assert_eq!(a.measured_sum_bytes, Some(7800), "instances are inside their GPU's sum");
    }

    #[test]
    fn labels_name_instances_by_gpu_and_instance_ids_and_gpu_choices_parse_them() {
        use super::gpu_choice::GpuChoice;
        let gpu = device(0, None);
        assert_eq!(device(3, None).label(), "3");
        let mut mig = instance(5, 0, 1, None);
        assert_eq!(mig.label(), "0/1");
        let choice: GpuChoice = "0/1".parse().unwrap();
        assert!(choice.matches(&mig) && !choice.matches(&gpu));
        assert_eq!(choice.to_string(), "0/1");
        let whole: GpuChoice = "0".parse().unwrap();
        assert!(whole.matches(&gpu) && whole.matches(&mig), "a GPU brings its instances");
        assert!(!"1".parse::<GpuChoice>().unwrap().matches(&mig));
        mig.mig.as_mut().unwrap().compute_instance_id = 2;
        assert_eq!(mig.label(), "0/1.2");
        assert!(!choice.matches(&mig));
        let second: GpuChoice = mig.label().parse().unwrap();
        assert!(second.matches(&mig));
        assert_eq!(second.to_string(), "0/1.2");
        for bad in ["", "x", "0/", "0/a", "0/1.", "-1", "0/1/2"] {
            assert!(bad.parse::<GpuChoice>().is_err(), "{bad:?}");
        }
    }
}
