//! The C side of PDH: status codes and the raw counter item, transcribed
//! from pdh.h, pdhmsg.h and winperf.h.

use std::os::raw::c_void;

/// `PDH_STATUS`.
pub type Status = u32;
/// `PDH_HQUERY` and `PDH_HCOUNTER`: opaque handles.
pub type Handle = *mut c_void;

pub const SUCCESS: Status = 0;
/// The buffer is too small; the size needed was written.
pub const MORE_DATA: Status = 0x8000_07D2;
/// PdhCollectQueryData on a query without counters.
pub const NO_DATA: Status = 0x8000_07D5;
pub const CSTATUS_NO_OBJECT: Status = 0xC000_0BB8;
pub const CSTATUS_NO_COUNTER: Status = 0xC000_0BB9;
pub const CSTATUS_NO_INSTANCE: Status = 0xC000_0BB7;
pub const INVALID_HANDLE: Status = 0xC000_0BBC;
pub const INVALID_ARGUMENT: Status = 0xC000_0BBD;
pub const CSTATUS_BAD_COUNTERNAME: Status = 0xC000_0BC0;

/// `FILETIME`: 100 ns ticks since 1601-01-01, in two halves.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct FileTime {
    pub low: u32,
    pub high: u32,
}

/// `PDH_RAW_COUNTER`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCounter {
    /// PDH_CSTATUS_VALID_DATA (0).
    pub c_status: u32,
    pub time_stamp: FileTime,
    pub first_value: i64,
    pub second_value: i64,
    pub multi_count: u32,
}

/// `PDH_RAW_COUNTER_ITEM_W`: the instance name points into the caller's
/// buffer, after the array of items.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawCounterItem {
    pub name: *mut u16,
    pub raw: RawCounter,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_raw_item_has_pdh_h_layout_on_64_bit() {
        // pdh.h on x64: szName at 0, RawValue at 8 (CStatus 8, TimeStamp
        // 12, FirstValue 24, SecondValue 32, MultiCount 40), 48 bytes.
        assert_eq!(offset_of!(RawCounterItem, raw), 8);
        assert_eq!(offset_of!(RawCounter, time_stamp), 4);
        assert_eq!(offset_of!(RawCounter, first_value), 16);
        assert_eq!(offset_of!(RawCounter, multi_count), 32);
        assert_eq!(size_of::<RawCounterItem>(), 48);
    }
}
