//! Read coalescing for hot keys: concurrent reads of one key at one level
//! share replica rounds (single flight), without ever answering a read from
//! a round that began before it.
//!
//! No token layout spreads one key's load: every read of a hot key goes to
//! the same replicas. The coordinator can still cut the work: while a round
//! for a key is in flight, later reads of the key at the same level *queue*
//! instead of starting rounds of their own; when the round lands, its reads
//! get its answer and the whole queue shares **one** next round. So a key
//! has at most one round in flight per level on a coordinator, however many
//! clients read it.
//!
//! A queued read does not take the answer of the round in flight: that
//! round's requests went out before the read began, so it could miss a
//! write acknowledged just before the read — a read must see every write
//! that completed before it started. The next round starts after every read
//! in its batch began, so each read's answer is as fresh as its own round
//! would have been. The price is latency: a queued read waits for the rest
//! of the round in flight, then its own (at most two rounds).
//!
//! [`Flights`] is the bookkeeping, generic over the key and over what stands
//! for a waiting read (the node uses a oneshot sender); the node runs the
//! rounds.
//!
//! # Invariants
//! - A key has a flight exactly while a round for it runs; a read either
//!   leads a new flight or is queued for the flight's next round, never for
//!   one already started.
//! - Every queued waiter is handed out by exactly one [`Flights::land`].

use std::collections::HashMap;
use std::hash::Hash;

/// What [`Flights::join`] made of a read.
#[derive(Debug, PartialEq, Eq)]
pub enum Joined<W> {
    /// No round for the key was in flight: the caller runs one now for this
    /// waiter (given back), and calls [`Flights::land`] when it is done.
    Lead(W),
    /// A round is in flight: the waiter is queued for the next one.
    Queued,
}

/// The flights of one coordinator. See the module docs.
#[derive(Debug)]
pub struct Flights<K, W> {
    /// Keys with a round in flight, and the waiters queued for the next.
    queued: HashMap<K, Vec<W>>,
}

impl<K, W> Default for Flights<K, W> {
    fn default() -> Self {
        Flights {
            queued: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq, W> Flights<K, W> {
    /// A read of `key` arrives, standing for `waiter`.
    pub fn join(&mut self, key: K, waiter: W) -> Joined<W> {
        match self.queued.get_mut(&key) {
            Some(queue) => {
                queue.push(waiter);
                Joined::Queued
            }
            None => {
                self.queued.insert(key, Vec::new());
                Joined::Lead(waiter)
            }
        }
    }

    /// The round in flight for `key` landed: the waiters queued meanwhile,
    /// who share the next round (which the caller runs, then lands again);
    /// `None` if nobody queued, and the key has no flight any more.
    pub fn land(&mut self, key: &K) -> Option<Vec<W>> {
        let queue = self.queued.get_mut(key)?;
        if queue.is_empty() {
            self.queued.remove(key);
            return None;
        }
        Some(std::mem::take(queue))
    }

    /// Keys with a round in flight.
    pub fn in_flight(&self) -> usize {
        self.queued.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_read_leads_and_reads_during_its_round_share_the_next_one() {
        let mut flights = Flights::default();
        assert_eq!(flights.join("k", 1), Joined::Lead(1));
        assert_eq!(flights.join("k", 2), Joined::Queued);
        assert_eq!(flights.join("k", 3), Joined::Queued);
        // Another key flies on its own.
        assert_eq!(flights.join("other", 9), Joined::Lead(9));
        assert_eq!(flights.in_flight(), 2);
        // Round 1 lands: 2 and 3 share round 2, which is now in flight.
        assert_eq!(flights.land(&"k"), Some(vec![2, 3]));
        assert_eq!(flights.join("k", 4), Joined::Queued, "round 2 runs");
        assert_eq!(flights.land(&"k"), Some(vec![4]));
        assert_eq!(flights.land(&"k"), None);
        assert_eq!(flights.in_flight(), 1);
        // With no flight, the next read leads again.
        assert_eq!(flights.join("k", 5), Joined::Lead(5));
        assert_eq!(flights.land(&"other"), None);
        assert_eq!(flights.land(&"k"), None);
        assert_eq!(flights.in_flight(), 0);
    }

    #[test]
    fn landing_a_key_without_a_flight_hands_out_nothing() {
        let mut flights: Flights<&str, u8> = Flights::default();
        assert_eq!(flights.land(&"k"), None);
        assert_eq!(flights.join("k", 1), Joined::Lead(1));
    }
}
