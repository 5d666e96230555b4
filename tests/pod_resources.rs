//! Kubernetes pods and their GPUs, through the real binary: a stand-in
//! kubelet (tests/servers/fake_kubelet.py: the real gRPC server of PyPI's
//! grpcio on a unix socket, its protobuf from PyPI's protobuf) allocates
//! fake-NVML GPUs and MIG instances to pods; each device shows its pod,
//! the metrics carry the pod's labels, and an allocated GPU no process
//! uses is told allocated and idle.

mod common;

use common::prometheus::{http_get, promtool_test_rules, tool};
use common::{device, fake_nvml, free_port, test_python, Daemon, Scenario, Sleeper};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;
const H100: &str = "GPU-h100h100-0000-0000-0000-000000000000";
const L4: &str = "GPU-l4l4l4l4-0000-0000-0000-000000000000";
const MIG_3G: &str = "MIG-11111111-1111-1111-1111-111111111111";
const MIG_2G: &str = "MIG-22222222-2222-2222-2222-222222222222";

fn machine(trainer: u32, render: u32) -> Value {
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA A100-SXM4-80GB",
            "uuid": "GPU-a1a1a1a1-0000-0000-0000-000000000000",
            "pci_bus_id": "00000000:07:00.0",
            "memory": {"total": 80 * GIB, "used": 3 * GIB, "free": 77 * GIB},
            "mig_mode": {"current": 1, "pending": 1},
            "max_mig_device_count": 7,
            "compute_processes": [
                {"pid": trainer, "used_memory": 2 * GIB, "gpu_instance_id": 1, "compute_instance_id": 0}
            ],
            "graphics_processes": [],
            "mig_devices": [
                {"gpu_instance_id": 1, "compute_instance_id": 0, "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
                 "uuid": MIG_3G, "memory": {"total": 40 * GIB, "used": 2 * GIB, "free": 38 * GIB}},
                {"gpu_instance_id": 2, "compute_instance_id": 0, "name": "NVIDIA A100-SXM4-80GB MIG 2g.20gb",
                 "uuid": MIG_2G, "memory": {"total": 20 * GIB, "used": 0, "free": 20 * GIB}}
            ]
        }, {
            "name": "NVIDIA L4",
            "uuid": L4,
            "pci_bus_id": "00000000:41:00.0",
            "memory": {"total": 24 * GIB, "used": GIB, "free": 23 * GIB},
            "compute_processes": [],
            "graphics_processes": [{"pid": render, "used_memory": GIB / 2}]
        }, {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": H100,
            "pci_bus_id": "00000000:61:00.0",
            "memory": {"total": 80 * GIB, "used": GIB / 2, "free": 80 * GIB - GIB / 2},
            "compute_processes": [],
            "graphics_processes": []
        }]
    })
}

fn pod(namespace: &str, name: &str, container: &str, resource: &str, ids: &[&str]) -> Value {
    json!({"namespace": namespace, "name": name,
           "containers": [{"name": container, "devices": [{"resource_name": resource, "device_ids": ids}]}]})
}

fn allocations() -> Value {
    json!([
        pod("ml", "train-0", "trainer", "nvidia.com/mig-3g.40gb", &[MIG_3G]),
        pod("ml", "idle-mig", "app", "nvidia.com/mig-2g.20gb", &[MIG_2G]),
        pod("viz", "render-0", "render", "nvidia.com/gpu", &[L4]),
        pod("ml", "idle-1", "app", "nvidia.com/gpu", &[H100]),
        pod(
            "ml",
            "elsewhere",
            "app",
            "nvidia.com/gpu",
            &["GPU-99999999-0000-0000-0000-000000000000"]
        ),
    ])
}

/// The stand-in kubelet on `socket`, answering what `file` holds.
fn kubelet(python: &Path, socket: &Path, file: &Path) -> Daemon {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/fake_kubelet.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(socket).arg(file);
    Daemon::start(cmd, 0, Duration::from_secs(30))
}

/// Whether no device says which pods it was allocated to (not known).
fn no_device_has_pods(snapshot: &Value) -> bool {
    snapshot["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d.get("pods").is_none())
}

#[test]
fn the_kubelets_allocations_become_each_gpus_pod_and_an_idle_one_is_told() {
    let Some(python) = test_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trainer = Sleeper::spawn(dir.path(), "python3", &["train.py"]);
    let render = Sleeper::spawn(dir.path(), "blender", &["-b"]);
    let scenario = Scenario::new(&machine(trainer.pid(), render.pid()));
    let socket = dir.path().join("kubelet.sock");
    let file = dir.path().join("allocations.json");
    std::fs::write(&file, allocations().to_string()).unwrap();
    let _kubelet = kubelet(&python, &socket, &file);

    let snap = scenario.json(&["--json", "--pod-resources-socket", socket.to_str().unwrap()]);
    let kubelet_line = common::backend(&snap, "kubelet");
    assert_eq!(kubelet_line["status"], "ok", "{kubelet_line}");
    assert_eq!(
        kubelet_line["detail"],
        "pod-resources: 5 devices allocated to 5 pods; 1 name no device here \
         (nvidia.com/gpu GPU-99999999-0000-0000-0000-000000000000)"
    );
    let by_uuid = |uuid: &str| {
        snap["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["uuid"] == uuid)
            .unwrap_or_else(|| panic!("no {uuid}: {snap:#}"))
            .clone()
    };
    let mig = by_uuid(MIG_3G);
    assert_eq!(
        mig["pods"],
        json!([{"namespace": "ml", "pod": "train-0", "container": "trainer",
                "resource": "nvidia.com/mig-3g.40gb", "device_id": MIG_3G, "in_use": null}]),
        "the trainer's pod is not known outside a container: whether it is the pod's cannot be told"
    );
    assert_eq!(
        by_uuid(MIG_2G)["pods"][0]["in_use"],
        false,
        "no process on the instance"
    );
    assert_eq!(by_uuid(L4)["pods"][0]["pod"], "render-0");
    assert_eq!(by_uuid(L4)["pods"][0]["in_use"], Value::Null);
    assert_eq!(by_uuid(H100)["pods"][0]["in_use"], false);
    // The A100 itself (MIG on) names no allocation; one id named no
    // device here, which might be it in a form not read: unknown.
    assert_eq!(device(&snap, 0).get("pods"), None);

    // The text view names each GPU's pod, the idle ones marked.
    let out = scenario
        .command()
        .args(["--once", "--pod-resources-socket", socket.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  ! pod ml/idle-1 (app): allocated and idle\n"), "{text}");
    assert!(text.contains("  pod viz/render-0 (render)\n"), "{text}");

    // serve: the pod on the GPU's series, and the idle allocation.
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.env("FAKE_NVML_SCENARIO", scenario.path())
        .env("GPUTASKMAN_POD_RESOURCES_SOCKET", &socket)
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .args(["serve", "--interval", "0.5", "--listen", &format!("127.0.0.1:{port}")]);
    let server = Daemon::start(cmd, port, Duration::from_secs(30));
    let metrics_with = |what: &str, present: bool| {
        let started = Instant::now();
        loop {
            let (_, metrics) = http_get(server.port, "/metrics").unwrap();
            if metrics.contains(what) == present {
                return metrics;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{what} {present}: {metrics}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let metrics = metrics_with("pod=\"idle-1\"", true);
    let idle = metrics
        .lines()
        .find(|l| l.starts_with("gputaskman_device_allocated_idle{") && l.contains("pod=\"idle-1\""))
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(
        idle.ends_with(" 1") && idle.contains(&format!("uuid=\"{H100}\"")),
        "{idle}"
    );
    let used = metrics
        .lines()
        .find(|l| l.starts_with("gputaskman_device_memory_used_bytes{") && l.contains(H100))
        .unwrap();
    assert!(
        used.contains("namespace=\"ml\",pod=\"idle-1\",container=\"app\""),
        "{used}"
    );
    assert!(metrics.contains("resource=\"nvidia.com/mig-2g.20gb\""), "{metrics}");
    alert_fires_for_the_idle_ones(&metrics, dir.path());

    // The pod goes: its allocation leaves the series at the next calls.
    let mut fewer = allocations();
    fewer.as_array_mut().unwrap().remove(3);
    std::fs::write(&file, fewer.to_string()).unwrap();
    metrics_with("pod=\"idle-1\"", false);

    // A kubelet that fails: an error line, and no device's pods made up.
    std::fs::write(&file, json!({"fail": "the kubelet is restarting"}).to_string()).unwrap();
    let snap = scenario.json(&["--json", "--pod-resources-socket", socket.to_str().unwrap()]);
    let line = common::backend(&snap, "kubelet");
    assert_eq!(line["status"], "error");
    assert_eq!(
        line["detail"],
        "pod-resources List: gRPC status 14: the kubelet is restarting"
    );
    assert!(no_device_has_pods(&snap), "{snap:#}");
}

#[test]
fn a_machine_that_is_not_a_node_has_no_kubelet_line_and_a_named_socket_must_answer() {
    let scenario = Scenario::new(&machine(1, 1));
    let snap = scenario.json(&["--json"]);
    if !Path::new("/var/lib/kubelet/pod-resources/kubelet.sock").exists() {
        assert!(
            snap["backends"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["name"] != "kubelet"),
            "{snap:#}"
        );
        assert!(no_device_has_pods(&snap));
    }
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("kubelet.sock");
    let snap = scenario.json(&["--json", "--pod-resources-socket", missing.to_str().unwrap()]);
    let line = common::backend(&snap, "kubelet");
    assert_eq!(line["status"], "error");
    assert!(
        line["detail"].as_str().unwrap().contains("kubelet.sock: No such file"),
        "{line}"
    );
}

/// The shipped GPUAllocatedIdle rule under `promtool test rules`, on the
/// allocated-idle series `serve` wrote (scraped every minute): the two
/// idle allocations fire after 30 minutes, not before, the others never.
fn alert_fires_for_the_idle_ones(metrics: &str, dir: &Path) {
    let Some(promtool) = tool("promtool") else { return };
    let mut input = Vec::new();
    let mut firing = Vec::new();
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("gputaskman_device_allocated_idle{"))
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let series = format!("{},instance=\"node-1:9464\"}}", series.trim_end_matches('}'));
        input.push(json!({"series": series, "values": format!("{value}x40")}));
        if value == "1" {
            let labels: serde_json::Map<String, Value> = series["gputaskman_device_allocated_idle{".len()..]
                .trim_end_matches('}')
                .split("\",")
                .map(|pair| {
                    let (k, v) = pair.split_once("=\"").unwrap();
                    (k.to_string(), json!(v.trim_end_matches('"')))
                })
                .chain([("severity".to_string(), json!("warning"))])
                .collect();
            let summary = format!(
                "GPU {} ({}) is allocated to pod {}/{} and none of its processes has used it for 30 minutes",
                labels["device"].as_str().unwrap(),
                labels["uuid"].as_str().unwrap(),
                labels["namespace"].as_str().unwrap(),
                labels["pod"].as_str().unwrap()
            );
            firing.push(json!({"exp_labels": labels, "exp_annotations": {"summary": summary}}));
        }
    }
    assert_eq!(firing.len(), 2, "idle-1 and idle-mig: {metrics}");
    promtool_test_rules(
        &promtool,
        dir,
        input,
        json!([
            {"eval_time": "20m", "alertname": "GPUAllocatedIdle", "exp_alerts": []},
            {"eval_time": "35m", "alertname": "GPUAllocatedIdle", "exp_alerts": firing},
        ]),
    );
}
