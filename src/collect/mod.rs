//! Sources of measurement, one module each, and the collector that merges
//! them with the process scan into a [`Snapshot`].

// Built on macOS, and everywhere for its tests on recorded registry reads.
#[cfg(any(test, target_os = "macos"))]
pub mod apple;
pub mod ascend;
pub mod container;
pub mod containers;
// A few of the DRM source's setters serve only its tests and benchmark.
#[cfg_attr(not(test), allow(dead_code))]
pub mod drm;
pub mod host;
pub mod jetson;
#[cfg(target_os = "linux")]
pub mod kubelet;
pub mod nvml;
pub mod plausible;
pub mod sample;
pub mod source;
pub mod watchdog;
pub mod wddm;
pub mod wsl;

use crate::models::Discovery;
use crate::procs::{ProcInfo, ProcScanner};
use crate::snapshot::ProcessKind;
use crate::snapshot::{Attribution, Backend, BackendStatus, GpuUsage, Process, Snapshot, SCHEMA_VERSION};
use container::PidView;
use source::{Owner, Round, Source};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    /// Load this NVML library instead of the system's.
    pub nvml_lib: Option<PathBuf>,
    /// Only this device (its backend index), or this MIG instance.
    pub gpu: Option<crate::snapshot::gpu_choice::GpuChoice>,
    /// Where /proc is (tests point it at recorded trees).
    pub proc_root: PathBuf,
    /// Discover models on a background thread: a sample never waits on a
    /// runtime's API, and processes not yet discovered say so
    /// (`models_pending`). One-shot output waits instead.
    pub background_discovery: bool,
    /// Ask runtimes' APIs (and logs, sockets) which models they hold at all
    /// (`--no-discovery`, the config's `discovery = false`).
    pub discovery: bool,
    /// Under WSL: do not start the Windows host bridge (`--no-host`).
    pub no_host: bool,
    /// The kubelet's pod-resources socket (`--pod-resources-socket`);
    /// None: its usual place, where it exists.
    pub pod_resources_socket: Option<PathBuf>,
}

pub struct Collector {
    options: Options,
    /// Read in this order each sample; each numbers its devices after
    /// those of the sources before it.
    sources: Vec<Box<dyn Source>>,
    procs: ProcScanner,
    discovery: Arc<Discovery>,
    pids: PidView,
    /// Which container each process runs in, names cached.
    containers: containers::Namer,
    /// On a Kubernetes node: which pod each device was allocated to.
    #[cfg(target_os = "linux")]
    kubelet: Option<kubelet::Kubelet>,
}

/// Why a PID a source names is not among the scanned processes, in the
/// terms of the platform's process list.
#[cfg(target_os = "linux")]
const NOT_SCANNED: &str =
    "is not in this /proc: it runs in another PID namespace (a container or the host) or has exited";
#[cfg(windows)]
const NOT_SCANNED: &str = "is not in the process list (Toolhelp): it has exited or runs in another container";
#[cfg(not(any(target_os = "linux", windows)))]
const NOT_SCANNED: &str = "is not in the process list: it has exited";

/// The sources of this platform, in the order they are read: NVML first,
/// then on Linux DRM (which leaves NVML's cards to it), Jetson and Ascend,
/// then the platform's own, and last the Windows counters, which are
/// matched to the devices before them. DRM, /sys and /proc are Linux's: a
/// Windows build run under Wine would otherwise read the Linux host's
/// through Wine's Z: drive.
fn sources(options: &Options, in_child_namespace: bool) -> Vec<Box<dyn Source>> {
    let mut list: Vec<Box<dyn Source>> = vec![Box::new(nvml::WatchedNvml::open(
        options.nvml_lib.as_deref(),
        in_child_namespace,
    ))];
    #[cfg(target_os = "linux")]
    {
        // The sysfs root, like the procfs one, can point at a recorded tree.
        let sys_root = std::env::var_os("GPUTASKMAN_SYS_ROOT").map_or_else(|| PathBuf::from("/sys"), PathBuf::from);
        list.push(Box::new(drm::DrmSource::new(
            options.proc_root.clone(),
            sys_root.clone(),
        )));
        list.push(Box::new(jetson::JetsonSource::new(options.proc_root.clone(), sys_root)));
        list.push(Box::new(ascend::AscendSource::open()));
    }
    // Footprints on their own thread where discovery is too (the live
    // view, record); measured in line for one-shot output.
    #[cfg(target_os = "macos")]
    list.push(Box::new(apple::iokit::AppleSource::new(options.background_discovery)));
    #[cfg(windows)]
    list.push(Box::new(wddm::pdh::WddmSource::open()));
    if host::is_wsl() {
        // One-shot output waits (boundedly) rather than print "starting".
        list.push(Box::new(wsl::WslGuest::open(
            options.no_host,
            !options.background_discovery,
        )));
    }
    list
}

impl Collector {
    pub fn new(options: Options) -> Collector {
        let in_child_namespace = container::in_child_pid_namespace(&options.proc_root).unwrap_or(false);
        Collector {
            sources: sources(&options, in_child_namespace),
            procs: ProcScanner::new(options.proc_root.clone()),
            discovery: Arc::new(Discovery::new(options.proc_root.clone())),
            pids: PidView::new(in_child_namespace, host::is_wsl()),
            // The runtimes' files are the machine's, wherever /proc is read.
            containers: containers::Namer::new(PathBuf::from("/")),
            #[cfg(target_os = "linux")]
            kubelet: kubelet::Kubelet::find(options.pod_resources_socket.as_deref()),
            options,
        }
    }

    /// Takes a first CPU-time reading so the next sample has CPU%, and the
    /// sources' first readings of what they measure as rates.
    pub fn prime(&mut self) {
        self.procs.prime();
        for source in &mut self.sources {
            source.prime();
        }
    }

    pub fn sample(&mut self) -> Snapshot {
        self.sample_within(None)
    }

    /// For a view that shows only GPU and model processes: the others'
    /// stat is read every `every`th sample (1: every sample), listed in
    /// between with CPU% and RSS unknown. Linux only: the other platforms'
    /// scans read every process in one call anyway.
    pub fn read_quiet_processes_every(&mut self, every: u32) {
        #[cfg(target_os = "linux")]
        self.procs.read_quiet_processes_every(every);
        #[cfg(not(target_os = "linux"))]
        let _ = every;
    }

    /// Learns of new, exec'd and gone processes from the kernel's events
    /// instead of listing /proc each sample, where this process may (Linux:
    /// root or CAP_NET_ADMIN, in the initial PID namespace); elsewhere, or
    /// when refused, the samples go on listing /proc. Says whether it does.
    pub fn follow_process_events(&mut self) -> bool {
        #[cfg(target_os = "linux")]
        return self.procs.follow_process_events().is_ok();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// One snapshot whose rates are measured over at least `min_window`,
    /// for one-shot output: the window opens now (every source's first
    /// reading, and the scan is each process's), the work runs inside it,
    /// and only what it leaves of `min_window` is slept, before the
    /// sources' second reading and before the processes' (which the scanner
    /// takes last, for the listed processes only).
    pub fn sample_measured(&mut self, min_window: Duration) -> Snapshot {
        let opened = Instant::now();
        self.procs.open_cpu_window();
        for source in &mut self.sources {
            source.prime();
        }
        self.sample_within(Some((opened, min_window)))
    }

    fn sample_within(&mut self, window: Option<(Instant, Duration)>) -> Snapshot {
        let taken_at = crate::units::now_rfc3339();
        let mut backends = Vec::new();
        let mut scanned = match self.procs.scan() {
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
        if self.pids.pairs_by_libraries() {
            self.procs.read_deferred_maps(|_| true, &mut scanned);
        }
        let visible = self.pids.visible(&scanned);
        let mut round = Round {
            // Sources read the GPU; its instances are picked out below.
            only: self.options.gpu.map(|choice| choice.index),
            scanned: &scanned,
            visible: &visible,
            devices: Vec::new(),
        };
        let mut usage = Vec::new();
        let mut notes: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        if let Some(rest) = window.and_then(|(opened, min)| min.checked_sub(opened.elapsed())) {
            std::thread::sleep(rest);
        }
        for source in &mut self.sources {
            let (backend, reading) = source.read(&mut round);
            backends.push(backend);
            round.devices.extend(reading.devices);
            usage.extend(reading.usage);
            for (pid, more) in reading.notes {
                notes.entry(pid).or_default().extend(more);
            }
        }
        let mut devices = round.devices;
        if let Some(choice) = self.options.gpu {
            devices.retain(|d| choice.matches(d));
            usage.retain(|(_, u)| devices.iter().any(|d| d.index == u.device));
        }
        // The scan deferred the maps of processes whose names say nothing;
        // those a source names are GPU work whatever their name.
        let named: std::collections::HashSet<u32> = usage
            .iter()
            .filter_map(|(owner, _)| match owner {
                Owner::Local(pid) | Owner::Paired { pid, .. } => Some(*pid),
                Owner::Host(_) => None,
            })
            .collect();
        self.procs.read_deferred_maps(|pid| named.contains(&pid), &mut scanned);
        #[cfg(target_os = "linux")]
        self.procs.note_gpu_holders(named, &mut scanned);
        let usage = self.pids.owners(&scanned, &visible, usage);
        let mut processes = merge(&scanned, usage, self.options.gpu.is_none());
        for p in processes.iter_mut().filter(|p| p.name.is_some()) {
            p.rss_anon_bytes = self.procs.rss_anon(p.pid);
            p.notes.extend(notes.remove(&p.pid).unwrap_or_default());
            let cuda_on_3d: Vec<String> = p
                .gpu
                .iter()
                .filter_map(|g| wddm::cuda_on_3d_note(&p.runtimes, g))
                .collect();
            p.notes.extend(cuda_on_3d);
        }
        for source in &mut self.sources {
            source.finish(&scanned, &mut processes);
        }
        self.apply_discovery(&scanned, &mut processes);
        // Only processes in our /proc (named): the others have no cgroup
        // file here.
        for p in processes.iter_mut().filter(|p| p.name.is_some()) {
            p.container = self.containers.container(&self.options.proc_root, p.pid);
        }
        #[cfg(target_os = "linux")]
        if let Some(kubelet) = &self.kubelet {
            // One-shot output waits for the kubelet, as for models.
            backends.push(kubelet.apply(!self.options.background_discovery, &mut devices, &processes));
        }
        if let Some((_, min)) = window {
            self.procs.close_cpu_window(min, &mut processes);
        }
        plausible::check(&mut devices, &mut processes);
        crate::snapshot::reconcile::fill(&devices, &mut processes);
        let attribution = Attribution::compute(&devices, &processes);
        #[cfg(target_os = "linux")]
        self.procs.keep(scanned);
        Snapshot {
            schema_version: SCHEMA_VERSION,
            taken_at,
            cpu_window_seconds: self.procs.cpu_window().map(|w| w.as_secs_f64()),
            host: host::read(),
            backends,
            devices,
            processes,
            attribution,
        }
    }

    /// The models of the AI processes listed: found now for one-shot output,
    /// or what the background discovery has so far (and a new round of it).
    fn apply_discovery(&self, scanned: &[ProcInfo], processes: &mut [Process]) {
        if !self.options.discovery {
            // Nothing asked: what the models are stays unknown.
            return;
        }
        let ai: Vec<&ProcInfo> = scanned
            .iter()
            .filter(|i| i.kind == ProcessKind::Ai && processes.iter().any(|p| p.pid == i.pid && p.host_pid.is_none()))
            .collect();
        if self.options.background_discovery {
            for p in processes.iter_mut() {
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
            for p in processes.iter_mut() {
                if let Some(found) = found.remove(&p.pid) {
                    found.apply_to(p);
                }
            }
        }
    }
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
            ppid: info.ppid,
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
            reconciliation: Vec::new(),
            models_pending: false,
            listen_ports: None,
            container: None,
            host: None,
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
            format!("PID {pid} from {} {NOT_SCANNED}", sources.join(", "))
        };
        out.push(Process {
            pid,
            host_pid: is_host.then_some(pid),
            notes: vec![note],
            gpu,
            ..Process::default()
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
/// API. `quiet_every` is read before each sample
/// ([`Collector::read_quiet_processes_every`]); unparking the returned
/// thread after setting it to 1 takes the next sample at once. Stops when
/// `deliver` returns false.
pub fn spawn_sampler(
    mut options: Options,
    interval: Duration,
    quiet_every: Arc<std::sync::atomic::AtomicU32>,
    mut deliver: impl FnMut(Snapshot, Duration) -> bool + Send + 'static,
) -> std::thread::Thread {
    use std::sync::atomic::Ordering;
    options.background_discovery = true;
    std::thread::Builder::new()
        .name("gputaskman-sampler".into())
        .spawn(move || {
            let mut collector = Collector::new(options);
            let mut period = SECOND_SAMPLE_AFTER.min(interval);
            let mut first = true;
            loop {
                let started = Instant::now();
                let every = quiet_every.load(Ordering::Relaxed);
                collector.read_quiet_processes_every(every);
                let snapshot = collector.sample();
                if !deliver(snapshot, started.elapsed()) {
                    return;
                }
                if first && every > 1 {
                    // A view that reads quiet processes only now and then
                    // (the live view) learns of the rest from the kernel;
                    // one that reads every process every sample (serve)
                    // would save only the listing, and each instance's
                    // reader would wake at every fork on the machine.
                    // After the first figures, not before them: where the
                    // kernel sends no events, the proof waits for one.
                    collector.follow_process_events();
                }
                first = false;
                // Until the next sample is due, or at once when the view
                // now shows every process (the quiet ones it lists without
                // figures get them in this sample, not an interval later).
                let due = started + period;
                while let Some(rest) = due.checked_duration_since(Instant::now()) {
                    if every > 1 && quiet_every.load(Ordering::Relaxed) == 1 {
                        break;
                    }
                    std::thread::park_timeout(rest);
                }
                period = interval;
            }
        })
        .expect("spawn the sampling thread")
        .thread()
        .clone()
}

// Unix only: the tests start a process under a name of their own (a symlink).
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const MODEL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gguf/qwen3-0.6b-shape.gguf");

    /// A process named llama-server that names MODEL on its command line,
    /// and a collector that would discover it if `discovery`.
    fn llama_server_and_collector(discovery: bool) -> (tempfile::TempDir, std::process::Child, Collector) {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("llama-server");
        std::os::unix::fs::symlink("/bin/sh", &exe).unwrap();
        let child = Command::new(&exe)
            .args(["-c", "read _", "llama-server", "-m", MODEL, "-c", "4096"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let collector = Collector::new(Options {
            nvml_lib: Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")),
            gpu: None,
            proc_root: PathBuf::from("/proc"),
            background_discovery: true,
            discovery,
            no_host: true,
            pod_resources_socket: None,
        });
        (dir, child, collector)
    }

    #[test]
    fn without_discovery_no_model_is_looked_for() {
        let (_dir, mut child, mut collector) = llama_server_and_collector(false);
        let mut seen = Vec::new();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(100));
            seen.extend(collector.sample().processes.into_iter().filter(|p| p.pid == child.id()));
        }
        child.kill().ok();
        child.wait().ok();
        assert_eq!(seen.len(), 5, "the server is listed in every sample");
        for p in seen {
            assert_eq!(p.runtimes, ["llama.cpp"], "the runtime is still named");
            assert!(p.models.is_empty() && !p.models_pending, "{p:?}");
        }
    }

    #[test]
    fn a_live_sample_states_the_window_since_the_previous_one() {
        let (_dir, mut child, mut collector) = llama_server_and_collector(false);
        let started = Instant::now();
        let first = collector.sample();
        std::thread::sleep(Duration::from_millis(200));
        let second = collector.sample();
        let bound = started.elapsed();
        child.kill().ok();
        child.wait().ok();
        assert_eq!(first.cpu_window_seconds, None, "no earlier reading: no window");
        let p = first.processes.iter().find(|p| p.pid == child.id()).unwrap();
        assert_eq!(p.cpu_percent, None);
        let window = second.cpu_window_seconds.expect("a window");
        assert!(window >= 0.2 && window <= bound.as_secs_f64(), "{window} s");
        let p = second.processes.iter().find(|p| p.pid == child.id()).unwrap();
        assert!(p.cpu_percent.is_some());
    }

    #[test]
    fn background_discovery_never_blocks_a_sample_and_lands_later() {
        let (_dir, mut child, mut collector) = llama_server_and_collector(true);
        let model = MODEL;
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
