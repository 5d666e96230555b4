//! The live view: an htop for what is inside the GPU.
//!
//! It renders from a [`crate::snapshot::Snapshot`] only. Snapshots come from a [`Feed`]: the
//! collector sampling on a thread of its own ([`run_live`]) or a recording
//! played back ([`run_replay`]); the UI thread never waits on a source.
//!
//! The arrows run one way: state and keys, then what a row says, then
//! drawing; nothing drawn imports the drawer.
//!
//! - `app`: state and keys (pure, tested with key events); `columns`: the
//!   table's columns, their names and fitting; `history`: the sparklines'
//!   last few minutes
//! - `describe`: words for what the numbers are, what a cell says
//! - `render`: one frame from the state (tested on ratatui's TestBackend),
//!   laid out from `theme`, `header` (devices), `table`, `detail`,
//!   `model_rows` and `overlay`
//! - `feed`: live and recorded sources
//! - `term`: the terminal, restored on exit, panic, Ctrl-C, SIGTERM, SIGHUP

pub mod app;
pub mod audit;
pub mod columns;
pub mod describe;
mod detail;
pub mod feed;
mod header;
mod health_mark;
pub mod history;
mod model_rows;
mod overlay;
pub mod render;
mod table;
pub mod term;
mod theme;
mod tree;
pub mod usage;

#[cfg(test)]
mod audit_tests;
#[cfg(test)]
mod container_tests;
#[cfg(test)]
mod first_hour_tests;
#[cfg(test)]
pub mod fixture;
#[cfg(test)]
mod label_tests;
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod theme_tests;
#[cfg(test)]
mod usage_tests;

pub use app::App;
pub use feed::{Feed, Frames, LiveFeed, ReplayFeed};

use crate::collect::Options;
use app::Action;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use std::time::{Duration, Instant};

/// How often the UI looks for a new snapshot and for a signal when no key
/// comes: cheap (a channel poll), and well inside the 300 ms promise.
const TICK: Duration = Duration::from_millis(100);

/// How the view starts, from the flags and the config file.
#[derive(Debug, Clone, Default)]
pub struct Look {
    pub sort: Option<app::SortKey>,
    pub light: bool,
    pub no_color: bool,
    pub ascii: bool,
    /// `--readonly` (and the config's `readonly`; `--remote` sets it too):
    /// no signal is sent.
    pub readonly: bool,
    /// `--user`: only this user's processes.
    pub user: Option<String>,
    /// The config file's `columns`.
    pub columns: Option<Vec<columns::Column>>,
}

impl Look {
    /// The view's state at start; `color`: whether the environment allows
    /// it (NO_COLOR).
    fn app(self, color: bool, replay: bool) -> App {
        let mut app = App::new(color && !self.no_color, replay);
        app.sort = self.sort.unwrap_or(app.sort);
        app.light = self.light;
        app.ascii = self.ascii;
        app.readonly |= self.readonly;
        app.user = self.user;
        app.columns = self.columns;
        app
    }
}

/// The live view of this machine, refreshed every `interval`.
pub fn run_live(options: Options, interval: Duration, look: Look) -> anyhow::Result<()> {
    term::require_terminal()?;
    let feed = LiveFeed::start(options, interval.max(Duration::from_millis(100)));
    run_feed(Box::new(feed), look)
}

/// A recording played back through the same view: `[` `]` step, `{` `}`
/// jump to the start and the end, `<` `>` speed, space plays and pauses.
pub fn run_replay(frames: Box<dyn Frames>, look: Look) -> anyhow::Result<()> {
    if frames.is_empty() {
        anyhow::bail!("the recording holds no snapshot");
    }
    term::require_terminal()?;
    run_feed(Box::new(ReplayFeed::new(frames)), look)
}

/// Whether colour is wanted: NO_COLOR set to anything non-empty turns it
/// off (no-color.org).
pub fn color_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Runs the view on any feed (live, replay, a fleet of `serve` hosts).
pub fn run_feed(mut feed: Box<dyn Feed>, look: Look) -> anyhow::Result<()> {
    let mut app = look.app(color_wanted(), feed.is_replay());
    app.count_usage_every(feed.interval_s());
    let mut terminal = term::Terminal::enter()?;
    let mut dirty = true;
    loop {
        if term::signalled() {
            break;
        }
        let now = Instant::now();
        while let Some(update) = feed.poll(now) {
            app.apply(update);
            dirty = true;
        }
        let status = feed.status();
        if status != app.feed_status {
            app.feed_status = status;
            dirty = true;
        }
        if dirty {
            terminal.draw(&mut app)?;
            dirty = false;
            // The end-to-end test checks that a panic restores the terminal.
            if app.snapshot.is_some() && std::env::var_os("GPUTASKMAN_TEST_PANIC").is_some() {
                panic!("GPUTASKMAN_TEST_PANIC is set: panicking on purpose");
            }
        }
        let wait = feed
            .next_due()
            .map(|due| due.saturating_duration_since(Instant::now()))
            .unwrap_or(TICK)
            .min(TICK);
        // The terminal is gone: nothing to draw on, nobody to answer. A
        // timeout or a signal (SIGWINCH included) ends the wait early too.
        if term::wait_for_input(wait) == term::Input::HungUp {
            break;
        }
        // Everything crossterm has: keys, mouse, and resizes (which reach
        // it through its own SIGWINCH pipe, not stdin).
        let mut quit = false;
        while !quit {
            let event = match event::poll(Duration::ZERO).and_then(|ready| ready.then(event::read).transpose()) {
                Ok(Some(e)) => e,
                Ok(None) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => break,
                Err(e) => return Err(e.into()),
            };
            let action = match event {
                Event::Key(k) if k.kind != KeyEventKind::Release => app.on_key(k),
                Event::Mouse(m) => app.on_mouse(m),
                Event::Resize(..) => Action::Redraw,
                _ => Action::None,
            };
            match action {
                Action::Quit => quit = true,
                Action::Feed(cmd) => {
                    feed.command(cmd, Instant::now());
                    dirty = true;
                }
                Action::Signal(signal, targets) => {
                    app.send(signal, &targets);
                    dirty = true;
                }
                Action::Redraw => dirty = true,
                Action::None => {}
            }
        }
        if quit {
            break;
        }
    }
    terminal.leave()
}
