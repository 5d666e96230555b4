//! fake-pdh: a stand-in for Windows' `pdh.dll` that answers the PDH calls
//! gputaskman's WDDM source makes (src/collect/wddm/pdh.rs) from a JSON
//! scenario of GPU counter instances named by `FAKE_PDH_SCENARIO`. Under Wine
//! it is loaded from the .exe's folder with `WINEDLLOVERRIDES=pdh=n`.
//!
//! The calls and their C signatures are pdh.h's (Microsoft Learn, "PDH
//! functions"): PdhOpenQueryW, PdhAddEnglishCounterW (a `\Set(*)\Counter`
//! path, or one instance by name), PdhCollectQueryData,
//! PdhGetRawCounterArrayW (the two-call size protocol, PDH_MORE_DATA) and
//! PdhCloseQuery. See README.md for the scenario format.

mod abi;
mod exports;
mod scenario;
mod state;

pub use scenario::Scenario;
pub use state::SCENARIO_ENV;
