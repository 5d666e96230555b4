//! The fleet from Prometheus on recorded inputs: `serve`'s own exposition
//! read back as Prometheus would hand it over, and rounds of hosts up,
//! down and gone.

use super::answer::Series;
use super::*;
use crate::serve::metrics::{render, SampleInfo};
use crate::snapshot::Snapshot;

/// The text exposition as an instant vector: every sample a series with
/// its labels, plus the `job` and `instance` Prometheus adds.
fn scraped(text: &str, job: &str, instance: &str) -> Vec<Series> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (head, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match head.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').unwrap()),
            None => (head, ""),
        };
        let mut pairs = vec![
            ("__name__".to_string(), name.to_string()),
            ("job".into(), job.into()),
            ("instance".into(), instance.into()),
        ];
        let mut rest = labels;
        while let Some((key, after)) = rest.split_once("=\"") {
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().unwrap() {
                    (_, '\\') => match chars.next().unwrap().1 {
                        'n' => value.push('\n'),
                        c => value.push(c),
                    },
                    (i, '"') => break i,
                    (_, c) => value.push(c),
                }
            };
            pairs.push((key.trim_start_matches(',').to_string(), value));
            rest = &after[end + 1..];
        }
        let labels: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        out.push(Series::new(&labels, value));
    }
    out
}

fn rebuilt(snap: &Snapshot) -> Snapshot {
    let series = scraped(&render(snap, SampleInfo::default()), "gputaskman", "a:9464");
    let refs: Vec<&Series> = series.iter().collect();
    rebuild::snapshot(&refs, "2026-12-04T00:00:00Z")
}

#[test]
fn a_hosts_exported_series_give_back_its_devices_processes_and_models() {
    let snap = crate::view::tui::fixture::desktop();
    let back = rebuilt(&snap);
    assert_eq!(back.host.hostname, snap.host.hostname);
    let unix = crate::units::unix_seconds;
    assert_eq!(unix(&back.taken_at), unix(&snap.taken_at));
    assert_eq!(back.devices.len(), snap.devices.len());
    for (b, d) in back.devices.iter().zip(&snap.devices) {
        assert_eq!(
            (b.index, &b.backend, &b.name, &b.uuid, &b.vendor),
            (d.index, &d.backend, &d.name, &d.uuid, &d.vendor)
        );
        assert_eq!(
            (b.memory_total_bytes, b.memory_used_bytes, b.memory_free_bytes),
            (d.memory_total_bytes, d.memory_used_bytes, d.memory_free_bytes)
        );
        assert_eq!(
            (b.gpu_util_percent, b.temperature_c, b.power_w, b.process_list_complete),
            (d.gpu_util_percent, d.temperature_c, d.power_w, d.process_list_complete)
        );
    }
    let mut want: Vec<&crate::snapshot::Process> = snap.processes.iter().collect();
    want.sort_by_key(|p| p.pid);
    let mut back_processes: Vec<&crate::snapshot::Process> = back.processes.iter().collect();
    back_processes.sort_by_key(|p| p.pid);
    assert_eq!(back_processes.len(), want.len());
    for (b, p) in back_processes.into_iter().zip(want) {
        assert_eq!(
            (b.pid, &b.name, b.kind, &b.runtimes),
            (p.pid, &p.name, p.kind, &p.runtimes)
        );
        assert_eq!((&b.user, &b.cmdline, b.rss_bytes), (&p.user, &p.cmdline, p.rss_bytes));
        let cpu = |x: Option<f64>| x.map(|c| (c * 1000.0).round());
        assert_eq!(cpu(b.cpu_percent), cpu(p.cpu_percent), "pid {}", p.pid);
        let usage = |p: &crate::snapshot::Process| -> Vec<_> {
            p.gpu
                .iter()
                .filter(|g| g.vram_bytes.is_some() || !g.engines.is_empty())
                .map(|g| (g.device, g.vram_bytes, g.engines.clone()))
                .collect()
        };
        assert_eq!(usage(b), usage(p), "pid {}", p.pid);
        assert_eq!(b.models.len(), p.models.len(), "pid {}", p.pid);
        for (bm, m) in b.models.iter().zip(&p.models) {
            assert_eq!(bm.path, m.path);
            assert_eq!(bm.architecture, m.architecture);
            assert_eq!(bm.confirmed, m.confirmed);
            let parts = |m: &crate::snapshot::Model| m.estimate.as_ref().map(|e| (e.weights_bytes, e.kv_bytes));
            assert_eq!(parts(bm), parts(m));
            let reported = |m: &crate::snapshot::Model| m.reported.as_ref().map(|r| (r.weights_bytes, r.kv_bytes));
            assert_eq!(reported(bm), reported(m));
        }
    }
    // Only measured bytes are summed, as on the host itself.
    assert_eq!(back.attribution.devices.len(), snap.attribution.devices.len());
    for (b, a) in back.attribution.devices.iter().zip(&snap.attribution.devices) {
        assert_eq!(b.measured_sum_bytes, a.measured_sum_bytes);
    }
}

#[test]
fn mig_instances_are_numbered_after_their_gpus_and_keep_their_labels() {
    let mut snap = crate::view::tui::fixture::server(1, 1);
    let mut mig = snap.devices[0].clone();
    mig.index = 1;
    mig.parent = Some(0);
    mig.uuid = Some("MIG-1".into());
    mig.mig = Some(crate::snapshot::MigInstance {
        gpu_instance_id: 2,
        compute_instance_id: 0,
        profile: Some("3g.40gb".into()),
    });
    snap.devices.push(mig);
    let back = rebuilt(&snap);
    let labels: Vec<(u32, String, Option<u32>)> = back.devices.iter().map(|d| (d.index, d.label(), d.parent)).collect();
    assert_eq!(labels, [(0, "0".into(), None), (1, "0/2".into(), Some(0))]);
    assert_eq!(
        back.devices[1].mig.as_ref().unwrap().profile.as_deref(),
        Some("3g.40gb")
    );
}

#[test]
fn series_without_names_or_with_garbage_values_are_unknown_not_zero() {
    let series = [
        Series::new(
            &[("__name__", "gputaskman_device_memory_used_bytes"), ("backend", "nvml")],
            "5",
        ),
        Series::new(
            &[
                ("__name__", "gputaskman_device_memory_total_bytes"),
                ("backend", "nvml"),
                ("device", "0"),
            ],
            "NaN",
        ),
        Series::new(
            &[
                ("__name__", "gputaskman_device_temperature_celsius"),
                ("backend", "nvml"),
                ("device", "0"),
            ],
            "-4",
        ),
        Series::new(&[("__name__", "gputaskman_process_vram_bytes"), ("pid", "x")], "1"),
    ];
    let refs: Vec<&Series> = series.iter().collect();
    let back = rebuild::snapshot(&refs, "2026-12-04T00:00:00Z");
    assert_eq!(back.devices.len(), 1, "the series without a device label names none");
    assert_eq!(back.devices[0].memory_total_bytes, None);
    assert_eq!(back.devices[0].temperature_c, None);
    assert!(back.processes.is_empty());
    assert_eq!(back.taken_at, "2026-12-04T00:00:00Z");
}

#[test]
fn a_crowd_of_series_and_figures_no_device_has_get_the_caps_and_checks_of_a_remote_answer() {
    // Any target in the job can write these families: 300 devices, 5000
    // processes (one on a GPU), a device of 2^60 B used of 1 B and a
    // process of 2^62 B.
    let mut series = Vec::new();
    for d in 0..300 {
        let device = d.to_string();
        let labels = [("backend", "nvml"), ("device", device.as_str())];
        let with = |name: &'static str| [&[("__name__", name)][..], &labels[..]].concat();
        series.push(Series::new(&with("gputaskman_device_memory_total_bytes"), "1"));
        series.push(Series::new(
            &with("gputaskman_device_memory_used_bytes"),
            "1152921504606846976",
        ));
    }
    for pid in 1..=5000u32 {
        let pid = pid.to_string();
        series.push(Series::new(
            &[
                ("__name__", "gputaskman_process_info"),
                ("pid", &pid),
                ("name", "crowd"),
                ("kind", "other"),
            ],
            "1",
        ));
    }
    series.push(Series::new(
        &[
            ("__name__", "gputaskman_process_vram_bytes"),
            ("pid", "5000"),
            ("backend", "nvml"),
            ("device", "0"),
        ],
        "4611686018427387904",
    ));
    let refs: Vec<&Series> = series.iter().collect();
    let back = rebuild::snapshot(&refs, "2026-12-04T00:00:00Z");
    assert_eq!(back.devices.len(), crate::serve::answer::MAX_DEVICES);
    assert_eq!(back.processes.len(), crate::serve::answer::MAX_PROCESSES);
    let cut = back
        .backends
        .iter()
        .find(|b| b.name == rebuild::CAP_BACKEND)
        .expect("the caps said");
    assert_eq!(
        cut.detail,
        "cut to this view's caps: 300 devices sent, 256 kept (at most 256), 5000 processes sent, 4096 kept \
         (at most 4096) (GPU and model processes kept first)"
    );
    let gpu_process = back
        .processes
        .iter()
        .find(|p| p.pid == 5000)
        .expect("the GPU process kept first");
    assert_eq!(
        gpu_process.gpu[0].vram_bytes, None,
        "2^62 B on a card of 1 B is no fact"
    );
    assert_eq!(back.devices[0].memory_used_bytes, None);
    let said = |notes: &[String]| notes.iter().any(|n| n.contains("implausible"));
    assert!(said(&gpu_process.notes), "{:?}", gpu_process.notes);
    assert!(said(&back.devices[0].notes), "{:?}", back.devices[0].notes);
}

fn poller() -> PromPoller {
    Access {
        url: "http://127.0.0.1:1".into(),
        ..Access::default()
    }
    .open()
    .unwrap()
}

fn value(name: &str, job: &str, instance: &str, v: &str) -> Series {
    Series::new(&[("__name__", name), ("job", job), ("instance", instance)], v)
}

#[test]
fn hosts_up_down_gone_and_never_answered_are_each_named() {
    let snap = crate::view::tui::fixture::server(1, 2);
    let mut data = scraped(&render(&snap, SampleInfo::default()), "gpu", "a:9464");
    data.extend(scraped(&render(&snap, SampleInfo::default()), "gpu", "b:9464"));
    let round = |data: Vec<Series>, b_up: &str| Round {
        asked: None,
        data,
        up: vec![
            value("up", "gpu", "a:9464", "1"),
            value("up", "gpu", "b:9464", b_up),
            value("up", "gpu", "c:9464", "0"),
            value("up", "node", "n:9100", "1"),
        ],
        scraped: vec![value("", "gpu", "a:9464", "1000"), value("", "gpu", "b:9464", "1000")],
        seen: vec![
            value("", "gpu", "a:9464", "999"),
            value("", "gpu", "b:9464", "999"),
            value("", "gpu", "gone:9464", "400"),
        ],
    };
    let mut p = poller();
    let now = Instant::now() + Duration::from_secs(60);
    p.apply(round(data.clone(), "1"), now, 1003.0);
    let hosts: Vec<(&str, bool, Option<&str>)> = p
        .hosts
        .values()
        .map(|h| (h.target.label.as_str(), h.snapshot.is_some(), h.error.as_deref()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("a:9464", true, None),
            ("b:9464", true, None),
            ("c:9464", false, Some("down: Prometheus's last scrape of it failed")),
            (
                "gone:9464",
                false,
                Some("no longer scraped by Prometheus, its last sample 603 s ago")
            ),
        ],
        "the node exporter's job is not a gputaskman host"
    );
    let a = &p.hosts[&("gpu".into(), "a:9464".into())];
    assert_eq!(a.age(now).unwrap().as_secs(), 3, "the age of the last scrape");
    assert_eq!(a.snapshot.as_ref().unwrap().devices.len(), 1);
    assert_eq!(a.snapshot.as_ref().unwrap().processes.len(), 2);

    // b goes down: its series are stale in Prometheus, the last ones kept.
    let only_a: Vec<Series> = data
        .into_iter()
        .filter(|s| s.label("instance") == Some("a:9464"))
        .collect();
    p.apply(round(only_a, "0"), now, 1003.0);
    let b = &p.hosts[&("gpu".into(), "b:9464".into())];
    assert!(b.is_stale(), "{b:?}");
    assert!(
        b.status(now).starts_with("stale: last answer 3 s ago (down: "),
        "{}",
        b.status(now)
    );
    let merged = Fleet {
        hosts: p.hosts.values().cloned().collect(),
        error: None,
    }
    .merged(now);
    let on_b: Vec<bool> = merged
        .devices
        .iter()
        .filter(|d| d.fleet.as_ref().unwrap().host.starts_with("b:"))
        .map(|d| d.stale)
        .collect();
    assert_eq!(on_b, [true]);
}

#[test]
fn prometheus_not_answering_is_the_rounds_error_and_keeps_the_hosts_stale() {
    let mut p = poller();
    let snap = crate::view::tui::fixture::server(1, 1);
    let round = Round {
        asked: None,
        data: scraped(&render(&snap, SampleInfo::default()), "gpu", "a:9464"),
        up: vec![value("up", "gpu", "a:9464", "1")],
        scraped: vec![],
        seen: vec![],
    };
    p.apply(round, Instant::now(), 1000.0);
    let fleet = p.poll(); // nothing listens on port 1
    let why = fleet.error.as_deref().unwrap();
    assert!(why.starts_with("Prometheus did not answer: "), "{why}");
    assert!(fleet.hosts[0].is_stale());
    let merged = fleet.merged(Instant::now());
    assert_eq!(merged.backends[0].name, "fleet");
    let mut out = Vec::new();
    let e = crate::serve::fleet::run_once_source(&mut p, true, None, false, &mut out).unwrap_err();
    assert!(
        e.to_string().starts_with("--prometheus: Prometheus did not answer"),
        "{e}"
    );
}

#[test]
fn urls_and_credentials_are_checked_before_any_query() {
    let open = |url: &str, ca: bool| {
        Access {
            url: url.into(),
            ca: ca.then(|| "ca.pem".into()),
            ..Access::default()
        }
        .open()
        .err()
        .map(|e| e.to_string())
    };
    assert_eq!(open("http://prom:9090/", false), None);
    assert!(open("https://prom:9090", false).unwrap().contains("--prometheus-ca"));
    assert!(open("prom:9090", false).unwrap().contains("give http://"));
    assert!(open("http://user:pw@prom:9090", false)
        .unwrap()
        .contains("credentials go in a file"));
    assert!(open("http://prom:9090/?q=1", false)
        .unwrap()
        .contains("without a query"));
    assert_eq!(poller().query_url, "http://127.0.0.1:1/api/v1/query");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("auth");
    std::fs::write(&file, "alice:s3cret\n").unwrap();
    assert_eq!(basic_auth(&file).unwrap(), "Basic YWxpY2U6czNjcmV0");
    std::fs::write(&file, "no colon\n").unwrap();
    assert!(basic_auth(&file).unwrap_err().to_string().contains("user:password"));
}

#[test]
fn the_data_query_asks_for_families_serve_writes_and_no_other() {
    let written: Vec<&str> = crate::serve::metrics::family_names().collect();
    for family in rebuild::FAMILIES {
        assert!(written.contains(&family), "{family} is not a family serve writes");
    }
    let q = data_query();
    assert!(
        q.starts_with("{__name__=~\"gputaskman_(host_info|sample_timestamp_seconds|"),
        "{q}"
    );
    assert_eq!(q.matches('|').count(), rebuild::FAMILIES.len() - 1);
}

#[test]
fn one_hosts_query_quotes_its_labels() {
    let q = host_query("gpu", "a\"b:1");
    assert!(q.ends_with(")\",job=\"gpu\",instance=\"a\\\"b:1\"}"), "{q}");
    assert!(q.starts_with("{__name__=~\"gputaskman_(host_info|"));
}

#[test]
fn a_devices_pods_come_back_with_whether_each_uses_it() {
    use crate::snapshot::PodAllocation;
    let pod = |name: &str, in_use: Option<bool>| PodAllocation {
        namespace: "ml".into(),
        pod: name.into(),
        container: "app".into(),
        resource: "nvidia.com/gpu".into(),
        device_id: "GPU-0".into(),
        in_use,
    };
    let mut snap = crate::view::tui::fixture::server(2, 1);
    snap.devices[0].pods = Some(vec![pod("busy", Some(true)), pod("unsure", None)]);
    snap.devices[1].pods = Some(vec![pod("idle", Some(false))]);
    let back = rebuilt(&snap);
    let mut first = back.devices[0].pods.clone().unwrap();
    first.sort_by(|a, b| a.pod.cmp(&b.pod));
    assert_eq!(first, vec![pod("busy", Some(true)), pod("unsure", None)]);
    assert_eq!(back.devices[1].pods, Some(vec![pod("idle", Some(false))]));
    // A device of one container has its pod on every series.
    let text = render(&snap, SampleInfo::default());
    let used = text
        .lines()
        .find(|l| l.starts_with("gputaskman_device_memory_used_bytes{") && l.contains("pod=\"idle\""));
    assert!(
        used.is_some_and(|l| l.contains("namespace=\"ml\"") && l.contains("container=\"app\"")),
        "{text}"
    );
    assert!(text.contains("gputaskman_device_allocated_idle{"), "{text}");
}

#[test]
fn a_round_reads_again_only_the_hosts_scraped_since_and_keeps_the_others() {
    let mut snap = crate::view::tui::fixture::server(1, 1);
    let both = |snap: &Snapshot| {
        let mut data = scraped(&render(snap, SampleInfo::default()), "gpu", "a:9464");
        data.extend(scraped(&render(snap, SampleInfo::default()), "gpu", "b:9464"));
        data
    };
    let round = |data: Vec<Series>, asked: Option<&[&str]>, a_at: &str, b_at: &str| Round {
        asked: asked.map(|hosts| hosts.iter().map(|h| ("gpu".to_string(), h.to_string())).collect()),
        data,
        up: vec![value("up", "gpu", "a:9464", "1"), value("up", "gpu", "b:9464", "1")],
        scraped: vec![value("", "gpu", "a:9464", a_at), value("", "gpu", "b:9464", b_at)],
        seen: vec![value("", "gpu", "a:9464", a_at), value("", "gpu", "b:9464", b_at)],
    };
    let mut p = poller();
    let now = Instant::now() + Duration::from_secs(60);
    p.apply(round(both(&snap), None, "1000", "1000"), now, 1001.0);
    let used = |p: &PromPoller, host: &str| {
        p.hosts[&("gpu".to_string(), host.to_string())]
            .snapshot
            .as_ref()
            .unwrap()
            .devices[0]
            .memory_used_bytes
    };
    let before = used(&p, "a:9464");
    // a is scraped again and asked; b is not: its figures stay, not an error.
    snap.devices[0].memory_used_bytes = Some(1 << 30);
    let only_a: Vec<Series> = both(&snap)
        .into_iter()
        .filter(|s| s.label("instance") == Some("a:9464"))
        .collect();
    p.apply(round(only_a, Some(&["a:9464"]), "1015", "1000"), now, 1016.0);
    assert_eq!(used(&p, "a:9464"), Some(1 << 30));
    assert_eq!(used(&p, "b:9464"), before);
    let b = &p.hosts[&("gpu".to_string(), "b:9464".to_string())];
    assert_eq!((b.error.as_deref(), b.age(now).map(|a| a.as_secs())), (None, Some(16)));
    // A host Prometheus no longer knows (no target, no sample in the hour)
    // is forgotten.
    let mut gone = round(Vec::new(), Some(&[]), "1015", "1000");
    gone.up.truncate(1);
    gone.scraped.truncate(1);
    gone.seen.truncate(1);
    let mut q = PromPoller {
        hosts: p.hosts.clone(),
        read_at: p.read_at.clone(),
        ..poller()
    };
    q.apply(gone, now, 1016.0);
    assert!(!q.hosts.contains_key(&("gpu".to_string(), "b:9464".to_string())));
    assert!(!q.read_at.contains_key(&("gpu".to_string(), "b:9464".to_string())));
    // A host scraped since that the round did not bring (it exported
    // nothing this time) is not shown as if unchanged.
    p.apply(round(Vec::new(), Some(&["b:9464"]), "1015", "1030"), now, 1031.0);
    let b = &p.hosts[&("gpu".to_string(), "b:9464".to_string())];
    assert_eq!(b.error.as_deref(), Some("up, but exports no gputaskman series"));
}

#[test]
fn hosts_asked_by_name_are_quoted_as_regex_literals_in_a_promql_string() {
    assert_eq!(regex_literal("a.b:9464"), "a\\.b:9464");
    assert_eq!(regex_literal("x|(y)*"), "x\\|\\(y\\)\\*");
    let q = instances_query(&["node-1:9400", "10.0.0.2:9464", "we\"ird"]);
    assert!(
        q.ends_with(r#",instance=~"node-1:9400|10\\.0\\.0\\.2:9464|we\"ird"}"#),
        "{q}"
    );
    assert!(q.starts_with(data_query().trim_end_matches('}')), "{q}");
}
