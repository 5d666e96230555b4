//! Text from outside as a terminal may be shown it. Process names, command
//! lines, paths, GGUF strings, driver answers and a remote host's snapshot
//! are written by whoever runs that process or host, and a terminal obeys
//! what it is sent: an OSC sets the window title or (OSC 52) the clipboard,
//! `ESC[2J` clears the screen, `\r` and `\n` forge rows, bidi controls
//! reorder what follows. Every renderer passes such text through here, so
//! each of those characters arrives as a visible escape (`\e`, `\n`,
//! `\x07`, `\u{202e}`) and column widths are counted on what is shown.
//!
//! The data model and JSON keep the original text: serde escapes it by
//! JSON's rules, and a reader of the JSON may need the exact bytes.
//!
//! A backslash is left as it is: Windows paths are full of them, and the
//! aim is a terminal that does what gputaskman says, not a reversible code.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use unicode_width::UnicodeWidthChar;

/// Whether `c` must not reach a terminal as itself.
pub fn hidden(c: char) -> bool {
    matches!(
        c,
        // C0 (ESC, BEL, \t, \n, \r included), DEL, and C1: U+009B is CSI
        // and U+009D OSC to a terminal that reads 8-bit controls.
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Soft hyphen: invisible in some terminals, a column in others.
        | '\u{ad}'
        // Bidi marks, embeddings, overrides and isolates.
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        // Zero-width space, joiners, word joiner and invisible operators,
        // and the deprecated format controls: text that takes no column
        // hides what a name really is.
        | '\u{180e}' | '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2065}' | '\u{206a}'..='\u{206f}'
        // Line and paragraph separators: a new line to some terminals.
        | '\u{2028}' | '\u{2029}'
        // Byte order mark (zero-width no-break space), interlinear
        // annotations, and the tag characters (invisible ASCII).
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}'
    )
}

/// Writes the escape of a hidden `c`; all of it ASCII, one column a byte.
fn write_escape(c: char, out: &mut impl fmt::Write) -> fmt::Result {
    match c {
        '\u{1b}' => out.write_str("\\e"),
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        '\t' => out.write_str("\\t"),
        '\u{0}'..='\u{1f}' | '\u{7f}' => write!(out, "\\x{:02x}", c as u32),
        _ => write!(out, "\\u{{{:x}}}", c as u32),
    }
}

/// The columns `c` takes once escaped.
fn columns(c: char) -> usize {
    if hidden(c) {
        let mut n = Count(0);
        let _ = write_escape(c, &mut n);
        n.0
    } else {
        c.width().unwrap_or(0)
    }
}

/// Counts the bytes written (escapes are ASCII: bytes are columns).
struct Count(usize);

impl fmt::Write for Count {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// Writes `s` escaped, cut to `max` columns when it is wider (the last
/// column then `marker`, one column wide); an escape is written whole or
/// not at all.
fn write_fitted(s: &str, max: Option<usize>, marker: char, out: &mut impl fmt::Write) -> fmt::Result {
    // Cut: the room left beside the marker (none at all in zero columns).
    let (room, marked) = match max {
        Some(m) if width(s) > m => (Some(m.saturating_sub(1)), m > 0),
        _ => (None, false),
    };
    let mut used = 0;
    for c in s.chars() {
        if let Some(room) = room {
            let w = columns(c);
            if used + w > room {
                break;
            }
            used += w;
        }
        if hidden(c) {
            write_escape(c, out)?;
        } else {
            out.write_char(c)?;
        }
    }
    if marked {
        out.write_char(marker)?;
    }
    Ok(())
}

/// `s` with every character a terminal would obey shown as an escape;
/// borrowed when there is none.
pub fn escape<'a>(s: impl Into<Cow<'a, str>>) -> Cow<'a, str> {
    let s = s.into();
    if !s.chars().any(hidden) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 8);
    let _ = write_fitted(&s, None, '~', &mut out);
    Cow::Owned(out)
}

/// The display columns `s` takes once escaped.
pub fn width(s: &str) -> usize {
    s.chars().map(columns).sum()
}

/// `s` escaped and cut to at most `max` columns, a `~` in the last one
/// when cut. Cutting counts escapes whole, so none is left in half.
pub fn clip(s: &str, max: usize) -> String {
    clip_marked(s, max, '~')
}

/// [`clip`] with another one-column marker of the cut (the live view's
/// `…`).
pub fn clip_marked(s: &str, max: usize, marker: char) -> String {
    let mut out = String::new();
    let _ = write_fitted(s, Some(max), marker, &mut out);
    out
}

/// `s` for a format string, escaped. A width pads it to that many display
/// columns (`{:<16}`, `{:>10}`, `{:^8}`), a precision cuts it as [`clip`]
/// does (`{:.16}`).
pub fn safe(s: &str) -> Safe<'_> {
    Safe(s)
}

pub struct Safe<'a>(&'a str);

impl fmt::Display for Safe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A cut may leave a column a wide character did not fit into.
        let shown = match f.precision() {
            Some(p) if width(self.0) > p => width(&clip(self.0, p)),
            _ => width(self.0),
        };
        let pad = f.width().unwrap_or(0).saturating_sub(shown);
        let (before, after) = match f.align() {
            Some(fmt::Alignment::Right) => (pad, 0),
            Some(fmt::Alignment::Center) => (pad / 2, pad - pad / 2),
            _ => (0, pad),
        };
        for _ in 0..before {
            f.write_char(f.fill())?;
        }
        write_fitted(self.0, f.precision(), '~', f)?;
        for _ in 0..after {
            f.write_char(f.fill())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c0_del_and_c1_controls_are_shown_as_escapes() {
        assert_eq!(escape("\u{1b}]0;pwned\u{7}"), "\\e]0;pwned\\x07");
        assert_eq!(escape("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(escape("\u{0}\u{8}\u{7f}"), "\\x00\\x08\\x7f");
        assert_eq!(escape("\u{1b}[2J"), "\\e[2J");
        // The 8-bit CSI and OSC, and NEL.
        assert_eq!(escape("\u{9b}2J\u{9d}0;x\u{85}"), "\\u{9b}2J\\u{9d}0;x\\u{85}");
        assert_eq!(escape("\u{80}\u{9f}"), "\\u{80}\\u{9f}");
    }

    #[test]
    fn bidi_controls_are_shown_as_escapes() {
        for (c, shown) in [
            ('\u{202a}', "\\u{202a}"),
            ('\u{202b}', "\\u{202b}"),
            ('\u{202c}', "\\u{202c}"),
            ('\u{202d}', "\\u{202d}"),
            ('\u{202e}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2067}', "\\u{2067}"),
            ('\u{2068}', "\\u{2068}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{61c}', "\\u{61c}"),
        ] {
            assert_eq!(escape(format!("x{c}y")), format!("x{shown}y"));
        }
    }

    #[test]
    fn invisible_format_characters_are_shown_as_escapes() {
        assert_eq!(escape("a\u{200b}b\u{200d}c\u{feff}"), "a\\u{200b}b\\u{200d}c\\u{feff}");
        assert_eq!(escape("\u{2028}\u{2029}"), "\\u{2028}\\u{2029}");
        assert_eq!(escape("\u{2060}\u{ad}\u{180e}"), "\\u{2060}\\u{ad}\\u{180e}");
        assert_eq!(escape("\u{e0041}\u{e007f}"), "\\u{e0041}\\u{e007f}");
    }

    #[test]
    fn printable_text_is_kept_and_borrowed() {
        for s in [
            "llama-server",
            "Grüße",
            "模型服务",
            "🦙 model",
            "C:\\models\\x.gguf",
            "e\u{301}",
        ] {
            assert!(matches!(escape(s), Cow::Borrowed(b) if b == s), "{s}");
        }
        // Escaping what is escaped changes nothing.
        let once = escape("\u{1b}]52;c;eA==\u{7}\u{202e}").into_owned();
        assert_eq!(escape(once.as_str()), once);
    }

    #[test]
    fn widths_are_display_columns_after_escaping() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("模型"), 4);
        assert_eq!(width("e\u{301}"), 1);
        assert_eq!(width("\u{1b}[2J"), 5);
        assert_eq!(width("\u{202e}"), 8);
        assert_eq!(width(""), 0);
    }

    #[test]
    fn a_cut_never_leaves_half_an_escape() {
        let s = "ab\u{202e}cd";
        assert_eq!(clip(s, 20), "ab\\u{202e}cd");
        assert_eq!(clip(s, 12), "ab\\u{202e}cd");
        // Eleven columns: the escape fits, then `~`.
        assert_eq!(clip(s, 11), "ab\\u{202e}~");
        // Anything less than the escape whole cuts before it.
        for max in 3..=10 {
            assert_eq!(clip(s, max), "ab~", "{max}");
        }
        assert_eq!(clip(s, 1), "~");
        assert_eq!(clip(s, 0), "");
        assert_eq!(clip("\u{1b}x", 2), "~");
    }

    #[test]
    fn a_cut_counts_wide_characters_as_two_columns() {
        assert_eq!(clip("模型服务", 8), "模型服务");
        assert_eq!(clip("模型服务", 7), "模型服~");
        // A wide character that does not fit leaves its column empty.
        assert_eq!(clip("模型服务", 6), "模型~");
        assert_eq!(width(&clip("模型服务", 6)), 5);
    }

    #[test]
    fn format_widths_pad_and_cut_in_display_columns() {
        assert_eq!(format!("[{:<6}]", safe("模型")), "[模型  ]");
        assert_eq!(format!("[{:>6}]", safe("\u{1b}")), "[    \\e]");
        assert_eq!(format!("[{:^6}]", safe("ab")), "[  ab  ]");
        assert_eq!(format!("[{:<5.5}]", safe("a\u{1b}]0;x")), "[a\\e]~]");
        assert_eq!(format!("[{:<6.6}]", safe("模型服务")), "[模型~ ]");
        assert_eq!(format!("{}", safe("a\nb")), "a\\nb");
    }
}
