//! `--ascii`: output in ASCII only, for terminals, fonts and logs without
//! anything else. The views pick their own stand-ins where they carry
//! meaning (each process's bar glyph, the sparklines' heights, borders and
//! tree branches); everything else that is not ASCII, the views' own
//! glyphs and the names processes and models bring alike, is folded here,
//! as it is output, so no glyph added later can slip through.

use unicode_width::UnicodeWidthChar;

/// What `c` is drawn as: itself where it is ASCII, the views' glyphs by a
/// look-alike, any other character by a `?` for each column it takes.
pub fn stand_in(c: char, out: &mut String) {
    let look_alike = match c {
        c if c.is_ascii() => {
            out.push(c);
            return;
        }
        '·' => ".",
        '…' => "~",
        '✓' => "+",
        '↑' => "^",
        '↓' => "v",
        '─' | '━' => "-",
        '│' | '┃' | '▏' => "|",
        // "37 °C" reads "37 C".
        '°' => "",
        _ => {
            out.extend(std::iter::repeat_n('?', c.width().unwrap_or(0)));
            return;
        }
    };
    out.push_str(look_alike);
}

/// `s` in ASCII only.
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        stand_in(c, &mut out);
    }
    out
}

/// `s`, in ASCII only where `--ascii` asks for it.
pub fn fold_when(ascii: bool, s: String) -> String {
    if ascii {
        fold(&s)
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::fold;

    #[test]
    fn glyphs_become_look_alikes_and_other_text_question_marks_column_for_column() {
        assert_eq!(fold("37 °C · gpu 15% …"), "37 C . gpu 15% ~");
        assert_eq!(fold("VRAM↓ GPU%↑ [api✓]"), "VRAMv GPU%^ [api+]");
        assert_eq!(fold("模型 Grüße"), "???? Gr??e");
        assert!(fold("🦙 █▓ ├─").bytes().all(|b| b < 0x80));
    }
}
