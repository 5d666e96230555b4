//! The exported PDH functions, with pdh.h's signatures (W variants).

use std::mem::size_of;

use crate::abi::{self, Handle, RawCounter, RawCounterItem, Status};
use crate::scenario::Scenario;
use crate::state::{self, guard, warn, Counter, SCENARIO_ENV};

/// Longest counter path read (PDH_MAX_COUNTER_PATH is 2048).
const MAX_PATH_CHARS: usize = 2048;

/// A NUL-terminated UTF-16 string, at most MAX_PATH_CHARS long.
///
/// # Safety
/// `p` is null or points to a NUL-terminated wide string.
unsafe fn wide(p: *const u16) -> Result<String, Status> {
    // SAFETY: the caller's promise, passed on.
    unsafe { fake_dll::read_wide(p, MAX_PATH_CHARS) }.map_err(|e| match e {
        fake_dll::StrError::TooLong => abi::CSTATUS_BAD_COUNTERNAME,
        fake_dll::StrError::Null | fake_dll::StrError::TooSmall => abi::INVALID_ARGUMENT,
    })
}

/// `\Set(Instance)\Counter`, with an optional `\\machine` in front: (set,
/// instance, counter); the instance is None for `*`.
fn parse_path(path: &str) -> Result<(&str, Option<&str>, &str), Status> {
    let mut p = path;
    if let Some(rest) = p.strip_prefix("\\\\") {
        p = &rest[rest.find('\\').ok_or(abi::CSTATUS_BAD_COUNTERNAME)?..];
    }
    let p = p.strip_prefix('\\').ok_or(abi::CSTATUS_BAD_COUNTERNAME)?;
    let open = p.find('(').ok_or(abi::CSTATUS_BAD_COUNTERNAME)?;
    let close = p
        .rfind(")\\")
        .filter(|&c| c > open)
        .ok_or(abi::CSTATUS_BAD_COUNTERNAME)?;
    let instance = &p[open + 1..close];
    Ok((&p[..open], (instance != "*").then_some(instance), &p[close + 2..]))
}

/// PdhOpenQueryW: live data only (a null data source); reads the scenario
/// file FAKE_PDH_SCENARIO names.
///
/// # Safety
/// `query` is null or valid for one write.
#[no_mangle]
pub unsafe extern "system" fn PdhOpenQueryW(data_source: *const u16, _user_data: usize, query: *mut Handle) -> Status {
    guard(|| {
        if !data_source.is_null() || query.is_null() {
            return Err(abi::INVALID_ARGUMENT);
        }
        let Some(path) = std::env::var_os(SCENARIO_ENV) else {
            warn("fake-pdh: FAKE_PDH_SCENARIO not set");
            return Err(abi::INVALID_ARGUMENT);
        };
        let scenario = Scenario::load(path.as_ref()).map_err(|e| {
            warn(&e);
            abi::INVALID_ARGUMENT
        })?;
        if let Some(&code) = scenario.errors.get("PdhOpenQueryW") {
            return Err(code);
        }
        let h = state::with(|s| s.open(scenario));
        // SAFETY: checked non-null; the caller gave room for one handle.
        unsafe { *query = h as Handle };
        Ok(())
    })
}

/// PdhAddEnglishCounterW: a set and counter the scenario defines, with `*`
/// or one instance.
///
/// # Safety
/// `path` is a NUL-terminated wide string; `counter` is valid for one write.
#[no_mangle]
pub unsafe extern "system" fn PdhAddEnglishCounterW(
    query: Handle,
    path: *const u16,
    _user_data: usize,
    counter: *mut Handle,
) -> Status {
    guard(|| {
        // SAFETY: as the caller promises.
        let path = unsafe { wide(path) }?;
        if counter.is_null() {
            return Err(abi::INVALID_ARGUMENT);
        }
        let (set_name, instance, counter_name) = parse_path(&path)?;
        let h = state::with(|s| {
            let q = s.query(query as usize)?;
            q.injected("PdhAddEnglishCounterW")?;
            let (set_key, set) = q.scenario.set(set_name).ok_or(abi::CSTATUS_NO_OBJECT)?;
            let counter_key = set.counter(counter_name).ok_or(abi::CSTATUS_NO_COUNTER)?;
            if let Some(i) = instance {
                if set.values(counter_key, Some(i)).next().is_none() {
                    return Err(abi::CSTATUS_NO_INSTANCE);
                }
            }
            let c = Counter {
                query: query as usize,
                set: set_key.to_string(),
                counter: counter_key.to_string(),
                instance: instance.map(str::to_string),
            };
            let h = s.handle();
            s.counters.insert(h, c);
            Ok(h)
        })?;
        // SAFETY: checked non-null.
        unsafe { *counter = h as Handle };
        Ok(())
    })
}

/// PdhCollectQueryData: takes the values of every counter of the query now.
#[no_mangle]
pub extern "system" fn PdhCollectQueryData(query: Handle) -> Status {
    guard(|| {
        state::with(|s| {
            let has_counters = s.counters.values().any(|c| c.query == query as usize);
            let q = s.query(query as usize)?;
            q.injected("PdhCollectQueryData")?;
            if !has_counters {
                return Err(abi::NO_DATA);
            }
            q.collect();
            Ok(())
        })
    })
}

/// PdhGetRawCounterArrayW: every instance of the counter at the last
/// collection. The items come first in the buffer, their names after them;
/// a null or short buffer gets PDH_MORE_DATA and the size needed.
///
/// # Safety
/// `size` and `count` are valid for reads and writes; `items` is null or
/// holds `*size` bytes, aligned for the items.
#[no_mangle]
pub unsafe extern "system" fn PdhGetRawCounterArrayW(
    counter: Handle,
    size: *mut u32,
    count: *mut u32,
    items: *mut RawCounterItem,
) -> Status {
    guard(|| {
        if size.is_null() || count.is_null() {
            return Err(abi::INVALID_ARGUMENT);
        }
        let (values, stamp) = state::with(|s| {
            let c = s.counters.get(&(counter as usize)).ok_or(abi::INVALID_HANDLE)?;
            let q = s.queries.get(&c.query).ok_or(abi::INVALID_HANDLE)?;
            q.injected("PdhGetRawCounterArrayW")?;
            let (stamp, _) = q.collected.ok_or(abi::NO_DATA)?;
            Ok::<_, Status>((q.values(c), stamp))
        })?;
        let names: Vec<Vec<u16>> = values
            .iter()
            .map(|(n, _)| n.encode_utf16().chain([0]).collect())
            .collect();
        let items_bytes = values.len() * size_of::<RawCounterItem>();
        let needed = items_bytes + names.iter().map(|n| n.len() * 2).sum::<usize>();
        let needed = u32::try_from(needed).map_err(|_| abi::INVALID_ARGUMENT)?;
        // SAFETY: checked non-null.
        let given = unsafe { *size };
        unsafe {
            *size = needed;
            *count = values.len() as u32;
        }
        if items.is_null() || given < needed {
            return Err(abi::MORE_DATA);
        }
        // SAFETY: the buffer holds `needed` bytes: the items, then the names.
        unsafe {
            let mut name_at = items.cast::<u8>().add(items_bytes).cast::<u16>();
            for (i, ((_, value), name)) in values.iter().zip(&names).enumerate() {
                std::ptr::copy_nonoverlapping(name.as_ptr(), name_at, name.len());
                items.add(i).write(RawCounterItem {
                    name: name_at,
                    raw: RawCounter {
                        c_status: 0,
                        time_stamp: stamp,
                        first_value: i64::try_from(*value).unwrap_or(i64::MAX),
                        second_value: 0,
                        multi_count: 1,
                    },
                });
                name_at = name_at.add(name.len());
            }
        }
        Ok(())
    })
}

/// PdhCloseQuery: the query and its counters.
#[no_mangle]
pub extern "system" fn PdhCloseQuery(query: Handle) -> Status {
    guard(|| state::with(|s| s.close(query as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn w(s: &str) -> Vec<u16> {
        s.encode_utf16().chain([0]).collect()
    }

    /// Every (name, value) of a counter, through the two-call protocol.
    fn read(counter: Handle) -> Result<Vec<(String, i64)>, Status> {
        let (mut size, mut count) = (0u32, 0u32);
        // SAFETY: a null buffer asks for the size.
        let rc = unsafe { PdhGetRawCounterArrayW(counter, &mut size, &mut count, std::ptr::null_mut()) };
        if rc != abi::MORE_DATA {
            return Err(rc);
        }
        let mut buf = vec![0u64; (size as usize).div_ceil(8)];
        let items = buf.as_mut_ptr().cast::<RawCounterItem>();
        // SAFETY: buf holds size bytes.
        let rc = unsafe { PdhGetRawCounterArrayW(counter, &mut size, &mut count, items) };
        if rc != 0 {
            return Err(rc);
        }
        Ok((0..count as usize)
            .map(|i| {
                // SAFETY: count items were written, names inside buf.
                let item = unsafe { &*items.add(i) };
                let name = unsafe { wide(item.name) }.unwrap();
                (name, item.raw.first_value)
            })
            .collect())
    }

    const SCENARIO: &str = r#"{
        "sets": {
            "GPU Process Memory": {
                "counters": ["Local Usage", "Non Local Usage"],
                "instances": {
                    "pid_10_luid_0x00000000_0x0000C6F5_phys_0": {"Local Usage": 1073741824, "Non Local Usage": 5},
                    "pid_11_luid_0x00000000_0x0000C6F5_phys_0": {"Local Usage": 7}
                }
            },
            "GPU Engine": {
                "counters": ["Running Time"],
                "instances": {
                    "pid_10_luid_0x00000000_0x0000C6F5_phys_0_eng_0_engtype_3D": {"Running Time": {"start": 0, "busy_percent": 100}}
                }
            }
        },
        "errors": {"PdhCloseQuery": 3221228476}
    }"#;

    /// The whole protocol in one test: the scenario is process-wide (one
    /// environment variable), so tests that set it must not run in parallel.
    #[test]
    fn counters_answer_from_the_scenario_through_the_pdh_protocol() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(SCENARIO.as_bytes()).unwrap();
        std::env::set_var(SCENARIO_ENV, file.path());
        let mut query: Handle = std::ptr::null_mut();
        // SAFETY: valid pointers throughout.
        unsafe {
            assert_eq!(PdhOpenQueryW(std::ptr::null(), 0, &mut query), 0);
            let mut local: Handle = std::ptr::null_mut();
            let mut engine: Handle = std::ptr::null_mut();
            let mut missing: Handle = std::ptr::null_mut();
            let path = w("\\GPU Process Memory(*)\\Local Usage");
            assert_eq!(PdhAddEnglishCounterW(query, path.as_ptr(), 0, &mut local), 0);
            let path = w("\\gpu engine(*)\\running time");
            assert_eq!(
                PdhAddEnglishCounterW(query, path.as_ptr(), 0, &mut engine),
                0,
                "names in any case"
            );
            let path = w("\\GPU Process Memory(*)\\Total Committed");
            assert_eq!(
                PdhAddEnglishCounterW(query, path.as_ptr(), 0, &mut missing),
                abi::CSTATUS_NO_COUNTER,
                "a counter this Windows lacks"
            );
            let path = w("\\GPU Adapter Memory(*)\\Shared Usage");
            assert_eq!(
                PdhAddEnglishCounterW(query, path.as_ptr(), 0, &mut missing),
                abi::CSTATUS_NO_OBJECT
            );
            let path = w("GPU Engine\\Running Time");
            assert_eq!(
                PdhAddEnglishCounterW(query, path.as_ptr(), 0, &mut missing),
                abi::CSTATUS_BAD_COUNTERNAME
            );
            assert_eq!(read(local), Err(abi::NO_DATA), "nothing collected yet");

            assert_eq!(PdhCollectQueryData(query), 0);
            let mut values = read(local).unwrap();
            values.sort();
            assert_eq!(
                values,
                [
                    ("pid_10_luid_0x00000000_0x0000C6F5_phys_0".to_string(), 1 << 30),
                    ("pid_11_luid_0x00000000_0x0000C6F5_phys_0".to_string(), 7),
                ]
            );
            let t0 = read(engine).unwrap()[0].1;
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(read(engine).unwrap()[0].1, t0, "values hold until the next collection");
            assert_eq!(PdhCollectQueryData(query), 0);
            let t1 = read(engine).unwrap()[0].1;
            assert!(
                t1 - t0 >= 500_000,
                "100 % busy over 50 ms is 500 000 ticks: {t0} -> {t1}"
            );

            // A buffer one byte short is refused with the size needed.
            let (mut size, mut count) = (0u32, 0u32);
            PdhGetRawCounterArrayW(local, &mut size, &mut count, std::ptr::null_mut());
            let needed = size;
            let mut buf = vec![0u64; needed as usize / 8 + 1];
            size = needed - 1;
            let rc = PdhGetRawCounterArrayW(local, &mut size, &mut count, buf.as_mut_ptr().cast());
            assert_eq!((rc, size, count), (abi::MORE_DATA, needed, 2));

            assert_eq!(PdhCloseQuery(query), 3221228476, "the injected error");
            assert_eq!(PdhCollectQueryData(std::ptr::null_mut()), abi::INVALID_HANDLE);
        }
    }
}
