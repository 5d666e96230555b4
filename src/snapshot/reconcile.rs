//! Every byte of a model server, side by side: a process's measured device
//! memory set against the parts its runtime reported or that were estimated
//! for it (weights, KV cache, compute, output, the driver's context), and
//! what they leave of it, `unexplained`, with its sign (DESIGN.md rule 8).
//!
//! This is a comparison row, never a sum into a measured figure: each part
//! keeps its provenance, the reported parts and the estimated parts are
//! subtotalled apart, and the rest is the measured figure minus both. A part
//! nobody knows is named in `missing` (the rest then holds it) instead of
//! being taken as 0.
//!
//! The core, [`reconcile_device`], is pure and takes every part as an input
//! ([`ModelParts`]): the compute part comes from the runtime's log today and
//! from an estimate when one exists; whoever knows a part fills it.

use super::reconciliation::{Part, PartKind, Provenance, Reconciliation};
use super::{Device as GpuDevice, GpuUsage, Match, Model, ModelEstimate, Process};
use crate::model_devices::{Device, DeviceId};

const MIB: u64 = 1 << 20;

/// A rest is large when it is over this and over a tenth of the measured
/// figure. 300 MiB is the widest gap between [`CUDA_CONTEXT_ESTIMATE`] and
/// the contexts published for real cards (555 MiB on an RTX PRO 6000
/// Blackwell, 107 MiB on an RTX 4060 Ti: ggml-org/llama.cpp pull 23604),
/// so a smaller rest may be the context alone.
pub const LARGE_REST: u64 = 300 * MIB;

/// The estimate of a CUDA context with nothing allocated: 256 MiB. Public
/// nvidia-smi captures of an idle process that created a context: 256 MiB
/// on an RTX 3090 with torch 2.7/CUDA 12.8 (invoke-ai/InvokeAI issue 9413),
/// ~300 MB with lazy module loading since CUDA 11.7 (pytorch/pytorch issue
/// 107667); the seeds of this project measured ~0.26 GiB for PyTorch. It
/// grows with the SM count (107 to 555 MiB across cards in
/// ggml-org/llama.cpp pull 23604), hence an estimate, labelled so.
pub const CUDA_CONTEXT_ESTIMATE: u64 = 256 * MIB;

const CUDA_CONTEXT_SOURCE: &str =
    "estimate of an idle CUDA context (256 MiB; 107-555 MiB measured across cards, grows with SM count)";

/// One model's parts on one device, each known or not. Filled from the
/// runtime's reported buffers, else from the estimate; the compute part is
/// an input like the others, so an estimate of it fills it where the log
/// says nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelParts {
    pub model: Option<String>,
    pub weights: Option<(u64, Provenance, String)>,
    pub kv: Option<(u64, Provenance, String)>,
    pub compute: Option<(u64, Provenance, String)>,
    pub output: Option<(u64, Provenance, String)>,
}

impl ModelParts {
    /// The parts of `m` on the runtime's device number `ordinal` (CUDA0 is
    /// 0): its reported device buffers there when its log printed buffers.
    /// Without buffers, the estimate, but only when `sole_device` (the
    /// process holds one device: an estimate says nothing of a split) and
    /// not with `-ngl 0` (every layer on the host: the device holds none).
    pub fn on_device(m: &Model, ordinal: u32, sole_device: bool) -> ModelParts {
        let model = model_label(m);
        let mut parts = ModelParts {
            model,
            ..ModelParts::default()
        };
        if let Some(r) = m.reported.as_ref().filter(|r| !r.buffers.is_empty()) {
            let source = r.source.clone();
            // A kind the log printed at all is known: its device share, 0
            // when every buffer of it is in host memory. A kind it never
            // printed stays unknown.
            let on_device = |kinds: &[&str]| {
                let mut of_kind = r.buffers.iter().filter(|b| kinds.contains(&b.kind.as_str())).peekable();
                of_kind.peek()?;
                let bytes = of_kind
                    .filter(|b| b.device_memory && ggml_ordinal(&b.device) == ordinal)
                    .fold(0u64, |sum, b| sum.saturating_add(b.bytes));
                Some((bytes, Provenance::Reported, source.clone()))
            };
            parts.weights = on_device(&["model"]);
            parts.kv = on_device(&["kv", "rs"]);
            parts.compute = on_device(&["compute"]);
            parts.output = on_device(&["output"]);
            return parts;
        }
        if let Some(e) = m.estimate.as_ref().filter(|_| sole_device) {
            parts.fill_from_estimate(e, m.settings.as_ref().and_then(|s| s.n_gpu_layers));
        }
        parts
    }
}

impl ModelParts {
    /// The estimate's GPU row (`model_devices::estimate_devices`, the rows
    /// `gputaskman model` prints): its weights, KV cache with recurrent
    /// state, compute and output buffers, each unknown where the row says
    /// so. A CPU-backend estimate has no GPU row: every buffer is on the
    /// host, 0 on the device. No rows: the backend is unknown, so is
    /// every part.
    fn fill_from_estimate(&mut self, e: &ModelEstimate, n_gpu_layers: Option<i64>) {
        let backend = e.backend.as_deref().unwrap_or("unknown");
        let gpu = e.devices.iter().find(|d| d.device != DeviceId::Host);
        let (row, why) = match gpu {
            Some(row) if n_gpu_layers == Some(0) => {
                (row.clone(), format!("estimate ({backend}, -ngl 0: layers on the host)"))
            }
            Some(row) => (row.clone(), format!("estimate ({backend})")),
            None if !e.devices.is_empty() => (
                Device {
                    weights_bytes: Some(0),
                    kv_bytes: 0,
                    recurrent_state_bytes: Some(0),
                    compute_bytes: Some(0),
                    output_bytes: Some(0),
                    ..e.devices[0].clone()
                },
                format!("estimate ({backend}: every buffer on the host)"),
            ),
            None => return,
        };
        let kv = row.recurrent_state_bytes.map(|s| row.kv_bytes.saturating_add(s));
        let estimated = |b: Option<u64>| b.map(|b| (b, Provenance::Estimated, why.clone()));
        self.weights = estimated(row.weights_bytes);
        self.kv = estimated(kv);
        self.compute = estimated(row.compute_bytes);
        self.output = estimated(row.output_bytes);
    }
}

/// How a model is named in a part: its name, else its file's name.
fn model_label(m: &Model) -> Option<String> {
    m.name.clone().or_else(|| {
        m.path
            .as_deref()
            .map(|p| p.rsplit(['/', '\\']).next().unwrap_or(p).to_string())
    })
}

/// The device number in a ggml buffer-type name: `CUDA1` → 1, `Vulkan0` →
/// 0, `MTL0_Mapped` → 0; a name without one (`Metal`) is device 0.
pub fn ggml_ordinal(device: &str) -> u32 {
    let name = device.split('_').next().unwrap_or(device);
    let digits: String = name
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(0)
}

/// The pure core: one device's measured figure against the parts of every
/// model the process runs there and the driver's context.
pub fn reconcile_device(
    device: u32,
    measured: (u64, &str),
    pairing: Option<Match>,
    models: &[ModelParts],
    context: Option<Part>,
    cmdline: Option<&str>,
) -> Reconciliation {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for m in models {
        for (kind, figure) in [
            (PartKind::Weights, &m.weights),
            (PartKind::Kv, &m.kv),
            (PartKind::Compute, &m.compute),
            (PartKind::Output, &m.output),
        ] {
            match figure {
                Some((bytes, provenance, source)) => parts.push(Part {
                    kind,
                    bytes: *bytes,
                    provenance: *provenance,
                    source: source.clone(),
                    model: m.model.clone(),
                }),
                None if !missing.contains(&kind) => missing.push(kind),
                None => {}
            }
        }
    }
    match context {
        Some(c) => parts.push(c),
        None => missing.push(PartKind::Context),
    }
    let subtotal = |p: Provenance| {
        parts
            .iter()
            .filter(|x| x.provenance == p)
            .fold(0u64, |s, x| s.saturating_add(x.bytes))
    };
    let reported_bytes = subtotal(Provenance::Reported);
    let estimated_bytes = subtotal(Provenance::Estimated);
    let claimed = i128::from(reported_bytes) + i128::from(estimated_bytes);
    let rest = (i128::from(measured.0) - claimed).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    let large = rest.unsigned_abs() > LARGE_REST && rest.unsigned_abs() > measured.0 / 10;
    let likely_causes = if large {
        likely_causes(rest, &parts, &missing, cmdline)
    } else {
        Vec::new()
    };
    Reconciliation {
        device,
        measured_bytes: measured.0,
        measured_source: measured.1.to_string(),
        pairing,
        parts,
        missing,
        reported_bytes,
        estimated_bytes,
        unexplained_bytes: rest,
        large,
        likely_causes,
    }
}

/// What users find behind a large rest, the ones the command line names
/// first (`--lora`, `--mmproj`, a draft model).
fn likely_causes(rest: i64, parts: &[Part], missing: &[PartKind], cmdline: Option<&str>) -> Vec<String> {
    let mut causes = Vec::new();
    if rest < 0 {
        causes.push(
            "the parts claim more than the device holds: layers or the KV cache may sit on the host \
             (-ngl, -nkvo, --override-tensor), or the model is split over several GPUs"
                .to_string(),
        );
        return causes;
    }
    let args: Vec<&str> = cmdline.unwrap_or("").split_whitespace().collect();
    let has = |flags: &[&str]| {
        args.iter()
            .any(|a| flags.iter().any(|f| a == f || a.starts_with(&format!("{f}="))))
    };
    let all_reported_host = !parts.is_empty()
        && parts
            .iter()
            .filter(|p| p.kind != PartKind::Context)
            .all(|p| p.provenance == Provenance::Reported && p.bytes == 0);
    if all_reported_host {
        causes.push(
            "the runtime's log puts every buffer in host memory, yet the process holds device memory: \
             another library in it uses the GPU, or the log is of another load"
                .to_string(),
        );
    }
    let named = [
        (
            &["--mmproj", "-mm"][..],
            "a multimodal projector (--mmproj) loaded beside the model",
        ),
        (
            &["--lora", "--lora-scaled"][..],
            "a LoRA adapter (--lora) loaded on the device",
        ),
        (
            &["-md", "--model-draft"][..],
            "a draft model (-md) for speculative decoding",
        ),
    ];
    for (flags, cause) in named {
        if has(flags) {
            causes.push(cause.to_string());
        }
    }
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|k| k.label()).collect();
        causes.push(format!(
            "parts not known here: {} (the rest holds them)",
            names.join(", ")
        ));
    }
    causes.extend(
        [
            "a second model loaded in the same process (a router, or a model swapped in)",
            "an allocator pool kept after a request (ggml's CUDA pool keeps what the largest graph took)",
            "a multimodal projector or a LoRA adapter not named on the command line",
        ]
        .map(String::from),
    );
    causes
}

/// The driver's context on a device, where a documented figure exists: a
/// CUDA context on an NVIDIA device, known by the process mapping libcuda
/// or by NVML listing it among the device's compute processes (`C`) without
/// a Vulkan loader in it. Vulkan, ROCm and the others have no public figure
/// yet: unknown, not 0.
pub fn context_estimate(process: &Process, usage: &GpuUsage, device: Option<&GpuDevice>) -> Option<Part> {
    let has = |r: &str| process.runtimes.iter().any(|x| x == r);
    let nvidia = device.is_some_and(|d| d.vendor.eq_ignore_ascii_case("nvidia"));
    let compute = usage.contexts.iter().any(|c| c == "C");
    let cuda = has("cuda") || (compute && !has("vulkan"));
    (nvidia && cuda).then(|| Part {
        kind: PartKind::Context,
        bytes: CUDA_CONTEXT_ESTIMATE,
        provenance: Provenance::Estimated,
        source: CUDA_CONTEXT_SOURCE.into(),
        model: None,
    })
}

/// Fills every process's `reconciliation`: one row per device it holds
/// measured memory on, for processes running a model. The runtime's device
/// `k` is paired with the k-th of those devices by index (CUDA's default
/// order and NVML's agree on PCI order for cards of one kind): exact for a
/// process on one device, a guess otherwise.
pub fn fill(devices: &[GpuDevice], processes: &mut [Process]) {
    for p in processes.iter_mut() {
        p.reconciliation = reconcile_process(p, devices);
    }
}

fn reconcile_process(p: &Process, devices: &[GpuDevice]) -> Vec<Reconciliation> {
    if p.models.is_empty() {
        return Vec::new();
    }
    let mut measured: Vec<(&GpuUsage, u64)> = p.gpu.iter().filter_map(|g| g.vram_bytes.map(|v| (g, v))).collect();
    measured.sort_by_key(|m| m.0.device);
    let sole = measured.len() == 1;
    let placed = p
        .models
        .iter()
        .any(|m| m.reported.as_ref().is_some_and(|r| !r.buffers.is_empty()));
    measured
        .iter()
        .enumerate()
        .map(|(ordinal, &(usage, bytes))| {
            let ordinal = ordinal as u32;
            let models: Vec<ModelParts> = p
                .models
                .iter()
                .map(|m| ModelParts::on_device(m, ordinal, sole))
                .collect();
            let pairing = placed.then_some(if sole { Match::Exact } else { Match::Guess });
            let device = devices.iter().find(|d| d.index == usage.device);
            reconcile_device(
                usage.device,
                (bytes, &usage.source),
                pairing,
                &models,
                context_estimate(p, usage, device),
                p.cmdline.as_deref(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{ModelEstimate, ModelReported, ModelSettings, ReportedBuffer};

    fn buffer(device: &str, kind: &str, mib: u64) -> ReportedBuffer {
        ReportedBuffer {
            device: device.into(),
            kind: kind.into(),
            bytes: mib * MIB,
            device_memory: crate::models::logs::is_device_memory(device),
        }
    }

    fn nvidia(index: u32) -> GpuDevice {
        GpuDevice {
            index,
            vendor: "NVIDIA".into(),
            backend: "nvml".into(),
            ..GpuDevice::default()
        }
    }

    fn server(vram_mib: &[u64], models: Vec<Model>, cmdline: &str) -> Process {
        Process {
            pid: 4242,
            runtimes: vec!["cuda".into(), "llama.cpp".into()],
            cmdline: Some(cmdline.into()),
            gpu: vram_mib
                .iter()
                .enumerate()
                .map(|(i, v)| GpuUsage::memory_only(i as u32, Some(v * MIB), "nvml"))
                .collect(),
            models,
            ..Process::default()
        }
    }

    /// The buffer lines of a CUDA load: Qwen3-0.6B Q8_0, -c 4096, the
    /// capture the product is modelled on (compute 300.75 MiB on CUDA0).
    fn logged_model(buffers: Vec<ReportedBuffer>) -> Model {
        Model {
            name: Some("qwen3-0.6b".into()),
            reported: Some(ModelReported {
                source: "log:/var/log/llama.log".into(),
                buffers,
                ..ModelReported::default()
            }),
            ..Model::default()
        }
    }

    /// A model known only from its file: weights and KV estimated.
    /// A model known only from its file: weights and KV estimated on GPU
    /// 0 (a KV of None: the state layout is unknown), the compute buffer
    /// not modelled, the output buffer on the host.
    fn estimated_model(weights_mib: u64, kv_mib: Option<u64>) -> Model {
        let row = |device, weights, kv: Option<u64>, output| Device {
            device,
            weights_bytes: Some(weights),
            kv_bytes: kv.unwrap_or(0),
            recurrent_state_bytes: kv.map(|_| 0),
            compute_bytes: None,
            output_bytes: Some(output),
            buffers_bytes: None,
            driver_context_bytes: None,
            total_bytes: None,
            layers: None,
            name: None,
        };
        Model {
            estimate: Some(ModelEstimate {
                weights_bytes: Some((weights_mib + 300) * MIB),
                kv_bytes: kv_mib.map(|k| k * MIB),
                backend: Some("cuda".into()),
                devices: vec![
                    row(DeviceId::Gpu(0), weights_mib * MIB, kv_mib.map(|k| k * MIB), 0),
                    row(DeviceId::Host, 300 * MIB, Some(0), MIB),
                ],
                ..ModelEstimate::default()
            }),
            ..Model::default()
        }
    }

    /// A discovered server without a log: its GPU row is its parts (the
    /// file's token embeddings, on the host, are not), each estimated; a
    /// CPU build's rows leave nothing on the device, 0 rather than n/a;
    /// with no rows (backend unknown) every part is unknown.
    #[test]
    fn an_estimate_gives_its_gpu_row_as_the_parts_and_a_cpu_build_zeros() {
        let mut m = estimated_model(4650, Some(1024));
        let e = m.estimate.as_mut().unwrap();
        e.devices[0].compute_bytes = Some(560 * MIB);
        let p = server(&[7000], vec![m.clone()], "ollama runner --n-gpu-layers 33");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        let figures: Vec<(PartKind, u64, Provenance)> =
            r.parts.iter().map(|p| (p.kind, p.bytes / MIB, p.provenance)).collect();
        assert_eq!(
            figures,
            [
                (PartKind::Weights, 4650, Provenance::Estimated),
                (PartKind::Kv, 1024, Provenance::Estimated),
                (PartKind::Compute, 560, Provenance::Estimated),
                (PartKind::Output, 0, Provenance::Estimated),
                (PartKind::Context, 256, Provenance::Estimated),
            ]
        );
        assert_eq!(r.parts[0].source, "estimate (cuda)");
        assert!(r.missing.is_empty());
        assert_eq!(r.unexplained_bytes, (7000 - 4650 - 1024 - 560 - 256) * MIB as i64);

        let e = m.estimate.as_mut().unwrap();
        e.backend = Some("cpu".into());
        e.devices.remove(0);
        let p = server(&[1024], vec![m.clone()], "llama-server");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert_eq!(r.parts.iter().map(|p| p.bytes).sum::<u64>(), 256 * MIB);
        assert_eq!(r.parts.len(), 5);
        assert_eq!(r.parts[2].source, "estimate (cpu: every buffer on the host)");

        m.estimate.as_mut().unwrap().devices.clear();
        let p = server(&[1024], vec![m], "llama-server");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert_eq!(
            r.missing,
            [PartKind::Weights, PartKind::Kv, PartKind::Compute, PartKind::Output]
        );
    }

    #[test]
    fn a_cuda_server_is_explained_part_by_part_from_its_log() {
        let m = logged_model(vec![
            buffer("CPU_Mapped", "model", 157),
            buffer("CUDA0", "model", 604),
            buffer("CUDA0", "kv", 448),
            buffer("CUDA_Host", "output", 1),
            buffer("CUDA0", "compute", 300),
            buffer("CUDA_Host", "compute", 10),
        ]);
        let p = server(&[1700], vec![m], "llama-server -m q.gguf -c 4096");
        let r = reconcile_process(&p, &[nvidia(0)]);
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.device, 0);
        assert_eq!(r.pairing, Some(Match::Exact));
        let figures: Vec<(PartKind, u64, Provenance)> =
            r.parts.iter().map(|p| (p.kind, p.bytes / MIB, p.provenance)).collect();
        assert_eq!(
            figures,
            [
                (PartKind::Weights, 604, Provenance::Reported),
                (PartKind::Kv, 448, Provenance::Reported),
                (PartKind::Compute, 300, Provenance::Reported),
                // The output buffer is pinned host memory: 0 on the device.
                (PartKind::Output, 0, Provenance::Reported),
                (PartKind::Context, 256, Provenance::Estimated),
            ]
        );
        assert!(r.missing.is_empty());
        assert_eq!(r.reported_bytes, 1352 * MIB);
        assert_eq!(r.estimated_bytes, 256 * MIB);
        assert_eq!(r.unexplained_bytes, (1700 - 1352 - 256) as i64 * MIB as i64);
        assert!(!r.large);
        assert!(r.likely_causes.is_empty());
    }

    #[test]
    fn a_rest_beyond_the_spread_is_flagged_with_what_the_command_line_names() {
        let m = logged_model(vec![buffer("CUDA0", "model", 604), buffer("CUDA0", "kv", 448)]);
        let p = server(&[2700], vec![m], "llama-server -m q.gguf --mmproj=proj.gguf");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        // No compute or output line in this log: unknown, held by the rest.
        assert_eq!(r.missing, [PartKind::Compute, PartKind::Output]);
        assert_eq!(r.unexplained_bytes, (2700 - 604 - 448 - 256) as i64 * MIB as i64);
        assert!(r.large);
        assert!(r.likely_causes[0].contains("--mmproj"), "{:?}", r.likely_causes);
        assert!(r.likely_causes[1].contains("compute, output"), "{:?}", r.likely_causes);
        assert!(r.likely_causes.iter().any(|c| c.contains("second model")));
        assert!(r.likely_causes.iter().any(|c| c.contains("allocator pool")));
    }

    #[test]
    fn parts_over_the_measurement_leave_a_negative_rest() {
        let m = estimated_model(4935, Some(1024));
        let p = server(&[4000], vec![m], "ollama runner --n-gpu-layers 20");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert_eq!(r.pairing, None);
        assert_eq!(r.reported_bytes, 0);
        assert_eq!(r.estimated_bytes, (4935 + 1024 + 256) * MIB);
        assert_eq!(r.unexplained_bytes, -((4935 + 1024 + 256 - 4000) as i64) * MIB as i64);
        assert!(r.large);
        assert!(r.likely_causes[0].contains("more than the device holds"));
    }

    #[test]
    fn a_host_only_log_says_so_and_ngl_0_estimates_nothing_on_the_device() {
        let cpu = logged_model(vec![
            buffer("CPU_Mapped", "model", 235),
            buffer("CPU", "kv", 49),
            buffer("CPU", "compute", 24),
            buffer("CPU", "output", 4),
        ]);
        let p = server(&[900], vec![cpu], "llama-server -m g.gguf");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert_eq!(r.reported_bytes, 0);
        assert!(r
            .parts
            .iter()
            .filter(|p| p.provenance == Provenance::Reported)
            .all(|p| p.bytes == 0));
        assert_eq!(r.unexplained_bytes, (900 - 256) as i64 * MIB as i64);
        assert!(r.likely_causes[0].contains("every buffer in host memory"));

        let ngl0 = Model {
            settings: Some(ModelSettings {
                n_gpu_layers: Some(0),
                ..ModelSettings::default()
            }),
            // What `model_devices::devices` gives the GPU for -ngl 0.
            ..estimated_model(0, Some(0))
        };
        let p = server(&[300], vec![ngl0], "llama-server -ngl 0");
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert_eq!(r.estimated_bytes, 256 * MIB);
        assert!(r.parts.iter().any(|p| p.source.contains("-ngl 0")));
    }

    #[test]
    fn two_gpus_are_paired_by_order_as_a_guess_and_estimates_are_not_split() {
        let m = logged_model(vec![
            buffer("CUDA0", "model", 3000),
            buffer("CUDA1", "model", 2000),
            buffer("CUDA0", "kv", 256),
            buffer("CUDA1", "kv", 128),
        ]);
        let p = server(&[3900, 2500], vec![m], "llama-server -ts 3,2");
        let r = reconcile_process(&p, &[nvidia(0), nvidia(1)]);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].pairing, Some(Match::Guess));
        assert_eq!(r[0].reported_bytes, 3256 * MIB);
        assert_eq!(r[1].reported_bytes, 2128 * MIB);
        assert_eq!(r[1].unexplained_bytes, (2500 - 2128 - 256) as i64 * MIB as i64);

        let p = server(&[3900, 2500], vec![estimated_model(5000, None)], "llama-server");
        let r = reconcile_process(&p, &[nvidia(0), nvidia(1)]);
        // Which share sits where no estimate says: unknown, not the whole.
        assert_eq!(r[0].estimated_bytes, 256 * MIB);
        assert_eq!(
            r[0].missing,
            [PartKind::Weights, PartKind::Kv, PartKind::Compute, PartKind::Output]
        );
    }

    #[test]
    fn no_model_no_row_and_an_unknown_context_is_missing_not_zero() {
        let p = server(&[900], Vec::new(), "python train.py");
        assert!(reconcile_process(&p, &[nvidia(0)]).is_empty());

        let m = logged_model(vec![buffer("Vulkan0", "model", 500)]);
        let mut p = server(&[700], vec![m], "llama-server");
        p.runtimes = vec!["vulkan".into()];
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert!(r.missing.contains(&PartKind::Context));
        assert_eq!(r.estimated_bytes, 0);
        assert_eq!(r.unexplained_bytes, 200 * MIB as i64);

        // NVML's compute list names a CUDA context even where the process
        // maps no libcuda the scan saw (a Python wheel's bundled one)...
        p.runtimes = vec!["python".into()];
        p.gpu[0].contexts = vec!["C".into()];
        let r = &reconcile_process(&p, &[nvidia(0)])[0];
        assert_eq!(r.estimated_bytes, CUDA_CONTEXT_ESTIMATE);
        // ...but not on another vendor's card, nor beside a Vulkan loader.
        let amd = GpuDevice {
            vendor: "AMD".into(),
            ..nvidia(0)
        };
        assert!(reconcile_process(&p, &[amd])[0].missing.contains(&PartKind::Context));
        p.runtimes = vec!["vulkan".into()];
        assert!(reconcile_process(&p, &[nvidia(0)])[0]
            .missing
            .contains(&PartKind::Context));
    }

    #[test]
    fn ggml_device_names_give_their_ordinal() {
        for (name, ordinal) in [
            ("CUDA0", 0),
            ("CUDA11", 11),
            ("Vulkan1", 1),
            ("MTL0_Mapped", 0),
            ("Metal", 0),
            ("ROCm2", 2),
        ] {
            assert_eq!(ggml_ordinal(name), ordinal, "{name}");
        }
    }
}
