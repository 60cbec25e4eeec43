//! Deadlines that travel with a request, so that work its waiter gave up on
//! is refused instead of done late.
//!
//! # Why
//! A write the client was told failed may still take effect: that much is
//! allowed (a timed-out write is indeterminate). What must not happen is
//! that it takes effect *with a timestamp later than* a write the same
//! client made afterwards and saw acknowledged. With server-side timestamps
//! that is what a paused coordinator does: the request waits in its socket
//! buffer while the client times out and writes a newer value elsewhere;
//! once the coordinator runs again it reads the old request, stamps it with
//! its clock *now*, and the old value wins. A relative gRPC deadline does
//! not help: the server starts counting it when it reads the request.
//!
//! # What travels
//! - A client request may carry when the client sent it (microseconds
//!   since the epoch by the client's clock: the `x-ringstore-sent-at-micros`
//!   header of a unary call, `sent_at_micros` of a pipelined one) and how
//!   long it waits (the call's `grpc-timeout`, or `timeout_ms`). The two
//!   make a [`ClientDeadline`]. The coordinator checks it just before it
//!   stamps a write ([`ClientDeadline::check`]): past it, the request is
//!   refused with `DEADLINE_EXCEEDED` and nothing is written.
//! - Every replica write a coordinator sends carries when the coordinator
//!   stops waiting for it (`ReplicaMutation.deadline_micros`, by the
//!   coordinator's clock). A replica that reads it later drops it unapplied
//!   ([`replica_write_expired`]), counted (`tpstats`, dropped `MUTATION`),
//!   as Cassandra drops expired mutations; the coordinator has answered by
//!   then and stores a hint instead, which carries no deadline.
//!
//! # Invariants
//! - A write refused here was never stamped: the check runs before the
//!   timestamp is taken, and every mutation of a batch is stamped up front,
//!   so none is stamped later than its request's deadline.
//! - Both checks allow the cluster's clock bound (`max_clock_offset_ms`):
//!   the waiter's clock and the checker's may differ by that much, and a
//!   request should not be refused for an honest skew. So a coordinator
//!   stamps a write no later than deadline + bound by its own clock, and a
//!   write the same client sends more than two bounds after its failure
//!   (its new coordinator's clock may be a bound behind) is stamped later.
//!
//! # Caveats
//! - The client's clock is trusted to within the bound: a client whose
//!   clock runs ahead extends its own window by as much (its requests look
//!   younger); one behind by more than its timeout has every write refused,
//!   and the message says so. Client timestamps (the client library's
//!   default) do not depend on either: a later write of one client always
//!   carries a later timestamp, whichever coordinator is slow.
//! - A request without a sent time, or without a deadline, is not checked.

use std::time::Duration;

use ringstore_proto::SENT_AT_HEADER;
use ringstore_storage::Timestamp;
use tonic::metadata::MetadataMap;

use crate::error::{ExpiredRequest, RequestError, Result};

/// The standard gRPC header of a call's relative deadline.
const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

/// When a client stops waiting for a request: its send time by the
/// client's clock, plus how long it waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientDeadline {
    /// When the client sent the request (µs since the epoch, its clock).
    pub sent_at: Timestamp,
    /// How long it waits for the answer.
    pub timeout: Duration,
}

impl ClientDeadline {
    /// The deadline a unary call's metadata names, if it names both a send
    /// time and a gRPC deadline; a malformed send time is an error (a
    /// malformed `grpc-timeout` is tonic's to refuse, and is ignored here).
    pub fn from_metadata(metadata: &MetadataMap) -> Result<Option<ClientDeadline>> {
        let Some(sent_at) = metadata.get(SENT_AT_HEADER) else {
            return Ok(None);
        };
        let sent_at = sent_at
            .to_str()
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .filter(|&micros| micros > 0)
            .ok_or(RequestError::BadSentAt {
                field: SENT_AT_HEADER,
            })?;
        let timeout = metadata
            .get(GRPC_TIMEOUT_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(parse_grpc_timeout);
        Ok(timeout.map(|timeout| ClientDeadline {
            sent_at: Timestamp(sent_at),
            timeout,
        }))
    }

    /// The deadline a pipelined request's fields name, if both are set.
    pub fn from_fields(
        sent_at_micros: Option<i64>,
        timeout_ms: Option<u32>,
    ) -> Result<Option<ClientDeadline>> {
        let (Some(sent_at), Some(timeout_ms)) = (sent_at_micros, timeout_ms) else {
            return Ok(None);
        };
        if sent_at <= 0 {
            return Err(RequestError::BadSentAt {
                field: "sent_at_micros",
            }
            .into());
        }
        Ok(Some(ClientDeadline {
            sent_at: Timestamp(sent_at),
            timeout: Duration::from_millis(u64::from(timeout_ms)),
        }))
    }

    /// When the client stops waiting, by its clock.
    pub fn expires_at(&self) -> Timestamp {
        Timestamp(self.sent_at.0.saturating_add(micros(self.timeout)))
    }

    /// Refuses (`DEADLINE_EXCEEDED`) a request the node reads at `now` (its
    /// clock) more than `allowance` after the client's deadline.
    pub fn check(&self, now: Timestamp, allowance: Duration) -> Result<()> {
        let late_by = now.0.saturating_sub(self.expires_at().0);
        if late_by <= micros(allowance) {
            return Ok(());
        }
        Err(ExpiredRequest {
            late_by: Duration::from_micros(late_by.unsigned_abs()),
            sent_at_micros: self.sent_at.0,
            timeout: self.timeout,
            allowance,
        }
        .into())
    }
}

/// Whether a replica reading at `now` a mutation whose coordinator stops
/// waiting at `deadline` (its clock) should drop it: more than `allowance`
/// (the clock bound) late.
pub fn replica_write_expired(deadline: Option<i64>, now: Timestamp, allowance: Duration) -> bool {
    deadline.is_some_and(|deadline| now.0.saturating_sub(deadline) > micros(allowance))
}

/// When a coordinator that starts a write at `now` stops waiting for it
/// after `timeout`: the deadline its replica writes carry.
pub fn replica_deadline(now: Timestamp, timeout: Duration) -> i64 {
    now.0.saturating_add(micros(timeout))
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// A `grpc-timeout` value: up to eight digits and a unit (`H`, `M`, `S`,
/// `m`, `u`, `n`), per the gRPC over HTTP/2 specification.
fn parse_grpc_timeout(text: &str) -> Option<Duration> {
    if !text.is_ascii() {
        return None;
    }
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(500);

    fn metadata(pairs: &[(&'static str, &str)]) -> MetadataMap {
        let mut map = MetadataMap::new();
        for (key, value) in pairs {
            map.insert(*key, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn grpc_timeouts_parse_in_every_unit_and_nonsense_does_not() {
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_grpc_timeout("1500m"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_grpc_timeout("9n"), Some(Duration::from_nanos(9)));
        for bad in ["", "S", "123456789S", "12x", "-1S", "1.5S", "٣S", "2٣"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_deadline_needs_both_a_send_time_and_a_timeout() {
        let both = metadata(&[(SENT_AT_HEADER, "1000000"), ("grpc-timeout", "2S")]);
        assert_eq!(
            ClientDeadline::from_metadata(&both).unwrap(),
            Some(ClientDeadline {
                sent_at: Timestamp(1_000_000),
                timeout: Duration::from_secs(2)
            })
        );
        let no_timeout = metadata(&[(SENT_AT_HEADER, "1000000")]);
        assert_eq!(ClientDeadline::from_metadata(&no_timeout).unwrap(), None);
        let no_send_time = metadata(&[("grpc-timeout", "2S")]);
        assert_eq!(ClientDeadline::from_metadata(&no_send_time).unwrap(), None);
        assert_eq!(ClientDeadline::from_fields(Some(5), None).unwrap(), None);
        assert_eq!(
            ClientDeadline::from_fields(Some(5), Some(7)).unwrap(),
            Some(ClientDeadline {
                sent_at: Timestamp(5),
                timeout: Duration::from_millis(7)
            })
        );
    }

    #[test]
    fn a_malformed_send_time_is_refused_with_its_name() {
        for bad in ["soon", "-5", "0", "1e6"] {
            let map = metadata(&[(SENT_AT_HEADER, bad), ("grpc-timeout", "2S")]);
            let error = ClientDeadline::from_metadata(&map).unwrap_err();
            assert!(
                matches!(
                    error,
                    crate::error::NodeError::Request(RequestError::BadSentAt { .. })
                ),
                "{bad}"
            );
            assert!(error.to_string().contains(SENT_AT_HEADER), "{error}");
        }
        assert!(ClientDeadline::from_fields(Some(-1), Some(10)).is_err());
    }

    #[test]
    fn a_request_read_after_its_deadline_and_the_bound_is_refused() {
        let deadline = ClientDeadline {
            sent_at: Timestamp(10_000_000),
            timeout: Duration::from_secs(1),
        };
        assert_eq!(deadline.expires_at(), Timestamp(11_000_000));
        // Read at once, at the deadline, and within the bound after it.
        for now in [10_000_000, 11_000_000, 11_500_000] {
            deadline.check(Timestamp(now), BOUND).unwrap();
        }
        // A client clock ahead of the node's makes it look sent in the
        // future: accepted.
        deadline.check(Timestamp(9_000_000), BOUND).unwrap();
        // Past the bound: refused, as a timeout, saying why.
        let error = deadline.check(Timestamp(11_500_001), BOUND).unwrap_err();
        assert_eq!(error.code(), tonic::Code::DeadlineExceeded, "{error:?}");
        assert!(error.to_string().contains("nothing was written"), "{error}");
        let error = deadline.check(Timestamp(14_000_000), BOUND).unwrap_err();
        assert!(error.to_string().contains("read 3000 ms after"), "{error}");
    }

    #[test]
    fn a_replica_drops_a_mutation_only_past_its_deadline_and_the_bound() {
        let deadline = replica_deadline(Timestamp(1_000_000), Duration::from_secs(2));
        assert_eq!(deadline, 3_000_000);
        assert!(!replica_write_expired(None, Timestamp(i64::MAX), BOUND));
        assert!(!replica_write_expired(
            Some(deadline),
            Timestamp(3_500_000),
            BOUND
        ));
        assert!(replica_write_expired(
            Some(deadline),
            Timestamp(3_500_001),
            BOUND
        ));
        // Huge or hostile values do not overflow.
        assert!(!replica_write_expired(Some(i64::MAX), Timestamp(0), BOUND));
        assert!(replica_write_expired(Some(i64::MIN), Timestamp(0), BOUND));
    }
}
