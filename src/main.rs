mod cli;
mod collect;
mod models;
mod procs;
mod snapshot;
mod view;

use clap::Parser;
use cli::{Cli, Command};
use collect::{Collector, Options};
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The shortest window over which a one-shot snapshot measures CPU%.
const CPU_WINDOW: Duration = Duration::from_millis(100);

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gputaskman: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    if let Some(Command::Schema) = cli.command {
        serde_json::to_writer_pretty(&mut stdout, &snapshot::json_schema())?;
        writeln!(stdout)?;
        return Ok(ExitCode::SUCCESS);
    }

    let options = Options {
        nvml_lib: cli.nvml_lib.clone(),
        gpu: cli.gpu,
        proc_root: cli.proc_root.clone(),
    };
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
                view::opt(d.name.as_deref()),
                view::opt(d.uuid.as_deref()),
                view::opt(d.pci_bus_id.as_deref()),
                view::bytes(d.memory_total_bytes)
            )?;
        }
        if snap.devices.is_empty() {
            for b in &snap.backends {
                eprintln!("{}: {}", b.name, b.detail);
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
    if cli.json {
        serde_json::to_writer_pretty(&mut stdout, &snap)?;
        writeln!(stdout)?;
    } else {
        if !cli.once {
            eprintln!("gputaskman: the live view is not built yet; showing one snapshot (--once).");
        }
        write!(stdout, "{}", view::text::render(&snap))?;
    }
    Ok(ExitCode::SUCCESS)
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
