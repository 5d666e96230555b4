//! Open queries and their counters, behind one lock. Handles are numbers
//! from [`HANDLE_BASE`] up, never dereferenced.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::abi::{self, FileTime, Status};
use crate::scenario::{Scenario, Value};

/// Names the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_PDH_SCENARIO";

/// The first handle; the odd base makes misuse easy to spot.
const HANDLE_BASE: usize = 0x7064_6800_0000;
/// 100 ns FILETIME ticks between 1601-01-01 and 1970-01-01.
const EPOCH_DIFFERENCE_100NS: u64 = 116_444_736_000_000_000;

pub struct Query {
    pub scenario: Scenario,
    opened: Instant,
    /// When the last PdhCollectQueryData ran: its time stamp (UTC, where
    /// PDH stamps local time: the same on a machine on UTC) and the 100 ns
    /// since the query was opened.
    pub collected: Option<(FileTime, u64)>,
}

/// What one counter handle reads.
pub struct Counter {
    pub query: usize,
    /// The set's and counter's names as the scenario spells them.
    pub set: String,
    pub counter: String,
    /// None: every instance (`*`).
    pub instance: Option<String>,
}

#[derive(Default)]
pub struct State {
    next: usize,
    pub queries: BTreeMap<usize, Query>,
    pub counters: BTreeMap<usize, Counter>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The state, created on first use; a panic elsewhere does not poison it.
pub fn with<T>(body: impl FnOnce(&mut State) -> T) -> T {
    let mut guard: MutexGuard<'_, Option<State>> = STATE.lock().unwrap_or_else(|p| p.into_inner());
    body(guard.get_or_insert_with(State::default))
}

/// One line on stderr; a closed stderr is not worth a panic.
pub use fake_dll::warn;

/// Runs an export's body: a panic becomes PDH_INVALID_ARGUMENT instead of
/// unwinding into C.
pub fn guard(body: impl FnOnce() -> Result<(), Status>) -> Status {
    fake_dll::guard(abi::SUCCESS, abi::INVALID_ARGUMENT, body)
}

impl State {
    pub fn handle(&mut self) -> usize {
        self.next += 1;
        HANDLE_BASE + self.next
    }

    pub fn open(&mut self, scenario: Scenario) -> usize {
        let h = self.handle();
        self.queries.insert(
            h,
            Query {
                scenario,
                opened: Instant::now(),
                collected: None,
            },
        );
        h
    }

    pub fn query(&mut self, h: usize) -> Result<&mut Query, Status> {
        self.queries.get_mut(&h).ok_or(abi::INVALID_HANDLE)
    }

    pub fn close(&mut self, h: usize) -> Result<(), Status> {
        self.query(h)?.injected("PdhCloseQuery")?;
        self.queries.remove(&h);
        self.counters.retain(|_, c| c.query != h);
        Ok(())
    }
}

impl Query {
    /// The injected code for this function, if the scenario has one.
    pub fn injected(&self, function: &str) -> Result<(), Status> {
        match self.scenario.errors.get(function) {
            Some(&code) => Err(code),
            None => Ok(()),
        }
    }

    pub fn collect(&mut self) {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let ticks = EPOCH_DIFFERENCE_100NS + (since_epoch.as_nanos() / 100) as u64;
        let stamp = FileTime {
            low: ticks as u32,
            high: (ticks >> 32) as u32,
        };
        let elapsed = (self.opened.elapsed().as_nanos() / 100) as u64;
        self.collected = Some((stamp, elapsed));
    }

    /// The counter's (instance, value) pairs at the last collection.
    pub fn values(&self, c: &Counter) -> Vec<(String, u64)> {
        let Some((_, elapsed)) = self.collected else {
            return Vec::new();
        };
        let Some((_, set)) = self.scenario.set(&c.set) else {
            return Vec::new();
        };
        set.values(&c.counter, c.instance.as_deref())
            .map(|(name, v): (&str, Value)| (name.to_string(), v.at(elapsed)))
            .collect()
    }
}
