//! [`Throttle`]: the token bucket itself (see the crate docs for its design).

use std::time::Duration;

/// How much traffic, in time at the current rate, the bucket holds.
pub const BURST: Duration = Duration::from_millis(100);

/// Micro-bytes per byte.
const MICRO: i128 = 1_000_000;

/// A byte-rate token bucket driven by the caller's clock.
#[derive(Clone, Debug)]
pub struct Throttle {
    /// Bytes per second; `0` = unthrottled.
    rate: u64,
    /// The balance at `updated`, in micro-bytes; negative is debt.
    tokens: i128,
    /// When `tokens` was last brought up to date.
    updated: Duration,
}

impl Throttle {
    /// A throttle at `bytes_per_second` (`0`: unthrottled), with a full bucket at `now`.
    pub fn new(bytes_per_second: u64, now: Duration) -> Throttle {
        let mut throttle = Throttle {
            rate: bytes_per_second,
            tokens: 0,
            updated: now,
        };
        throttle.tokens = throttle.capacity();
        throttle
    }

    /// The current rate in bytes per second; `0` = unthrottled.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Changes the rate from `now` on (see the module docs). Going from
    /// unthrottled to a rate starts with a full bucket.
    pub fn set_rate(&mut self, bytes_per_second: u64, now: Duration) {
        self.refill(now);
        let was_unthrottled = self.rate == 0;
        self.rate = bytes_per_second;
        self.tokens = if was_unthrottled {
            self.capacity()
        } else {
            self.tokens.min(self.capacity())
        };
    }

    /// The earliest time, not before `now`, at which `bytes` may be sent.
    pub fn ready_at(&self, bytes: u64, now: Duration) -> Duration {
        if self.rate == 0 {
            return now;
        }
        let need = micro(bytes).min(self.capacity());
        let have = self.tokens_at(now);
        if have >= need {
            return now;
        }
        // A rate in bytes/s is micro-bytes/µs, so the deficit divided by it is µs.
        let rate = i128::from(self.rate);
        let wait_micros = (need - have + rate - 1) / rate;
        now + Duration::from_micros(u64::try_from(wait_micros).unwrap_or(u64::MAX))
    }

    /// Accounts `bytes` sent at `now` (possibly going into debt).
    pub fn consume(&mut self, bytes: u64, now: Duration) {
        self.refill(now);
        if self.rate != 0 {
            self.tokens = self.tokens.saturating_sub(micro(bytes));
        }
    }

    /// Gives back `bytes` consumed earlier but not sent (a reservation larger
    /// than the send), up to a full bucket.
    pub fn refund(&mut self, bytes: u64, now: Duration) {
        self.refill(now);
        if self.rate != 0 {
            self.tokens = self
                .tokens
                .saturating_add(micro(bytes))
                .min(self.capacity());
        }
    }

    /// The bucket's size in micro-bytes: [`BURST`] at the current rate.
    fn capacity(&self) -> i128 {
        i128::from(self.rate) * BURST.as_micros() as i128
    }

    /// The balance at `now`, without changing anything.
    fn tokens_at(&self, now: Duration) -> i128 {
        let elapsed = now.saturating_sub(self.updated).as_micros();
        let earned =
            i128::from(self.rate).saturating_mul(i128::try_from(elapsed).unwrap_or(i128::MAX));
        self.tokens.saturating_add(earned).min(self.capacity())
    }

    fn refill(&mut self, now: Duration) {
        self.tokens = self.tokens_at(now);
        self.updated = self.updated.max(now);
    }
}

fn micro(bytes: u64) -> i128 {
    i128::from(bytes) * MICRO
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const MS: Duration = Duration::from_millis(1);
    const SECOND: Duration = Duration::from_secs(1);

    /// Sends `chunk`-byte pieces as fast as the throttle allows from `start`
    /// until `total` bytes are out; when the last one went.
    fn send_all(throttle: &mut Throttle, start: Duration, chunk: u64, total: u64) -> Duration {
        let mut now = start;
        let mut sent = 0;
        while sent < total {
            now = throttle.ready_at(chunk, now);
            throttle.consume(chunk, now);
            sent += chunk;
        }
        now
    }

    #[test]
    fn a_full_bucket_allows_a_burst_of_a_hundred_milliseconds_and_no_more() {
        let mut throttle = Throttle::new(MIB, Duration::ZERO);
        let burst = MIB / 10;
        assert_eq!(throttle.ready_at(burst, Duration::ZERO), Duration::ZERO);
        throttle.consume(burst, Duration::ZERO);
        // 1 KiB at 1 MiB/s: 976.6 µs, less the 0.6 bytes left over.
        assert_eq!(
            throttle.ready_at(1024, Duration::ZERO),
            Duration::from_micros(976)
        );
        // A long idle period still refills only 100 ms worth.
        let later = 3600 * SECOND;
        throttle.consume(burst, later);
        assert!(throttle.ready_at(1, later) > later);
    }

    #[test]
    fn a_send_larger_than_the_bucket_waits_for_a_full_bucket_then_goes_into_debt() {
        let mut throttle = Throttle::new(100 * 1024, Duration::ZERO); // bucket: 10 KiB
        assert_eq!(throttle.ready_at(64 * 1024, Duration::ZERO), Duration::ZERO);
        throttle.consume(64 * 1024, Duration::ZERO);
        // 64 KiB taken from a full 10 KiB bucket: the next full bucket is
        // 64 KiB of refill away, 0.64 s.
        assert_eq!(throttle.ready_at(64 * 1024, Duration::ZERO), 640 * MS);
    }

    #[test]
    fn the_rate_holds_over_many_sends() {
        let mut throttle = Throttle::new(MIB, Duration::ZERO);
        let end = send_all(&mut throttle, Duration::ZERO, 4096, 10 * MIB);
        let rate = (10 * MIB) as f64 / end.as_secs_f64();
        assert!((rate / MIB as f64 - 1.0).abs() < 0.02, "{rate} B/s");
    }

    #[test]
    fn a_rate_change_takes_effect_immediately_even_on_a_debt() {
        let mut throttle = Throttle::new(1024, Duration::ZERO);
        throttle.consume(10 * 1024, Duration::ZERO); // 10 s of debt at 1 KiB/s
        assert!(throttle.ready_at(1, Duration::ZERO) > 9 * SECOND);
        throttle.set_rate(1024 * 1024, Duration::ZERO);
        assert!(throttle.ready_at(1, Duration::ZERO) < 20 * MS);
        // Slowing down clips the bucket to 100 ms at the new rate at once.
        throttle.set_rate(1024, 20 * MS);
        throttle.consume(1024, 20 * MS);
        assert!(throttle.ready_at(1, 20 * MS) > 900 * MS);
    }

    #[test]
    fn a_rate_of_zero_is_unthrottled() {
        let mut throttle = Throttle::new(0, Duration::ZERO);
        for _ in 0..1000 {
            throttle.consume(MIB, Duration::ZERO);
        }
        assert_eq!(throttle.ready_at(MIB, Duration::ZERO), Duration::ZERO);
        throttle.set_rate(MIB, SECOND);
        assert_eq!(throttle.ready_at(MIB / 10, SECOND), SECOND);
    }

    #[test]
    fn a_refund_gives_back_a_reservation_but_never_beyond_a_full_bucket() {
        let mut throttle = Throttle::new(MIB, Duration::ZERO);
        throttle.consume(MIB / 10, Duration::ZERO);
        throttle.refund(MIB, Duration::ZERO);
        assert_eq!(throttle.ready_at(MIB / 10, Duration::ZERO), Duration::ZERO);
        throttle.consume(MIB / 10, Duration::ZERO);
        assert!(throttle.ready_at(1, Duration::ZERO) > Duration::ZERO);
    }

    #[test]
    fn time_going_backwards_counts_as_no_time() {
        let mut throttle = Throttle::new(MIB, SECOND);
        throttle.consume(MIB, SECOND);
        let wait = throttle.ready_at(1, SECOND) - SECOND;
        assert_eq!(throttle.ready_at(1, Duration::ZERO), wait);
        throttle.consume(1, Duration::ZERO);
        assert!(throttle.ready_at(1, SECOND) > SECOND + wait);
    }
}
