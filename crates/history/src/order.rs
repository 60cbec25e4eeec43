//! Last-write-wins order as far as a history tells it.
//!
//! The store orders two cells of a key by timestamp, then a tombstone over
//! a value, then an expiring value over one that never expires, then the
//! later expiry (or deletion time), then the greater value
//! ([`HeldCell::compare`](crate::HeldCell::compare), as `Cell::compare`).
//! The checker knows less than the store: a client learns a write's
//! timestamp only when it is acknowledged (or read back), and never the
//! expiry a coordinator computed from its clock. So here two writes are
//! ordered only when the order is certain, and "older" means certainly
//! older: every check that calls something a violation asks
//! [`KeyWrite::older_than`], so an order the history cannot tell never
//! condemns a run.
//!
//! When a write's timestamp is unknown (a failed write never seen), its
//! order can still be certain from real time: a write stamped, at the
//! latest, at `s` (its acknowledgement, or its coordinator's answer, or
//! the deadline after which nodes refuse to stamp it) is older than a write
//! sent after `s` plus the clock bound, since the later one's coordinator
//! read a clock past the first one's (the argument of the `Reordered`
//! check). Writes a node coordinated while its clock was pushed past the
//! bound take no part in such arguments.

use std::cmp::Ordering;
use std::time::Duration;

use crate::history::{FailureKind, Op, Timestamp, Write, WriteOutcome};

/// What a write leaves in a cell, in the order the store breaks a tie of
/// timestamps by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CellKind {
    /// A value that never expires.
    Live,
    /// A value with a TTL.
    Expiring,
    /// A tombstone.
    Tombstone,
}

/// One write of a key, with what the history tells of it.
#[derive(Clone, Debug)]
pub(crate) struct KeyWrite<'a> {
    /// Its operation's index in the history.
    pub op_index: usize,
    /// Its operation.
    pub op: &'a Op,
    /// The write (a batch's part, or the operation's only write).
    pub write: &'a Write,
    /// Its timestamp: acknowledged, or seen (a failed write read back or
    /// held by a replica); `None`: unknown.
    pub timestamp: Option<Timestamp>,
    /// The latest its coordinator can have stamped it (and read the clock
    /// its TTL counts from), on the operations' clock; `None`: unbounded.
    pub stamped_by: Option<Duration>,
    /// Coordinated by a node while its clock was pushed past the bound.
    pub exempt: bool,
}

impl<'a> KeyWrite<'a> {
    /// `write`, part of `op` (index `op_index`): stamped by the time it
    /// was acknowledged, or its coordinator answered that it failed, or
    /// else `stamp_deadline` after it was sent, if nodes keep one.
    pub fn new(
        op_index: usize,
        op: &'a Op,
        write: &'a Write,
        stamp_deadline: Option<Duration>,
        exempt: bool,
    ) -> KeyWrite<'a> {
        let stamped_by = match &write.outcome {
            WriteOutcome::Acked(_) => Some(op.completed),
            // The coordinator answered: it had stamped the write, or
            // refused it, before.
            WriteOutcome::Failed(failure)
                if matches!(
                    failure.kind,
                    FailureKind::Unavailable | FailureKind::Timeout
                ) =>
            {
                Some(op.completed)
            }
            WriteOutcome::Failed(_) => stamp_deadline.map(|d| op.invoked + d),
        };
        KeyWrite {
            op_index,
            op,
            write,
            timestamp: write.acked(),
            stamped_by,
            exempt,
        }
    }

    /// What it leaves in a cell.
    pub fn kind(&self) -> CellKind {
        match (self.write.is_delete(), self.write.ttl()) {
            (true, _) => CellKind::Tombstone,
            (false, Some(_)) => CellKind::Expiring,
            (false, None) => CellKind::Live,
        }
    }

    /// Whether `self` and `other` are one write.
    pub fn same(&self, other: &KeyWrite<'_>) -> bool {
        std::ptr::eq(self.write, other.write)
    }

    /// Whether `self` is certainly older than `other` in last-write-wins
    /// order, with the nodes' clocks at most `bound` apart.
    pub fn older_than(&self, other: &KeyWrite<'_>, bound: Duration) -> bool {
        if self.same(other) {
            return false;
        }
        if let (Some(mine), Some(theirs)) = (self.timestamp, other.timestamp) {
            return self.compare_known(mine, other, theirs) == Some(Ordering::Less);
        }
        // One timestamp unknown: real time may still tell.
        !self.exempt
            && !other.exempt
            && self
                .stamped_by
                .is_some_and(|latest| latest + bound < other.op.invoked)
    }

    /// The order of `self` at `mine` and `other` at `theirs`; `None` where
    /// the store decides by an expiry (or deletion time) the history does
    /// not tell.
    fn compare_known(
        &self,
        mine: Timestamp,
        other: &KeyWrite<'_>,
        theirs: Timestamp,
    ) -> Option<Ordering> {
        let by_kind = mine
            .cmp(&theirs)
            .then_with(|| self.kind().cmp(&other.kind()));
        if by_kind != Ordering::Equal {
            return Some(by_kind);
        }
        match self.kind() {
            CellKind::Live => Some(self.write.value().cmp(&other.write.value())),
            CellKind::Expiring | CellKind::Tombstone => None,
        }
    }

    /// Whether its value may have expired by `at`, as a node judges it
    /// (its TTL counts from when its coordinator accepted it, no earlier
    /// than it was sent, by a clock up to `bound` from the judging one's);
    /// `exempt_reader`: the judging node's clock was pushed past the bound.
    pub fn may_have_expired(&self, at: Duration, bound: Duration, exempt_reader: bool) -> bool {
        let Some(ttl) = self.write.ttl() else {
            return false;
        };
        self.exempt || exempt_reader || at + bound >= self.op.invoked + ttl
    }

    /// Whether its value has certainly expired for a read that began at
    /// `at`: more than the TTL plus `bound` after the latest it can have
    /// been accepted.
    pub fn surely_expired(&self, at: Duration, bound: Duration, exempt_reader: bool) -> bool {
        let Some(ttl) = self.write.ttl() else {
            return false;
        };
        !self.exempt
            && !exempt_reader
            && self
                .stamped_by
                .is_some_and(|accepted| at > accepted + ttl + bound)
    }

    /// Whether it can hide its key from a read that ended at `at`: a
    /// delete, or a value whose TTL may have run out by then.
    pub fn may_hide(&self, at: Duration, bound: Duration, exempt_reader: bool) -> bool {
        self.op.invoked <= at
            && (self.write.is_delete() || self.may_have_expired(at, bound, exempt_reader))
    }

    /// `"v"@17`, `"v"@17 (TTL 3s)`, `a delete @17`, `a failed delete`.
    pub fn describe(&self) -> String {
        let at = self.timestamp.map_or_else(
            || " (timestamp unknown)".to_string(),
            |t| format!("@{}", t.0),
        );
        match (self.write.value(), self.write.ttl()) {
            (None, _) => format!("the delete{at}"),
            (Some(value), None) => format!("{:?}{at}", String::from_utf8_lossy(value)),
            (Some(value), Some(ttl)) => {
                format!("{:?}{at} (TTL {ttl:?})", String::from_utf8_lossy(value))
            }
        }
    }
}
