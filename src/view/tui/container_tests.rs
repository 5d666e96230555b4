//! The CONTAINER column: there when a process runs in a container, gone
//! when none does.

use super::app::App;
use super::fixture::desktop;
use super::render;
use crate::snapshot::{Container, Snapshot};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn screen(s: Snapshot, w: u16) -> String {
    let mut app = App::new(false, false);
    app.show(s);
    let mut t = Terminal::new(TestBackend::new(w, 40)).unwrap();
    t.draw(|f| render::draw(f, &mut app)).unwrap();
    let buf = t.backend().buffer();
    (0..40)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
                + "\n"
        })
        .collect()
}

fn row<'a>(screen: &'a str, pid: &str) -> &'a str {
    screen.lines().find(|l| l.trim_start().starts_with(pid)).unwrap()
}

#[test]
fn the_container_column_names_the_container_and_hides_without_one() {
    let plain = screen(desktop(), 180);
    assert!(!plain.contains("CONTAINER"), "{plain}");
    let mut s = desktop();
    let pods = [
        Container {
            runtime: "docker".into(),
            id: "3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f".into(),
            name: Some("vllm-web".into()),
            pod: None,
            namespace: None,
        },
        Container {
            runtime: "containerd".into(),
            id: "8e1ac3a6f1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c".into(),
            name: Some("trainer".into()),
            pod: Some("llm-train-0".into()),
            namespace: Some("ml".into()),
        },
        Container {
            runtime: "docker".into(),
            id: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into(),
            name: None,
            pod: None,
            namespace: None,
        },
    ];
    let pids: Vec<u32> = s.processes.iter().take(3).map(|p| p.pid).collect();
    for (p, c) in s.processes.iter_mut().zip(pods) {
        p.container = Some(c);
    }
    for w in [180, 120] {
        let shown = screen(s.clone(), w);
        assert!(shown.contains("CONTAINER"), "{shown}");
        assert!(row(&shown, &pids[0].to_string()).contains(" vllm-web "), "{shown}");
        assert!(
            row(&shown, &pids[1].to_string()).contains(" ml/llm-train-0 "),
            "{shown}"
        );
        // No name: the id's first 12 digits, as `docker ps`.
        assert!(row(&shown, &pids[2].to_string()).contains(" 0123456789ab "), "{shown}");
    }
    // The selected process's detail says runtime and full id.
    let shown = screen(s, 180);
    assert!(
        shown.contains("docker container vllm-web (3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f)"),
        "{shown}"
    );
}

#[test]
fn a_gpu_allocated_to_a_pod_names_it_under_its_readings() {
    let mut s = desktop();
    s.devices[0].pods = Some(vec![crate::snapshot::PodAllocation {
        namespace: "ml".into(),
        pod: "train-0\u{1b}[2J".into(),
        container: "app".into(),
        resource: "nvidia.com/gpu".into(),
        device_id: "GPU-0".into(),
        in_use: Some(false),
    }]);
    let shown = screen(s, 160);
    assert!(
        shown.contains("  pod ml/train-0\\e[2J (app): allocated and idle"),
        "{shown}"
    );
    assert!(!screen(desktop(), 160).contains("pod "));
}
