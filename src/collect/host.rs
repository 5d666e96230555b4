//! The machine the snapshot was taken on. What Linux keeps in /proc and
//! /etc is read on Linux only: a Windows build run under Wine would find the
//! Linux host's files through Wine's Z: drive, and report them as its own.

use crate::snapshot::Host;

pub fn read() -> Host {
    Host {
        hostname: hostname(),
        os: std::env::consts::OS.to_string(),
        os_name: os_name(),
        wsl: is_wsl(),
        container: in_container(),
        kernel: kernel(),
    }
}

/// Running inside WSL (GPUTASKMAN_WSL=1/0 forces the answer, for tests).
#[cfg(target_os = "linux")]
pub fn is_wsl() -> bool {
    super::wsl::forced().unwrap_or_else(|| {
        read_trimmed("/proc/sys/kernel/osrelease").is_some_and(|k| is_wsl_kernel(&k))
            || std::path::Path::new("/proc/sys/fs/binfmt_misc/WSLInterop").exists()
    })
}

/// WSL runs Linux: elsewhere there is no WSL guest to be.
#[cfg(not(target_os = "linux"))]
pub fn is_wsl() -> bool {
    false
}

#[cfg(target_os = "linux")]
fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(target_os = "linux")]
fn kernel() -> Option<String> {
    read_trimmed("/proc/sys/kernel/osrelease")
}

/// The NT version, "10.0.19045": RtlGetVersion, which unlike GetVersionEx
/// is not capped at 6.2 for programs without a compatibility manifest
/// (Microsoft Learn: RtlGetVersion function (wdm.h); GetVersionExW).
#[cfg(windows)]
fn kernel() -> Option<String> {
    use windows::Win32::System::SystemInformation::OSVERSIONINFOW;
    let mut info = OSVERSIONINFOW {
        dwOSVersionInfoSize: std::mem::size_of::<OSVERSIONINFOW>() as u32,
        ..Default::default()
    };
    // SAFETY: info is an OSVERSIONINFOW whose size field says so.
    let status = unsafe { windows::Wdk::System::SystemServices::RtlGetVersion(&mut info) };
    status
        .is_ok()
        .then(|| format!("{}.{}.{}", info.dwMajorVersion, info.dwMinorVersion, info.dwBuildNumber))
}

/// macOS has no /proc; its version is not read yet.
#[cfg(not(any(target_os = "linux", windows)))]
fn kernel() -> Option<String> {
    None
}

#[cfg(windows)]
fn hostname() -> Option<String> {
    std::env::var("COMPUTERNAME").ok()
}

#[cfg(not(windows))]
fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned()).filter(|s| !s.is_empty())
}

/// PRETTY_NAME from os-release (freedesktop os-release(5)).
#[cfg(target_os = "linux")]
fn os_name() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
}

/// No os-release outside Linux: the host line names the OS and its version.
#[cfg(not(target_os = "linux"))]
fn os_name() -> Option<String> {
    None
}

/// WSL kernels say so in their release string ("5.15.167.4-microsoft-standard-WSL2").
#[cfg(any(test, target_os = "linux"))]
fn is_wsl_kernel(release: &str) -> bool {
    let r = release.to_ascii_lowercase();
    r.contains("microsoft") || r.contains("wsl")
}

/// Docker, Podman and Kubernetes leave marks a process inside can see:
/// Kubernetes' and the `container` variable wherever it runs, the files
/// on Linux.
fn in_container() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        || std::env::var_os("container").is_some()
        || in_linux_container()
}

#[cfg(target_os = "linux")]
fn in_linux_container() -> bool {
    if ["/.dockerenv", "/run/.containerenv"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
    {
        return true;
    }
    std::fs::read_to_string("/proc/1/cgroup")
        .map(|c| {
            ["docker", "kubepods", "containerd", "libpod", "lxc"]
                .iter()
                .any(|k| c.contains(k))
        })
        .unwrap_or(false)
}

#[cfg(not(target_os = "linux"))]
fn in_linux_container() -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn wsl_kernels_are_recognised() {
        assert!(super::is_wsl_kernel("5.15.167.4-microsoft-standard-WSL2"));
        assert!(super::is_wsl_kernel("4.4.0-19041-Microsoft"));
        assert!(!super::is_wsl_kernel("6.1.0-28-amd64"));
    }
}
