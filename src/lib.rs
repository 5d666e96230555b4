//! gputaskman as a library: the collector and its sources, the snapshot
//! data model, the views, and the subcommands. `src/main.rs` parses the
//! command line and calls one of the `run` functions here; tests, benches
//! and the fuzz targets reach the same code through this API.

pub mod accounting;
pub mod cli;
pub mod collect;
pub mod config;
pub mod diff_cmd;
pub mod install_files;
pub mod model_args;
pub mod model_cmd;
pub mod model_devices;
pub mod model_dir;
pub mod models;
pub mod oneshot;
pub mod procs;
pub mod record;
pub mod serve;
pub mod snapshot;
pub mod units;
pub mod view;
