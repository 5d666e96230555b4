//! The C side of DXGI: HRESULTs, interface ids and DXGI_ADAPTER_DESC1,
//! transcribed from dxgi.h, winerror.h and unknwn.h.

/// `HRESULT`.
pub type HResult = i32;

pub const S_OK: HResult = 0;
pub const E_NOTIMPL: HResult = 0x8000_4001_u32 as i32;
pub const E_FAIL: HResult = 0x8000_4005_u32 as i32;
pub const E_NOINTERFACE: HResult = 0x8000_4002_u32 as i32;
pub const E_INVALIDARG: HResult = 0x8007_0057_u32 as i32;
/// EnumAdapters1 past the last adapter.
pub const DXGI_ERROR_NOT_FOUND: HResult = 0x887A_0002_u32 as i32;
/// What CreateDXGIFactory1 answers without a scenario: no DXGI here.
pub const DXGI_ERROR_UNSUPPORTED: HResult = 0x887A_0004_u32 as i32;

/// DXGI_ADAPTER_FLAG_SOFTWARE: the Microsoft Basic Render Driver.
pub const ADAPTER_FLAG_SOFTWARE: u32 = 2;

/// `GUID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guid {
    pub data1: u32,
    pub data2: u16,
    pub data3: u16,
    pub data4: [u8; 8],
}

impl Guid {
    /// From the usual spelling, `0x770aae78_f26f_4dba_a829_253c83d1b387`.
    pub const fn from_u128(v: u128) -> Guid {
        Guid {
            data1: (v >> 96) as u32,
            data2: (v >> 80) as u16,
            data3: (v >> 64) as u16,
            data4: (v as u64).to_be_bytes(),
        }
    }
}

pub const IID_IUNKNOWN: Guid = Guid::from_u128(0x00000000_0000_0000_c000_000000000046);
pub const IID_IDXGIOBJECT: Guid = Guid::from_u128(0xaec22fb8_76f3_4639_9be0_28eb43a67a2e);
pub const IID_IDXGIFACTORY: Guid = Guid::from_u128(0x7b7166ec_21c7_44ae_b21a_c9ae321ae369);
pub const IID_IDXGIFACTORY1: Guid = Guid::from_u128(0x770aae78_f26f_4dba_a829_253c83d1b387);
pub const IID_IDXGIADAPTER: Guid = Guid::from_u128(0x2411e7e1_12ac_4ccf_bd14_9798e8534dc0);
pub const IID_IDXGIADAPTER1: Guid = Guid::from_u128(0x29038f61_3839_4626_91fd_086879011a05);

/// `LUID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Luid {
    pub low_part: u32,
    pub high_part: i32,
}

/// `DXGI_ADAPTER_DESC1`: the memory sizes are SIZE_T.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterDesc1 {
    /// NUL-terminated UTF-16.
    pub description: [u16; 128],
    pub vendor_id: u32,
    pub device_id: u32,
    pub sub_sys_id: u32,
    pub revision: u32,
    pub dedicated_video_memory: usize,
    pub dedicated_system_memory: usize,
    pub shared_system_memory: usize,
    pub adapter_luid: Luid,
    pub flags: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_descriptor_has_dxgi_h_layout_on_64_bit() {
        // dxgi.h on x64: Description at 0 (128 WCHARs), the four ids at
        // 256, the three SIZE_Ts at 272, AdapterLuid at 296, Flags at 304.
        assert_eq!(offset_of!(AdapterDesc1, vendor_id), 256);
        assert_eq!(offset_of!(AdapterDesc1, dedicated_video_memory), 272);
        assert_eq!(offset_of!(AdapterDesc1, adapter_luid), 296);
        assert_eq!(offset_of!(AdapterDesc1, flags), 304);
        assert_eq!(size_of::<AdapterDesc1>(), 312);
    }

    #[test]
    fn interface_ids_are_laid_out_as_guids() {
        let g = IID_IDXGIFACTORY1;
        assert_eq!((g.data1, g.data2, g.data3), (0x770aae78, 0xf26f, 0x4dba));
        assert_eq!(g.data4, [0xa8, 0x29, 0x25, 0x3c, 0x83, 0xd1, 0xb3, 0x87]);
        assert_eq!(IID_IUNKNOWN.data4, [0xc0, 0, 0, 0, 0, 0, 0, 0x46]);
    }
}
