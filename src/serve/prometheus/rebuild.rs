//! One host's snapshot rebuilt from the series its `serve` exported
//! (src/serve/metrics.rs writes them; this reads them back): devices from
//! `gputaskman_device_*`, processes from `gputaskman_process_*`, their
//! models from `gputaskman_model_*`. What the series do not carry (health,
//! clocks, the reconciliation, a model's settings and per-device rows)
//! stays unknown, never made up.
//!
//! Every series is input from outside: any target Prometheus scrapes in
//! the job can write `gputaskman_*` series with any labels and values. A
//! host's rows go through the caps and checks of a `--remote` answer
//! (`serve::answer::within_caps`: at most 256 devices and 4096 processes,
//! implausible figures unknown with a note, the attribution computed
//! again), and the views escape every label.

use super::answer::Series;
use crate::snapshot::{
    Attribution, Backend, BackendStatus, Device, GpuUsage, Host, MigInstance, Model, ModelActivity, ModelEstimate,
    ModelReported, PodAllocation, Process, ProcessKind, Snapshot, SCHEMA_VERSION,
};
use std::collections::BTreeMap;

/// The most pod allocations read for one device (a GPU shared by
/// time-slicing has a few; a target writing thousands is not believed).
const POD_ALLOCATIONS_MAX: usize = 64;

/// The families the fleet view asks Prometheus for: those [`snapshot`]
/// reads, and no other (a thousand hosts' clocks and health counters
/// would only cost the query).
pub const FAMILIES: [&str; 46] = [
    "gputaskman_host_info",
    "gputaskman_sample_timestamp_seconds",
    "gputaskman_backend_up",
    "gputaskman_device_info",
    "gputaskman_device_memory_total_bytes",
    "gputaskman_device_memory_used_bytes",
    "gputaskman_device_memory_free_bytes",
    "gputaskman_device_memory_reserved_bytes",
    "gputaskman_device_shared_memory_used_bytes",
    "gputaskman_device_utilization_ratio",
    "gputaskman_device_memory_activity_ratio",
    "gputaskman_device_temperature_celsius",
    "gputaskman_device_power_watts",
    "gputaskman_device_power_limit_watts",
    "gputaskman_device_fan_speed_ratio",
    "gputaskman_device_stale",
    "gputaskman_device_process_list_complete",
    "gputaskman_device_pod_allocation_info",
    "gputaskman_device_allocated_idle",
    "gputaskman_process_info",
    "gputaskman_process_resident_memory_bytes",
    "gputaskman_process_cpu_ratio",
    "gputaskman_process_vram_bytes",
    "gputaskman_process_spill_bytes",
    "gputaskman_process_paged_bytes",
    "gputaskman_process_gpu_utilization_ratio",
    "gputaskman_model_info",
    "gputaskman_model_parameters",
    "gputaskman_model_context_tokens",
    "gputaskman_model_context_train_tokens",
    "gputaskman_model_slots",
    "gputaskman_model_slots_busy",
    "gputaskman_model_requests_running",
    "gputaskman_model_requests_waiting",
    "gputaskman_model_prompt_tokens_per_second",
    "gputaskman_model_generation_tokens_per_second",
    "gputaskman_model_kv_cache_used_ratio",
    "gputaskman_model_estimated_weights_bytes",
    "gputaskman_model_estimated_kv_bytes",
    "gputaskman_model_estimated_kv_per_token_bytes",
    "gputaskman_model_estimated_recurrent_state_bytes",
    "gputaskman_model_estimated_compute_bytes",
    "gputaskman_model_estimated_output_bytes",
    "gputaskman_model_reported_weights_bytes",
    "gputaskman_model_reported_kv_bytes",
    "gputaskman_model_reported_compute_bytes",
];

/// The backend line that says what of a host's series was left out.
pub const CAP_BACKEND: &str = "prometheus answer";

/// A device's key in the series: its backend and its label (`0`, `0/1`).
type DeviceKey = (String, String);
/// A model's key: its process, its name and its path.
type ModelKey = (u32, Option<String>, Option<String>);

#[derive(Default)]
struct Rows {
    host: Option<Host>,
    taken_at: Option<f64>,
    backends: Vec<Backend>,
    devices: BTreeMap<DeviceKey, Device>,
    processes: BTreeMap<u32, Process>,
    usages: BTreeMap<(u32, DeviceKey), GpuUsage>,
    models: BTreeMap<ModelKey, Model>,
}

/// The snapshot of the host whose series these are. `taken_at` is the
/// host's own sample time where it exported one, else `fallback_taken_at`.
pub fn snapshot(series: &[&Series], fallback_taken_at: &str) -> Snapshot {
    let mut rows = Rows::default();
    for s in series {
        rows.read(s);
    }
    rows.finish(fallback_taken_at)
}

fn percent(ratio: Option<f64>) -> Option<u32> {
    ratio
        .filter(|r| (0.0..=10.0).contains(r))
        .map(|r| (r * 100.0).round() as u32)
}

impl Rows {
    fn read(&mut self, s: &Series) {
        let name = s.name();
        if let Some(family) = name.strip_prefix("gputaskman_device_") {
            return self.device(family, s);
        }
        if let Some(family) = name.strip_prefix("gputaskman_model_") {
            return self.model(family, s);
        }
        if let Some(family) = name.strip_prefix("gputaskman_process_") {
            return self.process(family, s);
        }
        match name {
            "gputaskman_host_info" => {
                let text = |l: &str| s.label(l).map(String::from);
                self.host = Some(Host {
                    hostname: text("hostname"),
                    os: text("os").unwrap_or_else(|| "unknown".into()),
                    os_name: text("os_name"),
                    kernel: text("kernel"),
                    wsl: s.label("wsl") == Some("true"),
                    container: s.label("container") == Some("true"),
                });
            }
            "gputaskman_sample_timestamp_seconds" => self.taken_at = s.value(),
            "gputaskman_backend_up" => {
                let status = match (s.count(), s.label("status")) {
                    (Some(1), _) => BackendStatus::Ok,
                    (_, Some("unavailable")) => BackendStatus::Unavailable,
                    _ => BackendStatus::Error,
                };
                self.backends.push(Backend {
                    name: s.label("backend").unwrap_or("n/a").into(),
                    status,
                    detail: "as the host's serve last exported it".into(),
                });
            }
            _ => {}
        }
    }

    fn device_entry(&mut self, s: &Series) -> Option<&mut Device> {
        let key = device_key(s)?;
        Some(self.devices.entry(key.clone()).or_insert_with(|| Device {
            backend: key.0,
            index: key.1.parse().unwrap_or(u32::MAX),
            vendor: "n/a".into(),
            ..Device::default()
        }))
    }

    fn device(&mut self, family: &str, s: &Series) {
        let Some(d) = self.device_entry(s) else { return };
        let text = |l: &str| s.label(l).map(String::from);
        match family {
            "info" => {
                d.name = text("name");
                d.vendor = text("vendor").unwrap_or_else(|| "n/a".into());
                d.uuid = text("uuid");
                d.pci_bus_id = text("pci_bus_id");
                d.driver_version = text("driver_version");
                d.cuda_version = text("cuda_version");
                d.driver_model = text("driver_model");
                d.parent = s.label("parent_device").and_then(|p| p.parse().ok());
                d.mig = match (s.label("gpu_instance"), s.label("compute_instance")) {
                    (Some(g), Some(c)) => Some(MigInstance {
                        gpu_instance_id: g.parse().unwrap_or(0),
                        compute_instance_id: c.parse().unwrap_or(0),
                        profile: text("mig_profile"),
                    }),
                    _ => None,
                };
            }
            "memory_total_bytes" => d.memory_total_bytes = s.count(),
            "memory_used_bytes" => d.memory_used_bytes = s.count(),
            "memory_free_bytes" => d.memory_free_bytes = s.count(),
            "memory_reserved_bytes" => d.memory_reserved_bytes = s.count(),
            "shared_memory_used_bytes" => d.shared_memory_used_bytes = s.count(),
            "utilization_ratio" => d.gpu_util_percent = percent(s.value()),
            "memory_activity_ratio" => d.memory_activity_percent = percent(s.value()),
            "temperature_celsius" => d.temperature_c = s.count().and_then(|t| u32::try_from(t).ok()),
            "power_watts" => d.power_w = s.value(),
            "power_limit_watts" => d.power_limit_w = s.value(),
            "fan_speed_ratio" => d.fan_percent = percent(s.value()),
            "stale" => d.stale = s.count() == Some(1),
            "process_list_complete" => d.process_list_complete = s.count() == Some(1),
            "pod_allocation_info" | "allocated_idle" => {
                let (Some(namespace), Some(pod), Some(container)) = (text("namespace"), text("pod"), text("container"))
                else {
                    return;
                };
                let pods = d.pods.get_or_insert_with(Vec::new);
                let known = pods.iter().position(|a| a.is_of(&namespace, &pod, &container));
                let a = match known {
                    Some(i) => &mut pods[i],
                    None if pods.len() < POD_ALLOCATIONS_MAX => {
                        pods.push(PodAllocation {
                            namespace,
                            pod,
                            container,
                            resource: String::new(),
                            device_id: String::new(),
                            in_use: None,
                        });
                        pods.last_mut().expect("just pushed")
                    }
                    None => return,
                };
                if family == "allocated_idle" {
                    a.in_use = s.count().map(|idle| idle == 0);
                } else {
                    a.resource = text("resource").unwrap_or_default();
                    a.device_id = text("device_id").unwrap_or_default();
                }
            }
            _ => {}
        }
    }

    fn process_entry(&mut self, s: &Series) -> Option<(u32, &mut Process)> {
        let pid: u32 = s.label("pid")?.parse().ok()?;
        let p = self.processes.entry(pid).or_insert_with(|| Process {
            pid,
            host_pid: s.label("host_pid").and_then(|h| h.parse().ok()),
            name: s.label("process").map(String::from),
            kind: s
                .label("kind")
                .and_then(|k| serde_json::from_value(serde_json::Value::String(k.into())).ok())
                .unwrap_or(ProcessKind::Other),
            runtimes: s
                .label("runtime")
                .map(|r| r.split(',').filter(|r| !r.is_empty()).map(String::from).collect())
                .unwrap_or_default(),
            container: container(s),
            ..Process::default()
        });
        Some((pid, p))
    }

    fn process(&mut self, family: &str, s: &Series) {
        let Some((pid, p)) = self.process_entry(s) else { return };
        match family {
            "info" => {
                p.user = s.label("user").map(String::from);
                p.start_time = s.label("start_time").map(String::from);
                p.cmdline = s.label("cmdline").map(String::from);
            }
            "resident_memory_bytes" => p.rss_bytes = s.count(),
            "cpu_ratio" => p.cpu_percent = s.value().filter(|v| *v >= 0.0).map(|v| v * 100.0),
            "vram_bytes" | "spill_bytes" | "paged_bytes" | "gpu_utilization_ratio" => {
                let Some(key) = device_key(s) else { return };
                let g = self.usages.entry((pid, key.clone())).or_insert_with(|| GpuUsage {
                    pairing: s
                        .label("match")
                        .and_then(|m| serde_json::from_value(serde_json::Value::String(m.into())).ok()),
                    ..GpuUsage::memory_only(u32::MAX, None, &key.0)
                });
                match family {
                    "vram_bytes" => g.vram_bytes = s.count(),
                    "spill_bytes" => g.spill_bytes = s.count(),
                    "paged_bytes" => g.paged_bytes = s.count(),
                    _ => {
                        if let (Some(engine), Some(v)) = (s.label("engine"), percent(s.value())) {
                            g.engines.insert(engine.into(), v);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn model(&mut self, family: &str, s: &Series) {
        let Some((pid, _)) = self.process_entry(s) else { return };
        let key = (
            pid,
            s.label("model").map(String::from),
            s.label("path").map(String::from),
        );
        let m = self.models.entry(key.clone()).or_insert_with(|| Model {
            name: key.1,
            path: key.2,
            architecture: s.label("architecture").map(String::from),
            file_type: s.label("file_type").map(String::from),
            evidence: s
                .label("evidence")
                .map(|e| e.split(',').filter(|e| !e.is_empty()).map(String::from).collect())
                .unwrap_or_default(),
            ..Model::default()
        });
        let count = || s.count();
        let small = || s.count().and_then(|c| u32::try_from(c).ok());
        match family {
            "info" => {
                m.kind = s.label("model_kind").map(String::from);
                m.confirmed = s.label("confirmed") == Some("true");
                m.server_url = s.label("server_url").map(String::from);
            }
            "parameters" => m.params = count(),
            "context_tokens" => m.context = count(),
            "context_train_tokens" => m.context_train = count(),
            "slots" => m.slots_total = small(),
            "slots_busy" => m.slots_busy = small(),
            "requests_running"
            | "requests_waiting"
            | "prompt_tokens_per_second"
            | "generation_tokens_per_second"
            | "kv_cache_used_ratio" => {
                let a = m.activity.get_or_insert_with(|| ModelActivity {
                    source: "prometheus".into(),
                    ..ModelActivity::default()
                });
                match family {
                    "requests_running" => a.requests_running = count(),
                    "requests_waiting" => a.requests_waiting = count(),
                    "prompt_tokens_per_second" => a.prompt_tokens_per_second = s.value(),
                    "generation_tokens_per_second" => a.generation_tokens_per_second = s.value(),
                    _ => a.kv_cache_used_ratio = s.value(),
                }
            }
            _ => {
                if let Some(part) = family.strip_prefix("estimated_") {
                    let e = m.estimate.get_or_insert_with(ModelEstimate::default);
                    match part {
                        "weights_bytes" => e.weights_bytes = count(),
                        "kv_bytes" => e.kv_bytes = count(),
                        "kv_per_token_bytes" => e.kv_bytes_per_token = count(),
                        "recurrent_state_bytes" => e.recurrent_state_bytes = count(),
                        "compute_bytes" => e.compute_bytes = count(),
                        "output_bytes" => e.output_bytes = count(),
                        _ => {}
                    }
                } else if let Some(part) = family.strip_prefix("reported_") {
                    let r = m.reported.get_or_insert_with(|| ModelReported {
                        source: s.label("source").unwrap_or("n/a").into(),
                        ..ModelReported::default()
                    });
                    match part {
                        "weights_bytes" => r.weights_bytes = count(),
                        "kv_bytes" => r.kv_bytes = count(),
                        "compute_bytes" => r.compute_bytes = count(),
                        _ => {}
                    }
                }
            }
        }
    }

    fn finish(mut self, fallback_taken_at: &str) -> Snapshot {
        // A MIG instance is numbered after every GPU of its source, as the
        // host numbers it (its label is `0/1`, not a number).
        let first_free = self
            .devices
            .values()
            .filter(|d| d.index != u32::MAX)
            .map(|d| d.index + 1)
            .max()
            .unwrap_or(0);
        for (d, index) in self
            .devices
            .values_mut()
            .filter(|d| d.index == u32::MAX)
            .zip(first_free..)
        {
            d.index = index;
        }
        for ((pid, key), mut usage) in std::mem::take(&mut self.usages) {
            let Some(p) = self.processes.get_mut(&pid) else {
                continue;
            };
            usage.device = self.devices.get(&key).map_or(u32::MAX, |d| d.index);
            p.gpu.push(usage);
        }
        for ((pid, _, _), model) in std::mem::take(&mut self.models) {
            if let Some(p) = self.processes.get_mut(&pid) {
                p.models.push(model);
            }
        }
        let mut devices: Vec<Device> = self.devices.into_values().collect();
        devices.sort_by_key(|d| (d.backend.clone(), d.index));
        let processes: Vec<Process> = self.processes.into_values().collect();
        let taken_at = self
            .taken_at
            .and_then(|t| crate::units::format_unix_nanos((t * 1e9) as i128))
            .unwrap_or_else(|| fallback_taken_at.to_string());
        let snapshot = Snapshot {
            schema_version: SCHEMA_VERSION,
            taken_at,
            cpu_window_seconds: None,
            host: self.host.unwrap_or(Host {
                hostname: None,
                os: "unknown".into(),
                os_name: None,
                kernel: None,
                wsl: false,
                container: false,
            }),
            backends: self.backends,
            attribution: Attribution::default(),
            devices,
            processes,
        };
        // Any target in the job can write these series: the host's rows
        // get the caps and checks of a `--remote` answer.
        crate::serve::answer::within_caps(snapshot, CAP_BACKEND)
    }
}

/// The device a series names: its `backend` and `device` labels.
fn device_key(s: &Series) -> Option<DeviceKey> {
    Some((s.label("backend")?.to_string(), s.label("device")?.to_string()))
}

/// The container labels of a process series (`container_runtime`,
/// `container`, `pod`, `namespace`). The id is not exported: the label (a
/// name, or the id's first 12 digits) stands for it.
fn container(s: &Series) -> Option<crate::snapshot::Container> {
    let runtime = s.label("container_runtime")?;
    let label = s.label("container").unwrap_or("n/a");
    Some(crate::snapshot::Container {
        runtime: runtime.into(),
        id: label.into(),
        name: Some(label.into()),
        pod: s.label("pod").map(String::from),
        namespace: s.label("namespace").map(String::from),
    })
}
