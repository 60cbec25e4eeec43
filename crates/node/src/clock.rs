//! Write timestamps: microseconds since the epoch, strictly increasing per
//! coordinator even when the wall clock stalls or steps back.

use std::sync::atomic::{AtomicI64, Ordering};

use ringstore_storage::Timestamp;

/// Issues strictly increasing timestamps: `max(now, last + 1)`.
#[derive(Debug, Default)]
pub struct TimestampSource {
    last: AtomicI64,
}

impl TimestampSource {
    /// The next timestamp.
    pub fn next(&self) -> Timestamp {
        let now = Timestamp::now().0;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let candidate = now.max(last + 1);
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

    /// Makes sure later timestamps exceed `seen` (a client-supplied one).
    pub fn observe(&self, seen: Timestamp) {
        self.last.fetch_max(seen.0, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Arc;

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
    fn a_future_client_timestamp_pushes_later_ones_past_it() {
        let source = TimestampSource::default();
        let future = Timestamp(Timestamp::now().0 + 60_000_000);
        source.observe(future);
        assert!(source.next() > future);
    }
}
