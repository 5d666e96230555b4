use super::*;
use crate::snapshot::{Container, GpuUsage, MigInstance};

/// A pod: namespace, name, and its containers' (name, resource, ids).
type Pod<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str, &'a [&'a str])]);

fn message(pods: &[Pod]) -> Vec<u8> {
    let answer = ListPodResourcesResponse {
        pod_resources: pods
            .iter()
            .map(|(namespace, name, containers)| PodResources {
                name: name.as_bytes().to_vec(),
                namespace: namespace.as_bytes().to_vec(),
                containers: containers
                    .iter()
                    .map(|(container, resource, ids)| ContainerResources {
                        name: container.as_bytes().to_vec(),
                        devices: vec![ContainerDevices {
                            resource_name: resource.as_bytes().to_vec(),
                            device_ids: ids.iter().map(|i| i.as_bytes().to_vec()).collect(),
                        }],
                    })
                    .collect(),
            })
            .collect(),
    };
    let encoded = prost::Message::encode_to_vec(&answer);
    let mut body = vec![0];
    body.extend((encoded.len() as u32).to_be_bytes());
    body.extend(encoded);
    body
}

fn allocation(namespace: &str, pod: &str, container: &str, resource: &str, id: &str) -> Allocation {
    Allocation {
        namespace: namespace.into(),
        pod: pod.into(),
        container: container.into(),
        resource: resource.into(),
        device_id: id.into(),
    }
}

#[test]
fn an_answer_is_read_into_one_allocation_per_device_id() {
    let body = message(&[
        (
            "ml",
            "train-0",
            &[("trainer", "nvidia.com/gpu", &["GPU-aaaa", "GPU-bbbb"])],
        ),
        ("default", "idle-1", &[("app", "nvidia.com/mig-1g.10gb", &["MIG-cccc"])]),
    ]);
    assert_eq!(
        allocations(&body).unwrap(),
        vec![
            allocation("ml", "train-0", "trainer", "nvidia.com/gpu", "GPU-aaaa"),
            allocation("ml", "train-0", "trainer", "nvidia.com/gpu", "GPU-bbbb"),
            allocation("default", "idle-1", "app", "nvidia.com/mig-1g.10gb", "MIG-cccc"),
        ]
    );
    // A node with no pod holding a device answers an empty message.
    assert_eq!(allocations(&[0, 0, 0, 0, 0]).unwrap(), vec![]);
}

#[test]
fn the_fields_this_reader_does_not_know_are_skipped() {
    // A newer kubelet's ContainerResources with cpu_ids (3, packed) and a
    // ContainerDevices with topology (3): field numbers this reader skips.
    let device = [
        &[0x0a, 0x0e][..],
        b"nvidia.com/gpu",
        &[0x12, 0x04],
        b"GPU0",
        &[0x1a, 0x02, 0x08, 0x01],
    ]
    .concat();
    let container = [
        &[0x0a, 0x01][..],
        b"c",
        &[0x12, device.len() as u8],
        &device,
        &[0x1a, 0x02, 0x04, 0x05],
    ]
    .concat();
    let pod = [
        &[0x0a, 0x01][..],
        b"p",
        &[0x12, 0x02],
        b"ns",
        &[0x1a, container.len() as u8],
        &container,
    ]
    .concat();
    let message = [&[0x0a, pod.len() as u8][..], &pod].concat();
    let body = [&[0, 0, 0, 0, message.len() as u8][..], &message].concat();
    assert_eq!(
        allocations(&body).unwrap(),
        vec![allocation("ns", "p", "c", "nvidia.com/gpu", "GPU0")]
    );
}

#[test]
fn a_broken_answer_is_an_error_that_says_what_is_wrong() {
    let body = message(&[("ml", "p", &[("c", "nvidia.com/gpu", &["GPU-a"])])]);
    let said = |b: &[u8]| allocations(b).unwrap_err();
    assert!(said(&[]).contains("no gRPC message"));
    assert!(said(&body[..body.len() - 1]).contains("the message says"));
    let mut compressed = body.clone();
    compressed[0] = 1;
    assert!(said(&compressed).contains("compressed"));
    assert!(said(&[0, 0, 0, 0, 2, 0xff, 0xff]).contains("not a ListPodResourcesResponse"));
    // Names are read lossily: bytes that are not UTF-8 do not fail the call.
    let answer = ListPodResourcesResponse {
        pod_resources: vec![PodResources {
            name: vec![b'p', 0xff],
            namespace: b"ml".to_vec(),
            containers: vec![ContainerResources {
                name: b"c".to_vec(),
                devices: vec![ContainerDevices {
                    resource_name: b"nvidia.com/gpu".to_vec(),
                    device_ids: vec![b"GPU-a".to_vec()],
                }],
            }],
        }],
    };
    let encoded = prost::Message::encode_to_vec(&answer);
    let body = [&[0][..], &(encoded.len() as u32).to_be_bytes(), &encoded].concat();
    assert_eq!(allocations(&body).unwrap()[0].pod, "p\u{fffd}");
}

fn gpu(index: u32, uuid: &str, bus: &str) -> Device {
    Device {
        index,
        backend: "nvml".into(),
        uuid: Some(uuid.into()),
        pci_bus_id: Some(bus.into()),
        process_list_complete: true,
        ..Device::default()
    }
}

fn in_pod(pid: u32, device: u32, namespace: Option<&str>, pod: &str) -> Process {
    Process {
        pid,
        name: Some("python3".into()),
        container: namespace.map(|ns| Container {
            runtime: "containerd".into(),
            id: "0".repeat(64),
            name: Some("trainer".into()),
            pod: Some(pod.into()),
            namespace: Some(ns.into()),
        }),
        gpu: vec![GpuUsage::memory_only(device, Some(1 << 30), "nvml")],
        ..Process::default()
    }
}

#[test]
fn devices_get_their_pods_by_uuid_pci_address_mig_and_index_and_idle_ones_are_told() {
    let mut mig = gpu(4, "MIG-1234", "00000000:05:00.0");
    mig.parent = Some(3);
    mig.mig = Some(MigInstance {
        gpu_instance_id: 1,
        compute_instance_id: 0,
        profile: Some("1g.10gb".into()),
    });
    let mut old_mig = mig.clone();
    old_mig.index = 5;
    old_mig.uuid = Some("MIG-5678".into());
    old_mig.mig.as_mut().unwrap().gpu_instance_id = 2;
    let mut devices = vec![
        gpu(0, "GPU-aaaa", "00000000:01:00.0"),
        gpu(1, "GPU-bbbb", "00000000:02:00.0"),
        gpu(2, "GPU-cccc", "00000000:03:00.0"),
        gpu(3, "GPU-dddd", "00000000:05:00.0"),
        mig,
        old_mig,
        gpu(6, "GPU-ffff", "00000000:07:00.0"),
    ];
    devices[6].process_list_complete = false;
    let processes = vec![
        in_pod(10, 0, Some("ml"), "train-0"),
        // Another pod's process on GPU 1: GPU 1 is idle for its own pod.
        in_pod(11, 1, Some("other"), "x"),
        // A process whose pod is unknown on GPU 2: idle cannot be told.
        in_pod(12, 2, None, ""),
    ];
    let allocations = vec![
        allocation("ml", "train-0", "trainer", "nvidia.com/gpu", "gpu-AAAA"),
        // Two time-slicing replicas of GPU 0 to one container: one entry.
        allocation("ml", "train-0", "trainer", "nvidia.com/gpu", "GPU-aaaa::0"),
        allocation("ml", "train-0", "trainer", "nvidia.com/gpu", "GPU-aaaa::1"),
        allocation("ml", "idle-0", "app", "amd.com/gpu", "0000:02:00.0"),
        allocation("ml", "unsure", "app", "nvidia.com/gpu", "2"),
        allocation("ml", "mig", "app", "nvidia.com/mig-1g.10gb", "MIG-1234"),
        allocation("ml", "old", "app", "nvidia.com/gpu", "MIG-GPU-dddd/2/0"),
        allocation("ml", "partial", "app", "nvidia.com/gpu", "GPU-ffff"),
        allocation("ml", "gone", "app", "nvidia.com/gpu", "GPU-9999"),
    ];
    let backend = assign(&mut devices, &processes, &allocations);
    let pods = |i: usize| -> Vec<(String, Option<bool>)> {
        devices[i]
            .pods
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| (a.pod.clone(), a.in_use))
            .collect()
    };
    assert_eq!(pods(0), vec![("train-0".into(), Some(true))]);
    assert_eq!(pods(1), vec![("idle-0".into(), Some(false))]);
    assert_eq!(pods(2), vec![("unsure".into(), None)]);
    // A GPU with MIG on is not its instances' allocation; with an id
    // that named no device, it may be that one's: unknown, not empty.
    assert_eq!(devices[3].pods, None);
    assert_eq!(pods(4), vec![("mig".into(), Some(false))]);
    assert_eq!(pods(5), vec![("old".into(), Some(false))]);
    // An incomplete process list cannot say idle.
    assert_eq!(pods(6), vec![("partial".into(), None)]);
    assert_eq!(
        devices[1].pods_line().unwrap(),
        "pod ml/idle-0 (app): allocated and idle"
    );
    assert_eq!(devices[0].pods_line().unwrap(), "pod ml/train-0 (trainer)");
    assert_eq!(devices[3].pods_line(), None);
    assert_eq!(backend.status, BackendStatus::Ok);
    assert_eq!(
        backend.detail,
        "pod-resources: 9 devices allocated to 7 pods; 1 name no device here (nvidia.com/gpu GPU-9999)"
    );
    // Every id named a device: one none names is known to be no pod's.
    let named: Vec<Allocation> = allocations.into_iter().filter(|a| a.pod != "gone").collect();
    assign(&mut devices, &processes, &named);
    assert_eq!(devices[3].pods, Some(vec![]));
}

#[test]
fn a_crafted_answer_is_capped_in_names_and_allocations() {
    let long = "p".repeat(10_000);
    let body = message(&[("ml", &long, &[("c", "nvidia.com/gpu", &["GPU-a"])])]);
    assert_eq!(allocations(&body).unwrap()[0].pod.len(), NAME_MAX);
    let ids: Vec<String> = (0..=ALLOCATIONS_MAX).map(|i| i.to_string()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let body = message(&[("ml", "p", &[("c", "nvidia.com/gpu", &ids)])]);
    assert!(allocations(&body).unwrap_err().contains("more than 65536"));
}

#[test]
fn a_missing_or_wrong_socket_is_an_error_not_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let missing = list(&dir.path().join("kubelet.sock"), DEADLINE).unwrap_err();
    assert!(missing.contains("kubelet.sock"), "{missing}");
    std::fs::write(dir.path().join("file"), "").unwrap();
    let file = list(&dir.path().join("file"), DEADLINE).unwrap_err();
    assert!(file.contains("is not a socket"), "{file}");
    // A socket that accepts and never answers: the deadline ends the call.
    let quiet = dir.path().join("quiet.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&quiet).unwrap();
    let started = std::time::Instant::now();
    let hung = list(&quiet, Duration::from_millis(300)).unwrap_err();
    assert!(hung.contains("no answer within 0.3 s"), "{hung}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Not a Kubernetes node: no kubelet, no line.
    assert!(Kubelet::find(None).is_none() || Path::new(DEFAULT_SOCKET).exists());
}
