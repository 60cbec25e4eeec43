//! `ringstore stress cas`: compare-and-sets, each a counter's increment.
//!
//! A worker remembers, per key, the value it last saw there (none at
//! first: it expects the key absent). Each operation is one `PutIf`: that
//! value's count plus one, if the key still holds that value. Applied, the
//! worker has the new value; not applied, the answer carries the key's
//! current value, which the next attempt expects — a read-modify-write
//! loop in one round trip per try, as an application's counter or lease
//! renewal would run it. Values are the count in decimal, padded with dots
//! to `--value-size` (a value of someone else's counts as 0).
//!
//! Two modes:
//! - **uncontended** (the default): key `i` belongs to worker
//!   `i mod --concurrency`, so no two compare-and-sets meet; almost every
//!   one applies (a key left by an earlier run costs one miss). The cost of
//!   Paxos itself.
//! - **contended** (`--contended`): every worker draws from all
//!   `--keys`; with a few keys they race, and the report's not-applied
//!   count is the races lost. Unary calls route a key's compare-and-sets
//!   to its first live replica (with `--token-aware`), where they queue.
//!
//! Every answer counts as a success (its latency is measured); the report
//! adds how many applied, did not, and failed with their outcome unknown
//! (a timeout: it may have applied). After a contended run on one fresh
//! key, the key's count is the applied ones plus at most the unknown ones.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use ringstore_client::{expect, pb};

use super::target::Target;
use super::{Answered, Failed};

/// Compare-and-sets by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct CasCounts {
    /// Answered, applied.
    pub applied: u64,
    /// Answered, not applied: the key held another value.
    pub not_applied: u64,
    /// Failed with the outcome unknown (may have applied).
    pub unknown: u64,
}

impl CasCounts {
    pub fn add(&mut self, other: CasCounts) {
        self.applied += other.applied;
        self.not_applied += other.not_applied;
        self.unknown += other.unknown;
    }
}

/// The key number worker `worker` of `workers` uses for the drawn `key`:
/// with `contended`, the key itself; else the nearest key at or below it
/// that is the worker's own (`i mod workers == worker`), wrapping to the
/// one above below 0. Needs `key_count >= workers` (checked with the
/// arguments), so every worker owns at least one key.
pub(super) fn key_of(drawn: u64, worker: usize, workers: usize, contended: bool) -> u64 {
    if contended {
        return drawn;
    }
    let (worker, workers) = (worker as u64, workers as u64);
    let base = drawn - drawn % workers;
    if base + worker <= drawn {
        base + worker
    } else if base >= workers {
        base - workers + worker
    } else {
        // Below the worker's first key: its first key (< workers <= count).
        worker
    }
}

/// The value of count `count`, padded with dots to `size` bytes.
pub(super) fn value_of(count: u64, size: usize) -> Vec<u8> {
    let mut value = count.to_string().into_bytes();
    if value.len() < size {
        value.resize(size, b'.');
    }
    value
}

/// The count a value holds (its leading decimal digits; 0 if none).
pub(super) fn count_of(value: &[u8]) -> u64 {
    let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&value[..digits])
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0)
}

/// What one worker last saw in each key it used: `None` for a key it
/// saw absent. Held only to look up or note, never across an await.
#[derive(Debug, Default)]
pub(super) struct Seen(Mutex<HashMap<Vec<u8>, Option<Vec<u8>>>>);

impl Seen {
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(key).cloned().flatten()
    }

    fn note(&self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert(key, value);
    }
}

/// The fixed parts of every compare-and-set of a run.
#[derive(Clone, Debug)]
pub(super) struct CasSettings {
    pub keyspace: String,
    pub value_size: usize,
    /// Wire serial level.
    pub serial: i32,
    /// Wire commit level.
    pub commit: i32,
}

/// One increment of `key` through `target`: its outcome, and what the
/// worker now knows the key holds.
pub(super) async fn increment(
    target: &Target,
    seen: &Seen,
    settings: &CasSettings,
    key: Vec<u8>,
) -> Result<Answered, Failed> {
    let current = seen.get(&key);
    let next = value_of(
        current.as_deref().map_or(0, count_of) + 1,
        settings.value_size,
    );
    let expected = match current {
        Some(value) => expect::value(value),
        None => expect::absent(),
    };
    let answer = target
        .put_if(pb::PutIfRequest {
            keyspace: settings.keyspace.clone(),
            key: key.clone(),
            expected,
            value: next.clone(),
            ttl_seconds: None,
            serial_consistency: settings.serial,
            commit_consistency: settings.commit,
        })
        .await
        .map_err(|error| Failed::of(error, true))?;
    if answer.applied {
        seen.note(key, Some(next));
        Ok(Answered::Applied)
    } else {
        seen.note(key, answer.found.then_some(answer.value));
        Ok(Answered::NotApplied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncontended_workers_use_only_keys_of_their_own_within_the_key_count() {
        let (workers, count) = (8usize, 20u64);
        for drawn in 0..count {
            for worker in 0..workers {
                let key = key_of(drawn, worker, workers, false);
                assert!(key < count, "drawn {drawn}, worker {worker}: {key}");
                assert_eq!(key % workers as u64, worker as u64, "drawn {drawn}");
            }
            assert_eq!(key_of(drawn, 3, workers, true), drawn);
        }
        // One key per worker: each keeps its own.
        for worker in 0..4 {
            assert_eq!(key_of(3, worker, 4, false), worker as u64);
        }
    }

    #[test]
    fn values_carry_their_count_padded_to_the_value_size() {
        assert_eq!(value_of(42, 6), b"42....");
        assert_eq!(value_of(123_456, 3), b"123456");
        assert_eq!(count_of(&value_of(7, 100)), 7);
        assert_eq!(count_of(b"someone else's"), 0);
        assert_eq!(count_of(b""), 0);
    }
}
