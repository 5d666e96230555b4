use clap::FromArgMatches;
use gputaskman::cli::{self, Cli, Command, ConfigAction};
use gputaskman::view::safe_text::safe;
use gputaskman::{config, diff_cmd, install_files, model_args, model_cmd, oneshot, record, serve, view};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    // One malloc arena: with glibc's default (one per thread that allocates,
    // up to 8 per core) the live view's RSS grew 20-25% over 5 minutes of
    // process churn, as memory freed in one arena was not reused by another;
    // with one it stays flat (tests/churn.rs, RELIABILITY.md). Nothing here
    // allocates from many threads at once.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: a plain setting call, made before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    // An empty variable is no setting (`GPUTASKMAN_NVML_LIB= cmd`), not
    // a path "" that clap refuses for every command.
    for name in cli::ENV_SETTINGS {
        if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(name);
        }
    }
    // `gputaskman model` takes llama.cpp's own spellings (-np, -ctk, ...).
    let matches = cli::command().get_matches_from(model_args::llama_cpp_spellings(std::env::args_os()));
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli::take_shared_flags(&mut cli, &matches).unwrap_or_else(|e| e.exit());
    // The config file fills in what the command line left unset.
    match config::apply(&mut cli, &matches)
        .and_then(|()| cli::check_nvml_lib(&cli))
        .and_then(|()| cli::check_user(&cli))
        .and_then(|()| run(&cli))
    {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`| head`) took what it wanted.
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        // `model --fit`: an answer, not a failure to give one.
        Err(e) if e.downcast_ref::<model_cmd::DoesNotFit>().is_some() => {
            eprintln!("gputaskman: {e}");
            ExitCode::from(1)
        }
        // Errors quote paths, file contents and remote answers.
        Err(e) => {
            eprintln!("gputaskman: {}", safe(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// Whether the error is a write to a reader that has gone. serde_json
/// hides its io::Error from the chain and names only its kind.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let kind = match (
            c.downcast_ref::<std::io::Error>(),
            c.downcast_ref::<serde_json::Error>(),
        ) {
            (Some(io), _) => Some(io.kind()),
            (_, Some(json)) => json.io_error_kind(),
            _ => None,
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Hands the command to the module that runs it. The views that take the
/// terminal, and `serve`, get stdout unlocked.
fn run(cli: &Cli) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match &cli.command {
        Some(Command::Schema) => oneshot::schema(&mut stdout),
        Some(Command::Model(args)) => model_cmd::run(
            args,
            model_args::gpus_free(cli.nvml_lib.as_deref(), cli.gpu),
            cli.gpu.is_some(),
            &mut stdout,
        ),
        Some(Command::Explain) => oneshot::explain(&mut stdout),
        Some(Command::Diff(args)) => diff_cmd::run(args, &mut stdout),
        Some(Command::Summary(args)) => record::run_summary(args, &mut stdout),
        Some(Command::Plot(args)) => record::run_plot(args),
        Some(Command::Replay { file }) => {
            drop(stdout);
            record::run_replay(file, cli.look())
        }
        Some(Command::Record(args)) => record::run_record(args, cli.collector_options(true), cli.interval),
        Some(Command::Serve(args)) => {
            drop(stdout);
            match (&cli.prometheus_access(), &cli.remote) {
                (Some(prometheus), _) => serve::run_fleet(args, Box::new(prometheus.open()?), cli.interval),
                (None, Some(list)) => serve::run_fleet(args, Box::new(cli.remote_access().poller(list)?), cli.interval),
                (None, None) => serve::run(args, cli.collector_options(true), cli.interval),
            }
        }
        Some(Command::Completions { shell }) => Ok(install_files::write_completions(*shell, &mut stdout)?),
        Some(Command::Manpage) => Ok(install_files::write_manpage(&mut stdout)?),
        Some(Command::Config {
            action: ConfigAction::Init { force },
        }) => config::init(cli, *force, &mut stdout),
        None if cli.prometheus.is_some() => {
            let mut poller = cli.prometheus_access().unwrap_or_default().open()?;
            if cli.once || cli.json {
                let width = oneshot::terminal_width(cli.wide);
                serve::fleet::run_once_source(&mut poller, cli.json, width, cli.ascii, &mut stdout)
            } else {
                drop(stdout);
                serve::remote::run_live_source(Box::new(poller), cli.interval, cli.look())
            }
        }
        None => match &cli.remote {
            Some(list) if cli.once || cli.json => {
                let width = oneshot::terminal_width(cli.wide);
                serve::fleet::run_once(list, &cli.remote_access(), cli.json, width, cli.ascii, &mut stdout)
            }
            Some(list) => {
                drop(stdout);
                serve::remote::run_live(list, &cli.remote_access(), cli.interval, cli.look())
            }
            None if cli.once || cli.json || cli.list_gpus => oneshot::run(cli, &mut stdout),
            None => {
                drop(stdout);
                // Bounded (more than 0, at most a day) by `cli::values::seconds`.
                view::tui::run_live(
                    cli.collector_options(false),
                    Duration::from_secs_f64(cli.interval),
                    cli.look(),
                )
            }
        },
    }
}
