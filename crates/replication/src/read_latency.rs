//! A keyspace's recent replica read latency, for percentile speculative
//! retry (`speculative_retry = p99`).
//!
//! The node records how long each replica took to answer a read
//! ([`ReadLatency::record`]) and asks for a percentile when a read starts
//! ([`ReadLatency::estimate`]). Samples go into an HDR histogram (the
//! `hdrhistogram` crate, 3 significant digits, microseconds up to a minute);
//! the estimate comes from the last *completed window*: a window closes once
//! it is at least [`ReadLatency::WINDOW`] old and holds at least
//! [`ReadLatency::MIN_SAMPLES`] samples, and then replaces the previous one.
//! So the estimate follows the load within about a second, costs one
//! histogram lookup per window and percentile (it is cached), and a quiet
//! keyspace keeps its last estimate until enough new samples arrive. Time is
//! passed in: the estimator reads no clock, so tests drive it with made-up
//! instants.
//!
//! Before the first window completes (after a restart, for a new keyspace)
//! the estimate is *provisional*: the percentile of the samples so far, once
//! there are [`ReadLatency::PROVISIONAL_SAMPLES`] of them (with 10, p99 is
//! their maximum). A quiet node may take many seconds to fill its first
//! window, and without an estimate its reads wait a fixed fallback before
//! they speculate; the whole-cluster simulation found reads of a node
//! restarted 4.5 s earlier waiting that fallback (2.5 s) for a crashed
//! replica, long enough for the client's reads to time out (seed 6377).
//!
//! # What to record
//! The node records only answers that arrive while their read still waits.
//! A stopped replica's answers arrive after a speculation already finished
//! the read and are not recorded; were they, a replica stopped for 200 ms
//! out of every second would put several percent of all samples near
//! 200 ms and drag the p99 — and so the speculation delay — up to that stall.
//!
//! # Caveats
//! - Leaving out late answers biases the estimate low when reads speculate
//!   often (the slower of two answers is the one dropped), which makes them
//!   speculate a little more often, never less.
//! - [`ReadLatency::MIN_SAMPLES`] (100) is few for percentiles above p99:
//!   p99.9 of a 100-sample window is its maximum.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::speculative_retry::Percentile;

/// The largest latency told apart (one minute, in µs); slower ones count as it.
const MAX_MICROS: u64 = 60_000_000;

/// One keyspace's recent replica read latency. See the module docs.
#[derive(Clone, Debug)]
pub struct ReadLatency {
    /// The window being filled, and when it began.
    current: Histogram<u64>,
    current_since: Option<Instant>,
    /// The last completed window, the estimates' source.
    previous: Option<Histogram<u64>>,
    /// The last estimate computed from `previous`.
    cached: Option<(Percentile, Duration)>,
}

impl Default for ReadLatency {
    fn default() -> ReadLatency {
        ReadLatency::new()
    }
}

impl ReadLatency {
    /// The shortest window an estimate comes from.
    pub const WINDOW: Duration = Duration::from_secs(1);
    /// The fewest samples an estimate comes from.
    pub const MIN_SAMPLES: u64 = 100;
    /// The fewest samples a provisional estimate (before the first window
    /// completes) comes from.
    pub const PROVISIONAL_SAMPLES: u64 = 10;

    /// An estimator with no samples (and so no estimate).
    pub fn new() -> ReadLatency {
        ReadLatency {
            current: new_histogram(),
            current_since: None,
            previous: None,
            cached: None,
        }
    }

    /// A replica answered a read after `latency`, at `now`.
    pub fn record(&mut self, now: Instant, latency: Duration) {
        self.rotate(now);
        self.current_since.get_or_insert(now);
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.current.saturating_record(micros.clamp(1, MAX_MICROS));
    }

    /// Percentile `p` of the last completed window at `now`; before the
    /// first window completes, of the samples so far once there are
    /// [`Self::PROVISIONAL_SAMPLES`] (not cached: the window still fills);
    /// `None` before that.
    pub fn estimate(&mut self, now: Instant, p: Percentile) -> Option<Duration> {
        self.rotate(now);
        if let Some((cached, value)) = self.cached
            && cached == p
        {
            return Some(value);
        }
        let Some(previous) = self.previous.as_ref() else {
            let provisional = self.current.len() >= Self::PROVISIONAL_SAMPLES;
            return provisional
                .then(|| Duration::from_micros(self.current.value_at_quantile(p.quantile())));
        };
        let value = Duration::from_micros(previous.value_at_quantile(p.quantile()));
        self.cached = Some((p, value));
        Some(value)
    }

    /// Closes the current window if it is old and full enough.
    fn rotate(&mut self, now: Instant) {
        let Some(since) = self.current_since else {
            return;
        };
        if now.saturating_duration_since(since) < Self::WINDOW
            || self.current.len() < Self::MIN_SAMPLES
        {
            return;
        }
        let full = std::mem::replace(&mut self.current, new_histogram());
        self.previous = Some(full);
        self.current_since = None;
        self.cached = None;
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("the bounds are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn p(hundredths: u16) -> Percentile {
        Percentile::from_hundredths(hundredths).unwrap()
    }

    /// Records `fast` samples of 2 ms and `slow` of 50 ms at `at`.
    fn fill(latency: &mut ReadLatency, at: Instant, fast: u32, slow: u32) {
        for _ in 0..fast {
            latency.record(at, 2 * MS);
        }
        for _ in 0..slow {
            latency.record(at, 50 * MS);
        }
    }

    fn near(actual: Option<Duration>, expected: Duration) -> bool {
        actual.is_some_and(|a| a.abs_diff(expected) <= expected / 100)
    }

    #[test]
    fn before_the_first_window_the_estimate_is_provisional_once_there_are_a_few_samples() {
        let start = Instant::now();
        let mut latency = ReadLatency::new();
        assert_eq!(latency.estimate(start, Percentile::P99), None);
        fill(&mut latency, start, 9, 0);
        assert_eq!(latency.estimate(start + MS * 999, Percentile::P99), None);
        // The tenth sample, a slow one: p99 of ten is their maximum.
        fill(&mut latency, start, 0, 1);
        assert!(near(latency.estimate(start, Percentile::P99), 50 * MS));
        assert!(near(latency.estimate(start, p(5000)), 2 * MS));
        // Long after, with too few samples for a window: still provisional.
        let later = start + 10 * ReadLatency::WINDOW;
        assert!(near(latency.estimate(later, Percentile::P99), 50 * MS));
        // Windows of enough samples complete and replace it: the first
        // holds the slow sample, the next only fast ones.
        fill(&mut latency, later, 200, 0);
        let next = later + ReadLatency::WINDOW;
        assert!(near(latency.estimate(next, Percentile::P99), 2 * MS));
    }

    #[test]
    fn the_estimate_is_the_percentile_of_the_last_completed_window() {
        let start = Instant::now();
        let mut latency = ReadLatency::new();
        // 98 % at 2 ms, 2 % at 50 ms: p99 is slow, p50 fast.
        fill(&mut latency, start, 980, 20);
        let second = start + ReadLatency::WINDOW;
        assert!(near(latency.estimate(second, Percentile::P99), 50 * MS));
        assert!(near(latency.estimate(second, p(5000)), 2 * MS));
        // The next window is all fast: once it completes, p99 follows.
        fill(&mut latency, second, 1000, 0);
        assert!(near(latency.estimate(second, Percentile::P99), 50 * MS));
        let third = second + ReadLatency::WINDOW;
        assert!(near(latency.estimate(third, Percentile::P99), 2 * MS));
    }

    #[test]
    fn a_quiet_window_keeps_the_last_estimate_until_it_has_enough_samples() {
        let start = Instant::now();
        let mut latency = ReadLatency::new();
        fill(&mut latency, start, 200, 0);
        let later = start + ReadLatency::WINDOW;
        fill(&mut latency, later, 0, 10);
        let much_later = later + 10 * ReadLatency::WINDOW;
        assert!(near(latency.estimate(much_later, Percentile::P99), 2 * MS));
        fill(&mut latency, much_later, 0, 90);
        assert!(near(latency.estimate(much_later, Percentile::P99), 50 * MS));
    }

    #[test]
    fn latencies_beyond_a_minute_count_as_a_minute() {
        let start = Instant::now();
        let mut latency = ReadLatency::new();
        for _ in 0..100 {
            latency.record(start, Duration::from_secs(3600));
        }
        let estimate = latency.estimate(start + ReadLatency::WINDOW, Percentile::P99);
        assert!(near(estimate, Duration::from_secs(60)), "{estimate:?}");
    }
}
