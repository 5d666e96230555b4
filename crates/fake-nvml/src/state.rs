//! Global state and the checks every exported call goes through: init
//! refcount, scenario (re)loading, device handles, lost devices, hangs and
//! injected errors. Exports call [`system`], [`device`] or [`find_device`].

use std::ffi::OsString;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::abi::{self, Handle, Ret};
use crate::scenario::{Device, Scenario};

/// Names the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_NVML_SCENARIO";

/// `nvmlDevice_t` values are this plus the device's position in the scenario.
/// They are never dereferenced; the odd base makes misuse easy to spot.
const HANDLE_BASE: usize = 0x6e76_6d6c_0000;

/// What a call answers when it cannot answer.
pub type CallResult = Result<(), Ret>;

struct State {
    init_count: u32,
    loaded: Option<Loaded>,
}

/// A scenario and where it came from.
struct Loaded {
    path: PathBuf,
    /// Stamp of the file the scenario was read from.
    stamp: Option<FileStamp>,
    /// Stamp of the last file that failed to load, so it is reported once.
    failed_stamp: Option<FileStamp>,
    scenario: Scenario,
    /// Calls that touched each device, for `lost_after_calls`.
    calls: Vec<u64>,
}

/// Identifies a version of the scenario file: modification time and size.
type FileStamp = (SystemTime, u64);

static STATE: Mutex<State> = Mutex::new(State {
    init_count: 0,
    loaded: None,
});

fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One line on stderr; a closed stderr is not worth a panic.
pub fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Runs an export's body: a panic becomes NVML_ERROR_UNKNOWN instead of
/// unwinding into C.
pub fn guard(body: impl FnOnce() -> CallResult) -> Ret {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => abi::SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => abi::ERROR_UNKNOWN,
    }
}

fn file_stamp(path: &PathBuf) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl Loaded {
    fn read(path: OsString) -> Result<Loaded, String> {
        let path = PathBuf::from(path);
        let stamp = file_stamp(&path);
        let scenario = Scenario::load(&path)?;
        Ok(Loaded {
            calls: vec![0; scenario.devices.len()],
            path,
            stamp,
            failed_stamp: None,
            scenario,
        })
    }

    /// Re-reads the file when it changed. A file that fails to load leaves the
    /// previous scenario in place (a writer may be half-way through) and is
    /// reported once.
    fn refresh(&mut self) {
        let stamp = file_stamp(&self.path);
        if stamp.is_none() || stamp == self.stamp || stamp == self.failed_stamp {
            return;
        }
        match Scenario::load(&self.path) {
            Ok(scenario) => {
                self.calls = vec![0; scenario.devices.len()];
                self.scenario = scenario;
                self.stamp = stamp;
                self.failed_stamp = None;
            }
            Err(message) => {
                warn(&message);
                self.failed_stamp = stamp;
            }
        }
    }
}

impl State {
    fn loaded(&mut self) -> Result<&mut Loaded, Ret> {
        match self.loaded.as_mut() {
            Some(loaded) if self.init_count > 0 => Ok(loaded),
            _ => Err(abi::ERROR_UNINITIALIZED),
        }
    }
}

/// nvmlInit, nvmlInit_v2, nvmlInitWithFlags (`function`): the first reference
/// reads the file named by FAKE_NVML_SCENARIO; later ones re-read it when it
/// changed. `init_error` fails it; top-level `hang_ms` delays it.
pub fn init(function: &str) -> Ret {
    guard(|| {
        let hang = {
            let mut state = lock();
            if state.init_count == 0 {
                state.loaded = None;
                let Some(path) = std::env::var_os(SCENARIO_ENV) else {
                    warn("fake-nvml: FAKE_NVML_SCENARIO not set");
                    return Err(abi::ERROR_DRIVER_NOT_LOADED);
                };
                state.loaded = Some(Loaded::read(path).map_err(|message| {
                    warn(&message);
                    abi::ERROR_UNKNOWN
                })?);
            }
            let loaded = state.loaded.as_mut().ok_or(abi::ERROR_UNKNOWN)?;
            loaded.refresh();
            if let Some(code) = loaded.scenario.init_error {
                return Err(code);
            }
            loaded.scenario.hang_ms.get(function).copied()
        };
        if let Some(ms) = hang {
            std::thread::sleep(Duration::from_millis(ms));
        }
        lock().init_count += 1;
        Ok(())
    })
}

/// nvmlShutdown: drops one reference.
pub fn shutdown() -> Ret {
    guard(|| {
        let mut state = lock();
        state.init_count = state.init_count.checked_sub(1).ok_or(abi::ERROR_UNINITIALIZED)?;
        Ok(())
    })
}

/// Which device a call is about.
#[derive(Clone, Copy)]
enum Target<'a> {
    System,
    Handle(Handle),
    /// A handle lookup: finds the position, or says what to answer.
    Find(&'a dyn Fn(&Scenario) -> Result<usize, Ret>),
}

/// The handle of the device at `position`.
fn handle_of(position: usize) -> Handle {
    (HANDLE_BASE + position) as Handle
}

fn position_of(handle: Handle, scenario: &Scenario) -> Result<usize, Ret> {
    (handle as usize)
        .checked_sub(HANDLE_BASE)
        .filter(|position| *position < scenario.devices.len())
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// The common path of every call after init: reload (for the calls that
/// allow it), resolve and count the device, sleep for `hang_ms` (without
/// holding the lock), answer an injected error, then run `body`.
fn call(
    function: &str,
    reload: bool,
    target: Target<'_>,
    body: impl FnOnce(&Scenario, Option<usize>) -> CallResult,
) -> Ret {
    guard(|| {
        let resolve = |scenario: &Scenario| -> Result<Option<usize>, Ret> {
            match target {
                Target::System => Ok(None),
                Target::Handle(handle) => position_of(handle, scenario).map(Some),
                Target::Find(find) => find(scenario).map(Some),
            }
        };
        let hang = {
            let mut state = lock();
            let loaded = state.loaded()?;
            if reload {
                loaded.refresh();
            }
            let position = resolve(&loaded.scenario)?;
            let scenario = &loaded.scenario;
            let device_hang = match position {
                Some(position) => {
                    let device = &scenario.devices[position];
                    let calls = &mut loaded.calls[position];
                    *calls += 1;
                    if device.lost_after_calls.is_some_and(|limit| *calls > limit) {
                        return Err(abi::ERROR_GPU_IS_LOST);
                    }
                    device.hang_ms.get(function)
                }
                None => None,
            };
            device_hang.or(scenario.hang_ms.get(function)).copied()
        };
        if let Some(ms) = hang {
            std::thread::sleep(Duration::from_millis(ms));
        }
        let mut state = lock();
        let scenario = &state.loaded()?.scenario;
        let position = resolve(scenario)?;
        let device = position.map(|position| &scenario.devices[position]);
        let injected = scenario.errors.get(function);
        if let Some(code) = injected.or(device.and_then(|d| d.errors.get(function))) {
            return Err(*code);
        }
        body(scenario, position)
    })
}

/// A call about the system as a whole. `reload`: the scenario file is
/// re-read first when it changed (nvmlDeviceGetCount*).
pub fn system(function: &str, reload: bool, body: impl FnOnce(&Scenario) -> CallResult) -> Ret {
    call(function, reload, Target::System, |scenario, _| body(scenario))
}

/// A call about the device behind `handle`.
pub fn device(function: &str, handle: Handle, body: impl FnOnce(&Device) -> CallResult) -> Ret {
    call(function, false, Target::Handle(handle), |scenario, position| {
        let position = position.ok_or(abi::ERROR_INVALID_ARGUMENT)?;
        body(&scenario.devices[position])
    })
}

/// A handle lookup: `find` picks the device's position or says what to
/// answer. The handle goes to `out`.
///
/// # Safety
/// `out` is NULL or valid for writing an `nvmlDevice_t`.
pub unsafe fn find_device(function: &str, find: &dyn Fn(&Scenario) -> Result<usize, Ret>, out: *mut Handle) -> Ret {
    call(function, false, Target::Find(find), |_, position| {
        let position = position.ok_or(abi::ERROR_INVALID_ARGUMENT)?;
        put(out, handle_of(position))
    })
}

/// Writes one output value; NULL is NVML_ERROR_INVALID_ARGUMENT.
///
/// # Safety
/// `out` is NULL or valid for writing a `T`.
pub unsafe fn put<T>(out: *mut T, value: T) -> CallResult {
    if out.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    out.write_unaligned(value);
    Ok(())
}

/// Reads an input value; NULL is NVML_ERROR_INVALID_ARGUMENT.
///
/// # Safety
/// `input` is NULL or valid for reading a `T`.
pub unsafe fn get<T>(input: *const T) -> Result<T, Ret> {
    if input.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(input.read_unaligned())
}

/// Copies `text` and a NUL into a caller's buffer of `length` bytes.
///
/// # Safety
/// `buffer` is NULL or valid for writing `length` bytes.
pub unsafe fn put_str(buffer: *mut std::os::raw::c_char, length: u32, text: &str) -> CallResult {
    if buffer.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    if text.len() >= length as usize {
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    std::ptr::copy_nonoverlapping(text.as_ptr(), buffer.cast::<u8>(), text.len());
    buffer.add(text.len()).write(0);
    Ok(())
}

/// The value of an optional scenario field, or NVML_ERROR_NOT_SUPPORTED.
pub fn supported<T>(field: Option<T>) -> Result<T, Ret> {
    field.ok_or(abi::ERROR_NOT_SUPPORTED)
}
