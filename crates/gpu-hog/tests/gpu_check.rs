//! gpu-check on canned nvidia-smi output (tests/data/device-check/), and
//! gpu-hog as far as a machine without libcuda lets it go.

use std::path::PathBuf;
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/device-check")
        .join(name)
}

const HOLDERS: [&str; 2] = ["4190101:2GiB", "4190102:5GiB"];

fn check(gpus: &str, apps: &str, holders: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-check"));
    cmd.arg("--snapshot")
        .arg(data("snapshot.json"))
        .arg("--smi-gpus")
        .arg(data(gpus))
        .arg("--smi-apps")
        .arg(data(apps));
    for h in holders {
        cmd.args(["--holder", h]);
    }
    let out = cmd.output().expect("run gpu-check");
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// The report's line for `what`.
fn line<'a>(report: &'a str, what: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no {what:?} in {report}"))
}

#[test]
fn a_run_where_both_agree_passes_with_its_figures() {
    let (code, report) = check("smi-gpus.csv", "smi-apps.csv", &HOLDERS);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        report,
        "PASS  GPUs: nvidia-smi lists 1, gputaskman 1\n\
         PASS  GPU 0 memory total: gputaskman 143771.0 MiB, nvidia-smi 143771 MiB\n\
         PASS  GPU 0 memory used: gputaskman 8754.0 MiB, nvidia-smi 8754 MiB\n\
         PASS  holder 4190101 (2048.0 MiB): gputaskman 2560.0 MiB, nvidia-smi 2560 MiB; context overhead 512.0 MiB\n\
         PASS  holder 4190102 (5120.0 MiB): gputaskman 5632.0 MiB, nvidia-smi 5632 MiB; context overhead 512.0 MiB\n\
         PASSED: 5 checks, 0 failed\n"
    );
}

#[test]
fn each_mismatch_is_a_failure_that_names_it() {
    for (gpus, apps, holders, failing, expected) in [
        (
            "smi-gpus-total-off.csv",
            "smi-apps.csv",
            &HOLDERS[..],
            "GPU 0 memory total",
            "nvidia-smi 143773 MiB",
        ),
        (
            "smi-gpus-used-off.csv",
            "smi-apps.csv",
            &HOLDERS[..],
            "GPU 0 memory used",
            "nvidia-smi 8900 MiB",
        ),
        (
            "smi-gpus-extra.csv",
            "smi-apps.csv",
            &HOLDERS[..],
            "GPU 1",
            "gputaskman does not",
        ),
        (
            "smi-gpus.csv",
            "smi-apps-missing.csv",
            &HOLDERS[..],
            "holder 4190102",
            "nvidia-smi not listed",
        ),
        (
            "smi-gpus.csv",
            "smi-apps-size-off.csv",
            &HOLDERS[..],
            "holder 4190102",
            "nvidia-smi 5700 MiB",
        ),
        (
            "smi-gpus.csv",
            "smi-apps-na.csv",
            &HOLDERS[..],
            "holder 4190101",
            "nvidia-smi [N/A]",
        ),
        // What gputaskman and nvidia-smi agree on is 1.5 GiB over a 4 GiB
        // allocation: no context is that big.
        (
            "smi-gpus.csv",
            "smi-apps.csv",
            &["4190101:2GiB", "4190102:4GiB"][..],
            "holder 4190102",
            "overhead 1536.0 MiB",
        ),
        // Less than was allocated.
        (
            "smi-gpus.csv",
            "smi-apps.csv",
            &["4190101:2GiB", "4190102:6GiB"][..],
            "holder 4190102",
            "negative",
        ),
        // A holder neither lists.
        (
            "smi-gpus.csv",
            "smi-apps.csv",
            &["4190103:1GiB"][..],
            "holder 4190103",
            "lists no VRAM for it",
        ),
    ] {
        let (code, report) = check(gpus, apps, holders);
        assert_eq!(code, Some(1), "{gpus} {apps} {holders:?}: {report}");
        let found = line(&report, failing);
        assert!(found.starts_with("FAIL  "), "{found}\n{report}");
        assert!(found.contains(expected), "{found}\n{report}");
        let failed: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL  ")).collect();
        assert!(
            failed.iter().all(|l| l.contains(failing) || l.contains("GPUs:")),
            "only what was broken fails: {report}"
        );
        assert!(
            report.contains(&format!(
                "FAILED: {} checks, {} failed\n",
                report.lines().count() - 1,
                failed.len()
            )),
            "{report}"
        );
    }
}

#[test]
fn unreadable_inputs_are_an_error_not_a_verdict() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-check"))
        .arg("--snapshot")
        .arg(data("smi-gpus.csv"))
        .arg("--smi-gpus")
        .arg(data("smi-gpus.csv"))
        .arg("--smi-apps")
        .arg(data("missing.csv"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
}

fn hog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-hog"))
        .args(args)
        .output()
        .expect("run gpu-hog")
}

#[test]
fn gpu_hog_says_clearly_when_there_is_no_cuda_driver() {
    let out = hog(&["2GiB", "--lib", "/nonexistent/libcuda.so.1"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("gpu-hog: cannot load /nonexistent/libcuda.so.1 (")
            && err.contains("no NVIDIA driver with the CUDA driver API here"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no 'holds' line: scripts wait for it");

    // A library that loads but is not the driver's.
    let out = hog(&["2GiB", "--lib", "libc.so.6"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libc.so.6 has no cuInit"), "{err}");

    let out = hog(&["2GB"]);
    assert_eq!(out.status.code(), Some(2), "a size in decimal units is a usage error");
}
