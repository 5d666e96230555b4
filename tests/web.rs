//! The web view end to end: the real `serve` on the fake NVML with real
//! processes, read by a real Chromium (Debian's `chromium` and
//! `chromium-driver`, driven by Selenium: tests/web/browser.py). Every
//! figure the page shows is checked against `gputaskman --json`, value
//! and text. Screenshots go to target/web-screenshots.

mod common;

use common::{serve, test_python, Daemon, Scenario, Sleeper};
use gputaskman::units::bytes;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const TOTAL: u64 = 25_769_803_776;
const LLAMA_VRAM: u64 = 1_406_669_824;
const HOSTILE: &str = "<img src=x onerror=window.pwned=1>";

/// A Chromium of the test's own, quit when dropped.
struct Browser {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Browser {
    /// None, after a loud SKIPPED line, where Chromium, its driver or
    /// Selenium is missing; in CI (which installs them) that fails instead.
    fn start() -> Option<Browser> {
        let python = test_python()?;
        let found = |names: &[&str]| names.iter().map(Path::new).find(|p| p.exists()).map(Path::to_path_buf);
        let chromium = found(&["/usr/bin/chromium", "/usr/bin/chromium-browser"]);
        let driver = found(&["/usr/bin/chromedriver"]);
        let selenium = Command::new(&python)
            .args(["-c", "import selenium"])
            .status()
            .is_ok_and(|s| s.success());
        let (Some(chromium), Some(driver), true) = (chromium, driver, selenium) else {
            let why =
                "the web view's tests need chromium, chromium-driver (apt-get) and selenium (scripts/test-env.sh)";
            assert!(std::env::var_os("CI").is_none(), "{why}");
            eprintln!("SKIPPED: {why}");
            return None;
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/browser.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(chromium)
            .arg(driver)
            .env("SE_OFFLINE", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the browser driver");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Some(Browser { child, input, output })
    }

    fn send(&mut self, command: Value) -> Value {
        writeln!(self.input, "{command}").unwrap();
        self.input.flush().unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?} to {command}"));
        assert!(answer.get("error").is_none(), "{command}: {answer}");
        answer
    }

    fn open(&mut self, url: &str) {
        self.send(json!({"do": "open", "url": url}));
    }

    fn read(&mut self) -> Value {
        self.send(json!({"do": "read"}))
    }

    /// Reads the page until `ok` holds of it, for at most 20 s.
    fn wait_for(&mut self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let page = self.read();
            if ok(&page) {
                return page;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "{what}: {page:#}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn screenshot(&mut self, name: &str) {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../web-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        self.send(json!({"do": "screenshot", "path": path}));
        assert!(std::fs::metadata(&path).unwrap().len() > 1000);
    }

    /// The browser's console messages at the level SEVERE (script errors,
    /// CSP violations, failed loads).
    fn severe(&mut self) -> Vec<String> {
        let entries = self.send(json!({"do": "console"}))["entries"].clone();
        entries
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.input, "{}", json!({"do": "quit"}));
        let _ = self.input.flush();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn device(name: &str, index: u32, used: u64, procs: &[(u32, u64, u32)]) -> Value {
    json!({
        "name": name,
        "uuid": format!("GPU-{index}1111111-2222-3333-4444-555555555555"),
        "pci_bus_id": format!("00000000:0{}:00.0", index + 1),
        "memory": {"total": TOTAL, "used": used, "free": TOTAL - used, "reserved": 0},
        "utilization": {"gpu": 35 + index, "memory": 30},
        "temperature_c": 61 - index,
        "power_mw": 126000,
        "power_limit_mw": 450000,
        "compute_processes": procs.iter().map(|(pid, vram, _)| json!({"pid": pid, "used_memory": vram})).collect::<Vec<_>>(),
        "graphics_processes": [],
        "process_utilization": procs.iter().map(|(pid, _, sm)| json!({"pid": pid, "sm": sm, "mem": 3, "enc": 0, "dec": 0})).collect::<Vec<_>>(),
    })
}

fn scenario(devices: Vec<Value>) -> Value {
    json!({"driver_version": "580.159.03", "cuda_driver_version": 13000, "devices": devices})
}

fn url(server: &Daemon) -> String {
    format!("http://127.0.0.1:{}/", server.port)
}

fn row(page: &Value, pid: u32) -> Option<&Value> {
    host_row(page, None, pid)
}

/// The row of process `pid` of `host` (None: the page shows one machine).
fn host_row<'a>(page: &'a Value, host: Option<&str>, pid: u32) -> Option<&'a Value> {
    page["rows"]
        .as_array()?
        .iter()
        .find(|r| r["pid"] == pid && r["host"] == json!(host))
}

fn cell<'a>(page: &'a Value, pid: u32, key: &str) -> &'a Value {
    host_cell(page, None, pid, key)
}

fn host_cell<'a>(page: &'a Value, host: Option<&str>, pid: u32, key: &str) -> &'a Value {
    &host_row(page, host, pid).unwrap_or_else(|| panic!("no row {pid} of {host:?} in {page:#}"))["cells"][key]
}

fn model_file() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gguf/qwen3-0.6b-shape.gguf")
        .to_string_lossy()
        .into_owned()
}

/// The snapshot the page draws: the server's own `/snapshot`, read after
/// the page (a one-shot `--json` is another collection, whose model headers
/// may run out of their deadline on a loaded machine while the server's,
/// read once and cached, do not).
fn served_snapshot(server: &Daemon, token: Option<&str>) -> Value {
    let auth = token.map(|t| format!("Authorization: Bearer {t}"));
    let headers: Vec<&str> = auth.iter().map(String::as_str).collect();
    let (status, body) =
        common::prometheus::http_get_with(server.port, "/snapshot", &headers).expect("serve answers /snapshot");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Every GPU of `json`, and each of the test's own processes `pids`,
/// figure by figure, on the page. (Other tests' processes come and go
/// between the page's fetch and this one.)
fn assert_page_is(page: &Value, json: &Value, pids: &[u32]) {
    assert_host_is(page, None, json, pids)
}

/// As [`assert_page_is`], for the GPUs and rows of `host` of a fleet
/// (None: the page shows one machine).
fn assert_host_is(page: &Value, host: Option<&str>, json: &Value, pids: &[u32]) {
    let gpus: Vec<&Value> = page["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["host"] == json!(host))
        .collect();
    assert_eq!(
        gpus.len(),
        json["devices"].as_array().unwrap().len(),
        "{host:?}: {page:#}"
    );
    for d in json["devices"].as_array().unwrap() {
        let g = gpus.iter().find(|g| g["index"] == d["index"]).unwrap();
        assert_eq!(g["name"], d["name"]);
        assert_eq!(g["used"], d["memory_used_bytes"].to_string());
        assert_eq!(g["total"], d["memory_total_bytes"].to_string());
        let (used, total) = (d["memory_used_bytes"].as_u64(), d["memory_total_bytes"].as_u64());
        assert_eq!(g["mem"], format!("{} of {} used", bytes(used), bytes(total)));
        assert_eq!(g["stats"]["util"]["value"], d["gpu_util_percent"].to_string());
        assert_eq!(g["stats"]["temperature"]["text"], format!("{} °C", d["temperature_c"]));
    }
    for &pid in pids {
        let p = common::process(json, pid);
        assert_eq!(host_cell(page, host, pid, "name")["text"], p["name"]);
        assert_eq!(host_cell(page, host, pid, "user")["text"], p["user"]);
        let vram: Option<u64> = p["gpu"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g["vram_bytes"].as_u64())
            .reduce(|a, b| a + b);
        assert_eq!(host_cell(page, host, pid, "vram")["text"], bytes(vram), "{pid}");
        assert_eq!(
            host_cell(page, host, pid, "vram")["value"],
            vram.map(|v| v.to_string()).unwrap_or_default()
        );
        let runtimes: Vec<&str> = p["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(host_cell(page, host, pid, "runtime")["text"], runtimes.join(", "));
        if let Some(m) = p["models"].as_array().unwrap().first() {
            assert_eq!(host_cell(page, host, pid, "model")["text"], m["name"], "{pid}: {p:#}");
        }
    }
}

#[test]
fn the_page_shows_what_json_shows_and_follows_the_machine() {
    let Some(mut browser) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", &model_file(), "-c", "4096"]);
    let trainer = Sleeper::spawn(dir.path(), "python3", &["train.py"]);
    let machine = |llama_vram: u64| {
        scenario(vec![
            device(
                "NVIDIA GeForce RTX 4090",
                0,
                llama_vram + 3_221_225_472 + (1 << 30),
                &[(llama.pid(), llama_vram, 15), (trainer.pid(), 3_221_225_472, 20)],
            ),
            {
                // 60 °C against a 63 °C slowdown: hot.
                let mut hot = device("NVIDIA GeForce RTX 3090", 1, 1_034_725_632, &[]);
                hot["temperature_thresholds"] = json!({"slowdown": 63});
                hot
            },
        ])
    };
    let scenario = Scenario::new(&machine(LLAMA_VRAM));
    let server = serve(scenario.path(), &["--interval", "0.5"]);
    browser.open(&url(&server));
    let page = browser.wait_for("both processes and two samples", |p| {
        row(p, llama.pid()).is_some()
            && row(p, trainer.pid()).is_some()
            && p["gpus"]
                .as_array()
                .is_some_and(|g| g.iter().all(|g| g["samples"].as_u64() >= Some(2)))
    });
    assert_page_is(&page, &served_snapshot(&server, None), &[llama.pid(), trainer.pid()]);
    let health = |i: usize| page["gpus"][i]["health"].as_str().unwrap().to_string();
    assert!(health(1).contains("hot: 60 °C, slowdown at 63 °C"), "{}", health(1));
    assert!(!health(0).contains("hot"), "{}", health(0));
    // The memory bar: one segment per process, largest first, with a legend.
    let segments = page["gpus"][0]["segments"].as_array().unwrap();
    assert_eq!(segments[0]["pid"], trainer.pid().to_string());
    assert_eq!(segments[1]["pid"], llama.pid().to_string());
    let width: f64 = segments[0]["width"]
        .as_str()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(
        (width - 100.0 * 3_221_225_472.0 / TOTAL as f64).abs() < 0.001,
        "{width}"
    );
    let legend = page["gpus"][0]["legend"].to_string();
    assert!(
        legend.contains(&format!("llama-server ({}) 1.31 GiB", llama.pid())),
        "{legend}"
    );
    // Sorted by VRAM, largest first.
    assert_eq!(page["rows"][0]["pid"], trainer.pid());
    browser.screenshot("desktop");

    // The machine changes: the page follows within a few intervals.
    let grown = LLAMA_VRAM + (3 << 30);
    std::fs::write(scenario.path(), serde_json::to_vec(&machine(grown)).unwrap()).unwrap();
    let page = browser.wait_for("the new VRAM", |p| {
        row(p, llama.pid())
            .is_some_and(|r| r["cells"]["vram"]["value"].as_str().and_then(|v| v.parse().ok()) == Some(grown))
    });
    assert_eq!(cell(&page, llama.pid(), "vram")["text"], bytes(Some(grown)));
    assert_eq!(page["rows"][0]["pid"], llama.pid(), "re-sorted: {page:#}");

    // Sort by name, filter, and the selected process's detail.
    browser.send(json!({"do": "click", "selector": "th[data-key=name]"}));
    let page = browser.read();
    // Other tests' AI processes are on every page: the two compared.
    let rows = page["rows"].as_array().unwrap();
    let at = |pid: u32| rows.iter().position(|r| r["pid"] == pid).unwrap();
    assert!(
        at(llama.pid()) < at(trainer.pid()),
        "llama-server before python3: {page:#}"
    );
    browser.send(json!({"do": "type", "selector": "#filter", "text": "train.py"}));
    let page = browser.read();
    assert_eq!(page["rows"].as_array().unwrap().len(), 1);
    assert_eq!(page["rows"][0]["pid"], trainer.pid());
    browser.send(json!({"do": "type", "selector": "#filter", "text": "llama"}));
    browser.send(json!({"do": "click", "selector": &format!("tr[data-pid=\"{}\"]", llama.pid())}));
    let page = browser.read();
    let detail = page["detail"].as_str().expect("the detail pane is open");
    assert!(
        detail.contains("qwen3-0.6b-shape") && detail.contains("estimated") && detail.contains("reported"),
        "{detail}"
    );
    assert!(detail.contains(&bytes(Some(grown))), "{detail}");
    browser.screenshot("detail");

    // A phone's width: the columns people look for stay.
    browser.send(json!({"do": "size", "width": 390, "height": 844}));
    let page = browser.read();
    assert_eq!(cell(&page, llama.pid(), "vram")["text"], bytes(Some(grown)));
    browser.screenshot("phone");
    assert_eq!(browser.severe(), Vec::<String>::new());
}

#[test]
fn a_hostile_process_name_is_shown_as_text_and_runs_nothing() {
    let Some(mut browser) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hostile = Sleeper::spawn(
        dir.path(),
        HOSTILE,
        &[
            "<script>window.pwned=2</script>",
            "\"'><svg onload=window.pwned=3>",
            "\u{1b}]0;PWNED\u{7}\u{202e}gpj.exe\u{200b}",
        ],
    );
    let scenario = Scenario::new(&scenario(vec![device(
        "NVIDIA GeForce RTX 4090",
        0,
        2 << 30,
        &[(hostile.pid(), 1 << 30, 5)],
    )]));
    let server = serve(scenario.path(), &["--interval", "0.5"]);
    browser.open(&url(&server));
    let page = browser.wait_for("the hostile process", |p| row(p, hostile.pid()).is_some());
    let json = served_snapshot(&server, None);
    assert_page_is(&page, &json, &[hostile.pid()]);
    assert!(
        cell(&page, hostile.pid(), "name")["text"]
            .as_str()
            .unwrap()
            .contains("<img"),
        "{page:#}"
    );
    browser.send(json!({"do": "click", "selector": &format!("tr[data-pid=\"{}\"]", hostile.pid())}));
    let page = browser.read();
    let detail = page["detail"].as_str().unwrap();
    assert!(detail.contains("<script>window.pwned=2</script>"), "{detail}");
    // Controls and bidi overrides shown as the terminal views show them.
    let cmdline = common::process(&json, hostile.pid())["cmdline"].as_str().unwrap();
    assert!(cmdline.contains('\u{202e}'), "{cmdline:?}");
    let shown = gputaskman::view::safe_text::escape(cmdline);
    assert!(detail.contains(shown.as_ref()), "{detail:?} lacks {shown}");
    assert!(!detail.contains('\u{202e}') && !detail.contains('\u{1b}'));
    assert!(page["gpus"][0]["legend"].to_string().contains("<img"));
    assert_eq!(page["pwned"], Value::Null, "a script ran: {page:#}");
    assert_eq!(page["scripts"], json!(["page.js"]), "an element was injected: {page:#}");
    browser.screenshot("hostile");
    assert_eq!(browser.severe(), Vec::<String>::new());
}

#[test]
fn with_a_token_the_page_waits_for_it_and_keeps_it_from_scripts() {
    let Some(mut browser) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "web-view-token-0123456789abcdef\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", &model_file()]);
    let scenario = Scenario::new(&scenario(vec![device(
        "NVIDIA GeForce RTX 4090",
        0,
        2 << 30,
        &[(llama.pid(), LLAMA_VRAM, 5)],
    )]));
    let token_arg = token_file.to_string_lossy().into_owned();
    let server = serve(scenario.path(), &["--interval", "0.5", "--token-file", &token_arg]);
    browser.open(&url(&server));
    let page = browser.read();
    assert!(page["signin"].as_bool().unwrap(), "{page:#}");
    assert_eq!(
        page["rows"],
        json!([]),
        "nothing of the machine before the token: {page:#}"
    );
    browser.screenshot("sign-in");

    browser.send(json!({"do": "type", "selector": "#token", "text": "a-guess"}));
    browser.send(json!({"do": "click", "selector": "button[type=submit]"}));
    let page = browser.wait_for("the form again", |p| p["failed"].is_string());
    assert_eq!(page["rows"], json!([]));

    browser.send(json!({"do": "type", "selector": "#token", "text": "web-view-token-0123456789abcdef"}));
    browser.send(json!({"do": "click", "selector": "button[type=submit]"}));
    let page = browser.wait_for("the machine after the token", |p| row(p, llama.pid()).is_some());
    assert_page_is(
        &page,
        &served_snapshot(&server, Some("web-view-token-0123456789abcdef")),
        &[llama.pid()],
    );
    // The session is in a cookie scripts cannot read, and it is not the token.
    assert_eq!(page["cookie"], "");
    let cookies = browser.send(json!({"do": "cookies"}))["cookies"].clone();
    let session = cookies
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == format!("gputaskman_session_{}", server.port))
        .unwrap_or_else(|| panic!("{cookies:#}"));
    assert_eq!(session["httpOnly"], true);
    assert_eq!(session["sameSite"], "Strict");
    assert!(!session["value"].as_str().unwrap().contains("web-view-token"));
    // Only the refused first load and the wrong guess are logged.
    let unexpected: Vec<String> = browser.severe().into_iter().filter(|m| !m.contains("401")).collect();
    assert_eq!(unexpected, Vec::<String>::new());
}

#[test]
fn a_fleet_lists_its_hosts_each_expandable_with_the_figures_each_serves() {
    let Some(mut browser) = Browser::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let llama = Sleeper::spawn(dir.path(), "llama-server", &["-m", &model_file()]);
    let trainer = Sleeper::spawn(dir.path(), "python3", &["train.py"]);
    let first = Scenario::new(&scenario(vec![device(
        "NVIDIA H100 80GB HBM3",
        0,
        LLAMA_VRAM + (1 << 30),
        &[(llama.pid(), LLAMA_VRAM, 15)],
    )]));
    let second = Scenario::new(&scenario(vec![
        device("NVIDIA GeForce RTX 4090", 0, 1 << 30, &[]),
        device("NVIDIA GeForce RTX 4090", 1, 5 << 30, &[(trainer.pid(), 4 << 30, 20)]),
    ]));
    let a = serve(first.path(), &["--interval", "0.5"]);
    let b = serve(second.path(), &["--interval", "0.5"]);
    // A host that never answers.
    let nobody = common::free_port();
    let list = format!(
        "http://127.0.0.1:{},http://127.0.0.1:{},http://127.0.0.1:{nobody}",
        a.port, b.port
    );
    let port = common::free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gputaskman"));
    cmd.args(["--remote", &list, "serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--interval", "0.5"]);
    let fleet = Daemon::start(cmd, port, Duration::from_secs(30));
    let ready = |p: &Value| {
        p["hosts"].as_array().is_some_and(|h| h.len() == 3)
            && p["gpus"].as_array().is_some_and(|g| g.len() == 3)
            && p["rows"].as_array().is_some_and(|r| {
                r.iter().any(|r| r["pid"] == trainer.pid()) && r.iter().filter(|r| r["pid"] == llama.pid()).count() == 2
            })
    };
    browser.open(&url(&fleet));
    let page = browser.wait_for("three hosts, two of them with their GPUs and processes", ready);
    let served = served_snapshot(&fleet, None);
    let hosts = served["hosts"].as_array().unwrap();
    assert_eq!(page["hostColumn"], true);
    for (i, pids) in [(0, vec![llama.pid()]), (1, vec![llama.pid(), trainer.pid()])] {
        let name = hosts[i]["name"].as_str().unwrap();
        assert!(name.contains(&format!("127.0.0.1:{}", [a.port, b.port][i])), "{name}");
        let shown = &page["hosts"][i];
        assert_eq!(shown["name"], name);
        assert_eq!(
            (&shown["state"], &shown["status"], &shown["open"]),
            (&json!("ok"), &json!("ok"), &json!(true))
        );
        assert_host_is(&page, Some(name), &hosts[i]["snapshot"], &pids);
        for pid in pids {
            assert_eq!(host_cell(&page, Some(name), pid, "host")["text"], name);
        }
    }
    // Each host's GPUs are numbered from its own 0, the sum only of what
    // is measured.
    assert_eq!(
        page["hosts"][0]["figures"],
        "1 GPU · 2.31 GiB of 24.00 GiB used · 1 GPU process"
    );
    assert_eq!(
        page["hosts"][1]["figures"],
        "2 GPUs · 6.00 GiB of 48.00 GiB used · 1 GPU process"
    );
    let llama_on = |host: usize| host_cell(&page, hosts[host]["name"].as_str(), llama.pid(), "vram")["text"].clone();
    assert_eq!(
        (llama_on(0), llama_on(1)),
        (json!(bytes(Some(LLAMA_VRAM))), json!("n/a"))
    );
    let down = &page["hosts"][2];
    assert_eq!(down["state"], "down");
    assert!(down["status"].as_str().unwrap().starts_with("no answer: "), "{down}");
    assert_eq!(down["gpus"], 0);

    // A host closed stays closed through the refreshes.
    let first_name = hosts[0]["name"].as_str().unwrap();
    browser.send(json!({"do": "click", "selector": format!("details[data-host=\"{first_name}\"] > summary")}));
    std::thread::sleep(Duration::from_millis(1500));
    let page = browser.read();
    assert_eq!(page["hosts"][0]["open"], false, "{page:#}");
    assert_eq!(page["hosts"][0]["gpus"], 1, "a closed host keeps its GPUs, hidden");

    // A host that stops answering is shown stale, with its last figures.
    drop(b);
    let page = browser.wait_for("the stopped host, stale", |p| p["hosts"][1]["state"] == "stale");
    assert!(
        page["hosts"][1]["status"]
            .as_str()
            .unwrap()
            .starts_with("stale: last answer "),
        "{page:#}"
    );
    assert_eq!(page["hosts"][1]["gpus"], 2);
    // Its processes stay, marked: the last figures, not current ones.
    let stale_name = hosts[1]["name"].as_str().unwrap();
    assert_eq!(
        host_cell(&page, Some(stale_name), trainer.pid(), "host")["text"],
        format!("{stale_name} (stale)")
    );
    browser.screenshot("fleet");
    assert_eq!(browser.severe(), Vec::<String>::new());
}
