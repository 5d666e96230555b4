mod cli;
mod collect;
mod config;
mod install_files;
mod model_cmd;
mod models;
mod procs;
mod record;
mod serve;
mod snapshot;
mod view;

use crate::view::safe_text::safe;
use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, Command, ConfigAction};
use collect::{Collector, Options};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The shortest window over which a one-shot snapshot measures CPU%.
const CPU_WINDOW: Duration = Duration::from_millis(100);

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
    // `gputaskman model` takes llama.cpp's own spellings (-np, -ctk, ...).
    let matches = Cli::command().get_matches_from(model_cmd::llama_cpp_spellings(std::env::args_os()));
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The config file fills in what the command line left unset.
    match config::apply(&mut cli, &matches).and_then(|()| run(cli)) {
        Ok(code) => code,
        // Errors quote paths, file contents and remote answers.
        Err(e) => {
            eprintln!("gputaskman: {}", safe(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match &cli.command {
        Some(Command::Schema) => {
            serde_json::to_writer_pretty(&mut stdout, &snapshot::json_schema())?;
            writeln!(stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Model(args)) => {
            model_cmd::run(args, roomiest_gpu(&cli), &mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Completions { shell }) => {
            install_files::write_completions(*shell, &mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Config {
            action: ConfigAction::Init { force },
        }) => {
            config::init(&cli, *force, &mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Manpage) => {
            install_files::write_manpage(&mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Explain) => {
            write!(stdout, "{}", view::explain::text())?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Diff(args)) => {
            record::run_diff(args, &mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Summary(args)) => {
            record::run_summary(args, &mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Plot(args)) => {
            record::run_plot(args)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Replay { file }) => {
            let recording = record::read_some(file)?;
            for skipped in &recording.skipped {
                eprintln!(
                    "gputaskman: {}: skipped {}",
                    safe(&file.display().to_string()),
                    safe(skipped)
                );
            }
            drop(stdout);
            view::tui::run_replay(Box::new(recording), look(&cli))?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Record(args)) => {
            let options = collector_options(&cli, true);
            record::run_record(args, options, cli.interval)?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Serve(args)) => {
            let options = collector_options(&cli, true);
            drop(stdout);
            serve::run(args, options, cli.interval)?;
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    if let Some(list) = &cli.remote {
        if cli.once || cli.json {
            serve::remote::run_once(list, cli.remote_token_file.as_deref(), cli.json, &mut stdout)?;
            return Ok(ExitCode::SUCCESS);
        }
        let targets = serve::remote::parse_targets(list)?;
        let token = cli
            .remote_token_file
            .as_deref()
            .map(serve::remote::read_token)
            .transpose()?;
        // Bounded (more than 0, at most a day) by `cli::seconds`.
        let interval = Duration::from_secs_f64(cli.interval);
        drop(stdout);
        view::tui::term::require_terminal()?;
        view::tui::run_feed(
            Box::new(serve::remote::RemoteFeed::start(targets, token, interval)),
            look(&cli),
        )?;
        return Ok(ExitCode::SUCCESS);
    }

    let options = collector_options(&cli, false);
    if !(cli.once || cli.json || cli.list_gpus) {
        // Bounded (more than 0, at most a day) by `cli::seconds`.
        let interval = Duration::from_secs_f64(cli.interval);
        drop(stdout);
        view::tui::run_live(options, interval, look(&cli))?;
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let mut collector = Collector::new(options);
    if cli.list_gpus {
        let snap = collector.sample();
        check_gpu_exists(&cli, &snap)?;
        for d in &snap.devices {
            writeln!(
                stdout,
                "{}: {} ({}, {}, {})",
                d.index,
                safe(view::opt(d.name.as_deref())),
                safe(view::opt(d.uuid.as_deref())),
                safe(view::opt(d.pci_bus_id.as_deref())),
                view::bytes(d.memory_total_bytes)
            )?;
        }
        if snap.devices.is_empty() {
            for b in &snap.backends {
                eprintln!("{}: {}", safe(&b.name), safe(&b.detail));
            }
        }
        return Ok(ExitCode::SUCCESS);
    }

    collector.prime();
    if let Some(rest) = CPU_WINDOW.checked_sub(started.elapsed()) {
        std::thread::sleep(rest);
    }
    let snap = collector.sample();
    check_gpu_exists(&cli, &snap)?;
    // One write: stdout is line-buffered, and a snapshot of 250 processes
    // is some 10,000 lines of JSON (as many write calls).
    let mut out = Vec::new();
    if cli.json {
        serde_json::to_writer_pretty(&mut out, &snap)?;
        out.push(b'\n');
    } else {
        out.extend_from_slice(view::text::render(&snap).as_bytes());
    }
    stdout.write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The collector's settings from the command line. `background_discovery`:
/// samples never wait for runtime APIs (the live view, `record`, `serve`).
fn collector_options(cli: &Cli, background_discovery: bool) -> Options {
    Options {
        nvml_lib: cli.nvml_lib.clone(),
        gpu: cli.gpu,
        proc_root: cli.proc_root.clone(),
        background_discovery,
        discovery: !cli.no_discovery,
        no_host: cli.no_host,
    }
}

/// The live view's start from the flags (and the config file they took in).
fn look(cli: &Cli) -> view::tui::Look {
    view::tui::Look {
        sort: cli.sort,
        light: cli.light,
        no_color: cli.no_color,
        ascii: cli.ascii,
    }
}

/// The device with the most free memory (or the one `--gpu` names), for the
/// model command's fit line. NVML only: nothing else is read.
fn roomiest_gpu(cli: &Cli) -> Option<model_cmd::GpuFree> {
    let mut nvml = collect::nvml::NvmlSource::open(cli.nvml_lib.as_deref()).ok()?;
    let sample = nvml.sample(cli.gpu, &|_| true).ok()?;
    sample
        .devices
        .into_iter()
        .filter_map(|d| {
            Some(model_cmd::GpuFree {
                name: d.name.unwrap_or_else(|| format!("GPU {}", d.index)),
                free_bytes: d.memory_free_bytes?,
                total_bytes: d.memory_total_bytes?,
            })
        })
        .max_by_key(|g| g.free_bytes)
}

/// `--gpu N` naming no device is a usage error, not an empty screen.
fn check_gpu_exists(cli: &Cli, snap: &snapshot::Snapshot) -> anyhow::Result<()> {
    match cli.gpu {
        Some(n) if !snap.devices.iter().any(|d| d.index == n) => {
            anyhow::bail!("--gpu {n}: no such device (see --list-gpus)")
        }
        _ => Ok(()),
    }
}
