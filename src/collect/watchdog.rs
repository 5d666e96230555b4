//! A driver call that never returns must not freeze the monitor: a source
//! is sampled on a thread of its own, and a sample that takes longer than
//! the deadline is answered with the last good values, marked stale, while
//! the call goes on in the background. The next sample picks up its result
//! (and discards it as old) before asking again.

use super::nvml::Sample;
use std::collections::HashSet;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
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
    Failed(String),
}

pub struct Watchdog {
    requests: Sender<Request>,
    results: Receiver<Result<Sample, String>>,
    in_flight: Option<Instant>,
    last_good: Option<Sample>,
}

impl Watchdog {
    /// Runs `sample` on a thread of its own, one request at a time.
    pub fn start(mut sample: impl FnMut(Request) -> Result<Sample, String> + Send + 'static) -> Watchdog {
        let (requests, inbox) = channel::<Request>();
        let (outbox, results) = channel();
        std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || {
                for request in inbox {
                    if outbox.send(sample(request)).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the sampling thread");
        Watchdog {
            requests,
            results,
            in_flight: None,
            last_good: None,
        }
    }

    pub fn sample(&mut self, only: Option<u32>, visible: HashSet<u32>, deadline: Duration) -> Watched {
        if let Some(since) = self.in_flight {
            match self.results.try_recv() {
                // The hung call came back: its values are old, ask again.
                Ok(_) => self.in_flight = None,
                Err(TryRecvError::Empty) => return self.stale(since.elapsed()),
                Err(TryRecvError::Disconnected) => return Watched::Failed("the sampling thread stopped".into()),
            }
        }
        let asked = Instant::now();
        if self.requests.send(Request { only, visible }).is_err() {
            return Watched::Failed("the sampling thread stopped".into());
        }
        match self.results.recv_timeout(deadline) {
            Ok(Ok(sample)) => {
                self.last_good = Some(sample.clone());
                Watched::Fresh(sample)
            }
            Ok(Err(e)) => Watched::Failed(e),
            Err(RecvTimeoutError::Timeout) => {
                self.in_flight = Some(asked);
                self.stale(asked.elapsed())
            }
            Err(RecvTimeoutError::Disconnected) => Watched::Failed("the sampling thread stopped".into()),
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
        let mut w = Watchdog::start(move |_| {
            // The second call hangs for 400 ms; the others answer at once.
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n == 1 {
                std::thread::sleep(Duration::from_millis(400));
            }
            Ok(sample_of(&format!("call {n}")))
        });
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
}
