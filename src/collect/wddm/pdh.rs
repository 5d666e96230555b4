//! The Windows calls behind the WDDM source, kept thin: PDH for the GPU
//! counters (English counter names, so a localized Windows reads the same),
//! D3DKMT for each adapter's LUID and PCI address, and where D3DKMT cannot
//! give the address (Wine 8.0), DXGI for each adapter's LUID and PCI ids.
//! What they return goes through the pure code in the parent module.
//!
//! Microsoft Learn: "Using the PDH Functions to Consume Counter Data"
//! (PdhOpenQuery, PdhAddEnglishCounter with a `*` instance, PdhCollectQueryData,
//! PdhGetRawCounterArray), D3DKMTEnumAdapters2 / D3DKMTQueryAdapterInfo
//! (KMTQAITYPE_ADAPTERADDRESS) in d3dkmthk.h, and CreateDXGIFactory1,
//! IDXGIFactory1::EnumAdapters1, IDXGIAdapter1::GetDesc1 (DXGI_ADAPTER_DESC1).

use super::{
    attribute, choose_adapter_table, match_devices, per_process, unknown_luid, Adapter, AdapterKey, AdapterTable,
    Counter, CounterSet, CounterValue, EngineClock, Instance, Luid, Reading,
};
use crate::collect::source::{Owner, Report, Round, Source};
use crate::snapshot::{Backend, BackendStatus, Device, GpuUsage, PciIds};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use windows::core::{s, w, Interface, GUID, HRESULT, HSTRING, PCSTR, PCWSTR};
use windows::Wdk::Graphics::Direct3D::{
    D3DKMT_ADAPTERADDRESS, D3DKMT_ADAPTERINFO, D3DKMT_CLOSEADAPTER, D3DKMT_ENUMADAPTERS2, D3DKMT_OPENADAPTERFROMLUID,
    D3DKMT_QUERYADAPTERINFO, KMTQAITYPE_ADAPTERADDRESS,
};
use windows::Win32::Foundation::{FILETIME, LUID, NTSTATUS};
use windows::Win32::Graphics::Dxgi::{IDXGIFactory1, DXGI_ADAPTER_FLAG_SOFTWARE, DXGI_ERROR_NOT_FOUND};
use windows::Win32::Storage::FileSystem::LocalFileTimeToFileTime;
use windows::Win32::System::LibraryLoader::{
    GetProcAddress, LoadLibraryExW, LoadLibraryW, LOAD_LIBRARY_SEARCH_SYSTEM32,
};
use windows::Win32::System::Performance::{
    PdhAddEnglishCounterW, PdhCloseQuery, PdhCollectQueryData, PdhGetRawCounterArrayW, PdhOpenQueryW, PDH_HCOUNTER,
    PDH_HQUERY, PDH_RAW_COUNTER_ITEM_W,
};

/// PDH_MORE_DATA: the buffer is too small; the size needed was written.
const PDH_MORE_DATA: u32 = 0x8000_07D2;
/// Most bytes one counter array may take (a few hundred processes with a
/// few dozen engines each fit in a few MiB).
const MAX_ARRAY_BYTES: u32 = 64 << 20;
/// The adapter table is read again, at most this often, while a reading
/// names a LUID it lacks (it failed, or an adapter was reset or added).
const ADAPTER_REREAD: Duration = Duration::from_secs(30);

struct Query {
    handle: PDH_HQUERY,
    counters: Vec<(CounterSet, Counter, PDH_HCOUNTER)>,
}

impl Drop for Query {
    fn drop(&mut self) {
        // SAFETY: the handle came from PdhOpenQueryW and is closed once.
        unsafe { PdhCloseQuery(self.handle) };
    }
}

fn open_query() -> Result<Query, String> {
    let mut handle = PDH_HQUERY::default();
    // SAFETY: a null data source means live data; handle is written on success.
    let rc = unsafe { PdhOpenQueryW(PCWSTR::null(), 0, &mut handle) };
    if rc != 0 {
        return Err(format!("PdhOpenQuery failed (0x{rc:08X})"));
    }
    let mut query = Query {
        handle,
        counters: Vec::new(),
    };
    for set in CounterSet::ALL {
        for &counter in set.counters() {
            let path = HSTRING::from(format!("\\{}(*)\\{}", set.english(), counter.english()));
            let mut c = PDH_HCOUNTER::default();
            // SAFETY: the query is open; path is a NUL-terminated wide string.
            let rc = unsafe { PdhAddEnglishCounterW(query.handle, &path, 0, &mut c) };
            // A counter this Windows does not have (Local Usage on old
            // builds) is left out; the fallback rules cover it.
            if rc == 0 {
                query.counters.push((set, counter, c));
            }
        }
    }
    if query.counters.is_empty() {
        return Err("no GPU counter set exists (Windows 10 1709 or later with a WDDM 2.x driver is needed)".into());
    }
    Ok(query)
}

/// Milliseconds between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
const FILETIME_EPOCH_MS: u64 = 11_644_473_600_000;

/// Every instance's raw value of one counter, as (instance name, value),
/// and when PDH collected them (ms since the Unix epoch).
type CounterArray = (Vec<(String, u64)>, Option<u64>);

fn read_counter(counter: PDH_HCOUNTER) -> Result<CounterArray, String> {
    let (mut size, mut count) = (0u32, 0u32);
    // SAFETY: a null buffer asks for the size.
    let rc = unsafe { PdhGetRawCounterArrayW(counter, &mut size, &mut count, None) };
    if rc != PDH_MORE_DATA || size == 0 {
        return match rc {
            0 => Ok((Vec::new(), None)),
            _ => Err(format!("PdhGetRawCounterArray failed (0x{rc:08X})")),
        };
    }
    if size > MAX_ARRAY_BYTES {
        return Err(format!("a counter array of {size} bytes was refused"));
    }
    // u64 elements keep the item structs (pointers, i64) aligned.
    let mut buf = vec![0u64; (size as usize).div_ceil(8)];
    let items = buf.as_mut_ptr().cast::<PDH_RAW_COUNTER_ITEM_W>();
    // SAFETY: buf holds `size` bytes, as PDH asked for.
    let rc = unsafe { PdhGetRawCounterArrayW(counter, &mut size, &mut count, Some(items)) };
    if rc != 0 {
        return Err(format!("PdhGetRawCounterArray failed (0x{rc:08X})"));
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut collected_ms = None;
    for i in 0..count as usize {
        // SAFETY: PDH wrote `count` items at the start of buf; their names
        // point into the rest of it.
        let item = unsafe { &*items.add(i) };
        if item.RawValue.CStatus > 1 {
            continue; // PDH_CSTATUS_VALID_DATA = 0, PDH_CSTATUS_NEW_DATA = 1
        }
        // SAFETY: szName is a NUL-terminated wide string inside buf.
        let Ok(name) = (unsafe { item.szName.to_string() }) else {
            continue;
        };
        if collected_ms.is_none() {
            // PDH_RAW_COUNTER's TimeStamp is local time.
            let mut utc = FILETIME::default();
            // SAFETY: two FILETIMEs, read and written.
            if unsafe { LocalFileTimeToFileTime(&item.RawValue.TimeStamp, &mut utc) }.is_ok() {
                let ticks = (u64::from(utc.dwHighDateTime) << 32) | u64::from(utc.dwLowDateTime);
                collected_ms = Some((ticks / 10_000).saturating_sub(FILETIME_EPOCH_MS));
            }
        }
        out.push((name, item.RawValue.FirstValue.max(0) as u64));
    }
    Ok((out, collected_ms))
}

/// gdi32's D3DKMT entry points, looked up by name at run time: an import
/// the running Windows lacks would stop the whole program before `main`,
/// and Wine 8.0 has neither D3DKMTEnumAdapters2 nor D3DKMTQueryAdapterInfo
/// (its GetProcAddress answers null for both).
struct D3dkmt {
    enum_adapters2: Option<unsafe extern "system" fn(*mut D3DKMT_ENUMADAPTERS2) -> NTSTATUS>,
    open_from_luid: Option<unsafe extern "system" fn(*mut D3DKMT_OPENADAPTERFROMLUID) -> NTSTATUS>,
    query_info: Option<unsafe extern "system" fn(*mut D3DKMT_QUERYADAPTERINFO) -> NTSTATUS>,
    close: Option<unsafe extern "system" fn(*const D3DKMT_CLOSEADAPTER) -> NTSTATUS>,
}

impl D3dkmt {
    fn load() -> D3dkmt {
        // System32 only: gdi32 is a known DLL, never one beside the .exe.
        // SAFETY: a system library, loaded for the life of the process.
        let gdi32 = unsafe { LoadLibraryExW(w!("gdi32.dll"), None, LOAD_LIBRARY_SEARCH_SYSTEM32) }.ok();
        let find = |name: PCSTR| {
            // SAFETY: a NUL-terminated name in a module that stays loaded.
            gdi32.and_then(|m| unsafe { GetProcAddress(m, name) })
        };
        // SAFETY: each name is cast to its signature in d3dkmthk.h (the
        // windows crate's declarations of the same functions).
        unsafe {
            D3dkmt {
                enum_adapters2: find(s!("D3DKMTEnumAdapters2")).map(|f| std::mem::transmute(f)),
                open_from_luid: find(s!("D3DKMTOpenAdapterFromLuid")).map(|f| std::mem::transmute(f)),
                query_info: find(s!("D3DKMTQueryAdapterInfo")).map(|f| std::mem::transmute(f)),
                close: find(s!("D3DKMTCloseAdapter")).map(|f| std::mem::transmute(f)),
            }
        }
    }

    /// Each adapter's LUID and PCI address, and how they were found.
    /// D3DKMTEnumAdapters2 lists every adapter; without it, each LUID the
    /// counters name is opened with D3DKMTOpenAdapterFromLuid. Software
    /// adapters have no address and are left out.
    fn addresses(&self, luids: &[Luid]) -> Result<(Vec<Adapter>, &'static str), String> {
        let Some(query_info) = self.query_info else {
            return Err("gdi32 has no D3DKMTQueryAdapterInfo, so no adapter's PCI address is known".into());
        };
        let (handles, how) = match (self.enum_adapters2, self.open_from_luid) {
            (Some(enum_adapters2), _) => (enumerate(enum_adapters2)?, "D3DKMTEnumAdapters2"),
            (None, Some(open)) => (
                open_each(open, luids),
                "D3DKMTOpenAdapterFromLuid (gdi32 has no D3DKMTEnumAdapters2)",
            ),
            (None, None) => return Err("gdi32 has neither D3DKMTEnumAdapters2 nor D3DKMTOpenAdapterFromLuid".into()),
        };
        let mut out = Vec::new();
        for (luid, handle) in handles {
            let mut address = D3DKMT_ADAPTERADDRESS::default();
            let mut q = D3DKMT_QUERYADAPTERINFO {
                hAdapter: handle,
                Type: KMTQAITYPE_ADAPTERADDRESS,
                pPrivateDriverData: (&mut address as *mut D3DKMT_ADAPTERADDRESS).cast(),
                PrivateDriverDataSize: std::mem::size_of::<D3DKMT_ADAPTERADDRESS>() as u32,
            };
            // SAFETY: the adapter handle is open; the data pointer is valid for its size.
            if unsafe { query_info(&mut q) }.is_ok() {
                out.push(Adapter::at(
                    luid,
                    address.BusNumber,
                    address.DeviceNumber,
                    address.FunctionNumber,
                ));
            }
            if let Some(close) = self.close {
                let close_adapter = D3DKMT_CLOSEADAPTER { hAdapter: handle };
                // SAFETY: closes a handle D3DKMT opened, once.
                unsafe {
                    let _ = close(&close_adapter);
                }
            }
        }
        Ok((out, how))
    }
}

/// The adapters a table read holds; none before one is read or when it failed.
fn known(table: &Option<(AdapterTable, Instant)>) -> &[Adapter] {
    match table {
        Some((Ok((a, _)), _)) => a,
        _ => &[],
    }
}

fn luid_of(l: LUID) -> Luid {
    Luid {
        high: l.HighPart as u32,
        low: l.LowPart,
    }
}

/// Every adapter, opened, as (LUID, handle).
fn enumerate(
    enum_adapters2: unsafe extern "system" fn(*mut D3DKMT_ENUMADAPTERS2) -> NTSTATUS,
) -> Result<Vec<(Luid, u32)>, String> {
    let mut e = D3DKMT_ENUMADAPTERS2::default();
    // SAFETY: a null pAdapters asks for the count.
    let status = unsafe { enum_adapters2(&mut e) };
    if status.is_err() {
        return Err(format!("D3DKMTEnumAdapters2 failed (0x{:08X})", status.0));
    }
    let mut infos = vec![D3DKMT_ADAPTERINFO::default(); e.NumAdapters.min(64) as usize];
    e.NumAdapters = infos.len() as u32;
    e.pAdapters = infos.as_mut_ptr();
    // SAFETY: pAdapters has room for NumAdapters entries.
    let status = unsafe { enum_adapters2(&mut e) };
    if status.is_err() {
        return Err(format!("D3DKMTEnumAdapters2 failed (0x{:08X})", status.0));
    }
    Ok(infos
        .iter()
        .take(e.NumAdapters as usize)
        .map(|i| (luid_of(i.AdapterLuid), i.hAdapter))
        .collect())
}

/// The adapters of these LUIDs that open, as (LUID, handle).
fn open_each(
    open: unsafe extern "system" fn(*mut D3DKMT_OPENADAPTERFROMLUID) -> NTSTATUS,
    luids: &[Luid],
) -> Vec<(Luid, u32)> {
    let mut out = Vec::new();
    for &luid in luids {
        let mut o = D3DKMT_OPENADAPTERFROMLUID {
            AdapterLuid: LUID {
                LowPart: luid.low,
                HighPart: luid.high as i32,
            },
            hAdapter: 0,
        };
        // SAFETY: o is a valid D3DKMT_OPENADAPTERFROMLUID; hAdapter is written on success.
        if unsafe { open(&mut o) }.is_ok() {
            out.push((luid, o.hAdapter));
        }
    }
    out
}

/// Most adapters DXGI is asked for (a machine has a handful).
const MAX_DXGI_ADAPTERS: u32 = 64;

/// CreateDXGIFactory1's signature (dxgi.h).
type CreateFactory = unsafe extern "system" fn(*const GUID, *mut *mut std::ffi::c_void) -> HRESULT;

/// Every hardware adapter DXGI lists, by LUID with its PCI ids
/// (DXGI_ADAPTER_DESC1's VendorId, DeviceId, SubSysId; Microsoft Learn,
/// IDXGIAdapter1::GetDesc1): what is known of an adapter where D3DKMT
/// gives no PCI address. Software adapters (DXGI_ADAPTER_FLAG_SOFTWARE,
/// the Microsoft Basic Render Driver) are left out.
///
/// dxgi.dll is looked up the ordinary way, not in System32 only, so a
/// dxgi.dll beside the .exe is the one loaded (as pdh.dll, an import, is):
/// the Wine tests put their stand-in there. It is loaded only when D3DKMT
/// failed (Wine 8.0; Windows 10 and later have every D3DKMT call used).
fn dxgi_adapters() -> Result<Vec<Adapter>, String> {
    // SAFETY: loads a library for the life of the process; nothing else.
    let dxgi = unsafe { LoadLibraryW(w!("dxgi.dll")) }.map_err(|e| format!("dxgi.dll does not load ({e})"))?;
    // SAFETY: a NUL-terminated name in a module that stays loaded.
    let create =
        unsafe { GetProcAddress(dxgi, s!("CreateDXGIFactory1")) }.ok_or("dxgi.dll has no CreateDXGIFactory1")?;
    // SAFETY: the export's signature is dxgi.h's CreateDXGIFactory1.
    let create: CreateFactory = unsafe { std::mem::transmute(create) };
    let mut raw = std::ptr::null_mut();
    // SAFETY: asks for an IDXGIFactory1, written to raw on success.
    let hr = unsafe { create(&IDXGIFactory1::IID, &mut raw) };
    if hr.is_err() || raw.is_null() {
        return Err(format!("CreateDXGIFactory1 failed (0x{:08X})", hr.0));
    }
    // SAFETY: an IDXGIFactory1 with one reference, which this takes (and
    // releases when dropped).
    let factory = unsafe { IDXGIFactory1::from_raw(raw) };
    let mut out = Vec::new();
    for i in 0..MAX_DXGI_ADAPTERS {
        // SAFETY: the factory is alive; past the last adapter it answers
        // DXGI_ERROR_NOT_FOUND.
        let adapter = match unsafe { factory.EnumAdapters1(i) } {
            Ok(a) => a,
            Err(e) if e.code() == DXGI_ERROR_NOT_FOUND => break,
            Err(e) => return Err(format!("IDXGIFactory1::EnumAdapters1 failed (0x{:08X})", e.code().0)),
        };
        // SAFETY: the adapter is alive; GetDesc1 writes one DXGI_ADAPTER_DESC1.
        let Ok(desc) = (unsafe { adapter.GetDesc1() }) else {
            continue;
        };
        if desc.Flags & DXGI_ADAPTER_FLAG_SOFTWARE.0 as u32 != 0 {
            continue;
        }
        out.push(Adapter {
            luid: luid_of(desc.AdapterLuid),
            key: AdapterKey::Ids(PciIds {
                // PCI ids are 16 bits; DXGI holds them in UINTs.
                vendor: desc.VendorId as u16,
                device: desc.DeviceId as u16,
                subsystem: desc.SubSysId,
            }),
        });
    }
    // A DXGI that lists no hardware adapter gives no table: the backend
    // line says so rather than naming DXGI the method. (Wine 8.0's own
    // dxgi.dll without a display already fails CreateDXGIFactory1, with
    // DXGI_ERROR_UNSUPPORTED.)
    if out.is_empty() {
        return Err("IDXGIFactory1::EnumAdapters1 lists no hardware adapter".into());
    }
    Ok(out)
}

/// The adapter table: D3DKMT's PCI addresses, else DXGI's PCI ids.
fn adapter_table(d3dkmt: &D3dkmt, luids: &[Luid]) -> AdapterTable {
    choose_adapter_table(d3dkmt.addresses(luids), dxgi_adapters)
}

/// What one sample of the native source gives the collector.
#[derive(Debug, Default)]
pub struct SourceSample {
    pub devices: Vec<Device>,
    pub usage: Vec<(u32, GpuUsage)>,
    pub notes: BTreeMap<u32, Vec<String>>,
}

/// The WDDM source on Windows itself.
pub struct WddmSource {
    query: Result<Query, String>,
    clock: EngineClock,
    d3dkmt: D3dkmt,
    /// The adapter table and when it was read; None until a reading names
    /// an adapter.
    addresses: Option<(AdapterTable, Instant)>,
}

/// Windows counters, after the other sources, whose devices they are
/// matched to by LUID.
impl Source for WddmSource {
    /// A first Running Time reading, so the next sample has engine %.
    fn prime(&mut self) {
        drop(self.sample(&mut [], 0));
    }

    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        let index_base = round.next_index();
        let (backend, sample) = self.sample(&mut round.devices, index_base);
        let mut reading = Report {
            devices: sample.devices,
            usage: sample
                .usage
                .into_iter()
                .map(|(pid, u)| (Owner::Local(pid), u))
                .collect(),
            notes: sample.notes,
        };
        reading.retain_device(round.only);
        (backend, reading)
    }
}

impl WddmSource {
    pub fn open() -> WddmSource {
        WddmSource {
            query: open_query(),
            clock: EngineClock::default(),
            d3dkmt: D3dkmt::load(),
            addresses: None,
        }
    }

    pub fn sample(&mut self, existing: &mut [Device], index_base: u32) -> (Backend, SourceSample) {
        let backend = |status, detail: String| Backend {
            name: "wddm".into(),
            status,
            detail,
        };
        let query = match &self.query {
            Ok(q) => q,
            Err(e) => return (backend(BackendStatus::Unavailable, e.clone()), SourceSample::default()),
        };
        // SAFETY: the query is open.
        let rc = unsafe { PdhCollectQueryData(query.handle) };
        if rc != 0 {
            let detail = format!("PdhCollectQueryData failed (0x{rc:08X})");
            return (backend(BackendStatus::Error, detail), SourceSample::default());
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let mut reading = Reading::new(now_ms);
        // Engine busy is Running Time over the time between two
        // collections: PDH's own stamp of each, not our clock after the
        // call returned (which adds the call's latency to one window).
        let mut collected_ms = None;
        let mut errors = Vec::new();
        for &(set, counter, handle) in &query.counters {
            match read_counter(handle) {
                Ok((values, stamp)) => {
                    collected_ms = collected_ms.or(stamp);
                    for (name, value) in values {
                        let Some(instance) = super::parse_instance(&name) else {
                            continue;
                        };
                        reading.add(counter_value(set, counter, instance, value));
                    }
                }
                Err(e) => errors.push(format!("{}\\{}: {e}", set.english(), counter.english())),
            }
        }
        reading.at_ms = collected_ms.unwrap_or(now_ms);
        if unknown_luid(&reading, known(&self.addresses))
            && self
                .addresses
                .as_ref()
                .is_none_or(|(_, at)| at.elapsed() >= ADAPTER_REREAD)
        {
            self.addresses = Some((adapter_table(&self.d3dkmt, &reading.luids()), Instant::now()));
        }
        let matched = match_devices(existing, known(&self.addresses));
        let engines = self.clock.percents(&reading);
        let complete = errors.is_empty() && reading.dropped == 0;
        let mut attributed = attribute(
            &reading,
            &engines,
            &matched.luids,
            existing,
            index_base,
            "wddm",
            complete,
        );
        attributed.explain(&matched);
        let (usage, notes) = per_process(attributed.contexts);
        let out = SourceSample {
            devices: attributed.devices,
            usage,
            notes,
        };
        let mut detail = format!(
            "Windows GPU counters: {} process entr{} (VRAM = Local Usage, spill = Non Local Usage, paged = an estimate of non-residency)",
            out.usage.len(),
            if out.usage.len() == 1 { "y" } else { "ies" }
        );
        match &self.addresses {
            Some((Ok((_, how)), _)) => detail.push_str(&format!("; adapters by LUID from {how}")),
            Some((Err(e), _)) => detail.push_str(&format!("; adapters not matched to NVML devices: {e}")),
            None => {}
        }
        let mut why: Vec<&String> = matched.ambiguous.values().collect();
        why.sort();
        why.dedup();
        for w in why {
            detail.push_str("; ");
            detail.push_str(w);
        }
        if !complete {
            detail.push_str("; the process list is incomplete");
        }
        if reading.dropped > 0 {
            detail.push_str(&format!(
                "; {} counter values dropped (more than {} instances)",
                reading.dropped,
                super::MAX_INSTANCES
            ));
        }
        for e in &errors {
            detail.push_str("; ");
            detail.push_str(e);
        }
        (backend(BackendStatus::Ok, detail), out)
    }
}

fn counter_value(set: CounterSet, counter: Counter, instance: Instance, value: u64) -> CounterValue {
    CounterValue {
        set,
        counter,
        instance,
        value,
    }
}
