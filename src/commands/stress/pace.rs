//! The open-loop schedule of `stress --rate R`, as wrk2 and cassandra-stress
//! `-rate fixed=` run it.
//!
//! Without `--rate` each worker sends its next request when the last one is
//! answered (closed loop): a slow server slows the offered load down, and
//! the requests that would have waited meanwhile are never sent, so their
//! latency is never measured (coordinated omission). With `--rate R`,
//! operation `i` of the run is *due* at `start + i / R`, whatever happened
//! before: a worker claims the next operation, waits until it is due (or
//! not at all if it is late already) and sends it, and its latency runs from
//! the due time, not from the send. A stall of the server therefore shows in
//! the latency of every operation that should have been sent during it, as
//! a user arriving at that moment would have seen. `--concurrency` bounds
//! the requests in flight: when all workers are busy, due operations wait,
//! and the wait counts.
//!
//! With `--duration D`, a rated run claims exactly the operations due before
//! D (`R × D` of them).
//!
//! tokio's timer fires on whole milliseconds and rounds a deadline up, so a
//! worker that slept until the due time would send up to 1 ms late, and
//! the client's own delay would be charged to the server (0.5 ms on average,
//! on every operation). [`until_due`] wakes on the tick at or before the
//! due time instead, and an operation sent early is timed from its send:
//! the rate is the same, and no latency is counted that the server did not
//! cause.

use std::str::FromStr;
use std::time::Duration;

use anyhow::anyhow;
use tokio::time::Instant;

/// How early [`until_due`] may wake: just under one tick of tokio's timer.
const TIMER_SLACK: Duration = Duration::from_micros(999);

/// Waits until operation due at `due` may be sent, waking on the timer's
/// tick at or before `due` (at most [`TIMER_SLACK`] early, never late on the
/// timer's account); returns when its latency runs from: `due`, or now if
/// that is earlier.
pub async fn until_due(due: Instant) -> Instant {
    tokio::time::sleep_until(due.checked_sub(TIMER_SLACK).unwrap_or(due)).await;
    due.min(Instant::now())
}

/// A target rate of operations per second: finite and above 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate(f64);

impl Rate {
    /// Operations per second.
    pub fn per_second(self) -> f64 {
        self.0
    }

    /// When operation `index` is due, from the start of the run.
    pub fn due(self, index: u64) -> Duration {
        Duration::from_secs_f64(index as f64 / self.0)
    }
}

impl FromStr for Rate {
    type Err = anyhow::Error;

    /// Operations per second, as `5000` or `2.5e4`.
    fn from_str(text: &str) -> anyhow::Result<Rate> {
        match text.trim().parse::<f64>() {
            Ok(rate) if rate.is_finite() && rate > 0.0 && rate <= 1e9 => Ok(Rate(rate)),
            _ => Err(anyhow!(
                "{text:?} is not a rate: give operations per second, a number above 0 and at \
                 most 1e9 (as --rate 5000)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_due_evenly_from_the_start() {
        let rate: Rate = "1000".parse().unwrap();
        assert_eq!(rate.due(0), Duration::ZERO);
        assert_eq!(rate.due(1), Duration::from_millis(1));
        assert_eq!(rate.due(1500), Duration::from_millis(1500));
        assert_eq!("2.5e3".parse::<Rate>().unwrap().per_second(), 2500.0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_operation_leaves_on_the_tick_at_or_before_it_is_due_and_is_timed_from_its_send() {
        let start = Instant::now();
        for micros in [0, 400, 1_000, 2_500, 7_999, 10_001] {
            let due = start + Duration::from_millis(20) + Duration::from_micros(micros);
            let timed_from = until_due(due).await;
            let now = Instant::now();
            assert!(now <= due, "{micros} µs: woke {:?} late", now - due);
            assert!(
                due - now <= TIMER_SLACK,
                "{micros} µs: woke {:?} early",
                due - now
            );
            assert_eq!(
                timed_from, now,
                "{micros} µs: sent early, so timed from the send"
            );
        }
        // Late already (the workers were all busy): timed from the due time.
        let due = Instant::now() - Duration::from_millis(3);
        assert_eq!(until_due(due).await, due);
    }

    #[test]
    fn bad_rates_are_refused_with_what_is_expected() {
        for bad in ["", "0", "-5", "fast", "inf", "NaN", "1e10", "5k"] {
            let error = format!("{:#}", bad.parse::<Rate>().unwrap_err());
            assert!(error.contains("operations per second"), "{bad}: {error}");
        }
    }
}
