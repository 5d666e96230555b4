//! A copy of the system's libm under a runtime's name: a library any
//! process can load (LD_PRELOAD), so a test process maps a file the
//! scanner classifies (`libcuda.so.1`, `libllama.so`). One copy for the
//! library's unit tests (src/procs/linux.rs) and the integration tests
//! (tests/common), as a dev-dependency of both.

use std::path::{Path, PathBuf};

/// A copy of libm under `name` in `dir`.
pub fn library_named(dir: &Path, name: &str) -> PathBuf {
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("libm");
    let lib = dir.join(name);
    std::fs::copy(libm, &lib).unwrap();
    lib
}
