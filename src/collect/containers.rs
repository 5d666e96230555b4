//! Which container a process runs in, and its name: the runtime and id
//! from the process's cgroup path (`/proc/PID/cgroup`), the name from the
//! runtime's own files. Every one of those files is written by something
//! else on the machine and read capped, lossily.
//!
//! - docker: `docker-<id>.scope` (systemd driver) or `/docker/<id>`; the name
//!   from `/var/lib/docker/containers/<id>/config.v2.json` (`Name`).
//! - podman: `libpod-<id>.scope`; the name from containers/storage's
//!   `overlay-containers/containers.json` (`names`): the machine's store
//!   (`/var/lib/containers/storage`), or for rootless podman, whose scope
//!   sits under `user@<uid>.service`, that user's own
//!   (`~/.local/share/containers/storage`, the home from `/etc/passwd`;
//!   containers-storage.conf(5)).
//! - containerd, Kubernetes among them: `cri-containerd-<id>.scope` or a
//!   pod slice; container, pod and namespace from the task's OCI
//!   `config.json` annotations, else the pod and namespace from the
//!   kubelet's pod folder (`/var/lib/kubelet/pods/<uid>`), found by the pod
//!   UID in the cgroup path.
//! - lxc: `/lxc.payload.<name>` or `/lxc/<name>`: the id is the name.

use crate::snapshot::Container;
use gguf::regular_file::read_capped;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A cgroup file is a few lines; a runtime's config a few KiB, with big
/// environments and labels some hundred.
const CGROUP_CAP: u64 = 64 << 10;
const CONFIG_CAP: u64 = 4 << 20;
/// containers.json lists every podman container on the machine.
const PODMAN_LIST_CAP: u64 = 16 << 20;
/// Names kept between samples: containers come and go.
const CACHE_MAX: usize = 4096;

/// Where a cgroup path says a process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    runtime: &'static str,
    id: String,
    /// Kubernetes: the pod's UID, from its slice.
    pod_uid: Option<String>,
    /// A user's systemd instance (`user@<uid>.service`) holds the scope: a
    /// rootless container of that user.
    user: Option<u32>,
}

/// The container of the process whose `/proc/PID/cgroup` says `cgroup`.
fn placement(cgroup: &str) -> Option<Placement> {
    // cgroup v2 has one line, "0::PATH"; v1 one per hierarchy, alike for a
    // container, though a host may put some hierarchies elsewhere.
    cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .find_map(placement_in)
}

/// The container one cgroup path names.
fn placement_in(path: &str) -> Option<Placement> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let pod_uid = segments.iter().find_map(|s| pod_uid(s));
    let user = segments
        .iter()
        .find_map(|s| s.strip_prefix("user@")?.strip_suffix(".service")?.parse().ok());
    for (i, seg) in segments.iter().enumerate().rev() {
        let scoped = |prefix: &str| seg.strip_prefix(prefix)?.strip_suffix(".scope").filter(|id| is_id(id));
        let after = |parent: &str| (i > 0 && segments[i - 1] == parent && is_id(seg)).then(|| seg.to_string());
        let found = if let Some(id) = scoped("docker-").map(str::to_string).or_else(|| after("docker")) {
            ("docker", id)
        } else if let Some(id) = scoped("libpod-") {
            ("podman", id.to_string())
        } else if let Some(id) = scoped("cri-containerd-") {
            ("containerd", id.to_string())
        } else if let (Some(_), true) = (&pod_uid, is_id(seg)) {
            // cgroupfs driver: /kubepods/<qos>/pod<uid>/<id>.
            ("containerd", seg.to_string())
        } else if let Some(name) = seg
            .strip_prefix("lxc.payload.")
            .or_else(|| (i == 1 && segments[0] == "lxc").then_some(*seg))
        {
            ("lxc", name.to_string())
        } else {
            continue;
        };
        return Some(Placement {
            runtime: found.0,
            id: found.1,
            pod_uid,
            user,
        });
    }
    None
}

/// A container id: 64 hex digits.
fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `kubepods-besteffort-pod<uid with _>.slice` (systemd) or `pod<uid>`
/// (cgroupfs): the UID, with dashes.
fn pod_uid(segment: &str) -> Option<String> {
    let s = segment.strip_suffix(".slice").unwrap_or(segment);
    let uid = &s[s.rfind("pod")? + 3..];
    let uid = uid.replace('_', "-");
    (uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')).then_some(uid)
}

fn json(path: &Path, cap: u64) -> Option<serde_json::Value> {
    let bytes = read_capped(path, cap).ok()?;
    serde_json::from_str(&String::from_utf8_lossy(&bytes)).ok()
}

fn text(path: &Path) -> Option<String> {
    let bytes = read_capped(path, CGROUP_CAP).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string()).filter(|t| !t.is_empty())
}

/// The id of the system Docker container process `pid` runs in, for its
/// json-file log (src/models/log_sources.rs); None outside one and in a
/// rootless one: a user's delegated cgroups can be named anything, so a
/// process of theirs could borrow another container's id.
pub fn docker_id(proc_root: &Path, pid: u32) -> Option<String> {
    let cgroup = read_capped(&proc_root.join(pid.to_string()).join("cgroup"), CGROUP_CAP).ok()?;
    let place = placement(&String::from_utf8_lossy(&cgroup))?;
    (place.runtime == "docker" && place.user.is_none()).then_some(place.id)
}

/// Names the containers of processes; `root` is where the runtimes' files
/// are (`/`; tests point it at fixtures).
pub struct Namer {
    root: PathBuf,
    cache: HashMap<String, Container>,
}

impl Namer {
    pub fn new(root: PathBuf) -> Namer {
        Namer {
            root,
            cache: HashMap::new(),
        }
    }

    /// The container process `pid` runs in; None outside any (or when its
    /// cgroup cannot be read). Cgroups are Linux's: under Wine,
    /// `/proc/PID/cgroup` would be a Linux process's that shares the
    /// Windows process's number.
    pub fn container(&mut self, proc_root: &Path, pid: u32) -> Option<Container> {
        if cfg!(not(target_os = "linux")) {
            return None;
        }
        let cgroup = read_capped(&proc_root.join(pid.to_string()).join("cgroup"), CGROUP_CAP).ok()?;
        let place = placement(&String::from_utf8_lossy(&cgroup))?;
        if let Some(known) = self.cache.get(&place.id) {
            return Some(known.clone());
        }
        let named = self.name(place);
        if self.cache.len() >= CACHE_MAX {
            self.cache.clear();
        }
        self.cache.insert(named.id.clone(), named.clone());
        Some(named)
    }

    fn name(&self, place: Placement) -> Container {
        let mut c = Container {
            runtime: place.runtime.to_string(),
            id: place.id,
            name: None,
            pod: None,
            namespace: None,
        };
        let root = &self.root;
        match c.runtime.as_str() {
            "docker" => {
                let config = json(
                    &root
                        .join("var/lib/docker/containers")
                        .join(&c.id)
                        .join("config.v2.json"),
                    CONFIG_CAP,
                );
                c.name = config
                    .as_ref()
                    .and_then(|v| v["Name"].as_str())
                    .map(|n| n.trim_start_matches('/').to_string());
            }
            "podman" => {
                let store = match place.user {
                    Some(uid) => home_of(root, uid).map(|home| root.join(home).join(".local/share/containers/storage")),
                    None => Some(root.join("var/lib/containers/storage")),
                };
                let list = store.and_then(|s| json(&s.join("overlay-containers/containers.json"), PODMAN_LIST_CAP));
                c.name = list.as_ref().and_then(|v| v.as_array()).and_then(|all| {
                    let this = all.iter().find(|e| e["id"].as_str() == Some(c.id.as_str()))?;
                    this["names"][0].as_str().map(str::to_string)
                });
            }
            "containerd" => {
                // The OCI spec of the task, in the containerd namespace the
                // CRI plugin uses (k8s.io), else Docker's (moby) or the default.
                let task = root.join("run/containerd/io.containerd.runtime.v2.task");
                let spec = ["k8s.io", "moby", "default"]
                    .iter()
                    .find_map(|ns| json(&task.join(ns).join(&c.id).join("config.json"), CONFIG_CAP));
                let note = |key: &str| {
                    spec.as_ref()
                        .and_then(|s| s["annotations"][key].as_str())
                        .map(str::to_string)
                };
                c.name = note("io.kubernetes.cri.container-name");
                c.pod = note("io.kubernetes.cri.sandbox-name");
                c.namespace = note("io.kubernetes.cri.sandbox-namespace");
                if let Some(uid) = &place.pod_uid {
                    let pod = root.join("var/lib/kubelet/pods").join(uid);
                    c.pod = c.pod.or_else(|| kubelet_pod_name(&pod));
                    c.namespace = c.namespace.or_else(|| kubelet_namespace(&pod));
                }
            }
            _ => c.name = Some(c.id.clone()),
        }
        c
    }
}

/// The home folder of `uid` in `/etc/passwd` (relative to the root the
/// runtimes' files are under). Users known only to a directory service
/// (LDAP, sssd) are not there: their rootless containers stay unnamed.
fn home_of(root: &Path, uid: u32) -> Option<PathBuf> {
    let passwd = read_capped(&root.join("etc/passwd"), CONFIG_CAP).ok()?;
    String::from_utf8_lossy(&passwd).lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let home = fields.get(5).filter(|h| h.starts_with('/'))?;
        (fields.get(2)?.parse::<u32>().ok()? == uid).then(|| PathBuf::from(home.trim_start_matches('/')))
    })
}

/// The pod's hostname, which is its name unless the spec sets another: the
/// last entry of the `etc-hosts` the kubelet writes for it.
fn kubelet_pod_name(pod: &Path) -> Option<String> {
    let hosts = text(&pod.join("etc-hosts"))?;
    let last = hosts
        .lines()
        .rfind(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())?;
    last.split_whitespace().nth(1).map(str::to_string)
}

/// The namespace file of the service account token the kubelet projects
/// into the pod (`volumes/kubernetes.io~projected/kube-api-access-*/`).
fn kubelet_namespace(pod: &Path) -> Option<String> {
    let projected = std::fs::read_dir(pod.join("volumes/kubernetes.io~projected")).ok()?;
    projected
        .flatten()
        .find_map(|volume| text(&volume.path().join("namespace")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/containers");
    const DOCKER: &str = "3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";
    const PODMAN: &str = "b1946ac92492d2347c6235b4d2611184a1d4f8e3c2b0a9d8e7f6c5b4a3928171";
    const PODMAN_ROOTLESS: &str = "5a7d3e9b1c2f4a6e8d0b3c5f7a9e1d2c4b6a8f0e2d4c6b8a0f1e3d5c7b9a2f4e";
    const K8S: &str = "8e1ac3a6f1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c";
    const K8S_CGROUPFS: &str = "0d2c6c1f8a7b6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2918f7e6d5c";

    /// The named container of the process whose cgroup file is `case`.
    fn of(case: &str) -> Option<Container> {
        let root = Path::new(FIXTURES);
        Namer::new(root.join("root")).container(&root.join("proc").join(case), 1)
    }

    fn container(runtime: &str, id: &str, name: Option<&str>, pod: Option<&str>, ns: Option<&str>) -> Container {
        Container {
            runtime: runtime.into(),
            id: id.into(),
            name: name.map(Into::into),
            pod: pod.map(Into::into),
            namespace: ns.map(Into::into),
        }
    }

    #[test]
    fn docker_by_its_config() {
        let web = Some(container("docker", DOCKER, Some("vllm-web"), None, None));
        assert_eq!(of("docker-systemd"), web);
        assert_eq!(of("docker-cgroupfs-v1"), web);
        // A v1 host that puts one hierarchy elsewhere (this project's CI).
        let elsewhere =
            format!("4:memory:/process_api/8a5781df6329b50b7c01d889ddf71ddc\n3:pids:/docker/{DOCKER}\n0::/\n");
        assert_eq!(placement(&elsewhere).unwrap().id, DOCKER);
    }

    #[test]
    fn podman_by_containers_json() {
        assert_eq!(
            of("podman"),
            Some(container("podman", PODMAN, Some("ollama"), None, None))
        );
    }

    /// Rootless podman keeps its containers in the user's own store; the
    /// machine's store does not list them (its own `ollama` has another id).
    #[test]
    fn rootless_podman_by_the_users_containers_json() {
        assert_eq!(
            of("podman-rootless"),
            Some(container("podman", PODMAN_ROOTLESS, Some("llama-dev"), None, None))
        );
        // A uid with no home in /etc/passwd: the id, unnamed.
        let c = placement(&format!(
            "0::/user.slice/user-4242.slice/user@4242.service/user.slice/libpod-{PODMAN_ROOTLESS}.scope/container\n"
        ))
        .unwrap();
        assert_eq!(c.user, Some(4242));
        let named = Namer::new(PathBuf::from(FIXTURES).join("root")).name(c);
        assert_eq!(named, container("podman", PODMAN_ROOTLESS, None, None, None));
    }

    #[test]
    fn kubernetes_by_the_cri_annotations_then_by_the_kubelet_pod_folder() {
        assert_eq!(
            of("k8s-containerd"),
            Some(container(
                "containerd",
                K8S,
                Some("trainer"),
                Some("llm-train-0"),
                Some("ml")
            ))
        );
        // No task config (another node's layout, or gone): the pod's folder.
        assert_eq!(
            of("k8s-cgroupfs"),
            Some(container(
                "containerd",
                K8S_CGROUPFS,
                None,
                Some("inference-7f9c5"),
                Some("serving")
            ))
        );
    }

    #[test]
    fn lxc_is_named_by_its_cgroup() {
        assert_eq!(
            of("lxc"),
            Some(container("lxc", "gpu-box", Some("gpu-box"), None, None))
        );
    }

    #[test]
    fn a_host_process_is_in_no_container() {
        assert_eq!(of("host-user-session"), None);
        assert_eq!(of("host-service"), None);
        assert_eq!(of("missing"), None);
    }

    #[test]
    fn unknown_names_stay_unknown() {
        // A docker container whose config is not there (another data root).
        let c = placement(&format!("0::/system.slice/docker-{}.scope\n", "a".repeat(64))).unwrap();
        let named = Namer::new(PathBuf::from(FIXTURES).join("root")).name(c);
        assert_eq!(named, container("docker", &"a".repeat(64), None, None, None));
    }
}
