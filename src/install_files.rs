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

/// `gputaskman manpage`: the roff man page (section 1) on `out`, with a
/// KEYS section for the live view from its one table of keys.
pub fn write_manpage(out: &mut dyn Write) -> std::io::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(crate::cli::command()).render(&mut page)?;
    page.extend_from_slice(keys_section().as_bytes());
    out.write_all(&page)
}

/// The live view's keys as a roff section: each key a tagged paragraph.
fn keys_section() -> String {
    use crate::view::tui::app::{KeyWhen, KEYS};
    let mut out = String::from(".SH KEYS\nThe live view's keys (\\fB?\\fR in it lists them).\n");
    for k in KEYS {
        let when = match k.when {
            KeyWhen::Always => "",
            KeyWhen::Live => " (live, not in a replay)",
            KeyWhen::Replay => " (in a replay)",
            KeyWhen::Signals => " (not with \\-\\-readonly, \\-\\-remote or in a replay)",
        };
        out.push_str(&format!(".TP\n\\fB{}\\fR\n{}{when}\n", roff(k.keys), roff(k.does)));
    }
    out
}

/// Text for roff: backslashes doubled, dashes as dashes, and no line
/// starting with a control character (`.` or `'`).
fn roff(s: &str) -> String {
    let s = s.replace('\\', "\\\\").replace('-', "\\-");
    if s.starts_with(['.', '\'']) {
        format!("\\&{s}")
    } else {
        s
    }
}
