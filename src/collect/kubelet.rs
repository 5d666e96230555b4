//! Kubernetes: which pod's container the kubelet allocated each device
//! to, from its pod-resources API (`List`, v1, over the unix socket
//! `/var/lib/kubelet/pod-resources/kubelet.sock`), and whether a process
//! of that pod uses the device: a GPU allocated and idle is a cluster's
//! most expensive waste.
//!
//! The call is gRPC: an HTTP/2 POST of `/v1.PodResourcesLister/List`
//! whose body is one length-prefixed protobuf message each way (gRPC's
//! PROTOCOL-HTTP2.md), the status in the `grpc-status` trailer. The
//! messages are those of the kubelet's
//! `staging/src/k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`, with
//! only the fields read here; prost skips the others (cpu_ids, memory,
//! topology, dynamic_resources). The answer is the kubelet's, which a
//! pod's spec shapes: its strings are read lossily, its size capped, the
//! call bounded by a deadline, and it runs on a thread of its own in the
//! live views, so a kubelet that hangs delays no sample.

use crate::snapshot::{Backend, BackendStatus, Device, PodAllocation, Process};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the kubelet serves the API.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// How long one `List` may take.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// The largest answer read: a node of 110 pods with eight devices each
/// answers in a few tens of KiB.
pub const ANSWER_LIMIT: usize = 16 << 20;
/// The most allocations read from one answer, and the longest name kept
/// (Kubernetes' own limit, 253 characters for a namespace or pod name):
/// every device id repeats its pod's names, which a crafted answer could
/// make large.
const ALLOCATIONS_MAX: usize = 65_536;
const NAME_MAX: usize = 253;
/// The RPC's path: package `v1`, service `PodResourcesLister`.
const LIST_PATH: &str = "/v1.PodResourcesLister/List";

/// `ListPodResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// `PodResources`: a pod, by name and namespace, and its containers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    #[prost(bytes = "vec", tag = "1")]
    pub name: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub namespace: Vec<u8>,
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// `ContainerResources`: a container and the devices it was allocated.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    #[prost(bytes = "vec", tag = "1")]
    pub name: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
}

/// `ContainerDevices`: devices of one resource.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    #[prost(bytes = "vec", tag = "1")]
    pub resource_name: Vec<u8>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub device_ids: Vec<Vec<u8>>,
}

/// One device id allocated to one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub resource: String,
    pub device_id: String,
}

/// The allocations in a `List` answer's body: one gRPC message (a
/// compressed-flag byte, a 4-byte big-endian length, the protobuf).
pub fn allocations(body: &[u8]) -> Result<Vec<Allocation>, String> {
    let [flag, a, b, c, d, message @ ..] = body else {
        return Err(format!("an answer of {} bytes is no gRPC message", body.len()));
    };
    if *flag != 0 {
        return Err("the answer is compressed, which was not asked for".into());
    }
    let length = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
    if length != message.len() {
        return Err(format!("the message says {length} bytes and {} came", message.len()));
    }
    let answer: ListPodResourcesResponse =
        prost::Message::decode(message).map_err(|e| format!("not a ListPodResourcesResponse: {e}"))?;
    let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(NAME_MAX)]).into_owned();
    let mut out = Vec::new();
    for pod in &answer.pod_resources {
        for container in &pod.containers {
            for devices in &container.devices {
                for id in &devices.device_ids {
                    if out.len() == ALLOCATIONS_MAX {
                        return Err(format!("more than {ALLOCATIONS_MAX} devices allocated"));
                    }
                    out.push(Allocation {
                        namespace: text(&pod.namespace),
                        pod: text(&pod.name),
                        container: text(&container.name),
                        resource: text(&devices.resource_name),
                        device_id: text(id),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// A PCI address with its domain as 4 hex digits, lower case
/// (`0000:03:00.0`): NVML writes 8 (`00000000:03:00.0`), device plugins 4.
fn pci_address(s: &str) -> Option<String> {
    let (domain, rest) = s.trim().split_once(':')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    Some(format!("{domain:04x}:{}", rest.to_ascii_lowercase()))
}

/// Whether the device plugin's `id` names device `d` of `devices`: its
/// UUID (GPU or MIG, the NVIDIA plugin's default), its PCI address (AMD's
/// plugin), `MIG-GPU-<uuid>/<gi>/<ci>` (the NVIDIA plugin on drivers
/// before R470), or for the NVIDIA plugin's index strategy its NVML index.
fn names(id: &str, resource: &str, d: &Device, devices: &[Device]) -> bool {
    let id = id.trim();
    // A GPU shared by time-slicing or MPS is offered as replicas,
    // `GPU-<uuid>::<n>` (the NVIDIA plugin's annotated ids).
    let id = match id.rsplit_once("::") {
        Some((device, replica)) if !replica.is_empty() && replica.bytes().all(|b| b.is_ascii_digit()) => device,
        _ => id,
    };
    if d.uuid.as_deref().is_some_and(|u| u.eq_ignore_ascii_case(id)) {
        return true;
    }
    if let (Some(bus), Some(wanted)) = (d.pci_bus_id.as_deref().and_then(pci_address), pci_address(id)) {
        if d.mig.is_none() && bus == wanted {
            return true;
        }
    }
    if let (Some(rest), Some(mig), Some(parent)) = (id.strip_prefix("MIG-"), &d.mig, d.parent) {
        let gpu_uuid = devices
            .iter()
            .find(|g| g.index == parent)
            .and_then(|g| g.uuid.as_deref());
        let mut parts = rest.split('/');
        if let (Some(gpu), Some(gi), Some(ci), None) = (parts.next(), parts.next(), parts.next(), parts.next()) {
            return gpu_uuid.is_some_and(|u| u.eq_ignore_ascii_case(gpu))
                && gi.parse() == Ok(mig.gpu_instance_id)
                && ci.parse() == Ok(mig.compute_instance_id);
        }
    }
    d.backend == "nvml" && d.mig.is_none() && resource.starts_with("nvidia.com/") && id.parse() == Ok(d.index)
}

/// Whether a process of `a`'s pod uses device `d`: see
/// [`PodAllocation::in_use`].
fn in_use(d: &Device, a: &Allocation, processes: &[Process]) -> Option<bool> {
    let mut unknown = !d.process_list_complete;
    for p in processes.iter().filter(|p| p.gpu.iter().any(|g| g.device == d.index)) {
        let pod = p
            .container
            .as_ref()
            .and_then(|c| Some((c.namespace.as_deref()?, c.pod.as_deref()?)));
        match pod {
            Some((namespace, pod)) if namespace == a.namespace && pod == a.pod => return Some(true),
            Some(_) => {}
            None => unknown = true,
        }
    }
    (!unknown).then_some(false)
}

/// Gives every device the allocations that name it, a container once
/// (two replicas of one GPU are one allocation to it), and says in the
/// backend line how many there were and which device ids named no device
/// here. A device none names has no pods (`[]`) only when every id named
/// a device: else it may be the one an id names in a form not read here,
/// and is left unknown.
pub fn assign(devices: &mut [Device], processes: &[Process], allocations: &[Allocation]) -> Backend {
    let mut matched = vec![false; allocations.len()];
    let found: Vec<Vec<PodAllocation>> = devices
        .iter()
        .map(|d| {
            let mut pods: Vec<PodAllocation> = Vec::new();
            for (i, a) in allocations.iter().enumerate() {
                if !names(&a.device_id, &a.resource, d, devices) {
                    continue;
                }
                matched[i] = true;
                if pods.iter().any(|p| p.is_of(&a.namespace, &a.pod, &a.container)) {
                    continue;
                }
                pods.push(PodAllocation {
                    namespace: a.namespace.clone(),
                    pod: a.pod.clone(),
                    container: a.container.clone(),
                    resource: a.resource.clone(),
                    device_id: a.device_id.clone(),
                    in_use: in_use(d, a, processes),
                });
            }
            pods
        })
        .collect();
    let all_named = matched.iter().all(|m| *m);
    for (d, pods) in devices.iter_mut().zip(found) {
        d.pods = (all_named || !pods.is_empty()).then_some(pods);
    }
    let pods: std::collections::BTreeSet<(&str, &str)> = allocations
        .iter()
        .map(|a| (a.namespace.as_str(), a.pod.as_str()))
        .collect();
    let mut detail = format!(
        "pod-resources: {} device{} allocated to {} pod{}",
        allocations.len(),
        if allocations.len() == 1 { "" } else { "s" },
        pods.len(),
        if pods.len() == 1 { "" } else { "s" }
    );
    let elsewhere: Vec<String> = allocations
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(a, _)| format!("{} {}", a.resource, a.device_id))
        .collect();
    if !elsewhere.is_empty() {
        detail.push_str(&format!(
            "; {} name no device here ({}{})",
            elsewhere.len(),
            elsewhere.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if elsewhere.len() > 3 { ", ..." } else { "" }
        ));
    }
    line(BackendStatus::Ok, detail)
}

/// The kubelet's backend line.
fn line(status: BackendStatus, detail: String) -> Backend {
    Backend {
        name: "kubelet".into(),
        status,
        detail,
    }
}

/// Asks the kubelet at `socket` for every allocation.
pub fn list(socket: &Path, deadline: Duration) -> Result<Vec<Allocation>, String> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    if !meta.file_type().is_socket() {
        return Err(format!("{} is not a socket", socket.display()));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("the gRPC client's runtime: {e}"))?;
    let body = runtime.block_on(async {
        match tokio::time::timeout(deadline, call(socket)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer within {} s", deadline.as_secs_f64())),
        }
    })?;
    allocations(&body)
}

/// The `List` call: the answer's body, or why there is none.
async fn call(socket: &Path) -> Result<Vec<u8>, String> {
    let io = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| format!("connect {}: {e}", socket.display()))?;
    let (client, connection) = h2::client::handshake(io).await.map_err(|e| format!("HTTP/2: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{LIST_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .map_err(|e| e.to_string())?;
    let (response, mut send) = client
        .send_request(request, false)
        .map_err(|e| format!("HTTP/2: {e}"))?;
    // An empty ListPodResourcesRequest: flag 0, length 0.
    send.send_data(bytes::Bytes::from_static(&[0; 5]), true)
        .map_err(|e| format!("HTTP/2: {e}"))?;
    let response = response.await.map_err(|e| format!("HTTP/2: {e}"))?;
    if response.status() != http::StatusCode::OK {
        return Err(format!("HTTP {}", response.status()));
    }
    // A call that fails at once answers with its status in the headers.
    grpc_status(response.headers()).transpose()?;
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("HTTP/2: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if out.len() + chunk.len() > ANSWER_LIMIT {
            return Err(format!("the answer is over {} MiB", ANSWER_LIMIT >> 20));
        }
        out.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.map_err(|e| format!("HTTP/2: {e}"))?;
    match trailers.as_ref().and_then(grpc_status) {
        Some(status) => status.map(|()| out),
        None => Err("the answer ended without a grpc-status".into()),
    }
}

/// The `grpc-status` in `headers`: Ok for 0 (OK), the code and
/// `grpc-message` otherwise; None where there is none.
fn grpc_status(headers: &http::HeaderMap) -> Option<Result<(), String>> {
    let code = headers.get("grpc-status")?;
    let code = String::from_utf8_lossy(code.as_bytes()).into_owned();
    if code == "0" {
        return Some(Ok(()));
    }
    let message = headers
        .get("grpc-message")
        .map(|m| format!(": {}", String::from_utf8_lossy(m.as_bytes())))
        .unwrap_or_default();
    Some(Err(format!("gRPC status {code}{message}")))
}

/// The kubelet of this node, asked on a thread of its own in the live
/// views and at once for one-shot output.
pub struct Kubelet {
    socket: PathBuf,
    calls: Arc<Mutex<Calls>>,
}

/// The background calls' state.
#[derive(Default)]
struct Calls {
    /// The last answer; None before the first.
    latest: Option<Result<Vec<Allocation>, String>>,
    in_flight: bool,
}

impl Kubelet {
    /// The kubelet at `configured` (`--pod-resources-socket`), else at
    /// [`DEFAULT_SOCKET`] where that exists: None on a machine that is not
    /// a Kubernetes node.
    pub fn find(configured: Option<&Path>) -> Option<Kubelet> {
        let socket = match configured {
            Some(p) => p.to_path_buf(),
            None => Some(PathBuf::from(DEFAULT_SOCKET)).filter(|p| p.exists())?,
        };
        Some(Kubelet {
            socket,
            calls: Arc::default(),
        })
    }

    /// The allocations, asked now (`wait`) or the last a background call
    /// brought (None before the first), with the backend line; devices get
    /// their pods only from an answer.
    pub fn apply(&self, wait: bool, devices: &mut [Device], processes: &[Process]) -> Backend {
        let answer = if wait {
            Some(list(&self.socket, DEADLINE))
        } else {
            self.ask_in_background();
            self.calls.lock().unwrap_or_else(|e| e.into_inner()).latest.clone()
        };
        match answer {
            Some(Ok(allocations)) => assign(devices, processes, &allocations),
            Some(Err(e)) => line(BackendStatus::Error, format!("pod-resources List: {e}")),
            None => line(BackendStatus::Ok, "pod-resources: asking".into()),
        }
    }

    /// Starts a `List` on a thread unless one is under way.
    fn ask_in_background(&self) {
        let done = |calls: &Mutex<Calls>, answer| {
            *calls.lock().unwrap_or_else(|e| e.into_inner()) = Calls {
                latest: Some(answer),
                in_flight: false,
            }
        };
        {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            if calls.in_flight {
                return;
            }
            calls.in_flight = true;
        }
        let (socket, calls) = (self.socket.clone(), self.calls.clone());
        let spawned = std::thread::Builder::new()
            .name("gputaskman-kubelet".into())
            .spawn(move || {
                // A call that panics ends as an error, and the next sample
                // asks again, rather than leaving a call under way forever.
                let answer = std::panic::catch_unwind(|| list(&socket, DEADLINE))
                    .unwrap_or_else(|_| Err("the call panicked".into()));
                done(&calls, answer)
            });
        if let Err(e) = spawned {
            done(&self.calls, Err(format!("no thread: {e}")));
        }
    }
}

#[cfg(test)]
mod tests;
