//! When a tombstone or an expired cell may be purged for good.
//!
//! A deleted key must stay deleted: a tombstone may go only once no replica
//! can still hold a value it shadows, or that value would come back (a
//! "zombie"). The rule, per cell, with `deleted` its
//! [`deletion_time`](ringstore_cell::Cell::deletion_time) (the delete's
//! acceptance time on its coordinator, or a TTL cell's expiry):
//!
//! - [`TombstoneGc::Repair`] (the default, ScyllaDB's `tombstone_gc =
//!   repair`): `deleted + gc_grace <= now` **and** the cell's token was
//!   repaired by a repair that began at least `propagation_delay` after
//!   `deleted`. By then the delete had reached some replica (the delay
//!   covers writes still in flight: timeouts, hints, as ScyllaDB's
//!   `propagation_delay_in_seconds`), so that repair saw the tombstone and
//!   left it (or something newer) on every replica: no replica holds an
//!   older value any more. Waiting for `gc_grace` as well keeps hints safe:
//!   a hint older than `gc_grace` is dropped rather than replayed, so no
//!   hint can bring back a value the tombstone shadowed. A range that is
//!   never repaired keeps its tombstones: disk use grows, data never comes
//!   back.
//! - [`TombstoneGc::Timeout`] (Cassandra's rule): `deleted + gc_grace <= now`
//!   alone. Safe only if every range is repaired within every `gc_grace`;
//!   a replica that missed the delete and was not repaired in time brings
//!   the value back.
//! - [`TombstoneGc::Disabled`]: never purge.
//!
//! Live cells are never purged, and neither is a TTL cell before its expiry.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ringstore_cell::{Cell, Timestamp};

use crate::error::RepairError;

/// How tombstones and expired cells are garbage-collected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TombstoneGc {
    /// After `gc_grace` and a repair that began after the deletion.
    #[default]
    Repair,
    /// After `gc_grace` (Cassandra's rule).
    Timeout,
    /// Never.
    Disabled,
}

impl TombstoneGc {
    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            TombstoneGc::Repair => "repair",
            TombstoneGc::Timeout => "timeout",
            TombstoneGc::Disabled => "disabled",
        }
    }
}

impl fmt::Display for TombstoneGc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TombstoneGc {
    type Err = RepairError;

    fn from_str(text: &str) -> Result<TombstoneGc, RepairError> {
        match text {
            "repair" => Ok(TombstoneGc::Repair),
            "timeout" => Ok(TombstoneGc::Timeout),
            "disabled" => Ok(TombstoneGc::Disabled),
            other => Err(RepairError::UnknownGcMode(other.to_string())),
        }
    }
}

/// The purge rule of one keyspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcRule {
    /// The mode.
    pub mode: TombstoneGc,
    /// The keyspace's `gc_grace_seconds`.
    pub gc_grace: Duration,
    /// How long after a deletion a repair must begin to count for it
    /// ([`TombstoneGc::Repair`] only).
    pub propagation_delay: Duration,
}

impl GcRule {
    /// Whether `cell` may be purged at `now`, given when its token was last
    /// repaired (see the module docs).
    pub fn purgeable(&self, cell: &Cell, repaired_at: Option<Timestamp>, now: Timestamp) -> bool {
        let Some(deleted) = cell.deletion_time() else {
            return false;
        };
        let grace_over = deleted.0.saturating_add(micros(self.gc_grace)) <= now.0;
        let propagated = deleted.0.saturating_add(micros(self.propagation_delay));
        match self.mode {
            TombstoneGc::Disabled => false,
            TombstoneGc::Timeout => grace_over,
            TombstoneGc::Repair => grace_over && repaired_at.is_some_and(|r| propagated < r.0),
        }
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000;

    fn rule(mode: TombstoneGc) -> GcRule {
        GcRule {
            mode,
            gc_grace: Duration::from_secs(10),
            propagation_delay: Duration::ZERO,
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp(seconds * SECOND)
    }

    #[test]
    fn live_cells_and_unexpired_ttl_cells_are_never_purged() {
        let live = Cell::live(at(0), b"v".to_vec());
        let ttl = Cell::expiring(at(0), b"v".to_vec(), 100, at(0));
        for mode in [TombstoneGc::Repair, TombstoneGc::Timeout] {
            assert!(!rule(mode).purgeable(&live, Some(at(1000)), at(1000)));
            assert!(!rule(mode).purgeable(&ttl, Some(at(99)), at(99)));
        }
    }

    #[test]
    fn timeout_mode_purges_after_gc_grace_from_the_deletion_time() {
        let dead = Cell::deletion(at(-1000), at(100));
        assert!(!rule(TombstoneGc::Timeout).purgeable(&dead, None, at(109)));
        assert!(rule(TombstoneGc::Timeout).purgeable(&dead, None, at(110)));
    }

    #[test]
    fn repair_mode_also_needs_a_repair_that_began_after_the_deletion() {
        let dead = Cell::deletion(at(100), at(100));
        let r = rule(TombstoneGc::Repair);
        assert!(!r.purgeable(&dead, None, at(1000)));
        assert!(!r.purgeable(&dead, Some(at(100)), at(1000)));
        assert!(r.purgeable(&dead, Some(at(101)), at(1000)));
        assert!(
            !r.purgeable(&dead, Some(at(101)), at(105)),
            "gc_grace not over"
        );
    }

    #[test]
    fn a_repair_must_begin_a_propagation_delay_after_the_deletion() {
        let dead = Cell::deletion(at(100), at(100));
        let r = GcRule {
            propagation_delay: Duration::from_secs(60),
            ..rule(TombstoneGc::Repair)
        };
        assert!(!r.purgeable(&dead, Some(at(160)), at(1000)));
        assert!(r.purgeable(&dead, Some(at(161)), at(1000)));
    }

    #[test]
    fn a_back_dated_delete_counts_from_when_it_was_accepted() {
        // The client claims a timestamp long ago; a repair began before the
        // delete was accepted, though after its timestamp.
        let dead = Cell::deletion(at(0), at(500));
        assert!(!rule(TombstoneGc::Repair).purgeable(&dead, Some(at(400)), at(1000)));
        assert!(rule(TombstoneGc::Repair).purgeable(&dead, Some(at(501)), at(1000)));
    }

    #[test]
    fn expired_cells_count_from_their_expiry_and_disabled_never_purges() {
        let ttl = Cell::expiring(at(0), b"v".to_vec(), 50, at(0));
        assert!(!rule(TombstoneGc::Timeout).purgeable(&ttl, None, at(59)));
        assert!(rule(TombstoneGc::Timeout).purgeable(&ttl, None, at(60)));
        assert!(rule(TombstoneGc::Repair).purgeable(&ttl, Some(at(51)), at(60)));
        assert!(!rule(TombstoneGc::Disabled).purgeable(&ttl, Some(at(51)), at(600)));
    }

    #[test]
    fn modes_parse_from_their_names() {
        for mode in [
            TombstoneGc::Repair,
            TombstoneGc::Timeout,
            TombstoneGc::Disabled,
        ] {
            assert_eq!(mode.as_str().parse(), Ok(mode));
        }
        assert!("never".parse::<TombstoneGc>().is_err());
    }
}
