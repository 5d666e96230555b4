//! The commands that print once and exit: `--once` (text), `--json`,
//! `--list-gpus`, `schema` and `explain`.

use crate::cli::Cli;
use crate::collect::Collector;
use crate::snapshot::Snapshot;
use crate::view;
use crate::view::safe_text::safe;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// The shortest window over which a one-shot snapshot measures CPU% (and
/// the sources' rates). CPU time is read in nanoseconds, but the kernel
/// adds a running thread's time to it at its scheduler tick (4 ms at
/// HZ=250): measured here, a 10 ms window read one spinning thread as 75 %
/// or 112 %. Over 50 ms a running thread is within a tick, 8 % of a core.
/// The snapshot says the window it got (`cpu_window_seconds`).
const CPU_WINDOW: Duration = Duration::from_millis(50);

/// `--once`, `--json` or `--list-gpus`: one sample of this machine.
pub fn run(cli: &Cli, stdout: &mut impl Write) -> anyhow::Result<()> {
    let mut collector = Collector::new(cli.collector_options(false));
    if cli.list_gpus {
        let snap = collector.sample();
        check_gpu_exists(cli, &snap)?;
        write!(
            stdout,
            "{}",
            view::ascii::fold_when(cli.ascii, view::text::gpu_list(&snap.devices))
        )?;
        if snap.devices.is_empty() {
            for b in &snap.backends {
                eprintln!("{}: {}", safe(&b.name), safe(&b.detail));
            }
        }
        return Ok(());
    }

    let mut snap = collector.sample_measured(CPU_WINDOW);
    check_gpu_exists(cli, &snap)?;
    if let Some(user) = &cli.user {
        // The devices' figures stay the whole device's: they are measured
        // per device, not per user.
        snap.processes.retain(|p| p.user.as_deref() == Some(user.as_str()));
    }
    // One write: stdout is line-buffered, and a snapshot of 250 processes
    // is some 10,000 lines of JSON (as many write calls).
    let mut out = Vec::new();
    if cli.json {
        serde_json::to_writer_pretty(&mut out, &snap)?;
        out.push(b'\n');
    } else {
        let text = view::text::render(&snap, terminal_width(cli.wide));
        out.extend_from_slice(view::ascii::fold_when(cli.ascii, text).as_bytes());
    }
    stdout.write_all(&out)?;
    Ok(())
}

/// The width `--once` fits its rows to: the terminal's when stdout is one,
/// else (a pipe, a file) or with `--wide` none: full rows.
pub fn terminal_width(wide: bool) -> Option<usize> {
    if wide || !std::io::stdout().is_terminal() {
        return None;
    }
    ratatui::crossterm::terminal::size()
        .ok()
        .map(|(columns, _)| usize::from(columns))
}

/// `gputaskman schema`: the JSON Schema of `--json`.
pub fn schema(stdout: &mut impl Write) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *stdout, &crate::snapshot::json_schema())?;
    writeln!(stdout)?;
    Ok(())
}

/// `gputaskman explain`.
pub fn explain(stdout: &mut impl Write) -> anyhow::Result<()> {
    write!(stdout, "{}", view::explain::text())?;
    Ok(())
}

/// `--gpu N` naming no device is a usage error, not an empty screen.
fn check_gpu_exists(cli: &Cli, snap: &Snapshot) -> anyhow::Result<()> {
    match cli.gpu {
        Some(choice) if !snap.devices.iter().any(|d| choice.matches(d)) => {
            anyhow::bail!("--gpu {choice}: no such device (see --list-gpus)")
        }
        _ => Ok(()),
    }
}
