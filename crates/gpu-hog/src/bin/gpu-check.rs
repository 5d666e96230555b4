//! `gpu-check`: compares a `gputaskman --json` snapshot with nvidia-smi's
//! answers of the same moment; prints one line a check and exits 1 when
//! one fails. The checks are in crates/gpu-hog/src/compare.rs.

use clap::Parser;
use gpu_hog::compare::{compare, Holder};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    version,
    about = "Compare gputaskman --json with nvidia-smi's output of the same moment."
)]
struct Args {
    /// `gputaskman --json` output.
    #[arg(long, value_name = "FILE")]
    snapshot: PathBuf,
    /// `nvidia-smi --query-gpu=index,memory.total,memory.used --format=csv,noheader,nounits` output.
    #[arg(long, value_name = "FILE")]
    smi_gpus: PathBuf,
    /// `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` output.
    #[arg(long, value_name = "FILE")]
    smi_apps: PathBuf,
    /// A process that allocated SIZE: PID:SIZE (e.g. 4242:2GiB); repeat for each.
    #[arg(long, value_name = "PID:SIZE")]
    holder: Vec<Holder>,
}

/// The files are ours (written by device-check.sh), but still bounded.
const MAX_INPUT: u64 = 64 << 20;

fn read(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT).read_to_end(&mut text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// The three files, read and the snapshot parsed.
fn inputs(args: &Args) -> Result<(serde_json::Value, String, String), String> {
    let snapshot = serde_json::from_str(&read(&args.snapshot)?)
        .map_err(|e| format!("{}: not JSON: {e}", args.snapshot.display()))?;
    Ok((snapshot, read(&args.smi_gpus)?, read(&args.smi_apps)?))
}

fn main() {
    let args = Args::parse();
    match inputs(&args) {
        Ok((snapshot, gpus, apps)) => {
            let report = compare(&snapshot, &gpus, &apps, &args.holder);
            print!("{}", report.render());
            std::process::exit(if report.passed() { 0 } else { 1 });
        }
        Err(e) => {
            eprintln!("gpu-check: {e}");
            std::process::exit(2);
        }
    }
}
