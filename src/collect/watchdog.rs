//! A driver call that never returns must not freeze the monitor: a source
//! is opened and sampled on a thread of its own, and a sample that takes
//! longer than the deadline is answered with the last good values, marked
//! stale, while the call goes on in the background. The next sample picks
//! up its result (and discards it as old) before asking again. Opening is
//! a driver call too (`nvmlInit_v2` can hang as any other): until it
//! returns, a sample waits at most the deadline and says the source is
//! starting.

use super::sample::Sample;
use crate::snapshot::Backend;
use std::collections::HashSet;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How long a sample waits for the driver.
pub const DEADLINE: Duration = Duration::from_secs(3);

/// What a sample asks for: only one device, and the PIDs visible here.
pub struct Request {
    pub only: Option<u32>,
    pub visible: HashSet<u32>,
}

/// What a watched sample gives.
pub enum Watched {
    Fresh(Sample),
    /// The driver has not answered for this long: the last good sample,
    /// if there is one, with every device marked stale.
    Stale(Duration, Option<Sample>),
    /// Opening the source has not returned for this long.
    Starting(Duration),
    /// The source did not open: why, as its status line.
    Unavailable(Backend),
    Failed(String),
}

/// What the sampling thread sends back.
enum Reply {
    Opened(Result<(), Backend>),
    Sampled(Result<Sample, String>),
}

/// What waiting on the sampling thread gave.
enum Outcome {
    Answer(Result<Sample, String>),
    NotYet,
    /// The thread has ended: the source did not open, or it stopped.
    Ended,
}

pub struct Watchdog {
    requests: Sender<Request>,
    results: Receiver<Reply>,
    /// When opening began.
    started: Instant,
    opened: bool,
    unavailable: Option<Backend>,
    in_flight: Option<Instant>,
    last_good: Option<Sample>,
}

impl Watchdog {
    /// Opens a source with `open` on a thread of its own, then runs
    /// `sample` on it there, one request at a time.
    pub fn start<S>(
        open: impl FnOnce() -> Result<S, Backend> + Send + 'static,
        mut sample: impl FnMut(&mut S, Request) -> Result<Sample, String> + Send + 'static,
    ) -> Watchdog {
        let (requests, inbox) = channel::<Request>();
        let (outbox, results) = channel();
        std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || {
                let mut source = match open() {
                    Ok(source) => source,
                    Err(why) => {
                        let _ = outbox.send(Reply::Opened(Err(why)));
                        return;
                    }
                };
                if outbox.send(Reply::Opened(Ok(()))).is_err() {
                    return;
                }
                for request in inbox {
                    if outbox.send(Reply::Sampled(sample(&mut source, request))).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the sampling thread");
        Watchdog {
            requests,
            results,
            started: Instant::now(),
            opened: false,
            unavailable: None,
            in_flight: None,
            last_good: None,
        }
    }

    pub fn sample(&mut self, only: Option<u32>, visible: HashSet<u32>, deadline: Duration) -> Watched {
        if let Some(why) = &self.unavailable {
            return Watched::Unavailable(why.clone());
        }
        if let Some(since) = self.in_flight {
            match self.wait_for_answer(Instant::now()) {
                // The hung call came back: its values are old, ask again.
                Outcome::Answer(_) => self.in_flight = None,
                Outcome::NotYet => return self.waiting(since),
                Outcome::Ended => return self.ended(),
            }
        }
        let asked = Instant::now();
        if self.requests.send(Request { only, visible }).is_err() {
            return self.ended();
        }
        match self.wait_for_answer(asked + deadline) {
            Outcome::Answer(Ok(sample)) => {
                self.last_good = Some(sample.clone());
                Watched::Fresh(sample)
            }
            Outcome::Answer(Err(e)) => Watched::Failed(e),
            Outcome::NotYet => {
                self.in_flight = Some(asked);
                self.waiting(asked)
            }
            Outcome::Ended => self.ended(),
        }
    }

    /// Waits until `until` for a sample's answer, taking note of how the
    /// opening went on the way.
    fn wait_for_answer(&mut self, until: Instant) -> Outcome {
        loop {
            match self
                .results
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(Reply::Opened(Ok(()))) => self.opened = true,
                Ok(Reply::Opened(Err(why))) => {
                    self.unavailable = Some(why);
                    return Outcome::Ended;
                }
                Ok(Reply::Sampled(answer)) => return Outcome::Answer(answer),
                Err(RecvTimeoutError::Timeout) => return Outcome::NotYet,
                Err(RecvTimeoutError::Disconnected) => return Outcome::Ended,
            }
        }
    }

    /// No answer yet to the request made at `since`.
    fn waiting(&self, since: Instant) -> Watched {
        if self.opened {
            self.stale(since.elapsed())
        } else {
            Watched::Starting(self.started.elapsed())
        }
    }

    /// The sampling thread has ended: the source did not open (its reply
    /// may still be in the channel), or the thread stopped.
    fn ended(&mut self) -> Watched {
        if self.unavailable.is_none() {
            self.wait_for_answer(Instant::now());
        }
        match &self.unavailable {
            Some(why) => Watched::Unavailable(why.clone()),
            None => Watched::Failed("the sampling thread stopped".into()),
        }
    }

    fn stale(&self, waited: Duration) -> Watched {
        let last = self.last_good.clone().map(|mut s| {
            for d in &mut s.devices {
                d.stale = true;
            }
            s
        });
        Watched::Stale(waited, last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Device;

    fn sample_of(name: &str) -> Sample {
        Sample {
            devices: vec![Device {
                name: Some(name.into()),
                ..Device::default()
            }],
            processes: vec![],
        }
    }

    #[test]
    fn a_hung_call_gives_the_last_values_marked_stale_then_recovers() {
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let seen = calls.clone();
        let mut w = Watchdog::start(
            || Ok(()),
            move |_: &mut (), _| {
                // The second call hangs for 400 ms; the others answer at once.
                let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n == 1 {
                    std::thread::sleep(Duration::from_millis(400));
                }
                Ok(sample_of(&format!("call {n}")))
            },
        );
        let deadline = Duration::from_millis(100);
        let visible = HashSet::new;
        match w.sample(None, visible(), deadline) {
            Watched::Fresh(s) => assert_eq!(s.devices[0].name.as_deref(), Some("call 0")),
            _ => panic!("the first call answers"),
        }
        match w.sample(None, visible(), deadline) {
            Watched::Stale(waited, Some(last)) => {
                assert!(waited >= deadline);
                assert_eq!(last.devices[0].name.as_deref(), Some("call 0"));
                assert!(last.devices[0].stale);
            }
            _ => panic!("the hung call gives the last values"),
        }
        // Still hung: stale again, without asking again.
        assert!(matches!(
            w.sample(None, visible(), deadline),
            Watched::Stale(_, Some(_))
        ));
        std::thread::sleep(Duration::from_millis(400));
        // It came back: its old answer is dropped and a fresh one asked for.
        match w.sample(None, visible(), deadline) {
            Watched::Fresh(s) => {
                assert_eq!(s.devices[0].name.as_deref(), Some("call 2"));
                assert!(!s.devices[0].stale);
            }
            _ => panic!("recovered"),
        }
    }

    #[test]
    fn an_open_that_hangs_is_starting_within_the_deadline_then_answers() {
        let mut w = Watchdog::start(
            || {
                std::thread::sleep(Duration::from_millis(400));
                Ok(())
            },
            |_: &mut (), _| Ok(sample_of("opened")),
        );
        let deadline = Duration::from_millis(100);
        let asked = Instant::now();
        match w.sample(None, HashSet::new(), deadline) {
            Watched::Starting(waited) => assert!(waited >= deadline, "{waited:?}"),
            _ => panic!("a hung open is starting"),
        }
        assert!(asked.elapsed() < Duration::from_millis(300), "{:?}", asked.elapsed());
        // Still opening: answered at once, still starting, not "stale".
        assert!(matches!(w.sample(None, HashSet::new(), deadline), Watched::Starting(_)));
        std::thread::sleep(Duration::from_millis(400));
        // Opened: the request queued meanwhile was answered and is old; a
        // fresh one is asked for.
        match w.sample(None, HashSet::new(), deadline) {
            Watched::Fresh(s) => assert_eq!(s.devices[0].name.as_deref(), Some("opened")),
            _ => panic!("opened"),
        }
    }

    #[test]
    fn an_open_that_fails_is_unavailable_every_time_without_waiting() {
        let why = Backend {
            name: "nvml".into(),
            status: crate::snapshot::BackendStatus::Unavailable,
            detail: "no driver".into(),
        };
        let given = why.clone();
        let mut w = Watchdog::start(move || Err::<(), _>(given), |_, _| Ok(sample_of("never")));
        for _ in 0..3 {
            let asked = Instant::now();
            match w.sample(None, HashSet::new(), Duration::from_secs(3)) {
                Watched::Unavailable(b) => assert_eq!(b, why),
                _ => panic!("unavailable"),
            }
            assert!(asked.elapsed() < Duration::from_secs(1), "{:?}", asked.elapsed());
        }
    }
}
