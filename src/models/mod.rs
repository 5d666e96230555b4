//! Model discovery: which model files a process runs, how sure we are, the
//! settings that drive its memory, and what it costs — estimated from the
//! GGUF header and reported by the runtime, kept apart and never summed
//! into measured totals.
//!
//! The rooms, lowest first (each uses only those above it in this list):
//! `round` (a discovery round and the caches that live by rounds),
//! `ollama_folder` (Ollama's manifests), `vllm` (a vLLM server asked and
//! its model described), `hf_server` (SGLang and TGI likewise), `api` (the runtime APIs and their
//! answers), `evidence` (what says a process runs a file), `settings` (what
//! it runs with, and from where), `estimate` (what it costs, estimated and
//! reported), `log_file` (the runtime's log, read), and `discovery` (the
//! threads and the deadline that put it all together per process).

pub mod access;
mod api;
pub mod breakdown;
pub mod budget;
pub mod cmdline;
mod discovery;
mod estimate;
mod evidence;
mod hf_folder;
mod hf_server;
mod log_file;
pub mod log_sources;
pub mod logs;
mod ollama_folder;
pub mod probe;
mod round;
pub mod runtimes;
mod settings;
pub mod sockets;
mod vllm;

pub use api::{LIVE_INTERVAL, PROBE_INTERVAL};
pub use discovery::{Discovered, Discovery, DEADLINE};
