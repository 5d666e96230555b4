//! The CUDA driver API, loaded at run time: just what it takes to hold
//! device memory. Signatures from cuda.h (driver API, CUDA 11 and later,
//! whose `_v2` entry points every driver since keeps exporting).

use libloading::{Library, Symbol};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// The library every NVIDIA driver installs (the CUDA toolkit is not needed).
pub const LIBCUDA: &str = "libcuda.so.1";

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuDevicePtr = u64;

const CUDA_SUCCESS: CuResult = 0;

/// Why holding memory failed, in words a person can act on.
#[derive(Debug)]
pub enum Failure {
    /// No driver library, or one without the driver API (exit status 3).
    NoDriver(String),
    /// A driver call failed (exit status 4).
    Call(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::NoDriver(_) => 3,
            Failure::Call(_) => 4,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NoDriver(why) | Failure::Call(why) => f.write_str(why),
        }
    }
}

/// The loaded driver library.
pub struct Cuda {
    lib: Library,
    name: String,
}

/// Device memory held in a context of its own; freed when dropped.
pub struct Held<'a> {
    cuda: &'a Cuda,
    context: CuContext,
    pointer: CuDevicePtr,
    pub bytes: u64,
    pub device: i32,
}

impl Cuda {
    /// Loads `path` (default [`LIBCUDA`]).
    pub fn load(path: Option<&str>) -> Result<Cuda, Failure> {
        let name = path.unwrap_or(LIBCUDA).to_string();
        // SAFETY: loading the driver library runs its initialisers, which is
        // what every CUDA program does.
        let lib = unsafe { Library::new(&name) }.map_err(|e| {
            Failure::NoDriver(format!(
                "cannot load {name} ({e}): no NVIDIA driver with the CUDA driver API here"
            ))
        })?;
        Ok(Cuda { lib, name })
    }

    fn symbol<T>(&self, name: &str) -> Result<Symbol<'_, T>, Failure> {
        // SAFETY: each caller names a cuda.h function with its cuda.h type.
        unsafe { self.lib.get(name.as_bytes()) }.map_err(|e| {
            Failure::NoDriver(format!(
                "{} has no {name} ({e}): not the CUDA driver library",
                self.name
            ))
        })
    }

    /// `CUDA_ERROR_...` for a code, where the driver names it.
    fn error_name(&self, code: CuResult) -> String {
        let named = self
            .symbol::<unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult>("cuGetErrorName")
            .ok()
            .and_then(|get| {
                let mut text: *const c_char = std::ptr::null();
                // SAFETY: the driver points `text` at a static string.
                let rc = unsafe { get(code, &mut text) };
                (rc == CUDA_SUCCESS && !text.is_null())
                    .then(|| unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned())
            });
        match named {
            Some(name) => format!("{name} ({code})"),
            None => format!("CUresult {code}"),
        }
    }

    fn check(&self, call: &str, code: CuResult) -> Result<(), Failure> {
        if code == CUDA_SUCCESS {
            return Ok(());
        }
        Err(Failure::Call(format!("{call} failed: {}", self.error_name(code))))
    }

    /// cuInit, cuDeviceGet, cuCtxCreate_v2, cuMemAlloc_v2 of `bytes`, and a
    /// cuMemsetD8_v2 over them so that every page is really the device's.
    /// With `bytes` 0 nothing is allocated: the process holds its context
    /// alone, what the driver costs before any buffer.
    pub fn hold(&self, device: i32, bytes: u64) -> Result<Held<'_>, Failure> {
        let init = self.symbol::<unsafe extern "C" fn(c_uint) -> CuResult>("cuInit")?;
        let device_get = self.symbol::<unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult>("cuDeviceGet")?;
        let context_create =
            self.symbol::<unsafe extern "C" fn(*mut CuContext, c_uint, CuDevice) -> CuResult>("cuCtxCreate_v2")?;
        let alloc = self.symbol::<unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult>("cuMemAlloc_v2")?;
        let memset = self.symbol::<unsafe extern "C" fn(CuDevicePtr, u8, usize) -> CuResult>("cuMemsetD8_v2")?;
        let size = usize::try_from(bytes).map_err(|_| Failure::Call(format!("{bytes} bytes do not fit a size_t")))?;
        // SAFETY: the calls follow cuda.h: out-parameters are valid locals,
        // and the context is created before memory is allocated in it.
        unsafe {
            self.check("cuInit", init(0))?;
            let mut handle: CuDevice = 0;
            self.check("cuDeviceGet", device_get(&mut handle, device))?;
            let mut context: CuContext = std::ptr::null_mut();
            self.check("cuCtxCreate_v2", context_create(&mut context, 0, handle))?;
            let mut held = Held {
                cuda: self,
                context,
                pointer: 0,
                bytes,
                device,
            };
            if size > 0 {
                self.check("cuMemAlloc_v2", alloc(&mut held.pointer, size))?;
                self.check("cuMemsetD8_v2", memset(held.pointer, 0xA5, size))?;
            }
            Ok(held)
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Best effort: the process exits next, which frees all of it anyway.
        // SAFETY: the pointer and context are the ones `hold` made.
        unsafe {
            if let Ok(free) = self
                .cuda
                .symbol::<unsafe extern "C" fn(CuDevicePtr) -> CuResult>("cuMemFree_v2")
            {
                if self.pointer != 0 {
                    free(self.pointer);
                }
            }
            if let Ok(destroy) = self
                .cuda
                .symbol::<unsafe extern "C" fn(CuContext) -> CuResult>("cuCtxDestroy_v2")
            {
                destroy(self.context);
            }
        }
    }
}

/// Blocks SIGTERM and SIGINT, so that they wait for [`wait_for_stop`]
/// instead of killing the process with the memory held. Call it first,
/// before any thread starts.
pub fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a local signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits for SIGTERM or SIGINT (blocked by [`block_stop_signals`]) and
/// says which came.
pub fn wait_for_stop(set: &libc::sigset_t) -> c_int {
    let mut signal: c_int = 0;
    // SAFETY: `set` is the blocked set; sigwait fills `signal`.
    while unsafe { libc::sigwait(set, &mut signal) } != 0 {}
    signal
}

/// A holder never outlives what started it: when the parent dies (a check
/// script killed at its deadline), the kernel sends SIGTERM, which
/// [`wait_for_stop`] takes as any other.
pub fn stop_with_parent() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
    }
}
