//! The web view: the page `serve` answers `/` with, its script and its
//! styles, built into the binary (src/serve/web/). The page fetches
//! `/snapshot` once per sampling interval and draws it; nothing in it
//! comes from anywhere but this server, and the Content-Security-Policy
//! every answer carries (src/serve/http.rs) holds it to that.
//!
//! Every figure the page shows is a field of the snapshot, set as text:
//! the script never builds HTML from a string, so a process named
//! `<script>` is shown, not run (tests/web.rs drives it in Chromium).

use super::http::{Body, Response};

const PAGE: &str = include_str!("web/page.html");
const SCRIPT: &str = include_str!("web/page.js");
const STYLE: &str = include_str!("web/page.css");
const ICON: &str = include_str!("web/favicon.svg");

/// The page, with the interval its script refreshes at.
pub fn page(interval_s: f64) -> String {
    PAGE.replace("{interval_s}", &format!("{interval_s}"))
}

/// The page's own files, by path.
pub fn asset(path: &str) -> Option<Response> {
    let (content_type, body) = match path {
        "/page.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/page.css" => ("text/css; charset=utf-8", STYLE),
        "/favicon.svg" => ("image/svg+xml", ICON),
        _ => return None,
    };
    Some(Response::new(200, content_type, Body::Static(body)))
}

/// What a browser transfers on the first load: the page and its files.
pub fn first_load_bytes(interval_s: f64) -> usize {
    page(interval_s).len() + SCRIPT.len() + STYLE.len() + ICON.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranges of a regex character class written as `\uXXXX`,
    /// `\u{X}` and `A-B` of those.
    fn hidden_class(class: &str) -> Vec<std::ops::RangeInclusive<char>> {
        let mut chars = Vec::new();
        let mut rest = class;
        while let Some(after) = rest.strip_prefix("\\u") {
            let (hex, tail) = match after.strip_prefix('{') {
                Some(braced) => braced.split_once('}').unwrap(),
                None => after.split_at(4),
            };
            chars.push(char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap());
            rest = match tail.strip_prefix('-') {
                Some(t) => {
                    chars.push('-');
                    t
                }
                None => tail,
            };
        }
        assert!(rest.is_empty(), "not understood: {rest}");
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            if chars.get(i + 1) == Some(&'-') {
                ranges.push(chars[i]..=chars[i + 2]);
                i += 3;
            } else {
                ranges.push(chars[i]..=chars[i]);
                i += 1;
            }
        }
        ranges
    }

    #[test]
    fn the_page_names_only_its_own_files_and_the_interval() {
        let page = page(0.5);
        assert!(page.contains("content=\"0.5\""), "{page}");
        for file in ["page.js", "page.css", "favicon.svg"] {
            assert!(page.contains(&format!("\"{file}\"")), "{file}");
            assert!(asset(&format!("/{file}")).is_some());
        }
        // No outside asset: no scheme-relative or absolute URL at all.
        for text in [page.as_str(), SCRIPT, STYLE] {
            assert!(!text.contains("//cdn") && !text.contains("http://") && !text.contains("https://"));
        }
        // The script never parses a string as HTML.
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "Function(",
        ] {
            assert!(!SCRIPT.contains(sink), "{sink}");
        }
        assert!(asset("/other").is_none());
        // The script's hidden characters are safe_text's, one for one.
        let class = SCRIPT
            .split("const HIDDEN = /[")
            .nth(1)
            .and_then(|r| r.split("]/gu;").next())
            .unwrap();
        let script_hides = hidden_class(class);
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            assert_eq!(
                script_hides.iter().any(|r| r.contains(&c)),
                crate::view::safe_text::hidden(c),
                "U+{:04X}",
                c as u32
            );
        }
        // The script's words for the clock-event reasons are the snapshot's.
        use crate::snapshot::health::{AMD_THROTTLERS, HOT_MARGIN_C, REASONS};
        let named = REASONS.iter().map(|(_, id, words)| (id, words));
        for (id, words) in named.chain(AMD_THROTTLERS.iter().map(|(_, id, words)| (id, words))) {
            assert!(SCRIPT.contains(&format!("  {id}: '{words}',")), "{id}");
        }
        assert!(SCRIPT.contains(&format!("const HOT_MARGIN_C = {HOT_MARGIN_C};")));
        assert!(first_load_bytes(1.0) > SCRIPT.len());
    }
}
