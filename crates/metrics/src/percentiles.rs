//! Latency percentiles from histogram buckets, as nodetool prints them.

use prometheus::Histogram;
use prometheus::core::Metric;

/// The percentiles `proxyhistograms` prints, as fractions.
pub const PERCENTILES: [f64; 5] = [0.50, 0.75, 0.95, 0.98, 0.99];

/// A latency histogram's numbers: how many samples, their sum, and the
/// cumulative count at each bucket's upper bound (seconds), in increasing
/// bound order, the last bound being `+Inf`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Sum of the samples, in seconds.
    pub sum_seconds: f64,
    /// `(upper bound in seconds, samples at or below it)`.
    pub buckets: Vec<(f64, u64)>,
}

impl LatencySummary {
    /// The numbers of `histogram` now.
    pub fn of(histogram: &Histogram) -> LatencySummary {
        LatencySummary::of_all(std::slice::from_ref(histogram))
    }

    /// The numbers of several histograms with the same buckets, merged.
    pub fn of_all(histograms: &[Histogram]) -> LatencySummary {
        let mut merged = LatencySummary::default();
        for histogram in histograms {
            let metric = histogram.metric();
            let h = metric.get_histogram();
            merged.count += h.get_sample_count();
            merged.sum_seconds += h.get_sample_sum();
            let buckets = h.get_bucket();
            if merged.buckets.is_empty() {
                merged.buckets = buckets
                    .iter()
                    .map(|b| (b.upper_bound(), 0))
                    .chain([(f64::INFINITY, 0)])
                    .collect();
            }
            for (slot, bucket) in merged.buckets.iter_mut().zip(buckets) {
                slot.1 += bucket.cumulative_count();
            }
            if let Some(last) = merged.buckets.last_mut() {
                last.1 += h.get_sample_count();
            }
        }
        merged
    }

    /// The upper bound (seconds) of the bucket holding quantile `q` (0 to
    /// 1); `None` without samples. A quantile beyond the last finite bound
    /// is reported as that bound.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let index = self.buckets.iter().position(|&(_, c)| c >= rank)?;
        Some(self.finite_bound(index))
    }

    /// The upper bound of the first bucket with a sample (seconds).
    pub fn min(&self) -> Option<f64> {
        self.percentile(0.0)
    }

    /// The upper bound of the last bucket with a sample (seconds).
    pub fn max(&self) -> Option<f64> {
        self.percentile(1.0)
    }

    /// The mean (seconds); `None` without samples.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_seconds / self.count as f64)
    }

    /// The samples taken after `earlier`, a summary of the same histogram
    /// taken before this one: counts, sum and buckets subtracted. A bucket
    /// layout that differs from `earlier`'s, or counts that went back (a
    /// histogram restarted), leave this summary as it is.
    pub fn since(&self, earlier: &LatencySummary) -> LatencySummary {
        let same_bounds = self.buckets.len() == earlier.buckets.len()
            && self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .all(|(a, b)| a.0 == b.0);
        let went_back = earlier.count > self.count
            || self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .any(|(a, b)| b.1 > a.1);
        if !same_bounds || went_back {
            return self.clone();
        }
        LatencySummary {
            count: self.count - earlier.count,
            sum_seconds: (self.sum_seconds - earlier.sum_seconds).max(0.0),
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(a, b)| (a.0, a.1 - b.1))
                .collect(),
        }
    }

    fn finite_bound(&self, index: usize) -> f64 {
        let bound = self.buckets[index].0;
        if bound.is_finite() {
            return bound;
        }
        self.buckets[..index]
            .iter()
            .rev()
            .map(|&(b, _)| b)
            .next()
            .unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::HistogramOpts;

    fn histogram(samples: &[f64]) -> Histogram {
        let h = Histogram::with_opts(
            HistogramOpts::new("h", "test").buckets(vec![0.001, 0.002, 0.004, 0.008]),
        )
        .unwrap();
        for &s in samples {
            h.observe(s);
        }
        h
    }

    #[test]
    fn percentiles_are_the_bounds_of_the_buckets_holding_them() {
        // 50 samples at 1 ms, 45 at 3 ms, 5 at 7 ms.
        let mut samples = vec![0.0005; 50];
        samples.extend([0.003; 45]);
        samples.extend([0.007; 5]);
        let summary = LatencySummary::of(&histogram(&samples));
        assert_eq!(summary.count, 100);
        assert_eq!(summary.percentile(0.50), Some(0.001));
        assert_eq!(summary.percentile(0.51), Some(0.004));
        assert_eq!(summary.percentile(0.95), Some(0.004));
        assert_eq!(summary.percentile(0.96), Some(0.008));
        assert_eq!(summary.min(), Some(0.001));
        assert_eq!(summary.max(), Some(0.008));
        let mean = summary.mean().unwrap();
        assert!((mean - 0.00195).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn no_samples_have_no_percentiles_and_slow_ones_report_the_last_bound() {
        assert_eq!(LatencySummary::of(&histogram(&[])).percentile(0.5), None);
        assert_eq!(LatencySummary::of(&histogram(&[])).mean(), None);
        let slow = LatencySummary::of(&histogram(&[0.5, 0.0001]));
        assert_eq!(slow.max(), Some(0.008));
        assert_eq!(slow.min(), Some(0.001));
    }

    #[test]
    fn the_samples_since_an_earlier_summary_have_their_own_percentiles() {
        let h = histogram(&[0.0005; 10]);
        let earlier = LatencySummary::of(&h);
        for _ in 0..4 {
            h.observe(0.007);
        }
        let since = LatencySummary::of(&h).since(&earlier);
        assert_eq!(since.count, 4);
        assert_eq!(since.buckets[0], (0.001, 0));
        assert_eq!(since.percentile(0.5), Some(0.008));
        assert!((since.sum_seconds - 0.028).abs() < 1e-9);
        // Nothing new: no samples, no percentiles.
        let now = LatencySummary::of(&h);
        assert_eq!(now.since(&now).percentile(0.5), None);
        // A restarted histogram (counts went back) is taken as it is.
        let restarted = LatencySummary::of(&histogram(&[0.003]));
        assert_eq!(restarted.since(&now), restarted);
    }

    #[test]
    fn merged_histograms_add_their_buckets() {
        let merged = LatencySummary::of_all(&[histogram(&[0.0005]), histogram(&[0.003, 0.003])]);
        assert_eq!(merged.count, 3);
        assert_eq!(merged.buckets[0], (0.001, 1));
        assert_eq!(merged.buckets[2], (0.004, 3));
        assert_eq!(merged.percentile(0.5), Some(0.004));
    }
}
