//! The JSON scenario: the adapters DXGI lists, in order. Unknown fields are
//! errors, so typos are caught.

use std::path::Path;

use serde::Deserialize;

use crate::abi::{self, AdapterDesc1};

/// Names the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_DXGI_SCENARIO";
/// Most adapters a scenario may list.
pub const MAX_ADAPTERS: usize = 16;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub adapters: Vec<Adapter>,
}

/// One adapter, as DXGI_ADAPTER_DESC1 describes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Adapter {
    pub description: String,
    pub vendor_id: u32,
    pub device_id: u32,
    #[serde(default)]
    pub subsys_id: u32,
    #[serde(default)]
    pub revision: u32,
    /// The LUID's halves, as the PDH instance names spell them
    /// (`luid_0xHIGH_0xLOW`).
    pub luid: Luid,
    #[serde(default)]
    pub dedicated_video_memory: u64,
    /// DXGI_ADAPTER_FLAG_SOFTWARE (the Microsoft Basic Render Driver).
    #[serde(default)]
    pub software: bool,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Luid {
    pub high: u32,
    pub low: u32,
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, String> {
        let s: Scenario = fake_dll::load_scenario("fake-dxgi", path)?;
        if s.adapters.len() > MAX_ADAPTERS {
            return Err(format!("fake-dxgi: more than {MAX_ADAPTERS} adapters"));
        }
        Ok(s)
    }
}

impl Adapter {
    /// The descriptor GetDesc1 writes.
    pub fn desc(&self) -> AdapterDesc1 {
        AdapterDesc1 {
            description: fake_dll::wide_field(&self.description),
            vendor_id: self.vendor_id,
            device_id: self.device_id,
            sub_sys_id: self.subsys_id,
            revision: self.revision,
            dedicated_video_memory: usize::try_from(self.dedicated_video_memory).unwrap_or(usize::MAX),
            dedicated_system_memory: 0,
            shared_system_memory: 0,
            adapter_luid: abi::Luid {
                low_part: self.luid.low,
                high_part: self.luid.high as i32,
            },
            flags: if self.software { abi::ADAPTER_FLAG_SOFTWARE } else { 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_and_too_many_adapters_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(
            &path,
            r#"{"adapters": [{"description": "x", "vendor_id": 1, "device": 2}]}"#,
        )
        .unwrap();
        assert!(Scenario::load(&path).is_err());
        let one = r#"{"description": "x", "vendor_id": 1, "device_id": 2, "luid": {"high": 0, "low": 1}}"#;
        let many = format!(r#"{{"adapters": [{}]}}"#, vec![one; MAX_ADAPTERS + 1].join(","));
        std::fs::write(&path, many).unwrap();
        assert!(Scenario::load(&path).unwrap_err().contains("more than"));
    }

    #[test]
    fn a_long_description_is_cut_and_stays_nul_terminated() {
        let a = Adapter {
            description: "N".repeat(300),
            ..Adapter::default()
        };
        let d = a.desc();
        assert_eq!(d.description[126], u16::from(b'N'));
        assert_eq!(d.description[127], 0);
    }
}
