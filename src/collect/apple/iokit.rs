//! The IOKit registry walk (macOS only): every `IOAccelerator` service,
//! its properties, and its children in the service plane, copied into the
//! plain [`Value`] tree that the rest of the module reads.
//!
//! User clients (`AGXDeviceUserClient`) are not registered services, so
//! `IOServiceGetMatchingServices` on their class finds none: they are found
//! as children of the accelerator in the service plane (noted by another
//! monitor that probed it on an M3 Max: 0 matched, 142 as children). The
//! walk allocates in proportion to what the registry holds, within the
//! bounds below.

use super::{Accelerator, Apple, Entry, Footprints, Measure, Registry, Sample, Unmeasured, Value, Wanted, Window};
use crate::collect::source::{Owner, Report, Round, Source};
use crate::procs::ProcInfo;
use crate::snapshot::{Backend, Process, ProcessKind};
use core_foundation::array::CFArray;
use core_foundation::base::{CFType, TCFType};
use core_foundation::boolean::CFBoolean;
use core_foundation::data::CFData;
use core_foundation::dictionary::CFDictionary;
use core_foundation::number::CFNumber;
use core_foundation::string::CFString;
use io_kit_sys::keys::kIOServicePlane;
use io_kit_sys::types::{io_iterator_t, io_object_t};
use io_kit_sys::{
    IOIteratorNext, IOObjectGetClass, IOObjectRelease, IORegistryEntryCreateCFProperties,
    IORegistryEntryGetChildIterator, IORegistryEntryGetRegistryEntryID, IOServiceGetMatchingServices,
    IOServiceMatching,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_void, CStr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bounds on what one read copies: nesting, entries per array or
/// dictionary, bytes per string or data, children per accelerator.
const MAX_DEPTH: usize = 8;
const MAX_ITEMS: usize = 4096;
const MAX_BYTES: usize = 64 * 1024;
const MAX_CHILDREN: usize = 8192;

/// `kIOMainPortDefault`: the null port means the default main port.
const MAIN_PORT_DEFAULT: u32 = 0;

/// An io_object_t released when dropped.
struct Object(io_object_t);

impl Drop for Object {
    fn drop(&mut self) {
        // SAFETY: the object came from IOKit with a reference we own.
        unsafe { IOObjectRelease(self.0) };
    }
}

impl Object {
    fn next(iterator: &Object) -> Option<Object> {
        // SAFETY: `iterator` is a live iterator; 0 means the end.
        let o = unsafe { IOIteratorNext(iterator.0) };
        (o != 0).then_some(Object(o))
    }
}

/// Reads every accelerator and its clients.
pub fn read() -> Registry {
    let mut iterator: io_iterator_t = 0;
    // SAFETY: IOServiceMatching returns a dictionary that
    // IOServiceGetMatchingServices consumes (one reference), whatever it
    // returns; `iterator` is written on success.
    let kr = unsafe {
        let matching = IOServiceMatching(c"IOAccelerator".as_ptr());
        if matching.is_null() {
            return Err("IOServiceMatching(\"IOAccelerator\") returned nothing".into());
        }
        IOServiceGetMatchingServices(MAIN_PORT_DEFAULT, matching as _, &mut iterator)
    };
    if kr != 0 {
        return Err(format!("IOServiceGetMatchingServices(IOAccelerator) failed: {kr:#x}"));
    }
    let iterator = Object(iterator);
    let mut out = Vec::new();
    while let Some(service) = Object::next(&iterator) {
        let entry = entry(&service);
        let clients = children(&service);
        out.push(Accelerator {
            service: entry,
            clients,
        });
        if out.len() >= 64 {
            break;
        }
    }
    Ok(out)
}

fn children(service: &Object) -> Result<Vec<Entry>, String> {
    let mut iterator: io_iterator_t = 0;
    // SAFETY: a live service; the plane name is a static C string.
    let kr = unsafe { IORegistryEntryGetChildIterator(service.0, kIOServicePlane as *mut _, &mut iterator) };
    if kr != 0 {
        return Err(format!("IORegistryEntryGetChildIterator failed: {kr:#x}"));
    }
    let iterator = Object(iterator);
    let mut out = Vec::new();
    while let Some(child) = Object::next(&iterator) {
        if out.len() >= MAX_CHILDREN {
            return Err(format!("more than {MAX_CHILDREN} children: the rest were not read"));
        }
        out.push(entry(&child));
    }
    Ok(out)
}

fn entry(o: &Object) -> Entry {
    let mut class = [0 as std::ffi::c_char; 128];
    let mut id: u64 = 0;
    // SAFETY: io_name_t is 128 bytes, NUL-terminated by IOKit.
    let class = unsafe {
        if IOObjectGetClass(o.0, class.as_mut_ptr()) == 0 {
            CStr::from_ptr(class.as_ptr()).to_string_lossy().into_owned()
        } else {
            String::from("?")
        }
    };
    // SAFETY: a live entry; `id` is written on success.
    let kr = unsafe { IORegistryEntryGetRegistryEntryID(o.0, &mut id) };
    Entry {
        class,
        // Unchecked, a failure would leave 0: every such client one.
        id: if kr == 0 {
            Ok(id)
        } else {
            Err(format!("IORegistryEntryGetRegistryEntryID failed: {kr:#x}"))
        },
        properties: properties(o),
    }
}

fn properties(o: &Object) -> Result<super::Dict, String> {
    let mut dict = std::ptr::null_mut();
    // SAFETY: on success `dict` holds a dictionary we own (create rule).
    let kr = unsafe { IORegistryEntryCreateCFProperties(o.0, &mut dict, std::ptr::null(), 0) };
    if kr != 0 || dict.is_null() {
        return Err(format!("IORegistryEntryCreateCFProperties failed: {kr:#x}"));
    }
    // SAFETY: owned reference from the call above.
    let dict = unsafe { CFType::wrap_under_create_rule(dict as *const c_void) };
    match value(&dict, 0) {
        Some(Value::Dict(d)) => Ok(d),
        _ => Err("the properties are not a dictionary".into()),
    }
}

/// A CFType as a [`Value`]; None for types the registry should not hold
/// here (dates, nested objects) and for what lies past the bounds.
fn value(v: &CFType, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(s) = v.downcast::<CFString>() {
        let s = s.to_string();
        return Some(Value::Str(s.chars().take(MAX_BYTES).collect()));
    }
    if let Some(b) = v.downcast::<CFBoolean>() {
        return Some(Value::Bool(b.into()));
    }
    if let Some(n) = v.downcast::<CFNumber>() {
        return n.to_i64().map(Value::Int).or_else(|| n.to_f64().map(Value::Float));
    }
    if let Some(d) = v.downcast::<CFData>() {
        let bytes = d.bytes();
        return Some(Value::Data(bytes[..bytes.len().min(MAX_BYTES)].to_vec()));
    }
    if let Some(a) = v.downcast::<CFArray<*const c_void>>() {
        let items = a
            .iter()
            .take(MAX_ITEMS)
            // SAFETY: array items are CF objects, retained by the array.
            .filter_map(|p| value(&unsafe { CFType::wrap_under_get_rule(*p) }, depth + 1))
            .collect();
        return Some(Value::Array(items));
    }
    if let Some(d) = v.downcast::<CFDictionary<*const c_void, *const c_void>>() {
        let (keys, values) = d.get_keys_and_values();
        let mut out = super::Dict::new();
        for (k, v) in keys.into_iter().zip(values).take(MAX_ITEMS) {
            // SAFETY: keys and values are CF objects retained by the
            // dictionary, which outlives this loop.
            let (k, v) = unsafe { (CFType::wrap_under_get_rule(k), CFType::wrap_under_get_rule(v)) };
            let Some(key) = k.downcast::<CFString>() else { continue };
            if let Some(v) = value(&v, depth + 1) {
                out.insert(key.to_string(), v);
            }
        }
        return Some(Value::Dict(out));
    }
    None
}

/// Total physical memory (`hw.memsize`): what unified memory the GPU
/// shares.
fn memsize() -> Option<u64> {
    let mut size: u64 = 0;
    let mut len = std::mem::size_of::<u64>();
    // SAFETY: hw.memsize is a 64-bit integer; `len` says the buffer size.
    let rc = unsafe {
        libc::sysctlbyname(
            c"hw.memsize".as_ptr(),
            (&mut size as *mut u64).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == std::mem::size_of::<u64>()).then_some(size)
}

/// A process's physical footprint (`ri_phys_footprint` of
/// `proc_pid_rusage`): what the kernel books to it, its share of GPU
/// memory included on unified memory. The kernel walks the task's VM
/// objects for it, hence the background thread.
fn footprint(pid: u32) -> Result<u64, Unmeasured> {
    let pid = i32::try_from(pid).map_err(|_| Unmeasured::Gone)?;
    // SAFETY: rusage_info_v2 is plain data; the call fills it for flavor 2.
    let mut info: libc::rusage_info_v2 = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::proc_pid_rusage(
            pid,
            libc::RUSAGE_INFO_V2,
            (&mut info as *mut libc::rusage_info_v2).cast(),
        )
    };
    if rc == 0 {
        return Ok(info.ri_phys_footprint);
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => Unmeasured::Denied,
        Some(libc::ESRCH) => Unmeasured::Gone,
        _ => Unmeasured::Other(err.to_string()),
    })
}

/// The Apple source as the collector uses it.
pub struct AppleSource {
    apple: Apple,
    footprints: Footprints,
    memsize: Option<u64>,
    /// What the last sample keeps for after the merge.
    window: Option<Window>,
}

impl AppleSource {
    pub fn new(background: bool) -> AppleSource {
        // SAFETY: geteuid has no failure mode.
        let as_root = unsafe { libc::geteuid() } == 0;
        AppleSource {
            apple: Apple::new(as_root),
            footprints: Footprints::new(
                Arc::new(footprint) as Arc<Measure>,
                background,
                Duration::from_millis(250),
            ),
            memsize: memsize(),
            window: None,
        }
    }

    pub fn sample(&mut self, index_base: u32, only: Option<u32>) -> (Sample, Backend) {
        self.apple
            .sample(&read(), Instant::now(), index_base, self.memsize, only)
    }

    /// Follows these processes' footprints (measured now, for at most
    /// [`super::ONE_SHOT_BUDGET`], for a one-shot snapshot; on the
    /// footprint thread otherwise).
    pub fn want_footprints(&self, wanted: Vec<Wanted>) {
        self.footprints.want(wanted);
    }

    pub fn footprint(&self, pid: u32, start: u64) -> (Option<u64>, Option<String>) {
        self.footprints.footprint(pid, start)
    }
}

/// Apple GPUs come after the other sources.
impl Source for AppleSource {
    /// A first GPU-time reading, so the next sample has shares.
    fn prime(&mut self) {
        drop(self.sample(0, None));
    }

    fn read(&mut self, round: &mut Round<'_>) -> (Backend, Report) {
        let (sample, backend) = self.sample(round.next_index(), round.only);
        self.window = Some((sample.process_notes, sample.busy, sample.creators));
        let reading = Report {
            devices: sample.devices,
            usage: sample
                .processes
                .into_iter()
                .map(|(pid, usage)| (Owner::Local(pid), usage))
                .collect(),
            notes: BTreeMap::new(),
        };
        (backend, reading)
    }

    /// Per listed process: why its GPU share is unknown, its physical
    /// footprint (busy processes, whose GPU time moved, measured more
    /// often), and for a GPU client whose process the scan did not see, the
    /// name its client gives.
    fn finish(&mut self, scanned: &[ProcInfo], processes: &mut [Process]) {
        let Some((mut notes, busy, creators)) = self.window.take() else {
            return;
        };
        let starts: HashMap<u32, u64> = scanned.iter().map(|i| (i.pid, i.start_ticks)).collect();
        let wanted = processes
            .iter()
            .filter_map(|p| {
                Some(Wanted {
                    pid: p.pid,
                    start: *starts.get(&p.pid)?,
                    busy: busy.get(&p.pid).copied().unwrap_or(false),
                    gpu_client: !p.gpu.is_empty(),
                    ai: p.kind == ProcessKind::Ai,
                })
            })
            .collect();
        self.want_footprints(wanted);
        for p in processes {
            p.notes.extend(notes.remove(&p.pid).unwrap_or_default());
            match starts.get(&p.pid) {
                Some(&start) => {
                    let (bytes, note) = self.footprint(p.pid, start);
                    p.footprint_bytes = bytes;
                    p.notes.extend(note);
                }
                None => {
                    if let Some(name) = creators.get(&p.pid) {
                        p.notes
                            .push(format!("its GPU client names it \"{name}\" (IOUserClientCreator)"));
                    }
                }
            }
        }
    }
}
