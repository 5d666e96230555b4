//! fake-nvml: a stand-in for `libnvidia-ml.so` that answers the NVML C API
//! from a JSON scenario named by `FAKE_NVML_SCENARIO`. It is the test double
//! for gputaskman's NVML path and for running nvitop and gpustat without a
//! GPU. See README.md for the scenario format and semantics.

mod abi;
mod energy;
mod exports;
mod health;
mod processes;
mod scenario;
mod state;
