//! Command-line arguments. The spellings are an interface scripts depend on
//! (shared/DESIGN.md): add, never rename.

use crate::collect::Options;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "gputaskman",
    version,
    about = "An htop for what is inside the GPU: which process holds how much memory, running what.",
    after_help = "Numbers are in binary units (GiB = 2^30 bytes). n/a means the source cannot say; it is never 0."
)]
pub struct Cli {
    /// Print one text snapshot and exit.
    #[arg(long, conflicts_with_all = ["json", "list_gpus"])]
    pub once: bool,

    /// Print one JSON snapshot and exit (schema: `gputaskman schema`).
    #[arg(long, conflicts_with = "list_gpus")]
    pub json: bool,

    /// List the devices found, one a line, with their index.
    #[arg(long)]
    pub list_gpus: bool,

    /// Only device N (its index in --list-gpus), or one MIG instance
    /// (`0/1`: GPU 0, GPU instance 1).
    #[arg(long, value_name = "N", global = true)]
    pub gpu: Option<crate::snapshot::GpuChoice>,

    /// Refresh period of the live view and of record, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, value_parser = seconds)]
    pub interval: f64,

    /// Read settings from this file instead of
    /// $XDG_CONFIG_HOME/gputaskman/config.toml (`gputaskman config init` writes one).
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// The live view's first sort column (`s` cycles it).
    #[arg(long, value_enum, value_name = "COLUMN")]
    pub sort: Option<crate::view::tui::app::SortKey>,

    /// Colours for terminals with a light background.
    #[arg(long, conflicts_with = "no_color")]
    pub light: bool,

    /// No colours (as NO_COLOR does).
    #[arg(long)]
    pub no_color: bool,

    /// Plain ASCII: no box drawing or block glyphs.
    #[arg(long)]
    pub ascii: bool,

    /// The live view sends no signal (`k` is refused).
    #[arg(long)]
    pub readonly: bool,

    /// Only this user's processes (the live view, --once and --json; `u`
    /// cycles users in the live view).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    /// The config file's `columns` (no flag sets them).
    #[arg(skip)]
    pub columns: Option<Vec<crate::view::tui::render::Column>>,

    /// Do not ask runtimes' local HTTP APIs which models they hold.
    #[arg(long)]
    pub no_discovery: bool,

    /// Under WSL: skip the Windows host counters.
    #[arg(long)]
    pub no_host: bool,

    /// Show these hosts' `gputaskman serve` instead of this machine
    /// (comma-separated http://host:port; with --once or --json).
    #[arg(long, value_name = "URLS", conflicts_with = "list_gpus")]
    pub remote: Option<String>,

    /// Send the token in this file to the --remote hosts.
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub remote_token_file: Option<PathBuf>,

    /// Load this NVML library instead of the system's libnvidia-ml.
    #[arg(long, value_name = "PATH", env = "GPUTASKMAN_NVML_LIB", global = true)]
    pub nvml_lib: Option<PathBuf>,

    /// Read processes from this procfs mount (for recorded trees in tests).
    #[arg(
        long,
        value_name = "DIR",
        env = "GPUTASKMAN_PROC_ROOT",
        default_value = "/proc",
        hide = true,
        global = true
    )]
    pub proc_root: PathBuf,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The longest period any flag takes: a day.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The parser of every flag that takes seconds. Bounded at parse time so
/// that no later `Duration::from_secs_f64` or `Instant + Duration` can
/// overflow and panic (1e19 s did), and a mistyped value is a usage error
/// (status 2) rather than a wait that never ends.
pub fn seconds(text: &str) -> Result<f64, String> {
    const WANT: &str = "give a number of seconds, more than 0 and at most 86400 (a day)";
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= MAX_SECONDS => Ok(s),
        _ => Err(WANT.to_string()),
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What a model file is and what it will cost (llama.cpp's own math).
    Model(crate::model_cmd::ModelArgs),
    /// Print the JSON Schema of a snapshot.
    Schema,
    /// What can be known about GPU memory, and from where, on this platform.
    Explain,
    /// Compare two `--json` snapshots: measured moves, then models (estimated, reported) apart.
    Diff(crate::diff_cmd::DiffArgs),
    /// Append one snapshot per interval to a JSON-lines file (zstd when it ends in .zst).
    Record(crate::record::RecordArgs),
    /// Per device and process: min/median/max/last memory and peak time of a recording.
    Summary(crate::record::SummaryArgs),
    /// Draw a recording's memory over time as an SVG.
    Plot(crate::record::PlotArgs),
    /// Play a recording back in the live view (step, jump, play at a speed).
    Replay {
        /// A file written by `gputaskman record` (.jsonl or .jsonl.zst).
        file: std::path::PathBuf,
    },
    /// Serve Prometheus /metrics, /snapshot (JSON, as --json) and /healthz over HTTP.
    Serve(crate::serve::ServeArgs),
    /// Print the completion script for a shell (e.g. `gputaskman completions bash > /etc/bash_completion.d/gputaskman`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff; `gputaskman manpage | man -l -`).
    Manpage,
    /// The config file (see --config).
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Write the defaults, with comments, to the config file.
    Init {
        /// Replace a file that exists.
        #[arg(long)]
        force: bool,
    },
}

impl Cli {
    /// The collector's settings from the command line.
    /// `background_discovery`: samples never wait for runtime APIs (the live
    /// view, `record`, `serve`).
    pub fn collector_options(&self, background_discovery: bool) -> Options {
        Options {
            nvml_lib: self.nvml_lib.clone(),
            gpu: self.gpu,
            proc_root: self.proc_root.clone(),
            background_discovery,
            discovery: !self.no_discovery,
            no_host: self.no_host,
        }
    }

    /// The live view's start from the flags (and the config file they took in).
    pub fn look(&self) -> crate::view::tui::Look {
        crate::view::tui::Look {
            sort: self.sort,
            light: self.light,
            no_color: self.no_color,
            ascii: self.ascii,
            // PIDs from a procfs tree that is not this system's name no
            // process here that a signal should reach.
            readonly: self.readonly || self.proc_root != std::path::Path::new("/proc"),
            user: self.user.clone(),
            columns: self.columns.clone(),
        }
    }
}
