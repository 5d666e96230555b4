//! Which runtimes a process has loaded and what kind of program it is, from
//! its name, its executable and the shared libraries in /proc/PID/maps.
//!
//! A runtime library identifies a runtime, never a model: model evidence is
//! model discovery's job.

use crate::snapshot::ProcessKind;

/// Library file-name prefixes and the runtime each one means. Matched
/// against the file name of every mapped file, so `libcudart.so.12` and
/// `libcudart-1a2b3c.so.12` (pip wheels rename them) both count.
const LIBRARY_RUNTIMES: &[(&str, &str)] = &[
    ("libcuda.so", "cuda"),
    ("libcudart", "cudart"),
    ("libcublas", "cublas"),
    ("libcudnn", "cudnn"),
    ("libnvidia-ml", "nvml"),
    ("libnvinfer", "tensorrt"),
    ("libtensorrt", "tensorrt"),
    ("libllama", "llama.cpp"),
    // xllamacpp's extension module links llama.cpp in statically.
    ("xllamacpp", "llama.cpp"),
    ("libggml", "ggml"),
    ("libtorch", "pytorch"),
    ("libc10", "pytorch"),
    ("libtensorflow", "tensorflow"),
    ("libonnxruntime", "onnxruntime"),
    ("libopenvino", "openvino"),
    ("libvulkan", "vulkan"),
    ("libamdhip64", "hip"),
    ("librocm", "rocm"),
    ("libhsa-runtime64", "rocm"),
    ("librocblas", "rocm"),
    ("libze_loader", "level-zero"),
    // Huawei Ascend (CANN): the ACL runtime every framework on an NPU goes
    // through, PyTorch's NPU backend (torch_npu/lib/libtorch_npu.so, which
    // also matches libtorch) and MindSpore's libraries
    // (mindspore/lib/libmindspore_backend.so and the like).
    ("libascendcl", "ascendcl"),
    ("libtorch_npu", "torch_npu"),
    ("libmindspore", "mindspore"),
    ("libOpenCL", "opencl"),
    ("libGLX_nvidia", "opengl"),
    ("libEGL", "opengl"),
    ("libGL.so", "opengl"),
    ("libGLX", "opengl"),
    ("libnvcuvid", "nvdec"),
    ("libnvidia-encode", "nvenc"),
    ("libva.so", "vaapi"),
    // Apple's MLX: the pip wheel ships mlx/lib/libmlx.dylib and its Metal
    // kernels as mlx/lib/mlx.metallib (LM Studio's MLX engine loads the same).
    ("libmlx", "mlx"),
    ("mlx.metallib", "mlx"),
    // WSL's user-mode GPU libraries (/usr/lib/wsl/lib): a process that maps
    // them talks to the Windows host's GPU through /dev/dxg.
    ("libdxcore", "dxcore"),
    ("libd3d12", "d3d12"),
    // Windows DLLs (the loaded modules of a process). Matched without case:
    // Windows file names have none.
    ("nvcuda", "cuda"),
    ("cudart64", "cudart"),
    ("cublas64", "cublas"),
    ("cublaslt64", "cublas"),
    ("cudnn64", "cudnn"),
    ("cudnn_", "cudnn"),
    ("nvinfer", "tensorrt"),
    ("d3d11.dll", "d3d11"),
    ("d3d12.dll", "d3d12"),
    ("d3d12core.dll", "d3d12"),
    ("vulkan-1.dll", "vulkan"),
    ("opengl32.dll", "opengl"),
    ("onnxruntime", "onnxruntime"),
    ("directml.dll", "directml"),
    ("ggml", "ggml"),
    ("llama.dll", "llama.cpp"),
    ("torch_cpu.dll", "pytorch"),
    ("torch_cuda.dll", "pytorch"),
    ("c10.dll", "pytorch"),
    ("nvml.dll", "nvml"),
    ("amdhip64", "hip"),
    ("nvcuvid.dll", "nvdec"),
    ("nvencodeapi64.dll", "nvenc"),
];

/// Executable names that are themselves a runtime (statically linked builds
/// of llama.cpp map no libllama).
const NAME_RUNTIMES: &[(&str, &str)] = &[
    ("llama-server", "llama.cpp"),
    ("llama-cli", "llama.cpp"),
    ("llama-bench", "llama.cpp"),
    ("llama-run", "llama.cpp"),
    ("llama-embedding", "llama.cpp"),
    ("whisper-server", "whisper.cpp"),
    ("whisper-cli", "whisper.cpp"),
    ("ollama", "ollama"),
    ("ollama_llama_server", "ollama"),
    ("lm-studio", "lm-studio"),
    ("lms", "lm-studio"),
    ("koboldcpp", "koboldcpp"),
    ("vllm", "vllm"),
    ("text-generation-launcher", "tgi"),
    ("text-generation-router", "tgi"),
    ("text-generation-server", "tgi"),
    ("sglang", "sglang"),
    // `python -m mlx_lm.server`, and the `mlx_lm.generate` / `mlx_lm.server`
    // scripts that mlx-lm installs.
    ("mlx_lm", "mlx"),
    ("mlx_vlm", "mlx"),
    ("mlx_whisper", "mlx"),
];

/// Runtimes that mark a process as AI/ML work.
const AI_RUNTIMES: &[&str] = &[
    "llama.cpp",
    "ggml",
    "whisper.cpp",
    "ollama",
    "lm-studio",
    "koboldcpp",
    "vllm",
    "tgi",
    "sglang",
    "mlx",
    "pytorch",
    "torch_npu",
    "mindspore",
    "tensorflow",
    "onnxruntime",
    "openvino",
    "tensorrt",
    "cublas",
    "cudnn",
];

const COMPOSITORS: &[&str] = &[
    "Xorg",
    "Xwayland",
    "X",
    "gnome-shell",
    "kwin_wayland",
    "kwin_x11",
    "kwin",
    "mutter",
    "sway",
    "Hyprland",
    "weston",
    "picom",
    "compton",
    "compiz",
    "cosmic-comp",
    "labwc",
    "wayfire",
    "river",
    "niri",
    "gamescope",
    "dwm.exe",
    "WindowServer",
];

/// Browser executable names, matched without case; a macOS helper is the
/// app's name and " Helper" (`Google Chrome Helper (GPU)`, `Brave Browser
/// Helper (Renderer)`), and a name the kernel cut (15 bytes on Linux, 16 on
/// macOS: `Google Chrome He`) matches what it is the start of.
const BROWSERS: &[&str] = &[
    "firefox",
    "firefox-bin",
    "firefox-esr",
    "librewolf",
    "chrome",
    "chromium",
    "chromium-browser",
    "google-chrome",
    "msedge",
    "brave",
    "opera",
    "vivaldi",
    "vivaldi-bin",
    "epiphany",
    "safari",
    "Web Content",
    "Isolated Web Co",
    "GPU Process",
    // macOS app names (Safari and Firefox are above).
    "Google Chrome",
    "Microsoft Edge",
    "Brave Browser",
    "Arc",
    // Safari's web content and GPU processes, Firefox's child processes.
    "com.apple.WebKit.WebContent",
    "com.apple.WebKit.GPU",
    "plugin-container",
];

/// Programs that load GPU and AI libraries as the code they run asks
/// (PyTorch in python3, onnxruntime-node in node, DJL in java), matched as
/// the start of the name (`python3.12`).
const LOADERS: &[&str] = &[
    "python", "node", "java", "julia", "Rscript", "ruby", "perl", "dotnet", "mono", "deno", "bun", "lua", "wine",
    "blender", "uv",
];

/// The folders of the system's own programs. A program from anywhere else
/// (a venv, /opt, /usr/local, a home folder, a container's /app) may link
/// any library.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin/",
    "/bin/",
    "/usr/sbin/",
    "/sbin/",
    "/usr/lib/",
    "/lib/",
    "/usr/libexec/",
];

/// Whether a process could hold a runtime that only its mapped libraries
/// show, so that its maps are worth reading the first time it is seen: a
/// name or argv that is a runtime's, a program that loads libraries as its
/// code asks, a compositor, browser or game, or a program from outside the
/// system's folders (or whose executable is unknown). The others (a shell,
/// `sleep`, a system daemon) are read later, or at once when a GPU source
/// names them.
pub fn could_hold_runtime(comm: &str, exe: Option<&str>, argv: &[String]) -> bool {
    let mut named = Vec::new();
    runtimes_from_names(comm, exe, argv, &mut named);
    if !named.is_empty() || kind(comm, exe, argv, &named) != ProcessKind::Other {
        return true;
    }
    if is_loader(comm, exe, None) {
        return true;
    }
    !exe.is_some_and(|e| SYSTEM_DIRS.iter().any(|d| e.starts_with(d)))
}

/// Whether the program (its name, executable or `argv[0]`) is one of
/// [`LOADERS`], which run what their arguments name.
fn is_loader(comm: &str, exe: Option<&str>, argv0: Option<&str>) -> bool {
    let exe_name = exe.map(file_name).unwrap_or(comm);
    [Some(comm), Some(exe_name), argv0.map(file_name)]
        .iter()
        .flatten()
        .any(|n| *n == "R" || LOADERS.iter().any(|l| n.starts_with(l)))
}

/// A Windows image name without its `.exe`, whatever its case.
fn without_exe(name: &str) -> &str {
    let n = name.len();
    if n >= 4 && name.as_bytes()[n - 4..].eq_ignore_ascii_case(b".exe") {
        &name[..n - 4]
    } else {
        name
    }
}

/// `s` starts with `prefix`, without ASCII case.
fn starts_with_no_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Whether a process or executable name is a browser's (see [`BROWSERS`]).
fn is_browser(name: &str) -> bool {
    const HELPER: &[u8] = b" Helper";
    let name = name.as_bytes();
    let cut = name.len() >= 15;
    BROWSERS.iter().any(|b| {
        let b = b.as_bytes();
        if name.eq_ignore_ascii_case(b) || (cut && starts_with_no_case(b, name)) {
            return true;
        }
        if !starts_with_no_case(name, b) {
            return false;
        }
        let rest = &name[b.len()..];
        starts_with_no_case(rest, HELPER) || (cut && !rest.is_empty() && starts_with_no_case(HELPER, rest))
    })
}

/// The file name of a path-like string.
pub fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// What shows that a process has a runtime: a mapped (on Windows, loaded)
/// library, its name or command line, or either of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeEvidence {
    Library,
    Name,
    NameOrLibrary,
}

/// How a runtime named in a snapshot can have been found, from the two
/// tables that find them ([`LIBRARY_RUNTIMES`], [`NAME_RUNTIMES`]; `ggml`
/// also from a mapped `.gguf`); None for a name neither table gives.
pub fn runtime_evidence(runtime: &str) -> Option<RuntimeEvidence> {
    let library = runtime == "ggml" || LIBRARY_RUNTIMES.iter().any(|(_, r)| *r == runtime);
    let name = NAME_RUNTIMES.iter().any(|(_, r)| *r == runtime);
    match (library, name) {
        (true, false) => Some(RuntimeEvidence::Library),
        (false, true) => Some(RuntimeEvidence::Name),
        (true, true) => Some(RuntimeEvidence::NameOrLibrary),
        (false, false) => None,
    }
}

/// Adds the runtimes that the mapped files imply to `runtimes`. A mapped
/// `.gguf` file means ggml code reads it, whichever program it is.
pub fn runtimes_from_libraries<'a>(paths: impl IntoIterator<Item = &'a str>, runtimes: &mut Vec<String>) {
    for path in paths {
        let name = file_name(path);
        if name
            .to_ascii_lowercase()
            .trim_end_matches(" (deleted)")
            .ends_with(".gguf")
        {
            push_unique(runtimes, "ggml");
        }
        for (prefix, runtime) in LIBRARY_RUNTIMES {
            let head = name.get(..prefix.len());
            if head.is_some_and(|h| h.eq_ignore_ascii_case(prefix)) {
                push_unique(runtimes, runtime);
            }
        }
    }
}

/// Adds the runtime an executable or command name implies.
pub fn runtimes_from_names(comm: &str, exe: Option<&str>, argv: &[String], runtimes: &mut Vec<String>) {
    let mut names = vec![comm];
    names.extend(exe.map(file_name));
    // `vllm serve`, `ollama runner`: the program itself. Its arguments name
    // what runs only for a loader (`python -m vllm.entrypoints...`,
    // `python3 /venv/bin/vllm serve`): `timeout 300 vllm serve` is a
    // wrapper whose child is the runtime, not the runtime itself.
    let words = if is_loader(comm, exe, argv.first().map(String::as_str)) {
        4
    } else {
        1
    };
    names.extend(argv.iter().take(words).map(|a| file_name(a)));
    for name in names {
        let stem = name.strip_suffix(".exe").unwrap_or(name);
        for (exe_name, runtime) in NAME_RUNTIMES {
            // `vllm` or `vllm.entrypoints...`, without a string a try;
            // `sglang::scheduler_TP0`, a title SGLang's workers set.
            if stem
                .strip_prefix(exe_name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with("::"))
            {
                push_unique(runtimes, runtime);
            }
        }
    }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

/// The kind of a process: its runtimes decide AI work, its name the rest.
pub fn kind(comm: &str, exe: Option<&str>, argv: &[String], runtimes: &[String]) -> ProcessKind {
    if runtimes.iter().any(|r| AI_RUNTIMES.contains(&r.as_str())) {
        return ProcessKind::Ai;
    }
    let exe_name = exe.map(file_name).unwrap_or(comm);
    // Windows image names carry `.exe`: looked up with and without it
    // (`chrome.exe` is a browser; the list spells `dwm.exe` out, so Linux's
    // dwm window manager is not taken for the Windows compositor).
    let names = [comm, exe_name, without_exe(comm), without_exe(exe_name)];
    if names.iter().any(|n| COMPOSITORS.contains(n)) {
        return ProcessKind::Compositor;
    }
    if names.iter().any(|n| is_browser(n)) {
        return ProcessKind::Browser;
    }
    let is_game = exe.is_some_and(|e| e.contains("/steamapps/common/") || e.contains("/Proton"))
        || argv
            .first()
            .is_some_and(|a| a.contains("steamapps") || a.ends_with(".exe") && runtimes.iter().any(|r| r == "vulkan"));
    if is_game {
        return ProcessKind::Game;
    }
    ProcessKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_processes_that_could_hold_a_runtime_have_their_maps_read_first() {
        let could = |comm: &str, exe: Option<&str>, argv: &[&str]| could_hold_runtime(comm, exe, &strings(argv));
        // The system's own programs, whose names say nothing: deferred.
        assert!(!could("sleep", Some("/usr/bin/sleep"), &["sleep", "30"]));
        assert!(!could("sshd", Some("/usr/sbin/sshd"), &["sshd: user"]));
        assert!(!could("bash", Some("/bin/bash"), &["-bash"]));
        // A runtime's name, an interpreter, a browser, a compositor.
        assert!(could("llama-server", Some("/usr/bin/llama-server"), &[]));
        assert!(could(
            "vllm",
            Some("/opt/venv/bin/python3"),
            &["/opt/venv/bin/vllm", "serve"]
        ));
        // A wrapper whose argument is a runtime is not that runtime.
        assert!(!could(
            "timeout",
            Some("/usr/bin/timeout"),
            &["timeout", "300", "vllm", "serve"]
        ));
        assert!(could(
            "python3.12",
            Some("/usr/bin/python3.12"),
            &["python3", "train.py"]
        ));
        assert!(could("node", Some("/usr/bin/node"), &["node", "app.js"]));
        assert!(could("firefox", Some("/usr/lib/firefox/firefox"), &[]));
        assert!(could("Xorg", Some("/usr/lib/xorg/Xorg"), &[]));
        // Anything from outside the system's folders, or of unknown origin.
        assert!(could("trainer", Some("/opt/lab/bin/trainer"), &[]));
        assert!(could("app", Some("/usr/local/bin/app"), &[]));
        assert!(could("worker", None, &[]));
    }

    #[test]
    fn libraries_name_their_runtimes_once() {
        let maps = [
            "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14",
            "/venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12",
            "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
            "/venv/lib/python3.11/site-packages/torch/lib/libc10.so",
            "/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart-9335f6a2.so.12",
            "/usr/lib/libc.so.6",
        ];
        let mut r = vec![];
        runtimes_from_libraries(maps, &mut r);
        assert_eq!(r, ["cuda", "cublas", "pytorch", "cudart"]);
        assert_eq!(kind("python3", None, &[], &r), ProcessKind::Ai);
    }

    #[test]
    fn ascend_runtimes_are_named_from_their_libraries() {
        // The paths CANN, torch_npu and MindSpore install to.
        let torch_npu = [
            "/usr/local/Ascend/ascend-toolkit/8.0.0/aarch64-linux/lib64/libascendcl.so",
            "/venv/lib/python3.10/site-packages/torch_npu/lib/libtorch_npu.so",
            "/venv/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so",
        ];
        let mut r = vec![];
        runtimes_from_libraries(torch_npu, &mut r);
        assert_eq!(r, ["ascendcl", "pytorch", "torch_npu"]);
        assert_eq!(kind("python3", None, &[], &r), ProcessKind::Ai);
        let mindspore = ["/venv/lib/python3.9/site-packages/mindspore/lib/libmindspore_backend.so"];
        let mut r = vec![];
        runtimes_from_libraries(mindspore, &mut r);
        assert_eq!(r, ["mindspore"]);
        assert_eq!(kind("python3", None, &[], &r), ProcessKind::Ai);
        // The ACL runtime alone is a device runtime, not AI work by itself.
        let mut r = vec![];
        runtimes_from_libraries(["/usr/local/Ascend/driver/lib64/libascendcl.so"], &mut r);
        assert_eq!(r, ["ascendcl"]);
        assert_eq!(kind("a.out", None, &[], &r), ProcessKind::Other);
    }

    #[test]
    fn windows_dlls_and_wsl_libraries_name_their_runtimes() {
        let modules = [
            "C:\\Windows\\System32\\nvcuda.dll",
            "C:\\Windows\\SYSTEM32\\D3D12.dll",
            "C:\\Windows\\System32\\d3d11.dll",
            "C:\\Windows\\System32\\vulkan-1.dll",
            "C:\\Windows\\System32\\OPENGL32.dll",
            "C:\\Program Files\\App\\onnxruntime.dll",
            "C:\\Program Files\\App\\DirectML.dll",
            "C:\\llama.cpp\\ggml-cuda.dll",
            "C:\\llama.cpp\\llama.dll",
            "C:\\venv\\Lib\\site-packages\\torch\\lib\\torch_cuda.dll",
            "C:\\venv\\Lib\\site-packages\\torch\\lib\\cudart64_12.dll",
            "C:\\Windows\\System32\\kernel32.dll",
        ];
        let mut r = vec![];
        runtimes_from_libraries(modules, &mut r);
        assert_eq!(
            r,
            [
                "cuda",
                "d3d12",
                "d3d11",
                "vulkan",
                "opengl",
                "onnxruntime",
                "directml",
                "ggml",
                "llama.cpp",
                "pytorch",
                "cudart"
            ]
        );
        assert_eq!(kind("python.exe", None, &[], &r), ProcessKind::Ai);
        let mut r = vec![];
        runtimes_from_libraries(
            ["/usr/lib/wsl/lib/libdxcore.so", "/usr/lib/wsl/lib/libd3d12core.so"],
            &mut r,
        );
        assert_eq!(r, ["dxcore", "d3d12"]);
        assert_eq!(kind("dwm.exe", None, &[], &r), ProcessKind::Compositor);
        assert_eq!(
            kind(
                "chrome.exe",
                Some("C:\\Program Files\\Google\\Chrome\\Application\\chrome.exe"),
                &[],
                &[]
            ),
            ProcessKind::Browser
        );
    }

    #[test]
    fn a_static_llama_server_is_known_by_name() {
        let mut r = vec![];
        let argv = strings(&["/usr/local/bin/llama-server", "-m", "/srv/models/x.gguf"]);
        runtimes_from_names("llama-server", Some("/usr/local/bin/llama-server"), &argv, &mut r);
        assert_eq!(r, ["llama.cpp"]);
        assert_eq!(kind("llama-server", None, &argv, &r), ProcessKind::Ai);
        // `ollama runner` and `vllm serve` through python.
        let mut r = vec![];
        runtimes_from_names(
            "python3",
            Some("/usr/bin/python3.11"),
            &strings(&["python3", "/venv/bin/vllm", "serve"]),
            &mut r,
        );
        assert_eq!(r, ["vllm"]);
        // `timeout 300 vllm serve` runs vLLM as its child; `sh -c x vllm` names it.
        for (comm, exe, argv) in [
            ("timeout", "/usr/bin/timeout", &["timeout", "300", "vllm", "serve"][..]),
            ("sh", "/bin/dash", &["sh", "-c", "x", "vllm"][..]),
        ] {
            let mut r = vec![];
            runtimes_from_names(comm, Some(exe), &strings(argv), &mut r);
            assert!(r.is_empty(), "{argv:?}: {r:?}");
            assert_eq!(kind(comm, Some(exe), &strings(argv), &r), ProcessKind::Other);
        }
    }

    /// SGLang's main process by its module or script, its workers by the
    /// titles they set (the kernel keeps 15 bytes: `sglang::schedul`);
    /// TGI's launcher, router and shards by their programs.
    #[test]
    fn sglang_and_tgi_processes_are_known_by_name() {
        for (comm, exe, argv) in [
            (
                "python3",
                "/usr/bin/python3.11",
                &["python3", "-m", "sglang.launch_server", "--model-path", "/m"][..],
            ),
            ("sglang", "/usr/bin/python3.11", &["/venv/bin/sglang", "serve"][..]),
            ("sglang::schedul", "/usr/bin/python3.11", &["sglang::scheduler_TP0"][..]),
        ] {
            let mut r = vec![];
            runtimes_from_names(comm, Some(exe), &strings(argv), &mut r);
            assert_eq!(r, ["sglang"], "{argv:?}");
        }
        for program in [
            "text-generation-launcher",
            "text-generation-router",
            "text-generation-server",
        ] {
            let mut r = vec![];
            let path = format!("/usr/local/bin/{program}");
            runtimes_from_names(
                "text-generation",
                Some(&path),
                &strings(&[&path, "--port", "80"]),
                &mut r,
            );
            assert_eq!(r, ["tgi"], "{program}");
        }
        let mut r = vec![];
        runtimes_from_names("sglangx", None, &strings(&["sglangx"]), &mut r);
        assert!(r.is_empty(), "a longer name is another program");
    }

    #[test]
    fn mlx_is_known_by_its_library_its_kernels_and_its_scripts() {
        let mut r = vec![];
        runtimes_from_libraries(
            [
                "/opt/venv/lib/python3.12/site-packages/mlx/lib/libmlx.dylib",
                "/opt/venv/lib/python3.12/site-packages/mlx/lib/mlx.metallib",
                "/System/Library/Frameworks/Metal.framework/Versions/A/Metal",
            ],
            &mut r,
        );
        assert_eq!(r, ["mlx"]);
        assert_eq!(kind("Python", None, &[], &r), ProcessKind::Ai);
        for argv in [
            &[
                "python3",
                "-m",
                "mlx_lm.server",
                "--model",
                "mlx-community/Qwen3-4B-4bit",
            ][..],
            &[
                "/opt/venv/bin/python3.12",
                "/opt/venv/bin/mlx_lm.generate",
                "--prompt",
                "hi",
            ][..],
            &["python", "-m", "mlx_lm", "generate"][..],
        ] {
            let mut r = vec![];
            runtimes_from_names("Python", None, &strings(argv), &mut r);
            assert_eq!(r, ["mlx"], "{argv:?}");
        }
        // A module that merely starts with the letters is not MLX.
        let mut r = vec![];
        runtimes_from_names("python3", None, &strings(&["python3", "-m", "mlx_lmx"]), &mut r);
        assert!(r.is_empty());
    }

    #[test]
    fn compositors_browsers_games_and_the_rest() {
        assert_eq!(
            kind("Xorg", Some("/usr/lib/xorg/Xorg"), &[], &[]),
            ProcessKind::Compositor
        );
        assert_eq!(
            kind("gnome-shell", None, &[], &strings(&["opengl"])),
            ProcessKind::Compositor
        );
        assert_eq!(
            kind("firefox", Some("/usr/lib/firefox/firefox"), &[], &[]),
            ProcessKind::Browser
        );
        assert_eq!(
            kind("chrome", Some("/opt/google/chrome/chrome"), &[], &[]),
            ProcessKind::Browser
        );
        assert_eq!(
            kind(
                "hl2_linux",
                Some("/home/u/.steam/steam/steamapps/common/HL2/hl2_linux"),
                &[],
                &[]
            ),
            ProcessKind::Game
        );
        assert_eq!(kind("bash", Some("/usr/bin/bash"), &[], &[]), ProcessKind::Other);
        assert_eq!(kind("CHROME.EXE", None, &[], &[]), ProcessKind::Browser);
        // A Vulkan program alone is not an AI runtime.
        assert_eq!(kind("vkcube", None, &[], &strings(&["vulkan"])), ProcessKind::Other);
    }

    #[test]
    fn macos_browsers_and_their_helpers_are_browsers_without_case() {
        let app = |comm: &str, exe: &str| kind(comm, Some(exe), &[], &[]);
        for (comm, exe) in [
            ("Safari", "/Applications/Safari.app/Contents/MacOS/Safari"),
            ("Google Chrome", "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"),
            (
                "Google Chrome He",
                "/Applications/Google Chrome.app/Contents/Frameworks/Google Chrome Framework.framework/Versions/120.0.6099.71/Helpers/Google Chrome Helper (GPU).app/Contents/MacOS/Google Chrome Helper (GPU)",
            ),
            ("firefox", "/Applications/Firefox.app/Contents/MacOS/firefox"),
            ("plugin-containe", "/Applications/Firefox.app/Contents/MacOS/plugin-container.app/Contents/MacOS/plugin-container"),
            ("Microsoft Edge", "/Applications/Microsoft Edge.app/Contents/MacOS/Microsoft Edge"),
            ("Arc", "/Applications/Arc.app/Contents/MacOS/Arc"),
            ("Brave Browser", "/Applications/Brave Browser.app/Contents/MacOS/Brave Browser"),
            ("com.apple.WebKi", "/System/Library/Frameworks/WebKit.framework/Versions/A/XPCServices/com.apple.WebKit.GPU.xpc/Contents/MacOS/com.apple.WebKit.GPU"),
        ] {
            assert_eq!(app(comm, exe), ProcessKind::Browser, "{exe}");
        }
        // The names alone (another user's process: no executable path).
        for comm in [
            "Google Chrome He",
            "Microsoft Edge H",
            "Brave Browser He",
            "Arc Helper (GPU)",
            "Firefox",
            "SAFARI",
        ] {
            assert_eq!(kind(comm, None, &[], &[]), ProcessKind::Browser, "{comm}");
        }
        // Only whole names, helpers and cut names: not every name that
        // starts like a browser's.
        for comm in ["Archive Utility", "Arcade", "chromedriver", "Google Chrome Updater"] {
            assert_eq!(kind(comm, None, &[], &[]), ProcessKind::Other, "{comm}");
        }
    }
}
