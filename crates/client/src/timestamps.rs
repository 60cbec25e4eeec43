//! Client timestamps: what makes a write idempotent, so safe to retry.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Hands out write timestamps in microseconds since the Unix epoch, strictly
/// increasing across every caller of one generator even when the clock
/// stalls or steps back (as Cassandra drivers' monotonic generators do):
/// two writes of one client never tie, and a later one never loses to an
/// earlier one.
#[derive(Debug, Default)]
pub struct TimestampGenerator {
    last: AtomicI64,
}

impl TimestampGenerator {
    /// The next timestamp given the clock reads `now_micros`: `now_micros`,
    /// or one more than the last handed out if that is not below it.
    pub fn next_at(&self, now_micros: i64) -> i64 {
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = now_micros.max(last.saturating_add(1));
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// The next timestamp by the system clock.
    pub fn next(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        self.next_at(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_increase_even_when_the_clock_stalls_or_steps_back() {
        let generator = TimestampGenerator::default();
        assert_eq!(generator.next_at(1000), 1000);
        assert_eq!(generator.next_at(1000), 1001);
        assert_eq!(generator.next_at(900), 1002);
        assert_eq!(generator.next_at(5000), 5000);
    }

    #[test]
    fn concurrent_callers_never_get_the_same_timestamp() {
        let generator = std::sync::Arc::new(TimestampGenerator::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let generator = generator.clone();
                std::thread::spawn(move || {
                    (0..1000).map(|_| generator.next_at(7)).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 4000);
    }
}
