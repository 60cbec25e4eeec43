//! What a proposer is asked to do, and how it is evaluated against the
//! register's current version.

use std::num::NonZeroU32;

use ringstore_cell::{Cell, Timestamp};

use crate::ballot::Ballot;

/// The condition of a compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expected {
    /// No visible value: the key was never written, is tombstoned, or its
    /// value's TTL ran out (Cassandra's `IF NOT EXISTS`).
    Absent,
    /// Exactly these bytes are visible.
    Value(Vec<u8>),
    /// Anything, absent included: a plain put or delete, made linearizable.
    Any,
}

impl Expected {
    /// Whether `current` meets the condition at `now` (expiry is judged at
    /// `now`, the coordinator's wall time the shell passed in).
    pub fn matches(&self, current: Option<&Cell>, now: Timestamp) -> bool {
        let visible = current.and_then(|cell| cell.visible_value(now));
        match self {
            Expected::Absent => visible.is_none(),
            Expected::Value(bytes) => visible == Some(bytes.as_slice()),
            Expected::Any => true,
        }
    }
}

/// One linearizable operation on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Write `value` if `expected` holds.
    PutIf {
        /// The condition.
        expected: Expected,
        /// The new value.
        value: Vec<u8>,
        /// Seconds the value stays visible, counted from the `now` the
        /// proposer was started with; `None` never expires.
        ttl: Option<NonZeroU32>,
    },
    /// Delete (write a tombstone) if `expected` holds.
    DeleteIf {
        /// The condition.
        expected: Expected,
    },
    /// Read the current version (Cassandra's `SERIAL` read), finishing any
    /// proposal left in progress.
    SerialRead,
    /// Paxos repair of the key: a serial read that then commits the current
    /// version under its ballot to every replica, even when nothing was in
    /// progress, so that every replica's state becomes purgeable and its
    /// data holds the latest chosen version (see `gc.rs`). Answered as a
    /// read.
    Repair,
}

impl Operation {
    /// The cell this operation writes under `ballot` if its condition holds
    /// against `current` at `now`; `None` if it does not apply (or is a read).
    ///
    /// The new cell's timestamp is `max(ballot.micros, current.timestamp + 1)`:
    /// commits carry timestamps in ballot order, and the new version beats
    /// the one it replaced under last-write-wins even when that one was a
    /// plain write stamped ahead of this coordinator's clock.
    pub fn apply(&self, current: Option<&Cell>, ballot: Ballot, now: Timestamp) -> Option<Cell> {
        let expected = match self {
            Operation::PutIf { expected, .. } | Operation::DeleteIf { expected } => expected,
            Operation::SerialRead | Operation::Repair => return None,
        };
        if !expected.matches(current, now) {
            return None;
        }
        let after = current.map_or(i64::MIN, |cell| cell.timestamp.0.saturating_add(1));
        let timestamp = Timestamp(ballot.micros.max(after));
        Some(match self {
            Operation::PutIf {
                value, ttl: None, ..
            } => Cell::live(timestamp, value.clone()),
            Operation::PutIf {
                value,
                ttl: Some(ttl),
                ..
            } => Cell::expiring(timestamp, value.clone(), ttl.get(), now),
            Operation::DeleteIf { .. } | Operation::SerialRead | Operation::Repair => {
                Cell::deletion(timestamp, now)
            }
        })
    }

    /// Whether this is a read (a repair is answered as one).
    pub fn is_read(&self) -> bool {
        matches!(self, Operation::SerialRead | Operation::Repair)
    }
}
