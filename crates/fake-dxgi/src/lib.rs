//! fake-dxgi: a stand-in for Windows' `dxgi.dll` that answers the DXGI
//! calls gputaskman's WDDM source makes where D3DKMT gives no adapter's PCI
//! address (src/collect/wddm/pdh.rs, `dxgi_adapters`): CreateDXGIFactory1,
//! then IDXGIFactory1::EnumAdapters1 and IDXGIAdapter1::GetDesc1, with the
//! adapters of a JSON scenario named by `FAKE_DXGI_SCENARIO`. Under Wine it
//! is loaded from the .exe's folder with `WINEDLLOVERRIDES=dxgi=n`.
//!
//! The interfaces and the descriptor are dxgi.h's (Microsoft Learn,
//! CreateDXGIFactory1, IDXGIFactory1, IDXGIAdapter1::GetDesc1,
//! DXGI_ADAPTER_DESC1). See README.md for the scenario format.

mod abi;
mod com;
mod scenario;

pub use com::CreateDXGIFactory1;
pub use scenario::{Scenario, SCENARIO_ENV};
