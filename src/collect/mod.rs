//! Sources of measurement, one module each, and the collector that merges
//! them with the process scan into a [`Snapshot`].

// Built on macOS, and everywhere for its tests on recorded registry reads.
#[cfg(any(test, target_os = "macos"))]
pub mod apple;
pub mod container;
// A few of the DRM source's setters serve only its tests and benchmark.
#[cfg_attr(not(test), allow(dead_code))]
pub mod drm;
pub mod host;
pub mod nvml;
pub mod plausible;
pub mod watchdog;
pub mod wddm;
pub mod wsl;

use crate::models::Discovery;
use crate::procs::{ProcInfo, ProcScanner};
use crate::snapshot::ProcessKind;
use crate::snapshot::{
    Attribution, Backend, BackendStatus, Device, GpuUsage, Match, Process, Snapshot, SCHEMA_VERSION,
};
use container::{Candidate, HostPidPairing, Pair};
use nvml::NvmlSource;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use watchdog::{Request, Watchdog, Watched};

#[derive(Debug, Clone)]
pub struct Options {
    /// Load this NVML library instead of the system's.
    pub nvml_lib: Option<PathBuf>,
    /// Only this device (its backend index).
    pub gpu: Option<u32>,
    /// Where /proc is (tests point it at recorded trees).
    pub proc_root: PathBuf,
    /// Discover models on a background thread: a sample never waits on a
    /// runtime's API, and processes not yet discovered say so
    /// (`models_pending`). One-shot output waits instead.
    pub background_discovery: bool,
    /// Under WSL: do not start the Windows host bridge (`--no-host`).
    pub no_host: bool,
}

pub struct Collector {
    options: Options,
    nvml: Result<Watchdog, Backend>,
    drm: drm::DrmSource,
    /// Apple GPUs through IOKit, and footprints.
    #[cfg(target_os = "macos")]
    apple: apple::iokit::AppleSource,
    procs: ProcScanner,
    discovery: Arc<Discovery>,
    /// In a child PID namespace NVML's PIDs are the host's: they are paired
    /// with ours by order instead of taken as they are.
    child_namespace: bool,
    pairing: HostPidPairing,
    /// Under WSL: the Windows host's counters, through the bridge.
    wsl: Option<wsl::WslHost>,
    #[cfg(windows)]
    wddm: wddm::pdh::WddmSource,
}

impl Collector {
    pub fn new(options: Options) -> Collector {
        let nvml = NvmlSource::open(options.nvml_lib.as_deref()).map(|mut source| {
            Watchdog::start(move |r: Request| source.sample(r.only, &|pid| r.visible.contains(&pid)))
        });
        let procs = ProcScanner::new(options.proc_root.clone());
        let discovery = Arc::new(Discovery::new(options.proc_root.clone()));
        let child_namespace = container::in_child_pid_namespace(&options.proc_root).unwrap_or(false);
        // The sysfs root, like the procfs one, can point at a recorded tree.
        let sys_root = std::env::var_os("GPUTASKMAN_SYS_ROOT").map_or_else(|| PathBuf::from("/sys"), PathBuf::from);
        let drm = drm::DrmSource::new(options.proc_root.clone(), sys_root);
        let wsl = host::is_wsl().then(|| wsl::WslHost::open(options.no_host));
        if let (Some(host), false) = (&wsl, options.background_discovery) {
            // One-shot output waits (boundedly) rather than print "starting".
            host.wait_first();
        }
        Collector {
            // Footprints on their own thread where discovery is too (the
            // live view, record); measured in line for one-shot output.
            #[cfg(target_os = "macos")]
            apple: apple::iokit::AppleSource::new(options.background_discovery),
            options,
            nvml,
            drm,
            procs,
            discovery,
            child_namespace,
            pairing: HostPidPairing::default(),
            wsl,
            #[cfg(windows)]
            wddm: wddm::pdh::WddmSource::open(),
        }
    }

    /// Takes a first CPU-time reading so the next sample has CPU%.
    pub fn prime(&mut self) {
        self.procs.prime();
        self.drm.prime();
        // A first GPU-time reading, so the next sample has shares.
        #[cfg(target_os = "macos")]
        drop(self.apple.sample(0, None));
        // A first Running Time reading, so the next sample has engine %.
        #[cfg(windows)]
        drop(self.wddm.sample(&mut [], 0));
    }

    pub fn sample(&mut self) -> Snapshot {
        let taken_at = crate::units::now_rfc3339();
        let mut backends = Vec::new();
        let scanned = match self.procs.scan() {
            Ok(list) => list,
            Err(e) => {
                backends.push(Backend {
                    name: "procs".into(),
                    status: BackendStatus::Error,
                    detail: format!("{e:#}"),
                });
                Vec::new()
            }
        };
        // In a child PID namespace no NVML PID can be checked against ours.
        let visible: HashSet<u32> = match self.child_namespace {
            false => scanned.iter().map(|p| p.pid).collect(),
            true => HashSet::new(),
        };
        // Under WSL, NVML's PIDs that are not ours are Windows PIDs.
        let windows_pids = self.wsl.is_some().then(|| visible.clone());

        let mut devices = Vec::new();
        let mut gpu_processes = Vec::new();
        match &mut self.nvml {
            Ok(nvml) => {
                let (status, detail, sample) = match nvml.sample(self.options.gpu, visible, watchdog::DEADLINE) {
                    Watched::Fresh(sample) => {
                        let mut detail = nvml_summary(&sample.devices);
                        if self.child_namespace {
                            detail.push_str("; in a container's PID namespace: NVML's host PIDs are paired with this container's CUDA processes by creation order");
                        }
                        (BackendStatus::Ok, detail, Some(sample))
                    }
                    Watched::Stale(waited, last) => (
                        BackendStatus::Error,
                        format!(
                            "NVML has not answered for {:.1} s (a driver call hangs); {}",
                            waited.as_secs_f64(),
                            if last.is_some() {
                                "showing its last values, marked stale"
                            } else {
                                "no values yet"
                            }
                        ),
                        last,
                    ),
                    Watched::Failed(e) => (BackendStatus::Error, e, None),
                };
                backends.push(Backend {
                    name: "nvml".into(),
                    status,
                    detail,
                });
                if let Some(sample) = sample {
                    devices.extend(sample.devices);
                    gpu_processes.extend(sample.processes);
                }
            }
            Err(unavailable) => backends.push(unavailable.clone()),
        }
        // DRM devices come after NVML's and leave NVIDIA cards NVML reads to it.
        let nvml_devices = devices.len() as u32;
        self.drm.set_index_base(nvml_devices);
        self.drm
            .set_covered_pci(devices.iter().filter_map(|d| d.pci_bus_id.as_deref()));
        match self.drm.sample(self.options.gpu) {
            Ok(sample) => {
                devices.extend(sample.devices);
                gpu_processes.extend(sample.processes);
                backends.push(self.drm.backend());
            }
            Err(e) => backends.push(Backend {
                name: "drm".into(),
                status: BackendStatus::Error,
                detail: e,
            }),
        }
        // Apple GPUs (IOKit) on macOS, after the other sources.
        #[cfg(target_os = "macos")]
        let apple_window = {
            let index_base = devices.iter().map(|d| d.index + 1).max().unwrap_or(0);
            let (sample, backend) = self.apple.sample(index_base, self.options.gpu);
            backends.push(backend);
            devices.extend(sample.devices);
            gpu_processes.extend(
                sample
                    .processes
                    .into_iter()
                    .map(|(pid, usage)| nvml::GpuProcess { pid, usage }),
            );
            (sample.process_notes, sample.busy, sample.creators)
        };

        // Windows counters: natively, or from the host under WSL. They come
        // after the other sources, whose devices they are matched to by LUID.
        let mut host_usage: Vec<(Owner, GpuUsage)> = Vec::new();
        let mut pid_notes: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let mut windows_rows = BTreeMap::new();
        let index_base = devices.iter().map(|d| d.index + 1).max().unwrap_or(0);
        #[cfg(windows)]
        {
            let (backend, sample) = self.wddm.sample(&mut devices, index_base);
            backends.push(backend);
            devices.extend(sample.devices);
            host_usage.extend(sample.usage.into_iter().map(|(pid, u)| (Owner::Local(pid), u)));
            pid_notes.extend(sample.notes);
        }
        if let Some(host) = &mut self.wsl {
            let candidates = wsl_candidates(&scanned);
            let (backend, sample) = host.sample(&mut devices, index_base, &candidates);
            backends.push(backend);
            devices.extend(sample.devices);
            host_usage.extend(sample.usage.into_iter().map(|(owner, u)| match owner {
                wsl::Owner::Linux { pid, vmwp } => (Owner::Paired { pid, host_pid: vmwp }, u),
                wsl::Owner::Windows(pid) => (Owner::Host(pid), u),
            }));
            pid_notes.extend(sample.linux_notes);
            windows_rows = sample.windows;
        }
        if let Some(only) = self.options.gpu {
            devices.retain(|d| d.index == only);
            host_usage.retain(|(_, u)| u.device == only);
        }

        let mut gpu_processes: Vec<(Owner, GpuUsage)> = match self.child_namespace {
            false => gpu_processes
                .into_iter()
                .map(|g| match &windows_pids {
                    Some(ours) if !ours.contains(&g.pid) => (Owner::Host(g.pid), g.usage),
                    _ => (Owner::Local(g.pid), g.usage),
                })
                .collect(),
            true => self.pair_host_pids(&scanned, gpu_processes),
        };
        gpu_processes.extend(host_usage);
        let mut processes = merge(&scanned, gpu_processes, self.options.gpu.is_none());
        let mut drm_notes = self.drm.take_process_notes();
        for p in processes.iter_mut().filter(|p| p.name.is_some()) {
            p.rss_anon_bytes = self.procs.rss_anon(p.pid);
            p.notes.extend(drm_notes.remove(&p.pid).unwrap_or_default());
            p.notes.extend(pid_notes.remove(&p.pid).unwrap_or_default());
            let cuda_on_3d: Vec<String> = p
                .gpu
                .iter()
                .filter_map(|g| wddm::cuda_on_3d_note(&p.runtimes, g))
                .collect();
            p.notes.extend(cuda_on_3d);
        }
        if self.wsl.is_some() {
            for p in processes
                .iter_mut()
                .filter(|p| p.name.is_none() && p.host_pid.is_some())
            {
                let (name, note) = windows_rows.remove(&p.pid).unwrap_or_else(|| {
                    let note = format!(
                        "PID {} is not a Linux process here: a Windows process NVML lists",
                        p.pid
                    );
                    (None, note)
                });
                p.name = name;
                p.notes = vec![note];
            }
        }
        #[cfg(target_os = "macos")]
        self.apple_footprints(&scanned, &mut processes, apple_window);
        let ai: Vec<&ProcInfo> = scanned
            .iter()
            .filter(|i| i.kind == ProcessKind::Ai && processes.iter().any(|p| p.pid == i.pid && p.host_pid.is_none()))
            .collect();
        if self.options.background_discovery {
            for p in &mut processes {
                let Some(info) = ai.iter().find(|i| i.pid == p.pid) else {
                    continue;
                };
                match self.discovery.latest(p.pid, &info.start_time) {
                    Some(found) => found.apply_to(p),
                    None => p.models_pending = true,
                }
            }
            self.discovery.discover_in_background(ai.into_iter().cloned().collect());
        } else {
            let mut found = self.discovery.discover(&ai);
            for p in &mut processes {
                if let Some(found) = found.remove(&p.pid) {
                    found.apply_to(p);
                }
            }
        }
        plausible::check(&mut devices, &mut processes);
        let attribution = Attribution::compute(&devices, &processes);
        Snapshot {
            schema_version: SCHEMA_VERSION,
            taken_at,
            host: host::read(),
            backends,
            devices,
            processes,
            attribution,
        }
    }
}

impl Collector {
    /// Gives each NVML entry its owner in this namespace (see
    /// [`container`]): a container process, paired exactly or by a guess, or
    /// a host process.
    fn pair_host_pids(&mut self, scanned: &[ProcInfo], gpu: Vec<nvml::GpuProcess>) -> Vec<(Owner, GpuUsage)> {
        let candidates: Vec<Candidate> = scanned
            .iter()
            .filter(|i| i.runtimes.iter().any(|r| r == "cuda"))
            .map(|i| Candidate {
                started: i.start_ticks,
                pid: i.pid,
            })
            .collect();
        let mut host_pids: Vec<u32> = gpu.iter().map(|g| g.pid).collect();
        host_pids.sort_unstable();
        host_pids.dedup();
        let pairs = self.pairing.pair(&host_pids, &candidates);
        gpu.into_iter()
            .map(|g| {
                let mut usage = g.usage;
                let owner = match pairs.get(&g.pid) {
                    Some(Pair::Exact(pid)) => {
                        usage.pairing = Some(Match::Exact);
                        Owner::Paired {
                            pid: *pid,
                            host_pid: g.pid,
                        }
                    }
                    Some(Pair::Guess(pid)) => {
                        usage.pairing = Some(Match::Guess);
                        Owner::Paired {
                            pid: *pid,
                            host_pid: g.pid,
                        }
                    }
                    Some(Pair::Host) | None => {
                        usage.pairing = None;
                        Owner::Host(g.pid)
                    }
                };
                (owner, usage)
            })
            .collect()
    }
}

/// Under WSL, the Linux processes that can hold a GPU context (through
/// /dev/dxg: the CUDA, D3D12 and DXCore user-mode libraries).
fn wsl_candidates(scanned: &[ProcInfo]) -> Vec<Candidate> {
    scanned
        .iter()
        .filter(|i| {
            i.runtimes
                .iter()
                .any(|r| matches!(r.as_str(), "cuda" | "d3d12" | "dxcore"))
        })
        .map(|i| Candidate {
            started: i.start_ticks,
            pid: i.pid,
        })
        .collect()
}

#[cfg(target_os = "macos")]
impl Collector {
    /// Per listed process: why its GPU share is unknown, its physical
    /// footprint (busy processes, whose GPU time moved, measured more
    /// often), and for a GPU client whose process the scan did not see, the
    /// name its client gives.
    fn apple_footprints(
        &self,
        scanned: &[ProcInfo],
        processes: &mut [Process],
        (mut notes, busy, creators): apple::Window,
    ) {
        let starts: std::collections::HashMap<u32, u64> = scanned.iter().map(|i| (i.pid, i.start_ticks)).collect();
        let wanted = processes
            .iter()
            .filter_map(|p| {
                Some(apple::Wanted {
                    pid: p.pid,
                    start: *starts.get(&p.pid)?,
                    busy: busy.get(&p.pid).copied().unwrap_or(false),
                    gpu_client: !p.gpu.is_empty(),
                    ai: p.kind == ProcessKind::Ai,
                })
            })
            .collect();
        self.apple.want_footprints(wanted);
        for p in processes {
            p.notes.extend(notes.remove(&p.pid).unwrap_or_default());
            match starts.get(&p.pid) {
                Some(&start) => {
                    let (bytes, note) = self.apple.footprint(p.pid, start);
                    p.footprint_bytes = bytes;
                    p.notes.extend(note);
                }
                None => {
                    if let Some(name) = creators.get(&p.pid) {
                        p.notes
                            .push(format!("its GPU client names it \"{name}\" (IOUserClientCreator)"));
                    }
                }
            }
        }
    }
}

/// Whose a GPU entry is, in this PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    /// The PID is ours (no namespace in between).
    Local(u32),
    /// A host PID paired with one of ours.
    Paired { pid: u32, host_pid: u32 },
    /// A host PID with no process here.
    Host(u32),
}

fn nvml_summary(devices: &[Device]) -> String {
    let first = devices.first();
    let version = |v: Option<&String>| v.cloned().unwrap_or_else(|| "n/a".into());
    format!(
        "{} device{}, driver {}, CUDA {}",
        devices.len(),
        if devices.len() == 1 { "" } else { "s" },
        version(first.and_then(|d| d.driver_version.as_ref())),
        version(first.and_then(|d| d.cuda_version.as_ref())),
    )
}

/// Pairs the GPU backends' processes with the process scan. Listed: every
/// process a backend names (a PID we cannot see gets a row with a note),
/// and, with `include_idle`, every process the scan finds interesting (AI
/// work, a GPU compute runtime) even with no GPU memory.
fn merge(scanned: &[ProcInfo], gpu: Vec<(Owner, GpuUsage)>, include_idle: bool) -> Vec<Process> {
    let mut local: BTreeMap<u32, (Option<u32>, Vec<GpuUsage>)> = BTreeMap::new();
    let mut elsewhere: BTreeMap<(u32, bool), Vec<GpuUsage>> = BTreeMap::new();
    for (owner, usage) in gpu {
        match owner {
            Owner::Local(pid) => local.entry(pid).or_default().1.push(usage),
            Owner::Paired { pid, host_pid } => {
                let entry = local.entry(pid).or_default();
                entry.0 = Some(host_pid);
                entry.1.push(usage);
            }
            Owner::Host(host_pid) => elsewhere.entry((host_pid, true)).or_default().push(usage),
        }
    }
    let mut out = Vec::new();
    for info in scanned {
        let (host_pid, gpu) = local.remove(&info.pid).unwrap_or_default();
        if gpu.is_empty() && !(include_idle && info.is_interesting()) {
            continue;
        }
        out.push(Process {
            pid: info.pid,
            host_pid,
            name: Some(info.name.clone()),
            start_time: info.start_time.clone(),
            user: info.user.clone(),
            cmdline: info.cmdline.clone(),
            exe: info.exe.clone(),
            kind: info.kind,
            runtimes: info.runtimes.clone(),
            cpu_percent: info.cpu_percent,
            rss_bytes: info.rss_bytes,
            rss_anon_bytes: None,
            footprint_bytes: None,
            gpu,
            models: Vec::new(),
            models_pending: false,
            listen_ports: None,
            notes: info.notes.clone(),
        });
    }
    // Local PIDs that are not in our /proc (exited, or the source's view is
    // not ours), then host PIDs with no process here.
    elsewhere.extend(local.into_iter().map(|(pid, (_, gpu))| ((pid, false), gpu)));
    for ((pid, is_host), gpu) in elsewhere {
        let sources: Vec<&str> = gpu.iter().map(|g| g.source.as_str()).collect();
        let note = if is_host {
            format!(
                "H:{pid}: a process outside this container (host PID {pid} from {})",
                sources.join(", ")
            )
        } else {
            format!(
                "PID {pid} from {} is not in this /proc: it runs in another PID namespace (a container or the host) or has exited",
                sources.join(", ")
            )
        };
        out.push(Process {
            pid,
            host_pid: is_host.then_some(pid),
            name: None,
            start_time: None,
            user: None,
            cmdline: None,
            exe: None,
            kind: ProcessKind::Other,
            runtimes: Vec::new(),
            cpu_percent: None,
            rss_bytes: None,
            rss_anon_bytes: None,
            footprint_bytes: None,
            notes: vec![note],
            gpu,
            models: Vec::new(),
            models_pending: false,
            listen_ports: None,
        });
    }
    out.sort_by(|a, b| vram(b).cmp(&vram(a)).then(a.pid.cmp(&b.pid)));
    out
}

/// Measured VRAM over all devices, for ordering rows.
pub fn vram(p: &Process) -> u64 {
    p.gpu.iter().filter_map(|g| g.vram_bytes).sum()
}

/// The first sample goes out at once (CPU% is n/a in it: there is no
/// earlier reading); the second follows this soon, with CPU%.
const SECOND_SAMPLE_AFTER: Duration = Duration::from_millis(250);

/// Samples on a thread of its own, for the live view and `serve`: a sample
/// now, one [`SECOND_SAMPLE_AFTER`] later (for CPU%), then one every
/// `interval`, each handed to `deliver` with how long it took. Model
/// discovery runs in the background, so a sample never waits for a runtime
/// API. Stops when `deliver` returns false.
pub fn spawn_sampler(
    mut options: Options,
    interval: Duration,
    mut deliver: impl FnMut(Snapshot, Duration) -> bool + Send + 'static,
) {
    options.background_discovery = true;
    std::thread::Builder::new()
        .name("gputaskman-sampler".into())
        .spawn(move || {
            let mut collector = Collector::new(options);
            let mut period = SECOND_SAMPLE_AFTER.min(interval);
            loop {
                let started = Instant::now();
                let snapshot = collector.sample();
                if !deliver(snapshot, started.elapsed()) {
                    return;
                }
                if let Some(rest) = period.checked_sub(started.elapsed()) {
                    std::thread::sleep(rest);
                }
                period = interval;
            }
        })
        .expect("spawn the sampling thread");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    #[test]
    fn background_discovery_never_blocks_a_sample_and_lands_later() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("llama-server");
        std::os::unix::fs::symlink("/bin/sh", &exe).unwrap();
        let model = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/qwen3-0.6b-shape.gguf");
        let mut child = Command::new(&exe)
            .args(["-c", "read _", "llama-server", "-m", model, "-c", "4096"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut collector = Collector::new(Options {
            nvml_lib: Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")),
            gpu: None,
            proc_root: PathBuf::from("/proc"),
            background_discovery: true,
            no_host: true,
        });
        let first = collector.sample();
        let find = |s: &Snapshot| s.processes.iter().find(|p| p.pid == child.id()).cloned();
        let p = find(&first).expect("the server is listed");
        assert!(p.models_pending, "the first sample does not wait for discovery");
        assert!(p.models.is_empty());
        let deadline = Instant::now() + Duration::from_secs(10);
        let landed = loop {
            std::thread::sleep(Duration::from_millis(50));
            let p = find(&collector.sample()).unwrap();
            if !p.models_pending || Instant::now() > deadline {
                break p;
            }
        };
        child.kill().ok();
        child.wait().ok();
        assert!(!landed.models_pending);
        assert_eq!(landed.models.len(), 1);
        assert_eq!(landed.models[0].path.as_deref(), Some(model));
        assert_eq!(landed.models[0].evidence, ["cmdline"]);
        assert_eq!(landed.models[0].estimate.as_ref().unwrap().kv_bytes, Some(448 << 20));
    }
}
