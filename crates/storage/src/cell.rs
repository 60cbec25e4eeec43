//! A stored value with its write timestamp, optional expiry, or a tombstone,
//! and the last-write-wins rule that reconciles two versions.

use std::cmp::Ordering;
use std::fmt;

use crate::error::{Result, StorageError};

/// Microseconds since the Unix epoch: the time a write claims, and the unit
/// of expiry times. Coordinators issue them strictly increasing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Timestamp {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        Timestamp(micros)
    }

    /// `self` plus `seconds`, saturating.
    pub fn plus_seconds(self, seconds: u32) -> Timestamp {
        Timestamp(self.0.saturating_add(i64::from(seconds) * 1_000_000))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One version of a key's value: a live value (possibly expiring) or a
/// tombstone. Replicas keep, per key, the version that wins by [`Cell::reconcile`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    /// When it was written.
    pub timestamp: Timestamp,
    /// When a TTL write stops being visible; `None` never.
    pub expires_at: Option<Timestamp>,
    /// The value; `None` for a tombstone (a delete).
    pub value: Option<Vec<u8>>,
}

/// The first byte of an encoded cell: its format version.
const CELL_FORMAT: u8 = 1;
const FLAG_TOMBSTONE: u8 = 1;
const FLAG_EXPIRES: u8 = 2;

impl Cell {
    /// A live value written at `timestamp`, expiring `ttl_seconds` later if given.
    pub fn live(timestamp: Timestamp, value: Vec<u8>, ttl_seconds: Option<u32>) -> Cell {
        Cell {
            timestamp,
            expires_at: ttl_seconds.map(|ttl| timestamp.plus_seconds(ttl)),
            value: Some(value),
        }
    }

    /// A deletion at `timestamp`.
    pub fn tombstone(timestamp: Timestamp) -> Cell {
        Cell {
            timestamp,
            expires_at: None,
            value: None,
        }
    }

    /// Whether the cell hides the key at `now`: a tombstone, or expired.
    pub fn is_deleted_at(&self, now: Timestamp) -> bool {
        self.value.is_none() || self.expires_at.is_some_and(|at| at <= now)
    }

    /// The value visible at `now`, if any.
    pub fn visible_value(&self, now: Timestamp) -> Option<&[u8]> {
        if self.is_deleted_at(now) {
            None
        } else {
            self.value.as_deref()
        }
    }

    /// Last-write-wins: the later timestamp wins; on equal timestamps a
    /// deletion (a tombstone, or a cell expired at `now`) wins, then the
    /// greater value bytes, then the later expiry. Total, so every replica
    /// picks the same winner from the same versions.
    pub fn compare(&self, other: &Cell, now: Timestamp) -> Ordering {
        self.timestamp
            .cmp(&other.timestamp)
            .then_with(|| self.is_deleted_at(now).cmp(&other.is_deleted_at(now)))
            .then_with(|| self.value.cmp(&other.value))
            .then_with(|| self.expires_at.cmp(&other.expires_at))
    }

    /// The winner of `self` and `other` at `now`.
    pub fn reconcile(self, other: Cell, now: Timestamp) -> Cell {
        if other.compare(&self, now) == Ordering::Greater {
            other
        } else {
            self
        }
    }

    /// Encodes as `version | flags | timestamp (8, BE) | [expiry (8, BE)] | value`.
    pub fn encode(&self) -> Vec<u8> {
        let mut flags = 0;
        if self.value.is_none() {
            flags |= FLAG_TOMBSTONE;
        }
        if self.expires_at.is_some() {
            flags |= FLAG_EXPIRES;
        }
        let value = self.value.as_deref().unwrap_or_default();
        let mut bytes = Vec::with_capacity(18 + value.len());
        bytes.push(CELL_FORMAT);
        bytes.push(flags);
        bytes.extend_from_slice(&self.timestamp.0.to_be_bytes());
        if let Some(at) = self.expires_at {
            bytes.extend_from_slice(&at.0.to_be_bytes());
        }
        bytes.extend_from_slice(value);
        bytes
    }

    /// Decodes what [`Cell::encode`] wrote; a corrupt or unknown encoding is an error.
    pub fn decode(bytes: &[u8]) -> Result<Cell> {
        let corrupt = |reason: &str| StorageError::CorruptCell {
            reason: reason.to_string(),
        };
        let [format, flags, rest @ ..] = bytes else {
            return Err(corrupt("shorter than its header"));
        };
        if *format != CELL_FORMAT {
            return Err(corrupt(&format!("unknown cell format {format}")));
        }
        if flags & !(FLAG_TOMBSTONE | FLAG_EXPIRES) != 0 {
            return Err(corrupt(&format!("unknown flags {flags:#x}")));
        }
        let (timestamp, rest) = take_i64(rest).ok_or_else(|| corrupt("truncated timestamp"))?;
        let (expires_at, rest) = if flags & FLAG_EXPIRES != 0 {
            let (at, rest) = take_i64(rest).ok_or_else(|| corrupt("truncated expiry"))?;
            (Some(Timestamp(at)), rest)
        } else {
            (None, rest)
        };
        let value = if flags & FLAG_TOMBSTONE != 0 {
            if !rest.is_empty() {
                return Err(corrupt("a tombstone with a value"));
            }
            None
        } else {
            Some(rest.to_vec())
        };
        Ok(Cell {
            timestamp: Timestamp(timestamp),
            expires_at,
            value,
        })
    }
}

fn take_i64(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((i64::from_be_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: Timestamp = Timestamp(1_000_000_000);

    #[test]
    fn later_timestamp_wins() {
        let old = Cell::live(Timestamp(1), b"old".to_vec(), None);
        let new = Cell::live(Timestamp(2), b"new".to_vec(), None);
        assert_eq!(old.clone().reconcile(new.clone(), NOW), new);
        assert_eq!(new.clone().reconcile(old, NOW), new);
    }

    #[test]
    fn on_equal_timestamps_a_tombstone_wins_then_the_greater_value() {
        let live = Cell::live(Timestamp(5), b"zzz".to_vec(), None);
        let dead = Cell::tombstone(Timestamp(5));
        assert_eq!(live.clone().reconcile(dead.clone(), NOW), dead);
        let a = Cell::live(Timestamp(5), b"a".to_vec(), None);
        let b = Cell::live(Timestamp(5), b"b".to_vec(), None);
        assert_eq!(a.clone().reconcile(b.clone(), NOW), b);
        assert_eq!(b.clone().reconcile(a, NOW), b);
    }

    #[test]
    fn an_expired_cell_hides_the_key_and_acts_as_a_tombstone() {
        let expiring = Cell::live(Timestamp(NOW.0 - 10_000_000), b"v".to_vec(), Some(5));
        assert!(expiring.is_deleted_at(NOW));
        assert_eq!(expiring.visible_value(NOW), None);
        assert_eq!(
            expiring.visible_value(Timestamp(NOW.0 - 9_000_000)),
            Some(&b"v"[..])
        );
        let same_time_live = Cell::live(expiring.timestamp, b"zzz".to_vec(), None);
        assert_eq!(same_time_live.reconcile(expiring.clone(), NOW), expiring);
    }

    #[test]
    fn corrupt_encodings_are_errors() {
        assert!(Cell::decode(&[]).is_err());
        assert!(Cell::decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Cell::decode(&[CELL_FORMAT, 0, 1, 2]).is_err());
        assert!(Cell::decode(&[CELL_FORMAT, 0x80, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        let mut tombstone = Cell::tombstone(Timestamp(1)).encode();
        tombstone.push(7);
        assert!(Cell::decode(&tombstone).is_err());
    }

    fn any_cell() -> impl Strategy<Value = Cell> {
        (
            -5i64..5,
            proptest::option::of(-5i64..5),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3)),
        )
            .prop_map(|(ts, exp, value)| Cell {
                timestamp: Timestamp(ts),
                expires_at: exp.map(Timestamp),
                value,
            })
    }

    proptest! {
        #[test]
        fn cells_round_trip(cell in any_cell()) {
            prop_assert_eq!(Cell::decode(&cell.encode()).unwrap(), cell);
        }

        #[test]
        fn reconcile_is_commutative_associative_and_idempotent(a in any_cell(), b in any_cell(), c in any_cell()) {
            let now = Timestamp(0);
            prop_assert_eq!(a.clone().reconcile(b.clone(), now), b.clone().reconcile(a.clone(), now));
            prop_assert_eq!(
                a.clone().reconcile(b.clone(), now).reconcile(c.clone(), now),
                a.clone().reconcile(b.clone().reconcile(c.clone(), now), now)
            );
            prop_assert_eq!(a.clone().reconcile(a.clone(), now), a);
        }
    }
}
