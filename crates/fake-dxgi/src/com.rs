//! The COM objects: an IDXGIFactory1 holding the scenario's adapters and
//! the IDXGIAdapter1s it hands out. Each is a heap object whose first field
//! points to its vtable (the COM layout), counted by AddRef/Release and
//! freed at zero. Only what gputaskman calls does anything: QueryInterface,
//! AddRef, Release, EnumAdapters1, IsCurrent and GetDesc1; every other slot
//! answers E_NOTIMPL.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{self, AdapterDesc1, Guid, HResult};
use crate::scenario::{Scenario, SCENARIO_ENV};

type Raw = *mut c_void;
/// A slot gputaskman never calls. x64 has one calling convention, in which
/// the caller owns its arguments, so one stub serves slots of any arity
/// (32-bit stdcall would not allow it: this DLL is built for x86-64 only).
type Unused = unsafe extern "system" fn(Raw) -> HResult;

unsafe extern "system" fn not_implemented(_this: Raw) -> HResult {
    abi::E_NOTIMPL
}

/// The vtable of IDXGIFactory1, in dxgi.h's order.
#[repr(C)]
struct FactoryVtbl {
    query_interface: unsafe extern "system" fn(Raw, *const Guid, *mut Raw) -> HResult,
    add_ref: unsafe extern "system" fn(Raw) -> u32,
    release: unsafe extern "system" fn(Raw) -> u32,
    /// IDXGIObject: SetPrivateData, SetPrivateDataInterface,
    /// GetPrivateData, GetParent.
    object: [Unused; 4],
    /// IDXGIFactory: EnumAdapters, MakeWindowAssociation,
    /// GetWindowAssociation, CreateSwapChain, CreateSoftwareAdapter.
    factory: [Unused; 5],
    enum_adapters1: unsafe extern "system" fn(Raw, u32, *mut Raw) -> HResult,
    is_current: unsafe extern "system" fn(Raw) -> i32,
}

/// The vtable of IDXGIAdapter1, in dxgi.h's order.
#[repr(C)]
struct AdapterVtbl {
    query_interface: unsafe extern "system" fn(Raw, *const Guid, *mut Raw) -> HResult,
    add_ref: unsafe extern "system" fn(Raw) -> u32,
    release: unsafe extern "system" fn(Raw) -> u32,
    object: [Unused; 4],
    /// IDXGIAdapter: EnumOutputs, GetDesc, CheckInterfaceSupport.
    adapter: [Unused; 3],
    get_desc1: unsafe extern "system" fn(Raw, *mut AdapterDesc1) -> HResult,
}

/// What a vtable's object answers QueryInterface for.
trait Interfaces: 'static {
    const IIDS: &'static [Guid];
}

impl Interfaces for FactoryVtbl {
    const IIDS: &'static [Guid] = &[
        abi::IID_IUNKNOWN,
        abi::IID_IDXGIOBJECT,
        abi::IID_IDXGIFACTORY,
        abi::IID_IDXGIFACTORY1,
    ];
}

impl Interfaces for AdapterVtbl {
    const IIDS: &'static [Guid] = &[
        abi::IID_IUNKNOWN,
        abi::IID_IDXGIOBJECT,
        abi::IID_IDXGIADAPTER,
        abi::IID_IDXGIADAPTER1,
    ];
}

/// A COM object: its vtable first, then its count and data.
#[repr(C)]
struct Object<V: 'static, T> {
    vtbl: &'static V,
    refs: AtomicU32,
    data: T,
}

type Factory = Object<FactoryVtbl, Vec<AdapterDesc1>>;
type Adapter = Object<AdapterVtbl, AdapterDesc1>;

static FACTORY_VTBL: FactoryVtbl = FactoryVtbl {
    query_interface: query_interface::<FactoryVtbl, Vec<AdapterDesc1>>,
    add_ref: add_ref::<FactoryVtbl, Vec<AdapterDesc1>>,
    release: release::<FactoryVtbl, Vec<AdapterDesc1>>,
    object: [not_implemented; 4],
    factory: [not_implemented; 5],
    enum_adapters1,
    is_current,
};

static ADAPTER_VTBL: AdapterVtbl = AdapterVtbl {
    query_interface: query_interface::<AdapterVtbl, AdapterDesc1>,
    add_ref: add_ref::<AdapterVtbl, AdapterDesc1>,
    release: release::<AdapterVtbl, AdapterDesc1>,
    object: [not_implemented; 4],
    adapter: [not_implemented; 3],
    get_desc1,
};

/// A new object with one reference, as a COM pointer.
fn new<V: 'static, T>(vtbl: &'static V, data: T) -> Raw {
    Box::into_raw(Box::new(Object {
        vtbl,
        refs: AtomicU32::new(1),
        data,
    }))
    .cast()
}

/// # Safety
/// `this` is an object of this type; `iid` and `out` are null or valid.
unsafe extern "system" fn query_interface<V: Interfaces, T>(this: Raw, iid: *const Guid, out: *mut Raw) -> HResult {
    if iid.is_null() || out.is_null() {
        return abi::E_INVALIDARG;
    }
    // SAFETY: both checked non-null; the caller gave room for one pointer.
    unsafe {
        if V::IIDS.contains(&*iid) {
            add_ref::<V, T>(this);
            *out = this;
            abi::S_OK
        } else {
            *out = null_mut();
            abi::E_NOINTERFACE
        }
    }
}

/// # Safety
/// `this` is a live object of this type.
unsafe extern "system" fn add_ref<V: 'static, T>(this: Raw) -> u32 {
    // SAFETY: a live object.
    let obj = unsafe { &*this.cast::<Object<V, T>>() };
    obj.refs.fetch_add(1, Ordering::AcqRel).saturating_add(1)
}

/// # Safety
/// `this` is a live object of this type; it is freed at the last release.
unsafe extern "system" fn release<V: 'static, T>(this: Raw) -> u32 {
    // SAFETY: a live object.
    let obj = unsafe { &*this.cast::<Object<V, T>>() };
    // A count at zero stays there (a release too many frees nothing twice).
    match obj
        .refs
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
    {
        Ok(1) => {
            // SAFETY: the last reference, made by Box::into_raw in `new`.
            drop(unsafe { Box::from_raw(this.cast::<Object<V, T>>()) });
            0
        }
        Ok(n) => n - 1,
        Err(_) => 0,
    }
}

/// IDXGIFactory1::EnumAdapters1: the scenario's adapter `index`, a new
/// IDXGIAdapter1; DXGI_ERROR_NOT_FOUND past the last.
///
/// # Safety
/// `this` is a live factory; `out` is null or valid for one write.
unsafe extern "system" fn enum_adapters1(this: Raw, index: u32, out: *mut Raw) -> HResult {
    if out.is_null() {
        return abi::E_INVALIDARG;
    }
    // SAFETY: a live factory; out checked non-null.
    unsafe {
        let factory = &*this.cast::<Factory>();
        match factory.data.get(index as usize) {
            Some(desc) => {
                *out = new(&ADAPTER_VTBL, *desc);
                abi::S_OK
            }
            None => {
                *out = null_mut();
                abi::DXGI_ERROR_NOT_FOUND
            }
        }
    }
}

/// IDXGIFactory1::IsCurrent: the adapter list never changes (TRUE).
unsafe extern "system" fn is_current(_this: Raw) -> i32 {
    1
}

/// IDXGIAdapter1::GetDesc1.
///
/// # Safety
/// `this` is a live adapter; `desc` is null or valid for one write.
unsafe extern "system" fn get_desc1(this: Raw, desc: *mut AdapterDesc1) -> HResult {
    if desc.is_null() {
        return abi::E_INVALIDARG;
    }
    // SAFETY: a live adapter; desc checked non-null.
    unsafe { *desc = (*this.cast::<Adapter>()).data };
    abi::S_OK
}

/// One line on stderr; a closed stderr is not worth a panic.
use fake_dll::warn;

/// CreateDXGIFactory1: an IDXGIFactory1 (or one of its bases) over the
/// adapters of the scenario FAKE_DXGI_SCENARIO names. Without one, this
/// machine has no DXGI: DXGI_ERROR_UNSUPPORTED. A panic becomes E_FAIL
/// instead of unwinding into C.
///
/// # Safety
/// `riid` is null or a valid GUID; `out` is null or valid for one write.
#[no_mangle]
pub unsafe extern "system" fn CreateDXGIFactory1(riid: *const Guid, out: *mut Raw) -> HResult {
    let body = || {
        if riid.is_null() || out.is_null() {
            return abi::E_INVALIDARG;
        }
        // SAFETY: both checked non-null.
        unsafe {
            *out = null_mut();
            if !FactoryVtbl::IIDS.contains(&*riid) {
                return abi::E_NOINTERFACE;
            }
        }
        let Some(path) = std::env::var_os(SCENARIO_ENV) else {
            return abi::DXGI_ERROR_UNSUPPORTED;
        };
        let scenario = match Scenario::load(path.as_ref()) {
            Ok(s) => s,
            Err(e) => {
                warn(&e);
                return abi::DXGI_ERROR_UNSUPPORTED;
            }
        };
        let adapters: Vec<AdapterDesc1> = scenario.adapters.iter().map(|a| a.desc()).collect();
        // SAFETY: checked non-null above.
        unsafe { *out = new(&FACTORY_VTBL, adapters) };
        abi::S_OK
    };
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(abi::E_FAIL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factory_lists_the_scenario_s_adapters_then_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dxgi.json");
        std::fs::write(
            &path,
            r#"{"adapters": [
                {"description": "NVIDIA GeForce RTX 4080", "vendor_id": 4318, "device_id": 9988,
                 "subsys_id": 385945822, "luid": {"high": 0, "low": 57760}, "dedicated_video_memory": 17171480576},
                {"description": "Microsoft Basic Render Driver", "vendor_id": 5140, "device_id": 140,
                 "luid": {"high": 0, "low": 9}, "software": true}
            ]}"#,
        )
        .unwrap();
        // SAFETY (edition 2021: set_var is safe): the only test reading it.
        std::env::set_var(SCENARIO_ENV, &path);
        let mut raw: Raw = null_mut();
        // SAFETY: a valid IID and out pointer.
        assert_eq!(
            unsafe { CreateDXGIFactory1(&abi::IID_IDXGIFACTORY1, &mut raw) },
            abi::S_OK
        );
        assert!(!raw.is_null());
        // SAFETY: raw is the factory just made; its first field is the vtable.
        unsafe {
            let vtbl = *raw.cast::<&FactoryVtbl>();
            let mut adapter: Raw = null_mut();
            assert_eq!((vtbl.enum_adapters1)(raw, 0, &mut adapter), abi::S_OK);
            let avtbl = *adapter.cast::<&AdapterVtbl>();
            let mut desc: AdapterDesc1 = std::mem::zeroed();
            assert_eq!((avtbl.get_desc1)(adapter, &mut desc), abi::S_OK);
            assert_eq!(
                (desc.vendor_id, desc.device_id, desc.sub_sys_id),
                (0x10DE, 0x2704, 0x1701_10DE)
            );
            assert_eq!((desc.adapter_luid.high_part, desc.adapter_luid.low_part), (0, 0xE1A0));
            assert_eq!(desc.dedicated_video_memory, 17_171_480_576);
            assert_eq!(desc.flags, 0);
            assert_eq!(
                String::from_utf16_lossy(&desc.description[..23]),
                "NVIDIA GeForce RTX 4080"
            );
            let mut same: Raw = null_mut();
            assert_eq!(
                (avtbl.query_interface)(adapter, &abi::IID_IDXGIADAPTER1, &mut same),
                abi::S_OK
            );
            assert_eq!(same, adapter);
            assert_eq!(
                (avtbl.query_interface)(adapter, &abi::IID_IDXGIFACTORY1, &mut same),
                abi::E_NOINTERFACE
            );
            assert!(same.is_null());
            assert_eq!((avtbl.object[3])(adapter), abi::E_NOTIMPL, "GetParent");
            assert_eq!((avtbl.release)(adapter), 1);
            assert_eq!((avtbl.release)(adapter), 0);

            assert_eq!((vtbl.enum_adapters1)(raw, 1, &mut adapter), abi::S_OK);
            let avtbl = *adapter.cast::<&AdapterVtbl>();
            assert_eq!((avtbl.get_desc1)(adapter, &mut desc), abi::S_OK);
            assert_eq!(desc.flags, abi::ADAPTER_FLAG_SOFTWARE);
            (avtbl.release)(adapter);
            assert_eq!((vtbl.enum_adapters1)(raw, 2, &mut adapter), abi::DXGI_ERROR_NOT_FOUND);
            assert!(adapter.is_null());
            assert_eq!((vtbl.enum_adapters1)(raw, 0, null_mut()), abi::E_INVALIDARG);
            assert_eq!((vtbl.is_current)(raw), 1);
            assert_eq!((vtbl.release)(raw), 0);
        }
        // An interface the factory is not: no object.
        let mut other: Raw = null_mut();
        // SAFETY: valid pointers.
        assert_eq!(
            unsafe { CreateDXGIFactory1(&abi::IID_IDXGIADAPTER, &mut other) },
            abi::E_NOINTERFACE
        );
        assert!(other.is_null());
        std::env::remove_var(SCENARIO_ENV);
        // SAFETY: valid pointers.
        assert_eq!(
            unsafe { CreateDXGIFactory1(&abi::IID_IDXGIFACTORY1, &mut other) },
            abi::DXGI_ERROR_UNSUPPORTED,
            "no scenario, no DXGI"
        );
    }
}
