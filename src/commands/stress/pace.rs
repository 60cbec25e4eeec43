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

use std::str::FromStr;
use std::time::Duration;

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
    type Err = String;

    /// Operations per second, as `5000` or `2.5e4`.
    fn from_str(text: &str) -> Result<Rate, String> {
        match text.trim().parse::<f64>() {
            Ok(rate) if rate.is_finite() && rate > 0.0 && rate <= 1e9 => Ok(Rate(rate)),
            _ => Err(format!(
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

    #[test]
    fn bad_rates_are_refused_with_what_is_expected() {
        for bad in ["", "0", "-5", "fast", "inf", "NaN", "1e10", "5k"] {
            let error = bad.parse::<Rate>().unwrap_err();
            assert!(error.contains("operations per second"), "{bad}: {error}");
        }
    }
}
