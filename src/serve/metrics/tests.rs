use super::*;
use crate::snapshot::*;
use std::collections::BTreeMap;

pub(crate) fn snapshot() -> Snapshot {
    let device = Device {
        index: 0,
        backend: "nvml".into(),
        vendor: "NVIDIA".into(),
        name: Some("NVIDIA GeForce RTX 4080 SUPER".into()),
        uuid: Some("GPU-0".into()),
        memory_total_bytes: Some(17_171_480_576),
        memory_used_bytes: Some(5_379_194_880),
        memory_free_bytes: Some(11_792_285_696),
        gpu_util_percent: Some(15),
        memory_activity_percent: None,
        temperature_c: Some(37),
        power_w: Some(26.0),
        process_list_complete: true,
        ..Device::default()
    };
    let usage = |vram| GpuUsage {
        device: 0,
        vram_bytes: vram,
        spill_bytes: None,
        paged_bytes: None,
        source: "nvml".into(),
        pairing: Some(Match::Exact),
        contexts: vec!["C".into()],
        engines: BTreeMap::from([("sm".to_string(), 15), ("mem".to_string(), 3)]),
    };
    let process = |pid, name: &str, vram| Process {
        pid,
        host_pid: None,
        ppid: None,
        name: Some(name.into()),
        start_time: Some("2026-01-01T00:00:00Z".into()),
        user: Some("me".into()),
        cmdline: Some(format!("{name} --api-key <redacted> \"quoted\"\nnext\\line")),
        exe: None,
        kind: ProcessKind::Ai,
        runtimes: vec!["cuda".into(), "llama.cpp".into()],
        cpu_percent: Some(12.5),
        rss_bytes: Some(1 << 30),
        rss_anon_bytes: None,
        footprint_bytes: None,
        gpu: vec![usage(vram)],
        models: vec![],
        reconciliation: Vec::new(),
        models_pending: false,
        listen_ports: None,
        container: None,
        host: None,
        notes: vec![],
    };
    let mut llama = process(4242, "llama-server", Some(1_406_669_824));
    llama.models.push(Model {
        path: Some("/models/gemma.gguf".into()),
        name: Some("gemma-3-270m".into()),
        architecture: Some("gemma3".into()),
        file_type: Some("Q4_K_M".into()),
        evidence: vec!["api".into(), "mapped".into()],
        confirmed: true,
        context: Some(4096),
        estimate: Some(ModelEstimate {
            weights_bytes: Some(253_000_000),
            kv_bytes: Some(44_040_192),
            ..ModelEstimate::default()
        }),
        reported: Some(ModelReported {
            kv_bytes: Some(44_040_192),
            source: "log:/tmp/llama.log".into(),
            ..ModelReported::default()
        }),
        ..Model::default()
    });
    let wddm = process(4343, "game", None);
    let processes = vec![llama, wddm];
    let devices = vec![device];
    Snapshot {
        schema_version: SCHEMA_VERSION,
        taken_at: "2026-11-30T12:00:00.5Z".into(),
        cpu_window_seconds: Some(1.0),
        host: Host {
            hostname: Some("box".into()),
            os: "linux".into(),
            os_name: None,
            kernel: Some("6.1".into()),
            wsl: false,
            container: false,
        },
        backends: vec![Backend {
            name: "nvml".into(),
            status: BackendStatus::Ok,
            detail: String::new(),
        }],
        attribution: Attribution::compute(&devices, &processes),
        devices,
        processes,
    }
}

fn lines_of<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .collect()
}

#[test]
fn a_footprint_is_its_own_series_and_absent_when_unknown() {
    let mut snap = snapshot();
    snap.processes[0].footprint_bytes = Some(3 << 30);
    let text = render(&snap, SampleInfo::default());
    let lines = lines_of(&text, "gputaskman_process_footprint_bytes");
    assert_eq!(lines.len(), 1, "the unknown footprint has no series: {lines:?}");
    assert!(lines[0].contains("pid=\"4242\""), "{}", lines[0]);
    assert!(lines[0].ends_with(" 3221225472"), "{}", lines[0]);
}

#[test]
fn device_and_process_series_carry_their_labels_and_values() {
    let text = render(&snapshot(), SampleInfo::default());
    assert_eq!(
        lines_of(&text, "gputaskman_device_memory_used_bytes"),
        [r#"gputaskman_device_memory_used_bytes{backend="nvml",device="0",uuid="GPU-0"} 5379194880"#]
    );
    assert_eq!(
        lines_of(&text, "gputaskman_device_utilization_ratio"),
        [r#"gputaskman_device_utilization_ratio{backend="nvml",device="0",uuid="GPU-0"} 0.15"#]
    );
    assert_eq!(
        lines_of(&text, "gputaskman_process_vram_bytes"),
        [concat!(
            r#"gputaskman_process_vram_bytes{pid="4242",process="llama-server",kind="ai",runtime="cuda,llama.cpp","#,
            r#"backend="nvml",device="0",uuid="GPU-0",match="exact"} 1406669824"#
        )]
    );
    assert!(text.contains(r#"engine="sm"} 0.15"#), "{text}");
    assert!(text.contains("# TYPE gputaskman_process_vram_bytes gauge\n"));
    assert!(text.contains("# HELP gputaskman_process_vram_bytes Measured: "));
    assert_eq!(
        lines_of(&text, "gputaskman_sample_timestamp_seconds"),
        ["gputaskman_sample_timestamp_seconds 1796040000.5"]
    );
}

#[test]
fn the_reconciliation_row_gives_each_part_under_its_provenance_and_the_signed_rest() {
    use crate::snapshot::reconciliation::{Part, PartKind};
    let mut snap = snapshot();
    let part = |kind, bytes, provenance, model: Option<&str>| Part {
        kind,
        bytes,
        provenance,
        source: "log:/l".into(),
        model: model.map(String::from),
    };
    snap.processes[0].reconciliation = vec![Reconciliation {
        device: 0,
        measured_bytes: 1_406_669_824,
        measured_source: "nvml".into(),
        pairing: None,
        parts: vec![
            part(PartKind::Weights, 633_339_904, Provenance::Reported, Some("qwen3")),
            part(PartKind::Context, 268_435_456, Provenance::Estimated, None),
        ],
        missing: vec![PartKind::Kv],
        reported_bytes: 633_339_904,
        estimated_bytes: 268_435_456,
        unexplained_bytes: -5,
        large: false,
        likely_causes: vec![],
    }];
    let text = render(&snap, SampleInfo::default());
    let at = r#"{pid="4242",process="llama-server",kind="ai",runtime="cuda,llama.cpp",backend="nvml",device="0",uuid="GPU-0""#;
    assert_eq!(
        lines_of(&text, "gputaskman_process_reported_part_bytes"),
        [format!(
            r#"gputaskman_process_reported_part_bytes{at},part="weights",model="qwen3"}} 633339904"#
        )]
    );
    assert_eq!(
        lines_of(&text, "gputaskman_process_estimated_part_bytes"),
        [format!(
            r#"gputaskman_process_estimated_part_bytes{at},part="context"}} 268435456"#
        )]
    );
    assert_eq!(
        lines_of(&text, "gputaskman_process_unexplained_bytes"),
        [format!("gputaskman_process_unexplained_bytes{at}}} -5")]
    );
    assert_eq!(
        lines_of(&text, "gputaskman_process_unexplained_large"),
        [format!("gputaskman_process_unexplained_large{at}}} 0")]
    );
}

#[test]
fn a_mig_instance_and_its_processes_are_labelled_with_the_instance() {
    let mut snap = snapshot();
    snap.devices.push(Device {
        index: 1,
        parent: Some(0),
        mig: Some(crate::snapshot::MigInstance {
            gpu_instance_id: 1,
            compute_instance_id: 0,
            profile: Some("3g.40gb".into()),
        }),
        uuid: Some("MIG-1".into()),
        memory_used_bytes: Some(2 << 30),
        ..snap.devices[0].clone()
    });
    snap.processes[0].gpu[0].device = 1;
    let text = render(&snap, SampleInfo::default());
    let instance = r#"backend="nvml",device="0/1",uuid="MIG-1",parent_device="0",gpu_instance="1",compute_instance="0",mig_profile="3g.40gb""#;
    assert_eq!(
        lines_of(&text, "gputaskman_device_memory_used_bytes"),
        [
            r#"gputaskman_device_memory_used_bytes{backend="nvml",device="0",uuid="GPU-0"} 5379194880"#.to_string(),
            format!("gputaskman_device_memory_used_bytes{{{instance}}} 2147483648")
        ]
    );
    let vram = lines_of(&text, "gputaskman_process_vram_bytes");
    assert!(
        vram[0].contains(&format!("{instance},match=\"exact\"}} 1406669824")),
        "{vram:?}"
    );
}

#[test]
fn a_process_in_a_container_carries_its_container_labels() {
    let mut snap = snapshot();
    snap.processes[0].container = Some(crate::snapshot::Container {
        runtime: "containerd".into(),
        id: "8e1ac3a6f1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c".into(),
        name: Some("trainer".into()),
        pod: Some("llm-train-0".into()),
        namespace: Some("ml".into()),
    });
    let text = render(&snap, SampleInfo::default());
    assert_eq!(
        lines_of(&text, "gputaskman_process_vram_bytes"),
        [concat!(
            r#"gputaskman_process_vram_bytes{pid="4242",process="llama-server",kind="ai",runtime="cuda,llama.cpp","#,
            r#"container_runtime="containerd",container="trainer",pod="llm-train-0",namespace="ml","#,
            r#"backend="nvml",device="0",uuid="GPU-0",match="exact"} 1406669824"#
        )]
    );
    // Unnamed: the id's first 12 digits, as `docker ps` shows it.
    let c = snap.processes[0].container.as_mut().unwrap();
    (c.name, c.pod, c.namespace) = (None, None, None);
    let text = render(&snap, SampleInfo::default());
    assert!(
        lines_of(&text, "gputaskman_process_vram_bytes")[0]
            .contains(r#"runtime="cuda,llama.cpp",container_runtime="containerd",container="8e1ac3a6f1b2",backend="#),
        "{text}"
    );
}

#[test]
fn unknown_values_write_no_sample() {
    let text = render(&snapshot(), SampleInfo::default());
    // The second process's VRAM is unknown (WDDM): no series, not a 0.
    let vram = lines_of(&text, "gputaskman_process_vram_bytes");
    assert_eq!(vram.len(), 1);
    assert!(!vram[0].contains(r#"pid="4343""#));
    // Its utilization is known, so that series exists.
    assert!(lines_of(&text, "gputaskman_process_gpu_utilization_ratio")
        .iter()
        .any(|l| l.contains(r#"pid="4343""#)));
    // Memory activity is unknown on the device: no family at all.
    assert!(!text.contains("gputaskman_device_memory_activity_ratio"));
    assert!(!text.contains(" NaN"));
}

#[test]
fn estimate_and_reported_are_different_names() {
    let text = render(&snapshot(), SampleInfo::default());
    let est = lines_of(&text, "gputaskman_model_estimated_kv_bytes");
    let rep = lines_of(&text, "gputaskman_model_reported_kv_bytes");
    assert_eq!(est.len(), 1);
    assert_eq!(rep.len(), 1);
    assert!(est[0].contains(r#"model="gemma-3-270m""#));
    assert!(est[0].contains(r#"architecture="gemma3",file_type="Q4_K_M",evidence="api,mapped""#));
    assert!(rep[0].contains(r#"source="log:/tmp/llama.log""#));
    // A value absent from the estimate writes nothing.
    assert!(!text.contains("gputaskman_model_estimated_recurrent_state_bytes"));
}

#[test]
fn no_series_repeats_a_label_name() {
    let text = render(&snapshot(), SampleInfo::default());
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(labels) = line.split_once('{').map(|(_, rest)| rest) else {
            continue;
        };
        let mut names = HashSet::new();
        // Label values are escaped, so `",` only ends a value.
        for pair in labels.split("\",") {
            let name = pair.split('=').next().unwrap();
            assert!(names.insert(name.to_string()), "{name} twice in {line}");
        }
    }
}

#[test]
fn label_values_are_escaped() {
    let text = render(&snapshot(), SampleInfo::default());
    let info = lines_of(&text, "gputaskman_process_info");
    assert!(
        info[0].contains(r#"cmdline="llama-server --api-key <redacted> \"quoted\"\nnext\\line""#),
        "{}",
        info[0]
    );
    assert!(text.lines().all(|l| !l.is_empty()));
}

#[test]
fn label_values_carry_no_character_a_terminal_obeys() {
    let mut snap = snapshot();
    snap.processes[0].cmdline = Some("srv \u{1b}]0;PWNED\u{7}\r\u{9b}31m\u{202e}fdp.exe".into());
    snap.processes[0].name = Some("\u{1b}[2J".into());
    let text = render(&snap, SampleInfo::default());
    let bad: Vec<char> = text
        .chars()
        .filter(|c| *c != '\n' && crate::view::safe_text::hidden(*c))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    let info = lines_of(&text, "gputaskman_process_info");
    assert!(
        info[0].contains(r#"cmdline="srv \\e]0;PWNED\\x07\\r\\u{9b}31m\\u{202e}fdp.exe""#),
        "{}",
        info[0]
    );
    assert!(text.contains(r#"process="\\e[2J""#), "{text}");
}

#[test]
fn a_long_command_line_is_clipped_at_a_character_boundary() {
    let long = "é".repeat(1000);
    let c = clip(&long);
    assert!(c.len() <= CMDLINE_LABEL_MAX);
    assert!(c.ends_with("..."));
}

#[test]
fn duplicate_label_sets_are_written_once() {
    let mut snap = snapshot();
    let dup = snap.processes[0].clone();
    snap.processes.push(dup);
    let text = render(&snap, SampleInfo::default());
    assert_eq!(lines_of(&text, "gputaskman_process_vram_bytes").len(), 1);
}

#[test]
fn every_family_has_help_and_type_once_and_its_samples_together() {
    let text = render(&snapshot(), SampleInfo::default());
    let mut seen = HashSet::new();
    let mut current = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap();
            assert!(seen.insert(name.to_string()), "{name} twice");
            current = DEFS.iter().find(|d| d.name == name).unwrap().name;
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            assert_eq!(name, current, "{line}");
        }
    }
}

#[test]
fn the_grafana_dashboard_names_only_metrics_that_exist() {
    let dashboard = include_str!("../../../contrib/grafana/gputaskman.json");
    let mut names = HashSet::new();
    let mut rest = dashboard;
    while let Some(i) = rest.find("gputaskman_") {
        rest = &rest[i..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(rest.len());
        names.insert(&rest[..end]);
        rest = &rest[end..];
    }
    assert!(names.len() > 10, "{names:?}");
    for name in names {
        assert!(
            DEFS.iter().any(|d| d.name == name) || super::super::health_metrics::FAMILIES.iter().any(|f| f.0 == name),
            "the dashboard uses {name}, which is not exported"
        );
    }
}
