//! Snapshots for the tests: a typical desktop with a model server.

use crate::snapshot::*;
use std::collections::BTreeMap;

pub const MIB: u64 = 1 << 20;
pub const TOTAL: u64 = 17_171_480_576; // 15.99 GiB
pub const USED: u64 = 5_379_194_880; // 5.01 GiB
pub const DWM: u64 = 2_340_757_176; // 2.18 GiB
pub const LLAMA: u64 = 1_406_669_824; // 1.31 GiB
pub const WEIGHTS: u64 = 633_550_848; // 604.2 MiB
pub const KV: u64 = 448 * MIB;
pub const COMPUTE: u64 = 156_636_282; // 149.38 MiB
/// One logit row of Qwen3's 151,936-token vocabulary in f32.
pub const OUTPUT: u64 = 607_744;

/// The estimate's rows: every buffer on GPU 0 but the output buffer,
/// which llama.cpp keeps in pinned host memory.
fn estimate_devices() -> Vec<crate::model_devices::Device> {
    use crate::model_devices::{Device, DeviceId};
    let gpu_buffers = WEIGHTS + KV + COMPUTE;
    vec![
        Device {
            device: DeviceId::Gpu(0),
            weights_bytes: Some(WEIGHTS),
            kv_bytes: KV,
            recurrent_state_bytes: Some(0),
            compute_bytes: Some(COMPUTE),
            output_bytes: Some(0),
            buffers_bytes: Some(gpu_buffers),
            driver_context_bytes: None,
            total_bytes: None,
            layers: None,
            name: None,
        },
        Device {
            device: DeviceId::Host,
            weights_bytes: Some(0),
            kv_bytes: 0,
            recurrent_state_bytes: Some(0),
            compute_bytes: Some(0),
            output_bytes: Some(OUTPUT),
            buffers_bytes: Some(OUTPUT),
            driver_context_bytes: Some(0),
            total_bytes: Some(OUTPUT),
            layers: None,
            name: None,
        },
    ]
}

pub fn usage(device: u32, vram: Option<u64>, contexts: &[&str], sm: Option<u32>) -> GpuUsage {
    GpuUsage {
        device,
        vram_bytes: vram,
        spill_bytes: None,
        paged_bytes: None,
        source: "nvml".into(),
        pairing: Some(Match::Exact),
        contexts: contexts.iter().map(|c| c.to_string()).collect(),
        engines: sm.map(|s| BTreeMap::from([("sm".to_string(), s)])).unwrap_or_default(),
    }
}

pub fn process(pid: u32, name: &str, kind: ProcessKind, cpu: Option<f64>, rss_mib: u64) -> Process {
    Process {
        pid,
        host_pid: None,
        ppid: None,
        name: Some(name.into()),
        start_time: Some("2026-11-30T09:00:00.000Z".into()),
        user: Some("ana".into()),
        cmdline: Some(name.into()),
        exe: None,
        kind,
        runtimes: vec![],
        cpu_percent: cpu,
        rss_bytes: Some(rss_mib * MIB),
        rss_anon_bytes: None,
        footprint_bytes: None,
        gpu: vec![],
        models: vec![],
        reconciliation: Vec::new(),
        models_pending: false,
        listen_ports: None,
        container: None,
        host: None,
        notes: vec![],
    }
}

pub fn qwen() -> Model {
    Model {
        path: Some("/models/Qwen3-0.6B-Q8_0.gguf".into()),
        name: Some("Qwen3 0.6B".into()),
        name_source: Some(crate::snapshot::NameSource::Header),
        architecture: Some("qwen3".into()),
        kind: Some("llm".into()),
        evidence: vec!["api".into(), "mapped".into(), "cmdline".into()],
        confirmed: true,
        params: Some(596_049_920),
        file_type: Some("Q8_0".into()),
        layers: Some(28),
        context_train: Some(40_960),
        context: Some(4096),
        slots_total: Some(4),
        slots_busy: Some(1),
        server_url: Some("http://127.0.0.1:8080".into()),
        settings: Some(ModelSettings {
            context_total: Some(4096),
            context_per_seq: Some(4096),
            sequences: Some(4),
            kv_unified: Some(true),
            sources: SettingSources {
                context_total: Some(SettingSource::Api),
                context_per_seq: Some(SettingSource::Api),
                sequences: Some(SettingSource::Api),
                kv_unified: Some(SettingSource::Log),
            },
            cache_type_k: "f16".into(),
            cache_type_v: "f16".into(),
            n_gpu_layers: Some(99),
            swa_full: false,
            flash_attn: Some("auto".into()),
            ubatch: Some(256),
            ..ModelSettings::default()
        }),
        estimate: Some(ModelEstimate {
            weights_bytes: Some(WEIGHTS),
            kv_bytes: Some(KV),
            kv_bytes_per_token: Some(114_688),
            recurrent_state_bytes: None,
            kv_bytes_without_window: None,
            backend: Some("cuda".into()),
            compute_bytes: Some(COMPUTE),
            output_bytes: Some(OUTPUT),
            total_bytes: None,
            compute_why: Some("attention scores dominate".into()),
            devices: estimate_devices(),
            kv_pool_blocks: None,
        }),
        runtime: None,
        activity: Some(ModelActivity {
            requests_running: Some(1),
            requests_waiting: Some(0),
            prompt_tokens_per_second: Some(412.5),
            generation_tokens_per_second: Some(31.25),
            kv_cache_used_ratio: None,
            expires_at: None,
            source: "api:/slots,/metrics".into(),
        }),
        reported: Some(ModelReported {
            weights_bytes: Some(WEIGHTS),
            kv_bytes: Some(KV),
            compute_bytes: Some(COMPUTE),
            total_bytes: None,
            device_bytes: None,
            source: "log:/home/ana/llama.log".into(),
            memory_breakdown: None,
            buffers: vec![
                buffer("CUDA0", "model", WEIGHTS, true),
                buffer("CPU_Mapped", "model", 157 * MIB, false),
                buffer("CUDA0", "kv", KV, true),
                buffer("CUDA0", "compute", COMPUTE, true),
                buffer("CUDA_Host", "compute", 12 * MIB, false),
            ],
        }),
        notes: vec![],
    }
}

fn buffer(device: &str, kind: &str, bytes: u64, device_memory: bool) -> ReportedBuffer {
    ReportedBuffer {
        device: device.into(),
        kind: kind.into(),
        bytes,
        device_memory,
    }
}

pub fn device() -> Device {
    Device {
        index: 0,
        backend: "nvml".into(),
        vendor: "NVIDIA".into(),
        name: Some("NVIDIA GeForce RTX 4080 SUPER".into()),
        uuid: Some("GPU-3f2a9c1e-0000-0000-0000-000000000000".into()),
        pci_bus_id: Some("00000000:01:00.0".into()),
        driver_version: Some("580.159.03".into()),
        cuda_version: Some("13.0".into()),
        driver_model: Some("WDDM".into()),
        memory_total_bytes: Some(TOTAL),
        memory_used_bytes: Some(USED),
        memory_free_bytes: Some(TOTAL - USED),
        memory_reserved_bytes: None,
        shared_memory_used_bytes: Some(742 * MIB),
        gpu_util_percent: Some(15),
        memory_activity_percent: Some(30),
        temperature_c: Some(37),
        power_w: Some(26.0),
        power_limit_w: Some(320.0),
        fan_percent: Some(0),
        process_list_complete: true,
        ..Device::default()
    }
}

/// An RTX 4080 SUPER with 5.01 of 15.99 GiB used: the compositor 2.18 GiB,
/// a llama-server with Qwen3-0.6B Q8_0 at 1.31 GiB, two browsers, a speech
/// app whose spill is larger than its VRAM, a process whose VRAM the driver
/// cannot tell, and a PyTorch process with nothing on the GPU.
pub fn desktop() -> Snapshot {
    let mut dwm = process(1468, "dwm.exe", ProcessKind::Compositor, Some(1.2), 180);
    dwm.gpu = vec![usage(0, Some(DWM), &["G"], Some(4))];

    let mut llama = process(4242, "llama-server", ProcessKind::Ai, Some(12.5), 712);
    llama.runtimes = vec!["cuda".into(), "cublas".into(), "llama.cpp".into()];
    llama.cmdline =
        Some("llama-server -m /models/Qwen3-0.6B-Q8_0.gguf -c 4096 -np 4 -ngl 99 --api-key <redacted>".into());
    let mut g = usage(0, Some(LLAMA), &["C"], Some(15));
    g.engines.insert("mem".into(), 3);
    llama.gpu = vec![g];
    llama.models = vec![qwen()];

    let mut chrome = process(7310, "chrome", ProcessKind::Browser, Some(3.1), 420);
    chrome.gpu = vec![usage(0, Some(612 * MIB), &["G"], Some(2))];
    let mut edge = process(7822, "msedge", ProcessKind::Browser, Some(0.4), 260);
    edge.gpu = vec![usage(0, Some(380 * MIB), &["G"], Some(0))];

    let mut speech = process(6010, "whisper-typing", ProcessKind::Ai, Some(6.0), 900);
    speech.runtimes = vec!["onnxruntime".into(), "cuda".into()];
    let mut g = usage(0, Some(96 * MIB), &["C"], Some(1));
    g.spill_bytes = Some(640 * MIB);
    g.paged_bytes = Some(32 * MIB);
    speech.gpu = vec![g];

    let mut discord = process(9120, "Discord", ProcessKind::Other, Some(0.8), 310);
    discord.gpu = vec![usage(0, None, &["G"], None)];

    let mut torch = process(5150, "python3", ProcessKind::Ai, Some(0.0), 1400);
    torch.runtimes = vec!["pytorch".into()];

    let devices = vec![device()];
    let processes = vec![dwm, llama, chrome, edge, speech, discord, torch];
    let attribution = Attribution::compute(&devices, &processes);
    Snapshot {
        schema_version: SCHEMA_VERSION,
        taken_at: "2026-11-30T17:31:58.000Z".into(),
        cpu_window_seconds: Some(1.0),
        host: Host {
            hostname: Some("desk".into()),
            os: "windows".into(),
            os_name: Some("Windows 11".into()),
            kernel: None,
            wsl: false,
            container: false,
        },
        backends: vec![Backend {
            name: "nvml".into(),
            status: BackendStatus::Ok,
            detail: "1 device, driver 580.159.03, CUDA 13.0".into(),
        }],
        devices,
        processes,
        attribution,
    }
}

/// The same desktop with the device reporting less used than the rows add
/// up to (shared surfaces counted in each process).
pub fn overcounted() -> Snapshot {
    let mut s = desktop();
    s.devices[0].memory_used_bytes = Some(4 << 30);
    s.devices[0].memory_free_bytes = Some(TOTAL - (4 << 30));
    s.attribution = Attribution::compute(&s.devices, &s.processes);
    s
}

/// The 8-H100 box both the unit tests and `tests/tui_server.rs` draw: a
/// fake-NVML scenario of its devices with what the driver holds and no
/// processes, each test adding its own.
const H100X8: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/screens/h100x8.json"));

/// Device `index` of the scenario, its processes' `vram` added to what the
/// driver holds.
fn h100(index: u32, card: &serde_json::Value, vram: u64) -> Device {
    let number = |v: &serde_json::Value| v.as_u64().expect("a number in h100x8.json");
    let text = |v: &serde_json::Value| v.as_str().map(String::from);
    let total = number(&card["memory"]["total"]);
    let used = number(&card["memory"]["used"]) + vram;
    let percent = |v: &serde_json::Value| u32::try_from(number(v)).ok();
    Device {
        index,
        name: text(&card["name"]),
        uuid: text(&card["uuid"]),
        pci_bus_id: text(&card["pci_bus_id"]),
        driver_model: None,
        memory_total_bytes: Some(total),
        memory_used_bytes: Some(used),
        memory_free_bytes: Some(total - used),
        shared_memory_used_bytes: None,
        gpu_util_percent: percent(&card["utilization"]["gpu"]),
        memory_activity_percent: percent(&card["utilization"]["memory"]),
        temperature_c: percent(&card["temperature_c"]),
        power_w: Some(number(&card["power_mw"]) as f64 / 1000.0),
        power_limit_w: Some(number(&card["power_limit_mw"]) as f64 / 1000.0),
        ..device()
    }
}

/// A server of `gpus` H100s (80 GiB) with `per_gpu` processes on each:
/// per GPU one vLLM API server (user `svc`) whose EngineCore children
/// hold the memory, one process on two GPUs (`0,1`), a root-owned
/// exporter, and PyTorch jobs of `ana`. Figures differ row to row, so a
/// figure cut or taken from the wrong row shows.
pub fn server(gpus: u32, per_gpu: u32) -> Snapshot {
    let box_of_eight: serde_json::Value = serde_json::from_str(H100X8).expect("tests/data/screens/h100x8.json");
    let mut devices = Vec::new();
    let mut processes = Vec::new();
    let cards = box_of_eight["devices"].as_array().expect("devices");
    assert!(gpus as usize <= cards.len(), "h100x8.json has {} GPUs", cards.len());
    for (index, card) in (0..gpus).zip(cards) {
        let mut used = 0u64;
        for n in 0..per_gpu {
            let pid = 10_000 + index * 100 + n;
            let (name, user, kind) = match n {
                0 => ("vllm", "svc", ProcessKind::Ai),
                1 => ("VLLM::EngineCore", "svc", ProcessKind::Ai),
                2 => ("dcgm-exporter", "root", ProcessKind::Other),
                _ => ("python3", "ana", ProcessKind::Ai),
            };
            let mut p = process(pid, name, kind, Some(f64::from(n) * 1.5), 512 + u64::from(n));
            p.user = Some(user.into());
            p.start_time = Some(format!("2026-11-30T09:{:02}:{:02}.000Z", index, n));
            if n == 1 {
                // The EngineCore under its API server.
                p.ppid = Some(pid - 1);
            }
            // 9.00 GiB, 8.25 GiB, ...: distinct on every row.
            let vram = match n {
                0 => 512 * MIB,
                2 => 0,
                _ => (9 << 30) - u64::from(n) * 256 * MIB - u64::from(index) * 3 * MIB,
            };
            used += vram;
            p.gpu = vec![usage(index, Some(vram), &["C"], Some(n * 7 % 100))];
            if index == 0 && n == 3 && gpus > 1 {
                // Data-parallel on GPU 0 and 1.
                p.gpu.push(usage(1, Some(3 << 30), &["C"], Some(40)));
            }
            processes.push(p);
        }
        if index == 1 && per_gpu > 3 {
            used += 3 << 30;
        }
        devices.push(h100(index, card, used));
    }
    let attribution = Attribution::compute(&devices, &processes);
    Snapshot {
        schema_version: SCHEMA_VERSION,
        taken_at: "2026-11-30T17:31:58.000Z".into(),
        host: Host {
            hostname: Some("dgx".into()),
            os: "linux".into(),
            os_name: Some("Ubuntu 24.04".into()),
            kernel: Some("6.8.0".into()),
            wsl: false,
            container: false,
        },
        backends: vec![Backend {
            name: "nvml".into(),
            status: BackendStatus::Ok,
            detail: format!("{gpus} devices, driver 580.159.03, CUDA 13.0"),
        }],
        devices,
        processes,
        cpu_window_seconds: Some(1.0),
        attribution,
    }
}
