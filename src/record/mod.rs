//! Recordings: `record` of snapshots over time, and the commands that
//! read recordings back (`summary`, `plot`, `replay`), all through
//! [`open_recording`]: an index of the lines, each snapshot parsed when it
//! is asked for.
//!
//! A recording is JSON lines: one `Snapshot` (the `--json` schema, on one
//! line) per sample, plain or zstd (`.zst`, [`codec`]). See [`write`] for
//! why a recording cut short still reads, and [`index`] for what is
//! skipped.

pub mod codec;
pub mod index;
pub mod plot;
pub mod summary;
pub mod usage;
pub mod write;

pub use index::{open_recording, snapshots, RecordingIndex};

use crate::collect::{Collector, Options};
use crate::view::safe_text::safe;
use anyhow::{bail, Context as _};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Append snapshots to this file, one JSON line each; zstd when the
    /// name ends in .zst.
    #[arg(short = 'o', long = "output", value_name = "FILE.jsonl")]
    pub output: PathBuf,
    /// Seconds between snapshots (default: the global --interval, 1).
    #[arg(long, value_name = "S", value_parser = crate::cli::values::seconds, allow_negative_numbers = true)]
    pub interval: Option<f64>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "S", value_parser = crate::cli::values::seconds, allow_negative_numbers = true)]
    pub duration: Option<f64>,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// A recording from `gputaskman record` (plain or .zst).
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// List the processes never on a GPU too (their RSS only); by default
    /// they are counted, not listed.
    #[arg(long)]
    pub all: bool,
    /// What a kWh costs, in any currency: the energy figures get a cost.
    #[arg(long, value_name = "PRICE", value_parser = price)]
    pub price_per_kwh: Option<f64>,
}

/// A price: a finite number, not negative.
fn price(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!("{text:?} is not a price (a number, 0 or more, e.g. 0.30)")),
    }
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A recording from `gputaskman record` (plain or .zst).
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
    /// Write the SVG here.
    #[arg(short = 'o', long = "output", value_name = "FILE.svg")]
    pub output: PathBuf,
    /// Draw this many processes at most, those with the highest peaks.
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub top: usize,
    /// Draw resident memory (RSS) of the processes too.
    #[arg(long)]
    pub rss: bool,
}

/// What `replay` steps through.
impl crate::view::tui::Frames for RecordingIndex {
    fn len(&self) -> usize {
        self.len()
    }

    fn taken_at(&self, i: usize) -> Option<&str> {
        self.taken_at(i)
    }

    fn get_many(&self, indices: &[usize]) -> Vec<anyhow::Result<crate::snapshot::Snapshot>> {
        self.get_many(indices)
    }
}

/// Opens a recording that must hold at least one snapshot.
pub fn read_some(path: &Path) -> anyhow::Result<RecordingIndex> {
    let rec = open_recording(path)?;
    if rec.is_empty() {
        let why: Vec<&str> = rec.skipped.iter().take(3).map(String::as_str).collect();
        if why.is_empty() {
            bail!("{}: empty, no snapshot in it", path.display());
        }
        bail!(
            "{}: no snapshot in it (not a recording from `gputaskman record`?): {}",
            path.display(),
            why.join("; ")
        );
    }
    Ok(rec)
}

/// `gputaskman summary FILE [--json]`.
pub fn run_summary(args: &SummaryArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let rec = read_some(&args.file)?;
    let mut s = summary::summarize(&args.file.display().to_string(), &rec);
    if let Some(price) = args.price_per_kwh {
        s.usage.set_price(price);
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &s)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", crate::view::summary::render(&s, args.all))?;
    }
    Ok(())
}

/// `gputaskman plot FILE -o FILE.svg`.
pub fn run_plot(args: &PlotArgs) -> anyhow::Result<()> {
    refuse_to_overwrite(&args.output, &args.file)?;
    let rec = read_some(&args.file)?;
    let title = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (svg, account) = plot::plot(
        &rec,
        &title,
        &plot::Options {
            top: args.top,
            rss: args.rss,
        },
    )
    .with_context(|| args.file.display().to_string())?;
    std::fs::write(&args.output, svg).with_context(|| format!("{}: cannot write", args.output.display()))?;
    eprintln!("{}: {account}", args.output.display());
    for why in &rec.skipped {
        eprintln!("skipped: {why}");
    }
    Ok(())
}

/// Fails when writing `output` would replace `input`: the same file by
/// name, by another spelling of it, through a symlink or as a hard link
/// (same-file compares device and inode, or the Windows file index). An
/// output that does not exist yet cannot be the input.
fn refuse_to_overwrite(output: &Path, input: &Path) -> anyhow::Result<()> {
    if same_file::is_same_file(output, input).unwrap_or(false) {
        bail!(
            "-o {}: that is the recording being read ({}); give another file",
            output.display(),
            input.display()
        );
    }
    Ok(())
}

static STOP: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Ctrl-C and SIGTERM end the recording between snapshots, with the zstd
/// frame closed (each line is on disk before that anyway).
fn catch_stop_signals() {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        let handler = on_stop_signal as extern "C" fn(libc::c_int);
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
    }
}

/// Sleeps until `until` or a stop signal; false when stopped.
fn sleep_until(until: Instant) -> bool {
    loop {
        if STOP.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// `gputaskman replay FILE`: the recording in the live view; lines that do
/// not read are said on stderr and skipped.
pub fn run_replay(file: &Path, look: crate::view::tui::Look) -> anyhow::Result<()> {
    let recording = read_some(file)?;
    for skipped in &recording.skipped {
        eprintln!(
            "gputaskman: {}: skipped {}",
            safe(&file.display().to_string()),
            safe(skipped)
        );
    }
    crate::view::tui::run_replay(Box::new(recording), look)
}

/// `gputaskman record -o FILE [--interval S] [--duration S]`: one snapshot
/// per interval, each appended as one line and flushed.
pub fn run_record(args: &RecordArgs, options: Options, default_interval: f64) -> anyhow::Result<()> {
    let interval = args.interval.unwrap_or(default_interval);
    // Bounded by `cli::values::seconds`; this floor is record's own.
    if interval < 0.01 {
        bail!("--interval {interval}: give a number of seconds, at least 0.01");
    }
    let gpu = options.gpu;
    let path = &args.output;
    let mut writer = write::RecordWriter::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    if writer.is_zstd() != write::is_zstd_name(path) {
        eprintln!(
            "{}: its content is {}, whatever its name says; appending {0}",
            path.display(),
            if writer.is_zstd() { "zstd" } else { "plain JSON lines" }
        );
    }
    catch_stop_signals();
    let mut collector = Collector::new(options);
    collector.prime();
    eprintln!(
        "recording to {} every {interval} s{} (Ctrl-C stops; each snapshot is written as it is taken)",
        path.display(),
        args.duration.map(|d| format!(" for {d} s")).unwrap_or_default()
    );
    // The first CPU% is measured over at least 100 ms.
    let start = Instant::now() + Duration::from_secs_f64(interval.min(0.1));
    let mut tick: u64 = 0;
    loop {
        if !sleep_until(start + Duration::from_secs_f64(interval * tick as f64)) {
            break;
        }
        let snap = collector.sample();
        if let Some(n) = gpu {
            if tick == 0 && !snap.devices.iter().any(|d| n.matches(d)) {
                bail!("--gpu {n}: no such device (see --list-gpus)");
            }
        }
        writer
            .append(&snap)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        // The next tick. A sample that ran late is followed at once by
        // the one due; one more than an interval late skips what was
        // missed rather than bunching samples.
        let elapsed = Instant::now().saturating_duration_since(start).as_secs_f64();
        tick = (tick + 1).max((elapsed / interval).floor() as u64);
        if args.duration.is_some_and(|d| interval * tick as f64 >= d - 1e-9) {
            break;
        }
    }
    let lines = writer.lines();
    writer
        .finish()
        .with_context(|| format!("{}: cannot write", path.display()))?;
    eprintln!("{}: {} written", path.display(), snapshots(lines));
    Ok(())
}
