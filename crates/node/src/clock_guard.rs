//! The write guard of the clock bound: a node whose clock is off from the
//! majority of the live members by more than `max_clock_offset` does not
//! coordinate writes.
//!
//! # Why only coordination
//! Last-write-wins orders a key's writes by their timestamps, and the
//! timestamp is stamped by the *coordinator* (from its [`WallClock`]), so the
//! coordinator's clock is the one that must be right. Each coordinator's
//! clock is then within the bound of the majority's, so any two are within
//! twice the bound: two writes to one key further apart than that are
//! ordered as they happened, whichever nodes coordinated them, and further
//! apart than the bound suffices when only one of the two clocks is off
//! (the whole-cluster simulation, seed 60, showed the factor of two is
//! real: one node's timestamps 0.38 s ahead after a healed clock jump,
//! another's clock 0.345 s behind, both within the bound). A skewed node therefore refuses client writes and schema
//! changes (the schema is last-write-wins too), with `UNAVAILABLE` naming its
//! offset and the bound: nothing was applied, the condition is this node's
//! alone, and the client should retry on another coordinator. It resumes by
//! itself once gossip finds its clock back within the bound.
//!
//! # After the clock steps back
//! Timestamps never go back ([`TimestampSource`]), so a node whose clock ran
//! ahead and then stepped back (NTP correcting a jump) goes on issuing the
//! timestamps of the jump, one above the other, until its clock catches up:
//! every write it coordinated meanwhile would beat later writes through
//! other nodes, though its clock is right again. So the guard also refuses
//! while the latest timestamp the node issued is further than the bound
//! ahead of the majority's clock (its own clock plus its offset from the
//! majority's; [`NodeError::TimestampsAhead`]); that covers a
//! restart above a high-water mark saved during such a jump too. (The
//! whole-cluster simulation found this: a clock jump of a few seconds,
//! healed, left writes through that node ordered before writes made
//! seconds later elsewhere.)
//!
//! It goes on applying replica writes coordinated by others (and hints,
//! repairs and streams): those cells carry their coordinator's timestamp,
//! which this node's clock does not touch, so refusing them would only cost
//! availability. (CockroachDB stops such a node altogether, because there
//! every replica's clock bounds its reads' uncertainty; here it does not.)
//! It also goes on coordinating reads: a read picks the newest timestamp
//! among replicas and issues none. What its clock still affects: whether an
//! expiring cell it reads counts as expired yet (up to its offset early or
//! late), and when its own tombstones and expired cells pass `gc_grace`
//! (an offset far below the 10-day default).
//!
//! [`WallClock`]: crate::clock::WallClock
//! [`TimestampSource`]: crate::clock::TimestampSource

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ringstore_membership::{ClockReport, ClockVerdict};

use crate::clock::TimestampSource;
use crate::error::{NodeError, Result};

/// The longest a refused write waits to be logged: refusals are logged at
/// most once per this interval, with how many there were.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Refuses writes while the clock report says this node's clock is skewed;
/// counts the refusals and logs them, rate-limited.
#[derive(Debug, Default)]
pub struct ClockGuard {
    refused: AtomicU64,
    /// When a refusal was last logged, and the refusal count then.
    logged: Mutex<Option<(Instant, u64)>>,
}

impl ClockGuard {
    /// `Ok` when `report` lets this node stamp writes and the timestamps
    /// it issued are within the bound of its clock; otherwise the
    /// `UNAVAILABLE` error naming its offset (or how far ahead its
    /// timestamps are) and the bound.
    pub fn check(&self, report: &ClockReport, timestamps: &TimestampSource) -> Result<()> {
        let Some(error) = refusal(report, timestamps) else {
            return Ok(());
        };
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        self.log(refused, &error);
        Err(error)
    }

    /// Writes refused since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn log(&self, refused: u64, error: &NodeError) {
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        let since = match *logged {
            Some((at, _)) if at.elapsed() < LOG_INTERVAL => return,
            Some((_, count)) => refused - count,
            None => refused,
        };
        *logged = Some((Instant::now(), refused));
        drop(logged);
        tracing::warn!(refused = since, %error, "refusing writes: clock skew");
    }
}

/// Why this node must not stamp a write now, if it must not.
fn refusal(report: &ClockReport, timestamps: &TimestampSource) -> Option<NodeError> {
    if let ClockVerdict::Skewed {
        offset_micros,
        beyond,
        members,
    } = report.verdict
    {
        return Some(NodeError::ClockSkewed {
            offset_micros,
            max_offset: report.max_offset,
            beyond,
            members,
        });
    }
    // How far the latest timestamp issued is ahead of this node's clock,
    // and so of the majority's (this node's clock is that far off it).
    let ahead_of_clock = timestamps.high_water().0.saturating_sub(timestamps.now().0);
    let ahead_micros = ahead_of_clock.saturating_add(report.verdict.offset_micros());
    let bound = i64::try_from(report.max_offset.as_micros()).unwrap_or(i64::MAX);
    (ahead_of_clock > 0 && ahead_micros > bound).then_some(NodeError::TimestampsAhead {
        ahead_micros,
        max_offset: report.max_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_storage::Timestamp;
    use std::collections::BTreeMap;

    fn report(verdict: ClockVerdict) -> ClockReport {
        ClockReport {
            max_offset: Duration::from_millis(500),
            peers: BTreeMap::new(),
            verdict,
        }
    }

    const WITHIN: ClockVerdict = ClockVerdict::Within {
        offset_micros: 400_000,
    };

    #[test]
    fn a_skewed_clock_refuses_with_unavailable_naming_the_offset_and_the_bound() {
        let guard = ClockGuard::default();
        let timestamps = TimestampSource::default();
        assert!(guard.check(&report(WITHIN), &timestamps).is_ok());
        let skewed = report(ClockVerdict::Skewed {
            offset_micros: -2_003_000,
            beyond: 2,
            members: 3,
        });
        let error = guard.check(&skewed, &timestamps).unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unavailable);
        let message = error.to_string();
        assert!(message.contains("behind"), "{message}");
        assert!(message.contains("2.003 s"), "{message}");
        assert!(message.contains("max_clock_offset = 0.500 s"), "{message}");
        assert!(message.contains("2 of the 3"), "{message}");
        guard.check(&skewed, &timestamps).unwrap_err();
        assert_eq!(guard.refused(), 2);
    }

    #[test]
    fn timestamps_issued_further_ahead_than_the_bound_refuse_until_the_clock_passes_them() {
        let guard = ClockGuard::default();
        let timestamps = TimestampSource::default();
        let now = timestamps.now();
        // Issued while the clock read 0.4 s ahead: within the bound.
        timestamps.next_at(Timestamp(now.0 + 400_000));
        let in_step = report(ClockVerdict::Within { offset_micros: 0 });
        assert!(guard.check(&in_step, &timestamps).is_ok());
        // But not if the clock is also 0.2 s ahead of the majority's.
        let ahead = report(ClockVerdict::Within {
            offset_micros: 200_000,
        });
        assert!(guard.check(&ahead, &timestamps).is_err());
        // Issued while it read 3 s ahead; it has stepped back since.
        timestamps.next_at(Timestamp(now.0 + 3_000_000));
        let error = guard.check(&report(WITHIN), &timestamps).unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unavailable);
        let message = error.to_string();
        assert!(message.contains("timestamps up to 3.4"), "{message}");
        assert!(message.contains("max_clock_offset = 0.500 s"), "{message}");
        assert_eq!(guard.refused(), 2);
    }
}
