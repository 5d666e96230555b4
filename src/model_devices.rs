//! The per-device rows of `gputaskman model`: where llama.cpp puts each
//! buffer of the estimate (weights, KV cache, recurrent state, compute,
//! output) for a backend and an `-ngl` split. All figures are estimates;
//! a GPU's driver context is a slot left unknown here (null), never 0.

use std::io::Write;

use gguf::{Backend, BatchSettings, ComputeEstimate, Estimate, EstimateError, FlashAttn, KvSettings, Placement};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const MIB: f64 = 1024.0 * 1024.0;

/// `"host"` or a GPU's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceId {
    Gpu(u32),
    Host,
}

impl Serialize for DeviceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DeviceId::Gpu(i) => s.serialize_u32(*i),
            DeviceId::Host => s.serialize_str("host"),
        }
    }
}

/// Read back from a snapshot (`replay`, `diff`): an index or `"host"`.
impl<'de> Deserialize<'de> for DeviceId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Gpu(u32),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Gpu(i) => Ok(DeviceId::Gpu(i)),
            Raw::Name(n) if n == "host" => Ok(DeviceId::Host),
            Raw::Name(_) => Err(serde::de::Error::custom("a device is a GPU index or \"host\"")),
        }
    }
}

impl JsonSchema for DeviceId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DeviceId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A GPU's index, or \"host\" for system memory.",
            "oneOf": [{"type": "integer", "minimum": 0}, {"const": "host"}]
        })
    }
}

/// One device's share of the estimate: the rows of `model --json` and of a
/// discovered model's `estimate.devices` in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Device {
    pub device: DeviceId,
    pub weights_bytes: Option<u64>,
    pub kv_bytes: u64,
    pub recurrent_state_bytes: Option<u64>,
    pub compute_bytes: Option<u64>,
    pub output_bytes: Option<u64>,
    /// The buffers above, summed; null when one is unknown.
    pub buffers_bytes: Option<u64>,
    /// A GPU's driver context (CUDA, Vulkan): not estimated here, so null;
    /// 0 for the host, which has none.
    pub driver_context_bytes: Option<u64>,
    /// Buffers plus driver context; null while either is unknown.
    pub total_bytes: Option<u64>,
}

fn device(
    id: DeviceId,
    side: &Placement,
    compute: Option<u64>,
    output: Option<u64>,
    driver_context: Option<u64>,
) -> Device {
    let buffers = side
        .total()
        .and_then(|b| b.checked_add(compute?))
        .and_then(|b| b.checked_add(output?));
    Device {
        device: id,
        weights_bytes: side.weights_bytes,
        kv_bytes: side.kv_bytes,
        recurrent_state_bytes: side.recurrent_state_bytes,
        compute_bytes: compute,
        output_bytes: output,
        buffers_bytes: buffers,
        driver_context_bytes: driver_context,
        total_bytes: buffers.and_then(|b| b.checked_add(driver_context?)),
    }
}

/// Placement flags beyond `-ngl`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostPlacement {
    /// `-nkvo`: the KV cache (and so the attention) stays in host memory.
    pub no_kv_offload: bool,
    /// `-ot PATTERN=CPU`: bytes of offloaded tensors kept on the host
    /// instead (`gguf::gpu_bytes_matching`); `None` when unknown.
    pub host_override_bytes: Option<u64>,
}

/// How llama.cpp was launched, for the estimate's compute buffers and
/// placement: the KV settings (with `-ngl`), `-fa`, the batch and backend,
/// `-nkvo`, `-ot` and the GPU it runs on.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    pub kv: &'a KvSettings,
    pub flash: FlashAttn,
    pub batch: &'a BatchSettings,
    pub no_kv_offload: bool,
    /// `-ot PATTERN=CPU`'s pattern ([`host_override_pattern`]); `Err` when
    /// an override was given that is not modelled (its bytes are unknown).
    pub override_pattern: Result<Option<&'a str>, ()>,
    pub gpu_index: Option<u32>,
}

/// The one path from a model file and its launch to the compute estimate
/// and the per-device rows: `gputaskman model` and a discovered server
/// (src/models/estimate.rs) both come here, so they place the same bytes.
pub fn estimate_devices(
    model: &gguf::Model,
    e: &Estimate,
    launch: &Launch,
) -> Result<(ComputeEstimate, Vec<Device>), EstimateError> {
    let c = gguf::compute(model, launch.kv, launch.flash, launch.batch)?;
    let host_override_bytes = match launch.override_pattern {
        Ok(Some(p)) => gguf::gpu_bytes_matching(model, launch.kv.n_gpu_layers, p)?,
        Ok(None) => Some(0),
        Err(()) => None,
    };
    let place = HostPlacement {
        no_kv_offload: launch.no_kv_offload,
        host_override_bytes,
    };
    let rows = devices(e, &c, launch.gpu_index, place);
    Ok((c, rows))
}

/// `-ot PATTERN=CPU` (llama.cpp's `--override-tensor`): the pattern. Only
/// host placement of plain substrings is modelled; a regular expression or
/// another device would be a guess, so it is refused with why.
pub fn host_override_pattern(s: &str) -> Result<String, String> {
    let (pattern, device) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("{s:?}: expected PATTERN=CPU"))?;
    if !device.eq_ignore_ascii_case("cpu") {
        return Err(format!("{s:?}: only =CPU is modelled"));
    }
    if pattern.is_empty() || pattern.contains(|c: char| "\\^$.|?*+()[]{},=".contains(c)) {
        return Err(format!(
            "{s:?}: only plain name parts (like exps) are modelled, not regular expressions"
        ));
    }
    Ok(pattern.to_string())
}

/// The rows for the backend of `compute`: one host row for the CPU
/// backend (a CPU build keeps every layer in system memory whatever -ngl
/// says); otherwise, with `-nkvo` and `-ot` applied, the GPU `gpu_index` (0 when none was found) with the
/// offloaded layers and the compute buffer, and the host with the rest,
/// its compute buffer (graph inputs) and the output buffer, which
/// llama.cpp keeps in (pinned) host memory (llama-context.cpp
/// `output_reserve` picks the CPU or the device's host buffer type).
pub fn devices(e: &Estimate, c: &ComputeEstimate, gpu_index: Option<u32>, place: HostPlacement) -> Vec<Device> {
    if c.backend == Backend::Cpu {
        let all = Placement {
            weights_bytes: e.weights_bytes,
            kv_bytes: e.kv.bytes,
            recurrent_state_bytes: e.recurrent_state_bytes,
        };
        return vec![device(DeviceId::Host, &all, c.compute_bytes, c.output_bytes, Some(0))];
    }
    // With no layer offloaded llama.cpp still reserves a device compute
    // buffer (large batches are offloaded op by op), whose size is not
    // modelled: unknown.
    let mut gpu_compute = if e.offload.n_gpu_layers == 0 {
        None
    } else {
        c.compute_bytes
    };
    let mut host_compute = c.host_compute_bytes;
    let (mut gpu, mut host) = (e.offload.gpu.clone(), e.offload.cpu.clone());
    if place.no_kv_offload {
        // src/llama-kv-cache.cpp puts every layer's cache on the CPU when
        // offload_kqv is off, and the attention ops run beside it: the
        // scores and masks move to the host buffer; the device keeps the
        // larger of the feed-forward block and the logits, without masks.
        host.kv_bytes = host.kv_bytes.saturating_add(gpu.kv_bytes);
        gpu.kv_bytes = 0;
        let without_masks = |b: Option<u64>| b.map(|b| b.saturating_sub(c.masks_bytes));
        let device_side = without_masks(c.feed_forward_bytes)
            .zip(without_masks(c.logits_bytes))
            .map(|(f, l)| f.max(l));
        gpu_compute = gpu_compute.and(device_side);
        host_compute = host_compute.zip(c.attention_bytes).map(|(h, a)| h.saturating_add(a));
    }
    match place.host_override_bytes {
        Some(moved) => {
            gpu.weights_bytes = gpu.weights_bytes.map(|w| w.saturating_sub(moved));
            host.weights_bytes = host.weights_bytes.and_then(|w| w.checked_add(moved));
        }
        None => {
            gpu.weights_bytes = None;
            host.weights_bytes = None;
        }
    }
    vec![
        device(DeviceId::Gpu(gpu_index.unwrap_or(0)), &gpu, gpu_compute, Some(0), None),
        device(DeviceId::Host, &host, host_compute, c.output_bytes, Some(0)),
    ]
}

/// The sum of one field over the devices; null when one is unknown.
pub fn sum(devices: &[Device], field: impl Fn(&Device) -> Option<u64>) -> Option<u64> {
    if devices.is_empty() {
        return None;
    }
    devices.iter().try_fold(0u64, |acc, d| acc.checked_add(field(d)?))
}

fn mib(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |b| format!("{:.2} MiB", b as f64 / MIB))
}

/// The compute line and the device table.
pub fn text(out: &mut dyn Write, c: &ComputeEstimate, devices: &[Device]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<16}{} backend, flash attention {}, {}-token batch, {} logit row{}",
        "compute",
        c.backend.as_str(),
        if c.flash_attn { "on" } else { "off" },
        c.n_tokens,
        c.n_outputs,
        if c.n_outputs == 1 { "" } else { "s" },
    )?;
    let why = if c.compute_bytes.is_some() {
        c.why.clone()
    } else {
        format!("n/a: {}", c.why)
    };
    writeln!(out, "  {why}")?;
    writeln!(
        out,
        "  {:<12}{:>14}{:>14}{:>14}{:>14}{:>14}{:>14}",
        "device", "weights", "KV+state", "compute", "output", "buffers", "total"
    )?;
    for d in devices {
        let name = match d.device {
            DeviceId::Gpu(i) => format!("GPU {i}"),
            DeviceId::Host => "host".to_string(),
        };
        let kv = d.recurrent_state_bytes.and_then(|s| d.kv_bytes.checked_add(s));
        let total = match (d.total_bytes, d.driver_context_bytes) {
            (Some(t), _) => mib(Some(t)),
            (None, None) if d.buffers_bytes.is_some() => "+ driver".to_string(),
            _ => "n/a".to_string(),
        };
        writeln!(
            out,
            "  {:<12}{:>14}{:>14}{:>14}{:>14}{:>14}{:>14}",
            name,
            mib(d.weights_bytes),
            mib(kv),
            mib(d.compute_bytes),
            mib(d.output_bytes),
            mib(d.buffers_bytes),
            total
        )?;
    }
    Ok(())
}
