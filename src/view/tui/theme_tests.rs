//! The looks the flags choose (`--light`, `--no-color`, `--ascii`), drawn on
//! ratatui's TestBackend from the desktop fixture.

use super::app::{App, SortKey};
use super::fixture::desktop;
use super::{render, Look};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::Color;
use ratatui::Terminal;

const W: u16 = 160;
const H: u16 = 48;

fn app(look: Look) -> App {
    let mut app = look.app(true, false);
    app.feed_status = "live, every 1.0 s".into();
    // Two samples: the sparklines have something to draw.
    app.show(desktop());
    app.show(desktop());
    app
}

fn buffer(app: &mut App) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(W, H)).unwrap();
    t.draw(|f| render::draw(f, app)).unwrap();
    t.backend().buffer().clone()
}

fn text(b: &Buffer) -> String {
    b.content().iter().map(|c| c.symbol()).collect()
}

/// Box drawing (U+2500-U+257F) and block elements (U+2580-U+259F): what
/// terminals without those fonts show as boxes or question marks.
fn box_or_block(s: &str) -> Vec<char> {
    s.chars().filter(|c| ('\u{2500}'..='\u{259f}').contains(c)).collect()
}

/// The main screen, the `?` overlay and the filter prompt, as text.
fn every_screen(look: Look) -> Vec<String> {
    let mut a = app(look.clone());
    let main = text(&buffer(&mut a));
    a.on_key(KeyEvent::from(KeyCode::Char('?')));
    let overlay = text(&buffer(&mut a));
    let mut a = app(look);
    a.on_key(KeyEvent::from(KeyCode::Char('/')));
    let filter = text(&buffer(&mut a));
    vec![main, overlay, filter]
}

#[test]
fn ascii_draws_nothing_but_ascii() {
    let ascii = Look {
        ascii: true,
        ..Look::default()
    };
    for (default, ascii) in every_screen(Look::default()).iter().zip(every_screen(ascii.clone())) {
        assert!(!box_or_block(default).is_empty(), "the default look draws them");
        // Not only no box or block: no middle dot, arrow, degree sign, ...
        let others: Vec<char> = ascii.chars().filter(|c| !c.is_ascii()).collect();
        assert_eq!(others, Vec::<char>::new(), "{ascii}");
        // Same words, same places: only the glyphs differ.
        assert_eq!(default.chars().count(), ascii.chars().count());
        for word in ["gputaskman", "dwm.exe", "5.01 GiB used of 15.99 GiB"] {
            assert_eq!(default.contains(word), ascii.contains(word), "{word}");
        }
    }
    let [main, overlay, filter] = &every_screen(ascii)[..] else {
        unreachable!()
    };
    // The bar's process glyphs, the detail pane's rule and the overlay's box.
    assert!(main.contains("##") && main.contains("-----"), "{main}");
    assert!(overlay.contains('+') && overlay.contains('|'), "{overlay}");
    assert!(filter.contains(" filter: _ "), "{filter}");
}

#[test]
fn light_keeps_the_text_and_trades_the_bright_colours_for_dark_ones() {
    let dark = buffer(&mut app(Look::default()));
    let light = buffer(&mut app(Look {
        light: true,
        ..Look::default()
    }));
    assert_eq!(text(&dark), text(&light));
    let fgs = |b: &Buffer, c: Color| b.content().iter().filter(|cell| cell.fg == c).count();
    // Bright cyan, bright green and yellow are near-invisible on white.
    for bright in [Color::LightCyan, Color::LightGreen, Color::Yellow] {
        assert_eq!(fgs(&light, bright), 0, "{bright:?}");
    }
    assert!(fgs(&dark, Color::LightCyan) > 0 && fgs(&dark, Color::Yellow) > 0);
    // The title, in each.
    let title = |b: &Buffer| b[(0, 0)].fg;
    assert_eq!((title(&dark), title(&light)), (Color::LightCyan, Color::Blue));
}

#[test]
fn no_color_and_sort_reach_the_view() {
    let look = Look {
        no_color: true,
        sort: Some(SortKey::Pid),
        ..Look::default()
    };
    let mut a = app(look);
    assert_eq!(a.sort, SortKey::Pid);
    let b = buffer(&mut a);
    assert!(b.content().iter().all(|c| c.fg == Color::Reset && c.bg == Color::Reset));
    assert!(app(Look::default()).color);
    // NO_COLOR in the environment alone turns it off as well.
    assert!(!Look::default().app(false, false).color);
}
