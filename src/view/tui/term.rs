//! The terminal: raw mode, the alternate screen and the mouse on entry, all
//! of it undone on exit, on a panic, on Ctrl-C (a key in raw mode) and on
//! SIGINT, SIGTERM and SIGHUP (a flag the UI loop checks every tick).

use super::{audit, render, App};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use std::io::{IsTerminal, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// The terminal is in the view's modes and needs restoring.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// A signal asked the view to end.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

pub fn require_terminal() -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!("the live view needs a terminal; use --once or --json for one snapshot");
    }
    Ok(())
}

pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// What waiting on the terminal gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// Bytes to read.
    Ready,
    /// The wait ended with nothing to read (timeout, or a signal).
    Idle,
    /// The terminal is gone (its window closed, the ssh session dropped).
    HungUp,
}

/// Waits up to `wait` for input on the terminal (stdin, which the view
/// requires to be one, and which crossterm reads). This comes before every
/// crossterm read because crossterm 0.28 spins forever in its read loop
/// once the terminal hangs up (the tty then reads 0 bytes or EIO without
/// end), which left a closed view running at 100% CPU; poll(2) reports the
/// hang-up instead, and returns early on a signal.
#[cfg(unix)]
pub fn wait_for_input(wait: std::time::Duration) -> Input {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    if n <= 0 {
        return Input::Idle;
    }
    if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Input::HungUp
    } else {
        Input::Ready
    }
}

#[cfg(not(unix))]
pub fn wait_for_input(wait: std::time::Duration) -> Input {
    match ratatui::crossterm::event::poll(wait) {
        Ok(true) => Input::Ready,
        Ok(false) => Input::Idle,
        Err(_) => Input::HungUp,
    }
}

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGNALLED.store(true, Ordering::SeqCst);
}

fn install_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(unix)]
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: the handler only stores to an atomic.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut action.sa_mask);
                action.sa_flags = libc::SA_RESTART;
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Puts the terminal back as it was; does nothing when it already is.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = std::io::stdout();
        let _ = execute!(
            out,
            DisableMouseCapture,
            LeaveAlternateScreen,
            ratatui::crossterm::cursor::Show
        );
        let _ = terminal::disable_raw_mode();
    }
}

pub struct Terminal {
    inner: ratatui::Terminal<CrosstermBackend<Stdout>>,
}

impl Terminal {
    pub fn enter() -> anyhow::Result<Terminal> {
        install_handlers();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, EnableMouseCapture) {
            restore();
            return Err(e.into());
        }
        let mut inner = ratatui::Terminal::new(CrosstermBackend::new(out))?;
        inner.hide_cursor()?;
        inner.clear()?;
        Ok(Terminal { inner })
    }

    pub fn draw(&mut self, app: &mut App) -> anyhow::Result<()> {
        self.inner.draw(|f| {
            render::draw(f, app);
            // The renderers escape what others wrote; this is the last
            // guard between a forgotten path and the terminal.
            audit::scrub(f.buffer_mut());
        })?;
        Ok(())
    }

    pub fn leave(self) -> anyhow::Result<()> {
        drop(self);
        Ok(())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        restore();
    }
}
