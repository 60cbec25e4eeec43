//! When a read asks one more replica before its round timer fires:
//! Cassandra's `speculative_retry`, a keyspace setting here.
//!
//! A read waits for the replicas it contacted. One that is slow (a GC
//! pause, a stalled disk, a stopped process) holds the read until the node's
//! round timer (`timeouts.read_ms`, seconds) fires, so a single slow replica
//! sets the read's tail latency. With speculative retry the coordinator,
//! once the read has waited [`SpeculativeRetry::delay`] without finishing,
//! sends one more request to a spare replica; whichever answers complete the
//! level first finish the read. The decision itself is the
//! [`ReadTracker`](crate::ReadTracker)'s (`next_deadline`, `on_timer`); this
//! module only says how long to wait:
//!
//! - `none`: never speculate (a slow replica costs a round timeout).
//! - `N ms` (`20ms`, `20 ms`): after a fixed delay.
//! - `pX` (`p99`, `p99.9`; also Cassandra's `99p` and `99PERCENTILE`):
//!   after the X-th percentile of the keyspace's recent replica read
//!   latency, as the node estimates it ([`ReadLatency`](crate::ReadLatency)).
//!   Until the estimate exists (too few samples), the read does not
//!   speculate.
//!
//! The default, as Cassandra's, is `p99`.
//!
//! # Caveats
//! - No `ALWAYS` (an extra request for every read), and none of Cassandra
//!   4's `MIN(…)`/`MAX(…)` combinations of a percentile and a fixed delay.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{ReplicationError, Result};

/// The longest fixed delay accepted: one minute, longer than any sensible
/// read timeout.
pub const MAX_FIXED_DELAY: Duration = Duration::from_secs(60);

/// A percentile of a latency distribution, in hundredths of a percent:
/// `Percentile(9900)` is p99. Strictly between 0 and 100 %.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Percentile(u16);

impl Percentile {
    /// p99, the default.
    pub const P99: Percentile = Percentile(9900);

    /// The percentile of `hundredths` hundredths of a percent, if strictly
    /// between 0 and 10,000.
    pub fn from_hundredths(hundredths: u16) -> Option<Percentile> {
        (1..10_000)
            .contains(&hundredths)
            .then_some(Percentile(hundredths))
    }

    /// As a quantile, between 0 and 1 (exclusive): p99 is 0.99.
    pub fn quantile(self) -> f64 {
        f64::from(self.0) / 10_000.0
    }
}

impl fmt::Display for Percentile {
    /// `p99`, `p99.9`, `p99.99`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, fraction) = (self.0 / 100, self.0 % 100);
        match fraction {
            0 => write!(f, "p{whole}"),
            f10 if f10 % 10 == 0 => write!(f, "p{whole}.{}", f10 / 10),
            _ => write!(f, "p{whole}.{fraction:02}"),
        }
    }
}

/// When a read sends an extra request to a spare replica. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpeculativeRetry {
    /// Never: a slow replica is replaced only when the round timer fires.
    None,
    /// After this long (at least 1 ms, at most [`MAX_FIXED_DELAY`]).
    Fixed(Duration),
    /// After this percentile of the keyspace's recent replica read latency.
    Percentile(Percentile),
}

impl Default for SpeculativeRetry {
    /// `p99`, as Cassandra's default `99p`.
    fn default() -> SpeculativeRetry {
        SpeculativeRetry::Percentile(Percentile::P99)
    }
}

impl SpeculativeRetry {
    /// How long a read waits before speculating, given `estimate` of a
    /// percentile of recent replica read latency (`None` while unknown);
    /// `None`: it does not speculate.
    pub fn delay(self, estimate: impl FnOnce(Percentile) -> Option<Duration>) -> Option<Duration> {
        match self {
            SpeculativeRetry::None => None,
            SpeculativeRetry::Fixed(delay) => Some(delay),
            SpeculativeRetry::Percentile(p) => estimate(p),
        }
    }

    /// The percentile this setting needs estimated, if any.
    pub fn percentile(self) -> Option<Percentile> {
        match self {
            SpeculativeRetry::Percentile(p) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for SpeculativeRetry {
    /// `none`, `20ms`, `p99`: the form [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpeculativeRetry::None => f.write_str("none"),
            SpeculativeRetry::Fixed(delay) => write!(f, "{}ms", delay.as_millis()),
            SpeculativeRetry::Percentile(p) => p.fmt(f),
        }
    }
}

impl FromStr for SpeculativeRetry {
    type Err = ReplicationError;

    /// `none`; `N ms` or `Nms` (whole milliseconds, 1 to 60,000); `pX`,
    /// `Xp` or `XPERCENTILE` (X above 0 and below 100, at most two
    /// decimals). Case-insensitive; surrounding blanks are ignored.
    fn from_str(text: &str) -> Result<SpeculativeRetry> {
        let invalid = |reason| ReplicationError::InvalidSpeculativeRetry {
            input: text.to_string(),
            reason,
        };
        let lower = text.trim().to_ascii_lowercase();
        if lower == "none" {
            return Ok(SpeculativeRetry::None);
        }
        if let Some(millis) = lower.strip_suffix("ms") {
            let millis: u64 = millis
                .trim()
                .parse()
                .map_err(|_| invalid("the delay must be whole milliseconds"))?;
            let delay = Duration::from_millis(millis);
            if millis == 0 || delay > MAX_FIXED_DELAY {
                return Err(invalid("the delay must be 1 to 60000 ms"));
            }
            return Ok(SpeculativeRetry::Fixed(delay));
        }
        let number = lower
            .strip_prefix('p')
            .or_else(|| lower.strip_suffix("percentile"))
            .or_else(|| lower.strip_suffix('p'))
            .ok_or_else(|| invalid("not none, a delay in ms or a percentile"))?;
        parse_percentile(number.trim())
            .map(SpeculativeRetry::Percentile)
            .ok_or_else(|| {
                invalid("the percentile must be above 0 and below 100, with at most two decimals")
            })
    }
}

/// `99`, `99.9`, `99.99` as a [`Percentile`].
fn parse_percentile(number: &str) -> Option<Percentile> {
    let digits = |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) if digits(fraction) => (whole, fraction),
        Some(_) => return None,
        None => (number, ""),
    };
    if !digits(whole) {
        return None;
    }
    let whole: u16 = whole.parse().ok()?;
    let fraction: u16 = match fraction.len() {
        0 => 0,
        1 => fraction.parse::<u16>().ok()? * 10,
        _ => fraction.parse().ok()?,
    };
    Percentile::from_hundredths(whole * 100 + fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> SpeculativeRetry {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_three_forms_parse_in_ringstore_and_cassandra_spellings() {
        assert_eq!(parse("none"), SpeculativeRetry::None);
        assert_eq!(parse(" NONE "), SpeculativeRetry::None);
        assert_eq!(
            parse("20ms"),
            SpeculativeRetry::Fixed(Duration::from_millis(20))
        );
        assert_eq!(
            parse("20 ms"),
            SpeculativeRetry::Fixed(Duration::from_millis(20))
        );
        assert_eq!(parse("p99"), SpeculativeRetry::default());
        assert_eq!(parse("99p"), SpeculativeRetry::default());
        assert_eq!(parse("99PERCENTILE"), SpeculativeRetry::default());
        assert_eq!(
            parse("p99.9"),
            SpeculativeRetry::Percentile(Percentile::from_hundredths(9990).unwrap())
        );
        assert_eq!(
            parse("p50.25"),
            SpeculativeRetry::Percentile(Percentile::from_hundredths(5025).unwrap())
        );
    }

    #[test]
    fn display_reads_back_as_the_same_setting() {
        for text in [
            "none", "1ms", "60000ms", "p99", "p99.9", "p99.99", "p1", "p50.05",
        ] {
            assert_eq!(parse(text).to_string(), text);
            assert_eq!(parse(&parse(text).to_string()), parse(text));
        }
    }

    #[test]
    fn bad_settings_are_invalid_requests_that_say_what_is_wrong() {
        for bad in [
            "",
            "fast",
            "0ms",
            "-5ms",
            "1.5ms",
            "60001ms",
            "msms",
            "p",
            "p0",
            "p100",
            "p-1",
            "p99.999",
            "pabc",
            "abcpercentile",
            "p 9 9",
            "p1e2",
            "99.p",
        ] {
            let error = bad.parse::<SpeculativeRetry>().expect_err(bad);
            assert!(error.is_invalid_request(), "{bad}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("{bad:?}")) && message.contains("p99"),
                "{bad}: {message}"
            );
        }
    }

    #[test]
    fn the_delay_is_fixed_estimated_or_absent() {
        let estimate = |p: Percentile| (p == Percentile::P99).then(|| Duration::from_millis(7));
        assert_eq!(SpeculativeRetry::None.delay(estimate), None);
        assert_eq!(
            SpeculativeRetry::Fixed(Duration::from_millis(3)).delay(estimate),
            Some(Duration::from_millis(3))
        );
        assert_eq!(
            SpeculativeRetry::default().delay(estimate),
            Some(Duration::from_millis(7))
        );
        let p50 = SpeculativeRetry::Percentile(Percentile::from_hundredths(5000).unwrap());
        assert_eq!(p50.delay(estimate), None);
    }
}
