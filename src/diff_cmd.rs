//! `gputaskman diff BEFORE.json AFTER.json`: two snapshots compared, as
//! text ([`crate::view::diff`]) or as JSON with every move.

use crate::snapshot::{diff, load};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A snapshot from `gputaskman --json`.
    #[arg(value_name = "BEFORE.json")]
    pub before: PathBuf,
    /// A later snapshot from `gputaskman --json`.
    #[arg(value_name = "AFTER.json")]
    pub after: PathBuf,
    /// Print the comparison as JSON, every move included.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &DiffArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let before = load::load(&args.before)?;
    let after = load::load(&args.after)?;
    let d = diff::diff(
        &before,
        &after,
        &args.before.display().to_string(),
        &args.after.display().to_string(),
    );
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &d)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", crate::view::diff::render(&d))?;
    }
    Ok(())
}
