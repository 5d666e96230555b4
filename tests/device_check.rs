//! scripts/device-check.sh end to end on this machine, which has no GPU:
//! the real gputaskman (on crates/fake-nvml), the real gpu-check, tmux and
//! `record`, with two stand-ins for what needs a GPU: `gpu-hog` is a shell
//! script that prints the real one's line and writes itself into the fake
//! driver's scenario (a 512 MiB context alone, or 2 GiB or 5 GiB plus one),
//! and `nvidia-smi` is a shell script that answers the queries from the
//! same figures. The real gpu-hog's own tests are in crates/gpu-hog.

mod common;

use common::{fake_nvml, gpu_hog_kit};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The scenario of an H200 with the holders listed in $STATE/hogs
/// ("PID MIB" lines); the driver itself holds 542 MiB.
const WRITE_SCENARIO: &str = r#"
used=542
procs=""
sep=""
while read -r pid mib; do
    used=$((used + mib))
    procs="$procs$sep{\"pid\": $pid, \"used_memory\": $((mib * 1048576))}"
    sep=", "
done < "$STATE/hogs"
total=150754820096
cat > "$STATE/scenario.tmp" <<JSON
{"driver_version": "570.133.20", "cuda_driver_version": 12080,
 "devices": [{"name": "NVIDIA H200", "uuid": "GPU-4e3f2a1b-0c9d-8e7f-6a5b-4c3d2e1f0a9b", "pci_bus_id": "00000000:18:00.0",
   "memory": {"total": $total, "used": $((used * 1048576)), "free": $((total - used * 1048576))},
   "compute_processes": [$procs], "graphics_processes": []}]}
JSON
mv "$STATE/scenario.tmp" "$STATE/scenario.json"
"#;

struct Kit {
    dir: tempfile::TempDir,
}

impl Kit {
    /// `skew_mib`: what the fake nvidia-smi adds to each process's size.
    fn new(skew_mib: u32) -> Kit {
        let dir = tempfile::tempdir().unwrap();
        let (bin, path, state) = (
            dir.path().join("bin"),
            dir.path().join("path"),
            dir.path().join("state"),
        );
        for d in [&bin, &path, &state] {
            std::fs::create_dir_all(d).unwrap();
        }
        let kit = gpu_hog_kit();
        std::os::unix::fs::symlink(kit.join("gpu-check"), bin.join("gpu-check")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gputaskman"), bin.join("gputaskman")).unwrap();
        std::fs::write(state.join("hogs"), "").unwrap();
        let write = state.join("write-scenario");
        executable(&write, &format!("#!/bin/sh\n{WRITE_SCENARIO}"));
        executable(
            &bin.join("gpu-hog"),
            &format!(
                "#!/bin/sh\ncase \"$1\" in 2GiB) mib=2048;; 5GiB) mib=5120;; --context-only) mib=0;; *) exit 2;; esac\n\
                 echo \"$$ $((mib + 512))\" >> \"$STATE/hogs\"\n{}\n\
                 echo \"gpu-hog: pid $$ holds $((mib * 1048576)) bytes on CUDA device 0\"\n\
                 trap 'exit 0' TERM INT\nwhile :; do sleep 1 & wait $!; done\n",
                write.display()
            ),
        );
        executable(
            &path.join("nvidia-smi"),
            &format!(
                "#!/bin/sh\nused=542\nwhile read -r pid mib; do used=$((used + mib)); done < \"$STATE/hogs\"\n\
                 case \"$*\" in\n\
                 *--query-gpu=index,memory.total,memory.used*) echo \"0, 143771, $used\";;\n\
                 *--query-compute-apps=pid,used_memory*) while read -r pid mib; do echo \"$pid, $((mib + {skew_mib}))\"; done < \"$STATE/hogs\";;\n\
                 *--query-compute-apps=pid,gpu_bus_id,used_memory*) while read -r pid mib; do echo \"$pid, 00000000:18:00.0, $mib\"; done < \"$STATE/hogs\";;\n\
                 *--query-gpu=index,pci.bus_id,name,driver_version*) echo '0, 00000000:18:00.0, NVIDIA H200, 570.133.20';;\n\
                 *--query-gpu=index\\ --format*) echo 0;;\n\
                 *-L*) echo 'GPU 0: NVIDIA H200 (UUID: GPU-4e3f2a1b-0c9d-8e7f-6a5b-4c3d2e1f0a9b)';;\n\
                 *) echo 'NVIDIA-SMI (a stand-in)';;\nesac\n"
            ),
        );
        let status = Command::new(&write).env("STATE", &state).status().unwrap();
        assert!(status.success());
        Kit { dir }
    }

    fn run(&self) -> (Output, PathBuf, String, Duration) {
        let out_dir = self.dir.path().join("out");
        let state = self.dir.path().join("state");
        let path = format!(
            "{}:{}",
            self.dir.path().join("path").display(),
            std::env::var("PATH").unwrap()
        );
        let started = Instant::now();
        let out = Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/device-check.sh"))
            .arg(self.dir.path().join("bin"))
            .arg(&out_dir)
            .env("PATH", path)
            .env("STATE", &state)
            .env("FAKE_NVML_SCENARIO", state.join("scenario.json"))
            .env("GPUTASKMAN_NVML_LIB", fake_nvml())
            .env("DEVICE_CHECK_VIEW_SECS", "6")
            .env("NO_COLOR", "1")
            .env_remove("DEVICE_CHECK_INNER")
            .output()
            .expect("run device-check.sh");
        let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap_or_default();
        (out, out_dir, report, started.elapsed())
    }
}

/// The PIDs of the holders the stand-in wrote down.
fn holders(kit: &Kit) -> Vec<u32> {
    std::fs::read_to_string(kit.dir.path().join("state/hogs"))
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_run_that_agrees_passes_and_leaves_report_recording_and_screens() {
    if common::tmux::tmux_path().is_none() {
        return;
    }
    let kit = Kit::new(0);
    let (out, dir, report, took) = kit.run();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The context alone first, then the two holders.
    let pids = holders(&kit);
    assert_eq!(pids.len(), 3);
    let contexts = std::fs::read_to_string(dir.join("driver-context.csv")).unwrap();
    assert_eq!(
        contexts,
        format!(
            "gpu_index,name,pci_bus_id,driver_version,pid,context_mib\n0,NVIDIA H200,00000000:18:00.0,570.133.20,{},512\n",
            pids[0]
        )
    );
    assert!(
        report.contains("- PASS: a context measured on each of 1 GPUs"),
        "{report}"
    );
    assert!(report.contains(&contexts), "{report}");
    let compare = std::fs::read_to_string(dir.join("compare.txt")).unwrap();
    assert!(compare.ends_with("PASSED: 6 checks, 0 failed\n"), "{compare}");
    assert!(
        compare.contains(&format!(
            "PASS  holder {} (a context, nothing allocated): gputaskman 512.0 MiB, nvidia-smi 512 MiB",
            pids[0]
        )),
        "{compare}"
    );
    assert!(
        compare.contains(&format!(
            "PASS  holder {} (5120.0 MiB): gputaskman 5632.0 MiB, nvidia-smi 5632 MiB",
            pids[2]
        )),
        "{compare}"
    );
    assert!(report.contains(&compare), "the comparison is in the report");
    for pid in &pids {
        assert!(
            report.contains(&format!("- PASS: holder {pid} is on the live view's screen")),
            "{report}"
        );
        assert!(
            report.contains(&format!("- PASS: holder {pid} freed its memory and exited 0")),
            "{report}"
        );
    }
    let screen = std::fs::read_to_string(dir.join("live-view-last.txt")).unwrap();
    assert!(
        screen.contains("NVIDIA H200") && screen.contains("9.03 GiB used of 140.40 GiB"),
        "{screen}"
    );
    let recording = std::fs::read_to_string(dir.join("recording.jsonl")).unwrap();
    assert!(recording.lines().count() >= 3, "{recording}");
    assert!(recording.lines().all(|l| l.contains("\"NVIDIA H200\"")));
    assert!(std::fs::read_to_string(dir.join("summary.txt"))
        .unwrap()
        .contains("NVIDIA H200"));
    assert!(
        report.trim_end().ends_with(" s)") && report.contains("RESULT: PASSED ("),
        "{report}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
    // Both holders are gone.
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "holder {pid} outlived the check"
        );
    }
}

#[test]
fn a_size_nvidia_smi_disagrees_with_fails_the_run() {
    if common::tmux::tmux_path().is_none() {
        return;
    }
    let kit = Kit::new(40);
    let (out, dir, report, _) = kit.run();
    assert_eq!(out.status.code(), Some(1), "{report}");
    let compare = std::fs::read_to_string(dir.join("compare.txt")).unwrap();
    assert_eq!(
        compare.lines().filter(|l| l.starts_with("FAIL  holder")).count(),
        3,
        "{compare}"
    );
    assert!(report.contains("RESULT: FAILED ("), "{report}");
}
