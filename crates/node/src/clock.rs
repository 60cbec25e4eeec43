//! Write timestamps: microseconds since the epoch, taken from the wall clock
//! and strictly increasing per node even when the wall clock stalls or steps
//! back.
//!
//! Every wall-clock reading of the node goes through one [`WallClock`]:
//! write timestamps, TTL and tombstone times, hint ages, repair times, the
//! generation, and the clock probes of gossip. It is the platform's clock
//! (the system's; a simulation's simulated one) plus an offset that only
//! tests set (`test_clock_offset_ms`, or `RINGSTORE_TEST_CLOCK_OFFSET_MS`),
//! so a test can give one node a wrong clock and see everything that clock
//! drives go wrong together.
//!
//! # Invariants
//! - Only the wall clock moves the source forward. A client-supplied
//!   timestamp never does: one request with a timestamp a year ahead would
//!   otherwise make every later server-stamped write through this node win
//!   over deletes coordinated elsewhere (and `i64::MAX` would overflow
//!   `last + 1`). Client timestamps are bounded instead, at the edge
//!   ([`check_client_timestamp`]).
//! - Across a restart the source resumes above the last timestamp it saved
//!   ([`TimestampSource::resume`]), so a clock that stepped back while the
//!   node was down does not make its first writes lose to its last ones. A
//!   saved value further ahead of the wall clock than the allowed skew is
//!   not trusted (it can only come from a clock that was wrong then): the
//!   source starts from the wall clock and the node logs it.
//!
//! # Caveats
//! - The saved high-water mark is written every [`SAVE_INTERVAL`] and at a
//!   clean stop, so after a crash the timestamps issued in the last interval
//!   are not covered: if the wall clock also stepped back by more than that
//!   interval across the crash, a few of them may be reissued.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use ringstore_membership::{Clock, SystemClock, WallTime};
use ringstore_storage::{Store, Timestamp};

use crate::error::{ClientTimestampError, NodeError, Result};

/// How often the high-water mark is saved.
pub const SAVE_INTERVAL: Duration = Duration::from_millis(200);

/// The key of the saved high-water mark in the storage's system tree.
const HIGH_WATER_META_KEY: &str = "clock_high_water";

/// The node's wall clock: the platform's clock plus a test offset (zero
/// outside tests). Shared as `Arc`; the offset can be changed at run time,
/// as a clock step would.
pub struct WallClock {
    base: Arc<dyn Clock>,
    offset_micros: AtomicI64,
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WallClock")
            .field("offset_micros", &self.offset_micros)
            .finish_non_exhaustive()
    }
}

impl Default for WallClock {
    fn default() -> WallClock {
        WallClock::with_offset_ms(0)
    }
}

impl WallClock {
    /// A clock reading `offset_ms` milliseconds ahead of the system's
    /// (behind, if negative). For tests only.
    pub fn with_offset_ms(offset_ms: i64) -> WallClock {
        WallClock::on(SystemClock::shared(), offset_ms)
    }

    /// A clock reading `offset_ms` milliseconds ahead of `base` (a
    /// simulation's clock, say).
    pub fn on(base: Arc<dyn Clock>, offset_ms: i64) -> WallClock {
        WallClock {
            base,
            offset_micros: AtomicI64::new(offset_ms.saturating_mul(1000)),
        }
    }

    /// The current wall time.
    pub fn now(&self) -> Timestamp {
        Timestamp(
            self.base
                .wall()
                .0
                .saturating_add(self.offset_micros.load(Ordering::Relaxed)),
        )
    }

    /// Steps the clock to read `offset_ms` ahead of its base's. For tests
    /// only: a step back never makes timestamps go back ([`TimestampSource`]).
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_micros
            .store(offset_ms.saturating_mul(1000), Ordering::Relaxed);
    }

    /// The test offset, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_micros.load(Ordering::Relaxed) / 1000
    }
}

impl Clock for WallClock {
    fn wall(&self) -> WallTime {
        WallTime(self.now().0)
    }

    fn monotonic(&self) -> Duration {
        self.base.monotonic()
    }
}

/// Issues strictly increasing timestamps: `max(now, last + 1)`, `now` read
/// from the node's [`WallClock`].
#[derive(Debug, Default)]
pub struct TimestampSource {
    last: AtomicI64,
    clock: Arc<WallClock>,
}

/// What [`TimestampSource::resume`] made of a saved high-water mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// Nothing was saved (a fresh node).
    Fresh,
    /// Later timestamps exceed the saved one.
    Above(Timestamp),
    /// The saved value was too far ahead of the wall clock and was ignored.
    Distrusted {
        /// The saved value.
        saved: Timestamp,
        /// The wall clock at the time.
        now: Timestamp,
    },
}

impl TimestampSource {
    /// A source reading `clock` that continues above `saved` (the
    /// high-water mark a previous run saved), unless `saved` lies more than
    /// `max_ahead` past the clock's time.
    pub fn resume(
        saved: Option<Timestamp>,
        clock: Arc<WallClock>,
        max_ahead: Duration,
    ) -> (TimestampSource, Resumed) {
        let fresh = |clock| TimestampSource {
            last: AtomicI64::new(0),
            clock,
        };
        let Some(saved) = saved else {
            return (fresh(clock), Resumed::Fresh);
        };
        let now = clock.now();
        let limit = now.0.saturating_add(micros_of(max_ahead));
        if saved.0 > limit {
            return (fresh(clock), Resumed::Distrusted { saved, now });
        }
        let source = TimestampSource {
            last: AtomicI64::new(saved.0),
            clock,
        };
        (source, Resumed::Above(saved))
    }

    /// The next timestamp, at the current wall-clock time.
    pub fn next(&self) -> Timestamp {
        self.next_at(self.clock.now())
    }

    /// The node's wall time now (not a timestamp: two reads may be equal).
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// The node's wall clock, to share (gossip, hints) or, in tests, to step.
    pub fn wall_clock(&self) -> &Arc<WallClock> {
        &self.clock
    }

    /// The next timestamp when the wall clock reads `now`.
    pub fn next_at(&self, now: Timestamp) -> Timestamp {
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let candidate = now.0.max(last.saturating_add(1));
            match self.last.compare_exchange_weak(
                last,
                candidate,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Timestamp(candidate),
                Err(actual) => last = actual,
            }
        }
    }

    /// The latest timestamp issued (or resumed above).
    pub fn high_water(&self) -> Timestamp {
        Timestamp(self.last.load(Ordering::Acquire))
    }
}

/// The high-water mark a previous run saved in `store`, if any.
pub fn load_high_water(store: &Store) -> Result<Option<Timestamp>> {
    let Some(bytes) = store.meta_get(HIGH_WATER_META_KEY)? else {
        return Ok(None);
    };
    let bytes: [u8; 8] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| NodeError::CorruptRecord {
            record: "the saved clock high-water mark",
            detail: Some(format!("{} bytes, not 8", bytes.len())),
        })?;
    Ok(Some(Timestamp(i64::from_be_bytes(bytes))))
}

/// Saves `source`'s high-water mark in `store` (durably).
pub async fn save_high_water(store: &Store, source: &TimestampSource) -> Result<()> {
    let mark = source.high_water();
    store
        .meta_put(HIGH_WATER_META_KEY, &mark.0.to_be_bytes())
        .await?;
    Ok(())
}

/// Saves the high-water mark every [`SAVE_INTERVAL`] while it moves; runs
/// until the node stops.
pub async fn keep_saving(store: Store, source: &TimestampSource) {
    let mut saved = source.high_water();
    let mut ticker = tokio::time::interval(SAVE_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let mark = source.high_water();
        if mark == saved {
            continue;
        }
        match save_high_water(&store, source).await {
            Ok(()) => saved = mark,
            Err(error) => tracing::warn!(%error, "saving the clock high-water mark"),
        }
    }
}

/// Checks a client-supplied timestamp: not negative, and at most
/// `max_skew` ahead of this node's wall clock `now` (the
/// `max_client_timestamp_skew_seconds` setting).
pub fn check_client_timestamp(micros: i64, now: Timestamp, max_skew: Duration) -> Result<()> {
    if micros < 0 {
        return Err(ClientTimestampError::Negative(micros).into());
    }
    let ahead = micros.saturating_sub(now.0);
    if ahead > micros_of(max_skew) {
        return Err(ClientTimestampError::TooFarAhead {
            micros,
            ahead_micros: ahead,
            max_skew,
        }
        .into());
    }
    Ok(())
}

fn micros_of(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_membership::system_micros;
    use std::collections::HashSet;
    use std::sync::Arc;

    const SKEW: Duration = Duration::from_secs(300);

    #[test]
    fn timestamps_strictly_increase_across_threads() {
        let source = Arc::new(TimestampSource::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let source = source.clone();
                std::thread::spawn(move || {
                    let stamps: Vec<i64> = (0..10_000).map(|_| source.next().0).collect();
                    assert!(stamps.windows(2).all(|w| w[0] < w[1]));
                    stamps
                })
            })
            .collect();
        let mut all = HashSet::new();
        for thread in threads {
            for stamp in thread.join().unwrap() {
                assert!(all.insert(stamp), "timestamp {stamp} issued twice");
            }
        }
    }

    #[test]
    fn a_clock_that_steps_back_does_not_make_timestamps_go_back() {
        let source = TimestampSource::default();
        let first = source.next_at(Timestamp(1_000));
        let after_step_back = source.next_at(Timestamp(500));
        assert_eq!(first, Timestamp(1_000));
        assert_eq!(after_step_back, Timestamp(1_001));
        assert_eq!(source.next_at(Timestamp(2_000)), Timestamp(2_000));
    }

    #[test]
    fn a_restart_resumes_above_the_saved_mark() {
        let clock = Arc::new(WallClock::default());
        let now = clock.now();
        let saved = Timestamp(now.0 + 1_000_000);
        let (source, resumed) = TimestampSource::resume(Some(saved), clock, SKEW);
        assert_eq!(resumed, Resumed::Above(saved));
        assert_eq!(source.next_at(now), Timestamp(saved.0 + 1));
    }

    #[test]
    fn a_poisoned_saved_mark_is_not_trusted() {
        let clock = Arc::new(WallClock::default());
        let base = clock.now();
        for saved in [Timestamp(base.0 + 3_600_000_000), Timestamp(i64::MAX)] {
            let (source, resumed) = TimestampSource::resume(Some(saved), clock.clone(), SKEW);
            assert!(matches!(resumed, Resumed::Distrusted { saved: s, .. } if s == saved));
            assert_eq!(source.next_at(base), base);
        }
    }

    #[test]
    fn the_source_never_overflows() {
        let (source, _) = TimestampSource::resume(
            Some(Timestamp(i64::MAX)),
            Arc::new(WallClock::with_offset_ms(i64::MAX)),
            Duration::ZERO,
        );
        assert_eq!(source.next_at(Timestamp(0)), Timestamp(i64::MAX));
    }

    #[test]
    fn the_test_offset_moves_every_reading_and_a_step_back_never_moves_timestamps_back() {
        let clock = Arc::new(WallClock::with_offset_ms(60_000));
        let (source, _) = TimestampSource::resume(None, clock.clone(), SKEW);
        let system = system_micros();
        let ahead = source.next().0 - system;
        assert!((59_000_000..61_000_000).contains(&ahead), "{ahead}");
        assert!((source.now().0 - system_micros() - 60_000_000).abs() < 1_000_000);
        assert!((clock.wall().0 - system_micros() - 60_000_000).abs() < 1_000_000);
        let before = source.next();
        clock.set_offset_ms(0);
        assert_eq!(clock.offset_ms(), 0);
        assert!(source.now() < before, "the wall clock stepped back");
        assert!(source.next() > before, "timestamps did not");
    }

    #[test]
    fn client_timestamps_beyond_the_skew_are_refused_with_the_bound_named() {
        let now = Timestamp(1_000_000_000_000);
        assert!(check_client_timestamp(now.0 + 299_000_000, now, SKEW).is_ok());
        assert!(
            check_client_timestamp(0, now, SKEW).is_ok(),
            "the past is fine"
        );
        for bad in [now.0 + 301_000_000, i64::MAX] {
            let error = check_client_timestamp(bad, now, SKEW).unwrap_err();
            assert_eq!(error.code(), tonic::Code::InvalidArgument, "{error:?}");
            assert!(
                error
                    .to_string()
                    .contains("max_client_timestamp_skew_seconds"),
                "{error}"
            );
        }
        assert!(check_client_timestamp(-1, now, SKEW).is_err());
    }
}
