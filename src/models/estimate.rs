//! What a model costs: estimated from its GGUF header and the settings it
//! runs with (crates/gguf's llama.cpp math), and reported by its runtime
//! (log lines, APIs). The two are kept apart in the snapshot and never
//! summed into measured totals (shared/DESIGN.md).

use super::logs;
use crate::snapshot::{Model, ModelEstimate, ModelReported, ModelSettings, NameSource, ReportedBuffer};

/// What a model file's header says of it.
pub(super) fn describe_header(model: &mut Model, m: &gguf::Model) {
    let info = m.info();
    model.name = info.name.clone();
    model.name_source = model.name.as_ref().map(|_| NameSource::Header);
    model.architecture = info.architecture.clone();
    model.kind = Some(info.kind.as_str().to_string());
    model.params = info.params;
    model.file_type = info.file_type.as_ref().map(|f| f.to_string());
    model.layers = info.layers;
    model.context_train = info.context_train.map(u64::from);
}

/// The backend llama.cpp runs on in a process, from the GPU library it
/// maps: CUDA (`libcuda`, `nvcuda.dll`, or HIP, whose ggml backend is built
/// from ggml-cuda's sources: ggml/src/ggml-hip/CMakeLists.txt), Vulkan, on
/// macOS Metal (llama.cpp's default there, GGML_METAL in
/// ggml/CMakeLists.txt), else the CPU. `None` when the process's maps could
/// not be read (which library it loaded is unknown) or it maps another GPU
/// runtime (ROCm without HIP, Level Zero, OpenCL, CANN, D3D12).
pub(super) fn backend_of(runtimes: &[String], maps_readable: bool) -> Option<gguf::Backend> {
    let has = |names: &[&str]| runtimes.iter().any(|r| names.contains(&r.as_str()));
    if has(&["cuda", "cudart", "hip"]) {
        Some(gguf::Backend::Cuda)
    } else if has(&["vulkan"]) {
        Some(gguf::Backend::Vulkan)
    } else if has(&["rocm", "level-zero", "opencl", "ascendcl", "dxcore", "d3d12"]) {
        // A GPU runtime whose ggml backend is not modelled (SYCL, OpenCL,
        // CANN, DirectML): not the CPU's, so unknown.
        None
    } else if cfg!(target_os = "macos") {
        Some(gguf::Backend::Metal)
    } else {
        maps_readable.then_some(gguf::Backend::Cpu)
    }
}

/// How a process runs the model beyond its settings: the backend
/// ([`backend_of`]) and whether it is a llama-server (which reserves one
/// logit row per slot; library users reserve `n_batch`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Runner {
    pub backend: Option<gguf::Backend>,
    pub llama_server: bool,
}

/// The estimate of a model from its header and its settings, and the
/// context llama.cpp runs it with (its padding of `-c`, the training
/// context for none); the settings the runtime did not report are filled
/// from the same math ([`ModelSettings::fill_from_estimate`]). For a model
/// with sliding-window layers it also gives what the KV cache would take
/// with `--swa-full`, so the well-known "6x" surprise is explained. The
/// compute and output buffers and the per-device rows come from the path
/// `gputaskman model` takes (`model_devices::estimate_devices`); what
/// stops them is said in `notes`.
pub(super) fn estimate(
    m: &gguf::Model,
    settings: &mut ModelSettings,
    runner: Runner,
    notes: &mut Vec<String>,
) -> Result<(ModelEstimate, u64), String> {
    let mut kv_settings = settings.to_kv();
    // `-fa auto` (or none said: llama.cpp's default) is what the backend's
    // rule makes it, as `gputaskman model` resolves it; unknown without one.
    let said = matches!(settings.flash_attn.as_deref(), Some("on" | "off"));
    if let (false, Some(backend)) = (said, runner.backend) {
        let auto = gguf::resolve_auto(m, backend, kv_settings.type_k, kv_settings.type_v);
        kv_settings.flash_attn = auto.on;
        if !auto.on {
            notes.push(format!(
                "flash attention auto is off on {}: {}",
                backend.as_str(),
                auto.why
            ));
        }
    }
    let e = gguf::estimate(m, &kv_settings).map_err(|e| e.to_string())?;
    let has_window = e.kv.caches.iter().any(|c| c.kind == gguf::CacheKind::Swa);
    let without_window = has_window && !kv_settings.swa_full;
    let full = gguf::KvSettings {
        swa_full: true,
        ..kv_settings.clone()
    };
    settings.fill_from_estimate(&e.kv);
    let mut estimate = ModelEstimate {
        weights_bytes: e.weights_bytes,
        kv_bytes: Some(e.kv.bytes),
        kv_bytes_per_token: Some(e.kv.bytes_per_token),
        recurrent_state_bytes: e.recurrent_state_bytes,
        kv_bytes_without_window: without_window
            .then(|| gguf::estimate(m, &full).ok().map(|f| f.kv.bytes))
            .flatten(),
        ..ModelEstimate::default()
    };
    match runner.backend {
        Some(backend) => place(
            m,
            &e,
            &kv_settings,
            settings,
            (backend, runner.llama_server),
            &mut estimate,
            notes,
        ),
        None => notes.push(
            "compute and placement not estimated: the backend is unknown (the process's maps are not readable, or it maps a GPU runtime whose ggml backend is not modelled)".into(),
        ),
    }
    Ok((estimate, u64::from(e.kv.context)))
}

/// Fills the compute, output and per-device figures of `out`.
fn place(
    m: &gguf::Model,
    e: &gguf::Estimate,
    kv: &gguf::KvSettings,
    settings: &ModelSettings,
    (backend, llama_server): (gguf::Backend, bool),
    out: &mut ModelEstimate,
    notes: &mut Vec<String>,
) {
    let batch = gguf::BatchSettings {
        backend,
        n_batch: settings.batch.unwrap_or(gguf::BatchSettings::default().n_batch),
        n_outputs_max: if llama_server { None } else { Some(0) },
        embeddings: false,
    };
    let pattern = settings
        .override_tensor
        .as_deref()
        .map(crate::model_devices::host_override_pattern)
        .transpose();
    if let Err(why) = &pattern {
        notes.push(format!("-ot not modelled, so the weights' split is unknown: {why}"));
    }
    // What `estimate` made of `-fa` for this backend, `auto` resolved.
    let flash = if kv.flash_attn {
        gguf::FlashAttn::On
    } else {
        gguf::FlashAttn::Off
    };
    let launch = crate::model_devices::Launch {
        kv,
        flash,
        batch: &batch,
        no_kv_offload: settings.no_kv_offload.unwrap_or(false),
        override_pattern: pattern.as_ref().map(|p| p.as_deref()).map_err(|_| ()),
        gpu_index: None,
    };
    match crate::model_devices::estimate_devices(m, e, &launch) {
        Ok((c, devices)) => {
            use crate::model_devices::sum;
            out.backend = Some(backend.as_str().to_string());
            out.compute_bytes = sum(&devices, |d| d.compute_bytes);
            out.output_bytes = sum(&devices, |d| d.output_bytes);
            out.total_bytes = sum(&devices, |d| d.total_bytes);
            out.compute_why = Some(c.why);
            out.devices = devices;
        }
        Err(why) => notes.push(format!("no compute estimate: {why}")),
    }
}

/// What the runtime's log (read from `source`) reports of a model's
/// buffers: weights, KV cache and compute, each only as the log says it.
pub(super) fn reported_from_log(source: &str, report: &logs::LogReport) -> ModelReported {
    ModelReported {
        weights_bytes: report.total(logs::BufferKind::Model, false),
        kv_bytes: report
            .total(logs::BufferKind::Kv, false)
            .or_else(|| report.kv_caches.iter().map(|c| c.bytes).reduce(|a, b| a + b)),
        compute_bytes: report.total(logs::BufferKind::Compute, false),
        total_bytes: None,
        device_bytes: None,
        source: format!("log:{source}"),
        memory_breakdown: (!report.memory_breakdown.is_empty()).then(|| report.memory_breakdown.clone()),
        buffers: report
            .buffers
            .iter()
            .map(|b| ReportedBuffer {
                device: b.device.clone(),
                kind: format!("{:?}", b.kind).to_lowercase(),
                bytes: b.bytes,
                device_memory: logs::is_device_memory(&b.device),
            })
            .collect(),
    }
}
