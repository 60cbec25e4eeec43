//! When each token of each keyspace was last repaired.
//!
//! A successful repair of a range records, on every replica that took part,
//! the time the repair *began*: every write acknowledged before then was on
//! some replica when the trees were built, so after the repair it is on all
//! of them. Tombstone garbage collection ([`crate::gc`]) and the scheduler
//! ([`crate::schedule`]) read it.
//!
//! Kept as non-overlapping inclusive token intervals per keyspace; a new
//! record overwrites what it overlaps (repairs of a range begin later and
//! later, and an older time is only ever more cautious for GC). Persisted by
//! the caller as the bytes of [`RepairHistory::encode`] (a format byte, then
//! fixed-size entries).

use std::collections::BTreeMap;

use ringstore_cell::{KeyspaceId, Timestamp};
use ringstore_placement::{Token, TokenRange};
use uuid::Uuid;

/// The encoding's format version.
const FORMAT: u8 = 1;
/// Bytes per encoded entry: keyspace id, first and last token, time.
const ENTRY_BYTES: usize = 16 + 8 + 8 + 8;

/// Inclusive intervals `[first, last]` of one keyspace, by first token.
type Intervals = BTreeMap<Token, (Token, Timestamp)>;

/// When each token range of each keyspace was last repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairHistory {
    keyspaces: BTreeMap<KeyspaceId, Intervals>,
}

impl RepairHistory {
    /// Records that `range` of `keyspace` was repaired by a repair that
    /// began at `began`.
    pub fn record(&mut self, keyspace: KeyspaceId, range: TokenRange, began: Timestamp) {
        let intervals = self.keyspaces.entry(keyspace).or_default();
        for (first, last) in range.to_inclusive_pieces() {
            overwrite(intervals, first, last, began);
        }
    }

    /// When the token `token` of `keyspace` was last repaired, if ever.
    pub fn repaired_at(&self, keyspace: KeyspaceId, token: Token) -> Option<Timestamp> {
        let intervals = self.keyspaces.get(&keyspace)?;
        let (_, &(last, at)) = intervals.range(..=token).next_back()?;
        (token <= last).then_some(at)
    }

    /// When all of `range` of `keyspace` was last repaired: the oldest time
    /// over its tokens, `None` if some token never was.
    pub fn range_repaired_at(&self, keyspace: KeyspaceId, range: TokenRange) -> Option<Timestamp> {
        let intervals = self.keyspaces.get(&keyspace)?;
        let mut oldest: Option<Timestamp> = None;
        for (first, last) in range.to_inclusive_pieces() {
            let mut next = first;
            // Walk the intervals that cover [first, last] from `first` on.
            loop {
                let (_, &(end, at)) = intervals.range(..=next).next_back()?;
                if end < next {
                    return None;
                }
                oldest = Some(oldest.map_or(at, |o| o.min(at)));
                if end >= last {
                    break;
                }
                next = end.advance(1);
            }
        }
        oldest
    }

    /// Forgets a keyspace (dropped).
    pub fn forget(&mut self, keyspace: KeyspaceId) {
        self.keyspaces.remove(&keyspace);
    }

    /// The keyspaces it has records of.
    pub fn keyspaces(&self) -> impl Iterator<Item = KeyspaceId> + '_ {
        self.keyspaces.keys().copied()
    }

    /// The bytes to persist.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![FORMAT];
        for (keyspace, intervals) in &self.keyspaces {
            for (first, (last, at)) in intervals {
                bytes.extend_from_slice(keyspace.0.as_bytes());
                bytes.extend_from_slice(&first.0.to_be_bytes());
                bytes.extend_from_slice(&last.0.to_be_bytes());
                bytes.extend_from_slice(&at.0.to_be_bytes());
            }
        }
        bytes
    }

    /// Decodes [`RepairHistory::encode`]'s bytes; `None` if they are not a
    /// history of a known format.
    pub fn decode(bytes: &[u8]) -> Option<RepairHistory> {
        let (&format, entries) = bytes.split_first()?;
        if format != FORMAT || entries.len() % ENTRY_BYTES != 0 {
            return None;
        }
        let mut history = RepairHistory::default();
        for entry in entries.chunks_exact(ENTRY_BYTES) {
            let keyspace = KeyspaceId(Uuid::from_bytes(entry[..16].try_into().ok()?));
            let number = |at: usize| i64::from_be_bytes(entry[at..at + 8].try_into().unwrap());
            let (first, last, at) = (Token(number(16)), Token(number(24)), Timestamp(number(32)));
            if last < first {
                return None;
            }
            overwrite(
                history.keyspaces.entry(keyspace).or_default(),
                first,
                last,
                at,
            );
        }
        Some(history)
    }
}

/// Sets `[first, last]` to `at`, trimming or splitting what it overlaps.
fn overwrite(intervals: &mut Intervals, first: Token, last: Token, at: Timestamp) {
    // An interval starting before `first` that reaches into it: keep its head,
    // and its tail if it also reaches past `last`.
    if let Some((&start, &(end, old))) = intervals.range(..first).next_back()
        && end >= first
    {
        intervals.insert(start, (first.advance(u64::MAX), old));
        if end > last {
            intervals.insert(last.advance(1), (end, old));
        }
    }
    // Intervals starting inside `[first, last]`: drop them, keeping the tail
    // of one that reaches past `last`.
    let inside: Vec<Token> = intervals.range(first..=last).map(|(&s, _)| s).collect();
    for start in inside {
        let (end, old) = intervals.remove(&start).expect("listed above");
        if end > last {
            intervals.insert(last.advance(1), (end, old));
        }
    }
    intervals.insert(first, (last, at));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ks() -> KeyspaceId {
        KeyspaceId(Uuid::from_bytes([7; 16]))
    }

    fn range(start: i64, end: i64) -> TokenRange {
        TokenRange::new(Token(start), Token(end))
    }

    #[test]
    fn a_record_covers_its_range_exclusive_start_inclusive_end() {
        let mut history = RepairHistory::default();
        history.record(ks(), range(10, 20), Timestamp(5));
        assert_eq!(history.repaired_at(ks(), Token(10)), None);
        assert_eq!(history.repaired_at(ks(), Token(11)), Some(Timestamp(5)));
        assert_eq!(history.repaired_at(ks(), Token(20)), Some(Timestamp(5)));
        assert_eq!(history.repaired_at(ks(), Token(21)), None);
        assert_eq!(
            history.range_repaired_at(ks(), range(10, 20)),
            Some(Timestamp(5))
        );
        assert_eq!(
            history.repaired_at(KeyspaceId(Uuid::from_bytes([8; 16])), Token(15)),
            None
        );
    }

    #[test]
    fn a_later_record_overwrites_the_middle_of_an_earlier_one() {
        let mut history = RepairHistory::default();
        history.record(ks(), range(0, 100), Timestamp(1));
        history.record(ks(), range(40, 60), Timestamp(2));
        assert_eq!(history.repaired_at(ks(), Token(40)), Some(Timestamp(1)));
        assert_eq!(history.repaired_at(ks(), Token(41)), Some(Timestamp(2)));
        assert_eq!(history.repaired_at(ks(), Token(60)), Some(Timestamp(2)));
        assert_eq!(history.repaired_at(ks(), Token(61)), Some(Timestamp(1)));
        assert_eq!(
            history.range_repaired_at(ks(), range(0, 100)),
            Some(Timestamp(1))
        );
        assert_eq!(
            history.range_repaired_at(ks(), range(45, 55)),
            Some(Timestamp(2))
        );
    }

    #[test]
    fn wrapping_and_whole_ring_ranges_are_recorded_in_pieces() {
        let mut history = RepairHistory::default();
        history.record(ks(), range(100, -100), Timestamp(3));
        assert_eq!(history.repaired_at(ks(), Token::MAX), Some(Timestamp(3)));
        assert_eq!(history.repaired_at(ks(), Token::MIN), Some(Timestamp(3)));
        assert_eq!(history.repaired_at(ks(), Token(0)), None);
        history.record(ks(), range(5, 5), Timestamp(4));
        assert_eq!(
            history.range_repaired_at(ks(), range(0, 0)),
            Some(Timestamp(4))
        );
    }

    #[test]
    fn the_encoding_round_trips_and_garbage_is_refused() {
        let mut history = RepairHistory::default();
        history.record(
            KeyspaceId(Uuid::from_bytes([1; 16])),
            range(-5, 5),
            Timestamp(9),
        );
        assert_eq!(
            RepairHistory::decode(&history.encode()),
            Some(history.clone())
        );
        assert_eq!(RepairHistory::decode(&[]), None);
        assert_eq!(RepairHistory::decode(&[2]), None);
        let mut truncated = history.encode();
        truncated.pop();
        assert_eq!(RepairHistory::decode(&truncated), None);
    }

    proptest! {
        /// Against a model: a map from a small token space to the last record
        /// covering each token.
        #[test]
        fn records_behave_like_a_per_token_map(
            records in proptest::collection::vec((-50i64..50, -50i64..50, 0i64..100), 1..12),
        ) {
            let mut history = RepairHistory::default();
            let mut model: BTreeMap<i64, i64> = BTreeMap::new();
            for (start, end, at) in records {
                let r = range(start, end);
                history.record(ks(), r, Timestamp(at));
                for token in -60..60 {
                    if r.contains(Token(token)) {
                        model.insert(token, at);
                    }
                }
            }
            for token in -60..60 {
                let expected = model.get(&token).copied().map(Timestamp);
                prop_assert_eq!(history.repaired_at(ks(), Token(token)), expected);
            }
            prop_assert_eq!(RepairHistory::decode(&history.encode()), Some(history));
        }
    }
}
