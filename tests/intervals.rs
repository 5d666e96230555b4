//! Every flag that takes seconds (`--interval` of the live view, `record`
//! and `serve`, `--duration` of `record`) refuses what no clock can wait:
//! the real binary exits with clap's usage status, 2, and one error line,
//! never a panic (1e19 s overflowed `Duration::from_secs_f64`).

use assert_cmd::Command;

/// Runs the binary with `args`; returns its stderr after checking that it
/// exited 2 with exactly one error line naming `flag`.
fn refused(args: &[&str], flag: &str) -> String {
    let out = Command::cargo_bin("gputaskman").unwrap().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
    assert!(errors[0].contains(flag), "{args:?}: {stderr}");
    assert!(
        errors[0].contains("seconds, more than 0 and at most 86400"),
        "{args:?}: {stderr}"
    );
    stderr
}

const BAD: [&str; 9] = ["1e20", "1e19", "86401", "NaN", "inf", "-inf", "0", "-1", "soon"];

#[test]
fn serve_refuses_an_interval_no_clock_can_wait() {
    for bad in BAD {
        refused(&["serve", &format!("--interval={bad}")], "--interval");
    }
}

#[test]
fn record_refuses_an_interval_or_duration_no_clock_can_wait() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let out = out.to_str().unwrap();
    for bad in BAD {
        refused(&["record", "-o", out, &format!("--interval={bad}")], "--interval");
        refused(&["record", "-o", out, &format!("--duration={bad}")], "--duration");
    }
    assert!(!dir.path().join("r.jsonl").exists(), "a refused record wrote nothing");
}

#[test]
fn the_global_interval_is_bounded_too() {
    for bad in BAD {
        refused(&[&format!("--interval={bad}"), "--once"], "--interval");
        refused(
            &[&format!("--interval={bad}"), "record", "-o", "/nonexistent/x"],
            "--interval",
        );
    }
}
