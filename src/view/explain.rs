//! "What can be known about GPU memory?": the layers of knowledge, where each
//! comes from on this platform, what kind of number it is and what it is
//! good for. One source of truth: `gputaskman explain` prints [`text`], and
//! the live view's `?` overlay shows the same lines.

/// One layer of what can be known, from the device down to single
/// allocations.
#[derive(Debug, Clone, Copy)]
pub struct Layer {
    /// The source whose devices it is about, where it is about one
    /// source's only: the live view shows it where that source has a
    /// device (`gputaskman explain` always).
    pub only_with: Option<&'static str>,
    pub what: &'static str,
    /// Measured, reported, estimated or inferred (shared/DESIGN.md rule 1).
    pub kind: &'static str,
    /// Where it comes from on this platform.
    pub source: &'static str,
    pub good_for: &'static str,
    /// Where it stops being true.
    pub limits: &'static str,
}

/// The platform the layers below describe.
#[cfg(target_os = "linux")]
pub const PLATFORM: &str = "Linux (and WSL)";
#[cfg(target_os = "windows")]
pub const PLATFORM: &str = "Windows";
#[cfg(target_os = "macos")]
pub const PLATFORM: &str = "macOS";
#[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "macos")))]
pub const PLATFORM: &str = std::env::consts::OS;

#[cfg(target_os = "linux")]
const PLATFORM_LAYERS: [Layer; 6] = [
    Layer {
        only_with: None,
        what: "Device totals: used, total, free; GPU and memory activity, temperature, power",
        kind: "measured",
        source: "NVML (NVIDIA driver); DRM sysfs mem_info_vram_used/total (AMD); \
                 DRM fdinfo summed over processes (Intel)",
        good_for: "how full the card is: the reference every other figure is checked against",
        limits: "\"used\" includes the driver's own reservations and every process, also those \
                 in other containers; a MIG instance (0/1) has its own memory figures but no \
                 activity, temperature or power of its own (NVML gives those per GPU)",
    },
    Layer {
        only_with: None,
        what: "Per-process VRAM",
        kind: "measured",
        source: "NVML process lists (compute and graphics contexts; in MIG mode those of each \
                 MIG device); DRM fdinfo drm-memory-vram / drm-resident-vram per open GPU file \
                 (AMD, Intel)",
        good_for: "who holds the card",
        limits: "a PID from another PID namespace has no name here; under WSL the figures come \
                 from the Windows host's counters (the bridge), whose vmwp.exe contexts are \
                 paired with Linux processes: * for a process seen starting, ? otherwise, n/a \
                 with --no-host",
    },
    Layer {
        only_with: None,
        what: "Spill: GPU-accessible system RAM; paged-out memory",
        kind: "measured",
        source: "DRM fdinfo drm-memory-gtt (AMD); under WSL the Windows host's \
                 GPU Process Memory Non Local Usage; NVML has no per-process figure",
        good_for: "seeing working sets that live in system RAM and cross PCIe",
        limits: "spill is memory the GPU can reach, not proof that VRAM overflowed",
    },
    Layer {
        only_with: Some("jetson"),
        what: "Jetson (Nano, Xavier, Orin): the integrated GPU and its unified memory",
        kind: "measured (free and spill: unavailable)",
        source: "Tegra sysfs: the GPU's devfreq node (cur_freq, max_freq) and its load; the \
                 device tree's model; INA3221 rails for power; the GPU thermal zone; \
                 total = MemTotal, used = nvmap's total; per process: nvmap's client list in \
                 debugfs (/sys/kernel/debug/nvmap/iovmm/clients)",
        good_for: "who holds GPU buffers on a board NVML does not see",
        limits: "unified memory: no VRAM, no free-for-the-GPU figure, no spill; nvmap counts \
                 multimedia buffers too; debugfs is root-only and not always mounted, and \
                 then processes are unknown (a note says why); the power rail may feed more \
                 than the GPU (VDD_GPU_SOC, VDD_CPU_GPU_CV); tested on recorded trees, not \
                 hardware",
    },
    Layer {
        only_with: Some("ascend"),
        what: "Ascend NPUs: chips, HBM, AI Core use, per-process device memory",
        kind: "measured",
        source: "npu-smi info (the driver's tool, killed after 3 s): per chip the name, health, \
                 HBM used/total (device memory on 310/310P cards), AI Core %, and the card's \
                 power and temperature; npu-smi info -t usages for the memory bandwidth in \
                 use; per process the device memory",
        good_for: "who holds an NPU, and which runtime (libascendcl, torch_npu, MindSpore)",
        limits: "power and temperature are per card, shared by its chips; NA is n/a; no \
                 engine times, no spill; PIDs are the host's (the PID stage pairs them in a \
                 container); tested on recorded outputs, not hardware",
    },
    Layer {
        only_with: None,
        what: "Which runtime a process runs",
        kind: "inferred",
        source: "/proc/PID/maps (libcudart, libggml, libtorch, libonnxruntime, libascendcl, \
                 libtorch_npu, libmindspore, ...), the executable's name and the command line",
        good_for: "telling a model server from a browser or the compositor",
        limits: "a runtime library names a runtime, never a model",
    },
];

#[cfg(target_os = "windows")]
const PLATFORM_LAYERS: [Layer; 4] = [
    Layer {
        only_with: None,
        what: "Device totals: used, total, free; GPU and memory activity, temperature, power",
        kind: "measured",
        source: "NVML (NVIDIA, WDDM or TCC); PDH GPU Local Adapter Memory / GPU Adapter Memory \
                 for adapters NVML does not cover (matched by LUID)",
        good_for: "how full the card is: the reference every other figure is checked against",
        limits: "WDDM keeps part of VRAM for itself; Task Manager shows the same counters",
    },
    Layer {
        only_with: None,
        what: "Per-process VRAM",
        kind: "measured",
        source: "PDH GPU Process Memory(pid_*) Local Usage; NVML says n/a under WDDM",
        good_for: "who holds the card, for every API (Direct3D, Vulkan, OpenGL, CUDA)",
        limits: "where Local Usage is missing, Dedicated Usage stands in (marked): it counts \
                 surfaces shared with the compositor, so dwm.exe can show ten times its share",
    },
    Layer {
        only_with: None,
        what: "Spill: GPU-accessible system RAM; paged-out memory",
        kind: "measured (paged: estimated)",
        source: "PDH GPU Process Memory Non Local Usage; Total Committed - Local - Non Local for \
                 paged",
        good_for: "seeing working sets that live in system RAM and cross PCIe",
        limits: "spill is memory the GPU can reach, not proof that VRAM overflowed; paged is an \
                 estimate of non-residency, not proof of paging",
    },
    Layer {
        only_with: None,
        what: "Which runtime a process runs",
        kind: "inferred",
        source: "loaded modules (nvcuda, cudart, d3d11/12, vulkan-1, opengl32, ggml, llama, \
                 torch, onnxruntime, DirectML), the image name and the command line",
        good_for: "telling a model server from a browser or dwm.exe",
        limits: "a runtime library names a runtime, never a model",
    },
];

#[cfg(target_os = "macos")]
const PLATFORM_LAYERS: [Layer; 5] = [
    Layer {
        only_with: None,
        what: "Device: GPU memory in use, activity",
        kind: "measured",
        source: "IOKit IOAccelerator PerformanceStatistics (In use system memory, Alloc system \
                 memory, Device Utilization %, and whatever else the chip publishes); the total \
                 is hw.memsize, all of the unified memory",
        good_for: "how much of the unified memory the GPU holds, and how busy it is",
        limits: "unified memory: no VRAM, no separate total, no \"free for the GPU\" figure; the \
                 CPU competes for the same pages",
    },
    Layer {
        only_with: None,
        what: "Per-process GPU time share",
        kind: "measured",
        source: "the AGXDeviceUserClient children of the GPU service: their creator's PID and \
                 accumulatedGPUTime; the change between two samples over the time between them",
        good_for: "who keeps the GPU busy, for every process and user",
        limits: "n/a on the first sample and when a client's counter cannot be read; a failed \
                 client query marks the list incomplete, never zero",
    },
    Layer {
        only_with: None,
        what: "Per-process memory: the physical footprint",
        kind: "measured",
        source: "proc_pid_rusage ri_phys_footprint: what macOS books to the process, its GPU \
                 buffers included; measured in the background (busy processes every 2 s, idle \
                 ones every 30 s)",
        good_for: "who holds the unified memory, GPU buffers and all",
        limits: "CPU memory counts too, so it is never summed against the GPU's in-use figure; \
                 without root, other users' processes are n/a",
    },
    Layer {
        only_with: None,
        what: "Spill: GPU-accessible system RAM",
        kind: "not applicable",
        source: "none: all memory is shared between CPU and GPU",
        good_for: "nothing on this platform",
        limits: "read the footprint instead",
    },
    Layer {
        only_with: None,
        what: "Which runtime a process runs",
        kind: "inferred",
        source: "mapped images (libmlx, mlx.metallib, libggml, libtorch, ...), the executable's \
                 name and the command line (python -m mlx_lm.server)",
        good_for: "telling a model server from a browser or WindowServer",
        limits: "a runtime library names a runtime, never a model; without root, other users' \
                 processes are named by their executable only",
    },
];

#[cfg(not(any(target_os = "linux", target_os = "windows", target_os = "macos")))]
const PLATFORM_LAYERS: [Layer; 0] = [];

const MODEL_LAYERS: [Layer; 3] = [
    Layer {
        only_with: None,
        what: "Which model file a process has loaded",
        kind: "evidence, ranked",
        source: "api: the runtime's local API (llama.cpp /props and /v1/models, Ollama /api/ps, \
                 LM Studio, vLLM /v1/models); mapped: the file is memory-mapped now; cmdline: \
                 a launch argument (-m); claimed: the API alone; installed: in an app's model folder (proves nothing)",
        good_for: "naming the model; two sources, one of them api or mapped, make it confirmed",
        limits: "probes go to loopback only, GET only, throttled; a runtime without an API or \
                 mapping is named by its command line at best",
    },
    Layer {
        only_with: None,
        what: "Weights / KV cache / compute buffers of a model process",
        kind: "reported, estimated",
        source: "reported: the runtime's log (llama.cpp \"model buffer size\", \"KV buffer \
                 size\", \"compute buffer size\"), Ollama /api/ps, vLLM /metrics; estimated: \
                 the GGUF header and launch settings with llama.cpp's own memory math",
        good_for: "what the KV cache costs, and what a longer context or more slots would cost",
        limits: "shown beside the measured figure, never added to it; the measured figure also \
                 holds the runtime's context (hundreds of MiB); with sliding-window attention \
                 a window-blind estimate is an upper bound",
    },
    Layer {
        only_with: None,
        what: "Per-allocation and per-texture names",
        kind: "not visible to a monitor",
        source: "only from inside the process: PyTorch torch.cuda.memory_snapshot(), CUDA \
                 compute-sanitizer / Nsight Systems, RenderDoc or PIX captures, amdgpu_gem_info \
                 in debugfs (root; buffer sizes, no names)",
        good_for: "finding which tensor, texture or cache grew",
        limits: "gputaskman does not read these: it needs the process's cooperation or a \
                 debugger",
    },
];

/// Every layer for this platform, from the device down to allocations.
pub fn layers() -> Vec<Layer> {
    PLATFORM_LAYERS.iter().chain(MODEL_LAYERS.iter()).copied().collect()
}

pub const TITLE: &str = "What can be known about GPU memory?";

/// How to read the figures on screen: the same words in the overlay and in
/// `gputaskman explain`.
const READING: [&str; 6] = [
    "n/a: the source cannot say (never 0). -: the process has nothing on that GPU.",
    "PID*: a translated PID (a container's host PID, a WSL host's context) paired for certain; \
     PID?: paired by a guess; no mark: the source gave the process's own PID.",
    "Model [api✓]: the strongest evidence; ✓ confirmed by two sources.",
    "Bar: one glyph per large process (measured), W K C: weights, KV cache, compute as the \
     runtime reported or the file implies (not measured), -: used by no listed process, \
     · free.",
    "normalized: the measured rows add up to more than the device reports used; the bar is \
     scaled to the device.",
    "Units are binary: GiB = 2^30 bytes, MiB = 2^20 bytes.",
];

/// The explanation as plain text, wrapped at `width` columns.
pub fn text_wrapped(width: usize) -> String {
    text_wrapped_for(width, |_| true)
}

/// The explanation of the layers `shown` keeps (the live view keeps those
/// of the sources this machine has), wrapped at `width` columns.
pub fn text_wrapped_for(width: usize, shown: impl Fn(&Layer) -> bool) -> String {
    let width = width.max(40);
    let mut out = String::new();
    out.push_str(TITLE);
    out.push_str(&format!(" (on {PLATFORM})\n\n"));
    for (i, l) in layers().iter().filter(|l| shown(l)).enumerate() {
        wrap_into(
            &mut out,
            &format!("{}. {} [{}]", i + 1, l.what, l.kind),
            width,
            "",
            "   ",
        );
        for (label, body) in [("source", l.source), ("good for", l.good_for), ("limits", l.limits)] {
            wrap_into(&mut out, &format!("{label}: {}", squeeze(body)), width, "   ", "     ");
        }
        out.push('\n');
    }
    out.push_str("Reading the screen\n");
    for r in READING {
        wrap_into(&mut out, &squeeze(r), width, "   ", "     ");
    }
    out
}

/// The explanation at 80 columns, as `gputaskman explain` prints it.
pub fn text() -> String {
    text_wrapped(80)
}

/// Collapses the runs of spaces left by line continuations.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn wrap_into(out: &mut String, text: &str, width: usize, first: &str, rest: &str) {
    let mut line = String::from(first);
    let mut empty = true;
    for word in text.split(' ') {
        let len = line.chars().count() + usize::from(!empty) + word.chars().count();
        if !empty && len > width {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layer_names_its_source_and_what_it_is_good_for() {
        let text = text();
        assert!(text.starts_with(TITLE));
        for l in layers() {
            assert!(!l.source.is_empty() && !l.good_for.is_empty());
            assert!(text.contains(&squeeze(l.what)), "{}", l.what);
        }
        for needle in [
            "weights",
            "KV cache",
            "per-texture",
            "Per-process VRAM",
            "Spill",
            "GGUF header",
        ] {
            assert!(text.to_lowercase().contains(&needle.to_lowercase()), "{needle} missing");
        }
        #[cfg(target_os = "linux")]
        for needle in ["NVML", "DRM fdinfo", "/proc/PID/maps", "nvmap", "npu-smi info"] {
            assert!(text.contains(needle), "{needle} missing");
        }
    }

    #[test]
    fn lines_fit_the_width() {
        for width in [60, 80, 100] {
            for line in text_wrapped(width).lines() {
                // A single word longer than the width may stand alone.
                assert!(
                    line.chars().count() <= width || !line.trim().contains(' '),
                    "{width}: {line:?}"
                );
            }
        }
    }
}
