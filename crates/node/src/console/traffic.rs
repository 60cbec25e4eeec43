//! The traffic history behind `GET /api/v1/traffic`: the coordinator's
//! cumulative read and write histograms, sampled every
//! [`SAMPLE_EVERY`] by the console's shell, kept for the last
//! [`KEPT_INTERVALS`] intervals, and turned into one point per interval
//! (requests per second, p50 and p99) by subtracting consecutive samples.
//!
//! It is sans-IO: samples are given, with the time they were taken, and
//! nothing here sleeps or reads a clock, so tests feed it made-up samples.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::time::Duration;

use ringstore_metrics::LatencySummary;

use crate::console::api::TrafficPoint;

/// How often the console's shell samples the node's histograms.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// How many intervals the history keeps: 10 minutes of 5-second ones.
pub const KEPT_INTERVALS: NonZeroUsize = NonZeroUsize::new(120).expect("not zero");

/// The coordinator's cumulative histograms at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrafficSample {
    /// When it was taken, as time since the node started.
    pub at: Duration,
    /// Coordinated reads since the node started.
    pub reads: LatencySummary,
    /// Coordinated writes since the node started.
    pub writes: LatencySummary,
}

/// The last samples, oldest first: at most `kept + 1` of them, which make
/// `kept` intervals.
#[derive(Clone, Debug)]
pub struct TrafficHistory {
    kept: NonZeroUsize,
    samples: VecDeque<TrafficSample>,
}

impl Default for TrafficHistory {
    fn default() -> TrafficHistory {
        TrafficHistory::new(KEPT_INTERVALS)
    }
}

impl TrafficHistory {
    /// An empty history that keeps the last `kept` intervals.
    pub fn new(kept: NonZeroUsize) -> TrafficHistory {
        TrafficHistory {
            kept,
            samples: VecDeque::with_capacity(kept.get() + 1),
        }
    }

    /// Adds `sample`, forgetting the oldest beyond what is kept. A sample
    /// not later than the last one is ignored (returns false): intervals
    /// must have a length.
    pub fn record(&mut self, sample: TrafficSample) -> bool {
        if self.samples.back().is_some_and(|last| sample.at <= last.at) {
            return false;
        }
        self.samples.push_back(sample);
        while self.samples.len() > self.kept.get() + 1 {
            self.samples.pop_front();
        }
        true
    }

    /// One point per interval between consecutive samples, oldest first,
    /// each placed by how long before `now` (time since the node started)
    /// its interval ended.
    pub fn points(&self, now: Duration) -> Vec<TrafficPoint> {
        self.samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .map(|(before, after)| point(before, after, now))
            .collect()
    }
}

/// The requests between `before` and `after`.
fn point(before: &TrafficSample, after: &TrafficSample, now: Duration) -> TrafficPoint {
    // `record` keeps samples strictly increasing in time.
    let seconds = after.at.saturating_sub(before.at).as_secs_f64();
    let reads = after.reads.since(&before.reads);
    let writes = after.writes.since(&before.writes);
    let millis = |summary: &LatencySummary, q: f64| summary.percentile(q).map(|s| s * 1e3);
    TrafficPoint {
        seconds_ago: now.saturating_sub(after.at).as_secs_f64(),
        interval_seconds: seconds,
        reads_per_second: reads.count as f64 / seconds,
        writes_per_second: writes.count as f64 / seconds,
        read_p50_ms: millis(&reads, 0.50),
        read_p99_ms: millis(&reads, 0.99),
        write_p50_ms: millis(&writes, 0.50),
        write_p99_ms: millis(&writes, 0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cumulative summary with buckets at 1, 2, 4 and 8 ms holding
    /// `per_bucket` samples each so far.
    fn summary(per_bucket: [u64; 4]) -> LatencySummary {
        let bounds = [0.001, 0.002, 0.004, 0.008, f64::INFINITY];
        let mut cumulative = 0;
        let buckets = bounds
            .iter()
            .enumerate()
            .map(|(i, &bound)| {
                cumulative += per_bucket.get(i).copied().unwrap_or(0);
                (bound, cumulative)
            })
            .collect();
        LatencySummary {
            count: cumulative,
            sum_seconds: 0.0,
            buckets,
        }
    }

    fn sample(at_seconds: u64, reads: [u64; 4], writes: [u64; 4]) -> TrafficSample {
        TrafficSample {
            at: Duration::from_secs(at_seconds),
            reads: summary(reads),
            writes: summary(writes),
        }
    }

    #[test]
    fn each_interval_has_its_own_rate_and_percentiles() {
        let mut history = TrafficHistory::default();
        assert!(history.points(Duration::from_secs(1)).is_empty());
        history.record(sample(0, [0; 4], [0; 4]));
        assert!(history.points(Duration::from_secs(1)).is_empty());
        // 0–5 s: 50 reads at ≤1 ms, 10 writes at ≤4 ms.
        history.record(sample(5, [50, 0, 0, 0], [0, 0, 10, 0]));
        // 5–10 s: 100 more reads, 98 at ≤2 ms and 2 at ≤8 ms; no writes.
        history.record(sample(10, [50, 98, 0, 2], [0, 0, 10, 0]));
        let points = history.points(Duration::from_secs(12));
        assert_eq!(points.len(), 2);
        let first = &points[0];
        assert_eq!(first.seconds_ago, 7.0);
        assert_eq!(first.interval_seconds, 5.0);
        assert_eq!(first.reads_per_second, 10.0);
        assert_eq!(first.writes_per_second, 2.0);
        assert_eq!(first.read_p50_ms, Some(1.0));
        assert_eq!(first.write_p99_ms, Some(4.0));
        let second = &points[1];
        assert_eq!(second.seconds_ago, 2.0);
        assert_eq!(second.reads_per_second, 20.0);
        assert_eq!(second.read_p50_ms, Some(2.0));
        assert_eq!(second.read_p99_ms, Some(8.0));
        assert_eq!(second.writes_per_second, 0.0);
        assert_eq!(second.write_p50_ms, None, "no writes, no percentile");
    }

    #[test]
    fn only_the_last_intervals_are_kept() {
        let mut history = TrafficHistory::new(NonZeroUsize::new(3).unwrap());
        for i in 0..10 {
            assert!(history.record(sample(i * 5, [i, 0, 0, 0], [0; 4])));
        }
        let points = history.points(Duration::from_secs(45));
        assert_eq!(points.len(), 3);
        let ages: Vec<f64> = points.iter().map(|p| p.seconds_ago).collect();
        assert_eq!(ages, [10.0, 5.0, 0.0]);
        // One read per interval of 5 s.
        assert!(points.iter().all(|p| p.reads_per_second == 0.2));
    }

    #[test]
    fn a_sample_no_later_than_the_last_is_ignored() {
        let mut history = TrafficHistory::default();
        assert!(history.record(sample(5, [1, 0, 0, 0], [0; 4])));
        assert!(!history.record(sample(5, [9, 0, 0, 0], [0; 4])));
        assert!(!history.record(sample(4, [9, 0, 0, 0], [0; 4])));
        assert!(history.record(sample(10, [3, 0, 0, 0], [0; 4])));
        let points = history.points(Duration::from_secs(10));
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].reads_per_second, 0.4);
    }

    #[test]
    fn a_now_before_the_last_sample_places_it_at_zero() {
        let mut history = TrafficHistory::default();
        history.record(sample(5, [0; 4], [0; 4]));
        history.record(sample(10, [0; 4], [0; 4]));
        assert_eq!(history.points(Duration::from_secs(3))[0].seconds_ago, 0.0);
    }
}
