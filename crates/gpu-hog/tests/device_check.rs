//! scripts/device-check.sh as far as a machine without an NVIDIA GPU lets
//! it go: the preflight, the holders failing with libcuda's own reason, the
//! report it still writes, and the deadline. `nvidia-smi` is a script
//! printing canned lines; `gputaskman` in BIN_DIR is a script that only
//! answers `--version` and `--list-gpus`, all these paths ask of it (the
//! comparison itself is tested with the real binary's output in
//! gpu_check.rs).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/device-check.sh")
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// BIN_DIR with the real gpu-hog and gpu-check, and a PATH folder whose
/// nvidia-smi prints `smi` (after sleeping `hang` seconds).
struct Kit {
    dir: tempfile::TempDir,
}

impl Kit {
    fn new(hang: u32) -> Kit {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let path = dir.path().join("path");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&path).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gpu-hog"), bin.join("gpu-hog")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gpu-check"), bin.join("gpu-check")).unwrap();
        executable(
            &bin.join("gputaskman"),
            "#!/bin/sh\ncase \"$1\" in --version) echo 'gputaskman 0.1.0';; --list-gpus) echo '0: NVIDIA H200';; *) exit 9;; esac\n",
        );
        executable(
            &path.join("nvidia-smi"),
            &format!(
                "#!/bin/sh\nsleep {hang}\necho 'GPU 0: NVIDIA H200 (UUID: GPU-4e3f2a1b-0c9d-8e7f-6a5b-4c3d2e1f0a9b)'\n"
            ),
        );
        Kit { dir }
    }

    fn run(&self, envs: &[(&str, &str)]) -> (Output, String, Duration) {
        let out_dir = self.dir.path().join("out");
        let path = format!("{}:/usr/bin:/bin", self.dir.path().join("path").display());
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(script())
            .arg(self.dir.path().join("bin"))
            .arg(&out_dir)
            .env("PATH", path)
            .env_remove("DEVICE_CHECK_INNER")
            .envs(envs.iter().copied())
            .output()
            .expect("run device-check.sh");
        let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap_or_default();
        (out, report, started.elapsed())
    }
}

#[test]
fn without_a_cuda_driver_the_holders_say_why_and_the_report_says_failed() {
    let kit = Kit::new(0);
    let (out, report, took) = kit.run(&[]);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("NVIDIA H200 (UUID: GPU-4e3f2a1b"),
        "the machine section: {report}"
    );
    assert!(report.contains("gputaskman 0.1.0"), "{report}");
    // The holder's own words reach the report: libcuda is missing here (or,
    // where a driver library exists without a GPU, the call that failed).
    let line = report
        .lines()
        .find(|l| l.starts_with("- FAIL: gpu-hog 2GiB could not hold memory: gpu-hog: "))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.contains("libcuda.so.1") || line.contains("failed: CUDA_ERROR"),
        "{line}"
    );
    assert!(report.contains("Stopped: without both holders there is nothing to compare."));
    assert!(
        report
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("RESULT: FAILED ("),
        "{report}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn a_missing_binary_or_nvidia_smi_is_a_kit_that_cannot_run() {
    let kit = Kit::new(0);
    std::fs::remove_file(kit.dir.path().join("bin/gpu-check")).unwrap();
    let (out, report, _) = kit.run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        report.contains("gpu-check is missing (build with: cargo build --release -p gputaskman -p gpu-hog)"),
        "{report}"
    );

    let kit = Kit::new(0);
    std::fs::remove_file(kit.dir.path().join("path/nvidia-smi")).unwrap();
    if Path::new("/usr/bin/nvidia-smi").exists() || Path::new("/bin/nvidia-smi").exists() {
        return; // a machine with the driver: the real one is on PATH
    }
    let (out, report, _) = kit.run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(report.contains("nvidia-smi is not on PATH"), "{report}");

    let out = Command::new("bash").arg(script()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: "));
}

#[test]
fn a_hanging_driver_ends_at_the_deadline_with_a_report_that_says_so() {
    let kit = Kit::new(60);
    let (out, report, took) = kit.run(&[("DEVICE_CHECK_LIMIT_SECS", "3")]);
    assert_eq!(out.status.code(), Some(124), "{report}");
    assert!(
        report.contains("RESULT: FAILED (stopped after ") && report.contains("ran past its 3 s limit"),
        "{report}"
    );
    assert!(took < Duration::from_secs(15), "{took:?}");
}
