//! One discovery round, shared by its threads, and the caches that live by
//! rounds: what a round or the one before used is kept, the rest swept.

use super::budget::ByteBudget;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Instant;

/// The listening sockets of one discovery round, read once when a probe
/// first needs them.
pub(super) type Listening = std::sync::OnceLock<HashMap<u64, SocketAddr>>;

/// One discovery round, shared by its threads.
pub(super) struct Round {
    pub(super) number: u64,
    pub(super) listening: Listening,
    /// What the round's threads may read of outside files, together.
    pub(super) bytes: ByteBudget,
    /// When the round stops waiting; header walks still running then stop.
    pub(super) deadline: Instant,
}

/// Entries each discovery cache holds at most, however many model files
/// processes name over time.
pub(super) const MAX_CACHED: usize = 512;

/// A process: its PID and start time (a reused PID is another process).
pub(super) type ProcessKey = (u32, Option<String>);

/// A cache whose entries live while processes use them: each use stamps an
/// entry with the current discovery round, and after a round only what it
/// or the round before used is kept (at most [`MAX_CACHED`], the least
/// recently used going first). Servers coming and going with new model
/// files must not grow the monitor without bound.
pub(super) struct RoundCache<K, V> {
    entries: HashMap<K, (V, u64)>,
}

impl<K: Eq + Hash + Clone, V: Clone> RoundCache<K, V> {
    pub(super) fn new() -> Self {
        RoundCache {
            entries: HashMap::new(),
        }
    }

    pub(super) fn get(&mut self, key: &K, round: u64) -> Option<V> {
        let (value, used) = self.entries.get_mut(key)?;
        *used = round;
        Some(value.clone())
    }

    pub(super) fn insert(&mut self, key: K, value: V, round: u64) {
        self.entries.insert(key, (value, round));
        if self.entries.len() > MAX_CACHED {
            self.evict_oldest(self.entries.len() - MAX_CACHED);
        }
    }

    /// Keeps what this round or the one before used.
    pub(super) fn sweep(&mut self, round: u64) {
        self.entries.retain(|_, (_, used)| *used + 1 >= round);
    }

    fn evict_oldest(&mut self, n: usize) {
        let mut by_age: Vec<(u64, K)> = self.entries.iter().map(|(k, (_, used))| (*used, k.clone())).collect();
        by_age.sort_unstable_by_key(|(used, _)| *used);
        for (_, key) in by_age.into_iter().take(n) {
            self.entries.remove(&key);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However many in one round, at most MAX_CACHED are kept.
    #[test]
    fn a_round_cache_keeps_at_most_its_limit() {
        let mut cache = RoundCache::new();
        for i in 0..(MAX_CACHED + 100) {
            cache.insert(i, (), 1);
        }
        assert_eq!(cache.len(), MAX_CACHED);
    }
}
