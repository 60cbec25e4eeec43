//! The replay cache: every accepted `(issued, nonce)` until it is too old
//! to pass the clock check, within a bounded number of entries.

use std::collections::BTreeSet;

use crate::error::Refusal;
use crate::proof::Nonce;

/// Remembers accepted proofs so none is accepted twice.
///
/// Invariant: a proof with `issued_at_ms` at or below `floor_ms`, or already
/// in `seen`, is refused; entries leave `seen` only by expiring (older than
/// the horizon, which the clock check refuses) or by raising the floor above
/// them. So a replay is never accepted, whatever the capacity.
#[derive(Debug)]
pub struct ReplayCache {
    /// At most this many entries.
    capacity: usize,
    /// Entries older than `now - horizon_ms` are dropped.
    horizon_ms: u64,
    /// Ordered by issue time, so the oldest go first.
    seen: BTreeSet<(u64, Nonce)>,
    /// Everything issued at or before this is refused (0: nothing yet).
    floor_ms: u64,
}

impl ReplayCache {
    /// A cache of at most `capacity` (at least 1) entries, each kept for
    /// `horizon_ms` after it was issued.
    pub fn new(capacity: usize, horizon_ms: u64) -> ReplayCache {
        ReplayCache {
            capacity: capacity.max(1),
            horizon_ms,
            seen: BTreeSet::new(),
            floor_ms: 0,
        }
    }

    /// Accepts `(issued_at_ms, nonce)` once: a second time, or once it is
    /// below the floor, it is [`Refusal::Replayed`].
    pub fn check_and_insert(
        &mut self,
        issued_at_ms: u64,
        nonce: Nonce,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        self.expire(now_ms);
        if issued_at_ms <= self.floor_ms && self.floor_ms > 0 {
            return Err(Refusal::Replayed);
        }
        if !self.seen.insert((issued_at_ms, nonce)) {
            return Err(Refusal::Replayed);
        }
        while self.seen.len() > self.capacity {
            let (oldest, _) = self.seen.pop_first().expect("over capacity");
            self.floor_ms = self.floor_ms.max(oldest);
        }
        Ok(())
    }

    /// How many entries are held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    fn expire(&mut self, now_ms: u64) {
        let horizon = now_ms.saturating_sub(self.horizon_ms);
        while let Some(&(issued, _)) = self.seen.first() {
            if issued >= horizon {
                break;
            }
            self.seen.pop_first();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonce(n: u8) -> Nonce {
        Nonce([n; 16])
    }

    #[test]
    fn a_nonce_is_accepted_once() {
        let mut cache = ReplayCache::new(10, 1_000);
        assert_eq!(cache.check_and_insert(100, nonce(1), 100), Ok(()));
        assert_eq!(
            cache.check_and_insert(100, nonce(1), 150),
            Err(Refusal::Replayed)
        );
        assert_eq!(cache.check_and_insert(100, nonce(2), 150), Ok(()));
    }

    #[test]
    fn entries_expire_after_the_horizon() {
        let mut cache = ReplayCache::new(10, 1_000);
        cache.check_and_insert(100, nonce(1), 100).unwrap();
        cache.check_and_insert(900, nonce(2), 900).unwrap();
        cache.check_and_insert(1_200, nonce(3), 1_200).unwrap();
        assert_eq!(cache.len(), 2, "the entry of 100 is past 1200 - 1000");
    }

    #[test]
    fn a_full_cache_refuses_everything_below_what_it_forgot() {
        let mut cache = ReplayCache::new(3, 1_000_000);
        for (t, n) in [(10, 1), (20, 2), (30, 3), (40, 4)] {
            cache.check_and_insert(t, nonce(n), 50).unwrap();
        }
        assert_eq!(cache.len(), 3);
        // (10, 1) was forgotten: the floor refuses it, and anything as old.
        assert_eq!(
            cache.check_and_insert(10, nonce(1), 50),
            Err(Refusal::Replayed)
        );
        assert_eq!(
            cache.check_and_insert(5, nonce(9), 50),
            Err(Refusal::Replayed)
        );
        assert_eq!(cache.check_and_insert(41, nonce(9), 50), Ok(()));
    }

    #[test]
    fn no_replay_is_ever_accepted_whatever_the_capacity() {
        // Deterministic pseudo-random issue times; every accepted pair is
        // offered again later and must be refused.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for capacity in [1, 2, 7, 64] {
            let mut cache = ReplayCache::new(capacity, 10_000);
            let mut accepted = Vec::new();
            for i in 0..500u64 {
                let issued = 1_000 + i * 3 + next() % 50;
                let n = Nonce((next() as u128).to_le_bytes());
                if cache.check_and_insert(issued, n, 1_000 + i * 3).is_ok() {
                    accepted.push((issued, n));
                }
                if let Some(&(t, old)) =
                    accepted.get((next() % (accepted.len() as u64 + 1)) as usize)
                {
                    assert_eq!(
                        cache.check_and_insert(t, old, 1_000 + i * 3),
                        Err(Refusal::Replayed),
                        "capacity {capacity}"
                    );
                }
                assert!(cache.len() <= capacity);
            }
            assert!(
                accepted.len() > 100,
                "capacity {capacity}: {}",
                accepted.len()
            );
        }
    }
}
