//! Text for a terminal (src/view/safe_text.rs): whatever the bytes, what
//! is shown carries no C0, DEL, C1 or bidi control, escaping it again
//! changes nothing, and a cut to any width fits that width and ends on a
//! whole escape (marked `~` by `clip`, `…` by `clip_marked`).
#![no_main]

use gputaskman::view::safe_text::{clip, clip_marked, escape, safe, width};
use libfuzzer_sys::fuzz_target;

/// What a terminal obeys, spelled apart from the sanitizer's own list:
/// controls (C0, DEL, C1) and the bidi marks, embeddings, overrides and
/// isolates.
fn obeyed(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fuzz_target!(|data: &[u8]| {
    let s = gputaskman_fuzz::text(data);
    let shown = escape(s.as_str());
    assert!(!shown.chars().any(obeyed), "{shown:?}");
    assert_eq!(escape(shown.as_ref()), shown);
    let total = width(&s);
    assert_eq!(width(&shown), total);

    // Where each character's escape (or the character) ends in `shown`.
    let mut ends = vec![0];
    for c in s.chars() {
        ends.push(ends.last().unwrap() + escape(c.to_string()).len());
    }
    assert_eq!(ends.last().copied(), Some(shown.len()));

    // Narrow widths and those around the whole width (every width would be
    // quadratic in the input).
    for max in (0..=total + 1).filter(|m| *m <= 24 || *m + 24 >= total) {
        let cut = clip(&s, max);
        assert!(width(&cut) <= max, "{max}: {cut:?}");
        assert!(!cut.chars().any(obeyed), "{cut:?}");
        if total <= max {
            assert_eq!(cut, shown);
            assert_eq!(clip_marked(&s, max, '…'), shown);
        } else {
            let kept = if max == 0 {
                cut.as_str()
            } else {
                cut.strip_suffix('~').expect("a cut ends in ~")
            };
            assert!(shown.starts_with(kept), "{max}: {cut:?} of {shown:?}");
            assert!(ends.contains(&kept.len()), "{max}: half an escape in {cut:?}");
            let marked = if max == 0 { String::new() } else { format!("{kept}…") };
            assert_eq!(clip_marked(&s, max, '…'), marked, "{max}");
        }
        let padded = format!("{:<max$.max$}", safe(&s));
        assert_eq!(width(&padded), max, "{max}: {padded:?}");
    }
});
