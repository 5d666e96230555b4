//! The per-device rows of `gputaskman model`: where llama.cpp puts each
//! buffer of the estimate (weights, KV cache, recurrent state, compute,
//! output) for a backend and an `-ngl` split. All figures are estimates;
//! a GPU's driver context is a slot left unknown here (null), never 0.

use std::io::Write;

use gguf::{Backend, BatchSettings, ComputeEstimate, Estimate, EstimateError, FlashAttn, KvSettings, Placement};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::view::safe_text::safe;

const MIB: f64 = 1024.0 * 1024.0;

/// A GPU found, with its free memory: what `model` sizes a model for
/// (`model_args::gpus_free` reads them from NVML). Here, below the
/// snapshot's estimate rows that name a GPU, not beside the reader. A GPU
/// in MIG mode is not one: a process runs on one of its instances, which
/// are candidates of their own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GpuFree {
    pub index: u32,
    pub name: String,
    pub free_bytes: u64,
    pub total_bytes: u64,
}

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
    /// The GPU's name as NVML reports it; null for the host or when no GPU
    /// was found.
    pub name: Option<String>,
    /// Layers it holds (the output layer counting as one); null for the host.
    pub layers: Option<u32>,
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
        name: None,
        layers: None,
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

/// A discovered server's compute estimate and per-device rows, from its
/// model file and launch: on a GPU backend through the same
/// [`gguf::place`] as `gputaskman model` (one GPU, layer split), so the two
/// place the same bytes; an `-ot` that is not modelled keeps the split of
/// [`devices`] with the moved bytes unknown.
pub fn estimate_devices(
    model: &gguf::Model,
    e: &Estimate,
    launch: &Launch,
) -> Result<(ComputeEstimate, Vec<Device>), EstimateError> {
    let c = gguf::compute(model, launch.kv, launch.flash, launch.batch)?;
    let gpu = launch.gpu_index.unwrap_or(0);
    let rows = match launch.override_pattern {
        Ok(pattern) if c.backend != Backend::Cpu => {
            let split = gguf::Split {
                mode: gguf::SplitMode::Layer,
                weights: vec![1.0],
                ids: vec![gpu],
                main_gpu: 0,
                no_kv_offload: launch.no_kv_offload,
                host_pattern: pattern.map(str::to_string),
            };
            let mut rows = placed(&gguf::place(model, launch.kv, &c, &split)?, &c, &[]);
            for row in &mut rows {
                if let DeviceId::Gpu(_) = row.device {
                    row.device = DeviceId::Gpu(gpu);
                }
            }
            rows
        }
        _ => {
            let place = HostPlacement {
                no_kv_offload: launch.no_kv_offload,
                host_override_bytes: launch.override_pattern.ok().map(|_| 0),
            };
            devices(e, &c, launch.gpu_index, place)
        }
    };
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
    let gpu_compute = gguf::placement::gpu_compute(c, e.offload.n_gpu_layers, true, place.no_kv_offload);
    let host_compute = gguf::placement::host_compute(c, place.no_kv_offload);
    let (mut gpu, mut host) = (e.offload.gpu.clone(), e.offload.cpu.clone());
    if place.no_kv_offload {
        host.kv_bytes = host.kv_bytes.saturating_add(gpu.kv_bytes);
        gpu.kv_bytes = 0;
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
    let mut gpu_row = device(DeviceId::Gpu(gpu_index.unwrap_or(0)), &gpu, gpu_compute, Some(0), None);
    gpu_row.layers = Some(e.offload.n_gpu_layers);
    vec![
        gpu_row,
        device(DeviceId::Host, &host, host_compute, c.output_bytes, Some(0)),
    ]
}

/// The rows of a multi-GPU placement ([`gguf::place`]): one per GPU the
/// split uses, named as NVML names it (`gpus` in the split's order; an
/// empty list numbers them from 0), then the host with its compute buffer
/// and the output buffer (pinned host memory, llama-context.cpp
/// `output_reserve`).
pub fn placed(p: &gguf::Placed, c: &ComputeEstimate, gpus: &[GpuFree]) -> Vec<Device> {
    let mut rows: Vec<Device> = p
        .gpus
        .iter()
        .map(|g| {
            let found = gpus.get(g.gpu);
            let id = found.map_or(g.gpu as u32, |f| f.index);
            let mut row = device(DeviceId::Gpu(id), &g.placement, g.compute_bytes, Some(0), None);
            row.name = found.map(|f| f.name.clone());
            row.layers = Some(g.layers);
            row
        })
        .collect();
    rows.push(device(
        DeviceId::Host,
        &p.host,
        p.host_compute_bytes,
        c.output_bytes,
        Some(0),
    ));
    rows
}

/// A multimodal projector (`--mmproj`) loaded beside the model.
/// tools/mtmd/clip.cpp puts it on the first GPU backend device (or
/// `MTMD_BACKEND_DEVICE`), on the CPU with `--no-mmproj-offload`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Projector {
    pub path: String,
    pub device: DeviceId,
    pub weights_bytes: Option<u64>,
    /// The vision encoder's compute buffer (clip.cpp reserves it for the
    /// largest image batch): not estimated, so null.
    pub compute_bytes: Option<u64>,
}

/// Adds the projector to its device's row: its weights, and that row's
/// compute (so its buffers and total) become unknown, as the projector's
/// compute buffer is not estimated; never a figure that leaves it out.
pub fn add_projector(rows: &mut [Device], p: &Projector) {
    if let Some(row) = rows.iter_mut().find(|d| d.device == p.device) {
        row.weights_bytes = row
            .weights_bytes
            .zip(p.weights_bytes)
            .and_then(|(a, b)| a.checked_add(b));
        row.compute_bytes = None;
        row.buffers_bytes = None;
        row.total_bytes = None;
    }
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
        "  {:<12}{:>7}{:>14}{:>14}{:>14}{:>14}{:>14}{:>14}",
        "device", "layers", "weights", "KV+state", "compute", "output", "buffers", "total"
    )?;
    for d in devices {
        let name = match d.device {
            DeviceId::Gpu(i) => format!("GPU {i}"),
            DeviceId::Host => "host".to_string(),
        };
        let layers = d.layers.map_or_else(String::new, |l| format!("{l}"));
        let kv = d.recurrent_state_bytes.and_then(|s| d.kv_bytes.checked_add(s));
        let total = match (d.total_bytes, d.driver_context_bytes) {
            (Some(t), _) => mib(Some(t)),
            (None, None) if d.buffers_bytes.is_some() => "+ driver".to_string(),
            _ => "n/a".to_string(),
        };
        writeln!(
            out,
            "  {:<12}{:>7}{:>14}{:>14}{:>14}{:>14}{:>14}{:>14}",
            name,
            layers,
            mib(d.weights_bytes),
            mib(kv),
            mib(d.compute_bytes),
            mib(d.output_bytes),
            mib(d.buffers_bytes),
            total
        )?;
    }
    for d in devices {
        if let (DeviceId::Gpu(i), Some(name)) = (d.device, &d.name) {
            // NVML's names are the driver's (or a stand-in's) text.
            writeln!(out, "  GPU {i}: {}", safe(name))?;
        }
    }
    Ok(())
}
