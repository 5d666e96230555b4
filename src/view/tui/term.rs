//! The terminal: raw mode, the alternate screen and the mouse on entry, all
//! of it undone on exit, on a panic, on Ctrl-C (a key in raw mode) and on
//! SIGINT, SIGTERM and SIGHUP (a flag the UI loop checks every tick). A
//! guard thread ends the process when the loop does not see the flag, or
//! the terminal hanging up, within [`GRACE`]: a view busy with one long
//! frame must not outlive its terminal or ignore SIGTERM.

use super::app::App;
use super::{audit, render};
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

/// How long the UI loop has to end by itself once asked to, or once the
/// terminal is gone, before the guard ends the process.
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

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

/// Whether the terminal hangs up within `wait`: poll(2) with no events
/// asked reports only that, and reads nothing crossterm would miss.
#[cfg(unix)]
fn hung_up_within(wait: std::time::Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: 0,
        revents: 0,
    };
    let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    n > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// Watches, while the view runs, for a signal or the terminal hanging up,
/// and ends the process if the UI loop has not ended [`GRACE`] after: the
/// loop checks both between frames, and a frame may take long (a fleet's
/// answer). The terminal is restored first where it still answers, and
/// the status is the loop's own (0).
#[cfg(unix)]
fn start_guard() {
    let guard = || loop {
        if !ACTIVE.load(Ordering::SeqCst) {
            return;
        }
        if !(hung_up_within(std::time::Duration::from_millis(100)) || signalled()) {
            continue;
        }
        // The loop ends at its next check of the flag.
        SIGNALLED.store(true, Ordering::SeqCst);
        let asked = std::time::Instant::now();
        while ACTIVE.load(Ordering::SeqCst) && asked.elapsed() < GRACE {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if !ACTIVE.load(Ordering::SeqCst) {
            return;
        }
        // The restore writes to the terminal, which may block (a stopped
        // pane): it gets a moment, then the process ends regardless.
        let (done, restored) = std::sync::mpsc::channel();
        let _ = std::thread::Builder::new().spawn(move || {
            restore();
            let _ = done.send(());
        });
        let _ = restored.recv_timeout(std::time::Duration::from_millis(500));
        // SAFETY: ends the process at once, without running destructors or
        // flushing buffers another thread may be writing.
        unsafe { libc::_exit(0) };
    };
    // Without the guard the view still ends between frames.
    let _ = std::thread::Builder::new().name("gputaskman-guard".into()).spawn(guard);
}

#[cfg(not(unix))]
fn start_guard() {}

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
        start_guard();
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
