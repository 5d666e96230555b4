//! Command-line arguments. The spellings are an interface scripts depend on
//! (shared/DESIGN.md): add, never rename.

pub mod values;

use crate::collect::Options;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use values::seconds;

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

    /// With --once: full rows, however wide the terminal (a pipe gets them
    /// anyway).
    #[arg(long, requires = "once")]
    pub wide: bool,

    /// List the devices found, one a line, with their index.
    #[arg(long)]
    pub list_gpus: bool,

    /// Only device N (its index in --list-gpus), or one MIG instance
    /// (`0/1`: GPU 0, GPU instance 1).
    #[arg(long, value_name = "N")]
    pub gpu: Option<crate::snapshot::gpu_choice::GpuChoice>,

    /// Refresh period of the live view and of record, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 1.0,
        value_parser = seconds,
        allow_negative_numbers = true
    )]
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

    /// ASCII only: no box drawing, block glyphs or other non-ASCII text
    /// (--once and the live view).
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
    pub columns: Option<Vec<crate::view::tui::columns::Column>>,

    /// Do not ask runtimes' local HTTP APIs which models they hold.
    #[arg(long)]
    pub no_discovery: bool,

    /// Under WSL: skip the Windows host counters.
    #[arg(long)]
    pub no_host: bool,

    /// Kubernetes: the kubelet's pod-resources socket, which says the pod
    /// each GPU was allocated to (default: /var/lib/kubelet/pod-resources/kubelet.sock
    /// where it exists).
    #[arg(long, value_name = "PATH", env = "GPUTASKMAN_POD_RESOURCES_SOCKET")]
    pub pod_resources_socket: Option<PathBuf>,

    /// Show these hosts' `gputaskman serve` instead of this machine
    /// (comma-separated http://host:port or https://host:port; with --once
    /// or --json; before `serve`, serve them: the web view lists them).
    #[arg(long, value_name = "URLS", conflicts_with = "list_gpus")]
    pub remote: Option<String>,

    /// Show every host Prometheus scrapes `gputaskman serve` on, from the
    /// latest samples it keeps (http://host:port or https://host:port; with
    /// --once or --json; before `serve`, serve them).
    #[arg(long, value_name = "URL", conflicts_with_all = ["list_gpus", "remote"])]
    pub prometheus: Option<String>,

    /// Send the bearer token in this file to --prometheus.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,

    /// Sign in to --prometheus with the user:password in this file (HTTP
    /// basic auth).
    #[arg(
        long,
        value_name = "FILE",
        requires = "prometheus",
        conflicts_with = "prometheus_token_file"
    )]
    pub prometheus_basic_auth_file: Option<PathBuf>,

    /// Trust this CA (PEM) for an https:// --prometheus; no system roots
    /// are read.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub prometheus_ca: Option<PathBuf>,

    /// Send the token in this file to the --remote hosts.
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub remote_token_file: Option<PathBuf>,

    /// Trust this CA (PEM) for https:// --remote hosts; no system roots
    /// are read.
    #[arg(long, value_name = "FILE", requires = "remote")]
    pub remote_ca: Option<PathBuf>,

    /// Show this client certificate (PEM) to --remote hosts that ask for
    /// one (serve --tls-client-ca); needs --remote-key.
    #[arg(long, value_name = "FILE", requires_all = ["remote", "remote_key"])]
    pub remote_cert: Option<PathBuf>,

    /// The private key of --remote-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "remote_cert")]
    pub remote_key: Option<PathBuf>,

    /// Load this NVML library instead of the system's libnvidia-ml (given
    /// here, one that does not load is an error; from the variable, the
    /// nvml line says why).
    #[arg(long, value_name = "PATH", env = "GPUTASKMAN_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,

    /// Whether `nvml_lib` was given as a flag (not from the environment).
    #[arg(skip)]
    pub nvml_lib_on_command_line: bool,

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

/// The environment variables that stand in for flags (clap's `env`).
pub const ENV_SETTINGS: [&str; 3] = [
    "GPUTASKMAN_NVML_LIB",
    "GPUTASKMAN_PROC_ROOT",
    "GPUTASKMAN_POD_RESOURCES_SOCKET",
];

/// A library `--nvml-lib` names on the command line must load: asked for
/// by name, its absence is an error (status 2), not an empty screen.
/// GPUTASKMAN_NVML_LIB's, like the default library, is the nvml source's
/// status line (a setting of the environment, for every command).
pub fn check_nvml_lib(cli: &Cli) -> anyhow::Result<()> {
    match &cli.nvml_lib {
        Some(path) if cli.nvml_lib_on_command_line => {
            crate::collect::nvml::NvmlSource::check_loads(path).map_err(|e| anyhow::anyhow!("--nvml-lib: {e}"))
        }
        _ => Ok(()),
    }
}

/// `--user` must name a user of this system: a name it does not know is an
/// error (status 2), not an empty list. Not asked of a recorded procfs tree
/// (`--proc-root`), whose users are another machine's.
pub fn check_user(cli: &Cli) -> anyhow::Result<()> {
    match &cli.user {
        Some(name) if cli.proc_root == std::path::Path::new("/proc") => match crate::procs::user_exists(name) {
            Some(false) => anyhow::bail!("--user {name}: there is no such user"),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The flags of the top level that some subcommands take too, and which;
/// to the others they are unknown (`schema --gpu 99` is a usage error), and
/// given before such a subcommand (`--gpu 99 schema`) they are refused.
const SHARED_FLAGS: [(&str, &str, &[&str]); 2] = [
    ("gpu", "--gpu", &["model", "record", "serve"]),
    ("nvml_lib", "--nvml-lib", &["model", "record", "serve"]),
];

/// The command line's definition: [`Cli`]'s, with the shared flags added to
/// the subcommands that take them (their help, completions and man page
/// show them; the others' do not).
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for (id, _, takers) in SHARED_FLAGS {
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == id)
            .cloned()
            .expect("every shared flag is one of Cli's");
        // In place: `mut_subcommand` would move each to the end of the list.
        for sub in cmd.get_subcommands_mut().filter(|s| takers.contains(&s.get_name())) {
            *sub = std::mem::take(sub).arg(arg.clone());
        }
    }
    cmd
}

/// Takes the shared flags given after their subcommand into `cli`, and
/// refuses those given before a subcommand they mean nothing to.
pub fn take_shared_flags(cli: &mut Cli, matches: &ArgMatches) -> Result<(), clap::Error> {
    cli.nvml_lib_on_command_line = matches.value_source("nvml_lib") == Some(ValueSource::CommandLine);
    let Some((name, sub)) = matches.subcommand() else {
        return Ok(());
    };
    refuse_one_shot_flags(matches, name)?;
    for (id, flag, takers) in SHARED_FLAGS {
        if !takers.contains(&name) {
            if id == "nvml_lib" {
                // Harmless where no device is read: a shell alias
                // (`gputaskman --nvml-lib X`) works for every command, and
                // the library it names is neither loaded nor checked.
                cli.nvml_lib = None;
                cli.nvml_lib_on_command_line = false;
                continue;
            }
            if matches.value_source(id) == Some(ValueSource::CommandLine) {
                return Err(command().error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("{flag} means nothing to `gputaskman {name}`"),
                ));
            }
            continue;
        }
        if sub.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        match id {
            "gpu" => cli.gpu = sub.get_one::<crate::snapshot::gpu_choice::GpuChoice>(id).copied(),
            _ => {
                cli.nvml_lib = sub.get_one::<PathBuf>(id).cloned();
                cli.nvml_lib_on_command_line = true;
            }
        }
    }
    Ok(())
}

/// The top level's one-shot flags mean nothing to a subcommand: given
/// before one (`--json model F`, `--once summary F`) they would be
/// ignored, so they are refused, with the subcommand's own spelling where
/// it has one.
fn refuse_one_shot_flags(matches: &ArgMatches, name: &str) -> Result<(), clap::Error> {
    for (id, flag) in [
        ("once", "--once"),
        ("json", "--json"),
        ("wide", "--wide"),
        ("list_gpus", "--list-gpus"),
    ] {
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let own = command()
            .find_subcommand(name)
            .is_some_and(|sub| sub.get_arguments().any(|a| a.get_id() == id));
        let hint = if own {
            format!("; give it after: `gputaskman {name} ... {flag}`")
        } else {
            String::new()
        };
        return Err(command().error(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{flag} before a subcommand means nothing to `gputaskman {name}`{hint}"),
        ));
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What a model file is and what it will cost (llama.cpp's own math).
    Model(crate::model_args::ModelArgs),
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
            pod_resources_socket: self.pod_resources_socket.clone(),
        }
    }

    /// How --prometheus is reached: its URL, credentials and CA.
    pub fn prometheus_access(&self) -> Option<crate::serve::prometheus::Access> {
        Some(crate::serve::prometheus::Access {
            url: self.prometheus.clone()?,
            token_file: self.prometheus_token_file.clone(),
            basic_auth_file: self.prometheus_basic_auth_file.clone(),
            ca: self.prometheus_ca.clone(),
        })
    }

    /// How the --remote hosts are reached: token and TLS files.
    pub fn remote_access(&self) -> crate::serve::remote::Access {
        crate::serve::remote::Access {
            token_file: self.remote_token_file.clone(),
            tls: crate::serve::tls::ClientFiles {
                ca: self.remote_ca.clone(),
                cert: self.remote_cert.clone(),
                key: self.remote_key.clone(),
            },
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
