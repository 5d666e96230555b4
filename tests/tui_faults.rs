//! Driver faults in the live view (the real binary in tmux, the fake NVML):
//! a call that hangs for 10 s while the view runs. The screen keeps
//! refreshing, shows the device's last values marked STALE, and drops the
//! mark once the driver answers again. Without tmux it says SKIPPED.

mod common;

use common::tmux::{tmux_path, Tmux};
use common::{fake_nvml, Scenario};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn scenario(hang: Value) -> Value {
    json!({
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "devices": [{
            "name": "NVIDIA GeForce RTX 4080 SUPER",
            "memory": {"total": 17171480576u64, "used": 5379194880u64, "free": 11792285696u64},
            "utilization": {"gpu": 15, "memory": 30},
            "temperature_c": 37,
            "hang_ms": hang
        }]
    })
}

#[test]
fn a_hung_driver_call_leaves_the_view_refreshing_with_the_device_marked_stale() {
    let Some(tmux) = tmux_path() else { return };
    let sc = Scenario::new(&scenario(json!({})));
    let t = Tmux::new(tmux, "stale");
    t.start(&format!(
        "env FAKE_NVML_SCENARIO={} GPUTASKMAN_NVML_LIB={} NO_COLOR=1 {} --interval 0.5; echo EXITED $?; sleep 600",
        sc.path().display(),
        fake_nvml().display(),
        env!("CARGO_BIN_EXE_gputaskman"),
    ));
    t.wait_for("the first figures", Duration::from_secs(20), |s| {
        s.contains("5.01 GiB used of 15.99 GiB")
    });
    // The driver starts hanging 10 s in a call made every sample (the fake
    // re-reads its scenario when the file changes).
    std::fs::write(
        sc.path(),
        serde_json::to_vec(&scenario(json!({"nvmlDeviceGetTemperature": 10000}))).unwrap(),
    )
    .unwrap();
    let hung = Instant::now();
    // While the sample waits on the driver, keys still work.
    std::thread::sleep(Duration::from_millis(1200));
    t.keys(&["a"]);
    let keyed = t.wait_for("a key during the hang", Duration::from_secs(10), |s| {
        s.contains("a all")
    });
    let key_at = hung.elapsed();
    let screen = t.wait_for("STALE", Duration::from_secs(10), |s| s.contains("STALE"));
    let marked = hung.elapsed();
    // The last values stay, marked; the title's sample time keeps moving.
    assert!(screen.contains("5.01 GiB used of 15.99 GiB"), "{screen}");
    let stamp = |s: &str| s.lines().next().unwrap_or("").to_string();
    let mut stamps = vec![stamp(&screen)];
    for _ in 0..4 {
        let last = stamps.last().unwrap().clone();
        let s = t.wait_for("a refresh while the call hangs", Duration::from_secs(3), |s| {
            stamp(s) != last
        });
        assert!(s.contains("STALE"), "{s}");
        assert!(!s.contains("EXITED"), "{s}");
        stamps.push(stamp(&s));
    }
    eprintln!(
        "key answered {} ms and STALE shown {} ms after the driver hung; refreshing meanwhile: {stamps:?}",
        key_at.as_millis(),
        marked.as_millis()
    );
    // The key was answered before the sample gave up on the driver.
    assert!(!keyed.contains("STALE"), "{keyed}");
    assert!(marked < Duration::from_secs(6), "{marked:?}");
    // The driver answers again: the mark goes.
    std::fs::write(sc.path(), serde_json::to_vec(&scenario(json!({}))).unwrap()).unwrap();
    t.wait_for("STALE to go", Duration::from_secs(25), |s| {
        !s.contains("STALE") && s.contains("5.01 GiB used")
    });
    t.keys(&["q"]);
    let s = t.wait_for("the view to quit", Duration::from_secs(10), |s| s.contains("EXITED"));
    assert!(s.contains("EXITED 0"), "{s}");
}
