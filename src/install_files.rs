//! The files a package puts beside the binary: shell completions and the
//! man page. Both are generated from the clap definition, so they never
//! drift from the flags the binary really takes; the package build
//! (scripts/package.sh) writes them with these commands.

use std::io::Write;

/// `gputaskman completions SHELL`: the completion script on `out`.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn Write) -> std::io::Result<()> {
    // Generated into memory first: clap_complete panics when its writer
    // fails, and stdout fails whenever a reader stops early (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut crate::cli::command(), "gputaskman", &mut script);
    out.write_all(&script)
}

/// `gputaskman manpage`: the roff man page (section 1) on `out`.
pub fn write_manpage(out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(crate::cli::command()).render(out)
}
