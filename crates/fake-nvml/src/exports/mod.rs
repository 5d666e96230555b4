//! The exported NVML functions, with the C signatures of nvml.h. Each body
//! goes through [`crate::state`], which checks init, the device handle,
//! `lost_after_calls`, `hang_ms` and `errors` (keyed by the function's own
//! name) before the body runs.
//!
//! The exports are `unsafe extern "C"`: nvml.h is their safety contract (every
//! pointer argument is NULL, which they reject, or valid for the documented
//! type), so they carry no `# Safety` sections of their own.
#![allow(non_snake_case, clippy::missing_safety_doc)]

/// Exports a query about one device under each of the names: `fn(device,
/// params...)`, where `|d|` binds the scenario's device for `body`.
macro_rules! device_fn {
    ($($name:ident)|+ => $params:tt |$d:ident| $body:expr) => {
        $( device_fn!(@one $name $params |$d| $body); )+
    };
    (@one $name:ident ($($arg:ident: $ty:ty),* $(,)?) |$d:ident| $body:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: $crate::abi::Handle, $($arg: $ty),*) -> $crate::abi::Ret {
            $crate::state::device(stringify!($name), device, |$d| $body)
        }
    };
}

/// Exports a system-wide query under each of the names; `|s|` binds the
/// scenario. `reload`: the scenario file is re-read first when it changed.
macro_rules! system_fn {
    ($reload:literal $($name:ident)|+ => $params:tt |$s:ident| $body:expr) => {
        $( system_fn!(@one $reload $name $params |$s| $body); )+
    };
    (@one $reload:literal $name:ident ($($arg:ident: $ty:ty),* $(,)?) |$s:ident| $body:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::abi::Ret {
            $crate::state::system(stringify!($name), $reload, |$s| $body)
        }
    };
}

/// Exports a handle lookup under each of the names: `fn(params..., device*)`;
/// `|s|` binds the scenario and `body` gives the device's position or the
/// code to answer.
macro_rules! lookup_fn {
    ($($name:ident)|+ => $params:tt |$s:ident| $body:expr) => {
        $( lookup_fn!(@one $name $params |$s| $body); )+
    };
    (@one $name:ident ($($arg:ident: $ty:ty),* $(,)?) |$s:ident| $body:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty,)* device: *mut $crate::abi::Handle) -> $crate::abi::Ret {
            $crate::state::find_device(stringify!($name), &|$s| $body, device)
        }
    };
}

mod device;
mod energy;
mod health;
mod processes;
mod system;
