//! The built-in repair scheduler's decisions (`repair.schedule =
//! "continuous"`).
//!
//! Each node schedules the ranges it is the primary replica of (the first
//! replica on the ring), so the cluster repairs every range once per round
//! without two nodes repairing the same range. Every range is due once per
//! `interval` after its last successful repair; the range repaired longest
//! ago (never repaired first) goes next, one range at a time. A range that
//! failed waits until its retry time. The scheduler also names the ranges
//! left unrepaired longer than their keyspace's `gc_grace`: with
//! `tombstone_gc = timeout` those risk deleted data coming back, and with
//! `repair` their tombstones pile up.

use std::time::Duration;

use ringstore_cell::{KeyspaceId, Timestamp};
use ringstore_placement::TokenRange;

/// One range the scheduler looks after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRange {
    /// Its keyspace.
    pub keyspace: KeyspaceId,
    /// The range.
    pub range: TokenRange,
    /// When its last successful repair began, if ever.
    pub last_repaired: Option<Timestamp>,
    /// Not to be tried before this time (after a failure).
    pub retry_at: Option<Timestamp>,
}

/// What the scheduler should do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleDecision {
    /// Repair the range at this index.
    Repair(usize),
    /// Nothing is due before this time.
    WaitUntil(Timestamp),
    /// There is nothing to schedule.
    Idle,
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// When `range` is due next: a never-repaired range at once, else one
/// `interval` after its last repair; never before its retry time.
fn due_at(range: &ScheduledRange, interval: Duration) -> Timestamp {
    let due = range.last_repaired.map_or(Timestamp(i64::MIN), |at| {
        Timestamp(at.0.saturating_add(micros(interval)))
    });
    due.max(range.retry_at.unwrap_or(Timestamp(i64::MIN)))
}

/// The next step for `ranges` at `now`, repairing each once per `interval`.
pub fn next_repair(
    ranges: &[ScheduledRange],
    interval: Duration,
    now: Timestamp,
) -> ScheduleDecision {
    let Some((index, due)) = ranges
        .iter()
        .enumerate()
        .map(|(index, range)| (index, due_at(range, interval)))
        // Earliest due first; among equals, the longest unrepaired.
        .min_by_key(|&(index, due)| (due, ranges[index].last_repaired))
    else {
        return ScheduleDecision::Idle;
    };
    if due <= now {
        ScheduleDecision::Repair(index)
    } else {
        ScheduleDecision::WaitUntil(due)
    }
}

/// The indices of the ranges not repaired for longer than `gc_grace` of
/// their keyspace, counting a never-repaired range from `since` (when the
/// scheduler started looking after it).
pub fn overdue(
    ranges: &[ScheduledRange],
    gc_grace: impl Fn(KeyspaceId) -> Duration,
    since: Timestamp,
    now: Timestamp,
) -> Vec<usize> {
    ranges
        .iter()
        .enumerate()
        .filter(|(_, range)| {
            let from = range.last_repaired.unwrap_or(since);
            from.0.saturating_add(micros(gc_grace(range.keyspace))) < now.0
        })
        .map(|(index, _)| index)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::Token;
    use uuid::Uuid;

    const HOUR: Duration = Duration::from_secs(3600);
    const HOUR_MICROS: i64 = 3_600_000_000;

    fn entry(index: i64, last: Option<i64>) -> ScheduledRange {
        ScheduledRange {
            keyspace: KeyspaceId(Uuid::from_bytes([1; 16])),
            range: TokenRange::new(Token(index * 10), Token(index * 10 + 10)),
            last_repaired: last.map(|h| Timestamp(h * HOUR_MICROS)),
            retry_at: None,
        }
    }

    fn hours(h: i64) -> Timestamp {
        Timestamp(h * HOUR_MICROS)
    }

    #[test]
    fn never_repaired_ranges_go_first_then_the_longest_unrepaired() {
        let ranges = [entry(0, Some(5)), entry(1, None), entry(2, Some(3))];
        assert_eq!(
            next_repair(&ranges, HOUR, hours(10)),
            ScheduleDecision::Repair(1)
        );
        let ranges = [entry(0, Some(5)), entry(2, Some(3))];
        assert_eq!(
            next_repair(&ranges, HOUR, hours(10)),
            ScheduleDecision::Repair(1)
        );
    }

    #[test]
    fn nothing_is_repaired_again_within_its_interval() {
        let ranges = [entry(0, Some(9)), entry(1, Some(8))];
        assert_eq!(
            next_repair(&ranges, 3 * HOUR, hours(10)),
            ScheduleDecision::WaitUntil(hours(11))
        );
        assert_eq!(next_repair(&[], HOUR, hours(10)), ScheduleDecision::Idle);
    }

    #[test]
    fn a_failed_range_waits_for_its_retry_time() {
        let mut failed = entry(0, None);
        failed.retry_at = Some(hours(12));
        let ranges = [failed, entry(1, Some(9))];
        assert_eq!(
            next_repair(&ranges, HOUR, hours(10)),
            ScheduleDecision::Repair(1)
        );
        assert_eq!(
            next_repair(&ranges[..1], HOUR, hours(10)),
            ScheduleDecision::WaitUntil(hours(12))
        );
    }

    #[test]
    fn ranges_unrepaired_longer_than_gc_grace_are_overdue() {
        let ranges = [entry(0, Some(1)), entry(1, None), entry(2, Some(9))];
        assert_eq!(
            overdue(&ranges, |_| 5 * HOUR, hours(0), hours(10)),
            vec![0, 1]
        );
        assert_eq!(overdue(&ranges, |_| 5 * HOUR, hours(6), hours(10)), vec![0]);
    }
}
