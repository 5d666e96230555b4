//! Global state and the checks every exported call goes through: init
//! refcount, scenario (re)loading, device handles, lost devices, hangs and
//! injected errors. Exports call [`system`], [`device`] or [`find_device`].

use std::ffi::OsString;
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
pub use fake_dll::warn;

/// Runs an export's body: a panic becomes NVML_ERROR_UNKNOWN instead of
/// unwinding into C.
pub fn guard(body: impl FnOnce() -> CallResult) -> Ret {
    fake_dll::guard(abi::SUCCESS, abi::ERROR_UNKNOWN, body)
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

/// What a handle names: a GPU by its position in the scenario, or one of
/// its MIG devices by MIG device index.
#[derive(Clone, Copy)]
struct Place {
    position: usize,
    mig: Option<usize>,
}

/// The handle of the device at `position`.
pub fn handle_of(position: usize) -> Handle {
    (HANDLE_BASE + position) as Handle
}

/// The handle of MIG device `index` of the device at `position`: its own
/// range, so that a MIG handle is never taken for a GPU's.
pub fn mig_handle_of(position: usize, index: usize) -> Handle {
    (MIG_HANDLE_BASE + position * MIG_HANDLES_PER_DEVICE + index) as Handle
}

/// MIG handles start here, above every GPU handle, [`MIG_HANDLES_PER_DEVICE`]
/// per GPU.
const MIG_HANDLE_BASE: usize = 0x7e6d_6967_0000;
const MIG_HANDLES_PER_DEVICE: usize = 0x100;

fn place_of(handle: Handle, scenario: &Scenario) -> Result<Place, Ret> {
    let value = handle as usize;
    let place = match value.checked_sub(MIG_HANDLE_BASE) {
        Some(offset) => Place {
            position: offset / MIG_HANDLES_PER_DEVICE,
            mig: Some(offset % MIG_HANDLES_PER_DEVICE),
        },
        None => Place {
            position: value.checked_sub(HANDLE_BASE).ok_or(abi::ERROR_INVALID_ARGUMENT)?,
            mig: None,
        },
    };
    let device = scenario
        .devices
        .get(place.position)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    match place.mig {
        Some(index) if index >= device.mig_handles.len() => Err(abi::ERROR_INVALID_ARGUMENT),
        _ => Ok(place),
    }
}

impl Place {
    fn device(self, scenario: &Scenario) -> &Device {
        let device = &scenario.devices[self.position];
        match self.mig {
            Some(index) => &device.mig_handles[index],
            None => device,
        }
    }
}

/// The common path of every call after init: reload (for the calls that
/// allow it), resolve and count the device (a MIG handle counts for its
/// GPU: a lost GPU loses its instances), sleep for `hang_ms` (without
/// holding the lock), answer an injected error, then run `body`.
fn call(
    function: &str,
    reload: bool,
    target: Target<'_>,
    body: impl FnOnce(&Scenario, Option<Place>) -> CallResult,
) -> Ret {
    guard(|| {
        let resolve = |scenario: &Scenario| -> Result<Option<Place>, Ret> {
            match target {
                Target::System => Ok(None),
                Target::Handle(handle) => place_of(handle, scenario).map(Some),
                Target::Find(find) => find(scenario).map(|position| Some(Place { position, mig: None })),
            }
        };
        let hang = {
            let mut state = lock();
            let loaded = state.loaded()?;
            if reload {
                loaded.refresh();
            }
            let place = resolve(&loaded.scenario)?;
            let scenario = &loaded.scenario;
            let device_hang = match place {
                Some(place) => {
                    let parent = &scenario.devices[place.position];
                    let calls = &mut loaded.calls[place.position];
                    *calls += 1;
                    if parent.lost_after_calls.is_some_and(|limit| *calls > limit) {
                        return Err(abi::ERROR_GPU_IS_LOST);
                    }
                    place.device(scenario).hang_ms.get(function)
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
        let place = resolve(scenario)?;
        let device = place.map(|place| place.device(scenario));
        let injected = scenario.errors.get(function);
        if let Some(code) = injected.or(device.and_then(|d| d.errors.get(function))) {
            return Err(*code);
        }
        body(scenario, place)
    })
}

/// A call about the system as a whole. `reload`: the scenario file is
/// re-read first when it changed (nvmlDeviceGetCount*).
pub fn system(function: &str, reload: bool, body: impl FnOnce(&Scenario) -> CallResult) -> Ret {
    call(function, reload, Target::System, |scenario, _| body(scenario))
}

/// A call about the device behind `handle`: a GPU, or a MIG device (then
/// `body` sees what its handle answers, see `Device::mig_handles`).
pub fn device(function: &str, handle: Handle, body: impl FnOnce(&Device) -> CallResult) -> Ret {
    call(function, false, Target::Handle(handle), |scenario, place| {
        let place = place.ok_or(abi::ERROR_INVALID_ARGUMENT)?;
        body(place.device(scenario))
    })
}

/// A handle lookup: `find` picks the device's position or says what to
/// answer. The handle goes to `out`.
///
/// # Safety
/// `out` is NULL or valid for writing an `nvmlDevice_t`.
pub unsafe fn find_device(function: &str, find: &dyn Fn(&Scenario) -> Result<usize, Ret>, out: *mut Handle) -> Ret {
    call(function, false, Target::Find(find), |_, place| {
        let place = place.ok_or(abi::ERROR_INVALID_ARGUMENT)?;
        put(out, handle_of(place.position))
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
    // SAFETY: the caller's promise, passed on.
    unsafe { fake_dll::put_c_str(buffer, length as usize, text) }.map_err(|e| match e {
        fake_dll::StrError::TooSmall => abi::ERROR_INSUFFICIENT_SIZE,
        fake_dll::StrError::Null | fake_dll::StrError::TooLong => abi::ERROR_INVALID_ARGUMENT,
    })
}

/// The value of an optional scenario field, or NVML_ERROR_NOT_SUPPORTED.
pub fn supported<T>(field: Option<T>) -> Result<T, Ret> {
    field.ok_or(abi::ERROR_NOT_SUPPORTED)
}
