//! Words for what the numbers are: what is inside a process's GPU memory,
//! model labels and evidence, and the notes that explain surprises.

use super::app::App;
use super::columns::Column;
use crate::snapshot::{GpuUsage, Match, Model, Process, ProcessKind, Snapshot};
use crate::units::bytes;
use crate::view::opt;

/// Runtimes, most telling first: the table shows the first two a process has.
const RUNTIME_ORDER: &[&str] = &[
    "llama.cpp",
    "ollama",
    "vllm",
    "lm-studio",
    "koboldcpp",
    "tgi",
    "sglang",
    "whisper.cpp",
    "pytorch",
    "tensorflow",
    "onnxruntime",
    "tensorrt",
    "openvino",
    "ggml",
    "cudnn",
    "cublas",
    "cudart",
    "cuda",
    "hip",
    "rocm",
    "level-zero",
    "opencl",
    "vulkan",
    "opengl",
    "nvenc",
    "nvdec",
    "vaapi",
];

pub fn runtime_label(p: &Process) -> String {
    let mut known: Vec<&str> = RUNTIME_ORDER
        .iter()
        .copied()
        .filter(|r| p.runtimes.iter().any(|x| x == r))
        .collect();
    // Anything this list does not know still shows, after the known ones.
    known.extend(
        p.runtimes
            .iter()
            .map(String::as_str)
            .filter(|r| !RUNTIME_ORDER.contains(r)),
    );
    if known.is_empty() {
        "-".into()
    } else {
        known.into_iter().take(2).collect::<Vec<_>>().join(",")
    }
}

/// The PID, or `H:<pid>` for a process outside this container that only
/// the driver knows (its host PID).
pub fn pid_label(p: &Process) -> String {
    match p.host_pid {
        Some(h) if h == p.pid && p.name.is_none() => format!("H:{h}"),
        _ => p.pid.to_string(),
    }
}

pub fn pairing_marker(usages: &[&GpuUsage]) -> &'static str {
    if usages.iter().any(|g| g.pairing == Some(Match::Guess)) {
        "?"
    } else if usages.iter().any(|g| g.pairing == Some(Match::Exact)) {
        "*"
    } else {
        " "
    }
}

/// The model's short name ([`Model::label`]: Ollama's tag, else its file
/// name without `.gguf`, else its name).
pub fn model_name(m: &Model) -> String {
    m.label().unwrap_or("n/a").to_string()
}

/// `[api✓]`: the strongest evidence, ✓ when confirmed.
pub fn evidence_marker(m: &Model) -> String {
    let strongest = m.evidence.first().map(String::as_str).unwrap_or("?");
    format!("[{strongest}{}]", if m.confirmed { "✓" } else { "" })
}

/// A process whose models discovery has not found yet: in the live view
/// discovery is under way; a replay says what was so when it was recorded.
pub fn pending(replay: bool) -> &'static str {
    if replay {
        "was being discovered"
    } else {
        "discovering…"
    }
}

pub fn model_cell(p: &Process, replay: bool) -> String {
    match p.models.as_slice() {
        [] if p.models_pending => pending(replay).into(),
        [] => String::new(),
        [m] => format!("{} {}", model_name(m), evidence_marker(m)),
        [m, rest @ ..] => format!("{} {} +{}", model_name(m), evidence_marker(m), rest.len()),
    }
}

pub fn evidence_meaning(e: &str) -> &'static str {
    match e {
        "api" => "the runtime's local API says it is loaded",
        "mapped" => "the file is memory-mapped into the process now",
        "cmdline" => "the file is a launch argument",
        "claimed" => "the runtime's API names it, but the process neither maps it nor holds it open: a claim",
        "installed" => "the file sits in an app's model folder: proves nothing",
        _ => "a source this version does not describe",
    }
}

/// One part of a model's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Weights,
    Kv,
    Compute,
}

impl Part {
    pub fn glyph(self) -> char {
        match self {
            Part::Weights => 'W',
            Part::Kv => 'K',
            Part::Compute => 'C',
        }
    }
}

/// What the runtime said (preferred) or the file implies about the model's
/// split in device memory on `device`, and which of the two it is. Never
/// measured.
pub fn model_split(p: &Process, device: u32) -> Option<(Vec<(Part, u64)>, &'static str)> {
    let m = p.models.iter().find(|m| m.reported.is_some() || m.estimate.is_some())?;
    if let Some(r) = &m.reported {
        let single_gpu = p.gpu.iter().filter(|g| g.device != device).count() == 0;
        let on_device = |name: &str| {
            single_gpu || {
                let digits: String = name.chars().rev().take_while(char::is_ascii_digit).collect();
                digits.chars().rev().collect::<String>().parse::<u32>().ok() == Some(device)
            }
        };
        let mut parts: Vec<(Part, u64)> = Vec::new();
        for b in r.buffers.iter().filter(|b| b.device_memory && on_device(&b.device)) {
            let part = match b.kind.as_str() {
                "model" | "output" => Part::Weights,
                "kv" | "rs" => Part::Kv,
                _ => Part::Compute,
            };
            match parts.iter_mut().find(|(p, _)| *p == part) {
                Some((_, n)) => *n += b.bytes,
                None => parts.push((part, b.bytes)),
            }
        }
        if parts.is_empty() {
            for (part, v) in [
                (Part::Weights, r.weights_bytes),
                (Part::Kv, r.kv_bytes),
                (Part::Compute, r.compute_bytes),
            ] {
                parts.extend(v.map(|v| (part, v)));
            }
        }
        if !parts.is_empty() {
            parts.sort_by_key(|(p, _)| *p as u8);
            return Some((parts, "reported"));
        }
    }
    let e = m.estimate.as_ref()?;
    let mut parts = Vec::new();
    parts.extend(e.weights_bytes.map(|v| (Part::Weights, v)));
    let kv = match (e.kv_bytes, e.recurrent_state_bytes) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    parts.extend(kv.map(|v| (Part::Kv, v)));
    (!parts.is_empty()).then_some((parts, "estimated"))
}

/// What a model is doing now, for its table row, where its runtime says:
/// ` · now 2/4 busy, 31 tok/s` (slots busy of all, generated tokens a
/// second); nothing when it says neither. The detail pane has all of it.
fn now(m: &Model) -> String {
    let mut parts = Vec::new();
    if let (Some(busy), Some(total)) = (m.slots_busy, m.slots_total) {
        parts.push(format!("{busy}/{total} busy"));
    }
    if let Some(rate) = m.activity.as_ref().and_then(|a| a.generation_tokens_per_second) {
        parts.push(format!("{rate:.0} tok/s"));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" · now {}", parts.join(", ")),
    }
}

/// The "what is inside" column, for a process that holds GPU memory (a
/// GPU lists it, and not with a measured 0): the weights of a model on the
/// CPU are not inside a GPU. What its model is doing is said either way.
pub fn inside(p: &Process, replay: bool) -> String {
    let holds = p
        .gpu
        .iter()
        .any(|g| g.vram_bytes != Some(0) || g.spill_bytes.is_some_and(|s| s > 0));
    if !holds {
        return format!("-{}", p.models.first().map(now).unwrap_or_default());
    }
    if let Some(m) = p.models.first() {
        let kv = m
            .reported
            .as_ref()
            .and_then(|r| r.kv_bytes)
            .map(|k| (k, "reported"))
            .or_else(|| m.estimate.as_ref().and_then(|e| e.kv_bytes).map(|k| (k, "est.")));
        let memory = match kv {
            Some((k, how)) => format!("weights + KV cache (KV {} {how})", bytes(Some(k))),
            None => "weights + KV cache".into(),
        };
        return memory + &now(m);
    }
    if p.models_pending {
        return pending(replay).into();
    }
    match p.kind {
        ProcessKind::Browser => "page textures, video, canvas/WebGL".into(),
        ProcessKind::Compositor => "window surfaces".into(),
        ProcessKind::Game => "textures, meshes, render targets".into(),
        _ => runtime_evidence(p)
            .or_else(|| {
                p.gpu
                    .iter()
                    .any(|g| g.contexts.iter().any(|c| c == "G"))
                    .then(|| "graphics surfaces".into())
            })
            .unwrap_or_default(),
    }
}

/// The most telling runtime a process has, with what shows it: `pytorch
/// (library loaded)` for a `train.py` that maps libtorch, `vllm (name or
/// command line)`. None where no runtime is known: a PID the driver lists
/// and /proc does not, or a program with no runtime library mapped, has
/// nothing said of what is inside (a CUDA context says nothing of what
/// fills 62 GiB). Only names from [`RUNTIME_ORDER`], not the snapshot's
/// text, so nothing here needs escaping (a web view can show it as is).
pub fn runtime_evidence(p: &Process) -> Option<String> {
    use crate::procs::classify::{runtime_evidence, RuntimeEvidence};
    RUNTIME_ORDER
        .iter()
        .filter(|r| p.runtimes.iter().any(|x| x == *r))
        .find_map(|r| {
            let how = match runtime_evidence(r)? {
                RuntimeEvidence::Library => "library loaded",
                RuntimeEvidence::Name => "name or command line",
                RuntimeEvidence::NameOrLibrary => "name or library",
            };
            Some(format!("{r} ({how})"))
        })
}

/// Short notes that explain what may surprise in a process's figures.
pub fn notes(s: &Snapshot, p: &Process, replay: bool) -> Vec<String> {
    let mut out = Vec::new();
    match (p.models_pending, replay) {
        (true, false) => out.push(
            "Model discovery has not looked at this process yet: runtime APIs are probed in the background.".into(),
        ),
        (true, true) => out.push("Model discovery had not looked at this process yet when this was recorded.".into()),
        _ => {}
    }
    let vram = crate::view::tui::app::sum(p.gpu.iter().map(|g| g.vram_bytes));
    let spill = crate::view::tui::app::sum(p.gpu.iter().map(|g| g.spill_bytes));
    if spill.is_some_and(|s| s > 0) {
        let more = if spill > vram.or(Some(0)) {
            " Here it is larger than VRAM: most of the working set lives in system RAM and crosses PCIe."
        } else {
            ""
        };
        out.push(format!(
            "Spill is GPU-accessible system RAM, not proof that VRAM overflowed.{more}"
        ));
    }
    if p.gpu.iter().any(|g| g.paged_bytes.is_some()) {
        out.push("Paged is an estimate of memory moved out of the GPU's view, not a counter.".into());
    }
    // Each note on the platform it is true of. Apple's clients have no
    // memory figure at all (the footprint stands in, and says so).
    let wddm = |g: &GpuUsage| {
        s.devices
            .iter()
            .any(|d| d.index == g.device && d.driver_model.as_deref() == Some("WDDM"))
    };
    let unknown: Vec<&GpuUsage> = p
        .gpu
        .iter()
        .filter(|g| g.vram_bytes.is_none() && g.source != "apple")
        .collect();
    if unknown.iter().any(|g| wddm(g)) {
        out.push(
            "VRAM n/a: NVIDIA's driver under Windows WDDM reports no per-process figure; the Windows GPU counters give it.".into(),
        );
    } else if !unknown.is_empty() {
        out.push("VRAM n/a: the driver did not say what this process holds.".into());
    }
    if p.gpu.iter().any(|g| g.source == "wddm" || g.source == "wsl-host") {
        out.push(
            "Dedicated Usage double-counts surfaces shared between processes: rows can add up to more than the device uses.".into(),
        );
    }
    if p.gpu.iter().any(|g| g.pairing == Some(Match::Guess)) {
        out.push(
            "? this row was paired with the GPU's entry by a guess (another PID namespace or the Windows host).".into(),
        );
    }
    for m in &p.models {
        if let Some(without) = m.estimate.as_ref().and_then(|e| e.kv_bytes_without_window) {
            out.push(format!(
                "Sliding-window attention: those layers keep only their window. A window-blind estimate ({}) is an upper bound.",
                bytes(Some(without))
            ));
        }
        let reported = m.reported.as_ref().and_then(|r| {
            let device: Vec<u64> = r.buffers.iter().filter(|b| b.device_memory).map(|b| b.bytes).collect();
            if device.is_empty() {
                None
            } else {
                Some(device.iter().sum::<u64>())
            }
        });
        if let (Some(r), Some(v)) = (reported, vram) {
            if v > r {
                out.push(format!(
                    "Measured VRAM is {} more than the runtime's buffers: the CUDA/driver context and workspaces.",
                    bytes(Some(v - r))
                ));
            }
        }
    }
    out.extend(p.notes.iter().cloned());
    for m in &p.models {
        out.extend(m.notes.iter().cloned());
    }
    out
}

/// A container in a word: a Kubernetes pod as `namespace/pod`, else the
/// container's name, else the start of its id (what `docker ps` shows).
pub fn container_label(c: &crate::snapshot::Container) -> String {
    match (&c.pod, &c.name) {
        (Some(pod), _) => format!("{}/{pod}", c.namespace.as_deref().unwrap_or("?")),
        (None, Some(name)) => name.clone(),
        (None, None) => c.id.chars().take(12).collect(),
    }
}

/// A process's command line as shown, redacted again word by word: a
/// recording or a remote host's answer may carry one that was not.
pub fn command(p: &Process) -> String {
    let Some(line) = p.cmdline.as_deref() else {
        return "n/a".into();
    };
    let words: Vec<String> = line.split(' ').map(String::from).collect();
    crate::procs::redact::redact_args(&words).join(" ")
}

/// What a row says in column `c`: text as written by others (escaped and
/// cut when drawn), figures in the units of `units`, `-` where the row is on
/// no GPU, `n/a` where it is but the figure is unknown.
pub fn cell(c: Column, app: &App, p: &Process) -> String {
    let usages: Vec<_> = app.usages(p).collect();
    let on_gpu = !usages.is_empty();
    let figure = |f: fn(&GpuUsage) -> Option<u64>| {
        if on_gpu {
            bytes(app.figure(p, f))
        } else {
            "-".into()
        }
    };
    match c {
        Column::Pid => format!("{}{}", pid_label(p), pairing_marker(&usages)),
        Column::Device if !on_gpu => "-".into(),
        Column::Device => {
            let devices: std::collections::BTreeSet<u32> = usages.iter().map(|g| g.device).collect();
            // A fleet's devices go by their host's own labels, not the
            // fleet's numbering (the HOST column says which host).
            let listed = app
                .snapshot
                .as_ref()
                .map(|s| s.devices.as_slice())
                .filter(|_| p.host.is_some());
            let label = |i: &u32| listed.map_or_else(|| i.to_string(), |d| crate::snapshot::device_label(d, *i));
            devices.iter().map(label).collect::<Vec<_>>().join(",")
        }
        Column::Host => opt(p.host.as_deref()).to_string(),
        Column::Name => opt(p.name.as_deref()).to_string(),
        Column::User => opt(p.user.as_deref()).to_string(),
        Column::Container => p.container.as_ref().map_or_else(|| "-".into(), container_label),
        Column::Kind => p.kind.label().to_string(),
        Column::Runtime => runtime_label(p),
        Column::Vram => figure(|g| g.vram_bytes),
        Column::Spill => figure(|g| g.spill_bytes),
        Column::Paged => figure(|g| g.paged_bytes),
        Column::Gpu if !on_gpu => "-".into(),
        Column::Gpu => app
            .gpu_percent(p)
            .map(|v| v.to_string())
            .unwrap_or_else(|| "n/a".into()),
        Column::Cpu => p.cpu_percent.map(|c| format!("{c:.1}")).unwrap_or_else(|| "n/a".into()),
        Column::Rss => bytes(p.rss_bytes),
        Column::Model => model_cell(p, app.replay),
        Column::Inside => inside(p, app.replay),
        Column::GpuTime | Column::Energy => {
            let spent = app.usage().of_process(p);
            match c {
                _ if !on_gpu && spent.is_unknown() => "-".into(),
                Column::GpuTime => super::usage::gpu_time_cell(&spent),
                _ => super::usage::energy_cell(&spent),
            }
        }
        Column::Command => command(p),
    }
}
