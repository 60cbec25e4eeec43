//! A stored value with its write timestamp, optional expiry, or a tombstone,
//! and the last-write-wins rule that reconciles two versions.
//!
//! Two clocks meet in a cell and are kept apart:
//! - The **timestamp** is the time the write claims (the client's, or the
//!   coordinator's): it orders writes.
//! - The **expiry** of a TTL write is the coordinator's wall time when it
//!   accepted the write plus the TTL (Cassandra's local deletion time), so a
//!   write back-dated by its client still lives for its whole TTL.
//!
//! Which version wins ([`Cell::compare`]) depends on the two cells only, never
//! on the time of the merge: replicas merging the same versions before and
//! after an expiry keep the same winner (CASSANDRA-14592). Only what a client
//! sees ([`Cell::visible_value`]) depends on the time of the read.

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
    /// The time the write claims; orders writes.
    pub timestamp: Timestamp,
    /// When the cell began hiding its key, on the coordinator's wall clock
    /// (Cassandra's *local deletion time*), independent of `timestamp`:
    /// for a TTL write, when it stops being visible (the time the write was
    /// accepted plus the TTL); for a tombstone, when the delete was accepted
    /// ([`Cell::deletion`]; `None` for tombstones made without it);
    /// `None` for a value that never expires.
    pub expires_at: Option<Timestamp>,
    /// The value; `None` for a tombstone (a delete).
    pub value: Option<Vec<u8>>,
}

/// The first byte of an encoded cell: its format version.
const CELL_FORMAT: u8 = 1;
const FLAG_TOMBSTONE: u8 = 1;
const FLAG_EXPIRES: u8 = 2;

impl Cell {
    /// A live value written at `timestamp` that never expires.
    pub fn live(timestamp: Timestamp, value: Vec<u8>) -> Cell {
        Cell {
            timestamp,
            expires_at: None,
            value: Some(value),
        }
    }

    /// A live value written at `timestamp` that stops being visible
    /// `ttl_seconds` after `now`, the coordinator's current wall time: the TTL
    /// counts from when the write is accepted, not from its timestamp.
    pub fn expiring(
        timestamp: Timestamp,
        value: Vec<u8>,
        ttl_seconds: u32,
        now: Timestamp,
    ) -> Cell {
        Cell {
            timestamp,
            expires_at: Some(now.plus_seconds(ttl_seconds)),
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

    /// A deletion at `timestamp`, accepted by its coordinator at wall time
    /// `now`: tombstone garbage collection counts from `now`, whatever
    /// timestamp the client claimed (see [`Cell::deletion_time`]).
    pub fn deletion(timestamp: Timestamp, now: Timestamp) -> Cell {
        Cell {
            timestamp,
            expires_at: Some(now),
            value: None,
        }
    }

    /// When the cell began (or begins) hiding its key on its coordinator's
    /// wall clock: a tombstone's deletion time (its timestamp if it has
    /// none), a TTL cell's expiry; `None` for a value that never expires.
    /// Garbage collection of the cell counts from this time.
    pub fn deletion_time(&self) -> Option<Timestamp> {
        if self.is_tombstone() {
            Some(self.expires_at.unwrap_or(self.timestamp))
        } else {
            self.expires_at
        }
    }

    /// Whether the cell is a deletion (it has no value).
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    /// Whether the encoded cell `bytes` ([`Cell::encode`]) is a tombstone,
    /// read from its flags without decoding it (`false` for bytes too short
    /// to hold them).
    pub(crate) fn encoded_is_tombstone(bytes: &[u8]) -> bool {
        bytes
            .get(1)
            .is_some_and(|flags| flags & FLAG_TOMBSTONE != 0)
    }

    /// Whether the cell hides the key at `now`: a tombstone, or expired.
    pub fn is_deleted_at(&self, now: Timestamp) -> bool {
        self.is_tombstone() || self.expires_at.is_some_and(|at| at <= now)
    }

    /// The value visible at `now`, if any.
    pub fn visible_value(&self, now: Timestamp) -> Option<&[u8]> {
        if self.is_deleted_at(now) {
            None
        } else {
            self.value.as_deref()
        }
    }

    /// Last-write-wins, from the two cells alone: the higher timestamp wins;
    /// on equal timestamps a tombstone wins over a live cell, then an
    /// expiring cell over a non-expiring one, then the later expiry, then the
    /// greater value bytes.
    ///
    /// A total order that is `Equal` only for equal cells, and independent of
    /// the time: every replica picks the same winner from the same versions
    /// whenever it merges them. (Deciding by "expired at the time of the
    /// merge" instead would let replicas merging before and after an expiry
    /// keep different winners forever, CASSANDRA-14592.)
    pub fn compare(&self, other: &Cell) -> Ordering {
        self.timestamp
            .cmp(&other.timestamp)
            .then_with(|| self.is_tombstone().cmp(&other.is_tombstone()))
            // `None < Some`: an expiring cell wins, then the later expiry.
            .then_with(|| self.expires_at.cmp(&other.expires_at))
            .then_with(|| self.value.cmp(&other.value))
    }

    /// The winner of `self` and `other` by [`Cell::compare`].
    pub fn reconcile(self, other: Cell) -> Cell {
        if other.compare(&self) == Ordering::Greater {
            other
        } else {
            self
        }
    }

    /// Encodes as `version | flags | timestamp (8, BE) | [expiry (8, BE)] | value`.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(18 + self.value.as_deref().map_or(0, <[u8]>::len));
        self.encode_into(&mut bytes);
        bytes
    }

    /// [`Cell::encode`], appended to `bytes`.
    pub(crate) fn encode_into(&self, bytes: &mut Vec<u8>) {
        let mut flags = 0;
        if self.is_tombstone() {
            flags |= FLAG_TOMBSTONE;
        }
        if self.expires_at.is_some() {
            flags |= FLAG_EXPIRES;
        }
        let value = self.value.as_deref().unwrap_or_default();
        bytes.push(CELL_FORMAT);
        bytes.push(flags);
        bytes.extend_from_slice(&self.timestamp.0.to_be_bytes());
        if let Some(at) = self.expires_at {
            bytes.extend_from_slice(&at.0.to_be_bytes());
        }
        bytes.extend_from_slice(value);
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
    const AN_HOUR: i64 = 3_600_000_000;

    fn expiring_at(timestamp: i64, expires_at: Timestamp, value: &[u8]) -> Cell {
        Cell {
            timestamp: Timestamp(timestamp),
            expires_at: Some(expires_at),
            value: Some(value.to_vec()),
        }
    }

    #[test]
    fn later_timestamp_wins() {
        let old = Cell::live(Timestamp(1), b"old".to_vec());
        let new = Cell::live(Timestamp(2), b"new".to_vec());
        assert_eq!(old.clone().reconcile(new.clone()), new);
        assert_eq!(new.clone().reconcile(old), new);
    }

    #[test]
    fn on_equal_timestamps_a_tombstone_wins_then_the_greater_value() {
        let live = Cell::live(Timestamp(5), b"zzz".to_vec());
        let dead = Cell::tombstone(Timestamp(5));
        assert_eq!(live.clone().reconcile(dead.clone()), dead);
        let expiring = expiring_at(5, NOW, b"zzz");
        assert_eq!(expiring.reconcile(dead.clone()), dead);
        let a = Cell::live(Timestamp(5), b"a".to_vec());
        let b = Cell::live(Timestamp(5), b"b".to_vec());
        assert_eq!(a.clone().reconcile(b.clone()), b);
        assert_eq!(b.clone().reconcile(a), b);
    }

    #[test]
    fn on_equal_timestamps_an_expiring_cell_wins_then_the_later_expiry() {
        let forever = Cell::live(Timestamp(5), b"zzz".to_vec());
        let soon = expiring_at(5, NOW, b"b");
        let later = expiring_at(5, NOW.plus_seconds(1), b"a");
        assert_eq!(forever.clone().reconcile(soon.clone()), soon);
        assert_eq!(soon.clone().reconcile(forever), soon);
        assert_eq!(soon.clone().reconcile(later.clone()), later);
        assert_eq!(later.clone().reconcile(soon), later);
    }

    #[test]
    fn an_expired_cell_hides_the_key() {
        let expiring = Cell::expiring(Timestamp(1), b"v".to_vec(), 5, NOW);
        assert_eq!(expiring.visible_value(NOW), Some(&b"v"[..]));
        assert_eq!(expiring.visible_value(NOW.plus_seconds(4)), Some(&b"v"[..]));
        assert!(expiring.is_deleted_at(NOW.plus_seconds(5)));
        assert_eq!(expiring.visible_value(NOW.plus_seconds(5)), None);
    }

    #[test]
    fn a_ttl_counts_from_the_time_of_the_write_not_from_its_timestamp() {
        let an_hour_ago = Timestamp(NOW.0 - AN_HOUR);
        let cell = Cell::expiring(an_hour_ago, b"v".to_vec(), 60, NOW);
        assert_eq!(cell.visible_value(NOW), Some(&b"v"[..]));
        assert_eq!(cell.visible_value(NOW.plus_seconds(59)), Some(&b"v"[..]));
        assert_eq!(cell.visible_value(NOW.plus_seconds(60)), None);
    }

    #[test]
    fn merging_before_and_after_an_expiry_picks_the_same_winner() {
        // CASSANDRA-14592: equal timestamps, one cell expiring at NOW, the
        // other with the greater value. Replica A merges them (in one order)
        // before the expiry, replica B (in the other) after it. When the
        // winner depended on the time of the merge, A kept "zzz" visible
        // forever and B hid the key: they never converged.
        let expiring = expiring_at(5, NOW, b"a");
        let forever = Cell::live(Timestamp(5), b"zzz".to_vec());
        let on_a = forever.clone().reconcile(expiring.clone());
        let on_b = expiring.clone().reconcile(forever);
        assert_eq!(
            on_a, expiring,
            "an expiring cell wins over a non-expiring one"
        );
        assert_eq!(on_a, on_b);
        for read_at in [Timestamp(NOW.0 - 1), NOW, NOW.plus_seconds(3600)] {
            assert_eq!(on_a.visible_value(read_at), on_b.visible_value(read_at));
        }
        assert_eq!(on_a.visible_value(Timestamp(NOW.0 - 1)), Some(&b"a"[..]));
        assert_eq!(on_a.visible_value(NOW), None);
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

    /// A replica that receives `cells` in order, each merged with what it
    /// stores; returns what it stores at the end.
    fn replica_applying(cells: &[&Cell]) -> Option<Cell> {
        cells
            .iter()
            .fold(None, |stored: Option<Cell>, &cell| match stored {
                None => Some(cell.clone()),
                Some(stored) => Some(stored.reconcile(cell.clone())),
            })
    }

    proptest! {
        #[test]
        fn cells_round_trip(cell in any_cell()) {
            prop_assert_eq!(Cell::decode(&cell.encode()).unwrap(), cell);
        }

        #[test]
        fn reconcile_is_commutative_associative_and_idempotent(a in any_cell(), b in any_cell(), c in any_cell()) {
            prop_assert_eq!(a.clone().reconcile(b.clone()), b.clone().reconcile(a.clone()));
            prop_assert_eq!(
                a.clone().reconcile(b.clone()).reconcile(c.clone()),
                a.clone().reconcile(b.clone().reconcile(c.clone()))
            );
            prop_assert_eq!(a.clone().reconcile(a.clone()), a);
        }

        #[test]
        fn compare_is_a_total_order_equal_only_for_equal_cells(a in any_cell(), b in any_cell()) {
            prop_assert_eq!(a.compare(&b), b.compare(&a).reverse());
            prop_assert_eq!(a.compare(&b) == Ordering::Equal, a == b);
        }

        /// Expiry times and read times are drawn from the same small range,
        /// so reads fall before, at and after the cells' expiries.
        #[test]
        fn replicas_show_the_same_value_at_every_time_whatever_the_order_of_merges(
            a in any_cell(),
            b in any_cell(),
            c in any_cell(),
            read_at in proptest::collection::vec(-8i64..8, 1..6),
        ) {
            let first = replica_applying(&[&a, &b, &c]);
            let second = replica_applying(&[&c, &a, &b]);
            let third = replica_applying(&[&b, &c, &a, &b]);
            prop_assert_eq!(&first, &second);
            prop_assert_eq!(&first, &third);
            for now in read_at.into_iter().map(Timestamp) {
                let seen = |stored: &Option<Cell>| {
                    stored.as_ref().and_then(|cell| cell.visible_value(now)).map(<[u8]>::to_vec)
                };
                prop_assert_eq!(seen(&first), seen(&second));
                prop_assert_eq!(seen(&first), seen(&third));
            }
        }
    }
}
