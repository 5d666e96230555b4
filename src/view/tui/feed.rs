//! Where the live view's snapshots come from: the collector on a thread of
//! its own ([`LiveFeed`]) or a recording ([`ReplayFeed`]). The view renders
//! whatever a feed hands it and never asks a source itself.

use crate::collect::Options;
use crate::snapshot::Snapshot;
use crate::units::unix_seconds;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a feed hands the view.
#[derive(Debug)]
pub enum Update {
    /// The next snapshot in time: appended to the history.
    Next(Box<Snapshot>),
    /// A jump (replay seek): the history is rebuilt from these, oldest
    /// first; the last one is shown.
    Seek(Vec<Snapshot>),
}

/// Commands of the replay keys, which a live feed ignores, and what the
/// view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedCommand {
    /// The view shows every process (`a`), or only those on a GPU or
    /// with a model: a live feed then reads the others less often.
    ShowAll(bool),
    StepBack,
    StepForward,
    Start,
    End,
    Faster,
    Slower,
    TogglePlay,
}

pub trait Feed {
    /// The next update, if one is ready. Never blocks; call until `None`.
    fn poll(&mut self, now: Instant) -> Option<Update>;
    /// A replay key. Live feeds ignore it.
    fn command(&mut self, command: FeedCommand, now: Instant);
    /// One line for the title bar: "live, every 1.0 s", "replay 3/120 ...".
    fn status(&self) -> String;
    /// When `poll` may next have news without outside help (replay timing).
    fn next_due(&self) -> Option<Instant>;
    /// Whether this is a recording (the replay keys apply).
    fn is_replay(&self) -> bool;
    /// Seconds between the snapshots it hands out, as meant (a recording:
    /// its median): what the view's use counting takes for a gap.
    fn interval_s(&self) -> f64;
}

/// A collector sampling on its own thread; a sample never blocks the UI.
pub struct LiveFeed {
    rx: Receiver<Snapshot>,
    interval: Duration,
    stopped: bool,
    /// How often the sampler reads the processes the view does not show.
    quiet_every: Arc<AtomicU32>,
    sampler: std::thread::Thread,
}

/// While the view shows only GPU and model processes, the others' stat is
/// read every this many samples (5 s at the default 1 s): they are most of
/// a refresh's cost and none of what is on screen.
const HIDDEN_READ_EVERY: u32 = 5;

impl LiveFeed {
    /// Starts the sampling thread. Model discovery runs in the background,
    /// so the first snapshot comes within a few hundred milliseconds and
    /// says `models_pending` where discovery has not landed.
    pub fn start(options: Options, interval: Duration) -> LiveFeed {
        let (tx, rx) = mpsc::channel();
        // The view starts without `a`.
        let quiet_every = Arc::new(AtomicU32::new(HIDDEN_READ_EVERY));
        // The view gone, the channel is closed and sampling stops.
        let sampler = crate::collect::spawn_sampler(options, interval, quiet_every.clone(), move |snapshot, _| {
            tx.send(snapshot).is_ok()
        });
        LiveFeed {
            rx,
            interval,
            stopped: false,
            quiet_every,
            sampler,
        }
    }
}

impl Feed for LiveFeed {
    fn poll(&mut self, _now: Instant) -> Option<Update> {
        match self.rx.try_recv() {
            Ok(s) => Some(Update::Next(Box::new(s))),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.stopped = true;
                None
            }
        }
    }

    fn command(&mut self, command: FeedCommand, _now: Instant) {
        if let FeedCommand::ShowAll(all) = command {
            let every = if all { 1 } else { HIDDEN_READ_EVERY };
            self.quiet_every.store(every, Ordering::Relaxed);
            // Every process shown: their figures now, not an interval later.
            self.sampler.unpark();
        }
    }

    fn status(&self) -> String {
        if self.stopped {
            "live: the sampler stopped".into()
        } else {
            format!("live, every {:.1} s", self.interval.as_secs_f64())
        }
    }

    fn next_due(&self) -> Option<Instant> {
        None
    }

    fn is_replay(&self) -> bool {
        false
    }

    fn interval_s(&self) -> f64 {
        self.interval.as_secs_f64()
    }
}

/// Speeds a replay can play at, in times real time.
const SPEEDS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
/// The step between two snapshots whose times cannot be read.
const DEFAULT_STEP: Duration = Duration::from_secs(1);
/// How many snapshots before the current one feed the sparklines on a seek.
pub const HISTORY_WINDOW: usize = super::history::CAPACITY;

/// What a replay steps through: a recording opened for random access
/// (`record::RecordingIndex`), or snapshots at hand. Snapshots are parsed
/// when they are needed, so an hour-long recording opens at once.
pub trait Frames: Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// When snapshot `i` was taken (RFC 3339), read without parsing it.
    fn taken_at(&self, i: usize) -> Option<&str>;
    /// Snapshots `indices`, in that order; a line damaged in its middle is
    /// an error naming it.
    fn get_many(&self, indices: &[usize]) -> Vec<anyhow::Result<Snapshot>>;
}

#[cfg(test)]
impl Frames for Vec<Snapshot> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn taken_at(&self, i: usize) -> Option<&str> {
        self.get(i).map(|s| s.taken_at.as_str())
    }

    fn get_many(&self, indices: &[usize]) -> Vec<anyhow::Result<Snapshot>> {
        let one = |&i: &usize| self.get(i).cloned().ok_or_else(|| anyhow::anyhow!("no snapshot {i}"));
        indices.iter().map(one).collect()
    }
}

/// A recording played back: step, jump, play at a chosen speed.
pub struct ReplayFeed {
    frames: Box<dyn Frames>,
    /// Seconds since the first snapshot, per snapshot (None: unreadable).
    times: Vec<Option<f64>>,
    pos: usize,
    playing: bool,
    speed: usize,
    /// When the next frame is due while playing.
    due: Option<Instant>,
    /// A seek waits to be handed over.
    seek: bool,
    /// The snapshots parsed for the sparklines' window, by index, so a step
    /// parses one snapshot, not the window.
    window: BTreeMap<usize, Snapshot>,
    /// The last snapshot that could not be read, for the title bar.
    unreadable: Option<String>,
}

impl ReplayFeed {
    pub fn new(frames: Box<dyn Frames>) -> ReplayFeed {
        let first = frames.taken_at(0).and_then(unix_seconds);
        let times = (0..frames.len())
            .map(|i| Some(unix_seconds(frames.taken_at(i)?)? - first?))
            .collect();
        ReplayFeed {
            frames,
            times,
            pos: 0,
            playing: false,
            speed: 2,
            due: None,
            seek: true,
            window: BTreeMap::new(),
            unreadable: None,
        }
    }

    /// Parses what the window `from..=to` lacks and drops what is outside.
    fn fill(&mut self, from: usize, to: usize) {
        self.window.retain(|&i, _| (from..=to).contains(&i));
        let missing: Vec<usize> = (from..=to).filter(|i| !self.window.contains_key(i)).collect();
        for (i, parsed) in missing.iter().zip(self.frames.get_many(&missing)) {
            match parsed {
                Ok(s) => {
                    self.window.insert(*i, s);
                }
                Err(e) => self.unreadable = Some(format!("{e:#}")),
            }
        }
    }

    #[cfg(test)]
    pub fn position(&self) -> usize {
        self.pos
    }

    #[cfg(test)]
    pub fn playing(&self) -> bool {
        self.playing
    }

    pub fn speed(&self) -> f64 {
        SPEEDS[self.speed]
    }

    /// Real time between snapshot `i` and the next, at the current speed.
    fn step_after(&self, i: usize) -> Duration {
        let gap = match (
            self.times.get(i).copied().flatten(),
            self.times.get(i + 1).copied().flatten(),
        ) {
            (Some(a), Some(b)) if b > a => Duration::from_secs_f64((b - a).min(3600.0)),
            _ => DEFAULT_STEP,
        };
        gap.div_f64(self.speed()).max(Duration::from_millis(10))
    }

    fn go_to(&mut self, pos: usize) {
        let pos = pos.min(self.frames.len().saturating_sub(1));
        if pos != self.pos {
            self.pos = pos;
            self.seek = true;
        }
    }
}

impl Feed for ReplayFeed {
    fn poll(&mut self, now: Instant) -> Option<Update> {
        if self.frames.is_empty() {
            return None;
        }
        if self.seek {
            self.seek = false;
            let from = (self.pos + 1).saturating_sub(HISTORY_WINDOW);
            self.fill(from, self.pos);
            if self.playing {
                self.due = Some(now + self.step_after(self.pos));
            }
            return Some(Update::Seek(self.window.values().cloned().collect()));
        }
        if !self.playing {
            return None;
        }
        if self.pos + 1 >= self.frames.len() {
            self.playing = false;
            self.due = None;
            return None;
        }
        let due = match self.due {
            Some(due) => due,
            None => {
                let due = now + self.step_after(self.pos);
                self.due = Some(due);
                due
            }
        };
        if now < due {
            return None;
        }
        self.pos += 1;
        // Catch up from the due time, not from now, so play keeps its pace.
        self.due = Some(due.max(now - Duration::from_millis(500)) + self.step_after(self.pos));
        self.fill((self.pos + 1).saturating_sub(HISTORY_WINDOW), self.pos);
        // A snapshot that cannot be read is stepped over (the title bar
        // says which).
        let s = self.window.get(&self.pos)?;
        Some(Update::Next(Box::new(s.clone())))
    }

    fn command(&mut self, command: FeedCommand, now: Instant) {
        let last = self.frames.len().saturating_sub(1);
        match command {
            // A recording holds what it holds.
            FeedCommand::ShowAll(_) => return,
            FeedCommand::StepBack => self.go_to(self.pos.saturating_sub(1)),
            FeedCommand::StepForward => self.go_to(self.pos + 1),
            FeedCommand::Start => self.go_to(0),
            FeedCommand::End => self.go_to(last),
            FeedCommand::Faster => self.speed = (self.speed + 1).min(SPEEDS.len() - 1),
            FeedCommand::Slower => self.speed = self.speed.saturating_sub(1),
            FeedCommand::TogglePlay => {
                self.playing = !self.playing;
                if self.playing && self.pos >= last {
                    self.go_to(0); // play again from the start
                }
            }
        }
        self.due = self.playing.then(|| now + self.step_after(self.pos));
    }

    fn status(&self) -> String {
        let state = if self.playing {
            "playing"
        } else if self.pos + 1 >= self.frames.len() {
            "at the end"
        } else {
            "paused"
        };
        let at = self.times.get(self.pos).copied().flatten();
        let at = at.map(|t| format!(" +{}", clock(t))).unwrap_or_default();
        let unreadable = self
            .unreadable
            .as_ref()
            .map(|e| format!("; skipped: {e}"))
            .unwrap_or_default();
        format!(
            "replay {}/{}{at}, {state} at {}x{unreadable}",
            self.pos + 1,
            self.frames.len(),
            trim_speed(self.speed())
        )
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.filter(|_| self.playing)
    }

    fn is_replay(&self) -> bool {
        true
    }

    fn interval_s(&self) -> f64 {
        let times: Vec<f64> = self.times.iter().flatten().copied().collect();
        crate::accounting::median_step(&times)
    }
}

fn trim_speed(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

/// "1:02:03" or "2:03".
fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(at: &str) -> Snapshot {
        let mut s = crate::view::tui::fixture::desktop();
        s.taken_at = at.into();
        s
    }

    #[test]
    fn replay_steps_jumps_and_plays_at_the_chosen_speed() {
        let snaps: Vec<Snapshot> = (0..5).map(|i| snap(&format!("2026-01-01T00:00:0{i}Z"))).collect();
        let mut feed = ReplayFeed::new(Box::new(snaps));
        let t0 = Instant::now();
        // The first poll hands over the start.
        assert!(matches!(feed.poll(t0), Some(Update::Seek(v)) if v.len() == 1));
        assert!(feed.poll(t0).is_none(), "paused: nothing more");
        feed.command(FeedCommand::End, t0);
        assert!(matches!(feed.poll(t0), Some(Update::Seek(v)) if v.len() == 5));
        assert_eq!(feed.position(), 4);
        feed.command(FeedCommand::StepBack, t0);
        assert!(matches!(feed.poll(t0), Some(Update::Seek(_))));
        assert_eq!(feed.position(), 3);
        assert!(
            feed.status().starts_with("replay 4/5 +0:03, paused at 1x"),
            "{}",
            feed.status()
        );

        feed.command(FeedCommand::Start, t0);
        feed.poll(t0);
        feed.command(FeedCommand::Faster, t0); // 2x: one recorded second is 500 ms
        feed.command(FeedCommand::TogglePlay, t0);
        assert!(feed.playing());
        assert!(feed.poll(t0 + Duration::from_millis(400)).is_none());
        assert!(matches!(
            feed.poll(t0 + Duration::from_millis(510)),
            Some(Update::Next(_))
        ));
        assert_eq!(feed.position(), 1);
        // Play stops at the end.
        let mut t = t0 + Duration::from_millis(510);
        for _ in 0..10 {
            t += Duration::from_millis(600);
            feed.poll(t);
        }
        assert_eq!(feed.position(), 4);
        assert!(!feed.playing());
        assert!(feed.status().contains("at the end"), "{}", feed.status());
    }

    /// A recording with one line damaged in its middle.
    struct Damaged(Vec<Snapshot>, usize);

    impl Frames for Damaged {
        fn len(&self) -> usize {
            self.0.len()
        }

        fn taken_at(&self, i: usize) -> Option<&str> {
            Frames::taken_at(&self.0, i)
        }

        fn get_many(&self, indices: &[usize]) -> Vec<anyhow::Result<Snapshot>> {
            let mut all = self.0.get_many(indices);
            for (r, &i) in all.iter_mut().zip(indices) {
                if i == self.1 {
                    *r = Err(anyhow::anyhow!("line {}: not JSON", i + 1));
                }
            }
            all
        }
    }

    #[test]
    fn replay_steps_over_a_damaged_snapshot_and_says_so() {
        let snaps: Vec<Snapshot> = (0..5).map(|i| snap(&format!("2026-01-01T00:00:0{i}Z"))).collect();
        let mut feed = ReplayFeed::new(Box::new(Damaged(snaps, 2)));
        let t0 = Instant::now();
        feed.command(FeedCommand::End, t0);
        match feed.poll(t0) {
            Some(Update::Seek(v)) => {
                let times: Vec<&str> = v.iter().map(|s| s.taken_at.as_str()).collect();
                assert_eq!(
                    times,
                    [
                        "2026-01-01T00:00:00Z",
                        "2026-01-01T00:00:01Z",
                        "2026-01-01T00:00:03Z",
                        "2026-01-01T00:00:04Z"
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(
            feed.status().ends_with("; skipped: line 3: not JSON"),
            "{}",
            feed.status()
        );
        // Playing from the start: 1, then 2 is stepped over, then 3.
        feed.command(FeedCommand::Start, t0);
        feed.poll(t0);
        feed.command(FeedCommand::TogglePlay, t0);
        let mut shown = Vec::new();
        let mut t = t0;
        for _ in 0..8 {
            t += Duration::from_millis(1100);
            if let Some(Update::Next(s)) = feed.poll(t) {
                shown.push(s.taken_at.clone());
            }
        }
        assert_eq!(
            shown,
            ["2026-01-01T00:00:01Z", "2026-01-01T00:00:03Z", "2026-01-01T00:00:04Z"]
        );
    }
}
