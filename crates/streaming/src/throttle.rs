//! The node-wide stream throttle: one token bucket
//! ([`ringstore_throttle::Throttle`]) shared by every range a node sends,
//! with the tokio clock and sleeps around it.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ringstore_throttle::Throttle;
use tokio::time::Instant;

/// A MiB in bytes.
const MIB: u64 = 1 << 20;
/// The longest a sender sleeps before looking at the rate again, so a
/// runtime change reaches streams that are waiting well within a second.
const RECHECK: Duration = Duration::from_millis(100);

/// A byte-rate limit shared by the node's outgoing streams.
pub struct StreamThrottle {
    started: Instant,
    bucket: Mutex<Throttle>,
}

impl StreamThrottle {
    /// A throttle of `mib_per_sec` MiB/s (`0`: unthrottled).
    pub fn new(mib_per_sec: u64) -> StreamThrottle {
        StreamThrottle {
            started: Instant::now(),
            bucket: Mutex::new(Throttle::new(mib_per_sec * MIB, Duration::ZERO)),
        }
    }

    /// The rate in MiB/s (`0`: unthrottled).
    pub fn mib_per_sec(&self) -> u64 {
        self.lock().rate() / MIB
    }

    /// Changes the rate at once; returns the previous one (MiB/s).
    pub fn set_mib_per_sec(&self, mib_per_sec: u64) -> u64 {
        let now = self.now();
        let mut bucket = self.lock();
        let previous = bucket.rate() / MIB;
        bucket.set_rate(mib_per_sec * MIB, now);
        previous
    }

    /// Waits until `bytes` may be sent, and accounts them.
    pub async fn acquire(&self, bytes: u64) {
        loop {
            let now = self.now();
            let ready = {
                let mut bucket = self.lock();
                let ready = bucket.ready_at(bytes, now);
                if ready <= now {
                    bucket.consume(bytes, now);
                    return;
                }
                ready
            };
            let wait = (ready - now).min(RECHECK);
            tokio::time::sleep_until(Instant::now() + wait).await;
        }
    }

    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.bucket.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `total` bytes in `chunk`-byte pieces; the seconds it took.
    async fn send(throttle: &StreamThrottle, total: u64, chunk: u64) -> f64 {
        let start = Instant::now();
        let mut sent = 0;
        while sent < total {
            throttle.acquire(chunk).await;
            sent += chunk;
        }
        start.elapsed().as_secs_f64()
    }

    #[tokio::test(start_paused = true)]
    async fn holds_the_rate_over_64_mib() {
        let throttle = StreamThrottle::new(16);
        let seconds = send(&throttle, 64 * MIB, 256 * 1024).await;
        let rate = 64.0 / seconds;
        assert!((rate - 16.0).abs() / 16.0 < 0.05, "{rate:.2} MiB/s");
    }

    #[tokio::test(start_paused = true)]
    async fn a_runtime_change_takes_effect_within_a_second() {
        let throttle = std::sync::Arc::new(StreamThrottle::new(1));
        let sender = throttle.clone();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = sent.clone();
        let task = tokio::spawn(async move {
            loop {
                sender.acquire(64 * 1024).await;
                counter.fetch_add(64 * 1024, std::sync::atomic::Ordering::Relaxed);
            }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(throttle.set_mib_per_sec(8), 1);
        // Within one second of the change the new rate applies.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = sent.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(4)).await;
        let after = sent.load(std::sync::atomic::Ordering::Relaxed);
        task.abort();
        let rate = (after - before) as f64 / 4.0 / MIB as f64;
        assert!((rate - 8.0).abs() / 8.0 < 0.05, "{rate:.2} MiB/s");
        assert_eq!(throttle.mib_per_sec(), 8);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_means_unthrottled() {
        let throttle = StreamThrottle::new(0);
        let seconds = send(&throttle, 1024 * MIB, MIB).await;
        assert!(seconds < 0.001);
    }
}
